"""Round trips for every vocabulary x storage x norms x metadata, plus Hypothesis fuzzing."""

from __future__ import annotations

import contextlib
import io
import warnings
import zlib
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from finalfusion import (
    Embeddings,
    ExplicitVocab,
    FastTextVocab,
    FinalfusionBucketVocab,
    FloretVocab,
    FormatError,
    Metadata,
    NdArray,
    Norms,
    QuantizedArray,
    SimpleVocab,
    load_finalfusion,
)
from finalfusion.storage import PQ
from finalfusion.subword import ExplicitIndexer, FastTextIndexer, FinalfusionHashIndexer, FloretIndexer
from finalfusion.vocab import Vocab

WORDS = ["Berlin", "", "😀", "naïve", "a b"]

VOCABS: dict[str, Callable[[], Vocab]] = {
    "simple": lambda: SimpleVocab(WORDS),
    "bucket": lambda: FinalfusionBucketVocab(WORDS, FinalfusionHashIndexer(3, 3, 6)),
    "fasttext": lambda: FastTextVocab(WORDS, FastTextIndexer(7, 3, 6)),
    "explicit": lambda: ExplicitVocab(
        WORDS, ExplicitIndexer(["<Be", "Ber", "lin>", "<😀>", "aïv"], 3, 6, {"<Be": 0, "Ber": 1, "lin>": 0, "<😀>": 2, "aïv": 3})
    ),
    "floret": lambda: FloretVocab(FloretIndexer(9, 3, 6, n_hashes=3, seed=42)),
}


def make_storage(kind: str, rows: int, rng: np.random.Generator) -> NdArray | QuantizedArray:
    d = 4
    if kind == "ndarray":
        return NdArray(rng.standard_normal((rows, d)).astype(np.float32))
    quantizers = rng.standard_normal((2, 3, 2)).astype(np.float32)
    projection = rng.standard_normal((d, d)).astype(np.float32) if "proj" in kind else None
    codes = rng.integers(0, 3, size=(rows, 2)).astype(np.uint8)
    qnorms = rng.random(rows).astype(np.float32) + 0.5 if "norms" in kind else None
    return QuantizedArray(PQ(quantizers, projection), codes, qnorms)


STORAGES = ["ndarray", "pq", "pq-proj", "pq-norms", "pq-proj-norms"]


def make_embeddings(vocab_kind: str, storage_kind: str, with_norms: bool, with_meta: bool) -> Embeddings:
    rng = np.random.default_rng(zlib.crc32(f"{vocab_kind}-{storage_kind}".encode()))
    vocab = VOCABS[vocab_kind]()
    storage = make_storage(storage_kind, vocab.upper_bound, rng)
    norms = Norms(rng.random(len(vocab)).astype(np.float32)) if with_norms else None
    meta = Metadata({"name": "test", "dims": 4, "nested": {"x": [1, 2], "ü": 1.5}}) if with_meta else None
    return Embeddings(storage, vocab, norms, meta)


def assert_same_chunks(a: Embeddings, b: Embeddings) -> None:
    ca, cb = a.chunks(), b.chunks()
    assert [type(c) for c in ca] == [type(c) for c in cb]
    for x, y in zip(ca, cb, strict=True):
        assert x == y, type(x).__name__


@pytest.mark.parametrize("with_meta", [False, True], ids=["nometa", "meta"])
@pytest.mark.parametrize("with_norms", [False, True], ids=["nonorms", "norms"])
@pytest.mark.parametrize("storage_kind", STORAGES)
@pytest.mark.parametrize("vocab_kind", list(VOCABS))
def test_roundtrip(vocab_kind: str, storage_kind: str, with_norms: bool, with_meta: bool, tmp_path: Path) -> None:
    emb = make_embeddings(vocab_kind, storage_kind, with_norms, with_meta)
    path = tmp_path / "emb.fifu"
    emb.write(path)
    buf = io.BytesIO()
    emb.write(buf)
    data = path.read_bytes()
    assert buf.getvalue() == data
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for source in (path, str(path), data):
            for mmap in (False, True):
                back = load_finalfusion(source, mmap=mmap)
                assert_same_chunks(emb, back)
                again = io.BytesIO()
                back.write(again)
                assert again.getvalue() == data
                for w in [*WORDS, "Berliner", "zz"]:
                    e1, e2 = emb.embedding(w), back.embedding(w)
                    assert (e1 is None) == (e2 is None)
                    if e1 is not None:
                        np.testing.assert_array_equal(e1, e2)


def test_roundtrip_detects_change() -> None:
    a = make_embeddings("simple", "ndarray", False, False)
    b = make_embeddings("simple", "ndarray", False, False)
    np.asarray(b.storage)[0, 0] += 1  # type: ignore[index]
    with pytest.raises(AssertionError):
        assert_same_chunks(a, b)


