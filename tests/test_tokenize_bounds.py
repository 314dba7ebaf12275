"""Bounded tokenizer work for unknown words (issue 13, class 5, on model vocabularies).

Every tokenizer-backed vocabulary (GGUF gpt2 byte-level BPE and llama
SentencePiece, SentencePiece models, safetensors with a ``tokenizer.json``,
LightSeq with a SentencePiece model, trained WordPiece and Unigram
tokenizers) refuses to tokenize a word longer than
:data:`finalfusion.limits.MAX_TOKENIZE_BYTES` bytes of UTF-8 on every lookup
path (``LimitExceeded``, before any work), gives exactly the library's tokens
for words up to the limit (also when it is lowered or raised), and tokenizes
a batch in blocks of bounded bytes so that its memory does not grow with the
batch. Memory checks run in forked children under an address-space limit
(``tests/_bounded.py``); no wall-clock assertions.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import finalfusion.limits as limits
from _bounded import ChildError, bounded
from _model_helpers import subword_rule, train_sentencepiece, train_wordpiece
from finalfusion import Embeddings, LimitExceeded, load_gguf, load_lightseq, load_safetensors, load_sentencepiece
from finalfusion import _tokenizers as tokenizer_module
from finalfusion.storage import NdArray
from finalfusion.vocab import HuggingFaceTokenizer, SentencePieceTokenizer, Tokenizer, TokenizerVocab

DATA = Path(__file__).resolve().parent / "data" / "models"


def _needs(tok: Tokenizer) -> None:
    pytest.importorskip("sentencepiece" if isinstance(tok, SentencePieceTokenizer) else "tokenizers")


def _trained(tok: Tokenizer) -> Embeddings:
    from finalfusion.compat._model_vocab import hf_tokens, sentencepiece_tokens

    tokens = sentencepiece_tokens(tok.to_bytes()) if isinstance(tok, SentencePieceTokenizer) else hf_tokens(tok.to_bytes())
    matrix = np.random.default_rng(len(tokens)).standard_normal((len(tokens), 8)).astype(np.float32)
    return Embeddings(NdArray(matrix), TokenizerVocab(tokens, tok))


def _lightseq() -> Embeddings:
    pytest.importorskip("google.protobuf")
    from test_lightseq import make

    n = len(load_sentencepiece(DATA / "sentencepiece_bpemb.model", DATA / "sentencepiece_bpemb.vec").vocab.words)
    src = np.random.default_rng(1).standard_normal((n + 3, 8)).astype(np.float32)
    return load_lightseq(make.build_proto("bert", 8, src), DATA / "sentencepiece_bpemb.model", normalize=False)


def _hf_unigram() -> Embeddings:
    tokenizers = pytest.importorskip("tokenizers")
    from _model_helpers import corpus

    tok = tokenizers.Tokenizer(tokenizers.models.Unigram())
    tok.pre_tokenizer = tokenizers.pre_tokenizers.Metaspace()
    trainer = tokenizers.trainers.UnigramTrainer(vocab_size=500, unk_token="<unk>", special_tokens=["<unk>"], show_progress=False)
    tok.train_from_iterator(corpus(), trainer=trainer)
    return _trained(HuggingFaceTokenizer(tok.to_str()))


def _trainer(package: str, train: Callable[..., Any]) -> Callable[..., Any]:
    """``train``, once ``package`` is known to be installed (skip otherwise: the floor run has no interop extra)."""
    pytest.importorskip(package, reason=f"training needs {package} (the interop extra)")
    return train


#: Every kind of tokenizer-backed vocabulary, built from real files or real trained models.
MODELS: dict[str, Callable[[], Embeddings]] = {
    "gguf-gpt2-bpe": lambda: load_gguf(DATA / "gguf_gpt2_bf16.gguf"),
    "gguf-llama-spm": lambda: load_gguf(DATA / "gguf_llama_f16.gguf"),
    "sentencepiece-bpemb": lambda: load_sentencepiece(DATA / "sentencepiece_bpemb.model", DATA / "sentencepiece_bpemb.vec"),
    "safetensors-bpe": lambda: load_safetensors(DATA / "safetensors_tiny.safetensors", tokenizer=DATA / "safetensors_tokenizer.json"),
    "lightseq-spm": _lightseq,
    "spm-unigram": lambda: _trained(SentencePieceTokenizer(_trainer("sentencepiece", train_sentencepiece)("unigram", True))),
    "hf-wordpiece": lambda: _trained(HuggingFaceTokenizer(_trainer("tokenizers", train_wordpiece)())),
    "hf-unigram": _hf_unigram,
}
_BUILT: dict[str, Embeddings] = {}


def model(name: str) -> Embeddings:
    if name not in _BUILT:
        emb = MODELS[name]()
        assert isinstance(emb.vocab, TokenizerVocab), name
        _needs(emb.vocab.tokenizer)
        _BUILT[name] = emb
    return _BUILT[name]


def library_ids(tok: Tokenizer, words: list[str]) -> list[list[int]]:
    """The ids the real library returns for each word, one call per word (no blocks, no limit)."""
    if isinstance(tok, SentencePieceTokenizer):
        import sentencepiece

        sp = sentencepiece.SentencePieceProcessor(model_proto=tok.to_bytes())
        return [list(sp.EncodeAsIds(w)) for w in words]
    import tokenizers

    hf = tokenizers.Tokenizer.from_str(tok.to_bytes().decode("utf-8"))
    return [list(hf.encode(w, add_special_tokens=False).ids) for w in words]


def expected(emb: Embeddings, words: list[str]) -> list[np.ndarray | None]:
    matrix = np.asarray(emb.storage.matrix)
    tok = emb.vocab.tokenizer  # type: ignore[attr-defined]
    norms = emb.norms.norms if emb.norms is not None else None
    return [subword_rule(matrix, ids, set(tok.skip_ids), norms) for ids in library_ids(tok, words)]


def words_of(nbytes: int, seed: int = 0) -> list[str]:
    """Words of exactly ``nbytes`` bytes of UTF-8 (a multiple of 12): 1-, 2-, 3-, 4-byte characters, a mix, and spaces."""
    rng = random.Random(seed)
    mixed = []
    left = nbytes
    while left:
        ch = rng.choice([c for c in "aé中😀 x" if len(c.encode()) <= left])
        mixed.append(ch)
        left -= len(ch.encode())
    return ["ab" * (nbytes // 2), "é" * (nbytes // 2), "中" * (nbytes // 3), "😀" * (nbytes // 4), "".join(mixed)]


LOOKUPS: dict[str, Callable[[Embeddings, str], Any]] = {
    "embedding": lambda e, w: e.embedding(w),
    "getitem": lambda e, w: e[w],
    "embedding_with_norm": lambda e, w: e.embedding_with_norm(w),
    "embedding_batch": lambda e, w: e.embedding_batch(["a", w, "xyz"])[0][1],
    "word_similarity": lambda e, w: [r.word for r in e.word_similarity(w, k=1) or []],
    "idx": lambda e, w: e.vocab.idx(w),
    "subword_indices": lambda e, w: e.vocab.subword_indices(w),  # type: ignore[attr-defined]
    "subwords": lambda e, w: e.vocab.subwords(w),  # type: ignore[attr-defined]
}


@pytest.mark.parametrize("lookup", list(LOOKUPS))
@pytest.mark.parametrize("name", list(MODELS))
@pytest.mark.parametrize("word", ["ab" * (1 << 19), "é" * 140_000], ids=["ascii-1MiB", "latin1-140k-chars"])
def test_words_past_the_limit_raise_before_tokenizing(name: str, lookup: str, word: str) -> None:
    """1 MiB, and 280,000 bytes in 140,000 code points (the limit counts bytes): refused at once, in a few MB."""
    emb = model(name)
    with pytest.raises(ChildError) as err:
        bounded(lambda: LOOKUPS[lookup](emb, word), extra_mb=64)
    assert err.value.name == "LimitExceeded", err.value
    msg = err.value.msg
    assert "finalfusion.limits.MAX_TOKENIZE_BYTES = 262144" in msg, msg
    assert f"the word has {len(word.encode())} bytes of UTF-8" in msg, msg
    assert "raise the limit" in msg, msg


@pytest.mark.parametrize("name", list(MODELS))
def test_words_up_to_a_lowered_limit_get_the_library_tokens(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    emb = model(name)
    tok = emb.vocab.tokenizer  # type: ignore[attr-defined]
    monkeypatch.setattr(limits, "MAX_TOKENIZE_BYTES", 3000)
    words = words_of(3000, seed=len(name))
    assert all(len(w.encode()) == 3000 for w in words)
    assert tok.encode_batch(words) == library_ids(tok, words)
    batch, found = emb.embedding_batch(["a", *words])
    for word, want, row, ok in zip(words, expected(emb, words), batch[1:], found[1:], strict=True):
        single = emb.embedding(word)
        if want is None:
            assert single is None
            assert not ok
            continue
        assert ok
        np.testing.assert_allclose(single, want, rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(row, want, rtol=1e-4, atol=1e-5)
    for word in words:  # one byte more: refused on every path
        longer = word + "a"
        for lookup in LOOKUPS.values():
            with pytest.raises(LimitExceeded, match=r"the word has 3001 bytes of UTF-8, more than finalfusion\.limits\.MAX_TOKENIZE_BYTES = 3000"):
                lookup(emb, longer)
        with pytest.raises(LimitExceeded):
            tok.encode_batch(["a", longer])


@pytest.mark.parametrize("name", list(MODELS))
def test_a_raised_limit_tokenizes_longer_words_like_the_library(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    emb = model(name)
    word = words_of(300_000, seed=3)[4]  # past the default limit, mixed scripts
    assert len(word.encode()) > limits.MAX_TOKENIZE_BYTES
    with pytest.raises(LimitExceeded):
        emb.embedding(word)
    monkeypatch.setenv("TOKENIZERS_PARALLELISM", "false")  # see test_a_large_batch_streams_in_bounded_memory
    monkeypatch.setattr(limits, "MAX_TOKENIZE_BYTES", 1 << 20)  # read at call time, also in the child
    got = bounded(lambda: (emb.embedding(word), emb.embedding_batch([word, "b"])[0][0]), extra_mb=400)
    (want,) = expected(emb, [word])
    if want is None:
        assert got[0] is None
    else:
        np.testing.assert_allclose(got[0], want, rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(got[1], want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name", list(MODELS))
def test_a_large_batch_streams_in_bounded_memory(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """3 MiB of ~800-byte words: one tokenizer call held 45-390 MB (~15-130 bytes per byte, every id a Python int); in blocks 4-14 MB.

    ``tokenizers`` runs single-threaded here: under an address-space limit
    each new native thread reserves a 64 MiB malloc arena, and Rust aborts
    the process when an allocation fails.
    """
    monkeypatch.setenv("TOKENIZERS_PARALLELISM", "false")
    emb = model(name)
    words = [(("aü中😀x " * 200)[k % 11 :])[:400] + str(k) for k in range(4096)]
    assert sum(len(w.encode()) for w in words) > 3 << 20

    def batch() -> Any:
        out, found = emb.embedding_batch(words)
        return out[[0, 2049, 4095]], found[[0, 2049, 4095]]

    rows, found = bounded(batch, extra_mb=48)
    for row, ok, want in zip(rows, found, expected(emb, [words[0], words[2049], words[4095]]), strict=True):
        if want is None:
            assert not ok
        else:
            np.testing.assert_allclose(row, want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name", ["gguf-gpt2-bpe", "gguf-llama-spm"])
def test_blocks_cover_a_batch_exactly(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Blocks of at most BLOCK_BYTES bytes and BLOCK_WORDS words (a longer word alone), in order, nothing lost."""
    emb = model(name)
    tok = emb.vocab.tokenizer  # type: ignore[attr-defined]
    monkeypatch.setattr(tokenizer_module, "BLOCK_BYTES", 40)
    monkeypatch.setattr(tokenizer_module, "BLOCK_WORDS", 3)
    calls: list[list[str]] = []
    original = type(tok)._encode_block

    def spy(self: Tokenizer, impl: Any, words: list[str]) -> list[list[int]]:
        calls.append(words)
        return original(self, impl, words)

    monkeypatch.setattr(type(tok), "_encode_block", spy)
    words = ["ab", "é" * 30, "x", "y", "z", "w", "中" * 50, "q", "a b", ""]
    assert tok.encode_batch(words) == library_ids(tok, words)
    assert [w for block in calls for w in block] == words
    for block in calls:
        assert len(block) <= 3
        assert len(block) == 1 or sum(len(w.encode()) for w in block) <= 40
    assert ["中" * 50] in calls  # 150 bytes: a block of its own
    calls.clear()
    positions = np.concatenate([pos for pos, _ in emb.vocab.batch_subword_rows(words)])  # type: ignore[attr-defined]
    assert len(calls) > 3
    assert len(positions) == len(set(positions.tolist()))
    batch, found = emb.embedding_batch(words)
    for word, row, ok in zip(words, batch, found, strict=True):
        single = emb.embedding(word)
        assert ok == (single is not None)
        if ok:
            np.testing.assert_allclose(row, single, rtol=1e-5, atol=1e-6)
    assert tok.encode_batch([]) == []


