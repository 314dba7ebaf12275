""":class:`AnnIndex`, the approximate-neighbour index of one embeddings' word rows, and :func:`build_index`."""

from __future__ import annotations

import math
import os
import threading
import weakref
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import numpy.typing as npt

from finalfusion._progress import ProgressArg, reporter
from finalfusion._threads import threads_for
from finalfusion.ann._backends import DEFAULT_BACKEND, BackendIndex, Shape, backend_class
from finalfusion.ann._fingerprint import Fingerprint, SourceFile, fingerprint, shape_difference, source_file, words_digest
from finalfusion.ann._persist import open_backend, read_header, save_index
from finalfusion.ann._rows import RowSource
from finalfusion.errors import StaleIndexError
from finalfusion.similarity._protocol import Queryable
from finalfusion.similarity._topk import F32, I64

__all__ = ["AnnIndex", "build_index", "from_reference", "load_index"]

#: What ``verify=`` accepts.
VERIFY = ("full", "file")
#: At most this many results of one query are looked at as Python numbers (see :func:`_any_missing`).
_FEW_RESULTS = 256


class AnnIndex:
    """An approximate-nearest-neighbour index over the unit word rows of one :class:`~finalfusion.Embeddings`.

    Built by :func:`finalfusion.ann.build_index` or opened by
    :func:`finalfusion.ann.load_index`. Row ids are word ids (the order of
    ``emb.vocab.words``); scores are inner products of unit rows, i.e.
    cosine similarities (``faiss-ivfpq``: their product-quantized
    estimates). Thread-safe for searches.

    Attributes
    ----------
    backend : str
        The backend's name (``"hnswlib"``, ``"faiss-hnsw"``, ...).
    params : dict
        Its parameters, defaults included.
    n : int
        Word rows of the embeddings it was built for (ids ``0 .. n - 1``).
    dims : int
        Dimensionality.
    fingerprint : Fingerprint
        What it was built over (see :meth:`check`).
    path : str or None
        Where it was saved to or loaded from (it then pickles by reference).

    Examples
    --------
    >>> import numpy as np
    >>> from finalfusion import Embeddings, NdArray, SimpleVocab
    >>> from finalfusion.ann import build_index
    >>> emb = Embeddings(NdArray(np.eye(3, dtype=np.float32)), SimpleVocab(["a", "b", "c"]))
    >>> ix = build_index(emb, "hnswlib")
    >>> ids, scores = ix.search(np.eye(3, dtype=np.float32)[:1], 1)
    >>> ids.tolist(), scores.tolist()
    ([[0]], [[1.0]])
    """

    def __init__(
        self,
        backend: str,
        params: Mapping[str, Any],
        impl: BackendIndex,
        fingerprint: Fingerprint,
        *,
        source: SourceFile | None = None,
        path: str | None = None,
        mmap: bool = False,
    ) -> None:
        self.backend = backend
        self.params = dict(params)
        self.n = fingerprint.n
        self.dims = fingerprint.dims
        self.fingerprint = fingerprint
        self.source = source
        self.path = path
        self.mmap = mmap
        self._impl = impl
        #: The backend's single-query search (ids as Python ints), if it has one.
        self._one: Callable[[F32, int], list[int]] | None = getattr(impl, "search_one", None)
        self._lock = threading.Lock()
        self._checked: list[weakref.ref[Any]] = []

    def __len__(self) -> int:
        """Rows in the index (the word rows minus those left out: zero, NaN or infinite)."""
        return self._impl.count

    def __repr__(self) -> str:
        params = ", ".join(f"{k}={v!r}" for k, v in self.params.items())
        where = f", path={self.path!r}" if self.path is not None else ""
        return f"AnnIndex(backend={self.backend!r}, {params}, n={self.n}, dims={self.dims}, indexed={len(self)}{where})"

    def search(self, queries: npt.ArrayLike, k: int = 10, *, threads: int | None = None) -> tuple[I64, F32]:
        """The ``k`` approximately nearest rows of each unit query row.

        Parameters
        ----------
        queries
            ``(Q, dims)`` float32 unit vectors (one vector of shape ``(dims,)`` is one query).
        k
            Neighbours per query.
        threads
            Threads of the backend's batch search (default: the library's setting).

        Returns
        -------
        ids : numpy.ndarray
            ``(Q, k)`` int64 word ids, best first; ``-1`` where fewer than ``k`` rows were found.
        scores : numpy.ndarray
            ``(Q, k)`` float32 inner products (cosines for unit queries) as the backend computes them (estimates for
            ``faiss-ivfpq``, half precision for ``usearch`` with ``scalar="f16"``); ``nan`` beside a ``-1``.

        Raises
        ------
        ValueError
            If ``k < 1``, or the queries do not have :attr:`dims` columns or are not finite.
        FormatError
            The backend's library fails to search the index (its error and message, naming the library).
        """
        given: object = k
        if isinstance(given, bool) or not isinstance(given, int | np.integer) or given < 1:
            raise ValueError(f"k must be a whole number >= 1, not {k!r}")
        q = np.asarray(queries, dtype=np.float32)
        if q.ndim == 1:
            q = q[None, :]
        if q.ndim != 2 or q.shape[1] != self.dims:
            raise ValueError(f"queries must have shape (Q, {self.dims}), not {np.shape(queries)}")
        if not np.isfinite(q).all():
            raise ValueError("queries must be finite (a NaN or infinite component was found)")
        q = np.ascontiguousarray(q)
        k = int(k)
        kk = min(k, len(self))
        if not len(q) or not kk:
            return np.full((len(q), k), -1, dtype=np.int64), np.full((len(q), k), np.nan, dtype=np.float32)
        # one query runs on the calling thread (some libraries start threads per call)
        got_ids, got_scores = self._impl.search(q, kk, 1 if len(q) == 1 else threads_for(threads))
        if kk == k:  # the backend's own arrays (fresh ones), unless it handed out read-only or other ones
            ids, scores = _writable(got_ids, np.int64), _writable(got_scores, np.float32)
        else:
            ids = np.full((len(q), k), -1, dtype=np.int64)
            scores = np.full((len(q), k), np.nan, dtype=np.float32)
            ids[:, :kk] = got_ids
            scores[:, :kk] = got_scores
        if _any_missing(ids, scores):  # -1 beside every NaN score, NaN beside every negative id
            missing = np.isnan(scores)
            missing |= ids < 0
            scores[missing] = np.nan
            ids[missing] = -1
        return ids, scores

    def _search_one(self, q: F32, k: int) -> list[int]:
        """The row ids the backend proposes for one unit query: :meth:`search` without its argument checks.

        For the queries of :mod:`finalfusion.similarity._approx`, whose query
        is already a finite unit float32 vector of :attr:`dims` components
        (C-contiguous) and ``k >= 1``: ``k`` Python ints (fewer when the index
        holds fewer rows) that may hold ``-1`` for rows not found (the caller
        drops them; the scores are not read). A backend with a ``search_one``
        (faiss) answers it directly, without building the result arrays.
        """
        kk = min(k, self._impl.count)
        if not kk:
            return []
        one = self._one
        if one is not None:
            return one(q, kk)
        ids: list[int] = self._impl.search(q[None, :], kk, 1)[0][0].tolist()
        return ids

    def set_search(self, **params: int) -> None:
        """Change how widely later searches look, without rebuilding: ``ef`` (HNSW backends) or ``nprobe`` (faiss IVF).

        More is better recall and slower queries (see docs/ann.md, "Choosing
        the parameters"). The new values are in :attr:`params` and in the
        header of a later :meth:`save`. Build-time parameters (``M``,
        ``nlist``, ...) cannot change.

        Raises
        ------
        ValueError
            A parameter the backend cannot change after the build, or a bad value (naming the backend and the parameter).

        Examples
        --------
        >>> import numpy as np
        >>> from finalfusion import Embeddings, NdArray, SimpleVocab
        >>> rows = np.random.default_rng(0).standard_normal((100, 8)).astype(np.float32)
        >>> ix = build_index(Embeddings(NdArray(rows), SimpleVocab([f"w{i}" for i in range(100)])), "hnswlib")
        >>> ix.set_search(ef=32)
        >>> ix.params["ef"]
        32
        >>> ix.set_search(M=8)
        Traceback (most recent call last):
        ...
        ValueError: hnswlib: parameter M is fixed when the index is built; a search can change ef
        """
        cls = backend_class(self.backend)
        allowed = cls.search_params
        for name in params:
            if name not in allowed:
                what = "fixed when the index is built" if name in cls.params else "not a parameter of this backend"
                raise ValueError(f"{self.backend}: parameter {name} is {what}; a search can change {', '.join(allowed)}")
        checked = {name: cls.params[name].check(self.backend, name, value) for name, value in params.items()}
        with self._lock:
            for name, value in checked.items():
                self._impl.set_search(name, value)
                self.params[name] = value

    def check(self, emb: Queryable, *, verify: str = "full") -> None:
        """Raise :class:`~finalfusion.errors.StaleIndexError` unless the index was built for ``emb``.

        ``verify="full"`` (the default) compares a SHA-256 of the words and of
        every byte of the word rows (about 0.4 s per GB of rows on two
        cores; see :mod:`finalfusion.ann._fingerprint`); it is done once per
        embeddings object and remembered, and an index built by
        :func:`build_index` remembers the embeddings it was built from (modify
        the storage in place afterwards and the index is stale unnoticed: as
        for the query caches, see :func:`finalfusion.similarity.clear_cache`).
        The fingerprint of storage nothing can write to (memory-mapped files,
        read-only views of read-only buffers) is computed once per process
        and shared by every index checked against it. ``verify="file"`` is the
        cheap, explicit opt-in: for embeddings memory-mapped from a file that
        has the size, modification time and edge digest recorded when the
        index was built, the words are compared and the rows are not hashed.

        Raises
        ------
        StaleIndexError
            Naming what differs: the number of words or dims, the words, the storage type, the rows.
        ValueError
            For another ``verify``.

        Examples
        --------
        >>> import numpy as np, finalfusion as ff
        >>> rows = ff.NdArray(np.eye(3, dtype=np.float32))
        >>> emb = ff.Embeddings(rows, ff.SimpleVocab(list("abc")))
        >>> ix = ff.ann.build_index(emb, "hnswlib")
        >>> ix.check(emb)
        >>> ix.check(ff.Embeddings(rows, ff.SimpleVocab(list("abd"))))
        Traceback (most recent call last):
        ...
        finalfusion.errors.StaleIndexError: ...different words...
        """
        if verify not in VERIFY:
            raise ValueError(f"verify must be one of {', '.join(VERIFY)}, not {verify!r}")
        with self._lock:
            if any(r() is emb for r in self._checked):
                return
        self._compare(emb, verify)
        self._remember(emb)

    def _remember(self, emb: Queryable) -> None:
        """Take ``emb`` as checked from now on (the last 8 embeddings objects are remembered)."""
        with self._lock:
            self._checked = [r for r in self._checked if r() is not None][-7:]
            self._checked.append(weakref.ref(emb))

    def _compare(self, emb: Queryable, verify: str) -> None:
        words = emb.vocab.words
        fp = self.fingerprint
        shape = (len(words), emb.storage.shape[1])
        if shape != (fp.n, fp.dims):
            raise StaleIndexError(f"the index was built for other embeddings: {shape_difference((fp.n, fp.dims), shape)}")
        if verify == "file" and self.source is not None and source_file(emb) == self.source and words_digest(words) == fp.words:
            return
        problem = fp.difference(fingerprint(emb))
        if problem is not None:
            raise StaleIndexError(f"the index was built for other embeddings: {problem}")

    def save(self, path: str | os.PathLike[str]) -> None:
        """Save the index to the directory ``path`` atomically (see :func:`finalfusion.ann.load_index`).

        Afterwards the index pickles as a reference to ``path``. The
        directory gets a manifest (``finalfusion-manifest.json``) of the
        files written; an existing ``path`` is replaced only when it is an
        empty directory or holds exactly an index saved there (every file
        listed in its manifest, unchanged). Anything else -- a file, a
        symbolic link, a directory with other files, a directory saved
        before manifests existed -- is refused and left as it is.

        Raises
        ------
        OutputRefused
            (a :class:`FileExistsError`) ``path`` is a file or a symbolic
            link, or a directory holding anything else; the message names
            those files.
        OSError
            On any I/O error (nothing is left behind).

        Examples
        --------
        >>> import os, tempfile, numpy as np, finalfusion as ff
        >>> from finalfusion.ann import build_index, load_index
        >>> emb = ff.Embeddings(ff.NdArray(np.eye(3, dtype=np.float32)), ff.SimpleVocab(list("abc")))
        >>> path = os.path.join(tempfile.mkdtemp(), "index")
        >>> build_index(emb, "hnswlib").save(path)
        >>> load_index(path, emb).search(np.eye(3, dtype=np.float32)[1], 1)[0].tolist()
        [[1]]
        """
        src = self.source
        fields = {
            "backend": self.backend,
            "params": self.params,
            "n": self.n,
            "dims": self.dims,
            "count": len(self),
            "fingerprint": self.fingerprint.to_dict(),
            "source": None if src is None else {"size": src.size, "mtime_ns": src.mtime_ns, "digest": src.digest},
        }
        self.path = save_index(self._impl, fields, path)

    def __reduce__(self) -> tuple[Callable[..., AnnIndex], tuple[Any, ...]]:
        if self.path is not None:
            return (from_reference, (self.path, self.fingerprint.to_dict(), self.backend, self.params, self.mmap))
        try:
            data = self._impl.to_bytes()
        except Exception as exc:
            raise TypeError(f"this {self.backend} index cannot be pickled by value ({exc}); save it and pickle the loaded index (a reference)") from exc
        return (_from_bytes, (self.backend, self.params, self.fingerprint.to_dict(), self.source, data))


