"""word2vec binary: real files, round trips, malformed input, writer checks (docs/format.md §13.1)."""

from __future__ import annotations

import gzip
import io
import os
import re
import tracemalloc
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import finalfusion
import finalfusion.limits
from conftest import check_lookups
from finalfusion import FormatError, Truncated, load_finalfusion
from finalfusion.compat import load_word2vec, write_word2vec
from finalfusion.compat._build import embeddings_from
from finalfusion.compat._words import check_writable_word


def w2v_bytes(words: list[str], matrix: Any, header: bytes | None = None, newline: bool = True) -> bytes:
    m = np.asarray(matrix, dtype="<f4")
    out = [header if header is not None else f"{len(words)} {m.shape[1]}\n".encode()]
    for w, row in zip(words, m, strict=True):
        out.append(w.encode() + b" " + row.tobytes() + (b"\n" if newline else b""))
    return b"".join(out)


class Stream(io.RawIOBase):
    """A non-seekable, pipe-like stream that returns at most 3 bytes per read."""

    def __init__(self, payload: bytes) -> None:
        self._b = io.BytesIO(payload)

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        chunk = self._b.read(min(len(b), 3))
        b[: len(chunk)] = chunk
        return len(chunk)


def load_fifu(path: Path) -> finalfusion.Embeddings:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", finalfusion.LegacyFormatWarning)
        return load_finalfusion(path)


# -- real files ------------------------------------------------------------------------------


def test_rust_similarity_matches_both_fifus(testdata: Path) -> None:
    emb = load_word2vec(testdata / "rust-similarity.bin")
    raw = load_fifu(testdata / "rust-similarity.fifu")  # unnormalized rows
    unit = load_fifu(testdata / "python-similarity.fifu")  # normalized by 0.7.1
    assert emb.vocab.words == raw.vocab.words == unit.vocab.words
    assert len(emb.vocab) == 41
    assert emb.dims == 100
    np.testing.assert_allclose(emb.storage.matrix, unit.storage.matrix, atol=1e-7, rtol=0)
    np.testing.assert_allclose(emb.storage.matrix * emb.norms.norms[:, None], raw.storage.matrix, rtol=1e-6, atol=1e-6)
    assert float(emb.norms[emb.vocab["Berlin"]]) == pytest.approx(17.147, abs=1e-3)
    # normalize=False keeps the stored floats bit for bit.
    plain = load_word2vec(testdata / "rust-similarity.bin", normalize=False)
    assert plain.norms is None
    np.testing.assert_array_equal(plain.storage.matrix, raw.storage.matrix)


def test_rust_analogy_golden_lookups_and_analogy(testdata: Path, lookups: dict[str, Any]) -> None:
    case = lookups["rust-analogy.bin"]
    emb = load_word2vec(testdata / "rust-analogy.bin")
    check_lookups(emb, case["lookups"], atol=1e-6)
    assert emb.vocab.words == load_fifu(testdata / "python-simple_vocab.fifu").vocab.words
    np.testing.assert_allclose(emb.storage.matrix, load_fifu(testdata / "python-simple_vocab.fifu").storage.matrix, atol=1e-7, rtol=0)
    (query, expected), *_ = case["analogy"].items()
    a, b, c = [*query.split("::")[0].split(":"), query.split("::")[1].split(":")[0]]
    m = emb.storage.matrix
    target = m[emb.vocab[b]] - m[emb.vocab[a]] + m[emb.vocab[c]]
    sims = m @ (target / np.linalg.norm(target))
    ranked = [emb.vocab.words[i] for i in np.argsort(-sims, kind="stable") if emb.vocab.words[i] not in (a, b, c)]
    assert ranked[: len(expected)] == [w for w, _ in expected]
    got = {emb.vocab.words[i]: float(sims[i]) for i in range(len(emb.vocab))}
    for word, sim in expected:
        assert got[word] == pytest.approx(sim, abs=1e-5)


def test_python_embeddings_w2v_matches_fifu(testdata: Path) -> None:
    emb = load_word2vec(testdata / "python-embeddings.w2v")
    ref = load_fifu(testdata / "python-embeddings.fifu")
    assert emb.vocab.words == ref.vocab.words == ["one", "two", "three", "four", "five", "six", "seven"]
    np.testing.assert_allclose(emb.storage.matrix, ref.storage.matrix, atol=1e-6, rtol=0)
    # This file stores already normalized vectors, so the norms read back as 1.
    np.testing.assert_allclose(emb.norms.norms, 1.0, atol=1e-6)


