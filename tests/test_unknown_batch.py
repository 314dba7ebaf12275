"""Batch lookups of unknown words: threaded sums, task and block boundaries, mixed batches.

``Embeddings.embedding_batch`` sums the subword rows of unknown words in
tasks of ``TASK_WORDS`` words (blocks of ``ACC_WORDS`` within a task, see
``finalfusion._batch``) run on ``threads`` threads of the library's pool
while the next words are hashed. The result
must not depend on the thread count or on where task and block boundaries
fall, must equal per-word lookups, and must be the same when several user
threads run such batches at once.
"""

from __future__ import annotations

import contextlib
import random
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import finalfusion._batch as batch_module
from conftest import GOLDEN_FILES, assert_rows_match_lookups
from finalfusion import Embeddings, FloretVocab, load_finalfusion
from finalfusion._threads import run_tasks
from finalfusion.compat.fasttext import load_fasttext
from test_roundtrip import make_embeddings

ALPHABET = "abcdefghijklmnopqrstuvwxyzäöüßéøñ語😀"


def sources(testdata: Path) -> dict[str, Callable[[], Embeddings]]:
    """Subword embeddings of every vocabulary kind, from real files where they exist."""
    return {
        "python-ff_buckets.fifu (Rust bucket vocab)": lambda: load_finalfusion(testdata / "python-ff_buckets.fifu"),
        "rust-fasttext.bin": lambda: load_fasttext(testdata / "rust-fasttext.bin"),
        "python-ff_buckets.fifu, mmap": lambda: load_finalfusion(testdata / "python-ff_buckets.fifu", mmap=True),
        "rust-fasttext.bin, quantized": lambda: load_fasttext(testdata / "rust-fasttext.bin").quantize(n_subquantizers=10, n_bits=4, n_iterations=5, seed=1),
        "rust-fasttext.bin, OPQ (projection)": lambda: load_fasttext(testdata / "rust-fasttext.bin").quantize(
            n_subquantizers=10, n_bits=4, n_iterations=5, quantizer="opq", seed=1
        ),
        "tiny_explicit.fifu": lambda: load_finalfusion(GOLDEN_FILES / "tiny_explicit.fifu"),
        "floret": lambda: make_embeddings("floret", "ndarray", False, False),
    }


SOURCE_NAMES = list(sources(Path()))


@pytest.fixture(params=SOURCE_NAMES)
def emb(request: pytest.FixtureRequest, testdata: Path) -> Embeddings:
    return sources(testdata)[request.param]()


