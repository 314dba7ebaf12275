"""Scans over dense storage: BLAS matrix-vector and matrix-matrix products."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import numpy as np

from finalfusion._threads import in_threads
from finalfusion.similarity._base import QueryIndex
from finalfusion.similarity._topk import F32, I64
from finalfusion.storage.ndarray import NdArray

__all__ = ["FEW_IDS", "ROW_GROUP", "DenseIndex"]

#: Rows gathered around a candidate by :meth:`DenseIndex.dots_at`: BLAS kernels treat a row by
#: its position modulo a small unroll width (4 rows in OpenBLAS's sgemv), and the last rows of a
#: product take a tail path, so a candidate is scored inside the aligned group of rows it belongs
#: to in the scan (the scan's blocks and thread ranges start at multiples of 1024 rows). A BLAS
#: that splits one product over its own threads gives the rows at the edges of its ranges (a
#: handful) a tail path we cannot see: their scores can differ in the last bit.
ROW_GROUP: Final = 8
_GROUP = np.arange(ROW_GROUP, dtype=np.int64)


#: At most this many candidates are placed in their groups with Python ints rather than numpy arrays.
FEW_IDS: Final = 64


def _groups_of_few(ids: list[int], step: int, n: int) -> tuple[list[int], list[int], list[int]]:
    """For each id: the first row of its group, the positions of ids whose group the end of a scan block cuts, and where each id's score lands.

    Examples
    --------
    >>> _groups_of_few([3, 1030, 1199], 1024, 1200)  # blocks 0-1023 and 1024-1199; 1199's group (1192-1199) is whole
    ([0, 1024, 1192], [], [3, 14, 23])
    >>> _groups_of_few([1197], 1024, 1197 + 2)  # the block ends at 1199: the group 1192-1199 is cut
    ([1191], [0], [6])
    >>> _groups_of_few([5, 1030], 1020, 1200)  # the second block starts at 1020: 1030's group is 1028-1035
    ([0, 1028], [], [5, 10])
    """
    g = ROW_GROUP
    if n <= step or step % g == 0:  # every block starts at a multiple of g: a group starts at one too, only the end of the rows cuts one
        start = [i - i % g for i in ids]
        if max(start) + g <= n:
            return start, [], [g * j + i % g for j, i in enumerate(ids)]
    start = []
    cut: list[int] = []
    at: list[int] = []
    for j, i in enumerate(ids):
        offset = i % step  # in its scan block
        first = i - offset % g
        if first + g > n or offset - offset % g + g > step:  # the group runs past the end of the rows or of the block
            cut.append(j)
            first = max(0, min(i - offset + step, n) - g)  # any in-range rows will do: patched by the caller
        start.append(first)
        at.append(g * j + i - first)
    return start, cut, at


class DenseIndex(QueryIndex):
    """Query index over :class:`~finalfusion.storage.NdArray` storage (the word rows of its matrix)."""

    def __init__(self, storage: NdArray, words: Sequence[str]) -> None:
        super().__init__(storage, words)
        self.matrix: F32 = storage.matrix[: self.n]
        #: Every run of :data:`ROW_GROUP` consecutive rows, as a read-only ``(n - ROW_GROUP + 1, ROW_GROUP, dims)`` view:
        #: one fancy index gathers the groups of a few candidates.
        self._groups: F32 | None = None
        if self.n >= ROW_GROUP:
            rows, cols = self.matrix.strides
            self._groups = np.lib.stride_tricks.as_strided(
                self.matrix, shape=(self.n - ROW_GROUP + 1, ROW_GROUP, self.dims), strides=(rows, rows, cols), writeable=False
            )

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
        from the start of its scan block, is scored instead: the full groups
        gathered into one product (each at a multiple of :data:`ROW_GROUP`),
        a group cut by the end of its block at the end of a product of its
        own (after a few whole groups: a product of one row is a dot product).
        With more candidates than one in :data:`ROW_GROUP` rows, the scan's
        own products of the blocks that hold them are cheaper.
        """
        if not len(ids):
            return np.zeros(0, dtype=np.float32)
        step = self.block_rows(1)
        if len(ids) * ROW_GROUP >= self.n:
            whole: F32 = np.empty(len(ids), dtype=np.float32)
            for lo in np.unique(ids // step * step).tolist():
                sel = np.flatnonzero((ids >= lo) & (ids < lo + step))
                whole[sel] = self.dots(q, lo, min(self.n, lo + step))[ids[sel] - lo]
            return whole
        if len(ids) <= FEW_IDS:  # one query's candidates: the same groups, found with Python ints (fewer numpy calls)
            return np.array(self.dots_at_few(q, ids.tolist()), dtype=np.float32)
        block = ids // step * step
        start = block + (ids - block) // ROW_GROUP * ROW_GROUP
        stop = np.minimum(block + step, self.n)
        cut = np.flatnonzero(start + ROW_GROUP > stop).tolist()
        if len(cut):
            start[cut] = np.maximum(0, stop[cut] - ROW_GROUP)  # any in-range rows will do: these are patched below
        rows = (start[:, None] + _GROUP).reshape(-1)
        out: F32 = (self.matrix[rows] @ q)[np.arange(0, ROW_GROUP * len(ids), ROW_GROUP) + (ids - start)]
        for i in cut:
            out[i] = self._cut_dot(q, int(ids[i]), step)
        return out

    def dots_at_few(self, q: F32, ids: list[int]) -> list[float]:
        """:meth:`dots_at` of at most :data:`FEW_IDS` rows given as Python ints: their groups found with Python ints, one product."""
        groups = self._groups
        if groups is None or not ids or len(ids) > FEW_IDS or len(ids) * ROW_GROUP >= self.n:
            return super().dots_at_few(q, ids)
        step = self.block_rows(1)
        first, cut, at = _groups_of_few(ids, step, self.n)
        products = (groups[first].reshape(-1, self.dims) @ q).tolist()  # the rows matrix[first[j] + 0 .. 7], j = 0, 1, ...
        out = [products[a] for a in at]
        for i in cut:
            out[i] = float(self._cut_dot(q, ids[i], step))
        return out

    def _cut_dot(self, q: F32, row: int, step: int) -> np.float32:
        """The score of ``row`` whose group the end of its block cuts: a product of a few whole groups and the cut one, ending where the scan's ends."""
        b = row // step * step
        lo = max(b, b + (row - b) // ROW_GROUP * ROW_GROUP - 4 * ROW_GROUP)
        dot: np.float32 = (self.matrix[lo : min(b + step, self.n)] @ q)[row - lo]
        return dot

    def batch_dots(self, qm: F32, lo: int, hi: int) -> F32:
        s: F32 = qm @ self.matrix[lo:hi].T
        return s

    def dots_at_rows(self, qm: F32, ids: I64) -> F32:
        """:meth:`dots_at` of every query row with its own ``P`` candidates, in one gather (same groups, same products).

        Query ``j``'s candidate groups are gathered into ``rows[j]`` and scored
        by one matrix-vector product ``matrix[rows[j]] @ qm[j]``, the call
        :meth:`dots_at` makes; a group cut by the end of its scan block goes
        through :meth:`dots_at` itself.
        """
        q, p = ids.shape
        if not ids.size or p * ROW_GROUP >= self.n:
            return super().dots_at_rows(qm, ids)
        step = self.block_rows(1)
        block = ids // step * step
        start = block + (ids - block) // ROW_GROUP * ROW_GROUP
        cut = start + ROW_GROUP > np.minimum(block + step, self.n)
        start[cut] = 0  # any full group will do: these are scored again below
        groups = self.matrix[(start[:, :, None] + _GROUP).reshape(q, p * ROW_GROUP)]
        at = np.arange(0, ROW_GROUP * p, ROW_GROUP) + np.where(cut, 0, ids - start)
        out: F32 = np.empty((q, p), dtype=np.float32)
        for j in range(q):
            out[j] = (groups[j] @ qm[j])[at[j]]
        for j, i in zip(*np.nonzero(cut), strict=True):
            out[j, i] = self.dots_at(qm[j], ids[j, i : i + 1])[0]
        return out
