"""Embeddings built from what a foreign reader found: a word list, its matrix, optional metadata.

:func:`embeddings_from` builds :class:`~finalfusion.embeddings.Embeddings`
the way finalfusion-python 0.7.1 and Rust do after a conversion (rows
l2-normalised, norms kept); :func:`simple_vocab` refuses a repeated word,
naming both of its records; :func:`checked_norms` turns the norms into an
``NdNorms`` chunk or a :class:`~finalfusion.errors.FormatError` naming the
word whose norm float32 cannot hold.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from finalfusion.compat._words import first_repeat
from finalfusion.embeddings import Embeddings
from finalfusion.errors import FormatError
from finalfusion.metadata import Metadata
from finalfusion.norms import Norms, first_invalid_norm, normalize_rows
from finalfusion.storage.ndarray import NdArray
from finalfusion.vocab.base import Vocab, build_index
from finalfusion.vocab.simple import SimpleVocab

__all__ = ["checked_norms", "embeddings_from", "simple_vocab"]


def simple_vocab(words: list[str], where: str, first: int = 1) -> SimpleVocab:
    """A :class:`SimpleVocab` of ``words``; a duplicate word is a :class:`FormatError`.

    ``where`` names the unit of the input (e.g. ``"word2vec record"``) and
    ``first`` the number of the first word's unit, so the error can say
    which record or line repeats which.

    Examples
    --------
    >>> simple_vocab(["a", "b", "a"], "text line")
    Traceback (most recent call last):
    ...
    finalfusion.errors.FormatError: text: text line 3 repeats the word 'a' of line 1: expected unique words, found a
    """
    try:
        index = build_index(words)
    except ValueError:
        repeat = first_repeat(words)
        if repeat is None:
            raise
        i, j = repeat
        raise FormatError(
            f"{where} {first + i} repeats the word {words[i]!r} of {where.split()[-1]} {first + j}",
            chunk=where.split()[0],
            expected="unique words",
            found=words[i],
        ) from None
    return SimpleVocab(words, index)


def embeddings_from(
    words: list[str],
    matrix: npt.NDArray[np.float32],
    normalize: bool,
    metadata: Metadata | None = None,
    vocab: Vocab | None = None,
    where: str = "input word",
    first: int = 1,
) -> Embeddings:
    """Embeddings from a word list and its matrix, normalised like the converters of 0.7.1 and Rust.

    Parameters
    ----------
    words
        The known words (ignored when ``vocab`` is given).
    matrix
        ``float32`` matrix; with ``normalize`` its first ``len(words)`` rows
        are l2-normalised in place and their norms kept in an ``NdNorms`` chunk
        (subword rows, if any, stay as they are).
    normalize
        Whether to normalise (the finalfusion-python 0.7.1 default) or keep the rows as read, without norms.
    metadata, vocab
        Optional metadata chunk and vocabulary (default: a :class:`SimpleVocab` of ``words``).
    where, first
        Unit of the input and number of the first word's unit, for errors
        about duplicate words (see :func:`simple_vocab`).

    Examples
    --------
    >>> import numpy as np
    >>> emb = embeddings_from(["a", "b"], np.array([[3, 4], [0, 0]], dtype=np.float32), True)
    >>> emb["a"].tolist(), emb.norms.norms.tolist()
    ([0.6000000238418579, 0.800000011920929], [5.0, 0.0])
    """
    if vocab is None:
        vocab = simple_vocab(words, where, first)
    norms = None
    if normalize:
        n = len(vocab)
        norms = checked_norms(matrix[:n] if matrix.shape[0] != n else matrix, vocab.words, where, first)
    return Embeddings(NdArray(matrix), vocab, norms=norms, metadata=metadata)


def checked_norms(matrix: npt.NDArray[np.float32], words: Sequence[str], where: str = "input word", first: int = 1) -> Norms:
    """l2-normalise the word rows ``matrix`` in place (:func:`normalize_rows`) and return their ``NdNorms`` chunk.

    Raises
    ------
    FormatError
        If a row's norm is not a finite ``float32`` -- a NaN or infinite
        component, or a length beyond float32's range (3.4e38) --, naming
        the word and its unit (``where`` numbered from ``first``): such a
        row cannot be normalised with its norm kept, and nothing could
        multiply it back. ``normalize=False`` keeps such rows as they are.

    Examples
    --------
    >>> m = np.array([[3, 4], [3e38, 3e38]], dtype=np.float32)
    >>> checked_norms(m, ["a", "b"], "text line")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    finalfusion.errors.FormatError: text: line 2 (word 'b'): the vector's l2 norm is not a finite float32...: expected a norm up to 3.4028235e+38, found inf
    """
    norms = normalize_rows(matrix)
    bad = first_invalid_norm(norms)
    if bad is not None:
        unit = where.split()[-1]
        raise FormatError(
            f"{unit} {first + bad} (word {words[bad]!r}): the vector's l2 norm is not a finite float32, so it cannot be kept as a norm "
            "(load with normalize=False to keep the vectors as they are)",
            chunk=where.split()[0],
            expected=f"a norm up to {float(np.finfo(np.float32).max):.8g}",
            found=float(norms[bad]),
        )
    return Norms(norms)
