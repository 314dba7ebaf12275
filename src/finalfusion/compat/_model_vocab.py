"""The vocabulary of a model's token table: from its tokenizer, a token list or a fairseq dictionary.

Shared by the loaders of model formats that store a table without its
vocabulary (safetensors, LightSeq). Row ``i`` of the table is token id
``i``; a table may have more rows than the tokenizer has tokens (padding to
a multiple of 64 or 128 for fast matrix kernels): those trailing rows belong
to no token and are dropped. Fewer rows than tokens is a
:class:`~finalfusion.errors.FormatError`.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final, cast

from finalfusion import limits
from finalfusion._remote import is_url
from finalfusion._source import Location, file_in, parent_of, read_regular
from finalfusion._tokenizers import check_added_token_ids
from finalfusion.compat._tekken import is_tekken, read_tekken
from finalfusion.compat._words import first_repeat
from finalfusion.errors import FormatError
from finalfusion.vocab.base import Vocab
from finalfusion.vocab.simple import SimpleVocab

__all__ = ["FAIRSEQ_SPECIALS", "PLACEHOLDER", "TokenizerNotFound", "hf_tokens", "model_vocab", "read_fairseq_dict", "sentencepiece_tokens"]

#: The four symbols a fairseq ``Dictionary`` puts before the entries of ``dict.txt`` (ids 0-3).
FAIRSEQ_SPECIALS: Final = ("<s>", "<pad>", "</s>", "<unk>")


def read_fairseq_dict(data: bytes, where: str = "fairseq dict.txt") -> list[str]:
    """The tokens of a fairseq ``dict.txt``, in id order, with fairseq's four specials first.

    Each line is ``<token> <count>`` (the count is ignored; a line may end in
    `` #fairseq:overwrite`` to redefine a token that exists already). fairseq's
    ``Dictionary`` numbers ``<s> <pad> </s> <unk>`` 0-3 and the lines from 4
    on, as its ``add_from_file`` does.

    Raises
    ------
    FormatError
        For a line without a count, an invalid count, invalid UTF-8 or a
        repeated token (fairseq refuses those too).

    Examples
    --------
    >>> read_fairseq_dict(b"the 120\\n, 80\\nmadeupword0000 0\\n")
    ['<s>', '<pad>', '</s>', '<unk>', 'the', ',', 'madeupword0000']
    """
    tokens = list(FAIRSEQ_SPECIALS)
    index = {t: i for i, t in enumerate(tokens)}
    offset = 0
    for number, raw in enumerate(data.split(b"\n"), 1):
        line_at = offset
        offset += len(raw) + 1
        line = raw.rstrip(b"\r")
        if not line.strip():
            continue
        try:
            text = line.decode("utf-8").rstrip()
        except UnicodeDecodeError as exc:
            raise FormatError(f"line {number} is not UTF-8", offset=line_at + exc.start, chunk=where, expected="UTF-8 text", found=line[:40]) from None
        word, sep, count = text.rpartition(" ")
        overwrite = count == "#fairseq:overwrite"
        if overwrite:
            word, sep, count = word.rpartition(" ")
        if not sep or not word or not count.lstrip("-").isdigit():
            raise FormatError(f"line {number} is not '<token> <count>'", offset=line_at, chunk=where, expected="<token> <count>", found=text[:60])
        if word in index and not overwrite:
            raise FormatError(f"line {number} repeats the token {word!r}", offset=line_at, chunk=where, expected="unique tokens", found=word)
        if word not in index:
            index[word] = len(tokens)
            tokens.append(word)
    return tokens


def _tokenizer_module() -> Any:
    from finalfusion import vocab as tokenizer  # Tokenizer, HuggingFaceTokenizer, SentencePieceTokenizer, TokenizerVocab

    return tokenizer


#: How a hole in a tokenizer's ids (an id with no token) or a repeated token string is named.
PLACEHOLDER: Final = "<row {}>"


def hf_tokens(data: bytes, where: str = "tokenizer.json") -> list[str]:
    """The tokens of a Hugging Face ``tokenizer.json`` in id order, read without the ``tokenizers`` package.

    The model's vocabulary (``model.vocab``: an object for BPE, WordPiece
    and WordLevel, a list of ``[piece, score]`` for Unigram) and the
    ``added_tokens`` together; an id without a token, or the second of two
    ids with the same string, is named :data:`PLACEHOLDER` (``<row 7>``).

    Raises
    ------
    FormatError
        For invalid JSON, a vocabulary that is not of this shape, or more than
        :data:`finalfusion.limits.MAX_TOKENIZER_ID_HOLES` ids without a token.

    Examples
    --------
    >>> hf_tokens(b'{"model": {"vocab": {"a": 0, "c": 2}}, "added_tokens": [{"id": 3, "content": "[X]"}]}')
    ['a', '<row 1>', 'c', '[X]']
    """
    try:
        obj = json.loads(data)  # bytes: UTF-8, UTF-16 or UTF-32, a BOM allowed (as checked_tokenizer_json reads them)
    except (ValueError, RecursionError) as exc:
        raise FormatError("not a valid tokenizer.json", chunk=where, expected="a JSON object", found=str(exc)[:100]) from None
    model = obj.get("model") if isinstance(obj, dict) else None
    vocab = model.get("vocab") if isinstance(model, dict) else None
    by_id: dict[int, str] = {}
    if isinstance(vocab, dict):
        for token, i in vocab.items():
            if not isinstance(i, int) or isinstance(i, bool) or i < 0:
                raise FormatError("a vocabulary id is not a non-negative integer", chunk=where, expected="token: id", found=f"{token!r}: {i!r}")
            by_id.setdefault(i, token)
    elif isinstance(vocab, list):
        for i, entry in enumerate(vocab):
            if not isinstance(entry, list) or not entry or not isinstance(entry[0], str):
                raise FormatError("a Unigram vocabulary entry is not [piece, score]", chunk=where, expected="[piece, score]", found=repr(entry)[:60])
            by_id[i] = entry[0]
    else:
        raise FormatError("the tokenizer has no model.vocab", chunk=where, expected="model.vocab (object or list)", found=type(vocab).__name__)
    added = obj.get("added_tokens") or []
    if not isinstance(added, list):
        raise FormatError("added_tokens is not a list", chunk=where, expected="a list", found=type(added).__name__)
    for entry in added:
        i = entry.get("id") if isinstance(entry, dict) else None
        content = entry.get("content") if isinstance(entry, dict) else None
        if not isinstance(i, int) or isinstance(i, bool) or i < 0 or not isinstance(content, str):
            raise FormatError("an added token lacks its id or content", chunk=where, expected='{"id": int, "content": str}', found=repr(entry)[:60])
        by_id[i] = content
    check_added_token_ids(obj, where)
    holes = max(by_id) + 1 - len(by_id) if by_id else 0
    if holes > limits.MAX_TOKENIZER_ID_HOLES:
        raise FormatError(
            "the token ids leave too many ids without a token",
            chunk=where,
            expected=f"at most finalfusion.limits.MAX_TOKENIZER_ID_HOLES = {limits.MAX_TOKENIZER_ID_HOLES} ids without a token "
            f"below the largest id (each becomes a placeholder)",
            found=f"largest id {max(by_id)} with {len(by_id)} tokens",
        )
    return _dense(by_id)


def _dense(by_id: dict[int, str]) -> list[str]:
    n = max(by_id) + 1 if by_id else 0
    tokens: list[str] = []
    seen: set[str] = set()
    for i in range(n):
        t = by_id.get(i)
        if t is None or t in seen:
            t = PLACEHOLDER.format(i)
        seen.add(t)
        tokens.append(t)
    return tokens


def sentencepiece_tokens(data: bytes, where: str = "SentencePiece model") -> list[str]:
    """The pieces of a serialised SentencePiece ``ModelProto`` in id order, read without the ``sentencepiece`` package.

    ``ModelProto`` field 1 is the repeated ``SentencePiece`` message, whose
    field 1 is the piece string. A repeated piece is named :data:`PLACEHOLDER`.

    Raises
    ------
    FormatError
        For malformed protobuf data or a piece that is not UTF-8.

    Examples
    --------
    >>> piece = lambda s: b"\\x0a" + bytes([len(s) + 2, 0x0A, len(s)]) + s
    >>> sentencepiece_tokens(piece(b"<unk>") + piece(b"\\xe2\\x96\\x81a"))
    ['<unk>', '▁a']
    """
    from finalfusion.compat._protowire import parse_message

    top = parse_message(data, where)
    by_id: dict[int, str] = {}
    for i, (start, end) in enumerate(top.messages(1)):
        raw = parse_message(data, f"{where} piece {i}", start, end).blob(1) or b""
        try:
            by_id[i] = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise FormatError(f"piece {i} is not UTF-8", offset=start, chunk=where, expected="UTF-8", found=raw[:20]) from None
    return _dense(by_id)


def _looks_like_fairseq_dict(head: bytes) -> bool:
    try:
        lines = [ln for ln in head.decode("utf-8").split("\n")[:-1] if ln.strip()]
    except UnicodeDecodeError:
        return False
    return bool(lines) and all(ln.rstrip().rpartition(" ")[2].lstrip("-").isdigit() and " " in ln.strip() for ln in lines[:50])


def _tokenizer_from_path(path: Location) -> tuple[Any, str]:
    """A tokenizer object (or a token list, for a fairseq ``dict.txt``) for a vocabulary file (a path or a URL), and a description.

    The file must be a regular file of at most ``limits.MAX_TOKENIZER_BYTES``
    (checked from its size before it is read: :func:`~finalfusion._source.read_regular`).
    """
    name = os.path.basename(os.fsdecode(path))
    data = read_regular(path, chunk=f"tokenizer {name}", max_bytes=limits.MAX_TOKENIZER_BYTES, limit="finalfusion.limits.MAX_TOKENIZER_BYTES")
    return _tokenizer_from_bytes(data, os.path.splitext(name)[1], name)


def _tokenizer_from_bytes(data: bytes, suffix: str, name: str) -> tuple[Any, str]:
    tok = _tokenizer_module()
    head = data[: 1 << 16]
    # from_bytes: the data is the model, never a path.
    if (suffix == ".json" or head.lstrip().startswith(b"{")) and is_tekken(head, name):
        return _tekken_vocab(data, name), f"Tekken ({name})"
    if suffix == ".json" or head.lstrip().startswith(b"{"):
        return tok.Tokenizer.from_bytes("huggingface", data), f"tokenizer.json ({name})"
    if suffix == ".txt" or (suffix != ".model" and _looks_like_fairseq_dict(head)):
        return read_fairseq_dict(data, f"fairseq dictionary ({name})"), f"fairseq dictionary ({name})"
    return tok.Tokenizer.from_bytes("sentencepiece", data), f"SentencePiece ({name})"


def _tekken_vocab(data: bytes, name: str) -> Vocab:
    """A :class:`~finalfusion.vocab.TokenizerVocab` of a ``tekken.json``: Tekkenizer's ids, a repeated string named :data:`PLACEHOLDER`."""
    model = read_tekken(data, name if name == "tekken.json" else f"tekken.json ({name})")
    tokens = _dense(dict(enumerate(model.tokens)))
    tok = _tokenizer_module()
    vocab: Vocab = tok.TokenizerVocab(tokens, tok.HuggingFaceTokenizer.from_json(model.tokenizer_json.decode("utf-8")))
    return vocab


