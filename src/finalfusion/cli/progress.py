"""Progress bars of the command line: tqdm on stderr, only when stderr is a terminal.

The library side (``progress=True`` or a callable) is :mod:`finalfusion._progress`;
this module decides whether the command line wants bars at all: never in
pipes, logs or with ``--quiet``, and silently none when tqdm is missing
(it comes with the ``cli`` extra). A file named by a URL gets a second bar,
of the bytes its range requests fetched, once the fetch is long
(:data:`FETCH_BAR_BYTES` or :data:`FETCH_BAR_SECONDS`).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

from finalfusion._remote import reporting_fetches
from finalfusion.errors import MissingExtraError, import_extra

__all__ = ["FETCH_BAR_BYTES", "FETCH_BAR_SECONDS", "LongFetches", "bars", "progress_wanted"]

#: A remote file's fetch gets a bar once it has brought this many bytes (or lasted :data:`FETCH_BAR_SECONDS`).
FETCH_BAR_BYTES = 4 << 20
#: ... or once it has lasted this many seconds: a short fetch draws no bar.
FETCH_BAR_SECONDS = 1.0


def progress_wanted(args: argparse.Namespace) -> bool:
    """Progress bars only on a terminal's stderr (never in pipes or logs), unless ``--quiet``."""
    if getattr(args, "quiet", False):
        return False
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


@contextlib.contextmanager
def bars(args: argparse.Namespace) -> Iterator[Any]:
    """A ``progress`` callable drawing tqdm bars on stderr, or ``None`` (no terminal, ``--quiet``, no tqdm)."""
    if not progress_wanted(args):
        yield None
        return
    from finalfusion._progress import TqdmBars

    try:
        tqdm = import_extra("tqdm", "progress bars", extra="cli").tqdm
    except MissingExtraError:  # the command works without the cli extra, silently without bars
        yield None
        return
    # A terminal that reports no size (a bare pseudo-terminal) would get empty bars: assume 80 x 24 there.
    try:
        sized = os.get_terminal_size(sys.stderr.fileno()).columns > 0
    except (OSError, ValueError, AttributeError):
        sized = False
    width: dict[str, Any] = {"dynamic_ncols": True} if sized else {"ncols": 80, "nrows": 24}
    progress = TqdmBars(factory=tqdm, file=sys.stderr, leave=False, **width)
    fetches = TqdmBars(factory=tqdm, file=sys.stderr, leave=False, **width)
    try:
        with reporting_fetches(LongFetches(fetches)):
            yield progress
    finally:
        fetches.close()
        progress.close()


class LongFetches:
    """Passes a remote file's ``("fetch", bytes fetched, size)`` reports on to ``bars`` once the fetch is long.

    Examples
    --------
    >>> seen = []
    >>> long = LongFetches(lambda *report: seen.append(report))
    >>> long("fetch", 1 << 20, 100 << 20); seen  # a MiB: no bar yet
    []
    >>> long("fetch", FETCH_BAR_BYTES, 100 << 20); seen
    [('fetch', 4194304, 104857600)]
    """

    def __init__(self, bars: Callable[[str, int, Any], None]) -> None:
        self._bars = bars
        self._start = 0.0
        self._last = -1
        self._shown = False

    def __call__(self, stage: str, done: int, total: Any) -> None:
        now = time.monotonic()
        if done <= self._last or self._last < 0:  # the first report of another file
            self._start, self._shown = now, False
        self._last = done
        if self._shown or done >= FETCH_BAR_BYTES or now - self._start >= FETCH_BAR_SECONDS:
            self._shown = True
            self._bars(stage, done, total)
