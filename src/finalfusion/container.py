"""Whole finalfusion files: a header and a sequence of chunks, read and written.

A file is a header followed by chunks (docs/format.md §1). :func:`read_chunks`
walks them strictly: every chunk must be known, parse to exactly its
declared length, and match the header's list -- with two tolerated legacy
deviations (a trailing ``NdNorms`` chunk the header omits, and the short
explicit-vocabulary length of finalfusion-python 0.7), each reported with a
:class:`~finalfusion.errors.LegacyFormatWarning`. :func:`write_chunks` lays
out and writes a whole file.

This module knows chunks only through the registry of
:mod:`finalfusion.chunks` (ids, roles, classes): it imports no chunk class.
The chunk classes build on it -- :class:`FileChunk` gives each of them
``write(file)``, and their ``load_*`` functions call :func:`load_chunk` --
and the :class:`~finalfusion.Embeddings` facade reads and writes through it.
Inputs come from :mod:`finalfusion._source`, atomic writes from
:mod:`finalfusion._atomic` (see docs/architecture.md).
"""

from __future__ import annotations

import gzip
import io
import os
import warnings
from collections.abc import Sequence
from typing import IO, TYPE_CHECKING, BinaryIO, Final, NamedTuple, TypeVar, cast

from finalfusion import _source
from finalfusion._atomic import Target, atomic_output, split_write
from finalfusion._binary import Buffer, ByteReader, ByteWriter
from finalfusion._fileref import FileRef, UrlRef, edge_digest, edge_ranges, map_with_ref
from finalfusion._remote_rows import RowsAt
from finalfusion._source import LazyFill, Source, fill, is_url, opened, opened_remote, path_of, regular_file, size_bound, skip, whole
from finalfusion.chunks import FRAME_BYTES, Chunk, ChunkIdentifier, check_order, chunk_class, chunk_classes, read_chunk, read_frame, write_chunk
from finalfusion.errors import ChunkOrder, FormatError, LegacyFormatWarning, Truncated, UnknownChunk
from finalfusion.header import FIXED_BYTES, MAGIC, MAX_CHUNKS, Header, check_magic, header_nbytes

if TYPE_CHECKING:
    from finalfusion._remote import RangeSource

__all__ = [
    "PARALLEL_TAIL_BYTES",
    "FileChunk",
    "FileRef",
    "Loaded",
    "find_chunk",
    "load_chunk",
    "read_chunks",
    "read_remote",
    "read_source",
    "write_chunks",
]


_F = TypeVar("_F", bound="FileChunk")


class FileChunk(Chunk):
    """A chunk that can also be written as a finalfusion file of its own.

    Every concrete chunk class derives from it (through ``Vocab``,
    ``Storage``, ``Norms``, ``Metadata``). It lives here rather than in
    :mod:`finalfusion.chunks` because a whole file is this module's job:
    chunks.py stays below the header and the container.

    Examples
    --------
    >>> from finalfusion.vocab import SimpleVocab
    >>> isinstance(SimpleVocab(["a"]), FileChunk)
    True
    """

    def write(self, file: Target) -> None:
        """Write this chunk alone as a finalfusion file (header + chunk), atomically.

        Examples
        --------
        >>> import io
        >>> from finalfusion.vocab import SimpleVocab, load_vocab
        >>> buf = io.BytesIO()
        >>> SimpleVocab(["a"]).write(buf)
        >>> load_vocab(buf.getvalue())
        SimpleVocab(['a'] (1 words))
        """
        write_chunks([self], file)

    @classmethod
    def read_chunk(cls: type[_F], file: BinaryIO, mmap: bool = False) -> _F:
        """Read the chunk whose frame ``file`` was just positioned after (finalfusion-python 0.7's contract).

        That is where :func:`find_chunk` leaves the file. The chunk is parsed
        from the whole file (mapped with ``mmap=True`` when ``file`` is a
        real file), so padding, declared length and legacy rules are checked
        exactly as when loading; afterwards ``file`` is positioned after
        the chunk.

        Raises
        ------
        ValueError
            If ``file`` is not positioned after a chunk frame.
        FormatError
            If the chunk is malformed or not a ``cls``.

        Examples
        --------
        >>> import numpy as np
        >>> from finalfusion import Embeddings, NdArray, SimpleVocab
        >>> from finalfusion.norms import Norms
        >>> f = io.BytesIO()
        >>> Embeddings(NdArray(np.eye(2, dtype=np.float32)), SimpleVocab(["a", "b"]), norms=Norms([2.0, 3.0])).write(f)
        >>> find_chunk(f, [ChunkIdentifier.NdNorms])
        <ChunkIdentifier.NdNorms: 6>
        >>> Norms.read_chunk(f).norms.tolist(), f.tell() == len(f.getvalue())
        ([2.0, 3.0], True)
        """
        at = file.tell() - FRAME_BYTES
        if at < FIXED_BYTES + 4:
            raise ValueError(f"the file must be positioned after a chunk frame (see find_chunk), not at offset {at + FRAME_BYTES}")
        file.seek(0)
        buf, _name = _source.open_buffer(file, mmap)
        reader = ByteReader(buf, at)
        chunk = read_chunk(reader)
        if not isinstance(chunk, cls):
            raise FormatError(f"not a {cls.__name__} chunk", offset=at, chunk=type(chunk).__name__, expected=cls.__name__, found=type(chunk).__name__)
        file.seek(reader.pos)
        return chunk


