"""A compact word -> index table over a vocabulary's word list.

A ``dict[str, int]`` over 400,000 words costs about 20 MiB for the table
plus an ``int`` object for every index above 256 (another 12 MiB), on top
of the words themselves. :class:`WordIndex` keeps only the word list
(which the vocabulary holds anyway) and one C-integer array: an
open-addressing hash table of about ``2 n`` slots, each holding the index
of a word or ``-1``.

Layout: a word's home slot is ``hash(word) >> (64 - bits)``, the top
``bits`` bits of its signed 64-bit Python hash, in ``-2**(bits-1) ..
2**(bits-1) - 1``. It sits in the first free slot at or after its home in
that order, *without wrapping around*: the table holds homes ``0 ..`` first,
then a few overflow slots and a ``-1`` sentinel, then homes ``.. -1`` at the
end, where negative indices reach them (and a probe from ``-1`` goes on at
``0``). There is therefore never an empty slot between a word's home and
its slot, so a lookup probes from the home slot until it finds the word or
``-1`` -- and the home slot costs one shift. Because positions only move
forward, the whole table is built with numpy: sort the hashes, and the
slot of the ``k``-th key in hash order is ``max(home[k], slot[k - 1] + 1)``
-- a running maximum.

Python's ``str`` hash is randomised per process, so the table is never
pickled: unpickling rebuilds it from the words.
"""

from __future__ import annotations

import array
import operator
from collections.abc import ItemsView, Iterator, Mapping, Sequence, ValuesView
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = ["WordIndex"]


def _bits_for(n: int) -> int:
    """Home-slot bits: at least ``2 n`` home slots (load factor <= 0.5)."""
    return max(1, (2 * n - 1).bit_length())


