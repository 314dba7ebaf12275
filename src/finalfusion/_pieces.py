"""Token ids of many texts, each distinct piece of them tokenized once (:meth:`~finalfusion.Embeddings.encode`).

Sentences repeat words. For most ``tokenizer.json`` pipelines a text can be
cut at (some of) its spaces so that the ids of the text are the ids of its
pieces, each tokenized on its own; then each distinct piece needs the
tokenizer only once per call. :class:`PieceIds` keeps those ids in one flat
table and assembles a batch's ids with numpy; the tokenizer itself still does
all the work on each piece (added tokens, normaliser, pre-tokenizer, model):
nothing of it is re-implemented here.

**The piece rules** (:func:`piece_rule`, read from the checked
``tokenizer.json``; anything else takes the plain path, one call per text):

* :data:`DROP` -- the pre-tokenizer drops spaces and splits there:
  ``BertPreTokenizer``, ``Whitespace``, ``WhitespaceSplit``, the ``Split``
  that removes runs of fastText's separators
  (:data:`finalfusion._tokenizers.FASTTEXT_SPACE_REGEX`, ``write_model2vec``'s
  word tokenizers), or a ``Sequence`` that starts with one of them followed by
  ``Punctuation``, ``Digits`` or those (later pre-tokenizers of a sequence
  split each piece on its own). The text is cut at every space, which goes:
  the ids of ``a + " " + b`` are the ids of ``a`` then those of ``b``.
* :data:`METASPACE` -- ``Metaspace`` that splits (``split`` true; any
  ``prepend_scheme``). It turns every space into the replacement character
  ``▁`` and starts a pre-token at each ``▁``, so the text is cut *before*
  every space and each later piece keeps its space: the ids of ``a + " " +
  b`` are the ids of ``a`` then those of ``" " + b`` (which starts with
  ``▁`` after the space is replaced, so nothing is prepended to it, whatever
  the scheme; a double space gives the piece ``" "``, a ``▁`` of its own, as
  in the text).
* :data:`BYTE_LEVEL` -- ``ByteLevel`` with its GPT-2 regex (``use_regex``
  true). The regex starts a pre-token at a space that stands between two
  characters that are not whitespace (``" word"``), no pre-token reaches
  across it, and the pre-tokens after it do not depend on the text before
  it (no look-behind), so the text is cut before such a space (and only
  there: a run of spaces or a space next to a newline stays inside a piece,
  where the regex treats it on its own terms). Whitespace is Python's
  ``str.isspace``, which holds for every character the regex calls
  whitespace (tests/test_encode_pieces.py checks all of Unicode), so a cut
  is only ever made where the regex makes one.

The other parts must not look across a cut:

* the normaliser maps each character on its own and a space to a space. For
  :data:`DROP` and :data:`METASPACE`: none, ``BertNormalizer``,
  ``Lowercase``, ``StripAccents``, ``NFC``, ``NFD``, ``NFKC``, ``NFKD`` or a
  ``Sequence`` of them (a space is a starter that never composes, so the
  Unicode forms stop there too). For :data:`BYTE_LEVEL`, whose cuts depend on
  the characters next to the space, only those that never turn a character
  that is not whitespace into one that starts or ends with whitespace: none,
  ``Lowercase``, ``NFC``, ``NFD``. Never ``Replace``, ``Strip``,
  ``Prepend`` nor ``Precompiled``;
* the model is ``WordPiece``, ``WordLevel``, ``Unigram`` or ``BPE``
  without dropout (each pre-token is tokenized on its own; dropout is random);
* no added token can match across a cut: no content holds a space (for the
  rules that keep spaces: no whitespace, and no ``rstrip``, which takes the
  whitespace after a match, nor for :data:`METASPACE` ``lstrip``, which takes
  a run of spaces before it; :data:`BYTE_LEVEL` cuts only before a single
  space that follows a character that is not whitespace, so ``lstrip``, as
  RoBERTa's ``<mask>`` has it, takes the same space in the piece as in the
  text), and the content of a ``normalized`` one is printable ASCII (which
  those normalisers never turn into a space);
* the post-processor leaves ids alone without special tokens: none,
  ``TemplateProcessing``, ``BertProcessing``, ``RobertaProcessing``,
  ``ByteLevel`` or a ``Sequence`` of them.

**When the table pays.** Tokenizing a piece once pays when pieces repeat
(natural text: a batch of 1,024 sentences has ~40 % distinct words, later
batches fewer new ones); when nearly every piece is new (random strings,
identifiers), the table is pure overhead. Each batch first looks up the pieces
of its first ~:data:`SAMPLE_CHARS` characters: when more than
:data:`NEW_SHARE` of the distinct ones are new, :meth:`PieceIds.ids` returns
``None`` and the caller tokenizes the batch's texts whole (the plain path,
whose ``tokenizers`` call runs on the library's threads), leaving the table
alone. The new distinct pieces of a batch go to ``tokenizers`` outside the
table's lock (batches on other threads go on meanwhile), joined again into
texts of up to :data:`finalfusion._tokenizers.BLOCK_BYTES` bytes where the
rule allows (:func:`_runs`: the library's cost per text, several
microseconds, is paid once per such text instead of once per piece), their
ids told apart by piece by :mod:`finalfusion._piece_owners`; the pieces that
cannot be joined go as pre-tokenized sequences of up to
:data:`finalfusion._tokenizers.BLOCK_WORDS` words
(:meth:`~finalfusion._tokenizers.HuggingFaceTokenizer.encode_each`).

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
import re
import threading
from collections.abc import Sequence
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from finalfusion import limits
from finalfusion._piece_owners import OwnerPlan, owner_plan, run_ids
from finalfusion._tokenizers import (
    BLOCK_BYTES,
    BLOCK_WORDS,
    FASTTEXT_SPACE_REGEX,
    HuggingFaceTokenizer,
    Tokenizer,
    _is_text,
    checked_tokenizer_json,
    encodable_text,
    word_sizes,
)

__all__ = ["BYTE_LEVEL", "DROP", "METASPACE", "PieceIds", "piece_rule", "splits_at_spaces", "tokenizer_piece_rule"]

I64 = npt.NDArray[np.int64]

#: Cut at every space, which goes (pre-tokenizers that drop spaces).
DROP: Final = "drop"
#: Cut before every space, which starts the next piece (``Metaspace``).
METASPACE: Final = "metaspace"
#: Cut before every space between two characters that are not whitespace (``ByteLevel`` with its regex).
BYTE_LEVEL: Final = "byte-level"

#: Pre-tokenizers that split at every space and drop it.
SPACE_SPLITTERS: Final = frozenset({"BertPreTokenizer", "Whitespace", "WhitespaceSplit"})
#: Pre-tokenizers that may follow a space splitter in a ``Sequence`` (each splits one piece without looking at others).
PIECE_SPLITTERS: Final = SPACE_SPLITTERS | {"Punctuation", "Digits"}
#: Normalisers that map each character on its own (the Unicode forms: up to the next starter) and keep a space a space.
LOCAL_NORMALIZERS: Final = frozenset({"BertNormalizer", "Lowercase", "StripAccents", "NFC", "NFD", "NFKC", "NFKD"})
#: Of those, the ones that never turn a character that is not whitespace into one that starts or ends with whitespace.
NO_SPACE_NORMALIZERS: Final = frozenset({"Lowercase", "NFC", "NFD"})
#: Post-processors that only add special tokens (never asked for here) or change offsets.
ID_KEEPING_PROCESSORS: Final = frozenset({"TemplateProcessing", "BertProcessing", "RobertaProcessing", "ByteLevel"})
#: Models that tokenize each pre-token on its own, deterministically (BPE: without dropout).
PIECE_MODELS: Final = frozenset({"WordPiece", "WordLevel", "Unigram", "BPE"})
#: Bytes counted per cached piece besides its characters and ids (the dict entry and the str object).
ENTRY_BYTES: Final = 120
#: Characters of a batch (its first texts) whose pieces are looked up before deciding whether the table pays for the batch.
SAMPLE_CHARS: Final = 1 << 14
#: Share of new distinct pieces in the sample above which the batch's texts are tokenized whole.
NEW_SHARE: Final = 0.75
#: Where :data:`BYTE_LEVEL` cuts: at a space between two characters that are not whitespace (the match starts
#: with the space itself, so that ``re`` looks for spaces and checks only them).
BYTE_LEVEL_CUT: Final = re.compile(r" (?<=\S )(?=\S)")
#: The ASCII characters Python calls whitespace.
ASCII_SPACES: Final = "".join(chr(c) for c in range(128) if chr(c).isspace())
#: Characters that join texts and mark cuts while splitting (two that no text of the batch holds are used).
MARKS: Final = "\x1f\x1e\x1d\x1c"


def _kind(part: Any) -> str | None:
    return part.get("type") if isinstance(part, dict) and isinstance(part.get("type"), str) else None


def _space_splitter(step: Any) -> bool:
    """One of :data:`SPACE_SPLITTERS`, or the ``Split`` at runs of fastText's separators that drops them (``write_model2vec``'s)."""
    if _kind(step) in SPACE_SPLITTERS:
        return True
    return (
        _kind(step) == "Split" and step.get("pattern") == {"Regex": FASTTEXT_SPACE_REGEX} and step.get("behavior") == "Removed" and step.get("invert") is False
    )


def _pre_tokenizer_rule(pre: Any) -> str | None:
    if _space_splitter(pre):
        return DROP
    kind = _kind(pre)
    if kind == "Metaspace" and pre.get("split", True) is True:
        return METASPACE
    if kind == "ByteLevel" and pre.get("use_regex", True) is True:
        return BYTE_LEVEL
    steps = pre.get("pretokenizers") if kind == "Sequence" else None
    if isinstance(steps, list) and steps and _space_splitter(steps[0]) and all(_space_splitter(s) or _kind(s) in PIECE_SPLITTERS for s in steps):
        return DROP
    return None


def _all_in(part: Any, steps_key: str, allowed: Any) -> bool:
    """Whether a pipeline part is absent, one of ``allowed``, or a ``Sequence`` (steps under ``steps_key``) of them."""
    if part is None:
        return True
    kind = _kind(part)
    if kind == "Sequence":
        steps = part.get(steps_key)
        return isinstance(steps, list) and all(_kind(s) in allowed for s in steps)
    return kind in allowed


def _normalizer_ok(norm: Any, rule: str) -> bool:
    return _all_in(norm, "normalizers", NO_SPACE_NORMALIZERS if rule == BYTE_LEVEL else LOCAL_NORMALIZERS)


def _processor_ok(proc: Any) -> bool:
    return _all_in(proc, "processors", ID_KEEPING_PROCESSORS)


def _added_ok(added: Any, rule: str) -> bool:
    if added is None:
        return True
    if not isinstance(added, list):
        return False
    for entry in added:
        content = entry.get("content") if isinstance(entry, dict) else None
        if not isinstance(content, str) or " " in content:
            return False
        if rule != DROP and (any(c.isspace() for c in content) or entry.get("rstrip", False) is not False):
            return False
        if rule == METASPACE and entry.get("lstrip", False) is not False:
            return False
        if entry.get("normalized", True) and not all(c.isascii() and c.isprintable() and not c.isspace() for c in content):
            return False
    return True


def piece_rule(doc: dict[str, Any]) -> str | None:
    """Where ``doc`` (a ``tokenizer.json``) lets a text be cut into pieces tokenized on their own.

    :data:`DROP`, :data:`METASPACE`, :data:`BYTE_LEVEL`, or ``None``.

    The conditions are the module's (its docstring says why each holds);
    ``None`` for anything not known to hold.

    Examples
    --------
    >>> bert = {"normalizer": {"type": "BertNormalizer"}, "pre_tokenizer": {"type": "BertPreTokenizer"}, "model": {"type": "WordPiece"}}
    >>> piece_rule(bert), piece_rule({**bert, "pre_tokenizer": {"type": "Metaspace"}}), piece_rule({**bert, "pre_tokenizer": {"type": "ByteLevel"}})
    ('drop', 'metaspace', None)
    >>> piece_rule({"pre_tokenizer": {"type": "ByteLevel", "use_regex": True}, "model": {"type": "BPE"}})
    'byte-level'
    """
    model = doc.get("model")
    if _kind(model) not in PIECE_MODELS or (isinstance(model, dict) and model.get("dropout") not in (None, 0, 0.0)):
        return None
    rule = _pre_tokenizer_rule(doc.get("pre_tokenizer"))
    if rule is None or not (
        _normalizer_ok(doc.get("normalizer"), rule) and _processor_ok(doc.get("post_processor")) and _added_ok(doc.get("added_tokens"), rule)
    ):
        return None
    return rule


def splits_at_spaces(doc: dict[str, Any]) -> bool:
    """Whether :func:`piece_rule` finds a rule for the ``tokenizer.json`` ``doc``.

    Examples
    --------
    >>> splits_at_spaces({"pre_tokenizer": {"type": "Metaspace", "split": False}, "model": {"type": "Unigram"}})
    False
    """
    return piece_rule(doc) is not None


def tokenizer_piece_rule(tokenizer: Tokenizer) -> str | None:
    """:func:`piece_rule` of a ``tokenizer.json`` tokenizer (``None`` for the other kinds), worked out once per tokenizer."""
    return _tokenizer_plan(tokenizer)[0]


def _cut(rule: str, texts: list[str]) -> tuple[list[str], I64] | None:
    """The pieces of ``texts`` by ``rule`` (flat, in order) and the pieces of each text; ``None`` if no two marks are free."""
    if rule == DROP:
        pieces = " ".join(texts).split(" ")  # text i has its spaces + 1 pieces
        return pieces, np.fromiter(map(str.count, texts, itertools.repeat(" ")), dtype=np.int64, count=len(texts)) + 1
    everything = "".join(texts)
    free = [c for c in MARKS if c not in everything]
    if len(free) < 2:
        return None
    sep, mark = free[0], free[1]
    joined = sep.join(texts)
    marked = joined.replace(" ", mark + " ") if rule == METASPACE or _single_spaces(joined, sep) else BYTE_LEVEL_CUT.sub(mark + " ", joined)
    per_text = np.fromiter(map(str.count, marked.split(sep), itertools.repeat(mark)), dtype=np.int64, count=len(texts)) + 1
    return marked.replace(sep, mark).split(mark), per_text


def _single_spaces(joined: str, sep: str) -> bool:
    """Whether every space of the ASCII text ``joined`` (texts joined by ``sep``) stands between two characters that are not whitespace.

    Then :data:`BYTE_LEVEL` cuts at every space (a quick look with ``in`` instead of the regex, for the common case).
    """
    if not joined.isascii() or joined[:1] == " " or joined[-1:] == " " or "  " in joined or sep + " " in joined or " " + sep in joined:
        return False
    return not any(c in joined for c in ASCII_SPACES if c not in (" ", sep))


def _tokenizer_plan(tokenizer: Tokenizer) -> tuple[str | None, OwnerPlan]:
    """:func:`piece_rule` and :func:`~finalfusion._piece_owners.owner_plan` of a ``tokenizer.json`` tokenizer, worked out once per tokenizer.

    ``None`` and an empty plan for the other kinds.
    """
    cached: tuple[str | None, OwnerPlan] | None = getattr(tokenizer, "_piece_plan", None)
    if cached is None:
        doc = checked_tokenizer_json(tokenizer.to_bytes()) if tokenizer.kind == "huggingface" else None
        rule = piece_rule(doc) if doc is not None else None
        cached = (rule, owner_plan(doc, rule))
        tokenizer._piece_plan = cached  # type: ignore[attr-defined]
    return cached


def _runs(rule: str, pieces: list[str], sizes: list[int]) -> tuple[list[list[str]], list[str]]:
    """Runs of ``pieces`` that ``rule`` lets be tokenized as one text (joined by :func:`_separator`), and the pieces left to go alone.

    A piece may follow another in a run where its text would have been cut
    before it, and be followed where the text could have been cut after it:
    for :data:`DROP` any piece (a space joins them and goes, as at every
    cut); for :data:`METASPACE` one that starts with a space may follow
    (the rule cuts before every space); for :data:`BYTE_LEVEL` one that
    starts with a space and then a character that is not whitespace may
    follow, and one that ends with a character that is not whitespace may be
    followed. Each run holds at most half of :func:`_run_bytes` of pieces
    that may do both, a piece that may only be followed (first) and one that
    may only follow (last). Empty pieces (no ids) and pieces of more than a
    quarter of :func:`_run_bytes` go alone.
    """
    if rule == DROP:
        follow = followed = [True] * len(pieces)
    elif rule == METASPACE:
        follow, followed = [p[:1] == " " for p in pieces], [True] * len(pieces)
    else:
        follow = [p[:1] == " " and p[1:2].strip() != "" for p in pieces]
        followed = [p[-1:].strip() != "" for p in pieces]
    firsts: list[str] = []
    lasts: list[str] = []
    alone: list[str] = []
    chunks: list[list[str]] = [[]]
    total = 0
    cap = _run_bytes()
    for piece, size, may_follow, may_be_followed in zip(pieces, sizes, follow, followed, strict=True):
        if not piece or size > cap // 4 or not (may_follow or may_be_followed):
            alone.append(piece)
        elif not may_follow:
            firsts.append(piece)
        elif not may_be_followed:
            lasts.append(piece)
        else:
            if total + size > cap // 2 or len(chunks[-1]) >= BLOCK_WORDS:
                chunks.append([])
                total = 0
            chunks[-1].append(piece)
            total += size
    runs: list[list[str]] = []
    for first, chunk, last in itertools.zip_longest(firsts, chunks, lasts):
        run = [first] if first is not None else []
        run += chunk or []
        if last is not None:
            run.append(last)
        if len(run) > 1:
            runs.append(run)
        else:
            alone += run
    return runs, alone


def _run_bytes() -> int:
    """Most bytes of a joined text: :data:`~finalfusion._tokenizers.BLOCK_BYTES`, never more than a text may have.

    (:data:`finalfusion.limits.MAX_TOKENIZE_BYTES`, read at call time: a batch the plain path takes is taken.)
    """
    return max(8, min(BLOCK_BYTES, limits.MAX_TOKENIZE_BYTES))


def _separator(rule: str) -> str:
    """What joins the pieces of a run: a space for :data:`DROP` (which drops it), nothing for the rules whose pieces keep theirs."""
    return " " if rule == DROP else ""


def _ids_and_lengths(tok: Tokenizer, words: list[str], rule: str, plan: OwnerPlan) -> tuple[list[str], I64, I64]:
    """``words`` in the order their ids come, the ids (flat) and the number of ids of each word, from the tokenizer.

    A ``tokenizers`` tokenizer gets the runs of :func:`_runs` as whole texts
    (:func:`~finalfusion._piece_owners.run_ids`; for a plan that holds for
    ASCII only, the ASCII words apart from the others) and the other words as pre-tokenized
    sequences (:meth:`~finalfusion._tokenizers.HuggingFaceTokenizer.encode_each`).
    """
    if not isinstance(tok, HuggingFaceTokenizer):
        encoded = tok.encode_batch(words)
        lens = np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded))
        return words, np.fromiter(itertools.chain.from_iterable(encoded), dtype=np.int64, count=int(lens.sum())), lens
    groups = [words]
    if plan.ascii is not None and not "".join(words).isascii():
        plain = [w.isascii() for w in words]
        groups = [list(itertools.compress(words, plain)), [w for w, p in zip(words, plain, strict=True) if not p]]
    ordered: list[str] = []
    alone: list[str] = []
    flats: list[I64] = []
    lens_of: list[I64] = []
    for group in groups:
        runs, rest = _runs(rule, group, word_sizes(group))
        got = run_ids(tok, runs, _separator(rule), plan) if runs else None
        if got is None:
            rest = [piece for run in runs for piece in run] + rest
        else:
            ordered += itertools.chain.from_iterable(runs)
            flats.append(got[0])
            lens_of.append(got[1])
        if rule == BYTE_LEVEL and plan.spans is not None and not plan.spans[1] and len(rest) > 1:  # no space put before a text
            rest = _with_guards(tok, rest, plan, ordered, flats, lens_of)
        alone += rest
    if alone:
        flat, owners = tok.encode_each(alone)
        flats.append(np.asarray(flat, dtype=np.int64))
        lens_of.append(np.bincount(np.asarray(owners, dtype=np.int64), minlength=len(alone)).astype(np.int64, copy=False))
    return ordered + alone, np.concatenate(flats) if flats else np.zeros(0, dtype=np.int64), np.concatenate(lens_of) if lens_of else np.zeros(0, dtype=np.int64)


#: What goes between two pieces that start texts (:func:`_with_guards`): a pre-token of its own between two characters that are not whitespace.
GUARD: Final = "\n"


def _with_guards(tok: HuggingFaceTokenizer, pieces: list[str], plan: OwnerPlan, ordered: list[str], flats: list[I64], lens_of: list[I64]) -> list[str]:
    """Tokenize the :data:`BYTE_LEVEL` pieces that start texts joined by :data:`GUARD`; append them, their ids and counts; return the rest.

    A piece that starts a text cannot follow another (the two would be one
    pre-token), but between two characters that are not whitespace a
    newline is a pre-token of GPT-2's regex on its own (its "whitespace not
    followed by a non-space" alternative fails before the next character,
    its plain whitespace alternative takes the newline alone, and no
    alternative looks behind), so the text ``a``, newline, ``b`` gives the ids
    of ``a``, the newline's and those of ``b``. Only with byte spans
    (:func:`~finalfusion._piece_owners.byte_spans`: no normaliser, no added
    token that strips whitespace) and no space put before a text (which
    ``b`` would lose after the newline): the newline is then a piece of one byte,
    checked like the others, and its ids are dropped. Pieces that start or
    end with whitespace, and larger ones, are returned.
    """
    cap = _run_bytes()
    fit = [(p, size + 1) for p, size in zip(pieces, word_sizes(pieces), strict=True) if p[:1].strip() and p[-1:].strip() and size < cap // 4]
    if len(fit) < 2:
        return pieces
    runs: list[list[str]] = [[]]
    total = 0
    for piece, size in fit:
        if runs[-1] and (total + size > cap or len(runs[-1]) >= 2 * BLOCK_WORDS):
            runs.append([])
            total = 0
        if runs[-1]:
            runs[-1].append(GUARD)
        runs[-1].append(piece)
        total += size
    got = run_ids(tok, runs, "", plan)
    if got is None:
        return pieces
    flat, lens = got
    keep = np.ones(len(lens), dtype=bool)
    at = 0
    for run in runs:
        keep[at + 1 : at + len(run) : 2] = False
        at += len(run)
    ordered += itertools.chain.from_iterable(run[::2] for run in runs)
    flats.append(flat[np.repeat(keep, lens)])
    lens_of.append(lens[keep])
    taken = {p for p, _size in fit}
    return [p for p in pieces if p not in taken]


class PieceIds:
    """The token ids of texts through a table of the ids of their pieces (:func:`piece_rule`).

    Use only for a tokenizer of which :func:`tokenizer_piece_rule` gives a
    rule (``rule``: that one, by default). Thread-safe (one batch at a time).

    Examples
    --------
    >>> import pytest; _ = pytest.importorskip("tokenizers")
    >>> from finalfusion._tokenizers import HuggingFaceTokenizer, _TOY_JSON
    >>> tok = HuggingFaceTokenizer(_TOY_JSON)  # Whitespace pre-tokenizer, BPE
    >>> flat, counts = PieceIds(tok).ids(["ab c ab", "", "cab  ab"])
    >>> flat.tolist(), counts.tolist(), tok.encode_batch(["ab c ab", "", "cab  ab"])
    ([2, 4, 2, 4, 2, 2], [3, 0, 3], [[2, 4, 2], [], [4, 2, 2]])
    """

    def __init__(self, tokenizer: Tokenizer, rule: str | None = None) -> None:
        self._tokenizer = tokenizer
        own_rule, plan = _tokenizer_plan(tokenizer)
        self._rule = rule if rule is not None else own_rule or DROP
        self._plan = plan if self._rule == own_rule else OwnerPlan(None, None)
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

    def _add(self, pieces: list[str], flat: I64, lens: I64) -> None:
        """Append the ids ``flat`` of ``pieces`` (``lens`` each) to the table, but for pieces another batch has added meanwhile."""
        index = self._index
        if not index.keys().isdisjoint(pieces):
            fresh = ~np.fromiter(map(index.__contains__, pieces), dtype=bool, count=len(pieces))
            pieces = list(itertools.compress(pieces, fresh.tolist()))
            flat, lens = flat[np.repeat(fresh, lens)], lens[fresh]
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
        index.update(zip(pieces, range(n, n + len(pieces)), strict=True))
        self._pieces, self._used = n + len(pieces), used + total
        self._bytes += sum(map(len, pieces)) + ENTRY_BYTES * len(pieces) + 24 * total

    def _pays(self, texts: list[str], sizes: list[int]) -> bool:
        """Whether the table pays for ``texts``: at most :data:`NEW_SHARE` of the pieces of its first ~:data:`SAMPLE_CHARS` characters are new."""
        total = sum(sizes)
        k = len(texts) if total <= SAMPLE_CHARS else max(1, len(texts) * SAMPLE_CHARS // total)
        cut = _cut(self._rule, texts[:k])
        if cut is None:
            return False
        pieces = cut[0]
        with self._lock:
            return len(set(pieces).difference(self._index)) <= NEW_SHARE * len(pieces)

    def ids(self, texts: Sequence[str]) -> tuple[I64, I64] | None:
        """The token ids of ``texts`` (flat, in order, as the tokenizer returns them) and their count per text.

        ``None`` when the table does not pay for this batch (nearly every piece is new, or no marks are free to cut
        the texts): then the caller tokenizes the texts whole.

        Raises
        ------
        finalfusion.errors.LimitExceeded
            If a text is longer than :data:`finalfusion.limits.MAX_TOKENIZE_BYTES` bytes of UTF-8 (as the plain path).
        finalfusion.errors.FormatError
            If the library fails on a piece.
        """
        if not texts:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
        sizes = word_sizes(texts)  # the plain path's limit, on whole texts
        texts = list(texts)
        if not _is_text("".join(texts)):  # a lone surrogate: its word goes, as in the plain path
            texts = [t if _is_text(t) else encodable_text(t) or "" for t in texts]
        if not self._pays(texts, sizes):
            return None
        cut = _cut(self._rule, texts)
        if cut is None:
            return None
        pieces, per_text = cut
        with self._lock:
            if self._bytes > limits.MAX_CACHE_BYTES:
                self._clear()
            nums = np.fromiter(map(self._index.get, pieces, itertools.repeat(-1)), dtype=np.int64, count=len(pieces))
            # The table only grows in place past its used part (a clear or a resize makes new arrays): these stay valid.
            pool, starts, lens = self._ids[: self._used], self._starts[np.maximum(nums, 0)], self._lens[np.maximum(nums, 0)]
        missing = nums < 0
        if missing.any():
            # The new pieces are tokenized outside the lock, so that batches on other threads go on meanwhile.
            mask = missing.tolist()
            new = list(dict.fromkeys(itertools.compress(pieces, mask)))
            new, new_flat, new_lens = _ids_and_lengths(self._tokenizer, new, self._rule, self._plan)
            with self._lock:
                self._add(new, new_flat, new_lens)
            slot = dict(zip(new, range(len(new)), strict=True))
            where = np.fromiter(map(slot.__getitem__, itertools.compress(pieces, mask)), dtype=np.int64, count=int(missing.sum()))
            starts[missing] = len(pool) + (np.cumsum(new_lens) - new_lens)[where]
            lens[missing] = new_lens[where]
            pool = np.concatenate((pool, new_flat))
        total = int(lens.sum())
        # flat[j] = pool[starts[piece of j] + (j - first position of that piece)]
        flat = pool[np.repeat(starts - (np.cumsum(lens) - lens), lens) + np.arange(total, dtype=np.int64)]
        counts = np.add.reduceat(lens, np.cumsum(per_text) - per_text)
        return flat, counts.astype(np.int64, copy=False)
