"""Argument checks of the Embeddings facade and of the quantizer training functions, and unknown-word defaults with out=."""

from __future__ import annotations

import numpy as np
import pytest

from finalfusion import Embeddings, NdArray, Norms, SimpleVocab
from finalfusion.metadata import Metadata
from finalfusion.quantize import eigenvalue_allocation, encode, kmeans, train_pq
from finalfusion.storage.quantized import PQ


def _emb() -> Embeddings:
    return Embeddings(NdArray(np.array([[3.0, 4.0], [1.0, 0.0]], dtype=np.float32)), SimpleVocab(["a", "b"]))


def test_norms_setter_checks_type_and_size() -> None:
    emb = _emb()
    with pytest.raises(TypeError, match="norms must be Norms or None, got list"):
        emb.norms = [1.0, 2.0]  # type: ignore[assignment]
    with pytest.raises(ValueError, match="3"):
        emb.norms = Norms(np.ones(3, dtype=np.float32))
    emb.norms = Norms(np.array([5.0, 1.0], dtype=np.float32))
    assert emb.norms is not None
    assert emb.norms.norms.tolist() == [5.0, 1.0]
    emb.norms = None
    assert emb.norms is None


def test_metadata_setter_checks_type() -> None:
    emb = _emb()
    with pytest.raises(TypeError, match="metadata must be Metadata or None, got dict"):
        emb.metadata = {"name": "x"}  # type: ignore[assignment]
    emb.metadata = Metadata({"name": "x"})
    assert emb.metadata is not None
    assert emb.metadata["name"] == "x"


def test_embedding_with_norm_into_out() -> None:
    emb = _emb()
    out = np.zeros(2, dtype=np.float32)
    vec, norm = emb.embedding_with_norm("a", out=out)
    assert vec is out
    assert out.tolist() == [3.0, 4.0]
    assert norm == 1.0
    default = (np.array([7.0, 7.0], dtype=np.float32), 0.5)
    vec, norm = emb.embedding_with_norm("zzz", out=out, default=default)
    assert vec is out
    assert out.tolist() == [7.0, 7.0]
    assert norm == 0.5


def test_embedding_batch_out_shape() -> None:
    with pytest.raises(ValueError, match=r"out must have shape \(3, 2\), got \(2, 2\)"):
        _emb().embedding_batch(["a", "b", "c"], out=np.zeros((2, 2), dtype=np.float32))


def test_bucket_to_explicit_needs_buckets() -> None:
    with pytest.raises(TypeError, match="only bucketed vocabularies can be converted to explicit, not SimpleVocab"):
        _emb().bucket_to_explicit()


def test_kmeans_argument_checks() -> None:
    x = np.arange(8, dtype=np.float32).reshape(4, 2)
    with pytest.raises(ValueError, match=r"x must be 2-D, got shape \(8,\)"):
        kmeans(x.reshape(-1), 2)
    with pytest.raises(ValueError, match=r"k must be in 1\.\.4 \(the number of rows\), got 5"):
        kmeans(x, 5)
    with pytest.raises(ValueError, match="n_iterations and n_attempts must be >= 1, got 0 and 1"):
        kmeans(x, 2, n_iterations=0)


def test_eigenvalue_allocation_needs_a_divisor() -> None:
    with pytest.raises(ValueError, match="n_subquantizers must divide the dimensionality 4, got 3"):
        eigenvalue_allocation(np.ones((5, 4)), 3)


def test_train_pq_and_encode_shapes() -> None:
    with pytest.raises(ValueError, match=r"x must be 2-D, got shape \(4,\)"):
        train_pq(np.ones(4), 2)
    pq = PQ(np.zeros((2, 2, 2), dtype=np.float32))
    with pytest.raises(ValueError, match=r"x must have shape \(n, 4\), got \(3, 3\)"):
        encode(pq, np.ones((3, 3)))