@pytest.mark.parametrize("who", ["rust", "python"])
def test_utf8_incomplete_strict_and_lossy(testdata: Path, who: str) -> None:
    path = testdata / f"{who}-utf8-incomplete.bin"
    with pytest.raises(FormatError, match=r"word2vec record 2: invalid UTF-8") as err:
        load_word2vec(path)
    assert err.value.offset == 26  # the 0xBF byte: "3 3\n" + "meren " + 12 + "\n" + "zee"
    emb = load_word2vec(path, lossy=True)
    assert emb.vocab.words == ["meren", "zee\ufffdn", "rivieren"]  # what Rust's lossy reader gives
    # Same vectors (up to scale) as the text version of the file.
    text = finalfusion.load_text(testdata / f"{who}-utf8-incomplete.txt", lossy=True)
    assert text.vocab.words == emb.vocab.words
    np.testing.assert_allclose(emb.storage.matrix, text.storage.matrix, atol=1e-6)


def test_writer_is_byte_exact_with_rust(testdata: Path, tmp_path: Path) -> None:
    out = tmp_path / "sim.bin"
    write_word2vec(out, load_fifu(testdata / "rust-similarity.fifu"))
    assert out.read_bytes() == (testdata / "rust-similarity.bin").read_bytes()
    # Normalized rows with norms are multiplied back (finalfusion-python 0.7.1 behaviour).
    write_word2vec(out, load_word2vec(testdata / "rust-similarity.bin"))
    again = load_word2vec(out, normalize=False)
    np.testing.assert_allclose(again.storage.matrix, load_fifu(testdata / "rust-similarity.fifu").storage.matrix, rtol=1e-6, atol=1e-6)
    write_word2vec(out, load_word2vec(testdata / "rust-similarity.bin"), unnormalize=False)
    np.testing.assert_allclose(np.linalg.norm(load_word2vec(out, normalize=False).storage.matrix, axis=1), 1.0, atol=1e-6)


def test_writer_quantized_and_subword_storage(testdata: Path, tmp_path: Path) -> None:
    quant = load_fifu(testdata / "rust-quantized.fifu")
    write_word2vec(tmp_path / "q.bin", quant)
    back = load_word2vec(tmp_path / "q.bin", normalize=False)
    assert back.vocab.words == quant.vocab.words
    np.testing.assert_allclose(back.storage.matrix, np.asarray(quant.storage), rtol=1e-6, atol=1e-6)
    buckets = load_fifu(testdata / "python-ff_buckets.fifu")
    write_word2vec(tmp_path / "b.bin", buckets)
    back = load_word2vec(tmp_path / "b.bin", normalize=False)
    assert back.vocab.words == ["one", "</s>"]  # subword rows dropped
    expected = buckets.storage.matrix[:2] * buckets.norms.norms[:, None]
    np.testing.assert_allclose(back.storage.matrix, expected, rtol=1e-6)


# -- round trips ---------------------------------------------------------------------------


@pytest.mark.parametrize("dims", [1, 3, 300])
def test_round_trip_unicode(tmp_path: Path, dims: int) -> None:
    rng = np.random.default_rng(dims)
    words = ["Berlin", "Zürich", "東京", "naïve", "🙂", "a" * 300, "x\u00a0y"[0:1], "Ελλάδα"]
    matrix = rng.standard_normal((len(words), dims)).astype(np.float32)
    matrix[2] = 0  # a zero vector
    emb = embeddings_from(words, matrix.copy(), normalize=True)
    assert np.array_equal(emb.storage.matrix[2], np.zeros(dims))
    assert float(emb.norms[2]) == 0.0
    path = tmp_path / "rt.bin"
    write_word2vec(path, emb)
    back = load_word2vec(path, normalize=False)
    assert back.vocab.words == words
    np.testing.assert_allclose(back.storage.matrix, matrix, rtol=1e-6, atol=1e-7)
    normed = load_word2vec(path)
    assert not np.isnan(normed.storage.matrix).any()
    np.testing.assert_array_equal(normed.storage.matrix[2], 0)
    assert float(normed.norms[2]) == 0.0


