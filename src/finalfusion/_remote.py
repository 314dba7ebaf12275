"""Files named by a URL (``https://``, ``s3://``, ``gs://``, ``hf://``, anything fsspec knows), read with range requests.

A URL is a ``str`` that starts with a scheme of two or more characters and
``://`` (``file://`` excepted): a local path never goes through fsspec, and
an ``os.PathLike`` is always local. :func:`open_url` opens one through
fsspec (the ``remote`` extra) as a seekable binary file of known size whose
small reads are range requests of whole blocks, kept in a bounded cache
(:data:`BLOCK_SIZE` x :data:`CACHE_BLOCKS`), and whose reads of
a block or more (:data:`DIRECT_BLOCKS`) are one range request of their own
bytes, past the cache (a token table: one request, not one a block). The readers then treat it as
they treat any seekable file object: they read the headers they parse and
the bytes they use, and skip the rest by seeking (:func:`~finalfusion._source.skip`),
so a GGUF's token table or a safetensors tensor costs its own bytes and the
headers, not the file. Transient failures of a read are retried
(:data:`RETRIES` times, from the same position); a file that is not there is
:class:`FileNotFoundError` at once. Credentials and endpoints are fsspec's
own configuration (environment variables, config files, ``fsspec.config``).
"""

from __future__ import annotations

import contextlib
import errno
import io
import os
import re
from typing import Any, Final

from finalfusion.errors import MissingExtraError, import_extra

__all__ = [
    "BLOCK_SIZE",
    "CACHE_BLOCKS",
    "CONCURRENT",
    "DIRECT_BLOCKS",
    "RETRIES",
    "STREAM_BYTES",
    "TIMEOUT",
    "RangeSource",
    "RemoteFile",
    "is_url",
    "open_url",
]

#: Bytes of one range request (fsspec's block): a read fetches the blocks it touches.
BLOCK_SIZE: int = 1 << 20
#: Blocks kept per open file (fsspec's ``blockcache``): the memory a remote file holds is at most their size.
CACHE_BLOCKS: int = 32
#: A read of this many blocks or more is one range request of exactly its bytes, not kept in the cache.
DIRECT_BLOCKS: int = 1
#: Further attempts of a read that failed for a reason other than a missing file or a refused permission.
RETRIES: int = 2
#: Seconds an HTTP(S) server may take to connect or between two reads of an answer (fsspec's http, through aiohttp).
TIMEOUT: float = 60.0
#: Largest range one request of :meth:`RangeSource.fetch` asks for (longer ranges are split).
STREAM_BYTES: int = 8 << 20
#: Requests of :meth:`RangeSource.fetch` under way at once.
CONCURRENT: int = 16

_URL: Final = re.compile(r"([A-Za-z][A-Za-z0-9+.-]+)://")


def is_url(source: object) -> bool:
    """Whether ``source`` is a URL for fsspec (a ``str`` ``scheme://...`` other than ``file://``), not a local path.

    Examples
    --------
    >>> is_url("https://example.org/e.fifu"), is_url("s3://bucket/e.gguf"), is_url("e.fifu"), is_url("file:///tmp/e.fifu")
    (True, True, False, False)
    >>> from pathlib import Path
    >>> is_url(Path("https://example.org"))  # a PathLike is a local path
    False
    """
    if not isinstance(source, str):
        return False
    match = _URL.match(source)
    return match is not None and match.group(1).lower() != "file"


