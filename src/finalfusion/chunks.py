"""Chunk identifiers, data type ids, roles, the chunk registry and chunk framing.

Every chunk on disk is framed as::

    u32 chunk id | u64 chunk length | payload (chunk length bytes)

Only this module reads and writes that frame (docs/format.md §1). Chunk classes
parse and write their *payload* only and register themselves with
:func:`register`; there is no ``if``/``elif`` over chunk ids anywhere. The
role of a chunk (metadata, vocabulary, storage, norms) follows from its id
(:attr:`ChunkIdentifier.role`, one table).

This module sits right above the byte cursor (:class:`ByteReader`,
:class:`ByteWriter`, re-exported here as the public cursor types) and
imports nothing else of the package but the errors: headers, whole files
and the chunk classes all build on it (see docs/architecture.md).
"""

from __future__ import annotations

import enum
import struct
import warnings
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, BinaryIO, ClassVar, Final, TypeVar

from finalfusion._binary import Buffer, ByteReader, ByteWriter
from finalfusion.errors import ChunkOrder, FormatError, LegacyFormatWarning, Truncated, UnknownChunk

if TYPE_CHECKING:
    from typing_extensions import Self

__all__ = [
    "FRAME_BYTES",
    "ROLE_RANK",
    "Buffer",
    "ByteReader",
    "ByteWriter",
    "Chunk",
    "ChunkIdentifier",
    "TypeId",
    "check_order",
    "chunk_class",
    "chunk_classes",
    "read_chunk",
    "read_frame",
    "register",
    "write_chunk",
]

#: The frame before every payload: u32 chunk id, u64 payload length.
_FRAME: Final = struct.Struct("<IQ")
#: Bytes of a chunk frame.
FRAME_BYTES: Final = _FRAME.size


class ChunkIdentifier(enum.IntEnum):
    """Identifiers of the finalfusion chunks (docs/format.md §5).

    Examples
    --------
    >>> ChunkIdentifier(2)
    <ChunkIdentifier.NdArray: 2>
    >>> from finalfusion.vocab import SimpleVocab
    >>> SimpleVocab.chunk_id is ChunkIdentifier.SimpleVocab
    True
    """

    #: The file header (docs/format.md §2); never a chunk of its own in a file.
    Header = 0
    #: A plain word list (docs/format.md §5.1).
    SimpleVocab = 1
    #: A dense ``float32`` matrix (docs/format.md §5.2).
    NdArray = 2
    #: Words plus finalfusion's FNV-1a 64 hashed n-gram buckets (docs/format.md §5.3).
    BucketSubwordVocab = 3
    #: Product-quantized rows (docs/format.md §5.4).
    QuantizedArray = 4
    #: TOML metadata (docs/format.md §5.5).
    Metadata = 5
    #: The original lengths of the unit-length word rows (docs/format.md §5.6).
    NdNorms = 6
    #: Words plus fastText's FNV-1a 32 hashed n-gram buckets (docs/format.md §5.7).
    FastTextSubwordVocab = 7
    #: Words plus an explicit n-gram list (docs/format.md §5.8).
    ExplicitSubwordVocab = 8
    #: floret's MurmurHash3 buckets, no word list (docs/format.md §5.9).
    FloretSubwordVocab = 9

    @property
    def role(self) -> str:
        """What the chunk is for: ``header``, ``metadata``, ``vocab``, ``storage`` or ``norms``.

        Examples
        --------
        >>> ChunkIdentifier.QuantizedArray.role, ChunkIdentifier.FloretSubwordVocab.role
        ('storage', 'vocab')
        """
        return _ROLES[self]

    def is_storage(self) -> bool:
        """Whether this identifies a storage chunk.

        Examples
        --------
        >>> ChunkIdentifier.QuantizedArray.is_storage(), ChunkIdentifier.NdNorms.is_storage()
        (True, False)
        """
        return self.role == "storage"

    def is_vocab(self) -> bool:
        """Whether this identifies a vocabulary chunk.

        Examples
        --------
        >>> ChunkIdentifier.FloretSubwordVocab.is_vocab(), ChunkIdentifier.Metadata.is_vocab()
        (True, False)
        """
        return self.role == "vocab"


class TypeId(enum.IntEnum):
    """Data type identifiers; only ``u8`` (quantized codes) and ``f32`` occur in files.

    Examples
    --------
    >>> TypeId(10), int(TypeId.u8)
    (<TypeId.f32: 10>, 1)
    """

    #: Unsigned bytes: the codes of quantized storage.
    u8 = 1
    #: Little-endian IEEE 754 single precision: matrices, norms, centroids.
    f32 = 10


