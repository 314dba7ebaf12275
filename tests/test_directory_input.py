"""A directory is untrusted input (issue 33; DESIGN.md, conventions 16 and 19).

The audit: a FIFO named ``index.bin`` or ``ann.json`` hung ``load_index`` and ``similar --index``,
a FIFO ``*.safetensors`` hung ``finalfusion.load(dir)``; a sparse 3 GiB ``tokenizer.json`` (4 KiB
on disk) ended in ``MemoryError``; symlinks in an index directory were followed out of it.

The one rule (``finalfusion._source.file_in``, ``open_regular``, ``read_regular``): a file a
directory holds by convention is opened only if it is a regular file that resolves inside the
directory, and read only after its size, taken from the opened descriptor, is within a bound. A
tokenizer file the user names is bounded and must be a regular file too. Every directory here is
written by the real tools (model2vec's ``save_pretrained``, ``safetensors``, ``tokenizers``, the ANN
backends through ``AnnIndex.save``). Whatever could hang runs in a child process with a timeout, and
whatever could read gigabytes under an address-space limit, so a regression fails instead of
hanging or swapping.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import resource
import shutil
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import finalfusion
from finalfusion import FormatError, ann
from finalfusion.embeddings import Embeddings
from finalfusion.storage import NdArray
from finalfusion.vocab import SimpleVocab

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_cli import command, env

tokenizers = pytest.importorskip("tokenizers")
model2vec = pytest.importorskip("model2vec")
safetensors_numpy = pytest.importorskip("safetensors.numpy")

CORPUS = ["the quick brown fox jumps over the lazy dog", "a house is not a home", "happiness is a warm puppy in the house"] * 30
#: The audit's size: 3 GiB that take 4 KiB on disk.
SPARSE = 3 << 30
#: Address space of a child that must refuse a sparse file from its size (a read of it would not fit).
CHILD_MEMORY = 2 << 30
TIMEOUT = 120


def _tokenizer() -> Any:
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, trainers

    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.train_from_iterator(CORPUS, trainers.WordPieceTrainer(vocab_size=80, special_tokens=["[PAD]", "[UNK]"]))
    return tok


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A model2vec directory written by model2vec itself (model.safetensors, tokenizer.json, config.json)."""
    from model2vec import StaticModel

    tok = _tokenizer()
    table = np.random.default_rng(0).normal(size=(tok.get_vocab_size(), 8)).astype(np.float32)
    path = tmp_path_factory.mktemp("m2v") / "model"
    StaticModel(table, tok, normalize=True).save_pretrained(path)
    assert {"model.safetensors", "tokenizer.json", "config.json"} <= set(os.listdir(path))
    return path


@pytest.fixture
def model(model_dir: Path, tmp_path: Path) -> Path:
    """A fresh copy of the model directory, to plant things in."""
    return Path(shutil.copytree(model_dir, tmp_path / "model"))


def _child(code: str, *args: object, memory: int | None = None) -> str:
    """Run ``code`` in a child process (the argument list in ``argv``) with a time limit; what it printed.

    The child prints ``FormatError: <message>`` for a FormatError and ``loaded`` for success; anything else fails here.
    """
    script = f"import sys, finalfusion\ntry:\n    {code}\nexcept finalfusion.FormatError as exc:\n    print('FormatError:', exc)\nelse:\n    print('loaded')\n"

    def limit() -> None:
        if memory is not None:
            resource.setrlimit(resource.RLIMIT_AS, (memory, memory))

    r = subprocess.run(
        [sys.executable, "-c", script, *map(str, args)], capture_output=True, text=True, env=env(), timeout=TIMEOUT, preexec_fn=limit, check=False
    )
    assert r.returncode == 0, r.stderr[-2000:]
    return r.stdout.strip()


def _says(text: str, *parts: str) -> None:
    """Every one of ``parts`` is in ``text``."""
    for part in parts:
        assert part in text, (part, text)


