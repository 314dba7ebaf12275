"""write_gguf's options: the two table types it writes and the ones it refuses."""

from __future__ import annotations

import io

import numpy as np
import pytest

from finalfusion import Embeddings, load_gguf, write_gguf
from finalfusion.storage import NdArray
from finalfusion.vocab import SimpleVocab


def test_write_gguf_refuses_other_table_types() -> None:
    emb = Embeddings(NdArray(np.eye(2, dtype=np.float32)), SimpleVocab(["a", "b"]))
    with pytest.raises(ValueError, match="dtype must be 'F32' or 'F16', got 'Q8_0'"):
        write_gguf(io.BytesIO(), emb, dtype="Q8_0")


def test_an_f16_table_loads_back_exactly_with_its_type_recorded() -> None:
    emb = Embeddings(NdArray(np.array([[0.5, 1.0], [2.0, -4.0]], dtype=np.float32)), SimpleVocab(["a", "b"]))
    buf = io.BytesIO()
    write_gguf(buf, emb, dtype="F16")
    loaded = load_gguf(buf.getvalue(), normalize=False)
    assert loaded.metadata is not None
    assert loaded.metadata["gguf"]["type"] == "F16"
    assert loaded.vocab.words == ["a", "b"]
    np.testing.assert_array_equal(loaded.storage.matrix, emb.storage.matrix)
