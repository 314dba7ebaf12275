"""Reading and writing whole finalfusion files: sources, mmap, atomic saves.

A file is a header followed by chunks (docs/format.md §1). :func:`read_chunks`
walks them strictly: every chunk must be known, parse to exactly its
declared length, and match the header's list -- with two tolerated legacy
deviations (a trailing ``NdNorms`` chunk the header omits, and the short
explicit-vocabulary length of finalfusion-python 0.7), each reported with a
:class:`~finalfusion.errors.LegacyFormatWarning`.
"""

from __future__ import annotations

import contextlib
import errno
import io
import mmap as _mmap
import os
import sys
import tempfile
import threading
import warnings
from collections.abc import Iterator, Sequence
from typing import IO, Any, BinaryIO, TypeVar, cast

import numpy as np

from finalfusion._binary import ByteReader, ByteWriter
from finalfusion._lazyread import LazyFill, read_into
from finalfusion._types import Source
from finalfusion.chunks import Chunk, ChunkIdentifier, TypeId, check_order, read_chunk, role_of, write_chunk
from finalfusion.errors import ChunkOrder, FormatError, LegacyFormatWarning, Truncated
from finalfusion.header import MAGIC, Header

__all__ = [
    "ChunkIdentifier",
    "FinalfusionFormatError",
    "TypeId",
    "load_chunk",
    "open_buffer",
    "read_chunks",
    "write_chunks",
]

#: finalfusion-python 0.7 name of :class:`~finalfusion.errors.FormatError`.
FinalfusionFormatError = FormatError

_UMASK = os.umask(0)
os.umask(_UMASK)


def _is_bytes_path(data: bytes) -> bool:
    """Heuristic for finalfusion-python 0.7 code that passes a path as ``bytes``."""
    return not data.startswith(MAGIC) and len(data) < 4096 and b"\x00" not in data and os.path.isfile(data)


def open_buffer(file: Source, mmap: bool = False) -> tuple[Any, str]:
    """Return a buffer with the whole file and a name for messages.

    Paths and file descriptors are read into a private ``bytearray`` (so
    arrays viewing it are writable) or, with ``mmap=True``, mapped
    read-only. ``bytes``-like objects are the file contents (a ``bytes``
    value naming an existing file is treated as a path, as in
    finalfusion-python 0.7). Binary file objects are read from their
    current position (mapped when ``mmap=True``, they are real files and
    positioned at 0).

    Examples
    --------
    >>> buf, name = open_buffer(b"FiFu...")
    >>> buf, name
    (bytearray(b'FiFu...'), '<bytes>')
    >>> open_buffer(io.BytesIO(b"FiFu..."), mmap=True)  # not a real file: read, not mapped
    (b'FiFu...', '<file object>')
    """
    if isinstance(file, (bytes, bytearray, memoryview)):
        if isinstance(file, bytes) and _is_bytes_path(file):
            return open_buffer(os.fsdecode(file), mmap)
        if mmap:
            return (file if isinstance(file, bytes) else bytes(file)), "<bytes>"
        return bytearray(file), "<bytes>"
    if isinstance(file, (str, os.PathLike)):
        with open(file, "rb") as f:
            return _from_file(f, mmap), os.fsdecode(file)
    if isinstance(file, int):
        with open(file, "rb", closefd=False) as f:
            return _from_file(f, mmap), f"<fd {file}>"
    if hasattr(file, "read"):
        return _from_file(file, mmap), getattr(file, "name", "<file object>")
    raise TypeError(f"expected a path, bytes or a binary file object, got {type(file).__name__}")


def _from_file(f: IO[bytes], mmap: bool) -> Any:
    fileno = None
    try:
        fileno = f.fileno()
        pos = f.tell()
    except (OSError, AttributeError, io.UnsupportedOperation):
        pos = -1
    if fileno is not None and pos >= 0:
        size = os.fstat(fileno).st_size - pos
        if mmap and pos == 0:
            if size == 0:
                return b""
            return _mmap.mmap(fileno, 0, access=_mmap.ACCESS_READ)
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
    data = f.read()
    if not isinstance(data, (bytes, bytearray)):
        raise TypeError("the file object must be opened in binary mode")
    return data if mmap else bytearray(data)


