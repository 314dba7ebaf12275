"""A minimal, bounds-checked reader of the protocol buffers wire format.

Model files (LightSeq exports, SentencePiece models) are protobuf
messages; this library reads the few fields it needs directly from the
wire format instead of depending on the ``protobuf`` runtime (generated
``_pb2`` modules break across its major versions). A message is a sequence
of fields, each a varint key ``field_number << 3 | wire_type`` followed by

====  =================  ===========================================
wire  name               payload
====  =================  ===========================================
0     VARINT             base-128 varint, at most 10 bytes
1     I64                8 bytes little-endian
2     LEN                varint length, then that many bytes (strings,
                         bytes, nested messages, packed repeated scalars)
5     I32                4 bytes little-endian (``float``, ``fixed32``)
====  =================  ===========================================

Wire types 3 and 4 (groups) are obsolete and rejected. Lengths are
checked against the enclosing message before anything is sliced; every
malformed byte raises :class:`~finalfusion.errors.FormatError` with the
absolute offset.
"""

from __future__ import annotations

from array import array
from collections.abc import Collection
from typing import Any

import numpy as np
import numpy.typing as npt

from finalfusion._stream import StreamReader
from finalfusion.errors import FormatError, Truncated

__all__ = ["Entries", "Message", "parse_message", "stream_varint"]


class Entries:
    """Every occurrence of one field number in a message, stored compactly.

    A message may repeat a field millions of times (unpacked repeated
    floats); instead of one object per occurrence, the payload ranges of
    LEN (wire 2) and I32 (wire 5) occurrences are kept as ``start, end``
    pairs and VARINT/I64 values as integers, each in an ``array``, in the
    order they appear.
    """

    __slots__ = ("first_offset", "ints", "last_wire", "spans", "wires")

    def __init__(self, offset: int) -> None:
        self.first_offset = offset
        self.wires: set[int] = set()
        self.last_wire = -1
        self.spans = array("Q")
        self.ints = array("Q")

    def extend(self, other: Entries) -> None:
        self.wires |= other.wires
        self.last_wire = other.last_wire
        self.spans.extend(other.spans)
        self.ints.extend(other.ints)


