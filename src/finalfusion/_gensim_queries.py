"""gensim's ``KeyedVectors`` query spellings (similarities, rankings, evaluations) on :class:`~finalfusion.Embeddings`.

:class:`GensimQueriesMixin` is a base class of
:class:`~finalfusion._gensim_api.KeyedVectorsMixin`, itself a base class of
:class:`~finalfusion.Embeddings`. Every method gives gensim's answer on the
same vectors (``tests/test_gensim_queries.py`` checks each side by side with
gensim): where gensim uses the stored raw vectors, these methods use
:meth:`~finalfusion._gensim_api.KeyedVectorsMixin.get_vector`'s raw
vectors (a finalfusion unit row times its norm); cosines go through the
scans of :mod:`finalfusion.similarity`. The deliberate differences (a word
without an embedding is a ``KeyError``, zero vectors give similarity 0
instead of NaN) are listed in docs/migrating.md.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from finalfusion.errors import import_extra
from finalfusion.similarity import _queries
from finalfusion.similarity import evaluation as _evaluation
from finalfusion.similarity._vectors import check_finite_rows, unit_query
from finalfusion.vocab._words import check_word, check_words

if TYPE_CHECKING:
    from finalfusion.vocab.base import Vocab

__all__ = ["GensimQueriesMixin"]

F32 = npt.NDArray[np.float32]


def unit(v: npt.NDArray[Any]) -> npt.NDArray[Any]:
    """``v / ||v||`` along the last axis, in ``v``'s dtype; zero vectors stay zero.

    Norms and quotients are taken in float64 (so rows of tiny or huge
    float32 values become unit rows too); a row with NaN or infinity gives
    NaN.

    Examples
    --------
    >>> unit(np.array([[3, 4], [0, 0]], dtype=np.float32)).tolist()
    [[0.6000000238418579, 0.800000011920929], [0.0, 0.0]]
    """
    if v.dtype != np.float32:
        v = np.asarray(v, dtype=np.float64)
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        norms = np.sqrt(np.einsum("...i,...i->...", v, v, dtype=np.float64))
        inverse = np.divide(1.0, norms, out=np.ones_like(norms), where=norms != 0)
        out = np.empty_like(v)
        np.multiply(v, inverse[..., None], out=out, casting="unsafe")
    return out


def as_key(key: Any) -> bool:
    """Whether gensim treats ``key`` as a key (``str`` or integer index), not a vector."""
    return isinstance(key, (str, int, np.integer)) and not isinstance(key, bool)


class GensimQueriesMixin:
    """gensim ``KeyedVectors`` query spellings for :class:`~finalfusion.Embeddings`.

    Examples
    --------
    >>> import numpy as np
    >>> from finalfusion import Embeddings, NdArray, SimpleVocab
    >>> m = np.array([[1, 0], [1, 1], [0, 1]], dtype=np.float32)
    >>> emb = Embeddings(NdArray(m), SimpleVocab(["a", "b", "c"]))
    >>> emb.doesnt_match(["a", "b", "c"]), emb.rank("a", "c")
    ('a', 2)
    """

    if TYPE_CHECKING:  # provided by KeyedVectorsMixin and Embeddings

        @property
        def vocab(self) -> Vocab: ...
        @property
        def dims(self) -> int: ...
        @property
        def index_to_key(self) -> list[str]: ...
        @property
        def vectors(self) -> F32: ...
        def embedding(self, word: str, out: F32 | None = None, default: Any = None) -> Any: ...
        def get_vector(self, key: Any, norm: bool = False) -> F32: ...
        def get_index(self, key: Any, default: int | None = None) -> int: ...
        def get_mean_vector(
            self, keys: Any, weights: Any = None, pre_normalize: bool = True, post_normalize: bool = False, ignore_missing: bool = True
        ) -> F32: ...

    def _own_index(self, key: Any) -> int:
        """The row that is ``key`` itself (an index; a word by the word rule, ``Vocab.own_row``), else ``-1``: left out of its own results."""
        if isinstance(key, str):
            own = self.vocab.own_row(key)
            return -1 if own is None else own
        return self.get_index(key, -1)

    def _raw_rows(self, keys: Sequence[Any]) -> F32:
        """gensim's raw vectors of ``keys`` as a ``(len(keys), dims)`` matrix; ``KeyError`` for a key without one."""
        out = np.zeros((len(keys), self.dims), dtype=np.float32)
        for i, key in enumerate(keys):
            out[i] = self.get_vector(key)
        return out

    def _query_vector(self, vector: npt.ArrayLike) -> npt.NDArray[np.float64]:
        """``vector`` as a float64 array; ``ValueError`` unless its shape is ``(dims,)``."""
        v = np.asarray(vector, dtype=np.float64)
        if v.shape != (self.dims,):
            raise ValueError(f"expected a vector of length {self.dims}, got shape {v.shape}")
        return v

    # -- similarities ----------------------------------------------------------------
    def most_similar(self, positive: Any = None, negative: Any = None, topn: int | None = 10, restrict_vocab: int | None = None, indexer: Any = None) -> Any:
        """gensim's ``KeyedVectors.most_similar`` for users coming from gensim.

        The query is the weighted mean of the normalised embeddings of
        ``positive`` (weight +1) and ``negative`` (weight -1) words (or
        vectors, or ``(item, weight)`` pairs); input words are excluded.

        Parameters
        ----------
        indexer
            gensim's: with an ``int`` ``topn``, the answer is the indexer's
            for the unit mean vector, as gensim returns it -- input words
            included, ``restrict_vocab`` ignored. A gensim indexer
            (``AnnoyIndexer`` ...) is asked with ``indexer.most_similar(mean,
            topn)``; an index of :mod:`finalfusion.ann` proposes candidates
            scored as the exact scan scores them. ``None`` (default): the
            index of :meth:`~finalfusion.Embeddings.set_index`, if any, with
            the exact answer's rules (input words excluded; with
            ``restrict_vocab`` the exact scan); ``False``: the exact scan.

        Returns
        -------
        list of (str, float), or numpy.ndarray
            ``topn`` pairs best first, or with ``topn=None`` the cosine with
            every (first ``restrict_vocab``) word.

        Raises
        ------
        KeyError
            If a word has no embedding.
        ValueError
            If there is no input.
        StaleIndexError
            (a ``ValueError``) If the index was built for other embeddings.

        Examples
        --------
        >>> import numpy as np
        >>> from finalfusion import Embeddings
        >>> from finalfusion.storage import NdArray
        >>> from finalfusion.vocab import SimpleVocab
        >>> m = np.array([[1, 0, 0], [1, 1, 0], [0, 0, 1], [0, 1, 1]], dtype=np.float32)
        >>> emb = Embeddings(NdArray(m), SimpleVocab(["man", "king", "woman", "queen"]))
        >>> [(w, round(s, 3)) for w, s in emb.most_similar(positive=["king", "woman"], negative=["man"], topn=2)]
        [('queen', 0.959)]
        >>> class Exact:  # gensim's indexer interface: most_similar(vector, num_neighbors)
        ...     def most_similar(self, vector, num_neighbors):
        ...         return [(w, round(float(m[i] @ vector / np.linalg.norm(m[i])), 3)) for i, w in enumerate(emb.index_to_key)][:num_neighbors]
        >>> emb.most_similar("man", topn=2, indexer=Exact())  # the indexer's answer, the input word included
        [('man', 1.0), ('king', 0.707)]
        """
        return _queries.most_similar(self, positive, negative, topn, restrict_vocab, indexer)  # type: ignore[arg-type]

    def similarity(self, w1: str, w2: str) -> float:
        """gensim's ``similarity``: cosine similarity of two words.

        ``nan`` if a vector has a NaN or infinite component (as gensim); a
        zero vector has similarity 0 (gensim: NaN).

        Raises
        ------
        KeyError
            If a word has no embedding.

        Examples
        --------
        >>> import numpy as np
        >>> from finalfusion import Embeddings, NdArray, SimpleVocab
        >>> emb = Embeddings(NdArray(np.array([[1, 0], [1, 1]], dtype=np.float32)), SimpleVocab(["a", "b"]))
        >>> round(emb.similarity("a", "b"), 4)
        0.7071
        """
        return float(np.dot(unit(self.get_vector(w1).astype(np.float64)), unit(self.get_vector(w2).astype(np.float64))))

    def distance(self, w1: str, w2: str) -> float:
        """gensim's ``distance``: ``1 - similarity(w1, w2)``.

        Examples
        --------
        >>> import numpy as np
        >>> from finalfusion import Embeddings, NdArray, SimpleVocab
        >>> emb = Embeddings(NdArray(np.array([[1, 0], [0, 1]], dtype=np.float32)), SimpleVocab(["a", "b"]))
        >>> emb.distance("a", "b")
        1.0
        """
        return 1.0 - self.similarity(w1, w2)

    def n_similarity(self, ws1: Sequence[str], ws2: Sequence[str]) -> float:
        """gensim's ``n_similarity``: cosine similarity of the means of the raw vectors of two word lists.

        The raw vectors are gensim's (:meth:`get_vector`: a unit row times
        its norm), averaged without normalising them first, as gensim does.

        Raises
        ------
        ZeroDivisionError
            If a list is empty (as gensim).
        KeyError
            If a word has no embedding (gensim silently leaves such words out).

        Examples
        --------
        >>> import numpy as np
        >>> from finalfusion import Embeddings, NdArray, Norms, SimpleVocab
        >>> m = np.array([[1, 0], [0, 1], [1, 0]], dtype=np.float32)
        >>> emb = Embeddings(NdArray(m), SimpleVocab(["a", "b", "c"]), Norms([3.0, 1.0, 1.0]))
        >>> round(emb.n_similarity(["a", "b"], ["c"]), 4)  # mean of (3, 0) and (0, 1)
        0.9487
        """
        if not (len(ws1) and len(ws2)):
            raise ZeroDivisionError("At least one of the passed list is empty.")
        check_words(ws1)
        check_words(ws2)
        m1 = self.get_mean_vector(list(ws1), pre_normalize=False, ignore_missing=False)
        m2 = self.get_mean_vector(list(ws2), pre_normalize=False, ignore_missing=False)
        return float(np.dot(unit(m1.astype(np.float64)), unit(m2.astype(np.float64))))

    @staticmethod
    def cosine_similarities(vector_1: npt.ArrayLike, vectors_all: npt.ArrayLike) -> npt.NDArray[np.floating]:
        """gensim's ``cosine_similarities``: the cosine of ``vector_1`` with every row of ``vectors_all``.

        A zero vector or row gives 0 (gensim: NaN and a ``RuntimeWarning``).
        The result has the inputs' float type (``float32`` for ``float32``
        vectors), as gensim's.

        Examples
        --------
        >>> from finalfusion import Embeddings
        >>> Embeddings.cosine_similarities([1.0, 0.0], [[2.0, 0.0], [1.0, 1.0], [0.0, 0.0]]).round(4).tolist()
        [1.0, 0.7071, 0.0]
        """
        v = np.asarray(vector_1)
        m = np.asarray(vectors_all)
        dtype = np.result_type(v.dtype, m.dtype, np.float32)
        sims = unit(m.astype(np.float64)) @ unit(v.astype(np.float64))
        return sims.astype(dtype)  # type: ignore[no-any-return]

    def distances(self, word_or_vector: str | npt.ArrayLike, other_words: Iterable[str] = ()) -> F32:
        """gensim's ``distances``: cosine distances from a word or vector to ``other_words`` (default: every word).

        Against every word the scan of :mod:`finalfusion.similarity` is used
        (ADC scores on quantized storage), the word itself included.

        Raises
        ------
        KeyError
            If a word has no embedding.
        NonFiniteError
            (a ``ValueError``) If the query has a NaN or infinite component
            (against given ``other_words``, their distances are ``nan`` instead).

        Examples
        --------
        >>> import numpy as np
        >>> from finalfusion import Embeddings, NdArray, SimpleVocab
        >>> emb = Embeddings(NdArray(np.array([[1, 0], [0, 1]], dtype=np.float32)), SimpleVocab(["a", "b"]))
        >>> emb.distances("a").tolist(), emb.distances(np.array([0, 2.0]), ["a"]).tolist()
        ([0.0, 1.0], [1.0])
        """
        q: npt.NDArray[np.floating]
        if as_key(word_or_vector):
            q = self.get_vector(word_or_vector)
            what = f"the vector of the word {word_or_vector!r}"
        else:
            q = self._query_vector(word_or_vector)
            what = "the query vector"
        others = list(other_words)
        if not others:
            sims = _queries.most_similar(self, [unit_query(q, self.dims, what)], None, None, None)  # type: ignore[arg-type]
            return (1 - np.asarray(sims, dtype=np.float32)).astype(np.float32)
        check_words(others)
        rows = unit(self._raw_rows(others).astype(np.float64))
        return (1 - rows @ unit(q.astype(np.float64))).astype(np.float32)  # type: ignore[no-any-return]

    # -- rankings --------------------------------------------------------------------
    def closer_than(self, key1: str, key2: str) -> list[str]:
        """gensim's ``closer_than``: the words closer to ``key1`` than vocabulary word ``key2`` is.

        ``key1`` may also be an unknown word of a subword vocabulary (gensim's
        ``FastTextKeyedVectors`` raises ``KeyError`` there).

        Raises
        ------
        KeyError
            If ``key1`` has no embedding or ``key2`` is not a vocabulary word.

        Examples
        --------
        >>> import numpy as np
        >>> from finalfusion import Embeddings, NdArray, SimpleVocab
        >>> m = np.array([[1, 0], [1, 0.1], [1, 0.5], [0, 1]], dtype=np.float32)
        >>> Embeddings(NdArray(m), SimpleVocab(["a", "b", "c", "d"])).closer_than("a", "c")
        ['b']
        """
        dists = self.distances(key1)
        e1 = self._own_index(key1)
        e2 = self.get_index(key2)
        words = self.vocab.words
        return [words[i] for i in np.flatnonzero(dists < dists[e2]).tolist() if i != e1]

    def words_closer_than(self, word1: str, word2: str) -> list[str]:
        """gensim's (deprecated) ``words_closer_than``: :meth:`closer_than`.

        Examples
        --------
        >>> import numpy as np
        >>> from finalfusion import Embeddings, NdArray, SimpleVocab
        >>> m = np.array([[1, 0], [1, 0.1], [1, 0.5], [0, 1]], dtype=np.float32)
        >>> Embeddings(NdArray(m), SimpleVocab(["a", "b", "c", "d"])).words_closer_than("a", "d")
        ['b', 'c']
        """
        return self.closer_than(word1, word2)

    def rank(self, key1: str, key2: str) -> int:
        """gensim's ``rank``: ``len(closer_than(key1, key2)) + 1``.

        Examples
        --------
        >>> import numpy as np
        >>> from finalfusion import Embeddings, NdArray, SimpleVocab
        >>> m = np.array([[1, 0], [1, 0.1], [1, 0.5], [0, 1]], dtype=np.float32)
        >>> Embeddings(NdArray(m), SimpleVocab(["a", "b", "c", "d"])).rank("a", "c")
        2
        """
        return len(self.closer_than(key1, key2)) + 1

    def most_similar_to_given(self, key1: str, keys_list: Sequence[str]) -> str:
        """gensim's ``most_similar_to_given``: the word of ``keys_list`` most similar to ``key1`` (the first on ties).

        Raises
        ------
        KeyError
            If a word has no embedding.
        ValueError
            If ``keys_list`` is empty (as gensim).

        Examples
        --------
        >>> import numpy as np
        >>> from finalfusion import Embeddings, NdArray, SimpleVocab
        >>> m = np.array([[1, 0], [1, 0.1], [0, 1]], dtype=np.float32)
        >>> Embeddings(NdArray(m), SimpleVocab(["a", "b", "c"])).most_similar_to_given("a", ["c", "b"])
        'b'
        """
        check_words(keys_list)
        if not len(keys_list):
            raise ValueError("attempt to get argmax of an empty sequence")
        return keys_list[int(np.argmax([self.similarity(key1, key) for key in keys_list]))]

    def rank_by_centrality(self, words: Sequence[str], use_norm: bool = True) -> list[tuple[float, str]]:
        """gensim's ``rank_by_centrality``: ``(cosine, word)`` pairs by similarity to the centroid, most central first.

        The centroid is the mean of the unit vectors (``use_norm=False``: of
        the raw vectors); ties are ordered by word, descending, as gensim's
        ``sorted(..., reverse=True)``.

        Raises
        ------
        ValueError
            If ``words`` is empty; :class:`~finalfusion.errors.NonFiniteError`
            (a ``ValueError``) if a word's vector has a NaN or infinite component.
        KeyError
            If a word has no embedding (gensim leaves such words out with a log message).

        Examples
        --------
        >>> import numpy as np
        >>> from finalfusion import Embeddings, NdArray, SimpleVocab
        >>> m = np.array([[1, 0], [1, 0.1], [0, 1]], dtype=np.float32)
        >>> [w for _, w in Embeddings(NdArray(m), SimpleVocab(["cat", "dog", "car"])).rank_by_centrality(["cat", "dog", "car"])]
        ['dog', 'cat', 'car']
        """
        check_words(words)
        if not len(words):
            raise ValueError("cannot select a word from an empty list")
        vectors = np.stack([self.get_vector(w, norm=use_norm) for w in words]).astype(np.float32)
        check_finite_rows(vectors, lambda i: f"the vector of the word {words[i]!r}")
        mean = unit(vectors.mean(axis=0, dtype=np.float32))
        dists = (vectors @ mean).tolist()
        return sorted(zip(dists, words, strict=True), reverse=True)

    def doesnt_match(self, words: Sequence[str]) -> str:
        """gensim's ``doesnt_match``: the last word of :meth:`rank_by_centrality`.

        Raises
        ------
        ValueError
            If ``words`` is empty.
        KeyError
            If a word has no embedding (gensim leaves such words out with a log message).

        Examples
        --------
        >>> import numpy as np
        >>> from finalfusion import Embeddings, NdArray, SimpleVocab
        >>> m = np.array([[1, 0], [1, 0.1], [0, 1]], dtype=np.float32)
        >>> Embeddings(NdArray(m), SimpleVocab(["cat", "dog", "car"])).doesnt_match(["cat", "dog", "car"])
        'car'
        """
        return self.rank_by_centrality(words)[-1][1]

    # -- most similar ----------------------------------------------------------------
    def similar_by_word(self, word: str, topn: int | None = 10, restrict_vocab: int | None = None) -> Any:
        """gensim's ``similar_by_word``: :meth:`~finalfusion.Embeddings.most_similar` of one word.

        Examples
        --------
        >>> import numpy as np
        >>> from finalfusion import Embeddings, NdArray, SimpleVocab
        >>> m = np.array([[1, 0], [1, 1], [0, 1]], dtype=np.float32)
        >>> [w for w, _ in Embeddings(NdArray(m), SimpleVocab(["a", "b", "c"])).similar_by_word("a", topn=2)]
        ['b', 'c']
        """
        check_word(word)
        return self.most_similar(positive=[word], topn=topn, restrict_vocab=restrict_vocab)

    def similar_by_key(self, key: str, topn: int | None = 10, restrict_vocab: int | None = None) -> Any:
        """gensim's ``similar_by_key``: :meth:`similar_by_word`.

        Examples
        --------
        >>> import numpy as np
        >>> from finalfusion import Embeddings, NdArray, SimpleVocab
        >>> m = np.array([[1, 0], [1, 1], [0, 1]], dtype=np.float32)
        >>> Embeddings(NdArray(m), SimpleVocab(["a", "b", "c"])).similar_by_key("a", topn=None).astype(float).round(3).tolist()
        [1.0, 0.707, 0.0]
        """
        return self.similar_by_word(key, topn, restrict_vocab)

    def similar_by_vector(self, vector: npt.ArrayLike, topn: int | None = 10, restrict_vocab: int | None = None) -> Any:
        """gensim's ``similar_by_vector``: the words most similar to a vector.

        Examples
        --------
        >>> import numpy as np
        >>> from finalfusion import Embeddings, NdArray, SimpleVocab
        >>> m = np.array([[1, 0], [1, 1], [0, 1]], dtype=np.float32)
        >>> [w for w, _ in Embeddings(NdArray(m), SimpleVocab(["a", "b", "c"])).similar_by_vector([0, 1.0], topn=2)]
        ['c', 'b']
        """
        return self.most_similar(positive=[self._query_vector(vector)], topn=topn, restrict_vocab=restrict_vocab)

    def most_similar_cosmul(self, positive: Any = None, negative: Any = None, topn: int | None = 10, restrict_vocab: int | None = None) -> Any:
        """gensim's ``most_similar_cosmul``: Levy and Goldberg's 3CosMul.

        Each word's score is ``prod((1 + cos(w, p)) / 2) / (prod((1 + cos(w, n)) / 2) + 1e-6)``
        over the ``positive`` and ``negative`` words (unit vectors; a vector
        given instead of a word is used as it is, as gensim). Input words
        are excluded. ``restrict_vocab=N`` scores the first N words only
        (gensim 4 accepts the argument but ignores it).

        Returns
        -------
        list of (str, float), or numpy.ndarray
            ``topn`` pairs best first, or with ``topn=None`` every score.

        Raises
        ------
        KeyError
            If a word has no embedding.
        ValueError
            If there is no positive input.

        Examples
        --------
        >>> import numpy as np
        >>> from finalfusion import Embeddings, NdArray, SimpleVocab
        >>> m = np.array([[1, 0, 0], [1, 1, 0], [0, 0, 1], [0, 1, 1]], dtype=np.float32)
        >>> emb = Embeddings(NdArray(m), SimpleVocab(["man", "king", "woman", "queen"]))
        >>> [(w, round(s, 3)) for w, s in emb.most_similar_cosmul(positive=["king", "woman"], negative=["man"], topn=1)]
        [('queen', 1.28)]
        """
        if topn is not None and _queries.check_k(topn) == 0:
            return []
        terms = [(x, True) for x in _queries.as_list(positive)] + [(x, False) for x in _queries.as_list(negative)]
        if not any(is_pos for _, is_pos in terms):
            raise ValueError("cannot compute similarity with no input")
        n = len(self.vocab) if restrict_vocab is None else min(len(self.vocab), max(0, int(restrict_vocab)))
        pos = np.ones(n, dtype=np.float64)
        neg = np.ones(n, dtype=np.float64)
        inputs = set()
        for term, is_pos in terms:
            if as_key(term):  # gensim takes an int for a vector here (and broadcasts it); it is an index, as in most_similar
                vec = self.get_vector(term, norm=True)
                index = self._own_index(term)
                if index >= 0:
                    inputs.add(index)
            else:
                vec = np.asarray(term, dtype=np.float64)
                if vec.shape != (self.dims,):
                    raise ValueError(f"expected a word, an index or a vector of length {self.dims}, got shape {vec.shape}")
            length = float(np.linalg.norm(vec))
            cosines = np.asarray(self.most_similar(positive=[unit(np.asarray(vec, dtype=np.float64))], topn=None, restrict_vocab=n), dtype=np.float64)
            factor = (1 + cosines * length) / 2
            if is_pos:
                pos *= factor
            else:
                neg *= factor
        dists = (pos / (neg + 0.000001)).astype(np.float32)
        if topn is None:
            return dists
        order = np.argsort(-dists, kind="stable")
        words = self.vocab.words
        return [(words[i], float(dists[i])) for i in order[: topn + len(inputs)].tolist() if i not in inputs][:topn]

    def relative_cosine_similarity(self, wa: str, wb: str, topn: int = 10) -> float:
        """gensim's ``relative_cosine_similarity``: ``similarity(wa, wb)`` over the sum of ``wa``'s ``topn`` best similarities.

        Raises
        ------
        ValueError
            If ``wa`` has no neighbours (as gensim).

        Examples
        --------
        >>> import numpy as np
        >>> from finalfusion import Embeddings, NdArray, SimpleVocab
        >>> m = np.array([[1, 0], [1, 1], [0, 1]], dtype=np.float32)
        >>> round(Embeddings(NdArray(m), SimpleVocab(["a", "b", "c"])).relative_cosine_similarity("a", "b", topn=2), 4)
        1.0
        """
        sims = self.similar_by_word(wa, topn)
        if not sims:
            raise ValueError("Cannot calculate relative cosine similarity without any similar words.")
        return self.similarity(wa, wb) / float(sum(s for _, s in sims))

    # -- evaluation ------------------------------------------------------------------
    def evaluate_word_analogies(
        self,
        analogies: str | os.PathLike[str] | Iterable[str],
        restrict_vocab: int = 300000,
        case_insensitive: bool = True,
        dummy4unknown: bool = False,
        similarity_function: str = "most_similar",
    ) -> tuple[float, list[dict[str, Any]]]:
        """gensim's ``evaluate_word_analogies``: :meth:`~finalfusion.Embeddings.evaluate_analogies` with gensim's defaults and return shape.

        Returns
        -------
        score, sections
            The total accuracy, and one dict per section ``{"section": name,
            "correct": [(a, b, c, d), ...], "incorrect": [...]}`` (words
            upper-cased when ``case_insensitive``), then the
            ``"Total accuracy"`` section. Questions with unknown words are
            left out, or counted as incorrect with ``dummy4unknown=True``.

        Raises
        ------
        FormatError
            For a line that is neither a section header nor four words
            (gensim skips such lines).

        Examples
        --------
        >>> import numpy as np
        >>> from finalfusion import Embeddings, NdArray, SimpleVocab
        >>> m = np.array([[1, 0, 0], [1, 1, 0], [0, 0, 1], [0, 1, 1]], dtype=np.float32)
        >>> emb = Embeddings(NdArray(m), SimpleVocab(["man", "king", "woman", "queen"]))
        >>> score, sections = emb.evaluate_word_analogies([": family", "man king woman queen"])
        >>> score, sections[0]["correct"], sections[-1]["section"]
        (1.0, [('MAN', 'KING', 'WOMAN', 'QUEEN')], 'Total accuracy')
        """
        if similarity_function != "most_similar":
            raise ValueError(f"only similarity_function='most_similar' is supported, got {similarity_function!r}")
        questions = _evaluation.read_analogies(analogies)  # read once: the input may be a pipe
        outcomes: list[bool] = []
        _evaluation.evaluate_questions(self, questions, case_insensitive=case_insensitive, restrict_vocab=restrict_vocab, outcomes=outcomes)  # type: ignore[arg-type]

        def fold(w: str) -> str:
            return w.upper() if case_insensitive else w

        known = {fold(w) for w in self.vocab.words[: max(0, restrict_vocab)]}
        answers = iter(outcomes)
        sections: list[dict[str, Any]] = []
        for name, items in questions:
            section: dict[str, Any] = {"section": name, "correct": [], "incorrect": []}
            for _no, parts in items:
                quad = tuple(fold(p) for p in parts)
                if all(w in known for w in quad):
                    section["correct" if next(answers) else "incorrect"].append(quad)
                elif dummy4unknown:
                    section["incorrect"].append(quad)
            sections.append(section)
        correct = [q for s in sections for q in s["correct"]]
        incorrect = [q for s in sections for q in s["incorrect"]]
        sections.append({"section": "Total accuracy", "correct": correct, "incorrect": incorrect})
        score = len(correct) / (len(correct) + len(incorrect)) if correct or incorrect else 0.0
        return score, sections

    def evaluate_word_pairs(
        self,
        pairs: str | os.PathLike[str] | Iterable[str],
        delimiter: str = "\t",
        encoding: str = "utf8",
        restrict_vocab: int = 300000,
        case_insensitive: bool = True,
        dummy4unknown: bool = False,
    ) -> tuple[Any, Any, float]:
        """gensim's ``evaluate_word_pairs``: correlation of the cosines with human similarity judgements.

        ``pairs`` is a path (or an iterable of lines) of ``word1 word2 score``
        lines separated by ``delimiter``; lines starting with ``#`` and lines
        that are not two words and a number are skipped, as gensim does
        (these files often have a header line). Words are looked up among
        the first ``restrict_vocab`` vocabulary words (the first of several
        case variants with ``case_insensitive``); pairs with other words are
        skipped, or scored 0 with ``dummy4unknown``.

        Returns
        -------
        pearson, spearman, oov_ratio
            scipy's ``pearsonr`` and ``spearmanr`` results and the percentage
            of pairs with unknown words, as gensim computes them.

        Raises
        ------
        MissingExtraError
            (an ``ImportError``) If scipy is not installed (it comes with gensim: the ``gensim`` extra).
        ValueError
            If no pair could be scored.

        Examples
        --------
        >>> import numpy as np, pytest
        >>> _ = pytest.importorskip("scipy")
        >>> from finalfusion import Embeddings, NdArray, SimpleVocab
        >>> m = np.array([[1, 0], [1, 0.2], [0, 1], [0.5, 1]], dtype=np.float32)
        >>> emb = Embeddings(NdArray(m), SimpleVocab(["cat", "dog", "car", "bus"]))
        >>> lines = ["cat\\tdog\\t9", "cat\\tcar\\t1", "car\\tbus\\t8", "dog\\tbus\\t3", "cat\\tzebra\\t7"]
        >>> pearson, spearman, oov = emb.evaluate_word_pairs(lines)
        >>> round(float(spearman[0]), 3), oov
        (1.0, 20.0)
        """
        stats = import_extra("scipy.stats", "evaluate_word_pairs", extra="gensim")
        fold = str.upper if case_insensitive else str
        ok_vocab: dict[str, int] = {}
        for i, w in enumerate(self.vocab.words[: max(0, restrict_vocab)]):
            ok_vocab.setdefault(fold(w), i)
        gold: list[float] = []
        model: list[float] = []
        oov = 0
        if isinstance(pairs, (str, os.PathLike)):
            with open(pairs, encoding=encoding) as f:
                lines = f.read().splitlines(keepends=True)
        else:
            lines = list(pairs)
        for line in lines:
            if not line or line.startswith("#"):
                continue
            parts = [fold(p) for p in line.split(delimiter)]
            try:
                a, b, score = parts
                sim = float(score)
            except ValueError:
                continue
            if a not in ok_vocab or b not in ok_vocab:
                oov += 1
                if dummy4unknown:
                    model.append(0.0)
                    gold.append(sim)
                continue
            gold.append(sim)
            va, vb = (self.get_vector(ok_vocab[w]).astype(np.float64) for w in (a, b))
            model.append(float(np.dot(unit(va), unit(vb))))
        if not gold:
            raise ValueError(f"No valid similarity judgements found in {pairs!r}: either invalid format or all are out-of-vocabulary")
        spearman = stats.spearmanr(gold, model)
        pearson = stats.pearsonr(gold, model)
        oov_ratio = float(oov) / len(gold) * 100 if dummy4unknown else float(oov) / (len(gold) + oov) * 100
        return pearson, spearman, oov_ratio
