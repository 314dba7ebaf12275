"""The tokenizer back-ends of model vocabularies, wrapped once.

A :class:`Tokenizer` splits any word into token ids with the real library --
``sentencepiece`` for SentencePiece models (:class:`SentencePieceTokenizer`),
``tokenizers`` for Hugging Face ``tokenizer.json`` files
(:class:`HuggingFaceTokenizer`) -- never with a re-implementation of their
normalisation. It keeps the serialised model and builds the library's
tokenizer on first use, so that objects can be created, compared, pickled
and written without the optional package; tokenizing without it raises
:class:`~finalfusion.errors.MissingExtraError` naming the ``models`` extra.

A serialised model is content, never a path: :meth:`Tokenizer.from_bytes`
(used by every reader: GGUF metadata, the ``[tokenizer]`` table, a model
directory's file read by the loader) never opens anything; only the public
constructors accept a path, and only a path the user passes.

Every call into either library -- building a tokenizer, encoding, id
lookups -- goes through one wrapper, :func:`rejected_by`: an exception or
a Rust panic (pyo3's ``PanicException``, a ``BaseException``) becomes a
:class:`~finalfusion.errors.FormatError`.

A ``tokenizer.json`` is code-like, so it is checked before ``tokenizers``
sees it (docs/reliability.md, "Trust model: Tokenizers"): ``padding`` and
``truncation`` are removed (an embedding never pads or truncates), every
``Regex`` pattern must be one of :data:`KNOWN_REGEXES` (or
:data:`finalfusion.limits.TRUSTED_TOKENIZER_REGEXES`; an arbitrary pattern
can backtrack for minutes on one word) and a ``Precompiled`` charsmap must
hold the trie it declares, and no BPE merge may be cut inside a character
by ``continuing_subword_prefix`` (``tokenizers`` aborts the process on it).
A text that is not valid UTF-8 (a lone surrogate) is handed to the library
without the whitespace-separated words that hold one
(:func:`encodable_text`); a word that is one has no tokens, and the other
words of a batch are tokenized as usual.

The tokenizer's work is bounded per word and per batch (issue 13, class 5):
a word longer than :data:`finalfusion.limits.MAX_TOKENIZE_BYTES` bytes of
UTF-8 (256 KiB) raises :class:`~finalfusion.errors.LimitExceeded` before
anything is tokenized, and a batch is handed to the library in blocks of at
most :data:`BLOCK_BYTES` bytes and :data:`BLOCK_WORDS` words, so its memory
stays bounded whatever the batch. Words within the limit get exactly the
library's tokens.

The vocabulary that uses a tokenizer is
:class:`finalfusion.vocab.TokenizerVocab`; this module sits below ``vocab/``
and imports nothing above the leaves.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import json
import os
import re
import threading
from collections.abc import Iterator, Sequence
from typing import Any, ClassVar, Final, cast

from finalfusion import limits
from finalfusion._local_files import read_regular
from finalfusion._tokenizer_json import (
    FASTTEXT_SPACE_REGEX,
    GPT2_REGEX,
    KNOWN_REGEXES,
    LLAMA3_REGEX,
    check_added_token_ids,
    check_known_regex,
    check_normalized_added_tokens,
    checked_tokenizer_json,
)
from finalfusion.errors import FinalfusionError, FormatError, LimitExceeded, MissingExtraError, import_extra

__all__ = [
    "BLOCK_BYTES",
    "BLOCK_WORDS",
    "FASTTEXT_SPACE_REGEX",
    "GPT2_REGEX",
    "KNOWN_REGEXES",
    "LLAMA3_REGEX",
    "SEQUENCES_PER_CALL",
    "HuggingFaceTokenizer",
    "LlamaCppJsonTokenizer",
    "SentencePieceTokenizer",
    "Tokenizer",
    "check_added_token_ids",
    "check_known_regex",
    "check_tokenize_length",
    "checked_tokenizer_json",
    "encodable_text",
    "is_rust_panic",
    "rejected_by",
    "word_sizes",
]

#: Most bytes of UTF-8 handed to the tokenizer in one call when many words are
#: tokenized (a word longer than this is a block of its own). The libraries
#: hold ~100-250 bytes per input byte while they tokenize (``tokenizers``;
#: ``sentencepiece`` ~25-60), so a block peaks at ~15 MB whatever the batch.
BLOCK_BYTES: int = 1 << 16
#: Most words handed to the tokenizer in one call (each costs a few hundred
#: bytes of bookkeeping in the library besides its characters).
BLOCK_WORDS: int = 1 << 12
#: Blocks handed to ``tokenizers`` in one call by :meth:`HuggingFaceTokenizer.encode_each`, which the
#: library tokenizes on its own threads (so a call peaks at this many blocks' memory).
SEQUENCES_PER_CALL: int = 4


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


def word_sizes(words: Sequence[str]) -> list[int]:
    """:func:`check_tokenize_length` of every word (one pass when all are ASCII).

    Examples
    --------
    >>> word_sizes(["ab", "naïve", ""])
    [2, 6, 0]
    """
    try:
        ascii_only = "".join(words).isascii()
    except TypeError:  # not all str: check_tokenize_length names the type
        ascii_only = False
    if ascii_only:
        sizes = list(map(len, words))
        if not sizes or max(sizes) <= limits.MAX_TOKENIZE_BYTES:
            return sizes
    return [check_tokenize_length(w) for w in words]


class Tokenizer:
    """A model's tokenizer: splits a word into the token ids the model uses.

    Subclasses keep the serialised model (:meth:`to_bytes`) and build the
    real library's tokenizer lazily, on the first call that needs it, so
    that objects can be created, compared, pickled and written without the
    optional package.

    Examples
    --------
    >>> Tokenizer.kinds()  # the -llamacpp kinds tokenize a GGUF file's vocabulary as llama.cpp does
    ['huggingface', 'huggingface-llamacpp', 'sentencepiece', 'sentencepiece-llamacpp']
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

        ``data`` is the model itself, never a path: this is how every reader
        builds a tokenizer from a file's content.

        Raises
        ------
        ValueError
            If ``kind`` is not a known tokenizer kind.
        TypeError
            If ``data`` is not bytes.

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
        """A tokenizer of ``cls`` holding ``data`` as its model: content only, never opened as a path (the subclass constructors accept paths)."""
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise TypeError(f"a serialised tokenizer must be bytes, got {type(data).__name__}")
        out = cls.__new__(cls)
        Tokenizer.__init__(out, bytes(data))
        return out

    # -- tokenizing ----------------------------------------------------------------
    def _load(self) -> Any:
        """Build the real tokenizer; sets ``_skip``. Raises :class:`~finalfusion.errors.MissingExtraError`, :class:`~finalfusion.errors.FormatError`."""
        raise NotImplementedError

    def _ensure(self) -> Any:
        impl = self._impl
        if impl is None:
            with self._lock:
                if self._impl is None:
                    self._impl = self._guarded(self._load)
                impl = self._impl
        return impl

    #: The library a subclass calls, and the name of its serialised form, for :func:`rejected_by`.
    _library: ClassVar[str] = ""
    _what: ClassVar[str] = "model"
    _chunk: ClassVar[str] = ""
    _expected: ClassVar[str] = ""

    def _guarded(self, call: Any, *args: Any) -> Any:
        """``call(*args)`` through :func:`rejected_by`: every call into the library goes through here."""
        with rejected_by(self._library, self._what, chunk=self._chunk, expected=self._expected):
            return call(*args)

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

        The whitespace-separated parts of ``word`` that are not UTF-8 text (a
        lone surrogate) are dropped (:func:`encodable_text`); a word that is one has no tokens.

        Raises
        ------
        finalfusion.errors.MissingExtraError
            If the tokenizer's package is not installed.
        finalfusion.errors.LimitExceeded
            If ``word`` is longer than :data:`finalfusion.limits.MAX_TOKENIZE_BYTES` bytes of UTF-8.
        finalfusion.errors.FormatError
            If the library rejects the model or fails on the word (an error or a Rust panic).

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
        finalfusion.errors.FormatError
            If the library rejects the model or fails on a block (an error or a Rust panic).

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
        sizes = word_sizes(words)
        if not words:
            return
        impl = self._ensure()
        for start, end in _blocks(sizes):
            yield start, self._encode_text(impl, words[start:end])

    def _encode_text(self, impl: Any, words: list[str]) -> list[list[int]]:
        """The ids of ``words`` through the wrapper, each without its parts that are not UTF-8 text (:func:`encodable_text`)."""
        texts = [w if _is_text(w) else encodable_text(w) for w in words]
        valid = [t for t in texts if t is not None]
        ids: list[list[int]] = self._guarded(self._encode_block, impl, valid) if valid else []
        if len(valid) == len(words):
            return ids
        it = iter(ids)
        return [next(it) if t is not None else [] for t in texts]

    def _encode_block(self, impl: Any, words: list[str]) -> list[list[int]]:
        """The ids of ``words`` (lengths already checked, valid text) from the real tokenizer ``impl``."""
        raise NotImplementedError

    def pieces(self, word: str) -> list[str]:
        """The token strings ``word`` is split into (before any token is dropped), without its parts that hold a lone surrogate (:func:`encodable_text`).

        Raises
        ------
        finalfusion.errors.LimitExceeded
            If ``word`` is longer than :data:`finalfusion.limits.MAX_TOKENIZE_BYTES` bytes of UTF-8.
        finalfusion.errors.FormatError
            If the library rejects the model or fails on the word (an error or a Rust panic).

        Examples
        --------
        >>> import pytest; _ = pytest.importorskip("tokenizers")
        >>> HuggingFaceTokenizer(_TOY_JSON).pieces("abc")
        ['ab', 'c']
        """
        check_tokenize_length(word)
        impl = self._ensure()
        text = word if _is_text(word) else encodable_text(word)
        if text is None:
            return []
        pieces: list[str] = self._guarded(self._pieces, impl, text)
        return pieces

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


