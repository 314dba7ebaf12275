"""Model files are untrusted input (issue 24): what a file names is never followed, every bound holds, nothing crashes.

One test per class of hostile input, each with several variants built by the real tools (h5py, gguf-py's
GGUFWriter, safetensors' own layout), so that the next variant of a class is covered too.
"""

from __future__ import annotations

import json
import re
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import finalfusion.limits
from _model_helpers import varint
from finalfusion import FormatError, load_finalfusion, load_lightseq

# -- HDF5 (LightSeq): data stored outside the file is never read --------------------------------

TABLE = np.array([[3.0, 4.0], [0.0, 1.0]], dtype="<f4")
#: What another local file holds: it must never come back as vectors.
SECRET = np.array([[7.0, 7.0], [7.0, 7.0]], dtype="<f4")


def _other_file(tmp_path: Path) -> Path:
    """Another local file: raw bytes and an HDF5 file holding the same values under /data, /src_embedding/..."""
    h5py = pytest.importorskip("h5py")
    (tmp_path / "secret.raw").write_bytes(SECRET.tobytes())
    other = tmp_path / "other.hdf5"
    with h5py.File(other, "w") as f:
        f["data"] = SECRET
        f["src_embedding/token_embedding"] = SECRET
        f["src_embedding/norm_scale"] = np.ones(2, dtype="f4")
    return other


def _external_raw(f: Any, name: str, tmp_path: Path) -> None:
    f.create_dataset(name, shape=(2, 2), dtype="<f4", external=[(str(tmp_path / "secret.raw"), 0, 16)])


def _external_link(f: Any, name: str, tmp_path: Path) -> None:
    import h5py

    f[name] = h5py.ExternalLink(str(tmp_path / "other.hdf5"), "/data")


def _external_group(f: Any, name: str, tmp_path: Path) -> None:
    import h5py

    group = name.split("/")[0]
    del f[group]
    f[group] = h5py.ExternalLink(str(tmp_path / "other.hdf5"), "/src_embedding")


def _soft_link(f: Any, name: str, tmp_path: Path) -> None:
    import h5py

    f["elsewhere"] = SECRET
    f[name] = h5py.SoftLink("/elsewhere")


def _virtual(f: Any, name: str, tmp_path: Path) -> None:
    import h5py

    layout = h5py.VirtualLayout(shape=(2, 2), dtype="<f4")
    layout[:] = h5py.VirtualSource(str(tmp_path / "other.hdf5"), "data", shape=(2, 2))
    f.create_virtual_dataset(name, layout)


HOSTILE_HDF5: dict[str, Callable[[Any, str, Path], None]] = {
    "external raw storage": _external_raw,
    "external link": _external_link,
    "external link to the group": _external_group,
    "soft link": _soft_link,
    "virtual dataset": _virtual,
}


@pytest.mark.parametrize("target", ["src_embedding/token_embedding", "src_embedding/norm_scale"])
@pytest.mark.parametrize("kind", sorted(HOSTILE_HDF5))
def test_hdf5_data_outside_the_file_is_refused(tmp_path: Path, kind: str, target: str) -> None:
    h5py = pytest.importorskip("h5py")
    _other_file(tmp_path)
    path = tmp_path / "model.hdf5"
    with h5py.File(path, "w") as f:
        f["src_embedding/norm_scale"] = np.ones(2, dtype="f4")
        f["src_embedding/token_embedding"] = TABLE
        if kind != "external link to the group":
            del f[target]
        HOSTILE_HDF5[kind](f, target, tmp_path)
    with pytest.raises(FormatError, match="stored in the file") as err:
        load_lightseq(path, ["a", "b"], normalize=False)
    assert str(err.value.chunk).startswith("LightSeq HDF5")