def test_the_limit_is_checked_before_any_word_is_tokenized(monkeypatch: pytest.MonkeyPatch) -> None:
    emb = model("gguf-gpt2-bpe")
    tok = emb.vocab.tokenizer  # type: ignore[attr-defined]

    def fail(self: Tokenizer, impl: Any, words: list[str]) -> list[list[int]]:
        raise AssertionError("tokenized before the limit was checked")

    monkeypatch.setattr(type(tok), "_encode_block", fail)
    monkeypatch.setattr(tokenizer_module, "BLOCK_WORDS", 1)
    with pytest.raises(LimitExceeded):
        tok.encode_batch(["short", "words", "x" * (limits.MAX_TOKENIZE_BYTES + 1)])
    with pytest.raises(LimitExceeded):
        emb.embedding_batch(["short", "x" * (limits.MAX_TOKENIZE_BYTES + 1)])


def test_non_string_words_raise_type_error() -> None:
    tok = model("gguf-gpt2-bpe").vocab.tokenizer  # type: ignore[attr-defined]
    for bad in (None, 123, b"abc"):
        with pytest.raises(TypeError, match=type(bad).__name__):
            tok.encode_batch(["a", bad])
        with pytest.raises(TypeError, match=type(bad).__name__):
            tok.pieces(bad)


def test_the_limit_is_documented_and_a_limit_exceeded() -> None:
    assert limits.MAX_TOKENIZE_BYTES == 1 << 18
    assert "MAX_TOKENIZE_BYTES" in limits.__all__
    assert issubclass(LimitExceeded, ValueError)
    doc = (Path(__file__).resolve().parent.parent / "docs" / "reliability.md").read_text(encoding="utf-8")
    assert "`MAX_TOKENIZE_BYTES`" in doc
    models_doc = (Path(__file__).resolve().parent.parent / "docs" / "models.md").read_text(encoding="utf-8")
    assert "MAX_TOKENIZE_BYTES" in models_doc
