"""Shared helpers of the model-format tests: multi-script random words, small trained tokenizers, the subword rule."""

from __future__ import annotations

import functools
import io
import random
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

#: Code point ranges of the scripts the random words come from (all NFKC-stable).
SCRIPTS: dict[str, list[tuple[int, int]]] = {
    "latin": [(0x61, 0x7A), (0x41, 0x5A), (0xE0, 0xF6)],
    "cyrillic": [(0x430, 0x44F), (0x410, 0x42F)],
    "cjk": [(0x4E00, 0x4EFF)],
    "emoji": [(0x1F600, 0x1F64F)],
}


def random_word(rng: random.Random, script: str | None = None) -> str:
    """A word of 1-9 characters from one script (or a mix of two)."""
    scripts = [script] if script else rng.sample(sorted(SCRIPTS), 2)
    chars = []
    for _ in range(rng.randint(1, 9)):
        lo, hi = rng.choice(SCRIPTS[rng.choice(scripts)])
        chars.append(chr(rng.randint(lo, hi)))
    return "".join(chars)


def random_words(n: int, seed: int = 0) -> list[str]:
    """``n`` distinct words, a quarter from each script, some mixed."""
    rng = random.Random(seed)
    out: dict[str, None] = {}
    names: list[str | None] = [*sorted(SCRIPTS), None]
    while len(out) < n:
        out[random_word(rng, names[len(out) % len(names)])] = None
    return list(out)


def corpus(n_lines: int = 1500, seed: int = 1) -> list[str]:
    """Training sentences: words from a small per-script lexicon (so merges repeat) plus some noise."""
    rng = random.Random(seed)
    lexicon = {s: [random_word(rng, s) for _ in range(60)] for s in SCRIPTS}
    lexicon["latin"] += ["the", "quick", "brown", "fox", "jumps", "over", "lazy", "dogs", "again", "and", "again"]
    lines = []
    for _ in range(n_lines):
        script = rng.choice(sorted(lexicon))
        lines.append(" ".join(rng.choice(lexicon[script]) for _ in range(rng.randint(3, 12))))
    return lines


@functools.cache
def train_sentencepiece(model_type: str, byte_fallback: bool, vocab_size: int = 1000) -> bytes:
    """A small SentencePiece model trained with the real library (default normalisation)."""
    spm = pytest.importorskip("sentencepiece")  # not in the test extra: the calling test skips without it

    buf = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(corpus()),
        model_writer=buf,
        model_type=model_type,
        vocab_size=vocab_size,
        byte_fallback=byte_fallback,
        character_coverage=0.98,
        hard_vocab_limit=False,
        minloglevel=2,
        num_threads=1,
    )
    return buf.getvalue()


def sentencepiece_skip(sp: Any) -> set[int]:
    """Ids the subword rule drops: control, unknown and unused pieces."""
    return {i for i in range(sp.GetPieceSize()) if sp.IsControl(i) or sp.IsUnknown(i) or sp.IsUnused(i)}


@functools.cache
def train_byte_level_bpe(vocab_size: int = 500) -> str:
    """A small byte-level BPE ``tokenizer.json`` (GPT-2 style) trained with the real ``tokenizers`` library."""
    pytest.importorskip("tokenizers")  # not in the test extra: the calling test skips without it
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=["<|endoftext|>", "<|pad|>"], initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False
    )
    tok.train_from_iterator(corpus(), trainer=trainer)
    return tok.to_str()


@functools.cache
def train_wordpiece(vocab_size: int = 400) -> str:
    """A small BERT-style WordPiece ``tokenizer.json`` (with [UNK] and special tokens)."""
    pytest.importorskip("tokenizers")  # not in the test extra: the calling test skips without it
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, trainers

    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    trainer = trainers.WordPieceTrainer(vocab_size=vocab_size, special_tokens=["[UNK]", "[CLS]", "[SEP]", "[PAD]", "[MASK]"], show_progress=False)
    tok.train_from_iterator(corpus(), trainer=trainer)
    return tok.to_str()


def hf_skip(tok: Any, tokenizer_json: str) -> set[int]:
    """Ids the subword rule drops for a Hugging Face tokenizer: special added tokens and the unknown token."""
    import json

    skip = {i for i, t in tok.get_added_tokens_decoder().items() if t.special}
    unk = json.loads(tokenizer_json)["model"].get("unk_token")
    if unk is not None and tok.token_to_id(unk) is not None:
        skip.add(tok.token_to_id(unk))
    return skip


def subword_rule(
    matrix: npt.NDArray[np.float32], ids: Sequence[int], skip: set[int], norms: npt.NDArray[np.float32] | None = None
) -> npt.NDArray[np.float32] | None:
    """A word's vector by issue 25's word rule: the mean of the model's rows of the kept ids (None when nothing is kept).

    The model's rows are ``matrix`` (stored rows) times ``norms`` when the
    embeddings keep norms; the mean is then returned l2-normalised (what a
    lookup returns with norms), else as it is. In float64, then float32.
    """
    kept = [i for i in ids if i not in skip and 0 <= i < len(matrix)]
    if not kept:
        return None
    rows = matrix[kept].astype(np.float64)
    if norms is None:
        return rows.mean(axis=0).astype(np.float32)
    v = (rows * np.asarray(norms, dtype=np.float64)[kept][:, None]).mean(axis=0)
    norm = np.linalg.norm(v)
    return (v / norm if norm else v).astype(np.float32)


def varint(v: int) -> bytes:
    """``v`` as a protobuf base-128 varint."""
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        out.append(b | (0x80 if v else 0))
        if not v:
            return bytes(out)
