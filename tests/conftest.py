"""Shared fixtures: golden data (copied into tests/data) and ../shared/testdata (never copied)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

DATA = Path(__file__).resolve().parent / "data"
GOLDEN = DATA / "golden"
GOLDEN_FILES = GOLDEN / "files"
TESTDATA = Path(__file__).resolve().parents[1].parent / "shared" / "testdata"

TINY_FILES = sorted(p.name for p in GOLDEN_FILES.glob("*.fifu"))


def load_json(name: str) -> Any:
    with open(GOLDEN / name, encoding="utf-8") as f:
        return json.load(f)


def word_of(case: dict[str, Any]) -> str:
    """The case's word, rebuilt from code points so editors cannot change it."""
    return "".join(chr(int(cp[2:], 16)) for cp in case["codepoints"])


@pytest.fixture(scope="session")
def testdata() -> Path:
    if not TESTDATA.is_dir():
        pytest.skip(f"../shared/testdata not found: expected the real test files at {TESTDATA}")
    return TESTDATA


@pytest.fixture(scope="session")
def lookups() -> dict[str, Any]:
    return load_json("lookups.json")["cases"]  # type: ignore[no-any-return]