def read_source(file: Source, mmap: bool = False, *, matrix: bool = True) -> tuple[str, list[tuple[int, Chunk]]]:
    """Open ``file`` as :func:`open_buffer` does and parse its chunks.

    Eagerly read files (paths, descriptors, seekable file objects) are read
    chunk by chunk as the parse goes, the matrix of an ``NdArray`` chunk
    last (see :mod:`finalfusion._lazyread`): the vocabulary's temporaries
    are freed before the matrix takes memory, which lowers the peak.

    With ``matrix=False`` the ``f32`` data of a large ``NdArray`` chunk is
    not read at all from such files (the chunk then views zeros): for
    callers that want other chunks only.

    Returns
    -------
    name, chunks
        A name for messages and ``(offset, chunk)`` for every chunk.
    """
    if not mmap:
        if isinstance(file, bytes) and _is_bytes_path(file):
            file = os.fsdecode(file)
        if isinstance(file, (str, os.PathLike)):
            with open(file, "rb") as f:
                return os.fsdecode(file), _read_file_chunks(f, matrix)
        if isinstance(file, int):
            with open(file, "rb", closefd=False) as f:
                return f"<fd {file}>", _read_file_chunks(f, matrix)
        if not isinstance(file, (bytes, bytearray, memoryview)) and hasattr(file, "read"):
            return getattr(file, "name", "<file object>"), _read_file_chunks(file, matrix)
    buf, name = open_buffer(file, mmap)
    return name, read_chunks(buf)[1]


def _read_file_chunks(f: IO[bytes], matrix: bool = True) -> list[tuple[int, Chunk]]:
    lazy = LazyFill.for_file(f)
    if lazy is None:
        return read_chunks(_from_file(f, False))[1]
    lazy.matrix_wanted = matrix
    return read_chunks(lazy.buf, lazy)[1]


def read_chunks(buf: Any, lazy: LazyFill | None = None) -> tuple[Header, list[tuple[int, Chunk]]]:
    """Parse a whole finalfusion file held in ``buf``.

    With ``lazy``, ``buf`` is ``lazy.buf``, which is filled as the parse
    reaches each chunk.

    Returns
    -------
    header, chunks
        The header and ``(offset, chunk)`` for every chunk in file order.

    Raises
    ------
    FormatError
        (or a subclass) for any malformed input.

    Examples
    --------
    >>> import numpy as np
    >>> from finalfusion import Embeddings, NdArray, SimpleVocab
    >>> out = io.BytesIO()
    >>> Embeddings(NdArray(np.eye(2, dtype=np.float32)), SimpleVocab(["a", "b"])).write(out)
    >>> header, chunks = read_chunks(out.getvalue())
    >>> header.chunk_ids, [(offset, type(chunk).__name__) for offset, chunk in chunks]
    ((<ChunkIdentifier.SimpleVocab: 1>, <ChunkIdentifier.NdArray: 2>), [(20, 'SimpleVocab'), (50, 'NdArray')])
    """
    reader = ByteReader(buf)
    if lazy is not None:
        lazy.before_header()
    header = Header.read(reader)
    chunks: list[tuple[int, Chunk]] = []
    listed = list(header.chunk_ids)
    while reader.remaining > 0:
        at = reader.pos
        if lazy is not None:
            lazy.before_chunk(at)
        chunks.append((at, read_chunk(reader)))
    found = [c.chunk_id for _, c in chunks]
    if found != listed:
        if found == [*listed, ChunkIdentifier.NdNorms] and ChunkIdentifier.NdNorms not in listed:
            warnings.warn(
                "the file has an NdNorms chunk that its header does not list (written by finalfusion-rust < 0.11); "
                "read normally, written back with a complete header",
                LegacyFormatWarning,
                stacklevel=3,
            )
        elif len(found) < len(listed) and found == listed[: len(found)]:
            raise Truncated(
                "the file ends before all chunks listed in the header",
                offset=reader.pos,
                chunk=ChunkIdentifier(listed[len(found)]).name,
                expected=[c.name for c in listed],
                found=[c.name for c in found],
            )
        else:
            raise ChunkOrder(
                "the chunks in the file disagree with the header",
                offset=12,
                chunk="header",
                expected=[c.name for c in listed],
                found=[c.name for c in found],
            )
    check_order(found, offset=chunks[0][0] if chunks else 12, where="chunk stream")
    if lazy is not None:
        lazy.finish()
    return header, chunks


