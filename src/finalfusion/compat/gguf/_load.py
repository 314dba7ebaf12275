"""Loading a GGUF file's token-embedding table, vocabulary and tokenizer as embeddings."""

from __future__ import annotations

import mmap as _mmap
import sys
from typing import Any, Final

import numpy as np

from finalfusion._source import Source, sized_or_stream
from finalfusion._tokenizers import Tokenizer
from finalfusion.compat._build import checked_norms
from finalfusion.compat.gguf._ggml import decode_tensor, matrix_shape
from finalfusion.compat.gguf._layout import FORMAT, GGUFFile, GGUFTensor
from finalfusion.compat.gguf._reader import find_tensor, read_gguf, read_stream
from finalfusion.compat.gguf._source_keys import ELEMENT_TYPES, carried_arrays
from finalfusion.compat.gguf._tokenizer import gguf_tokenizer
from finalfusion.embeddings import Embeddings
from finalfusion.errors import FormatError
from finalfusion.metadata import Metadata
from finalfusion.storage import NdArray
from finalfusion.vocab import SimpleVocab, Vocab
from finalfusion.vocab.tokenizer import TokenizerVocab

__all__ = ["TOKENIZER_KEYS", "TOKENIZER_KV", "load_gguf", "tokenizer_keys"]


def load_gguf(file: Source, *, tensor: str = "token_embd.weight", normalize: bool = True, mmap: bool = False) -> Embeddings:
    """Load the token-embedding table of a GGUF model as embeddings.

    Parameters
    ----------
    file
        A :data:`finalfusion.Source`: a path, a file descriptor, the file's
        contents as ``bytes``, or a binary file object; gzip-compressed data
        is decompressed. A regular file is mapped, so
        only the header and the one tensor are read. An input of unknown
        size (gzip, a pipe, a file object without a descriptor) is read up
        to the end of the tensor data and no further, its header within
        :data:`finalfusion.limits.MAX_MODEL_HEADER_BYTES`.
    tensor
        The tensor to load (default: llama.cpp's input embeddings).
    normalize
        l2-normalise the rows and keep their norms (like the other
        loaders); ``False`` keeps them as stored.
    mmap
        For an ``F32`` table in a little-endian file given by path: make the
        storage a read-only zero-copy view of the file (needs
        ``normalize=False``; the rows are used as stored). Other tables are
        decoded into memory either way.

    Returns
    -------
    Embeddings
        With a :class:`~finalfusion.vocab.TokenizerVocab` when the file
        describes a ``llama``, ``t5``, ``gpt2``, ``bert`` or ``gemma4``
        tokenizer (or has ``tokenizer.huggingface.json``), else a
        ``SimpleVocab``; the
        metadata's ``[gguf]`` table records where the table came from and,
        in ``tokenizer_keys`` and ``tokenizer_kv``, the file's ``tokenizer.*``
        keys that :func:`~finalfusion.compat.gguf.write_gguf` writes back
        (with the token types and scores a ``bert``, ``gemma4`` or padded
        SentencePiece tokenizer cannot hold, run-length encoded).
        A ``llama``/``t5`` tokenizer's ``ModelProto`` is serialised on first
        need (an unknown word, a write, a pickle), not while loading.

    Raises
    ------
    FormatError
        For malformed files (naming what was expected and found and the offset),
        a missing tensor, or a token list that does not match the table.
    MissingExtraError
        For a quantization type that needs the ``gguf`` package when it is not installed.
    ValueError
        For ``mmap=True`` with ``normalize=True`` on a table that can be mapped.

    Examples
    --------
    >>> import io
    >>> from finalfusion.compat.gguf import write_gguf
    >>> from finalfusion.storage import NdArray
    >>> emb = Embeddings(NdArray(np.array([[3, 4], [0, 2]], dtype=np.float32)), SimpleVocab(["a", "b"]))
    >>> buf = io.BytesIO(); write_gguf(buf, emb)
    >>> loaded = load_gguf(buf.getvalue())
    >>> loaded["a"].tolist(), loaded.norms.norms.tolist(), loaded.metadata["gguf"]["type"]
    ([0.6000000238418579, 0.800000011920929], [5.0, 2.0], 'F32')
    """
    with sized_or_stream(file) as (_, buf, stream):
        if stream is not None:
            head, info = read_stream(stream, tensor)
        else:
            head = read_gguf(buf)
            info = find_tensor(head, tensor)
    buf = head.buffer
    rows, dims = matrix_shape(info)
    tokens = head.kv.get("tokenizer.ggml.tokens")
    if tokens is None:
        raise FormatError("no vocabulary (tokenizer.ggml.tokens)", chunk=FORMAT, expected="tokenizer.ggml.tokens", found=sorted(head.kv)[:20])
    if not isinstance(tokens, list):  # the header parser accepts tokenizer.ggml.tokens only as an array of strings (KEY_TYPES)
        raise FormatError("tokenizer.ggml.tokens is not a list of strings", chunk=FORMAT, expected="an array of strings", found=type(tokens).__name__)
    if len(tokens) != rows:
        raise FormatError(
            f"the vocabulary does not match tensor {tensor}", chunk=FORMAT, expected=f"{rows} tokens (one per row)", found=f"{len(tokens)} tokens"
        )
    tokenizer = gguf_tokenizer(head.kv, tokens)
    vocab = _vocab(tokens, tokenizer)
    zero_copy = mmap and info.type_name == "F32" and head.byte_order == "<" and isinstance(buf, _mmap.mmap)
    norms = None
    if zero_copy:
        if normalize:
            raise ValueError("mmap=True maps the F32 table as stored: pass normalize=False (or mmap=False to normalise a copy)")
        matrix = np.frombuffer(buf, dtype="<f4", count=rows * dims, offset=info.offset).reshape(rows, dims)
    else:
        if info.type_name == "F32" and head.byte_order == "<" and isinstance(buf, bytearray) and sys.byteorder == "little":
            matrix = np.frombuffer(buf, dtype=np.float32, count=rows * dims).reshape(rows, dims)  # a stream's private bytes: no copy
        else:
            matrix = decode_tensor(head, info)
        if normalize:
            norms = checked_norms(matrix, tokens, "GGUF token", 0)
    metadata = Metadata({"gguf": _provenance(head, info)})
    return Embeddings(NdArray(matrix), vocab, norms=norms, metadata=metadata)


