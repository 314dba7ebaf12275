"""Text and text-dims formats: real files, Rust-exact writing, round trips, malformed input (docs/format.md §13.2)."""

from __future__ import annotations

import gzip
import io
import re
import tracemalloc
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import finalfusion
import finalfusion.limits
from conftest import check_lookups
from finalfusion import FormatError, Truncated, load_finalfusion
from finalfusion.compat import load_floret, load_text, load_text_dims, write_text, write_text_dims
from finalfusion.compat import text as text_module
from finalfusion.compat._build import embeddings_from
from finalfusion.compat.sniff import sniff_format
from finalfusion.compat.text import format_f32, format_rows


def load_fifu(path: Path) -> finalfusion.Embeddings:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", finalfusion.LegacyFormatWarning)
        return load_finalfusion(path)


# -- real files ------------------------------------------------------------------------------


@pytest.mark.parametrize(("name", "loader"), [("rust-similarity.txt", load_text_dims), ("rust-similarity.nodims", load_text)])
def test_rust_similarity_text_equals_fifu(testdata: Path, name: str, loader: Any) -> None:
    raw = load_fifu(testdata / "rust-similarity.fifu")
    plain = loader(testdata / name, normalize=False)
    assert plain.vocab.words == raw.vocab.words
    np.testing.assert_array_equal(plain.storage.matrix, raw.storage.matrix)  # shortest round-trip decimals: exact
    emb = loader(testdata / name)
    np.testing.assert_allclose(emb.storage.matrix, load_fifu(testdata / "python-similarity.fifu").storage.matrix, atol=1e-7, rtol=0)
    np.testing.assert_allclose(emb.norms.norms, np.linalg.norm(raw.storage.matrix, axis=1), rtol=1e-6)


@pytest.mark.parametrize(("name", "loader"), [("rust-similarity.txt", write_text_dims), ("rust-similarity.nodims", write_text)])
def test_writer_is_byte_exact_with_rust(testdata: Path, tmp_path: Path, name: str, loader: Any) -> None:
    out = tmp_path / name
    loader(out, load_fifu(testdata / "rust-similarity.fifu"))
    assert out.read_bytes() == (testdata / name).read_bytes()


@pytest.mark.parametrize(("name", "loader"), [("python-embeddings.txt", load_text), ("python-embeddings.dims.txt", load_text_dims)])
def test_python_embeddings_golden(testdata: Path, lookups: dict[str, Any], name: str, loader: Any) -> None:
    emb = loader(testdata / name)
    check_lookups(emb, lookups["python-embeddings.txt"]["lookups"], atol=1e-7)
    ref = load_fifu(testdata / "python-embeddings.fifu")
    assert emb.vocab.words == ref.vocab.words
    np.testing.assert_array_equal(emb.storage.matrix, ref.storage.matrix)
    np.testing.assert_array_equal(emb.norms.norms, ref.norms.norms)


@pytest.mark.parametrize("who", ["rust", "python"])
def test_utf8_incomplete(testdata: Path, who: str) -> None:
    with pytest.raises(FormatError, match="text line 2: invalid UTF-8") as err:
        load_text(testdata / f"{who}-utf8-incomplete.txt")
    assert err.value.offset == 16
    with pytest.raises(FormatError, match="text-dims line 3: invalid UTF-8") as err:
        load_text_dims(testdata / f"{who}-utf8-incomplete.dims")
    assert err.value.offset == 20
    for emb in (load_text(testdata / f"{who}-utf8-incomplete.txt", lossy=True), load_text_dims(testdata / f"{who}-utf8-incomplete.dims", lossy=True)):
        assert emb.vocab.words == ["meren", "zee\ufffdn", "rivieren"]
        s = np.float32(np.sqrt(0.5))
        np.testing.assert_allclose(emb.storage.matrix, [[-s, 0, s], [s, 0, -s], [0, -s, s]], atol=1e-7)
        np.testing.assert_allclose(emb.norms.norms, np.sqrt(2), rtol=1e-6)


