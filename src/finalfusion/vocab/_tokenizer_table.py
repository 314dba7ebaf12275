"""The ``[tokenizer]`` metadata table: a model's tokenizer stored in a ``.fifu`` file.

A :class:`~finalfusion.vocab.TokenizerVocab` is written as an ordinary
``SimpleVocab`` chunk (every finalfusion reader can load the file); its
tokenizer travels in the metadata as the table :func:`tokenizer_table`
builds -- ``kind``, ``encoding``, ``bytes`` and ``model``, the serialised
model compressed with zlib and base64-encoded into one TOML string (a long
TOML array would take seconds to parse) -- and :func:`tokenizer_from_table`
rebuilds it, checking every field by type and inflating no more than the
declared size, itself at most :data:`finalfusion.limits.MAX_TOKENIZER_BYTES`.
"""

from __future__ import annotations

import base64
import binascii
import zlib
from collections.abc import Mapping
from typing import Any

from finalfusion import limits
from finalfusion._tokenizers import Tokenizer
from finalfusion.errors import FormatError

__all__ = ["METADATA_KEY", "is_tokenizer_table", "tokenizer_from_table", "tokenizer_table"]

#: Metadata key of the table that stores the tokenizer in a ``.fifu`` file.
METADATA_KEY: str = "tokenizer"


def tokenizer_table(tokenizer: Tokenizer) -> dict[str, Any]:
    """The metadata table that stores ``tokenizer`` in a ``.fifu`` file.

    ``kind`` names the serialised form; ``model`` is the base64 of the
    zlib-compressed :meth:`~finalfusion.vocab.Tokenizer.to_bytes` as one string (a long TOML
    array would take seconds to parse).

    Examples
    --------
    >>> from finalfusion.vocab import HuggingFaceTokenizer
    >>> table = tokenizer_table(HuggingFaceTokenizer('{"model": {}}'))
    >>> table["kind"], tokenizer_from_table(table).to_bytes()
    ('huggingface', b'{"model": {}}')
    """
    data = tokenizer.to_bytes()
    return {
        "kind": tokenizer.kind,
        "encoding": "zlib+base64",
        "bytes": len(data),
        "model": base64.b64encode(zlib.compress(data, 9)).decode("ascii"),
    }


def is_tokenizer_table(value: Any) -> bool:
    """Whether a metadata value under :data:`METADATA_KEY` is this library's table (a table with ``kind`` and ``model``).

    Anything else under the key is the user's own metadata (files written
    before the key was reserved stay readable).

    Examples
    --------
    >>> is_tokenizer_table({"kind": "huggingface", "model": "eJw="}), is_tokenizer_table("gpt2")
    (True, False)
    """
    return isinstance(value, Mapping) and "kind" in value and "model" in value


def tokenizer_from_table(table: Any, where: str = "metadata [tokenizer]") -> Tokenizer:
    """Rebuild the tokenizer stored by :func:`tokenizer_table`.

    Every field is checked by type before it is used; the model is inflated
    only if the declared ``bytes`` is at most
    :data:`finalfusion.limits.MAX_TOKENIZER_BYTES`, and inflating stops one
    byte past the declared size (a zlib bomb costs no more than it declares).

    Raises
    ------
    FormatError
        If the table is malformed (a field of the wrong type, an unknown kind
        or encoding, bad base64 or zlib data, a size past the limit or other
        than declared).

    Examples
    --------
    >>> tokenizer_from_table({"kind": "sentencepiece", "bytes": 2, "model": "!!"})  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    finalfusion.errors.FormatError: metadata [tokenizer]: the tokenizer model is not valid base64 of zlib data: ...
    """
    if not isinstance(table, Mapping):
        raise FormatError("the tokenizer entry is not a table", chunk=where, expected="a table with kind and model", found=type(table).__name__)
    kind, model, encoding, declared = table.get("kind"), table.get("model"), table.get("encoding", "zlib+base64"), table.get("bytes")
    if not isinstance(kind, str) or kind not in Tokenizer.kinds():
        raise FormatError(
            "unknown tokenizer kind", chunk=where, expected=f"one of {Tokenizer.kinds()}", found=kind if isinstance(kind, str) else type(kind).__name__
        )
    if encoding != "zlib+base64":
        raise FormatError(
            "unknown tokenizer encoding", chunk=where, expected="zlib+base64", found=encoding if isinstance(encoding, str) else type(encoding).__name__
        )
    if not isinstance(model, str):
        raise FormatError("the tokenizer model is missing", chunk=where, expected="a base64 string", found=type(model).__name__)
    limit = limits.MAX_TOKENIZER_BYTES
    if not isinstance(declared, int) or isinstance(declared, bool) or declared < 0:
        raise FormatError("the tokenizer model's size is missing", chunk=where, expected="bytes = the inflated size (an integer)", found=repr(declared)[:40])
    if declared > limit:
        raise FormatError(
            "the tokenizer model is too large",
            chunk=where,
            expected=f"at most finalfusion.limits.MAX_TOKENIZER_BYTES = {limit} bytes",
            found=f"{declared} bytes declared",
        )
    try:
        packed = base64.b64decode(model.encode("ascii"), validate=True)
        inflater = zlib.decompressobj()
        data = inflater.decompress(packed, declared + 1)
        if not inflater.eof and not inflater.unconsumed_tail:
            raise zlib.error("incomplete stream")
    except (binascii.Error, UnicodeEncodeError, zlib.error, ValueError) as exc:
        raise FormatError("the tokenizer model is not valid base64 of zlib data", chunk=where, expected="zlib+base64", found=str(exc)) from None
    if len(data) != declared:
        found = f"more than {declared} bytes" if len(data) > declared else f"{len(data)} bytes"
        raise FormatError("the tokenizer model has the wrong size", chunk=where, expected=f"{declared} bytes", found=found)
    return Tokenizer.from_bytes(kind, data)
