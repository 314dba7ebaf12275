"""A cache bounded by the bytes it holds, not by its number of entries.

The n-gram caches (a word's subword indices, the hashing layout of a word
length) hold arrays whose size grows with the word: an entry-count bound
lets ten lookups of 100 KB words keep ~600 MB alive. :class:`ByteCache`
accounts the ``nbytes`` of every stored value and evicts the oldest entries
once :data:`finalfusion.limits.MAX_CACHE_BYTES` (read at every insertion) is
exceeded; a value larger than an eighth of the budget is not stored at all.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable
from typing import Generic, TypeVar

from finalfusion import limits

__all__ = ["ByteCache"]

_V = TypeVar("_V")

#: Accounted per entry on top of the value's own bytes (dict slot, key, tuple).
ENTRY_OVERHEAD = 200


class ByteCache(Generic[_V]):
    """A thread-safe first-in first-out cache holding at most ``MAX_CACHE_BYTES``.

    Lookups take no lock (a ``dict.get`` is atomic); insertions and
    evictions do. Eviction is oldest-first, which keeps lookups as cheap as
    a dictionary probe.

    Examples
    --------
    >>> import numpy as np
    >>> cache: ByteCache[np.ndarray] = ByteCache()
    >>> cache.put("a", np.zeros(10), 80)
    >>> cache.get("a").shape, cache.get("b"), cache.nbytes
    ((10,), None, 280)
    >>> cache.put("big", np.zeros(1), limits.MAX_CACHE_BYTES)  # over an eighth of the budget: not kept
    >>> cache.get("big") is None, len(cache)
    (True, 1)
    """

    def __init__(self) -> None:
        # An OrderedDict, not a dict: dropping a dict's oldest key leaves a dead slot that every later
        # ``next(iter(d))`` steps over until the next resize -- once full, each insertion scanned thousands
        # of them (5-50 us per put, worse over time); ``popitem(last=False)`` unlinks the oldest in O(1).
        self._data: OrderedDict[Hashable, tuple[_V, int]] = OrderedDict()
        self._nbytes = 0
        self._lock = threading.Lock()

    def get(self, key: Hashable) -> _V | None:
        """The value stored for ``key``, or ``None``."""
        hit = self._data.get(key)
        return None if hit is None else hit[0]

    def put(self, key: Hashable, value: _V, nbytes: int) -> None:
        """Store ``value`` (accounted as ``nbytes`` plus a fixed overhead), evicting the oldest entries past the budget."""
        budget = limits.MAX_CACHE_BYTES
        size = nbytes + ENTRY_OVERHEAD
        if size > budget >> 3:
            return
        data = self._data
        with self._lock:
            if key in data:
                return
            data[key] = (value, size)
            total = self._nbytes + size
            while total > budget and data:
                total -= data.popitem(last=False)[1][1]  # the oldest entry
            self._nbytes = total

    def clear(self) -> None:
        """Drop every entry."""
        with self._lock:
            self._data.clear()
            self._nbytes = 0

    @property
    def nbytes(self) -> int:
        """Bytes accounted for the stored entries."""
        return self._nbytes

    def __len__(self) -> int:
        return len(self._data)
