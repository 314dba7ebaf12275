"""Ctrl-C at any moment of the command's start exits 130 with one line, never a traceback (issue 24).

The package's imports take ~0.3 s before ``main`` runs; ``finalfusion._interrupt`` holds SIGINT from the package's
first line in the command's process. The child runs with ``-X importtime``, so the test knows which imports have
finished and sends SIGINT at chosen moments: after a given module was imported, and at several delays after the
package's first imports (the command then waits on its standard input, kept open, so every delay lands during the
run). No wall-clock assertion: the delays only spread the moments.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import IO

import pytest

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "examples" / "sample.fifu"

#: What pip writes for a console script ``finalfusion = "finalfusion.cli:main"``.
CONSOLE_SCRIPT = """\
import re
import sys
from finalfusion.cli import main
if __name__ == "__main__":
    sys.argv[0] = re.sub(r"(-script\\.pyw|\\.exe)?$", "", sys.argv[0])
    sys.exit(main())
"""


def env() -> dict[str, str]:
    e = dict(os.environ)
    e["PYTHONPATH"] = str(REPO / "src") + os.pathsep + e.get("PYTHONPATH", "")
    return e


def _default_sigint() -> None:
    # A suite started in the background (nohup, `&`) ignores SIGINT, and a child inherits that (see test_cli_progress).
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _ignored_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _entry(tmp_path: Path, how: str) -> list[str]:
    """The interpreter's arguments that run the command: ``-m finalfusion``, or a console script as pip writes it."""
    if how == "module":
        return ["-m", "finalfusion"]
    script = tmp_path / "finalfusion"
    script.write_text(CONSOLE_SCRIPT)
    return [str(script)]


