"""finalfusion-utils' conversion command lines, run as utils runs them, and the papercuts of issue 26.

The reference is finalfusion-utils 0.14.1 (github.com/finalfusion/finalfusion-utils, commit 18ece7e):
its README's "Converting embeddings", "Quantizing an embedding matrix" and "Convert Bucket Vocab to
Explicit Vocab" command lines, and the clap definitions in src/convert.rs (``-f -t -m -u --lossy``),
src/quantize.rs (``-a -b -f -i -q -s -t``), src/bucket_to_explicit.rs (``-f``) and
src/reconstruct.rs. The input files are written by gensim (word2vec binary, fastText ``.bin``); the
outputs are read back by gensim where gensim reads the format.
"""

from __future__ import annotations

import gzip
import os
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

import finalfusion
from finalfusion.storage import QuantizedArray

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_cli import SAMPLE, command, env, fails, ff, ok

gensim_models = pytest.importorskip("gensim.models")

SENTENCES = [["berlin", "is", "the", "capital", "of", "germany"], ["paris", "is", "the", "capital", "of", "france"]] * 20


@pytest.fixture(scope="module")
def gensim_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("utils")
    w2v = gensim_models.Word2Vec(SENTENCES, vector_size=8, min_count=1, seed=1, workers=1, epochs=2)
    w2v.wv.save_word2vec_format(str(d / "embeddings.w2v"), binary=True)
    ft = gensim_models.FastText(vector_size=8, min_count=1, seed=1, workers=1, bucket=200, min_n=3, max_n=5)
    ft.build_vocab(corpus_iterable=SENTENCES)
    ft.train(corpus_iterable=SENTENCES, total_examples=len(SENTENCES), epochs=1)
    gensim_models.fasttext.save_facebook_model(ft, str(d / "embeddings.bin"))
    return {"word2vec": d / "embeddings.w2v", "fasttext": d / "embeddings.bin"}


def gensim_word2vec(path: Path, binary: bool) -> object:
    return gensim_models.KeyedVectors.load_word2vec_format(str(path), binary=binary)


# --- README: Converting embeddings ---------------------------------------------------------------


def test_readme_convert_lines(gensim_files: dict[str, Path], tmp_path: Path) -> None:
    # $ finalfusion convert -f fasttext -t finalfusion embeddings.bin embeddings.fifu
    ok("convert", "-f", "fasttext", "-t", "finalfusion", gensim_files["fasttext"], tmp_path / "ft.fifu")
    ft = gensim_models.fasttext.load_facebook_vectors(str(gensim_files["fasttext"]))
    emb = finalfusion.load_finalfusion(tmp_path / "ft.fifu")
    assert emb.vocab.words == list(ft.index_to_key)
    for word in ("berlin", "capital"):
        np.testing.assert_allclose(emb[word], ft.get_vector(word, norm=True), atol=1e-5)
    # $ finalfusion convert -f word2vec -t finalfusion embeddings.w2v embeddings.fifu
    ok("convert", "-f", "word2vec", "-t", "finalfusion", gensim_files["word2vec"], tmp_path / "w2v.fifu")
    kv = gensim_word2vec(gensim_files["word2vec"], binary=True)
    emb = finalfusion.load_finalfusion(tmp_path / "w2v.fifu")
    assert emb.vocab.words == list(kv.index_to_key)
    np.testing.assert_allclose(emb["capital"], kv.get_vector("capital", norm=True), rtol=1e-5, atol=1e-6)
    # $ finalfusion convert --help  ("Print help with all supported combinations")
    text = ok("convert", "--help")
    for name in ("fasttext", "finalfusion", "floret", "text", "textdims", "word2vec"):
        assert name in text


