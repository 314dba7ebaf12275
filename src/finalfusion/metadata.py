"""``Metadata`` chunk (id 5): a free-form TOML table (docs/format.md §5.5, §12).

The payload is the UTF-8 TOML document itself; its length is the chunk length.
"""

from __future__ import annotations

import copy
import re
import sys
from collections.abc import Iterator, MutableMapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Final

import tomli_w

from finalfusion import _display, limits
from finalfusion._binary import ByteReader, ByteWriter, invalid_utf8
from finalfusion._source import Source
from finalfusion.chunks import ChunkIdentifier, register
from finalfusion.container import FileChunk, load_chunk
from finalfusion.errors import FormatError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib  # type: ignore[import-not-found,unused-ignore]

__all__ = ["Metadata", "load_metadata"]


@register
@dataclass(eq=False, repr=False)
class Metadata(FileChunk, MutableMapping[str, Any]):
    """Metadata as a mutable mapping of TOML values.

    Unlike the other chunks, ``Metadata`` is a plain, *mutable* dataclass:
    finalfusion-python 0.7's ``Metadata`` was a ``dict`` subclass, and code
    written for it edits metadata in place (``emb.metadata["corpus"] = ...``)
    before writing. The metadata describes the embeddings but indexes
    nothing, so changing it cannot desynchronise them (vocabularies and
    storage, which can, are frozen). It holds its table in :attr:`data`
    (a ``dict``, copied from the argument) and implements
    :class:`~collections.abc.MutableMapping` over it; it is unhashable and
    compares equal to a ``Metadata`` or ``dict`` with equal contents.

    Metadata read from a file remembers the document as read, so that
    unchanged metadata is written back byte for byte (and embeddings
    mapped from a file still pickle by reference); any change is noticed
    by comparing with that snapshot.

    Parameters
    ----------
    data
        A mapping of strings to TOML-representable values (str, int,
        float, bool, dates, lists and nested mappings).

    Examples
    --------
    >>> m = Metadata({"dims": 300, "model": {"type": "skipgram"}})
    >>> m["model"]["type"]
    'skipgram'
    >>> m["corpus"] = "wiki"
    >>> m.to_toml()
    'dims = 300\\ncorpus = "wiki"\\n\\n[model]\\ntype = "skipgram"\\n'
    >>> m == {"dims": 300, "corpus": "wiki", "model": {"type": "skipgram"}}
    True
    """

    data: dict[str, Any] = field(default_factory=dict)
    #: The TOML document as read and the table parsed from it (metadata read from a file only).
    _source: tuple[bytes, dict[str, Any]] | None = field(default=None, init=False, repr=False, compare=False)
    chunk_id: ClassVar[ChunkIdentifier] = ChunkIdentifier.Metadata

    def __post_init__(self) -> None:
        self.data = dict(self.data)
        check_depth(self.data)

    def __deepcopy__(self, memo: dict[int, Any]) -> Metadata:
        check_depth(self.data)  # copy.deepcopy recurses once per level
        new = Metadata(copy.deepcopy(self.data, memo))
        new._source = self._source
        return new

    @classmethod
    def from_toml(cls, text: str | bytes, *, where: str = "metadata") -> Metadata:
        """Parse a TOML document within :mod:`finalfusion.limits` (size, nesting depth, number length, items).

        Raises
        ------
        FormatError
            If the document is not valid UTF-8 or TOML, or exceeds a limit
            (``where`` names the document in the message).

        Examples
        --------
        >>> Metadata.from_toml('corpus = "wiki"')
        Metadata({'corpus': 'wiki'})
        >>> Metadata.from_toml("x = " + "[" * 1000 + "]" * 1000)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        finalfusion.errors.FormatError: metadata: metadata nests too deeply: expected at most 64 levels (finalfusion.limits.MAX_METADATA_DEPTH), found 65 ...
        """
        raw = text.encode("utf-8") if isinstance(text, str) else bytes(text)
        return cls(parse_toml(raw, 0, where))

    def __getitem__(self, key: str) -> Any:
        return self.data[key]

    def __setitem__(self, key: str, value: Any) -> None:
        self.data[key] = value

    def __delitem__(self, key: str) -> None:
        del self.data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.data)

    def __len__(self) -> int:
        return len(self.data)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Metadata):
            return self.data == other.data
        if isinstance(other, dict):
            return self.data == other
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def to_toml(self) -> str:
        """Serialise as TOML.

        Raises
        ------
        TypeError
            If a value cannot be represented in TOML (e.g. ``None`` or an object).
        ValueError
            If the values or the document exceed a limit of :mod:`finalfusion.limits`
            (readers would refuse the document: nothing is written that cannot be read back).

        Examples
        --------
        >>> print(Metadata({"corpus": "wiki", "epochs": 5}).to_toml())
        corpus = "wiki"
        epochs = 5
        <BLANKLINE>
        >>> Metadata({f"k{i}": i for i in range(30_000)}).to_toml()  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        ValueError: metadata cannot be written as TOML that can be read back: metadata: metadata has too many items ...
        """
        check_depth(self.data)
        try:
            text: str = tomli_w.dumps(self.data)
        except TypeError as exc:
            raise TypeError(f"metadata cannot be written as TOML: {exc}") from None
        try:
            _check_document(text.encode("utf-8"), 0, "metadata")
        except FormatError as exc:
            raise ValueError(f"metadata cannot be written as TOML that can be read back: {exc}") from None
        return text

    @classmethod
    def check_declared(cls, declared: int, at: int) -> None:
        """Refuse a TOML document longer than ``finalfusion.limits.MAX_METADATA_BYTES`` from its declared length, before it is read.

        Raises
        ------
        FormatError
            For a declared length past the limit (the message names the
            limit's setting, the length declared and where).

        Examples
        --------
        >>> try:
        ...     Metadata.check_declared(1 << 30, 24)
        ... except FormatError as err:
        ...     print(err.message, err.found)
        metadata document is too large 1073741824 bytes
        """
        _check_size(declared, at, cls.__name__)

    @classmethod
    def read_payload(cls, reader: ByteReader) -> Metadata:
        at = reader.pos
        raw = reader.take(reader.remaining, "TOML document")
        meta = cls(parse_toml(raw, at, reader.chunk))
        # Remember the document as read so unchanged metadata is written back byte-identically.
        meta._source = (bytes(raw), copy.deepcopy(meta.data))
        return meta

    def _payload(self) -> bytes:
        source = self._source
        # repr, not ==: NaN (valid TOML) is unequal to itself once pickling has made a new float, and 1 == 1.0 would
        # keep a document whose value changed type.
        if source is not None and repr(source[1]) == repr(self.data):
            return source[0]
        return self.to_toml().encode("utf-8")

    def write_payload(self, writer: ByteWriter) -> None:
        """Write the UTF-8 TOML document (a metadata read from a file and unchanged: byte for byte as read).

        Examples
        --------
        >>> import io
        >>> buf = io.BytesIO()
        >>> Metadata({"dims": 300}).write_payload(ByteWriter(buf))
        >>> buf.getvalue()
        b'dims = 300\\n'
        """
        writer.raw(self._payload())

    def payload_len(self, offset: int) -> int:
        """Length of the TOML document in bytes (no padding, so ``offset`` does not matter).

        Examples
        --------
        >>> Metadata({"dims": 300}).payload_len(0), len("dims = 300\\n")
        (11, 11)
        """
        return len(self._payload())

    def __repr__(self) -> str:
        return f"Metadata({self.data!r})"

    def _repr_html_(self) -> str:
        return _display.metadata_html(self)


