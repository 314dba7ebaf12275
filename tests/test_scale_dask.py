"""examples/scale_dask.py on a real dask.distributed LocalCluster with two worker processes.

Under the ``scale`` extra (``pip install 'finalfusion-py[scale]'``); skipped when
Dask, distributed or pandas are missing. One cluster for the whole module.
"""

from __future__ import annotations

import os
import shutil
import sys
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
from finalfusion.scale import embed_partition, file_changed, neighbours_partition  # noqa: E402

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


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/<pid>/smaps (Linux only)")
def test_workers_share_the_mapped_pages(client: Any, remote: Any, scale_file: Path) -> None:
    workers = sorted(client.scheduler_info()["workers"])
    assert len(workers) == 2
    assert sorted(client.who_has(remote)[remote.key]) == workers  # the broadcast reached both
    pids = [client.submit(touch_rows, remote, workers=[w], pure=False).result() for w in workers]
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
    # Scattering the old reference again fails on the workers; Dask reports it by name only.
    with pytest.raises(Exception, match="FileChangedError"):
        ex.share(client, old)
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