@contextlib.contextmanager
def rejected_by(library: str, what: str, chunk: str, expected: str) -> Iterator[None]:
    """Turn any failure of ``library`` inside the block into a :class:`~finalfusion.errors.FormatError`.

    The one wrapper around the tokenizer libraries: an ``Exception`` or a
    Rust panic (:func:`is_rust_panic`) becomes ``FormatError("the <library>
    library rejects the <what>")`` with the library's message (at most 200
    characters) as ``found``; ``KeyboardInterrupt``, ``SystemExit`` and other
    ``BaseException`` pass through, and so do this library's own errors
    (a :class:`~finalfusion.errors.FinalfusionError` raised by a check
    inside the block, :class:`~finalfusion.errors.MissingExtraError`).

    Raises
    ------
    FormatError
        If the block raises an ``Exception`` or a Rust panic.

    Examples
    --------
    >>> with rejected_by("toy", "model", "toy model", "a valid model"):
    ...     raise RuntimeError("bad magic")
    Traceback (most recent call last):
    ...
    finalfusion.errors.FormatError: toy model: the toy library rejects the model: expected a valid model, found bad magic
    """
    try:
        yield
    except BaseException as exc:  # a plain Exception for a malformed model, a Rust panic for some
        if isinstance(exc, (FinalfusionError, MissingExtraError)) or (not isinstance(exc, Exception) and not is_rust_panic(exc)):
            raise
        raise FormatError(f"the {library} library rejects the {what}", chunk=chunk, expected=expected, found=str(exc)[:200]) from None


