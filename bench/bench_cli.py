#!/usr/bin/env python3
"""Command-line benchmark: ``finalfusion convert`` against the library call and gensim.

A ``rows x dims`` word2vec binary (default 400,000 x 300, random vectors) is
converted to finalfusion and back, in one run and interleaved (round robin,
so that a busy machine affects every side alike):

* **cli**: ``python -m finalfusion convert IN OUT`` (the console script's code), wall time of the process;
* **library**: a fresh process doing ``finalfusion.load(IN).write(OUT)`` /
  ``finalfusion.load(IN)`` + ``write_word2vec``; wall time of the process,
  and the time of the call alone measured inside it;
* **import**: a fresh process that only imports ``finalfusion.cli``;
* **gensim**: a fresh process doing ``KeyedVectors.load_word2vec_format(binary=True)`` +
  ``kv.save`` (its native format) and back ``KeyedVectors.load`` + ``save_word2vec_format(binary=True)``.

Target: the command's wall time is at most 1.05 x the library call plus the
import time. Data lives in a temporary directory. Prints medians and the
spread (min-max) of every side, and the ratios.

Usage::

    .venv/bin/python bench/bench_cli.py --quick        # 20,000 x 50, 2 rounds
    .venv/bin/python bench/bench_cli.py --rounds 5
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

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SRC = os.path.join(REPO, "src")


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = SRC + os.pathsep + env.get("PYTHONPATH", "")
    return env


def _run(cmd: list[str]) -> tuple[float, str]:
    """Wall time of a subprocess and its stdout; fails loudly."""
    start = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True, env=_env(), check=False)
    wall = time.perf_counter() - start
    if r.returncode != 0:
        raise SystemExit(f"benchmark step failed: {' '.join(cmd)}\n{r.stderr}")
    return wall, r.stdout


_LIB_TO_FIFU = """
import sys, time
t = time.perf_counter()
import finalfusion
t0 = time.perf_counter()
finalfusion.load(sys.argv[1]).write(sys.argv[2])
print(time.perf_counter() - t0)
"""
_LIB_TO_W2V = """
import sys, time
import finalfusion
from finalfusion.compat import write_word2vec
t0 = time.perf_counter()
write_word2vec(sys.argv[2], finalfusion.load(sys.argv[1]))
print(time.perf_counter() - t0)
"""
_GENSIM_TO_NATIVE = """
import sys, time
from gensim.models import KeyedVectors
t0 = time.perf_counter()
KeyedVectors.load_word2vec_format(sys.argv[1], binary=True).save(sys.argv[2])
print(time.perf_counter() - t0)
"""
_GENSIM_TO_W2V = """
import sys, time
from gensim.models import KeyedVectors
t0 = time.perf_counter()
KeyedVectors.load(sys.argv[1]).save_word2vec_format(sys.argv[2], binary=True)
print(time.perf_counter() - t0)
"""


def _make_input(path: str, rows: int, dims: int) -> None:
    code = (
        "import sys, numpy as np, finalfusion\n"
        "from finalfusion.compat import write_word2vec\n"
        "from finalfusion.compat._build import embeddings_from\n"
        f"m = np.random.default_rng(0).standard_normal(({rows}, {dims}), dtype=np.float32)\n"
        f"write_word2vec(sys.argv[1], embeddings_from([f'w{{i}}' for i in range({rows})], m, normalize=False))\n"
    )
    _run([sys.executable, "-c", code, path])


def _stats(values: list[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rows", type=int, default=400_000)
    parser.add_argument("--dims", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="20,000 x 50, 2 rounds")
    parser.add_argument("--gensim-python", default=sys.executable, help="interpreter with gensim (default: this one)")
    parser.add_argument("--out", help="write the results as JSON")
    args = parser.parse_args()
    if args.quick:
        args.rows, args.dims, args.rounds = 20_000, 50, 2
    has_gensim = subprocess.run([args.gensim_python, "-c", "import gensim"], capture_output=True, check=False).returncode == 0

    tmp = tempfile.mkdtemp(prefix="bench-cli-")
    try:
        w2v = os.path.join(tmp, "in.bin")
        _make_input(w2v, args.rows, args.dims)
        print(f"input: {args.rows:,} x {args.dims} word2vec binary, {os.path.getsize(w2v) / 1e6:.0f} MB; {args.rounds} rounds", flush=True)
        fifu, back, kv = os.path.join(tmp, "out.fifu"), os.path.join(tmp, "back.bin"), os.path.join(tmp, "gensim.kv")
        py = sys.executable
        sides: dict[str, list[float]] = {}

        def add(name: str, value: float) -> None:
            sides.setdefault(name, []).append(value)

        for _ in range(args.rounds):
            add("import finalfusion.cli", _run([py, "-c", "import finalfusion.cli"])[0])
            add("cli w2v->fifu", _run([py, "-m", "finalfusion", "convert", w2v, fifu])[0])
            wall, out = _run([py, "-c", _LIB_TO_FIFU, w2v, fifu])
            add("library w2v->fifu (process)", wall)
            add("library w2v->fifu (call)", float(out.split()[-1]))
            add("cli fifu->w2v", _run([py, "-m", "finalfusion", "convert", fifu, back])[0])
            wall, out = _run([py, "-c", _LIB_TO_W2V, fifu, back])
            add("library fifu->w2v (process)", wall)
            add("library fifu->w2v (call)", float(out.split()[-1]))
            if has_gensim:
                wall, out = _run([args.gensim_python, "-c", _GENSIM_TO_NATIVE, w2v, kv])
                add("gensim w2v->kv (process)", wall)
                wall, out = _run([args.gensim_python, "-c", _GENSIM_TO_W2V, kv, back])
                add("gensim kv->w2v (process)", wall)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    results = {name: _stats(values) for name, values in sides.items()}
    width = max(map(len, results))
    print(f"{'side':{width}s}  median s   (min - max)")
    for name, s in results.items():
        print(f"{name:{width}s}  {s['median']:8.3f}   ({s['min']:.3f} - {s['max']:.3f})")
    imp = results["import finalfusion.cli"]["median"]
    for direction in ("w2v->fifu", "fifu->w2v"):
        cli, call = results[f"cli {direction}"]["median"], results[f"library {direction} (call)"]["median"]
        proc = results[f"library {direction} (process)"]["median"]
        budget = 1.05 * call + imp
        print(
            f"{direction}: cli {cli:.3f} s vs library process {proc:.3f} s ({cli / proc:.3f}x); "
            f"budget 1.05 x call + import = {budget:.3f} s -> {'OK' if cli <= budget else 'OVER'}"
        )
    if has_gensim:
        gensim = results["gensim w2v->kv (process)"]["median"] + results["gensim kv->w2v (process)"]["median"]
        cli_both = results["cli w2v->fifu"]["median"] + results["cli fifu->w2v"]["median"]
        print(f"gensim load + save, both directions: {gensim:.3f} s = {gensim / cli_both:.2f}x the command's {cli_both:.3f} s")
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            json.dump({"rows": args.rows, "dims": args.dims, "rounds": args.rounds, "results": results}, f, indent=2)


if __name__ == "__main__":
    main()
