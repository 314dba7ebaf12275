"""``python -m finalfusion``: the ``finalfusion`` command line (see :mod:`finalfusion.cli`)."""

from __future__ import annotations

import sys

from finalfusion.cli import main

if __name__ == "__main__":
    sys.exit(main())
