"""Queries through an approximate-neighbour index (``index=``, ``set_index``, gensim's ``indexer=``).

Every index here is a real one, built by :func:`finalfusion.ann.build_index`
with hnswlib. Where the index finds the true neighbours (small vocabularies
searched with ``ef`` at least the number of rows, where HNSW visits every
row) the answers must be exactly those of the exact scan; on clustered
synthetic data and a model trained by fastText, recall@10 against the exact
answer is measured.
"""

from __future__ import annotations

import concurrent.futures
import multiprocessing
import os
import pickle
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import finalfusion
from finalfusion import Embeddings, NdArray, SimpleVocab, load_finalfusion
from finalfusion.errors import StaleIndexError
from finalfusion.similarity._dense import FEW_IDS

ann = pytest.importorskip("finalfusion.ann")
pytest.importorskip("hnswlib")

DATA = Path(__file__).parent / "data" / "testdata"
#: ``ef`` at least the rows of every small vocabulary here: HNSW then visits every row and is exact.
EXACT = {"M": 16, "ef_construction": 200, "ef": 512}
#: Build parameters per backend in the tests run with both: a wide graph, and the default IVF (its default nprobe
#: searches enough cells for ~1,250 rows: every cell of these small vocabularies, some of the fastText model's).
BUILD: dict[str, dict[str, Any]] = {"hnswlib": EXACT, "faiss-ivf": {}}


def built(emb: Embeddings, backend: str) -> Any:
    """``ann.build_index(emb, backend, **BUILD[backend])``, skipped without the backend's library."""
    pytest.importorskip("faiss" if backend.startswith("faiss") else backend)
    return ann.build_index(emb, backend, **BUILD[backend])


def clustered(n: int, dims: int, clusters: int, seed: int, noise: float = 0.35) -> Embeddings:
    """Unit rows around ``clusters`` random centres; words in an order unrelated to the rows (ties are broken by word)."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((clusters, dims))
    rows = centres[rng.integers(0, clusters, n)] + noise * rng.standard_normal((n, dims))
    rows /= np.linalg.norm(rows, axis=1, keepdims=True)
    words = [f"w{i:05d}" for i in rng.permutation(n)]
    return Embeddings(NdArray(rows.astype(np.float32)), SimpleVocab(words))


@pytest.fixture(scope="module")
def small() -> tuple[Embeddings, Any]:
    emb = clustered(400, 24, 8, seed=1)
    return emb, ann.build_index(emb, "hnswlib", **EXACT)


@pytest.fixture(scope="module")
def big() -> tuple[Embeddings, Any]:
    emb = clustered(6000, 48, 60, seed=2)
    return emb, ann.build_index(emb, "hnswlib")


def recall(got: np.ndarray, want: np.ndarray) -> float:
    """Share of the exact answer's ids (not ``-1``) found by the approximate answer, row by row."""
    hits = total = 0
    for g, w in zip(got, want, strict=True):
        w = w[w >= 0]
        hits += len(np.intersect1d(g[g >= 0], w))
        total += len(w)
    return hits / total


# -- every query method: exactly the exact answer where the index is exact ----------------------------------


def single_queries(emb: Embeddings, how: dict[str, Any]) -> list[Any]:
    words = emb.vocab.words
    vec = np.random.default_rng(3).standard_normal(emb.dims)
    return [
        *(emb.word_similarity(w, k=10, **how) for w in words[:40]),
        emb.word_similarity(words[0], k=5, skip=words[1:30], **how),
        emb.word_similarity(words[0], k=3, skip=[], **how),
        emb.word_similarity(words[0], k=len(words) + 5, **how),
        emb.word_similarity(words[0], k=0, **how),
        emb.word_similarity("not a word", **how),
        emb.embedding_similarity(vec, k=10, **how),
        emb.embedding_similarity(vec, k=10, skip=words[:50], **how),
        *(emb.analogy(*words[i : i + 3], k=5, **how) for i in range(0, 30, 3)),
        emb.analogy(*words[:3], k=5, mask=(False, True, False), **how),
        emb.analogy(*words[:3], k=5, skip=words[3:9], **how),
        # (an index as gensim's indexer= keeps the input words: the default index, or none, here)
        emb.most_similar(words[:2], negative=words[2:3], topn=7, indexer=False if how.get("index") is False else None),
        emb.most_similar(words[4], topn=7, indexer=False if how.get("index") is False else None),
    ]


