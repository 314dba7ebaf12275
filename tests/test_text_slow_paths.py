"""Text numbers in float32's subnormal range are read exactly without the slow exact path for every value; long lines are rejected in one pass.

The vectorised parser reads float64 and re-reads only values near a float32
rounding midpoint exactly (``exact_float32``). Subnormal float32 values sit
on a fixed grid of 2**-149; the whole range used to count as "near a tie",
so a file of subnormals took the slow path for every number.
"""

from __future__ import annotations

import io
from decimal import Decimal, getcontext
from fractions import Fraction

import numpy as np
import pytest

import finalfusion.compat.text as text
from finalfusion import FormatError, limits
from finalfusion.compat import load_text_dims
from finalfusion.compat._common import exact_float32

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


def test_ordinary_subnormals_take_the_fast_path(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []
    real = text.exact_float32

    def counting(token: bytes) -> np.float32:
        calls.append(token)
        return real(token)

    monkeypatch.setattr(text, "exact_float32", counting)
    rng = np.random.default_rng(0)
    vals = (rng.random((400, 25)) * 2.0**-126).astype(np.float32)  # subnormals, shortest round-trip decimals
    got = _load([repr(float(v)) for v in vals.ravel()], 25)
    assert got.view(np.uint32).tolist() == vals.ravel().view(np.uint32).tolist()
    assert len(calls) < vals.size // 100


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
