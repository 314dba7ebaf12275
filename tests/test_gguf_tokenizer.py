"""GGUF tokenizer metadata: what the loader refuses in the tokenizer.ggml.* keys, and a Hugging Face tokenizer.json in the metadata."""

from __future__ import annotations

import json
import re
import struct

import pytest

from _gguf_files import ARRAY, TOKENS, gguf, kv_string, kv_u32, s
from finalfusion import FormatError, load_gguf
from finalfusion.vocab import HuggingFaceTokenizer, TokenizerVocab


def test_tokens_that_are_not_a_list_of_strings_are_refused() -> None:
    with pytest.raises(FormatError, match=re.escape("tokenizer.ggml.tokens is not a list of strings")) as err:
        load_gguf(gguf([kv_u32("tokenizer.ggml.tokens", 2)]))
    assert err.value.found == "uint32"


def test_a_file_without_tokens_names_the_keys_it_has() -> None:
    with pytest.raises(FormatError, match=r"no vocabulary \(tokenizer.ggml.tokens\)") as err:
        load_gguf(gguf([kv_u32("general.x", 2)]))
    assert err.value.found == ["general.x"]


def test_gpt2_merges_that_are_not_a_list_of_strings_are_refused() -> None:
    data = gguf([TOKENS, kv_string("tokenizer.ggml.model", "gpt2"), kv_u32("tokenizer.ggml.merges", 3)])
    with pytest.raises(FormatError, match=re.escape("tokenizer.ggml.merges is not a list of strings")):
        load_gguf(data)


def test_token_types_that_are_not_numbers_are_refused() -> None:
    data = gguf([TOKENS, kv_string("tokenizer.ggml.model", "gpt2"), kv_string("tokenizer.ggml.token_type", "normal")])
    with pytest.raises(FormatError, match=re.escape("tokenizer.ggml.token_type is not a numeric array")) as err:
        load_gguf(data)
    assert err.value.found == "string"


def test_token_types_of_another_length_than_the_tokens_are_refused() -> None:
    types = s("tokenizer.ggml.token_type") + struct.pack("<IIQ", ARRAY, 5, 3) + struct.pack("<iii", 1, 1, 1)
    data = gguf([TOKENS, kv_string("tokenizer.ggml.model", "gpt2"), types])
    with pytest.raises(FormatError, match=re.escape("tokenizer.ggml.token_type does not match the token list")) as err:
        load_gguf(data)
    assert err.value.expected == "2 entries"
    assert err.value.found == 3


def test_a_huggingface_tokenizer_in_the_metadata_becomes_the_vocabulary_tokenizer() -> None:
    doc = json.dumps({"model": {"type": "WordLevel", "vocab": {"a": 0, "b": 1}, "unk_token": "a"}})
    emb = load_gguf(gguf([TOKENS, kv_string("tokenizer.huggingface.json", doc)]), normalize=False)
    assert isinstance(emb.vocab, TokenizerVocab)
    assert emb.vocab.tokenizer == HuggingFaceTokenizer(doc)
    assert emb.storage.matrix.tolist() == [[0.0, 1.0], [2.0, 3.0]]
