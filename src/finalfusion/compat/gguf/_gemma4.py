"""llama.cpp's ``gemma4`` vocabularies (SentencePiece-style BPE on raw UTF-8) as a ``tokenizer.json`` for ``tokenizers``.

A ``gemma4`` GGUF vocabulary is BPE with merges, like ``gpt2``, but on the
text's own characters rather than GPT-2's byte mapping: llama.cpp
(``llm_tokenizer_bpe`` with ``LLAMA_VOCAB_PRE_TYPE_GEMMA4``, ``src/llama-vocab.cpp``)
replaces every space with ``▁``, splits the text into lines and runs of
newlines (``[^\\n]+|[\\n]+``), takes a run of newlines that is a token as
that token, merges the rest by the merges' ranks and spells a character
that ends up in no token as its ``<0xNN>`` byte tokens. In ``tokenizers``
that is a ``Replace`` normaliser, a ``Split`` pre-tokenizer and a BPE model
with ``byte_fallback``; user-defined tokens are matched in the text first
(as llama.cpp does with ``parse_special=false``), and so are the tokens that
are runs of newlines (added tokens, matched longest first: a run longer than
every such token is split into them where llama.cpp merges it).
"""

from __future__ import annotations

import json
from typing import Any

import numpy.typing as npt

from finalfusion._llamacpp_pre import GEMMA4_SPLIT
from finalfusion._llamacpp_special import is_control_text
from finalfusion.compat._bpe_json import bpe_document, split_isolated
from finalfusion.compat._spmodel import CONTROL, USER_DEFINED
from finalfusion.compat.gguf._layout import FORMAT
from finalfusion.errors import FormatError

__all__ = ["GEMMA4_PRE", "gemma4_json"]

#: The ``tokenizer.ggml.pre`` values llama.cpp tokenizes as Gemma 4 (a ``gemma4`` model is always one).
GEMMA4_PRE = ("gemma4", "granite-embed-multi-311m")


def _merge_pairs(merges: list[str], known: set[str]) -> list[list[str]]:
    """Each merge ``"a b"`` as ``[a, b]``, split at the first space after the first character as llama.cpp does; a, b and ab must be tokens."""
    pairs = []
    for i, merge in enumerate(merges):
        cut = merge.find(" ", 1)
        a, b = (merge[:cut], merge[cut + 1 :]) if cut > 0 else ("", "")
        if not a or not b or a not in known or b not in known or a + b not in known:
            raise FormatError(
                f"merge {i} of tokenizer.ggml.merges does not join two tokens into a third",
                chunk=FORMAT,
                expected="'a b' where a, b and ab are in tokenizer.ggml.tokens",
                found=merge[:80],
            )
        pairs.append([a, b])
    return pairs


def gemma4_json(kv: dict[str, Any], tokens: list[str], types: npt.NDArray[Any] | None) -> str:
    """A ``tokenizer.json`` that tokenizes as llama.cpp does a ``gemma4`` GGUF vocabulary.

    Raises
    ------
    FormatError
        If ``tokenizer.ggml.merges`` is not a list of merges of tokens.

    Examples
    --------
    >>> doc = json.loads(gemma4_json({"tokenizer.ggml.merges": ["\\u2581 a"]}, ["\\u2581", "a", "\\u2581a"], None))
    >>> doc["model"]["merges"], doc["normalizer"]["content"]
    ([['▁', 'a']], '▁')
    """
    merges = kv.get("tokenizer.ggml.merges")
    if not isinstance(merges, list) or not all(isinstance(m, str) for m in merges):
        raise FormatError(
            "a gemma4 vocabulary needs tokenizer.ggml.merges, a list of strings", chunk=FORMAT, expected="an array of strings", found=type(merges).__name__
        )
    pairs = _merge_pairs(merges, set(tokens))
    added = []
    vocabulary = frozenset(tokens)
    for i, token in enumerate(tokens):
        kind = int(types[i]) if types is not None else 0
        # llama.cpp takes a run of newlines that is a token as that token (its "fix for gemma 4"), without merges: an added token
        if kind in (CONTROL, USER_DEFINED) or (token and not token.strip("\n")):
            special = kind == CONTROL or is_control_text(token, vocabulary)
            added.append({"id": i, "content": token, "single_word": False, "lstrip": False, "rstrip": False, "normalized": False, "special": special})
    unk = kv.get("tokenizer.ggml.unknown_token_id")
    doc = bpe_document(
        {t: i for i, t in enumerate(tokens)},
        pairs,
        normalizer={"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"},
        pre_tokenizer=split_isolated(GEMMA4_SPLIT),
        decoder=None,
        added_tokens=added,
        unk_token=tokens[unk] if isinstance(unk, int) and not isinstance(unk, bool) and 0 <= unk < len(tokens) else None,
        byte_fallback=True,
    )
    return json.dumps(doc, ensure_ascii=False)
