"""TokenizerVocab: unknown words through the real tokenizer, the subword rule, token rows, .fifu round trips, no extras."""

from __future__ import annotations

import io
import json
import pickle
import sys

import numpy as np
import pytest

from _model_helpers import (
    hf_skip,
    random_words,
    sentencepiece_skip,
    subword_rule,
    train_byte_level_bpe,
    train_sentencepiece,
    train_wordpiece,
)
from finalfusion import Embeddings, FormatError, Metadata, load_finalfusion
from finalfusion._tokenizers import _TOY_JSON as TOY
from finalfusion.errors import MissingExtraError
from finalfusion.storage import NdArray
from finalfusion.vocab import HuggingFaceTokenizer, SentencePieceTokenizer, SimpleVocab, Tokenizer, TokenizerVocab, load_vocab
from finalfusion.vocab._tokenizer_table import tokenizer_table

WORDS = random_words(400, seed=7)
SPM_CASES = [("unigram", False), ("unigram", True), ("bpe", False), ("bpe", True)]


def _matrix(n: int, dims: int = 16, seed: int = 3) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((n, dims)).astype(np.float32)


def _check_rule(emb: Embeddings, encode, skip: set[int], matrix: np.ndarray) -> int:
    """Every test word, token strings included (issue 25): the embedding is the mean of the kept rows; batch == single. Returns words checked."""
    batch, found = emb.embedding_batch(WORDS)
    checked = 0
    for word, row, ok in zip(WORDS, batch, found, strict=True):
        expected = subword_rule(matrix, encode(word), skip)
        single = emb.embedding(word)
        if expected is None:
            assert single is None, word
            assert not ok, word
            continue
        assert ok, word
        np.testing.assert_allclose(single, expected, rtol=0, atol=2e-6, err_msg=word)
        np.testing.assert_allclose(row, expected, rtol=0, atol=2e-6, err_msg=word)
        checked += 1
    return checked


@pytest.mark.parametrize(("model_type", "byte_fallback"), SPM_CASES)
def test_sentencepiece_unknown_words_follow_the_real_tokenizer(model_type: str, byte_fallback: bool) -> None:
    spm = pytest.importorskip("sentencepiece")
    proto = train_sentencepiece(model_type, byte_fallback)
    sp = spm.SentencePieceProcessor(model_proto=proto)
    pieces = [sp.IdToPiece(i) for i in range(sp.GetPieceSize())]
    matrix = _matrix(len(pieces))
    emb = Embeddings(NdArray(matrix.copy()), TokenizerVocab(pieces, SentencePieceTokenizer(proto)))
    checked = _check_rule(emb, sp.encode, sentencepiece_skip(sp), matrix)
    assert checked > 250
    word = next(w for w in WORDS if w not in emb.vocab)
    assert emb.vocab.subwords(word) == sp.encode_as_pieces(word)
    assert emb.vocab.idx(word) == [i for i in sp.encode(word) if i not in sentencepiece_skip(sp)]
    if byte_fallback:  # emoji outside the vocabulary become byte pieces, which are kept
        assert any(sp.IsByte(i) for w in WORDS for i in sp.encode(w))


@pytest.mark.parametrize("trainer", [train_byte_level_bpe, train_wordpiece])
def test_huggingface_unknown_words_follow_the_real_tokenizer(trainer) -> None:
    tokenizers = pytest.importorskip("tokenizers")
    text = trainer()
    tok = tokenizers.Tokenizer.from_str(text)
    vocab = tok.get_vocab(with_added_tokens=True)
    tokens = sorted(vocab, key=vocab.__getitem__)
    assert [vocab[t] for t in tokens] == list(range(len(tokens)))
    matrix = _matrix(len(tokens))
    emb = Embeddings(NdArray(matrix.copy()), TokenizerVocab(tokens, HuggingFaceTokenizer(text)))
    checked = _check_rule(emb, lambda w: tok.encode(w, add_special_tokens=False).ids, hf_skip(tok, text), matrix)
    assert checked > 150


def _spm_embeddings() -> tuple[Embeddings, np.ndarray, bytes]:
    pytest.importorskip("sentencepiece")
    proto = train_sentencepiece("bpe", True)
    from finalfusion.compat.sentencepiece import SentencePieceModel

    pieces = SentencePieceModel.parse(proto).pieces
    matrix = _matrix(len(pieces))
    return Embeddings(NdArray(matrix), TokenizerVocab(pieces, SentencePieceTokenizer(proto)), metadata=Metadata({"source": "test"})), matrix, proto


