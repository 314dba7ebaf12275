"""Hostile TOML metadata (issue 13, class 4): bounded size, depth and items, every failure a FormatError.

Arrays nested 1,000 deep made the TOML parser recurse past Python's limit, a
20,000-part dotted key cost it seconds and gigabytes, a 5,000-digit
integer escaped as a plain ValueError, and 375 KB of short array elements
(20,000 ``[1.5, {a.b = 2}]``) took seconds. Each check runs in a forked child
under an address-space limit.
"""

from __future__ import annotations

import copy
import io
import re
from pathlib import Path

import numpy as np
import pytest

import finalfusion.limits as limits
from _bounded import ChildError, bounded
from finalfusion import Embeddings, FormatError, load_finalfusion, load_metadata
from finalfusion import metadata as metadata_module
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


def read_message(doc: bytes, via: str) -> str:
    """Read ``doc`` through ``via`` (from_toml, load_metadata or load_finalfusion): the FormatError's message, or "loaded"."""
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


@pytest.mark.parametrize("name", sorted(HOSTILE))
@pytest.mark.parametrize("via", ["load_metadata", "load_finalfusion", "from_toml"])
def test_hostile_metadata_is_a_format_error(name: str, via: str) -> None:
    msg = bounded(lambda: read_message(HOSTILE[name], via), extra_mb=300)
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
    for _ in range(14):
        shared = [shared, shared]  # 2**14 paths, 15 containers
    check_depth({"x": shared})
    for _ in range(46):
        shared = [shared, shared]  # 2**60 paths: to_toml would write 2**61 values
    with pytest.raises(ValueError, match=r"too many values.*MAX_METADATA_ITEMS"):
        check_depth({"x": shared})


def test_child_errors_name_the_exception() -> None:
    # The forked-child harness itself: an unbounded recursion comes back as RecursionError, not as a crash.
    def recurse(n: int) -> int:
        return recurse(n + 1) + 1

    with pytest.raises(ChildError) as e:
        bounded(lambda: recurse(0))
    assert e.value.name == "RecursionError"


# -- wide documents: many items (MAX_METADATA_ITEMS) ----------------------------------------------------


def _repeat(prefix: bytes, unit: bytes, suffix: bytes, count: int, sep: bytes = b"") -> bytes:
    return prefix + sep.join([unit] * count) + suffix


def _numbered(fmt: str, count: int) -> bytes:
    return "".join(fmt.format(i=i) for i in range(count)).encode()


#: Document shapes the TOML parser handles item by item, with ``n`` repetitions (the shapes bench/bench_metadata.py measures).
WIDE = {
    "array-of-inline-dotted": lambda n: _repeat(b"x = [", b"[1.5, {a.b = 2}]", b"]", n, b", "),
    "array-of-ints": lambda n: _repeat(b"x = [", b"1", b"]", n, b","),
    "array-of-empty-arrays": lambda n: _repeat(b"x = [", b"[]", b"]", n, b","),
    "array-of-empty-tables": lambda n: _repeat(b"x = [", b"{}", b"]", n, b","),
    "array-of-strings": lambda n: _repeat(b"x = [", b'""', b"]", n, b","),
    "many-keys": lambda n: _numbered("k{i} = true\n", n),
    "many-dotted-keys": lambda n: _numbered("a.b.k{i} = true\n", n),
    "inline-table-many-keys": lambda n: b"x = {" + _numbered("k{i} = true, ", n)[:-2] + b"}",
    "many-tables": lambda n: _numbered("[a.b.t{i}]\n", n),
    "many-array-tables": lambda n: _repeat(b"", b"[[a]]\n", b"", n),
    "comment-lines": lambda n: _repeat(b"", b"#\n", b"", n),
    "blank-lines": lambda n: _repeat(b"", b"\n", b"", n),
    "string-escapes": lambda n: _repeat(b'x = "', b"\\n", b'"', n),
    "multi-line-string-escapes": lambda n: _repeat(b'x = """', b"\\t", b'"""', n),
}


