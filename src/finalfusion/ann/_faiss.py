"""The faiss backends: ``faiss-ivf`` (``IndexIVFFlat``), ``faiss-hnsw`` (``IndexHNSWFlat``) and ``faiss-ivfpq`` (``IndexIVFPQ``), inner product.

All are wrapped so that faiss's ids are the row ids (``IndexIDMap`` for
HNSW, the inverted lists' own ids for IVF). All load memory-mapped:
``IO_FLAG_MMAP_IFC`` maps the flat vectors of HNSW, ``IO_FLAG_MMAP`` the
inverted lists of IVF. IVF-Flat trains its coarse cells (k-means) on a
random sample of the unit rows and keeps every row exactly in its cell's
list, sized once (see :meth:`FaissIVFIndex.build`), so the index holds one
copy of the rows and little else. IVF-PQ trains its own coarse quantizer and
product quantizer on a random sample of the unit rows, or with
``reuse_pq=True`` (quantized storage, 8-bit codes) takes the embeddings' own
quantizer and codes and trains only the coarse cells (see
:meth:`FaissIVFPQIndex._build_reusing`); its scores are the PQ estimates,
not the exact cosines (``rerank=`` in the queries re-scores them). faiss's thread count is a process-wide setting:
a build sets it for its duration and restores it.

faiss checks its own files as it reads them (``validate_HNSW``, list
sizes, ids); an IVF file must hold its inverted lists itself (no ``ilod``
lists naming another file, :func:`_inline_lists`), and an IVF index loaded
memory-mapped is written with its lists copied inline
(:func:`_with_inline_lists`); a loaded index is also checked for its kind (the index
classes this backend builds), dims, metric and build parameters, its
results for row ids the embeddings have, and every error faiss raises
while loading or searching is a :class:`~finalfusion.errors.FormatError`
(:data:`_ERRORS`).
"""

from __future__ import annotations

import contextlib
import math
import os
from collections.abc import Iterator, Mapping
from typing import Any, ClassVar, Final, cast

import numpy as np

from finalfusion._isolated import call_isolated
from finalfusion.ann._backends import Param, Rows, Shape, bool_param, check_params, int_param, library_errors, register_backend
from finalfusion.ann._hnswlib import hnsw_params
from finalfusion.errors import FormatError, import_extra
from finalfusion.similarity._topk import F32, I64

__all__ = ["FaissHNSWIndex", "FaissIVFIndex", "FaissIVFPQIndex"]

#: Rows sampled to train IVF-PQ when ``train_rows`` is not given.
DEFAULT_TRAIN_ROWS: Final = 100_000
#: Training rows per coarse cell of IVF-Flat when ``train_rows`` is not given (faiss asks for at least 39).
TRAIN_ROWS_PER_CELL: Final = 50
#: IVF-Flat without ``nprobe``: at least this many cells searched per query ...
MIN_NPROBE: Final = 5
#: ... and enough of them to hold about this many rows (recall@10 0.97 at 1M and 2M clustered rows, docs/performance-queries.md).
NPROBE_ROWS: Final = 1_250
#: What faiss raises for a file it cannot read or an index it cannot search.
_ERRORS: Final = (RuntimeError, ValueError, SystemError)
#: The wrapper of every search (it holds no state: one instance serves every search, in any thread).
_SEARCH_ERRORS: Final = library_errors("faiss", "search", _ERRORS)


def _lib() -> Any:
    return import_extra("faiss", "a faiss approximate-neighbour index", extra="ann")


@contextlib.contextmanager
def _omp_threads(faiss: Any, threads: int) -> Iterator[None]:
    old = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(threads)
    try:
        yield
    finally:
        faiss.omp_set_num_threads(old)


