"""Rows of a matrix left at the server: a remote file's ``.fifu`` storage read on demand (``load_finalfusion(url, mmap=True)``).

A :class:`RemoteRows` is a read-only, array-like matrix of fixed-size rows
at a byte range of a remote file (:class:`~finalfusion._remote.RangeSource`).
Indexing it (an int, a slice, integer arrays) fetches the blocks of rows it
touches -- whole blocks of about :data:`BLOCK_BYTES`, the missing ones of one
call in one round of concurrent range requests -- and keeps them in a cache
bounded in bytes (``cache_bytes``, default :data:`CACHE_BYTES`; the oldest
block goes first). A read larger than the cache (a long slice, the whole
matrix) streams its rows in order, once, past the cache. Every block is
checked when it arrives (``check``: the quantized codes below the number of
centroids, as a local load checks them all), so a row is never answered from
bytes a local load would refuse. :class:`RowsAt` is what a storage chunk's
head parse is given to make one: it checks that the rows end where the chunk
does.

It sits next to :mod:`finalfusion._remote`, below the storage chunks
(:class:`~finalfusion.NdArray` holds one as its ``matrix``,
:class:`~finalfusion.QuantizedArray` as its codes) and the container, which
builds them.
"""

from __future__ import annotations

import collections
import threading
from collections.abc import Callable, Iterator
from types import SimpleNamespace
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from finalfusion._remote import RangeSource
from finalfusion.errors import FormatError, Truncated

__all__ = ["BLOCK_BYTES", "CACHE_BYTES", "RemoteRows", "RowsAt", "is_remote"]

#: Bytes of one block of rows (at least one row): what a lookup of one row fetches.
BLOCK_BYTES: Final = 2048
#: Default bytes of blocks a :class:`RemoteRows` keeps (``cache_bytes=`` of :func:`finalfusion.load_finalfusion`).
CACHE_BYTES: Final = 32 << 20
#: Rows streamed per step when a read is larger than the cache (whole-matrix work), at most this many bytes.
STREAM_STEP_BYTES: Final = 8 << 20

#: ``check(block, first_row)`` raises :class:`FormatError` for rows a local load would refuse.
RowCheck = Callable[[npt.NDArray[Any], int], None]


def is_remote(array: object) -> bool:
    """Whether ``array`` is rows left at a server (:class:`RemoteRows`), not an array in memory.

    Examples
    --------
    >>> import numpy as np
    >>> is_remote(np.zeros((2, 2)))
    False
    """
    return isinstance(array, RemoteRows)


