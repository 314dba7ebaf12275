"""The one bounds-checked cursor (ByteReader) and the writer: strings with u32 or u64 lengths (fast and per-string paths
agree, errors are precise), either byte order, arrays, fields."""

from __future__ import annotations

import io
import struct

import numpy as np
import pytest

from finalfusion import FormatError
from finalfusion._binary import ByteReader, ByteWriter
from finalfusion.errors import Truncated


def encode(words: list[str]) -> bytes:
    return b"".join(struct.pack("<I", len(w.encode())) + w.encode() for w in words)


def read_strings(data: bytes, count: int, end: int | None = None) -> tuple[list[str], int]:
    reader = ByteReader(data, end=end, chunk="SimpleVocab")
    return reader.strings(count), reader.pos


ALL_ASCII = "".join(chr(c) for c in range(128))
#: Word lists that take the fast path and each reason for the per-string loop, for the u32 and the u64 length readers alike.
PATH_WORD_LISTS = [
    [f"w{i}" for i in range(100)],
    ["", "ä", "日本", "😀", *[f"{i}x" for i in range(70)]],
    [ALL_ASCII, *[f"w{i}" for i in range(70)]],  # no free separator byte: the per-string loop
    [f"w{i}" for i in range(5)],  # few words: the per-string loop
]


@pytest.mark.parametrize("words", PATH_WORD_LISTS)
def test_strings_decode_alike_on_the_fast_and_the_per_string_path(words: list[str]) -> None:
    data = encode(words) + b"trailing"
    assert read_strings(data, len(words)) == (words, len(data) - 8)


def test_strings_refuse_a_count_the_data_cannot_hold() -> None:
    with pytest.raises(Truncated, match="too few bytes for 10 words") as err:
        read_strings(bytes(39), 10)
    assert err.value.expected == "at least 40 bytes"


@pytest.mark.parametrize("count", [5, 100])
def test_strings_whose_length_runs_past_the_end_name_the_word(count: int) -> None:
    words = [f"w{i}" for i in range(count)]
    data = encode(words)
    bad = data[: -len(encode([words[-1]]))] + struct.pack("<I", 1000) + b"x" * 4
    with pytest.raises(Truncated, match=f"data ends inside word {count - 1}") as err:
        read_strings(bad, count)
    assert err.value.offset == len(bad) - 4
    assert err.value.expected == "1000 bytes"


@pytest.mark.parametrize("count", [5, 100])
def test_strings_stop_at_the_reader_end(count: int) -> None:
    data = encode([f"w{i}" for i in range(count)])
    with pytest.raises(Truncated, match="data ends inside"):
        read_strings(data + b"\0" * 8, count, end=len(data) - 1)


def test_strings_cut_inside_a_length_prefix_name_the_word() -> None:
    data = encode(["ab"] * 100)
    # 100 strings of 6 bytes, then the reader is told to expect one more whose length prefix is cut off.
    with pytest.raises(Truncated, match="data ends inside length of word 100") as err:
        read_strings(data + b"\1\0", 101)
    assert err.value.offset == len(data)


@pytest.mark.parametrize("count", [5, 100])
def test_strings_invalid_utf8_names_the_word_and_offset(count: int) -> None:
    words = [f"w{i}" for i in range(count)]
    data = bytearray(encode(words))
    at = len(encode(words[:3])) + 4 + 1  # second byte of word 3
    data[at] = 0xFF
    with pytest.raises(FormatError, match=r"SimpleVocab: word 3 is not valid UTF-8 \(invalid start byte\)") as err:
        read_strings(bytes(data), count)
    assert err.value.offset == at


def test_string_with_invalid_utf8_consumes_nothing_past_its_length() -> None:
    reader = ByteReader(struct.pack("<I", 3) + b"a\xc3(", chunk="Metadata")
    with pytest.raises(FormatError, match="Metadata: key is not valid UTF-8") as err:
        reader.string("key")
    assert err.value.offset == 5
    assert reader.pos == 4  # nothing consumed past the length


def test_string_cut_short_is_truncated() -> None:
    with pytest.raises(Truncated, match="data ends inside key") as err:
        ByteReader(struct.pack("<I", 3) + b"ab").string("key")
    assert err.value.found == "2 bytes"


