"""Every accepted input, turned into what a reader needs: a whole buffer or a stream.

The loaders accept a :data:`Source`: a path (``str`` or ``os.PathLike``; a
short ``bytes`` value naming an existing file is a path too, as in
finalfusion-python 0.7), a file descriptor, the file's contents
(``bytes``, ``bytearray``, ``memoryview``) or a binary file object (read
from its current position, never closed). :func:`opened` is the one place
that tells them apart; everything else here builds on it:

* :func:`open_buffer` -- the whole file in memory: read into a private
  writable buffer, or memory-mapped read-only;
* :class:`LazyFill` -- a whole-file buffer filled piece by piece as a parse
  asks for it, with spans left for the end (the finalfusion reader uses it
  to read a big matrix last);
* :func:`map_path` -- a read-only map of a path plus the modification time
  of exactly what was mapped (pickling by reference);
* :func:`opened_remote` -- a URL pinned to one version, for a reader that
  leaves rows at the server (``finalfusion._remote_rows``);
* :func:`open_stream` and :func:`peek` -- a stream for the foreign-format
  readers, gzip decompressed transparently (corrupt or truncated gzip data
  raises :class:`~finalfusion.errors.FormatError` naming the offset);
* :func:`regular_file`, :func:`fill` and :func:`size_bound` -- for inputs
  whose size is not known (gzip, pipes, devices, file objects without a
  descriptor), which may never end: read what a parse needs in reads that
  grow with what has arrived, and bound what a gzip stream can still hold;
  :func:`sized_or_stream`, :func:`parse_prefix` and :func:`skip` do the
  same for the model formats (GGUF, safetensors, protobuf).

:func:`local_path` and :func:`sibling` are the one rule for paths: which
inputs name a file (or a model directory), and which file a name read from
a file may open. :func:`file_in`, :func:`open_regular` and
:func:`read_regular` are the one rule for the files a directory holds by
convention (a model directory, a saved index) and for tokenizer files: a
regular file inside the directory, its size checked before it is read.
These rules live in :mod:`finalfusion._local_files` (and for a directory
at a URL in :mod:`finalfusion._remote_files`) and gzip input in
:mod:`finalfusion._gzip_input`; callers take them from here. This module
knows nothing about chunks: it sits at the bottom of the package, next to
the errors and the byte cursor.
"""

from __future__ import annotations

import contextlib
import errno
import gzip
import io
import mmap as _mmap
import os
import stat
from collections.abc import Callable, Iterator
from typing import IO, Any, Final, NamedTuple, TypeVar, Union, cast

import numpy as np

from finalfusion import limits
from finalfusion._binary import Buffer
from finalfusion._gzip_input import GZIP_BUFFERED, GzipInput
from finalfusion._progress import Progress, counting
from finalfusion._remote import RangeSource, RemoteFile, is_url, open_url
from finalfusion._remote_files import Location, file_in, open_regular, parent_of, read_regular, sibling
from finalfusion.errors import FormatError, Truncated

__all__ = [
    "DEFLATE_MAX_RATIO",
    "FILL_STEP",
    "GZIP_MAGIC",
    "HEAD_BYTES",
    "MIN_SIZE",
    "HeadCheck",
    "LazyFill",
    "Location",
    "Opened",
    "Source",
    "file_in",
    "fill",
    "input_size",
    "is_bytes_path",
    "is_url",
    "local_path",
    "map_path",
    "open_buffer",
    "open_regular",
    "open_stream",
    "opened",
    "opened_remote",
    "parent_of",
    "parse_prefix",
    "path_of",
    "peek",
    "read_into",
    "read_regular",
    "read_whole",
    "regular_file",
    "sibling",
    "size_bound",
    "sized_or_stream",
    "skip",
]

#: What the loaders accept: a path, a file descriptor, the file's bytes, or a binary file object.
Source = Union[str, "os.PathLike[Any]", bytes, bytearray, memoryview, int, IO[bytes]]

#: First two bytes of every gzip stream.
GZIP_MAGIC: Final = b"\x1f\x8b"
#: finalfusion's magic (``finalfusion.header.MAGIC``): data starting with it is never a path.
_FIFU_MAGIC: Final = b"FiFu"
#: Files smaller than this are read in one go (no :class:`LazyFill`).
MIN_SIZE: Final = 1 << 20