def _refused(out: str, *parts: str) -> None:
    """The child printed a FormatError that says every one of ``parts``."""
    assert out.startswith("FormatError:"), out
    _says(out, *parts)


def _ff(*args: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*command(), *map(str, args)], capture_output=True, text=True, env=env(), timeout=TIMEOUT, check=False)


def _fifo(path: Path) -> str:
    os.mkfifo(path)
    return "a FIFO (named pipe)"


def _directory(path: Path) -> str:
    path.mkdir()
    return "a directory"


def _socket(path: Path) -> str:
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(path))
    s.close()
    return "a socket"


SPECIAL: dict[str, Callable[[Path], str]] = {"fifo": _fifo, "directory": _directory, "socket": _socket}


def _replace(path: Path, make: Callable[[Path], str]) -> str:
    if path.exists():
        path.unlink()
    return make(path)


# -- special files in a model directory ---------------------------------------------------------------
@pytest.mark.parametrize("kind", list(SPECIAL))
@pytest.mark.parametrize("name", ["model.safetensors", "tokenizer.json", "config.json", "model.safetensors.index.json"])
def test_a_special_file_in_a_model_directory_is_refused(model: Path, name: str, kind: str) -> None:
    found = _replace(model / name, SPECIAL[kind])
    out = _child("finalfusion.load(sys.argv[1])", model)
    assert out.startswith("FormatError:"), out
    assert f"{model / name} is not a regular file" in out
    assert f"found {found}" in out


def test_a_fifo_found_by_its_extension_is_refused(model: Path) -> None:
    """No model.safetensors: the one ``*.safetensors`` of the directory is the checkpoint; a FIFO there is refused."""
    (model / "model.safetensors").rename(model / "weights.safetensors.bak")
    _fifo(model / "weights.safetensors")
    out = _child("finalfusion.load(sys.argv[1])", model)
    _refused(out, "weights.safetensors is not a regular file", "FIFO")


def test_a_fifo_shard_named_by_an_index_is_refused(model: Path) -> None:
    (model / "model.safetensors").rename(model / "part-1.safetensors")
    (model / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {"embeddings": "part-2.safetensors"}}))
    _fifo(model / "part-2.safetensors")
    out = _child("finalfusion.load(sys.argv[1])", model)
    _refused(out, "part-2.safetensors is not a regular file")


def test_the_command_line_refuses_a_fifo_in_a_model_directory(model: Path, tmp_path: Path) -> None:
    _replace(model / "model.safetensors", _fifo)
    r = _ff("convert", model, tmp_path / "out.fifu")
    assert r.returncode == 1, r.stderr
    _says(r.stderr, "model.safetensors is not a regular file", "FIFO")
    assert not (tmp_path / "out.fifu").exists()


# -- sizes checked before a byte is read ---------------------------------------------------------------
def _sparse(path: Path, size: int = SPARSE) -> None:
    if path.exists():
        path.unlink()
    with open(path, "wb") as f:
        f.truncate(size)
    assert os.stat(path).st_blocks * 512 < (1 << 20)  # sparse: nothing on disk


@pytest.mark.parametrize(
    ("name", "limit"),
    [
        ("tokenizer.json", "MAX_TOKENIZER_BYTES"),
        ("config.json", "model2vec config.json"),
        ("model.safetensors.index.json", "MAX_MODEL_HEADER_BYTES"),
        ("tekken.json", "MAX_TOKENIZER_BYTES"),
    ],
)
def test_a_sparse_file_in_a_model_directory_is_refused_from_its_size(model: Path, name: str, limit: str) -> None:
    if name == "tekken.json":
        (model / "tokenizer.json").unlink()
    _sparse(model / name)
    out = _child("finalfusion.load(sys.argv[1])", model, memory=CHILD_MEMORY)
    assert out.startswith("FormatError:"), out
    _says(out, f"{name} is larger than the limit", limit, f"found {SPARSE} bytes")


