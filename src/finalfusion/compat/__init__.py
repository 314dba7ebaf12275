"""Reading and writing foreign embedding formats (FORMAT.md §13).

One module per format: :mod:`~finalfusion.compat.word2vec`,
:mod:`~finalfusion.compat.text`, :mod:`~finalfusion.compat.fasttext`,
:mod:`~finalfusion.compat.floret`; shared helpers live in
:mod:`~finalfusion.compat._common`.
"""

from __future__ import annotations

from finalfusion.compat.fasttext import load_fasttext, write_fasttext
from finalfusion.compat.floret import load_floret, write_floret

__all__ = ["load_fasttext", "load_floret", "write_fasttext", "write_floret"]
