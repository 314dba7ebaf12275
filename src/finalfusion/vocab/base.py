"""Behaviour shared by every vocabulary chunk.

Every vocabulary is a frozen dataclass (see :class:`Vocab` for why): its
fields are the constructor's parameters (``words``, and ``indexer`` for
the subword vocabularies), the word index is derived from the words in
``__post_init__`` and excluded from comparison and ``repr``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import KW_ONLY, MISSING, InitVar, dataclass, field, fields
from typing import Any, ClassVar, Generic, TypeVar, cast

import numpy as np
import numpy.typing as npt

from finalfusion import _display, limits
from finalfusion._binary import ByteReader, ByteWriter
from finalfusion.container import FileChunk
from finalfusion.errors import FormatError
from finalfusion.subword.indexers import SubwordIndexer
from finalfusion.subword.ngrams import ngrams
from finalfusion.vocab._index import WordIndex
from finalfusion.vocab._words import check_word

__all__ = ["SubwordVocab", "Vocab"]

_V = TypeVar("_V", bound="Vocab")
#: The kind of subword indexer a :class:`SubwordVocab` holds.
_I = TypeVar("_I", bound=SubwordIndexer)


def build_index(words: list[str]) -> WordIndex:
    """Map each word to its position; duplicates raise ``ValueError``.

    Examples
    --------
    >>> build_index(["a", "b"]) == {"a": 0, "b": 1}
    True
    >>> build_index(["a", "b", "a"])
    Traceback (most recent call last):
    ...
    ValueError: duplicate word in vocabulary: 'a'
    """
    return WordIndex(words)


def read_words(reader: ByteReader, count: int, what: str = "word") -> tuple[list[str], WordIndex, int]:
    """Read ``count`` words and index them; duplicates are a :class:`FormatError`.

    Also returns the bytes the words took on disk, which the vocabulary
    keeps so that writing it back need not encode every word twice.
    """
    start = reader.pos
    words = reader.strings(count, what)
    try:
        index = WordIndex(words)
    except ValueError as exc:
        raise FormatError(str(exc), offset=start, chunk=reader.chunk, expected="distinct words", found=str(exc)) from None
    return words, index, reader.pos - start


@dataclass(frozen=True, eq=False, repr=False)
class Vocab(FileChunk):
    """A vocabulary: words with indices, optionally subword indices for unknown words.

    Vocabularies are *frozen* dataclasses: a vocabulary fixes the meaning
    of every storage row, so changing it in place would silently
    desynchronise the embeddings that hold it (and the word index derived
    from it). Build a new one instead. They behave as a read-only
    collection of their words (``len``, ``in``, iteration in index order),
    compare equal when of the same class with equal words (and indexer),
    are unhashable (they hold lists) and pickle and copy as plain
    dataclasses (the word index is rebuilt from the words on unpickling).

    Attributes
    ----------
    words : list[str]
        The words, in index order. Do not modify the list.
    word_index : WordIndex
        Word to index mapping: a read-only :class:`~collections.abc.Mapping`
        (0.7.1: a ``dict``), derived from ``words``.

    Examples
    --------
    >>> from finalfusion.vocab import SimpleVocab
    >>> vocab = SimpleVocab(["Berlin", "Potsdam"])
    >>> isinstance(vocab, Vocab), len(vocab), "Potsdam" in vocab, list(vocab)
    (True, 2, True, ['Berlin', 'Potsdam'])
    >>> vocab.words, vocab.word_index["Potsdam"], vocab.word_index.get("Hamburg", -1)
    (['Berlin', 'Potsdam'], 1, -1)
    >>> vocab.words = ["Hamburg"]  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    dataclasses.FrozenInstanceError: cannot assign to field 'words'
    """

    words: list[str]
    word_index: WordIndex = field(init=False, repr=False, compare=False)
    #: How the rows of a text that is not one row (:meth:`word_rows` gives an array) become its vector:
    #: ``None`` (no such rows), ``"sum"`` (their l2-normalised sum: finalfusion's and fastText's n-grams)
    #: or ``"mean"`` (their mean: a model's tokens, as model2vec and WordLlama pool them).
    pooling: ClassVar[str | None] = None
    #: On-disk size of the words (u32 length + UTF-8 each), once known (a cache).
    _words_nbytes: int | None = field(default=None, init=False, repr=False, compare=False)

    __hash__ = None  # type: ignore[assignment]

    def _init_words(self, index: Mapping[str, int] | None) -> None:
        """Check and copy the words, and derive the word index (``__post_init__`` of every subclass)."""
        words = self.words
        if isinstance(index, WordIndex) and index.words is words:
            # Built by a reader (or build_index) over this very list: no copy, no second table.
            object.__setattr__(self, "word_index", index)
            return
        word_list = list(words)
        bad = next((w for w in cast(list[object], word_list) if not isinstance(w, str)), None)  # callers may pass anything
        if bad is not None:
            raise TypeError(f"vocabulary words must be str, got {type(bad).__name__}: {bad!r}")
        object.__setattr__(self, "words", word_list)
        object.__setattr__(self, "word_index", WordIndex(word_list))

    @property
    def upper_bound(self) -> int:
        """Exclusive upper bound of the indices this vocabulary produces (= storage rows).

        For a subword vocabulary: the words plus the subword indexer's bound.

        Examples
        --------
        >>> from finalfusion.vocab import FastTextVocab, SimpleVocab
        >>> from finalfusion.subword import FastTextIndexer
        >>> SimpleVocab(["a", "b"]).upper_bound, FastTextVocab(["a", "b"], FastTextIndexer(100)).upper_bound
        (2, 102)
        """
        return len(self.words)

    def subword_rows(self, item: str) -> npt.NDArray[np.int64]:
        """Storage rows of ``item``'s subwords: none here (a vocabulary without subwords).

        :class:`SubwordVocab` returns the rows of ``item``'s n-grams (or tokens);
        the facade embeds an unknown word as the normalised sum of these rows.

        Examples
        --------
        >>> from finalfusion.vocab import SimpleVocab
        >>> SimpleVocab(["a"]).subword_rows("b").tolist()
        []
        """
        return np.empty(0, dtype=np.int64)

    def word_rows(self, text: str) -> int | npt.NDArray[np.int64]:
        """The word rule: the storage rows ``text`` is looked up as (every lookup of a text asks this).

        An ``int`` is the text's own row, returned as stored (a known word;
        a text that is exactly one token of a model). An array holds the rows
        the text's vector is pooled from as :attr:`pooling` says (the n-grams
        of an unknown word, a model's tokens); empty when the text has no
        vector. :meth:`idx`, :meth:`~finalfusion.Embeddings.embedding`,
        batches, ``encode`` of word vocabularies, the queries and the command
        line all follow it.

        Raises
        ------
        TypeError
            If ``text`` is not a ``str``.

        Examples
        --------
        >>> from finalfusion.vocab import FastTextVocab, SimpleVocab
        >>> from finalfusion.subword import FastTextIndexer
        >>> SimpleVocab(["a"]).word_rows("a"), SimpleVocab(["a"]).word_rows("b").tolist()
        (0, [])
        >>> vocab = FastTextVocab(["ab"], FastTextIndexer(100, 3, 3))
        >>> vocab.word_rows("ab"), vocab.word_rows("cd").tolist()  # a known word, an unknown one: its n-grams' rows
        (0, [5, 13])
        """
        i: int | None = self.word_index.get(text)
        if i is not None:
            return i
        check_word(text)
        return self.subword_rows(text)

    def own_row(self, text: str) -> int | None:
        """The row that is ``text`` itself under the word rule (:meth:`word_rows` gives one ``int``), else ``None``.

        Neighbour queries leave it out of their results, as a word query leaves out its word.

        Examples
        --------
        >>> from finalfusion.vocab import SimpleVocab
        >>> SimpleVocab(["a", "b"]).own_row("b"), SimpleVocab(["a", "b"]).own_row("c")
        (1, None)
        """
        rows = self.word_rows(text)
        return rows if isinstance(rows, int) else None

    def idx(self, item: str, default: Any = None) -> Any:
        """Index of a known word, subword indices of an unknown one, else ``default``.

        Examples
        --------
        >>> from finalfusion.vocab import SimpleVocab
        >>> v = SimpleVocab(["a", "b"])
        >>> v.idx("b"), v.idx("c"), v.idx("c", default=-1)
        (1, None, -1)
        """
        return self.word_index.get(item, default)

    def __getitem__(self, item: str) -> Any:
        idx = self.idx(item)
        if idx is None:
            raise KeyError(item)
        return idx

    def __contains__(self, item: object) -> bool:
        if isinstance(item, str):
            return item in self.word_index
        if hasattr(item, "__iter__"):
            return all(w in self for w in item)
        return False

    def __iter__(self) -> Iterator[str]:
        return iter(self.words)

    def __len__(self) -> int:
        return len(self.words)

    def __eq__(self, other: object) -> bool:
        if type(self) is not type(other):
            return NotImplemented
        return all(getattr(self, f.name) == getattr(other, f.name) for f in fields(self) if f.compare)

    def __repr__(self) -> str:
        shown = ", ".join(repr(w) for w in self.words[:3])
        more = ", ..." if len(self.words) > 3 else ""
        extra = "".join(f", {f.name}={getattr(self, f.name)!r}" for f in fields(self) if f.repr and f.name != "words")
        return f"{type(self).__name__}([{shown}{more}] ({len(self.words)} words){extra})"

    # -- on-disk helpers ------------------------------------------------------------
    def _words_len(self) -> int:
        # Vocabularies are immutable, so the size is computed (or read) once.
        if self._words_nbytes is None:
            # UTF-8 of a concatenation is the concatenation of the UTF-8s: one C-level encode.
            object.__setattr__(self, "_words_nbytes", 4 * len(self.words) + len("".join(self.words).encode("utf-8")))
        return self._words_nbytes  # type: ignore[return-value]

    def _set_words_nbytes(self: _V, nbytes: int) -> _V:
        """Record the words' on-disk size measured while reading; returns ``self``."""
        object.__setattr__(self, "_words_nbytes", nbytes)
        return self

    def _write_words(self, writer: ByteWriter) -> None:
        # In slices, so the temporaries stay small (a conversion's peak memory is the matrix plus little).
        for start in range(0, len(self.words), _WRITE_WORDS):
            writer.raw(serialize_strings(self.words[start : start + _WRITE_WORDS]))

    def _repr_html_(self) -> str:
        return _display.vocab_html(self)


