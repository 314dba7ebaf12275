"""The text-format loaders take every kind of ``finalfusion.Source`` and say so in their signatures."""

from __future__ import annotations

import inspect
import io
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import finalfusion
from finalfusion import Embeddings
from finalfusion.compat import load, load_floret, load_sentencepiece, load_text, load_text_dims, load_word2vec, write_word2vec
from finalfusion.compat.sentencepiece import SentencePieceModel

TEXT = b"foo 3 4\nbar 0 1\n"
FLORET = b"2 3 3 6 2 2166136261 < >\n0 1 0 0 \n1 0 2 0 \n"


def _word2vec() -> bytes:
    buf = io.BytesIO()
    write_word2vec(buf, load_text(TEXT, normalize=False))
    return buf.getvalue()


LOADERS: list[tuple[str, Callable[..., Embeddings], bytes]] = [
    ("text", load_text, TEXT),
    ("text-dims", load_text_dims, b"2 2\n" + TEXT),
    ("word2vec", load_word2vec, _word2vec()),
    ("floret", load_floret, FLORET),
    ("load", load, b"2 2\n" + TEXT),
]


def _sources(path: Path, data: bytes, fd: int, f: Any) -> list[Any]:
    return [path, str(path), os.fsencode(path), fd, f, data, bytearray(data), memoryview(data)]


@pytest.mark.parametrize(("name", "loader", "data"), LOADERS, ids=[name for name, _, _ in LOADERS])
def test_every_source_kind_reads_the_same(tmp_path: Path, name: str, loader: Callable[..., Embeddings], data: bytes) -> None:
    path = tmp_path / name
    path.write_bytes(data)
    fd = os.open(path, os.O_RDONLY)
    with path.open("rb") as f:
        try:
            got = [loader(source).storage.matrix.tolist() for source in _sources(path, data, fd, f)]
        finally:
            os.close(fd)
    assert all(g == got[0] for g in got), name


@pytest.mark.parametrize("loader", [load_text, load_text_dims, load_word2vec, load_floret, load])
def test_first_parameter_is_file_typed_source(loader: Callable[..., Embeddings]) -> None:
    first = next(iter(inspect.signature(loader).parameters.values()))
    assert (first.name, first.annotation) == ("file", "Source")  # the module's finalfusion._source.Source
    assert loader.__globals__["Source"] is finalfusion.Source


def test_sentencepiece_model_is_typed_source_and_takes_a_descriptor(tmp_path: Path) -> None:
    first = next(iter(inspect.signature(load_sentencepiece).parameters.values()))
    assert (first.name, first.annotation) == ("model", "Source")
    path = tmp_path / "m.model"
    path.write_bytes(SentencePieceModel(["<unk>", "\u2581a", "b"], [0.0, 0.0, 0.0], [2, 1, 1]).to_proto())
    rows = np.array([[0, 0], [3, 4], [0, 1]], dtype=np.float32)
    fd = os.open(path, os.O_RDONLY)
    try:
        emb = load_sentencepiece(fd, rows, normalize=False)
    finally:
        os.close(fd)
    assert emb.vocab.words == ["<unk>", "\u2581a", "b"]
    with pytest.raises(TypeError, match="model must be a path, bytes, a file descriptor or a binary file object, got bool"):
        load_sentencepiece(True, rows)  # type: ignore[arg-type]