class WordIndex(Mapping[str, int]):
    """Read-only mapping of each word to its position in ``words``.

    Behaves like the ``dict`` finalfusion-python 0.7 returned for
    ``vocab.word_index`` (``get``, ``[]``, ``in``, ``len``, iteration in
    index order, ``keys``/``values``/``items``, equality with dicts) in a
    fraction of its memory. It keeps a reference to ``words``, which must
    not be modified afterwards.

    Parameters
    ----------
    words
        Unique strings; word ``i`` maps to ``i``.
    bits
        Number of home-slot bits (default: enough for ``2 * len(words)``
        home slots). Only tests set it, to force collisions.

    Raises
    ------
    ValueError
        If a word occurs twice (the message names the first repetition).
    TypeError
        If a word is not hashable.

    Examples
    --------
    >>> index = WordIndex(["Berlin", "Potsdam"])
    >>> index["Potsdam"], index.get("Hamburg"), "Berlin" in index, len(index)
    (1, None, True, 2)
    >>> index == {"Berlin": 0, "Potsdam": 1}
    True
    >>> index.lookup(["Potsdam", "Hamburg"]).tolist()
    [1, -1]
    """

    __slots__ = ("_fingerprints", "_shift", "_table", "_words")

    _words: list[str]
    _table: array.array[int]
    _shift: int
    #: The low 32 bits of every word's hash, so batch probes compare strings only on a likely match.
    _fingerprints: npt.NDArray[np.uint32]

    def __init__(self, words: list[str], *, bits: int | None = None) -> None:
        n = len(words)
        bits = _bits_for(n) if bits is None else bits
        if not 1 <= bits <= 32:
            raise ValueError(f"bits must be in 1..32, got {bits}")
        shift = 64 - bits
        half = 1 << (bits - 1)
        # One int64 per word, sorted in place: the hash's top 64 - k bits, and
        # the word's index in the low k bits. Sorting these sorts by home slot
        # (the top bits); equal words (equal hashes) end up adjacent, in index
        # order. Few, small temporaries: they would stay in the C heap.
        k = max(1, (n - 1).bit_length())  # <= 32: the home bits and the index bits never overlap
        # Allocated first and filled without temporaries: a permanent array allocated
        # after freed temporaries keeps them in the C heap (+8 MiB peak RSS at 400k words).
        fingerprints = np.empty(n, dtype=np.uint32)
        keys = np.fromiter(map(hash, words), dtype=np.int64, count=n)
        _low_bits(keys, fingerprints)
        keys &= np.int64(-(1 << k))
        keys |= np.arange(n, dtype=np.int64)
        keys.sort()
        if n > 1:
            _check_unique(words, keys, k)
        itype = np.dtype("i4") if n < 2**30 and bits <= 30 else np.dtype("i8")
        order = (keys & np.int64((1 << k) - 1)).astype(itype)
        keys >>= np.int64(shift)
        slots = keys.astype(itype)
        del keys
        ramp = np.arange(n, dtype=itype)
        np.subtract(slots, ramp, out=slots)
        np.maximum.accumulate(slots, out=slots)
        np.add(slots, ramp, out=slots)
        del ramp
        overflow = max(0, int(slots[-1]) - (half - 1)) if n else 0
        # Homes 0 .. half - 1, the overflow slots, a -1 sentinel, then homes -half .. -1
        # (Python and numpy index those from the end, and a probe from -1 goes on at 0).
        table = array.array("i" if n < 2**31 else "q", [-1]) * (2 * half + overflow + 1)
        view = np.frombuffer(table, dtype=np.dtype(f"i{table.itemsize}"))
        view[slots] = order
        del view, slots, order
        self._words = words
        self._table = table
        self._shift = shift
        self._fingerprints = fingerprints

    # -- lookups --------------------------------------------------------------------------
    def get(self, key: Any, default: Any = None) -> Any:
        """The index of ``key``, or ``default`` if it is not a word.

        Examples
        --------
        >>> from finalfusion import SimpleVocab
        >>> index = SimpleVocab(["a", "b"]).word_index
        >>> index.get("b"), index.get("zz"), index.get("zz", -1)
        (1, None, -1)
        """
        i = hash(key) >> self._shift
        table = self._table
        words = self._words
        j = table[i]
        while j >= 0:
            if words[j] == key:
                return j
            i += 1
            j = table[i]
        return default

    def __getitem__(self, key: Any) -> int:
        i: int = self.get(key, -1)
        if i < 0:
            raise KeyError(key)
        return i

    def __contains__(self, key: object) -> bool:
        return self.get(key, -1) >= 0  # type: ignore[no-any-return]

    def lookup(self, keys: Sequence[Any]) -> npt.NDArray[np.int64]:
        """Indices of many keys at once, ``-1`` for those that are not words.

        The keys are hashed in one pass and probed with numpy; only the
        words found in a probed slot are compared with their key.

        Raises
        ------
        TypeError
            If a key is not hashable.

        Examples
        --------
        >>> WordIndex(["a", "b"]).lookup(["b", "zz", "a"]).tolist()
        [1, -1, 0]
        """
        if not isinstance(keys, (list, tuple)):
            keys = list(keys)
        n = len(keys)
        out = np.full(n, -1, dtype=np.int64)
        if n == 0:
            return out
        hashes = np.fromiter(map(hash, keys), dtype=np.int64, count=n)
        asked_fp = _low_bits(hashes, np.empty(n, dtype=np.uint32))
        slot = hashes >> np.int64(self._shift)
        del hashes
        table = np.frombuffer(self._table, dtype=np.dtype(f"i{self._table.itemsize}"))
        words, fingerprints = self._words, self._fingerprints
        pending = np.arange(n, dtype=np.intp)  # the keys still probing, and their slots and fingerprints
        while True:
            cand = table[slot]
            live = cand >= 0
            if not live.all():
                keep = np.flatnonzero(live)
                pending, slot, cand, asked_fp = pending[keep], slot[keep], cand[keep], asked_fp[keep]
            if len(cand) == 0:
                return out
            # Strings are compared only where the fingerprints agree (almost always a hit).
            likely = np.flatnonzero(fingerprints[cand] == asked_fp)
            if len(likely):
                equal = map(operator.eq, _gather(words, cand[likely]), _gather(keys, pending[likely]))
                hit = likely[np.fromiter(equal, dtype=bool, count=len(likely))]
                out[pending[hit]] = cand[hit]
                miss = np.ones(len(cand), dtype=bool)
                miss[hit] = False
                pending, slot, asked_fp = pending[miss], slot[miss], asked_fp[miss]
            slot += 1

    # -- the rest of the Mapping protocol ------------------------------------------------
    def __len__(self) -> int:
        return len(self._words)

    def __iter__(self) -> Iterator[str]:
        return iter(self._words)

    def items(self) -> ItemsView[str, int]:
        """``(word, index)`` pairs in index order.

        Examples
        --------
        >>> from finalfusion import SimpleVocab
        >>> list(SimpleVocab(["a", "b"]).word_index.items())
        [('a', 0), ('b', 1)]
        """
        return _Items(self)

    def values(self) -> ValuesView[int]:
        """The indices, ``0 .. len - 1``.

        Examples
        --------
        >>> from finalfusion import SimpleVocab
        >>> list(SimpleVocab(["a", "b"]).word_index.values())
        [0, 1]
        """
        return _Values(self)

    @property
    def words(self) -> list[str]:
        """The words, in index order.

        Examples
        --------
        >>> from finalfusion import SimpleVocab
        >>> SimpleVocab(["b", "a"]).word_index.words
        ['b', 'a']
        """
        return self._words

    def __eq__(self, other: object) -> bool:
        if isinstance(other, WordIndex):
            return self._words == other._words
        if not isinstance(other, Mapping):
            return NotImplemented
        if len(other) != len(self._words):
            return False
        # Same size and unique keys on both sides: equal when each of other's items is one of ours.
        get = self.get
        try:
            return all(get(k, -1) == v for k, v in other.items())
        except TypeError:
            return False

    __hash__ = None  # type: ignore[assignment]

    def __reduce__(self) -> tuple[Any, ...]:
        # The hash-dependent table stays out of the pickle; the words are
        # usually pickled anyway (shared with the vocabulary through the memo).
        return (_rebuild, (self._words,))

    def __repr__(self) -> str:
        shown = ", ".join(f"{w!r}: {i}" for i, w in enumerate(self._words[:3]))
        more = ", ..." if len(self._words) > 3 else ""
        return f"WordIndex({{{shown}{more}}} ({len(self._words)} words))"

    def nbytes(self) -> int:
        """Bytes of the hash table (the words are the vocabulary's).

        Examples
        --------
        >>> 2048 * 4 < WordIndex([f"w{i}" for i in range(1000)]).nbytes() < 2100 * 4  # 2048 home slots, a few overflow slots
        True
        """
        return len(self._table) * self._table.itemsize


