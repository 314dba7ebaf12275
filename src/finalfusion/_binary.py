"""Bounds-checked reading and little-endian writing of binary fields.

:class:`ByteReader` walks a buffer (``bytes``, ``bytearray``, ``memoryview``
or ``mmap``) in one byte order (little-endian unless told otherwise) with
``u32`` or ``u64`` string lengths (finalfusion's and GGUF's), and raises
:class:`~finalfusion.errors.Truncated` *before* reading past its end, so ``struct.error`` or ``IndexError`` never reach a
user. :class:`ByteWriter` writes to a binary file while tracking the
absolute offset, which the alignment padding (:func:`padding`) depends on.
Both are public as ``finalfusion.chunks.ByteReader`` and
``finalfusion.chunks.ByteWriter`` (the types of the chunk classes'
``read_payload`` and ``write_payload``).
"""

from __future__ import annotations

import array
import mmap
import struct
from typing import Any, BinaryIO, Final

import numpy as np
import numpy.typing as npt

from finalfusion import limits
from finalfusion.errors import FormatError, Truncated

__all__ = ["Buffer", "ByteReader", "ByteWriter", "check_array_size", "check_dims", "invalid_utf8", "padding"]

#: A whole file in memory: the contents as bytes, a (writable) byte array or view, or a read-only map.
Buffer = bytes | bytearray | memoryview | mmap.mmap

_U32: Final = struct.Struct("<I")
_U64: Final = struct.Struct("<Q")
#: ``(u32, u64)`` of each byte order a :class:`ByteReader` reads.
_INTS: Final = {"<": (_U32, _U64), ">": (struct.Struct(">I"), struct.Struct(">Q"))}
_U32_MAX: Final = 2**32 - 1
_INTP_MAX: Final = int(np.iinfo(np.intp).max)


def padding(offset: int) -> int:
    """Number of padding bytes written before an ``f32`` array at ``offset``.

    Quirk (docs/format.md §4): the result is ``4 - offset % 4`` and therefore
    **never zero** -- an already aligned position gets four bytes. Both
    reference implementations write and skip padding this way, so a reader
    that skips zero bytes at an aligned position misreads their files.

    Parameters
    ----------
    offset
        Absolute file offset right after the chunk's last header field.

    Returns
    -------
    int
        1, 2, 3 or 4.

    Examples
    --------
    >>> [padding(o) for o in (109, 110, 111, 112)]
    [3, 2, 1, 4]
    """
    return 4 - offset % 4


def invalid_utf8(what: str, raw: bytes | bytearray | memoryview, exc: UnicodeDecodeError, start: int, chunk: str | None) -> FormatError:
    """The :class:`FormatError` for ``raw`` (read at byte ``start``) failing to decode as UTF-8.

    Examples
    --------
    >>> raw = b"zee\\xbfn"
    >>> try:
    ...     raw.decode("utf-8")
    ... except UnicodeDecodeError as exc:
    ...     print(invalid_utf8("word", raw, exc, 100, "SimpleVocab"))
    SimpleVocab: word is not valid UTF-8 (invalid start byte): expected UTF-8, found b'zee\\xbfn' (at byte offset 103)
    """
    return FormatError(
        f"{what} is not valid UTF-8 ({exc.reason})", offset=start + exc.start, chunk=chunk, expected="UTF-8", found=raw[max(0, exc.start - 16) : exc.end + 16]
    )


