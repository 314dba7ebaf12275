"""The rows of a foreign format's matrix: filling them on read, checking them before a write.

* :class:`RowSink` grows the ``float32`` matrix of a reader that learns the
  row count as it goes; :func:`reuse_freed_memory` keeps the C allocator
  from returning its block-sized buffers to the OS between blocks;
  :func:`check_limit` validates a reader's ``limit`` argument.
* :func:`check_finite` refuses a read row with a NaN or infinity, naming it.
* :func:`check_rows_writable` / :func:`refuse_nonfinite` refuse, before a
  write, rows the readers would refuse; :func:`dense_matrix_with_norms`
  gives a writer its rows, norms multiplied back.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from finalfusion.errors import FormatError, NonFiniteError
from finalfusion.storage.ndarray import NdArray, Storage

if TYPE_CHECKING:
    from finalfusion.embeddings import Embeddings

__all__ = [
    "RowSink",
    "check_finite",
    "check_limit",
    "check_rows_writable",
    "dense_matrix_with_norms",
    "refuse_nonfinite",
    "reuse_freed_memory",
    "stored_rows",
]


def reuse_freed_memory() -> None:
    """Let the C allocator keep freed block-sized buffers instead of returning them to the OS.

    The block readers create a few MiB of temporary arrays per block. glibc's
    malloc serves such sizes with fresh ``mmap`` calls (or trims them off the
    heap) until it has seen a large block freed, so every block paid for
    page faults again -- about 40 % of the time of a large text conversion.
    Allocating and freeing one 16 MiB buffer raises glibc's dynamic
    thresholds once for the process; elsewhere this is a no-op.

    Examples
    --------
    >>> reuse_freed_memory()
    """
    global _THRESHOLD_RAISED
    if not _THRESHOLD_RAISED:
        scratch = np.empty(1 << 24, dtype=np.uint8)
        del scratch
        _THRESHOLD_RAISED = True


_THRESHOLD_RAISED = False


class RowSink:
    """A growing ``float32`` matrix for readers that learn the row count as they go.

    ``claimed`` rows are promised by a header; ``affordable`` is how many
    rows the input can hold at most (from its size) or ``None`` if unknown.
    Memory is preallocated for ``min(claimed, affordable)`` rows -- or at
    most about 64 MiB when the size is unknown -- and grows by doubling, so a
    header claiming 2^40 rows never allocates more than the data needs.
    Callers reserve only rows whose bytes they have already read.

    Examples
    --------
    >>> sink = RowSink(2, claimed=2**40, affordable=1)
    >>> sink.reserve(3)[:] = 1.0; sink.commit(3)
    >>> sink.finish().shape
    (3, 2)
    """

    def __init__(self, dims: int, claimed: int | None, affordable: int | None) -> None:
        self.dims = dims
        start = claimed if claimed is not None else 1 << 12
        # Unknown input size: start with at most about 64 MiB (no row at all if one row is larger) and
        # grow as rows are reserved, so a stream's header cannot make it allocate more than its data.
        cap = affordable if affordable is not None else (1 << 26) // max(4 * dims, 1)
        start = min(start, cap)
        # numpy < 1.23 allocates a (0, dims) array as if it had one row: build an empty one by reshaping.
        self.matrix = np.empty((start, dims), dtype=np.float32) if start > 0 else np.empty(0, dtype=np.float32).reshape(0, dims)
        self.rows = 0

    def fits(self, k: int) -> bool:
        """Whether ``k`` more rows fit without moving the matrix."""
        return self.rows + k <= self.matrix.shape[0]

    def reserve(self, k: int) -> npt.NDArray[np.float32]:
        """The next ``k`` rows to fill (the caller then calls :meth:`commit`)."""
        need = self.rows + k
        if need > self.matrix.shape[0]:
            grown = np.empty((max(need, 2 * self.matrix.shape[0]), self.dims), dtype=np.float32)
            grown[: self.rows] = self.matrix[: self.rows]
            self.matrix = grown
        return self.matrix[self.rows : need]

    def commit(self, k: int) -> None:
        self.rows += k

    def finish(self) -> npt.NDArray[np.float32]:
        """The filled rows (a copy only if more were allocated than filled)."""
        if self.rows == self.matrix.shape[0]:
            return self.matrix
        filled: npt.NDArray[np.float32] = self.matrix[: self.rows].copy()
        return filled


def check_finite(rows: npt.NDArray[np.float32], first: int, where: str) -> None:
    """Raise :class:`FormatError` naming the first row (numbered from ``first``) with a NaN or infinity.

    Examples
    --------
    >>> check_finite(np.array([[1.0], [np.nan]], dtype=np.float32), 5, "text line")
    Traceback (most recent call last):
    ...
    finalfusion.errors.FormatError: text line 6: vector has a NaN or infinite component: expected finite numbers, found [nan]
    """
    if rows.size and not np.isfinite(rows).all():
        bad = int(np.flatnonzero(~np.isfinite(rows).all(axis=1))[0])
        raise FormatError(f"{where} {first + bad}: vector has a NaN or infinite component", expected="finite numbers", found=rows[bad].tolist()[:10])


def check_limit(limit: int | None) -> None:
    """Validate a reader's ``limit`` argument.

    Examples
    --------
    >>> check_limit(None); check_limit(10)
    >>> check_limit(-1)
    Traceback (most recent call last):
    ...
    ValueError: limit must be a non-negative int or None, got -1
    """
    value: object = limit  # callers may pass anything
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
        raise ValueError(f"limit must be a non-negative int or None, got {limit!r}")


def stored_rows(storage: Storage, lo: int, hi: int) -> npt.NDArray[np.float32]:
    """Rows ``lo:hi`` of any storage as ``float32``: a view of a dense matrix, the reconstructed rows of a quantized one.

    Writers go block by block through this, so a quantized table is never
    reconstructed whole.

    Examples
    --------
    >>> m = NdArray(np.arange(6, dtype=np.float32).reshape(3, 2))
    >>> stored_rows(m, 1, 3).tolist(), np.shares_memory(stored_rows(m, 1, 3), m.matrix)
    ([[2.0, 3.0], [4.0, 5.0]], True)
    """
    if isinstance(storage, NdArray):
        return storage.matrix[lo:hi]
    return np.asarray(storage.rows(np.arange(lo, hi)), dtype=np.float32)


#: Rows checked at a time by :func:`check_rows_writable`.
_CHECK_ROWS = 1 << 14


def check_rows_writable(
    embeddings: Embeddings, fmt: str, unnormalize: bool = False, words_only: bool = True, dtype: str = "float32", norm_bound: bool = True
) -> None:
    """Raise :class:`~finalfusion.errors.NonFiniteError` if a row to be written has a NaN or infinite value.

    The text, word2vec and floret readers refuse such values, so their
    writers call this before writing anything. The rows are those a writer
    writes: the word rows (``words_only``) or all storage rows, times
    their norms with ``unnormalize`` (a finite row times a finite norm can
    still overflow float32), as the format stores them (``dtype``:
    ``"float16"`` for half-precision tables, where values beyond 65504
    become infinite). With ``norm_bound`` (for formats whose reader
    normalises) a row whose l2 norm is beyond float32's range is refused
    too. The error names the word (or row), its row and the first values.

    Examples
    --------
    >>> from finalfusion.compat._build import embeddings_from
    >>> from finalfusion.norms import Norms
    >>> emb = embeddings_from(["a", "b"], np.array([[1, 2], [3e38, 0.0]], dtype=np.float32), normalize=False)
    >>> check_rows_writable(emb, "text")
    >>> emb.norms = Norms([1.0, 2.0])
    >>> check_rows_writable(emb, "text", unnormalize=True)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    finalfusion.errors.NonFiniteError: text cannot represent the vector of the word 'b' (row 1): ... (after multiplying its norm 2.0 back): [inf, 0.0]
    """
    storage = embeddings.storage
    n = len(embeddings.vocab) if words_only else storage.shape[0]
    norms = embeddings.norms.norms if unnormalize and words_only and embeddings.norms is not None else None
    for lo in range(0, n, _CHECK_ROWS):
        hi = min(n, lo + _CHECK_ROWS)
        block = stored_rows(storage, lo, hi)
        if norms is not None:
            with np.errstate(over="ignore", invalid="ignore"):
                block = block * norms[lo:hi, None]
        refuse_nonfinite(block, embeddings.vocab.words, fmt, lo, None if norms is None else norms[lo:hi], dtype, norm_bound)


def refuse_nonfinite(
    rows: npt.NDArray[np.float32],
    words: Sequence[str],
    fmt: str,
    first: int = 0,
    norms: npt.NDArray[np.float32] | None = None,
    dtype: str = "float32",
    norm_bound: bool = True,
) -> None:
    """Raise :class:`~finalfusion.errors.NonFiniteError` naming the first row of ``rows`` with a NaN or infinity.

    ``rows[0]`` is row ``first``; rows past ``words`` are subword rows.
    ``norms`` (of ``rows``), if given, were multiplied into them. With
    ``dtype="float16"`` values that become infinite in float16 count too.
    With ``norm_bound``, a finite row whose l2 norm is beyond float32's
    range is refused as well: a reader that normalises could not keep its
    norm.

    Examples
    --------
    >>> refuse_nonfinite(np.ones((2, 2), dtype=np.float32), ["a", "b"], "fastText")
    >>> refuse_nonfinite(np.array([[1, np.nan]], dtype=np.float32), ["a", "b"], "fastText", first=1)
    Traceback (most recent call last):
    ...
    finalfusion.errors.NonFiniteError: fastText cannot represent the vector of the word 'b' (row 1): it has a NaN or infinite value: [1.0, nan]
    """
    stored = rows
    if dtype != "float32":
        with np.errstate(over="ignore", invalid="ignore"):
            stored = rows.astype(dtype)
    ok = np.isfinite(stored).all(axis=1)
    if bool(ok.all()):
        if norm_bound:
            _refuse_overflowing_norm(rows, words, fmt, first, norms)
        return
    j = int(np.argmin(ok))
    i = first + j
    what = f"the word {words[i]!r}" if i < len(words) else "a subword row"
    after = f" (after multiplying its norm {float(norms[j])!r} back)" if norms is not None else ""
    kind = "" if dtype == "float32" else f" in {dtype}"
    raise NonFiniteError(f"{fmt} cannot represent the vector of {what} (row {i}): it has a NaN or infinite value{kind}{after}: {rows[j].tolist()[:10]}")


def _refuse_overflowing_norm(rows: npt.NDArray[np.float32], words: Sequence[str], fmt: str, first: int, norms: npt.NDArray[np.float32] | None) -> None:
    """Raise :class:`~finalfusion.errors.NonFiniteError` for the first finite row whose l2 norm float32 cannot hold.

    The readers refuse such a row with ``normalize=True`` (its norm cannot
    be kept), so a file holding one would not read back with the defaults.
    Only rows whose float32 sum of squares overflows are measured again in
    float64, so ordinary rows cost one pass.
    """
    with np.errstate(over="ignore", invalid="ignore"):
        squares = np.einsum("ij,ij->i", rows, rows)
    suspect = np.flatnonzero(~np.isfinite(squares))
    if not len(suspect):
        return
    wide = rows[suspect].astype(np.float64)
    exact = np.sqrt(np.einsum("ij,ij->i", wide, wide))
    over = np.flatnonzero(exact > float(np.finfo(np.float32).max))
    if not len(over):
        return
    j = int(suspect[over[0]])
    i = first + j
    what = f"the word {words[i]!r}" if i < len(words) else "a subword row"
    after = f" (after multiplying its norm {float(norms[j])!r} back)" if norms is not None else ""
    raise NonFiniteError(
        f"{fmt} cannot represent the vector of {what} (row {i}): its l2 norm {float(exact[over[0]]):.8g} is beyond float32's range "
        f"(3.4028235e+38), so the file would not read back with normalize=True{after}: {rows[j].tolist()[:10]}"
    )


def dense_matrix_with_norms(emb: Embeddings, unnormalize: bool = True, start: int = 0, stop: int | None = None) -> npt.NDArray[np.float32]:
    """The word rows of ``emb`` as a dense ``float32`` matrix, norms multiplied back.

    Only the ``len(emb.vocab)`` word rows are returned (subword rows are
    dropped); works on dense and quantized storage. Without a norms chunk,
    or with ``unnormalize=False``, the rows are returned as stored. The
    result never shares memory with the embeddings. ``start`` and ``stop``
    select a range of words (writers go block by block to bound memory).

    Examples
    --------
    >>> from finalfusion.compat._build import embeddings_from
    >>> emb = embeddings_from(["a"], np.array([[3, 4]], dtype=np.float32), True)
    >>> dense_matrix_with_norms(emb).tolist()
    [[3.0, 4.0]]
    """
    n = len(emb.vocab)
    stop = n if stop is None else min(stop, n)
    block = stored_rows(emb.storage, start, stop)
    # A dense matrix's rows are a view: copied (the result is scaled in place); reconstructed rows are new already.
    matrix = np.array(block, order="C") if isinstance(emb.storage, NdArray) else np.ascontiguousarray(block)
    if unnormalize and emb.norms is not None:
        matrix *= emb.norms.norms[start:stop, None]
    return matrix
