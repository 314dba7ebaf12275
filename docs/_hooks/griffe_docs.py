"""griffe extension for the API reference: Sphinx roles and docs/ citations in docstrings become links.

The docstrings are numpydoc, read both by people in a terminal (``help()``)
and by this site. Three habits of theirs would show as raw text here:

* Sphinx roles -- ``:class:`~finalfusion.storage.NdArray```, ``:func:`load```,
  ``:meth:`Embeddings.quantize``` -- become a code span linked to the object's
  reference entry (the ``~`` form shows the last name only);
* RST simple tables (the byte table atop each chunk module) become Markdown
  tables;
* citations of this documentation -- ``docs/format.md §5.4``,
  ``docs/scaling.md`` -- link to the page, and for the format page to the
  numbered section.

Links are mkdocs-autorefs ``<autoref ... optional>`` elements: a target that
is not rendered anywhere in the site (a private helper, numpy) stays plain
code instead of failing the strict build. Relative names are looked up in the
object's class, then its module, then the top-level ``finalfusion`` package.

Four more rules give every public name one entry with its text (the
reference shows only documented names, and tests/test_docs_inventory.py wants
an entry for every public name):

* a ``#:`` comment block right above an assignment (Sphinx's attribute
  comment, as in ``finalfusion.limits``) becomes the attribute's docstring;
* a name a package re-exports from a submodule is documented once, in the
  package (see :func:`_document_once`);
* a method that overrides a documented one without a docstring of its own
  shows the base method's, as ``help()`` does;
* an attribute without a docstring of its own takes its description from the
  numpydoc ``Attributes`` or ``Parameters`` section of its class (dataclass
  fields, named-tuple fields).
"""

from __future__ import annotations

import re
from functools import cache
from html import escape
from pathlib import Path
from typing import Any

from griffe import Docstring, DocstringSectionKind, Extension
from markdown.extensions.toc import slugify

DOCS = Path(__file__).resolve().parent.parent
ROLE = re.compile(r":(?:py:)?(?:class|func|meth|mod|data|attr|exc|obj|const):`(?P<target>[^`]+)`")
CITATION = re.compile(r"(?<![\w/.-])docs/(?P<page>[a-z0-9-]+)\.md(?: §(?P<section>\d+(?:\.\d+)*))?")
#: An RST simple table (the byte tables atop the chunk modules): a border of ``=`` runs, a header row, a border, rows, a border.
SIMPLE_TABLE = re.compile(r"^(?P<border>=+(?: +=+)+)\n(?P<head>.+)\n(?P=border)\n(?P<rows>(?:.+\n)+?)(?P=border)$", re.MULTILINE)
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


def _markdown_table(m: re.Match[str]) -> str:
    """An RST simple table as a Markdown table (columns where the border's ``=`` runs are; the last one takes the rest of the line)."""
    starts = [run.start() for run in re.finditer(r"=+", m["border"])]

    def cells(line: str) -> str:
        bounds = [*starts[1:], None]
        parts = [line[a:b].strip().replace("|", "\\|") for a, b in zip(starts, bounds, strict=True)]
        return "| " + " | ".join(parts) + " |"

    rows = [cells(m["head"]), "|" + "---|" * len(starts)]
    rows += [cells(line) for line in m["rows"].splitlines()]
    return "\n".join(rows)


@cache
def _source_lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


def _attribute_docstring(attr: Any) -> None:
    """Give ``attr`` the ``#:`` comment above it, or the entry of its class's ``Attributes`` section, as docstring."""
    lines = _source_lines(Path(attr.filepath)) if attr.lineno else []
    comment: list[str] = []
    i = (attr.lineno or 1) - 2
    while i >= 0 and lines[i].strip().startswith("#:"):
        comment.insert(0, lines[i].strip()[2:].strip())
        i -= 1
    text = "\n".join(comment).strip()
    parent = attr.parent
    if not text and parent is not None and parent.is_class and parent.docstring is not None:
        for section in parent.docstring.parse("numpy", warnings=False):
            if section.kind in (DocstringSectionKind.attributes, DocstringSectionKind.parameters) and not text:
                text = next((item.description for item in section.value if attr.name in item.name.replace(" ", "").split(",")), "")
    if text:
        attr.docstring = Docstring(text, parent=attr)


def _inherit_docstrings(cls: Any) -> None:
    """A method or attribute that overrides a documented one of a base class without a docstring shows the base's (as ``help()`` does)."""
    try:
        bases = cls.mro()
    except Exception:  # a base griffe cannot resolve (outside the package): nothing to inherit from it
        return
    for name, member in cls.members.items():
        if member.is_alias or member.docstring is not None:
            continue
        for base in bases:
            found = base.members.get(name)
            if found is not None and not found.is_alias and found.docstring is not None:
                doc = found.docstring
                member.docstring = Docstring(doc.value, parent=member, parser=doc.parser, parser_options=doc.parser_options)
                break


def _document_once(module: Any) -> None:
    """Document a name a package re-exports from its submodule once: in the package, not again in the submodule.

    The pages render packages with their submodules (``show_submodules``); the
    package's ``__all__`` shows ``finalfusion.vocab.SimpleVocab``, so
    ``finalfusion.vocab.simple`` leaves it out, and so does a subpackage that
    re-exports it too (``finalfusion.compat.gguf.load_gguf`` beside
    ``finalfusion.compat.load_gguf``); its entry stays reachable under those
    paths. The top-level package is not rendered whole, so its re-exports do
    not count.
    """
    hidden = set()
    for name in module.exports or ():
        member = module.members.get(name)
        if member is None or not member.is_alias:
            continue
        try:
            target = member.final_target
        except Exception:  # an alias to another package (numpy, typing): nothing of ours to hide
            continue
        if target.path.startswith(module.path + ".") and not target.is_module:
            target.public = False
            hidden.add(target.path)
    stack = [m for m in module.members.values() if not m.is_alias and m.is_module]
    while stack:
        sub = stack.pop()
        for member in sub.members.values():
            if member.is_alias and member.target_path in hidden:
                member.public = False
            elif not member.is_alias and member.is_module:
                stack.append(member)


def _autoref(identifier: str, title: str) -> str:
    return f'<autoref identifier="{escape(identifier, quote=True)}" optional>{title}</autoref>'


class DocsLinks(Extension):
    """Rewrite every docstring of the package once it is fully loaded."""

    def __init__(self) -> None:
        super().__init__()
        self._pages: dict[str, tuple[str | None, dict[str, str]]] = {}

    def on_package(self, *, pkg: Any, **kwargs: Any) -> None:
        seen: set[int] = set()
        classes: list[Any] = []
        stack = [pkg]
        while stack:
            obj = stack.pop()
            if id(obj) in seen or obj.is_alias:
                continue
            seen.add(id(obj))
            if obj.is_attribute and obj.docstring is None:
                _attribute_docstring(obj)
            if obj.docstring is not None:
                obj.docstring.value = self.rewrite(obj.docstring.value, obj, pkg)
            if obj.is_module and obj is not pkg:
                _document_once(obj)
            stack.extend(m for m in obj.members.values() if not m.is_alias)
            if obj.is_class:
                classes.append(obj)
        for cls in classes:
            _inherit_docstrings(cls)

    def rewrite(self, text: str, obj: Any, pkg: Any) -> str:
        text = SIMPLE_TABLE.sub(_markdown_table, text)
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
