"""The output rule: what a write may replace, and how a directory the library writes is replaced.

Every writer of the library follows one rule (DESIGN.md rule 19):

* a **file** is written with :func:`finalfusion._atomic.atomic_output`: a
  temporary file beside the target replaces it only when complete, so
  writing embeddings back over the very file they are memory-mapped from is
  safe (the mapping keeps the old inode). A path the caller names that is a
  symbolic link is followed (the file it names is replaced, the link stays):
  the caller chose that link;
* a **directory** (a saved ANN index, a model2vec model) is written whole
  with :func:`write_directory`: into a new directory beside the target, with
  a manifest (:data:`MANIFEST_NAME`: every file's name, size and edge
  digest), then swapped in. An existing target is replaced only when it is
  empty or holds exactly what the manifest lists, unchanged; a target that
  is a file or a symbolic link, or that holds anything else (a file the
  manifest does not list, a link, a subdirectory, a file changed since), is
  refused with :class:`~finalfusion.errors.OutputRefused` naming those
  entries. Nothing inside a target directory is written through or opened
  for writing: the new directory replaces it, so no stale file (a
  ``model.safetensors.index.json`` that a loader would prefer) survives,
  and the old directory's files are removed by name only when the
  manifest lists them;
* a command whose output is one of its own **inputs** (the same file by
  device and inode, or a path inside an input directory) is refused by
  :func:`refuse_own_input` before any work.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import errno
import functools
import hashlib
import json
import os
import shutil
import stat
from collections.abc import Callable, Iterable
from typing import Any, Final

from finalfusion._atomic import atomic_output, temporary_name
from finalfusion._remote import is_url
from finalfusion.errors import OutputRefused

__all__ = ["MANIFEST_NAME", "check_directory_target", "edge_digest", "edge_digest_of", "refuse_own_input", "write_directory"]

#: The manifest the library writes into every directory it writes.
MANIFEST_NAME: Final = "finalfusion-manifest.json"
#: The manifest's ``format`` field.
MANIFEST_FORMAT: Final = "finalfusion-manifest"
#: The manifest's ``version`` field.
MANIFEST_VERSION: Final = 1
#: Largest manifest read.
MAX_MANIFEST_BYTES: Final = 1 << 16
#: Bytes hashed at each end of a file.
EDGE: Final = 1 << 16
#: Entries named in a refusal (the rest are counted).
_SHOWN: Final = 10
_OPEN_FLAGS: Final = os.O_RDONLY | getattr(os, "O_BINARY", 0) | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)


def _pread(fd: int, size: int, offset: int) -> bytes:
    parts = []
    while size > 0:
        chunk = os.pread(fd, size, offset)
        if not chunk:
            break
        parts.append(chunk)
        size -= len(chunk)
        offset += len(chunk)
    return b"".join(parts)


def _open_regular(path: str) -> tuple[int, os.stat_result]:
    """A descriptor of the regular file ``path`` (never a link, FIFO or device, never blocking) and its status."""
    fd = os.open(path, _OPEN_FLAGS)
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise OSError(errno.EINVAL, "not a regular file", path)
    return fd, st


def edge_digest(path: str) -> tuple[int, str]:
    """Size and BLAKE2b-128 of the first and last 64 KiB of the regular file ``path`` (a link is not followed).

    Raises
    ------
    OSError
        ``path`` is missing, a symbolic link (``ELOOP``) or not a regular file (``EINVAL``).

    Examples
    --------
    >>> import tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "f.bin")
    >>> with open(path, "wb") as f:
    ...     _ = f.write(b"abc")
    >>> edge_digest(path)[0]
    3
    """
    fd, _ = _open_regular(path)
    try:
        return edge_digest_of(fd)
    finally:
        os.close(fd)


def edge_digest_of(fd: int) -> tuple[int, str]:
    """Size and BLAKE2b-128 of the first and last 64 KiB of the open regular file ``fd`` (its position is not used)."""
    size = os.fstat(fd).st_size
    h = hashlib.blake2b(digest_size=16)
    h.update(_pread(fd, min(size, EDGE), 0))
    if size > EDGE:
        start = max(EDGE, size - EDGE)
        h.update(_pread(fd, size - start, start))
    return size, h.hexdigest()


# -- a command's own input -----------------------------------------------------------------
def refuse_own_input(target: str, inputs: Iterable[str | None]) -> None:
    """Refuse to write ``target`` when it is one of ``inputs``, or lies inside an input that is a directory.

    Files are compared by device and inode (links followed), so another
    spelling or a link of the same file is caught; inputs that are not
    regular files or directories (``-``, pipes, devices) are skipped.

    Raises
    ------
    OutputRefused
        ``target`` is an input (or inside an input directory).

    Examples
    --------
    >>> import tempfile
    >>> d = tempfile.mkdtemp()
    >>> path = os.path.join(d, "in.fifu")
    >>> open(path, "wb").close()
    >>> refuse_own_input(os.path.join(d, "out.fifu"), [path, "-", None])
    >>> try:
    ...     refuse_own_input(os.path.join(d, ".", "in.fifu"), [path])
    ... except OutputRefused as err:
    ...     print(err.strerror)
    is the input in.fifu itself: not replaced (write to another path)
    """
    try:
        target_st: os.stat_result | None = os.stat(target)
    except (OSError, ValueError):
        target_st = None
    real = os.path.realpath(target)
    for source in inputs:
        if source is None or source == "-":
            continue
        try:
            st = os.stat(source)
        except (OSError, ValueError):
            continue
        name = os.path.basename(os.path.normpath(source)) or source
        if stat.S_ISREG(st.st_mode) and target_st is not None and (st.st_dev, st.st_ino) == (target_st.st_dev, target_st.st_ino):
            raise OutputRefused(errno.EEXIST, f"is the input {name} itself: not replaced (write to another path)", target)
        if stat.S_ISDIR(st.st_mode):
            inside = False
            root = os.path.realpath(source)
            with contextlib.suppress(ValueError):  # another drive (Windows): not inside
                inside = os.path.commonpath([root, real]) == root
            if inside:
                where = f"is the input directory {name} itself" if root == real else f"lies inside the input directory {name}"
                raise OutputRefused(errno.EEXIST, f"{where}: not written there (write to another path)", target)


# -- directories ----------------------------------------------------------------------------
def _listing(names: list[str]) -> str:
    shown = ", ".join(names[:_SHOWN])
    return shown + (f" and {len(names) - _SHOWN} more" if len(names) > _SHOWN else "")


def _refuse(target: str, message: str) -> OutputRefused:
    return OutputRefused(errno.EEXIST, f"{message}; not replaced", target)


def _read_manifest(directory: str) -> dict[str, Any] | None:
    """The manifest in ``directory`` when it is one the library wrote (format, version, kind, files), else ``None``."""
    try:
        fd, st = _open_regular(os.path.join(directory, MANIFEST_NAME))
    except OSError:
        return None
    try:
        if st.st_size > MAX_MANIFEST_BYTES:
            return None
        raw = _pread(fd, st.st_size, 0)
    finally:
        os.close(fd)
    try:
        doc = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None
    if not isinstance(doc, dict) or doc.get("format") != MANIFEST_FORMAT or doc.get("version") != MANIFEST_VERSION:
        return None
    files = doc.get("files")
    if not isinstance(doc.get("kind"), str) or not isinstance(files, dict):
        return None
    for name, entry in files.items():
        if name in ("", ".", "..", MANIFEST_NAME) or "/" in name or "\0" in name or os.sep in name:
            return None
        if not isinstance(entry, dict) or type(entry.get("size")) is not int or not isinstance(entry.get("digest"), str):
            return None
    return doc


def check_directory_target(target: str, kind: str) -> dict[str, tuple[int, str] | None]:
    """Check that the directory ``target`` may be replaced by a ``kind`` directory; the library's files in it (name: size and digest).

    A missing path and an empty directory may be written (nothing in them). An
    existing directory may be replaced only when it holds a manifest of the
    same ``kind`` that lists every other entry, each a regular file with the
    recorded size and edge digest (listed files that are gone do not matter).

    Raises
    ------
    OutputRefused
        ``target`` is a file or a symbolic link, or holds anything the
        library did not write there (named in the message).

    Examples
    --------
    >>> import tempfile
    >>> d = tempfile.mkdtemp()
    >>> check_directory_target(os.path.join(d, "new"), "ann-index")
    {}
    >>> with open(os.path.join(d, "notes.txt"), "w") as f:
    ...     _ = f.write("mine")
    >>> try:
    ...     check_directory_target(d, "ann-index")
    ... except OutputRefused as err:
    ...     print(err.strerror)
    holds files finalfusion did not write there (it has no finalfusion-manifest.json): notes.txt; not replaced
    """
    try:
        st = os.lstat(target)
    except FileNotFoundError:
        return {}
    if stat.S_ISLNK(st.st_mode):
        raise _refuse(target, "is a symbolic link (name the directory itself)")
    if not stat.S_ISDIR(st.st_mode):
        raise _refuse(target, "exists and is not a directory")
    names = sorted(os.listdir(target))
    if not names:
        return {}
    manifest = _read_manifest(target)
    if manifest is None:
        why = "it has no finalfusion-manifest.json" if MANIFEST_NAME not in names else "its finalfusion-manifest.json is not one finalfusion wrote"
        raise _refuse(target, f"holds files finalfusion did not write there ({why}): {_listing(names)}")
    if manifest["kind"] != kind:
        raise _refuse(target, f"holds a {manifest['kind']} directory finalfusion wrote, not a {kind}")
    listed: dict[str, dict[str, Any]] = manifest["files"]
    foreign = [n for n in names if n != MANIFEST_NAME and n not in listed]
    changed = []
    own: dict[str, tuple[int, str] | None] = {MANIFEST_NAME: None}
    for name in sorted(set(listed) & set(names)):
        path = os.path.join(target, name)
        try:
            size, digest = edge_digest(path)
        except OSError:
            changed.append(f"{name} (not a regular file)")
            continue
        if size != listed[name]["size"] or digest != listed[name]["digest"]:
            changed.append(f"{name} (changed since finalfusion wrote it)")
        else:
            own[name] = (size, digest)
    if foreign:
        raise _refuse(target, f"holds files finalfusion did not write there: {_listing(foreign)}")
    if changed:
        raise _refuse(target, f"holds files changed since finalfusion wrote them: {_listing(changed)}")
    return own


def _write_manifest(directory: str, kind: str) -> None:
    files = {}
    for name in sorted(os.listdir(directory)):
        size, digest = edge_digest(os.path.join(directory, name))
        files[name] = {"size": size, "digest": digest}
    doc = {"format": MANIFEST_FORMAT, "version": MANIFEST_VERSION, "kind": kind, "files": files}
    with atomic_output(os.path.join(directory, MANIFEST_NAME)) as f:
        f.write((json.dumps(doc, indent=1, sort_keys=True) + "\n").encode("utf-8"))


@functools.cache
def _renameat2() -> Callable[..., int] | None:
    if not hasattr(os, "O_DIRECTORY") or os.name != "posix":
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
        fn: Callable[..., int] = libc.renameat2
    except (OSError, AttributeError):
        return None
    return fn


def _exchange(a: str, b: str) -> bool:
    """Swap the directories ``a`` and ``b`` in one step (Linux ``RENAME_EXCHANGE``); ``False`` where that is not available."""
    fn = _renameat2()
    if fn is None:
        return False
    at_fdcwd, rename_exchange = -100, 2
    if fn(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):  # the file system cannot
        return False
    raise OSError(err, os.strerror(err), b)


def _remove_own(directory: str, own: dict[str, tuple[int, str] | None]) -> None:
    """Remove the library's files ``own`` from ``directory``, each only while it is the file checked, then the directory if that left it empty."""
    for name, check in own.items():
        path = os.path.join(directory, name)
        with contextlib.suppress(OSError):
            if stat.S_ISREG(os.lstat(path).st_mode) and (check is None or edge_digest(path) == check):
                os.unlink(path)
    with contextlib.suppress(OSError):
        os.rmdir(directory)


