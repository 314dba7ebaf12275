"""Token vocabularies of models: unknown words through the model's own tokenizer.

A :class:`TokenizerVocab` holds the token strings of a model (row ``i`` of
the table is token id ``i``) and a :class:`Tokenizer` that splits any other
word into token ids with the real library -- ``sentencepiece`` for
SentencePiece models, ``tokenizers`` for Hugging Face ``tokenizer.json``
files -- never with a re-implementation of their normalisation. An unknown
word's vector is the l2-normalised sum of the rows of its tokens, with
control, unknown and unused tokens dropped: the finalfusion subword rule
with tokens in place of n-grams.

On disk the vocabulary is an ordinary ``SimpleVocab`` chunk (every
finalfusion reader can load the file); the tokenizer travels in the
metadata as one compact string (see :func:`tokenizer_table`), from which
:func:`finalfusion.load_finalfusion` restores the :class:`TokenizerVocab`.

Tokenizing needs the optional packages (``pip install
'finalfusion-py[interop]'``); without them, loading and lookups of known
tokens work, and looking up an unknown word raises
:class:`MissingExtraError` naming the extra.

The tokenizer's work is bounded per word and per batch (issue 13, class 5):
a word longer than :data:`finalfusion.limits.MAX_TOKENIZE_BYTES` bytes of
UTF-8 (256 KiB) raises :class:`~finalfusion.errors.LimitExceeded` before
anything is tokenized, and a batch is handed to the library in blocks of at
most :data:`BLOCK_BYTES` bytes and :data:`BLOCK_WORDS` words, so its memory
stays bounded whatever the batch. Words within the limit get exactly the
library's tokens.
"""

from __future__ import annotations

import base64
import binascii
import itertools
import json
import os
import threading
import zlib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, cast

import numpy as np
import numpy.typing as npt

from finalfusion import limits
from finalfusion._binary import ByteReader, ByteWriter
from finalfusion.chunks import ChunkIdentifier
from finalfusion.errors import FormatError, LimitExceeded, MissingExtraError
from finalfusion.metadata import Metadata
from finalfusion.vocab.base import SubwordVocab, Vocab

__all__ = [
    "BLOCK_BYTES",
    "BLOCK_WORDS",
    "HuggingFaceTokenizer",
    "MissingExtraError",
    "SentencePieceTokenizer",
    "Tokenizer",
    "TokenizerVocab",
    "check_tokenize_length",
    "restore_tokenizer_vocab",
    "tokenizer_from_table",
    "tokenizer_table",
    "with_tokenizer_table",
]

#: Metadata key of the table that stores the tokenizer in a ``.fifu`` file.
METADATA_KEY: str = "tokenizer"
#: Largest decompressed serialised tokenizer accepted from a file (bytes).
MAX_TOKENIZER_BYTES: int = 1 << 30
#: Most bytes of UTF-8 handed to the tokenizer in one call when many words are
#: tokenized (a word longer than this is a block of its own). The libraries
#: hold ~100-250 bytes per input byte while they tokenize (``tokenizers``;
#: ``sentencepiece`` ~25-60), so a block peaks at ~15 MB whatever the batch.
BLOCK_BYTES: int = 1 << 16
#: Most words handed to the tokenizer in one call (each costs a few hundred
#: bytes of bookkeeping in the library besides its characters).
BLOCK_WORDS: int = 1 << 12


def check_tokenize_length(word: str) -> int:
    """The length of ``word`` in bytes of UTF-8, checked against :data:`finalfusion.limits.MAX_TOKENIZE_BYTES`.

    Raises
    ------
    finalfusion.errors.LimitExceeded
        If the word is longer than the limit (read at call time).
    TypeError
        If ``word`` is not a ``str``.

    Examples
    --------
    >>> check_tokenize_length("naïve")
    6
    >>> try:
    ...     check_tokenize_length("ab" * 200_000)
    ... except LimitExceeded as err:
    ...     print(err)  # doctest: +ELLIPSIS
    the word has 400000 bytes of UTF-8, more than finalfusion.limits.MAX_TOKENIZE_BYTES = 262144 that a model's tokenizer is given; ...
    """
    if not isinstance(word, str):
        raise TypeError(f"a word to tokenize must be a str, got {type(word).__name__}")
    n = len(word) if word.isascii() else len(word.encode("utf-8", "surrogatepass"))
    if n > limits.MAX_TOKENIZE_BYTES:
        raise LimitExceeded(
            f"the word has {n} bytes of UTF-8, more than finalfusion.limits.MAX_TOKENIZE_BYTES = {limits.MAX_TOKENIZE_BYTES} "
            "that a model's tokenizer is given; raise the limit to look up longer words"
        )
    return n