# --- reading -----------------------------------------------------------------------------


class Loaded(NamedTuple):
    """The chunks of a file, as :func:`read_source` returns them.

    Examples
    --------
    >>> import io, numpy as np
    >>> from finalfusion import Embeddings, NdArray, SimpleVocab
    >>> buf = io.BytesIO(); Embeddings(NdArray(np.eye(2, dtype=np.float32)), SimpleVocab(["a", "b"])).write(buf)
    >>> loaded = read_source(buf.getvalue())
    >>> [type(chunk).__name__ for _, chunk in loaded.chunks], loaded.file_ref
    (['SimpleVocab', 'NdArray'], None)
    """

    #: A name for messages (the path, ``<fd N>``, ``<bytes>`` ...).
    name: str
    #: ``(offset, chunk)`` for every chunk, in file order.
    chunks: list[tuple[int, Chunk]]
    #: For a path read with ``mmap=True``: what was mapped; for a URL, the remote file whose rows stay at the server
    #: (such embeddings pickle as this reference).
    file_ref: FileRef | UrlRef | None = None


def read_chunks(buf: Buffer) -> tuple[Header, list[tuple[int, Chunk]]]:
    """Parse a whole finalfusion file held in ``buf``.

    Returns
    -------
    header, chunks
        The header and ``(offset, chunk)`` for every chunk in file order.

    Raises
    ------
    FormatError
        (or a subclass) for any malformed input.

    Examples
    --------
    >>> import numpy as np
    >>> from finalfusion import Embeddings, NdArray, SimpleVocab
    >>> out = io.BytesIO()
    >>> Embeddings(NdArray(np.eye(2, dtype=np.float32)), SimpleVocab(["a", "b"])).write(out)
    >>> header, chunks = read_chunks(out.getvalue())
    >>> header.chunk_ids, [(offset, type(chunk).__name__) for offset, chunk in chunks]
    ([<ChunkIdentifier.SimpleVocab: 1>, <ChunkIdentifier.NdArray: 2>], [(20, 'SimpleVocab'), (50, 'NdArray')])
    """
    return _read_chunks(buf, None)


def _before_chunk(lazy: LazyFill, at: int) -> None:
    """Read the chunk whose frame is at ``at``; leave the bulk array of a large deferrable chunk for the end."""
    lazy.ensure(at + FRAME_BYTES)
    if at + FRAME_BYTES > lazy.size:
        return  # the parse reports the truncation
    chunk_id, declared = read_frame(lazy.buf, at)
    start = at + FRAME_BYTES
    end = start + declared
    try:
        cls = chunk_class(chunk_id)
    except UnknownChunk:
        lazy.ensure(lazy.size)  # the parse reports it
        return
    head = cls.deferrable_from
    if head is not None and end <= lazy.size and declared >= _source.MIN_SIZE:
        lazy.ensure(start + head)
        lazy.defer(end)
    elif cls.length_may_be_short:
        lazy.ensure(lazy.size)  # a legacy chunk that may run past its declared length
    else:
        lazy.ensure(end)


