"""Every tokenizer llama.cpp knows, built from GGUF metadata with ``tokenizers`` / ``sentencepiece`` (issue 25).

The exact ids are checked against llama.cpp's own test files in
``tests/test_llamacpp_vocabs.py`` (with ``FINALFUSION_LLAMACPP_VOCABS``); these
tests run everywhere, on vocabularies trained here with the real libraries.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from _model_helpers import corpus, random_words, sentencepiece_skip, train_byte_level_bpe, train_sentencepiece, train_wordpiece
from finalfusion import FormatError, load_gguf
from finalfusion._llamacpp_pre import IGNORE_MERGES, LLAMA_CPP_REGEXES, PRE_REGEXES, UNSUPPORTED
from finalfusion._tokenizers import KNOWN_REGEXES
from finalfusion.compat.gguf._tokenizer import byte_level_bpe_json, gguf_tokenizer
from finalfusion.vocab import TokenizerVocab

TEXT = "Hello, y'all! 3333 12345 e-mail U.S.A. naïve 我想在apple工作 \t\n\n  🦙 нещо"


def _bpe_tokens() -> tuple[list[str], list[str]]:
    pytest.importorskip("tokenizers")
    doc = json.loads(train_byte_level_bpe())
    vocab = doc["model"]["vocab"]
    tokens = sorted(vocab, key=vocab.__getitem__)
    return tokens, [m if isinstance(m, str) else " ".join(m) for m in doc["model"]["merges"]]


def _write(path: Path, tokens: list[str], kv: list[tuple[str, Any, str, str | None]]) -> Path:
    """A GGUF file written by gguf-py's GGUFWriter: the tokens, ``kv`` as ``(key, value, type, array type)``, a one-column table."""
    gguf = pytest.importorskip("gguf")
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_token_list(tokens)
    kind = gguf.GGUFValueType
    for key, value, vtype, sub in kv:
        writer.add_key_value(key, value, kind[vtype], sub_type=kind[sub] if sub else None)
    writer.add_tensor("token_embd.weight", np.arange(len(tokens), dtype=np.float32).reshape(-1, 1))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def test_every_llama_cpp_regex_is_a_known_regex() -> None:
    assert LLAMA_CPP_REGEXES <= KNOWN_REGEXES
    named = {"qwen2", "falcon", "deepseek-llm", "deepseek-coder", "starcoder", "refact", "command-r", "gpt-2", "llama-bpe", "mpt", "olmo", "dbrx"}
    named |= {"smaug-bpe", "poro-chat", "chatglm-bpe", "viking", "jais", "tekken", "chameleon", "default"}
    assert named <= set(PRE_REGEXES)
    assert "llama-bpe" in IGNORE_MERGES
    assert "gpt-2" not in IGNORE_MERGES


@pytest.mark.parametrize("pre", sorted(PRE_REGEXES))
def test_every_pre_tokenizer_builds_and_splits_losslessly(pre: str) -> None:
    tokenizers = pytest.importorskip("tokenizers")
    tokens, merges = _bpe_tokens()
    tok = tokenizers.Tokenizer.from_str(byte_level_bpe_json(tokens, merges, None, pre))
    ids = tok.encode(TEXT, add_special_tokens=False).ids
    # byte-level BPE loses nothing: whatever llama.cpp's regexes split, the pieces spell the text
    assert tok.decode(ids) == TEXT
    assert gguf_tokenizer({"tokenizer.ggml.model": "gpt2", "tokenizer.ggml.merges": merges, "tokenizer.ggml.pre": pre}, tokens).encode(TEXT) == ids


@pytest.mark.parametrize(
    ("pre", "digits"),
    [("gpt-2", ["Ġ12345"]), ("llama-bpe", ["123", "45"]), ("qwen2", ["1", "2", "3", "4", "5"]), ("falcon", ["Ġ", "123", "45"]), ("deepseek-llm", ["12345"])],
)
def test_the_pre_tokenizer_is_llama_cpps(pre: str, digits: list[str]) -> None:
    tokenizers = pytest.importorskip("tokenizers")
    tokens, merges = _bpe_tokens()
    tok = tokenizers.Tokenizer.from_str(byte_level_bpe_json(tokens, merges, None, pre))
    pieces = [p for p, _ in tok.pre_tokenizer.pre_tokenize_str("a 12345")]
    assert pieces[-len(digits) :] == digits, pieces