def is_bytes_path(data: bytes) -> bool:
    """Whether a ``bytes`` input is a path (finalfusion-python 0.7 code passes paths as ``bytes``), not the file's contents.

    The one rule of every reader: a ``bytes`` value is a path when it is
    short (below 4096 bytes), holds no NUL, does not start with
    finalfusion's magic and names something that exists and is not a
    directory (a file, a FIFO or a device). Anything else is the file's
    contents: a few bytes such as ``b"."`` or ``b"src"`` stay contents even
    where a directory of that name exists (pass a model directory as a
    ``str`` or ``os.PathLike``).

    Examples
    --------
    >>> import os, tempfile
    >>> directory = tempfile.mkdtemp()
    >>> with open(os.path.join(directory, "x.bin"), "wb") as f:
    ...     _ = f.write(b"data")
    >>> is_bytes_path(os.fsencode(os.path.join(directory, "x.bin"))), is_bytes_path(os.fsencode(directory)), is_bytes_path(b"FiFu\\x00\\x00\\x00\\x00")
    (True, False, False)
    """
    return not data.startswith(_FIFU_MAGIC) and len(data) < 4096 and b"\x00" not in data and os.path.exists(data) and not os.path.isdir(data)


def local_path(file: Source) -> str | None:
    """The path ``file`` names, as given (``str``, ``os.PathLike`` or a ``bytes`` path, see :func:`is_bytes_path`), else ``None``.

    Examples
    --------
    >>> from pathlib import Path
    >>> local_path(Path("x.bin")), local_path(b"FiFu"), local_path(0)
    ('x.bin', None, None)
    """
    if isinstance(file, bytes):
        return os.fsdecode(file) if is_bytes_path(file) else None
    if is_url(file):  # a remote file (finalfusion._remote): no local path
        return None
    if isinstance(file, (str, os.PathLike)):
        return os.fsdecode(file)
    return None


def path_of(file: Source) -> str | None:
    """The absolute path ``file`` names, or ``None`` for contents, descriptors and file objects.

    Examples
    --------
    >>> path_of(b"FiFu"), path_of(0), os.path.isabs(path_of("x.fifu"))
    (None, None, True)
    """
    path = local_path(file)
    return None if path is None else os.path.abspath(path)


class Opened(NamedTuple):
    """An input as :func:`opened` hands it out: in-memory contents or an open binary file."""

    #: A name for messages (the path, ``<fd N>``, ``<bytes>`` or the file object's name).
    name: str
    #: The contents, for ``bytes``-like inputs (else ``None``).
    data: bytes | bytearray | memoryview | None
    #: The file, for paths, descriptors and file objects (else ``None``).
    file: IO[bytes] | None


@contextlib.contextmanager
def opened_remote(url: str) -> Iterator[tuple[RangeSource, RemoteFile]]:
    """The file at ``url`` pinned to the version first seen: the ranges its rows are fetched from later, and the file a parse reads.

    Both ask for the same version (``If-Match`` with the server's ``ETag``,
    see :class:`~finalfusion._remote.RangeSource`); the file is closed when
    the block ends, the range source lives on with the rows that use it.

    Raises
    ------
    OSError
        If the file cannot be opened, or changed while it was.
    """
    source = RangeSource.open(url)
    with open_url(url, options=source.pin) as f:
        if f.size != source.size:
            raise OSError(f"{url}: the file changed at the server while it was opened ({f.size} bytes instead of {source.size})")
        yield source, f


