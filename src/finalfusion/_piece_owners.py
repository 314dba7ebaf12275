"""Which piece each token id of a joined text is from (:mod:`finalfusion._pieces`' runs).

:mod:`finalfusion._pieces` hands the distinct new pieces of a batch to
``tokenizers`` joined into texts ("runs") whose ids are, by the piece rule,
the ids of each piece on its own in turn. What is left is to tell where one
piece's ids end and the next one's start. Three ways, each used only where it
is proven for the tokenizer (:func:`owner_plan`, from its ``tokenizer.json``)
and checked on every call:

* **bytes** (:data:`finalfusion._pieces.BYTE_LEVEL`, no normaliser, a
  ``BPE`` holding all 256 byte characters, :func:`byte_spans`): each id
  stands for a known number of the text's UTF-8 bytes, so the ids of a
  piece add up to its bytes. Checked: every piece must end where an id
  ends (a sum that misses sends the texts to the offsets).
* **word starts** (:data:`finalfusion._pieces.DROP` with ``WordPiece`` under
  ``BertPreTokenizer``, ``Whitespace``, ``WhitespaceSplit`` or fastText's
  ``Split``, :func:`word_starts`): in printable ASCII the normalisers a
  rule allows change no character but its case, the pre-tokens of a text
  can be counted from its characters, and ``WordPiece`` gives each
  pre-token one id that does not start with its continuing prefix (the
  first, or the unknown token), the other ids of it do. The ids that start
  a pre-token are matched to the pre-tokens in order. Checked: as many
  such ids as pre-tokens (an added token in the text, or a pre-token whose
  first id starts with the prefix, would change the count; texts holding
  an added token's content are not taken this way at all).
* **offsets** (any rule): the character the library says each id starts at
  (``encode_batch`` with offsets, ~1.5x the time of ``encode_batch_fast``).
  Checked: pieces in order.

The ids themselves always come from ``tokenizers``; nothing here changes
them, it only tells their piece. tests/test_encode_pieces.py compares every
way with each piece tokenized on its own.
"""

from __future__ import annotations

import re
from typing import Any, Final, NamedTuple

import numpy as np
import numpy.typing as npt

from finalfusion._tokenizers import HuggingFaceTokenizer, word_sizes

__all__ = ["BYTE_LEVEL_ALPHABET", "UNKNOWN_SPAN", "OwnerPlan", "byte_spans", "owner_plan", "run_ids", "word_starts"]

I64 = npt.NDArray[np.int64]


def _byte_level_alphabet() -> frozenset[str]:
    """The 256 characters that stand for the bytes in a byte-level BPE's tokens (GPT-2's ``bytes_to_unicode``)."""
    kept = [*range(ord("!"), ord("~") + 1), *range(0xA1, 0xAC + 1), *range(0xAE, 0xFF + 1)]
    moved = [b for b in range(256) if b not in kept]
    return frozenset(map(chr, [*kept, *range(256, 256 + len(moved))]))


#: The characters of :func:`_byte_level_alphabet`.
BYTE_LEVEL_ALPHABET: Final = _byte_level_alphabet()
#: The bytes counted for an id whose span is not known (a sum that holds one never lands on a piece's end).
UNKNOWN_SPAN: Final = 1 << 40
#: ASCII punctuation (Rust's ``is_ascii_punctuation``, which ``BertPreTokenizer`` splits off one character at a time).
ASCII_PUNCTUATION: Final = frozenset("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")
#: Pre-tokenizers whose pre-tokens :func:`word_starts` counts: each character's class (0 space, 1 and 2 the two kinds
#: of runs) and whether class 2 stands alone (one pre-token a character).
_CLASSES: Final = {
    "BertPreTokenizer": ([0 if c == " " else 2 if c in ASCII_PUNCTUATION else 1 for c in map(chr, range(128))], True),
    "Whitespace": ([0 if c == " " else 1 if re.fullmatch(r"\w", c) else 2 for c in map(chr, range(128))], False),
    "WhitespaceSplit": ([0 if c == " " else 1 for c in map(chr, range(128))], False),
}