def test_format_rows_is_per_value_format_f32() -> None:
    """The row formatter (numpy ``str`` + one ``.0`` pass) equals formatting each value on its own."""
    rng = np.random.default_rng(7)
    bits = rng.integers(0, 2**32, size=(400, 50), dtype=np.uint64).astype(np.uint32).view(np.float32)  # every class of float32
    normal = rng.standard_normal((400, 50)).astype(np.float32)  # mostly without exponent: the fast rows
    specials = np.array(
        [0.0, -0.0, 1.0, -1.0, 10.0, 100.0, 1e-4, 9.999999e-5, 1e16, 9.999999e15, 16777216.0, 0.5, np.inf, -np.inf, np.nan, 1e-45, 3.4028235e38]
        + [float(x) for x in range(-60, 60)]
        + [2.0**e for e in range(-60, 60)],
        dtype=np.float32,
    )
    for matrix in (bits, normal, specials.reshape(1, -1), specials.reshape(-1, 1), np.zeros((0, 3), np.float32)):
        assert format_rows(matrix) == [" ".join(map(format_f32, row)) for row in matrix]
    assert sum("e" in " ".join(map(str, row)) for row in normal) > 0  # both paths ran


# -- round trips ---------------------------------------------------------------------------


@pytest.mark.parametrize("dims", [1, 2, 50])
@pytest.mark.parametrize(("writer", "loader"), [(write_text_dims, load_text_dims), (write_text, load_text)])
def test_round_trip_exact(tmp_path: Path, dims: int, writer: Any, loader: Any) -> None:
    rng = np.random.default_rng(dims)
    words = ["Berlin", "Zürich", "東京", "naïve", "🙂", "über-long" * 40]
    matrix = (rng.standard_normal((len(words), dims)) * 10.0 ** rng.integers(-12, 12, (len(words), dims))).astype(np.float32)
    matrix[1] = 0
    matrix[0, 0] = -0.0
    emb = embeddings_from(words, matrix.copy(), normalize=False)
    path = tmp_path / "rt.txt"
    writer(path, emb)
    back = loader(path, normalize=False)
    assert back.vocab.words == words
    np.testing.assert_array_equal(back.storage.matrix, matrix)  # the shortest decimals read back exactly
    lines = path.read_bytes().splitlines()[1 if writer is write_text_dims else 0 :]
    assert not any(b"e" in tok for line in lines for tok in line.split()[1:])  # no exponents (Rust formatting)
    normed = loader(path)
    np.testing.assert_array_equal(normed.storage.matrix[1], 0)
    assert float(normed.norms[1]) == 0.0


def test_norms_are_multiplied_back_and_sep() -> None:
    emb = load_text(b"a 3 4\nb 0 1\n")
    buf = io.BytesIO()
    write_text(buf, emb)
    assert buf.getvalue() == b"a 3 4\nb 0 1\n"
    buf = io.BytesIO()
    write_text_dims(buf, emb, "\t", unnormalize=False)
    assert buf.getvalue() == b"2 2\na\t0.6 0.8\nb\t0 1\n"
    with pytest.raises(ValueError, match="sep"):
        write_text(io.BytesIO(), emb, sep=",")


def test_empty_vocabulary() -> None:
    emb = embeddings_from([], np.zeros((0, 3), dtype=np.float32), normalize=True)
    buf = io.BytesIO()
    write_text_dims(buf, emb)
    assert buf.getvalue() == b"0 3\n"
    assert len(load_text_dims(buf.getvalue()).vocab) == 0
    with pytest.raises(FormatError, match="empty"):
        load_text(b"")


def test_whitespace_variants_limit_and_gzip(tmp_path: Path) -> None:
    data = b"2 3\r\nfoo\t1  2 3\r\n bar 4 5\x0c6 \n"
    emb = load_text_dims(data, normalize=False)
    assert emb.vocab.words == ["foo", "bar"]
    np.testing.assert_array_equal(emb.storage.matrix, [[1, 2, 3], [4, 5, 6]])
    assert load_text_dims(data, limit=1).vocab.words == ["foo"]
    assert load_text(b"a 1\nb 2\nc 3", limit=2, normalize=False).storage.matrix.tolist() == [[1], [2]]
    assert load_text(b"a 1\nb 2\nc 3", normalize=False).vocab.words == ["a", "b", "c"]  # no final newline
    (tmp_path / "v.txt.gz").write_bytes(gzip.compress(data))
    assert load_text_dims(tmp_path / "v.txt.gz").vocab.words == ["foo", "bar"]
    with open(tmp_path / "v.txt.gz", "rb") as f:
        assert load_text_dims(f).vocab.words == ["foo", "bar"]


