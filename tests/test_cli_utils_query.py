"""finalfusion-utils' query commands, run as finalfusion-utils runs them: ``similar``, ``analogy``, ``compute-accuracy``,
``metadata`` and ``select``.

The reference is finalfusion-utils 0.14.1 (github.com/finalfusion/finalfusion-utils, commit 18ece7e): its README's
command lines and the clap definitions in src/*.rs (the Rust tool cannot be built here, crates.io being out of reach).
Each test names the file and lines it follows. The embeddings are the committed examples/sample.fifu (a bucket
vocabulary: unknown words are embedded through their subwords) and a word2vec file written by gensim.
"""

from __future__ import annotations

import math
import resource
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import finalfusion
from finalfusion.cli._common import rust_float

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_cli import SAMPLE, command, env


def run(*args: Any, stdin: str | None = None) -> subprocess.CompletedProcess[bytes]:
    """``finalfusion ARGS`` in a process; a time limit against hangs."""
    data = None if stdin is None else stdin.encode("utf-8")
    return subprocess.run([*command(), *map(str, args)], input=data, capture_output=True, env=env(), timeout=300, check=False)


def ok(*args: Any, stdin: str | None = None) -> str:
    r = run(*args, stdin=stdin)
    assert r.returncode == 0, r.stderr.decode()
    return r.stdout.decode("utf-8")


@pytest.fixture(scope="module")
def emb() -> finalfusion.Embeddings:
    return finalfusion.load_finalfusion(SAMPLE)


def rust_angular(cosine: float) -> np.float32:
    """finalfusion-rust's ``1f32 - (self.similarity.acos() / f32::consts::PI)``, every step in f32."""
    return np.float32(np.float32(1) - np.float32(np.arccos(np.float32(cosine))) / np.float32(math.pi))


def neighbours(results: Any, angular: bool = False) -> str:
    """finalfusion-utils' lines (src/similar.rs line 114, src/analogy.rs line 140): ``word<TAB>{f32}``."""
    return "".join(f"{r.word}\t{rust_float(rust_angular(r.similarity) if angular else r.similarity)}\n" for r in results)


# --- number formatting ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "rust"),
    [
        # What Rust's ``format!("{}", x)`` prints for these f32 (Display: shortest round-trip, never an exponent).
        (1.0, "1"),
        (0.1, "0.1"),
        (-0.5, "-0.5"),
        (1e-7, "0.0000001"),
        (1e20, "100000000000000000000"),
        (float(np.finfo(np.float32).max), "340282350000000000000000000000000000000"),
        (0.6379439234733582, "0.6379439"),
        (float("nan"), "NaN"),
    ],
)
def test_similarities_are_printed_as_rust_prints_an_f32(value: float, rust: str) -> None:
    assert rust_float(value) == rust


# --- similar: src/similar.rs -------------------------------------------------------------------


def test_readme_similar_reads_the_query_words_from_stdin(emb: finalfusion.Embeddings) -> None:
    """README "Analogy and similarity queries": ``finalfusion similar -f finalfusion -k 15 embeddings.fifu``; the words come
    from standard input, one per line, trimmed, blank lines skipped (src/similar.rs lines 96-103)."""
    out = ok("similar", "-f", "finalfusion", "-k", 15, SAMPLE, stdin="  tübingen \n\nberlin\n")
    assert out == neighbours(emb.word_similarity("tübingen", k=15)) + neighbours(emb.word_similarity("berlin", k=15))
    assert len(out.splitlines()) == 30


def test_similar_reads_the_words_of_its_input_file(emb: finalfusion.Embeddings, tmp_path: Path) -> None:
    """``similar EMBEDDINGS INPUT``: INPUT is a file of query words (src/similar.rs line 55), not a query word."""
    words = tmp_path / "words.txt"
    words.write_text("berlin\n\nthe\n", encoding="utf-8")
    expected = neighbours(emb.word_similarity("berlin", k=10)) + neighbours(emb.word_similarity("the", k=10))
    assert ok("similar", SAMPLE, words) == expected
    assert ok("similar", "-f", "finalfusion_mmap", SAMPLE, "-", stdin="berlin\nthe\n") == expected
    # Words on the command line are an explicit option of ours.
    assert ok("similar", SAMPLE, "-w", "berlin", "the") == expected
    r = run("similar", SAMPLE, words, "-w", "berlin")
    assert r.returncode == 1
    assert b"either in INPUT" in r.stderr