class OwnerPlan(NamedTuple):
    """How a tokenizer's ids are told apart by piece: :func:`byte_spans` or :func:`word_starts`, or neither (offsets)."""

    spans: tuple[I64, bool] | None
    starts: tuple[npt.NDArray[np.bool_], npt.NDArray[np.uint8], bool, tuple[str, ...]] | None


def byte_spans(doc: dict[str, Any], rule: str | None) -> tuple[I64, bool] | None:
    """The bytes of text each id of ``doc`` (a ``tokenizer.json`` of ``rule``) stands for, and whether a space is put before a text.

    Known for :data:`~finalfusion._pieces.BYTE_LEVEL` tokenizers without a
    normaliser whose model is a ``BPE`` with every byte's character in its
    vocabulary (so no byte is ever unknown) and no prefix or suffix on its
    tokens: each token the model makes is a run of those characters, one
    per byte of the text (the id's span is its token's length); an added
    token matched in the text spans its content's bytes (none may strip the
    space beside it). ``ByteLevel``'s ``add_prefix_space`` puts a space
    before a text that does not start with one (the second value; then no
    added token may split a text, as the space would go before each part).
    An id whose span cannot be told this way counts :data:`UNKNOWN_SPAN`
    bytes. ``None`` where any of this does not hold.

    Examples
    --------
    >>> vocab = {c: i for i, c in enumerate(sorted(BYTE_LEVEL_ALPHABET))}
    >>> doc = {"pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False}, "model": {"type": "BPE", "vocab": vocab}}
    >>> doc["model"]["vocab"]["\\u0120the"] = 256
    >>> spans, prefix = byte_spans(doc, "byte-level")
    >>> spans[256].item(), prefix
    (4, False)
    >>> byte_spans({**doc, "normalizer": {"type": "Lowercase"}}, "byte-level") is None
    True
    """
    model = doc.get("model")
    if rule != "byte-level" or doc.get("normalizer") is not None or not isinstance(model, dict) or model.get("type") != "BPE":
        return None
    vocab, added = model.get("vocab"), doc.get("added_tokens") or []
    if model.get("continuing_subword_prefix") or model.get("end_of_word_suffix") or not isinstance(vocab, dict) or not vocab.keys() >= BYTE_LEVEL_ALPHABET:
        return None
    if any(entry.get("lstrip") or entry.get("rstrip") for entry in added):
        return None
    prefix = doc["pre_tokenizer"].get("add_prefix_space", True) is not False
    if prefix and added:
        return None
    spans = _table(vocab, added, UNKNOWN_SPAN, np.int64)
    if spans is None:
        return None
    for token, i in vocab.items():
        if _id(i) and BYTE_LEVEL_ALPHABET.issuperset(token):
            spans[i] = len(token)
    for entry in added:
        if _id(i := entry.get("id")):
            size = len(entry["content"].encode("utf-8", "surrogatepass"))
            spans[i] = size if entry["content"] not in vocab or spans[i] == size else UNKNOWN_SPAN
    return spans, prefix