class TokenizerNotFound(FileNotFoundError):
    """No tokenizer file where one was looked for.

    ``str(err)`` tells a Python caller what to pass (``tokenizer=...``);
    :attr:`what` says what is missing without that, so that the command line
    can name its own option instead.

    Examples
    --------
    >>> err = TokenizerNotFound("no tokenizer.json for models/x")
    >>> str(err), err.what
    ('no tokenizer.json for models/x: pass the vocabulary explicitly (tokenizer=...)', 'no tokenizer.json for models/x')
    """

    def __init__(self, what: str) -> None:
        super().__init__(f"{what}: pass the vocabulary explicitly (tokenizer=...)")
        #: What is missing, without the advice.
        self.what = what


#: WordLlama's weight files: ``<config>_<dims>.safetensors`` (``_binary`` for packed bits).
_WORDLLAMA_WEIGHTS: Final = re.compile(r"(.+?)_[0-9]+(?:_binary)?\.safetensors")


def is_wordllama_weights(name: str) -> bool:
    """Whether a weights file is named as WordLlama names its own (``<config>_<dims>.safetensors``).

    Examples
    --------
    >>> is_wordllama_weights("l2_supercat_256.safetensors"), is_wordllama_weights("model.safetensors")
    (True, False)
    """
    return _WORDLLAMA_WEIGHTS.fullmatch(name) is not None