@pytest.mark.parametrize("way", ["index=", "set_index", "AnnIndex"])
def test_single_queries_equal_the_exact_scan(small: tuple[Embeddings, Any], way: str, monkeypatch: pytest.MonkeyPatch) -> None:
    emb, ix = small
    exact = single_queries(emb, {})
    calls = counted(ix)
    if way == "AnnIndex":  # the index itself: a single query asks its _search_one (search's checks skipped), counted here
        real = type(ix)._search_one

        def search_one(self: Any, q: np.ndarray, k: int) -> Any:
            calls.searches += 1
            return real(self, q, k)

        monkeypatch.setattr(type(ix), "_search_one", search_one)
        got = single_queries(emb, {"index": ix})
    elif way == "set_index":
        emb.set_index(calls)
        try:
            got = single_queries(emb, {})
            assert single_queries(emb, {"index": False}) == exact
        finally:
            emb.set_index(None)
    else:
        got = single_queries(emb, {"index": calls})
    assert got == exact  # words, similarities (bit for bit) and order, ties included
    assert calls.searches >= 40  # the answers really came through the index


class counted:
    """A real index, with its searches counted."""

    def __init__(self, ix: Any) -> None:
        self.ix = ix
        self.searches = 0

    def search(self, queries: Any, k: int) -> Any:
        self.searches += 1
        return self.ix.search(queries, k)

    def check(self, emb: Any) -> None:
        self.ix.check(emb)


@pytest.mark.parametrize("threads", [1, 3])
def test_batches_equal_the_single_query_answers_and_the_exact_batch(small: tuple[Embeddings, Any], threads: int) -> None:
    emb, ix = small
    words = emb.vocab.words
    queries = [*words[:300], "not a word", words[5]]  # more than RESCORE_CHUNK queries a thread: re-scored on three threads
    finalfusion.set_threads(threads)
    try:
        ids, scores = emb.word_similarity_batch(queries, k=10, index=ix)
    finally:
        finalfusion.set_threads(None)
    for q, row_ids, row_scores in zip(queries, ids, scores, strict=True):
        single = emb.word_similarity(q, k=10, index=False)
        if single is None:
            assert (row_ids == -1).all()
            assert np.isnan(row_scores).all()
            continue
        assert [words[i] for i in row_ids] == [r.word for r in single]
        assert row_scores.tolist() == [np.float32(r.similarity) for r in single]  # the single-query scan's scores, bit for bit
    exact_ids, exact_scores = emb.word_similarity_batch(queries, k=10)
    np.testing.assert_array_equal(ids, exact_ids)
    np.testing.assert_allclose(scores, exact_scores, rtol=0, atol=1e-6)  # the batch scan multiplies matrices: last-bit rounding

    triples = [tuple(words[i : i + 3]) for i in range(0, 60, 3)] + [("not", "a", "word")]
    a_ids, _a_scores = emb.analogy_batch(triples, k=4, index=ix)
    np.testing.assert_array_equal(a_ids, emb.analogy_batch(triples, k=4)[0])
    for t, row in zip(triples, a_ids, strict=True):
        single = emb.analogy(*t, k=4, index=False)
        assert (row == -1).all() if single is None else [words[i] for i in row] == [r.word for r in single]

    vecs = np.random.default_rng(4).standard_normal((30, emb.dims))
    vecs[7] = 0.0  # a zero query: the exact scan answers it (every score 0, the first words in word order)
    e_ids, _ = emb.embedding_similarity_batch(vecs, k=6, skip=words[:20], index=ix)
    np.testing.assert_array_equal(e_ids, emb.embedding_similarity_batch(vecs, k=6, skip=words[:20])[0])
    assert not np.isin(e_ids, np.arange(20)).any()


def test_set_index_is_the_default_of_batches_and_index_false_forces_the_scan(small: tuple[Embeddings, Any]) -> None:
    emb, ix = small
    calls = counted(ix)
    emb.set_index(calls)
    try:
        emb.word_similarity_batch(emb.vocab.words[:5], k=3)
        emb.analogy_batch([emb.vocab.words[:3]], k=3)
        emb.embedding_similarity_batch(np.ones((2, emb.dims)), k=3)
        assert calls.searches == 3
        emb.word_similarity_batch(emb.vocab.words[:5], k=3, index=False)
        emb.word_similarity(emb.vocab.words[0], index=False)
        assert calls.searches == 3
        w = emb.vocab.words[0]
        assert emb.similar_by_word(w, topn=5) == emb.most_similar(w, topn=5, indexer=False)  # gensim's other spellings too
        assert calls.searches == 4
        # restrict_vocab: an index covers every word, so the first N are scanned exactly
        assert emb.most_similar(w, topn=5, restrict_vocab=100) == emb.most_similar(w, topn=5, restrict_vocab=100, indexer=False)
        assert calls.searches == 4
    finally:
        emb.set_index(None)
    emb.word_similarity(emb.vocab.words[0])
    assert calls.searches == 4


# -- recall on clustered data and on a fastText model ------------------------------------------------------------


