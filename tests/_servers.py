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
    handler = type("Handler", (_Hostile,), {"data": data, "mode": mode})
    with http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler) as server:
        server.daemon_threads = True  # a stalled answer's thread must not keep the test run alive
        threading.Thread(target=server.serve_forever, daemon=True).start()
        try:
            yield f"http://127.0.0.1:{server.server_address[1]}/file.bin"
        finally:
            server.shutdown()


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
    handler = type("Handler", (_Lying,), {"data": data, "mode": mode, "later": later, "etag": etag, "gets": 0})
    with http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler) as server:
        server.daemon_threads = True
        threading.Thread(target=server.serve_forever, daemon=True).start()
        try:
            yield f"http://127.0.0.1:{server.server_address[1]}/file.bin"
        finally:
            server.shutdown()
