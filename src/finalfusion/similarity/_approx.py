"""Queries through an approximate-nearest-neighbour index (``index=``): candidates from the index, scores from the scan.

An index (:mod:`finalfusion.ann`, or any object with the same ``search`` /
``check`` methods) only proposes candidate rows. Each query asks it for
``max(k, rerank)`` candidates plus one for every row the query may not
return (its skipped words and the rows the exact scan never returns, those
with NaN or infinity), drops those rows, and scores the rest with
:meth:`QueryIndex.scores_at`: the very values the exact single-query scan
computes for them. The top ``k`` is then selected as the scan selects it
(:mod:`finalfusion.similarity._topk`: descending score, ties in word
order), so an answer differs from the exact one only in the neighbours the
index missed. On quantized storage, ``rerank`` re-scores as the scan does:
the best ``max(k, rerank)`` candidates by ADC are scored again in float64
from their reconstructed rows.

A zero query (every row scores 0, the answer is the first words in word
order) and queries restricted to the first rows (gensim's
``restrict_vocab``) are answered by the exact scan.
"""

from __future__ import annotations

import functools
from typing import Any, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from finalfusion._threads import run_tasks, threads_for
from finalfusion.similarity._base import QueryIndex
from finalfusion.similarity._topk import F32, FEW_SCORES, I64, NEG_INF, top_few, top_k, top_k_rows

__all__ = ["FEW_CANDIDATES", "RESCORE_CHUNK", "AnnSearch", "approx_search", "approx_search_batch", "as_ann", "is_ann"]

#: Fewest queries of a batch re-scored on one thread.
RESCORE_CHUNK = 64
#: At most this many proposed, excluded and bad rows together are filtered with Python sets (one query's candidates).
FEW_CANDIDATES = 256


@runtime_checkable
class AnnSearch(Protocol):
    """What a query needs of an index (:class:`finalfusion.ann.AnnIndex` has it).

    An index may also have ``_search_one(q, k)``: the ``k`` row ids
    (``-1`` for none) of one finite unit float32 query as a list of Python
    ints, without the argument checks of ``search``; a single query then
    uses it.
    """

    def search(self, queries: Any, k: int) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]:
        """Row ids ``(Q, k)`` (padded with ``-1``) and scores of the approximate neighbours of unit query rows."""
        ...

    def check(self, emb: Any) -> None:
        """Raise :class:`~finalfusion.errors.StaleIndexError` unless the index was built for ``emb``."""
        ...


def is_ann(obj: object) -> bool:
    """Whether ``obj`` is an index these queries can use (``search`` and ``check`` methods).

    Examples
    --------
    >>> is_ann(object())
    False
    """
    return callable(getattr(obj, "search", None)) and callable(getattr(obj, "check", None))


def as_ann(obj: object) -> AnnSearch:
    """``obj`` as an index, or ``TypeError`` naming what is expected.

    Examples
    --------
    >>> as_ann("hnsw")
    Traceback (most recent call last):
    ...
    TypeError: index= takes an index from finalfusion.ann.build_index or load_index (or None, or False), not str
    """
    if not is_ann(obj):
        raise TypeError(f"index= takes an index from finalfusion.ann.build_index or load_index (or None, or False), not {type(obj).__name__}")
    return obj  # type: ignore[return-value]


def _candidates(index: QueryIndex, found: npt.NDArray[np.int64], exclude: I64) -> I64:
    """The proposed row ids that the query may return (valid, not excluded, not a bad row), each once."""
    bad = index.bad
    if len(found) + len(exclude) + len(bad) <= FEW_CANDIDATES:  # one query's few: Python sets beat numpy's per-call set-up
        return np.array(_few_candidates(index.n, found.tolist(), exclude, bad), dtype=np.int64)
    ids = found[(found >= 0) & (found < index.n)].astype(np.int64, copy=False)
    if len(ids) > 1 and len(np.unique(ids)) < len(ids):  # a backend may repeat a row
        ids = np.unique(ids)
    drop = np.concatenate([exclude, bad]) if len(bad) else exclude
    if not len(drop) or not len(ids):
        return ids
    if len(ids) * len(drop) <= 1 << 16:  # few: one comparison matrix beats np.isin's set-up
        kept: I64 = ids[~(ids[:, None] == drop[None, :]).any(axis=1)]
    else:
        kept = ids[~np.isin(ids, drop)]
    return kept


