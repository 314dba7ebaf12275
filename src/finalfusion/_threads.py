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
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Final

__all__ = ["CPUS", "run_tasks"]

#: CPUs this process may run on (its affinity mask where the OS has one).
CPUS: Final = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def run_tasks(tasks: Iterable[Callable[[], object]], threads: int) -> None:
    """Run every task, on ``threads`` worker threads while ``tasks`` is still producing them.

    The iterable is consumed in the calling thread, so a generator can
    prepare task ``k + 1`` (e.g. hash the next words) while workers run
    the earlier ones. With ``threads <= 1`` every task runs in the calling
    thread as soon as it is produced, and no thread is started.

    Parameters
    ----------
    tasks
        Callables without arguments; their return values are ignored.
    threads
        Number of worker threads.

    Raises
    ------
    Exception
        The first exception raised by producing or running a task, after
        every task already submitted has finished.

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
    futures: list[Future[object]] = []
    with ThreadPoolExecutor(threads) as pool:
        for task in tasks:
            futures.append(pool.submit(task))
    for future in futures:
        future.result()
