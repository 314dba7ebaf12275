"""Similarity and analogy queries: golden expectations, gensim agreement, quantized storage, edge cases."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import finalfusion
from conftest import GOLDEN_FILES
from finalfusion import Embeddings, SimilarityResult, _threads, load_finalfusion, similarity
from finalfusion.norms import Norms
from finalfusion.similarity import _base as sim_base
from finalfusion.similarity import _index as sim_index
from finalfusion.similarity import _quantized as sim_quantized
from finalfusion.similarity import _topk as sim_topk
from finalfusion.similarity import _vectors as sim_vectors
from finalfusion.storage import NdArray, QuantizedArray
from finalfusion.storage.quantized import PQ
from finalfusion.vocab import SimpleVocab


def pairs(res: list[SimilarityResult] | None) -> list[tuple[str, float]]:
    assert res is not None
    return [(r.word, r.similarity) for r in res]


def reference(matrix: np.ndarray, words: list[str], q: np.ndarray, k: int, skip: set[str], limit: int | None = None) -> list[tuple[str, float]]:
    """Brute force in float64: cosine with every row, sorted by (-score, word)."""
    m = np.asarray(matrix, dtype=np.float64)[: len(words)][:limit]
    norms = np.linalg.norm(m, axis=1)
    qn = q.astype(np.float64) / (np.linalg.norm(q) or 1.0)
    sims = np.divide(m @ qn, norms, out=np.zeros(len(m)), where=norms > 0)
    ranked = sorted((w for w in words[: len(m)] if w not in skip), key=lambda w: (-sims[words.index(w)], w))
    return [(w, float(sims[words.index(w)])) for w in ranked[:k]]


def assert_same(got: list[tuple[str, float]], exp: list[tuple[str, float]], atol: float = 1e-5) -> None:
    assert [w for w, _ in got] == [w for w, _ in exp]
    np.testing.assert_allclose([s for _, s in got], [s for _, s in exp], atol=atol, rtol=0)


# ------------------------------------------------------------------------------------
# golden expectations (finalfusion-rust unit tests, recorded by the oracle)
# ------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["python-similarity.fifu", "rust-similarity.fifu"])
def test_word_similarity_golden(testdata: Path, lookups: dict[str, Any], name: str) -> None:
    # rust-similarity.fifu has unnormalised rows (norms 13.75-19.81): cosine must still give the golden answer.
    emb = load_finalfusion(testdata / name)
    exp = [tuple(x) for x in lookups["python-similarity.fifu"]["word_similarity"]["Berlin"]]
    got = pairs(emb.word_similarity("Berlin", k=len(exp)))
    assert_same(got, exp, atol=1e-6)  # type: ignore[arg-type]


def test_analogy_golden(testdata: Path, lookups: dict[str, Any]) -> None:
    emb = load_finalfusion(testdata / "python-simple_vocab.fifu")
    exp = [tuple(x) for x in lookups["rust-analogy.bin"]["analogy"]["Paris:Frankreich::Berlin:?"]]
    assert_same(pairs(emb.analogy("Paris", "Frankreich", "Berlin", k=len(exp))), exp, atol=1e-6)  # type: ignore[arg-type]
    idx, sims = emb.analogy_batch([("Paris", "Frankreich", "Berlin")], k=len(exp))
    assert [emb.vocab.words[i] for i in idx[0]] == [w for w, _ in exp]
    np.testing.assert_allclose(sims[0], [s for _, s in exp], atol=1e-6)


def fasttext_from_gensim(path: Path) -> Embeddings:
    """0.7.1's reading of a fastText .bin, rebuilt from gensim's vectors: word rows normalised, raw buckets."""
    gensim_ft = pytest.importorskip("gensim.models.fasttext")
    from finalfusion.subword import FastTextIndexer
    from finalfusion.vocab import FastTextVocab

    wv = gensim_ft.load_facebook_vectors(str(path))
    words = np.asarray(wv.vectors, dtype=np.float32)
    norms = np.linalg.norm(words, axis=1)
    matrix = np.concatenate([words / norms[:, None], np.asarray(wv.vectors_ngrams, dtype=np.float32)])
    vocab = FastTextVocab(list(wv.index_to_key), FastTextIndexer(wv.bucket, wv.min_n, wv.max_n))
    return Embeddings(NdArray(matrix), vocab, Norms(norms))


def test_fasttext_golden_known_and_unknown_query(testdata: Path, lookups: dict[str, Any]) -> None:
    emb = fasttext_from_gensim(testdata / "rust-fasttext.bin")
    golden = lookups["rust-fasttext.bin"]["word_similarity"]
    for query in ("über", "unknown"):  # "unknown" is not a word: embedded through its n-grams
        exp = [tuple(x) for x in golden[query]]
        assert_same(pairs(emb.word_similarity(query, k=len(exp))), exp, atol=1e-5)  # type: ignore[arg-type]
    assert "unknown" not in emb


# ------------------------------------------------------------------------------------
# gensim agreement, run live
# ------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def gensim_kv(testdata: Path) -> Any:
    kv_mod = pytest.importorskip("gensim.models.keyedvectors")
    return {name: kv_mod.KeyedVectors.load_word2vec_format(str(testdata / name), binary=True) for name in ("rust-similarity.bin", "rust-analogy.bin")}


@pytest.mark.parametrize(("w2v", "fifu"), [("rust-similarity.bin", "python-similarity.fifu"), ("rust-analogy.bin", "python-simple_vocab.fifu")])
def test_most_similar_matches_gensim(testdata: Path, gensim_kv: Any, w2v: str, fifu: str) -> None:
    kv = gensim_kv[w2v]
    ours_file = load_finalfusion(testdata / fifu)
    # the same raw (unnormalised) vectors, handed over from gensim
    ours_raw = Embeddings(NdArray(np.asarray(kv.vectors)), SimpleVocab(list(kv.index_to_key)))
    assert ours_file.vocab.words == list(kv.index_to_key)
    for emb in (ours_file, ours_raw):
        for word in kv.index_to_key:
            exp = kv.most_similar(word, topn=10)
            assert_same(emb.most_similar(word, topn=10), exp)
            assert_same(pairs(emb.word_similarity(word, k=10)), exp)
        for restrict in (5, 20):
            word = kv.index_to_key[3]
            assert_same(emb.most_similar(word, topn=4, restrict_vocab=restrict), kv.most_similar(word, topn=4, restrict_vocab=restrict))
        np.testing.assert_allclose(emb.most_similar(kv.index_to_key[0], topn=None), kv.most_similar(kv.index_to_key[0], topn=None), atol=1e-5)


def test_analogies_match_gensim(testdata: Path, gensim_kv: Any) -> None:
    kv = gensim_kv["rust-analogy.bin"]
    emb = load_finalfusion(testdata / "python-simple_vocab.fifu")
    words = kv.index_to_key
    rng = np.random.default_rng(3)
    triples = [tuple(words[i] for i in rng.choice(len(words), 3, replace=False)) for _ in range(40)]
    idx, sims = emb.analogy_batch(triples, k=5)
    for t, row_i, row_s in zip(triples, idx, sims, strict=True):
        a, b, c = t
        exp = kv.most_similar(positive=[b, c], negative=[a], topn=5)
        assert_same(pairs(emb.analogy(a, b, c, k=5)), exp)
        assert_same(emb.most_similar(positive=[b, c], negative=[a], topn=5), exp)
        assert_same([(words[i], float(s)) for i, s in zip(row_i, row_s, strict=True)], exp)
    # vectors and weights, as gensim accepts them
    v = kv["Berlin"] * 3
    assert_same(emb.most_similar(positive=[v], topn=3), kv.most_similar(positive=[v], topn=3))
    exp = kv.most_similar(positive=[("Berlin", 2.0), "Paris"], negative=[("Frankreich", -0.5)], topn=3)
    assert_same(emb.most_similar(positive=[("Berlin", 2.0), "Paris"], negative=[("Frankreich", -0.5)], topn=3), exp)


def test_most_similar_errors_like_gensim(testdata: Path) -> None:
    emb = load_finalfusion(testdata / "python-similarity.fifu")
    with pytest.raises(KeyError, match="not present"):
        emb.most_similar("nicht-da")
    with pytest.raises(ValueError, match="no input"):
        emb.most_similar()
    assert emb.most_similar("Berlin", topn=0) == []


# ------------------------------------------------------------------------------------
# quantized storage: ADC vs reconstruct-then-scan
# ------------------------------------------------------------------------------------
def dense_copy(emb: Embeddings) -> Embeddings:
    return Embeddings(NdArray(np.asarray(emb.storage, dtype=np.float32)), emb.vocab)


@pytest.mark.parametrize("name", ["python-pq.fifu", "rust-quantized.fifu"])
@pytest.mark.parametrize("mmap", [False, True])
def test_quantized_files_adc_agrees_with_reconstruction(testdata: Path, name: str, mmap: bool) -> None:
    emb = load_finalfusion(testdata / name, mmap=mmap)
    assert isinstance(emb.storage, QuantizedArray)
    dense = dense_copy(emb)
    words = emb.vocab.words
    for word in words:
        exp = pairs(dense.word_similarity(word, k=len(words)))
        assert_same(pairs(emb.word_similarity(word, k=len(words))), exp)
        assert_same(pairs(emb.word_similarity(word, k=7, rerank=20)), exp[:7])
    idx, sims = emb.word_similarity_batch(words, k=5)
    didx, dsims = dense.word_similarity_batch(words, k=5)
    np.testing.assert_array_equal(idx, didx)
    np.testing.assert_allclose(sims, dsims, atol=1e-5)


def test_quantized_neighbours_close_to_unquantized(testdata: Path, lookups: dict[str, Any]) -> None:
    # python-pq.fifu was quantized from python-similarity.fifu: the best neighbour survives quantization.
    emb = load_finalfusion(testdata / "python-pq.fifu")
    exp = lookups["python-similarity.fifu"]["word_similarity"]["Berlin"]
    got = pairs(emb.word_similarity("Berlin", k=3))
    assert got[0][0] == exp[0][0]
    assert abs(got[0][1] - exp[0][1]) < 0.01


def synthetic_pq(rng: np.random.Generator, n: int, m: int, ds: int, k: int, projection: bool, norms: bool) -> QuantizedArray:
    d = m * ds
    proj = rng.standard_normal((d, d)).astype(np.float32) if projection else None
    nrm = rng.uniform(-2, 3, n).astype(np.float32) if norms else None
    if nrm is not None:
        nrm[3] = 0.0
    return QuantizedArray(PQ(rng.standard_normal((m, k, ds)).astype(np.float32), proj), rng.integers(0, k, (n, m), dtype=np.uint8), nrm)


@pytest.mark.parametrize(
    ("m", "ds", "k", "projection", "norms"),
    [(5, 3, 7, True, True), (4, 2, 256, False, True), (6, 1, 256, True, False), (1, 4, 3, False, False)],
)
def test_adc_synthetic_projection_odd_subquantizers_negative_norms(m: int, ds: int, k: int, projection: bool, norms: bool) -> None:
    rng = np.random.default_rng(m * 100 + k)
    n = 60
    storage = synthetic_pq(rng, n, m, ds, k, projection, norms)
    words = [f"w{i:02d}" for i in range(n)]
    emb = Embeddings(storage, SimpleVocab(words))
    full = np.asarray(storage)
    for _ in range(5):
        q = rng.standard_normal(m * ds).astype(np.float32)
        exp = reference(full, words, q, n, set())
        got = pairs(emb.embedding_similarity(q, k=n))
        assert [w for w, _ in got][:10] == [w for w, _ in exp][:10]
        np.testing.assert_allclose([s for _, s in got], [s for _, s in exp], atol=1e-5)
        assert dict(got)["w03"] == 0.0 or not norms  # zero norm: zero row, cosine 0
    # batches: fewer than ADC_BATCH_RECONSTRUCT queries use ADC, more reconstruct row blocks
    for nq in (3, sim_quantized.ADC_BATCH_RECONSTRUCT + 2):
        qs = rng.standard_normal((nq, m * ds)).astype(np.float32)
        idx, sims = emb.embedding_similarity_batch(qs, k=10)
        for row in range(nq):
            exp = reference(full, words, qs[row], 10, set())
            np.testing.assert_allclose(sims[row], [s for _, s in exp], atol=1e-5)
            assert [words[i] for i in idx[row]][:5] == [w for w, _ in exp][:5]


def test_tiny_quantized_golden_file_with_projection() -> None:
    emb = load_finalfusion(GOLDEN_FILES / "tiny_quantized.fifu")
    assert emb.storage.quantizer.projection is not None  # type: ignore[attr-defined]
    full = np.asarray(emb.storage)
    words = emb.vocab.words
    for w in words:
        assert_same(pairs(emb.word_similarity(w, k=5)), reference(full, words, full[words.index(w)], 5, {w}))


# ------------------------------------------------------------------------------------
# k, vocabularies, unknown words
# ------------------------------------------------------------------------------------
@pytest.fixture
def sim_emb(testdata: Path) -> Embeddings:
    return load_finalfusion(testdata / "python-similarity.fifu")


def test_k_edge_cases(sim_emb: Embeddings) -> None:
    n = len(sim_emb)
    assert sim_emb.word_similarity("Berlin", k=0) == []
    assert len(pairs(sim_emb.word_similarity("Berlin", k=1))) == 1
    whole = pairs(sim_emb.word_similarity("Berlin", k=n))
    assert len(whole) == n - 1
    assert "Berlin" not in dict(whole)
    assert pairs(sim_emb.word_similarity("Berlin", k=10 * n)) == whole
    assert pairs(sim_emb.word_similarity("Berlin", k=n - 1)) == whole
    assert len(sim_emb.embedding_similarity(sim_emb["Berlin"], k=n + 5)) == n
    for bad in (-1, -100):
        with pytest.raises(ValueError, match="k must be >= 0"):
            sim_emb.word_similarity("Berlin", k=bad)
        with pytest.raises(ValueError, match="k must be >= 0"):
            sim_emb.word_similarity_batch(["Berlin"], k=bad)
    with pytest.raises(TypeError):
        sim_emb.word_similarity("Berlin", k=2.5)  # type: ignore[arg-type]
    idx, sims = sim_emb.word_similarity_batch(["Berlin", "Potsdam"], k=10 * n)
    assert idx.shape == (2, n)
    assert (idx[:, -1] == -1).all()
    assert np.isnan(sims[:, -1]).all()
    assert [sim_emb.vocab.words[i] for i in idx[0, :-1]] == [w for w, _ in whole]
    assert sim_emb.word_similarity_batch(["Berlin"], k=0)[0].shape == (1, 0)


def test_whole_ranking_matches_brute_force(sim_emb: Embeddings) -> None:
    words = sim_emb.vocab.words
    m = sim_emb.storage.matrix  # type: ignore[attr-defined]
    for w in words:
        assert_same(pairs(sim_emb.word_similarity(w, k=len(words))), reference(m, words, m[words.index(w)], len(words), {w}))


def test_unknown_queries(sim_emb: Embeddings, testdata: Path) -> None:
    assert sim_emb.word_similarity("gibt-es-nicht") is None
    assert sim_emb.analogy("Berlin", "gibt-es-nicht", "Potsdam") is None
    idx, sims = sim_emb.analogy_batch([("Berlin", "gibt-es-nicht", "Potsdam"), ("Berlin", "Potsdam", "Hamburg")], k=2)
    assert (idx[0] == -1).all()
    assert np.isnan(sims[0]).all()
    assert (idx[1] >= 0).all()
    with pytest.raises(ValueError, match="three words"):
        sim_emb.analogy_batch([("Berlin", "Potsdam")])
    assert sim_emb.word_similarity_batch([], k=3)[0].shape == (0, 3)
    assert sim_emb.analogy_batch([], k=3)[1].shape == (0, 3)
    # unknown words in skip are ignored, as in 0.7.1
    assert pairs(sim_emb.word_similarity("Berlin", k=3, skip={"Berlin", "nope"})) == pairs(sim_emb.word_similarity("Berlin", k=3))
    # subword vocabulary: an unknown word is embedded through its n-grams and queried
    with pytest.warns(finalfusion.LegacyFormatWarning):
        bucket = load_finalfusion(testdata / "python-ff_buckets.fifu")
    q = bucket.embedding("two")
    got = pairs(bucket.word_similarity("two", k=5))
    assert got == pairs(bucket.embedding_similarity(q, k=5))
    assert_same(got, reference(bucket.storage.matrix, bucket.vocab.words, q, 5, set()))  # type: ignore[attr-defined]
    assert bucket.word_similarity("", k=5) is None  # no n-grams, no embedding


def test_empty_vocabulary() -> None:
    emb = Embeddings(NdArray(np.zeros((0, 4), dtype=np.float32)), SimpleVocab([]))
    assert emb.word_similarity("a") is None
    assert emb.embedding_similarity(np.ones(4), k=3) == []
    assert emb.most_similar(positive=[np.ones(4)], topn=3) == []
    idx, sims = emb.embedding_similarity_batch(np.ones((2, 4)), k=3)
    assert idx.shape == (2, 0)
    assert sims.shape == (2, 0)
    with pytest.raises(ValueError, match="shape"):
        emb.embedding_similarity(np.ones(3))


def test_bad_query_vectors(sim_emb: Embeddings) -> None:
    with pytest.raises(ValueError, match="NaN"):
        sim_emb.embedding_similarity(np.full(100, np.nan))
    with pytest.raises(ValueError, match="shape"):
        sim_emb.embedding_similarity_batch(np.ones((2, 99)))
    # a zero vector has no direction: every word scores 0, in word order
    got = pairs(sim_emb.embedding_similarity(np.zeros(100), k=3))
    assert got == [(w, 0.0) for w in sorted(sim_emb.vocab.words)[:3]]
    idx, _ = sim_emb.embedding_similarity_batch(np.zeros((2, 100)), k=3)
    assert [[sim_emb.vocab.words[i] for i in row] for row in idx] == [[w for w, _ in got]] * 2


# ------------------------------------------------------------------------------------
# 0.7.1 compatibility of arguments and results
# ------------------------------------------------------------------------------------
def test_skip_and_mask_semantics(testdata: Path) -> None:
    emb = load_finalfusion(testdata / "python-simple_vocab.fifu")
    default = pairs(emb.analogy("Paris", "Frankreich", "Berlin", k=5))
    assert not {"Paris", "Frankreich", "Berlin"} & {w for w, _ in default}
    allowed = pairs(emb.analogy("Paris", "Frankreich", "Berlin", k=len(emb), skip=set()))
    assert len(allowed) == len(emb)  # 0.7.1: skip=set() allows the query words
    assert [p for p in allowed if p[0] not in ("Paris", "Frankreich", "Berlin")][:5] == default
    masked = pairs(emb.analogy("Paris", "Frankreich", "Berlin", k=5, mask=(True, True, False)))
    assert masked == pairs(emb.analogy("Paris", "Frankreich", "Berlin", k=5, skip={"Paris", "Frankreich"}))
    assert "Paris" not in dict(masked)
    assert "Berlin" in dict(pairs(emb.analogy("Paris", "Frankreich", "Berlin", k=43, mask=(True, True, False))))
    with pytest.raises(ValueError, match="three"):
        emb.analogy("Paris", "Frankreich", "Berlin", mask=(True,))
    # embedding_similarity does not exclude anything by default; word_similarity excludes the query
    assert pairs(emb.embedding_similarity(emb["Berlin"], k=1))[0][0] == "Berlin"
    assert pairs(emb.word_similarity("Berlin", k=2, skip=set()))[0][0] == "Berlin"
    arbitrary = pairs(emb.word_similarity("Berlin", k=3, skip={"Berlin", "Deutschland"}))
    assert "Deutschland" not in dict(arbitrary)


def test_similarity_result_compat() -> None:
    a, b = SimilarityResult("a", 0.5), SimilarityResult("b", 0.5)
    assert a == b
    assert SimilarityResult("c", 0.1) < a
    assert finalfusion.embeddings.SimilarityResult is SimilarityResult


# ------------------------------------------------------------------------------------
# ties, normalisation, blocks, threads
# ------------------------------------------------------------------------------------
def test_ties_break_by_word_order() -> None:
    rng = np.random.default_rng(0)
    base = rng.standard_normal((4, 8)).astype(np.float32)
    base /= np.linalg.norm(base, axis=1, keepdims=True)
    # 12 rows: every base vector three times, under words that are not in sorted order
    words = ["zeta", "Äpfel", "alpha", "beta", "ÿ", "Beta", "m", "a", "ß", "z", "B", "ä"]
    matrix = np.repeat(base, 3, axis=0)
    emb = Embeddings(NdArray(matrix), SimpleVocab(words))
    for qi in range(4):
        q = base[qi]
        got = pairs(emb.embedding_similarity(q, k=len(words)))
        exp = reference(matrix, words, q, len(words), set())
        assert [w for w, _ in got] == [w for w, _ in exp]
        for k in range(1, len(words) + 1):  # ties straddling the cut keep the first words in code-point order
            assert pairs(emb.embedding_similarity(q, k=k)) == got[:k]
        idx, _ = emb.embedding_similarity_batch(np.stack([q, q]), k=4)
        assert [words[i] for i in idx[1]] == [w for w, _ in got[:4]]


def test_unnormalised_zero_and_nan_rows() -> None:
    rng = np.random.default_rng(5)
    m = (rng.standard_normal((30, 6)) * rng.uniform(0.1, 10, (30, 1))).astype(np.float32)
    m[4] = 0.0
    m[7, 2] = np.nan
    m[9, 0] = np.inf
    words = [f"w{i}" for i in range(30)]
    emb = Embeddings(NdArray(m), SimpleVocab(words))
    clean = m.copy()
    clean[[7, 9]] = 0.0
    for qi in (0, 1, 2):
        got = pairs(emb.word_similarity(words[qi], k=30))
        assert "w7" not in dict(got)
        assert "w9" not in dict(got)
        assert dict(got)["w4"] == 0.0
        exp = [p for p in reference(clean, words, m[qi], 30, {words[qi]}) if p[0] not in ("w7", "w9")]
        assert_same(got, exp)
        idx, _ = emb.word_similarity_batch([words[qi]], k=30)
        assert [words[i] for i in idx[0] if i >= 0] == [w for w, _ in exp]


def test_small_blocks_give_identical_results(sim_emb: Embeddings, testdata: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    words = sim_emb.vocab.words
    single = [pairs(sim_emb.word_similarity(w, k=7)) for w in words]
    batch = sim_emb.word_similarity_batch(words, k=7)
    fresh = load_finalfusion(testdata / "python-similarity.fifu")
    monkeypatch.setattr(sim_base.QueryIndex, "block_rows", lambda self, q: 3)  # 14 blocks of 3 rows
    for w, exp in zip(words, single, strict=True):
        assert_same(pairs(fresh.word_similarity(w, k=7)), exp, atol=1e-6)  # BLAS rounding may differ per block size
    idx, sims = fresh.word_similarity_batch(words, k=7)
    np.testing.assert_array_equal(idx, batch[0])
    np.testing.assert_allclose(sims, batch[1], atol=1e-6)
    for i in range(len(words)):
        assert [words[j] for j in idx[i]] == [x for x, _ in single[i]]


def test_mmap_matches_eager(testdata: Path) -> None:
    eager = load_finalfusion(testdata / "python-similarity.fifu")
    mapped = load_finalfusion(testdata / "python-similarity.fifu", mmap=True)
    for w in eager.vocab.words:
        assert pairs(mapped.word_similarity(w, k=5)) == pairs(eager.word_similarity(w, k=5))


def test_concurrent_first_queries(testdata: Path) -> None:
    emb = load_finalfusion(testdata / "rust-similarity.fifu")  # unnormalised: the row norms are computed lazily
    expected = pairs(load_finalfusion(testdata / "rust-similarity.fifu").word_similarity("Berlin", k=10))
    out: list[Any] = []
    threads = [threading.Thread(target=lambda: out.append(pairs(emb.word_similarity("Berlin", k=10)))) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert out == [expected] * 8


def test_clear_cache_after_in_place_change() -> None:
    m = np.eye(3, dtype=np.float32)
    emb = Embeddings(NdArray(m), SimpleVocab(["a", "b", "c"]))
    assert pairs(emb.embedding_similarity([1, 1, 0], k=1))[0][0] == "a"
    m[1] *= 10  # not unit any more; the cached row facts are stale until cleared
    similarity.clear_cache(emb)
    got = pairs(emb.embedding_similarity([1, 1, 0], k=2))
    assert [w for w, _ in got] == ["a", "b"]
    assert got[0][1] == pytest.approx(got[1][1])


def test_quantized_codes_too_large_to_cache_are_laid_out_per_block(testdata: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    emb = load_finalfusion(testdata / "rust-quantized.fifu", mmap=True)
    expected = [pairs(emb.word_similarity(w, k=6)) for w in emb.vocab.words]
    fresh = load_finalfusion(testdata / "rust-quantized.fifu", mmap=True)
    monkeypatch.setattr(sim_quantized, "ADC_CACHE_BYTES", 0)  # no cached column-major copy
    monkeypatch.setattr(sim_base.QueryIndex, "block_rows", lambda self, q: 5)
    for w, exp in zip(fresh.vocab.words, expected, strict=True):
        assert_same(pairs(fresh.word_similarity(w, k=6)), exp, atol=1e-6)
    assert sim_index.query_index(fresh)._codes_t is None


def test_embeddings_stay_picklable_after_queries(sim_emb: Embeddings) -> None:
    import copy
    import pickle

    before = pairs(sim_emb.word_similarity("Berlin", k=5))
    clone = pickle.loads(pickle.dumps(sim_emb))
    assert pairs(clone.word_similarity("Berlin", k=5)) == before
    shallow = copy.copy(sim_emb)
    assert sim_index.query_index(shallow) is not sim_index.query_index(sim_emb)


@pytest.mark.parametrize("threads", [2, 3])
def test_adc_split_over_threads_gives_identical_scores(monkeypatch: pytest.MonkeyPatch, threads: int) -> None:
    """Splitting an ADC scan over threads must not change a single bit of any score."""
    rng = np.random.default_rng(threads)
    n, m, ds = 1000, 7, 2  # odd subquantizer count: the unpaired last code too
    emb = Embeddings(synthetic_pq(rng, n, m, ds, 256, True, True), SimpleVocab([f"w{i}" for i in range(n)]))
    qs = rng.standard_normal((4, m * ds)).astype(np.float32)
    monkeypatch.setattr(_threads, "_setting", 1)
    serial = [emb.embedding_similarity(q, k=n) for q in qs]
    index = sim_index.query_index(emb)
    serial_raw = index.adc_scores(qs[0] / np.linalg.norm(qs[0]), 0, n)
    monkeypatch.setattr(_threads, "_setting", threads)
    monkeypatch.setattr(_threads, "THREAD_ROWS", 100)
    np.testing.assert_array_equal(index.adc_scores(qs[0] / np.linalg.norm(qs[0]), 0, n), serial_raw)
    assert [emb.embedding_similarity(q, k=n) for q in qs] == serial


# ------------------------------------------------------------------------------------
# long scans: block pre-selection, threshold pruning, threads (exact dyadic scores, many ties)
# ------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def tied_emb() -> Embeddings:
    """20,000 unit rows drawn from 24 directions whose dot products with the test queries are exact in float32.

    Every score is one of a handful of values, so nearly every cut is a tie
    broken by word; the words are shuffled so that code-point order differs
    from row order.
    """
    rng = np.random.default_rng(11)
    dirs = np.concatenate([np.eye(4), -np.eye(4), 0.5 * np.array(np.meshgrid(*[[-1, 1]] * 4)).reshape(4, -1).T]).astype(np.float32)
    matrix = dirs[rng.integers(0, len(dirs), 20_000)]
    words = [f"w{i:05d}" for i in rng.permutation(20_000)]
    return Embeddings(NdArray(matrix), SimpleVocab(words))


TIED_QUERIES = np.array([[0.5, 0.5, 0.5, 0.5], [1, 0, 0, 0], [0.5, -0.5, 0.5, -0.5], [0, 0, 0, -1]], dtype=np.float32)


def tied_reference(emb: Embeddings, q: np.ndarray, k: int, skip: set[int] = frozenset()) -> list[int]:  # type: ignore[assignment]
    """Row ids of the top ``k`` by (-score, word), brute force."""
    m = np.asarray(emb.storage.matrix, dtype=np.float64)
    sims = m @ q.astype(np.float64)
    rank = np.argsort(np.argsort(np.asarray(emb.vocab.words)))
    order = [i for i in np.lexsort((rank, -sims)).tolist() if i not in skip]
    return order[:k]


@pytest.mark.parametrize("k", [0, 1, 3, 4, 7, 20_000, 30_000])
def test_long_scans_with_ties_match_brute_force(tied_emb: Embeddings, monkeypatch: pytest.MonkeyPatch, k: int) -> None:
    """Block-maximum pre-selection (single), pruning and merging (batches), serial and threaded: the brute-force order exactly."""
    words = tied_emb.vocab.words
    row = tied_emb.vocab.word_index
    exp = [tied_reference(tied_emb, q, k) for q in TIED_QUERIES]
    own = [10, 776, 777, 19_999]  # query words at and around the patched block boundaries below
    exp_own = [tied_reference(tied_emb, tied_emb.storage.matrix[i], k, {i}) for i in own]
    for threads, block in ((1, None), (3, 777)):
        monkeypatch.setattr(_threads, "_setting", threads)
        monkeypatch.setattr(_threads, "THREAD_ROWS", 1000)
        if block:
            monkeypatch.setattr(sim_base.QueryIndex, "block_rows", lambda self, q, b=block: b if q > 1 else 5000)
        single = [[row[r.word] for r in tied_emb.embedding_similarity(q, k=k)] for q in TIED_QUERIES]
        assert single == exp
        ids, sims = tied_emb.embedding_similarity_batch(TIED_QUERIES, k=k)
        assert [[i for i in row if i >= 0] for row in ids.tolist()] == exp
        assert ids.shape == (4, min(k, 20_000))
        np.testing.assert_array_equal(np.isnan(sims), ids < 0)
        ids, _ = tied_emb.word_similarity_batch([words[i] for i in own], k=k)
        assert [[i for i in row if i >= 0] for row in ids.tolist()] == exp_own
        assert [[row[r.word] for r in tied_emb.word_similarity(words[i], k=k) or []] for i in own] == exp_own


def test_top_k_block_preselection_with_excluded_rows(tied_emb: Embeddings) -> None:
    """Fewer finite scores than k in most blocks: the pre-selection must fall back, never lose a row."""
    index = sim_index.query_index(tied_emb)
    scores = np.full(19_000, -np.inf, dtype=np.float32)
    scores[[5, 4096, 15_000]] = [0.5, 0.25, 0.5]
    s, i = sim_topk.top_k(scores, 0, 4, index)  # only three finite: all of them, no padding
    by_word = sorted([5, 15_000], key=index.rank.__getitem__)
    assert i.tolist() == [*by_word, 4096]
    assert s.tolist() == [0.5, 0.5, 0.25]
    scores[:] = 0.0
    scores[[7, 9000, 18_999]] = 1.0
    s, i = sim_topk.top_k(scores, 100, 5, index)  # ids offset by 100
    order = np.lexsort((index.rank[100:19_100], -scores.astype(np.float64)))[:5] + 100
    assert i.tolist() == order.tolist()
    assert sorted(i[:3].tolist()) == [107, 9100, 19_099]
    assert s.tolist() == [1.0, 1.0, 1.0, 0.0, 0.0]


def test_few_scores_rank_as_numpy_ranks_many(tied_emb: Embeddings, monkeypatch: pytest.MonkeyPatch) -> None:
    """One query's few candidates go through Python's sort: the same scores and ids as the numpy path, ties by word."""
    index = sim_index.query_index(tied_emb)
    rng = np.random.default_rng(3)
    cases = []
    for _ in range(300):
        m = int(rng.integers(1, sim_topk.FEW_SCORES + 1))
        scores = rng.choice(np.array([0.5, 0.25, 0.0, -0.0, -0.25, -np.inf], np.float32), m)  # nearly every cut a tie
        ids = rng.choice(20_000, m, replace=False).astype(np.int64)
        cases.append((scores, ids if rng.random() < 0.5 else int(rng.integers(0, 20_000 - m)), int(rng.integers(1, m + 3))))
    few = [sim_topk.top_k(s, i, k, index) for s, i, k in cases]
    monkeypatch.setattr(sim_topk, "FEW_SCORES", 0)  # every call through numpy
    for (s, i, k), (fs, fi) in zip(cases, few, strict=True):
        ns, ni = sim_topk.top_k(s, i, k, index)
        assert fi.tolist() == ni.tolist()
        assert fs.tobytes() == ns.tobytes()
        assert fs.dtype == ns.dtype == np.float32
        assert fi.dtype == ni.dtype == np.int64
    nan = np.array([0.5, np.nan, 0.25], np.float32)
    assert sim_topk._top_few(nan, np.arange(3), 2, index) is None  # a NaN: numpy's order decides


def test_few_candidates_are_scored_as_many_are(tied_emb: Embeddings, monkeypatch: pytest.MonkeyPatch) -> None:
    """DenseIndex.dots_at places one query's few candidates in their row groups with Python ints: the same bits as the numpy path."""
    from finalfusion.similarity import _dense

    index = sim_index.query_index(tied_emb)
    monkeypatch.setattr(sim_base.QueryIndex, "block_rows", lambda self, q: 777 if q <= 1 else 256)  # many cut groups
    rng = np.random.default_rng(5)
    q = sim_vectors.unit_query(rng.standard_normal(4), 4)
    cases = [rng.choice(20_000, int(rng.integers(1, _dense.FEW_IDS + 1)), replace=False).astype(np.int64) for _ in range(200)]
    cases.append(np.array([776, 777, 1553, 19_999, 0, 7], dtype=np.int64))  # block ends and the matrix's end
    few = [index.dots_at(q, ids) for ids in cases]
    monkeypatch.setattr(_dense, "FEW_IDS", 0)
    for ids, got in zip(cases, few, strict=True):
        assert got.tobytes() == index.dots_at(q, ids).tobytes()


