"""The ``voyager`` backend (Spotify's HNSW): inner-product space, float32 storage.

voyager reads its file into memory (it cannot memory-map); its distance is
``1 - inner product``. voyager trusts its file, so the bytes are checked
structurally first (:func:`finalfusion.ann._graphs.check_voyager`) and
voyager reads those same checked bytes; every error it raises while loading
or searching is a :class:`~finalfusion.errors.FormatError` (:data:`_ERRORS`).
"""

from __future__ import annotations

import io
from collections.abc import Mapping
from typing import Any, ClassVar, Final

import numpy as np

from finalfusion.ann._backends import Param, Rows, Shape, check_params, library_errors, register_backend
from finalfusion.ann._graphs import check_voyager, mapped
from finalfusion.ann._hnswlib import hnsw_params
from finalfusion.errors import import_extra
from finalfusion.similarity._topk import F32, I64

__all__ = ["VoyagerIndex"]


#: What voyager raises for a file it cannot read or an index it cannot search (and its ``RecallError``).
_ERRORS: Final = (RuntimeError, ValueError, SystemError, OSError)


def _lib() -> Any:
    return import_extra("voyager", "a voyager approximate-neighbour index", extra="ann")


@register_backend
class VoyagerIndex:
    """A ``voyager.Index`` (``Space.InnerProduct``, ``Float32``) whose ids are the row ids."""

    name: ClassVar[str] = "voyager"
    module: ClassVar[str] = "voyager"
    params: ClassVar[Mapping[str, Param]] = hnsw_params()
    can_mmap: ClassVar[bool] = False
    search_params: ClassVar[tuple[str, ...]] = ("ef",)

    def __init__(self, index: Any, ef: int) -> None:
        self._index = index
        self.count = int(index.num_elements)
        self._ef = ef

    def set_search(self, name: str, value: int) -> None:
        self._ef = value

    @classmethod
    def resolve(cls, params: Mapping[str, Any], n: int, dims: int) -> dict[str, Any]:
        return check_params(cls, params)

    @classmethod
    def build(cls, rows: Rows, params: Mapping[str, Any], threads: int) -> VoyagerIndex:
        lib = _lib()
        index = lib.Index(
            lib.Space.InnerProduct,
            num_dimensions=rows.dims,
            M=params["M"],
            ef_construction=params["ef_construction"],
            random_seed=1,
            max_elements=max(1, rows.n),
            storage_data_type=lib.StorageDataType.Float32,
        )
        for ids, unit in rows.blocks():
            index.add_items(unit, ids.tolist(), num_threads=threads)
        return cls(index, params["ef"])

    @classmethod
    def load(cls, path: str, shape: Shape, params: Mapping[str, Any], mmap: bool) -> VoyagerIndex:
        with mapped(path) as buf:
            data = bytes(buf)  # a private copy: a mapped file could change between the check and voyager's read
        return cls._checked(data, shape, params)

    @classmethod
    def from_bytes(cls, data: bytes, shape: Shape, params: Mapping[str, Any]) -> VoyagerIndex:
        return cls._checked(data, shape, params)

    @classmethod
    def _checked(cls, buf: bytes, shape: Shape, params: Mapping[str, Any]) -> VoyagerIndex:
        """Check ``buf``, then give voyager those bytes (never the file again, which may have changed since)."""
        lib = _lib()
        check_voyager(buf, shape, params["M"])
        with library_errors("voyager", "read its index file", (*_ERRORS, MemoryError)):
            return cls(lib.Index.load(io.BytesIO(buf)), params["ef"])

    def search(self, queries: F32, k: int, threads: int) -> tuple[I64, F32]:
        recall_error = _lib().RecallError
        ef = max(self._ef, k)
        with library_errors("voyager", "search", (*_ERRORS, recall_error)):
            while True:
                try:
                    ids, dist = self._index.query(queries, k=k, num_threads=threads, query_ef=ef)
                    break
                except recall_error:  # fewer than k found: search wider, at most every row
                    if ef >= self.count:
                        raise
                    ef = min(self.count, 4 * ef)
        return np.asarray(ids, dtype=np.int64).reshape(len(queries), k), (1.0 - np.asarray(dist, dtype=np.float32)).reshape(len(queries), k)

    def save(self, path: str) -> None:
        self._index.save(path)

    def to_bytes(self) -> bytes:
        data: bytes = self._index.as_bytes()
        return data
