"""load_safetensors: real checkpoints written by safetensors, vocabularies from real tokenizers, hostile headers."""

from __future__ import annotations

import json
import random
import struct
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import finalfusion
from finalfusion import FormatError, Truncated, load_safetensors
from finalfusion.compat.safetensors import EMBEDDING_TENSOR_NAMES, read_safetensors_header

DATA = Path(__file__).resolve().parent / "data" / "models"
SCRIPTS = [
    "abcdefghijklmnopqrstuvwxyzäöüß",
    "абвгдежзийклмнопрстуфхцчшщыэюя",
    "αβγδεζηθικλμνξοπρστυφχψω",
    "אבגדהוזחטיכלמנסעפצקרשת",
    "的一是不了人我在有他这为之大来以个中上们",
]


def corpus(n: int = 3000, seed: int = 1) -> list[str]:
    rng = random.Random(seed)
    lines = []
    for _ in range(n):
        alphabet = rng.choice(SCRIPTS)
        lines.append(" ".join("".join(rng.choice(alphabet[:12]) for _ in range(rng.randint(2, 7))) for _ in range(8)))
    return lines


def random_words(n: int, seed: int, letters: int | None = None) -> list[str]:
    rng = random.Random(seed)
    words = []
    for _ in range(n):
        alphabet = rng.choice(SCRIPTS)[:letters]
        words.append("".join(rng.choice(alphabet) for _ in range(rng.randint(1, 12))))
    return words


def bpe_tokenizer_json(vocab_size: int = 300) -> str:
    tokenizers = pytest.importorskip("tokenizers")
    tok = tokenizers.Tokenizer(tokenizers.models.BPE(unk_token="[UNK]"))
    tok.pre_tokenizer = tokenizers.pre_tokenizers.Whitespace()
    trainer = tokenizers.trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=["[UNK]", "[CLS]", "[SEP]"], show_progress=False)
    tok.train_from_iterator(corpus(), trainer)
    return str(tok.to_str())


