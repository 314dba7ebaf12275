"""Crash safety and concurrency: killed writers, saving over mapped files, lookups from many threads.

* A writer process SIGKILLed at random points leaves the target either the
  complete old file or the complete new one, never a mix.
* Saving over a file that this process and another process have mapped
  works, and both keep a consistent view of the old contents.
* Lookups from several threads at once give exactly the serial results,
  with caches cold at the start and small enough to evict while the threads
  run. :data:`QUERIES` lists the queries; a new one (similarity, analogy)
  is one decorated function.
"""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import finalfusion.limits
from conftest import GOLDEN_FILES, TINY_FILES
from finalfusion import Embeddings, NdArray, SimpleVocab, load_finalfusion
from test_roundtrip import make_embeddings

# -- killing a writer ----------------------------------------------------------------

WRITER = """
import sys
from finalfusion import load_finalfusion
a, b, target = sys.argv[1:4]
embs = [load_finalfusion(a), load_finalfusion(b)]
print("ready", flush=True)
while True:
    for emb in embs:
        emb.write(target)
"""


def big_embeddings(rows: int, dims: int, seed: int) -> Embeddings:
    rng = np.random.default_rng(seed)
    return Embeddings(NdArray(rng.standard_normal((rows, dims)).astype(np.float32)), SimpleVocab([f"{seed}-{i}" for i in range(rows)]))


def temp_files(target: Path) -> list[Path]:
    """Temporary files of atomic writes to ``target`` (_atomic.atomic_output names them ``.<name>.*.tmp``)."""
    return sorted(target.parent.glob(f".{target.name}.*.tmp"))


def test_sigkilled_writer_leaves_old_or_new_file(tmp_path: Path) -> None:
    old, new = tmp_path / "old.fifu", tmp_path / "new.fifu"
    big_embeddings(40_000, 128, 1).write(old)  # ~21 MB
    big_embeddings(50_000, 100, 2).write(new)  # ~20 MB, another shape: a mix cannot pass for either
    versions = {old.read_bytes(): "old", new.read_bytes(): "new"}
    target = tmp_path / "target.fifu"
    target.write_bytes(old.read_bytes())
    rng = random.Random(6)
    seen: list[str] = []
    mid_write = 0
    # At least 6 kills, and more (up to 40) until one lands inside a write: a
    # kill can also fall between two writes, while the next one is prepared.
    while len(seen) < 6 or (mid_write == 0 and len(seen) < 40):
        proc = subprocess.Popen([sys.executable, "-c", WRITER, str(old), str(new), str(target)], stdout=subprocess.PIPE)
        assert proc.stdout is not None
        assert proc.stdout.readline() == b"ready\n"
        time.sleep(rng.uniform(0.0, 0.3))
        proc.send_signal(signal.SIGKILL)
        assert proc.wait() == -signal.SIGKILL
        proc.stdout.close()
        data = target.read_bytes()
        assert data in versions, f"kill {len(seen)}: target is neither complete version ({len(data)} bytes)"
        seen.append(versions[data])
        leftovers = temp_files(target)
        assert len(leftovers) <= 1, leftovers  # only the write that was killed
        mid_write += len(leftovers)
        for path in leftovers:  # what docs/reliability.md tells users to clean up
            path.unlink()
    assert mid_write >= 1, "no kill hit a write in progress"
    assert not temp_files(target)


# -- saving over mapped files --------------------------------------------------------

READER = """
import sys, zlib
import numpy as np
from finalfusion import load_finalfusion

def digest(emb):
    return f"{zlib.crc32(np.ascontiguousarray(emb.storage.matrix).tobytes())}-{len(emb)}-{emb.vocab.words[-1]}"

emb = load_finalfusion(sys.argv[1], mmap=True)
print(digest(emb), flush=True)
sys.stdin.readline()
print(digest(emb), digest(load_finalfusion(sys.argv[1], mmap=True)), flush=True)
"""


def digest(emb: Embeddings) -> str:
    import zlib

    return f"{zlib.crc32(np.ascontiguousarray(emb.storage.matrix).tobytes())}-{len(emb)}-{emb.vocab.words[-1]}"  # type: ignore[attr-defined]


