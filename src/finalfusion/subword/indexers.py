"""Subword indexers: map the n-grams of a word to subword indices (docs/format.md §8).

=============================  ===========================================  ====================
indexer                        hash / lookup                                 upper bound
=============================  ===========================================  ====================
:class:`FinalfusionHashIndexer`  FNV-1a 64 (char count + UTF-32LE), low e bits  ``2**bucket_exp``
:class:`FastTextIndexer`       FNV-1a 32 (sign-extended UTF-8) mod n          ``n_buckets``
:class:`ExplicitIndexer`       exact n-gram table                            distinct indices
:class:`FloretIndexer`         MurmurHash3 x64-128, several indices per item  ``n_buckets``
=============================  ===========================================  ====================

Every indexer offers :meth:`subword_indices` for one word (the
finalfusion-python 0.7 API) and ``batch_indices`` for many words at once,
vectorised with numpy where the hash allows it. Results for single words
are cached per word in a cache bounded by bytes
(:data:`finalfusion.limits.MAX_CACHE_BYTES`). The short words that the
hashed indexers hash in the lanes of a Python int
(:func:`~finalfusion.subword.hashing.lane_hashes`) are cached from their
second lookup on, in a dictionary of at most ``MAX_CACHE_BYTES //
RECENT_ENTRY_BYTES`` words that starts over when full: storing every
never-seen word would cost a third of what hashing it costs.

Work per word is bounded too: a word with more than
:data:`finalfusion.limits.MAX_NGRAMS_PER_WORD` n-grams (counted in closed
form from its length before anything is built) raises
:class:`~finalfusion.errors.LimitExceeded`, and a word with more than
:data:`BLOCK_NGRAMS` n-grams is hashed in blocks of consecutive start
positions, never holding more than one block's n-grams or hashing state.
"""

from __future__ import annotations

import sys
from collections.abc import Hashable, Iterable, Iterator, Mapping, Sequence
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from finalfusion import limits
from finalfusion.subword._base import BLOCK_CELLS, BLOCK_NGRAMS, SHORT_NGRAMS, IntArray, SubwordIndexer
from finalfusion.subword.hashing import (
    LANE_WORD,
    finalfusion_buckets,
    fnv1a32_fasttext,
    fnv1a32_fasttext_matrix,
    fnv1a64_finalfusion,
    fnv1a64_finalfusion_matrix,
    lane_hashes,
    murmur3_ngram_words,
    murmur3_x64_128,
    ngram_spans,
    word_hashes,
)
from finalfusion.subword.ngrams import check_ngram_count, ngram_blocks, ngram_count, ngrams

__all__ = [
    "ExplicitIndexer",
    "FastTextIndexer",
    "FinalfusionHashIndexer",
    "FloretIndexer",
    "SubwordIndexer",
]

#: Bytes accounted per entry of the n-gram -> index cache besides the key (dict slot, int).
NGRAM_ENTRY_BYTES: Final = 72
#: Bytes accounted per entry of the short-word cache of the hashed indexers: a key of at most 34 code points and the
#: rows of its n-grams (at most 36 x 8 of them) with their array, dict slot and tuple. It holds at most
#: ``MAX_CACHE_BYTES // RECENT_ENTRY_BYTES`` words and starts over when full.
RECENT_ENTRY_BYTES: Final = 4096
#: ``word_rows``' marker of a word not in the short-word cache.
_NEW: Final = object()
#: Entries of an index matrix computed at once in batch lookups: small enough for
#: the hash state to stay in L2 and for callers to start on the first groups
#: early (see ``Embeddings.embedding_batch``), large enough for long ufunc loops.
GROUP_ENTRIES: Final = 1 << 16


