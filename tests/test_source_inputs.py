"""The one input rule (_source): which inputs are paths, the one rule for sibling files, text-mode objects refused, bytes paths, empty mapped files.

The stream side of the cursor (_stream.StreamReader) is tested here too; every model reader on every kind of input: test_source_model_readers.py.
"""

from __future__ import annotations

import errno
import io
import os
import re
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import finalfusion
from _streams import Trickle
from finalfusion import Embeddings, FormatError, NdArray, SimpleVocab, load_finalfusion
from finalfusion._source import is_bytes_path, local_path, path_of, peek, read_into, sibling
from finalfusion._stream import StreamReader, read_exactly
from finalfusion.errors import Truncated


@pytest.mark.parametrize("loader", ["load_finalfusion", "load_word2vec", "load_text", "load_text_dims", "load_fasttext", "load"])
def test_text_mode_file_objects_are_refused(loader: str) -> None:
    with pytest.raises(TypeError, match="the file object must be opened in binary mode"):
        getattr(finalfusion, loader)(io.StringIO("FiFu and more text than a header"))


def test_text_mode_file_object_refused_when_reporting_progress() -> None:
    with pytest.raises(TypeError, match="the file object must be opened in binary mode"):
        finalfusion.load_text(io.StringIO("a 1 2\n"), progress=lambda *args: None)


def test_a_bytes_path_is_read_as_a_path(tmp_path: Path) -> None:
    path = tmp_path / "e.fifu"
    Embeddings(NdArray(np.eye(2, dtype=np.float32)), SimpleVocab(["a", "b"])).write(path)
    emb = load_finalfusion(os.fsencode(path))
    assert emb.vocab.words == ["a", "b"]
    np.testing.assert_array_equal(emb["b"], [0.0, 1.0])


def test_an_empty_mapped_file_is_a_format_error(tmp_path: Path) -> None:
    path = tmp_path / "empty.fifu"
    path.write_bytes(b"")
    with pytest.raises(FormatError), open(path, "rb") as f:
        load_finalfusion(f, mmap=True)


# -- which inputs are paths: one rule for every reader ----------------------------------------


def test_which_inputs_name_a_path(tmp_path: Path) -> None:
    (tmp_path / "f.bin").write_bytes(b"x")
    fifo = tmp_path / "pipe"
    if hasattr(os, "mkfifo"):
        os.mkfifo(fifo)
    named = {
        "str": str(tmp_path / "f.bin"),
        "PathLike": tmp_path / "f.bin",
        "bytes path of a file": os.fsencode(tmp_path / "f.bin"),
        "missing str path": str(tmp_path / "missing"),
    }
    if hasattr(os, "mkfifo"):
        named["bytes path of a FIFO"] = os.fsencode(fifo)
    for what, value in named.items():
        assert local_path(value) == os.fsdecode(value), what
        assert path_of(value) == os.path.abspath(os.fsdecode(value)), what
    contents = {
        "bytes naming nothing": os.fsencode(tmp_path / "missing"),
        "bytes naming a directory": os.fsencode(tmp_path),
        "a dot": b".",
        "finalfusion magic": b"FiFu",
        "a NUL": os.fsencode(tmp_path) + b"\x00",
        "too long": b"/" * 4096,
        "bytearray": bytearray(os.fsencode(tmp_path)),
        "memoryview": memoryview(os.fsencode(tmp_path)),
        "descriptor": 0,
        "file object": io.BytesIO(b""),
    }
    for what, value in contents.items():
        assert local_path(value) is None, what  # type: ignore[arg-type]
        assert path_of(value) is None, what  # type: ignore[arg-type]
    assert is_bytes_path(os.fsencode(tmp_path / "f.bin"))
    assert not is_bytes_path(os.fsencode(tmp_path))
    assert not is_bytes_path(b"FiFu")


