"""GGUF against gguf-py and the tokenizer libraries: files written by gguf-py's GGUFWriter (every natively decoded type,
K-quants, big-endian, alignments), the llama/t5/gpt2 tokenizers against the real libraries, round trips, decoding, golden files.
Hand-built and malformed headers: test_gguf_reader.py."""

from __future__ import annotations

import builtins
import hashlib
import io
import json
import shutil
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import finalfusion
from _gguf_files import build
from _model_helpers import hf_skip, random_words, sentencepiece_skip, subword_rule, train_byte_level_bpe, train_sentencepiece
from finalfusion import Embeddings, FormatError, load_finalfusion, load_gguf, write_gguf
from finalfusion.compat.gguf import GGML_TYPES, read_gguf
from finalfusion.errors import MissingExtraError
from finalfusion.storage import NdArray
from finalfusion.vocab import SimpleVocab, TokenizerVocab

DATA = Path(__file__).resolve().parent / "data" / "models"
WORDS = random_words(300, seed=11)
NATIVE = ["F32", "F16", "BF16", "Q8_0", "Q4_0"]
VIA_GGUF = ["Q5_1", "Q4_K", "Q6_K"]


def _table(rows: int = 48, dims: int = 256, seed: int = 5) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((rows, dims)).astype(np.float32)


