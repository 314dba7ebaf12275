"""finalfusion-python 0.7.1 API compatibility and lookup semantics."""

from __future__ import annotations

import io
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import finalfusion
from conftest import GOLDEN_FILES, assert_rows_match_lookups
from finalfusion import (
    ChunkIdentifier,
    Embeddings,
    FastTextVocab,
    FinalfusionBucketVocab,
    Metadata,
    NdArray,
    Norms,
    SimpleVocab,
    TypeId,
    load_finalfusion,
)
from finalfusion.subword import FastTextIndexer, FinalfusionHashIndexer

TINY = GOLDEN_FILES / "tiny_simple.fifu"


def simple_emb() -> Embeddings:
    m = np.arange(6, dtype=np.float32).reshape(3, 2)
    return Embeddings(NdArray(m), SimpleVocab(["a", "b", "c"]), norms=Norms([1.0, 2.0, 3.0]))


def test_constructor_and_basic_protocol() -> None:
    emb = simple_emb()
    assert len(emb) == 3
    assert emb.dims == 2
    assert "b" in emb
    assert "zz" not in emb
    assert emb["b"].tolist() == [2.0, 3.0]
    with pytest.raises(KeyError):
        emb["zz"]
    assert "Embeddings(" in repr(emb)
    assert "SimpleVocab" in repr(emb)
    rows = list(emb)
    assert [r[0] for r in rows] == ["a", "b", "c"]
    assert all(len(r) == 3 for r in rows)
    assert [float(r[2]) for r in rows] == [1.0, 2.0, 3.0]
    plain = Embeddings(emb.storage, emb.vocab)
    assert all(len(r) == 2 for r in plain)
    assert [type(c) for c in emb.chunks()] == [SimpleVocab, NdArray, Norms]
    emb.metadata = Metadata({"x": 1})
    assert [type(c) for c in emb.chunks()] == [Metadata, SimpleVocab, NdArray, Norms]
    with pytest.raises(ValueError, match="rows"):
        Embeddings(NdArray(np.zeros((2, 2), np.float32)), SimpleVocab(["a", "b", "c"]))


def test_embedding_out_and_default() -> None:
    emb = simple_emb()
    out = np.full(2, -1, dtype=np.float32)
    assert emb.embedding("c", out=out) is out
    assert out.tolist() == [4.0, 5.0]
    out[:] = -1
    assert emb.embedding("zz", out=out) is None
    assert out.tolist() == [-1.0, -1.0]
    assert emb.embedding("zz", default=7) == 7
    res = emb.embedding("zz", out=out, default=np.array([9, 8], np.float32))
    assert res is out
    assert out.tolist() == [9.0, 8.0]
    vec, norm = emb.embedding_with_norm("b")
    assert vec.tolist() == [2.0, 3.0]
    assert norm == 2.0
    assert emb.embedding_with_norm("zz") is None
    out2 = np.zeros(2, np.float32)
    got = emb.embedding_with_norm("zz", out=out2, default=(np.array([1, 1], np.float32), 5.0))
    assert got[0] is out2
    assert got[1] == 5.0
    assert out2.tolist() == [1.0, 1.0]


def subword_embs() -> list[Embeddings]:
    rng = np.random.default_rng(3)
    words = ["Berlin", "Potsdam", "x", "abab", "ababab", "bababa", "babab", "b", "aba"]
    vocabs = [
        FinalfusionBucketVocab(words, FinalfusionHashIndexer(4, 3, 6)),
        FastTextVocab(words, FastTextIndexer(11, 3, 6)),
    ]
    out = []
    for v in vocabs:
        out.append(Embeddings(NdArray(rng.standard_normal((v.upper_bound, 3)).astype(np.float32)), v))
        out.append(out[-1].bucket_to_explicit())
        buf = io.BytesIO()
        out[-2].write(buf)
        out.append(load_finalfusion(buf.getvalue(), mmap=True))
    q = load_finalfusion(GOLDEN_FILES / "tiny_quantized.fifu")
    out.append(q)
    out.append(load_finalfusion(GOLDEN_FILES / "tiny_bucket.fifu", mmap=True))
    out.append(load_finalfusion(GOLDEN_FILES / "tiny_fasttext_vocab.fifu"))
    out.append(load_finalfusion(GOLDEN_FILES / "tiny_explicit.fifu"))
    from finalfusion import FloretVocab
    from finalfusion.subword import FloretIndexer

    fv = FloretVocab(FloretIndexer(13, 3, 6, n_hashes=2))
    out.append(Embeddings(NdArray(rng.standard_normal((13, 3)).astype(np.float32)), fv))
    return out


