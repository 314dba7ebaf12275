"""Shared fixtures: golden data and the reference tools' test files, both committed under tests/data (see tests/data/README.md)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

DATA = Path(__file__).resolve().parent / "data"
GOLDEN = DATA / "golden"
GOLDEN_FILES = GOLDEN / "files"
#: The reference implementations' own test files (finalfusion-rust, finalfusion-python 0.7.1), copied unchanged.
TESTDATA = DATA / "testdata"

TINY_FILES = sorted(p.name for p in GOLDEN_FILES.glob("*.fifu"))


def load_json(name: str) -> Any:
    with open(GOLDEN / name, encoding="utf-8") as f:
        return json.load(f)


def word_of(case: dict[str, Any]) -> str:
    """The case's word, rebuilt from code points so editors cannot change it."""
    return "".join(chr(int(cp[2:], 16)) for cp in case["codepoints"])


@pytest.fixture(scope="session")
def testdata() -> Path:
    return TESTDATA


@pytest.fixture(scope="session")
def lookups() -> dict[str, Any]:
    return load_json("lookups.json")["cases"]  # type: ignore[no-any-return]


def check_lookups(emb: Any, lookups: dict[str, Any], atol: float) -> None:
    assert lookups
    for word, exp in lookups.items():
        idx = emb.vocab.idx(word)
        if exp["vocab_idx"] is None:
            assert idx is None or (isinstance(idx, list) and not idx), (word, idx)
            assert emb.embedding(word) is None
            assert word not in emb
            continue
        if isinstance(exp["vocab_idx"], list):
            assert list(idx) == exp["vocab_idx"], word
        else:
            assert idx == exp["vocab_idx"], word
        vec = emb.embedding(word)
        assert vec is not None, word
        np.testing.assert_allclose(vec, np.asarray(exp["embedding"], dtype=np.float32), atol=atol, rtol=0, err_msg=word)
        if "norm" in exp and exp["norm"] is not None:
            got, norm = emb.embedding_with_norm(word)
            np.testing.assert_allclose(got, vec, atol=0, rtol=0)
            assert norm == pytest.approx(exp["norm"], rel=1e-5, abs=1e-6), word


FUZZ_DIR = Path(__file__).resolve().parents[1] / "fuzz"


def load_fuzz() -> Any:
    """The stand-alone fuzzer module fuzz/fuzz.py (its reader registry, mutations and runner)."""
    import importlib.util
    import sys

    if "ff_fuzz" not in sys.modules:
        spec = importlib.util.spec_from_file_location("ff_fuzz", FUZZ_DIR / "fuzz.py")
        assert spec is not None
        assert spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules["ff_fuzz"] = module
        spec.loader.exec_module(module)
    return sys.modules["ff_fuzz"]


def assert_rows_match_lookups(emb: Any, words: list[str], matrix: Any, found: Any) -> None:
    """Every row of a batch lookup equals the single-word lookup (all zero where there is none)."""
    for i, w in enumerate(words):
        single = emb.embedding(w)
        assert found[i] == (single is not None), w
        if single is None:
            assert not matrix[i].any(), w
        else:
            np.testing.assert_allclose(matrix[i], single, rtol=1e-6, atol=1e-6, err_msg=w)


def make_scale_embeddings(path: Path, words: int = 5000, buckets_exp: int = 16, dims: int = 128, seed: int = 0) -> Any:
    """Write subword embeddings of a few tens of MB (default 36 MB) for the Dask and Ray tests; return them."""
    import finalfusion
    from finalfusion.subword import FinalfusionHashIndexer
    from finalfusion.vocab import FinalfusionBucketVocab

    vocab = FinalfusionBucketVocab([f"w{i}ort" for i in range(words)], FinalfusionHashIndexer(buckets_exp, 3, 6))
    matrix = np.random.default_rng(seed).standard_normal((vocab.upper_bound, dims), dtype=np.float32)
    emb = finalfusion.Embeddings(finalfusion.NdArray(matrix), vocab)
    emb.write(path)
    return emb


def scale_corpus(docs: int = 300, seed: int = 1) -> list[list[str]]:
    """Tokenised documents for make_scale_embeddings: known words, ~10% unknown ones, and an empty document."""
    rng = np.random.default_rng(seed)
    out: list[list[str]] = [[]]
    for _ in range(docs):
        n = int(rng.integers(1, 40))
        ids = rng.integers(0, 5000, n)
        out.append([f"unk{i}x" if rng.random() < 0.1 else f"w{i}ort" for i in ids])
    return out


def mapping_memory_kb(pid: int | str, path: str) -> dict[str, int]:
    """Rss and Pss (kB) of the mappings of ``path`` in process ``pid`` (from /proc/<pid>/smaps)."""
    totals = {"Rss": 0, "Pss": 0}
    inside = False
    with open(f"/proc/{pid}/smaps", encoding="utf-8", errors="replace") as f:
        for line in f:
            head = line.split(None, 1)[0]
            if not head.endswith(":"):  # a mapping's first line: address range, perms, ..., pathname
                inside = line.rstrip("\n").endswith(" " + path)
            elif inside and head[:-1] in totals:
                totals[head[:-1]] += int(line.split()[1])
    return totals


def assert_same_neighbours(got: list[Any], want: list[Any]) -> None:
    """Neighbour lists from a cluster equal serial ones: same words in the same order, cosines equal up to float rounding.

    (A batched query's matrix products may round differently for another batch composition.)
    """
    assert [w for w, _ in got] == [w for w, _ in want]
    for (word, g), (_, w) in zip(got, want, strict=True):
        assert [n for n, _ in g] == [n for n, _ in w], word
        np.testing.assert_allclose([s for _, s in g], [s for _, s in w], rtol=1e-5, atol=1e-6, err_msg=word)


def load_script(path: Path, name: str) -> Any:
    """Import a script that is not part of a package (an example, a docs hook, a fixture builder) as module ``name``."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def scale_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A mapped-size subword embeddings file for the Dask and Ray tests (one per test module)."""
    path = tmp_path_factory.mktemp("scale") / "big.fifu"
    make_scale_embeddings(path)
    return path


@pytest.fixture(scope="module")
def scale_emb(scale_file: Path) -> Any:
    """``scale_file`` loaded memory-mapped."""
    import finalfusion

    return finalfusion.load_finalfusion(scale_file, mmap=True)


def touch_rows(emb: Any) -> int:
    """Read every row of the mapped matrix (on a worker); return the worker's pid."""
    import os

    matrix = np.asarray(emb.storage)
    for lo in range(0, len(matrix), 8192):
        float(matrix[lo : lo + 8192].sum(dtype=np.float64))
    return os.getpid()
