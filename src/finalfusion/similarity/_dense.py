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

#: The group of rows whose places :meth:`DenseIndex.dots_at` keeps: BLAS kernels treat a row by
#: its position modulo a small unroll width (4 rows in OpenBLAS's sgemv), and the last rows of a
#: product take a tail path, so a candidate is scored at its place modulo this group in the scan,
#: in a product of whole groups (the scan's blocks and thread ranges start at multiples of 1024
#: rows; the kernels sum each row apart, so which rows fill the rest of a group does not matter). A BLAS
#: that splits one product over its own threads gives the rows at the edges of its ranges (a
#: handful) a tail path we cannot see: their scores can differ in the last bit.
ROW_GROUP: Final = 8


#: At most this many candidates are placed in their groups with Python ints rather than numpy arrays.
FEW_IDS: Final = 64


def _places_of_few(ids: list[int], step: int, n: int) -> tuple[list[int], list[int]]:
    """For each id its place in its group (counted from the start of its scan block), and the positions of the ids whose group an end cuts.

    Examples
    --------
    >>> _places_of_few([3, 1030, 1199], 1024, 1200)  # blocks 0-1023 and 1024-1199; 1199's group (1192-1199) is whole
    ([3, 6, 7], [])
    >>> _places_of_few([1197], 1024, 1197 + 2)  # the rows end at 1199: the group 1192-1199 is cut
    ([5], [0])
    >>> _places_of_few([5, 1030], 1020, 1200)  # the second block starts at 1020: 1030's group is 1028-1035
    ([5, 2], [])
    """
    g = ROW_GROUP
    if n <= step or step % g == 0:  # every block starts at a multiple of g: a group starts at one too, only the end of the rows cuts one
        last = max(ids)
        if last - last % g + g <= n:
            return [i % g for i in ids], []
    places = []
    cut: list[int] = []
    for j, i in enumerate(ids):
        offset = i % step  # in its scan block
        place = offset % g
        if i - place + g > n or offset - place + g > step:  # the group runs past the end of the rows or of the block
            cut.append(j)
        places.append(place)
    return places, cut


def _packed(ids: list[int], places: list[int]) -> tuple[list[int], list[int]]:
    """The rows of one product holding row ``ids[j]`` at a place congruent to ``places[j]`` modulo :data:`ROW_GROUP`, and each one's place.

    The product is a whole number of groups; the places no id takes hold a
    copy of the first id's row (any row will do: its score is not read).

    Examples
    --------
    >>> _packed([10, 20, 30], [3, 5, 3])  # two ids want place 3 of a group: a second group
    ([10, 10, 10, 10, 10, 20, 10, 10, 10, 10, 10, 30, 10, 10, 10, 10], [3, 5, 11])
    """
    count = [0] * ROW_GROUP
    slots: list[int] = []
    for p in places:
        slots.append(ROW_GROUP * count[p] + p)
        count[p] += 1
    rows = [ids[0]] * (ROW_GROUP * max(count))
    for s, i in zip(slots, ids, strict=True):
        rows[s] = i
    return rows, slots