class RemoteFile(io.RawIOBase):
    """A remote file opened by fsspec: seekable, of known size (:attr:`size`), its reads retried on transient failures."""

    def __init__(self, url: str, opener: Any) -> None:
        super().__init__()
        self.name = url
        self._open = opener
        self._f = opener()
        size = getattr(self._f, "size", None)
        if not isinstance(size, int) or size < 0:
            self._f.close()
            raise OSError(f"{url}: the server does not tell the file's size, which range requests need")
        self.size = size
        self._pos = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self.size}[whence]
        if base + offset < 0:
            raise OSError(f"{self.name}: seek before the start of the file")
        self._pos = base + offset
        return self._pos

    def readinto(self, b: Any) -> int:
        view = memoryview(b).cast("B")
        want = min(len(view), max(0, self.size - self._pos))
        if want == 0:
            return 0
        data = self._read_at(self._pos, want)
        view[: len(data)] = data
        self._pos += len(data)
        return len(data)

    def read(self, size: int | None = -1) -> bytes:
        left = max(0, self.size - self._pos)
        n = left if size is None or size < 0 else min(size, left)
        if n == 0:
            return b""
        data = self._read_at(self._pos, n)
        self._pos += len(data)
        return data

    def readall(self) -> bytes:
        return self.read(-1)

    def _read_at(self, pos: int, n: int) -> bytes:
        for attempt in range(RETRIES + 1):
            try:
                if n >= DIRECT_BLOCKS * self._f.blocksize:
                    # One request for the whole range (fsspec's own fetch of a range, which its caches call per block).
                    data = bytes(self._f._fetch_range(pos, pos + n))
                else:
                    self._f.seek(pos)
                    data = bytes(self._f.read(n))
            except (FileNotFoundError, PermissionError):
                raise
            except Exception as exc:  # the protocol library's own errors (aiohttp, botocore, ...): a transient failure
                if _changed(exc):
                    raise _changed_error(self.name) from exc
                if attempt == RETRIES:
                    raise OSError(f"{self.name}: reading {n} bytes at {pos} failed {RETRIES + 1} times: {type(exc).__name__}: {exc}") from exc
                self._reopen()
                continue
            if len(data) != n:
                raise OSError(f"{self.name}: the server sent {len(data)} bytes for a range of {n} at {pos} (a file of {self.size} bytes)")
            return data
        raise AssertionError("unreachable")  # pragma: no cover

    def _reopen(self) -> None:
        with contextlib.suppress(Exception):  # a broken connection may fail to close; a new one is opened
            self._f.close()
        self._f = self._open()

    def close(self) -> None:
        if not self.closed:
            try:
                self._f.close()
            finally:
                super().close()


def _changed(exc: BaseException) -> bool:
    """Whether ``exc`` is a server's answer that the file no longer matches the version pinned by ``If-Match`` (HTTP 412)."""
    return getattr(exc, "status", None) == 412


def _changed_error(url: str) -> OSError:
    return OSError(f"{url}: the file changed at the server since it was opened (its ETag no longer matches); load it again")


def _client_options(url: str) -> dict[str, Any]:
    """fsspec's filesystem options for ``url``: the timeouts of an http(s) client."""
    if url.split("://", 1)[0].lower() in ("http", "https"):
        aiohttp = import_extra("aiohttp", "reading http(s):// URLs", extra="remote")
        return {"client_kwargs": {"timeout": aiohttp.ClientTimeout(total=None, sock_connect=TIMEOUT, sock_read=TIMEOUT)}}
    return {}


