"""Model directories and files in every command of the CLI, with ``--tensor`` and ``--tokenizer`` (issue 25).

The models are written here by the real tools -- ``safetensors`` tables with ``tokenizers`` and
``sentencepiece`` tokenizers trained here (Hugging Face layout), model2vec's
``StaticModel.save_pretrained``, WordLlama's package layout, gguf-py's ``GGUFWriter`` -- and each
command is run on them in-process through :func:`finalfusion.cli.main` (as test_cli_exit_statuses.py
does), a few also as a separate process (test_cli.py's ``ff``). What a command printed or wrote is
compared with the same work done on ``finalfusion.load(path, tensor=..., tokenizer=...)``, and
``--tokenizer`` with the word rule computed from the other tokenizer's own ids.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import finalfusion
from finalfusion.cli import main

tokenizers = pytest.importorskip("tokenizers")
safetensors_numpy = pytest.importorskip("safetensors.numpy")

CORPUS = [
    "the quick brown fox jumps over the lazy dog",
    "a house is not a home said the happy householder",
    "happiness is a warm puppy and housing is expensive",
    "paris is to france as berlin is to germany",
] * 25
WORDS = ["house", "happiness", "the", "fox", "puppy", "householder"]
#: The tensors of the two-table checkpoint: neither is a name of a known model, so the loader cannot choose.
TENSORS = ("encoder.tok.weight", "decoder.tok.weight")
DIMS = 12


def _wordpiece(vocab_size: int = 150) -> Any:
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, trainers

    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.train_from_iterator(CORPUS, trainers.WordPieceTrainer(vocab_size=vocab_size, special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]"]))
    return tok


def _unigram(vocab_size: int = 60) -> Any:
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    tok = Tokenizer(models.Unigram())
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    tok.train_from_iterator(CORPUS, trainers.UnigramTrainer(vocab_size=vocab_size, special_tokens=["<unk>"], unk_token="<unk>"))
    return tok


def _table(n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (rng.normal(size=(n, DIMS)) * rng.uniform(0.2, 4.0, size=(n, 1))).astype(np.float32)


@pytest.fixture(scope="module")
def two_tables(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A Hugging Face-style directory (model.safetensors + tokenizer.json) whose checkpoint holds two candidate tables."""
    d = tmp_path_factory.mktemp("two-tables")
    tok = _wordpiece()
    tok.save(str(d / "tokenizer.json"))
    n = tok.get_vocab_size()
    safetensors_numpy.save_file(
        {TENSORS[0]: _table(n, 1), TENSORS[1]: _table(n + 5, 2), "final_norm.weight": np.ones(DIMS, np.float32)}, str(d / "model.safetensors")
    )
    return d


