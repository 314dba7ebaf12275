"""The :class:`Embeddings` facade: lookups over a vocabulary and a storage.

Lookup semantics follow docs/format.md §9: a known word returns its stored row;
an unknown word in a subword vocabulary returns the l2-normalised sum of
its n-gram rows (a zero sum stays zero); otherwise there is no embedding.
A model vocabulary (:class:`~finalfusion.vocab.TokenizerVocab`) looks up
every word through the model's tokenizer. Which rows a text is, is the
vocabulary's word rule (:meth:`~finalfusion.vocab.Vocab.word_rows`); the
facade asks it (:mod:`finalfusion._wordrule`) and never looks at the
vocabulary's type.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from finalfusion._atomic import Target
from finalfusion._display import embeddings_html as _embeddings_html
from finalfusion._encode import EncodeMixin
from finalfusion._fileref import FileRef, UrlRef
from finalfusion._gensim_api import KeyedVectorsMixin
from finalfusion._load import compatibility_problem, foreign_hint, read_parts, renumber_explicit
from finalfusion._pickling import PicklingMixin
from finalfusion._progress import ProgressArg
from finalfusion._source import Source
from finalfusion._threads import check_threads
from finalfusion._wordrule import word_vector, word_vectors
from finalfusion.chunks import Chunk
from finalfusion.container import write_chunks
from finalfusion.errors import BadMagic
from finalfusion.metadata import Metadata
from finalfusion.norms import Norms
from finalfusion.quantize import quantize_storage, reconstruct_storage, takes_parameters_of
from finalfusion.similarity import _queries
from finalfusion.similarity import evaluation as _evaluation
from finalfusion.similarity._index import QueryIndexCache
from finalfusion.similarity.results import SimilarityResult
from finalfusion.storage.ndarray import NdArray, Storage
from finalfusion.vocab._words import check_word_items
from finalfusion.vocab.base import Vocab
from finalfusion.vocab.subword import FastTextVocab, FinalfusionBucketVocab, bucket_to_explicit_vocab
from finalfusion.vocab.tokenizer import with_tokenizer_table

__all__ = ["Embeddings", "SimilarityResult", "load_finalfusion"]


class Embeddings(KeyedVectorsMixin, PicklingMixin, QueryIndexCache, EncodeMixin):
    """Word embeddings: a vocabulary, a storage, and optional norms and metadata.

    Parameters
    ----------
    storage
        :class:`~finalfusion.storage.NdArray` or :class:`~finalfusion.storage.QuantizedArray`.
    vocab
        Any vocabulary from :mod:`finalfusion.vocab`.
    norms
        Optional :class:`~finalfusion.norms.Norms`, one per word.
    metadata
        Optional :class:`~finalfusion.metadata.Metadata`.

    Raises
    ------
    TypeError
        If a chunk has the wrong type.
    ValueError
        If the storage rows do not match the vocabulary, or the norms the words.

    Notes
    -----
    Pickling (``multiprocessing``, ``concurrent.futures``, Dask, Ray):
    embeddings loaded with ``load_finalfusion(path, mmap=True)`` pickle as a
    reference to their file (a few hundred bytes) and are mapped again on
    unpickling, so workers share the page cache; if the file changed in
    between, unpickling raises :class:`~finalfusion.errors.FileChangedError`.
    All other embeddings -- and mapped ones whose norms or metadata were
    changed -- pickle by value. ``copy.copy`` and ``copy.deepcopy`` never
    touch the file. See docs/scaling.md.

    Lookups are safe from several threads at once (the subword caches are
    thread-safe and results do not depend on them).

    Examples
    --------
    >>> import numpy as np
    >>> from finalfusion.storage import NdArray
    >>> from finalfusion.vocab import SimpleVocab
    >>> emb = Embeddings(NdArray(np.eye(2, dtype=np.float32)), SimpleVocab(["a", "b"]))
    >>> emb["b"].tolist(), emb.embedding("c") is None, len(emb), emb.dims
    ([0.0, 1.0], True, 2, 2)
    >>> import pickle
    >>> pickle.loads(pickle.dumps(emb))["b"].tolist()
    [0.0, 1.0]
    """

    def __init__(self, storage: Storage, vocab: Vocab, norms: Norms | None = None, metadata: Metadata | None = None) -> None:
        if not isinstance(storage, Storage):
            raise TypeError(f"storage must be a Storage (NdArray or QuantizedArray), got {type(storage).__name__}")
        if not isinstance(vocab, Vocab):
            raise TypeError(f"vocab must be a Vocab, got {type(vocab).__name__}")
        if norms is not None and not isinstance(norms, Norms):
            raise TypeError(f"norms must be Norms or None, got {type(norms).__name__}")
        if metadata is not None and not isinstance(metadata, Metadata):
            raise TypeError(f"metadata must be Metadata or None, got {type(metadata).__name__}")
        problem = compatibility_problem(storage, vocab, norms)
        if problem:
            raise ValueError(problem)
        self._storage = storage
        self._vocab = vocab
        self._norms = norms
        self._metadata = metadata
        # Rows left at a server (a .fifu at a URL with mmap=True) are fetched through the storage's rows(), not viewed.
        self._matrix = storage.matrix if isinstance(storage, NdArray) and isinstance(storage.matrix, np.ndarray) else None
        #: The vocabulary pools rows of texts that are not one row (subwords, a model's tokens).
        self._subword = vocab.pooling is not None
        #: The mapped file these embeddings were read from, if they pickle by reference.
        self._file_ref: FileRef | UrlRef | None = None
        self._reset_query_index()

    # -- chunks ----------------------------------------------------------------------
    @property
    def storage(self) -> Storage:
        """The storage chunk.

        Examples
        --------
        >>> from finalfusion.vocab import SimpleVocab
        >>> Embeddings(NdArray(np.eye(2, dtype=np.float32)), SimpleVocab(["a", "b"])).storage
        NdArray(shape=(2, 2), dtype=float32)
        """
        return self._storage

    @property
    def vocab(self) -> Vocab:
        """The vocabulary chunk.

        Examples
        --------
        >>> from finalfusion.vocab import SimpleVocab
        >>> Embeddings(NdArray(np.eye(2, dtype=np.float32)), SimpleVocab(["a", "b"])).vocab.words
        ['a', 'b']
        """
        return self._vocab

    @property
    def norms(self) -> Norms | None:
        """The norms chunk, or ``None``; settable.

        Setting checks that there is one norm per word.

        Examples
        --------
        >>> from finalfusion.vocab import SimpleVocab
        >>> emb = Embeddings(NdArray(np.eye(2, dtype=np.float32)), SimpleVocab(["a", "b"]))
        >>> emb.norms is None
        True
        >>> emb.norms = Norms([3.0, 4.0])
        >>> emb.embedding_with_norm("b")[1]
        4.0
        """
        return self._norms

    @norms.setter
    def norms(self, norms: Norms | None) -> None:
        if norms is not None:
            if not isinstance(norms, Norms):
                raise TypeError(f"norms must be Norms or None, got {type(norms).__name__}")
            problem = compatibility_problem(self._storage, self._vocab, norms)
            if problem:
                raise ValueError(problem)
        self._norms = norms
        self._file_ref = None

    @property
    def metadata(self) -> Metadata | None:
        """The metadata chunk, or ``None``; settable.

        Examples
        --------
        >>> from finalfusion.vocab import SimpleVocab
        >>> emb = Embeddings(NdArray(np.eye(2, dtype=np.float32)), SimpleVocab(["a", "b"]))
        >>> emb.metadata = Metadata({"corpus": "wiki"})
        >>> emb.metadata["corpus"]
        'wiki'
        """
        return self._metadata

    @metadata.setter
    def metadata(self, metadata: Metadata | None) -> None:
        if metadata is not None and not isinstance(metadata, Metadata):
            raise TypeError(f"metadata must be Metadata or None, got {type(metadata).__name__}")
        self._metadata = metadata
        self._file_ref = None

    @property
    def dims(self) -> int:
        """Dimensionality of the embeddings.

        Examples
        --------
        >>> from finalfusion.vocab import SimpleVocab
        >>> Embeddings(NdArray(np.zeros((2, 5), dtype=np.float32)), SimpleVocab(["a", "b"])).dims
        5
        """
        return self._storage.shape[1]

    def chunks(self) -> list[Chunk]:
        """The chunks in file order: metadata (if any), vocabulary, storage, norms (if any).

        Examples
        --------
        >>> from finalfusion.vocab import SimpleVocab
        >>> emb = Embeddings(NdArray(np.eye(2, dtype=np.float32)), SimpleVocab(["a", "b"]), metadata=Metadata({"dims": 2}))
        >>> [type(chunk).__name__ for chunk in emb.chunks()]
        ['Metadata', 'SimpleVocab', 'NdArray']
        """
        out: list[Chunk] = []
        metadata = with_tokenizer_table(self._vocab, self._metadata)
        if metadata is not None:
            out.append(metadata)
        out.append(self._vocab)
        out.append(self._storage)
        if self._norms is not None:
            out.append(self._norms)
        return out

    # -- lookups ---------------------------------------------------------------------
    def embedding(self, word: str, out: npt.NDArray[np.float32] | None = None, default: Any = None) -> Any:
        """The embedding of ``word``, or ``default`` if there is none.

        Parameters
        ----------
        word
            The query word.
        out
            Optional array to write the embedding into (and return).
        default
            Returned (copied into ``out`` if given) when no embedding exists.

        Returns
        -------
        numpy.ndarray or the default
            For a known word the stored row (a view for dense storage);
            for an unknown word of a subword vocabulary the normalised sum
            of its subword rows; for every word of a model vocabulary the
            mean of the model's rows of its tokens (unit length when the
            rows are stored normalised; see :mod:`finalfusion._encode`).

        Examples
        --------
        >>> import numpy as np
        >>> from finalfusion.storage import NdArray
        >>> from finalfusion.vocab import SimpleVocab
        >>> emb = Embeddings(NdArray(np.eye(2, dtype=np.float32)), SimpleVocab(["a", "b"]))
        >>> emb.embedding("zz", default=np.zeros(2)).tolist()
        [0.0, 0.0]
        """
        found = word_vector(self._vocab, self._storage, self._matrix, self._norms, word)
        if found is None:
            if out is not None and default is not None:
                out[...] = default
                return out
            return default
        row = found[0]
        if out is not None:
            out[...] = row
            return out
        return row

    def __getitem__(self, word: str | Sequence[str]) -> npt.NDArray[np.float32]:
        if not isinstance(word, str):  # gensim: a list of words -> matrix (KeyError if one has no embedding)
            return self._getitem_many(word)
        v = self.embedding(word)
        if v is None:
            raise KeyError(word)
        return v  # type: ignore[no-any-return]

    def embedding_with_norm(self, word: str, out: npt.NDArray[np.float32] | None = None, default: Any = None) -> Any:
        """The embedding of ``word`` and its norm, or ``default``.

        For a known word the norm comes from the norms chunk (``1.0`` when
        there is none, as in finalfusion-rust); for an unknown word it is
        the l2 norm of the summed subword rows before normalisation.

        Examples
        --------
        >>> import numpy as np
        >>> from finalfusion.norms import Norms
        >>> from finalfusion.storage import NdArray
        >>> from finalfusion.vocab import SimpleVocab
        >>> emb = Embeddings(NdArray(np.eye(2, dtype=np.float32)), SimpleVocab(["a", "b"]), Norms([3.0, 4.0]))
        >>> vec, norm = emb.embedding_with_norm("b")
        >>> vec.tolist(), norm
        ([0.0, 1.0], 4.0)
        """
        found = word_vector(self._vocab, self._storage, self._matrix, self._norms, word)
        if found is None:
            if out is not None and default is not None:
                out[...] = default[0]
                return out, default[1]
            return default
        row, norm = found
        if out is not None:
            out[...] = row
            return out, norm
        return row, norm

    def embedding_batch(
        self, words: Sequence[str], out: npt.NDArray[np.float32] | None = None, *, threads: int | None = None
    ) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.bool_]]:
        """Embeddings of many words at once.

        Known words are gathered with one fancy index; unknown words of a
        subword vocabulary are hashed in vectorised batches, each distinct
        word once, and their subword rows are gathered and summed on worker
        threads while the next words are hashed.

        Parameters
        ----------
        words
            The query words.
        out
            Optional ``(len(words), dims)`` ``float32`` array to fill.
        threads
            Threads that sum the subword rows of unknown words, the calling
            one included (default: :func:`finalfusion.get_threads`, set with
            :func:`finalfusion.set_threads`). ``1`` keeps all work on the
            calling thread. Batches of fewer than 4096 distinct
            unknown words are never split. The result is bit-identical for
            every thread count.

        Returns
        -------
        matrix, found
            One row per word (zeros where there is no embedding) and a
            boolean mask telling which words have an embedding.

        Raises
        ------
        ValueError
            If ``out`` has the wrong shape or ``threads`` is not a positive int.

        Examples
        --------
        >>> import numpy as np
        >>> from finalfusion.storage import NdArray
        >>> from finalfusion.vocab import SimpleVocab
        >>> emb = Embeddings(NdArray(np.eye(2, dtype=np.float32)), SimpleVocab(["a", "b"]))
        >>> m, found = emb.embedding_batch(["b", "zz", "a"])
        >>> m.tolist(), found.tolist()
        ([[0.0, 1.0], [0.0, 0.0], [1.0, 0.0]], [True, False, True])
        """
        check_word_items(words)
        threads = check_threads(threads)
        return word_vectors(self._vocab, self._storage, self._matrix, self._norms, words, out, threads)

    def __contains__(self, word: object) -> bool:
        return word in self._vocab

    def __iter__(self) -> Iterator[tuple[Any, ...]]:
        """Iterate over ``(word, embedding)``, or ``(word, embedding, norm)`` when norms exist."""
        # storage without a matrix in memory (quantized, or rows at a server) is read in blocks, in order
        rows = (self._matrix[i] for i in range(len(self._vocab))) if self._matrix is not None else iter(self._storage)
        if self._norms is not None:
            return zip(self._vocab, rows, self._norms.norms, strict=False)
        return zip(self._vocab, rows, strict=False)

    def __len__(self) -> int:
        return len(self._vocab)

    def __repr__(self) -> str:
        parts = [
            f"vocab={type(self._vocab).__name__}({len(self._vocab)} words"
            + (f", {self._vocab.upper_bound - len(self._vocab)} subword rows)" if self._subword else ")"),
            f"storage={type(self._storage).__name__}{self._storage.shape}",
            f"norms={'yes' if self._norms is not None else 'no'}",
            f"metadata={'yes' if self._metadata is not None else 'no'}",
        ]
        return f"Embeddings({', '.join(parts)})"

    def _repr_html_(self) -> str:
        return _embeddings_html(self, None if (ref := self._by_reference()) is None else ref.path)

    # -- queries (finalfusion.similarity) --
    def word_similarity(
        self, query: str, k: int = 10, *, skip: Iterable[str] | None = None, rerank: int | None = None, index: Any = None
    ) -> list[SimilarityResult] | None:
        """The ``k`` nearest neighbours of a word by cosine similarity.

        The query is the word's embedding (an unknown word of a subword
        vocabulary is embedded through its n-grams), l2-normalised;
        candidates are the known words. Semantics in :mod:`finalfusion.similarity`
        and docs/queries.md.

        Parameters
        ----------
        query
            The query word.
        k
            Number of neighbours (``>= 0``); more than there are words
            returns the whole ranking.
        skip
            Words never returned. Default: the query word itself; pass
            an empty set to allow it.
        rerank
            Quantized storage: re-score this many ADC candidates exactly
            (float64, from reconstructed rows) before taking ``k``. With an
            index: also ask it for ``max(k, rerank)`` candidates.
        index
            An approximate-neighbour index (:mod:`finalfusion.ann`) proposing
            the candidates, scored as the exact scan scores them; default:
            the one of :meth:`set_index`; ``False``: the exact scan.

        Returns
        -------
        list of SimilarityResult or None
            Best first, ties in word order; ``None`` if ``query`` has no
            embedding (as in finalfusion-python 0.7).

        Raises
        ------
        ValueError
            If ``k`` is negative.
        NonFiniteError
            (a ``ValueError``) If the query word's vector has a NaN or
            infinite component, naming the word.

        Examples
        --------
        >>> import numpy as np
        >>> from finalfusion.storage import NdArray
        >>> from finalfusion.vocab import SimpleVocab
        >>> m = np.array([[1, 0], [0.8, 0.6], [0, 1]], dtype=np.float32)
        >>> emb = Embeddings(NdArray(m), SimpleVocab(["a", "b", "c"]))
        >>> [(r.word, round(r.similarity, 2)) for r in emb.word_similarity("a", k=5)]
        [('b', 0.8), ('c', 0.0)]
        >>> emb.word_similarity("zz") is None
        True
        >>> emb.word_similarity("a", k=1, index=False)  # the exact scan, even after set_index
        [SimilarityResult(word='b', similarity=0.800000011920929)]
        """
        return _queries.word_similarity(self, query, k, skip, rerank, index)

    def embedding_similarity(
        self, query: npt.ArrayLike, k: int = 10, skip: Iterable[str] | None = None, *, rerank: int | None = None, index: Any = None
    ) -> list[SimilarityResult]:
        """The ``k`` words most similar to a vector (normalised first, as in finalfusion-rust).

        Parameters
        ----------
        query
            Vector of length :attr:`dims` (finite).
        k
            Number of neighbours (``>= 0``).
        skip
            Words never returned (default: none).
        rerank, index
            As in :meth:`word_similarity`.

        Raises
        ------
        ValueError
            If ``k`` is negative or the vector has the wrong shape;
            :class:`~finalfusion.errors.NonFiniteError` (a ``ValueError``)
            if it has a NaN or infinite component.

        Examples
        --------
        >>> import numpy as np
        >>> from finalfusion.storage import NdArray
        >>> from finalfusion.vocab import SimpleVocab
        >>> emb = Embeddings(NdArray(np.eye(2, dtype=np.float32)), SimpleVocab(["a", "b"]))
        >>> [(r.word, r.similarity) for r in emb.embedding_similarity([0.0, 5.0], k=1, index=False)]
        [('b', 1.0)]
        """
        return _queries.embedding_similarity(self, query, k, skip, rerank, index)

    def analogy(
        self,
        word1: str,
        word2: str,
        word3: str,
        k: int = 1,
        skip: Iterable[str] | None = None,
        *,
        mask: Sequence[bool] = (True, True, True),
        rerank: int | None = None,
        index: Any = None,
    ) -> list[SimilarityResult] | None:
        """``word1`` is to ``word2`` as ``word3`` is to ...?

        Ranks the words by cosine with ``unit(e2) - unit(e1) + unit(e3)``
        (identical to finalfusion-rust's ``e2 - e1 + e3`` on normalised files).

        Parameters
        ----------
        word1, word2, word3
            The query words.
        k
            Number of answers (``>= 0``).
        skip
            Words never returned; default: the query words selected by ``mask``.
        mask
            finalfusion-rust's ``analogy_masked``: which of the three query
            words are excluded when ``skip`` is ``None``.
        rerank, index
            As in :meth:`word_similarity`.

        Returns
        -------
        list of SimilarityResult or None
            ``None`` if any of the three words has no embedding.

        Examples
        --------
        >>> import numpy as np
        >>> from finalfusion.storage import NdArray
        >>> from finalfusion.vocab import SimpleVocab
        >>> m = np.array([[1, 0, 0], [1, 1, 0], [0, 0, 1], [0, 1, 1]], dtype=np.float32)
        >>> emb = Embeddings(NdArray(m), SimpleVocab(["man", "king", "woman", "queen"]))
        >>> emb.analogy("man", "king", "woman", index=False)[0].word
        'queen'
        """
        return _queries.analogy(self, (word1, word2, word3), k, skip, mask, rerank, index)

    def word_similarity_batch(self, queries: Sequence[str], k: int = 10, *, index: Any = None) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]:
        """Nearest neighbours of many words with matrix-matrix products (``index=``: see :meth:`word_similarity`).

        With an index, one search of the index for all queries, then each
        query's candidates scored as :meth:`word_similarity` scores them.

        Returns
        -------
        indices, scores
            ``(len(queries), min(k, len(self)))`` arrays: word indices (look
            them up in ``vocab.words``) and cosines, best first. Padding
            (fewer candidates, or a query without embedding) is ``-1`` / ``nan``.
            Each query word is excluded from its own results.

        Examples
        --------
        >>> import numpy as np
        >>> from finalfusion.storage import NdArray
        >>> from finalfusion.vocab import SimpleVocab
        >>> m = np.array([[1, 0], [0.8, 0.6], [0, 1]], dtype=np.float32)
        >>> emb = Embeddings(NdArray(m), SimpleVocab(["a", "b", "c"]))
        >>> idx, sims = emb.word_similarity_batch(["a", "c", "zz"], k=1, index=False)
        >>> idx.tolist(), sims.astype(float).round(2).tolist()
        ([[1], [1], [-1]], [[0.8], [0.6], [nan]])
        """
        check_word_items(queries)
        return _queries.word_similarity_batch(self, queries, k, index)

    def embedding_similarity_batch(
        self, queries: npt.ArrayLike, k: int = 10, skip: Iterable[str] | None = None, *, index: Any = None
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]:
        """Nearest neighbours of the rows of a ``(n, dims)`` matrix; see :meth:`word_similarity_batch` (``index=`` too).

        Examples
        --------
        >>> import numpy as np
        >>> from finalfusion.storage import NdArray
        >>> from finalfusion.vocab import SimpleVocab
        >>> emb = Embeddings(NdArray(np.eye(2, dtype=np.float32)), SimpleVocab(["a", "b"]))
        >>> emb.embedding_similarity_batch([[1, 0], [0, 2]], k=2, index=False)[0].tolist()
        [[0, 1], [1, 0]]
        """
        return _queries.embedding_similarity_batch(self, queries, k, skip, index)

    def analogy_batch(self, queries: Sequence[Sequence[str]], k: int = 1, *, index: Any = None) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]:
        """Many analogy queries ``(word1, word2, word3)`` at once; see :meth:`analogy` and :meth:`word_similarity_batch` (``index=`` too).

        Examples
        --------
        >>> import numpy as np
        >>> from finalfusion.storage import NdArray
        >>> from finalfusion.vocab import SimpleVocab
        >>> m = np.array([[1, 0, 0], [1, 1, 0], [0, 0, 1], [0, 1, 1]], dtype=np.float32)
        >>> emb = Embeddings(NdArray(m), SimpleVocab(["man", "king", "woman", "queen"]))
        >>> emb.analogy_batch([("man", "king", "woman"), ("woman", "queen", "man")], index=False)[0].tolist()
        [[3], [1]]
        """
        return _queries.analogy_batch(self, queries, k, index)

    def evaluate_analogies(
        self, questions: Any, *, case_insensitive: bool = False, restrict_vocab: int | None = None, progress: ProgressArg = None
    ) -> _evaluation.AnalogyEvaluation:
        """Analogy accuracy on a word2vec-format question file; see :func:`finalfusion.similarity.evaluate_analogies`.

        Examples
        --------
        >>> import numpy as np
        >>> from finalfusion.storage import NdArray
        >>> from finalfusion.vocab import SimpleVocab
        >>> m = np.array([[1, 0, 0], [1, 1, 0], [0, 0, 1], [0, 1, 1]], dtype=np.float32)
        >>> emb = Embeddings(NdArray(m), SimpleVocab(["man", "king", "woman", "queen"]))
        >>> emb.evaluate_analogies([": family", "man king woman queen"]).accuracy
        1.0
        """
        return _evaluation.evaluate_analogies(self, questions, case_insensitive=case_insensitive, restrict_vocab=restrict_vocab, progress=progress)

    # -- conversion and output -------------------------------------------------------
    # -- quantization (quantize.py) --
    @takes_parameters_of(quantize_storage)
    def quantize(self, *args: Any, **kwargs: Any) -> Embeddings:
        """Product-quantize the embeddings (all storage rows, subword rows included).

        Defaults are those of finalfusion-utils ``quantize``. Vocabulary,
        norms and metadata are carried over unchanged (the same objects).

        Parameters
        ----------
        *args, **kwargs
            The parameters of :func:`finalfusion.quantize.quantize_storage`
            after the storage, defined there once (type checkers and
            ``help()`` see them): listed under Other Parameters.

        Other Parameters
        ----------------
        n_subquantizers : int or None, default None
            Bytes per row; must divide :attr:`dims`. Default ``dims // 2``.
        n_bits : int, default 8
            Bits per subquantizer code, 1..8 (``2 ** n_bits`` centroids).
        quantizer : str, default "pq"
            ``"pq"``, ``"opq"`` (rotation refined by Procrustes steps) or
            ``"gaussian_opq"`` (eigenvalue-allocation rotation, then PQ).
        n_iterations : int, default 100
            k-means iterations per subquantizer (OPQ: alternating iterations).
        n_attempts : int, default 1
            k-means runs per subquantizer; the best is kept (not used by OPQ).
        normalize : bool, default True
            Quantize unit-length rows and store the norms in the chunk.
        seed : int or numpy.random.Generator or None, default None
            Seed (or ``numpy.random.Generator``) for reproducible output.
        sample : int or float or None, default None
            Train on a random sample of rows (count or fraction); every row
            is still encoded. Useful for large or memory-mapped matrices.
        progress : callable or bool or None, default None
            Callback ``progress(stage, done, total)`` with stage ``"train"``
            or ``"encode"``, or ``True`` for tqdm bars (when tqdm is installed).

        Returns
        -------
        Embeddings
            With :class:`~finalfusion.storage.QuantizedArray` storage.

        Raises
        ------
        ValueError
            For invalid parameters, before any work is done; for rows with
            NaN or infinite values.

        Examples
        --------
        >>> import numpy as np
        >>> from finalfusion.storage import NdArray
        >>> from finalfusion.vocab import SimpleVocab
        >>> m = np.random.default_rng(0).standard_normal((64, 8)).astype(np.float32)
        >>> emb = Embeddings(NdArray(m), SimpleVocab([f"w{i}" for i in range(64)]))
        >>> small = emb.quantize(n_subquantizers=4, n_bits=4, seed=0)
        >>> small.storage
        QuantizedArray(shape=(64, 8), subquantizers=4, centroids=16, projection=False, norms=True)
        >>> bool(np.linalg.norm(small["w3"] - emb["w3"]) < np.linalg.norm(emb["w3"]))
        True
        """
        return Embeddings(quantize_storage(self._storage, *args, **kwargs), self._vocab, self._norms, self._metadata)

    def reconstruct(self) -> Embeddings:
        """Dense embeddings with every quantized row reconstructed (in-chunk norms applied).

        Dense embeddings are returned as they are (same storage).

        Examples
        --------
        >>> import numpy as np
        >>> from finalfusion.storage import PQ, QuantizedArray
        >>> from finalfusion.vocab import SimpleVocab
        >>> pq = PQ(np.arange(8, dtype=np.float32).reshape(2, 2, 2))
        >>> emb = Embeddings(QuantizedArray(pq, np.array([[1, 0]], dtype=np.uint8)), SimpleVocab(["a"]))
        >>> emb.reconstruct().storage.matrix.tolist()
        [[2.0, 3.0, 4.0, 5.0]]
        """
        if isinstance(self._storage, NdArray):
            return Embeddings(self._storage, self._vocab, self._norms, self._metadata)
        return Embeddings(reconstruct_storage(self._storage), self._vocab, self._norms, self._metadata)

    def write(self, file: Target, *, fsync: bool = False) -> None:
        """Write the embeddings as a finalfusion file.

        Writing to a path is atomic (temporary file + ``os.replace``): the
        target is either the old file or the complete new one, even when
        it is memory-mapped by this or another process. An explicit n-gram
        vocabulary whose indices are not numbered by first appearance is
        written renumbered, with its subword rows permuted to match
        (docs/format.md §5.8): the file gives the same lookups.

        Parameters
        ----------
        file
            Path or binary file object.
        fsync
            Flush to disk before renaming (durability across power loss).

        Raises
        ------
        TypeError
            If the metadata holds values TOML cannot represent.

        Examples
        --------
        >>> import io
        >>> from finalfusion.vocab import SimpleVocab
        >>> buf = io.BytesIO()
        >>> Embeddings(NdArray(np.eye(2, dtype=np.float32)), SimpleVocab(["a", "b"])).write(buf)
        >>> load_finalfusion(buf.getvalue())["b"].tolist()
        [0.0, 1.0]
        """
        write_chunks(self._canonical().chunks(), file, fsync=fsync)

    def _canonical(self) -> Embeddings:
        """``self``, or equal embeddings as a file holds them (see :func:`finalfusion._load.renumber_explicit`)."""
        renumbered = renumber_explicit(self._storage, self._vocab)
        if renumbered is None:
            return self
        return Embeddings(*renumbered, self._norms, self._metadata)

    def bucket_to_explicit(self) -> Embeddings:
        """Convert hashed subword embeddings to an explicit n-gram vocabulary.

        Only the buckets used by n-grams of known words are kept, so the
        matrix usually shrinks. Norms are kept; metadata is not copied (as
        in finalfusion-python 0.7), since it describes the original.
        Known words keep their vectors; an unknown word loses the n-grams
        that occur in no known word (and their bucket rows), so its vector
        can change, as with finalfusion-rust's conversion.

        Raises
        ------
        TypeError
            If the vocabulary is not a FinalfusionBucketVocab or FastTextVocab.

        Examples
        --------
        >>> from finalfusion.subword import FinalfusionHashIndexer
        >>> vocab = FinalfusionBucketVocab(["ab"], FinalfusionHashIndexer(4, 3, 3))  # 16 buckets, 3-grams
        >>> emb = Embeddings(NdArray(np.ones((17, 2), dtype=np.float32)), vocab)
        >>> explicit = emb.bucket_to_explicit()
        >>> explicit.vocab.subword_indexer.ngrams, explicit.storage.shape
        (['<ab', 'ab>'], (3, 2))
        """
        if not isinstance(self._vocab, (FinalfusionBucketVocab, FastTextVocab)):
            raise TypeError(f"only bucketed vocabularies can be converted to explicit, not {type(self._vocab).__name__}")
        vocab, buckets = bucket_to_explicit_vocab(self._vocab)
        n = len(vocab)
        rows = np.concatenate([np.arange(n, dtype=np.int64), buckets + n])
        matrix = np.array(self._storage.rows(rows), dtype=np.float32)
        return Embeddings(NdArray(matrix), vocab, norms=self._norms)


def load_finalfusion(file: Source, mmap: bool = False, *, cache_bytes: int | None = None) -> Embeddings:
    """Read embeddings from a finalfusion file.

    Parameters
    ----------
    file
        A path, a URL (``https://``, ``s3://``, ... see docs/remote.md), the
        file's contents as bytes, or a binary file object.
    mmap
        Memory-map the file: arrays become read-only views of the page
        cache, so loading is instant and processes share memory. The
        mapping lives as long as the arrays do. Embeddings mapped from a
        path pickle as a reference to the file (see :class:`Embeddings`).
        For a URL, the header, vocabulary, norms and metadata are read and
        the storage's rows stay at the server: lookups fetch the blocks of
        rows they need, whole-matrix work (similarity queries, quantization,
        writing) streams them once; such embeddings pickle as the URL and
        its checks.
    cache_bytes
        With ``mmap=True`` on a URL: bytes of row blocks kept in memory
        (default 32 MiB, ``finalfusion._remote_rows.CACHE_BYTES``).

    Returns
    -------
    Embeddings

    Raises
    ------
    FormatError
        (a ``ValueError``) naming what was expected and found, the byte
        offset and the chunk, for any malformed file; its subclass
        :class:`~finalfusion.errors.BadMagic` for a file of another
        format, naming that format (word2vec, text-dims, ...) and
        :func:`finalfusion.load`, which reads it.
    OSError
        If the file cannot be read.

    Examples
    --------
    >>> import io, numpy as np
    >>> from finalfusion.storage import NdArray
    >>> from finalfusion.vocab import SimpleVocab
    >>> buf = io.BytesIO()
    >>> Embeddings(NdArray(np.eye(2, dtype=np.float32)), SimpleVocab(["a", "b"])).write(buf)
    >>> load_finalfusion(buf.getvalue())["a"].tolist()
    [1.0, 0.0]
    """
    try:
        parts, ref = read_parts(file, mmap, cache_bytes)
    except BadMagic as exc:
        raise foreign_hint(exc, file) from None
    emb = Embeddings(*parts)
    emb._file_ref = ref
    return emb