def _read_chunks(buf: Buffer, lazy: LazyFill | None, deferred: bool = True) -> tuple[Header, list[tuple[int, Chunk]]]:
    """:func:`read_chunks`; with ``lazy`` (whose ``buf`` is ``buf``), each part is read just before it is parsed.

    ``deferred=False`` leaves the deferred arrays unread (they view zeros).
    """
    reader = ByteReader(buf)
    if lazy is not None:
        lazy.ensure(FIXED_BYTES)
        if lazy.filled >= FIXED_BYTES:
            lazy.ensure(min(header_nbytes(lazy.buf), FIXED_BYTES + 4 * (MAX_CHUNKS + 1)))
    header = Header.read(reader)
    chunks: list[tuple[int, Chunk]] = []
    listed = list(header.chunk_ids)
    while reader.remaining > 0:
        at = reader.pos
        if lazy is not None:
            lazy.ensure(at + FRAME_BYTES)
        if reader.remaining >= FRAME_BYTES:
            _expect_next(listed, [c.chunk_id for _, c in chunks], read_frame(buf, at)[0], at)
        if lazy is not None:
            _before_chunk(lazy, at)
        chunks.append((at, read_chunk(reader)))
    _check_found(listed, [c.chunk_id for _, c in chunks], chunks[0][0] if chunks else FIXED_BYTES, reader.pos)
    if lazy is not None:
        lazy.finish(deferred)
    return header, chunks


def _expect_next(listed: list[ChunkIdentifier], found: list[ChunkIdentifier], raw_id: int, at: int) -> None:
    """Check the id of the chunk framed at ``at`` against the header (and the ids ``found`` before it) before its payload is parsed (or read, on a stream).

    The next chunk must be the next one the header lists, or, after all of
    them, an ``NdNorms`` chunk the header omits (the legacy rule of
    :func:`_check_found`). Anything else -- a repeated chunk, one out of
    order, data after the last chunk -- is refused at its frame, so 40,000
    repeated chunks cost one parse, not 40,000, and an endless tail after
    the last chunk is never read.

    Raises
    ------
    UnknownChunk
        For an id the format does not define.
    ChunkOrder
        For any other chunk than the expected one.
    """
    chunk_id = chunk_class(raw_id, offset=at).chunk_id
    k = len(found)
    if k < len(listed) and chunk_id == listed[k]:
        return
    if k == len(listed) and chunk_id == ChunkIdentifier.NdNorms and ChunkIdentifier.NdNorms not in listed:
        return
    raise ChunkOrder(
        "the chunks in the file disagree with the header",
        offset=at,
        chunk="header",
        expected=[c.name for c in listed],
        found=[*(c.name for c in found), chunk_id.name],
    )


def _check_found(listed: list[ChunkIdentifier], found: list[ChunkIdentifier], first: int, end: int) -> None:
    """After the last chunk (at offset ``end``; the first at ``first``): every listed chunk was ``found``; warn about a legacy unlisted ``NdNorms``."""
    if found == [*listed, ChunkIdentifier.NdNorms]:  # _expect_next let it through: the header omits it
        warnings.warn(
            "the file has an NdNorms chunk that its header does not list (written by finalfusion-rust < 0.11); "
            "read normally, written back with a complete header",
            LegacyFormatWarning,
            stacklevel=5,
        )
    elif found != listed:  # a prefix of the list (_expect_next allows nothing else)
        raise Truncated(
            "the file ends before all chunks listed in the header",
            offset=end,
            chunk=ChunkIdentifier(listed[len(found)]).name,
            expected=[c.name for c in listed],
            found=[c.name for c in found],
        )
    check_order(found, offset=first, where="chunk stream")


def _check_claim(f: IO[bytes], raw_id: int, declared: int, held: int, at: int) -> None:
    """Refuse a declared chunk length that the rest of the stream cannot hold (gzip: see :func:`finalfusion._source.size_bound`)."""
    bound = size_bound(f)
    if bound is not None and declared > held + bound:
        name = chunk_class(raw_id).chunk_id.name
        raise Truncated(
            "declared chunk length runs past the end of the data",
            offset=at + 4,
            chunk=name,
            expected=f"a length of at most {held + bound} bytes (what the rest of the input can hold"
            + (
                ", at most finalfusion.limits.MAX_GZIP_EXPANSION times its compressed bytes: raise it for a file that compresses better)"
                if isinstance(cast(object, f), gzip.GzipFile)
                else ")"
            ),
            found=f"a declared length of {declared} bytes",
        )