def _wordllama(root: Path) -> Path:
    """WordLlama's package layout in ``root`` (weights/<config>_<dims>.safetensors, its tokenizer in ../tokenizers/): the weights' path."""
    (root / "weights").mkdir(parents=True)
    (root / "tokenizers").mkdir()
    tok = _tokenizer()
    table = np.ones((tok.get_vocab_size(), 4), dtype=np.float32)
    weights = root / "weights" / "custom_4.safetensors"
    safetensors_numpy.save_file({"embedding.weight": table}, str(weights))
    tok.save(str(root / "tokenizers" / "custom_tokenizer_config.json"))
    assert len(finalfusion.load(weights).vocab) == len(finalfusion.load(weights.parent).vocab) == tok.get_vocab_size()  # the layout loads
    return weights


def test_a_sparse_wordllama_tokenizer_config_is_refused_from_its_size(tmp_path: Path) -> None:
    weights = _wordllama(tmp_path)
    _sparse(tmp_path / "tokenizers" / "custom_tokenizer_config.json")
    out = _child("finalfusion.load(sys.argv[1])", weights, memory=CHILD_MEMORY)
    _refused(out, "custom_tokenizer_config.json is larger than the limit", "MAX_TOKENIZER_BYTES")


@pytest.mark.parametrize("kind", list(SPECIAL))
def test_a_special_file_as_wordllama_weights_is_refused(tmp_path: Path, kind: str) -> None:
    """``finalfusion.load(weights_dir)``: the one ``*.safetensors`` found there is WordLlama's; a FIFO, a directory or a socket under its name is refused."""
    weights = _wordllama(tmp_path)
    found = _replace(weights, SPECIAL[kind])
    out = _child("finalfusion.load(sys.argv[1])", weights.parent)
    _refused(out, f"{weights} is not a regular file", f"found {found}")


def test_wordllama_weights_swapped_for_a_fifo_after_the_check_are_refused(tmp_path: Path) -> None:
    """The weights pass the directory rule, then become a FIFO before they are opened: the open does not block (open_regular)."""
    weights = _wordllama(tmp_path)
    swap = (
        "import finalfusion.compat.safetensors as st, os; checked = st._weights_in; "
        "st._weights_in = lambda d: (lambda p: (os.unlink(p), os.mkfifo(p), p)[2])(checked(d)); "
        "finalfusion.load(sys.argv[1])"
    )
    out = _child(swap, weights.parent)
    _refused(out, f"{weights} is not a regular file", "found a FIFO")


def test_a_link_out_of_a_wordllama_weights_directory_is_refused(tmp_path: Path) -> None:
    weights = _wordllama(tmp_path / "model")
    outside = tmp_path / "elsewhere" / weights.name
    outside.parent.mkdir()
    shutil.move(str(weights), outside)
    weights.symlink_to(outside)
    with pytest.raises(FormatError, match="leads out of its directory") as err:
        finalfusion.load(weights.parent)
    assert err.value.found == f"a link to {outside.resolve()}"


# -- a tokenizer the user names: a regular file, bounded ----------------------------------------------
@pytest.mark.parametrize("via", ["load", "HuggingFaceTokenizer"])
def test_an_explicit_tokenizer_path_is_bounded_and_must_be_a_regular_file(model: Path, tmp_path: Path, via: str) -> None:
    call = {
        "load": "finalfusion.load(sys.argv[1], tokenizer=sys.argv[2])",
        "HuggingFaceTokenizer": "finalfusion.vocab.HuggingFaceTokenizer(sys.argv[2])",
    }[via]
    os.mkfifo(tmp_path / "fifo.json")
    out = _child(call, model / "model.safetensors", tmp_path / "fifo.json")
    _refused(out, "fifo.json is not a regular file", "found a FIFO")
    out = _child(call, model / "model.safetensors", "/dev/zero")
    _refused(out, "/dev/zero is not a regular file", "found a character device")
    _sparse(tmp_path / "sparse.json")
    out = _child(call, model / "model.safetensors", tmp_path / "sparse.json", memory=CHILD_MEMORY)
    _refused(out, "MAX_TOKENIZER_BYTES", f"found {SPARSE} bytes")
    # the real one is read as before
    assert _child(call, model / "model.safetensors", model / "tokenizer.json") == "loaded"