class Tokenizer:
    """A model's tokenizer: splits a word into the token ids the model uses.

    Subclasses keep the serialised model (:meth:`to_bytes`) and build the
    real library's tokenizer lazily, on the first call that needs it, so
    that objects can be created, compared, pickled and written without the
    optional package.

    Examples
    --------
    >>> Tokenizer.kinds()
    ['huggingface', 'sentencepiece']
    """

    #: Name of the serialised form (the ``kind`` in the metadata table).
    kind: ClassVar[str] = ""
    _KINDS: ClassVar[dict[str, type[Tokenizer]]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.kind:
            if cls.kind in Tokenizer._KINDS:
                raise RuntimeError(f"tokenizer kind {cls.kind!r} is registered twice")
            Tokenizer._KINDS[cls.kind] = cls

    def __init__(self, data: bytes) -> None:
        self._data = bytes(data)
        self._lock = threading.Lock()
        self._impl: Any = None
        self._skip: frozenset[int] = frozenset()

    @classmethod
    def kinds(cls) -> list[str]:
        """The registered kinds, sorted.

        Examples
        --------
        >>> "sentencepiece" in Tokenizer.kinds()
        True
        """
        return sorted(cls._KINDS)

    # -- serialised form ---------------------------------------------------------
    def to_bytes(self) -> bytes:
        """The serialised model (a SentencePiece ``ModelProto``, a ``tokenizer.json``).

        Examples
        --------
        >>> HuggingFaceTokenizer('{"model": {}}').to_bytes()
        b'{"model": {}}'
        """
        return self._data

    @staticmethod
    def from_bytes(kind: str, data: bytes) -> Tokenizer:
        """Rebuild a tokenizer from :attr:`kind` and :meth:`to_bytes`.

        Raises
        ------
        ValueError
            If ``kind`` is not a known tokenizer kind.

        Examples
        --------
        >>> tok = Tokenizer.from_bytes("huggingface", b'{"model": {}}')
        >>> type(tok).__name__, tok.kind
        ('HuggingFaceTokenizer', 'huggingface')
        """
        cls = Tokenizer._KINDS.get(kind)
        if cls is None:
            raise ValueError(f"unknown tokenizer kind {kind!r}: expected one of {Tokenizer.kinds()}")
        return cls._from_data(data)

    @classmethod
    def _from_data(cls, data: bytes) -> Tokenizer:
        return cls(data)

    # -- tokenizing ----------------------------------------------------------------
    def _load(self) -> Any:
        """Build the real tokenizer; sets ``_skip``. Raises :class:`MissingExtraError`."""
        raise NotImplementedError

    def _ensure(self) -> Any:
        impl = self._impl
        if impl is None:
            with self._lock:
                if self._impl is None:
                    self._impl = self._load()
                impl = self._impl
        return impl

    @property
    def skip_ids(self) -> frozenset[int]:
        """Ids dropped when embedding a word: control, unknown and unused tokens.

        Examples
        --------
        >>> import pytest; _ = pytest.importorskip("tokenizers")
        >>> sorted(HuggingFaceTokenizer(_TOY_JSON).skip_ids)  # [UNK] and the special [CLS]
        [0, 1]
        """
        self._ensure()
        return self._skip

    def encode(self, word: str) -> list[int]:
        """The token ids the real tokenizer returns for ``word`` (no special tokens added).

        Raises
        ------
        MissingExtraError
            If the tokenizer's package is not installed.
        finalfusion.errors.LimitExceeded
            If ``word`` is longer than :data:`finalfusion.limits.MAX_TOKENIZE_BYTES` bytes of UTF-8.

        Examples
        --------
        >>> import pytest; _ = pytest.importorskip("tokenizers")
        >>> HuggingFaceTokenizer(_TOY_JSON).encode("abc")
        [2, 4]
        """
        return self.encode_batch([word])[0]

    def encode_batch(self, words: Sequence[str]) -> list[list[int]]:
        """:meth:`encode` for many words at once (the libraries batch it natively).

        The words go to the library in blocks of at most :data:`BLOCK_BYTES`
        bytes and :data:`BLOCK_WORDS` words, so the library's memory stays
        bounded whatever the batch (the ids returned are the caller's).

        Raises
        ------
        finalfusion.errors.LimitExceeded
            If a word is longer than :data:`finalfusion.limits.MAX_TOKENIZE_BYTES`
            bytes of UTF-8 (checked before any word is tokenized).

        Examples
        --------
        >>> import pytest; _ = pytest.importorskip("tokenizers")
        >>> HuggingFaceTokenizer(_TOY_JSON).encode_batch(["ab", "c"])
        [[2], [4]]
        """
        out: list[list[int]] = []
        for _start, block in self._encode_blocks(words):
            out += block
        return out

    def _encode_blocks(self, words: Sequence[str]) -> Iterator[tuple[int, list[list[int]]]]:
        """``(start, ids of words[start : start + len(ids)])`` for consecutive blocks of bounded bytes and words.

        Every word's length is checked before the first block is tokenized.
        """
        words = list(words)
        sizes = [check_tokenize_length(w) for w in words]
        if not words:
            return
        impl = self._ensure()
        start = total = 0
        for i, size in enumerate(sizes):
            if i > start and (total + size > BLOCK_BYTES or i - start >= BLOCK_WORDS):
                yield start, self._encode_block(impl, words[start:i])
                start, total = i, 0
            total += size
        yield start, self._encode_block(impl, words[start:])

    def _encode_block(self, impl: Any, words: list[str]) -> list[list[int]]:
        """The ids of ``words`` (lengths already checked) from the real tokenizer ``impl``."""
        raise NotImplementedError

    def pieces(self, word: str) -> list[str]:
        """The token strings ``word`` is split into (before any token is dropped).

        Raises
        ------
        finalfusion.errors.LimitExceeded
            If ``word`` is longer than :data:`finalfusion.limits.MAX_TOKENIZE_BYTES` bytes of UTF-8.

        Examples
        --------
        >>> import pytest; _ = pytest.importorskip("tokenizers")
        >>> HuggingFaceTokenizer(_TOY_JSON).pieces("abc")
        ['ab', 'c']
        """
        check_tokenize_length(word)
        return self._pieces(self._ensure(), word)

    def _pieces(self, impl: Any, word: str) -> list[str]:
        """The token strings of ``word`` (length already checked) from the real tokenizer ``impl``."""
        raise NotImplementedError

    # -- value semantics -----------------------------------------------------------
    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Tokenizer):
            return NotImplemented
        return self.kind == other.kind and self._data == other._data

    def __hash__(self) -> int:
        return hash((self.kind, self._data))

    def __getstate__(self) -> dict[str, Any]:
        return {"data": self._data}

    def __setstate__(self, state: dict[str, Any]) -> None:
        Tokenizer.__init__(self, state["data"])

    def __repr__(self) -> str:
        return f"{type(self).__name__}(<{len(self._data)} bytes>)"


