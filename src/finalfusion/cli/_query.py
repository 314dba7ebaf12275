"""``finalfusion similar``, ``analogy`` and ``compute-accuracy``, as finalfusion-utils runs them.

The positional arguments, options and output lines are finalfusion-utils'
(0.14.1, src/similar.rs, src/analogy.rs, src/compute_accuracy.rs): the
queries come from the INPUT file or standard input, one per line, and each
answer is printed as ``word<TAB>similarity`` with Rust's number formatting.
Words given on the command line (``-w/--words``) and ``--json`` are this
package's additions; docs/cli.md lists every difference in one table.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from finalfusion.cli._common import CliError, about, bars, numbered_lines, one_line, positive_int, read_lines, rust_float, subparser
from finalfusion.cli._convert import add_input_options, load_with_bars
from finalfusion.embeddings import Embeddings
from finalfusion.limits import MAX_LINE_BYTES
from finalfusion.similarity import SimilarityResult

__all__ = ["UtilsAccuracy", "format_accuracy", "format_utils_accuracy", "register", "similarity_value", "utils_accuracy"]

#: Where a query word belongs: INPUT (a file, ``-`` or standard input) or ``-w/--words``.
_QUERY_HINT = "query words are read from INPUT or standard input, one query per line; give them on the command line with -w/--words"

#: Questions answered per matrix product in ``compute-accuracy``.
_BLOCK = 512


def register(subparsers: Any) -> None:
    """Add ``similar``, ``analogy`` and ``compute-accuracy``."""
    s = subparser(
        subparsers,
        "similar",
        "print the nearest neighbours of words (one query word per line of INPUT or standard input)",
        """
        finalfusion similar vectors.fifu words.txt
        echo berlin | finalfusion similar -k 15 vectors.fifu
        finalfusion similar --json -k 5 vectors.fifu -w berlin paris""",
        usage_hint=_QUERY_HINT,
    )
    s.add_argument("embeddings", metavar="EMBEDDINGS", help="embeddings (any format)")
    s.add_argument("input", metavar="INPUT", nargs="?", help="query words, one per line (default, or '-': standard input)")
    _query_options(s, "query words instead of INPUT (addition to finalfusion-utils)")
    s.set_defaults(func=run_similar)

    a = subparser(
        subparsers,
        "analogy",
        "answer analogy queries 'A B C' (A is to B as C is to ?), one per line of INPUT or standard input",
        """
        finalfusion analogy vectors.fifu queries.txt
        echo 'Berlin Deutschland Amsterdam' | finalfusion analogy -k 5 vectors.fifu
        finalfusion analogy --include c -k 1 vectors.fifu -w paris france berlin""",
        usage_hint=_QUERY_HINT,
    )
    a.add_argument("embeddings", metavar="EMBEDDINGS", help="embeddings (any format)")
    a.add_argument("input", metavar="INPUT", nargs="?", help="analogy queries, three words per line (default, or '-': standard input)")
    a.add_argument(
        "--include",
        nargs="+",
        action="extend",
        choices=("a", "b", "c"),
        default=[],
        metavar="{a,b,c}",
        help="query words that may be answers (default: none, as finalfusion-utils)",
    )
    _query_options(a, "query words, three per query, instead of INPUT (addition to finalfusion-utils)")
    a.set_defaults(func=run_analogy)

    c = subparser(
        subparsers,
        "compute-accuracy",
        "evaluate analogy accuracy per section and in total, as finalfusion-utils",
        """
        finalfusion compute-accuracy vectors.fifu questions-words.txt
        finalfusion compute-accuracy --case-insensitive --restrict-vocab 300000 vectors.fifu questions-words.txt   # gensim's evaluation""",
    )
    c.add_argument("embeddings", metavar="EMBEDDINGS", help="embeddings (any format)")
    c.add_argument("analogies", metavar="ANALOGIES", nargs="?", help="word2vec analogy file (': section' lines, then 'a b c d'); default: standard input")
    c.add_argument("--threads", type=positive_int, metavar="N", help="threads for the similarity scans")
    gensim = c.add_argument_group("gensim's evaluate_word_analogies instead of finalfusion-utils' (additions; the report is then gensim's counts)")
    gensim.add_argument("--case-insensitive", action="store_true", help="compare words upper-cased (gensim's default)")
    gensim.add_argument("--restrict-vocab", type=positive_int, metavar="N", help="only the first N words are known and candidates (gensim: 300000)")
    c.add_argument("--json", action="store_true", help="print one JSON object instead of the report (addition)")
    c.add_argument("--quiet", action="store_true", help="no progress bar")
    add_input_options(c)
    c.set_defaults(func=run_accuracy)