def _vocab(tokens: list[str], tokenizer: Tokenizer | None) -> Vocab:
    try:
        return SimpleVocab(tokens) if tokenizer is None else TokenizerVocab(tokens, tokenizer)
    except ValueError as exc:
        raise FormatError("the token list has duplicates", chunk=FORMAT, expected="distinct tokens", found=str(exc)) from None


def _provenance(head: GGUFFile, info: GGUFTensor) -> dict[str, Any]:
    out: dict[str, Any] = {"version": head.version, "byte_order": "little" if head.byte_order == "<" else "big", "tensor": info.name, "type": info.type_name}
    for key, name in (
        ("general.architecture", "architecture"),
        ("general.name", "name"),
        ("general.file_type", "file_type"),
        ("tokenizer.ggml.model", "tokenizer"),
    ):
        v = head.kv.get(key)
        if isinstance(v, (str, int)) and not isinstance(v, bool):
            out[name] = v
    names = [k for k in head.kv if k.startswith("tokenizer.")]
    if set(names) - {"tokenizer.ggml.model", "tokenizer.ggml.tokens"}:
        out[TOKENIZER_KEYS] = names
        carried = tokenizer_keys(head.kv) | carried_arrays(head.kv)
        if carried:
            out[TOKENIZER_KV] = carried
    return out


#: The provenance entry that carries the source's other ``tokenizer.*`` keys to :func:`~finalfusion.compat.gguf.write_gguf`.
TOKENIZER_KV: Final = "tokenizer_kv"
#: The provenance entry naming all the source's ``tokenizer.*`` keys, in order (``write_gguf`` writes these and no others).
TOKENIZER_KEYS: Final = "tokenizer_keys"
#: ``tokenizer.*`` keys not carried: ``write_gguf`` writes them from the vocabulary and its tokenizer.
REBUILT: Final = frozenset(
    {
        "tokenizer.ggml.model",
        "tokenizer.ggml.tokens",
        "tokenizer.ggml.scores",
        "tokenizer.ggml.token_type",
        "tokenizer.ggml.merges",
        "tokenizer.ggml.precompiled_charsmap",
        "tokenizer.huggingface.json",
    }
)
#: Longest array carried (a longer one is left out: it would swell every ``.fifu`` written with the metadata).
MAX_CARRIED_ITEMS: Final = 1 << 16


def tokenizer_keys(kv: dict[str, Any]) -> dict[str, Any]:
    """The ``tokenizer.*`` keys of a GGUF header that the vocabulary does not rebuild, as TOML values.

    Scalars, strings and lists of strings are kept as they are; a numeric
    array as ``{"type": element type, "values": [...]}``. Nested arrays,
    integers TOML cannot hold (beyond int64) and arrays longer than
    :data:`MAX_CARRIED_ITEMS` are left out.

    Examples
    --------
    >>> tokenizer_keys({"tokenizer.ggml.pre": "gemma", "tokenizer.ggml.tokens": ["a"], "general.name": "x",
    ...                 "tokenizer.ggml.add_bos_token": True, "tokenizer.x": np.array([1, 2], dtype=np.int16)})
    {'tokenizer.ggml.pre': 'gemma', 'tokenizer.ggml.add_bos_token': True, 'tokenizer.x': {'type': 'int16', 'values': [1, 2]}}
    """
    out: dict[str, Any] = {}
    for key, value in kv.items():
        if not key.startswith("tokenizer.") or key in REBUILT:
            continue
        if isinstance(value, (bool, float, str)) or (isinstance(value, int) and -(1 << 63) <= value < 1 << 63):
            out[key] = value
        elif isinstance(value, list) and len(value) <= MAX_CARRIED_ITEMS and all(isinstance(v, str) for v in value):
            out[key] = list(value)
        elif isinstance(value, np.ndarray) and value.ndim == 1 and len(value) <= MAX_CARRIED_ITEMS and value.dtype in ELEMENT_TYPES:
            values = value.tolist()
            if value.dtype != np.uint64 or not values or max(values) < 1 << 63:
                out[key] = {"type": ELEMENT_TYPES[value.dtype], "values": values}
    return out
