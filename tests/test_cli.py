"""The ``finalfusion`` command line, run as a separate process (``python -m finalfusion`` on this tree's sources)."""

from __future__ import annotations

import importlib.metadata
import itertools
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import finalfusion
from finalfusion import Embeddings, FastTextVocab, NdArray
from finalfusion.subword import FastTextIndexer

REPO = Path(__file__).resolve().parents[1]
SRC = REPO / "src"
SAMPLE = REPO / "examples" / "sample.fifu"


def env() -> dict[str, str]:
    e = dict(os.environ)
    e["PYTHONPATH"] = str(SRC) + os.pathsep + e.get("PYTHONPATH", "")
    e.pop("COLUMNS", None)
    return e


def installed_from_here() -> bool:
    """Whether finalfusion-py is installed (with its console scripts) from this tree."""
    try:
        dist = importlib.metadata.distribution("finalfusion-py")
    except importlib.metadata.PackageNotFoundError:
        return False
    url = json.loads(dist.read_text("direct_url.json") or "{}").get("url", "")
    return bool(url.rstrip("/") == REPO.as_uri())


def command(name: str = "finalfusion") -> list[str]:
    """The installed console script when it comes from this tree, else ``python -m finalfusion`` on this tree's sources."""
    script = Path(sys.executable).parent / name
    if installed_from_here() and script.exists():
        return [str(script)]
    if name != "finalfusion":
        raise LookupError(name)
    return [sys.executable, "-m", "finalfusion"]


