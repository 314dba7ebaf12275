"""griffe extension for the API reference: Sphinx roles and docs/ citations in docstrings become links.

The docstrings are numpydoc, read both by people in a terminal (``help()``)
and by this site. Two habits of theirs would show as raw text here:

* Sphinx roles -- ``:class:`~finalfusion.storage.NdArray```, ``:func:`load```,
  ``:meth:`Embeddings.quantize``` -- become a code span linked to the object's
  reference entry (the ``~`` form shows the last name only);
* citations of this documentation -- ``docs/format.md §5.4``,
  ``docs/scaling.md`` -- link to the page, and for the format page to the
  numbered section.

Links are mkdocs-autorefs ``<autoref ... optional>`` elements: a target that
is not rendered anywhere in the site (a private helper, numpy) stays plain
code instead of failing the strict build. Relative names are looked up in the
object's class, then its module, then the top-level ``finalfusion`` package.
"""

from __future__ import annotations

import re
from html import escape
from pathlib import Path
from typing import Any

from griffe import Extension
from markdown.extensions.toc import slugify

DOCS = Path(__file__).resolve().parent.parent
ROLE = re.compile(r":(?:py:)?(?:class|func|meth|mod|data|attr|exc|obj|const):`(?P<target>[^`]+)`")
CITATION = re.compile(r"(?<![\w/.-])docs/(?P<page>[a-z0-9-]+)\.md(?: §(?P<section>\d+(?:\.\d+)*))?")
HEADING = re.compile(r"^(?P<hashes>#{1,6}) (?P<title>.+?)\s*$", re.MULTILINE)


def _anchors(page: str) -> tuple[str | None, dict[str, str]]:
    """The anchor of a page's first heading and of each numbered section (``"5.4" -> "54-quantizedarray-4"``)."""
    path = DOCS / f"{page}.md"
    if not path.is_file():
        return None, {}
    text = re.sub(r"^```.*?^```", "", path.read_text(encoding="utf-8"), flags=re.MULTILINE | re.DOTALL)
    first = None
    sections = {}
    for m in HEADING.finditer(text):
        slug = slugify(m["title"], "-")
        first = first or slug
        number = re.match(r"(\d+(?:\.\d+)*)\.? ", m["title"])
        if number:
            sections[number[1]] = slug
    return first, sections


def _autoref(identifier: str, title: str) -> str:
    return f'<autoref identifier="{escape(identifier, quote=True)}" optional>{title}</autoref>'


class DocsLinks(Extension):
    """Rewrite every docstring of the package once it is fully loaded."""

    def __init__(self) -> None:
        super().__init__()
        self._pages: dict[str, tuple[str | None, dict[str, str]]] = {}

    def on_package(self, *, pkg: Any, **kwargs: Any) -> None:
        seen: set[int] = set()
        stack = [pkg]
        while stack:
            obj = stack.pop()
            if id(obj) in seen or obj.is_alias:
                continue
            seen.add(id(obj))
            if obj.docstring is not None:
                obj.docstring.value = self.rewrite(obj.docstring.value, obj, pkg)
            stack.extend(m for m in obj.members.values() if not m.is_alias)

    def rewrite(self, text: str, obj: Any, pkg: Any) -> str:
        text = ROLE.sub(lambda m: self._role(m["target"], obj, pkg), text)
        return CITATION.sub(self._citation, text)

    def _role(self, target: str, obj: Any, pkg: Any) -> str:
        short = target.startswith("~")
        name = target.lstrip("~.").removesuffix("()")
        shown = f"<code>{escape(name.rsplit('.', 1)[-1] if short else name)}</code>"
        path = self._resolve(name, obj, pkg)
        return _autoref(path, shown) if path else shown

    @staticmethod
    def _resolve(name: str, obj: Any, pkg: Any) -> str | None:
        scopes = []
        node = obj
        while node is not None:
            scopes.append(node.path)
            node = node.parent
        candidates = [name] if name.startswith(pkg.name + ".") else [f"{scope}.{name}" for scope in scopes]
        for candidate in candidates:
            try:
                found = pkg[candidate[len(pkg.name) + 1 :]] if candidate != pkg.name else pkg
            except Exception:  # KeyError, alias resolution errors: try the next scope
                continue
            return str(found.path)
        return None

    def _citation(self, m: re.Match[str]) -> str:
        page, section = m["page"], m["section"]
        if page not in self._pages:
            self._pages[page] = _anchors(page)
        first, sections = self._pages[page]
        anchor = sections.get(section) if section else first
        return _autoref(anchor, escape(m[0])) if anchor else m[0]