def test_similar_angular_is_utils_formula(emb: finalfusion.Embeddings) -> None:
    """``-s angular``: finalfusion-rust's ``angular_similarity``, ``1 - acos(cosine) / pi`` (utils src/similarity.rs lines 40-46)."""
    cosine = [line.split("\t") for line in ok("similar", "-k", 5, SAMPLE, stdin="paris\n").splitlines()]
    angular = [line.split("\t") for line in ok("similar", "-s", "angular", "-k", 5, SAMPLE, stdin="paris\n").splitlines()]
    assert [w for w, _ in angular] == [w for w, _ in cosine]
    np.testing.assert_allclose([float(a) for _, a in angular], [1 - math.acos(float(c)) / math.pi for _, c in cosine], atol=1e-6)
    assert ok("similar", "--similarity", "angular", "-k", 5, SAMPLE, stdin="paris\n") == neighbours(emb.word_similarity("paris", k=5), angular=True)
    # finalfusion-rust's own test points: cosine 0.70710678 is angular 0.75, cosine 0 is 0.5, -1 is 0.
    from finalfusion.cli._query import similarity_value

    assert [round(float(similarity_value(c, "angular")), 5) for c in (1.0, 0.70710678, 0.0, -1.0)] == [1.0, 0.75, 0.5, 0.0]


def test_similar_says_which_word_has_no_embedding(tmp_path: Path) -> None:
    """A query without embedding: utils' message on stderr, the next queries still answered (src/similar.rs lines 105-110)."""
    gensim = pytest.importorskip("gensim", reason="the word2vec file is written by gensim (the interop or gensim extra)")

    kv = gensim.models.KeyedVectors(4)
    kv.add_vectors(["berlin", "paris", "rome"], np.eye(3, 4, dtype=np.float32) + 0.1)
    path = tmp_path / "plain.bin"
    kv.save_word2vec_format(str(path), binary=True)
    r = run("similar", "-f", "word2vec", "-k", 1, path, stdin="zzz\nberlin\n")
    assert r.returncode == 0
    assert r.stderr == b"Could not compute embedding for: zzz\n"
    assert r.stdout.decode().split("\t")[0] in ("paris", "rome")


# --- analogy: src/analogy.rs -------------------------------------------------------------------


def test_analogy_reads_queries_from_its_input_file_and_stdin(emb: finalfusion.Embeddings, tmp_path: Path) -> None:
    """``analogy EMBEDDINGS [INPUT]`` (src/analogy.rs lines 51-66, 114-141): three words per line, ``-k`` answers each."""
    queries = tmp_path / "queries.txt"
    queries.write_text("berlin paris london\n\n  the of and \n", encoding="utf-8")
    expected = neighbours(emb.analogy("berlin", "paris", "london", k=5)) + neighbours(emb.analogy("the", "of", "and", k=5))
    assert ok("analogy", "-f", "finalfusion", "-k", 5, SAMPLE, queries) == expected
    assert ok("analogy", "-k", 5, SAMPLE, stdin=queries.read_text(encoding="utf-8")) == expected
    assert ok("analogy", "-k", 5, SAMPLE, "-w", "berlin", "paris", "london", "the", "of", "and") == expected
    assert ok("analogy", "-k", 5, "-s", "angular", SAMPLE, queries) == (
        neighbours(emb.analogy("berlin", "paris", "london", k=5), angular=True) + neighbours(emb.analogy("the", "of", "and", k=5), angular=True)
    )


def test_analogy_include(emb: finalfusion.Embeddings) -> None:
    """``--include a b``: those query words may be answers, the others not (src/analogy.rs lines 57-65, 85-94)."""
    for include, mask in (("a", (False, True, True)), ("b", (True, False, True)), ("c", (True, True, False))):
        out = ok("analogy", "-k", 84, "--include", include, "--", SAMPLE, stdin="berlin paris london\n")
        assert out == neighbours(emb.analogy("berlin", "paris", "london", k=84, mask=mask))
    out = ok("analogy", "-k", 84, "--include", "a", "b", "--", SAMPLE, stdin="berlin paris london\n")
    assert out == neighbours(emb.analogy("berlin", "paris", "london", k=84, mask=(False, False, True)))
    assert {"berlin", "paris"} <= {line.split("\t")[0] for line in out.splitlines()}
    assert "london" not in {line.split("\t")[0] for line in out.splitlines()}