def _any_missing(ids: I64, scores: F32) -> bool:
    """Whether a ``(Q, k)`` result has a negative id or a NaN score.

    One query's few values are looked at as Python numbers: right after a
    backend's search has filled the caches with its own data, a numpy
    reduction costs more than the search's last steps (issue 36). Otherwise
    two reductions: the float64 sum of float32 scores is NaN only when a
    score is (or when both infinities meet: a false alarm, harmless).
    """
    if len(ids) == 1 and ids.shape[1] <= _FEW_RESULTS:
        first = ids[0].tolist()
        return (bool(first) and min(first) < 0) or any(v != v for v in scores[0].tolist())
    return bool(ids.size) and (bool(ids.min() < 0) or math.isnan(scores.sum(dtype=np.float64)))


def _writable(a: Any, dtype: type[np.generic]) -> Any:
    """``a`` itself when it is a writable array of ``dtype``, else a copy that is."""
    if isinstance(a, np.ndarray) and a.dtype == dtype and a.flags.writeable:
        return a
    return np.array(a, dtype=dtype)


def _from_bytes(backend: str, params: dict[str, Any], fp: dict[str, Any], source: SourceFile | None, data: bytes) -> AnnIndex:
    """Unpickle an index sent by value."""
    cls = backend_class(backend)
    fingerprint = Fingerprint(**fp)
    return AnnIndex(backend, params, cls.from_bytes(data, Shape(fingerprint.n, fingerprint.dims), params), fingerprint, source=source)