def _read_stream(
    f: IO[bytes], writable: bool = True, remote: tuple[RangeSource, int | None] | None = None, only: type[Chunk] | None = None
) -> tuple[Header, list[tuple[int, Chunk]]]:
    """:func:`read_chunks` for a stream of unknown size (gzip, a pipe, a file object without a descriptor).

    The stream is never read to its end first: it may never end. The header
    is read (its magic first), then each chunk on its own: its frame, the
    check of its id against the header (:func:`_expect_next`) and of its
    declared length against the bytes left and its class's own bound
    (:meth:`~finalfusion.chunks.Chunk.check_declared`), then the
    bytes its frame declares -- in reads that grow with what has arrived
    (:func:`finalfusion._source.fill`), so a declared length larger than
    what the stream holds ends in :class:`Truncated` when it ends. After
    the last chunk only a frame's 12 bytes are looked at: a stream that
    goes on is refused there (as trailing data is in a file), not read.

    Each chunk is parsed from its own buffer, which starts with as many
    bytes as its offset modulo 4 so that array padding, which depends on the
    absolute offset (docs/format.md §4), comes out right; error offsets are
    moved to the file's. ``writable=False`` gives read-only arrays (as
    ``mmap=True`` does for other inputs). With ``remote`` (the remote file
    ``f`` reads and a cache size), a chunk whose payload ends in rows is
    parsed up to them and the rows stay at the server (:func:`_remote_head`).
    With ``only`` (a chunk class), the other chunks are checked by their
    frames (id, order, declared length) and skipped, not read -- on a remote
    file a seek, so ``load_metadata(url)`` fetches the frames and the
    metadata only -- and only the chunks of that class are returned (a
    legacy chunk whose length may be short is parsed to find its end).
    """
    buf = bytearray()
    fill(f, buf, len(MAGIC))
    check_magic(bytes(buf))
    if fill(f, buf, FIXED_BYTES):
        fill(f, buf, min(header_nbytes(buf), FIXED_BYTES + 4 * (MAX_CHUNKS + 1)))
    header = Header.read(ByteReader(buf))
    listed = list(header.chunk_ids)
    chunks: list[tuple[int, Chunk]] = []
    found: list[ChunkIdentifier] = []
    at = header.nbytes
    carry = bytes(buf[at:])  # empty: the header was read to its end exactly
    while True:
        pad = at % 4
        buf = bytearray(pad) + carry
        if not fill(f, buf, pad + FRAME_BYTES) and len(buf) == pad:
            break  # the stream ends after a chunk
        if len(buf) >= pad + FRAME_BYTES:
            raw_id, declared = read_frame(buf, pad)
            _expect_next(listed, found, raw_id, at)
            _check_claim(f, raw_id, declared, len(buf) - pad - FRAME_BYTES, at)
            cls = chunk_class(raw_id)
            if only is not None and not issubclass(cls, only) and not cls.length_may_be_short:
                carry = _skip_payload(f, buf, pad, declared, at, cls)
                found.append(cls.chunk_id)
                at += FRAME_BYTES + declared
                continue
            cls.check_declared(declared, at + FRAME_BYTES)
            if remote is not None and cls.rows_last:
                chunk, carry = _remote_head(f, buf, pad, cls, declared, at, remote)
                chunks.append((at, chunk))
                found.append(cls.chunk_id)
                at += FRAME_BYTES + declared
                continue
            # A legacy chunk may hold up to 8 bytes per n-gram more than it declares, and each
            # n-gram takes at least 4 declared bytes (docs/format.md §5.8): at most twice more.
            extra = 2 * declared if chunk_class(raw_id).length_may_be_short else 0
            fill(f, buf, pad + FRAME_BYTES + declared + extra)
        reader = ByteReader(buf if writable else memoryview(buf).toreadonly(), pad)
        try:
            chunk = read_chunk(reader)
        except FormatError as exc:
            raise exc.moved(at - pad) from None
        found.append(chunk.chunk_id)
        if only is None or isinstance(chunk, only):
            chunks.append((at, chunk))
        carry = bytes(buf[reader.pos :])  # read past the chunk's end: only after a legacy chunk
        at += reader.pos - pad
    _check_found(listed, found, header.nbytes if found else FIXED_BYTES, at)
    return header, chunks


