"""word2vec binary format (FORMAT.md §13.1).

::

    "<n_words> <dims>\\n"
    n_words times: <word UTF-8> 0x20 <dims x f32 little-endian> [0x0A]

Reading is vectorised: the input is read in large blocks, every space in a
block is found at once, and since a word cannot contain a space the
separator of the next record is the first space after the current vector;
following that chain takes one cheap step per record, the vectors are
copied straight into a preallocated matrix (whose size is capped by what
the file can hold), and each block's words are decoded in one go.
"""

from __future__ import annotations

from typing import IO, Any

import numpy as np
import numpy.typing as npt

from finalfusion.compat._common import (
    RowSink,
    check_finite,
    check_limit,
    check_trailing,
    check_writable_words,
    decode_word,
    dense_matrix_with_norms,
    embeddings_from,
    input_size,
    open_input,
    read_dims_header,
    reuse_freed_memory,
)
from finalfusion.embeddings import Embeddings
from finalfusion.errors import FormatError, Truncated
from finalfusion.io import atomic_output

__all__ = ["load_word2vec", "write_word2vec"]

#: Bytes read per block (4 MiB: as fast as larger blocks, and the buffers add little to peak memory).
_BLOCK = 1 << 22
#: Longest word accepted (a missing separator otherwise makes the reader buffer the whole file).
_MAX_WORD = 1 << 20
#: Words written per block.
_WRITE_ROWS = 1 << 14
_WHERE = "word2vec record"


def load_word2vec(file: Any, *, normalize: bool = True, lossy: bool = False, limit: int | None = None) -> Embeddings:
    """Read embeddings in the word2vec binary format.

    Parameters
    ----------
    file
        A path, the file's contents as ``bytes``, or a binary file object.
        Gzip-compressed input is decompressed transparently.
    normalize
        l2-normalise the rows and keep the original norms in an ``NdNorms``
        chunk (the default, as finalfusion-python 0.7.1 and Rust do);
        ``False`` keeps the vectors as stored, without norms.
    lossy
        Replace invalid UTF-8 in words by U+FFFD instead of raising.
    limit
        Read only the first ``limit`` words (like gensim's ``limit``).

    Returns
    -------
    Embeddings
        With a :class:`~finalfusion.vocab.SimpleVocab` and an
        :class:`~finalfusion.storage.NdArray`.

    Raises
    ------
    FormatError
        For a malformed header, invalid UTF-8 (unless ``lossy``), a NaN or
        infinite component, duplicate words, data after the announced
        records; :class:`~finalfusion.errors.Truncated` if the input ends
        early. Errors name the record and byte offset.

    Examples
    --------
    >>> import io, numpy as np
    >>> data = b"2 2\\nfoo " + np.array([3, 4], "<f4").tobytes() + b"\\nbar " + np.array([0, 1], "<f4").tobytes() + b"\\n"
    >>> emb = load_word2vec(data)
    >>> emb["foo"].tolist(), float(emb.norms[0])
    ([0.6000000238418579, 0.800000011920929], 5.0)
    >>> load_word2vec(io.BytesIO(data), normalize=False, limit=1).vocab.words
    ['foo']
    """
    check_limit(limit)
    reuse_freed_memory()
    with open_input(file) as f:
        words, matrix = _read(f, lossy, limit)
    return embeddings_from(words, matrix, normalize, where=_WHERE)


def _read(f: IO[bytes], lossy: bool, limit: int | None) -> tuple[list[str], npt.NDArray[np.float32]]:
    n, dims, pos = read_dims_header(f, "word2vec")
    take = n if limit is None else min(n, limit)
    vec = 4 * dims
    size = input_size(f)
    if size is not None and size < take * (vec + 1):
        raise Truncated(
            f"the header announces {n} records of {dims} floats, but the rest of the file is too short for {take} of them",
            offset=pos,
            chunk="word2vec",
            expected=f"at least {take * (vec + 1)} bytes",
            found=f"{size} bytes",
        )
    sink = RowSink(dims, take, take if size is not None else None)
    words: list[str] = []
    carry = b""
    base = pos
    eof = False
    while len(words) < take and not eof:
        chunk = f.read(_BLOCK)
        eof = not chunk
        buf = carry + chunk if carry else chunk
        used = _parse_block(buf, base, vec, take - len(words), words, sink, lossy)
        carry = buf[used:]
        base += used
        if not used and len(carry) > _MAX_WORD + vec:
            raise FormatError(
                "no space after a word in the first MiB", offset=base, chunk=f"{_WHERE} {len(words) + 1}", expected="<word> 0x20", found=carry[:40]
            )
    if len(words) < take:
        _truncated(carry, base, vec, len(words) + 1, n)
    if limit is None:
        check_trailing(f, carry, base, f"data after the {n} records the header announces", "word2vec")
    return words, sink.finish()


