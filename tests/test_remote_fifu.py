"""A ``.fifu`` named by a URL and loaded with ``mmap=True``: its rows stay at the server (issue 37, finalfusion._remote_rows).

Against nginx on the loopback interface: every vector, batch, similarity answer and written file equals the local
load's; lookups cost the blocks of the rows they touch (counted from nginx's log: requests and body bytes); whole-matrix
work streams the rows once; pickles are a reference that re-opens the URL and checks it. Against servers that go wrong
on purpose (tests/_servers.py): a file replaced at the server, short bodies, chunks that claim more than the file holds
and quantization codes out of range give OSError or FormatError, never a wrong vector.
"""

from __future__ import annotations

import copy
import os
import pickle
import threading
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import finalfusion
from _servers import Nginx, hostile, later, lying, nginx_fixtures
from finalfusion import Embeddings, FormatError, NdArray, SimpleVocab
from finalfusion._remote_rows import BLOCK_BYTES, CACHE_BYTES, RemoteRows
from finalfusion.errors import FileChangedError, LegacyFormatWarning, StaleIndexError
from finalfusion.subword import FinalfusionHashIndexer
from finalfusion.vocab import FinalfusionBucketVocab

pytest.importorskip("fsspec", reason="fsspec (the remote extra) is not installed")
pytest.importorskip("aiohttp", reason="aiohttp (the remote extra: fsspec's http) is not installed")

HERE = Path(__file__).parent
#: Files written by finalfusion-rust, finalfusion-python (0.7's explicit vocabulary with its short chunk length too) and
#: this library: dense and quantized storage; simple, bucket, explicit and fastText vocabularies.
FILES = [
    *sorted((HERE / "data" / "testdata").glob("*.fifu")),
    *sorted((HERE / "data" / "golden" / "files").glob("*.fifu")),
    HERE.parent / "examples" / "sample.fifu",
    HERE.parent / "examples" / "tutorial.fifu",
]
#: Words of the big file, and its dims (rows of 400 bytes: 5 rows per block).
N_WORDS, DIMS = 10_000, 100
KNOWN = [f"w{i}ort" for i in range(0, N_WORDS, 997)][:10]
UNKNOWN = [f"unbekannt{i}" for i in range(10)]


server, served = nginx_fixtures()


def load_local(path: Path) -> Embeddings:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LegacyFormatWarning)  # finalfusion-rust < 0.11's unlisted norms chunk
        return finalfusion.load_finalfusion(path)


def load_remote(url: str, *, through_load: bool = False, **options: int) -> Embeddings:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LegacyFormatWarning)
        if through_load:
            return finalfusion.load(url, mmap=True)
        return finalfusion.load_finalfusion(url, mmap=True, **options)


def seen(srv: Nginx) -> tuple[int, int]:
    """Requests and body bytes nginx served since the last clear, then clear."""
    reqs = srv.requests()
    assert all(r.status in (200, 206) for r in reqs), reqs
    srv.clear()
    return len(reqs), sum(r.sent for r in reqs)


def rows_of(emb: Embeddings) -> RemoteRows:
    storage = emb.storage
    rows = storage.matrix if isinstance(storage, NdArray) else storage.quantized_embeddings  # type: ignore[attr-defined]
    assert isinstance(rows, RemoteRows)
    return rows


@pytest.fixture(scope="module")
def big(server: Nginx) -> tuple[Path, Path]:
    """A 17 MB bucket-vocabulary file and its quantized version, in nginx's directory."""
    words = [f"w{i}ort" for i in range(N_WORDS)]
    vocab = FinalfusionBucketVocab(words, FinalfusionHashIndexer(15, 3, 6))
    matrix = np.random.default_rng(7).standard_normal((vocab.upper_bound, DIMS)).astype(np.float32)
    dense = server.root / "big.fifu"
    emb = Embeddings(NdArray(matrix), vocab)
    emb.write(dense)
    quantized = server.root / "big-pq.fifu"
    emb.quantize(n_subquantizers=10, n_bits=7, n_iterations=1, sample=2000, seed=1).write(quantized)  # 128 centroids
    return dense, quantized


