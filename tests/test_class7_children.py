"""Issue 13, class 7 (absurd dimensions from tiny files), for every reader, in forked children under an address-space limit.

A 72-byte ``.fifu`` with 2^32-1 columns and a 13-byte word2vec header
claiming 2^31 dimensions used to load and then allocate 8-16 GiB on the first
lookup. ``finalfusion.limits.MAX_DIMS`` refuses such counts where they are
read (tests/test_bounds.py checks the messages); here every reader gets tiny
files claiming absurd dimensions or rows -- and files right at the limit,
which must load -- and the load plus a user's first steps (lookups, a batch,
a similarity query, a write, a re-read, a pickle: ``fuzz.exercise``) must
end in an answer or a :class:`~finalfusion.FinalfusionError` within
:data:`EXTRA_MB` of address space, the audit's method (tests/_bounded.py).
"""

from __future__ import annotations

import io
import json
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import finalfusion
import finalfusion.limits as limits
from _bounded import bounded
from _model_helpers import varint
from conftest import load_fuzz
from finalfusion import Embeddings, FinalfusionError, NdArray, SimpleVocab
from test_hostile import bucket_vocab, build, ndarray, pad, quantized, simple_vocab

fuzz = load_fuzz()
TESTDATA = Path(__file__).parent / "data"
EXTRA_MB = 300
HUGE_DIMS = [limits.MAX_DIMS + 1, 2**31, 2**32 - 1]
HUGE_ROWS = [2**31, 2**40, 2**63]


def in_child(load: Callable[[], Any]) -> str:
    """Load and exercise in a forked child under the limit; ``"ok"`` or the name of the FinalfusionError raised."""

    def run() -> str:
        try:
            fuzz.exercise(load())
        except FinalfusionError as exc:
            return type(exc).__name__
        return "ok"

    return str(bounded(run, extra_mb=EXTRA_MB))


def from_file(loader: Callable[..., Any], data: bytes, tmp: Path, name: str, **kw: Any) -> Callable[[], Any]:
    path = tmp / name
    path.write_bytes(data)
    return lambda: loader(path, **kw)


# -- finalfusion ---------------------------------------------------------------------------------------


def quantized_head(q: int, d: int, k: int, r: int) -> Callable[[int], bytes]:
    """A quantized chunk's fields claiming ``q`` subquantizers, reconstructed length ``d``, ``k`` centroids and ``r`` rows, and no data."""

    def make(at: int) -> bytes:
        return struct.pack("<5IQ2I", 0, 0, q, d, k, r, 1, 10) + pad(at + 36)

    return make


def fifu_cases() -> dict[str, bytes]:
    cases = {}
    for cols in HUGE_DIMS:
        cases[f"simple-0x{cols}"] = build([(1, simple_vocab([])), (2, ndarray(0, cols))])  # the audit's 72-byte file
        cases[f"bucket-0x{cols}"] = build([(3, bucket_vocab([], exp_or_buckets=0)), (2, ndarray(0, cols))])
        cases[f"quantized-d{cols}"] = build([(1, simple_vocab(["a"])), (4, quantized_head(1, cols, 1, 1))])
    for rows in HUGE_ROWS:
        cases[f"simple-{rows}x1"] = build([(1, simple_vocab(["a"])), (2, ndarray(rows, 1, data_rows=1))])
        cases[f"quantized-r{rows}"] = build([(1, simple_vocab(["a"])), (4, quantized(1, 4, 2, rows, codes=np.zeros((1, 1))))])
    return cases


FIFU = fifu_cases()


@pytest.mark.parametrize("mmap", [False, True])
@pytest.mark.parametrize("name", sorted(FIFU))
def test_finalfusion_tiny_files_claiming_absurd_shapes(name: str, mmap: bool, tmp_path: Path) -> None:
    data = FIFU[name]
    assert len(data) <= 200
    assert in_child(from_file(finalfusion.load_finalfusion, data, tmp_path, "tiny.fifu", mmap=mmap)) in ("FormatError", "Truncated")


@pytest.mark.parametrize("vocab", ["simple", "bucket"])
def test_finalfusion_at_the_limit_loads_and_answers(vocab: str, tmp_path: Path) -> None:
    # MAX_DIMS columns are legal: zero rows (simple) or one bucket row of 4 MiB (every unknown word's vector).
    v = (1, simple_vocab([])) if vocab == "simple" else (3, bucket_vocab([], exp_or_buckets=0))
    data = build([v, (2, ndarray(0 if vocab == "simple" else 1, limits.MAX_DIMS))])
    assert in_child(from_file(finalfusion.load_finalfusion, data, tmp_path, "limit.fifu")) == "ok"