#: The role of every chunk id: the one table roles come from (docs/format.md §5).
_ROLES: Final[dict[ChunkIdentifier, str]] = {
    ChunkIdentifier.Header: "header",
    ChunkIdentifier.Metadata: "metadata",
    ChunkIdentifier.SimpleVocab: "vocab",
    ChunkIdentifier.BucketSubwordVocab: "vocab",
    ChunkIdentifier.FastTextSubwordVocab: "vocab",
    ChunkIdentifier.ExplicitSubwordVocab: "vocab",
    ChunkIdentifier.FloretSubwordVocab: "vocab",
    ChunkIdentifier.NdArray: "storage",
    ChunkIdentifier.QuantizedArray: "storage",
    ChunkIdentifier.NdNorms: "norms",
}

#: Position of each role in a file; chunks must appear in increasing rank.
ROLE_RANK: Final = {"metadata": 0, "vocab": 1, "storage": 2, "norms": 3}


class Chunk:
    """Base of every chunk class: the payload contract.

    Subclasses set ``chunk_id`` and implement :meth:`read_payload`,
    :meth:`write_payload` and :meth:`payload_len`. The frame (id and
    length) is handled by :func:`read_chunk` and :func:`write_chunk`.
    Concrete chunks derive from :class:`finalfusion.container.FileChunk`,
    which adds ``write(file)`` (the chunk alone as a finalfusion file): a
    whole file is the job of a higher layer.

    Examples
    --------
    >>> from finalfusion.vocab import SimpleVocab
    >>> chunk = SimpleVocab(["a"])
    >>> isinstance(chunk, Chunk), chunk.chunk_id, chunk.payload_len(0)
    (True, <ChunkIdentifier.SimpleVocab: 1>, 13)
    """

    #: The identifier in the chunk's frame, which decides the class a reader parses the payload with.
    chunk_id: ClassVar[ChunkIdentifier]
    #: Whether a reader may meet this chunk with a declared length shorter
    #: than its contents (a known legacy writer bug, see :meth:`legacy_length`).
    length_may_be_short: ClassVar[bool] = False
    #: For a payload that ends in a bulk array the parse only views: how many
    #: payload bytes the parse reads before it. An eager read in parse order
    #: may then read the rest of the payload last (see ``finalfusion._source.LazyFill``).
    #: ``None``: the parse needs the whole payload.
    deferrable_from: ClassVar[int | None] = None
    #: Whether the payload ends in rows that :meth:`read_head` can leave at a server (the storage chunks).
    rows_last: ClassVar[bool] = False

    @classmethod
    def read_head(cls, reader: ByteReader, rows: Any) -> Self:
        """Parse a payload that ends in rows, leaving the rows at a server (for classes with :attr:`rows_last`).

        ``reader`` holds a prefix of the payload (a :class:`~finalfusion.errors.Truncated`
        asks for a longer one); ``rows`` (a ``finalfusion._remote_rows.RowsAt``)
        makes the rows from where they start. ``load_finalfusion(url, mmap=True)``
        reads storage chunks this way.

        Examples
        --------
        >>> from finalfusion.vocab import SimpleVocab
        >>> SimpleVocab.rows_last
        False
        """
        raise NotImplementedError

    @classmethod
    def read_payload(cls, reader: ByteReader) -> Self:
        """Parse the payload at ``reader.pos`` (the frame is already consumed).

        Examples
        --------
        >>> import io
        >>> from finalfusion.vocab import SimpleVocab
        >>> buf = io.BytesIO()
        >>> SimpleVocab(["a"]).write_payload(ByteWriter(buf))
        >>> SimpleVocab.read_payload(ByteReader(buf.getvalue()))
        SimpleVocab(['a'] (1 words))
        """
        raise NotImplementedError

    @classmethod
    def check_declared(cls, declared: int, at: int) -> None:
        """Refuse a declared payload length no chunk of this class may have, before the payload is read (it starts at ``at``).

        Readers of a stream or a URL call it between a chunk's frame and its
        payload, so a bounded chunk (the metadata's TOML, see
        ``finalfusion.limits.MAX_METADATA_BYTES``) that claims more is refused
        before its bytes arrive; the parse checks the same again. Most chunks
        have no bound of their own: their lengths are checked against the
        bytes the input holds.

        Raises
        ------
        FormatError
            For a length past the class's bound.

        Examples
        --------
        >>> from finalfusion.vocab import SimpleVocab
        >>> SimpleVocab.check_declared(1 << 40, 24)  # no bound of its own
        """

    def write_payload(self, writer: ByteWriter) -> None:
        """Write the payload (without the frame) at ``writer.pos``.

        Examples
        --------
        >>> import io
        >>> from finalfusion.vocab import SimpleVocab
        >>> buf = io.BytesIO()
        >>> SimpleVocab(["a"]).write_payload(ByteWriter(buf))  # u64 word count, then u32 length + UTF-8 per word
        >>> buf.getvalue()
        b'\\x01\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x01\\x00\\x00\\x00a'
        """
        raise NotImplementedError

    def payload_len(self, offset: int) -> int:
        """Length of the payload when it starts at absolute file ``offset``.

        The offset matters because array chunks pad to 4-byte alignment
        relative to the start of the file (docs/format.md §4).

        Examples
        --------
        >>> import numpy as np
        >>> from finalfusion.storage import NdArray
        >>> [NdArray(np.eye(2, dtype=np.float32)).payload_len(offset) for offset in (0, 1, 2, 3)]
        [36, 35, 34, 33]
        """
        raise NotImplementedError

    def legacy_length(self, declared: int, consumed: int) -> str | None:
        """Explain an accepted mismatch between declared and parsed length.

        Returns ``None`` (the default) when a mismatch is an error.

        Examples
        --------
        >>> from finalfusion.vocab import SimpleVocab
        >>> SimpleVocab(["a"]).legacy_length(declared=20, consumed=13) is None
        True
        """
        return None

    @classmethod
    def chunk_identifier(cls) -> ChunkIdentifier:
        """The chunk's identifier (finalfusion-python 0.7 spelling).

        Examples
        --------
        >>> from finalfusion.norms import Norms
        >>> Norms.chunk_identifier()
        <ChunkIdentifier.NdNorms: 6>
        """
        return cls.chunk_id

    def write_chunk(self, file: BinaryIO) -> None:
        """Write this chunk, framed, at the current position of ``file``.

        The padding of array chunks depends on the absolute position, so
        ``file.tell()`` must be the offset within the finalfusion file.

        Examples
        --------
        >>> import io
        >>> from finalfusion.vocab import SimpleVocab
        >>> buf = io.BytesIO()
        >>> SimpleVocab(["a"]).write_chunk(buf)
        >>> read_chunk(ByteReader(buf.getvalue()))
        SimpleVocab(['a'] (1 words))
        """
        write_chunk(ByteWriter(file, file.tell()), self)


