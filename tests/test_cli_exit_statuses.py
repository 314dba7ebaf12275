"""How the command line ends: input errors are one line on stderr and status 1, Ctrl-C 130, a closed pipe 141
(quietly), a command's own status passed through; ``main`` with a file as first argument means ``lookup``.

In-process (``finalfusion.cli.execute`` and ``main``); the same behaviours through a real process are in
test_cli.py and test_cli_progress.py (Ctrl-C).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from finalfusion import Embeddings, NdArray, SimpleVocab
from finalfusion.cli import execute, main
from finalfusion.cli._common import CliError


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
def test_failures_become_one_line_and_a_status(capsys: pytest.CaptureFixture[str], exc: BaseException, status: int, message: str) -> None:
    assert execute(_raiser(exc), argparse.Namespace(), prog="prog") == status
    err = capsys.readouterr().err
    assert err.startswith(message)
    assert err.count("\n") == 1  # one line


def test_a_closed_pipe_ends_quietly_with_status_141(capfd: pytest.CaptureFixture[str]) -> None:
    saved = os.dup(sys.stdout.fileno())
    try:
        assert execute(_raiser(BrokenPipeError()), argparse.Namespace()) == 141
    finally:
        os.dup2(saved, sys.stdout.fileno())
        os.close(saved)
    assert capfd.readouterr().err == ""


def test_a_command_status_is_passed_through() -> None:
    assert execute(lambda args: 7, argparse.Namespace()) == 7


def test_a_file_as_first_argument_means_lookup(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "e.fifu"
    Embeddings(NdArray(np.array([[1.0, 2.0]], dtype=np.float32)), SimpleVocab(["hallo"])).write(path)
    assert main([str(path), "hallo"]) == 0
    out = capsys.readouterr().out
    assert "hallo" in out
    assert "2" in out


def test_a_missing_file_is_an_error_with_status_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["info", str(tmp_path / "missing.fifu")]) == 1
    assert capsys.readouterr().err.startswith("finalfusion: error: ")
