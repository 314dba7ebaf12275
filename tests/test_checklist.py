"""The surface checklist of docs/reliability.md ("Before a surface lands"), one test per item, over ONE table of surfaces.

Every reader, directory reader and writer is a row of :data:`SURFACES`; every item of the
checklist is a test parametrised over the rows it applies to, so a surface added to the table
gets every item. Inputs are written by the library's own writers and the real tools
(safetensors, tokenizers, the ANN libraries); anything that may hang or kill the process
(a FIFO, a native library on crafted bytes, a 3 GiB sparse file) runs in a forked child
with a timeout and an address-space limit, so a regression fails instead of hanging.
"""

from __future__ import annotations

import ast
import contextlib
import faulthandler
import functools
import gzip
import hashlib
import importlib.util
import io
import json
import os
import random
import select
import shutil
import signal
import stat
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import finalfusion
from _servers import Nginx, names, nginx_fixtures
from conftest import load_fuzz
from finalfusion import Embeddings, FinalfusionError, NdArray, SimpleVocab

fuzz = load_fuzz()

#: Seconds a child may take before the item counts as a hang.
CHILD_SECONDS = 20.0
#: Address space a child may add (a whole 3 GiB read fails with MemoryError instead).
CHILD_EXTRA_MB = 1024


# -- running an item in a child ---------------------------------------------------------------------