def _query_options(p: argparse.ArgumentParser, words_help: str) -> None:
    p.add_argument("-k", type=positive_int, default=10, metavar="K", help="number of neighbours (default: 10)")
    p.add_argument(
        "-s",
        "--similarity",
        choices=("cosine", "angular"),
        default="cosine",
        help="similarity printed: cosine, or angular = 1 - acos(cosine)/pi (default: cosine; the ranking is the same)",
    )
    p.add_argument("-w", "--words", nargs="+", action="extend", metavar="WORD", help=words_help)
    p.add_argument(
        "--index",
        metavar="DIR",
        type=_index_dir,
        help="take the candidates from the approximate-neighbour index saved in DIR (finalfusion index build), scored exactly; "
        "refused if it was built for other embeddings (addition)",
    )
    p.add_argument("--json", action="store_true", help="one JSON object per query: {'query': ..., 'results': [{'word': ..., 'similarity': ...}]} (addition)")
    p.add_argument("--quiet", action="store_true", help="no progress bar while loading")
    add_input_options(p)


def _index_dir(text: str) -> str:
    """argparse type of ``--index``: an existing directory, named as given (its content is read with the embeddings)."""
    if not os.path.isdir(text):
        what = "not a directory" if os.path.exists(text) else "no such directory"
        raise argparse.ArgumentTypeError(f"{text}: {what} (an index saved by finalfusion index build)")
    return text


def similarity_value(cosine: float, measure: str) -> np.float32:
    """The similarity finalfusion-utils prints for a result with this cosine, computed in ``f32`` as Rust does.

    ``angular`` is finalfusion-rust's ``WordSimilarityResult::angular_similarity``
    (``1f32 - (self.similarity.acos() / f32::consts::PI)``, src/similarity.rs,
    selected by finalfusion-utils src/similarity.rs lines 40-46); a cosine
    rounded above 1 gives ``NaN`` there and here.

    Examples
    --------
    >>> float(similarity_value(0.0, "angular")), float(similarity_value(-1.0, "angular")), float(similarity_value(0.5, "cosine"))
    (0.5, 0.0, 0.5)
    """
    c: np.float32 = np.float32(cosine)
    if measure == "cosine":
        return c
    with np.errstate(invalid="ignore"):
        angle = np.float32(np.arccos(c))
    result: np.float32 = np.float32(1) - angle / np.float32(np.pi)
    return result


def _print_results(query: Sequence[str], results: list[SimilarityResult] | None, args: argparse.Namespace) -> None:
    if args.json:
        found = None if results is None else [{"word": r.word, "similarity": float(similarity_value(r.similarity, args.similarity))} for r in results]
        print(json.dumps({"query": query[0] if len(query) == 1 else list(query), "results": found}, ensure_ascii=False))
    elif results is not None:
        for r in results:
            print(f"{r.word}\t{rust_float(similarity_value(r.similarity, args.similarity))}")
    sys.stdout.flush()


def _source(args: argparse.Namespace) -> str | None:
    source: str | None = args.input
    if args.words and source is not None:
        raise CliError(f"give the queries either in INPUT ({source}) or with -w/--words, not both")
    return source


def _open_index(args: argparse.Namespace, emb: Embeddings) -> Any:
    """The index of ``--index`` for ``emb`` (checked against it), or ``False``: the exact scan."""
    if args.index is None:
        return False
    from finalfusion.ann import load_index
    from finalfusion.errors import FinalfusionError

    try:
        return load_index(args.index, emb)
    except OSError as exc:  # named inside the directory as the user named it, not by the absolute path the loader opened
        inside = os.path.relpath(os.fsdecode(exc.filename), os.path.abspath(args.index)) if exc.filename is not None else None
        where = "" if inside in (None, ".") else f" ({os.path.join(args.index, inside)})"
        missing = isinstance(exc, FileNotFoundError) and inside == "ann.json"
        reason = "not an index saved by finalfusion index build (no ann.json)" if missing else f"{exc.strerror or one_line(exc)}{where}"
        raise CliError(f"--index {args.index}: {reason}") from None
    except (FinalfusionError, ValueError) as exc:  # StaleIndexError, FormatError
        raise CliError(f"--index {args.index}: {one_line(exc)}") from None


def run_similar(args: argparse.Namespace) -> int:
    """Nearest neighbours of each query word (finalfusion-utils src/similar.rs lines 92-119)."""
    source = _source(args)
    emb = load_with_bars(args, args.embeddings)
    index = _open_index(args, emb)
    queries: Iterator[str] = iter(args.words) if args.words else read_lines(source)
    for word in queries:
        results = emb.word_similarity(word, k=args.k, index=index)
        if results is None:
            print(f"Could not compute embedding for: {word}", file=sys.stderr)
        _print_results([word], results, args)
    return 0


