"""Decoding ggml tensors into ``float32`` matrices: F32, F16, BF16, F64, Q8_0 and Q4_0 here, the other types through gguf-py."""

from __future__ import annotations

import functools
import mmap as _mmap
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from finalfusion._binary import check_dims
from finalfusion._threads import CPUS, run_tasks
from finalfusion.compat.gguf._layout import FORMAT, GGML_TYPES, GGUFFile, GGUFTensor
from finalfusion.errors import FormatError, import_extra

__all__ = ["DECODE_THREADS", "decode_tensor", "matrix_shape", "rows_per_block"]

#: Output bytes decoded per block (bounds the temporaries of a decode).
_BLOCK_BYTES: Final = 1 << 24
#: Threads that decode a table's blocks (the calling one included); results do not depend on it.
DECODE_THREADS: int = min(4, CPUS)


def rows_per_block(row_floats: int) -> int:
    """Rows of ``row_floats`` ``float32`` values in one block of :data:`_BLOCK_BYTES` (at least one): the unit of decoding and of writing."""
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
    needs = f"decoding a {name} tensor ({tensor.name})"
    gguf, quants = import_extra("gguf", needs, extra="models"), import_extra("gguf.quants", needs, extra="models")
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
    # The package is installed from here on: a type it does not know or cannot decode is this version's limit,
    # never "install the extra".
    try:
        qtype = gguf.GGMLQuantizationType(tensor.ggml_type)
    except ValueError:  # a type newer than the installed gguf package
        raise _not_decodable(tensor) from None
    try:
        out[...] = quants.dequantize(rows, qtype)
    except NotImplementedError:
        raise _not_decodable(tensor) from None
    except ValueError as exc:  # the package knows the type: it is the data it cannot decode
        raise FormatError(f"gguf cannot decode tensor {tensor.name}", chunk=FORMAT, expected=f"{tensor.type_name} blocks", found=str(exc)[:200]) from None


def _not_decodable(tensor: GGUFTensor) -> FormatError:
    name, version = tensor.type_name, _version()
    return FormatError(
        f"the installed gguf {version} cannot decode {name} tensors ({tensor.name})",
        chunk=FORMAT,
        expected=f"a type gguf {version} decodes (a newer gguf may decode {name})",
        found=f"{name} (ggml type {tensor.ggml_type})",
    )


def _version() -> str:
    from importlib import metadata

    try:
        return metadata.version("gguf")
    except metadata.PackageNotFoundError:  # a gguf without distribution metadata (a source checkout)
        return "(unknown version)"


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
        For a type that needs the ``gguf`` package when it is not installed.
    FormatError
        When the installed ``gguf`` does not know or cannot decode the type
        (the message names its version), or cannot decode the data.

    Examples
    --------
    >>> import io
    >>> from finalfusion import Embeddings
    >>> from finalfusion.compat.gguf import read_gguf, write_gguf
    >>> from finalfusion.storage import NdArray
    >>> from finalfusion.vocab import SimpleVocab
    >>> emb = Embeddings(NdArray(np.arange(4, dtype=np.float32).reshape(2, 2)), SimpleVocab(["a", "b"]))
    >>> buf = io.BytesIO(); write_gguf(buf, emb, dtype="F16")
    >>> head = read_gguf(buf.getvalue())
    >>> decode_tensor(head, head.tensors["token_embd.weight"]).tolist()
    [[0.0, 1.0], [2.0, 3.0]]
    """
    rows, dims = matrix_shape(tensor)
    if out is None:
        out = np.empty((rows, dims), dtype=np.float32)
    if out.size == 0:  # nothing to decode (gguf's dequantize cannot reshape an empty block)
        return out
    _, block, bsize = GGML_TYPES[tensor.ggml_type]
    row_bytes = dims // block * bsize
    step = rows_per_block(dims)
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


def matrix_shape(tensor: GGUFTensor) -> tuple[int, int]:
    ne = list(tensor.ne)
    while len(ne) > 2 and ne[-1] == 1:
        ne.pop()
    if len(ne) != 2:
        raise FormatError(
            f"tensor {tensor.name} is not a matrix", chunk=FORMAT, expected="2 dimensions (ne[0] = embedding size, ne[1] = tokens)", found=tensor.ne
        )
    check_dims(ne[0], offset=None, chunk=f"{FORMAT} tensor {tensor.name}", what="embedding size (ne[0])")
    return ne[1], ne[0]
