"""Non-finite values (issue 13): norms, rows that overflow or underflow, and non-finite queries.

The invariant: whatever loads either round-trips through every writer and
its reader, or fails cleanly -- a ``FormatError`` at load, or a
``NonFiniteError`` (a ``ValueError``) at write before a byte is written.
Tiny (subnormal) and huge rows rank where their cosines say, on dense and
quantized storage, mapped and eager; a query with NaN or infinity raises
``NonFiniteError`` naming its word or row.
"""

from __future__ import annotations

import contextlib
import io
import os
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest

from finalfusion import (
    Embeddings,
    FastTextVocab,
    FinalfusionError,
    FloretVocab,
    FormatError,
    NdArray,
    NonFiniteError,
    Norms,
    QuantizedArray,
    SimpleVocab,
    load_fasttext,
    load_finalfusion,
    load_floret,
    load_norms,
    load_text,
    load_text_dims,
    load_word2vec,
    write_fasttext,
    write_floret,
    write_text,
    write_text_dims,
    write_word2vec,
)
from finalfusion.cli import main as cli_main
from finalfusion.norms import normalize_rows
from finalfusion.storage.quantized import PQ
from finalfusion.subword import FastTextIndexer, FloretIndexer

F32_MAX = float(np.finfo(np.float32).max)
SUBNORMAL = float(np.float32(1e-42))

#: Rows that a file may hold, by name: the value of the row of the word "x" (the other words are ordinary).
SHAPES: dict[str, list[float]] = {
    "nan": [np.nan, 1.0, 0.0],
    "+inf": [np.inf, 1.0, 0.0],
    "-inf": [-np.inf, 0.0, 1.0],
    "huge": [3e38, 3e38, 1.0],  # finite float32 values whose l2 norm is beyond float32
    "large": [1e38, -1e38, 0.0],  # norm 1.4e38: fits, but squares overflow float32
    "subnormal": [SUBNORMAL, SUBNORMAL, 0.0],  # squares underflow float32
    "zero": [0.0, 0.0, 0.0],
    "ordinary": [0.5, -2.0, 0.25],
}
WORDS = ["a", "x", "b"]


def matrix_with(row: list[float]) -> np.ndarray:
    return np.array([[1.0, 0.0, 0.0], row, [0.0, 1.0, 0.0]], dtype=np.float32)


def text_file(row: list[float], dims_line: bool = False) -> bytes:
    lines = [f"{w} " + " ".join(repr(float(v)) if np.isfinite(v) else str(v) for v in r) for w, r in zip(WORDS, matrix_with(row).tolist(), strict=True)]
    return (("3 3\n" if dims_line else "") + "\n".join(lines) + "\n").encode()


def word2vec_file(row: list[float]) -> bytes:
    m = matrix_with(row)
    return b"3 3\n" + b"".join(w.encode() + b" " + m[i].astype("<f4").tobytes() + b"\n" for i, w in enumerate(WORDS))


def finalfusion_file(row: list[float], normalized: bool) -> bytes:
    """A finalfusion file with the row as stored (no norms), or with a norms chunk holding the row's norm (as float32)."""
    m = matrix_with(row)
    buf = io.BytesIO()
    if not normalized:
        Embeddings(NdArray(m), SimpleVocab(WORDS)).write(buf)
        return buf.getvalue()
    # write valid norms, then patch in the raw float32 norm of the row (NaN/inf for the hostile shapes)
    Embeddings(NdArray(m), SimpleVocab(WORDS), norms=Norms([1.0, 7.0, 1.0])).write(buf)
    data = bytearray(buf.getvalue())
    at = data.rfind(struct.pack("<f", 7.0))
    with np.errstate(over="ignore", invalid="ignore"):
        norm = np.float32(np.sqrt(np.dot(m[1].astype(np.float64), m[1].astype(np.float64))))
    data[at : at + 4] = struct.pack("<f", float(norm))
    return bytes(data)