_REGISTRY: dict[int, type[Chunk]] = {}

_C = TypeVar("_C", bound=type[Chunk])


def register(cls: _C) -> _C:
    """Class decorator: make ``cls`` the reader for its ``chunk_id``.

    Raises
    ------
    RuntimeError
        If another class is already registered for the id (at import time).

    Examples
    --------
    >>> class AnotherArray(Chunk):
    ...     chunk_id = ChunkIdentifier.NdArray
    >>> register(AnotherArray)
    Traceback (most recent call last):
    ...
    RuntimeError: chunk id 2 is registered twice: NdArray and AnotherArray
    """
    chunk_id = int(cls.chunk_id)
    if cls.chunk_id.role not in ROLE_RANK:
        raise RuntimeError(f"chunk id {chunk_id} ({cls.chunk_id.name}) is not a chunk a class can read")
    if chunk_id in _REGISTRY:
        raise RuntimeError(f"chunk id {chunk_id} is registered twice: {_REGISTRY[chunk_id].__name__} and {cls.__name__}")
    _REGISTRY[chunk_id] = cls
    return cls


def chunk_classes() -> tuple[type[Chunk], ...]:
    """Every registered chunk class, by chunk id.

    Examples
    --------
    >>> [cls.__name__ for cls in chunk_classes() if cls.chunk_id.role == "storage"]
    ['NdArray', 'QuantizedArray']
    """
    return tuple(_REGISTRY[chunk_id] for chunk_id in sorted(_REGISTRY))


def chunk_class(chunk_id: int, *, offset: int | None = None, where: str = "chunk stream") -> type[Chunk]:
    """Look up the registered class of ``chunk_id``.

    Raises
    ------
    UnknownChunk
        For identifiers the format does not define (including 0, the header).

    Examples
    --------
    >>> chunk_class(ChunkIdentifier.NdArray).__name__, chunk_class(8).__name__
    ('NdArray', 'ExplicitVocab')
    """
    try:
        return _REGISTRY[chunk_id]
    except KeyError:
        raise UnknownChunk(
            "unknown chunk identifier",
            offset=offset,
            chunk=where,
            expected=f"one of {sorted(_REGISTRY)}",
            found=chunk_id,
        ) from None


