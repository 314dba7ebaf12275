"""The tiny oracle-written files: lookups (eager and mmap) and byte-identical write-back."""

from __future__ import annotations

import io
import json
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import finalfusion
from conftest import GOLDEN_FILES, TINY_FILES, check_lookups
from finalfusion import Embeddings, load_finalfusion

BUGGY = "tiny_explicit_python_buggy_len.fifu"


def _expected(name: str) -> dict[str, Any]:
    with open(GOLDEN_FILES / f"{name}.json", encoding="utf-8") as f:
        return json.load(f)  # type: ignore[no-any-return]


def _load(path: Path, mmap: bool) -> Embeddings:
    if path.name == BUGGY:
        with pytest.warns(finalfusion.LegacyFormatWarning):
            return load_finalfusion(path, mmap=mmap)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return load_finalfusion(path, mmap=mmap)


def test_all_tiny_files_present() -> None:
    assert set(TINY_FILES) == {
        "tiny_bucket.fifu",
        "tiny_explicit.fifu",
        BUGGY,
        "tiny_fasttext_vocab.fifu",
        "tiny_quantized.fifu",
        "tiny_simple.fifu",
    }


@pytest.mark.parametrize("mmap", [False, True], ids=["eager", "mmap"])
@pytest.mark.parametrize("name", TINY_FILES)
def test_tiny_lookups(name: str, mmap: bool) -> None:
    emb = _load(GOLDEN_FILES / name, mmap)
    check_lookups(emb, _expected(name)["lookups"], atol=1e-6)


@pytest.mark.parametrize("mmap", [False, True], ids=["eager", "mmap"])
@pytest.mark.parametrize("name", TINY_FILES)
def test_tiny_write_back_identical(name: str, mmap: bool, tmp_path: Path) -> None:
    emb = _load(GOLDEN_FILES / name, mmap)
    target_name = "tiny_explicit.fifu" if name == BUGGY else name
    expected = (GOLDEN_FILES / target_name).read_bytes()
    buf = io.BytesIO()
    emb.write(buf)
    assert buf.getvalue() == expected
    out = tmp_path / "out.fifu"
    emb.write(out)
    assert out.read_bytes() == expected


def test_buggy_len_differs_only_in_length_field() -> None:
    buggy = (GOLDEN_FILES / BUGGY).read_bytes()
    good = (GOLDEN_FILES / "tiny_explicit.fifu").read_bytes()
    assert len(buggy) == len(good)
    diff = [i for i in range(len(good)) if good[i] != buggy[i]]
    assert diff
    assert max(diff) - min(diff) < 8


def test_tiny_quantized_reconstruction() -> None:
    emb = load_finalfusion(GOLDEN_FILES / "tiny_quantized.fifu")
    storage = emb.storage
    assert isinstance(storage, finalfusion.QuantizedArray)
    pq = storage.quantizer
    assert pq.projection is not None
    assert storage.norms is not None
    codes = storage.quantized_embeddings
    q = pq.quantized_len
    lookups = _expected("tiny_quantized.fifu")["lookups"]
    differs_with_p = False
    for word, exp in lookups.items():
        i = exp["vocab_idx"]
        concat = np.concatenate([pq.quantizers[j, codes[i, j]] for j in range(q)])
        manual = (concat @ pq.projection.T) * storage.norms[i]
        wrong = (concat @ pq.projection) * storage.norms[i]
        np.testing.assert_allclose(manual, exp["embedding"], atol=1e-6)
        np.testing.assert_allclose(emb[word], exp["embedding"], atol=1e-6)
        np.testing.assert_allclose(storage.row(i), exp["embedding"], atol=1e-6)
        differs_with_p |= not np.allclose(wrong, exp["embedding"], atol=1e-3)
    assert differs_with_p, "the golden projection should be non-orthogonal"
    np.testing.assert_allclose(
        storage.rows(np.arange(3)),
        np.array([lookups[w]["embedding"] for w in ("a", "b", "c")]),
        atol=1e-6,
    )