_C = TypeVar("_C", bound=Chunk)


def load_chunk(file: Source, cls: type[_C], mmap: bool = False) -> _C:
    """The first chunk that is an instance of ``cls`` in a finalfusion file.

    For a vocabulary, metadata or norms chunk the matrix data of a plain
    file is never read (see :func:`read_source`), so ``load_vocab`` of a
    large file costs about what its vocabulary does.

    Raises
    ------
    FormatError
        If the file is malformed or holds no such chunk.

    Examples
    --------
    >>> import numpy as np
    >>> from finalfusion import Embeddings, Metadata, NdArray, SimpleVocab
    >>> out = io.BytesIO()
    >>> Embeddings(NdArray(np.eye(2, dtype=np.float32)), SimpleVocab(["a", "b"])).write(out)
    >>> load_chunk(out.getvalue(), SimpleVocab)
    SimpleVocab(['a', 'b'] (2 words))
    >>> load_chunk(out.getvalue(), Metadata)
    Traceback (most recent call last):
    ...
    finalfusion.errors.FormatError: file: <bytes> has no Metadata chunk: expected a Metadata chunk, found ['SimpleVocab', 'NdArray']
    """
    # Only storage needs the matrix data: eager reads of other chunks skip it.
    name, chunks = read_source(file, mmap, matrix=getattr(cls, "role", None) not in ("vocab", "metadata", "norms"))
    for _, chunk in chunks:
        if isinstance(chunk, cls):
            return chunk
    raise FormatError(f"{name} has no {cls.__name__} chunk", chunk="file", expected=f"a {cls.__name__} chunk", found=[type(c).__name__ for _, c in chunks])


def write_chunks(chunks: Sequence[Chunk], file: Source, *, fsync: bool = False) -> None:
    """Write a header listing ``chunks`` and the chunks themselves.

    To a path the write is atomic: the data goes to a temporary file in the
    same directory, which then replaces the target with ``os.replace``. A
    crash, or an exception raised while writing, leaves the old file (if
    any) untouched, and a file that is memory-mapped can be overwritten
    safely (existing maps keep the old contents).

    Writing to a path also reserves the file's full size up front (so a
    full disk fails before anything is written) and, for large files,
    writes the storage and norms on a second thread with ``os.pwrite`` while
    this thread serialises the vocabulary: the layout (every chunk's offset)
    is computed first, so the two parts never overlap.

    Parameters
    ----------
    chunks
        Chunks in file order (metadata, vocabulary, storage, norms).
    file
        Path or binary file object (written at its current position).
    fsync
        Flush the data to disk before the rename (durability across power loss).

    Raises
    ------
    ChunkOrder
        If the chunks are not in a valid order.
    TypeError, ValueError
        If a chunk cannot be represented (e.g. metadata values TOML cannot hold).
    OSError
        If the disk is full (before the target is touched).

    Examples
    --------
    >>> import io
    >>> from finalfusion.vocab import SimpleVocab
    >>> from finalfusion.storage import NdArray
    >>> out = io.BytesIO()
    >>> write_chunks([SimpleVocab(["a"]), NdArray(np.ones((1, 2), dtype=np.float32))], out)
    >>> read_chunks(out.getvalue())[1][0][1].words
    ['a']
    """
    ids = [c.chunk_id for c in chunks]
    check_order(ids, offset=None, where="chunks to write")
    header = Header(tuple(ids))
    to_path = isinstance(file, (str, os.PathLike))
    # For a path the layout is computed before touching the disk, so TOML errors lose nothing.
    layout = _layout(header, chunks, 0) if to_path else None
    with atomic_output(file, fsync=fsync, size=layout[-1] if layout else None) as f:
        if layout is None:
            try:
                pos = f.tell()
            except (OSError, AttributeError, io.UnsupportedOperation):
                pos = 0
            layout = _layout(header, chunks, pos)
        _write_to(f, header, chunks, layout, parallel=to_path)


