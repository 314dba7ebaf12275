"""Tokenizer objects, the [tokenizer] metadata table and TokenizerVocab: error paths and value semantics."""

from __future__ import annotations

import base64
import json
import pickle
import sys
import zlib
from pathlib import Path

import numpy as np
import pytest

from finalfusion import FormatError
from finalfusion.errors import MissingExtraError
from finalfusion.metadata import Metadata
from finalfusion.vocab import SimpleVocab
from finalfusion.vocab import tokenizer as tokmod
from finalfusion.vocab.tokenizer import (
    HuggingFaceTokenizer,
    SentencePieceTokenizer,
    Tokenizer,
    TokenizerVocab,
    restore_tokenizer_vocab,
    tokenizer_from_table,
    tokenizer_table,
    with_tokenizer_table,
)

TOY = tokmod._TOY_JSON
TOY_WORDS = ["[UNK]", "[CLS]", "ab", "a", "c", "b"]


def _table(data: bytes, kind: str = "huggingface", **extra: object) -> dict[str, object]:
    return {"kind": kind, "model": base64.b64encode(zlib.compress(data)).decode("ascii"), **extra}


# --- Tokenizer --------------------------------------------------------------------------


def test_from_bytes_unknown_kind() -> None:
    with pytest.raises(ValueError, match=r"unknown tokenizer kind 'bpe': expected one of \['huggingface', 'sentencepiece'\]"):
        Tokenizer.from_bytes("bpe", b"")


def test_registering_a_kind_twice_fails() -> None:
    with pytest.raises(RuntimeError, match="tokenizer kind 'huggingface' is registered twice"):
        type("Again", (Tokenizer,), {"kind": "huggingface"})


def test_value_semantics_and_pickle() -> None:
    a, b = HuggingFaceTokenizer(b"{}"), HuggingFaceTokenizer("{}")
    assert a == b
    assert hash(a) == hash(b)
    assert a != SentencePieceTokenizer(b"{}")  # same bytes, other kind
    assert a != "{}"
    assert repr(a) == "HuggingFaceTokenizer(<2 bytes>)"
    c = pickle.loads(pickle.dumps(a))
    assert c == a
    assert c._impl is None  # rebuilt lazily


def test_constructors_read_paths(tmp_path: Path) -> None:
    path = tmp_path / "tokenizer.json"
    path.write_text(TOY)
    assert HuggingFaceTokenizer(path).to_bytes() == TOY.encode()
    assert HuggingFaceTokenizer(str(path)).to_bytes() == TOY.encode()
    (tmp_path / "m.model").write_bytes(b"\x0a\x00")
    assert SentencePieceTokenizer(tmp_path / "m.model").to_bytes() == b"\x0a\x00"
    assert SentencePieceTokenizer(memoryview(b"xy")).to_bytes() == b"xy"


def test_missing_package_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "tokenizers", None)
    monkeypatch.setitem(sys.modules, "sentencepiece", None)
    with pytest.raises(MissingExtraError, match=r"needs the tokenizers package: pip install 'finalfusion-py\[interop\]'") as err:
        HuggingFaceTokenizer(TOY).encode("ab")
    assert err.value.name == "tokenizers"
    with pytest.raises(MissingExtraError, match="needs the sentencepiece package"):
        SentencePieceTokenizer(b"").pieces("ab")


def test_huggingface_rejects_malformed_json() -> None:
    pytest.importorskip("tokenizers")
    with pytest.raises(FormatError, match=r"tokenizer\.json: the tokenizers library rejects the tokenizer\.json"):
        HuggingFaceTokenizer(b'{"model": 3}').encode("a")
    with pytest.raises(FormatError, match=r"rejects the tokenizer\.json"):
        HuggingFaceTokenizer(b"\xff").encode("a")


def test_sentencepiece_rejects_malformed_model() -> None:
    pytest.importorskip("sentencepiece")
    with pytest.raises(FormatError, match="SentencePiece model: the sentencepiece library rejects the model"):
        SentencePieceTokenizer(b"\xff\xff\xff").encode("a")


def test_huggingface_unk_token_not_in_vocab_is_not_skipped() -> None:
    pytest.importorskip("tokenizers")
    doc = json.loads(TOY)
    doc["added_tokens"] = []
    doc["model"]["unk_token"] = "[MISSING]"
    tok = HuggingFaceTokenizer(json.dumps(doc))
    assert tok.skip_ids == frozenset()
    assert tok.pieces("abc") == ["ab", "c"]


# --- the [tokenizer] table ----------------------------------------------------------------


def test_table_round_trip() -> None:
    tok = HuggingFaceTokenizer(TOY)
    table = tokenizer_table(tok)
    assert table["encoding"] == "zlib+base64"
    assert table["bytes"] == len(TOY.encode())
    assert tokenizer_from_table(table) == tok


def test_table_not_a_table() -> None:
    with pytest.raises(FormatError, match="the tokenizer entry is not a table") as err:
        tokenizer_from_table(["huggingface"])
    assert err.value.found == "list"


def test_table_unknown_kind() -> None:
    with pytest.raises(FormatError, match="unknown tokenizer kind") as err:
        tokenizer_from_table(_table(b"{}", kind="wordpiece"))
    assert err.value.found == "wordpiece"


