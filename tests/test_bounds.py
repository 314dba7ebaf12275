"""Counts no embedding can have (issue 13, classes 6 and 7): refused at load, named in the error.

Every reader checks a dimension count against :data:`finalfusion.limits.MAX_DIMS`
before anything is allocated from it, and quantized storage validates every
count later code divides by, reshapes with or allocates from.
"""

from __future__ import annotations

import io
import itertools
from pathlib import Path

import numpy as np
import pytest

import finalfusion
import finalfusion.limits as limits
from _bounded import bounded
from finalfusion import FormatError, load_finalfusion
from finalfusion.storage import PQ, QuantizedArray
from test_hostile import bucket_vocab, build, ndarray, quantized, simple_vocab

TESTDATA = Path(__file__).parent / "data"
HUGE = [limits.MAX_DIMS + 1, 2**31, 2**32 - 1]


# -- class 7: absurd dimensions from tiny files -------------------------------------------------------


@pytest.mark.parametrize("cols", HUGE)
@pytest.mark.parametrize("vocab", ["simple", "bucket"])
@pytest.mark.parametrize("mmap", [False, True])
def test_fifu_with_zero_rows_and_huge_columns_is_refused(cols: int, vocab: str, mmap: bool, tmp_path: Path) -> None:
    v = (1, simple_vocab([])) if vocab == "simple" else (3, bucket_vocab([], exp_or_buckets=0))
    data = build([v, (2, ndarray(0, cols))])
    assert len(data) <= 100  # the audit's file was 72 bytes
    path = tmp_path / "tiny.fifu"
    path.write_bytes(data)
    with pytest.raises(FormatError, match=r"NdArray: number of columns exceeds finalfusion\.limits\.MAX_DIMS") as e:
        load_finalfusion(path, mmap=mmap)
    assert f"found {cols}" in str(e.value)


@pytest.mark.parametrize("dims", HUGE)
@pytest.mark.parametrize("loader", ["load_word2vec", "load_text_dims"])
def test_text_headers_claiming_huge_dims_are_refused(dims: int, loader: str) -> None:
    for rows in (0, 1, 10**9):
        data = f"{rows} {dims}\n".encode()
        with pytest.raises(FormatError, match="MAX_DIMS"):
            getattr(finalfusion, loader)(io.BytesIO(data))


def test_fasttext_and_floret_headers_claiming_huge_dims_are_refused() -> None:
    ft = (TESTDATA / "testdata" / "rust-fasttext.bin").read_bytes()
    hostile = ft[:8] + (limits.MAX_DIMS + 1).to_bytes(4, "little") + ft[12:]
    with pytest.raises(FormatError, match=r"fastText args \(dim\).*MAX_DIMS"):
        finalfusion.load_fasttext(io.BytesIO(hostile))
    with pytest.raises(FormatError, match="MAX_DIMS"):
        finalfusion.load_floret(io.BytesIO(f"10 {limits.MAX_DIMS + 1} 3 6 2 0 < >\n".encode()))


def test_a_line_with_more_components_than_the_limit_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(limits, "MAX_DIMS", 8)
    with pytest.raises(FormatError, match="MAX_DIMS"):
        finalfusion.load_text(io.BytesIO(b"a " + b"1 " * 9 + b"\n"))
    assert finalfusion.load_text(io.BytesIO(b"a " + b"1 " * 8 + b"\n")).dims == 8


FIXTURES = sorted(
    p
    for p in [*(TESTDATA / "testdata").iterdir(), *(TESTDATA / "golden" / "files").iterdir(), *(TESTDATA / "models").glob("*.gguf")]
    if p.suffix not in (".md", ".json", ".py") and "utf8-incomplete" not in p.name and "quantized_storage" not in p.name  # bare chunks, not files
)


@pytest.mark.filterwarnings("ignore::finalfusion.LegacyFormatWarning")
@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.name)
def test_every_reader_checks_the_one_limit_and_it_can_be_raised(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The limit is read when a file is read: lowering it below a fixture's width makes every reader refuse it.
    dims = finalfusion.load(path).dims
    monkeypatch.setattr(limits, "MAX_DIMS", dims - 1)
    with pytest.raises(FormatError, match=r"MAX_DIMS.*expected at most"):
        finalfusion.load(path)
    monkeypatch.setattr(limits, "MAX_DIMS", dims)
    assert finalfusion.load(path).dims == dims


# -- class 6: quantized storage whose counts later code divides by -----------------------------------------


def _quantized_file(q: int, d: int, k: int, rows: int = 2) -> bytes:
    return build([(1, simple_vocab([f"w{i}" for i in range(rows)])), (4, quantized(q, d, k, rows))])


@pytest.mark.parametrize(
    ("q", "d", "k"),
    [(q, d, k) for q, d, k in itertools.product([0, 1, 2, 3], [0, 1, 2, 4, 6], [0, 1, 2, 256, 257]) if not (q and d and d % q == 0 and 1 <= k <= 256)],
)
def test_quantized_counts_that_later_code_cannot_use_are_refused(q: int, d: int, k: int) -> None:
    with pytest.raises(FormatError, match="QuantizedArray") as e:
        load_finalfusion(_quantized_file(q, d, k))
    assert "expected" in str(e.value)
    assert "found" in str(e.value)


@pytest.mark.parametrize(("q", "d", "k"), [(1, 1, 1), (1, 2, 2), (2, 2, 1), (2, 4, 3), (3, 6, 256)])
def test_quantized_with_valid_counts_answers_every_query(q: int, d: int, k: int) -> None:
    emb = load_finalfusion(_quantized_file(q, d, k, rows=3))

    def run() -> tuple[object, ...]:
        return (
            emb.embedding("w0").tolist(),
            [r.word for r in emb.word_similarity("w0", k=5) or []],
            [r.word for r in emb.embedding_similarity(np.ones(d), k=5)],
            emb.word_similarity_batch(["w0", "w1"], k=5)[0].tolist(),
        )

    vec, sim, esim, batch = bounded(run, extra_mb=200)
    assert vec == [0.0] * d
    assert sim == ["w1", "w2"]
    assert esim == ["w0", "w1", "w2"]
    assert batch == [[1, 2, -1], [0, 2, -1]]


def test_quantized_reconstructed_length_is_bounded_by_max_dims(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(limits, "MAX_DIMS", 4)
    with pytest.raises(FormatError, match=r"QuantizedArray: reconstructed length exceeds finalfusion\.limits\.MAX_DIMS"):
        load_finalfusion(_quantized_file(2, 6, 2))
    assert load_finalfusion(_quantized_file(2, 4, 2)).dims == 4


@pytest.mark.parametrize("shape", [(0, 4, 2), (2, 4, 0), (0, 1, 0), (2, 0, 2), (2, 257, 2)])
def test_pq_constructor_refuses_shapes_later_code_divides_by(shape: tuple[int, int, int]) -> None:
    with pytest.raises(ValueError, match=r"got") as e:
        PQ(np.zeros(shape, np.float32))
    assert not isinstance(e.value, FormatError)


def test_quantized_array_constructor_checks_codes_against_the_quantizer() -> None:
    pq = PQ(np.zeros((2, 4, 1), np.float32))
    with pytest.raises(ValueError, match="codes must have shape"):
        QuantizedArray(pq, np.zeros((3, 1), np.uint8))
    assert QuantizedArray(pq, np.zeros((3, 2), np.uint8)).shape == (3, 2)
