#!/usr/bin/env python3
"""Scale-out benchmark: memory of N worker processes using one large embeddings file.

Each scenario starts N workers at once, each in its own interpreter. A worker
loads the file (memory-mapped or eagerly), touches every row (so a mapping is
fully faulted in), does a few lookups, reports, and stays alive until every
worker of the scenario has been measured. The driver then reads each worker's
``/proc/<pid>/smaps_rollup``:

* RSS counts every resident page, including file pages shared with others;
* PSS divides each shared page by the number of processes mapping it, so the
  PSS total is the real memory cost of the N workers;
* USS (private clean + private dirty) is what the worker alone holds;
* HWM (``VmHWM``) is the worker's peak RSS.

Scenarios: ours with and without mmap, and finalfusion-python 0.7.1 with and
without mmap (``--peer-python``, default ``$FINALFUSION_PEER_PYTHON`` or
/work/peers-venv/bin/python; skipped if it cannot import finalfusion). The
pickled size of the embeddings (what multiprocessing, concurrent.futures,
Dask or Ray send to every worker) is measured too.

The test file is generated into a temporary directory (never the repository)
and removed at the end.

Usage::

    .venv/bin/python bench/bench_scaling.py --quick
    .venv/bin/python bench/bench_scaling.py --workers 4 --size-mb 1024 --out scaling.json
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
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _peak import process_memory_mb
from bench_core import REPO, lib_version, word

SCRIPT = os.path.abspath(__file__)


# -- workers (run in subprocesses) ---------------------------------------------------


def worker_gen(path: str, rows: int, dims: int) -> dict:
    import numpy as np

    import finalfusion

    rng = np.random.default_rng(0)
    matrix = rng.random((rows, dims), dtype=np.float32)
    emb = finalfusion.Embeddings(finalfusion.NdArray(matrix), finalfusion.SimpleVocab([word(i) for i in range(rows)]))
    emb.write(path)
    return {"bytes": os.path.getsize(path)}


def _status_mb(field: str) -> float:
    with open("/proc/self/status", encoding="ascii") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    return float("nan")


def worker_use(path: str, mmap: bool) -> None:
    """Load, touch every row, look up some words, report, then wait for the driver."""
    import numpy as np

    import finalfusion

    t = time.perf_counter()
    emb = finalfusion.load_finalfusion(path, mmap=mmap)
    load_s = time.perf_counter() - t
    matrix = np.asarray(emb.storage)
    t = time.perf_counter()
    total = 0.0
    for lo in range(0, matrix.shape[0], 1 << 16):
        total += float(matrix[lo : lo + (1 << 16)].sum(dtype=np.float64))
    touch_s = time.perf_counter() - t
    n = len(emb.vocab)
    for i in range(0, n, max(1, n // 1000)):
        emb.embedding(word(i))
    print(json.dumps({"pid": os.getpid(), "load_s": load_s, "touch_s": touch_s, "checksum": total}), flush=True)
    sys.stdin.readline()


def worker_pickle(path: str, mmap: bool) -> dict:
    import pickle

    import finalfusion

    emb = finalfusion.load_finalfusion(path, mmap=mmap)
    try:
        t = time.perf_counter()
        data = pickle.dumps(emb)
        dump_s = time.perf_counter() - t
        t = time.perf_counter()
        pickle.loads(data)
        return {"bytes": len(data), "dump_s": dump_s, "load_s": time.perf_counter() - t}
    except Exception as exc:  # 0.7.1's Cython classes may not pickle
        return {"error": f"{type(exc).__name__}: {exc}"[:200]}


# -- driver --------------------------------------------------------------------------


def smaps_rollup_mb(pid: int) -> dict[str, float]:
    """Rss, Pss and Uss (private clean + dirty) of a process, in MiB, plus its peak RSS (VmHWM)."""
    values, hwm = process_memory_mb(pid)
    return {"rss": values["Rss"], "pss": values["Pss"], "uss": values["Private_Clean"] + values["Private_Dirty"], "hwm": hwm}


def run_json(python: str, args: list[str]) -> dict:
    p = subprocess.run([python, SCRIPT, *args], capture_output=True, text=True, cwd=tempfile.gettempdir())
    if p.returncode != 0:
        raise RuntimeError(f"{python} {args[0:2]} failed:\n{p.stderr[-3000:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def scenario(python: str, path: str, mmap: bool, workers: int) -> dict:
    """Start ``workers`` processes at once; measure them all while they are alive."""
    cmd = [python, SCRIPT, "--worker", "use", "--path", path] + (["--mmap"] if mmap else [])
    procs = [subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=tempfile.gettempdir()) for _ in range(workers)]
    reports, mem = [], []
    try:
        for p in procs:
            assert p.stdout is not None
            line = p.stdout.readline()
            if not line:
                raise RuntimeError(f"worker {cmd} failed")
            reports.append(json.loads(line))
        mem = [smaps_rollup_mb(p.pid) for p in procs]
    finally:
        for p in procs:
            if p.stdin:
                p.stdin.close()
            p.wait()
    per = {k: statistics.median(m[k] for m in mem) for k in ("rss", "pss", "uss", "hwm")}
    return {
        "per_worker_median_mb": per,
        "total_mb": {k: sum(m[k] for m in mem) for k in ("rss", "pss", "uss")},
        "load_s_median": statistics.median(r["load_s"] for r in reports),
        "touch_s_median": statistics.median(r["touch_s"] for r in reports),
        "checksums_equal": len({round(r["checksum"], 3) for r in reports}) == 1,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="64 MB file, 2 workers (smoke test)")
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--size-mb", type=int, default=1024, help="size of the embedding matrix")
    ap.add_argument("--dims", type=int, default=256)
    ap.add_argument("--our-python", default=sys.executable)
    ap.add_argument("--peer-python", default=os.environ.get("FINALFUSION_PEER_PYTHON") or "/work/peers-venv/bin/python")
    ap.add_argument("--out", help="write the results as JSON")
    ap.add_argument("--worker", choices=["gen", "use", "pickle"], help=argparse.SUPPRESS)
    ap.add_argument("--path", help=argparse.SUPPRESS)
    ap.add_argument("--mmap", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--rows", type=int, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.worker == "gen":
        print(json.dumps(worker_gen(a.path, a.rows, a.dims)))
        return 0
    if a.worker == "use":
        worker_use(a.path, a.mmap)
        return 0
    if a.worker == "pickle":
        print(json.dumps(worker_pickle(a.path, a.mmap)))
        return 0

    size_mb, workers = (64, 2) if a.quick else (a.size_mb, a.workers)
    rows = size_mb * 2**20 // (4 * a.dims)
    libs = {"ours": a.our_python}
    try:
        info = {"ours": lib_version(a.our_python)}
        info["0.7.1"] = lib_version(a.peer_python)
        libs["0.7.1"] = a.peer_python
    except (RuntimeError, OSError) as exc:
        print(f"peer skipped: {exc}", file=sys.stderr)
    for name, v in info.items():
        print(f"{name:6s}: {libs[name]} -> finalfusion/numpy/python/file: {v}", flush=True)

    tmp = tempfile.mkdtemp(prefix="ffscaling-")
    if os.path.abspath(tmp).startswith(REPO + os.sep):
        raise SystemExit("the temporary directory must not be inside the repository")
    path = os.path.join(tmp, "big.fifu")
    results: dict = {"config": {"size_mb": size_mb, "rows": rows, "dims": a.dims, "workers": workers}, "libs": info}
    try:
        t = time.perf_counter()
        results["file_bytes"] = run_json(a.our_python, ["--worker", "gen", "--path", path, "--rows", str(rows), "--dims", str(a.dims)])["bytes"]
        print(f"generated {results['file_bytes'] / 2**20:.0f} MiB ({rows} x {a.dims}) in {time.perf_counter() - t:.1f} s", flush=True)
        results["uptime_before"] = os.getloadavg()
        results["scenarios"] = {}
        results["pickle"] = {}
        for name, python in libs.items():
            for mmap in (True, False):
                key = f"{name} {'mmap' if mmap else 'eager'}"
                results["scenarios"][key] = scenario(python, path, mmap, workers)
                results["pickle"][key] = run_json(python, ["--worker", "pickle", "--path", path] + (["--mmap"] if mmap else []))
                print(f"measured {key}", flush=True)
        results["uptime_after"] = os.getloadavg()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    report(results)
    if a.out:
        with open(a.out, "w", encoding="utf-8") as f:
            json.dump(results, f, indent=2)
    return 0


def report(results: dict) -> None:
    cfg = results["config"]
    print(f"\n{cfg['workers']} workers, file {results['file_bytes'] / 2**20:.0f} MiB; load average {results['uptime_before']} -> {results['uptime_after']}")
    head = f"{'scenario':12s} {'RSS/worker':>11s} {'PSS/worker':>11s} {'USS/worker':>11s} {'peak RSS':>9s} {'total PSS':>10s} {'load':>8s} {'pickled':>14s}"
    print(head)
    print("-" * len(head))
    for key, s in results["scenarios"].items():
        per, total = s["per_worker_median_mb"], s["total_mb"]
        pk = results["pickle"][key]
        pickled = f"{pk['bytes']:,} B" if "bytes" in pk else "error"
        print(
            f"{key:12s} {per['rss']:8.0f} MB {per['pss']:8.0f} MB {per['uss']:8.0f} MB {per['hwm']:6.0f} MB {total['pss']:7.0f} MB "
            f"{s['load_s_median']:7.3f}s {pickled:>14s}"
        )
    sc = results["scenarios"]
    if "ours mmap" in sc and "ours eager" in sc:
        ratio = sc["ours eager"]["total_mb"]["pss"] / sc["ours mmap"]["total_mb"]["pss"]
        print(f"\ntotal PSS, ours eager / ours mmap: {ratio:.2f}x")
    if "ours mmap" in sc and "0.7.1 mmap" in sc:
        ratio = sc["ours mmap"]["total_mb"]["pss"] / sc["0.7.1 mmap"]["total_mb"]["pss"]
        print(f"total PSS, ours mmap / 0.7.1 mmap: {ratio:.2f}x")
    pk = results["pickle"]
    if "bytes" in pk.get("ours mmap", {}) and "bytes" in pk.get("ours eager", {}):
        print(f"pickled size, ours eager / ours mmap: {pk['ours eager']['bytes'] / pk['ours mmap']['bytes']:,.0f}x")


if __name__ == "__main__":
    sys.exit(main())