def _triples(args: argparse.Namespace, source: str | None) -> Iterator[list[str]]:
    if args.words:
        if len(args.words) % 3:
            raise CliError(f"analogy queries are three words each, got {len(args.words)} words after -w/--words")
        for i in range(0, len(args.words), 3):
            yield args.words[i : i + 3]
        return
    name = "<stdin>" if source in (None, "-") else source
    for no, line in numbered_lines(source, limit=MAX_LINE_BYTES, limit_name="MAX_LINE_BYTES"):
        parts = line.split()
        if len(parts) != 3:
            raise CliError(f"{name}: line {no}: the query does not consist of three words: {line!r}")
        yield parts


def run_analogy(args: argparse.Namespace) -> int:
    """Answers of each analogy query (finalfusion-utils src/analogy.rs lines 108-158)."""
    source = _source(args)
    emb = load_with_bars(args, args.embeddings)
    mask = tuple(part not in args.include for part in "abc")
    index = _open_index(args, emb)
    for a, b, c in _triples(args, source):
        results = emb.analogy(a, b, c, k=args.k, mask=mask, index=index)
        if results is None:
            missing = [w for w in (a, b, c) if emb.embedding(w) is None]
            print(f"Could not compute embedding(s) for: {', '.join(missing)}", file=sys.stderr)
        _print_results([a, b, c], results, args)
    return 0


# --- compute-accuracy ---------------------------------------------------------------------------


@dataclass
class UtilsSection:
    """Counts of one section, as finalfusion-utils' ``Counts`` (src/compute_accuracy.rs lines 96-101)."""

    correct: int = 0
    instances: int = 0
    skipped: int = 0
    sum_cos: np.float32 = field(default_factory=lambda: np.float32(0))


@dataclass
class UtilsAccuracy:
    """finalfusion-utils' evaluation: sections by name (its ``BTreeMap``), each with its counts."""

    sections: dict[str, UtilsSection]


def _questions(source: str | None) -> Iterator[tuple[str, list[str]]]:
    """``(section, [a, b, c, d])`` of a word2vec analogy file (finalfusion-utils src/compute_accuracy.rs lines 228-255)."""
    name = "<stdin>" if source in (None, "-") else source
    section = ""
    for no, line in numbered_lines(source, limit=MAX_LINE_BYTES, limit_name="MAX_LINE_BYTES"):
        if line.startswith(": "):
            section = line[2:]
            continue
        words = line.split()
        if len(words) < 4:  # finalfusion-utils panics (index out of bounds)
            raise CliError(f"{name}: line {no}: the question does not have four words: {line!r}")
        yield section, words[:4]


def utils_accuracy(emb: Embeddings, source: str | None, progress: Any = None) -> UtilsAccuracy:
    """Evaluate ``emb`` on the questions of ``source`` as finalfusion-utils' ``compute-accuracy`` does.

    finalfusion-utils src/compute_accuracy.rs lines 128-164: a question whose
    answer ``d`` is not a vocabulary word is skipped; every other one is
    asked (query words known through subwords too) and is correct if the
    best answer, the three query words excluded, is ``d``; a query word
    without any embedding makes it wrong with cosine 0. ``sum_cos`` adds the
    cosine of the best answer in ``f32``.

    Examples
    --------
    >>> import numpy as np
    >>> from finalfusion import Embeddings, NdArray, SimpleVocab
    >>> m = np.array([[1, 0, 0], [1, 1, 0], [0, 0, 1], [0, 1, 1]], dtype=np.float32)
    >>> emb = Embeddings(NdArray(m), SimpleVocab(["man", "king", "woman", "queen"]))
    >>> import tempfile, os
    >>> with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
    ...     _ = f.write(": royal\\nman king woman queen\\nman king woman prince\\nman king girl queen\\n")
    >>> print(format_utils_accuracy(utils_accuracy(emb, f.name))[0])  # prince: skipped; girl: no embedding, wrong
    royal: 1/2 correct, accuracy: 50.00, avg cos: 0.48, skipped: 1
    Total: 1/2 correct, accuracy: 50.00, avg cos: 0.48
    Skipped: 1/3 (33.33333333333333%)
    >>> os.unlink(f.name)
    """
    questions = list(_questions(source))
    sections: dict[str, UtilsSection] = {}
    asked: list[tuple[UtilsSection, list[str], int]] = []
    for name, words in questions:
        counts = sections.setdefault(name, UtilsSection())
        answer = emb.vocab.own_row(words[3])  # the row the word rule looks the answer up as
        if answer is None:
            counts.skipped += 1
        else:
            asked.append((counts, words, answer))
    for lo in range(0, len(asked), _BLOCK):
        block = asked[lo : lo + _BLOCK]
        indices, scores = emb.analogy_batch([w[:3] for _, w, _ in block], k=1)
        if indices.shape[1] == 0:  # no candidate at all: every answer is wrong
            indices, scores = np.full((len(block), 1), -1), np.zeros((len(block), 1), np.float32)
        for (counts, _, answer), i, score in zip(block, indices[:, 0], scores[:, 0], strict=True):
            counts.instances += 1
            if i >= 0:
                counts.correct += int(i) == answer
                counts.sum_cos = np.float32(counts.sum_cos + np.float32(score))
        if progress is not None:
            progress("evaluate", lo + len(block), len(asked))
    return UtilsAccuracy(dict(sorted(sections.items())))