def test_fifu_round_trip_restores_the_tokenizer(tmp_path) -> None:
    emb, _, proto = _spm_embeddings()
    path = tmp_path / "spm.fifu"
    emb.write(path)
    assert emb.metadata == {"source": "test"}  # the caller's metadata is not modified
    for mmap in (False, True):
        back = load_finalfusion(path, mmap=mmap)
        assert isinstance(back.vocab, TokenizerVocab)
        assert back.vocab.tokenizer == SentencePieceTokenizer(proto)
        assert back.metadata == {"source": "test"}
        np.testing.assert_array_equal(back.embedding_batch(WORDS)[0], emb.embedding_batch(WORDS)[0])
    # Every other reader sees a plain SimpleVocab and a metadata table of short values.
    plain = load_vocab(path)
    assert type(plain) is SimpleVocab
    assert plain.words == emb.vocab.words
    from finalfusion.metadata import load_metadata

    table = load_metadata(path)["tokenizer"]
    assert table["kind"] == "sentencepiece"
    assert isinstance(table["model"], str)
    assert len(table["model"]) < len(proto)  # compressed, one string
    # Writing the loaded embeddings again gives the same bytes.
    again = io.BytesIO()
    load_finalfusion(path).write(again)
    assert again.getvalue() == path.read_bytes()


def test_pickle_and_similarity() -> None:
    emb, _, _ = _spm_embeddings()
    word = next(w for w in WORDS if w not in emb.vocab and emb.embedding(w) is not None)
    clone = pickle.loads(pickle.dumps(emb))
    np.testing.assert_array_equal(clone.embedding(word), emb.embedding(word))
    assert clone.vocab == emb.vocab
    result = emb.word_similarity(word, k=3)
    assert result is not None
    assert len(result) == 3
    idx, _sims = emb.word_similarity_batch([word, emb.vocab.words[5]], k=2)
    assert idx.shape == (2, 2)
    assert np.all(idx >= 0)


@pytest.mark.parametrize("package", ["sentencepiece", "tokenizers"])
def test_without_the_extra_token_rows_work_and_words_name_it(monkeypatch, package: str) -> None:
    """Issue 25: every word goes through the tokenizer, so without it word lookups name the extra; token rows stay reachable."""
    monkeypatch.setitem(sys.modules, package, None)  # import fails as if not installed
    if package == "sentencepiece":
        from finalfusion.compat.sentencepiece import SentencePieceModel

        tok: Tokenizer = SentencePieceTokenizer(SentencePieceModel(["<unk>", "a", "b"], [0.0] * 3, [2, 1, 1]).to_proto())
    else:
        tok = HuggingFaceTokenizer('{"model": {"type": "BPE", "vocab": {"<unk>": 0, "a": 1, "b": 2}, "merges": []}}')
    emb = Embeddings(NdArray(_matrix(3)), TokenizerVocab(["<unk>", "a", "b"], tok))
    assert emb.token_embedding("a").shape == (16,)
    assert emb.vocab.token_id("b") == 2
    with pytest.raises(MissingExtraError):
        emb.embedding("a")  # a token string too: the word rule needs the tokenizer
    with pytest.raises(MissingExtraError, match=r"finalfusion-py\[models\]") as info:
        emb.embedding("ab")
    assert isinstance(info.value, ImportError)
    assert package in str(info.value)
    with pytest.raises(MissingExtraError):
        emb.embedding_batch(["a", "ab"])
    buf = io.BytesIO()
    emb.write(buf)  # writing and reading need no extra either
    assert load_finalfusion(buf.getvalue()).token_embedding("b").tolist() == emb.token_embedding("b").tolist()


def _with_table(table: object) -> bytes:
    """A file whose metadata holds ``table`` under ``tokenizer`` (the writer refuses such an entry: it is patched in)."""
    emb = Embeddings(NdArray(_matrix(2)), SimpleVocab(["a", "b"]), metadata=Metadata({"tokenizeX": table}))
    buf = io.BytesIO()
    emb.write(buf)
    return buf.getvalue().replace(b"tokenizeX", b"tokenizer")


@pytest.mark.parametrize(
    "table",
    [
        {"kind": "nope", "model": ""},
        {"kind": "sentencepiece", "model": "!!!", "bytes": 3},
        {"kind": "sentencepiece", "model": "aGVsbG8=", "bytes": 5},  # base64 of b"hello": not zlib
        dict(tokenizer_table(HuggingFaceTokenizer("{}")), bytes=99),
    ],
)
def test_malformed_tokenizer_tables_are_format_errors(table: object) -> None:
    with pytest.raises(FormatError, match="tokenizer") as info:
        load_finalfusion(_with_table(table))
    assert info.value.offset is not None


