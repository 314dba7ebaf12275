"""``encode``'s table of pieces (finalfusion._pieces) gives model2vec's vectors exactly (issues 25 and 36).

Tokenizers are trained here with ``tokenizers`` and written as model2vec
directories by model2vec itself (``max_length`` 16, so the cut falls inside
words). For the tokenizers with a piece rule (pipelines that stop at a space,
``Metaspace``, byte-level BPE) the table is used (checked), and every sentence
must give what ``StaticModel.encode`` gives and, bit for bit, what the plain
path (one tokenizer call per text) gives, both with the table forced on every
batch and with it never paying; for the others (added tokens with a space or
that take the spaces around them) the plain path is taken, and the tests at
the end show that a wrong rule would change vectors -- the sentences here are
ones where it matters.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import finalfusion
from finalfusion import _encode, _pieces, limits
from finalfusion._pieces import BYTE_LEVEL, DROP, METASPACE, PieceIds, _cut, piece_rule, splits_at_spaces, tokenizer_piece_rule
from finalfusion.errors import LimitExceeded

tokenizers = pytest.importorskip("tokenizers")
model2vec = pytest.importorskip("model2vec")

CORPUS = [
    "the quick brown fox jumps over the lazy dog",
    "a house is not a home, said the happy householder",
    "happiness is a warm puppy and housing is expensive",
    "e-mail the U.S.A. office at 10:30 about 42 houses in new york",
    "café crème, naïve façade; ÅNGSTRÖM and ΟΔΟΣ in 日本語",
] * 30
#: Sentences where a wrong split would show: punctuation glued to words, Unicode forms, whitespace of every kind,
#: added tokens written in the text, words longer than WordPiece's limit, cuts at max_length inside a word.
TRICKY = [
    "the happiness of a house",
    "house, (house) house. house!house?",
    "e-mail U.S.A. 10:30 42houses houses42",
    "Café cafe\u0301 CAFÉ \ufb01ne \uff46\uff55\uff4c\uff4c ΟΔΟΣ οδος 日本語 naïve",
    "  leading spaces",
    "trailing spaces  ",
    "double  space   triple",
    "tab\tseparated\twords and new\nlines\r\nhere",
    "no\u00a0break\u2003em space \x1cfile separator",
    "control\x00char \ufffd replacement \u200bzero width",
    "[CLS] the house [SEP] [MASK]house the[SEP]house [UNK] [PAD]",
    "<city> <CITY> new york newyork new  york",
    "x" * 150 + " house",
    "householders " * 20,
    "a happy householder is a householder in a happy household of householders and housing",
    "",
    " ",
    "house",
    "a <mask>  house <mask> house  <mask> house<mask>house\n <mask>",
]


def _train(tok: Any, trainer: Any) -> Any:
    tok.train_from_iterator(CORPUS, trainer)
    return tok


def _bert(added: list[Any] | None = None) -> Any:
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors, trainers

    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    _train(tok, trainers.WordPieceTrainer(vocab_size=220, special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]))
    cls, sep = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1", special_tokens=[("[CLS]", cls), ("[SEP]", sep)]
    )
    if added:
        tok.add_tokens(added)
    return tok


def _sequence() -> Any:
    from tokenizers import AddedToken, Tokenizer, models, normalizers, pre_tokenizers, trainers

    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.Sequence([normalizers.NFKC(), normalizers.Lowercase()])
    tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Punctuation(), pre_tokenizers.Digits(individual_digits=True)])
    _train(tok, trainers.WordPieceTrainer(vocab_size=200, special_tokens=["[UNK]", "[SEP]"]))
    tok.add_tokens([AddedToken("<city>", normalized=True)])  # matched on the lowercased text: '<CITY>' too
    return tok


def _bpe() -> Any:
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.normalizer = normalizers.Sequence([normalizers.NFD(), normalizers.StripAccents()])
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    return _train(tok, trainers.BpeTrainer(vocab_size=180, special_tokens=["<unk>"]))


def _byte_level(prefix: bool = True, nfc: bool = False, added: bool = True) -> Any:
    from tokenizers import AddedToken, Tokenizer, models, normalizers, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=prefix)
    if nfc:
        tok.normalizer = normalizers.NFC()
    specials = ["<|endoftext|>"] if added else []
    _train(tok, trainers.BpeTrainer(vocab_size=400, special_tokens=specials, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    if added:
        tok.add_tokens([AddedToken("[CLS]", normalized=False)])  # matched in the text as written
    return tok


def _wordpiece(pre: str) -> Any:
    """WordPiece under ``Whitespace`` (runs of word characters and of others) or ``WhitespaceSplit``, lowercased."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, trainers

    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.Lowercase()
    tok.pre_tokenizer = getattr(pre_tokenizers, pre)()
    return _train(tok, trainers.WordPieceTrainer(vocab_size=200, special_tokens=["[UNK]", "[CLS]"]))


def _metaspace(scheme: str = "always", lowercase: bool = False) -> Any:
    from tokenizers import AddedToken, Tokenizer, models, normalizers, pre_tokenizers, trainers

    tok = Tokenizer(models.Unigram())
    tok.pre_tokenizer = pre_tokenizers.Metaspace(prepend_scheme=scheme)
    if lowercase:
        tok.normalizer = normalizers.Sequence([normalizers.NFKC(), normalizers.Lowercase()])
    _train(tok, trainers.UnigramTrainer(vocab_size=150, special_tokens=["<unk>", "<s>"], unk_token="<unk>"))
    if lowercase:
        tok.add_tokens([AddedToken("<city>", normalized=True)])
    return tok


