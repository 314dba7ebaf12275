"""The progress adapter, the command line's choice of bars, and how the command line turns failures into exit statuses."""

from __future__ import annotations

import argparse
import io
import os
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from finalfusion import Embeddings, NdArray, SimpleVocab, _progress
from finalfusion._progress import TqdmBars, counting, progress_callback, reporter
from finalfusion.cli import execute, main
from finalfusion.cli import progress as cli_progress
from finalfusion.cli._common import CliError


class FakeBar:
    def __init__(self, total: Any = None, **options: Any) -> None:
        self.total = total
        self.options = options
        self.n = 0
        self.closed = False

    def update(self, n: int) -> None:
        self.n += n

    def close(self) -> None:
        self.closed = True


class Factory:
    def __init__(self) -> None:
        self.bars: list[FakeBar] = []

    def __call__(self, **options: Any) -> FakeBar:
        bar = FakeBar(**options)
        self.bars.append(bar)
        return bar


# --- finalfusion._progress ------------------------------------------------------------------


def test_progress_callback_rejects_non_callables() -> None:
    with pytest.raises(TypeError, match="progress must be None, a bool or a callable progress\\(stage, done, total\\), not int"):
        progress_callback(3)  # type: ignore[arg-type]
    assert progress_callback(False) is None


def test_progress_true_without_tqdm_is_none(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "tqdm.auto", None)
    monkeypatch.setitem(sys.modules, "tqdm", None)
    assert _progress._tqdm() is None
    assert progress_callback(True) is None
    with reporter(True) as report:
        assert report is None


def test_reporter_closes_bars(monkeypatch: pytest.MonkeyPatch) -> None:
    factory = Factory()
    monkeypatch.setattr(_progress, "_tqdm", lambda: factory)
    with reporter(True) as report:
        assert isinstance(report, TqdmBars)
        report("select", 1, 10)
    assert factory.bars[0].closed
    assert factory.bars[0].options["desc"] == "words"


def test_bars_follow_a_changing_total_and_close_when_done() -> None:
    factory = Factory()
    bars = TqdmBars(factory=factory)
    bars("read", 5, None)
    bar = factory.bars[0]
    assert bar.options["unit"] == "B"
    assert bar.options["unit_scale"] is True
    bars("read", 8, 20)  # the total becomes known
    assert bar.total == 20
    assert bar.n == 8
    bars("read", 8, 20)  # no progress: no update
    assert bar.n == 8
    bars("read", 20, 20)
    assert bar.closed
    bars("custom", 1, 2)  # an unknown stage is shown by its own name
    assert factory.bars[1].options["desc"] == "custom"
    assert factory.bars[1].options["unit"] == "it"


def test_counting_reports_every_kind_of_read() -> None:
    seen: list[tuple[str, int, Any]] = []
    f = counting(io.BufferedReader(io.BytesIO(b"line1\nabcdefghij")), lambda *a: seen.append(a), 16)
    assert f.readline() == b"line1\n"
    assert f.read1(2) == b"ab"
    buf = bytearray(3)
    assert f.readinto(buf) == 3
    assert bytes(buf) == b"cde"
    assert f.seek(2, os.SEEK_CUR) == 13
    assert f.read() == b"hij"
    assert f.read() == b""  # nothing read: no report
    assert f.seekable()  # other attributes are the file's
    assert [done for _, done, _ in seen] == [6, 8, 11, 16]
    raw = io.BytesIO()
    assert counting(raw, None, 0) is raw


# --- finalfusion.cli.progress -----------------------------------------------------------------


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True

    def fileno(self) -> int:
        raise OSError("no descriptor")


class Closed:
    def isatty(self) -> bool:
        raise ValueError("I/O operation on closed file")


def test_progress_wanted() -> None:
    assert not cli_progress.progress_wanted(argparse.Namespace(quiet=True))
    assert not cli_progress.progress_wanted(argparse.Namespace())  # pytest's stderr is no terminal


def test_progress_not_wanted_on_a_closed_stderr(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "stderr", Closed())
    assert not cli_progress.progress_wanted(argparse.Namespace())


def test_bars_on_a_terminal_without_size(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("tqdm")
    tty = Tty()
    monkeypatch.setattr(sys, "stderr", tty)
    with cli_progress.bars(argparse.Namespace(quiet=False)) as progress:
        assert isinstance(progress, TqdmBars)
        assert progress._options["ncols"] == 80
        assert progress._options["file"] is tty
        progress("read", 1, 4)
    assert progress._bar is None  # closed at the end of the block


def test_bars_on_a_terminal_without_tqdm(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "stderr", Tty())
    monkeypatch.setitem(sys.modules, "tqdm", None)
    with cli_progress.bars(argparse.Namespace()) as progress:
        assert progress is None


def test_no_bars_when_quiet() -> None:
    with cli_progress.bars(argparse.Namespace(quiet=True)) as progress:
        assert progress is None


# --- finalfusion.cli.execute / main -----------------------------------------------------------


def _raiser(exc: BaseException) -> Any:
    def func(args: argparse.Namespace) -> int:
        raise exc

    return func


@pytest.mark.parametrize(
    ("exc", "status", "message"),
    [
        (CliError("no such word"), 1, "prog: error: no such word\n"),
        (KeyboardInterrupt(), 130, "prog: interrupted\n"),
        (FileNotFoundError(2, "No such file or directory", "x.fifu"), 1, "prog: error: No such file or directory: x.fifu\n"),
        (ValueError("bad\nvalue"), 1, "prog: error: "),
    ],
)
def test_execute_turns_failures_into_statuses(capsys: pytest.CaptureFixture[str], exc: BaseException, status: int, message: str) -> None:
    assert execute(_raiser(exc), argparse.Namespace(), prog="prog") == status
    err = capsys.readouterr().err
    assert err.startswith(message)
    assert err.count("\n") == 1  # one line


def test_execute_broken_pipe_is_quiet(capfd: pytest.CaptureFixture[str]) -> None:
    saved = os.dup(sys.stdout.fileno())
    try:
        assert execute(_raiser(BrokenPipeError()), argparse.Namespace()) == 141
    finally:
        os.dup2(saved, sys.stdout.fileno())
        os.close(saved)
    assert capfd.readouterr().err == ""


def test_execute_passes_status_through() -> None:
    assert execute(lambda args: 7, argparse.Namespace()) == 7


def test_main_treats_a_file_as_lookup(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "e.fifu"
    Embeddings(NdArray(np.array([[1.0, 2.0]], dtype=np.float32)), SimpleVocab(["hallo"])).write(path)
    assert main([str(path), "hallo"]) == 0
    out = capsys.readouterr().out
    assert "hallo" in out
    assert "2" in out


def test_main_reports_a_missing_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["info", str(tmp_path / "missing.fifu")]) == 1
    assert capsys.readouterr().err.startswith("finalfusion: error: ")