def test_small_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    import finalfusion.compat.text as text

    rng = np.random.default_rng(3)
    words = [f"w{i}" for i in range(200)]
    matrix = rng.standard_normal((200, 9)).astype(np.float32)
    buf = io.BytesIO()
    write_text_dims(buf, embeddings_from(words, matrix.copy(), normalize=False))
    for block in (5, 100, 4096):
        monkeypatch.setattr(text, "_BLOCK", block)
        back = load_text_dims(buf.getvalue(), normalize=False)
        assert back.vocab.words == words
        np.testing.assert_array_equal(back.storage.matrix, matrix)


numbers = st.floats(width=32, allow_nan=False, allow_infinity=False)


@settings(max_examples=60, deadline=None)
@given(st.lists(numbers, min_size=1, max_size=40), st.sampled_from(["{:.6f}", "{!r}", "{:.3e}", "{:g}", "{}"]))
def test_number_parsing_matches_float(values: list[float], style: str) -> None:
    tokens = [style.format(v) for v in values]
    # Rounding to fewer digits can push float32's largest values out of range: those are rejected (tested below).
    assume(np.isfinite(np.array([float(t) for t in tokens], dtype=np.float32)).all())
    emb = load_text(("w " + " ".join(tokens) + "\n").encode(), normalize=False)
    expected = np.array([float(t) for t in tokens], dtype=np.float32)
    np.testing.assert_array_equal(emb.storage.matrix[0], expected)


# -- malformed input -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "match", "offset"),
    [
        (b"2 2\nfoo 1 2\nbar 1\n", "text-dims line 3: wrong number of components: expected 2, found 1", 12),
        (b"2 2\nfoo 1 2 3\nbar 1 2\n", "text-dims line 2: wrong number of components: expected 2, found 3", 4),
        (b"2 2\nfoo 1 2\n\nbar 1 2\n", "text-dims line 3: spurious empty line", 12),
        (b"2 2\nfoo 1 x2\nbar 1 2\n", "text-dims line 2: not a number", 10),
        (b"2 2\nfoo 1 2\nbar 1,5 2\n", "text-dims line 3: not a number", 16),
        (b"2 2\nfoo 1 2\n", "ends after 1 of the 2 lines", 12),
        (b"1 2\nfoo 1 2\nbar 1 2\n", "more lines than the 1 the header announces", 12),
        (b"2 2\nfoo 1 2\nfoo 3 4\n", "text-dims line 3 repeats the word 'foo' of line 2", None),
        (b"2 2\nfoo 1 nan\nbar 1 2\n", "text-dims line 2: vector has a NaN or infinite component", None),
        (b"2 2\nfoo 1 2\nbar -inf 2\n", "text-dims line 3: vector has a NaN", None),
        (b"2 2\nfoo 1 2\nbar 3.5e38 2\n", "text-dims line 3: vector has a NaN or infinite", None),
        (b"two 2\nfoo 1 2\n", "header must be two non-negative integers", 0),
    ],
)
def test_malformed_text_dims(data: bytes, match: str, offset: int | None) -> None:
    with pytest.raises(FormatError, match=match) as err:
        load_text_dims(data)
    assert err.value.offset == offset


def test_malformed_text() -> None:
    with pytest.raises(FormatError, match="text line 3: wrong number of components: expected 2, found 3"):
        load_text(b"a 1 2\nb 1 2\nc 1 2 3\n")
    with pytest.raises(FormatError, match="text line 1: spurious empty line"):
        load_text(b"\na 1 2\n")