def _layout(header: Header, chunks: Sequence[Chunk], pos: int) -> list[int]:
    """Absolute offset of every chunk's frame written after ``header`` at ``pos``, plus the end offset."""
    offsets = [pos + header.nbytes]
    for chunk in chunks:
        frame = offsets[-1]
        offsets.append(frame + 12 + chunk.payload_len(frame + 12))
    return offsets


#: Bytes after the vocabulary from which they are written on a second thread.
PARALLEL_TAIL_BYTES = 8 << 20


def _write_to(f: IO[bytes], header: Header, chunks: Sequence[Chunk], layout: list[int], *, parallel: bool) -> None:
    split = next((i for i, c in enumerate(chunks) if role_of(c.chunk_id) in ("storage", "norms")), len(chunks))
    if not (parallel and hasattr(os, "pwrite") and layout[-1] - layout[split] >= PARALLEL_TAIL_BYTES):
        _write_head(f, header, chunks, layout)
        return
    tail = _TailWriter(os.dup(f.fileno()), chunks[split:], layout[split:])
    tail.start()
    try:
        # The head is serialised into memory first: a write to the file would wait
        # for the other thread's pwrite (the kernel serialises writes to one file).
        head = io.BytesIO()
        _write_head(head, header, chunks[:split], layout[: split + 1])
        f.write(head.getbuffer())
        f.flush()
    finally:
        tail.join()
    if tail.error is not None:
        raise tail.error


def _write_head(out: IO[bytes], header: Header, chunks: Sequence[Chunk], layout: list[int]) -> None:
    """Write ``header`` and then ``chunks`` (laid out as :func:`_write_laid_out` says) to ``out``."""
    writer = ByteWriter(cast(BinaryIO, out), layout[0] - header.nbytes)
    header.write(writer)
    _write_laid_out(writer, chunks, layout)


def _write_laid_out(writer: ByteWriter, chunks: Sequence[Chunk], layout: list[int]) -> None:
    """Write ``chunks`` whose frames start at ``layout[:-1]`` (``layout[-1]``: where the last ends)."""
    for chunk, frame, end in zip(chunks, layout[:-1], layout[1:], strict=True):
        write_chunk(writer, chunk, end - frame - 12)


class _PositionalFile:
    """The ``write`` of a binary file, done with ``os.pwrite`` at a running offset (releases the GIL)."""

    def __init__(self, fd: int, pos: int) -> None:
        self.fd = fd
        self.pos = pos

    def write(self, data: bytes | bytearray | memoryview) -> int:
        view = memoryview(data).cast("B")
        done = 0
        while done < len(view):
            done += os.pwrite(self.fd, view[done:], self.pos + done)
        self.pos += done
        return done


class _TailWriter(threading.Thread):
    """Writes the chunks after the vocabulary at their precomputed offsets on its own descriptor."""

    def __init__(self, fd: int, chunks: Sequence[Chunk], layout: list[int]) -> None:
        super().__init__(name="finalfusion-write", daemon=True)
        self.fd = fd
        self.chunks = chunks
        self.layout = layout
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            writer = ByteWriter(cast(BinaryIO, _PositionalFile(self.fd, self.layout[0])), self.layout[0])
            _write_laid_out(writer, self.chunks, self.layout)
        except BaseException as exc:  # re-raised by the thread that started this one
            self.error = exc
        finally:
            os.close(self.fd)


