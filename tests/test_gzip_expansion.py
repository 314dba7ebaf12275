"""limits.MAX_GZIP_EXPANSION holds for every reader, where gzip input is opened (issue 33, "Bounds and silent wrong answers").

The audit: a 0.64 MB word2vec ``.bin.gz`` of zero vectors loaded to 1.9 GB, because only the
readers that check a declared length (finalfusion chunks, fastText, LightSeq) applied the limit.
Now the decompressed bytes of any gzip input may reach the limit times its compressed size (plus
1 MiB) and no more: files written by gensim still load, crafted high-ratio files are refused with a
FormatError naming the limit, through the API and the command line, and raising the limit lets
them through.
"""

from __future__ import annotations

import gzip
import io
import subprocess
import sys
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import finalfusion
from finalfusion import FormatError, limits
from finalfusion.compat import load_text, load_text_dims, load_word2vec
from finalfusion.compat._keyedvectors import load_word2vec_format

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _streams import Trickle
from test_cli import command, env

gensim_models = pytest.importorskip("gensim.models")

DIMS = 100
#: Columns of the crafted files: long runs of one byte, which deflate packs about 1000:1.
WIDE = 1 << 18


def _gzip_lines(lines: Callable[[int], bytes], rows: int, header: bytes = b"") -> bytes:
    """A gzip file of ``header`` then ``lines(i)`` for each row, compressed as it is made (never held whole)."""
    c = zlib.compressobj(6, zlib.DEFLATED, 31)
    out = [c.compress(header)]
    out += [c.compress(lines(i)) for i in range(rows)]
    out.append(c.flush())
    return b"".join(out)


def word2vec_bomb(rows: int) -> bytes:
    """A valid word2vec binary file of zero vectors (1 MiB each), gzip-compressed (about 1000:1)."""
    return _gzip_lines(lambda i: b"w%d " % i + bytes(4 * WIDE), rows, b"%d %d\n" % (rows, WIDE))


def text_bomb(rows: int, header: bool) -> bytes:
    """A valid text (``header=False``) or text-dims file of zero vectors, gzip-compressed."""
    zeros = b" 0" * WIDE + b"\n"
    return _gzip_lines(lambda i: b"w%d" % i + zeros, rows, b"%d %d\n" % (rows, WIDE) if header else b"")


READERS: dict[str, tuple[Callable[[Any], Any], Callable[[int], bytes]]] = {
    "load_word2vec": (load_word2vec, word2vec_bomb),
    "load_text_dims": (load_text_dims, lambda rows: text_bomb(rows, True)),
    "load_text": (load_text, lambda rows: text_bomb(rows, False)),
    "load_word2vec_format(binary=True)": (lambda f: load_word2vec_format(f, binary=True), word2vec_bomb),
    "load_word2vec_format": (load_word2vec_format, lambda rows: text_bomb(rows, True)),
    "finalfusion.load": (finalfusion.load, word2vec_bomb),
}


@pytest.fixture(scope="module")
def gensim_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """gensim's own ``.bin.gz`` and ``.txt.gz`` (its writer compresses by the extension)."""
    tmp = tmp_path_factory.mktemp("gensim")
    kv = gensim_models.KeyedVectors(vector_size=DIMS)
    rng = np.random.default_rng(0)
    kv.add_vectors([f"word{i}" for i in range(2000)], rng.normal(size=(2000, DIMS)).astype(np.float32))
    files = {"bin": tmp / "vectors.bin.gz", "txt": tmp / "vectors.txt.gz"}
    kv.save_word2vec_format(str(files["bin"]), binary=True)
    kv.save_word2vec_format(str(files["txt"]), binary=False)
    for path in files.values():
        assert path.read_bytes()[:2] == b"\x1f\x8b"
    return files


def test_gensim_files_still_load(gensim_files: dict[str, Path]) -> None:
    kv = gensim_models.KeyedVectors.load_word2vec_format(str(gensim_files["bin"]), binary=True)
    for emb in (
        load_word2vec(gensim_files["bin"], normalize=False),
        load_word2vec_format(gensim_files["bin"], binary=True),
        load_text_dims(gensim_files["txt"], normalize=False),
        load_word2vec_format(gensim_files["txt"]),
        finalfusion.load(gensim_files["bin"], normalize=False),
    ):
        assert emb.vocab.words == list(kv.index_to_key)
        np.testing.assert_allclose(emb.storage.matrix, kv.vectors, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("reader", list(READERS))
def test_a_high_ratio_gzip_is_refused_by_every_reader(reader: str) -> None:
    load, make = READERS[reader]
    data = make(20)  # 10-20 MB of records in 10-20 KB
    with pytest.raises(FormatError, match="MAX_GZIP_EXPANSION") as err:
        load(data)
    assert err.value.chunk == "gzip"
    # what it had decompressed when it stopped: the limit's bound, not the whole file
    assert int(str(err.value.found).split()[2]) < 100 * len(data) + (1 << 20) + (1 << 20)


@pytest.mark.parametrize("reader", ["load_word2vec", "load_text"])
def test_raising_the_limit_lets_it_through(reader: str, monkeypatch: pytest.MonkeyPatch) -> None:
    load, make = READERS[reader]
    data = make(20)  # 10-20 MB of zeros in 10-20 KB: past 100 times that plus 1 MiB
    with pytest.raises(FormatError, match="MAX_GZIP_EXPANSION"):
        load(data)
    monkeypatch.setattr(limits, "MAX_GZIP_EXPANSION", 2000)
    emb = load(data)
    assert emb.storage.shape == (20, WIDE)
    assert emb.vocab.words[:2] == ["w0", "w1"]


def test_a_stream_of_unknown_size_is_bounded_by_what_it_has_sent() -> None:
    """A pipe's compressed size is not known: the bound grows with the compressed bytes read so far."""
    data = word2vec_bomb(20)
    with pytest.raises(FormatError, match="MAX_GZIP_EXPANSION"):
        load_word2vec(io.BufferedReader(Trickle(data, 1 << 16)))
    # a real gzip file through the same kind of stream loads
    good = gzip.compress(b"2 3\na 1 2 3\nb 4 5 6\n", mtime=0)
    assert load_text_dims(io.BufferedReader(Trickle(good, 7)), normalize=False).vocab.words == ["a", "b"]


def test_a_read_of_everything_is_checked_as_it_goes() -> None:
    """``read()`` and ``readline()`` of a gzip stream decompress in steps, each checked: a bomb is never held whole."""
    from finalfusion._source import open_stream

    data = _gzip_lines(lambda i: bytes(1 << 20), 200)  # 200 MiB of zeros, no newline, in ~200 KB
    for read in ("read", "readline"):
        with pytest.raises(FormatError, match="MAX_GZIP_EXPANSION") as err, open_stream(data) as f:
            getattr(f, read)()
        # stopped within a step of the bound, not after decompressing the 200 MiB
        assert int(str(err.value.found).split()[2]) <= 100 * len(data) + (2 << 20)


def test_command_line_refuses_a_gzip_bomb(tmp_path: Path) -> None:
    path = tmp_path / "bomb.bin.gz"
    path.write_bytes(word2vec_bomb(20))
    r = subprocess.run([*command(), "convert", path, tmp_path / "out.fifu"], capture_output=True, text=True, env=env(), timeout=300, check=False)
    assert r.returncode == 1, r.stderr
    assert "MAX_GZIP_EXPANSION" in r.stderr
    assert not (tmp_path / "out.fifu").exists()
