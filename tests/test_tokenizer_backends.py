"""The tokenizer back-ends (finalfusion._tokenizers): kinds, value semantics, loading, and library failures as FormatError."""

from __future__ import annotations

import json
import pickle
import sys
from pathlib import Path

import pytest

from finalfusion import FormatError, MissingExtraError
from finalfusion._tokenizers import _TOY_JSON as TOY
from finalfusion._tokenizers import is_rust_panic, rejected_by
from finalfusion.vocab import HuggingFaceTokenizer, SentencePieceTokenizer, Tokenizer

# --- kinds ------------------------------------------------------------------------------


def test_from_bytes_names_the_known_kinds_for_an_unknown_one() -> None:
    kinds = r"\['huggingface', 'huggingface-llamacpp', 'sentencepiece', 'sentencepiece-llamacpp'\]"
    with pytest.raises(ValueError, match=r"unknown tokenizer kind 'bpe': expected one of " + kinds):
        Tokenizer.from_bytes("bpe", b"")


def test_registering_a_kind_twice_fails() -> None:
    with pytest.raises(RuntimeError, match="tokenizer kind 'huggingface' is registered twice"):
        type("Again", (Tokenizer,), {"kind": "huggingface"})


# --- value semantics --------------------------------------------------------------------


def test_tokenizers_compare_hash_and_pickle_by_kind_and_bytes() -> None:
    a, b = HuggingFaceTokenizer(b"{}"), HuggingFaceTokenizer("{}")
    assert a == b
    assert hash(a) == hash(b)
    assert a != SentencePieceTokenizer(b"{}")  # same bytes, other kind
    assert a != "{}"
    assert repr(a) == "HuggingFaceTokenizer(<2 bytes>)"
    c = pickle.loads(pickle.dumps(a))
    assert c == a
    assert c._impl is None  # rebuilt lazily


def test_constructors_read_paths_and_buffers(tmp_path: Path) -> None:
    path = tmp_path / "tokenizer.json"
    path.write_text(TOY)
    assert HuggingFaceTokenizer(path).to_bytes() == TOY.encode()
    assert HuggingFaceTokenizer(str(path)).to_bytes() == TOY.encode()
    (tmp_path / "m.model").write_bytes(b"\x0a\x00")
    assert SentencePieceTokenizer(tmp_path / "m.model").to_bytes() == b"\x0a\x00"
    assert SentencePieceTokenizer(memoryview(b"xy")).to_bytes() == b"xy"


# --- loading the library ------------------------------------------------------------------


def test_tokenizing_without_the_package_names_the_models_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "tokenizers", None)
    monkeypatch.setitem(sys.modules, "sentencepiece", None)
    with pytest.raises(MissingExtraError, match=r"needs the tokenizers package: pip install 'finalfusion-py\[models\]'") as err:
        HuggingFaceTokenizer(TOY).encode("ab")
    assert (err.value.name, err.value.extra) == ("tokenizers", "models")
    with pytest.raises(MissingExtraError, match="needs the sentencepiece package") as err:
        SentencePieceTokenizer(b"").pieces("ab")
    assert (err.value.name, err.value.extra) == ("sentencepiece", "models")


def test_huggingface_rejects_malformed_json_as_format_error() -> None:
    pytest.importorskip("tokenizers")
    with pytest.raises(FormatError, match=r"tokenizer\.json: the tokenizers library rejects the tokenizer\.json"):
        HuggingFaceTokenizer(b'{"model": 3}').encode("a")
    with pytest.raises(FormatError, match=r"tokenizer\.json: not a valid tokenizer\.json: expected a JSON object, found 'utf-8' codec"):
        HuggingFaceTokenizer(b"\xff").encode("a")


def test_sentencepiece_rejects_malformed_model_as_format_error() -> None:
    pytest.importorskip("sentencepiece")
    with pytest.raises(FormatError, match="SentencePiece model: the sentencepiece library rejects the model"):
        SentencePieceTokenizer(b"\xff\xff\xff").encode("a")


def test_huggingface_unk_token_not_in_vocab_is_not_skipped() -> None:
    pytest.importorskip("tokenizers")
    doc = json.loads(TOY)
    doc["added_tokens"] = []
    doc["model"]["unk_token"] = "[MISSING]"
    tok = HuggingFaceTokenizer(json.dumps(doc))
    assert tok.skip_ids == frozenset()
    assert tok.pieces("abc") == ["ab", "c"]


# --- the one wrapper ------------------------------------------------------------------------


def _panic_class() -> type[BaseException]:
    """A stand-in for pyo3's PanicException: a BaseException from the module pyo3_runtime."""
    return type("PanicException", (BaseException,), {"__module__": "pyo3_runtime"})


def test_a_rust_panic_in_a_library_becomes_a_format_error() -> None:
    panic = _panic_class()("called `Option::unwrap()` on a `None` value")
    assert is_rust_panic(panic)
    expected = r"x model: the x library rejects the model: expected a valid model, found called `Option"
    with pytest.raises(FormatError, match=expected) as err, rejected_by("x", "model", chunk="x model", expected="a valid model"):
        raise panic
    assert err.value.chunk == "x model"


def test_the_wrapper_bounds_the_library_message() -> None:
    with pytest.raises(FormatError) as err, rejected_by("x", "model", chunk="x", expected="y"):
        raise RuntimeError("z" * 1000)
    assert err.value.found == "z" * 200


@pytest.mark.parametrize("exc", [KeyboardInterrupt(), SystemExit(3), GeneratorExit()])
def test_the_wrapper_lets_interrupts_and_exits_through(exc: BaseException) -> None:
    assert not is_rust_panic(exc)
    with pytest.raises(type(exc)), rejected_by("x", "model", chunk="x", expected="y"):
        raise exc