#: Readers with their options: name -> (file maker, loader).
READERS: dict[str, tuple[Callable[[list[float]], bytes], Callable[[bytes], Embeddings]]] = {
    "finalfusion": (lambda r: finalfusion_file(r, False), lambda b: load_finalfusion(b)),
    "finalfusion+norms": (lambda r: finalfusion_file(r, True), lambda b: load_finalfusion(b)),
    "text": (text_file, lambda b: load_text(b)),
    "text raw": (text_file, lambda b: load_text(b, normalize=False)),
    "text-dims": (lambda r: text_file(r, True), lambda b: load_text_dims(b)),
    "word2vec": (word2vec_file, lambda b: load_word2vec(b)),
    "word2vec raw": (word2vec_file, lambda b: load_word2vec(b, normalize=False)),
}

#: Writers and the reader that reads their output back as written (no normalisation).
WRITERS: dict[str, tuple[Callable[[Any, Embeddings], None], Callable[[bytes], Embeddings]]] = {
    "finalfusion": (lambda f, e: e.write(f), lambda b: load_finalfusion(b)),
    "word2vec": (write_word2vec, lambda b: load_word2vec(b, normalize=False)),
    "text": (write_text, lambda b: load_text(b, normalize=False)),
    "text-dims": (write_text_dims, lambda b: load_text_dims(b, normalize=False)),
    "fasttext": (write_fasttext, lambda b: load_fasttext(b, normalize=False)),
}


def written_rows(emb: Embeddings, writer: str) -> np.ndarray:
    """The word vectors a writer writes: the stored rows (finalfusion), else the rows times their norms."""
    m = np.array(emb.storage.matrix[: len(emb.vocab)], dtype=np.float32)
    if writer != "finalfusion" and emb.norms is not None:
        m = m * emb.norms.norms[:, None]
    return m


class TestRoundTripOrCleanFailure:
    """Every shape, every reader, every writer: a load error, a write error before any byte, or a faithful round trip."""

    @pytest.mark.parametrize("reader", sorted(READERS))
    @pytest.mark.parametrize("shape", sorted(SHAPES))
    def test_every_writer(self, shape: str, reader: str) -> None:
        make, load = READERS[reader]
        try:
            emb = load(make(SHAPES[shape]))
        except FormatError:
            assert shape in ("nan", "+inf", "-inf", "huge"), f"{reader} refused the {shape} row"
            return
        if emb.norms is not None:
            assert np.isfinite(emb.norms.norms).all()
            assert (emb.norms.norms >= 0).all()
        for name, (write, read_back) in WRITERS.items():
            buf = io.BytesIO()
            refused = None
            try:
                write(buf, emb)
            except NonFiniteError as err:
                refused = str(err)
            if refused is not None:
                assert name != "finalfusion", refused
                assert "'x' (row 1)" in refused
                assert buf.getvalue() == b"", f"{name} wrote {len(buf.getvalue())} bytes before refusing"
                continue
            back = read_back(buf.getvalue())
            assert back.vocab.words == WORDS
            got = np.asarray(back.storage.matrix[:3])
            np.testing.assert_array_equal(got, written_rows(emb, name), err_msg=f"{name} after {reader}")

    @pytest.mark.parametrize("shape", ["nan", "+inf", "-inf", "overflow"])
    def test_path_target_left_untouched(self, shape: str, tmp_path: Path) -> None:
        if shape == "overflow":  # finite row and norm whose product overflows float32
            emb = Embeddings(NdArray(matrix_with([2.0, 0.0, 0.0])), SimpleVocab(WORDS), norms=Norms([1.0, F32_MAX, 1.0]))
        else:
            emb = Embeddings(NdArray(matrix_with(SHAPES[shape])), SimpleVocab(WORDS))
        for name, (write, _) in WRITERS.items():
            if name == "finalfusion":
                continue
            target = tmp_path / f"out.{name}"
            target.write_bytes(b"old")
            with pytest.raises(NonFiniteError, match="'x'"):
                write(target, emb)
            assert target.read_bytes() == b"old"
            assert sorted(os.listdir(tmp_path)) == sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("out."))

    @pytest.mark.parametrize("shape", ["large", "subnormal", "ordinary"])
    def test_normalised_reload_gives_the_vectors_back(self, shape: str) -> None:
        emb = load_text(text_file(SHAPES[shape]))
        buf = io.BytesIO()
        write_word2vec(buf, emb)
        back = load_word2vec(buf.getvalue())
        np.testing.assert_allclose(back["x"] * back.norms[1], np.float32(SHAPES[shape]), rtol=1e-6)
        assert abs(float(np.linalg.norm(back["x"].astype(np.float64))) - 1.0) < 1e-6

    @pytest.mark.parametrize("reader", sorted(READERS))
    @pytest.mark.parametrize("shape", sorted(SHAPES))
    def test_written_files_read_back_with_the_defaults(self, shape: str, reader: str) -> None:
        # What a writer accepts, its reader must read with normalize=True (the fuzzer's invariant): a finite row
        # whose l2 norm is beyond float32 (loaded with normalize=False) is refused by the writers whose readers normalise.
        make, load = READERS[reader]
        try:
            emb = load(make(SHAPES[shape]))
        except FormatError:
            return
        for name, read_default in (("word2vec", load_word2vec), ("text", load_text), ("text-dims", load_text_dims), ("fasttext", load_fasttext)):
            buf = io.BytesIO()
            if shape == "huge" and reader in ("finalfusion", "text raw", "word2vec raw"):  # stored as is, no norms to multiply back
                with pytest.raises(NonFiniteError, match="beyond float32's range"):
                    WRITERS[name][0](buf, emb)
            else:
                with contextlib.suppress(NonFiniteError):
                    WRITERS[name][0](buf, emb)
            if buf.getvalue():
                read_default(buf.getvalue())

    def test_unnormalize_overflow_is_refused(self) -> None:
        # finite rows, finite norms, but row * norm overflows float32
        emb = Embeddings(NdArray(np.array([[2.0, 0.0], [0.5, 0.5]], dtype=np.float32)), SimpleVocab(["p", "q"]), norms=Norms([F32_MAX, 2.0]))
        for name in ("word2vec", "text", "text-dims", "fasttext"):
            buf = io.BytesIO()
            with pytest.raises(NonFiniteError, match=r"'p' \(row 0\)" + (".*norm 3\\.40" if name != "fasttext" else "")):
                WRITERS[name][0](buf, emb)
            assert buf.getvalue() == b""
        buf = io.BytesIO()
        write_text(buf, emb, unnormalize=False)  # as stored: fine
        assert load_text(buf.getvalue(), normalize=False)["p"].tolist() == [2.0, 0.0]


