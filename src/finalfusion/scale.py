"""Worker-side helpers for embedding corpora and querying neighbours on Dask or Ray.

Every function here runs inside a worker on one partition (a Dask bag
partition, a pandas column partition of a Dask DataFrame, a batch of a Ray
Dataset) and takes the :class:`~finalfusion.Embeddings` as an argument.
Embeddings loaded with ``load_finalfusion(path, mmap=True)`` travel to the
workers as a ~200-byte reference to their file, and every worker maps the same
file, so the page cache holds one copy of the matrix for all of them
(docs/scaling.md). Nothing here imports Dask, Ray or pandas: pandas Series are
recognised only when pandas is already imported (which it is whenever one is
passed in), and this module creates no threads (``embedding_batch`` runs with
``threads=1`` by default: the engine already runs one task per core).

To send embeddings to a cluster, wrap them with :func:`shared`: the wrapper
unpickles without touching the file, and the helper that first uses it on a
worker maps and checks the file. A file replaced since the embeddings were
loaded then fails *that task* with :class:`~finalfusion.FileChangedError`,
which every engine reports, instead of failing inside the engine's own
transfer of the data (where Dask waits for ever: a worker that joins after the
replace and copies scattered embeddings from a peer cannot unpickle them, and
Dask's issue 6705 leaves the task waiting). Every helper accepts plain
embeddings or the wrapper and goes through one function to resolve it.

The tested examples that use these helpers on real clusters are
``examples/scale_dask.py`` and ``examples/scale_ray.py``.

Examples
--------
>>> import numpy as np
>>> from finalfusion import Embeddings, NdArray, SimpleVocab
>>> emb = Embeddings(NdArray(np.eye(3, dtype=np.float32)), SimpleVocab(["a", "b", "c"]))
>>> [m.tolist() for m in embed_partition([["a", "b"], ["c"]], emb)]
[[[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]], [[0.0, 0.0, 1.0]]]
>>> [m.tolist() for m in embed_partition([["a", "b"], []], emb, pooling="mean")]
[[0.5, 0.5, 0.0], [0.0, 0.0, 0.0]]
"""

from __future__ import annotations

import pickle
import sys
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, Final, Union, cast

import numpy as np
import numpy.typing as npt

from finalfusion.errors import FileChangedError
from finalfusion.vocab._words import check_word_items

if TYPE_CHECKING:
    from finalfusion.embeddings import Embeddings

__all__ = ["EmbedBatches", "SharedEmbeddings", "embed_documents", "embed_partition", "file_changed", "neighbours_partition", "shared"]

#: Accepted values of ``pooling``.
POOLINGS: Final = (None, "mean", "sum")


