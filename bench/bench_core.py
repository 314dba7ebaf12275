#!/usr/bin/env python3
"""Core benchmark: finalfusion-py (this repository) vs finalfusion-python 0.7.1.

Both libraries are imported as ``finalfusion``, so every measurement runs in a
subprocess of the right interpreter:

* ours: ``sys.executable`` (run this script with the repository's venv), or
  ``--our-python``;
* 0.7.1: ``--peer-python`` (default: ``$FINALFUSION_PEER_PYTHON`` or
  ``.venv-peers/bin/python`` in the repository root).

Test files are generated with OUR library into a ``tempfile.mkdtemp()``
directory (never inside the repository) which is removed at the end.

Usage::

    .venv/bin/python bench/bench_core.py --quick          # smoke test
    .venv/bin/python bench/bench_core.py --out results.json

See bench/README.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.abspath(__file__)


def word(i: int) -> str:
    """The i-th vocabulary word: mostly ASCII, every 10th one non-ASCII."""
    if i % 10 == 3:
        return f"wört{i}ü"
    if i % 10 == 7:
        return f"слово{i}語"
    return f"w{i}"


def unknown_word(i: int, tag: str) -> str:
    """Distinct words that are never in the vocabulary."""
    if i % 10 == 5:
        return f"unk{i}{tag}xyzé"
    return f"unk{i}{tag}xyz"


def random_words(n: int, tag: str) -> list[str]:
    """``n`` distinct words of 8-13 random lowercase letters (seeded by ``tag``), never in the vocabulary.

    Unlike :func:`unknown_word`'s words, which share the n-grams of ``unk`` and
    ``xyz`` (their storage rows stay in the CPU cache), nearly every n-gram of
    these is new: the cold case of a word never seen before.
    """
    import random

    rng = random.Random(tag)
    letters = "abcdefghijklmnopqrstuvwxyz"
    out: dict[str, None] = {}
    while len(out) < n:
        out["".join(rng.choices(letters, k=rng.randint(8, 13)))] = None
    return list(out)


# ----------------------------------------------------------------------------------
# workers (run inside a subprocess; print one JSON object on the last stdout line)
# ----------------------------------------------------------------------------------
def _maxrss_mb() -> float:
    import resource

    # Linux: kilobytes.
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def worker_gen(a: argparse.Namespace) -> dict:
    import numpy as np

    import finalfusion
    from finalfusion.norms import Norms
    from finalfusion.storage import NdArray
    from finalfusion.subword import FinalfusionHashIndexer
    from finalfusion.vocab import FinalfusionBucketVocab, SimpleVocab

    rng = np.random.default_rng(42)
    out = {}
    t = time.perf_counter()
    m = rng.standard_normal((a.n_simple, a.dims), dtype=np.float32)
    norms = np.linalg.norm(m, axis=1).astype(np.float32)
    m /= norms[:, None]
    emb = finalfusion.Embeddings(NdArray(m), SimpleVocab([word(i) for i in range(a.n_simple)]), Norms(norms))
    emb.write(os.path.join(a.dir, "simple.fifu"))
    out["simple_matrix_mb"] = m.nbytes / 2**20
    del emb, m, norms
    out["gen_simple_s"] = time.perf_counter() - t

    t = time.perf_counter()
    rows = a.n_bucket + 2**a.bucket_exp
    m = rng.standard_normal((rows, a.dims), dtype=np.float32)
    m *= np.float32(0.05)
    vocab = FinalfusionBucketVocab([word(i) for i in range(a.n_bucket)], FinalfusionHashIndexer(a.bucket_exp, 3, 6))
    emb = finalfusion.Embeddings(NdArray(m), vocab)
    emb.write(os.path.join(a.dir, "bucket.fifu"))
    out["bucket_matrix_mb"] = m.nbytes / 2**20
    out["gen_bucket_s"] = time.perf_counter() - t
    return out


def worker_load(a: argparse.Namespace) -> dict:
    import numpy  # noqa: F401

    import finalfusion

    base = _maxrss_mb()
    t = time.perf_counter()
    emb = finalfusion.load_finalfusion(a.path, mmap=a.mmap)
    dt = time.perf_counter() - t
    peak = _maxrss_mb()
    assert emb.embedding(word(1)) is not None
    return {"time_s": dt, "peak_mb": peak - base, "base_mb": base}


def worker_write(a: argparse.Namespace) -> dict:
    import finalfusion

    emb = finalfusion.load_finalfusion(a.path)
    times = []
    target = os.path.join(a.dir, f"write-{os.getpid()}.fifu")
    # One discarded warm-up write, as the load figures have a discarded warm-up load: on
    # this VM the first write after a pause can stall for 0.5-1.5 s while the hypervisor
    # hands back memory it reclaimed from the guest's free pages (see bench/README.md).
    emb.write(target)
    for _ in range(a.reps):
        if os.path.exists(target):
            os.remove(target)
        t = time.perf_counter()
        emb.write(target)
        times.append(time.perf_counter() - t)
    # The floor: the same number of bytes written raw in one call (what the kernel needs anyway).
    size = os.path.getsize(target)
    os.remove(target)
    import numpy as np

    data = np.ones(size, dtype=np.uint8)
    with open(target, "wb") as f:  # warm-up, discarded
        f.write(memoryview(data))
    os.remove(target)
    floor = []
    for _ in range(a.reps):
        t = time.perf_counter()
        with open(target, "wb") as f:
            f.write(memoryview(data))
        floor.append(time.perf_counter() - t)
        os.remove(target)
    return {"times_s": times, "floor_s": floor}


def _is_ours(finalfusion) -> bool:
    return hasattr(finalfusion.Embeddings, "embedding_batch")


def worker_known(a: argparse.Namespace) -> dict:
    import numpy as np

    import finalfusion

    emb = finalfusion.load_finalfusion(a.path)
    n_vocab = a.n_words
    rng = np.random.default_rng(7)
    f = emb.embedding
    res: dict = {}
    # single lookups: loop over 10,000 distinct words, total / count; one figure per rep.
    per_call = []
    for _r in range(a.reps):
        words = [word(int(i)) for i in rng.choice(n_vocab, size=a.n_single, replace=False)]
        t = time.perf_counter()
        for w in words:
            f(w)
        per_call.append((time.perf_counter() - t) / len(words))
    res["single_s"] = per_call
    # individually timed calls, median (includes ~timer overhead on both sides)
    words = [word(int(i)) for i in rng.choice(n_vocab, size=a.n_single, replace=False)]
    res["single_indiv_median_s"] = _median_call_s(f, words)
    # batched
    batches = [[word(int(i)) for i in rng.integers(0, n_vocab, size=a.n_batch)] for _r in range(a.reps)]
    res["batch_s"], res["batch_variant"] = _time_batches(emb, batches, _is_ours(finalfusion), np)
    return res


def _median_call_s(f, words) -> float:
    """Median of individually timed calls ``f(w)`` (includes ~timer overhead on both sides)."""
    return statistics.median(_call_times_ns(f, words)) / 1e9


def _time_batches(emb, batches, ours: bool, np) -> tuple[list[float], str]:
    """Time one batch lookup per word list: ours with embedding_batch, 0.7.1 with its best loop."""
    times = []
    for words in batches:
        if ours:
            t = time.perf_counter()
            _m, found = emb.embedding_batch(words)
            times.append(time.perf_counter() - t)
            if not found.all():
                raise RuntimeError("embedding_batch did not find every word")
        else:
            times.append(_peer_loop(emb, words, np))
    return times, ("embedding_batch(words)" if ours else "best of loop [f(w) for w] / loop f(w, out=out[i])")


def _peer_loop(emb, words, np) -> float:
    """0.7.1 has no batch call: best of two Python loops."""
    f = emb.embedding
    t = time.perf_counter()
    lst = [f(w) for w in words]
    t1 = time.perf_counter() - t
    del lst
    out = np.zeros((len(words), emb.storage.shape[1]), dtype=np.float32)
    t = time.perf_counter()
    for i, w in enumerate(words):
        f(w, out=out[i])
    t2 = time.perf_counter() - t
    return min(t1, t2)


def _call_times_ns(f, words) -> list[int]:
    """Each call ``f(w)`` timed on its own (includes ~timer overhead on both sides)."""
    pc = time.perf_counter_ns
    out = []
    for w in words:
        t0 = pc()
        f(w)
        out.append(pc() - t0)
    return out


def worker_unknown(a: argparse.Namespace) -> dict:
    import numpy as np

    import finalfusion

    emb = finalfusion.load_finalfusion(a.path)
    f = emb.embedding
    res: dict = {}
    # The first unknown word of the process (ours builds the hashing layout of its length here).
    t = time.perf_counter()
    f(unknown_word(0, "first"))
    res["first_s"] = time.perf_counter() - t
    # Never-seen words, each queried once: per repetition the median of individually timed calls,
    # for words sharing n-grams (unknown_word) and for words of random letters (cold n-grams and rows).
    for kind in ("fresh", "cold"):
        medians = []
        for r in range(a.reps):
            words = [unknown_word(i, f"{kind}{r}") for i in range(a.n_single)] if kind == "fresh" else random_words(a.n_single, f"{kind}{r}")
            medians.append(_median_call_s(f, words))
        res[f"{kind}_median_s"] = medians
    per_call = []
    for r in range(a.reps):
        words = [unknown_word(i, f"s{r}") for i in range(a.n_single)]  # each queried once
        t = time.perf_counter()
        for w in words:
            v = f(w)
        per_call.append((time.perf_counter() - t) / len(words))
        assert v is not None
    res["single_s"] = per_call
    words = [unknown_word(i, "ind") for i in range(a.n_single)]
    res["single_indiv_median_s"] = _median_call_s(f, words)
    # same word over and over (caches may help here)
    rep = []
    w = unknown_word(1, "rep")
    for _r in range(a.reps):
        t = time.perf_counter()
        for _ in range(a.n_single):
            f(w)
        rep.append((time.perf_counter() - t) / a.n_single)
    res["repeated_s"] = rep
    batches = [[unknown_word(i, f"b{r}") for i in range(a.n_batch)] for r in range(a.reps)]  # distinct, fresh per rep
    res["batch_s"], res["batch_variant"] = _time_batches(emb, batches, _is_ours(finalfusion), np)
    return res


WORKERS = {"gen": worker_gen, "load": worker_load, "write": worker_write, "known": worker_known, "unknown": worker_unknown}


# ----------------------------------------------------------------------------------
# driver
# ----------------------------------------------------------------------------------
def run_worker(python: str, task: str, extra: list[str], timeout: float = 3600, script: str = SCRIPT) -> dict:
    cmd = [python, script, "--worker", task, *extra]
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, cwd=tempfile.gettempdir())
    if p.returncode != 0:
        raise RuntimeError(f"worker {task} with {python} failed ({p.returncode}):\n{p.stderr[-4000:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def lib_version(python: str) -> str:
    code = (
        "import finalfusion, numpy, sys; import importlib.metadata as md; "
        "print(getattr(finalfusion, '__version__', None) or md.version('finalfusion'), numpy.__version__, sys.version.split()[0], finalfusion.__file__)"
    )
    p = subprocess.run([python, "-c", code], capture_output=True, text=True, cwd=tempfile.gettempdir())
    if p.returncode != 0:
        raise RuntimeError(f"{python} cannot import finalfusion:\n{p.stderr}")
    return p.stdout.strip()


def remove_tmp(tmp: str, keep: bool) -> None:
    """Delete the benchmark's temporary directory, unless ``--keep`` asked to keep it."""
    if keep:
        print(f"kept {tmp}")
    else:
        shutil.rmtree(tmp, ignore_errors=True)


