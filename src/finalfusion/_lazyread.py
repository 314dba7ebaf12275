"""Eager reads of files in parse order, with the big matrix read last.

Reading a whole file into one buffer and then parsing it puts the peak
memory of a load at *file + everything the parse allocates*, including
the vocabulary's temporaries (decoded text, hash arrays) that are freed
right after -- freed memory that the C heap usually keeps. :class:`LazyFill`
instead reads each chunk just before :func:`~finalfusion.io.read_chunks`
parses it, and leaves the ``f32`` data of an ``NdArray`` chunk (all but its
first 20 bytes, which hold its shape, type and padding) for the end, when
everything else has been parsed and checked. The buffer is allocated for
the whole file at once but its pages are only touched when read into, so
the vocabulary is built while the matrix takes no memory yet. Once the
parse is done, the pages before the matrix are released (chunks before the
storage never keep views of the buffer: only storage and norms arrays do).

The parse of an ``NdArray`` payload only creates a view of its data, so
no parsing code ever sees the bytes that are read later; the chunk after
it starts where its declared length ends (a longer or shorter parse is an
error, raised before the matrix is read).
"""

from __future__ import annotations

import io
import mmap
import os
import stat
import struct
from typing import IO, Any, Final

from finalfusion.chunks import ChunkIdentifier, chunk_class
from finalfusion.errors import UnknownChunk

__all__ = ["LazyFill", "read_into"]

_FRAME: Final = struct.Struct("<IQ")
#: Bytes of an NdArray payload before its data that are read with the frame: rows u64, cols u32, type u32, <= 4 padding.
_NDARRAY_HEAD: Final = 20
#: Files smaller than this are read in one go.
MIN_SIZE: Final = 1 << 20


def read_into(f: IO[bytes], view: memoryview) -> int:
    """Fill ``view`` from ``f`` (several ``readinto`` calls if needed); the number of bytes read (fewer at the end of the file)."""
    got = 0
    while got < len(view):
        n = f.readinto(view[got:])  # type: ignore[attr-defined]
        if not n:
            break
        got += n
    return got


class LazyFill:
    """A whole-file buffer that is filled as the parse reaches each chunk.

    Use :meth:`for_file`; pass the object to ``read_chunks(lazy.buf, lazy)``.
    """

    __slots__ = ("_map", "base", "buf", "f", "filled", "holes", "matrix_wanted", "size")

    def __init__(self, f: IO[bytes], base: int, size: int) -> None:
        self.f = f
        self.base = base
        self.size = size
        # Anonymous memory: its pages are only touched when read into (see the
        # module docstring) and can be given back (see finish). The memoryview
        # is writable, so eager arrays viewing it are too.
        # Private, not the default shared anonymous memory (shmem: slower page faults, no huge pages).
        self._map = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE) if hasattr(mmap, "MAP_PRIVATE") else mmap.mmap(-1, size)
        if hasattr(mmap, "MADV_HUGEPAGE"):
            # As numpy does for its large arrays: far fewer page faults while the matrix is read.
            self._map.madvise(mmap.MADV_HUGEPAGE)
        self.buf: Any = memoryview(self._map)
        self.filled = 0
        self.holes: list[tuple[int, int]] = []
        #: False: :meth:`finish` leaves the deferred matrix data unread (untouched zero pages),
        #: for callers that only want the chunks before or after it.
        self.matrix_wanted = True

    @classmethod
    def for_file(cls, f: IO[bytes]) -> LazyFill | None:
        """A :class:`LazyFill` for the rest of a regular file of at least ``MIN_SIZE`` bytes, else ``None``.

        Only plain binary files qualify (``open(path, "rb")``, also unbuffered):
        wrappers such as ``gzip.GzipFile`` report the descriptor of the file
        they decode, whose size is not the size of what they return.
        """
        raw = f.raw if isinstance(f, io.BufferedReader) else f
        if not isinstance(raw, io.FileIO):
            return None
        try:
            st = os.fstat(f.fileno())
            base = f.tell()
        except (OSError, AttributeError, io.UnsupportedOperation):
            return None
        size = st.st_size - base
        if not stat.S_ISREG(st.st_mode) or size < MIN_SIZE or not f.seekable():
            return None
        return cls(f, base, size)

    def _read(self, start: int, stop: int) -> None:
        self.f.seek(self.base + start)
        got = read_into(self.f, self.buf[start:stop])
        if got < stop - start:
            raise OSError(f"the file ended after {start + got} of {self.size} bytes while it was read (was it truncated meanwhile?)")

    def ensure(self, stop: int) -> None:
        """Read everything before ``stop`` (clamped to the size) that is not read yet, except the holes."""
        stop = min(stop, self.size)
        if stop > self.filled:
            self._read(self.filled, stop)
            self.filled = stop

    def before_header(self) -> None:
        """Read the header (its length is in its third field)."""
        self.ensure(12)
        if self.filled >= 12:
            (n_chunks,) = struct.unpack_from("<I", self.buf, 8)
            self.ensure(12 + 4 * n_chunks)

    def before_chunk(self, at: int) -> None:
        """Read the chunk whose frame is at ``at``, leaving an NdArray's data for :meth:`finish`."""
        self.ensure(at + _FRAME.size)
        if at + _FRAME.size > self.size:
            return  # the parse reports the truncation
        chunk_id, declared = _FRAME.unpack_from(self.buf, at)
        start = at + _FRAME.size
        end = start + declared
        try:
            short = chunk_class(chunk_id).length_may_be_short
        except UnknownChunk:
            short = True  # the parse reports it
        if chunk_id == ChunkIdentifier.NdArray and end <= self.size and declared >= MIN_SIZE:
            self.ensure(start + _NDARRAY_HEAD)
            self.holes.append((self.filled, end))
            self.filled = end
        elif short:
            self.ensure(self.size)  # a legacy chunk that may run past its declared length
        else:
            self.ensure(end)

    def finish(self) -> None:
        """Read what is left, the deferred matrix data last, and leave the file at its end.

        When a matrix was deferred, the pages before it (header, metadata,
        vocabulary: parsed into Python objects by now, and no chunk before
        the storage keeps a view of its bytes) are given back to the system
        first, so they don't count towards the peak either.
        """
        if self.holes and hasattr(mmap, "MADV_DONTNEED"):
            drop = self.holes[0][0] // mmap.PAGESIZE * mmap.PAGESIZE
            if drop:
                self._map.madvise(mmap.MADV_DONTNEED, 0, drop)
        self.ensure(self.size)
        if self.matrix_wanted:
            for start, stop in self.holes:
                self._read(start, stop)
        self.holes.clear()
        self.f.seek(self.base + self.size)