class SharedEmbeddings:
    """Embeddings to send to a cluster: unpickling never raises, the first use does.

    Made by :func:`shared`. Pickled, it holds the pickle of the embeddings (a
    ~200-byte reference to the file for memory-mapped ones). Unpickling tries
    to unpickle the embeddings (map the file and check that it is the one
    loaded); if that fails -- the file changed or is gone -- it keeps the
    bytes, and :attr:`embeddings`, read by the helper a task runs, raises
    :class:`~finalfusion.FileChangedError` (or the ``OSError``) in that task,
    where every engine reports it. A worker keeps the mapping it made (of the
    old file, if the file is replaced later: never a mix).

    Examples
    --------
    >>> import pickle
    >>> import numpy as np
    >>> from finalfusion import Embeddings, NdArray, SimpleVocab
    >>> handle = shared(Embeddings(NdArray(np.eye(2, dtype=np.float32)), SimpleVocab(["a", "b"])))
    >>> pickle.loads(pickle.dumps(handle)).embeddings.vocab.words
    ['a', 'b']
    """

    __slots__ = ("_data", "_emb")

    def __init__(self, emb: Embeddings) -> None:
        if cast(object, emb) is None or isinstance(emb, SharedEmbeddings):
            raise TypeError(f"shared() takes Embeddings, got {type(emb).__name__}")
        self._emb: Embeddings | None = emb
        self._data: bytes | None = None

    @property
    def embeddings(self) -> Embeddings:
        """The embeddings, unpickled (file mapped and checked) on first use in this process.

        Raises
        ------
        FileChangedError
            If the embeddings were memory-mapped and their file has changed since.

        Examples
        --------
        >>> import pickle
        >>> import numpy as np
        >>> from finalfusion import Embeddings, NdArray, SimpleVocab
        >>> handle = pickle.loads(pickle.dumps(shared(Embeddings(NdArray(np.eye(2, dtype=np.float32)), SimpleVocab(["a", "b"])))))
        >>> handle.embeddings["b"].tolist()
        [0.0, 1.0]
        """
        emb = self._emb
        if emb is None:
            data = self._data
            if data is None:  # another thread of this worker resolved it meanwhile (it sets _emb first)
                return cast("Embeddings", self._emb)
            emb = pickle.loads(data)
            self._emb = emb
            self._data = None  # resolved: pickling again pickles the embeddings (mapped ones: the same reference)
        return emb

    def __reduce__(self) -> tuple[Any, ...]:
        data = self._data
        if data is None:
            data = pickle.dumps(self._emb, protocol=pickle.HIGHEST_PROTOCOL)
        return (_unpickle_shared, (data,))

    def __repr__(self) -> str:
        state = "unresolved" if self._emb is None else repr(self._emb)
        return f"SharedEmbeddings({state})"


def _unpickle_shared(data: bytes) -> SharedEmbeddings:
    """Unpickle a :class:`SharedEmbeddings`: resolve it now if that works, else keep the bytes and never raise.

    Resolving now keeps the mapping a worker gets when the embeddings arrive
    (a file replaced later does not concern it); a failure (a changed or
    deleted file) is left to the first use, inside a task.
    """
    handle = SharedEmbeddings.__new__(SharedEmbeddings)
    handle._emb = None
    handle._data = data
    try:
        handle._emb = pickle.loads(data)
        handle._data = None
    except Exception:
        pass
    return handle


def shared(emb: Embeddings) -> SharedEmbeddings:
    """Wrap embeddings for a cluster, so a changed file fails the task that uses them (not the engine's transfer).

    Scatter or put the result (``client.scatter(shared(emb), broadcast=True)``,
    ``ray.put(shared(emb))``) and pass it to the helpers of this module.
    Memory-mapped embeddings still travel as a ~200-byte reference; each
    worker maps the file once, on first use.

    Examples
    --------
    >>> import numpy as np
    >>> from finalfusion import Embeddings, NdArray, SimpleVocab
    >>> emb = Embeddings(NdArray(np.eye(2, dtype=np.float32)), SimpleVocab(["a", "b"]))
    >>> [m.tolist() for m in embed_partition([["b"]], shared(emb))]
    [[[0.0, 1.0]]]
    """
    return SharedEmbeddings(emb)


#: What every helper takes: embeddings, or embeddings wrapped by :func:`shared`.
EmbeddingsArg = Union["Embeddings", SharedEmbeddings]


def _embeddings(emb: EmbeddingsArg) -> Embeddings:
    """The embeddings behind a helper's argument: the one place a :class:`SharedEmbeddings` is resolved."""
    return emb.embeddings if isinstance(emb, SharedEmbeddings) else emb


