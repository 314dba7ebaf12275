"""Subword indexers (``finalfusion.subword``): settings checks, equality and repr, pickling, the byte-bounded
n-gram cache, lookup options, and batches equal to single lookups.

The golden hashes and n-grams are in test_subwords.py, the n-gram length limits in test_ngram_bounds.py.
"""

from __future__ import annotations

import pickle

import numpy as np
import pytest

import finalfusion.limits
from finalfusion.subword import indexers
from finalfusion.subword.indexers import ExplicitIndexer, FastTextIndexer, FinalfusionHashIndexer, FloretIndexer

WORDS = ["", "a", "ab", "abc", "Straße", "über", "naïve", "x" * 30, "日本語", "ab", "zz", "hello", "world", "q", "qq", "qqq", "😀", "tab\tbed"]


def _hashers() -> list[indexers.SubwordIndexer]:
    return [FinalfusionHashIndexer(10, 3, 6), FastTextIndexer(1000, 3, 6), FinalfusionHashIndexer(21, 1, 2), FastTextIndexer(7, 4, 4)]


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: FinalfusionHashIndexer(64), "bucket_exp must be in 0..63, got 64"),
        (lambda: FinalfusionHashIndexer(-1), "bucket_exp must be in 0..63, got -1"),
        (lambda: FastTextIndexer(0), r"n_buckets must be in 1..2\*\*31-1, got 0"),
        (lambda: FastTextIndexer(2**31), r"n_buckets must be in 1..2\*\*31-1, got 2147483648"),
        (lambda: FloretIndexer(0), "n_buckets must be at least 1, got 0"),
        (lambda: FloretIndexer(10, n_hashes=5), "n_hashes must be in 1..4, got 5"),
        (lambda: FloretIndexer(10, seed=2**32), "seed must be a u32, got 4294967296"),
        (lambda: ExplicitIndexer(["ab", "ab"]), "duplicate n-gram: 'ab'"),
        (lambda: ExplicitIndexer(["ab", "cd", "ab"], ngram_index={"ab": 0, "cd": 1}), "duplicate n-gram: 'ab'"),
        (lambda: ExplicitIndexer(["ab"], ngram_index={"ab": 0, "cd": 1}), "ngram_index has n-gram 'cd' that is not in the n-gram list"),
        (lambda: ExplicitIndexer(["ab", "cd"], ngram_index={"ab": 0, "cd": 2}), "n-gram indices must cover 0..1 without gaps, got values from 0 to 2"),
        (lambda: ExplicitIndexer(["ab"], ngram_index={"ab": -1}), "n-gram indices must cover 0..0 without gaps, got values from -1 to -1"),
    ],
)
def test_constructors_refuse_bad_settings(make: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        make()  # type: ignore[operator]


def test_indexers_compare_by_settings_are_unhashable_and_show_them() -> None:
    assert FinalfusionHashIndexer(10, 3, 6) == FinalfusionHashIndexer(10, 3, 6)
    assert FinalfusionHashIndexer(10, 3, 6) != FinalfusionHashIndexer(10, 3, 5)
    assert FinalfusionHashIndexer(10) != FastTextIndexer(1024)
    assert FastTextIndexer(10) != FloretIndexer(10)
    assert FloretIndexer(10) == FloretIndexer(10)
    assert FloretIndexer(10) != FloretIndexer(10, bow="[")
    assert FloretIndexer(10) != ExplicitIndexer([])
    assert ExplicitIndexer(["<a"]) != FinalfusionHashIndexer(10)
    assert ExplicitIndexer(["<a"], 2, 2) == ExplicitIndexer(["<a"], 2, 2)
    for idx in (FinalfusionHashIndexer(10), FastTextIndexer(10), FloretIndexer(10), ExplicitIndexer([])):
        with pytest.raises(TypeError):
            hash(idx)
    assert repr(FinalfusionHashIndexer(10, 3, 6)) == "FinalfusionHashIndexer(bucket_exp=10, min_n=3, max_n=6)"
    assert repr(FastTextIndexer(10, 2, 4)) == "FastTextIndexer(n_buckets=10, min_n=2, max_n=4)"
    assert repr(FloretIndexer(10, 3, 6, 1, 5)) == "FloretIndexer(n_buckets=10, min_n=3, max_n=6, n_hashes=1, seed=5, bow='<', eow='>')"
    assert repr(ExplicitIndexer(["<a", "a>"], 2, 2, {"<a": 0, "a>": 0})) == "ExplicitIndexer(<2 n-grams, 1 indices>, min_n=2, max_n=2)"


@pytest.mark.parametrize("idx", [*_hashers(), FloretIndexer(100, 3, 5, 3), ExplicitIndexer(["<ab", "ab>", "abc"], 3, 3)])
def test_pickle_keeps_indices(idx: indexers.SubwordIndexer) -> None:
    before = [idx.subword_indices(w) for w in WORDS]
    copy = pickle.loads(pickle.dumps(idx))
    assert copy == idx
    assert [copy.subword_indices(w) for w in WORDS] == before


@pytest.mark.parametrize("idx", _hashers())
def test_batches_equal_single_lookups(idx: indexers.SubwordIndexer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(indexers, "GROUP_ENTRIES", 8)  # several blocks per length group
    words = WORDS * 3  # enough for the vectorised path
    flat, counts = idx.batch_indices(words)
    expected = [idx.subword_indices(w) for w in words]
    assert counts.tolist() == [len(e) for e in expected]
    assert flat.tolist() == [i for e in expected for i in e]


def test_ngram_cache_is_bounded_in_bytes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(finalfusion.limits, "MAX_CACHE_BYTES", 300)  # two 3-grams (about 124 bytes each) fit, a third clears
    idx = FastTextIndexer(1000, 3, 3)
    fresh = FastTextIndexer(1000, 3, 3)
    sizes = []
    for ngram in ["<ab", "ab>", "abc", "bcd", "<ab"]:
        assert idx(ngram) == fresh._hash_index(ngram)
        assert idx._ngram_bytes <= 300
        sizes.append(len(idx._ngram_cache))
    assert sizes == [1, 2, 0, 1, 2]


def test_subword_indices_options() -> None:
    idx = FinalfusionHashIndexer(10, 3, 3)
    bracketed = idx.subword_indices("ab", offset=5)
    assert bracketed == [i + 5 for i in idx.subword_indices("ab")]
    assert idx.subword_indices("ab", offset=5, with_ngrams=True) == list(zip(["<ab", "ab>"], bracketed, strict=True))
    assert idx.subword_indices("abc", bracket=False) == [idx("abc")]
    assert idx.subword_indices("ab", bracket=False) == []


def test_floret_items_have_several_indices() -> None:
    idx = FloretIndexer(1000, 3, 3, n_hashes=2, bow="[", eow="]")
    pairs = idx.subword_indices("a", with_ngrams=True)
    assert [ng for ng, _ in pairs] == ["[a]", "[a]", "[a]", "[a]"]  # the word, then its one 3-gram, two hashes each
    assert idx("[a]") == pairs[0][1]
    assert (idx.bow, idx.eow, idx.n_hashes) == ("[", "]", 2)


def test_explicit_indexer_mapping_protocol() -> None:
    idx = ExplicitIndexer(["<ab", "ab>", "<a"], 2, 3, {"<ab": 0, "ab>": 1, "<a": 0})
    assert len(idx) == 3
    assert list(idx) == ["<ab", "ab>", "<a"]
    assert idx["ab>"] == 1
    assert "<a" in idx
    assert "zz" not in idx
    with pytest.raises(KeyError):
        idx["zz"]
    assert idx.subword_indices("ab", with_ngrams=True) == [("<ab", 0), ("<a", 0), ("ab>", 1)]  # n-gram order; "ab" and "b>" have no index
    assert ExplicitIndexer([]).upper_bound == 0
    assert ExplicitIndexer([], ngram_index={}).word_indices("ab").tolist() == []


def test_explicit_renumbering_of_shared_indices() -> None:
    idx = ExplicitIndexer(["a", "b", "c"], 1, 1, {"a": 1, "b": 0, "c": 1})
    assert idx.first_noncanonical() == (0, 0, 1)
    canonical, source = idx.renumbered()
    assert canonical.ngram_index == {"a": 0, "b": 1, "c": 0}
    assert source.tolist() == [1, 0]
    assert canonical.first_noncanonical() is None
    assert ExplicitIndexer(["a", "b"], 1, 1, {"a": 0, "b": 0}).first_noncanonical() is None


def test_word_indices_are_read_only_and_cached() -> None:
    """Words hashed in lanes are cached from their second lookup on, the others from the first. All results are read-only."""
    idx = FinalfusionHashIndexer(10, 3, 6)
    for word, lanes in (("hello", True), ("x" * 40, False), ("日本語", False)):  # lanes / too long for lanes / above Latin-1
        cached = idx._recent.get if lanes else idx._words.get
        first = idx.word_indices(word)
        assert cached(word) is (None if lanes else first)  # a word hashed in lanes is only remembered as seen
        second = idx.word_indices(word)
        assert (first is second) is not lanes
        assert second is idx.word_indices(word)
        assert cached(word) is second
        with pytest.raises(ValueError, match="read-only"):
            first[0] = 1
        assert np.array_equal(first, second)
        rows = idx.word_rows(word, 7)
        assert rows.tolist() == [i + 7 for i in first.tolist()]
        assert rows is not first
        assert cached((word, 7)) is (None if lanes else rows)
        assert ((word, 7) in idx._recent) is lanes


def test_the_short_word_cache_stays_within_its_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(finalfusion.limits, "MAX_CACHE_BYTES", 10 * indexers.RECENT_ENTRY_BYTES)  # ten words
    idx = FastTextIndexer(1000, 3, 6)
    for i in range(95):
        idx.word_rows(f"w{i}", offset=3)
        assert len(idx._recent) <= 10
    assert list(idx._recent.items()) == [((f"w{i}", 3), None) for i in range(90, 95)]  # emptied when full (every tenth word)
    first = idx.word_rows("w94", offset=3)
    assert idx._recent[("w94", 3)] is first
    assert idx.word_rows("w94", offset=3) is first
    assert len(idx._words) == 0  # the byte-bounded cache holds none of them
    for i in range(95, 105):  # a full cache starts over, cached rows included
        idx.word_rows(f"w{i}", offset=3)
    assert ("w94", 3) not in idx._recent
    assert pickle.loads(pickle.dumps(idx))._recent == {}


def test_byte_cache_evicts_the_oldest_entries_past_its_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    from finalfusion.subword._cache import ENTRY_OVERHEAD, ByteCache

    monkeypatch.setattr(finalfusion.limits, "MAX_CACHE_BYTES", 8 * (100 + ENTRY_OVERHEAD))  # eight entries of 100 bytes
    cache: ByteCache[str] = ByteCache()
    for key in "abcdefghij":
        cache.put(key, key.upper(), 100)
    assert len(cache) == 8
    assert cache.nbytes == 8 * (100 + ENTRY_OVERHEAD)
    assert cache.get("a") is None  # the two oldest went
    assert cache.get("b") is None
    assert cache.get("c") == "C"
    cache.put("j", "other", 100)  # already stored: kept as it was
    assert cache.get("j") == "J"


def test_byte_cache_stays_bounded_and_oldest_first_over_many_evictions(monkeypatch: pytest.MonkeyPatch) -> None:
    """Thousands of evictions (a process that meets many long unknown words): still the newest entries, within the budget."""
    from finalfusion.subword._cache import ENTRY_OVERHEAD, ByteCache

    monkeypatch.setattr(finalfusion.limits, "MAX_CACHE_BYTES", 50 * (100 + ENTRY_OVERHEAD))  # fifty entries of 100 bytes
    cache: ByteCache[int] = ByteCache()
    for i in range(5000):
        cache.put(f"w{i}", i, 100)
        assert cache.nbytes <= 50 * (100 + ENTRY_OVERHEAD)
    assert len(cache) == 50
    assert [cache.get(f"w{i}") for i in range(4948, 5000)] == [None, None, *range(4950, 5000)]
    cache.put("w4999", -1, 100)  # a stored key keeps its value
    assert cache.get("w4999") == 4999


def _lane_words(seed: int, alphabet: list[str], longest: int) -> list[str]:
    rng = np.random.default_rng(seed)
    return ["".join(rng.choice(alphabet, int(rng.integers(0, longest + 1)))) for _ in range(150)]


@pytest.mark.parametrize("bucket_exp", [0, 1, 3, 8, 16, 21, 32, 33, 40, 63])
def test_words_hashed_in_lanes_equal_the_scalar_hash(bucket_exp: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Short words are hashed in the lanes of a Python int (bucket exponents 1-32, n-grams up to 8): finalfusion's buckets, bit for bit.

    Every word is also looked up with the lanes switched off (numpy / the scalar hash), with and without an
    offset; the words reach past LANE_WORD, and the alphabet past Latin-1 (those words cannot take the lanes).
    """
    from finalfusion.subword import hashing
    from finalfusion.subword.ngrams import ngrams

    latin = [*"abcé\xff<>0 "]
    words = _lane_words(bucket_exp, latin, hashing.LANE_WORD + 4) + _lane_words(bucket_exp + 100, [*latin, "Ā", "語"], 8)
    mask = (1 << bucket_exp) - 1
    in_lanes = 0
    for min_n, max_n in ((3, 6), (1, 3), (2, 2), (1, 6), (1, 8), (4, 9)):
        idx = FinalfusionHashIndexer(bucket_exp, min_n, max_n)
        expected = [[hashing.fnv1a64_finalfusion(g) & mask for g in ngrams(f"<{w}>", min_n, max_n, bracket=False)] for w in words]
        for w, want in zip(words, expected, strict=True):
            assert idx.word_rows(w).tolist() == want, (w, min_n, max_n)
            assert idx.word_rows(w, offset=1000).tolist() == [i + 1000 for i in want], (w, min_n, max_n)
            assert idx._indices(w).tolist() == want
            in_lanes += hashing.lane_hashes(f"<{w}>", min_n, max_n, bucket_exp, False) is not None
        monkeypatch.setattr(hashing, "LANE_WORD", 0)  # every word through numpy / the scalar hash
        monkeypatch.setattr(indexers, "LANE_WORD", 0)
        fresh = FinalfusionHashIndexer(bucket_exp, min_n, max_n)
        assert [fresh.word_rows(w).tolist() for w in words] == expected
        monkeypatch.undo()
    assert (in_lanes > 300) is (1 <= bucket_exp <= 32)  # the lanes did the work where they apply


@pytest.mark.parametrize("n_buckets", [1, 7, 1000, 2_000_000, 2**31 - 1])
def test_fasttext_words_hashed_in_lanes_equal_the_scalar_hash(n_buckets: int) -> None:
    """fastText's buckets of ASCII words come from the lanes (32-bit FNV, then the modulus); other words from the scalar hash."""
    from finalfusion.subword import hashing
    from finalfusion.subword.ngrams import ngrams

    ascii_ = [*"abcxyz<>0 ~"]
    words = _lane_words(n_buckets % 1000, ascii_, hashing.LANE_WORD + 4) + _lane_words(n_buckets % 999, [*ascii_, "é", "語"], 8)
    in_lanes = 0
    for min_n, max_n in ((3, 6), (1, 1), (2, 8), (5, 9)):
        idx = FastTextIndexer(n_buckets, min_n, max_n)
        for w in words:
            grams = ngrams(f"<{w}>", min_n, max_n, bracket=False)
            want = [hashing.fnv1a32_fasttext(g.encode("utf-8")) % n_buckets for g in grams]
            assert idx.word_rows(w).tolist() == want, (w, min_n, max_n)
            rows = idx.word_rows(w, offset=5)
            assert rows.tolist() == [i + 5 for i in want]
            assert not rows.flags.writeable
            in_lanes += hashing.lane_hashes(f"<{w}>", min_n, max_n, 32, True) is not None
    assert in_lanes > 200


def test_lane_words_stay_consistent_across_the_subword_apis() -> None:
    """idx, subword_indices (with n-grams), word_rows and batches agree for words hashed in lanes, as the vocabulary reports them."""
    from finalfusion.vocab import FastTextVocab, FinalfusionBucketVocab

    words = ["unk1xyz", "naïve", "Straße", "ab", "abcdefghijklmnopqrstuvwxyz0123", "日本"]
    for vocab in (FinalfusionBucketVocab(["known", "words"], FinalfusionHashIndexer(16, 3, 6)), FastTextVocab(["known"], FastTextIndexer(5000, 3, 6))):
        batch = dict(zip(words, [None] * len(words), strict=True))
        for pos, rows in vocab.batch_subword_rows(words * 3):  # 18 words: the vectorised batch path
            for p, r in zip(pos.tolist(), rows.tolist(), strict=True):
                batch[words[p % len(words)]] = r
        for w in words:
            rows = vocab.word_rows(w).tolist()
            assert vocab.idx(w) == rows == vocab.subword_indices(w) == batch[w]
            assert [i for _, i in vocab.indexer.subword_indices(w, offset=len(vocab.words), with_ngrams=True)] == rows
            assert [g for g, _ in vocab.indexer.subword_indices(w, with_ngrams=True)] == vocab.subwords(w)


def test_lane_hashing_from_several_threads_gives_the_serial_rows() -> None:
    from concurrent.futures import ThreadPoolExecutor

    idx = FinalfusionHashIndexer(21, 3, 6)
    words = [f"w{i}ord{i % 7}é" for i in range(3000)]
    serial = [idx.word_rows(w, 9).tolist() for w in words]
    fresh = FinalfusionHashIndexer(21, 3, 6)  # layouts shared through the module's cache, built concurrently here for new lengths
    with ThreadPoolExecutor(4) as pool:
        parallel = list(pool.map(lambda w: fresh.word_rows(w, 9).tolist(), words + [w + "xy" for w in words]))
    assert parallel[: len(words)] == serial
    assert parallel[len(words) :] == [idx.word_rows(w + "xy", 9).tolist() for w in words]
