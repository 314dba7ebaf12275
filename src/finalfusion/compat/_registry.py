"""The one table of embedding file formats: name -> detector, loader, writer, extensions.

:func:`finalfusion.load` (:mod:`finalfusion.compat.sniff`) recognises a
file by asking each registered format's *detector* in turn, and calls the
*loader* of the first that says yes; conversion tools and the docs list
the formats from here. Each format registers itself in its own module
with :func:`register_format`, like chunk classes register by id, so a new
format is one new module (imported by :mod:`finalfusion.compat`) and
nothing else: there is no ``if``/``elif`` over format names anywhere.

Detection order is the ``order`` of each registration (unique, checked at
import). By convention:

=========  ===========================================================
order      formats
=========  ===========================================================
0 .. 99    recognised by a magic number (finalfusion 0, fastText 10):
           unambiguous, so their relative order does not matter
100 .. 199 recognised by a text header (floret, word2vec, text-dims)
200 ..     fallbacks that accept what nothing earlier claimed (text)
=========  ===========================================================

A detector receives the first 64 KiB of the decompressed input and, when
the input is a local file or directory, its path (else ``None``); for a
directory the sample is empty, so formats stored as directories (a model
directory, say) look at the path and formats that are single files need
not care. Detectors must not raise and should not read more than they
need.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from finalfusion.embeddings import Embeddings

__all__ = ["LOAD_OPTIONS", "Format", "formats", "get_format", "register_format"]

#: Options of :func:`finalfusion.load` that are passed to a loader that declares them (``tensor`` and ``tokenizer``
#: only when given: a model's table and vocabulary, for the formats that read models).
LOAD_OPTIONS: Final = frozenset({"normalize", "lossy", "limit", "mmap", "cache_bytes", "progress", "tensor", "tokenizer"})

#: ``detector(sample, path)``: whether the input is in this format.
Detector = Callable[[bytes, "str | None"], bool]


@dataclass(frozen=True)
class Format:
    """One registered embedding format (a record of :func:`~finalfusion.compat.formats`).

    Attributes
    ----------
    name : str
        The name :func:`~finalfusion.compat.sniff_format` returns (``"word2vec"``).
    description : str
        One line saying what the format is.
    extensions : tuple[str, ...]
        Conventional file name endings, the preferred one first. Several
        formats may share one (``.bin``, ``.txt``); detection never uses them.
    order : int
        Position in the detection order (smaller first).
    options : frozenset[str]
        Which of ``normalize``, ``lossy``, ``limit``, ``mmap``, ``progress``, ``tensor`` and ``tokenizer`` the loader takes.
    mismatch : str
        Why a sample is not in this format, for the message when nothing matches.
    detector : callable or None
        ``detector(sample, name)``: whether the first bytes of a file (and
        its name) are in this format; ``None`` for a format that is only written.
    loader : callable or None
        Reads a file of this format into :class:`~finalfusion.Embeddings`
        (what :func:`finalfusion.load` calls); ``None`` for a format that is only written.
    writer : callable or None
        ``writer(file, embeddings)``; ``None`` for a format that is only read.
    near_miss : callable or None
        ``near_miss(sample)``: what is wrong with a file that is almost in
        this format (a message), ``None`` when it is not or when the format has no such check.

    Examples
    --------
    >>> from finalfusion.compat import formats
    >>> w2v = next(f for f in formats() if f.name == "word2vec")
    >>> w2v.can_read, w2v.can_write, w2v.extensions
    (True, True, ('.bin', '.w2v'))
    """

    name: str
    description: str
    extensions: tuple[str, ...]
    order: int
    options: frozenset[str]
    mismatch: str = field(repr=False)
    detector: Detector | None = field(repr=False)
    loader: Callable[..., Embeddings] | None = field(repr=False)
    writer: Callable[[Any, Embeddings], None] | None = field(repr=False)
    near_miss: Callable[[bytes], str | None] | None = field(repr=False)

    @property
    def can_read(self) -> bool:
        """Whether :func:`finalfusion.load` can recognise and read this format.

        Examples
        --------
        >>> from finalfusion.compat import formats
        >>> all(f.can_read for f in formats())
        True
        """
        return self.detector is not None and self.loader is not None

    @property
    def can_write(self) -> bool:
        """Whether there is a writer: ``fmt.writer(file, embeddings)``.

        Examples
        --------
        >>> from finalfusion.compat._registry import get_format
        >>> get_format("text").can_write
        True
        """
        return self.writer is not None


_FORMATS: dict[str, Format] = {}


def register_format(
    name: str,
    *,
    description: str,
    extensions: Iterable[str] = (),
    order: int,
    detector: Detector | None = None,
    loader: Callable[..., Embeddings] | None = None,
    writer: Callable[[Any, Embeddings], None] | None = None,
    options: Iterable[str] = (),
    mismatch: str = "",
    near_miss: Callable[[bytes], str | None] | None = None,
) -> Format:
    """Add a format to the table (call it once, in the format's own module).

    Parameters
    ----------
    name
        Unique name, lower case.
    description
        One line for listings.
    extensions
        Conventional endings with their dot, preferred first.
    order
        Unique position in the detection order (see the module docstring).
    detector
        ``detector(sample, path) -> bool``; ``None`` for a write-only format.
    loader
        ``loader(source, **options) -> Embeddings``; ``source`` is the path
        when the input is an uncompressed regular file or a directory, else a
        binary stream positioned at the (decompressed) start.
    writer
        ``writer(file, embeddings)``, or ``None`` for a read-only format.
    options
        The :data:`LOAD_OPTIONS` the loader accepts (``mmap`` is passed only with a path, ``tensor``,
        ``tokenizer`` and ``cache_bytes`` only when given).
    mismatch
        Why a sample is not this format (``"no FiFu magic"``), for the error
        when nothing matches; formats with the same text are named together.
    near_miss
        ``near_miss(sample)``: when no format matched, a hint that the input
        is a damaged or partial file of this format, else ``None``.

    Returns
    -------
    Format
        The registered record.

    Raises
    ------
    RuntimeError
        If the name or the order is taken (at import time), or an option is unknown.

    Examples
    --------
    >>> register_format("text", description="again", order=999)
    Traceback (most recent call last):
    ...
    RuntimeError: format 'text' is registered twice
    """
    unknown = set(options) - LOAD_OPTIONS
    if unknown:
        raise RuntimeError(f"format {name!r}: unknown load options {sorted(unknown)} (known: {sorted(LOAD_OPTIONS)})")
    fmt = Format(
        name=name,
        description=description,
        extensions=tuple(extensions),
        order=order,
        options=frozenset(options),
        mismatch=mismatch,
        detector=detector,
        loader=loader,
        writer=writer,
        near_miss=near_miss,
    )
    if name in _FORMATS:
        raise RuntimeError(f"format {name!r} is registered twice")
    clash = next((f.name for f in _FORMATS.values() if f.order == order), None)
    if clash is not None:
        raise RuntimeError(f"formats {clash!r} and {name!r} both have detection order {order}")
    _FORMATS[name] = fmt
    return fmt


def formats() -> tuple[Format, ...]:
    """Every registered format, in detection order.

    Returns
    -------
    tuple[Format, ...]
        One record per format: ``name``, ``description``, ``extensions``,
        ``can_read``, ``can_write`` (and the loader and writer themselves).

    Examples
    --------
    >>> from finalfusion.compat import formats
    >>> [f.name for f in formats()]
    ['finalfusion', 'gguf', 'safetensors', 'hdf5', 'fasttext', 'floret', 'word2vec', 'text-dims', 'text']
    >>> for f in formats()[:2]:
    ...     print(f"{f.name:12} {' '.join(f.extensions):10} read={f.can_read} write={f.can_write}")
    finalfusion  .fifu      read=True write=True
    gguf         .gguf      read=True write=True
    """
    return tuple(sorted(_FORMATS.values(), key=lambda f: f.order))


def get_format(name: str) -> Format:
    """The registered format called ``name``.

    Raises
    ------
    KeyError
        For an unknown name (the message lists the known ones).

    Examples
    --------
    >>> get_format("floret").extensions
    ('.floret',)
    >>> get_format("npy")
    Traceback (most recent call last):
    ...
    KeyError: "unknown format 'npy'; known formats: finalfusion, gguf, safetensors, hdf5, fasttext, floret, word2vec, text-dims, text"
    """
    try:
        return _FORMATS[name]
    except KeyError:
        raise KeyError(f"unknown format {name!r}; known formats: {', '.join(f.name for f in formats())}") from None
