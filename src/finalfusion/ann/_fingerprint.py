"""What an index was built over: a digest of the words and of every byte of the word rows.

An index answers with row ids; used with other embeddings it would name
the wrong words or miss the best ones, silently. So an index records a
:class:`Fingerprint` of the embeddings it was built for -- SHA-256 over the
words and over the full data of their rows (dense: the matrix rows;
quantized: codes, centroids, projection and norms) -- and refuses
embeddings whose fingerprint differs.

Hashing reads every byte of the word rows once: SHA-256 runs at about
1.6 GB/s per core on this machine (SHA extensions), hashed in 64 MiB
pieces on the library's threads, so 1M x 300 float32 rows (1.2 GB) take
about 0.4 s on two cores, 2M rows about 0.8 s. The words add about 0.2 s
per million. A check is done once per embeddings object and cached (see
:meth:`finalfusion.ann.AnnIndex.check`), and an index remembers the
embeddings it was built from. Across indexes, the process remembers the
fingerprint of storage that cannot change (:func:`unchanging`: every array
read-only down to a read-only buffer, as memory-mapped files are), per
storage and vocabulary object, so it is computed once per process for
them. The cheaper ``verify="file"``
(an explicit opt-in) accepts memory-mapped embeddings whose file has the
size, modification time and edge digest recorded at build time, without
hashing the rows.
"""

from __future__ import annotations

import functools
import hashlib
import struct
import threading
import weakref
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from finalfusion._fileref import FileRef
from finalfusion._threads import run_tasks, threads_for
from finalfusion.similarity._protocol import Queryable
from finalfusion.storage.ndarray import NdArray
from finalfusion.storage.quantized import QuantizedArray

__all__ = ["MEMO_ENTRIES", "PIECE_BYTES", "Fingerprint", "SourceFile", "fingerprint", "shape_difference", "source_file", "unchanging"]

#: Bytes hashed per task: the digests of the pieces are hashed again (a two-level hash, so threads can share the work).
PIECE_BYTES: Final = 1 << 26

#: Fingerprints remembered for unchanging storage (a few hundred bytes each; entries whose objects are gone are dropped).
MEMO_ENTRIES: Final = 32

# (id(storage), id(vocab)) -> (weak reference to storage, to vocab, fingerprint); guarded by _MEMO_LOCK
_MEMO: dict[tuple[int, int], tuple[weakref.ref[Any], weakref.ref[Any], Fingerprint]] = {}
_MEMO_LOCK = threading.Lock()


def shape_difference(built: tuple[int, int], given: tuple[int, int]) -> str:
    """The words and dims an index was built for, then (in parentheses) those of the embeddings given.

    Examples
    --------
    >>> shape_difference((5338, 64), (84, 16))
    '5,338 words x 64 dims (these have 84 words x 16 dims)'
    """
    return f"{built[0]:,} words x {built[1]} dims (these have {given[0]:,} words x {given[1]} dims)"