def test_saving_over_a_file_mapped_here_and_in_another_process(tmp_path: Path) -> None:
    path = tmp_path / "shared.fifu"
    first, second = big_embeddings(20_000, 50, 3), big_embeddings(30_000, 40, 4)
    first.write(path)
    mine = load_finalfusion(path, mmap=True)
    proc = subprocess.Popen([sys.executable, "-c", READER, str(path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdin is not None
    assert proc.stdout is not None
    try:
        assert proc.stdout.readline().strip() == digest(first)
        second.write(path)  # while both processes map the old file
        proc.stdin.write("go\n")
        proc.stdin.flush()
        still, fresh = proc.stdout.readline().split()
    finally:
        proc.stdin.close()
        proc.wait()
        proc.stdout.close()
    assert still == digest(first)  # the other process's view is unchanged and whole
    assert fresh == digest(second)
    assert digest(mine) == digest(first)
    assert digest(load_finalfusion(path, mmap=True)) == digest(second)
    # Mapped embeddings can be written back over the very file they map.
    again = load_finalfusion(path, mmap=True)
    data = path.read_bytes()
    again.write(path)
    assert path.read_bytes() == data
    assert digest(again) == digest(second)


# -- lookups from several threads ----------------------------------------------------

Query = Callable[[Embeddings, list[str]], Any]
QUERIES: dict[str, Query] = {}


def query(fn: Query) -> Query:
    """Register a query for the thread test (one function per query)."""
    QUERIES[fn.__name__] = fn
    return fn


@query
def embedding(emb: Embeddings, words: list[str]) -> Any:
    return [emb.embedding(w) for w in words]


@query
def embedding_with_norm(emb: Embeddings, words: list[str]) -> Any:
    return [emb.embedding_with_norm(w) for w in words]


@query
def embedding_batch(emb: Embeddings, words: list[str]) -> Any:
    return emb.embedding_batch(words)


@query
def small_batches(emb: Embeddings, words: list[str]) -> Any:
    # Below 16 words the batch path hashes word by word through the caches.
    return [emb.embedding_batch(words[i : i + 7]) for i in range(0, len(words), 7)]


@query
def vocab_idx(emb: Embeddings, words: list[str]) -> Any:
    return [emb.vocab.idx(w) for w in words]


@query
def word_similarity(emb: Embeddings, words: list[str]) -> Any:
    # The first query of a fresh instance computes and caches the row norms under a lock.
    return [emb.word_similarity(w, k=5) for w in words[::7]]


@query
def similarity_batch(emb: Embeddings, words: list[str]) -> Any:
    known = [w for w in words if w in emb.vocab.word_index][:40]
    return emb.word_similarity_batch(known, k=3)


@query
def analogy(emb: Embeddings, words: list[str]) -> Any:
    known = list(dict.fromkeys(w for w in words if w in emb.vocab.word_index))
    return [emb.analogy(*known[i : i + 3], k=2) for i in range(0, max(len(known) - 3, 0), 11)]


def assert_same(a: Any, b: Any) -> None:
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        np.testing.assert_array_equal(a, b)
    elif isinstance(a, (list, tuple)):
        assert isinstance(b, (list, tuple))
        assert len(a) == len(b)
        for x, y in zip(a, b, strict=True):
            assert_same(x, y)
    else:
        assert a == b


def thread_words(emb: Embeddings) -> list[str]:
    rng = random.Random(len(emb))
    alphabet = "abcdefghijklmnopqrstuvwxyzäöüßéøñ語😀"
    unknown = ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 12))) for _ in range(300)]
    return [*emb.vocab.words[:200], *unknown, *emb.vocab.words[:50]]


SOURCES: dict[str, Callable[[], Embeddings]] = {name: (lambda name=name: load_finalfusion(GOLDEN_FILES / name)) for name in TINY_FILES}
SOURCES["floret"] = lambda: make_embeddings("floret", "ndarray", False, False)
SOURCES["tiny_bucket.fifu (mmap)"] = lambda: load_finalfusion(GOLDEN_FILES / "tiny_bucket.fifu", mmap=True)


@pytest.fixture
def small_caches(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Caches small enough to be evicted and cleared while the threads run, and frequent thread switches."""
    monkeypatch.setattr(finalfusion.limits, "MAX_CACHE_BYTES", 1 << 14)  # word and n-gram caches evict every few dozen words
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    try:
        yield
    finally:
        sys.setswitchinterval(interval)


N_THREADS = 4


@pytest.mark.filterwarnings("ignore::finalfusion.LegacyFormatWarning")
@pytest.mark.parametrize("name", list(QUERIES))
@pytest.mark.parametrize("source", list(SOURCES))
def test_threads_match_serial(source: str, name: str, small_caches: None) -> None:
    fn = QUERIES[name]
    reference = SOURCES[source]()
    words = thread_words(reference)
    # Each thread walks the words from a different starting point, twice.
    orders = [words[k * 89 :] + words[: k * 89] for k in range(N_THREADS)]
    expected = [fn(reference, order) for order in orders]
    emb = SOURCES[source]()  # fresh instance: caches start cold and fill concurrently
    barrier = threading.Barrier(N_THREADS)
    results: list[Any] = [None] * N_THREADS
    errors: list[BaseException] = []

    def work(k: int) -> None:
        try:
            barrier.wait()
            results[k] = [fn(emb, orders[k]) for _ in range(2)]
        except BaseException as exc:  # reported below, with the thread's traceback
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(N_THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    for k in range(N_THREADS):
        for got in results[k]:
            assert_same(got, expected[k])