def word_starts(doc: dict[str, Any], rule: str | None) -> tuple[npt.NDArray[np.bool_], npt.NDArray[np.uint8], bool, tuple[str, ...]] | None:
    """Which ids of ``doc`` (a ``tokenizer.json`` of ``rule``) start a pre-token, and how its pre-tokenizer cuts printable ASCII.

    Known for :data:`~finalfusion._pieces.DROP` tokenizers whose model is a
    ``WordPiece`` with a continuing prefix and whose pre-tokenizer is one of
    :data:`_CLASSES` (fastText's ``Split`` counts as ``WhitespaceSplit``):
    an id starts a pre-token when its token does not start with the prefix.
    The other values: each ASCII character's class, whether class 2 stands
    alone, and the added tokens' contents (a text holding one is not told
    apart this way). ``None`` where this does not hold.

    Examples
    --------
    >>> model = {"type": "WordPiece", "continuing_subword_prefix": "##", "vocab": {"[UNK]": 0, "house": 1, "##s": 2}}
    >>> doc = {"pre_tokenizer": {"type": "BertPreTokenizer"}, "model": model}
    >>> firsts, classes, alone, added = word_starts(doc, "drop")
    >>> firsts.tolist(), classes[ord(",")].item(), alone
    ([True, True, False], 2, True)
    """
    model, pre = doc.get("model"), doc.get("pre_tokenizer")
    if rule != "drop" or not isinstance(model, dict) or model.get("type") != "WordPiece" or not isinstance(pre, dict):
        return None
    prefix, vocab = model.get("continuing_subword_prefix", "##"), model.get("vocab")
    kind = "WhitespaceSplit" if pre.get("type") == "Split" else pre.get("type")
    if not isinstance(prefix, str) or not prefix or not isinstance(vocab, dict) or kind not in _CLASSES:
        return None
    added = doc.get("added_tokens") or []
    firsts = _table(vocab, added, True, np.bool_)
    if firsts is None:
        return None
    for token, i in vocab.items():
        if _id(i):
            firsts[i] = not token.startswith(prefix)
    classes, alone = _CLASSES[kind]
    return firsts, np.array(classes, dtype=np.uint8), alone, tuple(str(entry.get("content")) for entry in added)


def _id(i: object) -> bool:
    return isinstance(i, int) and not isinstance(i, bool) and i >= 0


def _table(vocab: dict[str, Any], added: list[Any], fill: Any, dtype: Any) -> Any:
    """An array with a slot for every id of ``vocab`` and ``added``, filled with ``fill``; ``None`` for ids far past their count.

    (A crafted file's id of 10^12 must not make a table of 10^12 slots: then no plan.)
    """
    ids = [i for i in vocab.values() if _id(i)] + [e.get("id") for e in added if _id(e.get("id"))]
    size = max(ids, default=-1) + 1
    return np.full(size, fill, dtype=dtype) if size <= 2 * len(ids) + 1024 else None


def owner_plan(doc: dict[str, Any] | None, rule: str | None) -> OwnerPlan:
    """:func:`byte_spans` and :func:`word_starts` of a ``tokenizer.json`` (``None``: neither).

    Examples
    --------
    >>> owner_plan(None, None)
    OwnerPlan(spans=None, starts=None)
    """
    if doc is None:
        return OwnerPlan(None, None)
    return OwnerPlan(byte_spans(doc, rule), word_starts(doc, rule))


def run_ids(tok: HuggingFaceTokenizer, runs: list[list[str]], sep: str, plan: OwnerPlan) -> tuple[I64, I64] | None:
    """The ids of ``runs`` tokenized as one text each (their pieces joined by ``sep``, flat) and the number of ids of each piece.

    The ids of a run's text are those of its pieces in turn (the caller's
    piece rule); each id's piece is told by the module's ways, in this
    order: bytes, word starts, offsets. ``None`` if the offsets do not come
    in order (then the caller tokenizes the pieces on their own).
    """
    texts = [sep.join(run) for run in runs]
    ordered = [piece for run in runs for piece in run]
    if plan.spans is not None:
        ids, _counts, _ = tok.encode_texts(texts, starts=False)
        flat = np.fromiter(ids, dtype=np.int64, count=len(ids))
        lens = _by_bytes(flat, runs, texts, ordered, plan.spans)
        if lens is not None:
            return flat, lens
    elif plan.starts is not None and _plain_ascii(texts, plan.starts[3]):
        ids, _counts, _ = tok.encode_texts(texts, starts=False)
        flat = np.fromiter(ids, dtype=np.int64, count=len(ids))
        lens = _by_word_starts(flat, " ".join(texts), len(ordered), plan.starts)
        if lens is not None:
            return flat, lens
    return _by_offsets(tok, texts, ordered, sep)