@pytest.mark.parametrize("emb", subword_embs(), ids=lambda e: repr(e))
def test_embedding_batch_equals_per_word(emb: Embeddings) -> None:
    words = [*emb.vocab.words, "", "Berliner", "zz", "Berliner", "a", "ab", "abc", "😀", "", "cab>", "xab"] * 2
    matrix, found = emb.embedding_batch(words)
    assert matrix.shape == (len(words), emb.dims)
    assert found.dtype == bool
    for i, w in enumerate(words):
        single = emb.embedding(w)
        assert found[i] == (single is not None), w
        if single is None:
            assert not matrix[i].any()
        else:
            np.testing.assert_allclose(matrix[i], single, rtol=1e-6, atol=1e-6, err_msg=w)
    assert not found[words.index("")] or emb.vocab.idx("") is not None


@pytest.mark.parametrize("emb", subword_embs(), ids=lambda e: repr(e))
def test_embedding_batch_distinct_unknown_words(emb: Embeddings) -> None:
    """Distinct words take the direct-write path; rows without n-grams are zeroed."""
    words = ["", "Berliner", "zz", "a", "😀", "cab>", "xab", *emb.vocab.words[:1]]
    out = np.full((len(words), emb.dims), np.nan, np.float32)
    matrix, found = emb.embedding_batch(words, out=out)
    assert matrix is out
    assert_rows_match_lookups(emb, words, matrix, found)
    assert not np.isnan(matrix).any()


def test_embedding_batch_simple_and_out() -> None:
    emb = load_finalfusion(TINY, mmap=True)
    out = np.full((3, 2), 5, np.float32)
    m, found = emb.embedding_batch(["bcd", "zzz", "a"], out=out)
    assert m is out
    assert found.tolist() == [True, False, True]
    np.testing.assert_array_equal(m, [emb["bcd"], [0, 0], emb["a"]])


@pytest.mark.parametrize("name", ["tiny_simple.fifu", "tiny_quantized.fifu", "tiny_bucket.fifu"])
@pytest.mark.parametrize("mmap", [False, True])
@pytest.mark.parametrize("with_out", [False, True])
def test_embedding_batch_all_known(name: str, mmap: bool, with_out: bool) -> None:
    """The all-known fast path gives the stored rows, as a fresh writable array."""
    emb = load_finalfusion(GOLDEN_FILES / name, mmap=mmap)
    words = [*emb.vocab.words[::-1], emb.vocab.words[0]]
    out = np.full((len(words), emb.dims), 7, np.float32) if with_out else None
    m, found = emb.embedding_batch(words, out=out)
    assert found.all()
    assert m.flags.writeable
    if with_out:
        assert m is out
    np.testing.assert_array_equal(m, np.stack([emb.embedding(w) for w in words]))
    m[:] = 0  # never a view into the storage
    assert np.asarray(emb.embedding(words[0])).any()


def test_zero_subword_sum_stays_zero() -> None:
    v = FinalfusionBucketVocab(["known"], FinalfusionHashIndexer(3, 3, 6))
    m = np.zeros((v.upper_bound, 2), np.float32)
    m[0] = [1, 2]
    emb = Embeddings(NdArray(m), v)
    vec = emb.embedding("unknown")
    assert vec is not None
    assert not np.isnan(vec).any()
    assert not vec.any()
    vec, norm = emb.embedding_with_norm("unknown")
    assert norm == 0.0
    batch, found = emb.embedding_batch(["unknown", "known"])
    assert found.tolist() == [True, True]
    assert not np.isnan(batch).any()
    assert batch[0].tolist() == [0.0, 0.0]


@pytest.mark.parametrize("which", [0, 1])
def test_bucket_to_explicit(which: int) -> None:
    embs = subword_embs()
    src = embs[3 * which]
    exp = embs[3 * which + 1]
    assert type(exp.vocab).__name__ == "ExplicitVocab"
    assert exp.storage.shape[0] <= src.storage.shape[0]
    for w in src.vocab.words:
        np.testing.assert_array_equal(src[w], exp[w])
    # Unknown words made only of n-grams of known words.
    pool = {a + b for a in src.vocab.words for b in src.vocab.words} | {"ab" * k for k in range(1, 8)} | {"ba" * k for k in range(1, 8)}
    covered = [w for w in sorted(pool - set(src.vocab.words)) if all(ng in exp.vocab.subword_indexer for ng in exp.vocab.subwords(w))]
    assert len(covered) >= 3, covered
    for w in covered:
        np.testing.assert_allclose(src[w], exp[w], rtol=1e-5, atol=1e-6, err_msg=w)
    # A word with an n-gram that no known word has.
    assert not all(ng in exp.vocab.subword_indexer for ng in exp.vocab.subwords("Zürich"))


def test_error_aliases_and_ids() -> None:
    assert finalfusion.io.FinalfusionFormatError is finalfusion.FormatError
    assert finalfusion.FinalfusionFormatError is finalfusion.FormatError
    assert issubclass(finalfusion.FormatError, ValueError)
    assert {c.name: int(c) for c in ChunkIdentifier} == {
        "Header": 0,
        "SimpleVocab": 1,
        "NdArray": 2,
        "BucketSubwordVocab": 3,
        "QuantizedArray": 4,
        "Metadata": 5,
        "NdNorms": 6,
        "FastTextSubwordVocab": 7,
        "ExplicitSubwordVocab": 8,
        "FloretSubwordVocab": 9,
    }
    assert (int(TypeId.u8), int(TypeId.f32)) == (1, 10)


