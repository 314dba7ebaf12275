"""Inputs of the loaders: text-mode file objects are refused with one clear TypeError; bytes paths and empty mapped files."""

from __future__ import annotations

import io
import os
from pathlib import Path

import numpy as np
import pytest

import finalfusion
from finalfusion import Embeddings, FormatError, NdArray, SimpleVocab, load_finalfusion


@pytest.mark.parametrize("loader", ["load_finalfusion", "load_word2vec", "load_text", "load_text_dims", "load_fasttext", "load"])
def test_text_mode_file_objects_are_refused(loader: str) -> None:
    with pytest.raises(TypeError, match="the file object must be opened in binary mode"):
        getattr(finalfusion, loader)(io.StringIO("FiFu and more text than a header"))


def test_text_mode_file_object_refused_when_reporting_progress() -> None:
    with pytest.raises(TypeError, match="the file object must be opened in binary mode"):
        finalfusion.load_text(io.StringIO("a 1 2\n"), progress=lambda *args: None)


def test_bytes_path(tmp_path: Path) -> None:
    path = tmp_path / "e.fifu"
    Embeddings(NdArray(np.eye(2, dtype=np.float32)), SimpleVocab(["a", "b"])).write(path)
    emb = load_finalfusion(os.fsencode(path))
    assert emb.vocab.words == ["a", "b"]
    np.testing.assert_array_equal(emb["b"], [0.0, 1.0])


def test_empty_file_mapped(tmp_path: Path) -> None:
    path = tmp_path / "empty.fifu"
    path.write_bytes(b"")
    with pytest.raises(FormatError), open(path, "rb") as f:
        load_finalfusion(f, mmap=True)
