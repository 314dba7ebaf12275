"""What the subcommands share: input options, loading, errors, progress bars, output."""

from __future__ import annotations

import argparse
import sys
import textwrap
from collections.abc import Iterable, Iterator
from typing import Any

from finalfusion.cli.progress import bars

__all__ = ["CliError", "bars", "example", "one_line", "positive_int", "read_lines", "subparser"]


class CliError(Exception):
    """A failure caused by the input or the environment: printed as one line, exit status 1."""


def example(text: str) -> str:
    """An argparse epilog showing an example command line."""
    return "example:\n" + textwrap.indent(textwrap.dedent(text).strip("\n"), "  ")


def subparser(subparsers: Any, name: str, help: str, epilog: str, extra: str = "", **kwargs: Any) -> argparse.ArgumentParser:
    """A subcommand parser with the house formatting (raw epilog with an example, then ``extra``)."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        name,
        help=help,
        description=help[:1].upper() + help[1:] + ("" if help.endswith(("?", ".")) else "."),
        epilog=example(epilog) + ("\n\n" + extra if extra else ""),
        formatter_class=argparse.RawDescriptionHelpFormatter,
        **kwargs,
    )
    return parser


def positive_int(text: str) -> int:
    """argparse type: an integer >= 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a number >= 1, got {value}")
    return value


def one_line(exc: BaseException) -> str:
    """An exception's message on one line."""
    text = str(exc) or type(exc).__name__
    if isinstance(exc, OSError) and exc.strerror:
        text = exc.strerror + (f": {exc.filename}" if exc.filename is not None else "")
    return " ".join(text.split())


def _stripped(lines: Iterable[str]) -> Iterator[str]:
    for line in lines:
        text = line.strip()
        if text:
            yield text


def read_lines(path: str | None) -> Iterator[str]:
    """Non-empty stripped lines of ``path``, or of standard input when ``path`` is ``None`` or ``-``."""
    if path is None or path == "-":
        yield from _stripped(sys.stdin)
        return
    try:
        with open(path, encoding="utf-8") as f:
            yield from _stripped(f)
    except (OSError, UnicodeDecodeError) as exc:
        raise CliError(f"{path}: {one_line(exc)}") from None
