"""What words a text format can carry: decoding them on read, checking them before a write.

:func:`decode_word` decodes one word's UTF-8 (naming its record and byte
offset on failure); :func:`decode_words` decodes a block of them at once
and falls back to :func:`decode_word` only to name a bad one.
:func:`check_writable_word` / :func:`check_writable_words` refuse, before a
write, words the word2vec and text formats cannot represent;
:func:`first_repeat` finds the repeated word a reader refuses;
:func:`check_trimmed_repeat` names the real cause when the repeat is made by
trimming a word's whitespace (a vocabulary with pieces such as ``");\r"``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence

from finalfusion.errors import FormatError

__all__ = ["check_trimmed_repeat", "check_writable_word", "check_writable_words", "decode_word", "decode_words", "first_repeat"]


def decode_word(raw: bytes, lossy: bool, where: str, offset: int | None = None) -> str:
    """Decode a word's UTF-8 bytes.

    Parameters
    ----------
    raw
        The word's bytes.
    lossy
        Replace invalid sequences with U+FFFD instead of failing.
    where
        The format and record or line, e.g. ``"word2vec record 2"``; named in the error.
    offset
        Absolute byte offset of ``raw`` in the (decompressed) input, if known.

    Raises
    ------
    FormatError
        On invalid UTF-8 unless ``lossy``.

    Examples
    --------
    >>> decode_word(b"zee\\xbfn", True, "word2vec record 2")
    'zee\\ufffdn'
    >>> decode_word(b"zee\\xbfn", False, "word2vec record 2", offset=23)
    Traceback (most recent call last):
    ...
    finalfusion.errors.FormatError: word2vec record 2: invalid UTF-8 in word: expected UTF-8, found b'zee\\xbfn' (at byte offset 26)
    """
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        if lossy:
            return raw.decode("utf-8", errors="replace")
        at = None if offset is None else offset + exc.start
        raise FormatError("invalid UTF-8 in word", offset=at, chunk=where, expected="UTF-8", found=raw) from None


def decode_words(joined: bytes, lossy: bool, each: Callable[[], Iterable[tuple[bytes, str, int]]]) -> str:
    """Decode the UTF-8 of a block's words, joined by an ASCII separator, in one go.

    On invalid UTF-8 without ``lossy``, ``each()`` gives every word's bytes,
    its ``where`` and its byte offset, so that :func:`decode_word` names the
    first bad one (it is called only then: the readers' blocks are valid
    almost always); with ``lossy`` invalid sequences become U+FFFD.

    Examples
    --------
    >>> raw = [b"Berlin", b"zee\\xbfn"]
    >>> decode_words(b" ".join(raw), True, lambda: [])
    'Berlin zee\\ufffdn'
    >>> decode_words(b" ".join(raw), False, lambda: ((w, f"text line {1 + j}", 7 * j) for j, w in enumerate(raw)))
    Traceback (most recent call last):
    ...
    finalfusion.errors.FormatError: text line 2: invalid UTF-8 in word: expected UTF-8, found b'zee\\xbfn' (at byte offset 10)
    """
    try:
        return joined.decode("utf-8")
    except UnicodeDecodeError:
        if not lossy:
            for raw, where, offset in each():
                decode_word(raw, False, where, offset)
        return joined.decode("utf-8", errors="replace")


#: Characters that separate fields in the word2vec and text formats (Rust splits on these; words cannot contain them).
_SEPARATORS = frozenset(" \t\n\r\f\v")


def check_writable_word(word: str, fmt: str) -> None:
    """Raise ``ValueError`` if ``word`` cannot be written in format ``fmt`` and read back unchanged.

    The word2vec and text formats separate fields by ASCII whitespace, so a
    word must be non-empty and contain no ASCII whitespace (or NUL). Other
    whitespace (U+00A0, U+3000 ...) is part of the word: finalfusion-rust's
    text reader and ours split on ASCII whitespace only. word2vec readers
    (finalfusion-rust's ``trim``, ours) also trim each word's edges of any
    Unicode whitespace, so in ``word2vec`` a word must not start or end
    with whitespace.

    Examples
    --------
    >>> check_writable_word("Berlin", "word2vec")
    >>> check_writable_word("New\u00a0York", "text")
    >>> check_writable_word("New York", "text")
    Traceback (most recent call last):
    ...
    ValueError: text cannot represent the word 'New York': it contains ASCII whitespace (' ' at character 3)
    >>> check_writable_word(");\\r", "word2vec")  # a BPE piece of text with Windows line ends
    Traceback (most recent call last):
    ...
    ValueError: word2vec cannot represent the word ');\\r': it contains ASCII whitespace ('\\r' at character 2)
    >>> check_writable_word("\u3000edge", "word2vec")
    Traceback (most recent call last):
    ...
    ValueError: word2vec cannot represent the word '\u3000edge': it starts or ends with whitespace (readers trim it)
    """
    if not isinstance(word, str):
        raise TypeError(f"words must be str, got {type(word).__name__}: {word!r}")
    if not word:
        raise ValueError(f"{fmt} cannot represent the empty word")
    at = next((i for i, c in enumerate(word) if c in _SEPARATORS), None)
    if at is not None:
        raise ValueError(f"{fmt} cannot represent the word {word!r}: it contains ASCII whitespace ({word[at]!r} at character {at})")
    if "\x00" in word:
        raise ValueError(f"{fmt} cannot represent the word {word!r}: it contains a NUL character")
    if fmt == "word2vec" and (word[0].isspace() or word[-1].isspace()):
        raise ValueError(f"{fmt} cannot represent the word {word!r}: it starts or ends with whitespace (readers trim it)")


def check_writable_words(words: Sequence[str], fmt: str) -> None:
    """:func:`check_writable_word` for every word, fast for the common case of plain words.

    Examples
    --------
    >>> check_writable_words(["Berlin", "Zürich"], "text")
    >>> check_writable_words(["Berlin", ""], "text")
    Traceback (most recent call last):
    ...
    ValueError: text cannot represent the empty word
    """
    joined = "".join(words)
    if all(words) and joined.isprintable() and not any(c.isspace() for c in joined):
        return
    for w in words:
        check_writable_word(w, fmt)


def first_repeat(words: Sequence[str]) -> tuple[int, int] | None:
    """``(i, j)`` for the first word ``words[i]`` that repeats an earlier ``words[j]``; ``None`` if all differ.

    The readers that refuse a repeated word name both places with it.

    Examples
    --------
    >>> first_repeat(["a", "b", "c", "b", "a"]), first_repeat(["a", "b"])
    ((3, 1), None)
    """
    seen: dict[str, int] = {}
    for i, w in enumerate(words):
        j = seen.setdefault(w, i)
        if j != i:
            return i, j
    return None


def check_trimmed_repeat(words: Sequence[str], untrimmed: Mapping[int, str], fmt: str, where: str) -> None:
    """Raise :class:`FormatError` if the first repeated word repeats only because a reader trimmed its whitespace.

    word2vec readers (finalfusion-rust's, finalfusion-python 0.7's, ours) trim
    each word's edges, so pieces such as ``");\\r"`` and ``");"`` (or ``"\\t"``
    and ``"\\r"``, both empty once trimmed) of a BPE or SentencePiece
    vocabulary read as one word twice. The plain "repeats the word" error
    would hide that; this one names both records' words as written.

    Parameters
    ----------
    words
        The words as read (trimmed).
    untrimmed
        ``{index: word before trimming}`` for the words that trimming changed.
    fmt, where
        The format and the unit of the input (``"word2vec"``, ``"word2vec record"``).

    Examples
    --------
    >>> check_trimmed_repeat(["a", ");", ");"], {2: ");\\r"}, "word2vec", "word2vec record")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    finalfusion.errors.FormatError: word2vec: word2vec record 3's word ');\\r' is ');' once trimmed of whitespace, which repeats record 2's word ');' (...)...
    >>> check_trimmed_repeat(["a", "b", "a"], {1: " b"}, "word2vec", "word2vec record")  # not caused by trimming: left to the plain error
    """
    repeat = first_repeat(words)
    if repeat is None or not (repeat[0] in untrimmed or repeat[1] in untrimmed):
        return
    i, j = repeat
    unit = where.split()[-1]
    raise FormatError(
        f"{where} {i + 1}'s word {untrimmed.get(i, words[i])!r} is {words[i]!r} once trimmed of whitespace, "
        f"which repeats {unit} {j + 1}'s word {untrimmed.get(j, words[j])!r} ({fmt} readers trim words, as finalfusion-rust and 0.7 do: "
        "the vocabulary has pieces that differ only in whitespace at their edges, which this format cannot keep apart)",
        chunk=fmt,
        expected="words that differ once trimmed",
        found=repr(untrimmed.get(i, words[i])),
    )
