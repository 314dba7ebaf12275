"""Query vectors: checks, l2 normalisation and the 3CosAdd analogy vector."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from finalfusion.similarity.topk import F32

__all__ = ["analogy_vectors", "unit_query", "unit_rows"]


def unit_query(vector: npt.ArrayLike, dims: int) -> F32:
    """The query as a unit ``float32`` vector (a zero vector stays zero).

    Examples
    --------
    >>> unit_query([3, 4], 2).tolist()
    [0.6000000238418579, 0.800000011920929]
    """
    v = np.asarray(vector, dtype=np.float64)
    if v.shape != (dims,):
        raise ValueError(f"query vector must have shape ({dims},), got {v.shape}")
    if not np.isfinite(v).all():
        raise ValueError("query vector contains NaN or infinity")
    norm = float(np.sqrt(v.dot(v)))
    return (v / norm if norm > 0 else v).astype(np.float32)


def unit_rows(matrix: npt.ArrayLike, dims: int) -> F32:
    """Queries as unit ``float32`` rows (zero rows stay zero).

    Examples
    --------
    >>> unit_rows([[0, 2], [0, 0]], 2).tolist()
    [[0.0, 1.0], [0.0, 0.0]]
    """
    m = np.asarray(matrix, dtype=np.float32)
    if m.ndim != 2 or m.shape[1] != dims:
        raise ValueError(f"query matrix must have shape (n, {dims}), got {m.shape}")
    if not np.isfinite(m).all():
        raise ValueError("query matrix contains NaN or infinity")
    norms = np.sqrt(np.einsum("ij,ij->i", m, m, dtype=np.float64))
    scale = np.divide(1.0, norms, out=np.zeros_like(norms), where=norms > 0)
    out: F32 = (m * scale[:, None]).astype(np.float32)
    return out


def analogy_vectors(a: F32, b: F32, c: F32) -> F32:
    """Unit ``unit(b) - unit(a) + unit(c)``, row-wise, for ``(Q, d)`` arrays.

    Examples
    --------
    >>> e = np.eye(3, dtype=np.float32)
    >>> (analogy_vectors(e[None, 0], e[None, 1], e[None, 2]) * np.sqrt(3)).round(3).tolist()
    [[-1.0, 1.0, 1.0]]
    """
    dims = a.shape[-1]
    return unit_rows(unit_rows(b, dims) - unit_rows(a, dims) + unit_rows(c, dims), dims)
