"""Native code over untrusted bytes in a child process: its crash or hang is the file's error, never the caller's end.

Some libraries cannot be made safe by checking their input first: libhdf5
(behind ``h5py``) follows offsets, heaps and B-trees that a crafted file
can loop or break in ways no structural check short of a second HDF5
implementation rules out. Such a read runs here, in a child process, and
the caller gets back a small JSON header and a byte payload -- or a
:class:`~finalfusion.FormatError` when the child is killed by a signal,
answers nothing within its time, or sends more than it may.

The child is a fork of the caller when no thread but the caller and the
library's own pool runs (cheap: nothing is imported again), else a fresh
interpreter (a fork of a process with other threads may inherit a lock one of
them holds). Nothing the
child sends is unpickled: errors come back as JSON fields, data as raw
bytes whose size the caller bounds.
"""

from __future__ import annotations

import importlib
import json
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from typing import IO, Any, Final, cast

from finalfusion._threads import fork_is_safe
from finalfusion.errors import FormatError

__all__ = ["Answer", "call_isolated"]

#: What a child's function returns: a JSON-able header and the payload bytes.
Answer = tuple[dict[str, Any], bytes]

#: Largest JSON header a child may send.
_MAX_HEADER: Final = 1 << 20
#: The header's length prefix (little-endian).
_PREFIX: Final = 8

# Run by a fresh interpreter: the request (module, function, arguments, sys.path) arrives as one JSON line on stdin.
# Its answer goes to a copy of stdout; stdout itself then points at stderr, so that nothing printed can break the answer.
_SPAWNED: Final = (
    "import json, os, sys; fd = os.dup(1); os.dup2(2, 1); r = json.loads(sys.stdin.buffer.readline()); sys.path[:] = r['path']; "
    "from finalfusion._isolated import _serve; _serve(r, fd, sys.stdin.buffer.read() if r['data'] else None)"
)


def call_isolated(
    module: str,
    function: str,
    args: list[Any],
    *,
    data: bytes | None = None,
    seconds: float,
    max_payload: int,
    what: str,
    memory: int | None = None,
    imports: tuple[str, ...] = (),
    force_spawn: bool = False,
) -> Answer:
    """``module.function(*args)`` (``data`` appended when given) run in a child process: its ``(header, payload)``, or its error raised here.

    Parameters
    ----------
    module, function
        Where the function lives (importable by name: a fresh interpreter
        imports it). It returns ``(header, payload)``, a JSON-able dict
        and bytes-like data.
    args
        JSON-able arguments.
    data
        Bytes passed as the last argument (a fork shares them; a fresh
        interpreter reads them from its stdin).
    seconds
        Wall-clock time the child may take; then it is killed.
    max_payload
        Most payload bytes accepted (the caller's bound on the data).
    what
        Names the work in errors (``"LightSeq HDF5"``).
    memory
        Bytes of address space the child may add to what it has when it
        starts (``RLIMIT_AS``): an allocation beyond fails there (a
        ``MemoryError``, or the library's own error) instead of taking the
        machine's memory (Linux; elsewhere no limit is set).
    imports
        Modules the child imports before the memory bound is set (a
        library's own start-up, its threads and arenas, is not the file's:
        in a fresh interpreter, importing faiss under the bound crashed).
    force_spawn
        Use a fresh interpreter even when a fork would do (tests).

    Returns
    -------
    tuple of (dict, bytes)
        What the function returned.

    Raises
    ------
    FormatError
        The function raised one (rebuilt with its fields), or the child
        died by a signal, took more than ``seconds``, or answered out of
        bounds.
    ValueError, MemoryError
        The function raised one (the message kept).
    RuntimeError
        Any other exception in the child (its type and message named).

    Examples
    --------
    >>> try:  # os.getpid runs in the child, which tells what went wrong there
    ...     call_isolated("os", "getpid", [], seconds=30, max_payload=0, what="demo")
    ... except RuntimeError as err:
    ...     print(err)
    demo: TypeError in the reading process: cannot unpack non-iterable int object
    """
    spawn = force_spawn or not hasattr(os, "fork") or not sys.platform.startswith("linux") or not fork_is_safe()
    if spawn:
        proc = subprocess.Popen([sys.executable, "-c", _SPAWNED], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        stdin, stdout = cast(IO[bytes], proc.stdin), cast(IO[bytes], proc.stdout)
        request = {"module": module, "function": function, "args": args, "path": sys.path, "data": data is not None, "memory": memory, "imports": list(imports)}
        try:  # the child reads its input whole before it answers, so writing it all first cannot block on a full stdout
            stdin.write(json.dumps(request).encode() + b"\n")
            if data is not None:
                stdin.write(data)
            stdin.close()
        except BrokenPipeError:
            pass
        pid, fd = proc.pid, stdout.fileno()
    else:
        fd, w = os.pipe()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child (its work is covered through the spawned path)
            os.close(fd)
            _serve({"module": module, "function": function, "args": args, "memory": memory, "imports": list(imports)}, w, data)
        os.close(w)
    raw: bytes | None = None
    why = "interrupted"
    try:
        raw, why = _read_answer(fd, seconds, max_payload)
    finally:
        if raw is None:
            os.kill(pid, signal.SIGKILL)
        status = proc.wait() if spawn else os.waitpid(pid, 0)[1]
        if spawn:
            stdout.close()
        else:
            os.close(fd)
    return _answer(raw, status if spawn else _exit_code(status), what=what, why=why)


def _exit_code(status: int) -> int:
    """A ``waitpid`` status in :mod:`subprocess`'s terms: the exit code, or minus the signal."""
    return -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)