class _Counted:
    """The row source, reporting ``("index", rows done, n)`` as blocks are handed out."""

    def __init__(self, rows: RowSource, report: Callable[[str, int, Any], None] | None) -> None:
        self._rows = rows
        self._report = report
        self.n = rows.n
        self.dims = rows.dims
        self.quantized = rows.quantized

    def blocks(self, stage: str = "index") -> Any:
        report = self._report
        done = 0
        if report is not None:
            report(stage, 0, self.n)
        for ids, unit in self._rows.blocks():
            yield ids, unit
            done = int(ids[-1]) + 1
            if report is not None:
                report(stage, done, self.n)
        if report is not None and done < self.n:
            report(stage, self.n, self.n)

    def report(self, stage: str, done: int, total: int) -> None:
        if self._report is not None:
            self._report(stage, done, total)

    def sample(self, count: int, seed: int) -> F32:
        return self._rows.sample(count, seed)


def build_index(emb: Queryable, backend: str | None = None, *, progress: ProgressArg = None, threads: int | None = None, **params: Any) -> AnnIndex:
    """Build an approximate-nearest-neighbour index over the known words of ``emb``.

    The index holds the unit-normalised word rows (``emb.vocab.words``
    order; subword and bucket rows are never indexed) and searches them by
    inner product, i.e. cosine similarity. Dense storage (memory-mapped
    too) and quantized storage (reconstructed block by block) both work;
    rows with NaN, infinity or norm zero are left out, so they are never
    returned.

    Parameters
    ----------
    emb
        The embeddings.
    backend
        ``"faiss-ivf"`` (the default: :data:`finalfusion.ann.DEFAULT_BACKEND`),
        ``"hnswlib"``, ``"faiss-hnsw"``, ``"faiss-ivfpq"``, ``"usearch"`` or ``"voyager"``.
    progress
        ``True`` for a progress bar, or a callable ``progress(stage, done, total)``
        (stage ``"index"``: word rows added; ``faiss-ivf`` first reports
        ``"train"``, its k-means, as 0 and 1 of 1, and ``"assign"``, the rows
        given their cells).
    threads
        Threads of the build (default: the library's setting, :func:`finalfusion.set_threads`).
    **params
        The backend's parameters: ``faiss-ivf`` ``nlist`` (4 sqrt(rows), at most
        rows / 39), ``nprobe`` (the search width: 5 cells, or more to hold about
        1,250 rows), ``train_rows``, ``seed``; HNSW backends ``M`` (16),
        ``ef_construction`` (100), ``ef`` (256, the search width), and for ``usearch`` ``scalar``
        (``"f32"``, or ``"f16"``: half the rows' memory); ``faiss-ivfpq`` ``nlist``, ``m``,
        ``nbits`` (8), ``nprobe`` (16), ``train_rows``, ``seed``, ``reuse_pq`` (see docs/ann.md).

    Returns
    -------
    AnnIndex
        Already checked against ``emb`` (its first query neither hashes the rows again nor computes their norms).

    Raises
    ------
    ValueError
        An unknown backend, or an unknown parameter or bad value (naming the backend and the parameter).
    MissingExtraError
        The backend's package is not installed (``pip install 'finalfusion-py[ann]'``).
    TypeError
        The storage is neither dense nor quantized.

    Examples
    --------
    >>> import numpy as np
    >>> from finalfusion import Embeddings, NdArray, SimpleVocab
    >>> rows = np.random.default_rng(0).standard_normal((100, 8)).astype(np.float32)
    >>> emb = Embeddings(NdArray(rows), SimpleVocab([f"w{i}" for i in range(100)]))
    >>> ix = build_index(emb, "hnswlib", M=8)
    >>> ix.search(emb["w7"] / np.linalg.norm(emb["w7"]), 1)[0].tolist()
    [[7]]
    """
    name = DEFAULT_BACKEND if backend is None else backend
    cls = backend_class(name)
    rows = RowSource(emb)
    resolved = cls.resolve(params, rows.n, rows.dims)
    fp = fingerprint(emb, threads=threads)
    with reporter(progress) as report:
        impl = cls.build(_Counted(rows, report), resolved, threads_for(threads))
    ix = AnnIndex(name, getattr(impl, "resolved_params", resolved), impl, fp, source=source_file(emb))
    ix._remember(emb)  # built from emb's rows just now: its first query does not hash them again
    _prepare_queries(emb)
    return ix


