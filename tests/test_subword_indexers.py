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
    idx = FinalfusionHashIndexer(10, 3, 6)
    first = idx.word_indices("hello")
    assert first is idx.word_indices("hello")
    with pytest.raises(ValueError, match="read-only"):
        first[0] = 1
    assert np.array_equal(first, idx.word_indices("hello"))


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


@pytest.mark.parametrize("bucket_exp", [0, 1, 3, 8, 16, 21, 40, 63])
def test_short_words_hashed_with_python_ints_equal_the_scalar_hash(bucket_exp: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Words up to SHORT_WORD bracketed code points go through masked Python ints: the buckets of finalfusion's hash, bit for bit."""
    from finalfusion.subword import hashing
    from finalfusion.subword.ngrams import ngrams

    rng = np.random.default_rng(bucket_exp)
    alphabet = [*"abcé\xff<>0 ", "Ā", "語"]  # Latin-1, and two code points above it (the numpy / scalar fallback)
    words = ["".join(rng.choice(alphabet, int(rng.integers(0, 7)))) for _ in range(200)]
    mask = (1 << bucket_exp) - 1
    for min_n, max_n in ((3, 6), (1, 3), (2, 2), (1, 6)):
        idx = FinalfusionHashIndexer(bucket_exp, min_n, max_n)
        short = [idx._indices(w).tolist() for w in words]
        for w, got in zip(words, short, strict=True):
            assert got == [hashing.fnv1a64_finalfusion(g) & mask for g in ngrams(f"<{w}>", min_n, max_n, bracket=False)], w
        monkeypatch.setattr(hashing, "SHORT_WORD", 0)  # every word through numpy / the scalar hash
        assert [idx._indices(w).tolist() for w in words] == short
        monkeypatch.undo()
