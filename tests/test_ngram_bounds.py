"""Bounded n-gram work (issue 13, classes 2 and 5): absurd n-gram lengths, long words, cache memory.

Every reader that reads ``min_n``/``max_n`` refuses ``max_n`` past
:data:`finalfusion.limits.MAX_NGRAM_LEN`; a fastText dictionary word with more
n-grams than :data:`finalfusion.limits.MAX_NGRAMS_PER_WORD` is a ``FormatError``;
every lookup path of a longer unknown word raises ``LimitExceeded``; shorter
long words get the same answer as before in bounded memory (blocked hashing,
blocked row sums); caches are bounded in bytes. Each check runs in a forked
child under an address-space limit (``tests/_bounded.py``); no wall-clock
assertions.
"""

from __future__ import annotations

import gc
import io
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import finalfusion
import finalfusion._batch
import finalfusion.compat.fasttext as fasttext_module
import finalfusion.limits as limits
from _bounded import ChildError, bounded
from finalfusion import Embeddings, FormatError, LimitExceeded, NdArray, load_fasttext, load_finalfusion, load_floret, write_fasttext, write_floret
from finalfusion.subword import ExplicitIndexer, FastTextIndexer, FinalfusionHashIndexer, FloretIndexer, hashing, indexers, ngrams
from finalfusion.subword.ngrams import ngram_count
from finalfusion.vocab import ExplicitVocab, FastTextVocab, FinalfusionBucketVocab, FloretVocab

TESTDATA = Path(__file__).parent / "data" / "testdata"
DIMS = 16
HUGE_N = [65, 1000, 2**31 - 1]  # fastText stores i32
HUGE_N_U32 = [*HUGE_N, 2**32 - 1]


def matrix(rows: int, seed: int = 0) -> NdArray:
    return NdArray(np.random.default_rng(seed).normal(size=(rows, DIMS)).astype(np.float32))


def bucket_emb(max_n: int = 6) -> Embeddings:
    return Embeddings(matrix(2 + 1024), FinalfusionBucketVocab(["a", "b"], FinalfusionHashIndexer(10, 3, max_n)))


def fasttext_emb(max_n: int = 6) -> Embeddings:
    return Embeddings(matrix(2 + 1000), FastTextVocab(["a", "b"], FastTextIndexer(1000, 3, max_n)))


def explicit_emb() -> Embeddings:
    grams = sorted({g for w in ["haus", "qqqqqq", "qé€𝄞", "abababab", "€𝄞€𝄞€𝄞€𝄞"] for g in ngrams(w, 3, 6)})
    return Embeddings(matrix(2 + len(grams)), ExplicitVocab(["a", "b"], ExplicitIndexer(grams, 3, 6)))


def floret_emb() -> Embeddings:
    return Embeddings(matrix(1000), FloretVocab(FloretIndexer(1000, 4, 5, n_hashes=2)))


def quantized_emb() -> Embeddings:
    return bucket_emb().quantize(n_subquantizers=4, n_bits=4, n_iterations=2, seed=1)


VOCABS: dict[str, Callable[[], Embeddings]] = {
    "bucket": bucket_emb,
    "fasttext": fasttext_emb,
    "explicit": explicit_emb,
    "floret": floret_emb,
    "bucket-quantized": quantized_emb,
}


def to_bytes(emb: Embeddings) -> bytes:
    buf = io.BytesIO()
    emb.write(buf)
    return buf.getvalue()


def patch_u32(data: bytes, fmt: str, fields: tuple[int, ...], at: int, value: int) -> bytes:
    """``data`` with the u32 ``at`` bytes into the first occurrence of ``struct.pack(fmt, *fields)`` set to ``value``."""
    start = data.find(struct.pack(fmt, *fields))
    assert start > 0
    return data[: start + at] + struct.pack("<I", value) + data[start + at + 4 :]


def reference_rows(emb: Embeddings, word: str) -> list[int]:
    """Storage rows of ``word``'s n-grams from the scalar hashes, one n-gram string at a time."""
    vocab: Any = emb.vocab
    idx = vocab.subword_indexer
    items = idx._items(word, True)
    return [i + len(vocab.words) for i in idx._ngram_indices(items) if i is not None]