def test_huge_header_fails_fast(tmp_path: Path) -> None:
    path = tmp_path / "huge.txt"
    path.write_bytes(b"1099511627776 300\nword" + b" 0" * 300 + b"\n")
    with pytest.raises(Truncated, match="after 1 of the 1099511627776 lines"):
        load_text_dims(path)
    with pytest.raises(Truncated, match="after 1 of the 1099511627776 lines"):
        load_text_dims(gzip.compress(path.read_bytes()))


@pytest.mark.parametrize(
    ("header", "match", "offset"),
    [
        (b"7 4294967296", "text-dims line 1: dims is out of range: expected at most 4294967295 (u32), found b'4294967296'", 2),
        (b"3 99999999999999999999", "text-dims line 1: dims is out of range", 2),
        (b"18446744073709551616 2", "text-dims line 1: rows is out of range: expected at most 18446744073709551615 (u64)", 0),
    ],
)
def test_header_values_beyond_the_format_fields(header: bytes, match: str, offset: int) -> None:
    # Found by the fuzzer: dims of 2**32 allocated 16 GiB, dims of 10**20 leaked numpy's ValueError.
    with pytest.raises(FormatError, match=re.escape(match)) as err:
        load_text_dims(header + b"\none 3.0 1.")
    assert err.value.offset == offset


