"""Product quantization (finalfusion.quantize, Embeddings.quantize/reconstruct) on synthetic and real files."""

from __future__ import annotations

import inspect
import pydoc
import re
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import finalfusion
from finalfusion import Embeddings, LegacyFormatWarning, load_finalfusion
from finalfusion.metadata import Metadata
from finalfusion.norms import Norms
from finalfusion.quantize import eigenvalue_allocation, encode, kmeans, quantize_storage, train_pq
from finalfusion.storage import NdArray, QuantizedArray
from finalfusion.storage.quantized import PQ
from finalfusion.vocab import SimpleVocab


def correlated(n: int, d: int, seed: int = 0, rank: int = 6) -> np.ndarray:
    """Rows with strongly correlated dimensions: a low-rank mix plus a little noise."""
    rng = np.random.default_rng(seed)
    latent = rng.standard_normal((n, rank)) * np.linspace(3.0, 0.5, rank)
    return (latent @ rng.standard_normal((rank, d)) + 0.1 * rng.standard_normal((n, d))).astype(np.float32)


def embeddings_of(matrix: np.ndarray, **kw: Any) -> Embeddings:
    return Embeddings(NdArray(matrix), SimpleVocab([f"w{i}" for i in range(len(matrix))]), **kw)


def mse(a: Any, b: Any) -> float:
    return float(np.mean(np.sum((np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64)) ** 2, axis=1)))


def load_quiet(path: Path) -> Embeddings:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LegacyFormatWarning)
        return load_finalfusion(path)


@pytest.fixture(scope="module")
def data() -> np.ndarray:
    return correlated(1200, 16)


# -- parameters ---------------------------------------------------------------------
@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"n_subquantizers": 5}, "must divide the dimensionality 16"),
        ({"n_subquantizers": 0}, "must be in 1..16"),
        ({"n_subquantizers": 32}, "must be in 1..16"),
        ({"n_subquantizers": 2.0}, "must be an integer"),
        ({"n_bits": 0}, "n_bits must be in 1..8"),
        ({"n_bits": 9}, "n_bits must be in 1..8"),
        ({"n_bits": True}, "must be an integer"),
        ({"quantizer": "rq"}, "quantizer must be one of 'pq', 'opq', 'gaussian_opq'"),
        ({"n_iterations": 0}, "n_iterations must be >= 1"),
        ({"n_attempts": 0}, "n_attempts must be >= 1"),
        ({"n_bits": 8, "sample": 100}, "256 centroids per subquantizer, more than the 100 training rows"),
        ({"sample": 0}, "sample must be >= 1"),
        ({"sample": 1.5}, "fractional sample must be in"),
        ({"sample": "all"}, "sample must be None"),
    ],
)
def test_bad_parameters_fail_before_any_work(data: np.ndarray, kwargs: dict[str, Any], message: str) -> None:
    calls: list[tuple[str, int, int]] = []
    with pytest.raises(ValueError, match=message):
        embeddings_of(data).quantize(progress=lambda *a: calls.append(a), **{"n_bits": 4, **kwargs})
    assert calls == []


def test_more_centroids_than_rows() -> None:
    with pytest.raises(ValueError, match=r"256 centroids per subquantizer, more than the 100 rows"):
        embeddings_of(correlated(100, 8)).quantize()


def test_odd_dims_need_explicit_subquantizers() -> None:
    with pytest.raises(ValueError, match="needs an even dimensionality"):
        embeddings_of(correlated(300, 5)).quantize(n_bits=2)
    assert embeddings_of(correlated(300, 5)).quantize(n_subquantizers=5, n_bits=2, n_iterations=3).storage.quantized_len == 5


@pytest.mark.parametrize("sample", [None, 700])
def test_non_finite_rows_are_rejected(data: np.ndarray, sample: int | None) -> None:
    x = data.copy()
    x[1111, 3] = np.nan
    x[1150, 0] = np.inf
    with pytest.raises(ValueError, match=r"storage row 11(11|50) has non-finite values"):
        embeddings_of(x).quantize(n_subquantizers=4, n_bits=2, n_iterations=2, seed=0, sample=sample)


