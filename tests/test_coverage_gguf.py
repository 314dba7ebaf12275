"""GGUF files built by hand: nested arrays, metadata and tokenizer errors, HF tokenizers in the metadata, write options."""

from __future__ import annotations

import io
import json
import re
import struct

import numpy as np
import pytest

from finalfusion import Embeddings, FormatError, load_gguf, write_gguf
from finalfusion.compat.gguf import read_gguf
from finalfusion.errors import Truncated
from finalfusion.storage import NdArray
from finalfusion.vocab import HuggingFaceTokenizer, SimpleVocab, TokenizerVocab

U32, STRING, ARRAY = 4, 8, 9


def s(text: str | bytes) -> bytes:
    raw = text.encode() if isinstance(text, str) else text
    return struct.pack("<Q", len(raw)) + raw


def kv_string(key: str | bytes, value: str) -> bytes:
    return s(key) + struct.pack("<I", STRING) + s(value)


def kv_u32(key: str, value: int) -> bytes:
    return s(key) + struct.pack("<II", U32, value)


def kv_strings(key: str, values: list[bytes]) -> bytes:
    return s(key) + struct.pack("<IIQ", ARRAY, STRING, len(values)) + b"".join(s(v) for v in values)


TOKENS = kv_strings("tokenizer.ggml.tokens", [b"a", b"b"])


def gguf(kvs: list[bytes], ne: tuple[int, ...] = (2, 2), data: bytes | None = None) -> bytes:
    """A GGUF file (version 3, one F32 tensor token_embd.weight) with the given key-value entries."""
    info = s("token_embd.weight") + struct.pack("<I", len(ne)) + b"".join(struct.pack("<Q", d) for d in ne) + struct.pack("<IQ", 0, 0)
    head = b"GGUF" + struct.pack("<IQQ", 3, 1, len(kvs)) + b"".join(kvs) + info
    head += b"\x00" * (-len(head) % 32)
    return head + (np.arange(4, dtype="<f4").tobytes() if data is None else data)


def test_hand_built_file_and_tensor_shape() -> None:
    head = read_gguf(gguf([TOKENS, kv_u32("general.answer", 42)]))
    assert head.kv["general.answer"] == 42
    assert head.tensors["token_embd.weight"].shape == (2, 2)
    assert head.tensors["token_embd.weight"].type_name == "F32"


def test_nested_arrays() -> None:
    inner = struct.pack("<IQ", U32, 2) + struct.pack("<II", 1, 2)
    nested = s("general.nested") + struct.pack("<IIQ", ARRAY, ARRAY, 2) + inner + inner
    head = read_gguf(gguf([TOKENS, nested]))
    assert [v.tolist() for v in head.kv["general.nested"]] == [[1, 2], [1, 2]]


def test_duplicate_metadata_key() -> None:
    data = gguf([TOKENS, kv_u32("general.x", 1), kv_u32("general.x", 2)])
    with pytest.raises(FormatError, match="duplicate metadata key") as err:
        load_gguf(data)
    assert err.value.found == "general.x"


def test_metadata_key_not_utf8() -> None:
    with pytest.raises(FormatError, match="metadata key is not valid UTF-8") as err:
        load_gguf(gguf([TOKENS, s(b"general.\xff") + struct.pack("<II", U32, 1)]))
    assert err.value.chunk == "GGUF"


def test_too_many_dimensions() -> None:
    with pytest.raises(FormatError, match=re.escape("tensor token_embd.weight has too many dimensions")) as err:
        load_gguf(gguf([TOKENS], ne=(1,) * 9))
    assert err.value.found == 9


def test_string_array_runs_past_the_end() -> None:
    # Two strings declared; the second's length points far past the file's end.
    bad = s("tokenizer.ggml.tokens") + struct.pack("<IIQ", ARRAY, STRING, 2) + s(b"a") + struct.pack("<Q", 1 << 40) + bytes(40)
    with pytest.raises(Truncated, match=re.escape("data ends inside element of tokenizer.ggml.tokens 1")):
        read_gguf(b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + bad)


