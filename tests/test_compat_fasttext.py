"""fastText .bin reading and writing without the fastText bindings (docs/format.md §13.3).

Cross-tool checks against fastText and gensim are in test_interop_fasttext.py.
"""

from __future__ import annotations

import gzip
import io
import struct
import tracemalloc
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import finalfusion
import finalfusion.limits
from finalfusion import Embeddings, FastTextVocab, FormatError, LegacyFormatWarning, Metadata, NdArray, Norms, SimpleVocab, Truncated
from finalfusion.compat.fasttext import load_fasttext, write_fasttext
from finalfusion.errors import BadMagic, UnsupportedVersion
from finalfusion.storage import QuantizedArray
from finalfusion.storage.quantized import PQ
from finalfusion.subword import FastTextIndexer, FinalfusionHashIndexer
from finalfusion.vocab import FinalfusionBucketVocab

ARGS = struct.Struct("<12id")


def build_bin(
    words: list[bytes],
    matrix: np.ndarray,
    *,
    dim: int | None = None,
    bucket: int = 0,
    minn: int = 0,
    maxn: int = 0,
    loss: int = 2,
    model: int = 2,
    version: int = 12,
    magic: int = 793712314,
    nlabels: int = 0,
    pruneidx: int = -1,
    types: list[int] | None = None,
    quantized: bool = False,
    rows: int | None = None,
) -> bytes:
    """A fastText model file assembled field by field (independent of our writer)."""
    dim = matrix.shape[1] if dim is None else dim
    out = struct.pack("<ii", magic, version)
    out += ARGS.pack(dim, 5, 5, 1, 5, 1, loss, model, bucket, minn, maxn, 100, 1e-4)
    out += struct.pack("<iiiqq", len(words), len(words) - nlabels, nlabels, 100, pruneidx)
    for i, w in enumerate(words):
        out += w + b"\x00" + struct.pack("<qb", 100 - i, (types or [0] * len(words))[i])
    out += struct.pack("<?qq", quantized, matrix.shape[0] if rows is None else rows, matrix.shape[1])
    out += matrix.astype("<f4").tobytes()
    out += struct.pack("<?qq", False, len(words), dim) + bytes(4 * dim * len(words))
    return out


def cosine(a: Any, b: Any) -> float:
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    return float(a @ b / np.linalg.norm(a) / np.linalg.norm(b))


@pytest.fixture(scope="module")
def ft_file(testdata: Path) -> Path:
    return testdata / "rust-fasttext.bin"


@pytest.fixture(scope="module")
def ft(ft_file: Path) -> Embeddings:
    return load_fasttext(ft_file)


# -- the real test file -------------------------------------------------------------


def test_real_file_structure(ft: Embeddings, testdata: Path) -> None:
    assert isinstance(ft.vocab, FastTextVocab)
    assert len(ft.vocab) == 157
    assert ft.vocab.words[:4] == ["</s>", ",", ".", "und"]
    assert ft.vocab.subword_indexer == FastTextIndexer(100, 3, 6)
    assert ft.storage.shape == (257, 50)
    assert ft.norms is not None
    assert len(ft.norms) == 157
    np.testing.assert_allclose(np.linalg.norm(ft.storage.matrix[:157], axis=1), 1.0, atol=1e-6)
    assert ft.metadata == {
        "dims": 50,
        "window_size": 5,
        "epoch": 5,
        "min_count": 1000,
        "ns": 5,
        "word_ngrams": 1,
        "loss": "NegativeSampling",
        "model": "SkipGram",
        "buckets": 100,
        "min_n": 3,
        "max_n": 6,
        "lr_update_rate": 100,
        "sampling_threshold": 0.0001,
    }
    # The python copy is byte-identical and loads the same.
    other = load_fasttext(testdata / "python-fasttext.bin")
    np.testing.assert_array_equal(other.storage.matrix, ft.storage.matrix)


def test_real_file_matches_oracle(ft: Embeddings, lookups: dict[str, Any]) -> None:
    """finalfusion-python 0.7.1's lookups, except </s>, which fastText gives no n-grams."""
    cases = lookups["rust-fasttext.bin"]["lookups"]
    assert "</s>" in cases
    assert len(cases) >= 7
    for word, exp in cases.items():
        if exp["embedding"] is None:
            assert ft.embedding(word) is None
            continue
        if word == "</s>":
            continue
        vec, norm = ft.embedding_with_norm(word)
        assert cosine(vec, exp["embedding"]) > 0.99999, word
        np.testing.assert_allclose(vec, exp["embedding"], atol=2e-6)
        assert norm == pytest.approx(exp["norm"], rel=1e-5)
        if isinstance(exp["vocab_idx"], list):
            assert ft.vocab.idx(word) == exp["vocab_idx"]


