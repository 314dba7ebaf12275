"""Analogy evaluation: file format, skipped questions, and agreement with gensim's evaluate_word_analogies."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from finalfusion import AnalogyEvaluation, Embeddings, FormatError, evaluate_analogies, load_finalfusion
from finalfusion.storage import NdArray

FIXED = """: capital-state
Paris Frankreich Berlin Deutschland
Berlin Deutschland Paris Frankreich
Potsdam Brandenburg Hannover Niedersachsen
Hannover Niedersachsen Potsdam Brandenburg
Rostock Mecklenburg-Vorpommern Potsdam Brandenburg
Paris Frankreich Rom Italien
paris frankreich berlin deutschland

: mixed case
Deutschland deutschen Polen Polen
Deutschland Deutschen Frankreich Paris
DEUTSCHLAND DEUTSCHEN BERLIN POTSDAM
"""


@pytest.fixture(scope="module")
def analogy_emb(testdata: Path) -> Embeddings:
    return load_finalfusion(testdata / "python-simple_vocab.fifu")


def question_file(tmp_path: Path, words: list[str]) -> Path:
    """The fixed questions plus 300 random ones over the real vocabulary (some lower-cased, some unknown)."""
    rng = np.random.default_rng(11)
    lines = [FIXED, ": random"]
    for _ in range(300):
        quad = [words[i] for i in rng.choice(len(words), 4, replace=False)]
        r = rng.random()
        if r < 0.1:
            quad[rng.integers(4)] = "Unbekannt"
        elif r < 0.25:
            quad = [w.lower() for w in quad]
        lines.append(" ".join(quad))
    path = tmp_path / "questions.txt"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def gensim_counts(kv: Any, path: Path, **kw: Any) -> list[tuple[str, int, int]]:
    _score, sections = kv.evaluate_word_analogies(str(path), **kw)
    return [(s["section"], len(s["correct"]), len(s["correct"]) + len(s["incorrect"])) for s in sections]


def ours_counts(ev: AnalogyEvaluation) -> list[tuple[str, int, int]]:
    return [(s.name, s.correct, s.total) for s in ev.sections] + [("Total accuracy", ev.correct, ev.total)]


@pytest.mark.parametrize(("case_insensitive", "restrict_vocab"), [(True, 300000), (False, 300000), (True, 20), (False, 30)])
def test_agrees_with_gensim(analogy_emb: Embeddings, testdata: Path, tmp_path: Path, case_insensitive: bool, restrict_vocab: int) -> None:
    kv_mod = pytest.importorskip("gensim.models.keyedvectors")
    kv = kv_mod.KeyedVectors.load_word2vec_format(str(testdata / "rust-analogy.bin"), binary=True)
    path = question_file(tmp_path, analogy_emb.vocab.words)
    exp = gensim_counts(kv, path, case_insensitive=case_insensitive, restrict_vocab=restrict_vocab)
    ev = analogy_emb.evaluate_analogies(path, case_insensitive=case_insensitive, restrict_vocab=restrict_vocab)
    assert ours_counts(ev) == exp
    n_questions = sum(1 for line in path.read_text(encoding="utf-8").splitlines() if line.strip() and not line.startswith(":"))
    assert ev.total + ev.skipped == n_questions
    assert ev.accuracy == pytest.approx(exp[-1][1] / exp[-1][2])


def test_finalfusion_utils_defaults(analogy_emb: Embeddings) -> None:
    ev = evaluate_analogies(analogy_emb, FIXED.splitlines())
    cap, mixed = ev.sections
    # case-sensitive: "Rom Italien" and the lower-cased question are skipped
    assert (cap.name, cap.total, cap.skipped) == ("capital-state", 5, 2)
    assert mixed.total == 2  # "DEUTSCHLAND ..." skipped, "Deutschland deutschen Polen Polen" answered
    assert mixed.skipped == 1
    # the Rust unit test's analogy is answered correctly
    one = evaluate_analogies(analogy_emb, [": t", "Paris Frankreich Berlin Deutschland"])
    assert (one.correct, one.total) == (1, 1)
    assert analogy_emb.analogy("Paris", "Frankreich", "Berlin")[0].word == "Deutschland"  # type: ignore[index]
    assert "capital-state" in str(ev)
    assert ev.correct == cap.correct + mixed.correct


def test_bytes_lines_blank_lines_and_empty_sections(analogy_emb: Embeddings) -> None:
    ev = evaluate_analogies(analogy_emb, [b": a", b"", b"Paris Frankreich Berlin Deutschland", b": empty"])
    assert [(s.name, s.correct, s.total, s.skipped) for s in ev.sections] == [("a", 1, 1, 0), ("empty", 0, 0, 0)]
    assert ev.sections[1].accuracy == 0.0
    assert evaluate_analogies(analogy_emb, []).accuracy == 0.0


def test_bad_question_files(analogy_emb: Embeddings, tmp_path: Path) -> None:
    with pytest.raises(FormatError, match="line 2 is not an analogy question") as err:
        evaluate_analogies(analogy_emb, [": s", "Paris Frankreich Berlin"])
    assert err.value.expected == "4 words"
    with pytest.raises(FormatError, match="before any section"):
        evaluate_analogies(analogy_emb, ["Paris Frankreich Berlin Deutschland"])
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b": s\nParis Frankreich Berlin Deutsch\xfcland\n")
    with pytest.raises(FormatError, match="line 2 is not UTF-8") as err:
        evaluate_analogies(analogy_emb, bad)
    assert err.value.offset == len(b": s\nParis Frankreich Berlin Deutsch")


def test_quantized_and_unnormalised_storage(testdata: Path) -> None:
    questions = [": s", "Berlin Potsdam Hamburg Bremen", "Potsdam Berlin Bremen Hamburg", "Berlin Hamburg Potsdam Leipzig"]
    dense = load_finalfusion(testdata / "python-similarity.fifu")
    raw = load_finalfusion(testdata / "rust-similarity.fifu")  # same vectors, unnormalised
    quant = load_finalfusion(testdata / "python-pq.fifu")
    expected = [(s.correct, s.total) for s in evaluate_analogies(dense, questions).sections]
    assert [(s.correct, s.total) for s in evaluate_analogies(raw, questions).sections] == expected
    recon = Embeddings(NdArray(np.asarray(quant.storage)), quant.vocab)
    assert [(s.correct, s.total) for s in evaluate_analogies(quant, questions).sections] == [
        (s.correct, s.total) for s in evaluate_analogies(recon, questions).sections
    ]


def test_evaluation_matches_single_analogy_queries(analogy_emb: Embeddings, tmp_path: Path) -> None:
    path = question_file(tmp_path, analogy_emb.vocab.words)
    ev = evaluate_analogies(analogy_emb, path, batch_size=7)
    correct = 0
    for line in path.read_text(encoding="utf-8").splitlines():
        parts = line.split()
        if len(parts) == 4 and all(p in analogy_emb for p in parts):
            res = analogy_emb.analogy(*parts[:3])
            correct += res is not None and res[0].word == parts[3]
    assert ev.correct == correct


@contextmanager
def _served(data: bytes, fifo: Path | None = None) -> Iterator[int | Path]:
    """A pipe (its read end) or a FIFO (its path) that a writer thread fills once with ``data``, then closes.

    A reader that opens the FIFO a second time would block for ever; after 5 s a guard opens it
    for writing and closes it, so such a reader sees an empty file instead of hanging the test.
    """
    done = threading.Event()
    if fifo is None:
        r, w = os.pipe()
        target: int | Path = r
    else:
        os.mkfifo(fifo)
        target = fifo

    def write() -> None:
        fd = w if fifo is None else os.open(fifo, os.O_WRONLY)
        with open(fd, "wb") as f:
            f.write(data)

    def guard() -> None:
        if fifo is None or done.wait(5.0):
            return
        while not done.wait(0.1):
            with contextlib.suppress(OSError):  # OSError: no reader waiting
                os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))

    threads = [threading.Thread(target=write, daemon=True), threading.Thread(target=guard, daemon=True)]
    for t in threads:
        t.start()
    try:
        yield target
    finally:
        done.set()
        for t in threads:
            t.join(timeout=10)
        if fifo is None:
            os.close(r)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="names a pipe by /dev/fd/N")
@pytest.mark.parametrize("spelling", ["evaluate_analogies", "evaluate_word_analogies"])
def test_questions_are_read_once(analogy_emb: Embeddings, tmp_path: Path, spelling: str) -> None:
    """A pipe (by path and as a file object), a FIFO and a subprocess's output give what the regular file gives."""

    def run(source: Any) -> Any:
        if spelling == "evaluate_analogies":
            return ours_counts(evaluate_analogies(analogy_emb, source))
        score, sections = analogy_emb.evaluate_word_analogies(source)
        return score, [(s["section"], len(s["correct"]) + len(s["incorrect"])) for s in sections]

    path = question_file(tmp_path, analogy_emb.vocab.words)
    data = path.read_bytes()
    want = run(path)
    assert want != run([]), "the questions must give a result that an empty input does not"
    with _served(data) as r:
        assert run(f"/dev/fd/{r}") == want, "pipe by path"
    with _served(data) as r, open(os.dup(int(r)), "rb") as f:
        assert run(f) == want, "pipe as a file object"
    with _served(data, tmp_path / "fifo") as fifo:
        assert run(fifo) == want, "FIFO"
    with subprocess.Popen(["cat", str(path)], stdout=subprocess.PIPE) as proc:
        assert proc.stdout is not None
        assert run(f"/dev/fd/{proc.stdout.fileno()}") == want, "a subprocess's output"


@pytest.mark.parametrize(
    ("lines", "error", "match"),
    [
        ([": s", None], TypeError, "got NoneType on line 2"),
        ([": s", "Paris Frankreich Berlin Deutschland", 123], TypeError, "got int on line 3"),
        ([b": s", b"Paris Frankreich Berlin Deutschland", None], TypeError, "got NoneType on line 3"),
        ([": s", ["Paris", "Frankreich", "Berlin", "Deutschland"]], TypeError, "got list on line 2"),
        ([b": s", b"Paris Frankreich Berlin Deutsch\xfcland"], FormatError, "line 2 is not UTF-8"),
        (b": s\nParis Frankreich Berlin Deutschland\n", TypeError, "not bytes"),
    ],
)
def test_question_lines_must_be_text(analogy_emb: Embeddings, lines: Any, error: type[Exception], match: str) -> None:
    """Lines that are not text are refused with an error naming the line, in both spellings."""
    with pytest.raises(error, match=match):
        evaluate_analogies(analogy_emb, lines)
    with pytest.raises(error, match=match):
        analogy_emb.evaluate_word_analogies(lines)
