"""Mistral's Tekken tokenizer (``tekken.json``): its tokens and a ``tokenizers`` BPE that gives Tekkenizer's ids.

``tekken.json`` (mistral-common's ``Tekkenizer``, a tiktoken encoding)::

    {"config": {"pattern": <split regex>,            tiktoken's pat_str
                "num_vocab_tokens": n,                entries of "vocab"
                "default_vocab_size": V,              ids the model has: specials + ranked tokens
                "default_num_special_tokens": S,      ids 0 .. S-1
                "version": "v3"},
     "vocab": [{"rank": r, "token_bytes": <base64>, "token_str": ...}, ...],   r = position
     "special_tokens": [{"rank": i, "token_str": "<s>", "is_control": true}, ...],   optional up to v7
     "image": {...}, "audio": {...}}                  not read

Tekkenizer keeps the first ``V - S`` ranked tokens; the token of rank ``r``
has id ``S + r``; ids ``0 .. S-1`` are the special tokens (the file's, else
Tekkenizer's 20 defaults, then ``<SPECIAL_i>`` fillers). Text is split with
the pattern and each piece is byte-pair merged by rank (a piece that is a
token is that token); special tokens are never read from text.

The same tokenizer in ``tokenizers``: a BPE model over the GPT-2 byte
spelling of the tokens (:func:`byte_char`), one merge per token derived as
Hugging Face's tiktoken converter does (the two parts BPE reaches when it
merges the token's bytes with the lower-ranked tokens only), ranked by the
token's rank, ``ignore_merges`` (tiktoken's whole-piece rule), the file's
pattern as a ``Split`` that isolates matches, then ``ByteLevel`` without its
own regex. The pattern must be one of
:data:`finalfusion._tokenizers.KNOWN_REGEXES` (Tekken's is) or
:data:`finalfusion.limits.TRUSTED_TOKENIZER_REGEXES`. A token that BPE
cannot build from two lower-ranked tokens makes the file a
:class:`~finalfusion.errors.FormatError`: tiktoken's and the converted
tokenizer's ids could differ on it.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from dataclasses import dataclass
from typing import Any, Final

from finalfusion import limits
from finalfusion._tokenizers import check_known_regex
from finalfusion.compat._bpe_json import bpe_document, split_isolated
from finalfusion.errors import FormatError

__all__ = ["DEFAULT_SPECIAL_TOKENS", "TekkenModel", "byte_char", "is_tekken", "read_tekken", "tekken_merges"]

_WHERE: Final = "tekken.json"

#: Tekkenizer's special tokens (ids 0-19) of files without ``special_tokens`` (versions up to v7), as mistral-common names them.
DEFAULT_SPECIAL_TOKENS: Final = (
    "<unk>",
    "<s>",
    "</s>",
    "[INST]",
    "[/INST]",
    "[AVAILABLE_TOOLS]",
    "[/AVAILABLE_TOOLS]",
    "[TOOL_RESULTS]",
    "[/TOOL_RESULTS]",
    "[TOOL_CALLS]",
    "[IMG]",
    "<pad>",
    "[IMG_BREAK]",
    "[IMG_END]",
    "[PREFIX]",
    "[MIDDLE]",
    "[SUFFIX]",
    "[SYSTEM_PROMPT]",
    "[/SYSTEM_PROMPT]",
    "[TOOL_CONTENT]",
)
#: The name Tekkenizer gives the special ids the file does not name.
_FILLER: Final = "<SPECIAL_{}>"
#: Newest version whose files may leave out ``special_tokens`` (Tekkenizer refuses newer ones without them).
_LAST_DEFAULT_SPECIALS_VERSION: Final = 7


def _byte_chars() -> tuple[str, ...]:
    printable = [*range(0x21, 0x7F), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
    chars = {b: chr(b) for b in printable}
    extra = 0
    for b in range(256):
        if b not in chars:
            chars[b] = chr(256 + extra)
            extra += 1
    return tuple(chars[b] for b in range(256))


#: GPT-2's spelling of each byte (``bytes_to_unicode``): printable Latin-1 bytes as themselves, the others from U+0100 on.
_BYTE_CHARS: Final = _byte_chars()


def byte_char(data: bytes) -> str:
    """The GPT-2 byte-level spelling of ``data`` (quirk: ``tokenizers``' ``ByteLevel`` alphabet, space is ``Ġ``).

    Examples
    --------
    >>> byte_char(b" house"), byte_char(b"\\n"), byte_char("é".encode())
    ('Ġhouse', 'Ċ', 'Ã©')
    """
    return "".join([_BYTE_CHARS[b] for b in data])


@dataclass(frozen=True)
class TekkenModel:
    """What a ``tekken.json`` holds for an embedding table: the token of every id and the tokenizer.

    Attributes
    ----------
    tokens
        The special tokens (ids ``0 .. num_special - 1``), then the byte-level
        spelling (:func:`byte_char`) of each kept ranked token; may repeat a
        string (a special token spelled like a ranked token).
    tokenizer_json
        A ``tokenizer.json`` (UTF-8) whose ids are Tekkenizer's.
    num_special
        Ids before the first ranked token.
    version
        ``config.version``.
    """

    tokens: list[str]
    tokenizer_json: bytes
    num_special: int
    version: str


def is_tekken(head: bytes, name: str = "") -> bool:
    """Whether a JSON file is a Tekken tokenizer: named ``*tekken*.json`` (mistral-common's rule), or ranked tokens in its first bytes.

    Examples
    --------
    >>> is_tekken(b"{}", "tekken.json"), is_tekken(b'{"config": {}, "vocab": [{"rank": 0, "token_bytes": "AA=="'), is_tekken(b'{"model": {}}')
    (True, True, False)
    """
    if "tekken" in name and name.endswith(".json"):
        return True
    head = head[: 1 << 16]
    return b'"token_bytes"' in head and b'"added_tokens"' not in head and b'"model"' not in head[: 1 << 12]


def _int(value: Any, what: str, where: str, low: int = 0) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < low:
        raise FormatError(f"{what} is not an integer of at least {low}", chunk=where, expected=f"an integer >= {low}", found=repr(value)[:60])
    return value


def _config(doc: dict[str, Any], name: str) -> tuple[str, int, int, str]:
    where = f"{name} config"
    config = doc.get("config")
    if not isinstance(config, dict):
        raise FormatError("the file has no config object", chunk=name, expected='{"config": {...}, "vocab": [...]}', found=type(config).__name__)
    pattern = config.get("pattern")
    if not isinstance(pattern, str):
        raise FormatError("config.pattern is not a string", chunk=where, expected="the split regex (a string)", found=repr(pattern)[:60])
    check_known_regex(pattern, "config.pattern", where)
    version = config.get("version")
    if not isinstance(version, str) or not re.fullmatch(r"v[0-9]{1,4}", version):
        raise FormatError("config.version is not a Tekken version", chunk=where, expected='"v1", "v3", "v7", ...', found=repr(version)[:40])
    vocab_size = _int(config.get("default_vocab_size"), "config.default_vocab_size", where, 1)
    num_special = _int(config.get("default_num_special_tokens"), "config.default_num_special_tokens", where)
    return pattern, vocab_size, num_special, version


def _special_tokens(doc: dict[str, Any], num_special: int, version: str, name: str) -> list[str]:
    where = f"{name} special_tokens"
    entries = doc.get("special_tokens")
    if entries is None:
        if int(version[1:]) > _LAST_DEFAULT_SPECIALS_VERSION:
            raise FormatError(
                f"a {version} file must list its special tokens (Tekkenizer refuses it too)",
                chunk=name,
                expected="special_tokens (files after v7)",
                found="no special_tokens",
            )
        names = list(DEFAULT_SPECIAL_TOKENS)
    elif not isinstance(entries, list):
        raise FormatError("special_tokens is not a list", chunk=where, expected="a list", found=type(entries).__name__)
    else:
        names = []
        for i, entry in enumerate(entries):
            rank = entry.get("rank") if isinstance(entry, dict) else None
            text = entry.get("token_str") if isinstance(entry, dict) else None
            control = entry.get("is_control", False) if isinstance(entry, dict) else None
            if rank != i or isinstance(rank, bool) or not isinstance(text, str) or not isinstance(control, bool):
                raise FormatError(
                    f"special token {i} is not its rank, string and control flag",
                    chunk=f"{where}[{i}]",
                    expected=f'{{"rank": {i}, "token_str": str, "is_control": bool}}',
                    found=repr(entry)[:100],
                )
            names.append(text)
    if len(names) > num_special:
        raise FormatError("more special tokens than config.default_num_special_tokens", chunk=where, expected=f"at most {num_special}", found=len(names))
    if num_special - len(names) > limits.MAX_TOKENIZER_ID_HOLES:
        raise FormatError(
            "config.default_num_special_tokens leaves too many ids without a special token (each becomes a <SPECIAL_i> filler)",
            chunk=where,
            expected=f"at most finalfusion.limits.MAX_TOKENIZER_ID_HOLES = {limits.MAX_TOKENIZER_ID_HOLES} fillers",
            found=f"{num_special} special ids, {len(names)} named",
        )
    seen: dict[str, int] = {}
    for i, special in enumerate(names):
        if special in seen:
            raise FormatError(
                f"special token {i} repeats special token {seen[special]}", chunk=f"{where}[{i}]", expected="unique special tokens", found=special[:60]
            )
        seen[special] = i
    names += [_FILLER.format(i) for i in range(len(names), num_special)]
    if len(set(names)) != num_special:
        raise FormatError(
            "a special token is spelled like the filler of another id",
            chunk=where,
            expected="unique special tokens",
            found=f"{len(set(names))} distinct of {num_special}",
        )
    return names


def _ranked_tokens(doc: dict[str, Any], n: int, name: str) -> list[bytes]:
    """The bytes of the first ``n`` ranked tokens, every field checked as Tekkenizer needs it."""
    where = f"{name} vocab"
    vocab = doc.get("vocab")
    if not isinstance(vocab, list):
        raise FormatError("the file has no vocab list", chunk=name, expected='"vocab": [{"rank", "token_bytes", "token_str"}, ...]', found=type(vocab).__name__)
    config = doc["config"]
    declared = config.get("num_vocab_tokens")
    if declared is not None and _int(declared, "config.num_vocab_tokens", f"{name} config") != len(vocab):
        raise FormatError("config.num_vocab_tokens is not the number of vocab entries", chunk=where, expected=f"{declared} entries", found=len(vocab))
    if n > len(vocab):
        raise FormatError(
            "config.default_vocab_size needs more ranked tokens than the file has",
            chunk=where,
            expected=f"at least default_vocab_size - default_num_special_tokens = {n} entries",
            found=len(vocab),
        )
    if n < 256:
        raise FormatError("the vocabulary does not hold every byte", chunk=where, expected="at least 256 ranked tokens (one per byte)", found=n)
    out: list[bytes] = []
    total = 0
    seen: dict[bytes, int] = {}
    longest, budget = limits.MAX_TEKKEN_TOKEN_BYTES, limits.MAX_TEKKEN_VOCAB_BYTES
    for i in range(n):
        entry = vocab[i]
        rank = entry.get("rank") if isinstance(entry, dict) else None
        text = entry.get("token_bytes") if isinstance(entry, dict) else None
        if rank != i or isinstance(rank, bool) or not isinstance(text, str):
            raise FormatError(
                f"entry {i} is not the token of rank {i}", chunk=f"{where}[{i}]", expected=f'{{"rank": {i}, "token_bytes": base64}}', found=repr(entry)[:100]
            )
        try:
            token = base64.b64decode(text, validate=True)
        except (binascii.Error, ValueError) as exc:
            raise FormatError(f"token {i} is not valid base64", chunk=f"{where}[{i}].token_bytes", expected="base64", found=f"{text[:40]!r}: {exc}") from None
        if (i < 256 and token != bytes([i])) or (i >= 256 and len(token) < 2):
            raise FormatError(
                f"token {i} is not {'byte ' + str(i) if i < 256 else 'a merge of at least two bytes'}",
                chunk=f"{where}[{i}]",
                expected=f"the byte {i:#04x}" if i < 256 else "two or more bytes (ranks 0-255 are the bytes)",
                found=token[:40],
            )
        if len(token) > longest:
            raise FormatError(
                f"token {i} is too long",
                chunk=f"{where}[{i}]",
                expected=f"at most finalfusion.limits.MAX_TEKKEN_TOKEN_BYTES = {longest} bytes",
                found=f"{len(token)} bytes",
            )
        total += len(token)
        if total > budget:
            raise FormatError(
                "the ranked tokens hold too many bytes in all",
                chunk=where,
                expected=f"at most finalfusion.limits.MAX_TEKKEN_VOCAB_BYTES = {budget} bytes in the kept tokens",
                found=f"more than {budget} bytes by token {i}",
            )
        if token in seen:
            raise FormatError(f"token {i} repeats token {seen[token]}", chunk=f"{where}[{i}]", expected="unique token bytes", found=token[:40])
        seen[token] = i
        out.append(token)
    return out


_NONE: Final = 1 << 62


def tekken_merges(tokens: list[bytes], where: str = _WHERE) -> list[tuple[bytes, bytes]]:
    """One merge per token of rank 256 on, in rank order: the two parts BPE reaches on its bytes with lower ranks only.

    This is Hugging Face's tiktoken conversion (``bpe(token, max_rank=rank)``
    must end in two parts); with ``ignore_merges`` the merges give tiktoken's
    ids. Each token costs a few list operations per byte and merge (0.9 s for
    Tekken's 130,072 tokens).

    Raises
    ------
    FormatError
        If BPE cannot build a token from two lower-ranked tokens.

    Examples
    --------
    >>> tekken_merges([bytes([i]) for i in range(256)] + [b"ab", b"abc", b"bc", b"abcd"])
    [(b'a', b'b'), (b'ab', b'c'), (b'b', b'c'), (b'abc', b'd')]
    """
    ranks = {t: r for r, t in enumerate(tokens)}
    get = ranks.get
    single = tokens[:256]
    merges: list[tuple[bytes, bytes]] = []
    for rank in range(256, len(tokens)):
        token = tokens[rank]
        if len(token) == 2:
            merges.append((token[:1], token[1:]))
            continue
        parts = [single[b] for b in token]
        pairs = [get(parts[i] + parts[i + 1], _NONE) for i in range(len(parts) - 1)]
        while len(pairs) > 1:
            low = min(pairs)
            if low >= rank:
                break
            i = pairs.index(low)
            parts[i : i + 2] = [parts[i] + parts[i + 1]]
            del pairs[i]
            if i > 0:
                pairs[i - 1] = get(parts[i - 1] + parts[i], _NONE)
            if i < len(pairs):
                pairs[i] = get(parts[i] + parts[i + 1], _NONE)
        if len(parts) != 2:
            raise FormatError(
                f"token {rank} cannot be built by merging two lower-ranked tokens (not a BPE vocabulary: tiktoken's ids and "
                "a converted tokenizer's could differ)",
                chunk=f"{where} vocab[{rank}]",
                expected="two parts after merging its bytes by rank",
                found=f"{len(parts)} parts: {parts[:6]}",
            )
        merges.append((parts[0], parts[1]))
    return merges


def _tokenizer_doc(pattern: str, tokens: list[bytes], merges: list[tuple[bytes, bytes]], num_special: int) -> dict[str, Any]:
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}
    return bpe_document(
        {byte_char(t): num_special + r for r, t in enumerate(tokens)},
        [[byte_char(a), byte_char(b)] for a, b in merges],
        pre_tokenizer={"type": "Sequence", "pretokenizers": [split_isolated(pattern), byte_level]},
        decoder=dict(byte_level, use_regex=True),
        ignore_merges=True,
    )  # no added tokens: Tekkenizer never reads special tokens from text


def read_tekken(data: bytes, where: str = _WHERE) -> TekkenModel:
    """The tokens and tokenizer of a ``tekken.json``, read as mistral-common's ``Tekkenizer.from_file`` reads it.

    The vocabulary is cut where Tekkenizer cuts it (``default_vocab_size``
    ids: ``default_num_special_tokens`` special ids, then that many fewer
    ranked tokens); the entries past the cut are not read. ``image`` and
    ``audio`` settings are not read (their special tokens are ids like the
    others; text never yields them).

    Raises
    ------
    FormatError
        For a file past :data:`finalfusion.limits.MAX_TOKENIZER_BYTES`,
        invalid JSON, a missing or mistyped field, a pattern that is not a
        known regex, a rank out of place, invalid base64, a repeated token, a
        token past :data:`finalfusion.limits.MAX_TEKKEN_TOKEN_BYTES` (or
        tokens past :data:`finalfusion.limits.MAX_TEKKEN_VOCAB_BYTES` in
        all), or a token BPE cannot build.

    Examples
    --------
    >>> from finalfusion._tokenizers import GPT2_REGEX
    >>> vocab = [{"rank": i, "token_bytes": base64.b64encode(bytes([i])).decode(), "token_str": None} for i in range(256)]
    >>> vocab.append({"rank": 256, "token_bytes": base64.b64encode(b"hi").decode(), "token_str": "hi"})
    >>> config = {"pattern": GPT2_REGEX, "num_vocab_tokens": 257, "default_vocab_size": 259, "default_num_special_tokens": 2, "version": "v3"}
    >>> model = read_tekken(json.dumps({"config": config, "vocab": vocab, "special_tokens": [{"rank": 0, "token_str": "<unk>", "is_control": True}]}).encode())
    >>> model.tokens[:3], model.tokens[-1], model.num_special
    (['<unk>', '<SPECIAL_1>', 'Ā'], 'hi', 2)
    """
    if len(data) > limits.MAX_TOKENIZER_BYTES:
        raise FormatError(
            "the file is too large",
            chunk=where,
            expected=f"at most finalfusion.limits.MAX_TOKENIZER_BYTES = {limits.MAX_TOKENIZER_BYTES} bytes",
            found=f"{len(data)} bytes",
        )
    try:
        doc = json.loads(data)
    except (ValueError, RecursionError) as exc:
        raise FormatError("not valid JSON", offset=getattr(exc, "pos", None), chunk=where, expected="a JSON object", found=str(exc)[:100]) from None
    if not isinstance(doc, dict):
        raise FormatError("not a Tekken tokenizer", chunk=where, expected='a JSON object {"config": ..., "vocab": ...}', found=type(doc).__name__)
    pattern, vocab_size, num_special, version = _config(doc, where)
    specials = _special_tokens(doc, num_special, version, where)
    ranked = _ranked_tokens(doc, vocab_size - num_special, where)
    merges = tekken_merges(ranked, where)
    text = json.dumps(_tokenizer_doc(pattern, ranked, merges, num_special), ensure_ascii=False)
    return TekkenModel([*specials, *(byte_char(t) for t in ranked)], text.encode("utf-8"), num_special, version)