def _inline_lists(faiss: Any, index: Any) -> None:
    """Refuse an IVF index whose inverted lists are not in its own file.

    faiss's ``ilod`` lists (``OnDiskInvertedLists``) name another file: read
    without ``IO_FLAG_MMAP`` faiss opens that path (read-write) and maps it,
    with the flag it maps nothing and the first search reads through a null
    pointer. The lists finalfusion writes are inline (``ilar``): read with
    ``IO_FLAG_MMAP`` they are mapped from the index file itself, which is
    how :meth:`_FaissBase.load` reads an IVF file first, so that no named
    file is ever opened.
    """
    ivf = faiss.try_extract_index_ivf(index)
    if ivf is None:
        return
    lists = faiss.downcast_InvertedLists(ivf.invlists)
    if isinstance(lists, faiss.ArrayInvertedLists) or (isinstance(lists, faiss.OnDiskInvertedLists) and lists.ptr is not None and not lists.filename):
        return
    where = f"a file of their own ({lists.filename!r})" if isinstance(lists, faiss.OnDiskInvertedLists) else "elsewhere"
    raise FormatError(
        "the IVF index's inverted lists are not in its file",
        chunk="faiss index",
        expected="inverted lists stored in the index file (faiss ilar)",
        found=f"{type(lists).__name__} kept in {where}",
    )


def _with_inline_lists(faiss: Any, index: Any) -> Any:
    """``index``, or for an IVF index loaded memory-mapped a copy with its inverted lists in memory, to be written.

    faiss would write mapped lists as ``ilod`` (lists in another file, here
    none), so the saved file would hold no rows and be refused by
    :func:`_inline_lists` on loading.
    """
    ivf = faiss.try_extract_index_ivf(index)
    if ivf is None or isinstance(faiss.downcast_InvertedLists(ivf.invlists), faiss.ArrayInvertedLists):
        return index
    mapped = ivf.invlists
    copy = faiss.deserialize_index(faiss.serialize_index(index), faiss.IO_FLAG_SKIP_IVF_DATA)  # no lists read: a null-mapped ilod
    lists = faiss.ArrayInvertedLists(mapped.nlist, mapped.code_size)
    for cell in range(mapped.nlist):
        size = mapped.list_size(cell)
        if size:
            lists.add_entries(cell, size, mapped.get_ids(cell), mapped.get_codes(cell))
    faiss.try_extract_index_ivf(copy).replace_invlists(lists, True)
    lists.this.disown()
    return copy


#: Address space faiss may take to read a file of ``n`` bytes in the probe: PROBE_FACTOR x n + PROBE_BASE.
PROBE_FACTOR: Final = 4
PROBE_BASE: Final = 256 << 20
#: Seconds the probe may take: PROBE_SECONDS + one per 50 MB of file.
PROBE_SECONDS: float = 60.0


def _probe(path: str | None, data: bytes | None, size: int, flags: int) -> None:
    """Make faiss read the index (the file at ``path`` or ``data``) in a child process that may take only
    ``PROBE_FACTOR`` times its size (plus ``PROBE_BASE``) of memory: a :class:`FormatError` if it cannot.

    faiss sizes its arrays from the counts in the file before it reads them: a 1.5 KB IVF file whose
    inverted-list sizes were changed made it allocate and zero 18 GB (found by the fuzzer). In the child such
    an allocation fails; a file faiss reads there within the bound holds what it declares, so reading it here
    costs what it holds.
    """
    call_isolated(
        __name__,
        "_probe_child",
        [path, flags],
        data=data,
        seconds=PROBE_SECONDS + size / 50e6,
        max_payload=0,
        what="faiss index",
        memory=PROBE_FACTOR * size + PROBE_BASE,
        imports=("faiss",),
    )


def _probe_child(path: str | None, flags: int, data: bytes | None = None) -> tuple[dict[str, Any], bytes]:  # pragma: no cover - the child
    faiss = _lib()
    with library_errors("faiss", "read its index file", (*_ERRORS, MemoryError)):
        if path is not None:
            faiss.read_index(path, flags)
        else:
            faiss.deserialize_index(np.frombuffer(cast(bytes, data), dtype=np.uint8))
    return {}, b""


