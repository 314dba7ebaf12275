"""Text numbers near float32 rounding midpoints are read exactly without a slow path per value; long lines are rejected in one pass.

The vectorised parser reads float64 and decides only values near a float32
rounding midpoint exactly. Subnormal float32 values sit on a fixed grid of
2**-149; the whole range used to count as "near a tie", so a file of
subnormals took the slow path for every number. Ties themselves (a file of
``16777217`` or ``1.0000000596046448``) took ``exact_float32`` (``Fraction``
arithmetic) once per number, 2-6 s per MB: short decimals are now decided
all at once in float64 (``round_short_ties``), the rest once per distinct
token with Python ints (``round_float32_ties``); ``exact_float32`` stays the
reference and the fallback beyond the largest float32.
"""

from __future__ import annotations

import io
from decimal import Decimal, getcontext
from fractions import Fraction

import numpy as np
import pytest

import finalfusion.compat._floats as floats
import finalfusion.compat.text as text
from finalfusion import FormatError, limits
from finalfusion.compat import load_text_dims
from finalfusion.compat._floats import exact_float32, near_float32_tie, round_float32_ties, round_short_ties

getcontext().prec = 400


def _decimal(x: Fraction, digits: int) -> str:
    """``x`` (positive) as a decimal with ``digits`` significant digits, truncated."""
    d = Decimal(x.numerator) / Decimal(x.denominator)
    return f"{d:.{digits - 1}e}"


def _tokens() -> list[str]:
    """Subnormal and first-binade midpoints written with 9..60 digits, each just below, on and just above."""
    rng = np.random.default_rng(7)
    ks = [0, 1, 2, 3, 1000, (1 << 23) - 1, 1 << 23, (1 << 24) - 2, *rng.integers(0, 1 << 24, 40).tolist()]
    out = []
    for k in ks:
        mid = (Fraction(k) + Fraction(1, 2)) * Fraction(1, 2**149)
        for digits in (9, 17, 18, 20, 60):
            for nudge in (-1, 0, 1):
                x = mid * (1 + Fraction(nudge, 10 ** (digits + 2)))
                out.append(_decimal(x, digits))
                out.append("-" + _decimal(x, digits))
    return out


def _load(tokens: list[str], dims: int) -> np.ndarray:
    rows = len(tokens) // dims
    lines = [f"{rows} {dims}"] + [f"w{i} " + " ".join(tokens[i * dims : (i + 1) * dims]) for i in range(rows)]
    return np.asarray(load_text_dims(("\n".join(lines) + "\n").encode(), normalize=False).storage.matrix).ravel()