def test_analogy_query_of_other_than_three_words_is_an_error(tmp_path: Path) -> None:
    """src/analogy.rs lines 120-125: ``Query does not consist of three tokens`` ends the run (exit status 1)."""
    r = run("analogy", SAMPLE, stdin="berlin paris london\n\nberlin paris\n")
    assert r.returncode == 1
    assert r.stderr == b"finalfusion: error: <stdin>: line 3: the query does not consist of three words: 'berlin paris'\n"


def test_readme_analogy_line_is_a_usage_error_of_analogy() -> None:
    """README: ``finalfusion analogy -f finalfusion -k 5 Berlin Deutschland Amsterdam embeddings.fifu``. utils' own parser
    takes EMBEDDINGS and INPUT only (src/analogy.rs lines 51-66) and refuses the two extra words; so do we, with analogy's
    usage, the real leftovers and where query words go."""
    r = run("analogy", "-f", "finalfusion", "-k", 5, "Berlin", "Deutschland", "Amsterdam", SAMPLE)
    err = r.stderr.decode()
    assert r.returncode == 2
    assert err.startswith("usage: finalfusion analogy ")
    assert f"finalfusion analogy: error: unrecognized arguments: Amsterdam {SAMPLE} (query words are read from INPUT" in err
    assert "-w/--words" in err


@pytest.mark.parametrize(
    ("argv", "usage", "leftovers"),
    [
        (["similar", "--bogus", str(SAMPLE)], "usage: finalfusion similar ", "unrecognized arguments: --bogus\n"),
        (["metadata", str(SAMPLE), "out.toml", "extra"], "usage: finalfusion metadata ", "unrecognized arguments: extra\n"),
        (["select", "-x", str(SAMPLE), "out.fifu"], "usage: finalfusion select ", "unrecognized arguments: -x\n"),
        (["compute-accuracy", "--thread", "2", str(SAMPLE), "q.txt", "more"], "usage: finalfusion compute-accuracy ", "unrecognized arguments: more\n"),
    ],
)
def test_a_wrong_argument_shows_the_subcommands_usage(argv: list[str], usage: str, leftovers: str) -> None:
    r = run(*argv)
    err = r.stderr.decode()
    assert r.returncode == 2
    assert err.startswith(usage), err
    assert "usage: finalfusion [-h]" not in err
    assert err.endswith(leftovers), err


# --- endless line inputs (issue 24) ------------------------------------------------------------

#: Address space of the command: the sample and numpy fit, an input read whole (1.9 GB from /dev/zero) does not.
MEMORY = 1 << 30


@pytest.mark.parametrize(
    ("argv", "limit"),
    [
        (["similar", str(SAMPLE)], "MAX_WORD_BYTES"),
        (["similar", str(SAMPLE), "/dev/zero"], "MAX_WORD_BYTES"),
        (["analogy", str(SAMPLE)], "MAX_LINE_BYTES"),
        (["analogy", str(SAMPLE), "/dev/zero"], "MAX_LINE_BYTES"),
        (["select", str(SAMPLE), "OUT.fifu", "/dev/zero"], "MAX_WORD_BYTES"),
        (["select", str(SAMPLE), "OUT.fifu"], "MAX_WORD_BYTES"),
        (["compute-accuracy", str(SAMPLE), "/dev/zero"], "MAX_LINE_BYTES"),
        (["compute-accuracy", str(SAMPLE)], "MAX_LINE_BYTES"),
    ],
)
def test_an_endless_line_is_a_clear_error(argv: list[str], limit: str, tmp_path: Path) -> None:
    """A line without end (``/dev/zero`` as the file, or an endless pipe on stdin) stops at the limit of finalfusion.limits."""
    argv = [str(tmp_path / a) if a == "OUT.fifu" else a for a in argv]
    shell = " ".join(f"'{a}'" for a in [*command(), *argv])
    preexec = lambda: resource.setrlimit(resource.RLIMIT_AS, (MEMORY, MEMORY))  # noqa: E731
    # ``head -c`` makes the pipe end eventually (2 GB) even if the command read it all; the limit stops it long before.
    r = subprocess.run(["sh", "-c", f"head -c 2000000000 /dev/zero | {shell}"], capture_output=True, env=env(), timeout=300, check=False, preexec_fn=preexec)
    err = r.stderr.decode()
    assert r.returncode == 1, err
    assert f"line 1 is longer than {getattr(finalfusion.limits, limit):,} bytes, the longest accepted (finalfusion.limits.{limit})" in err
    assert err.count("\n") == 1
    assert not (tmp_path / "OUT.fifu").exists()


