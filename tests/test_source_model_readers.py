"""One input rule for the model readers: safetensors, fastText and LightSeq read every kind of Source alike.

Each reader gets the same small model as a ``str`` path, an ``os.PathLike``,
a ``bytes`` path, ``bytes`` / ``bytearray`` / ``memoryview`` contents, a
file descriptor, a plain file object (also positioned past a prefix), a
``BytesIO``, a non-seekable stream, and gzip data (bytes, path, stream), and
must return the same vectors; ``bytes`` that name nothing are contents.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import struct
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

import numpy as np
import pytest

from _streams import Trickle
from finalfusion import Embeddings, FormatError, NdArray, SimpleVocab, load_fasttext, load_lightseq, load_safetensors
from finalfusion._source import is_bytes_path, local_path
from finalfusion.compat.fasttext import write_fasttext
from finalfusion.errors import Truncated

TABLE = np.array([[3.0, 4.0], [0.0, 1.0], [1.0, 1.0]], dtype="<f4")
WORDS = ["a", "b", "c"]


def _safetensors() -> bytes:
    head = json.dumps({"embeddings": {"dtype": "F32", "shape": list(TABLE.shape), "data_offsets": [0, TABLE.nbytes]}}).encode()
    return struct.pack("<Q", len(head)) + head + TABLE.tobytes()


def _fasttext() -> bytes:
    buf = io.BytesIO()
    write_fasttext(buf, Embeddings(NdArray(TABLE.copy()), SimpleVocab(WORDS)))
    return buf.getvalue()


def _field(number: int, payload: bytes) -> bytes:
    return bytes([number << 3 | 2, len(payload)]) + payload


def _lightseq() -> bytes:
    return _field(1, _field(1, TABLE.tobytes()) + _field(3, np.ones(2, dtype="<f4").tobytes()))


READERS: dict[str, tuple[Callable[[], bytes], Callable[[Any], Embeddings]]] = {
    "safetensors": (_safetensors, lambda file: load_safetensors(file, tokenizer=WORDS, normalize=False)),
    "fasttext": (_fasttext, lambda file: load_fasttext(file, normalize=False)),
    "lightseq": (_lightseq, lambda file: load_lightseq(file, WORDS, normalize=False)),
}


@contextmanager
def _as(kind: str, data: bytes, tmp_path: Path) -> Iterator[Any]:
    path = tmp_path / "model.bin"
    gz = gzip.compress(data)
    if kind == "str path":
        path.write_bytes(data)
        yield str(path)
    elif kind == "PathLike":
        path.write_bytes(data)
        yield path
    elif kind == "bytes path":
        path.write_bytes(data)
        yield os.fsencode(path)
    elif kind == "bytes":
        yield data
    elif kind == "bytearray":
        yield bytearray(data)
    elif kind == "memoryview":
        yield memoryview(data)
    elif kind == "fd":
        path.write_bytes(data)
        fd = os.open(path, os.O_RDONLY)
        try:
            yield fd
        finally:
            os.close(fd)
    elif kind in ("file object", "file object past a prefix"):
        prefix = b"junk" if kind == "file object past a prefix" else b""
        path.write_bytes(prefix + data)
        with open(path, "rb") as f:
            f.seek(len(prefix))
            yield f
    elif kind == "BytesIO":
        yield io.BytesIO(data)
    elif kind == "pipe":
        yield io.BufferedReader(Trickle(data, 3), buffer_size=5)
    elif kind == "gzip bytes":
        yield gz
    elif kind == "gzip path":
        path.write_bytes(gz)
        yield path
    elif kind == "gzip pipe":
        yield io.BufferedReader(Trickle(gz, 3), buffer_size=5)
    else:  # pragma: no cover
        raise AssertionError(kind)


KINDS = [
    "str path",
    "PathLike",
    "bytes path",
    "bytes",
    "bytearray",
    "memoryview",
    "fd",
    "file object",
    "file object past a prefix",
    "BytesIO",
    "pipe",
    "gzip bytes",
    "gzip path",
    "gzip pipe",
]


@pytest.mark.parametrize("reader", sorted(READERS))
@pytest.mark.parametrize("kind", KINDS)
def test_every_source_reads_the_same_table(reader: str, kind: str, tmp_path: Path) -> None:
    build, load = READERS[reader]
    with _as(kind, build(), tmp_path) as file:
        emb = load(file)
    assert emb.vocab.words == WORDS
    np.testing.assert_array_equal(np.asarray(emb.storage)[: len(WORDS)], TABLE)


@pytest.mark.parametrize("reader", sorted(READERS))
def test_bytes_naming_nothing_are_contents(reader: str, tmp_path: Path) -> None:
    _, load = READERS[reader]
    missing = os.fsencode(tmp_path / "no-such-model.bin")
    assert not is_bytes_path(missing)
    assert local_path(missing) is None
    with pytest.raises(FormatError):
        load(missing)


@pytest.mark.parametrize("reader", sorted(READERS))
def test_a_missing_str_path_is_a_path(reader: str, tmp_path: Path) -> None:
    _, load = READERS[reader]
    with pytest.raises(FileNotFoundError):
        load(str(tmp_path / "no-such-model.bin"))


@pytest.mark.parametrize("reader", sorted(READERS))
def test_text_mode_file_objects_are_refused(reader: str) -> None:
    _, load = READERS[reader]
    with pytest.raises(TypeError, match="the file object must be opened in binary mode"):
        load(io.StringIO("text"))


def test_a_model_directory_is_named_by_str_or_pathlike_not_bytes(tmp_path: Path) -> None:
    (tmp_path / "model.safetensors").write_bytes(_safetensors())
    for directory in (str(tmp_path), tmp_path):
        emb = load_safetensors(directory, tokenizer=WORDS, normalize=False)
        np.testing.assert_array_equal(emb.storage, TABLE)
    assert local_path(os.fsencode(tmp_path)) is None  # bytes naming a directory are contents (b"." would be one)
    with pytest.raises(FormatError):
        load_safetensors(os.fsencode(tmp_path), tokenizer=WORDS)


@pytest.mark.parametrize("gz", [False, True])
def test_a_cut_matrix_names_the_decompressed_offset_where_it_begins(gz: bool) -> None:
    data = _fasttext()
    start = 8 + 56 + 28 + sum(len(w) + 10 for w in WORDS) + 17  # header, args, dictionary, entries, matrix header
    cut = data[: start + 10]
    # Size known: refused before reading; size unknown (gzip): read block by block, the block of row 0 begins at the matrix.
    with pytest.raises(Truncated, match="data ends inside the input matrix" if gz else "too few bytes for a 3 x 2 matrix") as err:
        load_fasttext(gzip.compress(cut) if gz else cut)
    assert err.value.chunk == "fastText input matrix"
    assert err.value.offset == start
    assert err.value.found == "10 bytes"


def _file_like(data: bytes) -> IO[bytes]:
    class ReadOnly:
        """A binary file object with only ``read`` (no ``readinto``, no descriptor)."""

        def __init__(self) -> None:
            self._f = io.BytesIO(data)

        def read(self, n: int = -1) -> bytes:
            return self._f.read(n)

    return ReadOnly()  # type: ignore[return-value]


@pytest.mark.parametrize("reader", sorted(READERS))
def test_a_file_object_with_only_read(reader: str) -> None:
    build, load = READERS[reader]
    emb = load(_file_like(build()))
    np.testing.assert_array_equal(np.asarray(emb.storage)[: len(WORDS)], TABLE)