def ff(*args: Any, stdin: str | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """Run ``finalfusion ARGS`` (installed script, or ``python -m finalfusion``: the same code)."""
    return subprocess.run([*command(), *map(str, args)], input=stdin, capture_output=True, text=True, env=env(), cwd=cwd, timeout=300, check=False)


def ok(*args: Any, stdin: str | None = None) -> str:
    r = ff(*args, stdin=stdin)
    assert r.returncode == 0, r.stderr
    return r.stdout


def fails(status: int, *args: Any, stdin: str | None = None) -> str:
    """Run, expect ``status`` and a one-line error (no traceback) on stderr; return stderr."""
    r = ff(*args, stdin=stdin)
    assert r.returncode == status, (r.returncode, r.stdout, r.stderr)
    assert "Traceback" not in r.stderr
    if status == 1:
        assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    return r.stderr


# ----------------------------------------------------------------------------------------------
# fixtures: one small file per format
# ----------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("cli-formats")
    emb = finalfusion.load_finalfusion(SAMPLE)
    out = {"finalfusion": d / "sample.fifu"}
    emb.write(out["finalfusion"])
    out["word2vec"] = d / "sample.bin"
    finalfusion.write_word2vec(out["word2vec"], emb)
    out["text-dims"] = d / "sample.vec"
    finalfusion.write_text_dims(out["text-dims"], emb)
    out["text"] = d / "sample.txt"
    finalfusion.write_text(out["text"], emb)
    rng = np.random.default_rng(0)
    words = emb.vocab.words[:20]
    ft = Embeddings(NdArray(rng.normal(size=(len(words) + 64, 8)).astype(np.float32)), FastTextVocab(words, FastTextIndexer(64, 3, 5)))
    out["fasttext"] = d / "model.bin"
    finalfusion.write_fasttext(out["fasttext"], ft)
    rows = "\n".join(f"{i} " + " ".join(f"{v:.6f}" for v in rng.normal(size=4)) for i in range(8))
    floret = finalfusion.load_floret(f"8 4 3 5 2 2166136261 < >\n{rows}\n".encode())
    out["floret"] = d / "vectors.floret"
    finalfusion.write_floret(out["floret"], floret)
    return out


EXT = {"finalfusion": ".fifu", "word2vec": ".w2v", "text-dims": ".vec", "text": ".txt", "fasttext": ".bin", "floret": ".floret"}


def expected_ok(src: str, dst: str) -> bool:
    """Which conversions the formats allow: fastText needs a fastText or plain vocabulary, floret a floret one."""
    if dst == "floret":
        return src == "floret"
    if dst == "fasttext":
        return src not in ("finalfusion", "floret")  # the sample has a finalfusion bucket vocabulary
    if src == "floret":
        return dst in ("finalfusion", "floret")  # floret has no words to write to word formats
    return True


@pytest.mark.parametrize("dst", list(EXT))
@pytest.mark.parametrize("src", list(EXT))
def test_convert_every_pair(files: dict[str, Path], tmp_path: Path, src: str, dst: str) -> None:
    target = tmp_path / f"out{EXT[dst]}"
    args = ["convert", files[src], target] + (["--to", dst] if dst in ("word2vec", "fasttext") else [])
    if not expected_ok(src, dst):
        err = fails(1, *args)
        assert str(files[src]) in err or str(target) in err
        assert not target.exists()
        return
    ok(*args)
    assert finalfusion.compat.sniff_format(target.read_bytes()[:65536]) == dst
    before, after = finalfusion.load(files[src], normalize=False), finalfusion.load(target, normalize=False)
    if src == "floret":
        np.testing.assert_allclose(np.asarray(after.storage.matrix), np.asarray(before.storage.matrix), rtol=1e-5, atol=1e-6)
        return
    assert after.vocab.words == before.vocab.words
    for w in before.vocab.words[:5]:
        b = before.embedding_with_norm(w)
        a = after.embedding_with_norm(w)
        np.testing.assert_allclose(a[0] * a[1], b[0] * b[1], rtol=1e-4, atol=1e-5)


def test_convert_options(files: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "first.fifu"
    ok("convert", "--limit", 5, "--from", "text-dims", files["text-dims"], out)
    assert len(finalfusion.load_finalfusion(out).vocab) == 5
    toml = tmp_path / "meta.toml"
    toml.write_text('corpus = "test"\n[training]\nepochs = 3\n')
    ok("convert", "--metadata", toml, files["word2vec"], out)
    assert dict(finalfusion.load_finalfusion(out).metadata) == {"corpus": "test", "training": {"epochs": 3}}
    # --no-unnormalize writes the unit rows; the default writes the original vectors.
    unit = tmp_path / "unit.vec"
    ok("convert", "--no-unnormalize", files["finalfusion"], unit)
    norms = np.linalg.norm(np.asarray(finalfusion.load_text_dims(unit, normalize=False).storage.matrix), axis=1)
    np.testing.assert_allclose(norms, 1, rtol=1e-5)
    # gzip input, recognised by content; --mmap for finalfusion; --lossy accepted.
    import gzip

    gz = tmp_path / "sample.bin.gz"
    gz.write_bytes(gzip.compress(files["word2vec"].read_bytes()))
    ok("convert", "--lossy", gz, tmp_path / "from-gz.fifu")
    ok("convert", "--mmap", files["finalfusion"], tmp_path / "mapped.txt")


def test_convert_errors(files: dict[str, Path], tmp_path: Path) -> None:
    assert "No such file" in fails(1, "convert", tmp_path / "missing.bin", tmp_path / "x.fifu")
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"berlin 1 2\nparis 3\n")
    err = fails(1, "convert", bad, tmp_path / "x.fifu")
    assert err.startswith(f"finalfusion: error: {bad}: ")
    assert "line 2" in err
    r = ff("convert", SAMPLE.parent / ".." / "README.md", tmp_path / "x.fifu")  # the formats and why not, one per line
    assert r.returncode == 1
    assert "cannot tell the format" in r.stderr
    assert "Traceback" not in r.stderr
    assert "extension" in fails(1, "convert", files["word2vec"], tmp_path / "x.unknown")
    assert "compressed output" in fails(1, "convert", files["word2vec"], tmp_path / "x.fifu.gz")
    assert "--limit does not apply" in fails(1, "convert", "--limit", 3, files["finalfusion"], tmp_path / "x.txt")
    assert "--metadata needs finalfusion" in fails(1, "convert", "--metadata", SAMPLE, files["finalfusion"], tmp_path / "x.txt")
    # Usage errors: argparse, status 2.
    assert "required" in fails(2, "convert", files["word2vec"])
    assert "invalid choice" in fails(2, "convert", "--to", "pdf", files["word2vec"], tmp_path / "x")
    assert "invalid choice" in fails(2, "frobnicate")
    assert ">= 1" in fails(2, "convert", "--limit", 0, files["word2vec"], tmp_path / "x.fifu")
    assert not list(tmp_path.glob("x*"))


def test_bare_path_means_lookup() -> None:
    out = ok(SAMPLE, "berlin", "berliner")
    assert "'berlin' (known" in out
    assert "'berliner' (unknown, from subwords" in out
    assert ok("lookup", SAMPLE, "berlin") == ok(SAMPLE, "berlin")


# ----------------------------------------------------------------------------------------------
# quantize / reconstruct / select / bucket-to-explicit
# ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("quantizer", ["pq", "opq", "gaussian_opq"])
def test_quantize_reconstruct_round_trip(tmp_path: Path, quantizer: str) -> None:
    q, r = tmp_path / "q.fifu", tmp_path / "r.fifu"
    res = ff("quantize", "-q", quantizer, "-s", 4, "-b", 4, "-i", 5, "-a", 1, "--seed", 0, "--sample", 0.9, "-t", 1, SAMPLE, q)
    assert res.returncode == 0, res.stderr
    assert "Average cosine similarity" in res.stderr
    small = finalfusion.load_finalfusion(q)
    assert type(small.storage).__name__ == "QuantizedArray"
    assert small.storage.quantized_len == 4
    assert (small.storage.quantizer.projection is not None) == (quantizer != "pq")
    again = tmp_path / "q2.fifu"
    ok("quantize", "-q", quantizer, "-s", 4, "-b", 4, "-i", 5, "--seed", 0, "--sample", 0.9, "--quiet", SAMPLE, again)
    assert again.read_bytes() == q.read_bytes()  # same seed, same bytes
    ok("reconstruct", q, r)
    dense = finalfusion.load_finalfusion(r)
    np.testing.assert_allclose(np.asarray(dense.storage.matrix), np.asarray(small.reconstruct().storage.matrix))
    orig = finalfusion.load_finalfusion(SAMPLE)
    cos = float(np.dot(dense["berlin"], orig["berlin"]) / np.linalg.norm(dense["berlin"]))
    assert cos > 0.5
    info = ok("info", q)
    assert "4 subquantizers x 16 centroids (4 bits)" in info


def test_quantize_bad_parameters(tmp_path: Path) -> None:
    assert "subquantizers" in fails(1, "quantize", "-s", 5, SAMPLE, tmp_path / "q.fifu")
    assert "invalid choice" in fails(2, "quantize", "-q", "lsh", SAMPLE, tmp_path / "q.fifu")
    assert not (tmp_path / "q.fifu").exists()


def test_select(tmp_path: Path) -> None:
    words = tmp_path / "words.txt"
    words.write_text("the\nberlin\nthe\nnotaword\n")
    out = tmp_path / "sel.fifu"
    assert "'notaword'" in fails(1, "select", "--no-subwords", SAMPLE, out, words)
    assert not out.exists()
    ok("select", "--no-subwords", "--ignore-unknown", SAMPLE, out, words)
    sel, orig = finalfusion.load_finalfusion(out), finalfusion.load_finalfusion(SAMPLE)
    assert sel.vocab.words == ["the", "berlin"]
    np.testing.assert_array_equal(sel["berlin"], orig["berlin"])
    assert sel.embedding_with_norm("berlin")[1] == orig.embedding_with_norm("berlin")[1]
    assert sel.metadata["source_embeddings"] == str(SAMPLE)
    ok("select", "--subwords", SAMPLE, out, stdin="berliner\nthe\n")
    sel = finalfusion.load_finalfusion(out)
    assert sel.vocab.words == ["berliner", "the"]
    np.testing.assert_allclose(sel["berliner"], orig.embedding("berliner"), rtol=1e-6)
    ok("select", SAMPLE, tmp_path / "sel.txt", stdin="the\n")
    assert (tmp_path / "sel.txt").read_text().startswith("the ")


def test_bucket_to_explicit(files: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "explicit.fifu"
    ok("bucket-to-explicit", SAMPLE, out)
    ex, orig = finalfusion.load_finalfusion(out), finalfusion.load_finalfusion(SAMPLE)
    assert type(ex.vocab).__name__ == "ExplicitVocab"
    np.testing.assert_allclose(ex["berlin"], orig["berlin"])
    ok("bucket-to-explicit", files["fasttext"], out)
    assert "only bucketed vocabularies" in fails(1, "bucket-to-explicit", files["word2vec"], out)


# ----------------------------------------------------------------------------------------------
# queries
# ----------------------------------------------------------------------------------------------
def test_similar_arguments_and_stdin() -> None:
    emb = finalfusion.load_finalfusion(SAMPLE)
    expected = [(r.word, r.similarity) for r in emb.word_similarity("berlin", k=3)]
    out = ok("similar", "-k", 3, SAMPLE, "-w", "berlin")
    lines = [line.split("\t") for line in out.splitlines()]
    assert [w for w, _ in lines] == [w for w, _ in expected]
    np.testing.assert_allclose([float(s) for _, s in lines], [s for _, s in expected], atol=1e-6)
    assert ok("similar", "-k", 3, SAMPLE, stdin="berlin\n\n") == out
    js = [json.loads(line) for line in ok("similar", "--json", "-k", 2, SAMPLE, stdin="berlin\nthe\n").splitlines()]
    assert [j["query"] for j in js] == ["berlin", "the"]
    assert all(len(j["results"]) == 2 for j in js)
    assert js[0]["results"][0]["word"] == expected[0][0]


def test_similar_from_pipe(files: dict[str, Path]) -> None:
    """``printf ... | finalfusion similar`` in a real shell pipeline, any input format."""
    cmd = f"printf 'berlin\\n' | {sys.executable} -m finalfusion similar -k 1 {files['word2vec']} | cut -f1"
    r = subprocess.run(cmd, shell=True, capture_output=True, text=True, env=env(), timeout=120, check=False)
    assert r.returncode == 0
    assert r.stdout.strip() == finalfusion.load_finalfusion(SAMPLE).word_similarity("berlin", k=1)[0].word


def test_analogy_arguments_stdin_and_include() -> None:
    emb = finalfusion.load_finalfusion(SAMPLE)
    expected = [r.word for r in emb.analogy("berlin", "paris", "the", k=3)]
    out = ok("analogy", "-k", 3, SAMPLE, "-w", "berlin", "paris", "the")
    assert [line.split("\t")[0] for line in out.splitlines()] == expected
    assert ok("analogy", "-k", 3, SAMPLE, stdin="berlin paris the\n") == out
    included = [r.word for r in emb.analogy("berlin", "paris", "the", k=3, mask=(False, True, True))]
    out = ok("analogy", "-k", 3, "--include", "a", "--", SAMPLE, stdin="berlin paris the\n")
    assert [line.split("\t")[0] for line in out.splitlines()] == included
    js = json.loads(ok("analogy", "--json", "-k", 1, SAMPLE, "-w", "berlin", "paris", "the"))
    assert js["query"] == ["berlin", "paris", "the"]
    assert js["results"][0]["word"] == expected[0]
    assert "three words" in fails(1, "analogy", SAMPLE, "-w", "berlin", "paris")
    assert "three words" in fails(1, "analogy", SAMPLE, stdin="berlin paris\n")


def test_unknown_query_word(files: dict[str, Path]) -> None:
    r = ff("similar", files["word2vec"], stdin="zzzunknown\n")
    assert r.returncode == 0
    assert r.stdout == ""
    assert r.stderr == "Could not compute embedding for: zzzunknown\n"  # finalfusion-utils src/similar.rs line 108


def test_compute_accuracy(tmp_path: Path) -> None:
    questions = tmp_path / "q.txt"
    questions.write_text(": family\nthe of and in\nthe of and to\n: unknown-only\nfoo bar baz qux\n")
    ev = finalfusion.load_finalfusion(SAMPLE).evaluate_analogies(str(questions))
    # finalfusion-utils' report (its exact lines are checked in test_cli_utils_query.py)
    out = ok("compute-accuracy", SAMPLE, questions)
    lines = out.splitlines()
    assert lines[0].startswith(f"family: {ev.sections[0].correct}/2 correct, accuracy: ")
    assert lines[1].startswith(f"Total: {ev.correct}/2 correct")
    assert lines[2] == "Skipped: 1/3 (33.33333333333333%)"
    assert ok("compute-accuracy", SAMPLE, stdin=questions.read_text()) == out
    js = json.loads(ok("compute-accuracy", "--json", SAMPLE, questions))
    assert js["sections"][1]["accuracy"] is None
    assert js["total"]["total"] == 2
    # gensim's evaluation and report with its options
    lines = ok("compute-accuracy", "--case-insensitive", SAMPLE, questions).splitlines()
    assert lines[1] == "unknown-only: 0/0 correct, accuracy: n/a, skipped: 1"
    assert lines[3] == "Skipped: 1/3 (33.33%)"
    bad = tmp_path / "bad.txt"
    bad.write_text(": s\nonly three words\n")
    err = fails(1, "compute-accuracy", SAMPLE, bad)
    assert str(bad) in err
    assert "line 2" in err


# ----------------------------------------------------------------------------------------------
# info / metadata / completions / help
# ----------------------------------------------------------------------------------------------
def test_info(files: dict[str, Path]) -> None:
    out = ok("info", SAMPLE)
    for text in ("format:     finalfusion", "BucketSubwordVocab", "NdArray", "NdNorms", "84 words", "340 x 16 float32"):
        assert text in out
    js = json.loads(ok("info", "--json", SAMPLE))
    chunks = js["chunks"]
    assert [c["chunk"] for c in chunks] == ["Metadata", "BucketSubwordVocab", "NdArray", "NdNorms"]
    assert chunks[0]["offset"] == js["header_bytes"]
    assert sum(c["bytes"] for c in chunks) + js["header_bytes"] == SAMPLE.stat().st_size
    assert all(a["offset"] + a["bytes"] == b["offset"] for a, b in itertools.pairwise(chunks))
    js = json.loads(ok("info", "--json", files["fasttext"]))
    assert js["format"] == "fasttext"
    assert js["vocab"]["type"] == "FastTextVocab"
    assert "chunks" not in js
    truncated = files["finalfusion"].parent / "truncated.fifu"
    truncated.write_bytes(SAMPLE.read_bytes()[:1000])
    assert "truncated.fifu" in fails(1, "info", truncated)


def test_metadata_print_and_set(tmp_path: Path) -> None:
    target = tmp_path / "m.fifu"
    target.write_bytes(SAMPLE.read_bytes())
    assert ok("metadata", target) == finalfusion.load_finalfusion(SAMPLE).metadata.to_toml()
    toml = tmp_path / "new.toml"
    toml.write_text('name = "new"\n')
    ok("metadata", "--set", toml, target)
    emb = finalfusion.load_finalfusion(target)
    assert dict(emb.metadata) == {"name": "new"}
    np.testing.assert_array_equal(np.asarray(emb.storage.matrix), np.asarray(finalfusion.load_finalfusion(SAMPLE).storage.matrix))
    toml.write_text("name = \n")
    assert "not valid TOML" in fails(1, "metadata", "--set", toml, target)
    assert dict(finalfusion.load_finalfusion(target).metadata) == {"name": "new"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.fifu", "new.toml"]  # no temporary files left


def test_completions(tmp_path: Path) -> None:
    bash = ok("completions", "bash")
    script = tmp_path / "finalfusion.bash"
    script.write_text(bash)
    r = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True, check=False)
    assert r.returncode == 0, r.stderr
    # Sourced for real: completing "finalfusion conv" and "finalfusion convert --t" (--to and the model options).
    probe = (
        f"source {script}; COMP_WORDS=(finalfusion conv); COMP_CWORD=1; _finalfusion; echo ${{COMPREPLY[@]}};"
        " COMP_WORDS=(finalfusion convert --t); COMP_CWORD=2; _finalfusion; echo ${COMPREPLY[@]};"
        " COMP_WORDS=(finalfusion quantize -q ''); COMP_CWORD=3; _finalfusion; echo ${COMPREPLY[@]}"
    )
    r = subprocess.run(["bash", "-c", probe], capture_output=True, text=True, check=False)
    assert r.stdout.splitlines() == ["convert", "--tensor --tokenizer --to", "pq opq gaussian_opq"], r.stdout + r.stderr
    zsh = ok("completions", "zsh")
    assert zsh.startswith("#compdef finalfusion")
    assert "'convert:convert embeddings between formats'" in zsh
    fish = ok("completions", "fish")
    assert "complete -c finalfusion -n '__fish_seen_subcommand_from quantize' -s q -l quantizer -x -a 'pq opq gaussian_opq'" in fish
    assert "invalid choice" in fails(2, "completions", "tcsh")


COMMANDS = [
    "convert",
    "quantize",
    "reconstruct",
    "select",
    "bucket-to-explicit",
    "similar",
    "analogy",
    "compute-accuracy",
    "encode",
    "info",
    "metadata",
    "lookup",
    "completions",
]


@pytest.mark.parametrize("command", COMMANDS)
def test_help_shows_an_example(command: str) -> None:
    out = ok(command, "--help")
    assert "\nexample:\n  finalfusion " in out or "\nexample:\n  python -m finalfusion" in out
    assert "``" not in out


def test_version_and_top_level_help() -> None:
    assert ok("--version").strip() == f"finalfusion {finalfusion.__version__}"
    out = ok("--help")
    assert all(c in out for c in COMMANDS)
    assert fails(2) == out  # a bare ``finalfusion``: the whole help, on stderr, status 2 (issue 26; test_cli_entry.py)


# ----------------------------------------------------------------------------------------------
# entry points
# ----------------------------------------------------------------------------------------------
def _declared_scripts() -> dict[str, str]:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib
    with open(REPO / "pyproject.toml", "rb") as f:
        return dict(tomllib.load(f)["project"]["scripts"])


def test_declared_scripts_resolve() -> None:
    import importlib

    scripts = _declared_scripts()
    assert set(scripts) == {"finalfusion", "ffp-convert", "ffp-similar", "ffp-analogy", "ffp-bucket-to-explicit", "ffp-select"}
    for target in scripts.values():
        module, _, func = target.partition(":")
        assert callable(getattr(importlib.import_module(module), func))
    assert scripts["finalfusion"] == "finalfusion.cli:main"


def test_installed_entry_point_is_cli_main() -> None:
    try:
        dist = importlib.metadata.distribution("finalfusion-py")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("finalfusion-py is not installed (only this tree's sources are on the path)")
    assert os.path.exists(command()[0])
    direct = json.loads(dist.read_text("direct_url.json") or "{}")
    url = direct.get("url", "")
    if url.rstrip("/") != REPO.as_uri():
        pytest.skip(f"finalfusion-py is installed from {url or 'an index'}, not from this tree ({REPO})")
    eps = {ep.name: ep for ep in dist.entry_points if ep.group == "console_scripts"}
    assert {name: ep.value for name, ep in eps.items()} == _declared_scripts()
    from finalfusion.cli import main

    assert eps["finalfusion"].load() is main


def test_docs_name_every_command_and_option() -> None:
    from finalfusion.cli import build_parser
    from finalfusion.cli._completions import commands

    text = (REPO / "docs" / "cli.md").read_text(encoding="utf-8")
    for c in commands(build_parser()):
        assert f"## {c.name}\n" in text, c.name
        for o in c.options:
            for flag in o.flags:
                if flag not in ("-h", "--help"):
                    assert f"`{flag}" in text or f"{flag}`" in text or f" {flag} " in text, (c.name, flag)


def test_metadata_remove(tmp_path: Path) -> None:
    target = tmp_path / "m.fifu"
    target.write_bytes(SAMPLE.read_bytes())
    ok("metadata", "--remove", target)
    assert finalfusion.load_finalfusion(target).metadata is None
    r = ff("metadata", target)
    assert r.returncode == 0
    assert r.stdout == ""
    assert "has no metadata" in r.stderr
    assert "not a finalfusion file" in fails(1, "metadata", REPO / "README.md")
