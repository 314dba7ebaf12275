"""Top-k selection with finalfusion-rust's tie rule: descending score, equal scores in word order.

Every function takes the word ranks through a :class:`Ranked` (an index
whose ``rank[i]`` is the position of word ``i`` in code-point order); they
are only read where a tie straddles a cut.
"""

from __future__ import annotations

from typing import Any, Final, Protocol

import numpy as np
import numpy.typing as npt

__all__ = ["F32", "FEW_SCORES", "I64", "NEG_INF", "TOP_K_BLOCK", "Ranked", "order_by_score", "prune", "top_few", "top_k", "top_k_rows"]

F32 = npt.NDArray[np.float32]
I64 = npt.NDArray[np.int64]

#: Block length for the block maxima that pre-select the top k of a long score vector.
TOP_K_BLOCK: Final = 1024
#: The score of an excluded row.
NEG_INF: Final = np.float32(-np.inf)
_MINUS_INF: Final = float("-inf")
#: At most this many scores are ranked with Python's sort (one query's candidates), more with numpy.
FEW_SCORES: Final = 64


class Ranked(Protocol):
    """Anything with word ranks (the tie-breaker)."""

    @property
    def rank(self) -> I64:
        """Position of every word in code-point order."""
        ...


def top_k(scores: F32, ids: I64 | int, k: int, rank: Ranked, *, preselect: bool = True) -> tuple[F32, I64]:
    """The ``k`` best of ``scores`` (``-inf`` = excluded), ordered by (-score, word).

    ``ids`` are the global row ids of ``scores`` or, as an ``int``, the id of
    ``scores[0]`` for a contiguous block. Work and memory are linear in
    ``len(scores)`` (plus a sort of the scores tied at the cut), whatever
    the ties: the block-maxima pre-selection runs at most once and only
    when it shrinks the array.

    Examples
    --------
    >>> class Words:
    ...     rank = np.arange(10_000, dtype=np.int64)[::-1]  # word order: the last row first
    >>> s, ids = top_k(np.zeros(10_000, np.float32), 0, 3, Words())  # all scores tied
    >>> ids.tolist()
    [9999, 9998, 9997]
    """
    m = len(scores)
    if 0 < m <= FEW_SCORES and k > 0:
        few = _top_few(scores, ids, k, rank)
        if few is not None:
            return few
    gid = (lambda sel: sel + ids) if isinstance(ids, int) else (lambda sel: ids[sel])
    if preselect and k > 0 and m >= 4 * TOP_K_BLOCK * k:
        # at least k blocks have a maximum >= the k-th largest block maximum t0, so every
        # score of the top k (ties included) is >= t0: select on those few only
        maxima = scores[: m - m % TOP_K_BLOCK].reshape(-1, TOP_K_BLOCK).max(axis=1)
        t0 = np.partition(maxima, len(maxima) - k)[len(maxima) - k]
        if t0 > NEG_INF:
            sel = np.flatnonzero(scores >= t0)
            if len(sel) < m:  # never recurse on an array that does not shrink (all scores tied)
                return top_k(scores[sel], gid(sel).astype(np.int64, copy=False), k, rank, preselect=False)
    if k >= m:
        sel = np.flatnonzero(scores > NEG_INF) if m else np.zeros(0, np.int64)
    elif k == 0:
        sel = np.zeros(0, np.int64)
    else:
        part = np.argpartition(scores, m - k)[m - k :]
        t = scores[part].min()
        if t == NEG_INF:
            sel = part[scores[part] > NEG_INF]
        elif np.count_nonzero(scores >= t) == k:
            sel = part
        else:  # a tie straddles the cut: keep the tied words first in word order
            above = np.flatnonzero(scores > t)
            tied = np.flatnonzero(scores == t)
            need = k - len(above)
            r = rank.rank[gid(tied)]
            sel = np.concatenate([above, tied[np.argsort(r, kind="stable")[:need]]])
    s = scores[sel]
    g = gid(sel).astype(np.int64, copy=False)
    return order_by_score(s, g, rank)


def _top_few(scores: F32, ids: I64 | int, k: int, rank: Ranked) -> tuple[F32, I64] | None:
    """:func:`top_k` of a few scores with Python's sort: :func:`top_few` as arrays.

    Examples
    --------
    >>> class Words:
    ...     rank = np.array([2, 1, 0], dtype=np.int64)  # word order: the last row first
    >>> s, i = _top_few(np.array([0.5, 0.9, 0.5], np.float32), np.array([0, 1, 2]), 2, Words())
    >>> s.tolist(), i.tolist()
    ([0.8999999761581421, 0.5], [1, 2])
    """
    values = scores.tolist()
    top = top_few(values, list(range(ids, ids + len(values))) if isinstance(ids, int) else ids.tolist(), k, rank)
    if top is None:
        return None
    return np.array(top[0], dtype=np.float32), np.array(top[1], dtype=np.int64)


