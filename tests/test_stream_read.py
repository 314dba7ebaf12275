"""finalfusion input of unknown size (gzip, pipes, FIFOs, file objects without a descriptor) is parsed chunk by chunk (container._read_stream).

Issue 13, class 3: such a stream may never end, so it is never read whole
first. Each case below puts an endless tail at one place of a real file --
right after the header, inside a chunk, after the last chunk -- and feeds it
through every kind of input that has no known size; the load must end in a
:class:`~finalfusion.FinalfusionError` within a few hundred MB of address
space (a forked child, ``tests/_bounded.py``). Complete and cut streams must
read exactly as the same bytes do.
"""

from __future__ import annotations

import gzip
import io
import os
import threading
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import finalfusion
from _bounded import bounded
from _streams import ENDLESS, Endless, endless_gzip, fifo_writer, member
from conftest import GOLDEN_FILES, TINY_FILES
from finalfusion import Embeddings, FinalfusionError, Metadata, NdArray, Norms, SimpleVocab, load_finalfusion
from finalfusion.compat import load
from finalfusion.container import read_chunks
from finalfusion.errors import ChunkOrder, Truncated
from test_roundtrip import assert_same_chunks

#: Bytes an endless tail delivers before the test gives up on the reader (far beyond the address-space limit).
EXTRA_MB = 300


def seed() -> bytes:
    rng = np.random.default_rng(13)
    emb = Embeddings(
        NdArray(rng.standard_normal((50, 16), dtype=np.float32)),
        SimpleVocab([f"w{i}" for i in range(50)]),
        Norms(rng.random(50, dtype=np.float32) + 1),
        Metadata({"note": "stream"}),
    )
    out = io.BytesIO()
    emb.write(out)
    return out.getvalue()


def cut_points(data: bytes) -> dict[str, int]:
    """Where an endless tail starts: after the header, inside the vocabulary and the matrix, after the last chunk."""
    header, chunks = read_chunks(data)
    (vocab_at, _), (storage_at, _) = chunks[1], chunks[2]
    return {"after-header": header.nbytes, "in-vocab": vocab_at + 30, "in-matrix": storage_at + 200, "after-last-chunk": len(data)}


def feed_pipe(w: int, prefix: bytes, filler: bytes) -> threading.Thread:
    """Write ``prefix`` then ``filler`` to the descriptor ``w`` until the reader goes away."""

    def run() -> None:
        try:
            with open(w, "wb") as out:
                out.write(prefix)
                block = filler * (1 << 16)
                for _ in range(ENDLESS >> 16):
                    out.write(block)
        except (BrokenPipeError, ValueError, OSError):
            pass

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def via_pipe_fd(prefix: bytes, filler: bytes, tmp: Path) -> Any:
    r, w = os.pipe()
    feed_pipe(w, prefix, filler)
    with open(r, "rb") as f:
        return load_finalfusion(f)


def via_fifo(prefix: bytes, filler: bytes, tmp: Path, mmap: bool = False) -> Any:
    fifo = tmp / "stream.fifu"
    fifo_writer(fifo, lambda fd: feed_pipe(fd, prefix, filler).join())
    return load_finalfusion(fifo, mmap=mmap)


def via_no_fileno(prefix: bytes, filler: bytes, tmp: Path) -> Any:
    return load_finalfusion(io.BufferedReader(Endless(prefix, filler)))


def via_gzip_bytes(prefix: bytes, filler: bytes, tmp: Path) -> Any:
    return load(endless_gzip(prefix, filler))


def via_gzip_path(prefix: bytes, filler: bytes, tmp: Path) -> Any:
    path = tmp / "stream.fifu.gz"
    path.write_bytes(endless_gzip(prefix, filler))
    return load(path)


def via_gzip_file_object(prefix: bytes, filler: bytes, tmp: Path) -> Any:
    return load(io.BytesIO(endless_gzip(prefix, filler)))


def via_gzip_file_object_of_unknown_size(prefix: bytes, filler: bytes, tmp: Path) -> Any:
    # A gzip stream over a pipe: neither the compressed nor the decompressed size is known.
    r, w = os.pipe()
    member = gzip.compress(filler * (1 << 20), compresslevel=9, mtime=0)

    def run() -> None:
        try:
            with open(w, "wb") as out:
                out.write(gzip.compress(prefix, mtime=0))
                for _ in range(ENDLESS >> 20):
                    out.write(member)
        except (BrokenPipeError, ValueError, OSError):
            pass

    threading.Thread(target=run, daemon=True).start()
    with open(r, "rb") as f:
        return load(f)


INPUTS: dict[str, Callable[[bytes, bytes, Path], Any]] = {
    "pipe": via_pipe_fd,
    "fifo": via_fifo,
    "fifo-mmap": lambda p, f, t: via_fifo(p, f, t, mmap=True),
    "no-fileno": via_no_fileno,
    "gzip-bytes": via_gzip_bytes,
    "gzip-path": via_gzip_path,
    "gzip-file-object": via_gzip_file_object,
    "gzip-pipe": via_gzip_file_object_of_unknown_size,
}


