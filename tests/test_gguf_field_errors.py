"""A malformed GGUF tokenizer field is a FormatError, and what write_gguf cannot write is named (issue 33).

The audit: a GGUF whose ``tokenizer.huggingface.json`` is not JSON (``/dev/zero``, a FIFO's name,
garbage) loaded, the value silently dropped; ``write_gguf`` of embeddings whose stored tokenizer it
cannot write (SentencePiece piece types beyond 32 bits, a stored ``tokenizer.json`` that is not
text) raised a bare ``ValueError``. Every file here is written by gguf-py's ``GGUFWriter``.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import finalfusion
from finalfusion import FinalfusionError, FormatError, load_gguf
from finalfusion._tokenizers import Tokenizer
from finalfusion.compat.gguf import write_gguf
from finalfusion.embeddings import Embeddings
from finalfusion.storage import NdArray
from finalfusion.vocab import TokenizerVocab

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_cli import command, env

gguf = pytest.importorskip("gguf")
tokenizers = pytest.importorskip("tokenizers")


def _write(path: Path, model: str, tokens: list[str], **keys: Any) -> Path:
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_tokenizer_model(model)
    writer.add_token_list(tokens)
    for key, value in keys.items():
        if isinstance(value, str):
            writer.add_string(key, value)
        elif isinstance(value, tuple):  # (values, element type)
            writer.add_key_value(key, value[0], gguf.GGUFValueType.ARRAY, sub_type=value[1])
        else:
            writer.add_array(key, value)
    writer.add_tensor("token_embd.weight", np.arange(len(tokens) * 3, dtype=np.float32).reshape(len(tokens), 3))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def _real_tokenizer_json() -> str:
    tok = tokenizers.Tokenizer(tokenizers.models.WordLevel({"a": 0, "b": 1, "[UNK]": 2}, unk_token="[UNK]"))
    tok.pre_tokenizer = tokenizers.pre_tokenizers.Whitespace()
    return str(tok.to_str())


#: gpt2 keys that build the tokenizer by themselves: there the value was dropped without a word.
GPT2: dict[str, Any] = {"tokenizer.ggml.merges": ["a b"]}


@pytest.mark.parametrize("model", ["gpt2", "none"])
@pytest.mark.parametrize("value", ["/dev/zero", "fifo", "{not json", "[1, 2]", "null"])
def test_a_malformed_huggingface_json_is_a_format_error(tmp_path: Path, model: str, value: str) -> None:
    if value == "fifo":
        value = str(tmp_path / "pipe")
        os.mkfifo(value)  # never opened: if it were, the load would block
    path = _write(tmp_path / "m.gguf", model, ["a", "b", "ab"], **{"tokenizer.huggingface.json": value}, **(GPT2 if model == "gpt2" else {}))
    with pytest.raises(FormatError, match=r"tokenizer\.huggingface\.json is not a tokenizer\.json") as err:
        load_gguf(path)
    assert err.value.expected == "a JSON object"
    assert err.value.chunk == "GGUF"


@pytest.mark.parametrize("model", ["gpt2", "none"])
def test_a_real_huggingface_json_still_loads(tmp_path: Path, model: str) -> None:
    path = _write(tmp_path / "m.gguf", model, ["a", "b", "ab"], **{"tokenizer.huggingface.json": _real_tokenizer_json()}, **(GPT2 if model == "gpt2" else {}))
    emb = load_gguf(path, normalize=False)
    assert emb.vocab.words == ["a", "b", "ab"]
    np.testing.assert_array_equal(emb["b"], [3, 4, 5])


def test_the_command_line_names_the_malformed_field(tmp_path: Path) -> None:
    path = _write(tmp_path / "m.gguf", "gpt2", ["a", "b", "ab"], **{"tokenizer.huggingface.json": "garbage"}, **GPT2)
    r = subprocess.run([*command(), "convert", path, tmp_path / "out.fifu"], capture_output=True, text=True, env=env(), timeout=300, check=False)
    assert r.returncode == 1, r.stderr
    assert "tokenizer.huggingface.json is not a tokenizer.json" in r.stderr
    assert not (tmp_path / "out.fifu").exists()


def _llama_with_wide_token_types(path: Path) -> Path:
    """A ``llama`` (SentencePiece) vocabulary whose token types gguf-py stores as int64, one beyond 32 bits."""
    tokens = ["<unk>", "<s>", "</s>", "\u2581a", "\u2581b", "a", "b"]
    return _write(
        path,
        "llama",
        tokens,
        **{
            "tokenizer.ggml.scores": [0.0, 0.0, 0.0, -1.0, -2.0, -3.0, -4.0],
            "tokenizer.ggml.token_type": ([2, 3, 3, 1, 1, 1, 1 << 40], gguf.GGUFValueType.INT64),
        },
    )


def test_write_gguf_names_token_types_beyond_32_bits(tmp_path: Path) -> None:
    emb = load_gguf(_llama_with_wide_token_types(tmp_path / "wide.gguf"))
    out = tmp_path / "out.gguf"
    with pytest.raises(FinalfusionError, match=r"tokenizer\.ggml\.token_type cannot be written as a GGUF array of int32") as err:
        write_gguf(out, emb)
    assert isinstance(err.value, ValueError)  # as before, for callers that catch ValueError
    assert "1099511627776" in str(err.value)
    assert not out.exists()
    # the command line says the same, with status 1 and nothing written
    r = subprocess.run([*command(), "convert", tmp_path / "wide.gguf", out], capture_output=True, text=True, env=env(), timeout=300, check=False)
    assert r.returncode == 1, r.stderr
    assert "tokenizer.ggml.token_type" in r.stderr
    assert not out.exists()


def test_write_gguf_names_a_stored_tokenizer_json_that_is_not_text(tmp_path: Path) -> None:
    """A ``.fifu`` (anyone's) may store tokenizer bytes that are no text: written back as GGUF they are named, not a bare ValueError."""
    tok = Tokenizer.from_bytes("huggingface", b"\x80\x81 not text")
    Embeddings(NdArray(np.ones((2, 2), np.float32)), TokenizerVocab(["a", "b"], tok)).write(tmp_path / "e.fifu")
    emb = finalfusion.load_finalfusion(tmp_path / "e.fifu")
    buf = io.BytesIO()
    with pytest.raises(FinalfusionError, match=r"cannot be written as tokenizer\.huggingface\.json") as err:
        write_gguf(buf, emb)
    assert isinstance(err.value, FormatError)
    assert err.value.expected == "text (UTF-8, -16 or -32)"
    assert buf.getvalue() == b""