def test_few_proposed_rows_are_filtered_as_many_are(monkeypatch: pytest.MonkeyPatch) -> None:
    """An index's proposals for one query (out of range, repeated, excluded, bad rows) filtered with Python sets: the same rows."""
    from finalfusion.similarity import _approx

    matrix = np.random.default_rng(2).standard_normal((300, 4)).astype(np.float32)
    matrix[[3, 150, 299]] = np.nan
    index = sim_index.query_index(Embeddings(NdArray(matrix), SimpleVocab([f"w{i}" for i in range(300)])))
    rng = np.random.default_rng(4)
    cases = [(rng.integers(-3, 303, int(rng.integers(0, 40))), rng.choice(300, int(rng.integers(0, 4)), replace=False).astype(np.int64)) for _ in range(300)]
    few = [_approx._candidates(index, found, exclude) for found, exclude in cases]
    monkeypatch.setattr(_approx, "FEW_CANDIDATES", -1)
    for (found, exclude), got in zip(cases, few, strict=True):
        assert got.dtype == np.int64
        assert sorted(got.tolist()) == sorted(_approx._candidates(index, found, exclude).tolist())
        assert len(set(got.tolist())) == len(got)


def test_threaded_batches_are_identical_to_serial(sim_emb: Embeddings, monkeypatch: pytest.MonkeyPatch) -> None:
    """Row blocks split over threads: the same scores bit for bit and the same ids as one thread."""
    words = sim_emb.vocab.words
    monkeypatch.setattr(sim_base.QueryIndex, "block_rows", lambda self, q: 5 if q > 1 else 1 << 20)
    monkeypatch.setattr(_threads, "_setting", 1)
    serial = sim_emb.word_similarity_batch(words, k=9)
    serial_single = [pairs(sim_emb.word_similarity(w, k=9)) for w in words]
    monkeypatch.setattr(_threads, "_setting", 4)
    monkeypatch.setattr(_threads, "THREAD_ROWS", 7)
    threaded = sim_emb.word_similarity_batch(words, k=9)
    np.testing.assert_array_equal(threaded[0], serial[0])
    np.testing.assert_array_equal(threaded[1], serial[1])
    assert [pairs(sim_emb.word_similarity(w, k=9)) for w in words] == serial_single


