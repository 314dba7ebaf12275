"""The query index of a storage, and the one of an :class:`~finalfusion.Embeddings` (:class:`QueryIndexCache`)."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING

from finalfusion.similarity._base import QueryIndex
from finalfusion.similarity._dense import DenseIndex
from finalfusion.similarity._protocol import Queryable
from finalfusion.similarity._quantized import QuantizedIndex
from finalfusion.storage.ndarray import NdArray, Storage
from finalfusion.storage.quantized import QuantizedArray

if TYPE_CHECKING:
    from finalfusion.vocab.base import Vocab

__all__ = ["DenseIndex", "QuantizedIndex", "QueryIndex", "QueryIndexCache", "build_index", "clear_cache", "query_index"]


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
    (``finalfusion._pickling``), dropped by :func:`clear_cache`.
    """

    if TYPE_CHECKING:  # provided by Embeddings

        @property
        def storage(self) -> Storage: ...
        @property
        def vocab(self) -> Vocab: ...

    def _reset_query_index(self) -> None:
        self._query: QueryIndex | None = None
        self._query_lock = threading.Lock()

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


def query_index(emb: Queryable) -> QueryIndex:
    """The query index of ``emb``: an attribute of the embeddings, built on first use."""
    return emb._query_index()


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