def _find_tokenizer(directory: Location, weights_name: str | None = None) -> Location:
    """``tokenizer.json``, else ``tokenizer.model``, else ``tekken.json`` (Mistral's own layout) in ``directory``; for WordLlama
    weights ``<config>_<dims>.safetensors`` also ``<config>_tokenizer_config.json`` beside them or in ``../tokenizers/`` (WordLlama's package layout).

    Each is looked up by the directory rule (:func:`~finalfusion._source.file_in`): the first name that exists
    must be a regular file inside its directory (``../tokenizers/`` counts as inside the parent directory). A directory
    at a URL is asked for each name in turn."""
    candidates: list[tuple[Location, str]] = [(directory, "tokenizer.json"), (directory, "tokenizer.model"), (directory, "tekken.json")]
    match = _WORDLLAMA_WEIGHTS.fullmatch(weights_name or "")
    if match:
        name = f"{match.group(1)}_tokenizer_config.json"
        candidates.append((directory, name))
        parent = parent_of(directory)
        if parent is not None:
            candidates.append((parent, "tokenizers/" + name))
    for root, name in candidates:
        found = file_in(root, name, chunk="tokenizer")
        if found is not None:
            return found if is_url(found) else Path(found)
    raise TokenizerNotFound(f"no {' or '.join(os.path.basename(n) for _, n in candidates)} for {directory}")