def isolated(fn: Callable[[], Any], timeout: float = CHILD_SECONDS) -> dict[str, Any]:
    """Run ``fn`` in a forked child under an address-space limit: ``ok`` (with ``repr`` of the value), ``raised`` (type, message,
    ``sanctioned`` for a FinalfusionError / OSError), ``signal`` or ``timeout`` (the child is killed)."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        os.close(r)
        signal.alarm(int(timeout) + 5)  # a backstop: the child never outlives a killed test run for long
        try:
            with fuzz.address_space_limit(CHILD_EXTRA_MB):
                value = fn()
            out = {"status": "ok", "value": repr(value)[:300]}
        except BaseException as exc:
            out = {"status": "raised", "type": type(exc).__name__, "msg": str(exc)[:400], "sanctioned": isinstance(exc, (FinalfusionError, OSError))}
        os.write(w, json.dumps(out).encode())
        os._exit(0)
    os.close(w)
    ready, _, _ = select.select([r], [], [], timeout)
    if not ready:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        os.close(r)
        return {"status": "timeout"}
    chunks = []
    while chunk := os.read(r, 1 << 16):
        chunks.append(chunk)
    os.close(r)
    _, code = os.waitpid(pid, 0)
    if os.WIFSIGNALED(code):
        return {"status": "signal", "signal": os.WTERMSIG(code)}
    result: dict[str, Any] = json.loads(b"".join(chunks))
    return result


def refused(out: dict[str, Any]) -> bool:
    """The child raised a FinalfusionError or an OSError (not a hang, a crash or another exception)."""
    return out["status"] == "raised" and out["sanctioned"]


# -- embeddings --------------------------------------------------------------------------------------

WORDS = [f"w{i}" for i in range(40)]


def small_embeddings(words: list[str] | None = None, dims: int = 8) -> Embeddings:
    words = WORDS if words is None else words
    rows = np.random.default_rng(3).standard_normal((len(words), dims)).astype(np.float32)
    return Embeddings(NdArray(rows), SimpleVocab(words))


# -- the table of surfaces ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Surface:
    """A reader, directory reader or writer.

    ``make(dir)`` writes a valid input in ``dir`` (with the library's writers or the real tools) and returns what the
    reader is given; ``load(path)`` reads it (a reader of a file at a URL: ``load(url)`` reads the URL where the file ``make``
    wrote is served, and ``extra["local"](path)`` is the same reader of the local file). A directory reader names the files it opens by convention
    (``conventional``, relative to the directory). A writer has ``write(target, emb)`` and ``read(target)``.
    ``fuzz_reader`` is the fuzzer's reader whose generators cover the surface; ``native`` the native library that parses
    its bytes; ``gzip`` whether it reads gzip input.
    """

    name: str
    # "file-reader", "dir-reader", "url-dir-reader" (a directory read through its URL), "url-file-reader" (a file read through its
    # URL), "file-writer", "dir-writer"
    kind: str
    fuzz_reader: str
    make: Callable[[Path], Path] | None = None
    load: Callable[[Path], Any] | None = None
    write: Callable[[Path, Embeddings], Any] | None = None
    read: Callable[[Path], Any] | None = None
    conventional: tuple[str, ...] = ()
    native: str | None = None
    gzip: bool = False
    words: bool = True  # whether the format stores arbitrary words (Unicode items)
    extra: dict[str, Any] = field(default_factory=dict)

    def __str__(self) -> str:
        return self.name


def _written(write: Callable[[Any, Embeddings], Any], name: str) -> Callable[[Path], Path]:
    def make(d: Path) -> Path:
        path = d / name
        write(path, small_embeddings())
        return path

    return make


def _model2vec_dir(d: Path) -> Path:
    path = d / "m2v"
    finalfusion.write_model2vec(path, small_embeddings())
    return path


def _tekken_dir(d: Path) -> Path:
    from safetensors.numpy import save_file

    path = d / "tekken"
    path.mkdir()
    src = Path(__file__).parent / "data" / "models" / "tekken_small.json"
    shutil.copy(src, path / "tekken.json")
    size = json.loads(src.read_text(encoding="utf-8"))["config"]["default_vocab_size"]
    save_file({"tok_embeddings.weight": np.random.default_rng(1).standard_normal((size, 8)).astype(np.float32)}, str(path / "consolidated.safetensors"))
    return path


def _wordllama_dir(d: Path) -> Path:
    files = dict(fuzz.model_layouts()["wordllama"])
    for name, content in files.items():
        target = d / "wl" / name[2:]
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content)
    return d / "wl"


def _sharded_dir(d: Path) -> Path:
    """A sharded checkpoint: a model2vec directory whose weights are named by a ``model.safetensors.index.json``."""
    path = _model2vec_dir(d)
    (path / "model.safetensors").rename(path / "model-00001-of-00001.safetensors")
    (path / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {"embeddings": "model-00001-of-00001.safetensors"}}))
    return path


def _at_url(tail: str) -> Callable[[Path], Any]:
    """A reader of a directory at a URL: nginx serves the directory on the loopback interface, and ``load`` reads its URL + ``tail``."""

    def load(root: Path) -> Any:
        import tempfile

        from _servers import nginx

        with tempfile.TemporaryDirectory() as work, nginx(root, Path(work)) as server:
            return finalfusion.load(server.url(tail))

    return load


def _ann_dir(backend: str) -> Callable[[Path], Path]:
    def make(d: Path) -> Path:
        path = d / f"{backend}.ann"
        path.mkdir()
        for name, content in fuzz.ann_saved(backend).items():
            (path / name).write_bytes(content)
        return path

    return make


def _ann_load(path: Path) -> Any:
    from finalfusion.ann import load_index

    ix = load_index(path, fuzz.ann_embeddings())
    ix.search(np.asarray(fuzz.ann_embeddings().storage[:2]), 5)
    return ix


def _cli(*argv: str) -> int:
    from finalfusion import cli

    return cli.main(list(argv))


def _cli_or_raise(*argv: str) -> None:
    """Run a command; a failure raises a FinalfusionError with the one line the command printed (what a user reads)."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        status = _cli(*argv)
    if status != 0:
        said = err.getvalue()
        assert said.count("\n") == 1, said  # a failure is one line
        raise FinalfusionError(f"status {status}: {said.strip()}")


def _cli_over_itself(*argv: str) -> Callable[[Surface, Path], None]:
    """A command whose output is its own input (``{}`` is the input's path)."""

    def run(surface: Surface, target: Path) -> None:
        path = str(_cli_source(target) if "index" in argv else target)
        _cli_or_raise(*(a.replace("{}", path) for a in argv))

    return run


def _cli_source(target: Path) -> Path:
    return target.parent / f"cli-src-{target.name}.fifu"


def _cli_convert(target: Path, emb: Embeddings) -> None:
    src = target.parent / f"cli-src-{target.name}.fifu"
    emb.write(src)
    _cli_or_raise("convert", "--quiet", str(src), str(target))


def _ann_save(target: Path, emb: Embeddings) -> None:
    from finalfusion.ann import build_index

    build_index(emb, "hnswlib", M=8, ef_construction=20).save(target)


def _ann_read(target: Path) -> Any:
    from finalfusion.ann import load_index

    return load_index(target, _ann_read.emb)  # type: ignore[attr-defined]


def _index_build(target: Path, emb: Embeddings) -> None:
    src = _cli_source(target)
    emb.write(src)
    _ann_read.emb = finalfusion.load_finalfusion(src)  # type: ignore[attr-defined]
    _cli_or_raise("index", "build", "--quiet", "--backend", "hnswlib", str(src), str(target))


def _api_ann_save(target: Path, emb: Embeddings) -> None:
    _ann_read.emb = emb  # type: ignore[attr-defined]
    _ann_save(target, emb)


def _write_fifu(path: Path, emb: Embeddings) -> None:
    emb.write(path)


def _file_reader(
    name: str, fuzz_reader: str, writer: Callable[[Any, Embeddings], Any], filename: str, load: Callable[[Path], Any], gzip: bool = False
) -> Surface:
    """A reader of a named file, whose valid input ``writer`` writes (also used for its gzip item)."""
    return Surface(name, "file-reader", fuzz_reader, _written(writer, filename), load, gzip=gzip, extra={"writer": writer})


def _save_gensim(path: Path, emb: Embeddings) -> None:
    emb.save(path)


def _gensim_aside_dir(d: Path) -> Path:
    """A gensim ``kv.save(fname, sep_limit=0)`` with its vectors stored aside in ``e.kv.vectors.npy`` (read by convention)."""
    small_embeddings().to_gensim().save(str(d / "e.kv"), sep_limit=0)
    return d


BACKENDS = fuzz.ann_available()

SURFACES: list[Surface] = [
    # readers of a named file
    _file_reader("finalfusion", "finalfusion", _write_fifu, "e.fifu", finalfusion.load_finalfusion),
    _file_reader("word2vec", "word2vec", finalfusion.write_word2vec, "e.bin", finalfusion.load_word2vec, gzip=True),
    _file_reader("text", "text", finalfusion.write_text, "e.txt", finalfusion.load_text, gzip=True),
    _file_reader("text-dims", "text_dims", finalfusion.write_text_dims, "e.vec", finalfusion.load_text_dims, gzip=True),
    _file_reader("fasttext", "fasttext", finalfusion.write_fasttext, "e.bin", finalfusion.load_fasttext),
    _file_reader("gguf", "gguf", finalfusion.write_gguf, "e.gguf", finalfusion.load_gguf),
    _file_reader("load", "load", finalfusion.write_word2vec, "e.w2v", finalfusion.load, gzip=True),
    _file_reader("load-finalfusion", "load", _write_fifu, "e.fifu", finalfusion.load, gzip=True),
    _file_reader("gensim-pickle", "gensim-pickle", _save_gensim, "e.kv", Embeddings.load),
    # readers of a directory (and the files they open by convention)
    Surface("model2vec", "dir-reader", "model-dir", _model2vec_dir, finalfusion.load, conventional=("model.safetensors", "tokenizer.json", "config.json")),
    Surface("tekken", "dir-reader", "model-dir", _tekken_dir, finalfusion.load, conventional=("tekken.json", "consolidated.safetensors"), native="tokenizers"),
    Surface(
        "wordllama",
        "dir-reader",
        "model-dir",
        _wordllama_dir,
        # the weights directory, whose one *.safetensors is found by convention (a weights file named directly is the
        # user's: a named FIFO is a stream and a named link is followed, items 1 and 2)
        lambda p: finalfusion.load(p / "weights"),
        conventional=("weights/custom_16.safetensors", "tokenizers/custom_tokenizer_config.json"),
        native="tokenizers",
    ),
    Surface("gensim-aside", "dir-reader", "gensim-pickle", _gensim_aside_dir, lambda p: Embeddings.load(p / "e.kv"), conventional=("e.kv.vectors.npy",)),
    # readers of a directory at a URL (docs/remote.md): the files a directory holds by convention are asked for by name
    Surface("model2vec-url", "url-dir-reader", "model-dir", _model2vec_dir, _at_url(""), conventional=("model.safetensors", "tokenizer.json", "config.json")),
    Surface(
        "sharded-url",
        "url-dir-reader",
        "model-dir",
        _sharded_dir,
        _at_url(""),
        conventional=("model.safetensors.index.json", "model-00001-of-00001.safetensors", "tokenizer.json", "config.json"),
    ),
    Surface(
        "wordllama-url",
        "url-dir-reader",
        "model-dir",
        _wordllama_dir,
        _at_url("weights/custom_16.safetensors"),  # a directory at a URL is not listed: the weights are named
        conventional=("weights/custom_16.safetensors", "tokenizers/custom_tokenizer_config.json"),
        native="tokenizers",
    ),
    # readers of a file at a URL (docs/remote.md): the file ``make`` writes, served by nginx or by the test servers of
    # tests/_servers.py, read through its URL; rows and all (mmap=False) or leaving the rows at the server (mmap=True)
    *(
        Surface(
            f"finalfusion-url{'-mmap' if mmap else ''}",
            "url-file-reader",
            "remote-http",
            _written(_write_fifu, "e.fifu"),
            functools.partial(finalfusion.load_finalfusion, mmap=mmap),
            extra={"writer": _write_fifu, "local": functools.partial(finalfusion.load_finalfusion, mmap=mmap)},
        )
        for mmap in (False, True)
    ),
    *(Surface(f"ann-{b}", "dir-reader", "ann-index", _ann_dir(b), _ann_load, conventional=("ann.json", "index.bin"), native=b, words=False) for b in BACKENDS),
    # writers of a file
    Surface("write-finalfusion", "file-writer", "finalfusion", write=_write_fifu, read=finalfusion.load_finalfusion),
    Surface("write-word2vec", "file-writer", "word2vec", write=finalfusion.write_word2vec, read=finalfusion.load_word2vec),
    Surface("write-text", "file-writer", "text", write=finalfusion.write_text, read=finalfusion.load_text),
    Surface("write-text-dims", "file-writer", "text_dims", write=finalfusion.write_text_dims, read=finalfusion.load_text_dims),
    Surface("write-fasttext", "file-writer", "fasttext", write=finalfusion.write_fasttext, read=finalfusion.load_fasttext),
    Surface("write-gguf", "file-writer", "gguf", write=finalfusion.write_gguf, read=finalfusion.load_gguf),
    Surface("write-gensim", "file-writer", "gensim-pickle", write=_save_gensim, read=Embeddings.load),
    Surface(
        "cli-convert",
        "file-writer",
        "cli",
        write=_cli_convert,
        read=finalfusion.load_finalfusion,
        extra={"suffix": ".fifu", "own": _cli_over_itself("convert", "--quiet", "{}", "{}")},
    ),
    # writers of a directory
    Surface("write-model2vec", "dir-writer", "model-dir", write=finalfusion.write_model2vec, read=finalfusion.load, extra={"owned": ("model.safetensors",)}),
    Surface("ann-save", "dir-writer", "ann-index", write=_api_ann_save, read=_ann_read, words=False, extra={"owned": ("ann.json", "index.bin")}),
    Surface(
        "cli-index-build",
        "dir-writer",
        "cli",
        write=_index_build,
        read=_ann_read,
        words=False,
        extra={
            "owned": ("ann.json", "index.bin"),
            "own": _cli_over_itself("index", "build", "--quiet", "--backend", "hnswlib", "{}", "{}"),
            "protected": _cli_source,
            "read_protected": finalfusion.load_finalfusion,
        },
    ),
]


#: Public surfaces left out of the table, with the reason (each is a gap to close).
NOT_IN_TABLE = {"write-floret": "writes only embeddings with a floret vocabulary; the table's writers take one word-vocabulary input"}


#: Packages outside the test extra a surface's valid input (``make``) or its writer needs: without them its rows skip (the
#: ``ann-*`` readers are in the table only for the backends installed).
NEEDS: dict[str, tuple[str, ...]] = {
    "tekken": ("safetensors",),
    "gensim-pickle": ("gensim",),
    "gensim-aside": ("gensim",),
    "write-gensim": ("gensim",),
    "wordllama": ("tokenizers", "safetensors"),
    "ann-save": ("hnswlib",),
    "cli-index-build": ("hnswlib",),
    "model2vec-url": ("fsspec", "aiohttp", "nginx"),
    "sharded-url": ("fsspec", "aiohttp", "nginx"),
    "wordllama-url": ("fsspec", "aiohttp", "nginx", "tokenizers", "safetensors"),
    "finalfusion-url": ("fsspec", "aiohttp", "nginx"),
    "finalfusion-url-mmap": ("fsspec", "aiohttp", "nginx"),
}


def _installed(lib: str) -> bool:
    if lib == "nginx":  # a program: the web server the directories at a URL are served from (.ci/run installs it)
        return shutil.which("nginx") is not None or os.path.exists("/usr/sbin/nginx")
    return importlib.util.find_spec(lib) is not None


def needs(surface: Surface) -> list[pytest.MarkDecorator]:
    """A skip mark naming the packages ``surface`` needs that are not installed (none when all are)."""
    missing = [lib for lib in NEEDS.get(surface.name, ()) if not _installed(lib)]
    return [pytest.mark.skip(reason=f"{surface.name} needs {', '.join(missing)} (not installed)")] if missing else []


def of(*kinds: str, where: Callable[[Surface], bool] = lambda s: True) -> list[Any]:
    return [pytest.param(s, id=s.name, marks=needs(s)) for s in SURFACES if s.kind in kinds and where(s)]


def conventional_files(*extra: str, kinds: tuple[str, ...] = ("dir-reader",)) -> list[Any]:
    """(surface, conventional file[, extra]) for every directory reader (of the ``kinds``: at a URL too, for the items that apply there)."""
    rows = []
    for s in SURFACES:
        if s.kind in kinds:
            for name in s.conventional:
                for e in extra or (None,):
                    rows.append(pytest.param(s, name, e, id=f"{s.name}-{name.rsplit('/', 1)[-1]}" + (f"-{e}" if e else ""), marks=needs(s)))
    return rows


# -- a file at a URL: served where the test says -----------------------------------------------------------------------------

server, served = nginx_fixtures()  # nginx on the loopback interface for the module, its log cleared for each test


def _at_nginx(surface: Surface, served: Nginx, d: Path, data: bytes | None = None) -> tuple[Path, str]:
    """The surface's valid input (or ``data`` in its place) in a directory of its own that nginx serves, and its URL."""
    assert surface.make is not None
    sub = served.root / d.name
    sub.mkdir()
    path = surface.make(sub)
    if data is not None:
        path.write_bytes(data)
    return path, served.url(f"{d.name}/{path.name}")


def _url_load(surface: Surface, url: str) -> Callable[[], Any]:
    return lambda: surface.load(url)  # type: ignore[arg-type,misc]


@contextlib.contextmanager
def _under_names(surface: Surface, tmp_path: Path, good: str) -> Iterator[str]:
    """The surface's valid input served under the names of tests/_servers.py's ``names`` server, whose name ``good`` must
    read as the local file does (checked here); the server's URL up to the name."""
    assert surface.make is not None
    path = surface.make(tmp_path)
    words = repr(finalfusion.load_finalfusion(path).vocab.words)
    with names(path.read_bytes()) as base:
        assert isolated(lambda: repr(surface.load(f"{base}/{good}").vocab.words)) == {"status": "ok", "value": repr(words)}  # type: ignore[arg-type,misc]
        yield base


def _answer(emb: Embeddings) -> str:
    """What embeddings hold, as one digest: the words, every row (fetched, for rows at a server) and the norms."""
    h = hashlib.sha1("\n".join(emb.vocab.words).encode("utf-8", "surrogatepass"))
    h.update(np.ascontiguousarray(np.asarray(emb.storage)).tobytes())
    h.update(b"" if emb.norms is None else np.asarray(emb.norms).tobytes())
    return h.hexdigest()


def _same_outcome(local: dict[str, Any], remote: dict[str, Any]) -> bool:
    """The same answer, or the same error class (a URL's bytes are judged as a local file's)."""
    if local["status"] == "ok":
        return remote == local
    return local["status"] == "raised" and refused(remote) and remote["type"] == local["type"]


def test_every_surface_is_in_the_table() -> None:
    # the checklist applies to every public reader and writer: a new one is added to SURFACES
    table = {s.name for s in SURFACES}
    assert {"finalfusion", "word2vec", "text", "text-dims", "model2vec", "tekken", "wordllama"} <= table
    assert {"finalfusion-url", "finalfusion-url-mmap", "model2vec-url", "sharded-url", "wordllama-url"} <= table  # readers of URLs
    assert {f"ann-{b}" for b in BACKENDS} <= table
    writers = {f"write-{n[6:].replace('_', '-')}" for n in dir(finalfusion) if n.startswith("write_")}
    assert writers - table <= set(NOT_IN_TABLE)


# -- item 1: special files (FIFO, device, directory) ---------------------------------------------------


@pytest.mark.parametrize(("surface", "name", "special"), conventional_files("fifo", "directory", "device"))
def test_special_file_in_a_directory_is_refused_or_ignored(surface: Surface, name: str, special: str, tmp_path: Path) -> None:
    assert surface.make is not None
    assert surface.load is not None
    root = surface.make(tmp_path)
    path = root / name
    path.unlink()
    if special == "fifo":
        os.mkfifo(path)
    elif special == "directory":
        path.mkdir()
    else:
        if os.geteuid() != 0:
            pytest.skip("making a device node needs root")
        os.mknod(path, 0o600 | stat.S_IFCHR, os.makedev(1, 5))  # a /dev/zero
    out = isolated(lambda: surface.load(root))  # type: ignore[misc]
    assert out["status"] == "ok" or refused(out), out  # refused, or (an optional file) never opened: no hang, no crash


@pytest.mark.parametrize("surface", of("file-reader"))
def test_named_special_files(surface: Surface, tmp_path: Path) -> None:
    # a named FIFO is a stream (read as it arrives), a named directory or an empty device is refused
    assert surface.make is not None
    assert surface.load is not None
    good = surface.make(tmp_path)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    data = good.read_bytes()

    def through_fifo() -> Any:
        def feed() -> None:
            with open(fifo, "wb") as f:
                f.write(data)

        threading.Thread(target=feed, daemon=True).start()
        return surface.load(fifo).vocab.words == surface.load(good).vocab.words  # type: ignore[misc]

    assert isolated(through_fifo) == {"status": "ok", "value": "True"}
    assert refused(isolated(lambda: surface.load(tmp_path)))  # type: ignore[misc]
    assert refused(isolated(lambda: surface.load(Path(os.devnull))))  # type: ignore[misc]
    assert refused(isolated(lambda: surface.load(Path("/dev/zero"))))  # type: ignore[misc]  # endless: refused by a bound


@pytest.mark.parametrize("surface", of("url-file-reader"))
def test_a_url_that_names_no_file_is_refused_never_read_without_end(surface: Surface, tmp_path: Path) -> None:
    # item 1 at a URL: what a name holds is the server's business (no FIFO or device there); what stands for them is an
    # answer of no known size -- a body without Content-Length that never ends, a server's /dev/zero -- refused before a
    # byte of it is read (range requests need the size), and a name with nothing behind it (404): FileNotFoundError
    with _under_names(surface, tmp_path, "file.fifu") as base:
        out = isolated(_url_load(surface, base + "/endless.fifu"))
        assert refused(out), out
        assert "does not tell the file's size" in out["msg"], out
        out = isolated(_url_load(surface, base + "/nothing.fifu"))
        assert out["type"] == "FileNotFoundError", out


# -- item 2: links ------------------------------------------------------------------------------------


def _atime_is_kept(path: Path) -> bool:
    os.utime(path, (0, path.stat().st_mtime))
    path.read_bytes()
    kept = path.stat().st_atime > 0
    os.utime(path, (0, path.stat().st_mtime))
    return kept


@pytest.mark.parametrize(("surface", "name", "how"), conventional_files("relative", "absolute"))
def test_link_out_of_a_directory_is_not_followed(surface: Surface, name: str, how: str, tmp_path: Path) -> None:
    assert surface.make is not None
    assert surface.load is not None
    (tmp_path / "in").mkdir()
    root = surface.make(tmp_path / "in")
    outside = tmp_path / "outside" / name.rsplit("/", 1)[-1]
    outside.parent.mkdir()
    shutil.move(root / name, outside)
    if not _atime_is_kept(outside):
        pytest.skip("this file system does not record reads (atime)")
    target = os.path.relpath(outside, (root / name).parent) if how == "relative" else str(outside)
    os.symlink(target, root / name)
    out = isolated(lambda: surface.load(root))  # type: ignore[misc]
    assert out["status"] == "ok" or refused(out), out
    assert outside.stat().st_atime == 0, f"{name}: the file behind the link, outside the directory, was read"


@pytest.mark.parametrize("surface", of("file-reader"))
def test_named_link_is_followed(surface: Surface, tmp_path: Path) -> None:
    # a link the user names is the user's choice
    assert surface.make is not None
    assert surface.load is not None
    good = surface.make(tmp_path)
    os.symlink(good, tmp_path / "link")
    assert surface.load(tmp_path / "link").vocab.words == surface.load(good).vocab.words


@pytest.mark.parametrize("surface", of("url-file-reader"))
def test_a_redirect_is_followed_as_a_named_link_is(surface: Surface, tmp_path: Path) -> None:
    # item 2 at a URL: a redirect is the server's choice as a link the user names is the user's, and is followed (by
    # aiohttp's rules: http(s) only, at most 10); a loop is an OSError at once, a redirect to a local file (file://) is
    # refused -- a server never makes the library open a path
    with _under_names(surface, tmp_path, "moved.fifu") as base:
        for name in ("loop.fifu", "local.fifu"):
            out = isolated(_url_load(surface, f"{base}/{name}"))
            assert refused(out), (name, out)
            assert "redirect" in out["msg"].lower(), (name, out)


@pytest.mark.parametrize("surface", of("dir-writer"))
def test_writer_never_writes_through_a_planted_link(surface: Surface, tmp_path: Path) -> None:
    assert surface.write is not None
    target = tmp_path / "out"
    surface.write(target, small_embeddings())
    victim = tmp_path / "victim"
    victim.write_bytes(b"not the library's")
    for name in surface.extra["owned"]:
        (target / name).unlink()
        os.symlink(victim, target / name)
    with contextlib.suppress(FinalfusionError, OSError):
        surface.write(target, small_embeddings(dims=6))
    assert victim.read_bytes() == b"not the library's"


# -- item 3: sizes checked before reads -----------------------------------------------------------------


@pytest.mark.parametrize(("surface", "name", "extra"), conventional_files(kinds=("dir-reader", "url-dir-reader")))
def test_huge_sparse_file_in_a_directory_is_refused_by_its_size(surface: Surface, name: str, extra: None, tmp_path: Path) -> None:
    assert surface.make is not None
    assert surface.load is not None
    root = surface.make(tmp_path)
    head = (root / name).read_bytes()[:4096]
    with open(root / name, "wb") as f:
        f.write(head)
        f.truncate(3 << 30)  # 3 GiB, 4 KiB on disk
    out = isolated(lambda: surface.load(root))  # type: ignore[misc]
    assert refused(out), out


@pytest.mark.parametrize("surface", of("url-file-reader"))
def test_a_size_the_server_announces_is_never_allocated(surface: Surface, tmp_path: Path) -> None:
    # item 3 at a URL: the server gives a small file 3 GiB (HEAD and every Content-Range); nothing is sized from the claim
    # (the child has 1 GiB to spare): the first answer shorter than its range ends the load with an OSError
    assert surface.make is not None
    with names(surface.make(tmp_path).read_bytes()) as base:
        out = isolated(_url_load(surface, base + "/huge.fifu"))
    assert refused(out), out
    assert out["type"] in ("OSError", "ServerRefused"), out


@pytest.mark.parametrize("chunk", ["vocab", "storage"])
@pytest.mark.parametrize("surface", of("url-file-reader"))
def test_a_chunk_claiming_more_than_the_url_holds_is_refused_before_it_is_fetched(surface: Surface, chunk: str, served: Nginx, tmp_path: Path) -> None:
    # item 3 at a URL: a chunk whose frame declares more bytes than the file holds is the local load's FormatError, found
    # from the size the server told before the chunk's bytes are asked for (a 4 MB file: at most its first block and the
    # 64 KiB at each end a pickle reference digests are fetched)
    local = tmp_path / "e.fifu"
    surface.extra["writer"](local, small_embeddings([f"w{i}" for i in range(2000)], dims=500))
    data = bytearray(local.read_bytes())
    offset = dict((("vocab", "storage")[k], at) for k, (at, _) in enumerate(finalfusion.io.read_chunks(bytes(data))[1][:2]))[chunk]
    data[offset + 4 : offset + 12] = (len(data)).to_bytes(8, "little")
    local.write_bytes(data)
    _, url = _at_nginx(surface, served, tmp_path, bytes(data))
    want = isolated(lambda: surface.extra["local"](local))
    assert want.get("type") == "Truncated", want
    served.clear()
    out = isolated(_url_load(surface, url))
    assert out.get("type") == want["type"], out
    sent = sum(r.sent for r in served.requests() if r.method == "GET")
    assert sent <= (1 << 20) + (128 << 10), f"{sent} of {len(data)} bytes fetched"


@pytest.mark.parametrize("via", ["api", "cli"])
def test_a_named_tokenizer_file_is_read_with_a_bound(via: str, tmp_path: Path) -> None:
    # --tokenizer PATH / tokenizer=PATH: a file the user names beside the weights, checked by its size like the others
    pytest.importorskip("tokenizers")  # the fuzzer's model directories are trained and written with tokenizers and safetensors
    pytest.importorskip("safetensors")
    files = dict(fuzz.model_layouts()["model2vec-plain-wordpiece"])
    weights = tmp_path / "model.safetensors"
    weights.write_bytes(files["d/model.safetensors"])
    tokenizer = tmp_path / "tok.json"
    with open(tokenizer, "wb") as f:
        f.write(b'{"model": ')
        f.truncate(3 << 30)

    def load() -> Any:
        if via == "api":
            return finalfusion.load(weights, tokenizer=str(tokenizer))
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            status = _cli("info", "--tokenizer", str(tokenizer), str(weights))
        # a --tokenizer file that is not a tokenizer this library reads is a wrong option value: status 2, one line naming the
        # option and the bound (docs/cli.md, "Input options"), never a MemoryError
        said = err.getvalue()
        if status != 2 or said.count("\n") != 1 or not all(part in said for part in ("--tokenizer", "MAX_TOKENIZER_BYTES")):
            raise AssertionError(f"status {status}: {said}")
        raise FinalfusionError(err.getvalue())

    out = isolated(load)
    assert refused(out), out


@pytest.mark.parametrize("surface", of("file-reader", where=lambda s: s.gzip))
def test_gzip_expansion_is_bounded(surface: Surface, tmp_path: Path) -> None:
    assert surface.make is not None
    assert surface.load is not None
    # rows of zeros compress about 100:1 (the bound allows 1 MiB of slack: the input must expand well past it)
    plain = tmp_path / "big"
    surface.extra["writer"](plain, Embeddings(NdArray(np.zeros((20_000, 50), dtype=np.float32)), SimpleVocab([f"w{i}" for i in range(20_000)])))
    packed = tmp_path / "big.gz"
    packed.write_bytes(gzip.compress(plain.read_bytes(), 9))
    assert surface.load(packed).vocab.words == surface.load(plain).vocab.words

    def bounded() -> Any:
        import finalfusion.limits

        finalfusion.limits.MAX_GZIP_EXPANSION = 1  # any real compression now expands past the bound
        return surface.load(packed)  # type: ignore[misc]

    out = isolated(bounded)
    assert refused(out), out
    assert "gzip" in out["msg"].lower(), out


# -- item 4: writing over its own input -------------------------------------------------------------------


def _digest(path: Path) -> dict[str, str]:
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    return {str(p.relative_to(path.parent)): hashlib.sha1(p.read_bytes()).hexdigest() for p in files}


@pytest.mark.parametrize("surface", of("file-writer", "dir-writer"))
def test_writing_over_its_own_input(surface: Surface, tmp_path: Path) -> None:
    # refused with the input unchanged, or replaced by the same embeddings: never another content
    assert surface.write is not None
    assert surface.read is not None
    target = tmp_path / ("own" + surface.extra.get("suffix", ""))
    surface.write(target, small_embeddings())
    own = surface.extra.get("own", _write_over_itself)
    protected, read = surface.extra.get("protected", lambda t: t)(target), surface.extra.get("read_protected", surface.read)
    first = read(protected)
    before = _digest(protected)
    try:
        own(surface, target)
    except (FinalfusionError, OSError):
        assert _digest(protected) == before
        return
    # the command line knows its input's path: it refuses (an API writer may replace a file it read, see "Saving over
    # memory-mapped files", when the content stays the same)
    assert not surface.name.startswith("cli-"), "a command wrote over its own input"
    again = read(protected)
    if isinstance(first, Embeddings):
        assert again.vocab.words == first.vocab.words
        np.testing.assert_allclose(np.asarray(again.storage), np.asarray(first.storage), rtol=1e-6)
    else:  # an index: the same answers
        queries = np.asarray(fuzz.ann_embeddings().storage[:3]) if first.dims == fuzz.ANN_DIMS else np.ones((1, first.dims), np.float32)
        np.testing.assert_array_equal(again.search(queries, 3)[0], first.search(queries, 3)[0])


def _write_over_itself(surface: Surface, target: Path) -> None:
    """Read what ``target`` holds and write it back to ``target`` with the same writer (``AnnIndex.save`` for an index)."""
    assert surface.read is not None
    assert surface.write is not None
    loaded = surface.read(target)
    if isinstance(loaded, Embeddings):
        surface.write(target, loaded)
    else:
        loaded.save(target)


def test_cli_metadata_never_overwrites_its_input(tmp_path: Path) -> None:
    path = tmp_path / "e.fifu"
    small_embeddings().write(path)
    before = path.read_bytes()
    for out in (path, tmp_path / "." / "e.fifu"):
        assert _cli("metadata", str(path), str(out)) != 0
        assert path.read_bytes() == before
    other = tmp_path / "other.fifu"
    small_embeddings().write(other)
    kept = other.read_bytes()
    _cli("metadata", str(path), str(other))  # no metadata: nothing to write, the file named as OUT is not emptied
    assert other.read_bytes() == kept


@pytest.mark.parametrize("surface", of("url-file-reader"))
def test_a_url_input_is_never_written_over(surface: Surface, served: Nginx, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # item 4 at a URL: no writer writes to a URL (docs/remote.md), so embeddings read from one cannot be written back over it:
    # the API refuses with a ValueError, the command line refuses a URL as OUT and --set/--remove of a URL (which rewrite
    # FILE itself), each before anything is fetched; nothing is written, not even a local file named like the URL
    path, url = _at_nginx(surface, served, tmp_path)
    before = path.read_bytes()
    monkeypatch.chdir(tmp_path)
    emb = surface.load(url)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="a URL is read, never written"):
        emb.write(url)
    toml = tmp_path / "m.toml"
    toml.write_text('lang = "de"\n', encoding="utf-8")
    served.clear()
    for argv in (("convert", "--quiet", url, url), ("metadata", "--set", str(toml), url), ("metadata", "--remove", url)):
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            assert _cli(*argv) != 0, argv
        assert "a URL is read, never written" in err.getvalue(), (argv, err.getvalue())
    assert served.requests() == [], "a command fetched its input before refusing to write it"
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["m.toml"]


# -- item 5: foreign files in a target directory -------------------------------------------------------------


@pytest.mark.parametrize("case", ["user-dir", "fake-header", "library-plus-extra"])
@pytest.mark.parametrize("surface", of("dir-writer"))
def test_foreign_files_in_a_target_directory(surface: Surface, case: str, tmp_path: Path) -> None:
    assert surface.write is not None
    target = tmp_path / "out"
    if case == "library-plus-extra":
        surface.write(target, small_embeddings())
    else:
        target.mkdir()
        if case == "fake-header":
            (target / surface.extra["owned"][0]).write_bytes(b"{}")
    (target / "notes.txt").write_bytes(b"the user's")
    with pytest.raises((FinalfusionError, OSError), match=r"notes\.txt"):
        surface.write(target, small_embeddings(dims=6))
    assert (target / "notes.txt").read_bytes() == b"the user's"


@pytest.mark.parametrize("surface", of("dir-writer"))
def test_a_directory_the_library_wrote_is_replaced(surface: Surface, tmp_path: Path) -> None:
    assert surface.write is not None
    assert surface.read is not None
    target, fresh = tmp_path / "out", tmp_path / "fresh"
    surface.write(target, small_embeddings())
    surface.write(target, small_embeddings(WORDS[:30]))
    got = surface.read(target)
    surface.write(fresh, small_embeddings(WORDS[:30]))
    want = surface.read(fresh)
    assert (got.vocab.words if hasattr(got, "vocab") else len(got)) == (want.vocab.words if hasattr(want, "vocab") else len(want))


@pytest.mark.parametrize("stale", ["model.safetensors.index.json", "old.safetensors"])
def test_write_model2vec_leaves_nothing_stale(stale: str, tmp_path: Path) -> None:
    save_file = pytest.importorskip("safetensors.numpy").save_file

    target = tmp_path / "m"
    finalfusion.write_model2vec(target, small_embeddings())
    if stale.endswith(".json"):
        save_file({"embeddings": np.zeros((41, 8), dtype=np.float32)}, str(target / "old-00001.safetensors"))
        (target / stale).write_text(json.dumps({"weight_map": {"embeddings": "old-00001.safetensors"}}))
    else:
        save_file({"embeddings": np.zeros((41, 8), dtype=np.float32)}, str(target / stale))
    new = small_embeddings(dims=8)
    try:
        finalfusion.write_model2vec(target, Embeddings(NdArray(np.asarray(new.storage) * 2), SimpleVocab(WORDS)))
    except (FinalfusionError, OSError):
        return  # refused: the foreign file is named, nothing written
    got = finalfusion.load(target, normalize=False)
    assert np.abs(np.asarray(got.storage)).sum() > 0, "the loader picked up the stale weights"


@pytest.mark.parametrize("surface", of("file-writer"))
def test_file_writer_refuses_a_directory(surface: Surface, tmp_path: Path) -> None:
    assert surface.write is not None
    target = tmp_path / "dir"
    target.mkdir()
    (target / "keep").write_bytes(b"x")
    with pytest.raises((FinalfusionError, OSError)):
        surface.write(target, small_embeddings())
    assert (target / "keep").read_bytes() == b"x"


# -- item 6: crafted bytes for any native library ---------------------------------------------------------


@pytest.mark.parametrize("surface", of("dir-reader", where=lambda s: s.native is not None and s.name.startswith("ann-")))
def test_crafted_index_file_never_kills_the_process(surface: Surface) -> None:
    # the audit's case: a few bytes changed and the header's size and digest recomputed, as anyone can
    backend = surface.native
    files = fuzz.ann_saved(backend)
    worker = fuzz.Worker(1024, 1000)
    try:
        bad = []
        for seed in range(40):
            index = fuzz._mutate_backend_file(random.Random(seed), files["index.bin"])
            header = json.loads(files["ann.json"])
            size, digest = fuzz._edge_digest_of(index)
            header["index_file"] = {"size": size, "digest": digest}
            bundle = fuzz.pack_dir([(fuzz.D_FILE, "d/ann.json", json.dumps(header).encode()), (fuzz.D_FILE, "d/index.bin", index)])
            out = worker.run("ann-index", bundle, 20.0)
            if out["status"] not in ("ok", "error"):
                bad.append((seed, out["status"], out.get("type"), out.get("msg", "")[:120]))
    finally:
        worker.stop()
    assert not bad, bad


@pytest.mark.parametrize("surface", of("url-file-reader"))
def test_crafted_bytes_at_a_url_end_as_the_local_load_does(surface: Surface, served: Nginx, tmp_path: Path) -> None:
    # item 6 at a URL: the .fifu reader parses its bytes itself (no native library); files with a few bytes changed end
    # the same way through the URL as from the local file -- the same vectors or the same error class, never a hang or
    # a crash (fuzz/fuzz.py's remote-http reader does the same with hostile servers and the structure-aware generator)
    assert surface.make is not None
    good = surface.make(tmp_path).read_bytes()
    outcomes = set()
    for seed in range(24):
        rng = random.Random(seed)
        data = bytearray(good)
        for _ in range(rng.randint(1, 4)):
            data[rng.randrange(len(data))] = rng.randrange(256)
        local = tmp_path / f"crafted-{seed}.fifu"
        local.write_bytes(data)
        _, url = _at_nginx(surface, served, tmp_path / f"{tmp_path.name}-{seed}", bytes(data))
        want = isolated(lambda: _answer(surface.extra["local"](local)))  # noqa: B023 - run at once
        got = isolated(lambda: _answer(surface.load(url)))  # type: ignore[arg-type,misc]  # noqa: B023
        assert _same_outcome(want, got), (seed, want, got)
        outcomes.add(want["status"])
    assert outcomes == {"ok", "raised"}, "the crafted files should include ones that load and ones that do not"


@pytest.mark.parametrize("reader", ["tokenizer-json", "tekken"])
def test_crafted_tokenizer_never_kills_the_process(reader: str) -> None:
    # every surface whose native library is tokenizers reads its documents through the same checks: once per document kind
    assert any(s.native == "tokenizers" for s in SURFACES)
    generator = fuzz.GENERATORS[fuzz.generators_for(reader)[0]][1]
    worker = fuzz.Worker(1024, 1000)
    try:
        bad = []
        for seed in range(40):
            out = worker.run(reader, generator(random.Random(seed), reader), 20.0)
            if out["status"] not in ("ok", "error"):
                bad.append((seed, out["status"], out.get("type"), out.get("msg", "")[:120]))
    finally:
        worker.stop()
    assert not bad, bad


#: A 300-byte tokenizer.json that makes ``tokenizers`` abort the process (a panic that cannot unwind) at the first lookup:
#: a BPE model with ``continuing_subword_prefix`` "#" whose merge joins "a" and "é" (found by hand from issue 33's description).
ABORTING_TOKENIZER = {
    "version": "1.0",
    "truncation": None,
    "padding": None,
    "added_tokens": [],
    "normalizer": None,
    "pre_tokenizer": None,
    "post_processor": None,
    "decoder": None,
    "model": {
        "type": "BPE",
        "dropout": None,
        "unk_token": None,
        "continuing_subword_prefix": "#",
        "end_of_word_suffix": None,
        "fuse_unk": False,
        "byte_fallback": False,
        "vocab": {"a": 0, "\u00e9": 1, "#\u00e9": 2, "a\u00e9": 3},
        "merges": ["a \u00e9"],
    },
}


@pytest.mark.parametrize(
    ("surface", "name", "extra"),
    [p for p in conventional_files(kinds=("dir-reader", "url-dir-reader")) if p.values[1].endswith(("tokenizer.json", "tokenizer_config.json"))],
)
def test_a_tokenizer_that_aborts_tokenizers_is_refused(surface: Surface, name: str, extra: None, tmp_path: Path) -> None:
    assert surface.make is not None
    assert surface.load is not None
    root = surface.make(tmp_path)
    (root / name).write_text(json.dumps(ABORTING_TOKENIZER), encoding="utf-8")

    def load_and_encode() -> Any:
        emb = surface.load(root)  # type: ignore[misc]
        return emb.encode(["a\u00e9", "\u00e9a"]).shape

    out = isolated(load_and_encode)
    assert out["status"] == "ok" or refused(out), out


# -- item 7: Unicode edge cases ---------------------------------------------------------------------------------

ODD_WORDS = ["plain", "a\xa0b", "c\u2028d", "e\u3000f", "g\x00h", "i\ud800j"]


@pytest.mark.parametrize("word", ODD_WORDS[1:], ids=["nbsp", "line-separator", "ideographic-space", "nul", "surrogate"])
@pytest.mark.parametrize("surface", of("file-writer", "dir-writer", where=lambda s: s.words))
def test_odd_words_round_trip_or_are_refused_before_writing(surface: Surface, word: str, tmp_path: Path) -> None:
    assert surface.write is not None
    assert surface.read is not None
    target = tmp_path / ("out" + surface.extra.get("suffix", ""))
    emb = small_embeddings(["plain", word, "other"])
    try:
        surface.write(target, emb)
    except (FinalfusionError, ValueError, OSError):
        assert not target.exists(), "refused, but something was written"
        return
    got = surface.read(target)
    if surface.name == "write-model2vec":  # a model vocabulary: each word encodes to its own row
        pytest.importorskip("tokenizers")  # encoding a model's words splits them with its tokenizer
        for w in ("plain", word, "other"):
            np.testing.assert_allclose(got.encode([w])[0], emb.encode([w])[0], rtol=1e-5, atol=1e-6)
    else:
        assert list(got.vocab.words) == list(emb.vocab.words)


@pytest.mark.parametrize("word", ODD_WORDS[1:], ids=["nbsp", "line-separator", "ideographic-space", "nul", "surrogate"])
@pytest.mark.parametrize("surface", of("url-file-reader"))
def test_odd_words_at_a_url_come_back_as_the_local_load(surface: Surface, word: str, served: Nginx, tmp_path: Path) -> None:
    # item 7 at a URL: a .fifu holding the word, served over HTTP, gives what the local file gives -- the same words and
    # the word's row. The writer refuses a lone surrogate (UTF-8 cannot hold one), so that file is written with a
    # placeholder of the same length and its bytes replaced by the surrogate's (ED A0 80): the reader's answer to bytes
    # that are not UTF-8 must be the same through the URL
    written = word if word != "i\ud800j" else "iQQQj"
    local = tmp_path / "e.fifu"
    surface.extra["writer"](local, small_embeddings(["plain", written, "other"]))
    data = local.read_bytes()
    if written != word:
        assert data.count(b"iQQQj") == 1
        data = data.replace(b"iQQQj", b"i\xed\xa0\x80j")
        local.write_bytes(data)
    _, url = _at_nginx(surface, served, tmp_path, data)

    def answer(load: Callable[[], Embeddings]) -> dict[str, Any]:
        def run() -> str:
            emb = load()
            return repr((list(emb.vocab.words), hashlib.sha1(emb[emb.vocab.words[1]].tobytes()).hexdigest()))

        return isolated(run)

    want = answer(lambda: surface.extra["local"](local))
    got = answer(lambda: surface.load(url))  # type: ignore[arg-type,misc]
    assert _same_outcome(want, got), (want, got)
    if written == word:
        assert want["status"] == "ok", want
        assert ast.literal_eval(ast.literal_eval(want["value"]))[0][1] == word, want  # the word itself came back


@pytest.mark.parametrize("surface", of("dir-reader", "url-dir-reader", where=lambda s: s.words))
def test_a_lone_surrogate_drops_only_its_word(surface: Surface, tmp_path: Path) -> None:
    pytest.importorskip("tokenizers")  # encoding a model's sentence splits it with its tokenizer
    assert surface.make is not None
    assert surface.load is not None
    emb = surface.load(surface.make(tmp_path))
    known = next(w for w in ("house", "the", "w0", "a") if emb.encode([w]).any())
    np.testing.assert_allclose(emb.encode([f"{known} \ud800"])[0], emb.encode([known])[0], rtol=1e-6)


# -- item 8: a generator in the fuzzer --------------------------------------------------------------------------


@pytest.mark.parametrize("surface", of("file-reader", "dir-reader", "url-dir-reader", "url-file-reader", "file-writer", "dir-writer"))
def test_the_fuzzer_has_a_generator_for_the_surface(surface: Surface) -> None:
    if surface.fuzz_reader in fuzz.UNAVAILABLE:
        pytest.skip(f"fuzz reader {surface.fuzz_reader}: {fuzz.UNAVAILABLE[surface.fuzz_reader]}")
    assert surface.fuzz_reader in fuzz.READERS
    assert fuzz.generators_for(surface.fuzz_reader), f"no structure-aware generator feeds {surface.fuzz_reader}"


def test_children_are_bounded() -> None:
    # the guard itself: a hang is a timeout and a crash a signal, never a stuck or dead test run
    assert isolated(lambda: select.select([], [], [], 30), timeout=0.5) == {"status": "timeout"}
    assert isolated(lambda: (faulthandler.disable(), os.kill(os.getpid(), signal.SIGSEGV)))["status"] == "signal"  # no trace: on purpose
    assert isolated(lambda: bytearray(4 << 30))["type"] == "MemoryError"
