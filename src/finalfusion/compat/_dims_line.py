"""The ``"<rows> <dims>"`` first line of word2vec and text-dims files: recognising and reading it.

:func:`dims_file_format` tells word2vec from text-dims by what follows the
line (for the format registry); :func:`read_dims_header` reads and checks
it; :func:`check_header_int` is the range check of every integer a text
header declares (floret's too); :func:`check_trailing` refuses data after
the rows the line announces.
"""

from __future__ import annotations

import re
from typing import IO, Final

from finalfusion import limits
from finalfusion._binary import check_dims
from finalfusion.errors import FormatError

__all__ = ["DIMS_MISMATCH", "check_header_int", "check_trailing", "dims_file_format", "read_dims_header"]


#: The ``"<rows> <dims>"`` line that starts word2vec and text-dims files.
_DIMS_LINE = re.compile(rb"\A(\d+)[ \t]+(\d+)[ \t\r]*\n")
#: Bytes a text-dims body may consist of (after the words).
_TEXTUAL = re.compile(rb"\A[-+0-9.eEnaifNAIF \t\r\n]*\Z")
#: Why a sample is neither word2vec nor text-dims (one reason for both, named together).
DIMS_MISMATCH: Final = 'no "<rows> <dims>" first line'


def dims_file_format(sample: bytes) -> str | None:
    """``"word2vec"`` or ``"text-dims"`` for a sample that starts with a ``"<rows> <dims>"`` line, else ``None``.

    After the line, the first word is followed by binary floats (word2vec) or
    by decimal numbers (text-dims); binary floats almost never look like text.

    Examples
    --------
    >>> dims_file_format(b"2 3\\nBerlin 1 2 3\\n"), dims_file_format(b"2 3\\nBerlin \\x00\\x00\\x80?"), dims_file_format(b"Berlin 1 2 3\\n")
    ('text-dims', 'word2vec', None)
    """
    header = _DIMS_LINE.match(sample)
    if header is None:
        return None
    body, dims = sample[header.end() :], int(header.group(2))
    sep = body.find(b" ")
    if sep < 0 or dims == 0:
        return "text-dims"
    vector = body[sep + 1 : sep + 1 + 4 * dims]
    line = body.split(b"\n", 1)[0]
    if _TEXTUAL.match(vector.split(b"\n", 1)[0]) and (len(line.split()) == dims + 1 or b"\n" not in body):
        return "text-dims"
    return "word2vec"


def read_dims_header(f: IO[bytes], fmt: str) -> tuple[int, int, int]:
    r"""Read and parse the ``"<rows> <dims>"`` first line of ``f``.

    Returns
    -------
    rows, dims, length
        The two counts and the length of the line in bytes, including its ``\n``.

    Raises
    ------
    FormatError
        If the line is missing, too long, or not two non-negative integers.

    Examples
    --------
    >>> import io
    >>> read_dims_header(io.BytesIO(b"41 100\nBerlin ..."), "word2vec")
    (41, 100, 7)
    >>> read_dims_header(io.BytesIO(b"Berlin 0.5 1.5\n"), "text-dims")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    finalfusion.errors.FormatError: text-dims line 1: the header must be two non-negative integers "<rows> <dims>": ... (at byte offset 0)
    """
    cap = limits.MAX_HEADER_LINE_BYTES  # read at call time: a program may raise it
    line = f.readline(cap)
    if not line:
        raise FormatError("the input is empty", offset=0, chunk=f"{fmt} header", expected='"<rows> <dims>"', found="no data")
    if not line.endswith(b"\n"):
        raise FormatError(
            f"the header line is unterminated or too long (at most {cap} bytes: finalfusion.limits.MAX_HEADER_LINE_BYTES)",
            offset=0,
            chunk=f"{fmt} line 1",
            expected='"<rows> <dims>\\n"',
            found=line[:80],
        )
    parts = line.split()
    if len(parts) != 2 or not all(p.isdigit() and p.isascii() for p in parts):
        raise FormatError(
            'the header must be two non-negative integers "<rows> <dims>"', offset=0, chunk=f"{fmt} line 1", expected="2 integers", found=line[:80]
        )
    for raw, name, bits in ((parts[0], "rows", 64), (parts[1], "dims", 32)):
        check_header_int(raw, name, bits, line.find(raw), f"{fmt} line 1")
    check_dims(int(parts[1]), offset=line.find(parts[1], len(parts[0])), chunk=f"{fmt} line 1")
    return int(parts[0]), int(parts[1]), len(line)


def check_header_int(raw: bytes, name: str, bits: int, offset: int, where: str) -> None:
    """Raise :class:`FormatError` if the decimal ``raw`` does not fit the ``bits``-bit unsigned field that stores it.

    The finalfusion format keeps row counts in u64 and dimensions, n-gram
    lengths and seeds in u32 fields; a header value beyond them could be
    read but never written back.

    Examples
    --------
    >>> check_header_int(b"300", "dims", 32, 3, "text-dims line 1")
    >>> check_header_int(b"4294967296", "dims", 32, 3, "text-dims line 1")
    Traceback (most recent call last):
    ...
    finalfusion.errors.FormatError: text-dims line 1: dims is out of range: expected at most 4294967295 (u32), found b'4294967296' (at byte offset 3)
    """
    if len(raw.lstrip(b"0")) > 20 or int(raw) >= 1 << bits:
        raise FormatError(f"{name} is out of range", offset=offset, chunk=where, expected=f"at most {(1 << bits) - 1} (u{bits})", found=raw[:40])


def check_trailing(f: IO[bytes], carry: bytes, base: int, message: str, where: str) -> None:
    r"""Raise :class:`FormatError` if anything but whitespace follows in ``carry`` and the rest of ``f``.

    ``base`` is the offset of ``carry[0]`` in the input.

    Examples
    --------
    >>> import io
    >>> check_trailing(io.BytesIO(b" \n"), b"\n", 10, "data after the records", "word2vec")
    >>> check_trailing(io.BytesIO(b" x"), b"", 10, "data after the records", "word2vec")
    Traceback (most recent call last):
    ...
    finalfusion.errors.FormatError: word2vec: data after the records: expected end of input, found b'x' (at byte offset 11)
    """
    while True:
        stripped = carry.lstrip()
        if stripped:
            raise FormatError(message, offset=base + len(carry) - len(stripped), chunk=where, expected="end of input", found=stripped[:40])
        base += len(carry)
        carry = f.read(1 << 20)
        if not carry:
            return
