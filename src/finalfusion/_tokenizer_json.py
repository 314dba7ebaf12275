"""What a ``tokenizer.json`` may say before the ``tokenizers`` library sees it: the checks of an untrusted document.

``tokenizers`` runs any regex a document names (one backtracking pattern ran
for minutes on one word), panics on some malformed models and aborts the
process on others (a BPE merge cut inside a character by the continuing
prefix). :func:`checked_tokenizer_json` parses a document and refuses what
would do either, with a :class:`~finalfusion.errors.FormatError` saying why;
:mod:`finalfusion._tokenizers` hands the library only checked documents
(docs/reliability.md, "Trust model: Tokenizers").
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable
from typing import Any, Final

from finalfusion import limits
from finalfusion._llamacpp_pre import LLAMA_CPP_REGEXES
from finalfusion.errors import FormatError

__all__ = [
    "FASTTEXT_SPACE_REGEX",
    "GPT2_REGEX",
    "KNOWN_REGEXES",
    "LLAMA3_REGEX",
    "check_added_token_ids",
    "check_known_regex",
    "check_normalized_added_tokens",
    "checked_tokenizer_json",
]


#: GPT-2's pre-tokenizer regex (also the built-in one of ``ByteLevel``'s ``use_regex``), as tokenizer.json files spell it in a ``Split``.
GPT2_REGEX: Final = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"
#: The pre-tokenizer regex of Llama 3 and OpenAI's cl100k (llama.cpp's ``llama-bpe``).
LLAMA3_REGEX: Final = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"

#: The ``Regex`` patterns of real tokenizer.json files (pre-tokenizer ``Split``, normaliser ``Replace``) that are accepted.
#: Each runs in linear time: on words of 256 KiB (:data:`finalfusion.limits.MAX_TOKENIZE_BYTES`) built to make
#: them backtrack, the slowest took 0.75 s, the time of its 262,144 pieces (docs/reliability.md, "Trust model:
#: Tokenizers"). Any other pattern is refused unless the
#: user trusts it (:data:`finalfusion.limits.TRUSTED_TOKENIZER_REGEXES`): one backtracking pattern (``\w*\d``) ran
#: for minutes on one 256 KiB word.
#: fastText's word separators (ASCII space, tab, newline, vertical tab, form feed, carriage return) as the ``Split`` of the word
#: tokenizers ``write_model2vec`` writes (``WhitespaceSplit`` also splits at U+00A0, U+2028 and the other Unicode spaces).
FASTTEXT_SPACE_REGEX: Final = r"[\t\n\x0B\f\r ]+"
KNOWN_REGEXES: Final[frozenset[str]] = frozenset(
    {
        GPT2_REGEX,
        LLAMA3_REGEX,
        # Qwen2 (digits one by one)
        r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
        # Qwen3.5 (marks with letters)
        r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
        # OpenAI's o200k
        r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
        r"|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
        r"|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+",
        # GLM-4
        r" ?[^\s\p{L}\p{N}]+|\p{N}{1,3}|[^\r\n\p{L}\p{N}]?\p{L}+",
        # digit and whitespace splits; the normaliser of Hugging Face's SentencePiece conversions
        r"\p{N}",
        r"\p{N}{1,3}",
        r"\d{1,3}",
        r"\s+",
        r" {2,}",
        r".",
        FASTTEXT_SPACE_REGEX,
        # llama.cpp's pre-tokenizers of gpt2 GGUF vocabularies (finalfusion._llamacpp_pre), each checked like the ones above
        *LLAMA_CPP_REGEXES,
    }
)


def check_known_regex(pattern: object, what: str, where: str) -> None:
    """Raise :class:`FormatError` (``"<what> is not one of the known tokenizer regexes"``) unless ``pattern`` is allowed to run."""
    if not (isinstance(pattern, str) and (pattern in KNOWN_REGEXES or pattern in limits.TRUSTED_TOKENIZER_REGEXES)):
        raise FormatError(
            f"{what} is not one of the known tokenizer regexes",
            chunk=where,
            expected="a pattern of finalfusion._tokenizers.KNOWN_REGEXES or finalfusion.limits.TRUSTED_TOKENIZER_REGEXES "
            "(an arbitrary regex can backtrack for minutes on one word)",
            found=repr(pattern)[:200],
        )


def _check_charsmap(node: dict[str, Any]) -> None:
    """Refuse a ``Precompiled`` charsmap whose declared trie is not inside its data (the library reserves the declared size)."""
    where = "tokenizer.json normalizer Precompiled"
    blob = node.get("precompiled_charsmap")
    if blob is None:
        return
    if not isinstance(blob, str):
        raise FormatError("the precompiled charsmap is not a base64 string", chunk=where, expected="a base64 string", found=type(blob).__name__)
    try:
        data = base64.b64decode(blob.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError) as exc:
        raise FormatError("the precompiled charsmap is not valid base64", chunk=where, expected="base64", found=str(exc)[:100]) from None
    if not data:
        return
    trie = int.from_bytes(data[:4], "little") if len(data) >= 4 else -1
    if trie < 0 or trie > len(data) - 4 or trie % 4:
        raise FormatError(
            "the precompiled charsmap declares a trie larger than its data",
            chunk=where,
            expected=f"a u32 trie size, a multiple of 4, at most {max(len(data) - 4, 0)} (the bytes that follow it)",
            found=trie if trie >= 0 else f"{len(data)} bytes",
        )


def _check_wordpiece_chars(node: dict[str, Any]) -> None:
    """Refuse a WordPiece ``max_input_chars_per_word`` past :data:`finalfusion.limits.MAX_WORDPIECE_INPUT_CHARS` (work per word)."""
    chars = node.get("max_input_chars_per_word")
    if chars is None:
        return
    cap = limits.MAX_WORDPIECE_INPUT_CHARS
    if not isinstance(chars, int) or isinstance(chars, bool) or not 0 <= chars <= cap:
        raise FormatError(
            "WordPiece max_input_chars_per_word is out of bounds (tokenizers splits a word of up to that many characters with a "
            "search that grows much faster than the word: hours for one long word)",
            chunk="tokenizer.json",
            expected=f"an integer 0..{cap} (finalfusion.limits.MAX_WORDPIECE_INPUT_CHARS; BERT-style models declare 100)",
            found=repr(chars)[:40],
        )


def _check_bpe_prefix_cuts(model: Any) -> None:
    """Refuse a BPE merge whose second token ``continuing_subword_prefix``'s length in bytes cuts inside a character.

    ``tokenizers`` (0.23, ``BpeBuilder::build``) drops the prefix's length
    in bytes from the start of every merge's second token, whatever that
    token starts with, and declares the rest UTF-8 unchecked. Cut inside a
    character, the joined token is not text; it is never in the vocabulary,
    and the error that names it cannot become a Python string: pyo3 panics
    while raising it, which cannot unwind, and the process aborts. Only a
    model whose ``type`` is ``"BPE"`` is built so (without a ``type`` the
    library tries each model and drops the error unread). Every document
    refused here aborts the library or fails to load in it; no other
    document aborts it (tests/test_tokenizer_aborts.py; 15,300 drawn files
    in docs/reliability.md).
    """
    if not isinstance(model, dict) or model.get("type") != "BPE":
        return
    prefix, merges = model.get("continuing_subword_prefix"), model.get("merges")
    if not isinstance(prefix, str) or not prefix or not isinstance(merges, list):
        return
    cut = len(prefix.encode("utf-8", "surrogatepass"))
    for i, merge in enumerate(merges):
        if isinstance(merge, str):  # the legacy "a b" form; "#version" lines are skipped by the library
            parts = merge.split(" ")
            second = parts[1] if len(parts) == 2 and not merge.startswith("#version") else None
        else:
            second = merge[1] if isinstance(merge, list) and len(merge) == 2 else None
        raw = second.encode("utf-8", "surrogatepass") if isinstance(second, str) else b""
        if cut < len(raw) and 0x80 <= raw[cut] < 0xC0:
            raise FormatError(
                "a BPE merge's second token is cut inside a character by the length of continuing_subword_prefix "
                "(tokenizers drops that many bytes from it and aborts the process when the rest is not text)",
                chunk="tokenizer.json model",
                expected=f"merges whose second token does not hold a character across byte {cut} (the prefix's length in bytes)",
                found=f"merge {i}: {merge!r}, continuing_subword_prefix {prefix!r}"[:200],
            )


def checked_tokenizer_json(data: bytes) -> dict[str, Any]:
    """The parsed ``tokenizer.json`` ``data`` with what an embedding must never run removed or refused.

    ``padding`` and ``truncation`` are removed (an embedding never pads or
    truncates: fixed padding of 50M ids aborted the process, pad rows were
    summed into vectors, truncation dropped pieces); every ``{"Regex": ...}``
    pattern anywhere (pre-tokenizers, normalisers, decoders) must be one of
    :data:`KNOWN_REGEXES` or :data:`finalfusion.limits.TRUSTED_TOKENIZER_REGEXES`;
    every ``Precompiled`` charsmap must hold the trie it declares; a
    WordPiece ``max_input_chars_per_word`` must be at most
    :data:`finalfusion.limits.MAX_WORDPIECE_INPUT_CHARS`; no merge of a BPE
    model may have a second token that the length of
    ``continuing_subword_prefix`` cuts inside a character (``tokenizers``
    aborts the process on such a file: :func:`_check_bpe_prefix_cuts`).

    Raises
    ------
    FormatError
        If the data is not a JSON object, or holds an unknown regex, a malformed charsmap
        or a BPE merge cut inside a character.

    Examples
    --------
    >>> checked_tokenizer_json(b'{"padding": {"strategy": "BatchLongest"}, "model": {}}')
    {'padding': None, 'model': {}, 'truncation': None}
    >>> checked_tokenizer_json(b'{"pre_tokenizer": {"type": "Split", "pattern": {"Regex": "\\\\\\\\w*\\\\\\\\d"}}}')  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    finalfusion.errors.FormatError: tokenizer.json: a regex pattern is not one of the known tokenizer regexes: ...
    """
    where = "tokenizer.json"
    try:
        doc = json.loads(data)  # bytes: UTF-8, or UTF-16/32 and a BOM detected as RFC 8259 readers do (``write_gguf`` reads it so too)
    except (ValueError, RecursionError) as exc:
        raise FormatError("not a valid tokenizer.json", chunk=where, expected="a JSON object", found=str(exc)[:100]) from None
    if not isinstance(doc, dict):
        raise FormatError("not a valid tokenizer.json", chunk=where, expected="a JSON object", found=type(doc).__name__)
    doc["padding"] = None
    doc["truncation"] = None
    stack: list[Any] = [doc]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            spec = node.get("pattern")  # Split and Replace: {"String": ...} or {"Regex": ...}
            pattern = spec.get("Regex") if isinstance(spec, dict) else None
            if pattern is not None:
                check_known_regex(pattern, "a regex pattern", where)
            if node.get("type") == "Precompiled":
                _check_charsmap(node)
            _check_wordpiece_chars(node)
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    check_added_token_ids(doc, where)
    _check_bpe_prefix_cuts(doc.get("model"))
    return doc


def check_added_token_ids(doc: dict[str, Any], where: str) -> None:
    """Refuse an added token that takes the id the model's vocabulary gives to another token.

    ``tokenizers`` answers such a file per instance (two fresh instances of
    the same file gave different ids for one word), so no vector built from
    it could be trusted. An added token that repeats a vocabulary entry
    (same id, same string) is what real files hold and is accepted.

    Raises
    ------
    FormatError
        Naming the id and both tokens.

    Examples
    --------
    >>> check_added_token_ids({"model": {"vocab": {"a": 0}}, "added_tokens": [{"id": 0, "content": "a"}]}, "tokenizer.json")
    >>> check_added_token_ids({"model": {"vocab": {"a": 0}}, "added_tokens": [{"id": 0, "content": "<s>"}]}, "tokenizer.json")
    Traceback (most recent call last):
    ...
    finalfusion.errors.FormatError: tokenizer.json: an added token takes the id of another vocabulary token: expected ...
    """
    model = doc.get("model")
    vocab = model.get("vocab") if isinstance(model, dict) else None
    added = doc.get("added_tokens")
    if not isinstance(added, list) or not added:
        return
    if isinstance(vocab, dict):
        by_id = {i: t for t, i in vocab.items() if isinstance(i, int)}
    elif isinstance(vocab, list):  # Unigram: [[piece, score], ...], the id is the position
        by_id = {i: e[0] for i, e in enumerate(vocab) if isinstance(e, list) and e}
    else:
        return
    for entry in added:
        i = entry.get("id") if isinstance(entry, dict) else None
        if isinstance(i, int) and i in by_id and by_id[i] != entry.get("content"):
            raise FormatError(
                "an added token takes the id of another vocabulary token",
                chunk=where,
                expected="added tokens with ids of their own, or repeating the vocabulary's token (tokenizers answers such a file differently per instance)",
                found=f"id {i}: added {entry.get('content')!r}, vocabulary {by_id[i]!r}"[:200],
            )


def check_normalized_added_tokens(doc: dict[str, Any], normalize: Callable[[str], str], token_id: Callable[[str], int | None], where: str) -> None:
    """Refuse added tokens with ``"normalized": true`` that the normaliser makes one string while they keep ids of their own.

    ``tokenizers`` matches such tokens in the normalised text, and for one
    string with several ids it answers per instance: two instances of one
    file gave a text the id of ``<s>`` and then of ``[MASK]`` (both
    ``▁▁`` after a ``Replace`` normaliser), so no vector built from it could
    be trusted. Tokens that repeat one content (one id) are accepted.
    ``normalize`` is the file's normaliser (``str`` unchanged without
    one), ``token_id`` the id the library gives a token's content.

    Raises
    ------
    FormatError
        Naming the normalised string and the tokens and ids that share it.

    Examples
    --------
    >>> doc = {"added_tokens": [{"id": 5, "content": "[PAD]", "normalized": True}, {"id": 6, "content": "[pad]", "normalized": True}]}
    >>> check_normalized_added_tokens(doc, str, {"[PAD]": 5, "[pad]": 6}.get, "tokenizer.json")
    >>> check_normalized_added_tokens(doc, str.lower, {"[PAD]": 5, "[pad]": 6}.get, "tokenizer.json")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    finalfusion.errors.FormatError: tokenizer.json: added tokens are one string after normalisation but have different ids: ...
    """
    added = doc.get("added_tokens")
    if not isinstance(added, list):
        return
    seen: dict[str, tuple[str, int]] = {}
    for entry in added:
        if not isinstance(entry, dict) or entry.get("normalized") is not True or not isinstance(entry.get("content"), str):
            continue
        content = entry["content"]
        i = token_id(content)
        if i is None:
            continue
        key = normalize(content)
        first = seen.setdefault(key, (content, i))
        if first[1] != i:
            raise FormatError(
                "added tokens are one string after normalisation but have different ids",
                chunk=where,
                expected="normalised added tokens with strings of their own (tokenizers picks one of the ids per instance)",
                found=f"{first[0]!r} (id {first[1]}) and {content!r} (id {i}) both normalise to {key!r}"[:200],
            )
