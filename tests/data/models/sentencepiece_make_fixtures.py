"""Regenerate the small SentencePiece golden files (run from this directory; needs sentencepiece).

``sentencepiece_bpemb.model`` is a 50-piece BPE model trained here (identity normaliser: the default
NFKC map alone is 237 KB); ``sentencepiece_bpemb.vec``
holds one vector per piece in word2vec text format, keyed by piece and in *reverse* piece order
(as a keyed file need not follow piece ids), the way BPEmb ships its vectors.
``sentencepiece_expected.json`` has the rows by piece id and the vectors of a few unknown words:
the l2-normalised sums of the rows of the ids sentencepiece returns (control/unknown pieces dropped).

    python sentencepiece_make_fixtures.py
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import sentencepiece as spm

HERE = Path(__file__).resolve().parent
CORPUS = ["the quick brown fox jumps over the lazy dog", "Москва большой город", "jumping foxes and lazy dogs"] * 30
WORDS = ["foxes", "quickly", "Москвы", "zebra"]


def main() -> None:
    buf = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(CORPUS), model_writer=buf, model_type="bpe", vocab_size=50, minloglevel=2, num_threads=1, normalization_rule_name="identity"
    )
    (HERE / "sentencepiece_bpemb.model").write_bytes(buf.getvalue())
    sp = spm.SentencePieceProcessor(model_proto=buf.getvalue())
    n = sp.GetPieceSize()
    rows = np.random.default_rng(7).integers(-8, 9, size=(n, 3)).astype(np.float32) / 4  # exact in decimal
    lines = [f"{n} 3"] + [f"{sp.IdToPiece(i)} " + " ".join(repr(float(x)) for x in rows[i]) for i in reversed(range(n))]
    (HERE / "sentencepiece_bpemb.vec").write_text("\n".join(lines) + "\n", encoding="utf-8")
    skip = {i for i in range(n) if sp.IsControl(i) or sp.IsUnknown(i) or sp.IsUnused(i)}
    unknown = {}
    for word in WORDS:
        kept = [i for i in sp.encode(word) if i not in skip]
        v = rows[kept].astype(np.float64).sum(axis=0)
        unknown[word] = {"ids": sp.encode(word), "vector": (v / np.linalg.norm(v)).astype(np.float32).tolist()}
    expected = {"pieces": [sp.IdToPiece(i) for i in range(n)], "rows": rows.tolist(), "unknown": unknown}
    (HERE / "sentencepiece_expected.json").write_text(json.dumps(expected, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
