"""Saving and loading indexes: a directory with the backend's own file and a small JSON header.

Layout of a saved index ``OUT/``:

==============  ==========================================================
file            contents
==============  ==========================================================
``ann.json``    header: ``format`` ``"finalfusion-ann"``, ``version`` 1,
                ``backend``, ``params``, ``n``, ``dims``, ``count`` (rows
                indexed), ``fingerprint`` (of the embeddings: storage,
                n, dims, words and rows digests), ``source`` (the mapped
                embeddings file's size, mtime and edge digest, or null),
                ``index_file`` (size and edge digest of the next file)
``index.bin``   the backend's own index file (hnswlib, faiss, usearch or
                voyager format)
==============  ==========================================================

The names are fixed: nothing in the header is ever used as a path, and
both files are opened by the directory rule of the input layer
(:func:`finalfusion._source.file_in`): a regular file inside the
directory -- a FIFO, a device, a socket or a link out of the directory is
a :class:`~finalfusion.errors.FormatError` -- and ``ann.json`` is read only
after its size is checked. The
header is untrusted input: every field is checked (type, range, the
backend's parameter checks) and a bad one raises
:class:`~finalfusion.errors.FormatError` naming the format, what was
expected, what was found and the field. The backend's file is checked for
its size and edge digest, then by its backend before the library reads it
(the graph files of hnswlib, voyager and usearch structurally, every
count, level and neighbour id: :mod:`finalfusion.ann._graphs`; faiss's by
faiss's own reader, IVF lists in the file itself, then for its kind), and every error of the library is
a :class:`~finalfusion.errors.FormatError`.

Saving is atomic and follows the library's output rule
(:mod:`finalfusion._output`): the new directory, with a manifest
(``finalfusion-manifest.json``), is written beside the target and swapped
in with one ``renameat2(RENAME_EXCHANGE)`` (Linux), elsewhere with two
renames; processes that memory-map the old files keep them. An existing
directory is replaced only when it holds exactly an index saved there
(its manifest lists every file, unchanged); anything else is refused.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any, Final

from finalfusion._atomic import atomic_output
from finalfusion._output import edge_digest, edge_digest_of, write_directory
from finalfusion._source import file_in, open_regular, read_regular
from finalfusion.ann._backends import BackendIndex, Shape, backend_class
from finalfusion.ann._fingerprint import Fingerprint, SourceFile
from finalfusion.errors import FormatError
from finalfusion.limits import MAX_DIMS

__all__ = ["FORMAT", "HEADER_NAME", "INDEX_NAME", "VERSION", "open_backend", "read_header", "save_index"]

FORMAT: Final = "finalfusion-ann"
VERSION: Final = 1
HEADER_NAME: Final = "ann.json"
INDEX_NAME: Final = "index.bin"
#: Largest header accepted.
MAX_HEADER_BYTES: Final = 1 << 16
_HEX64: Final = frozenset("0123456789abcdef")


def _edge_digest(path: str) -> tuple[int, str]:
    """Size and edge digest of ``path`` (a regular file: anything else is a :class:`FormatError`), as saving records them."""
    with open_regular(path, chunk=FORMAT) as f:
        return edge_digest_of(f.fileno())


# -- saving ----------------------------------------------------------------------------
#: The kind of directory a saved index is, in its manifest.
KIND: Final = "finalfusion-ann index"


def save_index(impl: BackendIndex, fields: Mapping[str, Any], path: str | os.PathLike[str]) -> str:
    """Write the index ``impl`` and the header ``fields`` (all but format, version and index_file) to the directory ``path`` atomically; its absolute path.

    The directory is written whole by :func:`finalfusion._output.write_directory`
    (with its manifest): an existing ``path`` is replaced only when it is
    empty or holds exactly an index this library saved there.

    Raises
    ------
    OutputRefused
        ``path`` is a file or a symbolic link, or a directory holding
        anything else (named in the message).
    OSError
        On any I/O error (nothing is left behind).
    """

    def fill(directory: str) -> None:
        index_path = os.path.join(directory, INDEX_NAME)
        impl.save(index_path)
        size, digest = edge_digest(index_path)
        header = {"format": FORMAT, "version": VERSION, **fields, "index_file": {"size": size, "digest": digest}}
        with atomic_output(os.path.join(directory, HEADER_NAME)) as f:
            f.write((json.dumps(header, indent=1, sort_keys=True) + "\n").encode("utf-8"))

    return write_directory(path, KIND, fill)


# -- the header, checked -----------------------------------------------------------------
def _bad(message: str, where: str, expected: object, found: object) -> FormatError:
    return FormatError(f"{message} (field {where})", chunk=f"{FORMAT} header", expected=expected, found=found)


def _field(obj: Mapping[str, Any], key: str, kind: type | tuple[type, ...], where: str) -> Any:
    if key not in obj:
        raise _bad("missing field", where + key, f"a {_names(kind)}", "nothing")
    value = obj[key]
    if (isinstance(value, bool) and kind is not bool) or not isinstance(value, kind):
        raise _bad("wrong type", where + key, f"a {_names(kind)}", repr(value)[:80])
    return value


def _names(kind: type | tuple[type, ...]) -> str:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    return " or ".join({int: "whole number", str: "string", dict: "table", type(None): "null"}.get(k, k.__name__) for k in kinds)


def _count(obj: Mapping[str, Any], key: str, where: str, low: int, high: int) -> int:
    value: int = _field(obj, key, int, where)
    if not low <= value <= high:
        raise _bad("out of range", where + key, f"{low}..{high}", value)
    return value


def _hex(obj: Mapping[str, Any], key: str, where: str, length: int) -> str:
    value: str = _field(obj, key, str, where)
    if len(value) != length or not set(value) <= _HEX64:
        raise _bad("not a digest", where + key, f"{length} lowercase hex digits", repr(value)[:80])
    return value


def read_header(directory: str) -> dict[str, Any]:
    """The checked header of the index in ``directory``.

    Raises
    ------
    FormatError
        For a header that is not JSON, names another format or version, or has a missing or bad field.
    OSError
        If it cannot be read (``NotADirectoryError`` or ``FileNotFoundError`` for a path that is no index).
    """
    path = _file(directory, HEADER_NAME)
    raw = read_regular(path, chunk=f"{FORMAT} header", max_bytes=MAX_HEADER_BYTES, limit=f"of an {HEADER_NAME} header")
    try:
        header = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise FormatError(f"not JSON: {exc}", chunk=f"{FORMAT} header", expected="a JSON object", found=repr(raw[:40])) from None
    if not isinstance(header, dict):
        raise _bad("not a table", "(top level)", "a JSON object", type(header).__name__)
    fmt = _field(header, "format", str, "")
    if fmt != FORMAT:
        raise _bad("not a finalfusion ANN index", "format", FORMAT, repr(fmt)[:80])
    version = _field(header, "version", int, "")
    if version != VERSION:
        raise _bad("unsupported version", "version", VERSION, version)
    name = _field(header, "backend", str, "")
    try:
        cls = backend_class(name)
    except ValueError as exc:
        raise _bad(str(exc), "backend", "a known backend", repr(name)[:80]) from None
    params = _field(header, "params", dict, "")
    # a parameter the backend gained later is missing from older headers: their indexes have its default layout
    params = {**{k: p.default for k, p in cls.params.items() if p.added and k not in params}, **params}
    try:
        checked = cls.resolve(params, 1 << 40, _count(header, "dims", "", 1, MAX_DIMS))
    except ValueError as exc:
        raise _bad(str(exc), "params", "valid parameters", repr(params)[:120]) from None
    if any(checked[k] != v for k, v in params.items()) or set(checked) != set(params):
        raise _bad("incomplete parameters", "params", sorted(cls.params), sorted(params))
    n = _count(header, "n", "", 0, 1 << 40)
    dims = _count(header, "dims", "", 1, MAX_DIMS)
    count = _count(header, "count", "", 0, n)
    fp = _field(header, "fingerprint", dict, "")
    storage = _field(fp, "storage", str, "fingerprint.")
    if storage not in ("NdArray", "QuantizedArray"):
        raise _bad("unknown storage", "fingerprint.storage", "NdArray or QuantizedArray", repr(storage)[:80])
    fingerprint = Fingerprint(
        storage,
        _count(fp, "n", "fingerprint.", n, n),
        _count(fp, "dims", "fingerprint.", dims, dims),
        _hex(fp, "words", "fingerprint.", 64),
        _hex(fp, "rows", "fingerprint.", 64),
    )
    source = header.get("source")
    src = None
    if source is not None:
        _field(header, "source", dict, "")
        src = SourceFile(
            _count(source, "size", "source.", 0, 1 << 62), _count(source, "mtime_ns", "source.", -(1 << 62), 1 << 62), _hex(source, "digest", "source.", 32)
        )
    index_file = _field(header, "index_file", dict, "")
    return {
        "backend": name,
        "params": checked,
        "n": n,
        "dims": dims,
        "count": count,
        "fingerprint": fingerprint,
        "source": src,
        "index_size": _count(index_file, "size", "index_file.", 0, 1 << 62),
        "index_digest": _hex(index_file, "digest", "index_file.", 32),
    }


def _file(directory: str, name: str) -> str:
    """The file ``name`` of the index in ``directory``, by the directory rule: a regular file inside it (:func:`~finalfusion._source.file_in`)."""
    if not os.path.isdir(directory):
        raise NotADirectoryError(20, "not a directory (a saved index is a directory)", directory)
    path = file_in(directory, name, chunk=FORMAT)
    if path is None:
        raise FileNotFoundError(2, f"no {name}: not a saved index", os.path.join(directory, name))
    return path


def open_backend(directory: str, header: Mapping[str, Any], mmap: bool) -> BackendIndex:
    """The backend's index in ``directory`` (checked against the ``header`` read from it).

    Raises
    ------
    FormatError
        The file differs from the one the header describes, or its library cannot read it.
    """
    index_path = _file(directory, INDEX_NAME)
    size, digest = _edge_digest(index_path)
    if size != header["index_size"] or digest != header["index_digest"]:
        raise FormatError(
            f"{INDEX_NAME} is not the file the header describes",
            chunk=FORMAT,
            expected=f"{header['index_size']} bytes, edge digest {header['index_digest']}",
            found=f"{size} bytes, edge digest {digest}",
        )
    cls = backend_class(header["backend"])
    try:
        impl = cls.load(index_path, Shape(header["n"], header["dims"]), header["params"], mmap)
    except FormatError:
        raise
    except (RuntimeError, ValueError, OSError, MemoryError, TypeError) as exc:
        raise FormatError(f"{header['backend']} cannot read {INDEX_NAME}: {exc}", chunk=FORMAT) from None
    if impl.count != header["count"]:
        raise FormatError(f"{INDEX_NAME} holds another number of rows", chunk=FORMAT, expected=header["count"], found=impl.count)
    return impl
