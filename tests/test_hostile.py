"""Hand-built malformed headers and chunks: each must raise the right FormatError, quickly."""

from __future__ import annotations

import struct
from collections.abc import Callable

import numpy as np
import pytest

import finalfusion
from finalfusion import BadMagic, ChunkOrder, FormatError, Truncated, UnknownChunk, UnsupportedVersion, load_finalfusion

Payload = bytes | Callable[[int], bytes]


def u32(*v: int) -> bytes:
    return struct.pack(f"<{len(v)}I", *v)


def u64(*v: int) -> bytes:
    return struct.pack(f"<{len(v)}Q", *v)


def string(raw: bytes | str) -> bytes:
    b = raw.encode("utf-8") if isinstance(raw, str) else raw
    return u32(len(b)) + b


def pad(at: int) -> bytes:
    return b"\x00" * (4 - at % 4)


def simple_vocab(words: list[bytes | str], n_words: int | None = None) -> bytes:
    return u64(len(words) if n_words is None else n_words) + b"".join(string(w) for w in words)


def bucket_vocab(words: list[str], min_n: int = 3, max_n: int = 6, exp_or_buckets: int = 2) -> bytes:
    return u64(len(words)) + u32(min_n, max_n, exp_or_buckets) + b"".join(string(w) for w in words)


def ndarray(rows: int, cols: int, type_id: int = 10, data_rows: int | None = None) -> Callable[[int], bytes]:
    def build(at: int) -> bytes:
        n = rows if data_rows is None else data_rows
        return u64(rows) + u32(cols, type_id) + pad(at + 16) + np.arange(n * cols, dtype="<f4").tobytes()

    return build


def norms(n: int) -> Callable[[int], bytes]:
    def build(at: int) -> bytes:
        return u64(n) + u32(10) + pad(at + 12) + np.ones(n, dtype="<f4").tobytes()

    return build


