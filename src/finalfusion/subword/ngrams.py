"""N-gram extraction (docs/format.md §7).

Units are Unicode code points. For every start position, n-grams are
emitted from the longest to the shortest; the whole bracketed word is an
n-gram when it is short enough. The vectorised :func:`ngram_table` produces
the same n-grams, in the same order, for many words at once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

import numpy as np
import numpy.typing as npt

__all__ = ["NgramTable", "check_ngram_range", "ngram_table", "ngrams"]

BOW: Final = "<"
EOW: Final = ">"


def check_ngram_range(min_n: int, max_n: int) -> None:
    """Reject n-gram ranges the format cannot use.

    Raises
    ------
    ValueError
        Unless ``1 <= min_n <= max_n``.

    Examples
    --------
    >>> check_ngram_range(3, 6)  # fine: returns None
    >>> check_ngram_range(4, 3)
    Traceback (most recent call last):
    ...
    ValueError: n-gram lengths need 1 <= min_n <= max_n, got min_n=4, max_n=3
    """
    if not 1 <= min_n <= max_n:
        raise ValueError(f"n-gram lengths need 1 <= min_n <= max_n, got min_n={min_n}, max_n={max_n}")


def ngrams(word: str, min_n: int = 3, max_n: int = 6, bracket: bool = True) -> list[str]:
    """The n-grams of ``word`` in finalfusion order.

    Parameters
    ----------
    word
        The word.
    min_n, max_n
        Shortest and longest n-gram length, inclusive, in code points.
    bracket
        Surround the word with ``<`` and ``>`` first (as every vocabulary does).

    Returns
    -------
    list of str
        For each start position (ascending), the n-grams from longest to
        shortest; repeated substrings are repeated.

    Raises
    ------
    ValueError
        Unless ``1 <= min_n <= max_n``.

    Examples
    --------
    >>> ngrams("Test", 3, 6)
    ['<Test>', '<Test', '<Tes', '<Te', 'Test>', 'Test', 'Tes', 'est>', 'est', 'st>']
    >>> ngrams("ab", 2, 3, bracket=False)
    ['ab']
    """
    check_ngram_range(min_n, max_n)
    s = f"{BOW}{word}{EOW}" if bracket else word
    length = len(s)
    return [s[p : p + n] for p in range(length - min_n + 1) for n in range(min(max_n, length - p), min_n - 1, -1)]


@dataclass(frozen=True)
class NgramTable:
    """The n-grams of many strings, as positions in their concatenated code points.

    Attributes
    ----------
    codepoints
        ``uint32`` code points of all strings, concatenated, followed by
        ``max_n`` zeros so that windows never run off the end.
    start
        Start position (in ``codepoints``) of every n-gram, in finalfusion order.
    length
        Length in code points of every n-gram.
    counts
        Number of n-grams of each string.

    Examples
    --------
    >>> table = ngram_table(["<ab>", "<c>"], 3, 3)
    >>> table.start.tolist(), table.length.tolist(), table.counts.tolist()
    ([0, 1, 4], [3, 3, 3], [2, 1])
    """

    codepoints: npt.NDArray[np.uint32]
    start: npt.NDArray[np.int64]
    length: npt.NDArray[np.int64]
    counts: npt.NDArray[np.int64]

    def strings(self, joined: str) -> list[str]:
        """The n-grams as strings, given the concatenation the table was built from.

        Examples
        --------
        >>> ngram_table(["<ab>", "<c>"], 3, 3).strings("<ab><c>")
        ['<ab', 'ab>', '<c>']
        """
        return [joined[s : s + n] for s, n in zip(self.start.tolist(), self.length.tolist(), strict=True)]


def ngram_table(strings: list[str], min_n: int, max_n: int) -> NgramTable:
    """Vectorised n-gram extraction over already bracketed ``strings``.

    Examples
    --------
    >>> t = ngram_table(["<ab>", "<c>"], 3, 4)
    >>> t.strings("<ab><c>")
    ['<ab>', '<ab', 'ab>', '<c>']
    >>> t.counts.tolist()
    [3, 1]
    """
    check_ngram_range(min_n, max_n)
    n_strings = len(strings)
    lens = np.fromiter(map(len, strings), dtype=np.int64, count=n_strings)
    joined = "".join(strings)
    cps = np.frombuffer(joined.encode("utf-32-le", "surrogatepass"), dtype="<u4")
    padded = np.zeros(len(cps) + max_n, dtype=np.uint32)
    padded[: len(cps)] = cps
    ends = np.cumsum(lens)
    # Code points left in the same string from each position on.
    avail = np.repeat(ends, lens) - np.arange(len(cps), dtype=np.int64)
    starts_by_len = [np.flatnonzero(avail >= n) for n in range(max_n, min_n - 1, -1)]
    start = np.concatenate(starts_by_len) if starts_by_len else np.empty(0, np.int64)
    length = np.concatenate([np.full(len(s), n, np.int64) for s, n in zip(starts_by_len, range(max_n, min_n - 1, -1), strict=True)])
    # Position ascending; the stable sort keeps longest-first within a position.
    order = np.argsort(start, kind="stable")
    start = start[order].astype(np.int64, copy=False)
    length = length[order]
    owner = np.searchsorted(ends, start, side="right")
    counts = np.bincount(owner, minlength=n_strings).astype(np.int64)
    return NgramTable(padded, start, length, counts)