def write_directory(target: str | os.PathLike[str], kind: str, fill: Callable[[str], None]) -> str:
    """Write a ``kind`` directory at ``target``: ``fill(staging)`` writes its files, then it is swapped in whole; its absolute path.

    ``fill`` receives a new empty directory beside the target and writes
    regular files into it; the manifest is added and the directory replaces
    the target -- one ``renameat2(RENAME_EXCHANGE)`` on Linux, two renames
    elsewhere; processes that memory-map the old files keep them. The
    target is checked with :func:`check_directory_target` before ``fill``
    and again just before the swap; afterwards only the old directory's own
    files (those its manifest listed, each still the file checked) are
    removed -- anything that appeared or changed in it meanwhile stays, and
    so does the old directory then, under its temporary name.

    Raises
    ------
    OutputRefused
        The target may not be replaced (see :func:`check_directory_target`).
    FileNotFoundError
        The target's parent directory does not exist.
    OSError
        Any I/O error; the new directory is removed, the target is untouched.

    Examples
    --------
    >>> import tempfile
    >>> def fill(d):
    ...     with open(os.path.join(d, "a.txt"), "w") as f:
    ...         _ = f.write("a")
    >>> out = write_directory(os.path.join(tempfile.mkdtemp(), "out"), "example", fill)
    >>> sorted(os.listdir(out))
    ['a.txt', 'finalfusion-manifest.json']
    >>> sorted(os.listdir(write_directory(out, "example", fill)))  # its own output: replaced
    ['a.txt', 'finalfusion-manifest.json']
    """
    if is_url(target):
        raise ValueError(f"{target}: a URL is read, never written (write a local directory and upload it)")
    path = os.path.abspath(os.fspath(target))
    check_directory_target(path, kind)
    parent, base = os.path.split(path)
    if not os.path.isdir(parent):
        raise FileNotFoundError(errno.ENOENT, f"the directory {parent} does not exist", path)
    staging = os.path.join(parent, temporary_name(parent, base))
    os.mkdir(staging)  # mode 0o777 less the umask, as any new directory
    try:
        fill(staging)
        _write_manifest(staging, kind)
        own = check_directory_target(path, kind)
        if not os.path.lexists(path):
            os.rename(staging, path)
            return path
        exchanged = _exchange(staging, path)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)  # only ours: nothing was swapped yet
        raise
    if exchanged:
        old = staging
    else:
        old = os.path.join(parent, temporary_name(parent, base))
        os.rename(path, old)
        try:
            os.rename(staging, path)
        except BaseException:
            os.rename(old, path)
            shutil.rmtree(staging, ignore_errors=True)
            raise
    _remove_own(old, own)
    return path
