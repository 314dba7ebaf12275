"""``write_model2vec`` of a word vocabulary: words with Unicode spaces round-trip, words no text reaches are refused (issue 33).

The written tokenizer splits a text where fastText (and ``encode``) split
it -- ASCII space, tab, newline, vertical tab, form feed, carriage return
-- and nowhere else, so a word holding U+00A0, U+2028 or any other Unicode
space (every character of the categories Zs, Zl and Zp, and the other
characters Python or Rust call whitespace) keeps its own vector: checked
against finalfusion's ``encode`` and ``embedding`` before the round trip and
model2vec's own ``StaticModel`` on the written directory.
"""

from __future__ import annotations

import json
import sys
import unicodedata
from pathlib import Path

import numpy as np
import pytest

import finalfusion
from finalfusion import Embeddings
from finalfusion.storage import NdArray
from finalfusion.vocab import SimpleVocab

model2vec = pytest.importorskip("model2vec")
pytest.importorskip("tokenizers")

#: Every character of Zs, Zl, Zp and every other character Python's str.isspace() holds, but the six fastText splits at.
UNICODE_SPACES = sorted(
    {chr(c) for c in range(sys.maxunicode + 1) if unicodedata.category(chr(c)) in ("Zs", "Zl", "Zp") or chr(c).isspace()} - set(" \t\n\v\f\r")
)


def _embeddings(words: list[str], seed: int = 3) -> Embeddings:
    rng = np.random.default_rng(seed)
    matrix = (rng.normal(size=(len(words), 5)) * rng.uniform(0.5, 3, size=(len(words), 1))).astype(np.float32)
    return Embeddings(NdArray(matrix), SimpleVocab(words))


def _unit(v: np.ndarray) -> np.ndarray:
    return v / np.linalg.norm(v)


def test_the_spaces_are_the_unicode_ones() -> None:
    assert {"\xa0", "\u2028", "\u2029", "\u3000", "\u1680", "\x85", "\x1c"} <= set(UNICODE_SPACES)
    assert len(UNICODE_SPACES) >= 20


def test_words_with_unicode_spaces_round_trip(tmp_path: Path) -> None:
    words = ["a", "b", "c[UNK]d", "[UNK]"] + [f"a{c}b" for c in UNICODE_SPACES] + [f"{c}x" for c in UNICODE_SPACES[:5]]
    emb = _embeddings(words)
    finalfusion.write_model2vec(tmp_path / "m", emb)
    back = finalfusion.load(tmp_path / "m")
    static = model2vec.StaticModel.from_pretrained(str(tmp_path / "m"))
    texts = [f"a{c}b" for c in UNICODE_SPACES] + [f"a a{c}b  b\tc[UNK]d" for c in UNICODE_SPACES] + ["a b", "[UNK] a", "\xa0x a"]
    expected = emb.encode(texts)
    np.testing.assert_allclose(back.encode(texts), expected, rtol=1e-5, atol=1e-6)  # a batch: the space-piece table
    np.testing.assert_allclose(np.stack([back.encode(t) for t in texts]), expected, rtol=1e-5, atol=1e-6)  # one text at a time: the plain path
    np.testing.assert_allclose(static.encode(texts), expected, rtol=1e-5, atol=1e-6)
    for word in words:
        np.testing.assert_allclose(back.embedding(word), _unit(emb.embedding(word)), rtol=1e-5, atol=1e-6)  # the table holds unit vectors
    a_b = (_unit(emb.embedding("a")) + _unit(emb.embedding("b"))) / 2
    assert not np.allclose(back.encode("a\xa0b"), a_b)  # no longer the mean of "a" and "b"


def test_the_written_tokenizer_splits_where_fasttext_does(tmp_path: Path) -> None:
    finalfusion.write_model2vec(tmp_path / "m", _embeddings(["a", "b"]))
    doc = json.loads((tmp_path / "m" / "tokenizer.json").read_text(encoding="utf-8"))
    assert doc["pre_tokenizer"] == {"type": "Split", "pattern": {"Regex": "[\\t\\n\\x0B\\f\\r ]+"}, "behavior": "Removed", "invert": False}
    static = model2vec.StaticModel.from_pretrained(str(tmp_path / "m"))
    assert static.tokenizer.encode(" a\t\tb\r\n\v\fa\xa0b", add_special_tokens=False).tokens == ["a", "b", "[UNK]"]


@pytest.mark.parametrize("bad", ["new york", "tab\there", "line\nbreak", "v\vt", "f\ff", "cr\r", ""])
def test_words_no_text_reaches_are_refused_before_anything_is_written(tmp_path: Path, bad: str) -> None:
    emb = _embeddings(["a", bad, "b"])
    with pytest.raises(ValueError, match="model2vec cannot hold 1 word") as err:
        finalfusion.write_model2vec(tmp_path / "new", emb)
    assert repr(bad) in str(err.value)
    assert not (tmp_path / "new").exists()
    finalfusion.write_model2vec(tmp_path / "old", _embeddings(["a", "b"]))
    before = {p.name: p.read_bytes() for p in (tmp_path / "old").iterdir()}
    with pytest.raises(ValueError, match="model2vec cannot hold"):
        finalfusion.write_model2vec(tmp_path / "old", emb)
    assert {p.name: p.read_bytes() for p in (tmp_path / "old").iterdir()} == before


def test_the_refusal_names_at_most_ten_words(tmp_path: Path) -> None:
    emb = _embeddings([f"w {i}" for i in range(25)] + ["ok"])
    with pytest.raises(ValueError, match=r"cannot hold 25 word\(s\).*'w 9' \.\.\.$"):
        finalfusion.write_model2vec(tmp_path / "m", emb)
