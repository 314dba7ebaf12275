"""The [tokenizer] metadata table: a tokenizer stored in a .fifu file, and the vocabulary round trip through it."""

from __future__ import annotations

import base64
import zlib

import pytest

from finalfusion import FormatError, limits
from finalfusion._tokenizers import _TOY_JSON as TOY
from finalfusion.metadata import Metadata
from finalfusion.vocab import HuggingFaceTokenizer, SimpleVocab, TokenizerVocab
from finalfusion.vocab._tokenizer_table import tokenizer_from_table, tokenizer_table
from finalfusion.vocab.tokenizer import restore_tokenizer_vocab, with_tokenizer_table

TOY_WORDS = ["[UNK]", "[CLS]", "ab", "a", "c", "b"]


def _table(data: bytes, kind: str = "huggingface", **extra: object) -> dict[str, object]:
    return {"kind": kind, "model": base64.b64encode(zlib.compress(data)).decode("ascii"), "bytes": len(data), **extra}


# --- the table ------------------------------------------------------------------------------


def test_table_round_trip_is_zlib_base64_with_the_size() -> None:
    tok = HuggingFaceTokenizer(TOY)
    table = tokenizer_table(tok)
    assert table["encoding"] == "zlib+base64"
    assert table["bytes"] == len(TOY.encode())
    assert tokenizer_from_table(table) == tok


def test_table_that_is_not_a_table_is_refused() -> None:
    with pytest.raises(FormatError, match="the tokenizer entry is not a table") as err:
        tokenizer_from_table(["huggingface"])
    assert err.value.found == "list"


def test_table_with_an_unknown_kind_is_refused() -> None:
    with pytest.raises(FormatError, match="unknown tokenizer kind") as err:
        tokenizer_from_table(_table(b"{}", kind="wordpiece"))
    assert err.value.found == "wordpiece"


def test_table_without_a_model_string_is_refused() -> None:
    with pytest.raises(FormatError, match="the tokenizer model is missing") as err:
        tokenizer_from_table({"kind": "huggingface", "model": 3})
    assert err.value.found == "int"


@pytest.mark.parametrize("model", ["é", base64.b64encode(b"not zlib").decode(), base64.b64encode(zlib.compress(b"{}")[:-3]).decode()])
def test_table_model_that_is_not_zlib_base64_is_refused(model: str) -> None:
    with pytest.raises(FormatError, match="the tokenizer model is not valid base64 of zlib data"):
        tokenizer_from_table({"kind": "huggingface", "model": model, "bytes": 2})


def test_table_model_inflating_past_the_limit_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(limits, "MAX_TOKENIZER_BYTES", 4)
    with pytest.raises(FormatError, match="the tokenizer model is too large") as err:
        tokenizer_from_table(_table(b"0123456789"))
    assert err.value.expected == "at most finalfusion.limits.MAX_TOKENIZER_BYTES = 4 bytes"


def test_table_model_of_the_wrong_size_is_refused() -> None:
    with pytest.raises(FormatError, match="the tokenizer model has the wrong size") as err:
        tokenizer_from_table(_table(b"{}", bytes=3))
    assert err.value.expected == "3 bytes"
    assert err.value.found == "2 bytes"


# --- the vocabulary and the metadata -----------------------------------------------------------


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


def test_restore_leaves_other_vocabularies_and_metadata_alone() -> None:
    simple = SimpleVocab(["a"])
    meta = Metadata({"name": "toy"})
    assert restore_tokenizer_vocab(simple, meta) == (simple, meta)
    assert restore_tokenizer_vocab(simple, None) == (simple, None)


def test_restore_reports_the_offset_of_a_bad_table() -> None:
    with pytest.raises(FormatError, match="unknown tokenizer kind") as err:
        restore_tokenizer_vocab(SimpleVocab(["a"]), Metadata({"tokenizer": {"kind": "x", "model": ""}}), offset=123)
    assert err.value.offset == 123
    assert err.value.chunk == "metadata [tokenizer]"