def test_empty_vocabulary_round_trip() -> None:
    emb = embeddings_from([], np.zeros((0, 4), dtype=np.float32), normalize=True)
    buf = io.BytesIO()
    write_word2vec(buf, emb)
    assert buf.getvalue() == b"0 4\n"
    back = load_word2vec(buf.getvalue())
    assert len(back.vocab) == 0
    assert back.dims == 4


def test_records_without_newline_and_limit() -> None:
    rng = np.random.default_rng(0)
    words = [f"w{i}" for i in range(50)]
    matrix = rng.standard_normal((50, 7)).astype(np.float32)
    for newline in (True, False):
        data = w2v_bytes(words, matrix, newline=newline)
        emb = load_word2vec(data, normalize=False)
        assert emb.vocab.words == words
        np.testing.assert_array_equal(emb.storage.matrix, matrix)
        lim = load_word2vec(data, normalize=False, limit=5)
        assert lim.vocab.words == words[:5]
        np.testing.assert_array_equal(lim.storage.matrix, matrix[:5])
    assert len(load_word2vec(w2v_bytes(words, matrix), limit=0).vocab) == 0
    assert len(load_word2vec(w2v_bytes(words, matrix), limit=500).vocab) == 50
    with pytest.raises(ValueError, match="limit"):
        load_word2vec(w2v_bytes(words, matrix), limit=-1)


