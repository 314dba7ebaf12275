"""``encode`` of a text with a lone surrogate drops only the word that holds it (issue 33), on real model vocabularies.

A lone surrogate is not UTF-8, so no tokenizer library takes it; the text
used to get no tokens at all (an all-zero vector). Now the
whitespace-separated word that holds it goes, with the whitespace before
it, and the text's vector is the one of the same sentence without that word
-- on a model2vec directory written by model2vec (BERT-style WordPiece, the
space-splitting fast path, and a byte-level BPE), a SentencePiece model and
a GGUF file written by gguf-py's GGUFWriter.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import finalfusion
from _model_helpers import train_byte_level_bpe, train_sentencepiece, train_wordpiece
from finalfusion._tokenizers import encodable_text

#: (text with a lone surrogate, the same text without the word that holds it)
CASES = [
    ("hello \ud800 world", "hello world"),
    ("the quick\udfff fox", "the fox"),
    ("\ud800 the fox", "the fox"),
    ("the fox \udc80", "the fox"),
    ("the  \ud800x\ud801 \ud802  fox jumps", "the  fox jumps"),
    ("the\tqu\ud800ick\nfox", "the\nfox"),
]


def _table(n: int, dims: int = 6) -> np.ndarray[Any, np.dtype[np.float32]]:
    return np.random.default_rng(n).standard_normal((n, dims)).astype(np.float32)


def _model2vec_dir(tmp: Path, tokenizer_json: str, normalize: bool) -> Path:
    model2vec = pytest.importorskip("model2vec")
    tokenizers = pytest.importorskip("tokenizers")
    tok = tokenizers.Tokenizer.from_str(tokenizer_json)
    path = tmp / f"m2v-{normalize}"
    model2vec.StaticModel(_table(tok.get_vocab_size()), tok, normalize=normalize).save_pretrained(str(path))
    return path


def _sentencepiece(tmp: Path) -> finalfusion.Embeddings:
    spm = pytest.importorskip("sentencepiece")
    proto = train_sentencepiece("unigram", False)
    n = spm.SentencePieceProcessor(model_proto=proto).GetPieceSize()
    return finalfusion.compat.sentencepiece.load_sentencepiece(proto, _table(n))


def _gguf(tmp: Path) -> finalfusion.Embeddings:
    gguf = pytest.importorskip("gguf")
    spm = pytest.importorskip("sentencepiece")
    proto = train_sentencepiece("bpe", True)
    sp = spm.SentencePieceProcessor(model_proto=proto)
    tokens = [sp.IdToPiece(i) for i in range(sp.GetPieceSize())]
    types = [2 if sp.IsUnknown(i) else 3 if sp.IsControl(i) else 6 if sp.IsByte(i) else 1 for i in range(len(tokens))]
    path = tmp / "model.gguf"
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_tokenizer_model("llama")
    writer.add_token_list(tokens)
    writer.add_token_scores([sp.GetScore(i) for i in range(len(tokens))])
    writer.add_token_types(types)
    writer.add_unk_token_id(sp.unk_id())
    writer.add_tensor("token_embd.weight", _table(len(tokens)))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return finalfusion.load(path)


@pytest.fixture(params=["wordpiece-model2vec", "bpe-model2vec", "sentencepiece", "gguf"])
def model(request: pytest.FixtureRequest, tmp_path: Path) -> finalfusion.Embeddings:
    if request.param == "wordpiece-model2vec":
        return finalfusion.load(_model2vec_dir(tmp_path, train_wordpiece(), True))
    if request.param == "bpe-model2vec":
        return finalfusion.load(_model2vec_dir(tmp_path, train_byte_level_bpe(), False))
    return _sentencepiece(tmp_path) if request.param == "sentencepiece" else _gguf(tmp_path)


def test_the_cases_name_the_text_without_the_word() -> None:
    for text, expected in CASES:
        assert encodable_text(text) == expected
    assert encodable_text("\ud800") is None
    assert encodable_text("plain text") == "plain text"


def test_encode_drops_only_the_word_with_a_lone_surrogate(model: finalfusion.Embeddings) -> None:
    texts = [t for t, _ in CASES]
    clean = [c for _, c in CASES]
    expected = model.encode(clean)
    assert np.abs(expected).sum(axis=1).min() > 0  # each clean sentence has a vector
    np.testing.assert_array_equal(model.encode(texts), expected)  # the batch (the pieces table where the tokenizer allows it)
    for text, row in zip(texts, expected, strict=True):
        np.testing.assert_array_equal(model.encode(text), row)  # one text: the plain path
    np.testing.assert_array_equal(model.encode(["\ud800", "a\ud800b \udfff"]), np.zeros((2, expected.shape[1]), dtype=np.float32))


def test_the_model2vec_directory_agrees_with_model2vec(tmp_path: Path) -> None:
    """The clean sentence's vector is model2vec's own ``StaticModel.encode`` of it (the reference for model vocabularies)."""
    model2vec = pytest.importorskip("model2vec")
    path = _model2vec_dir(tmp_path, train_wordpiece(), True)
    emb = finalfusion.load(path)
    reference = model2vec.StaticModel.from_pretrained(str(path)).encode([c for _, c in CASES])
    np.testing.assert_allclose(emb.encode([t for t, _ in CASES]), reference, rtol=1e-5, atol=1e-6)


def test_a_word_lookup_with_a_lone_surrogate_still_has_no_vector(model: finalfusion.Embeddings) -> None:
    assert model.embedding("qu\ud800ick") is None
    _, found = model.embedding_batch(["the", "qu\ud800ick", "fox"])
    assert found.tolist() == [True, False, True]


def test_a_checkpoint_written_for_model2vec_encodes_in_model2vec_as_here(tmp_path: Path) -> None:
    """A Hugging Face checkpoint (safetensors beside a tokenizer.json) keeps in a sentence every token but the unknown one, as
    model2vec does: special-token text such as ``[CLS]`` keeps its row, so the model2vec directory ``write_model2vec``
    makes of it gives model2vec's ``encode`` equal to ours (issue 35: they differed on such lines)."""
    model2vec = pytest.importorskip("model2vec")
    safetensors_numpy = pytest.importorskip("safetensors.numpy")
    tokenizers = pytest.importorskip("tokenizers")
    tokenizer_json = train_wordpiece()
    n = tokenizers.Tokenizer.from_str(tokenizer_json).get_vocab_size()
    checkpoint = tmp_path / "checkpoint"
    checkpoint.mkdir()
    (checkpoint / "tokenizer.json").write_text(tokenizer_json, encoding="utf-8")
    safetensors_numpy.save_file({"model.embed_tokens.weight": _table(n)}, str(checkpoint / "model.safetensors"))
    emb = finalfusion.load(checkpoint)
    texts = ["[CLS] the quick fox [SEP]", "a [UNK] and [PAD]", "the fox", "qxzv ☃ fox", "[MASK]"]
    finalfusion.write_model2vec(tmp_path / "m2v", emb)
    theirs = model2vec.StaticModel.from_pretrained(str(tmp_path / "m2v")).encode(texts)
    np.testing.assert_allclose(emb.encode(texts), theirs, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(finalfusion.load(tmp_path / "m2v").encode(texts), theirs, rtol=1e-5, atol=1e-6)
    with pytest.raises(KeyError):  # a word drops a control token (the word rule); a sentence keeps it
        emb["[CLS]"]
    assert emb.encode(["[CLS]"])[0].any()