def wordpiece_tokenizer_json(vocab_size: int = 250) -> str:
    tokenizers = pytest.importorskip("tokenizers")
    tok = tokenizers.Tokenizer(tokenizers.models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = tokenizers.normalizers.BertNormalizer()
    tok.pre_tokenizer = tokenizers.pre_tokenizers.BertPreTokenizer()
    trainer = tokenizers.trainers.WordPieceTrainer(vocab_size=vocab_size, special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]"], show_progress=False)
    tok.train_from_iterator(corpus(seed=2), trainer)
    return str(tok.to_str())


def save(path: Path, tensors: dict[str, np.ndarray], bf16: dict[str, np.ndarray] | None = None) -> None:
    """Write with the real safetensors library; ``bf16`` holds float32 arrays stored as BF16 (truncated to the upper 16 bits)."""
    st = pytest.importorskip("safetensors")
    from safetensors.numpy import save_file

    if not bf16:
        save_file(tensors, str(path))
        return
    keep = []
    specs = {}
    for name, arr in tensors.items():
        arr = np.ascontiguousarray(arr)
        keep.append(arr)
        specs[name] = st.TensorSpec(dtype=arr.dtype.name, shape=list(arr.shape), data_ptr=arr.ctypes.data, data_len=arr.nbytes)
    for name, arr in bf16.items():
        bits = np.ascontiguousarray((np.ascontiguousarray(arr, dtype=np.float32).view(np.uint32) >> 16).astype("<u2"))
        keep.append(bits)
        specs[name] = st.TensorSpec(dtype="bfloat16", shape=list(arr.shape), data_ptr=bits.ctypes.data, data_len=bits.nbytes)
    st.serialize_file(specs, str(path))


def bf16_round(arr: np.ndarray) -> np.ndarray:
    return ((arr.astype(np.float32).view(np.uint32) >> 16) << 16).astype(np.uint32).view(np.float32)


def tokens_of(tokenizer_json: str) -> list[str]:
    tokenizers = pytest.importorskip("tokenizers")
    tok = tokenizers.Tokenizer.from_str(tokenizer_json)
    vocab = tok.get_vocab(with_added_tokens=True)
    out = [""] * (max(vocab.values()) + 1)
    for t, i in vocab.items():
        out[i] = t
    return out


def expected_unknown(table: np.ndarray, tokenizer_json: str, word: str, norms: np.ndarray | None = None) -> np.ndarray | None:
    """Issue 25's word rule: the mean of the model's rows (``table`` times ``norms``) of the ids the real tokenizer
    returns, special and unknown tokens dropped; l2-normalised when the embeddings keep ``norms``."""
    tokenizers = pytest.importorskip("tokenizers")
    tok = tokenizers.Tokenizer.from_str(tokenizer_json)
    skip = {i for i, t in tok.get_added_tokens_decoder().items() if t.special}
    ids = [i for i in tok.encode(word, add_special_tokens=False).ids if i not in skip]
    if not ids:
        return None
    rows = table[ids].astype(np.float64)
    if norms is None:
        return rows.mean(axis=0).astype(np.float32)
    vec = (rows * norms[ids].astype(np.float64)[:, None]).mean(axis=0)
    norm = np.linalg.norm(vec)
    return (vec / norm if norm else vec).astype(np.float32)


# -- real checkpoints ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def bpe_json() -> str:
    return bpe_tokenizer_json()


@pytest.mark.parametrize("dtype", ["F32", "F16", "BF16", "F64"])
def test_table_and_unknown_words_bpe(tmp_path: Path, bpe_json: str, dtype: str) -> None:
    tokens = tokens_of(bpe_json)
    rng = np.random.default_rng(3)
    table = rng.standard_normal((len(tokens), 16)).astype(np.float32)
    other = {"lm_head.weight": rng.standard_normal((len(tokens), 16)).astype(np.float32), "model.norm.weight": np.ones(16, np.float32)}
    name = "model.embed_tokens.weight"
    if dtype == "BF16":
        save(tmp_path / "model.safetensors", other, {name: table})
        source = bf16_round(table)
    else:
        np_dtype = {"F32": np.float32, "F16": np.float16, "F64": np.float64}[dtype]
        save(tmp_path / "model.safetensors", {**other, name: table.astype(np_dtype)})
        source = table.astype(np_dtype).astype(np.float32)
    (tmp_path / "tokenizer.json").write_text(bpe_json, encoding="utf-8")

    emb = load_safetensors(tmp_path, normalize=False)
    assert type(emb.vocab).__name__ == "TokenizerVocab"
    assert emb.vocab.words == tokens
    np.testing.assert_array_equal(emb.storage.matrix, source)
    assert emb.metadata["safetensors"]["tensor"] == name
    assert emb.metadata["safetensors"]["dtype"] == dtype
    assert emb.metadata["safetensors"]["padding_rows_dropped"] == 0
    for i, tok in enumerate(tokens):  # token strings exactly: token_embedding (issue 25: emb[word] goes through the tokenizer)
        np.testing.assert_array_equal(emb.token_embedding(tok), source[i])
    words = [w for w in random_words(400, 7) if w not in emb.vocab.words]
    assert len(words) > 300
    found = 0
    batch, ok = emb.embedding_batch(words)
    for k, w in enumerate(words):
        want = expected_unknown(source, bpe_json, w)
        got = emb.embedding(w)
        if want is None:
            assert got is None or not np.any(got), w
            continue
        found += 1
        np.testing.assert_allclose(got, want, rtol=0, atol=2e-6, err_msg=w)
        np.testing.assert_allclose(batch[k], want, rtol=0, atol=2e-6, err_msg=w)
        assert ok[k]
    assert found > 300

    normalized = load_safetensors(tmp_path / "model.safetensors")
    norms = np.linalg.norm(source, axis=1)
    np.testing.assert_allclose(normalized.norms.norms, norms, rtol=1e-6)
    np.testing.assert_allclose(normalized.storage.matrix, source / norms[:, None], rtol=0, atol=1e-6)
    for w in words[:100]:
        want = expected_unknown(normalized.storage.matrix, bpe_json, w, normalized.norms.norms)
        got = normalized.embedding(w)
        if want is not None:
            np.testing.assert_allclose(got, want, rtol=0, atol=2e-6, err_msg=w)


def test_wordpiece_padded_table_sharded(tmp_path: Path) -> None:
    tj = wordpiece_tokenizer_json()
    tokens = tokens_of(tj)
    rng = np.random.default_rng(4)
    rows = (len(tokens) + 63) // 64 * 64 + 64  # padded like real checkpoints
    table = rng.standard_normal((rows, 8)).astype(np.float16)
    name = "bert.embeddings.word_embeddings.weight"
    save(tmp_path / "model-00001-of-00002.safetensors", {"bert.pooler.dense.weight": rng.standard_normal((8, 8)).astype(np.float16)})
    save(tmp_path / "model-00002-of-00002.safetensors", {name: table, "bert.embeddings.position_embeddings.weight": np.zeros((4, 8), np.float16)})
    index = {
        "metadata": {"total_size": 1},
        "weight_map": {
            "bert.pooler.dense.weight": "model-00001-of-00002.safetensors",
            name: "model-00002-of-00002.safetensors",
            "bert.embeddings.position_embeddings.weight": "model-00002-of-00002.safetensors",
        },
    }
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps(index), encoding="utf-8")
    (tmp_path / "tokenizer.json").write_text(tj, encoding="utf-8")
    for source in (tmp_path, tmp_path / "model.safetensors.index.json"):
        emb = load_safetensors(source, normalize=False)
        assert emb.metadata["safetensors"]["padding_rows_dropped"] == rows - len(tokens)
        assert emb.metadata["safetensors"]["file"] == "model-00002-of-00002.safetensors"
        np.testing.assert_array_equal(emb.storage.matrix, table[: len(tokens)].astype(np.float32))
    words = [w for w in random_words(300, 9, letters=12) if w not in emb.vocab.words]  # WordPiece: one unseen letter makes the word [UNK]
    src = table[: len(tokens)].astype(np.float32)
    checked = 0
    for w in words:
        want = expected_unknown(src, tj, w)
        if want is not None:
            checked += 1
            np.testing.assert_allclose(emb.embedding(w), want, rtol=0, atol=2e-6, err_msg=w)
    assert checked > 200
    # Fewer rows than tokens is an error, not a silent truncation.
    save(tmp_path / "small.safetensors", {"embeddings": table[:10]})
    with pytest.raises(FormatError, match="fewer rows than the vocabulary"):
        load_safetensors(tmp_path / "small.safetensors", tokenizer=tmp_path / "tokenizer.json")


