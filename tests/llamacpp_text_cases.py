# ruff: noqa: RUF001
"""Texts that llama.cpp's own tokenizer tests leave out, tokenized by llama.cpp itself: the reference ids of ``tests/data/llamacpp_text_ids.json``.

Runs of spaces and tabs, special-token text (``<s>``, ``</s>``, ``[CLS]``, ...) in
running text, every script (Hangul, Devanagari, Greek, Thai, Arabic, CJK,
combining marks, zero-width characters) and real lines of English prose and
code. ``python tests/llamacpp_text_cases.py OUT.json GGUF...`` (in an
environment with llama-cpp-python, which this project does not ship) writes
llama.cpp's ids for every case and file:
``Llama(path, vocab_only=True).tokenize(text.encode(), add_bos=False, special=False)``.
The tests compare ``load_gguf``'s tokenizer with them (``tests/test_llamacpp_text.py``).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from llamacpp_vocabs import finish_gguf

SPACES = [f"x{' ' * k}y" for k in range(1, 36)] + [
    "a  b",
    "  leading two",
    "trailing two  ",
    "    four-space indented code()",
    "        eight = spaces",
    "tab\tseparated\tcolumns",
    "\t\tdouble tab",
    "mixed \t \t whitespace",
    "line one\nline two",
    "para one\n\npara two",
    "\n   \n  x",
    "end with newline\n",
    " ",
    "   ",
    "\t",
    "a" + " " * 40 + "b",
    "Name:     Value     Other",
    "| col |    col2    |",
]
SPECIAL = [
    "<s>",
    "</s>",
    "<unk>",
    "<pad>",
    "<bos>",
    "<eos>",
    "<mask>",
    "[CLS]",
    "[SEP]",
    "[MASK]",
    "[UNK]",
    "[PAD]",
    "<|endoftext|>",
    "<|im_start|>user",
    "<start_of_turn>user\nhi<end_of_turn>",
    "<s>Hello world</s>",
    "hello</s> world",
    "x <s> y",
    "</s> after",
    "before </s>",
    "<unk> token and <pad> token",
    "HTML <s>struck</s> text",
    "[CLS] sentence [SEP]",
    "<|end|>\nnext",
    "a<mask>b",
]
SCRIPTS = [
    "한국어",
    "안녕하세요 세계",
    "대한민국의 수도는 서울입니다.",
    "हिन्दी",
    "नमस्ते दुनिया",
    "भारत की राजधानी नई दिल्ली है।",
    "क़ानून",
    "Seoul 서울 and Delhi दिल्ली",
    "ΟΔΟΣ οδός",
    "Ελληνικά κείμενα",
    "தமிழ் மொழி",
    "ภาษาไทย",
    "العربية لغة",
    "עברית",
    "日本語のテキスト",
    "中文文本测试",
    "Русский текст",
    "naïve café Ångström",
    "İstanbul",
    "straße STRASSE",
    "e\u0301cole",
    "a\u200bb",
    "a\u200db",
    "co\u00adop",
    "\U0001f44d\U0001f3fb thumbs",
    "emoji \U0001f999 llama",
    "Ⅻ ① ½",
    "ﬁnance",
    "Ａｂｃ",
    "x\u00a0y",
    "x\u3000y",
    "x\u2003y",
]
PROSE = [
    "The quick brown fox jumps over the lazy dog.",
    "Permission is hereby granted, free of charge, to any person obtaining a copy",
    'THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR',
    'Licensed under the Apache License, Version 2.0 (the "License");',
    "you may not use this file except in compliance with the License.",
    "A fast, pure-Python reader and writer for finalfusion embeddings.",
    "pip install 'finalfusion-py[interop]'",
    'emb = finalfusion.load_gguf("model.gguf")  # the token table',
    "for i in range(10):\n    print(i)",
    "def f(x):\n\treturn x * 2",
    "https://example.com/path?query=1&b=2#frag",
    "e-mail: someone@example.org, phone: +1 (555) 123-4567",
    "It's 3:45pm on 2024-06-01; the price is $1,234.56 (about €1.100).",
    "I'm sure we'll see; they've said you'd agree.",
    "Version 0.3.36 was released on 12/31/2025 -- see CHANGELOG.md.",
    "   Indented   text   with   runs   of   spaces   ",
    "C++ and C# are languages; so is Rust (rustc 1.80).",
    "numbers 1 12 123 1234 12345 123456 1234567",
    "UPPER lower MiXeD CamelCase snake_case kebab-case",
    "Hello, y'all! How's it going?",
]
TEXTS = SPACES + SPECIAL + SCRIPTS + PROSE


def main(argv: list[str]) -> int:
    from llama_cpp import Llama, __version__  # type: ignore[import-not-found]

    out, files = Path(argv[0]), [Path(p) for p in argv[1:]]
    doc: dict[str, object] = {"llama_cpp_python": __version__, "texts": TEXTS, "ids": {}}
    ids: dict[str, list[list[int]]] = {}
    for path in files:
        llm = Llama(model_path=str(path), vocab_only=True, verbose=False)
        ids[path.name] = [llm.tokenize(t.encode("utf-8"), add_bos=False, special=False) for t in TEXTS]
        del llm
    doc["ids"] = ids
    out.write_text(json.dumps(doc, ensure_ascii=False, indent=None, separators=(",", ":")) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))


def toy_spm_tokens() -> tuple[list[str], list[float], list[int]]:
    """A small SentencePiece-BPE vocabulary in llama.cpp's ``llama`` form, Gemma 3's kinds of token in it.

    Control ``<pad>``, ``<eos>``, ``<bos>``, unknown ``<unk>``; user-defined
    ``<s>``, ``</s>`` (llama.cpp makes it control), runs of two to eight
    literal spaces, two tabs, ``[multimodal]``; the 256 byte tokens; letters,
    digits, punctuation and some merges, scored by rank. Tokens, scores, types.
    """
    control = ["<pad>", "<eos>", "<bos>"]
    user = ["<s>", "</s>", *(" " * k for k in range(2, 9)), "\t\t", "[multimodal]"]
    singles = [*"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789", *"<>/[]|_.,!?'-:;()=\"#$%&*+@\\^`{}~"]
    merges = ["▁", "▁▁", "th", "he", "▁t", "▁th", "▁the", "in", "er", "an", "on", "re", "▁a", "▁s", "▁w", "at", "en", "nd", "▁o", "or", "ing", "▁in"]
    merges += ["▁and", "▁of", "▁to", "is", "▁is", "es", "ed", "▁b", "▁c", "▁x", "▁y", "▁hi", "hi", "ll", "▁he", "llo", "▁hello", "ow", "ld", "▁wor", "▁world"]
    tokens = [*control, "<unk>", *user, *(f"<0x{b:02X}>" for b in range(256)), *merges, *singles]
    types = [3] * len(control) + [2] + [4] * len(user) + [6] * 256 + [1] * (len(merges) + len(singles))
    scores = [0.0] * (len(control) + 1 + len(user) + 256) + [-float(i) for i in range(len(merges) + len(singles))]
    return tokens, scores, types


def write_toy_spm(path: Path, add_space_prefix: bool) -> Path:
    """:func:`toy_spm_tokens` as a vocabulary-only ``llama`` GGUF file (gguf-py's GGUFWriter; a one-column table for ``load_gguf``)."""
    tokens, scores, types = toy_spm_tokens()
    writer = _writer(path, tokens, "llama")
    writer.add_token_scores(scores)
    writer.add_token_types(types)
    writer.add_bos_token_id(2)
    writer.add_eos_token_id(1)
    writer.add_unk_token_id(3)
    writer.add_pad_token_id(0)
    writer.add_add_space_prefix(add_space_prefix)
    return finish_gguf(writer, len(tokens), path)


def _writer(path: Path, tokens: list[str], model: str) -> Any:
    import gguf

    writer = gguf.GGUFWriter(str(path), "bert" if model == "bert" else "llama")
    writer.add_tokenizer_model(model)
    writer.add_token_list(tokens)
    return writer


def write_toy_bert(path: Path) -> Path:
    """A small ``bert`` (WPM) vocabulary in llama.cpp's converted form: Latin, Greek, Hangul syllables and jamo, Devanagari letters and vowel signs."""
    special = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    chars = [*"abcdefghijklmnopqrstuvwxyz0123456789.,!?'-:;()<>/[]|_=\"#$%&*+@^`{}~", *"αβγδεοσςλμ"]
    chars += [chr(c) for c in range(0x1100, 0x1113)] + [chr(c) for c in range(0x1161, 0x1176)] + [chr(c) for c in range(0x11A8, 0x11C3)]
    chars += [*"한국어안녕세계서울"]
    chars += [chr(c) for c in range(0x0915, 0x093A)] + [chr(c) for c in range(0x093E, 0x094E)] + ["\u0902", "\u0964"]
    words = ["the", "hello", "world", "and", "text", "spaces", "token", "line", "code", "ing", "er"]
    tokens = [*special, *(f"\u2581{c}" for c in chars), *chars, *(f"\u2581{w}" for w in words), "ing", "s"]
    tokens = list(dict.fromkeys(tokens))
    writer = _writer(path, tokens, "bert")
    writer.add_token_types([3, 2, 3, 3, 3] + [1] * (len(tokens) - 5))
    writer.add_unk_token_id(1)
    writer.add_bos_token_id(2)  # llama.cpp reads BERT's [CLS] as its BOS
    writer.add_sep_token_id(3)
    writer.add_pad_token_id(0)
    writer.add_mask_token_id(4)
    return finish_gguf(writer, len(tokens), path)


def _gpt2_bytes() -> list[str]:
    """GPT-2's byte-to-character mapping, in byte order."""
    keep = [*range(ord("!"), ord("~") + 1), *range(ord("\u00a1"), ord("\u00ac") + 1), *range(ord("\u00ae"), ord("\u00ff") + 1)]
    chars, extra = {}, 0
    for b in range(256):
        if b in keep:
            chars[b] = chr(b)
        else:
            chars[b] = chr(256 + extra)
            extra += 1
    return [chars[b] for b in range(256)]


def write_toy_gpt2(path: Path) -> Path:
    """A small byte-level ``gpt2`` vocabulary *without* ``tokenizer.ggml.pre`` (gpt-neox style): user-defined runs of spaces, a control token."""
    byte_chars = _gpt2_bytes()
    merges = ["\u0120 t", "h e", "\u0120t he", "i n", "e r", "\u0120 a", "o n", "\u0120 w", "o r", "\u0120w or", "l d", "\u0120wor ld", "l l", "e ll"]
    merges += ["h ell", "hell o", "\u0120 hello", "\u0120 s", "\u0120 =", "\u0120 <", "< /", "\u0120 \u0120", "1 2", "12 3"]
    joined = ["".join(m.split(" ")) for m in merges]
    tokens = ["<|endoftext|>", *(" " * k for k in range(2, 9)), *byte_chars, *dict.fromkeys(joined)]
    writer = _writer(path, tokens, "gpt2")
    writer.add_token_types([3] + [4] * 7 + [1] * (len(tokens) - 8))
    writer.add_token_merges(merges)
    writer.add_bos_token_id(0)
    writer.add_eos_token_id(0)
    return finish_gguf(writer, len(tokens), path)


#: The GGUF files built here, by name: ``write(path)`` writes each.
TOYS = {
    "toy-spm.gguf": lambda p: write_toy_spm(p, False),
    "toy-spm-prefix.gguf": lambda p: write_toy_spm(p, True),
    "toy-bert.gguf": write_toy_bert,
    "toy-gpt2-no-pre.gguf": write_toy_gpt2,
}