def outcome_in_child(fn: Callable[[], Any]) -> str:
    """Run ``fn`` under the address-space limit; the name of the FinalfusionError it raised, or ``"ok"``."""

    def run() -> str:
        try:
            fn()
        except FinalfusionError as exc:
            return type(exc).__name__
        return "ok"

    return str(bounded(run, extra_mb=EXTRA_MB))


@pytest.mark.parametrize("filler", [b"a", b"\xff", b"\x00"], ids=["a", "ff", "00"])
@pytest.mark.parametrize("where", ["after-header", "in-vocab", "in-matrix", "after-last-chunk"])
@pytest.mark.parametrize("kind", sorted(INPUTS))
def test_endless_tail_stays_bounded(kind: str, where: str, filler: bytes, tmp_path: Path) -> None:
    data = seed()
    prefix = data[: cut_points(data)[where]]
    member(filler)  # compressed here, not in the child
    got = outcome_in_child(lambda: INPUTS[kind](prefix, filler, tmp_path))
    # Never "ok": the tail is never a valid continuation (the zero filler after the last chunk is a frame with id 0).
    assert got in {"ChunkOrder", "UnknownChunk", "Truncated", "FormatError"}, got


@pytest.mark.parametrize("kind", ["gzip-bytes", "gzip-path", "gzip-file-object"])
def test_claim_beyond_what_gzip_can_hold_is_refused_at_the_frame(kind: str, tmp_path: Path) -> None:
    # The tail starts inside the vocabulary's length field: it claims ~2^64 bytes, far more than
    # a few MB of deflate data can expand to (1032:1), so it is refused before anything is read.
    data = seed()
    at = read_chunks(data)[1][1][0] + 6
    member(b"\xff")
    assert outcome_in_child(lambda: INPUTS[kind](data[:at], b"\xff", tmp_path)) == "Truncated"


def stream_outcome(data: bytes) -> Any:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", finalfusion.LegacyFormatWarning)
            return load_finalfusion(io.BufferedReader(Endless(data, b"")))
    except FinalfusionError as exc:
        return (type(exc).__name__, str(exc))


def bytes_outcome(data: bytes) -> Any:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", finalfusion.LegacyFormatWarning)
            return load_finalfusion(data)
    except FinalfusionError as exc:
        return (type(exc).__name__, str(exc))


@pytest.mark.parametrize("name", TINY_FILES)
def test_every_prefix_of_a_stream_fails_as_the_bytes_do(name: str) -> None:
    data = (GOLDEN_FILES / name).read_bytes()
    for n in range(len(data) + 1):
        got, expected = stream_outcome(data[:n]), bytes_outcome(data[:n])
        if isinstance(expected, Embeddings):
            assert isinstance(got, Embeddings), (n, got)
            assert_same_chunks(got, expected)
        else:
            assert got[0] == expected[0], (n, got, expected)


@pytest.mark.parametrize("tail", [b"\x00", b"\x00" * 11, b"\x06\x00\x00\x00" + bytes(8), b"\x02\x00\x00\x00" + bytes(8), b"junk" * 10])
def test_trailing_data_is_refused_as_in_a_file(tail: str) -> None:
    data = seed() + tail
    got, expected = stream_outcome(data), bytes_outcome(data)
    assert isinstance(expected, tuple)
    assert got[0] == expected[0], (got, expected)


def test_complete_streams_read_as_the_bytes(tmp_path: Path) -> None:
    data = seed()
    expected = load_finalfusion(data)
    (tmp_path / "f.fifu.gz").write_bytes(gzip.compress(data))
    r, w = os.pipe()
    with open(w, "wb") as out:  # small: fits in the pipe's buffer
        out.write(data)
    with open(r, "rb") as f:
        from_pipe = load_finalfusion(f)
    for got in (
        stream_outcome(data),
        load(gzip.compress(data)),
        load(tmp_path / "f.fifu.gz"),
        load(io.BytesIO(gzip.compress(data))),
        from_pipe,
    ):
        assert isinstance(got, Embeddings)
        assert_same_chunks(got, expected)
        assert got.metadata == expected.metadata
        got.storage.matrix[0, 0] = 1.0  # writable, as eager arrays always were


def test_stream_with_mmap_gives_read_only_arrays() -> None:
    data = seed()
    got = load_finalfusion(io.BufferedReader(Endless(data, b"")), mmap=True)
    assert not got.storage.matrix.flags.writeable
    assert_same_chunks(got, load_finalfusion(data))


def test_padding_follows_the_absolute_offset() -> None:
    # Metadata of every length mod 4 puts the matrix at every alignment: the per-chunk buffers must pad as the file does.
    for k in range(4):
        emb = Embeddings(NdArray(np.eye(3, dtype=np.float32)), SimpleVocab(["a", "b", "c"]), metadata=Metadata({"n": "x" * k}))
        out = io.BytesIO()
        emb.write(out)
        got = stream_outcome(out.getvalue())
        assert isinstance(got, Embeddings)
        assert_same_chunks(got, emb)


