"""Hostile tokenizers (issue 24): a tokenizer from a file is code-like, so it is bounded.

One test per class of the audit, each with several variants; the hostile tokenizers are built with the real
``tokenizers`` library. Cases that hung, aborted or ran for minutes before the fix run in a subprocess with a
timeout (and a memory limit where the old code reserved gigabytes): no wall-clock assertion, only "finished at
all" within a timeout thirty times what a lookup may take (docs/reliability.md, "Trust model: Tokenizers").
"""

from __future__ import annotations

import base64
import io
import json
import os
import struct
import subprocess
import sys
import textwrap
import tracemalloc
import zlib
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from _model_helpers import train_byte_level_bpe, train_sentencepiece
from finalfusion import Embeddings, FormatError, limits, load_finalfusion
from finalfusion._tokenizers import KNOWN_REGEXES, HuggingFaceTokenizer, SentencePieceTokenizer, Tokenizer
from finalfusion.compat._model_vocab import hf_tokens, model_vocab
from finalfusion.metadata import Metadata
from finalfusion.storage import NdArray
from finalfusion.vocab import SimpleVocab, TokenizerVocab
from finalfusion.vocab._tokenizer_table import tokenizer_from_table, tokenizer_table

tokenizers = pytest.importorskip("tokenizers")

#: A subprocess that took minutes (or hung, or aborted) before the fix must finish within this (seconds).
TIMEOUT = 30
#: The allow-list run: every pattern x 8 words of 256 KiB, each tokenized twice (ours and the library's), about 10 s on an idle
#: machine; a backtracking pattern takes hours on such words, so a bound of minutes still tells them apart on a loaded machine.
LONG_TIMEOUT = 300


