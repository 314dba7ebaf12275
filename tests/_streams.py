"""Inputs for the stream tests: a file object without a descriptor, gzip files that never end, a stream that trickles.

Shared by tests/test_stream_read.py (finalfusion) and
tests/test_model_stream_read.py (GGUF, safetensors, LightSeq, SentencePiece);
:class:`Trickle` by the stream-cursor and model-reader input tests.
"""

from __future__ import annotations

import gzip
import io
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

#: Bytes of filler after the prefix: far more than any reader may buffer.
ENDLESS = 3 << 30

_MEMBERS: dict[bytes, bytes] = {}


class Endless(io.RawIOBase):
    """A file object without a descriptor: ``prefix``, then ``filler`` for :data:`ENDLESS` bytes."""

    def __init__(self, prefix: bytes, filler: bytes) -> None:
        self.prefix = prefix
        self.filler = filler
        self.sent = 0

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        view = memoryview(b).cast("B")
        if self.prefix:
            n = min(len(view), len(self.prefix))
            view[:n] = self.prefix[:n]
            self.prefix = self.prefix[n:]
            return n
        if self.sent >= ENDLESS or not self.filler:
            return 0
        n = min(len(view), 1 << 20)
        view[:n] = self.filler * n
        self.sent += n
        return n


class Trickle(io.RawIOBase):
    """A non-seekable stream without a descriptor that returns at most ``per_read`` bytes per read (as a pipe may)."""

    def __init__(self, data: bytes, per_read: int = 1) -> None:
        self._data = data
        self._per_read = per_read

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        view = memoryview(b).cast("B")
        n = min(self._per_read, len(view), len(self._data))
        view[:n] = self._data[:n]
        self._data = self._data[n:]
        return n


def member(filler: bytes) -> bytes:
    """A gzip member of 64 MiB of ``filler`` (about 65 KB), built once per filler (in the parent, not in a child)."""
    if filler not in _MEMBERS:
        _MEMBERS[filler] = gzip.compress(filler * (1 << 26), compresslevel=9, mtime=0)
    return _MEMBERS[filler]


def endless_gzip(prefix: bytes, filler: bytes) -> bytes:
    """``prefix`` then :data:`ENDLESS` bytes of ``filler``, as a gzip file of a few MB."""
    return gzip.compress(prefix, mtime=0) + member(filler) * (ENDLESS >> 26)


def fifo_writer(fifo: Path, write: Callable[[int], Any]) -> None:
    """Make the FIFO ``fifo`` and, in a daemon thread, open it for writing and hand the descriptor to ``write``."""
    os.mkfifo(fifo)

    def run() -> None:
        try:
            fd = os.open(fifo, os.O_WRONLY)
        except OSError:
            return
        write(fd)

    threading.Thread(target=run, daemon=True).start()
