"""Query vectors: checks, l2 normalisation and the 3CosAdd analogy vector.

A query with a NaN or infinite component has no direction: every function
here raises :class:`~finalfusion.errors.NonFiniteError` (a ``ValueError``)
for one, naming the word or row it came from. Finite queries of any
magnitude are normalised without overflow or underflow (float64, scaled by
their largest component when their squares would leave float64's range).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import numpy.typing as npt

from finalfusion.errors import NonFiniteError
from finalfusion.similarity._topk import F32

__all__ = ["analogy_vectors", "check_finite_rows", "unit_query", "unit_rows"]

#: Sums of squares inside this range are exact enough in float64 without scaling first.
_SAFE_LOW = 1e-280
_SAFE_HIGH = 1e280
_F32_MAX = float(np.finfo(np.float32).max)
_F32_TINY = float(np.finfo(np.float32).tiny)


def _name_row(i: int) -> str:
    return f"query row {i}"


def check_finite_rows(matrix: npt.NDArray[np.floating], name: Callable[[int], str] = _name_row) -> None:
    """Raise :class:`~finalfusion.errors.NonFiniteError` for the first row with NaN or infinity, named by ``name(row)``.

    Examples
    --------
    >>> check_finite_rows(np.array([[1.0, 2.0], [np.inf, 0.0]]))
    Traceback (most recent call last):
    ...
    finalfusion.errors.NonFiniteError: query row 1 has a NaN or infinite component: [inf, 0.0]
    """
    if matrix.size and not np.isfinite(matrix).all():
        i = int(np.argmin(np.isfinite(matrix).all(axis=1)))
        raise NonFiniteError(f"{name(i)} has a NaN or infinite component: {matrix[i].tolist()[:10]}")


def unit_query(vector: npt.ArrayLike, dims: int, what: str = "the query vector") -> F32:
    """The query as a unit ``float32`` vector (a zero vector stays zero).

    Raises
    ------
    ValueError
        If the shape is not ``(dims,)``.
    NonFiniteError
        (a ``ValueError``) If a component is NaN or infinite; the message
        starts with ``what``.

    Examples
    --------
    >>> unit_query([3, 4], 2).tolist()
    [0.6000000238418579, 0.800000011920929]
    >>> unit_query([3e300, 4e300], 2).tolist(), unit_query([3e-300, 4e-300], 2).tolist()  # no overflow, no underflow
    ([0.6000000238418579, 0.800000011920929], [0.6000000238418579, 0.800000011920929])
    >>> unit_query([1.0, float("nan")], 2, "the vector of the word 'x'")
    Traceback (most recent call last):
    ...
    finalfusion.errors.NonFiniteError: the vector of the word 'x' has a NaN or infinite component: [1.0, nan]
    """
    single = isinstance(vector, np.ndarray) and vector.dtype == np.float32
    v = np.asarray(vector, dtype=np.float64)
    if v.shape != (dims,):
        raise ValueError(f"query vector must have shape ({dims},), got {v.shape}")
    if single:
        # float32 components: their squares (exact in float64, 2e-90 .. 1.2e77) neither overflow nor underflow,
        # so the sum of squares is finite exactly when every component is (one numpy call checks both)
        square = float(v.dot(v))
        finite = math.isfinite(square)
    else:
        finite = bool(np.isfinite(v).all())
        if finite:
            with np.errstate(over="ignore", under="ignore"):
                square = float(v.dot(v))
    if not finite:
        raise NonFiniteError(f"{what} has a NaN or infinite component: {v.tolist()[:10]}")
    if not _SAFE_LOW <= square <= _SAFE_HIGH:
        if square == 0 and not v.any():
            return v.astype(np.float32)
        v = v / np.abs(v).max()  # the largest component becomes 1: the sum of squares is in [1, dims]
        square = float(v.dot(v))
    out: F32 = (v / math.sqrt(square)).astype(np.float32)  # math.sqrt: the same correctly rounded root, without a numpy call
    return out


def unit_rows(matrix: npt.ArrayLike, dims: int, name: Callable[[int], str] = _name_row) -> F32:
    """Queries as unit ``float32`` rows (zero rows stay zero).

    Raises
    ------
    ValueError
        If the shape is not ``(n, dims)``.
    NonFiniteError
        (a ``ValueError``) For a row with a NaN or infinite component, named by ``name(row)``.

    Examples
    --------
    >>> unit_rows([[0, 2], [0, 0]], 2).tolist()
    [[0.0, 1.0], [0.0, 0.0]]
    >>> unit_rows(np.array([[0, 1e200]]), 2).tolist()  # beyond float32: normalised in float64 first
    [[0.0, 1.0]]
    """
    m = np.asarray(matrix)
    if m.dtype != np.float32:
        m = m.astype(np.float64)
    if m.ndim != 2 or m.shape[1] != dims:
        raise ValueError(f"query matrix must have shape (n, {dims}), got {m.shape}")
    check_finite_rows(m, name)
    if m.dtype != np.float32 and m.size:
        peak = np.abs(m).max(axis=1)
        if bool(((peak > _F32_MAX) | ((peak < _F32_TINY) & (peak > 0))).any()):
            m = m / np.where(peak > 0, peak, 1.0)[:, None]  # values float32 cannot hold: scale each row first
        m = m.astype(np.float32)
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
