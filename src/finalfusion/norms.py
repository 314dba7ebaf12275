"""``NdNorms`` chunk (id 6): the l2 norm of every word before normalisation (docs/format.md §5.6).

===========  ===========  =========================================
body offset  type         field
===========  ===========  =========================================
0            u64          n_norms (= number of words)
8            u32          type id, 10 (f32)
12           1..4 bytes   zero padding to 4-byte file alignment
12+pad       f32xn        norms
===========  ===========  =========================================

A norm is the l2 norm of a word's row before normalisation, so it is finite
and ``>= 0``: a NaN, infinite or negative norm is refused when a file is
read (:class:`~finalfusion.errors.FormatError` naming the norm and its
offset) and when :class:`Norms` are built (``ValueError``), because nothing
could multiply it back (docs/reliability.md, "Non-finite values").
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

from finalfusion import _display
from finalfusion._binary import ByteReader, ByteWriter, check_array_size, padding
from finalfusion._source import Source
from finalfusion.chunks import ChunkIdentifier, TypeId, register
from finalfusion.container import FileChunk, load_chunk
from finalfusion.storage.ndarray import ArrayBehaviour, read_type_id

__all__ = ["Norms", "first_invalid_norm", "load_norms", "normalize_rows"]

_F32_MAX = float(np.finfo(np.float32).max)
#: Rows normalised per block (bounds the temporaries of :func:`normalize_rows`).
_NORM_BLOCK = 1 << 15
#: float32 norms outside [_TINY, _HUGE] (and zero, NaN, inf) are recomputed in float64: below, the
#: float32 sum of squares loses precision in the subnormal range or underflows to 0; above, it overflows.
_TINY = np.float32(2.0**-50)
_HUGE = np.float32(2.0**60)


def normalize_rows(matrix: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    """l2-normalise the rows of ``matrix`` in place and return their norms.

    Norms are ``sqrt(row · row)`` in float32, as finalfusion-rust and
    finalfusion-python 0.7.1 compute them, for every row whose norm lies
    between 2^-50 and 2^60. Rows outside that range (tiny rows, e.g. of
    subnormal numbers, whose float32 squares underflow; huge rows whose
    squares overflow) are normalised in float64 instead, so they become
    unit rows too (finalfusion-rust leaves a row of subnormals as it is,
    with norm 0). A zero row keeps norm 0 and stays zero (0.7.1 would turn
    it into NaNs). A norm beyond float32's range comes back as ``inf``
    and a row with NaN or infinity gives a NaN or infinite norm: callers
    check the result (:func:`first_invalid_norm`). Works block by block,
    so the temporary memory is small whatever the matrix size.

    Parameters
    ----------
    matrix
        Writable C-contiguous ``float32`` array of shape ``(n, d)``.

    Returns
    -------
    numpy.ndarray
        ``float32`` norms of shape ``(n,)``.

    Examples
    --------
    >>> m = np.array([[3, 4], [0, 0], [1e-45, 1e-45]], dtype=np.float32)
    >>> normalize_rows(m).tolist(), m.astype(float).round(4).tolist()
    ([5.0, 0.0, 1.401298464324817e-45], [[0.6, 0.8], [0.0, 0.0], [0.7071, 0.7071]])
    """
    if matrix.ndim != 2 or matrix.dtype != np.float32:
        raise ValueError(f"expected a 2-D float32 matrix, got {matrix.ndim}-D {matrix.dtype}")
    n = matrix.shape[0]
    norms = np.empty(n, dtype=np.float32)
    for start in range(0, n, _NORM_BLOCK):
        block = matrix[start : start + _NORM_BLOCK]
        nb = norms[start : start + _NORM_BLOCK]
        with np.errstate(over="ignore", invalid="ignore"):
            np.einsum("ij,ij->i", block, block, out=nb)
        np.sqrt(nb, out=nb)
        slow = np.flatnonzero(~((nb >= _TINY) & (nb <= _HUGE)))
        divisor = nb
        if len(slow):
            divisor = nb.copy()
            divisor[slow] = 1
        block /= divisor[:, None]
        if len(slow):
            rows = block[slow].astype(np.float64)
            exact = np.sqrt(np.einsum("ij,ij->i", rows, rows))
            with np.errstate(over="ignore", invalid="ignore"):
                block[slow] = np.divide(rows, exact[:, None], out=rows, where=exact[:, None] > 0)
                nb[slow] = exact
    return norms


def first_invalid_norm(norms: npt.NDArray[np.float32]) -> int | None:
    """Index of the first norm that is NaN, infinite or negative, or ``None`` if all are valid.

    Examples
    --------
    >>> first_invalid_norm(np.array([1.0, 0.0, 2.5], dtype=np.float32)) is None
    True
    >>> first_invalid_norm(np.array([1.0, -0.5, np.nan], dtype=np.float32))
    1
    """
    ok = (norms >= 0) & (norms <= _F32_MAX)  # False for NaN as well
    if bool(ok.all()):
        return None
    return int(np.argmin(ok))


@register
@dataclass(frozen=True, eq=False)
class Norms(ArrayBehaviour, FileChunk):
    """Per-word norms.

    Norms hold their array (``norms.norms``) rather than subclass numpy, but
    behave like the 1-D array they were in finalfusion-python 0.7: ``shape``,
    ``dtype`` and the other array attributes, ufuncs and operators (which
    return plain arrays), and a slice is again ``Norms`` (a view), so
    ``norms[::2].write(path)`` works. An integer index gives a scalar.

    Parameters
    ----------
    norms
        1-D array, stored as ``float32``; every norm finite and ``>= 0``.

    Raises
    ------
    ValueError
        If a norm is NaN, infinite or negative (or not representable as a
        finite ``float32``), naming its index.

    Examples
    --------
    >>> n = Norms([5.0, 2.0, 4.0])
    >>> len(n), float(n[0]), n.shape
    (3, 5.0, (3,))
    >>> (n * 2).tolist(), np.sqrt(n[:1]).tolist(), n[::2]
    ([10.0, 4.0, 8.0], [2.2360680103302], Norms(<2 norms>))
    """

    ARRAY_FIELD: ClassVar[str] = "norms"
    norms: npt.NDArray[np.float32]
    chunk_id: ClassVar[ChunkIdentifier] = ChunkIdentifier.NdNorms

    def __post_init__(self) -> None:
        n = np.asarray(self.norms)
        if n.ndim != 1:
            raise ValueError(f"norms must be 1-D, got shape {n.shape}")
        if n.dtype != np.float32:
            with np.errstate(over="ignore"):  # a value beyond float32 becomes inf and is refused below
                n = n.astype(np.float32)
        bad = first_invalid_norm(n)
        if bad is not None:
            raise ValueError(f"norm {bad} is {float(n[bad])!r}: a norm is the l2 norm of a row, so it must be finite and >= 0")
        object.__setattr__(self, "norms", n)

    def __len__(self) -> int:
        return len(self.norms)

    @property
    def shape(self) -> tuple[int]:
        """``(n_norms,)``.

        Examples
        --------
        >>> Norms([1.0, 2.0]).shape
        (2,)
        """
        return (int(self.norms.shape[0]),)

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, slice):
            return Norms(self.norms[key])
        return self.norms[key]

    def __iter__(self) -> Iterator[np.float32]:
        return iter(self.norms)

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> npt.NDArray[Any]:
        if dtype is None:
            return self.norms.copy() if copy else self.norms
        return self.norms.astype(dtype)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Norms):
            return NotImplemented
        return bool(np.array_equal(self.norms, other.norms))

    __hash__ = None  # type: ignore[assignment]

    @classmethod
    def read_payload(cls, reader: ByteReader) -> Norms:
        n = reader.u64("number of norms")
        read_type_id(reader, TypeId.f32, "norms type")
        reader.skip_padding()
        check_array_size(reader, n, 4, f"{n} f32 norms")
        start = reader.pos
        norms = reader.array("<f4", (n,), "norms")
        bad = first_invalid_norm(norms)
        if bad is not None:
            raise reader.error(
                f"norm {bad} (of word {bad}) is not a row's l2 norm",
                expected="a finite norm >= 0",
                found=float(norms[bad]),
                offset=start + 4 * bad,
            )
        return cls(norms)

    def write_payload(self, writer: ByteWriter) -> None:
        """Write the count, the ``f32`` type id, the alignment padding and the norms.

        Examples
        --------
        >>> import io
        >>> buf = io.BytesIO()
        >>> Norms([1.0, 2.0]).write_payload(ByteWriter(buf, 100))  # as if the payload started at file offset 100
        >>> len(buf.getvalue()) == Norms([1.0, 2.0]).payload_len(100)
        True
        """
        writer.u64(len(self.norms))
        writer.u32(TypeId.f32)
        writer.padding()
        writer.array(self.norms, "<f4")

    def payload_len(self, offset: int) -> int:
        """Payload length at file ``offset``: 12 header bytes, 1-4 bytes of padding, 4 bytes per norm.

        Examples
        --------
        >>> Norms([1.0, 2.0]).payload_len(100), Norms([1.0, 2.0]).payload_len(101)
        (24, 23)
        """
        return 12 + padding(offset + 12) + 4 * len(self.norms)

    def __repr__(self) -> str:
        return f"Norms(<{len(self.norms)} norms>)"

    def _repr_html_(self) -> str:
        return _display.norms_html(self)


def load_norms(file: Source, mmap: bool = False) -> Norms:
    """Read the ``NdNorms`` chunk of a finalfusion file.

    Raises
    ------
    FormatError
        If the file is malformed or has no norms chunk.

    Examples
    --------
    >>> import io, numpy as np
    >>> from finalfusion import Embeddings, NdArray, SimpleVocab
    >>> buf = io.BytesIO()
    >>> Embeddings(NdArray(np.eye(2, dtype=np.float32)), SimpleVocab(["a", "b"]), norms=Norms([3.0, 0.5])).write(buf)
    >>> load_norms(buf.getvalue()).norms.tolist()
    [3.0, 0.5]
    """
    return load_chunk(file, Norms, mmap=mmap)
