"""Every worker thread of the library: one kept pool, one thread count, one policy.

numpy releases the GIL inside ``take``, fancy indexing of numeric arrays,
ufunc loops (``add``, ``multiply`` ...) and matmul, so memory-bound work
split into independent tasks runs on several cores from one Python
process. Callers split their work so that every task writes a disjoint
part of the output and computes each element exactly as the serial code
would: results never depend on the thread count.

This module is the only one that starts threads:

* one **pool** of worker threads, created on the first parallel call and
  kept (so its threads are already spread over the cores); a process forked
  afterwards starts without it (the fork hook is registered when the pool
  is created, never at import);
* one **thread count**, :func:`get_threads` / :func:`set_threads` (exported
  as ``finalfusion.get_threads`` / ``finalfusion.set_threads``), read by
  every parallel step: summing subword rows of unknown words in
  ``Embeddings.embedding_batch``, similarity scans, parsing text files;
* one **BLAS policy**: work made of BLAS calls (dense matrix products) is
  split over threads only when the environment pins BLAS to one thread or
  the thread count was set explicitly -- a multi-threaded BLAS called from
  several threads at once oversubscribes the cores;
* the helpers the library runs its work with: :func:`run_tasks`
  (producer/consumer), :func:`in_threads` (one range of rows per thread),
  :class:`InOrder` (jobs whose results are taken in submission order) and
  :func:`run_in_background` (one long job next to the calling thread, e.g.
  writing the tail of a file).

A call from one of the pool's own threads runs serially (a worker never
waits for the pool), and a caller that waits for a job no worker has
started yet runs that job itself: a busy pool slows work down but never
stalls it.
"""

from __future__ import annotations

import itertools
import os
import queue
import threading
from collections import deque
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_all
from typing import Any, Final, Generic, TypeVar

__all__ = [
    "BLAS_THREAD_VARS",
    "CPUS",
    "DEFAULT_THREADS",
    "THREAD_ROWS",
    "Background",
    "InOrder",
    "check_threads",
    "fork_is_safe",
    "get_threads",
    "in_threads",
    "run_in_background",
    "run_tasks",
    "set_threads",
    "threads_for",
]

T = TypeVar("T")

#: CPUs this process may run on (its affinity mask where the OS has one).
CPUS: Final = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
#: Threads (the calling one included) used when :func:`set_threads` was not called.
DEFAULT_THREADS: Final = min(4, CPUS)
#: Environment variables that set the BLAS thread count, in the order OpenBLAS reads them.
BLAS_THREAD_VARS: Final = ("OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")
#: The fewest rows worth a thread in :func:`in_threads`.
THREAD_ROWS = 1 << 16

_setting: int | None = None
_lock = threading.Lock()
_pool: ThreadPoolExecutor | None = None
_pool_size = 0
_fork_hook = False
_local = threading.local()


# ------------------------------------------------------------------------------------
# the thread count
# ------------------------------------------------------------------------------------
def check_threads(threads: Any) -> int | None:
    """``threads`` if it is a positive ``int`` or ``None``; ``ValueError`` otherwise.

    Examples
    --------
    >>> check_threads(2), check_threads(None)
    (2, None)
    """
    if threads is not None and (not isinstance(threads, int) or threads < 1):
        raise ValueError(f"threads must be a positive int or None, got {threads!r}")
    return threads


def set_threads(threads: int | None) -> None:
    """Set how many threads the library uses for one parallel step, the calling one included.

    The setting applies to the whole process and every later call: summing
    the subword rows of unknown words (:meth:`~finalfusion.Embeddings.embedding_batch`),
    similarity scans (quantized storage always; dense storage when BLAS is
    pinned to one thread -- see below), and parsing text files. Results
    never depend on it. A ``threads=`` argument of a call takes precedence
    for that call.

    Parameters
    ----------
    threads
        A positive number of threads; ``1`` keeps all work on the calling
        thread. ``None`` restores the default: the CPUs this process may
        use (its affinity mask), at most 4, and dense matrix products split
        over threads only when the environment pins BLAS to one thread
        (``OPENBLAS_NUM_THREADS=1`` or ``GOTO_``/``OMP_``/``MKL_NUM_THREADS``),
        since a multi-threaded BLAS parallelises them itself. An explicit
        number also splits dense products (pin BLAS yourself, e.g. with
        threadpoolctl, to avoid oversubscribing the cores).

    Raises
    ------
    ValueError
        If ``threads`` is not a positive int or ``None``.

    Examples
    --------
    >>> import finalfusion
    >>> finalfusion.set_threads(1)
    >>> finalfusion.get_threads()
    1
    >>> finalfusion.set_threads(None)  # back to the default
    >>> finalfusion.get_threads() == min(4, finalfusion._threads.CPUS)
    True
    """
    global _setting
    _setting = check_threads(threads)


