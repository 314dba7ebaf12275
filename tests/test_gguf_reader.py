"""GGUF headers: metadata values, tensor infos and every way a header can be malformed, read through the library's cursor."""

from __future__ import annotations

import re
import struct

import numpy as np
import pytest

from _gguf_files import ARRAY, STRING, TOKENS, U32, build, gguf, kv_u32, s
from finalfusion import FormatError, load_gguf
from finalfusion.compat.gguf import read_gguf
from finalfusion.errors import Truncated, UnsupportedVersion


def test_a_hand_built_header_gives_metadata_and_tensor_infos() -> None:
    head = read_gguf(gguf([TOKENS, kv_u32("general.answer", 42)]))
    assert head.kv["general.answer"] == 42
    assert head.tensors["token_embd.weight"].shape == (2, 2)
    assert head.tensors["token_embd.weight"].type_name == "F32"


def test_nested_arrays_are_lists_of_arrays() -> None:
    inner = struct.pack("<IQ", U32, 2) + struct.pack("<II", 1, 2)
    nested = s("general.nested") + struct.pack("<IIQ", ARRAY, ARRAY, 2) + inner + inner
    head = read_gguf(gguf([TOKENS, nested]))
    assert [v.tolist() for v in head.kv["general.nested"]] == [[1, 2], [1, 2]]


def test_a_duplicate_metadata_key_is_refused() -> None:
    data = gguf([TOKENS, kv_u32("general.x", 1), kv_u32("general.x", 2)])
    with pytest.raises(FormatError, match="duplicate metadata key") as err:
        load_gguf(data)
    assert err.value.found == "general.x"


def test_a_metadata_key_that_is_not_utf8_is_refused() -> None:
    with pytest.raises(FormatError, match="metadata key is not valid UTF-8") as err:
        load_gguf(gguf([TOKENS, s(b"general.\xff") + struct.pack("<II", U32, 1)]))
    assert err.value.chunk == "GGUF"


def test_a_tensor_with_more_than_eight_dimensions_is_refused() -> None:
    with pytest.raises(FormatError, match=re.escape("tensor token_embd.weight has too many dimensions")) as err:
        load_gguf(gguf([TOKENS], ne=(1,) * 9))
    assert err.value.found == 9


def test_a_string_array_running_past_the_end_names_the_element() -> None:
    # Two strings declared; the second's length points far past the file's end.
    bad = s("tokenizer.ggml.tokens") + struct.pack("<IIQ", ARRAY, STRING, 2) + s(b"a") + struct.pack("<Q", 1 << 40) + bytes(40)
    with pytest.raises(Truncated, match=re.escape("data ends inside element of tokenizer.ggml.tokens 1")):
        read_gguf(b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + bad)


def test_a_string_array_cut_inside_a_length_names_the_element() -> None:
    bad = s("general.names") + struct.pack("<IIQ", ARRAY, STRING, 2) + s(b"abcdefghijkl") + b"\x01\x00"
    with pytest.raises(Truncated, match=re.escape("data ends inside length of element of general.names 1")):
        read_gguf(b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + bad)


