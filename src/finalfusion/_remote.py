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
:class:`FileNotFoundError` at once. Over HTTP(S) each answer is checked
against its request (:func:`_http_fetcher`): another range, another size or
another version of the file is :class:`ServerRefused`, never bytes for a
reader, and every later read of that file is refused too. Credentials and
endpoints are fsspec's own configuration (environment variables, config
files, ``fsspec.config``).
"""

from __future__ import annotations

import contextlib
import contextvars
import errno
import io
import os
import re
from collections.abc import Callable, Iterator
from typing import Any, Final, TypeVar

from finalfusion.errors import MissingExtraError, import_extra

__all__ = [
    "BLOCK_SIZE",
    "CACHE_BLOCKS",
    "CONCURRENT",
    "DIRECT_BLOCKS",
    "MIN_RATE",
    "RETRIES",
    "STREAM_BYTES",
    "TIMEOUT",
    "RangeSource",
    "RemoteFile",
    "is_url",
    "open_url",
    "reporting_fetches",
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
#: Read when a file is opened: the fuzzer's hostile server (fuzz/fuzz.py, ``remote-http``) sets it to half a second.
TIMEOUT: float = 60.0
#: Largest range one request of :meth:`RangeSource.fetch` asks for (longer ranges are split).
STREAM_BYTES: int = 8 << 20
#: Requests of :meth:`RangeSource.fetch` under way at once.
CONCURRENT: int = 16
#: Bytes per second an HTTP(S) range answer must average beyond :data:`TIMEOUT`: a request of ``n`` bytes that takes longer
#: than ``TIMEOUT + n / MIN_RATE`` seconds in all (a server that trickles a byte at a time) is a failed read, retried.
MIN_RATE: int = 16 << 10

_T = TypeVar("_T")

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
        #: Bytes the range requests of this file brought so far (reported to :func:`reporting_fetches`' callable).
        self.fetched = 0
        self._report = _FETCH_REPORT.get()
        self._validators: dict[str, str] = {}
        self._refused: ServerRefused | None = None
        #: Fetches bytes ``[start, end)`` with one range request, checked and counted: fsspec's block cache calls it per block.
        self._fetch: Callable[[int, int], bytes] | None = None
        self._instrument()

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
        if self._refused is not None:  # a server that contradicted itself once is not asked again (a caller may read on after an OSError)
            raise ServerRefused(*self._refused.args)

        def once() -> bytes:
            if n >= DIRECT_BLOCKS * getattr(self._f, "blocksize", n + 1):  # files without blocks (memory://) read as they are
                # One request for the whole range, past the cache: checked and counted as the cache's blocks are (self._fetch).
                return bytes(self._fetch(pos, pos + n) if self._fetch is not None else self._f._fetch_range(pos, pos + n))
            self._f.seek(pos)
            return bytes(self._f.read(n))

        try:
            data = _retried(once, self.name, f"reading {n} bytes at {pos}", self._reopen)
        except ServerRefused as exc:
            self._refused = exc
            raise
        if len(data) != n:
            raise OSError(f"{self.name}: the server sent {len(data)} bytes for a range of {n} at {pos} (a file of {self.size} bytes)")
        return data

    def _reopen(self) -> None:
        with contextlib.suppress(Exception):  # a broken connection may fail to close; a new one is opened
            self._f.close()
        self._f = self._open()
        self._instrument()

    def _instrument(self) -> None:
        """Put the checks (:func:`_http_fetcher`) and the count of each range request between fsspec's block cache and the network."""
        cache: Any = getattr(self._f, "cache", None)
        fetch = getattr(cache, "fetcher", None)
        if fetch is None:
            return
        fetch = _http_fetcher(self._f, self.name, self.size, self._validators) or fetch

        def counted(start: int, end: int) -> bytes:
            data: bytes = fetch(start, end)
            self.fetched += len(data)
            if self._report is not None:
                self._report("fetch", self.fetched, self.size)
            return data

        self._fetch = cache.fetcher = counted

    def close(self) -> None:
        if not self.closed:
            try:
                self._f.close()
            finally:
                super().close()


