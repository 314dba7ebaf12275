"""Repository-wide pytest configuration: skip the doctests of optional modules whose extra is missing, and the fixture scripts."""

from __future__ import annotations

import importlib.util

# finalfusion.plot needs matplotlib (the `plot` extra); its doctests draw with the Agg backend.
collect_ignore = [] if importlib.util.find_spec("matplotlib") else ["src/finalfusion/plot.py"]
# finalfusion.ann's examples build hnswlib indexes (the `ann` extra).
if not importlib.util.find_spec("hnswlib"):
    collect_ignore += ["src/finalfusion/ann/__init__.py", "src/finalfusion/ann/_index.py", "src/finalfusion/ann/_persist.py"]

# load_sentencepiece's example looks a word up, which goes through sentencepiece (the `interop` extra).
if not importlib.util.find_spec("sentencepiece"):
    collect_ignore += ["src/finalfusion/compat/sentencepiece.py"]

# The scripts that made the committed fixtures need the libraries they drive (gguf, safetensors, h5py ...)
# and are run by hand, never collected (--doctest-modules would import them).
collect_ignore_glob = ["tests/data/*"]
