"""``Metadata`` chunk (id 5): a free-form TOML table (docs/format.md §5.5, §12).

The payload is the UTF-8 TOML document itself; its length is the chunk length.
"""

from __future__ import annotations

import copy
import sys
from collections.abc import Iterator, MutableMapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

import tomli_w

from finalfusion import _display
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

        Examples
        --------
        >>> print(Metadata({"corpus": "wiki", "epochs": 5}).to_toml())
        corpus = "wiki"
        epochs = 5
        <BLANKLINE>
        """
        try:
            return tomli_w.dumps(self.data)
        except TypeError as exc:
            raise TypeError(f"metadata cannot be written as TOML: {exc}") from None

    @classmethod
    def read_payload(cls, reader: ByteReader) -> Metadata:
        at = reader.pos
        raw = reader.take(reader.remaining, "TOML document")
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise invalid_utf8("metadata", raw, exc, at, reader.chunk) from None
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            lines, at_line = text.splitlines(), int(getattr(exc, "lineno", 0) or 0)  # lineno: Python >= 3.14 only
            line = lines[at_line - 1] if 0 < at_line <= len(lines) else text
            raise FormatError(f"metadata is not valid TOML ({exc})", offset=at, chunk=reader.chunk, expected="a TOML document", found=line[:80]) from None
        meta = cls(data)
        # Remember the document as read so unchanged metadata is written back byte-identically.
        meta._source = (bytes(raw), copy.deepcopy(data))
        return meta

    def _payload(self) -> bytes:
        source = self._source
        if source is not None and source[1] == self.data:
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