def _read_model(model: bytes | str | os.PathLike[str]) -> bytes:
    if isinstance(model, (bytes, bytearray, memoryview)):
        return bytes(model)
    with open(model, "rb") as f:
        return f.read()


class SentencePieceTokenizer(Tokenizer):
    """A SentencePiece model (unigram or BPE), tokenized by the ``sentencepiece`` package.

    Parameters
    ----------
    model
        The serialised ``ModelProto`` (the bytes of a ``.model`` file) or the path of a ``.model`` file.

    Examples
    --------
    >>> import pytest; spm = pytest.importorskip("sentencepiece")
    >>> import io
    >>> buf = io.BytesIO()
    >>> spm.SentencePieceTrainer.train(sentence_iterator=iter(["hello world"] * 50), model_writer=buf, vocab_size=12, minloglevel=2)
    >>> tok = SentencePieceTokenizer(buf.getvalue())
    >>> "".join(tok.pieces("hello")).replace("\\u2581", "")
    'hello'
    """

    kind: ClassVar[str] = "sentencepiece"

    def __init__(self, model: bytes | str | os.PathLike[str]) -> None:
        super().__init__(_read_model(model))

    def _load(self) -> Any:
        try:
            import sentencepiece
        except ImportError:
            raise MissingExtraError("sentencepiece") from None
        sp = sentencepiece.SentencePieceProcessor()
        try:
            sp.LoadFromSerializedProto(self._data)
        except (RuntimeError, OSError) as exc:
            raise FormatError(
                "the sentencepiece library rejects the model", chunk="SentencePiece model", expected="a valid ModelProto", found=str(exc)
            ) from None
        n = sp.GetPieceSize()
        self._skip = frozenset(i for i in range(n) if sp.IsControl(i) or sp.IsUnknown(i) or sp.IsUnused(i))
        return sp

    def _encode_block(self, impl: Any, words: list[str]) -> list[list[int]]:
        return list(impl.EncodeAsIds(words))

    def _pieces(self, impl: Any, word: str) -> list[str]:
        return list(impl.EncodeAsPieces(word))


