"""The ``tokenizer.json`` documents of the BPE tokenizers built from foreign vocabularies (GGUF ``gpt2``/``gemma4``, Tekken).

One skeleton for every reader that turns a token list and merges into a
``tokenizers`` BPE, so the fields a reader does not set are the same
everywhere (no truncation, padding or post-processor; no dropout, no
continuing-subword prefix or end-of-word suffix, unknown pieces not fused).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["bpe_document", "split_isolated"]


def split_isolated(regex: str) -> dict[str, Any]:
    """A ``Split`` pre-tokenizer that isolates the matches of ``regex``.

    Examples
    --------
    >>> split_isolated(r"\\d")["behavior"]
    'Isolated'
    """
    return {"type": "Split", "pattern": {"Regex": regex}, "behavior": "Isolated", "invert": False}


def bpe_document(
    vocab: Mapping[str, int],
    merges: Sequence[Any],
    *,
    pre_tokenizer: Any,
    decoder: Any,
    normalizer: Any = None,
    added_tokens: Sequence[Any] = (),
    unk_token: str | None = None,
    byte_fallback: bool = False,
    ignore_merges: bool = False,
) -> dict[str, Any]:
    """A ``tokenizer.json`` document of a BPE model over ``vocab`` (token -> id) and ``merges``.

    Examples
    --------
    >>> doc = bpe_document({"a": 0, "b": 1, "ab": 2}, [["a", "b"]], pre_tokenizer=None, decoder=None)
    >>> doc["model"]["type"], doc["model"]["merges"]
    ('BPE', [['a', 'b']])
    """
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": list(added_tokens),
        "normalizer": normalizer,
        "pre_tokenizer": pre_tokenizer,
        "post_processor": None,
        "decoder": decoder,
        "model": {
            "type": "BPE",
            "dropout": None,
            "unk_token": unk_token,
            "continuing_subword_prefix": None,
            "end_of_word_suffix": None,
            "fuse_unk": False,
            "byte_fallback": byte_fallback,
            "ignore_merges": ignore_merges,
            "vocab": dict(vocab),
            "merges": list(merges),
        },
    }
