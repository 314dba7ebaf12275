"""The files of a model directory, local or at a URL: the rules of :mod:`finalfusion._local_files`, also for URLs.

:func:`sibling`, :func:`file_in`, :func:`open_regular` and :func:`read_regular`
take a local path (``str`` or ``os.PathLike``; they are then
:mod:`finalfusion._local_files`' functions) or a URL
(:func:`finalfusion._remote.is_url`), so that a reader of a model directory
follows one set of rules wherever the directory is. A directory at a URL
is the URL without its trailing ``/``, and its files are ``<directory>/<name>``:

* a name read from a file (a shard an index names) passes the local rule
  (a plain file name: no directory part, no ``..``, not absolute) and holds
  none of ``? # % : \\`` nor a control character, so that it is one literal
  name on every server, never a scheme (``..#`` or ``%2e%2e`` would leave the directory once
  a server reads them as a URL);
* a file is found by asking for it (a server need not list a directory): a
  file that is not there (HTTP 404) is ``None``, anything else that fails is
  an :class:`OSError` naming the URL;
* its size, which the server tells when the file is opened, is checked
  against the limit before a byte of it is fetched.

Use them through :mod:`finalfusion._source`, which re-exports them.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Final, Union, cast

from finalfusion import _local_files
from finalfusion._remote import is_url, open_url
from finalfusion.errors import FormatError

__all__ = ["Location", "file_in", "open_regular", "parent_of", "read_regular", "sibling"]

#: Where a model's files are: a local path, or a URL (a ``str``, see :func:`~finalfusion._remote.is_url`).
Location = Union[str, "os.PathLike[str]"]

#: Characters a name read from a file may not hold in a URL: a query, a fragment, an escape, a backslash, control characters.
_NOT_IN_URL_NAMES: Final = re.compile(r"[?#%:\\\x00-\x1f\x7f]")


def _join(directory: str, name: str) -> str:
    return directory.rstrip("/") + "/" + name


def parent_of(location: Location) -> Location | None:
    """The directory that holds ``location`` (a path's parent; for a URL, the URL up to its last ``/``), ``None`` when there is none.

    A URL with a query or a fragment has no directory (its files' URLs cannot be derived from it), nor does a bare host.

    Examples
    --------
    >>> parent_of("https://example.org/models/m/model.safetensors"), parent_of("https://example.org/models/m/")
    ('https://example.org/models/m', 'https://example.org/models')
    >>> parent_of("https://example.org/m.safetensors?download=1"), parent_of("s3://bucket"), parent_of(Path("/m/w.safetensors"))
    (None, None, PosixPath('/m'))
    """
    if not is_url(location):
        return Path(os.fsdecode(location)).parent
    url = cast(str, location).rstrip("/")
    rest = url.partition("://")[2]
    if "?" in rest or "#" in rest or "/" not in rest:
        return None
    return url.rsplit("/", 1)[0]


def sibling(directory: Location, name: str, *, chunk: str, message: str = "a file named in the data must be next to it") -> str:
    """The file ``name`` in ``directory``: :func:`finalfusion._local_files.sibling`, for a URL also without URL syntax in the name.

    Raises
    ------
    FormatError
        For a name that is not a plain file name (or holds ``?``, ``#``, ``%``, ``:``, ``\\`` or a control character in a URL).

    Examples
    --------
    >>> sibling("https://example.org/m", "model-00001-of-00002.safetensors", chunk="x")
    'https://example.org/m/model-00001-of-00002.safetensors'
    >>> sibling("https://example.org/m", "%2e%2e", chunk="x")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    finalfusion.errors.FormatError: x: a file named in the data must be next to it: expected a plain file name (no ? # % : ...), found %2e%2e
    """
    if not is_url(directory):
        return _local_files.sibling(directory, name, chunk=chunk, message=message)
    _local_files.sibling(".", name, chunk=chunk, message=message)  # the plain-file-name rule
    if _NOT_IN_URL_NAMES.search(name):
        raise FormatError(message, chunk=chunk, expected="a plain file name (no ? # % : \\ or control characters in a URL)", found=name)
    return _join(cast(str, directory), name)


def file_in(directory: Location, name: str, *, chunk: str) -> str | None:
    """The file ``name`` (a name the library chose) in ``directory`` if it is there, else ``None``; :func:`finalfusion._local_files.file_in` for a path.

    At a URL, the file is asked for (opened: the server tells its size, no
    byte of it is fetched); one that is not there is ``None``.

    Raises
    ------
    FormatError
        For a local file that is not a regular file inside the directory.
    OSError
        When a URL cannot be asked (a refused connection, a server error, a refused permission).

    Examples
    --------
    >>> import tempfile
    >>> file_in(tempfile.mkdtemp(), "tokenizer.json", chunk="x") is None
    True
    """
    if not is_url(directory):
        return _local_files.file_in(directory, name, chunk=chunk)
    url = _join(cast(str, directory), name)
    try:
        open_url(url).close()
    except FileNotFoundError:
        return None
    return url


@contextlib.contextmanager
def open_regular(path: Location, *, chunk: str) -> Iterator[IO[bytes]]:
    """``path`` opened for binary reading: :func:`finalfusion._local_files.open_regular`, or a URL opened with range requests.

    Raises
    ------
    FormatError
        For a local file that is not a regular file.
    OSError
        If the file cannot be opened (:class:`FileNotFoundError` when it is not there).

    Examples
    --------
    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "x.bin")
    >>> with open(path, "wb") as f:
    ...     _ = f.write(b"data")
    >>> with open_regular(path, chunk="x") as f:
    ...     f.read()
    b'data'
    """
    if not is_url(path):
        with _local_files.open_regular(path, chunk=chunk) as f:
            yield f
        return
    with open_url(cast(str, path)) as remote:
        yield cast(IO[bytes], remote)


def read_regular(path: Location, *, chunk: str, max_bytes: int, limit: str) -> bytes:
    """The bytes of the file ``path`` (:func:`finalfusion._local_files.read_regular`), refused from its size when it holds more than ``max_bytes``.

    At a URL the size the server tells is checked before a byte is fetched.

    Raises
    ------
    FormatError
        For a file larger than ``max_bytes`` (the message names ``limit``), or a local file that is not a regular file.
    OSError
        If the file cannot be read.

    Examples
    --------
    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "config.json")
    >>> with open(path, "wb") as f:
    ...     _ = f.write(b"{}")
    >>> read_regular(path, chunk="x", max_bytes=10, limit="L")
    b'{}'
    """
    if not is_url(path):
        return _local_files.read_regular(path, chunk=chunk, max_bytes=max_bytes, limit=limit)
    with open_url(cast(str, path)) as f:
        _local_files.check_size(cast(str, path), f.size, chunk=chunk, max_bytes=max_bytes, limit=limit)
        return f.read(f.size)
