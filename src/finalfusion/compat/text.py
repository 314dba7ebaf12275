"""Text formats (docs/format.md §13.2): one word per line followed by its components.

* **text-dims** (word2vec text, fastText ``.vec``): a first line ``"<rows> <dims>"``;
  :func:`load_text_dims` / :func:`write_text_dims`.
* **text** (GloVe): no header, the dimensionality is that of the first line;
  :func:`load_text` / :func:`write_text`.

Fields are separated by ASCII whitespace (space, tab, CR, form feed), so
words cannot contain it. Every line must have exactly ``dims`` components;
an empty line, a missing or extra component, or a value that is not a
finite number is a :class:`~finalfusion.errors.FormatError` naming the line.

Reading is vectorised: the input is read in large blocks, tokens and lines
are found with numpy, and the numbers are parsed column by column over all
tokens of a block at once (tokens sorted by length, so each step only
touches the tokens still long enough). Plain decimals (``-12.5``) take this
path; anything else (exponents, ``nan``) is handed to Python's ``float`` once
per distinct token of a block, so it stays correct, just slower. Values
whose float64 reading lies near a float32 rounding midpoint are rounded as
Rust's ``parse::<f32>`` does (once, from the decimal): short decimals all at
once in float64, the rest once per distinct token with Python integers.
"""

from __future__ import annotations

import re
from typing import IO, Any

import numpy as np
import numpy.typing as npt

from finalfusion import limits
from finalfusion._atomic import atomic_output
from finalfusion._binary import check_dims
from finalfusion._progress import ProgressArg, reporter
from finalfusion._source import Source, input_size, open_stream
from finalfusion._threads import InOrder, check_threads
from finalfusion.compat._build import embeddings_from
from finalfusion.compat._dims_line import DIMS_MISMATCH, check_trailing, dims_file_format, read_dims_header
from finalfusion.compat._floats import RUST_F32, near_float32_tie, round_float32_ties, round_short_ties
from finalfusion.compat._registry import register_format
from finalfusion.compat._rows import RowSink, check_finite, check_limit, check_rows_writable, dense_matrix_with_norms, reuse_freed_memory
from finalfusion.compat._words import check_writable_words, decode_words
from finalfusion.embeddings import Embeddings
from finalfusion.errors import FormatError, Truncated

__all__ = ["load_text", "load_text_dims", "write_text", "write_text_dims"]

#: Bytes read per block (small enough for the per-token arrays to stay in cache).
_BLOCK = 1 << 18
#: Words written per block.
_WRITE_ROWS = 1 << 12
#: A token's trailing ``.0`` (numpy writes ``1.0``, Rust ``1``).
_POINT_ZERO = re.compile(r"\.0(?=[ \n]|$)")

#: Field separators (what Rust splits on).
_WS = b" \t\n\r\f"
_IS_WS = np.zeros(256, dtype=bool)
_IS_WS[list(_WS)] = True
#: Longest plain decimal the vectorised parser takes (18 digits always fit an int64).
_MAX_FAST = 18
_POW10 = 10.0 ** np.arange(0, 19)
_LO, _HI = np.arange(1 << 16) & 0xFF, np.arange(1 << 16) >> 8