def test_sentencepiece_tokenizer_model_next_to_weights(tmp_path: Path) -> None:
    spm = pytest.importorskip("sentencepiece")
    import io

    buf = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(corpus(800, 5)), model_writer=buf, vocab_size=120, minloglevel=2)
    (tmp_path / "tokenizer.model").write_bytes(buf.getvalue())
    sp = spm.SentencePieceProcessor(model_proto=buf.getvalue())
    n = sp.GetPieceSize()
    table = np.random.default_rng(5).standard_normal((n, 6)).astype(np.float32)
    save(tmp_path / "model.safetensors", {"tok_embeddings.weight": table})
    emb = load_safetensors(tmp_path, normalize=False)
    assert emb.vocab.words == [sp.IdToPiece(i) for i in range(n)]
    skip = {i for i in range(n) if sp.IsControl(i) or sp.IsUnknown(i) or sp.IsUnused(i)}
    checked = 0
    for w in random_words(200, 11):
        if w in emb.vocab.words:
            continue
        ids = [i for i in sp.EncodeAsIds(w) if i not in skip]
        if not ids:
            continue
        vec = table[ids].mean(axis=0)  # issue 25: the mean of the model's rows
        checked += 1
        np.testing.assert_allclose(emb.embedding(w), vec, rtol=0, atol=2e-6, err_msg=w)
    assert checked > 150


def test_model2vec_and_explicit_tensor(tmp_path: Path) -> None:
    table = np.arange(12, dtype=np.float32).reshape(4, 3) + 1
    save(tmp_path / "model.safetensors", {"embeddings": table, "weights": np.ones(4, np.float32)})
    emb = load_safetensors(tmp_path / "model.safetensors", tokenizer=["a", "b", "c", "d"], normalize=False)
    assert emb.metadata["safetensors"]["tensor"] == "embeddings"
    np.testing.assert_array_equal(emb["c"], table[2])
    with pytest.raises(FormatError, match=r"cannot be read as float32|non-empty matrix"):
        load_safetensors(tmp_path / "model.safetensors", tensor="weights", tokenizer=["a"])
    with pytest.raises(FormatError, match="no tensor 'nope'"):
        load_safetensors(tmp_path / "model.safetensors", tensor="nope", tokenizer=["a"])
    save(tmp_path / "other.safetensors", {"encoder.layer.0.weight": table})
    with pytest.raises(FormatError) as info:
        load_safetensors(tmp_path / "other.safetensors", tokenizer=["a"])
    assert "model.embed_tokens.weight" in str(info.value.expected)
    assert "encoder.layer.0.weight" in str(info.value.found)
    with pytest.raises(FileNotFoundError, match="tokenizer"):
        load_safetensors(tmp_path / "model.safetensors")


