"""The library's one thread policy (finalfusion._threads) and the query index that lives on Embeddings.

* ``finalfusion.set_threads`` / ``get_threads`` is the one knob, read by every parallel step;
* the pool is created on first parallel use, and only then is the fork hook registered;
* a busy pool never stalls a caller (it runs jobs no worker has started);
* ``InOrder`` keeps submission order and reports the first error; ``run_in_background`` returns or raises;
* the query index is an attribute of the embeddings: built once, dropped by ``clear_cache``, never pickled or copied.
"""

from __future__ import annotations

import copy
import gc
import os
import pickle
import subprocess
import sys
import threading
import weakref
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import finalfusion
from finalfusion import Embeddings, _threads, load_finalfusion
from finalfusion.similarity import clear_cache
from finalfusion.similarity._dense import DenseIndex
from finalfusion.similarity._index import query_index
from finalfusion.similarity._quantized import QuantizedIndex
from finalfusion.storage import NdArray, QuantizedArray
from finalfusion.storage.quantized import PQ
from finalfusion.vocab import SimpleVocab

SRC = str(Path(finalfusion.__file__).resolve().parents[1])


@pytest.fixture
def restore_threads() -> Any:
    saved = _threads._setting
    yield
    _threads._setting = saved


def small_emb(n: int = 8, dims: int = 4) -> Embeddings:
    m = np.random.default_rng(n).standard_normal((n, dims)).astype(np.float32)
    return Embeddings(NdArray(m), SimpleVocab([f"w{i}" for i in range(n)]))


# -- the knob -------------------------------------------------------------------------


def test_set_threads_is_the_one_setting(restore_threads: None, monkeypatch: pytest.MonkeyPatch) -> None:
    for var in _threads.BLAS_THREAD_VARS:
        monkeypatch.delenv(var, raising=False)
    finalfusion.set_threads(None)
    assert finalfusion.get_threads() == _threads.DEFAULT_THREADS == min(4, _threads.CPUS)
    assert _threads.threads_for() == _threads.DEFAULT_THREADS
    assert _threads.threads_for(blas=True) == 1  # BLAS threaded by the environment: dense products are not split
    finalfusion.set_threads(3)
    assert finalfusion.get_threads() == 3
    assert _threads.threads_for() == _threads.threads_for(blas=True) == 3
    assert _threads.threads_for(2) == 2  # a call's own threads= wins
    finalfusion.set_threads(1)
    assert _threads.threads_for(blas=True) == _threads.threads_for() == 1
    assert "set_threads" in finalfusion.__all__
    assert "get_threads" in finalfusion.__all__


@pytest.mark.parametrize("threads", [0, -2, 1.5, "2"])
def test_set_threads_refuses_bad_counts(threads: Any, restore_threads: None) -> None:
    with pytest.raises(ValueError, match="threads must be a positive int"):
        finalfusion.set_threads(threads)
    assert finalfusion.get_threads() >= 1