class _HashIndexer(SubwordIndexer):
    """An indexer whose indices come from a hash of each n-gram.

    Single words use the scalar hash with a bounded n-gram cache (n-grams
    recur across words far more than words do); batches hash all words of
    equal length at once with whole-column numpy arithmetic.
    """

    def __init__(self, min_n: int, max_n: int) -> None:
        super().__init__(min_n, max_n)
        self._ngram_cache: dict[str, int] = {}
        self._ngram_bytes = 0
        #: Short words hashed in lanes (keys of ``word_rows``): ``None`` once seen, their rows from the second lookup on.
        self._recent: dict[Hashable, IntArray | None] = {}

    def __getstate__(self) -> dict[str, Any]:
        state = super().__getstate__()
        state["_ngram_cache"] = {}
        state["_ngram_bytes"] = 0
        state["_recent"] = {}
        return state

    def _hash_index(self, ngram: str) -> int:
        raise NotImplementedError

    def _matrix_indices(self, cps: npt.NDArray[np.uint32]) -> IntArray:
        raise NotImplementedError

    def _ngram_indices(self, items: list[str]) -> list[int | None]:
        return list(self._cached_indices(items))

    def _cached_indices(self, items: list[str]) -> list[int]:
        cache = self._ngram_cache
        get = cache.get
        out = []
        added = 0
        for s in items:
            i = get(s)
            if i is None:
                i = self._hash_index(s)
                cache[s] = i
                added += sys.getsizeof(s) + NGRAM_ENTRY_BYTES
            out.append(i)
        if added:
            self._ngram_bytes += added
            if self._ngram_bytes > limits.MAX_CACHE_BYTES:
                cache.clear()  # n-grams recur across words: starting over is cheap
                self._ngram_bytes = 0
        return out

    def _hash_word(self, bracketed: str, offset: int = 0) -> IntArray | None:
        """The indices of all n-grams of a bracketed word plus ``offset`` in a few vectorised steps, or ``None`` (then per n-gram)."""
        return None

    def _lane_rows(self, bracketed: str, offset: int) -> IntArray | None:
        """:meth:`_hash_word` of a short word hashed in lanes (:func:`~finalfusion.subword.hashing.lane_hashes`), read-only, else ``None``."""
        return None

    def word_rows(self, word: str, offset: int = 0) -> IntArray:
        # A short word hashed in lanes is cached from its second lookup on: storing every never-seen word cost
        # about 1 us per lookup, more than a third of hashing it (3-4 us for 10-15 code points, 6-7 us in numpy).
        if type(word) is str and len(word) <= LANE_WORD - 2:  # anything else: the checks of the cached path
            key: Hashable = (word, offset) if offset else word
            recent = self._recent
            hit = recent.get(key, _NEW)
            if isinstance(hit, np.ndarray):
                return hit
            s = f"<{word}>"
            if len(s) * (self._max_n - self._min_n + 1) > limits.MAX_NGRAMS_PER_WORD:
                self._check_count(s)  # LimitExceeded past the limit
            rows = self._lane_rows(s, offset)
            if rows is not None:
                if hit is None:  # the second lookup: keep the rows
                    recent[key] = rows
                else:  # the first: remember the word as seen
                    if len(recent) >= limits.MAX_CACHE_BYTES // RECENT_ENTRY_BYTES:
                        recent.clear()  # bounded: starts over (single dict operations: safe from several threads)
                    recent[key] = None
                return rows
        return super().word_rows(word, offset)

    def _indices(self, word: str) -> IntArray:
        return self._rows(word, 0)

    def _rows(self, word: str, offset: int) -> IntArray:
        s = f"<{word}>"
        # Short words (the common case) skip the closed-form count: at most len(s) n-grams per length.
        bound = len(s) * (self._max_n - self._min_n + 1)
        # Blocked once the one-shot layout (max_n steps for every n-gram) would pass BLOCK_CELLS.
        if (bound > SHORT_NGRAMS or bound > limits.MAX_NGRAMS_PER_WORD) and self._check_count(s) * self._max_n > BLOCK_CELLS:
            out = np.concatenate([self._block_indices(part, keep) for part, keep in self._blocks(s)])
        else:
            fast = self._hash_word(s, offset)  # the offset added while hashing: no second pass over the array
            if fast is not None:
                return fast
            out = np.array(self._cached_indices(self._items(word, True)), dtype=np.int64)
        if offset:
            out += offset
        return out

    def _block_indices(self, part: str, keep: int) -> IntArray:
        fast = self._hash_word(part)
        if fast is None:  # beyond Latin-1 / ASCII: the matrix hash handles every code point
            fast = self._matrix_indices(np.frombuffer(part.encode("utf-32-le", "surrogatepass"), dtype="<u4").reshape(1, len(part)))[0]
        return fast[:keep]

    def batch_groups(self, words: Sequence[str]) -> Iterator[tuple[IntArray, IntArray]]:
        if len(words) < 16:
            yield from super().batch_groups(words)
            return
        self._check_longest(words)
        lens = np.fromiter(map(len, words), dtype=np.int64, count=len(words)) + 2
        order = np.argsort(lens, kind="stable")
        sorted_lens = lens[order]
        bounds = np.flatnonzero(np.diff(sorted_lens)) + 1
        for pos in np.split(order, bounds):
            length = int(lens[pos[0]])
            if length < self._min_n:
                continue
            n_grams = ngram_count(length, self._min_n, self._max_n)
            if n_grams > BLOCK_NGRAMS:  # long words one by one, each hashed in blocks: a batch of them streams
                for p in pos.tolist():
                    yield np.array([p], dtype=np.int64), self._indices(words[p])[None, :]
                continue
            step = max(1, GROUP_ENTRIES // max(n_grams, 1))
            for lo in range(0, len(pos), step):
                block = pos[lo : lo + step]
                text = "<" + "><".join(map(words.__getitem__, block.tolist())) + ">"
                cps = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype="<u4").reshape(len(block), length)
                yield block, self._matrix_indices(cps)


