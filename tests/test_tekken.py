"""Mistral's Tekken tokenizer (``tekken.json``) read as mistral-common's ``Tekkenizer`` reads it (issue 25).

Side by side with the real ``Tekkenizer`` on the two files mistral-common ships
(``tekken_240718.json``: Mistral Nemo; ``tekken_240911.json``), each beside a
``consolidated.safetensors`` written with ``safetensors`` as Mistral lays out
its own model directories (``tok_embeddings.weight``, ``params.json``). The
committed fixture ``tests/data/models/tekken_small.json`` (a cut of the real
file, see tekken_README.md) runs the format tests without the extra.
"""

from __future__ import annotations

import base64
import contextlib
import copy
import importlib.util
import json
import random
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import finalfusion
from _model_helpers import random_words, subword_rule
from finalfusion import FormatError, limits
from finalfusion.compat._tekken import DEFAULT_SPECIAL_TOKENS, byte_char, read_tekken, tekken_merges

MODELS = Path(__file__).parent / "data" / "models"
FIXTURE = MODELS / "tekken_small.json"
REAL_FILES = ("tekken_240718.json", "tekken_240911.json")

#: Texts beside the random words: ASCII, digits, punctuation, whitespace runs, code, URLs, accents, scripts, emoji, special-token spellings.
TEXTS = [
    "house",
    "House",
    "HOUSE",
    "happiness",
    "the quick brown fox jumps over the lazy dog",
    "Hello, world!",
    "It's a dog's life, isn't it?",
    "e-mail",
    "U.S.A.",
    "naïve café résumé",
    "Straße",
    "1234567890",
    "3.14159",
    "  leading and   inner  spaces",
    "trailing space ",
    "tabs\tand\nnew\r\nlines\n\n\n",
    "def f(x):\n    return x ** 2  # square\n",
    "for (int i = 0; i < n; i++) { sum += a[i]; }",
    "https://example.com/path?query=1&b=%20",
    "user@example.org",
    "¿Qué tal? ¡Muy bien!",
    "Привет, мир",
    "Γειά σου Κόσμε",  # noqa: RUF001
    "日本語のテキストです。",
    "中文字符",
    "한국어 문장",
    "हिन्दी पाठ",
    "مرحبا بالعالم",
    "שלום עולם",
    "😀👍🏽 🇫🇷",
    "ﬁ ligature and Ǆ digraph ǅ",
    "<s>[INST] not special in text [/INST]</s>",
    "<unk> <pad> [IMG]",
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
    "=" * 64,
    " " * 17,
    "x",
    "\u00a0non-breaking\u2003space",
    "",
]


def _real(name: str) -> Path:
    pytest.importorskip("mistral_common")
    import mistral_common

    path = Path(mistral_common.__file__).parent / "data" / name
    if not path.is_file():
        pytest.skip(f"mistral-common ships no {name}")
    return path


def _tekkenizer(path: Path) -> Any:
    """mistral-common's Tekkenizer, the reference: in no extra (CI installs it with --no-deps), so the test skips without it."""
    tekken = pytest.importorskip("mistral_common.tokens.tokenizers.tekken", reason="mistral-common (the reference Tekkenizer) is not installed")
    return tekken.Tekkenizer.from_file(path)


def _model_dir(root: Path, tekken: Path, n_rows: int, dims: int = 6, seed: int = 0) -> np.ndarray:
    """Mistral's own layout: consolidated.safetensors (tok_embeddings.weight), params.json, tekken.json; returns the table."""
    safetensors_numpy = pytest.importorskip("safetensors.numpy")
    rng = np.random.default_rng(seed)
    table = (rng.normal(size=(n_rows, dims)) * rng.uniform(0.2, 3, size=(n_rows, 1))).astype(np.float32)
    root.mkdir(parents=True, exist_ok=True)
    safetensors_numpy.save_file({"tok_embeddings.weight": table, "norm.weight": np.ones(dims, np.float32)}, str(root / "consolidated.safetensors"))
    (root / "params.json").write_text(json.dumps({"dim": dims, "n_layers": 1, "vocab_size": n_rows}))
    shutil.copyfile(tekken, root / "tekken.json")
    return table


def _words() -> list[str]:
    return [*TEXTS, *random_words(240, seed=25)]


