"""gensim's whole ``KeyedVectors`` read API, side by side with gensim on real vectors (issue 26).

Both libraries read the same committed files: rust-similarity.bin and
rust-analogy.bin (word2vec binary, written by finalfusion-rust from trained
vectors) and rust-fasttext.bin (a fastText model). finalfusion reads the
word2vec files twice: with the rows as stored (``normalize=False``) and, as
every finalfusion loader does by default, as unit rows plus a norms chunk;
gensim's spellings must give gensim's numbers, words and order in both cases.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from finalfusion import Embeddings, load_fasttext, load_word2vec

gensim_models = pytest.importorskip("gensim.models", reason="gensim (the interop extra) is not installed")

TESTDATA = Path(__file__).parent / "data" / "testdata"
ATOL = 2e-5  # the unit rows times the norms are gensim's vectors up to float32 rounding


@pytest.fixture(params=[False, True], ids=["raw-rows", "unit-rows+norms"])
def pair(request: pytest.FixtureRequest) -> tuple[Any, Embeddings]:
    path = TESTDATA / "rust-similarity.bin"
    kv = gensim_models.KeyedVectors.load_word2vec_format(str(path), binary=True)
    emb = load_word2vec(path, normalize=request.param)
    assert (emb.norms is not None) == request.param
    return kv, emb


@pytest.fixture(params=[False, True], ids=["raw-rows", "unit-rows+norms"])
def analogy_pair(request: pytest.FixtureRequest) -> tuple[Any, Embeddings]:
    path = TESTDATA / "rust-analogy.bin"
    return gensim_models.KeyedVectors.load_word2vec_format(str(path), binary=True), load_word2vec(path, normalize=request.param)


def same_ranking(got: list[tuple[str, float]], expected: list[tuple[str, float]]) -> None:
    assert [w for w, _ in got] == [w for w, _ in expected]
    np.testing.assert_allclose([s for _, s in got], [s for _, s in expected], atol=ATOL)
    assert got  # the comparison saw results


def test_vocabulary_attributes(pair: tuple[Any, Embeddings]) -> None:
    kv, emb = pair
    assert emb.index_to_key == kv.index_to_key
    assert dict(emb.key_to_index) == kv.key_to_index
    assert emb.vector_size == kv.vector_size == 100
    assert len(emb) == len(kv) == 41
    for key in ["Berlin", "Wien", 0, 40, 41, -1, "Paris"]:
        assert emb.has_index_for(key) == kv.has_index_for(key), key
        assert emb.get_index(key, -7) == kv.get_index(key, -7), key


def test_vectors_are_gensims_raw_vectors(pair: tuple[Any, Embeddings]) -> None:
    kv, emb = pair
    np.testing.assert_allclose(emb.vectors, kv.vectors, rtol=1e-6, atol=ATOL)
    assert emb.vectors.dtype == np.float32
    if emb.norms is not None:  # computed from the unit rows: a write could not reach the embeddings
        with pytest.raises(ValueError, match="read-only"):
            emb.vectors[0, 0] = 1.0
    np.testing.assert_allclose(emb.get_normed_vectors(), kv.get_normed_vectors(), atol=1e-6)
    for key in ["Berlin", "Berliner", 7]:
        np.testing.assert_allclose(emb.get_vector(key), kv.get_vector(key), rtol=1e-6, atol=ATOL)
        np.testing.assert_allclose(emb.get_vector(key, norm=True), kv.get_vector(key, norm=True), atol=1e-6)
    # The stored raw vector is not a unit vector: the spellings really differ.
    assert abs(float(np.linalg.norm(kv.get_vector("Berlin"))) - 1) > 0.5
    # finalfusion's own spellings keep finalfusion's rows: unit rows when the loader normalised.
    expected = kv.get_vector("Berlin", norm=emb.norms is not None)
    np.testing.assert_allclose(emb["Berlin"], expected, rtol=1e-6, atol=ATOL)
    np.testing.assert_allclose(emb.embedding("Berlin"), expected, rtol=1e-6, atol=ATOL)
    for bad in ("Paris", 41):
        with pytest.raises(KeyError):
            emb.get_vector(bad)
        with pytest.raises(KeyError):
            kv.get_vector(bad)


def test_get_mean_vector(pair: tuple[Any, Embeddings]) -> None:
    kv, emb = pair
    vec = kv.get_vector("Wien") * 0.5
    for keys, weights in [(["Berlin", "Potsdam", "Bonn"], None), (["Berlin", vec, 3], [1.0, -2.0, 0.5]), (["Berlin", "Paris"], None)]:
        for pre in (True, False):
            for post in (True, False):
                got = emb.get_mean_vector(keys, weights, pre_normalize=pre, post_normalize=post)
                expected = kv.get_mean_vector(keys, weights, pre_normalize=pre, post_normalize=post)
                np.testing.assert_allclose(got, expected, rtol=1e-5, atol=ATOL, err_msg=f"{keys} {pre} {post}")
    with pytest.raises(KeyError):
        emb.get_mean_vector(["Berlin", "Paris"], ignore_missing=False)
    with pytest.raises(KeyError):
        kv.get_mean_vector(["Berlin", "Paris"], ignore_missing=False)
    for args, match in (([[]], "no input"), ([["Berlin"], [1.0, 2.0]], "same number")):
        with pytest.raises(ValueError, match=match):
            emb.get_mean_vector(*args)
        with pytest.raises(ValueError, match=match):
            kv.get_mean_vector(*args)


def test_similarity_and_distance(pair: tuple[Any, Embeddings]) -> None:
    kv, emb = pair
    for w1, w2 in [("Berlin", "Potsdam"), ("Wien", "Warschau"), ("Bonn", "Bonn")]:
        assert emb.similarity(w1, w2) == pytest.approx(float(kv.similarity(w1, w2)), abs=1e-6)
        assert emb.distance(w1, w2) == pytest.approx(float(kv.distance(w1, w2)), abs=1e-6)


def test_n_similarity_averages_the_raw_vectors(pair: tuple[Any, Embeddings]) -> None:
    kv, emb = pair
    ws1, ws2 = ["Berlin", "Wien", "Bonn"], ["Potsdam", "Warschau"]
    expected = float(kv.n_similarity(ws1, ws2))
    assert emb.n_similarity(ws1, ws2) == pytest.approx(expected, abs=1e-6)
    # Averaging unit vectors instead (the old answer) differs, so the test tells the two apart.
    means = [kv.get_mean_vector(ws, pre_normalize=True, post_normalize=True) for ws in (ws1, ws2)]
    assert abs(float(np.dot(*means)) - expected) > 1e-4
    with pytest.raises(ZeroDivisionError):
        emb.n_similarity([], ["Berlin"])


def test_distances_and_cosine_similarities(pair: tuple[Any, Embeddings]) -> None:
    kv, emb = pair
    np.testing.assert_allclose(emb.distances("Berlin"), kv.distances("Berlin"), atol=1e-5)
    np.testing.assert_allclose(emb.distances(3), kv.distances(3), atol=1e-5)
    others = ["Wien", "Bonn", "Berlin"]
    np.testing.assert_allclose(emb.distances("Potsdam", others), kv.distances("Potsdam", others), atol=1e-6)
    vec = kv.get_vector("Jena") - kv.get_vector("Bonn")
    np.testing.assert_allclose(emb.distances(vec, others), kv.distances(vec, others), atol=1e-6)
    np.testing.assert_allclose(emb.distances(vec), kv.distances(vec), atol=1e-5)
    got = Embeddings.cosine_similarities(vec, kv.vectors[:10])
    expected = gensim_models.KeyedVectors.cosine_similarities(vec, kv.vectors[:10])
    np.testing.assert_allclose(got, expected, atol=1e-6)
    assert got.dtype == expected.dtype == np.float32


def test_closer_than_words_closer_than_and_rank(pair: tuple[Any, Embeddings]) -> None:
    kv, emb = pair
    for w1, w2 in [("Berlin", "Hamburg"), ("Berlin", "Wien"), ("Potsdam", "Berlin-Spandau")]:
        assert emb.closer_than(w1, w2) == kv.closer_than(w1, w2)
        assert emb.rank(w1, w2) == kv.rank(w1, w2)
        with pytest.warns(DeprecationWarning, match="closer_than"):  # gensim's alias is deprecated
            expected = kv.words_closer_than(w1, w2)
        assert emb.words_closer_than(w1, w2) == expected
    assert len(emb.closer_than("Berlin", "Wien")) > 3


def test_most_similar_arguments(pair: tuple[Any, Embeddings]) -> None:
    kv, emb = pair
    vec = kv.get_vector("Wien")
    calls: list[dict[str, Any]] = [
        {"positive": ["Berlin"], "topn": 7},
        {"positive": "Berlin", "topn": 5, "restrict_vocab": 20},
        {"positive": ["Berlin", "Wien"], "negative": ["Potsdam"], "topn": 6},
        {"positive": [("Berlin", 2.0), ("Bonn", 0.5)], "negative": [("Wien", -0.3)]},
        {"positive": [vec, "Dresden"], "negative": [kv.get_vector("Bonn")], "topn": 4},
        {"positive": vec, "topn": 3, "restrict_vocab": 10},
        {"positive": [3, "Berlin"], "negative": 5, "topn": 5},  # indices are keys
        {"positive": 7, "topn": 4},
    ]
    for kw in calls:
        same_ranking(emb.most_similar(**kw), kv.most_similar(**kw))
    for kw in ({"positive": ["Berlin"], "topn": None}, {"positive": ["Berlin", vec], "negative": "Bonn", "topn": None, "restrict_vocab": 15}):
        got, expected = emb.most_similar(**kw), kv.most_similar(**kw)
        assert got.shape == expected.shape
        np.testing.assert_allclose(got, expected, atol=1e-5)
    assert emb.most_similar("Berlin", topn=0) == kv.most_similar("Berlin", topn=0) == []
    with pytest.raises(TypeError):  # no clip_start: an error, never a silently different range
        emb.most_similar("Berlin", clip_start=5)  # type: ignore[call-arg]
    with pytest.raises(KeyError):
        emb.most_similar([41])
    with pytest.raises(KeyError):
        kv.most_similar([41])
    with pytest.raises(ValueError, match="vector of length 100"):  # a scalar would broadcast into every component
        emb.most_similar([2.5])


def test_similar_by_word_key_and_vector(pair: tuple[Any, Embeddings]) -> None:
    kv, emb = pair
    same_ranking(emb.similar_by_word("Berlin", topn=8), kv.similar_by_word("Berlin", topn=8))
    same_ranking(emb.similar_by_key("Wien", topn=5, restrict_vocab=25), kv.similar_by_key("Wien", topn=5, restrict_vocab=25))
    np.testing.assert_allclose(emb.similar_by_key("Wien", topn=None), kv.similar_by_key("Wien", topn=None), atol=1e-5)
    vec = kv.get_vector("Jena") + kv.get_vector("Bonn")
    same_ranking(emb.similar_by_vector(vec, topn=6), kv.similar_by_vector(vec, topn=6))
    same_ranking(emb.similar_by_vector(vec, topn=4, restrict_vocab=12), kv.similar_by_vector(vec, topn=4, restrict_vocab=12))


@pytest.mark.filterwarnings("ignore:Call to deprecated `init_sims`:DeprecationWarning")  # gensim's own call
def test_most_similar_cosmul(analogy_pair: tuple[Any, Embeddings]) -> None:
    kv, emb = analogy_pair
    vec = kv.get_vector("Polen") * 3
    for kw in (
        {"positive": ["Berlin", "Frankreich"], "negative": ["Paris"], "topn": 5},
        {"positive": "Berlin", "topn": 4},
        {"positive": ["Berlin", vec], "negative": ["Paris", "Sachsen"]},
    ):
        same_ranking(emb.most_similar_cosmul(**kw), kv.most_similar_cosmul(**kw))
    np.testing.assert_allclose(emb.most_similar_cosmul(["Berlin"], ["Paris"], topn=None), kv.most_similar_cosmul(["Berlin"], ["Paris"], topn=None), rtol=1e-5)
    # gensim 4 ignores restrict_vocab here; ours is its ranking limited to the first N words.
    unrestricted = kv.most_similar_cosmul(["Berlin", "Frankreich"], ["Paris"], topn=None)
    order = [i for i in np.argsort(-unrestricted, kind="stable") if i < 20 and kv.index_to_key[i] not in ("Berlin", "Frankreich", "Paris")][:5]
    got = emb.most_similar_cosmul(["Berlin", "Frankreich"], ["Paris"], topn=5, restrict_vocab=20)
    assert [w for w, _ in got] == [kv.index_to_key[i] for i in order]
    # An index is the word at that index (gensim would broadcast the int as a vector).
    same_ranking(emb.most_similar_cosmul([2, 1], [0], topn=5), emb.most_similar_cosmul(["Berlin", "Frankreich"], ["Paris"], topn=5))
    with pytest.raises(ValueError, match="vector of length 100"):
        emb.most_similar_cosmul([np.ones(3)])
    with pytest.raises(ValueError, match="no input"):
        emb.most_similar_cosmul(negative=["Paris"])
    with pytest.raises(ValueError, match="no input"):
        kv.most_similar_cosmul(negative=["Paris"])


def test_most_similar_to_given(pair: tuple[Any, Embeddings]) -> None:
    kv, emb = pair
    for key, keys in [("Berlin", ["Wien", "Potsdam", "Bonn"]), ("Wien", ["Berlin", "Warschau", "Köln"]), ("Bonn", ["Bonn", "Köln"])]:
        assert emb.most_similar_to_given(key, keys) == kv.most_similar_to_given(key, keys)


def test_rank_by_centrality_and_doesnt_match(pair: tuple[Any, Embeddings]) -> None:
    kv, emb = pair
    words = ["Berlin", "Potsdam", "Wien", "Warschau", "Bonn", "Berlin-Spandau"]
    for use_norm in (True, False):
        got = emb.rank_by_centrality(words, use_norm=use_norm)
        expected = kv.rank_by_centrality(words, use_norm=use_norm)
        assert [w for _, w in got] == [w for _, w in expected]
        np.testing.assert_allclose([d for d, _ in got], [d for d, _ in expected], atol=1e-6)
    assert emb.doesnt_match(words) == kv.doesnt_match(words)
    assert emb.doesnt_match(["Berlin", "Potsdam", "Warschau"]) == kv.doesnt_match(["Berlin", "Potsdam", "Warschau"])
    with pytest.raises(ValueError, match="empty list"):
        emb.rank_by_centrality([])
    with pytest.raises(ValueError, match="empty list"):
        kv.rank_by_centrality([])


def test_relative_cosine_similarity(pair: tuple[Any, Embeddings]) -> None:
    kv, emb = pair
    for wa, wb, topn in [("Berlin", "Potsdam", 10), ("Wien", "Berlin", 3), ("Bonn", "Köln", 1)]:
        assert emb.relative_cosine_similarity(wa, wb, topn) == pytest.approx(float(kv.relative_cosine_similarity(wa, wb, topn)), rel=1e-5)


@pytest.mark.parametrize("case_insensitive", [True, False])
@pytest.mark.parametrize("dummy4unknown", [False, True])
def test_evaluate_word_analogies(analogy_pair: tuple[Any, Embeddings], tmp_path: Path, case_insensitive: bool, dummy4unknown: bool) -> None:
    kv, emb = analogy_pair
    path = tmp_path / "questions.txt"
    lines = [
        ": capitals",
        "Paris Frankreich Berlin Deutschland",
        "Berlin Deutschland Paris Frankreich",
        "Berlin Brandenburg Hannover Niedersachsen",
        "paris frankreich berlin deutschland",
        ": neighbours",
        "Deutschland Polen Österreich Bayern",
        "Sachsen Thüringen Hessen Bayern",
        "Berlin Deutschland Rom Italien",
    ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    kw: dict[str, Any] = {"case_insensitive": case_insensitive, "dummy4unknown": dummy4unknown, "restrict_vocab": 40}
    got = emb.evaluate_word_analogies(str(path), **kw)
    expected = kv.evaluate_word_analogies(str(path), **kw)
    assert got[1] == expected[1]
    assert got[0] == pytest.approx(expected[0])
    assert expected[1][-1]["correct"]  # both outcomes occur
    assert expected[1][-1]["incorrect"]


@pytest.mark.parametrize("case_insensitive", [True, False])
@pytest.mark.parametrize("dummy4unknown", [False, True])
def test_evaluate_word_pairs(pair: tuple[Any, Embeddings], tmp_path: Path, case_insensitive: bool, dummy4unknown: bool) -> None:
    pytest.importorskip("scipy", reason="scipy (installed with gensim) is not installed")
    kv, emb = pair
    path = tmp_path / "pairs.tsv"
    rows = [
        "# word1\tword2\tscore",
        "Word 1\tWord 2\tHuman (mean)",  # a header line: skipped by both
        "Berlin\tPotsdam\t8.5",
        "Berlin\tWien\t6.1",
        "Bonn\tKöln\t7.9",
        "Dresden\tLeipzig\t7.0",
        "Warschau\tHeidelberg\t1.5",
        "berlin\tbonn\t5.5",
        "Berlin\tParis\t6.0",
        "Jena\tWeimar\t8.2",
    ]
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    kw: dict[str, Any] = {"case_insensitive": case_insensitive, "dummy4unknown": dummy4unknown, "restrict_vocab": 35}
    pearson, spearman, oov = emb.evaluate_word_pairs(str(path), **kw)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        e_pearson, e_spearman, e_oov = kv.evaluate_word_pairs(str(path), **kw)
    assert oov == pytest.approx(e_oov)
    np.testing.assert_allclose([pearson[0], pearson[1], spearman[0], spearman[1]], [e_pearson[0], e_pearson[1], e_spearman[0], e_spearman[1]], rtol=1e-5)
    assert oov > 0


@pytest.mark.parametrize("binary", [True, False])
def test_save_word2vec_format_writes_gensims_bytes(pair: tuple[Any, Embeddings], tmp_path: Path, binary: bool) -> None:
    kv, emb = pair
    ours, theirs = tmp_path / "ours", tmp_path / "theirs"
    # gensim writing the very vectors get_vector gives: the files must be byte-identical.
    same = gensim_models.KeyedVectors(emb.vector_size)
    same.add_vectors(emb.index_to_key, emb.vectors)
    for kw in ({}, {"prefix": "de_", "total_vec": 50}, {"write_header": False}):
        emb.save_word2vec_format(ours, binary=binary, **kw)
        same.save_word2vec_format(str(theirs), binary=binary, **kw)
        assert ours.read_bytes() == theirs.read_bytes(), kw
    emb.save_word2vec_format(ours, binary=binary)
    back = gensim_models.KeyedVectors.load_word2vec_format(str(ours), binary=binary)
    assert back.index_to_key == kv.index_to_key
    np.testing.assert_allclose(back.vectors, kv.vectors, rtol=1e-6, atol=ATOL)
    emb.save_word2vec_format(ours, binary=binary, append=True, write_header=False)
    same.save_word2vec_format(str(theirs), binary=binary)
    same.save_word2vec_format(str(theirs), binary=binary, append=True, write_header=False)
    assert ours.read_bytes() == theirs.read_bytes()
    with pytest.raises(ValueError, match="count"):
        emb.save_word2vec_format(ours, fvocab=tmp_path / "vocab.txt")


def test_fasttext_unknown_words_like_gensims_fasttext() -> None:
    path = TESTDATA / "rust-fasttext.bin"
    kv = gensim_models.fasttext.load_facebook_vectors(str(path))
    emb = load_fasttext(path)
    assert emb.index_to_key == kv.index_to_key
    # </s> keeps fastText's own row here (gensim composes it from n-grams fastText never gives it).
    assert emb.index_to_key[0] == "</s>"
    np.testing.assert_allclose(emb.vectors[1:], kv.vectors[1:], rtol=1e-5, atol=1e-6)
    for word in ["Berlin", "und", "Berlinerin", "Hauptstädte", "xyzq"]:
        known = word in kv.key_to_index
        assert emb.has_index_for(word) == kv.has_index_for(word) == known
        np.testing.assert_allclose(emb.get_vector(word), kv.get_vector(word), rtol=1e-5, atol=1e-6, err_msg=word)
        np.testing.assert_allclose(emb.get_vector(word, norm=True), kv.get_vector(word, norm=True), atol=1e-6, err_msg=word)
    assert emb.similarity("Berlinerin", "Berlin") == pytest.approx(float(kv.similarity("Berlinerin", "Berlin")), abs=1e-6)
    ws1, ws2 = ["Berlinerin", "und"], ["Hauptstädte", "die"]
    assert emb.n_similarity(ws1, ws2) == pytest.approx(float(kv.n_similarity(ws1, ws2)), abs=1e-6)
    same_ranking(emb.most_similar("Berlinerin", topn=5), kv.most_similar("Berlinerin", topn=5))
    np.testing.assert_allclose(emb.distances("Berlinerin", ["und", "die"]), kv.distances("Berlinerin", ["und", "die"]), atol=1e-6)
