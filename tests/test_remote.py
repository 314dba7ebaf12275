"""Files named by a URL, read with range requests (finalfusion._remote, issue 37), against nginx on the loopback interface.

Each load is compared with the load of the same local file, and the requests and bytes nginx logged are counted: a
GGUF's token table or a safetensors tensor costs the headers and its own bytes, not the file. A hostile server (short,
overlong, stalled or range-ignoring answers) gives an error in bounded time, never a wrong vector.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import json
import struct
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import finalfusion
from _servers import Nginx, hostile, lying, nginx_fixtures
from finalfusion import FormatError, MissingExtraError
from finalfusion._remote import BLOCK_SIZE, is_url

pytest.importorskip("fsspec", reason="fsspec (the remote extra) is not installed")
pytest.importorskip("aiohttp", reason="aiohttp (the remote extra: fsspec's http) is not installed")

SAMPLE = Path(__file__).parent.parent / "examples" / "sample.fifu"
#: Bytes of the tensor after the token table in the big files: what a load must not fetch.
BULK = 20 << 20


server, served = nginx_fixtures()


def test_a_finalfusion_file_loads_as_the_local_one(served: Nginx) -> None:
    (served.root / "sample.fifu").write_bytes(SAMPLE.read_bytes())
    local = finalfusion.load(SAMPLE)
    words = ["berlin", "berliner", "zzyzx", "café"]
    for emb in (finalfusion.load(served.url("sample.fifu")), finalfusion.load_finalfusion(served.url("sample.fifu"), mmap=True)):
        for w in words:
            np.testing.assert_array_equal(emb[w], local[w])
        assert emb.metadata == local.metadata
    assert all(r.status in (200, 206) for r in served.requests())


def _big_gguf(path: Path) -> np.ndarray:
    gguf = pytest.importorskip("gguf")
    table = np.random.default_rng(0).standard_normal((1000, 64)).astype(np.float32)
    w = gguf.GGUFWriter(str(path), arch="llama")
    w.add_tokenizer_model("gpt2")
    w.add_token_list([f"t{i}" for i in range(1000)])
    w.add_token_types([1] * 1000)
    w.add_token_merges([])
    w.add_tensor("token_embd.weight", table)
    w.add_tensor("blk.0.ffn_up.weight", np.zeros((BULK // 4000, 1000), dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return table


def test_a_gguf_token_table_costs_the_header_and_the_table_not_the_file(served: Nginx) -> None:
    table = _big_gguf(served.root / "big.gguf")
    size = (served.root / "big.gguf").stat().st_size
    emb = finalfusion.load_gguf(served.url("big.gguf"), normalize=False)
    np.testing.assert_array_equal(emb.storage.matrix, table)
    gets = [r for r in served.requests() if r.method == "GET"]
    fetched = sum(r.sent for r in gets)
    assert fetched <= table.nbytes + 64 * 1024 + BLOCK_SIZE, (fetched, size)  # header, table, at most one block beyond
    assert fetched < size / 10
    assert all(r.range is not None for r in gets), "every GET is a range request"
    assert finalfusion.load(served.url("big.gguf"), normalize=False).vocab.words == emb.vocab.words


def test_a_safetensors_table_costs_its_own_bytes(served: Nginx) -> None:
    safetensors_numpy = pytest.importorskip("safetensors.numpy")
    table = np.random.default_rng(1).standard_normal((500, 32)).astype(np.float32)
    # the table after the bulk: a reader that downloads up to it would fetch everything
    safetensors_numpy.save_file({"a.bulk": np.zeros(BULK // 4, dtype=np.float32), "model.embed_tokens.weight": table}, str(served.root / "m.safetensors"))
    emb = finalfusion.compat.load_safetensors(served.url("m.safetensors"), tokenizer=[f"t{i}" for i in range(500)], normalize=False)
    np.testing.assert_array_equal(emb.storage.matrix, table)
    fetched = sum(r.sent for r in served.requests() if r.method == "GET")
    assert fetched <= table.nbytes + 2 * BLOCK_SIZE, fetched


def test_gzip_text_streams_through(served: Nginx) -> None:
    emb = finalfusion.load(SAMPLE)
    local = served.root / "e.txt"
    finalfusion.write_text(local, emb)
    (served.root / "e.txt.gz").write_bytes(gzip.compress(local.read_bytes()))
    remote = finalfusion.load_text(served.url("e.txt.gz"))
    np.testing.assert_array_equal(remote.storage.matrix, finalfusion.load_text(local).storage.matrix)


def test_a_missing_file_is_file_not_found(served: Nginx) -> None:
    with pytest.raises(FileNotFoundError, match="no file at this URL"):
        finalfusion.load(served.url("nothing.fifu"))


def test_the_command_line_reads_urls(served: Nginx, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from finalfusion.cli import main

    (served.root / "sample.fifu").write_bytes(SAMPLE.read_bytes())
    _big_gguf(served.root / "big.gguf")
    assert main(["info", served.url("sample.fifu")]) == 0
    assert "FinalfusionBucketVocab, 84 words" in capsys.readouterr().out
    assert main(["similar", "-k", "3", "-w", "berlin", "--", served.url("sample.fifu")]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 3
    assert main(["convert", "--quiet", served.url("big.gguf"), str(tmp_path / "big.fifu")]) == 0
    assert finalfusion.load(tmp_path / "big.fifu").vocab.words[:2] == ["t0", "t1"]


def _with_metadata(path: Path) -> finalfusion.Embeddings:
    """A 20 MB .fifu with metadata and norms written at ``path``: its matrix is what reading a chunk alone must not fetch."""
    rows = np.random.default_rng(2).standard_normal((10_000, 500)).astype(np.float32)
    emb = finalfusion.Embeddings(
        finalfusion.NdArray(rows),
        finalfusion.SimpleVocab([f"w{i}" for i in range(10_000)]),
        norms=finalfusion.Norms(np.linspace(1, 2, 10_000, dtype=np.float32)),
        metadata=finalfusion.Metadata({"corpus": "wiki", "dims": 500, "training": {"epochs": 5}}),
    )
    emb.write(path)
    return emb


def _plain(path: Path) -> None:
    """A .fifu without metadata or norms."""
    finalfusion.Embeddings(finalfusion.NdArray(np.eye(2, dtype=np.float32)), finalfusion.SimpleVocab(["a", "b"])).write(path)


def test_a_chunk_alone_costs_the_frames_and_its_own_bytes(served: Nginx) -> None:
    # load_metadata / load_vocab / load_norms of a URL: the header and every frame are read and checked, the chunks not
    # asked for are skipped by seeking (the 20 MB matrix is never fetched): the first block and the one of the last frame
    emb = _with_metadata(served.root / "m.fifu")
    size = (served.root / "m.fifu").stat().st_size
    url = served.url("m.fifu")
    for load, want in (
        (finalfusion.metadata.load_metadata, emb.metadata),
        (lambda u: finalfusion.vocab.load_vocab(u).words, emb.vocab.words),
        (lambda u: finalfusion.norms.load_norms(u).norms.tolist(), emb.norms.norms.tolist()),
    ):
        served.clear()
        assert load(url) == want
        gets = [r for r in served.requests() if r.method == "GET"]
        assert sum(r.sent for r in gets) <= 2 * BLOCK_SIZE, (load, [(r.range, r.sent) for r in gets], size)
    _plain(served.root / "plain.fifu")
    with pytest.raises(FormatError, match=r"has no Norms chunk: expected a Norms chunk, found \['SimpleVocab', 'NdArray'\]"):
        finalfusion.norms.load_norms(served.url("plain.fifu"))
    # frames are checked as a load checks them: a matrix claiming more than the file holds is refused, not skipped
    data = bytearray((served.root / "m.fifu").read_bytes())
    at = finalfusion.io.read_chunks(bytes(data))[1][2][0]
    data[at + 4 : at + 12] = len(data).to_bytes(8, "little")
    (served.root / "long.fifu").write_bytes(data)
    with pytest.raises(FormatError, match="declared chunk length runs past the end"):
        finalfusion.metadata.load_metadata(served.url("long.fifu"))


def test_metadata_past_its_limit_is_refused_before_it_is_fetched(served: Nginx, monkeypatch: pytest.MonkeyPatch) -> None:
    # a metadata chunk is refused from its declared length (finalfusion.limits.MAX_METADATA_BYTES) before its bytes are
    # asked for: whichever way the file is read from its URL, the 3 MB document is not fetched
    emb = finalfusion.Embeddings(
        finalfusion.NdArray(np.eye(2, dtype=np.float32)), finalfusion.SimpleVocab(["a", "b"]), metadata=finalfusion.Metadata({"x": "y" * 3_000_000})
    )
    emb.write(served.root / "meta.fifu")
    monkeypatch.setattr(finalfusion.limits, "MAX_METADATA_BYTES", 1 << 20)
    with pytest.raises(FormatError, match=r"^Metadata: metadata document is too large: expected at most 1048576 bytes") as local:
        finalfusion.metadata.load_metadata(served.root / "meta.fifu")
    loads = (finalfusion.metadata.load_metadata, finalfusion.load_finalfusion, lambda u: finalfusion.load_finalfusion(u, mmap=True), finalfusion.load)
    for load in loads:
        served.clear()
        with pytest.raises(FormatError) as remote:
            load(served.url("meta.fifu"))
        assert str(remote.value) == str(local.value), load  # the same error, at the same offset
        assert sum(r.sent for r in served.requests() if r.method == "GET") <= BLOCK_SIZE + (128 << 10), load


def test_the_command_line_prints_the_metadata_of_a_url(served: Nginx, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from finalfusion.cli import main

    _with_metadata(served.root / "m.fifu")
    local = served.root / "m.fifu"
    assert main(["metadata", str(local)]) == 0
    want = capsys.readouterr().out
    served.clear()
    assert main(["metadata", served.url("m.fifu")]) == 0
    assert capsys.readouterr().out == want
    assert sum(r.sent for r in served.requests() if r.method == "GET") <= 2 * BLOCK_SIZE  # not the 20 MB file
    assert main(["metadata", served.url("m.fifu"), str(tmp_path / "m.toml")]) == 0
    assert (tmp_path / "m.toml").read_text(encoding="utf-8") == want
    _plain(served.root / "plain.fifu")
    (served.root / "e.txt").write_text("a 1 2\n", encoding="utf-8")
    for name, status, said in (
        ("plain.fifu", 0, "has no metadata"),  # as for a local file: a note on stderr, nothing on stdout
        ("e.txt", 1, "not a finalfusion file (only finalfusion files hold metadata); convert it first"),
        ("nothing.fifu", 1, "no file at this URL"),
    ):
        assert main(["metadata", served.url(name)]) == status, name
        out, err = capsys.readouterr()
        assert out == ""
        assert said in err, (name, err)
        assert err.count("\n") == 1, err


def test_info_of_a_url_reads_what_a_mapped_load_reads(served: Nginx, capsys: pytest.CaptureFixture[str]) -> None:
    # `finalfusion info URL` of a .fifu: the chunk table and the same lines as for the local file, the rows never fetched
    from finalfusion.cli import main

    _with_metadata(served.root / "m.fifu")
    local = served.root / "m.fifu"
    for args in ([], ["--json"]):
        assert main(["info", *args, str(local)]) == 0
        want = capsys.readouterr().out.replace(str(local), "FILE")
        served.clear()
        assert main(["info", *args, served.url("m.fifu")]) == 0
        assert capsys.readouterr().out.replace(served.url("m.fifu"), "FILE") == want
        assert "NdArray" in want
        assert "offset" in want
        assert sum(r.sent for r in served.requests() if r.method == "GET") <= 2 * BLOCK_SIZE  # not the 20 MB matrix
    # other formats at a URL are loaded as before; a broken .fifu is an error naming the URL, exit status 1
    _big_gguf(served.root / "big.gguf")
    assert main(["info", served.url("big.gguf")]) == 0
    assert "format:     gguf" in capsys.readouterr().out
    data = local.read_bytes()
    (served.root / "cut.fifu").write_bytes(data[: len(data) // 2])
    (served.root / "magic.fifu").write_bytes(b"FiFx" + data[4:])
    for name, said in (("cut.fifu", "runs past the end"), ("magic.fifu", "cannot tell the format"), ("nothing.fifu", "no file at this URL")):
        assert main(["info", served.url(name)]) == 1, name
        out, err = capsys.readouterr()
        assert out == ""
        assert served.url(name) in err, err
        assert said in err, (name, err)


def test_a_url_is_never_written(tmp_path: Path) -> None:
    emb = finalfusion.load(SAMPLE)
    for write in (lambda t, e: e.write(t), finalfusion.write_word2vec, finalfusion.write_model2vec):
        with pytest.raises(ValueError, match="a URL is read, never written"):
            write("https://example.org/e.out", emb)
    assert not Path("https:").exists()
    from finalfusion.cli import main

    # the command line: refused as OUT before the input is read, with the one-line reason
    for argv in (["convert"], ["quantize"], ["reconstruct"], ["index", "build"], ["metadata"]):
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            assert main([*argv, str(SAMPLE), "https://example.org/out"]) == 1, argv
        assert err.getvalue() == "finalfusion: error: https://example.org/out: a URL is read, never written (write a local " + (
            "directory and upload it)\n" if argv[0] == "index" else "file and upload it)\n"
        ), argv


def test_a_local_path_never_goes_through_fsspec(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setitem(sys.modules, "fsspec", None)  # import fsspec now fails
    assert finalfusion.load(SAMPLE).vocab.words  # local paths do not need it
    assert not is_url(Path("https://example.org/e.fifu"))
    assert not is_url("file:///tmp/e.fifu")
    with pytest.raises(MissingExtraError, match=r"remote") as info:
        finalfusion.load("https://example.org/e.fifu")
    assert info.value.extra == "remote"


@pytest.mark.parametrize("mode", ["ignore-range", "short", "long", "stall"])
def test_a_server_that_answers_ranges_wrongly_gives_an_error_in_bounded_time(mode: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("finalfusion._remote.TIMEOUT", 2.0)
    monkeypatch.setattr("finalfusion._remote.BLOCK_SIZE", 4096)
    data = SAMPLE.read_bytes()
    start = time.monotonic()
    with hostile(data, mode) as url:
        try:
            emb = finalfusion.load(url)
        except (OSError, FormatError):
            pass  # refused: the right answer for every mode but a whole-file answer fsspec recognises
        else:  # loaded: then exactly the file (never bytes from elsewhere)
            assert mode == "ignore-range"
            np.testing.assert_array_equal(emb.storage.matrix, finalfusion.load(SAMPLE).storage.matrix)
    assert time.monotonic() - start < 60


def test_remote_bytes_are_untrusted_like_local_ones(served: Nginx) -> None:
    # a GGUF header claiming a tensor past the end of the file: the same FormatError as a local file, nothing fetched past it
    data = bytearray((Path(__file__).parent / "data" / "models" / "gguf_plain_q8_0.gguf").read_bytes())
    (served.root / "cut.gguf").write_bytes(bytes(data[: len(data) // 2]))
    with pytest.raises(FormatError) as remote:
        finalfusion.load_gguf(served.url("cut.gguf"))
    with pytest.raises(FormatError) as local:
        finalfusion.load_gguf(served.root / "cut.gguf")
    assert type(remote.value) is type(local.value)
    (served.root / "bad.json.safetensors").write_bytes(struct.pack("<Q", 1 << 40) + json.dumps({}).encode())
    with pytest.raises(FormatError):
        finalfusion.compat.load_safetensors(served.url("bad.json.safetensors"), tokenizer=["a"])


def test_a_remote_file_reads_seeks_and_reads_into_like_a_local_one(served: Nginx) -> None:
    from finalfusion._remote import open_url

    data = SAMPLE.read_bytes()
    (served.root / "sample.fifu").write_bytes(data)
    with open_url(served.url("sample.fifu"), block_size=4096, cache_blocks=2) as f:
        assert (f.readable(), f.seekable(), f.size, f.name) == (True, True, len(data), served.url("sample.fifu"))
        assert f.read(4) == data[:4]
        assert f.seek(-10, 2) == len(data) - 10
        assert f.read() == data[-10:]
        assert f.read(5) == b""
        f.seek(100)
        buf = bytearray(50)
        assert f.readinto(buf) == 50
        assert bytes(buf) == data[100:150]
        assert f.tell() == 150
        f.seek(5, 1)
        assert f.readall() == data[155:]
        assert f.readinto(bytearray(8)) == 0
        with pytest.raises(OSError, match="seek before the start"):
            f.seek(-1)
    assert f.closed


def test_a_scheme_without_its_package_names_it(monkeypatch: pytest.MonkeyPatch) -> None:
    registry = pytest.importorskip("fsspec.registry")
    # s3fs may be installed (the S3 tests use it): it is made missing, and fsspec's cache of loaded protocols forgets s3.
    monkeypatch.setitem(sys.modules, "s3fs", None)
    monkeypatch.delitem(registry._registry, "s3", raising=False)
    with pytest.raises(MissingExtraError, match=r"^reading s3:// URLs needs the s3fs package: pip install s3fs \(fsspec's own package for s3://\)$") as info:
        finalfusion.load("s3://bucket/e.fifu")
    assert info.value.name == "s3fs"


def test_a_large_read_is_one_range_request_of_its_own_bytes(served: Nginx) -> None:
    from finalfusion._remote import DIRECT_BLOCKS, open_url

    data = np.random.default_rng(1).bytes(10 * 4096)
    (served.root / "large.bin").write_bytes(data)
    served.clear()
    with open_url(served.url("large.bin"), block_size=4096, cache_blocks=2) as f:
        f.seek(100)
        assert f.read(DIRECT_BLOCKS * 4096) == data[100 : 100 + DIRECT_BLOCKS * 4096]
        assert f.read(10) == data[100 + DIRECT_BLOCKS * 4096 :][:10]  # a small read after it: a block of the cache
    gets = [r for r in served.requests() if r.method == "GET"]
    assert [(r.range, r.sent) for r in gets[:1]] == [(f"bytes=100-{99 + DIRECT_BLOCKS * 4096}", DIRECT_BLOCKS * 4096)]
    assert len(gets) == 2
    assert gets[1].sent == 4096


# -- answers that are well formed but lie (found by fuzz/fuzz.py's remote-http reader; crashers remote-http-crash-*) -----


def _matrix_file() -> tuple[bytes, np.ndarray]:
    """A plain .fifu of 200 x 64 rows (51 KB): a range answered from 4 bytes further on is a valid file of other vectors."""
    rows = np.random.default_rng(1).standard_normal((200, 64)).astype(np.float32)
    buf = io.BytesIO()
    finalfusion.Embeddings(finalfusion.NdArray(rows), finalfusion.SimpleVocab([f"w{i}" for i in range(200)])).write(buf)
    return buf.getvalue(), rows


@pytest.fixture
def small_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("finalfusion._remote.BLOCK_SIZE", 4096)
    monkeypatch.setattr("finalfusion._remote.TIMEOUT", 5.0)


@pytest.mark.parametrize(
    ("mode", "message"),
    [
        # fsspec took any 206 for the range it asked: the load gave vectors shifted by one float, without an error.
        ("other-range", r"asked for bytes (\d+)-\d+ of a file of {size} bytes, the server answered Content-Range 'bytes (?!\1-)\d+-\d+/{size}'"),
        # fsspec believed the HEAD's Content-Length: a file 4 bytes short, read as truncated (a FormatError for a good file).
        ("head-size", r"asked for bytes 0-4095 of a file of {short} bytes, the server answered Content-Range 'bytes 0-4095/{size}'"),
    ],
)
def test_an_answer_for_another_range_or_size_is_refused_not_read(small_blocks: None, mode: str, message: str) -> None:
    data, _ = _matrix_file()
    with lying(data, mode) as url, pytest.raises(OSError, match=message.format(size=len(data), short=len(data) - 4)):
        finalfusion.load_finalfusion(url)


def test_a_server_that_contradicted_itself_is_not_asked_again(small_blocks: None) -> None:
    # found by the fuzzer (fuzz/crashers/remote-http-crash-2261920d35db.bin): the first range answer gave the true size
    # against the HEAD's and was refused, but the format sniffer took that OSError for "not seekable" and read again
    # (_source.peek); the second answer agreed with the HEAD's lie, and a good file was read as truncated (a FormatError)
    data, _ = _matrix_file()
    with (
        lying(data, "head-size-agreed") as url,
        pytest.raises(OSError, match=rf"a file of {len(data) - 4} bytes, the server answered Content-Range 'bytes 0-4095/{len(data)}'"),
    ):
        finalfusion.load(url)


def test_a_server_that_trickles_fails_the_read(small_blocks: None, monkeypatch: pytest.MonkeyPatch) -> None:
    # a byte every 50 ms never trips the read timeout (the wait between two reads): each range answer must also end
    # within TIMEOUT + bytes / MIN_RATE; here 1 s + 4096 / 65536 s, tried three times, where the server would take 20 s
    monkeypatch.setattr("finalfusion._remote.TIMEOUT", 1.0)
    monkeypatch.setattr("finalfusion._remote.MIN_RATE", 64 << 10)
    data = _matrix_file()[0]
    with lying(data, "trickle") as url, pytest.raises(OSError, match=r"reading \d+ bytes at 0 failed 3 times"):
        finalfusion.load_finalfusion(url)


@pytest.mark.parametrize("etag", [True, False])
def test_a_file_that_changes_while_it_is_read_is_refused(small_blocks: None, etag: bool) -> None:
    data = _matrix_file()[0]
    later = bytearray(data)
    later[-1000:] = bytes(1000)  # other rows, the same size: only a validator tells
    if not etag:
        later += b"\0" * 8  # another size: the Content-Range tells
    with (
        lying(data, "changed", later=bytes(later), etag=etag) as url,
        pytest.raises(OSError, match="changed at the server" if etag else "the server answered Content-Range"),
    ):
        finalfusion.load_finalfusion(url)


def test_an_honest_server_of_the_same_kind_reads(small_blocks: None) -> None:
    # the checks refuse lies only: the same server answering honestly, with an ETag on every answer, gives the file
    data, rows = _matrix_file()
    with lying(data, "honest", etag=True) as url:
        np.testing.assert_array_equal(finalfusion.load_finalfusion(url).storage.matrix, rows)