class ByteReader:
    """Read fields from a buffer, never past ``end``.

    Parameters
    ----------
    buf
        The whole file (``bytes``, ``bytearray``, ``memoryview`` or a
        read-only ``mmap``). Offsets are absolute positions in it.
    pos
        Where to start.
    end
        Bytes at or after this offset are out of bounds (default: the end).
    chunk
        Name used in error messages; callers update it as they go.
    order
        Byte order of every integer and :meth:`scalar`: ``"<"`` (little-endian,
        finalfusion's) or ``">"`` (big-endian, as some GGUF files are).
    length_bytes
        Width of the length prefix of :meth:`string` and :meth:`strings`:
        4 (a ``u32``, finalfusion's) or 8 (a ``u64``, GGUF's).

    Examples
    --------
    >>> r = ByteReader(b"\\x02\\x00\\x00\\x00ab")
    >>> r.u32(), r.take(2), r.remaining
    (2, b'ab', 0)
    >>> r = ByteReader(b"\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x02ab", order=">", length_bytes=8)
    >>> r.string(), r.remaining
    ('ab', 0)
    """

    __slots__ = ("_len", "_u32", "_u64", "buf", "chunk", "end", "length_bytes", "order", "pos")

    def __init__(self, buf: Buffer, pos: int = 0, end: int | None = None, chunk: str = "file", *, order: str = "<", length_bytes: int = 4) -> None:
        if order not in _INTS:
            raise ValueError(f"order must be '<' or '>', got {order!r}")
        if length_bytes not in (4, 8):
            raise ValueError(f"length_bytes must be 4 or 8, got {length_bytes!r}")
        self.buf = buf
        self.pos = pos
        self.end = len(buf) if end is None else end
        self.chunk = chunk
        self.order = order
        self.length_bytes = length_bytes
        self._u32, self._u64 = _INTS[order]
        self._len = self._u32 if length_bytes == 4 else self._u64

    @property
    def remaining(self) -> int:
        """Bytes left before ``end``.

        Examples
        --------
        >>> r = ByteReader(b"abcdef", end=4)
        >>> r.take(1), r.remaining
        (b'a', 3)
        """
        return self.end - self.pos

    def error(self, message: str, *, expected: object = None, found: object = None, offset: int | None = None) -> FormatError:
        """Build a :class:`FormatError` located at the current position.

        Examples
        --------
        >>> r = ByteReader(b"\\x07\\x00\\x00\\x00", chunk="NdArray")
        >>> print(r.error("bad type id", expected=10, found=r.u32()))
        NdArray: bad type id: expected 10, found 7 (at byte offset 4)
        """
        return FormatError(
            message,
            offset=self.pos if offset is None else offset,
            chunk=self.chunk,
            expected=expected,
            found=found,
        )

    def require(self, n: int, what: str) -> None:
        """Raise :class:`Truncated` unless ``n`` more bytes are available.

        Examples
        --------
        >>> ByteReader(b"ab", chunk="SimpleVocab").require(4, "word")
        Traceback (most recent call last):
        ...
        finalfusion.errors.Truncated: SimpleVocab: data ends inside word: expected 4 bytes, found 2 bytes (at byte offset 0)
        """
        if n > self.end - self.pos:
            raise Truncated(
                f"data ends inside {what}",
                offset=self.pos,
                chunk=self.chunk,
                expected=f"{n} bytes",
                found=f"{max(self.end - self.pos, 0)} bytes",
            )

    def u32(self, what: str = "u32") -> int:
        """Read a ``u32`` (in the reader's byte order).

        Examples
        --------
        >>> ByteReader(b"\\x01\\x00\\x00\\x00").u32(), ByteReader(b"\\x00\\x00\\x00\\x01", order=">").u32()
        (1, 1)
        """
        self.require(4, what)
        (value,) = self._u32.unpack_from(self.buf, self.pos)
        self.pos += 4
        return int(value)

    def u64(self, what: str = "u64") -> int:
        """Read a ``u64`` (in the reader's byte order).

        Examples
        --------
        >>> ByteReader((2**40).to_bytes(8, "little")).u64() == 2**40
        True
        """
        self.require(8, what)
        (value,) = self._u64.unpack_from(self.buf, self.pos)
        self.pos += 8
        return int(value)

    def scalar(self, code: str, what: str = "value") -> Any:
        """Read one field of :mod:`struct` type ``code`` (``"B"``, ``"i"``, ``"f"``, ``"?"`` ...) in the reader's byte order.

        Examples
        --------
        >>> r = ByteReader(b"\\x3f\\x80\\x00\\x00\\x01", order=">")
        >>> r.scalar("f"), r.scalar("?"), r.remaining
        (1.0, True, 0)
        """
        fmt = self.order + code
        n = struct.calcsize(fmt)
        self.require(n, what)
        (value,) = struct.unpack_from(fmt, self.buf, self.pos)
        self.pos += n
        return value

    def take(self, n: int, what: str = "bytes") -> bytes:
        """Read ``n`` raw bytes (copied).

        Examples
        --------
        >>> r = ByteReader(b"FiFu\\x00")
        >>> r.take(4), r.pos
        (b'FiFu', 4)
        """
        self.require(n, what)
        data = bytes(self.buf[self.pos : self.pos + n])
        self.pos += n
        return data

    def skip(self, n: int, what: str = "padding") -> None:
        """Skip ``n`` bytes.

        Examples
        --------
        >>> r = ByteReader(b"\\x00\\x00\\x07\\x00\\x00\\x00")
        >>> r.skip(2); r.u32()
        7
        """
        self.require(n, what)
        self.pos += n

    def skip_padding(self) -> None:
        """Skip the alignment padding that precedes an ``f32`` array (docs/format.md §4).

        Examples
        --------
        >>> r = ByteReader(bytes(16), pos=5)
        >>> r.skip_padding(); r.pos
        8
        """
        self.skip(padding(self.pos), "alignment padding")

    def string(self, what: str = "string") -> str:
        """Read a ``u32`` (``u64`` with ``length_bytes=8``) byte length followed by that many bytes of UTF-8.

        Examples
        --------
        >>> ByteReader(b"\\x03\\x00\\x00\\x00K\\xc3\\xb6").string()
        'Kö'
        """
        start = self.pos
        width = self.length_bytes
        n = self.u32(f"length of {what}") if width == 4 else self.u64(f"length of {what}")
        self.require(n, what)
        raw = self.buf[self.pos : self.pos + n]
        try:
            text = str(raw, "utf-8")
        except UnicodeDecodeError as exc:
            raise self._utf8_error(what, raw, exc, start + width) from None
        self.pos += n
        return text

    def strings(self, count: int, what: str = "word") -> list[str]:
        """Read ``count`` length-prefixed UTF-8 strings.

        The count is checked against the remaining bytes (each string needs
        at least its four -- or eight -- length bytes) before anything is
        allocated.

        Examples
        --------
        >>> ByteReader(b"\\x01\\x00\\x00\\x00a\\x02\\x00\\x00\\x00bc").strings(2)
        ['a', 'bc']
        """
        width = self.length_bytes
        if count > self.remaining // width:
            raise Truncated(
                f"too few bytes for {count} {what}s",
                offset=self.pos,
                chunk=self.chunk,
                expected=f"at least {width * count} bytes",
                found=f"{self.remaining} bytes",
            )
        words = self._strings_fast(count)
        if words is not None:
            return words
        buf = self.buf
        pos = self.pos
        end = self.end
        unpack = self._len.unpack_from
        raw: list[bytes | bytearray | memoryview] = []
        append = raw.append
        for _ in range(count):
            if pos + width > end:
                self.pos = pos
                self.require(width, f"length of {what} {len(raw)}")
            (n,) = unpack(buf, pos)
            pos += width
            nxt = pos + n
            if nxt > end:
                self.pos = pos
                self.require(n, f"{what} {len(raw)}")
            append(buf[pos:nxt])
            pos = nxt
        try:
            words = [str(b, "utf-8") for b in raw]
        except UnicodeDecodeError:
            self._locate_bad_utf8(raw, what)
            raise  # pragma: no cover - _locate_bad_utf8 always raises
        self.pos = pos
        return words

    def _strings_fast(self, count: int) -> list[str] | None:
        """Decode ``count`` length-prefixed strings, a slice of them at a time.

        A Python loop only chains the ``u32`` (or ``u64``) lengths into
        offsets. For each slice of :data:`_DECODE_WORDS` strings, numpy then
        replaces each 4-byte (8-byte) length by a single ASCII separator byte that no string in the
        slice contains, so one strict UTF-8 decode (an ASCII separator also
        stops a multi-byte sequence from straddling two strings) and one
        ``str.split`` produce the slice's strings. Slicing keeps the
        temporaries small: they would otherwise stay in the process's heap
        next to the words and count towards the peak memory of a load.
        Returns ``None`` when anything is off (truncation, bad UTF-8, no free
        separator): the caller's per-string loop then reports the precise
        error.
        """
        if count < 64:
            return None
        buf, end, width = self.buf, self.end, self.length_bytes
        unpack = self._len.unpack_from
        # The result is allocated once, at its final size, before any temporary.
        words: list[str] = [""] * count
        # array('q'): the offsets are stored as C integers, not int objects.
        offsets = array.array("q", bytes(8 * min(count, _DECODE_WORDS)))
        pos = self.pos
        for lo in range(0, count, _DECODE_WORDS):
            m = min(_DECODE_WORDS, count - lo)
            first = pos
            try:
                for i in range(m):
                    offsets[i] = pos
                    pos += width + unpack(buf, pos)[0]
            except (struct.error, OverflowError):  # OverflowError: u64 lengths past any offset
                return None
            if pos > end:
                return None
            part = _split_strings(buf, first, pos, offsets, m, width)
            if part is None:
                return None
            words[lo : lo + m] = part
        self.pos = pos
        return words

    def _locate_bad_utf8(self, raw: list[bytes | bytearray | memoryview], what: str) -> None:
        pos = self.pos
        width = self.length_bytes
        for i, b in enumerate(raw):
            pos += width
            try:
                str(b, "utf-8")
            except UnicodeDecodeError as exc:
                raise self._utf8_error(f"{what} {i}", b, exc, pos) from None
            pos += len(b)

    def _utf8_error(self, what: str, raw: bytes | bytearray | memoryview, exc: UnicodeDecodeError, start: int) -> FormatError:
        """The error for string ``raw`` (its bytes start at ``start``) failing to decode: :func:`invalid_utf8`.

        A format whose messages predate this reader may override it.
        """
        return invalid_utf8(what, raw, exc, start, self.chunk)

    def array(self, dtype: str, shape: tuple[int, ...], what: str = "array") -> npt.NDArray[Any]:
        """Return a zero-copy view of ``shape`` elements of ``dtype``.

        The view is writable when the buffer is (``bytearray``) and
        read-only otherwise (``bytes``, read-only ``mmap``).

        Examples
        --------
        >>> import numpy as np
        >>> a = ByteReader(np.arange(4, dtype="<f4").tobytes()).array("<f4", (2, 2))
        >>> a.tolist(), a.flags.writeable
        ([[0.0, 1.0], [2.0, 3.0]], False)
        """
        dt = np.dtype(dtype)
        extent = dt.itemsize
        for dim in shape:
            extent *= max(dim, 1)
        if extent > _INTP_MAX:
            # numpy cannot describe such a shape, even when a zero dimension makes it fit in the bytes left.
            raise self.error(f"{what} has a shape numpy cannot represent", expected=f"non-zero dimensions x item size <= {_INTP_MAX} bytes", found=shape)
        count = 1
        for dim in shape:
            count *= dim
        nbytes = count * dt.itemsize
        self.require(nbytes, what)
        arr = np.frombuffer(self.buf, dtype=dt, count=count, offset=self.pos).reshape(shape)
        self.pos += nbytes
        return arr

    def unpack(self, fmt: struct.Struct, what: str = "fields") -> tuple[Any, ...]:
        """Read the fields of ``fmt``, a :class:`struct.Struct` that names its own byte order (fixed-size headers of foreign formats).

        Examples
        --------
        >>> import struct
        >>> ByteReader(b"\\x00\\x01\\x02").unpack(struct.Struct(">HB"))
        (1, 2)
        """
        self.require(fmt.size, what)
        values = fmt.unpack_from(self.buf, self.pos)
        self.pos += fmt.size
        return values


