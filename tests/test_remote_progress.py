"""Progress of remote fetches (issue 37): the bytes each range request brings are reported through one hook in
``RemoteFile`` (``finalfusion._remote.reporting_fetches``), and the command line draws a bar of them on a terminal
once a fetch is long -- never in a pipe or with ``--quiet``. Against nginx on the loopback interface (tests/_servers.py).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import finalfusion
from _servers import Nginx, nginx
from _terminal import stderr_on_a_terminal
from finalfusion import Embeddings, NdArray, SimpleVocab
from finalfusion._remote import reporting_fetches
from finalfusion.cli import progress as cli_progress

pytest.importorskip("fsspec", reason="fsspec (the remote extra) is not installed")
pytest.importorskip("aiohttp", reason="aiohttp (the remote extra: fsspec's http) is not installed")

REPO = Path(__file__).resolve().parent.parent
#: Rows x 100 float32 of the served file: about 8 MB, past ``FETCH_BAR_BYTES``.
ROWS = 20_000


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Nginx]:
    root = tmp_path_factory.mktemp("www")
    rng = np.random.default_rng(0)
    emb = Embeddings(NdArray(rng.standard_normal((ROWS, 100)).astype(np.float32)), SimpleVocab([f"w{i}" for i in range(ROWS)]))
    emb.write(root / "big.fifu")
    # 400,000 words of one dimension: `info` fetches the vocabulary (6 MB, above FETCH_BAR_BYTES), never the rows
    Embeddings(NdArray(np.zeros((400_000, 1), np.float32)), SimpleVocab([f"word-{i:07d}" for i in range(400_000)])).write(root / "words.fifu")
    try:
        with nginx(root, tmp_path_factory.mktemp("nginx")) as srv:
            yield srv
    except FileNotFoundError as exc:  # CI installs nginx; a machine without it cannot run a real server
        pytest.skip(str(exc))


def env() -> dict[str, str]:
    e = dict(os.environ)
    e["PYTHONPATH"] = str(REPO / "src") + os.pathsep + e.get("PYTHONPATH", "")
    return e


def test_the_hook_reports_the_bytes_the_server_sent(server: Nginx) -> None:
    server.clear()
    seen: list[tuple[str, int, Any]] = []
    with reporting_fetches(lambda *report: seen.append(report)):
        emb = finalfusion.load_finalfusion(server.url("big.fifu"))
    size = (server.root / "big.fifu").stat().st_size
    assert emb.storage.shape == (ROWS, 100)
    assert {stage for stage, _, _ in seen} == {"fetch"}
    assert {total for _, _, total in seen} == {size}
    done = [d for _, d, _ in seen]
    assert done == sorted(done)  # one report per range request, growing
    assert len(done) == len(set(done))
    sent = [r.sent for r in server.requests() if r.method == "GET"]
    assert len(sent) == len(done)
    assert done[-1] == sum(sent) >= size


def test_no_reports_outside_the_block(server: Nginx) -> None:
    seen: list[Any] = []
    with reporting_fetches(seen.append):
        pass
    finalfusion.load_finalfusion(server.url("big.fifu"))
    assert seen == []


def test_a_short_fetch_draws_no_bar_and_a_long_one_does(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cli_progress, "FETCH_BAR_SECONDS", float("inf"))  # by bytes only: no clock in the test
    drawn: list[tuple[str, int, Any]] = []
    long = cli_progress.LongFetches(lambda *report: drawn.append(report))
    for done in (1 << 20, 2 << 20, 3 << 20):  # a 3 MiB file: no bar
        long("fetch", done, 3 << 20)
    assert drawn == []
    for done in (1 << 20, 4 << 20, 5 << 20):  # another file (the count starts again): a bar from 4 MiB on
        long("fetch", done, 5 << 20)
    assert drawn == [("fetch", 4 << 20, 5 << 20), ("fetch", 5 << 20, 5 << 20)]
    assert cli_progress.FETCH_BAR_BYTES == 4 << 20


def test_the_command_line_draws_a_fetch_bar_on_a_terminal_only(server: Nginx, tmp_path: Path) -> None:
    pytest.importorskip("tqdm", reason="tqdm (the cli extra) is not installed")
    pytest.importorskip("pty", reason="needs pseudo-terminals")
    assert (server.root / "big.fifu").stat().st_size > cli_progress.FETCH_BAR_BYTES
    cmd = [sys.executable, "-m", "finalfusion", "convert", server.url("big.fifu"), str(tmp_path / "out.fifu")]
    proc, seen = stderr_on_a_terminal(cmd, env(), timeout=300)
    assert proc.returncode == 0, seen
    assert proc.stdout is not None
    assert proc.stdout.read() == b""
    assert b"fetching" in seen
    assert b"B/s" in seen  # a bar of bytes (it may be drawn once only, before the fetch ends and clears it)
    assert finalfusion.load(tmp_path / "out.fifu").storage.shape == (ROWS, 100)
    # --quiet on the same terminal: no bar.
    proc, seen = stderr_on_a_terminal([*cmd, "--quiet"], env(), timeout=300)
    assert proc.returncode == 0, seen
    assert b"fetching" not in seen
    assert b"reading" not in seen
    # stderr in a pipe: no bar, nothing at all.
    r = subprocess.run(cmd, capture_output=True, env=env(), timeout=300, check=False)
    assert r.returncode == 0
    assert r.stderr == b""


@pytest.mark.parametrize(("command", "name"), [(["info"], "words.fifu"), (["similar", "-w", "w1", "--"], "big.fifu")])
def test_other_commands_draw_it_too(server: Nginx, command: list[str], name: str) -> None:
    pytest.importorskip("tqdm", reason="tqdm (the cli extra) is not installed")
    pytest.importorskip("pty", reason="needs pseudo-terminals")
    proc, seen = stderr_on_a_terminal([sys.executable, "-m", "finalfusion", *command, server.url(name)], env(), timeout=300)
    assert proc.returncode == 0, seen
    assert b"fetching" in seen


def test_info_fetches_no_rows_and_draws_no_bar_for_a_short_fetch(server: Nginx) -> None:
    # `info` of an 8 MB .fifu of 20,000 words reads its vocabulary and the storage's head (a fetch too short for a bar)
    pytest.importorskip("pty", reason="needs pseudo-terminals")
    server.clear()
    proc, seen = stderr_on_a_terminal([sys.executable, "-m", "finalfusion", "info", server.url("big.fifu")], env(), timeout=300)
    assert proc.returncode == 0, seen
    assert b"fetching" not in seen
    assert sum(r.sent for r in server.requests() if r.method == "GET") <= 2 << 20  # not the 8 MB matrix