def test_a_hand_built_file_loads() -> None:
    emb = load_gguf(build(), normalize=False)
    assert emb.storage.matrix.tolist() == [[0.0, 1.0], [2.0, 3.0]]


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"GGUX" + bytes(20), "not a GGUF file"),
        (build(version=1), "version"),
        (build(n_tensors=1 << 40), "tensor count is larger"),
        (build(n_kv=1 << 40), "metadata count is larger"),
        (build(ne=(1 << 40, 1 << 40)), "larger than the file"),
        (build(ne=(2, 3)), "runs past the end"),
        (build(offset=4096), "runs past the end"),
        (build(offset=4), "misaligned"),
        (build(ggml_type=99), "unknown ggml type"),
        (build(ggml_type=8), "multiple of the Q8_0 block size"),
        (build(tokens=[b"a", b"b", b"c"]), "does not match"),
        (build(tokens=[b"a", b"a"]), "duplicate"),
        (build(tokens=[b"a", b"\xff"]), "UTF-8"),
        (build(n_tensors=2, extra_tensors=s("token_embd.weight") + struct.pack("<IQQIQ", 2, 2, 2, 0, 0)), "duplicate tensor name"),
        (build(extra_kv=s("general.alignment") + struct.pack("<II", 4, 3)), "power of two"),
        (build(extra_kv=s("general.alignment") + struct.pack("<IQ", 10, 32)), "general.alignment is not a uint32"),  # u64, refused by llama.cpp and gguf-py
        (build(extra_kv=s("general.x") + struct.pack("<I", 77)), "unknown value type"),
        (build(extra_kv=s("general.x") + struct.pack("<IIQ", 9, 8, 1 << 50)), "element count"),
        (build(ne=(2, 2, 2), data=bytes(32)), "not a matrix"),
    ],
)
def test_malformed_headers_are_format_errors(data: bytes, message: str) -> None:
    with pytest.raises(FormatError, match=message) as info:
        load_gguf(data)
    assert info.value.chunk == "GGUF"
    assert info.type.__module__ == "finalfusion.errors"


def test_errors_name_offsets_and_values() -> None:
    with pytest.raises(Truncated) as info:
        load_gguf(build(n_tensors=1 << 40))
    assert (info.value.offset, info.value.found) == (8, 1 << 40)
    with pytest.raises(UnsupportedVersion) as version:
        load_gguf(build(version=1))
    assert version.value.offset == 4
    data = build(offset=4)
    with pytest.raises(FormatError) as misaligned:
        load_gguf(data)
    assert misaligned.value.expected == "a multiple of 32"
    assert misaligned.value.offset == data.index(b"\x11\x00\x00\x00\x00\x00\x00\x00token_embd")


def test_a_missing_tensor_or_vocabulary_is_named() -> None:
    with pytest.raises(FormatError, match=r"no tensor 'output\.weight'"):
        load_gguf(build(), tensor="output.weight")
    no_tokens = build().replace(b"tokenizer.ggml.tokens", b"tokenizer.ggml.tokenZ")
    with pytest.raises(FormatError, match=r"no vocabulary"):
        load_gguf(no_tokens)


# -- byte order and the string lists' fast path ---------------------------------------------------------


def header(order: str, kvs: list[bytes], version: int = 3) -> bytes:
    """A GGUF header without tensors in byte order ``order``."""
    return b"GGUF" + struct.pack(order + "IQQ", version, 0, len(kvs)) + b"".join(kvs)


def metadata(order: str, tokens: list[bytes]) -> list[bytes]:
    """Key-value entries of every value kind, in byte order ``order``."""

    def key(name: str, vtype: int) -> bytes:
        return s(name, order) + struct.pack(order + "I", vtype)

    def array(etype: int, count: int) -> bytes:
        return struct.pack(order + "IQ", etype, count)

    return [
        key("tokenizer.ggml.tokens", ARRAY) + array(STRING, len(tokens)) + b"".join(s(t, order) for t in tokens),
        key("general.alignment", U32) + struct.pack(order + "I", 64),
        key("general.name", STRING) + s("né", order),
        key("general.scale", 6) + struct.pack(order + "f", 0.5),
        key("general.flag", 7) + struct.pack(order + "?", True),
        key("general.big", 10) + struct.pack(order + "Q", 1 << 40),
        key("general.shift", 11) + struct.pack(order + "q", -3),
        key("tokenizer.ggml.scores", ARRAY) + array(6, 3) + struct.pack(order + "3f", -1.0, 0.0, 2.5),
        key("general.ids", ARRAY) + array(10, 2) + struct.pack(order + "2Q", 1, 1 << 50),
        key("general.mask", ARRAY) + array(7, 3) + bytes([1, 0, 1]),
        key("general.nested", ARRAY) + array(ARRAY, 1) + array(5, 2) + struct.pack(order + "2i", -7, 7),
    ]


