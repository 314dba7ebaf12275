"""Saved indexes someone else crafted: the native libraries never see a backend file that was not checked.

Every index here is built and saved by the real library (hnswlib, voyager,
usearch, faiss); then its ``index.bin`` is changed the way anyone can (a
few bytes, truncation, another backend's or another shape's file) and the
header's size and digest are recomputed, so only the backend's own checks
stand between the bytes and the library. The loads and queries run in a
child process, so a crash (SIGSEGV) fails the test instead of ending pytest;
every case must end in a :class:`FormatError` at load (targeted mutations),
or in a FormatError or a correctly shaped answer (random mutations).
"""

from __future__ import annotations

import json
import shutil
import struct
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from finalfusion import Embeddings, FormatError, NdArray, SimpleVocab

ann = pytest.importorskip("finalfusion.ann")
for _module in ("hnswlib", "voyager", "usearch", "faiss"):
    pytest.importorskip(_module)

from finalfusion.ann._graphs import VOYAGER_HEADER  # noqa: E402
from finalfusion.ann._persist import _edge_digest  # noqa: E402

N, DIMS, M = 600, 8, 8
PARAMS: dict[str, dict[str, Any]] = {
    "hnswlib": {"M": M, "ef_construction": 40, "ef": 32},
    "voyager": {"M": M, "ef_construction": 40, "ef": 32},
    "usearch": {"M": M, "ef_construction": 40, "ef": 32},
    "usearch-f16": {"M": M, "ef_construction": 40, "ef": 32, "scalar": "f16"},
    "faiss-hnsw": {"M": M, "ef_construction": 40, "ef": 32},
    "faiss-ivf": {"nlist": 8, "nprobe": 4},
    "faiss-ivfpq": {"nlist": 8, "m": 4, "nbits": 4, "nprobe": 4, "train_rows": 600},
}
#: Random mutations per backend (seeded; each is loaded and queried in the child).
RANDOM_CASES = 300
#: The child: loads each ``(name, directory, mmap)`` it is given, queries it, and prints one JSON line per case.
CHILD = textwrap.dedent(
    """
    import json, sys
    import numpy as np
    from finalfusion import FormatError, load_finalfusion
    from finalfusion.ann import load_index
    emb = load_finalfusion(sys.argv[1])
    queries = np.load(sys.argv[2])
    for line in sys.stdin:
        name, path, mmap = json.loads(line)
        print(json.dumps({"case": name, "started": True}), flush=True)
        try:
            ix = load_index(path, emb, mmap=mmap, verify="file")
        except FormatError as exc:
            out = {"case": name, "outcome": "FormatError", "at": "load", "message": str(exc)}
        else:
            try:
                ids, scores = ix.search(queries, 10)
            except FormatError as exc:
                out = {"case": name, "outcome": "FormatError", "at": "search", "message": str(exc)}
            else:
                shaped = ids.shape == scores.shape == (len(queries), 10) and bool(((ids >= -1) & (ids < len(emb.vocab))).all())
                out = {"case": name, "outcome": "answer" if shaped else "bad answer", "at": "search", "message": ""}
        print(json.dumps(out), flush=True)
    """
)


