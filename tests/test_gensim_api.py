"""gensim's KeyedVectors spellings, side by side with gensim on the same vectors, and from_gensim / to_gensim."""

from __future__ import annotations

import numpy as np
import pytest

from finalfusion import Embeddings, NdArray, SimpleVocab
from finalfusion.norms import Norms
from finalfusion.storage import QuantizedArray
from finalfusion.vocab import FastTextVocab, FinalfusionBucketVocab

gensim_models = pytest.importorskip("gensim.models", reason="gensim (the interop extra) is not installed")

#: gensim divides by the zero row's norm (NaN, RuntimeWarning); finalfusion keeps it zero.
pytestmark = pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")

WORDS = [f"w{i}" for i in range(60)] + ["Berlin", "berlin", "Paris", "paris"]
QUESTIONS = [": capitals", "w1 w2 w3 w4", "w5 w6 w7 w8", "berlin paris w9 w10", ": other", "w11 w12 w13 w14", "w1 w2 w3 nowhere"]


def keyed_vectors() -> object:
    rng = np.random.default_rng(17)
    kv = gensim_models.KeyedVectors(12)
    m = rng.standard_normal((len(WORDS), 12)).astype(np.float32)
    m[20] = 0  # a zero row: both libraries must not crash on it
    kv.add_vectors(WORDS, m)
    return kv


@pytest.fixture(params=[False, True], ids=["raw", "normalized"])
def pair(request: pytest.FixtureRequest) -> tuple[object, Embeddings]:
    kv = keyed_vectors()
    return kv, Embeddings.from_gensim(kv, normalize=request.param)


def test_attributes(pair: tuple[object, Embeddings]) -> None:
    kv, emb = pair
    assert emb.index_to_key == kv.index_to_key  # type: ignore[attr-defined]
    assert dict(emb.key_to_index) == kv.key_to_index  # type: ignore[attr-defined]
    assert emb.vector_size == kv.vector_size  # type: ignore[attr-defined]
    assert emb.vectors.shape == kv.vectors.shape  # type: ignore[attr-defined]
    ok = np.linalg.norm(kv.vectors, axis=1) > 0  # type: ignore[attr-defined]
    with np.errstate(invalid="ignore", divide="ignore"):
        np.testing.assert_allclose(emb.get_normed_vectors()[ok], kv.get_normed_vectors()[ok], atol=1e-6)  # type: ignore[attr-defined]
    assert not emb.get_normed_vectors()[~ok].any()  # gensim: NaN rows; here zero rows stay zero
    for key in ["w3", "Berlin", 5, "nowhere", 999]:
        assert emb.has_index_for(key) == kv.has_index_for(key), key  # type: ignore[attr-defined]
        assert emb.get_index(key, -7) == kv.get_index(key, -7), key  # type: ignore[attr-defined]
    with pytest.raises(KeyError):
        emb.get_index("nowhere")
    with pytest.raises(KeyError):
        kv.get_index("nowhere")  # type: ignore[attr-defined]


def test_vectors_and_items(pair: tuple[object, Embeddings]) -> None:
    kv, emb = pair
    np.testing.assert_allclose(emb.get_vector("w3", norm=True), kv.get_vector("w3", norm=True), atol=1e-6)  # type: ignore[attr-defined]
    # gensim's spellings give gensim's raw vectors: finalfusion's unit rows times the norms.
    np.testing.assert_allclose(emb.get_vector("w3"), kv.get_vector("w3"), rtol=1e-6, atol=1e-6)  # type: ignore[attr-defined]
    np.testing.assert_allclose(emb.vectors, kv.vectors, rtol=1e-6, atol=1e-6)  # type: ignore[attr-defined]
    if emb.norms is None:
        np.testing.assert_array_equal(emb.get_vector("w3"), kv.get_vector("w3"))  # type: ignore[attr-defined]
        np.testing.assert_array_equal(emb[["w3", "Paris"]], kv[["w3", "Paris"]])  # type: ignore[index]
        np.testing.assert_array_equal(emb.vectors, kv.vectors)  # type: ignore[attr-defined]
    else:  # finalfusion's own spellings keep the unit rows
        np.testing.assert_allclose(emb["w3"], kv.get_vector("w3", norm=True), atol=1e-6)  # type: ignore[attr-defined]
    for bad in (["w3", "nowhere"], "nowhere"):
        with pytest.raises(KeyError):
            emb[bad]
        with pytest.raises(KeyError):
            kv[bad]  # type: ignore[index]