class Message:
    """The fields of one message, by number.

    Examples
    --------
    >>> msg = parse_message(bytes([0x08, 0x96, 0x01, 0x12, 0x02, 0x68, 0x69]), "demo")
    >>> msg.varint(1), msg.blob(2)
    (150, b'hi')
    """

    def __init__(self, buf: Any, start: int, end: int, fields: dict[int, Entries], where: str) -> None:
        self.buf = buf
        self.start = start
        self.end = end
        self.fields = fields
        self.where = where

    def __contains__(self, number: int) -> bool:
        return number in self.fields

    def wires(self, number: int) -> set[int]:
        """The wire types the field occurs with (empty if absent)."""
        e = self.fields.get(number)
        return set(e.wires) if e is not None else set()

    def _entries(self, number: int, wires: set[int], what: str) -> Entries | None:
        e = self.fields.get(number)
        if e is None:
            return None
        if not e.wires <= wires:
            raise FormatError(
                f"field {number} has the wrong wire type", offset=e.first_offset, chunk=self.where, expected=what, found=f"wire types {sorted(e.wires)}"
            )
        return e

    def varint(self, number: int, default: int = 0) -> int:
        """A varint field (``int32``, ``bool``, ...) as a signed 64-bit value (the last occurrence wins), or ``default``."""
        e = self._entries(number, {0}, "a varint")
        if e is None:
            return default
        v = int(e.ints[-1])
        return v - (1 << 64) if v >= 1 << 63 else v

    def float32(self, number: int, default: float = 0.0) -> float:
        """A ``float`` field (the last occurrence wins), or ``default``."""
        e = self._entries(number, {5}, "a 32-bit float (wire type 5)")
        if e is None:
            return default
        at = e.spans[-2]
        return float(np.frombuffer(self.buf, dtype="<f4", count=1, offset=at)[0])

    def span(self, number: int) -> tuple[int, int] | None:
        """The payload range of the last occurrence of a length-delimited field."""
        e = self._entries(number, {2}, "a length-delimited field (wire type 2)")
        return None if e is None else (int(e.spans[-2]), int(e.spans[-1]))

    def blob(self, number: int) -> bytes | None:
        """A ``bytes`` or ``string`` field, or ``None``."""
        s = self.span(number)
        return None if s is None else bytes(self.buf[s[0] : s[1]])

    def messages(self, number: int) -> list[tuple[int, int]]:
        """Payload ranges of a repeated message field, in order."""
        e = self._entries(number, {2}, "a message (wire type 2)")
        if e is None:
            return []
        return [(int(e.spans[i]), int(e.spans[i + 1])) for i in range(0, len(e.spans), 2)]

    def message(self, number: int, where: str, wanted: Collection[int] | None = None) -> Message | None:
        """A singular embedded message; several occurrences are merged (their fields concatenated, as protobuf does)."""
        spans = self.messages(number)
        if not spans:
            return None
        merged: dict[int, Entries] = {}
        for start, end in spans:
            for key, entries in parse_message(self.buf, where, start, end, wanted).fields.items():
                if key in merged:
                    merged[key].extend(entries)
                else:
                    merged[key] = entries
        return Message(self.buf, spans[0][0], spans[-1][1], merged, where)

    def _float_spans(self, number: int) -> npt.NDArray[np.uint64]:
        e = self._entries(number, {2, 5}, "floats (wire type 2 or 5)")
        if e is None:
            return np.zeros((0, 2), dtype=np.uint64)
        spans = np.frombuffer(e.spans, dtype=np.uint64).reshape(-1, 2)
        bad = np.flatnonzero((spans[:, 1] - spans[:, 0]) % 4)
        if bad.size:
            at, stop = (int(v) for v in spans[bad[0]])
            raise FormatError(
                f"packed floats of field {number} are not a multiple of 4 bytes",
                offset=at,
                chunk=self.where,
                expected="a multiple of 4 bytes",
                found=f"{stop - at} bytes",
            )
        return spans

    def float_count(self, number: int) -> int:
        """Number of values of a ``repeated float`` field (packed and unpacked occurrences)."""
        spans = self._float_spans(number)
        return int((spans[:, 1] - spans[:, 0]).sum()) // 4

    def floats(self, number: int) -> npt.NDArray[np.float32]:
        """A ``repeated float`` field as a little-endian float array: a view of the buffer when it is one packed run."""
        spans = self._float_spans(number)
        if len(spans) == 1:
            start, end = (int(v) for v in spans[0])
            return np.frombuffer(self.buf, dtype="<f4", count=(end - start) // 4, offset=start)
        if len(spans) == 0:
            return np.zeros(0, dtype=np.float32)
        lengths = spans[:, 1] - spans[:, 0]
        raw = np.frombuffer(self.buf, dtype=np.uint8)
        if bool((lengths == 4).all()):  # unpacked: one 4-byte value per occurrence, gathered block by block
            out = np.empty((len(spans), 4), dtype=np.uint8)
            block = 1 << 16
            for i in range(0, len(spans), block):
                idx = spans[i : i + block, :1].astype(np.int64) + np.arange(4, dtype=np.int64)
                out[i : i + block] = raw[idx]
            return out.reshape(-1).view("<f4")
        return np.concatenate([raw[int(a) : int(b)] for a, b in spans]).view("<f4")

    def first_offset(self, number: int) -> int:
        """Where the field first occurs (for messages); the message start if it is absent."""
        e = self.fields.get(number)
        return e.first_offset if e is not None else self.start


def _varint(buf: Any, pos: int, end: int, where: str, base: int = 0) -> tuple[int, int]:
    """The varint at ``pos`` and the position after it; errors name the offset ``base + pos`` (``base``: where ``buf`` starts in a stream)."""
    result = 0
    shift = 0
    start = pos
    while True:
        if pos >= end:
            raise Truncated("the data ends inside a varint", offset=base + start, chunk=where, expected="a complete varint", found=f"{pos - start} bytes")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            break
        shift += 7
        if shift >= 70:
            raise FormatError("a varint is longer than 10 bytes", offset=base + start, chunk=where, expected="at most 10 bytes", found="more")
    if result >= 1 << 64:
        raise FormatError("a varint overflows 64 bits", offset=base + start, chunk=where, expected="a value below 2**64", found=result)
    return result, pos


def parse_message(buf: Any, where: str, start: int = 0, end: int | None = None, wanted: Collection[int] | None = None) -> Message:
    """Split ``buf[start:end]`` into its fields (payloads are not copied).

    ``wanted`` limits which field numbers are kept (the others are still
    checked, then skipped), so a file cannot make the reader build large
    structures for fields it does not need.

    Raises
    ------
    FormatError
        Field number 0, a group or unknown wire type, a varint longer than
        10 bytes; :class:`~finalfusion.errors.Truncated` when a varint,
        fixed-size value or length-delimited payload runs past ``end``.

    Examples
    --------
    >>> parse_message(bytes([0x0A, 0x05, 0x61]), "demo")
    Traceback (most recent call last):
    ...
    finalfusion.errors.Truncated: demo: field 1 runs past the end of its message: expected at most 1 bytes, found 5 bytes (at byte offset 2)
    """
    if end is None:
        end = len(buf)
    fields: dict[int, Entries] = {}
    pos = start
    while pos < end:
        at = pos
        key, pos = _varint(buf, pos, end, where)
        number, wire = key >> 3, key & 7
        if number == 0 or number >= 1 << 29:
            raise FormatError("invalid field number", offset=at, chunk=where, expected="1 .. 2**29-1", found=number)
        value = 0
        span_start = span_end = -1
        if wire == 0:
            value, pos = _varint(buf, pos, end, where)
        elif wire in (1, 5):
            size = 8 if wire == 1 else 4
            if pos + size > end:
                raise Truncated(
                    f"field {number} runs past the end of its message", offset=pos, chunk=where, expected=f"{size} bytes", found=f"{end - pos} bytes"
                )
            if wire == 1:
                value = int.from_bytes(bytes(buf[pos : pos + 8]), "little")
            else:
                span_start, span_end = pos, pos + 4
            pos += size
        elif wire == 2:
            length, pos = _varint(buf, pos, end, where)
            if length > end - pos:
                raise Truncated(
                    f"field {number} runs past the end of its message", offset=pos, chunk=where, expected=f"at most {end - pos} bytes", found=f"{length} bytes"
                )
            span_start, span_end = pos, pos + length
            pos += length
        else:
            raise FormatError(f"unsupported wire type of field {number}", offset=at, chunk=where, expected="0, 1, 2 or 5", found=wire)
        if wanted is not None and number not in wanted:
            continue
        entries = fields.get(number)
        if entries is None:
            entries = fields[number] = Entries(at)
        entries.wires.add(wire)
        entries.last_wire = wire
        if span_start >= 0:
            entries.spans.append(span_start)
            entries.spans.append(span_end)
        else:
            entries.ints.append(value)
    return Message(buf, start, end, fields, where)


def stream_varint(stream: StreamReader, where: str, eof_ok: bool = False) -> tuple[int, bytes] | None:
    """The varint at a stream's position, decoded as in a buffer: its value and its bytes (``None`` at the stream's end with ``eof_ok``).

    Examples
    --------
    >>> import io
    >>> s = StreamReader(io.BytesIO(b"\\xac\\x02\\x01"))
    >>> stream_varint(s, "demo"), s.pos, stream_varint(s, "demo"), stream_varint(s, "demo", eof_ok=True)
    ((300, b'\\xac\\x02'), 2, (1, b'\\x01'), None)
    """
    at = stream.pos
    raw = stream.read_upto(10)
    if not raw and eof_ok:
        return None
    value, end = _varint(raw, 0, len(raw), where, base=at)
    stream.unread(raw[end:])
    return value, raw[:end]