def test_convert_m_replaces_the_metadata_as_utils(gensim_files: dict[str, Path], tmp_path: Path) -> None:
    # convert.rs: -m/--metadata FILENAME, "TOML metadata add to the embeddings"; it replaces the input's.
    toml = tmp_path / "meta.toml"
    toml.write_text('corpus = "gensim"\n[training]\nepochs = 2\n')
    ok("convert", "-m", toml, SAMPLE, tmp_path / "out.fifu")
    assert dict(finalfusion.load_finalfusion(tmp_path / "out.fifu").metadata) == {"corpus": "gensim", "training": {"epochs": 2}}
    ok("convert", "-f", "word2vec", "-t", "finalfusion", "-m", toml, gensim_files["word2vec"], tmp_path / "w.fifu")
    assert finalfusion.load_finalfusion(tmp_path / "w.fifu").metadata["corpus"] == "gensim"
    # utils drops the metadata silently for word formats; we say why.
    assert "--metadata needs finalfusion output" in fails(1, "convert", "-m", toml, SAMPLE, tmp_path / "out.vec")


def test_convert_u_writes_the_original_vectors_as_utils(gensim_files: dict[str, Path], tmp_path: Path) -> None:
    # convert.rs: -u/--unnormalize "unnormalize embeddings": the word2vec file gensim reads back has gensim's own vectors.
    out = tmp_path / "again.w2v"
    ok("convert", "-f", "word2vec", "-t", "word2vec", "-u", gensim_files["word2vec"], out)
    before, after = gensim_word2vec(gensim_files["word2vec"], True), gensim_word2vec(out, True)
    np.testing.assert_allclose(after.vectors, before.vectors, rtol=1e-6)
    # Without -u utils writes the unit rows; ours is --no-unnormalize (the default is -u: docs/cli.md).
    ok("convert", "-f", "word2vec", "-t", "textdims", "--no-unnormalize", gensim_files["word2vec"], tmp_path / "unit.vec")
    unit = gensim_word2vec(tmp_path / "unit.vec", False)
    np.testing.assert_allclose(np.linalg.norm(unit.vectors, axis=1), 1, rtol=1e-5)


def test_convert_lossy_as_utils(gensim_files: dict[str, Path], tmp_path: Path) -> None:
    # convert.rs: --lossy "do not fail on malformed UTF-8 byte sequences".
    data = gensim_files["word2vec"].read_bytes()
    assert data.count(b"germany ") == 1
    broken = tmp_path / "broken.w2v"
    broken.write_bytes(data.replace(b"germany ", b"german\xff "))
    assert "utf-8" in fails(1, "convert", "-f", "word2vec", broken, tmp_path / "x.fifu").lower()
    ok("convert", "-f", "word2vec", "--lossy", broken, tmp_path / "x.fifu")
    assert "german\ufffd" in finalfusion.load_finalfusion(tmp_path / "x.fifu").vocab.words


# --- README: Quantizing an embedding matrix --------------------------------------------------------


def test_readme_quantize_line(tmp_path: Path) -> None:
    # $ finalfusion quantize -f finalfusion -q pq -a 1 embeddings.pq
    # The README names only one file; quantize.rs requires INPUT and OUTPUT, so utils stops with a usage error too.
    err = fails(2, "quantize", "-f", "finalfusion", "-q", "pq", "-a", "1", tmp_path / "embeddings.pq")
    assert "the following arguments are required: OUT" in err
    # With both files: OUT is finalfusion whatever it is called (.pq here), as utils writes it.
    r = ff("quantize", "-f", "finalfusion", "-q", "pq", "-a", "1", "-i", "3", SAMPLE, tmp_path / "embeddings.pq")
    assert r.returncode == 0, r.stderr
    assert "Average cosine similarity:" in r.stderr
    assert "Average euclidean distance:" in r.stderr
    assert isinstance(finalfusion.load_finalfusion(tmp_path / "embeddings.pq").storage, QuantizedArray)


