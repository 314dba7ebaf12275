"""Analogy evaluation: word2vec-format question files, answered in batches (3CosAdd)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import numpy as np

from finalfusion import _display
from finalfusion._progress import ProgressArg, progress_callback
from finalfusion.errors import FormatError
from finalfusion.similarity._base import QueryIndex
from finalfusion.similarity._index import query_index
from finalfusion.similarity._protocol import Queryable
from finalfusion.similarity._scan import search_batch, skip_pairs
from finalfusion.similarity._topk import F32, I64
from finalfusion.similarity._vectors import analogy_vectors, check_finite_rows

__all__ = ["AnalogyEvaluation", "AnalogySection", "evaluate_analogies", "read_analogies"]


@dataclass(frozen=True)
class AnalogySection:
    """Counts for one section (``: name``) of an analogy question file.

    ``total`` counts the questions answered; ``skipped`` those left out
    because a word is unknown (or outside ``restrict_vocab``).

    Examples
    --------
    >>> section = AnalogySection("capitals", correct=3, total=4, skipped=1)
    >>> section.name, section.accuracy
    ('capitals', 0.75)
    """

    #: The section's name, from its ``: name`` line.
    name: str
    #: Questions whose expected answer was the best one.
    correct: int
    #: Questions answered.
    total: int
    #: Questions left out because a word is unknown (or outside ``restrict_vocab``).
    skipped: int

    @property
    def accuracy(self) -> float:
        """``correct / total``; ``0.0`` for a section without answered questions.

        Examples
        --------
        >>> AnalogySection("plural", 1, 4, 0).accuracy, AnalogySection("empty", 0, 0, 2).accuracy
        (0.25, 0.0)
        """
        return self.correct / self.total if self.total else 0.0


@dataclass(frozen=True)
class AnalogyEvaluation:
    """Result of :func:`evaluate_analogies`: per-section counts and the totals.

    Examples
    --------
    >>> ev = AnalogyEvaluation([AnalogySection("capitals", 3, 4, 1), AnalogySection("plural", 1, 4, 0)])
    >>> ev.correct, ev.total, ev.skipped, ev.accuracy
    (4, 8, 1, 0.5)
    >>> print(ev)
    section   correct  total  skipped  accuracy
    capitals        3      4        1    75.00%
    plural          1      4        0    25.00%
    total           4      8        1    50.00%
    """

    #: The sections in file order.
    sections: list[AnalogySection]

    def _repr_html_(self) -> str:
        return _display.evaluation_html(self)

    @property
    def correct(self) -> int:
        """Correctly answered questions over all sections.

        Examples
        --------
        >>> AnalogyEvaluation([AnalogySection("a", 3, 4, 1), AnalogySection("b", 1, 4, 0)]).correct
        4
        """
        return sum(s.correct for s in self.sections)

    @property
    def total(self) -> int:
        """Answered questions over all sections (skipped ones not included).

        Examples
        --------
        >>> AnalogyEvaluation([AnalogySection("a", 3, 4, 1), AnalogySection("b", 1, 4, 0)]).total
        8
        """
        return sum(s.total for s in self.sections)

    @property
    def skipped(self) -> int:
        """Questions skipped because of unknown words.

        Examples
        --------
        >>> AnalogyEvaluation([AnalogySection("a", 3, 4, 1), AnalogySection("b", 1, 4, 2)]).skipped
        3
        """
        return sum(s.skipped for s in self.sections)

    @property
    def accuracy(self) -> float:
        """Total accuracy over the answered questions (as gensim and finalfusion-utils report it).

        Skipped questions count neither as right nor as wrong.

        Examples
        --------
        >>> AnalogyEvaluation([AnalogySection("a", 3, 4, 10), AnalogySection("b", 0, 0, 5)]).accuracy
        0.75
        """
        return self.correct / self.total if self.total else 0.0

    def __str__(self) -> str:
        width = max([len("section"), *(len(s.name) for s in self.sections)])
        lines = [f"{'section':{width}s}  correct  total  skipped  accuracy"]
        for s in [*self.sections, AnalogySection("total", self.correct, self.total, self.skipped)]:
            lines.append(f"{s.name:{width}s}  {s.correct:7d}  {s.total:5d}  {s.skipped:7d}  {100 * s.accuracy:7.2f}%")
        return "\n".join(lines)


#: A parsed question file: ``[(section, [(line_no, [a, b, c, d]), ...]), ...]``.
Questions = list[tuple[str, list[tuple[int, list[str]]]]]


def _question_lines(questions: Any) -> tuple[str, list[str]]:
    """The lines of ``questions`` read once, and a name for messages.

    A path is read whole in one pass (a pipe or FIFO can be read only once);
    an iterable of lines is consumed once. ``bytes`` lines are UTF-8.
    """
    if isinstance(questions, (str, os.PathLike)):
        name = os.fspath(questions)
        with open(questions, "rb") as f:
            data = f.read()
        try:
            return name, data.decode("utf-8").splitlines()
        except UnicodeDecodeError as exc:
            line_no = data.count(b"\n", 0, exc.start) + 1
            raise FormatError(
                f"{name}: line {line_no} is not UTF-8",
                chunk="analogy questions",
                offset=exc.start,
                expected="UTF-8 text",
                found=repr(data[exc.start : exc.end]),
            ) from None
    if isinstance(questions, (bytes, bytearray, memoryview)):
        raise TypeError(f"questions must be a path or an iterable of lines, not {type(questions).__name__}")
    name = "<questions>"
    lines: list[str] = []
    for no, item in enumerate(questions, 1):
        if isinstance(item, (bytes, bytearray)):
            try:
                lines.append(bytes(item).decode("utf-8"))
            except UnicodeDecodeError as exc:
                raise FormatError(
                    f"{name}: line {no} is not UTF-8", chunk="analogy questions", expected="UTF-8 text", found=repr(bytes(item)[exc.start : exc.end])
                ) from None
        elif isinstance(item, str):
            lines.append(item)
        else:
            raise TypeError(f"analogy question lines must be str or bytes, got {type(item).__name__} on line {no}: {item!r:.60}")
    return name, lines


def read_analogies(questions: Any) -> Questions:
    """Parse the word2vec analogy format: ``: section`` lines, then ``a b c d`` lines.

    The input is read exactly once, so a pipe or FIFO works. Blank lines are
    ignored. Returns ``[(section, [(line_no, [a, b, c, d]), ...]), ...]``.

    Parameters
    ----------
    questions
        Path of a UTF-8 question file (read once, whole), or an iterable of
        lines (``str``, or ``bytes`` in UTF-8, such as a file object).

    Raises
    ------
    FormatError
        If a line is neither a ``:`` section header nor four words, a
        question comes before the first section, or a line is not UTF-8.
    TypeError
        If a line is neither ``str`` nor ``bytes`` (naming the line), or
        ``questions`` is ``bytes`` rather than lines.

    Examples
    --------
    >>> read_analogies([": capitals", "Paris France Berlin Germany", "", ": empty"])
    [('capitals', [(2, ['Paris', 'France', 'Berlin', 'Germany'])]), ('empty', [])]
    >>> read_analogies([": s", None])
    Traceback (most recent call last):
    ...
    TypeError: analogy question lines must be str or bytes, got NoneType on line 2: None
    """
    name, lines = _question_lines(questions)
    sections: Questions = []
    for no, line in enumerate(lines, 1):
        text = line.strip()
        if not text:
            continue
        if text.startswith(":"):
            sections.append((text[1:].strip(), []))
            continue
        parts = text.split()
        if len(parts) != 4:
            raise FormatError(f"{name}: line {no} is not an analogy question", chunk="analogy questions", expected="4 words", found=f"{len(parts)}: {text!r}")
        if not sections:
            raise FormatError(f"{name}: question on line {no} before any section", chunk="analogy questions", expected="a ': section' line", found=repr(text))
        sections[-1][1].append((no, parts))
    return sections


def evaluate_analogies(
    emb: Queryable,
    questions: Any,
    *,
    case_insensitive: bool = False,
    restrict_vocab: int | None = None,
    batch_size: int = 512,
    progress: ProgressArg = None,
    outcomes: list[bool] | None = None,
) -> AnalogyEvaluation:
    """Answer every question of an analogy file and count correct answers.

    Each question ``a b c d`` asks for the word closest to
    ``unit(b) - unit(a) + unit(c)`` (3CosAdd) among the candidates, the
    three query words excluded; it is correct if that word is ``d``.

    Defaults: case-sensitive, every vocabulary word is a candidate, and a
    question whose four words are not all known vocabulary words is skipped (counted in ``skipped``,
    not in ``total``). ``case_insensitive=True, restrict_vocab=300000``
    reproduces gensim's ``evaluate_word_analogies`` defaults: words are
    compared upper-cased, a query word uses the first vocabulary entry with
    its upper-cased form, only the first ``restrict_vocab`` words are known
    and candidates, and every case variant of a query word is excluded.
    (finalfusion-utils' ``compute-accuracy`` skips a question only when its
    answer is unknown; the ``finalfusion compute-accuracy`` command follows
    that rule, see docs/cli.md.)

    Parameters
    ----------
    emb
        The embeddings.
    questions
        Path of a question file (UTF-8; read once, so a pipe or FIFO works)
        or an iterable of lines (``str``, or UTF-8 ``bytes``).
    case_insensitive
        Compare words upper-cased, as gensim does by default.
    restrict_vocab
        Only the first ``restrict_vocab`` words are known and candidates.
    batch_size
        Questions answered per matrix product.
    progress
        Report the questions done: a callable ``progress("evaluate", done,
        total)`` or ``True`` for a tqdm bar (when tqdm is installed).
    outcomes
        If given, one ``bool`` per answered question is appended, in file
        order (used by gensim's ``evaluate_word_analogies`` spelling).

    Returns
    -------
    AnalogyEvaluation

    Raises
    ------
    FormatError
        If a line is neither a ``:`` section header nor four words, a
        question comes before the first section, or a line is not UTF-8.
    TypeError
        If a line is neither ``str`` nor ``bytes`` (the message names the line).
    NonFiniteError
        (a ``ValueError``) If a question's query word has a NaN or infinite
        component, naming the word.

    Examples
    --------
    >>> import numpy as np
    >>> from finalfusion import Embeddings
    >>> from finalfusion.storage import NdArray
    >>> from finalfusion.vocab import SimpleVocab
    >>> m = np.array([[1, 0, 0], [1, 1, 0], [0, 0, 1], [0, 1, 1]], dtype=np.float32)
    >>> emb = Embeddings(NdArray(m), SimpleVocab(["man", "king", "woman", "queen"]))
    >>> ev = evaluate_analogies(emb, [": royals", "man king woman queen", "man king woman princess"])
    >>> ev.correct, ev.total, ev.skipped
    (1, 1, 1)
    """
    return evaluate_questions(
        emb,
        read_analogies(questions),
        case_insensitive=case_insensitive,
        restrict_vocab=restrict_vocab,
        batch_size=batch_size,
        progress=progress,
        outcomes=outcomes,
    )


def evaluate_questions(
    emb: Queryable,
    sections: Questions,
    *,
    case_insensitive: bool = False,
    restrict_vocab: int | None = None,
    batch_size: int = 512,
    progress: ProgressArg = None,
    outcomes: list[bool] | None = None,
) -> AnalogyEvaluation:
    """:func:`evaluate_analogies` on questions already parsed by :func:`read_analogies` (so a caller reads its input once).

    Examples
    --------
    >>> import numpy as np
    >>> from finalfusion import Embeddings, NdArray, SimpleVocab
    >>> m = np.array([[1, 0, 0], [1, 1, 0], [0, 0, 1], [0, 1, 1]], dtype=np.float32)
    >>> emb = Embeddings(NdArray(m), SimpleVocab(["man", "king", "woman", "queen"]))
    >>> evaluate_questions(emb, read_analogies([": royals", "man king woman queen"])).correct
    1
    """
    index = query_index(emb)
    limit = index.n if restrict_vocab is None else min(index.n, max(0, int(restrict_vocab)))
    words = index.words[:limit]

    def fold(w: str) -> str:
        return w.upper() if case_insensitive else w

    known: dict[str, int] = {}
    variants: dict[str, list[int]] = {}
    for i, w in enumerate(words):
        key = fold(w)
        known.setdefault(key, i)
        variants.setdefault(key, []).append(i)
    out: list[AnalogySection] = []
    step = max(1, batch_size)
    report = progress_callback(progress)
    total, done = sum(len(items) for _, items in sections), 0
    for name, items in sections:
        todo = [keys for keys in ([fold(p) for p in parts] for _no, parts in items) if all(key in known for key in keys)]
        correct = 0
        for lo in range(0, len(todo), step):
            chunk = todo[lo : lo + step]
            qm = analogy_queries(index, np.asarray([[known[key] for key in keys[:3]] for keys in chunk], dtype=np.int64))
            excluded = [np.asarray(sorted({i for key in keys[:3] for i in (variants[key] if case_insensitive else [known[key]])}), np.int64) for keys in chunk]
            _, best = search_batch(index, qm, 1, skip_pairs(excluded), limit)
            hits = [i >= 0 and fold(words[i]) == keys[3] for keys, i in zip(chunk, best[:, 0].tolist(), strict=True)]
            correct += sum(hits)
            if outcomes is not None:
                outcomes.extend(hits)
        out.append(AnalogySection(name, correct, len(todo), len(items) - len(todo)))
        done += len(items)
        if report is not None:
            report("evaluate", done, total)
    return AnalogyEvaluation(out)


def analogy_queries(index: QueryIndex, triples: I64) -> F32:
    """Unit ``unit(b) - unit(a) + unit(c)`` for rows of word ids ``(a, b, c)``."""
    flat = triples.reshape(-1)
    rows = index.rows(flat)
    check_finite_rows(rows, lambda i: f"the vector of the word {index.words[int(flat[i])]!r}")
    rows = rows.reshape(*triples.shape, index.dims)
    return analogy_vectors(rows[:, 0], rows[:, 1], rows[:, 2])
