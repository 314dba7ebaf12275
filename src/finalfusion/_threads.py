"""Running numpy work on a few threads.

numpy releases the GIL inside ``take``, fancy indexing of numeric arrays,
ufunc loops (``add``, ``multiply`` ...) and matmul, so memory-bound work
split into independent tasks runs on several cores from one Python
process. Callers split their work so that every task writes a disjoint
part of the output and computes each element exactly as the serial code
would: results never depend on the thread count.
"""

from __future__ import annotations

import os
import queue
import threading
from collections.abc import Callable, Iterable
from typing import Final

__all__ = ["CPUS", "run_tasks"]

#: CPUs this process may run on (its affinity mask where the OS has one).
CPUS: Final = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def run_tasks(tasks: Iterable[Callable[[], object]], threads: int) -> None:
    """Run every task on ``threads`` threads: the calling one and ``threads - 1`` workers.

    The iterable is consumed in the calling thread, so a generator can
    prepare task ``k + 1`` (e.g. hash the next words) while the workers run
    the earlier ones; once it is exhausted, the calling thread runs queued
    tasks too. So no more than ``threads`` threads ever compete for the
    CPUs, and a busy machine that starves the workers still makes progress
    on the calling thread. With ``threads <= 1`` every task runs in the
    calling thread as soon as it is produced, and no thread is started.

    Parameters
    ----------
    tasks
        Callables without arguments; their return values are ignored.
    threads
        Number of threads, the calling one included.

    Raises
    ------
    Exception
        The first exception raised by producing or running a task. After
        it, no further task is produced or started; the call returns once
        the tasks already running have finished.

    Examples
    --------
    >>> import numpy as np
    >>> out = np.zeros(6)
    >>> def fill(lo):
    ...     out[lo : lo + 2] = lo
    >>> run_tasks((lambda lo=lo: fill(lo) for lo in range(0, 6, 2)), threads=2)
    >>> out.tolist()
    [0.0, 0.0, 2.0, 2.0, 4.0, 4.0]
    """
    if threads <= 1:
        for task in tasks:
            task()
        return
    pending: queue.SimpleQueue[Callable[[], object] | None] = queue.SimpleQueue()
    errors: list[BaseException] = []

    def run(task: Callable[[], object]) -> None:
        if errors:
            return  # a task or the producer failed: the result is lost anyway
        try:
            task()
        except BaseException as exc:  # re-raised in the calling thread
            errors.append(exc)

    def work() -> None:
        while (task := pending.get()) is not None:
            run(task)

    workers = [threading.Thread(target=work, name=f"finalfusion-worker-{k}", daemon=True) for k in range(threads - 1)]
    for worker in workers:
        worker.start()
    try:
        for task in tasks:
            if errors:
                break
            pending.put(task)
    except BaseException as exc:  # includes KeyboardInterrupt: stop the workers, then re-raise
        errors.append(exc)
    # Help with what is left, then stop the workers (each finishes its current task first).
    while True:
        try:
            left = pending.get_nowait()
        except queue.Empty:
            break
        if left is not None:
            run(left)
    for _ in workers:
        pending.put(None)
    for worker in workers:
        worker.join()
    if errors:
        raise errors[0]