@pytest.mark.parametrize("kind", ["external link", "soft link", "virtual dataset", "external raw storage"])
def test_hdf5_flags_and_config_outside_the_file_are_refused(tmp_path: Path, kind: str) -> None:
    """The model kind and scaling flags are read from the file too: a link there is refused, not followed."""
    h5py = pytest.importorskip("h5py")
    _other_file(tmp_path)
    path = tmp_path / "model.hdf5"
    with h5py.File(path, "w") as f:
        f["trg_embedding/norm_scale"] = np.ones(2, dtype="f4")
        f["src_embedding/token_embedding"] = TABLE
        f.create_group("model_conf")
        HOSTILE_HDF5[kind](f, "model_conf/no_scale_embedding", tmp_path)
    with pytest.raises(FormatError, match="stored in the file"):
        load_lightseq(path, ["a", "b"], normalize=False)


def test_hdf5_hard_links_inside_the_file_still_load(tmp_path: Path) -> None:
    h5py = pytest.importorskip("h5py")
    path = tmp_path / "model.hdf5"
    with h5py.File(path, "w") as f:
        f["src_embedding/norm_scale"] = np.ones(2, dtype="f4")
        f.create_dataset("src_embedding/token_embedding", data=TABLE, chunks=(1, 2), compression="gzip")
        f["model_conf/eos_id"] = np.array(2)
        f["alias"] = f["src_embedding/token_embedding"]  # a second hard link to the same data: stored in the file
    emb = load_lightseq(path, ["a", "b"], normalize=False)
    assert emb.storage.matrix.tolist() == TABLE.tolist()
    assert emb.metadata is not None
    assert emb.metadata["lightseq"]["model"] == "GPT"


# -- LightSeq: the hidden size is bounded like every width, so the .fifu reads back --------------


def _field(n: int, payload: bytes) -> bytes:
    return bytes([n << 3 | 2]) + varint(len(payload)) + payload


def _lightseq_pb(hidden: int, rows: int) -> bytes:
    table = np.arange(rows * hidden, dtype="<f4") + 1
    return _field(1, _field(1, table.tobytes()) + _field(3, np.ones(hidden, dtype="<f4").tobytes()))


@pytest.mark.parametrize("container", ["protobuf", "hdf5"])
def test_lightseq_hidden_size_is_bounded_and_round_trips(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, container: str) -> None:
    def model(hidden: int) -> Any:
        if container == "protobuf":
            return _lightseq_pb(hidden, 2)
        h5py = pytest.importorskip("h5py")
        path = tmp_path / f"model{hidden}.hdf5"
        with h5py.File(path, "w") as f:
            f["src_embedding/norm_scale"] = np.ones(hidden, dtype="f4")
            f["src_embedding/token_embedding"] = np.arange(2 * hidden, dtype="f4") + 1
        return path

    monkeypatch.setattr(finalfusion.limits, "MAX_DIMS", 8)
    # Within the limit: loads, writes, reads back equal.
    emb = load_lightseq(model(8), ["a", "b"])
    emb.write(tmp_path / "ok.fifu")
    back = load_finalfusion(tmp_path / "ok.fifu")
    assert back.storage.matrix.tolist() == emb.storage.matrix.tolist()
    # Past it: refused at load, as load_finalfusion would refuse the .fifu written from it.
    with pytest.raises(FormatError, match="MAX_DIMS") as err:
        load_lightseq(model(9), ["a", "b"])
    assert "hidden size" in str(err.value)


# -- safetensors: a header is parsed in linear time; shapes are checked before they are multiplied ------


def _safetensors_header(header: dict[str, Any], data: bytes = b"") -> bytes:
    text = json.dumps(header).encode()
    return struct.pack("<Q", len(text)) + text + data


