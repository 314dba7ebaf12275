"""Exact float32 parsing: a decimal rounds once to the nearest float32, ties to even, as Rust's ``parse::<f32>``.

The readers' vectorised paths are checked against this reference in
``test_ties.py`` and ``test_text_slow_paths.py``; here the reference itself
at the edges of its input and of the float32 range.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from finalfusion.compat._floats import exact_float32


@pytest.mark.parametrize("token", [b"abc", b"1.2.3", b"--1", b"1e"])
def test_exact_float32_refuses_what_is_not_a_decimal(token: bytes) -> None:
    with pytest.raises(ValueError, match="not a decimal"):
        exact_float32(token)


@pytest.mark.parametrize(
    ("token", "expected"),
    [
        (b"0", 0.0),
        (b"-0.000", -0.0),
        (b"1e-999999999999", 0.0),
        (b"1e999999999999", np.inf),
        (b"-1e999999999999", -np.inf),
        (b"3.40282356e38", np.finfo(np.float32).max),  # just below the overflow threshold: the largest float32
        (b"340282356779733661637539395458142568448", np.inf),  # exactly the midpoint to 2**128: a tie, rounds to even (inf)
        (b"3.4028235677973366e38", np.finfo(np.float32).max),  # float64 rounds it onto that midpoint; the decimal is below it
        (b"0.1", np.float32(0.1)),
    ],
)
def test_exact_float32_at_the_edges_of_the_range_keeps_value_and_sign_without_warnings(token: bytes, expected: float) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no RuntimeWarning from numpy at the edge of the float32 range
        value = exact_float32(token)
    assert value == np.float32(expected)
    assert np.signbit(value) == np.signbit(np.float32(expected))
