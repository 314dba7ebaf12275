"""mkdocs hook: execute the tutorial notebook and render it, with its outputs, as a page of the site.

For every ``*.ipynb`` in docs/ the hook adds a generated Markdown page of the
same name (``tutorial.ipynb`` -> ``tutorial.md``, which is what mkdocs.yml's
nav names) and keeps the notebook itself as a download. It needs only nbformat
and nbclient (both in the ``docs`` extra), not nbconvert or mkdocs-jupyter:

* :func:`execute` runs the notebook with nbclient in a fresh kernel, in the
  notebook's directory, against the installed ``finalfusion``; an error in any
  cell fails the build;
* :func:`to_markdown` turns the cells into Markdown: code as Python blocks,
  text outputs as text blocks, HTML outputs (the ``_repr_html_`` tables) as
  raw HTML, images as inline PNGs;
* :func:`relative_paths` writes the build machine's absolute paths in the
  outputs (a memory-mapped file's path in the ``Embeddings`` table) relative
  to the notebook's directory, as the notebook's code spells them
  (``../examples/tutorial.fifu``).

``FINALFUSION_DOCS_EXECUTE=0`` renders the notebook as stored instead of running
it (quick ``mkdocs serve`` sessions). tests/test_notebook.py uses the same two
functions.
"""

from __future__ import annotations

import hashlib
import html
import os
import re
from pathlib import Path
from typing import Any

#: Seconds one cell may run.
CELL_TIMEOUT = 600
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_CACHE: dict[str, str] = {}


def execute(path: Path, timeout: int = CELL_TIMEOUT) -> Any:
    """Run the notebook at ``path`` in a new ``python3`` kernel and return it with its outputs."""
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(nb, timeout=timeout, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}})
    client.execute()
    return nb


def _fence(text: str, lang: str) -> str:
    longest = max((len(m) for m in re.findall(r"`{3,}", text)), default=2)
    fence = "`" * (longest + 1)
    return f"{fence}{lang}\n{text.rstrip()}\n{fence}\n"


def _text(text: str) -> str:
    """A text output: a text block inside the output frame (md_in_html)."""
    return f'<div class="nb-output nb-text" markdown>\n\n{_fence(text, "text")}\n</div>\n'


def _output(out: Any) -> str:
    kind = out.get("output_type")
    if kind == "stream":
        return _text(ANSI.sub("", out.get("text", "")))
    if kind == "error":
        return _text(ANSI.sub("", "\n".join(out.get("traceback", []))))
    data = out.get("data", {})
    if "image/png" in data:
        png = "".join(data["image/png"]).replace("\n", "")
        alt = html.escape(str(data.get("text/plain", "figure")), quote=True)
        return f'<div class="nb-output nb-image"><img alt="{alt}" src="data:image/png;base64,{png}"></div>\n'
    if "text/html" in data:
        return f'<div class="nb-output nb-html">\n{"".join(data["text/html"]).strip()}\n</div>\n'
    if "text/plain" in data:
        return _text("".join(data["text/plain"]))
    return ""


def to_markdown(nb: Any, download: str | None = None) -> str:
    """The notebook as a Markdown page; ``download`` is the notebook's file name for a download link."""
    parts: list[str] = []
    for cell in nb.cells:
        source = "".join(cell.source)
        if cell.cell_type == "markdown":
            parts.append(source.strip() + "\n")
            if download and len(parts) == 1:
                parts.append(f"[Download this notebook]({download}){{: .md-button }}\n")
        elif cell.cell_type == "code":
            parts.append(_fence(source, "python"))
            outputs = [_output(out) for out in cell.get("outputs", [])]
            parts.extend(o for o in outputs if o)
    return "\n".join(parts)


def relative_paths(text: str, directory: Path) -> str:
    """``text`` with the absolute paths of ``directory`` and its parent (the repository) relative to ``directory``.

    >>> relative_paths("file /repo/examples/a.fifu in /repo/docs/x", Path("/repo/docs"))
    'file ../examples/a.fifu in ./x'
    """
    for where, relative in ((directory, "."), (directory.parent, "..")):  # the longer first: the parent is a prefix of it
        for spelled in dict.fromkeys([str(where), str(where.resolve())]):
            text = text.replace(spelled + os.sep, relative + "/")
    return text


def render(path: Path) -> str:
    """Execute (unless ``FINALFUSION_DOCS_EXECUTE=0``) and render; cached by the notebook's bytes within one process."""
    raw = path.read_bytes()
    run = os.environ.get("FINALFUSION_DOCS_EXECUTE", "1") != "0"
    key = hashlib.sha256(raw + bytes([run])).hexdigest()
    if key not in _CACHE:
        if run:
            nb = execute(path)
        else:
            import nbformat

            nb = nbformat.reads(raw.decode("utf-8"), as_version=4)
        _CACHE[key] = relative_paths(to_markdown(nb, download=path.name), path.parent.resolve())
    return _CACHE[key]


def on_files(files: Any, config: Any) -> Any:
    """Add ``name.md`` rendered from every ``name.ipynb`` of docs/ (the notebook stays as a download)."""
    from mkdocs.structure.files import File

    for f in list(files):
        if f.src_uri.endswith(".ipynb"):
            page = f.src_uri[: -len(".ipynb")] + ".md"
            files.append(File.generated(config, page, content=render(Path(f.abs_src_path))))
    return files
