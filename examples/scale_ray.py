"""Embed a corpus as a Ray Dataset and query neighbours with Ray tasks, through one memory-mapped file.

Run from the repository root (starts a local Ray runtime with two CPUs)::

    python examples/scale_ray.py [embeddings.fifu]

``tests/test_scale_ray.py`` runs every function of this file on a real local
Ray runtime and compares the results with serial calls; ``docs/scaling.md``
shows the sections between the ``--8<--`` markers verbatim (a test checks that
they match). Needs ``pip install 'finalfusion-py[scale]'``.

Embeddings loaded with ``mmap=True`` pickle as a ~200-byte reference to their
file: that is what ``ray.put`` stores and what every task or actor receives.
Functions and classes that run on the workers come from
:mod:`finalfusion.scale`, which the workers can import.
"""

from __future__ import annotations

import sys
from typing import Any

import finalfusion


# --8<-- [start:init]
def start_ray() -> None:
    """A local Ray runtime with two CPUs and no dashboard."""
    import ray

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)


# --8<-- [end:init]


# --8<-- [start:dataset]
def embed_dataset(emb: finalfusion.Embeddings, documents: list[list[str]], pooling: str | None = None) -> list[Any]:
    """One matrix (or, with ``pooling``, one vector) per document, embedded as a Ray Dataset.

    Two actors each unpickle the ~200-byte reference once, map the file and
    read the vocabulary once, then embed batch after batch.
    """
    import ray.data

    from finalfusion.scale import EmbedBatches

    ds = ray.data.from_items([{"id": i, "tokens": doc} for i, doc in enumerate(documents)])
    out = ds.map_batches(
        EmbedBatches,
        fn_constructor_args=(emb,),
        fn_constructor_kwargs={"pooling": pooling},
        batch_format="numpy",
        compute=ray.data.ActorPoolStrategy(size=2),
    )
    rows = sorted(out.take_all(), key=lambda row: row["id"])
    return [row["vectors"] for row in rows]


# --8<-- [end:dataset]


# --8<-- [start:neighbours]
def neighbours(emb: finalfusion.Embeddings, words: list[str], k: int = 10, tasks: int = 4) -> list[Any]:
    """``(word, [(neighbour, cosine), ...])`` for every word; one batched query per task."""
    import ray

    from finalfusion.scale import neighbours_partition

    emb_ref = ray.put(emb)  # mmap=True: a ~200-byte object
    query = ray.remote(neighbours_partition)
    step = -(-len(words) // tasks)
    parts = [words[i : i + step] for i in range(0, len(words), step)]
    return [row for part in ray.get([query.remote(p, emb_ref, k) for p in parts]) for row in part]


# --8<-- [end:neighbours]


def main(path: str = "examples/sample.fifu") -> None:
    """Embed two small documents (a known and an unknown word) and query neighbours."""
    import ray

    emb = finalfusion.load_finalfusion(path, mmap=True)
    started = not ray.is_initialized()
    if started:
        start_ray()
    try:
        documents = [["berlin", "is", "a", "city"], ["berliner", "café"]]
        for doc, matrix in zip(documents, embed_dataset(emb, documents), strict=True):
            print(" ".join(doc), "->", matrix.shape)
        for word, best in neighbours(emb, ["berlin", "paris"], k=3):
            print(word, "->", ", ".join(f"{n} {s:.2f}" for n, s in best))
    finally:
        if started:
            ray.shutdown()


if __name__ == "__main__":
    main(*sys.argv[1:2])
