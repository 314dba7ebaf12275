"""Model formats (GGUF, safetensors, LightSeq, SentencePiece) from inputs of unknown size read only what they declare.

Issue 13, class 3, for the model readers: gzip data (bytes, path, file
object, over a pipe), pipes, FIFOs and file objects without a descriptor may
never end, so they are never read whole. Each case puts an endless tail (a
filler byte, 3 GiB of it) at one place of a real file -- in the fixed header,
in the metadata or tensor table, in the tensor data, after the data -- and
loads it through every kind of such input in a forked child with 300 MiB of
extra address space (``tests/_bounded.py``): the load must end in a
:class:`~finalfusion.FinalfusionError`, or, for a GGUF tail after the data
(which a GGUF reader ignores, as it does in a file), in the right
embeddings. Complete and cut streams must read as the same bytes do, and a
gzip input is decompressed, never mapped (the descriptor a ``GzipFile``
reports is the compressed file's).

The files are the committed fixtures of ``tests/data/models`` (written by
gguf-py's GGUFWriter, the safetensors and LightSeq generators and
sentencepiece; see the READMEs there).
"""

from __future__ import annotations

import gzip
import io
import json
import os
import random
import struct
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from _bounded import bounded
from _streams import ENDLESS, Endless, endless_gzip, fifo_writer, member
from finalfusion import Embeddings, FinalfusionError, FormatError
from finalfusion._source import read_whole
from finalfusion.compat import load, load_gguf, load_lightseq, load_safetensors, load_sentencepiece
from finalfusion.compat.gguf import read_gguf

DATA = Path(__file__).resolve().parent / "data" / "models"
#: Bytes an endless tail delivers (far beyond the address-space limit).
EXTRA_MB = 300
FILLERS = {"a": b"a", "ff": b"\xff", "00": b"\x00"}


# -- the files and where their tails start ------------------------------------------------------


