"""finalfusion-python 0.7's console scripts (ffp-*) with their 0.7 arguments, run as separate processes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import finalfusion
from finalfusion import Embeddings, FastTextVocab, NdArray
from finalfusion.subword import FastTextIndexer

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_cli import SAMPLE, command, env

SCRIPTS = {
    "ffp-convert": "convert",
    "ffp-similar": "similar",
    "ffp-analogy": "analogy",
    "ffp-bucket-to-explicit": "bucket_to_explicit",
    "ffp-select": "select",
}


def ffp(script: str, *args: Any, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """Run the ``script`` console script (installed from this tree), else what it runs (``finalfusion.cli.legacy``)."""
    try:
        cmd = command(script)
    except LookupError:
        cmd = [sys.executable, "-c", f"import sys; from finalfusion.cli.legacy import {SCRIPTS[script]} as main; sys.exit(main())"]
    return subprocess.run([*cmd, *map(str, args)], input=stdin, capture_output=True, text=True, env=env(), timeout=300, check=False)


@pytest.fixture(scope="module")
def w2v(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("ffp") / "sample.w2v"
    finalfusion.write_word2vec(path, finalfusion.load_finalfusion(SAMPLE))
    return path


def test_ffp_convert_defaults_word2vec_to_finalfusion(w2v: Path, tmp_path: Path) -> None:
    out = tmp_path / "out.anything"  # 0.7 does not look at the extension
    r = ffp("ffp-convert", w2v, out)
    assert r.returncode == 0, r.stderr
    emb, orig = finalfusion.load_finalfusion(out), finalfusion.load_finalfusion(SAMPLE)
    assert emb.vocab.words == orig.vocab.words
    np.testing.assert_allclose(emb["berlin"], orig["berlin"], rtol=1e-6)


def test_ffp_convert_formats(tmp_path: Path) -> None:
    vec, txt = tmp_path / "a.vec", tmp_path / "b.out"
    assert ffp("ffp-convert", "-f", "finalfusion", "-t", "textdims", SAMPLE, vec).returncode == 0
    assert ffp("ffp-convert", "--from", "textdims", "--to", "text", vec, txt).returncode == 0
    assert finalfusion.compat.sniff_format(txt.read_bytes()) == "text"
    r = ffp("ffp-convert", "-f", "glove", SAMPLE, txt)
    assert r.returncode == 2
    assert "invalid choice" in r.stderr
    r = ffp("ffp-convert", "-f", "word2vec", SAMPLE, tmp_path / "x")  # wrong --from: one line, status 1
    assert r.returncode == 1
    assert r.stderr.startswith(f"ffp-convert: error: {SAMPLE}: ")
    assert "Traceback" not in r.stderr


def test_ffp_similar(w2v: Path, tmp_path: Path) -> None:
    emb = finalfusion.load_finalfusion(SAMPLE)
    expected = [f"{r.word} {r.similarity}" for r in emb.word_similarity("berlin", k=3)]
    r = ffp("ffp-similar", "-k", 3, SAMPLE, stdin="berlin\n")
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == expected
    queries = tmp_path / "q.txt"
    queries.write_text("berlin\nzzzunknown\n")
    r = ffp("ffp-similar", "-f", "word2vec", "-k", 3, "--mmap", "-l", w2v, queries)
    assert [line.split()[0] for line in r.stdout.splitlines()] == [e.split()[0] for e in expected]
    assert "Could not compute neighbours for: zzzunknown" in r.stderr


def test_ffp_analogy() -> None:
    emb = finalfusion.load_finalfusion(SAMPLE)
    r = ffp("ffp-analogy", "-k", 2, SAMPLE, stdin="berlin paris the\n")
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == [f"{x.word} {x.similarity}" for x in emb.analogy("berlin", "paris", "the", k=2)]
    r = ffp("ffp-analogy", "-i", "a", "b", "-k", 2, SAMPLE, stdin="berlin paris the\n")
    assert [line.split()[0] for line in r.stdout.splitlines()] == [x.word for x in emb.analogy("berlin", "paris", "the", k=2, skip={"the"})]


def test_ffp_bucket_to_explicit(tmp_path: Path) -> None:
    out = tmp_path / "explicit.fifu"
    assert ffp("ffp-bucket-to-explicit", SAMPLE, out).returncode == 0
    assert type(finalfusion.load_finalfusion(out).vocab).__name__ == "ExplicitVocab"
    rng = np.random.default_rng(0)
    ft = Embeddings(NdArray(rng.normal(size=(2 + 16, 4)).astype(np.float32)), FastTextVocab(["hallo", "welt"], FastTextIndexer(16, 3, 5)))
    model = tmp_path / "model.bin"
    finalfusion.write_fasttext(model, ft)
    assert ffp("ffp-bucket-to-explicit", "-f", "fasttext", model, out).returncode == 0
    assert finalfusion.load_finalfusion(out).vocab.words == ["hallo", "welt"]


def test_ffp_select(w2v: Path, tmp_path: Path) -> None:
    words = tmp_path / "words.txt"
    words.write_text("berlin\nthe\n🙂🙂🙂\n")
    out = tmp_path / "sel.fifu"
    r = ffp("ffp-select", "-f", "word2vec", w2v, out, words)
    assert r.returncode == 1
    assert "Cannot represent '🙂🙂🙂'." in r.stderr
    assert not out.exists()
    r = ffp("ffp-select", "--ignore_unk", "-v", "--format", "word2vec", w2v, out, words)
    assert r.returncode == 0
    assert "Cannot represent" in r.stderr
    sel = finalfusion.load_finalfusion(out)
    assert sel.vocab.words == ["berlin", "the"]
    assert sel.metadata["source_embeddings"] == str(w2v)
    r = ffp("ffp-select", "-i", SAMPLE, out, stdin="berliner\n")  # subword vocabulary: unknown words through n-grams, as 0.7's emb[word]
    assert r.returncode == 0
    np.testing.assert_allclose(finalfusion.load_finalfusion(out)["berliner"], finalfusion.load_finalfusion(SAMPLE).embedding("berliner"), rtol=1e-6)
