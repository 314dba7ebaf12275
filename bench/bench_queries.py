#!/usr/bin/env python3
"""Query benchmark: top-10 neighbours over 400,000 x 300 vectors.

Compares, each in its own interpreter (see bench/README.md):

* ours (this repository): ``word_similarity`` (single), ``word_similarity_batch``
  (batches of 64 and 1,000), dense in memory, dense mmapped and a quantized
  copy (ADC);
* the numpy floor: ``M @ q`` + ``np.argpartition`` + sort of 10 (single),
  ``Q @ M.T`` in row blocks + ``argpartition`` (batches);
* gensim 4 ``KeyedVectors.most_similar`` (peer venv; no batch call, so a loop);
* finalfusion-python 0.7.1 ``word_similarity`` (peer venv; a loop for batches).

The quantized copy is built here with a quick product quantizer: 150
subquantizers x 256 centroids, trained by a few k-means iterations on a
sample, every row encoded to its nearest centroids.

Usage::

    .venv/bin/python bench/bench_queries.py --quick
    .venv/bin/python bench/bench_queries.py --out results.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_core import REPO, fmt, lib_version, med, remove_tmp, run_worker, save_results, word

SCRIPT = os.path.abspath(__file__)
K = 10


# ----------------------------------------------------------------------------------
# data generation (ours)
# ----------------------------------------------------------------------------------
def kmeans_pq(x, m: int, k: int, iters: int, rng):  # type: ignore[no-untyped-def]
    """A quick product quantizer: per subquantizer a few Lloyd iterations on ``x``."""
    import numpy as np

    n, d = x.shape
    ds = d // m
    cents = np.empty((m, k, ds), dtype=np.float32)
    for j in range(m):
        sub = x[:, j * ds : (j + 1) * ds]
        c = sub[rng.choice(n, k, replace=False)].copy()
        for _ in range(iters):
            assign = nearest(sub, c)
            sums = np.stack([np.bincount(assign, weights=sub[:, i], minlength=k) for i in range(ds)], axis=1)
            counts = np.bincount(assign, minlength=k)[:, None]
            c = np.where(counts > 0, sums / np.maximum(counts, 1), c).astype(np.float32)
        cents[j] = c
    return cents


def nearest(sub, c):  # type: ignore[no-untyped-def]
    import numpy as np

    dist = (c * c).sum(1)[None, :] - 2 * sub @ c.T
    return np.argmin(dist, axis=1)


def worker_gen(a: argparse.Namespace) -> dict:
    import numpy as np

    import finalfusion
    from finalfusion.storage import NdArray, QuantizedArray
    from finalfusion.storage.quantized import PQ
    from finalfusion.vocab import SimpleVocab

    rng = np.random.default_rng(42)
    out: dict = {}
    t = time.perf_counter()
    m = rng.standard_normal((a.n, a.dims), dtype=np.float32)
    m /= np.linalg.norm(m, axis=1, keepdims=True)
    words = [word(i) for i in range(a.n)]
    np.save(os.path.join(a.dir, "matrix.npy"), m)
    with open(os.path.join(a.dir, "words.txt"), "w", encoding="utf-8") as f:
        f.write("\n".join(words))
    vocab = SimpleVocab(words)
    finalfusion.Embeddings(NdArray(m), vocab).write(os.path.join(a.dir, "dense.fifu"))
    out["gen_dense_s"] = time.perf_counter() - t

    sample = m[rng.choice(a.n, min(a.n, 20_000), replace=False)]
    for subq in (int(x) for x in a.subq.split(",")):
        t = time.perf_counter()
        cents = kmeans_pq(sample, subq, 256, 4, rng)
        ds = a.dims // subq
        codes = np.empty((a.n, subq), dtype=np.uint8)
        for j in range(subq):
            for lo in range(0, a.n, 100_000):
                codes[lo : lo + 100_000, j] = nearest(m[lo : lo + 100_000, j * ds : (j + 1) * ds], cents[j])
        storage = QuantizedArray(PQ(cents, None), codes, None)
        finalfusion.Embeddings(storage, vocab).write(os.path.join(a.dir, f"quantized-{subq}.fifu"))
        out[f"gen_quantized_{subq}_s"] = time.perf_counter() - t
    return out


# ----------------------------------------------------------------------------------
# measurement workers
# ----------------------------------------------------------------------------------
def query_words(a: argparse.Namespace, count: int, seed: int) -> list[str]:
    import numpy as np

    rng = np.random.default_rng(seed)
    return [word(int(i)) for i in rng.choice(a.n, size=count, replace=False)]


def time_single(f, a: argparse.Namespace) -> list[float]:  # type: ignore[no-untyped-def]
    """Per-query seconds: one figure per repetition, each the mean over ``a.n_single`` distinct words."""
    out = []
    for r in range(a.reps):
        ws = query_words(a, a.n_single, 100 + r)
        t = time.perf_counter()
        for w in ws:
            f(w)
        out.append((time.perf_counter() - t) / len(ws))
    return out


def time_batch(f, a: argparse.Namespace, size: int, reps: int) -> list[float]:  # type: ignore[no-untyped-def]
    out = []
    for r in range(reps):
        ws = query_words(a, size, 1000 + r)
        t = time.perf_counter()
        f(ws)
        out.append(time.perf_counter() - t)
    return out


def worker_ours(a: argparse.Namespace) -> dict:
    if a.lib_threads:  # our scans split over our own threads; BLAS stays on one (set before numpy loads)
        for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
            os.environ[var] = "1"
    import finalfusion

    if a.lib_threads:
        finalfusion.set_threads(a.lib_threads)  # the library-wide thread count (scans, batches)
    emb = finalfusion.load_finalfusion(a.path, mmap=a.mmap)
    res: dict = {"threads": finalfusion.get_threads() if a.lib_threads else None}
    t = time.perf_counter()
    first = emb.word_similarity(word(0), k=K)
    res["first_query_s"] = time.perf_counter() - t  # includes the one-time row checks / code layout
    if first is None or len(first) != K:
        raise RuntimeError(f"unexpected first result {first!r}")
    res["single_s"] = time_single(lambda w: emb.word_similarity(w, k=K), a)
    res["batch64_s"] = time_batch(lambda ws: emb.word_similarity_batch(ws, k=K), a, 64, a.reps)
    res["batch_s"] = time_batch(lambda ws: emb.word_similarity_batch(ws, k=K), a, a.n_batch, a.batch_reps)
    return res


def read_words(path: str) -> list[str]:
    with open(path, encoding="utf-8") as f:
        return f.read().split("\n")


def worker_floor(a: argparse.Namespace) -> dict:
    import numpy as np

    m = np.load(a.path)
    index = {w: i for i, w in enumerate(read_words(a.words))}

    def single(w: str) -> list[int]:
        s = m @ m[index[w]]
        top = np.argpartition(-s, K)[:K]
        return top[np.argsort(-s[top])].tolist()

    def batch(ws: list[str]) -> None:
        q = m[[index[w] for w in ws]]
        step = max(256, (1 << 23) // len(ws))
        for lo in range(0, len(m), step):
            s = q @ m[lo : lo + step].T
            np.argpartition(-s, K, axis=1)[:, :K]

    res: dict = {"single_s": time_single(single, a)}
    res["batch64_s"] = time_batch(batch, a, 64, a.reps)
    res["batch_s"] = time_batch(batch, a, a.n_batch, a.batch_reps)
    return res


def worker_gensim(a: argparse.Namespace) -> dict:
    import numpy as np
    from gensim.models import KeyedVectors

    m = np.load(a.path)
    kv = KeyedVectors(m.shape[1])
    kv.add_vectors(read_words(a.words), m)
    t = time.perf_counter()
    kv.most_similar(word(0), topn=K)
    res: dict = {"first_query_s": time.perf_counter() - t}  # fill_norms()
    res["single_s"] = time_single(lambda w: kv.most_similar(w, topn=K), a)
    res["batch64_s"] = time_batch(lambda ws: [kv.most_similar(w, topn=K) for w in ws], a, 64, 1)
    res["batch_s"] = time_batch(lambda ws: [kv.most_similar(w, topn=K) for w in ws], a, a.n_batch, 1)
    return res


def worker_ff071(a: argparse.Namespace) -> dict:
    import finalfusion

    emb = finalfusion.load_finalfusion(a.path, mmap=a.mmap)
    res: dict = {"single_s": time_single(lambda w: emb.word_similarity(w, k=K), a)}
    res["batch64_s"] = time_batch(lambda ws: [emb.word_similarity(w, k=K) for w in ws], a, 64, 1)
    res["batch_s"] = time_batch(lambda ws: [emb.word_similarity(w, k=K) for w in ws], a, a.n_batch, 1)
    return res


WORKERS = {"gen": worker_gen, "ours": worker_ours, "floor": worker_floor, "gensim": worker_gensim, "ff071": worker_ff071}


# ----------------------------------------------------------------------------------
# driver
# ----------------------------------------------------------------------------------
def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="small sizes for smoke testing")
    ap.add_argument("--out", help="write results as JSON to this file")
    ap.add_argument("--our-python", default=sys.executable)
    default_peer = os.environ.get("FINALFUSION_PEER_PYTHON") or os.path.join(REPO, ".venv-peers", "bin", "python")
    ap.add_argument("--peer-python", default=default_peer, help="interpreter with finalfusion 0.7.1 and gensim")
    ap.add_argument("--reps", type=int, default=None)
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--rounds", type=int, default=None, help="run every job this many times, interleaved (default 3; --quick 1)")
    ap.add_argument(
        "--threads",
        default="1",
        help="cores every contender may use: BLAS threads (OPENBLAS/OMP/MKL_NUM_THREADS) for the floor and the peers, "
        "finalfusion.set_threads(N) (BLAS on one thread) for ours; default 1, 'auto' sets nothing",
    )
    ap.add_argument("--lib-threads", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--worker", choices=sorted(WORKERS), help=argparse.SUPPRESS)
    ap.add_argument("--path", help=argparse.SUPPRESS)
    ap.add_argument("--words", help=argparse.SUPPRESS)
    ap.add_argument("--dir", help=argparse.SUPPRESS)
    ap.add_argument("--mmap", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--n", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--dims", type=int, default=300, help="dimensionality (default 300)")
    ap.add_argument("--subq", default="150,50", help="subquantizers of the quantized copies, comma-separated; each is compared with dense (default 150,50)")
    ap.add_argument("--n-single", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--n-batch", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--batch-reps", type=int, help=argparse.SUPPRESS)
    a = ap.parse_args()

    if a.worker:
        print(json.dumps(WORKERS[a.worker](a)))
        return 0

    if a.threads != "auto":
        for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
            os.environ[var] = a.threads
    n, n_single, n_batch = (20_000, 20, 200) if a.quick else (400_000, 30, 1000)
    reps = a.reps or (3 if a.quick else 5)
    batch_reps = 2 if a.quick else 3
    tmp = tempfile.mkdtemp(prefix="ffqbench-")
    if os.path.abspath(tmp).startswith(REPO + os.sep):
        raise SystemExit("temporary directory must not be inside the repository")
    libs = {"ours": a.our_python, "peer": a.peer_python}
    info = {name: lib_version(py) for name, py in libs.items()}
    for name, v in info.items():
        print(f"{name:5s}: {libs[name]} -> finalfusion/numpy/python/file: {v}", flush=True)
    results: dict = {
        "config": {"blas_threads": a.threads, "n": n, "dims": a.dims, "subquantizers": a.subq, "k": K, "n_single": n_single, "n_batch": n_batch, "reps": reps},
        "libs": info,
        "platform": platform.platform(),
        "load_before": os.getloadavg(),
        "git": subprocess.run(["git", "-C", REPO, "describe", "--always", "--dirty"], capture_output=True, text=True).stdout.strip(),
    }
    ours_threads = [] if a.threads == "auto" else ["--lib-threads", a.threads]
    common = ["--n", str(n), "--n-single", str(n_single), "--n-batch", str(n_batch), "--reps", str(reps), "--batch-reps", str(batch_reps)]
    raw: dict = {}
    try:
        t = time.perf_counter()
        results["gen"] = run_worker(a.our_python, "gen", ["--dir", tmp, "--n", str(n), "--dims", str(a.dims), "--subq", a.subq], script=SCRIPT)
        print(f"generated in {time.perf_counter() - t:.1f} s: {results['gen']}", flush=True)
        dense = os.path.join(tmp, "dense.fifu")
        subqs = a.subq.split(",")
        npy, words = os.path.join(tmp, "matrix.npy"), os.path.join(tmp, "words.txt")
        jobs = [
            ("numpy floor", a.our_python, "floor", ["--path", npy, "--words", words]),
            ("ours dense", a.our_python, "ours", ["--path", dense, *ours_threads]),
            ("ours dense mmap", a.our_python, "ours", ["--path", dense, "--mmap", *ours_threads]),
            *([("ours dense 1 thread", a.our_python, "ours", ["--path", dense, "--lib-threads", "1"])] if a.threads != "1" else []),
            *((f"ours quantized {q}x256", a.our_python, "ours", ["--path", os.path.join(tmp, f"quantized-{q}.fifu"), *ours_threads]) for q in subqs),
            ("gensim most_similar", a.peer_python, "gensim", ["--path", npy, "--words", words]),
            ("finalfusion 0.7.1", a.peer_python, "ff071", ["--path", dense]),
        ]
        # interleaved rounds, so that load changes on the shared machine hit every contender alike
        for r in range(a.rounds or (1 if a.quick else 3)):
            for label, py, task, extra in jobs:
                got = run_worker(py, task, extra + common, script=SCRIPT)
                for key, val in got.items():
                    raw.setdefault(label, {}).setdefault(key, []).extend(val if isinstance(val, list) else [val])
                print(f"round {r + 1} {label}: {got}", flush=True)
    finally:
        remove_tmp(tmp, a.keep)
    results["raw"] = raw
    results["rounds"] = a.rounds or (1 if a.quick else 3)
    results["load_after"] = os.getloadavg()

    single = {k: med(v["single_s"]) for k, v in raw.items()}
    b64 = {k: med(v["batch64_s"]) / 64 for k, v in raw.items()}
    bn = {k: med(v["batch_s"]) / n_batch for k, v in raw.items()}
    floor = single["numpy floor"]
    ours = single["ours dense"]
    print(f"\n{n:,} x {a.dims}, top-{K}; quantized copies: {a.subq} subquantizers x 256 centroids; per-query times (medians)")
    hdr = f"| {'':24s} | {'single':>10s} | {'batch 64 /q':>11s} | {f'batch {n_batch:,} /q':>13s} | {'single / floor':>14s} |"
    print(hdr)
    print("|" + "|".join("-" * len(c) for c in hdr.split("|")[1:-1]) + "|")
    for k in raw:
        print(f"| {k:24s} | {fmt(single[k], 's'):>10s} | {fmt(b64[k], 's'):>11s} | {fmt(bn[k], 's'):>13s} | {single[k] / floor:14.2f} |")
    checks = [
        ("single query <= 1.15x numpy floor", ours / floor, ours <= 1.15 * floor),
        ("single query faster than gensim", ours / single["gensim most_similar"], ours < single["gensim most_similar"]),
        ("single query faster than 0.7.1", ours / single["finalfusion 0.7.1"], ours < single["finalfusion 0.7.1"]),
        ("batch-64 throughput >= 8x single", ours / b64["ours dense"], ours / b64["ours dense"] >= 8),
    ]
    # every quantized copy against dense; the first (finalfusion-utils' default dims / 2 in the default list) is the target
    for q in subqs:
        qs = single[f"ours quantized {q}x256"]
        checks.append((f"quantized ({q}x256) single faster than dense", qs / ours, qs < ours))
    if "ours dense 1 thread" in single:
        serial = single["ours dense 1 thread"]
        checks.append(("batch-64 throughput >= 8x single, 1 thread", serial / b64["ours dense 1 thread"], serial / b64["ours dense 1 thread"] >= 8))
    print()
    for name, ratio, ok in checks:
        print(f"{name:46s} ratio {ratio:6.2f}  {'PASS' if ok else 'FAIL'}")
    results["table"] = {"single_s": single, "batch64_per_query_s": b64, "batch_per_query_s": bn}
    results["checks"] = [{"check": c, "ratio": r, "pass": ok} for c, r, ok in checks]
    print(f"load average before {results['load_before']}, after {results['load_after']}")
    save_results(results, a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