def test_mapped_f32_view_and_written_file(tmp_path: Path) -> None:
    table = np.random.default_rng(1).standard_normal((5, 4)).astype(np.float32)
    save(tmp_path / "model.safetensors", {"wte.weight": table})
    emb = load_safetensors(tmp_path / "model.safetensors", tokenizer=list("abcde"), normalize=False)
    assert not emb.storage.matrix.flags.writeable  # a view of the mapped file
    np.testing.assert_array_equal(emb.storage.matrix, table)
    emb.write(tmp_path / "out.fifu")
    back = finalfusion.load_finalfusion(tmp_path / "out.fifu")
    np.testing.assert_array_equal(back["c"], table[2])


# -- golden file (no extras needed) -----------------------------------------------------------


def test_golden_file() -> None:
    expected = json.loads((DATA / "safetensors_expected.json").read_text(encoding="utf-8"))
    emb = load_safetensors(DATA / "safetensors_tiny.safetensors", tokenizer=DATA / "safetensors_tokenizer.json", normalize=False)
    assert emb.vocab.words == expected["tokens"]
    np.testing.assert_array_equal(emb.storage.matrix, np.array(expected["table"], dtype=np.float32))
    assert emb.metadata["safetensors"]["dtype"] == "BF16"
    assert emb.metadata["safetensors"]["padding_rows_dropped"] == expected["padding_rows"]
    pytest.importorskip("tokenizers")
    for word, vec in expected["unknown"].items():
        got = emb.embedding(word)  # the golden vector is the direction (the normalised sum); issue 25 gives the mean itself
        np.testing.assert_allclose(got / np.linalg.norm(got), np.array(vec, dtype=np.float32), rtol=0, atol=2e-6, err_msg=word)


# -- hostile headers -----------------------------------------------------------------------


def raw_file(header: Any, data: bytes = b"", length: int | None = None) -> bytes:
    head = header if isinstance(header, bytes) else json.dumps(header).encode()
    return struct.pack("<Q", len(head) if length is None else length) + head + data


GOOD = {"embeddings": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]}}


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"\x01\x02", "ends inside the header length"),
        (raw_file(GOOD, bytes(16), length=10_000), "runs past the end of the file"),
        (raw_file(GOOD, bytes(16), length=2**64 - 1), "above the format's limit"),
        (raw_file(b"[1, 2, 3]", bytes(16)), "not an object"),
        (raw_file(b'"just a string"'), "not an object"),
        (raw_file(b"{\xff}"), "not UTF-8"),
        (raw_file(b'{"a": '), "not valid JSON"),
        (
            raw_file(b'{"e": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}, "e": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}}', bytes(8)),
            "twice",
        ),
        (raw_file({"e": {"dtype": "F33", "shape": [1], "data_offsets": [0, 4]}}, bytes(4)), "unknown dtype"),
        (raw_file({"e": {"dtype": "F32", "shape": [2**40, 2**40], "data_offsets": [0, 4]}}, bytes(4)), "overflows 64 bits"),
        (raw_file({"e": {"dtype": "F32", "shape": [3, 2], "data_offsets": [0, 16]}}, bytes(16)), "disagree with the byte range"),
        (raw_file({"e": {"dtype": "F32", "shape": [-1, 2], "data_offsets": [0, 16]}}, bytes(16)), "non-negative integers"),
        (raw_file({"e": {"dtype": "F32", "shape": [True], "data_offsets": [0, 4]}}, bytes(4)), "non-negative integers"),
        (raw_file({"e": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}}, bytes(8)), "past the end of the file"),
        (raw_file({"e": {"dtype": "F32", "shape": [4], "data_offsets": [0, 2**70]}}, bytes(8)), "disagree|past the end"),
        (raw_file({"e": {"dtype": "F32", "shape": [2], "data_offsets": [8, 0]}}, bytes(8)), "end before they begin"),
        (
            raw_file({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}, "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}}, bytes(12)),
            "overlaps",
        ),
        (raw_file({"a": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}}, bytes(8)), "gap"),
        (raw_file({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}, bytes(8)), "bytes after the last tensor"),
        (raw_file({"a": {"dtype": "F32", "shape": [1]}}, bytes(4)), "lacks fields"),
        (raw_file({"a": [1, 2]}, bytes(4)), "must be an object"),
        (raw_file({"__metadata__": {"k": 1}, **GOOD}, bytes(16)), "__metadata__"),
        (raw_file({"embeddings": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}}, bytes(16)), "non-empty matrix"),
        (raw_file({"embeddings": {"dtype": "I32", "shape": [2, 2], "data_offsets": [0, 16]}}, bytes(16)), "cannot be read as float32"),
        (raw_file(GOOD, np.array([1, np.nan, 0, 1], dtype="<f4").tobytes()), "NaN or infinite"),
        (raw_file({"embeddings": {"dtype": "F64", "shape": [2, 1], "data_offsets": [0, 16]}}, np.array([1, 1e300], "<f8").tobytes()), "overflows float32"),
        (raw_file(b'{"a": ' * 100_000), "nests too deeply|not valid JSON"),
        (raw_file(b'{"a": {"dtype": "F32", "shape": [1' + b"0" * 5000 + b'], "data_offsets": [0, 4]}}', bytes(4)), "not valid JSON"),
        (raw_file(b'{"a": {"dtype": "F32", "shape": [NaN], "data_offsets": [0, 4]}}', bytes(4)), "not valid JSON"),
    ],
)
def test_hostile_headers(data: bytes, message: str) -> None:
    with pytest.raises(FormatError, match=message) as info:
        load_safetensors(data, tokenizer=["x", "y"])
    assert info.value.chunk is not None
    assert info.value.chunk.startswith("safetensors")
    assert info.value.expected is not None
    assert info.value.found is not None


