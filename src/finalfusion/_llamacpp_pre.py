# ruff: noqa: E501, RUF001
"""llama.cpp's pre-tokenizers of ``gpt2`` (byte-level BPE) vocabularies: the split regexes of each ``tokenizer.ggml.pre`` value.

Generated from llama.cpp's ``src/llama-vocab.cpp`` (the copy vendored in llama-cpp-python 0.3.36):
``llm_tokenizer_bpe`` splits the text with each regex of a list in turn (every
match and every gap between matches a piece of its own: ``tokenizers``'
``Split`` with ``"isolated"`` behaviour, in a ``Sequence``), then runs BPE
on the GPT-2 byte-encoded pieces, with ``ignore_merges`` (a piece that is
a token is that token) for the values that set it. Where llama.cpp rewrote
a ``tokenizer.json`` regex for ``std::regex`` with lookaheads (Tekken, GPT-4o,
MiniMax-M2), the original regex, which llama.cpp quotes, is used: ``tokenizers``
runs it as the model's own library does; DeepSeek LLM's ``\\s+$`` becomes
``(?<!\\s)\\s+$`` (the same matches, without quadratic backtracking). ``(?i:...)`` rewritten as explicit
classes is kept as llama.cpp has it (the same language).

A leaf module: :mod:`finalfusion._tokenizers` adds every regex here to its
``KNOWN_REGEXES`` (only known regexes run on a word).
"""

from __future__ import annotations

from typing import Final

__all__ = ["GEMMA4_SPLIT", "IGNORE_MERGES", "LLAMA_CPP_REGEXES", "PRE_REGEXES", "UNSUPPORTED"]

