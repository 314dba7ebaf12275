"""llama.cpp's own tokenizer tests: every string of every ``ggml-vocab-*.gguf`` gives exactly llama.cpp's ids.

The vocabularies and expected ids come from llama.cpp's ``models/`` directory
(inside the llama-cpp-python sdist): ``python tests/llamacpp_vocabs.py fetch DIR``
downloads and extracts them, and ``FINALFUSION_LLAMACPP_VOCABS=DIR`` points the
tests at them. Each file is loaded with ``load_gguf`` (a one-column table added
with gguf-py's ``GGUFWriter``: the files hold no tensors) and every test string
is looked up as a word: its ids, control, unknown and unused tokens dropped,
must be llama.cpp's with the same tokens dropped.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from llamacpp_vocabs import ENV, check, read_cases, vocab_files

DIRECTORY = os.environ.get(ENV)
FILES = vocab_files(DIRECTORY) if DIRECTORY else []
SKIP_REASON = f"{ENV} is not set (run: python tests/llamacpp_vocabs.py fetch DIR; export {ENV}=DIR)"


def test_the_vocabularies_are_there() -> None:
    if not DIRECTORY:
        pytest.skip(SKIP_REASON)
    names = {p.name for p in FILES}
    # The vocabularies llama.cpp tests, one per tokenizer family: a fetch that lost some must not pass quietly.
    for family in ("bert-bge", "gpt-2", "llama-bpe", "llama-spm", "phi-3", "qwen2"):
        assert f"ggml-vocab-{family}.gguf" in names, sorted(names)


def test_cases_are_read_as_llama_cpp_reads_them(tmp_path: Path) -> None:
    vocab = tmp_path / "ggml-vocab-x.gguf"
    vocab.with_name(vocab.name + ".inp").write_bytes(b"a\n\n__ggml_vocab_test__\n\n__ggml_vocab_test__\n b\n__ggml_vocab_test__\n")
    vocab.with_name(vocab.name + ".out").write_text(" 1 2\n\n 3\n")
    assert read_cases(vocab) == [("a\n", [1, 2]), ("", []), (" b", [3])]


@pytest.mark.parametrize("path", FILES or [None], ids=[p.name[len("ggml-vocab-") : -len(".gguf")] for p in FILES] or ["unset"])
def test_llama_cpp_tokenizer_tests(path: Path | None) -> None:
    if path is None:
        pytest.skip(SKIP_REASON)
    for package in ("gguf", "sentencepiece", "tokenizers"):
        pytest.importorskip(package)
    result = check(path)
    assert not result.error, result.error
    shown = "\n".join(f"  {text!r}: llama.cpp {expected}, ours {found}" for text, expected, found in result.failures[:10])
    assert result.passed == result.total, f"{result.name}: {result.passed} / {result.total} strings give llama.cpp's ids\n{shown}"


#: The vocabularies whose tokenizer keys write_gguf writes back from the metadata's carried token types and scores (their
#: tokenizer cannot hold them: bert and gemma4 are a tokenizer.json, Phi-3's padding is UNUSED in sentencepiece).
WRITTEN_BACK = [p for p in FILES if p.name in ("ggml-vocab-bert-bge.gguf", "ggml-vocab-gemma-4.gguf", "ggml-vocab-phi-3.gguf")]


@pytest.mark.parametrize("path", WRITTEN_BACK or [None], ids=[p.name[len("ggml-vocab-") : -len(".gguf")] for p in WRITTEN_BACK] or ["unset"])
def test_files_written_back_keep_the_keys_and_tokenize_as_llama_cpp(path: Path | None) -> None:
    # load_gguf -> .fifu -> write_gguf: the written file has the source's tokenizer keys and gives llama.cpp's ids.
    if path is None:
        pytest.skip(SKIP_REASON)
    for package in ("gguf", "sentencepiece", "tokenizers"):
        pytest.importorskip(package)
    result = check(path, written=True)
    assert not result.error, result.error
    shown = "\n".join(f"  {text!r}: llama.cpp {expected}, ours {found}" for text, expected, found in result.failures[:10])
    assert result.passed == result.total, f"{result.name} written back: {result.passed} / {result.total} strings give llama.cpp's ids\n{shown}"
