"""The query functions behind the query methods of :class:`~finalfusion.Embeddings`."""

from __future__ import annotations

import operator
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from finalfusion.errors import NonFiniteError
from finalfusion.similarity._approx import AnnSearch, approx_search, approx_search_batch, is_ann
from finalfusion.similarity._base import QueryIndex
from finalfusion.similarity._index import ann_index, query_index
from finalfusion.similarity._protocol import Queryable
from finalfusion.similarity._scan import clip_cosines, finish, own_rows, results, search, search_batch, skip_pairs, word_ids
from finalfusion.similarity._topk import F32, I64
from finalfusion.similarity._vectors import analogy_vectors, check_finite_rows, unit_query, unit_rows
from finalfusion.similarity.results import SimilarityResult

__all__ = [
    "analogy",
    "analogy_batch",
    "check_k",
    "embedding_similarity",
    "embedding_similarity_batch",
    "most_similar",
    "word_similarity",
    "word_similarity_batch",
]


def check_k(k: Any) -> int:
    """``k`` as an ``int``; ``ValueError`` if negative, ``TypeError`` if not an integer.

    Examples
    --------
    >>> check_k(3)
    3
    """
    k = operator.index(k)
    if k < 0:
        raise ValueError(f"k must be >= 0, got {k}")
    return int(k)


def search_one(index: QueryIndex, ann: AnnSearch | None, q: F32, k: int, exclude: I64, rerank: int | None) -> tuple[F32, I64] | tuple[list[float], list[int]]:
    """Top ``k`` of one unit query (scores, ids): through ``ann`` when given (see :mod:`finalfusion.similarity._approx`), else the exact scan."""
    found = None if ann is None else approx_search(index, ann, q, k, exclude, rerank)
    return search(index, q, k, exclude, rerank=rerank) if found is None else found


def search_many(
    index: QueryIndex, ann: AnnSearch | None, qm: F32, k: int, exclude: tuple[I64, I64], active: npt.NDArray[np.bool_] | None = None
) -> tuple[I64, F32]:
    """Top ``k`` of unit query rows, as public ``(ids, scores)``: through ``ann`` when given, zero queries by the exact scan.

    Rows not ``active`` (queries without a vector) are left as padding when an index answers.
    """
    if ann is None:
        return finish(search_batch(index, qm, k, exclude))
    s, i, answered = approx_search_batch(index, ann, qm, k, exclude, active=active)
    rest = np.flatnonzero(~answered)
    if len(rest):
        keep = np.isin(exclude[0], rest)
        renumber = np.searchsorted(rest, exclude[0][keep])
        s[rest], i[rest] = search_batch(index, qm[rest], k, (renumber, exclude[1][keep]))
    return finish((s, i))


def word_similarity(emb: Queryable, query: str, k: int, skip: Iterable[str] | None, rerank: int | None, ann: Any = None) -> list[SimilarityResult] | None:
    """Implementation of :meth:`Embeddings.word_similarity`."""
    k = check_k(k)
    vec = emb.embedding(query)
    if vec is None:
        return None
    index = query_index(emb)
    ix = ann_index(emb, ann)
    excluded = own_rows(emb.vocab, [query]) if skip is None else word_ids(emb.vocab.word_index, skip)
    return results(index, *search_one(index, ix, unit_query(vec, index.dims, f"the vector of the word {query!r}"), k, excluded, rerank))


def embedding_similarity(
    emb: Queryable, vector: npt.ArrayLike, k: int, skip: Iterable[str] | None, rerank: int | None, ann: Any = None
) -> list[SimilarityResult]:
    """Implementation of :meth:`Embeddings.embedding_similarity`."""
    k = check_k(k)
    index = query_index(emb)
    ix = ann_index(emb, ann)
    return results(index, *search_one(index, ix, unit_query(vector, index.dims), k, word_ids(emb.vocab.word_index, skip), rerank))


def analogy(
    emb: Queryable, query: tuple[str, str, str], k: int, skip: Iterable[str] | None, mask: Sequence[bool], rerank: int | None, ann: Any = None
) -> list[SimilarityResult] | None:
    """Implementation of :meth:`Embeddings.analogy`."""
    k = check_k(k)
    if len(mask) != 3:
        raise ValueError(f"mask must have three booleans, got {len(mask)}")
    vecs = [emb.embedding(w) for w in query]
    if any(v is None for v in vecs):
        return None
    index = query_index(emb)
    ix = ann_index(emb, ann)
    a, b, c = (np.asarray(v, dtype=np.float32)[None, :] for v in vecs)
    check_finite_rows(np.concatenate([a, b, c]), lambda i: f"the vector of the word {query[i]!r}")
    q = analogy_vectors(a, b, c)[0]
    excluded = own_rows(emb.vocab, [w for w, m in zip(query, mask, strict=True) if m]) if skip is None else word_ids(emb.vocab.word_index, skip)
    return results(index, *search_one(index, ix, q, k, excluded, rerank))


def word_similarity_batch(emb: Queryable, queries: Sequence[str], k: int, ann: Any = None) -> tuple[I64, F32]:
    """Implementation of :meth:`Embeddings.word_similarity_batch`."""
    k = check_k(k)
    index = query_index(emb)
    ix = ann_index(emb, ann)
    queries = list(queries)
    matrix, found = emb.embedding_batch(queries)
    own = [own_rows(emb.vocab, [w]) for w in queries]
    qm = unit_rows(matrix, index.dims, lambda i: f"the vector of the word {queries[i]!r} (query {i})")
    ids, scores = search_many(index, ix, qm, k, skip_pairs(own), active=found)
    ids[~found] = -1
    scores[~found] = np.nan
    return ids, scores


