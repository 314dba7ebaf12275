"""The ``finalfusion`` command line: convert, quantize, query and inspect embeddings.

``finalfusion COMMAND ...`` (or ``python -m finalfusion COMMAND ...``); one
module per group of subcommands, each adding its parsers in ``register``.
Errors caused by the input are one line on stderr and exit status 1,
usage errors exit status 2 (argparse), Ctrl-C exit status 130 without a
half-written output file. ``python -m finalfusion FILE [WORD ...]`` (a file
as the first argument) still means ``lookup``.

Examples
--------
>>> main(["completions", "fish"])  # doctest: +ELLIPSIS
# fish completion for finalfusion ...
0
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence

from finalfusion.cli import _completions, _convert, _inspect, _quantize, _query, _select
from finalfusion.cli._common import CliError, one_line

__all__ = ["build_parser", "execute", "main"]

PROG = "finalfusion"

_EPILOG = """examples:
  finalfusion convert GoogleNews-vectors-negative300.bin.gz vectors.fifu
  echo berlin | finalfusion similar vectors.fifu
  finalfusion info vectors.fifu

'finalfusion COMMAND --help' shows the options and an example of each command."""


def build_parser(prog: str = PROG) -> argparse.ArgumentParser:
    """The parser with every subcommand.

    Examples
    --------
    >>> build_parser().parse_args(["similar", "-k", "3", "vectors.fifu", "berlin"]).k
    3
    """
    from finalfusion import __version__

    parser = argparse.ArgumentParser(
        prog=prog,
        description="Convert, quantize, query and inspect word embeddings (finalfusion, word2vec, text, GloVe, fastText, floret).",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for module in (_convert, _quantize, _select, _query, _inspect, _completions):
        module.register(sub)
    return parser


def _commands(parser: argparse.ArgumentParser) -> set[str]:
    return {name for action in parser._actions if isinstance(action, argparse._SubParsersAction) for name in action.choices}


def execute(func: Callable[[argparse.Namespace], int], args: argparse.Namespace, prog: str = PROG) -> int:
    """Run a subcommand; turn failures into one line on stderr and an exit status."""
    try:
        return func(args)
    except CliError as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader went away (``| head``): stop quietly, without a second error when stdout is flushed at exit.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 141
    except (OSError, ValueError, TypeError, MemoryError) as exc:  # FormatError is a ValueError
        print(f"{prog}: error: {one_line(exc)}", file=sys.stderr)
        return 1


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status (2 for usage errors, through ``SystemExit``)."""
    arguments = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    if arguments and not arguments[0].startswith("-") and arguments[0] not in _commands(parser) and os.path.isfile(arguments[0]):
        arguments.insert(0, "lookup")  # ``python -m finalfusion FILE WORD ...``, as before the subcommands
    args = parser.parse_args(arguments)
    return execute(args.func, args)
