"""Local files that the input layer opens by a rule, not because a file's content named them: part of :mod:`finalfusion._source`.

Two rules, each written once (DESIGN.md, conventions 16 and 19):

* :func:`sibling` -- which file a name *read from a file* may open (a
  shard an index names): a plain file name next to it, nothing else;
* :func:`file_in`, :func:`open_regular` and :func:`read_regular` -- which
  file a directory the user names may hold by convention (a model
  directory's ``config.json``, ``tokenizer.json``, shards; a saved index's
  ``ann.json`` and ``index.bin``) and how it, or a tokenizer file the user
  names, is opened: a regular file inside the directory, never a FIFO, a
  device, a socket or a directory, its size checked on the opened
  descriptor before a byte is read.

Use them through :mod:`finalfusion._source`, which re-exports them.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Iterator
from typing import IO, Final

from finalfusion.errors import FormatError

__all__ = ["check_size", "file_in", "open_regular", "read_regular", "sibling"]


def sibling(directory: str | os.PathLike[str], name: str, *, chunk: str, message: str = "a file named in the data must be next to it") -> str:
    """The path of the file ``name`` in ``directory``: the one rule for opening a file that a file names (a shard, a tokenizer).

    A name read from a file is data, never a path of its own (DESIGN.md,
    convention 16): it must be a plain file name -- not absolute, no
    directory part (so no ``..``), not empty, ``.`` or ``..``, and no NUL.

    Raises
    ------
    FormatError
        For any other name, saying what was found (``chunk`` and
        ``message`` name the format and the field).

    Examples
    --------
    >>> sibling("models", "shard-1.safetensors", chunk="x")
    'models/shard-1.safetensors'
    >>> sibling("models", "../etc/passwd", chunk="x")
    Traceback (most recent call last):
    ...
    finalfusion.errors.FormatError: x: a file named in the data must be next to it: expected a plain file name, found ../etc/passwd
    """
    plain = name not in ("", ".", "..") and "\x00" not in name and os.path.basename(name) == name and not os.path.isabs(name)
    if not plain or (os.altsep is not None and os.altsep in name):
        raise FormatError(message, chunk=chunk, expected="a plain file name", found=name)
    return os.path.join(os.fsdecode(directory), name)


#: What :func:`file_in` and :func:`open_regular` report finding instead of a regular file.
_KINDS: Final = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def _refuse_special(st: os.stat_result, path: str, chunk: str) -> None:
    if not stat.S_ISREG(st.st_mode):
        found = next((what for test, what in _KINDS if test(st.st_mode)), f"a special file (mode {st.st_mode:o})")
        raise FormatError(f"{path} is not a regular file", chunk=chunk, expected="a regular file", found=found)


def _roots(root: str) -> list[str]:
    """Where a file found in the real directory ``root`` may resolve: ``root``, and for a Hugging Face cache snapshot its repository's blobs.

    Examples
    --------
    >>> _roots("/m")
    ['/m']
    >>> import os, tempfile
    >>> repo = tempfile.mkdtemp()
    >>> os.makedirs(os.path.join(repo, "snapshots", "abc")); os.makedirs(os.path.join(repo, "blobs"))
    >>> [os.path.relpath(r, repo) for r in _roots(os.path.join(repo, "snapshots", "abc"))]
    ['snapshots/abc', 'blobs']
    """
    snapshots = os.path.dirname(root)
    blobs = os.path.join(os.path.dirname(snapshots), "blobs")
    if os.path.basename(snapshots) == "snapshots" and os.path.isdir(blobs) and not os.path.islink(blobs):
        return [root, blobs]
    return [root]


def file_in(directory: str | os.PathLike[str], name: str, *, chunk: str) -> str | None:
    """The path of the regular file ``name`` in ``directory``, ``None`` when nothing has that name: the one rule for files a directory holds by convention.

    A directory the user names (a model directory, a saved index) is input
    like a file, made by whoever sent it (DESIGN.md, convention 19): a file
    found in it by its name (``config.json``, ``tokenizer.json``, a shard,
    ``index.bin``) is opened only if it is a regular file that resolves
    inside the directory. A symbolic link that stays inside (``model.safetensors
    -> v2/model.safetensors``) is followed; one that leads out of the
    directory is refused, so that a directory cannot make a reader take in
    another file of the user's (``tokenizer.json -> ~/.ssh/id_rsa``). The one
    exception is the Hugging Face cache's layout: in a directory
    ``<repo>/snapshots/<revision>/`` a link may also resolve into that same
    repository's ``<repo>/blobs/`` (where the cache keeps every file it
    links), and nowhere else. A FIFO, a device, a socket or a directory is
    refused without being opened.
    ``name`` is a name the library chose (never a name read from a file:
    those pass :func:`sibling` first); a link to nothing counts as nothing.
    Open the path with :func:`open_regular` or read it with
    :func:`read_regular`, which check the size before reading.

    Raises
    ------
    FormatError
        ``name`` is not a regular file or resolves outside ``directory``,
        saying what was found (``chunk`` names the format).

    Examples
    --------
    >>> import os, tempfile
    >>> d = tempfile.mkdtemp()
    >>> with open(os.path.join(d, "config.json"), "wb") as f:
    ...     _ = f.write(b"{}")
    >>> file_in(d, "config.json", chunk="x") == os.path.join(d, "config.json"), file_in(d, "tokenizer.json", chunk="x")
    (True, None)
    >>> os.mkfifo(os.path.join(d, "index.bin"))
    >>> file_in(d, "index.bin", chunk="x")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    finalfusion.errors.FormatError: x: .../index.bin is not a regular file: expected a regular file, found a FIFO (named pipe)
    >>> os.symlink("/etc/hostname", os.path.join(d, "tokenizer.json"))
    >>> file_in(d, "tokenizer.json", chunk="x")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    finalfusion.errors.FormatError: x: .../tokenizer.json leads out of its directory: expected a regular file inside ..., found a link to /etc/hostname
    """
    path = os.path.join(os.fsdecode(directory), name)
    if not os.path.lexists(path):
        return None
    root = os.path.realpath(directory)
    real = os.path.realpath(path)
    if not any(os.path.commonpath([r, real]) == r for r in _roots(root)):
        raise FormatError(f"{path} leads out of its directory", chunk=chunk, expected=f"a regular file inside {root}", found=f"a link to {real}")
    try:
        st = os.lstat(real)  # no link is left in ``real``
    except FileNotFoundError:
        return None
    _refuse_special(st, path, chunk)
    return path


#: Flags of :func:`open_regular`: a FIFO opened by mistake (one that replaced a checked file) never blocks, a terminal never becomes the controlling one.
_OPEN_FLAGS: Final = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_BINARY", 0)


@contextlib.contextmanager
def open_regular(path: str | os.PathLike[str], *, chunk: str) -> Iterator[IO[bytes]]:
    """``path`` opened for binary reading if it is a regular file; anything else is refused without blocking or reading.

    The status is checked before the open (so a device is never opened)
    and again on the opened descriptor (so a file replaced in between by
    a FIFO is refused, not waited on: the open does not block).

    Raises
    ------
    FormatError
        For a FIFO, a device, a socket or a directory, naming the file and what it is.
    OSError
        If the file cannot be opened.

    Examples
    --------
    >>> import os, tempfile
    >>> d = tempfile.mkdtemp()
    >>> os.mkfifo(os.path.join(d, "p"))
    >>> with open_regular(os.path.join(d, "p"), chunk="tokenizer"):  # doctest: +ELLIPSIS
    ...     pass
    Traceback (most recent call last):
    ...
    finalfusion.errors.FormatError: tokenizer: .../p is not a regular file: expected a regular file, found a FIFO (named pipe)
    """
    name = os.fsdecode(path)
    _refuse_special(os.stat(name), name, chunk)
    fd = os.open(name, _OPEN_FLAGS)
    try:
        _refuse_special(os.fstat(fd), name, chunk)
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        f = open(fd, "rb")  # noqa: SIM115 - closed by the with block below
    except BaseException:
        os.close(fd)
        raise
    with f:
        yield f


def read_regular(path: str | os.PathLike[str], *, chunk: str, max_bytes: int, limit: str) -> bytes:
    """The bytes of the regular file ``path`` (:func:`open_regular`), refused from its size when it holds more than ``max_bytes``.

    The size is read from the opened descriptor before a byte is read: a
    sparse 3 GiB file is refused at once, whatever it costs on disk, and
    nothing beyond the size read then is read.

    Raises
    ------
    FormatError
        For a file that is not a regular file, or one larger than ``max_bytes``
        (the message names ``limit``, the setting that holds the bound).
    OSError
        If the file cannot be read.

    Examples
    --------
    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "tokenizer.json")
    >>> with open(path, "wb") as f:
    ...     _ = f.truncate(3 << 30)
    >>> read_regular(path, chunk="tokenizer.json", max_bytes=1 << 28, limit="finalfusion.limits.MAX_TOKENIZER_BYTES")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    finalfusion.errors.FormatError: tokenizer.json: ... is larger than the limit ...: expected at most 268435456 bytes, found 3221225472 bytes
    """
    with open_regular(path, chunk=chunk) as f:
        size = os.fstat(f.fileno()).st_size
        check_size(os.fsdecode(path), size, chunk=chunk, max_bytes=max_bytes, limit=limit)
        return f.read(size)


def check_size(name: str, size: int, *, chunk: str, max_bytes: int, limit: str) -> None:
    """Refuse the file ``name`` of ``size`` bytes when it holds more than ``max_bytes`` (the bound of :func:`read_regular`, before a byte is read).

    Raises
    ------
    FormatError
        Naming the file, ``limit`` (the setting that holds the bound), the bound and the size.

    Examples
    --------
    >>> check_size("config.json", 3 << 30, chunk="x", max_bytes=1 << 20, limit="of a config.json")
    Traceback (most recent call last):
    ...
    finalfusion.errors.FormatError: x: config.json is larger than the limit of a config.json: expected at most 1048576 bytes, found 3221225472 bytes
    """
    if size > max_bytes:
        raise FormatError(f"{name} is larger than the limit {limit}", chunk=chunk, expected=f"at most {max_bytes} bytes", found=f"{size} bytes")
