"""The stream side of the byte cursor: exact reads from an input whose size may be unknown.

A reader that walks a buffer uses :class:`~finalfusion._binary.ByteReader`.
A reader that cannot have its input in one buffer -- gzip data, a pipe, a
file object, or a file it reads piece by piece -- reads it through
:class:`StreamReader` (or, for one block of a plain file,
:func:`read_exactly`): fixed-size fields arrive exactly and are parsed with
the same bounds-checked ``ByteReader`` (:meth:`StreamReader.fields`), big
arrays go straight into their memory (:meth:`StreamReader.into`, no
copy), and a scan that read ahead gives back what it did not use
(:meth:`StreamReader.unread`). Offsets in errors are those of the
(decompressed) input, and a stream that ends early raises
:class:`~finalfusion.errors.Truncated` worded as the cursor's own.

fastText reads its whole file this way; safetensors reads its tables, and
LightSeq its protobuf fields from a stream, with it.
"""

from __future__ import annotations

import struct
from typing import IO, Any

from finalfusion._binary import ByteReader
from finalfusion._source import fill, input_size, read_into, size_bound, skip
from finalfusion.errors import Truncated

__all__ = ["StreamReader", "read_exactly"]


def _short(what: str, chunk: str, offset: int | None, wanted: int, got: int) -> Truncated:
    return Truncated(f"data ends inside {what}", offset=offset, chunk=chunk, expected=f"{wanted} bytes", found=f"{got} bytes")


def read_exactly(f: IO[bytes], view: memoryview, what: str, *, chunk: str, offset: int | None) -> None:
    """Fill ``view`` from ``f``, zero-copy; :class:`~finalfusion.errors.Truncated` naming ``offset`` if ``f`` ends first.

    Examples
    --------
    >>> import io
    >>> view = memoryview(bytearray(4))
    >>> read_exactly(io.BytesIO(b"abcd"), view, "a field", chunk="x", offset=0); bytes(view)
    b'abcd'
    >>> read_exactly(io.BytesIO(b"ab"), view, "a field", chunk="x", offset=8)
    Traceback (most recent call last):
    ...
    finalfusion.errors.Truncated: x: data ends inside a field: expected 4 bytes, found 2 bytes (at byte offset 8)
    """
    got = read_into(f, view)
    if got < len(view):
        raise _short(what, chunk, offset, len(view), got)


class StreamReader:
    """Exact reads from a binary stream, counting the absolute offset, with bytes put back in front.

    Parameters
    ----------
    f
        The stream, read from its current position (offset 0).

    Examples
    --------
    >>> import io, struct
    >>> s = StreamReader(io.BytesIO(struct.pack("<iq", 7, -1) + b"rest"))
    >>> s.fields(struct.Struct("<iq"), "a header", "demo"), s.pos, s.remaining()
    ((7, -1), 12, 4)
    >>> s.exact(5, "the tail", "demo")
    Traceback (most recent call last):
    ...
    finalfusion.errors.Truncated: demo: data ends inside the tail: expected 5 bytes, found 4 bytes (at byte offset 12)
    """

    __slots__ = ("f", "pending", "pos", "size")

    def __init__(self, f: IO[bytes]) -> None:
        self.f = f
        #: Offset of the next byte in the (decompressed) input.
        self.pos = 0
        #: Bytes given back by :meth:`unread`, delivered before the stream's.
        self.pending = b""
        #: Bytes in the input from here, if known cheaply (a plain file or ``BytesIO``), else ``None``.
        self.size = input_size(f)

    def remaining(self) -> int | None:
        """Bytes left, if the size is known, else ``None``."""
        return None if self.size is None else self.size - self.pos

    def read_some(self, n: int) -> bytes:
        """At most ``n`` bytes: those put back first, else one read of the stream (``b""`` at its end)."""
        if self.pending:
            data, self.pending = self.pending[:n], self.pending[n:]
        else:
            data = self.f.read(n)
            if not isinstance(data, (bytes, bytearray)):
                raise TypeError("the file object must be opened in binary mode")
        self.pos += len(data)
        return bytes(data)

    def read_upto(self, n: int) -> bytes:
        """``n`` bytes, fewer only where the stream ends."""
        parts = []
        got = 0
        while got < n:
            part = self.read_some(n - got)
            if not part:
                break
            parts.append(part)
            got += len(part)
        return b"".join(parts)

    def unread(self, data: bytes) -> None:
        """Put ``data`` (the bytes just read) back in front of the stream."""
        self.pending = data + self.pending
        self.pos -= len(data)

    def exact(self, n: int, what: str, chunk: str) -> bytes:
        """Exactly ``n`` bytes; :class:`~finalfusion.errors.Truncated` at the offset where ``what`` began if the stream ends first."""
        start = self.pos
        data = self.read_upto(n)
        if len(data) < n:
            raise _short(what, chunk, start, n, len(data))
        return data

    def fields(self, fmt: struct.Struct, what: str, chunk: str) -> tuple[Any, ...]:
        """The fields of ``fmt`` (a :class:`struct.Struct` naming its byte order), read exactly and parsed by the byte cursor."""
        return ByteReader(self.exact(fmt.size, what, chunk), chunk=chunk).unpack(fmt, what)

    def into(self, view: memoryview, what: str, chunk: str) -> None:
        """Fill ``view`` (e.g. an array's bytes) from the stream without an intermediate copy."""
        start = self.pos
        got = 0
        if self.pending:
            got = min(len(self.pending), len(view))
            view[:got] = self.pending[:got]
            self.pending = self.pending[got:]
        got += read_into(self.f, view[got:])
        if got < len(view):
            raise _short(what, chunk, start, len(view), got)
        self.pos = start + len(view)

    def bound(self) -> int | None:
        """At most how many bytes are left, if that can be told cheaply (:func:`~finalfusion._source.size_bound`: exact, or bounded for gzip)."""
        left = size_bound(self.f)
        return None if left is None else left + len(self.pending)

    def fill(self, buf: bytearray, stop: int) -> bool:
        """Append to ``buf`` until it holds ``stop`` bytes or the stream ends; whether it got there.

        Memory grows with what arrives, never with a claim (:func:`~finalfusion._source.fill`).
        """
        if self.pending and len(buf) < stop:
            buf += self.read_some(stop - len(buf))
        before = len(buf)
        done = fill(self.f, buf, stop)
        self.pos += len(buf) - before
        return done

    def skip(self, n: int) -> int:
        """Read and drop up to ``n`` bytes; how many there were."""
        done = len(self.read_some(n)) if self.pending else 0
        more = skip(self.f, n - done)
        self.pos += more
        return done + more
