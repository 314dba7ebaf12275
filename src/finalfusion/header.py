"""The finalfusion file header (docs/format.md §2).

===========  ======  ==============================================
offset       size    field
===========  ======  ==============================================
0            4       magic ``FiFu``
4            4       version (u32), must be 0
8            4       n_chunks (u32), at least 1
12           4·n     chunk identifiers (u32), in file order
===========  ======  ==============================================
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from dataclasses import dataclass
from typing import BinaryIO, Final

from finalfusion._binary import Buffer, ByteReader, ByteWriter
from finalfusion.chunks import ROLE_RANK, ChunkIdentifier, check_order, chunk_class
from finalfusion.errors import BadMagic, FormatError, Truncated, UnsupportedVersion

__all__ = ["FIXED_BYTES", "MAGIC", "MAX_CHUNKS", "VERSION", "Header", "check_magic", "header_nbytes"]

#: The four bytes every finalfusion file starts with (docs/format.md §2).
MAGIC: Final = b"FiFu"


def check_magic(prefix: bytes) -> None:
    """Raise :class:`BadMagic` if the first bytes of an input cannot start a finalfusion file.

    Used on streams (pipes, devices) before they are read to their end; a
    prefix shorter than the magic is left to the full parse (``Truncated``).

    Examples
    --------
    >>> check_magic(b"FiFu")
    >>> check_magic(b"\\0\\0\\0\\0")
    Traceback (most recent call last):
    ...
    finalfusion.errors.BadMagic: header: not a finalfusion file: expected b'FiFu', found b'\\x00\\x00\\x00\\x00' (at byte offset 0)
    """
    if len(prefix) >= len(MAGIC) and prefix[: len(MAGIC)] != MAGIC:
        raise BadMagic("not a finalfusion file", offset=0, chunk="header", expected=MAGIC, found=bytes(prefix[: len(MAGIC)]))


#: The format version this library reads and writes (docs/format.md §2).
VERSION: Final = 0
#: Most chunks a file can have: one per role (metadata, vocabulary, storage, norms).
MAX_CHUNKS: Final = len(ROLE_RANK)
#: Bytes before the list of chunk identifiers: magic, version, n_chunks.
FIXED_BYTES: Final = 12


def header_nbytes(buf: Buffer) -> int:
    """The size of the header at the start of ``buf``, from its first :data:`FIXED_BYTES` bytes (not validated).

    Examples
    --------
    >>> header_nbytes(b"FiFu" + bytes(4) + (2).to_bytes(4, "little"))
    20
    """
    (n_chunks,) = struct.unpack_from("<I", buf, 8)
    return FIXED_BYTES + 4 * int(n_chunks)


@dataclass(frozen=True, init=False, repr=False)
class Header:
    """The identifiers of the chunks a file contains, in order.

    Immutable and hashable: the identifiers are kept in a tuple, and
    :attr:`chunk_ids` gives them as a new ``list`` on each access, as
    finalfusion-python 0.7 returned a list (changing that list does not
    change the header).

    Parameters
    ----------
    chunk_ids
        The chunk identifiers in file order (:class:`ChunkIdentifier` or their
        integer values).

    Examples
    --------
    >>> h = Header([ChunkIdentifier.SimpleVocab, ChunkIdentifier.NdArray])
    >>> h.nbytes, h.chunk_ids
    (20, [<ChunkIdentifier.SimpleVocab: 1>, <ChunkIdentifier.NdArray: 2>])
    >>> h.chunk_ids.append(ChunkIdentifier.NdNorms)  # a copy: the header is unchanged
    >>> h == Header((1, 2)), len(h.chunk_ids)
    (True, 2)
    """

    _ids: tuple[ChunkIdentifier, ...]

    def __init__(self, chunk_ids: Iterable[ChunkIdentifier | int]) -> None:
        object.__setattr__(self, "_ids", tuple(ChunkIdentifier(c) for c in chunk_ids))

    @property
    def chunk_ids(self) -> list[ChunkIdentifier]:
        """The chunk identifiers in file order: a new ``list`` each time (finalfusion-python 0.7 returned a list).

        Examples
        --------
        >>> Header((ChunkIdentifier.SimpleVocab,)).chunk_ids
        [<ChunkIdentifier.SimpleVocab: 1>]
        """
        return list(self._ids)

    def __repr__(self) -> str:
        return f"Header(chunk_ids={self.chunk_ids!r})"

    @property
    def nbytes(self) -> int:
        """Size of the header on disk: 12 bytes plus 4 per chunk.

        Examples
        --------
        >>> Header((ChunkIdentifier.Metadata, ChunkIdentifier.SimpleVocab, ChunkIdentifier.NdArray)).nbytes
        24
        """
        return FIXED_BYTES + 4 * len(self._ids)

    @classmethod
    def read(cls, reader: ByteReader) -> Header:
        """Read and validate a header at ``reader.pos``.

        Raises
        ------
        BadMagic, UnsupportedVersion, UnknownChunk, ChunkOrder, Truncated

        Examples
        --------
        >>> data = b"FiFu" + bytes(4) + (1).to_bytes(4, "little") + (1).to_bytes(4, "little")  # version 0, one chunk: id 1
        >>> Header.read(ByteReader(data))
        Header(chunk_ids=[<ChunkIdentifier.SimpleVocab: 1>])
        """
        reader.chunk = "header"
        if reader.remaining < 4:
            raise Truncated("data ends inside the magic", offset=reader.pos, chunk="header", expected="4 bytes", found=f"{reader.remaining} bytes")
        magic = reader.take(4, "magic")
        if magic != MAGIC:
            raise BadMagic("not a finalfusion file", offset=0, chunk="header", expected=MAGIC, found=magic)
        version = reader.u32("version")
        if version != VERSION:
            raise UnsupportedVersion("unsupported format version", offset=4, chunk="header", expected=VERSION, found=version)
        n_chunks = reader.u32("number of chunks")
        if n_chunks == 0:
            raise FormatError("header lists no chunks", offset=8, chunk="header", expected="at least 1", found=0)
        if n_chunks <= MAX_CHUNKS:
            reader.require(4 * n_chunks, f"the list of {n_chunks} chunk identifiers")
        ids = []
        # Each id is checked as it is read: a list longer than MAX_CHUNKS repeats a role and
        # fails at its first extra id, so a hostile count costs nothing (even on an endless stream).
        for _ in range(n_chunks):
            at = reader.pos
            raw = reader.u32("chunk identifier")
            ids.append(chunk_class(raw, offset=at, where="header").chunk_id)
            check_order(ids, offset=12, where="header")
        return cls(ids)

    @staticmethod
    def read_chunk(file: BinaryIO) -> Header:
        """Read and validate the header from a binary file object positioned at it (finalfusion-python 0.7's name).

        The file is left positioned after the header, at the first chunk's
        frame. Reads at most the bytes the header declares, and never more
        ids than a valid header can hold (:data:`MAX_CHUNKS`), so a hostile
        chunk count costs nothing, even on an endless stream.

        Raises
        ------
        BadMagic, UnsupportedVersion, UnknownChunk, ChunkOrder, Truncated

        Examples
        --------
        >>> import io
        >>> f = io.BytesIO()
        >>> Header((ChunkIdentifier.SimpleVocab, ChunkIdentifier.NdArray)).write_chunk(f)
        >>> _ = f.seek(0)
        >>> Header.read_chunk(f).chunk_ids, f.tell()
        ([<ChunkIdentifier.SimpleVocab: 1>, <ChunkIdentifier.NdArray: 2>], 20)
        """
        data = file.read(FIXED_BYTES)
        if len(data) == FIXED_BYTES and data[:4] == MAGIC:
            # At most one id more than a valid header can list (Header.read refuses it).
            want = min(header_nbytes(data), FIXED_BYTES + 4 * (MAX_CHUNKS + 1)) - FIXED_BYTES
            parts = [data]
            while want > 0:
                block = file.read(min(want, 1 << 16))
                if not block:
                    break
                parts.append(block)
                want -= len(block)
            data = b"".join(parts)
        return Header.read(ByteReader(data))

    def write_chunk(self, file: BinaryIO) -> None:
        """Write the header to a binary file object (finalfusion-python 0.7's name).

        Examples
        --------
        >>> import io
        >>> f = io.BytesIO()
        >>> Header((ChunkIdentifier.SimpleVocab, ChunkIdentifier.NdArray)).write_chunk(f)
        >>> f.getvalue()[:4], len(f.getvalue())
        (b'FiFu', 20)
        """
        self.write(ByteWriter(file))

    def write(self, writer: ByteWriter) -> None:
        """Write the header.

        Examples
        --------
        >>> import io
        >>> buf = io.BytesIO()
        >>> Header((ChunkIdentifier.SimpleVocab, ChunkIdentifier.NdArray)).write(ByteWriter(buf))
        >>> Header.read(ByteReader(buf.getvalue())).chunk_ids
        [<ChunkIdentifier.SimpleVocab: 1>, <ChunkIdentifier.NdArray: 2>]
        """
        writer.raw(MAGIC)
        writer.u32(VERSION)
        writer.u32(len(self._ids))
        for cid in self._ids:
            writer.u32(int(cid))