@pytest.mark.parametrize("dims", [2**32 - 1, 2**24, 300])
@pytest.mark.parametrize("source", ["bytes", "path", "gzip"])
def test_dims_the_lines_cannot_hold_fail_before_allocating(tmp_path: Path, dims: int, source: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # Past finalfusion.limits.MAX_DIMS (raised here): the deeper defence below must hold on its own.
    monkeypatch.setattr(finalfusion.limits, "MAX_DIMS", 1 << 62)
    # Each line needs 2 * dims + 2 bytes; a short line is reported before rows of the header's width are reserved,
    # whether the input size is known (file, bytes) or not (gzip stream).
    data = f"2 {dims}\none 3.0 1.5\ntwo 1 2\n".encode()
    path = tmp_path / "short.txt"
    path.write_bytes(data)
    inputs = {"bytes": data, "path": path, "gzip": io.BytesIO(gzip.compress(data))}
    tracemalloc.start()
    try:
        with pytest.raises(FormatError, match=f"text-dims line 2: wrong number of components: expected {dims}, found 2") as err:
            load_text_dims(inputs[source])
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert err.value.offset == len(f"2 {dims}\n")
    assert peak < 16 << 20, peak


def test_honest_header_still_preallocates_once(monkeypatch: pytest.MonkeyPatch) -> None:
    # The fast path for honest headers: one matrix of exactly the announced rows, never grown or copied.
    from finalfusion.compat import _rows

    sizes = []
    real = _rows.RowSink.reserve

    def spy(self: _rows.RowSink, k: int) -> np.ndarray:
        sizes.append(self.matrix.shape[0])
        return real(self, k)

    monkeypatch.setattr(_rows.RowSink, "reserve", spy)
    data = b"3 2\na 1 2\nb 3 4\nc 5 6\n"
    emb = load_text_dims(data, normalize=False)
    assert sizes == [3]
    assert emb.storage.matrix.tolist() == [[1, 2], [3, 4], [5, 6]]


@pytest.mark.parametrize("word", ["New York", "tab\there", "", "vertical\x0btab", "nul\x00"])
def test_unwritable_words(tmp_path: Path, word: str) -> None:
    path = tmp_path / "out.txt"
    emb = embeddings_from(["ok", word], np.ones((2, 2), dtype=np.float32), normalize=False)
    for writer in (write_text, write_text_dims):
        with pytest.raises(ValueError, match="cannot represent"):
            writer(path, emb)
        assert not path.exists()


# -- number parsing: correct rounding as Rust's parse::<f32> -----------------------------------


def _tie_tokens(seed: int, count: int) -> tuple[list[bytes], list[float]]:
    """Decimals at, just below and just above midpoints between adjacent float32s, with the float32 each must give."""
    from decimal import Decimal, localcontext
    from fractions import Fraction

    rng = np.random.default_rng(seed)
    bits = rng.integers(0x3F800000, 0x41200000, size=count, dtype=np.uint32)  # [1, 10): 17 digits fit in 18 chars
    tokens: list[bytes] = []
    expected: list[float] = []
    for lo in bits.view(np.float32):
        hi = np.nextafter(lo, np.float32(np.inf))
        mid = (Fraction(float(lo)) + Fraction(float(hi))) / 2
        even = lo if int(lo.view(np.uint32)) % 2 == 0 else hi
        with localcontext() as ctx:
            ctx.prec = 60
            exact = Decimal(mid.numerator) / Decimal(mid.denominator)
        digits = f"{exact:.16f}"  # 17 significant digits, truncated or rounded
        below = Decimal(digits) if Decimal(digits) < exact else Decimal(digits) - Decimal("1e-16")
        above = below + Decimal("1e-16")
        for dec, want in ((exact, even), (below, lo), (above, hi)):
            for text in (f"{dec:f}", f"-{dec:f}", f"{dec / 1000:f}e3"):
                tokens.append(text.encode())
                expected.append(float(want) * (-1 if text.startswith("-") else 1))
    return tokens, expected


def test_parse_rounds_ties_like_rust() -> None:
    tokens, expected = _tie_tokens(3, 300)
    emb = load_text(b"w " + b" ".join(tokens) + b"\n", normalize=False)
    got = emb.storage.matrix[0]
    assert got.tolist() == np.array(expected, dtype=np.float32).tolist()
    naive = np.array([float(t) for t in tokens], dtype=np.float64).astype(np.float32)
    assert (naive != got).sum() > 50  # the cases do exercise double rounding


@pytest.mark.parametrize("token", [b"1_0", b"1\x0b", b"\x0b1", b"1e", b"e5", b".", b"-.e1", b"0x10", b"1e+", b"in", b"nana"])
def test_parse_rejects_what_rust_rejects(token: bytes) -> None:
    with pytest.raises(FormatError, match="not a number"):
        load_text(b"w " + token + b" 1\n")  # float() takes 1_0 and 1\v; Rust takes neither


@pytest.mark.parametrize(("token", "value"), [(b"+1", 1.0), (b".5", 0.5), (b"5.", 5.0), (b"1.5E+3", 1500.0), (b"-2e-2", -0.02), (b"00.10", 0.1)])
def test_parse_accepts_what_rust_accepts(token: bytes, value: float) -> None:
    assert load_text(b"w " + token + b" 1\n", normalize=False).storage.matrix[0, 0] == np.float32(value)


def test_parse_ties_with_thousands_of_digits() -> None:
    """Rust parses any number of digits; the exact re-read must not hit Python's 4,300-digit int limit."""
    tie = b"16777217" + b"0" * 5000 + b"e-5000"  # 2**24 + 1, between two float32s: to even
    above = b"16777217." + b"0" * 6000 + b"1"  # just above that tie
    long_exponent = b"16777217e" + b"0" * 5000  # exponent 0 written with 5,000 digits
    emb = load_text(b"w " + b" ".join([tie, above, long_exponent]) + b"\n", normalize=False)
    assert emb.storage.matrix[0].tolist() == [16777216.0, 16777218.0, 16777216.0]
    floret = load_floret(b"1 3 3 6 2 2166136261 < >\n0 " + b" ".join([tie, above, long_exponent]) + b"\n")
    assert floret.storage.matrix[0].tolist() == [16777216.0, 16777218.0, 16777216.0]


def test_line_too_long_arriving_in_pieces_names_its_line_and_offset(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(finalfusion.limits, "MAX_LINE_BYTES", 64)
    monkeypatch.setattr(text_module, "_BLOCK", 16)  # the line arrives in pieces, none with its end
    data = b"a 1.0 2.0\n" + b"b" + b" 1.0" * 40 + b"\n"
    with pytest.raises(FormatError, match="line too long") as err:
        finalfusion.load_text(data)
    assert err.value.offset == 10
    assert err.value.chunk == "text line 2"


@pytest.mark.parametrize("sample", [b"2 3\nword", b"2 0\nw 1\n"], ids=["no-vector-yet", "zero-dims"])
def test_dims_line_without_binary_vector_sniffs_as_text_dims(sample: bytes) -> None:
    assert sniff_format(sample) == "text-dims"
