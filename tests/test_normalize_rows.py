"""``finalfusion.norms.normalize_rows``: what it accepts (the converters normalise through it)."""

from __future__ import annotations

import numpy as np
import pytest

from finalfusion.norms import normalize_rows


def test_normalize_rows_refuses_anything_but_a_2d_float32_matrix() -> None:
    with pytest.raises(ValueError, match="expected a 2-D float32 matrix, got 1-D float32"):
        normalize_rows(np.ones(3, dtype=np.float32))
    with pytest.raises(ValueError, match="expected a 2-D float32 matrix, got 2-D float64"):
        normalize_rows(np.ones((2, 2)))
