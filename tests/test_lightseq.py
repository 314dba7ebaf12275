"""load_lightseq: LightSeq exports built with the real protobuf runtime and h5py, golden files, hostile protobuf."""

from __future__ import annotations

import importlib.util
import io
import json
import random
import struct
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from _model_helpers import varint
from finalfusion import FormatError, Truncated, load_lightseq
from finalfusion.compat._model_vocab import read_fairseq_dict

DATA = Path(__file__).resolve().parent / "data" / "models"


def _maker() -> Any:
    if "ff_lightseq_make" not in sys.modules:
        spec = importlib.util.spec_from_file_location("ff_lightseq_make", DATA / "lightseq_make_fixtures.py")
        assert spec is not None
        assert spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules["ff_lightseq_make"] = module
        spec.loader.exec_module(module)
    return sys.modules["ff_lightseq_make"]


make = _maker()
KINDS = ["transformer", "quant_transformer", "gpt", "quant_gpt", "bert", "quant_bert"]


def tables(kind: str, n: int, hidden: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray | None]:
    rng = np.random.default_rng(seed)
    src = rng.standard_normal((n, hidden)).astype(np.float32)
    trg = rng.standard_normal((n + 3, hidden)).astype(np.float32) if kind.endswith("transformer") else None
    return src, trg


def expected(kind: str, table: np.ndarray, clip: float) -> np.ndarray:
    return make.dequantize(make.quantize(table, clip), clip) if kind.startswith("quant_") else table


# -- golden files (no extras needed, except h5py for the HDF5 one) ---------------------------------


@pytest.mark.parametrize("name", ["lightseq_transformer.pb", "lightseq_quant_gpt.pb", "lightseq_bert.hdf5"])
def test_golden_files(name: str) -> None:
    if name.endswith(".hdf5"):
        pytest.importorskip("h5py")
    exp = json.loads((DATA / "lightseq_expected.json").read_text(encoding="utf-8"))[name]
    vocab = str(DATA / exp["vocab"]) if isinstance(exp["vocab"], str) else exp["vocab"]
    for side in ("src", "trg"):
        if side not in exp:
            continue
        emb = load_lightseq(DATA / name, vocab, side=side, normalize=False)
        want = np.array(exp[side], dtype=np.float32)
        np.testing.assert_array_equal(emb.storage.matrix, want)
        normalized = load_lightseq((DATA / name).read_bytes(), vocab, side=side)
        np.testing.assert_allclose(normalized.norms.norms, np.linalg.norm(want, axis=1), rtol=1e-6)
    if name == "lightseq_transformer.pb":
        assert emb.vocab.words[:5] == ["<s>", "<pad>", "</s>", "<unk>", "▁the"]
        meta = emb.metadata["lightseq"]
        assert meta["model"] == "Transformer"
        assert meta["sqrt_hidden_scaling"] == "stored"
        assert meta["padding_rows_dropped"] == 4  # the target table has 4 rows more than the dictionary


# -- real protobuf files -----------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_protobuf_exports(kind: str) -> None:
    pytest.importorskip("google.protobuf")
    hidden, n, clip = 8, 37, 1.75
    src, trg = tables(kind, n, hidden, seed=KINDS.index(kind))
    data = make.build_proto(kind, hidden, src, trg, clip=clip, layers=2)
    vocab = [f"tok{i}" for i in range(n)]
    emb = load_lightseq(data, vocab, normalize=False)
    np.testing.assert_array_equal(emb.storage.matrix, expected(kind, src, clip))
    meta = emb.metadata["lightseq"]
    assert meta["quantized"] == kind.startswith("quant_")
    assert meta["hidden_size"] == hidden
    if kind.startswith("quant_"):
        assert meta["emb_clip_max"] == pytest.approx(clip)
    assert meta["model"].lower().replace(" ", "") in {"transformer", "quanttransformer", "gpt", "quantgpt", "bert", "quantbert"}
    assert meta["model"].lower() == kind.replace("_", ""), meta["model"]
    if trg is not None:
        emb_t = load_lightseq(io.BytesIO(data), vocab, side="trg", normalize=False)
        np.testing.assert_array_equal(emb_t.storage.matrix, expected(kind, trg, clip)[:n])
        assert emb_t.metadata["lightseq"]["padding_rows_dropped"] == 3
        assert emb_t.metadata["lightseq"]["sqrt_hidden_scaling"] == ("at lookup" if kind.startswith("quant_") else "stored")
    else:
        with pytest.raises(ValueError, match="only a source embedding"):
            load_lightseq(data, vocab, side="trg")


