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

import struct
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from finalfusion.errors import FormatError, Truncated

__all__ = ["Field", "Message", "parse_message"]


@dataclass(frozen=True)
class Field:
    """One field occurrence: its wire type, value and where it starts.

    ``value`` is the integer for VARINT/I64/I32 fields (raw bits for the
    fixed ones) and ``(start, end)`` absolute offsets of the payload for
    LEN fields.
    """

    number: int
    wire: int
    value: Any
    offset: int


class Message:
    """The fields of one message, by number (each a list of occurrences, in order).

    Examples
    --------
    >>> msg = parse_message(bytes([0x08, 0x96, 0x01, 0x12, 0x02, 0x68, 0x69]), "demo")
    >>> msg.varint(1), msg.blob(2)
    (150, b'hi')
    """

    def __init__(self, buf: Any, start: int, end: int, fields: dict[int, list[Field]], where: str) -> None:
        self.buf = buf
        self.start = start
        self.end = end
        self.fields = fields
        self.where = where

    def __contains__(self, number: int) -> bool:
        return number in self.fields

    def _last(self, number: int, wires: tuple[int, ...], what: str) -> Field | None:
        found = self.fields.get(number)
        if not found:
            return None
        f = found[-1]  # proto3: the last occurrence of a singular field wins
        if f.wire not in wires:
            raise FormatError(f"field {number} has the wrong wire type", offset=f.offset, chunk=self.where, expected=what, found=f"wire type {f.wire}")
        return f

    def varint(self, number: int, default: int = 0) -> int:
        """A varint field (``int32``, ``bool``, ...) as a signed 64-bit value, or ``default``."""
        f = self._last(number, (0,), "a varint")
        if f is None:
            return default
        v = int(f.value)
        return v - (1 << 64) if v >= 1 << 63 else v

    def float32(self, number: int, default: float = 0.0) -> float:
        """A ``float`` field, or ``default``."""
        f = self._last(number, (5,), "a 32-bit float (wire type 5)")
        if f is None:
            return default
        return float(np.array([f.value], dtype=np.uint32).view(np.float32)[0])

    def span(self, number: int) -> tuple[int, int] | None:
        """The payload range of the last LEN occurrence of ``number``."""
        f = self._last(number, (2,), "a length-delimited field (wire type 2)")
        return None if f is None else f.value

    def blob(self, number: int) -> bytes | None:
        """A ``bytes`` or ``string`` field, or ``None``."""
        s = self.span(number)
        return None if s is None else bytes(self.buf[s[0] : s[1]])

    def message(self, number: int, where: str) -> Message | None:
        """A singular embedded message; several occurrences are merged (their fields concatenated, as protobuf does)."""
        found = self.fields.get(number)
        if not found:
            return None
        merged: dict[int, list[Field]] = {}
        start = end = 0
        for f in found:
            if f.wire != 2:
                raise FormatError(f"field {number} is not a message", offset=f.offset, chunk=self.where, expected="wire type 2", found=f"wire type {f.wire}")
            start, end = f.value
            for key, values in parse_message(self.buf, where, start, end).fields.items():
                merged.setdefault(key, []).extend(values)
        return Message(self.buf, start, end, merged, where)

    def messages(self, number: int) -> list[tuple[int, int]]:
        """Payload ranges of a repeated message field."""
        out = []
        for f in self.fields.get(number, []):
            if f.wire != 2:
                raise FormatError(f"field {number} is not a message", offset=f.offset, chunk=self.where, expected="wire type 2", found=f"wire type {f.wire}")
            out.append(f.value)
        return out

    def float_count(self, number: int) -> int:
        """Number of values of a ``repeated float`` field (packed and unpacked occurrences)."""
        n = 0
        for f in self.fields.get(number, []):
            if f.wire == 2:
                start, end = f.value
                if (end - start) % 4:
                    raise FormatError(
                        f"packed floats of field {number} are not a multiple of 4 bytes",
                        offset=start,
                        chunk=self.where,
                        expected="a multiple of 4 bytes",
                        found=f"{end - start} bytes",
                    )
                n += (end - start) // 4
            elif f.wire == 5:
                n += 1
            else:
                raise FormatError(f"field {number} is not a float", offset=f.offset, chunk=self.where, expected="wire type 2 or 5", found=f"wire type {f.wire}")
        return n

    def float_segments(self, number: int) -> Iterator[tuple[int, Any]]:
        """The raw little-endian float32 bytes of a ``repeated float`` field, segment by segment.

        Yields ``(absolute offset, buffer slice)``; call :meth:`float_count` first (it validates).
        """
        for f in self.fields.get(number, []):
            if f.wire == 2:
                start, end = f.value
                yield start, memoryview(self.buf)[start:end]
            else:
                yield f.offset, struct.pack("<I", f.value)

    def floats(self, number: int) -> npt.NDArray[np.float32]:
        """A (small) ``repeated float`` field as an array."""
        self.float_count(number)
        parts = [np.frombuffer(seg, dtype="<f4") for _, seg in self.float_segments(number)]
        return np.concatenate(parts).astype(np.float32) if parts else np.zeros(0, dtype=np.float32)


def _varint(buf: Any, pos: int, end: int, where: str) -> tuple[int, int]:
    result = 0
    shift = 0
    start = pos
    while True:
        if pos >= end:
            raise Truncated("the data ends inside a varint", offset=start, chunk=where, expected="a complete varint", found=f"{pos - start} bytes")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            break
        shift += 7
        if shift >= 70:
            raise FormatError("a varint is longer than 10 bytes", offset=start, chunk=where, expected="at most 10 bytes", found="more")
    if result >= 1 << 64:
        raise FormatError("a varint overflows 64 bits", offset=start, chunk=where, expected="a value below 2**64", found=result)
    return result, pos


def parse_message(buf: Any, where: str, start: int = 0, end: int | None = None) -> Message:
    """Split ``buf[start:end]`` into its fields (payloads are not copied).

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
    fields: dict[int, list[Field]] = {}
    pos = start
    while pos < end:
        at = pos
        key, pos = _varint(buf, pos, end, where)
        number, wire = key >> 3, key & 7
        if number == 0 or number >= 1 << 29:
            raise FormatError("invalid field number", offset=at, chunk=where, expected="1 .. 2**29-1", found=number)
        value: Any
        if wire == 0:
            value, pos = _varint(buf, pos, end, where)
        elif wire in (1, 5):
            size = 8 if wire == 1 else 4
            if pos + size > end:
                raise Truncated(
                    f"field {number} runs past the end of its message", offset=pos, chunk=where, expected=f"{size} bytes", found=f"{end - pos} bytes"
                )
            value = int.from_bytes(bytes(buf[pos : pos + size]), "little")
            pos += size
        elif wire == 2:
            length, pos = _varint(buf, pos, end, where)
            if length > end - pos:
                raise Truncated(
                    f"field {number} runs past the end of its message", offset=pos, chunk=where, expected=f"at most {end - pos} bytes", found=f"{length} bytes"
                )
            value = (pos, pos + length)
            pos += length
        else:
            raise FormatError(f"unsupported wire type of field {number}", offset=at, chunk=where, expected="0, 1, 2 or 5", found=wire)
        fields.setdefault(number, []).append(Field(number, wire, value, at))
    return Message(buf, start, end, fields, where)
