"""What the queries need of embeddings: a small protocol instead of the facade.

The query functions (``_queries``, ``evaluation``, ``_index``) and
``finalfusion._batch`` are typed against :class:`Queryable`, which
:class:`~finalfusion.Embeddings` satisfies. They never import the facade,
so the import graph stays free of cycles, type-only imports included.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from finalfusion.similarity._base import QueryIndex
from finalfusion.storage.ndarray import Storage
from finalfusion.vocab.base import Vocab

__all__ = ["Queryable"]


class Queryable(Protocol):
    """Embeddings as the queries see them: the chunks, two lookups and the cached query index."""

    @property
    def vocab(self) -> Vocab:
        """The vocabulary chunk."""

    @property
    def storage(self) -> Storage:
        """The storage chunk."""

    def embedding(self, word: str, out: npt.NDArray[np.float32] | None = None, default: Any = None) -> Any:
        """The embedding of ``word``, or ``default``."""

    def embedding_batch(
        self, words: Sequence[str], out: npt.NDArray[np.float32] | None = None, *, threads: int | None = None
    ) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.bool_]]:
        """The embeddings of many words and the mask of those found."""

    def _query_index(self) -> QueryIndex:
        """The similarity index, built on first use."""

    def _drop_query_index(self) -> None:
        """Forget the similarity index."""

    def _ann_index(self, index: Any) -> Any:
        """The approximate-neighbour index for ``index=`` (``None``: exact)."""