def _pair_tables(first: bool) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.uint8], npt.NDArray[np.float32]]:
    """Lookup tables for a little-endian pair of characters of a number token.

    ``shift`` is 10 to the number of digits in the pair (what the mantissa so far is multiplied
    by), or NaN if the pair cannot be part of a plain decimal -- the NaN then sticks to the
    token's mantissa, which marks it for the slow path; ``value`` is the pair's digits as a
    number; ``dot`` is 10 to the number of digits after a dot in the pair (0 without a dot), so
    that ``q = q * shift + dot`` ends as 10 to the number of decimals. The second character may
    be the separator after an odd-length token; a minus sign is allowed only first in a token.
    """
    lo_digit, hi_digit = (_LO >= 48) & (_LO <= 57), (_HI >= 48) & (_HI <= 57)
    hi_end = _IS_WS[_HI]
    lo_ok = lo_digit | (_LO == 0x2E) | ((_LO == 0x2D) if first else False)
    hi_ok = hi_digit | (_HI == 0x2E) | hi_end
    valid = lo_ok & hi_ok & ~((_LO == 0x2E) & (_HI == 0x2E)) & ~((_LO == 0x2D) & (_HI == 0x2D))
    digits = lo_digit.astype(np.int64) + hi_digit
    shift = np.where(valid, 10.0**digits, np.nan).astype(np.float32)
    value = np.where(lo_digit & hi_digit, 10 * (_LO - 48) + _HI - 48, np.where(lo_digit, _LO - 48, np.where(hi_digit, _HI - 48, 0))).astype(np.uint8)
    dot = np.where(_LO == 0x2E, np.where(hi_digit, 10.0, 1.0), np.where(_HI == 0x2E, 1.0, 0.0)).astype(np.float32)
    return shift, value, dot


_FIRST_PAIR = _pair_tables(True)
_NEXT_PAIR = _pair_tables(False)


def load_text_dims(
    file: Source, *, normalize: bool = True, lossy: bool = False, limit: int | None = None, progress: ProgressArg = None, threads: int | None = None
) -> Embeddings:
    """Read embeddings in text format with a ``"<rows> <dims>"`` first line (word2vec text, fastText ``.vec``).

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
        ``False`` keeps the vectors as read, without norms.
    lossy
        Replace invalid UTF-8 in words by U+FFFD instead of raising.
    limit
        Read only the first ``limit`` words.
    progress
        Report the bytes read: a callable ``progress("read", done, total)``
        or ``True`` for a tqdm bar (when tqdm is installed); see
        :mod:`finalfusion._progress`.
    threads
        Threads parsing blocks of lines, the calling one included (default:
        :func:`finalfusion.get_threads`). The result does not depend on it.

    Returns
    -------
    Embeddings
        With a :class:`~finalfusion.vocab.SimpleVocab` and an :class:`~finalfusion.storage.NdArray`.

    Raises
    ------
    FormatError
        Naming the line for: a bad header, a line with too few or too many
        components, a value that is not a finite number, invalid UTF-8
        (unless ``lossy``), an empty line, a duplicate word, more or fewer
        lines than the header announces.
    ValueError
        If ``threads`` is not a positive int or ``None``.

    Examples
    --------
    >>> emb = load_text_dims(b"2 2\\nfoo 3 4\\nbar 0 -1.5\\n")
    >>> emb.vocab.words, emb["foo"].tolist(), float(emb.norms[0])
    (['foo', 'bar'], [0.6000000238418579, 0.800000011920929], 5.0)
    >>> load_text_dims(b"2 2\\nfoo 3 4\\nbar 0\\n")
    Traceback (most recent call last):
    ...
    finalfusion.errors.FormatError: text-dims line 3: wrong number of components: expected 2, found 1 (at byte offset 12)
    """
    check_limit(limit)
    check_threads(threads)
    reuse_freed_memory()
    with reporter(progress) as report, open_stream(file, report) as f:
        n, dims, pos = read_dims_header(f, "text-dims")
        words, matrix = read_text_rows(f, "text-dims", n, dims, pos, lossy, limit, threads)
    return embeddings_from(words, matrix, normalize, where="text-dims line", first=2)


def load_text(
    file: Source, *, normalize: bool = True, lossy: bool = False, limit: int | None = None, progress: ProgressArg = None, threads: int | None = None
) -> Embeddings:
    """Read embeddings in text format without a header (GloVe).

    The dimensionality is the number of components on the first line;
    every other line must have as many.

    Parameters
    ----------
    file, normalize, lossy, limit, progress, threads
        As for :func:`load_text_dims`.

    Returns
    -------
    Embeddings

    Raises
    ------
    FormatError
        As for :func:`load_text_dims`; also for an empty input.

    Examples
    --------
    >>> emb = load_text(b"foo 3 4\\nbar 0 -1.5\\n", normalize=False)
    >>> emb.vocab.words, emb["bar"].tolist(), emb.norms is None
    (['foo', 'bar'], [0.0, -1.5], True)
    """
    check_limit(limit)
    check_threads(threads)
    reuse_freed_memory()
    with reporter(progress) as report, open_stream(file, report) as f:
        words, matrix = read_text_rows(f, "text", None, None, 0, lossy, limit, threads)
    return embeddings_from(words, matrix, normalize, where="text line", first=1)


