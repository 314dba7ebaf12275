"""A/B of two source trees on the conversion paths: word2vec, text-dims, fastText, GGUF and safetensors loads, a finalfusion load and write.

For refactors that must not change speed (issue 12's check of ``bench_convert``
paths without the 0.7.1/gensim peer environment): one ``n x dims`` file per
format is generated once (with tree B), then every case runs in a fresh
process of each tree (its ``src`` first on ``PYTHONPATH``, the interpreter
shared), the order of the two trees alternating between rounds. Prints the
median (min-max) per tree and tree B / tree A.

Usage::

    git archive <old commit> src | tar -x -C /tmp/base
    .venv/bin/python bench/ab_convert.py --a /tmp/base --b . --rounds 5

The safetensors case needs the interop extra (safetensors); it is left out without it.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile

GENERATE = """
import numpy as np, finalfusion
from finalfusion.compat import write_text_dims, write_word2vec
from finalfusion.storage import NdArray
from finalfusion.vocab import SimpleVocab
rng = np.random.default_rng(0)
n, d = {n}, {dims}
emb = finalfusion.Embeddings(NdArray(rng.standard_normal((n, d)).astype(np.float32)), SimpleVocab([f"w{{i}}" for i in range(n)]))
write_word2vec("{tmp}/v.bin", emb); write_text_dims("{tmp}/v.vec", emb); emb.write("{tmp}/v.fifu")
from finalfusion.compat import write_fasttext, write_gguf
write_gguf("{tmp}/v.gguf", emb)
write_fasttext("{tmp}/v.ft.bin", emb)  # a fastText model without subwords: its dictionary and its matrix
try:
    import json
    from safetensors.numpy import save_file
except ImportError:  # the interop extra: without it the safetensors case is left out
    pass
else:
    save_file({{"embed_tokens.weight": np.asarray(emb.storage)}}, "{tmp}/v.safetensors")
    with open("{tmp}/tokens.json", "w") as f:
        json.dump([f"w{{i}}" for i in range(n)], f)
"""


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--a", required=True, help="tree A (a folder with src/)")
    p.add_argument("--b", required=True, help="tree B")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--n", type=int, default=100_000)
    p.add_argument("--dims", type=int, default=300)
    a = p.parse_args()
    trees = {"A": os.path.join(a.a, "src"), "B": os.path.join(a.b, "src")}
    with tempfile.TemporaryDirectory() as tmp:
        code = GENERATE.format(n=a.n, dims=a.dims, tmp=tmp)
        subprocess.run([sys.executable, "-c", code], check=True, env=dict(os.environ, PYTHONPATH=trees["B"]))
        cases = {
            "load_word2vec": f"finalfusion.load_word2vec('{tmp}/v.bin')",
            "load_text_dims": f"finalfusion.load_text_dims('{tmp}/v.vec')",
            "load_finalfusion": f"finalfusion.load_finalfusion('{tmp}/v.fifu')",
            "load_fasttext": f"finalfusion.load_fasttext('{tmp}/v.ft.bin')",
            "load_gguf": f"finalfusion.load_gguf('{tmp}/v.gguf')",
            "load_gguf_mmap": f"finalfusion.load_gguf('{tmp}/v.gguf', mmap=True, normalize=False)",
            "write_finalfusion": f"finalfusion.load_finalfusion('{tmp}/v.fifu', mmap=True).write('{tmp}/out.fifu')",
        }
        if os.path.exists(f"{tmp}/v.safetensors"):
            cases["load_safetensors"] = f"finalfusion.load_safetensors('{tmp}/v.safetensors', tokenizer=json.load(open('{tmp}/tokens.json')))"
        times: dict[tuple[str, str], list[float]] = {(c, t): [] for c in cases for t in trees}
        for r in range(a.rounds):
            for case, stmt in cases.items():
                for tree in sorted(trees, reverse=bool(r % 2)):
                    timed = f"import json, time, finalfusion; t0 = time.perf_counter(); {stmt}; print(time.perf_counter() - t0)"
                    env = dict(os.environ, PYTHONPATH=trees[tree])
                    out = subprocess.run([sys.executable, "-c", timed], check=True, capture_output=True, text=True, env=env).stdout
                    times[(case, tree)].append(float(out.strip().splitlines()[-1]))
    for case in cases:
        ta, tb = times[(case, "A")], times[(case, "B")]
        ma, mb = statistics.median(ta), statistics.median(tb)
        print(
            f"{case:18s} A {1000 * ma:8.1f} ms ({1000 * min(ta):.0f}-{1000 * max(ta):.0f})"
            f"  B {1000 * mb:8.1f} ms ({1000 * min(tb):.0f}-{1000 * max(tb):.0f})  B/A {mb / ma:.2f}"
        )


if __name__ == "__main__":
    main()