def test_chunk_loaders() -> None:
    assert finalfusion.load_vocab(TINY).words == ["a", "bcd"]
    assert finalfusion.load_storage(TINY).shape == (2, 2)
    assert finalfusion.load_norms(TINY).norms.tolist() == [5.0, 2.0]
    assert dict(finalfusion.load_metadata(TINY)) == {"dims": 2}
    with pytest.raises(finalfusion.FormatError):
        finalfusion.load_metadata(GOLDEN_FILES / "tiny_bucket.fifu")


def test_chunk_write_single_vocab(tmp_path: Path) -> None:
    v = FinalfusionBucketVocab(["x", "ü"], FinalfusionHashIndexer(5, 2, 4))
    v.write(tmp_path / "v.fifu")
    back = finalfusion.load_vocab(tmp_path / "v.fifu")
    assert back == v
    assert back.subword_indexer == v.subword_indexer


def test_metadata_none_is_type_error_and_nothing_written(tmp_path: Path) -> None:
    emb = simple_emb()
    emb.metadata = Metadata({"bad": None})
    new = tmp_path / "new.fifu"
    with pytest.raises(TypeError):
        emb.write(new)
    assert not new.exists()
    old = tmp_path / "old.fifu"
    old.write_bytes(TINY.read_bytes())
    with pytest.raises(TypeError):
        emb.write(old)
    assert old.read_bytes() == TINY.read_bytes()
    assert sorted(os.listdir(tmp_path)) == ["old.fifu"]


def test_atomic_overwrite_of_mmapped_file(tmp_path: Path) -> None:
    path = tmp_path / "e.fifu"
    a = simple_emb()
    a.write(path)
    loaded = load_finalfusion(path, mmap=True)
    old_b = loaded["b"].copy()
    m = np.asarray(a.storage) * 10
    Embeddings(NdArray(m), a.vocab).write(path)
    np.testing.assert_array_equal(loaded["b"], old_b)
    np.testing.assert_array_equal(load_finalfusion(path)["b"], old_b * 10)
    assert sorted(os.listdir(tmp_path)) == ["e.fifu"]


def test_sources_accepted(tmp_path: Path) -> None:
    data = TINY.read_bytes()
    expected = load_finalfusion(data)["a"].tolist()
    with open(TINY, "rb") as f:
        assert load_finalfusion(f)["a"].tolist() == expected
    with open(TINY, "rb") as f:
        assert load_finalfusion(f, mmap=True)["a"].tolist() == expected
    for src in (io.BytesIO(data), data, TINY, str(TINY)):
        assert load_finalfusion(src)["a"].tolist() == expected


def test_mmap_readonly_eager_writable() -> None:
    for src in (TINY, TINY.read_bytes()):
        lazy = np.asarray(load_finalfusion(src, mmap=True).storage)
        assert not lazy.flags.writeable
        with pytest.raises(ValueError, match="read-only"):
            lazy[0, 0] = 1
        eager = np.asarray(load_finalfusion(src).storage)
        assert eager.flags.writeable
        eager[0, 0] = 1
        assert eager[0, 0] == 1


def test_vocab_metadata_and_norms_loaders_skip_the_matrix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import finalfusion._source as source
    import finalfusion.container as container

    rng = np.random.default_rng(3)
    words = [f"wört{i}" for i in range(5000)]
    norms = Norms(rng.random(5000).astype(np.float32))
    emb = Embeddings(NdArray(rng.standard_normal((5000, 64), dtype=np.float32)), SimpleVocab(words), norms, Metadata({"k": 1}))
    path = tmp_path / "e.fifu"
    emb.write(path)  # 1.3 MB: large enough for the chunk-by-chunk read
    reads: list[tuple[int, int]] = []
    original = source.LazyFill._read

    def spy(self: Any, start: int, stop: int) -> None:
        reads.append((start, stop))
        original(self, start, stop)

    monkeypatch.setattr(source.LazyFill, "_read", spy)
    matrix_bytes = emb.storage.matrix.nbytes
    assert finalfusion.load_vocab(path) == emb.vocab
    assert dict(finalfusion.load_metadata(str(path))) == {"k": 1}
    with open(path, "rb") as f:
        assert finalfusion.load_norms(f) == norms  # after the matrix: read, the matrix skipped
    assert reads
    assert max(stop - start for start, stop in reads) < matrix_bytes // 2  # the matrix data never was
    reads.clear()
    assert np.array_equal(finalfusion.load_storage(path).matrix, emb.storage.matrix)
    assert max(stop - start for start, stop in reads) >= matrix_bytes
    assert container.read_source(path, matrix=False).chunks[2][1].shape == (5000, 64)  # the skipped matrix views zeros
