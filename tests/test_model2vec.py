"""model2vec directories written by model2vec itself: words and sentences equal ``StaticModel.encode`` (issue 25).

Three kinds of directory, each written with ``StaticModel(...).save_pretrained``:
plain (``normalize: true``), unnormalized (``normalize: false``) and
vocabulary-quantized (``mapping`` and ``weights`` tensors), over tokenizers
trained here with ``tokenizers`` (WordPiece, and Unigram with a Metaspace
dummy prefix). Each is loaded with both ``normalize`` settings.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import finalfusion
from finalfusion import load_finalfusion
from finalfusion.compat.safetensors import load_safetensors

tokenizers = pytest.importorskip("tokenizers")
model2vec = pytest.importorskip("model2vec")

CORPUS = [
    "the quick brown fox jumps over the lazy dog",
    "a house is not a home, said the happy householder",
    "happiness is a warm puppy and housing is expensive",
    "e-mail the U.S.A. office at 10:30 about 42 houses",
] * 30
SENTENCES = [
    "the happiness of a house",
    "Quick Foxes jump!",
    "",
    "   ",
    "zzz qqq",
    "houses, housing and householders",
    "a " * 700,  # longer than max_length tokens: truncated as model2vec truncates
    "é ü 日本",
    "house",
    "[CLS] the house [SEP] <unk> [PAD]",  # special tokens written in the text: model2vec keeps them, drops only the unknown token
]
WORDS = ["house", "houses", "happiness", "the", "a", "Quick", "householder", "xyzzy", "10:30", "U.S.A."]


def _wordpiece() -> Any:
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, trainers

    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.train_from_iterator(CORPUS, trainers.WordPieceTrainer(vocab_size=150, special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]"]))
    return tok


def _unigram() -> Any:
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    tok = Tokenizer(models.Unigram())
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    tok.train_from_iterator(CORPUS, trainers.UnigramTrainer(vocab_size=120, special_tokens=["<unk>"], unk_token="<unk>"))
    return tok


def _vectors(n: int, dims: int = 12, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    # rows of very different lengths: summing unit rows would give other directions than model2vec's mean
    return (rng.normal(size=(n, dims)) * rng.uniform(0.05, 5.0, size=(n, 1))).astype(np.float32)


def _write(kind: str, family: str, path: Path) -> Path:
    from model2vec import StaticModel

    tok = _wordpiece() if family == "wordpiece" else _unigram()
    n = tok.get_vocab_size()
    if kind == "quantized":
        clusters = 9
        table = _vectors(clusters, seed=1)
        mapping = np.random.default_rng(2).integers(0, clusters, size=n).astype(np.int64)
        weights = np.random.default_rng(3).uniform(0.2, 3.0, size=n).astype(np.float32)
        model = StaticModel(table, tok, normalize=True, weights=weights, token_mapping=mapping)
    else:
        model = StaticModel(_vectors(n), tok, normalize=kind == "plain")
    model.save_pretrained(path)
    return path


@pytest.fixture(scope="module", params=[(k, f) for k in ("plain", "unnormalized", "quantized") for f in ("wordpiece", "unigram")], ids=str)
def m2v_dir(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    kind, family = request.param
    return _write(kind, family, tmp_path_factory.mktemp(f"m2v-{kind}-{family}"))


def _ref(path: Path) -> Any:
    return model2vec.StaticModel.from_pretrained(path)


def _unit(x: np.ndarray) -> np.ndarray:
    n = np.linalg.norm(x, axis=-1, keepdims=True)
    return np.where(n > 0, x / np.where(n > 0, n, 1), 0)


@pytest.mark.parametrize("normalize", [True, False])
def test_sentences_equal_static_model_encode(m2v_dir: Path, normalize: bool) -> None:
    ref = _ref(m2v_dir)
    emb = finalfusion.load(m2v_dir, normalize=normalize)
    for override in (None, True, False):
        ours = emb.encode(SENTENCES, normalize=override)
        theirs = ref.encode(SENTENCES, normalize=override)
        assert ours.shape == theirs.shape
        assert ours.dtype == np.float32
        np.testing.assert_allclose(ours, theirs, rtol=2e-5, atol=2e-6)
    assert np.abs(emb.encode(SENTENCES[0]) - ref.encode(SENTENCES[0])).max() < 1e-5  # a single str: one vector


@pytest.mark.parametrize("normalize", [True, False])
def test_words_equal_static_model_encode(m2v_dir: Path, normalize: bool) -> None:
    ref = _ref(m2v_dir)
    emb = finalfusion.load(m2v_dir, normalize=normalize)
    theirs = ref.encode(WORDS, normalize=False)  # the model's mean for each word
    batch, found = emb.embedding_batch(WORDS)
    for i, word in enumerate(WORDS):
        vec, norm = emb.embedding_with_norm(word)
        if normalize:  # unit vector, its norm kept: the same vector
            np.testing.assert_allclose(vec, _unit(theirs[i]), rtol=2e-5, atol=2e-6)
            np.testing.assert_allclose(vec * norm, theirs[i], rtol=2e-5, atol=2e-6)
        else:  # the model's mean itself
            np.testing.assert_allclose(vec, theirs[i], rtol=2e-5, atol=2e-6)
        np.testing.assert_array_equal(emb[word], vec)
        np.testing.assert_allclose(batch[i], vec, rtol=1e-6, atol=1e-7)
    assert found.all()


def test_metadata_keeps_the_config(m2v_dir: Path) -> None:
    emb = finalfusion.load(m2v_dir)
    ref = _ref(m2v_dir)
    assert emb.metadata is not None
    assert emb.metadata["model2vec"] == {"normalize": ref.normalize, "max_length": ref.max_length}
    quantized = "quantized" in m2v_dir.name
    assert ("vocabulary_quantized" in emb.metadata["safetensors"]) == quantized
    assert len(emb.vocab) == len(ref.tokens)


@pytest.mark.parametrize("normalize", [True, False])
def test_fifu_round_trip_keeps_encode(m2v_dir: Path, tmp_path: Path, normalize: bool) -> None:
    emb = finalfusion.load(m2v_dir, normalize=normalize)
    emb.write(tmp_path / "m.fifu")
    back = load_finalfusion(tmp_path / "m.fifu")
    np.testing.assert_array_equal(back.encode(SENTENCES), emb.encode(SENTENCES))
    np.testing.assert_array_equal(back.embedding_batch(WORDS)[0], emb.embedding_batch(WORDS)[0])


def test_token_strings_stay_reachable(tmp_path: Path) -> None:
    path = _write("unnormalized", "unigram", tmp_path / "m")
    ref = _ref(path)
    emb = load_safetensors(path, normalize=False)
    vocab = ref.tokenizer.get_vocab()
    piece = next(t for t in vocab if t.startswith("\u2581") and len(t) > 3 and t[1:] in vocab)
    word = piece[1:]
    # the word is read as in running text (the dummy prefix): not the mid-word piece of the same spelling
    np.testing.assert_allclose(emb[word], ref.encode([word])[0], rtol=1e-6)
    assert emb.vocab.token_id(word) == vocab[word]
    assert emb.vocab.token_id(piece) == vocab[piece]
    np.testing.assert_array_equal(emb.token_embedding(word), ref.embedding[vocab[word]])
    np.testing.assert_array_equal(emb.token_embedding(piece), ref.embedding[vocab[piece]])
    assert not np.allclose(emb[word], emb.token_embedding(word))
    with pytest.raises(KeyError):
        emb.token_embedding("no such token")


def test_quantized_rows_are_expanded(tmp_path: Path) -> None:
    path = _write("quantized", "wordpiece", tmp_path / "q")
    ref = _ref(path)
    emb = load_safetensors(path, normalize=False)
    ids = np.arange(len(ref.tokens))
    expected = ref.embedding[ref.token_mapping[ids]] * ref.weights[ids][:, None]
    np.testing.assert_array_equal(emb.storage.matrix, expected.astype(np.float32))


def test_broken_mapping_is_a_format_error(tmp_path: Path) -> None:
    from safetensors.numpy import load_file, save_file

    path = _write("quantized", "wordpiece", tmp_path / "q")
    tensors = load_file(path / "model.safetensors")
    tensors["mapping"] = tensors["mapping"].copy()
    tensors["mapping"][5] = 10_000
    save_file(tensors, path / "model.safetensors")
    with pytest.raises(finalfusion.FormatError, match="token 5 maps to no row"):
        finalfusion.load(path)
    tensors["mapping"] = tensors["mapping"][:3]
    save_file(tensors, path / "model.safetensors")
    with pytest.raises(finalfusion.FormatError, match="fewer rows than the vocabulary has tokens"):
        finalfusion.load(path)


def test_bad_config_is_a_format_error(tmp_path: Path) -> None:
    path = _write("plain", "wordpiece", tmp_path / "p")
    (path / "config.json").write_text('{"normalize": "yes"}')
    with pytest.raises(finalfusion.FormatError, match="normalize is not a boolean"):
        finalfusion.load(path)
    (path / "config.json").write_text("[1, 2]")
    with pytest.raises(finalfusion.FormatError, match="not a JSON object"):
        finalfusion.load(path)


def test_no_truncation_when_config_says_null(tmp_path: Path) -> None:
    from model2vec import StaticModel

    tok = _wordpiece()
    StaticModel(_vectors(tok.get_vocab_size()), tok, normalize=False, max_length=None).save_pretrained(tmp_path / "m")
    ref = StaticModel.from_pretrained(tmp_path / "m")
    emb = finalfusion.load(tmp_path / "m")
    assert emb.metadata is not None
    assert emb.metadata["model2vec"]["max_length"] == 0
    long = ["the house " * 400]
    np.testing.assert_allclose(emb.encode(long), ref.encode(long), rtol=2e-5, atol=2e-6)
    # past finalfusion._encode.LONG_TOKENS tokens: added in float64 blocks, the exact mean within float32 rounding
    longer = "the happy householder " * 3000
    ids = [i for i in ref.tokenizer.encode(longer, add_special_tokens=False).ids if i != ref.unk_token_id]
    assert len(ids) > 4096
    exact = ref.embedding[ids].astype(np.float64).mean(axis=0)
    np.testing.assert_allclose(emb.encode(longer), exact, rtol=1e-6, atol=1e-7)


def test_encode_progress_and_batches(m2v_dir: Path) -> None:
    emb = finalfusion.load(m2v_dir)
    seen: list[tuple[str, int, int]] = []
    many = SENTENCES * 7
    out = emb.encode(many, batch_size=4, progress=lambda stage, done, total: seen.append((stage, done, total)))
    np.testing.assert_array_equal(out, emb.encode(many))
    assert seen[-1] == ("sentences", len(many), len(many))
    assert [d for _, d, _ in seen] == sorted({d for _, d, _ in seen})  # increasing, one report per group of batches
    previous = finalfusion.get_threads()
    try:
        for threads in (1, 2, 3):  # batches on threads: the same result for every thread count
            finalfusion.set_threads(threads)
            np.testing.assert_array_equal(emb.encode(many, batch_size=3), out)
    finally:
        finalfusion.set_threads(previous)
    with pytest.raises(ValueError, match="batch_size"):
        emb.encode(many, batch_size=0)
    with pytest.raises(TypeError):
        emb.encode([b"bytes"])  # type: ignore[list-item]


# -- write_model2vec ---------------------------------------------------------------------


@pytest.mark.parametrize("normalize", [True, False])
def test_written_model_loads_in_model2vec_with_same_encode(m2v_dir: Path, tmp_path: Path, normalize: bool) -> None:
    emb = finalfusion.load(m2v_dir, normalize=normalize)
    finalfusion.write_model2vec(tmp_path / "out", emb)
    ref = model2vec.StaticModel.from_pretrained(tmp_path / "out")
    assert ref.normalize == _ref(m2v_dir).normalize
    for override in (None, True, False):
        np.testing.assert_allclose(ref.encode(SENTENCES, normalize=override), emb.encode(SENTENCES, normalize=override), rtol=2e-5, atol=2e-6)
    back = finalfusion.load(tmp_path / "out", normalize=normalize)
    np.testing.assert_allclose(back.encode(SENTENCES), emb.encode(SENTENCES), rtol=2e-5, atol=2e-6)
    # written again over the existing directory: files replaced, same result
    finalfusion.write_model2vec(tmp_path / "out", emb, normalize=not ref.normalize)
    assert model2vec.StaticModel.from_pretrained(tmp_path / "out").normalize == (not ref.normalize)
    written = sorted(p.name for p in (tmp_path / "out").iterdir())
    assert written == ["config.json", "finalfusion-manifest.json", "model.safetensors", "modules.json", "tokenizer.json"]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no staging directory left


def test_word_vocabulary_written_for_model2vec(tmp_path: Path) -> None:
    from finalfusion import Embeddings
    from finalfusion.storage import NdArray
    from finalfusion.vocab import SimpleVocab

    rng = np.random.default_rng(5)
    words = ["haus", "baum", "[UNK]", "weg", "null", "Zug"]
    matrix = (rng.normal(size=(len(words), 6)) * rng.uniform(0.1, 4, size=(len(words), 1))).astype(np.float32)
    matrix[4] = 0  # a zero vector: fastText's rule skips it, so the written model drops it too
    emb = Embeddings(NdArray(matrix), SimpleVocab(words))
    finalfusion.write_model2vec(tmp_path / "w", emb)
    ref = model2vec.StaticModel.from_pretrained(tmp_path / "w")
    assert "[UNK]_" in ref.tokens
    assert ref.normalize is False
    assert ref.max_length is None
    texts = ["haus baum", "weg   Zug haus", "null haus", "unknown words only", "[UNK] weg", "", "haus " * 1000]
    np.testing.assert_allclose(ref.encode(texts), emb.encode(texts), rtol=2e-5, atol=2e-6)
    np.testing.assert_allclose(ref.encode(texts, normalize=True), emb.encode(texts, normalize=True), rtol=2e-5, atol=2e-6)


def test_sentencepiece_vocabulary_is_refused(tmp_path: Path) -> None:
    spm = pytest.importorskip("sentencepiece")
    import io

    from finalfusion.compat.sentencepiece import load_sentencepiece

    buf = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(["hello world"] * 50), model_writer=buf, vocab_size=12, minloglevel=2)
    emb = load_sentencepiece(buf.getvalue(), np.ones((12, 3), dtype=np.float32))
    with pytest.raises(ValueError, match=r"model2vec reads a tokenizer\.json"):
        finalfusion.write_model2vec(tmp_path / "sp", emb)
    assert not (tmp_path / "sp").exists()


def test_added_tokens_one_string_after_normalisation_are_refused(tmp_path: Path) -> None:
    """Normalised added tokens that the normaliser makes one string: tokenizers gives a text one of their ids per instance.

    A fuzzed model2vec directory had ``<s>``, ``[MASK]`` and ``[PAD]`` become ``▁▁`` under a ``Replace`` normaliser: one
    load encoded a text with ``<s>``'s row, the next (and the ``write_model2vec`` copy) with ``[MASK]``'s, so a round trip
    "changed" the vectors. Such a file has no stable answer and is refused, at load of the tokenizer, naming the tokens.
    """
    from model2vec import StaticModel
    from tokenizers import AddedToken

    tok = _wordpiece()
    tok.add_tokens([AddedToken("<Mask>", normalized=True), AddedToken("<MASK>", normalized=True), AddedToken("<own>", normalized=True)])
    assert tok.normalizer.normalize_str("<Mask>") == tok.normalizer.normalize_str("<MASK>")  # the BertNormalizer lowercases
    path = tmp_path / "m"
    StaticModel(_vectors(tok.get_vocab_size()), tok, normalize=True).save_pretrained(path)
    emb = finalfusion.load(path)
    with pytest.raises(finalfusion.FormatError, match=r"'<Mask>' \(id \d+\) and '<MASK>' \(id \d+\) both normalise to '<mask>'"):
        emb.encode(["the <mask> house"])

    # tokens with strings of their own after normalisation keep their answer: model2vec's
    tok = _wordpiece()
    tok.add_tokens([AddedToken("<Mask>", normalized=True), AddedToken("<own>", normalized=True)])
    StaticModel(_vectors(tok.get_vocab_size()), tok, normalize=True).save_pretrained(tmp_path / "ok")
    texts = ["the <MASK> house", "<own> house", "house"]
    np.testing.assert_allclose(finalfusion.load(tmp_path / "ok").encode(texts), _ref(tmp_path / "ok").encode(texts), rtol=1e-5, atol=1e-6)
