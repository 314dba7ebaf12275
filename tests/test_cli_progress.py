"""Progress reporting: the library's ``progress=`` (loaders, quantize, evaluation; the adapter in
``finalfusion._progress``), the command line's bars (only on a terminal; ``finalfusion.cli.progress``) and
Ctrl-C during a conversion."""

from __future__ import annotations

import argparse
import io
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import finalfusion
from _terminal import stderr_on_a_terminal
from finalfusion import Embeddings, FastTextVocab, NdArray, SimpleVocab, _progress
from finalfusion._progress import TqdmBars, counting, progress_callback, reporter
from finalfusion.cli import progress as cli_progress
from finalfusion.subword import FastTextIndexer

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "examples" / "sample.fifu"


def env() -> dict[str, str]:
    e = dict(os.environ)
    e["PYTHONPATH"] = str(REPO / "src") + os.pathsep + e.get("PYTHONPATH", "")
    return e


class Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple[str, int, Any]] = []

    def __call__(self, stage: str, done: int, total: Any) -> None:
        self.calls.append((stage, done, total))


def _small(tmp_path: Path) -> Embeddings:
    rng = np.random.default_rng(0)
    return Embeddings(NdArray(rng.normal(size=(3000, 8)).astype(np.float32)), SimpleVocab([f"w{i}" for i in range(3000)]))


@pytest.mark.parametrize(("writer", "loader"), [("write_word2vec", "load_word2vec"), ("write_text_dims", "load_text_dims"), ("write_text", "load_text")])
def test_loaders_report_bytes_read(tmp_path: Path, writer: str, loader: str) -> None:
    path = tmp_path / "vectors"
    getattr(finalfusion, writer)(path, _small(tmp_path))
    rec = Recorder()
    emb = getattr(finalfusion, loader)(path, progress=rec)
    assert len(emb.vocab) == 3000
    size = path.stat().st_size
    assert {s for s, _, _ in rec.calls} == {"read"}
    assert all(total == size for _, _, total in rec.calls)
    assert rec.calls[-1][1] == size
    rec2 = Recorder()
    finalfusion.load(path, progress=rec2)  # sniffing: the same reports, rewinding after the sample
    assert rec2.calls[-1][1:] == (size, size)


