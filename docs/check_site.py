"""Check the built site in headless Chromium: pages render, nothing logs an error, screenshots for a person to look at.

    mkdocs build --strict && python docs/check_site.py [site] [--out screenshots] [--chromium PATH]

Serves the built site (default ``site/``) on 127.0.0.1, opens the home page,
the API reference page of ``Embeddings`` and the tutorial notebook page in a
fresh headless Chromium (its own temporary profile, no network services), and
talks to it over the DevTools protocol with a minimal WebSocket client from the
standard library. It fails (exit status 1) when a page logs a console error,
throws an exception, fails to load a resource, or lacks what it must show (the
``Embeddings`` heading, the notebook's four pictures, decoded); it saves one
full-page PNG screenshot per page into ``--out`` (default ``build/screenshots``).
Before the browser, every text file of the site is searched for the build
machine's absolute paths (the repository, the Python environment, the home
directory): a page that shows one fails the check too. CI runs it after
``mkdocs build --strict`` (.ci/run installs Chromium).
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import functools
import http.server
import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

#: (name, path under the site, JavaScript expression that must be true once the page has loaded)
PAGES = [
    ("home", "", "document.querySelector('article h1') !== null && document.querySelector('article h1').textContent.includes('finalfusion-py')"),
    (
        "api-embeddings",
        "api/embeddings/",
        "document.getElementById('finalfusion.Embeddings') !== null && document.getElementById('finalfusion.Embeddings.word_similarity') !== null",
    ),
    (
        "tutorial",
        "tutorial/",
        "Array.from(document.querySelectorAll('.nb-output img')).filter(i => i.complete && i.naturalWidth > 0).length === 4"
        " && document.querySelectorAll('.nb-output table.finalfusion').length >= 5",
    ),
]
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-default-apps",
    "--disable-extensions",
    "--no-first-run",
    "--no-default-browser-check",
    "--hide-scrollbars",
    "--mute-audio",
    "--window-size=1280,1600",
]


class WebSocket:
    """Just enough of RFC 6455 for the DevTools protocol: masked text frames out, (fragmented) frames in."""

    def __init__(self, url: str, timeout: float = 60.0) -> None:
        assert url.startswith("ws://"), url
        hostport, _, path = url[len("ws://") :].partition("/")
        host, _, port = hostport.partition(":")
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        key = base64.b64encode(os.urandom(16)).decode()
        request = (
            f"GET /{path} HTTP/1.1\r\nHost: {hostport}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n"
        )
        self.sock.sendall(request.encode())
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = self.sock.recv(1)
            if not chunk:
                raise ConnectionError("connection closed during the WebSocket handshake")
            head += chunk
        if not head.startswith(b"HTTP/1.1 101"):
            raise ConnectionError(f"WebSocket handshake refused: {head.decode(errors='replace').splitlines()[0]}")

    def _exact(self, n: int) -> bytes:
        data = bytearray()
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            if not chunk:
                raise ConnectionError("WebSocket closed")
            data += chunk
        return bytes(data)

    def _send_frame(self, opcode: int, payload: bytes) -> None:
        n = len(payload)
        header = bytes([0x80 | opcode])
        if n < 126:
            header += bytes([0x80 | n])
        elif n < 1 << 16:
            header += bytes([0x80 | 126]) + struct.pack(">H", n)
        else:
            header += bytes([0x80 | 127]) + struct.pack(">Q", n)
        mask = os.urandom(4)
        self.sock.sendall(header + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload)))

    def send(self, text: str) -> None:
        self._send_frame(0x1, text.encode())

    def recv(self) -> str:
        message = bytearray()
        while True:
            b0, b1 = self._exact(2)
            opcode, n = b0 & 0x0F, b1 & 0x7F
            if n == 126:
                n = struct.unpack(">H", self._exact(2))[0]
            elif n == 127:
                n = struct.unpack(">Q", self._exact(8))[0]
            mask = self._exact(4) if b1 & 0x80 else b""
            payload = self._exact(n)
            if mask:
                payload = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
            if opcode == 0x9:  # ping
                self._send_frame(0xA, payload)
                continue
            if opcode == 0x8:
                raise ConnectionError("WebSocket closed by the browser")
            if opcode in (0x0, 0x1, 0x2):
                message += payload
                if b0 & 0x80:
                    return message.decode()

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._send_frame(0x8, b"")
        self.sock.close()


class DevTools:
    """One page target: commands with ids, events collected on the way."""

    def __init__(self, ws_url: str) -> None:
        self.ws = WebSocket(ws_url)
        self.next_id = 0
        self.events: list[dict[str, Any]] = []

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        self.next_id += 1
        ident = self.next_id
        self.ws.send(json.dumps({"id": ident, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == ident:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result", {})  # type: ignore[no-any-return]
            if "method" in msg:
                self.events.append(msg)

    def wait_for(self, event: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not any(e["method"] == event for e in self.events):
            if time.monotonic() > deadline:
                raise TimeoutError(f"no {event} within {timeout} s")
            msg = json.loads(self.ws.recv())
            if "method" in msg:
                self.events.append(msg)

    def evaluate(self, expression: str) -> Any:
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression!r} threw: {result['exceptionDetails'].get('text')}")
        return result["result"].get("value")


@contextlib.contextmanager
def serve(site: Path) -> Iterator[str]:
    """The site on an ephemeral port of 127.0.0.1, quietly."""

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(site)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


@contextlib.contextmanager
def chromium(binary: str) -> Iterator[str]:
    """A headless Chromium with a fresh profile; yields the base URL of its DevTools HTTP endpoint."""
    with tempfile.TemporaryDirectory(prefix="ff-chromium-", ignore_cleanup_errors=True) as profile:
        proc = subprocess.Popen(
            [binary, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", "--remote-debugging-port=0", "about:blank"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # its own process group: the browser's helper processes end with it
        )
        try:
            port_file = Path(profile) / "DevToolsActivePort"
            deadline = time.monotonic() + 60
            while not (port_file.exists() and port_file.read_text().strip()):
                if proc.poll() is not None:
                    raise RuntimeError(f"{binary} exited with status {proc.returncode} before DevTools was up")
                if time.monotonic() > deadline:
                    raise TimeoutError("Chromium did not open its DevTools port within 60 s")
                time.sleep(0.1)
            port = port_file.read_text().split()[0]
            yield f"http://127.0.0.1:{port}"
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            time.sleep(0.5)  # helper processes of the group release the profile


def problems(events: list[dict[str, Any]]) -> list[str]:
    """Console errors, uncaught exceptions and failed loads among the collected events."""
    found = []
    for e in events:
        method, params = e["method"], e.get("params", {})
        if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
            found.append("console." + params["type"] + ": " + " ".join(str(a.get("value", a.get("description", ""))) for a in params.get("args", [])))
        elif method == "Runtime.exceptionThrown":
            details = params.get("exceptionDetails", {})
            found.append("exception: " + str(details.get("exception", {}).get("description", details.get("text"))))
        elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
            entry = params["entry"]
            found.append(f"log ({entry.get('source')}): {entry.get('text')} {entry.get('url', '')}".rstrip())
        elif method == "Network.loadingFailed" and not params.get("canceled"):
            found.append(f"load failed: {params.get('errorText')} ({params.get('type')})")
    return found


def check_page(devtools_http: str, url: str, ready: str, screenshot: Path) -> list[str]:
    """Open ``url`` in a new tab, wait until ``ready`` holds, screenshot it; return the problems."""
    req = urllib.request.Request(f"{devtools_http}/json/new?about:blank", method="PUT")
    with urllib.request.urlopen(req, timeout=30) as resp:
        target = json.load(resp)
    tab = DevTools(target["webSocketDebuggerUrl"])
    try:
        for domain in ("Runtime", "Log", "Network", "Page"):
            tab.call(f"{domain}.enable")
        tab.call("Emulation.setDeviceMetricsOverride", width=1280, height=1600, deviceScaleFactor=1, mobile=False)
        tab.call("Page.navigate", url=url)
        tab.wait_for("Page.loadEventFired", timeout=60)
        deadline = time.monotonic() + 30
        while not tab.evaluate(ready):
            if time.monotonic() > deadline:
                return [*problems(tab.events), f"the page never satisfied: {ready}"]
            time.sleep(0.25)
        time.sleep(0.5)  # late console messages
        tab.evaluate("1")
        size = tab.call("Page.getLayoutMetrics")["cssContentSize"]
        clip = {"x": 0, "y": 0, "width": 1280, "height": min(int(size["height"]), 16000), "scale": 1}
        shot = tab.call("Page.captureScreenshot", format="png", clip=clip, captureBeyondViewport=True)
        screenshot.write_bytes(base64.b64decode(shot["data"]))
        return problems(tab.events)
    finally:
        tab.ws.close()
        with contextlib.suppress(OSError):
            urllib.request.urlopen(f"{devtools_http}/json/close/{target['id']}", timeout=10).close()


def machine_paths(site: Path) -> list[str]:
    """The build machine's directories that no page may show: the repository, the Python environment, the home directory."""
    found = [Path(__file__).resolve().parents[1], site.resolve().parent, Path.home()]
    if sys.prefix != sys.base_prefix:  # a virtual environment (not the system's /usr, which pages may name)
        found.append(Path(sys.prefix))
    spelled = {str(p) for where in found for p in (where, where.resolve())}
    return sorted(p for p in spelled if p.count("/") >= 2 or p.count("\\") >= 2)  # never "/" or "/root" alone: too short to be sure


