"""gensim's ``load_word2vec_format`` spelling over the word2vec and text readers.

gensim spells it ``KeyedVectors.load_word2vec_format(...)`` (a classmethod)
and ``gensim.models.keyedvectors.load_word2vec_format(...)`` (a function).
Here it is the function :func:`finalfusion.compat.load_word2vec_format`: a
classmethod of :class:`~finalfusion.Embeddings` would have the facade import
the format readers, which sit above it (docs/architecture.md).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from finalfusion._gensim_api import register_loader
from finalfusion._source import Source
from finalfusion.compat.text import load_text, load_text_dims
from finalfusion.compat.word2vec import load_word2vec
from finalfusion.embeddings import Embeddings

__all__ = ["load_word2vec_format"]


def load_word2vec_format(
    fname: Source,
    fvocab: Any = None,
    binary: bool = False,
    encoding: str = "utf8",
    unicode_errors: str = "strict",
    limit: int | None = None,
    datatype: Any = np.float32,
    no_header: bool = False,
) -> Embeddings:
    """gensim's ``load_word2vec_format``: word2vec binary or text vectors, kept as stored, as gensim keeps them.

    The rows are not normalised and there is no norms chunk, so every
    spelling -- ``emb[w]`` included -- returns gensim's vectors exactly.
    ``binary=True`` reads with :func:`~finalfusion.compat.load_word2vec`,
    text with :func:`~finalfusion.compat.load_text_dims`, or
    :func:`~finalfusion.compat.load_text` with ``no_header=True``; their
    checks apply (a malformed file is a :class:`~finalfusion.FormatError`).

    Parameters
    ----------
    fname
        Any :data:`~finalfusion.Source` (gensim: a path).
    fvocab
        Not supported: finalfusion keeps no word counts.
    binary
        word2vec's binary format instead of text.
    encoding
        ``"utf8"`` only.
    unicode_errors
        ``"strict"``, or ``"replace"`` (invalid UTF-8 becomes U+FFFD).
    limit
        Read only the first ``limit`` vectors.
    datatype
        ``numpy.float32`` only (finalfusion storage is ``float32``).
    no_header
        A text file without the ``count dims`` line.

    Raises
    ------
    ValueError
        For an argument value that finalfusion does not support (named).
    NotImplementedError
        For ``no_header`` with ``binary`` (as gensim).
    FormatError
        If the file is malformed.

    Examples
    --------
    >>> from finalfusion.compat import load_word2vec_format
    >>> emb = load_word2vec_format(b"2 2\\nBerlin 3 4\\nParis 0 2\\n")
    >>> emb["Berlin"].tolist(), emb.get_vector("Paris").tolist(), emb.norms is None
    ([3.0, 4.0], [0.0, 2.0], True)
    """
    if fvocab is not None:
        raise ValueError("fvocab is not supported: finalfusion keeps no word counts")
    if encoding.lower().replace("-", "").replace("_", "") != "utf8":
        raise ValueError(f"only encoding='utf8' is supported, got {encoding!r}")
    if unicode_errors not in ("strict", "replace"):
        raise ValueError(f"unicode_errors must be 'strict' or 'replace', got {unicode_errors!r}")
    if np.dtype(datatype) != np.float32:
        raise ValueError(f"only datatype=numpy.float32 is supported (finalfusion stores float32), got {np.dtype(datatype)}")
    lossy = unicode_errors == "replace"
    if binary:
        if no_header:
            raise NotImplementedError("no_header only available for text-format files")
        return load_word2vec(fname, normalize=False, lossy=lossy, limit=limit)
    loader = load_text if no_header else load_text_dims
    return loader(fname, normalize=False, lossy=lossy, limit=limit)


register_loader("load_word2vec_format", load_word2vec_format)
