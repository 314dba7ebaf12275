# ruff: noqa: RUF001
"""llama.cpp's special tokens in text: which tokens it matches in a text, and how it cuts the text at them.

llama.cpp (``src/llama-vocab.cpp`` of the copy vendored in llama-cpp-python
0.3.36) tokenizes a text with ``parse_special = false`` in two steps:
``tokenizer_st_partition`` first cuts the text at every user-defined token
(``tokenizer.ggml.token_type`` 4) -- the longest tokens first, each at all
its places in every piece of text left -- and only then runs the model's
tokenizer on each piece of text between them. Control and unknown tokens are
never matched in text (``<s>`` is the characters ``<``, ``s``, ``>``), and
``llama_vocab::impl::load`` makes a token control whatever the file says when
its text is one of the end-of-generation, end-of-turn or fill-in-the-middle
markers it knows (:data:`CONTROL_TEXTS`: ``</s>``, ``<|endoftext|>``,
``<end_of_turn>``, ...), except ``</s>`` in vocabularies that also have
``<|tool_response>`` or ``<|plamo:eos|>`` (Gemma 4, PLaMo: a normal token there),
and user-defined again for gpt-oss's ``<|channel|>``, ``<|message|>``,
``<|start|>``, ``<|constrain|>``.

A leaf module: :mod:`finalfusion._tokenizers` (the llama.cpp tokenizers) and
the GGUF reader use it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

__all__ = ["CONTROL_TEXTS", "USER_DEFINED_TEXTS", "is_control_text", "partition"]

#: Token texts llama.cpp types control on load, whatever ``tokenizer.ggml.token_type`` says (its EOT, EOM, FIM and EOG lists).
CONTROL_TEXTS: Final[frozenset[str]] = frozenset(
    {
        # end of turn / message / generation
        "<|eot_id|>",
        "<|im_end|>",
        "<|end|>",
        "<|return|>",
        "<|call|>",
        "<|flush|>",
        "<|calls|>",
        "<end_of_turn>",
        "<|endoftext|>",
        "</s>",
        "<|eom_id|>",
        "<EOT>",
        "_<EOT>",
        "[EOT]",
        "[EOS]",
        "<|end_of_text|>",
        "<end_of_utterance>",
        "<eos>",
        "<turn|>",
        "<|tool_response>",
        "<｜end▁of▁sentence｜>",
        "[e~[",
        # fill in the middle
        "<|fim_prefix|>",
        "<fim-prefix>",
        "<fim_prefix>",
        "<｜fim▁begin｜>",
        "<PRE>",
        "▁<PRE>",
        "<|code_prefix|>",
        "<|prefix|>",
        "<|fim_suffix|>",
        "<fim-suffix>",
        "<fim_suffix>",
        "<｜fim▁hole｜>",
        "<SUF>",
        "▁<SUF>",
        "<|code_suffix|>",
        "<|suffix|>",
        "<|fim_middle|>",
        "<fim-middle>",
        "<fim_middle>",
        "<｜fim▁end｜>",
        "<MID>",
        "▁<MID>",
        "<|code_middle|>",
        "<|middle|>",
        "<|fim_pad|>",
        "<fim-pad>",
        "<fim_pad>",
        "<PAD>",
        "[PAD]",
        "<|fim_repo|>",
        "<|repo_name|>",
        "<fim-repo>",
        "<REPO>",
        "<reponame>",
        "<|file_sep|>",
    }
)
#: Token texts llama.cpp types user-defined on load, whatever the file says (gpt-oss: "always render these tokens").
USER_DEFINED_TEXTS: Final[frozenset[str]] = frozenset({"<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"})
#: Tokens whose presence makes ``</s>`` a normal token (Gemma 4, PLaMo).
_NORMAL_EOS_MARKERS: Final = ("<|tool_response>", "<|plamo:eos|>")


def is_control_text(text: str, vocabulary: frozenset[str] | set[str]) -> bool:
    """Whether llama.cpp makes the token ``text`` of ``vocabulary`` a control token whatever its type.

    Examples
    --------
    >>> is_control_text("</s>", {"</s>", "a"}), is_control_text("</s>", {"</s>", "<|tool_response>"}), is_control_text("a", {"a"})
    (True, False, False)
    """
    if text == "</s>" and any(m in vocabulary for m in _NORMAL_EOS_MARKERS):
        return False
    return text in CONTROL_TEXTS


def partition(text: str, specials: Sequence[tuple[str, int]]) -> list[str | int]:
    """``text`` cut at the tokens ``specials`` (``(text, id)``, longest first): pieces of text and token ids, in order.

    llama.cpp's ``tokenizer_st_partition``: each token in turn is found at all
    its places, left to right, in every piece of text not yet cut.

    Examples
    --------
    >>> partition("a  b    c", [("    ", 9), ("  ", 7)])
    ['a', 7, 'b', 9, 'c']
    >>> partition("plain", [("  ", 7)])
    ['plain']
    """
    pieces: list[str | int] = [text]
    for token, token_id in [s for s in specials if s[0] in text]:  # a token not in the text is in none of its pieces
        if not any(isinstance(p, str) and token in p for p in pieces):
            continue
        cut: list[str | int] = []
        for piece in pieces:
            if isinstance(piece, str) and token in piece:
                for k, part in enumerate(piece.split(token)):
                    if k:
                        cut.append(token_id)
                    if part:
                        cut.append(part)
            else:
                cut.append(piece)
        pieces = cut
    return pieces
