"""llama.cpp's ``bert`` vocabularies (WPM) as a WordPiece ``tokenizer.json`` for ``tokenizers``.

llama.cpp's converter stores a BERT vocabulary with SentencePiece-style
tokens: a word-initial piece ``w`` as ``▁w``, a continuation ``##w`` as ``w``,
bracketed specials (``[CLS]``, ``[unused0]``) as they are. Its WPM tokenizer
(``llm_tokenizer_wpm_session`` in ``src/llama-vocab.cpp``) is BERT's:
normalise (lowercase, strip accents by NFD), split at whitespace,
punctuation, ASCII symbols and CJK characters, drop control characters,
then match the longest pieces from the word's start, the whole word becoming
the unknown token when some part matches nothing. That is ``tokenizers``'
``BertNormalizer`` + ``BertPreTokenizer`` + ``WordPiece`` on the vocabulary
with the converter's renaming undone, which is what is built here.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import numpy.typing as npt

from finalfusion import limits
from finalfusion.compat._spmodel import CONTROL, UNKNOWN
from finalfusion.compat.gguf._layout import FORMAT
from finalfusion.errors import FormatError

__all__ = ["wordpiece_json"]

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
        "normalizer": {"type": "BertNormalizer", "clean_text": True, "handle_chinese_chars": True, "strip_accents": strip_accents, "lowercase": lowercase},
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