def test_defaults_follow_finalfusion_utils(data: np.ndarray) -> None:
    q = embeddings_of(data[:300]).quantize(n_iterations=2, seed=0).storage
    assert isinstance(q, QuantizedArray)
    assert (q.quantizer.quantized_len, q.quantizer.n_centroids) == (8, 256)  # dims / 2 subquantizers, 8 bits
    assert q.quantizer.projection is None  # pq
    assert q.norms is not None  # normalize=True


# -- files ---------------------------------------------------------------------------
@pytest.mark.parametrize("quantizer", ["pq", "opq", "gaussian_opq"])
def test_round_trip_through_files(tmp_path: Path, data: np.ndarray, quantizer: str) -> None:
    norms = Norms(np.linspace(1, 2, len(data)))
    meta = Metadata({"model": {"type": "test"}})
    emb = embeddings_of(data, norms=norms, metadata=meta)
    quant = emb.quantize(n_subquantizers=4, n_bits=5, quantizer=quantizer, n_iterations=5, seed=1)
    assert quant.vocab is emb.vocab
    assert quant.norms is norms
    assert quant.metadata is meta
    path = tmp_path / "q.fifu"
    quant.write(path)
    for mmap in (False, True):
        back = load_finalfusion(path, mmap=mmap)
        assert back.storage == quant.storage
        assert back.metadata == meta
        np.testing.assert_array_equal(back.norms.norms, norms.norms)  # type: ignore[union-attr]
        np.testing.assert_array_equal(back.embedding_batch(["w0", "w7", "w999"])[0], quant.embedding_batch(["w0", "w7", "w999"])[0])
    quant.write(tmp_path / "again.fifu")
    assert (tmp_path / "again.fifu").read_bytes() == path.read_bytes()


def test_reconstruct_is_the_chunk_reconstruction(data: np.ndarray) -> None:
    quant = embeddings_of(data).quantize(n_subquantizers=8, n_bits=4, quantizer="opq", n_iterations=4, seed=2)
    storage = quant.storage
    assert isinstance(storage, QuantizedArray)
    dense = quant.reconstruct()
    assert isinstance(dense.storage, NdArray)
    # docs/format.md §5.4: concat(centroids[codes]) @ projection.T * norms
    pq, codes = storage.quantizer, storage.quantized_embeddings.astype(np.intp)
    manual = np.concatenate([pq.quantizers[j][codes[:, j]] for j in range(pq.quantized_len)], axis=1) @ pq.projection.T  # type: ignore[union-attr]
    manual *= storage.norms[:, None]  # type: ignore[index]
    np.testing.assert_allclose(dense.storage.matrix, manual, rtol=1e-5, atol=1e-5)
    assert dense.vocab is quant.vocab
    assert mse(dense.storage.matrix, data) < 0.05 * mse(np.zeros_like(data), data)
    assert dense.reconstruct().storage is dense.storage


# -- quality -------------------------------------------------------------------------
def test_error_decreases_with_more_bits(data: np.ndarray) -> None:
    errors = [mse(embeddings_of(data).quantize(n_subquantizers=4, n_bits=b, n_iterations=20, seed=0).reconstruct().storage.matrix, data) for b in (1, 3, 5, 7)]
    assert errors == sorted(errors, reverse=True), errors
    assert errors[-1] < 0.5 * errors[0]


def test_error_decreases_with_more_subquantizers(data: np.ndarray) -> None:
    errors = [
        mse(embeddings_of(data).quantize(n_subquantizers=m, n_bits=4, n_iterations=20, seed=0).reconstruct().storage.matrix, data) for m in (1, 2, 4, 8, 16)
    ]
    assert errors == sorted(errors, reverse=True), errors
    assert errors[-1] < 0.2 * errors[0]


def test_opq_beats_pq_on_correlated_data(data: np.ndarray) -> None:
    err = {
        name: mse(embeddings_of(data).quantize(n_subquantizers=4, n_bits=4, quantizer=name, n_iterations=20, seed=0).reconstruct().storage.matrix, data)
        for name in ("pq", "opq", "gaussian_opq")
    }
    assert err["opq"] < 0.8 * err["pq"], err
    assert err["gaussian_opq"] < 0.8 * err["pq"], err