def backend_of(kind: str) -> str:
    return kind.split("-f16")[0]


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Embeddings (saved, for the child), queries and one saved index per backend, plus a usearch/hnswlib/voyager index of other dims."""
    root = tmp_path_factory.mktemp("hostile")
    rng = np.random.default_rng(7)
    rows = rng.standard_normal((N, DIMS)).astype(np.float32)
    emb = Embeddings(NdArray(rows), SimpleVocab([f"w{i}" for i in range(N)]))
    emb.write(str(root / "emb.fifu"))
    queries = (rows[:5] / np.linalg.norm(rows[:5], axis=1, keepdims=True)).astype(np.float32)
    np.save(root / "queries.npy", queries)
    saved = {}
    for kind, params in PARAMS.items():
        ann.build_index(emb, backend_of(kind), threads=1, **params).save(root / kind)
        saved[kind] = root / kind
    wide = Embeddings(NdArray(rng.standard_normal((N, DIMS + 4)).astype(np.float32)), SimpleVocab([f"w{i}" for i in range(N)]))
    other_dims = {}
    for kind in ("hnswlib", "voyager", "usearch", "faiss-hnsw"):
        ann.build_index(wide, kind, threads=1, **PARAMS[kind]).save(root / f"{kind}-wide")
        other_dims[kind] = root / f"{kind}-wide"
    return {"root": root, "emb": emb, "saved": saved, "other_dims": other_dims}


def mutated(world: dict[str, Any], kind: str, name: str, change: Callable[[bytearray], bytes | bytearray]) -> Path:
    """A copy of the saved ``kind`` index whose ``index.bin`` is ``change(bytes)``, with the header's size and digest recomputed."""
    out = world["root"] / "cases" / kind / name
    if out.exists():
        shutil.rmtree(out)
    shutil.copytree(world["saved"][kind], out)
    data = change(bytearray((out / "index.bin").read_bytes()))
    (out / "index.bin").write_bytes(bytes(data))
    size, digest = _edge_digest(str(out / "index.bin"))
    header = json.loads((out / "ann.json").read_text())
    header["index_file"] = {"size": size, "digest": digest}
    (out / "ann.json").write_text(json.dumps(header))
    return out


def run_child(world: dict[str, Any], cases: list[tuple[str, Path, bool]]) -> dict[str, dict[str, Any]]:
    """Load and query every case in one child process; a crash fails the test, naming the case it crashed on."""
    lines = "".join(json.dumps([name, str(path), mmap]) + "\n" for name, path, mmap in cases)
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, str(world["root"] / "emb.fifu"), str(world["root"] / "queries.npy")],
        input=lines,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    results: dict[str, dict[str, Any]] = {}
    started = None
    for line in proc.stdout.splitlines():
        record = json.loads(line)
        if record.get("started"):
            started = record["case"]
        else:
            results[record["case"]] = record
    assert proc.returncode == 0, f"the child died ({proc.returncode}) on case {started}: {proc.stderr[-2000:]}"
    assert len(results) == len(cases)
    return results


# -- targeted mutations -----------------------------------------------------------------------
def put(fmt: str, at: int, value: int) -> Callable[[bytearray], bytearray]:
    """Write ``value`` as the :mod:`struct` field ``fmt`` at byte ``at``."""

    def change(b: bytearray) -> bytearray:
        struct.pack_into(fmt, b, at, value)
        return b

    return change


def u16(at: int, value: int) -> Callable[[bytearray], bytearray]:
    return put("<H", at, value)


def u32(at: int, value: int) -> Callable[[bytearray], bytearray]:
    return put("<I", at, value)


def u64(at: int, value: int) -> Callable[[bytearray], bytearray]:
    return put("<Q", at, value)


def cut(keep: float) -> Callable[[bytearray], bytearray]:
    return lambda b: b[: int(len(b) * keep)]