class HuggingFaceTokenizer(Tokenizer):
    """A Hugging Face ``tokenizer.json``, tokenized by the ``tokenizers`` package.

    Special added tokens (``"special": true``) and the model's unknown token
    are dropped when embedding a word; no special tokens (BOS, CLS, ...)
    are added.

    Parameters
    ----------
    tokenizer_json
        The JSON text, or the path of a ``tokenizer.json`` file.

    Examples
    --------
    >>> import pytest; _ = pytest.importorskip("tokenizers")
    >>> tok = HuggingFaceTokenizer(_TOY_JSON)
    >>> tok.pieces("abcab"), tok.encode("abcab")
    (['ab', 'c', 'ab'], [2, 4, 2])
    """

    kind: ClassVar[str] = "huggingface"

    def __init__(self, tokenizer_json: str | bytes | os.PathLike[str]) -> None:
        if isinstance(tokenizer_json, str) and tokenizer_json.lstrip().startswith("{"):
            data = tokenizer_json.encode("utf-8")
        elif isinstance(tokenizer_json, (bytes, bytearray)):
            data = bytes(tokenizer_json)
        else:
            data = _read_model(tokenizer_json)
        super().__init__(data)

    def _load(self) -> Any:
        try:
            import tokenizers
        except ImportError:
            raise MissingExtraError("tokenizers") from None
        try:
            text = self._data.decode("utf-8")
            tok = tokenizers.Tokenizer.from_str(text)
        except BaseException as exc:  # a plain Exception for a malformed tokenizer.json, a Rust panic for some
            if not isinstance(exc, Exception) and not is_rust_panic(exc):
                raise
            raise FormatError(
                "the tokenizers library rejects the tokenizer.json", chunk="tokenizer.json", expected="a valid tokenizer.json", found=str(exc)[:200]
            ) from None
        skip = {i for i, tok_ in tok.get_added_tokens_decoder().items() if tok_.special}
        try:
            unk = json.loads(text).get("model", {}).get("unk_token")
        except (ValueError, AttributeError):
            unk = None
        if isinstance(unk, str):
            unk_id = tok.token_to_id(unk)
            if unk_id is not None:
                skip.add(unk_id)
        self._skip = frozenset(skip)
        return tok

    def _encode_block(self, impl: Any, words: list[str]) -> list[list[int]]:
        # encode_batch_fast (tokenizers >= 0.20) skips the offsets: the same ids, ~25 % less memory and ~40 % less time.
        encode = getattr(impl, "encode_batch_fast", None) or impl.encode_batch
        return [e.ids for e in encode(words, add_special_tokens=False)]

    def _pieces(self, impl: Any, word: str) -> list[str]:
        return list(impl.encode(word, add_special_tokens=False).tokens)