def test_opq_iterations_do_not_increase_error(data: np.ndarray) -> None:
    unit = data / np.linalg.norm(data, axis=1, keepdims=True)

    def err(it: int) -> float:
        pq = train_pq(unit, 4, 4, "opq", it, seed=3)
        return mse(pq.reconstruct(encode(pq, unit)), unit)

    assert err(30) <= err(2) * 1.001


@pytest.mark.parametrize("quantizer", ["opq", "gaussian_opq"])
def test_rotation_is_orthogonal(data: np.ndarray, quantizer: str) -> None:
    pq = train_pq(data, 4, 3, quantizer, 5, seed=0)
    p = pq.projection
    assert p is not None
    assert p.shape == (16, 16)
    assert p.dtype == np.float32
    np.testing.assert_allclose(p.T @ p, np.eye(16), atol=1e-5)
    np.testing.assert_allclose(p @ p.T, np.eye(16), atol=1e-5)


def test_attempts_keep_the_best_run() -> None:
    x = correlated(400, 2, seed=5)
    errs = [kmeans(x, 16, n_iterations=3, n_attempts=1, seed=s)[2] for s in range(4)]
    best = kmeans(x, 16, n_iterations=3, n_attempts=4, seed=np.random.default_rng(0))[2]
    assert best <= max(errs)
    c, labels, err = kmeans(x, 16, n_iterations=50, seed=0)
    assert err == pytest.approx(float(np.sum((x - c[labels]) ** 2)), rel=1e-4)


def test_kmeans_empty_clusters_and_duplicates() -> None:
    # 10 distinct points, 16 clusters: duplicates seed empty clusters; no NaN, zero error.
    x = np.repeat(np.arange(10, dtype=np.float32)[:, None] * [1.0, -2.0], 30, axis=0)
    c, labels, err = kmeans(x, 16, n_iterations=10, seed=0)
    assert np.isfinite(c).all()
    assert err == pytest.approx(0.0, abs=1e-6)
    np.testing.assert_allclose(c[labels], x)


# -- determinism, sampling, normalization, progress -------------------------------------
def test_seed_makes_it_deterministic(data: np.ndarray) -> None:
    def run(seed: int) -> QuantizedArray:
        s = embeddings_of(data).quantize(n_subquantizers=4, n_bits=4, quantizer="opq", n_iterations=3, seed=seed, sample=600).storage
        assert isinstance(s, QuantizedArray)
        return s

    assert run(7) == run(7)
    assert run(7) != run(8)


def test_mmap_input_and_sampling(tmp_path: Path, data: np.ndarray) -> None:
    path = tmp_path / "dense.fifu"
    embeddings_of(data).write(path)
    eager = load_finalfusion(path).quantize(n_subquantizers=4, n_bits=4, n_iterations=5, seed=3, sample=0.5)
    mapped_emb = load_finalfusion(path, mmap=True)
    assert not mapped_emb.storage.matrix.flags.writeable  # type: ignore[attr-defined]
    mapped = mapped_emb.quantize(n_subquantizers=4, n_bits=4, n_iterations=5, seed=3, sample=600)
    assert mapped.storage == eager.storage
    assert mapped.storage.shape == data.shape  # every row encoded, not only the sample
    full = embeddings_of(data).quantize(n_subquantizers=4, n_bits=4, n_iterations=5, seed=3, sample=10**9)
    assert full.storage.shape == data.shape


def test_normalize_keeps_norms_in_the_chunk(data: np.ndarray) -> None:
    x = data.copy()
    x[5] = 0.0
    on = embeddings_of(x).quantize(n_subquantizers=4, n_bits=4, n_iterations=5, seed=0)
    off = embeddings_of(x).quantize(n_subquantizers=4, n_bits=4, n_iterations=5, seed=0, normalize=False)
    assert isinstance(on.storage, QuantizedArray)
    assert isinstance(off.storage, QuantizedArray)
    np.testing.assert_allclose(on.storage.norms, np.linalg.norm(x, axis=1), rtol=1e-6)  # type: ignore[arg-type]
    assert off.storage.norms is None
    np.testing.assert_array_equal(on["w5"], np.zeros(16, dtype=np.float32))
    # The quantized directions are unit vectors (up to quantization error).
    unit_rows = on.storage.quantizer.reconstruct(on.storage.quantized_embeddings)
    assert abs(float(np.median(np.linalg.norm(unit_rows, axis=1))) - 1.0) < 0.1