@pytest.mark.filterwarnings("error::RuntimeWarning")
@pytest.mark.parametrize("values", [[np.inf, -np.inf], [np.nan, 1.0], [3e38, 3e38]])
def test_safetensors_non_finite_tables_are_refused_without_numpy_warnings(values: list[float]) -> None:
    # inf + -inf in the cheap first pass (a float64 sum) made numpy warn before the row was named (found by safetensors_structured).
    table = np.array([[1.0, 2.0], values], dtype=np.float32)
    data = _safetensors_header({"embed_tokens.weight": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]}}, table.tobytes())
    if np.isfinite(table).all():  # finite values whose sum overflows float32 but not float64: they load
        from finalfusion import load_safetensors

        assert load_safetensors(data, tokenizer=["a", "b"], normalize=False).storage.shape == (2, 2)
        return
    from finalfusion import load_safetensors

    with pytest.raises(FormatError, match="row 1 has a NaN or infinite component"):
        load_safetensors(data, tokenizer=["a", "b"])


def _many_tensors(n: int) -> dict[str, Any]:
    return {f"t{i}": {"dtype": "F32", "shape": [0], "data_offsets": [0, 0]} for i in range(n)}


@pytest.mark.parametrize(
    ("last", "error"),
    [
        (None, None),
        ({"dtype": "F33", "shape": [0], "data_offsets": [0, 0]}, "unknown dtype"),
        ({"dtype": "F32", "shape": [0]}, "lacks fields"),
        ({"dtype": "F32", "shape": [-1], "data_offsets": [0, 0]}, "non-negative"),
        ({"dtype": "F32", "shape": [1], "data_offsets": [0, 0]}, "disagree"),
    ],
)
def test_safetensors_header_keys_are_searched_for_once_not_once_per_key(monkeypatch: pytest.MonkeyPatch, last: Any, error: str | None) -> None:
    """A header of many short entries was searched once per key for the key's offset (quadratic: 2 MB took 15 s).

    The offset is only needed for a message, so a valid header searches for no key and an invalid one for one.
    """
    from finalfusion.compat import _safetensors_header as st

    searches: list[str] = []
    find = st._find_key
    monkeypatch.setattr(st, "_find_key", lambda text, key, last=False: searches.append(key) or find(text, key, last))
    header = _many_tensors(2000)
    if last is not None:
        header["bad"] = last
    if error is None:
        assert len(st.read_safetensors_header(_safetensors_header(header)).tensors) == 2000
        assert searches == []
    else:
        with pytest.raises(FormatError, match=error) as err:
            st.read_safetensors_header(_safetensors_header(header))
        assert searches == ["bad"]
        assert err.value.offset == 8 + json.dumps(header).index('"bad"')


@pytest.mark.parametrize(
    "shape",
    [
        [0, 10**4000],  # a zero first: the product is 0 and was accepted, with a 4000-digit dimension
        [10**4000] * 200,  # 200 dimensions of 4000 digits: the product took seconds, the message held them all
        [2**64, 1],
        [1 << 40, 1 << 40, 1 << 40],
        [2, 3, 10**300, 0],
    ],
)
def test_safetensors_shape_dimensions_are_checked_before_multiplying(shape: list[int]) -> None:
    from finalfusion.compat.safetensors import read_safetensors_header

    with pytest.raises(FormatError, match="dimension") as err:
        read_safetensors_header(_safetensors_header({"e": {"dtype": "F32", "shape": shape, "data_offsets": [0, 0]}}))
    assert len(str(err.value)) < 400


def _shard(directory: Path, name: str) -> None:
    from safetensors.numpy import save_file

    save_file({"embeddings": TABLE}, str(directory / name))


@pytest.mark.parametrize("hostile", ["a\x00b.safetensors", "/etc/passwd", "../x.safetensors", "sub/x.safetensors", "", ".", ".."])
@pytest.mark.parametrize("opened", [True, False])
def test_safetensors_every_shard_name_follows_the_sibling_rule(tmp_path: Path, hostile: str, opened: bool) -> None:
    """Every name of a sharded index is checked by the one rule, the shard that holds the table or another one."""
    pytest.importorskip("safetensors")
    from finalfusion import load_safetensors

    _shard(tmp_path, "model-1.safetensors")
    weight_map = {"embeddings": hostile if opened else "model-1.safetensors", "lm_head.weight": "model-1.safetensors" if opened else hostile}
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
    with pytest.raises(FormatError, match="a shard must be a file next to the index") as err:
        load_safetensors(tmp_path, tokenizer=["a", "b"])
    assert err.value.found == hostile


