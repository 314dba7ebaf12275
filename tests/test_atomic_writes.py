"""Atomic writes (``finalfusion._atomic``): what may be a target, a failure leaves the old file, the mode is kept,
the disk reservation and its errors, and the background writer passing on either side's error.

Whole-file writes through the container (two threads, full disks, symlinks, FIFOs) are in test_write.py and
test_write_targets.py.
"""

from __future__ import annotations

import errno
import io
import os
import stat
from pathlib import Path

import pytest

from finalfusion import _atomic
from finalfusion._atomic import atomic_output, preallocate, run_in_background


@pytest.mark.parametrize("bad", [b"x", bytearray(b"x"), memoryview(b"x"), 3])
def test_bytes_and_numbers_are_not_write_targets(bad: object) -> None:
    with pytest.raises(TypeError, match="write to a path"), atomic_output(bad):  # type: ignore[arg-type]
        pass


def test_a_file_object_is_written_in_place() -> None:
    buf = io.BytesIO(b"ab")
    buf.seek(2)
    with atomic_output(buf) as f:
        assert f is buf
        f.write(b"cd")
    assert buf.getvalue() == b"abcd"


def test_failed_write_keeps_target_and_removes_temporary(tmp_path: Path) -> None:
    target = tmp_path / "out.bin"
    target.write_bytes(b"old")

    def write_then_fail() -> None:
        with atomic_output(target) as f:
            f.write(b"partial")
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        write_then_fail()
    assert target.read_bytes() == b"old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.bin"]


def test_replace_keeps_mode_of_existing_target_and_fsyncs(tmp_path: Path) -> None:
    target = tmp_path / "out.bin"
    target.write_bytes(b"old")
    os.chmod(target, 0o640)
    with atomic_output(str(target), fsync=True) as f:
        f.write(b"new")
    assert target.read_bytes() == b"new"
    assert stat.S_IMODE(os.stat(target).st_mode) == 0o640


def test_size_preallocates_and_block_fills_it(tmp_path: Path) -> None:
    target = tmp_path / "big.bin"
    size = _atomic.PREALLOCATE_MIN + 5
    with atomic_output(target, size=size) as f:
        f.write(b"\1" * size)
    assert target.stat().st_size == size


def test_preallocate_reports_full_disk(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_atomic, "_fallocate", lambda: lambda fd, mode, off, size: -1)
    monkeypatch.setattr(_atomic, "ctypes_errno", lambda: errno.ENOSPC)
    with pytest.raises(OSError, match="cannot reserve") as err:
        preallocate(0, _atomic.PREALLOCATE_MIN, "the-output")
    assert err.value.errno == errno.ENOSPC
    assert err.value.filename == "the-output"


def test_preallocate_ignores_unsupported_filesystems(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []

    def failing(fd: int, mode: int, off: int, size: int) -> int:
        calls.append(size)
        return -1

    monkeypatch.setattr(_atomic, "_fallocate", lambda: failing)
    monkeypatch.setattr(_atomic, "ctypes_errno", lambda: errno.EOPNOTSUPP)
    preallocate(0, _atomic.PREALLOCATE_MIN)  # no error: the file just grows as it is written
    assert calls == [_atomic.PREALLOCATE_MIN]
    preallocate(0, 10)  # small: not even tried
    assert calls == [_atomic.PREALLOCATE_MIN]


def test_preallocate_without_fallocate_touches_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_atomic, "_fallocate", lambda: None)
    preallocate(-1, _atomic.PREALLOCATE_MIN)  # an invalid descriptor is never touched


def test_fallocate_is_not_looked_up_off_linux(monkeypatch: pytest.MonkeyPatch) -> None:
    _atomic._fallocate.cache_clear()
    monkeypatch.setattr(_atomic.sys, "platform", "darwin")
    try:
        assert _atomic._fallocate() is None
    finally:
        _atomic._fallocate.cache_clear()


def test_run_in_background_reraises_meanwhile_error_after_task_stops() -> None:
    done: list[str] = []

    def meanwhile() -> None:
        raise KeyError("head failed")

    with pytest.raises(KeyError, match="head failed"):
        run_in_background(lambda: done.append("task"), meanwhile)
    assert done == ["task"]


def test_run_in_background_reraises_task_error() -> None:
    def task() -> None:
        raise ValueError("tail failed")

    with pytest.raises(ValueError, match="tail failed"):
        run_in_background(task, lambda: None)


def test_a_socket_is_not_a_write_target(tmp_path: Path) -> None:
    import socket

    path = tmp_path / "s.sock"
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(path))
        with pytest.raises(OSError, match="cannot write to a socket") as err, atomic_output(path):
            pass
    assert err.value.errno == errno.ENXIO


def test_a_leftover_temporary_file_of_the_same_name_is_stepped_over(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    leftover = tmp_path / ".out.bin.00000000.tmp"
    leftover.write_bytes(b"someone else's")
    names = iter([leftover.name, ".out.bin.11111111.tmp"])
    monkeypatch.setattr(_atomic, "temporary_name", lambda directory, base: next(names))
    with atomic_output(tmp_path / "out.bin") as f:
        f.write(b"new")
    assert (tmp_path / "out.bin").read_bytes() == b"new"
    assert leftover.read_bytes() == b"someone else's"  # never opened, never removed


def test_name_max_falls_back_to_255_where_the_system_cannot_say(tmp_path: Path) -> None:
    assert _atomic._name_max(str(tmp_path / "no-such-directory")) == 255
