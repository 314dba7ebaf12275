"""NdArray storage and Norms, the two array-holding chunks (storage.ndarray.ArrayBehaviour): construction checks,
the 0.7 ndarray behaviour (ufuncs with out=, attributes, slices), equality, repr and payload errors."""

from __future__ import annotations

import io
import struct

import numpy as np
import pytest

from finalfusion import FormatError, NdArray, Norms
from finalfusion._binary import ByteReader, ByteWriter
from finalfusion.errors import Truncated


def _payload(chunk: NdArray | Norms) -> bytearray:
    buf = io.BytesIO()
    chunk.write_payload(ByteWriter(buf, 0))
    return bytearray(buf.getvalue())


def test_ndarray_accepts_array_likes_and_rejects_other_shapes() -> None:
    s = NdArray([[1, 2], [3, 4]])  # type: ignore[arg-type]
    assert s.matrix.dtype == np.float32
    assert NdArray(np.ones((2, 2), dtype=np.float64)).matrix.dtype == np.float32
    with pytest.raises(ValueError, match=r"storage matrix must be 2-D, got shape \(3,\)"):
        NdArray(np.ones(3, dtype=np.float32))


def test_norms_rejects_other_shapes_and_converts() -> None:
    with pytest.raises(ValueError, match=r"norms must be 1-D, got shape \(2, 2\)"):
        Norms(np.ones((2, 2)))
    n = Norms([1, 2])  # type: ignore[arg-type]
    assert n.norms.dtype == np.float32
    assert n.shape == (2,)


def test_ufunc_with_out_writes_into_the_chunk() -> None:
    s = NdArray(np.ones((2, 2), dtype=np.float32))
    np.multiply(s, 3, out=s)
    assert s.matrix.tolist() == [[3.0, 3.0], [3.0, 3.0]]
    n = Norms(np.array([4.0, 9.0], dtype=np.float32))
    np.sqrt(n, out=n)
    assert n.norms.tolist() == [2.0, 3.0]


def test_array_attributes_are_forwarded_but_private_and_unknown_names_raise() -> None:
    s = NdArray(np.arange(6, dtype=np.float32).reshape(2, 3))
    assert s.T.shape == (3, 2)
    assert s.dot(np.ones(3, dtype=np.float32)).tolist() == [3.0, 12.0]
    with pytest.raises(AttributeError):
        _ = s._nonexistent
    with pytest.raises(AttributeError, match="no_such_method"):
        s.no_such_method()


def test_ndarray_array_protocol_and_indexing() -> None:
    m = np.arange(6, dtype=np.float32).reshape(3, 2)
    s = NdArray(m)
    assert np.asarray(s) is s.matrix
    copied = np.array(s, copy=True)
    assert copied is not s.matrix
    assert np.array_equal(copied, m)
    assert np.asarray(s, dtype=np.float64).dtype == np.float64
    assert isinstance(s[1:], NdArray)
    assert s[[0, 2]].tolist() == [[0.0, 1.0], [4.0, 5.0]]
    assert [r.tolist() for r in s] == m.tolist()
    assert len(s) == 3


def test_norms_array_protocol_and_indexing() -> None:
    n = Norms(np.array([1.0, 2.0, 3.0], dtype=np.float32))
    assert np.asarray(n) is n.norms
    assert np.array(n, copy=True) is not n.norms
    assert np.asarray(n, dtype=np.float64).dtype == np.float64
    assert n[::2] == Norms(np.array([1.0, 3.0], dtype=np.float32))
    assert float(n[1]) == 2.0
    assert [float(x) for x in n] == [1.0, 2.0, 3.0]


def test_equality_is_chunk_equality_not_elementwise_and_unhashable() -> None:
    a = NdArray(np.eye(2, dtype=np.float32))
    assert a == NdArray(np.eye(2, dtype=np.float32))
    assert a != NdArray(np.eye(3, dtype=np.float32)[:2, :2] * 2)
    assert a != NdArray(np.zeros((1, 4), dtype=np.float32))
    assert a != "matrix"
    assert (a != NdArray(np.eye(2, dtype=np.float32))) is False  # chunk inequality, not elementwise
    assert Norms([1.0]) != [1.0]  # type: ignore[arg-type]
    assert Norms([1.0]) == Norms([1.0])  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        hash(a)
    with pytest.raises(TypeError):
        hash(Norms([1.0]))  # type: ignore[arg-type]


def test_repr_names_shape_dtype_and_read_only() -> None:
    m = np.eye(2, dtype=np.float32)
    assert repr(NdArray(m)) == "NdArray(shape=(2, 2), dtype=float32)"
    m.flags.writeable = False
    assert repr(NdArray(m)) == "NdArray(shape=(2, 2), dtype=float32, read-only)"
    assert repr(Norms([1.0, 2.0])) == "Norms(<2 norms>)"  # type: ignore[arg-type]


def test_ndarray_payload_round_trips_and_rejects_bad_type_and_huge_shape() -> None:
    payload = _payload(NdArray(np.eye(2, dtype=np.float32)))
    assert NdArray.read_payload(ByteReader(bytes(payload))) == NdArray(np.eye(2, dtype=np.float32))
    bad_type = bytearray(payload)
    struct.pack_into("<I", bad_type, 12, 1)  # u8 instead of f32
    with pytest.raises(FormatError, match="unsupported matrix type") as err:
        NdArray.read_payload(ByteReader(bytes(bad_type), chunk="NdArray"))
    assert err.value.expected == "f32 (10)"
    assert err.value.found == "u8 (1)"
    assert err.value.offset == 12
    unknown = bytearray(payload)
    struct.pack_into("<I", unknown, 12, 77)
    with pytest.raises(FormatError, match="unsupported matrix type") as err:
        NdArray.read_payload(ByteReader(bytes(unknown)))
    assert err.value.found == 77
    huge = bytearray(payload)
    struct.pack_into("<Q", huge, 0, 1 << 40)
    with pytest.raises(Truncated, match=r"a 1099511627776x2 f32 matrix does not fit in the chunk"):
        NdArray.read_payload(ByteReader(bytes(huge)))


def test_norms_payload_rejects_bad_type_and_truncation() -> None:
    payload = _payload(Norms([1.0, 2.0]))  # type: ignore[arg-type]
    assert len(payload) == Norms([1.0, 2.0]).payload_len(0)  # type: ignore[arg-type]
    bad_type = bytearray(payload)
    struct.pack_into("<I", bad_type, 8, 2)
    with pytest.raises(FormatError, match="unsupported norms type"):
        Norms.read_payload(ByteReader(bytes(bad_type)))
    with pytest.raises(Truncated, match="3 f32 norms does not fit in the chunk"):
        Norms.read_payload(ByteReader(bytes(payload[:-1]).replace(b"\x02", b"\x03", 1)))