def model_vocab(tokenizer: Any, directory: Location | None, n_rows: int, fmt: str, *, weights_name: str | None = None) -> tuple[Vocab, int, str]:
    """The vocabulary for a table of ``n_rows`` rows, the number of rows it uses, and a description for the metadata.

    Parameters
    ----------
    tokenizer
        ``None`` (look for ``tokenizer.json``, then ``tokenizer.model``, then
        Mistral's ``tekken.json`` in ``directory``, then WordLlama's tokenizer
        of ``weights_name``), a path or URL to any of them (or to a directory holding one;
        a directory's URL ends in ``/``), a
        :class:`~finalfusion.vocab.Tokenizer` object, or a
        sequence of token strings.
    directory
        Where the weights are, if they come from a file: a local directory or a directory's URL.
    n_rows
        Rows of the table.
    fmt
        Format name for errors.
    weights_name
        File name of the weights (WordLlama names its tokenizer after them).

    Raises
    ------
    FormatError
        When the tokenizer has more tokens than the table has rows, or a
        token list repeats a token.

    Examples
    --------
    >>> vocab, used, what = model_vocab(["a", "b"], None, 4, "safetensors")
    >>> vocab.words, used, what
    (['a', 'b'], 2, 'token list (2 tokens)')
    """
    if tokenizer is None:
        if directory is None:
            raise ValueError(f"{fmt}: the weights do not come from a directory: pass the vocabulary (tokenizer=...)")
        tokenizer = _find_tokenizer(directory, weights_name)
    if is_url(tokenizer):
        url = cast(str, tokenizer)
        tokenizer, described = _tokenizer_from_path(_find_tokenizer(url.rstrip("/")) if url.endswith("/") else url)
    elif isinstance(tokenizer, (str, os.PathLike)):
        path = Path(os.fsdecode(tokenizer))
        if path.is_dir():
            path = Path(_find_tokenizer(path))
        tokenizer, described = _tokenizer_from_path(path)
    elif isinstance(tokenizer, (bytes, bytearray, memoryview)):
        tokenizer, described = _tokenizer_from_bytes(bytes(tokenizer), "", "<bytes>")
    else:
        described = ""
    if isinstance(tokenizer, _tokenizer_module().TokenizerVocab):  # a tekken.json: its tokens are not the tokenizer's own vocabulary
        _check_count(len(tokenizer), n_rows, fmt)
        return tokenizer, len(tokenizer), described or "TokenizerVocab"
    if isinstance(tokenizer, _tokenizer_module().Tokenizer):
        return _from_tokenizer(tokenizer, n_rows, fmt, described or type(tokenizer).__name__)
    if isinstance(tokenizer, Sequence) and not isinstance(tokenizer, str):
        tokens = list(tokenizer)
        if not all(isinstance(t, str) for t in tokens):
            raise TypeError("a token list must hold strings")
        _check_count(len(tokens), n_rows, fmt)
        if not described:
            described = f"token list ({len(tokens)} tokens)"
        return _unique_vocab(tokens, fmt), len(tokens), described
    raise TypeError(f"expected a path, a Tokenizer or a list of tokens, got {type(tokenizer).__name__}")


def _check_count(n_tokens: int, n_rows: int, fmt: str) -> None:
    if n_tokens > n_rows:
        raise FormatError(
            "the table has fewer rows than the vocabulary has tokens", chunk=fmt, expected=f"at least {n_tokens} rows (one per token)", found=f"{n_rows} rows"
        )
    if n_tokens == 0:
        raise FormatError("the vocabulary is empty", chunk=fmt, expected="at least one token", found="0 tokens")


def _unique_vocab(tokens: list[str], fmt: str) -> SimpleVocab:
    repeat = first_repeat(tokens)
    if repeat is not None:
        i, j = repeat
        raise FormatError(f"token {i} repeats token {j}", chunk=fmt, expected="unique tokens", found=tokens[i])
    return SimpleVocab(tokens)


def _from_tokenizer(tokenizer: Any, n_rows: int, fmt: str, described: str) -> tuple[Vocab, int, str]:
    tok = _tokenizer_module()
    tokens = hf_tokens(tokenizer.to_bytes()) if isinstance(tokenizer, tok.HuggingFaceTokenizer) else sentencepiece_tokens(tokenizer.to_bytes())
    _check_count(len(tokens), n_rows, fmt)
    return tok.TokenizerVocab(tokens, tokenizer), len(tokens), described
