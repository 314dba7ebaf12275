"""Nearest neighbours, analogies and analogy evaluation (docs/format.md §10).

The public API is :data:`__all__` plus the query methods of
:class:`~finalfusion.Embeddings`; the submodules are the machinery behind
them.

Semantics
---------
* Candidates are the **word rows** ``0 .. len(vocab)`` (never subword rows),
  optionally only the first ``restrict`` of them.
* Similarity is the **cosine** between the query and a row. Query vectors
  are l2-normalised. Rows are used as stored when they are unit length (as
  in every finalfusion file written by Rust or Python); otherwise the row
  norms are computed once, lazily, and every score is divided by its row's
  norm (a zero row scores 0, a row with NaN/inf is never returned).
* Quantized storage is ranked by asymmetric distance computation (ADC) over
  the codes, not by reconstructing the matrix: per query one lookup table of
  dot products between the (projected) query sub-vectors and the centroids,
  then table entries summed per row. The cosine is that of the
  reconstructed row (projection and in-chunk norms included).
* Order: descending similarity, ties broken by word in code-point order (as
  finalfusion-rust does). ``k`` may be anything ``>= 0``; with more than
  the number of candidates the whole ranking is returned.
* Memory: rows are scanned in blocks; a single query keeps at most one
  block of scores plus the running top ``k``; batches keep a bounded
  ``queries x block`` score matrix.

The per-embeddings state (row norms, word ranks, ADC code layout) is an
attribute of the :class:`~finalfusion.Embeddings`, built on first use under
a lock, so concurrent queries from threads are safe; it is dropped with the
embeddings and never pickled or copied. It assumes the matrix is not
modified in place afterwards; call :func:`clear_cache` if you do. Scans
split their rows over threads as :func:`finalfusion.set_threads` says.

Modules, one job each: :mod:`~finalfusion.similarity.results` (the result
type) and :mod:`~finalfusion.similarity.evaluation` (analogy files) are
public; the machinery is private: ``_topk`` (selection, ties by word),
``_vectors`` (query normalisation, 3CosAdd), ``_base`` / ``_dense`` /
``_quantized`` (the index types: row facts, BLAS and ADC scoring),
``_index`` (which index a storage gets, and the cache on the embeddings),
``_scan`` (block scans), ``_approx`` (candidates from an approximate
index, scored as the scans score them), ``_queries`` (the functions behind the query
methods) and ``_protocol`` (``Queryable``: what the queries need of
embeddings, so that nothing here imports the facade).
"""

from __future__ import annotations

from finalfusion.similarity._index import clear_cache
from finalfusion.similarity.evaluation import AnalogyEvaluation, AnalogySection, evaluate_analogies
from finalfusion.similarity.results import SimilarityResult, SimilarityResults

__all__ = [
    "AnalogyEvaluation",
    "AnalogySection",
    "SimilarityResult",
    "SimilarityResults",
    "clear_cache",
    "evaluate_analogies",
]
