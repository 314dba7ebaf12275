"""The layering of docs/architecture.md, checked on the source: who may import whom.

Imports inside functions count (a lower module must not reach up even
lazily). The layer rules skip imports under ``if TYPE_CHECKING:`` (they never
run); the cycle check counts them: a type-only circle is still a circle for
the reader (issue 23).
"""

from __future__ import annotations

import ast
import functools
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

import finalfusion
from finalfusion.chunks import ROLE_RANK, ChunkIdentifier, chunk_classes
from finalfusion.storage import Storage
from finalfusion.vocab import Vocab

PACKAGE = Path(finalfusion.__file__).parent

#: The bottom layers: each module and the package modules it may import.
LOWER_LAYERS = {
    "finalfusion.errors": set(),
    "finalfusion.limits": set(),
    "finalfusion._threads": set(),
    "finalfusion._progress": {"finalfusion.errors"},
    "finalfusion._llamacpp_pre": set(),
    "finalfusion._local_files": {"finalfusion.errors"},
    "finalfusion._isolated": {"finalfusion._threads", "finalfusion.errors"},
    "finalfusion._gzip_input": {"finalfusion._progress", "finalfusion.errors", "finalfusion.limits"},
    "finalfusion._tokenizer_json": {"finalfusion._llamacpp_pre", "finalfusion.errors", "finalfusion.limits"},
    "finalfusion._tokenizers": {"finalfusion._local_files", "finalfusion._tokenizer_json", "finalfusion.errors", "finalfusion.limits"},
    "finalfusion._binary": {"finalfusion.errors", "finalfusion.limits"},
    "finalfusion._source": {
        "finalfusion._binary",
        "finalfusion._gzip_input",
        "finalfusion._local_files",
        "finalfusion._progress",
        "finalfusion._remote",
        "finalfusion._remote_files",
        "finalfusion.errors",
        "finalfusion.limits",
    },
    "finalfusion._remote": {"finalfusion.errors"},
    "finalfusion._remote_files": {"finalfusion._local_files", "finalfusion._remote", "finalfusion.errors"},
    "finalfusion._remote_rows": {"finalfusion._remote", "finalfusion.errors"},
    "finalfusion._atomic": {"finalfusion._remote", "finalfusion._threads"},
    "finalfusion._fileref": {"finalfusion._binary", "finalfusion._progress", "finalfusion._source", "finalfusion.errors"},
    "finalfusion.chunks": {"finalfusion._binary", "finalfusion.errors"},
    "finalfusion.header": {"finalfusion._binary", "finalfusion.chunks", "finalfusion.errors"},
    "finalfusion.container": {
        "finalfusion._atomic",
        "finalfusion._binary",
        "finalfusion._fileref",
        "finalfusion._remote_rows",
        "finalfusion._source",
        "finalfusion.chunks",
        "finalfusion.errors",
        "finalfusion.header",
    },
}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(path: Path, modules: set[str], *, type_checking: bool = False) -> set[str]:
    """Package modules ``path`` imports anywhere (functions included); under ``if TYPE_CHECKING`` only with ``type_checking``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip = (
        set()
        if type_checking
        else {id(n) for node in ast.walk(tree) if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test) for n in ast.walk(node)}
    )
    me = module_name(path)
    found = set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            # ``from package import module`` imports the module; ``from module import name`` the module.
            targets = [f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in modules else node.module for a in node.names]
        for target in targets:
            while target and target not in modules:
                target = target.rpartition(".")[0]
            if target and target != me:
                found.add(target)
    return found


@functools.cache
def import_graph(type_checking: bool = False) -> dict[str, set[str]]:
    paths = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    modules = set(paths)
    return {name: imports_of(path, modules, type_checking=type_checking) for name, path in paths.items()}


@pytest.mark.parametrize("module", sorted(LOWER_LAYERS))
def test_lower_layers_import_only_what_is_below_them(module: str) -> None:
    graph = import_graph()
    assert graph[module] <= LOWER_LAYERS[module], f"{module} imports {sorted(graph[module] - LOWER_LAYERS[module])}"


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle of ``graph`` as a path that ends where it starts, or ``None``."""
    # A package's __init__ importing its own submodules is how re-exports work, not a cycle.
    edges = {a: {b for b in bs if not (b.startswith(a + ".") and (PACKAGE.parent / a.replace(".", "/") / "__init__.py").exists())} for a, bs in graph.items()}
    state: dict[str, int] = {}

    def visit(node: str, path: list[str]) -> list[str] | None:
        state[node] = 1
        for nxt in sorted(edges[node]):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            if nxt not in state and (cycle := visit(nxt, [*path, nxt])) is not None:
                return cycle
        state[node] = 2
        return None

    for start in sorted(edges):
        if start not in state and (cycle := visit(start, [start])) is not None:
            return cycle
    return None