unique_words = st.lists(st.text(max_size=12), unique=True, max_size=20).map(lambda ws: ["", "😀", *[w for w in ws if w not in ("", "😀")]])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(words=unique_words, dims=st.integers(1, 5), seed=st.integers(0, 2**32 - 1), with_norms=st.booleans())
def test_hypothesis_roundtrip(words: list[str], dims: int, seed: int, with_norms: bool) -> None:
    rng = np.random.default_rng(seed)
    matrix = rng.standard_normal((len(words), dims)).astype(np.float32)
    matrix[0, 0] = np.float32(np.inf) if seed % 7 == 0 else matrix[0, 0]
    norms = Norms(rng.random(len(words)).astype(np.float32)) if with_norms else None
    emb = Embeddings(NdArray(matrix), SimpleVocab(words), norms)
    buf = io.BytesIO()
    emb.write(buf)
    data = buf.getvalue()
    for mmap in (False, True):
        back = load_finalfusion(data, mmap=mmap)
        assert back.vocab.words == words
        np.testing.assert_array_equal(np.asarray(back.storage), matrix)
        again = io.BytesIO()
        back.write(again)
        assert again.getvalue() == data


def _load_or_format_error(data: bytes) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for mmap in (False, True):
            with contextlib.suppress(FormatError):
                load_finalfusion(data, mmap=mmap)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
def test_random_bytes(data: bytes) -> None:
    _load_or_format_error(data)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
def test_random_bytes_after_magic(data: bytes) -> None:
    _load_or_format_error(b"FiFu\x00\x00\x00\x00" + data)


_VALID = {}
for _v in ("simple", "bucket", "explicit", "floret"):
    _buf = io.BytesIO()
    make_embeddings(_v, "pq-proj-norms" if _v == "simple" else "ndarray", _v != "floret", True).write(_buf)
    _VALID[_v] = _buf.getvalue()


@settings(max_examples=300, deadline=None)
@given(kind=st.sampled_from(sorted(_VALID)), flips=st.lists(st.tuples(st.integers(0, 10**6), st.integers(1, 255)), min_size=1, max_size=4))
def test_random_byte_flips(kind: str, flips: list[tuple[int, int]]) -> None:
    data = bytearray(_VALID[kind])
    for pos, x in flips:
        data[pos % len(data)] ^= x
    _load_or_format_error(bytes(data))


@pytest.mark.parametrize(
    "words",
    [
        ["", "a", "ü", "語", "😀", "b"],  # an empty string before a separator
        ["a\x00b", "\x00", "c"],  # NUL inside words: per-word fallback
        [f"w{i}é" if i % 3 else f"w{i}" for i in range(70_000)],  # more than one write slice
        ["only"],
    ],
    ids=["empty", "nul", "slices", "single"],
)
def test_word_list_serialisation_round_trips(words: list[str]) -> None:
    from finalfusion.vocab.base import _join_strings, serialize_strings

    assert serialize_strings(words) == _join_strings([w.encode("utf-8") for w in words])
    assert serialize_strings(["", "", "x", ""]) == _join_strings([b"", b"", b"x", b""])
    emb = Embeddings(NdArray(np.zeros((len(words), 2), np.float32)), SimpleVocab(words))
    buf = io.BytesIO()
    emb.write(buf)
    assert load_finalfusion(buf.getvalue()).vocab.words == words


@pytest.mark.parametrize("quantized", [False, True])
def test_explicit_numbering_not_by_first_appearance_is_renumbered_on_write(quantized: bool) -> None:
    """Files number n-gram rows by first appearance (docs/format.md §5.8): other dense numbers are renumbered, rows permuted."""
    from finalfusion._binary import ByteWriter

    ngrams = ["<ab", "ab>", "<a", "b>", "zab", "ab"]
    indexer = ExplicitIndexer(ngrams, 2, 3, {"<ab": 2, "ab>": 0, "<a": 2, "b>": 1, "zab": 3, "ab": 0})  # first appearance: 2, 0, 1, 3
    assert indexer.first_noncanonical() is not None
    vocab = ExplicitVocab(["ab", "xy"], indexer)
    rng = np.random.default_rng(0)
    matrix = rng.standard_normal((2 + 4, 4)).astype(np.float32)
    if quantized:
        codes = rng.integers(0, 4, (6, 2), dtype=np.uint8)
        storage: NdArray | QuantizedArray = QuantizedArray(
            PQ(rng.standard_normal((2, 4, 2)).astype(np.float32), None), codes, rng.uniform(0.5, 2, 6).astype(np.float32)
        )
    else:
        storage = NdArray(matrix)
    emb = Embeddings(storage, vocab)
    with pytest.raises(ValueError, match="first appearance"):
        vocab.write_payload(ByteWriter(io.BytesIO()))  # a lone chunk cannot be renumbered
    buf = io.BytesIO()
    emb.write(buf)
    back = load_finalfusion(buf.getvalue())
    assert back.vocab.subword_indexer.first_noncanonical() is None
    assert back.vocab.subword_indexer.ngram_index == {"<ab": 0, "ab>": 1, "<a": 0, "b>": 2, "zab": 3, "ab": 1}
    for word in ["ab", "xy", "zab", "<ab", "abab", "b"]:
        a, b = emb.embedding(word), back.embedding(word)
        assert (a is None) == (b is None), word
        if a is not None:
            np.testing.assert_array_equal(a, b)
    assert emb.vocab.subword_indexer.first_noncanonical() is not None  # the embeddings themselves are unchanged
