"""The error types: FormatError rendering and pickling, and MissingExtraError for every optional package."""

from __future__ import annotations

import argparse
import pickle
import sys
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import finalfusion
from finalfusion.errors import (
    BadMagic,
    ChunkOrder,
    FinalfusionError,
    FormatError,
    MissingExtraError,
    Truncated,
    UnknownChunk,
    UnsupportedVersion,
    import_extra,
)


def test_a_message_alone_renders_as_the_message() -> None:
    err = FormatError("something is off")
    assert str(err) == "something is off"
    assert err.offset is None
    assert err.chunk is None


def test_expected_found_offset_and_chunk_render_even_when_partial() -> None:
    assert str(FormatError("bad", found=3)) == "bad: expected None, found 3"
    assert str(FormatError("bad", expected="x")) == "bad: expected x, found None"
    assert str(FormatError("bad", offset=0)) == "bad (at byte offset 0)"
    assert str(FormatError("bad", chunk="NdArray", offset=7)) == "NdArray: bad (at byte offset 7)"


@pytest.mark.parametrize("cls", [FormatError, BadMagic, UnsupportedVersion, UnknownChunk, ChunkOrder, Truncated])
def test_pickling_a_format_error_keeps_class_and_details(cls: type[FormatError]) -> None:
    err = cls("bad", offset=12, chunk="SimpleVocab", expected=[1, 2], found={"a": 1})
    copy = pickle.loads(pickle.dumps(err))
    assert type(copy) is cls
    assert (copy.message, copy.offset, copy.chunk, copy.expected, copy.found) == ("bad", 12, "SimpleVocab", [1, 2], {"a": 1})
    assert str(copy) == str(err)
    assert isinstance(copy, ValueError)
    assert isinstance(copy, FinalfusionError)


# --- MissingExtraError ---------------------------------------------------------------------------


def test_missing_extra_error_is_an_import_error_that_pickles() -> None:
    err = MissingExtraError("matplotlib", "finalfusion.plot", "plot")
    assert str(err) == "finalfusion.plot needs the matplotlib package: pip install 'finalfusion-py[plot]'"
    assert isinstance(err, ModuleNotFoundError)
    assert finalfusion.MissingExtraError is MissingExtraError
    copy = pickle.loads(pickle.dumps(err))
    assert (type(copy), str(copy), copy.name, copy.extra) == (MissingExtraError, str(err), "matplotlib", "plot")


def test_import_extra_names_the_top_level_package(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "json.decoder", None)
    with pytest.raises(MissingExtraError, match=r"^reading JSON needs the json package: pip install 'finalfusion-py\[models\]'$") as err:
        import_extra("json.decoder", "reading JSON", extra="models")
    assert err.value.name == "json"
    assert err.value.__cause__ is None


def _plot() -> None:
    import finalfusion.plot

    emb = finalfusion.Embeddings(finalfusion.NdArray(np.eye(2, dtype=np.float32)), finalfusion.SimpleVocab(["a", "b"]))
    finalfusion.plot.similarity_matrix(emb, ["a", "b"])


def _to_gensim() -> None:
    finalfusion.Embeddings(finalfusion.NdArray(np.eye(2, dtype=np.float32)), finalfusion.SimpleVocab(["a", "b"])).to_gensim()


def _tokenize(kind: str) -> Callable[[], Any]:
    from finalfusion.vocab import HuggingFaceTokenizer, SentencePieceTokenizer

    return lambda: (HuggingFaceTokenizer("{}") if kind == "huggingface" else SentencePieceTokenizer(b"")).encode("a")


def _lightseq_hdf5() -> None:
    finalfusion.load_lightseq(b"\x89HDF\r\n\x1a\n" + bytes(64), ["a", "b"])  # the HDF5 signature: h5py is needed before anything is read


def _word_pairs() -> None:
    finalfusion.Embeddings(finalfusion.NdArray(np.eye(2, dtype=np.float32)), finalfusion.SimpleVocab(["a", "b"])).evaluate_word_pairs(["a\tb\t1"])


def _ann_index() -> None:
    from finalfusion import ann

    ann.build_index(finalfusion.Embeddings(finalfusion.NdArray(np.eye(2, dtype=np.float32)), finalfusion.SimpleVocab(["a", "b"])), "hnswlib")


@pytest.mark.parametrize(
    ("hidden", "call", "extra"),
    [
        (["matplotlib", "matplotlib.pyplot"], _plot, "plot"),
        (["gensim", "gensim.models"], _to_gensim, "gensim"),
        (["tokenizers"], _tokenize("huggingface"), "models"),
        (["sentencepiece"], _tokenize("sentencepiece"), "models"),
        (["h5py"], _lightseq_hdf5, "models"),
        (["scipy", "scipy.stats"], _word_pairs, "gensim"),
        (["hnswlib"], _ann_index, "ann"),
    ],
    ids=["matplotlib", "gensim", "tokenizers", "sentencepiece", "h5py", "scipy", "hnswlib"],
)
def test_a_missing_optional_package_raises_missing_extra_error_naming_the_extra(
    monkeypatch: pytest.MonkeyPatch, hidden: list[str], call: Callable[[], Any], extra: str
) -> None:
    for name in hidden:
        monkeypatch.setitem(sys.modules, name, None)  # import fails as if not installed
    with pytest.raises(MissingExtraError) as err:
        call()
    assert (err.value.name, err.value.extra) == (hidden[0], extra)
    assert f"pip install 'finalfusion-py[{extra}]'" in str(err.value)


def test_tolerated_optional_packages_are_simply_not_used(monkeypatch: pytest.MonkeyPatch) -> None:
    from finalfusion import _progress, _threads
    from finalfusion.cli import progress as cli_progress
    from finalfusion.cli._quantize import _limited_threads

    for name in ("tqdm", "tqdm.auto", "threadpoolctl"):
        monkeypatch.setitem(sys.modules, name, None)
    assert _progress.progress_callback(True) is None  # no bars without tqdm (the cli extra)
    monkeypatch.setattr(cli_progress, "progress_wanted", lambda args: True)
    with cli_progress.bars(argparse.Namespace()) as bars:
        assert bars is None
    before = _threads._setting
    with _limited_threads(1):  # without threadpoolctl only our scans are limited
        assert finalfusion.get_threads() == 1
    assert _threads._setting == before
