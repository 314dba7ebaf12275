"""Nearest neighbours, analogies and analogy evaluation (FORMAT.md §10).

The public API is :data:`__all__` plus the query methods of
:class:`~finalfusion.Embeddings`; the other functions here are the
machinery behind them.

Semantics
---------
* Candidates are the **word rows** ``0 .. len(vocab)`` (never subword rows),
  optionally only the first ``restrict`` of them.
* Similarity is the **cosine** between the query and a row. Query vectors
  are l2-normalised. Rows are used as stored when they are unit length (as
  in every finalfusion file written by Rust or Python); otherwise the row
  norms are computed once, lazily, and every score is divided by its row's
  norm (a zero row scores 0, a row with NaN/inf is never returned).
* Quantized storage is ranked by asymmetric distance computation (ADC) over
  the codes, not by reconstructing the matrix: per query one lookup table of
  dot products between the (projected) query sub-vectors and the centroids,
  then table entries summed per row. The cosine is that of the
  reconstructed row (projection and in-chunk norms included).
* Order: descending similarity, ties broken by word in code-point order (as
  finalfusion-rust does). ``k`` may be anything ``>= 0``; with more than
  the number of candidates the whole ranking is returned.
* Memory: rows are scanned in blocks; a single query keeps at most one
  block of scores plus the running top ``k``; batches keep a bounded
  ``queries x block`` score matrix.

The cached per-embeddings state (row norms, word ranks, ADC code layout) is
built on first use under a lock, so concurrent queries from threads are
safe. It assumes the matrix is not modified in place afterwards; call
:func:`clear_cache` if you do.
"""

from __future__ import annotations

import itertools
import operator
import os
import threading
import weakref
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, TypeVar

import numpy as np
import numpy.typing as npt

from finalfusion._threads import CPUS
from finalfusion.errors import FormatError
from finalfusion.storage.ndarray import NdArray
from finalfusion.storage.quantized import QuantizedArray

if TYPE_CHECKING:
    from finalfusion.embeddings import Embeddings

__all__ = [
    "AnalogyEvaluation",
    "AnalogySection",
    "SimilarityResult",
    "clear_cache",
    "evaluate_analogies",
]

T = TypeVar("T")
F32 = npt.NDArray[np.float32]
I64 = npt.NDArray[np.int64]

#: Matrix bytes scanned per BLAS call for single queries.
SCAN_BLOCK_BYTES: Final = 1 << 30
#: Score-matrix elements (queries x rows) kept at once by batch queries: 2 MiB of
#: float32, so that the selection after each matrix product reads the scores from cache.
BATCH_SCORE_ELEMENTS: Final = 1 << 19
#: Quantized codes up to this size get a cached column-major copy for fast ADC.
ADC_CACHE_BYTES: Final = 1 << 30
#: Threads for one scan: the rows of an ADC pass, of a dense matrix-vector product and
#: of a batch are split over this many threads (numpy releases the GIL in take, add and
#: matmul). ``None`` (the default): as many as there are cores (at most 4) for ADC, and for
#: dense products only when the environment pins BLAS to one thread (see
#: :func:`scan_threads`); otherwise BLAS parallelises them itself. Set it to 1 to scan on
#: the calling thread only.
THREADS: int | None = None
#: Environment variables that set the BLAS thread count, in the order OpenBLAS reads them.
BLAS_THREAD_VARS: Final = ("OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")
#: The fewest rows worth a thread.
THREAD_ROWS: Final = 1 << 16
#: Block length for the block maxima that pre-select the top k of a long score vector.
TOP_K_BLOCK: Final = 1024
#: Relative tolerance under which stored rows count as unit length.
UNIT_TOLERANCE: Final = 1e-5
#: Batches of at least this many queries on quantized storage reconstruct
#: row blocks once and multiply, instead of one ADC pass per query.
ADC_BATCH_RECONSTRUCT: Final = 8

_NEG_INF: Final = np.float32(-np.inf)
_CACHE_LOCK = threading.Lock()
_INDEXES: weakref.WeakKeyDictionary[Embeddings, QueryIndex] = weakref.WeakKeyDictionary()


@dataclass(order=True)
class SimilarityResult:
    """One neighbour: ``result.word`` and ``result.similarity``.

    As in finalfusion-python 0.7, results compare (and sort) by similarity
    only.

    Examples
    --------
    >>> r = SimilarityResult("Potsdam", 0.88)
    >>> r.word, r.similarity, SimilarityResult("a", 0.5) < r
    ('Potsdam', 0.88, True)
    """

    word: str = field(compare=False)
    similarity: float


def check_k(k: Any) -> int:
    """``k`` as an ``int``; ``ValueError`` if negative, ``TypeError`` if not an integer."""
    k = operator.index(k)
    if k < 0:
        raise ValueError(f"k must be >= 0, got {k}")
    return int(k)


def unit_query(vector: npt.ArrayLike, dims: int) -> F32:
    """The query as a unit ``float32`` vector (a zero vector stays zero)."""
    v = np.asarray(vector, dtype=np.float64)
    if v.shape != (dims,):
        raise ValueError(f"query vector must have shape ({dims},), got {v.shape}")
    if not np.isfinite(v).all():
        raise ValueError("query vector contains NaN or infinity")
    norm = float(np.sqrt(v.dot(v)))
    return (v / norm if norm > 0 else v).astype(np.float32)


