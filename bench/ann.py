#!/usr/bin/env python3
"""Approximate-neighbour benchmark: top-10 over 1M and 2M x 300 clustered vectors.

Two parts, each measurement in a fresh subprocess (so peak memory is the
worker's own):

* ``--backends``: the raw libraries through their own APIs, the measurement
  behind ``finalfusion.ann``'s default backend: faiss ``IndexHNSWFlat``,
  faiss ``IndexIVFPQ`` (candidates re-scored exactly against the matrix),
  hnswlib, usearch (f32, f16, i8) and voyager, beside the exact numpy scan.
* ``--first-query``: the first ``word_similarity(w, 10, index=ix)`` right
  after ``build_index`` (in-memory rows) and after ``load_index``
  (memory-mapped embeddings), each in ``--first-processes`` fresh processes
  (median and range), against the queries that follow; then one query at a
  time beside raw faiss on the very ``IndexIVFFlat`` finalfusion's default
  backend built, interleaved query by query (the contender that goes first
  on a query rotates), ``--reps`` rounds; two floors in the same rounds:
  raw faiss with ten result objects made from its answer, and a word query
  that returns faiss's own scores (lookup, unit vector, search, results)
  instead of re-scoring the candidates as the exact scan does.
* ``--finalfusion`` (the default when ``finalfusion.ann`` is importable): the
  exact scan through ``Embeddings.embedding_similarity`` /
  ``embedding_similarity_batch`` against ``finalfusion.ann.build_index`` and the
  same query methods with ``index=``.

For every contender: build time (2 threads), peak memory beyond the matrix
(``VmHWM`` reset after the matrix is loaded, see ``_peak.py``), recall@10
against the exact answer, single-query latency (1 thread; median and the
10th/90th percentiles over 1,000 single queries) and the time of one batch of
1,000 queries (2 threads), at two to four search-time settings (``ef`` /
``nprobe``).

The data: ``--clusters`` Gaussian clusters of log-normal sizes; every row is
its cluster's centre plus a low-rank (64-dimensional) and an isotropic
300-dimensional deviation, normalized to unit length. The exact top-10
similarities then look like a trained model's (about 0.75 for the 1st, 0.65
for the 10th neighbour; see the ``data`` line of the output). Queries are
1,000 rows of the data; the query row itself is excluded from its answer.
The data is generated into a temporary directory and removed at the end.

Usage::

    .venv/bin/python bench/ann.py --quick                 # smoke test (50,000 rows, a minute)
    .venv/bin/python bench/ann.py --backends --sizes 1000000,2000000
    .venv/bin/python bench/ann.py --finalfusion --sizes 1000000,2000000
    .venv/bin/python bench/ann.py                         # both parts, 1M and 2M
    .venv/bin/python bench/ann.py --first-query --sizes 300000 --dims 100 --reps 3 --first-processes 3   # first query; one query beside raw faiss
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import subprocess
import sys
import tempfile
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_core import REPO, fmt, med, remove_tmp, save_results, word

SCRIPT = os.path.abspath(__file__)
K = 10
MB = 1 << 20


# ----------------------------------------------------------------------------------
# data
# ----------------------------------------------------------------------------------
def worker_gen(a: argparse.Namespace) -> dict:
    """Clustered unit rows into ``matrix.npy``, query row ids and the exact top-10 into ``truth.npz``."""
    import numpy as np

    rng = np.random.default_rng(a.seed)
    n, d, c = a.n, a.dims, a.clusters
    centres = rng.standard_normal((c, d), dtype=np.float32)
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    basis = rng.standard_normal((64, d), dtype=np.float32) / np.sqrt(d).astype(np.float32)
    sizes = rng.lognormal(0.0, 1.0, c)
    assign = rng.choice(c, size=n, p=sizes / sizes.sum()).astype(np.int32)
    path = os.path.join(a.dir, "matrix.npy")
    m = np.lib.format.open_memmap(path, mode="w+", dtype=np.float32, shape=(n, d))
    t = time.perf_counter()
    for lo in range(0, n, 100_000):
        hi = min(n, lo + 100_000)
        block = centres[assign[lo:hi]].copy()
        block += a.spread * (rng.standard_normal((hi - lo, 64), dtype=np.float32) @ basis) / np.float32(8.0)  # unit-norm on average
        block += a.noise * rng.standard_normal((hi - lo, d), dtype=np.float32) / np.float32(np.sqrt(d))
        block /= np.linalg.norm(block, axis=1, keepdims=True)
        m[lo:hi] = block
    m.flush()
    gen_s = time.perf_counter() - t
    queries = np.sort(rng.choice(n, size=a.n_queries, replace=False))
    t = time.perf_counter()
    ids, sims = exact_topk(np.asarray(m), queries, K)
    truth_s = time.perf_counter() - t
    np.savez(os.path.join(a.dir, "truth.npz"), queries=queries, ids=ids, sims=sims)
    same = float((assign[ids] == assign[queries][:, None]).mean())
    return {
        "gen_s": gen_s,
        "truth_s": truth_s,
        "sim_1st": float(np.median(sims[:, 0])),
        "sim_10th": float(np.median(sims[:, K - 1])),
        "same_cluster": same,
        "cluster_rows_median": float(np.median(np.bincount(assign, minlength=c))),
    }


def exact_topk(m, queries, k: int):  # type: ignore[no-untyped-def]
    """Exact top-``k`` of ``m[queries]`` over ``m``, the query row itself excluded (row blocks, argpartition)."""
    import numpy as np

    q = np.ascontiguousarray(m[queries])
    best_s = np.full((len(q), k + 1), -np.inf, dtype=np.float32)
    best_i = np.zeros((len(q), k + 1), dtype=np.int64)
    step = 50_000
    for lo in range(0, len(m), step):
        s = q @ m[lo : lo + step].T
        part = np.argpartition(-s, k + 1, axis=1)[:, : k + 1] if s.shape[1] > k + 1 else np.broadcast_to(np.arange(s.shape[1]), (len(q), s.shape[1]))
        cand_s = np.concatenate([best_s, np.take_along_axis(s, part, axis=1)], axis=1)
        cand_i = np.concatenate([best_i, part + lo], axis=1)
        keep = np.argpartition(-cand_s, k + 1, axis=1)[:, : k + 1]
        best_s, best_i = np.take_along_axis(cand_s, keep, axis=1), np.take_along_axis(cand_i, keep, axis=1)
    best_s[best_i == queries[:, None]] = -np.inf  # the query row is not its own neighbour
    order = np.argsort(-best_s, axis=1, kind="stable")[:, :k]
    return np.take_along_axis(best_i, order, axis=1), np.take_along_axis(best_s, order, axis=1)


def recall(found, queries, truth) -> float:  # type: ignore[no-untyped-def]
    """Mean recall@10: ``found`` rows may hold the query row itself and -1 padding; the first 10 others count."""
    hits = 0
    for row, qid, true in zip(found, queries, truth, strict=True):
        got = [int(i) for i in row if i != qid and i >= 0][:K]
        hits += len(set(got) & set(true.tolist()))
    return hits / (K * len(queries))


# ----------------------------------------------------------------------------------
# backends, through their own APIs
# ----------------------------------------------------------------------------------
# name -> (build params, search-parameter name, settings); HNSW graphs share M=16, ef_construction=100
HNSW_M, HNSW_EFC = 16, 100
EFS = (32, 64, 128, 256)
BACKENDS: dict[str, dict] = {
    "faiss-hnsw": {"param": "ef", "settings": EFS},
    "faiss-ivf": {"param": "nprobe", "settings": (4, 6, 8, 16)},
    "faiss-ivfpq": {"param": "nprobe", "settings": (16, 32, 64)},
    "hnswlib": {"param": "ef", "settings": EFS},
    "usearch-f32": {"param": "ef", "settings": EFS},
    "usearch-f16": {"param": "ef", "settings": EFS},
    "usearch-i8": {"param": "ef", "settings": EFS},
    "voyager": {"param": "ef", "settings": EFS},
}
IVF_RERANK = 100  # IVF-PQ candidates re-scored exactly against the matrix
#: finalfusion.ann: the search settings measured per backend (one build, ``AnnIndex.set_search`` between them)
FF_SETTINGS: dict[str, list[int]] = {
    "faiss-ivf": [4, 6, 8, 16],
    "faiss-ivfpq": [16, 32, 64],
    "hnswlib": [128, 256],
    "faiss-hnsw": [128, 256],
    "usearch": [128, 256],
    "voyager": [128, 256],
}


class Backend:
    """One index behind a common face: ``build(m)``, ``set(value)``, ``search(q, k, threads) -> ids``."""

    def __init__(self, name: str, m, a: argparse.Namespace) -> None:  # type: ignore[no-untyped-def]
        self.name, self.m, self.a = name, m, a
        self.value = 0

    def build(self) -> None:
        import numpy as np

        m, n, d = self.m, self.m.shape[0], self.m.shape[1]
        name = self.name
        if name.startswith("faiss"):
            import faiss

            faiss.omp_set_num_threads(self.a.build_threads)
            self.faiss = faiss
            if name == "faiss-hnsw":
                ix = faiss.IndexHNSWFlat(d, HNSW_M, faiss.METRIC_INNER_PRODUCT)
                ix.hnsw.efConstruction = HNSW_EFC
                ix.add(m)
            elif name == "faiss-ivf":  # IndexIVFFlat: every row kept exactly in its cell's list
                nlist = self.a.nlist or max(16, int(4 * np.sqrt(n)))
                coarse = faiss.IndexFlatIP(d)
                ix = faiss.IndexIVFFlat(coarse, d, nlist, faiss.METRIC_INNER_PRODUCT)
                rng = np.random.default_rng(1)
                ix.train(m[np.sort(rng.choice(n, size=min(n, 50 * nlist), replace=False))])
                for lo in range(0, n, 200_000):
                    ix.add(m[lo : lo + 200_000])
            else:
                nlist = self.a.nlist or max(16, int(4 * np.sqrt(n)))
                quant = faiss.IndexFlatIP(d)
                ix = faiss.IndexIVFPQ(quant, d, nlist, self.a.pq_m, 8, faiss.METRIC_INNER_PRODUCT)
                ix.cp.niter = 10
                rng = np.random.default_rng(1)
                ix.train(m[np.sort(rng.choice(n, size=min(n, 64 * nlist, 200_000), replace=False))])
                for lo in range(0, n, 200_000):
                    ix.add(m[lo : lo + 200_000])
            self.ix = ix
        elif name == "hnswlib":
            import hnswlib

            ix = hnswlib.Index(space="ip", dim=d)
            ix.init_index(max_elements=n, ef_construction=HNSW_EFC, M=HNSW_M)
            ix.add_items(m, np.arange(n), num_threads=self.a.build_threads)
            self.ix = ix
        elif name.startswith("usearch"):
            from usearch.index import Index

            ix = Index(ndim=d, metric="ip", dtype=name.split("-")[1], connectivity=HNSW_M, expansion_add=HNSW_EFC)
            ix.add(np.arange(n, dtype=np.uint64), m, threads=self.a.build_threads)
            self.ix = ix
        elif name == "voyager":
            import voyager

            ix = voyager.Index(voyager.Space.InnerProduct, num_dimensions=d, M=HNSW_M, ef_construction=HNSW_EFC, max_elements=n)
            ix.add_items(m, np.arange(n), num_threads=self.a.build_threads)
            self.ix = ix
        else:
            raise ValueError(name)

    def set(self, value: int) -> None:
        self.value = value
        if self.name == "faiss-hnsw":
            self.ix.hnsw.efSearch = value
        elif self.name.startswith("faiss-ivf"):
            self.ix.nprobe = value
        elif self.name == "hnswlib":
            self.ix.set_ef(value)
        elif self.name.startswith("usearch"):
            self.ix.expansion_search = value

    def search(self, q, k: int, threads: int):  # type: ignore[no-untyped-def]
        import numpy as np

        name = self.name
        if name.startswith("faiss"):
            self.faiss.omp_set_num_threads(threads)
            if name in ("faiss-hnsw", "faiss-ivf"):
                return self.ix.search(q, k)[1]
            cand = self.ix.search(q, max(k, IVF_RERANK))[1]
            out = np.empty((len(q), k), dtype=np.int64)
            for i in range(len(q)):  # exact re-scoring of the candidates against our matrix
                c = cand[i][cand[i] >= 0]
                s = self.m[c] @ q[i]
                top = np.argsort(-s, kind="stable")[:k]
                out[i, : len(top)] = c[top]
                out[i, len(top) :] = -1
            return out
        if name == "hnswlib":
            return self.ix.knn_query(q, k=k, num_threads=threads)[0]
        if name.startswith("usearch"):
            res = self.ix.search(q, k, threads=threads)
            return np.atleast_2d(res.keys).astype(np.int64)
        if name == "voyager":
            return self.ix.query(q, k=k, num_threads=threads, query_ef=self.value)[0]
        raise ValueError(name)


def single_latencies(search, m, queries) -> list[float]:  # type: ignore[no-untyped-def]
    """Seconds of each single query (one row at a time), after 20 warm-up queries."""
    for qid in queries[:20]:
        search(m[qid : qid + 1])
    out = []
    for qid in queries:
        q = m[qid : qid + 1]
        t = time.perf_counter()
        search(q)
        out.append(time.perf_counter() - t)
    return out


def spread(xs: list[float]) -> dict:
    import numpy as np

    return {"median": float(np.median(xs)), "p10": float(np.percentile(xs, 10)), "p90": float(np.percentile(xs, 90))}


def timed_reps(reps: int, call: Any) -> tuple[list[float], Any]:
    """Wall seconds of ``reps`` calls of ``call()`` and the last result."""
    times, out = [], None
    for _ in range(reps):
        t = time.perf_counter()
        out = call()
        times.append(time.perf_counter() - t)
    return times, out


def worker_backend(a: argparse.Namespace) -> dict:
    import numpy as np
    from _peak import peak_since_reset, reset_peak

    m = np.load(os.path.join(a.dir, "matrix.npy"))  # in memory: the matrix is not counted below
    truth = np.load(os.path.join(a.dir, "truth.npz"))
    queries, true_ids = truth["queries"], truth["ids"]
    qm = np.ascontiguousarray(m[queries])
    before = reset_peak()
    b = Backend(a.backend, m, a)
    t = time.perf_counter()
    b.build()
    res: dict = {"build_s": time.perf_counter() - t, "peak_build_mb": peak_since_reset(before) / MB, "matrix_mb": m.nbytes / MB}
    res["settings"] = {}
    for value in BACKENDS[a.backend]["settings"]:
        b.set(value)
        row: dict = {}
        batch, found = timed_reps(a.reps, lambda: b.search(qm, K + 1, a.search_threads))
        row["batch_s"] = batch
        row["recall"] = recall(found, queries, true_ids)
        row["single_s"] = spread(single_latencies(lambda q: b.search(q, K + 1, 1), m, queries))
        res["settings"][str(value)] = row
    res["peak_mb"] = peak_since_reset(before) / MB
    return res


def worker_exact(a: argparse.Namespace) -> dict:
    """The exact numpy scan: ``M @ q`` + argpartition (single, 1 thread) and row blocks for the batch."""
    import numpy as np

    m = np.load(os.path.join(a.dir, "matrix.npy"))
    truth = np.load(os.path.join(a.dir, "truth.npz"))
    queries = truth["queries"]

    def single(q):  # type: ignore[no-untyped-def]
        s = m @ q[0]
        top = np.argpartition(-s, K + 1)[: K + 1]
        return top[np.argsort(-s[top])]

    lat = []
    for qid in queries[: a.exact_singles]:
        q = m[qid : qid + 1]
        t = time.perf_counter()
        single(q)
        lat.append(time.perf_counter() - t)
    batch, _ = timed_reps(a.reps, lambda: exact_topk(m, queries, K))
    return {"single_s": spread(lat), "batch_s": batch}


# ----------------------------------------------------------------------------------
# finalfusion: the exact scan and finalfusion.ann
# ----------------------------------------------------------------------------------
def worker_ff(a: argparse.Namespace) -> dict:
    import numpy as np
    from _peak import peak_since_reset, reset_peak

    import finalfusion
    from finalfusion.storage import NdArray
    from finalfusion.vocab import SimpleVocab

    finalfusion.set_threads(a.build_threads)
    m = np.load(os.path.join(a.dir, "matrix.npy"))
    truth = np.load(os.path.join(a.dir, "truth.npz"))
    queries, true_ids = truth["queries"], truth["ids"]
    emb = finalfusion.Embeddings(NdArray(m), SimpleVocab([word(i) for i in range(len(m))]))
    index_of = {word(i): i for i in range(len(m))}
    qm = np.ascontiguousarray(m[queries])
    res: dict = {"matrix_mb": m.nbytes / MB}

    def ids(result) -> list[int]:  # type: ignore[no-untyped-def]
        return [index_of[r.word] for r in result]

    if a.backend == "exact":
        finalfusion.set_threads(1)  # single queries on one thread, as for the indexes
        for qid in queries[:2]:  # the first query sets up the query index and norms
            emb.embedding_similarity(m[qid], k=K + 1)
        lat = []
        for qid in queries[2 : 2 + a.exact_singles]:
            t = time.perf_counter()
            emb.embedding_similarity(m[qid], k=K + 1)
            lat.append(time.perf_counter() - t)
        res["single_s"] = spread(lat)
        finalfusion.set_threads(a.search_threads)
        batch, found = timed_reps(a.reps, lambda: emb.embedding_similarity_batch(qm, k=K + 1)[0])
        res["batch_s"] = batch
        res["recall"] = recall(found, queries, true_ids)
        return res

    from finalfusion import ann

    params = json.loads(a.params) if a.params else {}
    before = reset_peak()
    t = time.perf_counter()
    ix = ann.build_index(emb, backend=None if a.backend == "default" else a.backend, **params)
    res["build_s"] = time.perf_counter() - t
    res["peak_build_mb"] = peak_since_reset(before) / MB
    res["index"] = repr(ix)
    emb.set_index(ix)  # the default index of every query method from here on
    param = "nprobe" if "nprobe" in ix.params else "ef"  # what AnnIndex.set_search can change
    settings = [int(v) for v in a.ff_settings.split(",")] if a.ff_settings else FF_SETTINGS.get(ix.backend, [ix.params[param]])
    res["settings"] = {}
    for value in settings:
        ix.set_search(**{param: value})
        row: dict = {}
        finalfusion.set_threads(1)
        for qid in queries[:20]:
            emb.embedding_similarity(m[qid], k=K + 1)
        lat, singles = [], []
        for qid in queries:
            t = time.perf_counter()
            got = emb.embedding_similarity(m[qid], k=K + 1)
            lat.append(time.perf_counter() - t)
            singles.append(ids(got))
        row["single_s"] = spread(lat)
        row["single_recall"] = recall(singles, queries, true_ids)
        finalfusion.set_threads(a.search_threads)
        batch, found = timed_reps(a.reps, lambda: emb.embedding_similarity_batch(qm, k=K + 1)[0])
        row["batch_s"] = batch
        row["recall"] = recall(found, queries, true_ids)
        res["settings"][str(value)] = row
    res["param"] = param
    res["peak_mb"] = peak_since_reset(before) / MB
    return res


# ----------------------------------------------------------------------------------
# --first-query: the first query after build_index / load_index, and the cost of one query beside raw faiss
# ----------------------------------------------------------------------------------
FIRST_LATER = 200  # later queries timed after the first one


def _first_and_later(emb, ix, words: list[str]) -> tuple[float, dict]:  # type: ignore[no-untyped-def]
    """Seconds of the first ``word_similarity(w, 10, index=ix)`` and the spread of the next :data:`FIRST_LATER` queries."""
    t = time.perf_counter()
    emb.word_similarity(words[0], K, index=ix)
    first = time.perf_counter() - t
    later = []
    for w in words[1 : 1 + FIRST_LATER]:
        t = time.perf_counter()
        emb.word_similarity(w, K, index=ix)
        later.append(time.perf_counter() - t)
    return first, spread(later)


def _side_by_side(emb, ix, m, queries, rounds: int, loads: list[float]) -> dict:  # type: ignore[no-untyped-def]
    """One query at a time, interleaved: raw faiss on the very index finalfusion built, ``AnnIndex.search`` and the query methods.

    Every round runs each contender once per query row, in turn; a round's
    figure is the median over its queries, and the ratio is taken within a
    round (same queries, same moment of the machine's load); the 1-minute
    load average at the end of each round is appended to ``loads``.
    """
    import numpy as np

    from finalfusion.similarity import SimilarityResult, SimilarityResults

    raw = ix._impl._index  # the faiss IndexIVFFlat behind finalfusion's default backend
    raw.nprobe = int(ix.params["nprobe"])
    words = emb.vocab.words
    word_index = emb.vocab.word_index

    def raw_results(qid: int) -> list:
        """Floor 1: raw faiss and ten result objects from its own ids and scores, nothing else."""
        scores, ids = raw.search(m[qid : qid + 1], K + 1)
        return SimilarityResults([SimilarityResult(words[i], s) for s, i in zip(scores[0].tolist(), ids[0].tolist(), strict=True)][:K])

    def backend_scores(qid: int) -> list:
        """Floor 2: what word_similarity would do if it returned faiss's scores: look the word up, a unit query, search, drop the word, results."""
        w = words[qid]
        own = word_index[w]
        v = np.asarray(emb.embedding(w), dtype=np.float64)
        q = (v / math.sqrt(float(v @ v))).astype(np.float32)
        scores, ids = raw.search(q[None, :], K + 1)
        return SimilarityResults([SimilarityResult(words[i], s) for s, i in zip(scores[0].tolist(), ids[0].tolist(), strict=True) if i != own][:K])

    contenders = {
        "raw faiss search(q, 11)": lambda qid: raw.search(m[qid : qid + 1], K + 1),
        "AnnIndex.search(q, 11)": lambda qid: ix.search(m[qid], K + 1),
        "embedding_similarity(q, 11)": lambda qid: emb.embedding_similarity(m[qid], k=K + 1, index=ix),
        "word_similarity(w, 10)": lambda qid: emb.word_similarity(words[qid], K, index=ix),
        "floor: raw faiss + results": raw_results,
        "floor: faiss's own scores": backend_scores,
    }
    for qid in queries[:20]:  # warm-up
        for f in contenders.values():
            f(qid)
    per_round: dict[str, list[float]] = {name: [] for name in contenders}
    names = list(contenders)
    for _ in range(rounds):
        lat: dict[str, list[float]] = {name: [] for name in contenders}
        for j, qid in enumerate(queries):
            # the contender that runs first on a query meets its cells cold in the cache: each takes that turn in rotation
            for name in names[j % len(names) :] + names[: j % len(names)]:
                f = contenders[name]
                t = time.perf_counter()
                f(qid)
                lat[name].append(time.perf_counter() - t)
        for name in contenders:
            per_round[name].append(float(np.median(lat[name])))
        loads.append(os.getloadavg()[0])
    raw_name = next(iter(contenders))
    return {
        name: {"median_s": per_round[name], "ratio_to_raw": [a / b for a, b in zip(per_round[name], per_round[raw_name], strict=True)]} for name in contenders
    }


def _cold_numpy(ix, m, queries) -> dict:  # type: ignore[no-untyped-def]
    """Median seconds of one small numpy reduction (``max`` of 11 ints) right after a raw faiss search, and warm (right after itself)."""
    import numpy as np

    raw = ix._impl._index
    ids = np.arange(11, dtype=np.int64)
    after, warm = [], []
    for qid in list(queries) * 3:
        raw.search(m[qid : qid + 1], K + 1)
        t = time.perf_counter()
        ids.max()
        after.append(time.perf_counter() - t)
        t = time.perf_counter()
        ids.max()
        warm.append(time.perf_counter() - t)
    return {"after_search": float(np.median(after)), "warm": float(np.median(warm))}


def worker_first(a: argparse.Namespace) -> dict:
    """Build (or, with ``--params load``, load) finalfusion's default index and time the first query and then one query beside raw faiss."""
    import numpy as np

    import finalfusion
    from finalfusion import ann

    finalfusion.set_threads(a.build_threads)
    truth = np.load(os.path.join(a.dir, "truth.npz"))
    queries = truth["queries"]
    res: dict = {}
    if a.params == "load":  # a fresh process: the embeddings memory-mapped, the saved index opened for them
        t = time.perf_counter()
        emb = finalfusion.load_finalfusion(os.path.join(a.dir, "emb.fifu"), mmap=True)
        res["load_embeddings_s"] = time.perf_counter() - t
        t = time.perf_counter()
        ix = ann.load_index(os.path.join(a.dir, "emb.ann"), emb)
        res["load_index_s"] = time.perf_counter() - t
    else:
        from finalfusion.storage import NdArray
        from finalfusion.vocab import SimpleVocab

        m = np.load(os.path.join(a.dir, "matrix.npy"))  # in memory, writable
        emb = finalfusion.Embeddings(NdArray(m), SimpleVocab([word(i) for i in range(len(m))]))
        t = time.perf_counter()
        ix = ann.build_index(emb)
        res["build_s"] = time.perf_counter() - t
    finalfusion.set_threads(1)  # single queries on one thread
    res["index"] = repr(ix)
    res["first_s"], res["later_s"] = _first_and_later(emb, ix, [word(int(i)) for i in queries])
    if a.first_only:  # a repetition of the first query: a fresh process, nothing else timed
        return res
    m = np.asarray(emb.storage.matrix)
    res["side_by_side_load"] = []
    res["side_by_side"] = _side_by_side(emb, ix, m, queries[: a.n_queries], a.reps, res["side_by_side_load"])
    res["cold_numpy_s"] = _cold_numpy(ix, m, queries[: a.n_queries])
    if a.params != "load":
        emb.write(os.path.join(a.dir, "emb.fifu"))
        ix.save(os.path.join(a.dir, "emb.ann"))
    return res


def print_first(n: int, dims: int, built: list[dict], loaded: list[dict]) -> None:
    """The first-query table (median and range over the fresh processes) and the side-by-side table of one size."""
    print(f"\n{n:,} rows x {dims}: the first word_similarity(w, 10, index=ix) in a fresh process, then {FIRST_LATER} more (1 thread)")
    head = f"| {'after':40s} | {'processes':>9s} | {'setup, median':>13s} | {'first query, median (min-max)':>30s} |"
    print(f"{head} {'later, median (min-max)':>26s} | {'first / later':>13s} |")
    print(f"|{'-' * 42}|{'-' * 11}|{'-' * 15}|{'-' * 32}|{'-' * 28}|{'-' * 15}|")
    for label, runs, setup in (("build_index(emb), in memory", built, "build_s"), ("load_index(path, emb), mmap", loaded, "load_index_s")):
        first = [r["first_s"] for r in runs]
        later = [r["later_s"]["median"] for r in runs]
        first_col = f"{ms(med(first))} ({ms(min(first))}-{ms(max(first))})"
        later_col = f"{ms(med(later))} ({ms(min(later))}-{ms(max(later))})"
        setup_col = ms(med([r[setup] for r in runs]))
        print(f"| {label:40s} | {len(runs):9d} | {setup_col:>13s} | {first_col:>30s} | {later_col:>26s} | {med(first) / med(later):12.1f}x |")
    for label, r in (("in memory, after build_index", built[0]), ("memory-mapped, after load_index", loaded[0])):
        sbs = r["side_by_side"]
        print(f"\none query at a time, {label} ({r['index']}); median per round, rounds: {len(next(iter(sbs.values()))['median_s'])}")
        print(f"| {'call':28s} | {'median of rounds':>16s} | {'rounds min-max':>19s} | {'x raw faiss, median (min-max)':>30s} |")
        print(f"|{'-' * 30}|{'-' * 18}|{'-' * 21}|{'-' * 32}|")
        for name, v in sbs.items():
            xs, rs = v["median_s"], v["ratio_to_raw"]
            print(f"| {name:28s} | {ms(med(xs)):>16s} | {ms(min(xs)) + '-' + ms(max(xs)):>19s} | {f'{med(rs):.2f}x ({min(rs):.2f}-{max(rs):.2f})':>30s} |")
        print("ratios per round: " + "; ".join(f"{name} " + ", ".join(f"{x:.2f}" for x in v["ratio_to_raw"]) for name, v in list(sbs.items())[1:]))
        print("load average (1 min) after each round: " + ", ".join(f"{x:.2f}" for x in r.get("side_by_side_load", [])))
        cold = r.get("cold_numpy_s")
        if cold:  # what any numpy call pays after a search that has filled the caches with its own data
            print(f"numpy max() of 11 ints: {ms(cold['after_search'])} right after a raw faiss search, {ms(cold['warm'])} warm (medians)")


WORKERS = {"gen": worker_gen, "backend": worker_backend, "exact": worker_exact, "ff": worker_ff, "first": worker_first}


# ----------------------------------------------------------------------------------
# driver
# ----------------------------------------------------------------------------------
def run_worker(task: str, extra: list[str], timeout: float = 7200) -> dict:
    """One measurement in a fresh interpreter (this repository's ``src`` first on the path)."""
    cmd = [sys.executable, SCRIPT, "--worker", task, *extra]
    env = dict(os.environ)
    env["PYTHONPATH"] = os.path.join(REPO, "src")
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, cwd=tempfile.gettempdir())
    if p.returncode != 0:
        raise RuntimeError(f"worker {task} {extra} failed ({p.returncode}):\n{p.stderr[-4000:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def ms(v: float) -> str:
    return fmt(v, "s")


def print_table(n: int, exact: dict, rows: dict, matrix_mb: float) -> None:
    """One size: every contender at every setting, with ratios against the exact scan."""
    ex_single, ex_batch = exact["single_s"]["median"], med(exact["batch_s"])
    print(f"\n{n:,} rows x 300, top-{K}, 1,000 queries; matrix {matrix_mb:,.0f} MB")
    print(f"exact scan: single {ms(ex_single)} (p10 {ms(exact['single_s']['p10'])}, p90 {ms(exact['single_s']['p90'])}), batch of 1,000 {ms(ex_batch)}")
    hdr = (
        f"| {'backend':12s} | {'setting':>10s} | {'build':>8s} | {'peak mem':>9s} | {'x matrix':>8s} | {'recall@10':>9s} "
        f"| {'single median (p10-p90)':>27s} | {'x exact':>7s} | {'batch 1,000':>11s} | {'x exact':>7s} |"
    )
    print(hdr)
    print("|" + "|".join("-" * len(c) for c in hdr.split("|")[1:-1]) + "|")
    for name, r in rows.items():
        for value, s in r["settings"].items():
            single, batch = s["single_s"], med(s["batch_s"])
            lat = f"{ms(single['median'])} ({ms(single['p10'])}-{ms(single['p90'])})"
            print(
                f"| {name:12s} | {r['param'] + '=' + value:>10s} | {r['build_s']:6.0f} s | {r['peak_mb']:6,.0f} MB | {r['peak_mb'] / matrix_mb:8.2f} "
                f"| {s['recall']:9.3f} | {lat:>27s} | {ex_single / single['median']:6.0f}x | {ms(batch):>11s} | {ex_batch / batch:6.0f}x |"
            )


def cpu_name() -> str:
    with open("/proc/cpuinfo", encoding="utf-8") as f:
        return next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), "?")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="50,000 rows, one repetition: a smoke test")
    ap.add_argument("--backends", action="store_true", help="compare the raw libraries (the measurement behind the default)")
    ap.add_argument("--finalfusion", action="store_true", help="the exact scan and finalfusion.ann through Embeddings' query methods")
    ap.add_argument(
        "--first-query",
        action="store_true",
        help="first-query latency after build_index and after load_index (default index), and one query beside raw faiss (--sizes 300000 --dims 100)",
    )
    ap.add_argument("--first-processes", type=int, default=None, help="fresh processes timing the first query, each kind (default 5; --quick 2)")
    ap.add_argument("--first-only", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--sizes", default="1000000,2000000", help="row counts, comma-separated (default 1000000,2000000)")
    ap.add_argument("--only", help="backends for --backends, comma-separated (default all: " + ",".join(BACKENDS) + ")")
    ap.add_argument("--ff-backends", default="default", help="finalfusion.ann backends for --finalfusion, comma-separated ('default': backend=None)")
    ap.add_argument("--ff-params", default="", help="JSON build parameters for build_index (default none)")
    ap.add_argument("--ff-settings", default="", help="search settings (ef or nprobe) for --finalfusion, comma-separated (default per backend: FF_SETTINGS)")
    ap.add_argument("--reps", type=int, default=None, help="batch repetitions (default 3; --quick 1)")
    ap.add_argument("--dims", type=int, default=300)
    ap.add_argument("--clusters", type=int, default=None, help="number of clusters (default 2,000 per million rows)")
    ap.add_argument("--spread", type=float, default=0.8, help="low-rank deviation from the cluster centre")
    ap.add_argument("--noise", type=float, default=0.4, help="isotropic deviation")
    ap.add_argument("--pq-m", type=int, default=50, help="IVF-PQ subquantizers (default 50)")
    ap.add_argument("--nlist", type=int, default=0, help="IVF lists (default 4 sqrt(n))")
    ap.add_argument("--build-threads", type=int, default=2)
    ap.add_argument("--search-threads", type=int, default=2, help="threads of the batch (single queries run on 1)")
    ap.add_argument("--exact-singles", type=int, default=None, help="single exact-scan queries timed (default 100)")
    ap.add_argument("--out", help="write results as JSON to this file")
    ap.add_argument("--keep", action="store_true", help="keep the generated data")
    ap.add_argument("--worker", choices=sorted(WORKERS), help=argparse.SUPPRESS)
    ap.add_argument("--backend", help=argparse.SUPPRESS)
    ap.add_argument("--params", help=argparse.SUPPRESS)
    ap.add_argument("--dir", help=argparse.SUPPRESS)
    ap.add_argument("--n", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--n-queries", type=int, default=1000, help=argparse.SUPPRESS)
    ap.add_argument("--seed", type=int, default=42, help=argparse.SUPPRESS)
    a = ap.parse_args()

    if a.worker:
        print(json.dumps(WORKERS[a.worker](a)))
        return 0

    sizes = [50_000] if a.quick else [int(s) for s in a.sizes.split(",")]
    reps = a.reps or (1 if a.quick else 3)
    singles = a.exact_singles or (20 if a.quick else 100)
    if a.first_query:
        return first_query(a)
    if not a.backends and not a.finalfusion:
        a.backends = True
        try:
            subprocess.run(
                [sys.executable, "-c", "import finalfusion.ann"], check=True, capture_output=True, env={**os.environ, "PYTHONPATH": os.path.join(REPO, "src")}
            )
            a.finalfusion = True
        except subprocess.CalledProcessError:
            print("finalfusion.ann is not importable: only the backend comparison runs")
    names = a.only.split(",") if a.only else list(BACKENDS)
    common = ["--reps", str(reps), "--exact-singles", str(singles), "--build-threads", str(a.build_threads), "--search-threads", str(a.search_threads)]
    results: dict = {
        "config": {k: v for k, v in vars(a).items() if k not in ("worker", "backend", "params", "dir", "n")},
        "platform": platform.platform(),
        "cpu": cpu_name(),
        "cores": os.cpu_count(),
        "load_before": os.getloadavg(),
        "git": subprocess.run(["git", "-C", REPO, "describe", "--always", "--dirty"], capture_output=True, text=True).stdout.strip(),
        "sizes": {},
    }
    print(f"{results['cpu']}, {results['cores']} cores, load {results['load_before']}; git {results['git']}", flush=True)
    for n in sizes:
        tmp = tempfile.mkdtemp(prefix="ffannbench-")
        if os.path.abspath(tmp).startswith(REPO + os.sep):
            raise SystemExit("temporary directory must not be inside the repository")
        out: dict = {}
        results["sizes"][str(n)] = out
        try:
            clusters = a.clusters or max(20, 2 * n // 1000)
            t = time.perf_counter()
            gen_args = ["--dir", tmp, "--n", str(n), "--dims", str(a.dims), "--clusters", str(clusters), "--spread", str(a.spread), "--noise", str(a.noise)]
            out["data"] = run_worker("gen", gen_args)
            print(f"\n{n:,} rows, {clusters:,} clusters, generated in {time.perf_counter() - t:.0f} s; data: {out['data']}", flush=True)
            base = ["--dir", tmp, "--n", str(n), *common]
            if a.backends:  # the numpy scan is the backends' baseline; finalfusion's own scan is the other part's
                out["exact"] = run_worker("exact", base)
                print(f"exact numpy scan: {out['exact']}", flush=True)
            matrix_mb = n * a.dims * 4 / MB
            if a.backends:
                rows: dict = {}
                for name in names:
                    r = run_worker("backend", [*base, "--backend", name, "--pq-m", str(a.pq_m), "--nlist", str(a.nlist)])
                    r["param"] = BACKENDS[name]["param"]
                    rows[name] = r
                    print(f"{name}: {json.dumps(r)}", flush=True)
                out["backends"] = rows
                print_table(n, out["exact"], rows, matrix_mb)
            if a.finalfusion:
                out["ff_exact"] = run_worker("ff", [*base, "--backend", "exact"])
                print(f"finalfusion exact: {out['ff_exact']}", flush=True)
                rows = {}
                for name in a.ff_backends.split(","):
                    extra = ["--backend", name, "--params", a.ff_params, "--ff-settings", a.ff_settings]
                    r = run_worker("ff", [*base, *extra])
                    rows[f"ann {name}"] = r
                    print(f"finalfusion ann {name}: {json.dumps(r)}", flush=True)
                out["ff"] = rows
                print_table(n, out["ff_exact"], rows, matrix_mb)
                check(out["ff_exact"], rows, matrix_mb, n)
        finally:
            remove_tmp(tmp, a.keep)
    return finish(results, a.out)


def finish(results: dict, out: str | None) -> int:
    """Print the load averages before and after, save the results (``--out``)."""
    results["load_after"] = os.getloadavg()
    print(f"\nload average before {results['load_before']}, after {results['load_after']}")
    save_results(results, out)
    return 0


def first_query(a: argparse.Namespace) -> int:
    """The ``--first-query`` mode: per size, generate, then build and time, load and time, each in fresh processes."""
    results: dict = {
        "config": {k: v for k, v in vars(a).items() if k not in ("worker", "backend", "params", "dir", "n")},
        "load_before": os.getloadavg(),
        "sizes": {},
    }
    print(f"{cpu_name()}, {os.cpu_count()} cores, load {results['load_before']}", flush=True)
    rounds, nq = a.reps or (1 if a.quick else 5), min(a.n_queries, 200)
    processes = a.first_processes or (2 if a.quick else 5)
    for n in [50_000] if a.quick else [int(s) for s in a.sizes.split(",")]:
        tmp = tempfile.mkdtemp(prefix="ffannbench-")
        try:
            gen = ["--dir", tmp, "--n", str(n), "--dims", str(a.dims), "--clusters", str(a.clusters or max(20, 2 * n // 1000))]
            run_worker("gen", [*gen, "--spread", str(a.spread), "--noise", str(a.noise)])
            common = ["--dir", tmp, "--n", str(n), "--reps", str(rounds), "--n-queries", str(nq), "--build-threads", str(a.build_threads)]
            built = [run_worker("first", common)]  # also saves the embeddings and the index, and runs the side-by-side rounds
            loaded = [run_worker("first", [*common, "--params", "load"])]
            for _ in range(processes - 1):  # more fresh processes: the first query only
                built.append(run_worker("first", [*common, "--first-only"]))
                loaded.append(run_worker("first", [*common, "--params", "load", "--first-only"]))
            results["sizes"][str(n)] = {"build": built, "load": loaded}
            print_first(n, a.dims, built, loaded)
        finally:
            remove_tmp(tmp, a.keep)
    return finish(results, a.out)


def check(exact: dict, rows: dict, matrix_mb: float, n: int) -> None:
    """The issue's targets, at every measured setting of every finalfusion index."""
    ex_single, ex_batch = exact["single_s"]["median"], med(exact["batch_s"])
    for name, r in rows.items():
        mem_ok = r["peak_mb"] <= 1.5 * matrix_mb
        for value, s in r["settings"].items():
            single, batch = s["single_s"]["median"], med(s["batch_s"])
            checks = [
                ("recall@10 >= 0.95", s["recall"], s["recall"] >= 0.95),
                ("single >= 100x exact", ex_single / single, ex_single / single >= 100),
                *([("single < 1 ms at 2M", single * 1e3, single < 1e-3)] if n >= 2_000_000 else []),
                ("batch >= 50x exact", ex_batch / batch, ex_batch / batch >= 50),
                ("peak memory <= 1.5x matrix", r["peak_mb"] / matrix_mb, mem_ok),
            ]
            for label, v, ok in checks:
                print(f"{n:,} {name} {value}: {label:28s} {v:8.3f}  {'PASS' if ok else 'FAIL'}")


if __name__ == "__main__":
    sys.exit(main())
