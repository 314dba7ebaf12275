"""Subword n-grams, hash functions and indexers (finalfusion-python 0.7 compatible).

Examples
--------
>>> from finalfusion.subword import ngrams, FinalfusionHashIndexer
>>> ngrams("ab")
['<ab>', '<ab', 'ab>']
>>> FinalfusionHashIndexer(10).subword_indices("ab", offset=2)
[210, 59, 525]
"""

from __future__ import annotations

from finalfusion.subword.hashing import fnv1a32_fasttext, fnv1a64_finalfusion, murmur3_x64_128
from finalfusion.subword.indexers import (
    ExplicitIndexer,
    FastTextIndexer,
    FinalfusionHashIndexer,
    FloretIndexer,
    SubwordIndexer,
)
from finalfusion.subword.ngrams import ngrams

__all__ = [
    "ExplicitIndexer",
    "FastTextIndexer",
    "FinalfusionHashIndexer",
    "FloretIndexer",
    "SubwordIndexer",
    "fnv1a32_fasttext",
    "fnv1a64_finalfusion",
    "murmur3_x64_128",
    "ngrams",
]
