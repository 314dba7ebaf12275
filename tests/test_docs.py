"""The documentation covers the public API and cites only its own pages (the full check is `mkdocs build --strict` in CI)."""

from __future__ import annotations

import importlib
import re
import types
from pathlib import Path

import finalfusion

ROOT = Path(__file__).resolve().parent.parent
API = ROOT / "docs" / "api"


def directives() -> set[str]:
    return {m[1] for page in API.glob("*.md") for m in re.finditer(r"^::: (\S+)$", page.read_text(encoding="utf-8"), re.MULTILINE)}


def _module(target: str) -> types.ModuleType | None:
    try:
        return importlib.import_module(target)
    except ImportError:
        return None


def test_every_public_name_has_a_reference_entry() -> None:
    """A name is covered by its own `::: finalfusion.name` entry or by the entry of a module whose __all__ lists it."""
    targets = directives()
    modules = [m for m in map(_module, targets) if m is not None]
    missing = []
    for name in finalfusion.__all__:
        if f"finalfusion.{name}" in targets or name == "__version__":
            continue
        if any(name in getattr(m, "__all__", ()) for m in modules):
            continue
        missing.append(name)
    assert missing == [], f"public names without an API reference entry in docs/api/: {missing}"
    assert "__version__" in (API / "index.md").read_text(encoding="utf-8")


def test_public_submodules_are_documented_whole() -> None:
    targets = directives()
    for module in ("compat", "vocab", "storage", "subword", "norms", "metadata", "similarity", "quantize", "errors", "plot"):
        assert f"finalfusion.{module}" in targets, module


def test_docs_and_docstrings_cite_docs_format_md_not_files_outside_the_repository() -> None:
    offenders = []
    for folder in ("src", "docs"):
        for path in (ROOT / folder).rglob("*"):
            if path.suffix in (".py", ".md", ".ipynb") and "FORMAT.md" in path.read_text(encoding="utf-8"):
                offenders.append(str(path.relative_to(ROOT)))
    assert offenders == []


def test_format_md_sections_cited_by_the_code_exist() -> None:
    headings = set(re.findall(r"^#{2,3} (\d+(?:\.\d+)*)\.? ", (ROOT / "docs" / "format.md").read_text(encoding="utf-8"), re.MULTILINE))
    cited = set()
    for path in (ROOT / "src").rglob("*.py"):
        for m in re.finditer(r"docs/format\.md §(\d+(?:\.\d+)*)((?:, §\d+(?:\.\d+)*)*)", path.read_text(encoding="utf-8")):
            cited.add(m[1])
            cited.update(re.findall(r"§(\d+(?:\.\d+)*)", m[2]))
    assert cited, "the code cites docs/format.md"
    assert cited <= headings, f"cited sections missing from docs/format.md: {sorted(cited - headings)}"
