"""Hostile TOML metadata (issue 13, class 4): bounded size and depth, every failure a FormatError.

Arrays nested 1,000 deep made the TOML parser recurse past Python's limit, a
20,000-part dotted key cost it seconds and gigabytes, and a 5,000-digit
integer escaped as a plain ValueError. Each check runs in a forked child
under an address-space limit.
"""

from __future__ import annotations

import copy
import io

import numpy as np
import pytest

import finalfusion.limits as limits
from _bounded import ChildError, bounded
from finalfusion import Embeddings, FormatError, load_finalfusion, load_metadata
from finalfusion.metadata import Metadata, check_depth
from finalfusion.storage import NdArray
from finalfusion.vocab import SimpleVocab
from test_hostile import build, ndarray, simple_vocab

DEEP = 1000
PARTS = 20_000


def fifu(toml: bytes) -> bytes:
    return build([(5, toml), (1, simple_vocab(["a"])), (2, ndarray(1, 1))])


HOSTILE = {
    "arrays-deep": b"x = " + b"[" * DEEP + b"]" * DEEP,
    "arrays-deep-unclosed": b"x = " + b"[" * DEEP,
    "inline-tables-deep": b"x = " + b"{a = " * DEEP + b"1" + b"}" * DEEP,
    "mixed-deep": b"x = " + b"[{a = " * (DEEP // 2) + b"1" + b"}]" * (DEEP // 2),
    "dotted-key": b".".join([b"a"] * PARTS) + b" = 1",
    "dotted-key-quoted": b".".join([b'"a"'] * PARTS) + b" = 1",
    "dotted-key-spaced": b" . ".join([b"a"] * PARTS) + b" = 1",
    "dotted-key-in-inline-table": b"x = {" + b".".join([b"a"] * PARTS) + b" = 1}",
    "table-header": b"[" + b".".join([b"a"] * PARTS) + b"]\nx = 1",
    "array-table-header": b"[[" + b".".join([b"a"] * PARTS) + b"]]\nx = 1",
    "int-5000-digits": b"x = 1" + b"0" * 5000,
    "int-5000-digits-underscores": b"x = 1" + b"_000" * 1700,
    "float-5000-digits": b"x = 1." + b"5" * 5000,
    "negative-int-5000-digits": b"x = -" + b"9" * 5000,
    "int-in-array": b"x = [1, 2, " + b"7" * 5000 + b"]",
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
@pytest.mark.parametrize("via", ["load_metadata", "load_finalfusion", "from_toml"])
def test_hostile_metadata_is_a_format_error(name: str, via: str) -> None:
    doc = HOSTILE[name]

    def run() -> str:
        try:
            if via == "from_toml":
                Metadata.from_toml(doc)
            elif via == "load_metadata":
                load_metadata(fifu(doc))
            else:
                load_finalfusion(io.BytesIO(fifu(doc)))
        except FormatError as exc:
            return str(exc)
        return "loaded"

    msg = bounded(run, extra_mb=300)
    assert msg != "loaded"
    assert "Metadata" in msg or via == "from_toml"
    assert "finalfusion.limits.MAX_METADATA" in msg or "TOML" in msg


def test_a_document_larger_than_the_limit_is_refused_before_parsing(monkeypatch: pytest.MonkeyPatch) -> None:
    big = b'x = "' + b"a" * (limits.MAX_METADATA_BYTES) + b'"'
    with pytest.raises(FormatError, match=r"too large.*MAX_METADATA_BYTES"):
        Metadata.from_toml(big)
    monkeypatch.setattr(limits, "MAX_METADATA_BYTES", 1000)
    with pytest.raises(FormatError, match=r"Metadata: metadata document is too large"):
        load_metadata(fifu(b'x = "' + b"b" * 1000 + b'"'))
    assert load_metadata(fifu(b'x = "' + b"b" * 990 + b'"'))["x"] == "b" * 990


@pytest.mark.parametrize("depth", [1, 10, 63, 64, 65, 100])
def test_the_depth_limit_is_exact_for_every_kind_of_nesting(depth: int) -> None:
    docs = [
        b"x = " + b"[" * depth + b"]" * depth,
        b"x = " + b"{a = " * (depth - 1) + b"{}" + b"}" * (depth - 1),
        b".".join([b"a"] * (depth + 1)) + b" = 1",  # the key's parts below the top-level table: depth
    ]
    for doc in docs:
        if depth <= limits.MAX_METADATA_DEPTH:
            meta = Metadata.from_toml(doc)
            assert Metadata.from_toml(meta.to_toml()) == meta
            assert copy.deepcopy(meta) == meta
        else:
            with pytest.raises(FormatError, match="MAX_METADATA_DEPTH"):
                Metadata.from_toml(doc)


def test_the_limits_can_be_raised(monkeypatch: pytest.MonkeyPatch) -> None:
    doc = b"x = " + b"[" * 80 + b"]" * 80 + b"\ny = 1" + b"0" * 120
    with pytest.raises(FormatError):
        Metadata.from_toml(doc)
    monkeypatch.setattr(limits, "MAX_METADATA_DEPTH", 100)
    monkeypatch.setattr(limits, "MAX_METADATA_NUMBER_LEN", 200)
    assert Metadata.from_toml(doc)["y"] == 10**120


def test_brackets_dots_and_digits_inside_strings_and_comments_do_not_count() -> None:
    noise = "[" * DEEP + "." * DEEP + "9" * DEEP
    doc = (
        f'a = "{noise}"\nb = \'{noise}\'\nc = """\n{noise}\n"""\nd = \'\'\'{noise}\'\'\'\n# {noise}\ne = "\\"{noise}"\nf = 1.5\ng = 1979-05-27T07:32:00.999Z\n'
    )
    meta = Metadata.from_toml(doc)
    assert meta["a"] == meta["b"] == meta["d"] == noise
    assert meta["c"] == noise + "\n"
    assert meta["e"] == '"' + noise


def test_deep_python_values_are_refused_before_anything_recurses() -> None:
    deep: list[object] = []
    for _ in range(DEEP * 10):
        deep = [deep]
    with pytest.raises(ValueError, match="MAX_METADATA_DEPTH"):
        Metadata({"x": deep})
    meta = Metadata({"x": 1})
    meta["x"] = deep  # a mutable mapping: nesting can also arrive later
    for action in (meta.to_toml, lambda: copy.deepcopy(meta)):
        with pytest.raises(ValueError, match="MAX_METADATA_DEPTH"):
            action()
    emb = Embeddings(NdArray(np.ones((1, 1), np.float32)), SimpleVocab(["a"]), metadata=meta)
    with pytest.raises(ValueError, match="MAX_METADATA_DEPTH"):
        emb.write(io.BytesIO())
    with pytest.raises(ValueError, match="MAX_METADATA_DEPTH"):
        copy.deepcopy(emb)


def test_cyclic_and_shared_values_cost_linear_work() -> None:
    cyc: list[object] = []
    cyc.append(cyc)
    with pytest.raises(ValueError, match="MAX_METADATA_DEPTH"):
        check_depth({"x": cyc})
    shared: list[object] = [1]
    for _ in range(60):
        shared = [shared, shared]  # 2**60 paths, 61 containers
    check_depth({"x": shared})


def test_child_errors_name_the_exception() -> None:
    # The forked-child harness itself: an unbounded recursion comes back as RecursionError, not as a crash.
    def recurse(n: int) -> int:
        return recurse(n + 1) + 1

    with pytest.raises(ChildError) as e:
        bounded(lambda: recurse(0))
    assert e.value.name == "RecursionError"