def test_similarities(pair: tuple[object, Embeddings]) -> None:
    kv, emb = pair
    assert emb.similarity("w1", "w2") == pytest.approx(float(kv.similarity("w1", "w2")), abs=1e-6)  # type: ignore[attr-defined]
    assert emb.distance("w1", "Berlin") == pytest.approx(float(kv.distance("w1", "Berlin")), abs=1e-6)  # type: ignore[attr-defined]
    ws1, ws2 = ["w1", "w2"], ["w3", "w4", "w5"]
    expected = float(kv.n_similarity(ws1, ws2))  # type: ignore[attr-defined]
    assert emb.n_similarity(ws1, ws2) == pytest.approx(expected, abs=1e-5)
    with pytest.raises(ZeroDivisionError):
        emb.n_similarity([], ["w1"])
    ok = np.linalg.norm(kv.vectors, axis=1) > 0  # type: ignore[attr-defined]
    np.testing.assert_allclose(emb.distances("w7")[ok], kv.distances("w7")[ok], atol=1e-5)  # type: ignore[attr-defined]
    np.testing.assert_allclose(emb.distances("w7", ["w1", "w9"]), kv.distances("w7", ["w1", "w9"]), atol=1e-5)  # type: ignore[attr-defined]
    vec = kv.get_vector("w8") + 0.5  # type: ignore[attr-defined]
    np.testing.assert_allclose(emb.distances(vec, ["w1", "w9"]), kv.distances(vec, ["w1", "w9"]), atol=1e-5)  # type: ignore[attr-defined]
    assert emb.closer_than("w7", "w30") == kv.closer_than("w7", "w30")  # type: ignore[attr-defined]
    assert emb.rank("w7", "w30") == kv.rank("w7", "w30")  # type: ignore[attr-defined]
    assert emb.doesnt_match(["w1", "w2", "w3", "w4"]) == kv.doesnt_match(["w1", "w2", "w3", "w4"])  # type: ignore[attr-defined]


def same_ranking(got: list[tuple[str, float]], expected: list[tuple[str, float]]) -> None:
    assert [w for w, _ in got] == [w for w, _ in expected]
    np.testing.assert_allclose([s for _, s in got], [s for _, s in expected], atol=1e-5)


def test_most_similar_spellings(pair: tuple[object, Embeddings]) -> None:
    kv, emb = pair
    same_ranking(emb.similar_by_word("w5", topn=7), kv.similar_by_word("w5", topn=7))  # type: ignore[attr-defined]
    same_ranking(emb.similar_by_word("w5", topn=5, restrict_vocab=30), kv.similar_by_word("w5", topn=5, restrict_vocab=30))  # type: ignore[attr-defined]
    vec = kv.get_vector("w8") - kv.get_vector("w2")  # type: ignore[attr-defined]
    same_ranking(emb.similar_by_vector(vec, topn=6), kv.similar_by_vector(vec, topn=6))  # type: ignore[attr-defined]
    same_ranking(
        emb.most_similar(positive=["w1", "w2"], negative=["w3"], topn=5),
        kv.most_similar(positive=["w1", "w2"], negative=["w3"], topn=5),  # type: ignore[attr-defined]
    )


@pytest.mark.parametrize("case_insensitive", [True, False])
@pytest.mark.parametrize("dummy4unknown", [False, True])
def test_evaluate_word_analogies(pair: tuple[object, Embeddings], tmp_path: object, case_insensitive: bool, dummy4unknown: bool) -> None:
    kv, emb = pair
    path = tmp_path / "questions.txt"  # type: ignore[operator]
    path.write_text("\n".join(QUESTIONS) + "\n", encoding="utf-8")
    kw = {"case_insensitive": case_insensitive, "dummy4unknown": dummy4unknown, "restrict_vocab": 50}
    got = emb.evaluate_word_analogies(str(path), **kw)
    expected = kv.evaluate_word_analogies(str(path), **kw)  # type: ignore[attr-defined]
    assert got[1] == expected[1]
    assert got[0] == pytest.approx(expected[0])
    assert any(s["correct"] or s["incorrect"] for s in got[1])  # the comparison saw questions