class _FaissBase:
    """What both faiss backends share: the search call, saving, serialising."""

    name: ClassVar[str]
    module: ClassVar[str] = "faiss"
    can_mmap: ClassVar[bool] = True
    #: An IVF index: its file holds inverted lists (read memory-mapped first, see :func:`_inline_lists`).
    _ivf: ClassVar[bool] = True

    def __init__(self, index: Any, params: Mapping[str, Any], n: int | None = None) -> None:
        self._index = index
        self.count = int(index.ntotal)
        #: Row ids of a loaded index are checked against this (the embeddings' rows) in every result.
        self._n = n
        self._params = dict(params)
        #: The parameters the index was built with (IVF-PQ reusing a quantizer: its ``m`` and ``nbits``).
        self.resolved_params = self._params
        #: faiss ``SearchParameters`` per ``k``, made once (a SWIG object costs more than a small search's own work).
        self._searching: dict[int, Any] = {}
        self._d = int(index.d)
        #: faiss's ``swig_ptr``: the address of a numpy array, as its search takes it.
        self._ptr = _lib().swig_ptr

    def _search_params(self, faiss: Any, k: int) -> Any:
        raise NotImplementedError

    def set_search(self, name: str, value: int) -> None:
        self._params = {**self._params, name: value}  # read when the next search makes its SearchParameters
        self._searching = {}

    def _search_into(self, n: int, queries: F32, k: int, scores: F32, ids: I64) -> None:
        """faiss's own search (``search_c``) of ``n`` query rows into ``scores`` and ``ids`` (``(n, k)`` buffers).

        What faiss's Python ``index.search`` does without its wrapper's checks and copies (its ``search`` on
        one query spends about as long in Python as in the search itself): the queries are C-contiguous
        float32 rows of the index's dims, checked here because faiss reads them through a raw pointer.
        """
        if queries.dtype != np.float32 or not queries.flags.c_contiguous or queries.size != n * self._d:
            raise ValueError(f"faiss search: expected {n} C-contiguous float32 rows of {self._d} dims, not {queries.dtype} of shape {queries.shape}")
        params = self._searching.get(k)
        if params is None:
            params = self._searching[k] = self._search_params(_lib(), k)
        ptr = self._ptr
        with _SEARCH_ERRORS:
            self._index.search_c(n, ptr(queries), k, ptr(scores), ptr(ids), params)

    def _check_ids(self, top: int) -> None:
        """Refuse a result holding the row id ``top`` (its largest) when a loaded index's embeddings have no such row."""
        if self._n is not None and top >= self._n:
            raise FormatError("the index holds a row id the embeddings do not have", chunk="faiss index", expected=f"ids < {self._n}", found=top)

    def search(self, queries: F32, k: int, threads: int) -> tuple[I64, F32]:
        queries = np.ascontiguousarray(queries, dtype=np.float32)
        n = len(queries)
        scores: F32 = np.empty((n, k), dtype=np.float32)
        ids: I64 = np.empty((n, k), dtype=np.int64)
        self._search_into(n, queries, k, scores, ids)
        if n == 1:  # one query's few ids as Python ints: a numpy reduction right after faiss's search costs more
            found = ids[0].tolist()
            top, low = (max(found), min(found)) if found else (-1, 0)
        else:
            top, low = (int(ids.max()), int(ids.min())) if ids.size else (-1, 0)
        self._check_ids(top)
        if low < 0:  # fewer rows found than asked for
            scores[ids < 0] = np.nan
        return ids, scores

    def search_one(self, query: F32, k: int) -> list[int]:
        """The ``k`` row ids (``-1`` for none) faiss finds for one unit query of shape ``(dims,)``, as Python ints (the scores are not kept)."""
        ids: I64 = np.empty(k, dtype=np.int64)
        self._search_into(1, np.ascontiguousarray(query, dtype=np.float32), k, np.empty(k, dtype=np.float32), ids)
        found: list[int] = ids.tolist()
        if found:
            self._check_ids(max(found))
        return found

    def save(self, path: str) -> None:
        faiss = _lib()
        faiss.write_index(_with_inline_lists(faiss, self._index), path)

    def to_bytes(self) -> bytes:
        faiss = _lib()
        return bytes(faiss.serialize_index(_with_inline_lists(faiss, self._index)))

    @classmethod
    def _flags(cls, faiss: Any) -> int:
        raise NotImplementedError

    @classmethod
    def _kind(cls, faiss: Any, index: Any, params: Mapping[str, Any]) -> str | None:
        """``None`` if ``index`` is what this backend builds with ``params``, else what it is instead."""
        raise NotImplementedError

    @classmethod
    def load(cls, path: str, shape: Shape, params: Mapping[str, Any], mmap: bool) -> Any:
        """The index in ``path``; an IVF file is read memory-mapped first (see :func:`_inline_lists`), then again if ``mmap`` is false.

        faiss is first made to read the file in a child process whose memory is bounded (:func:`_probe`).
        """
        faiss = _lib()
        _probe(path, None, os.path.getsize(path), cls._flags(faiss) if mmap or cls._ivf else 0)
        with library_errors("faiss", "read its index file", (*_ERRORS, MemoryError)):
            index = faiss.read_index(path, cls._flags(faiss) if mmap or cls._ivf else 0)
        _inline_lists(faiss, index)
        if cls._ivf and not mmap:
            with library_errors("faiss", "read its index file", (*_ERRORS, MemoryError)):
                index = faiss.read_index(path, 0)
        return cls._checked(index, shape, params)

    @classmethod
    def from_bytes(cls, data: bytes, shape: Shape, params: Mapping[str, Any]) -> Any:
        faiss = _lib()
        _probe(None, data, len(data), 0)
        with library_errors("faiss", "read its index file", (*_ERRORS, MemoryError)):
            index = faiss.deserialize_index(np.frombuffer(data, dtype=np.uint8))
        return cls._checked(index, shape, params)

    @classmethod
    def _checked(cls, index: Any, shape: Shape, params: Mapping[str, Any]) -> Any:
        faiss = _lib()
        _inline_lists(faiss, index)
        other = cls._kind(faiss, index, params)
        if other is not None:
            raise FormatError(f"the file is not a {cls.name} index", chunk="faiss index", expected=f"the index a {cls.name} build writes", found=other)
        if index.d != shape.dims or index.metric_type != faiss.METRIC_INNER_PRODUCT:
            raise FormatError(
                f"the {cls.name} index has another layout",
                chunk="faiss index",
                expected=f"{shape.dims} dims, inner product",
                found=f"{index.d} dims, metric {index.metric_type}",
            )
        return cls(index, params, shape.n)