def reference_embedding(emb: Embeddings, word: str) -> np.ndarray:
    rows = reference_rows(emb, word)
    storage = emb.storage
    gathered = storage.rows(np.array(rows)) if not isinstance(storage, NdArray) else storage.matrix[rows]
    v = gathered.astype(np.float64).sum(axis=0)  # exact enough to judge the float32 sums against
    return v / np.sqrt(v.dot(v))


# -- class 2 and the file side of class 5: absurd n-gram lengths, refused where they are read -----------


@pytest.mark.parametrize("max_n", HUGE_N_U32)
@pytest.mark.parametrize("kind", ["bucket", "fasttext", "explicit", "floret"])
def test_finalfusion_subword_chunks_refuse_absurd_max_n(kind: str, max_n: int) -> None:
    emb = VOCABS[kind]()
    vocab: Any = emb.vocab
    idx = vocab.subword_indexer
    data = to_bytes(emb)
    if kind in ("bucket", "fasttext"):  # u32 min_n, max_n, buckets
        data = patch_u32(data, "<III", (idx.min_n, idx.max_n, 10 if kind == "bucket" else 1000), 4, max_n)
    elif kind == "explicit":  # u64 n-gram count, u32 min_n, max_n
        data = patch_u32(data, "<QII", (len(idx.ngrams), idx.min_n, idx.max_n), 12, max_n)
    else:  # u32 min_n, max_n, u64 buckets
        data = patch_u32(data, "<IIQ", (idx.min_n, idx.max_n, idx.n_buckets), 4, max_n)

    def load_and_query() -> Any:
        e = load_finalfusion(io.BytesIO(data))
        return e.embedding("x" * 3000)

    with pytest.raises(ChildError) as err:
        bounded(load_and_query, extra_mb=200)
    assert err.value.name == "FormatError", err.value
    assert "MAX_NGRAM_LEN" in err.value.msg
    assert str(max_n) in err.value.msg


def test_finalfusion_max_n_at_the_limit_loads_and_raising_the_limit_admits_more(monkeypatch: pytest.MonkeyPatch) -> None:
    data = patch_u32(to_bytes(bucket_emb()), "<III", (3, 6, 10), 4, 65)
    with pytest.raises(FormatError, match="MAX_NGRAM_LEN"):
        load_finalfusion(io.BytesIO(data))
    monkeypatch.setattr(limits, "MAX_NGRAM_LEN", 65)
    emb = load_finalfusion(io.BytesIO(data))
    assert emb.vocab.max_n == 65  # type: ignore[attr-defined]
    assert bounded(lambda: emb.embedding("x" * 3000).shape, extra_mb=200) == (DIMS,)  # hashed past _LEN_STATE: scalar fallback, blocked


@pytest.mark.parametrize("maxn", HUGE_N)
@pytest.mark.parametrize("source", ["rust-fasttext.bin", "written"])
def test_fasttext_refuses_absurd_maxn(source: str, maxn: int) -> None:
    if source == "written":
        buf = io.BytesIO()
        write_fasttext(buf, Embeddings(matrix(1 + 100), FastTextVocab(["x" * 3000], FastTextIndexer(100, 3, 6))))
        data = buf.getvalue()
    else:
        data = (TESTDATA / source).read_bytes()  # a real fastText 0.9 model
    data = data[:48] + struct.pack("<i", maxn) + data[52:]  # args[10] = maxn
    with pytest.raises(ChildError) as err:
        bounded(lambda: load_fasttext(data), extra_mb=200)
    assert err.value.name == "FormatError", err.value
    assert "maxn" in err.value.msg, err.value
    assert "MAX_NGRAM_LEN" in err.value.msg, err.value


def test_fasttext_without_subwords_still_loads() -> None:
    real = (TESTDATA / "rust-fasttext.bin").read_bytes()
    for minn, maxn in [(0, 0), (7, 6), (2**31 - 1, 64)]:  # maxn = 0 (supervised style) and minn > maxn: no n-grams
        data = real[:44] + struct.pack("<ii", minn, maxn) + real[52:]
        emb = load_fasttext(data)
        assert type(emb.vocab).__name__ == "SimpleVocab"


@pytest.mark.parametrize("max_n", [65, 1000, 2**32 - 1])
def test_floret_refuses_absurd_max_n(max_n: int) -> None:
    buf = io.BytesIO()
    write_floret(buf, floret_emb())
    head, rest = buf.getvalue().split(b"\n", 1)
    fields = head.split(b" ")
    fields[3] = str(max_n).encode()
    data = b" ".join(fields) + b"\n" + rest
    with pytest.raises(ChildError) as err:
        bounded(lambda: load_floret(data), extra_mb=200)
    assert err.value.name == "FormatError", err.value
    assert "MAX_NGRAM_LEN" in err.value.msg, err.value


