"""The buffering limits are read at call time: lowering and raising each one changes the outcome for every reader that uses it.

``finalfusion.limits.MAX_HEADER_LINE_BYTES`` (word2vec, text-dims and floret
headers), ``MAX_WORD_BYTES`` (word2vec words, fastText dictionary words) and
``MAX_LINE_BYTES`` (text and text-dims lines) are plain module attributes,
like ``MAX_DIMS`` (tests/test_bounds.py): a file just over a limit is refused
naming it, and loads once the limit is raised -- also past the default.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

import finalfusion
import finalfusion.limits as limits
from finalfusion import Embeddings, FastTextVocab, FormatError, NdArray, SimpleVocab
from finalfusion.subword import FastTextIndexer


def emb_with_word(word: str, dims: int = 3) -> Embeddings:
    return Embeddings(NdArray(np.arange(2 * dims, dtype=np.float32).reshape(2, dims) + 1), SimpleVocab([word, "b"]))


def word2vec_bytes(word: str) -> bytes:
    out = io.BytesIO()
    finalfusion.write_word2vec(out, emb_with_word(word))
    return out.getvalue()


def text_bytes(word: str) -> bytes:
    out = io.BytesIO()
    finalfusion.write_text(out, emb_with_word(word))
    return out.getvalue()


def text_dims_bytes(word: str) -> bytes:
    out = io.BytesIO()
    finalfusion.write_text_dims(out, emb_with_word(word))
    return out.getvalue()


def fasttext_bytes(word: str, tmp: Path) -> bytes:
    vocab = FastTextVocab([word, "b"], FastTextIndexer(4, 3, 4))
    path = tmp / "model.bin"
    finalfusion.write_fasttext(path, Embeddings(NdArray(np.ones((6, 3), dtype=np.float32)), vocab))
    return path.read_bytes()


def padded_header(data: bytes, width: int) -> bytes:
    """``data`` with its first header number written with leading zeros, so the header line is ``width`` bytes long (newline included)."""
    line, rest = data.split(b"\n", 1)
    first, others = line.split(b" ", 1)
    return first.rjust(width - len(others) - 2, b"0") + b" " + others + b"\n" + rest


def floret_bytes() -> bytes:
    return b"4 2 3 6 2 0 < >\n" + b"".join(f"{i} 1 2\n".encode() for i in range(4))


def outcome(load: Callable[[bytes], Embeddings], data: bytes) -> str:
    try:
        load(data)
    except FormatError as exc:
        return str(exc)
    return "ok"


def check_limit(monkeypatch: pytest.MonkeyPatch, name: str, load: Callable[[bytes], Embeddings], data: bytes, needed: int) -> None:
    """``data`` needs the limit ``name`` to be at least ``needed``: refused (naming the limit) below it, loaded from it on."""
    monkeypatch.setattr(limits, name, needed - 1)
    got = outcome(load, data)
    assert got != "ok"
    assert f"finalfusion.limits.{name}" in got, got
    monkeypatch.setattr(limits, name, needed)
    assert outcome(load, data) == "ok"


HEADER_READERS: dict[str, tuple[Callable[[bytes], Embeddings], Callable[[], bytes]]] = {
    "word2vec": (finalfusion.load_word2vec, lambda: word2vec_bytes("a")),
    "text-dims": (finalfusion.load_text_dims, lambda: text_dims_bytes("a")),
    "floret": (finalfusion.load_floret, floret_bytes),
}


@pytest.mark.parametrize("reader", sorted(HEADER_READERS))
@pytest.mark.parametrize("width", [64, limits.MAX_HEADER_LINE_BYTES + 100])
def test_header_line_limit(reader: str, width: int, monkeypatch: pytest.MonkeyPatch) -> None:
    load, make = HEADER_READERS[reader]
    data = padded_header(make(), width)
    if width > limits.MAX_HEADER_LINE_BYTES:
        assert outcome(load, data) != "ok"  # refused at the default
    check_limit(monkeypatch, "MAX_HEADER_LINE_BYTES", load, data, width)


@pytest.mark.parametrize("length", [1000, limits.MAX_WORD_BYTES + 3 * 4096])
def test_word_limit_word2vec(length: int, monkeypatch: pytest.MonkeyPatch) -> None:
    from finalfusion.compat import word2vec

    block = 64 if length < 4096 else 4096
    monkeypatch.setattr(word2vec, "_BLOCK", block)  # the word arrives in pieces: the reader waits for its space
    data = word2vec_bytes("w" * length)
    if length > limits.MAX_WORD_BYTES:
        assert "MAX_WORD_BYTES" in outcome(finalfusion.load_word2vec, data)  # refused at the default
    # The cap bounds what the reader holds while it waits for the space: exact up to a block.
    monkeypatch.setattr(limits, "MAX_WORD_BYTES", length // 2)
    assert "MAX_WORD_BYTES" in outcome(finalfusion.load_word2vec, data)
    monkeypatch.setattr(limits, "MAX_WORD_BYTES", length + 2 * block)
    assert outcome(finalfusion.load_word2vec, data) == "ok"


@pytest.mark.parametrize("length", [100, pytest.param(limits.MAX_WORD_BYTES + 10, marks=pytest.mark.slow)])
def test_word_limit_fasttext(length: int, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    data = fasttext_bytes("w" * length, tmp_path)
    if length > limits.MAX_WORD_BYTES:
        assert "MAX_WORD_BYTES" in outcome(finalfusion.load_fasttext, data)
    check_limit(monkeypatch, "MAX_WORD_BYTES", finalfusion.load_fasttext, data, length)


LINE_READERS: dict[str, tuple[Callable[[bytes], Embeddings], Callable[[str], bytes]]] = {
    "text": (finalfusion.load_text, text_bytes),
    "text-dims": (finalfusion.load_text_dims, text_dims_bytes),
}


@pytest.mark.parametrize("reader", sorted(LINE_READERS))
def test_line_limit(reader: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from finalfusion.compat import text

    monkeypatch.setattr(text, "_BLOCK", 64)  # the line arrives in pieces, most without its end
    load, make = LINE_READERS[reader]
    data = make("w" * 5000)
    monkeypatch.setattr(limits, "MAX_LINE_BYTES", 1000)
    assert "MAX_LINE_BYTES" in outcome(load, data)
    monkeypatch.setattr(limits, "MAX_LINE_BYTES", 6000)
    assert outcome(load, data) == "ok"
    monkeypatch.setattr(limits, "MAX_LINE_BYTES", 4000)
    assert "MAX_LINE_BYTES" in outcome(load, data)