# --- compute-accuracy: src/compute_accuracy.rs -------------------------------------------------


def utils_report(emb: finalfusion.Embeddings, text: str) -> tuple[str, str]:
    """finalfusion-utils' report, computed question by question (src/compute_accuracy.rs lines 128-219)."""
    counts: dict[str, list[Any]] = {}
    section = ""
    for line in text.splitlines():
        if line.startswith(": "):
            section = line[2:]
            continue
        a, b, c, d = line.split()[:4]
        n = counts.setdefault(section, [0, 0, 0, np.float32(0)])  # correct, instances, skipped, sum_cos
        if d not in emb.vocab.words:
            n[2] += 1
            continue
        n[1] += 1
        best = emb.analogy(a, b, c, k=1)
        if best:
            n[0] += best[0].word == d
            n[3] = np.float32(n[3] + np.float32(best[0].similarity))
    out, err = [], []
    for name in sorted(counts):
        correct, instances, skipped, cos = counts[name]
        if instances == 0:
            err.append(f"{name}: no evaluation instances\n")
            continue
        out.append(f"{name}: {correct}/{instances} correct, accuracy: {correct / instances * 100:.2f}, avg cos: {cos / instances:.2f}, skipped: {skipped}\n")
    correct, instances, skipped = (sum(c[i] for c in counts.values()) for i in range(3))
    cos = np.float32(sum(c[3] for c in counts.values()))
    out.append(f"Total: {correct}/{instances} correct, accuracy: {correct / instances * 100:.2f}, avg cos: {cos / instances:.2f}\n")
    share = repr(skipped / (instances + skipped) * 100)  # Rust's ``{}`` of an f64: shortest round trip, no ``.0``
    out.append(f"Skipped: {skipped}/{instances + skipped} ({share.removesuffix('.0')}%)\n")
    return "".join(out), "".join(err)


QUESTIONS = """: zeta-section
the of and to
berlin paris london tübingen
the of and in
in to and notaword
: alpha-section
of the and in
he his she her
: empty-section
the of and notaword
"""


def test_compute_accuracy_prints_utils_report(emb: finalfusion.Embeddings, tmp_path: Path) -> None:
    """README "Evaluation on analogy datasets": ``finalfusion compute-accuracy embeddings.fifu analogies.txt``.

    Sections sorted by name (utils keeps them in a BTreeMap), ``avg cos``, a question skipped only when its answer is
    not a vocabulary word, a section without asked questions named on stderr only."""
    questions = tmp_path / "analogies.txt"
    questions.write_text(QUESTIONS, encoding="utf-8")
    expected_out, expected_err = utils_report(emb, QUESTIONS)
    assert expected_out.splitlines()[0].startswith("alpha-section: ")
    assert expected_err == "empty-section: no evaluation instances\n"
    r = run("compute-accuracy", SAMPLE, questions)
    assert r.returncode == 0
    assert r.stdout.decode("utf-8") == expected_out
    assert r.stderr.decode("utf-8") == expected_err
    assert ok("compute-accuracy", "--threads", 1, SAMPLE, stdin=QUESTIONS) == expected_out
    assert expected_out.splitlines()[-1] == "Skipped: 2/7 (28.57142857142857%)"


def test_compute_accuracy_of_no_question_prints_nan() -> None:
    """No question asked: utils divides 0 by 0 and prints ``NaN`` (src/compute_accuracy.rs lines 204-218)."""
    assert ok("compute-accuracy", SAMPLE, stdin=": s\nthe of and notaword\n") == ("Total: 0/0 correct, accuracy: NaN, avg cos: NaN\nSkipped: 1/1 (100%)\n")


