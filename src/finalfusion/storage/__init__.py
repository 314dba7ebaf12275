"""Embedding storage: dense (:class:`NdArray`) and product-quantized (:class:`QuantizedArray`).

Examples
--------
>>> import numpy as np
>>> from finalfusion.storage import NdArray
>>> NdArray(np.zeros((3, 2), dtype=np.float32)).shape
(3, 2)
"""

from __future__ import annotations

from finalfusion._source import Source
from finalfusion.container import load_chunk
from finalfusion.storage.ndarray import NdArray, Storage
from finalfusion.storage.quantized import PQ, QuantizedArray

__all__ = ["PQ", "NdArray", "QuantizedArray", "Storage", "load_ndarray", "load_quantized_array", "load_storage"]


def load_storage(file: Source, mmap: bool = False) -> Storage:
    """Read the storage chunk of a finalfusion file.

    Parameters
    ----------
    file
        Path, bytes or binary file object.
    mmap
        Memory-map the arrays instead of reading them.

    Raises
    ------
    FormatError
        If the file is malformed or has no storage chunk.

    Examples
    --------
    >>> import io, numpy as np
    >>> buf = io.BytesIO()
    >>> NdArray(np.ones((2, 3), dtype=np.float32)).write(buf)
    >>> load_storage(buf.getvalue()).shape
    (2, 3)
    """
    return load_chunk(file, Storage, mmap=mmap)


def load_ndarray(file: Source, mmap: bool = False) -> NdArray:
    """Read an :class:`NdArray` chunk from a finalfusion file.

    Parameters
    ----------
    file
        Path, bytes or binary file object.
    mmap
        Memory-map the matrix instead of reading it (it is then read-only).

    Raises
    ------
    FormatError
        If the file is malformed or has no ``NdArray`` chunk (e.g. it is quantized).

    Examples
    --------
    >>> import io, numpy as np
    >>> buf = io.BytesIO()
    >>> NdArray(np.arange(6, dtype=np.float32).reshape(3, 2)).write(buf)
    >>> load_ndarray(buf.getvalue()).row(2).tolist()
    [4.0, 5.0]
    """
    return load_chunk(file, NdArray, mmap=mmap)


def load_quantized_array(file: Source, mmap: bool = False) -> QuantizedArray:
    """Read a :class:`QuantizedArray` chunk from a finalfusion file.

    ``file`` and ``mmap`` are as for :func:`load_storage`; a file without a
    ``QuantizedArray`` chunk (e.g. a dense one) raises :class:`FormatError`.

    Examples
    --------
    >>> import io, numpy as np
    >>> pq = PQ(np.arange(8, dtype=np.float32).reshape(2, 2, 2))  # 2 subquantizers, 2 centroids each
    >>> buf = io.BytesIO()
    >>> QuantizedArray(pq, np.array([[1, 0], [0, 1]], dtype=np.uint8)).write(buf)
    >>> load_quantized_array(buf.getvalue()).row(0).tolist()
    [2.0, 3.0, 4.0, 5.0]
    """
    return load_chunk(file, QuantizedArray, mmap=mmap)