def test_spaces_inside_vectors_and_small_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Float bytes equal to 0x20 must not be taken for separators, also across block boundaries."""
    import finalfusion.compat.word2vec as w2v

    rng = np.random.default_rng(1)
    words = [f"{'ab' * (i % 7)}w{i}" for i in range(300)]
    raw = rng.integers(0, 256, size=(300, 5 * 4), dtype=np.uint8)
    raw[:, ::3] = 0x20  # plenty of spaces in the vectors
    raw[:, 3::4] = 0x3F  # keep exponents finite
    raw[::5, 16] = 0x0A  # and newlines where a record's newline would be if the vector were shorter
    matrix = raw.view("<f4").reshape(300, 5)
    with_newlines = w2v_bytes(words, matrix)
    # Every other record without its newline: the fast path for newline-terminated files must notice.
    mixed = w2v_bytes(words[:1], matrix[:1]).replace(b"1 5\n", b"300 5\n")
    for i in range(1, 300):
        mixed += w2v_bytes([words[i]], matrix[i : i + 1], header=b"", newline=i % 2 == 0)
    for data in (with_newlines, w2v_bytes(words, matrix, newline=False), mixed):
        for block in (7, 64, 1000, 1 << 24):
            monkeypatch.setattr(w2v, "_BLOCK", block)
            emb = load_word2vec(data, normalize=False)
            assert emb.vocab.words == words
            np.testing.assert_array_equal(emb.storage.matrix, matrix)


def test_gzip_paths_and_streams(tmp_path: Path) -> None:
    words = ["a", "b"]
    matrix = np.array([[1, 2], [3, 4]], dtype=np.float32)
    data = gzip.compress(w2v_bytes(words, matrix))
    (tmp_path / "x.bin.gz").write_bytes(data)
    (tmp_path / "no-suffix").write_bytes(data)

    for source in (tmp_path / "x.bin.gz", str(tmp_path / "no-suffix"), io.BytesIO(data), Stream(data), Stream(w2v_bytes(words, matrix))):
        emb = load_word2vec(source, normalize=False)
        assert emb.vocab.words == words
        np.testing.assert_array_equal(emb.storage.matrix, matrix)


# -- malformed input -----------------------------------------------------------------------


def test_truncation_is_reported() -> None:
    data = w2v_bytes(["alpha", "beta"], np.ones((2, 4)))
    # A stream of unknown size: found while reading.
    with pytest.raises(Truncated, match=r"record 2.*inside a vector") as err:
        load_word2vec(Stream(data[:-3]))
    assert err.value.offset == data.index(b"beta") + 5
    with pytest.raises(Truncated, match=r"record 2.*inside a word"):
        load_word2vec(Stream(data[: data.index(b"beta") + 2]))
    with pytest.raises(Truncated, match="after 1 of the 2 records"):
        load_word2vec(Stream(data[: data.index(b"beta")]))
    # Known size: too small for the records even with one-letter words, so it fails before reading them.
    with pytest.raises(Truncated, match="too short"):
        load_word2vec(data[:30])
    with pytest.raises(Truncated, match=r"record 2.*inside a vector"):
        load_word2vec(data[:-3])


def test_huge_header_fails_fast(tmp_path: Path) -> None:
    path = tmp_path / "huge.bin"
    path.write_bytes(b"1099511627776 300\nword " + b"\x00" * 1200 + b"\n")
    with pytest.raises(Truncated, match="too short"):
        load_word2vec(path)
    # Unknown size (gzip): memory grows with the data instead of the header's claim.
    with pytest.raises(Truncated, match="after 1 of the 1099511627776 records"):
        load_word2vec(gzip.compress(path.read_bytes()))


def test_stream_with_huge_dims_allocates_only_what_it_read(monkeypatch: pytest.MonkeyPatch) -> None:
    # Past finalfusion.limits.MAX_DIMS (raised here): the deeper defence below must hold on its own.
    monkeypatch.setattr(finalfusion.limits, "MAX_DIMS", 1 << 62)
    # With the size unknown (gzip), rows are reserved only once their bytes are read, so a header claiming
    # 10**8 dims in a tiny stream fails on the data instead of preallocating 400 MB for the first row.
    data = gzip.compress(b"2 100000000\nfoo " + b"\x00" * 40)
    tracemalloc.start()
    try:
        with pytest.raises(Truncated, match="record 1: the input ends inside a vector"):
            load_word2vec(io.BytesIO(data))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 32 << 20, peak


@pytest.mark.parametrize(("header", "name"), [(b"2 4294967296", "dims"), (b"18446744073709551616 3", "rows")])
def test_header_values_beyond_the_format_fields(header: bytes, name: str) -> None:
    with pytest.raises(FormatError, match=f"word2vec line 1: {name} is out of range") as err:
        load_word2vec(header + b"\na " + b"\x00" * 12)
    assert err.value.found == header.split()[name == "dims"]


@pytest.mark.parametrize(
    ("header", "message"),
    [(b"", "unterminated"), (b"2\n", "two non-negative integers"), (b"2 x\n", "two non-negative"), (b"-2 3\n", "two non-negative"), (b"2 3 4\n", "two non")],
)
def test_bad_headers(header: bytes, message: str) -> None:
    with pytest.raises(FormatError, match=message):
        load_word2vec(header + b"a " + b"\x00" * 12)
    with pytest.raises(FormatError, match="the input is empty"):
        load_word2vec(b"")


def test_trailing_data_nan_and_duplicates() -> None:
    data = w2v_bytes(["a", "b"], np.ones((2, 2)))
    assert len(load_word2vec(data + b"\n \n").vocab) == 2  # trailing whitespace is fine
    with pytest.raises(FormatError, match="data after the 2 records") as err:
        load_word2vec(data + b"c " + b"\x00" * 8)
    assert err.value.offset == len(data)
    for bad in (np.nan, np.inf, -np.inf):
        with pytest.raises(FormatError, match="record 2: vector has a NaN or infinite component"):
            load_word2vec(w2v_bytes(["a", "b"], [[1, 2], [bad, 1]]))
    with pytest.raises(FormatError, match="record 3 repeats the word 'a' of record 1"):
        load_word2vec(w2v_bytes(["a", "b", "a"], np.ones((3, 2))))


def test_large_finite_values_keep_their_norm() -> None:
    emb = load_word2vec(w2v_bytes(["big"], [[3e30, 4e30]]))
    assert float(emb.norms[0]) == pytest.approx(5e30, rel=1e-6)
    np.testing.assert_allclose(emb["big"], [0.6, 0.8], rtol=1e-6)


# -- writer ---------------------------------------------------------------------------------


@pytest.mark.parametrize("word", ["New York", "tab\there", "line\nbreak", "", "\u00a0nbsp", "ideographic\u3000", "\x1cfs"])
def test_unwritable_words_leave_target_untouched(tmp_path: Path, word: str) -> None:
    path = tmp_path / "out.bin"
    path.write_bytes(b"old")
    emb = embeddings_from(["fine", word], np.ones((2, 2), dtype=np.float32), normalize=False)
    with pytest.raises(ValueError, match=r"word2vec cannot represent the (empty word|word)") as err:
        write_word2vec(path, emb)
    if word:
        assert repr(word) in str(err.value)
    assert path.read_bytes() == b"old"
    assert os.listdir(tmp_path) == ["out.bin"]  # no temporary file left behind
    buf = io.BytesIO()
    with pytest.raises(ValueError, match="cannot represent"):
        write_word2vec(buf, emb)
    assert buf.getvalue() == b""  # nothing written before the check


def test_word_without_space_within_the_word_cap_names_the_record_and_offset(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(finalfusion.limits, "MAX_WORD_BYTES", 64)
    data = b"1 2\n" + b"w" * 200
    with pytest.raises(FormatError, match="no space after a word in its first 64 bytes") as err:
        finalfusion.load_word2vec(data)
    assert err.value.offset == 4
    assert err.value.chunk is not None
    assert err.value.chunk.endswith(" 1")


def test_writable_word_check_refuses_non_strings() -> None:
    with pytest.raises(TypeError, match="words must be str, got bytes: b'ab'"):
        check_writable_word(b"ab", "word2vec")  # type: ignore[arg-type]


# -- a real BPE vocabulary whose pieces carry \r and \t (code trained with Windows line ends) ------


def _crlf_bpe_vocabulary() -> list[str]:
    """The pieces of a BPE model trained (tokenizers) on code with CRLF line ends and tabs, in id order."""
    tokenizers = pytest.importorskip("tokenizers")
    tok = tokenizers.Tokenizer(tokenizers.models.BPE())
    tok.pre_tokenizer = tokenizers.pre_tokenizers.Split(" ", "removed")
    lines = ["foo(bar);\r\nbaz(qux);\r\n\tx = y;\r\n"] * 50 + ["call(a);\tcall(b);\r\n"] * 30
    tok.train_from_iterator(lines, tokenizers.trainers.BpeTrainer(vocab_size=200, show_progress=False))
    index = tok.get_vocab()
    return sorted(index, key=index.__getitem__)


def test_writer_refuses_pieces_with_cr_and_tab_naming_the_character(tmp_path: Path) -> None:
    pieces = _crlf_bpe_vocabulary()
    assert any("\r" in p for p in pieces)
    assert any("\t" in p for p in pieces)
    emb = embeddings_from(pieces, np.random.default_rng(0).standard_normal((len(pieces), 4)).astype(np.float32), normalize=True)
    path = tmp_path / "pieces.bin"
    with pytest.raises(ValueError, match=r"it contains ASCII whitespace \('\\[rtn]' at character \d+\)") as err:
        write_word2vec(path, emb)
    first = next(p for p in pieces if any(c in p for c in " \t\n\r\f\v"))
    assert repr(first) in str(err.value)
    assert not path.exists()


def test_reader_names_the_trimming_when_cr_and_tab_pieces_collide(tmp_path: Path) -> None:
    gensim_models = pytest.importorskip("gensim.models")
    # gensim writes and reads back pieces with \r and \t (not \n, which ends its records)
    pieces = [p for p in _crlf_bpe_vocabulary() if "\n" not in p]
    assert {"\t", "\r"} <= set(pieces)
    kv = gensim_models.KeyedVectors(4)
    kv.add_vectors(pieces, np.random.default_rng(1).standard_normal((len(pieces), 4)).astype(np.float32))
    path = tmp_path / "pieces.bin"
    kv.save_word2vec_format(str(path), binary=True)
    assert gensim_models.KeyedVectors.load_word2vec_format(str(path), binary=True).index_to_key == pieces
    with pytest.raises(FormatError, match="once trimmed of whitespace") as err:
        load_word2vec(path)
    message = str(err.value)
    # both records are named with their words as written ('\t' and '\r' are both '' once trimmed)
    i, j = (int(n) for n in re.findall(r"record (\d+)", message)[:2])
    assert f"{pieces[i - 1]!r}" in message
    assert f"{pieces[j - 1]!r}" in message
    assert pieces[i - 1].strip() == pieces[j - 1].strip()
    assert pieces[i - 1] != pieces[j - 1]
    assert "repeats record" in message


def test_a_repeat_not_made_by_trimming_keeps_the_plain_message() -> None:
    data = w2v_bytes(["\tx", "a", "a"], np.eye(3))
    with pytest.raises(FormatError, match="record 3 repeats the word 'a' of record 2"):
        load_word2vec(data)
    assert load_word2vec(w2v_bytes(["\tx", ");\r", "y"], np.eye(3))).vocab.words == ["x", ");", "y"]
    with pytest.raises(FormatError, match=r"record 3's word '\);\\r' is '\);' once trimmed .* repeats record 2's word '\);'"):
        load_word2vec(w2v_bytes(["\tx", ");", ");\r"], np.eye(3)))
