"""examples/scale_dask.py on a real dask.distributed LocalCluster with two worker processes.

Under the ``scale`` extra (``pip install 'finalfusion-py[scale]'``); skipped when
Dask, distributed or pandas are missing. One cluster for the whole module.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("dask.distributed", reason="the scale extra is not installed: pip install 'finalfusion-py[scale]'")
pd = pytest.importorskip("pandas", reason="the scale extra is not installed (Dask DataFrame needs pandas): pip install 'finalfusion-py[scale]'")
pytest.importorskip("dask.dataframe", reason="the scale extra is not installed: pip install 'finalfusion-py[scale]'")

import cloudpickle  # noqa: E402  (comes with distributed)

import finalfusion  # noqa: E402
from conftest import assert_same_neighbours, load_script, mapping_memory_kb, scale_corpus, touch_rows  # noqa: E402
from finalfusion.scale import EmbedBatches, SharedEmbeddings, embed_partition, file_changed, neighbours_partition, shared  # noqa: E402

pytestmark = pytest.mark.scale
# Small worker-side helpers of this module and of conftest travel by value (workers cannot import the tests).
cloudpickle.register_pickle_by_value(sys.modules[__name__])
cloudpickle.register_pickle_by_value(sys.modules["conftest"])

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
SAMPLE = EXAMPLES / "sample.fifu"


ex = load_script(EXAMPLES / "scale_dask.py", "example_scale_dask")


@pytest.fixture(scope="module")
def client() -> Any:
    cluster, client = ex.start_cluster()
    try:
        yield client
    finally:
        client.close()
        cluster.close()


@pytest.fixture(scope="module")
def remote(client: Any, scale_emb: finalfusion.Embeddings) -> Any:
    return ex.share(client, scale_emb)


def test_bag_matches_serial(remote: Any, scale_emb: finalfusion.Embeddings) -> None:
    docs = scale_corpus()
    matrices = ex.embed_bag(remote, docs)
    assert len(matrices) == len(docs)
    unknown = 0
    for doc, got in zip(docs, matrices, strict=True):
        want, found = scale_emb.embedding_batch(doc)
        np.testing.assert_array_equal(got, want)
        assert found.all()  # unknown words are embedded through their subwords
        unknown += sum(scale_emb.vocab.idx(w) is None or isinstance(scale_emb.vocab.idx(w), list) for w in doc)
    assert unknown > 100


@pytest.mark.parametrize("pooling", [None, "mean"])
def test_dataframe_column_matches_serial(remote: Any, scale_emb: finalfusion.Embeddings, pooling: str | None) -> None:
    docs = scale_corpus(seed=2)
    frame = pd.DataFrame({"doc": [f"d{i}" for i in range(len(docs))], "tokens": docs}, index=pd.RangeIndex(100, 100 + len(docs)))
    vectors = ex.embed_column(remote, frame, pooling=pooling)
    assert list(vectors.index) == list(frame.index)
    for doc, got in zip(docs, vectors, strict=True):
        rows = scale_emb.embedding_batch(doc)[0]
        if pooling is None:
            np.testing.assert_array_equal(got, rows)
        else:
            want = rows.mean(axis=0) if doc else np.zeros(scale_emb.dims, dtype=np.float32)
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_neighbours_match_serial(remote: Any, scale_emb: finalfusion.Embeddings) -> None:
    words = [f"w{i}ort" for i in range(0, 5000, 37)] + ["unknownword"]  # 136 known words and one unknown
    got = ex.neighbours(remote, words, k=5)
    want = neighbours_partition(words, scale_emb, k=5)
    assert [w for w, _ in got] == words
    assert_same_neighbours(got, want)
    assert got[-1][0] == "unknownword"
    assert len(got[-1][1]) == 5  # an unknown word is embedded through its subwords, then queried


def test_ships_a_reference_not_the_matrix(scale_emb: finalfusion.Embeddings, scale_file: Path) -> None:
    import dask.bag as db
    from distributed.protocol import pickle as dask_pickle

    matrix_bytes = np.asarray(scale_emb.storage).nbytes
    assert matrix_bytes > 30_000_000
    assert len(dask_pickle.dumps(scale_emb)) < 600  # what scatter sends to each worker
    eager = finalfusion.load_finalfusion(scale_file)
    assert len(dask_pickle.dumps(eager)) > matrix_bytes
    # The task graph of a bag that closes over the embeddings (what the client sends to the scheduler).
    bag = db.from_sequence([["w1ort"]], npartitions=1)
    graph = dict(bag.map_partitions(embed_partition, scale_emb).__dask_graph__())
    assert len(cloudpickle.dumps(graph)) < 10_000
    eager_graph = dict(bag.map_partitions(embed_partition, eager).__dask_graph__())
    assert len(cloudpickle.dumps(eager_graph)) > matrix_bytes


def touch_shared_rows(handle: SharedEmbeddings) -> int:
    """conftest.touch_rows on the embeddings that share() sent (on a worker)."""
    return touch_rows(handle.embeddings)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/<pid>/smaps (Linux only)")
def test_workers_share_the_mapped_pages(client: Any, remote: Any, scale_file: Path) -> None:
    workers = sorted(client.scheduler_info()["workers"])
    assert len(workers) == 2
    assert sorted(client.who_has(remote)[remote.key]) == workers  # the broadcast reached both
    pids = [client.submit(touch_shared_rows, remote, workers=[w], pure=False).result() for w in workers]
    assert len(set(pids)) == 2
    assert os.getpid() not in pids  # worker processes, not threads of this one
    size_kb = scale_file.stat().st_size / 1024
    mem = [mapping_memory_kb(pid, str(scale_file)) for pid in pids]
    for m in mem:
        assert m["Rss"] > 0.9 * size_kb, (mem, size_kb)  # each worker has the whole file mapped and resident
    assert sum(m["Rss"] for m in mem) > 1.8 * size_kb
    assert sum(m["Pss"] for m in mem) < 1.1 * size_kb, (mem, size_kb)  # ... but the pages exist once


def test_replaced_file_fails_with_file_changed_error(client: Any, tmp_path: Path) -> None:
    path = tmp_path / "sample.fifu"
    shutil.copy(SAMPLE, path)
    docs = [["berlin", "berliner"], ["café", "zzzunknown"]]
    old = finalfusion.load_finalfusion(path, mmap=True)
    old_remote = ex.share(client, old)
    want_old = [old.embedding_batch(d)[0] for d in docs]
    new = finalfusion.Embeddings(finalfusion.NdArray(np.asarray(old.storage) * 2), old.vocab)
    new.write(path)  # atomic replace while the cluster runs
    want_new = [new.embedding_batch(d)[0] for d in docs]

    # Workers that unpickled the reference before the replace keep the old file (its inode lives on).
    for got, want in zip(ex.embed_bag(old_remote, docs, npartitions=2), want_old, strict=True):
        np.testing.assert_array_equal(got, want)
    # A fresh task that unpickles the old reference (on the scheduler) fails; the client sees FileChangedError.
    import dask.bag as db

    with pytest.raises(Exception) as err:  # noqa: PT011  (Dask wraps it in a RuntimeError)
        db.from_sequence(docs, npartitions=2).map_partitions(embed_partition, old).compute()
    assert isinstance(file_changed(err.value), finalfusion.FileChangedError), repr(err.value)
    # Scattering the old embeddings again under a new key cannot fail inside Dask (share() wraps them with
    # scale.shared); the first task that uses them fails with the FileChangedError itself.
    again = client.scatter(shared(old), broadcast=True, hash=False)  # hash=False: a new key (ex.share would reuse the old one)
    with pytest.raises(finalfusion.FileChangedError):
        client.submit(embed_partition, docs, again, pure=False).result(timeout=30)
    # Reloaded in the client, the new file is used everywhere.
    reloaded = finalfusion.load_finalfusion(path, mmap=True)
    for got, want in zip(ex.embed_bag(ex.share(client, reloaded), docs, npartitions=2), want_new, strict=True):
        np.testing.assert_array_equal(got, want)
    assert not np.array_equal(want_new[0], want_old[0])


def test_example_main(client: Any, capsys: pytest.CaptureFixture[str]) -> None:
    ex.main(str(SAMPLE), client)
    out = capsys.readouterr().out.splitlines()
    assert out[:2] == ["berlin is a city -> (4, 16)", "berliner café -> (2, 16)"]
    assert out[2].startswith("berlin -> ")
    assert len(out[2].split(", ")) == 3


@contextmanager
def late_worker(client: Any) -> Iterator[str]:
    """A third worker process that joins the running cluster (a real ``dask worker``); yields its address."""
    before = set(client.scheduler_info()["workers"])
    proc = subprocess.Popen(
        [sys.executable, "-m", "distributed.cli.dask_worker", client.scheduler.address, "--nthreads", "1", "--no-nanny", "--no-dashboard"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        client.wait_for_workers(len(before) + 1, timeout=60)
        (address,) = set(client.scheduler_info()["workers"]) - before
        yield address
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        client.wait_for_workers(len(before), timeout=30)


def test_worker_joining_after_a_replace_fails_fast(client: Any, tmp_path: Path) -> None:
    """Every helper, run on a worker that joined after the file was replaced, raises FileChangedError (Dask once waited for ever)."""
    path = tmp_path / "sample.fifu"
    shutil.copy(SAMPLE, path)
    old = finalfusion.load_finalfusion(path, mmap=True)
    remote = ex.share(client, old)  # on the two workers there now
    first_workers = sorted(client.who_has(remote)[remote.key])
    assert len(first_workers) == 2
    finalfusion.Embeddings(finalfusion.NdArray(np.asarray(old.storage) * 2), old.vocab).write(path)  # atomic replace
    gone_path = tmp_path / "gone.fifu"
    shutil.copy(SAMPLE, gone_path)
    gone = ex.share(client, finalfusion.load_finalfusion(gone_path, mmap=True))
    gone_path.unlink()
    calls = [(embed_partition, ([["berlin", "zzz"]], remote)), (neighbours_partition, (["berlin", None], remote)), (EmbedBatches, (remote,))]
    with late_worker(client) as address:
        assert address not in first_workers
        for fn, args in calls:
            future = client.submit(fn, *args, workers=[address], pure=False)
            with pytest.raises(finalfusion.FileChangedError, match="changed since the embeddings were pickled"):
                future.result(timeout=30)  # bounded: before the fix, this waited for ever
        # A deleted file: the OSError, also raised by the task.
        with pytest.raises(FileNotFoundError):
            client.submit(embed_partition, [["berlin"]], gone, workers=[address], pure=False).result(timeout=30)
        # Wrapped embeddings inside a task graph: the scheduler and the worker unpickle them without failing; the task fails.
        with pytest.raises(finalfusion.FileChangedError):
            client.submit(neighbours_partition, ["berlin"], shared(old), workers=[address], pure=False).result(timeout=30)
        # The workers that were there keep the file they mapped when the embeddings arrived (the old one), never a mix.
        for worker in first_workers:
            got = client.submit(embed_partition, [["berlin"]], remote, workers=[worker], pure=False).result(timeout=30)
            np.testing.assert_array_equal(got[0], old.embedding_batch(["berlin"])[0])
