"""The README's examples say what the library does (the error message, reconstruct's type)."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

import finalfusion
from finalfusion import Embeddings, Metadata
from finalfusion.norms import Norms
from finalfusion.storage import NdArray
from finalfusion.vocab import SimpleVocab

README = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")


def test_truncation_error_example_is_verbatim(tmp_path: Path) -> None:
    emb = Embeddings(NdArray(np.eye(2, dtype=np.float32)), SimpleVocab(["hello", "world"]), norms=Norms([1.0, 1.0]), metadata=Metadata({"source": "toy"}))
    emb.write(tmp_path / "toy.fifu")
    with pytest.raises(finalfusion.FormatError) as info:
        finalfusion.load_finalfusion((tmp_path / "toy.fifu").read_bytes()[:50])
    shown = f"{type(info.value).__module__}.{type(info.value).__name__}: {info.value}"
    documented = re.search(r"^finalfusion\.errors\.Truncated: .*$", README, re.MULTILINE)
    assert documented is not None
    assert documented.group(0) == shown
    # it reads the right way round: the file declares more than there is
    assert "at most 10 bytes" in shown
    assert "declared length of 15 bytes" in shown


def test_reconstruct_returns_embeddings() -> None:
    emb = Embeddings(NdArray(np.random.default_rng(0).standard_normal((32, 4)).astype(np.float32)), SimpleVocab([f"w{i}" for i in range(32)]))
    dense = emb.quantize(n_subquantizers=2, n_bits=3, seed=0).reconstruct()
    assert isinstance(dense, Embeddings)
    assert isinstance(dense.storage, NdArray)
    assert "# Embeddings again, with NdArray storage" in README


@pytest.mark.parametrize("page", ["README.md", "docs/index.md", "docs/getting-started.md"])
def test_install_lines_work_before_the_package_is_published(page: str) -> None:
    # `pip install 'finalfusion-py[cli]'` fails on a fresh machine while the package is on no index: every page that
    # shows an index install says so and shows the install from a clone and from a built wheel.
    root = Path(__file__).resolve().parents[1]
    text = " ".join((root / page).read_text(encoding="utf-8").split())
    assert re.search(r"pip install '?finalfusion-py", text)
    assert "published" in text
    assert "pip install -e" in text
    assert "pip wheel --no-deps . -w dist" in text
    pyproject = (root / "pyproject.toml").read_text(encoding="utf-8")
    extras = set(re.findall(r"^(\w+) = \[", pyproject.partition("[project.optional-dependencies]")[2].partition("\n[")[0], re.MULTILINE))
    assert {"cli", "plot", "gensim", "interop", "docs"} <= extras
    for named in re.findall(r"finalfusion[-_]py[^\s\[`']*\[([\w,]+)\]", text):
        assert set(named.split(",")) <= extras, (page, named)
    # the wheel's name as flit builds it: the project name with "_", version, pure Python
    for wheel in re.findall(r"dist/(\S+?\.whl)", text):
        assert re.fullmatch(r"finalfusion_py-VERSION-py3-none-any\.whl", wheel), wheel


def _pages() -> list[str]:
    root = Path(__file__).resolve().parents[1]
    return ["README.md", *sorted(p.relative_to(root).as_posix() for p in (root / "docs").glob("*.md")), "docs/tutorial.ipynb"]


@pytest.mark.parametrize("page", _pages())
def test_every_page_with_an_index_install_shows_the_install_from_a_clone(page: str) -> None:
    # Until finalfusion-py is on PyPI, `pip install finalfusion-py` fails: a page that shows it says so and how to install
    # from a clone (a page without it shows the clone's `pip install -e '.[extra]'` alone, or no install at all).
    text = " ".join((Path(__file__).resolve().parents[1] / page).read_text(encoding="utf-8").split())
    if re.search(r"pip install '?finalfusion-py", text):
        assert "published" in text, page
        assert "pip install -e" in text, page
