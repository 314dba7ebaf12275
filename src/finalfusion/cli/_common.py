"""What the subcommands share: input options, loading, errors, progress bars, output."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import textwrap
import warnings
from collections.abc import Iterator
from typing import IO, Any

import numpy as np

from finalfusion.cli.progress import bars
from finalfusion.limits import MAX_WORD_BYTES

__all__ = [
    "CliError",
    "SubcommandParser",
    "UsageError",
    "bars",
    "example",
    "naming",
    "numbered_lines",
    "one_line",
    "plain_warnings",
    "positive_int",
    "read_lines",
    "rust_float",
    "subparser",
]


class CliError(Exception):
    """A failure caused by the input or the environment: printed as one line, exit status 1."""


class UsageError(CliError):
    """An option's value that turns out wrong only once the input is read (``--tensor`` naming no tensor of
    the file, ``--tokenizer`` for a format without one): printed as one line, exit status 2, as argparse's
    usage errors."""


def example(text: str) -> str:
    """An argparse epilog showing an example command line."""
    return "example:\n" + textwrap.indent(textwrap.dedent(text).strip("\n"), "  ")


class SubcommandParser(argparse.ArgumentParser):
    """A subcommand's parser: arguments it does not know are its usage error.

    argparse hands a subcommand's leftovers to the top-level parser, which
    then prints the top-level usage (``finalfusion [-h] [--version] COMMAND
    ...``) for a mistake in, say, ``similar``'s options. Here the subcommand
    reports them itself, with its own usage line.

    Examples
    --------
    >>> p = SubcommandParser(prog="finalfusion similar", exit_on_error=False)
    >>> p.parse_known_args(["--bogus"])
    Traceback (most recent call last):
    ...
    argparse.ArgumentError: unrecognized arguments: --bogus
    """

    def __init__(self, *args: Any, usage_hint: str = "", **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        #: Appended to the error for leftover arguments (where they belong instead).
        self.usage_hint = usage_hint

    def parse_known_args(self, args: Any = None, namespace: Any = None) -> Any:
        parsed, extras = super().parse_known_args(args, namespace)
        if extras:
            message = f"unrecognized arguments: {' '.join(extras)}" + (
                f" ({self.usage_hint})" if self.usage_hint and any(not e.startswith("-") for e in extras) else ""
            )
            if not self.exit_on_error:
                raise argparse.ArgumentError(None, message)
            self.error(message)
        return parsed, extras


def subparser(subparsers: Any, name: str, help: str, epilog: str, extra: str = "", **kwargs: Any) -> argparse.ArgumentParser:
    """A subcommand parser with the house formatting (raw epilog with an example, then ``extra``).

    The parser is a :class:`SubcommandParser`, so a wrong argument shows this
    subcommand's usage, not the top-level one.
    """
    # add_parser builds ``subparsers._parser_class``; the top-level parser set it to its own class.
    subparsers._parser_class = SubcommandParser
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


@contextlib.contextmanager
def plain_warnings(prog: str) -> Iterator[None]:
    """While a command runs, each warning is one line on stderr, ``PROG: warning: MESSAGE``, and a message is shown once.

    Python's own format names the warning's class, the file and line of the
    library code that warned and that line's source; a command's user
    needs the message only. The filters are untouched (``-W error`` still
    turns a warning into an error).

    Examples
    --------
    >>> with plain_warnings("prog"):  # stderr: prog: warning: the file is old
    ...     warnings.warn("the file is old")
    """
    shown: set[str] = set()

    def show(message: Warning | str, category: type[Warning], filename: str, lineno: int, file: Any = None, line: str | None = None) -> None:
        text = " ".join(str(message).split())
        if text not in shown:
            shown.add(text)
            print(f"{prog}: warning: {text}", file=sys.stderr)

    with warnings.catch_warnings():
        warnings.showwarning = show
        yield


@contextlib.contextmanager
def naming(path: str) -> Iterator[None]:
    """Warnings raised while ``path`` is read, warned again with ``path:`` in front (a reader's warning says "the file").

    Nothing is warned again when the reading fails: the error says what matters.
    """
    with warnings.catch_warnings(record=True) as caught:
        yield
    for w in caught:
        warnings.warn_explicit(f"{path}: {w.message}", w.category, w.filename, w.lineno)


def about(path: Any, exc: BaseException) -> str:
    """``PATH: reason`` on one line, naming the path once, as the user gave it (an ``OSError`` about ``path`` carries it too,
    perhaps as the absolute path the library worked on).

    Examples
    --------
    >>> about("x.txt", FileNotFoundError(2, "No such file or directory", "x.txt"))
    'x.txt: No such file or directory'
    >>> about("./out/", FileExistsError(17, "holds files finalfusion did not write there: notes.txt; not replaced", os.path.abspath("out")))
    './out/: holds files finalfusion did not write there: notes.txt; not replaced'
    >>> about("x.fifu", ValueError("not a finalfusion file"))
    'x.fifu: not a finalfusion file'
    """
    if isinstance(exc, OSError) and exc.strerror and exc.filename is not None and _same_path(exc.filename, path):
        return " ".join(f"{os.fsdecode(path)}: {exc.strerror}".split())
    return f"{path}: {one_line(exc)}"


def _same_path(a: Any, b: Any) -> bool:
    """Whether two spellings name the same path (``out``, ``./out/``, its absolute path); never raises."""
    try:
        return os.path.abspath(os.fsdecode(a)) == os.path.abspath(os.fsdecode(b))
    except (TypeError, ValueError):
        return False


def rust_float(value: Any, *, bits: int = 32) -> str:
    """``value`` as Rust's ``{}`` prints an ``f32`` (or ``f64``): the shortest text that reads back as the same number.

    finalfusion-utils prints similarities with ``println!("{}\\t{}", word, similarity)``
    (src/similar.rs line 114, src/analogy.rs line 140): no exponent, no
    trailing ``.0`` (``1``, not ``1.0``), ``NaN``/``inf`` spelled as Rust does.

    Examples
    --------
    >>> rust_float(0.1), rust_float(1.0), rust_float(-0.0), rust_float(1e-8), rust_float(float("nan"))
    ('0.1', '1', '-0', '0.00000001', 'NaN')
    >>> rust_float(1 / 3), rust_float(1 / 3, bits=64)
    ('0.33333334', '0.3333333333333333')
    """
    number = np.float32(value) if bits == 32 else np.float64(value)
    if np.isnan(number):
        return "NaN"
    if np.isinf(number):
        return "inf" if number > 0 else "-inf"
    return np.format_float_positional(number, unique=True, trim="-")


class _EncodedText:
    """A text stream put in place of stdin (tests, applications calling ``main``) read as UTF-8 lines."""

    def __init__(self, stream: IO[str]) -> None:
        self._stream = stream

    def readline(self, size: int) -> bytes:
        return self._stream.readline(size).encode("utf-8")


def _bounded_lines(f: Any, name: str, limit: int, limit_name: str, strip: bool = True) -> Iterator[tuple[int, str]]:
    """Line numbers and non-empty lines of the binary stream ``f`` (stripped, or only without the newline), each at most ``limit`` bytes before its newline."""
    for no, raw in enumerate(iter(lambda: f.readline(limit + 1), b""), 1):
        if len(raw) > limit and not raw.endswith(b"\n"):
            raise CliError(f"{name}: line {no} is longer than {limit:,} bytes, the longest accepted (finalfusion.limits.{limit_name})")
        try:
            text = raw.decode("utf-8")
            text = text.strip() if strip else text.removesuffix("\n").removesuffix("\r")
        except UnicodeDecodeError as exc:
            raise CliError(f"{name}: line {no} is not valid UTF-8: {one_line(exc)}") from None
        if text:
            yield no, text


def read_lines(path: str | None, *, limit: int = MAX_WORD_BYTES, limit_name: str = "MAX_WORD_BYTES") -> Iterator[str]:
    """Non-empty stripped lines of ``path``, or of standard input when ``path`` is ``None`` or ``-``: :func:`numbered_lines` without the numbers."""
    for _, text in numbered_lines(path, limit=limit, limit_name=limit_name):
        yield text


def numbered_lines(path: str | None, *, limit: int = MAX_WORD_BYTES, limit_name: str = "MAX_WORD_BYTES", strip: bool = True) -> Iterator[tuple[int, str]]:
    """Non-empty stripped lines of ``path`` with their line numbers, or of standard input when ``path`` is ``None`` or ``-``.

    With ``strip=False`` a line is exactly what was read without its
    newline (``\\n`` or ``\\r\\n``): leading and trailing spaces are kept
    (``encode`` embeds the line as the model's library would); only empty
    lines are left out.

    Lines are read at most ``limit`` bytes at a time (default
    :data:`finalfusion.limits.MAX_WORD_BYTES`, newline excluded): a longer line, as
    from ``/dev/zero`` or a binary file given as a word list, is a
    :class:`CliError` naming the file, the line and ``limit_name`` (the
    name of the limit in :mod:`finalfusion.limits`), not an unbounded read.

    Raises
    ------
    CliError
        The file cannot be opened, a line is longer than ``limit`` or not UTF-8.

    Examples
    --------
    >>> import tempfile, os
    >>> with tempfile.NamedTemporaryFile("wb", suffix=".txt", delete=False) as f:
    ...     _ = f.write(b" berlin \\n\\nparis\\n" + b"x" * 20)
    >>> list(numbered_lines(f.name, limit=100))
    [(1, 'berlin'), (3, 'paris'), (4, 'xxxxxxxxxxxxxxxxxxxx')]
    >>> list(numbered_lines(f.name, limit=100, strip=False))
    [(1, ' berlin '), (3, 'paris'), (4, 'xxxxxxxxxxxxxxxxxxxx')]
    >>> list(numbered_lines(f.name, limit=10))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    finalfusion.cli._common.CliError: ...: line 4 is longer than 10 bytes, the longest accepted (finalfusion.limits.MAX_WORD_BYTES)
    >>> os.unlink(f.name)
    """
    if path is None or path == "-":
        stream: Any = getattr(sys.stdin, "buffer", None)
        yield from _bounded_lines(_EncodedText(sys.stdin) if stream is None else stream, "<stdin>", limit, limit_name, strip)
        return
    try:
        f = open(path, "rb")  # noqa: SIM115 - closed below, also when the generator is closed
    except OSError as exc:
        raise CliError(about(path, exc)) from None
    with f:
        try:
            yield from _bounded_lines(f, path, limit, limit_name, strip)
        except OSError as exc:
            raise CliError(about(path, exc)) from None
