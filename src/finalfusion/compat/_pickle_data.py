"""numpy arrays in a pickle, read as data: the names numpy's pickles use, resolved to checked Python, never to numpy's own code.

numpy pickles an array as ``_reconstruct(ndarray, (0,), b"b")`` and then
``__setstate__((1, shape, dtype, is_fortran, rawdata))``, a dtype as
``dtype("f4", False, True)`` and ``__setstate__((3, "<", ...))`` (protocol 5:
``_frombuffer(buf, dtype, shape, order)``). Here each of those names builds a
record whose ``__setstate__`` checks the state in Python -- a numeric dtype
of at most 8 bytes, a shape of non-negative ints, exactly as many bytes as
the shape needs -- and only then makes the array with ``np.frombuffer``;
numpy's C ``__setstate__`` never sees a crafted state (the fuzzer reached
``SystemError`` in it). :func:`array_of` turns a record into its array.
Nothing is allocated for a shape the bytes do not back.
"""

from __future__ import annotations

import math
import pickle
import struct
from collections.abc import Callable
from typing import IO, Any, ClassVar, Final, Literal, cast

import numpy as np
import numpy.typing as npt

from finalfusion.errors import FormatError

__all__ = ["NUMPY_GLOBALS", "DataUnpickler", "Stepwise", "array_of"]

#: dtype names numpy pickles a numeric array with (``dtype(name, False, True)``).
_DTYPES: Final = frozenset({"b1", "i1", "i2", "i4", "i8", "u1", "u2", "u4", "u8", "f2", "f4", "f8"})


class _DtypeRecord:
    """``numpy.dtype(name, align, copy)`` of a numeric dtype; its state sets the byte order."""

    def __init__(self, name: Any, align: Any = False, copy: Any = True, *rest: Any) -> None:
        if not isinstance(name, str) or name not in _DTYPES or rest:
            raise FormatError("an array type other than a number", chunk="pickle", expected="one of " + ", ".join(sorted(_DTYPES)), found=repr(name)[:80])
        self.dtype = np.dtype(name)

    def __setstate__(self, state: Any) -> None:
        # numpy's (version, byte order, subdtype, names, fields, elsize, alignment, flags), version 3 (4 adds metadata)
        if not (isinstance(state, tuple) and len(state) in (8, 9) and state[0] in (3, 4) and state[1] in ("<", ">", "|", "=")):
            raise FormatError("a bad array type state", chunk="pickle", expected="(3, byte order, None, None, None, -1, -1, flags)", found=repr(state)[:120])
        if state[2:5] != (None, None, None) or state[5:7] not in ((-1, -1), (self.dtype.itemsize, self.dtype.alignment)):
            raise FormatError("an array type with fields or sizes", chunk="pickle", expected="a plain number type", found=repr(state)[:120])
        self.dtype = self.dtype.newbyteorder(state[1]) if state[1] != "|" else self.dtype


class _ArrayRecord:
    """``_reconstruct(ndarray, (0,), b"b")``: the array comes from the state that follows."""

    array: npt.NDArray[Any] | None = None

    def __setstate__(self, state: Any) -> None:
        if not (isinstance(state, tuple) and len(state) == 5 and state[0] == 1 and isinstance(state[3], bool)):
            raise FormatError("a bad array state", chunk="pickle", expected="(1, shape, dtype, is_fortran, data)", found=repr(state)[:120])
        self.array = _array(state[4], state[2], state[1], "F" if state[3] else "C")


def _array(buf: Any, dtype: Any, shape: Any, order: Literal["C", "F"]) -> npt.NDArray[Any]:
    if not isinstance(dtype, _DtypeRecord) or not isinstance(buf, (bytes, bytearray)):
        found = f"{type(dtype).__name__}, {type(buf).__name__}"
        raise FormatError("an array built otherwise than numpy pickles arrays", chunk="pickle", expected="a dtype and bytes", found=found)
    if not isinstance(shape, tuple) or not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in shape):
        raise FormatError("a bad array shape", chunk="pickle", expected="a tuple of non-negative ints", found=repr(shape)[:100])
    if math.prod(shape) * dtype.dtype.itemsize != len(buf):
        raise FormatError("an array whose bytes do not match its shape", chunk="pickle", expected=f"{shape!r} x {dtype.dtype}", found=f"{len(buf)} bytes")
    return np.frombuffer(buf, dtype=dtype.dtype).reshape(shape, order=order)


#: What ``numpy.ndarray`` resolves to: a marker for :func:`_reconstruct`, not the class (calling it would allocate any shape).
_NDARRAY = object()


def _reconstruct(subtype: Any, shape: Any, typecode: Any) -> _ArrayRecord:
    """numpy's ``_reconstruct`` as numpy's pickles call it: a record that the state that follows fills."""
    if subtype is not _NDARRAY or shape != (0,) or typecode != b"b":
        found = f"{'numpy.ndarray' if subtype is _NDARRAY else repr(subtype)[:60]}, shape {shape!r}"[:160]
        raise FormatError("an array built otherwise than numpy pickles arrays", chunk="pickle", expected="numpy.ndarray, shape (0,)", found=found)
    return _ArrayRecord()


