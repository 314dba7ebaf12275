"""Pickling embeddings: mapped ones by reference to their file, everything else by value.

Covers every vocabulary x storage type with norms and metadata (by value,
metadata keeping its original TOML bytes), the reference for mmap'ed paths,
the FileChangedError when the file was replaced, and spawn-started worker
processes that receive a few hundred bytes and share the page cache.
"""

from __future__ import annotations

import concurrent.futures
import copy
import io
import mmap as mmap_module
import multiprocessing
import os
import pickle
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from finalfusion import Embeddings, FileChangedError, FinalfusionError, Metadata, NdArray, Norms, SimpleVocab, load_finalfusion
from test_roundtrip import STORAGES, VOCABS, WORDS, assert_same_chunks, make_embeddings

PROBES = [*WORDS, "Berliner", "zz", "naïver", "😀😀"]


def file_bytes(emb: Embeddings) -> bytes:
    buf = io.BytesIO()
    emb.write(buf)
    return buf.getvalue()


def assert_same_lookups(a: Embeddings, b: Embeddings, words: list[str]) -> None:
    for w in words:
        x, y = a.embedding(w), b.embedding(w)
        assert (x is None) == (y is None), w
        if x is not None:
            np.testing.assert_array_equal(x, y)
    ma, fa = a.embedding_batch(words * 4)
    mb, fb = b.embedding_batch(words * 4)
    np.testing.assert_array_equal(fa, fb)
    np.testing.assert_array_equal(ma, mb)


def mapped_matrix(emb: Embeddings) -> bool:
    """Whether the storage's array is a view of a memory map (not a private copy)."""
    base: Any = emb.storage.matrix if isinstance(emb.storage, NdArray) else emb.storage.quantized_embeddings  # type: ignore[attr-defined]
    while isinstance(base, (np.ndarray, memoryview)):
        base = base.base if isinstance(base, np.ndarray) else base.obj
    return isinstance(base, mmap_module.mmap)


@pytest.mark.parametrize("storage_kind", STORAGES)
@pytest.mark.parametrize("vocab_kind", list(VOCABS))
def test_by_value_every_type(vocab_kind: str, storage_kind: str, tmp_path: Path) -> None:
    emb = make_embeddings(vocab_kind, storage_kind, vocab_kind != "floret", True)
    emb.embedding_batch(PROBES * 8)  # warm the indexer caches: they must not break pickling
    for source in (emb, load_finalfusion(file_bytes(emb))):
        back = pickle.loads(pickle.dumps(source))
        assert back._file_ref is None
        assert_same_chunks(source, back)
        assert_same_lookups(source, back, PROBES)
        assert file_bytes(back) == file_bytes(source)


def test_metadata_keeps_original_toml_bytes(testdata: Path) -> None:
    # ff_buckets' metadata was written by Rust's TOML serialiser; tomli-w would format it differently.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        emb = load_finalfusion(testdata / "python-ff_buckets.fifu")
    meta = emb.metadata
    assert meta is not None
    assert Metadata(meta.data).to_toml().encode() != meta._source[0]  # type: ignore[attr-defined]
    back = pickle.loads(pickle.dumps(emb))
    assert back.metadata == meta
    assert back.metadata._source[0] == meta._source[0]  # type: ignore[union-attr]
    assert file_bytes(back) == file_bytes(emb)


def write_big(path: Path, rows: int = 20_000, dims: int = 64, seed: int = 0) -> Embeddings:
    rng = np.random.default_rng(seed)
    emb = Embeddings(NdArray(rng.standard_normal((rows, dims)).astype(np.float32)), SimpleVocab([f"w{i}" for i in range(rows)]), Norms(rng.random(rows) + 1))
    emb.metadata = Metadata({"seed": seed})
    emb.write(path)
    return emb