@pytest.mark.parametrize("make", [lambda: FastTextIndexer(10, 3, 65), lambda: FinalfusionHashIndexer(10, 1, 2**31), lambda: ngrams("ab", 1, 100)])
def test_constructors_refuse_absurd_max_n(make: Callable[[], Any]) -> None:
    with pytest.raises(ValueError, match="MAX_NGRAM_LEN"):
        make()


# -- class 2: long dictionary words at fastText load ----------------------------------------------------


def long_word_model(words: list[str], minn: int = 3, maxn: int = 6) -> bytes:
    """A fastText model (our writer, starting from the real rust-fasttext.bin's subword rows) whose dictionary holds ``words``."""
    real = load_fasttext((TESTDATA / "rust-fasttext.bin").read_bytes(), normalize=False)
    vocab: Any = real.vocab
    buckets = vocab.subword_indexer.n_buckets
    storage = real.storage
    assert isinstance(storage, NdArray)
    sub = storage.matrix[len(vocab.words) :]
    rows = np.concatenate([np.random.default_rng(3).normal(size=(len(words), storage.shape[1])).astype(np.float32), sub])
    buf = io.BytesIO()
    write_fasttext(buf, Embeddings(NdArray(rows), FastTextVocab(words, FastTextIndexer(buckets, minn, maxn))))
    return buf.getvalue()


@pytest.mark.parametrize(
    "words",
    [["ab" * 50_000], ["short", "x" * 100_000, "é€" * 20_000], [f"w{i}" * 3000 for i in range(20)]],
    ids=["one-100k-word", "mixed-scripts", "twenty-6k-words"],
)
@pytest.mark.slow
def test_fasttext_long_dictionary_words_load_in_bounded_memory(words: list[str]) -> None:
    data = long_word_model(words)

    def load() -> Any:
        emb = load_fasttext(data, normalize=False)
        return [emb.embedding(w) for w in words[:3]]

    got = bounded(load, extra_mb=300)
    # The unblocked path (one layout, one gather per word, a Python loop over n-gram columns) gives the same vectors.
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(indexers, "BLOCK_NGRAMS", 1 << 40)
        mp.setattr(finalfusion._batch, "LONG_ROWS", 1 << 40)
        emb = load_fasttext(data, normalize=False)
        expected = [emb.embedding(w) for w in words[:3]]
    for word, vector, want in zip(words, got, expected, strict=False):
        assert len(reference_rows(emb, word)) == ngram_count(len(word) + 2, 3, 6)
        np.testing.assert_allclose(vector, want, rtol=1e-5, atol=1e-6)


@pytest.mark.slow
def test_fasttext_many_lengths_with_long_ngrams_load_in_bounded_memory() -> None:
    """minn = 1, maxn = 64 and words of 300 distinct lengths: every length group has its own layout and its own n-gram sums."""
    words = ["w" + "abcdefghé€"[i % 10] * i for i in range(1, 300)]
    data = bytearray(long_word_model(words))
    data[44:52] = struct.pack("<ii", 1, 64)
    got = bounded(lambda: [load_fasttext(bytes(data), normalize=False).embedding(w) for w in words[::37]], extra_mb=250)
    with pytest.MonkeyPatch.context() as mp:  # the unblocked paths
        mp.setattr(indexers, "BLOCK_NGRAMS", 1 << 40)
        mp.setattr(indexers, "BLOCK_CELLS", 1 << 40)
        mp.setattr(finalfusion._batch, "LONG_ROWS", 1 << 40)
        emb = load_fasttext(bytes(data), normalize=False)
        expected = [emb.embedding(w) for w in words[::37]]
    for vector, want in zip(got, expected, strict=True):
        np.testing.assert_array_equal(vector, want)  # ordered float32 sums: the same bits


