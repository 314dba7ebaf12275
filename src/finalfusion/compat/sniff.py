"""Recognise an embedding file's format from its first bytes and load it.

:func:`load` looks at the (decompressed) start of the input and asks the
formats of the registry (:func:`~finalfusion.compat.formats`, each
registered in its own module) in their detection order:

===============================  ==============================================
what the input starts with       format
===============================  ==============================================
``FiFu``                         finalfusion
i32 793712314 (``ba 16 4f 2f``)  fastText ``.bin``
8 fields, 6 integers             floret text (``n_buckets dims min_n max_n n_hashes seed bow eow``)
2 integers, then binary floats   word2vec binary
2 integers, then text lines      text-dims (word2vec text, fastText ``.vec``)
a word and numbers               text (GloVe)
===============================  ==============================================

Anything else is a :class:`~finalfusion.errors.FormatError` that says what
was found.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Final

from finalfusion._load import register_foreign_namer
from finalfusion._progress import ProgressArg, reporter
from finalfusion._remote import is_url
from finalfusion._source import GZIP_MAGIC, Source, open_stream, peek
from finalfusion.compat._registry import Format, formats
from finalfusion.embeddings import Embeddings
from finalfusion.errors import FormatError

__all__ = ["FORMATS", "load", "sniff_format"]  # FORMATS comes from __getattr__: the registry, when asked

#: Bytes looked at.
_SAMPLE = 1 << 16

if TYPE_CHECKING:
    #: The names :func:`sniff_format` can return, in detection order (read from the registry when asked for).
    FORMATS: tuple[str, ...]


def __getattr__(name: str) -> Any:
    # FORMATS is derived from the registry (kept for compatibility): the names sniff_format returns.
    if name == "FORMATS":
        return tuple(f.name for f in formats())
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def sniff_format(sample: bytes, path: str | None = None) -> str:
    """Name the format of a file that starts with ``sample`` (one of :data:`FORMATS`).

    Parameters
    ----------
    sample
        The first bytes of the (decompressed) file; 64 KiB are plenty.
    path
        The file's path, if it is a local file (detectors may use it).

    Raises
    ------
    FormatError
        If the sample matches none of the formats, saying what it found.

    Examples
    --------
    >>> sniff_format(b"FiFu\\x00\\x00\\x00\\x00"), sniff_format(b"2 3\\nBerlin 1 2 3\\n"), sniff_format(b"Berlin 1 2 3\\n")
    ('finalfusion', 'text-dims', 'text')
    >>> sniff_format(b"2 3\\nBerlin \\x00\\x00\\x80?")
    'word2vec'
    >>> sniff_format(b"<html>")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    finalfusion.errors.FormatError: cannot tell the format: not finalfusion (no FiFu magic), ...
    """
    return _detect(sample, path).name


def _detect(sample: bytes, path: str | None) -> Format:
    """The first registered format whose detector accepts ``sample``; else a :class:`FormatError`."""
    if not sample:
        raise FormatError("cannot tell the format of an empty input", offset=0, expected="data", found="no data")
    readable = [f for f in formats() if f.can_read]
    for fmt in readable:
        if fmt.detector is not None and fmt.detector(sample, path):
            return fmt
    expected = "one of " + ", ".join(f.name for f in readable)
    for fmt in readable:
        hint = fmt.near_miss(sample) if fmt.near_miss is not None else None
        if hint is not None:
            raise FormatError(f"cannot tell the format: {hint}", offset=0, expected=expected, found=sample[:16])
    raise FormatError("cannot tell the format: " + _mismatches(readable), offset=0, expected=expected, found=sample[:60])


def _foreign_format(sample: bytes, path: str | None) -> str | None:
    """The format other than finalfusion that ``sample`` is in (the hint of ``load_finalfusion``'s ``BadMagic``), else ``None``.

    Examples
    --------
    >>> _foreign_format(b"2 3\\nBerlin \\x00\\x00\\x80?", None), _foreign_format(b"FiFu", None), _foreign_format(b"<html>", None)
    ('word2vec', None, None)
    """
    try:
        fmt = _detect(sample, path)
    except FormatError:
        return None
    return None if fmt.name == "finalfusion" else fmt.name


register_foreign_namer(_foreign_format)


def _mismatches(candidates: list[Format]) -> str:
    """``not a (why), not b or c (why) and not d (why)``: formats with the same reason named together."""
    groups: list[tuple[list[str], str]] = []
    for fmt in candidates:
        if groups and groups[-1][1] == fmt.mismatch:
            groups[-1][0].append(fmt.name)
        else:
            groups.append(([fmt.name], fmt.mismatch))
    parts = []
    for names, why in groups:
        who = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " or " + names[-1]
        parts.append(f"not {who} ({why})" if why else f"not {who}")
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


def claimed_by_name(path: str) -> Format | None:
    """The first format that claims ``path`` from its name alone, or ``None``: a local directory, or a URL of a model directory
    (ending in ``/``), a sharded index or a weights file, which its loader reads from the URL with the files beside it.

    Examples
    --------
    >>> claimed_by_name("https://example.org/models/m/").name, claimed_by_name("https://example.org/e.fifu")
    ('safetensors', None)
    """
    return next((f for f in formats() if f.can_read and f.detector is not None and f.detector(b"", path)), None)


def directory_format(path: str) -> Format:
    """The first format that claims the directory ``path`` (formats stored as directories).

    Raises
    ------
    FormatError
        If no format claims it, saying what was looked for and what the directory holds.

    Examples
    --------
    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as d:
    ...     directory_format(d)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    finalfusion.errors.FormatError: ...: a directory, and no format stored as a directory claims it: ... found an empty directory
    """
    found = claimed_by_name(path)
    if found is not None:
        return found
    try:
        names = sorted(os.listdir(path))
    except OSError:
        names = []
    listed = ", ".join(names[:5]) + (", ..." if len(names) > 5 else "")
    held = f"{len(names)} {'entry' if len(names) == 1 else 'entries'}: {listed}" if names else "an empty directory"
    raise FormatError(
        f"{path}: a directory, and no format stored as a directory claims it",
        expected="a model directory: *.safetensors or *.safetensors.index.json (safetensors and model2vec models); other formats are files",
        found=held,
    )


#: Options passed only when given, and refused by a format that does not take them (rather than ignored).
MODEL_OPTIONS = ("tensor", "tokenizer")
#: Options passed only when given, and refused for a format that does not take them (not ignored).
_GIVEN_ONLY: Final = (*MODEL_OPTIONS, "cache_bytes")


def refused_option(fmt: Format, options: dict[str, Any]) -> str | None:
    """Why ``fmt`` cannot take the given model options (``tensor``, ``tokenizer``) or ``cache_bytes``, or ``None`` when it can.

    Examples
    --------
    >>> from finalfusion.compat._registry import get_format
    >>> refused_option(get_format("word2vec"), {"tensor": "x"})
    'tensor= does not apply to word2vec input (only to gguf, safetensors)'
    >>> refused_option(get_format("safetensors"), {"tensor": "x", "tokenizer": None}) is None
    True
    >>> refused_option(get_format("gguf"), {"cache_bytes": 1 << 20})
    'cache_bytes= does not apply to gguf input (only to finalfusion)'
    """
    for option in _GIVEN_ONLY:
        if options.get(option) is not None and option not in fmt.options:
            takers = ", ".join(f.name for f in formats() if option in f.options)
            return f"{option}= does not apply to {fmt.name} input (only to {takers})"
    return None


def _read_with(fmt: Format, source: Any, options: dict[str, Any]) -> Embeddings:
    if fmt.loader is None:  # pragma: no cover - _detect only returns readable formats
        raise RuntimeError(f"format {fmt.name!r} has no loader")
    refused = refused_option(fmt, options)
    if refused is not None:
        raise ValueError(refused)
    given = {k: v for k, v in options.items() if k in fmt.options and not (k in _GIVEN_ONLY and v is None)}
    return fmt.loader(source, **given)


def load(
    file: Source,
    *,
    normalize: bool = True,
    lossy: bool = False,
    limit: int | None = None,
    mmap: bool = False,
    progress: ProgressArg = None,
    tensor: str | None = None,
    tokenizer: Any = None,
    cache_bytes: int | None = None,
) -> Embeddings:
    """Load embeddings in any supported format, recognised from the file's first bytes.

    Gzip-compressed input is decompressed transparently. The options apply
    where the format has them: ``normalize``, ``lossy`` and ``limit`` to
    word2vec, text, text-dims and fastText (see :func:`~finalfusion.compat.load_word2vec`);
    ``lossy`` to floret; ``mmap`` to uncompressed finalfusion files given by path
    or URL (a URL's rows stay at the server, see :func:`~finalfusion.load_finalfusion`),
    and ``cache_bytes`` to finalfusion files (the rows kept of a URL read with ``mmap=True``);
    ``tensor`` (the table's name) to GGUF and safetensors models and ``tokenizer``
    to safetensors models (see :func:`~finalfusion.compat.load_safetensors`):
    given for another format, these three are a ``ValueError``, not ignored.
    :func:`~finalfusion.compat.formats` lists the formats, in the order they are tried.
    ``progress`` reports the bytes read (a callable ``progress("read", done,
    total)``, or ``True`` for a tqdm bar when tqdm is installed).

    Parameters
    ----------
    file
        Any :data:`~finalfusion.Source`: a path (``str``, ``os.PathLike`` or
        a ``bytes`` path), the file's contents (``bytes``, ``bytearray``,
        ``memoryview``), a file descriptor or a binary file object.
        A ``str`` or ``os.PathLike`` path may also name a directory (formats stored as one).
        A URL (``https://``, ``s3://``, ...; docs/remote.md) is read with range requests:
        a model directory's URL ends in ``/``.
    tensor
        The name of the model's embedding table, where the file holds several
        (``load_gguf``'s and ``load_safetensors``' ``tensor``); default: the format's choice.
    tokenizer
        The vocabulary of a safetensors model (``load_safetensors``' ``tokenizer``:
        a ``tokenizer.json`` or SentencePiece ``.model`` path, a tokenizer object or a
        token list); default: the tokenizer beside the weights.
    cache_bytes
        With ``mmap=True`` on a finalfusion file at a URL: bytes of row blocks
        kept in memory (``load_finalfusion``'s ``cache_bytes``; default 32 MiB).

    Returns
    -------
    Embeddings

    Raises
    ------
    FormatError
        If the format cannot be recognised (saying what was found; for a
        directory that no format claims, what was looked for and what it
        holds), or the file is malformed.
    ValueError
        If ``tensor``, ``tokenizer`` or ``cache_bytes`` is given for a format that does not take it.

    Examples
    --------
    >>> emb = load(b"2 2\\nfoo 3 4\\nbar 0 1\\n")
    >>> emb.vocab.words, emb["foo"].tolist()
    (['foo', 'bar'], [0.6000000238418579, 0.800000011920929])

    A model's table and vocabulary by name (here a safetensors checkpoint given as
    bytes, so the tokenizer is a token list; a path finds the one beside it):

    >>> import json, struct, numpy as np
    >>> head = json.dumps({n: {"dtype": "F32", "shape": [2, 2], "data_offsets": [16 * i, 16 * i + 16]} for i, n in enumerate("ab")}).encode()
    >>> data = struct.pack("<Q", len(head)) + head + np.array([[3, 4], [0, 2], [1, 0], [0, 1]], dtype="<f4").tobytes()
    >>> emb = load(data, tensor="b", tokenizer=["x", "y"], normalize=False)
    >>> emb["x"].tolist(), emb.metadata["safetensors"]["tensor"]
    ([1.0, 0.0], 'b')
    """
    with reporter(progress) as report:
        options: dict[str, Any] = {
            "normalize": normalize,
            "lossy": lossy,
            "limit": limit,
            "progress": report,
            "tensor": tensor,
            "tokenizer": tokenizer,
            "cache_bytes": cache_bytes,
        }
        path = os.fsdecode(file) if isinstance(file, (str, os.PathLike)) else None
        if path is not None and os.path.isdir(path):
            return _read_with(directory_format(path), path, {**options, "mmap": mmap})
        claimed = claimed_by_name(path) if path is not None and is_url(file) else None
        if claimed is not None:  # a model directory, index or weights file at a URL: read from there, with the files beside it
            return _read_with(claimed, path, {**options, "mmap": mmap})
        if path is not None and os.path.isfile(path):  # a regular file (a named pipe cannot be read twice: it goes the stream's way)
            with open(path, "rb") as raw:
                head = raw.read(_SAMPLE)
            if not head.startswith(GZIP_MAGIC):
                # An uncompressed regular file: the loader gets the path (and mmap, where it maps files).
                return _read_with(_detect(head, path), path, {**options, "mmap": mmap})
        if mmap and is_url(file):  # a .fifu at a URL: its loader leaves the rows at the server (docs/remote.md)
            with open_stream(file) as f:
                sample, _ = peek(f, _SAMPLE)
            fmt = _detect(sample, path)
            if "mmap" in fmt.options and not sample.startswith(GZIP_MAGIC):
                return _read_with(fmt, file, {**options, "mmap": True})
        # A stream (gzip, a pipe, bytes): its (compressed) bytes are counted here, so the loader does not count them again.
        with open_stream(file, report) as f:
            sample, stream = peek(f, _SAMPLE)
            return _read_with(_detect(sample, path), stream, {**options, "progress": None})
