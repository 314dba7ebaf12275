"""Product quantization in pure numpy: k-means, PQ, OPQ, Gaussian OPQ and encoding.

The trained quantizer is stored in a :class:`~finalfusion.storage.QuantizedArray`
chunk (docs/format.md §5.4), which reconstructs row ``i`` as::

    concat(centroids[j][codes[i, j]] for j in range(q)) @ projection.T * norms[i]

so training follows the same convention: with a rotation ``R`` (OPQ), the
subquantizers are trained on ``x @ R`` and ``R`` is stored as the projection
(orthogonal, so ``R.T`` undoes it); with ``normalize=True`` the unit rows are
quantized and the original l2 norms are stored in the chunk.

Quantizers
----------
``"pq"``
    Product quantization (Jégou et al., 2011): k-means in every subspace,
    k-means++ seeding, empty clusters refilled with the worst-quantized
    points, best of ``n_attempts`` runs.
``"opq"``
    Optimized product quantization, non-parametric (Ge et al., 2013):
    starts from the eigenvalue-allocation rotation, then alternates a
    k-means step in every subspace with the orthogonal Procrustes solution
    for the rotation (one SVD of a ``d x d`` matrix).
``"gaussian_opq"``
    The parametric OPQ of Ge et al. (2013): the eigenvalue-allocation
    rotation (PCA directions balanced over subspaces so that the products
    of their variances are equal), then plain PQ on the rotated data.

These match the quantizers of finalfusion-utils ``quantize`` (reductive).

Examples
--------
>>> import numpy as np
>>> from finalfusion.storage import NdArray
>>> x = np.random.default_rng(0).standard_normal((500, 8)).astype(np.float32)
>>> qa = quantize_storage(NdArray(x), n_subquantizers=4, n_bits=4, n_iterations=10, seed=1)
>>> qa.shape, qa.quantized_embeddings.shape, qa.quantizer.n_centroids
((500, 8), (500, 4), 16)
>>> bool(np.mean((np.asarray(qa) - x) ** 2) < np.mean(x**2))
True
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any, Concatenate, Final, ParamSpec, TypeVar, cast

import numpy as np
import numpy.typing as npt

from finalfusion._progress import ProgressArg, progress_callback
from finalfusion.norms import first_invalid_norm, normalize_rows
from finalfusion.storage.ndarray import NdArray, Storage
from finalfusion.storage.quantized import PQ, QuantizedArray

__all__ = [
    "QUANTIZERS",
    "Progress",
    "eigenvalue_allocation",
    "encode",
    "kmeans",
    "quantize_storage",
    "reconstruct_storage",
    "train_pq",
]

_P = ParamSpec("_P")
_R = TypeVar("_R")

#: Callback ``progress(stage, done, total)``; stages are ``"train"`` and ``"encode"``.
Progress = Callable[[str, int, int], None]

#: The accepted ``quantizer`` names.
QUANTIZERS: Final = ("pq", "opq", "gaussian_opq")

#: Rows per block when encoding or reading storage (bounds the temporary memory).
_ENCODE_ROWS: Final = 16384
#: Target number of distances (rows x centroids) per assignment block (16 MiB of float32).
_DIST_BLOCK: Final = 1 << 22
#: OPQ: Lloyd steps used to choose between the identity and the eigenvalue-allocation start.
_OPQ_START_ITERATIONS: Final = 8
#: k-means++ seeding runs on at most this many points per centroid.
_SEED_POINTS_PER_CENTROID: Final = 16

F32 = npt.NDArray[np.float32]


# ----------------------------------------------------------------------------------
# validation
# ----------------------------------------------------------------------------------
def check_parameters(
    shape: tuple[int, int],
    n_subquantizers: int | None,
    n_bits: int,
    quantizer: str,
    n_iterations: int,
    n_attempts: int,
    sample: int | float | None,
) -> tuple[int, int]:
    """Validate quantization parameters before any work.

    Returns
    -------
    n_subquantizers, n_train
        The number of subquantizers (default ``dims // 2``) and of training rows.

    Raises
    ------
    ValueError
        Naming the offending parameter, what is allowed and what was given.

    Examples
    --------
    >>> check_parameters((1000, 300), None, 8, "pq", 100, 1, None)
    (150, 1000)
    >>> check_parameters((1000, 300), 7, 8, "pq", 100, 1, None)
    Traceback (most recent call last):
    ...
    ValueError: n_subquantizers must divide the dimensionality 300, got 7
    """
    rows, dims = shape
    if quantizer not in QUANTIZERS:
        raise ValueError(f"quantizer must be one of {', '.join(map(repr, QUANTIZERS))}, got {quantizer!r}")
    if n_subquantizers is None:
        n_subquantizers = dims // 2
        if n_subquantizers < 1 or dims % n_subquantizers:
            raise ValueError(f"the default n_subquantizers (dims // 2) needs an even dimensionality >= 2, got {dims}; pass n_subquantizers")
    for name, value in (("n_subquantizers", n_subquantizers), ("n_bits", n_bits), ("n_iterations", n_iterations), ("n_attempts", n_attempts)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
            raise ValueError(f"{name} must be an integer, got {value!r}")
    if n_subquantizers < 1 or n_subquantizers > dims:
        raise ValueError(f"n_subquantizers must be in 1..{dims} (the dimensionality), got {n_subquantizers}")
    if dims % n_subquantizers:
        raise ValueError(f"n_subquantizers must divide the dimensionality {dims}, got {n_subquantizers}")
    if not 1 <= n_bits <= 8:
        raise ValueError(f"n_bits must be in 1..8 (codes are bytes), got {n_bits}")
    if n_iterations < 1:
        raise ValueError(f"n_iterations must be >= 1, got {n_iterations}")
    if n_attempts < 1:
        raise ValueError(f"n_attempts must be >= 1, got {n_attempts}")
    n_train = _train_rows(rows, sample)
    k = 1 << n_bits
    if k > n_train:
        what = f"the {n_train} training rows (sample={sample!r})" if sample is not None else f"the {rows} rows"
        raise ValueError(f"n_bits={n_bits} asks for {k} centroids per subquantizer, more than {what}")
    return int(n_subquantizers), n_train


def _train_rows(rows: int, sample: int | float | None) -> int:
    if sample is None:
        return rows
    if isinstance(sample, bool) or not isinstance(sample, (int, float, np.integer, np.floating)):
        raise ValueError(f"sample must be None, a row count or a fraction in (0, 1], got {sample!r}")
    if isinstance(sample, (float, np.floating)):
        if not 0.0 < sample <= 1.0:
            raise ValueError(f"a fractional sample must be in (0, 1], got {sample}")
        return max(1, round(rows * float(sample)))
    if sample < 1:
        raise ValueError(f"sample must be >= 1 row, got {sample}")
    return min(int(sample), rows)


# ----------------------------------------------------------------------------------
# k-means
# ----------------------------------------------------------------------------------
def _augment(x: F32) -> F32:
    """``[x, 1]``: one matmul with ``[-2c, |c|^2]`` then gives ``|x - c|^2 - |x|^2``."""
    out = np.empty((x.shape[0], x.shape[1] + 1), dtype=np.float32)
    out[:, :-1] = x
    out[:, -1] = 1.0
    return out


def _assign(xa: F32, centroids: F32, labels: npt.NDArray[np.intp], dist: F32 | None = None) -> None:
    """Nearest centroid of every row of the augmented ``xa`` (into ``labels``; ``|x-c|^2 - |x|^2`` into ``dist``)."""
    k = centroids.shape[0]
    ca = np.empty((centroids.shape[1] + 1, k), dtype=np.float32)
    ca[:-1] = centroids.T
    ca[:-1] *= -2.0
    ca[-1] = np.einsum("ij,ij->i", centroids, centroids)
    step = max(1, _DIST_BLOCK // k)
    buf = np.empty((min(step, xa.shape[0]), k), dtype=np.float32)
    for lo in range(0, xa.shape[0], step):
        hi = min(lo + step, xa.shape[0])
        d = buf[: hi - lo]
        np.matmul(xa[lo:hi], ca, out=d)
        lab = d.argmin(axis=1)
        labels[lo:hi] = lab
        if dist is not None:
            dist[lo:hi] = np.take_along_axis(d, lab[:, None], axis=1)[:, 0]


def _update(x: F32, labels: npt.NDArray[np.intp], dist: F32, centroids: F32) -> None:
    """Move every centroid to the mean of its points; refill empty clusters.

    An empty cluster takes the point that is currently worst quantized
    (largest distance to its centroid), so no centroid is wasted.
    """
    k, ds = centroids.shape
    counts = np.bincount(labels, minlength=k)
    nonempty = counts > 0
    for j in range(ds):
        sums = np.bincount(labels, weights=x[:, j], minlength=k)
        centroids[nonempty, j] = sums[nonempty] / counts[nonempty]
    empty = np.flatnonzero(~nonempty)
    if len(empty):
        n = min(len(empty), x.shape[0])
        worst = np.argpartition(dist, -n)[-n:] if n < x.shape[0] else np.arange(n)
        centroids[empty[:n]] = x[worst]


def _seed(x: F32, q: int, k: int, rng: np.random.Generator) -> F32:
    """k-means++ seeding (Arthur & Vassilvitskii, 2007) of all ``q`` subspaces of ``x`` at once.

    Runs on a random subsample of rows; returns ``(q, k, dims // q)`` centroids.
    Vectorised over the subspaces, so there are ``k`` numpy steps, not ``q * k``.
    """
    n, d = x.shape
    ds = d // q
    m = min(n, max(k * _SEED_POINTS_PER_CENTROID, 1024))
    rows = x[np.sort(rng.choice(n, size=m, replace=False))] if m < n else x
    pts = np.ascontiguousarray(rows.reshape(m, q, ds).transpose(1, 0, 2), dtype=np.float64)  # (q, m, ds)
    sq = np.arange(q)
    centroids = np.empty((q, k, ds), dtype=np.float32)
    pick = rng.integers(m, size=q)
    d2 = np.full((q, m), np.inf)
    for i in range(k):
        chosen = pts[sq, pick]
        centroids[:, i] = chosen
        np.minimum(d2, ((pts - chosen[:, None, :]) ** 2).sum(axis=2), out=d2)
        if i + 1 < k:
            cum = np.cumsum(d2, axis=1)
            total = cum[:, -1]
            pick = np.minimum((cum <= (rng.random(q) * total)[:, None]).sum(axis=1), m - 1)
            dead = total <= 0  # all points coincide with centroids: any point will do
            if dead.any():
                pick[dead] = rng.integers(m, size=int(dead.sum()))
    return centroids


def kmeans(
    x: npt.ArrayLike,
    k: int,
    n_iterations: int = 25,
    n_attempts: int = 1,
    seed: int | np.random.Generator | None = None,
) -> tuple[F32, npt.NDArray[np.intp], float]:
    """Lloyd's k-means with k-means++ seeding; best of ``n_attempts`` runs.

    Distances are computed as ``|x|^2 - 2 x·c + |c|^2`` with one float32
    matrix product per block of rows; centroid means use ``np.bincount``.
    A run stops early when the assignment no longer changes.

    Parameters
    ----------
    x
        ``(n, dims)`` data.
    k
        Number of clusters, ``1 <= k <= n``.
    n_iterations
        Maximum Lloyd iterations per run.
    n_attempts
        Independent runs; the one with the lowest error is kept.
    seed
        Seed or generator for reproducible results.

    Returns
    -------
    centroids, labels, error
        ``(k, dims)`` float32 centroids, each row's cluster, and the sum of
        squared distances of the rows to their centroids.

    Raises
    ------
    ValueError
        If ``k`` is not in ``1..n`` or an iteration count is below 1.

    Examples
    --------
    >>> import numpy as np
    >>> x = np.array([[0.0], [0.1], [10.0], [10.2]])
    >>> c, labels, err = kmeans(x, 2, seed=0)
    >>> [round(float(v), 2) for v in sorted(c[:, 0])], bool(labels[0] == labels[1] != labels[2] == labels[3]), round(err, 3)
    ([0.05, 10.1], True, 0.025)
    """
    data = np.ascontiguousarray(x, dtype=np.float32)
    if data.ndim != 2:
        raise ValueError(f"x must be 2-D, got shape {data.shape}")
    if not 1 <= k <= data.shape[0]:
        raise ValueError(f"k must be in 1..{data.shape[0]} (the number of rows), got {k}")
    if n_iterations < 1 or n_attempts < 1:
        raise ValueError(f"n_iterations and n_attempts must be >= 1, got {n_iterations} and {n_attempts}")
    rng = np.random.default_rng(seed)
    seeds = np.stack([_seed(data, 1, k, rng)[0] for _ in range(n_attempts)])
    return _kmeans(data, _augment(data), seeds, n_iterations)


def _kmeans(x: F32, xa: F32, seeds: F32, n_iterations: int) -> tuple[F32, npt.NDArray[np.intp], float]:
    """Lloyd's k-means from each of the ``(attempts, k, dims)`` seeds; the best run."""
    best: tuple[F32, npt.NDArray[np.intp], float] | None = None
    for seed in seeds:
        centroids = seed.copy()
        labels, err = _lloyd(x, xa, centroids, n_iterations)
        if best is None or err < best[2]:
            best = (centroids, labels, err)
    assert best is not None  # at least one attempt
    return best


def _lloyd(x: F32, xa: F32, centroids: F32, n_iterations: int) -> tuple[npt.NDArray[np.intp], float]:
    """Lloyd iterations from ``centroids`` (updated in place); the final labels and squared error."""
    labels = np.zeros(x.shape[0], dtype=np.intp)
    prev = np.full(x.shape[0], -1, dtype=np.intp)
    dist = np.empty(x.shape[0], dtype=np.float32)
    for _it in range(n_iterations):
        _assign(xa, centroids, labels, dist)
        if np.array_equal(labels, prev):
            break
        _update(x, labels, dist, centroids)
        prev, labels = labels, prev
    else:
        _assign(xa, centroids, labels, dist)
    x2 = np.einsum("ij,ij->i", x, x, dtype=np.float64)
    return labels, float(np.maximum(dist + x2, 0.0).sum())


# ----------------------------------------------------------------------------------
# rotations
# ----------------------------------------------------------------------------------
def eigenvalue_allocation(x: npt.ArrayLike, n_subquantizers: int) -> npt.NDArray[np.float32]:
    """The eigenvalue-allocation rotation of Ge et al. (2013), parametric OPQ.

    The principal directions of ``x`` are distributed greedily over the
    subspaces, largest variance first, each to the non-full subspace with
    the smallest product of variances so far, which balances the products
    (the optimum for Gaussian data).

    Parameters
    ----------
    x
        ``(n, d)`` training data.
    n_subquantizers
        Number of subspaces; must divide ``d``.

    Returns
    -------
    numpy.ndarray
        Orthogonal ``(d, d)`` float32 matrix ``R``; quantize ``x @ R``.

    Examples
    --------
    >>> import numpy as np
    >>> x = np.random.default_rng(0).standard_normal((2000, 4)) * [4.0, 3.0, 2.0, 1.0]
    >>> r = eigenvalue_allocation(x, 2)
    >>> bool(np.allclose(r.T @ r, np.eye(4), atol=1e-5))
    True
    >>> np.abs(r).argmax(axis=0).tolist()  # input axes per output: variances 16, 1 | 9, 4
    [0, 3, 1, 2]
    """
    data = np.asarray(x, dtype=np.float64)
    d = data.shape[1]
    if n_subquantizers < 1 or d % n_subquantizers:
        raise ValueError(f"n_subquantizers must divide the dimensionality {d}, got {n_subquantizers}")
    centered = data - data.mean(axis=0)
    cov = centered.T @ centered / max(1, data.shape[0] - 1)
    values, vectors = np.linalg.eigh(cov)
    logs = np.log(np.maximum(values, 0.0) + np.finfo(np.float32).eps)
    logs -= logs.min()  # non-negative, so empty subspaces are filled first
    per = d // n_subquantizers
    buckets: list[list[int]] = [[] for _ in range(n_subquantizers)]
    products = np.zeros(n_subquantizers)
    for idx in np.argsort(-values, kind="stable"):
        open_ = [b for b in range(n_subquantizers) if len(buckets[b]) < per]
        b = min(open_, key=lambda i: products[i])
        buckets[b].append(int(idx))
        products[b] += logs[idx]
    order = [i for bucket in buckets for i in bucket]
    return np.ascontiguousarray(vectors[:, order], dtype=np.float32)


def _procrustes(x: F32, y: F32) -> F32:
    """Orthogonal ``R`` minimising ``|x R - y|_F``: ``U V^T`` from the SVD of ``x^T y``."""
    m = (x.T @ y).astype(np.float64)
    u, _, vt = np.linalg.svd(m)
    return np.ascontiguousarray(u @ vt, dtype=np.float32)


# ----------------------------------------------------------------------------------
# product quantizer training
# ----------------------------------------------------------------------------------
def train_pq(
    x: npt.ArrayLike,
    n_subquantizers: int,
    n_bits: int = 8,
    quantizer: str = "pq",
    n_iterations: int = 100,
    n_attempts: int = 1,
    seed: int | np.random.Generator | None = None,
    progress: ProgressArg = None,
) -> PQ:
    """Train a product quantizer on the rows of ``x``.

    Parameters
    ----------
    x
        ``(n, d)`` training rows (already normalized if that is wanted).
    n_subquantizers
        Subspaces ``q``; must divide ``d``. Each row is encoded in ``q`` bytes.
    n_bits
        Bits per code, 1..8: ``2 ** n_bits`` centroids per subquantizer.
    quantizer
        ``"pq"``, ``"opq"`` or ``"gaussian_opq"`` (see the module docstring).
    n_iterations
        k-means iterations (PQ, Gaussian OPQ) or alternating
        k-means/rotation iterations (OPQ).
    n_attempts
        k-means runs per subquantizer, the best is kept (PQ, Gaussian OPQ).
    seed
        Seed or generator.
    progress
        Optional callback ``progress("train", done, total)``, or ``True``
        for a tqdm bar (when tqdm is installed).

    Returns
    -------
    PQ
        Centroids ``(q, 2 ** n_bits, d // q)`` and, for the OPQ variants,
        the rotation as projection.

    Raises
    ------
    ValueError
        For invalid parameters (see :func:`check_parameters`).

    Examples
    --------
    >>> import numpy as np
    >>> x = np.random.default_rng(0).standard_normal((300, 6)).astype(np.float32)
    >>> pq = train_pq(x, 3, n_bits=3, quantizer="opq", n_iterations=5, seed=0)
    >>> pq.quantizers.shape, pq.projection.shape
    ((3, 8, 2), (6, 6))
    """
    report = progress_callback(progress)
    data = np.ascontiguousarray(x, dtype=np.float32)
    if data.ndim != 2:
        raise ValueError(f"x must be 2-D, got shape {data.shape}")
    q, _ = check_parameters(data.shape, n_subquantizers, n_bits, quantizer, n_iterations, n_attempts, None)
    rng = np.random.default_rng(seed)
    k = 1 << n_bits
    if quantizer == "opq":
        return _train_opq(data, q, k, n_iterations, rng, report)
    projection = eigenvalue_allocation(data, q) if quantizer == "gaussian_opq" else None
    if projection is not None:
        data = data @ projection
    ds = data.shape[1] // q
    centroids = np.empty((q, k, ds), dtype=np.float32)
    seeds = np.stack([_seed(data, q, k, rng) for _ in range(n_attempts)], axis=1)  # (q, attempts, k, ds)
    for j in range(q):
        sub = np.ascontiguousarray(data[:, j * ds : (j + 1) * ds])
        centroids[j] = _kmeans(sub, _augment(sub), seeds[j], n_iterations)[0]
        if report is not None:
            report("train", j + 1, q)
    return PQ(centroids, projection)


def _train_opq(x: F32, q: int, k: int, n_iterations: int, rng: np.random.Generator, progress: Progress | None) -> PQ:
    """Non-parametric OPQ (Ge et al., 2013), a descent on ``|x R - PQ(x R)|^2``.

    1. Start from the identity or the eigenvalue-allocation rotation,
       whichever gives the lower error after a few k-means steps (the
       Gaussian assumption behind the latter does not hold for every table).
    2. ``n_iterations`` times: one Lloyd step in every subspace, then the
       Procrustes rotation for the new reconstructions.
    3. Finish the centroids with up to ``n_iterations`` Lloyd steps under
       the final rotation.
    """
    d = x.shape[1]
    ds = d // q
    total = n_iterations + 2

    def subspaces(xr: F32) -> list[tuple[F32, F32]]:
        subs = [np.ascontiguousarray(xr[:, j * ds : (j + 1) * ds]) for j in range(q)]
        return [(sub, _augment(sub)) for sub in subs]

    best: tuple[float, F32, F32] | None = None
    for rotation in (np.eye(d, dtype=np.float32), eigenvalue_allocation(x, q)):
        xr = x @ rotation
        centroids = _seed(xr, q, k, rng)
        err = 0.0
        for j, (sub, aug) in enumerate(subspaces(xr)):
            err += _lloyd(sub, aug, centroids[j], min(n_iterations, _OPQ_START_ITERATIONS))[1]
        if best is None or err < best[0]:
            best = (err, rotation, centroids)
    assert best is not None
    _, rotation, centroids = best
    if progress is not None:
        progress("train", 1, total)
    labels = np.empty(x.shape[0], dtype=np.intp)
    dist = np.empty(x.shape[0], dtype=np.float32)
    recon = np.empty_like(x)
    for it in range(n_iterations):
        for j, (sub, aug) in enumerate(subspaces(x @ rotation)):
            _assign(aug, centroids[j], labels, dist)
            _update(sub, labels, dist, centroids[j])
            recon[:, j * ds : (j + 1) * ds] = centroids[j][labels]
        rotation = _procrustes(x, recon)
        if progress is not None:
            progress("train", it + 2, total)
    for j, (sub, aug) in enumerate(subspaces(x @ rotation)):
        _lloyd(sub, aug, centroids[j], n_iterations)
    if progress is not None:
        progress("train", total, total)
    return PQ(centroids, rotation)


# ----------------------------------------------------------------------------------
# encoding
# ----------------------------------------------------------------------------------
def encode(pq: PQ, x: npt.ArrayLike) -> npt.NDArray[np.uint8]:
    """Codes ``(n, q)`` of the rows of ``x``: the nearest centroid in every subspace.

    Rows are rotated by the projection first, if the quantizer has one.

    Examples
    --------
    >>> import numpy as np
    >>> pq = PQ(np.array([[[0.0], [1.0]], [[5.0], [7.0]]], dtype=np.float32))
    >>> encode(pq, [[0.9, 5.5], [0.2, 6.9]]).tolist()
    [[1, 0], [0, 1]]
    """
    data = np.ascontiguousarray(x, dtype=np.float32)
    if data.ndim != 2 or data.shape[1] != pq.reconstructed_len:
        raise ValueError(f"x must have shape (n, {pq.reconstructed_len}), got {data.shape}")
    if pq.projection is not None:
        data = data @ pq.projection
    q = pq.quantized_len
    ds = pq.reconstructed_len // q
    codes = np.empty((data.shape[0], q), dtype=np.uint8)
    labels = np.empty(data.shape[0], dtype=np.intp)
    for j in range(q):
        _assign(_augment(data[:, j * ds : (j + 1) * ds]), pq.quantizers[j], labels)
        codes[:, j] = labels
    return codes


def _block(storage: Storage, lo: int, hi: int) -> F32:
    """Rows ``lo:hi`` as float32 (reads only those rows of an mmapped matrix)."""
    if isinstance(storage, NdArray):
        return np.asarray(storage.matrix[lo:hi], dtype=np.float32)
    return storage.rows(np.arange(lo, hi))


def _check_finite(rows: F32, indices: npt.NDArray[np.int64] | None, offset: int) -> None:
    """Reject NaN or infinite values: k-means would silently turn them into garbage codes."""
    bad = ~np.isfinite(rows).all(axis=1)
    if bad.any():
        first = int(np.flatnonzero(bad)[0])
        row = int(indices[first]) if indices is not None else offset + first
        raise ValueError(f"cannot quantize: storage row {row} has non-finite values (NaN or infinity)")


def _unit(rows: F32, offset: int = 0) -> tuple[F32, F32]:
    """Unit-length rows and their norms; zero rows stay zero with norm 0.

    Tiny (subnormal) and huge rows are normalised in float64
    (:func:`~finalfusion.norms.normalize_rows`); a norm beyond float32's
    range is a ``ValueError`` naming the row (``rows[0]`` is row ``offset``).
    """
    unit = np.array(rows, dtype=np.float32, order="C")
    norms = normalize_rows(unit)
    bad = first_invalid_norm(norms)
    if bad is not None:
        raise ValueError(f"cannot quantize with normalize=True: storage row {offset + bad} has an l2 norm beyond float32's range (3.4e38)")
    return unit, norms


def quantize_storage(
    storage: Storage,
    n_subquantizers: int | None = None,
    n_bits: int = 8,
    quantizer: str = "pq",
    n_iterations: int = 100,
    n_attempts: int = 1,
    normalize: bool = True,
    seed: int | np.random.Generator | None = None,
    sample: int | float | None = None,
    progress: ProgressArg = None,
) -> QuantizedArray:
    """Quantize every row of a storage chunk; see :meth:`finalfusion.Embeddings.quantize`.

    Training reads only the sampled rows; encoding reads the storage in
    blocks of rows, so a memory-mapped matrix is never loaded whole.

    Parameters
    ----------
    storage
        Dense or quantized (re-quantized from its reconstruction) storage.
    n_subquantizers, n_bits, quantizer, n_iterations, n_attempts, seed, progress
        As in :func:`train_pq`; ``n_subquantizers`` defaults to ``dims // 2``.
    normalize
        Quantize unit-length rows and keep the l2 norms in the chunk.
    sample
        Train on a random sample of rows: a count, a fraction in (0, 1], or
        ``None`` for all rows. All rows are encoded either way.

    Returns
    -------
    QuantizedArray

    Raises
    ------
    ValueError
        For invalid parameters, before any work; for a row with NaN or
        infinite values (training rows are checked before training).

    Examples
    --------
    >>> import numpy as np
    >>> from finalfusion.storage import NdArray
    >>> x = np.random.default_rng(0).standard_normal((300, 4)).astype(np.float32)
    >>> qa = quantize_storage(NdArray(x), n_bits=2, n_iterations=5, seed=0)
    >>> qa.quantized_len, qa.norms is not None, np.allclose(qa.norms, np.linalg.norm(x, axis=1))
    (2, True, True)
    """
    report = progress_callback(progress)
    rows, dims = storage.shape
    q, n_train = check_parameters((rows, dims), n_subquantizers, n_bits, quantizer, n_iterations, n_attempts, sample)
    rng = np.random.default_rng(seed)
    picked = np.sort(rng.choice(rows, size=n_train, replace=False)) if n_train < rows else None
    whole = _block(storage, 0, rows) if picked is None else None
    train = np.asarray(storage.rows(picked) if picked is not None else whole, dtype=np.float32)
    _check_finite(train, picked, 0)
    if normalize:
        train = _unit(train)[0]
    pq = train_pq(train, q, n_bits, quantizer, n_iterations, n_attempts, rng, report)
    del train
    # Dense rows read for training are encoded from memory, not read again (rows at a server: not fetched twice).
    dense = whole if isinstance(storage, NdArray) else None
    codes = np.empty((rows, q), dtype=np.uint8)
    norms = np.empty(rows, dtype=np.float32) if normalize else None
    for lo in range(0, rows, _ENCODE_ROWS):
        hi = min(lo + _ENCODE_ROWS, rows)
        block = dense[lo:hi] if dense is not None else _block(storage, lo, hi)
        _check_finite(block, None, lo)
        if norms is not None:
            block, norms[lo:hi] = _unit(block, lo)
        codes[lo:hi] = encode(pq, block)
        if report is not None:
            report("encode", hi, rows)
    return QuantizedArray(pq, codes, norms)


def takes_parameters_of(target: Callable[Concatenate[Storage, _P], object]) -> Callable[[Callable[..., _R]], Callable[Concatenate[Any, _P], _R]]:
    """Give a method the parameters ``target`` takes after the storage: one definition serves both.

    The method is typed with ``target``'s parameters (mypy checks every call
    against them) and reports them to :func:`inspect.signature` and
    :func:`help`, with ``self`` in place of the storage;
    :meth:`finalfusion.Embeddings.quantize` takes those of
    :func:`quantize_storage` this way.

    Examples
    --------
    >>> import inspect
    >>> class Holder:
    ...     @takes_parameters_of(quantize_storage)
    ...     def quantize(self, *args: Any, **kwargs: Any) -> str:
    ...         return "quantized"
    >>> list(inspect.signature(Holder.quantize).parameters)[:3]
    ['self', 'n_subquantizers', 'n_bits']
    """
    params = list(inspect.signature(target).parameters.values())[1:]

    def decorate(method: Callable[..., _R]) -> Callable[Concatenate[Any, _P], _R]:
        own = inspect.signature(method)
        self_param = next(iter(own.parameters.values()))
        setattr(method, "__signature__", own.replace(parameters=[self_param, *params]))  # noqa: B010 - functions have no typed __signature__
        return cast("Callable[Concatenate[Any, _P], _R]", method)

    return decorate


def reconstruct_storage(storage: Storage) -> NdArray:
    """Dense storage with every row of ``storage`` reconstructed (norms applied).

    Examples
    --------
    >>> import numpy as np
    >>> pq = PQ(np.arange(8, dtype=np.float32).reshape(2, 2, 2))
    >>> qa = QuantizedArray(pq, np.array([[1, 0]], dtype=np.uint8), np.array([2.0], dtype=np.float32))
    >>> reconstruct_storage(qa).matrix.tolist()
    [[4.0, 6.0, 8.0, 10.0]]
    """
    rows, dims = storage.shape
    out = np.empty((rows, dims), dtype=np.float32)
    for lo in range(0, rows, _ENCODE_ROWS):
        hi = min(lo + _ENCODE_ROWS, rows)
        out[lo:hi] = _block(storage, lo, hi)
    return NdArray(out)