#: llama.cpp's LLAMA_VOCAB_PRE_TYPE_LLAMA3, DBRX, SMAUG, CHATGLM4
_LLAMA3: Final[tuple[str, ...]] = (
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
)
#: llama.cpp's LLAMA_VOCAB_PRE_TYPE_JAIS2
_JAIS2: Final[tuple[str, ...]] = (
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s{512}(?!\\S)|\\s{256}(?!\\S)|\\s{128}(?!\\S)|\\s{64}(?!\\S)|\\s{32}(?!\\S)|\\s{16}(?!\\S)|\\s{8}(?!\\S)|\\s{4}(?!\\S)|\\s{1,2}(?!\\S)|\\s{1}",
)
#: llama.cpp's LLAMA_VOCAB_PRE_TYPE_DEEPSEEK_LLM
_DEEPSEEK_LLM: Final[tuple[str, ...]] = (
    "[\r\n]",
    "\\s?[A-Za-zµÀ-ÖØ-öø-ƺƼ-ƿǄ-ʓʕ-ʯͰ-ͳͶͷͻ-ͽͿΆΈ-ΊΌΎ-ΡΣ-ϵϷ-ҁҊ-ԯԱ-ՖႠ-ჅᎠ-Ᏽᏸ-ᏽᲐ-ᲺᲽ-Ჿᴀ-ᴫᵫ-ᵷᵹ-ᶚḀ-ἕἘ-Ἕἠ-ὅὈ-Ὅὐ-ὗὙὛὝὟ-ώᾀ-ᾴᾶ-ᾼιῂ-ῄῆ-ῌῐ-ΐῖ-Ίῠ-Ῥῲ-ῴῶ-ῼℂℇℊ-ℓℕℙ-ℝℤΩℨK-ℭℯ-ℴℹℼ-ℿⅅ-ⅉⅎↃↄⰀ-ⱻⱾ-ⳤⳫ-ⳮⳲⳳꙀ-ꙭꚀ-ꚛꜢ-ꝯꝱ-ꞇꞋ-ꞎꭰ-ꮿﬀ-ﬆﬓ-ﬗＡ-Ｚａ-ｚ𐐀-𐑏𐒰-𐓓𐓘-𐓻𐲀-𐲲𐳀-𐳲𑢠-𑣟𞤀-𞥃]+",
    "\\s?[!-/:-~！-／：-～‘-‟\u3000-。]+",
    # llama.cpp's "\\s+$", which backtracks quadratically on a long run of spaces before a character no earlier
    # regex isolates (an emoji, a digit): tried from every space of the run. Not starting inside a run, it matches the same.
    "(?<!\\s)\\s+$",
    "[一-龥ࠀ-一가-\ud7ff]+",
    "\\p{N}+",
)
#: llama.cpp's LLAMA_VOCAB_PRE_TYPE_DEEPSEEK3_LLM, HUNYUAN_DENSE, JOYAI_LLM, HY_V4
_DEEPSEEK3_LLM: Final[tuple[str, ...]] = (
    "\\p{N}{1,3}",
    "[一-龥\u3040-ゟ゠-ヿ]+",
    "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+",
)
#: llama.cpp's LLAMA_VOCAB_PRE_TYPE_SPARK2_5
_SPARK2_5: Final[tuple[str, ...]] = (
    "\\p{N}{1,3}",
    "[一-龥\u3040-ゟ゠-ヿ]+",
    "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+|[\r\n]|\\s+(?!\\S)|\\s+",
    "\\p{N}",
)
#: llama.cpp's LLAMA_VOCAB_PRE_TYPE_YOUTU
_YOUTU: Final[tuple[str, ...]] = (
    "[가-힣ㄱ-ㆎ]+|[！…“”‘’—：；，、-〿︰-﹏]+|[ㄅ-ㄯ]+|[一-龥\u3040-ゟ゠-ヿ]+",
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
)
#: llama.cpp's LLAMA_VOCAB_PRE_TYPE_DEEPSEEK_CODER
_DEEPSEEK_CODER: Final[tuple[str, ...]] = (
    "[\r\n]",
    "\\s?\\p{L}+",
    "\\s?\\p{P}+",
    "[一-龥ࠀ-一가-\ud7ff]+",
    "\\p{N}",
)
#: llama.cpp's LLAMA_VOCAB_PRE_TYPE_FALCON
_FALCON: Final[tuple[str, ...]] = (
    "[\\p{P}\\$\\+<=>\\^~\\|`]+",
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)",
    "[0-9][0-9][0-9]",
)
#: llama.cpp's LLAMA_VOCAB_PRE_TYPE_STARCODER, REFACT, COMMAND_R, SMOLLM, CODESHELL, EXAONE, MINERVA, MELLUM2
_STARCODER: Final[tuple[str, ...]] = (
    "\\p{N}",
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)",
)
#: llama.cpp's LLAMA_VOCAB_PRE_TYPE_GPT2, MPT, OLMO, JAIS, TRILLION, GRANITE_DOCLING
_GPT2: Final[tuple[str, ...]] = ("'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)",)
#: llama.cpp's LLAMA_VOCAB_PRE_TYPE_STABLELM2, QWEN2, HUNYUAN, SOLAR_OPEN, GROK_2
_STABLELM2: Final[tuple[str, ...]] = (
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
)
#: llama.cpp's LLAMA_VOCAB_PRE_TYPE_QWEN35
_QWEN35: Final[tuple[str, ...]] = (
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
)
#: llama.cpp's LLAMA_VOCAB_PRE_TYPE_PORO, BLOOM, GPT3_FINNISH
_PORO: Final[tuple[str, ...]] = (" ?[^(\\s|.,!?…。，、।۔،)]+",)
#: llama.cpp's LLAMA_VOCAB_PRE_TYPE_VIKING
_VIKING: Final[tuple[str, ...]] = (
    " ?[^(\\s|.,!?…。，、।۔،)]+",
    "\\p{N}",
)
#: llama.cpp's LLAMA_VOCAB_PRE_TYPE_TEKKEN
_TEKKEN: Final[tuple[str, ...]] = (
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
)
#: llama.cpp's LLAMA_VOCAB_PRE_TYPE_CHAMELEON
_CHAMELEON: Final[tuple[str, ...]] = (
    "<sentinel:[0-9]+>",
    "(IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z",
    "([\\t\\n]|    |  )",
    "\\p{N}",
    "[\\p{P}!-/:-@\\[-`{-~]",
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)",
)
#: llama.cpp's LLAMA_VOCAB_PRE_TYPE_GPT4O, MINIMAX_M2
_GPT4O: Final[tuple[str, ...]] = (
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
)
#: llama.cpp's LLAMA_VOCAB_PRE_TYPE_GRANITE_EMB_MULTI
_GRANITE_EMB_MULTI: Final[tuple[str, ...]] = (
    "[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}\\p{M}])([^a-z]))*((?=[\\p{L}\\p{M}])([^A-Z]))+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}\\p{M}])([^a-z]))+((?=[\\p{L}\\p{M}])([^A-Z]))*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
)
#: llama.cpp's LLAMA_VOCAB_PRE_TYPE_BAILINGMOE
_BAILINGMOE: Final[tuple[str, ...]] = (
    "'(?:[sSdDmMtT]|[lL][lL]|[vV][eE]|[rR][eE])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]|\\s+(?!\\S)|\\s+",
)
#: llama.cpp's LLAMA_VOCAB_PRE_TYPE_SEED_CODER
_SEED_CODER: Final[tuple[str, ...]] = (
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1}| ?[^\\s\\p{L}\\p{N}\\r\\n]+|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
)
#: llama.cpp's LLAMA_VOCAB_PRE_TYPE_UFAKZEKA
_UFAKZEKA: Final[tuple[str, ...]] = ("[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",)
#: llama.cpp's LLAMA_VOCAB_PRE_TYPE_LAGUNA
_LAGUNA: Final[tuple[str, ...]] = (
    "[^\\n]+|[\\n]+",
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
)
#: llama.cpp's LLAMA_VOCAB_PRE_TYPE_EXAONE_MOE
_EXAONE_MOE: Final[tuple[str, ...]] = (
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?(?:\\p{L}\\p{M}*(?: \\p{L}\\p{M}*)*)+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]?|\\s*[\\r\\n]|\\s+(?!\\S)|\\s+",
)
#: llama.cpp's LLAMA_VOCAB_PRE_TYPE_MINICPM5
_MINICPM5: Final[tuple[str, ...]] = (
    "\\p{N}{1,3}",
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}+| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
)
#: llama.cpp's LLAMA_VOCAB_PRE_TYPE_DEFAULT
_DEFAULT: Final[tuple[str, ...]] = (
    "[\\p{P}\\$\\+<=>\\^~\\|]+",
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)",
    "\\p{N}+",
    "[0-9][0-9][0-9]",
)