def test_fields_and_padding_are_bounds_checked() -> None:
    reader = ByteReader(struct.pack("<IQ", 7, 9) + b"\0\0\0\0" + b"xyz", chunk="c")
    assert reader.u32() == 7
    assert reader.u64() == 9
    reader.skip_padding()  # at offset 12: four bytes (padding is never zero)
    assert reader.take(2) == b"xy"
    assert reader.remaining == 1
    with pytest.raises(Truncated, match="c: data ends inside u64: expected 8 bytes, found 1 bytes"):
        reader.u64()
    with pytest.raises(Truncated, match="data ends inside padding"):
        reader.skip(2)


def test_arrays_are_views_within_the_bounds_numpy_can_represent() -> None:
    data = bytearray(np.arange(6, dtype="<f4").tobytes())
    arr = ByteReader(data).array("<f4", (2, 3))
    assert arr.tolist() == [[0, 1, 2], [3, 4, 5]]
    assert arr.flags.writeable  # a bytearray gives a writable view
    assert not ByteReader(bytes(data)).array("<f4", (2, 3)).flags.writeable
    assert ByteReader(b"").array("<f4", (0, 5)).shape == (0, 5)
    with pytest.raises(FormatError, match="embeddings has a shape numpy cannot represent"):
        ByteReader(b"").array("<f4", (0, 1 << 62), "embeddings")
    with pytest.raises(Truncated, match="data ends inside array"):
        ByteReader(data).array("<f4", (3, 3))


def test_writer_tracks_the_offset_and_refuses_u32_overflow() -> None:
    buf = io.BytesIO()
    w = ByteWriter(buf, pos=1)
    w.u32(1)
    w.u64(2)
    w.padding()  # at 13: three bytes
    w.string("é")
    w.array(np.zeros((0, 3)), "<f4")  # nothing written
    w.array([[1, 2]], "<f4")
    assert w.pos == 1 + 4 + 8 + 3 + 4 + 2 + 8
    assert buf.getvalue()[12:15] == b"\0\0\0"
    with pytest.raises(ValueError, match="4294967296 does not fit in a u32 field"):
        w.u32(1 << 32)
    with pytest.raises(ValueError, match="-1 does not fit in a u32 field"):
        w.u32(-1)


# -- byte order and u64 lengths (GGUF's dialect) ----------------------------------------------------


def encode_u64(words: list[str], order: str = "<") -> bytes:
    return b"".join(struct.pack(order + "Q", len(w.encode())) + w.encode() for w in words)


def test_big_endian_integers_and_scalars() -> None:
    data = struct.pack(">IQhfd?", 7, 1 << 40, -2, 1.5, -0.25, True)
    reader = ByteReader(data, order=">")
    assert (reader.u32(), reader.u64()) == (7, 1 << 40)
    assert [reader.scalar(code) for code in "hfd?"] == [-2, 1.5, -0.25, True]
    assert reader.remaining == 0
    little = ByteReader(data)
    assert little.u32() == 7 << 24  # the same bytes read little-endian


@pytest.mark.parametrize("order", ["<", ">"])
def test_scalar_reads_in_the_readers_byte_order(order: str) -> None:
    reader = ByteReader(struct.pack(order + "iH", -5, 513), order=order)
    assert (reader.scalar("i", "x"), reader.scalar("H", "y"), reader.pos) == (-5, 513, 6)


@pytest.mark.parametrize(("method", "size"), [("u32", 4), ("u64", 8)])
def test_big_endian_integers_cut_short_are_truncated(method: str, size: int) -> None:
    reader = ByteReader(bytes(size - 1), order=">", chunk="GGUF")
    with pytest.raises(Truncated, match=f"GGUF: data ends inside {method}: expected {size} bytes, found {size - 1} bytes") as err:
        getattr(reader, method)()
    assert err.value.offset == 0
    assert reader.pos == 0
    with pytest.raises(Truncated, match="data ends inside tensor count"):
        ByteReader(bytes(3), order=">").scalar("I", "tensor count")


@pytest.mark.parametrize("order", ["<", ">"])
def test_string_with_u64_length(order: str) -> None:
    data = encode_u64(["", "日本"], order) + b"rest"
    reader = ByteReader(data, order=order, length_bytes=8)
    assert (reader.string(), reader.string(), reader.take(4)) == ("", "日本", b"rest")


