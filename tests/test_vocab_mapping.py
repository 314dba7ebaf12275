"""A vocabulary behaves as a mapping from words to indices; an empty string table serialises to nothing."""

from __future__ import annotations

import pytest

from finalfusion import SimpleVocab
from finalfusion.vocab.base import serialize_strings


def test_vocab_maps_words_to_indices_and_tests_membership_of_iterables() -> None:
    vocab = SimpleVocab(["a", "b"])
    assert vocab["b"] == 1
    with pytest.raises(KeyError, match="'c'"):
        vocab["c"]
    assert ["a", "b"] in vocab  # every word of an iterable
    assert ("a", "c") not in vocab
    assert 3 not in vocab
    assert list(vocab) == ["a", "b"]


def test_serialize_strings_of_no_strings_is_empty() -> None:
    assert serialize_strings([]) == b""
