"""The tutorial notebook (docs/tutorial.ipynb) runs from top to bottom, and renders into the site with its outputs."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

import finalfusion
from conftest import load_script

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOK = ROOT / "docs" / "tutorial.ipynb"


def hook() -> Any:
    return load_script(ROOT / "docs" / "_hooks" / "notebook.py", "notebook_hook")


@pytest.fixture(scope="module")
def executed() -> Any:
    pytest.importorskip("nbclient", reason="executing the notebook needs nbclient (the docs extra)")
    pytest.importorskip("ipykernel", reason="executing the notebook needs ipykernel (the docs extra)")
    pytest.importorskip("matplotlib", reason="the notebook draws with matplotlib (the docs extra)")
    # The kernel imports the same finalfusion as this test process.
    package_root = str(Path(finalfusion.__file__).resolve().parent.parent)
    old = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join([package_root, *([old] if old else [])])
    try:
        return hook().execute(NOTEBOOK)
    finally:
        if old is None:
            del os.environ["PYTHONPATH"]
        else:
            os.environ["PYTHONPATH"] = old


def outputs(nb: Any, kind: str) -> list[str]:
    found = []
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            if kind == "stream" and out.get("output_type") == "stream":
                found.append("".join(out["text"]))
            elif kind in out.get("data", {}):
                found.append("".join(out["data"][kind]))
    return found


def test_notebook_runs_and_shows_what_it_promises(executed: Any) -> None:
    assert not [o for c in executed.cells for o in c.get("outputs", []) if o.get("output_type") == "error"]
    html = outputs(executed, "text/html")
    assert any("finalfusion embeddings" in h and "memory-mapped file" in h for h in html), "the Embeddings table"
    assert any("finalfusion results" in h and "silver" in h for h in html), "the neighbours of gold as a ranked table"
    assert any("finalfusion evaluation" in h for h in html), "the analogy evaluation table"
    assert any("QuantizedArray" in h for h in html), "the quantized storage table"
    assert len(outputs(executed, "image/png")) == 4, "projection, heat map, norms, reconstruction error"
    text = "\n".join(outputs(executed, "stream"))
    assert "nebuchadnezzar" in text or "pharaoh" in text
    assert "/5 shared)" in text, "neighbours before and after quantization"
    assert " bytes, quantized " in text, "file sizes"


def test_rendered_page_has_code_outputs_and_pictures(executed: Any) -> None:
    page = hook().to_markdown(executed, download="tutorial.ipynb")
    assert page.startswith("# Tutorial")
    assert "[Download this notebook](tutorial.ipynb)" in page
    assert page.count("```python") == sum(c.cell_type == "code" for c in executed.cells)
    assert page.count('<div class="nb-output nb-image"><img alt=') == 4
    assert page.count('<div class="nb-output nb-html">') == len(outputs(executed, "text/html"))


def test_the_site_page_shows_no_absolute_path_of_the_build_machine(executed: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    notebook = hook()
    assert str(ROOT / "examples" / "tutorial.fifu") in notebook.to_markdown(executed)  # the Embeddings table names the mapped file
    monkeypatch.setattr(notebook, "execute", lambda path: executed)  # what mkdocs build renders, without running it again
    monkeypatch.setenv("FINALFUSION_DOCS_EXECUTE", "1")
    page = notebook.render(NOTEBOOK)
    assert str(ROOT) not in page
    assert str(ROOT.resolve()) not in page
    assert "<code>../examples/tutorial.fifu</code>" in page  # as the notebook's code spells it


def test_stored_notebook_is_clean() -> None:
    """The committed notebook carries no outputs: the site and CI execute it."""
    nbformat = pytest.importorskip("nbformat", reason="reading the notebook needs nbformat (the docs extra)")
    nb = nbformat.read(NOTEBOOK, as_version=4)
    nbformat.validate(nb)
    assert all(not c.get("outputs") and c.get("execution_count") is None for c in nb.cells if c.cell_type == "code")


def test_the_site_check_fails_on_a_page_that_shows_the_build_machines_path(tmp_path: Path) -> None:
    check = load_script(ROOT / "docs" / "check_site.py", "check_site")
    site = tmp_path / "site"
    (site / "tutorial").mkdir(parents=True)
    (site / "index.html").write_text("<p>pages may name /usr/share/dict/words, /tmp/ff-campaign-24 or ../examples/tutorial.fifu</p>")
    (site / "tutorial" / "index.html").write_text("<code>../examples/tutorial.fifu</code>")
    paths = check.machine_paths(site)
    assert str(ROOT) in paths
    assert check.absolute_paths(site, paths) == []
    (site / "tutorial" / "index.html").write_text(f"<code>{ROOT / 'examples' / 'tutorial.fifu'}</code>")
    found = check.absolute_paths(site, paths)
    assert f"tutorial/index.html: {ROOT}" in found
    assert all(f.startswith("tutorial/index.html: ") for f in found)
