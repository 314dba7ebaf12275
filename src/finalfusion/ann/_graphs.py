"""Structural checks of the HNSW graph files that hnswlib, voyager and usearch read, before their library sees a byte.

hnswlib, voyager and usearch trust their files: a neighbour id, an entry
point or a level out of range makes them read outside their memory at load
or at the first query. Each file is therefore walked here with the
bounds-checked cursor (:class:`~finalfusion._binary.ByteReader`) and every
field the search follows is checked, the per-row parts vectorised with
numpy in blocks of :data:`BLOCK` rows. A file that passes holds exactly what
the search reads: no count, offset, neighbour id or level can lead outside
the file's rows.

hnswlib (``HierarchicalNSW::saveIndex``; voyager writes the same after its
own 19-byte header, ``Metadata::V1``), all little-endian:

================================  =====================================================
field                             checked
================================  =====================================================
``offsetLevel0`` u64              0
``max_elements`` u64              ``cur_element_count`` .. max(1, n)
``cur_element_count`` u64         <= ``max_elements``
``size_data_per_element`` u64     ``label_offset + 8``
``label_offset`` u64              ``offsetData + 4 * vector dims``
``offsetData`` u64                ``4 + 4 * maxM0`` (the level-0 link list)
``maxlevel`` i32                  the entry point's level (-1 when empty)
``enterpoint_node`` u32           < ``cur_element_count``
``maxM``, ``maxM0``, ``M`` u64    ``M``, ``2 M``, ``M`` (the header's parameter)
``mult`` f64                      finite, > 0
``ef_construction`` u64           (not read by a search)
level 0: one record per row       link count (u16) <= ``maxM0``, no flags (deleted
                                  rows), every listed neighbour < count, label < n
                                  and unique
upper levels: per row u32 size    a multiple of ``4 + 4 maxM``, level <= ``maxlevel``;
then ``level`` link lists         count <= ``maxM``, neighbours < count and present
                                  on that level; the file ends with the last list
================================  =====================================================

usearch (``index_dense_gt::save_to_stream``): ``u32 rows, u32 bytes per
row`` and the rows; a 64-byte header (``usearch`` magic, version 2.x,
metric ``ip``, the row type, ``u64`` keys, ``u32`` slots, rows present =
the rows, none deleted, dims, not multi); the graph header
(``u64`` size, connectivity = M, base connectivity = 2 M, max level,
entry slot); ``i16`` levels per node; then per node ``u64`` key, ``i16``
level (= the table's), the base list (``u32`` count <= 2 M, 2 M ``u32``
slots) and ``level`` upper lists (count <= M, M slots), every listed slot
< size and present on that level, keys < n and unique; the file ends with
the last node.
"""

from __future__ import annotations

import contextlib
import math
import struct
from collections.abc import Iterator
from typing import Final

import numpy as np
import numpy.typing as npt

from finalfusion._binary import Buffer, ByteReader
from finalfusion._source import map_path
from finalfusion.ann._backends import Shape
from finalfusion.errors import FormatError

__all__ = ["BLOCK", "VOYAGER_HEADER", "check_hnswlib", "check_usearch", "check_voyager", "mapped"]

#: Rows whose link lists are checked at once (bounds the temporary memory of a check).
BLOCK: Final = 1 << 16
_HNSW_HEADER: Final = struct.Struct("<QQQQQQiIQQQdQ")
#: voyager's header: ``VOYA``, version, dims, space, storage type, max norm, order-preserving transform.
VOYAGER_HEADER: Final = struct.Struct("<4siiBBfB")
_VOYAGER_INNER_PRODUCT: Final = 1
_VOYAGER_FLOAT32: Final = 0x20
_USEARCH_HEAD: Final = struct.Struct("<7sHHHBBBBQQQ?")
_USEARCH_HEAD_BYTES: Final = 64
_USEARCH_GRAPH: Final = struct.Struct("<QQQQQ")
#: usearch's scalar kinds (``scalar_kind_t``) of the row types finalfusion builds, their bytes, and its key and slot types.
_USEARCH_SCALARS: Final = {"f32": (11, 4), "f16": (12, 2)}
_USEARCH_KEY_U64: Final = 14
_USEARCH_SLOT_U32: Final = 15
_USEARCH_IP: Final = ord("i")
#: Deepest level a graph may have (2**-64 odds at M = 2; usearch and hnswlib stay far below).
_MAX_LEVEL: Final = 64
_U8 = npt.NDArray[np.uint8]
_U32 = npt.NDArray[np.uint32]
_I64 = npt.NDArray[np.int64]


@contextlib.contextmanager
def mapped(path: str) -> Iterator[Buffer]:
    """The file at ``path`` memory-mapped read-only (nothing is copied), closed afterwards."""
    buf, _ = map_path(path)
    try:
        yield buf
    finally:
        close = getattr(buf, "close", None)
        if close is not None:
            with contextlib.suppress(BufferError):  # an array of a failed check still views it (the traceback): closed when it goes
                close()