def test_quantize_options_map_to_the_quantizer(tmp_path: Path) -> None:
    # quantize.rs: -a attempts, -b bits, -i iter, -q quantizer, -s subquantizers, -t threads.
    out = tmp_path / "q.fifu"
    ok("quantize", "-q", "gaussian_opq", "-s", "4", "-b", "4", "-i", "3", "-a", "2", "-t", "1", "--quiet", SAMPLE, out)
    storage = finalfusion.load_finalfusion(out).storage
    assert isinstance(storage, QuantizedArray)
    assert storage.quantized_len == 4
    assert storage.quantizer.n_centroids == 16
    assert storage.quantizer.projection is not None
    # -t 0: rayon's (and so utils') "the default number of threads".
    ok("quantize", "-q", "pq", "-s", "8", "-b", "2", "-i", "2", "-t", "0", "--quiet", SAMPLE, out)
    assert finalfusion.load_finalfusion(out).storage.quantized_len == 8
    # A value we cannot honour is refused with the reason, before any work.
    err = fails(1, "quantize", "-q", "opq", "-a", "3", "--quiet", SAMPLE, tmp_path / "opq.fifu")
    assert "-a 3" in err
    assert "no attempts to repeat" in err
    err = fails(1, "quantize", "-b", "9", "--quiet", SAMPLE, tmp_path / "b.fifu")
    assert "cannot quantize" in err
    assert "9" in err
    assert not (tmp_path / "opq.fifu").exists()
    assert not (tmp_path / "b.fifu").exists()


def test_quantize_refuses_another_formats_extension(tmp_path: Path) -> None:
    for name in ("out.vec", "out.txt", "out.w2v", "out.bin"):
        err = fails(1, "quantize", "-s", "4", "-i", "2", "--quiet", SAMPLE, tmp_path / name)
        assert "can only be written as finalfusion" in err, err
        assert not (tmp_path / name).exists()


# --- reconstruct -----------------------------------------------------------------------------------


def test_reconstruct_as_utils_and_refuses_dense_input(tmp_path: Path) -> None:
    quantized = tmp_path / "q.fifu"
    ok("quantize", "-s", "4", "-i", "3", "--quiet", SAMPLE, quantized)
    # reconstruct.rs: INPUT OUTPUT, writes finalfusion.
    ok("reconstruct", quantized, tmp_path / "dense.fifu")
    dense = finalfusion.load_finalfusion(tmp_path / "dense.fifu")
    small = finalfusion.load_finalfusion(quantized)
    assert type(dense.storage).__name__ == "NdArray"
    np.testing.assert_allclose(dense["berlin"], small["berlin"], rtol=1e-5, atol=1e-6)
    ok("reconstruct", quantized, tmp_path / "dense.recon")  # an extension no format claims: finalfusion, as utils
    assert finalfusion.compat.sniff_format((tmp_path / "dense.recon").read_bytes()) == "finalfusion"
    # utils fails with "Cannot read quantized embedding matrix"; we say what the file is.
    err = fails(1, "reconstruct", SAMPLE, tmp_path / "copy.fifu")
    assert "not quantized (NdArray storage)" in err
    assert "nothing to reconstruct" in err
    assert not (tmp_path / "copy.fifu").exists()


def test_reconstruct_without_norms_stores_unit_rows_and_norms_as_utils(tmp_path: Path) -> None:
    # reconstruct.rs: no norms chunk -> l2_normalize_array over the word rows, NdNorms of their norms.
    ok("convert", "--no-normalize", SAMPLE, tmp_path / "sample.vec")
    quantized = tmp_path / "raw-q.fifu"
    ok("quantize", "-s", "4", "-b", "4", "-i", "3", "--quiet", "--no-normalize", tmp_path / "sample.vec", quantized)
    small = finalfusion.load_finalfusion(quantized)
    assert small.norms is None
    ok("reconstruct", quantized, tmp_path / "dense.fifu")
    dense = finalfusion.load_finalfusion(tmp_path / "dense.fifu")
    assert dense.norms is not None
    rows = np.asarray(dense.storage)[: len(dense.vocab)]
    np.testing.assert_allclose(np.linalg.norm(rows, axis=1), 1, rtol=1e-5)
    expected = np.asarray(small.storage)[: len(small.vocab)]
    np.testing.assert_allclose(rows * np.asarray(dense.norms)[:, None], expected, rtol=1e-4, atol=1e-5)