@pytest.mark.parametrize("backend", ["hnswlib", "default"])
def test_recall_at_10_on_clustered_data(big: tuple[Embeddings, Any], backend: str) -> None:
    emb, ix = big
    if backend == "default":  # faiss-ivf: 153 cells of ~39 rows, 32 searched (enough for ~1,250 rows)
        pytest.importorskip("faiss")
        ix = ann.build_index(emb)
    queries = emb.vocab.words[::20]
    exact_ids, _ = emb.word_similarity_batch(queries, k=10)
    ids, scores = emb.word_similarity_batch(queries, k=10, index=ix)
    assert recall(ids, exact_ids) >= 0.95
    # every returned similarity is the exact one of that word, whether or not the word is a true neighbour
    for q, row, srow in zip(queries[:30], ids[:30], scores[:30], strict=True):
        single = {r.word: r.similarity for r in emb.word_similarity(q, k=len(emb.vocab.words), index=False)}
        assert [np.float32(single[emb.vocab.words[i]]) for i in row] == srow.tolist()


def test_rerank_widens_the_candidate_pool() -> None:
    emb = clustered(3000, 32, 30, seed=5)
    weak = ann.build_index(emb, "hnswlib", M=6, ef_construction=40, ef=1)  # hnswlib searches with max(ef, candidates asked)
    queries = emb.vocab.words[::10]
    exact = [[r.word for r in emb.word_similarity(q, k=10)] for q in queries]

    def hits(rerank: int | None) -> float:
        got = [[r.word for r in emb.word_similarity(q, k=10, index=weak, rerank=rerank)] for q in queries]
        return sum(len(set(g) & set(e)) for g, e in zip(got, exact, strict=True)) / (10 * len(queries))

    plain, wide = hits(None), hits(300)
    assert plain < 0.99  # the weak graph misses neighbours with a pool of k ...
    assert wide > plain
    assert wide >= 0.98


BACKEND_LIBRARY = {"hnswlib": "hnswlib", "faiss-hnsw": "faiss", "usearch": "usearch", "voyager": "voyager"}


@pytest.mark.parametrize("backend", sorted(BACKEND_LIBRARY))
def test_every_graph_backend_gives_the_exact_answer_where_it_is_exact(backend: str, small: tuple[Embeddings, Any]) -> None:
    pytest.importorskip(BACKEND_LIBRARY[backend])
    emb = small[0]
    ix = ann.build_index(emb, backend, **EXACT)
    words = emb.vocab.words
    for w in words[:40]:
        assert emb.word_similarity(w, k=10, index=ix) == emb.word_similarity(w, k=10)
    np.testing.assert_array_equal(emb.word_similarity_batch(words, k=10, index=ix)[0], emb.word_similarity_batch(words, k=10)[0])


def test_rerank_recovers_the_recall_of_product_quantized_candidates() -> None:
    pytest.importorskip("faiss")
    emb = clustered(4000, 32, 40, seed=12)
    ix = ann.build_index(emb, "faiss-ivfpq", nlist=32, m=8, nbits=6, nprobe=8)
    queries = emb.vocab.words[::20]
    exact = emb.word_similarity_batch(queries, k=10, index=False)[0]
    plain = [[emb.vocab.word_index[r.word] for r in emb.word_similarity(q, k=10, index=ix)] for q in queries]
    wide = [[emb.vocab.word_index[r.word] for r in emb.word_similarity(q, k=10, index=ix, rerank=200)] for q in queries]
    assert recall(np.array(wide), exact) >= 0.97
    assert recall(np.array(wide), exact) > recall(np.array(plain), exact)


@pytest.fixture(scope="module")
def fasttext_emb(tmp_path_factory: pytest.TempPathFactory) -> Embeddings:
    pytest.importorskip("fasttext")
    from finalfusion.compat.fasttext import load_fasttext
    from test_interop_fasttext import TRAIN, make_corpus

    tmp = tmp_path_factory.mktemp("ft")
    corpus, path = tmp / "corpus.txt", tmp / "model.bin"
    make_corpus(corpus)
    for attempt in range(10):  # see test_interop_fasttext: training runs in a fresh interpreter, retried on NaN
        args = [sys.executable, "-c", TRAIN, str(corpus), "skipgram", "ns", str(5000 + 7919 * attempt), str(path)]
        proc = subprocess.run(args, capture_output=True, text=True, check=False)
        if proc.returncode == 0:
            break
        if proc.returncode != 3:
            raise RuntimeError(proc.stderr)
    else:
        pytest.fail("fastText training diverged 10 times")
    out = tmp / "model.fifu"
    load_fasttext(path).write(out)
    return load_finalfusion(out, mmap=True)