def get_threads() -> int:
    """The number of threads one parallel step uses (see :func:`set_threads`).

    Examples
    --------
    >>> import finalfusion
    >>> finalfusion.get_threads() >= 1
    True
    """
    return _setting if _setting is not None else DEFAULT_THREADS


def blas_pinned() -> bool:
    """Whether the environment pins BLAS to one thread (the first of :data:`BLAS_THREAD_VARS` set is ``1``).

    Examples
    --------
    >>> import os
    >>> blas_pinned() == (next((os.environ[v] for v in BLAS_THREAD_VARS if os.environ.get(v)), "").strip() == "1")
    True
    """
    setting = next((os.environ[v] for v in BLAS_THREAD_VARS if os.environ.get(v)), None)
    return setting is not None and setting.strip() == "1"


def threads_for(threads: int | None = None, *, blas: bool = False) -> int:
    """Threads for one parallel step: ``threads`` if given, else the setting and the BLAS policy.

    On a thread of the pool it is always 1 (a worker never waits for the pool).

    Examples
    --------
    >>> threads_for(3), threads_for(blas=False) == get_threads()
    (3, True)
    """
    if getattr(_local, "worker", False):
        return 1
    if threads is not None:
        return max(1, threads)
    if _setting is not None:
        return _setting
    if blas and not blas_pinned():
        return 1
    return DEFAULT_THREADS


# ------------------------------------------------------------------------------------
# the pool
# ------------------------------------------------------------------------------------
#: The names of the pool's threads start so.
_POOL_PREFIX: Final = "finalfusion-pool"


def _forget_pool() -> None:
    """In a forked child: it has none of the parent's threads, so start from nothing."""
    global _pool, _pool_size, _lock
    _lock = threading.Lock()  # the parent may have held it while forking
    _pool = None
    _pool_size = 0


def fork_is_safe() -> bool:
    """Whether a fork of this process now inherits no lock another thread may hold: the calling thread is the only
    one, besides the library's own pool (whose threads run only the library's tasks, and which a forked child forgets).

    Examples
    --------
    >>> import threading
    >>> fork_is_safe() is all(t is threading.current_thread() or t.name.startswith("finalfusion-pool") for t in threading.enumerate())
    True
    """
    me = threading.current_thread()
    return all(t is me or t.name.startswith(_POOL_PREFIX) for t in threading.enumerate())


def _as_worker(fn: Callable[..., T], *args: Any) -> T:
    _local.worker = True
    return fn(*args)


def _submit_all(jobs: list[tuple[Callable[..., T], tuple[Any, ...]]], workers: int) -> list[Future[T]]:
    """Submit ``fn(*args)`` for every job to the pool, which has at least ``workers`` threads."""
    global _pool, _pool_size, _fork_hook
    with _lock:
        if _pool is None or _pool_size < workers:
            if not _fork_hook:
                os.register_at_fork(after_in_child=_forget_pool)
                _fork_hook = True
            old = _pool
            _pool_size = max(workers, get_threads() - 1, 1)
            _pool = ThreadPoolExecutor(_pool_size, thread_name_prefix=_POOL_PREFIX)
            if old is not None:
                old.shutdown(wait=False)  # its threads finish what they run, then exit
        return [_pool.submit(_as_worker, fn, *args) for fn, args in jobs]


def _settle(futures: Iterable[Future[Any]]) -> None:
    """Cancel the jobs no worker has started and wait for the others."""
    running = [f for f in futures if not f.cancel()]
    wait_all(running)


def _result(future: Future[T], fn: Callable[..., T], *args: Any) -> T:
    """The job's result; if no worker has started it yet, run it on the calling thread instead."""
    return fn(*args) if future.cancel() else future.result()


