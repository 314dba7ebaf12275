"""Recognise an embedding file's format from its first bytes and load it.

:func:`load` looks at the (decompressed) start of the input:

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
import re
import struct
from typing import IO, Any

from finalfusion._progress import ProgressArg, reporter
from finalfusion.compat._common import open_input, peek
from finalfusion.embeddings import Embeddings, load_finalfusion
from finalfusion.errors import FormatError

__all__ = ["FORMATS", "load", "sniff_format"]

#: Names returned by :func:`sniff_format`.
FORMATS = ("finalfusion", "fasttext", "floret", "word2vec", "text-dims", "text")

#: Bytes looked at.
_SAMPLE = 1 << 16
_FASTTEXT_MAGIC = struct.pack("<i", 793712314)
_DIMS = re.compile(rb"\A(\d+)[ \t]+(\d+)[ \t\r]*\n")
_NUMBER = re.compile(rb"\A[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?\Z|\A[-+]?(nan|inf|infinity)\Z", re.IGNORECASE)
#: Bytes a text-dims body may consist of (after the words).
_TEXTUAL = re.compile(rb"\A[-+0-9.eEnaifNAIF \t\r\n]*\Z")


def sniff_format(sample: bytes) -> str:
    """Name the format of a file that starts with ``sample`` (one of :data:`FORMATS`).

    Parameters
    ----------
    sample
        The first bytes of the (decompressed) file; 64 KiB are plenty.

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
    finalfusion.errors.FormatError: cannot tell the format: ...
    """
    if not sample:
        raise FormatError("cannot tell the format of an empty input", offset=0, expected="data", found="no data")
    if sample.startswith(b"FiFu"):
        return "finalfusion"
    if sample.startswith(_FASTTEXT_MAGIC):
        return "fasttext"
    first = sample.split(b"\n", 1)[0]
    fields = first.split()
    if len(fields) == 8 and all(f.isdigit() for f in fields[:6]):
        return "floret"
    header = _DIMS.match(sample)
    if header:
        return _rows_dims_format(sample[header.end() :], int(header.group(2)))
    if len(fields) >= 2 and all(_NUMBER.match(f) for f in fields[1:]) and b"\x00" not in first:
        return "text"
    chunk_id = int.from_bytes(sample[:4], "little")
    if 1 <= chunk_id <= 9 and len(sample) >= 12:
        raise FormatError(
            f"cannot tell the format: this looks like a bare finalfusion chunk (id {chunk_id}) without the FiFu file header",
            offset=0,
            expected="one of " + ", ".join(FORMATS),
            found=sample[:16],
        )
    raise FormatError(
        "cannot tell the format: not finalfusion (no FiFu magic), not fastText (no magic 793712314), "
        'not floret, word2vec or text-dims (no "<rows> <dims>" first line) and not text (the first line is not a word followed by numbers)',
        offset=0,
        expected="one of " + ", ".join(FORMATS),
        found=sample[:60],
    )


def _rows_dims_format(body: bytes, dims: int) -> str:
    """word2vec binary or text-dims, from the data after the ``"<rows> <dims>"`` line."""
    sep = body.find(b" ")
    if sep < 0 or dims == 0:
        return "text-dims"
    vector = body[sep + 1 : sep + 1 + 4 * dims]
    # The first line of a text file is the word and decimal numbers; binary floats almost never look like that.
    line = body.split(b"\n", 1)[0]
    if _TEXTUAL.match(vector.split(b"\n", 1)[0]) and (len(line.split()) == dims + 1 or b"\n" not in body):
        return "text-dims"
    return "word2vec"


def load(file: Any, *, normalize: bool = True, lossy: bool = False, limit: int | None = None, mmap: bool = False, progress: ProgressArg = None) -> Embeddings:
    """Load embeddings in any supported format, recognised from the file's first bytes.

    Gzip-compressed input is decompressed transparently. The options apply
    where the format has them: ``normalize``, ``lossy`` and ``limit`` to
    word2vec, text, text-dims and fastText (see :func:`~finalfusion.compat.load_word2vec`);
    ``lossy`` to floret; ``mmap`` to uncompressed finalfusion files given by path.
    ``progress`` reports the bytes read (a callable ``progress("read", done,
    total)``, or ``True`` for a tqdm bar when tqdm is installed).

    Parameters
    ----------
    file
        A path, the file's contents as ``bytes``, or a binary file object.

    Returns
    -------
    Embeddings

    Raises
    ------
    FormatError
        If the format cannot be recognised (saying what was found), or the
        file is malformed.

    Examples
    --------
    >>> emb = load(b"2 2\\nfoo 3 4\\nbar 0 1\\n")
    >>> emb.vocab.words, emb["foo"].tolist()
    (['foo', 'bar'], [0.6000000238418579, 0.800000011920929])
    """
    if mmap and isinstance(file, (str, os.PathLike)):
        with open(file, "rb") as raw:
            if raw.read(4) == b"FiFu":
                return load_finalfusion(file, mmap=True)
    with reporter(progress) as report, open_input(file, report) as f:
        sample, stream = peek(f, _SAMPLE)
        fmt = sniff_format(sample)
        return _load_as(fmt, stream, normalize, lossy, limit)


def _load_as(fmt: str, f: IO[bytes], normalize: bool, lossy: bool, limit: int | None) -> Embeddings:
    if fmt == "finalfusion":
        return load_finalfusion(f)
    if fmt == "fasttext":
        from finalfusion.compat.fasttext import load_fasttext

        return load_fasttext(f, normalize=normalize, lossy=lossy, limit=limit)
    if fmt == "floret":
        from finalfusion.compat.floret import load_floret

        return load_floret(f, lossy=lossy)
    if fmt == "word2vec":
        from finalfusion.compat.word2vec import load_word2vec

        return load_word2vec(f, normalize=normalize, lossy=lossy, limit=limit)
    from finalfusion.compat.text import load_text, load_text_dims

    loader = load_text_dims if fmt == "text-dims" else load_text
    return loader(f, normalize=normalize, lossy=lossy, limit=limit)