def test_errors_carry_offsets() -> None:
    with pytest.raises(Truncated) as info:
        read_safetensors_header(raw_file({"e": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}}, bytes(8)))
    assert info.value.offset is not None
    assert info.value.offset > 8
    with pytest.raises(FormatError) as info2:
        read_safetensors_header(raw_file(b'{"a": 1, "b": {"dtype": "X", "shape": [], "data_offsets": [0, 0]}}'))
    assert info2.value.offset is not None
    assert info2.value.offset >= 8


def test_shard_outside_directory_refused(tmp_path: Path) -> None:
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {"embeddings": "../x.safetensors"}}), encoding="utf-8")
    with pytest.raises(FormatError, match="next to the index"):
        load_safetensors(tmp_path, tokenizer=["a"])
    (tmp_path / "model.safetensors.index.json").write_text("[]", encoding="utf-8")
    with pytest.raises(FormatError, match="weight_map"):
        load_safetensors(tmp_path, tokenizer=["a"])


def test_names_cover_common_architectures() -> None:
    for name in ("model.embed_tokens.weight", "transformer.wte.weight", "embeddings.word_embeddings.weight", "shared.weight", "gpt_neox.embed_in.weight"):
        assert name in EMBEDDING_TENSOR_NAMES
    assert EMBEDDING_TENSOR_NAMES[-2:] == ("embeddings", "embedding.weight")  # model2vec, then WordLlama: tried last


def test_finalfusion_load_recognises_safetensors_and_hdf5(tmp_path: Path) -> None:
    table = np.random.default_rng(2).standard_normal((3, 4)).astype(np.float32)
    save(tmp_path / "model.safetensors", {"model.embed_tokens.weight": table})
    wordlevel = {"model": {"type": "WordLevel", "vocab": {"a": 0, "b": 1, "c": 2}, "unk_token": "[UNK]"}}  # valid: every word is tokenized
    (tmp_path / "tokenizer.json").write_text(json.dumps(wordlevel), encoding="utf-8")
    assert finalfusion.compat.sniff_format((tmp_path / "model.safetensors").read_bytes()[:64]) == "safetensors"
    for source in (tmp_path, tmp_path / "model.safetensors"):
        emb = finalfusion.load(source, normalize=False)
        np.testing.assert_array_equal(emb.token_embedding("b"), table[1])  # the token row: no tokenizer needed (floor run)
    with pytest.raises(FormatError, match="no tokenizer beside it"):
        finalfusion.load((tmp_path / "model.safetensors").read_bytes())
    assert finalfusion.compat.sniff_format((DATA / "lightseq_bert.hdf5").read_bytes()[:64]) == "hdf5"
    with pytest.raises(FormatError, match="load_lightseq"):
        finalfusion.load(DATA / "lightseq_bert.hdf5")


def test_file_objects_and_bytes(tmp_path: Path) -> None:
    import io

    table = np.random.default_rng(8).standard_normal((4, 3)).astype(np.float16)
    save(tmp_path / "m.safetensors", {"embeddings": table})
    data = (tmp_path / "m.safetensors").read_bytes()
    with open(tmp_path / "m.safetensors", "rb") as f:
        from_file = load_safetensors(f, tokenizer=list("abcd"), normalize=False)
    for emb in (from_file, load_safetensors(io.BytesIO(data), tokenizer=list("abcd"), normalize=False), load_safetensors(data, tokenizer=list("abcd"))):
        np.testing.assert_allclose(emb.embedding_with_norm("d")[0] * emb.embedding_with_norm("d")[1], table[3].astype(np.float32), rtol=1e-6)
    with pytest.raises(ValueError, match="tokenizer"):
        load_safetensors(data)
