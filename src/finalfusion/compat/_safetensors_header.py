"""The header of a ``.safetensors`` file, parsed and checked without the ``safetensors`` package (see docs/models.md).

::

    u64 little-endian   n                 length of the JSON header
    n bytes             JSON object       {"<name>": {"dtype": "BF16", "shape": [rows, dims],
                                                      "data_offsets": [begin, end]},
                                           ..., "__metadata__": {"<key>": "<value>"}}
    the rest            tensor data       tensors back to back, row-major, little-endian;
                                          offsets are relative to the first byte after the header

Checked as strictly as the reference implementation checks it: a JSON
object without duplicate names, known dtypes, shapes whose element count
times the dtype size is exactly the byte range, and byte ranges that tile
the data section without gaps or overlaps. :mod:`finalfusion.compat.safetensors`
finds and decodes the embedding table with it.
"""

from __future__ import annotations

import functools
import json
import mmap
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from finalfusion._source import input_size
from finalfusion.errors import FormatError, Truncated

__all__ = [
    "DTYPE_BITS",
    "MAX_HEADER_BYTES",
    "DuplicateKey",
    "SafetensorsHeader",
    "TensorInfo",
    "parse_header",
    "read_safetensors_header",
    "reject_constant",
    "reject_duplicates",
    "short_value",
]

_FORMAT: Final = "safetensors"
#: The reference implementation refuses headers above 100 MB (``MAX_HEADER_SIZE``).
MAX_HEADER_BYTES: Final = 100_000_000
#: Size in bits of every dtype the safetensors format defines.
DTYPE_BITS: Final[dict[str, int]] = {
    "BOOL": 8,
    "U8": 8,
    "I8": 8,
    "F8_E5M2": 8,
    "F8_E4M3": 8,
    "F8_E8M0": 8,
    "I16": 16,
    "U16": 16,
    "F16": 16,
    "BF16": 16,
    "I32": 32,
    "U32": 32,
    "F32": 32,
    "C64": 64,
    "F64": 64,
    "I64": 64,
    "U64": 64,
    "F4": 4,
    "F6_E2M3": 6,
    "F6_E3M2": 6,
}


@dataclass(frozen=True)
class TensorInfo:
    """One tensor entry of a safetensors header.

    Attributes
    ----------
    name, dtype
        The tensor's name and safetensors dtype (``"F32"``, ``"BF16"``, ...).
    shape
        Its dimensions.
    begin, end
        Byte range relative to the start of the data section.

    Examples
    --------
    >>> TensorInfo("w", "F16", (2, 3), 0, 12).nbytes
    12
    """

    name: str
    dtype: str
    shape: tuple[int, ...]
    begin: int
    end: int

    @property
    def nbytes(self) -> int:
        """Length of the tensor's data in bytes.

        Examples
        --------
        >>> TensorInfo("embeddings", "F32", (3, 4), 16, 64).nbytes
        48
        """
        return self.end - self.begin


@dataclass(frozen=True)
class SafetensorsHeader:
    """A parsed and validated safetensors header.

    Attributes
    ----------
    data_start
        Absolute offset of the data section (``8 + header length``).
    tensors
        Tensor entries by name, in the order of the header.
    metadata
        The ``__metadata__`` table (string to string), if any.

    Examples
    --------
    >>> import json, struct
    >>> head = json.dumps({"t": {"dtype": "F32", "shape": [1, 2], "data_offsets": [0, 8]}}).encode()
    >>> h = read_safetensors_header(struct.pack("<Q", len(head)) + head + bytes(8))
    >>> h.tensors["t"].shape, h.data_start
    ((1, 2), 72)
    """

    data_start: int
    tensors: dict[str, TensorInfo]
    metadata: dict[str, str]


