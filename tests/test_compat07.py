"""finalfusion-python 0.7 behaviours: array-like chunks, QuantizedArray.embedding, io.Header / find_chunk, key types, README examples."""

from __future__ import annotations

import io
import os
import struct
from pathlib import Path

import numpy as np
import pytest

import finalfusion
from finalfusion import Embeddings, NdArray, SimpleVocab, load_finalfusion
from finalfusion.errors import BadMagic, FormatError, Truncated, UnknownChunk
from finalfusion.io import ChunkIdentifier, Header, find_chunk
from finalfusion.norms import Norms, load_norms
from finalfusion.storage import PQ, QuantizedArray, load_ndarray, load_quantized_array
from finalfusion.subword import ExplicitIndexer, FastTextIndexer, FinalfusionHashIndexer, ngrams
from finalfusion.vocab import FinalfusionBucketVocab


# -- Norms and NdArray behave like the ndarrays they were ------------------------------
def test_norms_behave_like_an_array(tmp_path: Path) -> None:
    norms = Norms(np.arange(1, 11, dtype=np.float32))
    assert norms.shape == (10,)
    assert norms.dtype == np.float32
    assert norms.ndim == 1
    assert float(norms.sum()) == 55.0
    np.testing.assert_array_equal(np.sqrt(norms), np.sqrt(np.arange(1, 11, dtype=np.float32)))
    np.testing.assert_array_equal(norms * 2, np.arange(2, 21, 2))
    np.testing.assert_array_equal(2 * norms, np.arange(2, 21, 2))
    np.testing.assert_array_equal(norms > 5, np.arange(1, 11) > 5)
    assert type(norms + 1) is np.ndarray  # results are plain arrays, as documented
    assert isinstance(norms[3], np.float32)
    sliced = norms[::2]
    assert isinstance(sliced, Norms)
    assert sliced.shape == (5,)
    np.testing.assert_array_equal(np.asarray(sliced), [1, 3, 5, 7, 9])
    sliced.write(tmp_path / "norms.fifu")
    np.testing.assert_array_equal(load_norms(tmp_path / "norms.fifu").norms, [1, 3, 5, 7, 9])
    assert norms == Norms(np.arange(1, 11, dtype=np.float32))
    assert norms != sliced


def test_ndarray_slices_are_ndarrays(tmp_path: Path) -> None:
    m = np.arange(60, dtype=np.float32).reshape(30, 2)
    storage = NdArray(m)
    part = storage[10:20]
    assert isinstance(part, NdArray)
    assert np.shares_memory(part.matrix, m)
    part.write(tmp_path / "part.fifu")
    np.testing.assert_array_equal(load_ndarray(tmp_path / "part.fifu").matrix, m[10:20])
    row = storage[3]
    assert type(row) is np.ndarray
    assert row.tolist() == [6.0, 7.0]
    assert type(storage[[1, 2]]) is np.ndarray
    np.testing.assert_array_equal(storage * 2, m * 2)
    np.testing.assert_array_equal(np.add(storage, storage), m * 2)
    assert storage.T.shape == (2, 30)
    assert storage.dot(np.ones(2, dtype=np.float32)).shape == (30,)


def test_mapped_slices_stay_read_only_views(testdata: Path) -> None:
    emb = load_finalfusion(testdata / "python-similarity.fifu", mmap=True)
    part = emb.storage[5:10]
    assert isinstance(part, NdArray)
    assert not part.matrix.flags.writeable
    norms = Norms(np.ones(4, dtype=np.float32))
    with pytest.raises(ValueError, match="1-D"):
        Norms(np.ones((2, 2), dtype=np.float32))
    assert norms[1:3].shape == (2,)


# -- QuantizedArray.embedding takes 0.7's keys -----------------------------------------
def quantized() -> QuantizedArray:
    rng = np.random.default_rng(5)
    pq = PQ(rng.standard_normal((2, 4, 3)).astype(np.float32), rng.standard_normal((6, 6)).astype(np.float32))
    codes = rng.integers(0, 4, (9, 2)).astype(np.uint8)
    return QuantizedArray(pq, codes, rng.uniform(0.5, 2, 9).astype(np.float32))


