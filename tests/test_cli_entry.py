"""The command line's entry point (issues 24 and 26): a bare ``finalfusion`` shows the help, a path typo says the file
does not exist (and names a close file), a subcommand's usage error shows that subcommand's usage, and a model
tokenizer's failure -- an exception or a Rust panic -- is one line and status 1, never a traceback.

Ctrl-C at any moment of the start is in test_cli_entry_interrupt.py.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from _model_helpers import train_wordpiece
from finalfusion import Embeddings
from finalfusion.cli import execute, main
from finalfusion.compat._model_vocab import hf_tokens
from finalfusion.storage import NdArray
from finalfusion.vocab import HuggingFaceTokenizer, TokenizerVocab

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "examples" / "sample.fifu"


def env() -> dict[str, str]:
    e = dict(os.environ)
    e["PYTHONPATH"] = str(REPO / "src") + os.pathsep + e.get("PYTHONPATH", "")
    e["RUST_BACKTRACE"] = "0"
    return e


def run(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "finalfusion", *args], input=stdin, capture_output=True, text=True, env=env(), timeout=120, check=False)


# --- a bare command, path typos, subcommand usage -------------------------------------------


def test_a_bare_command_shows_the_help_as_a_usage_error() -> None:
    r = run()
    assert r.returncode == 2  # a usage error, as argparse treats a missing command (utils' clap 2: help on stderr, status 1)
    assert r.stdout == ""
    assert r.stderr.startswith("usage: finalfusion")
    assert "positional arguments:" in r.stderr
    assert "similar" in r.stderr  # the whole help: every command
    assert "examples:" in r.stderr  # and the examples
    assert "error" not in r.stderr


def test_a_path_typo_says_the_file_does_not_exist_and_names_the_close_one(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "sample.fifu").write_bytes(SAMPLE.read_bytes())
    typo = str(tmp_path / "sample.fif")
    assert main([typo, "berlin"]) == 1
    err = capsys.readouterr().err
    assert err == f"finalfusion: error: {typo}: no such file or directory (did you mean {tmp_path / 'sample.fifu'}?)\n"
    assert "invalid choice" not in err


def test_a_path_typo_through_the_real_process() -> None:
    # The command line, typed in the repository's root.
    r = subprocess.run(
        [sys.executable, "-m", "finalfusion", "examples/sample.fif", "berlin"], capture_output=True, text=True, env=env(), cwd=REPO, timeout=120, check=False
    )
    assert r.returncode == 1
    assert r.stderr == "finalfusion: error: examples/sample.fif: no such file or directory (did you mean examples/sample.fifu?)\n"


def test_an_existing_file_as_first_argument_still_means_lookup(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "v.fifu").write_bytes(SAMPLE.read_bytes())
    assert main([str(tmp_path / "v.fifu"), "berlin"]) == main(["lookup", str(tmp_path / "v.fifu"), "berlin"]) == 0
    first, second = capsys.readouterr().out.split("Embeddings(", 2)[1:]
    assert first == second


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("nowhere/vectors.fifu", "nowhere/vectors.fifu: no such file or directory (the directory nowhere does not exist)\n"),
        ("qqqq.fifu", "qqqq.fifu: no such file or directory\n"),  # nothing close: no suggestion
    ],
)
def test_a_missing_path_without_a_close_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], name: str, message: str
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "vectors.fifu").write_bytes(b"")
    assert main([name, "berlin"]) == 1
    assert capsys.readouterr().err == "finalfusion: error: " + message


def test_a_mistyped_command_is_a_usage_error_naming_the_close_command(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["simlar", "vectors.fifu", "berlin"])
    assert info.value.code == 2
    assert capsys.readouterr().err.endswith("finalfusion: error: argument COMMAND: invalid choice: 'simlar' (did you mean 'similar'?)\n")
    with pytest.raises(SystemExit) as info:
        main(["berlin", "paris"])  # nothing close: argparse's own message, with the choices
    assert info.value.code == 2
    assert "invalid choice: 'berlin' (choose from 'convert'" in capsys.readouterr().err


def test_a_subcommand_error_shows_the_subcommand_usage() -> None:
    r = run("similar", "--no-such-option", str(SAMPLE), "berlin")
    assert r.returncode == 2
    assert r.stderr.startswith("usage: finalfusion similar ")
    assert "finalfusion similar: error: unrecognized arguments: --no-such-option\n" in r.stderr
    assert "usage: finalfusion [-h]" not in r.stderr  # not the top-level usage


def test_leftover_arguments_are_named_by_the_subcommand(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["info", str(SAMPLE), "extra.toml", "--bogus"])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: finalfusion info ")
    assert err.endswith("finalfusion info: error: unrecognized arguments: extra.toml --bogus\n")


# --- a model tokenizer's failure: one line, status 1 ----------------------------------------


def _tokenizer_model(path: Path, tokenizer_json: str) -> Path:
    """A .fifu whose stored tokenizer is ``tokenizer_json`` (a vocabulary of its tokens, random vectors)."""
    tokens = hf_tokens(tokenizer_json.encode())
    matrix = np.random.default_rng(0).standard_normal((len(tokens), 8)).astype(np.float32)
    Embeddings(NdArray(matrix), TokenizerVocab(tokens, HuggingFaceTokenizer(tokenizer_json))).write(path)
    return path


@pytest.mark.parametrize("command", ["lookup", "similar"])
def test_a_tokenizer_error_at_lookup_is_one_line(tmp_path: Path, command: str) -> None:
    pytest.importorskip("tokenizers")
    spec = json.loads(train_wordpiece())
    spec["model"]["unk_token"] = "[NOPE]"  # not in the vocabulary: the tokenizers library raises a bare Exception for an unknown character
    model = _tokenizer_model(tmp_path / "wordpiece.fifu", json.dumps(spec))
    # lookup takes the words as arguments; similar reads them from its standard input (finalfusion-utils' way).
    r = run(command, str(model), "€uro") if command == "lookup" else run(command, str(model), stdin="€uro\n")
    assert "Traceback" not in r.stderr
    assert r.returncode == 1, r.stderr
    lines = r.stderr.splitlines()
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("finalfusion: error: ")
    assert "[UNK]" in lines[0] or "[NOPE]" in lines[0] or "tokeniz" in lines[0]


def test_a_rust_panic_of_a_real_tokenizer_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    tokenizers = pytest.importorskip("tokenizers")
    spec = json.loads(train_wordpiece())
    spec["truncation"] = {"direction": "Right", "max_length": 1, "strategy": "LongestFirst", "stride": 5}  # stride > max_length: panics
    tok = tokenizers.Tokenizer.from_str(json.dumps(spec))

    def lookup(args: argparse.Namespace) -> int:
        tok.encode("hello world berlin", add_special_tokens=False)
        return 0

    assert execute(lookup, argparse.Namespace()) == 1
    err = capsys.readouterr().err
    assert err.startswith("finalfusion: error: a Rust extension panicked")
    assert "stride" in err
    assert err.count("\n") == 1


def test_an_unexpected_exception_is_one_line_naming_its_type(capsys: pytest.CaptureFixture[str]) -> None:
    def fails(args: argparse.Namespace) -> int:
        raise LookupError("no codec\nfor this")

    assert execute(fails, argparse.Namespace(), prog="prog") == 1
    assert capsys.readouterr().err == "prog: error: LookupError: no codec for this\n"


def test_exit_and_interrupt_pass_through_the_catch_all() -> None:
    def exits(args: argparse.Namespace) -> int:
        raise SystemExit(3)

    with pytest.raises(SystemExit):
        execute(exits, argparse.Namespace())


def test_an_existing_directory_as_first_argument_is_a_lookup_too(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # A model directory (safetensors + tokenizer) is read by lookup like a file; one that holds no model says so.
    directory = tmp_path / "model.dir"
    directory.mkdir()
    assert main([str(directory), "berlin"]) == main(["lookup", str(directory), "berlin"]) == 1
    first, second = capsys.readouterr().err.splitlines()
    assert first == second
    assert "no such file" not in first
