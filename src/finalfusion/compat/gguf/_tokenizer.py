"""Tokenizers and GGUF metadata: the tokenizer a file's ``tokenizer.ggml.*`` keys describe, and the keys that describe a vocabulary's tokenizer."""

from __future__ import annotations

import json
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from finalfusion._llamacpp_pre import IGNORE_MERGES, PRE_REGEXES, UNSUPPORTED
from finalfusion._llamacpp_special import is_control_text
from finalfusion._tokenizers import HuggingFaceTokenizer, LlamaCppJsonTokenizer, SentencePieceTokenizer, Tokenizer
from finalfusion.compat._bpe_json import bpe_document, split_isolated
from finalfusion.compat._spmodel import (
    BPE_MODEL,
    CONTROL,
    NORMAL,
    UNIGRAM_MODEL,
    UNKNOWN,
    UNUSED,
    USER_DEFINED,
    LazySentencePieceTokenizer,
    SentencePieceModel,
)
from finalfusion.compat.gguf._gemma4 import GEMMA4_PRE, gemma4_json
from finalfusion.compat.gguf._layout import ARRAY, BOOL, F32, FORMAT, I32, STRING, U8, U32
from finalfusion.compat.gguf._wordpiece import wordpiece_json
from finalfusion.errors import FormatError
from finalfusion.vocab import Vocab
from finalfusion.vocab.tokenizer import TokenizerVocab

__all__ = ["byte_level_bpe_json", "gguf_tokenizer", "tokenizer_kv"]


