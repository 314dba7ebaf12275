"""The ``hnswlib`` backend: an HNSW graph over the float32 rows, inner-product space.

hnswlib reads its file into memory (it cannot memory-map); its distance is
``1 - inner product``. hnswlib trusts its file, so every file is checked
structurally first (:func:`finalfusion.ann._graphs.check_hnswlib`), and
every error hnswlib raises while loading or searching is a
:class:`~finalfusion.errors.FormatError` (:data:`_ERRORS`).
"""

from __future__ import annotations

import os
import tempfile
import threading
from collections.abc import Mapping
from typing import Any, ClassVar, Final

import numpy as np

from finalfusion.ann._backends import (
    DEFAULT_EF,
    DEFAULT_EF_CONSTRUCTION,
    DEFAULT_M,
    Param,
    Rows,
    Shape,
    check_params,
    int_param,
    library_errors,
    register_backend,
)
from finalfusion.ann._graphs import check_hnswlib, mapped
from finalfusion.errors import import_extra
from finalfusion.similarity._topk import F32, I64

__all__ = ["HnswlibIndex", "hnsw_params"]

#: Largest graph parameter accepted (M, ef_construction, ef).
_BIG: Final = 1 << 16
#: What hnswlib raises for a file it cannot read or an index it cannot search.
_ERRORS: Final = (RuntimeError, ValueError, SystemError)


def hnsw_params() -> dict[str, Param]:
    """The HNSW parameters shared by the graph backends (same names, same defaults)."""
    return {
        "M": int_param(DEFAULT_M, 2, 2048, "links per node: more is better recall, more memory and a slower build"),
        "ef_construction": int_param(DEFAULT_EF_CONSTRUCTION, 1, _BIG, "candidates kept while building: more is a better graph and a slower build"),
        "ef": int_param(DEFAULT_EF, 1, _BIG, "candidates kept while searching (at least k): more is better recall and slower queries"),
    }


def _lib() -> Any:
    return import_extra("hnswlib", "an hnswlib approximate-neighbour index", extra="ann")


@register_backend
class HnswlibIndex:
    """An ``hnswlib.Index`` (space ``ip``) whose labels are the row ids."""

    name: ClassVar[str] = "hnswlib"
    module: ClassVar[str] = "hnswlib"
    params: ClassVar[Mapping[str, Param]] = hnsw_params()
    can_mmap: ClassVar[bool] = False
    search_params: ClassVar[tuple[str, ...]] = ("ef",)

    def __init__(self, index: Any, ef: int) -> None:
        self._index = index
        self.count = int(index.element_count)
        self._ef = ef
        self._lock = threading.Lock()
        index.set_ef(ef)

    def set_search(self, name: str, value: int) -> None:
        with self._lock:
            self._index.set_ef(value)
            self._ef = value

    @classmethod
    def resolve(cls, params: Mapping[str, Any], n: int, dims: int) -> dict[str, Any]:
        return check_params(cls, params)

    @classmethod
    def build(cls, rows: Rows, params: Mapping[str, Any], threads: int) -> HnswlibIndex:
        index = _lib().Index(space="ip", dim=rows.dims)
        index.init_index(max_elements=max(1, rows.n), ef_construction=params["ef_construction"], M=params["M"], random_seed=100)
        for ids, unit in rows.blocks():
            index.add_items(unit, ids.astype(np.uint64), num_threads=threads)
        return cls(index, params["ef"])

    @classmethod
    def load(cls, path: str, shape: Shape, params: Mapping[str, Any], mmap: bool) -> HnswlibIndex:
        lib = _lib()  # a missing library first: the file is checked only for a library that can read it
        with mapped(path) as buf:
            check_hnswlib(buf, shape, params["M"])
        with library_errors("hnswlib", "read its index file", (*_ERRORS, MemoryError)):
            index = lib.Index(space="ip", dim=shape.dims)
            index.load_index(path)
            return cls(index, params["ef"])

    @classmethod
    def from_bytes(cls, data: bytes, shape: Shape, params: Mapping[str, Any]) -> HnswlibIndex:
        fd, path = tempfile.mkstemp(suffix=".hnswlib")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            return cls.load(path, shape, params, False)
        finally:
            os.unlink(path)

    def search(self, queries: F32, k: int, threads: int) -> tuple[I64, F32]:
        if k > self._ef:  # hnswlib needs ef >= k; raised for all later searches (never lowered)
            with self._lock:
                if k > self._ef:
                    self._index.set_ef(k)
                    self._ef = k
        with library_errors("hnswlib", "search", _ERRORS):
            try:
                labels, dist = self._index.knn_query(queries, k=k, num_threads=threads)
            except RuntimeError:  # fewer than k reachable: ask again with every row as a candidate
                with self._lock:
                    self._index.set_ef(max(self._ef, self.count))
                    try:
                        labels, dist = self._index.knn_query(queries, k=k, num_threads=threads)
                    finally:
                        self._index.set_ef(self._ef)
        return labels.astype(np.int64), (1.0 - dist).astype(np.float32)

    def save(self, path: str) -> None:
        self._index.save_index(path)

    def to_bytes(self) -> bytes:
        fd, path = tempfile.mkstemp(suffix=".hnswlib")
        os.close(fd)
        try:
            self.save(path)
            with open(path, "rb") as f:
                return f.read()
        finally:
            os.unlink(path)
