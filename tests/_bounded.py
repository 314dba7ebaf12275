"""Run a check in a forked child under an address-space limit (the audit's method).

A runaway allocation then fails with ``MemoryError`` in the child instead of
exhausting the machine, and unbounded recursion shows as ``RecursionError``.
No wall-clock assertions: the bound is on memory (and on the child's lifetime
only as a safety net).
"""

from __future__ import annotations

import os
import pickle
import resource
import signal
import traceback
from collections.abc import Callable
from typing import Any


def _vm_bytes() -> int:
    with open("/proc/self/status", encoding="ascii") as f:
        for line in f:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    return 0  # pragma: no cover - Linux always has VmSize


def bounded(fn: Callable[[], Any], extra_mb: int = 400, timeout: int = 120) -> Any:
    """``fn()`` in a forked child whose address space may grow by ``extra_mb`` MiB; its result or its exception re-raised."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the child
        os.close(r)
        try:
            signal.alarm(timeout)
            _soft, hard = resource.getrlimit(resource.RLIMIT_AS)
            limit = _vm_bytes() + extra_mb * 2**20
            resource.setrlimit(resource.RLIMIT_AS, (limit if hard == resource.RLIM_INFINITY else min(limit, hard), hard))
            try:
                payload = pickle.dumps(("ok", fn()))
            except BaseException as exc:  # everything goes back to the parent
                payload = pickle.dumps(("raised", (type(exc).__name__, str(exc)[:2000], traceback.format_exc()[-4000:])))
            with os.fdopen(w, "wb") as f:
                f.write(payload)
        finally:
            os._exit(0)
    os.close(w)
    with os.fdopen(r, "rb") as f:
        data = f.read()
    _, status = os.waitpid(pid, 0)
    assert data, f"child died without answer (status {status})"
    kind, value = pickle.loads(data)
    if kind == "raised":
        name, msg, tb = value
        raise ChildError(name, msg, tb)
    return value


class ChildError(Exception):
    """An exception raised in the child: ``name`` is its type's name."""

    def __init__(self, name: str, msg: str, tb: str) -> None:
        super().__init__(f"{name}: {msg}\n{tb}")
        self.name = name
        self.msg = msg
