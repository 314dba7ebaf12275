"""examples/scale_ray.py on a real local Ray runtime (two CPUs, no dashboard).

Under the ``scale`` extra (``pip install 'finalfusion-py[scale]'``); skipped when
Ray or Ray Data (pandas, pyarrow) are missing. One runtime for the whole module,
shut down at its end.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

ray = pytest.importorskip("ray", reason="the scale extra is not installed: pip install 'finalfusion-py[scale]'")
pytest.importorskip("ray.data", reason="the scale extra is not installed (Ray Data needs pandas and pyarrow): pip install 'finalfusion-py[scale]'")

from ray import cloudpickle  # noqa: E402  (Ray's own copy of cloudpickle)

import finalfusion  # noqa: E402
from conftest import assert_same_neighbours, load_script, mapping_memory_kb, scale_corpus, touch_rows  # noqa: E402
from finalfusion.scale import file_changed, neighbours_partition  # noqa: E402

# Ray Data sets a deprecated option of its own DataContext on first use.
pytestmark = [pytest.mark.scale, pytest.mark.filterwarnings("ignore::DeprecationWarning:ray")]
# Small worker-side helpers of this module and of conftest travel by value (workers cannot import the tests).
cloudpickle.register_pickle_by_value(sys.modules[__name__])
cloudpickle.register_pickle_by_value(sys.modules["conftest"])

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
SAMPLE = EXAMPLES / "sample.fifu"


ex = load_script(EXAMPLES / "scale_ray.py", "example_scale_ray")


@pytest.fixture(scope="module", autouse=True)
def runtime() -> Any:
    if ray.is_initialized():
        pytest.skip("a Ray runtime is already running in this process")
    ex.start_ray()
    try:
        yield
    finally:
        ray.shutdown()


def test_dataset_matches_serial(scale_emb: finalfusion.Embeddings) -> None:
    docs = scale_corpus(docs=200)
    matrices = ex.embed_dataset(scale_emb, docs)
    assert len(matrices) == len(docs)
    for doc, got in zip(docs, matrices, strict=True):
        want, found = scale_emb.embedding_batch(doc)
        assert found.all()  # known words and unknown ones (through their subwords)
        np.testing.assert_array_equal(np.asarray(got, dtype=np.float32).reshape(want.shape), want)


def test_neighbours_match_serial(scale_emb: finalfusion.Embeddings) -> None:
    words = [f"w{i}ort" for i in range(0, 5000, 37)] + ["unknownword"]
    got = ex.neighbours(scale_emb, words, k=5)
    want = neighbours_partition(words, scale_emb, k=5)
    assert [w for w, _ in got] == words
    assert_same_neighbours(got, want)


def test_object_store_holds_a_reference_not_the_matrix(scale_emb: finalfusion.Embeddings, scale_file: Path) -> None:
    from ray._private.worker import global_worker  # the serializer ray.put uses

    context = global_worker.get_serialization_context()
    matrix_bytes = np.asarray(scale_emb.storage).nbytes
    assert matrix_bytes > 30_000_000
    assert context.serialize(scale_emb).total_bytes < 600
    assert context.serialize(finalfusion.load_finalfusion(scale_file)).total_bytes > matrix_bytes


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/<pid>/smaps (Linux only)")
def test_actors_share_the_mapped_pages(scale_emb: finalfusion.Embeddings, scale_file: Path) -> None:
    class Holder:  # an actor that keeps the embeddings it was given
        def __init__(self, scale_emb: finalfusion.Embeddings) -> None:
            self.scale_emb = scale_emb

        def touch(self) -> int:
            return touch_rows(self.scale_emb)

    emb_ref = ray.put(scale_emb)
    actors = [ray.remote(num_cpus=0)(Holder).remote(emb_ref) for _ in range(2)]
    try:
        pids = ray.get([a.touch.remote() for a in actors])
        assert len(set(pids)) == 2
        assert os.getpid() not in pids
        size_kb = scale_file.stat().st_size / 1024
        mem = [mapping_memory_kb(pid, str(scale_file)) for pid in pids]
    finally:
        for a in actors:
            ray.kill(a)
    for m in mem:
        assert m["Rss"] > 0.9 * size_kb, (mem, size_kb)  # each actor has the whole file mapped and resident
    assert sum(m["Rss"] for m in mem) > 1.8 * size_kb
    assert sum(m["Pss"] for m in mem) < 1.1 * size_kb, (mem, size_kb)  # ... but the pages exist once


def test_replaced_file_fails_with_file_changed_error(tmp_path: Path) -> None:
    path = tmp_path / "sample.fifu"
    shutil.copy(SAMPLE, path)
    words = ["berlin", "paris", "berliner", "zzzunknown"]
    old = finalfusion.load_finalfusion(path, mmap=True)
    old_ref = ray.put(old)
    query = ray.remote(neighbours_partition)
    assert_same_neighbours(ray.get(query.remote(words, old_ref, 3)), neighbours_partition(words, old, 3))
    finalfusion.Embeddings(finalfusion.NdArray(np.asarray(old.storage)[::-1].copy()), old.vocab).write(path)  # atomic replace
    # Every task unpickles its arguments: after the replace, each one fails and the client sees FileChangedError.
    with pytest.raises(ray.exceptions.RayError) as err:
        ray.get(query.remote(words, old_ref, 3))
    assert isinstance(file_changed(err.value), finalfusion.FileChangedError), repr(err.value)
    with pytest.raises(ray.exceptions.RayError) as err:
        ray.get(query.remote(words, old, 3))
    assert isinstance(file_changed(err.value), finalfusion.FileChangedError), repr(err.value)
    # Reloaded in the driver, the new file is used.
    new = finalfusion.load_finalfusion(path, mmap=True)
    got = ex.neighbours(new, words, k=3, tasks=2)
    assert_same_neighbours(got, neighbours_partition(words, new, 3))
    assert [n for _, ns in got for n, _ in ns] != [n for _, ns in neighbours_partition(words, old, 3) for n, _ in ns]


def test_example_main(capsys: pytest.CaptureFixture[str]) -> None:
    ex.main(str(SAMPLE))
    out = capsys.readouterr().out.splitlines()
    assert out[:2] == ["berlin is a city -> (4, 16)", "berliner café -> (2, 16)"]
    assert out[2].startswith("berlin -> ")
    assert len(out[2].split(", ")) == 3