#: Words serialised at once by :meth:`Vocab._write_words`.
_WRITE_WORDS = 1 << 16


def serialize_strings(strings: list[str]) -> bytes:
    """``u32`` byte length + UTF-8 bytes for every string, as one ``bytes``.

    The strings are encoded in one call, joined by NUL (which then marks
    where each ends); strings containing NUL themselves are encoded one
    by one.

    Examples
    --------
    >>> serialize_strings(["ab", "é"])
    b'\\x02\\x00\\x00\\x00ab\\x02\\x00\\x00\\x00\\xc3\\xa9'
    """
    n = len(strings)
    if n == 0:
        return b""
    joined = "\0".join(strings)
    if joined.count("\0") != n - 1:
        return _join_strings([w.encode("utf-8") for w in strings])
    data = np.frombuffer(joined.encode("utf-8"), dtype=np.uint8)
    ends = np.append(np.flatnonzero(data == 0), len(data))
    lens = np.diff(ends, prepend=-1) - 1
    return _join_strings_bytes(lens, data[data != 0])


def _join_strings(encoded: list[bytes]) -> bytes:
    """``u32`` length + bytes for every string, interleaved with numpy in one pass."""
    if not encoded:
        return b""
    lens = np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded))
    return _join_strings_bytes(lens, np.frombuffer(b"".join(encoded), dtype=np.uint8))