def test_error_offsets_are_the_files() -> None:
    data = bytearray(seed())
    storage_at = read_chunks(bytes(data))[1][2][0]
    data[storage_at + 12 + 8] = 0xFF  # the NdArray's column count: absurd
    got, expected = stream_outcome(bytes(data)), bytes_outcome(bytes(data))
    assert got == expected


def repeated_vocab_file(copies: int) -> bytes:
    """A header listing a vocabulary and a matrix, then the same vocabulary chunk ``copies`` times (issue 13, minor item)."""
    out = io.BytesIO()
    Embeddings(NdArray(np.eye(1, dtype=np.float32)), SimpleVocab(["a"])).write(out)
    data = out.getvalue()
    header, chunks = read_chunks(data)
    vocab = data[chunks[0][0] : chunks[1][0]]
    return data[: header.nbytes] + vocab * copies


@pytest.fixture
def vocab_parses(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    seen: list[int] = []
    original = SimpleVocab.read_payload.__func__  # type: ignore[attr-defined]

    def counting(cls: type[SimpleVocab], reader: Any) -> SimpleVocab:
        seen.append(reader.pos)
        return original(cls, reader)  # type: ignore[no-any-return]

    monkeypatch.setattr(SimpleVocab, "read_payload", classmethod(counting))
    return seen


@pytest.mark.parametrize("kind", ["bytes", "path", "lazy-path", "stream", "gzip"])
def test_repeated_chunks_fail_at_the_second_frame(kind: str, vocab_parses: list[int], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = repeated_vocab_file(40_000)
    assert len(data) < 1 << 20
    vocab_parses.clear()  # building the file parsed one
    path = tmp_path / "repeated.fifu"
    path.write_bytes(data)
    if kind == "lazy-path":
        monkeypatch.setattr(finalfusion._source, "MIN_SIZE", 1)
    source: Any = {
        "bytes": data,
        "path": path,
        "lazy-path": path,
        "stream": io.BufferedReader(Endless(data, b"")),
        "gzip": io.BytesIO(gzip.compress(data)),
    }[kind]
    with pytest.raises(ChunkOrder) as err:
        load(source) if kind == "gzip" else load_finalfusion(source)
    assert len(vocab_parses) == 1  # the first copy only: the second is refused at its frame
    assert err.value.offset == 20 + 25  # the second copy's frame (header 20 bytes, one chunk 25)
    assert err.value.found == ["SimpleVocab", "SimpleVocab"]


def test_stream_cut_inside_a_declared_length_is_truncated() -> None:
    data = seed()
    with pytest.raises(Truncated, match="declared chunk length runs past the end"):
        load_finalfusion(io.BufferedReader(Endless(data[:-5], b"")))


def test_a_gzip_claim_past_the_expansion_limit_is_refused_before_it_is_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The fuzz campaign's findings (a 1.5 MB and a 1 MiB gzip whose chunk claimed ~2 GB): deflate's 1032:1 let the reader
    decompress and hold 1.6 GB (40 s, or MemoryError under 1 GiB of address space) before the claim proved false. A claim past
    limits.MAX_GZIP_EXPANSION times the compressed bytes is refused at the frame; a real file that compresses better loads
    once the limit is raised."""
    from finalfusion import limits

    rows = 120_000  # 144 MB of zeros: about 1000:1, the one kind of real file past the limit
    emb = Embeddings(NdArray(np.zeros((rows, 300), dtype=np.float32)), SimpleVocab([f"w{i}" for i in range(rows)]), norms=None)
    plain = tmp_path / "zeros.fifu"
    emb.write(plain)
    packed = gzip.compress(plain.read_bytes(), compresslevel=6, mtime=0)
    # the matrix chunk (144 MB) is past 100 x (its ~140 KB of deflate data + the reader's 1 MiB buffer allowance)
    with pytest.raises(Truncated, match="MAX_GZIP_EXPANSION"):
        load(packed)
    monkeypatch.setattr(limits, "MAX_GZIP_EXPANSION", 1032)
    back = load(packed)
    assert back.storage.shape == (rows, 300)
    assert not back.storage.matrix.any()
    # The campaign's shape: a finalfusion chunk claiming 2 GB in a 1.5 MB gzip (deflate could hold 2.6 GB of it).
    monkeypatch.setattr(limits, "MAX_GZIP_EXPANSION", 100)
    data = seed()
    at = read_chunks(data)[1][1][0]
    claim = bytearray(data[: at + 12])
    claim[at + 4 : at + 12] = (2_000_000_000).to_bytes(8, "little")
    tail = np.random.default_rng(5).integers(0, 256, 1_500_000, dtype=np.uint8).tobytes()  # incompressible: 1.5 MB compressed
    with pytest.raises(Truncated, match="MAX_GZIP_EXPANSION"):
        load(gzip.compress(bytes(claim) + tail, mtime=0))
