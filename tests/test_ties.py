"""Tie-heavy similarity queries (issue 13, class 1): bounded work, ties broken by word order.

A zero query (an all-zero row, an empty bag of words), all-equal rows and
embeddings with 0 or 1 dimensions make every score equal; top-k selection
used to recurse on an array that did not shrink. Each check runs in a forked
child under an address-space limit, so a regression fails as MemoryError or
RecursionError instead of taking the machine.
"""

from __future__ import annotations

import numpy as np
import pytest

from _bounded import bounded
from finalfusion import Embeddings
from finalfusion.storage import PQ, NdArray, QuantizedArray
from finalfusion.vocab import SimpleVocab

N = 50_000


def words(n: int, seed: int = 0) -> list[str]:
    """Words whose code-point order differs from their row order."""
    w = [f"w{i}" for i in range(n)]
    np.random.default_rng(seed).shuffle(w)
    return w


def dense(m: np.ndarray, seed: int = 0) -> Embeddings:
    return Embeddings(NdArray(np.ascontiguousarray(m, dtype=np.float32)), SimpleVocab(words(len(m), seed)))


def quantized(m: np.ndarray, seed: int = 0) -> Embeddings:
    """Every row reconstructs to its own row of ``m`` exactly (16 centroids per subspace: m has few distinct sub-rows)."""
    d = m.shape[1]
    q = 1 if d <= 1 else 2
    cent = np.zeros((q, 16, d // q), np.float32)
    codes = np.zeros((len(m), q), np.uint8)
    for j in range(q):
        sub = m[:, j * (d // q) : (j + 1) * (d // q)]
        uniq, inv = np.unique(sub, axis=0, return_inverse=True)
        assert len(uniq) <= 16
        cent[j, : len(uniq)] = uniq
        codes[:, j] = inv.reshape(-1)
    return Embeddings(QuantizedArray(PQ(cent, None), codes), SimpleVocab(words(len(m), seed)))


def expected(emb: Embeddings, scores: np.ndarray, k: int, skip: set[str] = frozenset()) -> list[str]:  # type: ignore[assignment]
    """Brute force: descending score, equal scores in code-point order of the words."""
    ws = emb.vocab.words
    order = sorted((i for i in range(len(ws)) if ws[i] not in skip), key=lambda i: (-float(scores[i]), ws[i]))
    return [ws[i] for i in order[:k]]


def padded_rows(n: int, d: int, zero: int, seed: int = 1) -> np.ndarray:
    # rows with few distinct values (quantizable exactly) and one all-zero "padding" row
    m = np.random.default_rng(seed).integers(-1, 2, size=(n, d)).astype(np.float32)
    m[(m == 0).all(axis=1)] = 1.0
    m[zero] = 0.0
    return m


@pytest.mark.parametrize("make", [dense, quantized], ids=["dense", "quantized"])
def test_zero_query_over_a_large_vocabulary(make) -> None:  # type: ignore[no-untyped-def]
    emb = make(padded_rows(N, 4, zero=123))
    pad_word = emb.vocab.words[123]

    def run() -> tuple[object, ...]:
        one = [r.word for r in emb.embedding_similarity(np.zeros(4), k=5)]
        pad = [r.word for r in emb.word_similarity(pad_word, k=5)]
        idx, sims = emb.embedding_similarity_batch(np.zeros((3, 4)), k=5)
        widx, _ = emb.word_similarity_batch([pad_word, pad_word], k=5)
        return one, pad, idx.tolist(), sims.tolist(), widx.tolist()

    one, pad, idx, sims, widx = bounded(run)
    zeros = np.zeros(N)
    want = expected(emb, zeros, 5)
    assert one == want
    assert pad == expected(emb, zeros, 5, {pad_word})
    ws = emb.vocab.words
    assert [[ws[i] for i in row if i >= 0] for row in idx] == [want] * 3
    assert sims == [[0.0] * 5] * 3
    assert [[ws[i] for i in row if i >= 0] for row in widx] == [expected(emb, zeros, 5, {pad_word})] * 2


@pytest.mark.parametrize("make", [dense, quantized], ids=["dense", "quantized"])
@pytest.mark.parametrize("n", [1, 5, 4097, N])
def test_all_rows_equal(make, n: int) -> None:  # type: ignore[no-untyped-def]
    emb = make(np.tile(np.array([[1.0, -1.0]], np.float32), (n, 1)))
    first = emb.vocab.words[0]

    def run() -> tuple[object, ...]:
        sim = [r.word for r in emb.word_similarity(first, k=7)]
        idx, _ = emb.word_similarity_batch([first] * 2, k=7)
        ana = emb.analogy(first, first, first, k=3, skip=[])
        return sim, idx.tolist(), [r.word for r in ana or []]

    sim, idx, ana = bounded(run)
    ones = np.ones(n)
    assert sim == expected(emb, ones, 7, {first})
    assert [[emb.vocab.words[i] for i in row if i >= 0] for row in idx] == [expected(emb, ones, 7, {first})] * 2
    assert ana == expected(emb, ones, 3)


@pytest.mark.parametrize("dims", [0, 1])
@pytest.mark.parametrize("n", [3, N])
def test_zero_and_one_dimension(dims: int, n: int) -> None:
    m = np.where(np.arange(n) % 3 == 0, -1.0, 1.0).astype(np.float32).reshape(n, 1)[:, :dims]
    emb = dense(m)
    first = emb.vocab.words[0]

    def run() -> tuple[object, ...]:
        sim = emb.word_similarity(first, k=4)
        vec = emb.embedding_similarity(np.ones(dims), k=4)
        idx, _ = emb.word_similarity_batch([first], k=4)
        return [(r.word, r.similarity) for r in sim or []], [r.word for r in vec], idx.tolist()

    sim, vec, idx = bounded(run)
    scores = m[:, 0] * m[0, 0] if dims else np.zeros(n)
    assert [w for w, _ in sim] == expected(emb, scores, 4, {first})
    assert vec == expected(emb, m[:, 0] if dims else np.zeros(n), 4)
    assert [[emb.vocab.words[i] for i in row if i >= 0] for row in idx] == [expected(emb, scores, 4, {first})]


@pytest.mark.parametrize("make", [dense, quantized], ids=["dense", "quantized"])
def test_huge_k_returns_every_word_once_in_order(make) -> None:  # type: ignore[no-untyped-def]
    n = 20_000
    emb = make(padded_rows(n, 4, zero=0))

    def run() -> tuple[object, ...]:
        res = emb.embedding_similarity(np.zeros(4), k=10**12)
        idx, _ = emb.embedding_similarity_batch(np.zeros((1, 4)), k=2**62)
        return [r.word for r in res], idx.tolist()

    res, idx = bounded(run)
    assert res == sorted(emb.vocab.words)
    assert [emb.vocab.words[i] for i in idx[0]] == sorted(emb.vocab.words)