def _skip_payload(f: IO[bytes], buf: bytearray, pad: int, declared: int, at: int, cls: type[Chunk]) -> bytes:
    """Skip the payload of the chunk framed at file offset ``at`` (``buf`` holds ``pad`` bytes, its frame and maybe more);
    the bytes ``buf`` held after the chunk, which belong to the next one."""
    held = len(buf) - pad - FRAME_BYTES
    if held >= declared:
        return bytes(buf[pad + FRAME_BYTES + declared :])
    left = declared - held
    if skip(f, left) < left:
        raise Truncated(
            "the data ends inside a chunk",
            offset=at,
            chunk=cls.chunk_id.name,
            expected=f"{declared} bytes (the declared length)",
            found="fewer",
        )
    return b""


#: Bytes of a storage chunk's payload first read to parse its head (doubled while the head needs more).
_HEAD_PREFIX: Final = 1 << 16


def _remote_head(
    f: IO[bytes], buf: bytearray, pad: int, cls: type[Chunk], declared: int, at: int, remote: tuple[RangeSource, int | None]
) -> tuple[Chunk, bytes]:
    """The chunk framed at file offset ``at`` (``buf`` holds ``pad`` bytes and its frame), its rows left at the server.

    The payload is read in prefixes that double while :meth:`~finalfusion.chunks.Chunk.read_head`
    needs more (never past the declared length); ``f`` is then moved past the chunk without reading it.
    Also returns the bytes ``buf`` held after the chunk (read past a legacy chunk before it), which
    belong to the next one.
    """
    start = pad + FRAME_BYTES
    rows = RowsAt(remote[0], remote[1], at - pad, at + FRAME_BYTES + declared, cls.__name__)
    want = min(declared, _HEAD_PREFIX)
    while True:
        ended = not fill(f, buf, start + want)
        reader = ByteReader(bytes(buf), start, end=min(len(buf), start + declared), chunk=cls.__name__)  # a copy: buf may grow
        try:
            chunk = cls.read_head(reader, rows)
        except Truncated as exc:
            if ended or want >= declared:
                raise exc.moved(at - pad) from None
            want = min(declared, 2 * want)
            continue
        except FormatError as exc:
            raise exc.moved(at - pad) from None
        skip(f, max(0, declared - (len(buf) - start)))
        return chunk, bytes(buf[start + declared :])


def read_remote(url: str, cache_bytes: int | None = None, expect: UrlRef | None = None) -> Loaded:
    """Every chunk of the ``.fifu`` at ``url``, the rows of its storage left at the server (``load_finalfusion(url, mmap=True)``).

    The header, vocabulary, norms and metadata are read as they come (range
    requests of :data:`finalfusion._remote.BLOCK_SIZE`); the storage chunk's
    head too (an ``NdArray``'s shape, a ``QuantizedArray``'s quantizer and
    norms), its rows become a ``finalfusion._remote_rows.RemoteRows`` with a
    cache of ``cache_bytes``. Every request is pinned to the version first
    seen (``ETag``), and the first and last 64 KiB are digested for the
    :class:`~finalfusion._fileref.UrlRef` the embeddings pickle as.

    Parameters
    ----------
    url
        The file.
    cache_bytes
        Bytes of row blocks kept (default ``finalfusion._remote_rows.CACHE_BYTES``).
    expect
        The reference of a pickle: the file must still be that one.

    Raises
    ------
    FormatError
        (or a subclass) for any malformed file, also a storage chunk
        declaring more than the file holds.
    FileChangedError
        If ``expect`` is given and the file is another one now.
    OSError
        For the network (see :mod:`finalfusion._remote`).

    Examples
    --------
    fsspec's in-memory filesystem stands in for a server here:

    >>> import pytest; fsspec = pytest.importorskip("fsspec")
    >>> import numpy as np
    >>> from finalfusion import Embeddings, NdArray, SimpleVocab
    >>> out = io.BytesIO(); Embeddings(NdArray(np.eye(2, dtype=np.float32)), SimpleVocab(["a", "b"])).write(out)
    >>> fsspec.filesystem("memory").pipe("/doc/e.fifu", out.getvalue())
    >>> loaded = read_remote("memory://doc/e.fifu")
    >>> [type(chunk).__name__ for _, chunk in loaded.chunks], type(loaded.chunks[1][1].matrix).__name__
    (['SimpleVocab', 'NdArray'], 'RemoteRows')
    >>> loaded.chunks[1][1].matrix[1].tolist(), loaded.file_ref.size
    ([0.0, 1.0], 96)
    """
    with opened_remote(url) as (source, f):
        ref = UrlRef(url, source.size, source.etag, edge_digest(source.fetch(edge_ranges(source.size))), cache_bytes)
        if expect is not None:
            expect.check(ref)
        chunks = _read_stream(cast(IO[bytes], f), writable=False, remote=(source, cache_bytes))[1]
    return Loaded(url, chunks, ref)


