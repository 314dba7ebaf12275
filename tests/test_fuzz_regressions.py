"""Every input the fuzzer (fuzz/fuzz.py) ever flagged is replayed here and must now be handled.

"Handled" is the fuzzer's own contract, checked by its own runner: the reader
returns (and the result survives lookups and a write/re-read/write round trip
to the same bytes) or raises a FinalfusionError/OSError -- within a time
limit and an address-space limit. Files are named ``<reader>-<kind>-<sha1>.bin``
with a ``.txt`` holding the original traceback.
"""

from __future__ import annotations

import signal
import tracemalloc
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import FUZZ_DIR, load_fuzz
from finalfusion import FormatError, load_finalfusion
from test_hostile import build, ndarray, simple_vocab

CRASHERS = sorted((FUZZ_DIR / "crashers").glob("*.bin"))
#: Seconds an input may take before it counts as a hang.
LIMIT_S = 20


def reader_of(path: Path) -> str:
    return path.name.rsplit("-", 2)[0]


@pytest.fixture
def alarm() -> Iterator[None]:
    """Fail (instead of hanging the suite) when an input takes longer than LIMIT_S."""

    def timeout(signum: int, frame: object) -> None:
        raise TimeoutError(f"input took more than {LIMIT_S} s")

    old = signal.signal(signal.SIGALRM, timeout)
    signal.alarm(LIMIT_S)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def test_crashers_exist() -> None:
    # The campaign found real bugs; losing their inputs would silently drop these regression tests.
    assert len(CRASHERS) >= 2
    for path in CRASHERS:
        assert path.with_suffix(".txt").is_file(), path


@pytest.mark.parametrize("path", CRASHERS, ids=[p.name for p in CRASHERS])
def test_crasher_is_handled(path: Path, alarm: None, monkeypatch: pytest.MonkeyPatch) -> None:
    fuzz = load_fuzz()
    name = reader_of(path)
    if name not in fuzz.READERS:
        pytest.skip(f"reader {name!r} is not importable here (finalfusion.compat)")
    if name == "lightseq-hdf5":  # the bound the fuzzer's worker sets on the process reading HDF5 (else 60 s)
        monkeypatch.setattr("finalfusion.compat.lightseq.HDF5_SECONDS", fuzz.NATIVE_SECONDS)
    with fuzz.address_space_limit(1024):
        out = fuzz.run_one(fuzz.READERS[name], path.read_bytes())
    assert out["status"] in ("ok", "error"), out.get("tb", out)


def file_with_matrix(rows: int, cols: int, words: int = 1) -> bytes:
    """A SimpleVocab of ``words`` words and an NdArray claiming ``rows x cols`` without any data."""
    return build([(1, simple_vocab([f"w{i}" for i in range(words)])), (2, ndarray(rows, cols, data_rows=0))])


@pytest.mark.parametrize(("rows", "cols"), [(2**64 - 1, 0), (2**63 + 5, 0), (2**62, 0), (0, 2**32 - 1)])
@pytest.mark.parametrize("mmap", [False, True])
def test_zero_sized_matrix_with_unrepresentable_shape(rows: int, cols: int, mmap: bool) -> None:
    # Found by the fuzzer: 0 bytes of data fit any rows x 0 claim, but numpy
    # cannot build a (2**63, 0) array and raised a bare ValueError.
    data = file_with_matrix(rows, cols)
    if cols:  # (0, huge) is representable, but no embedding has 2**32 - 1 dimensions (limits.MAX_DIMS)
        with pytest.raises(FormatError, match="MAX_DIMS"):
            load_finalfusion(data, mmap=mmap)
        return
    with pytest.raises(FormatError, match="numpy cannot represent") as info:
        load_finalfusion(data, mmap=mmap)
    assert info.value.chunk == "NdArray"
    assert info.value.offset is not None


def test_small_file_claiming_2_40_rows_fails_without_allocating() -> None:
    # A ~1 KB file claiming 2**40 rows must fail before allocating anything of that order.
    data = file_with_matrix(2**40, 300, words=200)
    data += b"\x00" * (1024 - len(data) % 1024)
    tracemalloc.start()
    try:
        with pytest.raises(FormatError, match="does not fit"):
            load_finalfusion(data)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 64 * len(data), peak