def is_rust_panic(exc: BaseException) -> bool:
    """Whether ``exc`` is a panic of a Rust extension (pyo3's ``PanicException``, a ``BaseException``).

    ``tokenizers`` panics instead of raising on some malformed models: a BPE
    merge whose joined token is longer than every vocabulary token, a token
    shorter than ``continuing_subword_prefix`` (huggingface/tokenizers#2198).
    pyo3 raises a ``BaseException`` for a panic, so ``except Exception``
    lets it through.

    Examples
    --------
    >>> is_rust_panic(ValueError("x")), is_rust_panic(KeyboardInterrupt())
    (False, False)
    """
    kind = type(exc)
    return kind.__name__ == "PanicException" and kind.__module__ == "pyo3_runtime"


#: A toy WordPiece-free BPE tokenizer for the doctests: ids 0 [UNK], 1 [CLS], 2 ab, 3 a, 4 c, 5 b.
_TOY_JSON = json.dumps(
    {
        "version": "1.0",
        "added_tokens": [
            {"id": 0, "content": "[UNK]", "single_word": False, "lstrip": False, "rstrip": False, "normalized": False, "special": True},
            {"id": 1, "content": "[CLS]", "single_word": False, "lstrip": False, "rstrip": False, "normalized": False, "special": True},
        ],
        "pre_tokenizer": {"type": "Whitespace"},
        "model": {"type": "BPE", "unk_token": "[UNK]", "vocab": {"[UNK]": 0, "[CLS]": 1, "ab": 2, "a": 3, "c": 4, "b": 5}, "merges": [["a", "b"]]},
    }
)


def tokenizer_table(tokenizer: Tokenizer) -> dict[str, Any]:
    """The metadata table that stores ``tokenizer`` in a ``.fifu`` file.

    ``kind`` names the serialised form; ``model`` is the base64 of the
    zlib-compressed :meth:`Tokenizer.to_bytes` as one string (a long TOML
    array would take seconds to parse).

    Examples
    --------
    >>> table = tokenizer_table(HuggingFaceTokenizer('{"model": {}}'))
    >>> table["kind"], tokenizer_from_table(table).to_bytes()
    ('huggingface', b'{"model": {}}')
    """
    data = tokenizer.to_bytes()
    return {
        "kind": tokenizer.kind,
        "encoding": "zlib+base64",
        "bytes": len(data),
        "model": base64.b64encode(zlib.compress(data, 9)).decode("ascii"),
    }


def tokenizer_from_table(table: Any, where: str = "metadata [tokenizer]") -> Tokenizer:
    """Rebuild the tokenizer stored by :func:`tokenizer_table`.

    Raises
    ------
    FormatError
        If the table is malformed (wrong kind, bad base64 or zlib data, wrong size).

    Examples
    --------
    >>> tokenizer_from_table({"kind": "sentencepiece", "model": "!!"})  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    finalfusion.errors.FormatError: metadata [tokenizer]: the tokenizer model is not valid base64 of zlib data: ...
    """
    if not isinstance(table, Mapping):
        raise FormatError("the tokenizer entry is not a table", chunk=where, expected="a table with kind and model", found=type(table).__name__)
    kind, model = table.get("kind"), table.get("model")
    if kind not in Tokenizer._KINDS:
        raise FormatError("unknown tokenizer kind", chunk=where, expected=f"one of {Tokenizer.kinds()}", found=kind)
    if not isinstance(model, str):
        raise FormatError("the tokenizer model is missing", chunk=where, expected="a base64 string", found=type(model).__name__)
    declared = table.get("bytes")
    try:
        packed = base64.b64decode(model.encode("ascii"), validate=True)
        inflater = zlib.decompressobj()
        data = inflater.decompress(packed, MAX_TOKENIZER_BYTES)
        if inflater.unconsumed_tail:
            raise FormatError("the tokenizer model is too large", chunk=where, expected=f"at most {MAX_TOKENIZER_BYTES} bytes", found="more")
        if not inflater.eof:
            raise zlib.error("incomplete stream")
    except (binascii.Error, UnicodeEncodeError, zlib.error, ValueError) as exc:
        if isinstance(exc, FormatError):
            raise
        raise FormatError("the tokenizer model is not valid base64 of zlib data", chunk=where, expected="zlib+base64", found=str(exc)) from None
    if declared is not None and declared != len(data):
        raise FormatError("the tokenizer model has the wrong size", chunk=where, expected=f"{declared} bytes", found=f"{len(data)} bytes")
    return Tokenizer.from_bytes(kind, data)