def test_progress_reports_training_and_encoding() -> None:
    x = correlated(40000, 8)
    calls: list[tuple[str, int, int]] = []
    embeddings_of(x).quantize(n_subquantizers=2, n_bits=2, n_iterations=2, seed=0, progress=lambda *a: calls.append(a))
    train = [c for c in calls if c[0] == "train"]
    enc = [c for c in calls if c[0] == "encode"]
    assert train[-1] == ("train", 2, 2)
    assert [c[1] for c in train] == [1, 2]
    assert len(enc) >= 2
    assert enc[-1] == ("encode", 40000, 40000)
    assert [c[1] for c in enc] == sorted(c[1] for c in enc)


# -- real files ------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("quantized", "dense", "max_err"), [("rust-quantized.fifu", "rust-similarity.fifu", 0.9), ("python-pq.fifu", "python-pq-check.fifu", 0.04)]
)
def test_reference_quantized_files_reconstruct(testdata: Path, quantized: str, dense: str, max_err: float) -> None:
    quant, ref = load_quiet(testdata / quantized), load_quiet(testdata / dense)
    assert list(quant.vocab) == list(ref.vocab)
    rec = quant.reconstruct()
    matrix, want = rec.storage.matrix, ref.storage.matrix  # type: ignore[attr-defined]
    assert np.abs(matrix - want).max() <= max_err
    cos = np.sum(matrix * want, axis=1) / np.linalg.norm(matrix, axis=1) / np.linalg.norm(want, axis=1)
    assert cos.min() > 0.99
    for word in ("Berlin", "Potsdam"):
        np.testing.assert_array_equal(rec[word], quant[word])


@pytest.mark.parametrize(("quantized", "dense"), [("rust-quantized.fifu", "rust-similarity.fifu"), ("python-pq.fifu", "python-pq-check.fifu")])
def test_same_parameters_as_reference_files_give_comparable_error(testdata: Path, quantized: str, dense: str) -> None:
    ref_q, ref = load_quiet(testdata / quantized), load_quiet(testdata / dense)
    ref_storage = ref_q.storage
    assert isinstance(ref_storage, QuantizedArray)
    q, k = ref_storage.quantizer.quantized_len, ref_storage.quantizer.n_centroids
    ours = ref.quantize(n_subquantizers=q, n_bits=k.bit_length() - 1, seed=0)
    dense_m = ref.storage.matrix  # type: ignore[attr-defined]
    ours_err, ref_err = mse(ours.reconstruct().storage.matrix, dense_m), mse(ref_q.reconstruct().storage.matrix, dense_m)
    assert ours_err < ref_err, (ours_err, ref_err)  # the reference tools' files: ours is at least as good


@pytest.mark.parametrize("name", ["rust-quantized.fifu", "python-pq.fifu"])
@pytest.mark.parametrize("quantizer", ["pq", "opq", "gaussian_opq"])
def test_requantizing_reference_files(tmp_path: Path, testdata: Path, name: str, quantizer: str) -> None:
    quant = load_quiet(testdata / name)
    again = quant.quantize(n_subquantizers=25, n_bits=4, quantizer=quantizer, n_iterations=10, seed=0)
    path = tmp_path / "again.fifu"
    again.write(path)
    back = load_finalfusion(path)
    assert back.storage == again.storage
    src, got = quant.reconstruct().storage.matrix, back.reconstruct().storage.matrix  # type: ignore[attr-defined]
    assert mse(got, src) < 0.1 * mse(np.zeros_like(src), src)


def test_subword_embeddings_quantize_all_rows(tmp_path: Path, testdata: Path) -> None:
    emb = load_quiet(testdata / "python-ff_buckets.fifu")
    assert emb.storage.shape == (1026, 5)
    quant = emb.quantize(n_subquantizers=5, n_bits=6, n_iterations=20, seed=0, normalize=False)
    assert quant.storage.shape == (1026, 5)
    assert quant.vocab is emb.vocab
    assert quant.metadata is emb.metadata
    assert quant.norms is emb.norms
    dense = np.asarray(emb.storage)
    rec = np.asarray(quant.storage)
    assert mse(rec, dense) < 0.05 * mse(np.zeros_like(dense), dense)
    # unknown words go through the quantized subword buckets
    for word in ("two", "nonsense"):
        a, b = emb[word], quant[word]
        assert float(a @ b) / float(np.linalg.norm(a) * np.linalg.norm(b)) > 0.95
    path = tmp_path / "buckets-pq.fifu"
    quant.write(path)
    back = load_finalfusion(path)
    assert back.storage == quant.storage
    assert back.metadata == emb.metadata
    np.testing.assert_array_equal(back["nonsense"], quant["nonsense"])