def embed_documents(emb: EmbeddingsArg, documents: Iterable[Sequence[str]], *, pooling: str | None = None, threads: int = 1) -> list[npt.NDArray[np.float32]]:
    """Embed many tokenised documents with one batch lookup.

    All tokens of all documents go through a single
    :meth:`~finalfusion.Embeddings.embedding_batch` call (each distinct
    unknown word is hashed once), then the rows are split per document.

    Parameters
    ----------
    emb
        The embeddings, or embeddings wrapped by :func:`shared` (memory-mapped
        ones are shipped to workers as a reference to their file).
    documents
        Token sequences (lists, tuples, numpy arrays of ``str``).
    pooling
        ``None``: one ``(len(document), dims)`` matrix per document (rows of
        words without an embedding are zeros). ``"mean"`` / ``"sum"``: one
        ``(dims,)`` vector per document, the mean or sum of the rows of its
        words that have an embedding (zeros if none has).
    threads
        Passed to ``embedding_batch``; ``1`` (the default) keeps all work on
        the calling thread, as the engine already runs one task per core.

    Returns
    -------
    list of numpy.ndarray
        One ``float32`` array per document, in order.

    Raises
    ------
    ValueError
        If ``pooling`` is not ``None``, ``"mean"`` or ``"sum"``, or
        ``threads`` is not a positive int.
    TypeError
        If a document is a ``str`` rather than a sequence of tokens.

    Examples
    --------
    >>> import numpy as np
    >>> from finalfusion import Embeddings, NdArray, SimpleVocab
    >>> emb = Embeddings(NdArray(np.eye(2, dtype=np.float32)), SimpleVocab(["a", "b"]))
    >>> [m.shape for m in embed_documents(emb, [["a", "zz", "b"], []])]
    [(3, 2), (0, 2)]
    >>> [v.tolist() for v in embed_documents(emb, [["a", "zz", "b"]], pooling="mean")]
    [[0.5, 0.5]]
    >>> embed_documents(emb, ["a b"])  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    TypeError: a document must be a sequence of tokens, got the str 'a b'; split it first (Dask turns ...
    """
    if pooling not in POOLINGS:
        raise ValueError(f"pooling must be one of {POOLINGS}, got {pooling!r}")
    emb = _embeddings(emb)
    docs: list[list[str]] = []
    for d in documents:
        if isinstance(d, str):
            raise TypeError(
                f"a document must be a sequence of tokens, got the str {d[:40]!r}; split it first "
                "(Dask turns object columns of lists into strings: use pd.ArrowDtype(pa.list_(pa.string())))"
            )
        docs.append(d if isinstance(d, list) else list(d))
    lengths = np.fromiter((len(d) for d in docs), dtype=np.int64, count=len(docs))
    tokens = [t for d in docs for t in d]
    matrix, found = emb.embedding_batch(tokens, threads=threads)
    bounds = np.concatenate(([0], np.cumsum(lengths)))
    if pooling is None:
        return [matrix[bounds[i] : bounds[i + 1]] for i in range(len(docs))]
    # One sum per document: as exact as rows.sum(axis=0), and 6x faster than np.add.reduceat(matrix, bounds, axis=0),
    # which walks the columns with a stride. Rows of words without an embedding are zeros.
    sums = np.zeros((len(docs), emb.dims), dtype=np.float32)
    starts = bounds.tolist()
    for i in np.flatnonzero(lengths).tolist():
        matrix[starts[i] : starts[i + 1]].sum(axis=0, out=sums[i])
    if pooling == "mean":
        found_before = np.concatenate(([0], np.cumsum(found, dtype=np.int64)))
        counts = found_before[bounds[1:]] - found_before[bounds[:-1]]
        sums /= np.maximum(counts, 1)[:, None].astype(np.float32)
    return list(sums)


def _pandas_series(obj: Any) -> Any:
    """The pandas module if ``obj`` is a pandas Series (pandas is then already imported), else ``None``."""
    pd = sys.modules.get("pandas")
    if pd is not None and isinstance(obj, pd.Series):
        return pd
    return None