def test_safetensors_sibling_shards_still_load(tmp_path: Path) -> None:
    pytest.importorskip("safetensors")
    from finalfusion import load_safetensors

    _shard(tmp_path, "model-1.safetensors")
    _shard(tmp_path, "model-2.safetensors")
    weight_map = {"embeddings": "model-2.safetensors", "other": "model-1.safetensors"}
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
    assert load_safetensors(tmp_path, tokenizer=["a", "b"], normalize=False).storage.matrix.tolist() == TABLE.tolist()


# -- GGUF: standard keys have llama.cpp's types; the header's objects are bounded; decoding names the installed gguf --------

GGUF_TOKENS = ["<unk>", "a", "b"]


def _gguf(path: Path, *, typed_kv: list[tuple[Any, ...]] = (), arrays: dict[str, Any] | None = None, table: Any = None, raw_dtype: Any = None) -> Path:
    """A llama-vocabulary GGUF file written by gguf-py's GGUFWriter, with extra keys."""
    gguf = pytest.importorskip("gguf")
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_tokenizer_model("llama")
    writer.add_token_list(GGUF_TOKENS)
    writer.add_token_scores([0.0, -1.0, -2.0])
    writer.add_token_types([2, 1, 1])
    for args in typed_kv:
        writer.add_key_value(*args)
    for key, value in (arrays or {}).items():
        writer.add_array(key, value)
    table = np.arange(6, dtype=np.float32).reshape(3, 2) + 1 if table is None else table
    writer.add_tensor("token_embd.weight", table, raw_dtype=raw_dtype)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def _typed(key: str, kind: str) -> tuple[Any, ...]:
    gguf = pytest.importorskip("gguf")
    t = gguf.GGUFValueType
    return {
        "array of bools": (key, [True, False], t.ARRAY, t.BOOL),
        "array of ints": (key, [1, 2], t.ARRAY, t.UINT32),
        "string": (key, "false", t.STRING),
        "float": (key, 1.5, t.FLOAT32),
    }[kind]


@pytest.mark.parametrize("kind", ["array of bools", "array of ints", "string", "float"])
@pytest.mark.parametrize(
    "key",
    [
        "tokenizer.ggml.add_space_prefix",
        "tokenizer.ggml.remove_extra_whitespaces",
        "tokenizer.ggml.bos_token_id",
        "tokenizer.ggml.unknown_token_id",
        "tokenizer.ggml.model",
        "general.alignment",
    ],
)
def test_gguf_standard_keys_of_the_wrong_type_are_refused(tmp_path: Path, key: str, kind: str) -> None:
    """A flag stored as an array let numpy's ValueError escape (truth value of an array); a string "false" was true."""
    from finalfusion import load_gguf

    if key == "tokenizer.ggml.model" and kind == "string":
        kind = "float"
    args = _typed(key, kind)
    path = tmp_path / "model.gguf"
    if key == "tokenizer.ggml.model":  # replace the one the writer adds
        gguf = pytest.importorskip("gguf")
        writer = gguf.GGUFWriter(str(path), "llama")
        writer.add_key_value(*args)
        writer.add_token_list(GGUF_TOKENS)
        writer.add_tensor("token_embd.weight", np.ones((3, 2), dtype=np.float32))
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()
        writer.close()
    else:
        _gguf(path, typed_kv=[args])
    with pytest.raises(FormatError, match=f"{key} is not a") as err:
        load_gguf(path)
    assert type(err.value) is FormatError
    assert err.value.offset is not None