def _rebuild(words: list[str]) -> WordIndex:
    return WordIndex(words)


def _check_unique(words: Sequence[str], keys: npt.NDArray[np.int64], k: int) -> None:
    """Raise ``ValueError`` naming the first word (in index order) that repeats an earlier one.

    ``keys`` are the sorted ``hash bits | index`` keys built by :class:`WordIndex`:
    equal words sit in one run of equal hash bits, in index order, so only
    such runs are compared.
    """
    top = keys >> np.int64(k)
    same = top[1:] == top[:-1]
    del top
    if not same.any():
        return
    mask = (1 << k) - 1
    first_dup: int | None = None
    at = np.flatnonzero(same).tolist()
    for i, s in enumerate(at):
        if i and at[i - 1] == s - 1:
            continue  # inside a run already checked
        e = s + 1
        while e < len(same) and same[e]:
            e += 1
        seen: set[str] = set()
        for key in keys[s : e + 1].tolist():  # ascending indices within the run
            w = words[key & mask]
            if w in seen:
                j = key & mask
                first_dup = j if first_dup is None else min(first_dup, j)
                break
            seen.add(w)
    if first_dup is not None:
        raise ValueError(f"duplicate word in vocabulary: {words[first_dup]!r}")


def _low_bits(hashes: npt.NDArray[np.int64], out: npt.NDArray[np.uint32]) -> npt.NDArray[np.uint32]:
    """The low 32 bits of each hash (disjoint from the home-slot bits at the top), into ``out``."""
    np.copyto(out, hashes, casting="unsafe")  # integer narrowing keeps the low bits
    return out


def _gather(seq: Sequence[Any], idx: npt.NDArray[Any]) -> Sequence[Any]:
    """``seq[i]`` for every ``i`` in ``idx``, as a tuple built in C."""
    if len(idx) == 1:
        return (seq[int(idx[0])],)
    return operator.itemgetter(*idx.tolist())(seq)  # type: ignore[no-any-return]


class _Items(ItemsView[str, int]):
    _mapping: WordIndex

    def __iter__(self) -> Iterator[tuple[str, int]]:
        words = self._mapping.words
        return zip(words, range(len(words)), strict=True)


class _Values(ValuesView[int]):
    _mapping: WordIndex

    def __iter__(self) -> Iterator[int]:
        return iter(range(len(self._mapping)))

    def __contains__(self, value: object) -> bool:
        return isinstance(value, int) and 0 <= value < len(self._mapping)
