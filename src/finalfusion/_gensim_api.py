"""gensim's ``KeyedVectors`` lookups on :class:`~finalfusion.Embeddings`, ``save_word2vec_format``, and conversion from and to gensim.

:class:`KeyedVectorsMixin` is a base class of :class:`~finalfusion.Embeddings`;
the query spellings (similarities, rankings, evaluations) come from its base
:class:`~finalfusion._gensim_queries.GensimQueriesMixin`. Borrowed names
carry borrowed answers: ``get_vector``, ``vectors`` and everything gensim
computes from its stored vectors use gensim's raw vectors, which are
finalfusion's unit rows times their norms; finalfusion's own spellings
(``emb[w]``, ``emb.embedding(w)``) keep the unit rows. The deliberate
differences (a word without an embedding is always a ``KeyError``; zero
vectors stay zero instead of becoming NaN) are in docs/migrating.md.

gensim itself is imported only by :meth:`KeyedVectorsMixin.from_gensim`,
:meth:`KeyedVectorsMixin.to_gensim` and :meth:`KeyedVectorsMixin.save` (the
``gensim`` extra); :meth:`KeyedVectorsMixin.load` reads gensim's files without it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from finalfusion._atomic import atomic_output
from finalfusion._gensim_queries import GensimQueriesMixin
from finalfusion._gensim_queries import unit as _unit
from finalfusion.errors import NonFiniteError, import_extra
from finalfusion.norms import Norms, first_invalid_norm, normalize_rows
from finalfusion.storage.ndarray import NdArray
from finalfusion.subword.indexers import FastTextIndexer
from finalfusion.vocab._words import check_word
from finalfusion.vocab.simple import SimpleVocab
from finalfusion.vocab.subword import FastTextVocab

if TYPE_CHECKING:
    from typing_extensions import Self

    from finalfusion.similarity._base import QueryIndex
    from finalfusion.storage.ndarray import Storage
    from finalfusion.vocab.base import Vocab

__all__ = ["KeyedVectorsMixin", "register_loader"]

F32 = npt.NDArray[np.float32]

#: The readers behind gensim's loading classmethods (``load_word2vec_format``, ``load``), registered by
#: ``finalfusion.compat`` (the format readers sit a layer above the facade, so they register here instead of being
#: imported; ``import finalfusion`` imports them).
_LOADERS: dict[str, Callable[..., Any]] = {}


def register_loader(name: str, loader: Callable[..., Any]) -> None:
    """Make ``loader`` the reader behind the classmethod ``Embeddings.<name>`` (``load_word2vec_format``, ``load``).

    Examples
    --------
    >>> import finalfusion
    >>> _LOADERS["load_word2vec_format"] is finalfusion.compat.load_word2vec_format
    True
    """
    _LOADERS[name] = loader


def _loader(name: str) -> Callable[..., Any]:
    if name not in _LOADERS:  # pragma: no cover - import finalfusion registers them
        raise RuntimeError("finalfusion.compat is not imported: import finalfusion first")
    return _LOADERS[name]


def _gensim_models(what: str) -> Any:
    """``gensim.models``, or :class:`~finalfusion.errors.MissingExtraError` naming the ``gensim`` extra."""
    return import_extra("gensim.models", what, extra="gensim")


class KeyedVectorsMixin(GensimQueriesMixin):
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
        def embedding_with_norm(self, word: str, out: F32 | None = None, default: Any = None) -> Any: ...
        def embedding_batch(self, words: Sequence[str], out: F32 | None = None, *, threads: int | None = None) -> tuple[F32, npt.NDArray[np.bool_]]: ...
        def _query_index(self) -> QueryIndex: ...
        def _drop_query_index(self) -> None: ...

    # -- lookups ---------------------------------------------------------------------
    def _getitem_many(self, keys: Any) -> F32:
        """``emb[list_of_words]``: one row per word (finalfusion's rows); ``KeyError`` for a word without an embedding."""
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

    def _stored_rows(self) -> F32:
        """The word rows as stored (a view of dense storage; reconstructed rows of quantized storage)."""
        n = len(self.vocab)
        storage = self.storage
        if isinstance(storage, NdArray):
            return storage.matrix[:n]
        return storage.rows(np.arange(n))

    @property
    def vectors(self) -> F32:
        """gensim's ``vectors``: the raw word vectors, ``(len(vocab), dims)``, each row times its norm.

        finalfusion files store unit rows and keep the lengths in
        :attr:`~finalfusion.Embeddings.norms`; gensim's raw vectors are the
        rows multiplied by the norms: a new, read-only array computed on
        every access (keep it in a variable rather than indexing
        ``emb.vectors[i]`` in a loop; :meth:`get_vector` gives one row). Without a norms chunk
        the rows are the vectors as stored (a view of dense storage,
        read-only when memory-mapped). Subword rows are not included (as in
        gensim's ``FastTextKeyedVectors``); quantized storage reconstructs
        the rows (a read-only array too).

        Examples
        --------
        >>> import numpy as np
        >>> from finalfusion import Embeddings, NdArray, Norms, SimpleVocab
        >>> emb = Embeddings(NdArray(np.array([[0.6, 0.8], [0, 1]], dtype=np.float32)), SimpleVocab(["a", "b"]), Norms([5.0, 2.0]))
        >>> emb.vectors.round(3).tolist()
        [[3.0, 4.0], [0.0, 2.0]]
        """
        rows = self._stored_rows()
        if self.norms is None and isinstance(self.storage, NdArray):
            return rows
        raw: F32 = rows if self.norms is None else rows * self.norms.norms[:, None]
        raw.flags.writeable = False  # a computed array: writing into it would change nothing, so it fails loudly
        return raw

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

    def get_vector(self, key: str | int, norm: bool = False) -> F32:
        """gensim's ``get_vector``: the raw vector of ``key`` (l2-normalised with ``norm=True``).

        The raw vector of a vocabulary word is its row times its norm
        (gensim's stored vector; ``emb[key]`` and ``emb.embedding(key)`` keep
        finalfusion's unit row). ``key`` may also be an index, as in gensim.
        An unknown word of a subword vocabulary gets what gensim's
        ``FastTextKeyedVectors.get_vector`` gives: the mean of its n-gram
        rows (their normalised sum with ``norm=True``). A word of a model
        vocabulary follows the word rule as ``emb[key]`` does (the mean of the
        model's rows of its tokens; a token string's own row:
        :meth:`~finalfusion.Embeddings.token_embedding`).

        Raises
        ------
        KeyError
            If ``key`` has no embedding (also an unknown word without any
            n-gram, where gensim returns a zero vector).
        TypeError
            If ``key`` is neither a ``str`` nor an ``int``.

        Examples
        --------
        >>> import numpy as np
        >>> from finalfusion import Embeddings, NdArray, Norms, SimpleVocab
        >>> emb = Embeddings(NdArray(np.array([[0.6, 0.8]], dtype=np.float32)), SimpleVocab(["a"]), Norms([5.0]))
        >>> [v.astype(float).round(3).tolist() for v in (emb.get_vector("a"), emb.get_vector(0, norm=True), emb["a"])]
        [[3.0, 4.0], [0.6, 0.8], [0.6, 0.8]]
        """
        if not isinstance(key, (int, np.integer)) or isinstance(key, bool):
            check_word(key)
        vocab = self.vocab
        # A word by the word rule (Vocab.word_rows); an int is an index, as in gensim.
        rows = vocab.word_rows(key) if isinstance(key, str) else self.get_index(key, -1)
        if isinstance(rows, int) and rows < 0:
            raise KeyError(f"Key '{key}' not present")
        if isinstance(rows, int):
            row = self.storage.row(rows)
            v = row if self.norms is None else row * self.norms.norms[rows]
        else:
            found = self.embedding_with_norm(key)  # type: ignore[arg-type]
            if found is None:
                raise KeyError(f"Key '{key}' not present")
            unit_sum, length = found
            # gensim's FastTextKeyedVectors: the mean of the n-gram rows; a model's tokens: their mean already.
            v = unit_sum * np.float32(length / (len(rows) if vocab.pooling == "sum" else 1))
        return _unit(v).astype(np.float32) if norm else np.asarray(v, dtype=np.float32)

    def get_mean_vector(self, keys: Any, weights: Any = None, pre_normalize: bool = True, post_normalize: bool = False, ignore_missing: bool = True) -> F32:
        """gensim's ``get_mean_vector``: the weighted mean of the vectors of ``keys`` (words, indices or vectors).

        Vectors are :meth:`get_vector`'s (unit vectors with
        ``pre_normalize``); vectors given as arrays are used as they are.
        The sum is divided by the sum of the absolute weights, then
        normalised with ``post_normalize``. Keys without an embedding are
        left out, or raise ``KeyError`` with ``ignore_missing=False``.

        Raises
        ------
        ValueError
            If ``keys`` is empty or ``weights`` has another length.
        KeyError
            With ``ignore_missing=False``, for a key without an embedding.

        Examples
        --------
        >>> import numpy as np
        >>> from finalfusion import Embeddings, NdArray, Norms, SimpleVocab
        >>> emb = Embeddings(NdArray(np.eye(2, dtype=np.float32)), SimpleVocab(["a", "b"]), Norms([3.0, 1.0]))
        >>> emb.get_mean_vector(["a", "b", "zz"]).tolist(), emb.get_mean_vector(["a", "b"], pre_normalize=False).tolist()
        ([0.5, 0.5], [1.5, 0.5])
        """
        if len(keys) == 0:
            raise ValueError("cannot compute mean with no input")
        w = np.ones(len(keys), dtype=np.float32) if weights is None else np.asarray(weights, dtype=np.float32)
        if len(keys) != w.shape[0]:
            raise ValueError("keys and weights array must have same number of elements")
        mean = np.zeros(self.dims, dtype=np.float32)
        total = 0.0
        for key, weight in zip(keys, w.tolist(), strict=True):
            if isinstance(key, np.ndarray):
                vec = key
            else:
                try:
                    vec = self.get_vector(key, norm=pre_normalize)
                except KeyError:
                    if ignore_missing:
                        continue
                    raise KeyError(f"Key '{key}' not present in vocabulary") from None
            mean += np.float32(weight) * vec
            total += abs(weight)
        if total > 0:
            mean = (mean / np.float32(total)).astype(np.float32)
        return _unit(mean).astype(np.float32) if post_normalize else mean

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
        """gensim's ``has_index_for``: whether ``key`` is a vocabulary word or index (subword-only words are not).

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
        """gensim's ``get_normed_vectors``: the word rows as unit vectors (zero rows stay zero).

        Examples
        --------
        >>> import numpy as np
        >>> from finalfusion import Embeddings, NdArray, SimpleVocab
        >>> emb = Embeddings(NdArray(np.array([[3, 4], [0, 0]], dtype=np.float32)), SimpleVocab(["a", "b"]))
        >>> emb.get_normed_vectors().astype(float).round(2).tolist()
        [[0.6, 0.8], [0.0, 0.0]]
        """
        return _unit(np.asarray(self._stored_rows(), dtype=np.float32)).astype(np.float32)

    # -- input and output --------------------------------------------------------------
    @classmethod
    def load_word2vec_format(cls, fname: Any, *args: Any, **kwargs: Any) -> Any:
        """gensim's ``KeyedVectors.load_word2vec_format``: :func:`finalfusion.compat.load_word2vec_format` under gensim's classmethod spelling.

        The same arguments as gensim (``fname, fvocab=None, binary=False,
        encoding="utf8", unicode_errors="strict", limit=None,
        datatype=np.float32, no_header=False``) and the vectors kept as stored,
        so every spelling, ``emb[w]`` included, returns gensim's vectors.

        Examples
        --------
        >>> import io
        >>> from finalfusion import Embeddings
        >>> emb = Embeddings.load_word2vec_format(io.BytesIO(b"2 2\\na 3 4\\nb 0 1\\n"))
        >>> emb["a"].tolist(), emb.get_vector("a").tolist()
        ([3.0, 4.0], [3.0, 4.0])
        """
        return _loader("load_word2vec_format")(fname, *args, **kwargs)

    @classmethod
    def load(cls, fname: Any, mmap: str | None = None) -> Any:
        """gensim's ``KeyedVectors.load``: a file written by gensim's ``kv.save(fname)`` (or by :meth:`save`), read without gensim.

        gensim's loader unpickles the file, which runs any code the file
        names; this one reads it as data: only gensim's ``KeyedVectors`` and
        ``FastTextKeyedVectors`` and numpy arrays are recognised, anything
        else is a :class:`~finalfusion.FormatError` naming it, and gensim is
        not needed. Arrays gensim stored aside (``fname.vectors.npy``, for
        vectors over 10 MiB) are read from beside ``fname``. The vectors are
        kept as stored, as by :meth:`load_word2vec_format`, so ``emb[w]``
        and :meth:`get_vector` are gensim's ``kv[w]``; a
        ``FastTextKeyedVectors`` keeps its buckets (a
        :class:`~finalfusion.vocab.FastTextVocab`): an unknown word's
        :meth:`get_vector` is gensim's, its ``emb[w]`` finalfusion's (unit
        length, as finalfusion-python 0.7). Files of every pickle protocol
        gensim writes (2-5) are read. Save finalfusion files with
        :meth:`write` and read them with :func:`~finalfusion.load`.

        Parameters
        ----------
        fname
            The path gensim saved to, or the pickle's contents (``bytes``, a
            binary file object) when everything is in the one file.
        mmap
            ``"r"`` memory-maps word vectors stored aside (gensim's
            ``mmap="r"``); ``None`` reads them. fastText vectors are always
            read (their word vectors are composed from the stored rows).

        Raises
        ------
        FormatError
            (a ``ValueError``) If the file is not a gensim ``KeyedVectors``
            pickle (a whole ``Word2Vec`` model, another object, a gensim 3
            file) or its arrays do not match its words.

        Examples
        --------
        >>> import io, pytest
        >>> models = pytest.importorskip("gensim.models")
        >>> from finalfusion import Embeddings
        >>> kv = models.KeyedVectors(2)
        >>> kv.add_vectors(["a", "b"], [[3, 4], [0, 2]])
        >>> buf = io.BytesIO()
        >>> kv.save(buf)
        >>> emb = Embeddings.load(buf.getvalue())
        >>> emb["a"].tolist(), emb.get_vector("b").tolist(), emb.index_to_key
        ([3.0, 4.0], [0.0, 2.0], ['a', 'b'])
        """
        return _loader("load")(fname, mmap=mmap)

    def save(self, fname_or_handle: Any, *, pickle_protocol: int = 4) -> None:
        """gensim's ``kv.save(fname)``: gensim's own file (a pickled ``KeyedVectors``), which gensim's ``KeyedVectors.load`` reads.

        The vectors are :meth:`to_gensim`'s: the raw vectors (rows times
        norms), a ``FastTextKeyedVectors`` for a fastText vocabulary. gensim
        writes the file (the ``gensim`` extra). Unlike gensim, everything goes
        into the one file (gensim's own choice when it is given a file
        object), so a path is replaced atomically and no
        ``fname.vectors.npy`` is left beside it; gensim's ``separately``,
        ``sep_limit`` and ``ignore`` are therefore not taken, and
        ``KeyedVectors.load(fname, mmap="r")`` has nothing to map. For
        memory-mapping use finalfusion's own format (:meth:`write`).

        Parameters
        ----------
        fname_or_handle
            A path (replaced atomically) or a binary file object.
        pickle_protocol
            The pickle protocol (gensim's default: 4).

        Raises
        ------
        MissingExtraError
            (an ``ImportError``) Without gensim, which writes the file (the ``gensim`` extra).

        Examples
        --------
        >>> import os, tempfile, numpy as np, pytest
        >>> models = pytest.importorskip("gensim.models")
        >>> from finalfusion import Embeddings, NdArray, Norms, SimpleVocab
        >>> emb = Embeddings(NdArray(np.array([[0.6, 0.8], [0, 1]], dtype=np.float32)), SimpleVocab(["a", "b"]), Norms([5.0, 2.0]))
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     emb.save(os.path.join(tmp, "vectors.kv"))
        ...     models.KeyedVectors.load(os.path.join(tmp, "vectors.kv"))["a"].tolist()
        [3.0, 4.0]
        """
        kv = self.to_gensim()
        with atomic_output(fname_or_handle) as out:
            kv.save(out, pickle_protocol=pickle_protocol)

    def save_word2vec_format(
        self,
        fname: str | os.PathLike[str],
        fvocab: str | os.PathLike[str] | None = None,
        binary: bool = False,
        total_vec: int | None = None,
        write_header: bool = True,
        prefix: str = "",
        append: bool = False,
        sort_attr: str = "count",
    ) -> None:
        """gensim's ``save_word2vec_format``: the raw word vectors in word2vec's text or binary format, byte for byte as gensim writes them.

        Words are written in index order (gensim's order for vectors without
        counts, e.g. loaded from word2vec files), each vector as
        :meth:`get_vector` gives it (row times norm). The text format writes
        ``str()`` of each ``float32``; the binary format writes
        ``prefix + word + " "`` and the little-endian ``float32`` values with
        no newline, as gensim does. Subword rows are not written. A path is
        replaced atomically (``append=True`` appends instead).

        Raises
        ------
        ValueError
            If ``fvocab`` is given (there are no counts to store; gensim raises
            too), or a word is empty or contains whitespace (it could not be
            read back; gensim writes it anyway).

        Examples
        --------
        >>> import io, numpy as np
        >>> from finalfusion import Embeddings, NdArray, Norms, SimpleVocab
        >>> emb = Embeddings(NdArray(np.array([[0.6, 0.8], [0, 1]], dtype=np.float32)), SimpleVocab(["a", "b"]), Norms([5.0, 2.0]))
        >>> out = io.BytesIO()
        >>> emb.save_word2vec_format(out)
        >>> out.getvalue().decode()
        '2 2\\na 3.0 4.0\\nb 0.0 2.0\\n'
        """
        if fvocab is not None:
            raise ValueError(f"Cannot store vocabulary with {sort_attr!r} because that attribute does not exist")
        words = self.vocab.words
        bad = next((w for w in words if not w or any(c.isspace() for c in prefix + w)), None)
        if bad is not None:
            raise ValueError(f"the word {bad!r} is empty or contains whitespace: a word2vec file cannot represent it")
        total = len(words) if total_vec is None else total_vec
        header = f"{total} {self.dims}\n".encode() if write_header else b""
        with open(fname, "ab") if append and isinstance(fname, (str, os.PathLike)) else atomic_output(fname) as out:
            out.write(header)
            stored, norms, step = self._stored_rows(), self.norms, 4096
            for lo in range(0, len(words), step):
                rows = np.asarray(stored[lo : lo + step] if norms is None else stored[lo : lo + step] * norms.norms[lo : lo + step, None], dtype="<f4")
                if binary:
                    out.write(b"".join(f"{prefix}{w} ".encode() + r.tobytes() for w, r in zip(words[lo : lo + step], rows, strict=True)))
                else:
                    text = "".join(f"{prefix}{w} {' '.join(str(v) for v in r.astype(np.float32))}\n" for w, r in zip(words[lo : lo + step], rows, strict=True))
                    out.write(text.encode())

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
            (an ``ImportError``) If gensim is not installed (the ``gensim`` extra).
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
            (an ``ImportError``) If gensim is not installed (the ``gensim`` extra).

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
        vectors = np.array(self._stored_rows(), dtype=np.float32, order="C")
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