class RangeSource:
    """Byte ranges of one remote file, fetched concurrently and checked: each exactly as long as asked, the file unchanged.

    :meth:`open` asks the server for the file's size and, over http(s), its
    ``ETag``; every later request carries ``If-Match`` with it, so a file
    replaced at the server is an :class:`OSError` (HTTP 412), never bytes of
    another version. Servers without an ``ETag`` (and other protocols) are
    checked by the lengths of what they send only.

    Examples
    --------
    >>> import pytest; _ = pytest.importorskip("aiohttp")
    >>> try:
    ...     RangeSource.open("http://127.0.0.1:9/e.fifu")  # nothing listens on port 9
    ... except OSError as err:
    ...     print(str(err)[:58])
    http://127.0.0.1:9/e.fifu: cannot be opened: ClientConnect
    """

    def __init__(self, url: str, fs: Any, path: str, size: int, etag: str | None, options: dict[str, Any] | None = None) -> None:
        self.url = url
        self._fs = fs
        self._path = path
        self._options = options or {}
        self._pid = os.getpid()
        #: The file's size in bytes when it was opened.
        self.size = size
        #: The server's ``ETag`` of the opened version (``None``: not told).
        self.etag = etag

    @classmethod
    def open(cls, url: str) -> RangeSource:
        """Ask the server for ``url``'s size and version (see the class).

        Raises
        ------
        MissingExtraError
            Without fsspec or the protocol's package.
        FileNotFoundError
            If nothing is at ``url``.
        OSError
            If the server cannot be reached or does not tell the size.
        """
        fsspec = import_extra("fsspec", "reading files named by a URL", extra="remote")
        options = _client_options(url)
        try:
            fs, path = fsspec.core.url_to_fs(url, **options)
            info = fs.info(path)
        except FileNotFoundError as exc:
            cause = exc.__cause__ or exc.__context__
            if cause is not None and getattr(cause, "status", None) not in (404, 410):
                raise OSError(f"{url}: cannot be opened: {type(cause).__name__}: {cause}") from None
            raise FileNotFoundError(errno.ENOENT, "no file at this URL", url) from None
        except (PermissionError, MissingExtraError):
            raise
        except Exception as exc:
            raise OSError(f"{url}: cannot be opened: {type(exc).__name__}: {exc}") from exc
        size = info.get("size")
        if not isinstance(size, int) or size < 0:
            raise OSError(f"{url}: the server does not tell the file's size, which range requests need")
        etag = info.get("ETag")
        if isinstance(etag, str) and etag and url.split("://", 1)[0].lower() in ("http", "https"):
            options = {**options, "headers": {"If-Match": etag}}
            fs, path = fsspec.core.url_to_fs(url, **options)
        else:
            etag = None
        return cls(url, fs, path, size, etag, options)

    def _filesystem(self) -> Any:
        """fsspec's filesystem, made anew in a forked child (the parent's event loop thread does not run there)."""
        if self._pid != os.getpid():
            fsspec = import_extra("fsspec", "reading files named by a URL", extra="remote")
            self._fs, self._path = fsspec.core.url_to_fs(self.url, **self._options)
            self._pid = os.getpid()
        return self._fs

    @property
    def pin(self) -> dict[str, Any]:
        """fsspec options that pin this version (``If-Match``), for :func:`open_url`'s ``options``."""
        return {"headers": {"If-Match": self.etag}} if self.etag else {}

    def fetch(self, ranges: list[tuple[int, int]]) -> list[bytes]:
        """The bytes of each ``(start, stop)`` range, fetched :data:`CONCURRENT` at a time (ranges longer than :data:`STREAM_BYTES` split).

        Raises
        ------
        OSError
            If a range runs past the file's size, the server sends another
            number of bytes than asked, the file changed since :meth:`open`,
            or a request fails :data:`RETRIES` + 1 times.
        """
        parts: list[tuple[int, int]] = []
        for start, stop in ranges:
            if not 0 <= start <= stop <= self.size:
                raise OSError(f"{self.url}: bytes {start}..{stop} asked of a file of {self.size} bytes")
            parts.extend((lo, min(lo + STREAM_BYTES, stop)) for lo in range(start, stop, STREAM_BYTES))
        got = self._fetch(parts) if parts else []
        out: list[bytes] = []
        k = 0
        for start, stop in ranges:
            n = -(-(stop - start) // STREAM_BYTES)
            out.append(b"".join(got[k : k + n]))
            k += n
        return out

    def _fetch(self, parts: list[tuple[int, int]]) -> list[bytes]:
        http = self.url.split("://", 1)[0].lower() in ("http", "https")
        for attempt in range(RETRIES + 1):
            try:
                fs = self._filesystem()
                if http:
                    data = _http_ranges(fs, self._path, parts)
                else:  # the protocol's own ranged reads (s3, gcs: exactly the range asked)
                    got = fs.cat_ranges([self._path] * len(parts), [a for a, _ in parts], [b for _, b in parts], batch_size=CONCURRENT, on_error="raise")
                    data = [bytes(g) for g in got]
            except (FileNotFoundError, PermissionError):
                raise
            except _NotARange as exc:  # not transient: the server does not do ranges
                raise OSError(str(exc)) from None
            except Exception as exc:
                if _changed(exc):
                    raise _changed_error(self.url) from exc
                if attempt == RETRIES:
                    raise OSError(f"{self.url}: reading {len(parts)} ranges failed {RETRIES + 1} times: {type(exc).__name__}: {exc}") from exc
                continue
            for (start, stop), d in zip(parts, data, strict=True):
                if len(d) != stop - start:
                    raise OSError(f"{self.url}: the server sent {len(d)} bytes for a range of {stop - start} at {start} (a file of {self.size} bytes)")
            return data
        raise AssertionError("unreachable")  # pragma: no cover


class _NotARange(Exception):
    """A server answered a range request with something else than 206 (the whole file, a redirect page ...)."""


class _OtherVersion(Exception):
    """A server answered with the ``ETag`` of another version than the one pinned (it ignored ``If-Match``)."""

    status = 412  # what a server that honours If-Match answers: the same failure (see _changed)


def _http_ranges(fs: Any, url: str, parts: list[tuple[int, int]]) -> list[bytes]:
    """``parts`` of ``url`` over fsspec's http session, :data:`CONCURRENT` at a time, each answer read to at most one byte
    more than asked: a server that ignores the range (status 200) or sends more cannot make this hold more than the
    ranges asked for, whatever the size of its answer (fsspec's ``cat_ranges`` reads whole answers)."""
    import asyncio

    from fsspec.asyn import sync  # type: ignore[import-untyped,unused-ignore]

    async def one(session: Any, gate: asyncio.Semaphore, start: int, stop: int) -> bytes:
        kwargs = dict(fs.kwargs)
        headers = {**kwargs.pop("headers", {}), "Range": f"bytes={start}-{stop - 1}"}
        async with gate, session.get(fs.encode_url(url), headers=headers, **kwargs) as r:
            if r.status == 404:
                raise FileNotFoundError(errno.ENOENT, "no file at this URL", url)
            r.raise_for_status()
            if r.status != 206:
                raise _NotARange(f"{url}: the server answered a range request with status {r.status}, not 206 (it ignores ranges)")
            pinned, tag = headers.get("If-Match"), r.headers.get("ETag")
            if pinned is not None and tag is not None and tag != pinned:
                raise _OtherVersion(f"{url}: ETag {tag} instead of {pinned}")
            out = bytearray()
            while len(out) <= stop - start:
                chunk = await r.content.read(stop - start + 1 - len(out))
                if not chunk:
                    break
                out += chunk
            return bytes(out)

    async def run() -> list[bytes]:
        session = await fs.set_session()
        gate = asyncio.Semaphore(CONCURRENT)
        return list(await asyncio.gather(*(one(session, gate, a, b) for a, b in parts)))

    result: list[bytes] = sync(fs.loop, run)
    return result


def open_url(url: str, *, block_size: int | None = None, cache_blocks: int | None = None, options: dict[str, Any] | None = None) -> RemoteFile:
    """``url`` opened for reading with range requests through fsspec (:class:`RemoteFile`).

    Parameters
    ----------
    url
        Anything fsspec opens: ``https://``, ``s3://`` (``s3fs``), ``gs://``
        (``gcsfs``), ``hf://`` (``huggingface_hub``), ...
    block_size, cache_blocks
        Bytes per range request and blocks kept (default :data:`BLOCK_SIZE`,
        :data:`CACHE_BLOCKS`).
    options
        More fsspec options (:attr:`RangeSource.pin` pins a version).

    Raises
    ------
    MissingExtraError
        Without fsspec (the ``remote`` extra), or without the package of the URL's protocol.
    FileNotFoundError
        If nothing is at ``url``.
    OSError
        If the file cannot be opened (its size unknown, a refused connection).

    Examples
    --------
    >>> import pytest; _ = pytest.importorskip("aiohttp")
    >>> try:
    ...     open_url("http://127.0.0.1:9/e.fifu")  # nothing listens on port 9
    ... except OSError as err:
    ...     print(str(err)[:58])
    http://127.0.0.1:9/e.fifu: cannot be opened: ClientConnect
    """
    fsspec = import_extra("fsspec", "reading files named by a URL", extra="remote")
    blocks = CACHE_BLOCKS if cache_blocks is None else cache_blocks
    file_options: dict[str, Any] = {
        "block_size": BLOCK_SIZE if block_size is None else block_size,
        "cache_type": "blockcache",
        "cache_options": {"maxblocks": blocks},
    }
    # The filesystem's options: the http client's timeouts and the caller's (a version pin); credentials and endpoints
    # are fsspec's own configuration.
    storage: dict[str, Any] = {**_client_options(url), **(options or {})}
    http = url.split("://", 1)[0].lower() in ("http", "https")

    def opener() -> Any:
        # The block options go to the file, the client's to the filesystem: fsspec.open would give them all to the
        # filesystem, which s3fs refuses (its session takes no block_size).
        fs, path = fsspec.core.url_to_fs(url, **storage)
        return fs.open(path, "rb", **file_options)

    try:
        f = RemoteFile(url, opener)
    except FileNotFoundError as exc:
        cause = exc.__cause__ or exc.__context__
        # fsspec's http says "not found" for a refused connection too; s3fs and the others mean it
        if http and cause is not None and getattr(cause, "status", None) not in (404, 410):
            raise OSError(f"{url}: cannot be opened: {type(cause).__name__}: {cause}") from None
        raise FileNotFoundError(errno.ENOENT, "no file at this URL", url) from None
    except (PermissionError, MissingExtraError):
        raise
    except ImportError as exc:  # fsspec's protocol packages: aiohttp (http, the remote extra), s3fs, gcsfs, huggingface_hub
        scheme = url.split("://", 1)[0].lower()
        from fsspec.registry import known_implementations  # type: ignore[import-untyped,unused-ignore]

        package = exc.name or str(known_implementations.get(scheme, {}).get("class", "")).split(".")[0] or f"{scheme} support"
        what = f"reading {scheme}:// URLs"
        if package in ("aiohttp", "fsspec"):
            raise MissingExtraError(package, what, extra="remote") from None
        raise MissingExtraError(package, what, extra="remote", install=f"pip install {package} (fsspec's own package for {scheme}://)") from None
    except Exception as exc:
        raise OSError(f"{url}: cannot be opened: {type(exc).__name__}: {exc}") from exc
    return f
