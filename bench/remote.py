#!/usr/bin/env python3
"""Remote files: bytes and requests a load fetches against the file's size, and time against downloading it all.

Files are generated into a temporary directory and served by nginx on the loopback interface (the server
tests/test_remote.py uses: Debian's ``nginx-light``) behind a proxy that holds every answer, all connections
together, to ``--rate`` bytes a second (default 50 MB/s: a fast network link rather than loopback's memory copy;
nginx's own ``limit_rate`` does not slow answers of a range request's size). nginx's access log gives the bytes and
requests each case cost (one more run after the timed ones).
Per case, side by side in one run, ``--reps`` times (median and spread):

* ``remote``: the case's call on the URL (``finalfusion.load_finalfusion(url, mmap=True)`` and lookups, ...);
* ``download``: what a user without range reads does: fetch the whole file over the same link, then the same call
  on the local copy.

Cases (the sizes of issue 37; ``--small`` divides them by about 20):

* ``fifu-known`` / ``fifu-unknown``: 10 known / 10 unknown words of a bucket ``.fifu`` (1M words + 2^20 buckets,
  300 dims: a 2M x 300 matrix, 2.5 GB). Target: the vocabulary and index structures plus at most 1 MB of rows.
* ``gguf-table``: ``load_gguf`` of a GGUF whose F32 token table (32,000 x 512, 65.5 MB) is about 3% of the file.
  Target: the table plus at most 2 MB.
* ``safetensors-shards``: ``finalfusion.load`` of a sharded safetensors model directory (three shards, the embedding
  tensor in the second, the index and tokenizer.json beside them). Target: the tensor plus the headers.

Usage::

    .venv/bin/python bench/remote.py            # the issue's sizes (about 5 GB in the temporary directory)
    .venv/bin/python bench/remote.py --small    # a minute
"""

from __future__ import annotations

import argparse
import json
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))

import finalfusion  # noqa: E402
from _servers import Nginx, nginx  # noqa: E402


class Link:
    """A token bucket shared by every connection: at most ``rate`` bytes a second, bursts of 256 KB."""

    def __init__(self, rate: float) -> None:
        self.rate, self.lock, self.tokens, self.last = rate, threading.Lock(), 0.0, time.monotonic()

    def take(self, n: int) -> None:
        with self.lock:
            now = time.monotonic()
            self.tokens = min(256e3, self.tokens + (now - self.last) * self.rate) - n
            self.last = now
            wait = -self.tokens / self.rate if self.tokens < 0 else 0.0
            if wait:
                time.sleep(wait)  # under the lock: the connections share the link
                self.tokens, self.last = 0.0, time.monotonic()


def _pipe(src: socket.socket, dst: socket.socket, link: Link | None) -> None:
    try:
        while data := src.recv(64 * 1024):
            if link is not None:
                link.take(len(data))
            dst.sendall(data)
    except OSError:
        pass
    finally:
        for s in (src, dst):
            with suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)


def proxy(port: int, rate: float) -> None:
    """Forward a free loopback port to ``port``, answers held to ``rate`` bytes a second; print the port, serve forever."""
    link = Link(rate)
    listener = socket.create_server(("127.0.0.1", 0))
    print(listener.getsockname()[1], flush=True)
    while True:
        client, _ = listener.accept()
        upstream = socket.create_connection(("127.0.0.1", port))
        threading.Thread(target=_pipe, args=(client, upstream, None), daemon=True).start()
        threading.Thread(target=_pipe, args=(upstream, client, link), daemon=True).start()


