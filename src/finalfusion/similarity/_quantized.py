"""Scans over quantized storage by asymmetric distance computation (ADC).

Per query one lookup table of dot products between the (projected) query
sub-vectors and the centroids; table entries are then summed per row over
its codes, without reconstructing the matrix. Batches of at least
:data:`ADC_BATCH_RECONSTRUCT` queries reconstruct row blocks once and
multiply instead.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from finalfusion._remote_rows import is_remote
from finalfusion._threads import in_threads
from finalfusion.similarity._base import QueryIndex
from finalfusion.similarity._topk import F32, I64
from finalfusion.storage.quantized import QuantizedArray

__all__ = ["ADC_BATCH_RECONSTRUCT", "ADC_CACHE_BYTES", "QuantizedIndex", "pair_codes"]

#: Quantized codes up to this size get a cached column-major copy for fast ADC.
ADC_CACHE_BYTES: Final = 1 << 30
#: Batches of at least this many queries on quantized storage reconstruct
#: row blocks once and multiply, instead of one ADC pass per query.
ADC_BATCH_RECONSTRUCT: Final = 8


class QuantizedIndex(QueryIndex):
    """Query index over :class:`~finalfusion.storage.QuantizedArray` storage.

    The cosine is that of the reconstructed row (projection and in-chunk
    norms included).
    """

    approximate = True

    def __init__(self, storage: QuantizedArray, words: Sequence[str]) -> None:
        codes = storage.quantized_embeddings
        if is_remote(codes):  # codes at a server: the words' codes are read once, in order, for every later query
            n = len(words)
            storage = QuantizedArray(storage.quantizer, codes[:n], None if storage.norms is None else storage.norms[:n])
        super().__init__(storage, words)
        self.quantized = storage
        self._codes_t: npt.NDArray[Any] | None = None
        self._codes_lock = threading.Lock()

    # -- the rows as scored ------------------------------------------------------------
    def scored_rows(self, lo: int, hi: int) -> F32:
        """Reconstructed rows ``lo:hi`` before the in-chunk norms (projection applied)."""
        blk = self.reconstruct_raw(lo, hi)
        proj = self.quantized.quantizer.projection
        return blk if proj is None else blk @ proj.T

    def scored_rows_at(self, ids: I64) -> F32:
        blk = self._reconstruct(self.quantized.quantized_embeddings[ids])
        proj = self.quantized.quantizer.projection
        return blk if proj is None else blk @ proj.T

    def row_norms(self) -> npt.NDArray[np.float64]:
        out = super().row_norms()
        if self.quantized.norms is not None:
            out[~np.isfinite(self.quantized.norms[: self.n])] = np.nan
        return out

    def row_signs(self) -> npt.NDArray[np.float64] | None:
        norms = self.quantized.norms
        return None if norms is None else np.sign(norms[: self.n]).astype(np.float64)

    def reconstruct_raw(self, lo: int, hi: int) -> F32:
        """Concatenated centroids of rows ``lo:hi`` (no projection, no norms).

        One ``np.take`` of whole centroid sub-vectors (viewed as opaque
        items) with ``code + j * k`` indices: about 3x faster than 2-D
        fancy indexing.
        """
        return self._reconstruct(self.quantized.quantized_embeddings[lo:hi])

    def _reconstruct(self, codes: npt.NDArray[Any]) -> F32:
        pq = self.quantized.quantizer
        m, k, ds = pq.quantizers.shape
        items = np.ascontiguousarray(pq.quantizers).reshape(m * k, ds).view(np.dtype((np.void, 4 * ds))).reshape(m * k)
        idx = codes.astype(np.intp)
        idx += np.arange(0, m * k, k, dtype=np.intp)
        raw: F32 = np.take(items, idx).view(np.float32).reshape(len(codes), m * ds)
        return raw

    # -- ADC -------------------------------------------------------------------------
    def codes_layout(self, lo: int, hi: int) -> npt.NDArray[Any]:
        """Codes of rows ``lo:hi`` column-major, two codes per ``uint16`` (cached when small)."""
        codes = self.quantized.quantized_embeddings
        if codes.nbytes > ADC_CACHE_BYTES:
            return pair_codes(codes[lo:hi])
        layout = self._codes_t
        if layout is None:
            with self._codes_lock:
                layout = self._codes_t
                if layout is None:
                    layout = self._codes_t = pair_codes(codes[: self.n])
        return layout[:, lo:hi]

    def adc_table(self, q: F32) -> F32:
        """``(m, 256)`` table: dot products of the projected query sub-vectors with every centroid."""
        pq = self.quantized.quantizer
        if pq.projection is not None:
            # (v P^T) . q == v . (q P)
            q = (q.astype(np.float64) @ pq.projection).astype(np.float32)
        m, k, ds = pq.quantizers.shape
        table = np.zeros((m, 256), dtype=np.float32)
        table[:, :k] = np.einsum("jd,jcd->jc", q.reshape(m, ds), pq.quantizers)
        return table

    def adc_scores(self, q: F32, lo: int, hi: int) -> F32:
        """Dot products of ``q`` with the reconstructed rows ``lo:hi`` by ADC.

        Large ranges are split over threads (numpy releases the GIL in
        ``take`` and ``add``); every row's sum runs in the same order either
        way, so the scores do not depend on the split.
        """
        table = self.adc_table(q)
        layout = self.codes_layout(lo, hi)
        out = np.zeros(hi - lo, dtype=np.float32)
        in_threads(lambda a, b: _adc_accumulate(table, layout[:, a:b], out[a:b]), hi - lo, blas=False)
        return out

    # -- scoring ---------------------------------------------------------------------
    def dots(self, q: F32, lo: int, hi: int) -> F32:
        return self.adc_scores(q, lo, hi)

    def dots_at(self, q: F32, ids: I64) -> F32:
        """ADC dot products with the rows ``ids``: the same table sums, in the same order, as :meth:`adc_scores`."""
        out = np.zeros(len(ids), dtype=np.float32)
        if len(ids):
            _adc_accumulate(self.adc_table(q), pair_codes(self.quantized.quantized_embeddings[ids]), out)
        return out

    def batch_dots(self, qm: F32, lo: int, hi: int) -> F32:
        if len(qm) >= ADC_BATCH_RECONSTRUCT:
            proj = self.quantized.quantizer.projection
            qp = qm if proj is None else (qm @ proj).astype(np.float32)
            s: F32 = qp @ self.reconstruct_raw(lo, hi).T
            return s
        if not len(qm):
            return np.zeros((0, hi - lo), np.float32)
        return np.stack([self.adc_scores(q, lo, hi) for q in qm])


def _adc_accumulate(table: F32, layout: npt.NDArray[Any], out: F32) -> None:
    """Add the ADC table entries of the codes in ``layout`` (see :func:`pair_codes`) to ``out``."""
    m = table.shape[0]
    tmp = np.empty(len(out), dtype=np.float32)
    pair = np.empty((256, 256), dtype=np.float32)
    flat = pair.reshape(-1)
    for p in range(m // 2):
        # one 256 KiB table per pair of subquantizers, built just before use so it is cache-hot:
        # pair[b, a] = table[2p, a] + table[2p + 1, b], indexed by the uint16 a + 256 b
        np.add(table[2 * p + 1][:, None], table[2 * p][None, :], out=pair)
        np.take(flat, layout[p], out=tmp, mode="wrap")  # in range: wrap checks least
        out += tmp
    if m % 2:
        np.take(table[m - 1], layout[-1], out=tmp, mode="wrap")
        out += tmp


def pair_codes(codes: npt.NDArray[np.uint8]) -> npt.NDArray[Any]:
    """Codes column-major with two adjacent codes read as one little-endian ``uint16``.

    Row ``p`` of the result holds ``codes[:, 2p] + 256 * codes[:, 2p + 1]``;
    with an odd number of subquantizers the last row holds the last code.

    Examples
    --------
    >>> pair_codes(np.array([[1, 2, 3], [4, 5, 6]], dtype=np.uint8)).tolist()
    [[513, 1284], [3, 6]]
    """
    c = np.ascontiguousarray(codes)
    n, m = c.shape
    even = m - m % 2
    out = np.empty((even // 2 + m % 2, n), dtype=np.uint16)
    if even:
        out[: even // 2] = c[:, :even].copy().view("<u2").T
    if m % 2:
        out[-1] = c[:, -1]
    return out
