"""Ctrl-C while the ``finalfusion`` command starts: exit status 130 and one line, never a traceback.

The command's :func:`finalfusion.cli.main` turns ``KeyboardInterrupt`` into
exit status 130 (after the atomic writers removed their temporary files),
but the package's own imports (numpy, the readers: ~0.3 s) run before
``main`` exists, and a Ctrl-C there used to print a traceback and end the
process by the signal (issue 24). So the package's first line calls
:func:`hold`: when this process *is* the command -- the ``finalfusion``
console script, one of 0.7's ``ffp-*`` scripts, or ``python -m
finalfusion`` -- SIGINT ends it at once with ``PROG: interrupted`` and
status 130 (nothing has been written yet); ``main`` calls :func:`release`
before any work, so that Ctrl-C raises ``KeyboardInterrupt`` again and the
writers can clean up, and :func:`hold` again when it returns (interpreter
shutdown). Importing ``finalfusion`` anywhere else changes nothing: a
library user's Ctrl-C stays a ``KeyboardInterrupt``. A SIGINT that Python
was started with ignored (``nohup``, a background job) stays ignored.

What no package can cover: a signal that arrives before the interpreter
runs the package's first line gets Python's default behaviour. Before
Python installs its handler the process simply ends by the signal, which a
shell reports as status 130 too; after that, while the interpreter imports
``site`` and, for ``python -m``, ``runpy`` (or a console script's own
``import re``): about 7 ms on an idle machine, a ``KeyboardInterrupt``
traceback is Python's.

Importing this module calls :func:`hold` (the package imports it first of
all); it imports nothing from the package, and nothing the interpreter has
not loaded before the package's first line (``sys``, ``os``, the built-in
``_signal``): ``typing`` and ``signal`` (with ``re`` and ``enum``, ~10 ms)
would keep Python's own handler -- a ``KeyboardInterrupt`` traceback --
in place while they load (issue 34).
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (mypy recognises the name)
if TYPE_CHECKING:
    import signal as _signal  # the same functions; typeshed has no stub of _signal
else:
    import _signal  # built in and loaded at the interpreter's start: importing it costs nothing

__all__ = ["command_name", "hold", "release"]

#: The console scripts of pyproject.toml (``[project.scripts]``).
SCRIPTS = frozenset({"finalfusion", "ffp-convert", "ffp-similar", "ffp-analogy", "ffp-bucket-to-explicit", "ffp-select"})

_prog = "finalfusion"


def command_name(argv: list[str] | None = None, orig_argv: list[str] | None = None, main: object = None) -> str | None:
    """The command's name if this process is the ``finalfusion`` command (or an ``ffp-*`` script), else ``None``.

    ``python -m finalfusion``: while runpy imports the package, ``sys.argv[0]``
    is ``"-m"`` and the interpreter's own arguments (``sys.orig_argv``) name
    the module just before the command's arguments. A console script:
    ``__main__`` is a script (no module spec) whose file is one of
    :data:`SCRIPTS` (``.exe`` and ``-script.py`` of the Windows launchers removed).

    Examples
    --------
    >>> command_name(["-m", "info"], ["python3", "-X", "importtime", "-m", "finalfusion", "info"])
    'finalfusion'
    >>> command_name(["-m"], ["python3", "-m", "pytest"]) is None
    True
    >>> import types
    >>> command_name(["/venv/bin/ffp-convert", "a", "b"], [], types.SimpleNamespace(__spec__=None))
    'ffp-convert'
    >>> command_name(["/home/me/finalfusion.py"], [], types.SimpleNamespace(__spec__=None)) is None
    True
    """
    argv = list(sys.argv if argv is None else argv)
    if not argv:
        return None
    if argv[0] == "-m":
        orig = list(getattr(sys, "orig_argv", []) if orig_argv is None else orig_argv)
        at = len(orig) - len(argv)  # orig ends with the command's arguments; the module's name comes just before them
        if at < 1:
            return None
        token = orig[at]
        named = token if not token.startswith("-") else (token.split("m", 1)[1] if "m" in token and not token.startswith("--") else "")
        return "finalfusion" if named in ("finalfusion", "finalfusion.__main__") else None
    main = sys.modules.get("__main__") if main is None else main
    if main is None or getattr(main, "__spec__", None) is not None:
        return None  # a module run with -m, or an interactive session
    name = os.path.basename(argv[0])
    for suffix in (".exe", "-script.pyw", "-script.py"):
        name = name.removesuffix(suffix)
    return name if name in SCRIPTS else None


def _quit(signum: int, frame: object) -> None:
    """SIGINT while nothing can be half-written: one line, status 130, now."""
    try:  # noqa: SIM105 - contextlib.suppress would cost an import before the handler is in place
        sys.stdout.flush()
    except BaseException:  # a closed pipe or a reentrant flush: the output is given up anyway
        pass
    try:
        os.write(2, f"{_prog}: interrupted\n".encode())
    finally:
        os._exit(130)


def hold() -> None:
    """In the command's process, make SIGINT end it with status 130 and one line (see the module docstring).

    Does nothing in any other process, nor when SIGINT is ignored or has a
    handler of the program's own.

    Examples
    --------
    >>> import signal
    >>> before = signal.getsignal(signal.SIGINT)
    >>> hold()  # not the command: the handler stays
    >>> signal.getsignal(signal.SIGINT) is before
    True
    """
    global _prog
    name = command_name()
    if name is None:
        return
    if _signal.getsignal(_signal.SIGINT) is _signal.default_int_handler:
        _prog = name
        _signal.signal(_signal.SIGINT, _quit)


def release() -> None:
    """Ctrl-C raises ``KeyboardInterrupt`` again (if :func:`hold` took it): the command's work may clean up.

    Examples
    --------
    >>> release()  # nothing held: nothing changes
    """
    if _signal.getsignal(_signal.SIGINT) is _quit:
        _signal.signal(_signal.SIGINT, _signal.default_int_handler)


hold()
