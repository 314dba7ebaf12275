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
  an added token's content are not taken this way at all). The same for
  :data:`finalfusion._pieces.METASPACE` with ``Unigram``
  (:func:`metaspace_starts`), where each piece is one such word: its first
  id starts with ``Metaspace``'s replacement character, no other id does.
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

__all__ = ["BYTE_LEVEL_ALPHABET", "UNKNOWN_SPAN", "OwnerPlan", "byte_spans", "metaspace_starts", "owner_plan", "run_ids", "word_starts"]

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
    """How a tokenizer's ids are told apart by piece: :func:`byte_spans`, starts (:func:`word_starts`, :func:`metaspace_starts`), or neither (offsets).

    ``ascii``: ``None`` where the plan holds for any text, else the added
    tokens' contents: the plan holds only for texts of printable ASCII that
    hold none of them (as written or lowercased).
    """

    spans: tuple[I64, bool] | None
    starts: tuple[npt.NDArray[np.bool_], npt.NDArray[np.uint8] | None, bool] | None
    ascii: tuple[str, ...] | None = None


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


def word_starts(doc: dict[str, Any], rule: str | None) -> tuple[npt.NDArray[np.bool_], npt.NDArray[np.uint8], bool] | None:
    """Which ids of ``doc`` (a ``tokenizer.json`` of ``rule``) start a pre-token, and how its pre-tokenizer cuts printable ASCII.

    Known for :data:`~finalfusion._pieces.DROP` tokenizers whose model is a
    ``WordPiece`` with a continuing prefix and whose pre-tokenizer is one of
    :data:`_CLASSES` (fastText's ``Split`` counts as ``WhitespaceSplit``):
    an id starts a pre-token when its token does not start with the prefix.
    The other values: each ASCII character's class and whether class 2
    stands alone. For printable ASCII texts only (:class:`OwnerPlan`).
    ``None`` where this does not hold.

    Examples
    --------
    >>> model = {"type": "WordPiece", "continuing_subword_prefix": "##", "vocab": {"[UNK]": 0, "house": 1, "##s": 2}}
    >>> doc = {"pre_tokenizer": {"type": "BertPreTokenizer"}, "model": model}
    >>> firsts, classes, alone = word_starts(doc, "drop")
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
    return firsts, np.array(classes, dtype=np.uint8), alone


def metaspace_starts(doc: dict[str, Any], rule: str | None) -> tuple[npt.NDArray[np.bool_], None, bool] | None:
    """Which ids of ``doc`` (a ``tokenizer.json`` of ``rule``) start a piece: those whose token starts with ``Metaspace``'s replacement.

    Known for :data:`~finalfusion._pieces.METASPACE` tokenizers with a
    ``Unigram`` model whose vocabulary holds the replacement character on
    its own, and a scheme that puts one before a text that does not start
    with a space (not ``never``): on printable ASCII texts (:class:`OwnerPlan`)
    the only replacement characters are the pieces' spaces (and the one
    before a text), so each piece starts with one and ``Unigram`` gives it
    one id that starts with it (the unknown token never holds it: a
    character with a piece of its own is never unknown); no other id does.
    The other values say: one word a piece (no character classes).

    Examples
    --------
    >>> doc = {"pre_tokenizer": {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always"}, "model": {"type": "Unigram", "unk_id": 0}}
    >>> doc["model"]["vocab"] = [["<unk>", 0.0], ["\u2581", -1.0], ["\u2581the", -1.0], ["s", -2.0]]
    >>> metaspace_starts(doc, "metaspace")[0].tolist()
    [False, True, True, False]
    """
    model, pre = doc.get("model"), doc.get("pre_tokenizer")
    if rule != "metaspace" or not isinstance(model, dict) or model.get("type") != "Unigram" or not isinstance(pre, dict):
        return None
    vocab, replacement = model.get("vocab"), pre.get("replacement", "\u2581")
    scheme = pre.get("prepend_scheme", "always" if pre.get("add_prefix_space", True) else "never")  # older files: add_prefix_space
    if not isinstance(vocab, list) or not isinstance(replacement, str) or len(replacement) != 1 or scheme == "never" or len(vocab) > (1 << 24):
        return None
    tokens = [e[0] if isinstance(e, list) and e and isinstance(e[0], str) else "" for e in vocab]
    if replacement not in tokens:
        return None
    return np.fromiter((t.startswith(replacement) for t in tokens), dtype=np.bool_, count=len(tokens)), None, False


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
    """:func:`byte_spans`, or the starts (:func:`word_starts`, :func:`metaspace_starts`) of a ``tokenizer.json`` (``None``: none).

    Examples
    --------
    >>> owner_plan(None, None)
    OwnerPlan(spans=None, starts=None, ascii=None)
    """
    if doc is None:
        return OwnerPlan(None, None)
    spans = byte_spans(doc, rule)
    if spans is not None:
        return OwnerPlan(spans, None)
    added = tuple(str(entry.get("content")) for entry in doc.get("added_tokens") or [] if isinstance(entry, dict))
    starts = word_starts(doc, rule) or metaspace_starts(doc, rule)
    return OwnerPlan(None, starts, added) if starts is not None else OwnerPlan(None, None)


def run_ids(tok: HuggingFaceTokenizer, runs: list[list[str]], sep: str, plan: OwnerPlan) -> tuple[I64, I64] | None:
    """The ids of ``runs`` tokenized as one text each (their pieces joined by ``sep``, flat) and the number of ids of each piece.

    The ids of a run's text are those of its pieces in turn (the caller's
    piece rule); each id's piece is told by the module's ways, in this
    order: byte spans, word starts, offsets; a text whose
    check fails under the first two (an unknown token in it, say) goes to
    the offsets, the others keep their answer. ``None`` if the offsets do
    not come in order (then the caller tokenizes the pieces on their own).
    """
    texts = [sep.join(run) for run in runs]
    ordered = [piece for run in runs for piece in run]
    if (plan.spans is None and plan.starts is None) or not (plan.ascii is None or _plain_ascii(texts, plan.ascii)):
        return _by_offsets(tok, texts, ordered, sep)
    ids, counts_list, _ = tok.encode_texts(texts, starts=False)
    flat = np.fromiter(ids, dtype=np.int64, count=len(ids))
    counts = np.fromiter(counts_list, dtype=np.int64, count=len(counts_list))
    run_lens = np.fromiter(map(len, runs), dtype=np.int64, count=len(runs))
    told: tuple[I64, npt.NDArray[np.bool_]] | None
    if plan.spans is not None:
        told = _by_spans(flat, counts, run_lens, texts, ordered, plan.spans)
    else:
        told = _by_word_starts(flat, counts, run_lens, texts, plan.starts) if plan.starts is not None else None
    if told is None:
        return _by_offsets(tok, texts, ordered, sep)
    lens, bad = told
    if not bad.any():
        return flat, lens
    redo = np.flatnonzero(bad).tolist()
    again = _by_offsets(tok, [texts[i] for i in redo], [piece for i in redo for piece in runs[i]], sep)
    if again is None:
        return None
    flat_again, lens_again = again
    piece_bad = np.repeat(bad, run_lens)
    lens[piece_bad] = lens_again
    token_run = np.repeat(np.arange(len(runs), dtype=np.int64), counts)
    kept = ~bad[token_run]
    again_run = np.repeat(np.repeat(np.asarray(redo, dtype=np.int64), run_lens[redo]), lens_again)
    keys = np.concatenate((token_run[kept], again_run))
    return np.concatenate((flat[kept], flat_again))[np.argsort(keys, kind="stable")], lens


def _ends(values: I64, counts: I64) -> tuple[I64, I64]:
    """The running sums of ``values`` within each group of ``counts`` (in order), and each group's total."""
    total = np.cumsum(values)
    ends = np.cumsum(counts)
    before = np.concatenate(([0], total))[ends - counts]
    return total - np.repeat(before, counts), np.concatenate(([0], total))[ends] - before


def _by_spans(flat: I64, counts: I64, run_lens: I64, texts: list[str], ordered: list[str], spans: tuple[I64, bool]) -> tuple[I64, npt.NDArray[np.bool_]]:
    """The number of ids of each piece, told by the bytes each id spans, and which texts fail the check.

    A text fails when its ids do not add up to its pieces or a piece of it
    does not end where an id ends; the counts of its pieces are then 0.
    """
    table, prefix = spans
    known = flat < len(table)
    token_ends, token_totals = _ends(np.where(known, table[np.where(known, flat, 0)], UNKNOWN_SPAN), counts)
    piece_bytes = np.fromiter(word_sizes(ordered), dtype=np.int64, count=len(ordered))
    if prefix:
        piece_bytes[np.cumsum(run_lens) - run_lens] += np.fromiter((t[:1] != " " for t in texts), dtype=np.int64, count=len(texts))
    piece_ends, piece_totals = _ends(piece_bytes, run_lens)
    bad = token_totals != piece_totals
    # Each good text's ends moved to where its pieces start in one line: ascending, and a text's never reach the next one's.
    piece_start = np.cumsum(piece_totals) - piece_totals
    token_run = np.repeat(np.arange(len(run_lens), dtype=np.int64), counts)
    piece_run = np.repeat(np.arange(len(run_lens), dtype=np.int64), run_lens)
    good_tokens = ~bad[token_run]
    line = (token_ends + piece_start[token_run])[good_tokens]
    piece_line = piece_ends + piece_start[piece_run]
    at = np.minimum(np.searchsorted(line, piece_line), max(len(line) - 1, 0))
    missed = ~bad[piece_run] & ((line[at] != piece_line) if len(line) else True)
    bad[piece_run[missed]] = True
    good_tokens = ~bad[token_run]
    good_pieces = np.flatnonzero(~bad[piece_run])
    owners = good_pieces[np.searchsorted(piece_line[good_pieces], (token_ends + piece_start[token_run])[good_tokens])]
    return np.bincount(owners, minlength=len(ordered)).astype(np.int64, copy=False), bad


def _plain_ascii(texts: list[str], added: tuple[str, ...]) -> bool:
    """Whether ``texts`` are printable ASCII (spaces between pieces) holding no added token's content, as written or lowercased."""
    joined = "".join(texts)
    if not (joined.isascii() and joined.replace(" ", "").isprintable()):
        return False
    lowered = joined.lower()
    return not any(content in joined or content in lowered for content in added)


def _by_word_starts(
    flat: I64, counts: I64, run_lens: I64, texts: list[str], starts: tuple[npt.NDArray[np.bool_], npt.NDArray[np.uint8] | None, bool]
) -> tuple[I64, npt.NDArray[np.bool_]] | None:
    """The number of ids of each piece of ``texts`` (the runs' texts), told by the ids that start a word.

    The words are the pre-tokens counted by the character classes (pieces
    joined by single spaces, as :data:`~finalfusion._pieces.DROP` joins
    them), or each piece (no classes). A text fails when
    it has not as many of those ids as words, or its first id does not start
    one; the counts of its pieces are then 0. ``None`` if a piece holds a
    space (then nothing is told this way).
    """
    firsts, classes, alone = starts
    pieces = int(run_lens.sum())
    if classes is None:
        pre_piece = np.arange(pieces, dtype=np.int64)
    else:
        chars = classes[np.frombuffer(" ".join(texts).encode("ascii"), dtype=np.uint8)]
        before = np.concatenate(([0], chars[:-1]))
        pre_tokens = np.flatnonzero((chars != 0) & ((chars != before) | ((chars == 2) & alone)))
        space = np.flatnonzero(chars == 0)  # one between two pieces (none in a piece): piece of a character = spaces before it
        if len(space) != pieces - 1:
            return None
        pre_piece = np.searchsorted(space, pre_tokens)
    is_first = firsts[np.minimum(flat, len(firsts) - 1)] | (flat >= len(firsts))
    runs = len(run_lens)
    token_run = np.repeat(np.arange(runs, dtype=np.int64), counts)
    piece_run = np.repeat(np.arange(runs, dtype=np.int64), run_lens)
    bad = np.bincount(token_run[is_first], minlength=runs) != np.bincount(piece_run[pre_piece], minlength=runs)
    first_of_run = (np.cumsum(counts) - counts)[counts > 0]
    bad[token_run[first_of_run[~is_first[first_of_run]]]] = True
    good = ~bad[token_run]
    owners = pre_piece[~bad[piece_run[pre_piece]]][np.cumsum(is_first[good]) - 1]
    return np.bincount(owners, minlength=pieces).astype(np.int64, copy=False), bad


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
