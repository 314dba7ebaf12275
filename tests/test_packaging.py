"""Packaging metadata: what the sdist carries, the declared Python versions, the README's links."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def test_python_classifiers_match_requires_python() -> None:
    project = PYPROJECT["project"]
    floor = re.fullmatch(r">=3\.(\d+)", project["requires-python"])
    assert floor is not None
    versions = sorted(int(c.rsplit(".", 1)[1]) for c in project["classifiers"] if re.fullmatch(r"Programming Language :: Python :: 3\.\d+", c))
    assert versions[0] == int(floor.group(1))
    assert versions == list(range(versions[0], versions[-1] + 1))
    assert sys.version_info[:2] >= (3, versions[0])
    assert project["urls"]


def test_sdist_carries_tests_docs_and_examples() -> None:
    include = PYPROJECT["tool"]["flit"]["sdist"]["include"]
    for folder in ("tests/", "docs/", "examples/", "fuzz/"):
        assert folder in include


def included(path: Path) -> bool:
    rel = path.relative_to(ROOT).as_posix()
    include = PYPROJECT["tool"]["flit"]["sdist"]["include"]
    return rel in {"README.md", "LICENSE", "pyproject.toml"} or rel.startswith("src/") or any(rel.startswith(i) for i in include)


@pytest.mark.parametrize("doc", ["README.md", *sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "docs").glob("*.md"))])
def test_relative_links_resolve_inside_the_sdist(doc: str) -> None:
    text = (ROOT / doc).read_text(encoding="utf-8")
    links = re.findall(r"\]\(([^)\s]+)\)", text)
    assert links or doc != "README.md"
    for link in links:
        if re.match(r"[a-z]+:", link) or link.startswith("#"):
            continue
        target = (ROOT / doc).parent / link.split("#", 1)[0]
        if target.suffix == ".md" and not target.exists() and target.with_suffix(".ipynb").exists():
            target = target.with_suffix(".ipynb")  # the site renders notebooks as pages (docs/_hooks/notebook.py)
        assert target.exists(), f"{doc}: broken link {link}"
        assert included(target.resolve()), f"{doc}: {link} is not in the sdist"


def _names(requirements: list[str]) -> set[str]:
    return {re.split(r"[\s\[<>=!~;]", r, maxsplit=1)[0].lower() for r in requirements}


def test_plot_gensim_and_models_extras_install_only_what_they_need() -> None:
    extras = PYPROJECT["project"]["optional-dependencies"]
    assert _names(extras["plot"]) == {"matplotlib"}  # not the docs extra's site tools and Jupyter kernel
    assert _names(extras["gensim"]) == {"gensim"}  # not interop's fastText and floret, which compile for minutes
    # the model readers' libraries, no compile: GGUF, safetensors and protobuf are read by finalfusion itself
    assert _names(extras["models"]) == {"tokenizers", "sentencepiece", "gguf", "h5py"}
    assert _names(extras["plot"]) <= _names(extras["docs"])
    assert _names(extras["gensim"]) <= _names(extras["interop"])
    assert _names(extras["models"]) <= _names(extras["interop"])


def test_every_extra_an_error_names_exists() -> None:
    named = set()
    for path in (ROOT / "src" / "finalfusion").rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        named |= set(re.findall(r"import_extra\([^)]*extra=\"(\w+)\"", text))
    assert {"plot", "gensim", "cli", "models", "ann"} <= named
    assert named <= set(PYPROJECT["project"]["optional-dependencies"])


#: The distribution that installs an optional import, where the names differ (scipy comes with gensim).
DISTRIBUTION = {"faiss": "faiss-cpu", "scipy": "gensim"}
#: Optional imports whose absence is tolerated silently (no error reaches the user): threadpoolctl only limits BLAS threads.
TOLERATED = {"threadpoolctl"}


def test_every_missing_extra_error_names_the_smallest_extra_that_installs_the_package() -> None:
    extras = {name: _names(reqs) for name, reqs in PYPROJECT["project"]["optional-dependencies"].items()}
    calls = set()
    for path in (ROOT / "src" / "finalfusion").rglob("*.py"):
        code = "\n".join(line for line in path.read_text(encoding="utf-8").splitlines() if not line.lstrip().startswith((">>>", "...")))  # no doctests
        calls |= set(re.findall(r"import_extra\(\s*\"([\w.]+)\",[^)]*extra=\"(\w+)\"", code))
    assert {"tokenizers", "sentencepiece", "gguf", "h5py", "matplotlib.pyplot", "gensim.models"} <= {module for module, _ in calls}
    for module, extra in sorted(calls):
        package = module.partition(".")[0]
        if package in TOLERATED:
            continue
        dist = DISTRIBUTION.get(package, package)
        assert dist in extras[extra], (module, extra)
        assert len(extras[extra]) == min(len(names) for names in extras.values() if dist in names), (module, extra, "a smaller extra installs it")