def test_no_import_cycles() -> None:
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_no_import_cycles_counting_type_checking_imports() -> None:
    # Queries take similarity._protocol.Queryable, not Embeddings: nothing below the facade names it, even for mypy.
    cycle = find_cycle(import_graph(type_checking=True))
    assert cycle is None, "import cycle (TYPE_CHECKING imports included): " + " -> ".join(cycle or [])


def test_the_cycle_check_sees_type_checking_imports() -> None:
    # The checker itself: a type-only import back to the facade is an edge, and a circle through it is found.
    graph = import_graph(type_checking=True)
    assert "finalfusion.embeddings" in graph["finalfusion.plot"]
    assert "finalfusion.embeddings" not in import_graph()["finalfusion.plot"]
    assert find_cycle({**graph, "finalfusion.similarity._queries": graph["finalfusion.similarity._queries"] | {"finalfusion.embeddings"}}) is not None


def test_queries_and_word_checks_do_not_name_the_facade() -> None:
    graph = import_graph(type_checking=True)
    below = [
        m
        for m in graph
        if m.startswith(("finalfusion.similarity", "finalfusion.vocab", "finalfusion.storage"))
        or m in {"finalfusion._batch", "finalfusion._wordrule", "finalfusion._load", "finalfusion._pickling", "finalfusion._gensim_api", "finalfusion.quantize"}
    ]
    for module in below:
        assert "finalfusion.embeddings" not in graph[module], module


def test_roles_come_from_the_ids() -> None:
    for cls in chunk_classes():
        role = cls.chunk_id.role
        assert role in ROLE_RANK
        assert cls.chunk_id.is_storage() == issubclass(cls, Storage) == (role == "storage")
        assert cls.chunk_id.is_vocab() == issubclass(cls, Vocab) == (role == "vocab")
    assert ChunkIdentifier.Header.role == "header"
    assert not ChunkIdentifier.Header.is_storage()
    assert not ChunkIdentifier.Header.is_vocab()


def test_import_has_no_side_effects_on_umask_or_ctypes() -> None:
    # The umask is read by nobody (the kernel applies it to the temporary file);
    # fallocate is looked up on the first large write, not at import.
    code = "import finalfusion, finalfusion._atomic as a; print(a._fallocate.cache_info().currsize)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env={**os.environ, "PYTHONPATH": str(PACKAGE.parent)})
    assert out.stdout.strip() == "0"


@pytest.mark.skipif(os.name != "posix", reason="POSIX file modes")
def test_new_files_get_the_umask_and_existing_files_keep_their_mode(tmp_path: Path) -> None:
    from finalfusion._atomic import atomic_output

    old = os.umask(0o027)
    try:
        with atomic_output(tmp_path / "new.bin") as f:
            f.write(b"x")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "new.bin").stat().st_mode) == 0o640
    (tmp_path / "old.bin").write_bytes(b"old")
    os.chmod(tmp_path / "old.bin", 0o604)
    with atomic_output(tmp_path / "old.bin") as f:
        f.write(b"new")
    assert (tmp_path / "old.bin").read_bytes() == b"new"
    assert stat.S_IMODE((tmp_path / "old.bin").stat().st_mode) == 0o604


def test_every_input_kind_goes_through_one_dispatch(tmp_path: Path) -> None:
    from finalfusion import _source
    from finalfusion.compat import sniff, text

    assert sniff.open_stream is text.open_stream is _source.open_stream
    assert sniff.peek is _source.peek
    path = tmp_path / "data.bin"
    path.write_bytes(b"FiFu-contents")
    fd = os.open(path, os.O_RDONLY)
    try:
        with open(path, "rb") as f:
            for source in (path, str(path), os.fsencode(path), fd, f, b"FiFu-contents", bytearray(b"FiFu-contents"), memoryview(b"FiFu-contents")):
                os.lseek(fd, 0, os.SEEK_SET)
                f.seek(0)
                assert bytes(_source.open_buffer(source)[0]) == b"FiFu-contents", source
                os.lseek(fd, 0, os.SEEK_SET)
                f.seek(0)
                with _source.open_stream(source) as stream:
                    assert stream.read() == b"FiFu-contents", source
    finally:
        os.close(fd)
    for wrong in (True, 1.5, None):
        with pytest.raises(TypeError, match="expected a path, bytes or a binary file object"):
            _source.open_buffer(wrong)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="expected a path, bytes or a binary file object"), _source.open_stream(wrong):  # type: ignore[arg-type]
            pass


#: Largest source file: a module past it does more than one job (issue 23 split compat/gguf.py, compat/_common.py and embeddings.py).
MAX_SOURCE_LINES = 850


def test_no_source_file_is_over_the_line_limit() -> None:
    long = {str(p.relative_to(PACKAGE)): n for p in PACKAGE.rglob("*.py") if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_SOURCE_LINES}
    assert not long, f"split these modules by job: {long}"
