"""``QuantizedArray`` chunk (id 4): product-quantized embeddings (docs/format.md §5.4).

===========  ==============  =============================================
body offset  type            field
===========  ==============  =============================================
0            u32             use_projection (0/1)
4            u32             use_norms (0/1)
8            u32             q, subquantizers (= bytes per row)
12           u32             d, reconstructed dimensionality
16           u32             k, centroids per subquantizer (<= 256)
20           u64             r, rows
28           u32             quantized type id, 1 (u8)
32           u32             reconstructed type id, 10 (f32)
36           1..4 bytes      zero padding to 4-byte file alignment
..           f32 x d·d       projection (only if use_projection)
..           f32 x q·k·d/q   centroids, shape ``[q][k][d/q]``
..           f32 x r         norms (only if use_norms)
..           u8 x r·q        codes, shape ``[r][q]``
===========  ==============  =============================================

Row ``i`` is ``concat(centroids[j][codes[i, j]]) @ projection.T * norms[i]``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, ClassVar, cast

import numpy as np
import numpy.typing as npt

from finalfusion._binary import ByteReader, ByteWriter, check_array_size, check_dims, padding
from finalfusion._remote_rows import RowsAt, is_remote
from finalfusion.chunks import ChunkIdentifier, TypeId, register
from finalfusion.errors import FormatError, Truncated
from finalfusion.storage.ndarray import Storage, read_type_id

__all__ = ["PQ", "QuantizedArray"]

#: Rows reconstructed at once when iterating over a :class:`QuantizedArray`.
_ITER_ROWS = 4096


@dataclass(frozen=True, eq=False)
class PQ:
    """A product quantizer: per-subspace centroids and an optional rotation.

    Parameters
    ----------
    quantizers
        ``float32`` array of shape ``(q, k, d // q)``.
    projection
        Optional ``(d, d)`` matrix; reconstruction multiplies by its transpose.

    Examples
    --------
    >>> import numpy as np
    >>> pq = PQ(np.arange(8, dtype=np.float32).reshape(2, 2, 2), None)
    >>> pq.reconstruct(np.array([[1, 0]], dtype=np.uint8)).tolist()
    [[2.0, 3.0, 4.0, 5.0]]
    """

    quantizers: npt.NDArray[np.float32]
    projection: npt.NDArray[np.float32] | None = None

    def __post_init__(self) -> None:
        q = np.asarray(self.quantizers)
        if q.ndim != 3:
            raise ValueError(f"quantizers must have shape (n_subquantizers, n_centroids, sub_dims), got {q.shape}")
        if not 1 <= q.shape[1] <= 256:
            raise ValueError(f"number of centroids must be in 1..256, got {q.shape[1]}")
        if q.shape[0] == 0 or q.shape[2] == 0:
            raise ValueError(f"quantizers need at least one subquantizer of at least one dimension: expected shape (q >= 1, k, d // q >= 1), got {q.shape}")
        if q.dtype != np.float32:
            q = q.astype(np.float32)
        object.__setattr__(self, "quantizers", q)
        if self.projection is not None:
            p = np.asarray(self.projection, dtype=np.float32)
            d = q.shape[0] * q.shape[2]
            if p.shape != (d, d):
                raise ValueError(f"projection must have shape ({d}, {d}), got {p.shape}")
            object.__setattr__(self, "projection", p)

    @property
    def n_centroids(self) -> int:
        """Centroids per subquantizer.

        Examples
        --------
        >>> PQ(np.zeros((4, 16, 2), dtype=np.float32)).n_centroids
        16
        """
        return int(self.quantizers.shape[1])

    @property
    def quantized_len(self) -> int:
        """Number of subquantizers (bytes per encoded row).

        Examples
        --------
        >>> PQ(np.zeros((4, 16, 2), dtype=np.float32)).quantized_len
        4
        """
        return int(self.quantizers.shape[0])

    @property
    def reconstructed_len(self) -> int:
        """Dimensionality of reconstructed vectors: subquantizers times their dimensionality.

        Examples
        --------
        >>> PQ(np.zeros((4, 16, 2), dtype=np.float32)).reconstructed_len
        8
        """
        return int(self.quantizers.shape[0] * self.quantizers.shape[2])

    @property
    def subquantizers(self) -> npt.NDArray[np.float32]:
        """The centroids, shape ``(q, k, d // q)`` (the same array as ``quantizers``).

        Examples
        --------
        >>> pq = PQ(np.zeros((4, 16, 2), dtype=np.float32))
        >>> pq.subquantizers.shape, pq.subquantizers is pq.quantizers
        ((4, 16, 2), True)
        """
        return self.quantizers

    def reconstruct(self, codes: npt.ArrayLike, out: npt.NDArray[np.float32] | None = None) -> npt.NDArray[np.float32]:
        """Reconstruct vectors from codes of shape ``(..., q)`` (no norms applied).

        Examples
        --------
        >>> pq = PQ(np.arange(8, dtype=np.float32).reshape(2, 2, 2))  # centroids [0 1], [2 3] and [4 5], [6 7]
        >>> pq.reconstruct([1, 1]).tolist(), pq.reconstruct([[0, 0], [1, 0]]).tolist()
        ([2.0, 3.0, 6.0, 7.0], [[0.0, 1.0, 4.0, 5.0], [2.0, 3.0, 4.0, 5.0]])
        """
        c = np.asarray(codes)
        q = self.quantized_len
        flat = c.reshape(-1, q).astype(np.intp)
        vecs: npt.NDArray[np.float32] = self.quantizers[np.arange(q), flat].reshape(len(flat), self.reconstructed_len)
        if self.projection is not None:
            vecs = vecs @ self.projection.T
        vecs = vecs.reshape(*c.shape[:-1], self.reconstructed_len)
        if out is not None:
            out[...] = vecs
            return out
        return vecs


@register
@dataclass(frozen=True, eq=False)
class QuantizedArray(Storage):
    """Product-quantized storage.

    Parameters
    ----------
    quantizer
        The :class:`PQ`.
    quantized_embeddings
        ``uint8`` codes, shape ``(rows, q)``.
    norms
        Optional per-row norms applied after reconstruction.

    Examples
    --------
    >>> import numpy as np
    >>> pq = PQ(np.arange(8, dtype=np.float32).reshape(2, 2, 2), None)
    >>> s = QuantizedArray(pq, np.array([[1, 0], [0, 1]], dtype=np.uint8), np.array([1, 2], dtype=np.float32))
    >>> s.shape, s[1].tolist()
    ((2, 4), [0.0, 2.0, 12.0, 14.0])
    """

    quantizer: PQ
    quantized_embeddings: npt.NDArray[np.uint8]
    norms: npt.NDArray[np.float32] | None = None
    chunk_id: ClassVar[ChunkIdentifier] = ChunkIdentifier.QuantizedArray
    rows_last: ClassVar[bool] = True

    def __post_init__(self) -> None:
        codes = self.quantized_embeddings
        if is_remote(codes):  # codes left at a server (a .fifu at a URL with mmap=True): their shape is checked, each block as it arrives
            if codes.shape[1] != self.quantizer.quantized_len:
                raise ValueError(f"codes must have shape (rows, {self.quantizer.quantized_len}), got {codes.shape}")
            self._check_norms(codes.shape[0])
            return
        codes = np.asarray(codes)
        if codes.ndim != 2 or codes.shape[1] != self.quantizer.quantized_len:
            raise ValueError(f"codes must have shape (rows, {self.quantizer.quantized_len}), got {codes.shape}")
        if codes.dtype != np.uint8:
            codes = codes.astype(np.uint8)
        object.__setattr__(self, "quantized_embeddings", codes)
        self._check_norms(codes.shape[0])

    def _check_norms(self, rows: int) -> None:
        if self.norms is not None:
            n = np.asarray(self.norms, dtype=np.float32)
            if n.shape != (rows,):
                raise ValueError(f"norms must have shape ({rows},), got {n.shape}")
            object.__setattr__(self, "norms", n)

    @property
    def shape(self) -> tuple[int, int]:
        return (int(self.quantized_embeddings.shape[0]), self.quantizer.reconstructed_len)

    @property
    def quantized_len(self) -> int:
        """Bytes per encoded row.

        Examples
        --------
        >>> pq = PQ(np.zeros((4, 16, 2), dtype=np.float32))
        >>> QuantizedArray(pq, np.zeros((10, 4), dtype=np.uint8)).quantized_len
        4
        """
        return self.quantizer.quantized_len

    def rows(self, indices: npt.ArrayLike) -> npt.NDArray[np.float32]:
        """Reconstruct the rows at ``indices`` (norms applied) into a new matrix.

        Examples
        --------
        >>> pq = PQ(np.arange(8, dtype=np.float32).reshape(2, 2, 2))
        >>> s = QuantizedArray(pq, np.array([[1, 0], [0, 1]], dtype=np.uint8), norms=np.array([1, 2], dtype=np.float32))
        >>> s.rows([1, 0]).tolist()
        [[0.0, 2.0, 12.0, 14.0], [2.0, 3.0, 4.0, 5.0]]
        """
        idx = np.asarray(indices, dtype=np.intp)
        vecs = self.quantizer.reconstruct(self.quantized_embeddings[idx])
        if self.norms is not None:
            vecs *= self.norms[idx][..., None]
        return vecs

    def row(self, index: int) -> npt.NDArray[np.float32]:
        """Reconstruct row ``index`` (norms applied); a new array.

        Examples
        --------
        >>> pq = PQ(np.arange(8, dtype=np.float32).reshape(2, 2, 2))
        >>> QuantizedArray(pq, np.array([[1, 0]], dtype=np.uint8), norms=np.array([2], dtype=np.float32)).row(0).tolist()
        [4.0, 6.0, 8.0, 10.0]
        """
        row: npt.NDArray[np.float32] = self.rows(np.asarray([index]))[0]
        return row

    def embedding(self, key: Any, out: npt.NDArray[np.float32] | None = None) -> npt.NDArray[np.float32]:
        """Reconstruct the rows selected by ``key`` (norms applied), into ``out`` if given.

        As in finalfusion-python 0.7: an integer gives one vector, a slice or
        a list of integers a matrix, and an integer array of any shape a
        tensor with one more axis holding the vectors.

        Parameters
        ----------
        key
            ``int``, ``slice``, list or integer array of row indices.
        out
            ``float32`` array of the result's shape to reconstruct into.

        Raises
        ------
        TypeError
            If ``key`` is ``None``, a tuple, or not an index.
        IndexError
            If an index is out of range.
        ValueError
            If ``out`` has the wrong shape.

        Examples
        --------
        >>> pq = PQ(np.arange(8, dtype=np.float32).reshape(2, 2, 2))
        >>> s = QuantizedArray(pq, np.array([[1, 0], [0, 1]], dtype=np.uint8))
        >>> out = np.empty(4, dtype=np.float32)
        >>> s.embedding(1, out=out) is out, out.tolist()
        (True, [0.0, 1.0, 6.0, 7.0])
        >>> s.embedding(slice(0, 2)).shape, s.embedding([[0], [1]]).shape
        ((2, 4), (2, 1, 4))
        """
        if key is None or isinstance(key, (tuple, str, bytes, float)):
            raise TypeError(f"rows are selected by an int, a slice or integer indices, not {type(key).__name__}")
        if isinstance(key, slice):
            key = np.arange(self.shape[0])[key]
        elif not isinstance(key, (int, np.integer)):
            key = np.asarray(key)
            if key.dtype.kind not in "iu":
                if key.size:
                    raise TypeError(f"row indices must be integers, not {key.dtype}")
                key = key.astype(np.intp)
        codes = self.quantized_embeddings[key]
        vecs = self.quantizer.reconstruct(codes)
        if self.norms is not None:
            vecs *= self.norms[key][..., None]
        if out is not None:
            if out.shape != vecs.shape:
                raise ValueError(f"out must have shape {vecs.shape}, got {out.shape}")
            out[...] = vecs
            return out
        return vecs

    def __getitem__(self, key: int | np.integer[Any] | slice | npt.ArrayLike) -> npt.NDArray[np.float32]:
        if isinstance(key, (int, np.integer)):
            n = self.shape[0]
            if not -n <= key < n:
                raise IndexError(f"row {key} out of range for {n} rows")
            return self.row(int(key) % n)
        if isinstance(key, slice):
            return self.rows(np.arange(self.shape[0])[key])
        return self.rows(key)

    def __iter__(self) -> Iterator[npt.NDArray[np.float32]]:
        n = self.shape[0]
        for lo in range(0, n, _ITER_ROWS):  # reconstructed in blocks: codes at a server are fetched a block at a time, in order
            yield from self.rows(np.arange(lo, min(lo + _ITER_ROWS, n)))

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> npt.NDArray[Any]:
        full = self.rows(np.arange(self.shape[0]))
        return full if dtype is None else full.astype(dtype)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, QuantizedArray):
            return NotImplemented
        a, b = self.quantizer, other.quantizer
        return (
            np.array_equal(a.quantizers, b.quantizers)
            and _opt_equal(a.projection, b.projection)
            and np.array_equal(self.quantized_embeddings, other.quantized_embeddings)
            and _opt_equal(self.norms, other.norms)
        )

    __hash__ = None  # type: ignore[assignment]

    @classmethod
    def read_payload(cls, reader: ByteReader) -> QuantizedArray:
        pq, rows, norms = _read_quantizer(reader, None)
        q, k = pq.quantized_len, pq.n_centroids
        codes_at = reader.pos
        codes = reader.array("u1", (rows, q), "codes")
        _codes_below(k, codes_at, q, reader.chunk)(codes, 0)
        return cls(pq, codes, norms)

    @classmethod
    def read_head(cls, reader: ByteReader, rows: RowsAt) -> QuantizedArray:
        """The chunk with its codes left at the server (``rows``): the quantizer and norms are read, each block of codes checked as it arrives.

        Examples
        --------
        >>> import io
        >>> pq = PQ(np.arange(8, dtype=np.float32).reshape(2, 2, 2))
        >>> buf = io.BytesIO()
        >>> QuantizedArray(pq, np.array([[1, 0], [0, 1]], dtype=np.uint8)).write_payload(ByteWriter(buf))
        >>> class Rows:  # what finalfusion._remote_rows.RowsAt is asked
        ...     base, end = 0, 76
        ...     def rows(self, pos, shape, dtype, what, check):
        ...         check(np.array([[1, 0]], dtype=np.uint8), 0)  # a block arrives
        ...         return np.zeros(shape, dtype=np.uint8)
        >>> QuantizedArray.read_head(ByteReader(buf.getvalue()[:72]), Rows()).shape
        (2, 4)
        """
        pq, n, norms = _read_quantizer(reader, rows)
        q = pq.quantized_len
        codes_at = rows.base + reader.pos
        codes = rows.rows(reader.pos, (n, q), "u1", "codes", _codes_below(pq.n_centroids, codes_at, q, reader.chunk))
        return cls(pq, cast(npt.NDArray[np.uint8], codes), norms)

    def write_payload(self, writer: ByteWriter) -> None:
        """Write the flags and sizes, the padding, the projection, centroids, norms (if any) and the codes.

        Examples
        --------
        >>> import io
        >>> pq = PQ(np.arange(8, dtype=np.float32).reshape(2, 2, 2))
        >>> s = QuantizedArray(pq, np.array([[1, 0], [0, 1]], dtype=np.uint8))
        >>> buf = io.BytesIO()
        >>> s.write_payload(ByteWriter(buf, 7))
        >>> len(buf.getvalue()) == s.payload_len(7), buf.getvalue()[-4:]  # the codes come last
        (True, b'\\x01\\x00\\x00\\x01')
        """
        pq = self.quantizer
        writer.u32(int(pq.projection is not None))
        writer.u32(int(self.norms is not None))
        writer.u32(pq.quantized_len)
        writer.u32(pq.reconstructed_len)
        writer.u32(pq.n_centroids)
        writer.u64(self.shape[0])
        writer.u32(TypeId.u8)
        writer.u32(TypeId.f32)
        writer.padding()
        if pq.projection is not None:
            writer.array(pq.projection, "<f4")
        writer.array(pq.quantizers, "<f4")
        if self.norms is not None:
            writer.array(self.norms, "<f4")
        if is_remote(self.quantized_embeddings):  # codes at a server: streamed once, in order
            for _, block in self.quantized_embeddings.blocks():  # type: ignore[attr-defined]
                writer.array(block, "u1")
            return
        writer.array(self.quantized_embeddings, "u1")

    def payload_len(self, offset: int) -> int:
        """Payload length at file ``offset``: 36 header bytes, 1-4 bytes of padding, the ``f32`` arrays and the codes.

        Examples
        --------
        >>> pq = PQ(np.arange(8, dtype=np.float32).reshape(2, 2, 2))
        >>> QuantizedArray(pq, np.zeros((2, 2), dtype=np.uint8)).payload_len(0)  # 36 + 4 + 8 centroids * 4 + 2 * 2 codes
        76
        """
        pq = self.quantizer
        d, q, k = pq.reconstructed_len, pq.quantized_len, pq.n_centroids
        rows = self.shape[0]
        n = 36 + padding(offset + 36) + 4 * q * k * (d // q) + rows * q
        if pq.projection is not None:
            n += 4 * d * d
        if self.norms is not None:
            n += 4 * rows
        return n

    def __repr__(self) -> str:
        pq = self.quantizer
        return (
            f"QuantizedArray(shape={self.shape}, subquantizers={pq.quantized_len}, centroids={pq.n_centroids}, "
            f"projection={pq.projection is not None}, norms={self.norms is not None})"
        )


def _read_quantizer(reader: ByteReader, remote: RowsAt | None) -> tuple[PQ, int, npt.NDArray[np.float32] | None]:
    """The quantizer, the number of rows and the norms of a ``QuantizedArray`` payload: the reader is left at the codes.

    ``remote``: the codes are not in ``reader`` (they stay at a server), whose prefix of the payload may be short.
    """
    at = reader.pos
    use_projection = reader.u32("projection flag") != 0
    use_norms = reader.u32("norms flag") != 0
    q = reader.u32("number of subquantizers")
    d = reader.u32("reconstructed length")
    k = reader.u32("number of centroids")
    rows = reader.u64("number of rows")
    if q == 0 or d == 0 or d % q:
        # every later step divides by q, reshapes to (q, k, d // q) or scores d // q-wide sub-vectors
        raise FormatError(
            "reconstructed length must be a positive multiple of the number of subquantizers",
            offset=at + 8,
            chunk=reader.chunk,
            expected="q > 0, d > 0 and d % q == 0",
            found=f"q = {q}, d = {d}",
        )
    check_dims(d, offset=at + 12, chunk=reader.chunk, what="reconstructed length")
    if not 1 <= k <= 256:
        raise FormatError("number of centroids out of range for u8 codes", offset=at + 16, chunk=reader.chunk, expected="1..256", found=k)
    read_type_id(reader, TypeId.u8, "quantized type")
    read_type_id(reader, TypeId.f32, "reconstructed type")
    reader.skip_padding()
    total = (d * d if use_projection else 0) + q * k * (d // q) + (rows if use_norms else 0)
    if remote is None:
        check_array_size(reader, total, 4, "the quantizer arrays")
        check_array_size(reader, total * 4 + rows * q, 1, "the quantizer arrays and codes")
    else:  # the reader holds a prefix: the chunk's declared end bounds what its head may claim
        room = remote.end - remote.base - reader.pos
        if total * 4 + rows * q > room:
            what = "the quantizer arrays and codes"
            raise Truncated(
                f"{what} does not fit in the chunk", offset=reader.pos, chunk=reader.chunk, expected=f"{total * 4 + rows * q} bytes", found=f"{room} bytes"
            )
    projection = reader.array("<f4", (d, d), "projection") if use_projection else None
    quantizers = reader.array("<f4", (q, k, d // q), "centroids")
    norms = reader.array("<f4", (rows,), "norms") if use_norms else None
    return PQ(quantizers, projection), rows, norms


def _codes_below(k: int, codes_at: int, q: int, chunk: str) -> Callable[[npt.NDArray[np.uint8], int], None]:
    """A check that codes (rows of ``q`` bytes at file offset ``codes_at``) are below ``k``, for any block of them."""

    def check(codes: npt.NDArray[np.uint8], first_row: int) -> None:
        if codes.size and k < 256:
            top = int(codes.max())
            if top >= k:
                bad = int(np.flatnonzero(codes.reshape(-1) >= k)[0])
                raise FormatError("quantization code out of range", offset=codes_at + first_row * q + bad, chunk=chunk, expected=f"< {k}", found=top)

    return check


def _opt_equal(a: npt.NDArray[Any] | None, b: npt.NDArray[Any] | None) -> bool:
    if a is None or b is None:
        return a is None and b is None
    return bool(np.array_equal(a, b))
