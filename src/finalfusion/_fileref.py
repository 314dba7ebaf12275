"""References to memory-mapped files, so mapped embeddings pickle as a few bytes.

An :class:`~finalfusion.Embeddings` loaded with ``mmap=True`` from a path
pickles as a :class:`FileRef`: the absolute path plus a check (size,
modification time and a BLAKE2b digest of the first and last 64 KiB).
Unpickling maps the file again -- every worker shares the OS page cache --
and raises :class:`~finalfusion.errors.FileChangedError` when the file no
longer passes the check, instead of silently loading different data.

The check is computed from the very bytes that were mapped, using the
``fstat`` of the descriptor that was mapped, so a file replaced between
opening and mapping cannot slip through.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from finalfusion._binary import Buffer
from finalfusion._source import HeadCheck, map_path
from finalfusion.errors import FileChangedError

__all__ = ["FileRef", "map_with_ref", "remap"]

#: Bytes hashed at each end of the file.
EDGE = 1 << 16


def _digest(buf: Buffer) -> str:
    h = hashlib.blake2b(digest_size=16)
    n = len(buf)
    h.update(buf[: min(n, EDGE)])
    if n > EDGE:
        h.update(buf[max(EDGE, n - EDGE) :])
    return h.hexdigest()


@dataclass(frozen=True)
class FileRef:
    """Where a memory-mapped file is and how to recognise it.

    Parameters
    ----------
    path
        Absolute path of the file.
    size
        Size in bytes.
    mtime_ns
        Modification time (``st_mtime_ns``).
    digest
        BLAKE2b-128 of the first and last 64 KiB.

    Examples
    --------
    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "f.bin")
    >>> with open(path, "wb") as f:
    ...     _ = f.write(b"FiFu")
    >>> buf, ref = map_with_ref(path)
    >>> ref.size, ref.path == path
    (4, True)
    """

    path: str
    size: int
    mtime_ns: int
    digest: str

    def check(self, buf: Buffer, mtime_ns: int) -> None:
        """Raise :class:`FileChangedError` unless ``buf`` (mapped from :attr:`path`) is the referenced file.

        Examples
        --------
        >>> import tempfile
        >>> from pathlib import Path
        >>> path = Path(tempfile.mkdtemp(), "f.bin"); _ = path.write_bytes(b"FiFu")
        >>> buf, ref = map_with_ref(str(path))
        >>> ref.check(buf, ref.mtime_ns)
        >>> ref.check(b"FiFu!", ref.mtime_ns)
        Traceback (most recent call last):
        ...
        finalfusion.errors.FileChangedError: ...
        """
        problems = []
        if len(buf) != self.size:
            problems.append(f"size {len(buf)} instead of {self.size}")
        if mtime_ns != self.mtime_ns:
            problems.append(f"modification time {mtime_ns} ns instead of {self.mtime_ns} ns")
        if not problems and _digest(buf) != self.digest:
            problems.append("different contents (digest of the first and last 64 KiB)")
        if problems:
            raise FileChangedError(
                f"{self.path} changed since the embeddings were pickled ({'; '.join(problems)}); "
                "load it again with load_finalfusion (or pickle embeddings loaded without mmap to send them by value)"
            )


def map_with_ref(path: str, head: HeadCheck | None = None) -> tuple[Buffer, FileRef]:
    """Memory-map ``path`` read-only and describe exactly what was mapped (``head``: see :func:`finalfusion._source.read_whole`)."""
    buf, mtime_ns = map_path(path, head)
    return buf, FileRef(path, len(buf), mtime_ns, _digest(buf))


def remap(ref: FileRef) -> Buffer:
    """Map ``ref.path`` again and check that it is the same file.

    Raises
    ------
    FileChangedError
        If its size, modification time or edge digest differ.
    OSError
        If it cannot be opened.
    """
    buf, mtime_ns = map_path(ref.path)
    ref.check(buf, mtime_ns)
    return buf
