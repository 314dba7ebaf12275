"""The command line's papercuts of issue 34, each run as a separate process on files written by the real tools.

Warnings are one plain line; errors are never cut and name the command's options (``--tokenizer``,
``--index``), not the library's keywords or class names; finalfusion-utils' spellings
(``bucket-to-explicit --format``, ``completions powershell|elvish``) are accepted; ``select`` refuses
to write an empty file; 0.7's scripts give advice their own ``-f`` can follow. Ctrl-C at the start is
in test_cli_entry_interrupt.py.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import finalfusion

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "examples" / "sample.fifu"
TESTDATA = REPO / "tests" / "data" / "testdata"
#: finalfusion-rust < 0.11 wrote this file: its header does not list the NdNorms chunk (a LegacyFormatWarning).
LEGACY = TESTDATA / "python-embeddings.fifu"

#: What pip writes for a console script (as test_cli_entry_interrupt.py): here for 0.7's ``ffp-convert``.
FFP_CONVERT = """\
import re
import sys
from finalfusion.cli.legacy import convert as main
if __name__ == "__main__":
    sys.argv[0] = re.sub(r"(-script\\.pyw|\\.exe)?$", "", sys.argv[0])
    sys.exit(main())
"""


def env(*first: Path) -> dict[str, str]:
    e = dict(os.environ)
    e["PYTHONPATH"] = os.pathsep.join([*map(str, first), str(REPO / "src"), e.get("PYTHONPATH", "")])
    e.pop("COLUMNS", None)
    return e


def run(
    *args: Any, stdin: str = "", cwd: Path | None = None, path_first: tuple[Path, ...] = (), entry: list[str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``python -m finalfusion ARGS`` (or ``entry ARGS``) on this tree's sources, in a separate process."""
    cmd = entry if entry is not None else [sys.executable, "-m", "finalfusion"]
    return subprocess.run([*cmd, *map(str, args)], input=stdin, capture_output=True, text=True, env=env(*path_first), cwd=cwd, timeout=300, check=False)


def error_line(r: subprocess.CompletedProcess[str], status: int = 1) -> str:
    """The one stderr line of a failure with ``status`` (no traceback)."""
    assert r.returncode == status, (r.returncode, r.stdout, r.stderr)
    assert "Traceback" not in r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 if status == 1 else lines, r.stderr
    return lines[-1]


# --- warnings ----------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("args", [("info", LEGACY), ("lookup", LEGACY, "Test"), ("convert", LEGACY, "OUT.fifu"), ("metadata", LEGACY)])
def test_a_legacy_format_warning_is_one_plain_line_naming_the_file(args: tuple[Any, ...], tmp_path: Path) -> None:
    r = run(*(tmp_path / a if a == "OUT.fifu" else a for a in args))
    assert r.returncode == 0, r.stderr
    warnings = [line for line in r.stderr.splitlines() if "warning" in line]
    assert warnings == [
        f"finalfusion: warning: {LEGACY}: the file has an NdNorms chunk that its header does not list (written by finalfusion-rust < 0.11); "
        "read normally, written back with a complete header"
    ], r.stderr
    for python_format in ("LegacyFormatWarning", ".py:", "site-packages", "warnings.warn"):
        assert python_format not in r.stderr


def test_a_warning_in_a_0_7_script_is_one_plain_line(tmp_path: Path) -> None:
    script = tmp_path / "ffp-convert"
    script.write_text(FFP_CONVERT)
    r = run("-f", "finalfusion", LEGACY, tmp_path / "out.fifu", entry=[sys.executable, str(script)])
    assert r.returncode == 0, r.stderr
    assert r.stderr.startswith(f"ffp-convert: warning: {LEGACY}: the file has an NdNorms chunk")
    assert len(r.stderr.splitlines()) == 1