@pytest.mark.parametrize("data", [b".", b"..", b"/"])
def test_bytes_naming_a_directory_are_contents(data: bytes) -> None:
    # Random bytes such as b"." name a directory almost everywhere: they must stay a file's contents (a FormatError).
    with pytest.raises(FormatError):
        load_finalfusion(data)


@pytest.mark.parametrize("name", ["shard.safetensors", "model-00001-of-00002.safetensors", ".hidden", "a..b"])
def test_sibling_accepts_plain_file_names(name: str, tmp_path: Path) -> None:
    assert sibling(tmp_path, name, chunk="demo") == os.path.join(str(tmp_path), name)


@pytest.mark.parametrize("name", ["", ".", "..", "../x", "sub/x", "/etc/passwd", "a\x00b", "x/..", "./x"])
def test_sibling_refuses_anything_but_a_plain_file_name(name: str, tmp_path: Path) -> None:
    with pytest.raises(FormatError, match="a shard must be a file next to the index") as err:
        sibling(tmp_path, name, chunk="demo", message="a shard must be a file next to the index")
    assert err.value.found == name
    assert err.value.expected == "a plain file name"
    assert err.value.chunk == "demo"


# -- the stream side of the cursor ----------------------------------------------------------


def test_stream_reader_reads_fields_exactly_from_a_trickle() -> None:
    s = StreamReader(Trickle(struct.pack("<iqd", -3, 1 << 40, 0.5) + b"tail"))  # type: ignore[arg-type]
    assert s.remaining() is None
    assert s.fields(struct.Struct("<iqd"), "header", "demo") == (-3, 1 << 40, 0.5)
    assert s.pos == 20
    with pytest.raises(Truncated, match="demo: data ends inside the rest: expected 5 bytes, found 4 bytes") as err:
        s.exact(5, "the rest", "demo")
    assert err.value.offset == 20


def test_stream_reader_put_back_bytes_come_first() -> None:
    s = StreamReader(io.BytesIO(b"abcdefgh"))
    assert s.read_upto(5) == b"abcde"
    s.unread(b"cde")
    assert s.pos == 2
    out = bytearray(4)
    s.into(memoryview(out), "four bytes", "demo")
    assert out == b"cdef"
    assert s.pos == 6
    s.unread(b"ef")
    buf = bytearray()
    assert s.fill(buf, 3)
    assert buf == b"efg"
    assert s.pos == 7
    s.unread(b"fg")
    assert s.skip(10) == 3
    assert s.pos == 8
    assert s.read_some(4) == b""
    assert s.bound() == 0


def test_stream_reader_into_reports_where_the_array_began() -> None:
    s = StreamReader(io.BytesIO(b"0123456789"))
    s.exact(2, "head", "demo")
    s.unread(b"1")
    with pytest.raises(Truncated) as err:
        s.into(memoryview(bytearray(20)), "the matrix", "demo")
    assert err.value.offset == 1
    assert err.value.found == "9 bytes"
    assert err.value.message == "data ends inside the matrix"


def test_read_exactly_and_read_into_use_read_without_readinto() -> None:
    class ReadOnly:
        def __init__(self, data: bytes) -> None:
            self._f = io.BytesIO(data)

        def read(self, n: int = -1) -> bytes:
            return self._f.read(min(n, 2))

    view = memoryview(bytearray(5))
    assert read_into(ReadOnly(b"abcdef"), view) == 5  # type: ignore[arg-type]
    with pytest.raises(Truncated, match="data ends inside the table") as err:
        read_exactly(ReadOnly(b"abc"), view, "the table", chunk="demo", offset=7)  # type: ignore[arg-type]
    assert err.value.offset == 7
    assert err.value.found == "3 bytes"


def test_read_into_refuses_text_mode_objects() -> None:
    class Text:
        def read(self, n: int = -1) -> str:
            return "abc"

    with pytest.raises(TypeError, match="binary mode"):
        read_into(Text(), memoryview(bytearray(2)))  # type: ignore[arg-type]


# -- peek: "cannot seek" makes a stream; any other error of the file is a failed read -------------------------------------


