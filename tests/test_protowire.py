"""The protobuf wire reader: every field accessor, merging, unpacked floats, and the FormatErrors of malformed bytes."""

from __future__ import annotations

import io
import struct

import numpy as np
import pytest

from _model_helpers import varint
from finalfusion import FormatError
from finalfusion._stream import StreamReader
from finalfusion.compat._protowire import parse_message, stream_varint
from finalfusion.errors import Truncated


def key(number: int, wire: int) -> bytes:
    return varint(number << 3 | wire)


def ld(number: int, payload: bytes) -> bytes:
    return key(number, 2) + varint(len(payload)) + payload


def f32(number: int, value: float) -> bytes:
    return key(number, 5) + struct.pack("<f", value)


def test_scalars_last_occurrence_wins_and_defaults() -> None:
    data = key(1, 0) + varint(5) + key(1, 0) + varint(7) + f32(2, 1.5) + f32(2, 2.5) + key(3, 1) + struct.pack("<Q", 9) + ld(4, b"hi")
    msg = parse_message(data, "demo")
    assert msg.varint(1) == 7
    assert msg.float32(2) == 2.5
    assert 3 in msg
    assert 9 not in msg
    assert msg.wires(3) == {1}
    assert msg.wires(9) == set()
    assert msg.varint(9, default=-3) == -3
    assert msg.float32(9, default=0.25) == 0.25
    assert msg.blob(9) is None
    assert msg.span(4) == (len(data) - 2, len(data))
    assert msg.messages(9) == []
    assert msg.message(9, "none") is None
    assert msg.first_offset(2) == len(key(1, 0) + varint(5)) * 2
    assert msg.first_offset(9) == 0


def test_negative_varint_is_signed() -> None:
    msg = parse_message(key(1, 0) + varint((1 << 64) - 2), "demo")
    assert msg.varint(1) == -2


def test_wrong_wire_type() -> None:
    msg = parse_message(ld(1, b"x"), "demo")
    with pytest.raises(FormatError, match="field 1 has the wrong wire type") as err:
        msg.varint(1)
    assert err.value.expected == "a varint"
    assert err.value.found == "wire types [2]"
    assert err.value.offset == 0


def test_repeated_message_is_merged() -> None:
    data = ld(1, key(1, 0) + varint(1) + ld(2, b"a")) + ld(1, key(1, 0) + varint(2) + key(3, 0) + varint(4))
    msg = parse_message(data, "demo")
    assert len(msg.messages(1)) == 2
    inner = msg.message(1, "inner")
    assert inner is not None
    assert inner.varint(1) == 2
    assert inner.blob(2) == b"a"
    assert inner.varint(3) == 4
    limited = msg.message(1, "inner", wanted={3})
    assert limited is not None
    assert 1 not in limited
    assert limited.varint(3) == 4


def test_floats_packed_unpacked_and_mixed() -> None:
    packed = np.array([1, 2, 3], dtype="<f4").tobytes()
    msg = parse_message(ld(1, packed), "demo")
    assert msg.floats(1).tolist() == [1.0, 2.0, 3.0]
    assert msg.float_count(1) == 3
    unpacked = b"".join(f32(1, v) for v in (4.0, 5.0))
    assert parse_message(unpacked, "demo").floats(1).tolist() == [4.0, 5.0]
    mixed = parse_message(ld(1, packed) + f32(1, 6.0), "demo")
    assert mixed.floats(1).tolist() == [1.0, 2.0, 3.0, 6.0]
    assert mixed.float_count(1) == 4
    assert parse_message(b"", "demo").floats(1).tolist() == []
    assert parse_message(b"", "demo").float_count(1) == 0


def test_packed_floats_not_a_multiple_of_four() -> None:
    msg = parse_message(ld(1, b"12345"), "demo")
    with pytest.raises(FormatError, match="packed floats of field 1 are not a multiple of 4 bytes") as err:
        msg.floats(1)
    assert err.value.offset == 2
    assert err.value.found == "5 bytes"


@pytest.mark.parametrize(
    ("data", "error", "message", "offset"),
    [
        (b"\x80", Truncated, "the data ends inside a varint", 0),
        (b"\x08" + b"\xff" * 10 + b"\x01", FormatError, "a varint is longer than 10 bytes", 1),
        (b"\x08" + b"\xff" * 9 + b"\x7f", FormatError, "a varint overflows 64 bits", 1),
        (b"\x00", FormatError, "invalid field number", 0),
        (key(1, 3), FormatError, "unsupported wire type of field 1", 0),
        (key(1, 5) + b"\x00\x00", Truncated, "field 1 runs past the end of its message", 1),
        (key(2, 1) + b"\x00" * 7, Truncated, "field 2 runs past the end of its message", 1),
        (key(1, 2) + b"\x05ab", Truncated, "field 1 runs past the end of its message", 2),
    ],
)
def test_malformed_messages_name_what_and_where(data: bytes, error: type[FormatError], message: str, offset: int) -> None:
    with pytest.raises(error, match=message) as err:
        parse_message(data, "demo")
    assert err.value.offset == offset
    assert err.value.chunk == "demo"


def test_field_number_above_the_protobuf_limit() -> None:
    with pytest.raises(FormatError, match="invalid field number") as err:
        parse_message(varint((1 << 29) << 3), "demo")
    assert err.value.found == 1 << 29


def test_unwanted_fields_are_checked_then_skipped() -> None:
    msg = parse_message(ld(1, b"x") + key(2, 0) + varint(3), "demo", wanted={2})
    assert 1 not in msg
    assert msg.varint(2) == 3
    with pytest.raises(Truncated):
        parse_message(ld(1, b"x")[:-1], "demo", wanted={2})


def test_a_sub_range_is_parsed_with_file_offsets() -> None:
    data = b"junk" + key(1, 0) + varint(42) + b"more"
    msg = parse_message(data, "demo", 4, 6)
    assert msg.varint(1) == 42
    assert msg.first_offset(1) == 4


@pytest.mark.parametrize(
    ("data", "error", "message"),
    [
        (b"\x80", Truncated, "the data ends inside a varint"),
        (b"\xff" * 10 + b"\x01", FormatError, "a varint is longer than 10 bytes"),
        (b"\xff" * 9 + b"\x7f", FormatError, "a varint overflows 64 bits"),
    ],
)
def test_a_stream_varint_fails_as_a_buffer_varint_at_the_streams_offset(data: bytes, error: type[FormatError], message: str) -> None:
    stream = StreamReader(io.BytesIO(b"\x08" + data))
    assert stream_varint(stream, "demo") == (8, b"\x08")
    with pytest.raises(error, match=message) as err:
        stream_varint(stream, "demo")
    assert err.value.offset == 1
    with pytest.raises(error, match=message):
        parse_message(b"\x08" + data, "demo")


def test_a_stream_varint_gives_back_what_it_read_ahead() -> None:
    stream = StreamReader(io.BytesIO(varint(300) + b"rest"))
    assert stream_varint(stream, "demo") == (300, varint(300))
    assert stream.pos == 2
    assert stream.read_upto(10) == b"rest"
    assert stream_varint(stream, "demo", eof_ok=True) is None
    with pytest.raises(Truncated, match="the data ends inside a varint"):
        stream_varint(stream, "demo")
