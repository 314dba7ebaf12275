"""Reading and writing foreign embedding formats (docs/format.md §13).

One module per format: :mod:`~finalfusion.compat.word2vec`,
:mod:`~finalfusion.compat.text`, :mod:`~finalfusion.compat.fasttext`,
:mod:`~finalfusion.compat.floret`; :func:`load` recognises the format from
the file's first bytes, asking the formats of one registry
(:func:`formats` lists them, with what each can do). Every loader takes any
:data:`~finalfusion.Source` (a path, the file's bytes, a file descriptor or a
binary file object), decompresses gzip transparently, and returns
:class:`~finalfusion.embeddings.Embeddings`; like finalfusion-python 0.7.1
the word rows are l2-normalised and their norms kept (``normalize=False``
keeps them as stored), and writers multiply the norms back.

Examples
--------
>>> import io, numpy as np
>>> from finalfusion.compat import load, load_text, write_word2vec
>>> emb = load_text(b"Berlin 3 4\\nParis 0 2\\n")
>>> buf = io.BytesIO(); write_word2vec(buf, emb)
>>> load(buf.getvalue(), normalize=False)["Berlin"].tolist()
[3.0, 4.0]
"""

from __future__ import annotations

from finalfusion.compat import (
    _finalfusion,  # noqa: F401  (registers the finalfusion format)
    _gensim_pickle,  # noqa: F401  (registers Embeddings.load, gensim's KeyedVectors.load)
)
from finalfusion.compat._keyedvectors import load_word2vec_format
from finalfusion.compat._registry import Format, formats
from finalfusion.compat.fasttext import load_fasttext, write_fasttext
from finalfusion.compat.floret import load_floret, write_floret
from finalfusion.compat.gguf import load_gguf, write_gguf
from finalfusion.compat.lightseq import load_lightseq
from finalfusion.compat.model2vec import write_model2vec
from finalfusion.compat.safetensors import load_safetensors
from finalfusion.compat.sentencepiece import load_sentencepiece
from finalfusion.compat.sniff import load, sniff_format
from finalfusion.compat.text import load_text, load_text_dims, write_text, write_text_dims
from finalfusion.compat.word2vec import load_word2vec, write_word2vec

__all__ = [
    "Format",
    "formats",
    "load",
    "load_fasttext",
    "load_floret",
    "load_gguf",
    "load_lightseq",
    "load_safetensors",
    "load_sentencepiece",
    "load_text",
    "load_text_dims",
    "load_word2vec",
    "load_word2vec_format",
    "sniff_format",
    "write_fasttext",
    "write_floret",
    "write_gguf",
    "write_model2vec",
    "write_text",
    "write_text_dims",
    "write_word2vec",
]
