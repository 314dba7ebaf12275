"""Scans over dense storage: BLAS matrix-vector and matrix-matrix products."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from finalfusion._threads import in_threads
from finalfusion.similarity._base import QueryIndex
from finalfusion.similarity._topk import F32, I64
from finalfusion.storage.ndarray import NdArray

__all__ = ["DenseIndex"]


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

    def batch_dots(self, qm: F32, lo: int, hi: int) -> F32:
        s: F32 = qm @ self.matrix[lo:hi].T
        return s
