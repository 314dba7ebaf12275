"""Gzip input for every reader: decompressed as read, with bad data and over-expansion as :class:`FormatError`; part of :mod:`finalfusion._source`.

:mod:`finalfusion._source` opens every gzip input as a :class:`GzipInput`
(the one place gzip is opened), so the rules hold for every reader.
"""

from __future__ import annotations

import functools
import gzip
import zlib
from collections.abc import Callable
from typing import IO, Any, Final, cast

from finalfusion import limits
from finalfusion._progress import counting
from finalfusion.errors import FormatError, Truncated

__all__ = ["GZIP_BUFFERED", "GzipInput"]

#: Compressed bytes a gzip reader may have taken from its input but not yet decompressed, and decompressed bytes it may hold (generous).
GZIP_BUFFERED: Final = 1 << 20


class GzipInput(gzip.GzipFile):
    """A :class:`gzip.GzipFile` whose reads raise :class:`FormatError` for corrupt, truncated or over-expanding data.

    ``gzip`` reports a corrupt deflate stream as ``zlib.error``, a stream
    cut before its end marker as ``EOFError``, and trailing garbage or a CRC
    or length mismatch as ``gzip.BadGzipFile`` (an ``OSError``); for a reader
    all are bad input.
    The error's offset is how far the decompressor has read into the
    *compressed* input (it reads ahead, so the damage is at or before it).

    ``compressed`` is the size of the compressed input, if known. Every
    reader's gzip input is one of these (:func:`finalfusion._source.open_stream`,
    :func:`finalfusion._source.sized_or_stream`), so the expansion bound holds for all of them:
    the decompressed bytes handed out may reach
    :data:`finalfusion.limits.MAX_GZIP_EXPANSION` times the compressed size
    (the whole compressed input when its size is known, else the compressed
    bytes read so far) plus 1 MiB; one more is a :class:`FormatError` naming
    the limit. A read of everything (``read()``, ``readline()``) is done in
    1 MiB steps, each checked, so a bomb is refused before it is held.
    """

    def __init__(self, fileobj: IO[bytes], compressed: int | None) -> None:
        # Read once per input (a program may raise the limit before it loads).
        self._ratio = max(1, limits.MAX_GZIP_EXPANSION)
        self._compressed = compressed
        self._consumed = 0
        self._at = 0  # decompressed offset of the next byte handed out
        self._reached = 0  # the furthest it has been
        if self._compressed is None:  # a pipe, a file object of unknown size: count what the decompressor takes
            fileobj = counting(fileobj, self._took, None)
        super().__init__(fileobj=fileobj, mode="rb")

    def _took(self, _stage: str, pos: int, _total: int | None) -> None:
        self._consumed = pos

    def _moved(self, at: int) -> None:
        self._at = at
        if at <= self._reached:
            return
        self._reached = at
        base = self._compressed if self._compressed is not None else self._consumed
        bound = self._ratio * base + GZIP_BUFFERED
        if at > bound:
            raise FormatError(
                "the gzip data expands past the limit MAX_GZIP_EXPANSION",
                offset=_compressed_offset(self),
                chunk="gzip",
                expected=f"at most {bound} bytes ({self._ratio} times its {base} compressed bytes, plus 1 MiB: "
                "raise finalfusion.limits.MAX_GZIP_EXPANSION for a file that compresses better)",
                found=f"at least {at} bytes",
            )

    def read(self, size: int | None = -1) -> bytes:
        return self._stepped(self._read_part, size, line=False)

    def readline(self, size: int | None = -1) -> bytes:
        return self._stepped(self._readline_part, size, line=True)

    def _stepped(self, part_of: Callable[[int], bytes], size: int | None, line: bool) -> bytes:
        """``part_of(size)``, or for a larger (or unbounded) ``size`` parts of at most :data:`_GZIP_STEP` bytes, each checked."""
        if size is not None and 0 <= size <= _GZIP_STEP:
            return part_of(size)
        parts: list[bytes] = []
        left = -1 if size is None or size < 0 else size
        while left:
            part = part_of(_GZIP_STEP if left < 0 else min(left, _GZIP_STEP))
            parts.append(part)
            left = left - len(part) if left > 0 else left
            if not part or (line and part.endswith(b"\n")):
                break
        return b"".join(parts)

    _read_part = gzip.GzipFile.read
    _readline_part = gzip.GzipFile.readline


#: Decompressed bytes a :class:`GzipInput` reads at a time for a read of everything (checked after each).
_GZIP_STEP: Final = 1 << 20


def _translate_gzip_errors(name: str) -> None:
    method = getattr(gzip.GzipFile, name)

    @functools.wraps(method)
    def guarded(self: GzipInput, *args: Any) -> Any:
        try:
            result = method(self, *args)
        except EOFError as exc:
            at = _compressed_offset(self)
            raise Truncated(
                "the gzip stream ends before its end-of-stream marker", offset=at, chunk="gzip", expected="more compressed data", found=str(exc)
            ) from None
        except zlib.error as exc:
            at = _compressed_offset(self)
            raise FormatError("corrupt gzip data", offset=at, chunk="gzip", expected="a valid deflate stream", found=str(exc)) from None
        except gzip.BadGzipFile as exc:  # an OSError, but bad data: trailing garbage, CRC or length mismatch, bad member header
            at = _compressed_offset(self)
            raise FormatError("corrupt gzip data", offset=at, chunk="gzip", expected="valid gzip members to the end", found=str(exc)) from None
        if name == "seek":
            self._moved(result)
        elif name != "peek":
            self._moved(self._at + len(result))
        return result

    setattr(GzipInput, "_" + name + "_part" if name in ("read", "readline") else name, guarded)


def _compressed_offset(f: gzip.GzipFile) -> int | None:
    """How far the decompressor has read into the compressed input, if it can tell."""
    try:
        return int(cast(IO[bytes], f.fileobj).tell())
    except (AttributeError, OSError, ValueError):
        return None


# readinto and readinto1 are io.BufferedIOBase's (they call read and read1), and tell is seek(0, SEEK_CUR):
# every move of the decompressed position passes here.
for _name in ("read", "read1", "peek", "readline", "seek"):
    _translate_gzip_errors(_name)