# -- the committed fixture ----------------------------------------------------------------


def test_the_fixture_is_the_cut_of_the_real_file() -> None:
    real = json.loads(_real("tekken_240718.json").read_text(encoding="utf-8"))
    spec = importlib.util.spec_from_file_location("tekken_make_fixtures", MODELS / "tekken_make_fixtures.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert json.loads(FIXTURE.read_text(encoding="utf-8")) == module.small_tekken(real)


def test_the_fixture_reads_without_any_extra() -> None:
    model = read_tekken(FIXTURE.read_bytes())
    assert model.num_special == 24
    assert model.version == "v7"
    assert len(model.tokens) == 24 + 1400  # default_vocab_size: the 100 ranked tokens past it are not kept
    assert model.tokens[:20] == list(DEFAULT_SPECIAL_TOKENS)
    assert model.tokens[20:24] == ["<SPECIAL_20>", "<SPECIAL_21>", "<SPECIAL_22>", "<SPECIAL_23>"]
    assert model.tokens[24 + 32] == "Ġ"
    assert model.tokens[24 + ord("a")] == "a"
    doc = json.loads(model.tokenizer_json)
    vocab, merges = doc["model"]["vocab"], doc["model"]["merges"]
    assert vocab["Ġ"] == 24 + 32
    assert len(vocab) == 1400
    assert min(vocab.values()) == 24
    assert len(merges) == 1400 - 256
    assert doc["model"]["ignore_merges"] is True
    assert doc["added_tokens"] == []  # special tokens are never read from text
    pattern = json.loads(FIXTURE.read_text(encoding="utf-8"))["config"]["pattern"]
    assert doc["pre_tokenizer"]["pretokenizers"][0]["pattern"] == {"Regex": pattern}
    for (a, b), token in zip(merges, list(vocab)[256:], strict=True):
        assert a + b == token  # each merge builds the token of its rank


def test_the_fixture_gives_tekkenizer_ids(tmp_path: Path) -> None:
    pytest.importorskip("tokenizers")
    tk = _tekkenizer(FIXTURE)
    table = _model_dir(tmp_path, FIXTURE, tk.n_words + 8)  # 8 padding rows, dropped
    emb = finalfusion.load(tmp_path, normalize=False)
    assert len(emb.vocab) == tk.n_words == 1424
    tok = emb.vocab.tokenizer
    differ = [w for w in _words() if tok.encode(w) != tk.encode(w, bos=False, eos=False)]
    assert not differ
    for word in ["house", "Hello, world!", "日本語", "x"]:
        expected = subword_rule(table, tk.encode(word, bos=False, eos=False), set())
        np.testing.assert_allclose(emb.embedding(word), expected, rtol=1e-5, atol=1e-6)


def test_merges_are_derived_as_hugging_faces_converter_derives_them() -> None:
    singles = [bytes([i]) for i in range(256)]
    assert tekken_merges([*singles, b"ab", b"bc", b"abc"]) == [(b"a", b"b"), (b"b", b"c"), (b"ab", b"c")]
    # "bc" ranks before "ab": BPE on "abc" reaches a + bc
    assert tekken_merges([*singles, b"bc", b"ab", b"abc"]) == [(b"b", b"c"), (b"a", b"b"), (b"a", b"bc")]
    assert byte_char(bytes(range(256))) == "".join(
        chr(c) for c in [*range(256, 289), *range(33, 127), *range(289, 323), *range(161, 173), 323, *range(174, 256)]
    )


# -- the real files, side by side with Tekkenizer ----------------------------------------------


@pytest.fixture(scope="module", params=REAL_FILES)
def real_model(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, Any, np.ndarray, Path]:
    pytest.importorskip("tokenizers")
    path = _real(request.param)
    tk = _tekkenizer(path)
    root = tmp_path_factory.mktemp(request.param.replace(".json", ""))
    table = _model_dir(root, path, tk.n_words, dims=8)
    emb = finalfusion.load(root, normalize=False)  # directory: the table and tekken.json found without arguments
    return tk, emb, table, root


def test_real_files_give_tekkenizer_ids(real_model: tuple[Any, Any, np.ndarray, Path]) -> None:
    tk, emb, _, _ = real_model
    assert emb.metadata["safetensors"]["tensor"] == "tok_embeddings.weight"
    assert emb.metadata["safetensors"]["tokenizer"] == "Tekken (tekken.json)"
    assert len(emb.vocab) == tk.n_words == 131072  # default_vocab_size: 1,000 special ids and 130,072 of the 150,000 ranked tokens
    words = _words()
    assert len(words) > 270
    tok = emb.vocab.tokenizer
    ours = tok.encode_batch(words)
    theirs = [tk.encode(w, bos=False, eos=False) for w in words]
    assert [w for w, a, b in zip(words, ours, theirs, strict=True) if a != b] == []
    sentences = [" ".join(words[i : i + 7]) for i in range(0, len(words), 7)]
    assert [s for s in sentences if tok.encode(s) != tk.encode(s, bos=False, eos=False)] == []


def test_real_files_keep_tekkenizer_special_tokens(real_model: tuple[Any, Any, np.ndarray, Path]) -> None:
    tk, emb, _, _ = real_model
    words = emb.vocab.words
    assert [words[i] for i in range(tk.num_special_tokens)] == [tk.id_to_piece(i) for i in range(tk.num_special_tokens)]
    for i in (1000, 1032, 1100, 5000, 131071):  # ranked tokens: their bytes, byte-level spelled
        assert words[i] == byte_char(tk.id_to_byte_piece(i))
    assert emb.vocab.token_id("Ġhouse") == tk.encode(" house", bos=False, eos=False)[0]


@pytest.mark.parametrize("normalize", [False, True])
def test_real_files_follow_the_word_rule(real_model: tuple[Any, Any, np.ndarray, Path], normalize: bool) -> None:
    tk, emb, table, root = real_model
    if normalize:  # unit rows and norms stored: a word's vector is the same mean of the model's rows, returned unit length
        emb = finalfusion.load(root)
    words = _words()[:150]
    got, found = emb.embedding_batch(words)
    for word, vec, ok in zip(words, got, found, strict=True):
        expected = subword_rule(table, tk.encode(word, bos=False, eos=False), set(), np.ones(len(table), np.float32) if normalize else None)
        assert ok == (expected is not None), repr(word)  # the empty text has no tokens
        if expected is not None:
            np.testing.assert_allclose(vec, expected, rtol=2e-5, atol=2e-6, err_msg=repr(word))
            np.testing.assert_allclose(emb.embedding(word), expected, rtol=2e-5, atol=2e-6, err_msg=repr(word))


def test_real_files_encode_follows_the_word_rule(real_model: tuple[Any, Any, np.ndarray, Path]) -> None:
    tk, emb, table, _ = real_model
    texts = [t for t in TEXTS if t]
    expected = np.stack([table[tk.encode(t, bos=False, eos=False)].astype(np.float64).mean(axis=0) for t in texts]).astype(np.float32)
    np.testing.assert_allclose(emb.encode(texts), expected, rtol=2e-5, atol=2e-6)
    np.testing.assert_allclose(emb.encode(texts[:5]), np.stack([emb.embedding(t) for t in texts[:5]]), rtol=2e-5, atol=2e-6)


def test_a_fifu_round_trip_keeps_the_tokenizer(real_model: tuple[Any, Any, np.ndarray, Path], tmp_path: Path) -> None:
    tk, emb, _, _ = real_model
    emb.write(tmp_path / "tekken.fifu")
    back = finalfusion.load_finalfusion(tmp_path / "tekken.fifu")
    assert type(back.vocab).__name__ == "TokenizerVocab"
    assert back.vocab.words == emb.vocab.words
    texts = TEXTS[:20]
    assert back.vocab.tokenizer.encode_batch(texts) == [tk.encode(t, bos=False, eos=False) for t in texts]
    np.testing.assert_allclose(back.encode(texts), emb.encode(texts), rtol=1e-6, atol=1e-7)


def test_a_gguf_round_trip_keeps_the_ids(tmp_path: Path) -> None:
    pytest.importorskip("tokenizers")
    _model_dir(tmp_path / "model", FIXTURE, 1424)
    emb = finalfusion.load(tmp_path / "model")
    finalfusion.compat.write_gguf(tmp_path / "tekken.gguf", emb)
    back = finalfusion.compat.load_gguf(tmp_path / "tekken.gguf")
    assert back.metadata["gguf"]["tokenizer_kv"]["tokenizer.ggml.pre"] == "tekken"  # llama.cpp's own Tekken pre-tokenizer
    assert back.vocab.words == emb.vocab.words
    words = _words()
    assert back.vocab.tokenizer.encode_batch(words) == emb.vocab.tokenizer.encode_batch(words)
    np.testing.assert_allclose(back.embedding_batch(words)[0], emb.embedding_batch(words)[0], rtol=1e-6, atol=1e-7)


# -- how the file is found --------------------------------------------------------------------


def test_tokenizer_json_beside_it_comes_first(tmp_path: Path) -> None:
    tokenizers = pytest.importorskip("tokenizers")
    _model_dir(tmp_path, FIXTURE, 1424)
    hf = tokenizers.Tokenizer(tokenizers.models.WordLevel({"a": 0, "[UNK]": 1}, unk_token="[UNK]"))
    hf.save(str(tmp_path / "tokenizer.json"))
    assert "tokenizer.json" in finalfusion.load(tmp_path).metadata["safetensors"]["tokenizer"]
    emb = finalfusion.compat.load_safetensors(tmp_path / "consolidated.safetensors", tokenizer=tmp_path / "tekken.json")
    assert len(emb.vocab) == 1424
    assert emb.metadata["safetensors"]["tokenizer"] == "Tekken (tekken.json)"


def test_a_tekken_file_of_another_name_or_as_bytes(tmp_path: Path) -> None:
    _model_dir(tmp_path, FIXTURE, 1500)
    other = tmp_path / "vocab.json"
    shutil.copyfile(FIXTURE, other)
    for tokenizer in (other, FIXTURE.read_bytes()):
        emb = finalfusion.compat.load_safetensors(tmp_path / "consolidated.safetensors", tokenizer=tokenizer)
        assert len(emb.vocab) == 1424
        assert emb.vocab.words[:2] == ["<unk>", "<s>"]
        assert emb.metadata["safetensors"]["padding_rows_dropped"] == 1500 - 1424


def test_a_table_with_fewer_rows_than_ids_is_refused(tmp_path: Path) -> None:
    _model_dir(tmp_path, FIXTURE, 1423)
    with pytest.raises(FormatError, match="fewer rows than the vocabulary has tokens"):
        finalfusion.load(tmp_path)


# -- hostile files ------------------------------------------------------------------------------


def _doc() -> dict[str, Any]:
    return json.loads(FIXTURE.read_text(encoding="utf-8"))


def _set(path: str, value: Any) -> Any:
    def edit(doc: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        node: Any = doc
        for key in parents:
            node = node[int(key)] if key.isdigit() else node[key]
        if value is _DELETE:
            del node[int(last) if last.isdigit() else last]
        else:
            node[int(last) if last.isdigit() else last] = value

    return edit


_DELETE = object()
_B64 = base64.b64encode


def _swap_ranks(doc: dict[str, Any]) -> None:
    doc["vocab"][300]["rank"], doc["vocab"][301]["rank"] = 301, 300


def _duplicate(doc: dict[str, Any]) -> None:
    doc["vocab"][400]["token_bytes"] = doc["vocab"][300]["token_bytes"]


def _unreachable(doc: dict[str, Any]) -> None:
    doc["vocab"][300]["token_bytes"] = _B64(b"\xfe\xfd\xfc").decode()  # no lower-ranked token joins these bytes


HOSTILE: dict[str, tuple[Any, str]] = {
    "not an object": (lambda doc: doc.clear() or doc.update({"config": []}), "no config object"),
    "no vocab": (_set("vocab", _DELETE), "no vocab list"),
    "unknown regex": (_set("config.pattern", r"(a+)+$"), "not one of the known tokenizer regexes"),
    "pattern not a string": (_set("config.pattern", 5), "config.pattern is not a string"),
    "bad version": (_set("config.version", "3"), "not a Tekken version"),
    "no special tokens after v7": (lambda doc: (doc.pop("special_tokens"), doc["config"].update(version="v11")), "must list its special tokens"),
    "negative specials": (_set("config.default_num_special_tokens", -1), "default_num_special_tokens is not an integer"),
    "boolean size": (_set("config.default_vocab_size", True), "default_vocab_size is not an integer"),
    "too many special tokens": (_set("config.default_num_special_tokens", 10), "more special tokens than"),
    "filler bomb": (lambda doc: doc["config"].update(default_num_special_tokens=1 << 30, default_vocab_size=(1 << 30) + 1400), "too many ids without"),
    "special rank out of place": (_set("special_tokens.3.rank", 7), "special token 3 is not its rank"),
    "repeated special": (_set("special_tokens.3.token_str", "<s>"), "special token 3 repeats special token 1"),
    "special spelled like a filler": (_set("special_tokens.3.token_str", "<SPECIAL_22>"), "spelled like the filler"),
    "num_vocab_tokens lies": (_set("config.num_vocab_tokens", 1501), "num_vocab_tokens is not the number of vocab entries"),
    "vocab size past the entries": (_set("config.default_vocab_size", 24 + 1501), "needs more ranked tokens than the file has"),
    "fewer than 256 tokens": (_set("config.default_vocab_size", 24 + 255), "does not hold every byte"),
    "rank gap": (_set("vocab.300.rank", 999), "entry 300 is not the token of rank 300"),
    "swapped ranks": (_swap_ranks, "entry 300 is not the token of rank 300"),
    "missing bytes": (_set("vocab.5.token_bytes", _DELETE), "entry 5 is not the token of rank 5"),
    "malformed base64": (_set("vocab.300.token_bytes", "a$b="), "token 300 is not valid base64"),
    "unpadded base64": (_set("vocab.300.token_bytes", "YWJ"), "token 300 is not valid base64"),
    "byte out of place": (_set("vocab.65.token_bytes", _B64(b"B").decode()), "token 65 is not byte 65"),
    "one-byte merge": (_set("vocab.300.token_bytes", _B64(b"q").decode()), "token 300 is not a merge of at least two bytes"),
    "duplicate token": (_duplicate, "token 400 repeats token 300"),
    "unreachable token": (_unreachable, "token 300 cannot be built by merging two lower-ranked tokens"),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_malformed_files_are_format_errors(case: str) -> None:
    edit, message = HOSTILE[case]
    doc = _doc()
    edit(doc)
    with pytest.raises(FormatError, match=message) as info:
        read_tekken(json.dumps(doc).encode())
    err = info.value
    assert "tekken.json" in str(err.chunk)
    assert err.expected is not None
    assert err.found is not None


def test_malformed_files_through_a_model_directory(tmp_path: Path) -> None:
    _model_dir(tmp_path, FIXTURE, 1424)
    doc = _doc()
    _duplicate(doc)
    (tmp_path / "tekken.json").write_text(json.dumps(doc))
    with pytest.raises(FormatError, match=r"^tekken.json vocab\[400\]: token 400 repeats token 300"):
        finalfusion.load(tmp_path)


def _tiny(extra: list[bytes]) -> bytes:
    vocab = [{"rank": i, "token_bytes": _B64(t).decode(), "token_str": None} for i, t in enumerate([bytes([b]) for b in range(256)] + extra)]
    pattern = json.loads(FIXTURE.read_text(encoding="utf-8"))["config"]["pattern"]
    n = len(vocab)
    config = {"pattern": pattern, "num_vocab_tokens": n, "default_vocab_size": n + 20, "default_num_special_tokens": 20, "version": "v3"}
    return json.dumps({"config": config, "vocab": vocab}, separators=(",", ":")).encode()


def test_every_prefix_of_a_tiny_file_is_a_format_error() -> None:
    data = _tiny([b"ab", b"abc"])
    assert len(read_tekken(data).tokens) == 20 + 258
    for n in range(len(data)):
        with pytest.raises(FormatError, match="not valid JSON"):
            read_tekken(data[:n])


def test_token_lengths_and_the_vocabulary_bytes_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    chain = [b"a" * n for n in range(2, 41)]  # each the merge of the one before and a byte
    assert len(read_tekken(_tiny(chain)).tokens) == 20 + 256 + 39
    monkeypatch.setattr(limits, "MAX_TEKKEN_TOKEN_BYTES", 39)
    with pytest.raises(FormatError, match="token 294 is too long") as info:
        read_tekken(_tiny(chain))
    assert "MAX_TEKKEN_TOKEN_BYTES = 39" in str(info.value.expected)
    monkeypatch.setattr(limits, "MAX_TEKKEN_TOKEN_BYTES", 1 << 9)
    monkeypatch.setattr(limits, "MAX_TEKKEN_VOCAB_BYTES", 256 + 100)
    with pytest.raises(FormatError, match="too many bytes in all"):
        read_tekken(_tiny(chain))
    monkeypatch.setattr(limits, "MAX_TOKENIZER_BYTES", 1000)
    with pytest.raises(FormatError, match="the file is too large"):
        read_tekken(_tiny(chain))


def test_a_trusted_regex_is_accepted(monkeypatch: pytest.MonkeyPatch) -> None:
    doc = json.loads(_tiny([]))
    doc["config"]["pattern"] = r"\p{L}+|\S|\s+"
    with pytest.raises(FormatError, match="known tokenizer regexes"):
        read_tekken(json.dumps(doc).encode())
    monkeypatch.setattr(limits, "TRUSTED_TOKENIZER_REGEXES", frozenset({r"\p{L}+|\S|\s+"}))
    assert len(read_tekken(json.dumps(doc).encode()).tokens) == 20 + 256


def test_a_special_token_spelled_like_a_ranked_token_gets_a_placeholder(tmp_path: Path) -> None:
    doc = _doc()
    doc["special_tokens"][3]["token_str"] = "Ġt"  # the byte-level spelling of ranked token " t"
    _model_dir(tmp_path, FIXTURE, 1424)
    (tmp_path / "tekken.json").write_text(json.dumps(doc))
    words = finalfusion.load(tmp_path).vocab.words
    again = words.index("Ġt")
    assert again == 3
    assert words.count("Ġt") == 1
    assert "<row " in "".join(words[24:])


def test_random_damage_is_answered_or_refused() -> None:
    data = FIXTURE.read_bytes()
    rng = random.Random(25)
    for _ in range(200):
        damaged = bytearray(data)
        for _ in range(rng.randint(1, 4)):
            damaged[rng.randrange(len(damaged))] = rng.randrange(256)
        with contextlib.suppress(FormatError):
            read_tekken(bytes(damaged))


def test_read_tekken_does_not_change_the_document_it_is_given() -> None:
    doc = _doc()
    before = copy.deepcopy(doc)
    read_tekken(json.dumps(doc).encode())
    assert doc == before


# -- the fuzzer's generator ---------------------------------------------------------------------


def _fuzz() -> Any:
    from conftest import load_fuzz

    return load_fuzz()


def test_generated_files_reach_reads_and_every_kind_of_refusal() -> None:
    fuzz = _fuzz()
    outcomes: dict[str, int] = {}
    for seed in range(120):
        data = fuzz.tekken_structured(random.Random(seed))
        try:
            read_tekken(data)
            key = "read"
        except FormatError as err:
            key = err.message.split(":")[0]
        outcomes[key] = outcomes.get(key, 0) + 1
    assert outcomes["read"] >= 60
    refused = " | ".join(outcomes)
    for kind in ("not a Tekken version", "not one of the known tokenizer regexes", "is not the token of rank", "not valid JSON"):
        assert kind in refused, outcomes


def test_generated_files_that_read_give_tekkenizer_ids(tmp_path: Path) -> None:
    pytest.importorskip("mistral_common")
    pytest.importorskip("tokenizers")
    from finalfusion.vocab import HuggingFaceTokenizer

    fuzz = _fuzz()
    checked = 0
    for seed in range(40):
        data = fuzz.tekken_structured(random.Random(seed))
        try:
            model = read_tekken(data)
        except FormatError:
            continue
        path = tmp_path / f"tekken_{seed}.json"
        path.write_bytes(data)
        tk = _tekkenizer(path)
        assert len(model.tokens) == tk.n_words
        tok = HuggingFaceTokenizer.from_json(model.tokenizer_json.decode("utf-8"))
        words = TEXTS[:25]
        assert tok.encode_batch(words) == [tk.encode(w, bos=False, eos=False) for w in words], seed
        checked += 1
    assert checked >= 20
