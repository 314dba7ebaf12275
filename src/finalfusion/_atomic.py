"""Atomic writes: a temporary file beside the target, reserved up front, then ``os.replace``.

Every write to a path goes through :func:`atomic_output`. The temporary file
is created with mode ``0o666`` through ``os.open``, so the kernel applies the
process's umask (and any default ACL) at that moment -- nothing reads or
changes the umask -- and a target that already exists passes its own mode on.
The ``fallocate`` of the C library is looked up on the first write that wants
it, not at import.

:func:`split_write` writes the tail of a file with ``os.pwrite`` on a second
thread while the caller writes the head; :func:`run_in_background` is the one
place that hands work to another thread.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import os
import secrets
import stat
import sys
from collections.abc import Callable, Iterator
from typing import IO, Any, BinaryIO, Final, Union, cast

from finalfusion import _threads
from finalfusion._remote import is_url

__all__ = ["PositionalFile", "Target", "atomic_output", "preallocate", "resolve_target", "run_in_background", "split_write", "temporary_name"]

#: Where a write can go: a path, or a binary file object written at its current position.
Target = Union[str, "os.PathLike[Any]", IO[bytes]]

#: Files smaller than this are not preallocated (nothing to gain).
PREALLOCATE_MIN: Final = 1 << 20
#: Flags of the temporary file: created here, never an existing file or a symlink.
_CREATE_FLAGS: Final = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0) | getattr(os, "O_NOFOLLOW", 0)


@functools.cache
def _fallocate() -> Callable[[int, int, int, int], int] | None:
    """The C library's ``fallocate64`` (Linux), or ``None`` elsewhere; looked up once, on first use."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes

        func = ctypes.CDLL(None, use_errno=True).fallocate64
    except (OSError, AttributeError, ImportError):  # pragma: no cover - non-glibc/musl libc
        return None
    func.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]
    func.restype = ctypes.c_int
    return cast("Callable[[int, int, int, int], int]", func)


def ctypes_errno() -> int:
    """``errno`` of the last ctypes call of this thread."""
    import ctypes

    return ctypes.get_errno()


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
    if size < PREALLOCATE_MIN:
        return
    fallocate = _fallocate()
    if fallocate is None:
        return
    if fallocate(fd, 0, 0, size) != 0:
        err = ctypes_errno()
        if err in (errno.ENOSPC, errno.EFBIG, errno.EDQUOT):
            raise OSError(err, f"cannot reserve {size} bytes for the output ({os.strerror(err)})", name)


#: Characters of a temporary name besides the target's name: ``.`` + ``.`` + 8 hex digits + ``.tmp``.
_TEMP_EXTRA: Final = 14


def _name_max(directory: str) -> int:
    """The longest file name (in bytes) ``directory`` accepts; 255 where the system cannot say."""
    try:
        return max(int(os.pathconf(directory, "PC_NAME_MAX")), 32)
    except (OSError, ValueError, AttributeError):
        return 255


def temporary_name(directory: str, base: str) -> str:
    """``.<base>.<8 random hex>.tmp``, with ``base`` cut so that the name fits ``NAME_MAX`` bytes.

    A legal target name of up to ``NAME_MAX`` bytes gets a legal temporary
    name: the base is shortened (whole characters), never the random part.

    Examples
    --------
    >>> import tempfile
    >>> d = tempfile.mkdtemp()
    >>> len(os.fsencode(temporary_name(d, "x" * 255))) <= _name_max(d)
    True
    >>> temporary_name(d, "out.fifu").startswith(".out.fifu.")
    True
    """
    room = _name_max(directory) - _TEMP_EXTRA
    while len(os.fsencode(base)) > room:
        base = base[:-1]
    return f".{base}.{secrets.token_hex(4)}.tmp"


def _create_temporary(directory: str, base: str) -> tuple[int, str]:
    """Create ``.<base>.<random>.tmp`` in ``directory`` with mode ``0o666`` minus the umask."""
    for _ in range(100):
        tmp = os.path.join(directory, temporary_name(directory, base))
        try:
            return os.open(tmp, _CREATE_FLAGS, 0o666), tmp
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, "no unused temporary file name", os.path.join(directory, f".{base}.*.tmp"))  # pragma: no cover


def resolve_target(target: str) -> tuple[str, os.stat_result | None]:
    """The file a write to ``target`` must end up in, and its status (``None`` if it does not exist yet).

    Symlinks are followed (``os.path.realpath``): writing to ``current.fifu``
    that links to ``v1.fifu`` replaces ``v1.fifu`` and keeps the link; a
    dangling link is written to the path it names (creating that file).

    Raises
    ------
    IsADirectoryError
        ``target`` is (or links to) a directory.
    OSError
        ``ELOOP`` for a symlink loop; a socket (``ENXIO``).

    Examples
    --------
    >>> import tempfile
    >>> d = tempfile.mkdtemp()
    >>> os.symlink("v1.fifu", os.path.join(d, "current.fifu"))
    >>> resolve_target(os.path.join(d, "current.fifu")) == (os.path.join(os.path.realpath(d), "v1.fifu"), None)
    True
    """
    real = os.path.realpath(target)
    try:
        st: os.stat_result | None = os.stat(real)
    except FileNotFoundError:
        st = None
    if st is None and os.path.islink(real):
        raise OSError(errno.ELOOP, os.strerror(errno.ELOOP), target)
    if st is not None and stat.S_ISDIR(st.st_mode):
        raise IsADirectoryError(errno.EISDIR, "cannot write embeddings to a directory", target)
    if st is not None and stat.S_ISSOCK(st.st_mode):
        raise OSError(errno.ENXIO, "cannot write to a socket", target)
    return real, st


