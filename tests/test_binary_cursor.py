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


@pytest.mark.parametrize(
    "words",
    [
        [f"w{i}" for i in range(100)],
        ["", "ä", "日本", "😀", *[f"{i}x" for i in range(70)]],
        [ALL_ASCII, *[f"w{i}" for i in range(70)]],  # no free separator byte: the per-string loop
        [f"w{i}" for i in range(5)],  # few words: the per-string loop
    ],
)
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
