"""Hand-built GGUF files for the reader, tokenizer and writer tests, to set or corrupt one field at a time."""

from __future__ import annotations

import struct

import numpy as np

#: GGUF metadata value types used here (gguf-py's GGUFValueType).
U32, STRING, ARRAY = 4, 8, 9


def s(text: str | bytes, order: str = "<") -> bytes:
    """A GGUF string: u64 byte length, UTF-8 bytes."""
    raw = text.encode() if isinstance(text, str) else text
    return struct.pack(order + "Q", len(raw)) + raw


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


def build(
    *,
    tokens: list[bytes] | None = None,
    ne: tuple[int, ...] = (2, 2),
    ggml_type: int = 0,
    offset: int = 0,
    n_tensors: int | None = None,
    n_kv: int | None = None,
    version: int = 3,
    extra_kv: bytes = b"",
    extra_tensors: bytes = b"",
    data: bytes | None = None,
) -> bytes:
    """A small GGUF built by hand, to corrupt one field at a time."""
    tokens = [b"a", b"b"] if tokens is None else tokens
    kvs = s("tokenizer.ggml.tokens") + struct.pack("<IIQ", 9, 8, len(tokens)) + b"".join(s(t) for t in tokens) + extra_kv
    count_kv = 1 + (extra_kv.count(b"general.") if extra_kv else 0)
    info = s("token_embd.weight") + struct.pack("<I", len(ne)) + b"".join(struct.pack("<Q", d) for d in ne) + struct.pack("<IQ", ggml_type, offset)
    head = b"GGUF" + struct.pack("<IQQ", version, 1 if n_tensors is None else n_tensors, count_kv if n_kv is None else n_kv) + kvs + info + extra_tensors
    head += b"\x00" * (-len(head) % 32)
    return head + (np.arange(4, dtype="<f4").tobytes() if data is None else data)
