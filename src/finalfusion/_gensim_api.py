"""gensim's ``KeyedVectors`` spellings on :class:`~finalfusion.Embeddings`, and conversion from and to gensim.

:class:`KeyedVectorsMixin` is a base class of :class:`~finalfusion.Embeddings`.
Every method here is a thin spelling over the existing lookups
(:meth:`~finalfusion.Embeddings.embedding`, ``embedding_batch``) and queries
(:mod:`finalfusion.similarity`): there is no second query engine. Where the
semantics differ from gensim (unknown words are embedded through their
subwords; a word without an embedding is always a ``KeyError``; zero vectors
stay zero instead of becoming NaN), docs/migrating.md says so.

gensim itself is imported only by :meth:`KeyedVectorsMixin.from_gensim` and
:meth:`KeyedVectorsMixin.to_gensim` (the ``interop`` extra).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from finalfusion.errors import NonFiniteError, import_extra
from finalfusion.norms import Norms, first_invalid_norm, normalize_rows
from finalfusion.similarity import _queries
from finalfusion.similarity import evaluation as _evaluation
from finalfusion.similarity._vectors import check_finite_rows, unit_query
from finalfusion.storage.ndarray import NdArray
from finalfusion.subword.indexers import FastTextIndexer
from finalfusion.vocab._words import check_word, check_words
from finalfusion.vocab.simple import SimpleVocab
from finalfusion.vocab.subword import FastTextVocab

if TYPE_CHECKING:
    from typing_extensions import Self

    from finalfusion.similarity._base import QueryIndex
    from finalfusion.storage.ndarray import Storage
    from finalfusion.vocab.base import Vocab

__all__ = ["KeyedVectorsMixin"]

F32 = npt.NDArray[np.float32]


def _unit(v: npt.NDArray[Any]) -> npt.NDArray[Any]:
    """``v / ||v||`` along the last axis, in ``v``'s dtype; zero vectors stay zero.

    Norms and quotients are taken in float64 (so rows of tiny or huge
    float32 values become unit rows too); a row with NaN or infinity gives
    NaN.
    """
    if v.dtype != np.float32:
        v = np.asarray(v, dtype=np.float64)
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        norms = np.sqrt(np.einsum("...i,...i->...", v, v, dtype=np.float64))
        inverse = np.divide(1.0, norms, out=np.ones_like(norms), where=norms != 0)
        out = np.empty_like(v)
        np.multiply(v, inverse[..., None], out=out, casting="unsafe")
    return out


def _gensim_models(what: str) -> Any:
    """``gensim.models``, or :class:`~finalfusion.errors.MissingExtraError` naming the ``interop`` extra."""
    return import_extra("gensim.models", what)


class KeyedVectorsMixin:
    """gensim ``KeyedVectors`` spellings for :class:`~finalfusion.Embeddings`.

    Examples
    --------
    >>> import numpy as np
    >>> from finalfusion import Embeddings
    >>> from finalfusion.storage import NdArray
    >>> from finalfusion.vocab import SimpleVocab
    >>> emb = Embeddings(NdArray(np.eye(2, dtype=np.float32)), SimpleVocab(["a", "b"]))
    >>> emb[["b", "a"]].tolist(), emb.index_to_key, emb.vector_size
    ([[0.0, 1.0], [1.0, 0.0]], ['a', 'b'], 2)
    """

    if TYPE_CHECKING:  # provided by Embeddings

        @property
        def vocab(self) -> Vocab: ...
        @property
        def storage(self) -> Storage: ...
        @property
        def norms(self) -> Norms | None: ...
        @property
        def dims(self) -> int: ...
        def embedding(self, word: str, out: F32 | None = None, default: Any = None) -> Any: ...
        def embedding_batch(self, words: Sequence[str], out: F32 | None = None, *, threads: int | None = None) -> tuple[F32, npt.NDArray[np.bool_]]: ...
        def most_similar(self, positive: Any = None, negative: Any = None, topn: int | None = 10, restrict_vocab: int | None = None) -> Any: ...
        def _query_index(self) -> QueryIndex: ...
        def _drop_query_index(self) -> None: ...

    # -- lookups ---------------------------------------------------------------------
    def _getitem_many(self, keys: Any) -> F32:
        """``emb[list_of_words]``: one row per word; ``KeyError`` for a word without an embedding."""
        if not isinstance(keys, (list, tuple, np.ndarray)):
            check_word(keys)
        words = [str(w) if isinstance(w, np.str_) else w for w in keys]
        for w in words:
            check_word(w)
        matrix, found = self.embedding_batch(words)
        if not found.all():
            raise KeyError(words[int(np.flatnonzero(~found)[0])])
        return matrix

    @property
    def key_to_index(self) -> Mapping[str, int]:
        """gensim's ``key_to_index``: the read-only word -> index mapping of the vocabulary (words only).

        Examples
        --------
        >>> import numpy as np
        >>> from finalfusion import Embeddings, NdArray, SimpleVocab
        >>> emb = Embeddings(NdArray(np.eye(2, dtype=np.float32)), SimpleVocab(["a", "b"]))
        >>> emb.key_to_index["b"], dict(emb.key_to_index)
        (1, {'a': 0, 'b': 1})
        """
        return self.vocab.word_index

    @property
    def index_to_key(self) -> list[str]:
        """gensim's ``index_to_key``: the words in index order.

        Examples
        --------
        >>> import numpy as np
        >>> from finalfusion import Embeddings, NdArray, SimpleVocab
        >>> Embeddings(NdArray(np.eye(2, dtype=np.float32)), SimpleVocab(["a", "b"])).index_to_key
        ['a', 'b']
        """
        return self.vocab.words

    @property
    def vectors(self) -> F32:
        """gensim's ``vectors``: the word rows, ``(len(vocab), dims)``, as stored.

        Subword rows are not included. Dense storage gives a view of the
        matrix (read-only when memory-mapped); quantized storage
        reconstructs the rows into a new array. finalfusion files usually
        store unit rows with the norms in :attr:`~finalfusion.Embeddings.norms`.

        Examples
        --------
        >>> import numpy as np
        >>> from finalfusion import Embeddings, NdArray, SimpleVocab
        >>> Embeddings(NdArray(np.eye(2, dtype=np.float32)), SimpleVocab(["a", "b"])).vectors.shape
        (2, 2)
        """
        n = len(self.vocab)
        storage = self.storage
        if isinstance(storage, NdArray):
            return storage.matrix[:n]
        return storage.rows(np.arange(n))

    @property
    def vector_size(self) -> int:
        """gensim's ``vector_size``: :attr:`~finalfusion.Embeddings.dims`.

        Examples
        --------
        >>> import numpy as np
        >>> from finalfusion import Embeddings, NdArray, SimpleVocab
        >>> Embeddings(NdArray(np.eye(2, dtype=np.float32)), SimpleVocab(["a", "b"])).vector_size
        2
        """
        return self.dims

    def get_vector(self, key: str, norm: bool = False) -> F32:
        """gensim's ``get_vector``: the embedding of ``key`` (l2-normalised with ``norm=True``).

        An unknown word of a subword vocabulary is embedded through its
        n-grams (as gensim's ``FastTextKeyedVectors`` does).

        Raises
        ------
        KeyError
            If ``key`` has no embedding.
        TypeError
            If ``key`` is not a ``str``.

        Examples
        --------
        >>> import numpy as np
        >>> from finalfusion import Embeddings, NdArray, SimpleVocab
        >>> emb = Embeddings(NdArray(np.array([[3, 4]], dtype=np.float32)), SimpleVocab(["a"]))
        >>> emb.get_vector("a").tolist(), emb.get_vector("a", norm=True).tolist()
        ([3.0, 4.0], [0.6000000238418579, 0.800000011920929])
        """
        check_word(key)
        v = self.embedding(key)
        if v is None:
            raise KeyError(f"Key '{key}' not present")
        return _unit(v).astype(np.float32) if norm else v

    def get_index(self, key: Any, default: int | None = None) -> int:
        """gensim's ``get_index``: the index of word ``key``; an int in range is its own index.

        Raises
        ------
        KeyError
            If ``key`` is neither a vocabulary word nor a valid index and
            there is no ``default``.

        Examples
        --------
        >>> import numpy as np
        >>> from finalfusion import Embeddings, NdArray, SimpleVocab
        >>> emb = Embeddings(NdArray(np.eye(2, dtype=np.float32)), SimpleVocab(["a", "b"]))
        >>> emb.get_index("b"), emb.get_index(1), emb.get_index("zz", -1)
        (1, 1, -1)
        """
        i = self.vocab.word_index.get(key) if isinstance(key, str) else None
        if i is not None:
            return int(i)
        if isinstance(key, (int, np.integer)) and not isinstance(key, bool) and 0 <= key < len(self.vocab):
            return int(key)
        if default is not None:
            return default
        raise KeyError(f"Key '{key}' not present")

    def has_index_for(self, key: Any) -> bool:
        """gensim's ``has_index_for``: whether ``key`` is a vocabulary word (subword-only words are not).

        Examples
        --------
        >>> import numpy as np
        >>> from finalfusion import Embeddings, NdArray, SimpleVocab
        >>> emb = Embeddings(NdArray(np.eye(2, dtype=np.float32)), SimpleVocab(["a", "b"]))
        >>> emb.has_index_for("a"), emb.has_index_for("zz")
        (True, False)
        """
        return self.get_index(key, -1) >= 0

    def get_normed_vectors(self) -> F32:
        """gensim's ``get_normed_vectors``: :attr:`vectors` with unit rows (zero rows stay zero).

        Examples
        --------
        >>> import numpy as np
        >>> from finalfusion import Embeddings, NdArray, SimpleVocab
        >>> emb = Embeddings(NdArray(np.array([[3, 4], [0, 0]], dtype=np.float32)), SimpleVocab(["a", "b"]))
        >>> emb.get_normed_vectors().astype(float).round(2).tolist()
        [[0.6, 0.8], [0.0, 0.0]]
        """
        return _unit(np.asarray(self.vectors, dtype=np.float32)).astype(np.float32)

    def _rows_of(self, words: Iterable[str]) -> F32:
        check_words(words)
        return self._getitem_many(list(words))

    # -- similarities ----------------------------------------------------------------
    def similarity(self, w1: str, w2: str) -> float:
        """gensim's ``similarity``: cosine similarity of two words.

        ``nan`` if a vector has a NaN or infinite component (as gensim).

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
        return float(np.dot(_unit(self.get_vector(w1).astype(np.float64)), _unit(self.get_vector(w2).astype(np.float64))))

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
        """gensim's ``n_similarity``: cosine similarity of the means of two lists of embeddings.

        The embeddings are averaged as :meth:`~finalfusion.Embeddings.embedding`
        returns them: unit vectors when the rows were normalised on loading
        (gensim then averages the raw vectors; its ``get_mean_vector(...,
        pre_normalize=True)`` is what this computes).

        ``nan`` if a vector has a NaN or infinite component (as gensim).

        Raises
        ------
        ZeroDivisionError
            If a list is empty (as gensim).
        KeyError
            If a word has no embedding (gensim silently leaves such words out).

        Examples
        --------
        >>> import numpy as np
        >>> from finalfusion import Embeddings, NdArray, SimpleVocab
        >>> emb = Embeddings(NdArray(np.array([[1, 0], [0, 1], [1, 1]], dtype=np.float32)), SimpleVocab(["a", "b", "c"]))
        >>> round(emb.n_similarity(["a", "b"], ["c"]), 4)
        1.0
        """
        if not (len(ws1) and len(ws2)):
            raise ZeroDivisionError("At least one of the passed list is empty.")
        m1 = self._rows_of(ws1).astype(np.float64).mean(axis=0)
        m2 = self._rows_of(ws2).astype(np.float64).mean(axis=0)
        return float(np.dot(_unit(m1), _unit(m2)))

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
        if isinstance(word_or_vector, str):
            q = self.get_vector(word_or_vector)
            what = f"the vector of the word {word_or_vector!r}"
        else:
            q = np.asarray(word_or_vector, dtype=np.float64)
            if q.shape != (self.dims,):
                raise ValueError(f"expected a vector of length {self.dims}, got shape {q.shape}")
            what = "the query vector"
        others = list(other_words)
        if not others:
            sims = _queries.most_similar(self, [unit_query(q, self.dims, what)], None, None, None)
            return (1 - np.asarray(sims, dtype=np.float32)).astype(np.float32)
        rows = _unit(self._rows_of(others).astype(np.float64))
        return (1 - rows @ _unit(q.astype(np.float64))).astype(np.float32)  # type: ignore[no-any-return]

    def closer_than(self, key1: str, key2: str) -> list[str]:
        """gensim's ``closer_than``: the words closer to ``key1`` than vocabulary word ``key2`` is.

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
        e1 = self.get_index(key1, -1)
        e2 = self.get_index(key2)
        words = self.vocab.words
        return [words[i] for i in np.flatnonzero(dists < dists[e2]).tolist() if i != e1]

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

    def doesnt_match(self, words: Sequence[str]) -> str:
        """gensim's ``doesnt_match``: the word farthest from the mean of the (unit) word vectors.

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
        >>> Embeddings(NdArray(m), SimpleVocab(["cat", "dog", "car"])).doesnt_match(["cat", "dog", "car"])
        'car'
        """
        check_words(words)
        if not len(words):
            raise ValueError("cannot select a word from an empty list")
        rows = self._rows_of(words).astype(np.float32)
        check_finite_rows(rows, lambda i: f"the vector of the word {words[i]!r}")
        rows = _unit(rows)
        mean = _unit(rows.mean(axis=0))
        dists = rows @ mean
        return min(zip(dists.tolist(), words, strict=True))[1]

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
        v = np.asarray(vector, dtype=np.float64)
        if v.shape != (self.dims,):
            raise ValueError(f"expected a vector of length {self.dims}, got shape {v.shape}")
        return self.most_similar(positive=[v], topn=topn, restrict_vocab=restrict_vocab)

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
        _evaluation.evaluate_questions(self, questions, case_insensitive=case_insensitive, restrict_vocab=restrict_vocab, outcomes=outcomes)

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

    # -- conversion ------------------------------------------------------------------
    @classmethod
    def from_gensim(cls, kv: Any, *, normalize: bool = True) -> Self:
        """Embeddings from a gensim ``KeyedVectors`` (or ``FastTextKeyedVectors``).

        A ``FastTextKeyedVectors`` with buckets becomes a
        :class:`~finalfusion.vocab.FastTextVocab` (same hashing, ``min_n``,
        ``max_n`` and buckets): the word rows are gensim's composed word
        vectors, the subword rows ``vectors_ngrams``, as
        :func:`~finalfusion.load_fasttext` builds them. Anything else
        becomes a :class:`~finalfusion.vocab.SimpleVocab`.

        Parameters
        ----------
        kv
            The gensim vectors (keys must be ``str``).
        normalize
            l2-normalise the word rows and keep their norms (as the
            word2vec loaders do); ``False`` keeps the rows as they are.

        Raises
        ------
        MissingExtraError
            (an ``ImportError``) If gensim is not installed (the ``interop`` extra).
        TypeError
            If a key is not a ``str``.
        NonFiniteError
            (a ``ValueError``) With ``normalize``, if a vector has a NaN or
            infinite component or a norm beyond float32's range.

        Examples
        --------
        >>> import pytest
        >>> models = pytest.importorskip("gensim.models")
        >>> from finalfusion import Embeddings
        >>> kv = models.KeyedVectors(2)
        >>> kv.add_vectors(["a", "b"], [[3, 4], [0, 1]])
        >>> emb = Embeddings.from_gensim(kv)
        >>> emb["a"].tolist(), emb.embedding_with_norm("a")[1]
        ([0.6000000238418579, 0.800000011920929], 5.0)
        """
        make: Any = cls  # Embeddings (the mixin itself has no constructor); no import of the facade from here
        models = _gensim_models("converting from gensim")
        words = list(kv.index_to_key)
        for w in words:
            check_word(w)
        matrix = np.array(kv.vectors, dtype=np.float32, order="C")
        norms = None
        if normalize:
            lengths = normalize_rows(matrix)
            bad = first_invalid_norm(lengths)
            if bad is not None:
                raise NonFiniteError(
                    f"the vector of {words[bad]!r} has no finite float32 l2 norm ({float(lengths[bad])}): a NaN or infinite component, "
                    "or a length beyond float32's range; pass normalize=False to keep the vectors as they are"
                )
            norms = Norms(lengths)
        if isinstance(kv, models.fasttext.FastTextKeyedVectors) and kv.bucket > 0:
            ngrams = np.asarray(kv.vectors_ngrams, dtype=np.float32)
            vocab = FastTextVocab(words, FastTextIndexer(int(kv.bucket), int(kv.min_n), int(kv.max_n)))
            return make(NdArray(np.concatenate([matrix, ngrams])), vocab, norms)  # type: ignore[no-any-return]
        return make(NdArray(matrix), SimpleVocab(words), norms)  # type: ignore[no-any-return]

    def to_gensim(self, *, unnormalize: bool = True) -> Any:
        """A gensim ``KeyedVectors`` (``FastTextKeyedVectors`` for a fastText vocabulary).

        The word rows are multiplied by the norms (``unnormalize=False``
        keeps them as stored). A :class:`~finalfusion.vocab.FastTextVocab`
        becomes a ``FastTextKeyedVectors`` with the same buckets and
        n-gram lengths (``vectors_vocab`` solved so that gensim's
        composition gives the same word vectors); other subword
        vocabularies (finalfusion buckets, explicit n-grams, floret) have
        no gensim equivalent and give a ``KeyedVectors`` of the words only.

        Raises
        ------
        MissingExtraError
            (an ``ImportError``) If gensim is not installed (the ``interop`` extra).

        Examples
        --------
        >>> import numpy as np, pytest
        >>> models = pytest.importorskip("gensim.models")
        >>> from finalfusion import Embeddings, NdArray, Norms, SimpleVocab
        >>> emb = Embeddings(NdArray(np.array([[0.6, 0.8], [0, 1]], dtype=np.float32)), SimpleVocab(["a", "b"]), Norms([5.0, 2.0]))
        >>> kv = emb.to_gensim()
        >>> kv["a"].round(3).tolist(), kv.index_to_key
        ([3.0, 4.0], ['a', 'b'])
        """
        models = _gensim_models("converting to gensim")
        words = list(self.vocab.words)
        n = len(words)
        vectors = np.array(self.vectors, dtype=np.float32, order="C")
        if unnormalize and self.norms is not None:
            vectors *= self.norms.norms[:, None]
        vocab = self.vocab
        if isinstance(vocab, FastTextVocab):
            indexer = vocab.subword_indexer
            kv = models.fasttext.FastTextKeyedVectors(self.dims, indexer.min_n, indexer.max_n, indexer.n_buckets, count=0)
            kv.add_vectors(words, vectors)
            kv.vectors_ngrams = np.asarray(self.storage.rows(np.arange(n, n + indexer.n_buckets)), dtype=np.float32)
            kv.recalc_char_ngram_buckets()
            vocab_rows = vectors.copy()
            for i, buckets in enumerate(kv.buckets_word):
                vocab_rows[i] = vectors[i] * (len(buckets) + 1) - kv.vectors_ngrams[buckets].sum(axis=0)
            kv.vectors_vocab = vocab_rows
            return kv
        kv = models.KeyedVectors(self.dims, count=0, dtype=np.float32)
        kv.add_vectors(words, vectors)
        return kv