def read_frame(buf: Buffer, at: int) -> tuple[int, int]:
    """The chunk id and declared payload length of the frame at ``at`` (the caller checks that 12 bytes are there).

    Examples
    --------
    >>> read_frame(bytes([2, 0, 0, 0, 36, 0, 0, 0, 0, 0, 0, 0]), 0)
    (2, 36)
    """
    chunk_id, declared = _FRAME.unpack_from(buf, at)
    return int(chunk_id), int(declared)


def read_chunk(reader: ByteReader) -> Chunk:
    """Read one framed chunk at ``reader.pos``.

    The payload is parsed within its declared length; afterwards the bytes
    consumed must equal the declared length (the one tolerated exception is
    described by :meth:`Chunk.legacy_length`).

    Raises
    ------
    UnknownChunk, Truncated, FormatError

    Examples
    --------
    >>> import io
    >>> from finalfusion.vocab import SimpleVocab
    >>> buf = io.BytesIO()
    >>> write_chunk(ByteWriter(buf), SimpleVocab(["a", "b"]))
    >>> reader = ByteReader(buf.getvalue())
    >>> read_chunk(reader), reader.remaining
    (SimpleVocab(['a', 'b'] (2 words)), 0)
    """
    file_end = reader.end
    frame_at = reader.pos
    reader.chunk = "chunk frame"
    chunk_id = reader.u32("chunk identifier")
    cls = chunk_class(chunk_id, offset=frame_at)
    reader.chunk = cls.__name__
    declared = reader.u64("chunk length")
    start = reader.pos
    if declared > file_end - start:
        raise Truncated(
            "declared chunk length runs past the end of the data",
            offset=frame_at + 4,
            chunk=cls.__name__,
            expected=f"a length of at most {file_end - start} bytes (the data left after the frame)",
            found=f"a declared length of {declared} bytes",
        )
    if not cls.length_may_be_short:
        reader.end = start + declared
    try:
        chunk = cls.read_payload(reader)
    finally:
        reader.end = file_end
    consumed = reader.pos - start
    if consumed != declared:
        note = chunk.legacy_length(declared, consumed)
        if note is None:
            raise FormatError(
                "chunk length disagrees with the parsed contents",
                offset=frame_at + 4,
                chunk=cls.__name__,
                expected=f"{declared} bytes (declared)",
                found=f"{consumed} bytes parsed",
            )
        warnings.warn(note, LegacyFormatWarning, stacklevel=4)
    return chunk


def write_chunk(writer: ByteWriter, chunk: Chunk, declared: int | None = None) -> None:
    """Write ``chunk`` framed with its id and correct length (``declared``, if already computed).

    Examples
    --------
    >>> import io
    >>> from finalfusion.vocab import SimpleVocab
    >>> buf = io.BytesIO()
    >>> write_chunk(ByteWriter(buf), SimpleVocab(["a"]))
    >>> frame = buf.getvalue()
    >>> int.from_bytes(frame[:4], "little"), int.from_bytes(frame[4:12], "little"), len(frame)  # id, payload length, size
    (1, 13, 25)
    """
    writer.u32(int(chunk.chunk_id))
    if declared is None:
        declared = chunk.payload_len(writer.pos + 8)
    writer.u64(declared)
    start = writer.pos
    chunk.write_payload(writer)
    if writer.pos - start != declared:
        raise RuntimeError(f"internal error: {type(chunk).__name__} wrote {writer.pos - start} bytes but declared {declared}")


def check_order(ids: Sequence[ChunkIdentifier], *, offset: int | None, where: str) -> None:
    """Require at most one chunk per role, in the order metadata, vocab, storage, norms.

    Raises
    ------
    ChunkOrder

    Examples
    --------
    >>> check_order([ChunkIdentifier.SimpleVocab, ChunkIdentifier.NdArray], offset=None, where="chunks to write")
    >>> try:
    ...     check_order([ChunkIdentifier.NdArray, ChunkIdentifier.SimpleVocab], offset=12, where="header")
    ... except ChunkOrder as err:
    ...     print(err.message, err.found)
    chunks out of order or repeated ['NdArray', 'SimpleVocab']
    """
    last = -1
    for cid in ids:
        rank = ROLE_RANK[cid.role]
        if rank <= last:
            raise ChunkOrder(
                "chunks out of order or repeated",
                offset=offset,
                chunk=where,
                expected="[Metadata] vocabulary storage [NdNorms]",
                found=[c.name for c in ids],
            )
        last = rank
