"""Writing embeddings as a GGUF v3 file (little-endian) with the tokenizer in the standard keys."""

from __future__ import annotations

import struct
from typing import Any

import numpy as np

from finalfusion._atomic import atomic_output
from finalfusion.compat._rows import check_rows_writable, dense_matrix_with_norms
from finalfusion.compat.gguf._ggml import rows_per_block
from finalfusion.compat.gguf._layout import ARRAY, BOOL, DEFAULT_ALIGNMENT, F32, FORMAT, I32, I64, MAGIC, NUMPY, SCALARS, STRING, TYPE_ID, TYPE_NAMES, U32, U64
from finalfusion.compat.gguf._load import REBUILT, TOKENIZER_KEYS, TOKENIZER_KV
from finalfusion.compat.gguf._source_keys import CARRIED_ARRAYS, with_source_keys
from finalfusion.compat.gguf._tokenizer import tokenizer_kv
from finalfusion.embeddings import Embeddings
from finalfusion.errors import FormatError

__all__ = ["write_gguf"]


class _Out:
    """Little-endian GGUF writer of metadata values.

    Every value is checked against its GGUF type as it is packed: a string
    that UTF-8 cannot encode (a lone surrogate) or a number outside its type
    raises a :class:`~finalfusion.errors.FormatError` (a ``ValueError``)
    naming the key, never ``UnicodeEncodeError`` or ``OverflowError`` from
    deep inside the writer.
    """

    def __init__(self) -> None:
        self.parts: list[bytes] = []

    def string(self, s: str, what: str = "a string") -> None:
        try:
            b = s.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise FormatError(
                f"{what} cannot be written as GGUF (UTF-8)",
                chunk=FORMAT,
                expected="text UTF-8 can encode",
                found=f"{s[max(0, exc.start - 20) : exc.end + 20]!r} holds a lone surrogate",
            ) from None
        self.parts.append(struct.pack("<Q", len(b)) + b)

    def kv(self, key: str, vtype: int, value: Any) -> None:
        self.string(key, f"metadata key {key!r}")
        self.parts.append(struct.pack("<I", vtype))
        if vtype == STRING:
            self.string(value, key)
        elif vtype == ARRAY:
            etype, items = value
            self.parts.append(struct.pack("<IQ", etype, len(items)))
            if etype == STRING:
                pack = struct.Struct("<Q").pack
                joined = bytearray()
                for i, t in enumerate(items):
                    try:
                        b = t.encode("utf-8")
                    except UnicodeEncodeError:
                        self.string(t, f"element {i} of {key}")  # raises, naming the element
                        raise
                    joined += pack(len(b))
                    joined += b
                self.parts.append(bytes(joined))
            else:
                self.parts.append(_numbers(key, etype, items))
        else:
            try:
                self.parts.append(struct.pack("<" + SCALARS[vtype], value))
            except (struct.error, OverflowError, TypeError) as exc:
                raise FormatError(
                    f"{key} cannot be written as GGUF value type {vtype}", chunk=FORMAT, expected=f"a {SCALARS[vtype]!r} value", found=f"{value!r} ({exc})"
                ) from None

    def data(self) -> bytes:
        return b"".join(self.parts)


def _numbers(key: str, etype: int, items: Any) -> bytes:
    """A numeric array's bytes, refusing (not wrapping or crashing on) values outside the element type."""
    dtype = np.dtype("<" + NUMPY[etype])
    try:
        values = np.asarray(items)
        if dtype.kind in "iu" and values.size and (values.dtype.kind not in "biu" or values.min() < np.iinfo(dtype).min or values.max() > np.iinfo(dtype).max):
            raise OverflowError(f"values from {values.min()} to {values.max()} ({values.dtype})")
        return np.asarray(values, dtype=dtype).tobytes()
    except (OverflowError, TypeError, ValueError) as exc:
        raise FormatError(f"{key} cannot be written as a GGUF array of {dtype}", chunk=FORMAT, expected=f"{dtype} values", found=str(exc)) from None


