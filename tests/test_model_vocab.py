"""A model's token table vocabulary (compat._model_vocab, safetensors and LightSeq): tokenizer.json, SentencePiece, fairseq, token lists."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from finalfusion import FormatError
from finalfusion.compat._model_vocab import (
    PLACEHOLDER,
    _looks_like_fairseq_dict,
    _tokenizer_from_bytes,
    hf_tokens,
    model_vocab,
    read_fairseq_dict,
    sentencepiece_tokens,
)
from finalfusion.vocab import HuggingFaceTokenizer, SentencePieceTokenizer, TokenizerVocab


def _piece(s: bytes) -> bytes:
    inner = b"\x0a" + bytes([len(s)]) + s
    return b"\x0a" + bytes([len(inner)]) + inner


def _hf(vocab: object, added: object = None) -> bytes:
    obj: dict[str, object] = {"model": {"vocab": vocab}}
    if added is not None:
        obj["added_tokens"] = added
    return json.dumps(obj).encode()


# --- read_fairseq_dict ---------------------------------------------------------------


def test_fairseq_dict_invalid_utf8_names_line_and_offset() -> None:
    with pytest.raises(FormatError, match="line 2 is not UTF-8") as err:
        read_fairseq_dict(b"a 1\nb\xff 2\n")
    assert err.value.offset == 4 + 1  # line 2 starts at 4, the bad byte is its second
    assert err.value.expected == "UTF-8 text"


def test_fairseq_dict_skips_blank_lines_and_crlf() -> None:
    assert read_fairseq_dict(b"a 1\r\n\r\n  \nb 2\r\n") == ["<s>", "<pad>", "</s>", "<unk>", "a", "b"]


def test_fairseq_dict_rejects_non_numeric_count() -> None:
    with pytest.raises(FormatError, match="line 1 is not '<token> <count>'"):
        read_fairseq_dict(b"a many\n")


def test_fairseq_dict_overwrite_keeps_first_id() -> None:
    tokens = read_fairseq_dict(b"a 1\nb 1\na 3 #fairseq:overwrite\n")
    assert tokens[4:] == ["a", "b"]


# --- hf_tokens --------------------------------------------------------------------------


@pytest.mark.parametrize("data", [b"\xff\xfe", b"{not json", b"[" * 100000])
def test_hf_tokens_refuse_invalid_json(data: bytes) -> None:
    with pytest.raises(FormatError, match=r"not a valid tokenizer\.json"):
        hf_tokens(data)


@pytest.mark.parametrize("bad", [-1, "3", True, 1.5])
def test_hf_tokens_rejects_bad_ids(bad: object) -> None:
    with pytest.raises(FormatError, match="a vocabulary id is not a non-negative integer"):
        hf_tokens(_hf({"a": bad}))


def test_hf_tokens_read_a_unigram_vocabulary_list() -> None:
    assert hf_tokens(_hf([["<unk>", 0.0], ["a", -1.5]])) == ["<unk>", "a"]


@pytest.mark.parametrize("entry", [[], "a", [3, 0.0]])
def test_hf_tokens_rejects_bad_unigram_entries(entry: object) -> None:
    with pytest.raises(FormatError, match=r"a Unigram vocabulary entry is not \[piece, score\]"):
        hf_tokens(_hf([["a", 0.0], entry]))


@pytest.mark.parametrize("doc", [b"[]", b'{"model": 3}', b'{"model": {"vocab": "abc"}}'])
def test_hf_tokens_refuse_a_document_without_model_vocab(doc: bytes) -> None:
    with pytest.raises(FormatError, match=r"the tokenizer has no model\.vocab"):
        hf_tokens(doc)


def test_hf_tokens_refuse_added_tokens_that_are_not_a_list() -> None:
    with pytest.raises(FormatError, match="added_tokens is not a list") as err:
        hf_tokens(_hf({"a": 0}, added={"id": 1}))
    assert err.value.found == "dict"


@pytest.mark.parametrize("entry", ["x", {"id": 1}, {"content": "x"}, {"id": -1, "content": "x"}, {"id": False, "content": "x"}])
def test_hf_tokens_refuse_an_added_token_without_id_or_content(entry: object) -> None:
    with pytest.raises(FormatError, match="an added token lacks its id or content"):
        hf_tokens(_hf({"a": 0}, added=[entry]))


def test_hf_tokens_refuse_an_implausibly_large_id() -> None:
    with pytest.raises(FormatError, match="the token ids leave too many ids without a token"):
        hf_tokens(_hf({"a": 1 << 24}))


def test_hf_tokens_duplicate_string_and_holes_get_placeholders() -> None:
    # id 2 repeats the string of id 0; id 1 has no token.
    assert hf_tokens(_hf({"a": 0}, added=[{"id": 2, "content": "a"}])) == ["a", PLACEHOLDER.format(1), PLACEHOLDER.format(2)]


def test_hf_tokens_of_an_empty_vocabulary_are_empty() -> None:
    assert hf_tokens(_hf({})) == []


# --- sentencepiece_tokens --------------------------------------------------------------


def test_sentencepiece_tokens_refuse_a_piece_that_is_not_utf8() -> None:
    with pytest.raises(FormatError, match="piece 1 is not UTF-8") as err:
        sentencepiece_tokens(_piece(b"a") + _piece(b"\xff"))
    assert err.value.offset == 2 + len(_piece(b"a"))


def test_sentencepiece_tokens_repeated_piece_is_placeholder() -> None:
    assert sentencepiece_tokens(_piece(b"a") + _piece(b"a")) == ["a", PLACEHOLDER.format(1)]


# --- detection ---------------------------------------------------------------------------


def test_a_fairseq_dictionary_is_recognised_by_its_lines() -> None:
    assert _looks_like_fairseq_dict(b"a 1\nb 2\n")
    assert not _looks_like_fairseq_dict(b"\xff\xfe 1\n")
    assert not _looks_like_fairseq_dict(b"")
    assert not _looks_like_fairseq_dict(b"a b\n")


def test_vocabulary_bytes_are_told_apart_json_fairseq_sentencepiece() -> None:
    tok, what = _tokenizer_from_bytes(_hf({"a": 0}), "", "<bytes>")
    assert isinstance(tok, HuggingFaceTokenizer)
    assert what == "tokenizer.json (<bytes>)"
    tokens, what = _tokenizer_from_bytes(b"a 1\n", "", "d")
    assert tokens[4:] == ["a"]
    assert what == "fairseq dictionary (d)"
    tok, what = _tokenizer_from_bytes(_piece(b"a"), ".model", "m")
    assert isinstance(tok, SentencePieceTokenizer)
    assert what == "SentencePiece (m)"


# --- model_vocab -------------------------------------------------------------------------


def test_model_vocab_without_tokenizer_needs_a_directory() -> None:
    with pytest.raises(ValueError, match="safetensors: the weights do not come from a directory"):
        model_vocab(None, None, 4, "safetensors")


def test_model_vocab_names_the_files_a_directory_lacks(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"no tokenizer\.json or tokenizer\.model"):
        model_vocab(None, tmp_path, 4, "safetensors")


def test_model_vocab_finds_tokenizer_json_in_directory(tmp_path: Path) -> None:
    (tmp_path / "tokenizer.json").write_bytes(_hf({"a": 0, "b": 1}))
    vocab, used, what = model_vocab(None, tmp_path, 3, "safetensors")
    assert isinstance(vocab, TokenizerVocab)
    assert list(vocab.words) == ["a", "b"]
    assert used == 2
    assert what == "tokenizer.json (tokenizer.json)"
    # The same through a directory path and through the file path.
    assert model_vocab(str(tmp_path), None, 3, "x")[1] == 2
    assert model_vocab(tmp_path / "tokenizer.json", None, 3, "x")[1] == 2


def test_model_vocab_reads_a_fairseq_dictionary_path(tmp_path: Path) -> None:
    path = tmp_path / "dict.txt"
    path.write_bytes(b"a 1\nb 1\n")
    vocab, used, what = model_vocab(path, None, 8, "LightSeq")
    assert list(vocab.words) == ["<s>", "<pad>", "</s>", "<unk>", "a", "b"]
    assert used == 6
    assert what == "fairseq dictionary (dict.txt)"


def test_model_vocab_reads_tokenizer_json_bytes() -> None:
    vocab, used, what = model_vocab(bytearray(_hf({"a": 0})), None, 1, "x")
    assert list(vocab.words) == ["a"]
    assert used == 1
    assert what == "tokenizer.json (<bytes>)"


def test_model_vocab_refuses_more_tokens_than_rows() -> None:
    with pytest.raises(FormatError, match="the table has fewer rows than the vocabulary has tokens") as err:
        model_vocab(HuggingFaceTokenizer(_hf({"a": 0, "b": 1, "c": 2})), None, 2, "safetensors")
    assert err.value.found == "2 rows"
    assert err.value.chunk == "safetensors"


def test_model_vocab_takes_a_sentencepiece_tokenizer_object() -> None:
    vocab, used, what = model_vocab(SentencePieceTokenizer(_piece(b"<unk>") + _piece(b"a")), None, 2, "x")
    assert list(vocab.words) == ["<unk>", "a"]
    assert used == 2
    assert what == "SentencePieceTokenizer"


def test_model_vocab_refuses_an_empty_token_list() -> None:
    with pytest.raises(FormatError, match="the vocabulary is empty"):
        model_vocab([], None, 2, "x")


def test_model_vocab_refuses_a_repeated_token() -> None:
    with pytest.raises(FormatError, match="token 2 repeats token 0"):
        model_vocab(["a", "b", "a"], None, 3, "x")


def test_model_vocab_rejects_non_strings() -> None:
    with pytest.raises(TypeError, match="a token list must hold strings"):
        model_vocab(["a", 1], None, 3, "x")
    with pytest.raises(TypeError, match="expected a path, a Tokenizer or a list of tokens, got int"):
        model_vocab(3, None, 3, "x")
