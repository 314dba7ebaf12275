"""Subword vocabulary chunks (docs/format.md §5.3, §5.7, §5.8, §5.9).

``BucketSubwordVocab`` (3) and ``FastTextSubwordVocab`` (7)::

    0   u64  n_words
    8   u32  min_n
    12  u32  max_n
    16  u32  bucket exponent (3) / number of buckets (7)
    20  string x n_words

``ExplicitSubwordVocab`` (8)::

    0   u64  n_words
    8   u64  n_ngrams
    16  u32  min_n
    20  u32  max_n
    24  string x n_words
    ..  (string ngram, u64 index) x n_ngrams

``FloretSubwordVocab`` (9), no words::

    0   u32  min_n
    4   u32  max_n
    8   u64  n_buckets
    16  u32  n_hashes (1..4)
    20  u32  seed
    24  string bow, string eow
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

import numpy as np

from finalfusion._binary import ByteReader, ByteWriter
from finalfusion.chunks import ChunkIdentifier, register
from finalfusion.errors import FormatError, Truncated
from finalfusion.subword.indexers import ExplicitIndexer, FastTextIndexer, FinalfusionHashIndexer, FloretIndexer, SubwordIndexer
from finalfusion.subword.ngrams import ngram_table
from finalfusion.vocab.base import SubwordVocab, check_range_field, read_words

if TYPE_CHECKING:
    from typing_extensions import Self

__all__ = ["ExplicitVocab", "FastTextVocab", "FinalfusionBucketVocab", "FloretVocab"]

_U64 = struct.Struct("<Q")


_H = TypeVar("_H", FinalfusionHashIndexer, FastTextIndexer)


@dataclass(frozen=True, eq=False, repr=False)
class _HashedVocab(SubwordVocab[_H]):
    """What the two hashed vocabularies share: their layout, with one ``u32`` that differs.

    ``FinalfusionBucketVocab`` stores the bucket *exponent*, ``FastTextVocab``
    the *number* of buckets, each with its own valid range; everything else
    (reading, writing, conversion to an explicit vocabulary) is written here once.
    """

    #: What the third ``u32`` holds (for messages), the indexer attribute it comes from, and its valid range.
    _bucket_what: ClassVar[str]
    _bucket_attr: ClassVar[str]
    _bucket_range: ClassVar[tuple[int, int, str]]

    @classmethod
    def read_payload(cls, reader: ByteReader) -> Self:
        n = reader.u64("number of words")
        at = reader.pos
        min_n, max_n = reader.u32("min_n"), reader.u32("max_n")
        check_range_field(reader, min_n, max_n, at)
        value = reader.u32(cls._bucket_what)
        lo, hi, shown = cls._bucket_range
        if not lo <= value <= hi:
            raise FormatError(f"{cls._bucket_what} out of range", offset=at + 8, chunk=reader.chunk, expected=shown, found=value)
        words, index, nbytes = read_words(reader, n)
        indexer: Any = cls._indexer_type(value, min_n, max_n)  # type: ignore[call-arg]  # both hashed indexers take (buckets, min_n, max_n)
        return cls(words, indexer, _index=index)._set_words_nbytes(nbytes)

    def write_payload(self, writer: ByteWriter) -> None:
        """Write the word count, ``min_n``, ``max_n``, the bucket exponent (3) or number of buckets (7), and the words.

        Examples
        --------
        >>> import io
        >>> buf = io.BytesIO()
        >>> FinalfusionBucketVocab(["ab"], FinalfusionHashIndexer(10, 3, 4)).write_payload(ByteWriter(buf))
        >>> [int.from_bytes(buf.getvalue()[at : at + 4], "little") for at in (8, 12, 16)]  # min_n, max_n, exponent
        [3, 4, 10]
        >>> buf = io.BytesIO()
        >>> vocab = FastTextVocab(["und"], FastTextIndexer(100))
        >>> vocab.write_payload(ByteWriter(buf))
        >>> int.from_bytes(buf.getvalue()[16:20], "little"), len(buf.getvalue()) == vocab.payload_len(0)  # number of buckets
        (100, True)
        """
        writer.u64(len(self.words))
        writer.u32(self.min_n)
        writer.u32(self.max_n)
        writer.u32(getattr(self.indexer, self._bucket_attr))
        self._write_words(writer)

    def payload_len(self, offset: int) -> int:
        """20 bytes of counts and settings plus the words (4 bytes of length and the UTF-8 each).

        Examples
        --------
        >>> FinalfusionBucketVocab(["ab", "c"]).payload_len(0), FastTextVocab(["und"]).payload_len(0)  # 20 + (4 + 2) + (4 + 1), 20 + 4 + 3
        (31, 27)
        """
        return 20 + self._words_len()

    def to_explicit(self) -> ExplicitVocab:
        """An :class:`ExplicitVocab` keeping the buckets of in-vocabulary n-grams.

        N-grams that share a bucket keep sharing an index; see :func:`bucket_to_explicit_vocab`.
        To convert embeddings (the storage rows too), use :meth:`~finalfusion.Embeddings.bucket_to_explicit`.

        Examples
        --------
        >>> explicit = FinalfusionBucketVocab(["ab", "b"], FinalfusionHashIndexer(10, 3, 4)).to_explicit()
        >>> explicit.words, explicit.subword_indexer.ngram_index
        (['ab', 'b'], {'<ab>': 0, '<ab': 1, 'ab>': 2, '<b>': 3})
        >>> explicit = FastTextVocab(["ab"], FastTextIndexer(100, 3, 3)).to_explicit()
        >>> explicit.subword_indexer.ngram_index, explicit.upper_bound
        ({'<ab': 0, 'ab>': 1}, 3)
        """
        return bucket_to_explicit_vocab(self)[0]


@register
@dataclass(frozen=True, eq=False, repr=False)
class FinalfusionBucketVocab(_HashedVocab[FinalfusionHashIndexer]):
    """Words plus finalfusion-hashed n-gram buckets (chunk id 3).

    Parameters
    ----------
    words
        Unique words, in index order.
    indexer
        A :class:`~finalfusion.subword.FinalfusionHashIndexer`; default
        ``FinalfusionHashIndexer(21, 3, 6)``.

    Examples
    --------
    >>> from finalfusion.subword import FinalfusionHashIndexer
    >>> v = FinalfusionBucketVocab(["one"], FinalfusionHashIndexer(10))
    >>> v.upper_bound, v.idx("one"), v.idx("two")[:2]
    (1025, 0, [383, 642])
    """

    indexer: FinalfusionHashIndexer = field(default_factory=FinalfusionHashIndexer)
    chunk_id: ClassVar[ChunkIdentifier] = ChunkIdentifier.BucketSubwordVocab
    _indexer_type: ClassVar[type[SubwordIndexer]] = FinalfusionHashIndexer
    _bucket_what: ClassVar[str] = "bucket exponent"
    _bucket_attr: ClassVar[str] = "buckets_exp"
    _bucket_range: ClassVar[tuple[int, int, str]] = (0, 63, "0..63")


@register
@dataclass(frozen=True, eq=False, repr=False)
class FastTextVocab(_HashedVocab[FastTextIndexer]):
    """Words plus fastText-hashed n-gram buckets (chunk id 7).

    Parameters
    ----------
    words
        Unique words, in index order.
    indexer
        A :class:`~finalfusion.subword.FastTextIndexer`; default
        ``FastTextIndexer(2000000, 3, 6)``.

    Examples
    --------
    >>> from finalfusion.subword import FastTextIndexer
    >>> v = FastTextVocab(["und"], FastTextIndexer(100))
    >>> v.upper_bound
    101
    """

    indexer: FastTextIndexer = field(default_factory=FastTextIndexer)
    chunk_id: ClassVar[ChunkIdentifier] = ChunkIdentifier.FastTextSubwordVocab
    _indexer_type: ClassVar[type[SubwordIndexer]] = FastTextIndexer
    _bucket_what: ClassVar[str] = "number of buckets"
    _bucket_attr: ClassVar[str] = "n_buckets"
    _bucket_range: ClassVar[tuple[int, int, str]] = (1, 2**31 - 1, "1..2**31-1")


@register
@dataclass(frozen=True, eq=False, repr=False)
class ExplicitVocab(SubwordVocab[ExplicitIndexer]):
    """Words plus an explicit n-gram table (chunk id 8).

    Parameters
    ----------
    words
        Unique words, in index order.
    indexer
        The :class:`~finalfusion.subword.ExplicitIndexer`.

    Examples
    --------
    >>> from finalfusion.subword import ExplicitIndexer
    >>> v = ExplicitVocab(["ab"], ExplicitIndexer(["<ab", "ab>"], 3, 3))
    >>> v.idx("xab>"), v.idx("zz")
    ([2], None)
    """

    indexer: ExplicitIndexer
    chunk_id: ClassVar[ChunkIdentifier] = ChunkIdentifier.ExplicitSubwordVocab
    length_may_be_short: ClassVar[bool] = True
    _indexer_type: ClassVar[type[SubwordIndexer]] = ExplicitIndexer

    @classmethod
    def read_payload(cls, reader: ByteReader) -> ExplicitVocab:
        n_words = reader.u64("number of words")
        n_ngrams = reader.u64("number of n-grams")
        at = reader.pos
        min_n, max_n = reader.u32("min_n"), reader.u32("max_n")
        check_range_field(reader, min_n, max_n, at)
        words, index, nbytes = read_words(reader, n_words)
        table_at = reader.pos
        if n_ngrams > reader.remaining // 12:
            raise Truncated(
                f"too few bytes for {n_ngrams} n-grams",
                offset=table_at,
                chunk=reader.chunk,
                expected=f"at least {12 * n_ngrams} bytes",
                found=f"{reader.remaining} bytes",
            )
        ngrams: list[str] = []
        ngram_index: dict[str, int] = {}
        next_new = 0
        for k in range(n_ngrams):
            at = reader.pos
            ngram = reader.string("n-gram")
            i = reader.u64("n-gram index")
            if ngram in ngram_index:
                raise FormatError(f"duplicate n-gram {ngram!r}", offset=at, chunk=reader.chunk, expected="distinct n-grams", found=ngram)
            if i == next_new:
                next_new += 1
            elif i > next_new:
                raise FormatError(
                    f"n-gram {k} ({ngram!r}) breaks first-appearance numbering of indices",
                    offset=reader.pos - 8,
                    chunk=reader.chunk,
                    expected=f"an index <= {next_new}",
                    found=i,
                )
            ngrams.append(ngram)
            ngram_index[ngram] = i
        return cls(words, ExplicitIndexer(ngrams, min_n, max_n, ngram_index), _index=index)._set_words_nbytes(nbytes)

    def legacy_length(self, declared: int, consumed: int) -> str | None:
        """Accept the length finalfusion-python 0.7 writes: 8 bytes short per n-gram (docs/format.md §5.8).

        Examples
        --------
        >>> vocab = ExplicitVocab(["ab"], ExplicitIndexer(["<ab", "ab>"], 3, 3))
        >>> vocab.payload_len(0)
        60
        >>> vocab.legacy_length(declared=44, consumed=60)[:54]  # 2 n-grams x 8 bytes short: accepted, with a warning
        'ExplicitSubwordVocab chunk declares 44 bytes but holds'
        >>> vocab.legacy_length(declared=56, consumed=60) is None  # any other mismatch is an error
        True
        """
        if consumed - declared == 8 * len(self.indexer.ngrams) and declared < consumed:
            return (
                f"ExplicitSubwordVocab chunk declares {declared} bytes but holds {consumed}: "
                "the length finalfusion-python 0.7 writes (8 bytes short per n-gram); read correctly, written back fixed"
            )
        return None

    def write_payload(self, writer: ByteWriter) -> None:
        """Write the counts, ``min_n``, ``max_n``, the words, then every n-gram with its ``u64`` index.

        Raises
        ------
        ValueError
            If the n-gram indices are not numbered by first appearance (see
            :meth:`~finalfusion.subword.ExplicitIndexer.first_noncanonical`).

        Examples
        --------
        >>> import io
        >>> buf = io.BytesIO()
        >>> ExplicitVocab(["ab"], ExplicitIndexer(["<ab", "ab>"], 3, 3)).write_payload(ByteWriter(buf))
        >>> buf.getvalue()[-15:]  # the last n-gram: u32 length, UTF-8, u64 index
        b'\\x03\\x00\\x00\\x00ab>\\x01\\x00\\x00\\x00\\x00\\x00\\x00\\x00'
        """
        indexer = self.subword_indexer
        bad = indexer.first_noncanonical()
        if bad is not None:
            raise ValueError(
                f"cannot write n-gram indices that are not numbered by first appearance (n-gram {bad[0]} has index {bad[2]}, "
                f"expected at most {bad[1]}); finalfusion-rust would renumber them and scramble the rows"
            )
        writer.u64(len(self.words))
        writer.u64(len(indexer.ngrams))
        writer.u32(self.min_n)
        writer.u32(self.max_n)
        self._write_words(writer)
        parts: list[bytes] = []
        index = indexer.ngram_index
        for ngram in indexer.ngrams:
            b = ngram.encode("utf-8")
            parts.append(struct.pack("<I", len(b)) + b + _U64.pack(index[ngram]))
        writer.raw(b"".join(parts))

    def payload_len(self, offset: int) -> int:
        """24 bytes of counts and settings, the words, and per n-gram 12 bytes plus its UTF-8.

        Examples
        --------
        >>> ExplicitVocab(["ab"], ExplicitIndexer(["<ab", "ab>"], 3, 3)).payload_len(0)  # 24 + (4 + 2) + 2 * (12 + 3)
        60
        """
        ngrams = self.subword_indexer.ngrams
        return 24 + self._words_len() + sum(12 + len(g.encode("utf-8")) for g in ngrams)


@register
@dataclass(frozen=True, eq=False, repr=False)
class FloretVocab(SubwordVocab[FloretIndexer]):
    """floret's word-less vocabulary: every word is embedded through hashed n-grams (chunk id 9).

    Parameters
    ----------
    indexer
        The :class:`~finalfusion.subword.FloretIndexer`.

    Examples
    --------
    >>> from finalfusion.subword import FloretIndexer
    >>> v = FloretVocab(FloretIndexer(10, 3, 6, n_hashes=2))
    >>> len(v), v.upper_bound, v.idx("a")
    (0, 10, [5, 2, 5, 2])
    """

    #: floret has no words: the field is always empty and not a parameter.
    words: list[str] = field(default_factory=list, init=False)
    indexer: FloretIndexer
    chunk_id: ClassVar[ChunkIdentifier] = ChunkIdentifier.FloretSubwordVocab
    _indexer_type: ClassVar[type[SubwordIndexer]] = FloretIndexer

    @classmethod
    def read_payload(cls, reader: ByteReader) -> FloretVocab:
        at = reader.pos
        min_n, max_n = reader.u32("min_n"), reader.u32("max_n")
        check_range_field(reader, min_n, max_n, at)
        n_buckets = reader.u64("number of buckets")
        if n_buckets < 1:
            raise FormatError("floret vocabulary has no buckets", offset=at + 8, chunk=reader.chunk, expected="at least 1", found=0)
        n_hashes = reader.u32("number of hashes")
        if not 1 <= n_hashes <= 4:
            raise FormatError("number of hashes out of range", offset=at + 16, chunk=reader.chunk, expected="1..4", found=n_hashes)
        seed = reader.u32("seed")
        bow = reader.string("begin-of-word marker")
        eow = reader.string("end-of-word marker")
        return cls(FloretIndexer(n_buckets, min_n, max_n, n_hashes=n_hashes, seed=seed, bow=bow, eow=eow))

    def write_payload(self, writer: ByteWriter) -> None:
        """Write the indexer's settings: n-gram range, buckets, hashes, seed and the word markers (there are no words).

        Examples
        --------
        >>> import io
        >>> buf = io.BytesIO()
        >>> FloretVocab(FloretIndexer(10, 3, 6, n_hashes=2)).write_payload(ByteWriter(buf))
        >>> buf.getvalue()[-10:]  # the markers, each with its u32 length
        b'\\x01\\x00\\x00\\x00<\\x01\\x00\\x00\\x00>'
        """
        idx = self.subword_indexer
        writer.u32(idx.min_n)
        writer.u32(idx.max_n)
        writer.u64(idx.n_buckets)
        writer.u32(idx.n_hashes)
        writer.u32(idx.seed)
        writer.string(idx.bow)
        writer.string(idx.eow)

    def payload_len(self, offset: int) -> int:
        """32 bytes of settings plus the UTF-8 of the begin- and end-of-word markers.

        Examples
        --------
        >>> FloretVocab(FloretIndexer(10, 3, 6)).payload_len(0)  # 32 + len("<") + len(">")
        34
        """
        idx = self.subword_indexer
        return 32 + len(idx.bow.encode("utf-8")) + len(idx.eow.encode("utf-8"))


def bucket_to_explicit_vocab(vocab: _HashedVocab[Any]) -> tuple[ExplicitVocab, Any]:
    """Convert a hashed vocabulary to an explicit one.

    Every n-gram of every known word gets the bucket it hashes to; buckets
    are renumbered densely by first appearance (word order, then n-gram
    order), so colliding n-grams keep sharing a row.

    Returns
    -------
    vocab, buckets
        The explicit vocabulary and, for each new subword index, the old
        bucket number (to copy storage rows).
    """
    words = vocab.words
    indexer = vocab.subword_indexer
    rows, _ = indexer.batch_indices(words) if words else (np.empty(0, np.int64), np.empty(0, np.int64))
    joined_table = ngram_table([f"<{w}>" for w in words], indexer.min_n, indexer.max_n) if words else None
    ngram_strings = joined_table.strings("".join(f"<{w}>" for w in words)) if joined_table is not None else []
    ngram_index: dict[str, int] = {}
    bucket_to_new: dict[int, int] = {}
    ngram_list: list[str] = []
    for ngram, bucket in zip(ngram_strings, rows.tolist(), strict=True):
        if ngram in ngram_index:
            continue
        new = bucket_to_new.setdefault(bucket, len(bucket_to_new))
        ngram_index[ngram] = new
        ngram_list.append(ngram)
    buckets = np.fromiter(bucket_to_new.keys(), dtype=np.int64, count=len(bucket_to_new))
    explicit = ExplicitVocab(words, ExplicitIndexer(ngram_list, indexer.min_n, indexer.max_n, ngram_index))
    return explicit, buckets
