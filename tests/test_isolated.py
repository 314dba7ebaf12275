"""finalfusion._isolated: native code over untrusted bytes runs in a child, whose crash, hang or flood is a FormatError."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from finalfusion import FormatError
from finalfusion._isolated import call_isolated
from finalfusion._threads import fork_is_safe

MODULE = "isolated_targets"


@pytest.fixture(params=["fork", "spawn"])
def spawn(request: pytest.FixtureRequest) -> bool:
    return request.param == "spawn"


def call(
    function: str, *args: object, spawn: bool, seconds: float = 60.0, max_payload: int = 1 << 20, data: bytes | None = None
) -> tuple[dict[str, object], bytes]:
    return call_isolated(MODULE, function, list(args), data=data, seconds=seconds, max_payload=max_payload, what="Demo", force_spawn=spawn)


def test_the_answer_comes_back_whole(spawn: bool) -> None:
    header, payload = call("echo", 300_000, spawn=spawn, data="dätä".encode())
    assert header["n"] == 300_000
    assert header["data"] == "dätä"
    assert header["pid"] != os.getpid()
    assert header["forked"] is (not spawn and fork_is_safe())  # the suite may have started threads of its own
    assert payload == bytes(i % 251 for i in range(300_000))


def test_what_the_child_prints_is_not_the_answer(spawn: bool) -> None:
    assert call("noisy", spawn=spawn) == ({"ok": True}, b"")


def test_a_hang_is_stopped_in_time(spawn: bool) -> None:
    start = time.monotonic()
    with pytest.raises(FormatError, match=r"Demo: .*no answer within 1.0 s \(the reading process was stopped\)"):
        call("hang", spawn=spawn, seconds=1.0)
    assert time.monotonic() - start < 30  # not the child's hour


def test_a_crash_is_a_format_error(spawn: bool) -> None:
    with pytest.raises(FormatError, match="a crash \\(signal SIGSEGV\\)"):
        call("crash", spawn=spawn)


def test_more_than_the_bound_is_refused(spawn: bool) -> None:
    with pytest.raises(FormatError, match="an answer of more than"):
        call("echo", 3 << 20, spawn=spawn, max_payload=1 << 20)


def test_errors_come_back_with_their_fields(spawn: bool) -> None:
    with pytest.raises(FormatError) as info:
        call("refuse", spawn=spawn)
    err = info.value
    assert (err.message, err.offset, err.chunk, err.expected, err.found) == ("bad table", 12, "Demo", [1, 2], "b'\\x00'")
    with pytest.raises(ValueError, match=r"^side='x': no such side$") as value_info:
        call("wrong_argument", spawn=spawn)
    assert not isinstance(value_info.value, FormatError)
    with pytest.raises(RuntimeError, match="Demo: KeyError in the reading process: 'a bug'"):
        call("broken", spawn=spawn)


def test_a_child_that_exits_without_answering(spawn: bool) -> None:
    with pytest.raises(FormatError, match="no answer \\(exit status 3\\)"):
        call("exit_quietly", spawn=spawn)


@pytest.fixture
def another_thread() -> Iterator[None]:
    stop = threading.Event()
    thread = threading.Thread(target=stop.wait)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


def test_with_other_threads_the_child_is_a_fresh_interpreter(another_thread: None) -> None:
    # a fork could inherit a lock one of the other threads holds
    header, _ = call_isolated(MODULE, "echo", [1], seconds=60, max_payload=10, what="Demo")
    assert header["forked"] is False


def test_beside_the_librarys_own_pool_the_child_is_a_fork() -> None:
    # the pool's threads run only the library's tasks (and a forked child forgets the pool): a fork is still safe
    code = f"import sys; sys.path.insert(0, {str(Path(__file__).parent)!r}); import pytest, threading; "
    code += "from finalfusion._threads import run_tasks; run_tasks([lambda: None] * 4, 2); "
    code += "assert any(t.name.startswith('finalfusion-pool') for t in threading.enumerate()); from finalfusion._isolated import call_isolated; "
    code += f"print(call_isolated({MODULE!r}, 'echo', [1], seconds=60, max_payload=10, what='Demo')[0]['forked'])"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout == "True\n"


def test_alone_the_child_is_a_fork() -> None:
    # in a process of one thread (a fresh one: the suite may have started the thread pool here)
    code = f"import sys; sys.path.insert(0, {str(Path(__file__).parent)!r}); import pytest; from finalfusion._isolated import call_isolated; "
    code += f"print(call_isolated({MODULE!r}, 'echo', [1], seconds=60, max_payload=10, what='Demo')[0]['forked'])"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout == "True\n"


def test_the_childs_memory_can_be_bounded(spawn: bool) -> None:
    # an allocation past the bound fails in the child (MemoryError there, here); within it, it is made
    with pytest.raises(MemoryError):
        call_isolated(MODULE, "allocate", [1 << 30], seconds=60, max_payload=0, what="Demo", memory=64 << 20, force_spawn=spawn)
    assert call_isolated(MODULE, "allocate", [8 << 20], seconds=60, max_payload=0, what="Demo", memory=64 << 20, force_spawn=spawn)[0] == {"n": 8 << 20}