# ------------------------------------------------------------------------------------
# helpers
# ------------------------------------------------------------------------------------
def run_tasks(tasks: Iterable[Callable[[], object]], threads: int) -> None:
    """Run every task on ``threads`` threads: the calling one and ``threads - 1`` pool workers.

    The iterable is consumed in the calling thread, so a generator can
    prepare task ``k + 1`` (e.g. hash the next words) while the workers run
    the earlier ones; once it is exhausted, the calling thread runs queued
    tasks too. So no more than ``threads`` threads ever compete for the
    CPUs, and a busy machine (or pool) that starves the workers still makes
    progress on the calling thread. With ``threads <= 1`` (or on a pool
    thread) every task runs in the calling thread as soon as it is
    produced.

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
    threads = threads_for(threads)
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

    workers = _submit_all([(work, ())] * (threads - 1), threads - 1)
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
    _settle(workers)
    if errors:
        raise errors[0]


def in_threads(work: Callable[[int, int], T], rows: int, *, blas: bool, align: int = 1024, threads: int | None = None) -> list[T]:
    """``work(a, b)`` over consecutive ranges covering ``0 .. rows``, one per thread.

    Uses up to :func:`threads_for` threads (``blas=True``: the work is BLAS
    calls, see :func:`set_threads`), none with fewer than :data:`THREAD_ROWS`
    rows; range bounds are multiples of ``align``. The calling thread takes
    the first range. With one range ``work(0, rows)`` runs on the calling
    thread. Returns the results in range order, and only once no range is
    running any more -- also when a range raises (or on Ctrl-C): a range no
    worker has started by then is not run.

    Examples
    --------
    >>> in_threads(lambda a, b: (a, b), 10, blas=False)
    [(0, 10)]
    """
    parts = max(1, min(threads_for(threads, blas=blas), rows // THREAD_ROWS))
    if parts == 1:
        return [work(0, rows)]
    bounds = [0, *(rows * i // parts // align * align for i in range(1, parts)), rows]
    ranges = list(itertools.pairwise(bounds[1:]))
    futures = _submit_all([(work, r) for r in ranges], parts - 1)
    try:
        out = [work(bounds[0], bounds[1])]
        out.extend(_result(f, work, a, b) for f, (a, b) in zip(futures, ranges, strict=True))
    finally:
        _settle(futures)
    return out


class InOrder(Generic[T]):
    """Jobs run on the pool whose results are taken in submission order.

    With one thread (``threads_for(threads) == 1``) a job runs when it is
    submitted. :meth:`take` runs a job no worker has started yet on the
    calling thread. Leaving the ``with`` block cancels the jobs not started
    and waits for the running ones.

    Examples
    --------
    >>> with InOrder(threads=2) as jobs:
    ...     for i in range(5):
    ...         jobs.submit(pow, i, 2)
    ...     jobs.take(0)
    [0, 1, 4, 9, 16]
    """

    def __init__(self, threads: int | None = None) -> None:
        #: Threads working on the jobs, the calling one included.
        self.threads = threads_for(threads)
        self._jobs: deque[tuple[Future[T], Callable[..., T], tuple[Any, ...]]] = deque()
        self._done: deque[T] = deque()

    def submit(self, fn: Callable[..., T], *args: Any) -> None:
        """Queue ``fn(*args)``; its result comes out of :meth:`take` after those of earlier jobs."""
        if self.threads <= 1:
            self._done.append(fn(*args))
            return
        self._jobs.append((_submit_all([(fn, args)], self.threads - 1)[0], fn, args))

    def take(self, keep: int) -> list[T]:
        """Results of the oldest jobs until at most ``keep`` are pending (raising the first job error)."""
        out = list(self._done)
        self._done.clear()
        while len(self._jobs) > keep:
            future, fn, args = self._jobs.popleft()
            out.append(_result(future, fn, *args))
        return out

    def __enter__(self) -> InOrder[T]:
        return self

    def __exit__(self, *exc: object) -> None:
        _settle(f for f, _, _ in self._jobs)
        self._jobs.clear()


class Background(Generic[T]):
    """A call running on its own thread; see :func:`run_in_background`."""

    def __init__(self, fn: Callable[[], T], name: str) -> None:
        self._fn = fn
        self._value: T | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            self._value = self._fn()
        except BaseException as exc:  # re-raised by result()
            self._error = exc

    def result(self) -> T:
        """Wait for the call to finish; its return value, or its exception raised here."""
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._value  # type: ignore[return-value]


def run_in_background(fn: Callable[[], T], name: str = "finalfusion-background") -> Background[T]:
    """Start ``fn()`` on a thread of its own (not the pool: it may run long, e.g. writing a file).

    Call ``.result()`` on the returned handle to wait for it and get its
    value or exception.

    Examples
    --------
    >>> job = run_in_background(lambda: 6 * 7)
    >>> job.result()
    42
    """
    return Background(fn, name)