@contextlib.contextmanager
def opened(source: Source) -> Iterator[Opened]:
    """Tell the kinds of :data:`Source` apart; open paths and descriptors for the ``with`` block.

    A path is closed when the block ends; a descriptor or a file object is
    left open (a descriptor's file object does not close it).

    Raises
    ------
    TypeError
        For anything that is not a :data:`Source`.

    Examples
    --------
    >>> import io
    >>> with opened(b"FiFu...") as src:
    ...     src.name, src.data, src.file
    ('<bytes>', b'FiFu...', None)
    >>> with opened(io.BytesIO(b"FiFu...")) as src:
    ...     src.name, src.file.read()
    ('<file object>', b'FiFu...')
    """
    if isinstance(source, bytes) and is_bytes_path(source):
        source = os.fsdecode(source)
    if is_url(source):
        with open_url(cast(str, source)) as f:
            yield Opened(cast(str, source), None, cast(IO[bytes], f))
    elif isinstance(source, (str, os.PathLike)):
        with open(source, "rb") as f:
            yield Opened(os.fsdecode(source), None, f)
    elif isinstance(source, int) and not isinstance(source, bool):
        with open(source, "rb", closefd=False) as f:
            yield Opened(f"<fd {source}>", None, f)
    elif isinstance(source, (bytes, bytearray, memoryview)):
        yield Opened("<bytes>", source, None)
    elif hasattr(source, "read"):
        name = getattr(source, "name", "<file object>")
        yield Opened(name if isinstance(name, str) else f"<fd {name}>" if isinstance(name, int) else "<file object>", None, cast(IO[bytes], source))
    else:
        raise TypeError(f"expected a path, bytes or a binary file object, got {type(source).__name__}")


def read_into(f: IO[bytes], view: memoryview) -> int:
    """Fill ``view`` from ``f`` (several ``readinto`` calls if needed); the number of bytes read (fewer at the end of the file).

    Zero-copy into ``view``; a file object without ``readinto`` is read with ``read``.
    """
    got = 0
    readinto = getattr(f, "readinto", None)
    while got < len(view):
        if readinto is not None:
            n = readinto(view[got:])
        else:
            data = f.read(len(view) - got)
            if not isinstance(data, (bytes, bytearray)):
                raise TypeError("the file object must be opened in binary mode")
            n = len(data)
            view[got : got + n] = data
        if not n:
            break
        got += n
    return got


#: Largest single read of :func:`fill` (beyond it, a chunk's bytes arrive in reads of this size).
FILL_STEP: Final = 1 << 26


def fill(f: IO[bytes], buf: bytearray, stop: int) -> bool:
    """Append bytes of ``f`` to ``buf`` until it holds ``stop`` bytes or ``f`` ends; whether it got there.

    For a stream whose size is not known: a length read from the data is
    only a claim, so nothing is allocated for it up front. Each read asks for
    at most as many bytes as ``buf`` already holds (at least 64 KiB, at most
    :data:`FILL_STEP`), so memory grows with what actually arrives and a
    claim larger than the stream ends, cheaply, at its end.

    Raises
    ------
    TypeError
        If ``f`` is not a binary file object.

    Examples
    --------
    >>> import io
    >>> buf = bytearray(b"ab")
    >>> fill(io.BytesIO(b"cdef"), buf, 4), buf
    (True, bytearray(b'abcd'))
    >>> fill(io.BytesIO(b"cd"), buf, 1 << 62), buf  # a claim past the end: what there is
    (False, bytearray(b'abcdcd'))
    """
    while len(buf) < stop:
        part = f.read(min(stop - len(buf), max(1 << 16, len(buf)), FILL_STEP))
        if not isinstance(part, (bytes, bytearray)):
            raise TypeError("the file object must be opened in binary mode")
        if not part:
            return False
        buf += part
    return True


def regular_file(f: IO[bytes]) -> os.stat_result | None:
    """The status of the regular file ``f`` reads directly (a plain binary file object), else ``None``.

    Only then is the size of what ``f`` returns known: wrappers such as
    ``gzip.GzipFile`` report the descriptor of the file they decode, pipes
    and devices have no size, and other file objects have no descriptor.

    Examples
    --------
    >>> import gzip, io, sys, tempfile
    >>> with tempfile.TemporaryFile() as f:
    ...     regular_file(f) is not None, regular_file(gzip.GzipFile(fileobj=f)), regular_file(io.BytesIO(b""))
    (True, None, None)
    """
    raw = f.raw if isinstance(f, (io.BufferedReader, io.BufferedRandom)) else f
    if not isinstance(raw, io.FileIO):
        return None
    try:
        st = os.fstat(f.fileno())
    except (OSError, AttributeError, io.UnsupportedOperation):
        return None
    return st if stat.S_ISREG(st.st_mode) else None