def unit_rows(matrix: npt.ArrayLike, dims: int) -> F32:
    """Queries as unit ``float32`` rows (zero rows stay zero)."""
    m = np.asarray(matrix, dtype=np.float32)
    if m.ndim != 2 or m.shape[1] != dims:
        raise ValueError(f"query matrix must have shape (n, {dims}), got {m.shape}")
    if not np.isfinite(m).all():
        raise ValueError("query matrix contains NaN or infinity")
    norms = np.sqrt(np.einsum("ij,ij->i", m, m, dtype=np.float64))
    scale = np.divide(1.0, norms, out=np.zeros_like(norms), where=norms > 0)
    out: F32 = (m * scale[:, None]).astype(np.float32)
    return out


# ------------------------------------------------------------------------------------
# the per-embeddings index
# ------------------------------------------------------------------------------------
class QueryIndex:
    """Cached, lazily built state for similarity queries over one :class:`Embeddings`."""

    def __init__(self, emb: Embeddings) -> None:
        self.words: list[str] = list(emb.vocab.words)
        self.n = len(self.words)
        self.dims = emb.dims
        self.storage = emb.storage
        self._lock = threading.Lock()
        self._scale: F32 | None = None
        self._bad: I64 | None = None
        self._rank: I64 | None = None
        self._codes_t: npt.NDArray[Any] | None = None
        self._rows_checked = False
        self.dense: F32 | None = None
        self.quantized: QuantizedArray | None = None
        if isinstance(self.storage, NdArray):
            self.dense = self.storage.matrix[: self.n]
        elif isinstance(self.storage, QuantizedArray):
            self.quantized = self.storage
        else:
            raise TypeError(f"similarity queries need NdArray or QuantizedArray storage, not {type(self.storage).__name__}")

    # -- lazily computed facts about the rows -----------------------------------------
    def _check_rows(self) -> None:
        if self._rows_checked:
            return
        with self._lock:
            if self._rows_checked:
                return
            norms = self._row_norms()
            bad = ~np.isfinite(norms)
            ok = np.where(bad, 0.0, norms)
            unit = (ok == 0) | (np.abs(ok - 1.0) <= UNIT_TOLERANCE)
            if self.quantized is not None and self.quantized.norms is not None:
                signs = np.sign(self.quantized.norms[: self.n]).astype(np.float64)
                unit &= signs >= 0
            else:
                signs = np.ones(self.n)
            if not unit.all():
                self._scale = (signs * np.divide(1.0, ok, out=np.zeros_like(ok), where=ok > 0)).astype(np.float32)
            self._bad = np.flatnonzero(bad).astype(np.int64)
            self._rows_checked = True

    def _row_norms(self) -> npt.NDArray[np.float64]:
        """l2 norm of every candidate row as scored (quantized: before the in-chunk norm)."""
        out = np.empty(self.n, dtype=np.float64)
        step = max(1, (1 << 26) // max(1, 4 * self.dims))
        for lo in range(0, self.n, step):
            hi = min(self.n, lo + step)
            if self.dense is not None:
                blk = self.dense[lo:hi]
            else:
                assert self.quantized is not None
                blk = self.reconstruct_raw(lo, hi)
                proj = self.quantized.quantizer.projection
                if proj is not None:
                    blk = blk @ proj.T
            with np.errstate(over="ignore", invalid="ignore"):
                out[lo:hi] = np.sqrt(np.einsum("ij,ij->i", blk, blk, dtype=np.float64))
        if self.quantized is not None and self.quantized.norms is not None:
            nz = self.quantized.norms[: self.n]
            out[~np.isfinite(nz)] = np.nan
        return out

    @property
    def scale(self) -> F32 | None:
        """Per-row multiplier turning dot products into cosines, or ``None`` when rows are unit."""
        self._check_rows()
        return self._scale

    @property
    def bad(self) -> I64:
        """Rows with NaN or infinite values; never returned."""
        self._check_rows()
        assert self._bad is not None
        return self._bad

    @property
    def rank(self) -> I64:
        """Position of every word in code-point order (the tie-breaker)."""
        if self._rank is None:
            with self._lock:
                if self._rank is None:
                    order = sorted(range(self.n), key=self.words.__getitem__)
                    rank = np.empty(self.n, dtype=np.int64)
                    rank[np.asarray(order, dtype=np.int64)] = np.arange(self.n, dtype=np.int64)
                    self._rank = rank
        return self._rank

    # -- ADC -------------------------------------------------------------------------
    def _codes_layout(self, lo: int, hi: int) -> npt.NDArray[Any]:
        """Codes of rows ``lo:hi`` column-major, two codes per ``uint16`` (cached when small)."""
        assert self.quantized is not None
        codes = self.quantized.quantized_embeddings
        if codes.nbytes <= ADC_CACHE_BYTES:
            if self._codes_t is None:
                with self._lock:
                    if self._codes_t is None:
                        self._codes_t = pair_codes(codes[: self.n])
            return self._codes_t[:, lo:hi]
        return pair_codes(codes[lo:hi])

    def adc_table(self, q: F32) -> F32:
        """``(m, 256)`` table: dot products of the projected query sub-vectors with every centroid."""
        assert self.quantized is not None
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
        layout = self._codes_layout(lo, hi)
        out = np.zeros(hi - lo, dtype=np.float32)
        in_threads(lambda a, b: _adc_accumulate(table, layout[:, a:b], out[a:b]), hi - lo, blas=False)
        return out

    def reconstruct_raw(self, lo: int, hi: int) -> F32:
        """Concatenated centroids of rows ``lo:hi`` (no projection, no norms).

        One ``np.take`` of whole centroid sub-vectors (viewed as opaque
        items) with ``code + j * k`` indices: about 3x faster than 2-D
        fancy indexing.
        """
        assert self.quantized is not None
        pq = self.quantized.quantizer
        m, k, ds = pq.quantizers.shape
        items = np.ascontiguousarray(pq.quantizers).reshape(m * k, ds).view(np.dtype((np.void, 4 * ds))).reshape(m * k)
        idx = self.quantized.quantized_embeddings[lo:hi].astype(np.intp)
        idx += np.arange(0, m * k, k, dtype=np.intp)
        raw: F32 = np.take(items, idx).view(np.float32).reshape(hi - lo, m * ds)
        return raw

    # -- scoring ---------------------------------------------------------------------
    def block_rows(self, queries: int) -> int:
        if queries <= 1:
            return max(1024, SCAN_BLOCK_BYTES // max(1, 4 * self.dims))
        return max(256, BATCH_SCORE_ELEMENTS // queries)

    def scores(self, q: F32, lo: int, hi: int) -> F32:
        """Cosine of unit ``q`` with rows ``lo:hi``."""
        if self.dense is not None:
            dense = self.dense
            s: F32 = np.empty(hi - lo, dtype=np.float32)
            in_threads(lambda a, b: np.matmul(dense[lo + a : lo + b], q, out=s[a:b]), hi - lo, blas=True)
        else:
            s = self.adc_scores(q, lo, hi)
        scale = self.scale
        if scale is not None:
            with np.errstate(invalid="ignore", over="ignore"):  # NaN/inf rows are excluded afterwards
                s *= scale[lo:hi]
        return s

    def batch_scores(self, qm: F32, lo: int, hi: int) -> F32:
        """Cosines of unit queries ``qm`` (Q, d) with rows ``lo:hi`` as a (Q, hi - lo) matrix."""
        if self.dense is not None:
            s: F32 = qm @ self.dense[lo:hi].T
        elif len(qm) >= ADC_BATCH_RECONSTRUCT:
            assert self.quantized is not None
            proj = self.quantized.quantizer.projection
            qp = qm if proj is None else (qm @ proj).astype(np.float32)
            s = qp @ self.reconstruct_raw(lo, hi).T
        else:
            s = np.stack([self.adc_scores(q, lo, hi) for q in qm]) if len(qm) else np.zeros((0, hi - lo), np.float32)
        scale = self.scale
        if scale is not None:
            with np.errstate(invalid="ignore", over="ignore"):
                s *= scale[None, lo:hi]
        return s

    def exact_scores(self, q: F32, ids: I64) -> npt.NDArray[np.float64]:
        """Cosines of ``q`` with the fully reconstructed rows ``ids``, in float64."""
        rows = np.asarray(self.storage.rows(ids), dtype=np.float64)
        norms = np.sqrt(np.einsum("ij,ij->i", rows, rows))
        dots = rows @ q.astype(np.float64)
        out: npt.NDArray[np.float64] = np.divide(dots, norms, out=np.zeros_like(dots), where=norms > 0)
        return out


def scan_threads(blas: bool) -> int:
    """Threads for one scan: :data:`THREADS` if set, else the CPUs this process may use (at most 4).

    Work made of BLAS calls (``blas=True``) is split over threads only when
    the environment pins BLAS to one thread: a multi-threaded BLAS called
    from several threads at once oversubscribes the cores.

    Examples
    --------
    >>> scan_threads(blas=False) == min(4, CPUS)  # THREADS left at None: the CPUs this process may use
    True
    """
    if THREADS is not None:
        return max(1, THREADS)
    cores = min(4, CPUS)
    if not blas:
        return cores
    setting = next((os.environ[v] for v in BLAS_THREAD_VARS if os.environ.get(v)), None)
    return cores if setting is not None and setting.strip() == "1" else 1


def in_threads(work: Callable[[int, int], T], rows: int, blas: bool, align: int = 1024) -> list[T]:
    """``work(a, b)`` over consecutive ranges covering ``0 .. rows``, one per thread.

    Uses up to :func:`scan_threads` threads, none with fewer than
    :data:`THREAD_ROWS` rows; range bounds are multiples of ``align``. With
    one range ``work(0, rows)`` runs on the calling thread. Returns the
    results in range order.

    Examples
    --------
    >>> in_threads(lambda a, b: (a, b), 10, blas=False)
    [(0, 10)]
    """
    parts = max(1, min(scan_threads(blas), rows // THREAD_ROWS))
    if parts == 1 or getattr(_WORKER, "busy", False):  # a pool worker never waits for the pool
        return [work(0, rows)]
    bounds = [0, *(rows * i // parts // align * align for i in range(1, parts)), rows]
    pool = _scan_pool()
    futures = [pool.submit(_as_worker, work, a, b) for a, b in itertools.pairwise(bounds[1:])]
    try:
        first = work(bounds[0], bounds[1])  # the calling thread takes the first range
    finally:
        wait(futures)  # even on an error (or Ctrl-C): no range is still being written when this returns
    return [first, *(f.result() for f in futures)]


_WORKER = threading.local()
_POOL: ThreadPoolExecutor | None = None


def _as_worker(work: Callable[[int, int], T], a: int, b: int) -> T:
    _WORKER.busy = True
    return work(a, b)


def _scan_pool() -> ThreadPoolExecutor:
    """The process-wide pool for :func:`in_threads` (kept, so its threads are already spread over the cores)."""
    global _POOL
    with _CACHE_LOCK:
        if _POOL is None:
            _POOL = ThreadPoolExecutor(max(4, os.cpu_count() or 1), thread_name_prefix="finalfusion-scan")
        return _POOL


def _forget_pool() -> None:
    global _POOL
    _POOL = None  # a forked child has none of the parent's threads


os.register_at_fork(after_in_child=_forget_pool)


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


def query_index(emb: Embeddings) -> QueryIndex:
    """The cached :class:`QueryIndex` of ``emb`` (built on first use).

    Kept in a weak-key map rather than on the object, so that embeddings
    stay picklable and copies do not share a cache.
    """
    with _CACHE_LOCK:
        idx = _INDEXES.get(emb)
        if idx is None:
            idx = _INDEXES[emb] = QueryIndex(emb)
    return idx


def clear_cache(emb: Embeddings) -> None:
    """Forget the cached row norms, word ranks and code layout of ``emb``.

    Needed only after modifying the storage matrix in place.

    Examples
    --------
    >>> import numpy as np
    >>> from finalfusion import Embeddings
    >>> from finalfusion.storage import NdArray
    >>> from finalfusion.vocab import SimpleVocab
    >>> emb = Embeddings(NdArray(np.eye(2, dtype=np.float32)), SimpleVocab(["a", "b"]))
    >>> emb.storage.matrix[0] = [3.0, 4.0]
    >>> clear_cache(emb)
    >>> round(emb.embedding_similarity([1.0, 0.0], k=1)[0].similarity, 3)
    0.6
    """
    with _CACHE_LOCK:
        _INDEXES.pop(emb, None)


# ------------------------------------------------------------------------------------
# top-k selection with finalfusion-rust's tie rule
# ------------------------------------------------------------------------------------
def top_k(scores: F32, ids: I64 | int, k: int, rank: QueryIndex) -> tuple[F32, I64]:
    """The ``k`` best of ``scores`` (``-inf`` = excluded), ordered by (-score, word).

    ``ids`` are the global row ids of ``scores`` or, as an ``int``, the id of
    ``scores[0]`` for a contiguous block.
    """
    m = len(scores)
    gid = (lambda sel: sel + ids) if isinstance(ids, int) else (lambda sel: ids[sel])
    if k > 0 and m >= 4 * TOP_K_BLOCK * k:
        # at least k blocks have a maximum >= the k-th largest block maximum t0, so every
        # score of the top k (ties included) is >= t0: select on those few only
        maxima = scores[: m - m % TOP_K_BLOCK].reshape(-1, TOP_K_BLOCK).max(axis=1)
        t0 = np.partition(maxima, len(maxima) - k)[len(maxima) - k]
        if t0 > _NEG_INF:
            sel = np.flatnonzero(scores >= t0)
            return top_k(scores[sel], gid(sel).astype(np.int64, copy=False), k, rank)
    if k >= m:
        sel = np.flatnonzero(scores > _NEG_INF) if m else np.zeros(0, np.int64)
    elif k == 0:
        sel = np.zeros(0, np.int64)
    else:
        part = np.argpartition(scores, m - k)[m - k :]
        t = scores[part].min()
        if t == _NEG_INF:
            sel = part[scores[part] > _NEG_INF]
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


def order_by_score(s: F32, g: I64, rank: QueryIndex) -> tuple[F32, I64]:
    """Sort by descending score, equal scores by word."""
    order = np.argsort(-s, kind="stable")
    s, g = s[order], g[order]
    if len(s) > 1 and bool((s[1:] == s[:-1]).any()):
        order = np.lexsort((rank.rank[g], -s))
        s, g = s[order], g[order]
    return s, g


def top_k_rows(s: F32, ids: I64, k: int, index: QueryIndex) -> tuple[F32, I64]:
    """Row-wise :func:`top_k` of a (Q, W) score matrix with global ids; pads with ``-inf`` / ``-1``."""
    q, w = s.shape
    if w > k:
        part = np.argpartition(s, w - k, axis=1)[:, w - k :]
        ss = np.take_along_axis(s, part, 1)
        ii = np.take_along_axis(ids, part, 1)
        t = ss.min(axis=1) if k else np.full(q, np.inf, np.float32)
        straddle: Any = np.flatnonzero((t > _NEG_INF) & (np.count_nonzero(s >= t[:, None], axis=1) > k)) if k else []
        for r in straddle:
            ss[r], ii[r] = top_k(s[r], ids[r], k, index)
    else:
        ss, ii = s.copy(), ids.copy()
    order = np.argsort(-ss, axis=1, kind="stable")
    ss, ii = np.take_along_axis(ss, order, 1), np.take_along_axis(ii, order, 1)
    if ss.shape[1] > 1:
        ties = np.flatnonzero(((ss[:, 1:] == ss[:, :-1]) & (ss[:, 1:] > _NEG_INF)).any(axis=1))
        for r in ties:
            valid = ss[r] > _NEG_INF
            nv = int(valid.sum())
            ss[r, :nv], ii[r, :nv] = order_by_score(ss[r, :nv], ii[r, :nv], index)
    ii[ss == _NEG_INF] = -1
    return ss, ii


# ------------------------------------------------------------------------------------
# scans
# ------------------------------------------------------------------------------------
def search(index: QueryIndex, q: F32, k: int, exclude: I64, limit: int | None = None, rerank: int | None = None) -> tuple[F32, I64]:
    """Top ``k`` rows for one unit query; ``exclude`` are row ids never returned."""
    n = index.n if limit is None else min(index.n, max(0, limit))
    want = k if rerank is None or index.quantized is None else max(k, rerank)
    exclude = np.concatenate([exclude, index.bad]) if len(index.bad) else exclude
    best_s = np.zeros(0, np.float32)
    best_i = np.zeros(0, np.int64)
    step = index.block_rows(1)
    for lo in range(0, n, step):
        hi = min(n, lo + step)
        s = index.scores(q, lo, hi)
        local = exclude[(exclude >= lo) & (exclude < hi)] - lo
        s[local] = _NEG_INF
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
    :func:`prune`), so the selection costs about one comparison per score.
    Runs of whole blocks are split over threads (see :func:`in_threads`)
    and their top ``k`` merged: the blocks, and so every score, are the same
    as in a serial scan.
    """
    nq = len(qm)
    n = index.n if limit is None else min(index.n, max(0, limit))
    width = min(k, n)
    if nq == 0 or width == 0:
        return np.full((nq, width), _NEG_INF, dtype=np.float32), np.full((nq, width), -1, dtype=np.int64)
    order = np.argsort(exclude[1], kind="stable")
    ex = (exclude[0][order], exclude[1][order])
    step = index.block_rows(nq)
    parts = in_threads(lambda a, b: scan_blocks(index, qm, width, ex, range(a, min(n, b), step), step), n, blas=True, align=step)
    if len(parts) == 1:
        return parts[0]
    return top_k_rows(np.concatenate([p[0] for p in parts], axis=1), np.concatenate([p[1] for p in parts], axis=1), width, index)


def scan_blocks(index: QueryIndex, qm: F32, width: int, exclude: tuple[I64, I64], starts: range, step: int) -> tuple[F32, I64]:
    """Running top ``width`` of every query over the row blocks ``start .. start + step`` (``exclude`` sorted by row)."""
    best_s = np.full((len(qm), width), _NEG_INF, dtype=np.float32)
    best_i = np.full((len(qm), width), -1, dtype=np.int64)
    ex_q, ex_r = exclude
    bad = index.bad
    for lo in starts:
        hi = min(starts.stop, lo + step)
        s = index.batch_scores(qm, lo, hi)
        a, b = np.searchsorted(ex_r, [lo, hi])
        s[ex_q[a:b], ex_r[a:b] - lo] = _NEG_INF
        a, b = np.searchsorted(bad, [lo, hi])
        if b > a:
            s[:, bad[a:b] - lo] = _NEG_INF
        cand = prune(s, lo, best_s)
        if cand is None:
            continue
        rows, cand_s, cand_i = cand
        merged = top_k_rows(np.concatenate([best_s[rows], cand_s], axis=1), np.concatenate([best_i[rows], cand_i], axis=1), width, index)
        best_s[rows], best_i[rows] = merged
    return best_s, best_i


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
    if k and b > k and bool((tau == _NEG_INF).any()):
        tau = np.maximum(tau, np.partition(s, b - k, axis=1)[:, b - k])
    keep = s >= tau[:, None]
    if bool((tau == _NEG_INF).any()):
        keep &= s > _NEG_INF
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
    out_s = np.full((len(rows), w), _NEG_INF, dtype=np.float32)
    out_i = np.full((len(rows), w), -1, dtype=np.int64)
    out_s[slot[r], pos] = s.reshape(-1)[flat]
    out_i[slot[r], pos] = cols + lo
    return rows, out_s, out_i


def results(index: QueryIndex, scores: F32, ids: I64) -> list[SimilarityResult]:
    """:class:`SimilarityResult` list for one query."""
    words = index.words
    return [SimilarityResult(words[i], float(s)) for s, i in zip(scores.tolist(), ids.tolist(), strict=True)]


def word_ids(index: QueryIndex, emb: Embeddings, words: Iterable[str] | None) -> I64:
    """Row ids of the known words in ``words`` (unknown ones are ignored)."""
    if not words:
        return np.zeros(0, np.int64)
    if isinstance(words, str):
        words = [words]
    get = emb.vocab.word_index.get
    return np.asarray([i for i in map(get, words) if i is not None], dtype=np.int64)


def finish(index: QueryIndex, raw: tuple[F32, I64]) -> tuple[I64, F32]:
    """Public batch result: ``(ids, scores)`` with ``-1`` / ``nan`` padding."""
    s, i = raw
    s = s.copy()
    s[i < 0] = np.nan
    return i, s


# ------------------------------------------------------------------------------------
# the query functions behind the Embeddings methods
# ------------------------------------------------------------------------------------
def word_similarity(emb: Embeddings, query: str, k: int, skip: Iterable[str] | None, rerank: int | None) -> list[SimilarityResult] | None:
    """Implementation of :meth:`Embeddings.word_similarity`."""
    k = check_k(k)
    vec = emb.embedding(query)
    if vec is None:
        return None
    index = query_index(emb)
    excluded = word_ids(index, emb, [query] if skip is None else skip)
    return results(index, *search(index, unit_query(vec, index.dims), k, excluded, rerank=rerank))


def embedding_similarity(emb: Embeddings, vector: npt.ArrayLike, k: int, skip: Iterable[str] | None, rerank: int | None) -> list[SimilarityResult]:
    """Implementation of :meth:`Embeddings.embedding_similarity`."""
    k = check_k(k)
    index = query_index(emb)
    return results(index, *search(index, unit_query(vector, index.dims), k, word_ids(index, emb, skip), rerank=rerank))


def analogy(
    emb: Embeddings, query: tuple[str, str, str], k: int, skip: Iterable[str] | None, mask: Sequence[bool], rerank: int | None
) -> list[SimilarityResult] | None:
    """Implementation of :meth:`Embeddings.analogy`."""
    k = check_k(k)
    if len(mask) != 3:
        raise ValueError(f"mask must have three booleans, got {len(mask)}")
    vecs = [emb.embedding(w) for w in query]
    if any(v is None for v in vecs):
        return None
    index = query_index(emb)
    a, b, c = (np.asarray(v, dtype=np.float32)[None, :] for v in vecs)
    q = analogy_vectors(a, b, c)[0]
    if skip is None:
        skip = [w for w, m in zip(query, mask, strict=True) if m]
    return results(index, *search(index, q, k, word_ids(index, emb, skip), rerank=rerank))


def word_similarity_batch(emb: Embeddings, queries: Sequence[str], k: int) -> tuple[I64, F32]:
    """Implementation of :meth:`Embeddings.word_similarity_batch`."""
    k = check_k(k)
    index = query_index(emb)
    queries = list(queries)
    matrix, found = emb.embedding_batch(queries)
    own = [word_ids(index, emb, [w]) for w in queries]
    ids, scores = finish(index, search_batch(index, unit_rows(matrix, index.dims), k, skip_pairs(own)))
    ids[~found] = -1
    scores[~found] = np.nan
    return ids, scores


def embedding_similarity_batch(emb: Embeddings, vectors: npt.ArrayLike, k: int, skip: Iterable[str] | None) -> tuple[I64, F32]:
    """Implementation of :meth:`Embeddings.embedding_similarity_batch`."""
    k = check_k(k)
    index = query_index(emb)
    qm = unit_rows(vectors, index.dims)
    excluded = word_ids(index, emb, skip)
    pairs = (np.repeat(np.arange(len(qm), dtype=np.int64), len(excluded)), np.tile(excluded, len(qm)))
    return finish(index, search_batch(index, qm, k, pairs))


def analogy_batch(emb: Embeddings, triples: Sequence[Sequence[str]], k: int) -> tuple[I64, F32]:
    """Implementation of :meth:`Embeddings.analogy_batch`."""
    k = check_k(k)
    index = query_index(emb)
    triples = [tuple(t) for t in triples]
    if any(len(t) != 3 for t in triples):
        raise ValueError("every analogy query must have exactly three words")
    flat = [w for t in triples for w in t]
    matrix, found = emb.embedding_batch(flat)
    rows = matrix.reshape(len(triples), 3, index.dims)
    ok = found.reshape(len(triples), 3).all(axis=1)
    qm = analogy_vectors(rows[:, 0], rows[:, 1], rows[:, 2])
    ids, scores = finish(index, search_batch(index, qm, k, skip_pairs([word_ids(index, emb, t) for t in triples])))
    ids[~ok] = -1
    scores[~ok] = np.nan
    return ids, scores


def most_similar(emb: Embeddings, positive: Any, negative: Any, topn: int | None, restrict_vocab: int | None) -> Any:
    """Implementation of :meth:`Embeddings.most_similar` (gensim semantics)."""
    if topn is not None and check_k(topn) == 0:
        return []
    index = query_index(emb)
    items = [(x, 1.0) for x in as_list(positive)] + [(x, -1.0) for x in as_list(negative)]
    if not items:
        raise ValueError("cannot compute mean with no input")
    total = np.zeros(index.dims, dtype=np.float64)
    weight = 0.0
    keys: list[str] = []
    for item, default in items:
        key, w = (item[0], float(item[1])) if isinstance(item, tuple) else (item, default)
        if isinstance(key, str):
            vec = emb.embedding(key)
            if vec is None:
                raise KeyError(f"Key '{key}' not present in vocabulary")
            keys.append(key)
            vec = unit_query(vec, index.dims)
        else:
            vec = np.asarray(key, dtype=np.float32)
        total += w * vec
        weight += abs(w)
    q = unit_query(total / weight, index.dims)
    limit = index.n if restrict_vocab is None else min(index.n, max(0, int(restrict_vocab)))
    if topn is None:
        step = index.block_rows(1)
        return np.concatenate([index.scores(q, lo, min(limit, lo + step)) for lo in range(0, limit, step)] or [np.zeros(0, np.float32)])
    scores, ids = search(index, q, topn, word_ids(index, emb, keys), limit=limit)
    return [(r.word, r.similarity) for r in results(index, scores, ids)]


def as_list(x: Any) -> list[Any]:
    """gensim's ``_ensure_list``: ``None`` -> ``[]``, a single key or vector -> ``[x]``."""
    if x is None:
        return []
    if isinstance(x, str) or (isinstance(x, np.ndarray) and x.ndim == 1):
        return [x]
    return list(x)


# ------------------------------------------------------------------------------------
# analogy evaluation
# ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class AnalogySection:
    """Counts for one section (``: name``) of an analogy question file.

    ``total`` counts the questions answered; ``skipped`` those left out
    because a word is unknown (or outside ``restrict_vocab``).

    Examples
    --------
    >>> section = AnalogySection("capitals", correct=3, total=4, skipped=1)
    >>> section.name, section.accuracy
    ('capitals', 0.75)
    """

    name: str
    correct: int
    total: int
    skipped: int

    @property
    def accuracy(self) -> float:
        """``correct / total``; ``0.0`` for a section without answered questions.

        Examples
        --------
        >>> AnalogySection("plural", 1, 4, 0).accuracy, AnalogySection("empty", 0, 0, 2).accuracy
        (0.25, 0.0)
        """
        return self.correct / self.total if self.total else 0.0


@dataclass(frozen=True)
class AnalogyEvaluation:
    """Result of :func:`evaluate_analogies`: per-section counts and the totals.

    Examples
    --------
    >>> ev = AnalogyEvaluation([AnalogySection("capitals", 3, 4, 1), AnalogySection("plural", 1, 4, 0)])
    >>> ev.correct, ev.total, ev.skipped, ev.accuracy
    (4, 8, 1, 0.5)
    >>> print(ev)
    section   correct  total  skipped  accuracy
    capitals        3      4        1    75.00%
    plural          1      4        0    25.00%
    total           4      8        1    50.00%
    """

    sections: list[AnalogySection]

    @property
    def correct(self) -> int:
        """Correctly answered questions over all sections.

        Examples
        --------
        >>> AnalogyEvaluation([AnalogySection("a", 3, 4, 1), AnalogySection("b", 1, 4, 0)]).correct
        4
        """
        return sum(s.correct for s in self.sections)

    @property
    def total(self) -> int:
        """Answered questions over all sections (skipped ones not included).

        Examples
        --------
        >>> AnalogyEvaluation([AnalogySection("a", 3, 4, 1), AnalogySection("b", 1, 4, 0)]).total
        8
        """
        return sum(s.total for s in self.sections)

    @property
    def skipped(self) -> int:
        """Questions skipped because of unknown words.

        Examples
        --------
        >>> AnalogyEvaluation([AnalogySection("a", 3, 4, 1), AnalogySection("b", 1, 4, 2)]).skipped
        3
        """
        return sum(s.skipped for s in self.sections)

    @property
    def accuracy(self) -> float:
        """Total accuracy over the answered questions (as gensim and finalfusion-utils report it).

        Skipped questions count neither as right nor as wrong.

        Examples
        --------
        >>> AnalogyEvaluation([AnalogySection("a", 3, 4, 10), AnalogySection("b", 0, 0, 5)]).accuracy
        0.75
        """
        return self.correct / self.total if self.total else 0.0

    def __str__(self) -> str:
        width = max([len("section"), *(len(s.name) for s in self.sections)])
        lines = [f"{'section':{width}s}  correct  total  skipped  accuracy"]
        for s in [*self.sections, AnalogySection("total", self.correct, self.total, self.skipped)]:
            lines.append(f"{s.name:{width}s}  {s.correct:7d}  {s.total:5d}  {s.skipped:7d}  {100 * s.accuracy:7.2f}%")
        return "\n".join(lines)


def read_analogies(questions: Any) -> list[tuple[str, list[tuple[int, list[str]]]]]:
    """Parse the word2vec analogy format: ``: section`` lines, then ``a b c d`` lines.

    Blank lines are ignored. Returns ``[(section, [(line_no, [a, b, c, d]), ...]), ...]``.

    Examples
    --------
    >>> read_analogies([": capitals", "Paris France Berlin Germany", "", ": empty"])
    [('capitals', [(2, ['Paris', 'France', 'Berlin', 'Germany'])]), ('empty', [])]
    """
    if isinstance(questions, (str, os.PathLike)):
        with open(questions, encoding="utf-8") as f:
            lines = f.read().splitlines()
        name = os.fspath(questions)
    else:
        lines = [line.decode("utf-8") if isinstance(line, bytes) else line for line in questions]
        name = "<questions>"
    sections: list[tuple[str, list[tuple[int, list[str]]]]] = []
    for no, line in enumerate(lines, 1):
        text = line.strip()
        if not text:
            continue
        if text.startswith(":"):
            sections.append((text[1:].strip(), []))
            continue
        parts = text.split()
        if len(parts) != 4:
            raise FormatError(f"{name}: line {no} is not an analogy question", chunk="analogy questions", expected="4 words", found=f"{len(parts)}: {text!r}")
        if not sections:
            raise FormatError(f"{name}: question on line {no} before any section", chunk="analogy questions", expected="a ': section' line", found=repr(text))
        sections[-1][1].append((no, parts))
    return sections


def evaluate_analogies(
    emb: Embeddings,
    questions: Any,
    *,
    case_insensitive: bool = False,
    restrict_vocab: int | None = None,
    batch_size: int = 512,
    outcomes: list[bool] | None = None,
) -> AnalogyEvaluation:
    """Answer every question of an analogy file and count correct answers.

    Each question ``a b c d`` asks for the word closest to
    ``unit(b) - unit(a) + unit(c)`` (3CosAdd) among the candidates, the
    three query words excluded; it is correct if that word is ``d``.

    Defaults follow finalfusion-utils ``compute-accuracy``: case-sensitive,
    every vocabulary word is a candidate, and a question whose four words
    are not all known vocabulary words is skipped (counted in ``skipped``,
    not in ``total``). ``case_insensitive=True, restrict_vocab=300000``
    reproduces gensim's ``evaluate_word_analogies`` defaults: words are
    compared upper-cased, a query word uses the first vocabulary entry with
    its upper-cased form, only the first ``restrict_vocab`` words are known
    and candidates, and every case variant of a query word is excluded.

    Parameters
    ----------
    emb
        The embeddings.
    questions
        Path of a question file (UTF-8) or an iterable of lines.
    case_insensitive
        Compare words upper-cased, as gensim does by default.
    restrict_vocab
        Only the first ``restrict_vocab`` words are known and candidates.
    batch_size
        Questions answered per matrix product.
    outcomes
        If given, one ``bool`` per answered question is appended, in file
        order (used by gensim's ``evaluate_word_analogies`` spelling).

    Returns
    -------
    AnalogyEvaluation

    Raises
    ------
    FormatError
        If a line is neither a ``:`` section header nor four words, or a
        question comes before the first section.

    Examples
    --------
    >>> import numpy as np
    >>> from finalfusion import Embeddings
    >>> from finalfusion.storage import NdArray
    >>> from finalfusion.vocab import SimpleVocab
    >>> m = np.array([[1, 0, 0], [1, 1, 0], [0, 0, 1], [0, 1, 1]], dtype=np.float32)
    >>> emb = Embeddings(NdArray(m), SimpleVocab(["man", "king", "woman", "queen"]))
    >>> ev = evaluate_analogies(emb, [": royals", "man king woman queen", "man king woman princess"])
    >>> ev.correct, ev.total, ev.skipped
    (1, 1, 1)
    """
    index = query_index(emb)
    limit = index.n if restrict_vocab is None else min(index.n, max(0, int(restrict_vocab)))
    words = index.words[:limit]

    def fold(w: str) -> str:
        return w.upper() if case_insensitive else w

    known: dict[str, int] = {}
    variants: dict[str, list[int]] = {}
    for i, w in enumerate(words):
        key = fold(w)
        known.setdefault(key, i)
        variants.setdefault(key, []).append(i)
    out: list[AnalogySection] = []
    step = max(1, batch_size)
    for name, items in read_analogies(questions):
        todo = [keys for keys in ([fold(p) for p in parts] for _no, parts in items) if all(key in known for key in keys)]
        correct = 0
        for lo in range(0, len(todo), step):
            chunk = todo[lo : lo + step]
            qm = analogy_queries(index, np.asarray([[known[key] for key in keys[:3]] for keys in chunk], dtype=np.int64))
            excluded = [np.asarray(sorted({i for key in keys[:3] for i in (variants[key] if case_insensitive else [known[key]])}), np.int64) for keys in chunk]
            _, best = search_batch(index, qm, 1, skip_pairs(excluded), limit)
            hits = [i >= 0 and fold(words[i]) == keys[3] for keys, i in zip(chunk, best[:, 0].tolist(), strict=True)]
            correct += sum(hits)
            if outcomes is not None:
                outcomes.extend(hits)
        out.append(AnalogySection(name, correct, len(todo), len(items) - len(todo)))
    return AnalogyEvaluation(out)


def analogy_queries(index: QueryIndex, triples: I64) -> F32:
    """Unit ``unit(b) - unit(a) + unit(c)`` for rows of word ids ``(a, b, c)``."""
    flat = triples.reshape(-1)
    rows = np.asarray(index.storage.rows(flat), dtype=np.float32).reshape(*triples.shape, index.dims)
    return analogy_vectors(rows[:, 0], rows[:, 1], rows[:, 2])


def analogy_vectors(a: F32, b: F32, c: F32) -> F32:
    """Unit ``unit(b) - unit(a) + unit(c)``, row-wise, for ``(Q, d)`` arrays."""
    dims = a.shape[-1]
    return unit_rows(unit_rows(b, dims) - unit_rows(a, dims) + unit_rows(c, dims), dims)


def skip_pairs(skips: Sequence[I64]) -> tuple[I64, I64]:
    """``(query_row, row_id)`` arrays from one array of excluded ids per query."""
    if not skips:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    lens = [len(s) for s in skips]
    return np.repeat(np.arange(len(skips), dtype=np.int64), lens), (np.concatenate(skips).astype(np.int64) if sum(lens) else np.zeros(0, np.int64))