def _start(tmp_path: Path, how: str, preexec: object = _default_sigint) -> subprocess.Popen[bytes]:
    """``finalfusion similar SAMPLE`` with the words from a standard input that stays open: it runs until interrupted."""
    return subprocess.Popen(
        [sys.executable, "-X", "importtime", *_entry(tmp_path, how), "similar", str(SAMPLE)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env(),
        preexec_fn=preexec,  # type: ignore[arg-type]
    )


def _wait_for(stderr: IO[bytes], done: object, seen: list[bytes]) -> None:
    """Read the child's ``-X importtime`` lines until ``done(module)`` says yes."""
    for line in stderr:
        seen.append(line)
        if line.startswith(b"import time:") and done(line.rsplit(b"|", 1)[-1].strip().decode()):  # type: ignore[operator]
            return
    pytest.fail("the child ended before the import: " + b"".join(seen).decode(errors="replace")[-2000:])


def _interrupt(proc: subprocess.Popen[bytes], seen: list[bytes]) -> tuple[int, str, bytes]:
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    messages = [line for line in (b"".join(seen) + err).decode(errors="replace").splitlines() if not line.startswith("import time:")]
    return proc.returncode, "\n".join(messages), out


def _package_started(module: str) -> bool:
    # Any package module after the first (finalfusion._interrupt): the package's first line has run.
    return module.startswith("finalfusion") and module != "finalfusion._interrupt"


@pytest.mark.parametrize("how", ["module", "console-script"])
@pytest.mark.parametrize("module", ["numpy", "finalfusion.compat", "finalfusion.cli"])
def test_ctrl_c_after_an_import_exits_130_quietly(tmp_path: Path, how: str, module: str) -> None:
    proc = _start(tmp_path, how)
    seen: list[bytes] = []
    assert proc.stderr is not None
    _wait_for(proc.stderr, lambda name: name == module, seen)
    status, messages, out = _interrupt(proc, seen)
    assert "Traceback" not in messages
    assert status == 130, messages
    assert messages == "finalfusion: interrupted"
    assert out == b""


@pytest.mark.parametrize("delay", [0.0, 0.02, 0.05, 0.1, 0.2, 0.4, 0.8])
def test_ctrl_c_at_any_delay_exits_130_quietly(tmp_path: Path, delay: float) -> None:
    proc = _start(tmp_path, "module")
    seen: list[bytes] = []
    assert proc.stderr is not None
    _wait_for(proc.stderr, _package_started, seen)
    time.sleep(delay)  # during the imports, the loading, or the wait for words
    status, messages, _ = _interrupt(proc, seen)
    assert "Traceback" not in messages
    assert status == 130, messages
    assert messages == "finalfusion: interrupted"


def test_ctrl_c_immediately_is_quiet(tmp_path: Path) -> None:
    # Before the interpreter has installed its own handler, the process ends by the signal (a shell reports 130):
    # quietly either way.
    proc = _start(tmp_path, "module")
    status, messages, out = _interrupt(proc, [])
    assert status in (130, -signal.SIGINT), messages
    assert "Traceback" not in messages
    assert out == b""


def test_an_ignored_sigint_stays_ignored(tmp_path: Path) -> None:
    # nohup: the command must not take Ctrl-C back (it runs to its end).
    proc = _start(tmp_path, "module", preexec=_ignored_sigint)
    seen: list[bytes] = []
    assert proc.stderr is not None
    assert proc.stdin is not None
    _wait_for(proc.stderr, lambda name: name == "numpy", seen)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(input=b"berlin\n", timeout=120)
    assert proc.returncode == 0, err
    assert len(out.splitlines()) == 10  # the ten neighbours of berlin


def test_ctrl_c_in_a_0_7_script_names_it(tmp_path: Path) -> None:
    # 0.7's ffp-* console scripts are the command too (pyproject.toml's [project.scripts]).
    script = tmp_path / "ffp-similar"
    script.write_text(CONSOLE_SCRIPT.replace("from finalfusion.cli import main", "from finalfusion.cli.legacy import similar as main"))
    proc = subprocess.Popen(
        [sys.executable, "-X", "importtime", str(script), str(SAMPLE)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env(),
        preexec_fn=_default_sigint,
    )
    seen: list[bytes] = []
    assert proc.stderr is not None
    _wait_for(proc.stderr, lambda name: name == "numpy", seen)
    status, messages, _ = _interrupt(proc, seen)
    assert status == 130, messages
    assert messages == "ffp-similar: interrupted"


def test_every_console_script_is_known_as_the_command() -> None:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - tomli is a dependency below 3.11
        import tomli as tomllib
    from finalfusion._interrupt import SCRIPTS

    declared = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]["scripts"]
    assert set(declared) == SCRIPTS


#: A ``sitecustomize`` for the child: SIGINT to itself when the import of the module ``FF_SIGINT_AFTER`` names has
#: begun and ``FF_SIGINT_SKIP`` more new modules have started importing -- a chosen moment of the start, every time,
#: instead of a delay. ``_signal`` and ``os`` are loaded before site runs: the hook imports nothing itself.
SIGINT_AT_AN_IMPORT = """\
import os
import sys

import _signal

_after = os.environ["FF_SIGINT_AFTER"]
_left = [None, int(os.environ["FF_SIGINT_SKIP"])]


def _hook(event, args):
    if event != "import" or _left[1] < 0:
        return
    if _left[0] is None:
        if args[0] == _after:
            _left[0] = True
        return
    if _left[1] == 0:
        os.kill(os.getpid(), _signal.SIGINT)
    _left[1] -= 1


sys.addaudithook(_hook)
"""


@pytest.mark.parametrize("how", ["module", "console-script"])
@pytest.mark.parametrize("skip", [0, 1, 2, 4, 8, 16])
def test_ctrl_c_right_after_the_package_starts_exits_130_quietly(tmp_path: Path, how: str, skip: int) -> None:
    # The package's first line imports finalfusion._interrupt; SIGINT as each of the imports that follow begins (the
    # first of them were _interrupt's own typing, re, enum and signal, with Python's handler still in place: a
    # KeyboardInterrupt traceback, issue 34). Several moments right after the start, each hit exactly.
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(SIGINT_AT_AN_IMPORT)
    e = env()
    e["PYTHONPATH"] = str(site) + os.pathsep + e["PYTHONPATH"]
    e.update(FF_SIGINT_AFTER="finalfusion._interrupt", FF_SIGINT_SKIP=str(skip))
    proc = subprocess.run(
        [sys.executable, *_entry(tmp_path, how), "similar", str(SAMPLE)],
        input=b"",
        capture_output=True,
        env=e,
        preexec_fn=_default_sigint,
        timeout=120,
    )
    messages = proc.stderr.decode(errors="replace")
    assert "Traceback" not in messages
    assert proc.returncode == 130, messages
    assert messages == "finalfusion: interrupted\n"
    assert proc.stdout == b""


def test_the_handler_is_in_place_before_any_module_is_imported() -> None:
    # finalfusion._interrupt imports nothing the interpreter had not loaded before the package's first line: in
    # -X importtime's tree no import is nested under it.
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "finalfusion", "--version"], capture_output=True, env=env(), timeout=120)
    lines = [line for line in proc.stderr.decode().splitlines() if line.startswith("import time:")]
    at = next(i for i, line in enumerate(lines) if line.rsplit("|", 1)[-1].strip() == "finalfusion._interrupt")
    depth = len(lines[at].rsplit("|", 1)[-1]) - len(lines[at].rsplit("|", 1)[-1].lstrip())
    before = lines[at - 1].rsplit("|", 1)[-1]
    # importtime prints a module after its children: the line before is a child when it is indented deeper.
    assert len(before) - len(before.lstrip()) <= depth, lines[at - 3 : at + 1]