def top_few(values: list[float], gids: list[int], k: int, rank: Ranked) -> tuple[list[float], list[int]] | None:
    """:func:`top_k` of a few float32 scores and their row ids as Python lists (``None`` when a score is NaN: numpy's order decides those).

    Sorted by descending score; only when equal scores meet within the first
    ``k`` + 1 are the word ranks read and everything sorted by (-score, word).
    One query's candidates take this path whole, without numpy calls.

    Examples
    --------
    >>> class Words:
    ...     rank = np.array([2, 1, 0], dtype=np.int64)  # word order: the last row first
    >>> top_few([0.5, 0.9, 0.5], [0, 1, 2], 2, Words())
    ([0.9, 0.5], [1, 2])
    """
    total = sum(values)  # NaN only when a score is NaN (or both infinities are there: then each score is looked at)
    if total != total and not all(v == v for v in values):
        return None
    order = sorted(range(len(values)), key=values.__getitem__, reverse=True)  # stable: equal scores keep their order
    while order and values[order[-1]] == _MINUS_INF:  # never returned
        order.pop()
    best = [values[j] for j in order[: k + 1]]
    if len(set(best)) < len(best):  # equal scores (adjacent once sorted) within the first k + 1
        ranks = dict(zip(order, rank.rank[np.array([gids[j] for j in order], dtype=np.int64)].tolist(), strict=True))
        order.sort(key=lambda j: (-values[j], ranks[j]))
    top = order[:k]
    return [values[j] for j in top], [gids[j] for j in top]


def order_by_score(s: F32, g: I64, rank: Ranked) -> tuple[F32, I64]:
    """Sort by descending score, equal scores by word."""
    order = np.argsort(-s, kind="stable")
    s, g = s[order], g[order]
    if len(s) > 1 and bool((s[1:] == s[:-1]).any()):
        order = np.lexsort((rank.rank[g], -s))
        s, g = s[order], g[order]
    return s, g


def top_k_rows(s: F32, ids: I64, k: int, rank: Ranked) -> tuple[F32, I64]:
    """Row-wise :func:`top_k` of a (Q, W) score matrix with global ids; pads with ``-inf`` / ``-1``."""
    q, w = s.shape
    if w > k:
        part = np.argpartition(s, w - k, axis=1)[:, w - k :]
        ss = np.take_along_axis(s, part, 1)
        ii = np.take_along_axis(ids, part, 1)
        t = ss.min(axis=1) if k else np.full(q, np.inf, np.float32)
        straddle: Any = np.flatnonzero((t > NEG_INF) & (np.count_nonzero(s >= t[:, None], axis=1) > k)) if k else []
        for r in straddle:
            ss[r], ii[r] = top_k(s[r], ids[r], k, rank)
    else:
        ss, ii = s.copy(), ids.copy()
    order = np.argsort(-ss, axis=1, kind="stable")
    ss, ii = np.take_along_axis(ss, order, 1), np.take_along_axis(ii, order, 1)
    if ss.shape[1] > 1:
        ties = np.flatnonzero(((ss[:, 1:] == ss[:, :-1]) & (ss[:, 1:] > NEG_INF)).any(axis=1))
        for r in ties:
            valid = ss[r] > NEG_INF
            nv = int(valid.sum())
            ss[r, :nv], ii[r, :nv] = order_by_score(ss[r, :nv], ii[r, :nv], rank)
    ii[ss == NEG_INF] = -1
    return ss, ii


def prune(s: F32, lo: int, best_s: F32) -> tuple[I64, F32, I64] | None:
    """Entries of a block that can still enter the running top k.

    Returns ``(rows, scores, ids)``: the queries with at least one such entry
    and their entries as padded ``(len(rows), w)`` arrays (``-inf`` / ``-1``),
    or ``None`` when no entry qualifies. The bar is the running k-th best
    score; while that is not known yet (first block), the block's own k-th
    best, found with ``np.partition``. Entries equal to the bar are kept so
    that ties can be broken by word.

    Examples
    --------
    >>> s = np.zeros((2, 8), dtype=np.float32)
    >>> s[1, 2:4] = 0.75, 0.5
    >>> best = np.array([[0.5], [0.5]], dtype=np.float32)  # the running k-th best (k = 1)
    >>> rows, cand_s, cand_i = prune(s, 100, best)
    >>> rows.tolist(), cand_s.tolist(), cand_i.tolist()
    ([1], [[0.75, 0.5]], [[102, 103]])
    >>> prune(s, 100, np.array([[0.5], [0.875]], dtype=np.float32)) is None
    True
    """
    q, b = s.shape
    k = best_s.shape[1]
    tau = best_s[:, -1]
    if k and b > k and bool((tau == NEG_INF).any()):
        tau = np.maximum(tau, np.partition(s, b - k, axis=1)[:, b - k])
    keep = s >= tau[:, None]
    if bool((tau == NEG_INF).any()):
        keep &= s > NEG_INF
    flat = np.flatnonzero(keep)
    if not len(flat):
        return None
    if len(flat) * 4 > s.size:
        return np.arange(q), s, np.broadcast_to(np.arange(lo, lo + b, dtype=np.int64), (q, b))
    r = flat // b
    cols = flat - r * b
    counts = np.bincount(r, minlength=q)
    rows = np.flatnonzero(counts)
    slot = np.cumsum(counts > 0) - 1  # position of every query among ``rows``
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    pos = np.arange(len(flat)) - starts[r]
    w = int(counts.max())
    out_s = np.full((len(rows), w), NEG_INF, dtype=np.float32)
    out_i = np.full((len(rows), w), -1, dtype=np.int64)
    out_s[slot[r], pos] = s.reshape(-1)[flat]
    out_i[slot[r], pos] = cols + lo
    return rows, out_s, out_i
