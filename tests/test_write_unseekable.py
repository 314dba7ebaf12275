"""Writing a finalfusion file to a stream that cannot tell or seek (a pipe, a socket) gives the same bytes."""

from __future__ import annotations

import io

import numpy as np

import finalfusion
from finalfusion import Embeddings, NdArray, SimpleVocab


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


def test_write_finalfusion_to_an_unseekable_stream_gives_the_seekable_bytes() -> None:
    emb = Embeddings(NdArray(np.eye(2, dtype=np.float32)), SimpleVocab(["a", "b"]))
    out = WriteOnly()
    emb.write(out)
    buf = io.BytesIO()
    emb.write(buf)
    assert bytes(out.data) == buf.getvalue()
    assert finalfusion.load_finalfusion(bytes(out.data)).vocab.words == ["a", "b"]
