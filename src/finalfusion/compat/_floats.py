"""Exact float32 parsing: decimals rounded once, to the nearest float32, ties to even (as Rust's ``parse::<f32>``).

The text readers parse numbers through ``float64`` (vectorised, or Python's
``float``) and cast; that rounds twice, which differs from a correct
rounding only next to a float32 midpoint. :func:`near_float32_tie` finds
those values, :func:`round_short_ties` decides short decimals all at once in
float64 arithmetic, :func:`round_float32_ties` the rest with Python
integers, and :func:`exact_float32` is the reference for any decimal.
:data:`RUST_F32` is the number grammar Rust accepts.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from fractions import Fraction

import numpy as np
import numpy.typing as npt

__all__ = ["RUST_F32", "exact_float32", "near_float32_tie", "round_float32_ties", "round_short_ties"]


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
