"""The indexers' common base (:class:`SubwordIndexer`): the n-gram range, per-word caching, bounds on work per word, and
finalfusion-python 0.7's API; the indexers themselves are in :mod:`finalfusion.subword.indexers`."""

from __future__ import annotations

import sys
from collections.abc import Hashable, Iterator, Sequence
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from finalfusion.subword._cache import ByteCache
from finalfusion.subword.ngrams import BOW, EOW, check_ngram_count, check_ngram_range, check_word_type, ngram_blocks, ngrams

__all__ = ["BLOCK_CELLS", "BLOCK_NGRAMS", "SHORT_NGRAMS", "IntArray", "SubwordIndexer"]

#: Words whose n-gram count exceeds this are hashed in blocks (and batches yield them one by one).
BLOCK_NGRAMS: Final = 1 << 16
#: Words with at most this many n-grams (bounded by length x number of lengths) are never counted or blocked.
SHORT_NGRAMS: Final = 256
#: Hashing work of one block of a long word: n-grams times ``max_n``.
BLOCK_CELLS: Final = 1 << 17

IntArray = npt.NDArray[np.int64]


class SubwordIndexer:
    """Common behaviour of the indexers: n-gram range, caching, the 0.7 API.

    Subclasses implement ``_ngram_indices(items) -> list[int | None]`` for a
    list of n-grams and may override ``batch_groups`` with a vectorised
    version.

    Examples
    --------
    >>> from finalfusion.subword import FastTextIndexer
    >>> indexer = FastTextIndexer(100, 3, 3)
    >>> isinstance(indexer, SubwordIndexer), indexer.subword_indices("ab")
    (True, [8, 56])
    """

    #: Indices produced per hashed item (floret produces several).
    _per_item: int = 1

    def __init__(self, min_n: int, max_n: int) -> None:
        check_ngram_range(min_n, max_n)
        self._min_n = min_n
        self._max_n = max_n
        self._words: ByteCache[IntArray] = ByteCache()

    # -- pickling: the cache is rebuilt, not pickled ---------------------------------
    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        del state["_words"]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._words = ByteCache()

    @property
    def min_n(self) -> int:
        """Shortest n-gram length.

        Examples
        --------
        >>> from finalfusion.subword import FinalfusionHashIndexer
        >>> FinalfusionHashIndexer(10, 2, 5).min_n
        2
        """
        return self._min_n

    @property
    def max_n(self) -> int:
        """Longest n-gram length.

        Examples
        --------
        >>> from finalfusion.subword import FinalfusionHashIndexer
        >>> FinalfusionHashIndexer(10, 2, 5).max_n
        5
        """
        return self._max_n

    @property
    def upper_bound(self) -> int:
        """Exclusive upper bound of the indices this indexer produces.

        Examples
        --------
        >>> from finalfusion.subword import ExplicitIndexer, FastTextIndexer, FinalfusionHashIndexer
        >>> FinalfusionHashIndexer(10).upper_bound, FastTextIndexer(100).upper_bound, ExplicitIndexer(["<a", "a>"], 2, 2).upper_bound
        (1024, 100, 2)
        """
        raise NotImplementedError

    def _bracket(self, word: str) -> str:
        return f"{BOW}{word}{EOW}"

    def _items(self, word: str, bracket: bool) -> list[str]:
        """The strings that are looked up for ``word``."""
        s = self._bracket(word) if bracket else word
        return ngrams(s, self._min_n, self._max_n, bracket=False)

    #: Most n-grams a word may have to be hashed one n-gram at a time (with the scalar hash); longer words are hashed in
    #: numpy blocks. Only floret lowers it: its scalar MurmurHash3 costs ~10 us per n-gram.
    _scalar_ngrams: int = 1 << 62

    def _ngram_indices(self, items: list[str]) -> list[int | None]:
        raise NotImplementedError

    def _check_count(self, bracketed: str) -> int:
        """Number of n-grams of the bracketed word, checked against ``MAX_NGRAMS_PER_WORD`` (LimitExceeded)."""
        return check_ngram_count(len(bracketed), self._min_n, self._max_n)

    def _rows(self, word: str, offset: int) -> IntArray:
        """The indices of the bracketed ``word``'s n-grams plus ``offset``, as a new array (read-only when hashed in lanes)."""
        out = self._indices(word)
        if offset:
            out += offset
        return out

    def _indices(self, word: str) -> IntArray:
        """A fresh array of the indices of the bracketed ``word``'s n-grams (writable unless hashed in lanes: short words)."""
        s = self._bracket(word)
        if self._check_count(s) <= min(BLOCK_NGRAMS, self._scalar_ngrams):
            return np.array([i for i in self._ngram_indices(self._items(word, True)) if i is not None], dtype=np.int64)
        return np.concatenate([self._long_indices(s), *(self._block_indices(part, keep) for part, keep in self._blocks(s))])

    def _blocks(self, bracketed: str) -> Iterator[tuple[str, int]]:
        return ngram_blocks(bracketed, self._min_n, self._max_n, BLOCK_CELLS)

    def _long_indices(self, bracketed: str) -> IntArray:
        """Indices of the items a long word has besides its n-grams (floret: the word itself)."""
        return np.empty(0, dtype=np.int64)

    def _block_indices(self, part: str, keep: int) -> IntArray:
        """Indices of the first ``keep`` n-grams of ``part`` (one block of a long word)."""
        idx = self._ngram_indices(ngrams(part, self._min_n, self._max_n, bracket=False)[:keep])
        return np.array([i for i in idx if i is not None], dtype=np.int64)

    def word_indices(self, word: str) -> IntArray:
        """Indices of the bracketed ``word``'s n-grams as a read-only array (cached).

        Examples
        --------
        >>> from finalfusion.subword import FinalfusionHashIndexer
        >>> indices = FinalfusionHashIndexer(10, 3, 6).word_indices("ab")  # <ab>, <ab, ab>
        >>> indices.tolist(), indices.flags.writeable
        ([208, 57, 523], False)
        """
        return self.word_rows(word)

    def word_rows(self, word: str, offset: int = 0) -> IntArray:
        """:meth:`word_indices` plus ``offset`` (a vocabulary's word count: storage rows), read-only, cached per word and offset.

        The hashed indexers cache a short word that they hash in the lanes of
        a Python int (:func:`~finalfusion.subword.hashing.lane_hashes`) from
        its second lookup on, in a cache of their own that starts over when
        full: storing every never-seen word would cost a third of what
        hashing it costs.

        Examples
        --------
        >>> from finalfusion.subword import FinalfusionHashIndexer
        >>> idx = FinalfusionHashIndexer(10, 3, 6)
        >>> idx.word_rows("ab", offset=100).tolist(), idx.word_rows("ab").tolist() == idx.word_indices("ab").tolist()
        ([308, 157, 623], True)
        >>> idx.word_rows("abc") is idx.word_rows("abc"), idx.word_rows("abc") is idx.word_rows("abc")  # cached at the second lookup
        (False, True)
        >>> idx.word_rows("x" * 40) is idx.word_rows("x" * 40), idx.word_rows("abc").flags.writeable  # a long word: at the first
        (True, False)
        """
        key: Hashable = (word, offset) if offset else word
        out = self._words.get(key)
        if out is None:
            check_word_type(word)
            out = self._rows(word, offset)
            out.flags.writeable = False
            self._words.put(key, out, out.nbytes + sys.getsizeof(word))
        return out

    def subword_indices(self, word: str, offset: int = 0, bracket: bool = True, with_ngrams: bool = False) -> list[Any]:
        """Subword indices of ``word``'s n-grams, in n-gram order.

        Parameters
        ----------
        word
            The word.
        offset
            Added to every index (a vocabulary passes its word count).
        bracket
            Surround the word with its begin/end markers first.
        with_ngrams
            Return ``(ngram, index)`` pairs instead of bare indices.

        Returns
        -------
        list
            Indices, or pairs; n-grams without an index (explicit
            vocabularies) are left out.

        Raises
        ------
        TypeError
            If ``word`` is not a ``str``.
        finalfusion.errors.LimitExceeded
            If the word has more than :data:`finalfusion.limits.MAX_NGRAMS_PER_WORD` n-grams.

        Examples
        --------
        >>> from finalfusion.subword import FastTextIndexer, FinalfusionHashIndexer
        >>> FinalfusionHashIndexer(21, 3, 6).subword_indices("ab")
        [493776, 543801, 506379]
        >>> FastTextIndexer(2000000, 3, 6).subword_indices("ab", with_ngrams=True)[0]
        ('<ab>', 621742)
        """
        check_word_type(word)
        if not with_ngrams and bracket:
            return self.word_rows(word, offset).tolist()  # type: ignore[no-any-return]
        self._check_count(self._bracket(word) if bracket else word)
        items = self._items(word, bracket)
        idx = self._ngram_indices(items)
        per = self._per_item
        pairs: list[Any] = []
        for k, item in enumerate(items):
            for i in idx[k * per : (k + 1) * per]:
                if i is not None:
                    pairs.append((item, i + offset) if with_ngrams else i + offset)
        return pairs

    def __call__(self, ngram: str) -> int | None:
        """Index of a single n-gram (``None`` if an explicit table lacks it)."""
        return self._ngram_indices([ngram])[0]

    def batch_indices(self, words: Sequence[str]) -> tuple[IntArray, IntArray]:
        """Indices of the n-grams of many words, as a flat array and per-word counts.

        Returns
        -------
        indices, counts
            ``indices[counts[:i].sum():counts[:i+1].sum()]`` are the indices
            of ``words[i]``, in the same order as :meth:`subword_indices`.

        Examples
        --------
        >>> from finalfusion.subword import FinalfusionHashIndexer
        >>> idx, counts = FinalfusionHashIndexer(21).batch_indices(["ab", ""])
        >>> idx.tolist(), counts.tolist()
        ([493776, 543801, 506379], [3, 0])
        """
        counts = np.zeros(len(words), dtype=np.int64)
        groups = list(self.batch_groups(words))
        for pos, idx in groups:
            counts[pos] = idx.shape[1]
        offsets = np.cumsum(counts) - counts
        flat = np.empty(int(counts.sum()), dtype=np.int64)
        for pos, idx in groups:
            flat[offsets[pos][:, None] + np.arange(idx.shape[1])] = idx
        return flat, counts

    def batch_groups(self, words: Sequence[str]) -> Iterator[tuple[IntArray, IntArray]]:
        """Indices of many words, grouped by how many they have.

        Yields
        ------
        positions, indices
            Positions in ``words`` and a ``(len(positions), K)`` matrix with
            the ``K`` indices of each of those words (``K >= 1``; words
            without any index are not yielded). Regular shapes let callers
            gather and sum rows without per-word Python work.

        Examples
        --------
        >>> from finalfusion.subword import FinalfusionHashIndexer
        >>> for positions, indices in FinalfusionHashIndexer(10, 3, 3).batch_groups(["ab", "xyz", "cd", ""]):
        ...     print(positions.tolist(), indices.tolist())
        [0, 2] [[57, 523], [925, 367]]
        [1] [[651, 733, 171]]
        """
        self._check_longest(words)
        arrays: list[IntArray] = []
        for i, w in enumerate(words):
            a = self.word_indices(w)
            if len(a) > BLOCK_NGRAMS:  # long words one by one: a batch of them streams
                yield np.array([i], dtype=np.int64), a[None, :].copy()  # callers may add offsets in place
                a = a[:0]
            arrays.append(a)
        counts = np.fromiter(map(len, arrays), dtype=np.int64, count=len(arrays))
        for k in np.unique(counts).tolist():
            if k == 0:
                continue
            pos = np.flatnonzero(counts == k)
            yield pos, np.stack([arrays[i] for i in pos.tolist()])

    def _check_longest(self, words: Sequence[str]) -> None:
        """Refuse a batch with a word past ``MAX_NGRAMS_PER_WORD`` before any work (the count grows with the length)."""
        if words:
            longest = max(words, key=len)
            self._check_count(self._bracket(longest))