def _by_bytes(flat: I64, runs: list[list[str]], texts: list[str], ordered: list[str], spans: tuple[I64, bool]) -> I64 | None:
    """The number of ids of each piece, told by the bytes each id spans; ``None`` if a piece does not end where an id ends."""
    table, prefix = spans
    known = flat < len(table)
    token_ends = np.cumsum(np.where(known, table[np.where(known, flat, 0)], UNKNOWN_SPAN))
    piece_bytes = np.fromiter(word_sizes(ordered), dtype=np.int64, count=len(ordered))
    if prefix:
        run_lens = np.fromiter(map(len, runs), dtype=np.int64, count=len(runs))
        piece_bytes[np.cumsum(run_lens) - run_lens] += np.fromiter((t[:1] != " " for t in texts), dtype=np.int64, count=len(texts))
    piece_ends = np.cumsum(piece_bytes)
    if not len(flat) or token_ends[-1] != piece_ends[-1]:
        return None
    at = np.minimum(np.searchsorted(token_ends, piece_ends), len(flat) - 1)
    if not bool((token_ends[at] == piece_ends).all()):
        return None
    return np.bincount(np.searchsorted(piece_ends, token_ends), minlength=len(ordered)).astype(np.int64, copy=False)


def _plain_ascii(texts: list[str], added: tuple[str, ...]) -> bool:
    """Whether ``texts`` are printable ASCII (spaces between pieces) holding no added token's content, as written or lowercased."""
    joined = "".join(texts)
    if not (joined.isascii() and joined.replace(" ", "").isprintable()):
        return False
    lowered = joined.lower()
    return not any(content in joined or content in lowered for content in added)


def _by_word_starts(flat: I64, text: str, pieces: int, starts: tuple[npt.NDArray[np.bool_], npt.NDArray[np.uint8], bool, tuple[str, ...]]) -> I64 | None:
    """The number of ids of each of the ``pieces`` of ``text`` (joined by single spaces), told by the ids that start a pre-token.

    ``None`` if there are not as many of those as pre-tokens.
    """
    firsts, classes, alone, _added = starts
    chars = classes[np.frombuffer(text.encode("ascii"), dtype=np.uint8)]
    before = np.concatenate(([0], chars[:-1]))
    pre_tokens = np.flatnonzero((chars != 0) & ((chars != before) | ((chars == 2) & alone)))
    is_first = firsts[np.minimum(flat, len(firsts) - 1)] | (flat >= len(firsts))
    if int(is_first.sum()) != len(pre_tokens) or (len(flat) and not is_first[0]):
        return None
    space = np.flatnonzero(chars == 0)  # one between two pieces (none in a piece): piece of a character = spaces before it
    if len(space) != pieces - 1:
        return None
    owners = np.searchsorted(space, pre_tokens)[np.cumsum(is_first) - 1]
    return np.bincount(owners, minlength=pieces).astype(np.int64, copy=False)


def _by_offsets(tok: HuggingFaceTokenizer, texts: list[str], ordered: list[str], sep: str) -> tuple[I64, I64] | None:
    """The ids of ``texts`` and the number of each piece's, told by the character each id starts at; ``None`` if out of order."""
    ids, counts, starts = tok.encode_texts(texts, starts=True)
    flat = np.fromiter(ids, dtype=np.int64, count=len(ids))
    steps = np.fromiter(map(len, ordered), dtype=np.int64, count=len(ordered)) + len(sep)
    piece_starts = np.cumsum(steps) - steps
    text_steps = np.fromiter(map(len, texts), dtype=np.int64, count=len(texts)) + len(sep)
    text_starts = np.repeat(np.cumsum(text_steps) - text_steps, np.fromiter(counts, dtype=np.int64, count=len(counts)))
    owners = np.searchsorted(piece_starts, np.fromiter(starts or [], dtype=np.int64, count=len(flat)) + text_starts, side="right") - 1
    if len(owners) and (bool((np.diff(owners) < 0).any()) or owners[0] < 0):
        return None
    return flat, np.bincount(owners, minlength=len(ordered)).astype(np.int64, copy=False)