def test_ignore_merges_takes_a_piece_that_is_a_token_whole() -> None:
    pytest.importorskip("tokenizers")
    tokens = ["a", "b", "c", "ab", "abc"]  # "abc" is a token no merge reaches
    kv = {"tokenizer.ggml.model": "gpt2", "tokenizer.ggml.merges": ["a b"]}
    assert gguf_tokenizer({**kv, "tokenizer.ggml.pre": "gpt-2"}, tokens).encode("abc") == [3, 2]
    assert gguf_tokenizer({**kv, "tokenizer.ggml.pre": "llama-bpe"}, tokens).encode("abc") == [4]


@pytest.mark.parametrize(("pre", "message"), [("kimi-k2", "hand-written handler"), ("superbpe", "quadratic"), ("no-such-pre", "llama.cpp does not know")])
def test_a_pre_tokenizer_that_cannot_be_reproduced_is_a_format_error(pre: str, message: str) -> None:
    tokens, merges = ["a", "b", "ab"], ["a b"]  # refused before any library is asked: runs without the extras too
    with pytest.raises(FormatError, match=message) as info:
        gguf_tokenizer({"tokenizer.ggml.model": "gpt2", "tokenizer.ggml.merges": merges, "tokenizer.ggml.pre": pre}, tokens)
    assert info.value.found == pre
    assert pre in UNSUPPORTED or pre not in PRE_REGEXES


def test_padded_vocabularies_with_many_unknown_tokens_tokenize_like_sentencepiece(tmp_path: Path) -> None:
    # Phi-3: <unk> typed CONTROL, dozens of [PADnnnnn] tokens typed UNKNOWN; sentencepiece said "unk is already defined".
    spm = pytest.importorskip("sentencepiece")
    sp = spm.SentencePieceProcessor(model_proto=train_sentencepiece("bpe", True))
    n = sp.GetPieceSize()
    tokens = [sp.IdToPiece(i) for i in range(n)] + [f"[PAD{n + i}]" for i in range(20)]
    types = [3 if sp.IsControl(i) or sp.IsUnknown(i) else 6 if sp.IsByte(i) else 1 for i in range(n)] + [2] * 20
    scores = [sp.GetScore(i) for i in range(n)] + [0.0] * 20
    kv = [
        ("tokenizer.ggml.model", "llama", "STRING", None),
        ("tokenizer.ggml.scores", scores, "ARRAY", "FLOAT32"),
        ("tokenizer.ggml.token_type", types, "ARRAY", "INT32"),
        ("tokenizer.ggml.unknown_token_id", sp.unk_id(), "UINT32", None),
    ]
    emb = load_gguf(_write(tmp_path / "phi3.gguf", tokens, kv), normalize=False)
    assert isinstance(emb.vocab, TokenizerVocab)
    skip = sentencepiece_skip(sp)
    for word in [*random_words(200), "\u2603\u2604"]:
        assert emb.vocab.subword_rows(word).tolist() == [i for i in sp.encode(word) if i not in skip], word
    assert {n + i for i in range(20)} <= emb.vocab.tokenizer.skip_ids


def _phantom(token: str) -> str:
    """llama.cpp's converter (convert_hf_to_gguf.py, BertModel): '##w' -> 'w', '[X]' kept, 'w' -> '▁w'."""
    if token.startswith("[") and token.endswith("]"):
        return token
    return token[2:] if token.startswith("##") else "\u2581" + token


@pytest.mark.parametrize("lowercase", [True, False])
def test_bert_vocabularies_tokenize_like_the_wordpiece_tokenizer(tmp_path: Path, lowercase: bool) -> None:
    tokenizers = pytest.importorskip("tokenizers")
    doc = json.loads(train_wordpiece())
    doc["normalizer"]["lowercase"] = lowercase
    doc["normalizer"]["strip_accents"] = lowercase
    tok = tokenizers.Tokenizer.from_str(json.dumps(doc))
    vocab = doc["model"]["vocab"]
    tokens = sorted(vocab, key=vocab.__getitem__)
    specials = {"[UNK]", "[CLS]", "[SEP]", "[PAD]", "[MASK]"}
    kv = [
        ("tokenizer.ggml.model", "bert", "STRING", None),
        ("tokenizer.ggml.token_type", [3 if t in specials else 1 for t in tokens], "ARRAY", "INT32"),
        ("tokenizer.ggml.unknown_token_id", vocab["[UNK]"], "UINT32", None),
        ("tokenizer.ggml.normalizer.lowercase", lowercase, "BOOL", None),
    ]
    emb = load_gguf(_write(tmp_path / "bert.gguf", [_phantom(t) for t in tokens], kv), normalize=False)
    assert isinstance(emb.vocab, TokenizerVocab)
    skip = {vocab[t] for t in specials}
    checked = 0
    for text in [*random_words(150), *corpus(30), "Naïve CAFÉ, e-mail: U.S.A.!", "我想在apple工作"]:
        expected = [i for i in tok.encode(text, add_special_tokens=False).ids if i not in skip]
        assert emb.vocab.subword_rows(text).tolist() == expected, text
        checked += len(expected) > 1
    assert checked > 50


