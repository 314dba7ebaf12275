"""Eager reads of files in parse order (_source.LazyFill, driven by container.py): same results and errors as reading the bytes.

Files from ``MIN_SIZE`` bytes on are read chunk by chunk with an ``NdArray``'s
data last and the pages before it released. With ``MIN_SIZE`` lowered to 1,
every real and golden file, and every prefix of the golden files, takes that
path: the embeddings must equal those read from the bytes, and a broken file
must raise exactly the error the bytes raise.
"""

from __future__ import annotations

import gzip
import io
import os
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import finalfusion
from conftest import GOLDEN_FILES, TINY_FILES
from finalfusion import Embeddings, FormatError, Metadata, NdArray, Norms, _source, load_finalfusion
from finalfusion.subword import FinalfusionHashIndexer
from finalfusion.vocab import FinalfusionBucketVocab, SimpleVocab, load_vocab
from test_roundtrip import assert_same_chunks

REAL = ["python-embeddings.fifu", "python-ff_buckets.fifu", "python-simple_vocab.fifu", "rust-similarity.fifu", "rust-quantized.fifu", "python-pq.fifu"]


@pytest.fixture
def holes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Send every file through the lazy path; record how many matrices each load deferred."""
    monkeypatch.setattr(_source, "MIN_SIZE", 1)
    seen: list[int] = []
    finish = _source.LazyFill.finish

    def spy(self: _source.LazyFill, deferred: bool = True) -> None:
        seen.append(len(self.holes))
        finish(self, deferred)

    monkeypatch.setattr(_source.LazyFill, "finish", spy)
    return seen


def load_quietly(source: Any) -> Embeddings:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", finalfusion.LegacyFormatWarning)
        return load_finalfusion(source)


def outcome(source: Any) -> tuple[str, str] | Embeddings:
    try:
        return load_quietly(source)
    except FormatError as exc:
        return (type(exc).__name__, str(exc))


@pytest.mark.parametrize("name", REAL)
def test_real_files_read_lazily_equal_the_bytes(testdata: Path, name: str, holes: list[int]) -> None:
    path = testdata / name
    lazy = load_quietly(path)
    assert holes == [int(isinstance(lazy.storage, NdArray))]
    assert_same_chunks(lazy, load_quietly(path.read_bytes()))
    if isinstance(lazy.storage, NdArray):
        assert lazy.storage.matrix.flags.writeable


@pytest.mark.parametrize("name", TINY_FILES)
def test_every_prefix_fails_as_the_bytes_do(name: str, tmp_path: Path, holes: list[int]) -> None:
    data = (GOLDEN_FILES / name).read_bytes()
    target = tmp_path / name
    for n in range(len(data) + 1):
        target.write_bytes(data[:n])
        got, expected = outcome(target), outcome(data[:n])
        if isinstance(expected, Embeddings):
            assert isinstance(got, Embeddings), (n, got)
            assert_same_chunks(got, expected)
        else:
            assert got == expected, n
    # The complete file deferred its matrix (if it has an NdArray): finish ran once, for it.
    assert holes == [int(isinstance(load_quietly(data).storage, NdArray))]


def big_embeddings(rows: int = 3000, dims: int = 100) -> Embeddings:
    rng = np.random.default_rng(3)
    words = [f"wort{i}" if i % 3 else f"слово{i}語" for i in range(rows)]
    norms = Norms(rng.random(rows, dtype=np.float32) + 1)
    return Embeddings(NdArray(rng.standard_normal((rows, dims), dtype=np.float32)), SimpleVocab(words), norms, Metadata({"note": "big"}))


def test_big_file_from_every_kind_of_source(tmp_path: Path) -> None:
    emb = big_embeddings()
    path = tmp_path / "big.fifu"
    emb.write(path)
    data = path.read_bytes()
    assert len(data) >= _source.MIN_SIZE
    loads = [load_finalfusion(path), load_finalfusion(str(path)), load_finalfusion(os.fsencode(path))]
    fd = os.open(path, os.O_RDONLY)
    try:
        loads.append(load_finalfusion(fd))
    finally:
        os.close(fd)
    # A file object positioned after some leading bytes: read from there, left at the end.
    (tmp_path / "prefixed").write_bytes(b"junk!" + data + b"")
    with open(tmp_path / "prefixed", "rb") as f:
        f.read(5)
        loads.append(load_finalfusion(f))
        assert f.tell() == 5 + len(data)
    for got in loads:
        assert_same_chunks(got, emb)
        assert got.metadata == emb.metadata
        assert got.vocab.words == emb.vocab.words
        got.storage.matrix[0, 0] = 1.0  # writable, as eager arrays always were


def test_bucket_vocab_and_trailing_norms(tmp_path: Path) -> None:
    rng = np.random.default_rng(5)
    vocab = FinalfusionBucketVocab([f"w{i}" for i in range(100)], FinalfusionHashIndexer(12, 3, 6))
    emb = Embeddings(NdArray(rng.standard_normal((100 + 2**12, 80), dtype=np.float32)), vocab, Norms(np.ones(100, dtype=np.float32)))
    emb.write(tmp_path / "b.fifu")
    got = load_finalfusion(tmp_path / "b.fifu")
    assert_same_chunks(got, emb)
    assert np.array_equal(got.embedding("unknown-word"), emb.embedding("unknown-word"))
    assert load_vocab(tmp_path / "b.fifu") == vocab


def test_file_shrinking_while_read_is_an_os_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "big.fifu"
    big_embeddings().write(path)
    finish = _source.LazyFill.finish

    def truncate_then_finish(self: _source.LazyFill, deferred: bool = True) -> None:
        os.truncate(path, self.holes[0][0] + 10)
        finish(self, deferred)

    monkeypatch.setattr(_source.LazyFill, "finish", truncate_then_finish)
    with pytest.raises(OSError, match="the file ended after"):
        load_finalfusion(path)


def test_small_files_and_pipes_are_read_in_one_go(tmp_path: Path) -> None:
    emb = big_embeddings(rows=10, dims=4)
    path = tmp_path / "small.fifu"
    emb.write(path)
    with open(path, "rb") as f:
        assert _source.LazyFill.for_file(f) is None
    assert _source.LazyFill.for_file(io.BytesIO(path.read_bytes())) is None  # type: ignore[arg-type]
    r, w = os.pipe()
    try:
        with open(r, "rb") as f:
            assert _source.LazyFill.for_file(f) is None
    finally:
        os.close(w)
    assert_same_chunks(load_finalfusion(path), emb)


def test_gzip_file_objects_are_read_as_a_stream(tmp_path: Path) -> None:
    emb = big_embeddings()
    emb.write(tmp_path / "big.fifu")
    with gzip.open(tmp_path / "big.fifu.gz", "wb") as g:
        g.write((tmp_path / "big.fifu").read_bytes())
    with gzip.open(tmp_path / "big.fifu.gz", "rb") as g:
        assert _source.LazyFill.for_file(g) is None  # its fileno() is the compressed file's
        assert_same_chunks(load_finalfusion(g), emb)
    with open(tmp_path / "big.fifu", "rb", buffering=0) as raw:
        assert _source.LazyFill.for_file(raw) is not None
        assert_same_chunks(load_finalfusion(raw), emb)
