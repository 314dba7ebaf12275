"""``load_finalfusion`` on a file of another known format names that format and points to ``finalfusion.load`` (issue 26).

The facade sits below the format table (``finalfusion.compat``): the table registers its detectors with
``finalfusion._load.register_foreign_namer``. The files are written by gensim, the tool users bring them from.
The command line's ``-f finalfusion`` goes the same way.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import finalfusion
from finalfusion import BadMagic, load_finalfusion

REPO = Path(__file__).resolve().parents[1]


def _gensim_file(path: Path, binary: bool) -> Path:
    gensim = pytest.importorskip("gensim")
    kv = gensim.models.KeyedVectors(vector_size=4)
    kv.add_vectors(["berlin", "paris", "rome"], np.arange(12, dtype=np.float32).reshape(3, 4))
    kv.save_word2vec_format(str(path), binary=binary)
    return path


@pytest.mark.parametrize(("binary", "name"), [(True, "word2vec"), (False, "text-dims")])
def test_a_foreign_file_names_its_format_and_finalfusion_load(tmp_path: Path, binary: bool, name: str) -> None:
    path = _gensim_file(tmp_path / "vectors.bin", binary)
    with pytest.raises(BadMagic) as info:
        load_finalfusion(path)
    message = str(info.value)
    assert f"not a finalfusion file but {name}, which finalfusion.load(path) reads" in message
    assert info.value.found == path.read_bytes()[:4]  # what was found stays the bytes
    assert info.value.offset == 0
    assert finalfusion.load(path).vocab.words == ["berlin", "paris", "rome"]  # and the hint is right
    # The same for the contents in memory and a bytes path (0.7 style).
    with pytest.raises(BadMagic, match=f"but {name}, which finalfusion.load"):
        load_finalfusion(path.read_bytes())
    with pytest.raises(BadMagic, match=f"but {name}, which finalfusion.load"):
        load_finalfusion(os.fsencode(path), mmap=True)


def test_a_glove_file_is_named_text(tmp_path: Path) -> None:
    path = tmp_path / "glove.txt"
    path.write_text("berlin 0.1 0.2 0.3\nparis 0.4 0.5 0.6\n")
    with pytest.raises(BadMagic, match=r"not a finalfusion file but text, which finalfusion\.load\(path\) reads"):
        load_finalfusion(path)


def test_unknown_data_and_streams_keep_the_plain_message(tmp_path: Path) -> None:
    with pytest.raises(BadMagic) as info:
        load_finalfusion(b"\x89PNG\r\n\x1a\n" + bytes(64))
    assert str(info.value) == "header: not a finalfusion file: expected b'FiFu', found b'\\x89PNG' (at byte offset 0)"
    # A stream has lost its first bytes: no guess from four bytes ("84 1" would look like text).
    path = _gensim_file(tmp_path / "vectors.bin", True)
    with open(path, "rb") as f, pytest.raises(BadMagic) as info:
        load_finalfusion(f)
    assert "but" not in str(info.value)
    with pytest.raises(BadMagic) as info:
        load_finalfusion(io.BytesIO(path.read_bytes()))
    assert "finalfusion.load" not in str(info.value)


def test_the_command_line_with_an_explicit_format_says_it_too(tmp_path: Path) -> None:
    path = _gensim_file(tmp_path / "vectors.bin", True)
    env = dict(os.environ, PYTHONPATH=str(REPO / "src") + os.pathsep + os.environ.get("PYTHONPATH", ""))
    r = subprocess.run(
        [sys.executable, "-m", "finalfusion", "info", "-f", "finalfusion", str(path)], capture_output=True, text=True, env=env, timeout=120, check=False
    )
    assert r.returncode == 1
    assert "not a finalfusion file but word2vec" in r.stderr
    assert r.stderr.count("\n") == 1