@dataclass(frozen=True)
class Fingerprint:
    """The embeddings an index was built for.

    Parameters
    ----------
    storage
        Storage type name (``"NdArray"`` or ``"QuantizedArray"``).
    n
        Number of words (= indexed row ids ``0 .. n - 1``).
    dims
        Dimensionality of the rows.
    words
        SHA-256 (hex) of the words in vocabulary order.
    rows
        Two-level SHA-256 (hex) of the full data of the word rows.

    Examples
    --------
    >>> import numpy as np
    >>> from finalfusion import Embeddings, NdArray, SimpleVocab
    >>> a = Embeddings(NdArray(np.eye(2, dtype=np.float32)), SimpleVocab(["a", "b"]))
    >>> b = Embeddings(NdArray(np.eye(2, dtype=np.float32)), SimpleVocab(["a", "c"]))
    >>> fingerprint(a).difference(fingerprint(b))
    'different words'
    """

    storage: str
    n: int
    dims: int
    words: str
    rows: str

    def difference(self, other: Fingerprint) -> str | None:
        """What differs between the embeddings of ``self`` (an index's) and ``other`` (those given), in words, or ``None``.

        Examples
        --------
        >>> index = Fingerprint("NdArray", 5338, 64, "", "")
        >>> index.difference(Fingerprint("NdArray", 84, 16, "", ""))
        '5,338 words x 64 dims (these have 84 words x 16 dims)'
        """
        if (self.n, self.dims) != (other.n, other.dims):
            return shape_difference((self.n, self.dims), (other.n, other.dims))
        if self.words != other.words:
            return "different words"
        if self.storage != other.storage:
            return f"{self.storage} storage (these have {other.storage} storage)"
        if self.rows != other.rows:
            return "different row data"
        return None

    def to_dict(self) -> dict[str, Any]:
        """The fields as a JSON-ready dictionary.

        Examples
        --------
        >>> import numpy as np
        >>> from finalfusion import Embeddings, NdArray, SimpleVocab
        >>> d = fingerprint(Embeddings(NdArray(np.eye(2, dtype=np.float32)), SimpleVocab(["a", "b"]))).to_dict()
        >>> sorted(d), d["n"], d["storage"]
        (['dims', 'n', 'rows', 'storage', 'words'], 2, 'NdArray')
        """
        return asdict(self)


@dataclass(frozen=True)
class SourceFile:
    """The memory-mapped file embeddings came from: size, modification time, edge digest (no path is ever opened from it)."""

    size: int
    mtime_ns: int
    digest: str


def source_file(emb: Queryable) -> SourceFile | None:
    """The local file ``emb`` is mapped from, if it was loaded by reference (``load_finalfusion(path, mmap=True)``).

    Embeddings whose rows stay at a server (``load_finalfusion(url,
    mmap=True)``) have none: no file here to recognise by its size and
    modification time, so an index checks them by their rows (``verify="full"``).
    """
    ref = getattr(emb, "_file_ref", None)
    if not isinstance(ref, FileRef):
        return None
    return SourceFile(int(ref.size), int(ref.mtime_ns), str(ref.digest))


def words_digest(words: Sequence[str]) -> str:
    """SHA-256 of the words: their lengths (code points, little-endian u64) and their UTF-8 text.

    Examples
    --------
    >>> words_digest(["ab", "c"]) != words_digest(["a", "bc"])
    True
    """
    h = hashlib.sha256()
    lengths = np.fromiter(map(len, words), dtype="<u8", count=len(words))
    h.update(lengths.tobytes())
    h.update("".join(words).encode("utf-8", "surrogatepass"))
    return h.hexdigest()