def hnsw_cases(data: bytes, start: int) -> dict[str, Callable[[bytearray], bytearray]]:
    """Targeted mutations of an hnswlib layout beginning at ``start`` (hnswlib: 0, voyager: after its header)."""
    fields = struct.unpack_from("<QQQQQQiIQQQdQ", data, start)
    count, per_el, max_level, max_m, max_m0 = fields[2], fields[3], fields[6], fields[8], fields[9]
    level0 = start + 96
    tail = level0 + count * per_el
    # the first row with upper levels, and a row without (a neighbour that is not on level 1)
    words = np.frombuffer(data, dtype="<u4", offset=tail, count=(len(data) - tail) // 4)
    pos, row, upper, flat = 0, 0, None, None
    while row < count:
        size = int(words[pos])
        if size and upper is None:
            upper = tail + 4 * pos
        if not size and flat is None:
            flat = row
        pos += 1 + size // 4
        row += 1
    assert upper is not None
    assert flat is not None
    return {
        "entry point out of range": u32(start + 52, count + 3),
        "entry point not on the top level": u32(start + 52, flat),
        "max level inflated": u32(start + 48, max_level + 5),
        "neighbour id out of range": u32(level0 + 4, count + 11),
        "neighbour id huge": u32(level0 + 4, 0xFFFFFFF0),
        "level-0 list longer than maxM0": u16(level0, max_m0 + 1),
        "row marked deleted": lambda b: b[: level0 + 2] + b"\x01" + b[level0 + 3 :],
        "element count inflated": u64(start + 16, count + 1000),
        "max elements inflated": u64(start + 8, 1 << 40),
        "maxM inflated": u64(start + 64, max_m + 100),
        "size per element changed": u64(start + 24, per_el + 4),
        "label out of range": u64(level0 + fields[4], N + 1),
        "upper list size not whole": u32(upper, 4),
        "upper list size inflated": u32(upper, 4 * (1 + max_m) * 40),
        "upper list longer than maxM": u32(upper + 4, max_m + 1),
        "upper neighbour out of range": u32(upper + 8, count + 5),
        "upper neighbour not on that level": u32(upper + 8, flat),
        "truncated in the header": cut(0.001),
        "truncated in level 0": cut(0.4),
        "truncated in the upper levels": lambda b: b[:-3],
        "data appended": lambda b: b + b"\0" * 8,
    }


def usearch_cases(data: bytes) -> dict[str, Callable[[bytearray], bytearray]]:
    rows, cols = struct.unpack_from("<II", data, 0)
    head = 8 + rows * cols
    graph = head + 64
    size, conn, base, max_level, _ = struct.unpack_from("<5Q", data, graph)
    levels_at = graph + 40
    levels = np.frombuffer(data, dtype="<i2", offset=levels_at, count=size).astype(np.int64)
    nodes = levels_at + 2 * size
    node_bytes = 10 + (4 + 4 * base) + (4 + 4 * conn) * levels
    starts = nodes + np.concatenate(([0], np.cumsum(node_bytes)[:-1]))
    up = int(np.flatnonzero(levels > 0)[0])
    flat = int(np.flatnonzero(levels == 0)[0])
    upper = int(starts[up]) + 10 + 4 + 4 * base
    first = int(starts[0])
    return {
        "entry slot out of range": u64(graph + 32, size + 3),
        "entry slot not on the top level": u64(graph + 32, flat),
        "max level inflated": u64(graph + 24, max_level + 5),
        "graph size inflated": u64(graph, size + 1000),
        "rows inflated": u32(0, rows + 1000),
        "present count changed": u64(head + 17, rows + 1),
        "deleted count set": u64(head + 25, 1),
        "dims changed": u64(head + 33, DIMS + 1),
        "connectivity inflated": u64(graph + 8, conn + 100),
        "level table entry changed": u16(levels_at + 2 * flat, 3),
        "level table entry negative": u16(levels_at + 2 * flat, 0xFFFF),
        "node level differs": u16(first + 8, int(levels[0]) + 1),
        "key out of range": u64(first, N + 5),
        "base list longer than allowed": u32(first + 10, base + 1),
        "base neighbour out of range": u32(first + 14, size + 9),
        "upper list longer than allowed": u32(upper, conn + 1),
        "upper neighbour out of range": u32(upper + 4, size + 9),
        "upper neighbour not on that level": u32(upper + 4, flat),
        "truncated in the rows": cut(0.2),
        "truncated in the graph": lambda b: b[:-5],
        "data appended": lambda b: b + b"\0" * 8,
    }


def targeted(world: dict[str, Any], kind: str) -> dict[str, Callable[[bytearray], bytearray]]:
    data = (world["saved"][kind] / "index.bin").read_bytes()
    if kind == "hnswlib":
        return hnsw_cases(data, 0)
    if kind == "voyager":
        cases = hnsw_cases(data, VOYAGER_HEADER.size)
        cases["voyager dims changed"] = u32(8, DIMS + 1)
        cases["voyager space changed"] = lambda b: b[:12] + b"\x02" + b[13:]
        cases["voyager storage changed"] = lambda b: b[:13] + b"\x10" + b[14:]
        cases["voyager version changed"] = u32(4, 7)
        return cases
    return usearch_cases(data)


@pytest.mark.parametrize("kind", ["hnswlib", "voyager", "usearch", "usearch-f16"])
def test_targeted_mutations_are_refused_at_load(world: dict[str, Any], kind: str) -> None:
    cases = [
        (f"{name}{' (mapped)' if mmap else ''}", mutated(world, kind, name.replace(" ", "_"), change), mmap)
        for name, change in targeted(world, kind).items()
        for mmap in (False, True)
    ]
    results = run_child(world, cases)
    for name, _, _ in cases:
        got = results[name]
        assert (got["outcome"], got["at"]) == ("FormatError", "load"), (name, got)
        assert f"{backend_of(kind)} index" in got["message"], (name, got["message"])


@pytest.mark.parametrize("kind", sorted(PARAMS))
def test_another_backends_file_or_other_dims_under_the_header_is_refused(world: dict[str, Any], kind: str) -> None:
    cases = []
    for other in sorted(PARAMS):
        if backend_of(other) != backend_of(kind):
            data = (world["saved"][other] / "index.bin").read_bytes()
            cases.append((f"{other} file", mutated(world, kind, f"from-{other}", lambda b, d=data: d), True))
    if backend_of(kind) in world["other_dims"]:
        data = (world["other_dims"][backend_of(kind)] / "index.bin").read_bytes()
        cases.append((f"{DIMS + 4} dims", mutated(world, kind, "wide", lambda b, d=data: d), True))
    results = run_child(world, cases)
    for name, _, _ in cases:
        got = results[name]
        assert (got["outcome"], got["at"]) == ("FormatError", "load"), (kind, name, got)


def test_a_usearch_file_of_the_other_row_type_is_refused(world: dict[str, Any]) -> None:
    data = (world["saved"]["usearch-f16"] / "index.bin").read_bytes()
    path = mutated(world, "usearch", "f16-under-f32", lambda b: bytearray(data))
    results = run_child(world, [("f16 under f32", path, False)])
    assert results["f16 under f32"]["outcome"] == "FormatError"
    assert "f32" in results["f16 under f32"]["message"]


# -- random mutations -----------------------------------------------------------------------------
def random_change(rng: np.random.Generator) -> Callable[[bytearray], bytearray]:
    """A few bytes overwritten (random bytes, or a small or huge u32), or the file cut."""
    choice = int(rng.integers(0, 10))
    if choice == 0:
        keep = float(rng.random())
        return cut(keep)
    edits = [(float(rng.random()), int(rng.integers(0, 3)), int(rng.integers(0, 1 << 32))) for _ in range(int(rng.integers(1, 5)))]

    def change(b: bytearray) -> bytearray:
        for where, how, value in edits:
            at = min(int(where * len(b)), len(b) - 4)
            if how == 0:
                b[at] = value & 0xFF
            elif how == 1:
                struct.pack_into("<I", b, at, value % 4096)
            else:
                struct.pack_into("<I", b, at, value)
        return b

    return change


@pytest.mark.parametrize("kind", sorted(PARAMS))
def test_random_mutations_never_crash(world: dict[str, Any], kind: str) -> None:
    """Seeded, bounded: each mutated file gives a FormatError or a correctly shaped answer, in a child that must not die."""
    rng = np.random.default_rng(sum(map(ord, kind)))
    cases = [(f"random {i}", mutated(world, kind, f"random-{i}", random_change(rng)), bool(i % 2)) for i in range(RANDOM_CASES)]
    results = run_child(world, cases)
    outcomes = {name: results[name]["outcome"] for name, _, _ in cases}
    assert set(outcomes.values()) <= {"FormatError", "answer"}, {k: v for k, v in outcomes.items() if v not in ("FormatError", "answer")}
    assert "FormatError" in outcomes.values()  # the mutations do reach the checks


# -- valid files, in process --------------------------------------------------------------------------
@pytest.mark.parametrize("kind", sorted(PARAMS))
def test_valid_indexes_load_mapped_or_not_and_answer_as_before(world: dict[str, Any], kind: str) -> None:
    emb = world["emb"]
    queries = np.load(world["root"] / "queries.npy")
    answers = [ann.load_index(world["saved"][kind], emb, mmap=mmap).search(queries, 10) for mmap in (False, True)]
    np.testing.assert_array_equal(answers[0][0], answers[1][0])
    assert (answers[0][0][:, 0] == np.arange(len(queries))).all()  # each query row finds itself first


class Failing:
    """A library's index whose search calls fail as the library's own would (everything else is the real index)."""

    def __init__(self, native: Any) -> None:
        self._native = native

    def __getattr__(self, name: str) -> Any:
        if name in ("knn_query", "query", "search", "search_c"):  # search_c: faiss's own search, which ours calls

            def fail(*args: Any, **kwargs: Any) -> Any:
                raise RuntimeError("native failure")

            return fail
        return getattr(self._native, name)


def test_errors_of_a_library_at_search_are_format_errors(world: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    """An error a backend's library raises while searching reaches the caller as a FormatError naming the library."""
    emb = world["emb"]
    queries = np.load(world["root"] / "queries.npy")
    for kind in ("hnswlib", "voyager", "usearch", "faiss-ivf"):
        ix = ann.load_index(world["saved"][kind], emb)
        monkeypatch.setattr(ix._impl, "_index", Failing(ix._impl._index))
        with pytest.raises(FormatError, match=f"{kind.split('-')[0]} cannot search: RuntimeError: native failure"):
            ix.search(queries, 3)
        with pytest.raises(FormatError, match=f"{kind.split('-')[0]} cannot search: RuntimeError: native failure"):
            emb.word_similarity(emb.vocab.words[1], 3, index=ix)  # one query: the backend's single-query search


def test_the_command_line_refuses_a_crafted_index(world: dict[str, Any]) -> None:
    """``finalfusion similar --index`` with a crafted graph: an error message and exit status, not a crash."""
    for kind, case in (("hnswlib", "entry point out of range"), ("voyager", "entry point out of range"), ("usearch", "entry slot out of range")):
        path = mutated(world, kind, "cli", targeted(world, kind)[case])
        proc = subprocess.run(
            [sys.executable, "-m", "finalfusion", "similar", str(world["root"] / "emb.fifu"), "--index", str(path), "-w", "w1"],
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        assert proc.returncode > 0, (kind, proc.returncode, proc.stderr)
        assert f"{kind} index: bad header field" in proc.stderr, (kind, proc.stderr)


def test_an_index_pickled_by_value_is_checked_too(world: dict[str, Any]) -> None:
    """Unpickling an index sent by value (``from_bytes``) checks the bytes like a load does."""
    script = textwrap.dedent(
        """
        import json, sys
        from finalfusion import FormatError
        from finalfusion.ann import _index
        from finalfusion.ann._persist import read_header
        for line in sys.stdin:
            path = json.loads(line)
            header = read_header(path)
            with open(path + "/index.bin", "rb") as f:
                data = f.read()
            try:
                _index._from_bytes(header["backend"], header["params"], header["fingerprint"].to_dict(), None, data)
                print("loaded", flush=True)
            except FormatError as exc:
                print("FormatError", str(exc)[:200], flush=True)
        """
    )
    cases = [
        mutated(world, "hnswlib", "by-value", targeted(world, "hnswlib")["neighbour id out of range"]),
        mutated(world, "voyager", "by-value", targeted(world, "voyager")["upper neighbour out of range"]),
        mutated(world, "usearch", "by-value", targeted(world, "usearch")["base neighbour out of range"]),
    ]
    proc = subprocess.run(
        [sys.executable, "-c", script], input="".join(json.dumps(str(p)) + "\n" for p in cases), capture_output=True, text=True, timeout=300, check=False
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = proc.stdout.splitlines()
    assert len(lines) == len(cases)
    assert all(line.startswith("FormatError") and "neighbour id is out of range" in line for line in lines), lines


# -- faiss IVF: inverted lists kept in another file ----------------------------------------------------
def faiss_ondisk_lists(world: dict[str, Any], kind: str, filename: str) -> bytes:
    """The saved ``kind`` index as faiss writes it once its lists are ``OnDiskInvertedLists`` (``ilod``) naming ``filename``.

    faiss itself makes such lists by reading an IVF file with ``IO_FLAG_MMAP``
    (lists mapped from that file, no name); ``filename`` is what a crafted
    file names instead.
    """
    import faiss

    index = faiss.read_index(str(world["saved"][kind] / "index.bin"), faiss.IO_FLAG_MMAP)
    lists = faiss.downcast_InvertedLists(faiss.extract_index_ivf(index).invlists)
    assert isinstance(lists, faiss.OnDiskInvertedLists)
    lists.filename = filename
    data = bytes(faiss.serialize_index(index))
    assert b"ilod" in data
    assert b"ilar" not in data
    return data


@pytest.mark.parametrize("kind", ["faiss-ivf", "faiss-ivfpq"])
def test_faiss_inverted_lists_in_another_file_are_refused(world: dict[str, Any], kind: str) -> None:
    """An ``ilod`` file (lists in another file) is refused at load: mapped, faiss would search through a null pointer (SIGSEGV,
    campaign 33); not mapped, it would open the file it names read-write -- here the original index, which faiss would map."""
    named = {"no name": "", "the original index named": str(world["saved"][kind] / "index.bin")}
    files = {what: faiss_ondisk_lists(world, kind, filename) for what, filename in named.items()}
    cases = [
        (f"{what}{' (mapped)' if mmap else ''}", mutated(world, kind, f"ilod-{i}", lambda b, d=data: bytearray(d)), mmap)
        for i, (what, data) in enumerate(files.items())
        for mmap in (False, True)
    ]
    results = run_child(world, cases)
    for name, _, _ in cases:
        got = results[name]
        assert (got["outcome"], got["at"]) == ("FormatError", "load"), (kind, name, got)
        assert "faiss index: the IVF index's inverted lists are not in its file" in got["message"], (kind, name, got["message"])


@pytest.mark.parametrize("kind", ["faiss-ivf", "faiss-ivfpq"])
def test_a_mapped_faiss_ivf_index_saves_and_pickles_its_rows(world: dict[str, Any], kind: str, tmp_path: Path) -> None:
    """Saved or pickled by value, an IVF index loaded memory-mapped writes the file it was loaded from, byte for byte (faiss
    alone would write its mapped lists as ``ilod`` lists in no file: no rows), and the copy loads and answers in a child."""
    from finalfusion.ann import _index

    ix = ann.load_index(world["saved"][kind], world["emb"], mmap=True)
    original = (world["saved"][kind] / "index.bin").read_bytes()
    assert ix._impl.to_bytes() == original
    ix.save(tmp_path / "copy")
    assert (tmp_path / "copy" / "index.bin").read_bytes() == original
    queries = np.load(world["root"] / "queries.npy")
    by_value = _index._from_bytes(kind, ix.params, ix.fingerprint.to_dict(), None, ix._impl.to_bytes())
    np.testing.assert_array_equal(by_value.search(queries, 10)[0], ix.search(queries, 10)[0])
    results = run_child(world, [(f"saved{' (mapped)' if mmap else ''}", tmp_path / "copy", mmap) for mmap in (False, True)])
    assert {got["outcome"] for got in results.values()} == {"answer"}, results


def test_a_faiss_file_that_declares_gigabytes_takes_none() -> None:
    """Found by the campaign: an IVF file of 1.5 KB whose inverted-list sizes were changed made faiss allocate and zero
    18 GB (780 MB under the fuzzer's address-space limit) before failing. faiss first reads a file in a child process
    whose memory is bounded by the file's size (``_faiss._probe``): there the allocation fails, and it is a FormatError."""
    pytest.importorskip("faiss")
    import resource

    from conftest import FUZZ_DIR, load_fuzz

    fuzz = load_fuzz()
    data = (FUZZ_DIR / "crashers" / "ann-index-alloc-6b8a22400224.bin").read_bytes()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    out = fuzz.run_one(fuzz.READERS["ann-index"], data)
    assert out["status"] == "error", out
    assert "faiss index" in out["msg"]
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 200 * 1024  # KiB: nothing near the declared size


def test_the_faiss_probe_works_in_a_fresh_interpreter_too(world: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    # beside a thread that is not the library's (fsspec's IO loop, say) the probe's child is a fresh interpreter, which
    # must import faiss before its memory is bounded (under the bound the import crashed it: every faiss file refused)
    import finalfusion._isolated as isolated

    monkeypatch.setattr(isolated, "fork_is_safe", lambda: False)
    test_a_faiss_file_that_declares_gigabytes_takes_none()
    for kind in ("faiss-ivf", "faiss-hnsw", "faiss-ivfpq"):
        test_valid_indexes_load_mapped_or_not_and_answer_as_before(world, kind)