def _blocks(sizes: list[int], max_bytes: int | None = None, max_words: int | None = None) -> Iterator[tuple[int, int]]:
    """``(start, end)`` of consecutive blocks of words of at most ``max_bytes`` bytes (or one word) and ``max_words`` words.

    By default :data:`BLOCK_BYTES` and :data:`BLOCK_WORDS`, read at call time.
    """
    max_bytes = BLOCK_BYTES if max_bytes is None else max_bytes
    max_words = BLOCK_WORDS if max_words is None else max_words
    start = total = 0
    for i, size in enumerate(sizes):
        if i > start and (total + size > max_bytes or i - start >= max_words):
            yield start, i
            start, total = i, 0
        total += size
    if sizes:
        yield start, len(sizes)


#: A run of whitespace, kept by :func:`encodable_text`'s split.
_SPACES: Final = re.compile(r"(\s+)")


def encodable_text(text: str) -> str | None:
    """``text`` without its whitespace-separated words that are not UTF-8 text (a lone surrogate); ``None`` if nothing is left.

    Each such word goes with the whitespace before it (after it, when no
    word precedes it), so the rest is the text as written without that
    word: what a tokenizer gives for the rest is what it gives for the
    text (``encode`` drops only the word that cannot be encoded, as the
    fastText rule drops a word without a vector).

    Examples
    --------
    >>> encodable_text("hello \\ud800 world"), encodable_text("\\ud800x  hello"), encodable_text("a\\ud800b")
    ('hello world', 'hello', None)
    """
    parts = _SPACES.split(text)  # words at even positions, the whitespace between them at odd ones
    out: list[str] = []
    seen = skip = False  # a word was kept before; the whitespace before the next word goes (a dropped word led)
    for i in range(0, len(parts), 2):
        space, word = (parts[i - 1] if i else ""), parts[i]
        if _is_text(word):
            out += ["" if skip else space, word]
            seen, skip = seen or bool(word), False
        elif not seen:
            out.append("" if skip else space)
            skip = True
    rest = "".join(out)
    return rest or None