class RemoteRows:
    """A read-only ``rows x cols`` matrix of ``dtype`` at byte ``offset`` of a remote file, fetched in blocks as indexed.

    Parameters
    ----------
    source
        The remote file.
    offset
        Where the first row starts.
    shape
        ``(rows, cols)``.
    dtype
        The little-endian dtype of the file (``"<f4"``, ``"u1"``); answers are native.
    cache_bytes
        Bytes of blocks kept (at least one block is).
    check
        Called with every block that arrives and the index of its first row.

    Examples
    --------
    ``load_finalfusion(url, mmap=True)`` makes them; here a stand-in for the
    server (a :class:`~finalfusion._remote.RangeSource` fetches ranges over the network):

    >>> class Server:
    ...     url, data, asked = "memory", np.arange(6, dtype="<f4").tobytes(), []
    ...     def fetch(self, ranges):
    ...         self.asked.append(ranges)
    ...         return [self.data[a:b] for a, b in ranges]
    >>> server = Server()
    >>> rows = RemoteRows(server, 0, (3, 2), "<f4")
    >>> rows[2].tolist(), rows[[0, 2]].tolist(), rows.shape
    ([4.0, 5.0], [[0.0, 1.0], [4.0, 5.0]], (3, 2))
    >>> server.asked  # one block (up to 2 KiB of whole rows) held all three rows: fetched once
    [[(0, 24)]]
    """

    def __init__(
        self, source: RangeSource, offset: int, shape: tuple[int, int], dtype: str, *, cache_bytes: int | None = None, check: RowCheck | None = None
    ) -> None:
        self._source = source
        self._offset = offset
        self.shape = (int(shape[0]), int(shape[1]))
        self._file_dtype = np.dtype(dtype)
        self.dtype = self._file_dtype.newbyteorder("=")
        self._row_bytes = self.shape[1] * self._file_dtype.itemsize
        self._block_rows = max(1, BLOCK_BYTES // max(1, self._row_bytes))
        self.cache_bytes = CACHE_BYTES if cache_bytes is None else int(cache_bytes)
        self._max_blocks = max(1, self.cache_bytes // max(1, self._block_rows * self._row_bytes))
        self._check = check
        self._blocks: collections.OrderedDict[int, npt.NDArray[Any]] = collections.OrderedDict()
        self._lock = threading.Lock()
        self.flags = SimpleNamespace(writeable=False, c_contiguous=True, owndata=False)

    # -- numpy-like attributes --------------------------------------------------------
    @property
    def ndim(self) -> int:
        return 2

    @property
    def size(self) -> int:
        return self.shape[0] * self.shape[1]

    @property
    def itemsize(self) -> int:
        return int(self.dtype.itemsize)

    @property
    def nbytes(self) -> int:
        return self.shape[0] * self._row_bytes

    @property
    def cached_bytes(self) -> int:
        """Bytes of the blocks held now (at most ``cache_bytes``, or one block)."""
        with self._lock:
            return sum(int(b.nbytes) for b in self._blocks.values())

    @property
    def url(self) -> str:
        """The URL of the file the rows are in."""
        return self._source.url

    def __len__(self) -> int:
        return self.shape[0]

    def __repr__(self) -> str:
        return f"RemoteRows(shape={self.shape}, dtype={self.dtype}, url={self._source.url!r}, offset={self._offset})"

    # -- reading ----------------------------------------------------------------------
    def __getitem__(self, key: Any) -> npt.NDArray[Any]:
        if isinstance(key, tuple):
            if not key:
                return self._range(0, self.shape[0])
            rows = self[key[0]]
            if isinstance(key[0], (int, np.integer)):
                picked: npt.NDArray[Any] = rows[key[1:]]
                return picked
            if isinstance(key[0], slice) or np.ndim(key[0]) == 1:
                # The picked rows in their order stand for key[0]: an index array pairs with later index arrays as in numpy.
                first = slice(None) if isinstance(key[0], slice) else np.arange(len(rows))
                rest: tuple[Any, ...] = (first, *key[1:])
                out: npt.NDArray[Any] = rows[rest]
                return out
            whole: npt.NDArray[Any] = np.asarray(self)[key]  # numpy's rules for several advanced indices: on the matrix itself
            return whole
        if isinstance(key, (int, np.integer)) and not isinstance(key, bool):
            n = self.shape[0]
            if not -n <= key < n:
                raise IndexError(f"index {key} is out of bounds for axis 0 with size {n}")
            row: npt.NDArray[Any] = self._gather(np.array([int(key) % n], dtype=np.intp))[0]
            return row
        if isinstance(key, slice):
            start, stop, step = key.indices(self.shape[0])
            if step == 1:
                return self._range(start, max(start, stop))
            return self._gather(np.arange(start, stop, step, dtype=np.intp))
        if key is Ellipsis:
            return self._range(0, self.shape[0])
        idx = np.asarray(key)
        if idx.dtype == np.bool_:
            if idx.shape != (self.shape[0],):
                raise IndexError(f"boolean index of shape {idx.shape} does not match {self.shape[0]} rows")
            idx = np.flatnonzero(idx)
        elif idx.dtype.kind not in "iu":
            if idx.size:
                raise IndexError("only integers, slices, ellipsis and integer or boolean arrays are valid indices")
            idx = idx.astype(np.intp)
        n = self.shape[0]
        flat = idx.reshape(-1).astype(np.intp)
        if flat.size and (flat.min() < -n or flat.max() >= n):
            bad = int(flat[(flat < -n) | (flat >= n)][0])
            raise IndexError(f"index {bad} is out of bounds for axis 0 with size {n}")
        flat = np.where(flat < 0, flat + n, flat)
        return self._gather(flat).reshape(*idx.shape, self.shape[1])

    def take(self, indices: npt.ArrayLike, axis: int | None = 0, out: npt.NDArray[Any] | None = None) -> npt.NDArray[Any]:
        """Rows at ``indices`` (``axis=0`` only), into ``out`` if given, as ``ndarray.take`` does.

        Raises
        ------
        ValueError
            For another axis.
        """
        if axis != 0:
            raise ValueError("rows left at a server are taken along axis 0 only")
        rows = self[np.asarray(indices)]
        if out is None:
            return rows
        out[...] = rows
        return out

    def __iter__(self) -> Iterator[npt.NDArray[Any]]:
        for _, block in self.blocks():
            yield from block

    def blocks(self, step_bytes: int = STREAM_STEP_BYTES) -> Iterator[tuple[int, npt.NDArray[Any]]]:
        """``(first row, rows)`` for consecutive steps of at most ``step_bytes`` covering the matrix, read in order once."""
        step = max(1, step_bytes // max(1, self._row_bytes))
        for lo in range(0, self.shape[0], step):
            yield lo, self._range(lo, min(lo + step, self.shape[0]))

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> npt.NDArray[Any]:
        whole = self._range(0, self.shape[0])
        return whole if dtype is None else whole.astype(dtype)

    def copy(self) -> npt.NDArray[Any]:
        """The whole matrix in memory (streamed once)."""
        return np.asarray(self)

    def astype(self, dtype: Any, copy: bool = True) -> npt.NDArray[Any]:
        """The whole matrix in memory as ``dtype``."""
        return np.asarray(self).astype(dtype)

    def __array_function__(self, func: Any, types: Any, args: Any, kwargs: Any) -> Any:
        if func is np.take and args and args[0] is self:
            return self.take(*args[1:], **kwargs)
        # Anything else needs the values: the whole matrix, streamed once per call.
        args = tuple(np.asarray(a) if isinstance(a, RemoteRows) else a for a in args)
        kwargs = {k: np.asarray(v) if isinstance(v, RemoteRows) else v for k, v in kwargs.items()}
        return func(*args, **kwargs)

    def __copy__(self) -> RemoteRows:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> RemoteRows:
        return self  # read-only rows at a server: a copy of the embeddings shares them (and their cache), as a mapped file is shared

    def __reduce__(self) -> tuple[Any, ...]:
        # Pickled by value (the embeddings pickle by reference, see finalfusion._pickling): the matrix itself.
        return (np.asarray, (np.asarray(self),))

    def _range(self, lo: int, hi: int) -> npt.NDArray[Any]:
        """Rows ``lo:hi``: through the cache when they fit in it, else streamed in order past it."""
        if hi <= lo:
            return np.empty((0, self.shape[1]), dtype=self.dtype)
        first, last = lo // self._block_rows, (hi - 1) // self._block_rows
        if last - first + 1 <= self._max_blocks:
            return self._gather(np.arange(lo, hi, dtype=np.intp))
        out = np.empty((hi - lo, self.shape[1]), dtype=self.dtype)
        step = max(self._block_rows, STREAM_STEP_BYTES // max(1, self._row_bytes) // self._block_rows * self._block_rows)
        at = lo
        while at < hi:
            stop = min(hi, at + step)
            (data,) = self._source.fetch([(self._offset + at * self._row_bytes, self._offset + stop * self._row_bytes)])
            rows = self._decode(data, at, stop - at)
            out[at - lo : stop - lo] = rows
            at = stop
        return out

    def _decode(self, data: bytes, first: int, count: int) -> npt.NDArray[Any]:
        rows = np.frombuffer(data, dtype=self._file_dtype, count=count * self.shape[1]).reshape(count, self.shape[1])
        if self._check is not None:
            self._check(rows, first)
        return rows.astype(self.dtype, copy=False)

    def _gather(self, flat: npt.NDArray[np.intp]) -> npt.NDArray[Any]:
        """The rows at ``flat`` (in range), from the blocks they are in: the missing ones fetched in one round."""
        out = np.empty((len(flat), self.shape[1]), dtype=self.dtype)
        if not len(flat):
            return out
        br = self._block_rows
        which = flat // br
        needed = np.unique(which)
        have: dict[int, npt.NDArray[Any]] = {}
        with self._lock:
            for b in needed.tolist():
                block = self._blocks.get(b)
                if block is not None:
                    self._blocks.move_to_end(b)
                    have[b] = block
        missing = [b for b in needed.tolist() if b not in have]
        if missing:
            have.update(self._fetch_blocks(missing))
        for b in needed.tolist():
            sel = which == b
            out[sel] = have[b][flat[sel] - b * br]
        return out

    def _fetch_blocks(self, missing: list[int]) -> dict[int, npt.NDArray[Any]]:
        br, n = self._block_rows, self.shape[0]
        runs: list[tuple[int, int]] = []  # consecutive blocks: one range each
        for b in missing:
            if runs and runs[-1][1] == b:
                runs[-1] = (runs[-1][0], b + 1)
            else:
                runs.append((b, b + 1))
        ranges = [(self._offset + a * br * self._row_bytes, self._offset + min(z * br, n) * self._row_bytes) for a, z in runs]
        fetched = self._source.fetch(ranges)
        got: dict[int, npt.NDArray[Any]] = {}
        for (a, z), data in zip(runs, fetched, strict=True):
            rows = self._decode(data, a * br, min(z * br, n) - a * br)
            for b in range(a, z):
                got[b] = rows[(b - a) * br : (b - a + 1) * br].copy()  # its own memory: evicting it frees it
        with self._lock:
            for b, block in got.items():
                self._blocks[b] = block
                self._blocks.move_to_end(b)
            while len(self._blocks) > self._max_blocks:
                self._blocks.popitem(last=False)
        return got


class RowsAt:
    """What a storage chunk's head parse is given to leave its rows at the server (see :meth:`rows`).

    ``base`` is the file offset of the parse buffer's first byte, ``end`` the
    file offset where the chunk's declared payload ends.
    """

    def __init__(self, source: RangeSource, cache_bytes: int | None, base: int, end: int, chunk: str) -> None:
        self.source = source
        self.cache_bytes = cache_bytes
        self.base = base
        self.end = end
        self.chunk = chunk

    def rows(self, pos: int, shape: tuple[int, int], dtype: str, what: str, check: RowCheck | None = None) -> RemoteRows:
        """The rows that start at buffer position ``pos`` and must fill the rest of the chunk exactly.

        Raises
        ------
        Truncated
            If they run past the chunk's declared end.
        FormatError
            If the chunk declares bytes after them.
        """
        at = self.base + pos
        need = shape[0] * shape[1] * np.dtype(dtype).itemsize
        left = self.end - at
        # Offsets of these errors are positions in the parse buffer, as the reader's are (the caller moves them).
        if need > left:
            raise Truncated(f"{what} does not fit in the chunk", offset=pos, chunk=self.chunk, expected=f"{need} bytes", found=f"{left} bytes")
        if need != left:
            raise FormatError(
                "chunk length disagrees with the parsed contents",
                offset=pos,
                chunk=self.chunk,
                expected=f"{left} bytes of {what} (declared)",
                found=f"{need} bytes",
            )
        return RemoteRows(self.source, at, shape, dtype, cache_bytes=self.cache_bytes, check=check)