# -- the text formats ----------------------------------------------------------------------------------

TEXT_HEADERS = [f"1 {d}\n" for d in HUGE_DIMS] + [f"{r} 2\n" for r in HUGE_ROWS] + [f"{2**64 - 1} {2**64 - 1}\n"]


@pytest.mark.parametrize("header", TEXT_HEADERS, ids=lambda h: h.strip().replace(" ", "x"))
@pytest.mark.parametrize("loader", ["load_word2vec", "load_text_dims", "load"])
def test_text_headers_claiming_absurd_shapes(loader: str, header: str, tmp_path: Path) -> None:
    data = header.encode() + b"a 1 2\n"
    assert len(data) <= 60
    assert in_child(from_file(getattr(finalfusion, loader), data, tmp_path, "tiny.txt")) in ("FormatError", "Truncated")


@pytest.mark.parametrize("loader", ["load_word2vec", "load_text_dims"])
def test_text_headers_at_the_limit_load_and_answer(loader: str, tmp_path: Path) -> None:
    emb = Embeddings(NdArray(np.ones((1, limits.MAX_DIMS), dtype=np.float32)), SimpleVocab(["a"]))
    out = io.BytesIO()
    (finalfusion.write_word2vec if loader == "load_word2vec" else finalfusion.write_text_dims)(out, emb)
    assert in_child(from_file(getattr(finalfusion, loader), out.getvalue(), tmp_path, "limit")) == "ok"
    assert in_child(from_file(getattr(finalfusion, loader), f"0 {limits.MAX_DIMS}\n".encode(), tmp_path, "empty")) == "ok"


def test_text_line_with_more_components_than_any_embedding(tmp_path: Path) -> None:
    # The text format has no header: the first line's components are the dims (2 MB here, the smallest such file).
    data = b"a" + b" 0" * (limits.MAX_DIMS + 1) + b"\n"
    assert in_child(from_file(finalfusion.load_text, data, tmp_path, "wide.txt")) == "FormatError"


FLORET_HEADERS = [f"10 {d} 3 6 2 0 < >\n" for d in HUGE_DIMS] + [f"{r} 2 3 6 2 0 < >\n" for r in HUGE_ROWS]


@pytest.mark.parametrize("header", FLORET_HEADERS, ids=lambda h: "x".join(h.split()[:2]))
def test_floret_headers_claiming_absurd_shapes(header: str, tmp_path: Path) -> None:
    data = header.encode() + b"0 1 2\n"
    assert in_child(from_file(finalfusion.load_floret, data, tmp_path, "tiny.floret")) in ("FormatError", "Truncated")


# -- fastText ------------------------------------------------------------------------------------------


def fasttext_patched(field: str, value: int) -> bytes:
    """rust-fasttext.bin with ``dim`` (args, offset 8) or the input matrix's rows or columns (i64) set to ``value``."""
    data = bytearray((TESTDATA / "testdata" / "rust-fasttext.bin").read_bytes())
    if field == "dim":
        data[8:12] = value.to_bytes(4, "little")
        return bytes(data)
    emb = finalfusion.load_fasttext(TESTDATA / "testdata" / "rust-fasttext.bin")
    rows, cols = emb.storage.shape
    at = bytes(data).rfind(struct.pack("<qq", rows, cols))
    assert at > 0
    data[at : at + 16] = struct.pack("<qq", value, cols) if field == "rows" else struct.pack("<qq", rows, value)
    return bytes(data)


@pytest.mark.parametrize(
    ("field", "value"), [("dim", d) for d in HUGE_DIMS[:2]] + [("rows", min(r, 2**63 - 1)) for r in HUGE_ROWS] + [("cols", d) for d in HUGE_DIMS]
)
def test_fasttext_claiming_absurd_shapes(field: str, value: int, tmp_path: Path) -> None:
    data = fasttext_patched(field, value)
    assert in_child(from_file(finalfusion.load_fasttext, data, tmp_path, "tiny.bin")) in ("FormatError", "Truncated")


# -- GGUF ----------------------------------------------------------------------------------------------


def gguf_patched(rows: int, dims: int) -> bytes:
    """A GGUF file of a 2 x 3 table whose tensor info claims ``rows`` x ``dims`` (``ne`` = dims, rows)."""
    out = io.BytesIO()
    emb = Embeddings(NdArray(np.arange(6, dtype=np.float32).reshape(2, 3) + 1), SimpleVocab(["a", "b"]))
    finalfusion.write_gguf(out, emb)
    data = bytearray(out.getvalue())
    name = b"token_embd.weight"
    at = bytes(data).find(struct.pack("<Q", len(name)) + name + struct.pack("<I", 2))
    assert at > 0
    ne = at + 8 + len(name) + 4
    assert struct.unpack_from("<QQ", data, ne) == (3, 2)
    data[ne : ne + 16] = struct.pack("<QQ", dims, rows)
    return bytes(data)