def _retried(once: Callable[[], _T], name: str, what: str, again: Callable[[], None] | None = None) -> _T:
    """``once()``, called again over a transient failure (:data:`RETRIES` more times, ``again()`` before each).

    A missing file, a refused permission and a server that contradicted
    itself (:class:`ServerRefused`) are not transient: raised at once. A
    file changed at the server (HTTP 412) is an :class:`OSError` saying so.
    Any other error -- the protocol library's own (aiohttp, botocore, ...) --
    is tried again; the last one becomes an :class:`OSError` naming
    ``name``, ``what`` was read and the attempts.

    Examples
    --------
    >>> tries = []
    >>> def flaky():
    ...     tries.append(1)
    ...     if len(tries) < 3:
    ...         raise TimeoutError("slow")
    ...     return b"ok"
    >>> _retried(flaky, "https://h/e.fifu", "reading 2 bytes at 0"), len(tries)
    (b'ok', 3)
    >>> _retried(lambda: 1 / 0, "https://h/e.fifu", "reading 2 bytes at 0")
    Traceback (most recent call last):
    ...
    OSError: https://h/e.fifu: reading 2 bytes at 0 failed 3 times: ZeroDivisionError: division by zero
    """
    for attempt in range(RETRIES + 1):
        try:
            return once()
        except (FileNotFoundError, PermissionError, ServerRefused):  # not transient
            raise
        except Exception as exc:
            if _changed(exc):
                raise _changed_error(name) from exc
            if attempt == RETRIES:
                raise OSError(f"{name}: {what} failed {RETRIES + 1} times: {type(exc).__name__}: {exc}") from exc
            if again is not None:
                again()
    raise AssertionError("unreachable")  # pragma: no cover


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
        # What every answer must keep (the version's ETag; Last-Modified as the first answer gives it).
        self._validators: dict[str, str] = {"ETag": etag} if etag else {}

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

        def once() -> list[bytes]:
            fs = self._filesystem()
            if http:
                return _http_ranges(fs, self._path, self.url, self.size, self._validators, parts)
            # the protocol's own ranged reads (s3, gcs: exactly the range asked)
            got = fs.cat_ranges([self._path] * len(parts), [a for a, _ in parts], [b for _, b in parts], batch_size=CONCURRENT, on_error="raise")
            return [bytes(g) for g in got]

        data = _retried(once, self.url, f"reading {len(parts)} ranges")
        for (start, stop), d in zip(parts, data, strict=True):
            if len(d) != stop - start:
                raise OSError(f"{self.url}: the server sent {len(d)} bytes for a range of {stop - start} at {start} (a file of {self.size} bytes)")
        return data


def _http_ranges(fs: Any, path: str, url: str, size: int, validators: dict[str, str], parts: list[tuple[int, int]]) -> list[bytes]:
    """``parts`` of ``url`` over fsspec's http session, :data:`CONCURRENT` at a time, each answer checked and read to no
    more than its range (:func:`_checked_range`): a server that ignores the range or sends more cannot make this hold
    more than the ranges asked for (fsspec's ``cat_ranges`` reads whole answers)."""
    import asyncio

    from fsspec.asyn import sync  # type: ignore[import-untyped,unused-ignore]

    async def run() -> list[bytes]:
        session = await fs.set_session()
        gate = asyncio.Semaphore(CONCURRENT)

        async def one(start: int, stop: int) -> bytes:
            async with gate:
                return await _checked_range(session, fs.kwargs, fs.encode_url(path), url, start, stop, size, validators)

        return list(await asyncio.gather(*(one(a, b) for a, b in parts)))

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


class ServerRefused(OSError):
    """A server's answer that contradicts the request or an earlier answer (another range, size or version): not retried."""


#: The callable :class:`RemoteFile` reports its fetched bytes to (set by :func:`reporting_fetches`).
_FETCH_REPORT: contextvars.ContextVar[Callable[[str, int, Any], None] | None] = contextvars.ContextVar("finalfusion_fetch_report", default=None)


@contextlib.contextmanager
def reporting_fetches(report: Callable[[str, int, Any], None] | None) -> Iterator[None]:
    """Within the block, every remote file opened reports ``report("fetch", bytes fetched, file size)`` after each range request.

    The command line draws its progress bars of long fetches with it
    (:mod:`finalfusion.cli.progress`). Files opened before the block, or in
    another thread or context, are not affected.

    Parameters
    ----------
    report
        ``report(stage, done, total)`` as for ``progress=`` arguments
        (:mod:`finalfusion._progress`): ``"fetch"``, the bytes this file's
        range requests brought so far, its size. ``None`` reports nothing.

    Examples
    --------
    >>> seen = []
    >>> with reporting_fetches(lambda stage, done, total: seen.append(done)):
    ...     pass  # finalfusion.load("https://...") here: seen gets the bytes fetched so far after each request
    """
    token = _FETCH_REPORT.set(report)
    try:
        yield
    finally:
        _FETCH_REPORT.reset(token)