def test_no_scale_embedding_flag_recorded() -> None:
    pytest.importorskip("google.protobuf")
    src, trg = tables("transformer", 5, 4)
    data = make.build_proto("transformer", 4, src, trg, no_scale=True)
    meta = load_lightseq(data, list("abcde")).metadata["lightseq"]
    assert meta["no_scale_embedding"] is True
    assert meta["sqrt_hidden_scaling"] == "none"


@pytest.mark.parametrize("kind", KINDS)
def test_hdf5_exports(tmp_path: Path, kind: str) -> None:
    pytest.importorskip("h5py")
    hidden, n, clip = 8, 21, 0.9
    src, trg = tables(kind, n, hidden, seed=10 + KINDS.index(kind))
    path = tmp_path / "model.hdf5"
    make.build_hdf5(path, kind, hidden, src, trg, clip=clip)
    vocab = [f"w{i}" for i in range(n)]
    emb = load_lightseq(path, vocab, normalize=False)
    np.testing.assert_array_equal(emb.storage.matrix, expected(kind, src, clip))
    if trg is not None:
        emb_t = load_lightseq(path.read_bytes(), vocab, side="trg", normalize=False)
        np.testing.assert_array_equal(emb_t.storage.matrix, expected(kind, trg, clip)[:n])


def test_hdf5_garbage_is_a_format_error(tmp_path: Path) -> None:
    pytest.importorskip("h5py")
    data = (DATA / "lightseq_bert.hdf5").read_bytes()
    for cut in (8, 100, 600, len(data) // 2):
        with pytest.raises(FormatError):
            load_lightseq(data[:cut], ["a"])


# -- vocabularies -------------------------------------------------------------------------------


def test_fairseq_dictionary() -> None:
    tokens = read_fairseq_dict("▁a 5\n▁b 3\n<unk> 0 #fairseq:overwrite\nx 1\n".encode())
    assert tokens[:4] == ["<s>", "<pad>", "</s>", "<unk>"]
    assert tokens[4:] == ["▁a", "▁b", "x"]
    with pytest.raises(FormatError, match="repeats"):
        read_fairseq_dict(b"a 1\na 2\n")
    with pytest.raises(FormatError, match="<token> <count>"):
        read_fairseq_dict(b"lonely\n")


def test_sentencepiece_vocabulary_and_unknown_words(tmp_path: Path) -> None:
    pytest.importorskip("google.protobuf")
    spm = pytest.importorskip("sentencepiece")
    rng = random.Random(3)
    alphabets = ["abcdefghijklmnop", "абвгдежзийклмноп", "αβγδεζηθικλμνξοπ"]
    lines = [" ".join("".join(rng.choice(rng.choice(alphabets)) for _ in range(rng.randint(2, 6))) for _ in range(10)) for _ in range(600)]
    for byte_fallback in (False, True):
        buf = io.BytesIO()
        spm.SentencePieceTrainer.train(
            sentence_iterator=iter(lines),
            model_writer=buf,
            vocab_size=700 if byte_fallback else 400,
            minloglevel=2,
            model_type="bpe",
            byte_fallback=byte_fallback,
            hard_vocab_limit=False,
        )
        sp = spm.SentencePieceProcessor(model_proto=buf.getvalue())
        n = sp.GetPieceSize()
        src, trg = tables("transformer", n, 6, seed=4)
        (tmp_path / "spm.model").write_bytes(buf.getvalue())
        emb = load_lightseq(make.build_proto("transformer", 6, src, trg), tmp_path / "spm.model", normalize=False)
        assert emb.vocab.words == [sp.IdToPiece(i) for i in range(n)]
        skip = {i for i in range(n) if sp.IsControl(i) or sp.IsUnknown(i) or sp.IsUnused(i)}
        checked = 0
        words = ["".join(rng.choice(rng.choice(alphabets) + "xyzщ") for _ in range(rng.randint(1, 10))) for _ in range(250)]
        got_batch, _ = emb.embedding_batch(words)
        for k, w in enumerate(words):
            if w in emb.vocab.words:
                continue
            ids = [i for i in sp.EncodeAsIds(w) if i not in skip]
            if not ids:
                continue
            want = src[ids].astype(np.float64).mean(axis=0).astype(np.float32)  # issue 25: the mean of the model's rows
            checked += 1
            np.testing.assert_allclose(emb.embedding(w), want, rtol=0, atol=2e-6, err_msg=w)
            np.testing.assert_allclose(got_batch[k], want, rtol=0, atol=2e-6, err_msg=w)
        assert checked > 200


def test_tokenizer_json_vocabulary(tmp_path: Path) -> None:
    pytest.importorskip("google.protobuf")
    tokenizers = pytest.importorskip("tokenizers")
    tok = tokenizers.Tokenizer(tokenizers.models.WordLevel({"[UNK]": 0, "hallo": 1, "welt": 2}, unk_token="[UNK]"))
    tok.pre_tokenizer = tokenizers.pre_tokenizers.Whitespace()
    (tmp_path / "tokenizer.json").write_text(tok.to_str(), encoding="utf-8")
    src, _ = tables("gpt", 3, 4)
    emb = load_lightseq(make.build_proto("gpt", 4, src), tmp_path / "tokenizer.json", normalize=False)
    assert emb.vocab.words == ["[UNK]", "hallo", "welt"]
    np.testing.assert_array_equal(emb["welt"], src[2])


# -- hostile input ------------------------------------------------------------------------------


def field(number: int, payload: bytes) -> bytes:
    return varint(number << 3 | 2) + varint(len(payload)) + payload


def gpt(table: bytes, norm: bytes = np.ones(2, "<f4").tobytes(), extra: bytes = b"") -> bytes:
    return field(1, field(1, table) + field(3, norm) + extra)


@pytest.mark.parametrize(
    ("data", "error", "message"),
    [
        (b"\x0a\xff\xff\xff\xff\x0f", Truncated, "runs past the end"),
        (b"\x0a\x80", Truncated, "inside a varint"),
        (b"\x0a" + b"\xff" * 11, FormatError, "longer than 10 bytes"),
        (b"\x0b\x00", FormatError, "wire type"),
        (b"\x00\x00", FormatError, "invalid field number"),
        (gpt(np.ones(3, "<f4").tobytes()), FormatError, "multiple of 2"),
        (gpt(np.ones(4, "<f4").tobytes(), norm=b""), FormatError, "norm_scale"),
        (gpt(np.ones(4, "<f4").tobytes(), norm=b"\x00\x00\x80"), FormatError, "multiple of 4 bytes"),
        (field(1, field(1, np.ones(4, "<f4").tobytes()) + b"\x18\x01"), FormatError, "wire type"),
        (gpt(np.ones(2, "<f4").tobytes()), FormatError, "fewer rows"),
        (gpt(np.array([1, np.inf, 0, 0], "<f4").tobytes()), FormatError, "NaN or infinite"),
        (gpt(bytes(4), extra=b"\x2d" + struct.pack("<f", -1.0)), FormatError, "emb_clip_max"),
        (field(1, b"\x1a\x01"), Truncated, "runs past the end"),
        (b"", FormatError, "no src_embedding"),
    ],
)
def test_hostile_protobuf(data: bytes, error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=message) as info:
        load_lightseq(data, ["a", "b"])
    assert isinstance(info.value, FormatError)
    assert info.value.chunk is not None
    assert info.value.chunk.startswith("LightSeq")


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="side"):
        load_lightseq(b"", ["a"], side="tgt")
    with pytest.raises(TypeError):
        load_lightseq(DATA / "lightseq_transformer.pb", 42)


