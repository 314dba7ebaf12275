"""WordLlama files load with the default arguments and give WordLlama's own ``embed`` results (issue 25).

The files are laid out as WordLlama's package and cache are (``weights/<config>_<dims>.safetensors``
with the tensor ``embedding.weight``, ``tokenizers/<config>_tokenizer_config.json``), written
here with ``safetensors`` and a tokenizer trained with ``tokenizers``, and read by
``wordllama.WordLlama.load`` itself (a custom ``ModelURI``, downloads disabled).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import finalfusion

wordllama = pytest.importorskip("wordllama")
tokenizers = pytest.importorskip("tokenizers")
safetensors_numpy = pytest.importorskip("safetensors.numpy")

CORPUS = ["the quick brown fox jumps over the lazy dog", "a house is not a home", "happiness is a warm puppy in the house"] * 30
# with special-token text and characters outside the training alphabet (the unknown token): WordLlama's embed keeps every
# token's row, and so does encode for WordLlama weights (issue 35; a word keeps the word rule, docs/models.md)
TEXTS = ["the happy house", "a quick puppy jumps", "houses", "warm", "the lazy dog is not a fox", "dogs and puppies", ""]
TEXTS += ["the <s> house </s>", "<unk> a dog", "zebra über 中文 house", "  spaced   out  "]
DIMS = 16


def _layout(root: Path) -> Path:
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    tok = Tokenizer(models.Unigram())
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    tok.train_from_iterator(CORPUS, trainers.UnigramTrainer(vocab_size=90, special_tokens=["<unk>", "<s>", "</s>"], unk_token="<unk>"))
    (root / "tokenizers").mkdir(parents=True)
    tok.save(str(root / "tokenizers" / "custom_tokenizer_config.json"))
    rng = np.random.default_rng(8)
    n = tok.get_vocab_size()
    table = (rng.normal(size=(n, DIMS)) * rng.uniform(0.1, 4, size=(n, 1))).astype(np.float32)
    (root / "weights").mkdir()
    safetensors_numpy.save_file({"embedding.weight": table}, str(root / "weights" / f"custom_{DIMS}.safetensors"))
    return root / "weights" / f"custom_{DIMS}.safetensors"


def _wordllama(root: Path) -> Any:
    from wordllama import WordLlama
    from wordllama.config.models import ModelURI

    uri = ModelURI(repo_id="local/none", available_dims=[DIMS], binary_dims=[], tokenizer_config="custom_tokenizer_config.json")
    return WordLlama.load(config=uri, cache_dir=root, dim=DIMS, disable_download=True)


@pytest.mark.parametrize("normalize", [True, False])
def test_default_arguments_give_wordllama_embed(tmp_path: Path, normalize: bool) -> None:
    weights = _layout(tmp_path)
    wl = _wordllama(tmp_path)
    emb = finalfusion.load(weights, normalize=normalize)  # tensor and tokenizer found without arguments
    assert emb.metadata is not None
    assert emb.metadata["safetensors"]["tensor"] == "embedding.weight"
    assert "custom_tokenizer_config.json" in emb.metadata["safetensors"]["tokenizer"]
    theirs = np.asarray(wl.embed(TEXTS), dtype=np.float32)
    np.testing.assert_allclose(emb.encode(TEXTS), theirs, rtol=2e-5, atol=2e-6)
    texts = [t for t in TEXTS if t]  # WordLlama's norm=True divides the empty text's zeros by zero (NaN); ours stay zero
    np.testing.assert_allclose(emb.encode(texts, normalize=True), wl.embed(texts, norm=True), rtol=2e-5, atol=2e-6)
    assert not emb.encode([""], normalize=True).any()
    for word in ["house", "happiness", "a", "puppy", "dogs"]:
        vec, norm = emb.embedding_with_norm(word)
        expected = np.asarray(wl.embed([word]), dtype=np.float32)[0]
        np.testing.assert_allclose(vec * norm, expected, rtol=2e-5, atol=2e-6)


def test_tokenizer_beside_the_weights(tmp_path: Path) -> None:
    weights = _layout(tmp_path)
    (tmp_path / "tokenizers" / "custom_tokenizer_config.json").rename(tmp_path / "weights" / "custom_tokenizer_config.json")
    emb = finalfusion.load(weights)
    assert "custom_tokenizer_config.json" in emb.metadata["safetensors"]["tokenizer"]  # type: ignore[index]
    (tmp_path / "weights" / "custom_tokenizer_config.json").unlink()
    with pytest.raises(FileNotFoundError, match=r"custom_tokenizer_config\.json"):
        finalfusion.load(weights)