def _with_carried(kvs: list[tuple[str, int, Any]], prov: dict[str, Any], n: int) -> list[tuple[str, int, Any]]:
    """The tokenizer keys ``kvs`` made the source file's: its other ``tokenizer.*`` keys put back, only its keys, in its order.

    Only when the vocabulary's tokenizer is the source's kind (the same
    ``tokenizer.ggml.model``). A carried key (``prov["tokenizer_kv"]``)
    replaces the one rebuilt from the tokenizer, keeping the source's value
    and type; a rebuilt key the source did not have (``prov["tokenizer_keys"]``:
    llama.cpp used its default) is left out, and so is a carried token id
    outside the vocabulary. Carried token types and scores are not put back
    here: :func:`._source_keys.with_source_keys` uses them where they describe
    the tokenizer, before.

    Raises
    ------
    FormatError
        For a carried entry that is not a GGUF value (metadata edited by hand or read from an untrusted ``.fifu``), naming the key.
    """
    carried, names = prov.get(TOKENIZER_KV, {}), prov.get(TOKENIZER_KEYS)
    model = next((v for k, _, v in kvs if k == "tokenizer.ggml.model"), None)
    if not isinstance(names, list) or not isinstance(carried, dict) or prov.get("tokenizer") != model:
        return kvs
    entries = {k: (k, t, v) for k, t, v in kvs}
    for key, value in carried.items():
        if key in CARRIED_ARRAYS:
            continue
        if not isinstance(key, str) or not key.startswith("tokenizer.") or key in REBUILT:
            raise FormatError(
                f"metadata [gguf.{TOKENIZER_KV}] entry {key!r} is not a tokenizer key write_gguf carries over",
                chunk=FORMAT,
                expected="a tokenizer.* key not rebuilt from the vocabulary",
                found=repr(key)[:80],
            )
        if key.endswith("_token_id") and not (isinstance(value, int) and not isinstance(value, bool) and 0 <= value < n):
            entries.pop(key, None)  # a token id the vocabulary does not have
            continue
        entries[key] = (key, *_gguf_value(key, value))
    keep = {"tokenizer.ggml.model", "tokenizer.ggml.tokens"}
    ordered = [entries.pop(k) for k in dict.fromkeys(names) if isinstance(k, str) and k in entries]
    return ordered + [e for k, e in entries.items() if k in keep]


def _gguf_value(key: str, value: Any) -> tuple[int, Any]:
    """The GGUF type and value of a carried TOML value (:func:`~finalfusion.compat.gguf._load.tokenizer_keys`)."""
    if isinstance(value, bool):
        return BOOL, value
    if isinstance(value, int):
        if 0 <= value < 1 << 32:
            return U32, value
        return (I32 if value >= -(1 << 31) else I64) if value < 0 else U64, value
    if isinstance(value, float):
        return F32, value
    if isinstance(value, str):
        return STRING, value
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return ARRAY, (STRING, value)
    if isinstance(value, dict) and set(value) == {"type", "values"} and value["type"] in TYPE_NAMES and isinstance(value["values"], list):
        etype = TYPE_NAMES.index(value["type"])
        if etype in NUMPY:
            return ARRAY, (etype, value["values"])
    raise FormatError(f"metadata [gguf.{TOKENIZER_KV}] entry {key!r} is not a GGUF value", chunk=FORMAT, expected="a GGUF value", found=str(value)[:80])


