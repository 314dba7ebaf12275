"""finalfusion-python 0.7's console scripts as thin aliases: ``ffp-convert``, ``ffp-similar``,
``ffp-analogy``, ``ffp-bucket-to-explicit``, ``ffp-select``.

Each takes 0.7's arguments (names, defaults, format names ``word2vec``,
``finalfusion``, ``fasttext``, ``text``, ``textdims``; ``-l/--lossy`` and
``--mmap`` of 0.7's development branch) and prints what 0.7 printed; the
work is done by the ``finalfusion`` command's code. Differences: errors
are one line and exit status 1 instead of a traceback; ``ffp-analogy -i c``
excludes ``a``/``b`` as documented (0.7 mistakenly excluded ``b`` for ``c``);
``ffp-select`` keeps the words in file order (0.7 used a set) and also
reads formats other than finalfusion.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

from finalfusion.cli import execute
from finalfusion.cli._common import CliError, read_lines
from finalfusion.cli._convert import LoadOptions, WriteOptions, check_output, load_as, write_as
from finalfusion.cli._select import select_words, write_explicit

__all__ = ["analogy", "bucket_to_explicit", "convert", "select", "similar"]

FORMATS = ["word2vec", "finalfusion", "fasttext", "text", "textdims"]
#: ``ffp-bucket-to-explicit -f``: the formats with bucket vocabularies.
BUCKET_FORMATS = ["finalfusion", "fasttext"]


def _format_arg(parser: argparse.ArgumentParser, short: str, name: str, formats: list[str], default: str, metavar: str = "FORMAT") -> None:
    parser.add_argument(
        f"-{short}", f"--{name}", type=str, choices=formats, default=default, help=f"Valid choices: {formats} Default: '{default}'", metavar=metavar
    )


def _input_output(parser: argparse.ArgumentParser, what: str = "Input embeddings") -> None:
    """0.7's positional ``INPUT OUTPUT``."""
    parser.add_argument("input", type=str, help=what, metavar="INPUT")
    parser.add_argument("output", type=str, help="Output path", metavar="OUTPUT")


def _common_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-l", "--lossy", action="store_true", default=False, help="Replace malformed UTF-8 with the replacement character instead of failing.")
    parser.add_argument("--mmap", action="store_true", default=False, help="Memory-map the storage. Only applicable to finalfusion files.")


def _load(path: str, fmt: str, args: argparse.Namespace, prog: str, *, mmap: bool | None = None, formats: Sequence[str] = FORMATS) -> Any:
    """``path`` read as 0.7's format ``fmt``; a wrong ``-f`` is answered with the script's ``-f`` names (``formats``)."""
    name = "text-dims" if fmt == "textdims" else fmt
    use_mmap = (args.mmap if mmap is None else mmap) and name == "finalfusion"

    def advice(actual: str) -> str:
        # -f has a fixed default here (word2vec for ffp-convert): leaving it out reads that format again.
        spelled = "textdims" if actual == "text-dims" else actual
        if spelled in formats:
            return f"use -f {spelled}"
        return f"{prog} reads only {', '.join(formats)}; 'finalfusion convert {path} OUT' reads {actual}"

    return load_as(path, name, LoadOptions(lossy=getattr(args, "lossy", False), mmap=use_mmap), advice=advice)


def _run(parser: argparse.ArgumentParser, argv: Sequence[str] | None, func: Any) -> int:
    args = parser.parse_args(argv)
    return execute(func, args, parser.prog)


def convert(argv: Sequence[str] | None = None) -> int:
    """``ffp-convert INPUT OUTPUT [-f FORMAT] [-t FORMAT]`` (defaults: word2vec to finalfusion)."""
    parser = argparse.ArgumentParser(prog="ffp-convert", description="Convert embeddings.")
    _input_output(parser)
    _format_arg(parser, "f", "from", FORMATS, "word2vec", "INPUT_FORMAT")
    _format_arg(parser, "t", "to", FORMATS, "finalfusion", "OUTPUT_FORMAT")
    _common_args(parser)

    def run(args: argparse.Namespace) -> int:
        # 0.7 memory-mapped finalfusion input for conversions.
        check_output(args.output, [args.input])
        emb = _load(args.input, getattr(args, "from"), args, parser.prog, mmap=True)
        write_as(args.output, emb, "text-dims" if args.to == "textdims" else args.to, WriteOptions(), inputs=[args.input])
        return 0

    return _run(parser, argv, run)


def _queries(path: str | None) -> Any:
    return read_lines(None if path in (None, 0, "0", "-") else path)