def load_metadata(file: Source) -> Metadata:
    """Read the metadata chunk of a finalfusion file.

    Raises
    ------
    FormatError
        If the file is malformed or has no metadata chunk.

    Examples
    --------
    >>> import io, numpy as np
    >>> from finalfusion import Embeddings, NdArray, SimpleVocab
    >>> buf = io.BytesIO()
    >>> Embeddings(NdArray(np.eye(1, dtype=np.float32)), SimpleVocab(["a"]), metadata=Metadata({"lang": "de"})).write(buf)
    >>> load_metadata(buf.getvalue())
    Metadata({'lang': 'de'})
    """
    return load_chunk(file, Metadata)


#: What the pre-scan of a TOML document looks at: strings and comments (skipped), brackets, separators, dots, numbers.
#: Every string alternative matches once its opening quote is there (an unterminated string ends at the end of its line
#: or of the text, where the parser stops anyway), so the scan never fails and retries: it stays linear.
_SCAN: Final = re.compile(
    r'"""(?:[^"\\]+|\\[\s\S]?|"(?!""))*(?:"""(?:"{1,2}(?!"))?|\Z)'  # multi-line basic string
    r"|'''[\s\S]*?(?:'''(?:'{1,2}(?!'))?|\Z)"  # multi-line literal string
    r'|"(?:[^"\\\n]+|\\[^\n]?)*(?:"|(?=\n)|\Z)'  # basic string
    r"|'[^'\n]*(?:'|(?=\n)|\Z)"  # literal string
    r"|#[^\n]*"  # comment
    r"|[\[{\]}=,\n.]|[0-9][0-9_]*"  # a bracket, a separator, a dot, a number (no groups: every alternative starts with a
    # character from a fixed set, so the regex engine skips other text at C speed; the token's first character says its kind)
)


