"""Writing to paths: the storage written on a second thread, disk space reserved up front."""

from __future__ import annotations

import errno
import io
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import finalfusion._atomic as atomic
import finalfusion.container as container
from finalfusion import Embeddings, load_finalfusion
from finalfusion.metadata import Metadata
from finalfusion.norms import Norms
from finalfusion.storage import NdArray
from finalfusion.subword import FinalfusionHashIndexer
from finalfusion.vocab import FinalfusionBucketVocab, SimpleVocab


def embeddings(rows: int = 3000, dims: int = 40, seed: int = 0) -> Embeddings:
    rng = np.random.default_rng(seed)
    words = [f"wört-{seed}-{i}" for i in range(rows)]
    norms = Norms(rng.random(rows).astype(np.float32) + 1)
    return Embeddings(NdArray(rng.standard_normal((rows, dims)).astype(np.float32)), SimpleVocab(words), norms, Metadata({"seed": seed}))


def in_memory(emb: Embeddings) -> bytes:
    buf = io.BytesIO()
    emb.write(buf)
    return buf.getvalue()


def temp_files(directory: Path) -> list[Path]:
    return sorted(directory.glob(".*.tmp"))


@pytest.mark.parametrize("tail_threshold", [0, 1 << 60], ids=["threaded", "sequential"])
def test_path_write_equals_stream_write(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tail_threshold: int) -> None:
    monkeypatch.setattr(container, "PARALLEL_TAIL_BYTES", tail_threshold)
    rng = np.random.default_rng(1)
    bucket_vocab = FinalfusionBucketVocab([f"w{i}" for i in range(50)], FinalfusionHashIndexer(8))
    bucket = Embeddings(NdArray(rng.standard_normal((50 + 2**8, 7)).astype(np.float32)), bucket_vocab)
    for emb in (embeddings(), embeddings(rows=1, dims=1, seed=2), bucket):
        path = tmp_path / "out.fifu"
        emb.write(path)
        assert path.read_bytes() == in_memory(emb)
        assert not temp_files(tmp_path)


def test_large_file_uses_the_tail_thread(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    started: list[str] = []
    original = atomic.run_in_background

    def spy(task: Any, meanwhile: Any) -> None:
        started.append("tail")
        original(task, meanwhile)

    monkeypatch.setattr(atomic, "run_in_background", spy)
    big = embeddings(rows=40_000, dims=60)  # 9.6 MB of storage: above the 8 MiB threshold
    big.write(tmp_path / "big.fifu")
    assert started == ["tail"]
    assert (tmp_path / "big.fifu").read_bytes() == in_memory(big)
    embeddings(rows=100).write(tmp_path / "small.fifu")
    assert started == ["tail"]


def open_descriptors() -> list[str] | None:
    """The open file descriptors of this process, where the OS lists them."""
    return sorted(os.listdir("/proc/self/fd")) if os.path.isdir("/proc/self/fd") else None


class Boom(RuntimeError):
    pass


@pytest.mark.parametrize("where", ["storage", "vocab"])
def test_failure_on_either_thread_leaves_the_old_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str) -> None:
    monkeypatch.setattr(container, "PARALLEL_TAIL_BYTES", 0)
    path = tmp_path / "target.fifu"
    old = embeddings(seed=3)
    old.write(path)
    before = path.read_bytes()
    new = embeddings(seed=4)
    part = new.storage if where == "storage" else new.vocab

    def fail(self: Any, writer: Any) -> None:
        raise Boom(where)

    monkeypatch.setattr(type(part), "write_payload", fail)
    fds = open_descriptors()
    with pytest.raises(Boom, match=where):
        new.write(path)
    assert path.read_bytes() == before
    assert not temp_files(tmp_path)
    assert open_descriptors() == fds  # the tail writer's duplicate descriptor is closed too


def test_full_disk_fails_before_anything_is_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if atomic._fallocate() is None:
        pytest.skip("fallocate is Linux-only")
    path = tmp_path / "target.fifu"
    embeddings(seed=5).write(path)
    before = path.read_bytes()
    calls: list[int] = []

    def no_space(fd: int, mode: int, offset: int, size: int) -> int:
        calls.append(size)
        return -1

    monkeypatch.setattr(atomic, "_fallocate", lambda: no_space)
    monkeypatch.setattr(atomic, "ctypes_errno", lambda: errno.ENOSPC)
    big = embeddings(rows=10_000, dims=50, seed=6)
    with pytest.raises(OSError, match="cannot reserve") as info:
        big.write(path)
    assert info.value.errno == errno.ENOSPC
    assert calls == [len(in_memory(big))]
    assert path.read_bytes() == before
    assert not temp_files(tmp_path)


def test_filesystems_without_fallocate_still_get_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if atomic._fallocate() is None:
        pytest.skip("fallocate is Linux-only")
    monkeypatch.setattr(atomic, "_fallocate", lambda: lambda fd, mode, offset, size: -1)
    monkeypatch.setattr(atomic, "ctypes_errno", lambda: errno.EOPNOTSUPP)
    emb = embeddings(rows=10_000, dims=50, seed=7)
    emb.write(tmp_path / "out.fifu")
    assert (tmp_path / "out.fifu").read_bytes() == in_memory(emb)


def test_preallocate_reserves_the_size(tmp_path: Path) -> None:
    if atomic._fallocate() is None:
        pytest.skip("fallocate is Linux-only")
    with open(tmp_path / "f", "wb") as f:
        atomic.preallocate(f.fileno(), 3 << 20)
        st = os.fstat(f.fileno())
    assert st.st_size == 3 << 20
    assert st.st_blocks * 512 >= 3 << 20
    with open(tmp_path / "g", "wb") as f:
        atomic.preallocate(f.fileno(), 100)  # small: not worth it
        assert os.fstat(f.fileno()).st_size == 0


def test_vocabulary_size_read_from_disk_is_the_written_size(tmp_path: Path) -> None:
    emb = embeddings(seed=8)
    emb.write(tmp_path / "a.fifu")
    loaded = load_finalfusion(tmp_path / "a.fifu")
    assert loaded.vocab._words_nbytes == SimpleVocab(list(loaded.vocab.words))._words_len()
    loaded.write(tmp_path / "b.fifu")
    assert (tmp_path / "b.fifu").read_bytes() == (tmp_path / "a.fifu").read_bytes()


def test_threaded_write_over_the_file_it_is_mapped_from(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(container, "PARALLEL_TAIL_BYTES", 0)
    path = tmp_path / "self.fifu"
    original = embeddings(seed=9)
    original.write(path)
    mapped = load_finalfusion(path, mmap=True)
    mapped.metadata = Metadata({"rewritten": True})
    mapped.write(path)  # the storage thread reads the old file's map while the new file replaces it
    again = load_finalfusion(path)
    assert dict(again.metadata) == {"rewritten": True}
    assert np.array_equal(again.storage.matrix, original.storage.matrix)
    assert again.norms == original.norms
    assert np.array_equal(mapped.storage.matrix, original.storage.matrix)  # the old map is intact
    assert not temp_files(tmp_path)
