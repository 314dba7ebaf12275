"""Vocabularies (finalfusion-python 0.7 compatible).

Examples
--------
>>> from finalfusion.vocab import SimpleVocab
>>> SimpleVocab(["a", "b"]).word_index["b"]
1
"""

from __future__ import annotations

from finalfusion._types import Source
from finalfusion.vocab._index import WordIndex
from finalfusion.vocab.base import SubwordVocab, Vocab
from finalfusion.vocab.simple import SimpleVocab
from finalfusion.vocab.subword import ExplicitVocab, FastTextVocab, FinalfusionBucketVocab, FloretVocab

__all__ = [
    "ExplicitVocab",
    "FastTextVocab",
    "FinalfusionBucketVocab",
    "FloretVocab",
    "SimpleVocab",
    "SubwordVocab",
    "Vocab",
    "WordIndex",
    "load_explicit_vocab",
    "load_fasttext_vocab",
    "load_finalfusion_bucket_vocab",
    "load_floret_vocab",
    "load_simple_vocab",
    "load_vocab",
]


def load_vocab(file: Source) -> Vocab:
    """Read the vocabulary chunk of a finalfusion file.

    Raises
    ------
    FormatError
        If the file is malformed or has no vocabulary chunk.

    Examples
    --------
    >>> import finalfusion, io
    >>> buf = io.BytesIO()
    >>> SimpleVocab(["a"]).write(buf)
    >>> load_vocab(buf.getvalue()).words
    ['a']
    """
    from finalfusion.io import load_chunk

    return load_chunk(file, Vocab)


def load_simple_vocab(file: Source) -> SimpleVocab:
    """Read a :class:`SimpleVocab` chunk from a finalfusion file."""
    from finalfusion.io import load_chunk

    return load_chunk(file, SimpleVocab)


def load_finalfusion_bucket_vocab(file: Source) -> FinalfusionBucketVocab:
    """Read a :class:`FinalfusionBucketVocab` chunk from a finalfusion file."""
    from finalfusion.io import load_chunk

    return load_chunk(file, FinalfusionBucketVocab)


def load_fasttext_vocab(file: Source) -> FastTextVocab:
    """Read a :class:`FastTextVocab` chunk from a finalfusion file."""
    from finalfusion.io import load_chunk

    return load_chunk(file, FastTextVocab)


def load_explicit_vocab(file: Source) -> ExplicitVocab:
    """Read an :class:`ExplicitVocab` chunk from a finalfusion file."""
    from finalfusion.io import load_chunk

    return load_chunk(file, ExplicitVocab)


def load_floret_vocab(file: Source) -> FloretVocab:
    """Read a :class:`FloretVocab` chunk from a finalfusion file."""
    from finalfusion.io import load_chunk

    return load_chunk(file, FloretVocab)