@pytest.mark.parametrize("n_tokens", [3, 300])  # 300: the fast path of string lists
def test_big_endian_headers_read_like_little_endian_ones(n_tokens: int) -> None:
    tokens = [f"tok{i}".encode() for i in range(n_tokens - 1)] + ["日本".encode()]
    little = read_gguf(header("<", metadata("<", tokens)))
    big = read_gguf(header(">", metadata(">", tokens)))
    assert (little.byte_order, big.byte_order, big.version, big.alignment) == ("<", ">", 3, 64)
    assert big.kv.keys() == little.kv.keys()
    for name, value in little.kv.items():
        other = big.kv[name]
        if isinstance(value, np.ndarray):
            assert other.dtype == value.dtype
            assert other.dtype.isnative
            assert other.tolist() == value.tolist()
        elif name == "general.nested":
            assert [a.tolist() for a in other] == [a.tolist() for a in value] == [[-7, 7]]
        else:
            assert other == value
    assert big.kv["tokenizer.ggml.tokens"][-1] == "日本"
    assert big.kv["general.mask"].tolist() == [True, False, True]
    assert big.kv["general.big"] == 1 << 40


def test_big_endian_header_cut_inside_a_value_names_it() -> None:
    data = header(">", metadata(">", [b"a", b"b"]))
    cut = data.index(b"general.big") + len("general.big") + 4 + 3
    with pytest.raises(Truncated, match=re.escape("GGUF: data ends inside general.big: expected 8 bytes, found 3 bytes")) as err:
        read_gguf(data[:cut])
    assert err.value.offset == cut - 3


@pytest.mark.parametrize(("n_tokens", "bad"), [(5, 3), (300, 170)])  # the per-string loop and the fast path
def test_invalid_utf8_in_a_token_list_keeps_ggufs_message(n_tokens: int, bad: int) -> None:
    tokens = [f"t{i}".encode() for i in range(n_tokens)]
    tokens[bad] = b"x\xff" + b"y" * 50
    data = header("<", [s("tokenizer.ggml.tokens") + struct.pack("<IIQ", ARRAY, STRING, n_tokens) + b"".join(s(t) for t in tokens)])
    at = data.index(b"x\xff") + 1
    found = tokens[bad][:40]
    message = f"GGUF: element of tokenizer.ggml.tokens {bad} is not valid UTF-8: expected UTF-8, found {found!r} (at byte offset {at})"
    with pytest.raises(FormatError, match=re.escape(message)):
        read_gguf(data)
    with pytest.raises(FormatError, match=re.escape(message)):
        read_gguf(bytearray(data))  # a stream's prefix is a bytearray


def test_invalid_utf8_in_a_string_value_keeps_ggufs_message() -> None:
    data = header(">", [s("general.name", ">") + struct.pack(">I", STRING) + s(b"ab\xc3(", ">")])
    at = data.index(b"ab\xc3(") + 2
    message = f"GGUF: general.name is not valid UTF-8: expected UTF-8, found b'ab\\xc3(' (at byte offset {at})"
    with pytest.raises(FormatError, match=re.escape(message)):
        read_gguf(data)


def test_arrays_of_an_unknown_element_type_or_nested_past_the_limit_are_refused() -> None:
    unknown = s("general.x") + struct.pack("<IIQ", ARRAY, 77, 1) + bytes(16)
    with pytest.raises(FormatError, match=r"unknown element type of general\.x") as err:
        read_gguf(header("<", [unknown]))
    assert (err.value.found, err.value.offset) == (77, 24 + len(s("general.x")) + 4)
    deep = s("general.deep") + struct.pack("<I", ARRAY) + struct.pack("<IQ", ARRAY, 1) * 9 + struct.pack("<IQ", U32, 0) + bytes(12)
    with pytest.raises(FormatError, match="arrays nested too deeply") as err:
        read_gguf(header("<", [deep]))
    assert (err.value.expected, err.value.found) == ("at most 8 levels", 9)