def embedding_similarity_batch(emb: Queryable, vectors: npt.ArrayLike, k: int, skip: Iterable[str] | None, ann: Any = None) -> tuple[I64, F32]:
    """Implementation of :meth:`Embeddings.embedding_similarity_batch`."""
    k = check_k(k)
    index = query_index(emb)
    ix = ann_index(emb, ann)
    qm = unit_rows(vectors, index.dims)
    excluded = word_ids(emb.vocab.word_index, skip)
    pairs = (np.repeat(np.arange(len(qm), dtype=np.int64), len(excluded)), np.tile(excluded, len(qm)))
    return search_many(index, ix, qm, k, pairs)


def analogy_batch(emb: Queryable, triples: Sequence[Sequence[str]], k: int, ann: Any = None) -> tuple[I64, F32]:
    """Implementation of :meth:`Embeddings.analogy_batch`."""
    k = check_k(k)
    index = query_index(emb)
    ix = ann_index(emb, ann)
    triples = [tuple(t) for t in triples]
    if any(len(t) != 3 for t in triples):
        raise ValueError("every analogy query must have exactly three words")
    flat = [w for t in triples for w in t]
    matrix, found = emb.embedding_batch(flat)
    check_finite_rows(matrix, lambda i: f"the vector of the word {flat[i]!r} (query {i // 3})")
    rows = matrix.reshape(len(triples), 3, index.dims)
    ok = found.reshape(len(triples), 3).all(axis=1)
    qm = analogy_vectors(rows[:, 0], rows[:, 1], rows[:, 2])
    ids, scores = search_many(index, ix, qm, k, skip_pairs([own_rows(emb.vocab, t) for t in triples]), active=np.asarray(ok))
    ids[~ok] = -1
    scores[~ok] = np.nan
    return ids, scores


def most_similar(emb: Queryable, positive: Any, negative: Any, topn: int | None, restrict_vocab: int | None, indexer: Any = None) -> Any:
    """Implementation of :meth:`Embeddings.most_similar` (gensim semantics).

    ``indexer`` as gensim takes it: with an ``int`` ``topn`` the answer is
    the indexer's for the unit mean vector, input keys included and
    ``restrict_vocab`` ignored (a gensim indexer's ``most_similar(mean,
    topn)`` as it returns it; one of ours: its candidates re-scored).
    ``None``: the index of ``set_index`` if any, with the exact answer's
    rules; ``False``: the exact scan.
    """
    if topn is not None and check_k(topn) == 0:
        return []
    index = query_index(emb)
    items = [(x, 1.0) for x in as_list(positive)] + [(x, -1.0) for x in as_list(negative)]
    if not items:
        raise ValueError("cannot compute mean with no input")
    total = np.zeros(index.dims, dtype=np.float64)
    weight = 0.0
    keys: list[str] = []
    for item, default in items:
        key, w = (item[0], float(item[1])) if isinstance(item, tuple) else (item, default)
        if isinstance(key, (int, np.integer)) and not isinstance(key, bool):  # gensim: an index is a key
            if not 0 <= key < len(emb.vocab.words):
                raise KeyError(f"Key '{key}' not present in vocabulary")
            key = emb.vocab.words[int(key)]
        if isinstance(key, str):
            vec = emb.embedding(key)
            if vec is None:
                raise KeyError(f"Key '{key}' not present in vocabulary")
            keys.append(key)
            vec = unit_query(vec, index.dims, f"the vector of the word {key!r}")
        else:
            vec = np.asarray(key, dtype=np.float64)
            if vec.shape != (index.dims,):  # a scalar would broadcast into a wrong query
                raise ValueError(f"expected a word, an index or a vector of length {index.dims}, got {type(key).__name__} of shape {vec.shape}")
            if not np.isfinite(vec).all():
                raise NonFiniteError(f"a query vector has a NaN or infinite component: {vec.tolist()[:10]}")
        with np.errstate(over="ignore", invalid="ignore"):  # an overflowing mean is refused by unit_query below
            total += w * vec
        weight += abs(w)
    with np.errstate(over="ignore", invalid="ignore"):
        mean = total / weight
    q = unit_query(mean, index.dims, "the weighted mean of the query vectors")
    if indexer is not None and indexer is not False and isinstance(topn, int):  # gensim: `isinstance(topn, int)`
        if not is_ann(indexer):
            return indexer.most_similar(q, topn)  # a gensim indexer (AnnoyIndexer ...), its answer as gensim returns it
        found = search_one(index, ann_index(emb, indexer), q, topn, np.zeros(0, np.int64), None)
        return [(r.word, r.similarity) for r in results(index, *found)]
    limit = index.n if restrict_vocab is None else min(index.n, max(0, int(restrict_vocab)))
    if topn is None:
        step = index.block_rows(1)
        return clip_cosines(np.concatenate([index.scores(q, lo, min(limit, lo + step)) for lo in range(0, limit, step)] or [np.zeros(0, np.float32)]))
    ix = ann_index(emb, None if indexer is None else False) if limit == index.n else None  # restrict_vocab: the exact scan
    excluded = own_rows(emb.vocab, keys)
    scores, ids = search_one(index, ix, q, topn, excluded, None) if ix is not None else search(index, q, topn, excluded, limit=limit)
    return [(r.word, r.similarity) for r in results(index, scores, ids)]


def as_list(x: Any) -> list[Any]:
    """gensim's ``_ensure_list``: ``None`` -> ``[]``, a single key or vector -> ``[x]``.

    Examples
    --------
    >>> as_list(None), as_list("a"), as_list(("a", "b"))
    ([], ['a'], ['a', 'b'])
    """
    if x is None:
        return []
    if isinstance(x, (str, int, np.integer)) or (isinstance(x, np.ndarray) and x.ndim == 1):
        return [x]
    return list(x)