def blocks_touched(emb: Embeddings, words: list[str], row_bytes: int) -> set[int]:
    per_block = max(1, BLOCK_BYTES // row_bytes)
    rows: list[int] = []
    for w in words:
        idx = emb.vocab.idx(w)
        rows.extend([idx] if isinstance(idx, int) else list(np.asarray(idx).reshape(-1)))
    return {int(r) // per_block for r in rows}


# -- the same vectors as a local load --------------------------------------------------------------------


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_every_answer_equals_the_local_load(served: Nginx, path: Path) -> None:
    (served.root / path.name).write_bytes(path.read_bytes())
    local = load_local(path)
    url = served.url(path.name)
    for remote in (load_remote(url), load_remote(url, through_load=True)):
        rows_of(remote)
        assert remote.vocab.words == local.vocab.words
        assert remote.metadata == local.metadata
        assert (remote.norms is None) == (local.norms is None)
        if local.norms is not None:
            np.testing.assert_array_equal(remote.norms.norms, local.norms.norms)  # type: ignore[union-attr]
        words = [*local.vocab.words[:50], "zzyzx", "unbekannt", "Berlin", ""]
        for w in words:
            got, want = remote.embedding(w), local.embedding(w)
            assert (got is None) == (want is None), w
            if want is not None:
                np.testing.assert_array_equal(got, want)
        for a, b in zip(remote.embedding_batch(words), local.embedding_batch(words), strict=True):
            np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(np.asarray(remote.storage), np.asarray(local.storage))
        query = local.vocab.words[0]
        assert remote.word_similarity(query, 5) == local.word_similarity(query, 5)
        if len(local.vocab) >= 4:
            a, b, c = local.vocab.words[1:4]
            assert remote.analogy(a, b, c, 3) == local.analogy(a, b, c, 3)
        out_remote, out_local = served.root.parent / f"r-{path.name}", served.root.parent / f"l-{path.name}"
        remote.write(out_remote)
        local.write(out_local)
        assert out_remote.read_bytes() == out_local.read_bytes()


def test_storage_methods_answer_as_an_ndarray_would(served: Nginx, big: tuple[Path, Path]) -> None:
    local = load_local(big[0])
    remote = load_remote(served.url(big[0].name), cache_bytes=1 << 16)
    m, want = rows_of(remote), local.storage.matrix  # type: ignore[attr-defined]
    for key in (5, -1, slice(3, 40, 7), slice(100, 90), [[1, 2], [3, 40000]], np.array([7, 7, 0]), (4, slice(2, 5)), (slice(0, 3), 1)):
        np.testing.assert_array_equal(m[key], want[key])
    np.testing.assert_array_equal(m.take([9, 1], axis=0), want.take([9, 1], axis=0))
    np.testing.assert_array_equal(np.take(m, [3, 2], axis=0), np.take(want, [3, 2], axis=0))
    assert "at a server" in repr(remote.storage)
    assert "rows at a server" in remote._repr_html_()
    with pytest.raises(IndexError):
        m[len(want)]
    with pytest.raises(IndexError):
        m[[0, -len(want) - 1]]


# -- what lookups fetch ----------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["dense", "quantized"])
def test_lookups_fetch_the_blocks_of_their_rows_once(served: Nginx, big: tuple[Path, Path], kind: str) -> None:
    path = big[0] if kind == "dense" else big[1]
    local = load_local(path)
    size = path.stat().st_size
    remote = load_remote(served.url(path.name))
    requests, sent = seen(served)
    # the header, vocabulary and norms (and the quantizer): a few blocks of 1 MiB, not the 17 MB of rows
    assert requests <= 8, requests
    assert sent <= 3 << 20, (sent, size)
    row_bytes = DIMS * 4 if kind == "dense" else 10
    for words in (KNOWN, UNKNOWN):
        for w in words:
            np.testing.assert_array_equal(remote[w], local[w])
        requests, sent = seen(served)
        touched = blocks_touched(local, words, row_bytes)
        block = max(1, BLOCK_BYTES // row_bytes) * row_bytes
        assert sent == len(touched) * block, (sent, len(touched))  # every block once, nothing else
        assert requests <= len(touched)
        for w in words:  # again: from the cache
            np.testing.assert_array_equal(remote[w], local[w])
        assert seen(served) == (0, 0)
    # a batch and select: the blocks of their rows, in one round of requests per call
    fresh = load_remote(served.url(path.name))
    seen(served)
    batch = KNOWN + UNKNOWN
    for a, b in zip(fresh.embedding_batch(batch), local.embedding_batch(batch), strict=True):
        np.testing.assert_array_equal(a, b)
    requests, sent = seen(served)
    assert sent == len(blocks_touched(local, batch, row_bytes)) * block
    assert sent < 1 << 20
    from finalfusion.cli._select import select_words

    selecting = load_remote(served.url(path.name))
    seen(served)
    picked, _ = select_words(selecting, KNOWN[:5] + UNKNOWN[:5], subwords=True)
    requests, sent = seen(served)
    assert sent == len(blocks_touched(local, KNOWN[:5] + UNKNOWN[:5], row_bytes)) * block
    want, _ = select_words(local, KNOWN[:5] + UNKNOWN[:5], subwords=True)
    np.testing.assert_array_equal(picked.storage.matrix, want.storage.matrix)  # type: ignore[attr-defined]


def test_the_cache_is_bounded_by_cache_bytes(served: Nginx, big: tuple[Path, Path]) -> None:
    remote = load_remote(served.url(big[0].name), cache_bytes=5 * BLOCK_BYTES)
    local = load_local(big[0])
    m = rows_of(remote)
    assert m.cache_bytes == 5 * BLOCK_BYTES
    for w in KNOWN + UNKNOWN:
        np.testing.assert_array_equal(remote[w], local[w])
        assert m.cached_bytes <= 5 * BLOCK_BYTES
    assert rows_of(load_remote(served.url(big[0].name))).cache_bytes == CACHE_BYTES


def test_load_passes_cache_bytes_to_a_fifu_at_a_url(served: Nginx, big: tuple[Path, Path]) -> None:
    # finalfusion.load(url, mmap=True) reads a .fifu as load_finalfusion does, with the same bound of its row cache (and
    # the pickle's reference keeps it); given for another format, cache_bytes is a ValueError, as tensor= and tokenizer= are
    remote = finalfusion.load(served.url(big[0].name), mmap=True, cache_bytes=5 * BLOCK_BYTES)
    m = rows_of(remote)
    assert m.cache_bytes == 5 * BLOCK_BYTES
    local = load_local(big[0])
    for w in KNOWN + UNKNOWN:
        np.testing.assert_array_equal(remote[w], local[w])
        assert m.cached_bytes <= 5 * BLOCK_BYTES
    assert rows_of(pickle.loads(pickle.dumps(remote))).cache_bytes == 5 * BLOCK_BYTES
    assert rows_of(finalfusion.load(served.url(big[0].name), mmap=True)).cache_bytes == CACHE_BYTES
    finalfusion.write_word2vec(served.root / "e.w2v", local)
    with pytest.raises(ValueError, match=r"^cache_bytes= does not apply to word2vec input \(only to finalfusion\)$"):
        finalfusion.load(served.url("e.w2v"), cache_bytes=1 << 20)


# -- whole-matrix work streams the rows once -------------------------------------------------------------


def test_whole_matrix_work_streams_the_rows_once(served: Nginx, big: tuple[Path, Path]) -> None:
    local = load_local(big[0])
    remote = load_remote(served.url(big[0].name), cache_bytes=1 << 16)  # far smaller than the matrix
    seen(served)
    word_rows = N_WORDS * DIMS * 4
    for query in ("w1ort", "w2ort", "unbekannt"):
        assert remote.word_similarity(query, 5) == local.word_similarity(query, 5)
    _, sent = seen(served)
    assert word_rows <= sent <= word_rows + 3 * (1 << 16), sent  # the word rows once, plus the queries' own blocks
    out = served.root.parent / "written.fifu"
    remote.write(out)
    _, sent = seen(served)
    assert sent == local.storage.shape[0] * DIMS * 4  # every row once
    assert out.read_bytes() == big[0].read_bytes()
    reports: list[tuple[str, int, object]] = []
    q_remote = remote.quantize(n_subquantizers=10, n_iterations=1, sample=2000, seed=1, progress=lambda *a: reports.append(a))
    _, sent = seen(served)
    matrix_bytes = local.storage.shape[0] * DIMS * 4
    assert matrix_bytes <= sent <= matrix_bytes + 2000 * BLOCK_BYTES, sent  # the encoding pass streams once; training reads the blocks of its sample
    assert any(stage == "encode" for stage, _, _ in reports)
    q_local = local.quantize(n_subquantizers=10, n_iterations=1, sample=2000, seed=1)
    assert q_remote.storage == q_local.storage
    # training on every row reads them once, and encoding uses what training read
    q_remote = remote.quantize(n_subquantizers=10, n_iterations=1, seed=1)
    _, sent = seen(served)
    assert sent == matrix_bytes
    assert q_remote.storage == local.quantize(n_subquantizers=10, n_iterations=1, seed=1).storage


# -- pickling by reference -------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["dense", "quantized"])
def test_pickles_are_a_reference_to_the_url_checked_on_unpickling(served: Nginx, big: tuple[Path, Path], kind: str) -> None:
    path = big[0] if kind == "dense" else big[1]
    local = load_local(path)
    remote = load_remote(served.url(path.name), cache_bytes=1 << 18)
    data = pickle.dumps(remote)
    assert len(data) < 1000
    back = pickle.loads(data)
    assert rows_of(back).cache_bytes == 1 << 18
    seen(served)
    for copied in (copy.copy(remote), copy.deepcopy(remote)):  # never a download: the rows are shared
        assert rows_of(copied) is rows_of(remote)
    assert seen(served) == (0, 0)
    for w in KNOWN[:3] + UNKNOWN[:3]:
        np.testing.assert_array_equal(back[w], local[w])
    # another file at the same URL: refused on unpickling
    changing = served.root / f"changing-{path.name}"
    changing.write_bytes(path.read_bytes())
    data = pickle.dumps(load_remote(served.url(changing.name)))
    changed = bytearray(path.read_bytes())
    changed[-1] ^= 1
    changing.write_bytes(bytes(changed))
    os.utime(changing, (1, 1))  # nginx's ETag is its modification time and size
    with pytest.raises(FileChangedError):
        pickle.loads(data)


# -- servers that go wrong -------------------------------------------------------------------------------


def test_a_file_replaced_at_nginx_is_an_oserror_never_another_vector(served: Nginx, big: tuple[Path, Path]) -> None:
    target = served.root / "replaced.fifu"
    target.write_bytes(big[0].read_bytes())
    remote = load_remote(served.url(target.name), cache_bytes=BLOCK_BYTES)
    local = load_local(big[0])
    np.testing.assert_array_equal(remote["w1ort"], local["w1ort"])
    data = bytearray(big[0].read_bytes())
    data[-N_WORDS * DIMS * 4 :] = bytes(N_WORDS * DIMS * 4)  # same size, other rows
    target.write_bytes(bytes(data))
    os.utime(target, (2, 2))
    with pytest.raises(OSError, match="changed at the server"):
        remote["w9000ort"]


@pytest.mark.parametrize("if_match", [True, False], ids=["honours-if-match", "ignores-if-match"])
@pytest.mark.parametrize("then", ["other bytes", "shorter", "longer", "short bodies"])
def test_a_server_that_changes_between_requests_is_an_oserror(big: tuple[Path, Path], then: str, if_match: bool) -> None:
    first = big[0].read_bytes()
    wrong: bytes | str = {
        "other bytes": first[:-100] + bytes(100),
        "shorter": first[: len(first) // 2],
        "longer": first + bytes(1 << 20),
        "short bodies": "short",
    }[then]
    local = load_local(big[0])
    with later(first, wrong, if_match=if_match) as srv:
        remote = load_remote(srv.url, cache_bytes=BLOCK_BYTES)
        np.testing.assert_array_equal(remote["w1ort"], local["w1ort"])
        srv.go_wrong()
        # a file of another size: its answers name the other size (Content-Range) when the server does not refuse them
        said = {"short bodies": "the server sent", "other bytes": "changed at the server"}.get(then, "changed at the server|the server answered Content-Range")
        for w in ("w5000ort", "unbekannt"):
            with pytest.raises(OSError, match=said):
                remote[w]
        with pytest.raises(OSError, match=said):
            remote.embedding_batch(["w7000ort", "w1ort"])


def test_without_an_etag_a_shorter_file_or_short_bodies_are_an_oserror(big: tuple[Path, Path]) -> None:
    first = big[0].read_bytes()
    for wrong in (first[: len(first) // 2], "short"):
        with later(first, wrong, etag=False) as srv:
            remote = load_remote(srv.url, cache_bytes=BLOCK_BYTES)
            srv.go_wrong()
            with pytest.raises(OSError, match=r"the server sent|the server answered Content-Range"):
                rows_of(remote)[-1]  # the last row: in the second half of the file


def _storage_frame(data: bytes) -> int:
    """Offset of the storage chunk's frame in a finalfusion file (ids 2 NdArray, 4 QuantizedArray)."""
    at = 12 + 4 * int.from_bytes(data[8:12], "little")
    while True:
        chunk_id, length = int.from_bytes(data[at : at + 4], "little"), int.from_bytes(data[at + 4 : at + 12], "little")
        if chunk_id in (2, 4):
            return at
        at += 12 + length


@pytest.mark.parametrize("damage", ["declared past the file", "more rows than declared", "fewer rows than declared"])
@pytest.mark.parametrize(
    "path", [HERE / "data" / "testdata" / "python-similarity.fifu", HERE / "data" / "testdata" / "rust-quantized.fifu"], ids=lambda p: p.name
)
def test_a_storage_chunk_that_claims_more_than_there_is_is_a_format_error(served: Nginx, path: Path, damage: str) -> None:
    data = bytearray(path.read_bytes())
    frame = _storage_frame(bytes(data))
    rows_at = frame + 12 + (0 if data[frame] == 2 else 20)  # the u64 row count of NdArray / QuantizedArray
    rows = int.from_bytes(data[rows_at : rows_at + 8], "little")
    if damage == "declared past the file":
        data[frame + 4 : frame + 12] = (len(data) + 1000).to_bytes(8, "little")
    else:
        data[rows_at : rows_at + 8] = (rows + (1 if damage == "more rows than declared" else -1)).to_bytes(8, "little")
    bad = served.root / f"bad-{damage.replace(' ', '-')}-{path.name}"
    bad.write_bytes(bytes(data))
    with pytest.raises(FormatError):
        load_local(bad)
    with pytest.raises(FormatError):
        load_remote(served.url(bad.name))


def test_quantization_codes_out_of_range_are_a_format_error_when_their_block_arrives(served: Nginx, big: tuple[Path, Path]) -> None:
    data = bytearray(big[1].read_bytes())
    local = load_local(big[1])
    k = local.storage.quantizer.n_centroids  # type: ignore[attr-defined]
    assert k == 128
    codes_at = len(data) - local.storage.shape[0] * 10
    row = local.vocab.idx("w9000ort")
    assert isinstance(row, int)
    data[codes_at + row * 10] = 255
    bad = served.root / "bad-codes.fifu"
    bad.write_bytes(bytes(data))
    with pytest.raises(FormatError, match="quantization code out of range"):
        load_local(bad)
    remote = load_remote(served.url(bad.name))  # codes are checked as their blocks arrive
    np.testing.assert_array_equal(remote["w1ort"], local["w1ort"])
    with pytest.raises(FormatError, match="quantization code out of range"):
        remote["w9000ort"]


def test_lookups_from_threads_match_serial_ones(served: Nginx, big: tuple[Path, Path]) -> None:
    local = load_local(big[0])
    remote = load_remote(served.url(big[0].name), cache_bytes=8 * BLOCK_BYTES)
    words = [f"w{i}ort" for i in range(0, N_WORDS, 37)] + UNKNOWN
    got: dict[int, list[np.ndarray]] = {}

    def run(t: int) -> None:
        got[t] = [remote[w] for w in words[t::2] + words]

    threads = [threading.Thread(target=run, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for t in range(4):
        for w, v in zip(words[t::2] + words, got[t], strict=True):
            np.testing.assert_array_equal(v, local[w])


@pytest.mark.parametrize("kind", ["dense", "quantized"])
def test_iterating_streams_the_word_rows_in_order(served: Nginx, big: tuple[Path, Path], kind: str) -> None:
    path = big[0] if kind == "dense" else big[1]
    local = load_local(path)
    remote = load_remote(served.url(path.name), cache_bytes=1 << 16)
    seen(served)
    count = 0
    for (word, vector), (want_word, want) in zip(remote, local, strict=True):
        assert word == want_word
        np.testing.assert_array_equal(vector, want)
        count += 1
    assert count == N_WORDS
    requests, sent = seen(served)
    row_bytes = DIMS * 4 if kind == "dense" else 10
    assert sent <= N_WORDS * row_bytes + (8 << 20)  # the word rows, and at most one step of streaming more
    assert requests <= N_WORDS * row_bytes // BLOCK_BYTES // 4  # blocks of rows, not a request per row


def test_the_command_line_reads_a_url_with_mmap(served: Nginx, big: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from finalfusion import cli

    outputs = []
    for source in (str(big[0]), served.url(big[0].name)):
        assert cli.main(["similar", "--mmap", "-w", "w1ort", "--", source]) == 0
        outputs.append(capsys.readouterr().out)
    assert outputs[0] == outputs[1]
    assert outputs[0].count("\n") == 10
    assert cli.main(["convert", "--quiet", "--mmap", served.url(big[0].name), str(tmp_path / "out.fifu")]) == 0
    assert (tmp_path / "out.fifu").read_bytes() == big[0].read_bytes()


@pytest.mark.parametrize("mode", ["ignore-range", "short", "long", "stall"])
def test_a_server_that_answers_ranges_wrongly_is_an_oserror_in_bounded_time_and_memory(
    big: tuple[Path, Path], mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import time
    import tracemalloc

    monkeypatch.setattr("finalfusion._remote.TIMEOUT", 2.0)
    data = big[0].read_bytes()  # 17 MB: a whole-file answer held in memory would show
    start = time.monotonic()
    tracemalloc.start()
    try:
        with hostile(data, mode) as url, pytest.raises(OSError, match=url):
            load_remote(url)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < len(data) // 4, peak
    assert time.monotonic() - start < 60


#: The embeddings a forked worker inherits (set before the fork, as a program's global would be).
_INHERITED: dict[str, Embeddings] = {}


def _lookup_inherited(word: str) -> np.ndarray:
    return _INHERITED["emb"][word]


def test_a_forked_worker_fetches_rows_through_its_own_connection(served: Nginx, big: tuple[Path, Path]) -> None:
    import multiprocessing

    local = load_local(big[0])
    remote = load_remote(served.url(big[0].name))
    np.testing.assert_array_equal(remote["w1ort"], local["w1ort"])  # the parent's event loop and session are in use
    _INHERITED["emb"] = remote
    try:
        with multiprocessing.get_context("fork").Pool(1) as pool:
            for w in ("w9000ort", "unbekannt"):
                np.testing.assert_array_equal(pool.apply_async(_lookup_inherited, (w,)).get(timeout=60), local[w])
    finally:
        _INHERITED.clear()


@pytest.mark.parametrize(("mode", "etag"), [("other-range", False), ("changed", True), ("head-size", False)])
def test_row_fetches_check_each_answer_as_the_load_does(mode: str, etag: bool) -> None:
    from finalfusion._remote import RangeSource, ServerRefused

    data = bytes(range(256)) * 64
    with lying(data, mode, later=data[::-1], etag=etag) as url:
        source = RangeSource.open(url)
        if mode != "head-size":  # the first answer is honest, then the server lies in well-formed answers
            assert source.fetch([(100, 200)]) == [data[100:200]]
        with pytest.raises(ServerRefused, match=url):
            source.fetch([(1000, 1100), (5000, 5100)])


def test_rows_at_a_server_index_and_convert_as_the_local_matrix(served: Nginx, big: tuple[Path, Path]) -> None:
    local = np.asarray(load_local(big[0]).storage)
    rows = rows_of(load_remote(served.url(big[0].name), cache_bytes=1 << 16))
    n = len(local)
    assert (rows.ndim, rows.size, rows.itemsize, len(rows), rows.url) == (2, local.size, local.itemsize, n, served.url(big[0].name))
    assert repr(rows).startswith(f"RemoteRows(shape={local.shape}")
    mask = np.zeros(n, dtype=bool)
    mask[[3, 700, n - 1]] = True
    keys = [5, -1, np.int64(9), slice(10, 20), slice(30, 3, -7), [4, 2, 4], np.array([[1, 2], [3, n - 2]]), mask, (), ...]
    for key in [*keys, (7, 3), (slice(0, 4), 2), ([1, 5], slice(2, 6)), ([1, 5], [2, 3]), (mask, [0, 1, 2])]:
        np.testing.assert_array_equal(rows[key], local[key], err_msg=repr(key))
    np.testing.assert_array_equal(rows[np.array([], dtype=np.float64)], local[np.array([], dtype=np.intp)])
    for bad in [n, -n - 1, [0, n], np.zeros(3, dtype=bool), np.array([1.5])]:
        with pytest.raises(IndexError):
            rows[bad]
    np.testing.assert_array_equal(np.take(rows, [6, 1], axis=0), local[[6, 1]])
    out = np.empty((2, local.shape[1]), dtype=local.dtype)
    assert rows.take([8, 9], out=out) is out
    np.testing.assert_array_equal(out, local[[8, 9]])
    with pytest.raises(ValueError, match="axis 0 only"):
        rows.take([0], axis=1)
    np.testing.assert_array_equal(rows.copy(), local)
    assert rows.astype(np.float64).dtype == np.float64
    np.testing.assert_array_equal(np.sum(rows, axis=0), np.sum(local, axis=0))  # anything else streams the matrix
    assert copy.copy(rows) is rows
    assert copy.deepcopy(rows) is rows
    np.testing.assert_array_equal(pickle.loads(pickle.dumps(rows)), local)  # on its own: by value


def test_row_fetches_retry_a_transient_failure_and_no_other() -> None:
    # RangeSource.fetch over s3/gcs-like protocols (here fsspec's memory filesystem): a failure of the protocol library
    # is tried again (RETRIES more times), a missing file or a changed one (HTTP 412) is not
    fsspec = pytest.importorskip("fsspec")
    from finalfusion._remote import RETRIES, RangeSource

    data = bytes(range(256)) * 16
    fsspec.filesystem("memory").pipe("/retry/e.bin", data)
    source = RangeSource.open("memory://retry/e.bin")
    real = source._fs.cat_ranges
    calls: list[int] = []

    def failing(errors: list[BaseException]) -> Any:
        def cat_ranges(*args: Any, **kwargs: Any) -> Any:
            calls.append(1)
            if errors:
                raise errors.pop(0)
            return real(*args, **kwargs)

        return cat_ranges

    class Changed(Exception):
        status = 412

    source._fs.cat_ranges = failing([TimeoutError("slow"), ConnectionResetError("reset")])
    assert source.fetch([(10, 20), (4000, 4096)]) == [data[10:20], data[4000:4096]]
    assert len(calls) == 3
    for errors, kind, said, tries in (
        ([TimeoutError("slow")] * (RETRIES + 1), OSError, rf"memory://retry/e.bin: reading 1 ranges failed {RETRIES + 1} times: TimeoutError", RETRIES + 1),
        ([FileNotFoundError("gone")], FileNotFoundError, "gone", 1),
        ([PermissionError("no")], PermissionError, "no", 1),
        ([Changed("precondition failed")], OSError, "the file changed at the server since it was opened", 1),
    ):
        calls.clear()
        source._fs.cat_ranges = failing(list(errors))
        with pytest.raises(kind, match=said):
            source.fetch([(0, 5)])
        assert len(calls) == tries, errors


def test_info_of_a_bucket_and_a_quantized_file_at_a_url(server: Nginx, big: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    # `finalfusion info URL`: a bucket vocabulary and quantized storage described as for the local files, no rows fetched
    from finalfusion._remote import BLOCK_SIZE
    from finalfusion.cli import main

    for path in big:
        for args in ([], ["--json"]):
            assert main(["info", *args, str(path)]) == 0
            want = capsys.readouterr().out.replace(str(path), "FILE")
            server.clear()
            assert main(["info", *args, server.url(path.name)]) == 0
            assert capsys.readouterr().out.replace(server.url(path.name), "FILE") == want
            fetched = sum(r.sent for r in server.requests() if r.method == "GET")
            if path.stat().st_size > 4 * BLOCK_SIZE:  # the quantized file (0.8 MB) is within one block: fetched whole by any read
                assert fetched < path.stat().st_size / 2, (path.name, fetched)


def test_an_index_over_embeddings_whose_rows_stay_at_the_server(served: Nginx, tmp_path: Path) -> None:
    # build_index / load_index of load_finalfusion(url, mmap=True): the same index and answers as over the local file
    # (build_index used to fail: the remote reference has no modification time to record)
    pytest.importorskip("faiss", reason="faiss (the ann extra) is not installed")
    from finalfusion import ann

    rows = np.random.default_rng(11).standard_normal((3000, 24)).astype(np.float32)
    local_path = served.root / "ann.fifu"
    Embeddings(NdArray(rows), SimpleVocab([f"w{i}" for i in range(3000)])).write(local_path)
    local = finalfusion.load_finalfusion(local_path)
    remote = finalfusion.load_finalfusion(served.url("ann.fifu"), mmap=True)
    ix = ann.build_index(remote, "faiss-ivf")
    lx = ann.build_index(local, "faiss-ivf")
    words = [f"w{i}" for i in range(0, 3000, 97)]
    assert [remote.word_similarity(w, 5, index=ix) for w in words] == [local.word_similarity(w, 5, index=lx) for w in words]
    ix.save(tmp_path / "remote.ann")
    for verify in ("full", "file"):  # "file" has no local file to recognise: the rows are checked
        again = ann.load_index(tmp_path / "remote.ann", finalfusion.load_finalfusion(served.url("ann.fifu"), mmap=True), verify=verify)
        assert again.source is None
        assert remote.word_similarity("w5", 5, index=again) == local.word_similarity("w5", 5, index=lx)
    from finalfusion.cli import main

    assert main(["index", "build", "--quiet", "--mmap", "--backend", "faiss-ivf", served.url("ann.fifu"), str(tmp_path / "cli.ann")]) == 0
    assert remote.word_similarity("w5", 5, index=ann.load_index(tmp_path / "cli.ann", remote)) == local.word_similarity("w5", 5, index=lx)
    changed = rows.copy()
    changed[7] += 1.0
    Embeddings(NdArray(changed), SimpleVocab([f"w{i}" for i in range(3000)])).write(served.root / "ann2.fifu")
    with pytest.raises(StaleIndexError):
        ann.load_index(tmp_path / "remote.ann", finalfusion.load_finalfusion(served.url("ann2.fifu"), mmap=True), verify="file")