def test_string_with_u64_length_cut_short() -> None:
    with pytest.raises(Truncated, match="data ends inside length of key: expected 8 bytes, found 7 bytes"):
        ByteReader(bytes(7), length_bytes=8).string("key")
    reader = ByteReader(struct.pack("<Q", 5) + b"abc", length_bytes=8)
    with pytest.raises(Truncated, match="data ends inside key: expected 5 bytes, found 3 bytes") as err:
        reader.string("key")
    assert err.value.offset == 8
    huge = ByteReader(struct.pack(">Q", 1 << 63) + b"abc", order=">", length_bytes=8)
    with pytest.raises(Truncated, match="data ends inside key"):
        huge.string("key")


def test_string_with_u64_length_and_invalid_utf8() -> None:
    reader = ByteReader(struct.pack("<Q", 3) + b"a\xc3(", chunk="GGUF", length_bytes=8)
    with pytest.raises(FormatError, match=r"GGUF: key is not valid UTF-8 \(invalid continuation byte\)") as err:
        reader.string("key")
    assert err.value.offset == 9
    assert reader.pos == 8


@pytest.mark.parametrize("order", ["<", ">"])
@pytest.mark.parametrize("words", PATH_WORD_LISTS)
def test_strings_with_u64_lengths_on_both_paths(words: list[str], order: str) -> None:
    data = encode_u64(words, order) + b"trailing"
    reader = ByteReader(data, order=order, length_bytes=8)
    assert reader.strings(len(words)) == words
    assert reader.pos == len(data) - 8


def test_strings_with_u64_lengths_refuse_a_count_the_data_cannot_hold() -> None:
    with pytest.raises(Truncated, match="too few bytes for 5 tokens") as err:
        ByteReader(bytes(39), length_bytes=8).strings(5, "token")
    assert err.value.expected == "at least 40 bytes"


@pytest.mark.parametrize("count", [5, 100])
@pytest.mark.parametrize("length", [1000, 1 << 63, (1 << 64) - 1])  # the largest ones overflow any offset on the fast path
def test_strings_with_u64_lengths_past_the_end_name_the_word(count: int, length: int) -> None:
    words = [f"w{i}" for i in range(count)]
    data = encode_u64(words[:-1], ">") + struct.pack(">Q", length) + b"x" * 8
    with pytest.raises(Truncated, match=f"data ends inside token {count - 1}") as err:
        ByteReader(data, order=">", length_bytes=8).strings(count, "token")
    assert err.value.offset == len(data) - 8
    assert err.value.expected == f"{length} bytes"


@pytest.mark.parametrize("count", [5, 100])
def test_strings_with_u64_lengths_cut_inside_a_length_prefix(count: int) -> None:
    data = encode_u64(["ab"] * count) + b"\1\0\0\0\0\0\0"
    with pytest.raises(Truncated, match=f"data ends inside length of token {count}: expected 8 bytes, found 7 bytes") as err:
        ByteReader(data, length_bytes=8).strings(count + 1, "token")
    assert err.value.offset == 10 * count


@pytest.mark.parametrize("count", [5, 100])
def test_strings_with_u64_lengths_and_invalid_utf8_name_the_word_and_offset(count: int) -> None:
    words = [f"w{i}" for i in range(count)]
    data = bytearray(encode_u64(words))
    at = len(encode_u64(words[:3])) + 8 + 1  # second byte of word 3
    data[at] = 0xFF
    with pytest.raises(FormatError, match=r"word 3 is not valid UTF-8") as err:
        ByteReader(bytes(data), length_bytes=8).strings(count)
    assert err.value.offset == at


@pytest.mark.parametrize(("kwargs", "message"), [({"order": "="}, "order must be '<' or '>'"), ({"length_bytes": 2}, "length_bytes must be 4 or 8")])
def test_reader_refuses_other_orders_and_widths(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ByteReader(b"", **kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize("length", [1 << 40, 1 << 63, (1 << 64) - 1])
def test_strings_with_a_huge_u64_length_mid_list_fall_back_to_the_precise_error(length: int) -> None:
    # On the fast path the offsets after such a length leave every index type (OverflowError), not just the buffer.
    words = [f"w{i}" for i in range(100)]
    data = encode_u64(words[:50]) + struct.pack("<Q", length) + encode_u64(words[51:])
    with pytest.raises(Truncated, match="data ends inside token 50") as err:
        ByteReader(data, length_bytes=8).strings(100, "token")
    assert err.value.offset == len(encode_u64(words[:50])) + 8