def _join_strings_bytes(lens: npt.NDArray[np.int64], text_bytes: npt.NDArray[np.uint8]) -> bytes:
    """Interleave ``u32`` lengths with the concatenated string bytes."""
    n = len(lens)
    starts = np.zeros(n, dtype=np.int64)
    np.cumsum(lens[:-1] + 4, out=starts[1:])
    out = np.empty(int(starts[-1] + lens[-1] + 4), dtype=np.uint8)
    len_pos = (starts[:, None] + np.arange(4)).reshape(-1)
    out[len_pos] = lens.astype("<u4").view(np.uint8)
    text = np.ones(len(out), dtype=bool)
    text[len_pos] = False
    out[text] = text_bytes
    return out.tobytes()


@dataclass(frozen=True, eq=False, repr=False)
class SubwordVocab(Vocab, Generic[_I]):
    """A vocabulary that embeds unknown words through their n-grams.

    Storage rows ``0..len(words)-1`` hold the words, the rows after them the
    subwords, so subword indices are offset by the number of words.

    Parameters
    ----------
    words
        Unique words, in index order.
    indexer
        The subword indexer; each subclass requires its own kind (and the
        hashed vocabularies default it: ``None`` means the default too, as in 0.7).

    Raises
    ------
    TypeError
        If the indexer is not of the kind the vocabulary needs, or a word is not a ``str``.
    ValueError
        For duplicate words.

    Examples
    --------
    >>> from finalfusion.vocab import FinalfusionBucketVocab
    >>> from finalfusion.subword import FinalfusionHashIndexer
    >>> vocab = FinalfusionBucketVocab(["ab", "b"], FinalfusionHashIndexer(10, 3, 4))
    >>> isinstance(vocab, SubwordVocab), vocab.idx("b"), vocab.idx("xy")
    (True, 1, [164, 653, 219])
    >>> vocab.indexer is vocab.subword_indexer
    True
    """

    indexer: _I
    pooling: ClassVar[str | None] = "sum"
    _: KW_ONLY
    #: A :class:`WordIndex` already built over ``words`` (readers pass theirs), else ignored.
    _index: InitVar[Mapping[str, int] | None] = None
    #: The kind of indexer the subclass needs.
    _indexer_type: ClassVar[type[SubwordIndexer]] = SubwordIndexer

    def __post_init__(self, _index: Mapping[str, int] | None) -> None:
        if cast(object, self.indexer) is None:
            # finalfusion-python 0.7 spelled "the default indexer" as None.
            factory = self.__dataclass_fields__["indexer"].default_factory
            if factory is not MISSING:
                object.__setattr__(self, "indexer", factory())
        if not isinstance(self.indexer, self._indexer_type):
            name = self._indexer_type.__name__
            article = "an" if name[0] in "AEIOU" else "a"
            raise TypeError(f"indexer must be {article} {name}, got {type(self.indexer).__name__}")
        self._init_words(_index)

    @property
    def subword_indexer(self) -> _I:
        """The indexer mapping n-grams to subword indices (the ``indexer`` field; the 0.7 name).

        Examples
        --------
        >>> from finalfusion.vocab import FastTextVocab
        >>> FastTextVocab(["ab"]).subword_indexer  # the default indexer
        FastTextIndexer(n_buckets=2000000, min_n=3, max_n=6)
        """
        return self.indexer

    @property
    def min_n(self) -> int:
        """Shortest n-gram length.

        Examples
        --------
        >>> from finalfusion.vocab import FinalfusionBucketVocab
        >>> from finalfusion.subword import FinalfusionHashIndexer
        >>> FinalfusionBucketVocab(["ab"], FinalfusionHashIndexer(10, 2, 4)).min_n
        2
        """
        return self.indexer.min_n

    @property
    def max_n(self) -> int:
        """Longest n-gram length.

        Examples
        --------
        >>> from finalfusion.vocab import FinalfusionBucketVocab
        >>> FinalfusionBucketVocab(["ab"]).max_n  # default indexer: 3- to 6-grams
        6
        """
        return self.indexer.max_n

    @property
    def upper_bound(self) -> int:
        return len(self.words) + self.indexer.upper_bound

    def idx(self, item: str, default: Any = None) -> Any:
        """Index of a known word, else the list of its subword indices, else ``default``.

        Subword indices are offset by the number of words, so they are
        storage rows.

        Examples
        --------
        >>> from finalfusion.vocab import ExplicitVocab
        >>> from finalfusion.subword import ExplicitIndexer
        >>> vocab = ExplicitVocab(["ab"], ExplicitIndexer(["<ab", "ab>"], 3, 3))
        >>> vocab.idx("ab"), vocab.idx("<ab>"), vocab.idx("zz"), vocab.idx("zz", default=-1)  # <ab>: n-grams <<a, <ab, ab>, b>>
        (0, [1, 2], None, -1)
        """
        i = self.word_index.get(item)
        if i is not None:
            return i
        sub = self.subword_indices(item)
        return sub if sub else default

    def subwords(self, item: str, bracket: bool = True) -> list[str]:
        """The n-grams of ``item`` (bracketed with ``<``/``>`` unless ``bracket=False``).

        Examples
        --------
        >>> from finalfusion.vocab import FinalfusionBucketVocab
        >>> from finalfusion.subword import FinalfusionHashIndexer
        >>> vocab = FinalfusionBucketVocab([], FinalfusionHashIndexer(10, 3, 4))
        >>> vocab.subwords("abc"), vocab.subwords("abc", bracket=False)
        (['<abc', '<ab', 'abc>', 'abc', 'bc>'], ['abc'])
        """
        return ngrams(item, self.min_n, self.max_n, bracket=bracket)

    def subword_indices(self, item: str, bracket: bool = True, with_ngrams: bool = False) -> list[Any]:
        """Subword indices (storage rows) of ``item``'s n-grams; see the indexer.

        Examples
        --------
        >>> from finalfusion.vocab import FastTextVocab
        >>> from finalfusion.subword import FastTextIndexer
        >>> vocab = FastTextVocab(["ab"], FastTextIndexer(100, 3, 3))
        >>> vocab.subword_indices("ab"), vocab.subword_indices("ab", with_ngrams=True)  # buckets 8 and 56, after 1 word
        ([9, 57], [('<ab', 9), ('ab>', 57)])
        """
        return self.indexer.subword_indices(item, offset=len(self.words), bracket=bracket, with_ngrams=with_ngrams)

    def subword_rows(self, item: str) -> npt.NDArray[np.int64]:
        """Storage rows of ``item``'s n-grams as an array (cached per word).

        Examples
        --------
        >>> from finalfusion.vocab import FastTextVocab
        >>> from finalfusion.subword import FastTextIndexer
        >>> FastTextVocab(["ab"], FastTextIndexer(100, 3, 3)).subword_rows("ab").tolist()
        [9, 57]
        """
        return self.indexer.word_rows(item, len(self.words))

    def word_rows(self, text: str) -> int | npt.NDArray[np.int64]:
        """The word rule (:meth:`Vocab.word_rows`): a known word's row, else the storage rows of its n-grams (``indexer.word_rows``).

        Examples
        --------
        >>> from finalfusion.vocab import FastTextVocab
        >>> from finalfusion.subword import FastTextIndexer
        >>> vocab = FastTextVocab(["ab"], FastTextIndexer(100, 3, 3))
        >>> vocab.word_rows("ab"), vocab.word_rows("cd").tolist()
        (0, [5, 13])
        """
        i: int | None = self.word_index.get(text)
        if i is not None:
            return i
        return self.indexer.word_rows(text, len(self.words))  # checks the type of a word it has not cached (a str)

    def batch_subword_rows(self, items: Sequence[str]) -> Iterator[tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]]:
        """Storage rows of the n-grams of many words, grouped by count.

        Yields ``(positions, rows)`` with a ``(len(positions), K)`` matrix of
        storage rows; see ``SubwordIndexer.batch_groups``.

        Examples
        --------
        >>> from finalfusion.vocab import FastTextVocab
        >>> from finalfusion.subword import FastTextIndexer
        >>> vocab = FastTextVocab(["ab"], FastTextIndexer(100, 3, 3))
        >>> [(positions.tolist(), rows.tolist()) for positions, rows in vocab.batch_subword_rows(["ab", "a", "cd"])]
        [([1], [[1]]), ([0, 2], [[9, 57], [5, 13]])]
        """
        offset = len(self.words)
        for pos, idx in self.indexer.batch_groups(items):
            if offset:
                idx += offset
            yield pos, idx


def check_range_field(reader: ByteReader, min_n: int, max_n: int, offset: int) -> None:
    """Validate an n-gram range read from a file (``max_n`` at most ``finalfusion.limits.MAX_NGRAM_LEN``)."""
    if not 1 <= min_n <= max_n:
        raise FormatError(
            "invalid n-gram length range", offset=offset, chunk=reader.chunk, expected="1 <= min_n <= max_n", found=f"min_n={min_n}, max_n={max_n}"
        )
    if max_n > limits.MAX_NGRAM_LEN:
        raise FormatError(
            "n-grams longer than finalfusion.limits.MAX_NGRAM_LEN (real models use 3..6; raise the limit for longer n-grams)",
            offset=offset + 4,
            chunk=reader.chunk,
            expected=f"max_n <= {limits.MAX_NGRAM_LEN}",
            found=max_n,
        )
