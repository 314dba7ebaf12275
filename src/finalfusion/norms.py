"""``NdNorms`` chunk (id 6): the l2 norm of every word before normalisation (docs/format.md §5.6).

===========  ===========  =========================================
body offset  type         field
===========  ===========  =========================================
0            u64          n_norms (= number of words)
8            u32          type id, 10 (f32)
12           1..4 bytes   zero padding to 4-byte file alignment
12+pad       f32xn        norms
===========  ===========  =========================================
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
from finalfusion.storage.ndarray import read_type_id

__all__ = ["Norms", "load_norms"]


@register
@dataclass(frozen=True, eq=False)
class Norms(FileChunk):
    """Per-word norms.

    Parameters
    ----------
    norms
        1-D array, stored as ``float32``.

    Examples
    --------
    >>> n = Norms([5.0, 2.0])
    >>> len(n), float(n[0])
    (2, 5.0)
    """

    norms: npt.NDArray[np.float32]
    chunk_id: ClassVar[ChunkIdentifier] = ChunkIdentifier.NdNorms

    def __post_init__(self) -> None:
        n = np.asarray(self.norms)
        if n.ndim != 1:
            raise ValueError(f"norms must be 1-D, got shape {n.shape}")
        if n.dtype != np.float32:
            n = n.astype(np.float32)
        object.__setattr__(self, "norms", n)

    def __len__(self) -> int:
        return len(self.norms)

    def __getitem__(self, key: Any) -> Any:
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
        return cls(reader.array("<f4", (n,), "norms"))

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
