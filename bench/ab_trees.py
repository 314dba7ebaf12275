"""A/B of two source trees of finalfusion-py with their own benchmark workers, side by side.

For refactors that must not change speed: the same generated data, the same
settings, and every job run once per tree in each round, the order of the
two trees alternating between rounds so that load changes on a shared
machine hit both alike. Each tree runs its own ``bench/bench_queries.py``
or ``bench/bench_core.py`` worker with its own ``src`` first on
``PYTHONPATH`` (the interpreter is shared). Prints medians and minima per
tree, the ratio of each contender to the numpy floor measured in the same
tree's runs, and tree B / tree A.

Usage::

    .venv/bin/python bench/ab_trees.py queries --a ../main --b . --n 100000 --rounds 5 --threads 2
    .venv/bin/python bench/ab_trees.py unknown --a ../main --b . --rounds 10
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

BLAS_VARS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def run(python: str, tree: str, script: str, worker: str, extra: list[str], cwd: str, threads: str | None) -> dict:
    env = dict(os.environ, PYTHONPATH=os.path.join(tree, "src"))
    if threads is not None:
        env.update(dict.fromkeys(BLAS_VARS, threads))
    cmd = [python, os.path.join(tree, "bench", script), "--worker", worker, *extra]
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=cwd, check=False)
    if p.returncode:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{p.stderr}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def rounds(a: argparse.Namespace, script: str, jobs: list[tuple[str, str, list[str]]], tmp: str, threads: str | None) -> dict:
    """``{(label, tree, key): [seconds, ...]}`` over interleaved rounds, tree order alternating."""
    trees = {"A": a.a, "B": a.b}
    raw: dict = {}
    for r in range(a.rounds):
        for label, worker, extra in jobs:
            for name in list(trees) if r % 2 == 0 else list(trees)[::-1]:
                for key, val in run(a.python, trees[name], script, worker, extra, tmp, threads).items():
                    if isinstance(val, list):
                        raw.setdefault((label, name, key), []).extend(val)
                    elif isinstance(val, float):
                        raw.setdefault((label, name, key), []).append(val)
        print(f"round {r + 1} of {a.rounds} done", flush=True)
    return raw


def queries(a: argparse.Namespace, tmp: str) -> None:
    common = ["--n", str(a.n), "--n-single", "30", "--n-batch", str(a.n_batch), "--reps", "5", "--batch-reps", "3"]
    gen = run(a.python, a.b, "bench_queries.py", "gen", ["--dir", tmp, "--n", str(a.n), "--dims", "300", "--subq", "50"], tmp, None)
    print(f"generated: {gen}", flush=True)
    dense, q50, npy, words = (os.path.join(tmp, f) for f in ("dense.fifu", "quantized-50.fifu", "matrix.npy", "words.txt"))
    lib = ["--lib-threads", a.threads]
    jobs = [
        ("numpy floor", "floor", ["--path", npy, "--words", words]),
        ("ours dense", "ours", ["--path", dense, *lib]),
        ("ours dense mmap", "ours", ["--path", dense, "--mmap", *lib]),
        ("ours quantized 50x256", "ours", ["--path", q50, *lib]),
        *([("ours dense 1 thread", "ours", ["--path", dense, "--lib-threads", "1"])] if a.threads != "1" else []),
    ]
    raw = rounds(a, "bench_queries.py", [(label, worker, extra + common) for label, worker, extra in jobs], tmp, a.threads)
    keys = (("single_s", 1, "single"), ("batch64_s", 64, "batch 64"), ("batch_s", a.n_batch, f"batch {a.n_batch}"))
    for stat, fn in (("median", statistics.median), ("min", min)):
        print(f"\nms per query, {stat} (ratio to the same tree's numpy floor)")
        print(f"{'':24s}" + "".join(f"{name + ' A':>22s}{name + ' B':>22s}{'B/A':>6s}" for _, _, name in keys))
        for label, _, _ in jobs:
            cells = ""
            for key, per, _ in keys:
                v = {t: fn(raw[(label, t, key)]) / per * 1e3 for t in "AB"}
                f = {t: fn(raw[("numpy floor", t, key)]) / per * 1e3 for t in "AB"}
                cells += "".join(f"{v[t]:14.2f} ({v[t] / f[t]:4.2f}x)" for t in "AB") + f"{v['B'] / v['A']:6.2f}"
            print(f"{label:24s}{cells}")


def unknown(a: argparse.Namespace, tmp: str) -> None:
    gen = ["--dir", tmp, "--n-simple", "20000", "--n-bucket", "10000", "--bucket-exp", "16", "--dims", "300"]
    print(f"generated: {run(a.python, a.b, 'bench_core.py', 'gen', gen, tmp, None)}", flush=True)
    extra = ["--path", os.path.join(tmp, "bucket.fifu"), "--n-single", "2000", "--n-batch", "10000", "--reps", "3"]
    raw = rounds(a, "bench_core.py", [("unknown", "unknown", extra)], tmp, None)
    for key in ("fresh_median_s", "cold_median_s", "single_s", "single_indiv_median_s", "first_s", "repeated_s", "batch_s"):
        if not all(("unknown", t, key) in raw for t in "AB"):  # a tree whose bench_core.py predates the measurement
            continue
        med = {t: statistics.median(raw[("unknown", t, key)]) for t in "AB"}
        low = {t: min(raw[("unknown", t, key)]) for t in "AB"}
        print(
            f"{key:24s} A {med['A'] * 1e3:9.3f} ms (min {low['A'] * 1e3:9.3f})  B {med['B'] * 1e3:9.3f} ms (min {low['B'] * 1e3:9.3f})"
            f"  B/A {med['B'] / med['A']:.2f} (min {low['B'] / low['A']:.2f})"
        )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("bench", choices=("queries", "unknown"))
    ap.add_argument("--a", required=True, help="source tree A (e.g. main's checkout)")
    ap.add_argument("--b", default=".", help="source tree B (default: this one)")
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--n", type=int, default=100_000, help="queries: rows (300 dimensions)")
    ap.add_argument("--n-batch", type=int, default=200, help="queries: words in the large batch")
    ap.add_argument("--threads", default="2", help="queries: BLAS threads of the floor, library threads of ours")
    a = ap.parse_args()
    a.a, a.b = os.path.abspath(a.a), os.path.abspath(a.b)
    tmp = tempfile.mkdtemp(prefix="ff-ab-")
    try:
        (queries if a.bench == "queries" else unknown)(a, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