def byte_level_bpe_json(tokens: list[str], merges: list[str], types: npt.NDArray[Any] | None, pre: str | None = None) -> str:
    """A ``tokenizer.json`` for a GGUF ``gpt2``-style vocabulary: byte-level BPE from tokens and merges.

    Control tokens become special added tokens, user-defined ones plain
    added tokens (special too when llama.cpp makes them control:
    :func:`finalfusion._llamacpp_special.is_control_text`). The pre-tokenizer is llama.cpp's for ``pre``
    (:data:`finalfusion._llamacpp_pre.PRE_REGEXES`: its regexes, each a
    ``Split`` isolating matches, then GPT-2's byte mapping), with
    ``ignore_merges`` where llama.cpp sets it; ``None`` is GPT-2's byte-level split.

    Raises
    ------
    FormatError
        If ``pre`` is a value llama.cpp does not know, or one whose split ``tokenizers`` cannot reproduce.

    Examples
    --------
    >>> doc = json.loads(byte_level_bpe_json(["a", "b", "ab"], ["a b"], None))
    >>> doc["model"]["type"], doc["model"]["vocab"]["ab"], doc["model"]["merges"]
    ('BPE', 2, ['a b'])
    """
    added = []
    if types is not None:
        vocabulary = frozenset(tokens)
        for i, t in enumerate(types.tolist()):
            if t in (CONTROL, USER_DEFINED) and i < len(tokens):
                added.append(
                    {
                        "id": i,
                        "content": tokens[i],
                        "single_word": False,
                        "lstrip": False,
                        "rstrip": False,
                        "normalized": False,
                        "special": t == CONTROL or is_control_text(tokens[i], vocabulary),
                    }
                )
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
    pre_tokenizer: dict[str, Any] = byte_level
    if pre is not None:
        pre_tokenizer = {
            "type": "Sequence",
            "pretokenizers": [
                *(split_isolated(r) for r in _pre_regexes(pre)),
                dict(byte_level, use_regex=False),
            ],
        }
    doc = bpe_document(
        {t: i for i, t in enumerate(tokens)},
        merges,
        pre_tokenizer=pre_tokenizer,
        decoder={"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        added_tokens=added,
        ignore_merges=pre in IGNORE_MERGES,
    )
    return json.dumps(doc, ensure_ascii=False)


#: SentencePiece's special pieces -> llama.cpp's id keys (``tokenizer.ggml.<name>_token_id``; the short names first
#: written by this library before it used llama.cpp's are read too).
_SPECIAL_KEYS: Final[dict[str, tuple[str, ...]]] = {"unk": ("unknown", "unk"), "bos": ("bos",), "eos": ("eos",), "pad": ("padding", "pad")}


def _pre_regexes(pre: str) -> tuple[str, ...]:
    """The regexes llama.cpp splits a ``gpt2`` vocabulary's text with for ``tokenizer.ggml.pre = pre``."""
    regexes = PRE_REGEXES.get(pre)
    if regexes is not None:
        return regexes
    if pre in UNSUPPORTED:
        raise FormatError(
            f"tokenizer.ggml.pre {pre!r} is a pre-tokenizer the tokenizers library cannot reproduce: {UNSUPPORTED[pre]}",
            chunk=FORMAT,
            expected="a tokenizer.ggml.pre value of finalfusion._llamacpp_pre.PRE_REGEXES",
            found=pre[:80],
        )
    raise FormatError(
        "tokenizer.ggml.pre names a pre-tokenizer llama.cpp does not know (llama.cpp refuses the file: 'unknown pre-tokenizer type')",
        chunk=FORMAT,
        expected="a tokenizer.ggml.pre value of llama.cpp's llama-vocab.cpp (finalfusion._llamacpp_pre.PRE_REGEXES)",
        found=pre[:80],
    )


def _one_unknown(kv: dict[str, Any], types: npt.NDArray[Any] | None) -> npt.NDArray[Any] | None:
    """``types`` with exactly one UNKNOWN token, as sentencepiece requires ("unk is already defined"): the unknown token's.

    Padded vocabularies (Phi-3: 53 ``[PADnnnnn]`` tokens typed UNKNOWN, ``<unk>``
    typed CONTROL) are tokenized by llama.cpp all the same; the other UNKNOWN
    tokens become UNUSED, which sentencepiece never emits either and a word
    lookup drops alike. The unknown token is ``tokenizer.ggml.unknown_token_id``
    (llama.cpp's default for ``llama`` and ``t5``: 0 and 2), else the first
    UNKNOWN token.

    Examples
    --------
    >>> _one_unknown({"tokenizer.ggml.unknown_token_id": 0}, np.array([CONTROL, NORMAL, UNKNOWN, UNKNOWN])).tolist()
    [2, 1, 5, 5]
    """
    if types is None:
        return None
    unknown = types == UNKNOWN
    unk = kv.get("tokenizer.ggml.unknown_token_id")
    if not (isinstance(unk, int) and not isinstance(unk, bool) and 0 <= unk < len(types)):
        unk = int(np.argmax(unknown)) if unknown.any() else -1
    if unk < 0 or (int(unknown.sum()) == 1 and unknown[unk]):
        return types
    out = np.where(unknown, UNUSED, types).astype(types.dtype)
    out[unk] = UNKNOWN
    return out


def _special_ids(kv: dict[str, Any], types: npt.NDArray[Any] | None) -> dict[str, int]:
    out = {}
    for name, keys in _SPECIAL_KEYS.items():
        found = [kv[f"tokenizer.ggml.{k}_token_id"] for k in keys if f"tokenizer.ggml.{k}_token_id" in kv]
        v = found[0] if found else None
        out[name] = v if isinstance(v, int) and not isinstance(v, bool) else -1
    if out["unk"] < 0 and types is not None:
        unknown = np.flatnonzero(types == UNKNOWN)
        out["unk"] = int(unknown[0]) if len(unknown) else -1
    return out


def _sentencepiece_model(kv: dict[str, Any], tokens: list[str], types: npt.NDArray[Any] | None, model_type: int) -> SentencePieceModel:
    """The SentencePiece model llama.cpp tokenizes with: ``llama`` (BPE by scores, no normaliser) or ``t5`` (unigram, precompiled charsmap)."""
    n = len(tokens)
    scores = _typed_array(kv, "tokenizer.ggml.scores", n)
    if scores is not None:
        scores = scores.astype(np.float64)
        bad = ~(np.abs(scores) <= np.finfo(np.float32).max)  # NaN, infinities and f64 values past float32
        if bad.any():
            i = int(np.argmax(bad))
            raise FormatError(
                "tokenizer.ggml.scores holds a value that is not a finite float32",
                chunk=FORMAT,
                expected="finite float32 scores (a SentencePiece model stores float32; sentencepiece refuses NaN and infinity)",
                found=f"{float(scores[i])!r} (token {i})",
            )
    charsmap = kv.get("tokenizer.ggml.precompiled_charsmap") if model_type == UNIGRAM_MODEL else None
    return SentencePieceModel(
        tokens,
        scores.tolist() if scores is not None else [0.0] * n,
        types.astype(int).tolist() if types is not None else [NORMAL] * n,
        _special_ids(kv, types),
        model_type=model_type,
        add_dummy_prefix=bool(kv.get("tokenizer.ggml.add_space_prefix", True)),
        remove_extra_whitespaces=bool(kv.get("tokenizer.ggml.remove_extra_whitespaces", model_type == UNIGRAM_MODEL)),
        charsmap=charsmap.astype(np.uint8).tobytes() if isinstance(charsmap, np.ndarray) else b"",
    )


def _typed_array(kv: dict[str, Any], key: str, n: int) -> npt.NDArray[Any] | None:
    v = kv.get(key)
    if v is None:
        return None
    if not isinstance(v, np.ndarray) or v.ndim != 1:
        raise FormatError(f"{key} is not a numeric array", chunk=FORMAT, expected="an array of numbers", found=type(v).__name__)
    if len(v) != n:
        raise FormatError(f"{key} does not match the token list", chunk=FORMAT, expected=f"{n} entries", found=len(v))
    return v


def _check_merges(merges: list[str], tokens: list[str]) -> None:
    """Refuse a merge the BPE model cannot hold: ``"a b"`` with ``a``, ``b`` and ``ab`` all tokens.

    ``tokenizers`` requires this of every merge, and checked lazily it would
    fail only at the first lookup of an unknown word -- as a Rust panic that
    escapes ``except Exception`` where the merged token is longer than every
    token (huggingface/tokenizers#2198). One pass: 50,000 synthetic merges took
    30-50 ms on a loaded 2-core machine.
    """
    known = set(tokens)
    for i, merge in enumerate(merges):
        a, space, b = merge.partition(" ")
        if not space or " " in b or a not in known or b not in known or a + b not in known:
            raise FormatError(
                f"merge {i} of tokenizer.ggml.merges does not join two tokens into a third",
                chunk=FORMAT,
                expected="'a b' where a, b and ab are in tokenizer.ggml.tokens",
                found=merge[:80],
            )


def gguf_tokenizer(kv: dict[str, Any], tokens: list[str]) -> Tokenizer | None:
    """The tokenizer a GGUF file describes, or ``None`` when it names none this library supports.

    Examples
    --------
    >>> gguf_tokenizer({"tokenizer.ggml.model": "gpt2", "tokenizer.ggml.merges": ["a b"]}, ["a", "b", "ab"]).kind
    'huggingface-llamacpp'
    >>> gguf_tokenizer({}, ["a"]) is None
    True
    """
    hf = kv.get("tokenizer.huggingface.json")
    if hf is not None:
        _check_hf_json(hf)
    model = kv.get("tokenizer.ggml.model")
    types = _typed_array(kv, "tokenizer.ggml.token_type", len(tokens))
    # Every tokenizer here is built from the file's content with from_bytes / from_json: a value inside a file is never opened as a path.
    if model in ("llama", "t5"):
        # Checked now; serialised as a ModelProto on first need (most of the load's work for a large vocabulary).
        return LazySentencePieceTokenizer(_sentencepiece_model(kv, tokens, _one_unknown(kv, types), BPE_MODEL if model == "llama" else UNIGRAM_MODEL))
    pre = kv.get("tokenizer.ggml.pre")
    # llama.cpp never matches a control token in text: LlamaCppJsonTokenizer, where tokenizers would match a special added token
    if model == "gemma4" or (model == "gpt2" and pre in GEMMA4_PRE):
        return LlamaCppJsonTokenizer.from_json(gemma4_json(kv, tokens, types))
    if model == "bert":
        return HuggingFaceTokenizer.from_json(wordpiece_json(kv, tokens, types))
    if model == "gpt2":
        merges = kv.get("tokenizer.ggml.merges", [])
        if not isinstance(merges, list) or not all(isinstance(m, str) for m in merges):
            raise FormatError("tokenizer.ggml.merges is not a list of strings", chunk=FORMAT, expected="an array of strings", found=type(merges).__name__)
        _check_merges(merges, tokens)
        # llama.cpp reads a missing (or empty) tokenizer.ggml.pre as "default" (llama_vocab::impl::load), with a warning
        return LlamaCppJsonTokenizer.from_json(byte_level_bpe_json(tokens, merges, types, pre if isinstance(pre, str) and pre else "default"))
    if isinstance(hf, str):
        return HuggingFaceTokenizer.from_json(hf)
    return None


def _check_hf_json(value: str) -> None:
    """Refuse a ``tokenizer.huggingface.json`` that is not a JSON object, whatever tokenizer the file uses: a malformed field is malformed.

    The value is a document, never a path (``/dev/zero``, a FIFO's name): it is parsed, not opened.

    Examples
    --------
    >>> _check_hf_json('{"model": {}}')
    >>> _check_hf_json("/dev/zero")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    finalfusion.errors.FormatError: GGUF: tokenizer.huggingface.json is not a tokenizer.json: expected a JSON object, found '/dev/zero' ...
    """
    try:
        doc = json.loads(value)
    except (ValueError, RecursionError) as exc:
        raise FormatError(
            "tokenizer.huggingface.json is not a tokenizer.json", chunk=FORMAT, expected="a JSON object", found=f"{value[:60]!r} ({str(exc)[:60]})"
        ) from None
    if not isinstance(doc, dict):
        raise FormatError("tokenizer.huggingface.json is not a tokenizer.json", chunk=FORMAT, expected="a JSON object", found=f"a JSON {type(doc).__name__}")


def tokenizer_kv(vocab: Vocab) -> list[tuple[str, int, Any]]:
    words = list(vocab.words)
    tok = vocab.tokenizer if isinstance(vocab, TokenizerVocab) else None
    if isinstance(tok, SentencePieceTokenizer):
        # A GGUF vocabulary's tokenizer not serialised yet has its model at hand: no ModelProto is written and parsed back.
        lazy = tok.model if isinstance(tok, LazySentencePieceTokenizer) else None
        spm = lazy if lazy is not None else SentencePieceModel.parse(tok.to_bytes())
        if spm.pieces == words:
            unigram = spm.model_type == UNIGRAM_MODEL
            out: list[tuple[str, int, Any]] = [
                ("tokenizer.ggml.model", STRING, "t5" if unigram else "llama"),
                ("tokenizer.ggml.tokens", ARRAY, (STRING, words)),
                ("tokenizer.ggml.scores", ARRAY, (F32, spm.scores)),
                ("tokenizer.ggml.token_type", ARRAY, (I32, spm.types)),
                ("tokenizer.ggml.add_space_prefix", BOOL, spm.add_dummy_prefix),
            ]
            if unigram:
                out.append(("tokenizer.ggml.remove_extra_whitespaces", BOOL, spm.remove_extra_whitespaces))
                if spm.charsmap:
                    out.append(("tokenizer.ggml.precompiled_charsmap", ARRAY, (U8, np.frombuffer(spm.charsmap, dtype=np.uint8))))
            out += [(f"tokenizer.ggml.{_SPECIAL_KEYS[k][0]}_token_id", U32, v) for k, v in spm.special.items() if k in _SPECIAL_KEYS and 0 <= v < len(words)]
            return out
    if isinstance(tok, HuggingFaceTokenizer):
        text = _json_text(tok.to_bytes())
        return [*_gpt2_kv(text, words), ("tokenizer.huggingface.json", STRING, text)]
    return [("tokenizer.ggml.model", STRING, "none"), ("tokenizer.ggml.tokens", ARRAY, (STRING, words))]


def _json_text(data: bytes) -> str:
    """A ``tokenizer.json`` as text, whatever encoding JSON allows it (UTF-8 with or without BOM, UTF-16, UTF-32): GGUF strings are UTF-8.

    Raises
    ------
    FormatError
        When the bytes are not text in any of them (a stored tokenizer read from an untrusted ``.fifu``), naming the field.
    """
    try:
        return data.decode(json.detect_encoding(data)).lstrip("\ufeff")
    except UnicodeDecodeError as exc:
        raise FormatError(
            "the tokenizer's tokenizer.json cannot be written as tokenizer.huggingface.json",
            chunk=FORMAT,
            expected="text (UTF-8, -16 or -32)",
            found=str(exc)[:100],
        ) from None


def _gpt2_kv(text: str, words: list[str]) -> list[tuple[str, int, Any]]:
    """llama.cpp's ``gpt2`` keys for a byte-level BPE ``tokenizer.json``, when its merges are ones the GGUF reader takes back; else the token list alone.

    The document comes from a tokenizer that loaded (lazily: its merges may be
    anything JSON holds), so every part is checked before it is used: the file
    written is one :func:`gguf_tokenizer` reads, or the ``gpt2`` keys are left out.
    """
    plain: list[tuple[str, int, Any]] = [("tokenizer.ggml.model", STRING, "none"), ("tokenizer.ggml.tokens", ARRAY, (STRING, words))]
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError):
        return plain
    model = doc.get("model") if isinstance(doc, dict) else None
    if not isinstance(model, dict) or model.get("type") != "BPE" or "ByteLevel" not in json.dumps(doc.get("pre_tokenizer")):
        return plain
    raw = model.get("merges", [])
    if not isinstance(raw, list) or not all(isinstance(m, str) or (isinstance(m, list) and len(m) == 2 and all(isinstance(p, str) for p in m)) for m in raw):
        return plain
    merges = [m if isinstance(m, str) else " ".join(m) for m in raw]
    try:
        _check_merges(merges, words)
    except FormatError:
        return plain
    token_types = np.full(len(words), NORMAL, dtype=np.int32)
    added_tokens = doc.get("added_tokens")
    for added in added_tokens if isinstance(added_tokens, list) else []:
        i = added.get("id") if isinstance(added, dict) else None
        if isinstance(i, int) and not isinstance(i, bool) and 0 <= i < len(words):
            token_types[i] = CONTROL if added.get("special") is True else USER_DEFINED
    pre = _pre_of(doc, model)
    return [
        ("tokenizer.ggml.model", STRING, "gpt2"),
        *([("tokenizer.ggml.pre", STRING, pre)] if pre is not None else []),
        ("tokenizer.ggml.tokens", ARRAY, (STRING, words)),
        ("tokenizer.ggml.token_type", ARRAY, (I32, token_types)),
        ("tokenizer.ggml.merges", ARRAY, (STRING, merges)),
    ]