class FinalfusionHashIndexer(_HashIndexer):
    """finalfusion's bucket indexer: FNV-1a 64, keep the low ``bucket_exp`` bits.

    Parameters
    ----------
    bucket_exp
        Base-2 logarithm of the number of buckets (1 to 63; 0 is one bucket).
    min_n, max_n
        N-gram length range.

    Examples
    --------
    >>> idx = FinalfusionHashIndexer(10, 3, 6)
    >>> idx.upper_bound
    1024
    >>> idx("<ab")
    57
    """

    def __init__(self, bucket_exp: int = 21, min_n: int = 3, max_n: int = 6) -> None:
        if not 0 <= bucket_exp <= 63:
            raise ValueError(f"bucket_exp must be in 0..63, got {bucket_exp}")
        super().__init__(min_n, max_n)
        self._exp = bucket_exp
        self._mask = (1 << bucket_exp) - 1

    @property
    def buckets_exp(self) -> int:
        """The bucket exponent (number of buckets = ``2**buckets_exp``).

        Examples
        --------
        >>> FinalfusionHashIndexer(10).buckets_exp, FinalfusionHashIndexer(10).upper_bound
        (10, 1024)
        """
        return self._exp

    @property
    def upper_bound(self) -> int:
        return 1 << self._exp

    def _hash_index(self, ngram: str) -> int:
        return fnv1a64_finalfusion(ngram) & self._mask

    def _hash_word(self, bracketed: str, offset: int = 0) -> IntArray | None:
        return finalfusion_buckets(bracketed, self._min_n, self._max_n, self._exp, offset)

    def _lane_rows(self, bracketed: str, offset: int) -> IntArray | None:
        return lane_hashes(bracketed, self._min_n, self._max_n, self._exp, False, offset)

    def _matrix_indices(self, cps: npt.NDArray[np.uint32]) -> IntArray:
        out: IntArray = (fnv1a64_finalfusion_matrix(cps, self._min_n, self._max_n) & np.uint64(self._mask)).astype(np.int64)
        return out

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, FinalfusionHashIndexer):
            return NotImplemented
        return (self._exp, self._min_n, self._max_n) == (other._exp, other._min_n, other._max_n)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"FinalfusionHashIndexer(bucket_exp={self._exp}, min_n={self._min_n}, max_n={self._max_n})"


