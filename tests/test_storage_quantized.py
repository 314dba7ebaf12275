"""QuantizedArray storage and its PQ quantizer: construction checks, row indexing, equality, repr,
payload round trips and the FormatErrors of a malformed payload."""

from __future__ import annotations

import io
import struct

import numpy as np
import pytest

from finalfusion import FormatError
from finalfusion._binary import ByteReader, ByteWriter
from finalfusion.errors import Truncated
from finalfusion.storage.quantized import PQ, QuantizedArray


def _pq(projection: bool = False) -> PQ:
    proj = np.eye(4, dtype=np.float32)[::-1] if projection else None
    return PQ(np.arange(8, dtype=np.float32).reshape(2, 2, 2), proj)


def _storage(projection: bool = False, norms: bool = True) -> QuantizedArray:
    n = np.array([1, 2, 3], dtype=np.float32) if norms else None
    return QuantizedArray(_pq(projection), np.array([[1, 0], [0, 1], [1, 1]], dtype=np.uint8), n)


def _payload(storage: QuantizedArray) -> bytearray:
    buf = io.BytesIO()
    storage.write_payload(ByteWriter(buf, 0))
    return bytearray(buf.getvalue())


def _read(payload: bytes | bytearray) -> QuantizedArray:
    return QuantizedArray.read_payload(ByteReader(bytes(payload), chunk="QuantizedArray"))


# --- construction ----------------------------------------------------------------------


def test_pq_rejects_bad_shapes() -> None:
    with pytest.raises(ValueError, match=r"quantizers must have shape \(n_subquantizers, n_centroids, sub_dims\), got \(2, 2\)"):
        PQ(np.zeros((2, 2), dtype=np.float32))
    with pytest.raises(ValueError, match=r"number of centroids must be in 1\.\.256, got 257"):
        PQ(np.zeros((1, 257, 1), dtype=np.float32))
    with pytest.raises(ValueError, match=r"number of centroids must be in 1\.\.256, got 0"):
        PQ(np.zeros((1, 0, 1), dtype=np.float32))
    with pytest.raises(ValueError, match=r"projection must have shape \(4, 4\), got \(3, 3\)"):
        PQ(np.zeros((2, 2, 2), dtype=np.float32), np.eye(3))


def test_pq_converts_to_float32() -> None:
    pq = PQ(np.arange(8, dtype=np.float64).reshape(2, 2, 2), np.eye(4))
    assert pq.quantizers.dtype == np.float32
    assert pq.projection is not None
    assert pq.projection.dtype == np.float32


def test_pq_reconstruct_applies_the_projection_and_fills_out() -> None:
    pq = _pq(projection=True)
    out = np.empty(4, dtype=np.float32)
    assert pq.reconstruct([1, 0], out=out) is out
    assert out.tolist() == [5.0, 4.0, 3.0, 2.0]  # [2, 3, 4, 5] reversed by the projection


def test_quantized_array_rejects_bad_codes_and_norms() -> None:
    with pytest.raises(ValueError, match=r"codes must have shape \(rows, 2\), got \(3, 3\)"):
        QuantizedArray(_pq(), np.zeros((3, 3), dtype=np.uint8))
    with pytest.raises(ValueError, match=r"norms must have shape \(3,\), got \(2,\)"):
        QuantizedArray(_pq(), np.zeros((3, 2), dtype=np.uint8), np.ones(2))


def test_quantized_array_converts_codes_to_uint8() -> None:
    s = QuantizedArray(_pq(), [[1, 0]])
    assert s.quantized_embeddings.dtype == np.uint8
    assert s[0].tolist() == [2.0, 3.0, 4.0, 5.0]


# --- indexing --------------------------------------------------------------------------


@pytest.mark.parametrize("key", [None, (0, 1), "0", b"0", 1.0])
def test_embedding_rejects_non_indices(key: object) -> None:
    with pytest.raises(TypeError, match="rows are selected by an int, a slice or integer indices"):
        _storage().embedding(key)


def test_embedding_rejects_float_arrays_but_accepts_empty_ones() -> None:
    with pytest.raises(TypeError, match="row indices must be integers, not float64"):
        _storage().embedding([0.0, 1.0])
    assert _storage().embedding([]).shape == (0, 4)


def test_embedding_rejects_an_out_of_the_wrong_shape() -> None:
    with pytest.raises(ValueError, match=r"out must have shape \(2, 4\), got \(4,\)"):
        _storage().embedding([0, 1], out=np.empty(4, dtype=np.float32))


