"""Cross-tool checks with gensim (the ``interop`` extra): word2vec binary and text in both directions."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from finalfusion.compat import load_text_dims, load_word2vec, write_text_dims, write_word2vec
from finalfusion.compat._build import embeddings_from

gensim_models = pytest.importorskip("gensim.models")

WORDS = ["Berlin", "Zürich", "東京", "naïve", "🙂", "Ελλάδα", "zero", "</s>"]


def sample(dims: int = 25) -> np.ndarray:
    rng = np.random.default_rng(dims)
    matrix = rng.standard_normal((len(WORDS), dims)).astype(np.float32)
    matrix[WORDS.index("zero")] = 0
    return matrix


@pytest.mark.parametrize("binary", [True, False])
def test_gensim_files_load_with_the_same_vectors(tmp_path: Path, binary: bool) -> None:
    matrix = sample()
    kv = gensim_models.KeyedVectors(vector_size=matrix.shape[1])
    kv.add_vectors(WORDS, matrix)
    path = tmp_path / ("g.bin" if binary else "g.txt")
    kv.save_word2vec_format(str(path), binary=binary)
    loader = load_word2vec if binary else load_text_dims
    emb = loader(path, normalize=False)
    assert emb.vocab.words == WORDS
    # gensim writes text with repr() of each float32: parsing back is exact.
    np.testing.assert_array_equal(emb.storage.matrix, matrix)
    normed = loader(path)
    np.testing.assert_allclose(normed.storage.matrix * normed.norms.norms[:, None], matrix, rtol=1e-6, atol=1e-7)
    np.testing.assert_array_equal(normed.storage.matrix[WORDS.index("zero")], 0)
    # gensim's limit and ours agree
    limited = gensim_models.KeyedVectors.load_word2vec_format(str(path), binary=binary, limit=3)
    assert loader(path, limit=3, normalize=False).vocab.words == list(limited.index_to_key)


@pytest.mark.parametrize("binary", [True, False])
def test_our_files_load_in_gensim(tmp_path: Path, binary: bool) -> None:
    matrix = sample(7)
    emb = embeddings_from(WORDS, matrix.copy(), normalize=True)
    path = tmp_path / ("ours.bin" if binary else "ours.txt")
    (write_word2vec if binary else write_text_dims)(path, emb)
    kv = gensim_models.KeyedVectors.load_word2vec_format(str(path), binary=binary)
    assert list(kv.index_to_key) == WORDS
    got = np.stack([kv[w] for w in WORDS])
    # Norms multiplied back: the original vectors, up to float rounding of normalise/unnormalise.
    np.testing.assert_allclose(got, matrix, rtol=1e-6, atol=1e-6)


def test_real_file_through_gensim(testdata: Path, tmp_path: Path) -> None:
    kv = gensim_models.KeyedVectors.load_word2vec_format(str(testdata / "rust-similarity.bin"), binary=True)
    emb = load_word2vec(testdata / "rust-similarity.bin", normalize=False)
    assert list(kv.index_to_key) == emb.vocab.words
    np.testing.assert_array_equal(kv.vectors, emb.storage.matrix)
    kv_text = gensim_models.KeyedVectors.load_word2vec_format(str(testdata / "rust-similarity.txt"), binary=False)
    np.testing.assert_array_equal(kv_text.vectors, load_text_dims(testdata / "rust-similarity.txt", normalize=False).storage.matrix)