def test_mapped_path_pickles_as_reference(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "big.fifu"
    write_big(path)
    size = path.stat().st_size
    emb = load_finalfusion(path, mmap=True)
    data = pickle.dumps(emb)
    assert len(data) < 600 < size // 1000, (len(data), size)
    assert str(path).encode() in data
    back = pickle.loads(data)
    assert mapped_matrix(back)
    assert_same_chunks(emb, back)
    assert_same_lookups(emb, back, ["w0", "w19999", "nope"])
    # Pickling the unpickled copy gives the same reference again.
    assert pickle.dumps(back) == data
    # A relative path is made absolute, so workers with another cwd find the file.
    monkeypatch.chdir(tmp_path)
    rel = load_finalfusion("big.fifu", mmap=True)
    assert rel._file_ref == emb._file_ref


@pytest.mark.parametrize("source", ["bytes", "file object", "fd", "eager path"])
def test_other_sources_pickle_by_value(source: str, tmp_path: Path) -> None:
    path = tmp_path / "e.fifu"
    write_big(path, rows=2000)
    with open(path, "rb") as f:
        if source == "bytes":
            emb = load_finalfusion(path.read_bytes(), mmap=True)
        elif source == "file object":
            emb = load_finalfusion(f, mmap=True)
        elif source == "fd":
            emb = load_finalfusion(f.fileno(), mmap=True)
        else:
            emb = load_finalfusion(path)
    data = pickle.dumps(emb)
    assert len(data) > 2000 * 64 * 4
    back = pickle.loads(data)
    assert not mapped_matrix(back)
    path.unlink()  # by value: the file is not needed any more
    assert_same_chunks(emb, back)


def test_changes_after_loading_pickle_by_value(tmp_path: Path) -> None:
    path = tmp_path / "e.fifu"
    write_big(path, rows=500)
    small = len(pickle.dumps(load_finalfusion(path, mmap=True)))
    emb = load_finalfusion(path, mmap=True)
    emb.norms = Norms(np.ones(500, dtype=np.float32))
    back = pickle.loads(pickle.dumps(emb))
    np.testing.assert_array_equal(back.norms.norms, np.ones(500))  # type: ignore[union-attr]
    emb = load_finalfusion(path, mmap=True)
    assert emb.metadata is not None
    emb.metadata["seed"] = 99  # changed in place
    data = pickle.dumps(emb)
    assert len(data) > 100 * small
    assert pickle.loads(data).metadata["seed"] == 99
    emb = load_finalfusion(path, mmap=True)
    emb.metadata = None
    assert pickle.loads(pickle.dumps(emb)).metadata is None


@pytest.mark.parametrize("change", ["replaced", "same size and contents, new mtime", "appended", "deleted"])
def test_changed_file_is_refused(change: str, tmp_path: Path) -> None:
    path = tmp_path / "e.fifu"
    write_big(path, rows=3000)
    emb = load_finalfusion(path, mmap=True)
    data = pickle.dumps(emb)
    before = emb["w7"].copy()
    if change == "replaced":
        write_big(path, rows=3000, seed=1)  # atomic replace, same size
    elif change == "appended":
        with open(path, "ab") as f:
            f.write(b"\x00")
    elif change == "deleted":
        path.unlink()
    else:
        st = path.stat()
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    expected: type[Exception] = FileNotFoundError if change == "deleted" else FileChangedError
    with pytest.raises(expected) as info:
        pickle.loads(data)
    if change != "deleted":
        assert isinstance(info.value, FinalfusionError)
        assert str(path) in str(info.value)
    # The mapped embeddings themselves keep the old contents.
    np.testing.assert_array_equal(emb["w7"], before)


def test_copies_never_touch_the_file(tmp_path: Path) -> None:
    path = tmp_path / "e.fifu"
    write_big(path, rows=300)
    emb = load_finalfusion(path, mmap=True)
    shallow = copy.copy(emb)
    deep = copy.deepcopy(emb)
    path.unlink()
    assert shallow.storage is emb.storage
    assert deep._file_ref is None
    assert deep.storage.matrix.flags.writeable  # type: ignore[attr-defined]
    assert_same_chunks(emb, deep)


# -- worker processes ----------------------------------------------------------------


def worker_lookup(emb: Embeddings, words: list[str]) -> tuple[np.ndarray, bool, int]:
    """Runs in a spawned worker: a batch lookup, whether the storage is mapped, and the pid."""
    matrix, _ = emb.embedding_batch(words)
    return matrix, mapped_matrix(emb), os.getpid()


def test_spawned_workers_share_the_mapped_file(tmp_path: Path) -> None:
    path = tmp_path / "big.fifu"
    write_big(path, rows=40_000)
    emb = load_finalfusion(path, mmap=True)
    assert len(pickle.dumps(emb)) < 600
    words = [f"w{i}" for i in range(0, 40_000, 997)] + ["unknown"]
    expected, _ = emb.embedding_batch(words)
    ctx = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(max_workers=2, mp_context=ctx) as pool:
        results = list(pool.map(worker_lookup, [emb] * 4, [words] * 4))
    for matrix, mapped, pid in results:
        assert pid != os.getpid()
        assert mapped
        np.testing.assert_array_equal(matrix, expected)


def worker_unpickle(data: bytes) -> str:
    """Runs in a spawned worker: unpickle, and report the error class if that fails."""
    try:
        pickle.loads(data)
    except FinalfusionError as exc:
        return f"{type(exc).__name__}: {exc}"
    return "loaded"


def test_spawned_worker_reports_changed_file(tmp_path: Path) -> None:
    # (Passed directly as a ProcessPoolExecutor argument, an object that fails to
    # unpickle breaks the whole pool -- CPython behaviour, see docs/scaling.md --
    # so the worker unpickles explicitly here.)
    path = tmp_path / "big.fifu"
    write_big(path, rows=1000)
    data = pickle.dumps(load_finalfusion(path, mmap=True))
    ctx = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(max_workers=1, mp_context=ctx) as pool:
        assert pool.submit(worker_unpickle, data).result() == "loaded"
        write_big(path, rows=1000, seed=5)
        answer = pool.submit(worker_unpickle, data).result()
    assert answer.startswith("FileChangedError: "), answer
    assert str(path) in answer


@pytest.mark.parametrize("value", ["nan", "-nan", "inf", "1.5"])
def test_unchanged_metadata_is_written_as_read_after_pickling(value: str) -> None:
    # Found by the issue-13 campaign: NaN is valid TOML, and a NaN made anew by unpickling is unequal to itself, so the
    # unchanged document was written again through tomli-w (other bytes) instead of byte for byte as read.
    text = f"x = [[{value}, {{a.b = 2}}]]\ncorpus = 'wiki'\n"  # not as tomli-w writes it
    meta = Metadata.from_toml(text)
    meta._source = (text.encode(), copy.deepcopy(meta.data))  # as if read from a file
    emb = Embeddings(NdArray(np.eye(2, dtype=np.float32)), SimpleVocab(["a", "b"]), metadata=meta)
    first = io.BytesIO()
    emb.write(first)
    loaded = load_finalfusion(first.getvalue())
    direct, again = io.BytesIO(), io.BytesIO()
    loaded.write(direct)
    pickle.loads(pickle.dumps(loaded)).write(again)
    assert direct.getvalue() == again.getvalue() == first.getvalue()
    assert text.encode() in first.getvalue()  # byte for byte as read, not re-serialised


def test_metadata_whose_value_changed_type_is_written_anew() -> None:
    emb = Embeddings(NdArray(np.eye(2, dtype=np.float32)), SimpleVocab(["a", "b"]), metadata=Metadata.from_toml("x = 1\n"))
    buf = io.BytesIO()
    emb.write(buf)
    loaded = load_finalfusion(buf.getvalue())
    assert loaded.metadata is not None
    loaded.metadata["x"] = 1.0  # equal to 1, but another TOML value
    out = io.BytesIO()
    loaded.write(out)
    assert b"x = 1.0" in out.getvalue()