def test_compute_accuracy_question_of_three_words_is_an_error(tmp_path: Path) -> None:
    """utils indexes the fourth word and panics (src/compute_accuracy.rs line 250); here an error naming the line."""
    r = run("compute-accuracy", SAMPLE, stdin=": s\n\nthe of and\n")
    assert r.returncode == 1
    assert r.stderr.decode() == "finalfusion: error: <stdin>: line 3: the question does not have four words: 'the of and'\n"


# --- metadata: src/metadata.rs -----------------------------------------------------------------


def test_readme_metadata_to_stdout_and_to_a_file(emb: finalfusion.Embeddings, tmp_path: Path) -> None:
    """README "Dump metadata": ``finalfusion metadata embeddings.fifu > metadata.txt``; and ``metadata EMB OUT``
    (src/metadata.rs lines 26-32, 45-60): the TOML written to OUT."""
    printed = ok("metadata", SAMPLE)
    try:
        import tomllib
    except ImportError:  # Python 3.10: the core dependency tomli
        import tomli as tomllib
    assert tomllib.loads(printed) == dict(emb.metadata)
    out = tmp_path / "metadata.toml"
    assert ok("metadata", SAMPLE, out) == ""
    assert out.read_text(encoding="utf-8") == printed
    assert ok("metadata", SAMPLE, "-") == printed
    r = run("metadata", "--remove", SAMPLE, out)
    assert r.returncode == 1
    assert b"--set and --remove rewrite FILE itself" in r.stderr


# --- select: src/select.rs ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def word2vec(emb: finalfusion.Embeddings, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sample's known words as a word2vec binary written by gensim (a vocabulary without subwords)."""
    gensim = pytest.importorskip("gensim", reason="the word2vec file is written by gensim (the interop or gensim extra)")

    kv = gensim.models.KeyedVectors(emb.dims)
    kv.add_vectors(emb.vocab.words, np.stack([emb.embedding(w) for w in emb.vocab.words]))
    path = tmp_path_factory.mktemp("utils-select") / "plain.w2v"
    kv.save_word2vec_format(str(path), binary=True)
    return path


def test_select_i_f_t(word2vec: Path, tmp_path: Path) -> None:
    """``select -i -f word2vec -t textdims IN OUT WORDS`` (src/select.rs lines 35-82, 137-164): unknown words are an
    error, ``-i`` leaves them out, ``-f``/``-t`` name the formats."""
    words = tmp_path / "words.txt"
    words.write_text("paris\nnotaword\nberlin\n", encoding="utf-8")
    out = tmp_path / "small.vec"
    r = run("select", "-f", "word2vec", "-t", "textdims", word2vec, out, words)
    assert r.returncode == 1
    assert b"'notaword'" in r.stderr
    assert not out.exists()
    ok("select", "-i", "-f", "word2vec", "-t", "textdims", word2vec, out, words)
    lines = out.read_text(encoding="utf-8").splitlines()
    assert lines[0] == "2 16"
    assert [line.split()[0] for line in lines[1:]] == ["paris", "berlin"]
    small = finalfusion.load_text_dims(out)
    original = finalfusion.load_word2vec(word2vec)
    np.testing.assert_allclose(small.embedding("berlin"), original.embedding("berlin"), rtol=1e-5)
    # finalfusion_mmap is one of utils' -f names; the words from standard input.
    ok("select", "-f", "finalfusion_mmap", "-t", "finalfusion", SAMPLE, tmp_path / "small.fifu", stdin="the\nberlin\n")
    assert finalfusion.load_finalfusion(tmp_path / "small.fifu").vocab.words == ["the", "berlin"]


def test_select_embeds_words_known_through_subwords(emb: finalfusion.Embeddings, tmp_path: Path) -> None:
    """utils selects every word the vocabulary has an index for, subword indices included (src/select.rs lines 151-160,
    176-184): a word of a bucket vocabulary is never unknown."""
    out = tmp_path / "small.fifu"
    ok("select", SAMPLE, out, stdin="berliner\nthe\n")
    small = finalfusion.load_finalfusion(out)
    assert small.vocab.words == ["berliner", "the"]
    np.testing.assert_allclose(small.embedding("berliner"), emb.embedding("berliner"), rtol=1e-6)
    r = run("select", "--no-subwords", SAMPLE, out, stdin="berliner\n")
    assert r.returncode == 1
    assert b"'berliner'" in r.stderr