@pytest.mark.parametrize("backend", ["hnswlib", "faiss-ivf"])
def test_embeddings_converted_from_a_trained_fasttext_model(fasttext_emb: Embeddings, backend: str) -> None:
    # A tiny model of one epoch: its vectors are nearly parallel (cosines differ in the 5th decimal), so the
    # index's own float32 ranking and the scan's part at the 10th neighbour now and then. Where the index's
    # candidates hold the true neighbours the answer must be the exact one; overall recall@10 stays high.
    emb = fasttext_emb
    ix = built(emb, backend)
    words = emb.vocab.words
    queries = [*words, "unbekannteswort", "Tübingen"]  # unknown words: their subword embedding is the query
    equal = hits = 0
    for w in queries:
        exact = emb.word_similarity(w, k=10)
        got = emb.word_similarity(w, k=10, index=ix)
        assert exact is not None
        assert got is not None
        q = emb.embedding(w)
        proposed, _ = ix.search(q / np.linalg.norm(q), 10 + (w in emb.vocab.word_index))  # the candidates the query asks for
        if {r.word for r in exact} <= {words[i] for i in proposed[0]}:
            assert got == exact
            equal += 1
        hits += len({r.word for r in got} & {r.word for r in exact})
        single = {r.word: r.similarity for r in emb.word_similarity(w, k=len(words))}
        assert all(single[r.word] == r.similarity for r in got)  # every similarity is the exact one of its word
    assert equal >= len(queries) // 2
    assert hits / (10 * len(queries)) >= 0.9
    ids, _ = emb.word_similarity_batch(queries, k=10, index=ix)
    assert recall(ids, emb.word_similarity_batch(queries, k=10)[0]) >= 0.9


