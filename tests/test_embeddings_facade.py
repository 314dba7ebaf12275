"""The Embeddings facade: setter checks, lookups into out= (defaults of unknown words), argument checks of its methods."""

from __future__ import annotations

import sys

import numpy as np
import pytest

import finalfusion.embeddings
import finalfusion.io
from finalfusion import Embeddings, FastTextVocab, NdArray, Norms, SimpleVocab, load_finalfusion
from finalfusion.errors import MissingExtraError
from finalfusion.metadata import Metadata
from finalfusion.subword import FastTextIndexer


def _emb() -> Embeddings:
    return Embeddings(NdArray(np.array([[3.0, 4.0], [1.0, 0.0]], dtype=np.float32)), SimpleVocab(["a", "b"]))


def test_norms_setter_checks_type_and_size() -> None:
    emb = _emb()
    with pytest.raises(TypeError, match="norms must be Norms or None, got list"):
        emb.norms = [1.0, 2.0]  # type: ignore[assignment]
    with pytest.raises(ValueError, match="3"):
        emb.norms = Norms(np.ones(3, dtype=np.float32))
    emb.norms = Norms(np.array([5.0, 1.0], dtype=np.float32))
    assert emb.norms is not None
    assert emb.norms.norms.tolist() == [5.0, 1.0]
    emb.norms = None
    assert emb.norms is None


def test_metadata_setter_checks_type() -> None:
    emb = _emb()
    with pytest.raises(TypeError, match="metadata must be Metadata or None, got dict"):
        emb.metadata = {"name": "x"}  # type: ignore[assignment]
    emb.metadata = Metadata({"name": "x"})
    assert emb.metadata is not None
    assert emb.metadata["name"] == "x"


def test_embedding_with_norm_fills_out_for_known_words_and_defaults() -> None:
    emb = _emb()
    out = np.zeros(2, dtype=np.float32)
    vec, norm = emb.embedding_with_norm("a", out=out)
    assert vec is out
    assert out.tolist() == [3.0, 4.0]
    assert norm == 1.0
    default = (np.array([7.0, 7.0], dtype=np.float32), 0.5)
    vec, norm = emb.embedding_with_norm("zzz", out=out, default=default)
    assert vec is out
    assert out.tolist() == [7.0, 7.0]
    assert norm == 0.5


def test_embedding_batch_rejects_an_out_of_the_wrong_shape() -> None:
    with pytest.raises(ValueError, match=r"out must have shape \(3, 2\), got \(2, 2\)"):
        _emb().embedding_batch(["a", "b", "c"], out=np.zeros((2, 2), dtype=np.float32))


def test_bucket_to_explicit_needs_a_bucketed_vocabulary() -> None:
    with pytest.raises(TypeError, match="only bucketed vocabularies can be converted to explicit, not SimpleVocab"):
        _emb().bucket_to_explicit()


def test_load_finalfusion_is_one_function_under_every_0_7_name() -> None:
    # finalfusion-python 0.7 imported it from finalfusion.embeddings; finalfusion.io re-exports the same function.
    assert finalfusion.embeddings.load_finalfusion is load_finalfusion
    assert finalfusion.io.load_finalfusion is load_finalfusion
    assert "load_finalfusion" in finalfusion.io.__all__


def test_every_vocab_declares_subword_rows() -> None:
    # The facade asks any vocabulary for an unknown word's subword rows: none without subwords.
    rows = SimpleVocab(["a"]).subword_rows("b")
    assert rows.dtype == np.int64
    assert rows.tolist() == []
    vocab = FastTextVocab(["ab"], FastTextIndexer(100, 3, 3))
    assert vocab.subword_rows("ab").tolist() == [9, 57]


def test_unknown_word_is_the_normalised_sum_of_its_subword_rows() -> None:
    vocab = FastTextVocab(["ab"], FastTextIndexer(100, 3, 3))
    matrix = np.arange(202, dtype=np.float32).reshape(101, 2)
    emb = Embeddings(NdArray(matrix), vocab)
    summed = matrix[vocab.subword_rows("cd")].sum(axis=0)
    vec, norm = emb.embedding_with_norm("cd")
    assert norm == pytest.approx(float(np.linalg.norm(summed)), rel=1e-6)
    np.testing.assert_allclose(vec, summed / np.linalg.norm(summed), rtol=1e-6)
    batch, found = emb.embedding_batch(["cd", "ab"])
    assert found.tolist() == [True, True]
    np.testing.assert_array_equal(batch[0], vec)


def test_word_checks_live_beside_the_vocabulary() -> None:
    from finalfusion.vocab import _words

    with pytest.raises(TypeError, match="a word must be a str, not bytes"):
        _emb().embedding(b"a")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"words\[1\] must be a str, not int: 3"):
        _emb().embedding_batch(["a", 3])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="not a single str"):
        _words.check_words("ab")


def test_gensim_conversion_without_gensim_names_the_gensim_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "gensim", None)  # import gensim now fails as if it were not installed
    monkeypatch.setitem(sys.modules, "gensim.models", None)
    with pytest.raises(MissingExtraError, match=r"converting to gensim needs the gensim package: pip install 'finalfusion-py\[gensim\]'") as err:
        _emb().to_gensim()
    assert (err.value.name, err.value.extra) == ("gensim", "gensim")
    with pytest.raises(ImportError, match=r"converting from gensim needs the gensim package"):
        Embeddings.from_gensim(object())