class TestNormsChunk:
    @pytest.mark.parametrize("value", [np.nan, np.inf, -np.inf, -1.0, -1e-30])
    @pytest.mark.parametrize("mmap", [False, True])
    def test_invalid_norm_is_a_format_error(self, value: float, mmap: bool, tmp_path: Path) -> None:
        buf = io.BytesIO()
        Embeddings(NdArray(np.eye(3, dtype=np.float32)), SimpleVocab(WORDS), norms=Norms([1.0, 7.0, 2.0])).write(buf)
        data = bytearray(buf.getvalue())
        at = data.rfind(struct.pack("<f", 7.0))
        data[at : at + 4] = struct.pack("<f", value)
        path = tmp_path / "bad.fifu"
        path.write_bytes(bytes(data))
        for load in (lambda: load_finalfusion(path, mmap=mmap), lambda: load_norms(path, mmap=mmap)):
            with pytest.raises(FormatError) as err:
                load()
            assert err.value.offset == at, err.value
            assert err.value.chunk == "Norms", err.value
            assert "norm 1" in str(err.value)
            found = err.value.found
            assert (np.isnan(found) and np.isnan(value)) or found == np.float32(value)

    @pytest.mark.parametrize("value", [np.nan, np.inf, -np.inf, -0.5, 1e39])
    def test_constructor_refuses(self, value: float) -> None:
        with pytest.raises(ValueError, match="norm 2 is"):
            Norms(np.array([1.0, 0.0, value]))

    def test_valid_norms(self) -> None:
        assert Norms([0.0, -0.0, F32_MAX, SUBNORMAL]).norms.tolist()[2] == F32_MAX


