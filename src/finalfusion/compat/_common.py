"""Helpers shared by the readers and writers of foreign formats (docs/format.md §13).

* :func:`open_input` opens a path or binary file object for reading and
  transparently decompresses gzip (recognised by its magic bytes); it is
  ``finalfusion._source.open_stream``, like :func:`peek` and
  :func:`input_size` (every input goes through that one module).
* :func:`normalize_rows` (from :mod:`finalfusion.norms`) l2-normalises a
  matrix in place and returns the norms (zero rows stay zero);
  :func:`checked_norms` turns them into an ``NdNorms`` chunk or a
  :class:`FormatError` naming the word whose norm float32 cannot hold.
* :func:`decode_word` / :func:`check_writable_word` enforce what words a
  format can carry, on read and before a write.
* :func:`embeddings_from` builds :class:`~finalfusion.embeddings.Embeddings`
  the way finalfusion-python 0.7.1 and Rust do after a conversion;
  :func:`dense_matrix_with_norms` undoes the normalisation for writers.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from fractions import Fraction
from typing import IO

import numpy as np
import numpy.typing as npt

from finalfusion import limits
from finalfusion._binary import check_dims
from finalfusion._source import GZIP_MAGIC, input_size, peek
from finalfusion._source import open_stream as open_input
from finalfusion.embeddings import Embeddings
from finalfusion.errors import FormatError, NonFiniteError
from finalfusion.metadata import Metadata
from finalfusion.norms import Norms, first_invalid_norm, normalize_rows
from finalfusion.storage.ndarray import NdArray
from finalfusion.vocab.base import Vocab, build_index
from finalfusion.vocab.simple import SimpleVocab

__all__ = [
    "GZIP_MAGIC",
    "RowSink",
    "check_finite",
    "check_header_int",
    "check_rows_writable",
    "check_trailing",
    "check_writable_word",
    "check_writable_words",
    "checked_norms",
    "decode_word",
    "dense_matrix_with_norms",
    "embeddings_from",
    "input_size",
    "normalize_rows",
    "open_input",
    "peek",
    "read_dims_header",
    "refuse_nonfinite",
    "reuse_freed_memory",
    "simple_vocab",
]


def reuse_freed_memory() -> None:
    """Let the C allocator keep freed block-sized buffers instead of returning them to the OS.

    The block readers create a few MiB of temporary arrays per block. glibc's
    malloc serves such sizes with fresh ``mmap`` calls (or trims them off the
    heap) until it has seen a large block freed, so every block paid for
    page faults again -- about 40 % of the time of a large text conversion.
    Allocating and freeing one 16 MiB buffer raises glibc's dynamic
    thresholds once for the process; elsewhere this is a no-op.

    Examples
    --------
    >>> reuse_freed_memory()
    """
    global _THRESHOLD_RAISED
    if not _THRESHOLD_RAISED:
        scratch = np.empty(1 << 24, dtype=np.uint8)
        del scratch
        _THRESHOLD_RAISED = True


_THRESHOLD_RAISED = False


class RowSink:
    """A growing ``float32`` matrix for readers that learn the row count as they go.

    ``claimed`` rows are promised by a header; ``affordable`` is how many
    rows the input can hold at most (from its size) or ``None`` if unknown.
    Memory is preallocated for ``min(claimed, affordable)`` rows -- or at
    most about 64 MiB when the size is unknown -- and grows by doubling, so a
    header claiming 2^40 rows never allocates more than the data needs.
    Callers reserve only rows whose bytes they have already read.

    Examples
    --------
    >>> sink = RowSink(2, claimed=2**40, affordable=1)
    >>> sink.reserve(3)[:] = 1.0; sink.commit(3)
    >>> sink.finish().shape
    (3, 2)
    """

    def __init__(self, dims: int, claimed: int | None, affordable: int | None) -> None:
        self.dims = dims
        start = claimed if claimed is not None else 1 << 12
        # Unknown input size: start with at most about 64 MiB (no row at all if one row is larger) and
        # grow as rows are reserved, so a stream's header cannot make it allocate more than its data.
        cap = affordable if affordable is not None else (1 << 26) // max(4 * dims, 1)
        start = min(start, cap)
        # numpy < 1.23 allocates a (0, dims) array as if it had one row: build an empty one by reshaping.
        self.matrix = np.empty((start, dims), dtype=np.float32) if start > 0 else np.empty(0, dtype=np.float32).reshape(0, dims)
        self.rows = 0

    def fits(self, k: int) -> bool:
        """Whether ``k`` more rows fit without moving the matrix."""
        return self.rows + k <= self.matrix.shape[0]

    def reserve(self, k: int) -> npt.NDArray[np.float32]:
        """The next ``k`` rows to fill (the caller then calls :meth:`commit`)."""
        need = self.rows + k
        if need > self.matrix.shape[0]:
            grown = np.empty((max(need, 2 * self.matrix.shape[0]), self.dims), dtype=np.float32)
            grown[: self.rows] = self.matrix[: self.rows]
            self.matrix = grown
        return self.matrix[self.rows : need]

    def commit(self, k: int) -> None:
        self.rows += k

    def finish(self) -> npt.NDArray[np.float32]:
        """The filled rows (a copy only if more were allocated than filled)."""
        if self.rows == self.matrix.shape[0]:
            return self.matrix
        filled: npt.NDArray[np.float32] = self.matrix[: self.rows].copy()
        return filled


#: float64 units in the last place within which a parsed value counts as on a float32 tie (the
#: vectorised text parser's 17- and 18-digit mantissas carry a few units of error).
_TIE_ULPS = 16


def near_float32_tie(values: npt.NDArray[np.float64]) -> npt.NDArray[np.bool_]:
    """Where casting parsed ``float64`` values to ``float32`` may round differently from the decimals.

    A decimal read as ``float64`` and then cast rounds twice; the result
    differs from the correctly rounded ``float32`` (Rust's ``parse::<f32>``)
    only when the ``float64`` lies on or next to the midpoint between two
    ``float32`` values (subnormal ones included: there the midpoints are a
    fixed grid). Real files almost never have such values;
    :func:`exact_float32` re-reads them.

    Examples
    --------
    >>> near_float32_tie(np.array([1.0000000596046448, 1.0000000596046, 0.1, 0.0])).tolist()
    [True, False, False, False]
    >>> near_float32_tie(np.array([2.5 * 2.0**-149, 2.25 * 2.0**-149, 1e-40])).tolist()  # subnormals: only midpoints
    [True, False, False]
    """
    v = np.ascontiguousarray(values, dtype=np.float64)
    bits = v.view(np.uint64)
    low = bits & np.uint64((1 << 29) - 1)  # the bits a float32 drops
    low -= np.uint64((1 << 28) - _TIE_ULPS)  # wraps around below the window
    tie: npt.NDArray[np.bool_] = low <= np.uint64(2 * _TIE_ULPS)
    # Below 2**-125 (float32's subnormals and its first binade) float32 values are a fixed grid of
    # 2**-149, so the dropped bits above say nothing there: test the distance to the grid's midpoints
    # instead. (Flagging the whole range made a file of subnormals 200x slower to read.)
    small = np.flatnonzero(np.abs(v) < 2.0**-125)
    if len(small):
        scaled = np.abs(v[small]) * 2.0**149  # exact: a power-of-two scaling, below 2**24
        off = np.abs(scaled - np.floor(scaled) - 0.5)
        tie[small] = off <= scaled * (2 * _TIE_ULPS * 2.0**-52) + 2.0**-60
    found = np.flatnonzero(tie)
    if len(found):  # rare: drop zeros and non-finite values (a NaN payload can match the pattern)
        tie[found[(v[found] == 0) | ~np.isfinite(v[found])]] = False
    return tie


#: What Rust's ``parse::<f32>`` accepts (``float`` accepts more: ``1_000``, surrounding ``\v``).
RUST_F32 = re.compile(rb"[+-]?(?:(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|(?i:inf(?:inity)?|nan))")
#: The parts of a decimal :data:`RUST_F32` accepts: sign, integer digits, fraction digits, exponent.
_DECIMAL = re.compile(rb"([+-]?)([0-9]*)(?:\.([0-9]*))?(?:[eE]([+-]?)([0-9]+))?")
#: Significant digits kept for the exact comparison: a float32 midpoint has at most ~115, so the first
#: 200 digits and whether any later digit is nonzero decide the rounding.
_KEEP_DIGITS = 200


#: The midpoint between the largest float32 and 2**128: decimals from there on round to infinity.
_PAST_FLOAT32 = Fraction(2**128 - 2**103)


def _decimal_parts(token: bytes) -> tuple[bool, int, int] | None:
    """``token`` as ``(negative, digits, exponent)`` with value ``digits * 10**exponent`` (up to a sticky digit).

    ``None`` for zero and for exponents far outside float32 (``float`` rounds those right).
    """
    m = _DECIMAL.fullmatch(token)
    if m is None:
        raise ValueError(f"not a decimal: {token[:40]!r}")
    sign, whole, frac, exp_sign, exp_digits = m.groups(b"")
    digits = (whole + frac).lstrip(b"0")
    exp_text = exp_digits.lstrip(b"0")
    if not digits or len(exp_text) > 9:  # zero, or an exponent far outside float32 (float() gives 0 or inf)
        return None
    exp = (-int(exp_text or b"0") if exp_sign == b"-" else int(exp_text or b"0")) - len(frac)
    stripped = digits.rstrip(b"0")
    exp += len(digits) - len(stripped)
    if len(stripped) > _KEEP_DIGITS:  # keep 200 digits and a sticky 1 for the nonzero rest
        exp += len(stripped) - _KEEP_DIGITS - 1
        stripped = stripped[:_KEEP_DIGITS] + b"1"
    return sign == b"-", int(stripped), exp


def exact_float32(token: bytes) -> np.float32:
    """The ``float32`` nearest to the decimal ``token``, ties to even (as Rust's ``parse::<f32>``).

    ``token`` is a plain decimal (digits, optional sign, point and
    exponent); any number of digits works (beyond 200 significant digits
    only whether the rest is zero matters). This is the reference; the
    readers decide many values at once with :func:`round_float32_ties`.

    Examples
    --------
    >>> print(exact_float32(b"1.0000000596046448"))  # just above the midpoint between 1 and the next float32
    1.0000001
    >>> print(np.float32(float(b"1.0000000596046448")))  # rounding to float64 first lands on the midpoint
    1.0
    >>> float(exact_float32(b"16777217" + b"0" * 5000 + b"e-5000"))  # 2**24 + 1: a tie, to even
    16777216.0
    """
    parts = _decimal_parts(token)
    if parts is None:
        with np.errstate(over="ignore"):
            plain: np.float32 = np.float32(float(token))
        return plain
    negative, digits, exp = parts
    x = Fraction(digits) * (Fraction(10) ** exp)
    if negative:
        x = -x
    with np.errstate(over="ignore"):
        near: np.float32 = np.float32(float(x))
    if not np.isfinite(near):  # float64 may round up onto the midpoint above the largest float32: only from there on is it inf
        largest = np.finfo(np.float32).max
        return near if abs(x) >= _PAST_FLOAT32 else np.float32(-largest if negative else largest)
    best: np.float32 = near
    best_d = abs(Fraction(float(near)) - x)
    with np.errstate(over="ignore"):  # the neighbour of the largest float32 is inf: skipped below, not worth a warning
        neighbours = (np.float32(np.nextafter(near, np.float32(-np.inf))), np.float32(np.nextafter(near, np.float32(np.inf))))
    for c in neighbours:
        if not np.isfinite(c):
            continue
        d = abs(Fraction(float(c)) - x)
        if d < best_d or (d == best_d and int(c.view(np.uint32)) % 2 == 0):
            best, best_d = c, d
    return best


def _float32_midpoints(
    values: npt.NDArray[np.float64],
) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.float32], npt.NDArray[np.float64], npt.NDArray[np.bool_]]:
    """For ``|values|`` near a float32 midpoint: the float32 below and above it, the midpoint, and where that works.

    It does not work (``False``) beyond the largest float32 or where a value is a float32 itself.
    """
    a = np.abs(values)
    with np.errstate(over="ignore"):
        c = a.astype(np.float32)
        toward = np.where(a > c, np.float32(np.inf), np.float32(0))
        other = np.nextafter(c, toward.astype(np.float32))
    lo, hi = np.minimum(c, other), np.maximum(c, other)
    usable = np.isfinite(hi) & (a != c)
    with np.errstate(invalid="ignore", over="ignore"):
        mid = (lo.astype(np.float64) + hi.astype(np.float64)) * 0.5  # exact: two float32 neighbours
    return lo, hi, mid, usable


def _pick(lo: npt.NDArray[np.float32], hi: npt.NDArray[np.float32], side: npt.NDArray[np.int8], negative: npt.NDArray[np.bool_]) -> npt.NDArray[np.float32]:
    """``lo`` where ``side < 0``, ``hi`` where ``side > 0``, the even one of the two on the midpoint; signed."""
    even_hi = (hi.view(np.uint32) & np.uint32(1)) == 0
    out = np.where((side > 0) | ((side == 0) & even_hi), hi, lo)
    return np.where(negative, -out, out).astype(np.float32)


def _split(x: npt.NDArray[np.float64]) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    c = x * 134217729.0  # 2**27 + 1 (Veltkamp)
    hi = c - (c - x)
    return hi, x - hi


def round_short_ties(
    mantissas: npt.NDArray[np.float64], scales: npt.NDArray[np.float64], values: npt.NDArray[np.float64]
) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.bool_]]:
    """Correctly rounded float32 of ``±mantissas / scales`` near a float32 midpoint, all at once.

    ``mantissas`` are the decimal digits as an integer below 2**53 and
    ``scales`` a power of ten up to 10**22, both exact in float64;
    ``values`` is the float64 reading (its sign is the decimal's). Then
    ``mantissa - midpoint * scale`` is exact in float64 arithmetic (the
    product split by Dekker's two-product, the difference by Sterbenz's
    lemma), so the side of the midpoint is decided without Python ints.
    Returns the float32 values and where they were decided (the rest goes
    to :func:`round_float32_ties`).

    Examples
    --------
    >>> out, done = round_short_ties(np.array([16777217.0, 16777219.0, 83886085.0]), np.array([1.0, 1.0, 10.0]),
    ...                              np.array([16777217.0, 16777219.0, 8388608.5]))
    >>> out.tolist(), done.tolist()  # 2**24 + 1 and + 3 are ties: to even; 8388608.5 too
    ([16777216.0, 16777220.0, 8388608.0], [True, True, True])
    """
    lo, hi, mid, usable = _float32_midpoints(values)
    usable &= (mantissas < 2.0**53) & (scales <= 1e22) & (mantissas > 0)
    m = np.where(usable, mantissas, 1.0)
    s = np.where(usable, scales, 1.0)
    mid = np.where(usable, mid, 1.0)
    p = mid * s
    ah, al = _split(mid)
    bh, bl = _split(s)
    e = ((ah * bh - p) + ah * bl + al * bh) + al * bl  # mid * s == p + e exactly
    d = m - p  # exact: m and p are within a factor of two of each other
    side = (d > e).astype(np.int8) - (d < e).astype(np.int8)
    usable &= (m >= 0.5 * p) & (m <= 2.0 * p)
    return _pick(lo, hi, side, np.signbit(values)), usable


#: Exact powers of ten for the comparisons of :func:`round_float32_ties` (exponents of decimals near float32).
_POW10_INT = tuple(10**k for k in range(400))


def round_float32_ties(tokens: Sequence[bytes], values: npt.NDArray[np.float64]) -> npt.NDArray[np.float32]:
    """The float32 nearest each decimal of ``tokens`` (ties to even), given its float64 reading ``values``.

    Meant for decimals whose reading lies near a float32 midpoint (where
    :func:`near_float32_tie` says so): the midpoint is found with numpy and
    each decimal compared with it exactly in Python integers, which is much
    cheaper than :func:`exact_float32` (the fallback for what this cannot
    decide: values past the largest float32, absurd exponents). Callers
    pass each distinct token once.

    Examples
    --------
    >>> toks = [b"1.0000000596046448", b"16777217", b"-7.0064923216240854e-46", b"1.00000005960464477539062"]
    >>> round_float32_ties(toks, np.array([float(t) for t in toks])).tolist()
    [1.0000001192092896, 16777216.0, -1.401298464324817e-45, 1.0]
    """
    lo, hi, mid, usable = _float32_midpoints(values)  # the sign is the reading's (zeros are no ties)
    sides: list[int] = []
    rest: list[int] = []
    limit = len(_POW10_INT)
    for i, (token, ok, m) in enumerate(zip(tokens, usable.tolist(), mid.tolist(), strict=True)):
        digits = exp = 0
        if not ok:
            pass
        elif len(token) <= 100:  # digits, point and exponent taken apart with bytes methods (no regex)
            mantissa, _, exp_text = token.lower().partition(b"e")
            whole, _, frac = mantissa.lstrip(b"+-").partition(b".")
            digits = int(whole + frac)
            exp = (int(exp_text or b"0") if len(exp_text) <= 9 else limit) - len(frac)
        else:
            parts = _decimal_parts(token)
            if parts is not None:
                digits, exp = parts[1:]
        if digits == 0 or not -limit < exp < limit:
            rest.append(i)
            sides.append(0)
            continue
        num, den = m.as_integer_ratio()  # den is a power of two
        if exp >= 0:
            lhs, rhs = digits * _POW10_INT[exp] * den, num
        else:
            lhs, rhs = digits * den, num * _POW10_INT[-exp]
        sides.append((lhs > rhs) - (lhs < rhs))
    out = _pick(lo, hi, np.array(sides, dtype=np.int8), np.signbit(values))
    for i in rest:
        out[i] = exact_float32(tokens[i])
    return out


def check_finite(rows: npt.NDArray[np.float32], first: int, where: str) -> None:
    """Raise :class:`FormatError` naming the first row (numbered from ``first``) with a NaN or infinity.

    Examples
    --------
    >>> check_finite(np.array([[1.0], [np.nan]], dtype=np.float32), 5, "text line")
    Traceback (most recent call last):
    ...
    finalfusion.errors.FormatError: text line 6: vector has a NaN or infinite component: expected finite numbers, found [nan]
    """
    if rows.size and not np.isfinite(rows).all():
        bad = int(np.flatnonzero(~np.isfinite(rows).all(axis=1))[0])
        raise FormatError(f"{where} {first + bad}: vector has a NaN or infinite component", expected="finite numbers", found=rows[bad].tolist()[:10])


def decode_word(raw: bytes, lossy: bool, where: str, offset: int | None = None) -> str:
    """Decode a word's UTF-8 bytes.

    Parameters
    ----------
    raw
        The word's bytes.
    lossy
        Replace invalid sequences with U+FFFD instead of failing.
    where
        The format and record or line, e.g. ``"word2vec record 2"``; named in the error.
    offset
        Absolute byte offset of ``raw`` in the (decompressed) input, if known.

    Raises
    ------
    FormatError
        On invalid UTF-8 unless ``lossy``.

    Examples
    --------
    >>> decode_word(b"zee\\xbfn", True, "word2vec record 2")
    'zee\\ufffdn'
    >>> decode_word(b"zee\\xbfn", False, "word2vec record 2", offset=23)
    Traceback (most recent call last):
    ...
    finalfusion.errors.FormatError: word2vec record 2: invalid UTF-8 in word: expected UTF-8, found b'zee\\xbfn' (at byte offset 26)
    """
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        if lossy:
            return raw.decode("utf-8", errors="replace")
        at = None if offset is None else offset + exc.start
        raise FormatError("invalid UTF-8 in word", offset=at, chunk=where, expected="UTF-8", found=raw) from None


#: Characters that separate fields in the word2vec and text formats (Rust splits on these; words cannot contain them).
_SEPARATORS = frozenset(" \t\n\r\f\v")


def check_writable_word(word: str, fmt: str) -> None:
    """Raise ``ValueError`` if ``word`` cannot be written in format ``fmt`` and read back unchanged.

    The word2vec and text formats separate fields by ASCII whitespace, so a
    word must be non-empty and contain no ASCII whitespace (or NUL). Other
    whitespace (U+00A0, U+3000 ...) is part of the word: finalfusion-rust's
    text reader and ours split on ASCII whitespace only. word2vec readers
    (finalfusion-rust's ``trim``, ours) also trim each word's edges of any
    Unicode whitespace, so in ``word2vec`` a word must not start or end
    with whitespace.

    Examples
    --------
    >>> check_writable_word("Berlin", "word2vec")
    >>> check_writable_word("New\u00a0York", "text")
    >>> check_writable_word("New York", "text")
    Traceback (most recent call last):
    ...
    ValueError: text cannot represent the word 'New York': it contains ASCII whitespace
    >>> check_writable_word("\u3000edge", "word2vec")
    Traceback (most recent call last):
    ...
    ValueError: word2vec cannot represent the word '\u3000edge': it starts or ends with whitespace (readers trim it)
    """
    if not isinstance(word, str):
        raise TypeError(f"words must be str, got {type(word).__name__}: {word!r}")
    if not word:
        raise ValueError(f"{fmt} cannot represent the empty word")
    if any(c in _SEPARATORS for c in word):
        raise ValueError(f"{fmt} cannot represent the word {word!r}: it contains ASCII whitespace")
    if "\x00" in word:
        raise ValueError(f"{fmt} cannot represent the word {word!r}: it contains a NUL character")
    if fmt == "word2vec" and (word[0].isspace() or word[-1].isspace()):
        raise ValueError(f"{fmt} cannot represent the word {word!r}: it starts or ends with whitespace (readers trim it)")


def check_writable_words(words: Sequence[str], fmt: str) -> None:
    """:func:`check_writable_word` for every word, fast for the common case of plain words.

    Examples
    --------
    >>> check_writable_words(["Berlin", "Zürich"], "text")
    >>> check_writable_words(["Berlin", ""], "text")
    Traceback (most recent call last):
    ...
    ValueError: text cannot represent the empty word
    """
    joined = "".join(words)
    if all(words) and joined.isprintable() and not any(c.isspace() for c in joined):
        return
    for w in words:
        check_writable_word(w, fmt)


def simple_vocab(words: list[str], where: str, first: int = 1) -> SimpleVocab:
    """A :class:`SimpleVocab` of ``words``; a duplicate word is a :class:`FormatError`.

    ``where`` names the unit of the input (e.g. ``"word2vec record"``) and
    ``first`` the number of the first word's unit, so the error can say
    which record or line repeats which.

    Examples
    --------
    >>> simple_vocab(["a", "b", "a"], "text line")
    Traceback (most recent call last):
    ...
    finalfusion.errors.FormatError: text: text line 3 repeats the word 'a' of line 1: expected unique words, found a
    """
    try:
        index = build_index(words)
    except ValueError:
        seen: dict[str, int] = {}
        for i, w in enumerate(words):
            if w in seen:
                raise FormatError(
                    f"{where} {first + i} repeats the word {w!r} of {where.split()[-1]} {first + seen[w]}",
                    chunk=where.split()[0],
                    expected="unique words",
                    found=w,
                ) from None
            seen[w] = i
        raise
    return SimpleVocab(words, index)


def embeddings_from(
    words: list[str],
    matrix: npt.NDArray[np.float32],
    normalize: bool,
    metadata: Metadata | None = None,
    vocab: Vocab | None = None,
    where: str = "input word",
    first: int = 1,
) -> Embeddings:
    """Embeddings from a word list and its matrix, normalised like the converters of 0.7.1 and Rust.

    Parameters
    ----------
    words
        The known words (ignored when ``vocab`` is given).
    matrix
        ``float32`` matrix; with ``normalize`` its first ``len(words)`` rows
        are l2-normalised in place and their norms kept in an ``NdNorms`` chunk
        (subword rows, if any, stay as they are).
    normalize
        Whether to normalise (the finalfusion-python 0.7.1 default) or keep the rows as read, without norms.
    metadata, vocab
        Optional metadata chunk and vocabulary (default: a :class:`SimpleVocab` of ``words``).
    where, first
        Unit of the input and number of the first word's unit, for errors
        about duplicate words (see :func:`simple_vocab`).

    Examples
    --------
    >>> import numpy as np
    >>> emb = embeddings_from(["a", "b"], np.array([[3, 4], [0, 0]], dtype=np.float32), True)
    >>> emb["a"].tolist(), emb.norms.norms.tolist()
    ([0.6000000238418579, 0.800000011920929], [5.0, 0.0])
    """
    if vocab is None:
        vocab = simple_vocab(words, where, first)
    norms = None
    if normalize:
        n = len(vocab)
        norms = checked_norms(matrix[:n] if matrix.shape[0] != n else matrix, vocab.words, where, first)
    return Embeddings(NdArray(matrix), vocab, norms=norms, metadata=metadata)


def checked_norms(matrix: npt.NDArray[np.float32], words: Sequence[str], where: str = "input word", first: int = 1) -> Norms:
    """l2-normalise the word rows ``matrix`` in place (:func:`normalize_rows`) and return their ``NdNorms`` chunk.

    Raises
    ------
    FormatError
        If a row's norm is not a finite ``float32`` -- a NaN or infinite
        component, or a length beyond float32's range (3.4e38) --, naming
        the word and its unit (``where`` numbered from ``first``): such a
        row cannot be normalised with its norm kept, and nothing could
        multiply it back. ``normalize=False`` keeps such rows as they are.

    Examples
    --------
    >>> m = np.array([[3, 4], [3e38, 3e38]], dtype=np.float32)
    >>> checked_norms(m, ["a", "b"], "text line")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    finalfusion.errors.FormatError: text: line 2 (word 'b'): the vector's l2 norm is not a finite float32...: expected a norm up to 3.4028235e+38, found inf
    """
    norms = normalize_rows(matrix)
    bad = first_invalid_norm(norms)
    if bad is not None:
        unit = where.split()[-1]
        raise FormatError(
            f"{unit} {first + bad} (word {words[bad]!r}): the vector's l2 norm is not a finite float32, so it cannot be kept as a norm "
            "(load with normalize=False to keep the vectors as they are)",
            chunk=where.split()[0],
            expected=f"a norm up to {float(np.finfo(np.float32).max):.8g}",
            found=float(norms[bad]),
        )
    return Norms(norms)


#: Rows checked at a time by :func:`check_rows_writable`.
_CHECK_ROWS = 1 << 14


def check_rows_writable(
    embeddings: Embeddings, fmt: str, unnormalize: bool = False, words_only: bool = True, dtype: str = "float32", norm_bound: bool = True
) -> None:
    """Raise :class:`~finalfusion.errors.NonFiniteError` if a row to be written has a NaN or infinite value.

    The text, word2vec and floret readers refuse such values, so their
    writers call this before writing anything. The rows are those a writer
    writes: the word rows (``words_only``) or all storage rows, times
    their norms with ``unnormalize`` (a finite row times a finite norm can
    still overflow float32), as the format stores them (``dtype``:
    ``"float16"`` for half-precision tables, where values beyond 65504
    become infinite). With ``norm_bound`` (for formats whose reader
    normalises) a row whose l2 norm is beyond float32's range is refused
    too. The error names the word (or row), its row and the first values.

    Examples
    --------
    >>> emb = embeddings_from(["a", "b"], np.array([[1, 2], [3e38, 0.0]], dtype=np.float32), normalize=False)
    >>> check_rows_writable(emb, "text")
    >>> emb.norms = Norms([1.0, 2.0])
    >>> check_rows_writable(emb, "text", unnormalize=True)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    finalfusion.errors.NonFiniteError: text cannot represent the vector of the word 'b' (row 1): ... (after multiplying its norm 2.0 back): [inf, 0.0]
    """
    storage = embeddings.storage
    n = len(embeddings.vocab) if words_only else storage.shape[0]
    norms = embeddings.norms.norms if unnormalize and words_only and embeddings.norms is not None else None
    for lo in range(0, n, _CHECK_ROWS):
        hi = min(n, lo + _CHECK_ROWS)
        block = storage.matrix[lo:hi] if isinstance(storage, NdArray) else np.asarray(storage.rows(np.arange(lo, hi)), dtype=np.float32)
        if norms is not None:
            with np.errstate(over="ignore", invalid="ignore"):
                block = block * norms[lo:hi, None]
        refuse_nonfinite(block, embeddings.vocab.words, fmt, lo, None if norms is None else norms[lo:hi], dtype, norm_bound)


def refuse_nonfinite(
    rows: npt.NDArray[np.float32],
    words: Sequence[str],
    fmt: str,
    first: int = 0,
    norms: npt.NDArray[np.float32] | None = None,
    dtype: str = "float32",
    norm_bound: bool = True,
) -> None:
    """Raise :class:`~finalfusion.errors.NonFiniteError` naming the first row of ``rows`` with a NaN or infinity.

    ``rows[0]`` is row ``first``; rows past ``words`` are subword rows.
    ``norms`` (of ``rows``), if given, were multiplied into them. With
    ``dtype="float16"`` values that become infinite in float16 count too.
    With ``norm_bound``, a finite row whose l2 norm is beyond float32's
    range is refused as well: a reader that normalises could not keep its
    norm.

    Examples
    --------
    >>> refuse_nonfinite(np.ones((2, 2), dtype=np.float32), ["a", "b"], "fastText")
    >>> refuse_nonfinite(np.array([[1, np.nan]], dtype=np.float32), ["a", "b"], "fastText", first=1)
    Traceback (most recent call last):
    ...
    finalfusion.errors.NonFiniteError: fastText cannot represent the vector of the word 'b' (row 1): it has a NaN or infinite value: [1.0, nan]
    """
    stored = rows
    if dtype != "float32":
        with np.errstate(over="ignore", invalid="ignore"):
            stored = rows.astype(dtype)
    ok = np.isfinite(stored).all(axis=1)
    if bool(ok.all()):
        if norm_bound:
            _refuse_overflowing_norm(rows, words, fmt, first, norms)
        return
    j = int(np.argmin(ok))
    i = first + j
    what = f"the word {words[i]!r}" if i < len(words) else "a subword row"
    after = f" (after multiplying its norm {float(norms[j])!r} back)" if norms is not None else ""
    kind = "" if dtype == "float32" else f" in {dtype}"
    raise NonFiniteError(f"{fmt} cannot represent the vector of {what} (row {i}): it has a NaN or infinite value{kind}{after}: {rows[j].tolist()[:10]}")


def _refuse_overflowing_norm(rows: npt.NDArray[np.float32], words: Sequence[str], fmt: str, first: int, norms: npt.NDArray[np.float32] | None) -> None:
    """Raise :class:`~finalfusion.errors.NonFiniteError` for the first finite row whose l2 norm float32 cannot hold.

    The readers refuse such a row with ``normalize=True`` (its norm cannot
    be kept), so a file holding one would not read back with the defaults.
    Only rows whose float32 sum of squares overflows are measured again in
    float64, so ordinary rows cost one pass.
    """
    with np.errstate(over="ignore", invalid="ignore"):
        squares = np.einsum("ij,ij->i", rows, rows)
    suspect = np.flatnonzero(~np.isfinite(squares))
    if not len(suspect):
        return
    wide = rows[suspect].astype(np.float64)
    exact = np.sqrt(np.einsum("ij,ij->i", wide, wide))
    over = np.flatnonzero(exact > float(np.finfo(np.float32).max))
    if not len(over):
        return
    j = int(suspect[over[0]])
    i = first + j
    what = f"the word {words[i]!r}" if i < len(words) else "a subword row"
    after = f" (after multiplying its norm {float(norms[j])!r} back)" if norms is not None else ""
    raise NonFiniteError(
        f"{fmt} cannot represent the vector of {what} (row {i}): its l2 norm {float(exact[over[0]]):.8g} is beyond float32's range "
        f"(3.4028235e+38), so the file would not read back with normalize=True{after}: {rows[j].tolist()[:10]}"
    )


def dense_matrix_with_norms(emb: Embeddings, unnormalize: bool = True, start: int = 0, stop: int | None = None) -> npt.NDArray[np.float32]:
    """The word rows of ``emb`` as a dense ``float32`` matrix, norms multiplied back.

    Only the ``len(emb.vocab)`` word rows are returned (subword rows are
    dropped); works on dense and quantized storage. Without a norms chunk,
    or with ``unnormalize=False``, the rows are returned as stored. The
    result never shares memory with the embeddings. ``start`` and ``stop``
    select a range of words (writers go block by block to bound memory).

    Examples
    --------
    >>> import numpy as np
    >>> emb = embeddings_from(["a"], np.array([[3, 4]], dtype=np.float32), True)
    >>> dense_matrix_with_norms(emb).tolist()
    [[3.0, 4.0]]
    """
    n = len(emb.vocab)
    stop = n if stop is None else min(stop, n)
    storage = emb.storage
    if isinstance(storage, NdArray):
        matrix = np.array(storage.matrix[start:stop], dtype=np.float32, order="C")
    else:
        matrix = np.ascontiguousarray(storage.rows(np.arange(start, stop)), dtype=np.float32)
    if unnormalize and emb.norms is not None:
        matrix *= emb.norms.norms[start:stop, None]
    return matrix


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


def check_limit(limit: int | None) -> None:
    """Validate a reader's ``limit`` argument.

    Examples
    --------
    >>> check_limit(None); check_limit(10)
    >>> check_limit(-1)
    Traceback (most recent call last):
    ...
    ValueError: limit must be a non-negative int or None, got -1
    """
    value: object = limit  # callers may pass anything
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
        raise ValueError(f"limit must be a non-negative int or None, got {limit!r}")


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