def _frombuffer(buf: Any, dtype: Any, shape: Any, order: Any) -> npt.NDArray[Any]:
    """numpy's ``_frombuffer`` (protocol 5): the array over the pickle's own bytes, of exactly their size."""
    if order not in ("C", "F"):
        raise FormatError("a bad array order", chunk="pickle", expected="'C' or 'F'", found=repr(order)[:40])
    return _array(buf, dtype, shape, order)


def _latin1(text: Any, encoding: Any) -> bytes:
    """``_codecs.encode(text, "latin1")``: how protocol 2 spells bytes (numpy's data among them)."""
    if not isinstance(text, str) or encoding != "latin1":
        raise FormatError(
            "bytes spelt otherwise than pickle spells them",
            chunk="pickle",
            expected="_codecs.encode(str, 'latin1')",
            found=f"{type(text).__name__}, {encoding!r}"[:100],
        )
    return text.encode("latin1")


#: The globals numpy arrays and plain data need in pickle protocols 2-5: numpy 1 spells its modules ``numpy.core``, numpy 2
#: ``numpy._core``; protocol 2 spells bytes with ``_codecs.encode``, protocols 2-3 sets with ``builtins`` (``__builtin__``
#: in 2), protocol 5 arrays with numpy's ``_frombuffer``.
NUMPY_GLOBALS: Final[dict[tuple[str, str], object]] = {
    ("numpy", "ndarray"): _NDARRAY,
    ("numpy", "dtype"): _DtypeRecord,
    ("numpy.core.multiarray", "_reconstruct"): _reconstruct,
    ("numpy._core.multiarray", "_reconstruct"): _reconstruct,
    ("numpy.core.numeric", "_frombuffer"): _frombuffer,
    ("numpy._core.numeric", "_frombuffer"): _frombuffer,
    ("_codecs", "encode"): _latin1,
    ("builtins", "frozenset"): frozenset,
    ("builtins", "set"): set,
    ("__builtin__", "frozenset"): frozenset,
    ("__builtin__", "set"): set,
}


def array_of(value: Any) -> Any:
    """``value`` with an array record replaced by its array (an unfilled record: ``None``); anything else as it is."""
    if isinstance(value, _ArrayRecord):
        return value.array
    return value


class DataUnpickler(pickle._Unpickler):
    """pickle's own Python unpickler, with no allocation ahead of the bytes that back it.

    The C unpickler sizes its memo table by the largest index a ``PUT``
    names (a 10-byte pickle naming index 2**31 makes it allocate and zero
    16 GiB; the fuzzer found 350 MB from 2.5 KB) and allocates a
    ``BYTEARRAY8``'s declared length before reading it. Here the memo is a
    dict, declared lengths are read in steps (:class:`Stepwise`), and
    ``find_class`` is the subclass's. About 3x slower than the C unpickler
    on the words of a vocabulary (2.2 s against 0.6 s for a million).
    """

    dispatch: ClassVar[dict[int, Callable[[Any], None]]] = dict(pickle._Unpickler.dispatch)

    def __init__(self, file: IO[bytes]) -> None:
        super().__init__(cast(IO[bytes], Stepwise(file)))

    def _load_bytearray8(self) -> None:
        this = cast(Any, self)  # read and append are set by load(): the frame's reader and the stack's append
        (size,) = struct.unpack("<Q", this.read(8))
        data = this.read(size)  # in steps: what the pickle holds, not what it declares
        if len(data) != size:
            raise pickle.UnpicklingError("pickle data was truncated")
        this.append(bytearray(data))

    dispatch[pickle.BYTEARRAY8[0]] = _load_bytearray8

    #: The classes whose instances a ``BUILD`` may give a state (each checks it in its ``__setstate__``). Without this a
    #: pickle could set attributes of anything on the stack -- a class or function of this library, for later loads.
    buildable: ClassVar[tuple[type, ...]] = (_DtypeRecord, _ArrayRecord)

    def _load_build(self) -> None:
        stack = cast(Any, self).stack
        target = stack[-2] if len(stack) >= 2 else None
        if not isinstance(target, self.buildable):
            raise FormatError("a state for something else than an array or a record", chunk="pickle", expected="BUILD on a record", found=type(target).__name__)
        cast(Any, pickle._Unpickler).load_build(self)

    dispatch[pickle.BUILD[0]] = _load_build


#: Bytes the unpickler is handed per read: a length the pickle declares is read in steps of this.
_STEP: Final = 1 << 24


class Stepwise:
    """``f`` for an unpickler: a ``read(n)`` of a declared length ``n`` is done in steps (``io`` allocates ``n`` at once)."""

    def __init__(self, f: IO[bytes]) -> None:
        self._f = f
        self.readline = f.readline

    def read(self, n: int = -1) -> bytes:
        if n < 0 or n <= _STEP:
            return self._f.read(n)
        parts: list[bytes] = []
        while n > 0 and (part := self._f.read(min(n, _STEP))):
            parts.append(part)
            n -= len(part)
        return b"".join(parts)
