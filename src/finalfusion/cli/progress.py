"""Progress bars of the command line: tqdm on stderr, only when stderr is a terminal.

The library side (``progress=True`` or a callable) is :mod:`finalfusion._progress`;
this module decides whether the command line wants bars at all: never in
pipes, logs or with ``--quiet``, and silently none when tqdm is missing
(it comes with the ``cli`` extra).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Iterator
from typing import Any

from finalfusion.errors import MissingExtraError, import_extra

__all__ = ["bars", "progress_wanted"]


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
    try:
        yield progress
    finally:
        progress.close()