@contextmanager
def throttled(port: int, rate: float) -> Iterator[int]:
    """:func:`proxy` in a process of its own (its threads would otherwise share the loads' interpreter lock); its port."""
    proc = subprocess.Popen([sys.executable, __file__, "--proxy", str(port), str(rate)], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        yield int(proc.stdout.readline())
    finally:
        proc.kill()
        proc.wait()


def word(i: int) -> str:
    return f"w{i}" if i % 10 else f"wört{i}"


def write_bucket_fifu(path: Path, words: int, buckets_exp: int, dims: int) -> None:
    """A bucket ``.fifu`` with random rows, generated block by block through a mapped matrix."""
    from finalfusion.storage import NdArray
    from finalfusion.subword import FinalfusionHashIndexer
    from finalfusion.vocab import FinalfusionBucketVocab

    rows = words + 2**buckets_exp
    matrix = np.lib.format.open_memmap(path.with_suffix(".npy"), mode="w+", dtype=np.float32, shape=(rows, dims))
    rng = np.random.default_rng(0)
    step = max(1, (1 << 24) // dims)
    for start in range(0, rows, step):
        stop = min(rows, start + step)
        matrix[start:stop] = rng.standard_normal((stop - start, dims), dtype=np.float32)
    vocab = FinalfusionBucketVocab([word(i) for i in range(words)], FinalfusionHashIndexer(buckets_exp, 3, 6))
    finalfusion.Embeddings(NdArray(matrix), vocab).write(path)
    del matrix
    path.with_suffix(".npy").unlink()


def write_gguf(path: Path, tokens: int, dims: int, bulk: int) -> int:
    """A GGUF with an F32 token table and ``bulk`` bytes of other tensors (gguf-py's GGUFWriter); the table's size."""
    import gguf

    w = gguf.GGUFWriter(str(path), arch="llama")
    w.add_tokenizer_model("gpt2")
    w.add_token_list([f"t{i}" for i in range(tokens)])
    w.add_token_types([1] * tokens)
    w.add_token_merges([])
    table = np.random.default_rng(0).standard_normal((tokens, dims)).astype(np.float32)
    w.add_tensor_info("token_embd.weight", table.shape, table.dtype, table.nbytes)
    layer = 4096 * 4096 * 4
    for i in range(max(1, bulk // layer)):
        w.add_tensor_info(f"blk.{i}.ffn_up.weight", (4096, 4096), np.dtype(np.float32), layer)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    w.write_tensor_data(table)
    zeros = np.zeros((4096, 4096), dtype=np.float32)
    for _ in range(max(1, bulk // layer)):
        w.write_tensor_data(zeros)
    w.close()
    return table.nbytes


def write_shards(root: Path, tokens: int, dims: int, bulk: int) -> int:
    """A sharded safetensors model directory (three shards, the embedding in the second) with a WordLevel
    tokenizer.json written by ``tokenizers``; the tensor's size."""
    from safetensors.numpy import save_file
    from tokenizers import Tokenizer, models, pre_tokenizers

    root.mkdir(parents=True, exist_ok=True)
    weight_map = {}
    rows = max(1, bulk // (2 * 4096 * 4))
    for shard in range(3):
        name = f"model-{shard + 1:05d}-of-00003.safetensors"
        tensors = {f"layers.{shard}.{k}.weight": np.zeros((rows, 4096), dtype=np.float32) for k in ("a", "b")}
        if shard == 1:
            tensors["embed_tokens.weight"] = np.random.default_rng(0).standard_normal((tokens, dims)).astype(np.float32)
        save_file(tensors, str(root / name))
        weight_map.update(dict.fromkeys(tensors, name))
    (root / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    tok = Tokenizer(models.WordLevel({f"t{i}": i for i in range(tokens)}, unk_token="t0"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.save(str(root / "tokenizer.json"))
    return tokens * dims * 4


def fetched(server: Nginx) -> tuple[int, int]:
    """GET requests and their body bytes (from nginx's log since the last clear)."""
    gets = [r for r in server.requests() if r.method == "GET"]
    return len(gets), sum(r.sent for r in gets)


def download(url: str, to: Path) -> None:
    with urllib.request.urlopen(url) as answer, open(to, "wb") as out:
        shutil.copyfileobj(answer, out, 1 << 20)


def timed(call: Callable[..., Any], *args: Any) -> float:
    t = time.perf_counter()
    call(*args)
    return time.perf_counter() - t


def download_all(server: Nginx, root: Path, name: str, local: Path) -> Path:
    """Every file of ``name`` (a file or a directory) downloaded whole into ``local``; the local path to load."""
    local.mkdir()
    target = root / name
    if not target.is_dir():
        download(server.url(name), local / name)
        return local / name
    for f in sorted(target.iterdir()):
        download(server.url(f"{name.rstrip('/')}/{f.name}"), local / f.name)
    return local


def run_case(server: Nginx, tmp: Path, name: str, call: Callable[[str], Any], reps: int) -> tuple[list[float], list[float], list[float]]:
    """``reps`` times: the call on the URL, then download + the call on the local copy (times), and the link's rate."""
    target = tmp / "www" / name
    size = sum(f.stat().st_size for f in target.rglob("*")) if target.is_dir() else target.stat().st_size
    remote, whole, link = [], [], []
    for _ in range(reps):
        server.clear()
        remote.append(timed(call, server.url(name)))
        local = tmp / "copy"
        t = time.perf_counter()
        path = download_all(server, tmp / "www", name, local)
        fetch = time.perf_counter() - t
        whole.append(fetch + timed(call, str(path)))
        link.append(size / fetch)
        shutil.rmtree(local)
    return remote, whole, link


def spread(xs: list[float]) -> str:
    return f"{statistics.median(xs):8.2f} s ({min(xs):.2f}-{max(xs):.2f})"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--small", action="store_true", help="about a twentieth of the issue's sizes")
    p.add_argument("--rate", type=float, default=50.0, help="the link's rate in MB/s (default 50)")
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--cases", default="fifu-known,fifu-unknown,gguf-table,safetensors-shards")
    p.add_argument("--keep", action="store_true")
    a = p.parse_args()
    cases = a.cases.split(",")
    tmp = Path(tempfile.mkdtemp(prefix="ff-bench-remote-"))
    root, work = tmp / "www", tmp / "nginx"
    root.mkdir()
    words, buckets_exp, dims = (50_000, 16, 300) if a.small else (1_000_000, 20, 300)
    bulk = (100 << 20) if a.small else (2_100 << 20)
    tokens = 32_000
    known = [word(i * 9973 % words) for i in range(10)]
    unknown = [f"unbekannt{i}wörter" for i in range(10)]
    try:
        t = time.perf_counter()
        if any(c.startswith("fifu") for c in cases):
            write_bucket_fifu(root / "bucket.fifu", words, buckets_exp, dims)
        table = 0
        if "gguf-table" in cases:
            table = write_gguf(root / "model.gguf", tokens, 512, bulk)
        tensor = 0
        if "safetensors-shards" in cases:
            tensor = write_shards(root / "sharded", tokens, 512, bulk)
        print(f"generated in {time.perf_counter() - t:.0f} s into {tmp}; link: {a.rate:g} MB/s; {a.reps} reps")

        def fifu(url: str, queries: list[str]) -> None:
            emb = finalfusion.load_finalfusion(url, mmap=True)
            for w in queries:
                emb.embedding(w)

        def load_fifu(url: str) -> None:
            finalfusion.load_finalfusion(url, mmap=True)

        # case: (file or directory, the timed call, the call's load alone (its bytes are not rows), the rows' bytes, target)
        Case = tuple[str, Callable[[str], None], Callable[[str], None] | None, int, str]
        runs: dict[str, Case] = {
            "fifu-known": ("bucket.fifu", lambda u: fifu(u, known), load_fifu, 0, "vocabulary + <= 1 MB of rows"),
            "fifu-unknown": ("bucket.fifu", lambda u: fifu(u, unknown), load_fifu, 0, "vocabulary + <= 1 MB of rows"),
            "gguf-table": ("model.gguf", lambda u: finalfusion.load_gguf(u, normalize=False), None, table, "table + <= 2 MB"),
            "safetensors-shards": ("sharded/", lambda u: finalfusion.load(u, normalize=False), None, tensor, "tensor + headers"),
        }
        link: list[float] = []
        with nginx(root, work) as server, throttled(server.port, a.rate * 1e6) as port:
            server.port = port  # every URL through the link; nginx still logs what it sent
            print(
                f"{'case':20} {'file':>10} {'fetched':>12} {'requests':>8} {'of it rows':>11} {'the rest':>10}  {'remote':>24} {'download + local':>24}  target"
            )
            for case in cases:
                name, call, load, payload, target = runs[case]
                target_path = root / name
                size = sum(f.stat().st_size for f in target_path.rglob("*")) if target_path.is_dir() else target_path.stat().st_size
                remote_s, download_s, rates = run_case(server, tmp, name, call, a.reps)
                link += rates
                server.clear()
                call(server.url(name))
                requests, body = fetched(server)
                if load is not None:  # the rows are what the lookups fetched beyond the load
                    server.clear()
                    load(server.url(name))
                    payload = body - fetched(server)[1]
                print(
                    f"{case:20} {size / 1e6:8.1f} MB {body / 1e6:9.2f} MB {requests:8d} {payload / 1e6:8.2f} MB {(body - payload) / 1e6:7.2f} MB"
                    f"  {spread(remote_s):>24} {spread(download_s):>24}  {target}"
                )
        print(f"the link's rate, measured by the downloads: {statistics.median(link) / 1e6:.0f} MB/s ({min(link) / 1e6:.0f}-{max(link) / 1e6:.0f})")
    finally:
        if a.keep:
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["--proxy"]:
        proxy(int(sys.argv[2]), float(sys.argv[3]))
    sys.exit(main())