def test_eos_has_no_ngrams_like_fasttext(ft: Embeddings, ft_file: Path, lookups: dict[str, Any]) -> None:
    """fastText uses only </s>'s own row; 0.7.1 and Rust average in n-grams of '<</s>>' too."""
    raw = load_fasttext(ft_file, normalize=False)
    raw_file = np.frombuffer(ft_file.read_bytes(), dtype="<f4", count=257 * 50, offset=_matrix_offset(ft_file)).reshape(257, 50)
    np.testing.assert_array_equal(raw.storage.matrix[0], raw_file[0])
    oracle = np.asarray(lookups["rust-fasttext.bin"]["lookups"]["</s>"]["embedding"])
    rows = ft.vocab.subword_indices("</s>")
    with_ngrams = (raw_file[0] + raw_file[rows].sum(axis=0)) / (len(rows) + 1)
    assert cosine(with_ngrams, oracle) > 0.999999
    assert cosine(ft["</s>"], oracle) < 0.5


def _matrix_offset(path: Path) -> int:
    data = path.read_bytes()
    pos = 8 + ARGS.size + 28
    for _ in range(157):
        pos = data.index(b"\x00", pos) + 10
    return pos + 17


def test_unknown_words_use_ngram_sum(ft: Embeddings, ft_file: Path) -> None:
    raw_file = np.frombuffer(ft_file.read_bytes(), dtype="<f4", count=257 * 50, offset=_matrix_offset(ft_file)).reshape(257, 50)
    for word in ["Tübingen", "unknown", "x", "東京"]:
        rows = ft.vocab.subword_indices(word)
        expected = raw_file[rows].sum(axis=0)
        vec, norm = ft.embedding_with_norm(word)
        np.testing.assert_allclose(vec * norm, expected, rtol=1e-5, atol=1e-6)


def test_normalize_false_keeps_fasttext_vectors(ft: Embeddings, ft_file: Path) -> None:
    raw = load_fasttext(ft_file, normalize=False)
    assert raw.norms is None
    assert ft.norms is not None
    np.testing.assert_allclose(raw.storage.matrix[:157], ft.storage.matrix[:157] * ft.norms.norms[:, None], rtol=1e-5, atol=1e-7)
    np.testing.assert_array_equal(raw.storage.matrix[157:], ft.storage.matrix[157:])


def test_limit_keeps_buckets(ft: Embeddings, ft_file: Path) -> None:
    small = load_fasttext(ft_file, limit=10)
    assert small.vocab.words == ft.vocab.words[:10]
    assert small.storage.shape == (110, 50)
    np.testing.assert_array_equal(small.storage.matrix[:10], ft.storage.matrix[:10])
    np.testing.assert_array_equal(small.storage.matrix[10:], ft.storage.matrix[157:])
    # A dropped word is still embedded through its n-grams.
    dropped = ft.vocab.words[20]
    assert dropped not in small.vocab
    ngram_sum = ft.storage.matrix[ft.vocab.subword_indices(dropped)].sum(axis=0)
    np.testing.assert_allclose(small[dropped], ngram_sum / np.linalg.norm(ngram_sum), rtol=1e-5, atol=1e-6)
    assert load_fasttext(ft_file, limit=0).storage.shape == (100, 50)
    assert len(load_fasttext(ft_file, limit=10_000).vocab) == 157
    with pytest.raises(ValueError, match="limit"):
        load_fasttext(ft_file, limit=-1)


def test_sources_gzip_and_file_objects(ft: Embeddings, ft_file: Path, tmp_path: Path) -> None:
    data = ft_file.read_bytes()
    gz = tmp_path / "model.bin.gz"
    gz.write_bytes(gzip.compress(data))
    for source in (data, io.BytesIO(data), str(ft_file), gz, gzip.compress(data), io.BytesIO(gzip.compress(data))):
        got = load_fasttext(source)
        np.testing.assert_array_equal(got.storage.matrix, ft.storage.matrix)
        assert got.vocab == ft.vocab
    with open(ft_file, "rb") as f:
        np.testing.assert_array_equal(load_fasttext(f).storage.matrix, ft.storage.matrix)


