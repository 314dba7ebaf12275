"""Real text, not just words: ``load_gguf``'s tokenizer gives llama.cpp's ids (issue 35).

The reference is llama.cpp itself (llama-cpp-python 0.3.36, built from its sdist):
``Llama(path, vocab_only=True).tokenize(text.encode(), add_bos=False, special=False)``
on runs of spaces and tabs, special-token text, every script and real lines
(``tests/llamacpp_text_cases.py``). Its ids are committed in
``tests/data/llamacpp_text_ids.json`` (provenance in ``tests/data/README.md``),
so these tests need no llama.cpp: the toy vocabularies are built here with
gguf-py's ``GGUFWriter``; llama.cpp's own vocabularies need
``FINALFUSION_LLAMACPP_VOCABS`` (``tests/llamacpp_vocabs.py``), the Gemma 3
270M GGUF ``FINALFUSION_GEMMA3_GGUF`` (``bench/bench_models.py`` says how to
assemble it). Where llama-cpp-python is installed, the last test asks llama.cpp
itself, on the same texts and on lines mixed from them.
"""

from __future__ import annotations

import json
import os
import random
from pathlib import Path

import pytest

from llamacpp_text_cases import SPECIAL, TEXTS, TOYS
from llamacpp_vocabs import ENV, loadable

FIXTURE = Path(__file__).parent / "data" / "llamacpp_text_ids.json"
DATA = json.loads(FIXTURE.read_text(encoding="utf-8"))
VOCABS = os.environ.get(ENV)
GEMMA3 = os.environ.get("FINALFUSION_GEMMA3_GGUF")
#: llama.cpp's vocabularies in the fixture (the files are llama.cpp's, fetched by tests/llamacpp_vocabs.py).
LLAMACPP_FILES = sorted(name for name in DATA["ids"] if name.startswith("ggml-vocab-"))


def _ours(path: Path) -> list[list[int]]:
    from finalfusion import load_gguf

    tokenizer = load_gguf(path, normalize=False).vocab.tokenizer
    return [tokenizer.encode(text) for text in TEXTS]


def _compare(name: str, found: list[list[int]]) -> None:
    expected = DATA["ids"][name]
    wrong = [(t, e, f) for t, e, f in zip(TEXTS, expected, found, strict=True) if e != f]
    shown = "\n".join(f"  {t!r}: llama.cpp {e}, ours {f}" for t, e, f in wrong[:8])
    assert not wrong, f"{name}: {len(wrong)} of {len(TEXTS)} texts differ from llama.cpp\n{shown}"


def test_the_fixture_holds_every_text() -> None:
    assert DATA["texts"] == TEXTS
    assert DATA["llama_cpp_python"] == "0.3.36"
    assert all(len(ids) == len(TEXTS) for ids in DATA["ids"].values())


@pytest.mark.parametrize("name", sorted(TOYS))
def test_toy_vocabularies_tokenize_text_as_llama_cpp(tmp_path: Path, name: str) -> None:
    for package in ("gguf", "sentencepiece"):
        pytest.importorskip(package)
    _compare(name, _ours(TOYS[name](tmp_path / name)))


@pytest.mark.parametrize("name", LLAMACPP_FILES)
def test_llama_cpp_vocabularies_tokenize_text_as_llama_cpp(tmp_path: Path, name: str) -> None:
    if not VOCABS:
        pytest.skip(f"{ENV} is not set (run: python tests/llamacpp_vocabs.py fetch DIR; export {ENV}=DIR)")
    for package in ("gguf", "sentencepiece", "tokenizers"):
        pytest.importorskip(package)
    _compare(name, _ours(loadable(Path(VOCABS) / name, tmp_path / name)))


def test_gemma3_tokenizes_text_as_llama_cpp() -> None:
    if not GEMMA3:
        pytest.skip("FINALFUSION_GEMMA3_GGUF is not set (the Gemma 3 270M GGUF: see bench/bench_models.py)")
    pytest.importorskip("sentencepiece")
    _compare("gemma-3-270m-q4_k_m.gguf", _ours(Path(GEMMA3)))


def test_against_llama_cpp_itself(tmp_path: Path) -> None:
    # llama-cpp-python is not an extra of this project: where it is installed, llama.cpp itself is asked.
    llama_cpp = pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed (it is the reference, not a dependency)")
    for package in ("gguf", "sentencepiece", "tokenizers"):
        pytest.importorskip(package)
    from finalfusion import load_gguf

    rng = random.Random(35)
    lines = [" ".join(rng.sample(TEXTS, 3)) for _ in range(60)] + ["".join(rng.sample(TEXTS, 2)) for _ in range(30)]
    paths = [TOYS[name](tmp_path / name) for name in sorted(TOYS)]
    if VOCABS:
        paths += [loadable(Path(VOCABS) / name, tmp_path / name) for name in LLAMACPP_FILES]
    for path in paths:
        llm = llama_cpp.Llama(model_path=str(path), vocab_only=True, verbose=False)
        tokenizer = load_gguf(path, normalize=False).vocab.tokenizer
        for text in [*TEXTS, *lines]:
            assert tokenizer.encode(text) == llm.tokenize(text.encode("utf-8"), add_bos=False, special=False), (path.name, text)


def test_sentencepiece_and_tokenizer_json_sources_follow_their_own_library() -> None:
    # Special-token text is the library's answer per source: sentencepiece spells control pieces out, tokenizers matches
    # special added tokens; only GGUF files follow llama.cpp (above).
    import numpy as np

    from _model_helpers import train_byte_level_bpe, train_sentencepiece
    from finalfusion import load_sentencepiece
    from finalfusion.vocab import HuggingFaceTokenizer

    spm = pytest.importorskip("sentencepiece")
    tokenizers = pytest.importorskip("tokenizers")
    proto = train_sentencepiece("bpe", True)
    sp = spm.SentencePieceProcessor(model_proto=proto)
    emb = load_sentencepiece(proto, np.ones((sp.GetPieceSize(), 2), dtype=np.float32))
    for text in SPECIAL:
        assert emb.vocab.tokenizer.encode(text) == sp.encode(text), text
    assert sp.piece_to_id("</s>") not in emb.vocab.tokenizer.encode("hello</s> world")  # a control piece is text
    doc = train_byte_level_bpe()
    tok = tokenizers.Tokenizer.from_str(doc)
    ours = HuggingFaceTokenizer(doc)
    for text in SPECIAL:
        assert ours.encode(text) == tok.encode(text, add_special_tokens=False).ids, text
    assert tok.token_to_id("<|endoftext|>") in ours.encode("a<|endoftext|>b")  # a special added token is matched in text