def test_subnormal_midpoints_round_like_rust() -> None:
    tokens = _tokens()
    tokens = tokens[: len(tokens) // 6 * 6]
    got = _load(tokens, 6)
    want = np.array([exact_float32(t.encode()) for t in tokens], dtype=np.float32)
    assert got.view(np.uint32).tolist() == want.view(np.uint32).tolist()


def _count(monkeypatch: pytest.MonkeyPatch) -> tuple[list[bytes], list[bytes]]:
    """The tokens handed to the per-token tie path and to the ``Fraction`` fallback, as the reader runs."""
    per_token: list[bytes] = []
    exact: list[bytes] = []
    real, real_exact = text.round_float32_ties, floats.exact_float32

    def counting(tokens: list[bytes], values: np.ndarray) -> np.ndarray:
        per_token.extend(tokens)
        return real(tokens, values)

    def counting_exact(token: bytes) -> np.float32:
        exact.append(token)
        return real_exact(token)

    monkeypatch.setattr(text, "round_float32_ties", counting)
    monkeypatch.setattr(floats, "exact_float32", counting_exact)
    return per_token, exact


def test_ordinary_subnormals_take_the_fast_path(monkeypatch: pytest.MonkeyPatch) -> None:
    per_token, exact = _count(monkeypatch)
    rng = np.random.default_rng(0)
    vals = (rng.random((400, 25)) * 2.0**-126).astype(np.float32)  # subnormals, shortest round-trip decimals
    got = _load([repr(float(v)) for v in vals.ravel()], 25)
    assert got.view(np.uint32).tolist() == vals.ravel().view(np.uint32).tolist()
    assert len(per_token) < vals.size // 100
    assert exact == []


@pytest.mark.parametrize(
    ("token", "expected", "per_token"),
    [
        ("16777217", 16777216.0, 0),  # 2**24 + 1: an integer tie, to even; decided in float64
        ("-8388609.5", -8388610.0, 0),  # a tie with a fraction, to even
        ("1.0000000596046448", 1.0000001192092896, 1),  # 17 digits: the float64 reading is on the tie, the decimal above it
        ("7.006492321624085e-46", 0.0, 1),  # just below the first subnormal midpoint (2**-150 = 7.00649232162408535...e-46)
        ("7.0064923216240854e-46", 1.401298464324817e-45, 1),  # just above it
        ("1.00000005960464477539062500000000000001e0", 1.0000001192092896, 1),
    ],
)
def test_a_file_of_one_tie_decides_it_once_per_block(monkeypatch: pytest.MonkeyPatch, token: str, expected: float, per_token: int) -> None:
    seen, exact = _count(monkeypatch)
    monkeypatch.setattr(text, "_BLOCK", 1 << 16)
    got = _load([token] * 20_000, 25)  # several blocks
    assert set(got.tolist()) == {expected}
    assert float(exact_float32(token.encode())) == expected
    assert len(seen) <= per_token * (20_000 * (len(token) + 1) // (1 << 16) + 2)  # once per block at most, not once per number
    assert per_token == 0 or seen
    assert exact == []


def _midpoint(bits: int) -> Fraction:
    lo, hi = np.array([bits, bits + 1], dtype=np.uint32).view(np.float32).tolist()
    return (Fraction(lo) + Fraction(hi)) / 2


def _digits(x: Fraction, n: int) -> tuple[int, int]:
    """``x`` (positive) truncated to ``n`` significant digits: ``(m, e)`` with ``m * 10**e <= x``."""
    e = len(str(x.numerator // x.denominator)) - n if x >= 1 else -n - len(str(x.denominator // x.numerator)) + 1
    while Fraction(10) ** (e + n) <= x:
        e += 1
    while Fraction(10) ** (e + n - 1) > x:
        e -= 1
    return int(x / Fraction(10) ** e), e


def _positional(m: int, e: int) -> str:
    if e >= 0:
        return str(m) + "0" * e
    s = str(m).rjust(-e + 1, "0")
    return s[:e] + "." + s[e:]


def _midpoint_tokens(n: int, seed: int) -> list[str]:
    """Random float32 midpoints (normal and subnormal) with 9-60 digits, truncated and one unit of the last digit either side."""
    rng = np.random.default_rng(seed)
    bits = np.concatenate([rng.integers(0, 0x7F7FFFFF, n - n // 4), rng.integers(0, 1 << 23, n // 4)])  # a quarter subnormal
    out = []
    for b, digits, sign in zip(bits.tolist(), rng.choice([9, 12, 15, 16, 17, 18, 19, 20, 25, 40, 60], n).tolist(), rng.integers(0, 2, n).tolist(), strict=True):
        m, e = _digits(_midpoint(b), digits)
        for nudge in (-1, 0, 1, 2):
            token = f"{m + nudge}e{e}" if (b + nudge) % 2 else _positional(m + nudge, e)
            out.append(("-" if sign else "") + token)
    return out


def test_midpoints_round_like_the_reference(monkeypatch: pytest.MonkeyPatch) -> None:
    seen, exact = _count(monkeypatch)
    tokens = _midpoint_tokens(1500, 11)
    want = np.array([exact_float32(t.encode()) for t in tokens], dtype=np.float32)
    got = _load(tokens, 6)
    assert got.view(np.uint32).tolist() == want.view(np.uint32).tolist()
    values = np.array([float(t) for t in tokens])
    ties = near_float32_tie(values)
    assert ties.sum() > len(tokens) // 3  # the test is about ties: most 16+ digit tokens are within the window
    assert len(seen) < ties.sum()  # short ties were decided in numpy
    assert len(set(seen)) == len(seen)  # each distinct tie once
    assert exact == []  # no Fraction arithmetic below the largest float32
    direct = round_float32_ties([t.encode() for t in tokens], values)
    assert direct.view(np.uint32).tolist() == want.view(np.uint32).tolist()


def test_short_ties_are_decided_in_float64() -> None:
    """Integers and short decimals whose digits float64 holds exactly, on, below and above the midpoints."""
    rng = np.random.default_rng(5)
    tokens = []
    for _ in range(3000):
        b = int(rng.integers(0x00800000, 0x7F000000))
        mid = _midpoint(b)
        for digits in (6, 9, 12, 15, 16):
            m, e = _digits(mid, digits)
            if e >= -22 and m + 2 < 2**53:
                tokens += [(m + nudge, e) for nudge in (-1, 0, 1, 2)]
    ints = [(m, 0) for m in (16777217, 16777219, 33554435, 2**40 + 2**16 * 3, 2**53 - 1, 8388609)]
    tokens += ints + [(m * 10 + 5, -1) for m in range(8388608, 8388708)] + [(m * 100 + 25, -2) for m in range(4194304, 4194354)]
    mant = np.array([float(m) for m, _ in tokens])
    scale = np.array([10.0 ** max(-e, 0) for _, e in tokens])
    mant *= np.array([10.0 ** max(e, 0) for _, e in tokens])
    text_tokens = [_positional(m, e).encode() for m, e in tokens]
    values = np.array([float(t) for t in text_tokens])
    keep = near_float32_tie(values) & (mant < 2**53)
    assert keep.sum() > 1000
    sign = np.where(rng.integers(0, 2, len(values)) == 1, -1.0, 1.0)
    got, done = round_short_ties(mant[keep], scale[keep], (values * sign)[keep])
    want = np.array([exact_float32(t) for t, k in zip(text_tokens, keep.tolist(), strict=True) if k], dtype=np.float32) * sign[keep].astype(np.float32)
    assert done.all()
    assert got.view(np.uint32).tolist() == want.view(np.uint32).tolist()


def test_ties_at_the_largest_float32_use_the_reference() -> None:
    """From the midpoint between the largest float32 and 2**128 on, Rust gives inf; below it, the largest float32.

    float64 rounds 3.4028235677973366e38 onto that midpoint, so casting its float64 reading gave inf (``exact_float32`` did too).
    """
    largest = float(np.finfo(np.float32).max)
    cases = {
        b"3.4028235677973366e38": largest,  # below the midpoint 340282356779733661637539395458142568448
        b"340282356779733661637539395458142568447": largest,
        b"340282356779733661637539395458142568448": np.inf,  # on it: to even, which is 2**128
        b"-3.40282356779733661637539395458142568449e38": -np.inf,
        b"-3.4028235677973362e38": -largest,
    }
    tokens = list(cases)
    values = np.array([float(t) for t in tokens])
    assert near_float32_tie(values).all()
    assert [float(exact_float32(t)) for t in tokens] == list(cases.values())
    assert round_float32_ties(tokens, values).tolist() == list(cases.values())
    assert _load(["3.4028235677973366e38", "-3.4028235677973362e38"], 2).tolist() == [largest, -largest]


def test_long_line_without_newline_is_rejected(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(limits, "MAX_LINE_BYTES", 1 << 20)
    reads = []

    class Counting(io.BytesIO):
        def read(self, n: int | None = -1) -> bytes:
            data = super().read(n)
            reads.append(len(data))
            return data

    with pytest.raises(FormatError, match="line too long"):
        text.read_text_rows(Counting(b"a" * (8 << 20)), "text", None, None, 0, False, None)
    assert sum(reads) <= (1 << 20) + 2 * text._BLOCK  # stops at the cap, not at the end of the input
