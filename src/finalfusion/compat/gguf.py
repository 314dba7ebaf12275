"""GGUF (llama.cpp's model format): the token-embedding table as embeddings.

Layout (GGUF v2/v3; every integer in the file's byte order, see below):

=============  ===========================  ==========================================
offset         type                         field
=============  ===========================  ==========================================
0              4 bytes                      magic ``GGUF``
4              u32                          version (2 or 3)
8              u64                          n_tensors
16             u64                          n_kv
24             KV x n_kv                    key (string), u32 value type, value
...            tensor info x n_tensors      name (string), u32 n_dims, u64 ne[n_dims], u32 ggml type, u64 offset
...            padding                      to ``general.alignment`` (a u32; default 32)
data start     tensor data                  each tensor at ``data start + offset`` (aligned)
=============  ===========================  ==========================================

A string is a ``u64`` byte length and UTF-8 bytes; an array a ``u32``
element type, a ``u64`` count and the elements. Byte order is detected as
gguf-py does: the magic is always the bytes ``GGUF``; when the version read
little-endian has its low 16 bits zero, the file is big-endian. ggml lists
dimensions innermost first: ``ne[0]`` is the embedding size and ``ne[1]``
the number of tokens, so the table is a ``(ne[1], ne[0])`` row-major array.
In big-endian files the ``f16`` scales inside quantized blocks are
big-endian too (as llama.cpp's ``gguf_convert_endian`` writes them).

The vocabulary comes from ``tokenizer.ggml.tokens`` (row ``i`` is token
id ``i``). With ``tokenizer.ggml.model`` ``llama`` (SentencePiece) or
``gpt2`` (byte-level BPE), the scores, token types, merges and special ids
become a real tokenizer (a SentencePiece ``ModelProto`` built with the
settings llama.cpp uses, or a ``tokenizer.json`` for the ``tokenizers``
library), so unknown words are embedded through it (see
:class:`~finalfusion.vocab.TokenizerVocab`).
"""

from __future__ import annotations

import functools
import json
import mmap as _mmap
import struct
import sys
from dataclasses import dataclass, field, replace
from typing import IO, Any, Final

import numpy as np
import numpy.typing as npt

from finalfusion._binary import check_dims
from finalfusion._source import fill, parse_prefix, size_bound, sized_or_stream, skip
from finalfusion._threads import CPUS, run_tasks
from finalfusion._tokenizers import HuggingFaceTokenizer, SentencePieceTokenizer, Tokenizer
from finalfusion.compat._build import checked_norms
from finalfusion.compat._registry import register_format
from finalfusion.compat._rows import check_rows_writable, dense_matrix_with_norms
from finalfusion.compat._spmodel import BPE_MODEL, CONTROL, NORMAL, UNIGRAM_MODEL, UNKNOWN, USER_DEFINED, SentencePieceModel
from finalfusion.embeddings import Embeddings
from finalfusion.errors import BadMagic, FormatError, MissingExtraError, Truncated, UnsupportedVersion
from finalfusion.metadata import Metadata
from finalfusion.storage import NdArray
from finalfusion.vocab import SimpleVocab, Vocab
from finalfusion.vocab.tokenizer import TokenizerVocab

__all__ = ["GGML_TYPES", "GGUFFile", "GGUFTensor", "load_gguf", "read_gguf", "write_gguf"]

FORMAT: Final = "GGUF"
MAGIC: Final = b"GGUF"
#: Versions read (v1 used 32-bit counts and is long obsolete).
VERSIONS: Final = (2, 3)
DEFAULT_ALIGNMENT: Final = 32
#: Nesting depth accepted for arrays of arrays.
MAX_ARRAY_DEPTH: Final = 8
#: Output bytes decoded per block (bounds the temporaries of a decode).
_BLOCK_BYTES: Final = 1 << 24
#: Threads that decode a table's blocks (the calling one included); results do not depend on it.
DECODE_THREADS: int = min(4, CPUS)

#: ggml type id -> (name, elements per block, bytes per block); from ggml.h / gguf-py's GGML_QUANT_SIZES.
GGML_TYPES: Final[dict[int, tuple[str, int, int]]] = {
    0: ("F32", 1, 4),
    1: ("F16", 1, 2),
    2: ("Q4_0", 32, 18),
    3: ("Q4_1", 32, 20),
    6: ("Q5_0", 32, 22),
    7: ("Q5_1", 32, 24),
    8: ("Q8_0", 32, 34),
    9: ("Q8_1", 32, 40),
    10: ("Q2_K", 256, 84),
    11: ("Q3_K", 256, 110),
    12: ("Q4_K", 256, 144),
    13: ("Q5_K", 256, 176),
    14: ("Q6_K", 256, 210),
    15: ("Q8_K", 256, 292),
    16: ("IQ2_XXS", 256, 66),
    17: ("IQ2_XS", 256, 74),
    18: ("IQ3_XXS", 256, 98),
    19: ("IQ1_S", 256, 50),
    20: ("IQ4_NL", 32, 18),
    21: ("IQ3_S", 256, 110),
    22: ("IQ2_S", 256, 82),
    23: ("IQ4_XS", 256, 136),
    24: ("I8", 1, 1),
    25: ("I16", 1, 2),
    26: ("I32", 1, 4),
    27: ("I64", 1, 8),
    28: ("F64", 1, 8),
    29: ("IQ1_M", 256, 56),
    30: ("BF16", 1, 2),
    34: ("TQ1_0", 256, 54),
    35: ("TQ2_0", 256, 66),
    39: ("MXFP4", 32, 17),
    40: ("NVFP4", 64, 36),
    41: ("Q1_0", 128, 18),
}
_TYPE_ID: Final = {name: i for i, (name, _, _) in GGML_TYPES.items()}