def _is_text(word: str) -> bool:
    """Whether ``word`` can be encoded as UTF-8 (no lone surrogate): what the libraries accept."""
    if word.isascii():
        return True
    try:
        word.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _read_model(model: bytes | str | os.PathLike[str]) -> bytes:
    """The bytes of a model the *user* passed: the bytes themselves or the file at the path (never called on a file's content).

    A path must name a regular file of at most ``limits.MAX_TOKENIZER_BYTES``, checked from its size before it is read
    (:func:`~finalfusion._local_files.read_regular`: a FIFO or a device is refused, a sparse 3 GiB file is not read).
    """
    if isinstance(model, (bytes, bytearray, memoryview)):
        return bytes(model)
    return read_regular(model, chunk="tokenizer", max_bytes=limits.MAX_TOKENIZER_BYTES, limit="finalfusion.limits.MAX_TOKENIZER_BYTES")


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
    _library: ClassVar[str] = "sentencepiece"
    _chunk: ClassVar[str] = "SentencePiece model"
    _expected: ClassVar[str] = "a valid ModelProto"

    def __init__(self, model: bytes | str | os.PathLike[str]) -> None:
        super().__init__(_read_model(model))

    def _load(self) -> Any:
        sentencepiece = import_extra("sentencepiece", "tokenizing an unknown word", extra="models")
        sp = sentencepiece.SentencePieceProcessor()
        sp.LoadFromSerializedProto(self._processor_model())
        n = sp.GetPieceSize()
        self._skip = frozenset(i for i in range(n) if sp.IsControl(i) or sp.IsUnknown(i) or sp.IsUnused(i))
        return sp

    def _processor_model(self) -> bytes:
        """The ``ModelProto`` that ``sentencepiece`` loads: the serialised model (a subclass may adapt it)."""
        return self._data

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
    _library: ClassVar[str] = "tokenizers"
    _what: ClassVar[str] = "tokenizer.json"
    _chunk: ClassVar[str] = "tokenizer.json"
    _expected: ClassVar[str] = "a valid tokenizer.json"

    def __init__(self, tokenizer_json: str | bytes | os.PathLike[str]) -> None:
        if isinstance(tokenizer_json, str) and tokenizer_json.lstrip().startswith("{"):
            data = tokenizer_json.encode("utf-8")
        elif isinstance(tokenizer_json, (bytes, bytearray)):
            data = bytes(tokenizer_json)
        else:
            data = _read_model(tokenizer_json)
        super().__init__(data)

    @classmethod
    def from_json(cls, text: str) -> HuggingFaceTokenizer:
        """The tokenizer of the ``tokenizer.json`` text ``text``, which is never opened as a path (a file's content).

        Examples
        --------
        >>> HuggingFaceTokenizer.from_json("/etc/passwd").to_bytes()  # content, not a file
        b'/etc/passwd'
        """
        return cast("HuggingFaceTokenizer", cls._from_data(text.encode("utf-8", "surrogatepass")))

    def _load(self) -> Any:
        tokenizers = import_extra("tokenizers", "tokenizing an unknown word", extra="models")
        doc = checked_tokenizer_json(self._data)
        tok = tokenizers.Tokenizer.from_str(json.dumps(doc, ensure_ascii=False))
        tok.no_padding()
        tok.no_truncation()
        normalizer = tok.normalizer
        check_normalized_added_tokens(doc, str if normalizer is None else normalizer.normalize_str, tok.token_to_id, self._chunk)
        skip = {i for i, tok_ in tok.get_added_tokens_decoder().items() if tok_.special}
        model = doc.get("model")
        unk = model.get("unk_token") if isinstance(model, dict) else None
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

    def encode_each(self, words: Sequence[str]) -> tuple[list[int], list[int]]:
        """The ids of all ``words`` (flat, in order) and the position in ``words`` each id is from.

        The words of a block (:data:`BLOCK_BYTES`, :data:`BLOCK_WORDS`) go to
        ``tokenizers`` as one pre-tokenized sequence, :data:`SEQUENCES_PER_CALL`
        sequences per call (the library tokenizes them on its threads): the
        library runs each word through the whole pipeline (added tokens,
        normaliser, pre-tokenizer, model) on its own, as it runs a text, and
        gives each id's word. One encoding per block instead of one per word
        takes ~20 % less time on short words. The ids equal
        :meth:`encode_batch`'s where no part of the pipeline depends on where a
        word stands (used for the tokenizers of
        :func:`finalfusion._pieces.piece_rule`, where that holds). The parts of a word that hold a lone surrogate are dropped (:func:`encodable_text`).

        Raises
        ------
        finalfusion.errors.LimitExceeded
            If a word is longer than :data:`finalfusion.limits.MAX_TOKENIZE_BYTES` bytes of UTF-8 (checked first).
        finalfusion.errors.FormatError
            If the library rejects the model or fails on a block.

        Examples
        --------
        >>> import pytest; _ = pytest.importorskip("tokenizers")
        >>> HuggingFaceTokenizer(_TOY_JSON).encode_each(["ab c", "", "cab"])
        ([2, 4, 4, 2], [0, 0, 2, 2])
        """
        words = list(words)
        sizes = word_sizes(words)
        ids: list[int] = []
        owners: list[int] = []
        if not words:
            return ids, owners
        impl = self._ensure()
        calls: list[tuple[list[str], list[int]]] = []
        for start, end in _blocks(sizes):
            block: list[str | None] = list(words[start:end])
            if not _is_text("".join(words[start:end])):
                block = [w if w is None or _is_text(w) else encodable_text(w) for w in block]
            keep = [start + i for i, w in enumerate(block) if w is not None]
            if keep:
                calls.append(([w for w in block if w is not None], keep))
        for lo in range(0, len(calls), SEQUENCES_PER_CALL):
            block_ids, block_owners = self._guarded(_encode_sequences, impl, calls[lo : lo + SEQUENCES_PER_CALL])
            ids += block_ids
            owners += block_owners
        return ids, owners

    def encode_texts(self, texts: Sequence[str], *, starts: bool) -> tuple[list[int], list[int], list[int] | None]:
        """The ids of ``texts`` (flat, in order), the number of ids of each text, and (``starts``) the character each id starts at.

        Each text goes to the library whole, several per call (up to
        :data:`SEQUENCES_PER_CALL` x :data:`BLOCK_BYTES` bytes; the library
        tokenizes them on its threads); without ``starts`` the library skips
        the offsets (``encode_batch_fast``, ~1.5x faster). The start of an id
        is the first character of the text it covers, as the library reports
        it (its offsets). For texts that :mod:`finalfusion._pieces` joins from
        pieces: the caller keeps each text within :data:`BLOCK_BYTES` (and
        :data:`finalfusion.limits.MAX_TOKENIZE_BYTES`) and free of lone surrogates.

        Raises
        ------
        finalfusion.errors.FormatError
            If the library rejects the model or fails on a text.
        finalfusion.errors.LimitExceeded
            If a text is longer than :data:`finalfusion.limits.MAX_TOKENIZE_BYTES` bytes of UTF-8 (checked first).

        Examples
        --------
        >>> import pytest; _ = pytest.importorskip("tokenizers")
        >>> ids, counts, starts = HuggingFaceTokenizer(_TOY_JSON).encode_texts(["ab c", "cab"], starts=True)
        >>> ids, counts, starts  # "ab" "c" | "c" "ab", from characters 0 3 | 0 1
        ([2, 4, 4, 2], [2, 2], [0, 3, 0, 1])
        """
        sizes = word_sizes(texts)
        impl = self._ensure()
        encode = impl.encode_batch if starts else getattr(impl, "encode_batch_fast", None) or impl.encode_batch
        ids: list[int] = []
        counts: list[int] = []
        firsts: list[int] | None = [] if starts else None
        for lo, hi in _blocks(sizes, SEQUENCES_PER_CALL * BLOCK_BYTES, SEQUENCES_PER_CALL * BLOCK_WORDS):
            encodings = self._guarded(functools.partial(encode, list(texts[lo:hi]), add_special_tokens=False))
            if firsts is not None:
                firsts += itertools.islice(itertools.chain.from_iterable(itertools.chain.from_iterable(e.offsets for e in encodings)), 0, None, 2)
            for encoding in encodings:
                got = encoding.ids
                ids += got
                counts.append(len(got))
        return ids, counts, firsts


