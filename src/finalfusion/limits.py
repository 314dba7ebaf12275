"""Resource bounds: the one place where the library's limits live.

Every reader checks the counts it finds in a file against these limits
*before* it allocates or loops, so that a tiny hostile file cannot make a
lookup allocate gigabytes or a parser recurse without bound.  A value beyond a
limit raises :class:`finalfusion.FormatError` (when read from a file) or
:class:`ValueError` (when passed to a constructor) naming the limit.

The limits are module-level constants, read at call time: a program that
really has larger inputs raises them once, before it loads anything::

    import finalfusion.limits
    finalfusion.limits.MAX_DIMS = 1 << 22

Examples
--------
>>> import finalfusion.limits as limits
>>> limits.MAX_DIMS
1048576
"""

from __future__ import annotations

__all__ = [
    "MAX_DIMS",
]

#: Largest number of dimensions (columns) an embedding matrix may have.
#: The largest published embeddings have a few thousand dimensions; 2**20
#: leaves ample room while keeping one row at 4 MiB, so a file that claims
#: 2**32 - 1 columns is refused at load instead of allocating 16 GiB on the
#: first lookup.
MAX_DIMS: int = 1 << 20