def _is_stream(st: os.stat_result | None) -> bool:
    """A FIFO or a character/block device: written in place, not replaced."""
    return st is not None and (stat.S_ISFIFO(st.st_mode) or stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode))


@contextlib.contextmanager
def atomic_output(file: Target, *, fsync: bool = False, size: int | None = None) -> Iterator[IO[bytes]]:
    """Open ``file`` for binary writing so that a path is replaced atomically.

    For a path, the data goes to a temporary file in the same directory that
    replaces the target with ``os.replace`` only when the ``with`` block ends
    without an exception; the target keeps its permissions (a new file gets
    ``0o666`` minus the umask, as ``open`` would give it). A binary file
    object is yielded as it is (written at its current position).

    Symlinks are resolved first: the file they point to is replaced (with
    a temporary file in *its* directory) and the link stays; a dangling
    link creates the file it names. A FIFO or a character or block device
    (``/dev/null``, a pipe set up with ``mkfifo``) is not replaced: the
    data is streamed into it directly -- not atomic, no reservation, no
    ``fsync``. The temporary name is kept within the directory's
    ``NAME_MAX`` (the target's name is shortened in it), so every legal
    target name works.

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

    Raises
    ------
    TypeError
        For bytes, ``bytearray``, ``memoryview`` or a file descriptor.
    ValueError
        For a URL (``https://...``, ``s3://...``): remote files are read only.
    IsADirectoryError
        The target is (or links to) a directory.
    OSError
        A symlink loop (``ELOOP``), a socket (``ENXIO``), or any I/O error.

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
    if is_url(file):
        raise ValueError(f"{file}: a URL is read, never written (write a local file and upload it)")
    target, st = resolve_target(os.fsdecode(os.fspath(file)))
    if _is_stream(st):
        # A FIFO or device is written into, in place: not atomic, nothing reserved.
        with open(target, "wb") as stream:
            yield stream
            stream.flush()
        return
    fd, tmp = _create_temporary(os.path.dirname(target), os.path.basename(target))
    try:
        with os.fdopen(fd, "wb") as f:
            if size is not None:
                preallocate(fd, size, tmp)
            yield f
            f.flush()
            if fsync:
                os.fsync(f.fileno())
        with contextlib.suppress(FileNotFoundError):
            os.chmod(tmp, os.stat(target).st_mode & 0o7777)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


class PositionalFile:
    """The ``write`` of a binary file, done with ``os.pwrite`` at a running offset (releases the GIL).

    Examples
    --------
    >>> import tempfile
    >>> with tempfile.TemporaryFile() as f:
    ...     _ = PositionalFile(f.fileno(), 3).write(b"abc")
    ...     _ = f.seek(0); f.read()
    b'\\x00\\x00\\x00abc'
    """

    def __init__(self, fd: int, pos: int) -> None:
        self.fd = fd
        self.pos = pos

    def write(self, data: bytes | bytearray | memoryview) -> int:
        """Write all of ``data`` at the running offset; the number of bytes written."""
        view = memoryview(data).cast("B")
        done = 0
        while done < len(view):
            done += os.pwrite(self.fd, view[done:], self.pos + done)
        self.pos += done
        return done


def run_in_background(task: Callable[[], object], meanwhile: Callable[[], object]) -> None:
    """Run ``task`` on another thread while ``meanwhile`` runs; return when both are done.

    THE one place in the write path that uses a second thread: a thread of
    its own from :func:`finalfusion._threads.run_in_background` (not the
    pool, so a long write never holds a query worker), created by the
    library's threads module like every other thread.

    Raises
    ------
    Exception
        The exception ``meanwhile`` raised, else the one ``task`` raised,
        always after both have stopped.

    Examples
    --------
    >>> done = []
    >>> run_in_background(lambda: done.append("task"), lambda: done.append("meanwhile"))
    >>> sorted(done)
    ['meanwhile', 'task']
    """
    job = _threads.run_in_background(task, name="finalfusion-tail-writer")
    try:
        meanwhile()
    except BaseException:
        with contextlib.suppress(BaseException):
            job.result()  # the task must stop writing before the caller cleans up
        raise
    job.result()


def split_write(f: IO[bytes], tail_at: int, write_tail: Callable[[BinaryIO], None], write_head: Callable[[], None]) -> None:
    """Write a file's tail with ``os.pwrite`` on a second thread while ``write_head()`` writes the rest to ``f``.

    ``write_tail`` receives a file object whose ``write`` puts the data at
    ``tail_at`` and on, through its own descriptor (a duplicate of ``f``'s),
    so the two parts never share a file position. The caller guarantees that
    they do not overlap. The head should be written in one call: a write to
    the file waits for the other thread's ``pwrite`` (the kernel serialises
    writes to one file).

    Raises
    ------
    Exception
        The first exception of either part, once both have stopped.

    Examples
    --------
    >>> import tempfile
    >>> with tempfile.TemporaryFile() as f:
    ...     split_write(f, 4, lambda tail: tail.write(b"tail"), lambda: f.write(b"head") and None)
    ...     f.flush(); _ = f.seek(0); f.read()
    b'headtail'
    """
    fd = os.dup(f.fileno())
    try:
        run_in_background(lambda: write_tail(cast(BinaryIO, PositionalFile(fd, tail_at))), write_head)
    finally:
        os.close(fd)
