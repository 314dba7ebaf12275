"""Token vocabularies of models: unknown words through the model's own tokenizer.

A :class:`TokenizerVocab` holds the token strings of a model (row ``i`` of
the table is token id ``i``) and a :class:`~finalfusion.vocab.Tokenizer`
(:mod:`finalfusion._tokenizers`: ``sentencepiece`` for SentencePiece models,
``tokenizers`` for Hugging Face ``tokenizer.json`` files) that splits any
other word into token ids with the real library.

The word rule (issue 25, :meth:`TokenizerVocab.word_rows`): :meth:`TokenizerVocab.idx`,
:class:`~finalfusion.Embeddings` and the queries look up *every*
word of a model vocabulary through the tokenizer, as the model's own library
reads it in running text (``house`` is ``▁house`` for a SentencePiece model,
not the mid-word piece ``house``), and averages the model's rows of its
tokens (control, unknown and unused tokens dropped; see
:mod:`finalfusion._encode`). A token string's own row is reached with
:meth:`TokenizerVocab.token_id` and :meth:`~finalfusion.Embeddings.token_embedding`.

On disk the vocabulary is an ordinary ``SimpleVocab`` chunk (every
finalfusion reader can load the file); the tokenizer travels in the
metadata as one compact string (the ``[tokenizer]`` table of
:mod:`finalfusion.vocab._tokenizer_table`): :func:`with_tokenizer_table`
adds it when a file is written, :func:`restore_tokenizer_vocab` turns the
pair back into a :class:`TokenizerVocab` when
:func:`finalfusion.load_finalfusion` reads it.

Tokenizing needs the optional packages (``pip install
'finalfusion-py[models]'``); without them, loading and lookups of known
tokens work, and looking up an unknown word raises
:class:`~finalfusion.errors.MissingExtraError` naming the extra. A word
longer than :data:`finalfusion.limits.MAX_TOKENIZE_BYTES` bytes of UTF-8
raises :class:`~finalfusion.errors.LimitExceeded` before anything is
tokenized.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, cast

import numpy as np
import numpy.typing as npt

from finalfusion._binary import ByteReader, ByteWriter
from finalfusion._tokenizers import Tokenizer
from finalfusion.chunks import ChunkIdentifier
from finalfusion.errors import FormatError, MissingExtraError
from finalfusion.metadata import Metadata
from finalfusion.vocab._tokenizer_table import METADATA_KEY, is_tokenizer_table, tokenizer_from_table, tokenizer_table
from finalfusion.vocab._words import check_word
from finalfusion.vocab.base import SubwordVocab, Vocab
from finalfusion.vocab.simple import SimpleVocab

__all__ = ["MissingExtraError", "TokenizerVocab", "restore_tokenizer_vocab", "with_tokenizer_table"]


@dataclass(frozen=True, eq=False, repr=False)
class TokenizerVocab(SubwordVocab[Any]):
    """The tokens of a model; other words are embedded through the model's tokenizer.

    Row ``i`` of the storage is token id ``i``; there are no separate
    subword rows (``upper_bound == len(words)``). ``in``, ``word_index``
    and :meth:`token_id` are over token strings; every lookup of a text --
    :meth:`idx`, :class:`~finalfusion.Embeddings`, the queries -- goes through the
    tokenizer (the word rule, :meth:`word_rows`): the text is split
    with the real library, control/unknown/unused tokens (and ids the table
    has no row for) are dropped, and the model's rows of the remaining
    tokens are averaged. :meth:`token_id` names a token string's own row.
    A word longer than :data:`finalfusion.limits.MAX_TOKENIZE_BYTES` bytes
    of UTF-8 raises :class:`~finalfusion.errors.LimitExceeded` instead of
    being tokenized; batches are tokenized in blocks of bounded bytes. A
    word with a lone surrogate (not UTF-8 text) has no tokens, so no
    vector; the other words of its batch are looked up as usual, and a
    text loses only its whitespace-separated words that hold one
    (:func:`finalfusion._tokenizers.encodable_text`).

    Written to a finalfusion file, this vocabulary is a ``SimpleVocab``
    chunk and the tokenizer goes into the metadata (see
    :func:`~finalfusion.vocab._tokenizer_table.tokenizer_table`).

    Parameters
    ----------
    words
        The token strings, in id order (unique).
    indexer
        The model's :class:`~finalfusion.vocab.Tokenizer` (usually passed positionally). The
        field has the name every subword vocabulary gives its indexer;
        :attr:`tokenizer` reads it.

    Examples
    --------
    >>> import pytest; _ = pytest.importorskip("tokenizers")
    >>> from finalfusion._tokenizers import _TOY_JSON, HuggingFaceTokenizer
    >>> vocab = TokenizerVocab(["[UNK]", "[CLS]", "ab", "a", "c", "b"], HuggingFaceTokenizer(_TOY_JSON))
    >>> vocab.idx("ab"), vocab.idx("abcab"), vocab.subwords("abcab"), vocab.upper_bound
    (2, [2, 4, 2], ['ab', 'c', 'ab'], 6)
    """

    #: Not in the constructor: the ids the tokenizer drops, as a lookup table (built on first use).
    _allowed: npt.NDArray[np.bool_] | None = field(default=None, init=False, repr=False, compare=False)
    chunk_id: ClassVar[ChunkIdentifier] = ChunkIdentifier.SimpleVocab
    _indexer_type: ClassVar[type[Any]] = Tokenizer
    pooling: ClassVar[str | None] = "mean"

    def __post_init__(self, _index: Mapping[str, int] | None) -> None:
        if not isinstance(self.indexer, Tokenizer):
            raise TypeError(f"tokenizer must be a Tokenizer, got {type(self.indexer).__name__}")
        super().__post_init__(_index)

    @property
    def tokenizer(self) -> Tokenizer:
        """The model's tokenizer (the ``indexer`` field: it plays the indexer's part).

        Examples
        --------
        >>> from finalfusion.vocab import HuggingFaceTokenizer
        >>> TokenizerVocab(["a"], HuggingFaceTokenizer('{"model": {}}')).tokenizer.kind
        'huggingface'
        """
        return cast(Tokenizer, self.indexer)

    def word_rows(self, text: str) -> int | npt.NDArray[np.int64]:
        """The word rule of a model: the rows of ``text``'s tokens as the model's tokenizer splits it (:meth:`subword_rows`).

        A text that is exactly one kept token is that token's row (an
        ``int``); otherwise the array of its token rows, averaged into its
        vector (empty: no vector). Never the token string's own row: ``Hello``
        is ``▁Hello`` for a SentencePiece model (that is how the model reads
        it in running text); :meth:`token_id` names a token string's row.

        Raises
        ------
        TypeError
            If ``text`` is not a ``str``.
        MissingExtraError
            If the tokenizer's package is not installed.
        finalfusion.errors.LimitExceeded
            If ``text`` is longer than :data:`finalfusion.limits.MAX_TOKENIZE_BYTES` bytes of UTF-8.

        Examples
        --------
        >>> import pytest; _ = pytest.importorskip("tokenizers")
        >>> from finalfusion._tokenizers import _TOY_JSON, HuggingFaceTokenizer
        >>> vocab = TokenizerVocab(["[UNK]", "[CLS]", "ab", "a", "c", "b"], HuggingFaceTokenizer(_TOY_JSON))
        >>> vocab.word_rows("ab"), vocab.word_rows("cab").tolist(), vocab.word_rows("?").tolist()
        (2, [4, 2], [])
        """
        check_word(text)
        rows = self.subword_rows(text)
        return int(rows[0]) if len(rows) == 1 else rows

    def idx(self, item: str, default: Any = None) -> Any:
        """The word rule (:meth:`word_rows`): the row of a text that is one token, the list of its token rows, else ``default``.

        As for the subword vocabularies, a list means "several rows, pooled"
        (here averaged); an ``int`` is the row the text is looked up as,
        which is not always the token string ``item`` (use :meth:`token_id`
        for that).

        Examples
        --------
        >>> import pytest; _ = pytest.importorskip("tokenizers")
        >>> from finalfusion._tokenizers import _TOY_JSON, HuggingFaceTokenizer
        >>> vocab = TokenizerVocab(["[UNK]", "[CLS]", "ab", "a", "c", "b"], HuggingFaceTokenizer(_TOY_JSON))
        >>> vocab.idx("ab"), vocab.idx("cab"), vocab.idx("?"), vocab.idx("?", default=-1)
        (2, [4, 2], None, -1)
        """
        rows = self.word_rows(item)
        if isinstance(rows, int):
            return rows
        return rows.tolist() if len(rows) else default

    def token_id(self, token: str) -> int | None:
        """The id (storage row) of the token string ``token`` exactly, or ``None``; no tokenizer involved.

        Examples
        --------
        >>> from finalfusion.vocab import HuggingFaceTokenizer
        >>> vocab = TokenizerVocab(["<unk>", "\u2581house", "house"], HuggingFaceTokenizer("{}"))
        >>> vocab.token_id("\u2581house"), vocab.token_id("house"), vocab.token_id("houses")
        (1, 2, None)
        """
        i: int | None = self.word_index.get(token)
        return i

    @property
    def min_n(self) -> int:
        """Not applicable: tokens have no fixed n-gram lengths (raises ``AttributeError``).

        Examples
        --------
        >>> import pytest; _ = pytest.importorskip("tokenizers")
        >>> from finalfusion._tokenizers import _TOY_JSON, HuggingFaceTokenizer
        >>> TokenizerVocab(["[UNK]", "a"], HuggingFaceTokenizer(_TOY_JSON)).min_n
        Traceback (most recent call last):
        ...
        AttributeError: a TokenizerVocab has no n-gram lengths
        """
        raise AttributeError("a TokenizerVocab has no n-gram lengths")

    @property
    def max_n(self) -> int:
        """Not applicable: tokens have no fixed n-gram lengths (raises ``AttributeError``).

        Examples
        --------
        >>> import pytest; _ = pytest.importorskip("tokenizers")
        >>> from finalfusion._tokenizers import _TOY_JSON, HuggingFaceTokenizer
        >>> hasattr(TokenizerVocab(["[UNK]", "a"], HuggingFaceTokenizer(_TOY_JSON)), "max_n")
        False
        """
        raise AttributeError("a TokenizerVocab has no n-gram lengths")

    @property
    def upper_bound(self) -> int:
        return len(self.words)

    def _allowed_ids(self) -> npt.NDArray[np.bool_]:
        allowed = self._allowed
        if allowed is None:
            allowed = np.ones(len(self.words) + 1, dtype=bool)
            allowed[-1] = False  # the slot of every id the table has no row for
            skip = [i for i in self.tokenizer.skip_ids if 0 <= i < len(self.words)]
            allowed[skip] = False
            object.__setattr__(self, "_allowed", allowed)
        return allowed

    def _clip(self, ids: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        n = len(self.words)
        return np.where((ids >= 0) & (ids < n), ids, n)

    def subwords(self, item: str, bracket: bool = True) -> list[str]:
        """The token strings the tokenizer splits ``item`` into (``bracket`` is ignored).

        Raises
        ------
        MissingExtraError
            If the tokenizer's package is not installed.
        finalfusion.errors.LimitExceeded
            If ``item`` is longer than :data:`finalfusion.limits.MAX_TOKENIZE_BYTES` bytes of UTF-8.

        Examples
        --------
        >>> import pytest; _ = pytest.importorskip("tokenizers")
        >>> from finalfusion._tokenizers import _TOY_JSON, HuggingFaceTokenizer
        >>> TokenizerVocab(["[UNK]", "[CLS]", "ab", "a", "c", "b"], HuggingFaceTokenizer(_TOY_JSON)).subwords("cab")
        ['c', 'ab']
        """
        return self.tokenizer.pieces(item)

    def subword_indices(self, item: str, bracket: bool = True, with_ngrams: bool = False) -> list[Any]:
        """The ids of ``item``'s tokens that have rows (dropped ones left out); with the pieces if ``with_ngrams``.

        Examples
        --------
        >>> import pytest; _ = pytest.importorskip("tokenizers")
        >>> from finalfusion._tokenizers import _TOY_JSON, HuggingFaceTokenizer
        >>> vocab = TokenizerVocab(["[UNK]", "[CLS]", "ab", "a", "c", "b"], HuggingFaceTokenizer(_TOY_JSON))
        >>> vocab.subword_indices("cab"), vocab.subword_indices("cab", with_ngrams=True)
        ([4, 2], [('c', 4), ('ab', 2)])
        """
        rows: list[int] = self.subword_rows(item).tolist()
        if with_ngrams:
            return [(self.words[i], i) for i in rows]
        return rows

    def subword_rows(self, item: str) -> npt.NDArray[np.int64]:
        """Storage rows of ``item``'s tokens: the ids the tokenizer returns, dropped ones left out.

        Raises
        ------
        finalfusion.errors.LimitExceeded
            If ``item`` is longer than :data:`finalfusion.limits.MAX_TOKENIZE_BYTES` bytes of UTF-8.

        Examples
        --------
        >>> import pytest; _ = pytest.importorskip("tokenizers")
        >>> from finalfusion._tokenizers import _TOY_JSON, HuggingFaceTokenizer
        >>> vocab = TokenizerVocab(["[UNK]", "[CLS]", "ab", "a", "c", "b"], HuggingFaceTokenizer(_TOY_JSON))
        >>> vocab.subword_rows("ab?c").tolist()  # '?' is [UNK]: dropped
        [2, 4]
        """
        ids = self._clip(np.asarray(self.tokenizer.encode(item), dtype=np.int64))
        return ids[self._allowed_ids()[ids]]

    def batch_subword_rows(self, items: Sequence[str]) -> Iterator[tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]]:
        """Token rows of many words, tokenized in blocks and grouped by count.

        Yields ``(positions, rows)`` with a ``(len(positions), K)`` matrix of
        storage rows, for every ``K >= 1`` that occurs in a block of words
        (see :meth:`~finalfusion.vocab.Tokenizer.encode_batch`: blocks of bounded bytes, so a
        batch streams); words without any kept token are not yielded.

        Raises
        ------
        finalfusion.errors.LimitExceeded
            If a word is longer than :data:`finalfusion.limits.MAX_TOKENIZE_BYTES`
            bytes of UTF-8 (checked before any word is tokenized).

        Examples
        --------
        >>> import pytest; _ = pytest.importorskip("tokenizers")
        >>> from finalfusion._tokenizers import _TOY_JSON, HuggingFaceTokenizer
        >>> vocab = TokenizerVocab(["[UNK]", "[CLS]", "ab", "a", "c", "b"], HuggingFaceTokenizer(_TOY_JSON))
        >>> [(p.tolist(), r.tolist()) for p, r in vocab.batch_subword_rows(["cab", "?", "c"])]
        [([2], [[4]]), ([0], [[4, 2]])]
        """
        for start, encoded in self.tokenizer._encode_blocks(items):
            for pos, rows in self._grouped(encoded):
                yield pos + start, rows

    def _grouped(self, encoded: list[list[int]]) -> Iterator[tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]]:
        """``(positions, rows)`` per count of kept ids, for the token ids of one block of words."""
        lens = np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded))
        total = int(lens.sum())
        flat = self._clip(np.fromiter(itertools.chain.from_iterable(encoded), dtype=np.int64, count=total))
        keep = self._allowed_ids()[flat]
        owner = np.repeat(np.arange(len(encoded), dtype=np.int64), lens)
        kept_lens = np.bincount(owner[keep], minlength=len(encoded)).astype(np.int64)
        kept = flat[keep]
        starts = np.zeros(len(encoded), dtype=np.int64)
        np.cumsum(kept_lens[:-1], out=starts[1:])
        for k in np.unique(kept_lens).tolist():
            if k == 0:
                continue
            pos = np.flatnonzero(kept_lens == k)
            yield pos, kept[starts[pos][:, None] + np.arange(k)]

    # -- chunk ---------------------------------------------------------------------
    @classmethod
    def read_payload(cls, reader: ByteReader) -> TokenizerVocab:
        raise TypeError("a TokenizerVocab is read as a SimpleVocab chunk plus the [tokenizer] metadata table")

    def write_payload(self, writer: ByteWriter) -> None:
        """Write a ``SimpleVocab`` payload: the word count (``u64``), then the words.

        Examples
        --------
        >>> import io
        >>> from finalfusion.vocab import HuggingFaceTokenizer, SimpleVocab
        >>> a, b = io.BytesIO(), io.BytesIO()
        >>> TokenizerVocab(["x", "y"], HuggingFaceTokenizer("{}")).write_payload(ByteWriter(a))
        >>> SimpleVocab(["x", "y"]).write_payload(ByteWriter(b))
        >>> a.getvalue() == b.getvalue()
        True
        """
        writer.u64(len(self.words))
        self._write_words(writer)

    def payload_len(self, offset: int) -> int:
        """As for a ``SimpleVocab``: 8 bytes of count, then 4 bytes of length and the UTF-8 of every word.

        Examples
        --------
        >>> from finalfusion.vocab import HuggingFaceTokenizer
        >>> TokenizerVocab(["a", "é"], HuggingFaceTokenizer("{}")).payload_len(0)
        19
        """
        return 8 + self._words_len()

    def metadata_table(self) -> dict[str, Any]:
        """The ``[tokenizer]`` metadata table written with this vocabulary (see :func:`~finalfusion.vocab._tokenizer_table.tokenizer_table`).

        Examples
        --------
        >>> from finalfusion.vocab import HuggingFaceTokenizer
        >>> TokenizerVocab(["a"], HuggingFaceTokenizer("{}")).metadata_table()["kind"]
        'huggingface'
        """
        return tokenizer_table(self.indexer)


def with_tokenizer_table(vocab: Any, metadata: Metadata | None) -> Metadata | None:
    """The metadata to write with ``vocab``: ``metadata`` plus the ``[tokenizer]`` table of a :class:`TokenizerVocab`.

    Other vocabularies get ``metadata`` unchanged; the caller's metadata is
    never modified. The key ``tokenizer`` is the library's: a user's own
    ``tokenizer`` entry is written as it is when the file would read back
    the same (another vocabulary, and a value that is not a table with
    ``kind`` and ``model``), and refused otherwise -- never overwritten.

    Raises
    ------
    ValueError
        If ``metadata`` has a ``tokenizer`` entry that the table would
        overwrite (a :class:`TokenizerVocab`) or that reading the file would
        take for a stored tokenizer.

    Examples
    --------
    >>> from finalfusion.vocab import HuggingFaceTokenizer
    >>> meta = with_tokenizer_table(TokenizerVocab(["a"], HuggingFaceTokenizer("{}")), Metadata({"name": "toy"}))
    >>> sorted(meta), meta["tokenizer"]["kind"]
    (['name', 'tokenizer'], 'huggingface')
    >>> with_tokenizer_table(None, None) is None
    True
    >>> with_tokenizer_table(TokenizerVocab(["a"], HuggingFaceTokenizer("{}")), Metadata({"tokenizer": "gpt2"}))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: the metadata key 'tokenizer' is reserved for the vocabulary's tokenizer: rename the entry 'tokenizer' = 'gpt2' ...
    """
    user = metadata.get(METADATA_KEY) if metadata is not None else None
    if not isinstance(vocab, TokenizerVocab):
        if user is not None and is_tokenizer_table(user):
            raise ValueError(
                f"the metadata key {METADATA_KEY!r} is reserved for a vocabulary's tokenizer and this entry would be read back as one "
                f"(a table with 'kind' and 'model'): rename it to write it"
            )
        return metadata
    table = vocab.metadata_table()
    if user is not None and user != table:
        raise ValueError(
            f"the metadata key {METADATA_KEY!r} is reserved for the vocabulary's tokenizer: rename the entry "
            f"{METADATA_KEY!r} = {repr(user)[:60]} (e.g. to 'tokenizer_name') to write it"
        )
    data = dict(metadata.data) if metadata is not None else {}
    data[METADATA_KEY] = table
    return Metadata(data)


def restore_tokenizer_vocab(vocab: Vocab, metadata: Metadata | None, offset: int | None = None) -> tuple[Vocab, Metadata | None]:
    """Undo :func:`with_tokenizer_table` after reading a file.

    A ``SimpleVocab`` whose metadata has a ``[tokenizer]`` table (a table
    with ``kind`` and ``model``) becomes a :class:`TokenizerVocab`; the table
    moves from the metadata into the vocabulary (metadata left empty becomes
    ``None``). Anything else -- a user's own ``tokenizer`` entry of another
    shape included -- is returned unchanged.

    Raises
    ------
    FormatError
        If the ``[tokenizer]`` table is malformed.

    Examples
    --------
    >>> from finalfusion.vocab import HuggingFaceTokenizer, SimpleVocab
    >>> vocab, meta = restore_tokenizer_vocab(SimpleVocab(["a"]), Metadata({"tokenizer": tokenizer_table(HuggingFaceTokenizer("{}"))}))
    >>> type(vocab).__name__, meta
    ('TokenizerVocab', None)
    """
    if type(vocab) is not SimpleVocab or metadata is None or not is_tokenizer_table(metadata.get(METADATA_KEY)):
        return vocab, metadata
    try:
        tokenizer = tokenizer_from_table(metadata[METADATA_KEY])
    except FormatError as exc:
        raise FormatError(exc.message, offset=offset, chunk=exc.chunk, expected=exc.expected, found=exc.found) from None
    rest = {k: v for k, v in metadata.items() if k != METADATA_KEY}
    return TokenizerVocab(vocab.words, tokenizer, _index=vocab.word_index)._set_words_nbytes(vocab._words_len()), (Metadata(rest) if rest else None)
