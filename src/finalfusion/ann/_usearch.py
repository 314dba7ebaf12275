"""The ``usearch`` backend: HNSW over rows stored as float32 or float16 (``scalar``), metric ``ip``; its file can be
memory-mapped (``view``).

usearch's distance is ``1 - inner product``. usearch trusts its file, so
every file is checked structurally first
(:func:`finalfusion.ann._graphs.check_usearch`), and every error usearch
raises while loading or searching is a :class:`~finalfusion.errors.FormatError`
(:data:`_ERRORS`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Final

import numpy as np

from finalfusion._binary import Buffer
from finalfusion.ann._backends import Param, Rows, Shape, check_params, choice_param, library_errors, register_backend
from finalfusion.ann._graphs import check_usearch, mapped
from finalfusion.ann._hnswlib import hnsw_params
from finalfusion.errors import FormatError, import_extra
from finalfusion.similarity._topk import F32, I64

__all__ = ["SCALARS", "UsearchIndex"]

#: The row types the graph can store (usearch's ``dtype``). Not ``i8``: its distances are not on the inner product's scale,
#: and at 1M clustered rows its recall stopped at 0.88 (docs/performance-queries.md).
SCALARS = ("f32", "f16")
#: What usearch raises for a file it cannot read or an index it cannot search.
_ERRORS: Final = (RuntimeError, ValueError, SystemError, OSError)


def _lib() -> Any:
    return import_extra("usearch.index", "a usearch approximate-neighbour index", extra="ann")


@register_backend
class UsearchIndex:
    """A ``usearch.index.Index`` (``ip``; ``f32`` or ``f16`` rows) whose keys are the row ids."""

    name: ClassVar[str] = "usearch"
    module: ClassVar[str] = "usearch"
    params: ClassVar[Mapping[str, Param]] = {
        **hnsw_params(),
        "scalar": choice_param("f32", SCALARS, "how the graph stores the rows: f32, or f16 (half the memory of the rows)", added=True),
    }
    can_mmap: ClassVar[bool] = True
    search_params: ClassVar[tuple[str, ...]] = ("ef",)

    def __init__(self, index: Any, ef: int) -> None:
        self._index = index
        self.count = int(index.size)
        index.expansion_search = ef
        self._ef = ef

    def set_search(self, name: str, value: int) -> None:
        self._index.expansion_search = value
        self._ef = value

    @classmethod
    def resolve(cls, params: Mapping[str, Any], n: int, dims: int) -> dict[str, Any]:
        return check_params(cls, params)

    @classmethod
    def build(cls, rows: Rows, params: Mapping[str, Any], threads: int) -> UsearchIndex:
        index = _lib().Index(
            ndim=rows.dims,
            metric="ip",
            dtype=params["scalar"],
            connectivity=params["M"],
            expansion_add=params["ef_construction"],
            expansion_search=params["ef"],
        )
        for ids, unit in rows.blocks():
            index.add(ids.astype(np.uint64), unit, threads=threads)
        return cls(index, params["ef"])

    @classmethod
    def _restored(cls, source: str | bytearray, buf: Buffer, shape: Shape, params: Mapping[str, Any], view: bool) -> UsearchIndex:
        """Check ``buf`` (the bytes of ``source``), then restore ``source`` with usearch."""
        scalar = params["scalar"]
        lib = _lib()
        check_usearch(buf, shape, params["M"], scalar)
        with library_errors("usearch", "read its index file", (*_ERRORS, MemoryError)):
            index = lib.Index.restore(source, view=view)
        if index is None:
            raise FormatError("not a usearch index file", chunk="usearch index")
        if index.ndim != shape.dims or str(index.dtype).lower().rsplit(".", 1)[-1] != scalar or "IP" not in str(index.metric):
            raise FormatError(
                "the usearch index has another layout",
                chunk="usearch index",
                expected=f"{shape.dims} dims, {scalar}, ip",
                found=f"{index.ndim} dims, {index.dtype}, {index.metric}",
            )
        return cls(index, params["ef"])

    @classmethod
    def load(cls, path: str, shape: Shape, params: Mapping[str, Any], mmap: bool) -> UsearchIndex:
        with mapped(path) as buf:
            if mmap:  # usearch maps the file itself
                return cls._restored(path, buf, shape, params, True)
            data = bytearray(buf)  # usearch reads the bytes that were checked, not the file again
        return cls._restored(data, data, shape, params, False)

    @classmethod
    def from_bytes(cls, data: bytes, shape: Shape, params: Mapping[str, Any]) -> UsearchIndex:
        return cls._restored(bytearray(data), data, shape, params, False)

    def search(self, queries: F32, k: int, threads: int) -> tuple[I64, F32]:
        with library_errors("usearch", "search", _ERRORS):
            m = self._index.search(queries, k, threads=threads)  # usearch widens its search to k itself
        q = len(queries)
        keys = np.full((q, k), -1, dtype=np.int64)
        dist = np.full((q, k), np.nan, dtype=np.float32)
        counts = getattr(m, "counts", None)
        if counts is None:  # one query row: a ``Matches``, its arrays cut to the rows found
            found = min(k, len(m.keys))
            keys[0, :found] = np.asarray(m.keys[:found], dtype=np.int64)
            dist[0, :found] = np.asarray(m.distances[:found], dtype=np.float32)
        else:  # a ``BatchMatches``: (Q, k) arrays, valid up to each query's count
            got = np.asarray(counts).reshape(q)
            valid = np.arange(k)[None, :] < got[:, None]
            keys[valid] = np.asarray(m.keys, dtype=np.int64).reshape(q, k)[valid]
            dist[valid] = np.asarray(m.distances, dtype=np.float32).reshape(q, k)[valid]
        scores = 1.0 - dist
        return keys, scores

    def save(self, path: str) -> None:
        self._index.save(path)

    def to_bytes(self) -> bytes:
        return bytes(self._index.save())
