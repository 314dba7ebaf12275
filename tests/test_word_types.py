"""Non-string keys (issue 13, class 8): a TypeError naming the type, for every vocabulary and storage.

Subword vocabularies used to embed ``str(key)`` (``embedding(None)`` gave the
vector of "None") and ``embedding_batch("abc")`` one row per character.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from finalfusion import Embeddings
from finalfusion.compat.sentencepiece import SentencePieceModel
from finalfusion.storage import PQ, NdArray, QuantizedArray
from finalfusion.subword import ExplicitIndexer, FastTextIndexer, FinalfusionHashIndexer, FloretIndexer
from finalfusion.vocab import (
    ExplicitVocab,
    FastTextVocab,
    FinalfusionBucketVocab,
    FloretVocab,
    HuggingFaceTokenizer,
    SentencePieceTokenizer,
    SimpleVocab,
    TokenizerVocab,
)

WORDS = ["<unk>", "a", "b"]


def _storage(rows: int, quantized: bool) -> Any:
    m = np.random.default_rng(0).standard_normal((rows, 4)).astype(np.float32)
    if not quantized:
        return NdArray(m)
    return QuantizedArray(PQ(np.random.default_rng(1).standard_normal((2, 4, 2)).astype(np.float32)), np.zeros((rows, 2), np.uint8))


VOCABS: dict[str, Callable[[], Any]] = {
    "simple": lambda: SimpleVocab(WORDS),
    "bucket": lambda: FinalfusionBucketVocab(WORDS, FinalfusionHashIndexer(4)),
    "fasttext": lambda: FastTextVocab(WORDS, FastTextIndexer(16)),
    "explicit": lambda: ExplicitVocab(WORDS, ExplicitIndexer(["<a", "a>", "<b"], 2, 2)),
    "floret": lambda: FloretVocab(FloretIndexer(16, 2, 3, n_hashes=2)),
    "sentencepiece": lambda: TokenizerVocab(WORDS, SentencePieceTokenizer(SentencePieceModel(WORDS, [0.0] * 3, [2, 1, 1]).to_proto())),
    "huggingface": lambda: TokenizerVocab(WORDS, HuggingFaceTokenizer('{"model": {"type": "BPE", "vocab": {"<unk>": 0, "a": 1, "b": 2}, "merges": []}}')),
}
BAD_KEYS = [None, 123, 1.5, b"abc", bytearray(b"a"), object()]


@pytest.fixture(params=[(v, q) for v in VOCABS for q in (False, True)], ids=lambda p: f"{p[0]}-{'quantized' if p[1] else 'dense'}")
def emb(request: pytest.FixtureRequest) -> Embeddings:
    name, quantized = request.param
    vocab = VOCABS[name]()
    return Embeddings(_storage(vocab.upper_bound, quantized), vocab)


@pytest.mark.parametrize("key", BAD_KEYS, ids=lambda k: type(k).__name__)
def test_single_lookups_refuse_non_strings(emb: Embeddings, key: object) -> None:
    name = type(key).__name__
    for lookup in (emb.embedding, emb.__getitem__, lambda k: emb.embedding(k, default=np.zeros(4)), emb.word_similarity):
        with pytest.raises(TypeError, match=rf"\b{name}\b"):
            lookup(key)  # type: ignore[operator]


@pytest.mark.parametrize("key", BAD_KEYS, ids=lambda k: type(k).__name__)
def test_batches_refuse_non_string_items(emb: Embeddings, key: object) -> None:
    name = type(key).__name__
    for batch in (emb.embedding_batch, emb.word_similarity_batch):
        with pytest.raises(TypeError, match=rf"words\[1\] must be a str, not {name}"):
            batch(["a", key, "b"])  # type: ignore[list-item]


@pytest.mark.parametrize("single", ["abc", b"abc", ""])
def test_batches_refuse_a_single_string(emb: Embeddings, single: str | bytes) -> None:
    for batch in (emb.embedding_batch, emb.word_similarity_batch):
        with pytest.raises(TypeError, match="not a single"):
            batch(single)  # type: ignore[arg-type]


def test_string_subclasses_and_arrays_of_strings_are_words(emb: Embeddings) -> None:
    if isinstance(emb.vocab, TokenizerVocab):  # a model vocabulary tokenizes every word (the word rule): the library is needed
        pytest.importorskip("sentencepiece" if isinstance(emb.vocab.tokenizer, SentencePieceTokenizer) else "tokenizers")
    want = emb.embedding_batch(["a", "b"])[0]
    np.testing.assert_array_equal(emb.embedding_batch([np.str_("a"), np.str_("b")])[0], want)
    np.testing.assert_array_equal(emb.embedding_batch(np.array(["a", "b"]))[0], want)
    np.testing.assert_array_equal(emb.embedding(np.str_("a")), want[0])
    assert None not in emb
    assert 123 not in emb
