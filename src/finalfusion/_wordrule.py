"""A text's vector by the vocabulary's word rule: the one place :class:`~finalfusion.Embeddings` asks for it.

The vocabulary decides which rows a text is (:meth:`~finalfusion.vocab.Vocab.word_rows`)
and how several rows pool (:attr:`~finalfusion.vocab.Vocab.pooling`); this
module only does the arithmetic: a text that is one row gets that row as
stored, n-gram rows their l2-normalised sum (:mod:`finalfusion._batch`), a
model's token rows their mean (:mod:`finalfusion._encode`). Single lookups
and batches give the same vectors.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from finalfusion._batch import embed_batch, unit_sum
from finalfusion._encode import model_mean, model_word_batch
from finalfusion.storage.ndarray import Storage
from finalfusion.vocab.base import Vocab

if TYPE_CHECKING:
    from finalfusion.norms import Norms

__all__ = ["word_vector", "word_vectors"]

F32 = npt.NDArray[np.float32]


def word_vector(vocab: Vocab, storage: Storage, matrix: F32 | None, norms: Norms | None, text: str) -> tuple[F32, float] | None:
    """``(vector, norm)`` of ``text`` by the word rule, ``None`` when it has no vector.

    The vector of a text that is one row is that row as stored (a view of
    dense storage) with its norm from ``norms`` (``1.0`` without); pooled
    rows give a new array and the norm of the pooled vector.

    Examples
    --------
    >>> from finalfusion.storage import NdArray
    >>> from finalfusion.vocab import SimpleVocab
    >>> m = np.eye(2, dtype=np.float32)
    >>> word_vector(SimpleVocab(["a", "b"]), NdArray(m), m, None, "b")[0].tolist(), word_vector(SimpleVocab(["a"]), NdArray(m[:1]), m[:1], None, "c")
    ([0.0, 1.0], None)
    """
    rows = vocab.word_rows(text)
    if isinstance(rows, int):
        row = matrix[rows] if matrix is not None else storage.row(rows)
        return row, (float(norms.norms[rows]) if norms is not None else 1.0)
    if not len(rows):
        return None
    if vocab.pooling == "mean":
        return model_mean(storage, matrix, norms, rows)
    return unit_sum(storage, matrix, rows)


def word_vectors(
    vocab: Vocab, storage: Storage, matrix: F32 | None, norms: Norms | None, texts: Sequence[str], out: F32 | None, threads: int | None
) -> tuple[F32, npt.NDArray[np.bool_]]:
    """The vectors of ``texts`` by the word rule (zeros for none) and the mask of texts with a vector; as :func:`word_vector` gives them.

    Raises
    ------
    ValueError
        If ``out`` does not have the shape ``(len(texts), dims)``.
    """
    if vocab.pooling == "mean":
        return model_word_batch(vocab, storage, matrix, norms, texts, out)  # type: ignore[arg-type]
    return embed_batch(vocab.word_index, vocab if vocab.pooling is not None else None, storage, matrix, texts, out, threads)  # type: ignore[arg-type]