def test_unpacked_and_split_repeated_floats() -> None:
    # proto3 writers pack repeated floats, but parsers must also accept one I32 field per value and several packed runs.
    table = np.arange(8, dtype="<f4").reshape(4, 2) + 1
    unpacked = b"".join(b"\x0d" + v.tobytes() for v in table.reshape(-1))
    split = field(1, table[:1].tobytes()) + field(1, table[1:].tobytes())
    norm = field(3, np.ones(2, "<f4").tobytes())
    for layer in (unpacked + norm, split + norm, unpacked[:10] + field(1, table.reshape(-1)[2:].tobytes()) + norm):
        emb = load_lightseq(field(1, layer), list("abcd"), normalize=False)
        np.testing.assert_array_equal(emb.storage.matrix, table)
    # Two occurrences of the embedding layer are merged, as protobuf merges messages.
    emb = load_lightseq(field(1, split) + field(1, norm), list("abcd"), normalize=False)
    np.testing.assert_array_equal(emb.storage.matrix, table)


def test_a_file_that_hangs_libhdf5_is_a_format_error(monkeypatch: pytest.MonkeyPatch) -> None:
    # Found by the fuzzer: a crafted virtual-dataset layout makes libhdf5 loop inside H5Oopen, where no Python-level bound
    # reaches; h5py reads in a child process (finalfusion._isolated) that is stopped after HDF5_SECONDS.
    pytest.importorskip("h5py")
    from finalfusion.compat import lightseq

    monkeypatch.setattr(lightseq, "HDF5_SECONDS", 1.0)
    crafted = Path(__file__).parent.parent / "fuzz" / "crashers" / "lightseq-hdf5-hang-b7c16365ab77.bin"
    with pytest.raises(FormatError, match=r"LightSeq HDF5: .*no answer within 1\.0 s"):
        load_lightseq(crafted, [f"w{i}" for i in range(20)])