def _pre_of(doc: dict[str, Any], model: dict[str, Any]) -> str | None:
    """The ``tokenizer.ggml.pre`` value whose pre-tokenizer :func:`byte_level_bpe_json` built ``doc`` with, if any.

    So that a ``gpt2`` vocabulary read from a GGUF file is written back with
    the pre-tokenizer llama.cpp and this library split its text with (without
    the key llama.cpp splits with its ``default`` regexes). Values with the same regexes and
    ``ignore_merges`` tokenize alike; the first of :data:`PRE_REGEXES` is written.
    GPT-2's own ``ByteLevel`` split (a Hugging Face GPT-2 ``tokenizer.json``) is ``gpt-2``.

    Examples
    --------
    >>> doc = json.loads(byte_level_bpe_json(["a", "b", "ab"], ["a b"], None, "llama3"))
    >>> _pre_of(doc, doc["model"]), _pre_of(json.loads(byte_level_bpe_json(["a"], [], None)), {})
    ('llama3', 'gpt-2')
    >>> _pre_of({"pre_tokenizer": {"type": "Whitespace"}}, {}) is None
    True
    """
    pre_tokenizer = doc.get("pre_tokenizer")
    if isinstance(pre_tokenizer, dict) and pre_tokenizer.get("type") == "ByteLevel":
        # GPT-2's regex in tokenizers ends in "|\s+", llama.cpp's gpt-2 one does not: the unmatched gap is a piece of its own all the same
        gpt2 = pre_tokenizer.get("use_regex", True) is True and pre_tokenizer.get("add_prefix_space") is False and model.get("ignore_merges") is not True
        return "gpt-2" if gpt2 else None
    steps = pre_tokenizer.get("pretokenizers") if isinstance(pre_tokenizer, dict) and pre_tokenizer.get("type") == "Sequence" else None
    if not isinstance(steps, list) or len(steps) < 2 or steps[-1] != {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}:
        return None
    regexes = []
    for step in steps[:-1]:
        pattern = step.get("pattern") if isinstance(step, dict) else None
        if not isinstance(pattern, dict) or step != {"type": "Split", "pattern": pattern, "behavior": "Isolated", "invert": False}:
            return None
        regexes.append(pattern.get("Regex"))
    ignore = model.get("ignore_merges") is True
    return next((name for name, r in PRE_REGEXES.items() if list(r) == regexes and (name in IGNORE_MERGES) == ignore), None)