class FastTextIndexer(_HashIndexer):
    """fastText's indexer: FNV-1a 32 over sign-extended UTF-8, modulo ``n_buckets``.

    Parameters
    ----------
    n_buckets
        Number of buckets (1 to 2**31 - 1).
    min_n, max_n
        N-gram length range.

    Examples
    --------
    >>> FastTextIndexer(2000000, 3, 6)("en>")
    619228
    """

    def __init__(self, n_buckets: int = 2_000_000, min_n: int = 3, max_n: int = 6) -> None:
        if not 1 <= n_buckets <= 2**31 - 1:
            raise ValueError(f"n_buckets must be in 1..2**31-1, got {n_buckets}")
        super().__init__(min_n, max_n)
        self._n_buckets = n_buckets

    @property
    def n_buckets(self) -> int:
        """Number of buckets.

        Examples
        --------
        >>> FastTextIndexer(1000).n_buckets
        1000
        """
        return self._n_buckets

    @property
    def upper_bound(self) -> int:
        return self._n_buckets

    def _hash_index(self, ngram: str) -> int:
        return fnv1a32_fasttext(ngram.encode("utf-8", "surrogatepass")) % self._n_buckets

    def _blocks(self, bracketed: str) -> Iterator[tuple[str, int]]:
        # The matrix hash holds one state per n-gram (not max_n): blocks of about BLOCK_CELLS n-grams.
        return ngram_blocks(bracketed, self._min_n, self._max_n, BLOCK_CELLS * self._max_n)

    def _block_indices(self, part: str, keep: int) -> IntArray:
        # One block of a long word: the matrix hash shares the work of the n-grams starting at one position
        # (fastText's hash has no length prefix), max_n steps per position instead of the padded layout's max_n**2.
        cps = np.frombuffer(part.encode("utf-32-le", "surrogatepass"), dtype="<u4").reshape(1, len(part))
        return self._matrix_indices(cps)[0, :keep]

    def _hash_word(self, bracketed: str, offset: int = 0) -> IntArray | None:
        hashes = word_hashes(bracketed, self._min_n, self._max_n, fasttext=True)
        if hashes is None:
            return None
        hashes %= np.uint64(self._n_buckets)
        out: IntArray = hashes.view(np.int64)
        if offset:
            out += offset
        return out

    def _lane_rows(self, bracketed: str, offset: int) -> IntArray | None:
        lanes = lane_hashes(bracketed, self._min_n, self._max_n, 32, True)
        if lanes is None:
            return None
        out: IntArray = lanes % self._n_buckets
        if offset:
            out += offset
        out.flags.writeable = False
        return out

    def _matrix_indices(self, cps: npt.NDArray[np.uint32]) -> IntArray:
        out: IntArray = (fnv1a32_fasttext_matrix(cps, self._min_n, self._max_n) % np.uint32(self._n_buckets)).astype(np.int64)
        return out

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, FastTextIndexer):
            return NotImplemented
        return (self._n_buckets, self._min_n, self._max_n) == (other._n_buckets, other._min_n, other._max_n)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"FastTextIndexer(n_buckets={self._n_buckets}, min_n={self._min_n}, max_n={self._max_n})"


