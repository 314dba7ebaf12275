"""Vocabularies (finalfusion-python 0.7 compatible).

Examples
--------
>>> from finalfusion.vocab import SimpleVocab
>>> SimpleVocab(["a", "b"]).word_index["b"]
1
"""

from __future__ import annotations

from finalfusion._source import Source
from finalfusion._tokenizers import HuggingFaceTokenizer, SentencePieceTokenizer, Tokenizer
from finalfusion.container import load_chunk
from finalfusion.vocab._index import WordIndex
from finalfusion.vocab.base import SubwordVocab, Vocab
from finalfusion.vocab.simple import SimpleVocab
from finalfusion.vocab.subword import ExplicitVocab, FastTextVocab, FinalfusionBucketVocab, FloretVocab
from finalfusion.vocab.tokenizer import TokenizerVocab

__all__ = [
    "ExplicitVocab",
    "FastTextVocab",
    "FinalfusionBucketVocab",
    "FloretVocab",
    "HuggingFaceTokenizer",
    "SentencePieceTokenizer",
    "SimpleVocab",
    "SubwordVocab",
    "Tokenizer",
    "TokenizerVocab",
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
    return load_chunk(file, Vocab)


def load_simple_vocab(file: Source) -> SimpleVocab:
    """Read a :class:`SimpleVocab` chunk from a finalfusion file.

    Raises
    ------
    FormatError
        If the file is malformed or has no ``SimpleVocab`` chunk.

    Examples
    --------
    >>> import io
    >>> buf = io.BytesIO()
    >>> SimpleVocab(["Berlin", "Potsdam"]).write(buf)
    >>> load_simple_vocab(buf.getvalue()).words
    ['Berlin', 'Potsdam']
    """
    return load_chunk(file, SimpleVocab)


def load_finalfusion_bucket_vocab(file: Source) -> FinalfusionBucketVocab:
    """Read a :class:`FinalfusionBucketVocab` chunk from a finalfusion file.

    Raises
    ------
    FormatError
        If the file is malformed or has no ``FinalfusionBucketVocab`` chunk.

    Examples
    --------
    >>> import io
    >>> from finalfusion.subword import FinalfusionHashIndexer
    >>> buf = io.BytesIO()
    >>> FinalfusionBucketVocab(["ab"], FinalfusionHashIndexer(10, 3, 4)).write(buf)
    >>> load_finalfusion_bucket_vocab(buf.getvalue()).subword_indexer
    FinalfusionHashIndexer(bucket_exp=10, min_n=3, max_n=4)
    """
    return load_chunk(file, FinalfusionBucketVocab)


def load_fasttext_vocab(file: Source) -> FastTextVocab:
    """Read a :class:`FastTextVocab` chunk from a finalfusion file.

    Raises
    ------
    FormatError
        If the file is malformed or has no ``FastTextVocab`` chunk.

    Examples
    --------
    >>> import io
    >>> from finalfusion.subword import FastTextIndexer
    >>> buf = io.BytesIO()
    >>> FastTextVocab(["ab"], FastTextIndexer(100, 3, 3)).write(buf)
    >>> vocab = load_fasttext_vocab(buf.getvalue())
    >>> vocab.words, vocab.upper_bound  # 1 word + 100 buckets
    (['ab'], 101)
    """
    return load_chunk(file, FastTextVocab)


def load_explicit_vocab(file: Source) -> ExplicitVocab:
    """Read an :class:`ExplicitVocab` chunk from a finalfusion file.

    Raises
    ------
    FormatError
        If the file is malformed or has no ``ExplicitVocab`` chunk.

    Examples
    --------
    >>> import io
    >>> from finalfusion.subword import ExplicitIndexer
    >>> buf = io.BytesIO()
    >>> ExplicitVocab(["ab"], ExplicitIndexer(["<ab", "ab>"], 3, 3)).write(buf)
    >>> load_explicit_vocab(buf.getvalue()).subword_indexer.ngram_index
    {'<ab': 0, 'ab>': 1}
    """
    return load_chunk(file, ExplicitVocab)


def load_floret_vocab(file: Source) -> FloretVocab:
    """Read a :class:`FloretVocab` chunk from a finalfusion file.

    Raises
    ------
    FormatError
        If the file is malformed or has no ``FloretVocab`` chunk.

    Examples
    --------
    >>> import io
    >>> from finalfusion.subword import FloretIndexer
    >>> buf = io.BytesIO()
    >>> FloretVocab(FloretIndexer(10, 3, 6, n_hashes=2)).write(buf)
    >>> load_floret_vocab(buf.getvalue()).subword_indexer.n_hashes
    2
    """
    return load_chunk(file, FloretVocab)
