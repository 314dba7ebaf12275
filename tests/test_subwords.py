"""Golden subword vectors: n-grams, FNV-1a (finalfusion and fastText), MurmurHash3/floret, batch path."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from conftest import load_json, word_of
from finalfusion.subword import (
    ExplicitIndexer,
    FastTextIndexer,
    FinalfusionHashIndexer,
    FloretIndexer,
    fnv1a32_fasttext,
    fnv1a64_finalfusion,
    murmur3_x64_128,
    ngrams,
)

NGRAMS = load_json("ngrams_min3_max6.json")["cases"]
FF = load_json("finalfusion_buckets.json")["cases"]
FT = load_json("fasttext_buckets.json")["cases"]
FLORET = load_json("floret_buckets.json")
WORDS = [word_of(c) for c in NGRAMS]


def _ids(cases: list[dict[str, Any]]) -> list[str]:
    return [f"{i}-{'+'.join(c['codepoints']) or 'empty'}" for i, c in enumerate(cases)]


def test_golden_word_list_is_complete() -> None:
    assert len(WORDS) == 36
    assert "" in WORDS
    assert "😀" in WORDS
    assert [word_of(c) for c in FF] == WORDS
    assert [word_of(c) for c in FT] == WORDS
    assert [word_of(c) for c in FLORET["cases"]] == WORDS


@pytest.mark.parametrize("case", NGRAMS, ids=_ids(NGRAMS))
def test_ngrams(case: dict[str, Any]) -> None:
    word = word_of(case)
    assert ngrams(word, 3, 6) == case["ngrams"]
    assert case["bracketed"] == f"<{word}>"


@pytest.mark.parametrize("case", FF, ids=_ids(FF))
def test_finalfusion_buckets(case: dict[str, Any]) -> None:
    word = word_of(case)
    assert [fnv1a64_finalfusion(ng) for ng in case["ngrams"]] == case["fnv1a64"]
    assert FinalfusionHashIndexer(21, 3, 6).subword_indices(word) == case["buckets_exp21"]
    assert FinalfusionHashIndexer(10, 3, 6).subword_indices(word) == case["buckets_exp10"]
    pairs = FinalfusionHashIndexer(21, 3, 6).subword_indices(word, offset=0, with_ngrams=True)
    assert pairs == list(zip(case["ngrams"], case["buckets_exp21"], strict=True))
    assert FinalfusionHashIndexer(10, 3, 6).subword_indices(word, offset=7) == [b + 7 for b in case["buckets_exp10"]]


@pytest.mark.parametrize("case", FT, ids=_ids(FT))
def test_fasttext_buckets(case: dict[str, Any]) -> None:
    word = word_of(case)
    assert [fnv1a32_fasttext(ng.encode("utf-8")) for ng in case["ngrams"]] == case["fasttext_hash32"]
    assert FastTextIndexer(2000000, 3, 6).subword_indices(word) == case["buckets_2000000"]
    assert FastTextIndexer(1000, 3, 6).subword_indices(word) == case["buckets_1000"]
    pairs = FastTextIndexer(1000, 3, 6).subword_indices(word, with_ngrams=True)
    assert pairs == list(zip(case["ngrams"], case["buckets_1000"], strict=True))


FLORET_CONFIGS = [(cfg["n_buckets"], cfg["n_hashes"]) for cfg in FLORET["params"]["configs"]]


@pytest.mark.parametrize("case", FLORET["cases"], ids=_ids(FLORET["cases"]))
def test_floret_buckets(case: dict[str, Any]) -> None:
    word = word_of(case)
    seed = FLORET["params"]["seed"]
    assert seed == 2166136261
    for item, expected in zip(case["hashed_items"], case["murmur3_x64_128_u128"], strict=True):
        h1, h2 = murmur3_x64_128(item.encode("utf-8"), seed)
        assert (h2 << 64) | h1 == int(expected)
    assert FLORET_CONFIGS == [(50000, 4), (10, 2)]
    for (n_buckets, n_hashes), key in zip(FLORET_CONFIGS, ["indices_buckets50000_hashes4", "indices_buckets10_hashes2"], strict=True):
        indexer = FloretIndexer(n_buckets, 3, 6, n_hashes=n_hashes, seed=seed)
        flat = [i for per_item in case[key] for i in per_item]
        assert indexer.subword_indices(word) == flat


def _explicit_indexer() -> ExplicitIndexer:
    # Every second distinct golden n-gram, with shared indices, so some n-grams are missing.
    seen: dict[str, None] = {}
    for c in NGRAMS:
        for ng in c["ngrams"]:
            seen.setdefault(ng)
    kept = list(seen)[::2]
    index: dict[str, int] = {}
    next_idx = 0
    for k, ng in enumerate(kept):
        if k % 3 == 2:
            index[ng] = index[kept[k - 1]]
        else:
            index[ng] = next_idx
            next_idx += 1
    return ExplicitIndexer(kept, 3, 6, index)


INDEXERS = {
    "ff21": lambda: FinalfusionHashIndexer(21, 3, 6),
    "ff10": lambda: FinalfusionHashIndexer(10, 3, 6),
    "ft2M": lambda: FastTextIndexer(2000000, 3, 6),
    "ft1000": lambda: FastTextIndexer(1000, 3, 6),
    "floret4": lambda: FloretIndexer(50000, 3, 6, n_hashes=4, seed=2166136261),
    "floret2": lambda: FloretIndexer(10, 3, 6, n_hashes=2, seed=2166136261),
    "explicit": _explicit_indexer,
    "ff_min1": lambda: FinalfusionHashIndexer(12, 1, 3),
    "ft_min5": lambda: FastTextIndexer(77, 5, 5),
}


@pytest.mark.parametrize("name", list(INDEXERS))
@pytest.mark.parametrize(
    "words", [WORDS, WORDS[:3], WORDS * 3, list(reversed(WORDS)), [], [""], ["😀"] * 9], ids=["all", "few", "repeated", "reversed", "none", "empty", "emoji9"]
)
def test_batch_equals_scalar(name: str, words: list[str]) -> None:
    # A fresh indexer per path so the scalar cache cannot feed the batch path.
    flat, counts = INDEXERS[name]().batch_indices(words)
    scalar = INDEXERS[name]()
    expected = [scalar.subword_indices(w) for w in words]
    assert counts.tolist() == [len(e) for e in expected]
    assert flat.tolist() == [i for e in expected for i in e]
    assert flat.dtype == np.int64
    assert counts.dtype == np.int64


def test_explicit_indexer_skips_unknown_ngrams() -> None:
    indexer = _explicit_indexer()
    total = sum(len(c["ngrams"]) for c in NGRAMS)
    found = sum(len(indexer.subword_indices(w)) for w in WORDS)
    assert 0 < found < total
    for w in WORDS:
        pairs = indexer.subword_indices(w, with_ngrams=True)
        assert all(indexer(ng) == i for ng, i in pairs)