def check_array_size(reader: ByteReader, count: int, itemsize: int, what: str) -> None:
    """Fail before allocating when ``count`` items of ``itemsize`` bytes cannot fit in what ``reader`` has left.

    Raises
    ------
    Truncated
        As :meth:`ByteReader.require` does for any field that runs past the end.

    Examples
    --------
    >>> check_array_size(ByteReader(bytes(8), chunk="NdNorms"), 3, 4, "3 f32 norms")
    Traceback (most recent call last):
    ...
    finalfusion.errors.Truncated: NdNorms: 3 f32 norms does not fit in the chunk: expected 12 bytes, found 8 bytes (at byte offset 0)
    """
    if count * itemsize > reader.remaining:
        raise Truncated(
            f"{what} does not fit in the chunk",
            offset=reader.pos,
            chunk=reader.chunk,
            expected=f"{count * itemsize} bytes",
            found=f"{reader.remaining} bytes",
        )


def check_dims(dims: int, *, offset: int | None, chunk: str | None, what: str = "number of dimensions") -> None:
    """Refuse a dimension count no embedding can have: above :data:`finalfusion.limits.MAX_DIMS`.

    A file may announce a huge width with few (or zero) rows and stay tiny;
    the first lookup would then allocate ``4 * dims`` bytes per row. Every
    reader calls this before it builds anything from ``dims``.

    Raises
    ------
    FormatError
        Naming the limit and how to raise it.

    Examples
    --------
    >>> check_dims(300, offset=8, chunk="NdArray")
    >>> check_dims(2**32 - 1, offset=8, chunk="NdArray")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    finalfusion.errors.FormatError: NdArray: number of dimensions exceeds finalfusion.limits.MAX_DIMS ...: expected at most 1048576, found 4294967295 ...
    """
    cap = limits.MAX_DIMS
    if dims > cap:
        raise FormatError(
            f"{what} exceeds finalfusion.limits.MAX_DIMS (one row would take {4 * dims} bytes; raise the limit if the file is genuine)",
            offset=offset,
            chunk=chunk,
            expected=f"at most {cap}",
            found=dims,
        )