def _run(script: str, *, memory: int | None = None, timeout: float = TIMEOUT) -> subprocess.CompletedProcess[str]:
    """Run ``script`` in a fresh interpreter (``-O`` when the tests run under it), optionally under an address-space limit."""
    prologue = ""
    if memory is not None:
        prologue = f"import resource; resource.setrlimit(resource.RLIMIT_AS, ({memory}, {memory}))\n"
    cmd = [sys.executable, *(["-O"] if sys.flags.optimize else []), "-c", prologue + textwrap.dedent(script)]
    env = {**os.environ, "RUST_BACKTRACE": "0", "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, check=False)


def _wordlevel(vocab: dict[str, int], **settings: Any) -> Any:
    tok = tokenizers.Tokenizer(tokenizers.models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = tokenizers.pre_tokenizers.Whitespace()
    for name, value in settings.items():
        setattr(tok, name, value)
    return tok


# --- 1. a value inside a file is content, never a path ----------------------------------------------------------


def _gguf_with_hf_json(path: Path, value: str) -> None:
    gguf = pytest.importorskip("gguf")
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_token_list(["a", "b"])
    writer.add_tokenizer_model("none")
    writer.add_string("tokenizer.huggingface.json", value)
    writer.add_tensor("token_embd.weight", np.arange(4, dtype=np.float32).reshape(2, 2))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


@pytest.mark.parametrize("target", ["/dev/zero", "fifo", "local file"])
def test_a_tokenizer_json_value_in_a_gguf_file_is_never_opened(tmp_path: Path, target: str) -> None:
    secret = tmp_path / "tokenizer.json"
    secret.write_text(json.dumps({"model": {"type": "WordLevel", "vocab": {"SECRET-BYTES": 0}, "unk_token": "SECRET-BYTES"}}))
    if target == "fifo":
        value = str(tmp_path / "pipe")
        os.mkfifo(value)  # opening it for reading blocks until a writer comes: none does
    elif target == "local file":
        value = str(secret)
    else:
        value = target
    model = tmp_path / "model.gguf"
    _gguf_with_hf_json(model, value)
    # The value is parsed as the document it is (not JSON: a FormatError at load), never opened.
    done = _run(
        f"""
        from finalfusion import FormatError, load_gguf
        try:
            load_gguf({str(model)!r})
        except FormatError as err:
            assert "tokenizer.huggingface.json is not a tokenizer.json" in str(err), err
            assert {value[:40]!r} in str(err) and "SECRET-BYTES" not in str(err), err
        else:
            raise SystemExit("a tokenizer.huggingface.json that is a path loaded")
        print("OK")
        """,
        memory=2 << 30,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "OK"


def test_readers_build_tokenizers_from_content_only() -> None:
    assert HuggingFaceTokenizer.from_json("/etc/hostname").to_bytes() == b"/etc/hostname"
    assert Tokenizer.from_bytes("sentencepiece", b"/etc/hostname").to_bytes() == b"/etc/hostname"
    with pytest.raises(TypeError, match="a serialised tokenizer must be bytes"):
        Tokenizer.from_bytes("huggingface", "/etc/hostname")  # type: ignore[arg-type]


# --- 2. any library failure, at any time, is a FormatError --------------------------------------------------------


def _panicking_bpe() -> str:
    """BPE with a ``continuing_subword_prefix`` its merges do not carry: the library panics building it (huggingface/tokenizers#2198)."""
    doc = json.loads(tokenizers.Tokenizer(tokenizers.models.BPE({"a": 0, "b": 1, "ab": 2}, [("a", "b")])).to_str())
    doc["model"]["continuing_subword_prefix"] = "##"
    return json.dumps(doc)


def _wordpiece_without_unk() -> str:
    """WordPiece whose unknown token is not in the vocabulary: ``Exception("WordPiece error: Missing [UNK] ...")`` when encoding."""
    return tokenizers.Tokenizer(tokenizers.models.WordPiece({"a": 0, "b": 1}, unk_token="[UNK]")).to_str()


def _backtracking_split(pattern: str) -> str:
    tok = _wordlevel({"a": 0, "[UNK]": 1})
    tok.pre_tokenizer = tokenizers.pre_tokenizers.Split(tokenizers.Regex(pattern), "isolated")
    return tok.to_str()


@pytest.mark.parametrize(
    ("make", "word", "found"),
    [
        (_panicking_bpe, "ab", "slice index"),  # a Rust panic (pyo3's PanicException, a BaseException) while loading
        (_wordpiece_without_unk, "xyz", "Missing [UNK]"),  # a bare Exception
        (lambda: _backtracking_split(r"(a+)+b"), "a" * 200 + "!", "retry-limit"),  # oniguruma's retry limit: a panic
    ],
    ids=["panic-loading", "bare-exception-encoding", "panic-encoding"],
)
def test_every_tokenizers_failure_while_encoding_is_a_format_error(monkeypatch: pytest.MonkeyPatch, make: Any, word: str, found: str) -> None:
    monkeypatch.setattr(limits, "TRUSTED_TOKENIZER_REGEXES", frozenset({r"(a+)+b"}))
    tok = HuggingFaceTokenizer(make())
    for call in (tok.encode, tok.pieces, lambda w: tok.encode_batch(["a", w])):
        with pytest.raises(FormatError, match=r"the tokenizers library rejects the tokenizer\.json") as err:
            call(word)
        assert found in str(err.value.found)
    emb = Embeddings(NdArray(np.ones((3, 2), dtype=np.float32)), TokenizerVocab(["a", "b", "c"], tok))
    with pytest.raises(FormatError):
        emb.embedding(word)
    with pytest.raises(FormatError):
        emb.embedding_batch(["a", word])


# --- 3. regexes: only known patterns; no lookup runs for more than about a second ---------------------------------


def _regex_tokenizers() -> dict[str, str]:
    pre = _backtracking_split(r"\w*\d")  # quadratic: 0.5 s for 8 KB, minutes for 256 KiB
    replace = _wordlevel({"a": 0, "[UNK]": 1})
    replace.normalizer = tokenizers.normalizers.Replace(tokenizers.Regex(r"\w*\d"), "x")
    nested = _wordlevel({"a": 0, "[UNK]": 1})
    nested.pre_tokenizer = tokenizers.pre_tokenizers.Sequence(
        [tokenizers.pre_tokenizers.Whitespace(), tokenizers.pre_tokenizers.Split(tokenizers.Regex(r"(?:\w\w)*\d"), "isolated")]
    )
    return {"split": pre, "replace-normalizer": replace.to_str(), "nested-sequence": nested.to_str()}


@pytest.mark.parametrize("case", ["split", "replace-normalizer", "nested-sequence"])
def test_an_unknown_regex_is_refused_before_it_runs(tmp_path: Path, case: str) -> None:
    path = tmp_path / "tokenizer.json"
    path.write_text(_regex_tokenizers()[case])
    done = _run(
        f"""
        import numpy as np
        from finalfusion import Embeddings, FormatError, limits
        from finalfusion.storage import NdArray
        from finalfusion.vocab import HuggingFaceTokenizer, TokenizerVocab
        tok = HuggingFaceTokenizer({str(path)!r})
        emb = Embeddings(NdArray(np.ones((2, 2), dtype=np.float32)), TokenizerVocab(["a", "[UNK]"], tok))
        word = "a" * (limits.MAX_TOKENIZE_BYTES - 1) + "!"
        try:
            emb.embedding(word)
        except FormatError as err:
            assert "not one of the known tokenizer regexes" in str(err), err
            print("refused")
        """
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "refused"


@pytest.mark.parametrize("part", range(6))
@pytest.mark.slow
def test_the_known_regexes_tokenize_a_hostile_word_of_the_largest_size(tmp_path: Path, part: int) -> None:
    """Every pattern of the allow-list finishes on 256 KiB words built to make it backtrack (figures: docs/reliability.md).

    In six parts, each in a process of its own (with llama.cpp's pre-tokenizers the list holds ~50 patterns of ~1 s each).
    """
    path = tmp_path / "patterns.json"
    path.write_text(json.dumps(sorted(KNOWN_REGEXES)[part::6]))
    done = _run(
        f"""
        import json
        import tokenizers
        from finalfusion import limits
        from finalfusion.vocab import HuggingFaceTokenizer
        n = limits.MAX_TOKENIZE_BYTES
        words = [" " * (n - 1) + "a", "'" * n, "1" * n, "a" * (n - 1) + "!", "\\r\\n " * (n // 3), " !" * (n // 2), "A" * (n - 1) + "1", "\\u00e9" * (n // 2)]
        for pattern in json.load(open({str(path)!r})):
            tok = tokenizers.Tokenizer(tokenizers.models.WordLevel({{"a": 0, "[UNK]": 1}}, unk_token="[UNK]"))
            tok.pre_tokenizer = tokenizers.pre_tokenizers.Split(tokenizers.Regex(pattern), "isolated")
            ours = HuggingFaceTokenizer(tok.to_str())
            for word in words:
                assert ours.encode(word) == tok.encode(word, add_special_tokens=False).ids
        print("OK")
        """,
        timeout=LONG_TIMEOUT,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "OK"


# --- 4. padding and truncation never reach the vectors ----------------------------------------------------------------


VOCAB = {"[UNK]": 0, "[PAD]": 1, "ab": 2, "cd": 3, "ef": 4}


@pytest.mark.parametrize(
    "setting",
    [
        {"enable_padding": {"length": 6, "pad_id": 2, "pad_token": "ab"}},  # pad rows that are real tokens, summed into vectors
        {"enable_padding": {"pad_id": 3, "pad_token": "cd"}},  # BatchLongest: the short words of a batch get pad rows
        {"enable_truncation": {"max_length": 1}},  # pieces dropped
    ],
    ids=["fixed-padding", "batch-longest-padding", "truncation"],
)
def test_padding_and_truncation_settings_are_stripped(setting: dict[str, dict[str, Any]]) -> None:
    tok = _wordlevel(VOCAB)
    plain = tokenizers.Tokenizer.from_str(tok.to_str())
    for method, kwargs in setting.items():
        getattr(tok, method)(**kwargs)
    ours = HuggingFaceTokenizer(tok.to_str())
    words = ["ab cd ef", "ef"]
    expected = [e.ids for e in plain.encode_batch(words, add_special_tokens=False)]
    assert expected == [[2, 3, 4], [4]]
    assert ours.encode_batch(words) == expected
    assert ours.encode("ab cd") == [2, 3]
    assert ours.pieces("ab cd") == ["ab", "cd"]
    matrix = np.eye(5, dtype=np.float32)
    emb = Embeddings(NdArray(matrix), TokenizerVocab(list(VOCAB), ours))
    vectors, found = emb.embedding_batch(["ab cd", "ef cd"])
    assert found.all()
    assert vectors.tolist() == [[0, 0, 0.5, 0.5, 0], [0, 0, 0, 0.5, 0.5]]  # issue 25: the mean of the rows


def test_a_fixed_padding_of_fifty_million_does_not_abort_the_process() -> None:
    tok = _wordlevel(VOCAB)
    tok.enable_padding(length=50_000_000, pad_id=1, pad_token="[PAD]")
    done = _run(
        f"""
        from finalfusion.vocab import HuggingFaceTokenizer
        print(HuggingFaceTokenizer({tok.to_str()!r}).encode_batch(["ab cd", "ef"]))
        """,
        memory=2 << 30,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "[[2, 3], [4]]"


# --- 5. sizes are validated before the library sees them ---------------------------------------------------------------


def _precompiled(charsmap: bytes) -> str:
    tok = _wordlevel(VOCAB)
    doc = json.loads(tok.to_str())
    doc["normalizer"] = {"type": "Precompiled", "precompiled_charsmap": base64.b64encode(charsmap).decode()}
    return json.dumps(doc)


@pytest.mark.parametrize(
    "charsmap",
    [struct.pack("<I", 0xFFFFFFF0) + bytes(16), struct.pack("<I", 1 << 30) + bytes(64), struct.pack("<I", 6) + bytes(16), b"\x01\x02"],
    ids=["4-GiB-trie", "1-GiB-trie", "unaligned-trie", "shorter-than-the-size"],
)
def test_a_precompiled_charsmap_larger_than_its_data_is_refused(charsmap: bytes) -> None:
    done = _run(
        f"""
        from finalfusion import FormatError
        from finalfusion.vocab import HuggingFaceTokenizer
        try:
            HuggingFaceTokenizer({_precompiled(charsmap)!r}).encode("ab")
        except FormatError as err:
            assert "the precompiled charsmap declares a trie larger than its data" in str(err), err
            print("refused")
        """,
        memory=2 << 30,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "refused"


def test_a_real_precompiled_charsmap_is_accepted() -> None:
    pytest.importorskip("sentencepiece")
    from finalfusion.compat._spmodel import SentencePieceModel

    charsmap = SentencePieceModel.parse(train_sentencepiece("unigram", False)).charsmap
    assert len(charsmap) > 1000
    tok = _wordlevel(VOCAB)
    tok.normalizer = tokenizers.normalizers.Precompiled(charsmap)
    assert HuggingFaceTokenizer(tok.to_str()).encode("ab \uff43d") == tok.encode("ab \uff43d", add_special_tokens=False).ids == [2, 3]


@pytest.mark.parametrize("sparse_id", [(1 << 24) - 1, 1 << 20, limits.MAX_TOKENIZER_ID_HOLES + 2])
def test_a_sparse_token_id_is_refused_before_placeholders_are_built(sparse_id: int) -> None:
    data = json.dumps({"model": {"type": "WordLevel", "vocab": {"a": 0, "b": sparse_id}, "unk_token": "a"}}).encode()
    assert len(data) < 90  # a tiny file
    with pytest.raises(FormatError, match="the token ids leave too many ids without a token") as err:
        hf_tokens(data)
    assert err.value.found == f"largest id {sparse_id} with 2 tokens"
    with pytest.raises(FormatError, match="too many ids without a token"):
        model_vocab(data, None, 1 << 25, "safetensors")
    holes = {"a": 0, "b": limits.MAX_TOKENIZER_ID_HOLES + 1}  # exactly the limit: accepted
    assert len(hf_tokens(json.dumps({"model": {"vocab": holes}}).encode())) == limits.MAX_TOKENIZER_ID_HOLES + 2


def test_an_added_token_on_another_tokens_id_is_refused() -> None:
    """tokenizers 0.23 answers such a file per instance (the fuzzer's cross-check saw two fresh instances agree and a third
    differ); hf_tokens kept the added token's string for the id. Both now refuse it; a repeat of the vocabulary's own token,
    as real files and tokenizers' add_tokens write it, loads."""
    tok = _wordlevel({"[UNK]": 0, "a": 1, "b": 2})
    tok.add_special_tokens(["a", "[NEW]"])  # "a" repeats id 1, "[NEW]" gets id 3: what a real file holds
    doc = json.loads(tok.to_str())
    assert [(t["id"], t["content"]) for t in doc["added_tokens"]] == [(1, "a"), (3, "[NEW]")]
    assert hf_tokens(json.dumps(doc).encode()) == ["[UNK]", "a", "b", "[NEW]"]
    assert HuggingFaceTokenizer(json.dumps(doc)).encode("a b") == [1, 2]
    doc["added_tokens"][1]["id"] = 2  # "[NEW]" on "b"'s id
    data = json.dumps(doc).encode()
    with pytest.raises(FormatError, match="an added token takes the id of another vocabulary token") as err:
        hf_tokens(data)
    assert err.value.found == "id 2: added '[NEW]', vocabulary 'b'"
    with pytest.raises(FormatError, match="another vocabulary token"):
        model_vocab(data, None, 3, "safetensors")
    with pytest.raises(FormatError, match="another vocabulary token"):
        HuggingFaceTokenizer(data).encode("a b")


@pytest.mark.parametrize("chars", [10**6, limits.MAX_WORDPIECE_INPUT_CHARS + 1, -1, 2.5, "100", True])
def test_a_wordpiece_word_length_past_the_bound_is_refused(chars: Any) -> None:
    """The fuzzer's 177-byte tokenizer.json (fuzz/crashers/tokenizer-json-crash-694cb5e091a1): WordPiece splitting a word of up to
    max_input_chars_per_word characters took hours for one 256 KiB word; the setting is bounded before the library sees it."""
    pytest.importorskip("tokenizers")
    import tokenizers

    vocab = {"[UNK]": 0, "a": 1, "##b": 2, "##a": 3}
    model = tokenizers.models.WordPiece(vocab, unk_token="[UNK]", max_input_chars_per_word=100)
    doc = json.loads(tokenizers.Tokenizer(model).to_str())
    assert doc["model"]["max_input_chars_per_word"] == 100
    assert HuggingFaceTokenizer.from_json(json.dumps(doc)).encode("aba") == [1, 2, 3]  # a real BERT-style setting loads
    doc["model"]["max_input_chars_per_word"] = chars
    with pytest.raises(FormatError, match="max_input_chars_per_word is out of bounds") as err:
        HuggingFaceTokenizer.from_json(json.dumps(doc)).encode("ab" * 2000)
    assert err.value.found == repr(chars)


# --- 6. words that are not UTF-8 text --------------------------------------------------------------------------------


def test_a_word_with_a_lone_surrogate_has_no_tokens_and_the_batch_goes_on() -> None:
    pytest.importorskip("sentencepiece")
    bpe = HuggingFaceTokenizer(train_byte_level_bpe())
    spm = SentencePieceTokenizer(train_sentencepiece("unigram", False))
    for tok in (bpe, spm):
        good = ["the", "quick"]
        for bad in ["a\ud800", "\udfff", "fox\udc80es"]:
            assert tok.encode(bad) == []
            assert tok.pieces(bad) == []
            assert tok.encode_batch([good[0], bad, good[1]]) == [tok.encode(good[0]), [], tok.encode(good[1])]
        n = max(tok.encode("the") + tok.encode("quick")) + 1
        emb = Embeddings(NdArray(np.ones((n, 4), dtype=np.float32)), TokenizerVocab([f"<{i}>" for i in range(n)], tok))
        _, found = emb.embedding_batch(["the", "x\ud800y", "quick"])
        assert found.tolist() == [True, False, True]
        assert emb.embedding("x\ud800y") is None


# --- 7. the stored [tokenizer] table: bounded inflation ----------------------------------------------------------------


def _bomb(size: int) -> str:
    inflater = zlib.compressobj(9)
    chunk = bytes(1 << 20)
    packed = b"".join(inflater.compress(chunk) for _ in range(size >> 20)) + inflater.flush()
    return base64.b64encode(packed).decode("ascii")


@pytest.mark.parametrize("declared", [64 << 20, 100, None, "100", True], ids=["as-large", "small", "missing", "a-string", "a-bool"])
def test_a_zlib_bomb_in_the_stored_table_inflates_no_more_than_declared(monkeypatch: pytest.MonkeyPatch, declared: object) -> None:
    monkeypatch.setattr(limits, "MAX_TOKENIZER_BYTES", 1 << 20)
    table: dict[str, object] = {"kind": "huggingface", "encoding": "zlib+base64", "model": _bomb(64 << 20)}
    if declared is not None:
        table["bytes"] = declared
    tracemalloc.start()
    try:
        with pytest.raises(FormatError, match="metadata \\[tokenizer\\]: the tokenizer model"):
            tokenizer_from_table(table)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 8 << 20, f"{peak} bytes"


# --- 8. the stored [tokenizer] table: types, and a user's own 'tokenizer' entry ---------------------------------------


def _file(vocab: Any, metadata: dict[str, Any]) -> bytes:
    emb = Embeddings(NdArray(np.ones((len(vocab.words), 2), dtype=np.float32)), vocab, metadata=Metadata(metadata))
    buf = io.BytesIO()
    emb.write(buf)
    return buf.getvalue()


@pytest.mark.parametrize(
    "change",
    [{"kind": ["huggingface"]}, {"kind": {"a": 1}}, {"kind": 3}, {"encoding": ["zlib"]}, {"bytes": [2]}, {"bytes": 2.0}, {"model": ["eJw="]}],
    ids=["kind-array", "kind-table", "kind-int", "encoding-array", "bytes-array", "bytes-float", "model-array"],
)
def test_a_stored_table_is_validated_by_type(change: dict[str, Any]) -> None:
    table = {**tokenizer_table(HuggingFaceTokenizer("{}")), **change}
    with pytest.raises(FormatError, match="metadata \\[tokenizer\\]"):
        tokenizer_from_table(table)
    data = _file(SimpleVocab(["a", "b"]), {"tokenizeX": table}).replace(b"tokenizeX", b"tokenizer")
    with pytest.raises(FormatError, match="metadata \\[tokenizer\\]") as err:
        load_finalfusion(data)
    assert err.value.offset is not None


@pytest.mark.parametrize("value", ["gpt2", {"name": "bert-base", "lowercase": True}, [1, 2], {"kind": "mine"}])
def test_a_users_own_tokenizer_entry_round_trips(value: Any) -> None:
    emb = load_finalfusion(_file(SimpleVocab(["a", "b"]), {"tokenizer": value, "x": 1}))
    assert type(emb.vocab) is SimpleVocab
    assert emb.metadata is not None
    assert dict(emb.metadata) == {"tokenizer": value, "x": 1}


@pytest.mark.parametrize("value", ["gpt2", {"kind": "huggingface", "model": "eJw="}])
def test_a_users_tokenizer_entry_that_would_be_lost_or_misread_is_refused_at_write(value: Any) -> None:
    vocab = TokenizerVocab(["a", "b"], HuggingFaceTokenizer("{}"))
    with pytest.raises(ValueError, match="the metadata key 'tokenizer' is reserved"):
        _file(vocab, {"tokenizer": value})
    with pytest.raises(ValueError, match="the metadata key 'tokenizer' is reserved"):
        _file(SimpleVocab(["a", "b"]), {"tokenizer": {"kind": "huggingface", "model": "eJw="}})
    # the vocabulary's own table (a file read and written again) is not the user's
    data = _file(vocab, {"tokenizer": tokenizer_table(vocab.tokenizer)})
    back = load_finalfusion(data).vocab
    assert isinstance(back, TokenizerVocab)
    assert (back.words, back.tokenizer) == (vocab.words, vocab.tokenizer)
