"""N-gram extraction (docs/format.md §7).

Units are Unicode code points. For every start position, n-grams are
emitted from the longest to the shortest; the whole bracketed word is an
n-gram when it is short enough. The vectorised :func:`ngram_table` produces
the same n-grams, in the same order, for many words at once.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Final

import numpy as np
import numpy.typing as npt

from finalfusion import limits
from finalfusion.errors import LimitExceeded

__all__ = ["NgramTable", "check_ngram_count", "check_ngram_range", "check_word_type", "ngram_blocks", "ngram_count", "ngram_table", "ngrams"]

BOW: Final = "<"
EOW: Final = ">"


def check_ngram_range(min_n: int, max_n: int) -> None:
    """Reject n-gram ranges the format cannot use.

    Raises
    ------
    ValueError
        Unless ``1 <= min_n <= max_n <= finalfusion.limits.MAX_NGRAM_LEN``.

    Examples
    --------
    >>> check_ngram_range(3, 6)  # fine: returns None
    >>> check_ngram_range(4, 3)
    Traceback (most recent call last):
    ...
    ValueError: n-gram lengths need 1 <= min_n <= max_n, got min_n=4, max_n=3
    >>> check_ngram_range(3, 2**31 - 1)
    Traceback (most recent call last):
    ...
    ValueError: max_n=2147483647 is more than finalfusion.limits.MAX_NGRAM_LEN = 64 (real models use 3..6; raise the limit for longer n-grams)
    """
    if not 1 <= min_n <= max_n:
        raise ValueError(f"n-gram lengths need 1 <= min_n <= max_n, got min_n={min_n}, max_n={max_n}")
    if max_n > limits.MAX_NGRAM_LEN:
        raise ValueError(
            f"max_n={max_n} is more than finalfusion.limits.MAX_NGRAM_LEN = {limits.MAX_NGRAM_LEN} (real models use 3..6; raise the limit for longer n-grams)"
        )


def ngram_count(length: int, min_n: int, max_n: int) -> int:
    """Number of n-grams of a string of ``length`` code points, in closed form.

    Examples
    --------
    >>> ngram_count(6, 3, 6), len(ngrams("Test", 3, 6))  # "<Test>": 6 code points
    (10, 10)
    >>> ngram_count(2**20 + 2, 3, 6)  # a 1 MiB word: no n-gram is built to count them
    4194298
    """
    hi = min(max_n, length)
    if hi < min_n:
        return 0
    k = hi - min_n + 1
    return k * (length + 1) - (min_n + hi) * k // 2


def check_ngram_count(length: int, min_n: int, max_n: int, extra: int = 0) -> int:
    """The n-gram count of a string of ``length`` code points, checked against ``MAX_NGRAMS_PER_WORD``.

    ``length`` includes the begin and end markers; ``extra`` items (floret
    also hashes the whole word) are added to the count.

    Raises
    ------
    finalfusion.errors.LimitExceeded
        If the count exceeds :data:`finalfusion.limits.MAX_NGRAMS_PER_WORD`.

    Examples
    --------
    >>> check_ngram_count(6, 3, 6)
    10
    >>> try:
    ...     check_ngram_count(2**21, 3, 6)  # a 2 MiB word
    ... except LimitExceeded as err:
    ...     print(err)  # doctest: +ELLIPSIS
    the word has 8388594 n-grams (3..6 of 2097152 code points, markers included), more than ...MAX_NGRAMS_PER_WORD = 4194304; raise the limit ...
    """
    count = ngram_count(length, min_n, max_n) + extra
    if count > limits.MAX_NGRAMS_PER_WORD:
        raise LimitExceeded(
            f"the word has {count} n-grams ({min_n}..{max_n} of {length} code points, markers included), "
            f"more than finalfusion.limits.MAX_NGRAMS_PER_WORD = {limits.MAX_NGRAMS_PER_WORD}; raise the limit to look up longer words"
        )
    return count


def check_word_type(word: object) -> None:
    """Raise ``TypeError`` naming the type unless ``word`` is a ``str`` (a number or ``None`` would be hashed as its text).

    Examples
    --------
    >>> check_word_type("Berlin")
    >>> check_word_type(None)
    Traceback (most recent call last):
    ...
    TypeError: a word must be a str, not NoneType: None
    """
    if not isinstance(word, str):
        raise TypeError(f"a word must be a str, not {type(word).__name__}: {word!r}")


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
    TypeError
        If ``word`` is not a ``str`` (0.7 raised it too).
    ValueError
        Unless ``1 <= min_n <= max_n <= finalfusion.limits.MAX_NGRAM_LEN``.
    finalfusion.errors.LimitExceeded
        If the word has more than :data:`finalfusion.limits.MAX_NGRAMS_PER_WORD` n-grams.

    Examples
    --------
    >>> ngrams("Test", 3, 6)
    ['<Test>', '<Test', '<Tes', '<Te', 'Test>', 'Test', 'Tes', 'est>', 'est', 'st>']
    >>> ngrams("ab", 2, 3, bracket=False)
    ['ab']
    """
    check_word_type(word)
    check_ngram_range(min_n, max_n)
    s = f"{BOW}{word}{EOW}" if bracket else word
    length = len(s)
    check_ngram_count(length, min_n, max_n)
    return [s[p : p + n] for p in range(length - min_n + 1) for n in range(min(max_n, length - p), min_n - 1, -1)]


def ngram_blocks(s: str, min_n: int, max_n: int, cells: int) -> Iterator[tuple[str, int]]:
    """Split the n-grams of ``s`` into blocks of consecutive start positions, in finalfusion order.

    Yields ``(part, keep)``: the first ``keep`` n-grams of ``part`` (a
    substring of ``s``) are the next n-grams of ``s``. A block has about
    ``cells / max_n`` n-grams (``cells`` bounds n-grams times ``max_n``, the
    hashing work and memory of one block), so a long word is hashed in
    bounded memory.

    Examples
    --------
    >>> blocks = list(ngram_blocks("<abcdef>", 2, 3, 12))
    >>> blocks
    [('<abc', 4), ('bcde', 4), ('def>', 4), ('f>', 1)]
    >>> [g for part, keep in blocks for g in ngrams(part, 2, 3, bracket=False)[:keep]] == ngrams("abcdef", 2, 3)
    True
    """
    length = len(s)
    step = max(1, cells // (max_n * (max_n - min_n + 1)))
    for p0 in range(0, max(length - min_n + 1, 0), step):
        part = s[p0 : p0 + step + max_n - 1]
        keep = ngram_count(len(part), min_n, max_n) - ngram_count(max(len(part) - step, 0), min_n, max_n)
        yield part, keep


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