def parse_toml(raw: bytes, at: int, chunk: str | None) -> dict[str, Any]:
    """Parse a metadata TOML document, bounded by :mod:`finalfusion.limits`, every failure a :class:`FormatError`.

    Before the parser sees the text, a linear pre-scan bounds its size, the
    nesting of brackets and braces, the parts of dotted keys, the length
    of numbers and the number of items (a 20,000-part dotted key costs the
    parser seconds and gigabytes; arrays 1,000 deep make it recurse past
    Python's limit; a 5,000-digit integer fails in ``int``; the parser
    spends about a microsecond on each item, so 375 KB of short array
    elements took seconds); the parsed table is then checked once more.

    Examples
    --------
    >>> parse_toml(b"a.b.c = [1, {d = 2.5}]", 0, "Metadata")
    {'a': {'b': {'c': [1, {'d': 2.5}]}}}
    >>> parse_toml(b"x = 1" + b"0" * 5000, 0, "Metadata")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    finalfusion.errors.FormatError: Metadata: a number in the metadata is too long: expected at most 100 characters (...MAX_METADATA_NUMBER_LEN), found 5001 ...
    >>> parse_toml(b"x = [" + b"1," * 40_000 + b"]", 0, "Metadata")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    finalfusion.errors.FormatError: Metadata: metadata has too many items ...: expected at most 65536 items (...MAX_METADATA_ITEMS; ...), found 65537 ...
    """
    text = _check_document(raw, at, chunk)
    try:
        data: dict[str, Any] = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        lines, at_line = text.splitlines(), int(getattr(exc, "lineno", 0) or 0)  # lineno: Python >= 3.14 only
        line = lines[at_line - 1] if 0 < at_line <= len(lines) else text
        raise FormatError(f"metadata is not valid TOML ({exc})", offset=at, chunk=chunk, expected="a TOML document", found=line[:80]) from None
    except (ValueError, RecursionError, MemoryError) as exc:  # e.g. int() of too many digits: never a bare ValueError
        raise FormatError(
            f"metadata cannot be parsed ({type(exc).__name__}: {str(exc)[:200]})", offset=at, chunk=chunk, expected="a TOML document", found=text[:80]
        ) from None
    try:
        check_depth(data)
    except ValueError as exc:  # not reached after the pre-scan (it counts at least as much), but checked as for any value
        raise FormatError(str(exc), offset=at, chunk=chunk) from None
    return data


def _check_size(n: int, at: int, chunk: str | None) -> None:
    """Refuse a document of ``n`` bytes past ``limits.MAX_METADATA_BYTES`` (:class:`FormatError` at offset ``at``)."""
    if n > limits.MAX_METADATA_BYTES:
        raise FormatError(
            "metadata document is too large",
            offset=at,
            chunk=chunk,
            expected=f"at most {limits.MAX_METADATA_BYTES} bytes (finalfusion.limits.MAX_METADATA_BYTES)",
            found=f"{n} bytes",
        )


def _check_document(raw: bytes, at: int, chunk: str | None) -> str:
    """The document as text, after the checks on its size, encoding and the pre-scan (:class:`FormatError` if one fails)."""
    _check_size(len(raw), at, chunk)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise invalid_utf8("metadata", raw, exc, at, chunk) from None
    _prescan(text, at, chunk)
    return text