def read_text_rows(
    f: IO[bytes], fmt: str, n: int | None, dims: int | None, pos: int, lossy: bool, limit: int | None, threads: int | None = None
) -> tuple[list[str], npt.NDArray[np.float32]]:
    """Read lines until ``n`` (or ``limit``, or end of input) words are read.

    Blocks of whole lines are cut here and parsed on the library's threads
    (numpy releases the GIL in its loops; :func:`finalfusion.set_threads`),
    each into its own rows of the matrix; results and errors are taken in
    file order.
    """
    take = n if limit is None else (limit if n is None else min(n, limit))
    first_line = 2 if n is not None else 1
    size = input_size(f)
    sink: RowSink | None = None
    words: list[str] = []
    lines = 0
    carry = b""
    parts: list[bytes] = []
    held = 0
    base = pos
    eof = False
    max_line = limits.MAX_LINE_BYTES  # read once per call (a program may raise it), not per block
    with InOrder[list[str]](threads) as pending:
        while (take is None or lines < take) and not eof:
            chunk = f.read(_BLOCK)
            eof = not chunk
            # Only the new block is searched: the carried bytes hold no newline. Blocks without one are
            # kept aside (not joined, not rescanned) until a newline or the line cap.
            nl = chunk.rfind(b"\n")
            if nl < 0 and not eof:
                held += len(chunk)
                if len(carry) + held > max_line:
                    _collect(pending, words, 0)  # an earlier error comes first
                    where = f"{fmt} line {first_line + lines}"
                    raise FormatError(
                        "line too long",
                        offset=base,
                        chunk=where,
                        expected=f"at most {max_line} bytes (finalfusion.limits.MAX_LINE_BYTES)",
                        found=f"more than {max_line}",
                    )
                parts.append(chunk)
                continue
            buf = b"".join([carry, *parts, chunk]) if carry or parts else chunk
            parts.clear()
            held = 0
            cut = len(buf) - len(chunk) + nl + 1 if nl >= 0 else 0
            if eof and cut < len(buf):
                buf += b"\n"
                cut = len(buf)
            if not cut:
                carry = buf
                continue
            block, carry = buf[:cut], buf[cut:]
            count = block.count(b"\n")
            if take is not None and lines + count > take:  # the wanted number of lines ends in this block
                count = take - lines
                end = _nth_newline(block, count) + 1
                block, carry = block[:end], block[end:] + carry
            if dims is None:
                dims = _first_line_dims(block, base, fmt)
            if len(block) < count * (2 * dims + 2):
                # A line of a word and dims components takes at least 2 * dims + 2 bytes, so some line of
                # this block is short: report it before reserving rows for a header's (huge) dims.
                _collect(pending, words, 0)
                _tokenize(block, base, fmt, first_line + lines, dims)
            if sink is None:
                # Each line holds at least a word, a separator and per component a digit and a separator.
                affordable = None if size is None else size // (2 * dims + 2) + 1
                sink = RowSink(dims, take, affordable)
            if not sink.fits(count):  # the matrix is about to move: finish the blocks writing into it
                _collect(pending, words, 0)
            rows = sink.reserve(count)
            sink.commit(count)
            pending.submit(_parse_block, block, base, fmt, first_line + lines, dims, rows, lossy)
            _collect(pending, words, 2 * pending.threads)
            base += len(block)
            lines += count
        _collect(pending, words, 0)
    if sink is None:
        if dims is None:
            raise FormatError("the input is empty", offset=0, chunk=fmt, expected="at least one line", found="no data")
        sink = RowSink(dims, 0, 0)
    if n is not None and len(words) < (take or 0):
        raise Truncated(
            f"the input ends after {len(words)} of the {n} lines the header announces",
            offset=base,
            chunk=f"{fmt} line {first_line + len(words)}",
            expected=n,
            found=len(words),
        )
    if n is not None and limit is None:
        check_trailing(f, carry, base, f"more lines than the {n} the header announces", f"{fmt} line {first_line + n}")
    return words, sink.finish()