class _Faulty(io.RawIOBase):
    """A real file read through a file object whose method ``where`` (``seekable``, ``tell``, ``seek`` or its first read)
    raises ``error()``: what a failing disk, a refused permission or a pipe does to a reader."""

    def __init__(self, path: Path, where: str, error: Callable[[], BaseException]) -> None:
        super().__init__()
        self._f = open(path, "rb", buffering=0)  # noqa: SIM115 - closed with this object
        self._where = where
        self._error = error

    def _maybe_fail(self, method: str) -> None:
        if method == self._where:
            if method == "read":
                self._where = ""  # the read fails once: a second attempt would get the next bytes, not these
            raise self._error()

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        self._maybe_fail("seekable")
        return True

    def tell(self) -> int:
        self._maybe_fail("tell")
        return self._f.tell()

    def seek(self, pos: int, whence: int = io.SEEK_SET) -> int:
        self._maybe_fail("seek")
        return self._f.seek(pos, whence)

    def readinto(self, b: Any) -> int:
        self._maybe_fail("read")
        return self._f.readinto(b)

    def close(self) -> None:
        self._f.close()
        super().close()


def _word2vec(tmp_path: Path) -> Path:
    path = tmp_path / "e.w2v"
    words = [f"w{i}" for i in range(30)]
    finalfusion.write_word2vec(path, Embeddings(NdArray(np.random.default_rng(4).standard_normal((30, 8)).astype(np.float32)), SimpleVocab(words)))
    return path


FAILED_READS = {"EIO": lambda: OSError(errno.EIO, "Input/output error"), "EACCES": lambda: PermissionError(errno.EACCES, "Permission denied")}


@pytest.mark.parametrize("error", FAILED_READS)
@pytest.mark.parametrize("where", ["seekable", "tell", "seek", "read"])
def test_a_failed_read_while_peeking_propagates(where: str, error: str, tmp_path: Path) -> None:
    # only "cannot seek" makes a file a stream: a failing tell, seek or read is the read's OSError, never a second read that
    # takes the next bytes for the first (the format sniffer did so: fuzz/crashers/remote-http-crash-2261920d35db.bin)
    path = _word2vec(tmp_path)
    want = FAILED_READS[error]().errno
    said = re.escape(str(FAILED_READS[error]()))
    with _Faulty(path, where, FAILED_READS[error]) as f, pytest.raises(OSError, match=said) as info:
        peek(f, 4)
    assert info.value.errno == want
    for load in (finalfusion.load, finalfusion.load_word2vec):
        with _Faulty(path, where, FAILED_READS[error]) as f, pytest.raises(OSError, match=said) as info:
            load(f)
        assert info.value.errno == want, load


@pytest.mark.parametrize(
    ("where", "error"),
    [
        ("seekable", lambda: io.UnsupportedOperation("seekable")),
        ("tell", lambda: io.UnsupportedOperation("tell")),
        ("tell", lambda: OSError(errno.ESPIPE, "Illegal seek")),
        ("seek", lambda: io.UnsupportedOperation("seek")),  # told where it stands, read, cannot go back: the bytes come again
        ("seek", lambda: OSError(errno.ESPIPE, "Illegal seek")),
    ],
    ids=["seekable-unsupported", "tell-unsupported", "tell-espipe", "seek-unsupported", "seek-espipe"],
)
def test_a_file_that_cannot_seek_is_read_as_a_stream(where: str, error: Callable[[], BaseException], tmp_path: Path) -> None:
    path = _word2vec(tmp_path)
    data = path.read_bytes()
    with _Faulty(path, where, error) as f:
        head, stream = peek(f, 4)
        assert head == data[:4]
        assert stream.read() == data
    local = finalfusion.load(path)
    with _Faulty(path, where, error) as f:
        emb = finalfusion.load(f)
    assert emb.vocab.words == local.vocab.words
    np.testing.assert_array_equal(emb.storage.matrix, local.storage.matrix)