def _name(faiss: Any, index: Any) -> str:
    return type(faiss.downcast_index(index)).__name__


@register_backend
class FaissHNSWIndex(_FaissBase):
    """``IndexIDMap(IndexHNSWFlat(d, M, METRIC_INNER_PRODUCT))``."""

    name: ClassVar[str] = "faiss-hnsw"
    _ivf: ClassVar[bool] = False
    search_params: ClassVar[tuple[str, ...]] = ("ef",)
    params: ClassVar[Mapping[str, Param]] = hnsw_params()

    @classmethod
    def _flags(cls, faiss: Any) -> int:
        return int(faiss.IO_FLAG_MMAP_IFC)

    @classmethod
    def _kind(cls, faiss: Any, index: Any, params: Mapping[str, Any]) -> str | None:
        outer = _name(faiss, index)
        inner = _name(faiss, index.index) if outer == "IndexIDMap" else None
        if inner != "IndexHNSWFlat":
            return outer if inner is None else f"{outer}({inner})"
        m = faiss.downcast_index(index.index).hnsw.nb_neighbors(1)
        return None if m == params["M"] else f"IndexHNSWFlat with M={m}, not {params['M']}"

    @classmethod
    def resolve(cls, params: Mapping[str, Any], n: int, dims: int) -> dict[str, Any]:
        return check_params(cls, params)

    @classmethod
    def build(cls, rows: Rows, params: Mapping[str, Any], threads: int) -> FaissHNSWIndex:
        faiss = _lib()
        inner = faiss.IndexHNSWFlat(rows.dims, params["M"], faiss.METRIC_INNER_PRODUCT)
        inner.hnsw.efConstruction = params["ef_construction"]
        index = faiss.IndexIDMap(inner)
        with _omp_threads(faiss, threads):
            for ids, unit in rows.blocks():
                index.add_with_ids(unit, ids)
        return cls(index, params)

    def _search_params(self, faiss: Any, k: int) -> Any:
        return faiss.SearchParametersHNSW(efSearch=max(self._params["ef"], k))