#: Checks the first bytes of a stream before the rest is read (raises if they cannot start a valid input).
HeadCheck = Callable[[bytes], None]
#: Bytes a :data:`HeadCheck` is given (a magic number's length).
HEAD_BYTES: Final = 4


def read_whole(f: IO[bytes], mmap: bool, head: HeadCheck | None = None) -> Buffer:
    """The rest of ``f`` as one buffer: writable, or (``mmap=True``) a read-only map when ``f`` is a plain file at position 0.

    A regular file's size is known, so it is read (or mapped) in one go.
    Anything else -- a pipe, a character device such as ``/dev/zero``, a
    file object without a descriptor -- has no size and may never end:
    its first :data:`HEAD_BYTES` bytes are read first and given to ``head``
    (which raises for a wrong magic), so a stream that is not the expected
    format fails at once instead of after reading it to its end.

    Examples
    --------
    >>> import io
    >>> read_whole(io.BytesIO(b"FiFu"), mmap=False), read_whole(io.BytesIO(b"FiFu"), mmap=True)
    (bytearray(b'FiFu'), b'FiFu')
    >>> def magic(prefix):
    ...     if prefix != b"FiFu":
    ...         raise ValueError(f"bad magic {prefix!r}")
    >>> read_whole(io.BytesIO(b"\\0" * 100), mmap=False, head=magic)
    Traceback (most recent call last):
    ...
    ValueError: bad magic b'\\x00\\x00\\x00\\x00'
    """
    # Only a plain file's descriptor is what ``f`` returns: a gzip.GzipFile reports the
    # descriptor of the *compressed* file, which must never be mapped or sized.
    st = regular_file(f)
    try:
        pos = f.tell() if st is not None else -1
    except (OSError, AttributeError, io.UnsupportedOperation):
        pos = -1
    if st is not None and pos >= 0:
        size = st.st_size - pos
        if mmap and pos == 0:
            if size == 0:
                return b""
            return _mmap.mmap(f.fileno(), 0, access=_mmap.ACCESS_READ)
        # np.empty rather than bytearray(size): no zero-filling pass over a
        # buffer that readinto overwrites anyway (the kernel's fresh pages are
        # touched once, by the copy). The memoryview is writable, so eager
        # arrays viewing it are too.
        view = memoryview(np.empty(max(size, 0), dtype=np.uint8))  # type: ignore[arg-type]
        got = read_into(f, view)
        rest = f.read()
        if got < len(view) or rest:
            return bytearray(bytes(view[:got]) + rest)
        return view
    prefix = b""
    if head is not None:
        while len(prefix) < HEAD_BYTES:
            part = f.read(HEAD_BYTES - len(prefix))
            if not isinstance(part, (bytes, bytearray)):
                raise TypeError("the file object must be opened in binary mode")
            if not part:
                break
            prefix += part
        head(prefix)
    data = f.read()
    if not isinstance(data, (bytes, bytearray)):
        raise TypeError("the file object must be opened in binary mode")
    data = prefix + data if prefix else data
    return data if mmap else bytearray(data)


def whole(src: Opened, mmap: bool, head: HeadCheck | None = None) -> Buffer:
    """The whole input of ``src`` as one buffer (see :func:`open_buffer`; ``head``: see :func:`read_whole`)."""
    if src.data is not None:
        if mmap:
            return src.data if isinstance(src.data, bytes) else bytes(src.data)
        return bytearray(src.data)
    return read_whole(cast(IO[bytes], src.file), mmap, head)


def open_buffer(file: Source, mmap: bool = False) -> tuple[Buffer, str]:
    """Return a buffer with the whole file and a name for messages.

    Paths and file descriptors are read into a private ``bytearray`` (so
    arrays viewing it are writable) or, with ``mmap=True``, mapped
    read-only. ``bytes``-like objects are the file contents (a ``bytes``
    value naming an existing file is treated as a path, as in
    finalfusion-python 0.7). Binary file objects are read from their
    current position (mapped when ``mmap=True``, they are real files and
    positioned at 0).

    Raises
    ------
    TypeError
        If ``file`` is none of these.
    OSError
        If the file cannot be read.

    Examples
    --------
    >>> import io
    >>> buf, name = open_buffer(b"FiFu...")
    >>> buf, name
    (bytearray(b'FiFu...'), '<bytes>')
    >>> open_buffer(io.BytesIO(b"FiFu..."), mmap=True)  # not a real file: read, not mapped
    (b'FiFu...', '<file object>')
    """
    with opened(file) as src:
        return whole(src, mmap), src.name