def save_results(results: dict, out: str | None) -> None:
    """Write the results as JSON when ``--out`` was given."""
    if out:
        with open(out, "w", encoding="utf-8") as fh:
            json.dump(results, fh, indent=2)
        print(f"results written to {out}")


def med(xs: list[float]) -> float:
    return statistics.median(xs)


def fmt(v: float | None, unit: str) -> str:
    if v is None:
        return "-"
    if unit == "s":
        if v >= 1:
            return f"{v:.3f} s"
        if v >= 1e-3:
            return f"{v * 1e3:.2f} ms"
        return f"{v * 1e6:.2f} µs"
    if unit == "MB":
        return f"{v:.1f} MB"
    return f"{v:.3g}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="small sizes for smoke testing")
    ap.add_argument("--out", help="write results as JSON to this file")
    ap.add_argument("--our-python", default=sys.executable)
    default_peer = os.environ.get("FINALFUSION_PEER_PYTHON") or os.path.join(REPO, ".venv-peers", "bin", "python")
    ap.add_argument("--peer-python", default=default_peer)
    ap.add_argument("--load-reps", type=int, default=None, help="fresh subprocesses per load measurement")
    ap.add_argument("--reps", type=int, default=None, help="repetitions inside one subprocess")
    ap.add_argument("--unknown-rounds", type=int, default=None, help="rounds of the unknown-word workers, contenders alternating")
    ap.add_argument("--dims", type=int, default=300)
    ap.add_argument("--keep", action="store_true", help="keep the temporary directory")
    # worker-only arguments
    ap.add_argument("--worker", choices=sorted(WORKERS), help=argparse.SUPPRESS)
    ap.add_argument("--path", help=argparse.SUPPRESS)
    ap.add_argument("--dir", help=argparse.SUPPRESS)
    ap.add_argument("--mmap", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--n-simple", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--n-bucket", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--bucket-exp", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--n-words", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--n-single", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--n-batch", type=int, help=argparse.SUPPRESS)
    a = ap.parse_args()

    if a.worker:
        print(json.dumps(WORKERS[a.worker](a)))
        return 0

    if a.quick:
        n_simple, n_bucket, bucket_exp, n_single, n_batch = 20_000, 10_000, 16, 2_000, 10_000
        load_reps, reps = a.load_reps or 3, a.reps or 3
        unknown_rounds = a.unknown_rounds or 2
    else:
        n_simple, n_bucket, bucket_exp, n_single, n_batch = 400_000, 200_000, 20, 10_000, 100_000
        load_reps, reps = a.load_reps or 5, a.reps or 5
        unknown_rounds = a.unknown_rounds or 4
    dims = a.dims

    libs = {"ours": a.our_python, "0.7.1": a.peer_python}
    info = {name: lib_version(py) for name, py in libs.items()}
    for name, v in info.items():
        print(f"{name:6s}: {libs[name]} -> finalfusion/numpy/python/file: {v}", flush=True)
    if not info["0.7.1"].startswith("0.7.1"):
        print("WARNING: peer interpreter does not report finalfusion 0.7.1", file=sys.stderr)

    tmp = tempfile.mkdtemp(prefix="ffbench-")
    assert not os.path.abspath(tmp).startswith(REPO + os.sep), "temporary directory must not be inside the repo"
    du = shutil.disk_usage(tmp)
    need = 4 * dims * (n_simple * 2 + n_bucket + 2**bucket_exp) * 1.2
    print(f"tmp dir {tmp}: {du.free / 2**30:.1f} GiB free, need ~{need / 2**30:.1f} GiB", flush=True)
    if du.free < need:
        print("ERROR: not enough disk space in the temporary directory (use --dims 100)", file=sys.stderr)
        return 2
    results: dict = {
        "config": {
            "quick": a.quick,
            "n_simple": n_simple,
            "n_bucket": n_bucket,
            "bucket_exp": bucket_exp,
            "dims": dims,
            "n_single": n_single,
            "n_batch": n_batch,
            "load_reps": load_reps,
            "reps": reps,
            "unknown_rounds": unknown_rounds,
        },
        "libs": {k: {"python": libs[k], "version": info[k]} for k in libs},
        "platform": platform.platform(),
        "git": subprocess.run(["git", "-C", REPO, "describe", "--always", "--dirty"], capture_output=True, text=True).stdout.strip(),
    }
    try:
        t = time.perf_counter()
        g = run_worker(
            a.our_python, "gen", ["--dir", tmp, "--n-simple", str(n_simple), "--n-bucket", str(n_bucket), "--bucket-exp", str(bucket_exp), "--dims", str(dims)]
        )
        results["gen"] = g
        simple, bucket = os.path.join(tmp, "simple.fifu"), os.path.join(tmp, "bucket.fifu")
        print(
            f"generated in {time.perf_counter() - t:.1f} s: simple {os.path.getsize(simple) / 2**20:.0f} MB, bucket {os.path.getsize(bucket) / 2**20:.0f} MB",
            flush=True,
        )

        raw: dict = {k: {} for k in libs}
        for name, py in libs.items():
            for mode in ("eager", "mmap"):
                extra = ["--path", simple] + (["--mmap"] if mode == "mmap" else [])
                run_worker(py, "load", extra)  # warm-up (page cache), discarded
                runs = [run_worker(py, "load", extra) for _ in range(load_reps)]
                raw[name][f"load_{mode}"] = runs
                print(f"{name}: load {mode} {[round(r['time_s'], 4) for r in runs]}", flush=True)
        for name, py in libs.items():
            raw[name]["write"] = run_worker(py, "write", ["--path", simple, "--dir", tmp, "--reps", str(reps)])
            print(f"{name}: write {raw[name]['write']}", flush=True)
            raw[name]["known"] = run_worker(
                py, "known", ["--path", simple, "--n-words", str(n_simple), "--n-single", str(n_single), "--n-batch", str(n_batch), "--reps", str(reps)]
            )
            print(f"{name}: known {raw[name]['known']}", flush=True)
        # Unknown words: the contenders alternate, a fresh process each, over several rounds, so that both
        # meet the same machine load; the lists of every round are pooled.
        for r in range(unknown_rounds):
            for name in list(libs) if r % 2 == 0 else list(libs)[::-1]:
                got = run_worker(libs[name], "unknown", ["--path", bucket, "--n-single", str(n_single), "--n-batch", str(n_batch), "--reps", str(reps)])
                pooled = raw[name].setdefault("unknown", {})
                for key, val in got.items():
                    if isinstance(val, list):
                        pooled.setdefault(key, []).extend(val)
                    elif isinstance(val, float):
                        pooled.setdefault(key, []).append(val)
                    else:
                        pooled[key] = val
                print(f"{name}: unknown, round {r + 1} of {unknown_rounds}: {got}", flush=True)
        results["raw"] = raw
    finally:
        remove_tmp(tmp, a.keep)

    mat_mb = results["gen"]["simple_matrix_mb"]

    def m(name: str, key: str) -> dict:
        r = raw[name]
        return {
            "mmap load": med([x["time_s"] for x in r["load_mmap"]]),
            "eager load": med([x["time_s"] for x in r["load_eager"]]),
            "eager peak RSS": med([x["peak_mb"] for x in r["load_eager"]]),
            "mmap peak RSS": med([x["peak_mb"] for x in r["load_mmap"]]),
            "write": med(r["write"]["times_s"]),
            "write floor (raw bytes, same size)": med(r["write"]["floor_s"]),
            "1 known word": med(r["known"]["single_s"]),
            "1 known word (indiv. timed)": r["known"]["single_indiv_median_s"],
            f"{n_batch:,} known words batched": med(r["known"]["batch_s"]),
            "1 unknown word, never seen": med(r["unknown"]["fresh_median_s"]),
            "1 unknown word, never seen, cold": med(r["unknown"]["cold_median_s"]),
            "1 unknown word (loop mean)": med(r["unknown"]["single_s"]),
            "first unknown word of a process": med(r["unknown"]["first_s"]),
            "1 unknown word, repeated": med(r["unknown"]["repeated_s"]),
            f"{n_batch:,} unknown words batched": med(r["unknown"]["batch_s"]),
        }[key]

    # metric, unit, target ratio (None = info only)
    rows = [
        ("mmap load", "s", 0.8),
        ("eager load", "s", 0.8),
        ("eager peak RSS", "MB", None),
        ("mmap peak RSS", "MB", None),
        ("write", "s", 0.35),
        ("write floor (raw bytes, same size)", "s", None),
        ("1 known word", "s", 0.6),
        ("1 known word (indiv. timed)", "s", None),
        (f"{n_batch:,} known words batched", "s", 0.5),
        ("1 unknown word, never seen", "s", 1.0),
        ("1 unknown word, never seen, cold", "s", 1.0),
        ("1 unknown word (loop mean)", "s", 1.0),
        ("first unknown word of a process", "s", None),
        ("1 unknown word, repeated", "s", None),
        (f"{n_batch:,} unknown words batched", "s", 0.33),
    ]
    table = []
    for metric, unit, target in rows:
        o, p = m("ours", metric), m("0.7.1", metric)
        ratio = o / p if p else float("nan")
        if metric == "eager peak RSS":
            tgt = f"ours <= 1.1x matrix ({mat_mb:.0f} MB); ours {o / mat_mb:.2f}x, 0.7.1 {p / mat_mb:.2f}x"
            ok = "PASS" if o <= 1.1 * mat_mb else "FAIL"
        elif target is None:
            tgt, ok = "(info)", ""
        else:
            tgt, ok = f"<= {target}", "PASS" if ratio <= target else "FAIL"
        table.append({"metric": metric, "ours": o, "peer": p, "ratio": ratio, "target": tgt, "result": ok, "unit": unit})
    results["table"] = table

    print()
    print(f"simple: {n_simple:,} x {dims} (matrix {mat_mb:.1f} MB) with norms; bucket: {n_bucket:,} words + 2^{bucket_exp} buckets x {dims}")
    hdr = f"| {'metric':34s} | {'ours':>12s} | {'0.7.1':>12s} | {'ours/0.7.1':>10s} | {'target':s} | result |"
    print(hdr)
    print("|" + "|".join("-" * (len(c)) for c in hdr.split("|")[1:-1]) + "|")
    for r in table:
        print(
            f"| {r['metric']:34s} | {fmt(r['ours'], r['unit']):>12s} | {fmt(r['peer'], r['unit']):>12s} | {r['ratio']:10.3f} | {r['target']} | {r['result']} |"
        )
    print()
    print(f"unknown words, median of individually timed calls per repetition ({reps} repetitions x {unknown_rounds} rounds of {n_single:,} words):")
    for kind, what in (("fresh", "never seen (unk{i}{tag}xyz)"), ("cold", "never seen, cold (random letters)")):
        line = "; ".join(
            f"{name} {fmt(med(raw[name]['unknown'][f'{kind}_median_s']), 's')} ({spread(raw[name]['unknown'][f'{kind}_median_s'])})" for name in libs
        )
        print(f"  {what:34s} {line}")
    save_results(results, a.out)
    return 0


def spread(xs: list[float]) -> str:
    """Smallest - largest of ``xs`` in microseconds."""
    return f"{min(xs) * 1e6:.2f}-{max(xs) * 1e6:.2f} µs"


if __name__ == "__main__":
    sys.exit(main())
