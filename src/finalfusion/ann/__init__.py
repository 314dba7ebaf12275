"""Approximate nearest neighbours over the word rows of embeddings: build, search, save, load.

Exact queries scan the whole matrix (about 250 ms per query for 2M x 300
rows); an approximate index answers in well under a millisecond, at the
price of missing a few true neighbours (recall). One index covers the
known words of one :class:`~finalfusion.Embeddings` (row id = word id),
unit-normalised, searched by inner product (cosine similarity).

* :func:`build_index` builds one with a backend: ``"faiss-ivf"`` (the
  default, :data:`DEFAULT_BACKEND`), ``"hnswlib"``, ``"faiss-hnsw"``,
  ``"faiss-ivfpq"``, ``"usearch"`` or ``"voyager"``; each is an optional package of the
  ``ann`` extra (``pip install 'finalfusion-py[ann]'``), imported only when
  used.
* :meth:`AnnIndex.search` returns ``(ids, scores)`` arrays;
  :meth:`AnnIndex.set_search` widens or narrows later searches;
  :meth:`AnnIndex.check` refuses other embeddings
  (:class:`~finalfusion.errors.StaleIndexError`).
* :meth:`AnnIndex.save` / :func:`load_index` persist it (memory-mapped on
  load where the backend allows); a saved or loaded index pickles as a
  reference to its directory, so workers share it.

Examples
--------
>>> import numpy as np
>>> from finalfusion import Embeddings, NdArray, SimpleVocab
>>> from finalfusion.ann import build_index
>>> rows = np.random.default_rng(0).standard_normal((200, 16)).astype(np.float32)
>>> emb = Embeddings(NdArray(rows), SimpleVocab([f"w{i}" for i in range(200)]))
>>> ix = build_index(emb)  # DEFAULT_BACKEND (faiss-ivf): 200 rows, 5 cells, all searched
>>> q = emb["w7"] / np.linalg.norm(emb["w7"])
>>> ids, scores = ix.search(q, k=3)
>>> int(ids[0, 0]), round(float(scores[0, 0]), 4)
(7, 1.0)
"""

from __future__ import annotations

from finalfusion.ann import _faiss, _hnswlib, _usearch, _voyager  # register the backends
from finalfusion.ann._backends import DEFAULT_BACKEND, DEFAULT_EF, DEFAULT_EF_CONSTRUCTION, DEFAULT_M, backend_names
from finalfusion.ann._fingerprint import Fingerprint
from finalfusion.ann._index import AnnIndex, build_index, load_index

__all__ = ["DEFAULT_BACKEND", "DEFAULT_EF", "DEFAULT_EF_CONSTRUCTION", "DEFAULT_M", "AnnIndex", "Fingerprint", "backend_names", "build_index", "load_index"]

del _faiss, _hnswlib, _usearch, _voyager
