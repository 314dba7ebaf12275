"""FormatError rendering and pickling: the message a user reads and what survives a worker process."""

from __future__ import annotations

import pickle

import pytest

from finalfusion.errors import BadMagic, ChunkOrder, FinalfusionError, FormatError, Truncated, UnknownChunk, UnsupportedVersion


def test_message_only() -> None:
    err = FormatError("something is off")
    assert str(err) == "something is off"
    assert err.offset is None
    assert err.chunk is None


def test_found_without_expected_and_offset_without_chunk() -> None:
    assert str(FormatError("bad", found=3)) == "bad: expected None, found 3"
    assert str(FormatError("bad", expected="x")) == "bad: expected x, found None"
    assert str(FormatError("bad", offset=0)) == "bad (at byte offset 0)"
    assert str(FormatError("bad", chunk="NdArray", offset=7)) == "NdArray: bad (at byte offset 7)"


@pytest.mark.parametrize("cls", [FormatError, BadMagic, UnsupportedVersion, UnknownChunk, ChunkOrder, Truncated])
def test_pickle_keeps_class_and_details(cls: type[FormatError]) -> None:
    err = cls("bad", offset=12, chunk="SimpleVocab", expected=[1, 2], found={"a": 1})
    copy = pickle.loads(pickle.dumps(err))
    assert type(copy) is cls
    assert (copy.message, copy.offset, copy.chunk, copy.expected, copy.found) == ("bad", 12, "SimpleVocab", [1, 2], {"a": 1})
    assert str(copy) == str(err)
    assert isinstance(copy, ValueError)
    assert isinstance(copy, FinalfusionError)