def map_path(path: str, head: HeadCheck | None = None) -> tuple[Buffer, int]:
    """Map ``path`` read-only; the map and the modification time (``st_mtime_ns``) of the descriptor that was mapped.

    Examples
    --------
    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "f.bin")
    >>> with open(path, "wb") as f:
    ...     _ = f.write(b"FiFu")
    >>> buf, mtime_ns = map_path(path)
    >>> bytes(buf), mtime_ns == os.stat(path).st_mtime_ns
    (b'FiFu', True)
    """
    with open(path, "rb") as f:
        mtime_ns = os.fstat(f.fileno()).st_mtime_ns
        return read_whole(f, True, head), mtime_ns


class LazyFill:
    """A whole-file buffer that is filled as a parse reaches each part, some spans last.

    Reading a whole file into one buffer and then parsing it puts the peak
    memory of a load at *file + everything the parse allocates*, including
    temporaries that are freed right after -- freed memory that the C heap
    usually keeps. A reader that knows its format instead asks for each part
    just before it parses it (:meth:`ensure`) and leaves spans that the parse
    only views, such as a big matrix, for the end (:meth:`defer`,
    :meth:`finish`). The buffer is allocated for the whole file at once but
    its pages are only touched when read into, so everything before the
    deferred spans is parsed while they take no memory yet; :meth:`finish`
    gives the pages before the first deferred span back first (the caller
    keeps no views of them).

    Use :meth:`for_file`; the parse reads :attr:`buf`.
    """

    __slots__ = ("_map", "base", "buf", "f", "filled", "holes", "size")

    def __init__(self, f: IO[bytes], base: int, size: int) -> None:
        self.f = f
        self.base = base
        self.size = size
        # Anonymous memory: its pages are only touched when read into (see the
        # class docstring) and can be given back (see finish). The memoryview
        # is writable, so eager arrays viewing it are too.
        # Private, not the default shared anonymous memory (shmem: slower page faults, no huge pages).
        self._map = _mmap.mmap(-1, size, flags=_mmap.MAP_PRIVATE) if hasattr(_mmap, "MAP_PRIVATE") else _mmap.mmap(-1, size)
        if hasattr(_mmap, "MADV_HUGEPAGE"):
            # As numpy does for its large arrays: far fewer page faults while the matrix is read.
            self._map.madvise(_mmap.MADV_HUGEPAGE)
        self.buf = memoryview(self._map)
        self.filled = 0
        self.holes: list[tuple[int, int]] = []

    @classmethod
    def for_file(cls, f: IO[bytes]) -> LazyFill | None:
        """A :class:`LazyFill` for the rest of a regular file of at least ``MIN_SIZE`` bytes, else ``None``.

        Only plain binary files qualify (``open(path, "rb")``, also unbuffered):
        wrappers such as ``gzip.GzipFile`` report the descriptor of the file
        they decode, whose size is not the size of what they return.
        """
        st = regular_file(f)
        if st is None:
            return None
        try:
            base = f.tell()
        except (OSError, AttributeError, io.UnsupportedOperation):
            return None
        size = st.st_size - base
        if size < MIN_SIZE or not f.seekable():
            return None
        return cls(f, base, size)

    def _read(self, start: int, stop: int) -> None:
        self.f.seek(self.base + start)
        got = read_into(self.f, self.buf[start:stop])
        if got < stop - start:
            raise OSError(f"the file ended after {start + got} of {self.size} bytes while it was read (was it truncated meanwhile?)")

    def ensure(self, stop: int) -> None:
        """Read everything before ``stop`` (clamped to the size) that is not read yet, except the deferred spans."""
        stop = min(stop, self.size)
        if stop > self.filled:
            self._read(self.filled, stop)
            self.filled = stop

    def defer(self, stop: int) -> None:
        """Leave the bytes from where the fill stands up to ``stop`` for :meth:`finish`."""
        self.holes.append((self.filled, stop))
        self.filled = stop

    def finish(self, deferred: bool = True) -> None:
        """Read what is left, the deferred spans last, and leave the file at its end.

        With deferred spans, the pages before the first one are given back to
        the system first, so they don't count towards the peak either. With
        ``deferred=False`` those spans are never read (they keep their zero
        pages), for callers that only want the other parts.
        """
        if self.holes and hasattr(_mmap, "MADV_DONTNEED"):
            drop = self.holes[0][0] // _mmap.PAGESIZE * _mmap.PAGESIZE
            if drop:
                self._map.madvise(_mmap.MADV_DONTNEED, 0, drop)
        self.ensure(self.size)
        if deferred:
            for start, stop in self.holes:
                self._read(start, stop)
        self.holes.clear()
        self.f.seek(self.base + self.size)


