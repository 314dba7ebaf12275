"""docs/scaling.md shows the Dask and Ray examples verbatim: every marked section of
examples/scale_dask.py and examples/scale_ray.py (which tests/test_scale_dask.py and
tests/test_scale_ray.py run on real clusters) appears in a code block of the page.

Runs without the scale extra.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SECTION = re.compile(r"^# --8<-- \[start:(\w+)\]\n(.*?)^# --8<-- \[end:\1\]\n", re.S | re.M)


def sections(name: str) -> dict[str, str]:
    text = (ROOT / "examples" / name).read_text(encoding="utf-8")
    return {m.group(1): m.group(2).strip("\n") + "\n" for m in SECTION.finditer(text)}


def code_blocks(text: str) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```\n", text, re.S | re.M)


@pytest.mark.parametrize(
    ("example", "names"), [("scale_dask.py", {"cluster", "share", "bag", "dataframe", "neighbours"}), ("scale_ray.py", {"init", "dataset", "neighbours"})]
)
def test_docs_show_the_tested_example_sections(example: str, names: set[str]) -> None:
    found = sections(example)
    assert set(found) == names
    blocks = code_blocks((ROOT / "docs" / "scaling.md").read_text(encoding="utf-8"))
    for name, code in found.items():
        assert any(code in block for block in blocks), f"docs/scaling.md does not show the section {name!r} of examples/{example} verbatim"


def test_section_pattern_finds_sections() -> None:
    text = "x\n# --8<-- [start:a]\ndef f():\n    pass\n\n\n# --8<-- [end:a]\n"
    assert [(m.group(1), m.group(2).strip("\n")) for m in SECTION.finditer(text)] == [("a", "def f():\n    pass")]