@pytest.mark.parametrize("key", [3, -1, np.int64(2), slice(2, 7), slice(None, None, -3), [4, 0, 4], np.array([[1, 2], [3, 8]]), np.array([], dtype=np.int64)])
def test_quantized_embedding_keys(key: object) -> None:
    s = quantized()
    full = s.rows(np.arange(9))
    expected = full[key]  # type: ignore[index]
    got = s.embedding(key)
    np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-6)
    out = np.full(expected.shape, np.nan, dtype=np.float32)
    assert s.embedding(key, out=out) is out
    np.testing.assert_allclose(out, expected, rtol=1e-6, atol=1e-6)


def test_quantized_embedding_bad_keys(testdata: Path) -> None:
    s = quantized()
    for key in (None, (1, 2), "1", 1.5, [0.5]):
        with pytest.raises(TypeError):
            s.embedding(key)
    with pytest.raises(IndexError):
        s.embedding(9)
    with pytest.raises(ValueError, match="shape"):
        s.embedding(slice(0, 3), out=np.zeros((2, 6), dtype=np.float32))
    real = load_quantized_array(testdata / "python-pq.fifu")
    np.testing.assert_allclose(real.embedding([0, 40]), real.rows([0, 40]))


# -- finalfusion.io.Header.read_chunk / write_chunk and find_chunk ----------------------
def test_header_read_write_chunk(testdata: Path) -> None:
    with open(testdata / "python-ff_buckets.fifu", "rb") as f:
        header = Header.read_chunk(f)
        assert f.tell() == header.nbytes
    assert header.chunk_ids == [ChunkIdentifier.Metadata, ChunkIdentifier.BucketSubwordVocab, ChunkIdentifier.NdArray]
    out = io.BytesIO()
    header.write_chunk(out)
    assert out.getvalue() == (testdata / "python-ff_buckets.fifu").read_bytes()[: header.nbytes]
    with pytest.raises(BadMagic):
        Header.read_chunk(io.BytesIO(b"FIFU" + bytes(12)))
    with pytest.raises(Truncated):
        Header.read_chunk(io.BytesIO(b"FiFu"))
    # a hostile chunk count reads what is there, then fails: no 16 GiB buffer
    with pytest.raises(Truncated):
        Header.read_chunk(io.BytesIO(b"FiFu" + struct.pack("<II", 0, 2**32 - 1) + struct.pack("<I", 1)))


def test_find_chunk(testdata: Path) -> None:
    # python-embeddings.fifu: the header lists vocab and storage, a norms chunk follows anyway (0.7 found it too)
    with open(testdata / "python-embeddings.fifu", "rb") as f:
        assert find_chunk(f, [ChunkIdentifier.NdNorms]) == ChunkIdentifier.NdNorms
        (_n_norms,) = struct.unpack("<Q", f.read(8))
        assert _n_norms == 7
        assert find_chunk(f, [ChunkIdentifier.QuantizedArray, ChunkIdentifier.NdArray]) == ChunkIdentifier.NdArray
        assert f.read(12) == struct.pack("<QI", 7, 10)
        assert find_chunk(f, [ChunkIdentifier.Metadata]) is None
    data = (testdata / "python-similarity.fifu").read_bytes()
    with pytest.raises(Truncated, match="runs past the end"):
        find_chunk(io.BytesIO(data[:-10]), [ChunkIdentifier.NdNorms])
    with pytest.raises(Truncated, match="frame"):
        find_chunk(io.BytesIO(data[:30]), [ChunkIdentifier.NdArray])
    bad = bytearray(data)
    bad[20] = 99  # the vocabulary's id
    with pytest.raises(UnknownChunk):
        find_chunk(io.BytesIO(bytes(bad)), [ChunkIdentifier.NdArray])