def test_the_setting_reaches_unknown_word_batches(restore_threads: None, testdata: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """embedding_batch without threads= follows set_threads: 1 keeps all sums on the calling thread."""
    import finalfusion._batch as batch_module
    from finalfusion.compat.fasttext import load_fasttext

    emb = load_fasttext(testdata / "rust-fasttext.bin")
    words = [f"zq{i}xy" for i in range(3 * batch_module.TASK_WORDS)]
    seen: set[int] = set()
    store = batch_module.store_subword_sums

    def spy(*args: Any) -> None:
        seen.add(threading.get_ident())
        store(*args)

    monkeypatch.setattr(batch_module, "store_subword_sums", spy)
    finalfusion.set_threads(1)
    serial, _ = emb.embedding_batch(words)
    assert seen == {threading.get_ident()}
    finalfusion.set_threads(3)
    threaded, _ = emb.embedding_batch(words)
    np.testing.assert_array_equal(threaded, serial)


# -- the pool -------------------------------------------------------------------------


def test_pool_and_fork_hook_are_created_on_first_parallel_use() -> None:
    """Importing the library, loading and serial queries start no thread and register no fork hook."""
    code = f"""
import sys, threading
sys.path.insert(0, {SRC!r})
import numpy as np
import finalfusion
from finalfusion import _threads
before = threading.active_count()
emb = finalfusion.Embeddings(finalfusion.NdArray(np.eye(3, dtype=np.float32)), finalfusion.SimpleVocab(["a", "b", "c"]))
emb.word_similarity("a", k=2)
emb.embedding_batch(["a", "zz"])
assert _threads._pool is None and not _threads._fork_hook, "pool before parallel use"
assert threading.active_count() == before, "threads before parallel use"
_threads.THREAD_ROWS = 1
_threads.in_threads(lambda a, b: b - a, 10, blas=False, align=1, threads=2)
assert _threads._pool is not None and _threads._fork_hook, "no pool after parallel use"
print("ok")
"""
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "ok"


def test_a_busy_pool_does_not_stall_callers(restore_threads: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """With every pool thread blocked, in_threads and InOrder run the jobs on the calling thread."""
    finalfusion.set_threads(2)
    monkeypatch.setattr(_threads, "THREAD_ROWS", 1)
    release = threading.Event()
    size = _threads._pool_size if _threads._pool is not None else 1
    blockers = _threads._submit_all([(release.wait, (60,))] * max(size, 1), 1)
    try:
        caller = threading.get_ident()
        where: list[int] = []

        def work(a: int, b: int) -> int:
            where.append(threading.get_ident())
            return b - a

        assert _threads.in_threads(work, 10, blas=False, align=1) == [5, 5]
        assert where == [caller, caller]
        with _threads.InOrder[int]() as jobs:
            for i in range(4):
                jobs.submit(lambda i=i: (i, threading.get_ident()))  # type: ignore[misc]
            got = jobs.take(0)
        assert [i for i, _ in got] == [0, 1, 2, 3]  # type: ignore[misc]
        assert {t for _, t in got} == {caller}  # type: ignore[misc]
    finally:
        release.set()
        _threads._settle(blockers)


def test_in_order_reports_the_first_error_and_keeps_order(restore_threads: None) -> None:
    finalfusion.set_threads(3)

    def job(i: int) -> int:
        if i == 3:
            raise KeyError(i)
        return i * i

    out: list[int] = []

    def run() -> None:
        with _threads.InOrder[int]() as jobs:
            for i in range(6):
                jobs.submit(job, i)
                out.extend(jobs.take(2))
            out.extend(jobs.take(0))

    with pytest.raises(KeyError):
        run()
    assert out == [0, 1, 4]


def test_in_order_with_one_thread_runs_on_submit(restore_threads: None) -> None:
    finalfusion.set_threads(1)
    ran: list[int] = []
    with _threads.InOrder[None]() as jobs:
        jobs.submit(ran.append, 1)
        assert ran == [1]
        assert jobs.take(0) == [None]


def test_run_in_background_returns_and_raises() -> None:
    job = _threads.run_in_background(lambda: threading.current_thread().name)
    assert job.result() == "finalfusion-background"

    def fail() -> None:
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        _threads.run_in_background(fail).result()


def test_nested_parallel_calls_run_serially_on_pool_threads(restore_threads: None, monkeypatch: pytest.MonkeyPatch) -> None:
    finalfusion.set_threads(2)
    monkeypatch.setattr(_threads, "THREAD_ROWS", 1)
    inner: list[int] = []

    def work(a: int, b: int) -> int:
        if a:  # the pool's range: a nested split stays on this thread
            inner.append(len(_threads.in_threads(lambda c, d: d - c, 10, blas=False, align=1)))
        return b - a

    assert sum(_threads.in_threads(work, 10, blas=False, align=1)) == 10
    assert inner in ([1], [2])  # [2] only if the caller ran the second range itself


def test_only_the_threads_module_creates_threads() -> None:
    """No other module of the package starts a thread or registers a fork hook (the architecture rule)."""
    root = Path(finalfusion.__file__).parent
    offenders = []
    for path in root.rglob("*.py"):
        if path.name == "_threads.py":
            continue
        text = path.read_text(encoding="utf-8")
        for needle in ("threading.Thread(", "ThreadPoolExecutor(", "register_at_fork"):
            if needle in text:
                offenders.append(f"{path.relative_to(root)}: {needle}")
    assert offenders == []


# -- the query index on Embeddings ------------------------------------------------------


def test_query_index_is_an_attribute_built_once() -> None:
    emb = small_emb()
    assert emb._query is None
    emb.word_similarity("w0", k=2)
    index = query_index(emb)
    assert isinstance(index, DenseIndex)
    assert emb._query is index
    emb.word_similarity("w1", k=2)
    assert query_index(emb) is index
    clear_cache(emb)
    assert emb._query is None
    assert query_index(emb) is not index


def test_quantized_storage_gets_a_quantized_index() -> None:
    rng = np.random.default_rng(1)
    pq = PQ(rng.standard_normal((2, 4, 2)).astype(np.float32), None)
    emb = Embeddings(QuantizedArray(pq, rng.integers(0, 4, (6, 2), dtype=np.uint8), None), SimpleVocab([f"w{i}" for i in range(6)]))
    assert isinstance(query_index(emb), QuantizedIndex)
    assert not isinstance(query_index(emb), DenseIndex)


def test_query_index_is_dropped_with_the_embeddings() -> None:
    emb = small_emb()
    emb.word_similarity("w0", k=2)
    ref = weakref.ref(query_index(emb))
    del emb
    gc.collect()
    assert ref() is None


def test_query_index_is_never_pickled_or_copied() -> None:
    emb = small_emb()
    before = emb.word_similarity("w0", k=3)
    index = query_index(emb)
    state = emb.__getstate__()
    assert "_query" not in state
    assert "_query_lock" not in state
    for clone in (pickle.loads(pickle.dumps(emb)), copy.copy(emb), copy.deepcopy(emb)):
        assert clone._query is None
        assert clone.word_similarity("w0", k=3) == before
        assert query_index(clone) is not index
    assert query_index(emb) is index


def test_mapped_embeddings_still_pickle_by_reference_after_queries(tmp_path: Path) -> None:
    path = tmp_path / "e.fifu"
    small_emb(64, 8).write(path)
    emb = load_finalfusion(path, mmap=True)
    expected = emb.word_similarity("w3", k=5)
    blob = pickle.dumps(emb)
    assert len(blob) < 1000  # a reference to the file, not the data or the index
    clone = pickle.loads(blob)
    assert clone._query is None
    assert clone.word_similarity("w3", k=5) == expected


def test_concurrent_first_queries_build_one_index() -> None:
    emb = small_emb(2000, 8)
    barrier = threading.Barrier(6)
    seen: list[int] = []

    def work() -> None:
        barrier.wait()
        seen.append(id(query_index(emb)))

    workers = [threading.Thread(target=work) for _ in range(6)]
    for t in workers:
        t.start()
    for t in workers:
        t.join()
    assert len(set(seen)) == 1


def test_fork_after_parallel_use_gets_a_fresh_pool(restore_threads: None, monkeypatch: pytest.MonkeyPatch) -> None:
    if not hasattr(os, "fork"):
        pytest.skip("no fork on this platform")
    finalfusion.set_threads(2)
    monkeypatch.setattr(_threads, "THREAD_ROWS", 1)
    assert _threads.in_threads(lambda a, b: b - a, 10, blas=False, align=1) == [5, 5]
    assert _threads._pool is not None
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child reports through the pipe
        try:
            ok = _threads._pool is None and _threads.in_threads(lambda a, b: b - a, 10, blas=False, align=1) == [5, 5]
            os.write(write, b"1" if ok else b"0")
        finally:
            os._exit(0)
    os.close(write)
    try:
        assert os.read(read, 1) == b"1"
    finally:
        os.close(read)
        os.waitpid(pid, 0)


# -- text reading ------------------------------------------------------------------------


def test_text_reading_takes_threads_and_gives_the_same_result(restore_threads: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """Blocks parsed on 1 or 3 threads, or after the setting: the same embeddings; errors in file order."""
    import finalfusion.compat.text as text

    monkeypatch.setattr(text, "_BLOCK", 64)  # many blocks
    rng = np.random.default_rng(3)
    rows = rng.integers(-999, 999, (300, 3)) / 8
    data = "".join(f"w{i} {' '.join(map(str, r))}\n" for i, r in enumerate(rows)).encode()
    serial = finalfusion.load_text(data, threads=1, normalize=False)
    np.testing.assert_array_equal(serial.storage.matrix, rows.astype(np.float32))
    for threads in (2, 3):
        got = finalfusion.load_text(data, threads=threads, normalize=False)
        assert got.vocab.words == serial.vocab.words
        np.testing.assert_array_equal(got.storage.matrix, serial.storage.matrix)
    finalfusion.set_threads(3)
    got = finalfusion.load_text_dims(b"300 3\n" + data, normalize=False)
    np.testing.assert_array_equal(got.storage.matrix, serial.storage.matrix)
    bad = data.replace(b"\nw200 ", b"\nw200 1 ", 1).replace(b"\nw250 ", b"\nw250 x ", 1)
    with pytest.raises(finalfusion.FormatError, match="text line 201"):  # the first bad line, not a later one
        finalfusion.load_text(bad, threads=3)
    with pytest.raises(ValueError, match="threads must be a positive int"):
        finalfusion.load_text(data, threads=0)