def _bad(r: ByteReader, message: str, expected: object, found: object, offset: int | None = None) -> FormatError:
    return r.error(message, expected=expected, found=found, offset=offset)


def _blocks(count: int) -> Iterator[slice]:
    for start in range(0, count, BLOCK):
        yield slice(start, min(count, start + BLOCK))


def _check_links(r: ByteReader, what: str, counts: _I64, links: _U32, limit: int, levels: _I64, level: int, offset: int) -> None:
    """Each row's first ``counts`` of ``links`` must be node ids < ``len(levels)`` whose level is at least ``level``; ``counts <= limit``."""
    over = np.flatnonzero(counts > limit)
    if len(over):
        raise _bad(r, f"{what}: a link list is longer than the graph allows", f"at most {limit} links", int(counts[over[0]]), offset)
    if not links.size:
        return
    listed = np.arange(links.shape[1])[None, :] < counts[:, None]
    ids = np.where(listed, links, 0)  # the slots past a row's count are not read by the search
    top = int(ids.max())
    if top >= len(levels):
        raise _bad(r, f"{what}: a neighbour id is out of range", f"ids < {len(levels)}", top, offset)
    if level > 0:
        low = int(np.where(listed, levels[ids], level).min())
        if low < level:
            raise _bad(r, f"{what}: a neighbour is not on the level that links to it", f"level >= {level}", low, offset)


def _check_labels(r: ByteReader, what: str, labels: npt.NDArray[np.uint64], n: int, offset: int) -> None:
    if not len(labels):
        return
    top = int(labels.max())
    if top >= n:
        raise _bad(r, f"{what}: a row id is out of range", f"ids < {n} (the embeddings' rows)", top, offset)
    if int(np.bincount(labels.astype(np.intp)).max()) > 1:  # O(n): ids < n, and n rows are in memory already
        raise _bad(r, f"{what}: a row id is indexed twice", "each row at most once", "a repeated id", offset)


def _field(r: ByteReader, name: str, found: int | float, expected: object, ok: bool, offset: int) -> None:
    if not ok:
        raise _bad(r, f"bad header field {name}", expected, found, offset)


def check_hnswlib(buf: Buffer, shape: Shape, m: int, *, start: int = 0, vector_dims: int | None = None, chunk: str = "hnswlib index") -> None:
    """Check the hnswlib index file in ``buf`` (from ``start`` to its end) for ``shape`` and ``M = m``.

    ``vector_dims`` is the stored row length (default ``shape.dims``; voyager's inner product stores one more).

    Raises
    ------
    FormatError
        Naming the field or row at fault (:class:`~finalfusion.errors.Truncated` when the file ends early).
    """
    r = ByteReader(buf, start, chunk=chunk)
    head = r.pos
    off0, max_el, count, per_el, label_off, off_data, max_level, entry, max_m, max_m0, hm, mult, _ = r.unpack(_HNSW_HEADER, "header")
    dims = shape.dims if vector_dims is None else vector_dims
    links0 = 4 + 4 * max_m0
    _field(r, "offsetLevel0", off0, 0, off0 == 0, head)
    _field(r, "max_elements", max_el, f"{count}..{max(1, shape.n)}", count <= max_el <= max(1, shape.n), head + 8)
    _field(r, "M", hm, m, hm == m, head + 80)
    _field(r, "maxM", max_m, m, max_m == m, head + 64)
    _field(r, "maxM0", max_m0, 2 * m, max_m0 == 2 * m, head + 72)
    _field(r, "offsetData", off_data, links0, off_data == links0, head + 40)
    _field(r, "label_offset", label_off, f"{links0 + 4 * dims} ({dims} dims)", label_off == links0 + 4 * dims, head + 32)
    _field(r, "size_data_per_element", per_el, label_off + 8, per_el == label_off + 8, head + 24)
    _field(r, "mult", mult, "a finite number > 0", math.isfinite(mult) and mult > 0, head + 88)
    if count == 0:
        if r.remaining:
            raise _bad(r, "an empty index has data after its header", "the end of the file", f"{r.remaining} more bytes")
        return
    _field(r, "enterpoint_node", entry, f"< {count}", entry < count, head + 52)
    _field(r, "maxlevel", max_level, f"0..{_MAX_LEVEL}", 0 <= max_level <= _MAX_LEVEL, head + 48)
    level0_at = r.pos
    rows = r.array("u1", (count, per_el), "level-0 records")
    levels, upper = _upper_levels(r, count, max_m, max_level)
    if int(levels[entry]) != max_level:
        raise _bad(r, "the entry point is not on the top level", max_level, int(levels[entry]), head + 52)
    for part in _blocks(count):
        block = rows[part]
        at = level0_at + part.start * per_el
        if block[:, 2:4].any():
            raise _bad(r, "level 0: a row is marked deleted (finalfusion never deletes)", "flags 0", "a set flag", at)
        counts = block[:, 0:2].copy().view("<u2").ravel().astype(np.int64)
        links = block[:, 4:links0].copy().view("<u4")
        _check_links(r, "level 0", counts, links, max_m0, levels, 0, at)
    labels = np.ascontiguousarray(rows[:, label_off:per_el]).view("<u8").ravel()
    _check_labels(r, "labels", labels, shape.n, level0_at + label_off)
    per_level = 1 + max_m
    for level, words, offsets in upper:
        for part in _blocks(len(words)):
            lists = words[part]
            _check_links(r, f"level {level}", lists[:, 0].astype(np.int64), lists[:, 1:per_level], max_m, levels, level, int(offsets[part.start]))


