"""Draw the pictures of the documentation (docs/img/*.png) with finalfusion.plot and the tutorial embeddings.

    python docs/make_images.py [output directory]

The test suite runs :func:`make` into a temporary directory (tests/test_plot.py),
so the pictures the site shows are the ones the plotting helpers draw today.
"""

from __future__ import annotations

import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt

import finalfusion
import finalfusion.plot

ROOT = Path(__file__).resolve().parent.parent
EMBEDDINGS = ROOT / "examples" / "tutorial.fifu"

#: Word groups of the projection: the tutorial notebook uses the same ones.
GROUPS = {
    "time": ["day", "night", "morning", "evening", "year", "month"],
    "kin": ["father", "mother", "son", "daughter", "brother", "sister"],
    "metals": ["gold", "silver", "brass", "iron", "copper"],
    "places": ["egypt", "babylon", "assyria", "jerusalem", "damascus"],
}
HEATMAP = ["king", "prince", "servant", "father", "son", "gold", "silver", "sheep", "oxen", "bread", "wine"]


def make(out: Path) -> list[Path]:
    """Draw every picture into ``out``; return the paths written."""
    out.mkdir(parents=True, exist_ok=True)
    emb = finalfusion.load_finalfusion(EMBEDDINGS)
    drawings = {
        "projection.png": lambda: finalfusion.plot.projection(emb, GROUPS),
        "similarity.png": lambda: finalfusion.plot.similarity_matrix(emb, HEATMAP),
        "norms.png": lambda: finalfusion.plot.norms(emb),
    }
    written = []
    for name, draw in drawings.items():
        ax = draw()
        path = out / name
        ax.figure.savefig(path, dpi=80, metadata={"Software": None})
        plt.close(ax.figure)
        written.append(path)
    return written


if __name__ == "__main__":
    for path in make(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parent / "img"):
        print(path, path.stat().st_size, "bytes")
