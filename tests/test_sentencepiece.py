"""load_sentencepiece: a SentencePiece model plus piece vectors (array or keyed file, BPEmb-style)."""

from __future__ import annotations

import io
import json
import random
from pathlib import Path

import numpy as np
import pytest

from _model_helpers import random_words, sentencepiece_skip, subword_rule, train_sentencepiece
from finalfusion import Embeddings, FormatError, load_sentencepiece
from finalfusion.compat import write_word2vec
from finalfusion.compat.sentencepiece import SentencePieceModel
from finalfusion.errors import MissingExtraError
from finalfusion.storage import NdArray
from finalfusion.vocab import SimpleVocab, TokenizerVocab

DATA = Path(__file__).resolve().parent / "data" / "models"
MODEL = DATA / "sentencepiece_bpemb.model"
VECTORS = DATA / "sentencepiece_bpemb.vec"
EXPECTED = json.loads((DATA / "sentencepiece_expected.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize("model", [MODEL, str(MODEL), MODEL.read_bytes(), io.BytesIO(MODEL.read_bytes())], ids=["path", "str", "bytes", "file"])
def test_golden_keyed_file(model: object) -> None:
    emb = load_sentencepiece(model, VECTORS, normalize=False)
    assert isinstance(emb.vocab, TokenizerVocab)
    assert emb.vocab.words == EXPECTED["pieces"]
    np.testing.assert_array_equal(emb.storage.matrix, np.array(EXPECTED["rows"], dtype=np.float32))
    assert emb.metadata["sentencepiece"] == {"pieces": len(EXPECTED["pieces"]), "vectors": "keyed"}
    checked = 0
    for word, case in EXPECTED["unknown"].items():
        try:
            got = emb.embedding(word)
        except MissingExtraError:  # without sentencepiece: known pieces only
            continue
        # the golden vector is the direction (the normalised sum); issue 25's word rule gives the mean itself (normalize=False)
        np.testing.assert_allclose(got / np.linalg.norm(got), np.array(case["vector"], dtype=np.float32), atol=2e-6)
        assert emb.vocab.tokenizer.encode(word) == case["ids"]
        checked += 1
    pytest.importorskip("sentencepiece")
    assert checked == len(EXPECTED["unknown"])


def test_golden_array_and_normalisation() -> None:
    rows = np.array(EXPECTED["rows"], dtype=np.float32)
    emb = load_sentencepiece(MODEL, rows)
    np.testing.assert_allclose(emb.storage.matrix * emb.norms.norms[:, None], rows, atol=1e-6)
    assert emb.metadata["sentencepiece"]["vectors"] == "array"
    assert rows.tolist() == EXPECTED["rows"]  # the caller's array is not modified


def _keyed(pieces: list[str], rows: np.ndarray, keep: list[int]) -> Embeddings:
    return Embeddings(NdArray(rows[keep].copy()), SimpleVocab([pieces[i] for i in keep]))


def test_keyed_mismatches_are_clear_errors() -> None:
    pieces = EXPECTED["pieces"]
    rows = np.array(EXPECTED["rows"], dtype=np.float32)
    n = len(pieces)
    # Control and unknown pieces (<unk>, <s>, </s>: ids 0-2) may be absent: zero rows.
    emb = load_sentencepiece(MODEL, _keyed(pieces, rows, list(range(3, n))), normalize=False)
    assert not emb.storage.matrix[:3].any()
    np.testing.assert_array_equal(emb.storage.matrix[3:], rows[3:])
    with pytest.raises(FormatError, match=r"2 pieces of the model have no vector") as info:
        load_sentencepiece(MODEL, _keyed(pieces, rows, list(range(n - 2))))
    assert repr(pieces[-1]) in str(info.value)
    extra = Embeddings(NdArray(np.ones((n + 1, 3), dtype=np.float32)), SimpleVocab([*pieces, "notapiece"]))
    with pytest.raises(FormatError, match=r"1 vectors are keyed by strings that are not pieces.*'notapiece'"):
        load_sentencepiece(MODEL, extra)
    with pytest.raises(FormatError, match=r"one row per piece id"):
        load_sentencepiece(MODEL, rows[:-1])
    with pytest.raises(FormatError, match=r"one row per piece id"):
        load_sentencepiece(MODEL, rows[0])


@pytest.mark.parametrize("data", [b"", b"\x0a\xff", b"\x0a\x05\x0a\x03\xff\xfe\xfd", b"\x0f"])
def test_malformed_models_are_format_errors(data: bytes) -> None:
    with pytest.raises(FormatError):
        load_sentencepiece(data, np.zeros((1, 2), dtype=np.float32))


def test_proto_matches_protobuf_descriptor() -> None:
    pb = pytest.importorskip("sentencepiece.sentencepiece_model_pb2")
    model = SentencePieceModel(["<unk>", "a", "<0x41>"], [0.0, -1.5, 0.0], [2, 1, 6], {"unk": 0, "bos": -1, "eos": 1, "pad": -1})
    parsed = pb.ModelProto()
    parsed.ParseFromString(model.to_proto())
    assert [(p.piece, p.score, p.type) for p in parsed.pieces] == [("<unk>", 0.0, 2), ("a", -1.5, 1), ("<0x41>", 0.0, 6)]
    assert (parsed.trainer_spec.unk_id, parsed.trainer_spec.bos_id, parsed.trainer_spec.eos_id, parsed.trainer_spec.pad_id) == (0, -1, 1, -1)
    assert parsed.trainer_spec.model_type == 2
    assert parsed.normalizer_spec.add_dummy_prefix
    assert not parsed.normalizer_spec.remove_extra_whitespaces
    assert SentencePieceModel.parse(model.to_proto()) == model
    # And a model the trainer wrote parses to what the protobuf library sees.
    proto = MODEL.read_bytes()
    real = pb.ModelProto()
    real.ParseFromString(proto)
    ours = SentencePieceModel.parse(proto)
    assert ours.pieces == [p.piece for p in real.pieces]
    assert ours.types == [p.type for p in real.pieces]
    assert ours.special == {"unk": real.trainer_spec.unk_id, "bos": real.trainer_spec.bos_id, "eos": real.trainer_spec.eos_id, "pad": real.trainer_spec.pad_id}


@pytest.mark.parametrize(("model_type", "byte_fallback"), [("unigram", False), ("unigram", True), ("bpe", False), ("bpe", True)])
def test_trained_models_with_word2vec_vectors(tmp_path: Path, model_type: str, byte_fallback: bool) -> None:
    spm = pytest.importorskip("sentencepiece")
    proto = train_sentencepiece(model_type, byte_fallback)
    sp = spm.SentencePieceProcessor(model_proto=proto)
    n = sp.GetPieceSize()
    rows = np.random.default_rng(1).standard_normal((n, 12)).astype(np.float32)
    order = list(range(n))
    random.Random(3).shuffle(order)
    keyed = Embeddings(NdArray(rows[order].copy()), SimpleVocab([sp.IdToPiece(i) for i in order]))
    path = tmp_path / "bpemb.w2v.bin"
    write_word2vec(path, keyed)
    emb = load_sentencepiece(proto, path, normalize=False)
    np.testing.assert_array_equal(emb.storage.matrix, rows)
    words = random_words(300, seed=5)
    batch, found = emb.embedding_batch(words)
    checked = 0
    for word, row, ok in zip(words, batch, found, strict=True):
        if word in emb.vocab:
            continue
        expected = subword_rule(rows, sp.encode(word), sentencepiece_skip(sp))
        if expected is None:
            assert not ok
            continue
        np.testing.assert_allclose(row, expected, atol=2e-6, err_msg=word)
        checked += 1
    assert checked > 200
