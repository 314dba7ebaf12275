"""Batch lookups of unknown words: subword sums on the library's threads.

:meth:`~finalfusion.Embeddings.embedding_batch` hands its words here
(:func:`embed_batch`, through :mod:`finalfusion._wordrule`), and
:meth:`~finalfusion.Embeddings.embedding` the subword rows of an unknown word
(:func:`unit_sum`). Each distinct word is hashed once, in vectorised
batches; the subword rows of up to :data:`TASK_WORDS` words form one task,
and the tasks run on :func:`finalfusion._threads.run_tasks` threads while
the next words are hashed. Every task writes its own output rows and sums
each word's rows in the same order as a serial run: the result is
bit-identical for every thread count.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from finalfusion._threads import run_tasks, threads_for
from finalfusion.storage.ndarray import Storage
from finalfusion.vocab._index import WordIndex
from finalfusion.vocab.base import SubwordVocab

__all__ = [
    "ACC_WORDS",
    "GATHER_ROWS",
    "LONG_ROWS",
    "ORDERED_CELLS",
    "SUM_BYTES",
    "TASK_WORDS",
    "embed_batch",
    "fill_unknown",
    "store_subword_sums",
    "sum_rows",
    "unit_sum",
]

F32 = npt.NDArray[np.float32]
I64 = npt.NDArray[np.int64]

#: Rows gathered at once when summing subword rows in batch lookups (storage without a matrix).
GATHER_ROWS = 1 << 16
#: Words summed together per accumulator block (dense storage).
ACC_WORDS = 256
#: Words per task in batch lookups of unknown words (a multiple of ``ACC_WORDS``).
#: Batches below ``2 * TASK_WORDS`` distinct unknown words stay on the calling thread.
TASK_WORDS = 2048
#: Words with more subword rows than this are summed one by one with :func:`sum_rows` in batch lookups.
LONG_ROWS = 1 << 12
#: Bytes of gathered rows held at once when summing the rows of one long word.
SUM_BYTES = 1 << 24
#: Largest rows x dims summed strictly in order by :func:`sum_rows` (about half a second).
ORDERED_CELLS = 1 << 26


def sum_rows(storage: Storage, matrix: F32 | None, rows: I64, *, ordered: bool) -> F32:
    """The sum of the storage rows ``rows`` (one long word's subword rows), in bounded memory and work.

    Rows are gathered in blocks of at most :data:`SUM_BYTES`, each block
    carrying the running sum into its first row, so there is no
    ``(len(rows), dims)`` temporary. With ``ordered`` (fastText's loader) and
    at most :data:`ORDERED_CELLS` rows x dims, the rows are added strictly one
    after another (``np.add.accumulate``): bit-identical to the column-by-column
    sums used for shorter words, so loaded files do not change. Otherwise each
    block is one ``np.add.reduce`` (numpy's pairwise grouping, as single
    lookups of short words sum) -- unless the rows repeat (at most half are
    distinct, or an ordered sum is too large): then every distinct row is
    gathered once and added with its count in float64, so the work is bounded
    by the storage's size, not by rows x dims. Needs at least one row.

    Examples
    --------
    >>> from finalfusion.storage import NdArray
    >>> m = np.arange(12, dtype=np.float32).reshape(6, 2)
    >>> sum_rows(NdArray(m), m, np.array([0, 5, 5]), ordered=True).tolist()
    [20.0, 23.0]
    >>> sum_rows(NdArray(m), m, np.array([5] * 1000 + [0]), ordered=False).tolist()  # 2 distinct rows: weighted
    [10000.0, 11001.0]
    """
    dims = storage.shape[1]
    step = max(1, SUM_BYTES // (4 * max(dims, 1)))  # read at call time (tests lower it)

    def gather(index: I64) -> F32:
        return matrix.take(index, axis=0) if matrix is not None else storage.rows(index)

    if not (ordered and len(rows) * dims <= ORDERED_CELLS):
        counts = np.bincount(rows)
        distinct = np.flatnonzero(counts)
        if ordered or 2 * len(distinct) <= len(rows):
            total = np.zeros(dims, dtype=np.float64)
            for lo in range(0, len(distinct), step):
                block = distinct[lo : lo + step]
                total += counts[block].astype(np.float64) @ gather(block).astype(np.float64)
            return total.astype(np.float32)
    acc: F32 | None = None
    for lo in range(0, len(rows), step):
        block_rows = gather(rows[lo : lo + step])
        if acc is not None:
            block_rows[0] += acc
        if ordered:
            np.add.accumulate(block_rows, axis=0, out=block_rows)
            acc = block_rows[-1].copy()
        else:
            acc = np.add.reduce(block_rows, axis=0, dtype=np.float32)
    return np.asarray(acc, dtype=np.float32)


def unit_sum(storage: Storage, matrix: F32 | None, rows: I64) -> tuple[F32, float]:
    """The l2-normalised sum of the storage rows ``rows`` (at least one: an unknown word's subword rows) and the norm of the sum.

    ``matrix`` is the dense matrix of ``storage``, or ``None`` for other storage.
    A zero sum stays zero (norm ``0.0``).

    Examples
    --------
    >>> from finalfusion.storage import NdArray
    >>> m = np.array([[3, 0], [0, 4]], dtype=np.float32)
    >>> vec, norm = unit_sum(NdArray(m), m, np.array([0, 1]))
    >>> vec.tolist(), norm
    ([0.6000000238418579, 0.800000011920929], 5.0)
    """
    if len(rows) > LONG_ROWS:  # a long word: summed in bounded blocks
        v = sum_rows(storage, matrix, rows, ordered=False)
    else:
        gathered = matrix.take(rows, axis=0) if matrix is not None else storage.rows(rows)
        v = np.add.reduce(gathered, axis=0, dtype=np.float32)
    # float32 dot and sqrt as before, with Python scalars (cheaper than numpy ones).
    norm32 = np.float32(math.sqrt(v.dot(v)))
    norm = float(norm32)
    if norm != 0.0:
        v /= norm32
    return v, norm


def embed_batch(
    index: WordIndex, vocab: SubwordVocab[Any] | None, storage: Storage, matrix: F32 | None, words: Sequence[str], out: F32 | None, threads: int | None
) -> tuple[F32, npt.NDArray[np.bool_]]:
    """The rows of ``words`` and the mask of those found (:meth:`~finalfusion.Embeddings.embedding_batch`).

    Known words are gathered with one fancy index; unknown words are filled
    by :func:`fill_unknown` when ``vocab`` (a subword vocabulary) is given,
    else zeroed. ``threads`` is the checked thread count (``None``: the
    library setting).

    Raises
    ------
    ValueError
        If ``out`` does not have the shape ``(len(words), dims)``.
    """
    n = len(words)
    dims = storage.shape[1]
    if out is not None and out.shape != (n, dims):
        raise ValueError(f"out must have shape ({n}, {dims}), got {out.shape}")
    # All words hashed and probed at once (-1: unknown); all known: one gather.
    idx = index.lookup(words)
    if n == 0 or idx.min() >= 0:
        if matrix is None:
            rows = storage.rows(idx)
            if out is None:
                return rows, np.ones(n, dtype=bool)
            out[...] = rows
        elif out is None:
            out = matrix[idx]
        else:
            np.take(matrix, idx, axis=0, out=out)
        return out, np.ones(n, dtype=bool)
    if out is None:
        out = np.empty((n, dims), dtype=np.float32)
    found = idx >= 0
    known = np.flatnonzero(found)
    missing = np.flatnonzero(~found)
    if len(known):
        out[known] = matrix[idx[known]] if matrix is not None else storage.rows(idx[known])
    if vocab is not None:
        # also zeroes the rows without n-grams
        fill_unknown(vocab, storage, matrix, words, missing, out, found, threads_for(threads))
    else:
        out[missing] = 0
    return out, found


def fill_unknown(
    vocab: SubwordVocab[Any],
    storage: Storage,
    matrix: F32 | None,
    words: Sequence[str],
    positions: I64,
    out: F32,
    found: npt.NDArray[np.bool_],
    threads: int,
) -> None:
    """Fill ``out[positions]`` (unknown words) with normalised subword sums; zeros where no n-gram exists.

    ``matrix`` is the dense matrix of ``storage``, or ``None`` for other
    storage. Sets ``found`` for the words with an embedding. Uses up to
    ``threads`` threads, the calling one included.
    """
    unknown = list(words) if len(positions) == len(words) else [words[p] for p in positions.tolist()]
    uniq = list(dict.fromkeys(unknown))
    # Without repeated words each distinct word has one output row: write
    # there directly instead of through a (words, dims) temporary.
    if len(uniq) == len(positions):
        target, dest, slot = out, positions, None
    else:
        first = {w: i for i, w in enumerate(uniq)}
        slot = np.fromiter(map(first.__getitem__, unknown), dtype=np.int64, count=len(unknown))
        target, dest = np.zeros((len(uniq), out.shape[1]), dtype=np.float32), np.arange(len(uniq))
    has = np.zeros(len(uniq), dtype=bool)
    run_tasks(_subword_sum_tasks(vocab, storage, matrix, uniq, target, dest, has), min(threads, -(-len(uniq) // TASK_WORDS)))
    if slot is None:
        out[dest[~has]] = 0
        found[dest[has]] = True
    else:
        out[positions] = target[slot]
        found[positions] = has[slot]


def _subword_sum_tasks(
    vocab: SubwordVocab[Any], storage: Storage, matrix: F32 | None, uniq: list[str], target: F32, dest: I64, has: npt.NDArray[np.bool_]
) -> Iterator[Callable[[], None]]:
    """Tasks storing the normalised subword sum of ``uniq[i]`` at ``target[dest[i]]``, yielded as the words are hashed.

    Sets ``has[i]`` for every word with at least one n-gram row. Each
    task covers up to :data:`TASK_WORDS` words of one hashed group.
    """
    for pos, rows in vocab.batch_subword_rows(uniq):
        has[pos] = True
        for lo in range(0, len(pos), TASK_WORDS):
            yield functools.partial(store_subword_sums, storage, matrix, rows[lo : lo + TASK_WORDS], target, dest[pos[lo : lo + TASK_WORDS]])


def store_subword_sums(storage: Storage, matrix: F32 | None, rows: I64, target: F32, dest: I64) -> None:
    """Store at ``target[dest[i]]`` the normalised sum of the storage rows ``rows[i]`` (a words x K matrix)."""
    if rows.shape[1] > LONG_ROWS:  # long words: a bounded gather per word, not a Python loop over K columns
        for i in range(len(rows)):
            _store_normalized(sum_rows(storage, matrix, rows[i], ordered=False)[None, :], target, dest[i : i + 1])
        return
    if matrix is None:
        step = max(1, GATHER_ROWS // rows.shape[1])
        for lo in range(0, len(rows), step):
            _store_normalized(storage.rows(rows[lo : lo + step]).sum(axis=1, dtype=np.float32), target, dest[lo : lo + step])
        return
    # Dense storage: add one n-gram column at a time into a small,
    # cache-resident accumulator instead of materialising (words, K, dims),
    # and normalise it while it is still in cache. ``take`` copies whole
    # rows with memmove: about a quarter cheaper than ``matrix[column]``.
    take = matrix.take
    for lo in range(0, len(rows), ACC_WORDS):
        block = rows[lo : lo + ACC_WORDS]
        acc = take(block[:, 0], axis=0)
        for k in range(1, block.shape[1]):
            acc += take(block[:, k], axis=0)
        _store_normalized(acc, target, dest[lo : lo + ACC_WORDS])


def _store_normalized(acc: F32, target: F32, rows: I64) -> None:
    """l2-normalise the rows of ``acc`` in place (zero rows stay zero) and store them at ``target[rows]``."""
    norms = np.sqrt(np.einsum("ij,ij->i", acc, acc))
    norms[norms == 0] = 1  # x / 1 == x: cheaper than a masked divide
    acc /= norms[:, None]
    target[rows] = acc