@pytest.mark.parametrize(
    "shape",
    [
        "one key of 70,000 nested arrays",
        "one key of 300 x 300 nested arrays",
        "70,000 keys",
    ],
)
def test_gguf_metadata_items_are_bounded(tmp_path: Path, shape: str) -> None:
    """Nested empty arrays cost hundreds of bytes each from 12 of file: 30 MB took 7-12 s and 750 MB."""
    from finalfusion import load_gguf
    from finalfusion.compat.gguf import read_gguf

    gguf = pytest.importorskip("gguf")
    n = finalfusion.limits.MAX_MODEL_METADATA_ITEMS + 4464
    if shape.startswith("70,000 keys"):
        path = _gguf(tmp_path / "model.gguf", typed_kv=[(f"k.{i}", 0, gguf.GGUFValueType.UINT8) for i in range(n)])
    elif "300 x 300" in shape:
        path = _gguf(tmp_path / "model.gguf", arrays={"general.nested": [[[0]] * 300] * 300})
    else:
        path = _gguf(tmp_path / "model.gguf", arrays={"general.nested": [[0]] * n})
    with pytest.raises(FormatError, match="MAX_MODEL_METADATA_ITEMS"):
        load_gguf(path)
    with pytest.raises(FormatError, match="MAX_MODEL_METADATA_ITEMS"):
        read_gguf(path.read_bytes())


def test_gguf_metadata_items_within_the_bound_load(tmp_path: Path) -> None:
    from finalfusion.compat.gguf import read_gguf

    path = _gguf(tmp_path / "model.gguf", arrays={"general.nested": [[0]] * 1000})
    assert len(read_gguf(path.read_bytes()).kv["general.nested"]) == 1000


@pytest.mark.parametrize("ggml_type", ["I8", "I16", "I32", "Q8_1"])
def test_gguf_a_type_the_installed_gguf_cannot_decode_names_its_version(tmp_path: Path, ggml_type: str) -> None:
    """The gguf package is installed: "install the extra" is wrong; the message names the installed version."""
    from importlib import metadata

    from finalfusion import load_gguf

    gguf = pytest.importorskip("gguf")
    if ggml_type == "Q8_1":
        table, raw = np.zeros((3, 40), dtype=np.uint8), gguf.GGMLQuantizationType.Q8_1
    else:
        table, raw = np.ones((3, 2), dtype=f"i{int(ggml_type[1:]) // 8}"), None
    path = _gguf(tmp_path / "model.gguf", table=table, raw_dtype=raw)
    # Today's code raised MissingExtraError ("install the extra"), which is no FormatError.
    with pytest.raises(FormatError, match=re.escape(f"the installed gguf {metadata.version('gguf')} cannot decode {ggml_type} tensors")):
        load_gguf(path)


# -- write_gguf: a tokenizer that loaded is written, and the file reads back ---------------------------------


def _bpe_variant(variant: str) -> tuple[list[str], bytes]:
    pytest.importorskip("tokenizers")
    from _model_helpers import train_byte_level_bpe

    text = train_byte_level_bpe(300)
    doc = json.loads(text)
    words = [w for w, _ in sorted(doc["model"]["vocab"].items(), key=lambda kv: kv[1])]
    if variant == "UTF-16":
        return words, text.encode("utf-16")
    if variant == "UTF-8 with BOM":
        return words, b"\xef\xbb\xbf" + text.encode()
    if variant == "merges as one string":
        doc["model"]["merges"] = "a b"
    elif variant == "merges of numbers":
        doc["model"]["merges"] = [[1, 2]]
    elif variant == "merges that join no tokens":
        doc["model"]["merges"] = ["zzz yyy"]
    elif variant == "added_tokens not a list":
        doc["added_tokens"] = {"0": "x"}
    elif variant == "added token that is not an object":
        doc["added_tokens"] = ["<|endoftext|>"]
    return words, json.dumps(doc).encode()


