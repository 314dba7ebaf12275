"""Every prefix of a valid file is rejected with a FormatError (and nothing else)."""

from __future__ import annotations

import contextlib
import struct
import warnings
from pathlib import Path

import pytest

import finalfusion
from conftest import GOLDEN_FILES, TINY_FILES
from finalfusion import FormatError, load_finalfusion

LARGE = ["python-ff_buckets.fifu", "python-pq.fifu", "rust-similarity.fifu"]


def chunk_boundaries(data: bytes) -> list[int]:
    """Offsets of the header end and of every chunk frame start/end."""
    (n,) = struct.unpack_from("<I", data, 8)
    pos = 12 + 4 * n
    out = [0, 4, 8, 12, pos]
    while pos < len(data):
        _, length = struct.unpack_from("<IQ", data, pos)
        out += [pos + 4, pos + 12]
        pos += 12 + length
        out.append(pos)
    assert pos == len(data)
    return out


def listed_end(data: bytes) -> int:
    """End of the last chunk the header lists."""
    (n,) = struct.unpack_from("<I", data, 8)
    pos = 12 + 4 * n
    for _ in range(n):
        _, length = struct.unpack_from("<IQ", data, pos)
        pos += 12 + length
    return pos


def assert_prefixes_fail(data: bytes, prefixes: list[int], valid: set[int]) -> None:
    checked = 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", finalfusion.LegacyFormatWarning)
        for n in prefixes:
            if n in valid:
                continue
            for mmap in (False, True):
                with pytest.raises(FormatError) as info:
                    load_finalfusion(data[:n], mmap=mmap)
                assert isinstance(info.value, ValueError)
                assert info.type.__module__ == "finalfusion.errors", (n, mmap, info.value)
            checked += 1
    assert checked > 0


@pytest.mark.parametrize("name", TINY_FILES)
def test_every_prefix_of_tiny_files(name: str) -> None:
    data = (GOLDEN_FILES / name).read_bytes()
    if name != "tiny_explicit_python_buggy_len.fifu":  # its vocab length field is 24 bytes short
        chunk_boundaries(data)  # sanity: the frame walk covers the file exactly
    assert_prefixes_fail(data, list(range(len(data))), valid=set())


@pytest.mark.parametrize("name", LARGE)
def test_prefixes_of_real_files(testdata: Path, name: str) -> None:
    data = (testdata / name).read_bytes()
    bounds = chunk_boundaries(data)
    prefixes = set(range(min(len(data), 256)))
    prefixes.update(range(0, len(data), 61))
    for b in bounds:
        prefixes.update(range(max(0, b - 20), min(len(data), b + 21)))
    valid: set[int] = set()
    end = listed_end(data)
    if end != len(data):
        # python-ff_buckets.fifu: the header lists 3 chunks and a 4th (NdNorms) follows,
        # so cutting right after the listed chunks leaves a complete, valid file.
        valid.add(end)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            emb = load_finalfusion(data[:end])
        assert emb.norms is None
    assert_prefixes_fail(data, sorted(p for p in prefixes if p < len(data)), valid)


# -- model formats: safetensors and LightSeq protobuf ------------------------------------------

MODELS = Path(__file__).resolve().parent / "data" / "models"


def test_every_prefix_of_safetensors() -> None:
    from finalfusion.compat.safetensors import load_safetensors

    data = (MODELS / "safetensors_tiny.safetensors").read_bytes()
    tokens = [f"t{i}" for i in range(10)]
    assert load_safetensors(data, tokenizer=tokens).storage.shape[0] == 10
    for n in range(len(data)):
        with pytest.raises(FormatError) as info:
            load_safetensors(data[:n], tokenizer=tokens)
        assert info.type.__module__ == "finalfusion.errors", (n, info.value)


def _top_level_field_ends(data: bytes) -> set[int]:
    """Offsets where a top-level protobuf field ends: a message cut there is a shorter valid message."""
    from finalfusion.compat._protowire import parse_message

    top = parse_message(data, "test")
    return {end for number in top.fields for _, end in top.messages(number)}


@pytest.mark.parametrize("name", ["lightseq_transformer.pb", "lightseq_quant_gpt.pb"])
def test_every_prefix_of_lightseq(name: str) -> None:
    # Protobuf has no overall length: a cut between two top-level fields is itself a valid message (e.g. a Transformer
    # without its decoder reads as a GPT/BERT export). Every other prefix must fail with a FormatError.
    from finalfusion.compat.lightseq import load_lightseq

    data = (MODELS / name).read_bytes()
    vocab = ["a", "b"]
    load_lightseq(data, vocab)
    boundaries = _top_level_field_ends(data)
    checked = 0
    for n in range(len(data)):
        if n in boundaries:
            continue
        with pytest.raises(FormatError) as info:
            load_lightseq(data[:n], vocab)
        assert info.type.__module__ == "finalfusion.errors", (n, info.value)
        checked += 1
    assert checked > len(data) // 2


MODELS = Path(__file__).resolve().parent / "data" / "models"


@pytest.mark.parametrize("name", sorted(p.name for p in MODELS.glob("gguf_*.gguf")))
def test_every_prefix_of_gguf_files(name: str) -> None:
    from finalfusion.compat.gguf import read_gguf

    data = (MODELS / name).read_bytes()
    finalfusion.load_gguf(data)  # the whole file is valid
    head = read_gguf(data)
    end = max(t.offset + t.n_bytes for t in head.tensors.values())
    assert len(data) - end < head.alignment  # gguf-py pads the file after the last tensor: those prefixes are complete
    for n in range(end):
        with pytest.raises(FormatError) as info:
            finalfusion.load_gguf(data[:n])
        assert info.type.__module__ == "finalfusion.errors", (n, info.value)


def test_every_prefix_of_a_sentencepiece_model() -> None:
    # A protobuf cut at a field boundary is a valid, shorter message: such prefixes load (with as many rows as pieces);
    # all others are FormatErrors. Unknown words then go through sentencepiece, which must reject or tokenize.
    import numpy as np

    from finalfusion.compat.sentencepiece import SentencePieceModel
    from finalfusion.errors import MissingExtraError

    data = (MODELS / "sentencepiece_bpemb.model").read_bytes()
    loaded = 0
    for n in range(len(data)):
        try:
            pieces = SentencePieceModel.parse(data[:n]).pieces
            emb = finalfusion.load_sentencepiece(data[:n], np.ones((max(1, len(pieces)), 2), dtype=np.float32))
        except FormatError:  # a subclass from finalfusion.errors, nothing foreign
            continue
        loaded += 1
        with contextlib.suppress(FormatError, MissingExtraError):
            emb.embedding_batch(["fox", "zebra"])
    assert 0 < loaded < len(data)
