"""word2vec binary format (docs/format.md §13.1).

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

import re
import sys
from collections.abc import Iterator
from typing import IO, Any

import numpy as np
import numpy.typing as npt

from finalfusion import limits
from finalfusion._atomic import atomic_output
from finalfusion._progress import ProgressArg, reporter
from finalfusion._source import Source, input_size, open_stream
from finalfusion.compat._build import embeddings_from
from finalfusion.compat._dims_line import DIMS_MISMATCH, check_trailing, dims_file_format, read_dims_header
from finalfusion.compat._registry import register_format
from finalfusion.compat._rows import RowSink, check_finite, check_limit, check_rows_writable, dense_matrix_with_norms, reuse_freed_memory
from finalfusion.compat._words import check_trimmed_repeat, check_writable_words, decode_words
from finalfusion.embeddings import Embeddings
from finalfusion.errors import FormatError, Truncated

__all__ = ["load_word2vec", "write_word2vec"]

#: Bytes read per block (4 MiB: as fast as larger blocks, and the buffers add little to peak memory).
_BLOCK = 1 << 22
#: Words written per block.
_WRITE_ROWS = 1 << 14
_WHERE = "word2vec record"


def load_word2vec(file: Source, *, normalize: bool = True, lossy: bool = False, limit: int | None = None, progress: ProgressArg = None) -> Embeddings:
    """Read embeddings in the word2vec binary format.

    Parameters
    ----------
    file
        Any :data:`~finalfusion.Source`: a path (``str``, ``os.PathLike`` or
        a ``bytes`` path), the file's contents (``bytes``, ``bytearray``,
        ``memoryview``), a file descriptor or a binary file object.
        Gzip-compressed input is decompressed transparently.
    normalize
        l2-normalise the rows and keep the original norms in an ``NdNorms``
        chunk (the default, as finalfusion-python 0.7.1 and Rust do);
        ``False`` keeps the vectors as stored, without norms.
    lossy
        Replace invalid UTF-8 in words by U+FFFD instead of raising.
    limit
        Read only the first ``limit`` words (like gensim's ``limit``).
    progress
        Report the bytes read: a callable ``progress("read", done, total)``
        or ``True`` for a tqdm bar (when tqdm is installed); see
        :mod:`finalfusion._progress`.

    Returns
    -------
    Embeddings
        With a :class:`~finalfusion.vocab.SimpleVocab` and an
        :class:`~finalfusion.storage.NdArray`.

    Raises
    ------
    FormatError
        For a malformed header, invalid UTF-8 (unless ``lossy``), a NaN or
        infinite component, duplicate words (words are trimmed of whitespace
        at their edges, as finalfusion-rust and 0.7 read them; a repeat
        that trimming makes, such as the BPE pieces ``");\\r"`` and ``");"``,
        is named as such), data after the announced
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
    untrimmed: dict[int, str] = {}
    with reporter(progress) as report, open_stream(file, report) as f:
        words, matrix = _read(f, lossy, limit, untrimmed)
    if untrimmed:
        check_trimmed_repeat(words, untrimmed, "word2vec", _WHERE)
    return embeddings_from(words, matrix, normalize, where=_WHERE)


def _read(f: IO[bytes], lossy: bool, limit: int | None, untrimmed: dict[int, str]) -> tuple[list[str], npt.NDArray[np.float32]]:
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
    parts: list[bytes] = []  # blocks read since the last parse, not yet joined to carry
    held = 0
    need = 0  # bytes the next record needs beyond carry before a parse can use any
    base = pos
    eof = False
    # Longest word accepted (a missing separator otherwise makes the reader buffer the whole file);
    # read once per call (a program may raise it), not per block.
    max_word = limits.MAX_WORD_BYTES
    while len(words) < take and not eof:
        chunk = f.read(_BLOCK)
        eof = not chunk
        parts.append(chunk)
        held += len(chunk)
        if held < need and not eof:
            continue  # a long record: collect blocks, join once (no rescans of a growing buffer)
        buf = b"".join([carry, *parts]) if carry else b"".join(parts)
        parts.clear()
        held = need = 0
        used = _parse_block(buf, base, vec, take - len(words), words, sink, lossy, untrimmed)
        carry = buf[used:]
        base += used
        if not used:
            # The word ends at its first space, which must come within the word cap, whatever the dims.
            sep = carry.find(b" ", 0, max_word + 1)
            if sep < 0 and len(carry) > max_word:
                raise FormatError(
                    f"no space after a word in its first {max_word} bytes (finalfusion.limits.MAX_WORD_BYTES)",
                    offset=base,
                    chunk=f"{_WHERE} {len(words) + 1}",
                    expected="<word> 0x20",
                    found=carry[:40],
                )
            need = sep + 1 + vec - len(carry) if sep >= 0 else 0
    if len(words) < take:
        _truncated(carry, base, vec, len(words) + 1, n)
    if limit is None:
        check_trailing(f, carry, base, f"data after the {n} records the header announces", "word2vec")
    return words, sink.finish()


def _parse_block(buf: bytes, base: int, vec: int, want: int, words: list[str], sink: RowSink, lossy: bool, untrimmed: dict[int, str]) -> int:
    """Parse the complete records at the start of ``buf``; return the bytes consumed (words that trimming changed go to ``untrimmed``)."""
    a = np.frombuffer(buf, dtype=np.uint8)
    spaces = np.flatnonzero(a == 0x20)
    # Separators whose vector ends inside the buffer.
    complete = int(np.searchsorted(spaces, len(buf) - vec))
    if not complete:
        return 0
    seps = _newline_records(a, spaces, complete, vec)
    if seps is None:
        seps = _chain(spaces, complete, vec)
    seps = seps[:want]
    k = len(seps)
    if not k:
        return 0
    ends = seps + 1 + vec
    starts = np.empty(k, dtype=np.int64)
    starts[0] = 0
    starts[1:] = ends[:-1]
    rows = sink.reserve(k)
    if vec:
        _gather_vectors(buf, seps + 1, rows)
    first = len(words) + 1
    check_finite(rows, first, _WHERE)
    words.extend(_decode_words(a, starts, seps, base, first, lossy, untrimmed))
    sink.commit(k)
    end = int(ends[-1])
    return end + 1 if end < len(a) and a[end] == 0x0A else end  # the next block starts with a word


def _newline_records(a: npt.NDArray[np.uint8], spaces: npt.NDArray[np.intp], complete: int, vec: int) -> npt.NDArray[np.int64] | None:
    """The separators if every record ends with a newline (the common case), else ``None``.

    Only spaces followed by a newline one vector later can be separators
    then, which leaves few candidates to chain; the result is verified (each
    separator must be the first space after the previous record), so a file
    without newlines, or with a missing one, takes the general path.
    """
    candidates = spaces[:complete]
    after = candidates + (vec + 1)
    inside = after < len(a)
    candidates, after = candidates[inside], after[inside]
    candidates = candidates[a[after] == 0x0A]
    if not len(candidates):
        return None
    seps = np.asarray(_follow(candidates.tolist(), np.searchsorted(candidates, candidates + (vec + 2)).tolist(), len(candidates)), dtype=np.int64)
    if spaces[0] != seps[0]:
        return None
    nxt = np.searchsorted(spaces, seps[:-1] + (vec + 2))
    if not np.array_equal(spaces[np.minimum(nxt, len(spaces) - 1)], seps[1:]):
        return None
    return seps


def _chain(spaces: npt.NDArray[np.intp], complete: int, vec: int) -> npt.NDArray[np.int64]:
    """The separators: from the first space, each next one is the first space after the vector."""
    nxt = np.searchsorted(spaces, spaces + (vec + 1)).tolist()
    return np.asarray(_follow(spaces.tolist(), nxt, complete), dtype=np.int64)


def _follow(positions: list[int], nxt: list[int], limit: int) -> list[int]:
    seps: list[int] = []
    append = seps.append
    i = 0
    while i < limit:
        append(positions[i])
        i = nxt[i]
    return seps


def _gather_vectors(buf: bytes, offsets: npt.NDArray[np.int64], rows: npt.NDArray[np.float32]) -> None:
    """Copy the little-endian f32 vectors at byte ``offsets`` of ``buf`` into ``rows``.

    The buffer is viewed as overlapping byte windows of one vector each, so
    gathering the windows at ``offsets`` copies every vector with a single
    fancy-indexing step, whatever the (unaligned) offsets are.
    """
    vec = 4 * rows.shape[1]
    windows = np.lib.stride_tricks.sliding_window_view(np.frombuffer(buf, dtype=np.uint8), vec)
    rows.view(np.uint8).reshape(len(rows), vec)[...] = windows[offsets]
    if sys.byteorder == "big":
        rows.byteswap(inplace=True)


#: Whitespace other than the separator, a doubled or an outer separator: some word needs trimming.
_UNTRIMMED = re.compile(r"[^\S ]|  |^ | $")


def _decode_words(
    a: npt.NDArray[np.uint8], starts: npt.NDArray[np.int64], seps: npt.NDArray[np.int64], base: int, first: int, lossy: bool, untrimmed: dict[int, str]
) -> list[str]:
    """Decode and trim a block's words at once (one by one only to name a bad record).

    The bytes of every word and its separating space are gathered with one
    index array, decoded together and split at the spaces. A word that
    trimming changes is kept as written in ``untrimmed`` (by its index), so
    that a repeat made by trimming can be named as such.
    """
    lengths = seps - starts + 1
    total = int(lengths.sum())
    index = np.arange(total, dtype=np.int64) + np.repeat(starts - (np.cumsum(lengths) - lengths), lengths)

    def each() -> Iterator[tuple[bytes, str, int]]:  # called only to name a bad word
        for j, (s, e) in enumerate(zip(starts.tolist(), seps.tolist(), strict=True)):
            yield a[s:e].tobytes(), f"{_WHERE} {first + j}", base + s

    text = decode_words(a[index].tobytes(), lossy, each)
    text = text[:-1]  # the last separator
    if _UNTRIMMED.search(text):
        # The newline that ends a record starts the next word: it is not part of the word (gensim drops it too).
        plain = text.replace(" \n", " ")
        plain = plain[1:] if plain.startswith("\n") else plain
        if not _UNTRIMMED.search(plain):
            return plain.split(" ")
        raw = [w.lstrip("\n") for w in text.split(" ")]
        out = [w.strip() for w in raw]
        untrimmed.update((first - 1 + k, r) for k, (r, w) in enumerate(zip(raw, out, strict=True)) if r != w)
        return out
    return text.split(" ")


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
    NonFiniteError
        (a ``ValueError``) If a vector to be written has a NaN or infinite
        value, also one that multiplying its norm back overflows: the
        reader refuses them. Nothing is written.

    Examples
    --------
    >>> import io, numpy as np
    >>> from finalfusion.compat._build import embeddings_from
    >>> emb = embeddings_from(["foo"], np.array([[3, 4]], dtype=np.float32), normalize=True)
    >>> buf = io.BytesIO(); write_word2vec(buf, emb)
    >>> buf.getvalue()[:8], load_word2vec(buf.getvalue(), normalize=False)["foo"].tolist()
    (b'1 2\\nfoo ', [3.0, 4.0])
    """
    words = embeddings.vocab.words
    check_writable_words(words, "word2vec")
    check_rows_writable(embeddings, "word2vec", unnormalize)
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


def _detect(sample: bytes, path: str | None) -> bool:
    return dims_file_format(sample) == "word2vec"


register_format(
    "word2vec",
    description='word2vec binary: a "<rows> <dims>" line, then per row a word, a space and dims float32s',
    extensions=(".bin", ".w2v"),
    order=110,
    detector=_detect,
    loader=load_word2vec,
    writer=write_word2vec,
    options=("normalize", "lossy", "limit", "progress"),
    mismatch=DIMS_MISMATCH,
)