def _raw_tensor(gguf: Any, table: np.ndarray, qtype: str) -> np.ndarray:
    """The tensor as gguf-py stores it: quantized by gguf.quants, or random but sane blocks for K-quants (gguf-py cannot quantize those)."""
    q = gguf.GGMLQuantizationType[qtype]
    if qtype not in ("Q4_K", "Q6_K"):
        return gguf.quants.quantize(table, q)
    _, block, size = GGML_TYPES[int(q)]
    rng = np.random.default_rng(9)
    raw = rng.integers(0, 256, size=(table.shape[0], table.shape[1] // block, size), dtype=np.uint8)
    scale = np.frombuffer(np.float16(0.01).tobytes(), dtype=np.uint8)
    for at in (0, 2) if qtype == "Q4_K" else (208,):
        raw[:, :, at : at + 2] = scale
    return raw.reshape(table.shape[0], -1)


def write_with_gguf(
    path: Path,
    table: np.ndarray,
    qtype: str,
    tokens: list[str],
    *,
    kv: dict[str, Any] | None = None,
    alignment: int | None = None,
    typed_kv: list[tuple[Any, ...]] | None = None,
) -> Any:
    """A GGUF file written by gguf-py's GGUFWriter; returns the reference table (dequantized by gguf-py's reader).

    ``kv`` maps writer methods to their value; ``typed_kv`` holds the arguments of ``add_key_value`` calls.
    """
    gguf = pytest.importorskip("gguf")
    writer = gguf.GGUFWriter(str(path), "llama")
    if alignment:
        writer.add_custom_alignment(alignment)
    writer.add_name("test model")
    writer.add_token_list(tokens)
    for key, value in (kv or {}).items():
        getattr(writer, key)(value)
    for args in typed_kv or []:
        writer.add_key_value(*args)
    if not kv or "add_tokenizer_model" not in kv:
        writer.add_tokenizer_model("none")
    raw = _raw_tensor(gguf, table, qtype)
    writer.add_tensor("token_embd.weight", raw, raw_dtype=gguf.GGMLQuantizationType[qtype])
    writer.add_tensor("output_norm.weight", np.ones(table.shape[1], dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    reader = gguf.GGUFReader(str(path))
    tensor = next(t for t in reader.tensors if t.name == "token_embd.weight")
    return gguf.quants.dequantize(tensor.data, tensor.tensor_type).reshape(table.shape)


def to_big_endian(src: Path, dst: Path) -> None:
    """Convert with gguf-py's own gguf_convert_endian (as llama.cpp does for s390x)."""
    gguf = pytest.importorskip("gguf")
    from gguf.scripts import gguf_convert_endian

    shutil.copy(src, dst)
    reader = gguf.GGUFReader(str(dst), "r+")
    args = type("Args", (), {"order": "big", "dry_run": False})()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(builtins, "input", lambda *_: "YES")
        gguf_convert_endian.convert_byteorder(reader, args)
    del reader


TOKENS = [f"tok{i}" for i in range(48)]


@pytest.mark.parametrize("qtype", NATIVE + VIA_GGUF)
def test_tables_equal_gguf_py_dequantized(tmp_path: Path, qtype: str) -> None:
    table = _table()
    path = tmp_path / f"{qtype}.gguf"
    reference = write_with_gguf(path, table, qtype, TOKENS)
    emb = load_gguf(path, normalize=False)
    np.testing.assert_array_equal(emb.storage.matrix, reference)
    assert emb.vocab.words == TOKENS
    assert emb.metadata["gguf"] == {
        "version": 3,
        "byte_order": "little",
        "tensor": "token_embd.weight",
        "type": qtype,
        "architecture": "llama",
        "name": "test model",
        "tokenizer": "none",
    }
    normalized = load_gguf(path.read_bytes())
    np.testing.assert_allclose(normalized.storage.matrix * normalized.norms.norms[:, None], reference, rtol=1e-5, atol=1e-6)
    if qtype in ("F32", "F16", "BF16", "Q8_0"):
        assert np.abs(reference - table).max() < 0.05 * np.abs(table).max()  # the reference is the table, not noise


@pytest.mark.parametrize("qtype", [*NATIVE, "Q4_K", "Q6_K"])
def test_big_endian_files_decode_like_little_endian(tmp_path: Path, qtype: str) -> None:
    table = _table()
    little = tmp_path / "le.gguf"
    reference = write_with_gguf(little, table, qtype, TOKENS)
    big = tmp_path / "be.gguf"
    to_big_endian(little, big)
    assert big.read_bytes()[4:8] == b"\x00\x00\x00\x03"
    emb = load_gguf(big, normalize=False)
    np.testing.assert_array_equal(emb.storage.matrix, reference)
    assert emb.metadata["gguf"]["byte_order"] == "big"
    assert emb.vocab.words == TOKENS


@pytest.mark.parametrize("alignment", [8, 64, 256])
def test_any_alignment(tmp_path: Path, alignment: int) -> None:
    path = tmp_path / "a.gguf"
    reference = write_with_gguf(path, _table(dims=64), "F16", TOKENS, alignment=alignment)
    head = read_gguf(path.read_bytes())
    assert head.alignment == alignment
    assert head.tensors["token_embd.weight"].offset % alignment == 0
    np.testing.assert_array_equal(load_gguf(path, normalize=False).storage.matrix, reference)


def test_mmap_f32_is_a_zero_copy_view(tmp_path: Path) -> None:
    path = tmp_path / "f32.gguf"
    reference = write_with_gguf(path, _table(), "F32", TOKENS)
    emb = load_gguf(path, normalize=False, mmap=True)
    matrix = emb.storage.matrix
    assert not matrix.flags.writeable
    assert not matrix.flags.owndata
    base = matrix
    while isinstance(base, np.ndarray) and base.base is not None:
        base = base.base
    if isinstance(base, memoryview):
        base = base.obj
    assert type(base).__name__ == "mmap"
    np.testing.assert_array_equal(matrix, reference)
    with pytest.raises(ValueError, match="normalize=False"):
        load_gguf(path, mmap=True)
    # Other types are decoded into memory whatever mmap says.
    f16 = tmp_path / "f16.gguf"
    write_with_gguf(f16, _table(), "F16", TOKENS)
    assert load_gguf(f16, mmap=True).storage.matrix.flags.writeable


def test_without_gguf_package_k_quants_name_the_type_and_the_extra(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "q4k.gguf"
    write_with_gguf(path, _table(), "Q4_K", TOKENS)
    native = tmp_path / "q8.gguf"
    reference = write_with_gguf(native, _table(), "Q8_0", TOKENS)
    monkeypatch.setitem(sys.modules, "gguf", None)
    monkeypatch.setitem(sys.modules, "gguf.quants", None)
    with pytest.raises(MissingExtraError, match=r"Q4_K.*finalfusion-py\[models\]"):
        load_gguf(path)
    np.testing.assert_array_equal(load_gguf(native, normalize=False).storage.matrix, reference)  # native types need nothing


@pytest.mark.parametrize(
    ("raised", "expected", "message"),
    [
        (NotImplementedError("dequantization is not implemented"), FormatError, r"the installed gguf \S+ cannot decode Q4_K tensors"),
        (ValueError("cannot reshape array"), FormatError, r"gguf cannot decode tensor token_embd\.weight.*cannot reshape"),
    ],
)
def test_gguf_decoding_errors_say_what_failed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, raised: Exception, expected: type, message: str) -> None:
    # The package is installed: a type it cannot decode names its version (never "install the extra"); data it cannot decode is the file's fault.
    quants = pytest.importorskip("gguf.quants")
    path = tmp_path / "q4k.gguf"
    write_with_gguf(path, _table(), "Q4_K", TOKENS)

    def dequantize(data: np.ndarray, qtype: object) -> np.ndarray:
        raise raised

    monkeypatch.setattr(quants, "dequantize", dequantize)
    with pytest.raises(expected, match=message):
        load_gguf(path)


# -- tokenizers ---------------------------------------------------------------------------------


def _llama_kv(sp: Any) -> tuple[list[str], dict[str, Any]]:
    """Tokens, scores, types and special ids as llama.cpp's convert_hf_to_gguf writes a SentencePiece vocabulary."""
    tokens, scores, types = [], [], []
    for i in range(sp.GetPieceSize()):
        tokens.append(sp.IdToPiece(i))
        scores.append(sp.GetScore(i))
        t = 1
        if sp.IsUnknown(i):
            t = 2
        elif sp.IsControl(i):
            t = 3
        elif sp.IsUnused(i):
            t = 5
        elif sp.IsByte(i):
            t = 6
        types.append(t)
    kv = {
        "add_token_scores": scores,
        "add_token_types": types,
        "add_unk_token_id": sp.unk_id(),
        "add_bos_token_id": sp.bos_id(),
        "add_eos_token_id": sp.eos_id(),
    }
    return tokens, kv


@pytest.mark.parametrize(
    ("scores", "sub_type", "found"),
    [
        ([0.0, 1e300, -1.0], "FLOAT64", "1e+300 (token 1)"),  # stored as f64, past float32: struct.pack('<f') overflowed
        ([0.0, -1.0, float("nan")], "FLOAT32", "nan (token 2)"),
        ([float("-inf"), 0.0, -1.0], "FLOAT32", "-inf (token 0)"),
    ],
)
def test_sentencepiece_scores_must_be_finite_float32(tmp_path: Path, scores: list[float], sub_type: str, found: str) -> None:
    gguf = pytest.importorskip("gguf")
    path = tmp_path / "llama.gguf"
    kind = gguf.GGUFValueType
    typed = [("tokenizer.ggml.scores", scores, kind.ARRAY, kind[sub_type])]
    kv = {"add_tokenizer_model": "llama", "add_token_types": [2, 1, 1]}
    write_with_gguf(path, _table(rows=3, dims=32), "F32", ["<unk>", "\u2581a", "\u2581b"], kv=kv, typed_kv=typed)
    with pytest.raises(FormatError, match=r"tokenizer\.ggml\.scores holds a value that is not a finite float32") as info:
        load_gguf(path)
    assert info.value.found == found


def _check_unknown_words(emb: Embeddings, encode: Any, skip: set[int], matrix: np.ndarray, minimum: int) -> None:
    batch, found = emb.embedding_batch(WORDS)
    checked = 0
    for word, row, ok in zip(WORDS, batch, found, strict=True):
        if word in emb.vocab:
            continue
        expected = subword_rule(matrix, encode(word), skip)
        if expected is None:
            assert not ok, word
            continue
        np.testing.assert_allclose(row, expected, atol=2e-6, err_msg=word)
        np.testing.assert_allclose(emb.embedding(word), expected, atol=2e-6, err_msg=word)
        checked += 1
    assert checked >= minimum


@pytest.mark.parametrize("byte_fallback", [False, True])
def test_llama_vocabulary_tokenizes_like_sentencepiece(tmp_path: Path, byte_fallback: bool) -> None:
    spm = pytest.importorskip("sentencepiece")
    sp = spm.SentencePieceProcessor(model_proto=train_sentencepiece("bpe", byte_fallback))
    tokens, kv = _llama_kv(sp)
    table = _table(rows=len(tokens), dims=32)
    path = tmp_path / "llama.gguf"
    write_with_gguf(path, table, "F32", tokens, kv={"add_tokenizer_model": "llama", **kv})
    emb = load_gguf(path, normalize=False)
    assert isinstance(emb.vocab, TokenizerVocab)
    assert emb.vocab.tokenizer.kind == "sentencepiece-llamacpp"  # sentencepiece, cut at user-defined tokens first as llama.cpp
    _check_unknown_words(emb, sp.encode, sentencepiece_skip(sp), table, 200)
    word = next(w for w in WORDS if w not in emb.vocab)
    assert emb.vocab.subwords(word) == sp.encode_as_pieces(word)


def test_t5_vocabulary_tokenizes_like_sentencepiece_unigram(tmp_path: Path) -> None:
    spm = pytest.importorskip("sentencepiece")
    from sentencepiece import sentencepiece_model_pb2

    proto = train_sentencepiece("unigram", True)
    sp = spm.SentencePieceProcessor(model_proto=proto)
    model = sentencepiece_model_pb2.ModelProto()
    model.ParseFromString(proto)
    tokens, kv = _llama_kv(sp)
    kv.update(add_tokenizer_model="t5", add_precompiled_charsmap=model.normalizer_spec.precompiled_charsmap, add_remove_extra_whitespaces=True)
    table = _table(rows=len(tokens), dims=32)
    path = tmp_path / "t5.gguf"
    write_with_gguf(path, table, "F32", tokens, kv=kv)
    emb = load_gguf(path, normalize=False)
    # With the charsmap, normalisation is SentencePiece's own: even NFKC-unstable words match.
    words = [*WORDS, "\uff21\uff22\uff23", "\ufb01nd", "\u2460\u2461", "\u216b"]  # fullwidth ABC, the fi ligature, circled 1 2, roman 12
    encode = sp.encode
    for word in words:
        if word in emb.vocab:
            continue
        expected = subword_rule(table, encode(word), sentencepiece_skip(sp))
        got = emb.embedding(word)
        if expected is None:
            assert got is None
        else:
            np.testing.assert_allclose(got, expected, atol=2e-6, err_msg=word)


def test_gpt2_vocabulary_tokenizes_like_tokenizers(tmp_path: Path) -> None:
    tokenizers = pytest.importorskip("tokenizers")
    text = train_byte_level_bpe()
    tok = tokenizers.Tokenizer.from_str(text)
    doc = json.loads(text)
    vocab = doc["model"]["vocab"]
    tokens = sorted(vocab, key=vocab.__getitem__)
    merges = [m if isinstance(m, str) else " ".join(m) for m in doc["model"]["merges"]]
    types = [3 if t in ("<|endoftext|>", "<|pad|>") else 1 for t in tokens]
    table = _table(rows=len(tokens), dims=32)
    path = tmp_path / "gpt2.gguf"
    # GPT-2's split (without tokenizer.ggml.pre llama.cpp splits with its "default" regexes)
    kv = {"add_tokenizer_model": "gpt2", "add_tokenizer_pre": "gpt-2", "add_token_merges": merges, "add_token_types": types}
    write_with_gguf(path, table, "F16", tokens, kv=kv)
    emb = load_gguf(path, normalize=False)
    assert emb.vocab.tokenizer.kind == "huggingface-llamacpp"  # tokenizers, special tokens never matched in text as llama.cpp
    reference = emb.storage.matrix
    _check_unknown_words(emb, lambda w: tok.encode(w, add_special_tokens=False).ids, hf_skip(tok, text), reference, 250)
    assert emb.embedding("<|endoftext|>x") is not None  # the special token's text is split like any other


@pytest.mark.parametrize("bad", ["joined", "longest", "part", "no space", "three parts"])
def test_gpt2_merges_the_bpe_model_cannot_hold_are_format_errors_at_load(tmp_path: Path, bad: str) -> None:
    # tokenizers requires a, b and ab of every merge "a b" to be tokens; checked only when the tokenizer is built
    # (the first unknown word), a joined token longer than every token made it panic (huggingface/tokenizers#2198).
    pytest.importorskip("gguf")
    doc = json.loads(train_byte_level_bpe())
    vocab = doc["model"]["vocab"]
    tokens = sorted(vocab, key=vocab.__getitem__)
    merges = [m if isinstance(m, str) else " ".join(m) for m in doc["model"]["merges"]]
    longest = max(tokens, key=len)
    a, b = next((x, y) for x in tokens[2:] for y in tokens[2:] if len(x) < 3 and len(y) < 3 and x + y not in vocab)
    wrong = {"joined": f"{a} {b}", "longest": f"{longest} {longest}", "part": f"{a} not-a-token", "no space": a, "three parts": f"{a} {b} {a}"}[bad]
    at = len(merges) // 2
    merges.insert(at, wrong)
    path = tmp_path / "gpt2.gguf"
    write_with_gguf(path, _table(rows=len(tokens), dims=32), "F32", tokens, kv={"add_tokenizer_model": "gpt2", "add_token_merges": merges})
    with pytest.raises(FormatError, match=rf"merge {at} of tokenizer\.ggml\.merges does not join two tokens into a third") as info:
        load_gguf(path)
    assert info.value.found == wrong


# -- round trips ----------------------------------------------------------------------------------


def _llama_file(tmp_path: Path) -> tuple[Path, Any]:
    spm = pytest.importorskip("sentencepiece")
    pytest.importorskip("gguf")
    sp = spm.SentencePieceProcessor(model_proto=train_sentencepiece("bpe", True))
    tokens, kv = _llama_kv(sp)
    path = tmp_path / "llama.gguf"
    write_with_gguf(path, _table(rows=len(tokens), dims=32), "Q8_0", tokens, kv={"add_tokenizer_model": "llama", **kv})
    return path, sp


def test_round_trip_gguf_finalfusion_gguf(tmp_path: Path) -> None:
    gguf = pytest.importorskip("gguf")
    path, _ = _llama_file(tmp_path)
    emb = load_gguf(path)
    out = tmp_path / "again.gguf"
    write_gguf(out, emb)
    reader = gguf.GGUFReader(str(out))
    tensor = reader.get_tensor(0)
    assert tensor.name == "token_embd.weight"
    original = load_gguf(path, normalize=False).storage.matrix
    np.testing.assert_allclose(tensor.data.reshape(original.shape), original, rtol=1e-6, atol=1e-7)
    field = reader.fields["tokenizer.ggml.tokens"]
    assert [bytes(field.parts[i]).decode() for i in field.data] == emb.vocab.words
    assert bytes(reader.fields["tokenizer.ggml.model"].parts[-1]).decode() == "llama"
    back = load_gguf(out)
    assert back.vocab == emb.vocab  # same tokens, same tokenizer (scores, types, special ids)
    np.testing.assert_allclose(back.embedding_batch(WORDS)[0], emb.embedding_batch(WORDS)[0], atol=2e-6)
    f16 = tmp_path / "f16.gguf"
    write_gguf(f16, emb, dtype="F16")
    assert gguf.GGUFReader(str(f16)).get_tensor(0).tensor_type == gguf.GGMLQuantizationType.F16


def test_gguf_to_fifu_keeps_unknown_word_vectors(tmp_path: Path) -> None:
    path, _ = _llama_file(tmp_path)
    emb = load_gguf(path)
    fifu = tmp_path / "model.fifu"
    emb.write(fifu)
    back = load_finalfusion(fifu)
    assert isinstance(back.vocab, TokenizerVocab)
    assert back.metadata["gguf"]["type"] == "Q8_0"
    np.testing.assert_array_equal(back.embedding_batch(WORDS)[0], emb.embedding_batch(WORDS)[0])
    assert type(finalfusion.load_vocab(fifu)) is SimpleVocab


def test_gpt2_round_trip(tmp_path: Path) -> None:
    tokenizers = pytest.importorskip("tokenizers")
    text = train_byte_level_bpe()
    vocab = tokenizers.Tokenizer.from_str(text).get_vocab(with_added_tokens=True)
    tokens = sorted(vocab, key=vocab.__getitem__)
    from finalfusion.vocab import HuggingFaceTokenizer

    emb = Embeddings(NdArray(_table(rows=len(tokens), dims=16)), TokenizerVocab(tokens, HuggingFaceTokenizer(text)))
    buf = io.BytesIO()
    write_gguf(buf, emb)
    head = read_gguf(buf.getvalue())
    assert head.kv["tokenizer.ggml.model"] == "gpt2"
    assert head.kv["tokenizer.ggml.pre"] == "gpt-2"  # GPT-2's split: without the key llama.cpp (and load_gguf) split with "default"
    assert len(head.kv["tokenizer.ggml.merges"]) == len(json.loads(text)["model"]["merges"])
    back = load_gguf(buf.getvalue(), normalize=False)
    np.testing.assert_allclose(back.embedding_batch(WORDS)[0], emb.embedding_batch(WORDS)[0], atol=2e-6)


def test_simple_vocabulary_round_trip_and_load_by_content(tmp_path: Path) -> None:
    matrix = _table(rows=5, dims=8)
    emb = Embeddings(NdArray(matrix), SimpleVocab(["a", "b", "c", "ä", "🙂"]))
    path = tmp_path / "simple.gguf"
    write_gguf(path, emb)
    for source in (path, str(path), path.read_bytes(), io.BytesIO(path.read_bytes())):
        loaded = finalfusion.load(source, normalize=False)
        assert type(loaded.vocab) is SimpleVocab
        np.testing.assert_array_equal(loaded.storage.matrix, matrix)
    assert finalfusion.compat.sniff_format(path.read_bytes()[:64]) == "gguf"


# -- decoding -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("ggml_type", sorted(GGML_TYPES))
def test_a_table_without_columns_loads_in_every_type(ggml_type: int) -> None:
    # gguf's dequantize cannot reshape an empty block: a K-quant table of 2 x 0 raised MissingExtraError
    # ("needs the gguf package") with the package installed. Nothing needs decoding; the table is empty.
    if GGML_TYPES[ggml_type][0] not in ("F32", "F16", "BF16", "F64", "Q8_0", "Q4_0"):
        pytest.importorskip("gguf")
    emb = load_gguf(build(ne=(0, 2), ggml_type=ggml_type, data=b""), normalize=False)
    assert emb.storage.matrix.shape == (2, 0)
    assert emb.embedding("a").shape == (0,)


# -- golden files (no extras needed) -------------------------------------------------------------------


GOLDEN = json.loads((DATA / "gguf_expected.json").read_text()) if (DATA / "gguf_expected.json").exists() else {}


@pytest.mark.parametrize("name", sorted(GOLDEN))
def test_golden_files(name: str) -> None:
    case = GOLDEN[name]
    emb = load_gguf(DATA / name, normalize=False)
    assert emb.vocab.words == case["tokens"]
    assert emb.metadata["gguf"]["type"] == case["type"]
    assert emb.metadata["gguf"]["byte_order"] == case["byte_order"]
    matrix = emb.storage.matrix
    assert list(matrix.shape) == case["shape"]
    assert hashlib.sha256(np.ascontiguousarray(matrix, dtype="<f4").tobytes()).hexdigest() == case["sha256"]
    if "rows" in case:
        np.testing.assert_array_equal(matrix, np.array(case["rows"], dtype=np.float32))
    if "tokenizer" in case:
        assert emb.vocab.tokenizer.kind == case["tokenizer"]
    assert len(case.get("unknown", {})) == (6 if "tokenizer" in case else 0)
    for word, expected in case.get("unknown", {}).items():
        try:
            got = emb.embedding(word)
        except MissingExtraError:  # tokenizing needs the extra; the table and vocabulary did not
            continue
        # the golden vector is the direction (the normalised sum); issue 25's word rule gives the mean itself (normalize=False)
        np.testing.assert_allclose(got / np.linalg.norm(got), np.array(expected, dtype=np.float32), atol=2e-6)


@pytest.mark.parametrize("qtype", NATIVE)
def test_decoding_in_many_blocks_on_threads_gives_the_same_table(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, qtype: str) -> None:
    from finalfusion.compat.gguf import _ggml as ours

    path = tmp_path / "t.gguf"
    reference = write_with_gguf(path, _table(rows=50, dims=64), qtype, [f"t{i}" for i in range(50)])
    monkeypatch.setattr(ours, "_BLOCK_BYTES", 3 * 64 * 4)  # 3 rows per block: 17 blocks, the last one short
    for threads in (1, 3):
        monkeypatch.setattr(ours, "DECODE_THREADS", threads)
        np.testing.assert_array_equal(load_gguf(path, normalize=False).storage.matrix, reference)
