"""Text and word2vec readers at their limits, format sniffing of text-dims, writing to unseekable streams, Metadata equality."""

from __future__ import annotations

import io

import numpy as np
import pytest

import finalfusion
from finalfusion import Embeddings, FormatError, NdArray, SimpleVocab
from finalfusion.compat import text
from finalfusion.compat.sniff import sniff_format
from finalfusion.metadata import Metadata


def test_word2vec_word_without_space(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(finalfusion.limits, "MAX_WORD_BYTES", 64)
    data = b"1 2\n" + b"w" * 200
    with pytest.raises(FormatError, match="no space after a word in its first 64 bytes") as err:
        finalfusion.load_word2vec(data)
    assert err.value.offset == 4
    assert err.value.chunk is not None
    assert err.value.chunk.endswith(" 1")


def test_text_line_too_long(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(finalfusion.limits, "MAX_LINE_BYTES", 64)
    monkeypatch.setattr(text, "_BLOCK", 16)  # the line arrives in pieces, none with its end
    data = b"a 1.0 2.0\n" + b"b" + b" 1.0" * 40 + b"\n"
    with pytest.raises(FormatError, match="line too long") as err:
        finalfusion.load_text(data)
    assert err.value.offset == 10
    assert err.value.chunk == "text line 2"


@pytest.mark.parametrize("sample", [b"2 3\nword", b"2 0\nw 1\n"])
def test_sniff_text_dims(sample: bytes) -> None:
    assert sniff_format(sample) == "text-dims"


class WriteOnly(io.RawIOBase):
    """A stream that can only be written to (a pipe, a socket): no tell, no seek."""

    def __init__(self) -> None:
        self.data = bytearray()

    def writable(self) -> bool:
        return True

    def write(self, b: object) -> int:
        view = memoryview(b).cast("B")  # type: ignore[arg-type]
        self.data += view
        return len(view)

    def tell(self) -> int:
        raise io.UnsupportedOperation("not seekable")


def test_write_finalfusion_to_an_unseekable_stream() -> None:
    emb = Embeddings(NdArray(np.eye(2, dtype=np.float32)), SimpleVocab(["a", "b"]))
    out = WriteOnly()
    emb.write(out)
    buf = io.BytesIO()
    emb.write(buf)
    assert bytes(out.data) == buf.getvalue()
    assert finalfusion.load_finalfusion(bytes(out.data)).vocab.words == ["a", "b"]


def test_metadata_equality() -> None:
    meta = Metadata({"name": "x"})
    assert meta == {"name": "x"}
    assert meta != {"name": "y"}
    assert meta == Metadata({"name": "x"})
    assert meta != 3