@pytest.mark.parametrize("special", ["fifo", "/dev/zero", "sparse"])
def test_the_command_line_tokenizer_option_is_bounded_and_must_be_a_regular_file(model: Path, tmp_path: Path, special: str) -> None:
    if special == "fifo":
        tokenizer, expect = tmp_path / "fifo.json", "found a FIFO"
        os.mkfifo(tokenizer)
    elif special == "sparse":
        tokenizer, expect = tmp_path / "sparse.json", "MAX_TOKENIZER_BYTES"
        _sparse(tokenizer)
    else:
        tokenizer, expect = Path("/dev/zero"), "/dev/zero is not a regular file"
    r = _ff("convert", "--tokenizer", tokenizer, model / "model.safetensors", tmp_path / "out.fifu")
    assert r.returncode != 0, r.stderr
    _says(r.stderr, expect)
    assert not (tmp_path / "out.fifu").exists()


# -- links ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["tokenizer.json", "config.json", "model.safetensors"])
def test_a_link_out_of_a_model_directory_is_refused(model: Path, tmp_path: Path, name: str) -> None:
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    shutil.move(str(model / name), outside / name)  # the same file, one directory up
    (model / name).symlink_to(outside / name)
    with pytest.raises(FormatError, match="leads out of its directory") as err:
        finalfusion.load(model)
    assert err.value.found == f"a link to {(outside / name).resolve()}"


def test_a_link_that_stays_inside_a_model_directory_is_followed(model: Path) -> None:
    before = finalfusion.load(model)
    (model / "v2").mkdir()
    for name in ("model.safetensors", "tokenizer.json"):
        shutil.move(str(model / name), model / "v2" / name)
        (model / name).symlink_to(Path("v2") / name)
    after = finalfusion.load(model)
    assert after.vocab.words == before.vocab.words
    np.testing.assert_array_equal(after.storage.matrix, before.storage.matrix)


def _hf_cache(model: Path, root: Path) -> Path:
    """``model``'s files laid out as huggingface_hub's cache keeps them: ``snapshots/<rev>/NAME -> ../../blobs/<sha256>``."""
    repo = root / "models--someone--model"
    (repo / "blobs").mkdir(parents=True)
    snapshot = repo / "snapshots" / "0123abcd"
    snapshot.mkdir(parents=True)
    for path in sorted(model.iterdir()):
        blob = hashlib.sha256(path.read_bytes()).hexdigest()
        shutil.copyfile(path, repo / "blobs" / blob)
        (snapshot / path.name).symlink_to(Path("..") / ".." / "blobs" / blob)
    return snapshot


def test_a_hugging_face_cache_snapshot_loads_from_its_blobs(model: Path, tmp_path: Path) -> None:
    snapshot = _hf_cache(model, tmp_path)
    before, after = finalfusion.load(model), finalfusion.load(snapshot)
    assert after.vocab.words == before.vocab.words
    np.testing.assert_array_equal(after.storage.matrix, before.storage.matrix)


def test_a_hugging_face_cache_snapshot_link_out_of_its_blobs_is_refused(model: Path, tmp_path: Path) -> None:
    snapshot = _hf_cache(model, tmp_path)
    other = tmp_path / "models--someone--other" / "blobs"
    other.mkdir(parents=True)
    shutil.copyfile(model / "tokenizer.json", other / "tok")
    (snapshot / "tokenizer.json").unlink()
    (snapshot / "tokenizer.json").symlink_to(other / "tok")  # another repository's blob: not this snapshot's
    with pytest.raises(FormatError, match="leads out of its directory"):
        finalfusion.load(snapshot)