@pytest.mark.parametrize(("rows", "dims"), [(2, d) for d in HUGE_DIMS] + [(r, 3) for r in HUGE_ROWS] + [(0, 2**32 - 1)])
@pytest.mark.parametrize("mmap", [False, True])
def test_gguf_claiming_absurd_shapes(rows: int, dims: int, mmap: bool, tmp_path: Path) -> None:
    data = gguf_patched(rows, dims)
    load = from_file(finalfusion.load_gguf, data, tmp_path, "tiny.gguf", mmap=mmap, normalize=not mmap)
    assert in_child(load) in ("FormatError", "Truncated")


# -- safetensors ---------------------------------------------------------------------------------------


def safetensors_file(shape: list[int], data_bytes: int = 0) -> bytes:
    head = json.dumps({"embeddings": {"dtype": "F32", "shape": shape, "data_offsets": [0, data_bytes]}}).encode()
    return struct.pack("<Q", len(head)) + head + bytes(data_bytes)


@pytest.mark.parametrize("shape", [[0, d] for d in HUGE_DIMS] + [[2, d] for d in HUGE_DIMS] + [[r, 2] for r in HUGE_ROWS] + [[2**32, 2**32]])
def test_safetensors_claiming_absurd_shapes(shape: list[int], tmp_path: Path) -> None:
    data = safetensors_file(shape, 16)
    load = from_file(lambda p: finalfusion.load_safetensors(p, tokenizer=["a", "b"]), data, tmp_path, "tiny.safetensors")
    assert in_child(load) in ("FormatError", "Truncated")


# -- LightSeq and sentencepiece: their shapes come from length-delimited protobuf fields ---------------


def field(number: int, payload: bytes, claimed: int | None = None) -> bytes:
    return varint(number << 3 | 2) + varint(len(payload) if claimed is None else claimed) + payload


@pytest.mark.parametrize("claimed", [*HUGE_ROWS, 2**64 - 1])
@pytest.mark.parametrize("where", ["table", "norm", "message"])
def test_lightseq_claiming_absurd_lengths(where: str, claimed: int) -> None:
    table, norm = np.ones(4, "<f4").tobytes(), np.ones(2, "<f4").tobytes()
    inner = field(1, table, claimed if where == "table" else None) + field(3, norm, claimed if where == "norm" else None)
    data = field(1, inner, claimed if where == "message" else None)
    assert in_child(lambda: finalfusion.load_lightseq(data, ["a", "b"])) in ("FormatError", "Truncated")


@pytest.mark.parametrize("claimed", [*HUGE_ROWS, 2**64 - 1])
def test_sentencepiece_model_claiming_absurd_lengths(claimed: int) -> None:
    from finalfusion.compat.sentencepiece import load_sentencepiece

    piece = field(1, b"a") + b"\x15" + struct.pack("<f", 0.0)  # SentencePiece{piece: "a", score: 0}
    model = field(1, piece) + field(1, piece, claimed)
    vectors = np.ones((2, 3), dtype=np.float32)
    assert in_child(lambda: load_sentencepiece(model, vectors)) in ("FormatError", "Truncated")


# -- every reader through the sniffer, with the gzip it decompresses -----------------------------------


def sniffed_cases() -> dict[str, bytes]:
    cases = {f"fifu-{k}": v for k, v in FIFU.items() if k.startswith("simple-0x")}
    cases.update({f"text-{h.strip()}": h.encode() + b"a 1 2\n" for h in TEXT_HEADERS[:3]})
    cases.update({f"floret-{h.split()[1]}": h.encode() + b"0 1 2\n" for h in FLORET_HEADERS[:3]})
    cases["fasttext-dim"] = fasttext_patched("dim", 2**31)
    cases["gguf-dims"] = gguf_patched(2, 2**31)
    return cases


SNIFFED = sniffed_cases()


@pytest.mark.parametrize("gz", [False, True], ids=["plain", "gzip"])
@pytest.mark.parametrize("name", sorted(SNIFFED))
def test_load_of_every_format_claiming_absurd_shapes(name: str, gz: bool, tmp_path: Path) -> None:
    import gzip

    data = gzip.compress(SNIFFED[name]) if gz else SNIFFED[name]
    assert in_child(from_file(finalfusion.load, data, tmp_path, "tiny")) in ("FormatError", "Truncated", "BadMagic")
