# ruff: noqa: RUF002
"""llama.cpp's ``bert`` vocabularies (WPM) as a WordPiece ``tokenizer.json`` for ``tokenizers``.

llama.cpp's converter stores a BERT vocabulary with SentencePiece-style
tokens: a word-initial piece ``w`` as ``▁w``, a continuation ``##w`` as ``w``,
bracketed specials (``[CLS]``, ``[unused0]``) as they are. Its WPM tokenizer
(``llm_tokenizer_wpm_session`` in ``src/llama-vocab.cpp``) is BERT's
in outline: normalise, split at whitespace, punctuation, ASCII symbols and
CJK characters, drop control characters, then match the longest pieces from
the word's start, the whole word becoming the unknown token when some part
matches nothing. Its normalisation is llama.cpp's own, one character at a
time (``preprocess``): with accent stripping a character becomes the
*first* character of its NFD decomposition (a Hangul syllable its leading
consonant jamo: ``한`` is ``ᄒ``) and every mark ``\\p{M}`` is dropped (also
the spacing vowel signs of Devanagari and other Indic scripts, which
BERT's own normaliser keeps); lowercasing is Unicode's simple one-character
mapping (``Σ`` is always ``σ``). That is built here as a ``Precompiled``
normaliser (:func:`llamacpp_wpm_charsmap`) before ``BertNormalizer`` (only
its control-character removal and CJK spacing), ``BertPreTokenizer`` and
``WordPiece`` on the vocabulary with the converter's renaming undone.
"""

from __future__ import annotations

import base64
import functools
import itertools
import json
import unicodedata
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from finalfusion import limits
from finalfusion.compat._charsmap import build_charsmap
from finalfusion.compat._spmodel import CONTROL, UNKNOWN
from finalfusion.compat.gguf._layout import FORMAT
from finalfusion.errors import FormatError

__all__ = ["llamacpp_wpm_charsmap", "wordpiece_json"]

#: The word-start marker llama.cpp's converter puts before a BERT word-initial piece.
PHANTOM_SPACE = "\u2581"


def _hf_piece(token: str) -> str:
    """The ``tokenizer.json`` spelling of a llama.cpp WPM token: the inverse of the converter's renaming.

    Examples
    --------
    >>> [_hf_piece(t) for t in ["\\u2581the", "ing", "[CLS]", "[unused0]"]]
    ['the', '##ing', '[CLS]', '[unused0]']
    """
    if token.startswith(PHANTOM_SPACE) and len(token) > 1:
        return token[1:]
    if len(token) > 1 and token.startswith("[") and token.endswith("]"):
        return token
    return "##" + token


#: llama.cpp's whitespace (``unicode_set_whitespace``: Unicode's White_Space), where its WPM splits words.
_WHITESPACE: Final = frozenset([*range(0x09, 0x0E), 0x20, 0x85, 0xA0, 0x1680, *range(0x2000, 0x200B), 0x2028, 0x2029, 0x202F, 0x205F, 0x3000])


#: Planes 4-13 hold no character and 15-16 only private use, as do U+E000-U+F8FF (``clean_text`` drops those): nothing to map there.
_PLANE_4: Final = 0x40000


def _simple_lower(ch: str) -> str:
    """Unicode's simple (one-character) lowercase mapping, llama.cpp's ``unicode_tolower``."""
    low = ch.lower()
    return low if len(low) == 1 else "i" if ch == "\u0130" else ch


@functools.lru_cache(maxsize=4)
def llamacpp_wpm_charsmap(lowercase: bool, strip_accents: bool) -> bytes:
    """The precompiled charsmap of llama.cpp's WPM normalisation of one character (``llm_tokenizer_wpm_session::preprocess``).

    Each character ``c`` becomes, in llama.cpp's order: ``m``, the first
    character of ``c``'s NFD decomposition with ``strip_accents`` (else ``c``);
    a space when ``m`` is whitespace (a word break); nothing when
    ``strip_accents`` and ``m`` is a mark (``\\p{M}``); else ``m``, lowercased
    with ``lowercase``. Control characters (``\\p{C}``) are left to
    ``BertNormalizer``'s ``clean_text``, except those that are whitespace
    (vertical tab, form feed, U+0085), which it would drop where llama.cpp
    splits. Built once per setting (a second or two).

    Examples
    --------
    >>> blob = llamacpp_wpm_charsmap(True, True)
    >>> import pytest; tokenizers = pytest.importorskip("tokenizers")
    >>> tokenizers.normalizers.Precompiled(blob).normalize_str("Ab\u00e9 \ud55c\uad6d \u0939\u093f\u0902\u0926\u0940 \u03a3\u039f\u03a3")
    'abe \u1112\u1100 \u0939\u0926 \u03c3\u03bf\u03c3'
    """
    table = {}
    for cpt in itertools.chain(range(0xD800), range(0xF900, _PLANE_4), range(0xE0000, 0xE1000)):
        ch = chr(cpt)
        m = unicodedata.normalize("NFD", ch)[0] if strip_accents else ch
        if ord(m) in _WHITESPACE:
            out = " "
        elif strip_accents and unicodedata.category(m)[0] == "M":
            out = ""
        else:
            out = _simple_lower(m) if lowercase else m
        if out != ch:
            table[ch] = out
    return build_charsmap(table)