#: ``tokenizer.ggml.pre`` -> the regexes llama.cpp splits with, in order (llama.cpp reads a missing value as ``"default"``).
#: Values with the same regexes tokenize alike; the first of them is what ``write_gguf`` writes.
PRE_REGEXES: Final[dict[str, tuple[str, ...]]] = {
    "gpt-2": _GPT2,
    "default": _DEFAULT,
    "minicpm5": _MINICPM5,
    "llama3": _LLAMA3,
    "llama-v3": _LLAMA3,
    "llama-bpe": _LLAMA3,
    "falcon3": _LLAMA3,
    "falcon-h1": _LLAMA3,
    "pixtral": _LLAMA3,
    "midm-2.0": _LLAMA3,
    "lfm2": _LLAMA3,
    "jina-v5-nano": _LLAMA3,
    "deepseek-llm": _DEEPSEEK_LLM,
    "deepseek-coder": _DEEPSEEK_CODER,
    "deepseek-v3": _DEEPSEEK3_LLM,
    "spark2_5": _SPARK2_5,
    "youtu": _YOUTU,
    "falcon": _FALCON,
    "mpt": _GPT2,
    "starcoder": _STARCODER,
    "phi-2": _GPT2,
    "jina-es": _GPT2,
    "jina-de": _GPT2,
    "gigachat": _GPT2,
    "jina-v2-es": _GPT2,
    "jina-v2-de": _GPT2,
    "a.x-4.0": _GPT2,
    "mellum": _GPT2,
    "modern-bert": _GPT2,
    "jais-2": _JAIS2,
    "jina-v1-en": _GPT2,
    "jina-v2-code": _GPT2,
    "roberta-bpe": _GPT2,
    "refact": _STARCODER,
    "command-r": _STARCODER,
    "qwen2": _STABLELM2,
    "deepseek-r1-qwen": _STABLELM2,
    "kormo": _STABLELM2,
    "f2llmv2": _STABLELM2,
    "qwen35": _QWEN35,
    "stablelm2": _STABLELM2,
    "olmo": _GPT2,
    "dbrx": _LLAMA3,
    "smaug-bpe": _LLAMA3,
    "poro-chat": _PORO,
    "chatglm-bpe": _LLAMA3,
    "glm4": _LLAMA3,
    "glm5": _LLAMA3,
    "viking": _VIKING,
    "jais": _GPT2,
    "tekken": _TEKKEN,
    "smollm": _STARCODER,
    "codeshell": _STARCODER,
    "bloom": _PORO,
    "gpt3-finnish": _PORO,
    "exaone": _STARCODER,
    "exaone4": _GPT2,
    "exaone-moe": _EXAONE_MOE,
    "chameleon": _CHAMELEON,
    "minerva-7b": _STARCODER,
    "megrez": _STABLELM2,
    "gpt-4o": _GPT4O,
    "llama4": _GPT4O,
    "kanana2": _GPT4O,
    "talkie": _GPT4O,
    "granite-embed-multi-97m": _GRANITE_EMB_MULTI,
    "trillion": _GPT2,
    "granite-docling": _GPT2,
    "bailingmoe": _BAILINGMOE,
    "bailingmoe2": _BAILINGMOE,
    "llada-moe": _BAILINGMOE,
    "seed-coder": _SEED_CODER,
    "hunyuan": _STABLELM2,
    "hunyuan-dense": _DEEPSEEK3_LLM,
    "hy_v4": _DEEPSEEK3_LLM,
    "joyai-llm": _DEEPSEEK3_LLM,
    "ufakzeka": _UFAKZEKA,
    "grok-2": _STABLELM2,
    "laguna": _LAGUNA,
    "minimax-m2": _GPT4O,
    "solar-open": _STABLELM2,
    "mellum2": _STARCODER,
}
#: The ``tokenizer.ggml.pre`` values for which llama.cpp sets ``ignore_merges``.
IGNORE_MERGES: Final[frozenset[str]] = frozenset(
    {
        "minicpm5",
        "llama3",
        "llama-v3",
        "llama-bpe",
        "falcon3",
        "falcon-h1",
        "pixtral",
        "midm-2.0",
        "lfm2",
        "jina-v5-nano",
        "youtu",
        "glm4",
        "glm5",
        "tekken",
        "granite-embed-multi-97m",
    }
)
#: ``tokenizer.ggml.pre`` values llama.cpp knows that ``tokenizers`` cannot reproduce, and why.
UNSUPPORTED: Final[dict[str, str]] = {
    "superbpe": "its digit-grouping regex (?=(\\d{3})+(?!\\d)) takes time quadratic in a number's length (minutes for one long word)",
    "tiny_aya": "its digit-grouping regex \\d{1,3}(?=(?:\\d{3})*\\b) takes time quadratic in a number's length (minutes for one long word)",
    "cohere2moe": "its digit-grouping regex \\d{1,3}(?=(?:\\d{3})*\\b) takes time quadratic in a number's length (minutes for one long word)",
    "sarvam-moe": "SentencePiece-style BPE on raw UTF-8",
    "whitespace": "BPE on raw UTF-8 split at whitespace",
    "kimi-k2": "llama.cpp splits with a hand-written handler (unicode.cpp), not a regex",
    "afmoe": "llama.cpp groups digits with a hand-written handler (\\p{AFMoE_digits})",
}
#: llama.cpp's split of Gemma 4 vocabularies (``tokenizer.ggml.model`` ``gemma4``, or ``tokenizer.ggml.pre`` ``gemma4``): lines and runs of newlines.
GEMMA4_SPLIT: Final = "[^\\n]+|[\\n]+"
#: Every regex of :data:`PRE_REGEXES`, and :data:`GEMMA4_SPLIT`.
LLAMA_CPP_REGEXES: Final[frozenset[str]] = frozenset({GEMMA4_SPLIT, *(r for regexes in PRE_REGEXES.values() for r in regexes)})
