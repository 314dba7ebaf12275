"""What a write to a path writes into: symlinks are followed, directories refused, FIFOs and devices streamed into, long names work.

Every case runs for the three kinds of writer that share ``atomic_output``:
``Embeddings.write``, a single chunk's ``write`` and a foreign-format writer
(``write_word2vec``).
"""

from __future__ import annotations

import io
import os
import stat
import threading
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

import finalfusion.container as container
from finalfusion import Embeddings
from finalfusion.compat import write_word2vec
from finalfusion.storage import NdArray
from finalfusion.vocab import SimpleVocab


def _embeddings(seed: int) -> Embeddings:
    rng = np.random.default_rng(seed)
    words = [f"w{seed}-{i}" for i in range(20)]
    return Embeddings(NdArray(rng.standard_normal((20, 4)).astype(np.float32)), SimpleVocab(words))


def _emb_write(target: object, seed: int) -> None:
    _embeddings(seed).write(target)  # type: ignore[arg-type]


def _chunk_write(target: object, seed: int) -> None:
    SimpleVocab([f"w{seed}-{i}" for i in range(20)]).write(target)  # type: ignore[arg-type]


def _w2v_write(target: object, seed: int) -> None:
    write_word2vec(target, _embeddings(seed))


WRITERS: dict[str, Callable[[object, int], None]] = {"Embeddings.write": _emb_write, "chunk.write": _chunk_write, "write_word2vec": _w2v_write}


def _bytes_of(writer: Callable[[object, int], None], seed: int) -> bytes:
    buf = io.BytesIO()
    writer(buf, seed)
    return buf.getvalue()


def _no_temporaries(*dirs: Path) -> None:
    for d in dirs:
        assert sorted(d.glob(".*.tmp")) == []


@pytest.fixture(params=sorted(WRITERS))
def writer(request: pytest.FixtureRequest) -> Callable[[object, int], None]:
    return WRITERS[request.param]


@pytest.mark.parametrize("relative", [True, False], ids=["relative-link", "absolute-link"])
def test_symlink_to_file_replaces_the_file_and_keeps_the_link(tmp_path: Path, writer: Callable[[object, int], None], relative: bool) -> None:
    real_dir = tmp_path / "versions"
    real_dir.mkdir()
    v1 = real_dir / "v1.fifu"
    writer(v1, 1)
    link = tmp_path / "current.fifu"
    link.symlink_to(os.path.join("versions", "v1.fifu") if relative else v1)
    writer(link, 2)
    assert link.is_symlink()
    assert os.readlink(link) == (os.path.join("versions", "v1.fifu") if relative else str(v1))
    assert v1.read_bytes() == _bytes_of(writer, 2)
    _no_temporaries(tmp_path, real_dir)


def test_chain_of_symlinks_and_dangling_symlink(tmp_path: Path, writer: Callable[[object, int], None]) -> None:
    target = tmp_path / "v2.fifu"
    (tmp_path / "a").symlink_to("b")
    (tmp_path / "b").symlink_to("v2.fifu")  # dangling: v2.fifu does not exist yet
    writer(tmp_path / "a", 3)
    assert (tmp_path / "a").is_symlink()
    assert (tmp_path / "b").is_symlink()
    assert target.read_bytes() == _bytes_of(writer, 3)
    writer(tmp_path / "a", 4)  # now through a chain of links to an existing file
    assert target.read_bytes() == _bytes_of(writer, 4)
    _no_temporaries(tmp_path)


def test_symlink_keeps_target_permissions(tmp_path: Path, writer: Callable[[object, int], None]) -> None:
    v1 = tmp_path / "v1.fifu"
    writer(v1, 1)
    v1.chmod(0o640)
    (tmp_path / "current").symlink_to("v1.fifu")
    writer(tmp_path / "current", 2)
    assert stat.S_IMODE(v1.stat().st_mode) == 0o640