class TestReaderNormalisation:
    @pytest.mark.parametrize("reader", ["text", "text-dims", "word2vec"])
    def test_overflowing_norm_names_the_word(self, reader: str) -> None:
        make, load = READERS[reader]
        with pytest.raises(FormatError, match=r"(line|record) [23] \(word 'x'\).*normalize=False"):
            load(make(SHAPES["huge"]))

    def test_fasttext_nan_word_row(self) -> None:
        emb = Embeddings(NdArray(np.eye(3, dtype=np.float32)), SimpleVocab(WORDS))
        buf = io.BytesIO()
        write_fasttext(buf, emb)
        data = bytearray(buf.getvalue())
        # the input matrix holds the identity: make the second word's first component NaN
        at = data.find(np.eye(3, dtype="<f4").tobytes())
        data[at + 12 : at + 16] = struct.pack("<f", np.nan)
        with pytest.raises(FormatError, match="'x'"):
            load_fasttext(bytes(data))
        raw = load_fasttext(bytes(data), normalize=False)
        assert np.isnan(raw["x"][0])
        with pytest.raises(NonFiniteError, match="'x'"):
            write_fasttext(io.BytesIO(), raw)
        back = io.BytesIO()
        raw.write(back)  # finalfusion keeps the NaN as it is
        assert np.isnan(load_finalfusion(back.getvalue())["x"][0])

    def test_fasttext_subword_rows_are_written_as_stored(self) -> None:
        vocab = FastTextVocab(["ab"], FastTextIndexer(4, 3, 3))
        m = np.zeros((5, 2), dtype=np.float32)
        m[0] = [1.0, 0.0]
        m[4] = [np.nan, 0.0]  # a bucket no n-gram of "ab" uses: written raw, read back raw
        buf = io.BytesIO()
        emb = Embeddings(NdArray(m), vocab)
        used = {int(i) for i in vocab.subword_indices("ab")}
        if 3 in used:
            pytest.skip("bucket 3 is used by an n-gram of 'ab'")
        write_fasttext(buf, emb)
        back = load_fasttext(buf.getvalue(), normalize=False)
        assert np.isnan(back.storage.matrix[4, 0])

    def test_floret_refuses_nan_rows(self) -> None:
        m = np.ones((4, 2), dtype=np.float32)
        m[2, 1] = np.inf
        emb = Embeddings(NdArray(m), FloretVocab(FloretIndexer(4, 3, 6)))
        buf = io.BytesIO()
        with pytest.raises(NonFiniteError, match="row 2"):
            write_floret(buf, emb)
        assert buf.getvalue() == b""
        m[2, 1] = 3e38
        write_floret(buf, emb)
        assert load_floret(buf.getvalue()).storage.matrix[2].tolist() == [1.0, 3e38] or np.float32(3e38) == load_floret(buf.getvalue()).storage.matrix[2, 1]

    def test_normalize_rows_shapes(self) -> None:
        m = np.array([SHAPES["subnormal"], SHAPES["large"], SHAPES["huge"], SHAPES["zero"], SHAPES["nan"]], dtype=np.float32)
        norms = normalize_rows(m)
        assert norms[0] > 0
        assert abs(norms[0] - np.sqrt(2) * SUBNORMAL) <= 2e-45
        assert np.isclose(norms[1], np.sqrt(2) * 1e38)
        assert norms[2] == np.inf
        assert np.isnan(norms[4])
        assert norms[3] == 0
        np.testing.assert_allclose(np.linalg.norm(m[:3].astype(np.float64), axis=1), 1.0, rtol=1e-6)
        assert m[3].tolist() == [0.0, 0.0, 0.0]

    def test_from_gensim_refuses_overflowing_norm(self) -> None:
        models = pytest.importorskip("gensim.models")
        kv = models.KeyedVectors(3)
        kv.add_vectors(["a", "x"], np.array([[1, 0, 0], SHAPES["huge"]], dtype=np.float32))
        with pytest.raises(NonFiniteError, match="'x'"):
            Embeddings.from_gensim(kv)
        assert Embeddings.from_gensim(kv, normalize=False)["x"][0] == np.float32(3e38)


# -- similarity: tiny and huge rows ------------------------------------------------------


