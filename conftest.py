"""Repository-wide pytest configuration: skip the doctests of optional modules whose extra is missing."""

from __future__ import annotations

import importlib.util

# finalfusion.plot needs matplotlib (the `docs` extra); its doctests draw with the Agg backend.
collect_ignore = [] if importlib.util.find_spec("matplotlib") else ["src/finalfusion/plot.py"]