def test_python_warning_options_still_apply() -> None:
    # The plain line replaces Python's format only: -W error still makes the warning an error (one line, status 1).
    r = subprocess.run(
        [sys.executable, "-W", "error", "-m", "finalfusion", "info", str(LEGACY)],
        capture_output=True,
        text=True,
        env=env(),
        timeout=300,
        check=False,
    )
    assert error_line(r).startswith("finalfusion: error: the file has an NdNorms chunk that its header does not list")


# --- messages are never cut ----------------------------------------------------------------------------------------------


def test_a_truncation_error_is_printed_whole_by_every_command(tmp_path: Path) -> None:
    cut = tmp_path / "cut.fifu"
    data = SAMPLE.read_bytes()
    cut.write_bytes(data[:3000])
    declared = finalfusion.load_finalfusion(SAMPLE).storage.matrix.nbytes  # the NdArray chunk's payload, at least
    messages = {
        name: error_line(run(*args)).split("error: ", 1)[1]
        for name, args in {
            "info": ("info", cut),
            "lookup": ("lookup", cut, "berlin"),
            "similar": ("similar", cut, "-", "-k", "1"),
            "convert": ("convert", cut, tmp_path / "out.vec"),
        }.items()
    }
    assert len(set(messages.values())) == 1, messages
    message = messages["info"]
    found = re.search(r"found a declared length of (\d+) bytes \(at byte offset \d+\)$", message)
    assert found is not None, message
    assert int(found.group(1)) > declared
    assert "..." not in message


# --- the command's options, not the library's keywords -----------------------------------------------------------------


def test_a_safetensors_file_without_a_tokenizer_names_the_option(tmp_path: Path) -> None:
    safetensors_numpy = pytest.importorskip("safetensors.numpy")
    model = tmp_path / "model.safetensors"
    safetensors_numpy.save_file({"embed_tokens.weight": np.ones((10, 4), dtype=np.float32)}, str(model))
    for args in (("info", "model.safetensors"), ("info", "."), ("lookup", "model.safetensors", "a")):
        line = error_line(run(*args, cwd=tmp_path))
        assert line == f"finalfusion: error: {args[1]}: no tokenizer.json or tokenizer.model or tekken.json for .: name the tokenizer with --tokenizer PATH"
    piped = subprocess.run(
        f"cat model.safetensors | {sys.executable} -m finalfusion lookup /dev/stdin a",
        shell=True,
        capture_output=True,
        text=True,
        env=env(),
        cwd=tmp_path,
        timeout=300,
        check=False,
    )
    assert error_line(piped).endswith("a safetensors model read from a pipe or device has no tokenizer beside it: name one with --tokenizer PATH")
    (tmp_path / "empty").mkdir()
    line = error_line(run("info", "--tokenizer", "empty", "model.safetensors", cwd=tmp_path), status=2)
    assert line.endswith("--tokenizer empty: not a tokenizer this library reads: no tokenizer.json or tokenizer.model or tekken.json for empty")
    assert "tokenizer=" not in line


def test_a_missing_extra_is_named_without_a_class_name(tmp_path: Path) -> None:
    pytest.importorskip("tokenizers")
    model = _hf_model(tmp_path)
    blocked = tmp_path / "blocked"
    (blocked / "tokenizers").mkdir(parents=True)
    (blocked / "tokenizers" / "__init__.py").write_text("raise ImportError('not installed, for the test')\n")
    r = run("similar", model, "-k", "1", stdin="householders\n", path_first=(blocked,))
    assert error_line(r) == "finalfusion: error: tokenizing an unknown word needs the tokenizers package: pip install 'finalfusion-py[models]'"


# --- index commands ------------------------------------------------------------------------------------------------------