def test_fasttext_and_floret_report(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    ft = Embeddings(NdArray(rng.normal(size=(2 + 16, 4)).astype(np.float32)), FastTextVocab(["hallo", "welt"], FastTextIndexer(16, 3, 5)))
    path = tmp_path / "model.bin"
    finalfusion.write_fasttext(path, ft)
    rec = Recorder()
    finalfusion.load_fasttext(path, progress=rec)
    assert rec.calls[-1] == ("read", path.stat().st_size, path.stat().st_size)
    floret = tmp_path / "v.floret"
    floret.write_bytes(b"2 3 3 6 2 2166136261 < >\n0 1 0 0\n1 0 2 0\n")
    rec = Recorder()
    finalfusion.load_floret(floret, progress=rec)
    assert rec.calls[-1] == ("read", floret.stat().st_size, floret.stat().st_size)


def test_gzip_and_pipes_report_compressed_bytes_and_unknown_totals(tmp_path: Path) -> None:
    import gzip

    raw = io.BytesIO()
    finalfusion.write_word2vec(raw, _small(tmp_path))
    packed = gzip.compress(raw.getvalue())
    rec = Recorder()
    finalfusion.load_word2vec(packed, progress=rec)
    assert rec.calls[-1] == ("read", len(packed), len(packed))
    r, w = os.pipe()
    with os.fdopen(w, "wb") as fw:
        fw.write(b"2 2\nfoo 3 4\nbar 0 1\n")
    rec = Recorder()
    with os.fdopen(r, "rb") as fr:
        finalfusion.load_text_dims(fr, progress=rec)
    assert rec.calls[-1] == ("read", 20, None)


def test_quantize_and_evaluate_report(tmp_path: Path) -> None:
    emb = finalfusion.load_finalfusion(SAMPLE)
    rec = Recorder()
    emb.quantize(n_subquantizers=4, n_bits=2, n_iterations=2, seed=0, progress=rec)
    assert [c for c in rec.calls if c[0] == "train"][-1] == ("train", 4, 4)
    assert rec.calls[-1] == ("encode", 340, 340)
    rec = Recorder()
    ev = emb.evaluate_analogies([": a", "the of and in", "x y z w", ": b", "the of and to"], progress=rec)
    assert ev.skipped == 1
    assert rec.calls[-1] == ("evaluate", 3, 3)
    assert [d for _, d, _ in rec.calls] == sorted(d for _, d, _ in rec.calls)


def test_progress_true_draws_tqdm_bars_and_nothing_without_tqdm(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("tqdm", reason="tqdm (the cli extra) is not installed")
    path = tmp_path / "v.txt"
    finalfusion.write_text(path, _small(tmp_path))
    finalfusion.load_text(path, progress=True)
    err = capsys.readouterr().err
    assert "reading" in err
    assert "100%" in err
    monkeypatch.setitem(sys.modules, "tqdm", None)  # import tqdm now fails
    monkeypatch.setitem(sys.modules, "tqdm.auto", None)
    finalfusion.load_text(path, progress=True)
    assert capsys.readouterr().err == ""
    with reporter(True) as report:
        assert report is None


def test_tqdm_bars_one_bar_per_stage() -> None:
    tqdm = pytest.importorskip("tqdm", reason="tqdm (the cli extra) is not installed").tqdm
    out = io.StringIO()
    bars = TqdmBars(factory=tqdm, file=out)
    bars("train", 1, 4)
    bars("train", 4, 4)
    bars("encode", 10, 10)
    bars.close()
    text = out.getvalue()
    assert "training: 100%" in text
    assert "encoding: 100%" in text
    with pytest.raises(TypeError, match="progress must be"), reporter(42):  # type: ignore[arg-type]
        pass


def _text_file(tmp_path: Path, rows: int) -> Path:
    path = tmp_path / "big.txt"
    rng = np.random.default_rng(0)
    emb = Embeddings(NdArray(rng.normal(size=(rows, 50)).astype(np.float32)), SimpleVocab([f"w{i}" for i in range(rows)]))
    finalfusion.write_text(path, emb)
    return path


def test_bar_on_a_terminal_not_in_a_pipe(tmp_path: Path) -> None:
    pytest.importorskip("tqdm", reason="tqdm (the cli extra) is not installed")
    pytest.importorskip("pty", reason="needs pseudo-terminals")
    src = _text_file(tmp_path, 2000)
    cmd = [sys.executable, "-m", "finalfusion", "convert", str(src), str(tmp_path / "out.fifu")]
    # stderr on a pseudo-terminal: a bar.
    proc, seen = stderr_on_a_terminal(cmd, env(), timeout=120)
    assert proc.returncode == 0
    assert proc.stdout is not None
    assert proc.stdout.read() == b""
    assert b"reading" in seen
    assert b"B/s" in seen or b"100%" in seen
    # stderr in a pipe: no bar, no output at all.
    r = subprocess.run(cmd, capture_output=True, env=env(), timeout=120, check=False)
    assert r.returncode == 0
    assert r.stderr == b""
    assert r.stdout == b""


def test_ctrl_c_leaves_no_partial_output(tmp_path: Path) -> None:
    # On a busy machine a small conversion can end before the interrupt arrives: then try a larger input.
    for rows in (60_000, 240_000, 960_000):
        work = tmp_path / str(rows)
        work.mkdir()
        src = work / "big.fifu"
        rng = np.random.default_rng(0)
        Embeddings(NdArray(rng.normal(size=(rows, 100)).astype(np.float32)), SimpleVocab([f"w{i}" for i in range(rows)])).write(src)
        target = work / "out.txt"
        target.write_bytes(b"old contents\n")
        before = set(os.listdir(work))
        proc = subprocess.Popen(
            [sys.executable, "-m", "finalfusion", "convert", str(src), str(target)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env(),
            # A suite started in the background (nohup, `&`) ignores SIGINT, and a child inherits that: Python then keeps
            # ignoring it (as it should under nohup) and the conversion runs to its end. Give the child the default again.
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )
        # Wait until the writer's temporary file exists (the text writer then formats for seconds), then interrupt.
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None and set(os.listdir(work)) == before:
            time.sleep(0.02)
        if proc.poll() is not None or set(os.listdir(work)) == before:
            proc.kill()
            proc.communicate()
            continue  # ended (or never started writing) before it could be interrupted
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=120)
        if proc.returncode == 0:
            continue  # the write finished between the check and the signal
        assert proc.returncode == 130, err
        assert b"interrupted" in err
        assert b"Traceback" not in err
        assert target.read_bytes() == b"old contents\n"
        assert set(os.listdir(work)) == before  # no temporary file left
        return
    pytest.fail("no conversion could be interrupted mid-write")


# --- the progress adapter (finalfusion._progress) -------------------------------------------


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


def test_progress_must_be_a_bool_or_a_callable() -> None:
    with pytest.raises(TypeError, match="progress must be None, a bool or a callable progress\\(stage, done, total\\), not int"):
        progress_callback(3)  # type: ignore[arg-type]
    assert progress_callback(False) is None


def test_progress_true_without_tqdm_reports_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "tqdm.auto", None)
    monkeypatch.setitem(sys.modules, "tqdm", None)
    assert _progress._tqdm() is None
    assert progress_callback(True) is None
    with reporter(True) as report:
        assert report is None


def test_reporter_closes_its_bars_and_names_the_stage(monkeypatch: pytest.MonkeyPatch) -> None:
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


# --- the command line's choice of bars (finalfusion.cli.progress) ----------------------------


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True

    def fileno(self) -> int:
        raise OSError("no descriptor")


class Closed:
    def isatty(self) -> bool:
        raise ValueError("I/O operation on closed file")


def test_command_line_wants_bars_only_on_a_terminal_without_quiet() -> None:
    assert not cli_progress.progress_wanted(argparse.Namespace(quiet=True))
    assert not cli_progress.progress_wanted(argparse.Namespace())  # pytest's stderr is no terminal


def test_progress_not_wanted_on_a_closed_stderr(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "stderr", Closed())
    assert not cli_progress.progress_wanted(argparse.Namespace())


def test_a_terminal_without_a_size_gets_80_column_bars(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("tqdm")
    tty = Tty()
    monkeypatch.setattr(sys, "stderr", tty)
    with cli_progress.bars(argparse.Namespace(quiet=False)) as progress:
        assert isinstance(progress, TqdmBars)
        assert progress._options["ncols"] == 80
        assert progress._options["file"] is tty
        progress("read", 1, 4)
    assert progress._bar is None  # closed at the end of the block


def test_a_terminal_without_tqdm_gets_no_bars(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "stderr", Tty())
    monkeypatch.setitem(sys.modules, "tqdm", None)
    with cli_progress.bars(argparse.Namespace()) as progress:
        assert progress is None


def test_quiet_means_no_bars() -> None:
    with cli_progress.bars(argparse.Namespace(quiet=True)) as progress:
        assert progress is None