def _read_answer(fd: int, seconds: float, max_payload: int) -> tuple[bytes | None, str]:
    """Everything the child writes until it closes its end; ``None`` and why when the deadline passes or it writes too much."""
    limit = _PREFIX + _MAX_HEADER + max_payload
    deadline = time.monotonic() + seconds
    chunks: list[bytes] = []
    got = 0
    while True:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            return None, f"no answer within {seconds:.1f} s (the reading process was stopped)"
        chunk = os.read(fd, 1 << 20)
        if not chunk:
            return b"".join(chunks), ""
        got += len(chunk)
        if got > limit:
            return None, f"an answer of more than {limit} bytes (the reading process was stopped)"
        chunks.append(chunk)


def _answer(raw: bytes | None, code: int, *, what: str, why: str) -> Answer:
    def refuse(found: str) -> FormatError:
        return FormatError(f"the library reading the {what} data failed on it", chunk=what, expected="an answer from the reading process", found=found)

    if code < 0:
        name = signal.Signals(-code).name if -code in signal.valid_signals() else str(-code)
        if raw is None and code == -signal.SIGKILL:
            raise refuse(why)
        raise refuse(f"a crash (signal {name})")
    if raw is None or len(raw) < _PREFIX:
        raise refuse(f"no answer (exit status {code})")
    size = int.from_bytes(raw[:_PREFIX], "little")
    if size > min(_MAX_HEADER, len(raw) - _PREFIX):
        raise refuse(f"a header of {size} bytes")
    try:
        header = json.loads(raw[_PREFIX : _PREFIX + size])
    except ValueError:
        header = None
    if not isinstance(header, dict):
        raise refuse("a header that is not a JSON object")
    payload = raw[_PREFIX + size :]
    error = header.get("error")
    if error is None:
        return header, payload
    kind, fields = error.get("type"), error.get("fields", {})
    if kind == "FormatError":
        raise FormatError(
            str(fields.get("message")), offset=fields.get("offset"), chunk=fields.get("chunk"), expected=fields.get("expected"), found=fields.get("found")
        )
    if kind == "ValueError":
        raise ValueError(str(error.get("message")))
    if kind == "MemoryError":
        raise MemoryError(str(error.get("message")))
    raise RuntimeError(f"{what}: {kind} in the reading process: {error.get('message')}")


def _serve(request: dict[str, Any], fd: int, data: bytes | None) -> None:  # pragma: no cover - runs in the child
    """In the child: run the request, write the answer to ``fd`` and exit (never returns)."""
    code = 0
    try:
        try:
            fn: Callable[..., Answer] = getattr(importlib.import_module(request["module"]), request["function"])
            for name in request.get("imports", ()):
                importlib.import_module(name)
            if request.get("memory"):
                _limit_address_space(int(request["memory"]))
            header, payload = fn(*request["args"], *([] if data is None else [data]))
            body = memoryview(payload).cast("B")
        except FormatError as exc:
            fields = {k: _jsonable(getattr(exc, k)) for k in ("message", "offset", "chunk", "expected", "found")}
            header, body = {"error": {"type": "FormatError", "fields": fields}}, memoryview(b"")
        except BaseException as exc:
            header, body = {"error": {"type": type(exc).__name__, "message": str(exc)[:2000]}}, memoryview(b"")
        text = json.dumps(header).encode()
        _write_all(fd, len(text).to_bytes(_PREFIX, "little") + text)
        _write_all(fd, body)
    except BaseException:
        code = 1
    finally:
        os._exit(code)


def _limit_address_space(extra: int) -> None:  # pragma: no cover - runs in the child
    """Lower this process's soft ``RLIMIT_AS`` to its size now plus ``extra`` bytes."""
    import resource

    if not os.path.exists("/proc/self/statm"):
        return
    with open("/proc/self/statm", "rb") as f:
        size = int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    hard = resource.getrlimit(resource.RLIMIT_AS)[1]
    limit = size + extra if hard == resource.RLIM_INFINITY else min(size + extra, hard)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))


def _jsonable(value: Any) -> Any:
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return str(value)


def _write_all(fd: int, data: bytes | memoryview) -> None:  # pragma: no cover - runs in the child
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