def _with_mask(base: Any, **strip: bool) -> Any:
    """``base`` with a ``<mask>`` that takes the whitespace before (``lstrip``, as RoBERTa's) or after it (``rstrip``)."""
    from tokenizers import AddedToken

    tok = base()
    tok.add_special_tokens([AddedToken("<mask>", **strip)])
    return tok


#: name -> (tokenizer factory, the piece rule used for it)
KINDS = {
    "bert-template": (_bert, DROP),
    "nfkc-sequence-added": (_sequence, DROP),
    "bpe-nfd": (_bpe, DROP),
    "added-with-space": (lambda: _bert(["new york"]), None),
    "byte-level": (_byte_level, BYTE_LEVEL),
    "byte-level-no-prefix-nfc": (lambda: _byte_level(prefix=False, nfc=True), BYTE_LEVEL),
    "byte-level-no-prefix": (lambda: _byte_level(prefix=False), BYTE_LEVEL),
    "byte-level-prefix-no-added": (lambda: _byte_level(added=False), BYTE_LEVEL),
    "wordpiece-whitespace": (lambda: _wordpiece("Whitespace"), DROP),
    "wordpiece-whitespace-split": (lambda: _wordpiece("WhitespaceSplit"), DROP),
    "byte-level-lstrip-mask": (lambda: _with_mask(_byte_level, lstrip=True), BYTE_LEVEL),
    "byte-level-rstrip-mask": (lambda: _with_mask(lambda: _byte_level(prefix=False), rstrip=True), None),
    "metaspace-lstrip-mask": (lambda: _with_mask(_metaspace, lstrip=True), None),
    "metaspace": (_metaspace, METASPACE),
    "metaspace-first-nfkc-added": (lambda: _metaspace("first", lowercase=True), METASPACE),
    "metaspace-never": (lambda: _metaspace("never"), METASPACE),
}


@pytest.fixture(scope="module", params=sorted(KINDS))
def kind(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path]:
    from model2vec import StaticModel

    name = request.param
    tok = KINDS[name][0]()
    n = tok.get_vocab_size()
    rng = np.random.default_rng(7)
    table = (rng.normal(size=(n, 10)) * rng.uniform(0.05, 5.0, size=(n, 1))).astype(np.float32)
    path = tmp_path_factory.mktemp(f"pieces-{name}")
    StaticModel(table, tok, normalize=True, max_length=16).save_pretrained(path)
    return name, path


@pytest.fixture(scope="module", params=sorted(name for name, (_factory, rule) in KINDS.items() if rule is not None))
def ruled(request: pytest.FixtureRequest) -> tuple[Any, str]:
    """A tokenizer with a piece rule (as ``encode`` reads it) and that rule."""
    from finalfusion.vocab import HuggingFaceTokenizer

    tok = HuggingFaceTokenizer(KINDS[request.param][0]().to_str())
    rule = tokenizer_piece_rule(tok)
    assert rule == KINDS[request.param][1]
    return tok, rule


def _plain_and_pieces(emb: finalfusion.Embeddings, texts: list[str]) -> tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]:
    """The ids of ``texts`` from one tokenizer call per text, and from the path ``encode`` takes (the cache where it applies)."""
    vocab = emb.vocab
    _norm, max_length = _encode.model_settings(emb.metadata)
    allowed = _encode._model2vec_allowed(vocab)
    plain = _encode._token_ids(vocab, texts, max_length, allowed)
    rule = tokenizer_piece_rule(vocab.tokenizer)
    pieces = PieceIds(vocab.tokenizer, rule) if rule is not None else None  # as encode decides
    used = _encode._token_ids(vocab, texts, max_length, allowed, pieces)
    return plain, used


