"""finalfusion.ann without its extra: importing works, building and loading name the `ann` extra.

Runs with and without the index libraries (CI's floor job has none): the
libraries are hidden through ``sys.modules`` here, so both jobs check the
same message.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from finalfusion import Embeddings, MissingExtraError, NdArray, SimpleVocab, ann
from finalfusion.ann._fingerprint import fingerprint
from finalfusion.ann._persist import _edge_digest

LIBRARIES = ("hnswlib", "faiss", "usearch", "usearch.index", "voyager")


@pytest.fixture
def no_libraries(monkeypatch: pytest.MonkeyPatch) -> None:
    for module in LIBRARIES:
        monkeypatch.setitem(sys.modules, module, None)


def small() -> Embeddings:
    rows = np.random.default_rng(0).standard_normal((300, 8)).astype(np.float32)
    return Embeddings(NdArray(rows), SimpleVocab([f"w{i}" for i in range(300)]))


@pytest.mark.usefixtures("no_libraries")
@pytest.mark.parametrize("backend", ["hnswlib", "faiss-hnsw", "faiss-ivf", "faiss-ivfpq", "usearch", "voyager"])
def test_build_names_the_extra(backend: str) -> None:
    with pytest.raises(MissingExtraError) as err:
        ann.build_index(small(), backend, **({"nlist": 4, "nbits": 4} if backend == "faiss-ivfpq" else {}))
    assert err.value.extra == "ann"
    assert "pip install 'finalfusion-py[ann]'" in str(err.value)
    assert isinstance(err.value, ImportError)


@pytest.mark.usefixtures("no_libraries")
def test_load_names_the_extra(tmp_path: Path) -> None:
    emb = small()
    out = tmp_path / "ix"
    out.mkdir()
    (out / "index.bin").write_bytes(b"an hnswlib file would be here")
    size, digest = _edge_digest(str(out / "index.bin"))
    header = {
        "format": "finalfusion-ann",
        "version": 1,
        "backend": "hnswlib",
        "params": {"M": 16, "ef_construction": 100, "ef": 64},
        "n": 300,
        "dims": 8,
        "count": 300,
        "fingerprint": fingerprint(emb).to_dict(),
        "source": None,
        "index_file": {"size": size, "digest": digest},
    }
    (out / "ann.json").write_text(json.dumps(header))
    with pytest.raises(MissingExtraError, match=r"finalfusion-py\[ann\]"):
        ann.load_index(out, emb)


def test_the_default_backend_is_registered() -> None:
    assert ann.DEFAULT_BACKEND in ann.backend_names()
    assert ann.backend_names() == ["faiss-hnsw", "faiss-ivf", "faiss-ivfpq", "hnswlib", "usearch", "voyager"]