def _parse_block(buf: bytes, base: int, vec: int, want: int, words: list[str], sink: RowSink, lossy: bool) -> int:
    """Parse the complete records at the start of ``buf``; return the bytes consumed."""
    spaces_arr = np.flatnonzero(np.frombuffer(buf, dtype=np.uint8) == 0x20)
    if not len(spaces_arr):
        return 0
    nxt = np.searchsorted(spaces_arr, spaces_arr + (vec + 1)).tolist()
    spaces = spaces_arr.tolist()
    # Separators whose vector ends inside the buffer.
    complete = int(np.searchsorted(spaces_arr, len(buf) - vec))
    seps: list[int] = []
    append = seps.append
    i = 0
    while i < complete:
        append(spaces[i])
        i = nxt[i]
    del seps[want:]
    k = len(seps)
    if not k:
        return 0
    sep_arr = np.asarray(seps, dtype=np.int64)
    ends = sep_arr + 1 + vec
    starts = np.concatenate(([0], ends[:-1])).tolist()
    raw = [buf[a:b] for a, b in zip(starts, seps, strict=True)]
    rows = sink.reserve(k)
    if vec:
        _gather_vectors(buf, sep_arr + 1, rows)
    prev = int(ends[-1])
    first = len(words) + 1
    check_finite(rows, first, _WHERE)
    words.extend(_decode_words(raw, seps, vec, base, first, lossy))
    sink.commit(k)
    return prev


def _gather_vectors(buf: bytes, offsets: npt.NDArray[np.int64], rows: npt.NDArray[np.float32]) -> None:
    """Copy the little-endian f32 vectors at byte ``offsets`` of ``buf`` into ``rows``.

    The vectors are not 4-byte aligned relative to each other, so for each
    of the four alignments the buffer is viewed as float32 from that byte on,
    with a sliding window of one vector; rows at matching offsets are then a
    single fancy-indexed copy.
    """
    dims = rows.shape[1]
    residue = offsets % 4
    for r in range(4):
        which = np.flatnonzero(residue == r)
        if not len(which):
            continue
        floats = np.frombuffer(buf, dtype="<f4", offset=r, count=(len(buf) - r) // 4)
        windows = np.lib.stride_tricks.sliding_window_view(floats, dims)
        rows[which] = windows[(offsets[which] - r) // 4]


def _decode_words(raw: list[bytes], seps: list[int], vec: int, base: int, first: int, lossy: bool) -> list[str]:
    """Decode and trim a block's words at once (falling back to one by one to name a bad record)."""
    joined = b" ".join(raw)
    try:
        text = joined.decode("utf-8")
    except UnicodeDecodeError:
        if not lossy:
            for j, w in enumerate(raw):
                start = base + (seps[j - 1] + 1 + vec if j else 0)
                decode_word(w, False, f"{_WHERE} {first + j}", start)
        text = joined.decode("utf-8", errors="replace")
    return [w.strip() for w in text.split(" ")]


def _truncated(carry: bytes, base: int, vec: int, record: int, n: int) -> None:
    where = f"{_WHERE} {record}"
    if not carry.strip():
        raise Truncated(f"the input ends after {record - 1} of the {n} records the header announces", offset=base, chunk=where, expected=n, found=record - 1)
    sep = carry.find(b" ")
    if sep < 0:
        raise Truncated("the input ends inside a word", offset=base, chunk=where, expected="<word> 0x20 <vector>", found=carry[:40])
    got = len(carry) - sep - 1
    raise Truncated("the input ends inside a vector", offset=base + sep + 1, chunk=where, expected=f"{vec} bytes", found=f"{got} bytes")


def write_word2vec(file: Any, embeddings: Embeddings, *, unnormalize: bool = True, fsync: bool = False) -> None:
    """Write embeddings in the word2vec binary format.

    Only the known words are written (subword rows are dropped). Every word
    is checked before anything is written; a path is replaced atomically.

    Parameters
    ----------
    file
        A path or a binary file object.
    embeddings
        The embeddings to write (dense or quantized storage).
    unnormalize
        Multiply each row by its norm when the embeddings have norms (the
        default, as finalfusion-python 0.7.1; Rust writes the rows as stored).
    fsync
        Flush to disk before the atomic rename.

    Raises
    ------
    ValueError
        If a word is empty or contains whitespace (the format cannot represent it).

    Examples
    --------
    >>> import io, numpy as np
    >>> from finalfusion.compat._common import embeddings_from
    >>> emb = embeddings_from(["foo"], np.array([[3, 4]], dtype=np.float32), normalize=True)
    >>> buf = io.BytesIO(); write_word2vec(buf, emb)
    >>> buf.getvalue()[:8], load_word2vec(buf.getvalue(), normalize=False)["foo"].tolist()
    (b'1 2\\nfoo ', [3.0, 4.0])
    """
    words = embeddings.vocab.words
    check_writable_words(words, "word2vec")
    n, dims = len(words), embeddings.dims
    vec = 4 * dims
    with atomic_output(file, fsync=fsync) as f:
        f.write(f"{n} {dims}\n".encode())
        for start in range(0, n, _WRITE_ROWS):
            block = words[start : start + _WRITE_ROWS]
            data = dense_matrix_with_norms(embeddings, unnormalize, start, start + len(block)).astype("<f4", copy=False).tobytes()
            parts: list[bytes] = []
            for j, w in enumerate(block):
                parts += (w.encode("utf-8"), b" ", data[j * vec : (j + 1) * vec], b"\n")
            f.write(b"".join(parts))