def quantized(q: int, d: int, k: int, r: int, codes: np.ndarray | None = None) -> Callable[[int], bytes]:
    def build(at: int) -> bytes:
        head = u32(0, 0, q, d, k) + u64(r) + u32(1, 10)
        n_cent = q * k * (d // q) if q and d % q == 0 else 0
        c = np.zeros((r, q), dtype=np.uint8) if codes is None else codes
        return head + pad(at + 36) + np.zeros(n_cent, dtype="<f4").tobytes() + c.astype(np.uint8).tobytes()

    return build


def build(chunks: list[tuple[int, Payload]], header_ids: list[int] | None = None, *, length_delta: dict[int, int] | None = None) -> bytes:
    """A file with a header (listing ``header_ids`` or the chunk ids) and framed chunks."""
    ids = [cid for cid, _ in chunks] if header_ids is None else header_ids
    out = b"FiFu" + u32(0, len(ids), *ids)
    for i, (cid, payload) in enumerate(chunks):
        body = payload(len(out) + 12) if callable(payload) else payload
        declared = len(body) + (length_delta or {}).get(i, 0)
        out += u32(cid) + u64(declared) + body
    return out


def valid_simple() -> bytes:
    return build([(1, simple_vocab(["a", "b"])), (2, ndarray(2, 3))])


def test_builders_make_valid_files() -> None:
    emb = load_finalfusion(valid_simple())
    assert emb.vocab.words == ["a", "b"]
    assert emb["b"].tolist() == [3.0, 4.0, 5.0]
    emb = load_finalfusion(build([(3, bucket_vocab(["ab"], exp_or_buckets=2)), (2, ndarray(5, 2)), (6, norms(1))]))
    assert emb.storage.shape == (5, 2)
    emb = load_finalfusion(build([(1, simple_vocab(["a"])), (4, quantized(2, 4, 3, 1, np.array([[2, 1]])))]))
    assert emb.storage.shape == (1, 4)


def case(name: str, data: bytes, exc: type[FormatError], chunk: str, offset: bool = True) -> object:
    return pytest.param(data, exc, chunk, offset, id=name)


CASES = [
    case("bad-magic", b"FiFx" + valid_simple()[4:], BadMagic, "header"),
    case("version-1", b"FiFu" + u32(1) + valid_simple()[8:], UnsupportedVersion, "header"),
    case("n-chunks-0", b"FiFu" + u32(0, 0) + valid_simple()[12:], FormatError, "header"),
    case("n-chunks-huge", b"FiFu" + u32(0, 2**32 - 1, 1, 2), Truncated, "header"),
    case("unknown-id-0-in-header", build([(1, simple_vocab(["a"])), (2, ndarray(1, 1))], [0, 2]), UnknownChunk, "header"),
    case("unknown-id-10-in-header", build([(1, simple_vocab(["a"])), (2, ndarray(1, 1))], [1, 10]), UnknownChunk, "header"),
    case("unknown-id-10-in-stream", build([(1, simple_vocab(["a"])), (10, b"")], [1, 2]), UnknownChunk, "chunk"),
    case("storage-before-vocab", build([(2, ndarray(1, 1)), (1, simple_vocab(["a"]))]), ChunkOrder, "header"),
    case("stream-order-differs", build([(2, ndarray(1, 1)), (1, simple_vocab(["a"]))], [1, 2]), ChunkOrder, "header"),
    case("header-disagrees", build([(3, bucket_vocab(["a"], exp_or_buckets=1)), (2, ndarray(3, 1))], [1, 2]), ChunkOrder, "header"),
    case("length-past-end", build([(1, simple_vocab(["a"])), (2, ndarray(1, 1))], length_delta={1: 1}), Truncated, "NdArray"),
    case("length-plus-1", build([(1, simple_vocab(["a"])), (2, ndarray(1, 1))], length_delta={0: 1}), FormatError, "SimpleVocab"),
    case("length-minus-1", build([(1, simple_vocab(["a"])), (2, ndarray(1, 1))], length_delta={0: -1}), FormatError, "SimpleVocab"),
    case("ndarray-type-1", build([(1, simple_vocab(["a"])), (2, ndarray(1, 1, type_id=1))]), FormatError, "NdArray"),
    case("ndarray-2**40-rows", build([(1, simple_vocab(["a"])), (2, ndarray(2**40, 1, data_rows=1))]), Truncated, "NdArray"),
    case("simple-vocab-2**60-words", build([(1, simple_vocab(["a"], n_words=2**60)), (2, ndarray(1, 1))]), Truncated, "SimpleVocab"),
    case("duplicate-words", build([(1, simple_vocab(["a", "a"])), (2, ndarray(2, 1))]), FormatError, "SimpleVocab"),
    case("bucket-exponent-64", build([(3, bucket_vocab(["a"], exp_or_buckets=64)), (2, ndarray(1, 1))]), FormatError, "BucketVocab"),
    case("fasttext-0-buckets", build([(7, bucket_vocab(["a"], exp_or_buckets=0)), (2, ndarray(1, 1))]), FormatError, "FastTextVocab"),
    case("bucket-min-n-0", build([(3, bucket_vocab(["a"], min_n=0, exp_or_buckets=1)), (2, ndarray(3, 1))]), FormatError, "BucketVocab"),
    case(
        "floret-5-hashes",
        build([(9, u32(3, 6) + u64(10) + u32(5, 0) + string("<") + string(">")), (2, ndarray(10, 1))]),
        FormatError,
        "FloretVocab",
    ),
    case("quantized-q-0", build([(1, simple_vocab(["a"])), (4, quantized(0, 4, 2, 1))]), FormatError, "QuantizedArray"),
    case("quantized-d-mod-q", build([(1, simple_vocab(["a"])), (4, quantized(3, 4, 2, 1))]), FormatError, "QuantizedArray"),
    case("quantized-code-too-big", build([(1, simple_vocab(["a"])), (4, quantized(2, 4, 3, 1, np.array([[0, 3]])))]), FormatError, "QuantizedArray"),
    case("storage-rows-mismatch", build([(1, simple_vocab(["a", "b"])), (2, ndarray(3, 1))]), FormatError, "NdArray"),
    case("bucket-storage-rows-mismatch", build([(3, bucket_vocab(["a"], exp_or_buckets=2)), (2, ndarray(4, 1))]), FormatError, "NdArray"),
    case("norms-count", build([(1, simple_vocab(["a", "b"])), (2, ndarray(2, 1)), (6, norms(3))]), FormatError, "Norms"),
    case("invalid-toml", build([(5, b"dims = = 3\n"), (1, simple_vocab(["a"])), (2, ndarray(1, 1))]), FormatError, "Metadata"),
    case("metadata-bad-utf8", build([(5, b'x = "\xff"\n'), (1, simple_vocab(["a"])), (2, ndarray(1, 1))]), FormatError, "Metadata"),
    case("trailing-garbage", valid_simple() + b"\x00\x01\x02", FormatError, "chunk"),
    case("trailing-garbage-long", valid_simple() + b"\x01" * 16, FormatError, "chunk"),
]


@pytest.mark.parametrize("mmap", [False, True], ids=["eager", "mmap"])
@pytest.mark.parametrize(("data", "exc", "chunk", "has_offset"), CASES)
def test_hostile(data: bytes, exc: type[FormatError], chunk: str, has_offset: bool, mmap: bool) -> None:
    with pytest.raises(exc) as info:
        load_finalfusion(data, mmap=mmap)
    err = info.value
    assert isinstance(err, FormatError)
    assert isinstance(err, ValueError)
    assert isinstance(err, finalfusion.FinalfusionError)
    text = str(err)
    assert chunk.lower() in text.lower(), text
    assert err.expected is not None, text  # names what was expected ...
    assert err.found is not None, text  # ... and what was found
    if has_offset:
        assert isinstance(err.offset, int), text
        assert 0 <= err.offset <= len(data), text
        assert "byte offset" in text, text


def test_invalid_utf8_word_reports_offset() -> None:
    vocab = simple_vocab(["ok", b"zee\xbfn"])
    data = build([(1, vocab), (2, ndarray(2, 1))])
    word_at = data.index(b"zee\xbfn")
    for mmap in (False, True):
        with pytest.raises(FormatError) as info:
            load_finalfusion(data, mmap=mmap)
        err = info.value
        assert "UTF-8" in str(err)
        assert isinstance(err.offset, int)
        assert word_at - 4 <= err.offset <= word_at + 3, (err.offset, word_at)
        assert "SimpleVocab" in str(err)
        assert "byte offset" in str(err)


def test_truncated_header_list_is_fast() -> None:
    # 2**32-1 chunk ids cannot fit in 20 bytes; the reader must not loop over them.
    data = b"FiFu" + u32(0, 2**32 - 1, 1, 2)
    with pytest.raises(Truncated) as info:
        load_finalfusion(data)
    assert info.value.offset is not None


def test_declared_length_too_large_by_one_mid_file() -> None:
    # +1 on the vocab makes the reader skip a byte that belongs to the NdArray frame.
    base = build([(1, simple_vocab(["a"])), (2, ndarray(1, 1))])
    bad = build([(1, simple_vocab(["a"])), (2, ndarray(1, 1))], length_delta={0: 1})
    assert len(base) == len(bad)
    load_finalfusion(base)
    with pytest.raises(FormatError, match="length"):
        load_finalfusion(bad)