def test_fasttext_long_word_matches_the_fasttext_bindings(tmp_path: Path) -> None:
    fasttext = pytest.importorskip("fasttext")
    words = ["haus", "x" * 20_000 + "é", "ab" * 30_000]
    path = tmp_path / "long.bin"
    path.write_bytes(long_word_model(words))
    model = fasttext.load_model(str(path))
    emb = load_fasttext(path, normalize=False)
    for word in [*words, "q" * 50_000]:  # known and unknown long words
        expected = model.get_word_vector(word)
        got = emb.embedding(word)
        if word not in words:
            got = got * np.linalg.norm(expected)  # an unknown word's vector is normalised
        # float32 sums of 20,000-60,000 rows in another order (fastText adds the word's own row first): equal up to rounding
        assert float(got @ expected / (np.linalg.norm(got) * np.linalg.norm(expected))) > 0.99999, word
        np.testing.assert_allclose(got, expected, rtol=0.02, atol=0.01)


@pytest.mark.parametrize(("maxn", "length"), [(64, 70_000), (20, 250_000), (8, 800_000)])
@pytest.mark.slow
def test_fasttext_dictionary_word_past_the_ngram_limit_is_a_format_error(maxn: int, length: int) -> None:
    data = long_word_model(["short", "y" * length], 3, 6)
    data = data[:48] + struct.pack("<i", maxn) + data[52:]
    with pytest.raises(ChildError) as err:
        bounded(lambda: load_fasttext(data), extra_mb=300)
    assert err.value.name == "FormatError", err.value
    assert "MAX_NGRAMS_PER_WORD" in err.value.msg, err.value
    assert "entry 1" in err.value.msg, err.value


def test_fasttext_ngram_limit_is_read_at_call_time(monkeypatch: pytest.MonkeyPatch) -> None:
    data = long_word_model(["short", "z" * 500])
    monkeypatch.setattr(limits, "MAX_NGRAMS_PER_WORD", ngram_count(502, 3, 6) - 1)
    with pytest.raises(FormatError, match="MAX_NGRAMS_PER_WORD"):
        load_fasttext(data)
    assert len(load_fasttext(data, limit=1).vocab) == 1  # only kept words are hashed
    monkeypatch.setattr(limits, "MAX_NGRAMS_PER_WORD", ngram_count(502, 3, 6))
    assert len(load_fasttext(data).vocab) == 2


# -- class 5: long unknown words on every lookup path ---------------------------------------------------


LOOKUPS: dict[str, Callable[[Embeddings, str], Any]] = {
    "embedding": lambda e, w: e.embedding(w),
    "getitem": lambda e, w: e[w],
    "embedding_batch": lambda e, w: e.embedding_batch(["a", w, "qq"])[0][1],
    "word_similarity": lambda e, w: [r.word for r in e.word_similarity(w, k=1) or []],
    "subword_indices": lambda e, w: len(e.vocab.subword_indices(w)),  # type: ignore[attr-defined]
    "with_ngrams": lambda e, w: len(e.vocab.subword_indices(w, with_ngrams=True)),  # type: ignore[attr-defined]
}


@pytest.mark.parametrize("lookup", list(LOOKUPS))
@pytest.mark.parametrize("kind", list(VOCABS))
@pytest.mark.parametrize("word", ["q" * 2_200_000, "é" * 2_200_000], ids=["ascii-2.2M", "latin1-2.2M"])  # past the limit for 3..6 and 4..5
def test_words_past_the_ngram_limit_raise_limit_exceeded(kind: str, lookup: str, word: str) -> None:
    emb = VOCABS[kind]()
    with pytest.raises(ChildError) as err:
        bounded(lambda: LOOKUPS[lookup](emb, word), extra_mb=150)
    assert err.value.name == "LimitExceeded", err.value
    assert "MAX_NGRAMS_PER_WORD" in err.value.msg, err.value


@pytest.mark.parametrize("kind", list(VOCABS))
@pytest.mark.parametrize("word", ["q" * (1 << 20), "€𝄞" * 100_000, "ab" * 150_000], ids=["ascii-1MiB", "astral-200k", "ab-300k"])
@pytest.mark.slow
def test_long_words_under_the_limit_are_answered_in_bounded_memory(kind: str, word: str) -> None:
    emb = VOCABS[kind]()
    if kind == "explicit" and len(word) > 300_000:
        word = word[:300_000]  # one dict probe per n-gram string: keep the child quick

    def lookups() -> Any:
        single = emb.embedding(word)
        batch, found = emb.embedding_batch(["a", word, "haus"])
        return single, batch[1], bool(found[1]), len(emb.vocab.subword_indices(word))  # type: ignore[attr-defined]

    single, batched, found, count = bounded(lookups, extra_mb=300)
    assert found
    assert count >= 1
    np.testing.assert_allclose(single, batched, rtol=1e-5, atol=1e-6)  # the two paths normalise with different float32 steps