# -- keys must be str -------------------------------------------------------------------
@pytest.mark.filterwarnings("ignore::finalfusion.errors.LegacyFormatWarning")
@pytest.mark.parametrize("name", ["python-similarity.fifu", "python-ff_buckets.fifu", "rust-quantized.fifu"])
def test_non_str_keys_raise_type_error(testdata: Path, name: str) -> None:
    emb = load_finalfusion(testdata / name)
    for key in (None, 123, b"abc", 1.5, ("a",)):
        with pytest.raises(TypeError, match=type(key).__name__):
            emb.embedding(key)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match=type(key).__name__):
            emb.embedding_with_norm(key)  # type: ignore[arg-type]
        if not isinstance(key, tuple):
            with pytest.raises(TypeError, match=type(key).__name__):
                emb[key]  # type: ignore[index]
    with pytest.raises(TypeError, match="single str"):
        emb.embedding_batch("abc")
    with pytest.raises(TypeError, match="single bytes"):
        emb.embedding_batch(b"abc")  # type: ignore[arg-type]


def test_embedding_with_norm_without_norms_is_one() -> None:
    # finalfusion-rust returns 1.0; finalfusion-python 0.7 raised TypeError (docs/migrating.md)
    emb = Embeddings(NdArray(np.array([[3, 4]], dtype=np.float32)), SimpleVocab(["a"]))
    vec, norm = emb.embedding_with_norm("a")
    assert norm == 1.0
    assert vec.tolist() == [3.0, 4.0]


# -- finalfusion-python 0.7.1's README (and docs/quickstart.rst), run unchanged -----------
README_07 = """
import finalfusion
# loading from different formats
w2v_embeds = finalfusion.load_word2vec("/path/to/w2v.bin")
text_embeds = finalfusion.load_text("/path/to/embeds.txt")
text_dims_embeds = finalfusion.load_text_dims("/path/to/embeds.dims.txt")
fasttext_embeds = finalfusion.load_fasttext("/path/to/fasttext.bin")
fifu_embeds = finalfusion.load_finalfusion("/path/to/embeddings.fifu")

# serialization to formats works similarly
finalfusion.compat.write_word2vec("to_word2vec.bin", fifu_embeds)

# embedding lookup
embedding = fifu_embeds["Test"]

# reading an embedding into a buffer
import numpy as np
buffer = np.zeros(fifu_embeds.storage.shape[1], dtype=np.float32)
fifu_embeds.embedding("Test", out=buffer)

# similarity and analogy query
sim_query = fifu_embeds.word_similarity("Test")
analogy_query = fifu_embeds.analogy("A", "B", "C")

# accessing the vocab and printing the first 10 words
vocab = fifu_embeds.vocab
print(vocab.words[:10])

# SubwordVocabs give access to the subword indexer:
subword_indexer = vocab.subword_indexer
print(subword_indexer.subword_indices("Test", with_ngrams=True))

# accessing the storage and calculate its dot product with an embedding
res = embedding.dot(fifu_embeds.storage)

# printing metadata
print(fifu_embeds.metadata)
"""

BEYOND_07 = """
# load only a vocab from a finalfusion file
from finalfusion import load_vocab
vocab = load_vocab("/path/to/finalfusion_file.fifu")

# serialize vocab to single file
vocab.write("/path/to/vocab_file.fifu.voc")

# more specific loading functions exist
from finalfusion.vocab import load_finalfusion_bucket_vocab
fifu_bucket_vocab = load_finalfusion_bucket_vocab("/path/to/vocab_file.fifu.voc")
"""