def test_symlink_loop_is_refused(tmp_path: Path, writer: Callable[[object, int], None]) -> None:
    (tmp_path / "a").symlink_to("b")
    (tmp_path / "b").symlink_to("a")
    with pytest.raises(OSError, match="symbolic links"):
        writer(tmp_path / "a", 1)
    assert (tmp_path / "a").is_symlink()
    assert (tmp_path / "b").is_symlink()
    _no_temporaries(tmp_path)


@pytest.mark.parametrize("through_link", [False, True], ids=["directory", "link-to-directory"])
def test_directory_is_refused(tmp_path: Path, writer: Callable[[object, int], None], through_link: bool) -> None:
    d = tmp_path / "d"
    d.mkdir()
    (d / "keep").write_bytes(b"x")
    target = d
    if through_link:
        target = tmp_path / "link"
        target.symlink_to("d")
    with pytest.raises(IsADirectoryError):
        writer(target, 1)
    assert d.is_dir()
    assert (d / "keep").read_bytes() == b"x"
    assert target.is_symlink() == through_link
    _no_temporaries(tmp_path, d)


@pytest.mark.parametrize("parallel_threshold", [1 << 60, 0], ids=["sequential", "threaded-path"])
def test_fifo_is_streamed_into(tmp_path: Path, writer: Callable[[object, int], None], monkeypatch: pytest.MonkeyPatch, parallel_threshold: int) -> None:
    # threaded-path: a path write would use pwrite for the tail, which a FIFO cannot take.
    monkeypatch.setattr(container, "PARALLEL_TAIL_BYTES", parallel_threshold)
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    received: list[bytes] = []

    def read() -> None:
        with open(fifo, "rb") as f:
            received.append(f.read())

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    writer(fifo, 5)
    reader.join(timeout=30)
    assert not reader.is_alive()
    assert received == [_bytes_of(writer, 5)]
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    _no_temporaries(tmp_path)


def _null_device(tmp_path: Path) -> str:
    """A character device to write to whose replacement would harm nothing.

    As root, a private node with /dev/null's numbers in ``tmp_path`` (a
    regression must not replace the system's /dev/null); otherwise /dev/null
    itself, which a non-root writer cannot replace anyway.
    """
    if os.geteuid() == 0:
        node = tmp_path / "null"
        try:
            os.mknod(node, stat.S_IFCHR | 0o666, os.makedev(1, 3))
            with open(node, "wb") as f:
                f.write(b"probe")
        except OSError as e:
            pytest.skip(f"cannot make and write a device node here: {e}")
        return str(node)
    if not os.access("/dev/null", os.W_OK):
        pytest.skip("no writable /dev/null")
    return "/dev/null"


def test_character_device_stays_a_device(tmp_path: Path, writer: Callable[[object, int], None]) -> None:
    device = _null_device(tmp_path)
    before = os.stat(device)
    writer(device, 6)
    after = os.stat(device)
    assert stat.S_ISCHR(after.st_mode)
    assert (after.st_rdev, after.st_ino) == (before.st_rdev, before.st_ino)
    _no_temporaries(tmp_path)


@pytest.mark.parametrize("name_bytes", [200, 242, 243, 250, 255])
@pytest.mark.parametrize("char", ["x", "ö", "語"])
def test_long_legal_names_work(tmp_path: Path, writer: Callable[[object, int], None], name_bytes: int, char: str) -> None:
    name_max = os.pathconf(tmp_path, "PC_NAME_MAX")
    if name_bytes > name_max:
        pytest.skip(f"NAME_MAX is {name_max}")
    per = len(char.encode())
    name = char * (name_bytes // per) + "y" * (name_bytes % per)
    assert len(os.fsencode(name)) == name_bytes
    target = tmp_path / name
    writer(target, 7)
    writer(target, 8)  # over an existing file too
    assert target.read_bytes() == _bytes_of(writer, 8)
    _no_temporaries(tmp_path)
