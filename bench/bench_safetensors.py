#!/usr/bin/env python3
"""Loading a BF16 token table from safetensors: load_safetensors vs a bare numpy decode, time and peak memory.

The file (``rows x dims`` BF16 ``model.embed_tokens.weight``, written with
the header layout safetensors uses) is generated into a temporary directory.
Every measurement runs in a fresh subprocess; variants are interleaved
(round-robin), so load on the shared machine affects them alike. Peak memory
is the growth of the peak RSS (``VmHWM``, reset just before the load, after
the imports and the token list) divided by the size of the float32 result.

Variants:

* ``numpy``: the peer -- ``np.fromfile`` of the tensor's bytes as ``<u2``,
  shifted into a preallocated float32 matrix (``np.left_shift(u2, 16, out=...)``):
  the least any BF16 reader must do;
* ``numpy-naive``: ``(u2.astype(u4) << 16).view(f4)``, the usual one-liner;
* ``load``: ``load_safetensors(path, tokenizer=tokens, normalize=False)``;
* ``load+normalize``: the default ``normalize=True`` (one more pass: norms).

The issue's targets: ``load`` at most 1.3x the ``numpy`` time, peak at most
1.15x the float32 result.

Usage::

    .venv/bin/python bench/bench_safetensors.py            # 256k x 2048 (1 GiB file, 2 GiB result)
    .venv/bin/python bench/bench_safetensors.py --small    # 32k x 2048
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import struct
import subprocess
import sys
import tempfile
import time

from _peak import peak_since_reset, reset_peak

NAME = "model.embed_tokens.weight"


def write_bf16(path: str, rows: int, dims: int) -> None:
    """A safetensors file holding one BF16 table (random values), written block by block."""
    import numpy as np

    header = json.dumps({NAME: {"dtype": "BF16", "shape": [rows, dims], "data_offsets": [0, rows * dims * 2]}}).encode()
    header += b" " * (-len(header) % 8)
    rng = np.random.default_rng(0)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(header)) + header)
        step = max(1, (1 << 24) // dims)
        for start in range(0, rows, step):
            n = min(step, rows - start)
            block = rng.standard_normal((n, dims), dtype=np.float32)
            f.write((block.view(np.uint32) >> 16).astype("<u2").tobytes())


def worker(variant: str, path: str, rows: int, dims: int) -> dict[str, float]:
    import numpy as np

    import finalfusion

    tokens = [f"tok{i}" for i in range(rows)]
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
    before = reset_peak()
    t0 = time.perf_counter()
    if variant == "numpy":
        raw = np.fromfile(path, dtype="<u2", count=rows * dims, offset=8 + n)
        matrix = np.empty((rows, dims), dtype=np.float32)
        np.left_shift(raw.reshape(rows, dims), 16, out=matrix.view(np.uint32), dtype=np.uint32)
        del raw
    elif variant == "numpy-naive":
        raw = np.fromfile(path, dtype="<u2", count=rows * dims, offset=8 + n)
        matrix = (raw.astype(np.uint32) << 16).view(np.float32).reshape(rows, dims)
        del raw
    else:
        emb = finalfusion.load_safetensors(path, tokenizer=tokens, normalize=variant == "load+normalize")
        matrix = emb.storage.matrix
    elapsed = time.perf_counter() - t0
    peak = peak_since_reset(before)
    assert matrix.shape == (rows, dims)
    return {"seconds": elapsed, "peak_ratio": peak / (rows * dims * 4)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=256_000)
    ap.add_argument("--dims", type=int, default=2048)
    ap.add_argument("--small", action="store_true", help="32,000 rows instead of 256,000")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--worker", nargs=2, metavar=("VARIANT", "PATH"), help=argparse.SUPPRESS)
    a = ap.parse_args()
    rows = 32_000 if a.small else a.rows
    if a.worker:
        print(json.dumps(worker(a.worker[0], a.worker[1], rows, a.dims)))
        return 0
    variants = ["numpy", "numpy-naive", "load", "load+normalize"]
    results: dict[str, list[dict[str, float]]] = {v: [] for v in variants}
    with tempfile.TemporaryDirectory(prefix="ff-bench-safetensors-") as tmp:
        path = os.path.join(tmp, "model.safetensors")
        write_bf16(path, rows, a.dims)
        args = ["--rows", str(rows), "--dims", str(a.dims)]
        for _ in range(a.reps):
            for v in variants:
                out = subprocess.run([sys.executable, os.path.abspath(__file__), *args, "--worker", v, path], capture_output=True, text=True, check=True)
                results[v].append(json.loads(out.stdout))
    base = statistics.median(r["seconds"] for r in results["numpy"])
    print(f"BF16 table {rows} x {a.dims} ({rows * a.dims * 2 / 2**20:.0f} MiB file, {rows * a.dims * 4 / 2**20:.0f} MiB float32), {a.reps} runs each")
    print(f"{'variant':<16} {'median s':>9} {'min-max s':>13} {'vs numpy':>9} {'peak/result':>12}")
    for v in variants:
        secs = [r["seconds"] for r in results[v]]
        peaks = [r["peak_ratio"] for r in results[v]]
        med = statistics.median(secs)
        print(f"{v:<16} {med:9.3f} {min(secs):6.3f}-{max(secs):<6.3f} {med / base:8.2f}x {statistics.median(peaks):11.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
