"""The ``[tokenizer]`` metadata table: a model's tokenizer stored in a ``.fifu`` file.

A :class:`~finalfusion.vocab.TokenizerVocab` is written as an ordinary
``SimpleVocab`` chunk (every finalfusion reader can load the file); its
tokenizer travels in the metadata as the table :func:`tokenizer_table`
builds -- ``kind``, ``encoding``, ``bytes`` and ``model``, the serialised
model compressed with zlib and base64-encoded into one TOML string (a long
TOML array would take seconds to parse) -- and :func:`tokenizer_from_table`
rebuilds it, checking the table before it inflates at most
:data:`MAX_TOKENIZER_BYTES` bytes.
"""

from __future__ import annotations

import base64
import binascii
import zlib
from collections.abc import Mapping
from typing import Any

from finalfusion._tokenizers import Tokenizer
from finalfusion.errors import FormatError

__all__ = ["MAX_TOKENIZER_BYTES", "METADATA_KEY", "tokenizer_from_table", "tokenizer_table"]

#: Metadata key of the table that stores the tokenizer in a ``.fifu`` file.
METADATA_KEY: str = "tokenizer"
#: Largest decompressed serialised tokenizer accepted from a file (bytes).
MAX_TOKENIZER_BYTES: int = 1 << 30


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


def tokenizer_from_table(table: Any, where: str = "metadata [tokenizer]") -> Tokenizer:
    """Rebuild the tokenizer stored by :func:`tokenizer_table`.

    Raises
    ------
    FormatError
        If the table is malformed (wrong kind, bad base64 or zlib data, wrong size).

    Examples
    --------
    >>> tokenizer_from_table({"kind": "sentencepiece", "model": "!!"})  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    finalfusion.errors.FormatError: metadata [tokenizer]: the tokenizer model is not valid base64 of zlib data: ...
    """
    if not isinstance(table, Mapping):
        raise FormatError("the tokenizer entry is not a table", chunk=where, expected="a table with kind and model", found=type(table).__name__)
    kind, model = table.get("kind"), table.get("model")
    if kind not in Tokenizer._KINDS:
        raise FormatError("unknown tokenizer kind", chunk=where, expected=f"one of {Tokenizer.kinds()}", found=kind)
    if not isinstance(model, str):
        raise FormatError("the tokenizer model is missing", chunk=where, expected="a base64 string", found=type(model).__name__)
    declared = table.get("bytes")
    try:
        packed = base64.b64decode(model.encode("ascii"), validate=True)
        inflater = zlib.decompressobj()
        data = inflater.decompress(packed, MAX_TOKENIZER_BYTES)
        if inflater.unconsumed_tail:
            raise FormatError("the tokenizer model is too large", chunk=where, expected=f"at most {MAX_TOKENIZER_BYTES} bytes", found="more")
        if not inflater.eof:
            raise zlib.error("incomplete stream")
    except (binascii.Error, UnicodeEncodeError, zlib.error, ValueError) as exc:
        if isinstance(exc, FormatError):
            raise
        raise FormatError("the tokenizer model is not valid base64 of zlib data", chunk=where, expected="zlib+base64", found=str(exc)) from None
    if declared is not None and declared != len(data):
        raise FormatError("the tokenizer model has the wrong size", chunk=where, expected=f"{declared} bytes", found=f"{len(data)} bytes")
    return Tokenizer.from_bytes(kind, data)