# --- README: Convert Bucket Vocab to Explicit Vocab ------------------------------------------------


def test_readme_bucket_to_explicit_line_and_f(gensim_files: dict[str, Path], tmp_path: Path) -> None:
    # $ finalfusion bucket-to-explicit buckets.fifu explicit.fifu
    ok("bucket-to-explicit", SAMPLE, tmp_path / "explicit.fifu")
    assert type(finalfusion.load_finalfusion(tmp_path / "explicit.fifu").vocab).__name__ == "ExplicitVocab"
    # bucket_to_explicit.rs: -f/--format finalfusion|fasttext (ours: -f/--from, the same names).
    ok("bucket-to-explicit", "-f", "fasttext", gensim_files["fasttext"], tmp_path / "ft-explicit.fifu")
    ft = finalfusion.load_finalfusion(tmp_path / "ft-explicit.fifu")
    source = finalfusion.load_fasttext(gensim_files["fasttext"])
    assert ft.vocab.words == source.vocab.words
    np.testing.assert_allclose(ft["berlin"], source["berlin"], rtol=1e-5, atol=1e-6)
    ok("bucket-to-explicit", "-f", "finalfusion", SAMPLE, tmp_path / "explicit2.fifu")
    assert (tmp_path / "explicit2.fifu").read_bytes() == (tmp_path / "explicit.fifu").read_bytes()


# --- ambiguous and impossible outputs --------------------------------------------------------------


def test_bin_output_needs_to(tmp_path: Path) -> None:
    err = fails(1, "convert", SAMPLE, tmp_path / "vectors.bin")
    assert "-t fasttext or -t word2vec" in err
    assert not (tmp_path / "vectors.bin").exists()
    ok("convert", "-t", "word2vec", SAMPLE, tmp_path / "vectors.bin")
    kv = gensim_word2vec(tmp_path / "vectors.bin", binary=True)  # what the user of .bin wanted
    emb = finalfusion.load_finalfusion(SAMPLE)
    assert list(kv.index_to_key) == emb.vocab.words


def test_read_only_output_format_says_so(tmp_path: Path) -> None:
    for name, fmt in (("t.safetensors", "safetensors"), ("t.h5", "hdf5")):
        err = fails(1, "convert", SAMPLE, tmp_path / name)
        assert f"{fmt} (.{name.split('.')[1]}) is a format this library reads but cannot write" in err, err
        assert "finalfusion (.fifu)" in err


# --- papercuts -------------------------------------------------------------------------------------


def test_a_wrong_f_names_the_right_format_without_a_screen_of_bytes(tmp_path: Path) -> None:
    err = fails(1, "convert", "-f", "word2vec", SAMPLE, tmp_path / "x.fifu")
    assert "the content looks like finalfusion: use -f finalfusion" in err
    assert len(err) < 400, err
    assert "description" not in err  # the metadata text that followed the magic in the 150 bytes


def test_an_unknown_format_lists_the_formats_one_per_line(tmp_path: Path) -> None:
    junk = tmp_path / "junk.dat"
    junk.write_bytes(bytes(range(200, 256)) * 4)
    r = ff("convert", junk, tmp_path / "x.fifu")
    assert r.returncode == 1
    assert "Traceback" not in r.stderr
    lines = r.stderr.splitlines()
    assert "cannot tell the format" in lines[0]
    assert "-f FORMAT" in lines[0]
    assert max(len(line.replace(str(junk), "")) for line in lines) <= 100, lines
    for name in ("finalfusion", "fasttext", "word2vec", "text-dims", "text"):
        assert any(line.split()[:2] == ["not", name] for line in lines[1:]), name


