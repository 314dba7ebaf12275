"""Reading a GGUF file's header -- metadata and tensor infos -- with the library's one cursor, from a buffer or a stream."""

from __future__ import annotations

from dataclasses import replace
from typing import IO, Any

import numpy as np

from finalfusion._binary import ByteReader
from finalfusion._source import fill, parse_prefix, size_bound, skip
from finalfusion.compat.gguf._layout import (
    ARRAY,
    BOOL,
    DEFAULT_ALIGNMENT,
    FORMAT,
    GGML_TYPES,
    INTEGER,
    INTEGERS,
    KEY_TYPES,
    MAGIC,
    MAX_ARRAY_DEPTH,
    NUMPY,
    SCALARS,
    STRING,
    TYPE_NAMES,
    VERSIONS,
    GGUFFile,
    GGUFTensor,
)
from finalfusion.errors import BadMagic, FormatError, Truncated, UnsupportedVersion

__all__ = ["find_tensor", "read_gguf", "read_stream"]


class _Reader(ByteReader):
    """:class:`~finalfusion._binary.ByteReader` in GGUF's dialect: ``u64`` string lengths, GGUF's message for invalid UTF-8."""

    __slots__ = ("items", "max_items")
    items: int
    max_items: int

    def count_item(self, what: str, at: int) -> None:
        """One more metadata key or array: refused past :data:`finalfusion.limits.MAX_MODEL_METADATA_ITEMS`."""
        self.items += 1
        if self.items > self.max_items:
            raise FormatError(
                f"too many metadata keys and arrays (at {what})",
                offset=at,
                chunk=FORMAT,
                expected=f"at most {self.max_items} (finalfusion.limits.MAX_MODEL_METADATA_ITEMS)",
                found="more",
            )

    def _utf8_error(self, what: str, raw: bytes | bytearray | memoryview, exc: UnicodeDecodeError, start: int) -> FormatError:
        return FormatError(f"{what} is not valid UTF-8", offset=start + exc.start, chunk=self.chunk, expected="UTF-8", found=bytes(raw[:40]))


def _value(cur: _Reader, vtype: int, what: str, depth: int = 0) -> Any:
    """One metadata value of GGUF type ``vtype``: a scalar, a string, a numpy array of numbers or a list of strings or arrays."""
    if vtype in SCALARS:
        return cur.scalar(SCALARS[vtype], what)
    if vtype == STRING:
        return cur.string(what)
    if vtype == ARRAY:
        at = cur.pos
        cur.count_item(what, at)
        etype = cur.u32(f"element type of {what}")
        count = cur.u64(f"element count of {what}")
        if etype in SCALARS:
            dtype = np.dtype(cur.order + NUMPY[etype])
            cur.require(count * dtype.itemsize, f"{count} elements of {what}")
            arr = cur.array(dtype.str, (count,), f"{count} elements of {what}")
            return arr.astype(bool) if etype == BOOL else arr.astype(arr.dtype.newbyteorder("="))
        # Strings take at least 8 bytes, arrays at least 12: refuse counts the data cannot hold before looping.
        least = 8 if etype == STRING else 12
        if count > cur.remaining // least:
            raise Truncated(
                f"the element count of {what} is larger than the rest of the file can hold",
                offset=at + 4,
                chunk=FORMAT,
                expected=f"at most {cur.remaining // least}",
                found=count,
            )
        if etype == STRING:
            return cur.strings(count, f"element of {what}")
        if etype == ARRAY:
            if depth >= MAX_ARRAY_DEPTH:
                raise FormatError("arrays nested too deeply", offset=at, chunk=FORMAT, expected=f"at most {MAX_ARRAY_DEPTH} levels", found=depth + 1)
            return [_value(cur, ARRAY, what, depth + 1) for _ in range(count)]
        raise FormatError(f"unknown element type of {what}", offset=at, chunk=FORMAT, expected="a GGUF value type 0..12", found=etype)
    raise FormatError(f"unknown value type of {what}", offset=cur.pos - 4, chunk=FORMAT, expected="a GGUF value type 0..12", found=vtype)