@pytest.fixture(scope="module")
def other_tokenizer(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Another model's tokenizer.json (a Unigram/Metaspace one), with fewer tokens than the tables have rows."""
    d = tmp_path_factory.mktemp("other-tokenizer")
    _unigram().save(str(d / "tokenizer.json"))
    return d / "tokenizer.json"


def run(capsys: pytest.CaptureFixture[str], *args: Any, stdin: str | None = None, monkeypatch: pytest.MonkeyPatch | None = None) -> tuple[int, str, str]:
    """``finalfusion ARGS`` in this process: the exit status (usage errors included), stdout and stderr."""
    if stdin is not None:
        assert monkeypatch is not None
        import io

        monkeypatch.setattr("sys.stdin", io.StringIO(stdin))
    try:
        status = main([str(a) for a in args])
    except SystemExit as exc:  # argparse's usage errors
        status = int(exc.code or 0)
    out, err = capsys.readouterr()
    return status, out, err


def _load(path: Path, **kw: Any) -> finalfusion.Embeddings:
    return finalfusion.load(path, **kw)


def _similar_lines(emb: finalfusion.Embeddings, word: str, k: int) -> list[str]:
    from finalfusion.cli._common import rust_float

    results = emb.word_similarity(word, k=k)
    assert results is not None
    return [f"{r.word}\t{rust_float(np.float32(r.similarity))}" for r in results]


# --- every command: --tensor picks the table; without it the error names the candidates -------------------------------------


def _check_convert(tmp: Path, model: Path, opts: list[str], capsys: Any, mp: Any, ref: finalfusion.Embeddings) -> None:
    status, _, err = run(capsys, "convert", *opts, model, tmp / "out.fifu")
    assert status == 0, err
    out = finalfusion.load(tmp / "out.fifu")
    assert out.vocab.words == ref.vocab.words
    np.testing.assert_array_equal(np.asarray(out.storage), np.asarray(ref.storage))
    np.testing.assert_array_equal(out["householder"], ref["householder"])  # the tokenizer came along: the same unknown-word vector


def _check_quantize(tmp: Path, model: Path, opts: list[str], capsys: Any, mp: Any, ref: finalfusion.Embeddings) -> None:
    status, _, err = run(capsys, "quantize", "--quiet", "-s", 3, "-b", 2, "-i", 2, "--seed", 0, *opts, model, tmp / "pq.fifu")
    assert status == 0, err
    out = finalfusion.load(tmp / "pq.fifu")
    assert out.storage.shape == ref.storage.shape
    assert ref.norms is not None
    assert out.norms is not None
    np.testing.assert_array_equal(np.asarray(out.norms), np.asarray(ref.norms))  # the chosen table's norms, kept by quantize


def _check_select(tmp: Path, model: Path, opts: list[str], capsys: Any, mp: Any, ref: finalfusion.Embeddings) -> None:
    (tmp / "words.txt").write_text("\n".join(WORDS) + "\n")
    status, _, err = run(capsys, "select", *opts, model, tmp / "sel.fifu", tmp / "words.txt")
    assert status == 0, err
    out = finalfusion.load(tmp / "sel.fifu")
    assert out.vocab.words == WORDS
    for w in WORDS:
        np.testing.assert_allclose(out[w], ref[w], rtol=1e-6, atol=1e-7)


def _check_similar(tmp: Path, model: Path, opts: list[str], capsys: Any, mp: Any, ref: finalfusion.Embeddings) -> None:
    status, out, err = run(capsys, "similar", "-k", 4, *opts, model, stdin="house\nfox\n", monkeypatch=mp)
    assert status == 0, err
    assert out.splitlines() == _similar_lines(ref, "house", 4) + _similar_lines(ref, "fox", 4)


def _check_analogy(tmp: Path, model: Path, opts: list[str], capsys: Any, mp: Any, ref: finalfusion.Embeddings) -> None:
    from finalfusion.cli._common import rust_float

    status, out, err = run(capsys, "analogy", "-k", 3, *opts, model, stdin="paris france berlin\n", monkeypatch=mp)
    assert status == 0, err
    results = ref.analogy("paris", "france", "berlin", k=3)
    assert results is not None
    assert out.splitlines() == [f"{r.word}\t{rust_float(np.float32(r.similarity))}" for r in results]


def _check_compute_accuracy(tmp: Path, model: Path, opts: list[str], capsys: Any, mp: Any, ref: finalfusion.Embeddings) -> None:
    from finalfusion.cli._query import format_utils_accuracy, utils_accuracy

    questions = tmp / "questions.txt"
    questions.write_text(": capitals\nparis france berlin germany\nhouse home fox dog\n")
    status, out, err = run(capsys, "compute-accuracy", "--quiet", *opts, model, questions)
    assert status == 0, err
    assert out == format_utils_accuracy(utils_accuracy(ref, str(questions)))[0] + "\n"


def _check_encode(tmp: Path, model: Path, opts: list[str], capsys: Any, mp: Any, ref: finalfusion.Embeddings) -> None:
    texts = ["a happy house", "the quick brown fox"]
    status, out, err = run(capsys, "encode", "--json", *opts, model, stdin="\n".join(texts) + "\n", monkeypatch=mp)
    assert status == 0, err
    got = np.array([json.loads(line)["vector"] for line in out.splitlines()], dtype=np.float32)
    np.testing.assert_array_equal(got, ref.encode(texts))


def _check_index_build(tmp: Path, model: Path, opts: list[str], capsys: Any, mp: Any, ref: finalfusion.Embeddings) -> None:
    pytest.importorskip("hnswlib")
    status, _, err = run(capsys, "index", "build", "--quiet", "--backend", "hnswlib", *opts, model, tmp / "ix.ann")
    assert status == 0, err
    # The index is of the chosen table: queried with the same options it gives the exact neighbours...
    status, out, err = run(capsys, "similar", "-k", 3, "--index", tmp / "ix.ann", *opts, model, "-w", "house")
    assert status == 0, err
    assert out.splitlines() == _similar_lines(ref, "house", 3)


def _check_info(tmp: Path, model: Path, opts: list[str], capsys: Any, mp: Any, ref: finalfusion.Embeddings) -> None:
    status, out, err = run(capsys, "info", "--json", *opts, model)
    assert status == 0, err
    info = json.loads(out)
    assert info["format"] == "safetensors"
    assert info["metadata"]["safetensors"]["tensor"] == ref.metadata["safetensors"]["tensor"]  # type: ignore[index]
    assert info["storage"]["rows"] == ref.storage.shape[0]
    status, out, err = run(capsys, "info", *opts, model)
    assert status == 0, err
    md = ref.metadata["safetensors"]  # type: ignore[index]
    dropped = f", {md['padding_rows_dropped']} padding rows dropped" if md["padding_rows_dropped"] else ""
    assert f"\nmodel:      tensor {md['tensor']} (F32 {md['shape']}), tokenizer.json (tokenizer.json){dropped}\n" in out


def _check_lookup(tmp: Path, model: Path, opts: list[str], capsys: Any, mp: Any, ref: finalfusion.Embeddings) -> None:
    status, out, err = run(capsys, "lookup", "--full", *opts, model, "householders")
    assert status == 0, err
    assert f"'tensor': '{ref.metadata['safetensors']['tensor']}'" in out  # type: ignore[index]
    found = ref.embedding_with_norm("householders")
    assert found is not None
    assert "householders" not in ref.vocab
    tokens = len(ref.vocab.word_rows("householders"))  # type: ignore[arg-type]
    assert tokens > 1
    with np.printoptions(precision=4, suppress=True, threshold=10**9):
        assert f"'householders' (from {tokens} tokens, norm {found[1]:.4f}): {found[0]}\n" in out


def _check_bucket_to_explicit(tmp: Path, model: Path, opts: list[str], capsys: Any, mp: Any, ref: finalfusion.Embeddings) -> None:
    # A model's vocabulary has no buckets: the table is read (the options accepted), then the conversion is refused, one line.
    status, _, err = run(capsys, "bucket-to-explicit", *opts, model, tmp / "explicit.fifu")
    assert status == 1
    assert err.count("\n") == 1
    assert "Traceback" not in err
    assert "TokenizerVocab" in err or "bucket" in err


CHECKS: dict[str, Callable[..., None]] = {
    "convert": _check_convert,
    "quantize": _check_quantize,
    "select": _check_select,
    "bucket-to-explicit": _check_bucket_to_explicit,
    "similar": _check_similar,
    "analogy": _check_analogy,
    "compute-accuracy": _check_compute_accuracy,
    "encode": _check_encode,
    "index": _check_index_build,
    "info": _check_info,
    "lookup": _check_lookup,
}

#: A minimal command line of each command, with MODEL where the model goes (for the error without --tensor).
LINES: dict[str, str] = {
    "convert": "convert MODEL OUT/out.fifu",
    "quantize": "quantize MODEL OUT/pq.fifu",
    "select": "select MODEL OUT/sel.fifu -",
    "bucket-to-explicit": "bucket-to-explicit MODEL OUT/x.fifu",
    "similar": "similar MODEL -w house",
    "analogy": "analogy MODEL -w paris france berlin",
    "compute-accuracy": "compute-accuracy MODEL -",
    "encode": "encode MODEL -",
    "index": "index build MODEL OUT/ix.ann",
    "info": "info MODEL",
    "lookup": "lookup MODEL house",
}


def _parsers(parser: Any, prefix: str = "") -> dict[str, Any]:
    """Every (sub)command's parser by its name (``index build`` as ``index``, the group it is the one action of)."""
    import argparse

    out: dict[str, Any] = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                out[prefix or name] = sub
                out.update({k: v for k, v in _parsers(sub, prefix or name).items() if k != (prefix or name) or v.get_default("func")})
    return out


def test_every_command_that_reads_embeddings_is_covered() -> None:
    from finalfusion.cli import build_parser

    parsers = _parsers(build_parser())
    flags = {name: {f for a in p._actions for f in a.option_strings} for name, p in parsers.items()}
    readers = {name for name, f in flags.items() if "--from" in f}
    assert readers == set(CHECKS) == set(LINES)
    for name in readers:  # every command that reads embeddings has both options
        assert {"--tensor", "--tokenizer"} <= flags[name], name
    # metadata and reconstruct read finalfusion files only (test_metadata_and_reconstruct_...): they have neither
    assert not {"--tensor", "--tokenizer"} & (flags["metadata"] | flags["reconstruct"])


@pytest.mark.parametrize("command", sorted(CHECKS))
@pytest.mark.parametrize("tensor", TENSORS)
def test_tensor_picks_the_table_in_every_command(
    command: str, tensor: str, two_tables: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    ref = _load(two_tables, tensor=tensor)
    CHECKS[command](tmp_path, two_tables, ["--tensor", tensor], capsys, monkeypatch, ref)


@pytest.mark.parametrize("command", sorted(LINES))
def test_without_tensor_the_error_names_the_candidates(
    command: str, two_tables: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("sys.stdin", __import__("io").StringIO("house\n"))
    argv = [str(two_tables) if a == "MODEL" else a.replace("OUT", str(tmp_path)) for a in shlex.split(LINES[command])]
    status, out, err = run(capsys, *argv)
    assert status == 2
    assert out == ""
    assert err.count("\n") == 1
    assert "Traceback" not in err
    assert err.startswith(f"finalfusion: error: {two_tables}: no embedding table")
    assert "--tensor" in err
    for name in TENSORS:
        assert name in err
    assert not list(tmp_path.iterdir())  # nothing written


@pytest.mark.parametrize("command", sorted(LINES))
def test_a_tensor_the_model_lacks_is_a_usage_error_naming_the_tensors(
    command: str, two_tables: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("sys.stdin", __import__("io").StringIO("house\n"))
    argv = [str(two_tables) if a == "MODEL" else a.replace("OUT", str(tmp_path)) for a in shlex.split(LINES[command])]
    status, _, err = run(capsys, *argv, "--tensor", "lm_head.weight")
    assert status == 2
    names = ", ".join(sorted([*TENSORS, "final_norm.weight"]))
    assert err == f"finalfusion: error: {two_tables}: --tensor lm_head.weight: the model has no such tensor; it has: {names}\n"


# --- --tokenizer ------------------------------------------------------------------------------------------------------


def _word_rule(table: np.ndarray, tok: Any, word: str) -> np.ndarray:
    """The word's vector by the word rule, from the tokenizer's own ids: the mean of the model's rows, l2-normalised."""
    ids = [i for i in tok.encode(word, add_special_tokens=False).ids if i != tok.token_to_id("<unk>")]
    v = table[ids].astype(np.float64).mean(axis=0)
    return (v / np.linalg.norm(v)).astype(np.float32)


@pytest.mark.parametrize("given", ["file", "directory"])
def test_tokenizer_reads_the_table_with_another_tokenizer(
    given: str, two_tables: Path, other_tokenizer: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tokenizers import Tokenizer

    path = other_tokenizer if given == "file" else other_tokenizer.parent
    status, _, err = run(capsys, "convert", "--tensor", TENSORS[0], "--tokenizer", path, two_tables, tmp_path / "o.fifu")
    assert status == 0, err
    out = finalfusion.load(tmp_path / "o.fifu")
    tok = Tokenizer.from_file(str(other_tokenizer))
    assert out.vocab.words == [tok.id_to_token(i) for i in range(tok.get_vocab_size())]
    table = _table(_wordpiece().get_vocab_size(), 1)[: tok.get_vocab_size()]  # the rows of the other tokenizer's ids
    for word in ["house", "happiness", "householder", "fox"]:
        np.testing.assert_allclose(out[word], _word_rule(table, tok, word), rtol=2e-6, atol=2e-7)
    assert out.metadata is not None
    assert "tokenizer.json" in out.metadata["safetensors"]["tokenizer"]
    status, out_text, err = run(capsys, "info", "--tensor", TENSORS[0], "--tokenizer", path, two_tables)
    assert status == 0, err
    assert f"tokenizer.json ({other_tokenizer.name})" in out_text


def test_tokenizer_with_more_tokens_than_rows_is_a_usage_error(two_tables: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from _model_helpers import train_byte_level_bpe

    big = tmp_path / "big.json"
    big.write_text(train_byte_level_bpe(500))  # 500 tokens, the table 137 rows
    status, _, err = run(capsys, "lookup", "--tensor", TENSORS[0], "--tokenizer", big, two_tables, "house")
    assert status == 2
    assert err.count("\n") == 1
    assert f"--tokenizer {big} has " in err
    assert "another model's tokenizer" in err


@pytest.mark.parametrize("content", [b"\x00\x01 not a tokenizer", b'{"version": "1.0", "model": 5}'])
def test_a_file_that_is_no_tokenizer_is_a_usage_error(content: bytes, two_tables: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / ("bad.json" if content.startswith(b"{") else "bad.model")
    bad.write_bytes(content)
    status, _, err = run(capsys, "encode", "--tensor", TENSORS[0], "--tokenizer", bad, two_tables, "-")
    assert status == 2
    assert err.count("\n") == 1
    assert "Traceback" not in err
    assert err.startswith(f"finalfusion: error: {two_tables}: --tokenizer {bad}: not a tokenizer this library reads: ")


def test_a_missing_tokenizer_or_an_empty_tensor_is_argparses_usage_error(two_tables: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status, _, err = run(capsys, "info", "--tokenizer", tmp_path / "nope.json", two_tables)
    assert status == 2
    assert err.splitlines()[-1] == f"finalfusion info: error: argument --tokenizer: {tmp_path / 'nope.json'}: no such file or directory"
    status, _, err = run(capsys, "info", "--tensor", "", two_tables)
    assert status == 2
    assert err.splitlines()[-1] == "finalfusion info: error: argument --tensor: expected a tensor name, got an empty one"


def test_options_for_inputs_without_tensors_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str], other_tokenizer: Path) -> None:
    emb = finalfusion.Embeddings(finalfusion.NdArray(np.eye(2, dtype=np.float32)), finalfusion.SimpleVocab(["a", "b"]))
    emb.write(tmp_path / "e.fifu")
    finalfusion.compat.write_word2vec(tmp_path / "e.w2v", emb)
    for path, fmt in ((tmp_path / "e.fifu", "finalfusion"), (tmp_path / "e.w2v", "word2vec")):
        for cmd in (["info"], ["lookup"], ["convert", "--to", "text"]):
            argv = [*cmd, "--tensor", "x", path] + ([tmp_path / "o.txt"] if cmd[0] == "convert" else [])
            status, _, err = run(capsys, *argv)
            assert (status, err) == (2, f"finalfusion: error: {path}: --tensor does not apply to {fmt} input (only to gguf and safetensors models)\n")
        status, _, err = run(capsys, "lookup", "--tokenizer", other_tokenizer, path)
        hint = "; vectors keyed by the pieces of a SentencePiece model (BPEmb) are read with finalfusion.load_sentencepiece(model, vectors)"
        assert (status, err) == (
            2,
            f"finalfusion: error: {path}: --tokenizer does not apply to {fmt} input (only to safetensors models){hint * (fmt == 'word2vec')}\n",
        )


def test_errors_are_one_line_in_a_real_process(two_tables: Path, other_tokenizer: Path, tmp_path: Path) -> None:
    from test_cli import ff

    r = ff("similar", two_tables, "-w", "house")
    assert r.returncode == 2
    assert r.stdout == ""
    assert r.stderr.count("\n") == 1
    assert all(name in r.stderr for name in TENSORS)
    bad = tmp_path / "bad.model"
    bad.write_bytes(b"\xff" * 64)
    r = ff("encode", "--tensor", TENSORS[1], "--tokenizer", bad, two_tables, stdin="a house\n")
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1
    assert "--tokenizer" in r.stderr
    r = ff("encode", "--tensor", TENSORS[1], "--tokenizer", other_tokenizer, two_tables, stdin="a house\n")
    assert r.returncode == 0, r.stderr
    ref = finalfusion.load(two_tables, tensor=TENSORS[1], tokenizer=other_tokenizer)
    np.testing.assert_array_equal(np.array(r.stdout.split(), dtype=np.float32), ref.encode("a house"))


@pytest.mark.parametrize("command", ["lookup", "similar"])
def test_without_the_tokenizer_package_the_error_names_the_models_extra(
    command: str, two_tables: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(__import__("sys").modules, "tokenizers", None)  # as if the models extra were not installed
    argv = ["lookup", "--tensor", TENSORS[0], two_tables, "house"] if command == "lookup" else ["similar", "--tensor", TENSORS[0], two_tables, "-w", "house"]
    status, out, err = run(capsys, *argv)
    assert status == 1
    assert "house" not in out  # (lookup prints the model's summary first)
    # one plain line saying what to install; not the exception's class name
    assert err == "finalfusion: error: tokenizing an unknown word needs the tokenizers package: pip install 'finalfusion-py[models]'\n"


# --- every kind of model input loads as finalfusion.load loads it ---------------------------------------------------------


def _hf(root: Path) -> Path:
    """A Hugging Face-style directory: model.safetensors with a BERT table name, tokenizer.json beside it."""
    tok = _wordpiece()
    tok.save(str(root / "tokenizer.json"))
    safetensors_numpy.save_file({"bert.embeddings.word_embeddings.weight": _table(tok.get_vocab_size() + 2, 4)}, str(root / "model.safetensors"))
    return root


def _hf_sentencepiece(root: Path) -> Path:
    """A directory with model.safetensors and a SentencePiece tokenizer.model (no tokenizer.json) beside it."""
    from _model_helpers import train_sentencepiece

    pytest.importorskip("sentencepiece")
    model = train_sentencepiece("unigram", False)
    (root / "tokenizer.model").write_bytes(model)
    import sentencepiece as spm

    n = spm.SentencePieceProcessor(model_proto=model).GetPieceSize()
    safetensors_numpy.save_file({"model.embed_tokens.weight": _table(n, 5)}, str(root / "model.safetensors"))
    return root


def _model2vec(root: Path) -> Path:
    model2vec = pytest.importorskip("model2vec")
    tok = _wordpiece()
    model2vec.StaticModel(_table(tok.get_vocab_size(), 6), tok, normalize=True).save_pretrained(root)
    return root


def _wordllama_weights(root: Path) -> Path:
    tok = _unigram(90)
    (root / "tokenizers").mkdir()
    tok.save(str(root / "tokenizers" / "custom_tokenizer_config.json"))
    (root / "weights").mkdir()
    safetensors_numpy.save_file({"embedding.weight": _table(tok.get_vocab_size(), 7)}, str(root / "weights" / f"custom_{DIMS}.safetensors"))
    return root / "weights" / f"custom_{DIMS}.safetensors"


def _gguf(root: Path) -> Path:
    gguf = pytest.importorskip("gguf")
    from _model_helpers import train_sentencepiece

    pytest.importorskip("sentencepiece")
    import sentencepiece as spm

    sp = spm.SentencePieceProcessor(model_proto=train_sentencepiece("bpe", True))
    n = sp.GetPieceSize()
    path = root / "m.gguf"
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_tokenizer_model("llama")
    writer.add_token_list([sp.IdToPiece(i) for i in range(n)])
    writer.add_token_scores([sp.GetScore(i) for i in range(n)])
    types = [3 if sp.IsControl(i) else 2 if sp.IsUnknown(i) else 6 if sp.IsByte(i) else 1 for i in range(n)]
    writer.add_token_types(types)
    writer.add_tensor("token_embd.weight", _table(n, 8))
    writer.add_tensor("output.weight", _table(n, 9))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


MODELS: dict[str, Callable[[Path], Path]] = {
    "hf-dir": _hf,
    "hf-sentencepiece-dir": _hf_sentencepiece,
    "model2vec-dir": _model2vec,
    "wordllama-file": _wordllama_weights,
    "wordllama-weights-dir": lambda root: _wordllama_weights(root).parent,
    "gguf": _gguf,
}


@pytest.mark.parametrize("kind", sorted(MODELS))
def test_model_inputs_load_as_finalfusion_load_loads_them(
    kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "model").mkdir()
    model = MODELS[kind](tmp_path / "model")
    ref = finalfusion.load(model)
    _check_convert(tmp_path, model, [], capsys, monkeypatch, ref) if kind != "gguf" else None
    status, out, err = run(capsys, "encode", "--json", model, stdin="a happy house\nthe quick brown fox\n", monkeypatch=monkeypatch)
    assert status == 0, err
    got = np.array([json.loads(line)["vector"] for line in out.splitlines()], dtype=np.float32)
    np.testing.assert_array_equal(got, ref.encode(["a happy house", "the quick brown fox"]))
    status, out, err = run(capsys, "similar", "-k", 3, model, "-w", "house")
    assert status == 0, err
    assert out.splitlines() == _similar_lines(ref, "house", 3)


def test_gguf_tensor_reads_the_output_table_and_refuses_tokenizer(tmp_path: Path, capsys: pytest.CaptureFixture[str], other_tokenizer: Path) -> None:
    gguf = pytest.importorskip("gguf")
    path = _gguf(tmp_path)
    reader = gguf.GGUFReader(str(path))
    output = next(t for t in reader.tensors if t.name == "output.weight")
    expected = np.asarray(output.data, dtype=np.float32).reshape(-1, DIMS)
    status, _, err = run(capsys, "convert", "--no-normalize", "--tensor", "output.weight", path, tmp_path / "o.fifu")
    assert status == 0, err
    np.testing.assert_array_equal(np.asarray(finalfusion.load(tmp_path / "o.fifu").storage), expected)
    status, _, err = run(capsys, "lookup", "--tensor", "nope", path, "house")
    assert (status, err) == (2, f"finalfusion: error: {path}: --tensor nope: the model has no such tensor; it has: output.weight, token_embd.weight\n")
    status, _, err = run(capsys, "lookup", "--tokenizer", other_tokenizer, path, "house")
    assert (status, err) == (2, f"finalfusion: error: {path}: --tokenizer does not apply to gguf input (only to safetensors models)\n")


def test_a_gguf_without_token_embd_names_its_tensors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    gguf = pytest.importorskip("gguf")
    path = tmp_path / "no-embd.gguf"
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_token_list(["a", "b", "c"])
    writer.add_tensor("tok.weight", _table(3, 1))
    writer.add_tensor("out.weight", _table(3, 2))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    status, _, err = run(capsys, "info", path)
    assert (status, err) == (
        2,
        f"finalfusion: error: {path}: no embedding table under the name token_embd.weight: name it with --tensor, one of: out.weight, tok.weight\n",
    )
    status, out, err = run(capsys, "info", "--tensor", "out.weight", path)
    assert status == 0, err
    assert "\nmodel:      tensor out.weight (F32)\n" in out  # the table chosen; no tokenizer.ggml.model in this file


def test_metadata_and_reconstruct_say_what_a_model_directory_is(two_tables: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status, _, err = run(capsys, "metadata", two_tables)
    assert status == 1
    assert err.startswith(f"finalfusion: error: {two_tables}: a directory (a model directory?), not a finalfusion file: ")
    assert err.endswith(": only finalfusion files hold metadata; convert it first\n")
    for model in (two_tables, two_tables / "model.safetensors"):
        status, _, err = run(capsys, "reconstruct", model, tmp_path / "r.fifu")
        assert status == 1
        assert err == f"finalfusion: error: {model}: safetensors input: reconstruct reads quantized finalfusion files ('finalfusion quantize' writes them)\n"


# --- the library call behind it and the completions ----------------------------------------------------------------------


def test_finalfusion_load_takes_tensor_and_tokenizer(two_tables: Path, other_tokenizer: Path, tmp_path: Path) -> None:
    a = finalfusion.load(two_tables, tensor=TENSORS[0], normalize=False)
    np.testing.assert_array_equal(np.asarray(a.storage), _table(_wordpiece().get_vocab_size(), 1))
    b = finalfusion.load(str(two_tables / "model.safetensors"), tensor=TENSORS[1], tokenizer=str(other_tokenizer))
    assert b.metadata is not None
    assert b.metadata["safetensors"]["padding_rows_dropped"] == _wordpiece().get_vocab_size() + 5 - len(b.vocab)
    emb = finalfusion.Embeddings(finalfusion.NdArray(np.eye(2, dtype=np.float32)), finalfusion.SimpleVocab(["a", "b"]))
    emb.write(tmp_path / "e.fifu")
    with pytest.raises(ValueError, match=r"^tensor= does not apply to finalfusion input \(only to gguf, safetensors\)$"):
        finalfusion.load(tmp_path / "e.fifu", tensor="x")
    with pytest.raises(ValueError, match=r"^tokenizer= does not apply to finalfusion input \(only to safetensors\)$"):
        finalfusion.load(tmp_path / "e.fifu", tokenizer=str(other_tokenizer))


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_completions_offer_the_options(shell: str, capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = run(capsys, "completions", shell)
    assert status == 0
    for option in ("tensor", "tokenizer"):
        if shell == "fish":
            assert f"complete -c finalfusion -n '__fish_seen_subcommand_from encode' -l {option} -r -F" in out
        elif shell == "zsh":
            assert f"'--{option}[" in out
        else:
            line = next(line for line in out.splitlines() if line.strip().startswith("encode)"))
            assert f" --{option}" in line.split("case")[0]  # offered after encode


# --- a real model: the WordLlama weights shipped in the wordllama package ----------------------------------------------------


def test_real_wordllama_weights_give_wordllamas_embed(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """l2_supercat_256 (Llama 2's tokenizer, 32,000 x 256 F16), as the wordllama package ships it: file, directory, --tokenizer."""
    wordllama = pytest.importorskip("wordllama")
    package = Path(wordllama.__file__).parent
    weights = package / "weights" / "l2_supercat_256.safetensors"
    tokenizer = package / "tokenizers" / "l2_supercat_tokenizer_config.json"
    if not weights.is_file() or not tokenizer.is_file():
        pytest.skip("this wordllama package does not ship l2_supercat_256")
    wl = wordllama.WordLlama.load(dim=256, disable_download=True, cache_dir=package)
    texts = ["the quick brown fox jumps over the lazy dog", "happiness", "a", "It's dangerous to go alone!", "e-mail the U.S.A. office", "日本語"]
    # special-token text: WordLlama's embed keeps the rows of <s>, </s> and <unk> written in a text, and so does encode (issue 35)
    texts += ["<s> the house </s>", "an <unk> word", "  two  spaces  "]
    expected = wl.embed(texts, norm=False)
    # The weights file and the weights/ directory find WordLlama's tokenizer in ../tokenizers; --tokenizer names it outright.
    for args in ([weights], [weights.parent], ["--tokenizer", tokenizer, weights], ["--tensor", "embedding.weight", weights]):
        status, out, err = run(capsys, "encode", "--json", "--no-normalize", *args, "-", stdin="\n".join(texts) + "\n", monkeypatch=monkeypatch)
        assert status == 0, err
        got = np.array([json.loads(line)["vector"] for line in out.splitlines()], dtype=np.float32)
        np.testing.assert_array_equal(got, expected)  # bit for bit: WordLlama's mean of the F16 rows, in float32
    # Words: the word rule gives WordLlama's vector of the word as a text ("a" is "▁a", not the mid-word piece "a").
    words = ["a", "house", "happiness", "Householders"]
    status, out, err = run(capsys, "convert", "--no-normalize", weights, tmp_path / "wl.fifu")
    assert status == 0, err
    emb = finalfusion.load(tmp_path / "wl.fifu")
    np.testing.assert_array_equal(np.stack([emb[w] for w in words]), wl.embed(words, norm=False))
    assert emb.vocab.subwords("a") == ["▁a"]
    status, out, err = run(capsys, "info", weights.parent)
    assert status == 0, err
    assert "\nmodel:      tensor embedding.weight (F16 [32000, 256]), tokenizer.json (l2_supercat_tokenizer_config.json)\n" in out