def write_gguf(file: Any, embeddings: Embeddings, *, dtype: str = "F32", unnormalize: bool = True, fsync: bool = False) -> None:
    """Write embeddings as a GGUF v3 file (little-endian) readable by gguf-py and :func:`load_gguf`.

    The word rows (norms multiplied back unless ``unnormalize=False``) go
    into ``token_embd.weight``; the words into ``tokenizer.ggml.tokens``;
    a SentencePiece tokenizer as a ``llama`` vocabulary (scores, token
    types, special ids), a byte-level BPE ``tokenizer.json`` as ``gpt2``
    (merges), any Hugging Face tokenizer also as
    ``tokenizer.huggingface.json``. Embeddings loaded from a GGUF file (also
    through a ``.fifu`` written from them) carry the source's other
    ``tokenizer.*`` keys in their metadata (``[gguf.tokenizer_kv]``:
    ``tokenizer.ggml.pre``, ``add_bos_token``, the special token ids, the
    chat template, ...): they are written back with the source's values, so
    llama.cpp tokenizes the written file as the original. ``bert`` and
    ``gemma4`` vocabularies (held as a ``tokenizer.json``) and padded
    SentencePiece ones (Phi-3) also carry their token types and scores: they
    are written back, with the source's ``tokenizer.ggml.model``, while the
    tokenizer is the one those keys describe (see
    :mod:`finalfusion.compat.gguf._source_keys`). A path is replaced atomically.

    Parameters
    ----------
    file
        Path or binary file object.
    embeddings
        The embeddings (subword rows of n-gram vocabularies are dropped).
    dtype
        ``"F32"`` or ``"F16"``.

    Raises
    ------
    ValueError
        For another ``dtype``; :class:`~finalfusion.errors.FormatError` (a
        ``ValueError``) for a word, a tokenizer value or a metadata string
        that GGUF cannot hold (a lone surrogate is not UTF-8, a token type
        beyond int32, a stored ``tokenizer.json`` that is not text), naming
        the key, before anything is written; :class:`~finalfusion.errors.NonFiniteError`
        (a ``ValueError``), before anything is written, for a row with a
        NaN or infinite value, also one that multiplying its norm back
        overflows or that ``F16`` cannot hold (beyond 65504).

    Examples
    --------
    >>> import io
    >>> from finalfusion.compat.gguf import load_gguf
    >>> from finalfusion.storage import NdArray
    >>> from finalfusion.vocab import SimpleVocab
    >>> emb = Embeddings(NdArray(np.eye(2, dtype=np.float32)), SimpleVocab(["a", "b"]))
    >>> buf = io.BytesIO(); write_gguf(buf, emb, dtype="F16")
    >>> load_gguf(buf.getvalue())["b"].tolist()
    [0.0, 1.0]
    """
    if dtype not in ("F32", "F16"):
        raise ValueError(f"dtype must be 'F32' or 'F16', got {dtype!r}")
    vocab = embeddings.vocab
    n, dims = len(vocab), embeddings.dims
    meta = embeddings.metadata
    prov = meta.get("gguf") if meta is not None else None
    arch = prov.get("architecture") if isinstance(prov, dict) else None
    kvs: list[tuple[str, int, Any]] = [("general.architecture", STRING, arch if isinstance(arch, str) else "finalfusion")]
    name = prov.get("name") if isinstance(prov, dict) else None
    if isinstance(name, str):
        kvs.append(("general.name", STRING, name))
    kvs.append(("general.alignment", U32, DEFAULT_ALIGNMENT))
    source = prov if isinstance(prov, dict) else {}
    kvs += _with_carried(with_source_keys(tokenizer_kv(vocab), vocab, source), source, n)
    head = _Out()
    for key, vtype, value in kvs:
        head.kv(key, vtype, value)
    tinfo = _Out()
    tinfo.string("token_embd.weight")
    tinfo.parts.append(struct.pack("<I2QIQ", 2, dims, n, TYPE_ID[dtype], 0))
    body = struct.pack("<4sIQQ", MAGIC, 3, 1, len(kvs)) + head.data() + tinfo.data()
    body += b"\x00" * ((-len(body)) % DEFAULT_ALIGNMENT)
    out_dtype = "<f4" if dtype == "F32" else "<f2"
    check_rows_writable(embeddings, "GGUF", unnormalize, dtype="float32" if dtype == "F32" else "float16")
    with atomic_output(file, fsync=fsync) as f:
        f.write(body)
        step = rows_per_block(dims)
        for lo in range(0, n, step):
            block = dense_matrix_with_norms(embeddings, unnormalize, lo, min(n, lo + step))
            f.write(block.astype(out_dtype, copy=False).tobytes())