def _collect(pending: InOrder[list[str]], words: list[str], keep: int) -> None:
    """Take the words of finished blocks in file order (raising their errors) until ``keep`` are left."""
    for block_words in pending.take(keep):
        words.extend(block_words)


def _nth_newline(block: bytes, count: int) -> int:
    """Offset of the ``count``-th newline in ``block`` (``count`` >= 1)."""
    at = -1
    for _ in range(count):
        at = block.index(b"\n", at + 1)
    return at


def _first_line_dims(block: bytes, base: int, fmt: str) -> int:
    line = block[: block.find(b"\n")]
    tokens = line.split()
    if not tokens:
        raise FormatError("spurious empty line", offset=base, chunk=f"{fmt} line 1", expected="a word and its components", found=line)
    check_dims(len(tokens) - 1, offset=base, chunk=f"{fmt} line 1")
    return len(tokens) - 1


_Tokens = tuple[npt.NDArray[np.uint8], npt.NDArray[np.intp], npt.NDArray[np.intp], npt.NDArray[np.intp]]


def _tokenize(block: bytes, base: int, fmt: str, line0: int, dims: int) -> _Tokens:
    """The bytes of ``block``, the starts and ends of its tokens and the index of each line's first token.

    Raises a :class:`FormatError` naming the first line that is empty or does not have ``dims`` components.
    """
    a = np.frombuffer(block, dtype=np.uint8)
    ws = a <= 0x20
    controls = np.flatnonzero(a < 0x20)  # newlines, tabs, ... (a few per line)
    odd = controls[~_IS_WS[a[controls]]]
    if len(odd):  # control characters other than the separators belong to words (Rust does not split on them)
        ws[odd] = False
    # Tokens alternate with separator runs: every change between whitespace and not is a start or an end.
    changes = np.flatnonzero(ws[1:] != ws[:-1]) + 1
    if len(a) and not ws[0]:
        changes = np.concatenate(([0], changes))
    starts, ends = changes[0::2], changes[1::2]
    newlines = controls[a[controls] == 0x0A]
    n_lines = len(newlines)
    tok_end = np.searchsorted(starts, newlines)
    counts = np.diff(tok_end, prepend=0)
    bad = np.flatnonzero(counts != dims + 1)
    if len(bad):
        i = int(bad[0])
        line_start = int(newlines[i - 1]) + 1 if i else 0
        where = f"{fmt} line {line0 + i}"
        if counts[i] == 0:
            raise FormatError(
                "spurious empty line", offset=base + line_start, chunk=where, expected="a word and its components", found=block[line_start : int(newlines[i])]
            )
        raise FormatError("wrong number of components", offset=base + line_start, chunk=where, expected=dims, found=int(counts[i]) - 1)
    n_tok = int(tok_end[-1]) if n_lines else 0
    return a, starts[:n_tok], ends[:n_tok], tok_end - counts


