#!/usr/bin/env python3
"""Peak memory (and time) of eager and mmap loads: this tree vs other source trees vs 0.7.1.

Every load runs in a fresh subprocess with ``bench_core.worker_load``: the
peak is ``ru_maxrss`` after the load minus ``ru_maxrss`` after the imports,
as in the core benchmark, whose eager target is a peak <= 1.1x the matrix.
Variants are run interleaved (round-robin), so a load on the shared machine
affects them alike; the table shows medians and ratios.

* ``--path FILE``: a finalfusion file with an ``NdArray`` (default: generate
  the core benchmark's 400,000 x 300 file into a temporary directory);
* ``--src DIR`` (repeatable): other source trees (a ``src`` folder holding
  ``finalfusion``, e.g. an unpacked ``git archive`` of an older commit) run
  with this interpreter, to compare before/after;
* ``--peer-python``: finalfusion-python 0.7.1's interpreter (optional).

Usage::

    .venv/bin/python bench/bench_memory.py --path /tmp/simple.fifu --src /tmp/base/src --peer-python /work/peers-venv/bin/python
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import bench_core

SCRIPT = os.path.abspath(__file__)


def worker(a: argparse.Namespace) -> dict:
    if a.src:
        sys.path.insert(0, a.src)
    result = bench_core.worker_load(a)
    import finalfusion

    result["module"] = finalfusion.__file__
    return result


def matrix_mib(python: str, path: str) -> float:
    """Size of the file's matrix, read with this tree's library."""
    code = "import sys, finalfusion; e = finalfusion.load_finalfusion(sys.argv[1], mmap=True); print(e.storage.shape[0] * e.storage.shape[1] * 4 / 2**20)"
    import subprocess

    return float(subprocess.run([python, "-c", code, path], capture_output=True, text=True, check=True).stdout)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--path", help="finalfusion file to load (default: generate the core benchmark's simple file)")
    ap.add_argument("--src", action="append", default=[], help="another source tree to compare (repeatable)")
    ap.add_argument("--peer-python", help="interpreter with finalfusion-python 0.7.1")
    ap.add_argument("--reps", type=int, default=5, help="fresh subprocesses per variant and mode")
    ap.add_argument("--n-words", type=int, default=400_000)
    ap.add_argument("--dims", type=int, default=300)
    ap.add_argument("--modes", default="eager,mmap", help="comma-separated: eager, mmap")
    ap.add_argument("--out", help="write the results as JSON")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--mmap", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--worker-src", dest="src_one", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.worker is not None:
        a.src = a.src_one
        print(json.dumps(worker(a)))
        return 0

    tmp = None
    path = a.path
    if path is None:
        tmp = tempfile.mkdtemp(prefix="ff-bench-memory-")
        bench_core.run_worker(
            sys.executable, "gen", ["--dir", tmp, "--n-simple", str(a.n_words), "--n-bucket", "10", "--bucket-exp", "4", "--dims", str(a.dims)]
        )
        path = os.path.join(tmp, "simple.fifu")
    try:
        matrix = matrix_mib(sys.executable, path)
        variants = [("this tree", sys.executable, None), *((f"src {s}", sys.executable, s) for s in a.src)]
        if a.peer_python:
            variants.append(("0.7.1", a.peer_python, None))
        runs: dict[tuple[str, str], list[dict]] = {}
        for _ in range(a.reps):
            for name, python, src in variants:
                for mode in a.modes.split(","):
                    extra = ["--path", path, *(["--mmap"] if mode == "mmap" else []), *(["--worker-src", src] if src else [])]
                    runs.setdefault((name, mode), []).append(bench_core.run_worker(python, "load", extra, script=SCRIPT))
        rows = []
        print(f"matrix {matrix:.1f} MiB; {a.reps} fresh processes per figure (medians); load: {os.getloadavg()}")
        print(f"{'variant':<28} {'mode':<6} {'peak MiB':>9} {'x matrix':>9} {'time':>10}")
        for (name, mode), rs in runs.items():
            peak = statistics.median(r["peak_mb"] for r in rs)
            t = statistics.median(r["time_s"] for r in rs)
            rows.append({"variant": name, "mode": mode, "peak_mib": peak, "x_matrix": peak / matrix, "time_s": t, "runs": rs})
            print(f"{name:<28} {mode:<6} {peak:>9.1f} {peak / matrix:>8.3f}x {bench_core.fmt(t, 's'):>10}")
        if a.out:
            bench_core.save_results({"path": path, "matrix_mib": matrix, "rows": rows}, a.out)
    finally:
        if tmp:
            bench_core.remove_tmp(tmp, keep=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