# --- streams for the foreign-format readers -------------------------------------------


class _Prefixed(io.RawIOBase):
    """A non-seekable binary stream with some already-read bytes put back in front."""

    def __init__(self, prefix: bytes, rest: IO[bytes]) -> None:
        self._prefix = prefix
        self._rest = rest

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        view = memoryview(b).cast("B")
        if self._prefix:
            n = min(len(view), len(self._prefix))
            view[:n] = self._prefix[:n]
            self._prefix = self._prefix[n:]
            return n
        data = self._rest.read(len(view))
        if not data:
            return 0
        view[: len(data)] = data
        return len(data)


def _cannot_seek(exc: BaseException) -> bool:
    """Whether ``exc``, raised by ``seekable``, ``tell`` or ``seek``, means the file cannot seek (rather than that it failed).

    Examples
    --------
    >>> import errno
    >>> _cannot_seek(io.UnsupportedOperation("seek")), _cannot_seek(OSError(errno.ESPIPE, "Illegal seek")), _cannot_seek(OSError(errno.EIO, "I/O error"))
    (True, True, False)
    """
    return isinstance(exc, (AttributeError, io.UnsupportedOperation)) or (isinstance(exc, OSError) and exc.errno == errno.ESPIPE)


def peek(f: IO[bytes], n: int) -> tuple[bytes, IO[bytes]]:
    """The first ``n`` bytes of ``f`` without consuming them, and the stream to read from.

    Seekable files are rewound; other streams are wrapped so that the bytes
    read are delivered again. Only an error that means "cannot seek"
    (:class:`io.UnsupportedOperation`, ``ESPIPE``, a file object without
    ``seekable``/``tell``/``seek``) makes a file a stream; any other
    :class:`OSError` of ``seekable``, ``tell``, ``read`` or ``seek`` (``EIO``,
    a refused permission, a remote file's failed read) is a failed read and
    propagates -- the bytes are never read a second time from elsewhere.

    Raises
    ------
    OSError
        If the file cannot be read (or told where it stands).
    TypeError
        If ``f`` is not a binary file object.

    Examples
    --------
    >>> import io
    >>> head, f = peek(io.BytesIO(b"FiFu..."), 4)
    >>> head, f.read()
    (b'FiFu', b'FiFu...')
    """
    try:
        pos = f.tell() if f.seekable() else None
    except (AttributeError, OSError) as exc:
        if not _cannot_seek(exc):
            raise
        pos = None
    if pos is not None:
        head = f.read(n)
        try:
            f.seek(pos)
            return head, f
        except (AttributeError, OSError) as exc:
            if not _cannot_seek(exc):
                raise
        # read, but it cannot go back (a gzip reader over a pipe claims to seek): the bytes read are delivered again
        if not isinstance(head, bytes):
            raise TypeError("the file object must be opened in binary mode")
        return head, io.BufferedReader(_Prefixed(head, f))
    peeker = getattr(f, "peek", None)
    if peeker is not None:
        head = peeker(n)[:n]
        if len(head) >= n:
            return head, f
    head = f.read(n)
    if not isinstance(head, bytes):
        raise TypeError("the file object must be opened in binary mode")
    return head, io.BufferedReader(_Prefixed(head, f))