class TestManyItems:
    """Documents with more than ``MAX_METADATA_ITEMS`` items are refused before the parser sees them."""

    @pytest.mark.parametrize("shape", sorted(WIDE))
    def test_a_wide_document_is_refused_in_bounded_memory(self, shape: str) -> None:
        doc = WIDE[shape](limits.MAX_METADATA_ITEMS + 1)
        msg = bounded(lambda: read_message(doc, "load_finalfusion"), extra_mb=200)
        assert "Metadata: metadata has too many items" in msg
        assert f"expected at most {limits.MAX_METADATA_ITEMS} items (finalfusion.limits.MAX_METADATA_ITEMS; raise it to read more)" in msg
        found = int(re.findall(r"found (\d+) by this offset", msg)[0])  # a string's escapes count at once
        assert found == limits.MAX_METADATA_ITEMS + 1 or (shape.endswith("escapes") and found > limits.MAX_METADATA_ITEMS)

    @pytest.mark.parametrize("shape", sorted(WIDE))
    def test_the_limit_is_read_at_call_time(self, shape: str, monkeypatch: pytest.MonkeyPatch) -> None:
        doc = WIDE[shape](50)
        Metadata.from_toml(doc)  # within the default limit
        monkeypatch.setattr(limits, "MAX_METADATA_ITEMS", 40)
        with pytest.raises(FormatError, match=r"MAX_METADATA_ITEMS.*found (41|5\d) by this offset"):
            Metadata.from_toml(doc)
        with pytest.raises(FormatError, match="MAX_METADATA_ITEMS"):
            load_metadata(fifu(doc))
        monkeypatch.setattr(limits, "MAX_METADATA_ITEMS", 1000)
        assert load_metadata(fifu(doc)) == Metadata.from_toml(doc)

    @pytest.mark.slow
    def test_the_fuzz_finding_is_refused_and_loads_when_the_limit_is_raised(self, monkeypatch: pytest.MonkeyPatch) -> None:
        doc = WIDE["array-of-inline-dotted"](20_000)  # the campaign's 375 KB finding
        with pytest.raises(FormatError, match="MAX_METADATA_ITEMS"):
            load_metadata(fifu(doc))
        monkeypatch.setattr(limits, "MAX_METADATA_ITEMS", 20 * 20_000)
        meta = bounded(lambda: load_metadata(fifu(doc)).data, extra_mb=200)
        assert len(meta["x"]) == 20_000
        assert meta["x"][0] == [1.5, {"a": {"b": 2}}]

    def test_items_are_counted_exactly(self, monkeypatch: pytest.MonkeyPatch) -> None:
        # '.' '=' '[' '1' ',' '"x\n"' + its escape ',' '{' '=' '2' '}' ']' comment newline: 15 items
        doc = b'a.b = [1, "x\\n", {c = 2}] # note\n'
        monkeypatch.setattr(limits, "MAX_METADATA_ITEMS", 15)
        assert Metadata.from_toml(doc) == {"a": {"b": [1, "x\n", {"c": 2}]}}
        monkeypatch.setattr(limits, "MAX_METADATA_ITEMS", 14)
        with pytest.raises(FormatError, match="found 15 by this offset"):
            Metadata.from_toml(doc)

    def test_real_metadata_is_far_below_the_limit(self, monkeypatch: pytest.MonkeyPatch) -> None:
        # A training configuration of 50 parameters and a 4 MB tokenizer table: about a thousand items.
        table: dict[str, object] = {f"param_{i}": [0.025, "skipgram", True, {"min": 3, "max": 6}] for i in range(50)}
        table["tokenizer"] = {"kind": "sentencepiece", "encoding": "zlib+base64", "bytes": 4_000_000, "model": "QUJD" * 1_000_000}
        monkeypatch.setattr(limits, "MAX_METADATA_ITEMS", limits.MAX_METADATA_ITEMS // 32)
        assert Metadata.from_toml(Metadata(table).to_toml()) == table


class TestLinearPrescan:
    """The pre-scan never fails and retries a string: an open string is one token, found in one pass.

    The old pattern failed on a string without its closing quote and retried
    from the next quote, re-scanning the rest of the line each time: a line of
    escaped quotes of 16 KB took seconds, 1 MB would have taken hours.
    """

    @pytest.mark.parametrize(
        ("doc", "end"),
        [
            ('x = "' + '\\"' * 100_000 + "\ny = 1", "line"),
            ("x = '" + "a" * 400_000 + "\ny = 1", "line"),
            ('x = "abc\\', "text"),
            ('x = """' + '\\""' * 100_000, "text"),
            ("x = '''" + "''a" * 100_000, "text"),
        ],
        ids=["escaped-quotes", "open-literal", "backslash-at-end", "open-multi-line-basic", "open-multi-line-literal"],
    )
    def test_an_open_string_is_one_token_to_the_end_of_its_line_or_text(self, doc: str, end: str, monkeypatch: pytest.MonkeyPatch) -> None:
        tokens = list(metadata_module._SCAN.finditer(doc))
        assert [m.group() for m in tokens[:1]] == ["="]
        assert tokens[1].start() == 4
        assert tokens[1].end() == (doc.index("\n") if end == "line" else len(doc))
        assert len(tokens) <= 5
        monkeypatch.setattr(limits, "MAX_METADATA_ITEMS", 10**7)
        with pytest.raises(FormatError, match="not valid TOML"):
            Metadata.from_toml(doc)


class TestPythonValues:
    """Values given to ``Metadata(...)`` count one per key and list element, once per path; writing never makes unreadable TOML."""

    def test_too_many_values_are_refused(self, monkeypatch: pytest.MonkeyPatch) -> None:
        with pytest.raises(ValueError, match=r"too many values: expected at most 65536 \(finalfusion.limits.MAX_METADATA_ITEMS"):
            Metadata({"x": list(range(limits.MAX_METADATA_ITEMS))})
        meta = Metadata({"x": list(range(limits.MAX_METADATA_ITEMS - 1))})
        meta["y"] = [meta["x"]] * 3  # a mutable mapping: values can also grow later
        emb = Embeddings(NdArray(np.ones((1, 1), np.float32)), SimpleVocab(["a"]), metadata=meta)
        for action in (meta.to_toml, lambda: copy.deepcopy(meta), lambda: emb.write(io.BytesIO())):
            with pytest.raises(ValueError, match="MAX_METADATA_ITEMS"):
                action()
        monkeypatch.setattr(limits, "MAX_METADATA_ITEMS", 10)
        with pytest.raises(ValueError, match="found 11 or more"):
            Metadata({"x": list(range(10))})
        monkeypatch.setattr(limits, "MAX_METADATA_ITEMS", 11)
        assert Metadata({"x": list(range(10))})["x"][-1] == 9

    def test_what_is_written_can_be_read_back(self, monkeypatch: pytest.MonkeyPatch) -> None:
        meta = Metadata({f"k{i}": i for i in range(30_000)})  # 30,000 values, 120,000 items of TOML
        with pytest.raises(ValueError, match=r"cannot be written as TOML that can be read back.*MAX_METADATA_ITEMS"):
            meta.to_toml()
        with pytest.raises(ValueError, match="MAX_METADATA_ITEMS"):
            Embeddings(NdArray(np.ones((1, 1), np.float32)), SimpleVocab(["a"]), metadata=meta).write(io.BytesIO())
        monkeypatch.setattr(limits, "MAX_METADATA_ITEMS", 200_000)
        buf = io.BytesIO()
        Embeddings(NdArray(np.ones((1, 1), np.float32)), SimpleVocab(["a"]), metadata=meta).write(buf)
        assert load_metadata(buf.getvalue()) == meta

    def test_convert_metadata_files_go_through_the_same_bound(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        from finalfusion.cli._common import CliError
        from finalfusion.cli._convert import read_metadata

        path = tmp_path / "meta.toml"
        path.write_bytes(WIDE["array-of-inline-dotted"](20_000))
        with pytest.raises(CliError, match=r"meta\.toml: metadata has too many items.*MAX_METADATA_ITEMS; raise it to read more") as caught:
            read_metadata(str(path))
        assert str(caught.value).count("meta.toml") == 1  # the file is named once (issue 34)
        monkeypatch.setattr(limits, "MAX_METADATA_ITEMS", 20 * 20_000)
        assert len(read_metadata(str(path))["x"]) == 20_000