def test_exported() -> None:
    assert finalfusion.quantize.quantize_storage is quantize_storage


@pytest.mark.parametrize("quantizer", ["pq", "opq"])
def test_requantizing_the_bare_reference_chunk(testdata: Path, quantizer: str) -> None:
    from test_testdata import _wrapped_quantized

    ref = finalfusion.storage.load_quantized_array(_wrapped_quantized(testdata))
    dense = finalfusion.quantize.reconstruct_storage(ref).matrix
    np.testing.assert_allclose(dense, np.asarray(ref), rtol=1e-6)
    assert np.linalg.norm(dense, axis=1).min() > 100  # in-chunk norms 573.0, 1522.6, ...
    again = quantize_storage(ref, n_subquantizers=10, n_bits=4, quantizer=quantizer, n_iterations=25, seed=0)
    np.testing.assert_allclose(again.norms, np.linalg.norm(dense, axis=1), rtol=1e-5)  # type: ignore[arg-type]
    assert mse(np.asarray(again), dense) < 0.1 * mse(np.zeros_like(dense), dense)


def test_opq_progress_counts_iterations(data: np.ndarray) -> None:
    calls: list[tuple[str, int, int]] = []
    embeddings_of(data).quantize(n_subquantizers=4, n_bits=3, quantizer="opq", n_iterations=3, seed=0, progress=lambda *a: calls.append(a))
    assert [c for c in calls if c[0] == "train"] == [("train", i, 5) for i in range(1, 6)]
    assert calls[-1] == ("encode", len(data), len(data))


def test_kmeans_checks_its_arguments() -> None:
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


def test_train_pq_and_encode_check_shapes() -> None:
    with pytest.raises(ValueError, match=r"x must be 2-D, got shape \(4,\)"):
        train_pq(np.ones(4), 2)
    pq = PQ(np.zeros((2, 2, 2), dtype=np.float32))
    with pytest.raises(ValueError, match=r"x must have shape \(n, 4\), got \(3, 3\)"):
        encode(pq, np.ones((3, 3)))


def test_embeddings_quantize_takes_the_parameters_of_quantize_storage() -> None:
    # One definition: Embeddings.quantize reports quantize_storage's parameters (self for the storage) to inspect and help().
    method = list(inspect.signature(Embeddings.quantize).parameters.values())
    function = list(inspect.signature(quantize_storage).parameters.values())
    assert method[0].name == "self"
    assert method[1:] == function[1:]
    assert [p.name for p in method[1:4]] == ["n_subquantizers", "n_bits", "quantizer"]
    # The docs (Other Parameters, read by mkdocstrings) name the same parameters with the same defaults.
    documented = re.findall(r"^ {8}(\w+) : .+, default (.+)$", Embeddings.quantize.__doc__ or "", re.MULTILINE)
    assert documented == [(p.name, repr(p.default).replace("'", '"')) for p in function[1:]]
    text = pydoc.render_doc(Embeddings.quantize, renderer=pydoc.plaintext)
    assert "n_subquantizers: 'int | None' = None" in text
    assert "Product-quantize the embeddings" in text


def test_embeddings_quantize_forwards_positional_and_keyword_arguments() -> None:
    emb = embeddings_of(correlated(64, 8))
    positional = emb.quantize(4, 4, "pq", 5, 1, True, 0)
    keywords = emb.quantize(n_subquantizers=4, n_bits=4, n_iterations=5, seed=0)
    assert positional.storage == keywords.storage
    assert positional.vocab is emb.vocab
    with pytest.raises(TypeError, match="n_bitz"):
        emb.quantize(n_bitz=4)  # type: ignore[call-arg]
