"""Progress reporting for long work: the one adapter between ``progress=`` arguments and tqdm.

Every library function that does long work takes ``progress=``:

* ``None`` or ``False``: no reports (the default);
* a callable ``progress(stage, done, total)``: called as the work advances,
  ``total`` is ``None`` when it is not known (a pipe, gzip input);
* ``True``: a ``tqdm.auto`` bar per stage (a widget in notebooks, stderr in
  a terminal) when tqdm is installed (the ``cli`` extra), silently nothing
  otherwise.

Stages: ``"read"`` (bytes of the input), ``"fetch"`` (bytes of a remote file
brought by range requests, :func:`finalfusion._remote.reporting_fetches`), ``"train"`` and ``"encode"``
(quantization), ``"evaluate"`` (analogy questions), ``"select"`` (words),
``"sentences"`` (:meth:`~finalfusion.Embeddings.encode`),
``"index"`` (word rows added to an approximate-neighbour index).
tqdm is imported only when a bar is wanted.

Examples
--------
>>> seen = []
>>> with reporter(lambda stage, done, total: seen.append((stage, done, total))) as report:
...     report("read", 10, 20)
>>> seen
[('read', 10, 20)]
>>> with reporter(None) as report:
...     report is None
True
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import IO, Any

from finalfusion.errors import MissingExtraError, import_extra

__all__ = ["Progress", "ProgressArg", "TqdmBars", "counting", "progress_callback", "reporter"]

#: ``progress(stage, done, total)``; ``total`` is ``None`` when unknown.
Progress = Callable[[str, int, Any], None]
#: What a ``progress=`` argument accepts.
ProgressArg = Progress | bool | None

#: Units of the stages whose bars are not plain counts.
_UNITS = {"read": "B", "fetch": "B"}
_DESCRIPTIONS = {
    "read": "reading",
    "fetch": "fetching",
    "train": "training",
    "encode": "encoding",
    "evaluate": "questions",
    "select": "words",
    "index": "indexing",
    "assign": "assigning",
}


class TqdmBars:
    """A ``progress`` callable that draws one tqdm bar per stage.

    A new stage closes the previous stage's bar; :meth:`close` closes the
    last one. Keyword arguments go to every ``tqdm`` bar (the CLI passes
    ``file=sys.stderr``).

    Examples
    --------
    >>> import io
    >>> out = io.StringIO()
    >>> bars = TqdmBars(factory=None, file=out)  # no tqdm: calls are ignored
    >>> bars("read", 1, 2); bars.close()
    """

    def __init__(self, factory: Any = "auto", **options: Any) -> None:
        if factory == "auto":
            factory = _tqdm()
        self._factory = factory
        self._options = options
        self._stage: str | None = None
        self._bar: Any = None

    def __call__(self, stage: str, done: int, total: Any) -> None:
        if self._factory is None:
            return
        if stage != self._stage or self._bar is None:
            self.close()
            unit = _UNITS.get(stage, "it")
            scaled = {"unit_scale": True, "unit_divisor": 1024} if unit == "B" else {}
            self._bar = self._factory(total=total, desc=_DESCRIPTIONS.get(stage, stage), unit=unit, **scaled, **self._options)
            self._stage = stage
        bar = self._bar
        if total is not None and bar.total != total:
            bar.total = total
        if done > bar.n:
            bar.update(done - bar.n)
        if total is not None and done >= total:
            self.close()  # finished: a later report (a new stage, or a rewind) opens a new bar

    def close(self) -> None:
        """Close the current bar (a later report opens a new one)."""
        if self._bar is not None:
            self._bar.close()
        self._bar = None
        self._stage = None


def _tqdm() -> Any:
    """``tqdm.auto.tqdm``, or ``None`` when tqdm (the ``cli`` extra) is not installed: then no bars, silently."""
    try:
        auto = import_extra("tqdm.auto", "progress bars", extra="cli")
    except MissingExtraError:
        return None
    return auto.tqdm


def progress_callback(progress: ProgressArg) -> Progress | None:
    """The callable to report to for a ``progress=`` argument, or ``None``.

    ``True`` gives a :class:`TqdmBars` (``None`` without tqdm), whose bars
    close when they reach their total; a callable is returned as it is.

    Examples
    --------
    >>> progress_callback(None) is None, progress_callback(print) is print
    (True, True)
    """
    if progress is None or progress is False:
        return None
    if progress is True:
        bars = TqdmBars()
        return bars if bars._factory is not None else None
    if not callable(progress):
        raise TypeError(f"progress must be None, a bool or a callable progress(stage, done, total), not {type(progress).__name__}")
    return progress


@contextlib.contextmanager
def reporter(progress: ProgressArg) -> Iterator[Progress | None]:
    """The callable to report to for a ``progress=`` argument (``None``: do not report).

    ``True`` gives a :class:`TqdmBars` (or ``None`` without tqdm) that is
    closed when the block ends; a callable is passed through.
    """
    report = progress_callback(progress)
    try:
        yield report
    finally:
        if isinstance(report, TqdmBars):
            report.close()


class _Counting:
    """A binary file object that reports the position reached to ``report("read", pos, total)``.

    Every other attribute is the wrapped file's, so callers that look at
    ``fileno``, ``seekable`` or ``tell`` see the real file.
    """

    def __init__(self, f: IO[bytes], report: Progress, total: int | None) -> None:
        self._f = f
        self._report = report
        self._total = total
        self._pos = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._f, name)

    def _advance(self, n: int) -> None:
        if n:
            self._pos += n
            self._report("read", self._pos, self._total)

    def read(self, n: int = -1) -> bytes:
        data = self._f.read(n)
        self._advance(len(data))
        return data

    def read1(self, n: int = -1) -> bytes:
        data: bytes = self._f.read1(n)  # type: ignore[attr-defined]
        self._advance(len(data))
        return data

    def readinto(self, b: Any) -> int:
        n: int = self._f.readinto(b)  # type: ignore[attr-defined]
        self._advance(n or 0)
        return n

    def readline(self, limit: int = -1) -> bytes:
        data = self._f.readline(limit)
        self._advance(len(data))
        return data

    def seek(self, offset: int, whence: int = 0) -> int:
        start = self._f.tell()
        end = self._f.seek(offset, whence)
        self._pos += end - start
        return end


def counting(f: IO[bytes], report: Progress | None, total: int | None) -> IO[bytes]:
    """``f``, reporting the bytes read from it to ``report`` (``f`` itself when ``report`` is ``None``).

    Examples
    --------
    >>> import io
    >>> seen = []
    >>> f = counting(io.BytesIO(b"abcdef"), lambda *a: seen.append(a), 6)
    >>> f.read(4), seen
    (b'abcd', [('read', 4, 6)])
    """
    if report is None:
        return f
    return _Counting(f, report, total)  # type: ignore[return-value]