def _upper_levels(r: ByteReader, count: int, max_m: int, max_level: int) -> tuple[_I64, list[tuple[int, _U32, _I64]]]:
    """Walk the per-row upper-level records: each row's level and, per level, its link lists as ``(rows, 1 + maxM)`` words
    with their byte offsets."""
    start = r.pos
    if r.remaining % 4:
        raise _bad(r, "upper levels: the file does not end on a whole link list", "a multiple of 4 bytes", r.remaining)
    words = r.array("<u4", (r.remaining // 4,), "upper levels")
    per_level = 1 + max_m
    # the first non-zero word at or after each word (a row without upper levels is one zero word): the loop below runs
    # once per row that has upper levels, not once per row
    total = len(words)
    where = np.where(words != 0, np.arange(total), total)
    next_nonzero = np.append(np.minimum.accumulate(where[::-1])[::-1], total).tolist()
    levels = np.zeros(count, dtype=np.int64)
    at_word: list[int] = []
    row = word = 0
    while row < count:
        nxt = next_nonzero[word]
        row += nxt - word  # rows with no upper level: a zero size each
        if row >= count:
            word = nxt - (row - count)
            break
        if nxt >= len(words):
            raise _bad(r, "upper levels: the file ends before every row's record", f"{count} records", f"{row}", start + 4 * nxt)
        size = int(words[nxt])
        level, rest = divmod(size, 4 * per_level)
        if rest or level > max_level:
            raise _bad(r, f"upper levels: row {row} has a bad link-list size", f"a multiple of {4 * per_level} up to level {max_level}", size, start + 4 * nxt)
        if nxt + 1 + level * per_level > len(words):
            raise _bad(r, f"upper levels: row {row}'s link lists run past the end of the file", f"{4 * level * per_level} bytes", "fewer", start + 4 * nxt)
        levels[row] = level
        at_word.append(nxt + 1)
        word = nxt + 1 + level * per_level
        row += 1
    if word != len(words):
        raise _bad(r, "data after the last row's link lists", "the end of the file", f"{4 * (len(words) - word)} more bytes", start + 4 * word)
    r.pos = r.end
    leveled = levels[levels > 0]
    firsts = np.asarray(at_word, dtype=np.int64)
    upper: list[tuple[int, _U32, _I64]] = []
    for level in range(1, max_level + 1):
        has = leveled >= level
        if not has.any():
            break
        first = firsts[has] + (level - 1) * per_level
        upper.append((level, words[first[:, None] + np.arange(per_level)[None, :]], start + 4 * first))
    return levels, upper


def check_voyager(buf: Buffer, shape: Shape, m: int) -> None:
    """Check the voyager index file in ``buf``: its header (``VOYA``, version 1, dims, inner product, float32), then hnswlib's layout.

    Raises
    ------
    FormatError
        Naming the field or row at fault.
    """
    r = ByteReader(buf, chunk="voyager index")
    magic, version, dims, space, storage, max_norm, transform = r.unpack(VOYAGER_HEADER, "header")
    expected = f"VOYA, version 1, {shape.dims} dims, inner product, Float32"
    found = f"{magic!r}, version {version}, {dims} dims, space {space}, storage {storage:#x}"
    if (magic, version, dims, space, storage) != (b"VOYA", 1, shape.dims, _VOYAGER_INNER_PRODUCT, _VOYAGER_FLOAT32):
        raise _bad(r, "not a voyager index of this layout", expected, found, 0)
    if not math.isfinite(max_norm) or max_norm < 0:
        raise _bad(r, "bad header field maxNorm", "a finite number >= 0", max_norm, 14)
    if transform > 1:
        raise _bad(r, "bad header field useOrderPreservingTransform", "0 or 1", transform, 18)
    check_hnswlib(buf, shape, m, start=r.pos, vector_dims=shape.dims + transform, chunk="voyager index")


def check_usearch(buf: Buffer, shape: Shape, m: int, scalar: str) -> None:
    """Check the usearch index file in ``buf`` for ``shape``, ``M = m`` and rows of ``scalar`` (``"f32"`` or ``"f16"``).

    Raises
    ------
    FormatError
        Naming the field or node at fault.
    """
    r = ByteReader(buf, chunk="usearch index")
    kind, width = _USEARCH_SCALARS[scalar]
    rows, cols = r.u32("rows"), r.u32("bytes per row")
    r.skip(rows * cols, "rows")
    head = r.pos
    magic, major, _, _, metric, scal, key, slot, present, deleted, dims, multi = r.unpack(_USEARCH_HEAD, "header")
    r.skip(_USEARCH_HEAD_BYTES - _USEARCH_HEAD.size, "header")
    names = {k: name for name, (k, _) in _USEARCH_SCALARS.items()}
    expected = f"usearch 2.x, {shape.dims} dims, {scalar}, ip, u64 keys, u32 slots, not multi"
    found = f"{magic!r} {major}.x, {dims} dims, {names.get(scal, f'row type {scal}')}, metric {metric}, key {key}, slot {slot}, multi {multi}"
    if (magic, major, metric, scal, key, slot, dims, multi) != (b"usearch", 2, _USEARCH_IP, kind, _USEARCH_KEY_U64, _USEARCH_SLOT_U32, shape.dims, False):
        raise _bad(r, "the usearch index has another layout", expected, found, head)
    _field(r, "bytes per row", cols, f"{shape.dims * width} ({shape.dims} dims of {scalar})", cols == shape.dims * width, 4)
    _field(r, "count_deleted", deleted, 0, deleted == 0, head + 25)
    _field(r, "count_present", present, f"{rows} (the rows)", present == rows, head + 17)
    graph = r.pos
    size, conn, base, max_level, entry = r.unpack(_USEARCH_GRAPH, "graph header")
    _field(r, "size", size, rows, size == rows, graph)
    _field(r, "connectivity", conn, m, conn == m, graph + 8)
    _field(r, "connectivity_base", base, 2 * m, base == 2 * m, graph + 16)
    if size == 0:
        if r.remaining:
            raise _bad(r, "an empty index has data after its header", "the end of the file", f"{r.remaining} more bytes")
        return
    _field(r, "max_level", max_level, f"0..{_MAX_LEVEL}", max_level <= _MAX_LEVEL, graph + 24)
    _field(r, "entry_slot", entry, f"< {size}", entry < size, graph + 32)
    levels_at = r.pos
    levels = r.array("<i2", (size,), "levels").astype(np.int64)
    if int(levels.min()) < 0 or int(levels.max()) > max_level:
        raise _bad(r, "a node's level is out of range", f"0..{max_level}", int(levels.min()) if levels.min() < 0 else int(levels.max()), levels_at)
    if int(levels[entry]) != max_level:
        raise _bad(r, "the entry point is not on the top level", max_level, int(levels[entry]), graph + 32)
    base_bytes, upper_bytes = 4 + 4 * base, 4 + 4 * conn
    node_bytes = 10 + base_bytes + upper_bytes * levels
    nodes_at = r.pos
    total = int(node_bytes.sum())
    if total != r.remaining:
        raise _bad(r, "the nodes do not fill the file", f"{total} bytes", f"{r.remaining} bytes", nodes_at)
    tape = r.array("u1", (total,), "nodes")
    starts = np.concatenate(([0], np.cumsum(node_bytes)[:-1]))
    keys = np.empty(size, dtype=np.uint64)
    for part in _blocks(size):
        first = starts[part]
        at = nodes_at + int(first[0])
        head_bytes = tape[first[:, None] + np.arange(10)[None, :]]
        if (head_bytes[:, 8:10].copy().view("<i2").ravel() != levels[part]).any():
            raise _bad(r, "a node's level differs from the level table", "the same level", "another", at)
        keys[part] = head_bytes[:, :8].copy().view("<u8").ravel()
        lists = tape[(first + 10)[:, None] + np.arange(base_bytes)[None, :]].view("<u4")
        _check_links(r, "level 0", lists[:, 0].astype(np.int64), lists[:, 1:], base, levels, 0, at)
    _check_labels(r, "keys", keys, shape.n, nodes_at)
    for level in range(1, int(max_level) + 1):
        owners = np.flatnonzero(levels >= level)
        for part in _blocks(len(owners)):
            first = starts[owners[part]] + 10 + base_bytes + upper_bytes * (level - 1)
            lists = tape[first[:, None] + np.arange(upper_bytes)[None, :]].view("<u4")
            _check_links(r, f"level {level}", lists[:, 0].astype(np.int64), lists[:, 1:], conn, levels, level, nodes_at + int(first[0]))
