"""Scans: the top ``k`` rows of one query or of a batch, block by block.

Rows are scanned in blocks; a single query keeps at most one block of
scores plus the running top ``k``; batches keep a bounded ``queries x
block`` score matrix.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from finalfusion._threads import in_threads
from finalfusion.similarity._base import QueryIndex
from finalfusion.similarity._topk import F32, I64, NEG_INF, prune, top_k, top_k_rows
from finalfusion.similarity.results import SimilarityResult, SimilarityResults

__all__ = ["finish", "results", "scan_blocks", "search", "search_batch", "skip_pairs", "word_ids"]


def search(index: QueryIndex, q: F32, k: int, exclude: I64, limit: int | None = None, rerank: int | None = None) -> tuple[F32, I64]:
    """Top ``k`` rows for one unit query; ``exclude`` are row ids never returned."""
    n = index.n if limit is None else min(index.n, max(0, limit))
    want = k if rerank is None or not index.approximate else max(k, rerank)
    exclude = np.concatenate([exclude, index.bad]) if len(index.bad) else exclude
    best_s = np.zeros(0, np.float32)
    best_i = np.zeros(0, np.int64)
    step = index.block_rows(1)
    for lo in range(0, n, step):
        hi = min(n, lo + step)
        s = index.scores(q, lo, hi)
        local = exclude[(exclude >= lo) & (exclude < hi)] - lo
        s[local] = NEG_INF
        bs, bi = top_k(s, lo, want, index)
        if lo == 0:
            best_s, best_i = bs, bi
        else:
            best_s, best_i = top_k(np.concatenate([best_s, bs]), np.concatenate([best_i, bi]), want, index)
    if want != k and len(best_i):
        exact = index.exact_scores(q, best_i).astype(np.float32)
        best_s, best_i = top_k(exact, best_i, k, index)
    return best_s, best_i


def search_batch(index: QueryIndex, qm: F32, k: int, exclude: tuple[I64, I64], limit: int | None = None) -> tuple[F32, I64]:
    """Top ``k`` rows for each unit query row of ``qm``.

    ``exclude`` is a pair of arrays ``(query_row, row_id)`` naming rows a
    query must not return. Returns ``(scores, ids)`` of shape ``(Q, min(k, n))``
    padded with ``-inf`` / ``-1``.

    Rows are scored in cache-sized blocks; after the first block only the
    entries reaching a query's running k-th best score are kept (see
    ``_topk.prune``), so the selection costs about
    one comparison per score. Runs of whole blocks are split over threads
    (see :func:`finalfusion._threads.in_threads`) and their top ``k``
    merged: the blocks, and so every score, are the same as in a serial scan.
    """
    nq = len(qm)
    n = index.n if limit is None else min(index.n, max(0, limit))
    width = min(k, n)
    if nq == 0 or width == 0:
        return np.full((nq, width), NEG_INF, dtype=np.float32), np.full((nq, width), -1, dtype=np.int64)
    order = np.argsort(exclude[1], kind="stable")
    ex = (exclude[0][order], exclude[1][order])
    step = index.block_rows(nq)
    parts = in_threads(lambda a, b: scan_blocks(index, qm, width, ex, range(a, min(n, b), step), step), n, blas=True, align=step)
    if len(parts) == 1:
        return parts[0]
    return top_k_rows(np.concatenate([p[0] for p in parts], axis=1), np.concatenate([p[1] for p in parts], axis=1), width, index)


def scan_blocks(index: QueryIndex, qm: F32, width: int, exclude: tuple[I64, I64], starts: range, step: int) -> tuple[F32, I64]:
    """Running top ``width`` of every query over the row blocks ``start .. start + step`` (``exclude`` sorted by row)."""
    best_s = np.full((len(qm), width), NEG_INF, dtype=np.float32)
    best_i = np.full((len(qm), width), -1, dtype=np.int64)
    ex_q, ex_r = exclude
    bad = index.bad
    for lo in starts:
        hi = min(starts.stop, lo + step)
        s = index.batch_scores(qm, lo, hi)
        a, b = np.searchsorted(ex_r, [lo, hi])
        s[ex_q[a:b], ex_r[a:b] - lo] = NEG_INF
        a, b = np.searchsorted(bad, [lo, hi])
        if b > a:
            s[:, bad[a:b] - lo] = NEG_INF
        cand = prune(s, lo, best_s)
        if cand is None:
            continue
        rows, cand_s, cand_i = cand
        merged = top_k_rows(np.concatenate([best_s[rows], cand_s], axis=1), np.concatenate([best_i[rows], cand_i], axis=1), width, index)
        best_s[rows], best_i[rows] = merged
    return best_s, best_i


def results(index: QueryIndex, scores: F32 | list[float], ids: I64 | list[int]) -> SimilarityResults:
    """:class:`SimilarityResult` list for one query (cosines clipped to [-1, 1]: see :func:`clip_cosines`); arrays or lists of their values."""
    words = index.words
    values = scores.tolist() if isinstance(scores, np.ndarray) else scores
    rows = ids.tolist() if isinstance(ids, np.ndarray) else ids
    # clipped as Python floats (float32 values; -1 and 1 are float32 values too): clip_cosines without its numpy call
    return SimilarityResults([SimilarityResult(words[i], -1.0 if s < -1.0 else 1.0 if s > 1.0 else s) for s, i in zip(values, rows, strict=True)])


def clip_cosines(scores: F32) -> F32:
    """``scores`` clipped to [-1, 1]: a cosine computed in float32 (or from quantized rows) can come out at 1.0000002.

    Examples
    --------
    >>> clip_cosines(np.array([1.0000002, 0.5, -1.0000001], dtype=np.float32)).tolist()
    [1.0, 0.5, -1.0]
    """
    return np.clip(scores, scores.dtype.type(-1), scores.dtype.type(1))


def word_ids(word_index: Mapping[str, int] | Any, words: Iterable[str] | None) -> I64:
    """Row ids of the known words in ``words`` (unknown ones are ignored); ``word_index`` maps words to ids."""
    if not words:
        return np.zeros(0, np.int64)
    if isinstance(words, str):
        words = [words]
    get = word_index.get
    return np.asarray([i for i in map(get, words) if i is not None], dtype=np.int64)


def own_rows(vocab: Any, texts: Iterable[str]) -> I64:
    """The rows that are the query texts themselves by the word rule (``Vocab.own_row``): a query leaves them out of its results.

    A known word is its own row; so is a text that is exactly one token of a
    model vocabulary (``Hello`` is ``▁Hello`` for a SentencePiece model).
    """
    if isinstance(texts, str):
        texts = [texts]
    own = vocab.own_row
    return np.asarray([i for i in map(own, texts) if i is not None], dtype=np.int64)


def skip_pairs(skips: Sequence[I64]) -> tuple[I64, I64]:
    """``(query_row, row_id)`` arrays from one array of excluded ids per query."""
    if not skips:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    lens = [len(s) for s in skips]
    return np.repeat(np.arange(len(skips), dtype=np.int64), lens), (np.concatenate(skips).astype(np.int64) if sum(lens) else np.zeros(0, np.int64))


def finish(raw: tuple[F32, I64]) -> tuple[I64, F32]:
    """Public batch result: ``(ids, scores)`` with ``-1`` / ``nan`` padding."""
    s, i = raw
    s = clip_cosines(s)  # a new array
    s[i < 0] = np.nan
    return i, s
