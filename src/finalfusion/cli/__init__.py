"""The ``finalfusion`` command line: convert, quantize, query and inspect embeddings.

``finalfusion COMMAND ...`` (or ``python -m finalfusion COMMAND ...``); one
module per group of subcommands, each adding its parsers in ``register``.
Errors caused by the input -- a tokenizer's failure included -- are one
line on stderr and exit status 1, never a traceback; usage errors show the
usage of the subcommand concerned and exit status 2 (argparse), and so
does an option's value found wrong only when the input is read (``--tensor``
naming no tensor of the model: one line, status 2); a bare
``finalfusion`` prints the help on stderr and exits 2, like every usage
error (finalfusion-utils, with clap 2's ``SubcommandRequiredElseHelp``, also
prints the help on stderr, with its error status 1);
Ctrl-C exits 130 at any moment without a half-written output file
(:mod:`finalfusion._interrupt` covers the imports). ``python -m finalfusion
FILE [WORD ...]`` (an existing file or model directory as the first
argument) still means ``lookup``; a first argument that looks like a path
but names nothing says so (and names a close file in that directory).

Examples
--------
>>> main(["completions", "fish"])  # doctest: +ELLIPSIS
# fish completion for finalfusion ...
0
"""

from __future__ import annotations

import argparse
import difflib
import os
import sys
from collections.abc import Callable, Sequence

from finalfusion import _interrupt
from finalfusion._tokenizers import is_rust_panic
from finalfusion.cli import _completions, _convert, _encode, _index, _inspect, _quantize, _query, _select
from finalfusion.cli._common import CliError, UsageError, one_line
from finalfusion.errors import MissingExtraError

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
    for module in (_convert, _quantize, _select, _query, _encode, _index, _inspect, _completions):
        module.register(sub)
    return parser


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    return {name: sub for action in parser._actions if isinstance(action, argparse._SubParsersAction) for name, sub in action.choices.items()}


def _commands(parser: argparse.ArgumentParser) -> set[str]:
    return set(_subparsers(parser))


def execute(func: Callable[[argparse.Namespace], int], args: argparse.Namespace, prog: str = PROG) -> int:
    """Run a subcommand; turn failures into one line on stderr and an exit status.

    1 for any failure (the input's, the environment's, a model tokenizer's
    -- an exception or a Rust panic -- or an unexpected one, named by its
    type), 2 for an option's value found wrong when the input is read
    (:class:`~finalfusion.cli._common.UsageError`: ``--tensor`` naming no
    tensor of the file), 130 for Ctrl-C, 141 for a closed output pipe.

    Examples
    --------
    >>> def fails(args):
    ...     raise Exception("WordPiece error: Missing [UNK] token from the vocabulary")
    >>> execute(fails, argparse.Namespace(), prog="prog")  # stderr: prog: error: Exception: WordPiece error: ...
    1
    """
    try:
        # From here on Ctrl-C raises KeyboardInterrupt (the writers remove their temporary files); inside the try, as a SIGINT
        # pending when the handler is switched raises at once.
        _interrupt.release()
        return func(args)
    except UsageError as exc:  # a wrong option value found when the input was read: a usage error (status 2, as argparse's)
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return 2
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
    except (OSError, ValueError, TypeError, MemoryError, MissingExtraError) as exc:  # FormatError is a ValueError; MissingExtraError names the extra
        print(f"{prog}: error: {one_line(exc)}", file=sys.stderr)
        return 1
    except Exception as exc:  # e.g. the tokenizers library's bare ``Exception``: one line, never a traceback
        print(f"{prog}: error: {type(exc).__name__}: {one_line(exc)}", file=sys.stderr)
        return 1
    except BaseException as exc:  # a Rust panic in a model's tokenizer (pyo3's PanicException) is a BaseException
        if not is_rust_panic(exc):
            raise
        print(f"{prog}: error: a Rust extension panicked (tokenizers, safetensors): {one_line(exc)}", file=sys.stderr)
        return 1
    finally:
        _interrupt.hold()  # the command's work is done (0.7's ffp-* scripts end here): Ctrl-C at exit is still 130, quietly


def _looks_like_path(word: str) -> bool:
    """Whether a first argument that is not a command was meant as a file (``dir/name``, ``name.ext``)."""
    return any(sep and sep in word for sep in (os.sep, os.altsep)) or "." in word.lstrip(".")


def _no_such_path(word: str) -> str:
    """``WORD: no such file or directory``, naming a close name in its directory (or the missing directory)."""
    directory, name = os.path.split(word)
    if directory and not os.path.isdir(directory):
        return f"{word}: no such file or directory (the directory {directory} does not exist)"
    try:
        names = os.listdir(directory or ".")
    except OSError:
        names = []
    close = difflib.get_close_matches(name, names, n=1, cutoff=0.6)
    hint = f" (did you mean {os.path.join(directory, close[0])}?)" if close else ""
    return f"{word}: no such file or directory{hint}"


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status (2 for usage errors, through ``SystemExit``).

    Examples
    --------
    >>> main(["examples/sample.fif", "berlin"])  # stderr: finalfusion: error: examples/sample.fif: no such file ...
    1
    """
    try:
        _interrupt.release()  # inside the try: a SIGINT pending when the handler is switched raises right here
        return _main(argv)
    except KeyboardInterrupt:  # while the handler is switched, the parser built or the arguments parsed
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
    finally:
        _interrupt.hold()  # Ctrl-C while the interpreter shuts down: still 130, quietly


def _main(argv: Sequence[str] | None) -> int:
    arguments = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    if not arguments:  # a bare ``finalfusion``: the help, as a usage error (status 2)
        parser.print_help(sys.stderr)
        return 2
    first = arguments[0]
    if not first.startswith("-") and first not in _commands(parser):
        if os.path.isfile(first) or os.path.isdir(first):
            arguments.insert(0, "lookup")  # ``python -m finalfusion FILE WORD ...``, as before the subcommands
        elif _looks_like_path(first):
            print(f"{PROG}: error: {_no_such_path(first)}", file=sys.stderr)
            return 1
        else:
            close = difflib.get_close_matches(first, sorted(_commands(parser)), n=1, cutoff=0.6)
            if close:
                parser.error(f"argument COMMAND: invalid choice: {first!r} (did you mean {close[0]!r}?)")
    args, extra = parser.parse_known_args(arguments)
    if extra:  # reported by the subcommand's parser: its usage, not the top-level one
        _subparsers(parser)[args.command].error(f"unrecognized arguments: {' '.join(extra)}")
    return execute(args.func, args)
