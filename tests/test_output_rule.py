"""The output rule (DESIGN.md rule 19, finalfusion._output): every writer, through the API and the command line.

Never overwrite its own input, never write through a link it did not make,
replace a directory only when it holds exactly what the library wrote there
(its manifest), and leave nothing stale that a loader would prefer. Indexes are
built with the real backends, model2vec directories by the ``model2vec``
package and by :func:`finalfusion.write_model2vec`.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import finalfusion
from finalfusion import OutputRefused, ann, load_finalfusion
from finalfusion._output import MANIFEST_NAME, edge_digest

REPO = Path(__file__).resolve().parent.parent
TUTORIAL = REPO / "examples" / "tutorial.fifu"
GOLDEN = REPO / "tests" / "data" / "golden" / "files"
FAST = {"M": 8, "ef_construction": 40, "ef": 32}
M2V_FILES = ["config.json", MANIFEST_NAME, "model.safetensors", "modules.json", "tokenizer.json"]
INDEX_FILES = ["ann.json", MANIFEST_NAME, "index.bin"]
#: Each backend with small parameters (and the module it needs).
BACKENDS: dict[str, tuple[str, dict[str, Any]]] = {
    "hnswlib": ("hnswlib", FAST),
    "faiss-hnsw": ("faiss", FAST),
    "faiss-ivf": ("faiss", {"nlist": 16, "nprobe": 4}),
    "faiss-ivfpq": ("faiss", {"nlist": 16, "nprobe": 4, "m": 8}),
    "usearch": ("usearch", {"M": 8, "ef_construction": 40, "ef": 32}),
    "voyager": ("voyager", {"M": 8, "ef_construction": 40, "ef": 32}),
}


def env() -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=str(REPO / "src") + os.pathsep + os.environ.get("PYTHONPATH", ""))


def cli(*args: Any, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "finalfusion", *map(str, args)], capture_output=True, text=True, env=env(), timeout=300, check=False, cwd=cwd)


def legacy(function: str, *args: Any) -> subprocess.CompletedProcess[str]:
    code = f"import sys; from finalfusion.cli.legacy import {function} as main; sys.exit(main())"
    return subprocess.run([sys.executable, "-c", code, *map(str, args)], capture_output=True, text=True, env=env(), timeout=300, check=False)


def refused(proc: subprocess.CompletedProcess[str], text: str) -> None:
    """The command failed with status 1 and a one-line message holding ``text``, no traceback."""
    assert proc.returncode == 1, proc.stderr
    assert text in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr


def snapshot(path: Path) -> dict[str, Any]:
    """Every entry under ``path`` (links as their target, files as their bytes): what must survive a refused write."""
    out: dict[str, Any] = {}
    for root, dirs, files in os.walk(path):
        for name in dirs + files:
            p = Path(root) / name
            rel = str(p.relative_to(path))
            out[rel] = ("link", os.readlink(p)) if p.is_symlink() else ("dir",) if p.is_dir() else p.read_bytes()
    return out


def unit(v: np.ndarray) -> np.ndarray:
    return np.asarray(v / np.linalg.norm(v))


# -- fixtures: real indexes and real model2vec directories --------------------------------------
@pytest.fixture(scope="module")
def emb() -> finalfusion.Embeddings:
    return load_finalfusion(TUTORIAL)


@pytest.fixture(scope="module")
def index(emb: finalfusion.Embeddings) -> ann.AnnIndex:
    pytest.importorskip("hnswlib")
    return ann.build_index(emb, "hnswlib", **FAST)


@pytest.fixture
def saved(index: ann.AnnIndex, tmp_path: Path) -> Path:
    out = tmp_path / "saved.ann"
    index.save(out)
    return out


@pytest.fixture(scope="module")
def m2v_emb() -> finalfusion.Embeddings:
    return finalfusion.Embeddings(
        finalfusion.NdArray(np.arange(24, dtype=np.float32).reshape(6, 4) + 1), finalfusion.SimpleVocab(["a", "b", "c", "d", "e", "f"])
    )


@pytest.fixture
def upstream_model(tmp_path: Path) -> Path:
    """A directory written by model2vec's own ``save_pretrained``."""
    model2vec = pytest.importorskip("model2vec")
    from tokenizers import Tokenizer, models, pre_tokenizers

    tok = Tokenizer(models.WordLevel({"[UNK]": 0, "hello": 1, "world": 2}, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    out = tmp_path / "upstream"
    model2vec.StaticModel(np.ones((3, 4), dtype=np.float32), tok, normalize=False).save_pretrained(out)
    return out


# -- saved ANN indexes -----------------------------------------------------------------------------
@pytest.mark.parametrize("backend", sorted(BACKENDS))
def test_every_backend_saves_a_manifest_and_refuses_an_extra_file(backend: str, emb: finalfusion.Embeddings, tmp_path: Path) -> None:
    module, params = BACKENDS[backend]
    pytest.importorskip(module)
    ix = ann.build_index(emb, backend, **params)
    out = tmp_path / "x.ann"
    ix.save(out)
    assert sorted(os.listdir(out)) == INDEX_FILES
    manifest = json.loads((out / MANIFEST_NAME).read_text())
    assert manifest["kind"] == "finalfusion-ann index"
    assert manifest["files"]["index.bin"] == dict(zip(("size", "digest"), edge_digest(str(out / "index.bin")), strict=True))
    ix.save(out)  # its own output: replaced whole
    assert sorted(os.listdir(out)) == INDEX_FILES
    (out / "notes.txt").write_text("mine")
    before = snapshot(out)
    with pytest.raises(OutputRefused, match=r"did not write there: notes\.txt; not replaced"):
        ix.save(out)
    assert snapshot(out) == before
    assert sorted(os.listdir(tmp_path)) == ["x.ann"]  # no staging directory left
    assert len(ann.load_index(out, emb)) == len(ix)


def test_save_over_its_own_index_replaces_it_whole(index: ann.AnnIndex, emb: finalfusion.Embeddings, saved: Path) -> None:
    old_bin = (saved / "index.bin").stat().st_ino
    loaded = ann.load_index(saved, emb)
    index.save(saved)
    assert sorted(os.listdir(saved)) == INDEX_FILES
    assert (saved / "index.bin").stat().st_ino != old_bin  # new files, not written into the old ones
    assert sorted(os.listdir(saved.parent)) == ["saved.ann"]
    np.testing.assert_array_equal(loaded.search(emb.storage.matrix[:3], 5)[0], ann.load_index(saved, emb).search(emb.storage.matrix[:3], 5)[0])


def test_without_an_atomic_exchange_two_renames_keep_the_same_rule(index: ann.AnnIndex, saved: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from finalfusion import _output

    monkeypatch.setattr(_output, "_exchange", lambda a, b: False)  # a file system without RENAME_EXCHANGE
    index.save(saved)
    assert sorted(os.listdir(saved)) == INDEX_FILES
    assert sorted(os.listdir(saved.parent)) == ["saved.ann"]
    (saved / "notes.txt").write_text("mine")
    with pytest.raises(OutputRefused, match=r"notes\.txt"):
        index.save(saved)
    assert (saved / "notes.txt").read_text() == "mine"


def test_what_appears_in_the_old_directory_during_the_swap_is_kept(index: ann.AnnIndex, saved: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from finalfusion import _output

    old_dirs = []

    def racing_exchange(a: str, b: str) -> bool:
        os.rename(b, a + ".swap")  # the swap, in three renames
        os.rename(a, b)
        os.rename(a + ".swap", a)
        Path(a, "late.txt").write_text("written during the swap")  # another process, in the old directory
        Path(a, "ann.json").write_text("changed during the swap")
        old_dirs.append(Path(a))
        return True

    monkeypatch.setattr(_output, "_exchange", racing_exchange)
    index.save(saved)
    assert sorted(os.listdir(saved)) == INDEX_FILES
    (old,) = old_dirs
    assert sorted(os.listdir(old)) == ["ann.json", "late.txt"]  # the old index.bin and manifest went; what changed stays
    assert (old / "ann.json").read_text() == "changed during the swap"


def test_a_failed_write_leaves_the_old_directory_and_no_staging(m2v_emb: finalfusion.Embeddings, tmp_path: Path) -> None:
    from finalfusion._output import write_directory

    out = tmp_path / "model"
    finalfusion.write_model2vec(out, m2v_emb)
    before = snapshot(out)

    def fill(directory: str) -> None:
        Path(directory, "model.safetensors").write_bytes(b"half")
        raise OSError(28, "No space left on device")

    with pytest.raises(OSError, match="No space left"):
        write_directory(out, "model2vec model", fill)
    assert snapshot(out) == before
    assert sorted(os.listdir(tmp_path)) == ["model"]


def test_a_missing_parent_is_named(index: ann.AnnIndex, m2v_emb: finalfusion.Embeddings, tmp_path: Path) -> None:
    for write in (index.save, lambda p: finalfusion.write_model2vec(p, m2v_emb)):
        with pytest.raises(FileNotFoundError, match="does not exist") as info:
            write(tmp_path / "no" / "out")
        assert info.value.filename == str(tmp_path / "no" / "out")
    assert os.listdir(tmp_path) == []


def test_save_into_an_empty_directory(index: ann.AnnIndex, tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    index.save(tmp_path / "empty")
    assert sorted(os.listdir(tmp_path / "empty")) == INDEX_FILES


@pytest.mark.parametrize("header", [b"{}", b"not json at all", b"\xff\xfe"])
@pytest.mark.parametrize("others", [[], ["notes.txt"]])
def test_a_directory_with_a_fake_ann_json_is_refused(index: ann.AnnIndex, tmp_path: Path, header: bytes, others: list[str]) -> None:
    target = tmp_path / "mine"
    target.mkdir()
    (target / "ann.json").write_bytes(header)
    for name in others:
        (target / name).write_text("the user's")
    before = snapshot(target)
    with pytest.raises(OutputRefused, match=r"no finalfusion-manifest\.json") as info:
        index.save(target)
    assert "ann.json" in str(info.value.strerror)
    assert all(name in str(info.value.strerror) for name in others)
    assert snapshot(target) == before
    assert sorted(os.listdir(tmp_path)) == ["mine"]


def test_an_index_saved_before_manifests_is_refused_with_a_way_out(index: ann.AnnIndex, saved: Path) -> None:
    (saved / MANIFEST_NAME).unlink()  # what earlier versions wrote: ann.json and index.bin only
    before = snapshot(saved)
    with pytest.raises(OutputRefused, match=r"no finalfusion-manifest.json\): ann.json, index.bin; not replaced"):
        index.save(saved)
    assert snapshot(saved) == before
    shutil.rmtree(saved)  # what the docs tell the user to do
    index.save(saved)
    assert sorted(os.listdir(saved)) == INDEX_FILES


@pytest.mark.parametrize(
    "manifest",
    [
        b"{}",
        b"garbage",
        b'{"format": "finalfusion-manifest", "version": 99, "kind": "finalfusion-ann index", "files": {}}',
        b'{"format": "other", "version": 1, "kind": "finalfusion-ann index", "files": {}}',
        b'{"format": "finalfusion-manifest", "version": 1, "kind": "finalfusion-ann index", "files": {"../x": {"size": 1, "digest": "0"}}}',
        b'{"format": "finalfusion-manifest", "version": 1, "kind": "finalfusion-ann index", "files": {"ann.json": {"size": "1", "digest": "0"}}}',
    ],
    ids=["empty", "garbage", "version", "format", "path", "size-type"],
)
def test_a_fake_or_future_manifest_is_refused(index: ann.AnnIndex, saved: Path, manifest: bytes) -> None:
    (saved / MANIFEST_NAME).write_bytes(manifest)
    before = snapshot(saved)
    with pytest.raises(OutputRefused, match=r"its finalfusion-manifest\.json is not one finalfusion wrote"):
        index.save(saved)
    assert snapshot(saved) == before


def test_a_manifest_listing_a_file_it_did_not_describe_is_refused(index: ann.AnnIndex, saved: Path) -> None:
    doc = json.loads((saved / MANIFEST_NAME).read_text())
    doc["files"]["notes.txt"] = {"size": 4, "digest": "0" * 32}  # a name, but not this file's digest
    (saved / MANIFEST_NAME).write_text(json.dumps(doc))
    (saved / "notes.txt").write_text("mine")
    with pytest.raises(OutputRefused, match=r"changed since finalfusion wrote them: notes\.txt"):
        index.save(saved)
    assert (saved / "notes.txt").read_text() == "mine"


def test_a_changed_index_file_is_refused(index: ann.AnnIndex, saved: Path) -> None:
    data = bytearray((saved / "index.bin").read_bytes())
    data[-1] ^= 1  # the same size, other bytes
    (saved / "index.bin").write_bytes(bytes(data))
    with pytest.raises(OutputRefused, match=r"index\.bin \(changed since finalfusion wrote it\)"):
        index.save(saved)
    assert (saved / "index.bin").read_bytes() == bytes(data)


def test_another_kind_of_library_directory_is_refused(index: ann.AnnIndex, m2v_emb: finalfusion.Embeddings, tmp_path: Path, saved: Path) -> None:
    finalfusion.write_model2vec(tmp_path / "model", m2v_emb)
    with pytest.raises(OutputRefused, match="holds a model2vec model directory finalfusion wrote, not a finalfusion-ann index"):
        index.save(tmp_path / "model")
    with pytest.raises(OutputRefused, match="holds a finalfusion-ann index directory finalfusion wrote, not a model2vec model"):
        finalfusion.write_model2vec(saved, m2v_emb)
    assert sorted(os.listdir(tmp_path / "model")) == M2V_FILES


def test_links_in_or_as_the_target_are_refused(index: ann.AnnIndex, saved: Path, tmp_path: Path) -> None:
    victim = tmp_path / "victim.bin"
    shutil.copy(saved / "index.bin", victim)
    victim_bytes = victim.read_bytes()
    (saved / "index.bin").unlink()
    (saved / "index.bin").symlink_to(victim)  # the same bytes, through a link the library did not make
    with pytest.raises(OutputRefused, match=r"index\.bin \(not a regular file\)"):
        index.save(saved)
    assert (saved / "index.bin").is_symlink()
    (saved / "index.bin").unlink()
    (saved / "planted").symlink_to(victim)
    with pytest.raises(OutputRefused, match="did not write there: planted"):
        index.save(saved)
    link = tmp_path / "link.ann"
    link.symlink_to(saved)  # the target itself is a link
    with pytest.raises(OutputRefused, match="is a symbolic link"):
        index.save(link)
    assert link.is_symlink()
    assert victim.read_bytes() == victim_bytes


def test_a_file_a_subdirectory_or_a_fifo_is_refused_without_blocking(index: ann.AnnIndex, saved: Path, tmp_path: Path) -> None:
    (tmp_path / "file").write_bytes(b"data")
    with pytest.raises(OutputRefused, match="exists and is not a directory"):
        index.save(tmp_path / "file")
    assert (tmp_path / "file").read_bytes() == b"data"
    (saved / "sub").mkdir()
    with pytest.raises(OutputRefused, match="did not write there: sub"):
        index.save(saved)
    (saved / "sub").rmdir()
    if hasattr(os, "mkfifo"):
        (saved / "index.bin").unlink()
        os.mkfifo(saved / "index.bin")  # opened without blocking, never read
        with pytest.raises(OutputRefused, match=r"index\.bin \(not a regular file\)"):
            index.save(saved)
        fifo_manifest = tmp_path / "m"
        fifo_manifest.mkdir()
        os.mkfifo(fifo_manifest / MANIFEST_NAME)
        with pytest.raises(OutputRefused, match="not one finalfusion wrote"):
            index.save(fifo_manifest)


# -- write_model2vec ----------------------------------------------------------------------------------
def test_model2vec_into_a_directory_model2vec_wrote_is_refused(m2v_emb: finalfusion.Embeddings, upstream_model: Path) -> None:
    before = snapshot(upstream_model)
    with pytest.raises(OutputRefused, match=r"no finalfusion-manifest\.json") as info:
        finalfusion.write_model2vec(upstream_model, m2v_emb)
    assert "model.safetensors" in str(info.value.strerror)
    assert "tokenizer.json" in str(info.value.strerror)
    assert snapshot(upstream_model) == before


@pytest.mark.parametrize("stale", ["model.safetensors.index.json", "model-00001-of-00002.safetensors", "notes.txt"])
def test_model2vec_leaves_nothing_stale(m2v_emb: finalfusion.Embeddings, tmp_path: Path, stale: str) -> None:
    model2vec = pytest.importorskip("model2vec")
    out = tmp_path / "model"
    finalfusion.write_model2vec(out, m2v_emb)
    other = finalfusion.Embeddings(finalfusion.NdArray(np.ascontiguousarray(m2v_emb.storage.matrix[::-1])), m2v_emb.vocab)
    finalfusion.write_model2vec(out, other)  # its own previous output: replaced whole
    assert sorted(os.listdir(out)) == M2V_FILES
    np.testing.assert_allclose(unit(finalfusion.load(out).embedding("a")), unit(other.embedding("a")), rtol=1e-6)
    (out / stale).write_text("{}")  # a file a loader may prefer, or the user's: never left beside new weights, never deleted
    before = snapshot(out)
    with pytest.raises(OutputRefused, match=f"did not write there: {stale}"):
        finalfusion.write_model2vec(out, m2v_emb)
    assert snapshot(out) == before
    (out / stale).unlink()
    finalfusion.write_model2vec(out, m2v_emb)
    np.testing.assert_allclose(model2vec.StaticModel.from_pretrained(out).encode(["a"])[0], unit(m2v_emb.embedding("a")), rtol=1e-5)


def test_model2vec_never_writes_through_a_planted_link(m2v_emb: finalfusion.Embeddings, tmp_path: Path) -> None:
    out = tmp_path / "model"
    finalfusion.write_model2vec(out, m2v_emb)
    victim = tmp_path / "victim.json"
    victim.write_bytes((out / "tokenizer.json").read_bytes())
    (out / "tokenizer.json").unlink()
    (out / "tokenizer.json").symlink_to(victim)
    with pytest.raises(OutputRefused, match=r"tokenizer\.json \(not a regular file\)"):
        finalfusion.write_model2vec(out, m2v_emb)
    assert (out / "tokenizer.json").is_symlink()
    assert victim.read_bytes() == (out / "tokenizer.json").read_bytes()
    link = tmp_path / "link"
    link.symlink_to(out)
    with pytest.raises(OutputRefused, match="is a symbolic link"):
        finalfusion.write_model2vec(link, m2v_emb)
    (tmp_path / "file").write_text("mine")
    with pytest.raises(OutputRefused, match="exists and is not a directory"):
        finalfusion.write_model2vec(tmp_path / "file", m2v_emb)
    assert (tmp_path / "file").read_text() == "mine"


def _model2vec_over_itself(emb: finalfusion.Embeddings, out: Path) -> tuple[finalfusion.Embeddings, finalfusion.Embeddings]:
    """Write ``emb`` to ``out``, load it, write what was loaded over ``out``: (the loaded, the reloaded)."""
    finalfusion.write_model2vec(out, emb)
    loaded = finalfusion.load(out)
    finalfusion.write_model2vec(out, loaded)  # its own output, still mapped: replaced, the mapping keeps the old file
    return loaded, finalfusion.load(out)


def test_model2vec_over_the_directory_it_was_loaded_from(m2v_emb: finalfusion.Embeddings, tmp_path: Path) -> None:
    loaded, again = _model2vec_over_itself(m2v_emb, tmp_path / "model")
    np.testing.assert_allclose(np.asarray(again.storage), np.asarray(loaded.storage))


def test_model2vec_over_the_directory_it_was_loaded_from_looks_up_the_same(m2v_emb: finalfusion.Embeddings, tmp_path: Path) -> None:
    pytest.importorskip("tokenizers")  # a model's word goes through its tokenizer
    loaded, again = _model2vec_over_itself(m2v_emb, tmp_path / "model")
    np.testing.assert_allclose(loaded.embedding("b"), again.embedding("b"))


# -- files: the API keeps saving over the mapped file -------------------------------------------------
def test_embeddings_write_over_the_file_they_are_mapped_from(tmp_path: Path) -> None:
    path = tmp_path / "e.fifu"
    shutil.copy(GOLDEN / "tiny_simple.fifu", path)
    emb = load_finalfusion(path, mmap=True)
    rows = np.array(emb.storage.matrix)
    emb.write(path)  # replaced atomically: the mapping keeps the old inode (docs/reliability.md)
    np.testing.assert_array_equal(load_finalfusion(path).storage.matrix, rows)


# -- the command line -----------------------------------------------------------------------------------
def test_cli_index_build_refuses_its_input_and_foreign_directories(tmp_path: Path, upstream_model: Path) -> None:
    pytest.importorskip("hnswlib")
    emb_file = tmp_path / "e.fifu"
    shutil.copy(TUTORIAL, emb_file)
    proc = cli("index", "build", emb_file, emb_file, "--backend", "hnswlib")
    refused(proc, "is the input e.fifu itself")
    assert emb_file.read_bytes() == TUTORIAL.read_bytes()
    before = snapshot(upstream_model)
    proc = cli("index", "build", upstream_model, upstream_model, "--backend", "hnswlib")
    refused(proc, "is the input directory upstream itself")
    assert snapshot(upstream_model) == before
    fake = tmp_path / "fake.ann"
    fake.mkdir()
    (fake / "ann.json").write_text("{}")
    (fake / "notes.txt").write_text("mine")
    proc = cli("index", "build", emb_file, fake, "--backend", "hnswlib")
    refused(proc, "ann.json, notes.txt; not replaced")
    assert (fake / "notes.txt").read_text() == "mine"
    assert (fake / "ann.json").read_text() == "{}"
    out = tmp_path / "real.ann"
    for _ in range(2):  # written, then its own output replaced
        proc = cli("index", "build", emb_file, out, "--backend", "hnswlib", "--param", "M=8", "--quiet")
        assert proc.returncode == 0, proc.stderr
        assert sorted(os.listdir(out)) == INDEX_FILES
    (out / "extra.txt").write_text("mine")
    proc = cli("index", "build", emb_file, out, "--backend", "hnswlib", "--quiet")
    refused(proc, "did not write there: extra.txt")
    assert (out / "extra.txt").read_text() == "mine"


@pytest.mark.parametrize("spelling", ["out", "./out/"])
def test_cli_index_build_names_a_refused_directory_as_given(tmp_path: Path, spelling: str) -> None:
    # one line naming OUT as the user wrote it and the foreign file, never the absolute path the rule worked on
    pytest.importorskip("hnswlib")
    shutil.copy(TUTORIAL, tmp_path / "e.fifu")
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "notes.txt").write_text("mine")
    proc = cli("index", "build", "--quiet", "--backend", "hnswlib", "e.fifu", spelling, cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr == f"finalfusion: error: {spelling}: holds files finalfusion did not write there (it has no {MANIFEST_NAME}): notes.txt; not replaced\n"
    assert (tmp_path / "out" / "notes.txt").read_text() == "mine"


def test_cli_metadata_never_clobbers(tmp_path: Path) -> None:
    with_md = tmp_path / "with.fifu"
    shutil.copy(GOLDEN / "tiny_simple.fifu", with_md)
    without = tmp_path / "without.fifu"
    shutil.copy(GOLDEN / "tiny_bucket.fifu", without)
    other = tmp_path / "other.fifu"
    shutil.copy(TUTORIAL, other)
    originals = {p: p.read_bytes() for p in (with_md, without, other)}
    for out in (with_md, f"{tmp_path}/./with.fifu"):
        refused(cli("metadata", with_md, out), "is the input with.fifu itself: not replaced")
    link = tmp_path / "link.toml"
    link.symlink_to(with_md)
    proc = cli("metadata", with_md, link)
    refused(proc, "is the input with.fifu itself")
    refused(cli("metadata", with_md, other), "other.fifu: exists and is not a TOML file: not replaced")
    # no metadata: said so, nothing written, exit 1
    proc = cli("metadata", without, tmp_path / "md.toml")
    refused(proc, "has no metadata") and "md.toml not written" in proc.stderr
    assert not (tmp_path / "md.toml").exists()
    assert {p: p.read_bytes() for p in originals} == originals
    # an earlier TOML output is replaced; standard output as before
    (tmp_path / "md.toml").write_text("old = 1\n")
    proc = cli("metadata", with_md, tmp_path / "md.toml")
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "md.toml").read_text() == "dims = 2\n"
    proc = cli("metadata", without)
    assert (proc.returncode, proc.stdout) == (0, "")
    assert "has no metadata" in proc.stderr


@pytest.mark.parametrize(
    "command",
    [
        ["convert", "{in}", "{in}"],
        ["convert", "{in}", "{link}"],
        ["convert", "{in}", "{dotted}", "-t", "text"],
        ["convert", "-m", "{toml}", "{in}", "{toml}", "-t", "finalfusion"],
        ["quantize", "{in}", "{in}", "-s", "1"],
        ["reconstruct", "{in}", "{in}"],
        ["select", "{in}", "{in}", "{words}"],
        ["select", "{in}", "{words}", "{words}", "-t", "finalfusion"],
        ["bucket-to-explicit", "{in}", "{in}"],
    ],
    ids=["convert", "convert-link", "convert-spelling", "convert-metadata", "quantize", "reconstruct", "select", "select-words", "bucket"],
)
def test_cli_file_writers_refuse_their_own_input(tmp_path: Path, command: list[str]) -> None:
    src = tmp_path / "in.fifu"
    shutil.copy(GOLDEN / "tiny_bucket.fifu", src)
    (tmp_path / "words.txt").write_text("a\n")
    (tmp_path / "md.toml").write_text("x = 1\n")
    (tmp_path / "link.fifu").symlink_to(src)
    names = {"in": src, "link": tmp_path / "link.fifu", "dotted": f"{tmp_path}/./in.fifu", "toml": tmp_path / "md.toml", "words": tmp_path / "words.txt"}
    before = snapshot(tmp_path)
    proc = cli(*(part.format(**names) for part in command))
    refused(proc, "itself: not replaced (write to another path)")
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize(("function", "extra"), [("convert", ["-f", "finalfusion"]), ("select", []), ("bucket_to_explicit", [])])
def test_legacy_scripts_refuse_their_own_input(tmp_path: Path, function: str, extra: list[str]) -> None:
    src = tmp_path / "in.fifu"
    shutil.copy(GOLDEN / "tiny_bucket.fifu", src)
    proc = legacy(function, src, src, *extra)
    refused(proc, "is the input in.fifu itself")
    assert src.read_bytes() == (GOLDEN / "tiny_bucket.fifu").read_bytes()


def test_cli_refuses_to_write_over_its_tokenizer(upstream_model: Path, tmp_path: Path) -> None:
    tokenizer = tmp_path / "tok.json"
    shutil.copy(upstream_model / "tokenizer.json", tokenizer)
    before = tokenizer.read_bytes()
    refused(cli("convert", upstream_model, tokenizer, "--tokenizer", tokenizer, "-t", "text"), "is the input tok.json itself")
    refused(cli("index", "build", upstream_model, tokenizer, "--tokenizer", tokenizer), "is the input tok.json itself")
    assert tokenizer.read_bytes() == before


def test_cli_refuses_an_output_inside_an_input_directory(upstream_model: Path) -> None:
    before = snapshot(upstream_model)
    proc = cli("convert", upstream_model, upstream_model / "model2.safetensors", "-t", "finalfusion")
    refused(proc, "lies inside the input directory upstream")
    assert snapshot(upstream_model) == before


# -- structure: the rule has one place -------------------------------------------------------------------
#: Calls that create, replace or remove a path, or open one for writing.
_WRITING_CALLS = {
    ("os", "mkdir"),
    ("os", "makedirs"),
    ("os", "rename"),
    ("os", "replace"),
    ("os", "unlink"),
    ("os", "remove"),
    ("os", "rmdir"),
    ("os", "symlink"),
    ("os", "link"),
    ("shutil", "rmtree"),
    ("shutil", "move"),
    ("shutil", "copy"),
    ("shutil", "copyfile"),
    ("shutil", "copytree"),
}
#: The modules that hold the rule, and the few other writes with their reason.
_ALLOWED = {
    "_atomic.py": "atomic file writes (the file half of the rule)",
    "_output.py": "the output rule",
    "ann/_hnswlib.py": "its own private mkstemp temporary file, removed after use (to_bytes/from_bytes)",
    "_gensim_api.py": "gensim's save_word2vec_format(append=True): appending to the caller's file is that call's meaning",
}


def _writes(tree: Any) -> list[str]:
    import ast

    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and (func.value.id, func.attr) in _WRITING_CALLS:
            found.append(f"{func.value.id}.{func.attr} (line {node.lineno})")
        elif isinstance(func, ast.Attribute) and func.attr in ("write_text", "write_bytes", "mkdir", "unlink", "rmdir", "symlink_to", "touch"):
            found.append(f"Path.{func.attr} (line {node.lineno})")  # (str.replace and Path.replace are alike: os.replace above)
        elif (isinstance(func, ast.Name) and func.id == "open") or (isinstance(func, ast.Attribute) and func.attr == "fdopen"):
            modes = [*node.args[1:2]] + [k.value for k in node.keywords if k.arg == "mode"]
            if any(isinstance(m, ast.Constant) and isinstance(m.value, str) and set(m.value) & set("wax+") for m in modes):
                found.append(f"open for writing (line {node.lineno})")
            elif any(not isinstance(m, ast.Constant) for m in modes):
                found.append(f"open with a computed mode (line {node.lineno})")
    return found


def test_only_the_output_rule_writes_paths() -> None:
    """A writer outside _atomic/_output would bypass the rule: every such call in src/ is listed here, with its reason."""
    import ast

    root = REPO / "src" / "finalfusion"
    offenders = {}
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        found = _writes(ast.parse(path.read_text(encoding="utf-8")))
        if found and rel not in _ALLOWED:
            offenders[rel] = found
    assert offenders == {}, f"paths written outside finalfusion._output/_atomic (route them through the output rule): {offenders}"
    assert all((root / rel).is_file() and _writes(ast.parse((root / rel).read_text(encoding="utf-8"))) for rel in _ALLOWED)  # no stale exemption