# GGUF metadata value types: id -> (name, struct code or None for string/array).
_U8, _I8, _U16, _I16, _U32, _I32, _F32, _BOOL, _STRING, _ARRAY, _U64, _I64, _F64 = range(13)
_SCALARS: Final[dict[int, str]] = {_U8: "B", _I8: "b", _U16: "H", _I16: "h", _U32: "I", _I32: "i", _F32: "f", _BOOL: "?", _U64: "Q", _I64: "q", _F64: "d"}
_NUMPY: Final[dict[int, str]] = {
    _U8: "u1",
    _I8: "i1",
    _U16: "u2",
    _I16: "i2",
    _U32: "u4",
    _I32: "i4",
    _F32: "f4",
    _BOOL: "u1",
    _U64: "u8",
    _I64: "i8",
    _F64: "f8",
}


# -- parsing -------------------------------------------------------------------------------


class _Cursor:
    """Bounds-checked reader over a buffer in one byte order; every failure is a :class:`FormatError`."""

    def __init__(self, buf: Any, order: str) -> None:
        self.buf = buf
        self.size = len(buf)
        self.pos = 0
        self.order = order

    def need(self, n: int, what: str) -> None:
        if n < 0 or self.pos + n > self.size:
            raise Truncated(f"data ends inside {what}", offset=self.pos, chunk=FORMAT, expected=f"{n} bytes", found=f"{max(0, self.size - self.pos)} bytes")

    def scalar(self, code: str, what: str) -> Any:
        n = struct.calcsize(code)
        self.need(n, what)
        (value,) = struct.unpack_from(self.order + code, self.buf, self.pos)
        self.pos += n
        return value

    def u32(self, what: str) -> int:
        return int(self.scalar("I", what))

    def u64(self, what: str) -> int:
        return int(self.scalar("Q", what))

    def string(self, what: str) -> str:
        n = self.u64(f"length of {what}")
        self.need(n, what)
        raw = bytes(self.buf[self.pos : self.pos + n])
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise FormatError(f"{what} is not valid UTF-8", offset=self.pos + exc.start, chunk=FORMAT, expected="UTF-8", found=raw[:40]) from None
        self.pos += n
        return text

    def strings(self, count: int, what: str) -> list[str]:
        """``count`` strings (a fast path for token lists: one ``unpack_from`` and one slice each)."""
        out: list[str] = []
        append = out.append
        buf, size, unpack = self.buf, self.size, struct.Struct(self.order + "Q").unpack_from
        pos = self.pos
        try:
            for _ in range(count):
                if pos + 8 > size:
                    self.pos = pos
                    self.need(8, f"length of {what} {len(out)}")
                (n,) = unpack(buf, pos)
                pos += 8
                if n > size - pos:
                    self.pos = pos
                    self.need(n, f"{what} {len(out)}")
                append(str(buf[pos : pos + n], "utf-8"))
                pos += n
        except UnicodeDecodeError as exc:
            raise FormatError(f"{what} {len(out)} is not valid UTF-8", offset=pos + exc.start, chunk=FORMAT, expected="UTF-8", found=exc.object[:40]) from None
        self.pos = pos
        return out

    def value(self, vtype: int, what: str, depth: int = 0) -> Any:
        if vtype in _SCALARS:
            return self.scalar(_SCALARS[vtype], what)
        if vtype == _STRING:
            return self.string(what)
        if vtype == _ARRAY:
            at = self.pos
            etype = self.u32(f"element type of {what}")
            count = self.u64(f"element count of {what}")
            if etype in _SCALARS:
                itemsize = struct.calcsize(_SCALARS[etype])
                self.need(count * itemsize, f"{count} elements of {what}")
                arr = np.frombuffer(self.buf, dtype=np.dtype(self.order + _NUMPY[etype]), count=count, offset=self.pos)
                self.pos += count * itemsize
                return arr.astype(bool) if etype == _BOOL else arr.astype(arr.dtype.newbyteorder("="))
            # Strings take at least 8 bytes, arrays at least 12: refuse counts the data cannot hold before looping.
            least = 8 if etype == _STRING else 12
            if count > (self.size - self.pos) // least:
                raise Truncated(
                    f"the element count of {what} is larger than the rest of the file can hold",
                    offset=at + 4,
                    chunk=FORMAT,
                    expected=f"at most {(self.size - self.pos) // least}",
                    found=count,
                )
            if etype == _STRING:
                return self.strings(count, f"element of {what}")
            if etype == _ARRAY:
                if depth >= MAX_ARRAY_DEPTH:
                    raise FormatError("arrays nested too deeply", offset=at, chunk=FORMAT, expected=f"at most {MAX_ARRAY_DEPTH} levels", found=depth + 1)
                return [self.value(_ARRAY, what, depth + 1) for _ in range(count)]
            raise FormatError(f"unknown element type of {what}", offset=at, chunk=FORMAT, expected="a GGUF value type 0..12", found=etype)
        raise FormatError(f"unknown value type of {what}", offset=self.pos - 4, chunk=FORMAT, expected="a GGUF value type 0..12", found=vtype)


@dataclass(frozen=True)
class GGUFTensor:
    """One tensor's description: name, ggml dimensions (innermost first), type and absolute data offset.

    Examples
    --------
    >>> t = GGUFTensor("token_embd.weight", (4, 3), 1, 64)
    >>> t.type_name, t.shape, t.n_bytes
    ('F16', (3, 4), 24)
    """

    name: str
    ne: tuple[int, ...]
    ggml_type: int
    offset: int

    @property
    def type_name(self) -> str:
        """The ggml type's name (``F16``, ``Q8_0``, ...)."""
        return GGML_TYPES[self.ggml_type][0]

    @property
    def shape(self) -> tuple[int, ...]:
        """The numpy shape (ggml's dimensions reversed)."""
        return tuple(reversed(self.ne))

    @property
    def n_bytes(self) -> int:
        """Bytes of data."""
        _, block, size = GGML_TYPES[self.ggml_type]
        n = 1
        for d in self.ne:
            n *= d
        return n // block * size