@pytest.fixture(params=["table", "whole"])
def share(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """The table on every batch (``table``), or on none (``whole``: every batch looks new, its texts are tokenized whole)."""
    monkeypatch.setattr(_pieces, "NEW_SHARE", 1.0 if request.param == "table" else -1.0)
    return str(request.param)


@pytest.mark.parametrize("normalize", [True, False])
def test_encode_equals_static_model_encode(kind: tuple[str, Path], normalize: bool, share: str) -> None:
    name, path = kind
    ref = model2vec.StaticModel.from_pretrained(path)
    emb = finalfusion.load(path, normalize=normalize)
    assert tokenizer_piece_rule(emb.vocab.tokenizer) == KINDS[name][1]
    texts = TRICKY + TRICKY[::-1]  # repeated pieces: the second half comes from the cache
    for override in (None, True, False):
        ours = emb.encode(texts, normalize=override, batch_size=5)
        theirs = ref.encode(texts, normalize=override)
        np.testing.assert_allclose(ours, theirs, rtol=2e-5, atol=2e-6)
    assert np.abs(theirs[[bool(t.strip()) for t in texts]]).sum(axis=1).min() > 0  # real vectors compared
    # the cache's ids are the plain path's ids, bit for bit (with the cut at max_length and the unknown token dropped)
    (flat, counts), (flat2, counts2) = _plain_and_pieces(emb, texts)
    np.testing.assert_array_equal(flat2, flat)
    np.testing.assert_array_equal(counts2, counts)
    assert counts.max() == 16  # sentences were cut


def test_model_ids_are_model2vec_ids(kind: tuple[str, Path], share: str) -> None:
    """The ids themselves: model2vec's tokenize with its truncation, unknown token dropped."""
    _name, path = kind
    ref = model2vec.StaticModel.from_pretrained(path)
    emb = finalfusion.load(path)
    ref.tokenizer.enable_truncation(16)
    expected = ref.tokenize(TRICKY)
    _plain, (flat, counts) = _plain_and_pieces(emb, TRICKY)
    assert [part.tolist() for part in np.split(flat, np.cumsum(counts)[:-1])] == expected


def test_encode_each_equals_encode_batch(ruled: tuple[Any, str]) -> None:
    tok, rule = ruled
    cut = _cut(rule, TRICKY)
    assert cut is not None
    pieces = cut[0]
    expected = tok.encode_batch(pieces)
    ids, owners = tok.encode_each(pieces)
    got: list[list[int]] = [[] for _ in pieces]
    for i, owner in zip(ids, owners, strict=True):
        got[owner].append(i)
    assert got == expected
    # and the pieces' ids are the texts' ids (the rule itself)
    ends = np.cumsum(cut[1])
    assert [[i for ids in got[lo:hi] for i in ids] for lo, hi in zip(ends - cut[1], ends, strict=True)] == tok.encode_batch(TRICKY)


def test_bounded_cache_and_threads_keep_vectors(kind: tuple[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    _name, path = kind
    emb = finalfusion.load(path)
    texts = TRICKY * 5
    expected = emb.encode(texts)
    monkeypatch.setattr(_pieces, "NEW_SHARE", 1.0)
    monkeypatch.setattr(limits, "MAX_CACHE_BYTES", 64)  # the table starts over at (almost) every batch
    previous = finalfusion.get_threads()
    try:
        for threads in (1, 3):
            finalfusion.set_threads(threads)
            np.testing.assert_array_equal(emb.encode(texts, batch_size=3), expected)
    finally:
        finalfusion.set_threads(previous)


def test_limits_and_lone_surrogates_as_the_plain_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from model2vec import StaticModel

    tok = _bert()
    StaticModel(np.ones((tok.get_vocab_size(), 4), dtype=np.float32), tok, normalize=False, max_length=None).save_pretrained(tmp_path / "m")
    emb = finalfusion.load(tmp_path / "m")
    assert tokenizer_piece_rule(emb.vocab.tokenizer) == DROP
    monkeypatch.setattr(_pieces, "NEW_SHARE", 1.0)
    out = emb.encode(["the house", "the \ud800 house", "house", "\ud800"])  # the word that is not valid text goes, as one call would give
    assert out[1].tolist() == out[0].tolist() == out[2].tolist() != [0.0] * 4
    assert out[3].tolist() == [0.0] * 4
    (flat, counts), (flat2, counts2) = _plain_and_pieces(emb, ["the \ud800 house", "the house", "x\ud800 \udfff"])
    assert counts.tolist() == counts2.tolist() == [2, 2, 0]
    assert flat.tolist() == flat2.tolist()
    monkeypatch.setattr(limits, "MAX_TOKENIZE_BYTES", 20)
    words = CORPUS[0].split() + CORPUS[1].split()
    many = [" ".join(words[i : i + 2]) for i in range(len(words) - 1)] * 3  # each within the limit, their pieces joined are not
    assert max(map(len, many)) <= 20 < len(" ".join(set(words)))
    np.testing.assert_array_equal(emb.encode(many), emb.encode(many, batch_size=1))
    with pytest.raises(LimitExceeded):  # the text's length counts, not its pieces'
        emb.encode(["house " * 5, "the"])
    with pytest.raises(LimitExceeded):
        _encode._token_ids(emb.vocab, ["house " * 5], None)


def _bert_doc(**changes: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "normalizer": {"type": "BertNormalizer", "lowercase": True},
        "pre_tokenizer": {"type": "BertPreTokenizer"},
        "post_processor": None,
        "added_tokens": [{"id": 0, "content": "[UNK]", "normalized": False}],
        "model": {"type": "WordPiece", "unk_token": "[UNK]"},
    }
    doc.update(changes)
    return doc


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({}, DROP),
        ({"normalizer": None}, DROP),
        ({"normalizer": {"type": "Sequence", "normalizers": [{"type": "NFKC"}, {"type": "Lowercase"}]}}, DROP),
        ({"normalizer": {"type": "Sequence", "normalizers": [{"type": "NFKC"}, {"type": "Replace"}]}}, None),
        ({"normalizer": {"type": "Strip"}}, None),
        ({"normalizer": {"type": "Precompiled"}}, None),
        ({"pre_tokenizer": {"type": "Sequence", "pretokenizers": [{"type": "WhitespaceSplit"}, {"type": "Digits"}]}}, DROP),
        ({"pre_tokenizer": {"type": "Sequence", "pretokenizers": [{"type": "Punctuation"}, {"type": "WhitespaceSplit"}]}}, None),
        ({"pre_tokenizer": {"type": "Sequence", "pretokenizers": [{"type": "WhitespaceSplit"}, {"type": "Metaspace"}]}}, None),
        ({"pre_tokenizer": {"type": "Split", "pattern": {"Regex": "[\\t\\n\\x0B\\f\\r ]+"}, "behavior": "Removed", "invert": False}}, DROP),
        ({"pre_tokenizer": {"type": "Split", "pattern": {"Regex": "[\\t\\n\\x0B\\f\\r ]+"}, "behavior": "Isolated", "invert": False}}, None),
        ({"pre_tokenizer": {"type": "Split", "pattern": {"Regex": "[\\t\\n\\x0B\\f\\r ]+"}, "behavior": "Removed", "invert": True}}, None),
        ({"pre_tokenizer": {"type": "Split", "pattern": {"String": " "}, "behavior": "Removed", "invert": False}}, None),
        ({"pre_tokenizer": {"type": "Split", "pattern": {"Regex": "\\s+"}, "behavior": "Removed", "invert": False}}, None),
        ({"pre_tokenizer": {"type": "Metaspace"}}, METASPACE),  # BertNormalizer maps each character on its own
        ({"pre_tokenizer": {"type": "Metaspace", "prepend_scheme": "first", "split": True}}, METASPACE),
        ({"pre_tokenizer": {"type": "Metaspace", "split": False}}, None),  # one pre-token for the whole text
        ({"pre_tokenizer": {"type": "Metaspace"}, "added_tokens": [{"content": "<mask>", "lstrip": True}]}, None),
        ({"pre_tokenizer": {"type": "Metaspace"}, "added_tokens": [{"content": "<mask>", "rstrip": True}]}, None),
        ({"pre_tokenizer": {"type": "Metaspace"}, "added_tokens": [{"content": "a\tb", "normalized": False}]}, None),
        ({"pre_tokenizer": {"type": "ByteLevel"}}, None),  # BertNormalizer puts spaces around CJK characters
        ({"pre_tokenizer": {"type": "ByteLevel"}, "normalizer": None}, BYTE_LEVEL),
        ({"pre_tokenizer": {"type": "ByteLevel", "use_regex": True}, "normalizer": {"type": "NFC"}}, BYTE_LEVEL),
        ({"pre_tokenizer": {"type": "ByteLevel"}, "normalizer": {"type": "NFKC"}}, None),  # U+00A8 becomes a space and a mark
        ({"pre_tokenizer": {"type": "ByteLevel", "use_regex": False}, "normalizer": None}, None),
        ({"pre_tokenizer": {"type": "ByteLevel"}, "normalizer": None, "added_tokens": [{"content": "<mask>", "lstrip": True}]}, BYTE_LEVEL),
        ({"pre_tokenizer": {"type": "ByteLevel"}, "normalizer": None, "added_tokens": [{"content": "<mask>", "rstrip": True}]}, None),
        ({"pre_tokenizer": None}, None),
        ({"post_processor": {"type": "TemplateProcessing"}}, DROP),
        ({"post_processor": {"type": "Sequence", "processors": [{"type": "ByteLevel"}, {"type": "Unknown"}]}}, None),
        ({"added_tokens": [{"content": "new york", "normalized": False}]}, None),
        ({"added_tokens": [{"content": "<city>", "normalized": True}]}, DROP),
        ({"added_tokens": [{"content": "日本", "normalized": True}]}, None),
        ({"added_tokens": [{"content": "日本", "normalized": False}]}, DROP),
        ({"model": {"type": "BPE", "dropout": 0.1}}, None),
        ({"model": {"type": "BPE", "dropout": None}}, DROP),
        ({"model": {"type": "Unigram"}}, DROP),
    ],
)
def test_piece_rule_table(changes: dict[str, Any], expected: str | None) -> None:
    assert piece_rule(_bert_doc(**changes)) == expected
    assert splits_at_spaces(_bert_doc(**changes)) is (expected is not None)


@pytest.mark.parametrize(
    ("name", "rule"),
    [("added-with-space", DROP), ("byte-level-rstrip-mask", BYTE_LEVEL), ("metaspace-lstrip-mask", METASPACE), ("byte-level", DROP), ("metaspace", DROP)],
)
def test_a_wrong_rule_would_change_vectors(name: str, rule: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The sentences above tell a wrong rule apart: forced on a tokenizer it does not hold for, the ids differ."""
    from finalfusion.vocab import HuggingFaceTokenizer

    monkeypatch.setattr(_pieces, "NEW_SHARE", 1.0)
    tok = HuggingFaceTokenizer(KINDS[name][0]().to_str())
    assert tokenizer_piece_rule(tok) != rule
    got = PieceIds(tok, rule).ids(TRICKY)
    assert got is not None
    forced, counts = got
    plain = tok.encode_batch(TRICKY)
    assert [part.tolist() for part in np.split(forced, np.cumsum(counts)[:-1])] != plain


def test_byte_level_cuts_only_where_the_regex_starts_a_pre_token() -> None:
    """Every space between two characters that Python does not call whitespace starts a pre-token of ``ByteLevel``'s regex, for all of Unicode.

    The cut of :data:`BYTE_LEVEL` relies on Python's whitespace holding every character the regex calls whitespace:
    each character that is not whitespace in Python stands once before and once after a space here.
    """
    from tokenizers import pre_tokenizers

    pre = pre_tokenizers.ByteLevel(add_prefix_space=False)
    chars = [chr(c) for c in range(0x110000) if not 0xD800 <= c < 0xE000 and not chr(c).isspace()]
    for lo in range(0, len(chars), 20_000):
        text = " ".join(chars[lo : lo + 20_000])
        starts = {start for _token, (start, _end) in pre.pre_tokenize_str(text)}
        cuts = [m.start() for m in _pieces.BYTE_LEVEL_CUT.finditer(text)]
        assert all(text[c] == " " for c in cuts)
        assert len(cuts) == len(chars[lo : lo + 20_000]) - 1
        missed = [text[c - 1 : c + 2] for c in cuts if c not in starts]
        assert not missed, missed[:5]


def test_the_table_is_skipped_when_pieces_do_not_repeat(ruled: tuple[Any, str]) -> None:
    """A batch whose pieces are nearly all new is tokenized whole (``None``); one whose pieces repeat goes through the table."""
    tok, rule = ruled
    rng = np.random.default_rng(3)
    distinct = [" ".join("".join(rng.choice(list("abcdefghij"), size=8)) for _ in range(12)) for _ in range(200)]
    table = PieceIds(tok, rule)
    assert table.ids(distinct) is None
    repeated = ["the house is a happy house"] * 200
    got = table.ids(repeated)
    assert got is not None
    assert [part.tolist() for part in np.split(got[0], np.cumsum(got[1])[:-1])] == tok.encode_batch(repeated)


def test_real_bert_vocabulary_of_llamacpp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A real WordPiece vocabulary (bge-small's, llama.cpp's test file) under BERT's own normaliser: the cache gives the plain ids.

    The GGUF reader's tokenizer normalises as llama.cpp does, with a ``Precompiled`` character map the cache does not take
    (it cannot tell a map's targets from its bytes): ``encode`` on a bert GGUF takes the plain path. The same vocabulary
    with ``BertNormalizer`` (as a Hugging Face or model2vec directory has it) goes through the cache, on llama.cpp's test
    strings.
    """
    import json
    import os

    from finalfusion._tokenizers import HuggingFaceTokenizer
    from finalfusion.compat.gguf import load_gguf
    from llamacpp_vocabs import ENV, loadable, read_cases, vocab_files

    directory = os.environ.get(ENV)
    if not directory:
        pytest.skip(f"{ENV} is not set (run: python tests/llamacpp_vocabs.py fetch DIR; export {ENV}=DIR)")
    pytest.importorskip("gguf")
    files = [f for f in vocab_files(directory) if "bert" in f.name]
    assert files
    for path in files:
        gguf_tok = load_gguf(loadable(path, tmp_path / path.name)).vocab.tokenizer
        assert tokenizer_piece_rule(gguf_tok) is None, path.name  # llama.cpp's character map: the plain path
        doc = json.loads(gguf_tok.to_bytes())
        steps = doc["normalizer"]["normalizers"]
        assert [s["type"] for s in steps] == ["Precompiled", "BertNormalizer"], path.name
        doc["normalizer"] = {**steps[1], "lowercase": True, "strip_accents": True}
        tok = HuggingFaceTokenizer(json.dumps(doc).encode())
        assert tokenizer_piece_rule(tok) == DROP, path.name
        texts = [text for text, _ids in read_cases(path)] + TRICKY
        monkeypatch.setattr(_pieces, "NEW_SHARE", 1.0)
        got = PieceIds(tok).ids(texts + texts)
        assert got is not None
        flat, counts = got
        assert [part.tolist() for part in np.split(flat, np.cumsum(counts)[:-1])] == tok.encode_batch(texts + texts), path.name


@pytest.mark.parametrize("rule", [DROP, METASPACE, BYTE_LEVEL])
def test_cut_gives_each_texts_pieces(rule: str) -> None:
    """``_cut`` of a batch gives each text's pieces in order, by the rule's definition, whichever way it finds them."""
    import re

    rng = np.random.default_rng(11)
    alphabet = ["ab", "c", ".", " ", " ", " ", "\t", "\n", "é", "\u00a0", "\x1c", "\x1f"]
    generated = ["".join(rng.choice(alphabet, size=int(rng.integers(0, 12)))) for _ in range(300)]
    ascii_only = ["the house is here", "a b", "x.y z", "one"] * 5
    reference = {
        DROP: lambda t: t.split(" "),
        METASPACE: lambda t: re.split(r"(?= )", t),
        BYTE_LEVEL: lambda t: re.split(r"(?<=\S)(?= \S)", t),
    }[rule]
    for texts in (CORPUS, ascii_only, TRICKY, generated, [*ascii_only, "a  b"], [*ascii_only, " a"], [*ascii_only, "a\tb c"]):
        got = _cut(rule, list(texts))
        if got is None:  # no two of the marks are free: the batch is tokenized whole
            assert sum(any(c in t for t in texts) for c in _pieces.MARKS) > 2
            continue
        pieces, per_text = got
        ends = np.cumsum(per_text)
        mine = [pieces[lo:hi] for lo, hi in zip(ends - per_text, ends, strict=True)]
        expected = [reference(t) for t in texts]
        assert [[p for p in m if p or rule == DROP] for m in mine] == [[p for p in e if p or rule == DROP] for e in expected]
        assert ["".join(m) for m in mine] == [t if rule != DROP else t.replace(" ", "") for t in texts]


def test_rows_scaled_once_or_per_token_give_the_same_bits(kind: tuple[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    """Unit rows times their norms, once for the whole matrix (many texts) or per token (few): the same float32 products."""
    _name, path = kind
    emb = finalfusion.load(path, normalize=True)
    assert emb.norms is not None
    texts = TRICKY * 3
    monkeypatch.setattr(_encode, "_scaling_pays", lambda *_args: False)
    per_token = emb.encode(texts, normalize=False)
    monkeypatch.setattr(_encode, "_scaling_pays", lambda *_args: True)
    once = emb.encode(texts, normalize=False)
    np.testing.assert_array_equal(once, per_token)
    assert np.abs(once).sum() > 0
    monkeypatch.undo()
    many = ["the house is a happy house"] * (2 * len(emb.vocab.words))  # more tokens than twice the rows: scaled once
    assert _encode._scaling_pays(emb._matrix, many, _encode._median_token_chars(emb.vocab))
    np.testing.assert_array_equal(emb.encode(many[:3]), emb.encode(many)[:3])


def test_no_texts_one_text_and_one_long_text(kind: tuple[str, Path]) -> None:
    """No texts, one short text (the plain path) and one long text (through the table, its words repeat): model2vec's vectors."""
    _name, path = kind
    ref = model2vec.StaticModel.from_pretrained(path)
    emb = finalfusion.load(path)
    assert emb.encode([]).shape == (0, 10)
    long_text = " ".join(TRICKY * 40)
    assert len(long_text) > _encode.LONG_TEXT
    for text in ("the house", long_text):
        np.testing.assert_allclose(emb.encode(text), ref.encode(text), rtol=2e-5, atol=2e-6)
        np.testing.assert_allclose(emb.encode([text]), ref.encode([text]), rtol=2e-5, atol=2e-6)


def test_pieces_added_meanwhile_by_another_batch_are_kept_once(ruled: tuple[Any, str], monkeypatch: pytest.MonkeyPatch) -> None:
    """New pieces are tokenized outside the lock: those another batch added meanwhile are skipped, the others appended."""
    tok, rule = ruled
    monkeypatch.setattr(_pieces, "NEW_SHARE", 1.0)
    table = PieceIds(tok, rule)
    first, second = ["house", " the", "happy"], [" the", "householder", "happy", " a"]
    table._add(*_pieces._ids_and_lengths(tok, first, rule, table._plan))
    table._add(*_pieces._ids_and_lengths(tok, second, rule, table._plan))
    assert sorted(table._index) == sorted(["house", " the", "happy", "householder", " a"])
    assert sorted(table._index.values()) == list(range(5))
    texts = ["house the happy householder a", "happy a the house"]
    got = table.ids(texts)
    assert got is not None
    assert [part.tolist() for part in np.split(got[0], np.cumsum(got[1])[:-1])] == tok.encode_batch(texts)


def test_texts_holding_every_mark_are_tokenized_whole(ruled: tuple[Any, str], monkeypatch: pytest.MonkeyPatch) -> None:
    """Texts that hold three of the four marks leave no two to cut with: the batch is tokenized whole, with the plain ids."""
    tok, rule = ruled
    monkeypatch.setattr(_pieces, "NEW_SHARE", 1.0)
    texts = ["the house\x1c", "a\x1d happy \x1ehouse", "the house"] * 3
    assert (_cut(rule, texts) is None) is (rule != DROP)  # the drop rule joins with spaces and needs no marks
    got = PieceIds(tok, rule).ids(texts)
    if rule != DROP:
        assert got is None
    else:
        assert got is not None
        assert [part.tolist() for part in np.split(got[0], np.cumsum(got[1])[:-1])] == tok.encode_batch(texts)


#: Pieces a joined text must not get wrong: Unicode spaces and line breaks, marks, NUL, emoji, CJK, right-to-left
#: text, added tokens' contents, a continuing prefix at a word's start, a piece longer than half a block.
HOSTILE = [
    "x\u00a0y",
    "\u3000",
    "a\u2028b",
    "\x00nul",
    "nul\x00",
    "\U0001f600\U0001f600x",
    "e\u0301\u0301",
    "\u05e9\u05dc\u05d5\u05dd",
    "日本語",
    "##house",
    "#",
    "[CLS]house",
    "<|endoftext|>",
    "house<mask>",
    "\x1c\x1d",  # two of the marks _cut joins with (two stay free)
    "\ufffd",
    "HOUSE",
    "ß",
    "İ",
    "o" * 40_000,
]

#: name -> the way a joined text's ids are told apart by piece, for the printable ASCII words of CORPUS.
WAYS = {
    "byte-level-no-prefix": "_by_spans",
    "byte-level-prefix-no-added": "_by_spans",
    "bert-template": "_by_word_starts",
    "wordpiece-whitespace": "_by_word_starts",
    "wordpiece-whitespace-split": "_by_word_starts",
    "byte-level": "_by_offsets",  # a space before each text and added tokens: bytes unknown
    "byte-level-no-prefix-nfc": "_by_offsets",  # a normaliser
    "metaspace": "_by_word_starts",  # a piece's first id starts with the replacement character
    "metaspace-first-nfkc-added": "_by_word_starts",
    "metaspace-never": "_by_offsets",  # no replacement character before a text
    "bpe-nfd": "_by_offsets",  # not WordPiece
    "nfkc-sequence-added": "_by_offsets",  # a Sequence of pre-tokenizers
}


def _each_alone(tok: Any, pieces: list[str]) -> list[list[int]]:
    return [tok.encode_batch([p])[0] for p in pieces]


def _split(flat: np.ndarray, lens: np.ndarray) -> list[list[int]]:
    return [part.tolist() for part in np.split(flat, np.cumsum(lens)[:-1])] if len(lens) else []


@pytest.fixture
def ways(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """How often each way told a joined text's ids apart (returned an answer)."""
    from finalfusion import _piece_owners

    told: dict[str, int] = {}

    def counting(name: str) -> Any:
        real = getattr(_piece_owners, name)

        def counted(*args: Any) -> Any:
            got = real(*args)
            told[name] = told.get(name, 0) + (got is not None)
            return got

        return counted

    for name in ("_by_spans", "_by_word_starts", "_by_offsets"):
        monkeypatch.setattr(_piece_owners, name, counting(name))
    return told


@pytest.mark.parametrize("name", sorted(WAYS))
def test_joined_texts_give_each_pieces_own_ids(name: str, ways: dict[str, int]) -> None:
    """The distinct pieces of real and hostile texts, tokenized joined: each piece gets exactly the ids it gets alone, by the expected way."""
    from finalfusion.vocab import HuggingFaceTokenizer

    tok = HuggingFaceTokenizer(KINDS[name][0]().to_str())
    rule, plan = _pieces._tokenizer_plan(tok)
    assert rule == KINDS[name][1]
    plain = _cut(rule, CORPUS[:5])
    assert plain is not None
    words = [w for w in dict.fromkeys(plain[0]) if w.isascii()]  # printable ASCII, punctuation and digits included
    assert any(not w.isalpha() for w in words)
    ordered, flat, lens = _pieces._ids_and_lengths(tok, words, rule, plan)
    assert sorted(ordered) == sorted(words)
    assert _split(flat, lens) == _each_alone(tok, ordered)
    assert set(ways) == {WAYS[name]}, ways
    assert ways[WAYS[name]] >= 1
    hostile = _cut(rule, TRICKY + HOSTILE + [" ".join(HOSTILE)])
    assert hostile is not None
    pieces = list(dict.fromkeys(hostile[0]))
    ordered, flat, lens = _pieces._ids_and_lengths(tok, pieces, rule, plan)
    assert sorted(ordered) == sorted(pieces)
    assert _split(flat, lens) == _each_alone(tok, ordered)


@pytest.mark.parametrize("name", ["byte-level-no-prefix", "bert-template"])
def test_a_wrong_plan_is_caught_and_the_offsets_tell(name: str, ways: dict[str, int]) -> None:
    """A plan that miscounts (bytes of a common id, or which ids start a word) fails its check: the offsets give the right ids."""
    from finalfusion._piece_owners import OwnerPlan
    from finalfusion.vocab import HuggingFaceTokenizer

    tok = HuggingFaceTokenizer(KINDS[name][0]().to_str())
    rule, plan = _pieces._tokenizer_plan(tok)
    common = tok.encode(" the" if rule == BYTE_LEVEL else "the")
    assert len(common) == 1
    if plan.spans is not None:
        spans = plan.spans[0].copy()
        spans[common[0]] += 1
        wrong = OwnerPlan((spans, plan.spans[1]), None, plan.ascii)
    else:
        assert plan.starts is not None
        firsts = plan.starts[0].copy()
        firsts[common[0]] = False
        wrong = OwnerPlan(None, (firsts, *plan.starts[1:]), plan.ascii)
    words = [w for w in dict.fromkeys(_cut(rule, CORPUS[:5])[0]) if w.isascii()]  # type: ignore[index]
    ordered, flat, lens = _pieces._ids_and_lengths(tok, words, rule, wrong)
    assert _split(flat, lens) == _each_alone(tok, ordered)
    assert set(ways) == {"_by_spans" if plan.spans is not None else "_by_word_starts", "_by_offsets"}  # the failing texts alone redone
    assert ways["_by_offsets"] >= 1  # the texts holding the miscounted id (texts without it may still be told the fast way)


#: A BPE model whose vocabulary holds every byte's character (filled in by the test).
ALPHABET_BPE: dict[str, Any] = {"type": "BPE", "vocab": "ALPHABET"}
BYTE_LEVEL_NO_PREFIX: dict[str, Any] = {"type": "ByteLevel", "add_prefix_space": False}


@pytest.mark.parametrize(
    ("changes", "spans", "starts"),
    [
        ({}, False, True),
        ({"pre_tokenizer": {"type": "Whitespace"}}, False, True),
        ({"pre_tokenizer": {"type": "Sequence", "pretokenizers": [{"type": "WhitespaceSplit"}, {"type": "Digits"}]}}, False, False),
        ({"model": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "", "vocab": {"[UNK]": 0}}}, False, False),
        ({"model": {"type": "BPE", "vocab": {"[UNK]": 0}}}, False, False),
        ({"model": {"type": "WordPiece", "unk_token": "[UNK]", "vocab": {"[UNK]": 0, "house": 10**12}}}, False, False),  # a crafted id: no table
        ({"pre_tokenizer": BYTE_LEVEL_NO_PREFIX, "normalizer": None, "added_tokens": [{"id": 10**12, "content": "x"}], "model": ALPHABET_BPE}, False, False),
        ({"pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False}, "normalizer": None, "model": ALPHABET_BPE}, True, False),
        ({"pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": True}, "normalizer": None, "model": ALPHABET_BPE}, False, False),
        ({"pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": True}, "normalizer": None, "added_tokens": [], "model": ALPHABET_BPE}, True, False),
        ({"pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False}, "normalizer": {"type": "NFC"}, "model": ALPHABET_BPE}, False, False),
        ({"pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False}, "normalizer": None, "model": {"type": "BPE", "vocab": {"a": 0}}}, False, False),
        ({"pre_tokenizer": BYTE_LEVEL_NO_PREFIX, "normalizer": None, "model": {**ALPHABET_BPE, "continuing_subword_prefix": "##"}}, False, False),
        (
            {
                "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False},
                "normalizer": None,
                "added_tokens": [{"id": 0, "content": "<mask>", "lstrip": True}],
                "model": {"type": "BPE", "vocab": "ALPHABET"},
            },
            False,
            False,
        ),
    ],
)
def test_owner_plan_table(changes: dict[str, Any], spans: bool, starts: bool) -> None:
    """Which ways a ``tokenizer.json`` allows.

    Bytes only for byte-level BPE over all 256 bytes without a normaliser, a space before a text only without added
    tokens; word starts only for WordPiece with a prefix under a pre-tokenizer whose pre-tokens are counted.
    """
    from finalfusion._piece_owners import BYTE_LEVEL_ALPHABET, owner_plan

    doc = _bert_doc(**changes)
    doc["model"] = dict(doc["model"])
    if doc["model"].get("vocab") == "ALPHABET":
        doc["model"]["vocab"] = {c: i + 1 for i, c in enumerate(sorted(BYTE_LEVEL_ALPHABET))}
    doc["model"].setdefault("vocab", {"[UNK]": 0, "house": 1, "##s": 2})
    plan = owner_plan(doc, piece_rule(doc))
    assert (plan.spans is not None, plan.starts is not None) == (spans, starts)


@pytest.mark.parametrize("name", ["byte-level-no-prefix", "bert-template", "metaspace", "wordpiece-whitespace"])
def test_small_blocks_split_runs_and_keep_ids(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Runs cut at tiny block sizes (many joined texts, guard runs too): every piece still gets the ids it gets alone."""
    from finalfusion.vocab import HuggingFaceTokenizer

    monkeypatch.setattr(_pieces, "BLOCK_BYTES", 24)
    monkeypatch.setattr(_pieces, "BLOCK_WORDS", 3)
    tok = HuggingFaceTokenizer(KINDS[name][0]().to_str())
    rule, plan = _pieces._tokenizer_plan(tok)
    cut = _cut(rule, CORPUS[:5] + [t.capitalize() for t in CORPUS[:5]])
    assert cut is not None
    pieces = list(dict.fromkeys(cut[0]))
    runs, _alone = _pieces._runs(rule, pieces, [len(p.encode()) for p in pieces])
    assert len(runs) > 5
    ordered, flat, lens = _pieces._ids_and_lengths(tok, pieces, rule, plan)
    assert sorted(ordered) == sorted(pieces)
    assert _split(flat, lens) == _each_alone(tok, ordered)


def test_a_sum_that_misses_a_piece_end_and_offsets_out_of_order_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """The checks themselves: byte spans that add up but do not end where a piece ends, and offsets that go back."""
    from finalfusion import _piece_owners
    from finalfusion.vocab import HuggingFaceTokenizer

    spans = (np.array([2, 2, 1 << 40], dtype=np.int64), False)
    one, two = np.array([2]), np.array([2, 2])

    def told(flat: list[int], counts: np.ndarray, runs: list[list[str]]) -> tuple[list[int], list[bool]]:
        lens, bad = _piece_owners._by_spans(
            np.array(flat), counts, np.array([len(r) for r in runs]), ["".join(r) for r in runs], [p for r in runs for p in r], spans
        )
        return lens.tolist(), bad.tolist()

    assert told([0, 1], one, [["abc", "d"]]) == ([0, 0], [True])  # 4 bytes each way, no end at 3
    assert told([0, 1], one, [["ab", "cd"]]) == ([1, 1], [False])
    assert told([0, 2, 0, 1], two, [["ab", "cd"], ["ab", "cd"]]) == ([0, 0, 1, 1], [True, False])  # an unknown span: that text alone fails
    tok = HuggingFaceTokenizer(KINDS["metaspace"][0]().to_str())
    real = tok.encode_texts

    def backwards(texts: Any, *, starts: bool) -> Any:
        ids, counts, firsts = real(texts, starts=starts)
        return ids, counts, firsts[::-1] if firsts is not None else None

    monkeypatch.setattr(tok, "encode_texts", backwards)
    assert _piece_owners._by_offsets(tok, ["the house", " is"], ["the", " house", " is"], "") is None
    rule, plan = _pieces._tokenizer_plan(tok)
    pieces = ["the", " house", " is", " happy"]
    ordered, flat, lens = _pieces._ids_and_lengths(tok, pieces, rule, plan)  # refused: each piece goes on its own
    assert _split(flat, lens) == _each_alone(tok, ordered)


@pytest.mark.parametrize("block", [1 << 16, 40])
def test_generated_hostile_texts_through_the_table_are_the_plain_path(ruled: tuple[Any, str], block: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Texts drawn from words and hostile characters (every kind of space, marks, CJK, emoji, added tokens' contents, the
    byte-level and Metaspace characters, a continuing prefix): through the table and its joined texts, exactly the ids
    each text gets whole."""
    tok, rule = ruled
    monkeypatch.setattr(_pieces, "NEW_SHARE", 1.0)
    monkeypatch.setattr(_pieces, "BLOCK_BYTES", block)  # 40: many short joined texts, each failing check redone apart
    rng = np.random.default_rng(23)
    parts = ["the", "house", "Happy", "householder", " ", " ", " ", "  ", "\t", "\n", ".", ",", "'s", "é", "e\u0301", "\u00a0", "\u3000"]
    parts += ["日本", "\U0001f600", "[CLS]", "<mask>", "<city>", "##", "\u0120", "\u2581", "\x00", "İ", "ß", "42", "x" * 30]
    texts = ["".join(rng.choice(parts, size=int(rng.integers(0, 14)))) for _ in range(300)]
    texts = texts + texts[::-1] + [t.upper() for t in texts[:50]]  # pieces repeat: the table pays
    got = PieceIds(tok, rule).ids(texts)
    assert got is not None
    flat, counts = got
    assert _split(flat, counts) == tok.encode_batch(texts)