@pytest.mark.parametrize("dims", [3, 17, 64])
def test_candidate_scores_are_the_scans_bit_for_bit(dims: int) -> None:
    # BLAS rounds a row by its place in the product (unrolled kernels, a tail path for the last rows):
    # every residue of the row count, the last rows and the first ones, unit and non-unit rows.
    from finalfusion.similarity._index import build_index as query_index

    rng = np.random.default_rng(dims)
    for n in range(40, 600, 23):
        rows = rng.standard_normal((n, dims)).astype(np.float32)
        if n % 2:
            rows /= np.linalg.norm(rows, axis=1, keepdims=True)
        index = query_index(NdArray(rows), [f"w{i}" for i in range(n)])
        q = rng.standard_normal(dims).astype(np.float32)
        q /= np.linalg.norm(q)
        scan = index.scores(q, 0, n)
        for ids in (np.arange(n - 1, n - 5, -1), np.array([0, 1, 2, n - 1]), rng.choice(n, size=n // 20, replace=False)):
            ids = ids.astype(np.int64)
            assert index.scores_at(q, ids).tolist() == scan[ids].tolist(), (n, ids)
        # a batch's candidates: every query row with its own ids, in one gather (the last rows' groups are cut)
        qm = rng.standard_normal((5, dims)).astype(np.float32)
        qm /= np.linalg.norm(qm, axis=1, keepdims=True)
        many = np.stack([rng.choice(n, size=4, replace=False) for _ in range(5)]).astype(np.int64)
        many[0] = [n - 1, n - 2, 0, 1]
        assert index.scores_at_rows(qm, many).tolist() == [index.scores(qm[j], 0, n)[many[j]].tolist() for j in range(5)], n


@pytest.mark.parametrize("step", [1021, 1022, 1024, 1200])
@pytest.mark.parametrize("dims", [17, 64])
def test_one_querys_candidates_are_scored_as_the_scan_of_their_block(dims: int, step: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """One query's few candidates (Python ints, their row groups found without numpy) score as the scan's block products, bit for bit.

    Scan blocks of 1,021 and 1,022 rows (not multiples of the row group), 1,024 and 1,200 rows (multiples: the groups found by the
    short path), random rows (so a group in the wrong place rounds differently), the last rows of every block among them.
    """
    from finalfusion.similarity import _base
    from finalfusion.similarity._index import build_index as query_index

    monkeypatch.setattr(_base.QueryIndex, "block_rows", lambda self, queries: step if queries <= 1 else 256)
    rng = np.random.default_rng(step + dims)
    n = 2 * step + 413
    rows = rng.standard_normal((n, dims)).astype(np.float32)
    index = query_index(NdArray(rows), [f"w{i}" for i in range(n)])
    for _ in range(20):
        q = rng.standard_normal(dims).astype(np.float32)
        q /= np.linalg.norm(q)
        scan = np.concatenate([index.scores(q, lo, min(n, lo + step)) for lo in range(0, n, step)])
        edges = [step - 1, step - 3, step, 2 * step - 1, 2 * step, n - 1, n - 2, 0]
        for ids in (rng.choice(n, size=11, replace=False).tolist(), edges, [int(i) for i in rng.integers(0, n, 30)]):
            assert index.scores_at_few(q, ids) == scan[ids].tolist(), ids
        # more candidates than one query's few (the numpy way), the block edges among them, some ids twice
        many = np.concatenate([rng.choice(n, size=FEW_IDS + 40, replace=False), edges, edges[:3]]).astype(np.int64)
        assert index.scores_at(q, many).tolist() == scan[many].tolist()
        # a batch of such queries, every one with its own candidates in one gather
        qm = np.stack([q, -q, q[::-1].copy()])
        cands = np.stack([rng.choice(n, size=37, replace=False) for _ in range(3)]).astype(np.int64)  # not whole groups
        cands[0, :8] = edges
        assert index.scores_at_rows(qm, cands).tolist() == [
            np.concatenate([index.scores(qm[j], lo, min(n, lo + step)) for lo in range(0, n, step)])[cands[j]].tolist() for j in range(3)
        ]


ALL_BACKENDS = {**BACKEND_LIBRARY, "faiss-ivf": "faiss", "faiss-ivfpq": "faiss"}


class SearchOnly:
    """A real index without its single-query shortcut: every query goes through its public ``search`` (the general path)."""

    def __init__(self, ix: Any) -> None:
        self.ix = ix

    def search(self, queries: Any, k: int) -> Any:
        return self.ix.search(queries, k)

    def check(self, emb: Any) -> None:
        self.ix.check(emb)


@pytest.mark.parametrize("backend", sorted(ALL_BACKENDS))
def test_the_single_query_shortcut_answers_as_the_public_search(backend: str, small: tuple[Embeddings, Any]) -> None:
    """``AnnIndex._search_one`` (faiss: its ``search_c`` without the Python wrapper) proposes the ids ``search`` finds, and the queries answer alike."""
    pytest.importorskip(ALL_BACKENDS[backend])
    emb = small[0]
    ix = ann.build_index(emb, backend, **({"nlist": 8} if backend.startswith("faiss-ivf") else EXACT))
    rng = np.random.default_rng(7)
    for k in (1, 11, len(ix), len(ix) + 3):
        for _ in range(10):
            q = rng.standard_normal(emb.dims).astype(np.float32)
            q /= np.linalg.norm(q)
            one = ix._search_one(q, k)
            assert type(one) is list
            assert all(type(i) is int for i in one)
            assert one == ix.search(q, k)[0][0][: min(k, len(ix))].tolist(), (backend, k)
    general = SearchOnly(ix)
    words = emb.vocab.words
    for w in words[:30]:
        assert emb.word_similarity(w, k=10, index=ix) == emb.word_similarity(w, k=10, index=general)
        vec = emb[w] + 0.5
        assert emb.embedding_similarity(vec, k=11, index=ix) == emb.embedding_similarity(vec, k=11, index=general)
    for vec in (np.eye(emb.dims)[0], -np.eye(emb.dims)[3]):  # queries whose first component is 0, or -1
        assert emb.embedding_similarity(vec, k=10, index=ix) == emb.embedding_similarity(vec, k=10, index=general)
    zero = np.zeros(emb.dims)  # the exact scan answers it: every row scores 0, the first words in word order
    assert emb.embedding_similarity(zero, k=10, index=ix) == emb.embedding_similarity(zero, k=10, index=general) == emb.embedding_similarity(zero, k=10)
    if backend == "faiss-ivf":  # nlist 8, the default nprobe searches every cell: the exact answer
        assert [emb.word_similarity(w, k=10, index=ix) for w in words[:30]] == [emb.word_similarity(w, k=10) for w in words[:30]]


def test_rows_not_found_are_minus_one_beside_nan(small: tuple[Embeddings, Any]) -> None:
    """An IVF search of one cell out of 8 finds fewer rows than asked for: ``-1`` exactly where the score is NaN, the rest as found."""
    pytest.importorskip("faiss")
    emb = small[0]
    ix = ann.build_index(emb, "faiss-ivf", nlist=8, nprobe=1)
    queries = np.ascontiguousarray(emb.storage.matrix[:20] / np.linalg.norm(emb.storage.matrix[:20], axis=1, keepdims=True))
    ids, scores = ix.search(queries, len(ix))
    assert (ids == -1).any()
    np.testing.assert_array_equal(ids < 0, np.isnan(scores))
    assert ((ids >= -1) & (ids < len(ix))).all()
    for j in range(len(queries)):
        assert ix._search_one(queries[j], len(ix)) == ids[j].tolist()
        found = ids[j][ids[j] >= 0]
        np.testing.assert_allclose(
            scores[j][: len(found)],
            queries[j] @ (emb.storage.matrix[found] / np.linalg.norm(emb.storage.matrix[found], axis=1)[:, None]).T,
            rtol=1e-5,
            atol=1e-6,
        )


@pytest.mark.parametrize("backend", ["faiss-ivf", "faiss-hnsw"])
def test_a_faiss_result_naming_a_row_the_embeddings_lack_is_refused(backend: str, small: tuple[Embeddings, Any]) -> None:
    """Both faiss searches (the batch and the single query) check the row ids of a loaded index against the embeddings' rows."""
    pytest.importorskip("faiss")
    from finalfusion.errors import FormatError

    ix = ann.build_index(small[0], backend, **({} if backend == "faiss-ivf" else EXACT))
    impl = type(ix._impl)(ix._impl._index, ix._impl._params, 10)  # as if loaded for embeddings of 10 rows
    q = np.ascontiguousarray(small[0].storage.matrix[200] / np.linalg.norm(small[0].storage.matrix[200]))
    with pytest.raises(FormatError, match="the index holds a row id the embeddings do not have"):
        impl.search(q[None, :], 5, 1)
    with pytest.raises(FormatError, match="the index holds a row id the embeddings do not have"):
        impl.search_one(q, 5)
    with pytest.raises(ValueError, match="C-contiguous float32 rows of 24 dims"):
        impl.search_one(np.zeros(23, np.float32), 5)


# -- the committed reference files, quantized storage ------------------------------------------------------------


@pytest.mark.parametrize("backend", ["hnswlib", "faiss-ivf"])
@pytest.mark.parametrize("name", ["python-similarity.fifu", "rust-similarity.fifu", "rust-analogy.bin", "python-pq.fifu", "rust-quantized.fifu"])
def test_reference_files(name: str, backend: str) -> None:
    emb = finalfusion.load(DATA / name)
    ix = built(emb, backend)
    words = emb.vocab.words
    for w in words:
        assert emb.word_similarity(w, k=10, index=ix) == emb.word_similarity(w, k=10)
        assert emb.word_similarity(w, k=5, rerank=20, index=ix) == emb.word_similarity(w, k=5, rerank=20)
    for i in range(0, len(words) - 2, 2):
        assert emb.analogy(*words[i : i + 3], k=3, index=ix) == emb.analogy(*words[i : i + 3], k=3)
    ids, _ = emb.word_similarity_batch(words, k=10, index=ix)
    np.testing.assert_array_equal(ids, emb.word_similarity_batch(words, k=10)[0])


def test_quantized_storage_with_rerank(small: tuple[Embeddings, Any]) -> None:
    emb = small[0].quantize(n_subquantizers=6, n_iterations=20)
    ix = ann.build_index(emb, "hnswlib", **EXACT)
    for w in emb.vocab.words[:60]:
        assert emb.word_similarity(w, k=10, index=ix) == emb.word_similarity(w, k=10)  # ADC scores, bit for bit
        assert emb.word_similarity(w, k=10, rerank=40, index=ix) == emb.word_similarity(w, k=10, rerank=40)  # float64 re-scoring
    queries = emb.vocab.words[:40]
    np.testing.assert_array_equal(emb.word_similarity_batch(queries, k=10, index=ix)[0], emb.word_similarity_batch(queries, k=10)[0])


# -- skip rules, rows never returned, ties -------------------------------------------------------------------------


def test_skip_rules(small: tuple[Embeddings, Any]) -> None:
    emb, ix = small
    w = emb.vocab.words
    assert w[0] not in [r.word for r in emb.word_similarity(w[0], k=50, index=ix)]
    first = emb.word_similarity(w[0], k=1, skip=[], index=ix)
    assert first is not None
    assert first[0].word == w[0]
    got = emb.word_similarity(w[0], k=len(w), skip=w[:200], index=ix)
    assert got is not None
    assert len(got) == len(w) - 200
    assert not {r.word for r in got} & set(w[:200])
    top = [r.word for r in emb.word_similarity(w[0], k=20, index=False)]  # skipping the true neighbours needs a wider pool
    assert emb.word_similarity(w[0], k=5, skip=[w[0], *top], index=ix) == emb.word_similarity(w[0], k=5, skip=[w[0], *top])
    vec = emb.embedding(w[0])
    ids, _ = emb.embedding_similarity_batch([vec, -vec], k=5, skip=[w[0], *top], index=ix)
    np.testing.assert_array_equal(ids, emb.embedding_similarity_batch([vec, -vec], k=5, skip=[w[0], *top])[0])
    answer = emb.analogy(w[0], w[1], w[2], k=len(w), mask=(True, False, True), index=ix)
    assert answer is not None
    assert w[1] in [r.word for r in answer]
    assert w[0] not in [r.word for r in answer]
    assert emb.most_similar([w[0], w[1]], topn=len(w)) == emb.most_similar([w[0], w[1]], topn=len(w), indexer=False)


def test_rows_with_nan_are_never_returned_and_ties_come_in_word_order() -> None:
    rng = np.random.default_rng(6)
    rows = rng.standard_normal((300, 16)).astype(np.float32)
    rows /= np.linalg.norm(rows, axis=1, keepdims=True)
    rows[10] = np.nan
    rows[40:60] = rows[5]  # twenty words with the same row: their similarities tie
    words = [f"t{i:03d}" for i in range(300)][::-1]  # word order is the reverse of row order
    emb = Embeddings(NdArray(rows), SimpleVocab(words))
    ix = ann.build_index(emb, "hnswlib", **EXACT)
    got = emb.word_similarity(words[5], k=25, index=ix)
    assert got == emb.word_similarity(words[5], k=25)
    assert got is not None
    assert [r.word for r in got[:20]] == sorted(words[40:60])
    everything = emb.embedding_similarity(rows[5], k=400, index=ix)
    assert words[10] not in [r.word for r in everything]
    assert everything == emb.embedding_similarity(rows[5], k=400)


# -- the index belongs to its embeddings ---------------------------------------------------------------------------


def test_stale_index_is_refused(small: tuple[Embeddings, Any]) -> None:
    emb, ix = small
    other = clustered(400, 24, 8, seed=9)  # same shape and words, other rows
    with pytest.raises(StaleIndexError):
        other.word_similarity(other.vocab.words[0], index=ix)
    with pytest.raises(StaleIndexError):
        other.set_index(ix)
    with pytest.raises(StaleIndexError):
        other.word_similarity_batch(other.vocab.words[:3], index=ix)
    with pytest.raises(StaleIndexError):
        other.most_similar(other.vocab.words[0], indexer=ix)
    with pytest.raises(TypeError, match="index= takes an index"):
        emb.word_similarity(emb.vocab.words[0], index="hnswlib")


def test_the_check_runs_once_per_index_and_embeddings(small: tuple[Embeddings, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    emb, _ = small
    ix = ann.build_index(emb, "hnswlib", **EXACT)
    checks = []
    original = ix.check
    monkeypatch.setattr(ix, "check", lambda e: (checks.append(e), original(e))[1])
    for w in emb.vocab.words[:5]:
        emb.word_similarity(w, index=ix)
    emb.set_index(ix)
    emb.word_similarity_batch(emb.vocab.words[:5])
    emb.set_index(None)
    assert len(checks) == 1


# -- pickling: workers get the index with the embeddings ----------------------------------------------------------


def worker_queries(emb: Embeddings, words: list[str]) -> tuple[list[Any], bool]:
    """Runs in a spawned worker: the neighbours through the embeddings' own index, and whether it has one."""
    return [emb.word_similarity(w, k=5) for w in words], emb._ann is not None


@pytest.mark.parametrize("backend", ["hnswlib", "faiss-ivf"])
def test_a_set_index_pickles_with_the_embeddings_to_workers(tmp_path: Path, backend: str) -> None:
    clustered(500, 16, 10, seed=7).write(tmp_path / "e.fifu")
    emb = load_finalfusion(tmp_path / "e.fifu", mmap=True)
    ix = built(emb, backend)
    ix.save(tmp_path / "e.index")
    emb.set_index(ann.load_index(tmp_path / "e.index", emb))
    assert len(pickle.dumps(emb)) < 4096  # the file and the index, both by reference
    words = emb.vocab.words[:20]
    expected = [emb.word_similarity(w, k=5, index=False) for w in words]
    by_value = load_finalfusion(tmp_path / "e.fifu")  # read into memory: the embeddings and the (unsaved) index by value
    by_value.set_index(built(by_value, backend))
    ctx = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(max_workers=2, mp_context=ctx) as pool:
        for answers, has_index in pool.map(worker_queries, [emb, by_value], [words, words]):
            assert has_index
            assert answers == expected
    plain = pickle.loads(pickle.dumps(load_finalfusion(tmp_path / "e.fifu", mmap=True)))
    assert plain._ann is None


def neighbours_in_worker(word: str, emb: Embeddings) -> tuple[Any, bool, int]:
    """Runs on a Dask worker: the neighbours through the embeddings' own index, whether it has one, the pid."""
    return emb.word_similarity(word, k=5), emb._ann is not None, os.getpid()


def test_dask_workers_query_through_the_index_they_received(tmp_path: Path) -> None:
    distributed = pytest.importorskip("dask.distributed")
    import cloudpickle
    import dask

    cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the workers cannot import the tests
    clustered(500, 16, 10, seed=13).write(tmp_path / "e.fifu")
    emb = load_finalfusion(tmp_path / "e.fifu", mmap=True)
    ann.build_index(emb, "hnswlib", **EXACT).save(tmp_path / "e.index")
    emb.set_index(ann.load_index(tmp_path / "e.index", emb))
    words = emb.vocab.words[:24]
    with dask.config.set({"distributed.scheduler.active-memory-manager.start": False}):
        cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None)
    with cluster, distributed.Client(cluster) as client:
        client.wait_for_workers(2)
        remote = client.scatter(emb, broadcast=True)
        got = client.gather(client.map(neighbours_in_worker, words, emb=remote))
    assert [answer for answer, _, _ in got] == [emb.word_similarity(w, k=5, index=False) for w in words]
    assert all(has_index for _, has_index, _ in got)
    assert len({pid for _, _, pid in got} - {os.getpid()}) >= 1


# -- gensim's most_similar(indexer=) -------------------------------------------------------------------------------


class GensimExactIndexer:
    """gensim's indexer interface (``AnnoyIndexer.most_similar(vector, num_neighbors)``), answered by an exact scan."""

    def __init__(self, kv: Any) -> None:
        self.kv = kv
        self.normed = kv.get_normed_vectors()

    def most_similar(self, vector: Any, num_neighbors: int) -> list[tuple[str, float]]:
        from gensim import matutils

        sims = self.normed @ vector
        return [(self.kv.index_to_key[i], float(sims[i])) for i in matutils.argsort(sims, topn=num_neighbors, reverse=True)]


def test_gensim_most_similar_indexer_side_by_side(small: tuple[Embeddings, Any]) -> None:
    pytest.importorskip("gensim")
    emb, ix = small
    kv = emb.to_gensim()
    exact_indexer = GensimExactIndexer(kv)
    words = emb.vocab.words
    for pos, neg in [([words[0]], []), ([words[1], words[2]], [words[3]]), ([(words[4], 2.0), words[5]], [])]:
        want = kv.most_similar(positive=pos, negative=neg, topn=10, indexer=exact_indexer)
        assert want[0][0] in {w if isinstance(w, str) else w[0] for w in pos} or neg  # gensim keeps the input words
        for indexer in (ix, exact_indexer):
            got = emb.most_similar(positive=pos, negative=neg, topn=10, indexer=indexer)
            assert [w for w, _ in got] == [w for w, _ in want]
            np.testing.assert_allclose([s for _, s in got], [s for _, s in want], rtol=0, atol=2e-6)
        # without an indexer (and through set_index) both drop the input words
        emb.set_index(ix)
        try:
            assert [w for w, _ in emb.most_similar(positive=pos, negative=neg, topn=10)] == [w for w, _ in kv.most_similar(positive=pos, negative=neg, topn=10)]
        finally:
            emb.set_index(None)
    # gensim consults the indexer only for a Python int topn
    assert emb.most_similar(words[0], topn=np.int64(3), indexer=ix) == emb.most_similar(words[0], topn=3)
    assert [w for w, _ in kv.most_similar(words[0], topn=np.int64(3), indexer=exact_indexer)] == [w for w, _ in emb.most_similar(words[0], topn=3)]
    assert isinstance(emb.most_similar(words[0], topn=None, indexer=ix), np.ndarray)


# -- the command line --------------------------------------------------------------------------------------------


def test_cli_similar_and_analogy_with_index(tmp_path: Path) -> None:
    from test_cli import command, env

    clustered(300, 16, 6, seed=8).write(tmp_path / "e.fifu")
    emb = load_finalfusion(tmp_path / "e.fifu")
    ann.build_index(emb, "hnswlib", **EXACT).save(tmp_path / "e.index")
    words = emb.vocab.words[:6]

    def run(*args: Any) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*command(), *map(str, args)], capture_output=True, text=True, env=env(), timeout=300, check=False)

    for sub, extra in [("similar", ["-k", "7", "-w", *words]), ("analogy", ["-k", "3", "-w", *words])]:
        plain = run(sub, tmp_path / "e.fifu", *extra)
        with_index = run(sub, tmp_path / "e.fifu", "--index", tmp_path / "e.index", *extra)
        assert plain.returncode == with_index.returncode == 0, with_index.stderr
        assert with_index.stdout == plain.stdout
        assert plain.stdout.count("\n") >= 6
    clustered(300, 16, 6, seed=11).write(tmp_path / "other.fifu")
    stale = run("similar", tmp_path / "other.fifu", "--index", tmp_path / "e.index", "-w", words[0])
    assert stale.returncode == 1
    assert "other embeddings" in stale.stderr
    assert "Traceback" not in stale.stderr