class ExplicitIndexer(SubwordIndexer):
    """An explicit table from n-grams to subword indices.

    Several n-grams may share an index. Indices must be dense (cover
    ``0..upper_bound-1``); files additionally number them in order of first
    appearance (docs/format.md §5.8), see :meth:`first_noncanonical`. Without
    ``ngram_index`` every n-gram gets its own index in list order.

    Parameters
    ----------
    ngrams
        The n-grams, in stored order; no duplicates.
    min_n, max_n
        N-gram length range used to split words.
    ngram_index
        Optional index of each n-gram.

    Raises
    ------
    ValueError
        For duplicate n-grams, or indices that do not cover ``0..upper_bound-1``.
        Dense indices not numbered by first appearance are accepted here
        (see :meth:`first_noncanonical`); :meth:`Embeddings.write
        <finalfusion.Embeddings.write>` renumbers them (and permutes the
        subword rows), a lone vocabulary chunk cannot be written.

    Examples
    --------
    >>> idx = ExplicitIndexer(["<ab", "ab>", "<a"], 2, 3, {"<ab": 0, "ab>": 1, "<a": 0})
    >>> idx.upper_bound, idx("ab>"), idx("zz")
    (2, 1, None)
    """

    def __init__(
        self,
        ngrams: Sequence[str],
        min_n: int = 3,
        max_n: int = 6,
        ngram_index: Mapping[str, int] | None = None,
    ) -> None:
        super().__init__(min_n, max_n)
        ngram_list = list(ngrams)
        if ngram_index is None:
            index = {ng: i for i, ng in enumerate(ngram_list)}
            if len(index) != len(ngram_list):
                raise ValueError(f"duplicate n-gram: {_first_duplicate(ngram_list)!r}")
        else:
            missing = next((ng for ng in ngram_list if ng not in ngram_index), None)
            if missing is not None:
                raise ValueError(f"ngram_index has no index for the n-gram {missing!r} of the n-gram list")
            index = {ng: int(ngram_index[ng]) for ng in ngram_list}
            if len(index) != len(ngram_list):
                raise ValueError(f"duplicate n-gram: {_first_duplicate(ngram_list)!r}")
            if len(ngram_index) != len(index):
                extra = next(k for k in ngram_index if k not in index)
                raise ValueError(f"ngram_index has n-gram {extra!r} that is not in the n-gram list")
            values = set(index.values())
            if values and (min(values) < 0 or max(values) + 1 != len(values)):
                raise ValueError(f"n-gram indices must cover 0..{len(values) - 1} without gaps, got values from {min(values)} to {max(values)}")
        self._ngrams = ngram_list
        self._index = index
        self._bound = (max(index.values()) + 1) if index else 0

    @property
    def ngrams(self) -> list[str]:
        """The n-grams in stored order.

        Examples
        --------
        >>> ExplicitIndexer(["ab>", "<ab"], 3, 3).ngrams
        ['ab>', '<ab']
        """
        return self._ngrams

    @property
    def ngram_index(self) -> dict[str, int]:
        """N-gram to index mapping.

        Examples
        --------
        >>> ExplicitIndexer(["<ab", "ab>", "<a"], 2, 3, {"<ab": 0, "ab>": 1, "<a": 0}).ngram_index
        {'<ab': 0, 'ab>': 1, '<a': 0}
        """
        return self._index

    @property
    def upper_bound(self) -> int:
        return self._bound

    def _ngram_indices(self, items: list[str]) -> list[int | None]:
        get = self._index.get
        return [get(s) for s in items]

    def first_noncanonical(self) -> tuple[int, int, int] | None:
        """Where the numbering stops being by first appearance, if anywhere.

        Returns
        -------
        tuple or None
            ``(position, allowed maximum, index found)`` of the first n-gram
            whose index is neither a known one nor the next new one.

        Examples
        --------
        >>> ExplicitIndexer(["<ab", "ab>"], 3, 3).first_noncanonical() is None
        True
        >>> ExplicitIndexer(["<ab", "ab>"], 3, 3, {"<ab": 1, "ab>": 0}).first_noncanonical()  # first n-gram must get 0
        (0, 0, 1)
        """
        return _first_noncanonical(self._index[ng] for ng in self._ngrams)

    def renumbered(self) -> tuple[ExplicitIndexer, npt.NDArray[np.int64]]:
        """The same table numbered by first appearance, and for each new index the old one.

        Files require this numbering (docs/format.md §5.8); subword row ``j`` of
        the renumbered table is row ``source[j]`` of this one.

        Examples
        --------
        >>> canonical, source = ExplicitIndexer(["<ab", "ab>", "<a"], 2, 3, {"<ab": 1, "ab>": 0, "<a": 1}).renumbered()
        >>> canonical.ngram_index, source.tolist()
        ({'<ab': 0, 'ab>': 1, '<a': 0}, [1, 0])
        """
        renumber: dict[int, int] = {}
        for ngram in self._ngrams:
            renumber.setdefault(self._index[ngram], len(renumber))
        canonical = ExplicitIndexer(self._ngrams, self._min_n, self._max_n, {ng: renumber[self._index[ng]] for ng in self._ngrams})
        return canonical, np.fromiter(renumber, dtype=np.int64, count=len(renumber))  # keys in order of first appearance

    def __len__(self) -> int:
        return len(self._ngrams)

    def __getitem__(self, ngram: str) -> int:
        return self._index[ngram]

    def __contains__(self, ngram: object) -> bool:
        """Whether the table has the n-gram; for an iterable (another indexer, a list), whether it has all of them (as 0.7).

        Examples
        --------
        >>> idx = ExplicitIndexer(["<a", "a>"], 2, 2)
        >>> "<a" in idx, ["<a", "a>"] in idx, ExplicitIndexer(["<a"], 2, 2) in idx, ["<a", "b>"] in idx, 0 in idx
        (True, True, True, False, False)
        """
        if isinstance(ngram, str):
            return ngram in self._index
        if isinstance(ngram, Iterable):
            return all(item in self for item in ngram)
        return False

    def __iter__(self) -> Iterator[str]:
        return iter(self._ngrams)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ExplicitIndexer):
            return NotImplemented
        return (self._ngrams, self._index, self._min_n, self._max_n) == (other._ngrams, other._index, other._min_n, other._max_n)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"ExplicitIndexer(<{len(self._ngrams)} n-grams, {self._bound} indices>, min_n={self._min_n}, max_n={self._max_n})"


