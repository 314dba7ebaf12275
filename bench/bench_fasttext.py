#!/usr/bin/env python3
"""fastText ``.bin`` benchmark: ``load_fasttext`` / ``write_fasttext``, finalfusion-py vs finalfusion-python 0.7.1.

Target: loading takes at most 0.6x the time of 0.7.1. The model (default
100,000 words, 2,000,000 buckets, 100 dims, minn 3, maxn 6; about 880 MB)
is written by OUR ``write_fasttext`` into a temporary directory, removed at
the end. Every load runs in a fresh interpreter, alternating the two
libraries (both import as ``finalfusion``; see bench_core.py). Put the
directory on tmpfs (``--dir /dev/shm``) so that disk caching on a shared
machine does not decide the result.

Usage::

    .venv/bin/python bench/bench_fasttext.py --quick
    .venv/bin/python bench/bench_fasttext.py --dir /dev/shm --peer-python /work/peers-venv/bin/python
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_core import REPO, fmt, lib_version, med, run_worker

SCRIPT = os.path.abspath(__file__)
TARGET = 0.6


def worker(a: argparse.Namespace) -> dict[str, object]:
    import numpy as np

    from finalfusion.compat import load_fasttext, write_fasttext

    if a.worker == "gen":
        from finalfusion import Embeddings, FastTextVocab, NdArray
        from finalfusion.subword import FastTextIndexer

        rng = random.Random(0)
        words = {"</s>"}
        while len(words) < a.n_words:
            words.add("".join(rng.choice("abcdefghijklmnopqrstuvwxyzäöüß") for _ in range(rng.randint(2, 14))))
        matrix = np.random.default_rng(0).normal(scale=0.1, size=(a.n_words + a.buckets, a.dims)).astype(np.float32)
        write_fasttext(a.path, Embeddings(NdArray(matrix), FastTextVocab(sorted(words), FastTextIndexer(a.buckets, 3, 6))))
        return {"bytes": os.path.getsize(a.path)}
    if a.worker == "load":
        t = time.perf_counter()
        emb = load_fasttext(a.path)
        dt = time.perf_counter() - t
        if emb.embedding("</s>") is None:
            raise SystemExit("load_fasttext lost </s>")
        return {"time_s": dt}
    emb = load_fasttext(a.path)
    out = os.path.join(os.path.dirname(a.path), f"write-{os.getpid()}.bin")
    times = []
    for _ in range(a.reps):
        t = time.perf_counter()
        write_fasttext(out, emb)
        times.append(time.perf_counter() - t)
    os.remove(out)
    return {"times_s": times}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="10k words, 100k buckets, 2 rounds")
    ap.add_argument("--out", help="write results as JSON to this file")
    ap.add_argument("--dir", help="parent directory for the temporary model (e.g. /dev/shm)")
    ap.add_argument("--our-python", default=sys.executable)
    default_peer = os.environ.get("FINALFUSION_PEER_PYTHON") or os.path.join(REPO, ".venv-peers", "bin", "python")
    ap.add_argument("--peer-python", default=default_peer)
    ap.add_argument("--rounds", type=int, default=None, help="alternating fresh-interpreter loads per library")
    ap.add_argument("--reps", type=int, default=3, help="writes per library (one interpreter)")
    ap.add_argument("--worker", choices=["gen", "load", "write"], help=argparse.SUPPRESS)
    ap.add_argument("--path", help=argparse.SUPPRESS)
    ap.add_argument("--n-words", type=int, default=100_000, help=argparse.SUPPRESS)
    ap.add_argument("--buckets", type=int, default=2_000_000, help=argparse.SUPPRESS)
    ap.add_argument("--dims", type=int, default=100, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.worker:
        print(json.dumps(worker(a)))
        return 0
    if a.quick:
        a.n_words, a.buckets = 10_000, 100_000
    rounds = a.rounds or (2 if a.quick else 5)
    pythons = {"ours": a.our_python, "0.7.1": a.peer_python}
    for name, python in pythons.items():
        print(f"{name}: {lib_version(python)}")
    tmp = tempfile.mkdtemp(prefix="ffbench-fasttext-", dir=a.dir)
    try:
        path = os.path.join(tmp, "model.bin")
        sizes = ["--n-words", str(a.n_words), "--buckets", str(a.buckets), "--dims", str(a.dims)]
        gen = run_worker(a.our_python, "gen", ["--path", path, *sizes], script=SCRIPT)
        print(f"model: {a.n_words} words x {a.buckets} buckets x {a.dims} dims, {gen['bytes'] / 2**20:.0f} MB in {tmp}")
        print(f"load average before: {os.getloadavg()}")
        loads: dict[str, list[float]] = {name: [] for name in pythons}
        for _ in range(rounds):
            for name, python in pythons.items():
                loads[name].append(float(run_worker(python, "load", ["--path", path], script=SCRIPT)["time_s"]))
        writes = {
            name: [float(x) for x in run_worker(python, "write", ["--path", path, "--reps", str(a.reps)], script=SCRIPT)["times_s"]]
            for name, python in pythons.items()
        }
        print(f"load average after: {os.getloadavg()}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    results = {"loads_s": loads, "writes_s": writes, "rounds": rounds, "model": {"words": a.n_words, "buckets": a.buckets, "dims": a.dims}}
    for what, data in (("load_fasttext", loads), ("write_fasttext", writes)):
        ours, peer = med(data["ours"]), med(data["0.7.1"])
        target = f"  (target <= {TARGET}x: {'met' if ours / peer <= TARGET else 'NOT met'})" if what == "load_fasttext" else ""
        print(f"{what:15} ours {fmt(ours, 's'):>10}   0.7.1 {fmt(peer, 's'):>10}   ratio {ours / peer:.2f}x{target}")
        results[f"{what}_ratio"] = ours / peer
    if a.out:
        with open(a.out, "w", encoding="utf-8") as f:
            json.dump(results, f, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