# -- arrays gensim stores beside a pickle ----------------------------------------------------------------------
@pytest.fixture
def gensim_pickle(tmp_path: Path) -> Path:
    """A KeyedVectors saved by gensim with its vectors aside (``kv.pkl`` and ``kv.pkl.vectors.npy``)."""
    models = pytest.importorskip("gensim.models")
    kv = models.KeyedVectors(4)
    kv.add_vectors([f"w{i}" for i in range(10)], np.random.default_rng(0).standard_normal((10, 4)).astype(np.float32))
    path = tmp_path / "model" / "kv.pkl"
    path.parent.mkdir()
    kv.save(str(path), sep_limit=0)
    assert sorted(os.listdir(path.parent)) == ["kv.pkl", "kv.pkl.vectors.npy"]
    return path


@pytest.mark.parametrize("mmap", [None, "r"])
@pytest.mark.parametrize("kind", list(SPECIAL))
def test_a_special_file_as_a_gensim_array_aside_is_refused(gensim_pickle: Path, kind: str, mmap: str | None) -> None:
    found = _replace(Path(f"{gensim_pickle}.vectors.npy"), SPECIAL[kind])
    out = _child("finalfusion.Embeddings.load(sys.argv[1], mmap=sys.argv[2] or None)", gensim_pickle, mmap or "")
    _refused(out, "kv.pkl.vectors.npy is not a regular file", f"found {found}")


def test_a_link_out_of_a_gensim_pickles_directory_is_refused(gensim_pickle: Path, tmp_path: Path) -> None:
    side = Path(f"{gensim_pickle}.vectors.npy")
    rows = finalfusion.Embeddings.load(gensim_pickle).storage.matrix
    outside = tmp_path / "elsewhere" / side.name
    outside.parent.mkdir()
    shutil.move(str(side), outside)
    side.symlink_to(outside)
    with pytest.raises(FormatError, match="leads out of its directory") as err:
        finalfusion.Embeddings.load(gensim_pickle)
    assert err.value.found == f"a link to {outside.resolve()}"
    side.unlink()
    (gensim_pickle.parent / "v2").mkdir()
    shutil.move(str(outside), gensim_pickle.parent / "v2" / side.name)
    side.symlink_to(Path("v2") / side.name)  # a link that stays inside is followed
    np.testing.assert_array_equal(finalfusion.Embeddings.load(gensim_pickle).storage.matrix, rows)


# -- saved ANN indexes -----------------------------------------------------------------------------------
def _emb() -> Embeddings:
    rows = np.random.default_rng(3).normal(size=(300, 8)).astype(np.float32)
    return Embeddings(NdArray(rows), SimpleVocab([f"w{i}" for i in range(300)]))


@pytest.fixture(scope="module")
def saved_indexes(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Path]]:
    """The embeddings as a file and an index of each installed backend, saved by ``AnnIndex.save``."""
    tmp = tmp_path_factory.mktemp("ann")
    _emb().write(tmp / "emb.fifu")
    emb = finalfusion.load_finalfusion(tmp / "emb.fifu")
    saved = {}
    for backend in ann.backend_names():
        try:
            ix = ann.build_index(emb, backend, **({"nlist": 4} if backend.startswith("faiss-ivf") else {}))
        except finalfusion.errors.MissingExtraError:
            continue
        ix.save(tmp / f"{backend}.ann")
        saved[backend] = tmp / f"{backend}.ann"
    if not saved:
        pytest.skip("no approximate-neighbour library is installed (the ann extra)")
    installed = {b for b, module in _ANN_MODULES.items() if importlib.util.find_spec(module) is not None}
    assert installed <= set(saved), f"installed but not built: {sorted(installed - set(saved))}"
    return tmp / "emb.fifu", saved


#: The library each backend the tests name needs.
_ANN_MODULES = {"hnswlib": "hnswlib", "voyager": "voyager", "usearch": "usearch", "faiss-hnsw": "faiss"}