@dataclass(frozen=True, eq=False, repr=False)
class TokenizerVocab(SubwordVocab[Any]):
    """The tokens of a model; other words are embedded through the model's tokenizer.

    Row ``i`` of the storage is token id ``i``; there are no separate
    subword rows (``upper_bound == len(words)``). A word that is exactly a
    token string uses that row. Any other word is split by the tokenizer
    with the real library, control/unknown/unused tokens (and ids the table
    has no row for) are dropped, and the embeddings sum the remaining rows
    and l2-normalise them, as for n-grams of the other subword vocabularies.
    A word longer than :data:`finalfusion.limits.MAX_TOKENIZE_BYTES` bytes
    of UTF-8 raises :class:`~finalfusion.errors.LimitExceeded` instead of
    being tokenized; batches are tokenized in blocks of bounded bytes.

    Written to a finalfusion file, this vocabulary is a ``SimpleVocab``
    chunk and the tokenizer goes into the metadata (see
    :func:`tokenizer_table`).

    Parameters
    ----------
    words
        The token strings, in id order (unique).
    indexer
        The model's :class:`Tokenizer` (usually passed positionally). The
        field has the name every subword vocabulary gives its indexer;
        :attr:`tokenizer` reads it.

    Examples
    --------
    >>> import pytest; _ = pytest.importorskip("tokenizers")
    >>> vocab = TokenizerVocab(["[UNK]", "[CLS]", "ab", "a", "c", "b"], HuggingFaceTokenizer(_TOY_JSON))
    >>> vocab.idx("ab"), vocab.idx("abcab"), vocab.subwords("abcab"), vocab.upper_bound
    (2, [2, 4, 2], ['ab', 'c', 'ab'], 6)
    """

    #: Not in the constructor: the ids the tokenizer drops, as a lookup table (built on first use).
    _allowed: npt.NDArray[np.bool_] | None = field(default=None, init=False, repr=False, compare=False)
    chunk_id: ClassVar[ChunkIdentifier] = ChunkIdentifier.SimpleVocab
    _indexer_type: ClassVar[type[Any]] = Tokenizer

    def __post_init__(self, _index: Mapping[str, int] | None) -> None:
        if not isinstance(self.indexer, Tokenizer):
            raise TypeError(f"tokenizer must be a Tokenizer, got {type(self.indexer).__name__}")
        super().__post_init__(_index)

    @property
    def tokenizer(self) -> Tokenizer:
        """The model's tokenizer (the ``indexer`` field: it plays the indexer's part).

        Examples
        --------
        >>> TokenizerVocab(["a"], HuggingFaceTokenizer('{"model": {}}')).tokenizer.kind
        'huggingface'
        """
        return cast(Tokenizer, self.indexer)

    @property
    def min_n(self) -> int:
        """Not applicable: tokens have no fixed n-gram lengths (raises ``AttributeError``)."""
        raise AttributeError("a TokenizerVocab has no n-gram lengths")

    @property
    def max_n(self) -> int:
        """Not applicable: tokens have no fixed n-gram lengths (raises ``AttributeError``)."""
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
        >>> TokenizerVocab(["[UNK]", "[CLS]", "ab", "a", "c", "b"], HuggingFaceTokenizer(_TOY_JSON)).subwords("cab")
        ['c', 'ab']
        """
        return self.tokenizer.pieces(item)

    def subword_indices(self, item: str, bracket: bool = True, with_ngrams: bool = False) -> list[Any]:
        """The ids of ``item``'s tokens that have rows (dropped ones left out); with the pieces if ``with_ngrams``.

        Examples
        --------
        >>> import pytest; _ = pytest.importorskip("tokenizers")
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
        (see :meth:`Tokenizer.encode_batch`: blocks of bounded bytes, so a
        batch streams); words without any kept token are not yielded.

        Raises
        ------
        finalfusion.errors.LimitExceeded
            If a word is longer than :data:`finalfusion.limits.MAX_TOKENIZE_BYTES`
            bytes of UTF-8 (checked before any word is tokenized).

        Examples
        --------
        >>> import pytest; _ = pytest.importorskip("tokenizers")
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
        >>> from finalfusion.vocab import SimpleVocab
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
        >>> TokenizerVocab(["a", "é"], HuggingFaceTokenizer("{}")).payload_len(0)
        19
        """
        return 8 + self._words_len()

    def metadata_table(self) -> dict[str, Any]:
        """The ``[tokenizer]`` metadata table written with this vocabulary (see :func:`tokenizer_table`).

        Examples
        --------
        >>> TokenizerVocab(["a"], HuggingFaceTokenizer("{}")).metadata_table()["kind"]
        'huggingface'
        """
        return tokenizer_table(self.indexer)


def with_tokenizer_table(vocab: Any, metadata: Metadata | None) -> Metadata | None:
    """The metadata to write with ``vocab``: ``metadata`` plus the ``[tokenizer]`` table of a :class:`TokenizerVocab`.

    Other vocabularies get ``metadata`` unchanged; the caller's metadata is never modified.

    Examples
    --------
    >>> meta = with_tokenizer_table(TokenizerVocab(["a"], HuggingFaceTokenizer("{}")), Metadata({"name": "toy"}))
    >>> sorted(meta), meta["tokenizer"]["kind"]
    (['name', 'tokenizer'], 'huggingface')
    >>> with_tokenizer_table(None, None) is None
    True
    """
    if not isinstance(vocab, TokenizerVocab):
        return metadata
    data = dict(metadata.data) if metadata is not None else {}
    data[METADATA_KEY] = vocab.metadata_table()
    return Metadata(data)


def restore_tokenizer_vocab(vocab: Vocab, metadata: Metadata | None, offset: int | None = None) -> tuple[Vocab, Metadata | None]:
    """Undo :func:`with_tokenizer_table` after reading a file.

    A ``SimpleVocab`` whose metadata has a ``[tokenizer]`` table becomes a
    :class:`TokenizerVocab`; the table moves from the metadata into the
    vocabulary (metadata left empty becomes ``None``). Anything else is
    returned unchanged.

    Raises
    ------
    FormatError
        If the ``[tokenizer]`` table is malformed.

    Examples
    --------
    >>> from finalfusion.vocab import SimpleVocab
    >>> vocab, meta = restore_tokenizer_vocab(SimpleVocab(["a"]), Metadata({"tokenizer": tokenizer_table(HuggingFaceTokenizer("{}"))}))
    >>> type(vocab).__name__, meta
    ('TokenizerVocab', None)
    """
    from finalfusion.vocab.simple import SimpleVocab

    if type(vocab) is not SimpleVocab or metadata is None or METADATA_KEY not in metadata:
        return vocab, metadata
    try:
        tokenizer = tokenizer_from_table(metadata[METADATA_KEY])
    except FormatError as exc:
        raise FormatError(exc.message, offset=offset, chunk=exc.chunk, expected=exc.expected, found=exc.found) from None
    rest = {k: v for k, v in metadata.items() if k != METADATA_KEY}
    return TokenizerVocab(vocab.words, tokenizer, _index=vocab.word_index)._set_words_nbytes(vocab._words_len()), (Metadata(rest) if rest else None)
