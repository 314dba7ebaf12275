"""The backend registry: one small class per index library, behind one protocol.

A backend builds an index from blocks of ``(row ids, unit rows)``,
searches it by inner product, saves it to one file of its own format and
loads (or memory-maps) it again. Each lives in its own module
(``_hnswlib``, ``_faiss``, ``_usearch``, ``_voyager``) and registers
itself with :func:`register_backend`; its library is imported only through
:func:`finalfusion.errors.import_extra` (extra ``ann``) when an index is
built or loaded.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import Any, ClassVar, Final, Protocol

from finalfusion.errors import FormatError
from finalfusion.similarity._topk import F32, I64
from finalfusion.storage.quantized import QuantizedArray

__all__ = [
    "DEFAULT_BACKEND",
    "DEFAULT_EF",
    "DEFAULT_EF_CONSTRUCTION",
    "DEFAULT_M",
    "Backend",
    "BackendIndex",
    "Param",
    "Rows",
    "Shape",
    "backend_class",
    "backend_names",
    "bool_param",
    "check_params",
    "choice_param",
    "int_param",
    "library_errors",
    "register_backend",
]

#: The backend :func:`finalfusion.ann.build_index` uses when none is named (change it here only).
DEFAULT_BACKEND: Final = "faiss-ivf"
#: The HNSW backends' default links per row (hnswlib, faiss-hnsw, usearch, voyager: ``M``).
DEFAULT_M: Final = 16
#: The HNSW backends' default candidate list width while building (``ef_construction``).
DEFAULT_EF_CONSTRUCTION: Final = 100
#: The HNSW backends' default candidate list width while searching (``ef``; wider finds more true neighbours, slower).
DEFAULT_EF: Final = 256


class Rows(Protocol):
    """What a build reads: the unit word rows (see :class:`finalfusion.ann._rows.RowSource`)."""

    #: Row ids are ``0 .. n - 1`` (some may be left out).
    n: int
    dims: int
    #: The quantized storage the rows are reconstructed from, or ``None`` for dense storage.
    quantized: QuantizedArray | None

    def blocks(self, stage: str = "index") -> Iterable[tuple[I64, F32]]:
        """``(row ids, unit float32 rows)`` blocks, in row order; progress is reported as ``stage``."""

    def report(self, stage: str, done: int, total: int) -> None:
        """Report progress of a stage that is not a pass over the rows (e.g. ``"train"``)."""

    def sample(self, count: int, seed: int) -> F32:
        """About ``count`` unit rows drawn at random (a training sample)."""


@dataclass(frozen=True)
class Param:
    """One parameter of a backend: its default and its check (``None``: the check's own default, worked out from the rows).

    ``added`` marks a parameter a backend gained after indexes were first saved: a saved header without it means
    its default (the layout every index had before), so older index files still load.
    """

    default: Any
    check: Callable[[str, str, Any], Any]
    doc: str
    added: bool = False


def bool_param(default: bool, doc: str) -> Param:
    """A yes/no parameter (``True``/``False``, or ``1``/``0`` as the command line gives it)."""

    def check(backend: str, name: str, value: Any) -> Any:
        if value in (0, 1) and type(value) in (bool, int):
            return bool(value)
        raise ValueError(f"{backend}: parameter {name} must be true or false (1 or 0), not {value!r}")

    return Param(default, check, doc)


def choice_param(default: str, choices: tuple[str, ...], doc: str, *, added: bool = False) -> Param:
    """A parameter that is one of a few names (``choices``)."""

    def check(backend: str, name: str, value: Any) -> Any:
        if not isinstance(value, str) or value not in choices:
            raise ValueError(f"{backend}: parameter {name} must be one of {', '.join(choices)}, not {value!r}")
        return value

    return Param(default, check, doc, added)


def int_param(default: int | None, low: int, high: int, doc: str) -> Param:
    """An integer parameter in ``[low, high]`` (``None`` allowed when it is the default)."""

    def check(backend: str, name: str, value: Any) -> Any:
        if value is None and default is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"{backend}: parameter {name} must be a whole number, not {value!r}")
        if not low <= value <= high:
            raise ValueError(f"{backend}: parameter {name} must be in [{low}, {high}], not {value}")
        return value

    return Param(default, check, doc)


@dataclass(frozen=True)
class Shape:
    """What a saved index must be for: the embeddings' ``n`` word rows of ``dims``."""

    n: int
    dims: int


class library_errors:
    """Turn the exceptions ``kinds`` that ``library`` raises while doing ``stage`` into a :class:`FormatError` (DESIGN rule 16).

    Each backend wraps every call into its library (load and search) in this, once, naming the library's own exception
    types: a file the library refuses, or an index it cannot search, is a format error of that backend's file. A class
    rather than a generator: it wraps every single search, where a generator's set-up costs microseconds.

    Examples
    --------
    >>> with library_errors("faiss", "search", (RuntimeError,)):
    ...     raise RuntimeError("bad index")
    Traceback (most recent call last):
    ...
    finalfusion.errors.FormatError: faiss index: faiss cannot search: RuntimeError: bad index
    """

    __slots__ = ("kinds", "library", "stage")

    def __init__(self, library: str, stage: str, kinds: tuple[type[BaseException], ...]) -> None:
        self.library, self.stage, self.kinds = library, stage, kinds

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        if exc is None or isinstance(exc, FormatError) or not isinstance(exc, self.kinds):
            return
        raise FormatError(f"{self.library} cannot {self.stage}: {type(exc).__name__}: {exc}", chunk=f"{self.library} index") from None


class BackendIndex(Protocol):
    """A built or loaded index of one backend."""

    #: Rows in the index.
    count: int

    def search(self, queries: F32, k: int, threads: int) -> tuple[I64, F32]:
        """Row ids (``-1`` padded) and inner products (``nan`` padded) of the ``k`` best rows per query; ``k <= count``."""

    def save(self, path: str) -> None:
        """Write the backend's own index file to ``path``."""

    def to_bytes(self) -> bytes:
        """The index as bytes (pickling by value)."""

    def set_search(self, name: str, value: int) -> None:
        """Set the search-time parameter ``name`` (one of the backend's :attr:`Backend.search_params`) for later searches."""


class Backend(Protocol):
    """A backend class: its name, parameters, file and constructors."""

    name: ClassVar[str]
    module: ClassVar[str]
    params: ClassVar[Mapping[str, Param]]
    #: Whether :meth:`load` can memory-map the file (else it is read into memory).
    can_mmap: ClassVar[bool]
    #: The parameters a built index can change (:meth:`finalfusion.ann.AnnIndex.set_search`).
    search_params: ClassVar[tuple[str, ...]]

    @classmethod
    def resolve(cls, params: Mapping[str, Any], n: int, dims: int) -> dict[str, Any]:
        """Checked ``params`` with the defaults that depend on the rows worked out (``ValueError`` naming backend and parameter)."""

    @classmethod
    def build(cls, rows: Rows, params: Mapping[str, Any], threads: int) -> BackendIndex:
        """Build an index of ``rows`` with resolved ``params`` on ``threads`` threads."""

    @classmethod
    def load(cls, path: str, shape: Shape, params: Mapping[str, Any], mmap: bool) -> BackendIndex:
        """Open the index file at ``path`` (memory-mapped when ``mmap`` and the backend can), checked against ``shape`` and
        ``params`` before its library reads a byte of it (:class:`FormatError` otherwise)."""

    @classmethod
    def from_bytes(cls, data: bytes, shape: Shape, params: Mapping[str, Any]) -> BackendIndex:
        """The index :meth:`BackendIndex.to_bytes` wrote, checked like :meth:`load`."""


_BACKENDS: dict[str, type[Backend]] = {}


def register_backend(cls: type[Backend]) -> type[Backend]:
    """Register a backend class under its ``name`` (twice is an error)."""
    if cls.name in _BACKENDS:
        raise ValueError(f"ANN backend {cls.name!r} registered twice")
    _BACKENDS[cls.name] = cls
    return cls


def backend_names() -> list[str]:
    """The registered backends, sorted.

    Examples
    --------
    >>> "hnswlib" in backend_names(), backend_names() == sorted(backend_names())
    (True, True)
    """
    return sorted(_BACKENDS)


def backend_class(name: Any) -> type[Backend]:
    """The backend called ``name``.

    Raises
    ------
    ValueError
        For an unknown name (the message lists the known ones).
    """
    if not isinstance(name, str) or name not in _BACKENDS:
        raise ValueError(f"unknown ANN backend {name!r}: expected one of {', '.join(backend_names())}")
    return _BACKENDS[name]


def check_params(cls: Any, params: Mapping[str, Any]) -> dict[str, Any]:
    """``params`` completed with the backend's defaults and checked.

    Raises
    ------
    ValueError
        Naming the backend and the parameter: an unknown name or a bad value.
    """
    unknown = sorted(set(params) - set(cls.params))
    if unknown:
        raise ValueError(f"{cls.name}: unknown parameter {unknown[0]!r}: expected one of {', '.join(sorted(cls.params))}")
    return {name: p.check(cls.name, name, params.get(name, p.default)) for name, p in cls.params.items()}