def absolute_paths(site: Path, paths: list[str]) -> list[str]:
    """``FILE: PATH`` for every text file of the built site that contains one of ``paths`` (followed by a separator)."""
    found = []
    for file in sorted(site.rglob("*")):
        if file.suffix not in {".html", ".js", ".json", ".xml", ".txt", ".css", ".md", ".ipynb"} or not file.is_file():
            continue
        text = file.read_text(encoding="utf-8", errors="replace")
        found += [f"{file.relative_to(site).as_posix()}: {p}" for p in paths if p + "/" in text or p + "\\" in text]
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("site", nargs="?", default="site", type=Path, help="the built site (mkdocs build); default: site")
    parser.add_argument("--out", default=Path("build/screenshots"), type=Path, help="where the screenshots go")
    parser.add_argument("--chromium", default=None, help="the browser binary; default: chromium or chromium-browser on PATH")
    args = parser.parse_args(argv)
    leaked = absolute_paths(args.site, machine_paths(args.site)) if args.site.is_dir() else []
    for where in leaked:
        print(f"FAILED the build machine's absolute path in {where}")
    binary = args.chromium or shutil.which("chromium") or shutil.which("chromium-browser")
    if binary is None:
        print("check_site: no chromium on PATH (Debian: apt-get install chromium)", file=sys.stderr)
        return 2
    if not (args.site / "index.html").is_file():
        print(f"check_site: {args.site}/index.html not found: run mkdocs build first", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    failures = 0
    with serve(args.site) as base, chromium(binary) as devtools_http:
        for name, path, ready in PAGES:
            shot = args.out / f"{name}.png"
            found = check_page(devtools_http, base + path, ready, shot)
            status = "ok" if not found else "FAILED"
            print(f"{status:6} /{path}  screenshot {shot}")
            for p in found:
                print(f"       {p}")
            failures += bool(found)
    return 1 if failures or leaked else 0


if __name__ == "__main__":
    sys.exit(main())
