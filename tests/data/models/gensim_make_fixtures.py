#!/usr/bin/env python3
"""Write the small gensim ``KeyedVectors`` pickles the fuzzer starts from (``fuzz/fuzz.py --reader gensim-pickle``).

Run from the repository root (needs ``pip install gensim``)::

    python tests/data/models/gensim_make_fixtures.py

``gensim_kv.kv``: a ``KeyedVectors`` of 6 words x 4 dimensions (one word
non-ASCII), saved whole by gensim's ``kv.save(fname)``.
``gensim_fasttext.kv``: the ``FastTextKeyedVectors`` of a fastText model
gensim trained on a tiny corpus (4 dimensions, 16 buckets, n-grams 2-4),
saved the same way. ``tests/test_gensim_api.py`` builds its files with
gensim itself; these two are only the fuzzer's seeds, so that a plain clone
fuzzes real gensim pickles.
"""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent


def keyed_vectors() -> bytes:
    from gensim.models import KeyedVectors

    kv = KeyedVectors(4)
    words = ["berlin", "paris", "köln", "the", "a", "of"]
    kv.add_vectors(words, np.arange(24, dtype=np.float32).reshape(6, 4) / 7)
    buf = io.BytesIO()
    kv.save(buf)
    return buf.getvalue()


def fasttext_vectors() -> bytes:
    from gensim.models import FastText

    corpus = [["berlin", "is", "a", "city"], ["paris", "is", "a", "city", "too"], ["köln", "has", "a", "dom"]] * 3
    model = FastText(corpus, vector_size=4, bucket=16, min_n=2, max_n=4, min_count=1, epochs=1, workers=1, seed=1)
    buf = io.BytesIO()
    model.wv.save(buf)
    return buf.getvalue()


if __name__ == "__main__":
    (HERE / "gensim_kv.kv").write_bytes(keyed_vectors())
    (HERE / "gensim_fasttext.kv").write_bytes(fasttext_vectors())
