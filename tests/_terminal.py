"""Run a command with its standard error on a pseudo-terminal (where the command line draws progress bars)."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping, Sequence


def stderr_on_a_terminal(cmd: Sequence[str], env: Mapping[str, str], timeout: float) -> tuple[subprocess.Popen[bytes], bytes]:
    """The finished process (its standard output still to read) and everything it wrote to the terminal."""
    import pty

    master, slave = pty.openpty()
    proc = subprocess.Popen(list(cmd), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=slave, env=dict(env))
    os.close(slave)
    seen = b""
    while True:
        try:
            chunk = os.read(master, 4096)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        seen += chunk
    os.close(master)
    proc.wait(timeout=timeout)
    return proc, seen
