"""Reading and writing whole finalfusion files: the finalfusion-python 0.7 names.

This module keeps the names 0.7 code imports from ``finalfusion.io``
(``ChunkIdentifier``, ``TypeId``, ``FinalfusionFormatError`` ...) and the
file-level functions, which live in the layer they belong to:

* :func:`read_chunks`, :func:`load_chunk`, :func:`write_chunks`,
  :func:`find_chunk` -- whole chunk sequences (:mod:`finalfusion.container`);
* :class:`Header` with 0.7's ``Header.read_chunk(file)`` /
  ``header.write_chunk(file)`` on file objects (:mod:`finalfusion.header`);
* :func:`open_buffer` and the :data:`Source` type -- every accepted input
  (``finalfusion._source``);
* :func:`atomic_output` -- atomic writes (``finalfusion._atomic``);
* :func:`load_finalfusion` -- whole embeddings (read into their parts by
  ``finalfusion._load``, built by :mod:`finalfusion.embeddings`).

All chunks of any :data:`Source` at once:
:func:`finalfusion.container.read_source`. See docs/architecture.md for the
layers.

Examples
--------
>>> import io, numpy as np
>>> from finalfusion.vocab import SimpleVocab
>>> from finalfusion.storage import NdArray
>>> out = io.BytesIO()
>>> write_chunks([SimpleVocab(["a"]), NdArray(np.ones((1, 2), dtype=np.float32))], out)
>>> [chunk.chunk_identifier() for _, chunk in read_chunks(out.getvalue())[1]]
[<ChunkIdentifier.SimpleVocab: 1>, <ChunkIdentifier.NdArray: 2>]
"""

from __future__ import annotations

from typing import BinaryIO

from finalfusion._atomic import Target, atomic_output
from finalfusion._binary import Buffer, ByteReader, ByteWriter
from finalfusion._source import Source, open_buffer
from finalfusion.chunks import Chunk, ChunkIdentifier, TypeId, chunk_class, read_frame
from finalfusion.container import FileChunk, find_chunk, load_chunk, read_chunks, write_chunks
from finalfusion.embeddings import load_finalfusion
from finalfusion.errors import FormatError, Truncated
from finalfusion.header import MAGIC, Header

__all__ = [
    "MAGIC",
    "Buffer",
    "ByteReader",
    "ByteWriter",
    "Chunk",
    "ChunkIdentifier",
    "FileChunk",
    "FinalfusionFormatError",
    "Header",
    "Source",
    "Target",
    "TypeId",
    "atomic_output",
    "find_chunk",
    "load_chunk",
    "load_finalfusion",
    "open_buffer",
    "read_chunks",
    "write_chunks",
]

#: finalfusion-python 0.7 name of :class:`~finalfusion.errors.FormatError`.
FinalfusionFormatError = FormatError


def _read_chunk_header(file: BinaryIO) -> tuple[ChunkIdentifier, int] | None:
    """Read a chunk's frame (id and payload length) at the file's position; ``None`` at the end of the file.

    finalfusion-python 0.7's private helper, kept because 0.7's own tests
    and code copied from 0.7 call it after :func:`find_chunk`
    (``f.seek(-12, 1)``). The file is left at the payload.

    Raises
    ------
    Truncated
        If fewer than the frame's 12 bytes remain.
    UnknownChunk
        For an identifier the format does not define.

    Examples
    --------
    >>> import io, numpy as np
    >>> from finalfusion.vocab import SimpleVocab
    >>> out = io.BytesIO()
    >>> write_chunks([SimpleVocab(["a"])], out)
    >>> f = io.BytesIO(out.getvalue()); header = Header.read_chunk(f)
    >>> _read_chunk_header(f)
    (<ChunkIdentifier.SimpleVocab: 1>, 13)
    """
    at = file.tell() if file.seekable() else None
    frame = file.read(12)
    if not frame:
        return None
    if len(frame) < 12:
        raise Truncated("the input ends inside a chunk frame", offset=at, chunk="chunk stream", expected="12 bytes", found=f"{len(frame)} bytes")
    raw, length = read_frame(frame, 0)
    return chunk_class(raw, offset=at).chunk_id, length
