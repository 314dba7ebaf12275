"""One word rule (issue 35): ``idx``, lookups, batches, ``encode``, queries and the command line map a text to the same rows.

Real files: llama.cpp's own test vocabularies (``FINALFUSION_LLAMACPP_VOCABS``,
see tests/llamacpp_vocabs.py) with llama.cpp's expected ids for every test
string, and model2vec directories written by ``StaticModel.save_pretrained``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

import finalfusion
from finalfusion import Embeddings
from finalfusion.errors import FormatError
from finalfusion.storage import NdArray
from llamacpp_vocabs import DROPPED_TYPES, ENV, loadable, read_cases, vocab_files

DIRECTORY = os.environ.get(ENV)
FILES = vocab_files(DIRECTORY) if DIRECTORY else []
SKIP_REASON = f"{ENV} is not set (run: python tests/llamacpp_vocabs.py fetch DIR; export {ENV}=DIR)"


def _model(path: Path, tmp: Path, seed: int = 0) -> Embeddings:
    """``path`` loaded with ``load_gguf``, its one-column table replaced by distinct random rows (8 dims)."""
    from finalfusion.compat.gguf import load_gguf

    vocab = load_gguf(loadable(path, tmp / path.name), normalize=False).vocab
    rows = np.random.default_rng(seed).normal(size=(len(vocab), 8)).astype(np.float32)
    return Embeddings(NdArray(rows), vocab)


def _expected(path: Path) -> list[tuple[str, list[int]]]:
    from finalfusion.compat.gguf._reader import read_gguf

    types = read_gguf(path.read_bytes()).kv.get("tokenizer.ggml.token_type")
    return [(text, [i for i in ids if types is None or int(types[i]) not in DROPPED_TYPES]) for text, ids in read_cases(path)]


@pytest.mark.parametrize("path", FILES or [None], ids=[p.name[len("ggml-vocab-") : -len(".gguf")] for p in FILES] or ["unset"])
def test_every_llama_cpp_string_maps_to_llama_cpp_ids_everywhere(path: Path | None, tmp_path: Path) -> None:
    # idx, embedding, embedding_with_norm, embedding_batch and encode all give llama.cpp's tokens of every test string.
    if path is None:
        pytest.skip(SKIP_REASON)
    for package in ("gguf", "sentencepiece", "tokenizers"):
        pytest.importorskip(package)
    emb = _model(path, tmp_path)
    m = emb.storage.matrix
    cases = _expected(path)
    texts = [t for t, _ in cases]
    batch, found = emb.embedding_batch(texts)
    sentences = emb.encode(texts)
    wrong = []
    for i, (text, ids) in enumerate(cases):
        want_idx = None if not ids else ids[0] if len(ids) == 1 else ids
        want = m[ids].mean(axis=0) if ids else None
        got = emb.embedding(text)
        if emb.vocab.idx(text) != want_idx or (got is None) != (want is None) or bool(found[i]) != bool(ids):
            wrong.append((text, ids, emb.vocab.idx(text)))
            continue
        if want is not None:
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
            np.testing.assert_array_equal(batch[i], got)
            np.testing.assert_allclose(sentences[i], want, rtol=1e-5, atol=1e-6)
        else:
            assert not batch[i].any()
            assert not sentences[i].any()
    assert not wrong, f"{path.name}: {len(wrong)} of {len(cases)} strings differ (text, llama.cpp, idx): {wrong[:5]}"


def _spm(tmp: Path) -> Embeddings:
    path = next((p for p in FILES if p.name == "ggml-vocab-llama-spm.gguf"), None)
    if path is None:
        pytest.skip(SKIP_REASON)
    for package in ("gguf", "sentencepiece"):
        pytest.importorskip(package)
    return _model(path, tmp)


def test_a_word_is_its_running_text_token_not_the_token_string(tmp_path: Path) -> None:
    emb = _spm(tmp_path)
    vocab = emb.vocab
    hello, bare = vocab.token_id("\u2581Hello"), vocab.token_id("Hello")  # type: ignore[attr-defined]
    assert (hello, bare) == (15043, 10994)
    assert vocab.idx("Hello") == hello
    assert vocab.own_row("Hello") == hello
    np.testing.assert_array_equal(emb["Hello"], emb.storage.matrix[hello])
    np.testing.assert_array_equal(emb.token_embedding("Hello"), emb.storage.matrix[bare])  # the exact token string
    np.testing.assert_array_equal(emb.get_vector("Hello"), emb.storage.matrix[hello])  # gensim's spelling follows it too


def test_neighbour_queries_leave_out_the_querys_own_token(tmp_path: Path) -> None:
    emb = _spm(tmp_path)
    own = "\u2581Hello"
    assert own not in [r.word for r in emb.word_similarity("Hello", k=20, index=False)]
    assert own not in [w for w, _ in emb.most_similar("Hello", topn=20, indexer=False)]
    assert own not in [w for w, _ in emb.most_similar_cosmul(positive=["Hello"], topn=20)]
    assert emb.most_similar_cosmul(positive=["Hello"], topn=1)[0][0] != own
    ids, _ = emb.word_similarity_batch(["Hello", "world"], k=20, index=False)
    assert emb.vocab.token_id(own) not in ids[0].tolist()  # type: ignore[attr-defined]
    assert emb.vocab.token_id("\u2581world") not in ids[1].tolist()  # type: ignore[attr-defined]
    # Allowed explicitly: it is the best match, at similarity 1 and never above.
    first = emb.word_similarity("Hello", k=1, skip=(), index=False)[0]
    assert first.word == own
    assert first.similarity == pytest.approx(1.0, abs=1e-6)
    assert first.similarity <= 1.0


def test_similarities_are_never_above_one() -> None:
    rng = np.random.default_rng(7)
    m = rng.normal(size=(300, 7)).astype(np.float32)
    m /= np.linalg.norm(m, axis=1, keepdims=True)
    words = [f"w{i}" for i in range(len(m))]
    self_cos = np.einsum("ij,ij->i", m, m)
    assert (self_cos > 1).any()  # the float32 rows' own cosines do exceed 1: the clip below is what keeps them in range
    emb = Embeddings(NdArray(m), finalfusion.SimpleVocab(words))
    tops = [emb.word_similarity(w, k=1, skip=(), index=False)[0].similarity for w in words]
    assert max(tops) <= 1.0
    _, scores = emb.embedding_similarity_batch(m, k=1, index=False)
    assert float(scores.max()) <= 1.0
    assert float(np.max(emb.most_similar(positive=[m[0]], topn=None))) <= 1.0


def test_the_command_line_looks_words_up_by_the_word_rule(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from finalfusion.cli import main

    path = next((p for p in FILES if p.name == "ggml-vocab-llama-spm.gguf"), None)
    if path is None:
        pytest.skip(SKIP_REASON)
    pytest.importorskip("gguf")
    pytest.importorskip("sentencepiece")
    gguf = loadable(path, tmp_path / path.name)
    assert main(["lookup", str(gguf), "Hello", "Hello world"]) == 0
    out = capsys.readouterr().out
    assert "'Hello' (the token '\u2581Hello'" in out
    assert "'Hello world' (from 2 tokens" in out


def test_load_of_a_directory_without_a_model_says_what_it_looked_for(tmp_path: Path) -> None:
    with pytest.raises(FormatError, match=r"no format stored as a directory.*safetensors.*an empty directory"):
        finalfusion.load(tmp_path)
    (tmp_path / "notes.txt").write_text("x")
    with pytest.raises(FormatError, match=r"1 entry: notes.txt"):
        finalfusion.load(str(tmp_path))


# -- model2vec directories written by model2vec -------------------------------------------------------------------


def _m2v(kind: str, dtype: str, path: Path) -> Path:
    """A model2vec directory written by ``save_pretrained``, its table quantized to ``dtype`` by model2vec."""
    model2vec = pytest.importorskip("model2vec")
    from model2vec.model import quantize_model

    from test_model2vec import _unigram, _vectors

    tok = _unigram()
    n = tok.get_vocab_size()
    if kind == "vocabulary-quantized":  # quantize_vocabulary needs scikit-learn: the table, mapping and weights given
        table = _vectors(9, seed=1)
        mapping = np.random.default_rng(2).integers(0, 9, size=n).astype(np.int64)
        weights = np.random.default_rng(3).uniform(0.2, 3.0, size=n).astype(np.float32)
        model = model2vec.StaticModel(table, tok, normalize=True, weights=weights, token_mapping=mapping)
    else:
        model = model2vec.StaticModel(_vectors(n), tok, normalize=True)
    quantize_model(model, quantize_to=dtype).save_pretrained(path)
    return path


@pytest.mark.parametrize("kind", ["plain", "vocabulary-quantized"])
@pytest.mark.parametrize("dtype", ["int8", "float16", "float32", "float64"])
def test_every_dtype_model2vec_writes_is_read(tmp_path: Path, dtype: str, kind: str) -> None:
    from test_model2vec import SENTENCES, WORDS

    pytest.importorskip("tokenizers")
    path = _m2v(kind, dtype, tmp_path / "m")
    assert json.loads((path / "config.json").read_text())["embedding_dtype"] == dtype
    ref = pytest.importorskip("model2vec").StaticModel.from_pretrained(path)
    assert ref.embedding.dtype == np.dtype(dtype)
    # model2vec averages float16 tables in float16: our float32 means agree to float16's precision.
    tol = {"rtol": 2e-3, "atol": 2e-3} if dtype == "float16" else {"rtol": 2e-5, "atol": 2e-6}
    for normalize in (True, False):
        emb = finalfusion.load(path, normalize=normalize)
        np.testing.assert_allclose(emb.encode(SENTENCES), ref.encode(SENTENCES).astype(np.float32), **tol)
        words = np.stack([emb.embedding_with_norm(w)[0] * emb.embedding_with_norm(w)[1] for w in WORDS])
        np.testing.assert_allclose(words, ref.encode(WORDS, normalize=False).astype(np.float32), **tol)


def test_the_command_line_encodes_each_line_exactly_as_read(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from finalfusion.cli import main

    path = _m2v("plain", "float32", tmp_path / "m")
    lines = ["  the house  ", "the house", "\tquick fox ", " a"]
    text = tmp_path / "lines.txt"
    text.write_bytes(("\n".join(lines[:2]) + "\r\n" + "\n".join(lines[2:]) + "\n\n").encode())
    assert main(["encode", "--json", "--quiet", str(path), str(text)]) == 0
    got = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [g["line"] for g in got] == [1, 2, 3, 4]  # the empty last line is left out
    vectors = np.array([g["vector"] for g in got], dtype=np.float32)
    emb = finalfusion.load(path)
    np.testing.assert_allclose(vectors, emb.encode(lines), rtol=1e-6, atol=1e-7)
    ref = pytest.importorskip("model2vec").StaticModel.from_pretrained(path)
    np.testing.assert_allclose(vectors, ref.encode(lines), rtol=2e-5, atol=2e-6)
    assert not np.allclose(vectors[0], vectors[1])  # the spaces change a Metaspace tokenizer's tokens: not trimmed away


def test_compute_accuracy_judges_answers_by_the_word_rule(tmp_path: Path) -> None:
    from finalfusion.cli._query import utils_accuracy

    emb = _spm(tmp_path)
    best = emb.analogy("king", "queen", "man", k=20, index=False)
    assert best is not None
    # The first answer that is a word-start token whose bare word is looked up as exactly that token.
    answer = next(r.word[1:] for r in best if r.word.startswith("\u2581") and emb.vocab.idx(r.word[1:]) == emb.vocab.token_id(r.word))  # type: ignore[attr-defined]
    assert emb.analogy("king", "queen", "man", k=1, index=False)[0].word == "\u2581" + answer  # type: ignore[index]
    questions = tmp_path / "q.txt"
    questions.write_text(f": s\nking queen man {answer}\n")
    section = utils_accuracy(emb, str(questions)).sections["s"]
    assert (section.correct, section.instances, section.skipped) == (1, 1, 0)
