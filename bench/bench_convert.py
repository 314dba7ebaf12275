#!/usr/bin/env python3
"""Conversion benchmark: loading word2vec binary, word2vec text and fastText .bin files.

Compares, side by side in one run, finalfusion-py (this repository), gensim
(``KeyedVectors.load_word2vec_format``) and finalfusion-python 0.7.1
(``finalfusion.load_word2vec`` / ``load_text_dims`` / ``load_fasttext``), and
measures the peak memory of a word2vec -> finalfusion conversion with our
library. Every measurement runs in a fresh subprocess of the right
interpreter (both finalfusion libraries are imported as ``finalfusion``):

* ours: ``sys.executable`` or ``--our-python``;
* gensim and 0.7.1: ``--peer-python`` (default ``$FINALFUSION_PEER_PYTHON``,
  else ``/work/peers-venv/bin/python`` or ``.venv-peers/bin/python``).

Test files are generated into a temporary directory (never the repository):
a ``n x dims`` word2vec binary written by our writer, its text form with a
dims line in the word2vec C tool's ``%f`` style (6 decimals), and a fastText
model written by our ``write_fasttext`` (if available).

Usage::

    .venv/bin/python bench/bench_convert.py --quick          # smoke test
    .venv/bin/python bench/bench_convert.py --out results.json
    .venv/bin/python bench/bench_convert.py --ties-only [--ties-against OTHER/src]

The ties section (also part of every run) times ``load_text`` on 1 MB
GloVe files of float32 rounding ties (one tie repeated, distinct midpoints
written with 9-60 digits, distinct short integer ties) next to 1 MB of
ordinary decimals, with this repository's ``src`` first on ``sys.path``
(and, with ``--ties-against``, another checkout's ``src`` for a before/after).

Targets (medians): word2vec binary load <= 0.6x gensim; text with dims
<= 0.25x finalfusion-python 0.7.1; w2v -> fifu peak memory <= 1.2x the matrix.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_core import REPO, _maxrss_mb, fmt, lib_version, med, remove_tmp, run_worker, save_results, word

SCRIPT = os.path.abspath(__file__)


def _default_peer() -> str:
    for candidate in (os.environ.get("FINALFUSION_PEER_PYTHON"), "/work/peers-venv/bin/python", os.path.join(REPO, ".venv-peers", "bin", "python")):
        if candidate and os.path.exists(candidate):
            return candidate
    return "python3"


# ----------------------------------------------------------------------------------
# workers (run inside a subprocess; print one JSON object on the last stdout line)
# ----------------------------------------------------------------------------------
def _text_block(words: list[str], m, np) -> bytes:  # type: ignore[no-untyped-def]
    """Rows in the word2vec C tool's ``%f`` style, formatted with numpy (Python's % would take minutes)."""
    n, d = m.shape
    v = np.clip(np.rint(np.abs(m.astype(np.float64)) * 1e6), 0, 9_999_999).astype(np.int64)
    chars = np.empty((n, d, 10), dtype=np.uint8)
    chars[:, :, 0] = np.where(m < 0, ord("-"), 0)
    chars[:, :, 1] = 48 + v // 1_000_000
    chars[:, :, 2] = ord(".")
    for k in range(6):
        chars[:, :, 3 + k] = 48 + (v // 10 ** (5 - k)) % 10
    chars[:, :, 9] = ord(" ")
    chars[:, -1, 9] = ord("\n")
    flat = chars.reshape(n, -1)
    keep = flat != 0
    lengths = keep.sum(axis=1)
    body = flat[keep].tobytes()
    out, pos = [], 0
    for w, ln in zip(words, lengths.tolist(), strict=True):
        out.append(w.encode() + b" " + body[pos : pos + ln])
        pos += ln
    return b"".join(out)


def worker_gen(a: argparse.Namespace) -> dict:
    import numpy as np

    from finalfusion.compat import write_word2vec
    from finalfusion.compat._build import embeddings_from

    rng = np.random.default_rng(7)
    words = [word(i) for i in range(a.n_words)]
    m = (rng.standard_normal((a.n_words, a.dims), dtype=np.float32) * np.float32(0.5)).clip(-9.9, 9.9)
    out: dict = {"matrix_mb": m.nbytes / 2**20}
    t = time.perf_counter()
    write_word2vec(os.path.join(a.dir, "v.bin"), embeddings_from(words, m, normalize=False))
    out["gen_bin_s"] = time.perf_counter() - t
    t = time.perf_counter()
    with open(os.path.join(a.dir, "v.txt"), "wb") as f:
        f.write(f"{a.n_words} {a.dims}\n".encode())
        for start in range(0, a.n_words, 10_000):
            f.write(_text_block(words[start : start + 10_000], m[start : start + 10_000], np))
    out["gen_txt_s"] = time.perf_counter() - t
    try:
        from finalfusion.compat import write_fasttext
    except ImportError:
        out["fasttext"] = None
        return out
    from finalfusion import Embeddings
    from finalfusion.storage import NdArray
    from finalfusion.subword import FastTextIndexer
    from finalfusion.vocab import FastTextVocab

    t = time.perf_counter()
    n_ft = a.n_words // 4
    rows = (rng.standard_normal((n_ft + a.buckets, a.ft_dims), dtype=np.float32) * np.float32(0.1)).astype(np.float32)
    emb = Embeddings(NdArray(rows), FastTextVocab(words[:n_ft], FastTextIndexer(a.buckets, 3, 6)))
    write_fasttext(os.path.join(a.dir, "v.ft.bin"), emb)
    out["fasttext"] = {"words": n_ft, "buckets": a.buckets, "dims": a.ft_dims, "gen_s": time.perf_counter() - t}
    return out


def _loader(lib: str, fmt_: str):  # type: ignore[no-untyped-def]
    if lib == "gensim":
        from gensim.models import KeyedVectors

        return lambda p: KeyedVectors.load_word2vec_format(p, binary=fmt_ == "bin")
    import finalfusion

    name = {"bin": "load_word2vec", "txt": "load_text_dims", "ft": "load_fasttext"}[fmt_]
    return getattr(finalfusion, name)


def worker_load(a: argparse.Namespace) -> dict:
    load = _loader(a.lib, a.fmt)
    base = _maxrss_mb()
    times = []
    for _ in range(a.reps):
        t = time.perf_counter()
        emb = load(a.path)
        times.append(time.perf_counter() - t)
        del emb
    return {"times_s": times, "peak_mb": _maxrss_mb() - base}


def worker_convert(a: argparse.Namespace) -> dict:
    import numpy  # noqa: F401

    import finalfusion

    base = _maxrss_mb()
    t = time.perf_counter()
    emb = finalfusion.load_word2vec(a.path)
    emb.write(os.path.join(a.dir, "converted.fifu"))
    dt = time.perf_counter() - t
    matrix_mb = emb.storage.matrix.nbytes / 2**20
    return {"time_s": dt, "peak_mb": _maxrss_mb(), "base_mb": base, "matrix_mb": matrix_mb}


#: 1 MB GloVe files for the ties section: (name, what the file holds).
TIE_FILES = [
    ("ordinary", "shortest float32 decimals of N(0, 1) values"),
    ("ordinary-long", "distinct float32 values (not near a midpoint) written with 9-60 digits"),
    ("tie-16777217", "16777217 repeated (2**24 + 1: an integer tie)"),
    ("tie-1.0000000596046448", "1.0000000596046448 repeated (float64 reads it onto the midpoint)"),
    ("tie-subnormal", "7.0064923216240854e-46 repeated (just above the first subnormal midpoint)"),
    ("ties-distinct", "distinct float32 midpoints written with 9-60 digits, half negative"),
    ("ties-distinct-int", "distinct odd integers in [2**24, 2**25) and halves in [2**23, 2**24) (all exact ties)"),
]


def _tie_tokens(name: str, n: int, np) -> list[str]:  # type: ignore[no-untyped-def]
    from decimal import Decimal, getcontext
    from fractions import Fraction

    getcontext().prec = 400
    rng = np.random.default_rng(3)
    if name == "ordinary":
        return [str(x) for x in rng.standard_normal(n).astype(np.float32).tolist()]
    if name.startswith("tie-"):
        return [{"tie-16777217": "16777217", "tie-1.0000000596046448": "1.0000000596046448", "tie-subnormal": "7.0064923216240854e-46"}[name]] * n
    if name == "ties-distinct-int":
        odd = (rng.choice(1 << 23, n // 2, replace=False) * 2 + (1 << 24) + 1).tolist()
        half = (rng.choice(1 << 23, n - n // 2, replace=False) + (1 << 23)).tolist()
        return [str(k) for k in odd] + [f"{k}.5" for k in half]
    out = []
    for bits, digits in zip(rng.integers(0, 0x7F7FFFFF, n).tolist(), rng.integers(9, 61, n).tolist(), strict=True):
        lo, hi = np.array([bits, bits + 1], dtype=np.uint32).view(np.float32).tolist()
        x = (Fraction(lo) + Fraction(hi)) / 2 if name == "ties-distinct" else (3 * Fraction(lo) + Fraction(hi)) / 4
        d = Decimal(x.numerator) / Decimal(x.denominator)
        out.append(("-" if bits % 2 else "") + f"{d:.{digits - 1}e}")
    return out


def worker_gen_ties(a: argparse.Namespace) -> dict:
    import numpy as np

    sizes = {}
    for name, _ in TIE_FILES:
        tokens = _tie_tokens(name, 1 << 17, np)
        lines, size, dims = [], 0, 50
        for r in range(len(tokens) // dims):
            line = f"w{r} " + " ".join(tokens[r * dims : (r + 1) * dims]) + "\n"
            size += len(line)
            lines.append(line)
            if size >= 1 << 20:
                break
        path = os.path.join(a.dir, f"{name}.txt")
        with open(path, "w", encoding="ascii") as f:
            f.write("".join(lines))
        sizes[name] = os.path.getsize(path)
    return sizes


def worker_load_glove(a: argparse.Namespace) -> dict:
    sys.path.insert(0, a.src)
    import finalfusion
    from finalfusion.compat import load_text

    if not finalfusion.__file__.startswith(a.src):
        raise SystemExit(f"imported {finalfusion.__file__}, not from {a.src}")
    with open(a.path, "rb") as f:
        data = f.read()
    times = []
    for _ in range(a.reps):
        t = time.perf_counter()
        load_text(data, normalize=False)
        times.append(time.perf_counter() - t)
    return {"times_s": times}


def ties_section(python: str, tmp: str, reps: int, against: str | None) -> dict:
    """Time ``load_text`` on the tie files and on ordinary decimals; print per-MB medians and ratios."""
    sizes = worker(python, "gen_ties", ["--dir", tmp])
    srcs = {"this": os.path.join(REPO, "src")}
    if against:
        srcs["against"] = os.path.abspath(against)
    res: dict = {"sizes": sizes, "runs": {}}
    print(f"\nload_text on 1 MB GloVe files (50 dims), {reps} fresh processes x best of 3 loads (--ties-against: 1), seconds per MB: median [min-max]")
    print(f"{'file':24s} " + " ".join(f"{k + ' s/MB':>22s} {'/ordinary':>9s}" for k in srcs))
    per_mb: dict = {}
    for name, _ in TIE_FILES:
        path = os.path.join(tmp, f"{name}.txt")
        cells = []
        for label, src in srcs.items():
            loads = "3" if label == "this" else "1"  # the code before the fix takes seconds per load
            runs = [worker(python, "load_glove", ["--path", path, "--src", src, "--reps-in", loads]) for _ in range(reps)]
            xs = [min(r["times_s"]) / (sizes[name] / 2**20) for r in runs]  # best of the loads in each process
            per_mb[(label, name)] = med(xs)
            res["runs"][f"{label}/{name}"] = xs
            ratio = med(xs) / per_mb[(label, "ordinary")]
            cells.append(f"{med(xs):>8.3f} [{min(xs):.3f}-{max(xs):.3f}] {ratio:>9.1f}x")
        print(f"{name:24s} " + " ".join(cells), flush=True)
    return res


WORKERS = {"gen": worker_gen, "load": worker_load, "convert": worker_convert, "gen_ties": worker_gen_ties, "load_glove": worker_load_glove}


def worker(python: str, task: str, extra: list[str]) -> dict:
    return run_worker(python, task, extra, timeout=7200, script=SCRIPT)


# ----------------------------------------------------------------------------------
# driver
# ----------------------------------------------------------------------------------
def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="50,000 words instead of 400,000")
    ap.add_argument("--out", help="write results as JSON to this file")
    ap.add_argument("--our-python", default=sys.executable)
    ap.add_argument("--peer-python", default=_default_peer())
    ap.add_argument("--dims", type=int, default=300)
    ap.add_argument("--reps", type=int, default=None, help="fresh processes per fast measurement (ours, binary)")
    ap.add_argument("--slow-reps", type=int, default=None, help="fresh processes per slow measurement (peers' text loads)")
    ap.add_argument("--keep", action="store_true", help="keep the temporary directory")
    ap.add_argument("--ties-only", action="store_true", help="only the ties section (load_text on 1 MB files of float32 rounding ties)")
    ap.add_argument("--ties-against", help="another checkout's src directory to time the ties section with too (before/after)")
    ap.add_argument("--src", help=argparse.SUPPRESS)
    ap.add_argument("--worker", choices=sorted(WORKERS), help=argparse.SUPPRESS)
    ap.add_argument("--lib", help=argparse.SUPPRESS)
    ap.add_argument("--fmt", help=argparse.SUPPRESS)
    ap.add_argument("--path", help=argparse.SUPPRESS)
    ap.add_argument("--dir", help=argparse.SUPPRESS)
    ap.add_argument("--n-words", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--buckets", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--ft-dims", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--reps-in", dest="reps_in", type=int, default=1, help=argparse.SUPPRESS)
    a = ap.parse_args()

    if a.worker:
        if a.worker in ("load", "load_glove"):
            a.reps = a.reps_in
        print(json.dumps(WORKERS[a.worker](a)))
        return 0

    n_words, buckets, ft_dims = (50_000, 50_000, 100) if a.quick else (400_000, 500_000, 100)
    reps = a.reps or (3 if a.quick else 5)
    slow_reps = a.slow_reps or (1 if a.quick else 3)
    libs = {"ours": a.our_python, "gensim": a.peer_python, "0.7.1": a.peer_python}
    if a.ties_only:  # no peers: only this library (and --ties-against)
        load = os.getloadavg()
        print(f"load average at start: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} on {os.cpu_count()} CPUs", flush=True)
        tmp = tempfile.mkdtemp(prefix="ffties-")
        try:
            ties = ties_section(a.our_python, tmp, a.reps or 5, a.ties_against)
        finally:
            remove_tmp(tmp, a.keep)
        end = os.getloadavg()
        print(f"load average at end: {end[0]:.2f} {end[1]:.2f} {end[2]:.2f}")
        save_results({"config": {"reps": a.reps or 5, "load_start": load, "load_end": end}, "ties": ties}, a.out)
        return 0
    print(f"ours : {lib_version(a.our_python)}\npeers: {lib_version(a.peer_python)}", flush=True)
    load = os.getloadavg()
    print(f"load average at start: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} on {os.cpu_count()} CPUs", flush=True)

    tmp = tempfile.mkdtemp(prefix="ffconv-")
    if os.path.abspath(tmp).startswith(REPO + os.sep):
        raise SystemExit("the temporary directory must not be inside the repository")
    results: dict = {"config": {"n_words": n_words, "dims": a.dims, "reps": reps, "slow_reps": slow_reps, "load_start": load}}
    try:
        t = time.perf_counter()
        gen = worker(
            a.our_python,
            "gen",
            ["--dir", tmp, "--n-words", str(n_words), "--dims", str(a.dims), "--buckets", str(buckets), "--ft-dims", str(ft_dims)],
        )
        results["gen"] = gen
        sizes = {f: os.path.getsize(os.path.join(tmp, f)) / 2**20 for f in os.listdir(tmp)}
        print(f"generated in {time.perf_counter() - t:.0f} s: " + ", ".join(f"{k} {v:.0f} MB" for k, v in sorted(sizes.items())), flush=True)

        plan = [("bin", "ours", reps), ("bin", "gensim", reps), ("bin", "0.7.1", reps)]
        # gensim's text reader is the slowest by far and has no target: timed once.
        plan += [("txt", "ours", reps), ("txt", "0.7.1", slow_reps), ("txt", "gensim", 1)]
        if gen.get("fasttext"):
            plan += [("ft", "ours", reps), ("ft", "0.7.1", reps)]
        raw: dict = {}
        for fmt_, lib, n in plan:
            path = os.path.join(tmp, {"bin": "v.bin", "txt": "v.txt", "ft": "v.ft.bin"}[fmt_])
            runs = [worker(libs[lib], "load", ["--lib", lib, "--fmt", fmt_, "--path", path]) for _ in range(n)]
            raw[f"{fmt_}/{lib}"] = runs
            print(f"{fmt_:3s} {lib:6s}: {[round(r['times_s'][0], 3) for r in runs]} s, peak +{med([r['peak_mb'] for r in runs]):.0f} MB", flush=True)
        conv = [worker(a.our_python, "convert", ["--path", os.path.join(tmp, "v.bin"), "--dir", tmp]) for _ in range(max(1, reps // 2))]
        raw["convert"] = conv
        results["raw"] = raw
        results["ties"] = ties_section(a.our_python, tmp, reps, a.ties_against)
    finally:
        remove_tmp(tmp, a.keep)

    def t(key: str) -> float | None:
        return med([r["times_s"][0] for r in raw[key]]) if key in raw else None

    rows = [
        ("word2vec binary", "gensim", t("bin/ours"), t("bin/gensim"), 0.6),
        ("word2vec binary", "0.7.1", t("bin/ours"), t("bin/0.7.1"), None),
        ("text with dims", "0.7.1", t("txt/ours"), t("txt/0.7.1"), 0.25),
        ("text with dims", "gensim", t("txt/ours"), t("txt/gensim"), None),
        ("fastText .bin", "0.7.1", t("ft/ours"), t("ft/0.7.1"), None),
    ]
    print(f"\n{n_words:,} x {a.dims} (fastText: {n_words // 4:,} words + {buckets:,} buckets x {ft_dims}), medians")
    print(f"{'format':18s} {'peer':7s} {'ours':>10s} {'peer':>10s} {'ratio':>7s} {'target':>7s}")
    table = []
    for what, peer, o, p, target in rows:
        ratio = o / p if o is not None and p else None
        ok = "" if target is None or ratio is None else ("ok" if ratio <= target else "MISSED")
        print(f"{what:18s} {peer:7s} {fmt(o, 's'):>10s} {fmt(p, 's'):>10s} {fmt(ratio, ''):>7s} {'' if target is None else f'<= {target}':>7s} {ok}")
        table.append({"format": what, "peer": peer, "ours_s": o, "peer_s": p, "ratio": ratio, "target": target})
    peak = med([c["peak_mb"] for c in conv])
    base = med([c["base_mb"] for c in conv])
    matrix = conv[0]["matrix_mb"]
    print(
        f"\nword2vec -> finalfusion: {fmt(med([c['time_s'] for c in conv]), 's')}, peak RSS {peak:.0f} MB "
        f"= {peak / matrix:.2f}x the {matrix:.0f} MB matrix ({(peak - base) / matrix:.2f}x without the {base:.0f} MB interpreter baseline; target <= 1.2x)"
    )
    results["table"] = table
    results["convert"] = {"peak_mb": peak, "base_mb": base, "matrix_mb": matrix}
    load = os.getloadavg()
    results["config"]["load_end"] = load
    print(f"load average at end: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    save_results(results, a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
