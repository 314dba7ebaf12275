"""Scans over dense storage: BLAS matrix-vector and matrix-matrix products."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import numpy as np

from finalfusion._threads import in_threads
from finalfusion.similarity._base import QueryIndex
from finalfusion.similarity._topk import F32, I64
from finalfusion.storage.ndarray import NdArray

__all__ = ["ROW_GROUP", "DenseIndex"]

#: Rows gathered around a candidate by :meth:`DenseIndex.dots_at`: BLAS kernels treat a row by
#: its position modulo a small unroll width, so a candidate is scored inside the aligned group of
#: rows it belongs to in the scan (the scan's thread ranges are multiples of 1024 rows).
ROW_GROUP: Final = 32


class DenseIndex(QueryIndex):
    """Query index over :class:`~finalfusion.storage.NdArray` storage (the word rows of its matrix)."""

    def __init__(self, storage: NdArray, words: Sequence[str]) -> None:
        super().__init__(storage, words)
        self.matrix: F32 = storage.matrix[: self.n]

    def scored_rows(self, lo: int, hi: int) -> F32:
        return self.matrix[lo:hi]

    def scored_rows_at(self, ids: I64) -> F32:
        rows: F32 = self.matrix[ids]
        return rows

    def dots(self, q: F32, lo: int, hi: int) -> F32:
        """One matrix-vector product, split over threads only as the BLAS policy allows (see :mod:`finalfusion._threads`)."""
        matrix = self.matrix
        s: F32 = np.empty(hi - lo, dtype=np.float32)
        in_threads(lambda a, b: np.matmul(matrix[lo + a : lo + b], q, out=s[a:b]), hi - lo, blas=True)
        return s

    def dots_at(self, q: F32, ids: I64) -> F32:
        """Dot products with the rows ``ids``, each computed inside its aligned group of the scan's block.

        A matrix-vector product's rounding depends on where a row sits in
        the call (kernels unroll over rows, the last rows of a call take a
        tail path), so ``matrix[ids] @ q`` can differ in the last bit from
        the scan. Each candidate's group of :data:`ROW_GROUP` rows, counted
        from the start of its scan block (and cut at the block's end), is
        scored instead: full groups in one call, cut groups alone.
        """
        out: F32 = np.empty(len(ids), dtype=np.float32)
        if not len(ids):
            return out
        step = self.block_rows(1)
        block = ids // step * step
        start = block + (ids - block) // ROW_GROUP * ROW_GROUP
        stop = np.minimum(np.minimum(start + ROW_GROUP, block + step), self.n)
        groups, first = np.unique(start, return_index=True)
        ends = stop[first]
        full = ends - groups == ROW_GROUP
        at = np.empty(len(groups), dtype=np.int64)  # position of each group's first row in its product
        fg = groups[full]
        if len(fg):
            rows = (fg[:, None] + np.arange(ROW_GROUP)).reshape(-1)
            s_full = self.matrix[rows] @ q
            at[full] = np.arange(len(fg)) * ROW_GROUP
        cut = np.flatnonzero(~full)
        s_cut = [self.matrix[groups[g] : ends[g]] @ q for g in cut.tolist()]
        which = np.searchsorted(groups, start)
        offset = ids - start
        is_full = full[which]
        if len(fg):
            out[is_full] = s_full[at[which[is_full]] + offset[is_full]]
        for j, g in enumerate(cut.tolist()):
            sel = np.flatnonzero(which == g)
            out[sel] = s_cut[j][offset[sel]]
        return out

    def batch_dots(self, qm: F32, lo: int, hi: int) -> F32:
        s: F32 = qm @ self.matrix[lo:hi].T
        return s