def _check_key_type(cur: ByteReader, key: str, vtype: int) -> None:
    """A standard key must have the type llama.cpp requires (:data:`KEY_TYPES`): checked before its value is read."""
    want, element = KEY_TYPES[key]
    etype = cur.u32(f"element type of {key}") if vtype == ARRAY else None
    if (vtype == want or (want == INTEGER and vtype in INTEGERS)) and (etype is None or (etype == element if element is not None else etype in SCALARS)):
        if etype is not None:
            cur.pos -= 4  # the element type is read again with the array
        return

    def name(t: int | None) -> str:
        return TYPE_NAMES[t] if t is not None and 0 <= t < len(TYPE_NAMES) else f"type {t}"

    expected = ("a list of strings" if element == STRING else "a numeric array") if want == ARRAY else "an integer" if want == INTEGER else f"a {name(want)}"
    found = name(vtype) + (f" of {name(etype)}" if etype is not None else "")
    at = cur.pos - (8 if etype is not None else 4)
    raise FormatError(f"{key} is not {expected}", offset=at, chunk=FORMAT, expected=f"{expected} (as llama.cpp requires)", found=found)


def read_gguf(data: Any) -> GGUFFile:
    """Parse the header of a GGUF file (``bytes``-like or a map of the whole file).

    Raises
    ------
    FormatError
        For anything malformed, naming what was expected and found and the offset.

    Examples
    --------
    >>> read_gguf(b"GGUF\\x01\\x00\\x00\\x00")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    finalfusion.errors.UnsupportedVersion: GGUF: unsupported GGUF version: expected 2 or 3, found 1 (at byte offset 4)
    """
    return _parse(data, len(data))


def _parse(data: Any, total: int | None) -> GGUFFile:
    """:func:`read_gguf` of a buffer that holds at least the header; ``total`` is the file's size (``None``: unknown, a stream)."""
    size = len(data)
    if size < 4 or bytes(data[:4]) != MAGIC:
        raise BadMagic("not a GGUF file", offset=0, chunk=FORMAT, expected=MAGIC, found=bytes(data[:4]))
    version = ByteReader(data, 4, chunk=FORMAT).u32("version")
    order = "<"
    if version & 0xFFFF == 0 and version:
        order = ">"
        version = int.from_bytes(version.to_bytes(4, "little"), "big")
    if version not in VERSIONS:
        raise UnsupportedVersion("unsupported GGUF version", offset=4, chunk=FORMAT, expected="2 or 3", found=version)
    from finalfusion import limits

    cur = _Reader(data, 8, chunk=FORMAT, order=order, length_bytes=8)
    cur.items, cur.max_items = 0, limits.MAX_MODEL_METADATA_ITEMS
    n_tensors = cur.u64("tensor count")
    n_kv = cur.u64("metadata count")
    if n_kv > cur.remaining // 13:
        raise Truncated("the metadata count is larger than the file can hold", offset=16, chunk=FORMAT, expected=f"at most {cur.remaining // 13}", found=n_kv)
    kv: dict[str, Any] = {}
    for _ in range(n_kv):
        at = cur.pos
        key = cur.string("metadata key")
        if key in kv:
            raise FormatError("duplicate metadata key", offset=at, chunk=FORMAT, expected="distinct keys", found=key)
        cur.count_item(key, at)
        vtype = cur.u32(f"value type of {key}")
        if key in KEY_TYPES:
            _check_key_type(cur, key, vtype)
        kv[key] = _value(cur, vtype, key)
    if n_tensors > cur.remaining // 24:
        raise Truncated("the tensor count is larger than the file can hold", offset=8, chunk=FORMAT, expected=f"at most {cur.remaining // 24}", found=n_tensors)
    alignment = kv.get("general.alignment", DEFAULT_ALIGNMENT)
    if not isinstance(alignment, int) or isinstance(alignment, bool) or alignment <= 0 or alignment & (alignment - 1):
        raise FormatError("general.alignment is not a positive power of two", chunk=FORMAT, expected="a power of two", found=alignment)
    infos: list[tuple[int, str, tuple[int, ...], int, int]] = []
    names: set[str] = set()
    for _ in range(n_tensors):
        at = cur.pos
        name = cur.string("tensor name")
        if name in names:
            raise FormatError("duplicate tensor name", offset=at, chunk=FORMAT, expected="distinct tensor names", found=name)
        names.add(name)
        n_dims = cur.u32(f"dimension count of {name}")
        if n_dims > 8:
            raise FormatError(f"tensor {name} has too many dimensions", offset=cur.pos - 4, chunk=FORMAT, expected="at most 8", found=n_dims)
        ne = tuple(cur.u64(f"dimension of {name}") for _ in range(n_dims))
        type_at = cur.pos
        ggml_type = cur.u32(f"ggml type of {name}")
        rel = cur.u64(f"data offset of {name}")
        infos.append((at, name, ne, ggml_type, rel))
        if ggml_type not in GGML_TYPES:
            raise FormatError(f"unknown ggml type of tensor {name}", offset=type_at, chunk=FORMAT, expected="a ggml type id", found=ggml_type)
    data_start = cur.pos + (-cur.pos) % alignment
    tensors: dict[str, GGUFTensor] = {}
    for at, name, ne, ggml_type, rel in infos:
        tname, block, _ = GGML_TYPES[ggml_type]
        elements = 1
        for d in ne:
            elements *= d
            if elements > (total if total is not None else 1 << 60) * 8:
                raise FormatError(
                    f"the shape of tensor {name} is larger than the file can hold", offset=at, chunk=FORMAT, expected="a shape that fits", found=ne
                )
        if ne and ne[0] % block:
            raise FormatError(
                f"the row length of tensor {name} is not a multiple of the {tname} block size",
                offset=at,
                chunk=FORMAT,
                expected=f"a multiple of {block}",
                found=ne[0],
            )
        if rel % alignment:
            raise FormatError(f"the data of tensor {name} is misaligned", offset=at, chunk=FORMAT, expected=f"a multiple of {alignment}", found=rel)
        tensor = GGUFTensor(name, ne, ggml_type, data_start + rel)
        if total is not None and tensor.offset + tensor.n_bytes > total:
            raise Truncated(
                f"the data of tensor {name} runs past the end of the file",
                offset=at,
                chunk=FORMAT,
                expected=f"{tensor.n_bytes} bytes at byte {tensor.offset}",
                found=f"{max(0, total - tensor.offset)} bytes",
            )
        tensors[name] = tensor
    return GGUFFile(version, order, alignment, kv, tensors, data_start, size if total is None else total, data)


