"""Embed a corpus and query neighbours on a Dask cluster through one memory-mapped file.

Run from the repository root (starts a local cluster of two worker processes)::

    python examples/scale_dask.py [embeddings.fifu]

``tests/test_scale_dask.py`` runs every function of this file on a real
``LocalCluster`` and compares the results with serial calls;
``docs/scaling.md`` shows the sections between the ``--8<--`` markers verbatim
(a test checks that they match). Needs ``pip install 'finalfusion-py[scale]'``.

The embeddings are loaded with ``mmap=True`` and scattered once: each worker
receives a ~200-byte reference, maps the file and reads the vocabulary once;
all workers on a machine share one copy of the matrix in the page cache.
Functions that run on the workers come from :mod:`finalfusion.scale`, which
the workers can import.
"""

from __future__ import annotations

import sys
from typing import Any

import finalfusion


# --8<-- [start:cluster]
def start_cluster() -> tuple[Any, Any]:
    """A local cluster of two single-threaded worker processes and its client."""
    import dask
    from dask.distributed import Client, LocalCluster

    # The active memory manager would drop the broadcast copies of the embeddings that no queued task needs.
    with dask.config.set({"distributed.scheduler.active-memory-manager.start": False}):
        cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None)
    client = Client(cluster)
    client.wait_for_workers(2)  # a broadcast scatter reaches only the workers already registered
    return cluster, client


# --8<-- [end:cluster]


# --8<-- [start:share]
def share(client: Any, emb: finalfusion.Embeddings) -> Any:
    """Send the embeddings to every worker once; pass the returned future to tasks."""
    from finalfusion.scale import shared

    # mmap=True: a ~200-byte reference each; shared(): a replaced file fails the task that uses it, never Dask's transfer
    return client.scatter(shared(emb), broadcast=True)


# --8<-- [end:share]


# --8<-- [start:bag]
def embed_bag(remote: Any, documents: list[list[str]], npartitions: int = 4) -> list[Any]:
    """One ``(len(document), dims)`` matrix per document of a Dask bag of token lists."""
    import dask.bag as db

    from finalfusion.scale import embed_partition

    bag = db.from_sequence(documents, npartitions=npartitions)
    return bag.map_partitions(embed_partition, remote).compute()


# --8<-- [end:bag]


# --8<-- [start:dataframe]
def embed_column(remote: Any, frame: Any, npartitions: int = 4, pooling: str | None = None) -> Any:
    """Embed the ``tokens`` column (lists of words) of a pandas DataFrame as a Dask DataFrame.

    Returns a pandas Series (same index) of matrices, or of document vectors
    with ``pooling="mean"`` / ``"sum"``.
    """
    import dask.dataframe as dd
    import pandas as pd
    import pyarrow as pa

    from finalfusion.scale import embed_partition

    # An Arrow list type: Dask would turn an object column of lists into strings.
    frame = frame.astype({"tokens": pd.ArrowDtype(pa.list_(pa.string()))})
    ddf = dd.from_pandas(frame, npartitions=npartitions)
    vectors = ddf["tokens"].map_partitions(embed_partition, remote, pooling=pooling, meta=("tokens", "object"))
    return vectors.compute()


# --8<-- [end:dataframe]


# --8<-- [start:neighbours]
def neighbours(remote: Any, words: list[str], k: int = 10, npartitions: int = 4) -> list[Any]:
    """``(word, [(neighbour, cosine), ...])`` for every word; one batched query per partition."""
    import dask.bag as db

    from finalfusion.scale import neighbours_partition

    bag = db.from_sequence(words, npartitions=npartitions)
    return bag.map_partitions(neighbours_partition, remote, k=k).compute()


# --8<-- [end:neighbours]


def main(path: str = "examples/sample.fifu", client: Any = None) -> None:
    """Embed two small documents (a known and an unknown word) and query neighbours."""
    emb = finalfusion.load_finalfusion(path, mmap=True)
    cluster = None
    if client is None:
        cluster, client = start_cluster()
    try:
        remote = share(client, emb)
        documents = [["berlin", "is", "a", "city"], ["berliner", "café"]]
        for doc, matrix in zip(documents, embed_bag(remote, documents), strict=True):
            print(" ".join(doc), "->", matrix.shape)
        for word, best in neighbours(remote, ["berlin", "paris"], k=3):
            print(word, "->", ", ".join(f"{n} {s:.2f}" for n, s in best))
    finally:
        if cluster is not None:
            client.close()
            cluster.close()


if __name__ == "__main__":
    main(*sys.argv[1:2])