#: Files smaller than this are not preallocated (nothing to gain).
_PREALLOCATE_MIN = 1 << 20


def _load_fallocate() -> Any:
    """The C library's ``fallocate64`` (Linux), or ``None`` elsewhere."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes

        func = ctypes.CDLL(None, use_errno=True).fallocate64
    except (OSError, AttributeError, ImportError):  # pragma: no cover - non-glibc/musl libc
        return None
    func.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]
    func.restype = ctypes.c_int
    return func


_FALLOCATE = _load_fallocate()


def preallocate(fd: int, size: int, name: str = "file") -> None:
    """Reserve ``size`` bytes of disk for the open file ``fd`` (which grows to that size).

    Uses Linux ``fallocate`` directly -- not ``os.posix_fallocate``, whose
    glibc fallback writes every block when the filesystem cannot
    preallocate (NFSv3, some FUSE filesystems); there this does nothing.
    Small sizes and other platforms are a no-op too.

    Raises
    ------
    OSError
        ``ENOSPC`` (or ``EFBIG``/``EDQUOT``): the file cannot grow that much.

    Examples
    --------
    >>> import tempfile
    >>> with tempfile.TemporaryFile() as f:
    ...     preallocate(f.fileno(), 4 << 20)
    ...     os.fstat(f.fileno()).st_size in (0, 4 << 20)
    True
    """
    if _FALLOCATE is None or size < _PREALLOCATE_MIN:
        return
    if _FALLOCATE(fd, 0, 0, size) != 0:
        err = ctypes_errno()
        if err in (errno.ENOSPC, errno.EFBIG, errno.EDQUOT):
            raise OSError(err, f"cannot reserve {size} bytes for the output ({os.strerror(err)})", name)


def ctypes_errno() -> int:
    """``errno`` of the last ctypes call of this thread."""
    import ctypes

    return ctypes.get_errno()


@contextlib.contextmanager
def atomic_output(file: Source, *, fsync: bool = False, size: int | None = None) -> Iterator[IO[bytes]]:
    """Open ``file`` for binary writing so that a path is replaced atomically.

    For a path, the data goes to a temporary file in the same directory that
    replaces the target with ``os.replace`` only when the ``with`` block ends
    without an exception; the target keeps its permissions. A binary file
    object is yielded as it is (written at its current position).

    Parameters
    ----------
    file
        Path (str or os.PathLike) or binary file object.
    fsync
        Flush the data to disk before the rename.
    size
        The exact number of bytes the ``with`` block writes, if known: the
        temporary file reserves that much disk space first (``fallocate``
        on Linux), so a full disk raises ``OSError`` before anything is
        written, and the kernel writes into preallocated extents (about a
        third faster for large files on ext4). The file has this size
        from the start, so the block must write all of it.

    Examples
    --------
    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "out.bin")
    >>> with atomic_output(path) as f:
    ...     _ = f.write(b"complete")
    >>> with open(path, "rb") as f:
    ...     f.read()
    b'complete'
    """
    if isinstance(file, (bytes, bytearray, memoryview, int)):
        raise TypeError("write to a path (str or os.PathLike) or a binary file object")
    if not isinstance(file, (str, os.PathLike)):
        yield file
        return
    target = os.fsdecode(os.fspath(file))
    directory = os.path.dirname(os.path.abspath(target))
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{os.path.basename(target)}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            if size is not None:
                preallocate(fd, size, tmp)
            yield f
            f.flush()
            if fsync:
                os.fsync(f.fileno())
        try:
            mode = os.stat(target).st_mode & 0o7777
        except FileNotFoundError:
            mode = 0o666 & ~_UMASK
        os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