@pytest.fixture
def index_copy(saved_indexes: tuple[Path, dict[str, Path]], tmp_path: Path) -> Callable[[str], Path]:
    def copy(backend: str) -> Path:
        if backend not in saved_indexes[1]:
            pytest.skip(f"{_ANN_MODULES.get(backend, backend)} is not installed (the ann extra)")
        return Path(shutil.copytree(saved_indexes[1][backend], tmp_path / f"{backend}.ann"))

    return copy


LOAD_INDEX = "finalfusion.ann.load_index(sys.argv[1], finalfusion.load_finalfusion(sys.argv[2]))"


@pytest.mark.parametrize("name", ["index.bin", "ann.json"])
def test_a_fifo_in_an_index_directory_is_refused(saved_indexes: tuple[Path, dict[str, Path]], index_copy: Callable[[str], Path], name: str) -> None:
    emb_file, saved = saved_indexes
    emb = finalfusion.load_finalfusion(emb_file)
    for backend in saved:
        path = index_copy(backend)
        assert ann.load_index(path, emb).backend == backend
        _replace(path / name, _fifo)
        out = _child(LOAD_INDEX, path, emb_file)
        _refused(out, f"{path / name} is not a regular file", "FIFO")


@pytest.mark.parametrize("kind", ["directory", "socket"])
def test_other_special_files_in_an_index_directory_are_refused(
    saved_indexes: tuple[Path, dict[str, Path]], index_copy: Callable[[str], Path], kind: str
) -> None:
    emb = finalfusion.load_finalfusion(saved_indexes[0])
    for name in ("index.bin", "ann.json"):
        path = index_copy("hnswlib")
        found = _replace(path / name, SPECIAL[kind])
        with pytest.raises(FormatError, match=f"not a regular file: expected a regular file, found {found}"):
            ann.load_index(path, emb)
        shutil.rmtree(path)


def test_similar_index_refuses_a_fifo(saved_indexes: tuple[Path, dict[str, Path]], index_copy: Callable[[str], Path]) -> None:
    emb_file, _ = saved_indexes
    path = index_copy("hnswlib")
    ok = _ff("similar", "-k", 3, "--index", path, emb_file, "-w", "w1")
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.startswith("w"), ok.stdout
    _replace(path / "index.bin", _fifo)
    r = _ff("similar", "-k", 3, "--index", path, emb_file, "-w", "w1")
    assert r.returncode == 1, r.stderr
    _says(r.stderr, "index.bin is not a regular file", "FIFO")


@pytest.mark.parametrize("name", ["index.bin", "ann.json"])
def test_a_link_out_of_an_index_directory_is_refused(
    saved_indexes: tuple[Path, dict[str, Path]], index_copy: Callable[[str], Path], tmp_path: Path, name: str
) -> None:
    emb = finalfusion.load_finalfusion(saved_indexes[0])
    path = index_copy("hnswlib")
    other = index_copy("usearch")  # a real index file, outside the directory
    (path / name).unlink()
    (path / name).symlink_to(other / name)
    with pytest.raises(FormatError, match="leads out of its directory"):
        ann.load_index(path, emb)
    r = _ff("similar", "--index", path, saved_indexes[0], "-w", "w1")
    assert r.returncode == 1, r.stderr
    _says(r.stderr, "leads out of its directory")


def test_links_inside_an_index_directory_and_to_it_are_followed(
    saved_indexes: tuple[Path, dict[str, Path]], index_copy: Callable[[str], Path], tmp_path: Path
) -> None:
    emb = finalfusion.load_finalfusion(saved_indexes[0])
    path = index_copy("hnswlib")
    (path / "data").mkdir()
    shutil.move(str(path / "index.bin"), path / "data" / "index.bin")
    (path / "index.bin").symlink_to(Path("data") / "index.bin")
    link = tmp_path / "link.ann"
    link.symlink_to(path)  # the directory the user names may itself be a link
    for where in (path, link):
        ids, _ = ann.load_index(where, emb).search(emb["w5"], 1)
        assert np.ravel(ids)[0] == 5
