"""``Embeddings.encode`` for finalfusion/fastText vocabularies: fastText's ``get_sentence_vector`` (issue 25).

fastText models are trained here (the training script and corpus of
test_interop_fasttext) and loaded with both ``normalize`` settings; their
``.fifu`` round trips keep ``encode``. Also the rule on plain vocabularies
and the word rule of SentencePiece vocabularies against ``sentencepiece``.
"""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import finalfusion
from finalfusion import Embeddings, load_finalfusion
from finalfusion.storage import NdArray
from finalfusion.vocab import SimpleVocab
from test_interop_fasttext import TRAIN, make_corpus

fasttext = pytest.importorskip("fasttext")

LINES = [
    "haus baum weg",
    "häuschen unbekanntwort mädchen café 日本",
    "",
    "   \t ",
    "zzzzzz",  # an unknown word with n-grams: fastText embeds it
    "xy",  # too short for any n-gram of length 3..6 with brackets? fastText still has '<xy>'
    "straße\tstraßen  \v über\r",
    "haus haus haus baum",
]


@pytest.fixture(scope="module", params=[("skipgram", "ns"), ("cbow", "hs")], ids=["skipgram", "cbow"])
def ft_model(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any]:
    kind, loss = request.param
    tmp = tmp_path_factory.mktemp("ft-encode")
    make_corpus(tmp / "corpus.txt")
    path = tmp / f"{kind}.bin"
    for attempt in range(10):  # see test_interop_fasttext: fastText sometimes diverges on a corpus this small
        proc = subprocess.run([sys.executable, "-c", TRAIN, str(tmp / "corpus.txt"), kind, loss, str(3000 + 7919 * attempt), str(path)], capture_output=True)
        if proc.returncode == 0:
            break
        if proc.returncode != 3:
            raise RuntimeError(proc.stderr.decode())
    else:
        pytest.fail("fastText training diverged 10 times in a row")
    return path, fasttext.load_model(str(path))


@pytest.mark.parametrize("normalize", [True, False])
def test_encode_equals_get_sentence_vector(ft_model: tuple[Path, Any], normalize: bool) -> None:
    path, model = ft_model
    emb = finalfusion.load(path, normalize=normalize)
    ours = emb.encode(LINES)
    theirs = np.stack([model.get_sentence_vector(line.replace("\n", " ")) for line in LINES])
    np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-6)
    assert np.abs(theirs).sum(axis=1)[0] > 0  # the check compares real vectors
    unit = emb.encode(LINES, normalize=True)
    lengths = np.linalg.norm(theirs, axis=1, keepdims=True)
    np.testing.assert_allclose(unit, np.where(lengths > 0, theirs / np.where(lengths > 0, lengths, 1), 0), rtol=1e-5, atol=1e-6)


def test_fifu_round_trip_keeps_encode(ft_model: tuple[Path, Any], tmp_path: Path) -> None:
    path, _model = ft_model
    emb = finalfusion.load(path)
    emb.write(tmp_path / "ft.fifu")
    back = load_finalfusion(tmp_path / "ft.fifu")
    np.testing.assert_array_equal(back.encode(LINES), emb.encode(LINES))


def test_plain_vocabulary_rule() -> None:
    matrix = np.array([[3, 4], [0, 2], [0, 0]], dtype=np.float32)
    emb = Embeddings(NdArray(matrix), SimpleVocab(["a", "b", "zero"]))
    out = emb.encode(["a b", "b zz zero", "zz", "a\ta", "a\u00a0b"])
    # unit vectors averaged; unknown and zero vectors skipped; only ASCII whitespace separates words
    np.testing.assert_allclose(out[:4], [[0.3, 0.9], [0.0, 1.0], [0.0, 0.0], [0.6, 0.8]], rtol=1e-6)
    assert out[4].tolist() == [0.0, 0.0]  # 'a\xa0b' is one unknown word, as in fastText
    assert emb.encode("a b").shape == (2,)
    assert emb.encode([]).shape == (0, 2)