#: Strings decoded at once by :meth:`ByteReader.strings` (a few hundred KiB of temporaries).
_DECODE_WORDS: Final = 1 << 15


def _split_strings(buf: Buffer, first: int, last: int, offsets: array.array[int], m: int, width: int = 4) -> list[str] | None:
    """The ``m`` strings in ``buf[first:last]`` whose ``width``-byte length prefixes start at ``offsets[:m]``."""
    region = np.frombuffer(buf, dtype=np.uint8, count=last - first, offset=first)
    prefix = np.frombuffer(offsets, dtype=np.int64, count=m) - first
    keep = np.ones(len(region), dtype=bool)
    for k in range(1, width):
        keep[prefix + k] = False
    keep[prefix] = False
    used = np.bincount(region[keep], minlength=256)[:128]
    free = np.flatnonzero(used == 0)
    if len(free) == 0:
        return None
    sep = int(free[0])
    out = region.copy()
    out[prefix] = sep
    keep[prefix] = True
    del region, prefix
    try:
        text = out[keep].tobytes().decode("utf-8")
    except UnicodeDecodeError:
        return None
    del out, keep
    words: list[str] = text.split(chr(sep))
    del words[0]
    return words


class ByteWriter:
    """Write little-endian fields to a binary file, tracking the absolute offset.

    Attributes
    ----------
    file
        The binary file written to.
    pos
        The absolute offset of the next byte written (padding depends on it).

    Examples
    --------
    >>> import io
    >>> w = ByteWriter(io.BytesIO())
    >>> w.u32(7); w.string("ab"); w.pos
    10
    """

    __slots__ = ("file", "pos")

    def __init__(self, file: BinaryIO, pos: int = 0) -> None:
        self.file = file
        self.pos = pos

    def raw(self, data: bytes | bytearray | memoryview) -> None:
        """Write bytes as they are.

        Examples
        --------
        >>> import io
        >>> w = ByteWriter(io.BytesIO())
        >>> w.raw(b"FiFu"); w.pos, w.file.getvalue()
        (4, b'FiFu')
        """
        n = memoryview(data).nbytes
        self.file.write(data)
        self.pos += n

    def u32(self, value: int) -> None:
        """Write a ``u32``; values outside its range raise ``ValueError``.

        Examples
        --------
        >>> import io
        >>> w = ByteWriter(io.BytesIO())
        >>> w.u32(1); w.file.getvalue()
        b'\\x01\\x00\\x00\\x00'
        >>> w.u32(2**32)
        Traceback (most recent call last):
        ...
        ValueError: 4294967296 does not fit in a u32 field
        """
        if not 0 <= value <= _U32_MAX:
            raise ValueError(f"{value} does not fit in a u32 field")
        self.raw(_U32.pack(value))

    def u64(self, value: int) -> None:
        """Write a ``u64``.

        Examples
        --------
        >>> import io
        >>> w = ByteWriter(io.BytesIO())
        >>> w.u64(2**40); w.file.getvalue() == (2**40).to_bytes(8, "little")
        True
        """
        self.raw(_U64.pack(value))

    def string(self, text: str) -> None:
        """Write a ``u32`` byte length and the UTF-8 bytes of ``text``.

        Examples
        --------
        >>> import io
        >>> w = ByteWriter(io.BytesIO())
        >>> w.string("Kö"); w.file.getvalue()
        b'\\x03\\x00\\x00\\x00K\\xc3\\xb6'
        """
        data = text.encode("utf-8")
        self.u32(len(data))
        self.raw(data)

    def padding(self) -> None:
        """Write the zero padding that precedes an ``f32`` array (docs/format.md §4).

        Examples
        --------
        >>> import io
        >>> w = ByteWriter(io.BytesIO(), pos=5)
        >>> w.padding(); w.pos
        8
        """
        self.raw(b"\x00" * padding(self.pos))

    def array(self, arr: npt.ArrayLike, dtype: str) -> None:
        """Write an array as C-ordered ``dtype`` (little-endian) bytes, without copying when possible.

        Examples
        --------
        >>> import io
        >>> w = ByteWriter(io.BytesIO())
        >>> w.array([1.0, 2.0], "<f4"); w.file.getvalue()
        b'\\x00\\x00\\x80?\\x00\\x00\\x00@'
        """
        data = np.ascontiguousarray(arr, dtype=np.dtype(dtype))
        if data.size:
            self.raw(memoryview(data).cast("B"))  # type: ignore[arg-type]