def _first_duplicate(items: Iterable[str]) -> str:
    seen: set[str] = set()
    for item in items:
        if item in seen:
            return item
        seen.add(item)
    return ""  # pragma: no cover - only called when a duplicate exists


def _first_noncanonical(indices: Iterable[int]) -> tuple[int, int, int] | None:
    """Position, allowed maximum and value of the first index that breaks first-appearance numbering."""
    next_new = 0
    for pos, i in enumerate(indices):
        if i == next_new:
            next_new += 1
        elif not 0 <= i < next_new:
            return pos, next_new, i
    return None


class FloretIndexer(SubwordIndexer):
    """floret's indexer: MurmurHash3 x64-128 with up to four indices per item.

    The looked-up items are the whole bracketed word first, then its
    n-grams (docs/format.md §7), so short words count twice -- as floret does.

    Parameters
    ----------
    n_buckets
        Number of buckets (at least 1).
    min_n, max_n
        N-gram length range.
    n_hashes
        Indices per item, 1 to 4.
    seed
        MurmurHash3 seed (32 bits).
    bow, eow
        Begin- and end-of-word markers.

    Examples
    --------
    >>> idx = FloretIndexer(50000, 3, 6, n_hashes=4, seed=2166136261)
    >>> idx.subword_indices("a")
    [46305, 28722, 17636, 38578, 46305, 28722, 17636, 38578]
    >>> idx.n_buckets, idx.n_hashes, idx.seed, idx.bow, idx.eow, idx.upper_bound
    (50000, 4, 2166136261, '<', '>', 50000)
    """

    def __init__(
        self,
        n_buckets: int,
        min_n: int = 3,
        max_n: int = 6,
        n_hashes: int = 2,
        seed: int = 2166136261,
        bow: str = "<",
        eow: str = ">",
    ) -> None:
        if n_buckets < 1:
            raise ValueError(f"n_buckets must be at least 1, got {n_buckets}")
        if not 1 <= n_hashes <= 4:
            raise ValueError(f"n_hashes must be in 1..4, got {n_hashes}")
        if not 0 <= seed < 2**32:
            raise ValueError(f"seed must be a u32, got {seed}")
        super().__init__(min_n, max_n)
        self._n_buckets = n_buckets
        self._n_hashes = n_hashes
        self._seed = seed
        self._bow = bow
        self._eow = eow
        self._per_item = n_hashes

    n_buckets = property(lambda self: self._n_buckets, doc="Number of buckets.")
    n_hashes = property(lambda self: self._n_hashes, doc="Indices per hashed item.")
    seed = property(lambda self: self._seed, doc="MurmurHash3 seed.")
    bow = property(lambda self: self._bow, doc="Begin-of-word marker.")
    eow = property(lambda self: self._eow, doc="End-of-word marker.")

    @property
    def upper_bound(self) -> int:
        return self._n_buckets

    def _bracket(self, word: str) -> str:
        return f"{self._bow}{word}{self._eow}"

    def _items(self, word: str, bracket: bool) -> list[str]:
        s = self._bracket(word) if bracket else word
        return [s, *ngrams(s, self._min_n, self._max_n, bracket=False)]

    # Above ~100 n-grams (a word of ~50 code points with 4..5-grams) the numpy MurmurHash3 is faster than the scalar one:
    # a batch of 68 words of 16,000 characters took 37 s one n-gram at a time, ~1.5 s in blocks.
    _scalar_ngrams = 128

    def _check_count(self, bracketed: str) -> int:
        return check_ngram_count(len(bracketed), self._min_n, self._max_n, extra=1)

    def _long_indices(self, bracketed: str) -> IntArray:
        return np.array(self._ngram_indices([bracketed]), dtype=np.int64)

    def _block_indices(self, part: str, keep: int) -> IntArray:
        # One block of a long word: MurmurHash3 of all its n-grams in numpy (the scalar hash costs ~10 us per item).
        start, lens = ngram_spans(len(part), self._min_n, self._max_n)
        words = murmur3_ngram_words(part, start[:keep], lens[:keep], self._seed)[:, : self._n_hashes]
        out: IntArray = (words % np.uint64(self._n_buckets)).astype(np.int64).reshape(-1)
        return out

    def _ngram_indices(self, items: list[str]) -> list[int | None]:
        n, k, seed = self._n_buckets, self._n_hashes, self._seed
        out: list[int | None] = []
        for item in items:
            h1, h2 = murmur3_x64_128(item.encode("utf-8", "surrogatepass"), seed)
            words = (h1 & 0xFFFFFFFF, h1 >> 32, h2 & 0xFFFFFFFF, h2 >> 32)
            out.extend(w % n for w in words[:k])
        return out

    def __call__(self, ngram: str) -> int | None:
        """First index of a single item (floret items have ``n_hashes`` indices)."""
        return self._ngram_indices([ngram])[0]

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, FloretIndexer):
            return NotImplemented
        return self._key() == other._key()

    def _key(self) -> tuple[Any, ...]:
        return (self._n_buckets, self._min_n, self._max_n, self._n_hashes, self._seed, self._bow, self._eow)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return (
            f"FloretIndexer(n_buckets={self._n_buckets}, min_n={self._min_n}, max_n={self._max_n}, "
            f"n_hashes={self._n_hashes}, seed={self._seed}, bow={self._bow!r}, eow={self._eow!r})"
        )