@pytest.mark.parametrize(
    "variant",
    [
        "UTF-16",
        "UTF-8 with BOM",
        "merges as one string",
        "merges of numbers",
        "merges that join no tokens",
        "added_tokens not a list",
        "added token that is not an object",
    ],
)
def test_write_gguf_writes_what_loaded_and_reads_it_back(tmp_path: Path, variant: str) -> None:
    """UnicodeDecodeError, TypeError and AttributeError escaped write_gguf, or it wrote merges its reader refuses."""
    from finalfusion import Embeddings
    from finalfusion._tokenizers import HuggingFaceTokenizer
    from finalfusion.compat.gguf import load_gguf, write_gguf
    from finalfusion.storage import NdArray
    from finalfusion.vocab.tokenizer import TokenizerVocab

    words, data = _bpe_variant(variant)
    matrix = np.random.default_rng(0).standard_normal((len(words), 4)).astype(np.float32)
    emb = Embeddings(NdArray(matrix), TokenizerVocab(words, HuggingFaceTokenizer(data)))
    write_gguf(tmp_path / "model.gguf", emb, unnormalize=False)
    back = load_gguf(tmp_path / "model.gguf", normalize=False)
    assert list(back.vocab.words) == words
    np.testing.assert_array_equal(back.storage.matrix, matrix)
    assert back.metadata is not None
    assert back.metadata["gguf"]["tokenizer"] == (
        "gpt2" if variant in ("UTF-16", "UTF-8 with BOM", "added_tokens not a list", "added token that is not an object") else "none"
    )


@pytest.mark.parametrize("variant", ["UTF-16", "UTF-8 with BOM"])
def test_tokenizer_json_in_another_unicode_encoding_tokenizes_and_round_trips(tmp_path: Path, variant: str) -> None:
    """A UTF-16 or BOM tokenizer.json loaded, then failed at the first unknown word (also after a .fifu round trip)."""
    from finalfusion import Embeddings, load_finalfusion
    from finalfusion._tokenizers import HuggingFaceTokenizer
    from finalfusion.storage import NdArray
    from finalfusion.vocab.tokenizer import TokenizerVocab

    words, data = _bpe_variant(variant)
    _, utf8 = _bpe_variant("UTF-8")
    matrix = np.random.default_rng(0).standard_normal((len(words), 4)).astype(np.float32)
    emb = Embeddings(NdArray(matrix), TokenizerVocab(words, HuggingFaceTokenizer(data)), norms=None)
    plain = Embeddings(NdArray(matrix), TokenizerVocab(words, HuggingFaceTokenizer(utf8)), norms=None)
    unknown = ["zebraqq", "Ünïcödé", "e-mail 42"]
    assert all(w not in emb.vocab for w in unknown)
    expected = np.stack([plain.embedding(w) for w in unknown])
    np.testing.assert_array_equal(np.stack([emb.embedding(w) for w in unknown]), expected)
    emb.write(tmp_path / "model.fifu")
    back = load_finalfusion(tmp_path / "model.fifu")
    np.testing.assert_array_equal(np.stack([back.embedding(w) for w in unknown]), expected)


@pytest.mark.parametrize("where", ["word", "architecture", "name"])
def test_write_gguf_names_a_string_gguf_cannot_hold(tmp_path: Path, where: str) -> None:
    """A lone surrogate is not UTF-8: a FormatError (a FinalfusionError and a ValueError) naming the key, not UnicodeEncodeError from inside the writer."""
    from finalfusion import Embeddings
    from finalfusion.compat.gguf import write_gguf
    from finalfusion.metadata import Metadata
    from finalfusion.storage import NdArray
    from finalfusion.vocab import SimpleVocab

    words = ["a", "b\ud800" if where == "word" else "b"]
    meta = Metadata({"gguf": {where: "x\udcff"}}) if where != "word" else None
    emb = Embeddings(NdArray(np.eye(2, dtype=np.float32)), SimpleVocab(words), metadata=meta)
    key = {"word": "element 1 of tokenizer.ggml.tokens", "architecture": "general.architecture", "name": "general.name"}[where]
    with pytest.raises(ValueError, match=re.escape(key) + ".*lone surrogate") as err:
        write_gguf(tmp_path / "model.gguf", emb)
    assert type(err.value) is FormatError
    assert not (tmp_path / "model.gguf").exists()