def _packed_rows(ids: I64, places: I64) -> tuple[I64, I64]:
    """:func:`_packed` of every row of ``ids`` (``(Q, P)``, places in ``0 .. ROW_GROUP - 1``): ``(Q, R)`` rows, one width for all, and ``(Q, P)`` places.

    Examples
    --------
    >>> rows, slots = _packed_rows(np.array([[10, 20, 30], [40, 50, 60]]), np.array([[3, 5, 3], [0, 1, 2]]))
    >>> rows.shape, rows[0, [3, 5, 11]].tolist(), slots.tolist()
    ((2, 16), [10, 20, 30], [[3, 5, 11], [0, 1, 2]])
    """
    p = ids.shape[1]
    same = places[:, :, None] == np.arange(ROW_GROUP)  # (Q, P, ROW_GROUP): which place each candidate wants
    earlier = np.take_along_axis(np.cumsum(same, axis=1), places[:, :, None], axis=2)[:, :, 0] - 1  # candidates before it wanting that place
    slots: I64 = ROW_GROUP * earlier + places
    rows: I64 = np.repeat(ids[:, :1], ROW_GROUP * (int(earlier.max()) + 1) if p else 0, axis=1)
    np.put_along_axis(rows, slots, ids, axis=1)
    return rows, slots


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
        """Dot products with the rows ``ids``, each computed at its place in its group of the scan's block.

        A matrix-vector product's rounding depends on where a row sits in
        the call (kernels unroll over rows, the last rows of a call take a
        tail path), so ``matrix[ids] @ q`` can differ in the last bit from
        the scan. Each candidate is scored at its place in its group of
        :data:`ROW_GROUP` rows (counted from the start of its scan block),
        inside one product of whole groups that holds only the candidates'
        own rows (:func:`_packed_rows`; the kernels sum each row apart, so the
        other rows of a group do not change its score); a candidate whose
        group the end of its block cuts is scored at the end of a product of
        its own (after a few whole groups: a product of one row is a dot product).
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
        if len(ids) <= FEW_IDS:  # one query's candidates: the same places, found with Python ints (fewer numpy calls)
            return np.array(self.dots_at_few(q, ids.tolist()), dtype=np.float32)
        block = ids // step * step
        places = (ids - block) % ROW_GROUP
        cut = np.flatnonzero(ids - places + ROW_GROUP > np.minimum(block + step, self.n)).tolist()  # patched below
        rows, slots = _packed_rows(ids[None, :], places[None, :])
        out: F32 = (self.matrix[rows[0]] @ q)[slots[0]]
        for i in cut:
            out[i] = self._cut_dot(q, int(ids[i]), step)
        return out

    def dots_at_few(self, q: F32, ids: list[int]) -> list[float]:
        """:meth:`dots_at` of at most :data:`FEW_IDS` rows given as Python ints: each at its place in its group, one product of their rows alone.

        A row's score depends on its place in its group, not on the other
        rows of the group (a kernel's unrolled rows are summed apart), so the
        candidates' own rows are put into one product each at a place with
        its residue modulo :data:`ROW_GROUP` (:func:`_packed`): one query's
        few rows read from memory, not their whole groups.
        """
        if not ids or len(ids) > FEW_IDS or len(ids) * ROW_GROUP >= self.n:
            return super().dots_at_few(q, ids)
        step = self.block_rows(1)
        places, cut = _places_of_few(ids, step, self.n)
        rows, slots = _packed(ids, places)
        products = (self.matrix[rows] @ q).tolist()
        out = [products[s] for s in slots]
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
        """:meth:`dots_at` of every query row with its own ``P`` candidates, in one gather (the same places, the same products).

        Query ``j``'s candidates are gathered into ``rows[j]``, each at a place
        with its residue in its group (:func:`_packed_rows`), and scored by one
        matrix-vector product ``matrix[rows[j]] @ qm[j]``, the call
        :meth:`dots_at` makes; a group cut by the end of its scan block goes
        through :meth:`dots_at` itself.
        """
        q, p = ids.shape
        if not ids.size or p * ROW_GROUP >= self.n:
            return super().dots_at_rows(qm, ids)
        step = self.block_rows(1)
        block = ids // step * step
        places = (ids - block) % ROW_GROUP
        cut = ids - places + ROW_GROUP > np.minimum(block + step, self.n)  # scored again below
        rows, slots = _packed_rows(ids, places)
        gathered = self.matrix[rows]
        out: F32 = np.empty((q, p), dtype=np.float32)
        for j in range(q):
            out[j] = (gathered[j] @ qm[j])[slots[j]]
        for j, i in zip(*np.nonzero(cut), strict=True):
            out[j, i] = self.dots_at(qm[j], ids[j, i : i + 1])[0]
        return out