def gguf_cuts(data: bytes) -> dict[str, int]:
    head = read_gguf(data)
    table = data.rfind(b"token_embd.weight", 0, head.data_start) - 8  # the tensor table's first entry (its name's length)
    info = head.tensors["token_embd.weight"]
    return {"header": 12, "kv": (24 + table) // 2, "table": table + 12, "data": info.offset + info.n_bytes // 2, "after": info.offset + info.n_bytes}


def safetensors_cuts(data: bytes) -> dict[str, int]:
    (n,) = struct.unpack_from("<Q", data)
    return {"header": 4, "kv": 8 + n // 2, "data": 8 + n + (len(data) - 8 - n) // 2, "after": len(data)}


def protobuf_cuts(data: bytes) -> dict[str, int]:
    return {"header": 1, "data": len(data) // 2, "after": len(data)}


SAFETENSORS_TOKENS: list[str] = json.loads((DATA / "safetensors_expected.json").read_text(encoding="utf-8"))["tokens"]
LIGHTSEQ_VOCAB = json.loads((DATA / "lightseq_expected.json").read_text(encoding="utf-8"))["lightseq_transformer.pb"]["vocab"]


def _lightseq_vocab() -> Any:
    return str(DATA / LIGHTSEQ_VOCAB) if isinstance(LIGHTSEQ_VOCAB, str) else LIGHTSEQ_VOCAB


#: format -> (fixture, cut points, loader of any input)
FORMATS: dict[str, tuple[str, Callable[[bytes], dict[str, int]], Callable[[Any], Embeddings]]] = {
    "gguf": ("gguf_llama_f16.gguf", gguf_cuts, lambda src: load_gguf(src)),
    "gguf-q8": ("gguf_plain_q8_0.gguf", gguf_cuts, lambda src: load_gguf(src)),
    "safetensors": ("safetensors_tiny.safetensors", safetensors_cuts, lambda src: load_safetensors(src, tokenizer=SAFETENSORS_TOKENS)),
    "lightseq": ("lightseq_transformer.pb", protobuf_cuts, lambda src: load_lightseq(src, _lightseq_vocab())),
    "sentencepiece": ("sentencepiece_bpemb.model", protobuf_cuts, lambda src: load_sentencepiece(src, DATA / "sentencepiece_bpemb.vec")),
}


def fixture(fmt: str) -> bytes:
    return (DATA / FORMATS[fmt][0]).read_bytes()


# -- inputs of unknown size ------------------------------------------------------------------------


def feed(w: int, chunks: Callable[[], Any]) -> None:
    def run() -> None:
        try:
            with open(w, "wb") as out:
                for part in chunks():
                    out.write(part)
        except (BrokenPipeError, ValueError, OSError):
            pass

    threading.Thread(target=run, daemon=True).start()


def plain_chunks(prefix: bytes, filler: bytes) -> Callable[[], Any]:
    def gen() -> Any:
        yield prefix
        block = filler * (1 << 16)
        for _ in range(ENDLESS >> 16):
            yield block

    return gen


def via_pipe(load_fn: Callable[[Any], Any], prefix: bytes, filler: bytes, tmp: Path) -> Any:
    r, w = os.pipe()
    feed(w, plain_chunks(prefix, filler))
    with open(r, "rb") as f:
        return load_fn(f)


def via_fifo(load_fn: Callable[[Any], Any], prefix: bytes, filler: bytes, tmp: Path) -> Any:
    fifo = tmp / "stream.model"
    fifo_writer(fifo, lambda fd: feed(fd, plain_chunks(prefix, filler)))
    return load_fn(fifo)


def via_no_fileno(load_fn: Callable[[Any], Any], prefix: bytes, filler: bytes, tmp: Path) -> Any:
    return load_fn(io.BufferedReader(Endless(prefix, filler)))


def via_gzip_bytes(load_fn: Callable[[Any], Any], prefix: bytes, filler: bytes, tmp: Path) -> Any:
    return load_fn(endless_gzip(prefix, filler))


def via_gzip_path(load_fn: Callable[[Any], Any], prefix: bytes, filler: bytes, tmp: Path) -> Any:
    path = tmp / "stream.model.gz"
    path.write_bytes(endless_gzip(prefix, filler))
    return load_fn(path)


def via_gzip_open_file(load_fn: Callable[[Any], Any], prefix: bytes, filler: bytes, tmp: Path) -> Any:
    # A plain file object of a gzip file: its descriptor is the compressed file's, never to be mapped.
    path = tmp / "stream.model.gz"
    path.write_bytes(endless_gzip(prefix, filler))
    with open(path, "rb") as f:
        return load_fn(f)


def via_gzip_file_object(load_fn: Callable[[Any], Any], prefix: bytes, filler: bytes, tmp: Path) -> Any:
    return load_fn(io.BytesIO(endless_gzip(prefix, filler)))


def via_gzip_pipe(load_fn: Callable[[Any], Any], prefix: bytes, filler: bytes, tmp: Path) -> Any:
    r, w = os.pipe()
    small = gzip.compress(filler * (1 << 20), compresslevel=9, mtime=0)

    def gen() -> Any:
        yield gzip.compress(prefix, mtime=0)
        for _ in range(ENDLESS >> 20):
            yield small

    feed(w, gen)
    with open(r, "rb") as f:
        return load_fn(f)


INPUTS: dict[str, Callable[[Callable[[Any], Any], bytes, bytes, Path], Any]] = {
    "pipe": via_pipe,
    "fifo": via_fifo,
    "no-fileno": via_no_fileno,
    "gzip-bytes": via_gzip_bytes,
    "gzip-path": via_gzip_path,
    "gzip-open-file": via_gzip_open_file,
    "gzip-file-object": via_gzip_file_object,
    "gzip-pipe": via_gzip_pipe,
}


def outcome_in_child(fn: Callable[[], Any], expected: Embeddings | None = None) -> str:
    """``fn()`` under the address-space limit: the name of the FinalfusionError it raised, or ``"ok"`` (``"wrong"`` if not ``expected``)."""

    def run() -> str:
        try:
            got = fn()
        except FinalfusionError as exc:
            return type(exc).__name__
        if expected is not None and not (got.vocab.words == expected.vocab.words and np.array_equal(got.storage.matrix, expected.storage.matrix)):
            return "wrong"
        return "ok"

    return str(bounded(run, extra_mb=EXTRA_MB))


def _cases() -> list[Any]:
    out = []
    for fmt, (_, cuts, _) in FORMATS.items():
        for where in cuts(fixture(fmt)):
            out.append(pytest.param(fmt, where, id=f"{fmt}-{where}"))
    return out


class TestEndlessTail:
    """An endless tail at every kind of place, through every input of unknown size, ends within the address-space limit."""

    @pytest.mark.parametrize("filler", sorted(FILLERS))
    @pytest.mark.parametrize("kind", sorted(INPUTS))
    @pytest.mark.parametrize(("fmt", "where"), _cases())
    def test_bounded(self, fmt: str, where: str, kind: str, filler: str, tmp_path: Path) -> None:
        _, cuts, load_fn = FORMATS[fmt]
        data = fixture(fmt)
        prefix = data[: cuts(data)[where]]
        member(FILLERS[filler])
        expected = load_fn(data) if where == "after" and fmt.startswith("gguf") else None
        got = outcome_in_child(lambda: INPUTS[kind](load_fn, prefix, FILLERS[filler], tmp_path), expected)
        if expected is not None:
            # GGUF: nothing after the tensor data is read (a file may end with padding; a file's tail is ignored too).
            assert got == "ok", got
        elif fmt.startswith("gguf") and where == "data":
            # The filler completes the declared tensor data (zeros and 0x6161 are finite values; 0xffff is NaN): a valid file, read no further.
            assert got in {"ok", "FormatError"}, got
        else:
            assert got in {"FormatError", "Truncated", "BadMagic", "UnsupportedVersion"}, got


# -- complete and cut streams read as their bytes --------------------------------------------------


def outcome(load_fn: Callable[[Any], Embeddings], src: Any) -> Any:
    try:
        return load_fn(src)
    except FinalfusionError as exc:
        return type(exc).__name__


def _meta(emb: Embeddings) -> Any:
    """The metadata without the input's name (``<bytes>``, a path, a file object's name)."""
    assert emb.metadata is not None
    return {table: {k: v for k, v in values.items() if k != "file"} for table, values in emb.metadata.items()}


def same(a: Any, b: Any) -> bool:
    if isinstance(a, Embeddings) and isinstance(b, Embeddings):
        return a.vocab.words == b.vocab.words and np.array_equal(a.storage.matrix, b.storage.matrix) and _meta(a) == _meta(b)
    return bool(a == b)


class TestSameAsBytes:
    @pytest.mark.parametrize("fmt", sorted(FORMATS))
    def test_complete_streams(self, fmt: str, tmp_path: Path) -> None:
        _, _, load_fn = FORMATS[fmt]
        data = fixture(fmt)
        expected = load_fn(data)
        gz = tmp_path / "model.gz"
        gz.write_bytes(gzip.compress(data))
        r, w = os.pipe()
        with open(w, "wb") as out:  # small: fits in the pipe's buffer
            out.write(data)
        with open(r, "rb") as f:
            from_pipe = load_fn(f)
        with open(gz, "rb") as f:
            from_open_gzip = load_fn(f)
        for got in (
            from_pipe,
            from_open_gzip,
            load_fn(gzip.compress(data)),
            load_fn(gz),
            load_fn(io.BytesIO(gzip.compress(data))),
            load_fn(io.BufferedReader(Endless(data, b""))),
        ):
            assert same(got, expected)

    @pytest.mark.parametrize("fmt", ["gguf-q8", "safetensors", "lightseq"])
    def test_every_prefix_fails_as_the_bytes_do(self, fmt: str) -> None:
        _, _, load_fn = FORMATS[fmt]
        data = fixture(fmt)
        for n in range(len(data) + 1):
            want = outcome(load_fn, data[:n])
            for src in (io.BufferedReader(Endless(data[:n], b"")), gzip.compress(data[:n])):
                got = outcome(load_fn, src)
                assert same(got, want), (n, got, want)

    def test_gguf_trailing_bytes_are_ignored_as_in_a_file(self) -> None:
        data = fixture("gguf-q8")
        expected = load_gguf(data)
        for tail in (b"\x00", b"junk" * 100):
            assert same(load_gguf(data + tail), expected)
            assert same(load_gguf(io.BufferedReader(Endless(data + tail, b""))), expected)

    def test_safetensors_trailing_bytes_are_refused_as_in_a_file(self) -> None:
        data = fixture("safetensors") + b"\x00"
        load_fn = FORMATS["safetensors"][2]
        for src in (data, io.BufferedReader(Endless(data, b"")), gzip.compress(data)):
            with pytest.raises(FormatError, match="bytes after the last tensor"):
                load_fn(src)


# -- gzip is decompressed, never mapped; claims beyond what gzip can hold -------------------------------


def test_a_gzip_file_object_is_decompressed_not_mapped(tmp_path: Path) -> None:
    path = tmp_path / "model.gguf.gz"
    data = fixture("gguf-q8")
    path.write_bytes(gzip.compress(data))
    with open(path, "rb") as raw, gzip.GzipFile(fileobj=raw) as f:
        got = read_whole(f, mmap=True)  # the GzipFile's fileno() is the compressed file's
    assert bytes(got) == data
    expected = load_gguf(data)
    assert same(load(path), expected)  # was BadMagic: the compressed file was mapped
    with open(path, "rb") as raw, gzip.GzipFile(fileobj=raw) as f:
        assert same(load_gguf(f), expected)


@pytest.mark.parametrize("fmt", ["gguf-q8", "safetensors"])
def test_a_claim_beyond_what_gzip_can_hold_is_refused_before_reading(fmt: str) -> None:
    data = bytearray(fixture(fmt))
    if fmt == "safetensors":
        (n,) = struct.unpack_from("<Q", data)
        header = json.loads(data[8 : 8 + n])
        last = max((e for e in header.values() if isinstance(e, dict) and "shape" in e), key=lambda e: e["data_offsets"][0])
        last["shape"][0] *= 1 << 30
        last["data_offsets"][1] = last["data_offsets"][0] + (last["data_offsets"][1] - last["data_offsets"][0]) * (1 << 30)
        text = json.dumps(header).encode()
        data = bytearray(struct.pack("<Q", len(text)) + text + data[8 + n :])
    else:
        head = read_gguf(bytes(data))
        at = data.rfind(b"token_embd.weight", 0, head.data_start) + len(b"token_embd.weight") + 4
        struct.pack_into("<Q", data, at + 8, 1 << 26)  # ne[1]: 2^26 rows of 34 bytes, past the 1032:1 that deflate can expand to
    load_fn = FORMATS[fmt][2]
    with pytest.raises(FormatError):  # the file's size refuses it too
        load_fn(bytes(data))
    # A few hundred bytes of gzip cannot hold terabytes: refused at the header, nothing read.
    assert outcome_in_child(lambda: load_fn(gzip.compress(bytes(data)))) == "Truncated"


def test_gguf_header_cap_is_read_at_call_time(monkeypatch: pytest.MonkeyPatch) -> None:
    import finalfusion.limits

    data = fixture("gguf")
    monkeypatch.setattr(finalfusion.limits, "MAX_MODEL_HEADER_BYTES", 1000)
    with pytest.raises(FormatError, match="MAX_MODEL_HEADER_BYTES"):
        load_gguf(gzip.compress(data))
    assert isinstance(load_gguf(data), Embeddings)  # a file of known size is bounded by its size
    monkeypatch.setattr(finalfusion.limits, "MAX_MODEL_HEADER_BYTES", 1 << 26)
    assert isinstance(load_gguf(gzip.compress(data)), Embeddings)


def test_sentencepiece_stream_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    import finalfusion.limits

    data = fixture("sentencepiece")
    monkeypatch.setattr(finalfusion.limits, "MAX_MODEL_HEADER_BYTES", len(data) - 1)
    load_fn = FORMATS["sentencepiece"][2]
    with pytest.raises(FormatError, match="MAX_MODEL_HEADER_BYTES"):
        load_fn(gzip.compress(data))
    monkeypatch.setattr(finalfusion.limits, "MAX_MODEL_HEADER_BYTES", len(data))
    assert isinstance(load_fn(gzip.compress(data)), Embeddings)


def test_hdf5_needs_a_file_it_can_seek_in() -> None:
    pytest.importorskip("h5py")
    data = (DATA / "lightseq_bert.hdf5").read_bytes()
    vocab = json.loads((DATA / "lightseq_expected.json").read_text(encoding="utf-8"))["lightseq_bert.hdf5"]["vocab"]
    vocab = str(DATA / vocab) if isinstance(vocab, str) else vocab
    expected = load_lightseq(data, vocab)
    assert same(load_lightseq(io.BytesIO(data), vocab), expected)  # known size: read
    for src in (gzip.compress(data), io.BufferedReader(Endless(data, b""))):
        with pytest.raises(FormatError, match="h5py needs a file it can seek in"):
            load_lightseq(src, vocab)


def test_lightseq_stream_refuses_endless_small_fields() -> None:
    # 0x61 = field 12, fixed64: 9 bytes a field; a stream of them ends at the field limit, not at the end of memory.
    data = fixture("lightseq")
    load_fn = FORMATS["lightseq"][2]
    assert outcome_in_child(lambda: load_fn(io.BufferedReader(Endless(data, b"a")))) == "FormatError"


def test_fuzz_endless_gzip_load_cases_reach_the_gguf_parser() -> None:
    """tests/test_fuzz.py::test_endless_gzip_inputs_stay_bounded[load-0/1] pick GGUF seeds: they used to pass by BadMagic (the compressed file was mapped)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fuzz"))
    import fuzz

    for k in range(2):
        rng = random.Random(f"load-{k}")
        seeds = [s for s in fuzz.seed_inputs("load") if not (s.startswith(b"FiFu") or (s.startswith(b"\x1f\x8b") and gzip.decompress(s)[:4] == b"FiFu"))]
        seed = rng.choice(seeds)
        if not seed.startswith(b"GGUF"):
            pytest.skip("the fuzz seeds changed: these cases no longer pick GGUF")
        data = fuzz.endless_gzip(seed, rng)
        with fuzz.address_space_limit(1024):
            out = fuzz.run_one(fuzz.READERS["load"], data)
        assert out["status"] in ("ok", "error"), out
        assert out.get("type") != "BadMagic", out