@dataclass
class GGUFFile:
    """The parsed header of a GGUF file: version, byte order, metadata and tensor infos.

    Examples
    --------
    >>> import io
    >>> from finalfusion.storage import NdArray
    >>> emb = Embeddings(NdArray(np.eye(2, dtype=np.float32)), SimpleVocab(["a", "b"]))
    >>> buf = io.BytesIO(); write_gguf(buf, emb)
    >>> head = read_gguf(buf.getvalue())
    >>> head.version, head.byte_order, head.kv["tokenizer.ggml.tokens"], head.tensors["token_embd.weight"].shape
    (3, '<', ['a', 'b'], (2, 2))
    """

    version: int
    byte_order: str
    alignment: int
    kv: dict[str, Any]
    tensors: dict[str, GGUFTensor]
    data_start: int
    size: int
    buffer: Any = field(default=None, repr=False)


def read_gguf(data: Any) -> GGUFFile:
    """Parse the header of a GGUF file (``bytes``-like or a map of the whole file).

    Raises
    ------
    FormatError
        For anything malformed, naming what was expected and found and the offset.

    Examples
    --------
    >>> read_gguf(b"GGUF\\x01\\x00\\x00\\x00")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    finalfusion.errors.UnsupportedVersion: GGUF: unsupported GGUF version: expected 2 or 3, found 1 (at byte offset 4)
    """
    return _parse(data, len(data))


def _parse(data: Any, total: int | None) -> GGUFFile:
    """:func:`read_gguf` of a buffer that holds at least the header; ``total`` is the file's size (``None``: unknown, a stream)."""
    size = len(data)
    if size < 4 or bytes(data[:4]) != MAGIC:
        raise BadMagic("not a GGUF file", offset=0, chunk=FORMAT, expected=MAGIC, found=bytes(data[:4]))
    cur = _Cursor(data, "<")
    cur.pos = 4
    version = cur.u32("version")
    order = "<"
    if version & 0xFFFF == 0 and version:
        order = ">"
        version = struct.unpack(">I", struct.pack("<I", version))[0]
    if version not in VERSIONS:
        raise UnsupportedVersion("unsupported GGUF version", offset=4, chunk=FORMAT, expected="2 or 3", found=version)
    cur.order = order
    n_tensors = cur.u64("tensor count")
    n_kv = cur.u64("metadata count")
    if n_kv > (size - cur.pos) // 13:
        raise Truncated(
            "the metadata count is larger than the file can hold", offset=16, chunk=FORMAT, expected=f"at most {(size - cur.pos) // 13}", found=n_kv
        )
    kv: dict[str, Any] = {}
    for _ in range(n_kv):
        at = cur.pos
        key = cur.string("metadata key")
        if key in kv:
            raise FormatError("duplicate metadata key", offset=at, chunk=FORMAT, expected="distinct keys", found=key)
        vtype = cur.u32(f"value type of {key}")
        if key == "general.alignment" and vtype != _U32:  # as llama.cpp (gguf_get_val_u32 asserts the type) and gguf-py
            raise FormatError("general.alignment is not a uint32", offset=cur.pos - 4, chunk=FORMAT, expected=f"value type {_U32} (uint32)", found=vtype)
        kv[key] = cur.value(vtype, key)
    if n_tensors > (size - cur.pos) // 24:
        raise Truncated(
            "the tensor count is larger than the file can hold", offset=8, chunk=FORMAT, expected=f"at most {(size - cur.pos) // 24}", found=n_tensors
        )
    alignment = kv.get("general.alignment", DEFAULT_ALIGNMENT)
    if not isinstance(alignment, int) or isinstance(alignment, bool) or alignment <= 0 or alignment & (alignment - 1):
        raise FormatError("general.alignment is not a positive power of two", chunk=FORMAT, expected="a power of two", found=alignment)
    infos: list[tuple[int, str, tuple[int, ...], int, int]] = []
    names: set[str] = set()
    for _ in range(n_tensors):
        at = cur.pos
        name = cur.string("tensor name")
        if name in names:
            raise FormatError("duplicate tensor name", offset=at, chunk=FORMAT, expected="distinct tensor names", found=name)
        names.add(name)
        n_dims = cur.u32(f"dimension count of {name}")
        if n_dims > 8:
            raise FormatError(f"tensor {name} has too many dimensions", offset=cur.pos - 4, chunk=FORMAT, expected="at most 8", found=n_dims)
        ne = tuple(cur.u64(f"dimension of {name}") for _ in range(n_dims))
        type_at = cur.pos
        ggml_type = cur.u32(f"ggml type of {name}")
        rel = cur.u64(f"data offset of {name}")
        infos.append((at, name, ne, ggml_type, rel))
        if ggml_type not in GGML_TYPES:
            raise FormatError(f"unknown ggml type of tensor {name}", offset=type_at, chunk=FORMAT, expected="a ggml type id", found=ggml_type)
    data_start = cur.pos + (-cur.pos) % alignment
    tensors: dict[str, GGUFTensor] = {}
    for at, name, ne, ggml_type, rel in infos:
        tname, block, _ = GGML_TYPES[ggml_type]
        elements = 1
        for d in ne:
            elements *= d
            if elements > (total if total is not None else 1 << 60) * 8:
                raise FormatError(
                    f"the shape of tensor {name} is larger than the file can hold", offset=at, chunk=FORMAT, expected="a shape that fits", found=ne
                )
        if ne and ne[0] % block:
            raise FormatError(
                f"the row length of tensor {name} is not a multiple of the {tname} block size",
                offset=at,
                chunk=FORMAT,
                expected=f"a multiple of {block}",
                found=ne[0],
            )
        if rel % alignment:
            raise FormatError(f"the data of tensor {name} is misaligned", offset=at, chunk=FORMAT, expected=f"a multiple of {alignment}", found=rel)
        tensor = GGUFTensor(name, ne, ggml_type, data_start + rel)
        if total is not None and tensor.offset + tensor.n_bytes > total:
            raise Truncated(
                f"the data of tensor {name} runs past the end of the file",
                offset=at,
                chunk=FORMAT,
                expected=f"{tensor.n_bytes} bytes at byte {tensor.offset}",
                found=f"{max(0, total - tensor.offset)} bytes",
            )
        tensors[name] = tensor
    return GGUFFile(version, order, alignment, kv, tensors, data_start, size if total is None else total, data)