def read_safetensors_header(data: Any, *, name: str = "<bytes>") -> SafetensorsHeader:
    """Parse and validate the header of a safetensors file.

    Parameters
    ----------
    data
        The file's bytes, or a seekable binary file object positioned at its
        start (only the header is read).
    name
        Name of the file, for messages.

    Returns
    -------
    SafetensorsHeader

    Raises
    ------
    FormatError
        (format ``safetensors``) naming what was expected, what was found and
        the byte offset: a header length past the end of the file, a header
        that is not UTF-8 JSON or not an object, duplicate names, an unknown
        dtype, a shape that is not a list of non-negative integers or whose
        byte size overflows or differs from the byte range, byte ranges out
        of order, overlapping, with gaps or past the end of the file.
        :class:`~finalfusion.errors.Truncated` when the file is shorter than
        its header says.

    Examples
    --------
    >>> read_safetensors_header(b"\\x08\\x00\\x00\\x00\\x00\\x00\\x00\\x00[1, 2]  ")
    Traceback (most recent call last):
    ...
    finalfusion.errors.FormatError: safetensors: the JSON header is not an object: expected a JSON object, found list (at byte offset 8)
    """
    if isinstance(data, (bytes, bytearray, memoryview, mmap.mmap)):
        buf = memoryview(data).cast("B")
        size = len(buf)
        prefix = bytes(buf[:8])
    else:
        data.seek(0)
        known = input_size(data)
        if known is None:
            raise TypeError("read_safetensors_header needs the file's bytes or a seekable binary file object of known size")
        size = known
        prefix = data.read(8)
    if len(prefix) < 8:
        raise Truncated("the file ends inside the header length", offset=0, chunk=_FORMAT, expected="8 bytes (u64 header length)", found=f"{len(prefix)} bytes")
    (n,) = struct.unpack("<Q", prefix)
    if n > MAX_HEADER_BYTES:
        raise FormatError("header length above the format's limit", offset=0, chunk=_FORMAT, expected=f"at most {MAX_HEADER_BYTES} bytes", found=n)
    if n > size - 8:
        raise Truncated(
            "the header length runs past the end of the file", offset=0, chunk=_FORMAT, expected=f"at most {size - 8} bytes of header", found=f"{n} bytes"
        )
    raw = bytes(buf[8 : 8 + n]) if isinstance(data, (bytes, bytearray, memoryview, mmap.mmap)) else data.read(n)
    if len(raw) != n:
        raise Truncated("the file ends inside the header", offset=8 + len(raw), chunk=_FORMAT, expected=f"{n} bytes of header", found=f"{len(raw)} bytes")
    return parse_header(raw, size, name)


def reject_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise DuplicateKey(key)
        out[key] = value
    return out


def reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


class DuplicateKey(Exception):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def parse_header(raw: bytes | bytearray, size: int | None, name: str) -> SafetensorsHeader:
    data_start = 8 + len(raw)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise FormatError("the header is not UTF-8", offset=8 + exc.start, chunk=_FORMAT, expected="UTF-8 JSON", found=raw[exc.start : exc.start + 8]) from None
    # The reference implementation pads the header with spaces to a multiple of 8 bytes; JSON allows surrounding whitespace.
    if not text.lstrip(" ").startswith("{"):
        kind = _json_kind(text)
        raise FormatError("the JSON header is not an object", offset=8, chunk=_FORMAT, expected="a JSON object", found=kind)
    try:
        obj = json.loads(text, object_pairs_hook=reject_duplicates, parse_constant=reject_constant)
    except DuplicateKey as dup:
        raise FormatError(
            "the header names a tensor twice", offset=_key_offset(text, dup.key, last=True), chunk=_FORMAT, expected="unique names", found=dup.key
        ) from None
    except json.JSONDecodeError as exc:
        at = 8 + len(text[: exc.pos].encode("utf-8"))
        raise FormatError("the header is not valid JSON", offset=at, chunk=_FORMAT, expected="a JSON object", found=exc.msg) from None
    except ValueError as exc:  # NaN/Infinity (not JSON), integers beyond Python's digit limit
        raise FormatError("the header is not valid JSON", offset=8, chunk=_FORMAT, expected="a JSON object", found=str(exc)[:80]) from None
    except RecursionError:
        raise FormatError("the header nests too deeply", offset=8, chunk=_FORMAT, expected="a flat JSON object", found="deep nesting") from None
    if not isinstance(obj, dict):
        raise FormatError("the JSON header is not an object", offset=8, chunk=_FORMAT, expected="a JSON object", found=type(obj).__name__)
    metadata: dict[str, str] = {}
    tensors: dict[str, TensorInfo] = {}
    for key, entry in obj.items():
        # A key's byte offset is searched for only when an error names it: once per header, never once per key
        # (a search per key made a 2 MB header of short entries quadratic).
        key_at = functools.partial(_key_offset, text, key)
        if key == "__metadata__":
            if not isinstance(entry, dict) or not all(isinstance(v, str) for v in entry.values()):
                raise FormatError(
                    "__metadata__ must map strings to strings", offset=key_at(), chunk=_FORMAT, expected="an object of strings", found=short_value(entry)
                )
            metadata = dict(entry)
            continue
        tensors[key] = _tensor_entry(key, entry, key_at)
    _check_ranges(tensors, None if size is None else size - data_start, data_start, text)
    return SafetensorsHeader(data_start, tensors, metadata)


def _key_offset(text: str, key: str, last: bool = False) -> int:
    """Byte offset in the file of ``key`` in the header ``text`` (for messages: called once, when an error is raised)."""
    return 8 + len(text[: _find_key(text, key, last)].encode("utf-8"))


def _json_kind(text: str) -> str:
    try:
        return type(json.loads(text)).__name__
    except (ValueError, RecursionError):
        return repr(text.strip()[:20])


def _find_key(text: str, key: str, last: bool = False) -> int:
    needle = json.dumps(key)
    at = text.rfind(needle) if last else text.find(needle)
    return max(at, 0)