def _prescan(text: str, at: int, chunk: str | None) -> None:
    depth_cap, num_cap, item_cap = limits.MAX_METADATA_DEPTH, limits.MAX_METADATA_NUMBER_LEN, limits.MAX_METADATA_ITEMS
    depth = dots = items = 0
    for m in _SCAN.finditer(text):
        items += 1
        first = text[m.start()]
        if first in "\"'#":  # a string or a comment: a basic string's escapes are items too (the parser decodes each on its own)
            if first == '"':
                items += text.count("\\", m.start(), m.end())
        elif first == ".":
            dots += 1
            if dots > depth_cap:  # a key of n parts nests n - 1 tables below the one it is in
                raise _too_deep("a dotted key has too many parts", dots, at + len(text[: m.start()].encode("utf-8")), chunk)
        elif first in "[{":
            depth += 1
            dots = 0
            if depth > depth_cap:
                raise _too_deep("metadata nests too deeply", depth, at + len(text[: m.start()].encode("utf-8")), chunk)
        elif first in "]}":
            depth = max(0, depth - 1)
            dots = 0
        elif first in "=,\n":
            dots = 0
        elif m.end() - m.start() > num_cap:
            raise FormatError(
                "a number in the metadata is too long",
                offset=at + len(text[: m.start()].encode("utf-8")),
                chunk=chunk,
                expected=f"at most {num_cap} characters (finalfusion.limits.MAX_METADATA_NUMBER_LEN)",
                found=m.end() - m.start(),
            )
        if items > item_cap:
            raise FormatError(
                f"metadata has too many items ({_ITEMS})",
                offset=at + len(text[: m.start()].encode("utf-8")),
                chunk=chunk,
                expected=f"at most {item_cap} items (finalfusion.limits.MAX_METADATA_ITEMS; raise it to read more)",
                found=f"{items} by this offset",
            )


#: What counts as one item of a TOML document (for :data:`finalfusion.limits.MAX_METADATA_ITEMS`).
_ITEMS: Final = "each bracket, brace, '=', ',', '.', line, number, string, comment and escape counts one"


def _too_deep(message: str, found: int, offset: int, chunk: str | None) -> FormatError:
    return FormatError(
        message, offset=offset, chunk=chunk, expected=f"at most {limits.MAX_METADATA_DEPTH} levels (finalfusion.limits.MAX_METADATA_DEPTH)", found=found
    )


def check_depth(value: Any) -> None:
    """Raise :class:`ValueError` if ``value`` is deeper or has more values than the :mod:`finalfusion.limits` allow.

    The limits are :data:`~finalfusion.limits.MAX_METADATA_DEPTH` and
    :data:`~finalfusion.limits.MAX_METADATA_ITEMS`.

    Every key and list element counts one value, once per path that reaches
    it (writing writes each path: a list holding the same list twice, 60
    times over, would be 2**61 values of TOML). Iterative (it cannot itself
    recurse too deeply), each container is expanded once per level, and it
    stops at the first level past a limit, so cyclic values are refused too.

    Examples
    --------
    >>> check_depth({"a": [1, {"b": 2}]})
    >>> deep: list = []
    >>> for _ in range(100):
    ...     deep = [deep]
    >>> check_depth({"x": deep})  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: metadata nests too deeply: expected at most 64 levels (finalfusion.limits.MAX_METADATA_DEPTH), found 65 or more
    >>> check_depth({"x": list(range(100_000))})  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: metadata has too many values: expected at most 65536 (finalfusion.limits.MAX_METADATA_ITEMS; raise it to write them), found 100001 or more
    """
    cap, item_cap = limits.MAX_METADATA_DEPTH, limits.MAX_METADATA_ITEMS
    # The containers of one level, each with the number of paths that reach it.
    level: dict[int, tuple[Any, int]] = {id(value): (value if isinstance(value, dict) else [value], 1)}
    items, depth = 0, -1  # the top-level table is level 0
    while level:
        depth += 1
        if depth > cap:
            raise ValueError(f"metadata nests too deeply: expected at most {cap} levels (finalfusion.limits.MAX_METADATA_DEPTH), found {depth} or more")
        nxt: dict[int, tuple[Any, int]] = {}
        for container, paths in level.values():
            children = container.values() if isinstance(container, dict) else container
            items += paths * len(children)
            if items > item_cap:
                limit = "finalfusion.limits.MAX_METADATA_ITEMS; raise it to write them"
                raise ValueError(f"metadata has too many values: expected at most {item_cap} ({limit}), found {items} or more")
            for v in children:
                if isinstance(v, (dict, list, tuple)):
                    known = nxt.get(id(v))
                    nxt[id(v)] = (v, paths + (known[1] if known else 0))
        level = nxt