def test_index_errors_name_the_option_and_the_path_as_given(tmp_path: Path) -> None:
    pytest.importorskip("faiss")
    r = run("index", "build", "--quiet", TESTDATA / "rust-similarity.fifu", "other.ann", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    stale = error_line(run("similar", "--index", "other.ann", SAMPLE, "-w", "berlin", cwd=tmp_path))
    # The index's embeddings first, then these: rust-similarity.fifu has 41 words x 100 dims, sample.fifu 84 x 16.
    assert stale == "finalfusion: error: --index other.ann: the index was built for other embeddings: 41 words x 100 dims (these have 84 words x 16 dims)"
    missing = run("similar", "--index", "missing.ann", SAMPLE, "-w", "berlin", cwd=tmp_path)
    assert missing.returncode == 2
    assert missing.stderr.splitlines()[-1] == (
        "finalfusion similar: error: argument --index: missing.ann: no such directory (an index saved by finalfusion index build)"
    )
    assert str(tmp_path) not in missing.stderr
    (tmp_path / "empty.ann").mkdir()
    empty = error_line(run("analogy", "--index", "empty.ann", SAMPLE, "-w", "berlin", "paris", "london", cwd=tmp_path))
    assert empty == "finalfusion: error: --index empty.ann: not an index saved by finalfusion index build (no ann.json)"


def test_faiss_ivfpq_prints_no_clustering_warnings(tmp_path: Path) -> None:
    pytest.importorskip("faiss")
    # 2,000 rows of 32 dims: 8 subquantizers of 256 centroids each, fewer than the 9,984 rows faiss asks for.
    rows = np.random.default_rng(3).standard_normal((2000, 32)).astype(np.float32)
    emb = finalfusion.Embeddings(finalfusion.NdArray(rows), finalfusion.SimpleVocab([f"w{i}" for i in range(len(rows))]))
    emb.write(str(tmp_path / "e.fifu"))
    r = run("index", "build", "--quiet", "--backend", "faiss-ivfpq", tmp_path / "e.fifu", tmp_path / "e.ann")
    assert r.returncode == 0, r.stderr
    assert r.stderr == ""
    found = run("similar", "--index", tmp_path / "e.ann", "-k", "1", tmp_path / "e.fifu", "-w", "w7")
    assert found.returncode == 0, found.stderr
    assert re.fullmatch(r"w[0-9]+\t[0-9.]+\n", found.stdout), found.stdout


# --- finalfusion-utils' spellings ---------------------------------------------------------------------------------------


def test_bucket_to_explicit_takes_utils_format_option(tmp_path: Path) -> None:
    # finalfusion-utils src/bucket_to_explicit.rs: -f/--format {finalfusion,fasttext}.
    fasttext = TESTDATA / "rust-fasttext.bin"
    for option in ("--format", "-f"):
        r = run("bucket-to-explicit", option, "fasttext", fasttext, tmp_path / f"{option}.fifu")
        assert r.returncode == 0, r.stderr
    assert (tmp_path / "--format.fifu").read_bytes() == (tmp_path / "-f.fifu").read_bytes()
    explicit = finalfusion.load_finalfusion(tmp_path / "--format.fifu")
    expected = finalfusion.load_fasttext(fasttext).bucket_to_explicit()
    assert explicit.vocab.words == expected.vocab.words
    np.testing.assert_array_equal(np.asarray(explicit.storage.matrix), np.asarray(expected.storage.matrix))


def _paths(script: str, key: str) -> dict[str, list[str]]:
    """The completions of each command path in a PowerShell or Elvish script: ``{"finalfusion;index": [...]}``."""
    out: dict[str, list[str]] = {}
    current = None
    for line in script.splitlines():
        head = re.match(r"^        &?'([^']*)'(?:= \{| \{)$", line)
        if head:
            current = out.setdefault(head.group(1), [])
        elif current is not None and line.strip().startswith(key):
            current.append(re.findall(r"'((?:[^']|'')*)'", line)[0])
    return out


def test_completions_for_powershell_and_elvish(tmp_path: Path) -> None:
    from finalfusion.cli import build_parser
    from finalfusion.cli._completions import commands

    expected = {c.name: sorted(f for o in c.options for f in o.flags) for c in commands(build_parser())}
    for shell, key in (("powershell", "[CompletionResult]"), ("elvish", "cand ")):
        r = run("completions", shell)
        assert r.returncode == 0, r.stderr
        paths = _paths(r.stdout, key)
        assert set(expected) | {"index"} <= {p.split(";", 1)[1] for p in paths if ";" in p}
        assert set(expected) <= set(paths["finalfusion"])
        for name, flags in expected.items():
            assert sorted(f for f in paths[f"finalfusion;{name}"] if f.startswith("-")) == flags, (shell, name)
        assert "--backend" in paths["finalfusion;index;build"]
    assert "Register-ArgumentCompleter -Native -CommandName 'finalfusion'" in run("completions", "powershell").stdout


def test_the_elvish_script_completes_in_elvish(tmp_path: Path) -> None:
    elvish = shutil.which("elvish")
    if elvish is None:
        pytest.skip("elvish is not installed (Debian: apt-get install elvish)")
    script = run("completions", "elvish").stdout
    # Outside an interactive session there is no edit: module: the completer is kept in a variable, its candidates put as text.
    script = script.replace("set edit:completion:arg-completer[finalfusion] =", "var completer =")
    script = script.replace("edit:complex-candidate $text &display=$text'  '$desc", "put $text")
    script = script.replace("edit:complete-filename $words[-1]", "put FILES")
    assert "edit:" not in script
    probes = [["finalfusion", "conv"], ["finalfusion", "index", "build", ""], ["finalfusion", "similar", "vectors.fifu", ""]]
    script += "".join(f"echo ($completer {' '.join(repr(w) for w in words)} | str:join ' ')\n" for words in probes)
    (tmp_path / "probe.elv").write_text(script)
    r = subprocess.run([elvish, "-norc", str(tmp_path / "probe.elv")], capture_output=True, text=True, timeout=60, check=False)
    assert r.returncode == 0, r.stderr
    top, build, files = r.stdout.splitlines()
    assert {"convert", "completions"} <= set(top.split())
    assert {"--backend", "--param", "--tokenizer"} <= set(build.split())
    assert files == "FILES"


def test_info_limit_is_refused_for_finalfusion_and_honoured_for_text(tmp_path: Path) -> None:
    line = error_line(run("info", "--limit", "5", TESTDATA / "rust-similarity.fifu"))
    assert line.endswith("rust-similarity.fifu: --limit does not apply to finalfusion input")
    r = run("info", "--limit", "5", TESTDATA / "rust-similarity.txt")
    assert r.returncode == 0, r.stderr
    assert "vocabulary: SimpleVocab, 5 words" in r.stdout


# --- select, metadata, info, ffp-convert ---------------------------------------------------------------------------------


def test_select_writes_no_empty_file(tmp_path: Path) -> None:
    out = tmp_path / "small.fifu"
    assert error_line(run("select", SAMPLE, out, stdin="")) == (
        "finalfusion: error: no words to select: standard input has none (one word per line); nothing written"
    )
    (tmp_path / "blank.txt").write_text("\n  \n")
    assert error_line(run("select", SAMPLE, out, tmp_path / "blank.txt")).endswith("blank.txt has none (one word per line); nothing written")
    line = error_line(run("select", "-i", "--no-subwords", SAMPLE, out, stdin="zzqx\nqqzx\n"))
    assert line == f"finalfusion: error: no word of the list has an embedding in {SAMPLE} (2 left out); nothing written"
    assert not out.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["blank.txt"]


def _unwritable_directory(tmp_path: Path) -> Path:
    """A directory where creating a file fails: a read-only one, or (as root, who writes anywhere else) /sys."""
    directory = tmp_path / "read-only"
    directory.mkdir()
    directory.chmod(0o555)
    for candidate in (directory, Path("/sys")):
        try:
            (candidate / "probe").touch()
        except OSError:
            return candidate
        (candidate / "probe").unlink()
    pytest.skip("no directory here refuses new files")


def test_metadata_into_an_unwritable_directory_names_the_target_only(tmp_path: Path) -> None:
    target = _unwritable_directory(tmp_path) / "metadata.toml"
    line = error_line(run("metadata", SAMPLE, target))
    assert line.startswith(f"finalfusion: error: {target}: cannot write: ")
    assert ".tmp" not in line
    assert line.count(str(target.parent)) == 1


def test_a_bad_toml_file_is_named_once(tmp_path: Path) -> None:
    target = tmp_path / "m.fifu"
    target.write_bytes(SAMPLE.read_bytes())
    (tmp_path / "bad.toml").write_text("name = \n")
    for args in (("metadata", "--set", "bad.toml", "m.fifu"), ("convert", "-m", "bad.toml", "m.fifu", "out.fifu")):
        line = error_line(run(*args, cwd=tmp_path))
        assert line.startswith("finalfusion: error: bad.toml: metadata is not valid TOML (")
        assert line.count("bad.toml") == 1


def _hf_model(root: Path) -> Path:
    """A Hugging Face model directory: a WordPiece tokenizer trained by tokenizers, a table written by safetensors."""
    safetensors_numpy = pytest.importorskip("safetensors.numpy")
    from test_cli_models import _wordpiece

    model = root / "hf"
    model.mkdir()
    tok = _wordpiece(120)
    tok.save(str(model / "tokenizer.json"))
    table = np.random.default_rng(5).standard_normal((tok.get_vocab_size(), 8)).astype(np.float32)
    safetensors_numpy.save_file({"embeddings.word_embeddings.weight": table}, str(model / "model.safetensors"))
    return model


def test_info_names_the_tokenizer_of_a_gguf_this_tool_wrote(tmp_path: Path) -> None:
    pytest.importorskip("tokenizers")
    model = _hf_model(tmp_path)
    assert run("convert", model, tmp_path / "m.gguf").returncode == 0
    assert run("convert", SAMPLE, tmp_path / "words.gguf").returncode == 0
    info = run("info", tmp_path / "m.gguf")
    assert info.returncode == 0, info.stderr
    assert "model:      tensor token_embd.weight (F32), tokenizer from tokenizer.huggingface.json" in info.stdout.splitlines()
    assert finalfusion.load(tmp_path / "m.gguf").vocab.tokenizer == finalfusion.load(model).vocab.tokenizer  # it is read back
    words = run("info", tmp_path / "words.gguf")
    assert "model:      tensor token_embd.weight (F32), no tokenizer (a token list)" in words.stdout.splitlines()


def test_ffp_convert_advice_is_one_its_options_can_follow(tmp_path: Path) -> None:
    script = tmp_path / "ffp-convert"
    script.write_text(FFP_CONVERT)
    ffp = [sys.executable, str(script)]
    fifu = error_line(run(SAMPLE, tmp_path / "o.fifu", entry=ffp))  # -f left out: 0.7's default, word2vec
    assert fifu.endswith("the content looks like finalfusion: use -f finalfusion")
    dims = error_line(run(TESTDATA / "rust-similarity.txt", tmp_path / "o.fifu", entry=ffp))
    assert dims.endswith("the content looks like text-dims: use -f textdims")
    (tmp_path / "w.gguf").write_bytes(b"")
    assert run("convert", SAMPLE, tmp_path / "w.gguf").returncode == 0
    gguf = error_line(run(tmp_path / "w.gguf", tmp_path / "o.fifu", entry=ffp))
    assert gguf.endswith(
        f"the content looks like gguf: ffp-convert reads only word2vec, finalfusion, fasttext, text, textdims; "
        f"'finalfusion convert {tmp_path / 'w.gguf'} OUT' reads gguf"
    )
    for line in (fifu, dims, gguf):
        assert "leave -f out" not in line
    # The finalfusion command, whose -f is recognised when left out, still says so.
    assert error_line(run("convert", "-f", "text", SAMPLE, tmp_path / "o.vec")).endswith("use -f finalfusion, or leave -f out")