def read_source(file: Source, mmap: bool = False, *, matrix: bool = True, cache_bytes: int | None = None) -> Loaded:
    """Read every chunk of the finalfusion file ``file``, whatever kind of :data:`~finalfusion.io.Source` it is.

    With ``mmap=True`` a real file is mapped read-only (a path also gets a
    :class:`~finalfusion._fileref.FileRef`, so embeddings mapped from it
    pickle by reference). Otherwise a large regular file (path, descriptor or
    plain binary file object) is read chunk by chunk as the parse goes, the
    matrix of an ``NdArray`` chunk last: the vocabulary's temporaries are freed
    before the matrix takes memory, which lowers the peak. A small regular
    file and ``bytes`` are read whole first. Anything of unknown size -- a
    gzip stream, a pipe, a device, a file object without a descriptor -- is
    read chunk by chunk, each chunk's declared bytes as they arrive, and
    nothing after the last chunk but a frame (see ``_read_stream``).

    With ``matrix=False`` the ``f32`` data of a large ``NdArray`` chunk is
    not read at all from such files (the chunk then views zeros): for
    callers that want other chunks only.

    A URL with ``mmap=True`` leaves the rows of the storage at the server
    (:func:`read_remote`, with ``cache_bytes``); without it the file is
    read chunk by chunk as a stream.

    Raises
    ------
    FormatError
        (or a subclass) for any malformed input.
    OSError
        If the file cannot be read.

    Examples
    --------
    >>> import numpy as np
    >>> from finalfusion import Embeddings, NdArray, SimpleVocab
    >>> out = io.BytesIO()
    >>> Embeddings(NdArray(np.eye(2, dtype=np.float32)), SimpleVocab(["a", "b"])).write(out)
    >>> loaded = read_source(out.getvalue())
    >>> loaded.name, [type(chunk).__name__ for _, chunk in loaded.chunks], loaded.file_ref
    ('<bytes>', ['SimpleVocab', 'NdArray'], None)
    """
    if mmap and is_url(file):
        return read_remote(cast(str, file), cache_bytes)
    if mmap:
        path = path_of(file)
        if path is not None and os.path.isfile(path):  # a named pipe or a device is read as a stream (below)
            buf, ref = map_with_ref(path, check_magic)
            return Loaded(os.fsdecode(cast("str | os.PathLike[str] | bytes", file)), read_chunks(buf)[1], ref)
    with opened(file) as src:
        if src.file is not None and regular_file(src.file) is None:
            return Loaded(src.name, _read_stream(src.file, writable=not mmap)[1])
        if src.file is not None and not mmap:
            lazy = LazyFill.for_file(src.file)
            if lazy is not None:
                return Loaded(src.name, _read_chunks(lazy.buf, lazy, matrix)[1])
        buf = whole(src, mmap, check_magic)
    return Loaded(src.name, read_chunks(buf)[1])


def _holds_storage(cls: type[Chunk]) -> bool:
    """Whether a chunk that is a ``cls`` can be a storage chunk (which needs the matrix data)."""
    return any(issubclass(c, cls) for c in chunk_classes() if c.chunk_id.role == "storage")


_C = TypeVar("_C", bound=Chunk)