def _rust_fixed(value: float) -> str:
    """Rust's ``{:.2}`` (``NaN`` as Rust spells it)."""
    return "NaN" if np.isnan(value) else f"{value:.2f}"


def format_utils_accuracy(ev: UtilsAccuracy) -> tuple[str, list[str]]:
    """finalfusion-utils' report (src/compute_accuracy.rs lines 166-219): the standard output and the stderr lines.

    A section without asked questions is not printed; it is named on
    stderr (``"<section>: no evaluation instances"``), as finalfusion-utils does.
    """
    out, err = [], []
    with np.errstate(invalid="ignore", divide="ignore"):
        for name, c in ev.sections.items():
            if c.instances == 0:
                err.append(f"{name}: no evaluation instances")
                continue
            out.append(
                f"{name}: {c.correct}/{c.instances} correct, accuracy: {_rust_fixed(c.correct / c.instances * 100.0)}, "
                f"avg cos: {_rust_fixed(float(np.float32(c.sum_cos / np.float32(c.instances))))}, skipped: {c.skipped}"
            )
        correct = sum(c.correct for c in ev.sections.values())
        instances = sum(c.instances for c in ev.sections.values())
        skipped = sum(c.skipped for c in ev.sections.values())
        cos = np.float32(0)
        for c in ev.sections.values():
            cos = np.float32(cos + c.sum_cos)
        accuracy = correct / instances * 100.0 if instances else float("nan")
        avg_cos = float(np.float32(cos) / np.float32(instances)) if instances else float("nan")
        out.append(f"Total: {correct}/{instances} correct, accuracy: {_rust_fixed(accuracy)}, avg cos: {_rust_fixed(avg_cos)}")
        with_skipped = instances + skipped
        share = skipped / with_skipped * 100.0 if with_skipped else float("nan")
        out.append(f"Skipped: {skipped}/{with_skipped} ({rust_float(share, bits=64)}%)")
    return "\n".join(out), err


def format_accuracy(evaluation: Any) -> str:
    """The report of gensim's evaluation (``--case-insensitive``/``--restrict-vocab``): one line per section, the total and the skipped questions.

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


def _run_gensim_accuracy(args: argparse.Namespace, emb: Embeddings) -> int:
    from finalfusion.errors import FormatError
    from finalfusion.similarity import evaluate_analogies

    source: Any = args.analogies if args.analogies not in (None, "-") else read_lines(None, limit=MAX_LINE_BYTES, limit_name="MAX_LINE_BYTES")
    name = args.analogies if args.analogies not in (None, "-") else "<stdin>"
    with bars(args) as progress:
        try:
            ev = evaluate_analogies(emb, source, case_insensitive=args.case_insensitive, restrict_vocab=args.restrict_vocab, progress=progress)
        except (OSError, UnicodeDecodeError, FormatError) as exc:
            raise CliError(about(name, exc)) from None
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


def run_accuracy(args: argparse.Namespace) -> int:
    """Analogy accuracy of the embeddings (finalfusion-utils src/compute_accuracy.rs; gensim's with its options)."""
    from finalfusion.cli._quantize import _limited_threads

    emb = load_with_bars(args, args.embeddings)
    with _limited_threads(args.threads):
        if args.case_insensitive or args.restrict_vocab is not None:
            return _run_gensim_accuracy(args, emb)
        with bars(args) as progress:
            ev = utils_accuracy(emb, args.analogies, progress)
    if args.json:
        sections: list[dict[str, Any]] = [
            {
                "name": name,
                "correct": c.correct,
                "total": c.instances,
                "skipped": c.skipped,
                "accuracy": c.correct / c.instances if c.instances else None,
                "avg_cos": float(c.sum_cos / np.float32(c.instances)) if c.instances else None,
            }
            for name, c in ev.sections.items()
        ]
        correct, total = sum(s["correct"] for s in sections), sum(s["total"] for s in sections)
        summary = {"correct": correct, "total": total, "skipped": sum(s["skipped"] for s in sections), "accuracy": correct / total if total else None}
        print(json.dumps({"sections": sections, "total": summary}, ensure_ascii=False))
        return 0
    report, notes = format_utils_accuracy(ev)
    for note in notes:
        print(note, file=sys.stderr)
    print(report)
    return 0