def test_string_array_cut_inside_a_length() -> None:
    bad = s("general.names") + struct.pack("<IIQ", ARRAY, STRING, 2) + s(b"abcdefghijkl") + b"\x01\x00"
    with pytest.raises(Truncated, match=re.escape("data ends inside length of element of general.names 1")):
        read_gguf(b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + bad)


def test_tokens_not_strings() -> None:
    with pytest.raises(FormatError, match=re.escape("tokenizer.ggml.tokens is not a list of strings")) as err:
        load_gguf(gguf([kv_u32("tokenizer.ggml.tokens", 2)]))
    assert err.value.found == "int"


def test_no_vocabulary() -> None:
    with pytest.raises(FormatError, match=r"no vocabulary \(tokenizer.ggml.tokens\)") as err:
        load_gguf(gguf([kv_u32("general.x", 2)]))
    assert err.value.found == ["general.x"]


def test_gpt2_merges_not_strings() -> None:
    data = gguf([TOKENS, kv_string("tokenizer.ggml.model", "gpt2"), kv_u32("tokenizer.ggml.merges", 3)])
    with pytest.raises(FormatError, match=re.escape("tokenizer.ggml.merges is not a list of strings")):
        load_gguf(data)


def test_token_types_not_numeric() -> None:
    data = gguf([TOKENS, kv_string("tokenizer.ggml.model", "gpt2"), kv_string("tokenizer.ggml.token_type", "normal")])
    with pytest.raises(FormatError, match=re.escape("tokenizer.ggml.token_type is not a numeric array")) as err:
        load_gguf(data)
    assert err.value.found == "str"


def test_token_types_wrong_length() -> None:
    types = s("tokenizer.ggml.token_type") + struct.pack("<IIQ", ARRAY, 5, 3) + struct.pack("<iii", 1, 1, 1)
    data = gguf([TOKENS, kv_string("tokenizer.ggml.model", "gpt2"), types])
    with pytest.raises(FormatError, match=re.escape("tokenizer.ggml.token_type does not match the token list")) as err:
        load_gguf(data)
    assert err.value.expected == "2 entries"
    assert err.value.found == 3


def test_huggingface_tokenizer_in_the_metadata() -> None:
    doc = json.dumps({"model": {"type": "WordLevel", "vocab": {"a": 0, "b": 1}, "unk_token": "a"}})
    emb = load_gguf(gguf([TOKENS, kv_string("tokenizer.huggingface.json", doc)]), normalize=False)
    assert isinstance(emb.vocab, TokenizerVocab)
    assert emb.vocab.tokenizer == HuggingFaceTokenizer(doc)
    assert emb.storage.matrix.tolist() == [[0.0, 1.0], [2.0, 3.0]]


def test_write_gguf_rejects_other_dtypes() -> None:
    emb = Embeddings(NdArray(np.eye(2, dtype=np.float32)), SimpleVocab(["a", "b"]))
    with pytest.raises(ValueError, match="dtype must be 'F32' or 'F16', got 'Q8_0'"):
        write_gguf(io.BytesIO(), emb, dtype="Q8_0")


def test_write_gguf_f16_round_trip() -> None:
    emb = Embeddings(NdArray(np.array([[0.5, 1.0], [2.0, -4.0]], dtype=np.float32)), SimpleVocab(["a", "b"]))
    buf = io.BytesIO()
    write_gguf(buf, emb, dtype="F16")
    loaded = load_gguf(buf.getvalue(), normalize=False)
    assert loaded.metadata is not None
    assert loaded.metadata["gguf"]["type"] == "F16"
    assert loaded.vocab.words == ["a", "b"]
    np.testing.assert_array_equal(loaded.storage.matrix, emb.storage.matrix)
