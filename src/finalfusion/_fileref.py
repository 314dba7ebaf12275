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

__all__ = ["EDGE", "FileRef", "UrlRef", "edge_digest", "edge_ranges", "map_with_ref", "remap"]

#: Bytes hashed at each end of the file.
EDGE = 1 << 16


def edge_ranges(size: int) -> list[tuple[int, int]]:
    """The ``(start, stop)`` byte ranges a file of ``size`` bytes is checked by: its first and last :data:`EDGE` bytes.

    Examples
    --------
    >>> edge_ranges(10), edge_ranges(1 << 20)
    ([(0, 10)], [(0, 65536), (983040, 1048576)])
    """
    ranges = [(0, min(size, EDGE))]
    if size > EDGE:
        ranges.append((max(EDGE, size - EDGE), size))
    return ranges


def edge_digest(parts: list[bytes]) -> str:
    """BLAKE2b-128 of the bytes of :func:`edge_ranges`, in order.

    Examples
    --------
    >>> edge_digest([b"FiFu"]) == _digest(b"FiFu")
    True
    """
    h = hashlib.blake2b(digest_size=16)
    for part in parts:
        h.update(part)
    return h.hexdigest()


def _digest(buf: Buffer) -> str:
    return edge_digest([bytes(buf[a:b]) for a, b in edge_ranges(len(buf))])


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


@dataclass(frozen=True)
class UrlRef:
    """A ``.fifu`` named by a URL and loaded with ``mmap=True``: how to open it again and recognise it.

    Embeddings whose rows stay at the server pickle as this reference;
    unpickling opens the URL again (with the same ``cache_bytes``) and
    raises :class:`~finalfusion.errors.FileChangedError` when the file's
    size, ``ETag`` (when the server gives one) or digest differ.

    Parameters
    ----------
    url
        The URL.
    size
        Size in bytes.
    etag
        The server's ``ETag``, or ``None``.
    digest
        BLAKE2b-128 of the first and last 64 KiB (:func:`edge_digest`).
    cache_bytes
        The row cache of the load (``None``: the default).

    Examples
    --------
    >>> ref = UrlRef("https://example.org/e.fifu", 4, None, edge_digest([b"FiFu"]), None)
    >>> ref.check(UrlRef("https://example.org/e.fifu", 5, None, edge_digest([b"FiFu!"]), None))
    Traceback (most recent call last):
    ...
    finalfusion.errors.FileChangedError: https://example.org/e.fifu changed since the embeddings were pickled (size 5 instead of 4); ...
    """

    url: str
    size: int
    etag: str | None
    digest: str
    cache_bytes: int | None

    @property
    def path(self) -> str:
        """The URL (the name in messages, as :attr:`FileRef.path` is)."""
        return self.url

    def check(self, now: UrlRef) -> None:
        """Raise :class:`FileChangedError` unless ``now`` (the file as opened again) is the referenced file."""
        problems = []
        if now.size != self.size:
            problems.append(f"size {now.size} instead of {self.size}")
        if self.etag is not None and now.etag is not None and now.etag != self.etag:
            problems.append(f"ETag {now.etag} instead of {self.etag}")
        if not problems and now.digest != self.digest:
            problems.append("different contents (digest of the first and last 64 KiB)")
        if problems:
            raise FileChangedError(
                f"{self.url} changed since the embeddings were pickled ({'; '.join(problems)}); "
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