def _few_candidates(n: int, found: list[int], exclude: I64, bad: I64) -> list[int]:
    """:func:`_candidates` of a few proposed ids, with Python ints and a set.

    Examples
    --------
    >>> _few_candidates(5, [3, -1, 4, 3, 7, 0], np.array([4]), np.zeros(0, np.int64))
    [3, 0]
    """
    seen = set(exclude.tolist())
    if len(bad):
        seen.update(bad.tolist())
    kept: list[int] = []
    for i in found:
        if 0 <= i < n and i not in seen:
            seen.add(i)
            kept.append(i)
    return kept


def _select(index: QueryIndex, q: F32, ids: I64, k: int, rerank: int | None) -> tuple[F32, I64]:
    """The top ``k`` of the candidates ``ids`` as the exact scan ranks them (``rerank`` on quantized storage: float64 re-scoring)."""
    want = k if rerank is None or not index.approximate else max(k, rerank)
    best_s, best_i = top_k(index.scores_at(q, ids), ids, want, index)
    if want != k and len(best_i):
        exact = index.exact_scores(q, best_i).astype(np.float32)
        best_s, best_i = top_k(exact, best_i, k, index)
    return best_s, best_i


def _pool(index: QueryIndex, k: int, rerank: int | None, skipped: int) -> int:
    """Candidates to ask for: ``max(k, rerank)`` plus one per row a query may not return."""
    want = k if rerank is None else max(k, rerank)
    return min(index.n, want + skipped + len(index.bad))


def approx_search(
    index: QueryIndex, ann: AnnSearch, q: F32, k: int, exclude: I64, rerank: int | None = None
) -> tuple[F32, I64] | tuple[list[float], list[int]] | None:
    """Top ``k`` rows for one unit query from the candidates of ``ann``; ``None`` when the exact scan must answer (zero query).

    The scores and ids are arrays, or lists (the same values) for one query's few candidates.
    """
    if k == 0 or index.n == 0:
        return np.zeros(0, np.float32), np.zeros(0, np.int64)
    if not (len(q) and q.item(0)) and not q.any():  # a zero query (the first component answers for nearly every other one, without a reduction)
        return None
    want = _pool(index, k, rerank, len(exclude))
    one = getattr(ann, "_search_one", None)  # an AnnIndex: the backend's ids as Python ints, without the public checks (q is unit and finite)
    found: list[int] | I64 = one(q, want) if one is not None else np.asarray(ann.search(q[None, :], want)[0][0])
    bad = index.bad
    if (rerank is None or not index.approximate) and len(found) + len(exclude) + len(bad) <= FEW_CANDIDATES:
        # one query's few candidates as Python lists from the backend's ids to the results: the fewest numpy calls
        ids = _few_candidates(index.n, found if isinstance(found, list) else found.tolist(), exclude, bad)
        if len(ids) <= FEW_SCORES:
            top = top_few(index.scores_at_few(q, ids), ids, k, index) if ids else ([], [])
            if top is not None:
                return top
        return _select(index, q, np.array(ids, dtype=np.int64), k, rerank)
    return _select(index, q, _candidates(index, np.asarray(found, dtype=np.int64), exclude), k, rerank)