@pytest.mark.parametrize("kind", list(VOCABS))
@pytest.mark.parametrize("length", [17, 3000, pytest.param(20_000, marks=pytest.mark.slow)])
def test_blocked_path_gives_the_scalar_answer(kind: str, length: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Long words go through the blocked hashing and summing; forced here on shorter words, checked against the scalar hashes."""
    monkeypatch.setattr(indexers, "BLOCK_NGRAMS", 8)
    monkeypatch.setattr(indexers, "BLOCK_CELLS", 500)
    monkeypatch.setattr(finalfusion._batch, "LONG_ROWS", 8)
    monkeypatch.setattr(finalfusion._batch, "SUM_BYTES", 4 * DIMS * 7)
    emb = VOCABS[kind]()
    rng = np.random.default_rng(length)
    for alphabet in ["q", "haus", "é€𝄞ab"]:
        word = "".join(rng.choice(list(alphabet), size=length))
        rows = reference_rows(emb, word)
        assert (np.asarray(emb.vocab.subword_rows(word)) == rows).all()  # type: ignore[attr-defined]
        if rows:  # float32 sums of up to 80,000 rows (float64 for repeated rows): equal up to their rounding
            expected = reference_embedding(emb, word)
            np.testing.assert_allclose(emb.embedding(word), expected, rtol=1e-4, atol=1e-5)
            np.testing.assert_allclose(emb.embedding_batch([word, "zz"])[0][0], expected, rtol=1e-4, atol=1e-5)


def test_long_ngrams_hash_like_the_scalar_functions(monkeypatch: pytest.MonkeyPatch) -> None:
    """n-grams of 1..40 code points (up to 160 UTF-8 bytes: several MurmurHash3 blocks) through the blocked path."""
    monkeypatch.setattr(indexers, "BLOCK_NGRAMS", 1)
    word = "".join(np.random.default_rng(5).choice(list("aé€𝄞"), size=300))
    for idx in [FinalfusionHashIndexer(16, 1, 40), FastTextIndexer(5000, 1, 40), FloretIndexer(5000, 1, 40, n_hashes=4, seed=7)]:
        expected = [i for i in idx._ngram_indices(idx._items(word, True)) if i is not None]
        assert idx.word_indices(word).tolist() == expected


@pytest.mark.slow
def test_a_batch_of_many_long_words_streams() -> None:
    emb = bucket_emb()
    words = [chr(ord("a") + k % 26) * 100_000 + str(k) for k in range(60)]  # 24M n-grams in all: 190 MB as one index array

    def batch() -> Any:
        out, found = emb.embedding_batch(words)
        return out[[0, 59]], bool(found.all())

    (first, last), all_found = bounded(batch, extra_mb=250)
    assert all_found
    np.testing.assert_allclose(first, emb.embedding(words[0]), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(last, emb.embedding(words[59]), rtol=1e-5, atol=1e-6)


# -- caches are bounded by bytes --------------------------------------------------------------------------


def cache_bytes(emb: Embeddings) -> int:
    idx: Any = emb.vocab.subword_indexer  # type: ignore[attr-defined]
    return int(idx._words.nbytes + getattr(idx, "_ngram_bytes", 0) + hashing._LAYOUTS.nbytes + hashing._COLUMNS.nbytes)


@pytest.mark.parametrize("kind", ["bucket", "fasttext", "floret"])
@pytest.mark.slow
def test_caches_hold_at_most_their_byte_budget(kind: str) -> None:
    emb = VOCABS[kind]()

    def lookups() -> Any:
        for k in range(30):
            emb.embedding(chr(ord("a") + k % 26) * 100_000 + str(k))
            emb.embedding_batch([chr(ord("a") + k % 26) * (1000 + k) + "x" * j for j in range(20)])
        gc.collect()
        return cache_bytes(emb)

    held = bounded(lookups, extra_mb=300)  # 30 x 3.2 MB kept by an entry-count cache would not fit
    assert held <= 4 * limits.MAX_CACHE_BYTES


def test_cache_budget_is_read_at_call_time(monkeypatch: pytest.MonkeyPatch) -> None:
    idx = FastTextIndexer(1000, 3, 6)
    monkeypatch.setattr(limits, "MAX_CACHE_BYTES", 1 << 16)
    for k in range(200):
        idx.word_indices(f"word{k}" * 10)
    assert 0 < idx._words.nbytes <= 1 << 16
    assert idx.word_indices("word199" * 10) is idx.word_indices("word199" * 10)  # recent words stay cached
    big = "x" * 2000  # ~8,000 n-grams: 64 KB, over an eighth of the budget
    assert idx.word_indices(big) is not idx.word_indices(big)


def test_limit_exceeded_is_exported_and_a_value_error() -> None:
    assert finalfusion.LimitExceeded is LimitExceeded
    assert issubclass(LimitExceeded, finalfusion.FinalfusionError)
    assert issubclass(LimitExceeded, ValueError)


# -- class 2: the n-grams of all dictionary words together -------------------------------------------------


def many_lengths_model(minn: int, maxn: int, longest: int) -> bytes:
    data = bytearray(long_word_model(["w" + "abcdefghé€"[i % 10] * i for i in range(1, longest)]))
    data[44:52] = struct.pack("<ii", minn, maxn)
    return bytes(data)


@pytest.mark.slow
def test_fasttext_dictionary_past_the_file_allowance_is_a_format_error(monkeypatch: pytest.MonkeyPatch) -> None:
    data = many_lengths_model(1, 64, 1500)  # 2 MB, 69 million n-grams: minutes of hashing before the bound
    with pytest.raises(ChildError) as err:
        bounded(lambda: load_fasttext(data), extra_mb=100)  # refused before any n-gram is built
    assert err.value.name == "FormatError"
    assert "MAX_LOAD_NGRAMS_PER_BYTE" in err.value.msg
    assert "fastText dictionary" in err.value.msg
    # the allowance is read at call time: raised far enough, the same file is accepted (checked on a smaller one)
    small = many_lengths_model(1, 64, 300)
    monkeypatch.setattr(limits, "MAX_NGRAMS_PER_WORD", 100_000)  # every word passes alone, not all of them together
    monkeypatch.setattr(limits, "MAX_LOAD_NGRAMS_PER_BYTE", 0)
    with pytest.raises(FormatError, match="MAX_LOAD_NGRAMS_PER_BYTE"):
        load_fasttext(small)
    monkeypatch.setattr(limits, "MAX_NGRAMS_PER_WORD", 1 << 22)
    monkeypatch.setattr(limits, "MAX_LOAD_NGRAMS_PER_BYTE", 1)
    assert len(load_fasttext(small).vocab) == 299


@pytest.mark.parametrize(("minn", "maxn"), [(3, 6), (1, 64), (2, 9)])
def test_fasttext_few_words_per_length_sum_word_by_word_with_the_same_bits(minn: int, maxn: int, monkeypatch: pytest.MonkeyPatch) -> None:
    words = ["w" + "abcdefghé€"[i % 10] * i for i in range(1, 200)] + [f"x{i}" for i in range(2000)]  # lone long words, crowded short ones
    data = bytearray(long_word_model(words))
    data[44:52] = struct.pack("<ii", minn, maxn)
    word_by_word = load_fasttext(bytes(data), normalize=False).storage
    monkeypatch.setattr(fasttext_module, "_FEW_WORDS", 1 << 40)  # every group column by column, as before
    column_by_column = load_fasttext(bytes(data), normalize=False).storage
    assert isinstance(word_by_word, NdArray)
    assert isinstance(column_by_column, NdArray)
    np.testing.assert_array_equal(word_by_word.matrix, column_by_column.matrix)


@pytest.mark.parametrize("length", [60, 400, 16_000])
def test_floret_words_past_a_few_dozen_characters_hash_in_numpy(length: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """The scalar MurmurHash3 costs ~10 us per n-gram: a batch of 68 words of 16,000 characters took 37 s one n-gram at a time."""
    word = ("haus€é𝄞" * length)[:length]
    fresh = FloretIndexer(50_000, 4, 5, 2)
    reference = fresh._ngram_indices(fresh._items(word, True))  # the scalar hash of every item
    calls = []
    scalar = indexers.murmur3_x64_128
    monkeypatch.setattr(indexers, "murmur3_x64_128", lambda data, seed: calls.append(1) or scalar(data, seed))
    got = FloretIndexer(50_000, 4, 5, 2).word_indices(word)
    assert got.tolist() == reference
    assert len(calls) == (1 if ngram_count(length + 2, 4, 5) + 1 > 128 else ngram_count(length + 2, 4, 5) + 1)  # the whole word only
