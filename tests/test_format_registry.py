"""The format registry: listing, detection order, round trips through load(), adding a format."""

from __future__ import annotations

import gzip
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import finalfusion
from finalfusion import Embeddings, FormatError, NdArray, Norms, SimpleVocab
from finalfusion.compat import Format, _registry, formats, load, load_text, sniff_format
from finalfusion.compat.sniff import FORMATS
from finalfusion.subword import FloretIndexer
from finalfusion.vocab import FloretVocab

WORDS = ["Berlin", "Potsdam", "Tübingen"]


def unit_rows(n: int, dims: int = 4) -> np.ndarray[Any, np.dtype[np.float32]]:
    m = np.random.default_rng(7).standard_normal((n, dims)).astype(np.float32)
    return (m / np.linalg.norm(m, axis=1, keepdims=True)).astype(np.float32)


def simple() -> Embeddings:
    return Embeddings(NdArray(unit_rows(len(WORDS))), SimpleVocab(WORDS), norms=Norms([1.0, 2.0, 3.0]))


def floret() -> Embeddings:
    return Embeddings(NdArray(unit_rows(16)), FloretVocab(FloretIndexer(16, 3, 4, n_hashes=2)))


#: Formats whose writer needs more than a plain word list; every other writable format gets simple().
SOURCES: dict[str, Callable[[], Embeddings]] = {"floret": floret}


def test_formats_are_listed_in_detection_order() -> None:
    names = [f.name for f in formats()]
    assert names == ["finalfusion", "gguf", "safetensors", "hdf5", "fasttext", "floret", "word2vec", "text-dims", "text"]
    assert tuple(names) == FORMATS
    assert [f.order for f in formats()] == sorted(f.order for f in formats())
    for f in formats():
        assert isinstance(f, Format)
        assert f.description
        assert f.extensions
        assert all(e.startswith(".") for e in f.extensions)
        assert f.options <= _registry.LOAD_OPTIONS
        assert f.can_read


@pytest.mark.parametrize("fmt", [f for f in formats() if f.can_write], ids=lambda f: f.name)
def test_every_writable_format_round_trips_through_load(fmt: Format, tmp_path: Path) -> None:
    emb = SOURCES.get(fmt.name, simple)()
    path = tmp_path / f"embeddings{fmt.extensions[0]}"
    assert fmt.writer is not None
    fmt.writer(path, emb)
    data = path.read_bytes()
    assert sniff_format(data[: 1 << 16]) == fmt.name
    for source in (path, data, gzip.compress(data)):
        back = load(source)
        assert back.vocab.words == emb.vocab.words
        probe = emb.vocab.words or ["Berlin", "Potsdam"]  # floret: no words, every word is embedded through n-grams
        for word in probe:
            np.testing.assert_allclose(back.embedding(word), emb.embedding(word), rtol=1e-6, atol=1e-7)
        if emb.norms is not None and fmt.name != "finalfusion":  # the foreign writers multiply the norms back
            assert back.norms is not None
            np.testing.assert_allclose(back.norms.norms, emb.norms.norms, rtol=1e-6)


def test_no_format_matches_names_every_format() -> None:
    with pytest.raises(FormatError) as err:
        load(b"<html><body>")
    message = str(err.value)
    assert message.startswith(
        "cannot tell the format: not finalfusion (no FiFu magic), not gguf (no GGUF magic), not safetensors (no safetensors header), "
        "not hdf5 (no HDF5 signature), not fasttext (no magic 793712314), not floret ("
    )
    assert 'not word2vec or text-dims (no "<rows> <dims>" first line) and not text (the first line is not a word followed by numbers)' in message
    assert "expected one of finalfusion, gguf, safetensors, hdf5, fasttext, floret, word2vec, text-dims, text" in message


def test_registering_twice_fails() -> None:
    with pytest.raises(RuntimeError, match="format 'word2vec' is registered twice"):
        _registry.register_format("word2vec", description="again", order=12345)
    with pytest.raises(RuntimeError, match="formats 'text' and 'other' both have detection order 200"):
        _registry.register_format("other", description="clash", order=200)
    with pytest.raises(RuntimeError, match="unknown load options"):
        _registry.register_format("other", description="bad", order=12345, options=("fast",))
    assert "other" not in FORMATS
    with pytest.raises(KeyError, match="unknown format 'other'; known formats: finalfusion"):
        _registry.get_format("other")


@pytest.fixture
def scratch_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    """Registrations made by a test are dropped afterwards."""
    monkeypatch.setattr(_registry, "_FORMATS", dict(_registry._FORMATS))


@pytest.mark.usefixtures("scratch_registry")
def test_a_new_format_is_one_registration(tmp_path: Path) -> None:
    # A binary format recognised by its magic, tried before the text formats.
    calls: list[tuple[Any, dict[str, Any]]] = []

    def loader(source: Any, **options: Any) -> Embeddings:
        calls.append((source, options))
        return simple()

    _registry.register_format(
        "toy", description="toy", extensions=(".toy",), order=50, detector=lambda sample, path: sample.startswith(b"TOY1"), loader=loader, options=("lossy",)
    )
    assert "toy" in finalfusion.compat.sniff.FORMATS
    assert sniff_format(b"TOY1 2 3\n") == "toy"
    path = tmp_path / "e.toy"
    path.write_bytes(b"TOY1" + bytes(100))
    load(path, lossy=True, normalize=False, mmap=True)
    load(gzip.compress(path.read_bytes()))
    assert calls[0] == (str(path), {"lossy": True})  # an uncompressed local file: the path itself, and only the options it takes
    assert hasattr(calls[1][0], "read")
    assert calls[1][1] == {"lossy": False}
    toy = _registry.get_format("toy")
    assert toy.can_read
    assert not toy.can_write


@pytest.mark.usefixtures("scratch_registry")
def test_a_format_may_claim_directories(tmp_path: Path) -> None:
    model = tmp_path / "model"
    model.mkdir()
    (model / "vectors.txt").write_bytes(b"Berlin 3 4\n")

    def detector(sample: bytes, path: str | None) -> bool:
        return sample == b"" and path is not None and Path(path, "vectors.txt").is_file()

    _registry.register_format(
        "dir-text",
        description="a directory with vectors.txt",
        order=60,
        detector=detector,
        loader=lambda p, **o: load_text(Path(p, "vectors.txt"), **o),
        options=("normalize",),
    )
    emb = load(model, normalize=False)
    assert emb["Berlin"].tolist() == [3.0, 4.0]
    with pytest.raises(FormatError, match="no format stored as a directory claims it"):
        load(tmp_path)  # a directory nobody claims: a FormatError saying what was looked for (issue 35)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes need POSIX")
def test_a_named_pipe_is_read_once(tmp_path: Path) -> None:
    # Detection must not consume a pipe's first bytes and then reopen it: pipes are read as streams.
    fifo = tmp_path / "vectors.pipe"
    os.mkfifo(fifo)
    data = b"2 2\nBerlin 3 4\nParis 0 2\n"

    def feed() -> None:
        with open(fifo, "wb") as f:
            f.write(data)

    writer = threading.Thread(target=feed)
    writer.start()
    try:
        emb = load(fifo, normalize=False)
    finally:
        writer.join(timeout=10)
    assert emb.vocab.words == ["Berlin", "Paris"]
    assert emb["Paris"].tolist() == [0.0, 2.0]