def test_table_model_missing() -> None:
    with pytest.raises(FormatError, match="the tokenizer model is missing") as err:
        tokenizer_from_table({"kind": "huggingface", "model": 3})
    assert err.value.found == "int"


@pytest.mark.parametrize("model", ["é", base64.b64encode(b"not zlib").decode(), base64.b64encode(zlib.compress(b"{}")[:-3]).decode()])
def test_table_model_not_zlib_base64(model: str) -> None:
    with pytest.raises(FormatError, match="the tokenizer model is not valid base64 of zlib data"):
        tokenizer_from_table({"kind": "huggingface", "model": model})


def test_table_model_too_large(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tokmod, "MAX_TOKENIZER_BYTES", 4)
    with pytest.raises(FormatError, match="the tokenizer model is too large") as err:
        tokenizer_from_table(_table(b"0123456789"))
    assert err.value.expected == "at most 4 bytes"


def test_table_wrong_size() -> None:
    with pytest.raises(FormatError, match="the tokenizer model has the wrong size") as err:
        tokenizer_from_table(_table(b"{}", bytes=3))
    assert err.value.expected == "3 bytes"
    assert err.value.found == "2 bytes"


# --- TokenizerVocab -----------------------------------------------------------------------


def test_tokenizer_vocab_needs_a_tokenizer() -> None:
    with pytest.raises(TypeError, match="tokenizer must be a Tokenizer, got str"):
        TokenizerVocab(["a"], "not a tokenizer")


def test_tokenizer_vocab_has_no_ngram_lengths() -> None:
    vocab = TokenizerVocab(["a"], HuggingFaceTokenizer("{}"))
    with pytest.raises(AttributeError, match="a TokenizerVocab has no n-gram lengths"):
        _ = vocab.min_n
    with pytest.raises(AttributeError, match="a TokenizerVocab has no n-gram lengths"):
        _ = vocab.max_n


def test_tokenizer_vocab_is_not_read_as_a_chunk() -> None:
    with pytest.raises(TypeError, match="read as a SimpleVocab chunk plus the \\[tokenizer\\] metadata table"):
        TokenizerVocab.read_payload(None)  # type: ignore[arg-type]


def test_batch_subword_rows_of_nothing() -> None:
    vocab = TokenizerVocab(["a"], HuggingFaceTokenizer("{}"))
    assert list(vocab.batch_subword_rows([])) == []


def test_ids_without_rows_are_dropped() -> None:
    pytest.importorskip("tokenizers")
    vocab = TokenizerVocab(TOY_WORDS[:5], HuggingFaceTokenizer(TOY))  # no row for "b" (id 5)
    assert vocab.subword_rows("cb").tolist() == [4]
    groups = [(p.tolist(), r.tolist()) for p, r in vocab.batch_subword_rows(["b", "cab", "c"])]
    assert groups == [([2], [[4]]), ([1], [[4, 2]])]


# --- metadata -----------------------------------------------------------------------------


def test_with_tokenizer_table_keeps_callers_metadata() -> None:
    meta = Metadata({"name": "toy"})
    vocab = TokenizerVocab(["a"], HuggingFaceTokenizer("{}"))
    out = with_tokenizer_table(vocab, meta)
    assert out is not None
    assert sorted(out) == ["name", "tokenizer"]
    assert sorted(meta) == ["name"]
    assert with_tokenizer_table(SimpleVocab(["a"]), meta) is meta


def test_restore_keeps_other_metadata() -> None:
    tok = HuggingFaceTokenizer(TOY)
    vocab, meta = restore_tokenizer_vocab(SimpleVocab(TOY_WORDS), Metadata({"name": "toy", "tokenizer": tokenizer_table(tok)}))
    assert isinstance(vocab, TokenizerVocab)
    assert vocab.tokenizer == tok
    assert vocab.words == TOY_WORDS
    assert meta is not None
    assert dict(meta) == {"name": "toy"}


def test_restore_leaves_others_alone() -> None:
    simple = SimpleVocab(["a"])
    meta = Metadata({"name": "toy"})
    assert restore_tokenizer_vocab(simple, meta) == (simple, meta)
    assert restore_tokenizer_vocab(simple, None) == (simple, None)


def test_restore_reports_the_offset_of_a_bad_table() -> None:
    with pytest.raises(FormatError, match="unknown tokenizer kind") as err:
        restore_tokenizer_vocab(SimpleVocab(["a"]), Metadata({"tokenizer": {"kind": "x", "model": ""}}), offset=123)
    assert err.value.offset == 123
    assert err.value.chunk == "metadata [tokenizer]"


def test_unknown_words_use_the_tokenizer() -> None:
    pytest.importorskip("tokenizers")
    from finalfusion import Embeddings, NdArray

    storage = NdArray(np.eye(6, dtype=np.float32))
    emb = Embeddings(storage, TokenizerVocab(TOY_WORDS, HuggingFaceTokenizer(TOY)))
    expected = (storage[2] + storage[4]) / np.sqrt(2)
    np.testing.assert_allclose(emb["abc"], expected, rtol=1e-6)
