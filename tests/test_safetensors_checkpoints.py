"""load_safetensors on hand-built checkpoints: header metadata and its errors, directories, sharded indexes and their shard names, detection."""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import finalfusion
from finalfusion import FormatError, load_safetensors
from finalfusion.compat import safetensors as st
from finalfusion.compat.safetensors import read_safetensors_header

TABLE = np.array([[3.0, 4.0], [1.0, 0.0], [0.0, 2.0]], dtype=np.float32)


def checkpoint(tensors: dict[str, np.ndarray], metadata: dict[str, Any] | None = None, header_extra: dict[str, Any] | None = None) -> bytes:
    header: dict[str, Any] = {}
    if metadata is not None:
        header["__metadata__"] = metadata
    data = b""
    for name, arr in tensors.items():
        raw = np.ascontiguousarray(arr, dtype="<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(arr.shape), "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    header.update(header_extra or {})
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + data


def raw_header(text: str, data: bytes = b"") -> bytes:
    b = text.encode()
    return struct.pack("<Q", len(b)) + b + data


def test_header_metadata_and_tensor_sizes() -> None:
    header = read_safetensors_header(checkpoint({"embed_tokens.weight": TABLE}, metadata={"format": "pt"}))
    assert header.metadata == {"format": "pt"}
    info = header.tensors["embed_tokens.weight"]
    assert info.nbytes == TABLE.nbytes
    assert info.shape == (3, 2)


@pytest.mark.parametrize("meta", [{"format": 1}, ["pt"]])
def test_metadata_must_map_strings_to_strings(meta: Any) -> None:
    data = checkpoint({"w": TABLE}, metadata=meta)
    with pytest.raises(FormatError, match="__metadata__ must map strings to strings") as err:
        read_safetensors_header(data)
    assert err.value.offset == 8 + 1  # the key, right after the opening brace


@pytest.mark.parametrize(("text", "found"), [("abc", "'abc'"), ('"abc"', "str"), ("[1]", "list")])
def test_header_not_an_object(text: str, found: str) -> None:
    with pytest.raises(FormatError, match="the JSON header is not an object") as err:
        read_safetensors_header(raw_header(text))
    assert err.value.found == found


@pytest.mark.parametrize("offsets", [[0], [0, -1], "0-24", [0, 1.5]])
def test_bad_data_offsets(offsets: Any) -> None:
    text = json.dumps({"w": {"dtype": "F32", "shape": [3, 2], "data_offsets": offsets}})
    with pytest.raises(FormatError, match="data_offsets must be two non-negative integers"):
        read_safetensors_header(raw_header(text, bytes(24)))


def test_load_from_bytes_and_file_objects(tmp_path: Path) -> None:
    data = checkpoint({"model.embed_tokens.weight": TABLE})
    emb = load_safetensors(data, tokenizer=["a", "b", "c"], normalize=False)
    np.testing.assert_array_equal(emb.storage, TABLE)
    path = tmp_path / "w.safetensors"
    path.write_bytes(data)
    with open(path, "rb") as f:
        emb = load_safetensors(f, tokenizer=["a", "b"])
    assert emb.vocab.words == ["a", "b"]
    assert emb.metadata is not None
    assert emb.metadata["safetensors"]["padding_rows_dropped"] == 1
    np.testing.assert_allclose(emb.norms, [5.0, 1.0])


def test_directory_with_one_checkpoint_of_any_name(tmp_path: Path) -> None:
    (tmp_path / "weights-v2.safetensors").write_bytes(checkpoint({"wte.weight": TABLE}))
    (tmp_path / "tokenizer.json").write_text(json.dumps({"model": {"vocab": {"x": 0, "y": 1, "z": 2}}}))
    emb = load_safetensors(tmp_path)
    assert emb.vocab.words == ["x", "y", "z"]
    assert emb.metadata is not None
    assert emb.metadata["safetensors"]["file"] == "weights-v2.safetensors"
    assert st._detect(b"", str(tmp_path))
    loaded = finalfusion.load(tmp_path)
    assert loaded.vocab.words == ["x", "y", "z"]


def test_directory_detection(tmp_path: Path) -> None:
    assert not st._detect(b"", str(tmp_path))
    (tmp_path / "m.safetensors.index.json").write_text("{}")
    assert st._detect(b"", str(tmp_path))
    assert st._detect(b"", "x/model.safetensors.index.json")
    assert not st._detect(b"\x01" + bytes(7) + b"{", None)  # a one-byte header cannot hold an object


def test_directory_with_several_checkpoints(tmp_path: Path) -> None:
    (tmp_path / "a.safetensors").write_bytes(checkpoint({"wte.weight": TABLE}))
    (tmp_path / "b.safetensors").write_bytes(checkpoint({"wte.weight": TABLE}))
    with pytest.raises(FormatError, match="the directory holds several checkpoints") as err:
        load_safetensors(tmp_path, tokenizer=["a"])
    assert err.value.found == ["a.safetensors", "b.safetensors"]


def test_directory_without_checkpoint(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"no model\.safetensors, model\.safetensors\.index\.json or other"):
        load_safetensors(tmp_path, tokenizer=["a"])


def _sharded(tmp_path: Path, index: str | bytes) -> Path:
    (tmp_path / "model-00001-of-00002.safetensors").write_bytes(checkpoint({"lm_head.weight": TABLE}))
    (tmp_path / "model-00002-of-00002.safetensors").write_bytes(checkpoint({"model.embed_tokens.weight": TABLE * 2}))
    path = tmp_path / "custom.safetensors.index.json"
    path.write_bytes(index.encode() if isinstance(index, str) else index)
    return path


def test_sharded_index_in_a_directory(tmp_path: Path) -> None:
    weight_map = {"lm_head.weight": "model-00001-of-00002.safetensors", "model.embed_tokens.weight": "model-00002-of-00002.safetensors"}
    _sharded(tmp_path, json.dumps({"weight_map": weight_map}))
    emb = load_safetensors(tmp_path, tokenizer=["a", "b", "c"], normalize=False)
    np.testing.assert_array_equal(emb.storage, TABLE * 2)


def test_sharded_index_names_a_tensor_twice(tmp_path: Path) -> None:
    index = _sharded(tmp_path, '{"weight_map": {"w": "a.safetensors", "w": "b.safetensors"}}')
    with pytest.raises(FormatError, match="the index names a tensor twice") as err:
        load_safetensors(index, tokenizer=["a"])
    assert err.value.found == "w"


@pytest.mark.parametrize("index", [b"{not json", b"\xff\xfe", b'{"weight_map": {"w": NaN}}'])
def test_sharded_index_not_json(tmp_path: Path, index: bytes) -> None:
    path = _sharded(tmp_path, index)
    with pytest.raises(FormatError, match="the index is not valid JSON") as err:
        load_safetensors(path, tokenizer=["a"])
    assert err.value.chunk == "safetensors index custom.safetensors.index.json"


def test_sharded_index_points_at_the_wrong_shard(tmp_path: Path) -> None:
    path = _sharded(tmp_path, json.dumps({"weight_map": {"model.embed_tokens.weight": "model-00001-of-00002.safetensors"}}))
    with pytest.raises(FormatError, match="the shard the index names does not hold the tensor") as err:
        load_safetensors(path, tokenizer=["a"])
    assert err.value.expected == "model.embed_tokens.weight"
    assert err.value.found == "lm_head.weight"


@pytest.mark.parametrize("shard", ["a\x00b.safetensors", "/abs/model.safetensors", "sub/model.safetensors", "..", ""])
def test_sharded_index_shard_names_must_be_plain_file_names(tmp_path: Path, shard: str) -> None:
    path = _sharded(tmp_path, json.dumps({"weight_map": {"model.embed_tokens.weight": shard}}))
    with pytest.raises(FormatError, match="a shard must be a file next to the index") as err:
        load_safetensors(path, tokenizer=["a"])
    assert err.value.found == shard
    assert err.value.chunk == "safetensors index custom.safetensors.index.json"


def test_a_file_object_is_read_from_its_position(tmp_path: Path) -> None:
    path = tmp_path / "w.safetensors"
    path.write_bytes(b"prefix" + checkpoint({"embeddings": TABLE}))
    with open(path, "rb") as f:
        f.seek(6)
        emb = load_safetensors(f, tokenizer=["a", "b", "c"], normalize=False)
    np.testing.assert_array_equal(emb.storage, TABLE)


def test_read_header_from_a_file_object_of_unknown_size() -> None:
    import gzip
    import io

    with gzip.GzipFile(fileobj=io.BytesIO(gzip.compress(checkpoint({"w": TABLE})))) as f, pytest.raises(TypeError, match="of known size"):
        read_safetensors_header(f)
