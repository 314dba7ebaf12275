"""Bounded property-based fuzzing of every registered reader (the long campaign is fuzz/fuzz.py).

Contract: any input ends in a result or a FinalfusionError/OSError, within an
address-space limit -- never another exception or a runaway allocation.
The reader registry, the mutations and the runner are fuzz/fuzz.py's own, so
a reader added there (one line) is fuzzed here too.
"""

from __future__ import annotations

import functools
import io
import json
import random
import struct
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import TESTDATA, load_fuzz

fuzz = load_fuzz()
SETTINGS = settings(max_examples=300, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
# Readers of bundles (directories, the command line) run here only in the fuzzer's worker subprocess (tests/test_fuzz_dirs.py):
# a native library may kill the process on a crafted directory, and a FIFO in one blocks.
READERS = [name for name in fuzz.READERS if name not in fuzz.BUNDLE_READERS and fuzz.seed_inputs(name)]


@pytest.fixture(autouse=True)
def short_exercise(monkeypatch: pytest.MonkeyPatch) -> None:
    """exercise()'s long unknown words at 1-4 KiB here (the campaign's go to 1 MiB, a batch of 1 MiB), no generated inputs.

    Hypothesis runs 300 inputs per reader; 1 MiB words would make this part
    of the suite slow. Long words at full size and the generators are the
    campaign's and tests/test_fuzz_structured.py's. The same settings reach
    the worker subprocesses and jobs through ``$FF_FUZZ_SET``.
    """
    overrides: dict[str, object] = {"LONG_LOOKUP_BYTES": [1 << 10, 1 << 12], "LONG_LOOKUP_WEIGHTS": [1, 1], "LONG_BATCH_BYTES": 1 << 14}
    overrides |= {"LONG_BATCH_SMALL_BYTES": 1 << 12, "GENERATED_RATE": 0.0}
    if not nonfinite_writes_fixed():
        overrides["TEXT_ROUND_TRIP_MAX_VALUES"] = 0
    for name, value in overrides.items():
        monkeypatch.setattr(fuzz, name, tuple(value) if isinstance(value, list) else value)
    monkeypatch.setenv("FF_FUZZ_SET", json.dumps(overrides))


@functools.cache
def nonfinite_writes_fixed() -> bool:
    """Whether a NaN row is refused by write_word2vec or read back by load_word2vec (the non-finite-norms fix of issue 13).

    Until then exercise()'s text round trips would flag every mutated input
    whose rows overflow or hold NaN (an open class, worked on elsewhere; the
    campaign reports it): they are switched off here, and on by themselves
    once the fix is in.
    """
    from finalfusion import Embeddings, FinalfusionError
    from finalfusion.compat import load_word2vec, write_word2vec
    from finalfusion.storage import NdArray
    from finalfusion.vocab import SimpleVocab

    buf = io.BytesIO()
    try:
        write_word2vec(buf, Embeddings(NdArray(np.array([[np.nan, 1.0]], np.float32)), SimpleVocab(["a"])))
        load_word2vec(buf.getvalue())
    except FinalfusionError as exc:
        return "NaN" not in str(exc) or buf.tell() == 0
    return True


def check(reader: str, data: bytes) -> None:
    with fuzz.address_space_limit(1024):
        out = fuzz.run_one(fuzz.READERS[reader], data)
    assert out["status"] in ("ok", "error"), out.get("tb", out)


def test_every_reader_has_seeds() -> None:
    assert TESTDATA.is_dir(), "tests/data/testdata is part of the repository"
    missing = [name for name in fuzz.READERS if not fuzz.seed_inputs(name)]
    assert not missing
    assert {"finalfusion", "finalfusion-mmap", "finalfusion-file-mmap"} <= set(READERS)


@pytest.mark.parametrize("reader", READERS)
def test_seeds_read(reader: str) -> None:
    # The unmutated seeds go through the same runner: they are the fuzzer's baseline.
    statuses = set()
    for data in fuzz.seed_inputs(reader):
        with fuzz.address_space_limit(1024):
            out = fuzz.run_one(fuzz.READERS[reader], data)
        assert out["status"] in ("ok", "error"), out.get("tb", out)
        statuses.add(out["status"])
    assert "ok" in statuses


@pytest.mark.parametrize("reader", READERS)
@pytest.mark.slow
def test_mutated_seeds(reader: str) -> None:
    seeds = fuzz.seed_inputs(reader)

    @SETTINGS
    @given(seed=st.sampled_from(seeds), rng_seed=st.integers(0, 2**32 - 1))
    def run(seed: bytes, rng_seed: int) -> None:
        check(reader, fuzz.mutate(seed, random.Random(rng_seed), seeds))

    run()


FIELD = st.one_of(st.sampled_from(fuzz.INTERESTING_INTS), st.integers(0, 2**64 - 1), st.integers(0, 300))


@st.composite
def payload(draw: st.DrawFn) -> bytes:
    """Chunk bodies made of plausible fields: u32/u64 counts, short strings, float data, padding."""
    parts = []
    for kind in draw(st.lists(st.sampled_from(["u32", "u64", "str", "raw"]), max_size=12)):
        if kind == "u32":
            parts.append(struct.pack("<I", draw(FIELD) % 2**32))
        elif kind == "u64":
            parts.append(struct.pack("<Q", draw(FIELD)))
        elif kind == "str":
            text = draw(st.text(max_size=8)).encode("utf-8", "surrogatepass")
            parts.append(struct.pack("<I", len(text)) + text)
        else:
            parts.append(draw(st.binary(max_size=64)))
    return b"".join(parts)


@SETTINGS
@given(
    chunks=st.lists(st.tuples(st.integers(0, 11), payload(), st.integers(-8, 8)), min_size=1, max_size=4),
    header=st.one_of(st.none(), st.lists(st.integers(0, 11), max_size=5)),
)
@pytest.mark.slow
def test_structured_files(chunks: list[tuple[int, bytes, int]], header: list[int] | None) -> None:
    """Well-framed files whose chunk ids, field values and declared lengths are drawn at random."""
    ids = [cid for cid, _, _ in chunks] if header is None else header
    data = b"FiFu" + struct.pack(f"<II{len(ids)}I", 0, len(ids), *ids)
    for cid, body, delta in chunks:
        data += struct.pack("<IQ", cid, max(len(body) + delta, 0)) + body
    for reader in ("finalfusion", "finalfusion-mmap", "finalfusion-file-mmap"):
        check(reader, data)


@pytest.mark.slow
def test_campaign_runs_workers_and_counts(tmp_path: Path) -> None:
    # The stand-alone loop itself: worker subprocess under RLIMIT_AS, statistics, no findings on fixed code.
    stats = fuzz.campaign(["finalfusion"], 2.0, 3, 10.0, 1024, 1000, tmp_path, 1 << 20)
    counts = stats["readers"]["finalfusion"]
    assert stats["executions"] == sum(counts.values()) > 0
    assert counts.get("error", 0) > 0
    assert stats["findings"] == []
    assert not list(tmp_path.iterdir())


def test_campaign_stops_after_a_number_of_executions(tmp_path: Path) -> None:
    stats = fuzz.campaign(["finalfusion", "word2vec"], 600.0, 5, 10.0, 1024, 1000, tmp_path, 1 << 20, executions=7)
    assert stats["executions"] == 7
    assert stats["summary"]["finalfusion"]["executions"] == 4
    assert stats["summary"]["word2vec"]["executions"] == 3
    for row in stats["summary"].values():
        assert row["ok"] + row["error"] + row["findings"] == row["executions"]
    table = fuzz.markdown_table(stats, "`abc1234`")
    assert "| finalfusion | `abc1234` | 4 |" in table
    assert "| **all** | `abc1234` | 7 |" in table


@pytest.mark.slow
def test_jobs_split_the_executions_and_add_up(tmp_path: Path) -> None:
    out = tmp_path / "stats.json"
    code = fuzz.main(["--executions", "5", "--jobs", "2", "--reader", "finalfusion,text", "--crashers", str(tmp_path / "c"), "--out", str(out)])
    assert code == 0
    stats = json.loads(out.read_text(encoding="utf-8"))
    assert stats["jobs"] == 2
    assert stats["executions"] == 5  # 3 + 2
    assert sum(row["executions"] for row in stats["summary"].values()) == 5
    assert set(stats["summary"]) == {"finalfusion", "text"}
    assert stats["findings"] == []


def test_overrides_reach_workers_and_refuse_unknown_names(monkeypatch: pytest.MonkeyPatch) -> None:
    assert fuzz.GENERATED_RATE == 0.0
    monkeypatch.setenv("FF_FUZZ_SET", json.dumps({"NO_SUCH_NAME": 1}))
    with pytest.raises(SystemExit, match="NO_SUCH_NAME"):
        fuzz.apply_overrides()
    with pytest.raises(RuntimeError, match="failed to start"):  # the worker subprocess reads $FF_FUZZ_SET too
        fuzz.Worker(1024, 1000)


def test_summary_counts_findings_per_reader() -> None:
    stats = {"readers": {"text": {"ok": 2, "error": 5, "crash": 1, "hang": 1}}, "findings": ["text-crash-0123456789ab.bin"]}
    assert fuzz.summarize(stats) == {"text": {"executions": 9, "ok": 2, "error": 5, "findings": 2, "distinct": 1}}


def test_findings_are_saved_for_replay(tmp_path: Path) -> None:
    from test_fuzz_regressions import reader_of

    out = {"status": "crash", "type": "ValueError", "where": "x.py:1", "msg": "boom", "tb": "Traceback ..."}
    path = fuzz.save_crasher("finalfusion-mmap", b"FiFu", out, tmp_path)
    assert reader_of(path) == "finalfusion-mmap"
    assert path.read_bytes() == b"FiFu"
    assert "ValueError" in path.with_suffix(".txt").read_text(encoding="utf-8")


def test_runaway_allocation_is_a_finding() -> None:
    # What the worker's RLIMIT_AS is for: an 8 GiB allocation becomes an "alloc" finding, not an OOM kill.
    import numpy as np

    def greedy(data: bytes) -> object:
        return np.ones(2**33, dtype=np.uint8)

    with fuzz.address_space_limit(256):
        out = fuzz.run_one(greedy, b"")
    assert out["status"] == "alloc"
    assert out["type"] == "MemoryError"
    assert fuzz.run_one(lambda data: int("x"), b"")["status"] == "crash"


def _endless_cases() -> list[tuple[str, int]]:
    """Two endless inputs per reader (for ``load``, the finalfusion seeds have their own test below)."""
    return [(reader, k) for reader in READERS for k in range(2)]


@pytest.mark.parametrize(("reader", "k"), _endless_cases())
def test_endless_gzip_inputs_stay_bounded(reader: str, k: int) -> None:
    """fuzz.endless_gzip: a seed cut anywhere and continued by a 1.5 GiB run without any terminator (issue 13, class 3)."""
    rng = random.Random(f"{reader}-{k}")
    seeds = [s for s in fuzz.seed_inputs(reader) if not (reader == "load" and _is_fifu(s))]
    check(reader, fuzz.endless_gzip(rng.choice(seeds), rng))


def _is_fifu(data: bytes) -> bool:
    import gzip

    return data.startswith(b"FiFu") or (data.startswith(b"\x1f\x8b") and gzip.decompress(data)[:4] == b"FiFu")


@pytest.mark.parametrize("k", range(4))
def test_endless_gzip_finalfusion_seeds_stay_bounded(k: int) -> None:
    """fuzz.endless_gzip over the finalfusion seeds only, through ``load`` (the sniffer hands the gzip stream to the container)."""
    rng = random.Random(f"fifu-{k}")
    seeds = [s for s in fuzz.seed_inputs("load") if _is_fifu(s)]
    check("load", fuzz.endless_gzip(rng.choice(seeds), rng))


def test_endless_gzip_finalfusion_stream_stays_bounded() -> None:
    # A finalfusion stream is parsed chunk by chunk (container._read_stream), never read whole first.
    import gzip

    seed = next(s for s in fuzz.seed_inputs("load") if s.startswith(b"FiFu"))
    member = fuzz._endless_member(b"a")
    data = gzip.compress(seed[: len(seed) // 2], mtime=0) + member * (fuzz.ENDLESS_BYTES // fuzz._ENDLESS_MEMBER)
    check("load", data)


def test_answers_of_a_max_dims_file_are_allowed_for() -> None:
    """A file of 0 rows may be ``MAX_DIMS`` wide in 72 bytes; the 18 lookups of ``exercise()``'s batch are then 72 MiB of answer.

    The campaign reported that peak as "an allocation for a 72-byte input" (the worker allowed 64 MiB): the width is within
    its limit, the rows are checked against the bytes (0 x 2^20 floats), and a batch answer is ``len(batch) x dims`` by
    definition. The worker's allowance now counts twice the answers ``exercise()`` asks for.
    """
    from finalfusion import Embeddings, limits, load_finalfusion
    from finalfusion.storage import NdArray
    from finalfusion.vocab import SimpleVocab

    buf = io.BytesIO()
    Embeddings(NdArray(np.zeros((0, limits.MAX_DIMS), dtype=np.float32)), SimpleVocab([])).write(buf)
    data = buf.getvalue()
    assert len(data) == 72
    fuzz.QUERY_BYTES[0] = fuzz.ANSWER_BYTES[0] = 0
    assert fuzz.run_one(fuzz.READERS["finalfusion-file-mmap"], data) == {"status": "ok"}
    answer = load_finalfusion(data).embedding_batch(["fuzzing", "", "üüü"] * 6)[0]  # exercise()'s batch of unknown words
    assert answer.nbytes == 18 * 4 * limits.MAX_DIMS > 64 * 2**20
    assert fuzz.rss_allowance(len(data), 1000) >= 2 * answer.nbytes


# --- remote files through a hostile server (reader remote-http) ---------------------------------------------------

needs_remote = pytest.mark.skipif("remote-http" in fuzz.UNAVAILABLE, reason=f"fuzz reader remote-http: {fuzz.UNAVAILABLE.get('remote-http')}")


@needs_remote
def test_every_server_behaviour_has_a_seed() -> None:
    # one hand-made seed per misbehaviour of the range answers and of the HEAD request (fuzz/seeds/remote-*.http)
    kinds = {fuzz.REMOTE_KINDS[fuzz.remote_parts(p.read_bytes())[0][0] % len(fuzz.REMOTE_KINDS)] for p in fuzz.seed_files("remote-http")}
    assert kinds == set(fuzz.REMOTE_KINDS)
    heads = {fuzz.REMOTE_HEAD_KINDS[fuzz.remote_parts(p.read_bytes())[0][3] % len(fuzz.REMOTE_HEAD_KINDS)] for p in fuzz.seed_files("remote-http")}
    assert heads == set(fuzz.REMOTE_HEAD_KINDS)


@needs_remote
def test_the_remote_generator_is_deterministic_and_draws_every_behaviour() -> None:
    gen = fuzz.GENERATORS["remote_http_structured"][1]
    assert fuzz.generators_for("remote-http") == ["remote_http_structured"]
    for seed in (0, 1, 7):
        assert gen(random.Random(seed), "remote-http") == gen(random.Random(seed), "remote-http")
    drawn = [fuzz.remote_parts(gen(random.Random(seed), "remote-http")) for seed in range(300)]
    assert {fuzz.REMOTE_KINDS[c[0] % len(fuzz.REMOTE_KINDS)] for c, _ in drawn} == set(fuzz.REMOTE_KINDS)
    assert {body[:4] for _, body in drawn} >= {b"FiFu", b"GGUF"}


@needs_remote
def test_the_oracle_flags_a_wrong_vector() -> None:
    # the reader's oracle itself: a load that gives other vectors than the served bytes give locally is a finding
    seed = next(p for p in fuzz.seed_files("remote-http") if p.name == "remote-honest.http").read_bytes()
    body = fuzz.remote_parts(seed)[1]
    other = bytearray(body)
    other[-8:] = bytes(8)  # the file's last two floats (of its norms chunk) zeroed: it loads, with other norms
    real_load = fuzz._remote_loader

    def swapped(control: bytes, data: bytes) -> tuple[object, dict[str, object]]:
        load, kwargs = real_load(control, data)
        return (lambda source, **kw: load(bytes(other) if isinstance(source, str) else source, **kw)), kwargs

    import unittest.mock

    with unittest.mock.patch.object(fuzz, "_remote_loader", swapped):
        out = fuzz.run_one(fuzz.READERS["remote-http"], seed)
    assert out["status"] == "crash", out
    assert out["where"] == "remote-wrong-vectors", out


@needs_remote
def test_remote_campaign_finds_nothing(tmp_path: Path) -> None:
    # a short campaign of the reader in the worker subprocess: the hostile server's answers end in the served file's
    # vectors or an OSError / FormatError, never a finding
    stats = fuzz.campaign(["remote-http"], 600.0, 37, 10.0, 1024, 1000, tmp_path, 1 << 20, executions=60)
    counts = stats["readers"]["remote-http"]
    assert stats["executions"] == 60
    assert counts.get("ok", 0) > 0, counts
    assert counts.get("error", 0) > 0, counts
    assert stats["findings"] == [], stats["findings"]