def load_chunk(file: Source, cls: type[_C], mmap: bool = False) -> _C:
    """The first chunk that is an instance of ``cls`` in a finalfusion file.

    For a vocabulary, metadata or norms chunk the matrix data of a plain
    file is never read (see :func:`read_source`), so ``load_vocab`` of a
    large file costs about what its vocabulary does. At a URL only the
    header, the chunks' frames and the chunk asked for are fetched (the
    others are skipped by seeking; their frames are checked as a load checks
    them, their contents are not read): ``load_metadata(url)`` of a 2 GB
    file costs a few blocks. ``mmap`` is then of no use (it concerns rows).

    Raises
    ------
    FormatError
        If the file is malformed or holds no such chunk.

    Examples
    --------
    >>> import numpy as np
    >>> from finalfusion import Embeddings, Metadata, NdArray, SimpleVocab
    >>> out = io.BytesIO()
    >>> Embeddings(NdArray(np.eye(2, dtype=np.float32)), SimpleVocab(["a", "b"])).write(out)
    >>> load_chunk(out.getvalue(), SimpleVocab)
    SimpleVocab(['a', 'b'] (2 words))
    >>> load_chunk(out.getvalue(), Metadata)
    Traceback (most recent call last):
    ...
    finalfusion.errors.FormatError: file: <bytes> has no Metadata chunk: expected a Metadata chunk, found ['SimpleVocab', 'NdArray']
    """
    if is_url(file) and not _holds_storage(cls):
        with opened(file) as src:  # a remote file: skipping a chunk is a seek
            header, chunks = _read_stream(cast(IO[bytes], src.file), only=cls)
        name, held = src.name, [chunk_class(int(c)).__name__ for c in header.chunk_ids]
    else:
        # Only storage needs the matrix data: eager reads of other chunks skip it.
        name, chunks, _ = read_source(file, mmap, matrix=_holds_storage(cls))
        held = [type(c).__name__ for _, c in chunks]
    for _, chunk in chunks:
        if isinstance(chunk, cls):
            return chunk
    raise FormatError(f"{name} has no {cls.__name__} chunk", chunk="file", expected=f"a {cls.__name__} chunk", found=held)


# --- writing -----------------------------------------------------------------------------


def find_chunk(file: BinaryIO, chunks: Sequence[int]) -> ChunkIdentifier | None:
    """Position ``file`` at the payload of the first chunk whose id is in ``chunks`` (finalfusion-python 0.7's contract).

    Seeks ``file`` to its start, reads the header, then walks the chunk
    frames (id and length) without reading payloads. Returns the id found,
    with the file positioned right after that chunk's frame (before its
    payload), or ``None`` after the last chunk.

    Parameters
    ----------
    file
        A seekable binary file object holding a finalfusion file.
    chunks
        The chunk identifiers to look for.

    Raises
    ------
    FormatError
        (a subclass) for a bad header, an unknown chunk id, a frame cut
        short or a declared length running past the end of the file.

    Examples
    --------
    >>> import numpy as np
    >>> from finalfusion import Embeddings, NdArray, SimpleVocab
    >>> f = io.BytesIO()
    >>> Embeddings(NdArray(np.eye(2, dtype=np.float32)), SimpleVocab(["a", "b"])).write(f)
    >>> find_chunk(f, [ChunkIdentifier.NdArray, ChunkIdentifier.QuantizedArray]), f.tell()
    (<ChunkIdentifier.NdArray: 2>, 62)
    >>> find_chunk(f, [ChunkIdentifier.NdNorms]) is None
    True
    """
    size = file.seek(0, io.SEEK_END)
    file.seek(0)
    Header.read_chunk(file)
    wanted = {int(c) for c in chunks}
    while True:
        at = file.tell()
        frame = file.read(FRAME_BYTES)
        if not frame:
            return None
        if len(frame) < FRAME_BYTES:
            raise Truncated("data ends inside a chunk frame", offset=at, chunk="chunk stream", expected=f"{FRAME_BYTES} bytes", found=f"{len(frame)} bytes")
        raw, declared = read_frame(frame, 0)
        chunk_id = chunk_class(raw, offset=at).chunk_id
        if raw in wanted:
            return chunk_id
        if declared > size - file.tell():
            raise Truncated(
                f"{chunk_id.name}: declared chunk length runs past the end of the file",
                offset=at + 4,
                chunk=chunk_id.name,
                expected=f"a length of at most {size - file.tell()} bytes (the data left after the frame)",
                found=f"a declared length of {declared} bytes",
            )
        file.seek(declared, io.SEEK_CUR)