def approx_search_batch(
    index: QueryIndex,
    ann: AnnSearch,
    qm: F32,
    k: int,
    exclude: tuple[I64, I64],
    rerank: int | None = None,
    active: npt.NDArray[np.bool_] | None = None,
) -> tuple[F32, I64, npt.NDArray[np.bool_]]:
    """Top ``k`` rows of every unit query row of ``qm``, like :func:`~finalfusion.similarity._scan.search_batch`.

    Returns ``(scores, ids, answered)`` of shape ``(Q, min(k, n))`` padded
    with ``-inf`` / ``-1``; ``answered`` is ``False`` for the zero queries,
    which the caller answers with the exact scan. Rows not ``active`` are
    left as padding (and count as answered).
    """
    nq = len(qm)
    width = min(k, index.n)
    best_s = np.full((nq, width), NEG_INF, dtype=np.float32)
    best_i = np.full((nq, width), -1, dtype=np.int64)
    wanted = np.ones(nq, dtype=bool) if active is None else np.asarray(active, dtype=bool)
    nonzero = qm.any(axis=1)
    answered = ~wanted | nonzero | (width == 0)
    rows = np.flatnonzero(wanted & nonzero)
    if width == 0 or not len(rows):
        return best_s, best_i, answered
    order = np.argsort(exclude[0], kind="stable")
    ex_q, ex_r = exclude[0][order], exclude[1][order]
    bounds = np.searchsorted(ex_q, np.arange(nq + 1))
    most = int(np.diff(bounds).max()) if nq else 0
    found, _ = ann.search(np.ascontiguousarray(qm[rows]), _pool(index, k, rerank, most))
    found = np.asarray(found, dtype=np.int64)
    keep = _kept(index, found, rows, ex_q, ex_r, nq)
    one_pass = rerank is None or not index.approximate  # else: ADC, then float64 re-scoring, query by query

    def answer(lo: int, hi: int) -> None:  # queries lo:hi of ``rows``; each writes its own output rows
        if one_pass:
            ids = np.where(keep[lo:hi], found[lo:hi], 0)
            scores = index.scores_at_rows(np.ascontiguousarray(qm[rows[lo:hi]]), ids)
            scores[~keep[lo:hi]] = NEG_INF
            s, i = top_k_rows(scores, ids, width, index)
            best_s[rows[lo:hi], : s.shape[1]], best_i[rows[lo:hi], : i.shape[1]] = s, i
            return
        for j, r in enumerate(rows[lo:hi].tolist(), lo):
            s, i = _select(index, qm[r], found[j][keep[j]], width, rerank)
            best_s[r, : len(s)], best_i[r, : len(i)] = s, i

    # the re-scoring gathers the candidates' rows and multiplies them (numpy releases the GIL in both)
    step = RESCORE_CHUNK
    run_tasks((functools.partial(answer, lo, min(len(rows), lo + step)) for lo in range(0, len(rows), step)), threads_for())
    return best_s, best_i, answered


def _kept(index: QueryIndex, found: I64, rows: I64, ex_q: I64, ex_r: I64, nq: int) -> npt.NDArray[np.bool_]:
    """Which proposed ids ``found[j]`` query ``rows[j]`` may return: valid, each once, not excluded for it, not a bad row."""
    n = index.n
    keep = (found >= 0) & (found < n)
    if found.shape[1] > 1:  # a backend may repeat a row: keep its first place
        order = np.argsort(found, axis=1, kind="stable")
        ranked = np.take_along_axis(found, order, axis=1)
        again = np.zeros(found.shape, dtype=bool)
        np.put_along_axis(again, order[:, 1:], ranked[:, 1:] == ranked[:, :-1], axis=1)
        keep &= ~again
    if len(index.bad):
        keep &= ~np.isin(found, index.bad)
    if len(ex_q):
        position = np.full(nq, -1, dtype=np.int64)
        position[rows] = np.arange(len(rows))
        mine = position[ex_q] >= 0
        banned = position[ex_q[mine]] * n + ex_r[mine]
        keep &= ~np.isin(np.arange(len(rows), dtype=np.int64)[:, None] * n + found, banned)
    return keep
