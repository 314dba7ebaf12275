"""The fuzzer's generators for directories and the command line (issue 33): saved ANN indexes, model directories, ``finalfusion``.

Each generator is deterministic per seed (a saved finding replays), and its target accepts some
of its inputs (a valid baseline: the generator builds real directories, not noise). The inputs
run in the fuzzer's own worker subprocess, so a native crash of a backend on a crafted file is a
``signal`` outcome, not a dead test run.
"""

from __future__ import annotations

import collections
import os
import random
from pathlib import Path

import pytest

from conftest import load_fuzz

fuzz = load_fuzz()


def _needs(reader: str) -> pytest.MarkDecorator:
    """Skip a reader the fuzzer leaves out when its packages are missing (``fuzz.UNAVAILABLE``), with the fuzzer's reason."""
    return pytest.mark.skipif(reader in fuzz.UNAVAILABLE, reason=f"fuzz reader {reader}: {fuzz.UNAVAILABLE.get(reader)}")


#: (generator, reader, seeds run, the fewest inputs that must read)
BUNDLES = (("ann_index_structured", "ann-index", 24, 3), ("model_dir_structured", "model-dir", 24, 3), ("cli_structured", "cli", 24, 3))
CASES = [pytest.param(name, reader, seeds, least, marks=_needs(reader)) for name, reader, seeds, least in BUNDLES]
PAIRS = [pytest.param(*p.values[:2], marks=p.marks) for p in CASES]


@pytest.mark.parametrize(("name", "reader"), PAIRS)
def test_the_generator_is_registered_and_seeds_its_reader(name: str, reader: str) -> None:
    assert fuzz.generators_for(reader) == [name]
    assert len(fuzz.seed_inputs(reader)) == fuzz.BUNDLE_SEEDS


def test_a_reader_left_out_has_no_generator() -> None:
    # without their packages the bundle readers are left out with a reason, and so are their generators; cli stays
    assert "cli" in fuzz.READERS
    for reader, reason in fuzz.UNAVAILABLE.items():
        assert reader not in fuzz.READERS
        assert not fuzz.generators_for(reader)
        assert "pip install" in reason


@pytest.mark.parametrize(("name", "reader"), PAIRS)
def test_generators_are_deterministic_per_seed(name: str, reader: str) -> None:
    gen = fuzz.GENERATORS[name][1]
    for seed in (0, 1, 7, 123):
        assert gen(random.Random(seed), reader) == gen(random.Random(seed), reader)
    assert len({gen(random.Random(seed), reader) for seed in range(8)}) > 1


@pytest.mark.parametrize(("name", "reader", "seeds", "least"), CASES)
def test_the_target_accepts_some_inputs(name: str, reader: str, seeds: int, least: int) -> None:
    worker = fuzz.Worker(1024, 1000)
    outcomes: collections.Counter[str] = collections.Counter()
    try:
        for seed in range(seeds):
            out = worker.run(reader, fuzz.GENERATORS[name][1](random.Random(seed), reader), 20.0)
            # a Violation is raised only after the target read the input (a later check failed: a finding of its own)
            outcomes["read" if out["status"] == "ok" or out.get("type") == "Violation" else out["status"]] += 1
    finally:
        worker.stop()
    assert outcomes["read"] >= least, outcomes
    assert outcomes["error"] >= 1, outcomes  # and refuses others: the defects are drawn


@_needs("ann-index")
def test_every_backend_is_drawn() -> None:
    backends = set()
    for seed in range(80):
        entries = fuzz.unpack_dir(fuzz.ann_index_structured(random.Random(seed)))
        header = next(data for kind, name, data in entries if name == "d/ann.json")
        backends |= {b for b in fuzz.ann_available() if f'"backend": "{b}"'.encode() in header}
    assert backends == set(fuzz.ann_available())


@_needs("model-dir")
def test_every_model_layout_is_drawn() -> None:
    layouts = set()
    for seed in range(80):
        names = {name for _, name, _ in fuzz.unpack_dir(fuzz.model_dir_structured(random.Random(seed)))}
        layouts.add("tekken" if "d/tekken.json" in names else "wordllama" if "d/weights/custom_16.safetensors" in names else "model2vec")
    assert layouts == {"tekken", "wordllama", "model2vec"}
    assert {"float16", "float64", "int8", "quantized", "plain"} <= {k.split("-")[1] for k in fuzz.model_layouts() if k.startswith("model2vec")}


def test_bundles_round_trip_and_stay_inside_their_root(tmp_path: Path) -> None:
    entries = [(fuzz.D_FILE, "d/a", b"x"), (fuzz.D_FILE, "../escape", b"y"), (fuzz.D_FILE, "/abs", b"z"), (fuzz.D_LINK, "d/l", b"../outside/s")]
    data = fuzz.pack_dir(entries)
    assert fuzz.unpack_dir(data) == entries
    assert fuzz.unpack_dir(data[:-3]) == entries[:-1]  # a cut entry ends the list
    root = str(tmp_path / "root")
    fuzz.materialize(root, entries)
    assert sorted(os.listdir(root)) == ["d", "outside"]
    assert (tmp_path / "root" / "d" / "a").read_bytes() == b"x"
    assert os.readlink(tmp_path / "root" / "d" / "l") == "../outside/s"
    assert not (tmp_path / "escape").exists()
    assert not Path("/abs").exists()


def test_a_read_through_a_planted_link_is_seen(tmp_path: Path) -> None:
    # the sentinel's access time is set to 0: a stat leaves it, a read moves it
    entries = [(fuzz.D_FILE, "outside/s", b"secret"), (fuzz.D_LINK, "d/l", b"../outside/s"), (fuzz.D_META, "sentinels", b"outside/s")]
    root = str(tmp_path / "root")
    fuzz.materialize(root, entries)
    os.stat(os.path.join(root, "d", "l"))
    if os.stat(os.path.join(root, "outside", "s")).st_atime != 0:
        pytest.skip("this file system does not keep an access time of 0")
    fuzz.check_sentinels(root, entries)
    Path(root, "d", "l").read_bytes()
    if os.stat(os.path.join(root, "outside", "s")).st_atime == 0:
        pytest.skip("this file system does not record reads (noatime)")
    with pytest.raises(fuzz.Violation, match="was read"):
        fuzz.check_sentinels(root, entries)


@_needs("model-dir")
def test_a_named_fifo_is_an_empty_stream_not_a_hang(tmp_path: Path) -> None:
    """A FIFO the user names is a stream, read as it arrives: the fuzzer closes a writer on it, so the load answers.

    A WordLlama bundle whose named weights file was planted as a FIFO waited on the open (like ``cat fifo``) and was
    reported as a hang; with the writer it is an empty input. The check runs in a forked child, its lifetime a safety net.
    """
    from _bounded import bounded

    entries = [(fuzz.D_FIFO, "d/weights/custom_16.safetensors", b""), (fuzz.D_META, "load", b"d/weights/custom_16.safetensors")]
    out = bounded(lambda: fuzz.run_one(fuzz.READERS["model-dir"], fuzz.pack_dir(entries)), timeout=60)
    assert (out["status"], out["type"]) == ("error", "FormatError"), out
    assert "empty input" in out["msg"]