def test_scan_threads_follow_the_blas_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    """Dense (BLAS) scans are split over threads only when BLAS is pinned to one thread; ADC always; THREADS overrides."""
    cores = _threads.DEFAULT_THREADS
    for var in _threads.BLAS_THREAD_VARS:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(_threads, "_setting", None)
    assert _threads.threads_for(blas=True) == 1  # unset: BLAS uses every core itself
    assert _threads.threads_for(blas=False) == cores
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    assert _threads.threads_for(blas=True) == cores
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "2")  # read before OMP_NUM_THREADS, as OpenBLAS does
    assert _threads.threads_for(blas=True) == 1
    monkeypatch.setattr(_threads, "_setting", 3)
    assert _threads.threads_for(blas=True) == 3
    assert _threads.threads_for(blas=False) == 3


def dense_split_check(exact: bool) -> None:
    """Scores and neighbours of a dense scan split into three row ranges vs one BLAS call."""
    rng = np.random.default_rng(4)
    m = rng.standard_normal((20_003, 37)).astype(np.float32)  # odd sizes: kernel tails at the range ends
    emb = Embeddings(NdArray(m), SimpleVocab([f"w{i}" for i in range(len(m))]))
    index = sim_index.query_index(emb)
    q = sim_vectors.unit_query(rng.standard_normal(37), 37)
    saved = _threads._setting, _threads.THREAD_ROWS
    try:
        _threads._setting = 1
        serial = index.scores(q, 0, len(m))
        top = pairs(emb.embedding_similarity(q, k=50))
        _threads._setting, _threads.THREAD_ROWS = 3, 1000
        for lo, hi in ((0, len(m)), (1, len(m) - 5)):
            got = index.scores(q, lo, hi)
            if exact:
                np.testing.assert_array_equal(got, serial[lo:hi])
            else:
                np.testing.assert_allclose(got, serial[lo:hi], rtol=0, atol=1e-7)
        assert_same(pairs(emb.embedding_similarity(q, k=50)), top, atol=0 if exact else 1e-7)
    finally:
        _threads._setting, _threads.THREAD_ROWS = saved