class LlamaCppJsonTokenizer(HuggingFaceTokenizer):
    """A ``tokenizer.json`` built from a GGUF vocabulary, tokenized as llama.cpp does (``parse_special = false``).

    The same document as :class:`HuggingFaceTokenizer`'s, with one difference
    that a ``tokenizer.json`` cannot say: special added tokens (llama.cpp's
    control tokens) are never matched in text (``tokenizers``'
    ``encode_special_tokens``), where ``tokenizers`` matches them by default;
    other added tokens (llama.cpp's user-defined ones) are. A text ``<s>`` is
    the characters ``<``, ``s``, ``>``, as in llama.cpp.

    Examples
    --------
    >>> import pytest; _ = pytest.importorskip("tokenizers")
    >>> HuggingFaceTokenizer(_TOY_JSON).encode("[CLS]"), LlamaCppJsonTokenizer.from_json(_TOY_JSON).encode("[CLS]")  # [UNK] for [, C, L, S, ]
    ([1], [0, 0, 0, 0, 0])
    """

    kind: ClassVar[str] = "huggingface-llamacpp"

    def _load(self) -> Any:
        tok = super()._load()
        tok.encode_special_tokens = True
        return tok


def _encode_sequences(impl: Any, blocks: list[tuple[list[str], list[int]]]) -> tuple[list[int], list[int]]:
    """The ids of the words of ``blocks`` from one pre-tokenized call of ``tokenizers`` (a sequence per block), and ``where[word]`` for each id."""
    encodings = impl.encode_batch([words for words, _where in blocks], is_pretokenized=True, add_special_tokens=False)
    ids: list[int] = []
    owners: list[int] = []
    for encoding, (_words, where) in zip(encodings, blocks, strict=True):
        ids += encoding.ids
        owners += map(where.__getitem__, encoding.word_ids)
    return ids, owners


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