# -- decoding --------------------------------------------------------------------------------


def _rows_per_block(row_floats: int) -> int:
    return max(1, _BLOCK_BYTES // max(1, 4 * row_floats))


def _release(buf: Any, start: int, stop: int) -> None:
    """Drop the decoded bytes' pages of a file map from this process's memory (they stay in the page cache)."""
    if isinstance(buf, _mmap.mmap) and hasattr(_mmap, "MADV_DONTNEED"):
        page = _mmap.PAGESIZE
        lo = start - start % page
        hi = stop - stop % page
        if hi > lo:
            buf.madvise(_mmap.MADV_DONTNEED, lo, hi - lo)


def _decode_float(raw: npt.NDArray[np.uint8], out: npt.NDArray[np.float32], type_name: str, order: str) -> None:
    if type_name == "F16":
        out[...] = raw.view(np.dtype(order + "f2")).reshape(out.shape)
    elif type_name == "F32":
        out[...] = raw.view(np.dtype(order + "f4")).reshape(out.shape)
    elif type_name == "F64":
        out[...] = raw.view(np.dtype(order + "f8")).reshape(out.shape)
    else:  # BF16: the high half of a float32
        halves = raw.view(np.dtype(order + "u2")).reshape(out.shape)
        np.left_shift(halves, 16, out=out.view(np.uint32), dtype=np.uint32)


def _decode_q8_0(raw: npt.NDArray[np.uint8], out: npt.NDArray[np.float32], order: str) -> None:
    blocks = raw.reshape(-1, 34)
    scale = blocks[:, :2].copy().view(np.dtype(order + "f2")).astype(np.float32)
    np.multiply(blocks[:, 2:].view(np.int8), scale, out=out.reshape(-1, 32))


def _decode_q4_0(raw: npt.NDArray[np.uint8], out: npt.NDArray[np.float32], order: str) -> None:
    blocks = raw.reshape(-1, 18)
    scale = blocks[:, :2].copy().view(np.dtype(order + "f2")).astype(np.float32)
    qs = blocks[:, 2:]
    halves = out.reshape(-1, 2, 16)
    low = (qs & 0x0F).view(np.int8)
    low -= 8
    np.multiply(low, scale, out=halves[:, 0, :])
    high = (qs >> 4).view(np.int8)
    high -= 8
    np.multiply(high, scale, out=halves[:, 1, :])


#: f16 fields to swap to little-endian per block of big-endian K-quant data (as gguf_convert_endian does).
_BE_F16_FIELDS: Final[dict[str, tuple[int, ...]]] = {"Q4_K": (0, 2), "Q6_K": (208,), "MXFP4": (), "NVFP4": ()}


def _decode_with_gguf(raw: npt.NDArray[np.uint8], out: npt.NDArray[np.float32], tensor: GGUFTensor, order: str) -> None:
    name = tensor.type_name
    try:
        from gguf import GGMLQuantizationType
        from gguf.quants import dequantize
    except ImportError:
        raise MissingExtraError("gguf", f"decoding a {name} tensor ({tensor.name})") from None
    _, _, bsize = GGML_TYPES[tensor.ggml_type]
    rows = raw.reshape(out.shape[0], -1)
    if order == ">":
        fields = _BE_F16_FIELDS.get(name)
        if fields is None:
            raise FormatError(
                f"big-endian {name} tensors are not supported", chunk=FORMAT, expected=f"a little-endian file or one of {sorted(_BE_F16_FIELDS)}", found=name
            )
        blocks = rows.reshape(-1, bsize).copy()
        for at in fields:
            blocks[:, at : at + 2] = blocks[:, at : at + 2][:, ::-1]
        rows = blocks.reshape(rows.shape)
    try:
        qtype = GGMLQuantizationType(tensor.ggml_type)
    except ValueError:  # a type newer than the installed gguf package
        raise MissingExtraError("gguf", f"decoding a {name} tensor (unknown to this version of gguf)") from None
    try:
        out[...] = dequantize(rows, qtype)
    except NotImplementedError as exc:
        raise MissingExtraError("gguf", f"decoding a {name} tensor ({exc})") from None
    except ValueError as exc:  # the package is there and knows the type: it is the data it cannot decode
        raise FormatError(f"gguf cannot decode tensor {tensor.name}", chunk=FORMAT, expected=f"{name} blocks", found=str(exc)[:200]) from None


def decode_tensor(head: GGUFFile, tensor: GGUFTensor, out: npt.NDArray[np.float32] | None = None) -> npt.NDArray[np.float32]:
    """Decode a 2-D tensor into a new ``float32`` matrix, block by block.

    F32, F16, BF16, F64, Q8_0 and Q4_0 are decoded with numpy; every other
    type with ``gguf.quants.dequantize``. Blocks of about 16 MiB of output
    are decoded on up to :data:`DECODE_THREADS` threads (one block of
    temporaries per thread); pages of a mapped file are released from this
    process's memory as they are done.

    Raises
    ------
    MissingExtraError
        For a type that needs the ``gguf`` package when it is not installed,
        or is too old to know the type.
    FormatError
        When ``gguf`` knows the type but cannot decode the data.

    Examples
    --------
    >>> import io
    >>> from finalfusion.storage import NdArray
    >>> emb = Embeddings(NdArray(np.arange(4, dtype=np.float32).reshape(2, 2)), SimpleVocab(["a", "b"]))
    >>> buf = io.BytesIO(); write_gguf(buf, emb, dtype="F16")
    >>> head = read_gguf(buf.getvalue())
    >>> decode_tensor(head, head.tensors["token_embd.weight"]).tolist()
    [[0.0, 1.0], [2.0, 3.0]]
    """
    rows, dims = _matrix_shape(tensor)
    if out is None:
        out = np.empty((rows, dims), dtype=np.float32)
    if out.size == 0:  # nothing to decode (gguf's dequantize cannot reshape an empty block)
        return out
    _, block, bsize = GGML_TYPES[tensor.ggml_type]
    row_bytes = dims // block * bsize
    step = _rows_per_block(dims)
    target = out

    def decode(lo: int) -> None:
        hi = min(rows, lo + step)
        start = tensor.offset + lo * row_bytes
        raw = np.frombuffer(head.buffer, dtype=np.uint8, count=(hi - lo) * row_bytes, offset=start)
        with np.errstate(invalid="ignore", over="ignore"):  # non-finite scales decode to NaN/inf rows, which the loader refuses
            _decode_block(raw, target[lo:hi], tensor, head.byte_order)
        del raw
        _release(head.buffer, start, start + (hi - lo) * row_bytes)

    # numpy releases the GIL in the decoding loops: blocks are decoded on a few threads, each into its own rows.
    run_tasks((functools.partial(decode, lo) for lo in range(0, rows, step)), min(DECODE_THREADS, -(-rows // step)))
    return out


def _decode_block(raw: npt.NDArray[np.uint8], target: npt.NDArray[np.float32], tensor: GGUFTensor, order: str) -> None:
    name = tensor.type_name
    if name in ("F32", "F16", "BF16", "F64"):
        _decode_float(raw, target, name, order)
    elif name == "Q8_0":
        _decode_q8_0(raw, target, order)
    elif name == "Q4_0":
        _decode_q4_0(raw, target, order)
    else:
        _decode_with_gguf(raw, target, tensor, order)


def _matrix_shape(tensor: GGUFTensor) -> tuple[int, int]:
    ne = list(tensor.ne)
    while len(ne) > 2 and ne[-1] == 1:
        ne.pop()
    if len(ne) != 2:
        raise FormatError(
            f"tensor {tensor.name} is not a matrix", chunk=FORMAT, expected="2 dimensions (ne[0] = embedding size, ne[1] = tokens)", found=tensor.ne
        )
    check_dims(ne[0], offset=None, chunk=f"{FORMAT} tensor {tensor.name}", what="embedding size (ne[0])")
    return ne[1], ne[0]


# -- tokenizers ------------------------------------------------------------------------------


#: Pre-tokenizer regexes of ``tokenizer.ggml.pre`` values (llama.cpp's llama-vocab.cpp); others use GPT-2's.
_PRE_REGEX: Final[dict[str, str]] = {
    "llama-bpe": (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"),
}


def byte_level_bpe_json(tokens: list[str], merges: list[str], types: npt.NDArray[Any] | None, pre: str | None = None) -> str:
    """A ``tokenizer.json`` for a GGUF ``gpt2``-style vocabulary: byte-level BPE from tokens and merges.

    Control tokens become special added tokens, user-defined ones plain
    added tokens. The pre-tokenizer is GPT-2's byte-level split, or the
    regex llama.cpp uses for ``pre`` when it is one of :data:`_PRE_REGEX`.

    Examples
    --------
    >>> doc = json.loads(byte_level_bpe_json(["a", "b", "ab"], ["a b"], None))
    >>> doc["model"]["type"], doc["model"]["vocab"]["ab"], doc["model"]["merges"]
    ('BPE', 2, ['a b'])
    """
    added = []
    if types is not None:
        for i, t in enumerate(types.tolist()):
            if t in (CONTROL, USER_DEFINED) and i < len(tokens):
                added.append(
                    {
                        "id": i,
                        "content": tokens[i],
                        "single_word": False,
                        "lstrip": False,
                        "rstrip": False,
                        "normalized": False,
                        "special": t == CONTROL,
                    }
                )
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
    pre_tokenizer: dict[str, Any] = byte_level
    if pre in _PRE_REGEX:
        pre_tokenizer = {
            "type": "Sequence",
            "pretokenizers": [
                {"type": "Split", "pattern": {"Regex": _PRE_REGEX[pre]}, "behavior": "Isolated", "invert": False},
                dict(byte_level, use_regex=False),
            ],
        }
    doc = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": None,
        "pre_tokenizer": pre_tokenizer,
        "post_processor": None,
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": {
            "type": "BPE",
            "dropout": None,
            "unk_token": None,
            "continuing_subword_prefix": None,
            "end_of_word_suffix": None,
            "fuse_unk": False,
            "byte_fallback": False,
            "ignore_merges": False,
            "vocab": {t: i for i, t in enumerate(tokens)},
            "merges": merges,
        },
    }
    return json.dumps(doc, ensure_ascii=False)


def _special_ids(kv: dict[str, Any], types: npt.NDArray[Any] | None) -> dict[str, int]:
    out = {}
    for name in ("unk", "bos", "eos", "pad"):
        v = kv.get(f"tokenizer.ggml.{name}_token_id")
        out[name] = v if isinstance(v, int) and not isinstance(v, bool) else -1
    if out["unk"] < 0 and types is not None:
        unknown = np.flatnonzero(types == UNKNOWN)
        out["unk"] = int(unknown[0]) if len(unknown) else -1
    return out


def _sentencepiece_model(kv: dict[str, Any], tokens: list[str], types: npt.NDArray[Any] | None, model_type: int) -> SentencePieceModel:
    """The SentencePiece model llama.cpp tokenizes with: ``llama`` (BPE by scores, no normaliser) or ``t5`` (unigram, precompiled charsmap)."""
    n = len(tokens)
    scores = _typed_array(kv, "tokenizer.ggml.scores", n)
    if scores is not None:
        scores = scores.astype(np.float64)
        bad = ~(np.abs(scores) <= np.finfo(np.float32).max)  # NaN, infinities and f64 values past float32
        if bad.any():
            i = int(np.argmax(bad))
            raise FormatError(
                "tokenizer.ggml.scores holds a value that is not a finite float32",
                chunk=FORMAT,
                expected="finite float32 scores (a SentencePiece model stores float32; sentencepiece refuses NaN and infinity)",
                found=f"{float(scores[i])!r} (token {i})",
            )
    charsmap = kv.get("tokenizer.ggml.precompiled_charsmap") if model_type == UNIGRAM_MODEL else None
    return SentencePieceModel(
        tokens,
        scores.tolist() if scores is not None else [0.0] * n,
        types.astype(int).tolist() if types is not None else [NORMAL] * n,
        _special_ids(kv, types),
        model_type=model_type,
        add_dummy_prefix=bool(kv.get("tokenizer.ggml.add_space_prefix", True)),
        remove_extra_whitespaces=bool(kv.get("tokenizer.ggml.remove_extra_whitespaces", model_type == UNIGRAM_MODEL)),
        charsmap=charsmap.astype(np.uint8).tobytes() if isinstance(charsmap, np.ndarray) else b"",
    )


def _typed_array(kv: dict[str, Any], key: str, n: int) -> npt.NDArray[Any] | None:
    v = kv.get(key)
    if v is None:
        return None
    if not isinstance(v, np.ndarray) or v.ndim != 1:
        raise FormatError(f"{key} is not a numeric array", chunk=FORMAT, expected="an array of numbers", found=type(v).__name__)
    if len(v) != n:
        raise FormatError(f"{key} does not match the token list", chunk=FORMAT, expected=f"{n} entries", found=len(v))
    return v


def _check_merges(merges: list[str], tokens: list[str]) -> None:
    """Refuse a merge the BPE model cannot hold: ``"a b"`` with ``a``, ``b`` and ``ab`` all tokens.

    ``tokenizers`` requires this of every merge, and checked lazily it would
    fail only at the first lookup of an unknown word -- as a Rust panic that
    escapes ``except Exception`` where the merged token is longer than every
    token (huggingface/tokenizers#2198). One pass: 50,000 synthetic merges took
    30-50 ms on a loaded 2-core machine.
    """
    known = set(tokens)
    for i, merge in enumerate(merges):
        a, space, b = merge.partition(" ")
        if not space or " " in b or a not in known or b not in known or a + b not in known:
            raise FormatError(
                f"merge {i} of tokenizer.ggml.merges does not join two tokens into a third",
                chunk=FORMAT,
                expected="'a b' where a, b and ab are in tokenizer.ggml.tokens",
                found=merge[:80],
            )


def gguf_tokenizer(kv: dict[str, Any], tokens: list[str]) -> Tokenizer | None:
    """The tokenizer a GGUF file describes, or ``None`` when it names none this library supports.

    Examples
    --------
    >>> gguf_tokenizer({"tokenizer.ggml.model": "gpt2", "tokenizer.ggml.merges": ["a b"]}, ["a", "b", "ab"]).kind
    'huggingface'
    >>> gguf_tokenizer({}, ["a"]) is None
    True
    """
    hf = kv.get("tokenizer.huggingface.json")
    model = kv.get("tokenizer.ggml.model")
    types = _typed_array(kv, "tokenizer.ggml.token_type", len(tokens))
    if model in ("llama", "t5"):
        return SentencePieceTokenizer(_sentencepiece_model(kv, tokens, types, BPE_MODEL if model == "llama" else UNIGRAM_MODEL).to_proto())
    if model == "gpt2":
        merges = kv.get("tokenizer.ggml.merges", [])
        if not isinstance(merges, list) or not all(isinstance(m, str) for m in merges):
            raise FormatError("tokenizer.ggml.merges is not a list of strings", chunk=FORMAT, expected="an array of strings", found=type(merges).__name__)
        _check_merges(merges, tokens)
        pre = kv.get("tokenizer.ggml.pre")
        return HuggingFaceTokenizer(byte_level_bpe_json(tokens, merges, types, pre if isinstance(pre, str) else None))
    if isinstance(hf, str):
        return HuggingFaceTokenizer(hf)
    return None


# -- loading ---------------------------------------------------------------------------------


def _table(head: GGUFFile, tensor: str) -> GGUFTensor:
    info = head.tensors.get(tensor)
    if info is None:
        raise FormatError(f"no tensor {tensor!r}", chunk=FORMAT, expected=tensor, found=sorted(head.tensors)[:20])
    return info


def _past_end(what: str, at: int, expected: int, found: int) -> Truncated:
    return Truncated(f"{what} runs past the end of the data", offset=at, chunk=FORMAT, expected=f"{expected} bytes", found=f"{found} bytes")


def _read_stream(f: IO[bytes], tensor: str) -> tuple[GGUFFile, GGUFTensor]:
    """The header and the bytes of one tensor of a GGUF stream of unknown size (gzip, a pipe, a file object without a descriptor).

    The stream may never end, so it is never read whole: the header (magic,
    metadata, tensor table) is parsed from a prefix that doubles until it
    holds it (at most :data:`finalfusion.limits.MAX_MODEL_HEADER_BYTES`);
    then the data is read up to the end of the last tensor the table
    declares, keeping only the bytes of ``tensor`` (read as they arrive, so
    a declared size larger than the stream ends in :class:`Truncated` when
    it ends). Nothing after the last tensor is read: a GGUF file may end
    with alignment padding, and the file reader ignores what follows the
    data too. The returned header's ``buffer`` holds the tensor's bytes
    only, and the returned tensor's offset is 0.
    """
    from finalfusion import limits

    buf = bytearray()
    head = replace(
        parse_prefix(f, buf, lambda b: _parse(b, None), limits.MAX_MODEL_HEADER_BYTES, FORMAT, "finalfusion.limits.MAX_MODEL_HEADER_BYTES"), buffer=None
    )
    info = _table(head, tensor)
    end = max((t.offset + t.n_bytes for t in head.tensors.values()), default=head.data_start)
    bound = size_bound(f)
    if bound is not None and end > len(buf) + bound:
        raise _past_end("the tensor data", head.data_start, end - head.data_start, len(buf) + bound - head.data_start)
    start, stop = info.offset, info.offset + info.n_bytes
    raw = bytearray(buf[start:stop])
    have = len(buf)
    del buf  # the header's bytes: parsed (the metadata holds copies)
    if have < stop:
        gap = max(0, start - have)
        if skip(f, gap) < gap or not fill(f, raw, info.n_bytes):
            raise _past_end(f"the data of tensor {info.name}", start, info.n_bytes, len(raw))
        have = stop
    if end > have and skip(f, end - have) < end - have:
        raise _past_end("the tensor data", have, end - have, 0)
    return replace(head, size=end, buffer=raw), replace(info, offset=0)


def load_gguf(file: Any, *, tensor: str = "token_embd.weight", normalize: bool = True, mmap: bool = False) -> Embeddings:
    """Load the token-embedding table of a GGUF model as embeddings.

    Parameters
    ----------
    file
        A path, the file's contents as ``bytes``, or a binary file object;
        gzip-compressed data is decompressed. A regular file is mapped, so
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
        describes a ``llama`` or ``gpt2`` tokenizer (or has
        ``tokenizer.huggingface.json``), else a ``SimpleVocab``; the
        metadata's ``[gguf]`` table records where the table came from.

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
    >>> from finalfusion.storage import NdArray
    >>> emb = Embeddings(NdArray(np.array([[3, 4], [0, 2]], dtype=np.float32)), SimpleVocab(["a", "b"]))
    >>> buf = io.BytesIO(); write_gguf(buf, emb)
    >>> loaded = load_gguf(buf.getvalue())
    >>> loaded["a"].tolist(), loaded.norms.norms.tolist(), loaded.metadata["gguf"]["type"]
    ([0.6000000238418579, 0.800000011920929], [5.0, 2.0], 'F32')
    """
    with sized_or_stream(file) as (_, buf, stream):
        if stream is not None:
            head, info = _read_stream(stream, tensor)
        else:
            head = read_gguf(buf)
            info = _table(head, tensor)
    buf = head.buffer
    rows, dims = _matrix_shape(info)
    tokens = head.kv.get("tokenizer.ggml.tokens")
    if tokens is None:
        raise FormatError("no vocabulary (tokenizer.ggml.tokens)", chunk=FORMAT, expected="tokenizer.ggml.tokens", found=sorted(head.kv)[:20])
    if not isinstance(tokens, list) or not all(isinstance(t, str) for t in tokens):
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
    return out


# -- writing ---------------------------------------------------------------------------------


class _Out:
    """Little-endian GGUF writer of metadata values."""

    def __init__(self) -> None:
        self.parts: list[bytes] = []

    def string(self, s: str) -> None:
        b = s.encode("utf-8")
        self.parts.append(struct.pack("<Q", len(b)) + b)

    def kv(self, key: str, vtype: int, value: Any) -> None:
        self.string(key)
        self.parts.append(struct.pack("<I", vtype))
        if vtype == _STRING:
            self.string(value)
        elif vtype == _ARRAY:
            etype, items = value
            self.parts.append(struct.pack("<IQ", etype, len(items)))
            if etype == _STRING:
                pack = struct.Struct("<Q").pack
                joined = bytearray()
                for t in items:
                    b = t.encode("utf-8")
                    joined += pack(len(b))
                    joined += b
                self.parts.append(bytes(joined))
            else:
                self.parts.append(np.asarray(items, dtype=np.dtype("<" + _NUMPY[etype])).tobytes())
        else:
            self.parts.append(struct.pack("<" + _SCALARS[vtype], value))

    def data(self) -> bytes:
        return b"".join(self.parts)


def _tokenizer_kv(vocab: Vocab) -> list[tuple[str, int, Any]]:
    words = list(vocab.words)
    tok = vocab.tokenizer if isinstance(vocab, TokenizerVocab) else None
    if isinstance(tok, SentencePieceTokenizer):
        spm = SentencePieceModel.parse(tok.to_bytes())
        if spm.pieces == words:
            unigram = spm.model_type == UNIGRAM_MODEL
            out: list[tuple[str, int, Any]] = [
                ("tokenizer.ggml.model", _STRING, "t5" if unigram else "llama"),
                ("tokenizer.ggml.tokens", _ARRAY, (_STRING, words)),
                ("tokenizer.ggml.scores", _ARRAY, (_F32, spm.scores)),
                ("tokenizer.ggml.token_type", _ARRAY, (_I32, spm.types)),
                ("tokenizer.ggml.add_space_prefix", _BOOL, spm.add_dummy_prefix),
            ]
            if unigram:
                out.append(("tokenizer.ggml.remove_extra_whitespaces", _BOOL, spm.remove_extra_whitespaces))
                if spm.charsmap:
                    out.append(("tokenizer.ggml.precompiled_charsmap", _ARRAY, (_U8, np.frombuffer(spm.charsmap, dtype=np.uint8))))
            out += [(f"tokenizer.ggml.{k}_token_id", _U32, v) for k, v in spm.special.items() if 0 <= v < len(words)]
            return out
    if isinstance(tok, HuggingFaceTokenizer):
        out = [("tokenizer.ggml.model", _STRING, "none"), ("tokenizer.ggml.tokens", _ARRAY, (_STRING, words))]
        try:
            doc = json.loads(tok.to_bytes().decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            doc = None
        model = doc.get("model") if isinstance(doc, dict) else None
        if isinstance(model, dict) and model.get("type") == "BPE" and "ByteLevel" in json.dumps(doc.get("pre_tokenizer")):
            merges = [m if isinstance(m, str) else " ".join(m) for m in model.get("merges", [])]
            token_types = np.full(len(words), NORMAL, dtype=np.int32)
            for added in doc.get("added_tokens") or []:
                i = added.get("id")
                if isinstance(i, int) and 0 <= i < len(words):
                    token_types[i] = CONTROL if added.get("special") else USER_DEFINED
            out = [
                ("tokenizer.ggml.model", _STRING, "gpt2"),
                ("tokenizer.ggml.tokens", _ARRAY, (_STRING, words)),
                ("tokenizer.ggml.token_type", _ARRAY, (_I32, token_types)),
                ("tokenizer.ggml.merges", _ARRAY, (_STRING, merges)),
            ]
        out.append(("tokenizer.huggingface.json", _STRING, tok.to_bytes().decode("utf-8")))
        return out
    return [("tokenizer.ggml.model", _STRING, "none"), ("tokenizer.ggml.tokens", _ARRAY, (_STRING, words))]


def write_gguf(file: Any, embeddings: Embeddings, *, dtype: str = "F32", unnormalize: bool = True, fsync: bool = False) -> None:
    """Write embeddings as a GGUF v3 file (little-endian) readable by gguf-py and :func:`load_gguf`.

    The word rows (norms multiplied back unless ``unnormalize=False``) go
    into ``token_embd.weight``; the words into ``tokenizer.ggml.tokens``;
    a SentencePiece tokenizer as a ``llama`` vocabulary (scores, token
    types, special ids), a byte-level BPE ``tokenizer.json`` as ``gpt2``
    (merges), any Hugging Face tokenizer also as
    ``tokenizer.huggingface.json``. A path is replaced atomically.

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
        For another ``dtype``; :class:`~finalfusion.errors.NonFiniteError`
        (a ``ValueError``), before anything is written, for a row with a
        NaN or infinite value, also one that multiplying its norm back
        overflows or that ``F16`` cannot hold (beyond 65504).

    Examples
    --------
    >>> import io
    >>> from finalfusion.storage import NdArray
    >>> emb = Embeddings(NdArray(np.eye(2, dtype=np.float32)), SimpleVocab(["a", "b"]))
    >>> buf = io.BytesIO(); write_gguf(buf, emb, dtype="F16")
    >>> load_gguf(buf.getvalue())["b"].tolist()
    [0.0, 1.0]
    """
    from finalfusion.io import atomic_output

    if dtype not in ("F32", "F16"):
        raise ValueError(f"dtype must be 'F32' or 'F16', got {dtype!r}")
    vocab = embeddings.vocab
    n, dims = len(vocab), embeddings.dims
    meta = embeddings.metadata
    prov = meta.get("gguf") if meta is not None else None
    arch = prov.get("architecture") if isinstance(prov, dict) else None
    kvs: list[tuple[str, int, Any]] = [("general.architecture", _STRING, arch if isinstance(arch, str) else "finalfusion")]
    name = prov.get("name") if isinstance(prov, dict) else None
    if isinstance(name, str):
        kvs.append(("general.name", _STRING, name))
    kvs.append(("general.alignment", _U32, DEFAULT_ALIGNMENT))
    kvs += _tokenizer_kv(vocab)
    head = _Out()
    for key, vtype, value in kvs:
        head.kv(key, vtype, value)
    tinfo = _Out()
    tinfo.string("token_embd.weight")
    tinfo.parts.append(struct.pack("<I2QIQ", 2, dims, n, _TYPE_ID[dtype], 0))
    body = struct.pack("<4sIQQ", MAGIC, 3, 1, len(kvs)) + head.data() + tinfo.data()
    body += b"\x00" * ((-len(body)) % DEFAULT_ALIGNMENT)
    out_dtype = "<f4" if dtype == "F32" else "<f2"
    check_rows_writable(embeddings, "GGUF", unnormalize, dtype="float32" if dtype == "F32" else "float16")
    with atomic_output(file, fsync=fsync) as f:
        f.write(body)
        step = _rows_per_block(dims)
        for lo in range(0, n, step):
            block = dense_matrix_with_norms(embeddings, unnormalize, lo, min(n, lo + step))
            f.write(block.astype(out_dtype, copy=False).tobytes())


def detect(sample: bytes) -> bool:
    """Whether ``sample`` starts a GGUF file (the magic is the same bytes in both byte orders).

    Examples
    --------
    >>> detect(b"GGUF\\x03\\x00\\x00\\x00"), detect(b"FiFu")
    (True, False)
    """
    return sample[:4] == MAGIC


register_format(
    "gguf",
    description="GGUF (llama.cpp) model: the token-embedding table and the tokenizer (mmap=True maps an F32 table)",
    extensions=(".gguf",),
    order=2,
    detector=lambda sample, path: detect(sample),
    loader=load_gguf,
    writer=write_gguf,
    options=("normalize", "mmap"),
    mismatch="no GGUF magic",
)
