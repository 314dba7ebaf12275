"""Every public name has an entry in the API reference: the built site's ``objects.inv`` against what the code exposes.

Public means: the names of ``finalfusion.__all__``; every module whose dotted
name has no part starting with ``_`` and the names of its ``__all__`` (without
one, what it defines without a leading ``_``); and every public attribute,
method and property of the library's classes among them, also those a class
inherits from the library's own bases (the gensim mixins behind
``Embeddings``). A name counts as documented when the inventory lists it under
any path that reaches it (``finalfusion.SimpleVocab``,
``finalfusion.vocab.SimpleVocab`` or ``finalfusion.vocab.simple.SimpleVocab``).
The reference shows only names with a docstring (mkdocs.yml), so a new public
name without a docstring, or on no page, fails here, named.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import os
import pkgutil
import subprocess
import sys
import types
import zlib
from pathlib import Path
from typing import Any

import pytest

import finalfusion

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session")
def built_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One strict build of the site per test session (the notebook rendered as stored, not executed: it has no API entries)."""
    for module in ("mkdocs", "mkdocstrings", "mkdocstrings_handlers.python", "material", "nbformat"):
        pytest.importorskip(module, reason="building the site needs the docs extra (pip install -e '.[docs]')")
    site = tmp_path_factory.mktemp("site")
    env = {**os.environ, "FINALFUSION_DOCS_EXECUTE": "0"}
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site), "--config-file", str(ROOT / "mkdocs.yml")],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, f"mkdocs build --strict failed:\n{done.stdout}\n{done.stderr}"
    return site


def read_inventory(path: Path) -> set[str]:
    """The object names of a Sphinx inventory (version 2: four comment lines, then zlib-compressed ``name domain:role ...`` lines)."""
    data = path.read_bytes()
    header, sep, body = data.partition(b"# The remainder of this file is compressed using zlib.\n")
    assert sep, f"{path} has no zlib-compressed part"
    assert header.startswith(b"# Sphinx inventory version 2\n"), f"{path} is not a version 2 Sphinx inventory"
    return {line.split(" ", 1)[0] for line in zlib.decompress(body).decode("utf-8").splitlines() if line.strip()}


def _ours(obj: Any) -> bool:
    return str(getattr(obj, "__module__", None) or "").partition(".")[0] == "finalfusion"


def public_modules() -> dict[str, types.ModuleType]:
    """``finalfusion`` and every submodule without a ``_`` part (``finalfusion.__main__`` runs the command line on import)."""
    found = {"finalfusion": finalfusion}
    for info in pkgutil.walk_packages(finalfusion.__path__, "finalfusion."):
        if not any(part.startswith("_") for part in info.name.split(".")[1:]):
            found[info.name] = importlib.import_module(info.name)
    return found


def module_names(module: types.ModuleType) -> list[str]:
    if hasattr(module, "__all__"):
        return list(module.__all__)
    return [
        n
        for n, v in vars(module).items()
        if not n.startswith("_") and not isinstance(v, types.ModuleType) and getattr(v, "__module__", module.__name__) == module.__name__
    ]


def class_members(cls: type) -> set[str]:
    """Public names a class defines or inherits from the library's own classes (not from ``object``, ``Enum``, ``Mapping``...)."""
    names: set[str] = set()
    for base in cls.__mro__:
        if not _ours(base):
            continue
        annotations = vars(base).get("__annotations__", {})
        # An InitVar is a constructor argument, not an attribute (its default is a class attribute all the same).
        init_only = {n for n, a in annotations.items() if str(a).startswith(("InitVar", "dataclasses.InitVar")) or isinstance(a, dataclasses.InitVar)}
        names.update(n for n in [*vars(base), *annotations] if not n.startswith("_") and n not in init_only)
        if dataclasses.is_dataclass(base):
            names.update(f.name for f in dataclasses.fields(base) if not f.name.startswith("_"))
    return names


def public_names() -> dict[str, set[str]]:
    """Each public object (by its defining path) -> every dotted path that reaches it."""
    paths: dict[str, set[str]] = {}

    def add(key: str, *found: str) -> None:
        paths.setdefault(key, set()).update(found)

    for name, module in public_modules().items():
        add(name, name)
        for attr in module_names(module):
            obj = getattr(module, attr)
            path = f"{name}.{attr}"
            if isinstance(obj, types.ModuleType):
                add(obj.__name__, path)
                continue
            defined = (inspect.isclass(obj) or inspect.isroutine(obj)) and _ours(obj)
            key = f"{obj.__module__}.{obj.__qualname__}" if defined else path
            add(key, path, key)
            if inspect.isclass(obj) and _ours(obj):
                for member in class_members(obj):
                    add(f"{key}.{member}", f"{path}.{member}", f"{key}.{member}")
    return paths


def shortest(paths: set[str]) -> str:
    return min(paths, key=lambda p: (p.count("."), len(p), p))


def test_the_walk_finds_what_the_issue_named() -> None:
    """The code side is not empty or blind to mixins: the gensim spellings and encode are public names of Embeddings."""
    names = {shortest(p) for p in public_names().values()}
    for name in (
        "finalfusion.Embeddings.encode",
        "finalfusion.Embeddings.to_gensim",
        "finalfusion.Embeddings.get_vector",
        "finalfusion.Embeddings.most_similar_cosmul",
        "finalfusion.compat.gguf",
        "finalfusion.limits.MAX_DIMS",
        "finalfusion.__version__",
    ):
        assert name in names, name
    assert "finalfusion.SimpleVocab.index" not in names, "an InitVar is not an attribute"
    assert not any(".args" in n or n.endswith(".with_traceback") for n in names), "members of builtins are not ours"


def test_every_public_name_has_an_entry_in_the_built_reference(built_site: Path) -> None:
    inventory = read_inventory(built_site / "objects.inv")
    missing = sorted(shortest(paths) for paths in public_names().values() if not paths & inventory)
    assert missing == [], f"public names without an entry (a docstring on a page of docs/api/) in the API reference: {missing}"


def test_the_inventory_reader_reads_what_mkdocstrings_writes(built_site: Path) -> None:
    inventory = read_inventory(built_site / "objects.inv")
    assert {"finalfusion.Embeddings", "finalfusion.Embeddings.get_vector", "finalfusion.load", "finalfusion.vocab.SimpleVocab.words"} <= inventory
    assert "finalfusion.Embeddings._unknown" not in inventory, "private names have no entries"
