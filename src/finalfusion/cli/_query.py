"""``finalfusion similar``, ``analogy`` and ``compute-accuracy``."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator, Sequence
from typing import Any

from finalfusion.cli._common import CliError, bars, one_line, positive_int, read_lines, subparser
from finalfusion.cli._convert import add_input_options, load_with_bars
from finalfusion.similarity import SimilarityResult

__all__ = ["format_accuracy", "register"]


def register(subparsers: Any) -> None:
    """Add ``similar``, ``analogy`` and ``compute-accuracy``."""
    s = subparser(
        subparsers,
        "similar",
        "print the nearest neighbours of words",
        """
        finalfusion similar vectors.fifu berlin paris
        cut -f1 words.tsv | finalfusion similar --json -k 5 vectors.fifu > neighbours.jsonl""",
    )
    s.add_argument("embeddings", metavar="EMBEDDINGS", help="embeddings (any format)")
    s.add_argument("words", metavar="WORD", nargs="*", help="query words (default: one per line from standard input)")
    _query_options(s)
    s.set_defaults(func=run_similar)

    a = subparser(
        subparsers,
        "analogy",
        "answer analogy queries: A is to B as C is to ?",
        """
        finalfusion analogy vectors.fifu paris france berlin
        printf 'paris france berlin\\nman king woman\\n' | finalfusion analogy -k 1 vectors.fifu""",
    )
    a.add_argument("embeddings", metavar="EMBEDDINGS", help="embeddings (any format)")
    a.add_argument("words", metavar="WORD", nargs="*", help="query words, three per query (default: one query of three words per line from standard input)")
    a.add_argument(
        "--include",
        nargs="+",
        choices=("a", "b", "c"),
        default=[],
        metavar="{a,b,c}",
        help="query words that may be answers (default: none, as finalfusion-utils)",
    )
    _query_options(a)
    a.set_defaults(func=run_analogy)

    c = subparser(
        subparsers,
        "compute-accuracy",
        "evaluate analogy accuracy per section and in total",
        """
        finalfusion compute-accuracy vectors.fifu questions-words.txt""",
    )
    c.add_argument("embeddings", metavar="EMBEDDINGS", help="embeddings (any format)")
    c.add_argument("analogies", metavar="ANALOGIES", nargs="?", help="word2vec analogy file (': section' lines, then 'a b c d'); default: standard input")
    c.add_argument("--case-insensitive", action="store_true", help="compare words upper-cased (gensim's default)")
    c.add_argument("--restrict-vocab", type=positive_int, metavar="N", help="only the first N words are known and candidates (gensim: 300000)")
    c.add_argument("--threads", type=positive_int, metavar="N", help="threads for the similarity scans")
    c.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    c.add_argument("--quiet", action="store_true", help="no progress bar")
    add_input_options(c)
    c.set_defaults(func=run_accuracy)


def _query_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("-k", type=positive_int, default=10, metavar="K", help="number of neighbours (default: 10)")
    p.add_argument("--json", action="store_true", help="one JSON object per query: {'query': ..., 'results': [{'word': ..., 'similarity': ...}]}")
    p.add_argument("--quiet", action="store_true", help="no progress bar while loading")
    add_input_options(p)


def _print_results(query: Sequence[str], results: list[SimilarityResult] | None, as_json: bool) -> None:
    if as_json:
        found = None if results is None else [{"word": r.word, "similarity": float(r.similarity)} for r in results]
        print(json.dumps({"query": query[0] if len(query) == 1 else list(query), "results": found}, ensure_ascii=False))
    elif results is not None:
        for r in results:
            print(f"{r.word}\t{float(r.similarity):.6f}")
    sys.stdout.flush()


def run_similar(args: argparse.Namespace) -> int:
    """Nearest neighbours of each query word."""
    emb = load_with_bars(args, args.embeddings)
    queries: Iterator[str] = iter(args.words) if args.words else read_lines(None)
    for word in queries:
        results = emb.word_similarity(word, k=args.k)
        if results is None:
            print(f"finalfusion similar: no embedding for {word!r}", file=sys.stderr)
        _print_results([word], results, args.json)
    return 0


def _triples(args: argparse.Namespace) -> Iterator[list[str]]:
    if args.words:
        if len(args.words) % 3:
            raise CliError(f"analogy queries are three words each, got {len(args.words)} words")
        for i in range(0, len(args.words), 3):
            yield args.words[i : i + 3]
        return
    for no, line in enumerate(read_lines(None), 1):
        parts = line.split()
        if len(parts) != 3:
            raise CliError(f"<stdin>: query {no} is not three words: {line!r}")
        yield parts


def run_analogy(args: argparse.Namespace) -> int:
    """Answers of each analogy query."""
    emb = load_with_bars(args, args.embeddings)
    mask = tuple(part not in args.include for part in "abc")
    for a, b, c in _triples(args):
        results = emb.analogy(a, b, c, k=args.k, mask=mask)
        if results is None:
            missing = [w for w in (a, b, c) if emb.embedding(w) is None]
            print(f"finalfusion analogy: no embedding for {', '.join(map(repr, missing))}", file=sys.stderr)
        _print_results([a, b, c], results, args.json)
    return 0


def format_accuracy(evaluation: Any) -> str:
    """finalfusion-utils' report: one line per section, the total and the skipped questions.

    A section without a question whose four words are all known has no
    accuracy: it is shown as ``n/a``, not as 0%.

    Examples
    --------
    >>> from finalfusion.similarity import AnalogyEvaluation, AnalogySection
    >>> print(format_accuracy(AnalogyEvaluation([AnalogySection("capitals", 3, 4, 1), AnalogySection("rare", 0, 0, 2)])))
    capitals: 3/4 correct, accuracy: 75.00, skipped: 1
    rare: 0/0 correct, accuracy: n/a, skipped: 2
    Total: 3/4 correct, accuracy: 75.00
    Skipped: 3/7 (42.86%)
    """
    lines = []
    for s in evaluation.sections:
        acc = f"{100 * s.correct / s.total:.2f}" if s.total else "n/a"
        lines.append(f"{s.name}: {s.correct}/{s.total} correct, accuracy: {acc}, skipped: {s.skipped}")
    total, skipped = evaluation.total, evaluation.skipped
    acc = f"{100 * evaluation.correct / total:.2f}" if total else "n/a"
    lines.append(f"Total: {evaluation.correct}/{total} correct, accuracy: {acc}")
    asked = total + skipped
    lines.append(f"Skipped: {skipped}/{asked} ({100 * skipped / asked:.2f}%)" if asked else "Skipped: 0/0 (n/a)")
    return "\n".join(lines)


def run_accuracy(args: argparse.Namespace) -> int:
    """Analogy accuracy of the embeddings."""
    from finalfusion.cli._quantize import _limited_threads
    from finalfusion.errors import FormatError
    from finalfusion.similarity import evaluate_analogies

    emb = load_with_bars(args, args.embeddings)
    source: Any = args.analogies if args.analogies not in (None, "-") else sys.stdin
    name = args.analogies if source is not sys.stdin else "<stdin>"
    with bars(args) as progress, _limited_threads(args.threads):
        try:
            ev = evaluate_analogies(emb, source, case_insensitive=args.case_insensitive, restrict_vocab=args.restrict_vocab, progress=progress)
        except (OSError, UnicodeDecodeError, FormatError) as exc:
            raise CliError(f"{name}: {one_line(exc)}") from None
    if args.json:
        sections = [
            {"name": s.name, "correct": s.correct, "total": s.total, "skipped": s.skipped, "accuracy": s.correct / s.total if s.total else None}
            for s in ev.sections
        ]
        total = {"correct": ev.correct, "total": ev.total, "skipped": ev.skipped, "accuracy": ev.correct / ev.total if ev.total else None}
        print(json.dumps({"sections": sections, "total": total}, ensure_ascii=False))
    else:
        print(format_accuracy(ev))
    return 0