def test_readme_07_examples_run_unchanged(testdata: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    # The example computes ``embedding.dot(storage)``, which needs as many storage rows as dimensions
    # (in 0.7 too): a bucket vocabulary of 4 words and 4 buckets with 8 dimensions.
    rng = np.random.default_rng(0)
    vocab = FinalfusionBucketVocab(["Test", "A", "B", "C"], FinalfusionHashIndexer(2, 3, 6))
    emb = Embeddings(NdArray(rng.standard_normal((8, 8)).astype(np.float32)), vocab, metadata=finalfusion.Metadata({"source": "test"}))
    emb.write(tmp_path / "embeddings.fifu")
    paths = {
        "/path/to/w2v.bin": testdata / "python-embeddings.w2v",
        "/path/to/embeds.txt": testdata / "python-embeddings.txt",
        "/path/to/embeds.dims.txt": testdata / "python-embeddings.dims.txt",
        "/path/to/fasttext.bin": testdata / "rust-fasttext.bin",
        "/path/to/embeddings.fifu": tmp_path / "embeddings.fifu",
        "/path/to/finalfusion_file.fifu": tmp_path / "embeddings.fifu",
        "/path/to/vocab_file.fifu.voc": tmp_path / "vocab_file.fifu.voc",
    }
    monkeypatch.chdir(tmp_path)
    for code in (README_07, BEYOND_07):
        for old, new in paths.items():
            code = code.replace(old, os.fspath(new))
        namespace: dict[str, object] = {}
        exec(compile(code, "0.7 README", "exec"), namespace)
    assert (tmp_path / "to_word2vec.bin").is_file()
    out = capsys.readouterr().out
    assert "['Test', 'A', 'B', 'C']" in out
    assert "source" in out
    assert namespace["fifu_bucket_vocab"] == vocab


def test_format_error_is_value_error() -> None:
    # 0.7's FinalfusionFormatError name still catches every format error
    with pytest.raises(finalfusion.io.FinalfusionFormatError):
        load_finalfusion(b"FiFu" + bytes(4))
    assert issubclass(FormatError, ValueError)


# -- where 0.7 asserted, this library raises TypeError / ValueError (docs/migrating.md) ------------
def _eye() -> NdArray:
    return NdArray(np.eye(2, dtype=np.float32))


ASSERTED_IN_07 = {
    "Embeddings: storage type": (TypeError, lambda: Embeddings(np.eye(2), SimpleVocab(["a", "b"]))),  # type: ignore[arg-type]
    "Embeddings: vocab type": (TypeError, lambda: Embeddings(_eye(), ["a", "b"])),  # type: ignore[arg-type]
    "Embeddings: rows vs vocabulary": (ValueError, lambda: Embeddings(NdArray(np.eye(3, dtype=np.float32)), SimpleVocab(["a", "b"]))),
    "Embeddings: metadata type": (TypeError, lambda: Embeddings(_eye(), SimpleVocab(["a", "b"]), metadata={"a": 1})),  # type: ignore[arg-type]
    "Embeddings: norms type": (TypeError, lambda: Embeddings(_eye(), SimpleVocab(["a", "b"]), norms=[1.0, 2.0])),  # type: ignore[arg-type]
    "Embeddings: norms count": (ValueError, lambda: Embeddings(_eye(), SimpleVocab(["a", "b"]), norms=Norms([1.0]))),
    "PQ: projection shape": (ValueError, lambda: PQ(np.zeros((2, 2, 2), np.float32), np.zeros((3, 3), np.float32))),
    "ngrams: min_n > max_n": (ValueError, lambda: finalfusion.subword.ngrams("abc", 4, 3)),
    "hash indexer: bucket exponent": (ValueError, lambda: FinalfusionHashIndexer(64, 3, 6)),
    "fastText indexer: buckets": (ValueError, lambda: finalfusion.subword.FastTextIndexer(0, 3, 6)),
    "explicit indexer: duplicate n-gram": (ValueError, lambda: finalfusion.subword.ExplicitIndexer(["abc", "abc"])),
    "simple vocab: duplicate word": (ValueError, lambda: SimpleVocab(["a", "a"])),
}


@pytest.mark.parametrize("case", sorted(ASSERTED_IN_07))
def test_errors_where_07_asserted(case: str) -> None:
    error, make = ASSERTED_IN_07[case]
    with pytest.raises(error):
        make()


@pytest.mark.filterwarnings("ignore::finalfusion.errors.LegacyFormatWarning")
def test_find_chunk_then_read_chunk_as_in_07(testdata: Path) -> None:
    from finalfusion.storage import Storage
    from finalfusion.vocab import SimpleVocab as Simple
    from finalfusion.vocab import Vocab

    expected = load_finalfusion(testdata / "python-embeddings.fifu")
    for mmap in (False, True):
        with open(testdata / "python-embeddings.fifu", "rb") as f:
            assert find_chunk(f, [ChunkIdentifier.NdNorms]) == ChunkIdentifier.NdNorms
            norms = Norms.read_chunk(f, mmap=mmap)
            assert f.read() == b""  # positioned after the chunk (the last one)
            assert find_chunk(f, [ChunkIdentifier.SimpleVocab]) == ChunkIdentifier.SimpleVocab
            vocab = Vocab.read_chunk(f)
            assert find_chunk(f, [ChunkIdentifier.NdArray]) == ChunkIdentifier.NdArray
            storage = Storage.read_chunk(f, mmap=mmap)
            assert isinstance(vocab, Simple)
            assert isinstance(storage, NdArray)
        assert norms == expected.norms
        assert vocab == expected.vocab
        assert storage == expected.storage
    with open(testdata / "python-embeddings.fifu", "rb") as f:
        find_chunk(f, [ChunkIdentifier.SimpleVocab])
        with pytest.raises(FormatError, match="not a Norms chunk"):
            Norms.read_chunk(f)
        f.seek(0)
        with pytest.raises(ValueError, match="positioned after a chunk frame"):
            Norms.read_chunk(f)
    buf = io.BytesIO((testdata / "python-embeddings.fifu").read_bytes()[:-8])
    find_chunk(buf, [ChunkIdentifier.NdArray])
    storage = NdArray.read_chunk(buf)  # the storage is whole; the norms after it are cut
    assert storage.shape == (7, 10)
    assert find_chunk(buf, [ChunkIdentifier.NdNorms]) == ChunkIdentifier.NdNorms
    with pytest.raises(Truncated, match="runs past the end"):
        Norms.read_chunk(buf)


# -- what running 0.7.1's own test suite found (tests/test_compat07_suite.py) -------------
def test_read_chunk_header_after_find_chunk(testdata: Path) -> None:
    with open(testdata / "python-simple_vocab.fifu", "rb") as f:
        assert find_chunk(f, [ChunkIdentifier.SimpleVocab]) == ChunkIdentifier.SimpleVocab
        at = f.tell()
        f.seek(-12, 1)
        chunk, length = finalfusion.io._read_chunk_header(f)
        assert (chunk, f.tell()) == (ChunkIdentifier.SimpleVocab, at)
        f.seek(length, 1)
        assert finalfusion.io._read_chunk_header(f)[0] == ChunkIdentifier.NdArray
    assert finalfusion.io._read_chunk_header(io.BytesIO()) is None
    with pytest.raises(Truncated):
        finalfusion.io._read_chunk_header(io.BytesIO(bytes(5)))
    with pytest.raises(UnknownChunk):
        finalfusion.io._read_chunk_header(io.BytesIO(struct.pack("<IQ", 77, 0)))


@pytest.mark.parametrize("word", [None, 2, b"ab", 2.5])
def test_a_word_that_is_not_a_str_is_a_type_error(word: object) -> None:
    # these were hashed as their text ("None", "2" ...): a silently wrong answer
    with pytest.raises(TypeError, match="a word must be a str"):
        ngrams(word)  # type: ignore[arg-type]
    for indexer in (FinalfusionHashIndexer(10), FastTextIndexer(1000), ExplicitIndexer(["<ab", "ab>"])):
        with pytest.raises(TypeError, match="a word must be a str"):
            indexer.subword_indices(word)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="a word must be a str"):
            indexer.word_indices(word)  # type: ignore[arg-type]


def test_explicit_indexer_contains_lists_and_indexers_as_in_0_7() -> None:
    indexer = ExplicitIndexer([str(i) for i in range(10)])
    assert ExplicitIndexer([str(i) for i in range(5)]) in indexer
    assert [str(i) for i in range(5)] in indexer
    assert ["0", "10"] not in indexer
    assert "0" in indexer
    assert "01" not in indexer
    assert 0 not in indexer


def test_explicit_ngram_index_without_an_ngram_names_it() -> None:
    with pytest.raises(ValueError, match="no index for the n-gram 'a'"):
        ExplicitIndexer(["a"], ngram_index={"b": 0})