def test_unknown_and_wrong_keys() -> None:
    emb = Embeddings.from_gensim(keyed_vectors())
    for key in (None, 123, b"abc", 1.5):
        with pytest.raises(TypeError, match=type(key).__name__):
            emb.embedding(key)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match=type(key).__name__):
            emb[key]  # type: ignore[index]
        with pytest.raises(TypeError, match=type(key).__name__):
            emb.embedding_with_norm(key)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="single str"):
        emb.embedding_batch("abc")
    with pytest.raises(TypeError, match="int"):
        emb[["w1", 3]]  # type: ignore[list-item]
    assert emb[[]].shape == (0, 12)


def fasttext_kv() -> object:
    rng = np.random.default_rng(3)
    words = ["haus", "häuser", "maus", "</s>", "auto"]
    kv = gensim_models.fasttext.FastTextKeyedVectors(8, 3, 5, 50)
    kv.add_vectors(words, np.zeros((len(words), 8), dtype=np.float32))
    kv.init_post_load(rng.standard_normal((len(words) + 50, 8)).astype(np.float32))
    return kv


def test_fasttext_from_gensim_embeds_unknown_words_like_gensim() -> None:
    kv = fasttext_kv()
    emb = Embeddings.from_gensim(kv)
    assert isinstance(emb.vocab, FastTextVocab)
    assert emb.vocab.subword_indexer.n_buckets == 50
    assert emb.vocab.min_n == 3
    assert emb.vocab.max_n == 5
    for word in ["haus", "häuschen", "mäuse", "xyz"]:
        np.testing.assert_allclose(emb.get_vector(word, norm=True), kv.get_vector(word, norm=True), atol=1e-6, err_msg=word)  # type: ignore[attr-defined]
    assert emb.similarity("häuschen", "maus") == pytest.approx(float(kv.similarity("häuschen", "maus")), abs=1e-6)  # type: ignore[attr-defined]
    assert emb.has_index_for("haus")
    assert not emb.has_index_for("häuschen")
    # `in` is finalfusion-python 0.7's: a vocabulary word (gensim's FastTextKeyedVectors says True for any word).
    assert "häuschen" not in emb
    assert emb.embedding("häuschen") is not None


def test_to_gensim_round_trips() -> None:
    kv = keyed_vectors()
    back = Embeddings.from_gensim(kv).to_gensim()
    assert type(back) is gensim_models.KeyedVectors
    assert back.index_to_key == kv.index_to_key  # type: ignore[attr-defined]
    np.testing.assert_allclose(back.vectors, kv.vectors, rtol=1e-6, atol=1e-6)  # type: ignore[attr-defined]
    ft = fasttext_kv()
    ft_back = Embeddings.from_gensim(ft).to_gensim()
    assert isinstance(ft_back, gensim_models.fasttext.FastTextKeyedVectors)
    assert (ft_back.bucket, ft_back.min_n, ft_back.max_n) == (50, 3, 5)
    np.testing.assert_allclose(ft_back.vectors, ft.vectors, rtol=1e-5, atol=1e-5)  # type: ignore[attr-defined]
    np.testing.assert_allclose(ft_back.vectors_vocab, ft.vectors_vocab, rtol=1e-4, atol=1e-4)  # type: ignore[attr-defined]
    np.testing.assert_allclose(ft_back.get_vector("häuschen"), ft.get_vector("häuschen"), rtol=1e-6, atol=1e-6)  # type: ignore[attr-defined]
    ft_back.adjust_vectors()  # gensim's own composition gives the same word vectors
    np.testing.assert_allclose(ft_back.vectors, ft.vectors, rtol=1e-4, atol=1e-5)  # type: ignore[attr-defined]


def test_to_gensim_other_vocabularies_and_quantized() -> None:
    from finalfusion.subword import FinalfusionHashIndexer

    vocab = FinalfusionBucketVocab(["ab", "cd"], FinalfusionHashIndexer(3, 3, 3))
    m = np.arange(20, dtype=np.float32).reshape(10, 2)
    kv = Embeddings(NdArray(m), vocab, norms=Norms([2.0, 1.0])).to_gensim()
    assert type(kv) is gensim_models.KeyedVectors
    np.testing.assert_array_equal(kv.vectors, [[0, 2], [2, 3]])
    small = Embeddings(NdArray(np.random.default_rng(0).standard_normal((64, 4)).astype(np.float32)), SimpleVocab([f"w{i}" for i in range(64)]))
    quantized = small.quantize(n_subquantizers=2, n_bits=4, seed=0)
    assert isinstance(quantized.storage, QuantizedArray)
    np.testing.assert_allclose(quantized.to_gensim().vectors, quantized.storage.rows(np.arange(64)), atol=1e-6)
    assert quantized.vectors.shape == (64, 4)
