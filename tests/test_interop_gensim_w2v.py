"""Cross-tool checks with gensim (the ``interop`` extra): word2vec binary and text in both directions."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from finalfusion import Embeddings, FormatError
from finalfusion.compat import load_text_dims, load_word2vec, load_word2vec_format, write_text_dims, write_word2vec
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


@pytest.mark.parametrize(
    ("name", "binary", "no_header"), [("rust-similarity.bin", True, False), ("rust-similarity.txt", False, False), ("rust-similarity.nodims", False, True)]
)
@pytest.mark.parametrize("limit", [None, 7])
@pytest.mark.parametrize("spelling", ["function", "classmethod"])
def test_load_word2vec_format_is_gensims(testdata: Path, name: str, binary: bool, no_header: bool, limit: int | None, spelling: str) -> None:
    kw = {"binary": binary, "no_header": no_header, "limit": limit}
    kv = gensim_models.KeyedVectors.load_word2vec_format(str(testdata / name), **kw)
    load = load_word2vec_format if spelling == "function" else Embeddings.load_word2vec_format  # gensim has both spellings
    emb = load(testdata / name, **kw)
    assert type(emb) is Embeddings
    assert emb.index_to_key == kv.index_to_key
    assert len(emb.index_to_key) == (limit or 41)
    assert emb.norms is None
    np.testing.assert_array_equal(emb.vectors, kv.vectors)
    for w in kv.index_to_key[:5]:
        np.testing.assert_array_equal(emb[w], kv[w])  # no norms: finalfusion's rows are gensim's vectors
        np.testing.assert_array_equal(emb.get_vector(w), kv.get_vector(w))
    got, expected = emb.similar_by_word("Berlin", topn=3), kv.similar_by_word("Berlin", topn=3)
    assert [w for w, _ in got] == [w for w, _ in expected]
    np.testing.assert_allclose([s for _, s in got], [s for _, s in expected], atol=1e-6)


def test_load_word2vec_format_arguments(testdata: Path, tmp_path: Path) -> None:
    path = testdata / "python-utf8-incomplete.bin"
    kv = gensim_models.KeyedVectors.load_word2vec_format(str(path), binary=True, unicode_errors="replace")
    emb = load_word2vec_format(path, binary=True, unicode_errors="replace")
    assert emb.index_to_key == kv.index_to_key
    assert any("\ufffd" in w for w in emb.index_to_key)
    with pytest.raises(FormatError):
        load_word2vec_format(path, binary=True)
    with pytest.raises(NotImplementedError, match="no_header"):
        load_word2vec_format(testdata / "rust-similarity.bin", binary=True, no_header=True)
    with pytest.raises(NotImplementedError, match="no_header"):
        gensim_models.KeyedVectors.load_word2vec_format(str(testdata / "rust-similarity.bin"), binary=True, no_header=True)
    for bad, match in (
        ({"fvocab": tmp_path / "v.txt"}, "counts"),
        ({"encoding": "latin1"}, "utf8"),
        ({"unicode_errors": "ignore"}, "replace"),
        ({"datatype": np.float16}, "float32"),
    ):
        with pytest.raises(ValueError, match=match):
            load_word2vec_format(testdata / "rust-similarity.txt", **bad)