#: word -> row; the query is e0. "tiny" (subnormal) and "huge" rows are the same direction (cosine 3 / sqrt(10)
#: = 0.949 with e0) scaled by powers of two, so they tie exactly, between "near" (0.99) and "mid" (0.9).
def ranking_matrix() -> tuple[list[str], np.ndarray]:
    def at(cos: float) -> list[float]:
        return [cos, float(np.sqrt(1 - cos * cos)), 0.0]

    rows = {
        "near": at(0.99),
        "tiny": [3 * 2.0**-140, 2.0**-140, 0.0],
        "huge": [3 * 2.0**120, 2.0**120, 0.0],
        "mid": at(0.9),
        "zero": [0.0, 0.0, 0.0],
        "far": at(-0.5),
        "e0": [1.0, 0.0, 0.0],
    }
    return list(rows), np.array(list(rows.values()), dtype=np.float32)


def expected_cosines(m: np.ndarray, q: np.ndarray) -> np.ndarray:
    m64 = m.astype(np.float64)
    norms = np.linalg.norm(m64, axis=1)
    return np.divide(m64 @ q, norms, out=np.zeros(len(m)), where=norms > 0)


def dense_embeddings(tmp_path: Path, mmap: bool) -> Embeddings:
    words, m = ranking_matrix()
    emb = Embeddings(NdArray(m), SimpleVocab(words))
    if not mmap:
        return emb
    path = tmp_path / "rank.fifu"
    emb.write(path)
    return load_finalfusion(path, mmap=True)


def quantized_embeddings(tmp_path: Path, mmap: bool) -> Embeddings:
    """One subquantizer whose centroids are the rows themselves: reconstruction is exact."""
    words, m = ranking_matrix()
    pq = PQ(m[None, :, :].copy(), None)
    storage = QuantizedArray(pq, np.arange(len(words), dtype=np.uint8)[:, None])
    emb = Embeddings(storage, SimpleVocab(words))
    if not mmap:
        return emb
    path = tmp_path / "rank-pq.fifu"
    emb.write(path)
    return load_finalfusion(path, mmap=True)


@pytest.fixture(params=["dense", "dense-mmap", "quantized", "quantized-mmap"])
def ranked(request: pytest.FixtureRequest, tmp_path: Path) -> Embeddings:
    kind = str(request.param)
    make = quantized_embeddings if kind.startswith("quantized") else dense_embeddings
    return make(tmp_path, kind.endswith("mmap"))


class TestExtremeRowsRank:
    ORDER: ClassVar[list[str]] = ["e0", "near", "huge", "tiny", "mid", "zero", "far"]  # huge and tiny tie: by word (code point)

    def check(self, results: list[Any], skip: str | None = None) -> None:
        words, m = ranking_matrix()
        want = [w for w in self.ORDER if w != skip]
        assert [r.word for r in results] == want
        cos = dict(zip(words, expected_cosines(m, np.array([1.0, 0, 0])), strict=True))
        for r in results:
            assert abs(r.similarity - cos[r.word]) < 1e-6, (r.word, r.similarity, cos[r.word])

    def test_word_similarity(self, ranked: Embeddings) -> None:
        self.check(ranked.word_similarity("e0", k=10), skip="e0")

    def test_embedding_similarity(self, ranked: Embeddings) -> None:
        self.check(ranked.embedding_similarity([2.0, 0.0, 0.0], k=10))

    def test_batches(self, ranked: Embeddings) -> None:
        words = ranked.vocab.words
        for ids, scores in (
            ranked.embedding_similarity_batch(np.array([[1.0, 0, 0], [1e30, 0, 0]]), k=10),
            ranked.word_similarity_batch(["e0", "e0"], k=10),
        ):
            for row in range(2):
                got = [words[i] for i in ids[row] if i >= 0]
                assert [w for w in got if w != "e0"] == [w for w in self.ORDER if w != "e0"]
                assert np.isfinite(scores[row][ids[row] >= 0]).all()
                assert (scores[row][ids[row] >= 0] <= 1 + 1e-6).all()

    def test_many_query_batch(self, ranked: Embeddings) -> None:
        # 8+ queries: quantized storage reconstructs and multiplies instead of ADC
        ids, _ = ranked.embedding_similarity_batch(np.tile([1.0, 0, 0], (9, 1)), k=10)
        words = ranked.vocab.words
        assert all([words[i] for i in row] == self.ORDER for row in ids)

    def test_the_tiny_and_huge_rows_as_queries(self, ranked: Embeddings) -> None:
        for word in ("tiny", "huge"):
            res = ranked.word_similarity(word, k=1)
            assert res is not None
            assert res[0].word == ("huge" if word == "tiny" else "tiny")
            assert abs(res[0].similarity - 1.0) < 1e-6

    def test_most_similar_all_scores(self, ranked: Embeddings) -> None:
        _words, m = ranking_matrix()
        scores = ranked.most_similar(positive=[np.array([1.0, 0, 0])], topn=None)
        np.testing.assert_allclose(scores, expected_cosines(m, np.array([1.0, 0, 0])), atol=1e-6)

    def test_analogy(self, ranked: Embeddings) -> None:
        # far : e0 :: zero : ?  -> query unit(e0) - unit(far) + 0
        res = ranked.analogy("far", "e0", "zero", k=7)
        assert res is not None
        assert all(np.isfinite(r.similarity) for r in res)
        assert {"tiny", "huge"} <= {r.word for r in res}
        ids, _scores = ranked.analogy_batch([("far", "e0", "zero")], k=7)
        assert [ranked.vocab.words[i] for i in ids[0] if i >= 0] == [r.word for r in res]


