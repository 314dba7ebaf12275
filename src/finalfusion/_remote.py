"""Files named by a URL (``https://``, ``s3://``, ``gs://``, ``hf://``, anything fsspec knows), read with range requests.

A URL is a ``str`` that starts with a scheme of two or more characters and
``://`` (``file://`` excepted): a local path never goes through fsspec, and
an ``os.PathLike`` is always local. :func:`open_url` opens one through
fsspec (the ``remote`` extra) as a seekable binary file of known size whose
reads are range requests of whole blocks, kept in a bounded cache
(:data:`BLOCK_SIZE` x :data:`CACHE_BLOCKS`). The readers then treat it as
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
import re
from collections.abc import Callable, Iterator
from typing import Any, Final

from finalfusion.errors import MissingExtraError, import_extra

__all__ = ["BLOCK_SIZE", "CACHE_BLOCKS", "MIN_RATE", "RETRIES", "TIMEOUT", "RemoteFile", "is_url", "open_url", "reporting_fetches"]

#: Bytes of one range request (fsspec's block): a read fetches the blocks it touches.
BLOCK_SIZE: int = 1 << 20
#: Blocks kept per open file (fsspec's ``blockcache``): the memory a remote file holds is at most their size.
CACHE_BLOCKS: int = 32
#: Further attempts of a read that failed for a reason other than a missing file or a refused permission.
RETRIES: int = 2
#: Seconds an HTTP(S) server may take to connect or between two reads of an answer (fsspec's http, through aiohttp).
#: Read when a file is opened: the fuzzer's hostile server (fuzz/fuzz.py, ``remote-http``) sets it to half a second.
TIMEOUT: float = 60.0
#: Bytes per second an HTTP(S) range answer must average beyond :data:`TIMEOUT`: a request of ``n`` bytes that takes longer
#: than ``TIMEOUT + n / MIN_RATE`` seconds in all (a server that trickles a byte at a time) is a failed read, retried.
MIN_RATE: int = 16 << 10

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
        for attempt in range(RETRIES + 1):
            try:
                self._f.seek(pos)
                data = bytes(self._f.read(n))
            except ServerRefused as exc:
                self._refused = exc
                raise
            except (FileNotFoundError, PermissionError):
                raise
            except Exception as exc:  # the protocol library's own errors (aiohttp, botocore, ...): a transient failure
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


def open_url(url: str, *, block_size: int | None = None, cache_blocks: int | None = None) -> RemoteFile:
    """``url`` opened for reading with range requests through fsspec (:class:`RemoteFile`).

    Parameters
    ----------
    url
        Anything fsspec opens: ``https://``, ``s3://`` (``s3fs``), ``gs://``
        (``gcsfs``), ``hf://`` (``huggingface_hub``), ...
    block_size, cache_blocks
        Bytes per range request and blocks kept (default :data:`BLOCK_SIZE`,
        :data:`CACHE_BLOCKS`).

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
    options: dict[str, Any] = {
        "block_size": BLOCK_SIZE if block_size is None else block_size,
        "cache_type": "blockcache",
        "cache_options": {"maxblocks": blocks},
    }
    if url.split("://", 1)[0].lower() in ("http", "https"):
        aiohttp = import_extra("aiohttp", "reading http(s):// URLs", extra="remote")
        options["client_kwargs"] = {"timeout": aiohttp.ClientTimeout(total=None, sock_connect=TIMEOUT, sock_read=TIMEOUT)}

    def opener() -> Any:
        return fsspec.open(url, "rb", **options).open()

    try:
        f = RemoteFile(url, opener)
    except FileNotFoundError as exc:
        cause = exc.__cause__ or exc.__context__
        if cause is not None and getattr(cause, "status", None) not in (404, 410):  # fsspec's http says "not found" for a refused connection too
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
        import aiohttp
        from fsspec.asyn import sync  # type: ignore[import-untyped,unused-ignore]
        from fsspec.implementations.http import HTTPFile  # type: ignore[import-untyped,unused-ignore]
    except ImportError:  # pragma: no cover - an http:// file needs both
        return None
    if not isinstance(f, HTTPFile):
        return None

    async def fetch(start: int, end: int) -> bytes:
        end = min(end, size)
        kwargs = dict(f.kwargs)
        headers = dict(kwargs.pop("headers", None) or {})
        headers["Range"] = f"bytes={start}-{end - 1}"
        kwargs["timeout"] = aiohttp.ClientTimeout(total=TIMEOUT + (end - start) / MIN_RATE, sock_connect=TIMEOUT, sock_read=TIMEOUT)
        async with f.session.get(f.fs.encode_url(f.url), headers=headers, **kwargs) as r:
            if r.status in (404, 410):
                raise FileNotFoundError(errno.ENOENT, "the file is gone from the server", url)
            r.raise_for_status()  # other failures (5xx, 429, ...): transient, retried
            for key in ("ETag", "Last-Modified"):
                value = r.headers.get(key, "")
                if validators.setdefault(key, value) != value:
                    raise ServerRefused(f"{url}: the file changed on the server while it was read ({key} {validators[key]!r}, now {value!r})")
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

    def fetcher(start: int, end: int) -> bytes:
        data: bytes = sync(f.loop, fetch, start, end)
        return data

    return fetcher
