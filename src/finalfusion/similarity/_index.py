"""The query index of a storage, and the one of an :class:`~finalfusion.Embeddings` (:class:`QueryIndexCache`)."""

from __future__ import annotations

import contextlib
import threading
import weakref
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from finalfusion.similarity._approx import AnnSearch, as_ann
from finalfusion.similarity._base import QueryIndex
from finalfusion.similarity._dense import DenseIndex
from finalfusion.similarity._protocol import Queryable
from finalfusion.similarity._quantized import QuantizedIndex
from finalfusion.storage.ndarray import NdArray, Storage
from finalfusion.storage.quantized import QuantizedArray

if TYPE_CHECKING:
    from finalfusion.vocab.base import Vocab

__all__ = ["DenseIndex", "QuantizedIndex", "QueryIndex", "QueryIndexCache", "ann_index", "build_index", "clear_cache", "query_index"]


def build_index(storage: Storage, words: Sequence[str]) -> QueryIndex:
    """A fresh query index over the rows of ``storage`` that belong to ``words``.

    Raises
    ------
    TypeError
        If the storage is neither dense nor quantized.

    Examples
    --------
    >>> import numpy as np
    >>> type(build_index(NdArray(np.eye(2, dtype=np.float32)), ["a", "b"])).__name__
    'DenseIndex'
    """
    if isinstance(storage, NdArray):
        return DenseIndex(storage, words)
    if isinstance(storage, QuantizedArray):
        return QuantizedIndex(storage, words)
    raise TypeError(f"similarity queries need NdArray or QuantizedArray storage, not {type(storage).__name__}")


class QueryIndexCache:
    """The similarity index as an attribute, built on first use under a lock: a base class of :class:`~finalfusion.Embeddings`.

    The index is a cache of one object: never pickled or copied
    (``finalfusion._pickling``), dropped by :func:`clear_cache`. The
    approximate-neighbour index of :meth:`set_index` is the user's choice,
    kept (and pickled as its own type decides); the indexes already checked
    against these embeddings are remembered (weakly) so that a query does
    not check again, and forgotten by :func:`clear_cache`.
    """

    if TYPE_CHECKING:  # provided by Embeddings

        @property
        def storage(self) -> Storage: ...
        @property
        def vocab(self) -> Vocab: ...

    def _reset_query_index(self) -> None:
        self._query: QueryIndex | None = None
        self._query_lock = threading.Lock()
        self._ann_checked: weakref.WeakValueDictionary[int, Any] = weakref.WeakValueDictionary()
        if "_ann" not in self.__dict__:  # kept across unpickling (set_index survives a pickle)
            self._ann: AnnSearch | None = None

    def set_index(self, index: Any) -> None:
        """Make ``index`` the default of every similarity query (``index=None`` of the query methods).

        Parameters
        ----------
        index
            An index from :func:`finalfusion.ann.build_index` or
            :func:`finalfusion.ann.load_index`, or ``None`` to query
            exactly again. A single call can still choose: ``index=False``
            forces the exact scan, ``index=other`` uses another index.

        Raises
        ------
        StaleIndexError
            (a ``ValueError``) If the index was built for other embeddings
            (other rows, or a file that changed since).
        TypeError
            If ``index`` is not an index.

        Examples
        --------
        >>> import numpy as np
        >>> from finalfusion import Embeddings
        >>> from finalfusion.vocab import SimpleVocab
        >>> emb = Embeddings(NdArray(np.eye(2, dtype=np.float32)), SimpleVocab(["a", "b"]))
        >>> emb.set_index(None)  # no index: exact queries
        >>> emb.set_index("hnsw")
        Traceback (most recent call last):
        ...
        TypeError: index= takes an index from finalfusion.ann.build_index or load_index (or None, or False), not str

        With ``finalfusion[ann]`` installed::

            emb.set_index(finalfusion.ann.build_index(emb))
            emb.word_similarity("a")               # through the index
            emb.word_similarity("a", index=False)  # the exact scan
        """
        self._ann = None if index is None else self._checked_ann(index)

    def _checked_ann(self, index: Any) -> AnnSearch:
        """``index``, checked against these embeddings once (then remembered)."""
        checked: AnnSearch | None = self._ann_checked.get(id(index))
        again = checked is index  # checked before (so it is an index): the one dict probe per query
        if again and checked is not None:
            return checked
        ann = as_ann(index)
        key = id(ann)
        if self._ann_checked.get(key) is not ann:
            ann.check(self)
            with contextlib.suppress(TypeError):  # not weakly referenceable: checked on every query
                self._ann_checked[key] = ann
        return ann

    def _ann_index(self, index: Any) -> AnnSearch | None:
        """The index a query with ``index=`` uses: ``None`` for the exact scan."""
        if index is False:
            return None
        if index is None:
            return self._ann
        return self._checked_ann(index)

    def _query_index(self) -> QueryIndex:
        """The similarity index of these embeddings, built on first use (see :mod:`finalfusion.similarity`)."""
        index = self._query
        if index is None:
            with self._query_lock:
                index = self._query
                if index is None:
                    index = self._query = build_index(self.storage, self.vocab.words)
        return index

    def _drop_query_index(self) -> None:
        """Forget the similarity index (after an in-place change of the storage)."""
        with self._query_lock:
            self._query = None
            self._ann_checked = weakref.WeakValueDictionary()


def query_index(emb: Queryable) -> QueryIndex:
    """The query index of ``emb``: an attribute of the embeddings, built on first use."""
    return emb._query_index()


def ann_index(emb: Queryable, index: Any) -> AnnSearch | None:
    """The approximate-neighbour index a query of ``emb`` uses for ``index=`` (``None``: the exact scan)."""
    ann: AnnSearch | None = emb._ann_index(index)
    return ann


def clear_cache(emb: Queryable) -> None:
    """Forget the cached row norms, word ranks and code layout of ``emb``.

    Needed only after modifying the storage matrix in place; the next query
    builds them again.

    Examples
    --------
    >>> import numpy as np
    >>> from finalfusion import Embeddings
    >>> from finalfusion.vocab import SimpleVocab
    >>> emb = Embeddings(NdArray(np.eye(2, dtype=np.float32)), SimpleVocab(["a", "b"]))
    >>> emb.storage.matrix[0] = [3.0, 4.0]
    >>> clear_cache(emb)
    >>> round(emb.embedding_similarity([1.0, 0.0], k=1)[0].similarity, 3)
    0.6
    """
    emb._drop_query_index()