def embed_partition(partition: Any, emb: EmbeddingsArg, *, pooling: str | None = None, threads: int = 1) -> Any:
    """Embed one partition of tokenised documents (for ``map_partitions``).

    A Dask bag partition (any iterable of token lists) gives a list; a pandas
    Series of token lists (a Dask DataFrame column partition) gives a Series
    with the same index and name, of ``object`` dtype. See
    :func:`embed_documents` for ``pooling`` and ``threads``.

    Examples
    --------
    Dask (``remote = client.scatter(emb, broadcast=True)``)::

        bag.map_partitions(embed_partition, remote)
        ddf["tokens"].map_partitions(embed_partition, remote, meta=("tokens", "object"))

    Without Dask:

    >>> import numpy as np
    >>> from finalfusion import Embeddings, NdArray, SimpleVocab
    >>> emb = Embeddings(NdArray(np.eye(2, dtype=np.float32)), SimpleVocab(["a", "b"]))
    >>> [v.tolist() for v in embed_partition([["a"], ["b", "b"]], emb, pooling="sum")]
    [[1.0, 0.0], [0.0, 2.0]]
    """
    pd = _pandas_series(partition)
    rows = embed_documents(emb, partition, pooling=pooling, threads=threads)
    if pd is None:
        return rows
    out = np.empty(len(rows), dtype=object)
    out[:] = rows
    return pd.Series(out, index=partition.index, name=partition.name, dtype=object)


def neighbours_partition(words: Any, emb: EmbeddingsArg, k: int = 10) -> Any:
    """Nearest neighbours of a partition of query words with one batched query.

    Built on :meth:`~finalfusion.Embeddings.word_similarity_batch`: each word
    is excluded from its own results; a word without an embedding gets an
    empty list. Every query must be a ``str``, as for
    ``word_similarity_batch``: ``None``, NaN (a missing value of a pandas
    column), numbers and ``bytes`` raise ``TypeError`` naming the row (drop
    missing values first, e.g. ``series.dropna()``).

    Parameters
    ----------
    words
        Query words: a list (Dask bag partition, a chunk of a list) or a
        pandas Series.
    emb
        The embeddings, or embeddings wrapped by :func:`shared`.
    k
        Neighbours per word.

    Returns
    -------
    list or pandas.Series
        ``(word, [(neighbour, cosine), ...])`` per query word, best first
        (a Series with the input's index for a Series).

    Raises
    ------
    TypeError
        If a query is not a ``str``, naming its position (and index label
        for a Series), or ``words`` is a single string.

    Examples
    --------
    >>> import numpy as np
    >>> from finalfusion import Embeddings, NdArray, SimpleVocab
    >>> m = np.array([[1, 0], [0.8, 0.6], [0, 1]], dtype=np.float32)
    >>> emb = Embeddings(NdArray(m), SimpleVocab(["a", "b", "c"]))
    >>> [(w, [(n, round(s, 2)) for n, s in nb]) for w, nb in neighbours_partition(["a", "zz"], emb, k=1)]
    [('a', [('b', 0.8)]), ('zz', [])]
    """
    emb = _embeddings(emb)
    pd = _pandas_series(words)
    queries = _query_words(words, pd)
    idx, sims = emb.word_similarity_batch(queries, k)
    vocab_words = emb.vocab.words
    rows = [(w, [(vocab_words[j], float(s)) for j, s in zip(idx[i].tolist(), sims[i].tolist(), strict=True) if j >= 0]) for i, w in enumerate(queries)]
    if pd is None:
        return rows
    out = np.empty(len(rows), dtype=object)
    out[:] = rows
    return pd.Series(out, index=words.index, name=words.name, dtype=object)


def _query_words(words: Any, pd: Any) -> list[str]:
    """The query words of a partition as a list, each checked to be a ``str`` (the rule of ``word_similarity_batch``)."""
    if isinstance(words, (str, bytes)):
        raise TypeError(f"words must be a partition of query words, not a single {type(words).__name__}: {words!r:.60}")
    queries = list(words)
    try:
        check_word_items(queries)
    except TypeError:
        i, bad = next((i, w) for i, w in enumerate(queries) if not isinstance(w, str))
        label = words.index[i] if pd is not None else None
        label = label.item() if isinstance(label, np.generic) else label  # 11, not np.int64(11)
        row = f"row {label!r} (position {i})" if pd is not None else f"words[{i}]"
        raise TypeError(f"query words must be str: {row} is {type(bad).__name__} {bad!r:.60} (drop missing values first)") from None
    return [str(w) for w in queries]  # subclasses such as numpy.str_ become plain str


