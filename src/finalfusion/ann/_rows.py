"""The rows an approximate index holds: the unit-normalised word rows, block by block.

An index covers the rows of the known words (``emb.vocab.words`` order, row
id = word id); subword and bucket rows are never indexed. Each row is scored
as the exact queries score it (:mod:`finalfusion.similarity._base`): the
stored row (quantized storage: reconstructed, projection applied) over its
norm, times the sign of its in-chunk norm. Rows with NaN or infinity, and
rows of norm zero (whose cosine with anything is 0), are left out, so an
index never returns them.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Final

import numpy as np
import numpy.typing as npt

from finalfusion.similarity._index import query_index
from finalfusion.similarity._protocol import Queryable
from finalfusion.similarity._topk import F32, I64
from finalfusion.storage.quantized import QuantizedArray

__all__ = ["BLOCK_BYTES", "RowSource"]

#: float64 bytes of one block of rows while they are normalised (64 MiB).
BLOCK_BYTES: Final = 1 << 26


class RowSource:
    """The unit word rows of ``emb``, reconstructed and normalised one block at a time.

    Examples
    --------
    >>> import numpy as np
    >>> from finalfusion import Embeddings, NdArray, SimpleVocab
    >>> emb = Embeddings(NdArray(np.array([[3, 4], [0, 0], [1, 0]], dtype=np.float32)), SimpleVocab(["a", "b", "c"]))
    >>> [(ids.tolist(), rows.tolist()) for ids, rows in RowSource(emb).blocks()]
    [([0, 2], [[0.6000000238418579, 0.800000011920929], [1.0, 0.0]])]
    """

    def __init__(self, emb: Queryable, block_rows: int | None = None) -> None:
        self._index = query_index(emb)
        self.n = self._index.n
        self.dims = self._index.dims
        storage = emb.storage
        #: The quantized storage, or ``None`` for dense storage.
        self.quantized = storage if isinstance(storage, QuantizedArray) else None
        self._norms = storage.norms if isinstance(storage, QuantizedArray) else None
        self.block_rows = block_rows if block_rows is not None else max(1, BLOCK_BYTES // max(1, 8 * self.dims))

    def _unit(self, rows: F32, lo: int, hi: int | None, ids: I64 | None) -> tuple[npt.NDArray[np.bool_], F32]:
        blk = np.asarray(rows, dtype=np.float64)
        with np.errstate(over="ignore", invalid="ignore"):
            norms = np.sqrt(np.einsum("ij,ij->i", blk, blk))
        ok = np.isfinite(norms) & (norms > 0)
        sign = None
        if self._norms is not None:
            chunk = np.asarray(self._norms[lo:hi] if ids is None else self._norms[ids], dtype=np.float64)
            ok &= np.isfinite(chunk) & (chunk != 0)
            sign = np.sign(chunk[ok])
        with np.errstate(over="ignore", invalid="ignore"):
            unit = blk[ok] / norms[ok, None]
        if sign is not None:
            unit *= sign[:, None]
        return ok, unit.astype(np.float32)

    def blocks(self) -> Iterator[tuple[I64, F32]]:
        """``(row ids, unit rows)`` of every indexable word row, in blocks of at most :attr:`block_rows` rows."""
        for lo in range(0, self.n, self.block_rows):
            hi = min(self.n, lo + self.block_rows)
            ok, unit = self._unit(self._index.scored_rows(lo, hi), lo, hi, None)
            if len(unit):
                yield lo + np.flatnonzero(ok).astype(np.int64), unit

    def rows_at(self, ids: I64) -> tuple[I64, F32]:
        """``(row ids, unit rows)`` of the indexable rows among ``ids`` (sorted, few: a training sample)."""
        ids = np.asarray(ids, dtype=np.int64)
        out_ids, out_rows = [], []
        for a in range(0, len(ids), self.block_rows):
            part = ids[a : a + self.block_rows]
            ok, unit = self._unit(self._index.scored_rows_at(part), 0, None, part)
            out_ids.append(part[ok])
            out_rows.append(unit)
        if not out_ids:
            return np.zeros(0, np.int64), np.zeros((0, self.dims), np.float32)
        return np.concatenate(out_ids), np.concatenate(out_rows)

    def sample(self, count: int, seed: int) -> F32:
        """About ``count`` unit rows at distinct random row ids (all rows when ``count >= n``), minus the unindexable ones."""
        if count >= self.n:
            ids = np.arange(self.n, dtype=np.int64)
        else:
            ids = np.sort(np.random.default_rng(seed).choice(self.n, size=count, replace=False)).astype(np.int64)
        return self.rows_at(ids)[1]