def write_chunks(chunks: Sequence[Chunk], file: Target, *, fsync: bool = False) -> None:
    """Write a header listing ``chunks`` and the chunks themselves.

    To a path the write is atomic: the data goes to a temporary file in the
    same directory, which then replaces the target with ``os.replace``. A
    crash, or an exception raised while writing, leaves the old file (if
    any) untouched, and a file that is memory-mapped can be overwritten
    safely (existing maps keep the old contents).

    Writing to a path also reserves the file's full size up front (so a
    full disk fails before anything is written) and, for large files,
    writes the storage and norms on a second thread with ``os.pwrite`` while
    this thread serialises the vocabulary: the layout (every chunk's offset)
    is computed first, so the two parts never overlap.

    Parameters
    ----------
    chunks
        Chunks in file order (metadata, vocabulary, storage, norms).
    file
        Path or binary file object (written at its current position).
    fsync
        Flush the data to disk before the rename (durability across power loss).

    Raises
    ------
    ChunkOrder
        If the chunks are not in a valid order.
    TypeError, ValueError
        If a chunk cannot be represented (e.g. metadata values TOML cannot hold).
    OSError
        If the disk is full (before the target is touched).

    Examples
    --------
    >>> import numpy as np
    >>> from finalfusion.vocab import SimpleVocab
    >>> from finalfusion.storage import NdArray
    >>> out = io.BytesIO()
    >>> write_chunks([SimpleVocab(["a"]), NdArray(np.ones((1, 2), dtype=np.float32))], out)
    >>> read_chunks(out.getvalue())[1][0][1].words
    ['a']
    """
    ids = [c.chunk_id for c in chunks]
    check_order(ids, offset=None, where="chunks to write")
    header = Header(tuple(ids))
    to_path = isinstance(file, (str, os.PathLike))
    # For a path the layout is computed before touching the disk, so TOML errors lose nothing.
    layout = _layout(header, chunks, 0) if to_path else None
    with atomic_output(file, fsync=fsync, size=layout[-1] if layout else None) as f:
        if layout is None:
            try:
                pos = f.tell()
            except (OSError, AttributeError, io.UnsupportedOperation):
                pos = 0
            layout = _layout(header, chunks, pos)
        _write_to(f, header, chunks, layout, parallel=to_path and _seekable(f))


def _seekable(f: IO[bytes]) -> bool:
    """Whether ``f`` takes positional writes (a FIFO target does not)."""
    try:
        return bool(f.seekable())
    except (OSError, ValueError):
        return False


def _layout(header: Header, chunks: Sequence[Chunk], pos: int) -> list[int]:
    """Absolute offset of every chunk's frame written after ``header`` at ``pos``, plus the end offset."""
    offsets = [pos + header.nbytes]
    for chunk in chunks:
        frame = offsets[-1]
        offsets.append(frame + FRAME_BYTES + chunk.payload_len(frame + FRAME_BYTES))
    return offsets


#: Bytes after the vocabulary from which they are written on a second thread.
PARALLEL_TAIL_BYTES = 8 << 20


def _write_to(f: IO[bytes], header: Header, chunks: Sequence[Chunk], layout: list[int], *, parallel: bool) -> None:
    split = next((i for i, c in enumerate(chunks) if c.chunk_id.role in ("storage", "norms")), len(chunks))
    if not (parallel and hasattr(os, "pwrite") and layout[-1] - layout[split] >= PARALLEL_TAIL_BYTES):
        _write_head(f, header, chunks, layout)
        return

    def write_tail(out: BinaryIO) -> None:
        _write_laid_out(ByteWriter(out, layout[split]), chunks[split:], layout[split:])

    def write_head() -> None:
        # The head is serialised into memory first: a write to the file would wait
        # for the other thread's pwrite (the kernel serialises writes to one file).
        head = io.BytesIO()
        _write_head(head, header, chunks[:split], layout[: split + 1])
        f.write(head.getbuffer())
        f.flush()

    split_write(f, layout[split], write_tail, write_head)


def _write_head(out: IO[bytes], header: Header, chunks: Sequence[Chunk], layout: list[int]) -> None:
    """Write ``header`` and then ``chunks`` (laid out as :func:`_write_laid_out` says) to ``out``."""
    writer = ByteWriter(cast(BinaryIO, out), layout[0] - header.nbytes)
    header.write(writer)
    _write_laid_out(writer, chunks, layout)


def _write_laid_out(writer: ByteWriter, chunks: Sequence[Chunk], layout: list[int]) -> None:
    """Write ``chunks`` whose frames start at ``layout[:-1]`` (``layout[-1]``: where the last ends)."""
    for chunk, frame, end in zip(chunks, layout[:-1], layout[1:], strict=True):
        write_chunk(writer, chunk, end - frame - FRAME_BYTES)