def test_embedding_matches_dense_rows() -> None:
    s = _storage(projection=True)
    dense = np.asarray(s)
    np.testing.assert_array_equal(s.embedding(slice(None, None, -1)), dense[::-1])
    # an index matrix (indexing the expectation with a nested list would mean a tuple of indices on numpy < 1.23)
    np.testing.assert_array_equal(s.embedding(np.array([[2], [0]])), dense[np.array([[2], [0]])])
    out = np.empty((3, 4), dtype=np.float32)
    assert s.embedding(slice(None), out=out) is out
    np.testing.assert_array_equal(out, dense)
    assert np.asarray(s, dtype=np.float64).dtype == np.float64


def test_getitem_and_iteration_give_the_dense_rows_and_check_bounds() -> None:
    s = _storage()
    dense = np.asarray(s)
    np.testing.assert_array_equal(s[-1], dense[2])
    np.testing.assert_array_equal(s[np.int64(1)], dense[1])
    np.testing.assert_array_equal(s[1:], dense[1:])
    np.testing.assert_array_equal(s[[2, 0]], dense[[2, 0]])
    np.testing.assert_array_equal(np.stack(list(s)), dense)
    with pytest.raises(IndexError, match="row 3 out of range for 3 rows"):
        s[3]
    with pytest.raises(IndexError, match="row -4 out of range for 3 rows"):
        s[-4]


def test_equality_compares_quantizer_codes_and_norms_and_is_unhashable() -> None:
    assert _storage() == _storage()
    assert _storage(projection=True) == _storage(projection=True)
    assert _storage(projection=True) != _storage()
    assert _storage(norms=False) != _storage()
    assert _storage(norms=False) == _storage(norms=False)
    assert _storage() != "not a storage"
    with pytest.raises(TypeError):
        hash(_storage())


def test_repr_names_shape_subquantizers_centroids_projection_and_norms() -> None:
    assert repr(_storage(projection=True)) == "QuantizedArray(shape=(3, 4), subquantizers=2, centroids=2, projection=True, norms=True)"


# --- reading ---------------------------------------------------------------------------


@pytest.mark.parametrize("projection", [False, True])
@pytest.mark.parametrize("norms", [False, True])
def test_payload_round_trips_with_its_declared_length(projection: bool, norms: bool) -> None:
    s = _storage(projection, norms)
    payload = _payload(s)
    assert len(payload) == s.payload_len(0)
    assert _read(payload) == s


def test_read_rejects_zero_subquantizers() -> None:
    payload = _payload(_storage())
    struct.pack_into("<I", payload, 8, 0)
    with pytest.raises(FormatError, match="reconstructed length must be a positive multiple of the number of subquantizers") as err:
        _read(payload)
    assert err.value.offset == 8
    assert err.value.found == "q = 0, d = 4"


def test_read_rejects_length_not_a_multiple() -> None:
    payload = _payload(_storage())
    struct.pack_into("<I", payload, 12, 5)
    with pytest.raises(FormatError, match="positive multiple") as err:
        _read(payload)
    assert err.value.expected == "q > 0, d > 0 and d % q == 0"
    assert err.value.found.endswith("d = 5")


@pytest.mark.parametrize("k", [0, 257])
def test_read_rejects_centroid_count(k: int) -> None:
    payload = _payload(_storage())
    struct.pack_into("<I", payload, 16, k)
    with pytest.raises(FormatError, match="number of centroids out of range for u8 codes") as err:
        _read(payload)
    assert err.value.offset == 16
    assert err.value.found == k


def test_read_rejects_wrong_type_ids() -> None:
    payload = _payload(_storage())
    struct.pack_into("<I", payload, 28, 10)
    with pytest.raises(FormatError, match="unsupported quantized type") as err:
        _read(payload)
    assert err.value.offset == 28
    payload = _payload(_storage())
    struct.pack_into("<I", payload, 32, 99)
    with pytest.raises(FormatError, match="unsupported reconstructed type") as err:
        _read(payload)
    assert err.value.found == 99


def test_read_rejects_huge_row_count_before_allocating() -> None:
    payload = _payload(_storage())
    struct.pack_into("<Q", payload, 20, 1 << 40)
    with pytest.raises(Truncated, match="does not fit in the chunk"):
        _read(payload)


def test_read_rejects_out_of_range_code() -> None:
    payload = _payload(_storage())
    payload[-1] = 2  # k == 2: codes must be 0 or 1
    with pytest.raises(FormatError, match="quantization code out of range") as err:
        _read(payload)
    assert err.value.offset == len(payload) - 1
    assert err.value.expected == "< 2"
    assert err.value.found == 2