class EmbedBatches:
    """Callable class for Ray Data ``map_batches``: embeds a column of token lists.

    Ray constructs one instance per actor, so the embeddings are unpickled
    (their file mapped, their vocabulary read) once per worker process rather
    than once per batch. Each call adds a column of ``float32`` arrays, one
    per row: ``(len(tokens), dims)`` matrices or, with ``pooling``, vectors.

    Parameters
    ----------
    emb
        The embeddings, or embeddings wrapped by :func:`shared` (resolved
        when the instance is made: once per Ray actor).
    column
        Name of the input column of token lists.
    output
        Name of the column to add.
    pooling
        See :func:`embed_documents`.

    Examples
    --------
    Ray::

        ds.map_batches(EmbedBatches, fn_constructor_args=(emb_ref,), batch_format="numpy", compute=ActorPoolStrategy(size=2))

    Without Ray, on one batch in Ray's ``"numpy"`` format:

    >>> import numpy as np
    >>> from finalfusion import Embeddings, NdArray, SimpleVocab
    >>> emb = Embeddings(NdArray(np.eye(2, dtype=np.float32)), SimpleVocab(["a", "b"]))
    >>> batch = {"id": np.array([7, 8]), "tokens": np.array([["a", "b"], ["b", "zz"]], dtype=object)}
    >>> out = EmbedBatches(emb, pooling="sum")(batch)
    >>> out["id"].tolist(), [v.tolist() for v in out["vectors"]]
    ([7, 8], [[1.0, 1.0], [0.0, 1.0]])
    """

    def __init__(self, emb: EmbeddingsArg, column: str = "tokens", output: str = "vectors", *, pooling: str | None = None) -> None:
        if pooling not in POOLINGS:
            raise ValueError(f"pooling must be one of {POOLINGS}, got {pooling!r}")
        self.emb = _embeddings(emb)
        self.column = column
        self.output = output
        self.pooling = pooling

    def __call__(self, batch: dict[str, Any]) -> dict[str, Any]:
        """Return ``batch`` with the :attr:`output` column added."""
        rows = embed_documents(self.emb, batch[self.column], pooling=self.pooling)
        out = np.empty(len(rows), dtype=object)
        out[:] = rows
        return {**batch, self.output: out}


def file_changed(exc: BaseException) -> FileChangedError | None:
    """The :class:`~finalfusion.FileChangedError` inside an engine's exception, if any.

    Dask and Ray wrap an exception raised while a worker or the scheduler
    unpickles the arguments of a task (Dask: ``RuntimeError`` "Error during
    deserialization of the task graph"; Ray: ``RayTaskError(RaySystemError)``).
    This follows ``__cause__``, ``__context__``, Ray's ``cause`` and
    ``client_exc`` and returns the first ``FileChangedError`` found.

    Examples
    --------
    >>> try:
    ...     try:
    ...         raise FileChangedError("/data/big.fifu changed since the embeddings were pickled")
    ...     except FileChangedError as err:
    ...         raise RuntimeError("Error during deserialization of the task graph") from err
    ... except RuntimeError as wrapped:
    ...     print(file_changed(wrapped))
    /data/big.fifu changed since the embeddings were pickled
    >>> file_changed(ValueError("other")) is None
    True
    """
    seen: set[int] = set()
    todo: list[Any] = [exc]
    while todo:
        e = todo.pop()
        if not isinstance(e, BaseException) or id(e) in seen:
            continue
        seen.add(id(e))
        if isinstance(e, FileChangedError):
            return e
        todo.extend(getattr(e, name, None) for name in ("__cause__", "__context__", "cause", "client_exc"))
    return None