_CONTENT_RANGE: Final = re.compile(r"bytes (\d+)-(\d+)/(\d+)")


def _http_fetcher(f: Any, url: str, size: int, validators: dict[str, str]) -> Callable[[int, int], bytes] | None:
    """For fsspec's HTTP file ``f``: a range fetcher that checks each answer (else ``None``).

    fsspec takes a 206 answer as the range it asked for; a server that answers another range, gives the file another
    size than its first answer (``HEAD``), or changes the file between two requests (its ``ETag`` or ``Last-Modified``)
    would give a reader the wrong bytes. Here the ``Content-Range`` must name the range asked for and the file's size,
    the body must hold exactly that many bytes, and the validators must stay those of the first answer; else
    :class:`ServerRefused`. A ``200`` (a server that ignores ranges) is taken for a range from the start only, reading
    no more of its body than the range. Each request must end within ``TIMEOUT + bytes / MIN_RATE`` seconds.
    """
    try:
        from fsspec.asyn import sync  # type: ignore[import-untyped,unused-ignore]
        from fsspec.implementations.http import HTTPFile  # type: ignore[import-untyped,unused-ignore]
    except ImportError:  # pragma: no cover - an http:// file needs both
        return None
    if not isinstance(f, HTTPFile):
        return None

    async def fetch(start: int, end: int) -> bytes:
        return await _checked_range(f.session, f.kwargs, f.fs.encode_url(f.url), url, start, min(end, size), size, validators)

    def fetcher(start: int, end: int) -> bytes:
        data: bytes = sync(f.loop, fetch, start, end)
        return data

    return fetcher


async def _checked_range(session: Any, options: dict[str, Any], encoded: str, url: str, start: int, end: int, size: int, validators: dict[str, str]) -> bytes:
    """Bytes ``[start, end)`` of ``url`` (a file of ``size`` bytes) by one range request on fsspec's aiohttp ``session``,
    the answer checked (see :func:`_http_fetcher`); ``options`` are the filesystem's request options (headers such as a
    version's ``If-Match``), ``validators`` the ``ETag`` and ``Last-Modified`` every answer must keep."""
    import aiohttp

    kwargs = dict(options)
    headers = dict(kwargs.pop("headers", None) or {})
    headers["Range"] = f"bytes={start}-{end - 1}"
    kwargs["timeout"] = aiohttp.ClientTimeout(total=TIMEOUT + (end - start) / MIN_RATE, sock_connect=TIMEOUT, sock_read=TIMEOUT)
    async with session.get(encoded, headers=headers, **kwargs) as r:
        if r.status in (404, 410):
            raise FileNotFoundError(errno.ENOENT, "the file is gone from the server", url)
        r.raise_for_status()  # other failures (5xx, 429, 412 for If-Match ...): see the callers
        for key in ("ETag", "Last-Modified"):
            value = r.headers.get(key, "")
            if validators.setdefault(key, value) != value:
                raise ServerRefused(f"{url}: the file changed at the server while it was read ({key} {validators[key]!r}, now {value!r})")
        if r.status == 206:
            header = r.headers.get("Content-Range", "")
            m = _CONTENT_RANGE.fullmatch(header.strip())
            if m is None or (int(m[1]), int(m[2]), int(m[3])) != (start, end - 1, size):
                raise ServerRefused(f"{url}: asked for bytes {start}-{end - 1} of a file of {size} bytes, the server answered Content-Range {header!r}")
        elif r.status != 200 or start > 0:
            raise ServerRefused(f"{url}: the server answered a range request (bytes {start}-{end - 1}) with status {r.status} and the whole file")
        elif r.headers.get("Content-Length", str(size)) != str(size):
            raise ServerRefused(f"{url}: the file's size was {size} bytes, now the server sends {r.headers['Content-Length']}")
        body: bytes = await r.content.read(end - start)
        while len(body) < end - start:
            more = await r.content.read(end - start - len(body))
            if not more:
                raise OSError(f"{url}: the server sent {len(body)} bytes for a range of {end - start} at {start}")
            body += more
        if r.status == 206 and await r.content.read(1):
            raise ServerRefused(f"{url}: the server sent more than the {end - start} bytes of the range at {start}")
        return body