# -- non-finite queries ---------------------------------------------------------------------


@pytest.fixture(params=["dense", "quantized"])
def broken(request: pytest.FixtureRequest) -> Embeddings:
    """Embeddings whose word "bad" has a NaN row (files may hold one: storage values are not checked at load)."""
    m = np.array([[1.0, 0.0], [np.nan, 1.0], [0.0, 1.0], [0.6, 0.8]], dtype=np.float32)
    words = ["a", "bad", "b", "c"]
    if request.param == "dense":
        return Embeddings(NdArray(m), SimpleVocab(words))
    pq = PQ(m[None, :, :].copy(), None)
    return Embeddings(QuantizedArray(pq, np.arange(4, dtype=np.uint8)[:, None]), SimpleVocab(words))


class TestNonFiniteQueries:
    CALLS: ClassVar[dict[str, Callable[[Embeddings], Any]]] = {
        "word_similarity": lambda e: e.word_similarity("bad"),
        "word_similarity_batch": lambda e: e.word_similarity_batch(["a", "bad"]),
        "analogy": lambda e: e.analogy("a", "bad", "b"),
        "analogy_batch": lambda e: e.analogy_batch([("a", "b", "c"), ("a", "b", "bad")]),
        "most_similar": lambda e: e.most_similar(positive=["bad"]),
        "similar_by_word": lambda e: e.similar_by_word("bad"),
        "distances": lambda e: e.distances("bad"),
        "closer_than": lambda e: e.closer_than("bad", "a"),
        "doesnt_match": lambda e: e.doesnt_match(["a", "bad", "b"]),
        "evaluate_analogies": lambda e: e.evaluate_analogies([": s", "a bad b c"]),
    }

    @pytest.mark.parametrize("call", sorted(CALLS))
    def test_word_with_nan_row(self, broken: Embeddings, call: str) -> None:
        with pytest.raises(NonFiniteError, match="'bad'") as err:
            self.CALLS[call](broken)
        assert isinstance(err.value, FinalfusionError)
        assert isinstance(err.value, ValueError)

    def test_nan_row_is_never_an_answer(self, broken: Embeddings) -> None:
        res = broken.word_similarity("a", k=10)
        assert res is not None
        assert "bad" not in [r.word for r in res]

    def test_gensim_similarity_is_nan(self, broken: Embeddings) -> None:
        assert np.isnan(broken.similarity("a", "bad"))
        assert np.isnan(broken.n_similarity(["a", "bad"], ["b"]))
        assert np.isnan(broken.distances("a", ["bad"])[0])

    @pytest.mark.parametrize("value", [np.nan, np.inf, -np.inf])
    def test_vectors_passed_in(self, broken: Embeddings, value: float) -> None:
        v = np.array([1.0, value])
        for call in (
            lambda: broken.embedding_similarity(v),
            lambda: broken.embedding_similarity_batch(np.array([[1.0, 0.0], [1.0, value]])),
            lambda: broken.most_similar(positive=[v]),
            lambda: broken.similar_by_vector(v),
            lambda: broken.distances(v),
        ):
            with pytest.raises(NonFiniteError):
                call()
        with pytest.raises(NonFiniteError, match="query row 1"):
            broken.embedding_similarity_batch(np.array([[1.0, 0.0], [1.0, value]]))

    @pytest.mark.parametrize("scale", [1e-300, 1e-40, 1e30, 1e300])
    def test_finite_vectors_of_any_magnitude(self, broken: Embeddings, scale: float) -> None:
        v = np.array([0.6, 0.8]) * scale
        assert [r.word for r in broken.embedding_similarity(v, k=1)] == ["c"]
        ids, scores = broken.embedding_similarity_batch(v[None, :], k=1)
        assert ids.tolist() == [[3]]
        assert abs(float(scores[0, 0]) - 1.0) < 1e-6
        assert broken.most_similar(positive=[v], topn=1)[0][0] == "c"
        assert broken.similar_by_vector(v, topn=1)[0][0] == "c"

    def test_cli(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        m = np.array([[1.0, 0.0], [np.nan, 1.0], [0.0, 1.0]], dtype=np.float32)
        path = tmp_path / "nan.fifu"
        Embeddings(NdArray(m), SimpleVocab(["a", "bad", "b"])).write(path)
        assert cli_main(["similar", str(path), "-w", "bad"]) == 1
        err = capsys.readouterr().err
        assert "'bad'" in err
        assert "NaN or infinite" in err
        assert len(err.strip().splitlines()) == 1
        assert cli_main(["analogy", str(path), "-w", "a", "bad", "b"]) == 1
        assert "'bad'" in capsys.readouterr().err
        assert cli_main(["similar", str(path), "-w", "a"]) == 0
        assert "bad" not in capsys.readouterr().out


class TestGGUFWriter:
    def test_refuses_what_the_table_cannot_hold(self) -> None:
        pytest.importorskip("finalfusion.compat.gguf")
        from finalfusion.compat.gguf import load_gguf, write_gguf

        emb = Embeddings(NdArray(np.array([[1.0, 0.0], [0.6, 0.8]], dtype=np.float32)), SimpleVocab(["a", "b"]), norms=Norms([1.0, 1e5]))
        buf = io.BytesIO()
        with pytest.raises(NonFiniteError, match=r"'b' \(row 1\).*float16"):
            write_gguf(buf, emb, dtype="F16")  # 0.8 * 1e5 is beyond float16
        assert buf.getvalue() == b""
        write_gguf(buf, emb, dtype="F32")
        np.testing.assert_allclose(load_gguf(buf.getvalue(), normalize=False)["b"], [6e4, 8e4])
        emb = Embeddings(NdArray(np.array([[1.0, 0.0], [2.0, 0.0]], dtype=np.float32)), SimpleVocab(["a", "b"]), norms=Norms([1.0, F32_MAX]))
        with pytest.raises(NonFiniteError, match=r"'b' \(row 1\)"):
            write_gguf(io.BytesIO(), emb, dtype="F32")


class TestQuantizeExtremeRows:
    def test_tiny_and_huge_rows_are_normalised(self) -> None:
        from finalfusion.quantize import quantize_storage

        _words, m = ranking_matrix()
        rows = np.concatenate([m, m, m])  # enough rows for 4 centroids
        q = quantize_storage(NdArray(rows), n_subquantizers=1, n_bits=3, seed=1)
        assert q.norms is not None
        np.testing.assert_allclose(q.norms, np.linalg.norm(rows.astype(np.float64), axis=1), rtol=1e-6, atol=2e-45)  # subnormal spacing
        with pytest.raises(ValueError, match="storage row 1 has an l2 norm beyond"):
            quantize_storage(NdArray(np.array([[1.0, 0.0], [3e38, 3e38]], dtype=np.float32)), n_subquantizers=1, n_bits=1)
