"""finalfusion.load: format sniffing on the real files, gzip, file objects, clear errors."""

from __future__ import annotations

import gzip
import io
import warnings
from pathlib import Path

import numpy as np
import pytest

import finalfusion
from finalfusion import FormatError
from finalfusion.compat import load, load_fasttext, load_text, load_text_dims, load_word2vec, sniff_format

EXPECTED = {
    "python-embeddings.dims.txt": "text-dims",
    "python-embeddings.fifu": "finalfusion",
    "python-embeddings.txt": "text",
    "python-embeddings.w2v": "word2vec",
    "python-fasttext.bin": "fasttext",
    "python-ff_buckets.fifu": "finalfusion",
    "python-pq.fifu": "finalfusion",
    "python-utf8-incomplete.bin": "word2vec",
    "python-utf8-incomplete.dims": "text-dims",
    "python-utf8-incomplete.txt": "text",
    "rust-analogy.bin": "word2vec",
    "rust-fasttext.bin": "fasttext",
    "rust-quantized.fifu": "finalfusion",
    "rust-similarity.bin": "word2vec",
    "rust-similarity.nodims": "text",
    "rust-similarity.txt": "text-dims",
}
LOADERS = {"word2vec": load_word2vec, "text": load_text, "text-dims": load_text_dims, "fasttext": load_fasttext}


def same(a: finalfusion.Embeddings, b: finalfusion.Embeddings) -> None:
    assert a.vocab == b.vocab
    np.testing.assert_array_equal(np.asarray(a.storage), np.asarray(b.storage))
    assert (a.norms is None) == (b.norms is None)
    if a.norms is not None:
        np.testing.assert_array_equal(a.norms.norms, b.norms.norms)


@pytest.mark.parametrize(("name", "fmt"), sorted(EXPECTED.items()))
def test_sniffs_real_files(testdata: Path, name: str, fmt: str) -> None:
    data = (testdata / name).read_bytes()
    assert sniff_format(data[: 1 << 16]) == fmt
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", finalfusion.LegacyFormatWarning)
        got = load(testdata / name, lossy=True)
        expected = finalfusion.load_finalfusion(testdata / name) if fmt == "finalfusion" else LOADERS[fmt](testdata / name, lossy=True)
        same(got, expected)
        # gzip-compressed, as bytes and as a file object
        same(load(gzip.compress(data), lossy=True), expected)
        same(load(io.BytesIO(data), lossy=True), expected)


def test_options_are_passed_on(testdata: Path) -> None:
    emb = load(testdata / "rust-similarity.bin", normalize=False, limit=3)
    assert emb.norms is None
    assert emb.vocab.words == ["Berlin", "Potsdam", "Hamburg"]
    with pytest.raises(FormatError, match="invalid UTF-8"):
        load(testdata / "rust-utf8-incomplete.txt")
    mapped = load(testdata / "rust-similarity.fifu", mmap=True)
    assert not mapped.storage.matrix.flags.writeable


def test_floret_header_is_recognised() -> None:
    assert sniff_format(b"10 2 3 6 2 2166136261 < >\n0 1 2\n") == "floret"


@pytest.mark.parametrize(
    ("data", "match"),
    [
        (b"", "empty input"),
        (b"<html><body>", "cannot tell the format: not finalfusion"),
        (b"Berlin\n", "the first line is not a word followed by numbers"),
        (b"Berlin one two\n", "the first line is not a word followed by numbers"),
        (b"\x04\x00\x00\x00\xa0\x1e\x00\x00\x00\x00\x00\x00", "bare finalfusion chunk"),
    ],
)
def test_unknown_formats_say_what_they_found(data: bytes, match: str) -> None:
    with pytest.raises(FormatError, match=match) as err:
        load(data)
    if data:
        assert repr(data[:8])[2:-1] in str(err.value)


def test_quantized_storage_chunk_without_header(testdata: Path) -> None:
    with pytest.raises(FormatError, match=r"bare finalfusion chunk \(id 4\)"):
        load(testdata / "rust-quantized_storage.bin")


def test_top_level_exports() -> None:
    for name in ("load", "load_word2vec", "load_text", "load_text_dims", "load_fasttext", "write_word2vec", "write_text", "write_text_dims"):
        assert getattr(finalfusion, name) is getattr(finalfusion.compat, name)


def test_bytes_paths_and_file_descriptors_as_in_071(testdata: Path) -> None:
    import os

    path = os.fsencode(testdata / "rust-similarity.bin")
    expected = load_word2vec(testdata / "rust-similarity.bin")
    same(load_word2vec(path), expected)
    fd = os.open(path, os.O_RDONLY)
    try:
        same(load(fd), expected)
    finally:
        os.close(fd)


GZIP_READERS = {
    "rust-similarity.txt": load_text_dims,
    "python-embeddings.txt": load_text,
    "python-embeddings.w2v": load_word2vec,
    "python-fasttext.bin": load_fasttext,
    "python-embeddings.dims.txt": load,
}


@pytest.mark.parametrize("name", sorted(GZIP_READERS))
def test_corrupt_or_cut_gzip_is_a_format_error(testdata: Path, name: str) -> None:
    # zlib.error (corrupt deflate data) and EOFError (stream cut before its end marker) escaped every reader.
    reader = GZIP_READERS[name]
    packed = gzip.compress((testdata / name).read_bytes())
    reader(packed)
    corrupt = bytearray(packed)
    corrupt[30] ^= 0xFF
    corrupt[31] ^= 0x55
    with pytest.raises(FormatError, match="gzip: corrupt gzip data: expected a valid deflate stream") as err:
        reader(bytes(corrupt))
    assert err.value.chunk == "gzip"
    assert err.value.offset is not None
    assert 0 < err.value.offset <= len(packed)  # in the compressed input
    with pytest.raises(finalfusion.Truncated, match="gzip: the gzip stream ends before its end-of-stream marker"):
        reader(packed[: len(packed) - 20])
