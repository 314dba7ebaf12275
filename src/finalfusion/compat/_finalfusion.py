"""The finalfusion format itself, registered in the format table like the foreign formats.

Its reader and writer live with the container (:func:`finalfusion.load_finalfusion`,
:meth:`finalfusion.Embeddings.write`); this module only tells
:func:`finalfusion.load` how to recognise a finalfusion file (docs/format.md §1):
the magic ``FiFu``.
"""

from __future__ import annotations

from typing import Any, Final

from finalfusion.chunks import ChunkIdentifier
from finalfusion.compat._registry import register_format
from finalfusion.embeddings import Embeddings, load_finalfusion

__all__: list[str] = []

MAGIC: Final = b"FiFu"
#: Identifiers a chunk may have on disk (the header's 0 is not one).
_CHUNK_IDS: Final = frozenset(int(c) for c in ChunkIdentifier if c != ChunkIdentifier.Header)


def _detect(sample: bytes, path: str | None) -> bool:
    return sample.startswith(MAGIC)


def _bare_chunk(sample: bytes) -> str | None:
    """A hint when the input is a chunk without the file header (it starts with a chunk id and a length)."""
    chunk_id = int.from_bytes(sample[:4], "little")
    if chunk_id in _CHUNK_IDS and len(sample) >= 12:
        return f"this looks like a bare finalfusion chunk (id {chunk_id}) without the FiFu file header"
    return None


def _write(file: Any, embeddings: Embeddings) -> None:
    embeddings.write(file)


register_format(
    "finalfusion",
    description="finalfusion: vocabulary, storage, norms and metadata chunks (mmap=True maps an uncompressed file)",
    extensions=(".fifu",),
    order=0,
    detector=_detect,
    loader=load_finalfusion,
    writer=_write,
    options=("mmap", "cache_bytes"),
    mismatch="no FiFu magic",
    near_miss=_bare_chunk,
)
