"""``NdArray`` chunk (id 2): a dense ``f32`` matrix (docs/format.md §5.2).

===========  ===========  =========================================
body offset  type         field
===========  ===========  =========================================
0            u64          rows
8            u32          cols
12           u32          type id, 10 (f32)
16           1..4 bytes   zero padding to 4-byte file alignment
16+pad       f32xrows·cols  row-major matrix
===========  ===========  =========================================

The first :data:`HEAD_BYTES` bytes (rows, cols, type id and at most four
bytes of padding) are all the parse reads; the matrix is only viewed.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, ClassVar, Final, cast

import numpy as np
import numpy.typing as npt
from numpy.lib.mixins import NDArrayOperatorsMixin

from finalfusion import _display
from finalfusion._binary import ByteReader, ByteWriter, check_array_size, check_dims, padding
from finalfusion._remote_rows import RowsAt, is_remote
from finalfusion.chunks import ChunkIdentifier, TypeId, register
from finalfusion.container import FileChunk
from finalfusion.errors import FormatError

__all__ = ["HEAD_BYTES", "ArrayBehaviour", "NdArray", "Storage"]

#: Payload bytes before an NdArray's matrix, at most: rows u64, cols u32, type id u32, 1-4 bytes of padding.
HEAD_BYTES: Final = 20


class Storage(FileChunk):
    """Base of the storage chunks: a matrix of ``rows x dims`` embeddings.

    Examples
    --------
    >>> import numpy as np
    >>> storage = NdArray(np.zeros((3, 2), dtype=np.float32))
    >>> isinstance(storage, Storage), len(storage)
    (True, 3)
    """

    @property
    def shape(self) -> tuple[int, int]:
        """``(rows, dims)``.

        Examples
        --------
        >>> import numpy as np
        >>> NdArray(np.zeros((3, 2), dtype=np.float32)).shape
        (3, 2)
        """
        raise NotImplementedError

    def _repr_html_(self) -> str:
        return _display.storage_html(self)

    def __len__(self) -> int:
        return self.shape[0]

    def rows(self, indices: npt.ArrayLike) -> npt.NDArray[np.float32]:
        """The (reconstructed) rows at ``indices`` as a new ``float32`` matrix.

        Examples
        --------
        >>> import numpy as np
        >>> NdArray(np.arange(6, dtype=np.float32).reshape(3, 2)).rows([2, 0]).tolist()
        [[4.0, 5.0], [0.0, 1.0]]
        """
        raise NotImplementedError

    def __iter__(self) -> Iterator[npt.NDArray[np.float32]]:
        """The (reconstructed) rows in order.

        Examples
        --------
        >>> import numpy as np
        >>> [row.tolist() for row in NdArray(np.eye(2, dtype=np.float32))]
        [[1.0, 0.0], [0.0, 1.0]]
        """
        raise NotImplementedError

    def row(self, index: int) -> npt.NDArray[np.float32]:
        """One (reconstructed) row.

        Examples
        --------
        >>> import numpy as np
        >>> NdArray(np.arange(6, dtype=np.float32).reshape(3, 2)).row(1).tolist()
        [2.0, 3.0]
        """
        raise NotImplementedError


class ArrayBehaviour(NDArrayOperatorsMixin):
    """numpy behaviour for chunks that hold an array (:class:`NdArray`, :class:`~finalfusion.norms.Norms`).

    finalfusion-python 0.7's chunks were ``ndarray`` subclasses; these hold
    their data instead, and give code written for 0.7 what it used: ufuncs
    and operators (``storage * 2``, ``np.sqrt(norms)``) on the held array,
    returning plain arrays, and the array's attributes (``dtype``,
    ``ndim``, ``sum()`` ...). The held array is the first dataclass field
    (:attr:`ARRAY_FIELD` names it). Equality stays chunk equality (``==``
    compares whole chunks and returns a ``bool``).

    Examples
    --------
    >>> import numpy as np
    >>> s = NdArray(np.eye(2, dtype=np.float32))
    >>> (s * 2).tolist(), float((1 - s).sum()), str(s.dtype), type(np.add(s, s)).__name__
    ([[2.0, 0.0], [0.0, 2.0]], 2.0, 'float32', 'ndarray')
    >>> s == NdArray(np.eye(2, dtype=np.float32)), s != NdArray(np.eye(2, dtype=np.float32))
    (True, False)
    """

    #: The name of the field that holds the array (``"matrix"``, ``"norms"``): what numpy functions and attributes reach.
    ARRAY_FIELD: ClassVar[str]

    def __array_ufunc__(self, ufunc: np.ufunc, method: str, *inputs: Any, **kwargs: Any) -> Any:
        inputs = tuple(getattr(x, x.ARRAY_FIELD) if isinstance(x, ArrayBehaviour) else x for x in inputs)
        if "out" in kwargs:
            kwargs["out"] = tuple(getattr(x, x.ARRAY_FIELD) if isinstance(x, ArrayBehaviour) else x for x in kwargs["out"])
        return getattr(ufunc, method)(*inputs, **kwargs)

    def __ne__(self, other: object) -> bool:
        # Chunk equality, not the elementwise ``not_equal`` of NDArrayOperatorsMixin.
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else not eq

    def __getattr__(self, name: str) -> Any:
        # 0.7's chunks were ndarray subclasses: keep ``storage.dot(q)``, ``storage.T``, ``norms.dtype`` ... working.
        if name.startswith("_") or name == type(self).ARRAY_FIELD:
            raise AttributeError(name)
        return getattr(getattr(self, type(self).ARRAY_FIELD), name)


def read_type_id(reader: ByteReader, expected: TypeId, what: str) -> None:
    """Read a data type id and require ``expected`` (docs/format.md §5)."""
    at = reader.pos
    found = reader.u32(what)
    if found != expected:
        try:
            shown: object = f"{TypeId(found).name} ({found})"
        except ValueError:
            shown = found
        raise FormatError(f"unsupported {what}", offset=at, chunk=reader.chunk, expected=f"{expected.name} ({int(expected)})", found=shown)


@register
@dataclass(frozen=True, eq=False)
class NdArray(ArrayBehaviour, Storage):
    """Dense embedding matrix.

    It holds its matrix (``storage.matrix``) and behaves like the
    ``ndarray`` subclass it was in finalfusion-python 0.7: array attributes,
    ufuncs and operators (returning plain arrays); a slice of rows is again
    an ``NdArray`` (a view, with ``write``); an integer index gives the row
    as an array; other indices give arrays.

    Parameters
    ----------
    matrix
        2-D array; stored as little-endian ``float32``. A ``.fifu`` named by
        a URL and loaded with ``mmap=True`` holds its rows at the server
        instead: a read-only array-like (``finalfusion._remote_rows.RemoteRows``)
        whose indexing fetches the rows it touches (see docs/remote.md).

    Examples
    --------
    >>> import numpy as np
    >>> s = NdArray(np.eye(2, dtype=np.float32))
    >>> s.shape, s[1].tolist()
    ((2, 2), [0.0, 1.0])
    >>> np.asarray(s).dtype
    dtype('float32')
    >>> s[1:]
    NdArray(shape=(1, 2), dtype=float32)
    """

    ARRAY_FIELD: ClassVar[str] = "matrix"
    matrix: npt.NDArray[np.float32]
    chunk_id: ClassVar[ChunkIdentifier] = ChunkIdentifier.NdArray
    deferrable_from: ClassVar[int | None] = HEAD_BYTES
    rows_last: ClassVar[bool] = True

    def __post_init__(self) -> None:
        m = self.matrix
        if is_remote(m):
            return
        if not isinstance(cast(object, m), np.ndarray):  # callers may pass any array-like
            m = np.asarray(m, dtype=np.float32)
        if m.ndim != 2:
            raise ValueError(f"storage matrix must be 2-D, got shape {m.shape}")
        if m.dtype != np.float32:
            m = m.astype(np.float32)
        object.__setattr__(self, "matrix", m)

    @property
    def shape(self) -> tuple[int, int]:
        return (int(self.matrix.shape[0]), int(self.matrix.shape[1]))

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> npt.NDArray[Any]:
        if is_remote(self.matrix):  # rows at a server: the whole matrix, streamed once
            return np.asarray(self.matrix, dtype=dtype)
        if dtype is None or np.dtype(dtype) == self.matrix.dtype:
            return self.matrix.copy() if copy else self.matrix
        return self.matrix.astype(dtype)

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return NdArray(self.matrix[index])
        return self.matrix[index]

    def __iter__(self) -> Iterator[npt.NDArray[np.float32]]:
        return iter(self.matrix)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, NdArray):
            return NotImplemented
        return self.matrix.shape == other.matrix.shape and bool(np.array_equal(self.matrix, other.matrix))

    __hash__ = None  # type: ignore[assignment]

    def rows(self, indices: npt.ArrayLike) -> npt.NDArray[np.float32]:
        """The rows at ``indices``, copied into a new matrix (changing it leaves the storage alone).

        Examples
        --------
        >>> s = NdArray(np.arange(6, dtype=np.float32).reshape(3, 2))
        >>> picked = s.rows([2, 2])
        >>> picked[0] = 0
        >>> picked.tolist(), s.row(2).tolist()
        ([[0.0, 0.0], [4.0, 5.0]], [4.0, 5.0])
        """
        rows: npt.NDArray[np.float32] = self.matrix[np.asarray(indices, dtype=np.intp)]
        return rows

    def row(self, index: int) -> npt.NDArray[np.float32]:
        """Row ``index`` as a view of the matrix (no copy; negative indices count from the end).

        Examples
        --------
        >>> s = NdArray(np.arange(6, dtype=np.float32).reshape(3, 2))
        >>> s.row(-1).tolist(), np.shares_memory(s.row(0), s.matrix)
        ([4.0, 5.0], True)
        """
        row: npt.NDArray[np.float32] = self.matrix[index]
        return row

    @classmethod
    def read_payload(cls, reader: ByteReader) -> NdArray:
        rows, cols = _read_shape(reader)
        check_array_size(reader, rows * cols, 4, f"a {rows}x{cols} f32 matrix")
        return cls(reader.array("<f4", (rows, cols), "matrix"))

    @classmethod
    def read_head(cls, reader: ByteReader, rows: RowsAt) -> NdArray:
        """The chunk with its matrix left at the server (``rows``; see :meth:`Chunk.read_head <finalfusion.chunks.Chunk.read_head>`).

        Examples
        --------
        >>> import io
        >>> buf = io.BytesIO()
        >>> NdArray(np.eye(2, dtype=np.float32)).write_payload(ByteWriter(buf))
        >>> class Rows:  # what finalfusion._remote_rows.RowsAt is asked (here: zeros instead of rows at a server)
        ...     def rows(self, pos, shape, dtype, what):
        ...         print(f"{shape} {dtype} rows from buffer position {pos}")
        ...         return np.zeros(shape, dtype=np.float32)
        >>> NdArray.read_head(ByteReader(buf.getvalue()[:20]), Rows()).shape  # the head alone: 16 bytes and the padding
        (2, 2) <f4 rows from buffer position 20
        (2, 2)
        """
        n, cols = _read_shape(reader)
        return cls(cast(npt.NDArray[np.float32], rows.rows(reader.pos, (n, cols), "<f4", "matrix")))

    def write_payload(self, writer: ByteWriter) -> None:
        """Write rows, columns, the ``f32`` type id, the alignment padding and the row-major matrix.

        Examples
        --------
        >>> import io
        >>> buf = io.BytesIO()
        >>> NdArray(np.eye(2, dtype=np.float32)).write_payload(ByteWriter(buf, 30))  # payload at file offset 30
        >>> len(buf.getvalue()), buf.getvalue()[16:18]  # 16 header bytes, then 2 bytes of padding
        (34, b'\\x00\\x00')
        """
        rows, cols = self.shape
        writer.u64(rows)
        writer.u32(cols)
        writer.u32(TypeId.f32)
        writer.padding()
        if is_remote(self.matrix):  # rows at a server: streamed once, in order
            for _, block in self.matrix.blocks():  # type: ignore[attr-defined]
                writer.array(block, "<f4")
            return
        writer.array(self.matrix, "<f4")

    def payload_len(self, offset: int) -> int:
        """Payload length at file ``offset``: 16 header bytes, 1-4 bytes of padding, 4 bytes per value.

        Examples
        --------
        >>> NdArray(np.eye(2, dtype=np.float32)).payload_len(30), NdArray(np.eye(2, dtype=np.float32)).payload_len(32)
        (34, 36)
        """
        rows, cols = self.shape
        return 16 + padding(offset + 16) + 4 * rows * cols

    def __repr__(self) -> str:
        where = ", at a server" if is_remote(self.matrix) else ", read-only" if not self.matrix.flags.writeable else ""
        return f"NdArray(shape={self.shape}, dtype=float32{where})"


def _read_shape(reader: ByteReader) -> tuple[int, int]:
    """Rows and columns of an ``NdArray`` payload, its type id and padding: the reader is left at the matrix."""
    rows = reader.u64("number of rows")
    at = reader.pos
    cols = reader.u32("number of columns")
    check_dims(cols, offset=at, chunk=reader.chunk, what="number of columns")
    read_type_id(reader, TypeId.f32, "matrix type")
    reader.skip_padding()
    return rows, cols