def test_sentencepiece_words_read_as_running_text(tmp_path: Path) -> None:
    spm = pytest.importorskip("sentencepiece")
    from finalfusion.compat.sentencepiece import load_sentencepiece

    buf = io.BytesIO()
    text = ["the house is a happy house", "houses and householders are happy", "a happiness of houses"] * 40
    spm.SentencePieceTrainer.train(sentence_iterator=iter(text), model_writer=buf, vocab_size=24, minloglevel=2)
    sp = spm.SentencePieceProcessor(model_proto=buf.getvalue())
    n = sp.GetPieceSize()
    rng = np.random.default_rng(4)
    rows = (rng.normal(size=(n, 8)) * rng.uniform(0.1, 4, size=(n, 1))).astype(np.float32)
    for normalize in (True, False):
        emb = load_sentencepiece(buf.getvalue(), rows.copy(), normalize=normalize)
        for word in ["house", "happiness", "householders", "e", "the", "xyz"]:
            ids = [i for i in sp.EncodeAsIds(word) if not (sp.IsUnknown(i) or sp.IsControl(i) or sp.IsUnused(i))]
            expected = rows[ids].mean(axis=0)  # the model's rows of the word in running text ('▁house', ...)
            vec, norm = emb.embedding_with_norm(word)
            np.testing.assert_allclose(vec * norm, expected, rtol=1e-5, atol=1e-6)
        # the exact piece, also when the word is itself a piece of the same spelling
        piece = next(p for p in (sp.IdToPiece(i) for i in range(n)) if p.startswith("\u2581") and len(p) > 2)
        stored = emb.token_embedding(piece) * (emb.norms.norms[sp.PieceToId(piece)] if emb.norms is not None else 1)
        np.testing.assert_allclose(stored, rows[sp.PieceToId(piece)], rtol=1e-6)
        sentence = "the happy householders"
        ids = [i for i in sp.EncodeAsIds(sentence) if not sp.IsUnknown(i)]
        np.testing.assert_allclose(emb.encode(sentence), rows[ids].mean(axis=0), rtol=1e-5, atol=1e-6)


def test_fasttext_vectors_written_for_model2vec(ft_model: tuple[Path, Any], tmp_path: Path) -> None:
    model2vec = pytest.importorskip("model2vec")
    path, model = ft_model
    emb = finalfusion.load(path)
    finalfusion.write_model2vec(tmp_path / "m2v", emb)
    ref = model2vec.StaticModel.from_pretrained(tmp_path / "m2v")
    known = [line for line in LINES if all(w in emb.vocab for w in line.split())]  # model2vec has no n-grams
    assert len(known) >= 4
    np.testing.assert_allclose(ref.encode(known), np.stack([model.get_sentence_vector(t) for t in known]), rtol=1e-5, atol=1e-6)


def test_cli_encode(tmp_path: Path) -> None:
    from finalfusion.cli import main

    matrix = np.array([[3, 4], [0, 2], [1, 0]], dtype=np.float32)
    emb = Embeddings(NdArray(matrix), SimpleVocab(["a", "b", "c"]))
    emb.write(tmp_path / "e.fifu")
    (tmp_path / "in.txt").write_text("a b\n\nc zz\nzz\n", encoding="utf-8")
    texts = ["a b", "c zz", "zz"]
    import contextlib
    import json

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["encode", "--quiet", str(tmp_path / "e.fifu"), str(tmp_path / "in.txt")]) == 0
    rows = [[float(x) for x in line.split(" ")] for line in out.getvalue().splitlines()]
    np.testing.assert_array_equal(np.array(rows, dtype=np.float32), emb.encode(texts))
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["encode", "--quiet", "--unit", "--json", "--batch-size", "1", str(tmp_path / "e.fifu"), str(tmp_path / "in.txt")]) == 0
    objs = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [o["line"] for o in objs] == [1, 3, 4]
    np.testing.assert_allclose([o["vector"] for o in objs], emb.encode(texts, normalize=True), rtol=1e-6)