def _parse_block(block: bytes, base: int, fmt: str, line0: int, dims: int, rows: npt.NDArray[np.float32], lossy: bool) -> list[str]:
    """Parse the lines of ``block`` (ending with ``\\n``) into ``rows``; return their words."""
    a, starts, ends, word_tok = _tokenize(block, base, fmt, line0, dims)
    n_tok = len(starts)
    is_num = np.ones(n_tok, dtype=bool)
    is_num[word_tok] = False
    _parse_numbers(a, starts[is_num], ends[is_num], rows.reshape(-1), block, base, fmt, line0, dims)
    check_finite(rows, line0, f"{fmt} line")
    w_starts, w_ends = starts[word_tok].tolist(), ends[word_tok].tolist()
    raw = [block[s:e] for s, e in zip(w_starts, w_ends, strict=True)]
    text = decode_words(b"\n".join(raw), lossy, lambda: ((w, f"{fmt} line {line0 + j}", base + w_starts[j]) for j, w in enumerate(raw)))
    return text.split("\n") if len(word_tok) else []


def _parse_numbers(
    a: npt.NDArray[np.uint8],
    starts: npt.NDArray[np.intp],
    ends: npt.NDArray[np.intp],
    out: npt.NDArray[np.float32],
    block: bytes,
    base: int,
    fmt: str,
    line0: int,
    dims: int,
) -> None:
    """Parse the tokens ``a[starts[i]:ends[i]]`` as numbers into ``out`` (plain decimals vectorised, the rest by ``float``)."""
    n = len(starts)
    lengths = ends - starts
    # Two characters at a time: the block viewed as little-endian u16 from an even and from an odd
    # byte, tokens grouped by the parity of their start and sorted by length (longest first) so each
    # step only touches the tokens still long enough; lookup tables give a pair's digits.
    pairs = np.minimum((lengths + 1) >> 1, 127).astype(np.uint8)
    parity = (starts & 1).astype(np.uint8)
    order = np.argsort((parity << 7) | (127 - pairs), kind="stable")  # radix sort on uint8
    n_even = n - int(np.count_nonzero(parity))
    s_sorted = starts[order]
    p_sorted = pairs[order]
    mant = np.zeros(n, dtype=np.float64)
    scale = np.zeros(n, dtype=np.float64)
    neg = np.zeros(n, dtype=bool)
    for g, lo, hi in ((0, 0, n_even), (1, n_even, n)):
        if lo == hi:
            continue
        view = np.frombuffer(block, dtype="<u2", offset=g, count=(len(block) - g) // 2)
        idx = (s_sorted[lo:hi] - g) >> 1
        active = (hi - lo) - np.cumsum(np.bincount(p_sorted[lo:hi], minlength=128))
        m, q = mant[lo:hi], scale[lo:hi]
        for jj in range(min(int(p_sorted[lo]), _MAX_FAST // 2)):
            k = int(active[jj])
            c2 = view[idx[:k]].astype(np.intp)
            shift_t, value_t, dot_t = _FIRST_PAIR if jj == 0 else _NEXT_PAIR
            sh = shift_t[c2]
            mk, qk = m[:k], q[:k]
            mk *= sh
            mk += value_t[c2]
            qk *= sh
            qk += dot_t[c2]
            if jj == 0:
                neg[lo:hi] = (c2 & 0xFF) == 0x2D
            idx[:k] += 1
    length = lengths[order]
    has_dot = scale > 0
    # A plain decimal: no character outside [-.0-9] (NaN mantissa), one dot at most, at least one digit.
    ok = ~np.isnan(mant) & (length <= _MAX_FAST) & (length - neg - has_dot.astype(np.int64) > 0)
    if np.count_nonzero(a == 0x2E) != np.count_nonzero(has_dot):
        # Some token (or word) has several dots: then its scale is not a power of ten.
        frac = np.rint(np.log10(scale, out=np.zeros_like(scale), where=has_dot)).astype(np.int64)
        ok &= ~has_dot | (scale == _POW10[np.clip(frac, 0, _MAX_FAST)])
    np.copyto(scale, 1.0, where=~has_dot)
    values = mant / scale
    np.negative(values, out=values, where=neg)
    with np.errstate(over="ignore"):  # beyond float32's range: infinite, rejected by the caller
        out[order] = values
    slow = order[~ok].tolist()
    known: dict[bytes, float] = {}  # each distinct token is checked and read once (a file may repeat one)
    floats = []
    for i in slow:
        token = block[int(starts[i]) : int(ends[i])]
        value = known.get(token)
        if value is None:
            try:
                if not RUST_F32.fullmatch(token):  # float() also takes 1_000 and "1\v", Rust does not
                    raise ValueError(token)
                value = known[token] = float(token)
            except ValueError:
                line = line0 + i // dims
                raise FormatError(
                    "not a number", offset=base + int(starts[i]), chunk=f"{fmt} line {line}", expected="a decimal number", found=token[:40]
                ) from None
        floats.append(value)
    parsed = np.array(floats, dtype=np.float64)
    if slow:
        with np.errstate(over="ignore"):
            out[slow] = parsed
    # Correct rounding, as Rust's parse::<f32>: values parsed through float64 that sit on a float32 tie.
    # Short decimals (digits exact in float64) are decided all at once; the rest once per distinct token.
    near = np.flatnonzero(ok & near_float32_tie(values))
    decided, done = round_short_ties(mant[near], scale[near], values[near])
    out[order[near[done]]] = decided[done]
    slow_near = near_float32_tie(parsed)
    left = np.concatenate([order[near[~done]], np.asarray(slow, dtype=np.intp)[slow_near]])
    if len(left):
        left_values = np.concatenate([values[near[~done]], parsed[slow_near]])
        ids: dict[bytes, int] = {}
        which: list[int] = []
        firsts: list[int] = []
        for j, (s, e) in enumerate(zip(starts[left].tolist(), ends[left].tolist(), strict=True)):
            k = ids.setdefault(block[s:e], len(firsts))
            if k == len(firsts):
                firsts.append(j)
            which.append(k)
        out[left] = round_float32_ties(list(ids), left_values[firsts])[which]


def write_text_dims(file: Any, embeddings: Embeddings, sep: str = " ", *, unnormalize: bool = True, fsync: bool = False) -> None:
    """Write embeddings as text with a ``"<rows> <dims>"`` first line.

    Components are written like Rust does: the shortest decimal that reads
    back as the same ``float32``, without exponent (``1``, ``-0.5``,
    ``0.0000001``). Only the known words are written (subword rows are
    dropped). Every word is checked before anything is written; a path is
    replaced atomically.

    Parameters
    ----------
    file
        A path or a binary file object.
    embeddings
        The embeddings to write.
    sep
        Whitespace between the word and its first component (as in finalfusion-python 0.7.1).
    unnormalize
        Multiply the rows by their norms when the embeddings have norms
        (the default, as finalfusion-python 0.7.1).
    fsync
        Flush to disk before the atomic rename.

    Raises
    ------
    ValueError
        If a word is empty or contains whitespace, or ``sep`` is not whitespace.
    NonFiniteError
        (a ``ValueError``) If a vector to be written has a NaN or infinite
        value, also one that multiplying its norm back overflows: the
        reader refuses them. Nothing is written.

    Examples
    --------
    >>> import io, numpy as np
    >>> from finalfusion.compat._build import embeddings_from
    >>> emb = embeddings_from(["foo"], np.array([[3, 4e-10]], dtype=np.float32), normalize=False)
    >>> buf = io.BytesIO(); write_text_dims(buf, emb)
    >>> buf.getvalue()
    b'1 2\\nfoo 3 0.0000000004\\n'
    """
    _write(file, embeddings, True, sep, unnormalize, fsync)


def write_text(file: Any, embeddings: Embeddings, sep: str = " ", *, unnormalize: bool = True, fsync: bool = False) -> None:
    """Write embeddings as text without a header (GloVe); see :func:`write_text_dims`.

    Examples
    --------
    >>> import io, numpy as np
    >>> from finalfusion.compat._build import embeddings_from
    >>> emb = embeddings_from(["foo", "bar"], np.array([[1, -0.5], [0, 0]], dtype=np.float32), normalize=False)
    >>> buf = io.BytesIO(); write_text(buf, emb)
    >>> buf.getvalue()
    b'foo 1 -0.5\\nbar 0 0\\n'
    """
    _write(file, embeddings, False, sep, unnormalize, fsync)


def format_f32(v: np.float32) -> str:
    """Rust's formatting of an ``f32``: shortest round-trip decimal, no exponent.

    Examples
    --------
    >>> [format_f32(np.float32(x)) for x in (1.0, -0.0, 0.1, 1e-10, 3e20)]
    ['1', '-0', '0.1', '0.0000000001', '300000000000000000000']
    """
    s = str(v)
    if "e" in s or "n" in s:
        return np.format_float_positional(v, unique=True, trim="-")
    return s[:-2] if s.endswith(".0") else s


def _write(file: Any, embeddings: Embeddings, with_dims: bool, sep: str, unnormalize: bool, fsync: bool) -> None:
    words = embeddings.vocab.words
    fmt = "text-dims" if with_dims else "text"
    check_writable_words(words, fmt)
    if not sep or sep.strip(" \t"):
        raise ValueError(f"sep must be spaces or tabs, got {sep!r}")
    check_rows_writable(embeddings, fmt, unnormalize)
    n, dims = len(words), embeddings.dims
    with atomic_output(file, fsync=fsync) as f:
        if with_dims:
            f.write(f"{n} {dims}\n".encode())
        for start in range(0, n, _WRITE_ROWS):
            block = words[start : start + _WRITE_ROWS]
            matrix = dense_matrix_with_norms(embeddings, unnormalize, start, start + len(block))
            lines = [w + sep + row for w, row in zip(block, format_rows(matrix), strict=True)] if dims else block
            f.write(("\n".join(lines) + "\n").encode("utf-8"))


def format_rows(matrix: npt.NDArray[np.float32]) -> list[str]:
    """Every row of ``matrix`` as space-separated :func:`format_f32` components.

    Same result as ``" ".join(map(format_f32, row))`` per row, about 1.25x
    faster: numpy's ``str`` of a ``float32`` already is the shortest
    round-trip decimal, so rows are joined from it directly and the
    trailing ``.0`` of whole numbers is removed by one regular-expression
    pass over the block; only rows where numpy chose an exponent (``1e-05``)
    go through :func:`format_f32`.

    Examples
    --------
    >>> format_rows(np.array([[1, -0.0, 0.25], [1e-5, 3e20, 10]], dtype=np.float32))
    ['1 -0 0.25', '0.00001 300000000000000000000 10']
    """
    rows = []
    for row in matrix:
        text = " ".join(map(str, row))
        if "e" in text:
            text = " ".join(map(format_f32, row))
        rows.append(text)
    if not rows:
        return rows
    return _POINT_ZERO.sub("", "\n".join(rows)).split("\n")


def _detect_text_dims(sample: bytes, path: str | None) -> bool:
    return dims_file_format(sample) == "text-dims"


def _detect_text(sample: bytes, path: str | None) -> bool:
    """A word followed by numbers on the first line (tried last: a "<rows> <dims>" line looks like that too)."""
    first = sample.split(b"\n", 1)[0]
    fields = first.split()
    return len(fields) >= 2 and all(RUST_F32.fullmatch(f) for f in fields[1:]) and b"\x00" not in first


register_format(
    "text-dims",
    description='text with a dims line (word2vec text, fastText .vec): "<rows> <dims>", then a word and dims numbers per line',
    extensions=(".vec", ".txt"),
    order=120,
    detector=_detect_text_dims,
    loader=load_text_dims,
    writer=write_text_dims,
    options=("normalize", "lossy", "limit", "progress"),
    mismatch=DIMS_MISMATCH,
)
register_format(
    "text",
    description="text without a header (GloVe): a word and its numbers per line",
    extensions=(".txt",),
    order=200,
    detector=_detect_text,
    loader=load_text,
    writer=write_text,
    options=("normalize", "lossy", "limit", "progress"),
    mismatch="the first line is not a word followed by numbers",
)