def batch_words(emb: Embeddings, n_unknown: int, seed: int) -> list[str]:
    """Known and unknown words, words without n-grams ("", one letter), and repeats, shuffled."""
    rng = random.Random(seed)
    unknown = {"".join(rng.choice(ALPHABET) for _ in range(rng.randint(0, 14))) for _ in range(n_unknown)}
    words = [*sorted(unknown), *emb.vocab.words[:30], "", "a", "ü", "😀"]
    words += rng.sample(words, len(words) // 5)  # repeats: the unknown words go through the deduplicating path
    rng.shuffle(words)
    return words


def use_small_tasks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tiny tasks and blocks, not multiples of each other, so that every boundary case occurs in small batches."""
    monkeypatch.setattr(batch_module, "TASK_WORDS", 7)
    monkeypatch.setattr(batch_module, "ACC_WORDS", 3)
    monkeypatch.setattr(batch_module, "GATHER_ROWS", 40)


@pytest.mark.filterwarnings("ignore::finalfusion.LegacyFormatWarning")
@pytest.mark.parametrize("distinct", [False, True], ids=["repeats", "distinct"])
def test_threads_and_boundaries_do_not_change_results(emb: Embeddings, distinct: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    words = batch_words(emb, 400, seed=len(emb))
    if distinct:
        words = list(dict.fromkeys(words))
    default, default_found = emb.embedding_batch(words, threads=1)  # default task and block sizes
    use_small_tasks(monkeypatch)
    expected, expected_found = emb.embedding_batch(words, threads=1)
    np.testing.assert_array_equal(expected_found, default_found)
    if getattr(emb.storage, "quantizer", None) is not None and emb.storage.quantizer.projection is not None:
        # Reconstructing with a projection is a BLAS product whose rounding may depend on the block size.
        np.testing.assert_allclose(expected, default, rtol=1e-6, atol=1e-6)
    else:
        np.testing.assert_array_equal(expected, default)  # block and task boundaries change nothing
    for threads in (2, 3, 8):
        out = np.full((len(words), emb.dims), np.nan, np.float32)
        got, found = emb.embedding_batch(words, out=out, threads=threads)
        assert got is out
        np.testing.assert_array_equal(found, expected_found, err_msg=f"threads={threads}")
        np.testing.assert_array_equal(got, expected, err_msg=f"threads={threads}")  # bit-identical, NaN-free
    # ... and the batch equals the per-word lookups (their norm is a BLAS dot: equal up to rounding).
    assert_rows_match_lookups(emb, words, expected, expected_found)
    # Words without any n-gram have no embedding (floret also hashes the whole bracketed word, so it has one).
    assert expected_found[words.index("")] == isinstance(emb.vocab, FloretVocab)


@contextlib.contextmanager
def sum_threads(hook: Callable[[int], None] = lambda ident: None) -> Iterator[set[int]]:
    """Record the threads that run ``finalfusion._batch.store_subword_sums`` (calling ``hook(thread id)`` first)."""
    seen: set[int] = set()
    store = batch_module.store_subword_sums

    def spy(*args: Any) -> None:
        seen.add(threading.get_ident())
        hook(threading.get_ident())
        store(*args)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(batch_module, "store_subword_sums", spy)
        yield seen


@pytest.mark.filterwarnings("ignore::finalfusion.LegacyFormatWarning")
def test_default_sizes_run_on_threads(testdata: Path) -> None:
    """A batch above two default tasks is split over threads and equals the serial batch and the single lookups."""
    emb = load_fasttext(testdata / "rust-fasttext.bin")
    words = batch_words(emb, 3 * batch_module.TASK_WORDS, seed=3)
    caller = threading.get_ident()
    worker_ran = threading.Event()

    def hold_caller(ident: int) -> None:
        if ident == caller:
            # The calling thread helps only once every task is queued: hold it
            # until the worker has run one (a guard against hanging, not a timing).
            worker_ran.wait(60)
        else:
            worker_ran.set()

    serial, serial_found = emb.embedding_batch(words, threads=1)
    with sum_threads(hold_caller) as seen:
        threaded, found = emb.embedding_batch(words, threads=2)
    assert worker_ran.is_set()  # a worker thread summed some of the words
    assert seen - {caller}
    np.testing.assert_array_equal(found, serial_found)
    np.testing.assert_array_equal(threaded, serial)
    for i in range(0, len(words), 97):
        single = emb.embedding(words[i])
        if single is not None:
            np.testing.assert_allclose(threaded[i], single, rtol=1e-6, atol=1e-6)


@pytest.mark.filterwarnings("ignore::finalfusion.LegacyFormatWarning")
def test_small_batches_stay_on_the_calling_thread(testdata: Path) -> None:
    emb = load_finalfusion(testdata / "python-ff_buckets.fifu")
    with sum_threads() as seen:
        emb.embedding_batch(batch_words(emb, 300, seed=5), threads=4)
    assert seen == {threading.get_ident()}


@pytest.mark.parametrize("threads", [0, -1, 1.5, "2"])
def test_invalid_thread_counts_are_refused(threads: Any) -> None:
    emb = load_finalfusion(GOLDEN_FILES / "tiny_bucket.fifu")
    with pytest.raises(ValueError, match="threads must be a positive int"):
        emb.embedding_batch(["a"], threads=threads)


@pytest.mark.filterwarnings("ignore::finalfusion.LegacyFormatWarning")
def test_threaded_batches_from_several_user_threads(emb: Embeddings, monkeypatch: pytest.MonkeyPatch) -> None:
    """User threads running threaded batches at once get exactly the serial results."""
    use_small_tasks(monkeypatch)
    orders = [batch_words(emb, 300, seed=k) for k in range(4)]
    expected = [emb.embedding_batch(words, threads=1) for words in orders]
    barrier = threading.Barrier(len(orders))

    def work(words: list[str]) -> list[Any]:
        barrier.wait()  # all user threads start together
        return [emb.embedding_batch(words, threads=3) for _ in range(3)]

    with ThreadPoolExecutor(len(orders)) as pool:
        results = list(pool.map(work, orders))
    for k, runs in enumerate(results):
        for matrix, found in runs:
            np.testing.assert_array_equal(found, expected[k][1])
            np.testing.assert_array_equal(matrix, expected[k][0])


# -- run_tasks -----------------------------------------------------------------------


@pytest.mark.parametrize("threads", [1, 2, 5])
def test_run_tasks_runs_every_task_once(threads: int) -> None:
    out = np.zeros(1000, dtype=np.int64)

    def tasks() -> Iterator[Callable[[], None]]:
        for lo in range(0, 1000, 37):

            def task(lo: int = lo) -> None:
                out[lo : lo + 37] += 1

            yield task

    run_tasks(tasks(), threads)
    assert (out == 1).all()


class Running:
    """Counts the tasks running right now (each sleeps briefly, so a call that returned early would leave some)."""

    def __init__(self) -> None:
        self.now = 0
        self.lock = threading.Lock()

    @contextlib.contextmanager
    def task(self) -> Iterator[None]:
        with self.lock:
            self.now += 1
        try:
            time.sleep(0.002)
            yield
        finally:
            with self.lock:
                self.now -= 1


@pytest.mark.parametrize("threads", [1, 3])
def test_run_tasks_stops_at_a_failing_task(threads: int) -> None:
    done: list[int] = []
    produced: list[int] = []
    running = Running()

    def task(i: int) -> None:
        with running.task():
            if i == 2:
                raise KeyError("task 2")
            done.append(i)

    def tasks() -> Iterator[Callable[[], None]]:
        for i in range(1000):
            produced.append(i)
            yield lambda i=i: task(i)

    with pytest.raises(KeyError, match="task 2"):
        run_tasks(tasks(), threads)
    assert 2 not in done
    if threads == 1:
        assert done == [0, 1]
        assert produced == [0, 1, 2]
    assert running.now == 0  # no task still runs on a pool thread after the call


@pytest.mark.parametrize("threads", [1, 3])
def test_run_tasks_reports_a_failing_producer(threads: int) -> None:
    done: list[int] = []
    running = Running()

    def task(i: int) -> None:
        with running.task():
            done.append(i)

    def tasks() -> Iterator[Callable[[], None]]:
        for i in range(3):
            yield lambda i=i: task(i)
        raise OverflowError("producer")

    with pytest.raises(OverflowError, match="producer"):
        run_tasks(tasks(), threads)
    assert set(done) <= {0, 1, 2}
    if threads == 1:
        assert done == [0, 1, 2]
    assert running.now == 0
