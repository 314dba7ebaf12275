"""Options and input errors of the subcommands and of 0.7's scripts, run in-process (``main`` and the script functions).

What a user gets for a malformed option value (a usage error, status 2), an unreadable word list, analogy
file or metadata file (one line, status 1), a word without an embedding (said, not fatal), and the options
that change where output goes (``.bin`` by vocabulary, ``finalfusion_mmap``). The end-to-end runs through a
real process are in test_cli.py and test_cli_legacy.py.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import pytest

import finalfusion
from finalfusion import Embeddings, FastTextVocab, NdArray, SimpleVocab
from finalfusion.cli import _completions, _select, build_parser, legacy, main
from finalfusion.subword import FastTextIndexer

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_cli import SAMPLE


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("cli-options")
    rng = np.random.default_rng(0)
    plain = Embeddings(NdArray(rng.normal(size=(4, 3)).astype(np.float32)), SimpleVocab(["berlin", "paris", "germany", "france"]))
    finalfusion.write_word2vec(d / "plain.w2v", plain)
    plain.write(d / "plain.fifu")
    ft = Embeddings(NdArray(rng.normal(size=(2 + 16, 4)).astype(np.float32)), FastTextVocab(["hallo", "welt"], FastTextIndexer(16, 3, 5)))
    finalfusion.write_fasttext(d / "model.bin", ft)
    return {"w2v": d / "plain.w2v", "fifu": d / "plain.fifu", "fasttext": d / "model.bin"}


def usage_error(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as status:
        main(argv)
    assert status.value.code == 2
    return capsys.readouterr().err


def one_line_error(status: int, capsys: pytest.CaptureFixture[str]) -> str:
    assert status == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    return err


# --- option values ----------------------------------------------------------------------------


def test_counts_must_be_whole_numbers(capsys: pytest.CaptureFixture[str]) -> None:
    assert "-k: expected a whole number, got 'three'" in usage_error(["similar", "-k", "three", str(SAMPLE), "berlin"], capsys)


@pytest.mark.parametrize("text", ["some", "0", "-2", "1.5"])
def test_quantize_sample_is_a_row_count_or_a_fraction(text: str, capsys: pytest.CaptureFixture[str]) -> None:
    err = usage_error(["quantize", "--sample", text, str(SAMPLE), "out.fifu"], capsys)
    assert f"expected a row count or a fraction in (0, 1], got {text!r}" in err


def test_quantize_sample_values() -> None:
    parse = build_parser().parse_args
    assert parse(["quantize", "--sample", "1000", "a", "b"]).sample == 1000  # a row count
    assert parse(["quantize", "--sample", "1e3", "a", "b"]).sample == 1000
    assert parse(["quantize", "--sample", "0.25", "a", "b"]).sample == 0.25  # a fraction
    sample = parse(["quantize", "--sample", "1", "a", "b"]).sample
    assert sample == 1.0
    assert isinstance(sample, float)  # 1 is every row, not one row


# --- inputs the commands read besides the embeddings ------------------------------------------


def test_a_missing_word_list_is_one_line_naming_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    words = tmp_path / "words.txt"
    err = one_line_error(main(["select", str(SAMPLE), str(tmp_path / "out.fifu"), str(words)]), capsys)
    assert err == f"finalfusion: error: {words}: No such file or directory\n"
    words.write_bytes(b"berlin\n\xff\xfe\n")
    err = one_line_error(main(["select", str(SAMPLE), str(tmp_path / "out.fifu"), str(words)]), capsys)
    assert err.startswith(f"finalfusion: error: {words}: line 2 is not valid UTF-8: 'utf-8' codec can't decode byte 0xff")
    assert not (tmp_path / "out.fifu").exists()


@pytest.mark.parametrize("command", ["select", "similar", "analogy", "compute-accuracy"])
def test_a_missing_input_file_is_named_once(command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "missing.txt"
    argv = [command, str(SAMPLE), str(tmp_path / "out.fifu"), str(missing)] if command == "select" else [command, str(SAMPLE), str(missing)]
    err = one_line_error(main(argv), capsys)
    assert err == f"finalfusion: error: {missing}: No such file or directory\n"  # not "...: No such file or directory: PATH" (issue 26)


def test_a_missing_metadata_file_is_one_line_naming_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    toml = tmp_path / "missing.toml"
    err = one_line_error(main(["convert", "--metadata", str(toml), str(SAMPLE), str(tmp_path / "out.fifu")]), capsys)
    assert err == f"finalfusion: error: {toml}: No such file or directory\n"  # named once (issue 26)


def test_metadata_needs_a_finalfusion_file_and_one_action(files: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    err = one_line_error(main(["metadata", str(files["w2v"])]), capsys)
    assert err == f"finalfusion: error: {files['w2v']}: not a finalfusion file (only finalfusion files hold metadata); convert it first\n"
    toml = tmp_path / "m.toml"
    toml.write_text("a = 1\n")
    err = one_line_error(main(["metadata", "--set", str(toml), "--remove", str(files["fifu"])]), capsys)
    assert err == "finalfusion: error: --set and --remove exclude each other\n"
    missing = tmp_path / "missing.fifu"
    err = one_line_error(main(["metadata", str(missing)]), capsys)
    assert err == f"finalfusion: error: {missing}: No such file or directory\n"
    truncated = tmp_path / "truncated.fifu"
    truncated.write_bytes(files["fifu"].read_bytes()[:40])
    err = one_line_error(main(["metadata", str(truncated)]), capsys)
    assert err.startswith(f"finalfusion: error: {truncated}: ")


# --- where the output goes ----------------------------------------------------------------------


def test_bin_output_is_what_to_names(files: dict[str, Path], tmp_path: Path) -> None:
    # .bin alone is ambiguous (issue 26): tests/test_cli_convert_utils.py checks the refusal.
    assert main(["convert", "-t", "fasttext", str(files["fasttext"]), str(tmp_path / "ft.bin")]) == 0
    assert finalfusion.compat.sniff_format((tmp_path / "ft.bin").read_bytes()) == "fasttext"
    assert main(["convert", "-t", "word2vec", str(files["fifu"]), str(tmp_path / "w.bin")]) == 0
    assert finalfusion.compat.sniff_format((tmp_path / "w.bin").read_bytes()) == "word2vec"


def test_from_finalfusion_mmap_reads_the_file_mapped(files: dict[str, Path], tmp_path: Path) -> None:
    assert main(["convert", "--from", "finalfusion_mmap", str(files["fifu"]), str(tmp_path / "a.vec")]) == 0
    assert main(["convert", str(files["fifu"]), str(tmp_path / "b.vec")]) == 0
    assert (tmp_path / "a.vec").read_bytes() == (tmp_path / "b.vec").read_bytes()


# --- words without an embedding -----------------------------------------------------------------


def test_lookup_says_which_words_have_no_embedding(files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["lookup", str(files["w2v"]), "berlin", "zzz"]) == 0
    out = capsys.readouterr().out
    assert "'berlin' (known, norm " in out
    assert "'zzz': no embedding" in out


def test_analogy_names_the_query_words_without_embedding(files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["analogy", "--json", str(files["w2v"]), "-w", "berlin", "zzz", "paris"]) == 0
    captured = capsys.readouterr()
    assert captured.err == "Could not compute embedding(s) for: zzz\n"  # finalfusion-utils src/analogy.rs line 157
    assert json.loads(captured.out) == {"query": ["berlin", "zzz", "paris"], "results": None}


def test_select_verbose_names_every_word_left_out(files: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    words, out = tmp_path / "w.txt", tmp_path / "small.fifu"
    words.write_text("paris\nzzz\nberlin\nyyy\n")
    assert main(["select", "--ignore-unknown", "-v", str(files["w2v"]), str(out), str(words)]) == 0
    assert capsys.readouterr().err == "finalfusion select: left out 'zzz' (no embedding)\nfinalfusion select: left out 'yyy' (no embedding)\n"
    assert finalfusion.load_finalfusion(out).vocab.words == ["paris", "berlin"]


def test_select_of_only_unknown_words_writes_empty_embeddings(files: dict[str, Path]) -> None:
    emb = finalfusion.load_word2vec(files["w2v"])
    small, missing = _select.select_words(emb, ["zzz", "yyy"], ignore_unknown=True)
    assert missing == ["zzz", "yyy"]
    assert small.storage.shape == (0, 3)
    assert small.vocab.words == []


def test_select_reports_progress_per_block(files: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_select, "_BLOCK", 2)
    calls: list[tuple[str, int, int]] = []
    emb = finalfusion.load_word2vec(files["w2v"])
    _select.select_words(emb, ["berlin", "paris", "france"], progress=lambda *call: calls.append(call))
    assert calls == [("select", 2, 3), ("select", 3, 3)]


def test_info_of_a_word_format(files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["info", str(files["w2v"])]) == 0
    out = capsys.readouterr().out
    assert "format:     word2vec\n" in out  # no layout: only finalfusion files have chunks
    assert "chunks:" not in out
    assert "vocabulary: SimpleVocab, 4 words\n" in out


# --- 0.7's scripts ------------------------------------------------------------------------------


def test_ffp_analogy_input_errors(files: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    err = one_line_error(legacy.analogy(["-i", "a", "b", "c", "a", "-f", "word2vec", str(files["w2v"])]), capsys)
    assert err == "ffp-analogy: error: -i/--include can take up to 3 unique values: a, b and c.\n"
    queries = tmp_path / "q.txt"
    queries.write_text("berlin paris\n")
    err = one_line_error(legacy.analogy(["-f", "word2vec", str(files["w2v"]), str(queries)]), capsys)
    assert err == "ffp-analogy: error: query 1 is not three words: 'berlin paris'\n"


def test_ffp_analogy_says_what_it_could_not_compute(files: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    queries = tmp_path / "q.txt"
    queries.write_text("berlin zzz paris\n")
    assert legacy.analogy(["-f", "word2vec", str(files["w2v"]), str(queries)]) == 0
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == "Could not compute for: berlin : zzz, paris : ? \n"


def test_ffp_select_ignore_unk_is_silent_without_verbose(files: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    words = tmp_path / "w.txt"
    words.write_text("paris\nzzz\n")
    out = tmp_path / "sel.fifu"
    assert legacy.select(["-i", "-f", "word2vec", str(files["w2v"]), str(out), str(words)]) == 0
    assert capsys.readouterr().err == ""
    assert finalfusion.load_finalfusion(out).vocab.words == ["paris"]


# --- completions ----------------------------------------------------------------------------------


def test_fish_completes_single_dash_long_options() -> None:
    parser = argparse.ArgumentParser(prog="tool")
    sub = parser.add_subparsers()
    cmd = sub.add_parser("run", help="run it")
    cmd.add_argument("-old", help="an X11-style option")
    script = _completions.script("fish", parser, prog="tool")
    assert "complete -c tool -n '__fish_seen_subcommand_from run' -o old -r -F -d 'an X11-style option'" in script