def test_exported_from_package() -> None:
    assert finalfusion.load_fasttext is load_fasttext
    assert finalfusion.write_fasttext is write_fasttext
    assert finalfusion.compat.load_fasttext is load_fasttext


# -- hand-built models --------------------------------------------------------------


def test_maxn_zero_is_simple_vocab() -> None:
    m = np.arange(12, dtype=np.float32).reshape(3, 4) + 1
    emb = load_fasttext(build_bin([b"a", b"b", b"c"], m))
    assert isinstance(emb.vocab, SimpleVocab)
    np.testing.assert_allclose(emb["b"] * emb.norms.norms[1], m[1], rtol=1e-6)  # type: ignore[union-attr]
    assert emb.embedding("zz") is None
    assert emb.metadata is not None
    assert emb.metadata["max_n"] == 0


def test_min_n_one_skips_lone_markers() -> None:
    """fastText does not use '<' and '>' as 1-grams (Dictionary::computeSubwords)."""
    words = ["ab", "c"]
    bucket = 50
    rng = np.random.default_rng(3)
    m = rng.normal(size=(2 + bucket, 4)).astype(np.float32)
    emb = load_fasttext(build_bin([w.encode() for w in words], m, bucket=bucket, minn=1, maxn=3), normalize=False)
    idx = FastTextIndexer(bucket, 1, 3)
    for i, w in enumerate(words):
        grams = [g for g in finalfusion.subword.ngrams(w, 1, 3) if g not in ("<", ">")]
        rows = [2 + idx(g) for g in grams]  # type: ignore[operator]
        expected = (m[i] + m[rows].sum(axis=0)) / (len(rows) + 1)
        np.testing.assert_allclose(emb[w], expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("words", [["hallo", "welt", "</s>"], ["ünïcödé", "東京都", "😀", "a b", ""]])
def test_round_trip(words: list[str], tmp_path: Path) -> None:
    rng = np.random.default_rng(7)
    vocab = FastTextVocab(words, FastTextIndexer(40, 3, 5))
    matrix = rng.normal(size=(len(words) + 40, 6)).astype(np.float32)
    path = tmp_path / "m.bin"
    emb = Embeddings(NdArray(matrix), vocab, metadata=Metadata({"model": "CBOW", "loss": "Softmax", "epoch": 9}))
    write_fasttext(path, emb)
    back = load_fasttext(path, normalize=False)
    assert back.vocab == vocab
    np.testing.assert_allclose(back.storage.matrix, matrix, atol=1e-5)
    assert back.metadata is not None
    assert (back.metadata["model"], back.metadata["loss"], back.metadata["epoch"], back.metadata["dims"]) == ("CBOW", "Softmax", 9, 6)
    again = tmp_path / "again.bin"
    write_fasttext(again, load_fasttext(path))
    back2 = load_fasttext(again, normalize=False)
    np.testing.assert_allclose(back2.storage.matrix, matrix, atol=2e-5)


def test_empty_models(tmp_path: Path) -> None:
    path = tmp_path / "empty.bin"
    write_fasttext(path, Embeddings(NdArray(np.ones((5, 3), dtype=np.float32)), FastTextVocab([], FastTextIndexer(5))))
    back = load_fasttext(path)
    assert len(back.vocab) == 0
    np.testing.assert_allclose(back["abc"], np.ones(3) / np.sqrt(3), rtol=1e-6)
    write_fasttext(path, Embeddings(NdArray(np.ones((0, 3), dtype=np.float32)), SimpleVocab([])))
    assert load_fasttext(path).storage.shape == (0, 3)
    assert load_fasttext(gzip.compress(path.read_bytes())).storage.shape == (0, 3)


def test_real_file_round_trip_keeps_input_matrix(ft_file: Path, ft: Embeddings, tmp_path: Path) -> None:
    out = tmp_path / "out.bin"
    write_fasttext(out, ft)
    raw_in = np.frombuffer(ft_file.read_bytes(), dtype="<f4", count=257 * 50, offset=_matrix_offset(ft_file)).reshape(257, 50)
    raw_out = np.frombuffer(out.read_bytes(), dtype="<f4", count=257 * 50, offset=_matrix_offset(out)).reshape(257, 50)
    np.testing.assert_allclose(raw_out, raw_in, atol=1e-5)
    assert load_fasttext(out).metadata == ft.metadata
    # Counts descend from n to 1 and the file ends right after a zero output matrix.
    data = out.read_bytes()
    size, nwords, nlabels, ntokens, prune = struct.unpack_from("<iiiqq", data, 8 + ARGS.size)
    assert (size, nwords, nlabels, ntokens, prune) == (157, 157, 0, 157 * 158 // 2, -1)
    tail = data[_matrix_offset(out) + 257 * 200 :]
    assert struct.unpack_from("<?qq", tail) == (False, 157, 50)
    assert len(tail) == 17 + 157 * 200
    assert not any(tail[17:])


def test_simple_vocab_and_quantized_write(tmp_path: Path, testdata: Path) -> None:
    emb = finalfusion.load_finalfusion(testdata / "rust-quantized.fifu")
    path = tmp_path / "q.bin"
    write_fasttext(path, emb)
    back = load_fasttext(path, normalize=False)
    assert isinstance(back.vocab, SimpleVocab)
    assert back.vocab == emb.vocab
    np.testing.assert_allclose(back.storage.matrix, emb.storage.rows(np.arange(len(emb.vocab))), rtol=1e-6)
    normed = Embeddings(NdArray(np.array([[0.6, 0.8]], dtype=np.float32)), SimpleVocab(["w"]), norms=Norms([5.0]))
    write_fasttext(path, normed)
    np.testing.assert_allclose(load_fasttext(path, normalize=False)["w"], [3.0, 4.0], rtol=1e-6)


def test_quantized_subword_storage_write(tmp_path: Path) -> None:
    rng = np.random.default_rng(11)
    vocab = FastTextVocab(["alpha", "beta", "</s>"], FastTextIndexer(16, 3, 6))
    pq = PQ(rng.normal(size=(2, 4, 3)).astype(np.float32), None)
    storage = QuantizedArray(pq, rng.integers(0, 4, size=(19, 2)).astype(np.uint8))
    emb = Embeddings(storage, vocab)
    path = tmp_path / "pq.bin"
    write_fasttext(path, emb)
    back = load_fasttext(path, normalize=False)
    np.testing.assert_allclose(back.storage.matrix, storage.rows(np.arange(19)), atol=1e-5)
    for word in ["alpha", "</s>", "gamma"]:
        np.testing.assert_allclose(back[word], emb[word], atol=1e-5)


def test_writer_rejects_before_writing(tmp_path: Path) -> None:
    path = tmp_path / "keep.bin"
    path.write_bytes(b"old")
    bad = Embeddings(NdArray(np.ones((2, 2), dtype=np.float32)), SimpleVocab(["ok", "nul\x00word"]))
    with pytest.raises(ValueError, match="nul"):
        write_fasttext(path, bad)
    surrogate = Embeddings(NdArray(np.ones((1, 2), dtype=np.float32)), SimpleVocab(["\udcff"]))
    with pytest.raises(ValueError, match="surrogate"):
        write_fasttext(path, surrogate)
    for meta in ({"model": "Supervised"}, {"loss": "LogisticNegativeSampling"}, {"epoch": 2**40}, {"sampling_threshold": "high"}):
        emb = Embeddings(NdArray(np.ones((1, 2), dtype=np.float32)), SimpleVocab(["a"]), metadata=Metadata(meta))
        with pytest.raises(ValueError, match=r"model|loss|epoch|sampling_threshold"):
            write_fasttext(path, emb)
    bucket = Embeddings(NdArray(np.ones((9, 2), dtype=np.float32)), FinalfusionBucketVocab(["a"], FinalfusionHashIndexer(3)))
    with pytest.raises(ValueError, match="FinalfusionBucketVocab"):
        write_fasttext(path, bucket)
    assert path.read_bytes() == b"old"


def test_rust_metadata_keys_are_used(tmp_path: Path) -> None:
    meta = Metadata({"neg": 7, "bucket": 999, "model": "Cbow", "loss": "HierarchicalSoftmax", "window_size": 3})
    emb = Embeddings(NdArray(np.ones((1, 2), dtype=np.float32)), SimpleVocab(["a"]), metadata=meta)
    path = tmp_path / "r.bin"
    write_fasttext(path, emb)
    back = load_fasttext(path)
    assert back.metadata is not None
    assert (back.metadata["ns"], back.metadata["model"], back.metadata["loss"], back.metadata["window_size"]) == (7, "CBOW", "HierarchicalSoftmax", 3)
    assert back.metadata["buckets"] == 0  # from the vocabulary, not the metadata


# -- malformed input --------------------------------------------------------------


def _model(**kw: Any) -> bytes:
    rng = np.random.default_rng(1)
    return build_bin([b"a", b"b"], rng.normal(size=(2 + 5, 3)).astype(np.float32), bucket=5, minn=3, maxn=6, **kw)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"magic": 1234}, BadMagic, "not a fastText model"),
        ({"version": 11}, UnsupportedVersion, "version"),
        ({"model": 3}, FormatError, "supervised"),
        ({"model": 9}, FormatError, "model type"),
        ({"loss": 0}, FormatError, "loss"),
        ({"nlabels": 1}, FormatError, "supervised"),
        ({"pruneidx": 3}, FormatError, "pruned"),
        ({"types": [0, 1]}, FormatError, "label"),
        ({"quantized": True}, FormatError, "quantized"),
        ({"rows": 8}, FormatError, "rows"),
        ({"dim": 4}, FormatError, "columns"),
        ({"dim": 0}, FormatError, "dimensionality"),
    ],
)
def test_refused_models(kwargs: dict[str, Any], error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        load_fasttext(_model(**kwargs))


def test_finalfusion_python_written_prune_index_zero() -> None:
    """finalfusion-python 0.7.1's write_fasttext stores pruneidx_size 0 (and a copy of the matrix as output matrix)."""
    plain = load_fasttext(_model())
    with pytest.warns(LegacyFormatWarning, match="pruneidx_size 0"):
        legacy = load_fasttext(_model(pruneidx=0))
    np.testing.assert_array_equal(legacy.storage.matrix, plain.storage.matrix)


def test_every_truncation_is_a_format_error() -> None:
    data = _model()
    load_fasttext(data)
    end_of_input = len(data) - 17 - 2 * 3 * 4
    for n in range(end_of_input):
        with pytest.raises(FormatError):
            load_fasttext(data[:n])
    for n in range(end_of_input, len(data)):
        load_fasttext(data[:n])  # the output matrix is not needed


def test_huge_counts_fail_fast() -> None:
    head = struct.pack("<ii", 793712314, 12) + ARGS.pack(10, 5, 5, 1, 5, 1, 2, 2, 0, 0, 0, 100, 1e-4)
    with pytest.raises(Truncated, match="dictionary entries"):
        load_fasttext(head + struct.pack("<iiiqq", 2**31 - 1, 2**31 - 1, 0, 0, -1) + b"a\x00" + bytes(9))
    claim = head + struct.pack("<iiiqq", 1, 1, 0, 0, -1) + b"a\x00" + bytes(9) + struct.pack("<?qq", False, 2**40, 10)
    with pytest.raises(FormatError, match="rows"):
        load_fasttext(claim)
    many_rows = struct.pack("<ii", 793712314, 12) + ARGS.pack(10, 5, 5, 1, 5, 1, 2, 2, 2**31 - 1, 3, 6, 100, 1e-4)
    many_rows += struct.pack("<iiiqq", 1, 1, 0, 0, -1) + b"a\x00" + bytes(9) + struct.pack("<?qq", False, 2**31, 10) + bytes(40)
    with pytest.raises(Truncated, match="too few bytes"):
        load_fasttext(many_rows)
    with pytest.raises(Truncated):  # compressed: size unknown, read in bounded blocks
        load_fasttext(gzip.compress(many_rows))


@pytest.mark.parametrize("dim", [2**31 - 1, 2**24 + 3])
def test_compressed_model_with_huge_dim_reads_rows_in_bounded_parts(dim: int, monkeypatch: pytest.MonkeyPatch) -> None:
    # Past finalfusion.limits.MAX_DIMS (raised here): the deeper defence below must hold on its own.
    monkeypatch.setattr(finalfusion.limits, "MAX_DIMS", 1 << 62)
    # With the size unknown (gzip), one row of a 2**31 - 1 dim claim is 8 GiB: the matrix is read in blocks of at
    # most 64 MiB, parts of a row if need be, so the truncation is found after allocating what the data holds.
    head = struct.pack("<ii", 793712314, 12) + ARGS.pack(dim, 5, 5, 1, 5, 1, 2, 2, 0, 0, 0, 100, 1e-4)
    data = head + struct.pack("<iiiqq", 1, 1, 0, 0, -1) + b"a\x00" + bytes(9) + struct.pack("<?qq", False, 1, dim) + bytes(400)
    tracemalloc.start()
    try:
        with pytest.raises(Truncated, match=r"input matrix \(row 0\)") as exc:
            load_fasttext(io.BytesIO(gzip.compress(data)))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert exc.value.offset == len(data) - 400
    assert peak < 160 << 20, peak  # one 64 MiB block, plus the same again that GzipFile.readinto allocates for a read


def test_compressed_rows_longer_than_a_read_block_round_trip(monkeypatch: pytest.MonkeyPatch) -> None:
    # Past finalfusion.limits.MAX_DIMS (raised here): the deeper defence below must hold on its own.
    monkeypatch.setattr(finalfusion.limits, "MAX_DIMS", 1 << 62)
    # Rows of more than 64 MiB / 4 floats are read in parts: the parts must join into the same matrix.
    matrix = np.arange(2 * (2**24 + 3), dtype=np.float32).reshape(2, -1)
    data = build_bin([b"a", b"b"], matrix)
    np.testing.assert_array_equal(load_fasttext(io.BytesIO(gzip.compress(data, 1)), normalize=False).storage.matrix, matrix)


def test_invalid_utf8_word() -> None:
    m = np.ones((2, 3), dtype=np.float32)
    data = build_bin([b"ok", b"zee\xbfn"], m)
    with pytest.raises(FormatError, match="dictionary entry 1") as exc:
        load_fasttext(data)
    assert exc.value.offset == data.index(b"zee") + 3
    assert load_fasttext(data, lossy=True).vocab.words == ["ok", "zee\ufffdn"]


def test_duplicate_words() -> None:
    with pytest.raises(FormatError, match="dictionary-entry 1 repeats the word 'a' of dictionary-entry 0"):
        load_fasttext(build_bin([b"a", b"a"], np.ones((2, 3), dtype=np.float32)))
    with pytest.raises(FormatError, match="repeats"):
        load_fasttext(build_bin([b"a", b"a"], np.ones((7, 3), dtype=np.float32), bucket=5, minn=3, maxn=6))


def test_every_single_byte_corruption_loads_or_raises_format_error() -> None:
    data = _model()
    for pos in range(len(data)):
        for value in (0x00, 0x7F, 0x80, 0xFF):
            corrupt = bytearray(data)
            corrupt[pos] = value
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", LegacyFormatWarning)
                    warnings.simplefilter("ignore", RuntimeWarning)  # corrupted floats: inf + -inf in the averages
                    load_fasttext(bytes(corrupt))
            except FormatError:
                pass


WORDS = st.lists(st.text(st.characters(blacklist_categories=["Cs"], blacklist_characters="\x00"), max_size=12), unique=True, max_size=12)


@settings(max_examples=60, deadline=None)
@given(words=WORDS, n_buckets=st.integers(1, 30), dims=st.integers(1, 4), minn=st.integers(1, 4), extra=st.integers(0, 3), seed=st.integers(0, 2**16))
def test_write_read_round_trip_property(words: list[str], n_buckets: int, dims: int, minn: int, extra: int, seed: int) -> None:
    """Any writable vocabulary survives write -> read: words, lookups and (normalize=False) the stored rows."""
    vocab = FastTextVocab(words, FastTextIndexer(n_buckets, minn, minn + extra))
    matrix = np.random.default_rng(seed).normal(size=(len(words) + n_buckets, dims)).astype(np.float32)
    emb = Embeddings(NdArray(matrix), vocab)
    buf = io.BytesIO()
    write_fasttext(buf, emb)
    back = load_fasttext(buf.getvalue(), normalize=False)
    assert back.vocab == vocab
    np.testing.assert_allclose(back.storage.matrix, matrix, rtol=1e-4, atol=1e-4)
    normalized = load_fasttext(buf.getvalue())
    for word in [*words[:3], "unseen", ""]:
        got, want = normalized.embedding(word), emb.embedding(word)
        assert (got is None) == (want is None)
        if got is not None:
            np.testing.assert_allclose(got * (normalized.norms.norms[vocab.idx(word)] if word in vocab else 1.0), want, rtol=1e-4, atol=1e-4)  # type: ignore[union-attr]
