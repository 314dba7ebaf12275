#!/usr/bin/env python3
"""Quantization benchmark: finalfusion-py vs faiss-cpu and nanopq at equal code size.

On the same data and the same training rows, every library trains a product
quantizer (and an OPQ variant), encodes all rows and decodes them again. The
driver then measures, with one piece of code for everybody:

* mean squared reconstruction error per row (sum over dimensions, mean over rows);
* nearest-neighbour recall@10: the dense top-10 (cosine) of each query row
  vs the top-10 found among the reconstructed rows;
* training time and encoding time (medians over ``--reps`` runs).

Iterations are equal for everybody (25 k-means iterations; OPQ: 25 outer
iterations) except in the rows marked ``it=0``, which use every library's
own defaults.

Each library runs in its own subprocess (ours with ``sys.executable``, the
peers with ``--peer-python``, default ``/work/peers-venv/bin/python`` or
``$FINALFUSION_PEER_PYTHON``). All workers get the same BLAS/OpenMP thread
count (``--threads``, default 1: the machine is shared, and multi-threaded
BLAS on busy cores is noise, not signal).

Data, generated or converted into a ``tempfile.mkdtemp()`` directory:

* ``synthetic``: 100,000 x 300 correlated rows (rank-60 mix + noise, unit length);
* ``rust-similarity``: the 41 x 100 table of tests/data/testdata/rust-similarity.fifu;
* ``fasttext-polarity``: gensim's 1,694 x 100 fastText test vectors
  (``pang_lee_polarity_fasttext.vec``, from the peer interpreter's gensim), if present.

Usage::

    .venv/bin/python bench/bench_quantize.py --quick
    .venv/bin/python bench/bench_quantize.py --out results.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_core import REPO, lib_version, med, run_worker

SCRIPT = os.path.abspath(__file__)
TESTDATA = os.path.join(REPO, "tests", "data", "testdata")


# ----------------------------------------------------------------------------------
# workers (run inside a subprocess; print one JSON object on the last stdout line)
# ----------------------------------------------------------------------------------
def _train_encode(a: argparse.Namespace, train, encode) -> dict:
    """Time ``train(x_train) -> model`` and ``encode(model, x) -> reconstruction``; save the last reconstruction."""
    import numpy as np

    x = np.load(a.data)
    tr = np.load(a.train)
    train_s, encode_s = [], []
    for _ in range(a.reps):
        t = time.perf_counter()
        try:
            model = train(tr)
        except RuntimeError as exc:  # e.g. faiss's OPQMatrix needs >= 256 training rows whatever the code size
            return {"error": str(exc).strip().splitlines()[-1][:300]}
        train_s.append(time.perf_counter() - t)
        t = time.perf_counter()
        rec = encode(model, x)
        encode_s.append(time.perf_counter() - t)
    np.save(a.out, np.asarray(rec, dtype=np.float32))
    return {"train_s": train_s, "encode_s": encode_s}


def worker_ours(a: argparse.Namespace) -> dict:
    from finalfusion.quantize import encode, train_pq

    def train(tr):
        return train_pq(tr, a.m, a.bits, a.method, a.iters or 100, seed=0)  # 0: finalfusion-utils' default, 100

    def enc(pq, x):
        return pq.reconstruct(encode(pq, x))

    return _train_encode(a, train, enc)


def worker_faiss(a: argparse.Namespace) -> dict:
    import faiss
    import numpy as np

    def train(tr):
        opq = None
        if a.method == "opq":
            opq = faiss.OPQMatrix(tr.shape[1], a.m)
            if a.iters:
                opq.niter = a.iters
            opq.train(tr)
            tr = opq.apply_py(tr)
        pq = faiss.ProductQuantizer(tr.shape[1], a.m, a.bits)
        if a.iters:
            pq.cp.niter = a.iters
        pq.cp.seed = 0
        pq.train(np.ascontiguousarray(tr))
        return opq, pq

    def enc(model, x):
        opq, pq = model
        xx = opq.apply_py(x) if opq is not None else x
        rec = pq.decode(pq.compute_codes(np.ascontiguousarray(xx)))
        return opq.reverse_transform(rec) if opq is not None else rec

    return _train_encode(a, train, enc)


def worker_nanopq(a: argparse.Namespace) -> dict:
    import nanopq

    def train(tr):
        its = {"pq_iter": a.iters, "rotation_iter": a.iters} if a.iters else {}
        if a.method == "opq":
            return nanopq.OPQ(a.m, Ks=2**a.bits, verbose=False).fit(tr, seed=0, **its)
        return nanopq.PQ(a.m, Ks=2**a.bits, verbose=False).fit(tr, seed=0, **({"iter": a.iters} if a.iters else {}))

    def enc(model, x):
        return model.decode(model.encode(x))

    return _train_encode(a, train, enc)


def worker_convert(a: argparse.Namespace) -> dict:
    """Read a finalfusion file (ours) or a .vec text file into a float32 .npy."""
    import numpy as np

    if a.data.endswith(".fifu"):
        import finalfusion

        m = np.asarray(finalfusion.load_finalfusion(a.data).storage, dtype=np.float32)
    else:
        with open(a.data, "rb") as f:  # some words are not valid UTF-8; only the numbers matter here
            rows, dims = map(int, f.readline().split())
            m = np.array([line.split()[-dims:] for line in f], dtype=np.float32)
        if m.shape != (rows, dims):
            raise RuntimeError(f"{a.data}: expected {rows}x{dims}, got {m.shape}")
    np.save(a.out, m)
    return {"shape": list(m.shape)}


WORKERS = {"ours": worker_ours, "faiss": worker_faiss, "nanopq": worker_nanopq, "convert": worker_convert}


# ----------------------------------------------------------------------------------
# driver
# ----------------------------------------------------------------------------------
def synthetic(n: int, d: int, seed: int = 0):
    import numpy as np

    rng = np.random.default_rng(seed)
    rank = min(60, d)
    lat = rng.standard_normal((n, rank), dtype=np.float32) * np.linspace(3, 0.3, rank, dtype=np.float32)
    x = lat @ rng.standard_normal((rank, d), dtype=np.float32) + np.float32(0.5) * rng.standard_normal((n, d), dtype=np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    return x


def metrics(x, rec, n_queries: int = 1000, k: int = 10) -> dict:
    """MSE per row and recall@k of cosine top-k among reconstructed rows vs dense rows."""
    import numpy as np

    err = float(np.mean(np.sum((x.astype(np.float64) - rec) ** 2, axis=1)))
    rng = np.random.default_rng(1)
    q = x[rng.choice(len(x), size=min(n_queries, len(x)), replace=False)]

    def unit(m):
        n = np.linalg.norm(m, axis=1, keepdims=True)
        return m / np.where(n > 0, n, 1)

    def topk(db):
        s = unit(q) @ unit(db).T
        return np.argpartition(-s, k, axis=1)[:, :k]

    truth, got = topk(x), topk(rec)
    hits = sum(len(set(a) & set(b)) for a, b in zip(truth.tolist(), got.tolist(), strict=True))
    return {"mse": err, f"recall@{k}": hits / (k * len(q))}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="small sizes for smoke testing")
    ap.add_argument("--out", help="write results as JSON to this file")
    ap.add_argument("--our-python", default=sys.executable)
    ap.add_argument("--peer-python", default=os.environ.get("FINALFUSION_PEER_PYTHON") or "/work/peers-venv/bin/python")
    ap.add_argument("--threads", type=int, default=1, help="BLAS/OpenMP threads for every worker")
    ap.add_argument("--reps", type=int, default=None, help="repetitions on the small real tables (synthetic: 1)")
    ap.add_argument("--worker", choices=sorted(WORKERS), help=argparse.SUPPRESS)
    ap.add_argument("--data", help=argparse.SUPPRESS)
    ap.add_argument("--train", help=argparse.SUPPRESS)
    ap.add_argument("--method", help=argparse.SUPPRESS)
    ap.add_argument("--m", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--bits", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--iters", type=int, help=argparse.SUPPRESS)
    a = ap.parse_args()

    if a.worker:
        print(json.dumps(WORKERS[a.worker](a)))
        return 0

    import numpy as np

    libs = {"ours": a.our_python, "faiss": a.peer_python, "nanopq": a.peer_python}
    # Workers inherit os.environ (bench_core.run_worker): same thread count for every library.
    os.environ.update({v: str(a.threads) for v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")})
    print(f"ours: {lib_version(a.our_python)}", flush=True)
    peer = subprocess.run(
        [a.peer_python, "-c", "import faiss, nanopq, numpy; print(faiss.__version__, nanopq.__version__, numpy.__version__)"], capture_output=True, text=True
    )
    print(f"peers (faiss, nanopq, numpy): {peer.stdout.strip() or peer.stderr.strip()}", flush=True)

    def run(lib: str, task: str, extra: list[str]) -> dict:
        return run_worker(libs.get(lib, a.our_python), task, extra, script=SCRIPT)

    tmp = tempfile.mkdtemp(prefix="ffbench-quant-")
    results: dict = {"platform": platform.platform(), "threads": a.threads, "peers": peer.stdout.strip(), "load_before": os.getloadavg(), "runs": []}
    try:
        datasets = []  # (name, data path, train path, reps, configs)
        n, n_train = (10_000, 2_000) if a.quick else (100_000, 10_000)
        x = synthetic(n, 300)
        np.save(os.path.join(tmp, "syn.npy"), x)
        np.save(os.path.join(tmp, "syn-train.npy"), x[np.sort(np.random.default_rng(2).choice(n, n_train, replace=False))])
        # iterations 0 = every library's defaults (ours 100, faiss 25 / OPQ 50 outer, nanopq 20 / OPQ 10 rotations)
        syn_cfg = [(50, 8, 25)] if a.quick else [(50, 8, 25), (50, 8, 0)]
        datasets.append(("synthetic", "syn.npy", "syn-train.npy", 1, syn_cfg))
        real = [("rust-similarity", os.path.join(TESTDATA, "rust-similarity.fifu"), [(50, 5, 25), (25, 5, 25)])]
        vec = subprocess.run(
            [a.peer_python, "-c", "import gensim.test.utils as u; print(u.datapath('pang_lee_polarity_fasttext.vec'))"], capture_output=True, text=True
        ).stdout.strip()
        if vec and os.path.exists(vec):
            real.append(("fasttext-polarity", vec, [(50, 8, 25), (25, 8, 25)]))
        for name, src, cfg in real:
            if not os.path.exists(src):
                print(f"skipping {name}: {src} not found", flush=True)
                continue
            run("ours", "convert", ["--data", src, "--out", os.path.join(tmp, f"{name}.npy")])
            datasets.append((name, f"{name}.npy", f"{name}.npy", a.reps or (1 if a.quick else 3), cfg))

        for name, data, train, reps, configs in datasets:
            xd = np.load(os.path.join(tmp, data))
            for m, bits, iters in configs:
                for method in ("pq", "opq", "gaussian_opq"):
                    for lib in ("ours", "faiss", "nanopq"):
                        if method == "gaussian_opq" and lib != "ours":
                            continue
                        out = os.path.join(tmp, "rec.npy")
                        extra = ["--data", os.path.join(tmp, data), "--train", os.path.join(tmp, train), "--out", out]
                        extra += ["--method", method, "--m", str(m), "--bits", str(bits), "--iters", str(iters), "--reps", str(reps)]
                        t = time.perf_counter()
                        r = run(lib, lib, extra)
                        row = {"data": name, "shape": list(xd.shape), "m": m, "bits": bits, "iters": iters, "method": method, "lib": lib, **r}
                        if "error" in r:
                            print(f"{name:17s} m={m:3d} bits={bits} it={iters} {method:12s} {lib:6s} FAILED: {r['error']}", flush=True)
                            results["runs"].append(row)
                            continue
                        row.update(metrics(xd, np.load(out)))
                        row["train_med_s"], row["encode_med_s"] = med(r["train_s"]), med(r["encode_s"])
                        results["runs"].append(row)
                        print(
                            f"{name:17s} m={m:3d} bits={bits} it={iters} {method:12s} {lib:6s} mse={row['mse']:.5g} "
                            f"recall@10={row['recall@10']:.3f} train={row['train_med_s']:.2f}s encode={row['encode_med_s']:.2f}s "
                            f"(wall {time.perf_counter() - t:.0f}s)",
                            flush=True,
                        )
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    results["load_after"] = os.getloadavg()
    print_ratios(results["runs"])
    if a.out:
        with open(a.out, "w", encoding="utf-8") as f:
            json.dump(results, f, indent=1)
    return 0


def print_ratios(runs: list[dict]) -> None:
    """Ours vs each peer per configuration: error ratio (target <= 1.05 vs faiss) and speed ratios."""
    print("\nratios (ours / peer): mse, train time, encode time")
    for r in runs:
        if r["lib"] != "ours" or r["method"] == "gaussian_opq":
            continue
        for peer in ("faiss", "nanopq"):
            p = next((x for x in runs if x["lib"] == peer and "error" not in x and all(x[k] == r[k] for k in ("data", "m", "bits", "iters", "method"))), None)
            if p is None:
                continue
            print(
                f"{r['data']:17s} m={r['m']:3d} bits={r['bits']} it={r['iters']:2d} {r['method']:4s} vs {peer:6s}: mse x{r['mse'] / p['mse']:.3f}  "
                f"train x{r['train_med_s'] / p['train_med_s']:.2f}  encode x{r['encode_med_s'] / p['encode_med_s']:.2f}"
            )


if __name__ == "__main__":
    sys.exit(main())
