"""Web servers on the loopback interface for tests/test_remote.py: nginx (a real server with range support) and a hostile one.

nginx is Debian's package (``apt-get install nginx-light``; ``.ci/run`` installs it), started with a configuration
written here, serving one directory and logging each request's status, ``Range`` header and body bytes, so a test can
count what a load fetched. The hostile server is Python's own, answering range requests wrongly on purpose.
"""

from __future__ import annotations

import http.server
import os
import re
import shutil
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Request:
    status: int
    method: str
    path: str
    range: str | None
    sent: int


@dataclass
class Nginx:
    root: Path
    port: int
    log: Path

    def url(self, name: str) -> str:
        return f"http://127.0.0.1:{self.port}/{name}"

    def requests(self) -> list[Request]:
        """Every request logged since the last :meth:`clear` (nginx writes its log line when the response is done)."""
        out = []
        for line in self.log.read_text(encoding="utf-8").splitlines():
            m = re.fullmatch(r'(\d+) "(\w+) (\S+) [^"]*" range="([^"]*)" sent=(\d+)', line)
            if m:
                out.append(Request(int(m[1]), m[2], m[3], None if m[4] == "-" else m[4], int(m[5])))
        return out

    def clear(self) -> None:
        self.log.write_bytes(b"")


@contextmanager
def nginx(root: Path, work: Path) -> Iterator[Nginx]:
    """nginx serving ``root`` on a free loopback port (its files in ``work``), stopped when the block ends."""
    binary = shutil.which("nginx") or ("/usr/sbin/nginx" if os.path.exists("/usr/sbin/nginx") else None)
    if binary is None:
        raise FileNotFoundError("nginx is not installed (Debian: apt-get install nginx-light; .ci/run installs it)")
    port = free_port()
    log = work / "access.log"
    tmp = work / "tmp"
    tmp.mkdir(parents=True, exist_ok=True)
    temp_paths = " ".join(f"{kind}_temp_path {tmp};" for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
    conf = work / "nginx.conf"
    conf.write_text(
        f"""daemon off;
{"user root;" if os.geteuid() == 0 else ""}
worker_processes 1;
pid {work / "nginx.pid"};
error_log {work / "error.log"};
events {{ worker_connections 64; }}
http {{
  log_format ranges '$status "$request" range="$http_range" sent=$body_bytes_sent';
  access_log {log} ranges;
  {temp_paths}
  server {{ listen 127.0.0.1:{port}; root {root}; }}
}}
""",
        encoding="utf-8",
    )
    log.write_bytes(b"")
    proc = subprocess.Popen([binary, "-c", str(conf), "-p", str(work)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                    break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    err = proc.stderr.read().decode() if proc.stderr else ""
                    raise RuntimeError(f"nginx did not start: {err}") from None
                time.sleep(0.05)
        yield Nginx(root, port, log)
    finally:
        proc.send_signal(signal.SIGQUIT)
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@contextmanager
def _serving(handler: type[http.server.BaseHTTPRequestHandler]) -> Iterator[str]:
    """``handler`` answering on a free loopback port, one thread per request, until the block ends; ``http://host:port``."""
    with http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler) as server:
        server.daemon_threads = True  # a stalled answer's thread must not keep the test run alive
        threading.Thread(target=server.serve_forever, daemon=True).start()
        try:
            yield f"http://127.0.0.1:{server.server_address[1]}"
        finally:
            server.shutdown()


class _Hostile(http.server.BaseHTTPRequestHandler):
    """Serves the one file ``data`` wrongly, as ``mode`` says: ``ignore-range`` (200 with the whole file), ``short`` (a
    206 whose body ends early), ``long`` (a 206 with more bytes than asked), ``stall`` (a 206 that stops sending)."""

    data = b""
    mode = "ignore-range"

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_HEAD(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", str(len(self.data)))
        self.send_header("Accept-Ranges", "bytes")
        self.end_headers()

    def do_GET(self) -> None:
        m = re.fullmatch(r"bytes=(\d+)-(\d*)", self.headers.get("Range", ""))
        if self.mode == "ignore-range" or m is None:
            self.send_response(200)
            self.send_header("Content-Length", str(len(self.data)))
            self.end_headers()
            self.wfile.write(self.data)
            return
        start = int(m[1])
        stop = min(int(m[2]) + 1 if m[2] else len(self.data), len(self.data))
        body = self.data[start:stop]
        if self.mode == "short":
            body = body[: len(body) // 2]
        elif self.mode == "long":
            body = body + b"\0" * 1000
        self.send_response(206)
        self.send_header("Content-Range", f"bytes {start}-{stop - 1}/{len(self.data)}")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.mode == "stall":
            self.wfile.write(body[:10])
            self.wfile.flush()
            time.sleep(3600)
        self.wfile.write(body)


@contextmanager
def hostile(data: bytes, mode: str) -> Iterator[str]:
    """A server of one file (``data``) that answers range requests wrongly (see :class:`_Hostile`); its URL."""
    with _serving(type("Handler", (_Hostile,), {"data": data, "mode": mode})) as base:
        yield base + "/file.bin"


# --- nginx for a test module: skipped where nginx is missing (tests/test_remote.py, tests/test_remote_models.py) ----------


@contextmanager
def nginx_or_skip(root: Path, work: Path) -> Iterator[Nginx]:
    """:func:`nginx` serving ``root``, or the calling test skipped where nginx is not installed (CI installs it)."""
    from contextlib import ExitStack

    import pytest

    with ExitStack() as stack:
        try:
            srv = stack.enter_context(nginx(root, work))
        except FileNotFoundError as exc:  # a machine without nginx cannot run a real server
            pytest.skip(str(exc))
        yield srv


# --- an S3-compatible endpoint: moto's server, its requests counted (tests/test_remote_s3.py) ---------------------------


class _Counted:
    """A WSGI application that records each request it answers (status, method, path, ``Range`` header, body bytes sent)."""

    def __init__(self, app: object) -> None:
        self.app = app
        self.log: list[Request] = []
        self.lock = threading.Lock()

    def __call__(self, environ: dict[str, object], start_response: object) -> Iterator[bytes]:
        status: list[int] = []

        def start(line: str, headers: object, exc_info: object = None) -> object:
            status.append(int(line.split()[0]))
            return start_response(line, headers, exc_info)

        body = self.app(environ, start)
        method, path, range_ = (environ.get(k) for k in ("REQUEST_METHOD", "PATH_INFO", "HTTP_RANGE"))
        # Logged before the body is sent and counted as it goes: the client may have it all before the last next().
        entry = Request(status[0] if status else 0, str(method), str(path), None if range_ is None else str(range_), 0)
        with self.lock:
            self.log.append(entry)
        try:
            for part in body:
                entry.sent += len(part)
                entry.status = status[0] if status else 0
                yield part
        finally:
            entry.status = status[0] if status else 0
            if hasattr(body, "close"):
                body.close()


@dataclass
class S3:
    endpoint: str
    counted: _Counted

    def requests(self) -> list[Request]:
        """Every request answered since the last :meth:`clear` (uploads included)."""
        with self.counted.lock:
            return list(self.counted.log)

    def clear(self) -> None:
        with self.counted.lock:
            self.counted.log.clear()


@contextmanager
def moto_s3() -> Iterator[S3]:
    """moto's S3 server (``ThreadedMotoServer``) on a free loopback port, its requests counted, stopped when the block ends."""
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=free_port(), verbose=False)
    server.start()
    try:
        wsgi = server._server
        assert wsgi is not None
        counted = _Counted(wsgi.app)
        wsgi.app = counted  # werkzeug reads the application per request: every request from here on is counted
        host, port = server.get_host_and_port()
        yield S3(f"http://{host}:{port}", counted)
    finally:
        server.stop()


# -- for tests/test_remote_fifu.py: nginx or a skip, and a server whose answers change when a test says so ---------------


@contextmanager
def nginx_in_temp(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Nginx]:
    """:func:`nginx_or_skip` serving a fresh temporary directory."""
    with nginx_or_skip(tmp_path_factory.mktemp("www"), tmp_path_factory.mktemp("nginx")) as srv:
        yield srv


def nginx_fixtures() -> tuple[Any, Any]:
    """A test module's fixtures ``server`` (nginx for the module, :func:`nginx_in_temp`) and ``served`` (the same, its
    log cleared for each test): ``server, served = nginx_fixtures()``."""

    @pytest.fixture(scope="module")
    def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Nginx]:
        with nginx_in_temp(tmp_path_factory) as srv:
            yield srv

    @pytest.fixture
    def served(server: Nginx) -> Nginx:
        server.clear()
        return server

    return server, served


@dataclass
class Later:
    """The server of :func:`later`: its URL; :meth:`go_wrong` makes every later answer wrong."""

    url: str
    state: dict[str, bool]

    def go_wrong(self) -> None:
        self.state["wrong"] = True


class _Later(http.server.BaseHTTPRequestHandler):
    """Serves ``first`` until the test calls :meth:`Later.go_wrong`, then as ``then`` says: ``"short"`` (206 bodies cut in
    half) or other bytes (the file replaced: another size or other contents). With ``etag``, every answer carries the
    ETag of the version it serves and a request whose ``If-Match`` names another version gets 412, as real servers
    (nginx) do; without, a replaced file cannot be told apart by its headers."""

    first = b""
    then: bytes | str = b""
    etag = True
    if_match = True  # False: answers whatever If-Match says (some caches and CDNs do), with the ETag of what it sends
    state: dict[str, bool] = {}  # noqa: RUF012 - one per server, set by later()

    def log_message(self, format: str, *args: object) -> None:
        pass

    def _version(self) -> tuple[bytes, bool]:
        wrong = self.state["wrong"]
        if wrong and not isinstance(self.then, str):
            return self.then, False
        return self.first, wrong and self.then == "short"

    def _tag(self, data: bytes) -> str:
        return f'"{len(data)}-{hash(data) & 0xFFFFFFFF:x}"'

    def _refused(self, data: bytes) -> bool:
        want = self.headers.get("If-Match")
        if self.etag and self.if_match and want is not None and want != self._tag(data):
            self.send_response(412)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return True
        return False

    def do_HEAD(self) -> None:
        data, _ = self._version()
        if self._refused(data):
            return
        self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Accept-Ranges", "bytes")
        if self.etag:
            self.send_header("ETag", self._tag(data))
        self.end_headers()

    def do_GET(self) -> None:
        data, short = self._version()
        if self._refused(data):
            return
        m = re.fullmatch(r"bytes=(\d+)-(\d*)", self.headers.get("Range", ""))
        start = int(m[1]) if m else 0
        stop = min(int(m[2]) + 1 if m and m[2] else len(data), len(data))
        body = data[start:stop]
        if short:
            body = body[: len(body) // 2]
        self.send_response(206 if m else 200)
        if m:
            self.send_header("Content-Range", f"bytes {start}-{stop - 1}/{len(data)}")
        if self.etag:
            self.send_header("ETag", self._tag(data))
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@contextmanager
def later(first: bytes, then: bytes | str, etag: bool = True, if_match: bool = True) -> Iterator[Later]:
    """A server of ``first`` whose answers go wrong as ``then`` says once the test calls :meth:`Later.go_wrong` (see
    :class:`_Later`)."""
    state = {"wrong": False}
    with _serving(type("Handler", (_Later,), {"first": first, "then": then, "etag": etag, "if_match": if_match, "state": state})) as base:
        yield Later(base + "/file.fifu", state)


# -- a server that answers ranges consistently but lies (fuzz/fuzz.py's remote-http reader found these) -----------------


class _Lying(http.server.BaseHTTPRequestHandler):
    """Serves ``data`` (``later`` from the second range request on) with well-formed answers that a client must check:
    ``other-range`` (the asked number of bytes from 4 bytes further on, or back, its Content-Range saying so), ``head-size`` (HEAD
    gives the file 4 bytes fewer), ``head-size-agreed`` (so does HEAD, and every range answer after the first, which
    gives the true size), ``changed`` (the file is ``later`` from the second range request on; with ``etag``, an
    ``ETag`` per version), ``trickle`` (every body a byte every 50 ms, for up to ``trickle_seconds``, then the rest: each
    wait is short of any read timeout). Any other mode (``honest``) answers honestly."""

    data = b""
    later = b""
    mode = "other-range"
    etag = False
    gets = 0
    trickle_seconds = 20.0

    def log_message(self, format: str, *args: object) -> None:
        pass

    def _now(self) -> tuple[bytes, int]:
        changed = self.mode == "changed" and type(self).gets > 1
        return (self.later, 1) if changed else (self.data, 0)

    def do_HEAD(self) -> None:
        data, version = self._now()
        self.send_response(200)
        self.send_header("Content-Length", str(len(data) - 4 if self.mode.startswith("head-size") else len(data)))
        self.send_header("Accept-Ranges", "bytes")
        if self.etag:
            self.send_header("ETag", f'"v{version}"')
        self.end_headers()

    def do_GET(self) -> None:
        type(self).gets += 1
        data, version = self._now()
        m = re.fullmatch(r"bytes=(\d+)-(\d*)", self.headers.get("Range", ""))
        start = int(m[1]) if m else 0
        stop = min(int(m[2]) + 1 if m and m[2] else len(data), len(data))
        total = len(data)
        if self.mode == "other-range" and type(self).gets > 1:
            shift = 4 if stop + 4 <= len(data) else -min(4, start)  # 4 bytes on, or back where the range ends the file
            start, stop = start + shift, stop + shift
        if self.mode == "head-size-agreed" and type(self).gets > 1:
            total = len(data) - 4
            stop = min(stop, total)
        self.send_response(206)
        self.send_header("Content-Range", f"bytes {start}-{stop - 1}/{total}")
        self.send_header("Content-Length", str(stop - start))
        if self.etag:
            self.send_header("ETag", f'"v{version}"')
        self.end_headers()
        body = data[start:stop]
        end = time.monotonic() + self.trickle_seconds if self.mode == "trickle" else 0.0
        while body and time.monotonic() < end:
            self.wfile.write(body[:1])
            body = body[1:]
            time.sleep(0.05)
        self.wfile.write(body)


@contextmanager
def lying(data: bytes, mode: str, later: bytes = b"", etag: bool = False) -> Iterator[str]:
    """A server of one file (``data``) whose answers are well formed but lie as ``mode`` says (see :class:`_Lying`); its URL."""
    with _serving(type("Handler", (_Lying,), {"data": data, "mode": mode, "later": later, "etag": etag, "gets": 0})) as base:
        yield base + "/file.bin"


# -- for tests/test_checklist.py: what else a name at a URL can be than a file (redirects, no size, a size that lies) -----


class _Names(http.server.BaseHTTPRequestHandler):
    """Serves ``data`` honestly (ranges) at ``/file.fifu`` and, under other names, what a URL can name besides a file:
    ``/moved.fifu`` redirects to it (301), ``/loop.fifu`` and ``/loop2.fifu`` redirect to each other, ``/local.fifu``
    redirects to ``file:///etc/passwd``, ``/endless.fifu`` tells no size (no ``Content-Length``) and sends zeros without
    end, ``/huge.fifu`` gives the file 3 GiB (``HEAD`` and every ``Content-Range``) and sends its real bytes."""

    data = b""
    redirects = {"/moved.fifu": "/file.fifu", "/loop.fifu": "/loop2.fifu", "/loop2.fifu": "/loop.fifu", "/local.fifu": "file:///etc/passwd"}  # noqa: RUF012
    huge = 3 << 30

    def log_message(self, format: str, *args: object) -> None:
        pass

    def _special(self) -> bool:
        if self.path in self.redirects:
            self.send_response(301)
            self.send_header("Location", self.redirects[self.path])
            self.send_header("Content-Length", "0")
            self.end_headers()
            return True
        if self.path == "/endless.fifu":
            self.send_response(200)
            self.send_header("Connection", "close")
            self.end_headers()
            if self.command == "GET":
                deadline = time.monotonic() + 60  # a backstop: a client that reads on is stopped by its test's timeout
                try:
                    while time.monotonic() < deadline:
                        self.wfile.write(bytes(1 << 16))
                except OSError:
                    pass  # the client hung up: what it should do
            return True
        if self.path not in ("/file.fifu", "/huge.fifu"):
            self.send_error(404)
            return True
        return False

    def do_HEAD(self) -> None:
        if self._special():
            return
        self.send_response(200)
        self.send_header("Content-Length", str(self.huge if self.path == "/huge.fifu" else len(self.data)))
        self.send_header("Accept-Ranges", "bytes")
        self.end_headers()

    def do_GET(self) -> None:
        if self._special():
            return
        total = self.huge if self.path == "/huge.fifu" else len(self.data)
        m = re.fullmatch(r"bytes=(\d+)-(\d*)", self.headers.get("Range", ""))
        start = int(m[1]) if m else 0
        stop = min(int(m[2]) + 1 if m and m[2] else total, total)
        body = self.data[start:stop]
        self.send_response(206 if m else 200)
        if m:
            self.send_header("Content-Range", f"bytes {start}-{stop - 1}/{total}")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@contextmanager
def names(data: bytes) -> Iterator[str]:
    """A server of ``data`` under the names of :class:`_Names`; its URL up to the name (``<url>/file.fifu`` is the file)."""
    with _serving(type("Handler", (_Names,), {"data": data})) as base:
        yield base