@contextlib.contextmanager
def open_stream(source: Source, progress: Progress | None = None) -> Iterator[IO[bytes]]:
    """Open ``source`` for binary reading, decompressing gzip transparently.

    Parameters
    ----------
    source
        A path (``str`` or ``os.PathLike``; a ``bytes`` value naming an
        existing file is a path too, as in finalfusion-python 0.7), a file
        descriptor, the file's contents as ``bytes``, or a binary file object
        (read from its current position; it is not closed). Gzip data is recognised by its magic bytes
        ``1f 8b``, whatever the file is called.
    progress
        Called as ``progress("read", bytes_read, total)`` while the input is
        read (compressed bytes for gzip; ``total`` is ``None`` if unknown).

    Yields
    ------
    IO[bytes]
        A binary file object positioned at the start of the (decompressed) data.

    Raises
    ------
    TypeError
        If ``source`` is not a :data:`Source` or a file object is not binary.

    Examples
    --------
    >>> import gzip, io
    >>> with open_stream(io.BytesIO(gzip.compress(b"2 3\\n"))) as f:
    ...     f.read()
    b'2 3\\n'
    """
    with contextlib.ExitStack() as stack:
        src = stack.enter_context(opened(source))
        f = io.BytesIO(src.data) if src.data is not None else cast(IO[bytes], src.file)
        if progress is not None:
            f = counting(f, progress, input_size(f))
        head, f = peek(f, 2)
        if not isinstance(head, bytes):
            raise TypeError("the file object must be opened in binary mode")
        if head == GZIP_MAGIC:
            f = cast(IO[bytes], stack.enter_context(GzipInput(f, input_size(f))))
        yield f


#: Most bytes one byte of deflate data decompresses to (a 258-byte match coded in 2 bits).
DEFLATE_MAX_RATIO: Final = 1032


def size_bound(f: IO[bytes]) -> int | None:
    """At most how many bytes are left in ``f``, if that can be told cheaply, else ``None``.

    Exact for an input whose size is known (:func:`input_size`). For gzip
    over such an input, the decompressed size is unknown but bounded: deflate
    expands a byte to at most :data:`DEFLATE_MAX_RATIO` bytes, and readers
    expect at most :data:`finalfusion.limits.MAX_GZIP_EXPANSION` (100), so a
    stream that claims more than that many times its compressed rest is
    refused at once instead of being decompressed and held until the claim
    proves false (or memory runs out).

    Examples
    --------
    >>> import gzip, io
    >>> size_bound(io.BytesIO(b"12345"))
    5
    >>> with gzip.GzipFile(fileobj=io.BytesIO(gzip.compress(b"12345"))) as f:
    ...     size_bound(f) >= 5
    True
    """
    if isinstance(cast(object, f), gzip.GzipFile):
        left = input_size(cast(IO[bytes], cast(gzip.GzipFile, f).fileobj))
        return None if left is None else min(DEFLATE_MAX_RATIO, max(1, limits.MAX_GZIP_EXPANSION)) * (left + GZIP_BUFFERED)
    return input_size(f)


def input_size(f: IO[bytes]) -> int | None:
    """Bytes left in ``f`` if that is known cheaply (a plain seekable file), else ``None``.

    Readers use it to cap preallocations by what the file can hold.

    Examples
    --------
    >>> import io
    >>> f = io.BytesIO(b"12345"); _ = f.read(2)
    >>> input_size(f)
    3
    """
    if isinstance(cast(object, f), gzip.GzipFile):  # decompressed size unknown (GzipFile is not typed as an IO[bytes])
        return None
    try:
        if not f.seekable():
            return None
        pos = f.tell()
        try:
            return os.fstat(f.fileno()).st_size - pos
        except (AttributeError, OSError, io.UnsupportedOperation):
            end = f.seek(0, io.SEEK_END)
            f.seek(pos)
            return end - pos
    except (AttributeError, OSError, io.UnsupportedOperation):
        return None


# --- model files: a buffer when the size is known, else a stream read as far as declared -----