def similar(argv: Sequence[str] | None = None) -> int:
    """``ffp-similar EMBEDDINGS [INPUT] [-f FORMAT] [-k K]``: ``word similarity`` lines, queries one per line."""
    parser = argparse.ArgumentParser(prog="ffp-similar", description="Similarity queries.")
    parser.add_argument("embeddings", type=str, help="Input embeddings", metavar="EMBEDDINGS")
    _format_arg(parser, "f", "format", FORMATS, "finalfusion")
    parser.add_argument("-k", type=int, help="Number of neighbours. Default: 10", default=10, metavar="K")
    parser.add_argument("input", help="Optional input file with one word per line. If unspecified reads from stdin", nargs="?", default=None)
    _common_args(parser)

    def run(args: argparse.Namespace) -> int:
        emb = _load(args.embeddings, args.format, args, parser.prog)
        for query in _queries(args.input):
            res = emb.word_similarity(query, k=args.k)
            if res is None:
                print(f"Could not compute neighbours for: {query}", file=sys.stderr)
            else:
                _print_results(res)
        return 0

    return _run(parser, argv, run)


def _print_results(results: Any) -> None:
    """One ``word similarity`` line per neighbour, as 0.7's scripts print them."""
    print("\n".join(f"{r.word} {r.similarity}" for r in results), flush=True)


def analogy(argv: Sequence[str] | None = None) -> int:
    """``ffp-analogy EMBEDDINGS [INPUT] [-f FORMAT] [-i a b c] [-k K]``: queries of three words per line."""
    parser = argparse.ArgumentParser(prog="ffp-analogy", description="Analogy queries.")
    _format_arg(parser, "f", "format", FORMATS, "finalfusion")
    parser.add_argument("embeddings", help="Input embeddings", type=str, metavar="EMBEDDINGS")
    parser.add_argument(
        "-i",
        "--include",
        choices=["a", "b", "c"],
        nargs="+",
        default=[],
        help="Specify query parts that should be allowed as answers. Valid choices: ['a', 'b', 'c']",
    )
    parser.add_argument("-k", type=int, default=10, help="Number of neighbours. Default: 10", metavar="K")
    parser.add_argument("input", help="Optional input file with 3 words per line. If unspecified reads from stdin", nargs="?", default=None)
    _common_args(parser)

    def run(args: argparse.Namespace) -> int:
        if len(args.include) > 3:
            raise CliError("-i/--include can take up to 3 unique values: a, b and c.")
        emb = _load(args.embeddings, args.format, args, parser.prog)
        for no, line in enumerate(_queries(args.input), 1):
            parts = line.split()
            if len(parts) != 3:
                raise CliError(f"query {no} is not three words: {line!r}")
            a, b, c = parts
            skip = {w for w, part in zip(parts, "abc", strict=True) if part not in args.include}
            res = emb.analogy(a, b, c, k=args.k, skip=skip)
            if res is None:
                print(f"Could not compute for: {a} : {b}, {c} : ? ", file=sys.stderr)
            else:
                _print_results(res)
        return 0

    return _run(parser, argv, run)


def bucket_to_explicit(argv: Sequence[str] | None = None) -> int:
    """``ffp-bucket-to-explicit INPUT OUTPUT [-f finalfusion|fasttext]``."""
    parser = argparse.ArgumentParser(prog="ffp-bucket-to-explicit", description="Convert bucket embeddings to explicit lookups.")
    _input_output(parser, "Input bucket embeddings")
    _format_arg(parser, "f", "from", BUCKET_FORMATS, "finalfusion", "INPUT_FORMAT")
    _common_args(parser)

    def run(args: argparse.Namespace) -> int:
        check_output(args.output, [args.input])
        write_explicit(_load(args.input, getattr(args, "from"), args, parser.prog, formats=BUCKET_FORMATS), args.input, args.output)
        return 0

    return _run(parser, argv, run)


def select(argv: Sequence[str] | None = None) -> int:
    """``ffp-select INPUT OUTPUT [WORDS] [-f FORMAT] [-i/--ignore_unk] [-v/--verbose]``: finalfusion output."""
    parser = argparse.ArgumentParser(prog="ffp-select", description="Build embeddings from list of words.")
    _input_output(parser)
    _format_arg(parser, "f", "format", FORMATS, "finalfusion")
    parser.add_argument(
        "words",
        nargs="?",
        default=None,
        metavar="WORDS",
        help="List of words to include in the embeddings. One word per line. Spaces permitted.Reads from stdin if unspecified.",
    )
    parser.add_argument("--ignore_unk", "-i", action="store_true", default=False, help="Skip unrepresentable words.")
    parser.add_argument(
        "--verbose", "-v", action="store_true", default=False, help="Print which tokens are skipped because they can't be represented to stderr."
    )

    def run(args: argparse.Namespace) -> int:
        check_output(args.output, [args.input, args.words])
        words = list(_queries(args.words))
        emb = _load(args.input, args.format, argparse.Namespace(lossy=False, mmap=True), parser.prog)
        small, missing = select_words(emb, words, subwords=True, ignore_unknown=True, source=args.input)
        if missing:
            if args.verbose or not args.ignore_unk:
                for word in missing:
                    print(f"Cannot represent '{word}'.", file=sys.stderr)
            if not args.ignore_unk:
                return 1
        write_as(args.output, small, "finalfusion", WriteOptions(), inputs=[args.input, args.words])
        return 0

    return _run(parser, argv, run)