def test_a_missing_path_is_named_once(tmp_path: Path) -> None:
    missing = tmp_path / "sample.fif"
    err = fails(1, "convert", missing, tmp_path / "x.fifu")
    assert err == f"finalfusion: error: {missing}: No such file or directory\n"


def test_an_output_in_a_missing_directory_says_so(tmp_path: Path) -> None:
    out = tmp_path / "nodir" / "x.fifu"
    err = fails(1, "convert", SAMPLE, out)
    assert err == f"finalfusion: error: {out}: cannot write: the directory '{out.parent}' does not exist\n"
    assert ".tmp" not in err
    err = fails(1, "quantize", "--quiet", SAMPLE, out)
    assert "does not exist" in err
    assert ".tmp" not in err


def _run_with_fifo(fifo: Path, data: bytes, *args: object) -> subprocess.CompletedProcess[str]:
    def feed() -> None:
        with open(fifo, "wb") as f:
            f.write(data)

    writer = threading.Thread(target=feed, daemon=True)
    writer.start()
    try:
        return subprocess.run([*command(), *map(str, args)], capture_output=True, text=True, env=env(), timeout=60, check=False)
    finally:
        writer.join(timeout=5)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs named pipes")
def test_a_fifo_input_is_read_once(tmp_path: Path) -> None:
    fifo = tmp_path / "in.pipe"
    os.mkfifo(fifo)
    out = tmp_path / "out.fifu"
    # Before: the format was sniffed by one open, the loader opened the FIFO again and waited forever.
    r = _run_with_fifo(fifo, SAMPLE.read_bytes(), "convert", fifo, out)
    assert r.returncode == 0, r.stderr
    assert out.read_bytes() == SAMPLE.read_bytes()
    ok("convert", SAMPLE, tmp_path / "sample.vec")
    r = _run_with_fifo(fifo, gzip.compress((tmp_path / "sample.vec").read_bytes()), "convert", fifo, tmp_path / "vec.fifu")
    assert r.returncode == 0, r.stderr
    assert finalfusion.load_finalfusion(tmp_path / "vec.fifu").vocab.words == finalfusion.load_finalfusion(SAMPLE).vocab.words
    r = _run_with_fifo(fifo, SAMPLE.read_bytes(), "convert", "--mmap", fifo, tmp_path / "m.fifu")
    assert r.returncode == 1
    assert "--mmap needs a regular file" in r.stderr


def test_standard_input_as_dev_stdin_is_read_once(tmp_path: Path) -> None:
    if not Path("/dev/stdin").exists():
        pytest.skip("no /dev/stdin")
    out = tmp_path / "out.fifu"
    r = subprocess.run([*command(), "convert", "/dev/stdin", str(out)], input=SAMPLE.read_bytes(), capture_output=True, env=env(), timeout=60, check=False)
    assert r.returncode == 0, r.stderr
    assert out.read_bytes() == SAMPLE.read_bytes()


def test_a_model_directory_is_recognised(tmp_path: Path) -> None:
    # finalfusion.load reads a safetensors model directory; the command used to open it as a file ("Is a directory").
    safetensors_numpy = pytest.importorskip("safetensors.numpy")
    model = tmp_path / "model"
    model.mkdir()
    table = np.arange(12, dtype=np.float32).reshape(3, 4)
    safetensors_numpy.save_file({"wte.weight": table}, str(model / "model.safetensors"))
    (model / "tokenizer.json").write_text('{"model": {"vocab": {"x": 0, "y": 1, "z": 2}}}')
    ok("convert", model, tmp_path / "out.fifu")
    assert finalfusion.load_finalfusion(tmp_path / "out.fifu").vocab.words == finalfusion.load(model).vocab.words
    (tmp_path / "empty").mkdir()
    assert "no format stored as a directory" in fails(1, "convert", tmp_path / "empty", tmp_path / "x.fifu")