def short_value(value: Any) -> str:
    """A value for a message, at most 80 characters; a long list or a huge integer is never converted whole."""
    if isinstance(value, list) and len(value) > 8:
        return short_value(value[:8])[:-1] + f", ... ({len(value)} items)]"
    if isinstance(value, list) and any(_is_int(v) and v.bit_length() > 96 for v in value):
        return "[" + ", ".join(_short_int(v) if _is_int(v) else short_value(v) for v in value) + "]"
    if _is_int(value):
        return _short_int(value)
    text = json.dumps(value) if not isinstance(value, str) else value
    return text if len(text) <= 80 else text[:77] + "..."


def _short_int(value: int) -> str:
    """An integer for a message: its digits, or its size when it has more than 30 (a huge one is never converted whole)."""
    return str(value) if value.bit_length() <= 96 else f"an integer of {value.bit_length()} bits"


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _tensor_entry(key: str, entry: Any, where_at: Callable[[], int]) -> TensorInfo:
    where = f"{_FORMAT} tensor {key!r}"
    if not isinstance(entry, dict):
        raise FormatError(
            "a tensor entry must be an object", offset=where_at(), chunk=where, expected='{"dtype", "shape", "data_offsets"}', found=short_value(entry)
        )
    missing = [f for f in ("dtype", "shape", "data_offsets") if f not in entry]
    if missing:
        raise FormatError(
            "a tensor entry lacks fields", offset=where_at(), chunk=where, expected="dtype, shape and data_offsets", found=f"missing {', '.join(missing)}"
        )
    dtype, shape, offsets = entry["dtype"], entry["shape"], entry["data_offsets"]
    if not isinstance(dtype, str) or dtype not in DTYPE_BITS:
        raise FormatError("unknown dtype", offset=where_at(), chunk=where, expected=f"one of {sorted(DTYPE_BITS)}", found=short_value(dtype))
    if not isinstance(shape, list) or not all(_is_int(d) and d >= 0 for d in shape):
        raise FormatError("shape must be a list of non-negative integers", offset=where_at(), chunk=where, expected="[d0, d1, ...]", found=short_value(shape))
    if not isinstance(offsets, list) or len(offsets) != 2 or not all(_is_int(o) and o >= 0 for o in offsets):
        raise FormatError("data_offsets must be two non-negative integers", offset=where_at(), chunk=where, expected="[begin, end]", found=short_value(offsets))
    begin, end = offsets
    if end < begin:
        raise FormatError("data_offsets end before they begin", offset=where_at(), chunk=where, expected="begin <= end", found=short_value(offsets))
    # Dimension by dimension, each checked before it is multiplied in: a product of huge integers
    # (JSON allows thousands of digits each) is never computed, nor printed whole.
    bits = DTYPE_BITS[dtype]
    for i, d in enumerate(shape):
        if d >= 2**64:
            raise FormatError(
                f"dimension {i} of the shape does not fit 64 bits", offset=where_at(), chunk=where, expected="dimensions below 2**64", found=_short_int(d)
            )
        bits *= d
        if bits >= 8 * 2**64:
            raise FormatError(
                "the shape's byte size overflows 64 bits",
                offset=where_at(),
                chunk=where,
                expected="a byte size below 2**64",
                found=f"{len(shape)} dimensions, overflowing at dimension {i}",
            )
    if bits % 8 or bits // 8 != end - begin:
        raise FormatError(
            "the shape and dtype disagree with the byte range",
            offset=where_at(),
            chunk=where,
            expected=f"{bits / 8:g} bytes ({' x '.join(map(str, shape)) or 'scalar'} {dtype})",
            found=f"{end - begin} bytes (data_offsets [{begin}, {end}])",
        )
    return TensorInfo(key, dtype, tuple(shape), begin, end)


def _check_ranges(tensors: dict[str, TensorInfo], data_len: int | None, data_start: int, text: str) -> None:
    """Byte ranges must tile the data section exactly, as the reference implementation requires (``data_len`` ``None``: a stream, checked as it is read)."""
    pos = 0
    for info in sorted(tensors.values(), key=lambda t: (t.begin, t.end)):
        if data_len is not None and info.end > data_len:
            raise Truncated(
                "a tensor's data runs past the end of the file",
                offset=data_start + info.begin,
                chunk=f"{_FORMAT} tensor {info.name!r}",
                expected=f"data_offsets within the {data_len} data bytes",
                found=[info.begin, info.end],
            )
        if info.begin != pos:
            what = "overlaps the previous tensor" if info.begin < pos else "leaves a gap after the previous tensor"
            raise FormatError(
                f"a tensor's byte range {what}",
                offset=data_start + info.begin,
                chunk=f"{_FORMAT} tensor {info.name!r}",
                expected=f"data_offsets beginning at {pos}",
                found=[info.begin, info.end],
            )
        pos = info.end
    if data_len is not None and pos != data_len:
        raise FormatError(
            "bytes after the last tensor", offset=data_start + pos, chunk=_FORMAT, expected=f"{pos} data bytes", found=f"{data_len} bytes after the header"
        )
