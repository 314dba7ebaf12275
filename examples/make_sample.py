"""Regenerate ``examples/sample.fifu``, the small file the README quickstart uses.

Run from the repository root: ``python examples/make_sample.py``. The output
is deterministic (fixed seed), so re-running it gives identical bytes.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

import finalfusion
from finalfusion.norms import Norms
from finalfusion.storage import NdArray
from finalfusion.subword import FinalfusionHashIndexer
from finalfusion.vocab import FinalfusionBucketVocab

WORDS = """the of and to in is was for on as with by he at from his an were are which
this also be or has had its first new one their after but who not they have her she two
been other when there all during into school time may years more most only over city some
world would where later up such used many can state about national out known university
united then made berlin paris london tübingen café straße naïve 東京 😀""".split()  # noqa: SIM905


def main() -> None:
    rng = np.random.default_rng(20261122)
    dims, exp = 16, 8
    vocab = FinalfusionBucketVocab(WORDS, FinalfusionHashIndexer(exp, 3, 6))
    matrix = rng.standard_normal((vocab.upper_bound, dims)).astype(np.float32)
    norms = np.linalg.norm(matrix[: len(WORDS)], axis=1).astype(np.float32)
    matrix[: len(WORDS)] /= norms[:, None]
    metadata = finalfusion.Metadata({"description": "finalfusion-py sample (random vectors)", "dims": dims, "buckets_exp": exp})
    emb = finalfusion.Embeddings(NdArray(matrix), vocab, Norms(norms), metadata)
    out = Path(__file__).with_name("sample.fifu")
    emb.write(out)
    print(f"wrote {out} ({out.stat().st_size} bytes): {emb!r}")


if __name__ == "__main__":
    main()