def _prepare_queries(emb: Queryable) -> None:
    """Compute what every query of ``emb`` needs once (the row norms and the rows never returned), so the first query costs no more than the next."""
    emb._query_index().bad  # noqa: B018 -- computed on first access, then kept by the embeddings


def _opened(directory: str, header: dict[str, Any], mmap: bool) -> AnnIndex:
    """The index in ``directory`` with its checked ``header``."""
    cls = backend_class(header["backend"])
    impl = open_backend(directory, header, mmap)
    fp = header["fingerprint"]
    return AnnIndex(header["backend"], header["params"], impl, fp, source=header["source"], path=directory, mmap=mmap and cls.can_mmap)


class _NoIndex:
    """A stand-in backend index while only the fingerprint is checked."""

    def __init__(self, count: int) -> None:
        self.count = count

    def search(self, queries: F32, k: int, threads: int) -> tuple[I64, F32]:
        raise NotImplementedError

    def save(self, path: str) -> None:
        raise NotImplementedError

    def to_bytes(self) -> bytes:
        raise NotImplementedError

    def set_search(self, name: str, value: int) -> None:
        raise NotImplementedError


def load_index(path: str | os.PathLike[str], emb: Queryable, *, mmap: bool = True, verify: str = "full") -> AnnIndex:
    """Open the index saved in the directory ``path`` for the embeddings ``emb``.

    The header is checked first, then whether the index was built for
    ``emb`` (see :meth:`AnnIndex.check`; ``verify="file"`` is the cheap
    opt-in for memory-mapped embeddings; with ``"full"`` the row norms every
    query needs are computed here too, so the first query is as fast as the
    next), then the backend's file is opened:
    memory-mapped where the backend can (``faiss-ivf``, ``usearch``, ``faiss-hnsw``,
    ``faiss-ivfpq``), read into memory where it cannot (``hnswlib``,
    ``voyager``). The index pickles as a reference to ``path``.

    Parameters
    ----------
    path
        A directory written by :meth:`AnnIndex.save`.
    emb
        The embeddings the index is for.
    mmap
        Memory-map the backend's file where the backend allows it.
    verify
        ``"full"`` (hash the words and rows) or ``"file"`` (see :meth:`AnnIndex.check`).

    Raises
    ------
    StaleIndexError
        The index was built for other embeddings.
    FormatError
        The header or the backend's file is malformed (naming the format, expected, found and the field).
    MissingExtraError
        The backend's package is not installed.
    OSError
        ``path`` is not a directory with an index, or cannot be read.

    Examples
    --------
    >>> import os, tempfile
    >>> from finalfusion import Embeddings, NdArray, SimpleVocab
    >>> rows = np.random.default_rng(0).standard_normal((50, 4)).astype(np.float32)
    >>> emb = Embeddings(NdArray(rows), SimpleVocab([f"w{i}" for i in range(50)]))
    >>> path = os.path.join(tempfile.mkdtemp(), "emb.ann")
    >>> build_index(emb, "hnswlib").save(path)
    >>> load_index(path, emb)  # doctest: +ELLIPSIS
    AnnIndex(backend='hnswlib', M=..., n=50, dims=4, indexed=50, path=...)
    """
    directory = os.path.abspath(os.fspath(path))
    header = read_header(directory)
    probe = AnnIndex(header["backend"], header["params"], _NoIndex(header["count"]), header["fingerprint"], source=header["source"])
    probe.check(emb, verify=verify)
    ix = _opened(directory, header, mmap)
    ix._checked = probe._checked
    if verify == "full":  # a full check reads every row (unless this process already did); "file" promises not to
        _prepare_queries(emb)
    return ix


def from_reference(path: str, fingerprint: dict[str, Any], backend: str, params: dict[str, Any], mmap: bool) -> AnnIndex:
    """Unpickle an index sent by reference: open ``path`` again, refusing it if it is no longer the same index.

    Raises
    ------
    StaleIndexError
        The saved index was replaced by one for other embeddings, another backend or other parameters.
    FormatError
        Its files are malformed.
    """
    header = read_header(path)
    searched = backend_class(header["backend"]).search_params if header["backend"] == backend else ()

    def built(p: dict[str, Any]) -> dict[str, Any]:  # the parameters fixed by the build (set_search may change the others)
        return {k: v for k, v in p.items() if k not in searched}

    if header["fingerprint"] != Fingerprint(**fingerprint) or header["backend"] != backend or built(header["params"]) != built(params):
        raise StaleIndexError(f"{path}: the saved index changed since it was pickled (other embeddings, backend or parameters)")
    ix = _opened(path, header, mmap)
    changed = {k: v for k, v in params.items() if k in searched and header["params"].get(k) != v}
    if changed:
        ix.set_search(**changed)
    return ix