def test_unusable_tokenizer_model_is_a_format_error_when_tokenizing() -> None:
    pytest.importorskip("sentencepiece")
    emb = Embeddings(NdArray(_matrix(2)), TokenizerVocab(["a", "b"], SentencePieceTokenizer(b"\x0a\x02not a model")))
    with pytest.raises(FormatError, match="sentencepiece"):
        emb.embedding("zz")


@pytest.mark.parametrize(
    ("vocab", "merges", "prefix"),
    [
        ({"a": 0}, ["a a"], None),  # the joined token is longer than every token
        ({"aa": 0, "bb": 1}, [["aa", "bb"]], None),  # the same, merges as pairs
        ({"a": 0, "b": 1, "ab": 2}, ["a b"], "##"),  # a right-hand token shorter than continuing_subword_prefix
    ],
)
def test_a_tokenizer_json_on_which_tokenizers_panics_is_a_format_error(vocab: dict[str, int], merges: list[object], prefix: str | None) -> None:
    # tokenizers panics on these (huggingface/tokenizers#2198); pyo3 raises a BaseException for a panic,
    # which `except Exception` does not catch. The panic must come out as a FormatError, on every lookup path.
    pytest.importorskip("tokenizers")
    text = json.dumps({"model": {"type": "BPE", "vocab": vocab, "merges": merges, "continuing_subword_prefix": prefix}})
    emb = Embeddings(NdArray(_matrix(len(vocab))), TokenizerVocab(list(vocab), HuggingFaceTokenizer(text)))
    with pytest.raises(FormatError, match=r"the tokenizers library rejects the tokenizer\.json") as info:
        emb.embedding("zz")
    assert "index" in str(info.value)  # the panic's message, not another error
    with pytest.raises(FormatError, match="rejects"):
        emb.embedding_batch(["zz", "a"])


def test_token_ids_without_rows_are_dropped() -> None:
    pytest.importorskip("tokenizers")
    text = '{"model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "c": 2}, "merges": []}}'
    matrix = _matrix(2)
    emb = Embeddings(NdArray(matrix), TokenizerVocab(["a", "b"], HuggingFaceTokenizer(text)))  # "c" (id 2) has no row
    np.testing.assert_allclose(emb.embedding("abc"), subword_rule(matrix, [0, 1], set()), atol=2e-6)
    assert emb.embedding("c") is None
    assert emb.vocab.upper_bound == 2


# --- the toy tokenizer: construction and the token rows ------------------------------------------

TOY_WORDS = ["[UNK]", "[CLS]", "ab", "a", "c", "b"]


def test_tokenizer_vocab_needs_a_tokenizer() -> None:
    with pytest.raises(TypeError, match="tokenizer must be a Tokenizer, got str"):
        TokenizerVocab(["a"], "not a tokenizer")


def test_tokenizer_vocab_has_no_ngram_lengths() -> None:
    vocab = TokenizerVocab(["a"], HuggingFaceTokenizer("{}"))
    with pytest.raises(AttributeError, match="a TokenizerVocab has no n-gram lengths"):
        _ = vocab.min_n
    with pytest.raises(AttributeError, match="a TokenizerVocab has no n-gram lengths"):
        _ = vocab.max_n


def test_tokenizer_vocab_is_not_read_as_a_chunk_of_its_own() -> None:
    with pytest.raises(TypeError, match="read as a SimpleVocab chunk plus the \\[tokenizer\\] metadata table"):
        TokenizerVocab.read_payload(None)  # type: ignore[arg-type]


def test_batch_subword_rows_of_no_words_yields_nothing() -> None:
    vocab = TokenizerVocab(["a"], HuggingFaceTokenizer("{}"))
    assert list(vocab.batch_subword_rows([])) == []


def test_subword_rows_and_batches_drop_ids_without_rows() -> None:
    pytest.importorskip("tokenizers")
    vocab = TokenizerVocab(TOY_WORDS[:5], HuggingFaceTokenizer(TOY))  # no row for "b" (id 5)
    assert vocab.subword_rows("cb").tolist() == [4]
    groups = [(p.tolist(), r.tolist()) for p, r in vocab.batch_subword_rows(["b", "cab", "c"])]
    assert groups == [([2], [[4]]), ([1], [[4, 2]])]


def test_a_word_is_the_mean_of_its_token_rows() -> None:
    pytest.importorskip("tokenizers")
    storage = NdArray(np.eye(6, dtype=np.float32))
    emb = Embeddings(storage, TokenizerVocab(TOY_WORDS, HuggingFaceTokenizer(TOY)))
    expected = (storage[2] + storage[4]) / 2  # issue 25: the mean of the model's rows (no norms: as it is)
    np.testing.assert_allclose(emb["abc"], expected, rtol=1e-6)
