"""Look up words in worker processes that share one memory-mapped file (the README's process-pool example).

Run from the repository root::

    python examples/process_pool.py [embeddings.fifu [start-method]]

(start method ``spawn``, ``fork`` or ``forkserver``; default: the platform's).

Works under every multiprocessing start method, ``spawn`` included (the
default on macOS and Windows): the worker function lives at module level so
workers can import it, and the pool is created under the ``__main__`` guard.
The embeddings are loaded with ``mmap=True`` from a path, so each task
pickles them as a ~200-byte reference to the file and the workers share
one copy in the page cache.
"""

from __future__ import annotations

import concurrent.futures
import multiprocessing
import sys
from pathlib import Path

import numpy as np

import finalfusion

SAMPLE = Path(__file__).resolve().parent / "sample.fifu"


def vectors(emb: finalfusion.Embeddings, words: list[str]) -> np.ndarray:
    """Embeddings of ``words`` (module level, so spawned workers can import it)."""
    return emb.embedding_batch(words)[0]


def main(path: str | Path = SAMPLE, workers: int = 2, context: str | None = None) -> list[np.ndarray]:
    """One matrix per batch of words, computed in ``workers`` processes."""
    emb = finalfusion.load_finalfusion(path, mmap=True)
    words = emb.vocab.words
    batches = [[*words[i : i + 16], "berliner", "Donaudampfschiff"] for i in range(0, len(words), 16)]
    ctx = multiprocessing.get_context(context)
    with concurrent.futures.ProcessPoolExecutor(workers, mp_context=ctx) as pool:
        return list(pool.map(vectors, [emb] * len(batches), batches))


if __name__ == "__main__":
    matrices = main(sys.argv[1] if len(sys.argv) > 1 else SAMPLE, context=sys.argv[2] if len(sys.argv) > 2 else None)
    print(f"{len(matrices)} batches, {sum(len(m) for m in matrices)} vectors, checksum {float(np.concatenate(matrices).sum(dtype=np.float64))!r}")