def _pieces(arrays: Sequence[npt.NDArray[Any]]) -> list[npt.NDArray[Any]]:
    """``arrays`` cut along their first axis into pieces of at most about :data:`PIECE_BYTES` (views: nothing is copied here)."""
    out: list[npt.NDArray[Any]] = []
    for a in arrays:
        row_bytes = max(1, a.dtype.itemsize * int(np.prod(a.shape[1:], dtype=np.int64)))
        step = max(1, PIECE_BYTES // row_bytes)
        out.extend(a[i : i + step] for i in range(0, len(a), step))
        if not len(a):
            out.append(a)
    return out


def _piece_digest(piece: npt.NDArray[Any]) -> bytes:
    """SHA-256 of a piece's bytes, little-endian and in C order (a copy only for a piece that is not already so)."""
    c = np.ascontiguousarray(piece, dtype=piece.dtype.newbyteorder("<"))
    return hashlib.sha256(memoryview(c.reshape(-1)).cast("B")).digest()  # type: ignore[arg-type]


def _row_arrays(emb: Queryable, n: int) -> tuple[str, list[npt.NDArray[Any]]]:
    storage = emb.storage
    if isinstance(storage, NdArray):
        return "NdArray", [storage.matrix[:n]]
    if isinstance(storage, QuantizedArray):
        pq = storage.quantizer
        parts: list[npt.NDArray[Any]] = [np.asarray(storage.quantized_embeddings[:n]), np.asarray(pq.quantizers)]
        parts.append(np.asarray(pq.projection) if pq.projection is not None else np.zeros(0, np.float32))
        parts.append(np.asarray(storage.norms[:n]) if storage.norms is not None else np.zeros(0, np.float32))
        return "QuantizedArray", parts
    raise TypeError(f"an approximate index needs NdArray or QuantizedArray storage, not {type(storage).__name__}")


def unchanging(a: npt.NDArray[Any]) -> bool:
    """Whether nothing can write to ``a``'s data: every array down its ``base`` chain is read-only, and so is the buffer under them.

    True for rows memory-mapped from a file (``load_finalfusion(path,
    mmap=True)``) or read-only views of ``bytes``; false for arrays that own
    their memory (their flag can be switched back) or sit on a writable buffer.

    Examples
    --------
    >>> import numpy as np
    >>> unchanging(np.frombuffer(b"\\0" * 8, dtype=np.float32)), unchanging(np.zeros(2, dtype=np.float32))
    (True, False)
    """
    obj: Any = a
    while isinstance(obj, np.ndarray):
        if obj.flags.writeable:
            return False
        obj = obj.base
    if obj is None:
        return False
    try:
        with memoryview(obj) as view:
            return bool(view.readonly)
    except TypeError:
        return False


def fingerprint(emb: Queryable, *, threads: int | None = None) -> Fingerprint:
    """The :class:`Fingerprint` of ``emb``: reads every byte of its word rows once (on ``threads`` threads).

    For storage whose arrays are all :func:`unchanging`, the result is
    remembered per storage and vocabulary object for the rest of the process
    (the words are taken to be as fixed as the vocabulary's index of them is).

    Raises
    ------
    TypeError
        If the storage is neither dense nor quantized.
    """
    words = emb.vocab.words
    n = len(words)
    kind, arrays = _row_arrays(emb, n)
    key = (id(emb.storage), id(emb.vocab))
    if all(map(unchanging, arrays)):
        with _MEMO_LOCK:
            known = _MEMO.get(key)
        if known is not None and known[0]() is emb.storage and known[1]() is emb.vocab and known[2].n == n:
            return known[2]
        fp = _computed(kind, arrays, words, emb.storage.shape[1], threads)
        _remember(key, emb, fp)
        return fp
    return _computed(kind, arrays, words, emb.storage.shape[1], threads)


def _remember(key: tuple[int, int], emb: Queryable, fp: Fingerprint) -> None:
    """Remember ``fp`` for ``emb``'s storage and vocabulary (not when they cannot be weakly referenced)."""
    try:
        refs = (weakref.ref(emb.storage), weakref.ref(emb.vocab))
    except TypeError:
        return
    with _MEMO_LOCK:
        for k in [k for k, v in _MEMO.items() if v[0]() is None or v[1]() is None]:
            del _MEMO[k]
        while len(_MEMO) >= MEMO_ENTRIES:
            del _MEMO[next(iter(_MEMO))]
        _MEMO[key] = (*refs, fp)


def _computed(kind: str, arrays: list[npt.NDArray[Any]], words: Sequence[str], dims: int, threads: int | None) -> Fingerprint:
    """Hash the words and the row arrays."""
    n = len(words)
    pieces = _pieces(arrays)
    digests: list[bytes] = [b""] * len(pieces)

    def task(i: int) -> None:
        digests[i] = _piece_digest(pieces[i])

    run_tasks((functools.partial(task, i) for i in range(len(pieces))), threads_for(threads))
    top = hashlib.sha256(kind.encode())
    for a in arrays:
        top.update(struct.pack("<B", len(a.shape)) + struct.pack(f"<{len(a.shape)}Q", *a.shape) + str(a.dtype.newbyteorder("<")).encode())
    top.update(b"".join(digests))
    return Fingerprint(kind, n, dims, words_digest(words), top.hexdigest())