def _default_nlist(n: int) -> int:
    """Coarse cells by default: 4 sqrt(rows), at most rows / 39 (faiss's fewest training rows per cell), at least 1."""
    return max(1, min(round(4 * math.sqrt(n)), n // 39))


def _nlist_param() -> Param:
    return int_param(None, 1, 1 << 24, "coarse cells (default: 4 sqrt(rows), at most rows / 39)")


@register_backend
class FaissIVFIndex(_FaissBase):
    """``IndexIVFFlat(IndexFlatIP(d), d, nlist, METRIC_INNER_PRODUCT)``: k-means cells, every row kept exactly."""

    name: ClassVar[str] = "faiss-ivf"
    search_params: ClassVar[tuple[str, ...]] = ("nprobe",)
    params: ClassVar[Mapping[str, Param]] = {
        "nlist": _nlist_param(),
        "nprobe": int_param(
            None,
            1,
            1 << 24,
            f"cells searched per query: more is better recall and slower queries (default: {MIN_NPROBE}, or more to reach {NPROBE_ROWS:,} rows)",
        ),
        "train_rows": int_param(None, 1, 1 << 40, f"rows sampled to train the cells (default: {TRAIN_ROWS_PER_CELL} per cell, at most all rows)"),
        "seed": int_param(0, 0, (1 << 31) - 1, "random seed of the training sample and the k-means"),
    }

    @classmethod
    def _flags(cls, faiss: Any) -> int:
        return int(faiss.IO_FLAG_MMAP)

    @classmethod
    def _kind(cls, faiss: Any, index: Any, params: Mapping[str, Any]) -> str | None:
        if _name(faiss, index) != "IndexIVFFlat":
            return _name(faiss, index)
        return None if index.nlist == params["nlist"] else f"IndexIVFFlat with nlist={index.nlist}, not {params['nlist']}"

    @classmethod
    def resolve(cls, params: Mapping[str, Any], n: int, dims: int) -> dict[str, Any]:
        """``params`` checked, with ``nlist`` and ``train_rows`` worked out for ``n`` rows."""
        out = check_params(cls, params)
        if out["nlist"] is None:
            out["nlist"] = _default_nlist(n)
        if out["train_rows"] is None:
            out["train_rows"] = min(n, TRAIN_ROWS_PER_CELL * out["nlist"])
        if out["nprobe"] is None:
            out["nprobe"] = min(out["nlist"], max(MIN_NPROBE, math.ceil(NPROBE_ROWS * out["nlist"] / max(1, n))))
        if min(out["train_rows"], n) < out["nlist"]:
            raise ValueError(
                f"{cls.name}: parameter train_rows: training needs at least {out['nlist']} rows (nlist={out['nlist']}), "
                f"and {min(out['train_rows'], n)} are available; lower nlist"
            )
        return out

    @classmethod
    def build(cls, rows: Rows, params: Mapping[str, Any], threads: int) -> FaissIVFIndex:
        """Train the cells on a sample, assign every row, then fill each cell's list at its final size.

        faiss's own ``add`` grows each list as a vector does (up to twice its
        size, 1.4x on average); counting the rows per cell first and sizing
        every list once keeps the index at one copy of the rows.
        """
        faiss = _lib()
        nlist = params["nlist"]
        sample = rows.sample(params["train_rows"], params["seed"])
        if len(sample) < nlist:
            raise ValueError(f"{cls.name}: parameter train_rows: training needs at least {nlist} usable rows, the sample has {len(sample)}")
        coarse = faiss.IndexFlatIP(rows.dims)
        index = faiss.IndexIVFFlat(coarse, rows.dims, nlist, faiss.METRIC_INNER_PRODUCT)
        index.own_fields = True
        coarse.this.disown()
        index.cp.seed = params["seed"]
        index.cp.min_points_per_centroid = 1  # the sample size is the caller's choice; faiss would only warn
        with _omp_threads(faiss, threads):
            rows.report("train", 0, 1)
            index.train(np.ascontiguousarray(sample))
            del sample
            rows.report("train", 1, 1)
            cells = [(ids, np.asarray(coarse.assign(unit, 1), dtype=np.int64).ravel()) for ids, unit in rows.blocks("assign")]
            counts = np.bincount(np.concatenate([c for _, c in cells]) if cells else np.zeros(0, np.int64), minlength=nlist)
            lists = index.invlists
            for cell in np.flatnonzero(counts).tolist():
                lists.resize(cell, int(counts[cell]))
            filled = np.zeros(nlist, dtype=np.int64)
            for (ids, cell_of), (_, unit) in zip(cells, rows.blocks(), strict=True):
                order = np.argsort(cell_of, kind="stable")
                cell_of, part_ids, unit = cell_of[order], np.ascontiguousarray(ids[order], dtype=np.int64), np.ascontiguousarray(unit[order])
                starts = np.flatnonzero(np.r_[True, cell_of[1:] != cell_of[:-1]]) if len(cell_of) else np.zeros(0, np.int64)
                for a, b in zip(starts.tolist(), [*starts[1:].tolist(), len(cell_of)], strict=True):
                    cell = int(cell_of[a])
                    lists.update_entries(cell, int(filled[cell]), b - a, faiss.swig_ptr(part_ids[a:b]), faiss.swig_ptr(unit[a:b].view(np.uint8)))
                    filled[cell] += b - a
            index.ntotal = int(counts.sum())
        return cls(index, params)

    def _search_params(self, faiss: Any, k: int) -> Any:
        return faiss.SearchParametersIVF(nprobe=min(self._params["nprobe"], self._params["nlist"]))


def _default_m(dims: int) -> int:
    """Subquantizers of IVF-PQ by default: the divisor of ``dims`` nearest to ``dims / 4`` (75 bytes per 300-dim row)."""
    return min((m for m in range(1, dims + 1) if dims % m == 0), key=lambda m: (abs(m - dims / 4), m))


@register_backend
class FaissIVFPQIndex(_FaissBase):
    """``IndexIVFPQ(IndexFlatIP(d), d, nlist, m, nbits, METRIC_INNER_PRODUCT)``, trained on a sample of the rows."""

    name: ClassVar[str] = "faiss-ivfpq"
    search_params: ClassVar[tuple[str, ...]] = ("nprobe",)
    params: ClassVar[Mapping[str, Param]] = {
        "nlist": _nlist_param(),
        "m": int_param(None, 1, 1 << 16, "subquantizers = code bytes per row at 8 bits; must divide dims (default: the divisor nearest dims / 4)"),
        "nbits": int_param(8, 1, 16, "bits per subquantizer code"),
        "nprobe": int_param(16, 1, 1 << 24, "cells searched per query: more is better recall and slower queries"),
        "train_rows": int_param(None, 1, 1 << 40, f"rows sampled for training (default: all rows up to {DEFAULT_TRAIN_ROWS:,})"),
        "seed": int_param(0, 0, (1 << 31) - 1, "random seed of the training sample"),
        "reuse_pq": bool_param(False, "quantized storage: use its product quantizer and codes (8 bits) instead of training faiss's"),
    }

    @classmethod
    def _flags(cls, faiss: Any) -> int:
        return int(faiss.IO_FLAG_MMAP)

    @classmethod
    def _kind(cls, faiss: Any, index: Any, params: Mapping[str, Any]) -> str | None:
        ivf = index.index if _name(faiss, index) == "IndexPreTransform" else index
        if _name(faiss, ivf) != "IndexIVFPQ":
            return _name(faiss, index)
        ivf = faiss.downcast_index(ivf)
        found = (ivf.nlist, ivf.pq.M, ivf.pq.nbits)
        want = (params["nlist"], params["m"], params["nbits"])
        return None if found == want else f"IndexIVFPQ with nlist, m, nbits = {found}, not {want}"

    @classmethod
    def resolve(cls, params: Mapping[str, Any], n: int, dims: int) -> dict[str, Any]:
        """``params`` checked, with the defaults that depend on the rows worked out for ``n`` rows of ``dims``."""
        out = check_params(cls, params)
        count = n
        if out["nlist"] is None:
            out["nlist"] = _default_nlist(count)
        if out["m"] is None:
            out["m"] = _default_m(dims)
        if dims % out["m"]:
            raise ValueError(f"{cls.name}: parameter m must divide the {dims} dimensions, not {out['m']}")
        if out["train_rows"] is None:
            out["train_rows"] = min(count, DEFAULT_TRAIN_ROWS)
        need = max(out["nlist"], 1 << out["nbits"])
        if min(out["train_rows"], count) < need:
            raise ValueError(
                f"{cls.name}: parameter train_rows: training needs at least {need} rows (nlist={out['nlist']}, 2**nbits={1 << out['nbits']}), "
                f"and {min(out['train_rows'], count)} are available; lower nlist or nbits, or use an HNSW backend"
            )
        return out

    @classmethod
    def build(cls, rows: Rows, params: Mapping[str, Any], threads: int) -> FaissIVFPQIndex:
        """Train on a random sample of ``train_rows`` unit rows, then add every row."""
        if params["reuse_pq"]:
            return cls._build_reusing(rows, params, threads)
        faiss = _lib()
        sample = rows.sample(params["train_rows"], params["seed"])
        need = max(params["nlist"], 1 << params["nbits"])
        if len(sample) < need:
            raise ValueError(f"{cls.name}: parameter train_rows: training needs at least {need} usable rows, the sample has {len(sample)}")
        coarse = faiss.IndexFlatIP(rows.dims)
        index = faiss.IndexIVFPQ(coarse, rows.dims, params["nlist"], params["m"], params["nbits"], faiss.METRIC_INNER_PRODUCT)
        index.own_fields = True
        coarse.this.disown()
        index.cp.seed = params["seed"]
        index.pq.cp.seed = params["seed"]
        # The sample size is the caller's choice (resolve checked the fewest faiss can train on): faiss would only warn, on
        # stderr, once per k-means run -- 16 identical lines for m=16 subquantizers under 9,984 rows (39 per centroid).
        index.cp.min_points_per_centroid = 1
        index.pq.cp.min_points_per_centroid = 1
        with _omp_threads(faiss, threads):
            index.train(np.ascontiguousarray(sample))
            for ids, unit in rows.blocks():
                index.add_with_ids(unit, ids)
        return cls(index, params)

    @classmethod
    def _build_reusing(cls, rows: Rows, params: Mapping[str, Any], threads: int) -> FaissIVFPQIndex:
        """IVF over the embeddings' own product quantizer: the codes are copied, only the coarse cells are trained.

        Cells and codes live in the quantizer's space (before the projection):
        a query ``q`` is projected to ``q @ P`` (an ``IndexPreTransform``), so the
        PQ estimate is the dot product of ``q`` with the reconstructed row
        before its norm; for rows quantized as unit rows (the default) that is
        the cosine up to the quantization error of the row's length.
        """
        faiss = _lib()
        qa = rows.quantized
        name = f"{cls.name}: parameter reuse_pq"
        if qa is None:
            raise ValueError(f"{name} needs quantized storage (these embeddings are dense)")
        pq = qa.quantizer
        m, k, ds = pq.quantizers.shape
        if k != 256:
            raise ValueError(f"{name} needs 8-bit codes (256 centroids per subquantizer), the storage has {k}")
        if qa.norms is not None and (np.asarray(qa.norms[: rows.n]) < 0).any():
            raise ValueError(f"{name}: rows with negative norms cannot be searched by their codes")
        d = m * ds
        proj = None if pq.projection is None else np.asarray(pq.projection, dtype=np.float32)
        sample = rows.sample(params["train_rows"], params["seed"])
        if len(sample) < params["nlist"]:
            raise ValueError(f"{cls.name}: parameter train_rows: the coarse cells need at least {params['nlist']} usable rows, the sample has {len(sample)}")
        raw = sample if proj is None else (sample @ proj).astype(np.float32)
        coarse = faiss.IndexFlatIP(d)
        ivf = faiss.IndexIVFPQ(coarse, d, params["nlist"], m, 8, faiss.METRIC_INNER_PRODUCT)
        ivf.own_fields = True
        coarse.this.disown()
        ivf.by_residual = False
        with _omp_threads(faiss, threads):
            kmeans = faiss.Kmeans(d, params["nlist"], niter=20, seed=params["seed"], spherical=True, min_points_per_centroid=1)
            kmeans.train(np.ascontiguousarray(raw))
            coarse.add(kmeans.centroids)
            faiss.copy_array_to_vector(np.ascontiguousarray(pq.quantizers, dtype=np.float32).ravel(), ivf.pq.centroids)
            ivf.is_trained = True
            codes = qa.quantized_embeddings
            for ids, unit in rows.blocks():
                space = unit if proj is None else (unit @ proj).astype(np.float32)
                _, cells = coarse.search(np.ascontiguousarray(space), 1)
                block_codes = np.ascontiguousarray(codes[ids], dtype=np.uint8)
                cells = cells.ravel()
                order = np.argsort(cells, kind="stable")
                cells, ids, block_codes = cells[order], ids[order], block_codes[order]
                starts = np.flatnonzero(np.r_[True, cells[1:] != cells[:-1]])
                for a, b in zip(starts, [*starts[1:], len(cells)], strict=True):
                    part_ids = np.ascontiguousarray(ids[a:b], dtype=np.int64)
                    part_codes = np.ascontiguousarray(block_codes[a:b])
                    ivf.invlists.add_entries(int(cells[a]), int(b - a), faiss.swig_ptr(part_ids), faiss.swig_ptr(part_codes))
                ivf.ntotal += len(ids)
        params = {**params, "m": m, "nbits": 8}  # the storage's, whatever was asked
        if proj is None:
            return cls(ivf, params)
        transform = faiss.LinearTransform(d, d, False)
        faiss.copy_array_to_vector(np.ascontiguousarray(proj.T).ravel(), transform.A)  # y = A q = P^T q, i.e. q @ P
        transform.is_trained = True
        index = faiss.IndexPreTransform(transform, ivf)
        index.own_fields = True
        transform.this.disown()
        ivf.this.disown()
        return cls(index, params)

    def _search_params(self, faiss: Any, k: int) -> Any:
        return faiss.SearchParametersIVF(nprobe=self._params["nprobe"])