def find_tensor(head: GGUFFile, tensor: str) -> GGUFTensor:
    info = head.tensors.get(tensor)
    if info is None:
        raise FormatError(f"no tensor {tensor!r}", chunk=FORMAT, expected=tensor, found=sorted(head.tensors)[:20])
    return info


def _past_end(what: str, at: int, expected: int, found: int) -> Truncated:
    return Truncated(f"{what} runs past the end of the data", offset=at, chunk=FORMAT, expected=f"{expected} bytes", found=f"{found} bytes")


def read_stream(f: IO[bytes], tensor: str) -> tuple[GGUFFile, GGUFTensor]:
    """The header and the bytes of one tensor of a GGUF stream of unknown size (gzip, a pipe, a file object without a descriptor).

    The stream may never end, so it is never read whole: the header (magic,
    metadata, tensor table) is parsed from a prefix that doubles until it
    holds it (at most :data:`finalfusion.limits.MAX_MODEL_HEADER_BYTES`);
    then the data is read up to the end of the last tensor the table
    declares, keeping only the bytes of ``tensor`` (read as they arrive, so
    a declared size larger than the stream ends in :class:`Truncated` when
    it ends). Nothing after the last tensor is read: a GGUF file may end
    with alignment padding, and the file reader ignores what follows the
    data too. The returned header's ``buffer`` holds the tensor's bytes
    only, and the returned tensor's offset is 0.
    """
    from finalfusion import limits

    buf = bytearray()
    head = replace(
        parse_prefix(f, buf, lambda b: _parse(b, None), limits.MAX_MODEL_HEADER_BYTES, FORMAT, "finalfusion.limits.MAX_MODEL_HEADER_BYTES"), buffer=None
    )
    info = find_tensor(head, tensor)
    end = max((t.offset + t.n_bytes for t in head.tensors.values()), default=head.data_start)
    bound = size_bound(f)
    if bound is not None and end > len(buf) + bound:
        raise _past_end("the tensor data", head.data_start, end - head.data_start, len(buf) + bound - head.data_start)
    start, stop = info.offset, info.offset + info.n_bytes
    raw = bytearray(buf[start:stop])
    have = len(buf)
    del buf  # the header's bytes: parsed (the metadata holds copies)
    if have < stop:
        gap = max(0, start - have)
        if skip(f, gap) < gap or not fill(f, raw, info.n_bytes):
            raise _past_end(f"the data of tensor {info.name}", start, info.n_bytes, len(raw))
        have = stop
    if end > have and skip(f, end - have) < end - have:
        raise _past_end("the tensor data", have, end - have, 0)
    return replace(head, size=end, buffer=raw), replace(info, offset=0)
