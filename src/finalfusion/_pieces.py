"""Token ids of many texts, each distinct space-separated piece tokenized once (:meth:`~finalfusion.Embeddings.encode`).

Sentences repeat words. For tokenizers whose whole pipeline stops at a
space -- a ``tokenizer.json`` whose ids of ``a + " " + b`` are always the
ids of ``a`` followed by the ids of ``b`` -- the ids of a text are the ids
of its pieces ``text.split(" ")`` in order, so each distinct piece needs
the tokenizer only once per call. :class:`PieceIds` keeps those ids in one
flat table and assembles a batch's ids with numpy; the tokenizer itself
still does all the work on each piece (normaliser, added tokens,
pre-tokenizer, model): nothing of it is re-implemented here.

**When it holds** (:func:`splits_at_spaces`, read from the checked
``tokenizer.json``; anything else takes the plain path, one call per text):

* the pre-tokenizer drops spaces and splits there: ``BertPreTokenizer``,
  ``Whitespace``, ``WhitespaceSplit``, the ``Split`` that removes runs of
  fastText's separators (:data:`finalfusion._tokenizers.FASTTEXT_SPACE_REGEX`,
  ``write_model2vec``'s word tokenizers), or a ``Sequence`` that starts with
  one of them followed by ``Punctuation``, ``Digits`` or those (later
  pre-tokenizers of a sequence split each piece on its own). Not
  ``Metaspace`` nor ``ByteLevel``: they turn spaces into token text, so a
  double or trailing space gives tokens of its own and a word's first piece
  depends on what precedes it;
* the normaliser maps each character on its own and a space to a space:
  none, ``BertNormalizer``, ``Lowercase``, ``StripAccents``, ``NFC``,
  ``NFD``, ``NFKC``, ``NFKD`` or a ``Sequence`` of them (a space is a
  starter that never composes, so the Unicode forms stop there too). Not
  ``Replace``, ``Strip``, ``Prepend`` nor ``Precompiled``;
* the model is ``WordPiece``, ``WordLevel``, ``Unigram`` or ``BPE``
  without dropout (each pre-token is tokenized on its own; dropout is random);
* no added token can match across a space: no content holds a space, and
  the content of a ``normalized`` one is printable ASCII (which those
  normalisers never turn into a space);
* the post-processor leaves ids alone without special tokens: none,
  ``TemplateProcessing``, ``BertProcessing``, ``RobertaProcessing``,
  ``ByteLevel`` or a ``Sequence`` of them.

The table is bounded by :data:`finalfusion.limits.MAX_CACHE_BYTES` (it
starts over when full) and lives for one ``encode`` call. Texts get exactly
the plain path's ids (tests/test_encode_pieces.py compares both bit for bit
and with model2vec), including its limits: a text longer than
:data:`finalfusion.limits.MAX_TOKENIZE_BYTES` raises, a text that is not
valid UTF-8 text (a lone surrogate) goes without the words that hold one
(:func:`finalfusion._tokenizers.encodable_text`).
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Sequence
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from finalfusion import limits
from finalfusion._tokenizers import FASTTEXT_SPACE_REGEX, HuggingFaceTokenizer, Tokenizer, _is_text, checked_tokenizer_json, encodable_text, word_sizes

__all__ = ["PieceIds", "splits_at_spaces"]

I64 = npt.NDArray[np.int64]

#: Pre-tokenizers that split at every space and drop it.
SPACE_SPLITTERS: Final = frozenset({"BertPreTokenizer", "Whitespace", "WhitespaceSplit"})
#: Pre-tokenizers that may follow a space splitter in a ``Sequence`` (each splits one piece without looking at others).
PIECE_SPLITTERS: Final = SPACE_SPLITTERS | {"Punctuation", "Digits"}
#: Normalisers that map each character on its own (the Unicode forms: up to the next starter) and keep a space a space.
LOCAL_NORMALIZERS: Final = frozenset({"BertNormalizer", "Lowercase", "StripAccents", "NFC", "NFD", "NFKC", "NFKD"})
#: Post-processors that only add special tokens (never asked for here) or change offsets.
ID_KEEPING_PROCESSORS: Final = frozenset({"TemplateProcessing", "BertProcessing", "RobertaProcessing", "ByteLevel"})
#: Models that tokenize each pre-token on its own, deterministically (BPE: without dropout).
PIECE_MODELS: Final = frozenset({"WordPiece", "WordLevel", "Unigram", "BPE"})
#: Bytes counted per cached piece besides its characters and ids (the dict entry and the str object).
ENTRY_BYTES: Final = 120


def _kind(part: Any) -> str | None:
    return part.get("type") if isinstance(part, dict) and isinstance(part.get("type"), str) else None


def _space_splitter(step: Any) -> bool:
    """One of :data:`SPACE_SPLITTERS`, or the ``Split`` at runs of fastText's separators that drops them (``write_model2vec``'s)."""
    if _kind(step) in SPACE_SPLITTERS:
        return True
    return (
        _kind(step) == "Split" and step.get("pattern") == {"Regex": FASTTEXT_SPACE_REGEX} and step.get("behavior") == "Removed" and step.get("invert") is False
    )


def _pre_tokenizer_ok(pre: Any) -> bool:
    if _space_splitter(pre):
        return True
    steps = pre.get("pretokenizers") if _kind(pre) == "Sequence" else None
    return isinstance(steps, list) and bool(steps) and _space_splitter(steps[0]) and all(_space_splitter(s) or _kind(s) in PIECE_SPLITTERS for s in steps)


def _all_in(part: Any, steps_key: str, allowed: Any) -> bool:
    """Whether a pipeline part is absent, one of ``allowed``, or a ``Sequence`` (steps under ``steps_key``) of them."""
    if part is None:
        return True
    kind = _kind(part)
    if kind == "Sequence":
        steps = part.get(steps_key)
        return isinstance(steps, list) and all(_kind(s) in allowed for s in steps)
    return kind in allowed


def _normalizer_ok(norm: Any) -> bool:
    return _all_in(norm, "normalizers", LOCAL_NORMALIZERS)


def _processor_ok(proc: Any) -> bool:
    return _all_in(proc, "processors", ID_KEEPING_PROCESSORS)


def _added_ok(added: Any) -> bool:
    if added is None:
        return True
    if not isinstance(added, list):
        return False
    for entry in added:
        content = entry.get("content") if isinstance(entry, dict) else None
        if not isinstance(content, str) or " " in content:
            return False
        if entry.get("normalized", True) and not all(c.isascii() and c.isprintable() and not c.isspace() for c in content):
            return False
    return True


def splits_at_spaces(doc: dict[str, Any]) -> bool:
    """Whether the ``tokenizer.json`` ``doc`` gives the ids of ``a + " " + b`` as the ids of ``a`` then those of ``b``, for all texts.

    The conditions are the module's (its docstring says why each holds);
    ``False`` for anything not known to hold.

    Examples
    --------
    >>> bert = {"normalizer": {"type": "BertNormalizer"}, "pre_tokenizer": {"type": "BertPreTokenizer"}, "model": {"type": "WordPiece"}}
    >>> splits_at_spaces(bert), splits_at_spaces({**bert, "pre_tokenizer": {"type": "Metaspace"}})
    (True, False)
    """
    model = doc.get("model")
    if _kind(model) not in PIECE_MODELS or (isinstance(model, dict) and model.get("dropout") not in (None, 0, 0.0)):
        return False
    return (
        _pre_tokenizer_ok(doc.get("pre_tokenizer"))
        and _normalizer_ok(doc.get("normalizer"))
        and _processor_ok(doc.get("post_processor"))
        and _added_ok(doc.get("added_tokens"))
    )


def tokenizer_splits_at_spaces(tokenizer: Tokenizer) -> bool:
    """:func:`splits_at_spaces` of a ``tokenizer.json`` tokenizer (``False`` for the other kinds), worked out once per tokenizer."""
    cached: bool | None = getattr(tokenizer, "_splits_at_spaces", None)
    if cached is None:
        cached = tokenizer.kind == "huggingface" and splits_at_spaces(checked_tokenizer_json(tokenizer.to_bytes()))
        tokenizer._splits_at_spaces = cached  # type: ignore[attr-defined]
    return cached


class PieceIds:
    """The token ids of texts through a table of the ids of their space-separated pieces.

    Use only for a tokenizer of which :func:`tokenizer_splits_at_spaces`
    holds. Thread-safe (one batch at a time).

    Examples
    --------
    >>> import pytest; _ = pytest.importorskip("tokenizers")
    >>> from finalfusion._tokenizers import HuggingFaceTokenizer, _TOY_JSON
    >>> tok = HuggingFaceTokenizer(_TOY_JSON)  # Whitespace pre-tokenizer, BPE
    >>> flat, counts = PieceIds(tok).ids(["ab c ab", "", "cab  ab"])
    >>> flat.tolist(), counts.tolist(), tok.encode_batch(["ab c ab", "", "cab  ab"])
    ([2, 4, 2, 4, 2, 2], [3, 0, 3], [[2, 4, 2], [], [4, 2, 2]])
    """

    def __init__(self, tokenizer: Tokenizer) -> None:
        self._tokenizer = tokenizer
        self._lock = threading.Lock()
        self._clear()

    def _clear(self) -> None:
        self._index: dict[str, int] = {}
        self._starts = np.zeros(1024, dtype=np.int64)
        self._lens = np.zeros(1024, dtype=np.int64)
        self._ids = np.zeros(4096, dtype=np.int64)
        self._pieces = 0  # pieces in the table
        self._used = 0  # ids in the table
        self._bytes = 0

    def _add(self, pieces: list[str]) -> None:
        """Tokenize ``pieces`` (distinct, not in the table) and append their ids."""
        tok = self._tokenizer
        if isinstance(tok, HuggingFaceTokenizer):
            flat, owners = tok.encode_each(pieces)
            lens = np.bincount(np.asarray(owners, dtype=np.int64), minlength=len(pieces)).astype(np.int64, copy=False)
        else:
            encoded = tok.encode_batch(pieces)
            lens = np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded))
            flat = list(itertools.chain.from_iterable(encoded))
        total = len(flat)
        n, used = self._pieces, self._used
        if n + len(pieces) > len(self._starts):
            size = max(2 * len(self._starts), n + len(pieces))
            self._starts = np.resize(self._starts, size)
            self._lens = np.resize(self._lens, size)
        if used + total > len(self._ids):
            self._ids = np.resize(self._ids, max(2 * len(self._ids), used + total))
        self._ids[used : used + total] = flat
        self._lens[n : n + len(pieces)] = lens
        self._starts[n : n + len(pieces)] = used + np.cumsum(lens) - lens
        self._index.update(zip(pieces, range(n, n + len(pieces)), strict=True))
        self._pieces, self._used = n + len(pieces), used + total
        self._bytes += sum(map(len, pieces)) + ENTRY_BYTES * len(pieces) + 24 * total

    def ids(self, texts: Sequence[str]) -> tuple[I64, I64]:
        """The token ids of ``texts`` (flat, in order, as the tokenizer returns them) and their count per text.

        Raises
        ------
        finalfusion.errors.LimitExceeded
            If a text is longer than :data:`finalfusion.limits.MAX_TOKENIZE_BYTES` bytes of UTF-8 (as the plain path).
        finalfusion.errors.FormatError
            If the library fails on a piece.
        """
        if not texts:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
        word_sizes(texts)  # the plain path's limit, on whole texts
        joined = " ".join(texts)
        if not joined.isascii() and not _is_text(joined):  # a lone surrogate: its word goes, as in the plain path
            texts = [t if _is_text(t) else encodable_text(t) or "" for t in texts]
            joined = " ".join(texts)
        pieces = joined.split(" ")  # text i has its spaces + 1 pieces
        per_text = np.fromiter(map(str.count, texts, itertools.repeat(" ")), dtype=np.int64, count=len(texts)) + 1
        with self._lock:
            if self._bytes > limits.MAX_CACHE_BYTES:
                self._clear()
            index = self._index
            nums = np.fromiter(map(index.get, pieces, itertools.repeat(-1)), dtype=np.int64, count=len(pieces))
            missing = nums < 0
            if missing.any():
                mask = missing.tolist()
                self._add(list(dict.fromkeys(itertools.compress(pieces, mask))))
                nums[missing] = np.fromiter(map(index.__getitem__, itertools.compress(pieces, mask)), dtype=np.int64, count=int(missing.sum()))
            lens = self._lens[nums]
            starts = self._starts[nums]
            ids = self._ids
            total = int(lens.sum())
            # flat[j] = ids[starts[piece of j] + (j - first position of that piece)]
            flat = ids[np.repeat(starts - (np.cumsum(lens) - lens), lens) + np.arange(total, dtype=np.int64)]
        counts = np.add.reduceat(lens, np.cumsum(per_text) - per_text)
        return flat, counts.astype(np.int64, copy=False)
