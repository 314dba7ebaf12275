"""finalfusion.scale without a cluster: the worker-side helpers against plain serial calls.

Runs without the scale extra (the pandas test is skipped without pandas).
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

import finalfusion
from finalfusion.scale import EmbedBatches, embed_documents, embed_partition, file_changed, neighbours_partition

SAMPLE = Path(__file__).resolve().parents[1] / "examples" / "sample.fifu"
DOCS = [["berlin", "berliner", "the"], [], ["café", "zzzz", "東京"], ["paris"]]


@pytest.fixture(scope="module")
def emb() -> finalfusion.Embeddings:
    return finalfusion.load_finalfusion(SAMPLE, mmap=True)


def test_documents_match_batch_lookups(emb: finalfusion.Embeddings) -> None:
    got = embed_documents(emb, [tuple(d) for d in DOCS])  # any sequences
    assert [m.shape for m in got] == [(3, 16), (0, 16), (3, 16), (1, 16)]
    for doc, m in zip(DOCS, got, strict=True):
        np.testing.assert_array_equal(m, emb.embedding_batch(doc)[0])
        for word, row in zip(doc, m, strict=True):
            np.testing.assert_allclose(row, emb.embedding(word), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("pooling", ["mean", "sum"])
def test_pooling(emb: finalfusion.Embeddings, pooling: str) -> None:
    got = embed_documents(emb, DOCS, pooling=pooling)
    for doc, v in zip(DOCS, got, strict=True):
        rows = emb.embedding_batch(doc)[0]
        want = np.zeros(emb.dims, dtype=np.float32) if not doc else rows.mean(axis=0) if pooling == "mean" else rows.sum(axis=0)
        np.testing.assert_allclose(v, want, rtol=1e-5, atol=1e-6)


def test_mean_skips_words_without_embedding() -> None:
    emb = finalfusion.Embeddings(finalfusion.NdArray(np.eye(2, dtype=np.float32)), finalfusion.SimpleVocab(["a", "b"]))
    got = embed_documents(emb, [["a", "zz", "zz"], ["zz"], ["b"]], pooling="mean")
    assert [v.tolist() for v in got] == [[1.0, 0.0], [0.0, 0.0], [0.0, 1.0]]


def test_bad_arguments(emb: finalfusion.Embeddings) -> None:
    with pytest.raises(ValueError, match="pooling"):
        embed_documents(emb, DOCS, pooling="max")
    with pytest.raises(ValueError, match="pooling"):
        EmbedBatches(emb, pooling="max")
    with pytest.raises(TypeError, match="sequence of tokens"):
        embed_partition(["berlin is a city"], emb)


def test_pandas_series_partition(emb: finalfusion.Embeddings) -> None:
    pd = pytest.importorskip("pandas", reason="pandas is not installed (it comes with the scale extra)")
    series = pd.Series(DOCS, index=[10, 11, 12, 13], name="tokens")
    out = embed_partition(series, emb, pooling="sum")
    assert isinstance(out, pd.Series)
    assert list(out.index) == [10, 11, 12, 13]
    assert out.name == "tokens"
    for v, w in zip(out, embed_documents(emb, DOCS, pooling="sum"), strict=True):
        np.testing.assert_array_equal(v, w)
    words = pd.Series(["berlin", "paris"], index=[5, 6])
    nb = neighbours_partition(words, emb, k=2)
    assert list(nb.index) == [5, 6]
    assert list(nb) == neighbours_partition(["berlin", "paris"], emb, k=2)


def test_neighbours_partition_matches_word_similarity(emb: finalfusion.Embeddings) -> None:
    got = neighbours_partition(["berlin", "berliner"], emb, k=3)
    for word, best in got:
        want = emb.word_similarity(word, k=3)
        assert [n for n, _ in best] == [r.word for r in want], word
        np.testing.assert_allclose([s for _, s in best], [r.similarity for r in want], rtol=1e-5, atol=1e-6)


def test_embed_batches_keeps_columns(emb: finalfusion.Embeddings) -> None:
    tokens = np.empty(len(DOCS), dtype=object)
    tokens[:] = [np.array(d, dtype=object) for d in DOCS]  # Ray's numpy batches hold arrays of tokens
    out = EmbedBatches(emb, output="vec")({"id": np.arange(4), "tokens": tokens})
    assert sorted(out) == ["id", "tokens", "vec"]
    for m, w in zip(out["vec"], embed_documents(emb, DOCS), strict=True):
        np.testing.assert_array_equal(m, w)


def test_file_changed_follows_ray_style_attributes() -> None:
    inner = finalfusion.FileChangedError("changed")

    class SystemError_(Exception):  # like ray.exceptions.RaySystemError
        def __init__(self, client_exc: BaseException) -> None:
            self.client_exc = client_exc

    class TaskError(Exception):  # like ray.exceptions.RayTaskError
        def __init__(self, cause: BaseException) -> None:
            self.cause = cause

    assert file_changed(TaskError(SystemError_(inner))) is inner
    looped = RuntimeError("x")
    looped.__context__ = looped
    assert file_changed(looped) is None


def _bad_queries() -> list[tuple[str, object, str]]:
    """(case, partition, the row its message names): missing values, numbers, bytes, in lists, arrays and Series."""
    cases: list[tuple[str, object, str]] = [
        ("None", ["berlin", None], "words[1]"),
        ("NaN", ["berlin", "paris", float("nan")], "words[2]"),
        ("int", [123, "berlin"], "words[0]"),
        ("bytes", ["berlin", b"paris"], "words[1]"),
        ("object array", np.array(["berlin", None], dtype=object), "words[1]"),
    ]
    pd = pytest.importorskip("pandas", reason="pandas is not installed (it comes with the scale extra)")
    cases += [
        ("Series with NaN", pd.Series(["berlin", np.nan, "paris"], index=[10, 11, 12]), "row 11 (position 1)"),
        ("Series with None", pd.Series(["berlin", "paris", None], index=["a", "b", "c"], dtype=object), "row 'c' (position 2)"),
        ("string Series with NA", pd.Series(["berlin", pd.NA], index=[7, 8], dtype="string"), "row 8 (position 1)"),
        ("Series of numbers", pd.Series([1.5, 2.5], index=[3, 4]), "row 3 (position 0)"),
    ]
    return cases


def test_neighbours_partition_refuses_what_is_not_a_word(emb: finalfusion.Embeddings) -> None:
    """Every query must be a str, as for word_similarity_batch (which refuses the same items); the message names the row."""
    for case, words, row in _bad_queries():
        with pytest.raises(TypeError, match=re.escape(row)):
            neighbours_partition(words, emb, k=2)
        with pytest.raises(TypeError, match="must be a str"):
            emb.word_similarity_batch(list(words), 2)  # type: ignore[call-overload]
        assert case
    with pytest.raises(TypeError, match="single str"):
        neighbours_partition("berlin", emb)
    # str subclasses are words, answered as plain str
    got = neighbours_partition(np.array(["berlin", "paris"]), emb, k=2)
    assert got == neighbours_partition(["berlin", "paris"], emb, k=2)
    assert all(type(w) is str for w, _ in got)


def test_shared_embeddings_fail_in_the_helper_not_in_unpickling(tmp_path: Path) -> None:
    """scale.shared: unpickling never raises; every helper raises FileChangedError (or the OSError) on first use."""
    import pickle
    import shutil

    from finalfusion.scale import shared

    path = tmp_path / "sample.fifu"
    shutil.copy(SAMPLE, path)
    old = finalfusion.load_finalfusion(path, mmap=True)
    data = pickle.dumps(shared(old))
    assert len(data) < 1000  # still a reference to the file
    early = pickle.loads(data)  # resolved now: keeps the old file's mapping
    finalfusion.Embeddings(finalfusion.NdArray(np.asarray(old.storage) * 2), old.vocab).write(path)
    late = pickle.loads(data)  # does not raise
    helpers = [
        lambda e: embed_partition([["berlin"]], e),
        lambda e: embed_documents(e, [["berlin"]]),
        lambda e: neighbours_partition(["berlin"], e, k=2),
        lambda e: EmbedBatches(e),
    ]
    for helper in helpers:
        with pytest.raises(finalfusion.FileChangedError, match="changed since the embeddings were pickled"):
            helper(late)
        with pytest.raises(finalfusion.FileChangedError):
            helper(pickle.loads(pickle.dumps(late)))  # passed on unresolved, it fails the same way
    np.testing.assert_array_equal(embed_partition([["berlin"]], early)[0], old.embedding_batch(["berlin"])[0])
    path.unlink()
    with pytest.raises(FileNotFoundError):
        embed_partition([["berlin"]], pickle.loads(data))
    eager = finalfusion.load_finalfusion(SAMPLE)
    by_value = pickle.loads(pickle.dumps(shared(eager)))
    assert neighbours_partition(["berlin"], by_value, k=2) == neighbours_partition(["berlin"], eager, k=2)
    with pytest.raises(TypeError, match="takes Embeddings"):
        shared(shared(eager))  # type: ignore[arg-type]
