"""Type aliases shared by the public loaders."""

from __future__ import annotations

import os
from typing import IO, Any, Union

#: What the loaders accept: a path, a file descriptor, the file's bytes, or a binary file object.
Source = Union[str, "os.PathLike[Any]", bytes, bytearray, memoryview, int, IO[bytes]]