def test_a_bert_vocabulary_without_its_unknown_token_is_a_format_error() -> None:
    with pytest.raises(FormatError, match="needs an unknown token"):
        gguf_tokenizer({"tokenizer.ggml.model": "bert"}, ["[PAD]", "\u2581a"])


def test_gemma4_vocabularies_tokenize_like_their_bpe(tmp_path: Path) -> None:
    # SentencePiece-style BPE on raw UTF-8 with byte fallback, as Gemma 4's tokenizer.json; trained here with tokenizers.
    tokenizers = pytest.importorskip("tokenizers")
    from tokenizers import Regex, models, normalizers, pre_tokenizers, trainers

    byte_tokens = [f"<0x{b:02X}>" for b in range(256)]
    tok = tokenizers.Tokenizer(models.BPE(byte_fallback=True))
    tok.normalizer = normalizers.Replace(" ", "\u2581")
    tok.pre_tokenizer = pre_tokenizers.Split(Regex("[^\\n]+|[\\n]+"), "isolated")
    trainer = trainers.BpeTrainer(vocab_size=700, special_tokens=["<pad>", "<eos>", "<bos>", "<unk>", *byte_tokens], show_progress=False)
    tok.train_from_iterator(corpus(), trainer=trainer)
    doc = json.loads(tok.to_str())
    vocab = doc["model"]["vocab"]
    tokens = sorted(vocab, key=vocab.__getitem__)
    merges = [m if isinstance(m, str) else " ".join(m) for m in doc["model"]["merges"]]
    types = [3 if i < 4 else 6 if i < 260 else 1 for i in range(len(tokens))]
    kv = [
        ("tokenizer.ggml.model", "gemma4", "STRING", None),
        ("tokenizer.ggml.merges", merges, "ARRAY", "STRING"),
        ("tokenizer.ggml.token_type", types, "ARRAY", "INT32"),
        ("tokenizer.ggml.unknown_token_id", 3, "UINT32", None),
    ]
    emb = load_gguf(_write(tmp_path / "gemma4.gguf", tokens, kv), normalize=False)
    assert isinstance(emb.vocab, TokenizerVocab)
    for text in [*random_words(150), *corpus(20), "\u2603 snow \U0001f999"]:
        expected = [i for i in tok.encode(text, add_special_tokens=False).ids if i >= 4]
        assert emb.vocab.subword_rows(text).tolist() == expected, text
    assert any(260 > i >= 4 for i in emb.vocab.subword_rows("\U0001f999").tolist())  # byte fallback


@pytest.mark.parametrize("pre", ["qwen2", "llama-bpe", "falcon", "gpt-2"])
def test_write_gguf_keeps_the_pre_tokenizer(tmp_path: Path, pre: str) -> None:
    # without tokenizer.ggml.pre, llama.cpp and this library split the text of the written file otherwise; the source's
    # own spelling is kept (llama-bpe, not the equivalent llama3 that the rebuilt keys would name)
    pytest.importorskip("tokenizers")
    from finalfusion import write_gguf
    from finalfusion.compat.gguf import read_gguf

    tokens, merges = _bpe_tokens()
    kv = [("tokenizer.ggml.model", "gpt2", "STRING", None), ("tokenizer.ggml.merges", merges, "ARRAY", "STRING"), ("tokenizer.ggml.pre", pre, "STRING", None)]
    emb = load_gguf(_write(tmp_path / "in.gguf", tokens, kv), normalize=False)
    write_gguf(tmp_path / "out.gguf", emb)
    assert read_gguf((tmp_path / "out.gguf").read_bytes()).kv["tokenizer.ggml.pre"] == pre
    back = load_gguf(tmp_path / "out.gguf", normalize=False)
    for text in [TEXT, *random_words(50)]:
        assert back.vocab.subword_rows(text).tolist() == emb.vocab.subword_rows(text).tolist(), text
