"""Header.chunk_ids is a list, as in finalfusion-python 0.7, while the header stays immutable and hashable."""

from __future__ import annotations

import dataclasses
import io
from pathlib import Path

import pytest

from finalfusion.chunks import ChunkIdentifier
from finalfusion.container import read_chunks
from finalfusion.header import Header


def test_chunk_ids_is_a_list_as_in_0_7(testdata: Path) -> None:
    with open(testdata / "python-simple_vocab.fifu", "rb") as f:
        header = Header.read_chunk(f)
    # 0.7.1's tests compare with a list: a tuple is never equal to it
    assert header.chunk_ids == [ChunkIdentifier.SimpleVocab, ChunkIdentifier.NdArray]
    assert type(header.chunk_ids) is list
    built = Header([ChunkIdentifier.SimpleVocab, ChunkIdentifier.NdArray])
    out = io.BytesIO()
    built.write_chunk(out)
    out.seek(0)
    assert Header.read_chunk(out).chunk_ids == built.chunk_ids


def test_a_changed_list_leaves_the_header_unchanged(testdata: Path) -> None:
    header, _ = read_chunks((testdata / "python-ff_buckets.fifu").read_bytes())
    ids = header.chunk_ids
    ids.append(ChunkIdentifier.NdNorms)
    ids[0] = ChunkIdentifier.NdArray
    assert header.chunk_ids == [ChunkIdentifier.Metadata, ChunkIdentifier.BucketSubwordVocab, ChunkIdentifier.NdArray]
    assert header.nbytes == 24
    assert header.chunk_ids is not header.chunk_ids


def test_header_is_immutable_and_hashable() -> None:
    header = Header((ChunkIdentifier.SimpleVocab, ChunkIdentifier.NdArray))
    with pytest.raises(dataclasses.FrozenInstanceError):
        header.chunk_ids = [ChunkIdentifier.NdArray]  # type: ignore[misc]
    assert header == Header([1, 2])
    assert len({header, Header([ChunkIdentifier.SimpleVocab, ChunkIdentifier.NdArray])}) == 1
    assert header != Header([ChunkIdentifier.SimpleVocab])
    assert repr(header) == "Header(chunk_ids=[<ChunkIdentifier.SimpleVocab: 1>, <ChunkIdentifier.NdArray: 2>])"
    with pytest.raises(ValueError, match="99"):
        Header([99])
