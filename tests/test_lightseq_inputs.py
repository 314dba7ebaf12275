"""load_lightseq on hand-made protobuf exports: the inputs it takes (every Source, read through _source), GPT/BERT detection, streams."""

from __future__ import annotations

import gzip
import io
import os
from pathlib import Path

import numpy as np
import pytest

from _streams import Trickle
from finalfusion import FormatError, load_lightseq

TABLE = np.array([[3.0, 4.0], [0.0, 1.0]], dtype="<f4")


def field(number: int, payload: bytes) -> bytes:
    return bytes([number << 3 | 2, len(payload)]) + payload


def gpt(config: bytes | None = None) -> bytes:
    layer = field(1, TABLE.tobytes()) + field(3, np.ones(2, dtype="<f4").tobytes())
    return field(1, layer) + (field(3, config) if config is not None else b"")


@pytest.mark.parametrize(
    ("config", "model"),
    [(None, "GPT or BERT"), (b"", "GPT or BERT"), (b"\x18\x01", "BERT"), (b"\x20\x01", "BERT"), (field(3, b"topk"), "GPT"), (b"\x30\x02", "GPT")],
)
def test_gpt_or_bert_from_the_config(config: bytes | None, model: str) -> None:
    emb = load_lightseq(gpt(config), ["a", "b"])
    assert emb.metadata is not None
    assert emb.metadata["lightseq"]["model"] == model


def test_file_objects_and_paths_read_alike(tmp_path: Path) -> None:
    emb = load_lightseq(io.BytesIO(gpt()), ["a", "b"], normalize=False)
    assert emb.storage.matrix.tolist() == TABLE.tolist()
    path = tmp_path / "model.pb"
    path.write_bytes(gpt())
    emb = load_lightseq(str(path), ["a", "b"])
    assert emb.metadata is not None
    assert emb.metadata["lightseq"]["file"] == "model.pb"


def test_text_files_and_other_objects_are_refused() -> None:
    with pytest.raises(TypeError, match="the file object must be opened in binary mode"):
        load_lightseq(io.StringIO("text"), ["a"])
    with pytest.raises(TypeError, match="expected a path, bytes or a binary file object, got float"):
        load_lightseq(3.5, ["a"])  # type: ignore[arg-type]


def test_an_empty_file_has_no_embedding(tmp_path: Path) -> None:
    path = tmp_path / "empty.pb"
    path.write_bytes(b"")
    with pytest.raises(FormatError, match="the model has no src_embedding"):
        load_lightseq(path, ["a"])


def test_a_file_descriptor_is_a_source(tmp_path: Path) -> None:
    path = tmp_path / "model.pb"
    path.write_bytes(gpt())
    fd = os.open(path, os.O_RDONLY)
    try:
        emb = load_lightseq(fd, ["a", "b"], normalize=False)
    finally:
        os.close(fd)
    assert emb.storage.matrix.tolist() == TABLE.tolist()
    assert emb.metadata is not None
    assert emb.metadata["lightseq"]["file"] == f"<fd {fd}>"


def test_stream_varints_are_decoded_as_in_a_buffer() -> None:
    # A stream (gzip) is read field by field; a varint cut at the end of the stream and one longer than 10 bytes fail as in a buffer.
    for data, error, message, offset in [
        (gpt() + b"\x0a\x80", "Truncated", "the data ends inside a varint", len(gpt()) + 1),
        (gpt() + b"\x08" + b"\xff" * 10, "FormatError", "a varint is longer than 10 bytes", len(gpt()) + 1),
    ]:
        for source in (data, gzip.compress(data)):
            with pytest.raises(FormatError, match=message) as err:
                load_lightseq(source, ["a", "b"])
            assert type(err.value).__name__ == error
            if source is not data:  # the stream reader names the stream's offset
                assert err.value.offset == offset


def test_stream_fixed_size_fields_are_read_exactly() -> None:
    # fixed64 and fixed32 top-level fields arrive exactly (also one byte per read) and are kept; one cut short is Truncated.
    fixed = b"\x11" + bytes(8) + b"\x15" + bytes(4)
    emb = load_lightseq(io.BufferedReader(Trickle(fixed + gpt()), buffer_size=1), ["a", "b"], normalize=False)
    assert emb.storage.matrix.tolist() == TABLE.tolist()
    with pytest.raises(FormatError, match="field 2 runs past the end of the data") as err:
        load_lightseq(io.BufferedReader(Trickle(gpt() + b"\x15\x00\x00"), buffer_size=1), ["a", "b"])
    assert err.value.offset == len(gpt()) + 1