def _flag(kv: dict[str, Any], key: str, default: bool) -> bool:
    value = kv.get(key, default)
    if not isinstance(value, bool):
        raise FormatError(f"{key} is not a bool", chunk=FORMAT, expected="a bool", found=type(value).__name__)
    return value


def wordpiece_json(kv: dict[str, Any], tokens: list[str], types: npt.NDArray[Any] | None) -> str:
    """A WordPiece ``tokenizer.json`` that tokenizes as llama.cpp's WPM does a ``bert`` GGUF vocabulary.

    Lowercasing follows ``tokenizer.ggml.normalizer.lowercase`` (default
    true) and accent stripping ``tokenizer.ggml.normalizer.strip_accents``
    (default: as lowercasing), llama.cpp's defaults. The unknown token is
    ``tokenizer.ggml.unknown_token_id`` (llama.cpp's default: 100, BERT's
    ``[UNK]``). Control and unknown tokens keep their spelling.

    Raises
    ------
    FormatError
        If the unknown token is missing, or two tokens have the same ``tokenizer.json`` spelling.

    Examples
    --------
    >>> doc = json.loads(wordpiece_json({"tokenizer.ggml.unknown_token_id": 0}, ["[UNK]", "\\u2581play", "ing"], None))
    >>> doc["model"]["vocab"], doc["model"]["unk_token"]
    ({'[UNK]': 0, 'play': 1, '##ing': 2}, '[UNK]')
    """
    unk = kv.get("tokenizer.ggml.unknown_token_id", 100)
    if not (isinstance(unk, int) and not isinstance(unk, bool) and 0 <= unk < len(tokens)):
        raise FormatError(
            "a bert vocabulary needs an unknown token (llama.cpp's WPM emits it for a word it cannot split)",
            chunk=FORMAT,
            expected=f"tokenizer.ggml.unknown_token_id in 0..{len(tokens) - 1} (default 100)",
            found=unk,
        )
    kept = np.zeros(len(tokens), dtype=bool) if types is None else np.isin(types, (CONTROL, UNKNOWN))
    kept[unk] = True
    vocab: dict[str, int] = {}
    for i, token in enumerate(tokens):
        piece = token if kept[i] else _hf_piece(token)
        if piece in vocab:
            raise FormatError(
                f"tokens {vocab[piece]} and {i} are the same WordPiece token {piece[:40]!r}",
                chunk=FORMAT,
                expected="'\u2581w' for a word-initial piece, 'w' for a continuation '##w' (llama.cpp's converter), each once",
                found=f"{tokens[vocab[piece]][:40]!r} and {token[:40]!r}",
            )
        vocab[piece] = i
    lowercase = _flag(kv, "tokenizer.ggml.normalizer.lowercase", True)
    strip_accents = _flag(kv, "tokenizer.ggml.normalizer.strip_accents", lowercase)
    doc: dict[str, Any] = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [],
        "normalizer": {
            "type": "Sequence",
            "normalizers": [
                {"type": "Precompiled", "precompiled_charsmap": base64.b64encode(llamacpp_wpm_charsmap(lowercase, strip_accents)).decode("ascii")},
                {"type": "BertNormalizer", "clean_text": True, "handle_chinese_chars": True, "strip_accents": False, "lowercase": False},
            ],
        },
        "pre_tokenizer": {"type": "BertPreTokenizer"},
        "post_processor": None,
        "decoder": {"type": "WordPiece", "prefix": "##", "cleanup": True},
        "model": {
            "type": "WordPiece",
            "unk_token": tokens[unk],
            "continuing_subword_prefix": "##",
            "max_input_chars_per_word": limits.MAX_WORDPIECE_INPUT_CHARS,
            "vocab": vocab,
        },
    }
    return json.dumps(doc, ensure_ascii=False)
