"""What every query index knows about its rows: norms, bad rows, word ranks, block sizes.

A :class:`QueryIndex` is the cached, lazily built state for similarity
queries over the word rows of one :class:`~finalfusion.Embeddings`. It is
an attribute of the embeddings (built on first use, dropped with them, never
pickled or copied). The storage-specific scans are its subclasses
:class:`DenseIndex` and
:class:`QuantizedIndex`.
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Final

import numpy as np
import numpy.typing as npt

from finalfusion.similarity._topk import F32, I64
from finalfusion.storage.ndarray import Storage

__all__ = ["BATCH_SCORE_ELEMENTS", "SCAN_BLOCK_BYTES", "UNIT_TOLERANCE", "QueryIndex"]

#: Matrix bytes scanned per BLAS call for single queries.
SCAN_BLOCK_BYTES: Final = 1 << 30
#: Score-matrix elements (queries x rows) kept at once by batch queries: 2 MiB of
#: float32, so that the selection after each matrix product reads the scores from cache.
BATCH_SCORE_ELEMENTS: Final = 1 << 19
#: Relative tolerance under which stored rows count as unit length.
UNIT_TOLERANCE: Final = 1e-5
#: Rows whose norms are computed at once (64 MiB of float32 rows).
_NORM_BLOCK_BYTES: Final = 1 << 26
#: Rows with a norm outside [EXACT_BELOW, EXACT_ABOVE] are scored in float64 (see :class:`QueryIndex`).
EXACT_BELOW: Final = 2.0**-64
EXACT_ABOVE: Final = 2.0**64


class QueryIndex(ABC):
    """Cached, lazily built state for similarity queries over the word rows of a storage.

    The facts about the rows (norms, ranks) are computed on first use under
    a lock, so concurrent queries from threads are safe. They assume the
    storage is not modified in place afterwards.

    Scores are float32 dot products times the row's ``1 / norm``. For rows
    whose norm lies outside ``[2^-64, 2^64]`` that is not exact -- the
    inverse of a tiny (e.g. subnormal) row's norm overflows float32 and its
    dot products underflow; a huge row's dot products can overflow -- so
    such rows (none in a file of unit rows) are scored again in float64
    from their normalised values, block by block, and rank where their
    cosines say. Rows with NaN or infinity are never returned.
    """

    #: Whether scores are approximations worth re-ranking exactly (``rerank=``).
    approximate: bool = False

    def __init__(self, storage: Storage, words: Sequence[str]) -> None:
        self.words: list[str] = list(words)
        self.n = len(self.words)
        self.dims = storage.shape[1]
        self.storage = storage
        self._lock = threading.Lock()
        self._facts: tuple[F32 | None, I64, I64, npt.NDArray[np.float64]] | None = None
        self._rank: I64 | None = None

    # -- what a storage type provides ------------------------------------------------
    @abstractmethod
    def scored_rows(self, lo: int, hi: int) -> F32:
        """Rows ``lo:hi`` as the scans score them (before any per-row scale)."""

    def scored_rows_at(self, ids: I64) -> F32:
        """The scored rows ``ids`` (few: the rows scored in float64)."""
        if not len(ids):
            return np.zeros((0, self.dims), np.float32)
        return np.concatenate([self.scored_rows(i, i + 1) for i in ids.tolist()])

    @abstractmethod
    def dots(self, q: F32, lo: int, hi: int) -> F32:
        """Dot products of ``q`` with the scored rows ``lo:hi``."""

    @abstractmethod
    def batch_dots(self, qm: F32, lo: int, hi: int) -> F32:
        """Dot products of the queries ``qm`` (Q, d) with the scored rows ``lo:hi``, as (Q, hi - lo)."""

    @abstractmethod
    def dots_at(self, q: F32, ids: I64) -> F32:
        """Dot products of ``q`` with the scored rows ``ids``, bit for bit as :meth:`dots` of the single-query scan computes them."""

    def dots_at_few(self, q: F32, ids: list[int]) -> list[float]:
        """:meth:`dots_at` of a few row ids given as Python ints (one query's candidates), as Python floats (the float32 values)."""
        dots: list[float] = self.dots_at(q, np.array(ids, dtype=np.int64)).tolist()
        return dots

    def dots_at_rows(self, qm: F32, ids: I64) -> F32:
        """``(Q, P)`` dot products of query row ``j`` with the scored rows ``ids[j]``: :meth:`dots_at` row by row."""
        out: F32 = np.empty(ids.shape, dtype=np.float32)
        for j in range(len(ids)):
            out[j] = self.dots_at(qm[j], ids[j])
        return out

    def row_signs(self) -> npt.NDArray[np.float64] | None:
        """Signs every scored row is multiplied by, or ``None`` when all are positive."""
        return None

    def row_norms(self) -> npt.NDArray[np.float64]:
        """l2 norm of every scored row (NaN or inf for rows that are never returned)."""
        out = np.empty(self.n, dtype=np.float64)
        step = max(1, _NORM_BLOCK_BYTES // max(1, 4 * self.dims))
        for lo in range(0, self.n, step):
            hi = min(self.n, lo + step)
            blk = self.scored_rows(lo, hi)
            with np.errstate(over="ignore", invalid="ignore"):
                out[lo:hi] = np.sqrt(np.einsum("ij,ij->i", blk, blk, dtype=np.float64))
        return out

    # -- lazily computed facts about the rows -----------------------------------------
    def _row_facts(self) -> tuple[F32 | None, I64, I64, npt.NDArray[np.float64]]:
        facts = self._facts
        if facts is None:
            with self._lock:
                facts = self._facts
                if facts is None:
                    facts = self._facts = self._compute_row_facts()
        return facts

    def _compute_row_facts(self) -> tuple[F32 | None, I64, I64, npt.NDArray[np.float64]]:
        norms = self.row_norms()
        bad = ~np.isfinite(norms)
        ok = np.where(bad, 0.0, norms)
        unit = (ok == 0) | (np.abs(ok - 1.0) <= UNIT_TOLERANCE)
        signs = self.row_signs()
        if signs is not None:
            unit &= signs >= 0
        scale = None
        exact = np.zeros(0, np.int64)
        exact_scale = np.zeros(0, np.float64)
        if not unit.all():
            inverse = np.divide(1.0, ok, out=np.zeros_like(ok), where=ok > 0)
            multiplier = inverse if signs is None else signs * inverse
            exact = np.flatnonzero((ok > 0) & ((ok < EXACT_BELOW) | (ok > EXACT_ABOVE))).astype(np.int64)
            exact_scale = multiplier[exact]
            multiplier[exact] = 0.0  # their float32 scores are replaced (see exact_patch)
            scale = multiplier.astype(np.float32)
        return scale, np.flatnonzero(bad).astype(np.int64), exact, exact_scale

    @property
    def scale(self) -> F32 | None:
        """Per-row multiplier turning dot products into cosines, or ``None`` when rows are unit."""
        return self._row_facts()[0]

    @property
    def bad(self) -> I64:
        """Rows with NaN or infinite values; never returned."""
        return self._row_facts()[1]

    @property
    def rank(self) -> I64:
        """Position of every word in code-point order (the tie-breaker)."""
        rank = self._rank
        if rank is None:
            with self._lock:
                rank = self._rank
                if rank is None:
                    order = sorted(range(self.n), key=self.words.__getitem__)
                    rank = np.empty(self.n, dtype=np.int64)
                    rank[np.asarray(order, dtype=np.int64)] = np.arange(self.n, dtype=np.int64)
                    self._rank = rank
        return rank

    def _exact_in(self, lo: int, hi: int) -> tuple[I64, npt.NDArray[np.float64]] | None:
        """The rows of ``lo:hi`` scored in float64 and their multipliers (sign / norm), or ``None``."""
        _, _, exact, mult = self._row_facts()
        if not len(exact):
            return None
        a, b = np.searchsorted(exact, [lo, hi])
        if a == b:
            return None
        return exact[a:b], mult[a:b]

    # -- scoring ---------------------------------------------------------------------
    def block_rows(self, queries: int) -> int:
        """Rows scored at once for ``queries`` queries."""
        if queries <= 1:
            return max(1024, SCAN_BLOCK_BYTES // max(1, 4 * self.dims))
        return max(256, BATCH_SCORE_ELEMENTS // queries)

    def scores(self, q: F32, lo: int, hi: int) -> F32:
        """Cosine of unit ``q`` with rows ``lo:hi``."""
        s = self.dots(q, lo, hi)
        scale = self.scale
        if scale is not None:
            with np.errstate(invalid="ignore", over="ignore"):  # NaN/inf rows are excluded afterwards
                s *= scale[lo:hi]
            exact = self._exact_in(lo, hi)
            if exact is not None:
                ids, mult = exact
                s[ids - lo] = (self.scored_rows_at(ids).astype(np.float64) @ q.astype(np.float64)) * mult
        return s

    def scores_at(self, q: F32, ids: I64) -> F32:
        """Cosines of unit ``q`` with the rows ``ids``: the values :meth:`scores` gives those rows in the single-query scan."""
        return self._scaled(q, self.dots_at(q, ids), ids)

    def scores_at_few(self, q: F32, ids: list[int]) -> list[float]:
        """:meth:`scores_at` of a few row ids given as Python ints, as Python floats (one query's candidates: fewer numpy calls)."""
        dots = self.dots_at_few(q, ids)
        if self.scale is None:
            return dots
        scores: list[float] = self._scaled(q, np.array(dots, dtype=np.float32), np.array(ids, dtype=np.int64)).tolist()
        return scores

    def _scaled(self, q: F32, s: F32, ids: I64) -> F32:
        """The dot products ``s`` of ``q`` with the rows ``ids`` as cosines (in place): times the row scale, float64 rows scored again."""
        scale = self.scale
        if scale is not None and len(ids):
            with np.errstate(invalid="ignore", over="ignore"):
                s *= scale[ids]
            _, _, exact, mult = self._row_facts()
            if len(exact):
                pos = np.minimum(np.searchsorted(exact, ids), len(exact) - 1)
                hit = np.flatnonzero(exact[pos] == ids)
                if len(hit):
                    rows = ids[hit]
                    s[hit] = (self.scored_rows_at(rows).astype(np.float64) @ q.astype(np.float64)) * mult[pos[hit]]
        return s

    def scores_at_rows(self, qm: F32, ids: I64) -> F32:
        """``(Q, P)`` cosines of unit query row ``j`` with the rows ``ids[j]``: the values :meth:`scores_at` gives, row by row."""
        s = self.dots_at_rows(qm, ids)
        scale = self.scale
        if scale is not None and ids.size:
            with np.errstate(invalid="ignore", over="ignore"):
                s *= scale[ids]
            _, _, exact, _ = self._row_facts()
            if len(exact):  # rows scored in float64: the few queries that have one, as scores_at scores them
                for j in np.flatnonzero(np.isin(ids, exact).any(axis=1)).tolist():
                    s[j] = self.scores_at(qm[j], ids[j])
        return s

    def batch_scores(self, qm: F32, lo: int, hi: int) -> F32:
        """Cosines of unit queries ``qm`` (Q, d) with rows ``lo:hi`` as a (Q, hi - lo) matrix."""
        s = self.batch_dots(qm, lo, hi)
        scale = self.scale
        if scale is not None:
            with np.errstate(invalid="ignore", over="ignore"):
                s *= scale[None, lo:hi]
            exact = self._exact_in(lo, hi)
            if exact is not None:
                ids, mult = exact
                s[:, ids - lo] = (qm.astype(np.float64) @ self.scored_rows_at(ids).astype(np.float64).T) * mult[None, :]
        return s

    def rows(self, ids: I64) -> F32:
        """The stored rows ``ids`` (quantized: reconstructed, norms applied)."""
        return np.asarray(self.storage.rows(ids), dtype=np.float32)

    def exact_scores(self, q: F32, ids: I64) -> npt.NDArray[np.float64]:
        """Cosines of ``q`` with the fully reconstructed rows ``ids``, in float64."""
        rows = np.asarray(self.storage.rows(ids), dtype=np.float64)
        norms = np.sqrt(np.einsum("ij,ij->i", rows, rows))
        dots = rows @ q.astype(np.float64)
        out: npt.NDArray[np.float64] = np.divide(dots, norms, out=np.zeros_like(dots), where=norms > 0)
        return out
