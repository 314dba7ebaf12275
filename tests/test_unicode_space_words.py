"""Words with non-ASCII whitespace: written to text/word2vec when the readers give them back unchanged.

finalfusion-rust's text reader splits lines on ASCII whitespace only
(``split(|c| c.is_ascii_whitespace())`` in src/compat/text.rs), as ours does;
its word2vec reader reads a word up to a space and ``trim``s it (Unicode
whitespace), as ours does. So U+00A0 or U+3000 inside a word survive both
formats, and at a word's edge survive the text formats only.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from finalfusion import load_text, load_text_dims, load_word2vec
from finalfusion.compat import write_text, write_text_dims, write_word2vec
from finalfusion.compat._build import embeddings_from

INSIDE = ["New\u00a0York", "ideographic\u3000space", "em\u2003dash", "file\x1cseparator"]
EDGES = ["\u00a0lead", "trail\u3000", "\u2003"]


def round_trip(tmp_path: Path, words: list[str], write: object, load: object) -> list[str]:
    matrix = np.arange(2 * len(words), dtype=np.float32).reshape(len(words), 2) + 1
    emb = embeddings_from(words, matrix, normalize=False)
    path = tmp_path / "out"
    write(path, emb)  # type: ignore[operator]
    back = load(path, normalize=False)  # type: ignore[operator]
    np.testing.assert_array_equal(back.storage.matrix, matrix)
    return list(back.vocab.words)


@pytest.mark.parametrize(("write", "load"), [(write_text, load_text), (write_text_dims, load_text_dims)], ids=["text", "text-dims"])
def test_text_keeps_unicode_spaces_anywhere(tmp_path: Path, write: object, load: object) -> None:
    words = ["plain", *INSIDE, *EDGES]
    assert round_trip(tmp_path, words, write, load) == words


def test_word2vec_keeps_unicode_spaces_inside(tmp_path: Path) -> None:
    words = ["plain", *INSIDE]
    assert round_trip(tmp_path, words, write_word2vec, load_word2vec) == words


@pytest.mark.parametrize("word", EDGES)
def test_word2vec_refuses_edge_spaces_it_would_trim(tmp_path: Path, word: str) -> None:
    emb = embeddings_from(["plain", word], np.ones((2, 2), dtype=np.float32), normalize=False)
    with pytest.raises(ValueError, match="starts or ends with whitespace"):
        write_word2vec(tmp_path / "out.bin", emb)


def test_finalfusion_rust_text_reader_splits_on_ascii_whitespace_only() -> None:
    # The rule above, checked against a file as finalfusion-rust writes it ("{word} {components}"):
    # a U+00A0 is part of the word, a tab separates fields.
    emb = load_text("caf\u00e9\u00a0au\u00a0lait 1 2\nx\t3 4\n".encode(), normalize=False)
    assert emb.vocab.words == ["caf\u00e9\u00a0au\u00a0lait", "x"]
