"""The real finalfusion files of ../shared/testdata (never copied into the repo)."""

from __future__ import annotations

import io
import struct
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import finalfusion
import finalfusion.container
from conftest import check_lookups
from finalfusion import load_finalfusion
from finalfusion.storage import load_quantized_array, load_storage

FIFU_FILES = [
    "python-embeddings.fifu",
    "python-ff_buckets.fifu",
    "python-pq-check.fifu",
    "python-pq.fifu",
    "python-similarity.fifu",
    "python-simple_vocab.fifu",
    "rust-quantized.fifu",
    "rust-similarity.fifu",
]
#: Files whose header omits the trailing NdNorms chunk.
HEADER_OMITS_NORMS = {"python-embeddings.fifu", "python-ff_buckets.fifu"}


def _load(path: Path, mmap: bool = False) -> finalfusion.Embeddings:
    if path.name in HEADER_OMITS_NORMS:
        with pytest.warns(finalfusion.LegacyFormatWarning):
            return load_finalfusion(path, mmap=mmap)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return load_finalfusion(path, mmap=mmap)


def test_fifu_list_matches_directory(testdata: Path) -> None:
    assert sorted(p.name for p in testdata.glob("*.fifu")) == FIFU_FILES


@pytest.mark.parametrize("mmap", [False, True], ids=["eager", "mmap"])
@pytest.mark.parametrize("name", FIFU_FILES)
def test_loads_and_lookups(testdata: Path, lookups: dict[str, Any], name: str, mmap: bool) -> None:
    emb = _load(testdata / name, mmap)
    assert len(emb) == len(emb.vocab) > 0
    assert emb.storage.shape[0] == emb.vocab.upper_bound
    case = lookups.get(name)
    if case is not None and case["reader"].startswith("load_finalfusion"):
        check_lookups(emb, case["lookups"], atol=1e-5)


def test_golden_cases_are_covered(lookups: dict[str, Any]) -> None:
    ff_cases = {k for k, v in lookups.items() if v["reader"].startswith("load_finalfusion")}
    assert ff_cases == {"python-ff_buckets.fifu", "python-similarity.fifu", "python-pq.fifu", "rust-quantized.fifu"}


@pytest.mark.parametrize("mmap", [False, True], ids=["eager", "mmap"])
@pytest.mark.parametrize("name", FIFU_FILES)
def test_write_back(testdata: Path, name: str, mmap: bool, tmp_path: Path) -> None:
    original = (testdata / name).read_bytes()
    emb = _load(testdata / name, mmap)
    buf = io.BytesIO()
    emb.write(buf)
    written = buf.getvalue()
    if name in HEADER_OMITS_NORMS:
        (n_old,) = struct.unpack_from("<I", original, 8)
        old_ids = list(struct.unpack_from(f"<{n_old}I", original, 12))
        assert 6 not in old_ids
        new_ids = [*old_ids, 6]
        expected = original[:8] + struct.pack("<I", n_old + 1) + struct.pack(f"<{n_old + 1}I", *new_ids) + original[12 + 4 * n_old :]
        # Padding depends on absolute offsets: the new header is 4 bytes longer, still ≡ 0 mod 4.
        assert written == expected
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            again = load_finalfusion(written)
        assert again.norms is not None
        assert again.norms == emb.norms
    else:
        assert written == original
    path = tmp_path / name
    emb.write(path)
    assert path.read_bytes() == written
    # Storage and norms on the second thread, as large files are written.
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(finalfusion.container, "PARALLEL_TAIL_BYTES", 0)
        emb.write(path)
    assert path.read_bytes() == written


def test_header_omitting_norms_still_has_norms(testdata: Path) -> None:
    emb = _load(testdata / "python-embeddings.fifu")
    assert emb.norms is not None
    assert len(emb.norms) == 7
    _, norm = emb.embedding_with_norm("one")
    assert norm == pytest.approx(6.557, abs=1e-3)


def _wrapped_quantized(testdata: Path) -> bytes:
    bare = (testdata / "rust-quantized_storage.bin").read_bytes()
    assert struct.unpack_from("<I", bare, 0)[0] == 4
    return b"FiFu" + struct.pack("<III", 0, 1, 4) + bare


@pytest.mark.parametrize("mmap", [False, True], ids=["eager", "mmap"])
@pytest.mark.parametrize("loader", [load_quantized_array, load_storage], ids=["load_quantized_array", "load_storage"])
def test_bare_quantized_storage(testdata: Path, lookups: dict[str, Any], loader: Any, mmap: bool, tmp_path: Path) -> None:
    case = lookups["rust-quantized_storage.bin"]
    data = _wrapped_quantized(testdata)
    path = tmp_path / "wrapped.fifu"
    path.write_bytes(data)
    for source in (data, path):
        storage = loader(source, mmap=mmap)
        assert isinstance(storage, finalfusion.QuantizedArray)
        assert storage.shape == (100, 100)
        np.testing.assert_allclose(storage.rows(np.arange(3)), np.array(case["rows_0_to_2"], dtype=np.float32), rtol=1e-6, atol=1e-4)
        for i in range(3):
            np.testing.assert_allclose(storage.row(i), case["rows_0_to_2"][i], rtol=1e-6, atol=1e-4)
        assert storage.quantized_embeddings[0].tolist() == case["codes_row_0"]
        assert storage.norms is not None
        np.testing.assert_allclose(storage.norms[:3], case["norms_0_to_2"], rtol=1e-7)
        # Writing the chunk alone reproduces the wrapped file (same offset mod 4, same padding).
        buf = io.BytesIO()
        storage.write(buf)
        assert buf.getvalue() == data
