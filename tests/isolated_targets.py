"""Functions tests/test_isolated.py runs in a child process through finalfusion._isolated (importable by name)."""

from __future__ import annotations

import os
import signal
import sys
import time
from typing import Any

from finalfusion import FormatError


def echo(n: int, data: bytes | None = None) -> tuple[dict[str, Any], bytes]:
    """``n`` bytes of a pattern, and what arrived as data, echoed with the child's pid (and whether it shares the caller's imports: a fork)."""
    header = {"n": n, "pid": os.getpid(), "data": None if data is None else data.decode(), "forked": "pytest" in sys.modules}
    return header, bytes(i % 251 for i in range(n))


def noisy() -> tuple[dict[str, Any], bytes]:
    print("this goes to stdout, not into the answer", flush=True)
    os.write(1, b"nor this\n")
    return {"ok": True}, b""


def hang() -> tuple[dict[str, Any], bytes]:
    time.sleep(3600)
    return {}, b""


def crash() -> tuple[dict[str, Any], bytes]:
    import faulthandler

    faulthandler.disable()
    os.kill(os.getpid(), signal.SIGSEGV)
    return {}, b""


def refuse() -> tuple[dict[str, Any], bytes]:
    raise FormatError("bad table", offset=12, chunk="Demo", expected=[1, 2], found=b"\x00")


def wrong_argument() -> tuple[dict[str, Any], bytes]:
    raise ValueError("side='x': no such side")


def broken() -> tuple[dict[str, Any], bytes]:
    raise KeyError("a bug")


def exit_quietly() -> tuple[dict[str, Any], bytes]:
    os._exit(3)


def allocate(n: int) -> tuple[dict[str, Any], bytes]:
    return {"n": len(bytearray(n))}, b""
