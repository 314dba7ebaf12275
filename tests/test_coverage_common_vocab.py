"""Shared converter helpers (row normalisation, exact float parsing, writable words) and the vocabulary mapping protocol."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from finalfusion import SimpleVocab
from finalfusion.compat._floats import exact_float32
from finalfusion.compat._words import check_writable_word
from finalfusion.norms import normalize_rows
from finalfusion.vocab.base import serialize_strings


def test_normalize_rows_needs_a_float32_matrix() -> None:
    with pytest.raises(ValueError, match="expected a 2-D float32 matrix, got 1-D float32"):
        normalize_rows(np.ones(3, dtype=np.float32))
    with pytest.raises(ValueError, match="expected a 2-D float32 matrix, got 2-D float64"):
        normalize_rows(np.ones((2, 2)))


@pytest.mark.parametrize("token", [b"abc", b"1.2.3", b"--1", b"1e"])
def test_exact_float32_rejects_non_decimals(token: bytes) -> None:
    with pytest.raises(ValueError, match="not a decimal"):
        exact_float32(token)


@pytest.mark.parametrize(
    ("token", "expected"),
    [
        (b"0", 0.0),
        (b"-0.000", -0.0),
        (b"1e-999999999999", 0.0),
        (b"1e999999999999", np.inf),
        (b"-1e999999999999", -np.inf),
        (b"3.40282356e38", np.finfo(np.float32).max),  # just below the overflow threshold: the largest float32
        (b"340282356779733661637539395458142568448", np.inf),  # exactly the midpoint to 2**128: a tie, rounds to even (inf)
        (b"3.4028235677973366e38", np.finfo(np.float32).max),  # float64 rounds it onto that midpoint; the decimal is below it
        (b"0.1", np.float32(0.1)),
    ],
)
def test_exact_float32_extremes(token: bytes, expected: float) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no RuntimeWarning from numpy at the edge of the float32 range
        value = exact_float32(token)
    assert value == np.float32(expected)
    assert np.signbit(value) == np.signbit(np.float32(expected))


def test_check_writable_word_rejects_non_strings() -> None:
    with pytest.raises(TypeError, match="words must be str, got bytes: b'ab'"):
        check_writable_word(b"ab", "word2vec")  # type: ignore[arg-type]


def test_vocab_mapping_protocol() -> None:
    vocab = SimpleVocab(["a", "b"])
    assert vocab["b"] == 1
    with pytest.raises(KeyError, match="'c'"):
        vocab["c"]
    assert ["a", "b"] in vocab  # every word of an iterable
    assert ("a", "c") not in vocab
    assert 3 not in vocab
    assert list(vocab) == ["a", "b"]


def test_serialize_no_strings() -> None:
    assert serialize_strings([]) == b""