@contextlib.contextmanager
def sized_or_stream(source: Source, mmap: bool = True) -> Iterator[tuple[str, Buffer | None, IO[bytes] | None]]:
    """``(name, buffer, None)`` for an input of known size, ``(name, None, stream)`` for anything else.

    Known size: uncompressed ``bytes``-like contents (given back as they
    are, or copied into a ``bytearray`` with ``mmap=False``) and a plain
    regular file (path, descriptor or ``open(..., "rb")`` object), read or,
    with ``mmap=True`` at position 0, mapped read-only (:func:`read_whole`).
    Everything else -- gzip data of any kind (decompressed here, never
    mapped), pipes, FIFOs, devices, file objects without a descriptor -- is
    handed out as a stream that may never end: the reader reads what its
    format declares (:func:`parse_prefix`, :func:`fill`, :func:`skip`).

    Examples
    --------
    >>> import gzip, io
    >>> with sized_or_stream(b"GGUF") as (name, buf, f):
    ...     name, buf, f
    ('<bytes>', b'GGUF', None)
    >>> with sized_or_stream(gzip.compress(b"GGUF")) as (name, buf, f):
    ...     name, buf, f.read()
    ('<bytes>', None, b'GGUF')
    """
    with contextlib.ExitStack() as stack:
        src = stack.enter_context(opened(source))
        if src.data is not None:
            if bytes(src.data[:2]) != GZIP_MAGIC:
                yield src.name, whole(src, mmap), None
                return
            f: IO[bytes] = io.BytesIO(src.data)
        else:
            f = cast(IO[bytes], src.file)
        plain = regular_file(f) is not None
        head, f = peek(f, 2)
        if not isinstance(head, bytes):
            raise TypeError("the file object must be opened in binary mode")
        if head != GZIP_MAGIC and plain:
            yield src.name, read_whole(f, mmap), None
            return
        if head == GZIP_MAGIC:
            f = cast(IO[bytes], stack.enter_context(GzipInput(f, input_size(f))))
        yield src.name, None, f


_T = TypeVar("_T")


def parse_prefix(f: IO[bytes], buf: bytearray, parse: Callable[[bytearray], _T], cap: int, fmt: str, limit: str) -> _T:
    """Parse the start of a stream from a prefix of it that doubles until ``parse`` stops raising :class:`Truncated`.

    ``buf`` holds what was already read and receives what is read (bytes
    after what ``parse`` needed stay in it, for the caller). While the
    stream goes on, a :class:`Truncated` from ``parse`` means the prefix
    was too short: it grows (to at most ``cap`` bytes, beyond which a
    :class:`FormatError` names the limit ``limit``); once the stream has
    ended it is the answer. A header that never ends costs ``cap`` bytes.

    Examples
    --------
    >>> import io
    >>> def parse(buf):
    ...     if len(buf) < 5 or buf[4:5] != b";":
    ...         raise Truncated("short", offset=len(buf), chunk="x", expected="more", found="less")
    ...     return bytes(buf[:5])
    >>> parse_prefix(io.BytesIO(b"abcd;efg"), bytearray(), parse, 100, "x", "CAP")
    b'abcd;'
    >>> parse_prefix(io.BytesIO(b"a" * 1000), bytearray(), parse, 100, "x", "CAP")
    Traceback (most recent call last):
    ...
    finalfusion.errors.FormatError: x: the header is longer than the limit CAP: expected at most 100 bytes, found more (at byte offset 0)
    """
    want = max(len(buf), 1 << 16)
    while True:
        ended = not fill(f, buf, min(want, cap + 1))
        try:
            return parse(buf)
        except Truncated:
            if ended:
                raise
            if len(buf) > cap:
                raise FormatError("the header is longer than the limit " + limit, offset=0, chunk=fmt, expected=f"at most {cap} bytes", found="more") from None
            want = 2 * len(buf)


def skip(f: IO[bytes], n: int) -> int:
    """Read and drop up to ``n`` bytes of ``f`` in blocks of at most 1 MiB; how many there were.

    Examples
    --------
    >>> import io
    >>> f = io.BytesIO(b"abcdef")
    >>> skip(f, 4), f.read(), skip(f, 4)
    (4, b'ef', 0)
    """
    if isinstance(f, RemoteFile):  # a remote file: skipping is a seek, never a download
        pos = f.tell()
        return f.seek(min(pos + max(n, 0), max(f.size, pos))) - pos
    done = 0
    while done < n:
        part = f.read(min(n - done, 1 << 20))
        if not part:
            break
        done += len(part)
    return done