def test_dense_scan_split_over_threads_gives_identical_scores() -> None:
    """With BLAS on one thread (the setting in which dense scans are split by default), every score of a
    split scan is bit-identical to the one-call product (checked in a fresh interpreter with BLAS pinned)."""
    import subprocess
    import sys

    env = {**os.environ, **dict.fromkeys(_threads.BLAS_THREAD_VARS, "1")}
    code = f"import sys; sys.path.insert(0, {str(Path(__file__).parent)!r}); import test_similarity; test_similarity.dense_split_check(exact=True)"
    p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300, check=False)
    assert p.returncode == 0, p.stderr


def test_dense_scan_split_with_threaded_blas_agrees() -> None:
    """A multi-threaded BLAS rounds differently at its own split points: scores agree to float32 rounding, same neighbours."""
    dense_split_check(exact=False)


def _threaded_query_in_child(emb: Embeddings, expected: list[tuple[str, float]], conn: Any) -> None:
    conn.send(pairs(emb.word_similarity("Berlin", k=10)) == expected)


def test_scan_pool_survives_fork(testdata: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A child forked after threaded scans must not wait for the parent's pool threads (it has none)."""
    import multiprocessing

    monkeypatch.setattr(_threads, "_setting", 3)
    monkeypatch.setattr(_threads, "THREAD_ROWS", 10)
    emb = load_finalfusion(testdata / "python-similarity.fifu")
    expected = pairs(emb.word_similarity("Berlin", k=10))  # creates the pool
    for _ in range(5):  # leave idle workers behind, which a child would otherwise count on
        assert pairs(emb.word_similarity("Berlin", k=10)) == expected
    time.sleep(0.2)
    assert _threads._pool is not None
    ctx = multiprocessing.get_context("fork")
    parent, child = ctx.Pipe()
    proc = ctx.Process(target=_threaded_query_in_child, args=(emb, expected, child))
    proc.start()
    proc.join(60)
    if proc.is_alive():
        proc.kill()
        proc.join()
        pytest.fail("threaded query in a forked child hung")
    assert proc.exitcode == 0
    assert parent.recv() is True
    parent.close()
    child.close()


def test_mmap_scan_has_a_bounded_working_set(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Queries over a memory-mapped matrix allocate per block, not per matrix (issue: larger than RAM)."""
    import tracemalloc

    n, dims = 16_384, 512  # a 32 MiB matrix
    rng = np.random.default_rng(5)
    matrix = rng.standard_normal((n, dims)).astype(np.float32)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    words = [f"w{i}" for i in range(n)]
    path = tmp_path / "big.fifu"
    Embeddings(NdArray(matrix), SimpleVocab(words)).write(path)
    expected_single = load_finalfusion(path).word_similarity("w7", k=10)
    expected_batch = load_finalfusion(path).word_similarity_batch(["w1", "w2", "w3"], k=10)
    del matrix

    emb = load_finalfusion(path, mmap=True)
    monkeypatch.setattr(sim_base, "SCAN_BLOCK_BYTES", 1 << 20)  # 1 MiB of rows per BLAS call
    monkeypatch.setattr(sim_base, "BATCH_SCORE_ELEMENTS", 1 << 14)
    emb.word_similarity("w0", k=10)  # the one-time per-row facts: O(n) words and norms, no matrix copy
    tracemalloc.start()
    try:
        single = emb.word_similarity("w7", k=10)
        ids, scores = emb.word_similarity_batch(["w1", "w2", "w3"], k=10)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert pairs(single) == pairs(expected_single)
    np.testing.assert_array_equal(ids, expected_batch[0])
    np.testing.assert_array_equal(scores, expected_batch[1])
    # blocks of 1 MiB plus per-row arrays of the 16,384 rows; the mapped matrix itself is 32 MiB
    assert peak < (4 << 20), peak


def test_mmap_adc_scan_has_a_bounded_working_set(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """ADC over memory-mapped codes too large to cache lays out and scores one block at a time."""
    import tracemalloc

    n, m = 65_536, 128  # 8 MiB of codes
    rng = np.random.default_rng(6)
    pq = PQ(rng.standard_normal((m, 256, 2)).astype(np.float32), None)
    codes = rng.integers(0, 256, (n, m), dtype=np.uint8)
    path = tmp_path / "pq.fifu"
    Embeddings(QuantizedArray(pq, codes, None), SimpleVocab([f"w{i}" for i in range(n)])).write(path)
    expected = load_finalfusion(path).word_similarity("w9", k=10)

    emb = load_finalfusion(path, mmap=True)
    monkeypatch.setattr(sim_quantized, "ADC_CACHE_BYTES", 0)  # no column-major copy of all codes
    monkeypatch.setattr(sim_base, "SCAN_BLOCK_BYTES", 1 << 16)  # blocks of 1,024 rows (the minimum)
    emb.word_similarity("w0", k=10)  # one-time per-row facts
    tracemalloc.start()
    try:
        got = emb.word_similarity("w9", k=10)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert_same(pairs(got), pairs(expected), atol=1e-6)
    assert peak < (2 << 20), peak  # the codes alone are 8 MiB


def test_scan_split_waits_for_every_range_when_one_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    """An error in the caller's range does not return while a pool thread still writes its range."""
    monkeypatch.setattr(_threads, "_setting", 2)
    started = threading.Event()
    done = threading.Event()

    def work(a: int, b: int) -> int:
        if a == 0:
            started.wait(60)  # the other range is running (a guard against hanging, not a timing)
            raise ValueError("first range")
        started.set()
        time.sleep(0.2)  # still running when the first range fails
        done.set()
        return b - a

    with pytest.raises(ValueError, match="first range"):
        _threads.in_threads(work, 4 * _threads.THREAD_ROWS, blas=False)
    assert started.is_set()
    assert done.is_set()
    assert _threads.in_threads(lambda a, b: b - a, 4 * _threads.THREAD_ROWS, blas=False) == [2 * _threads.THREAD_ROWS] * 2
