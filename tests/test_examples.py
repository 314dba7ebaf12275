"""The example programs in examples/ run as documented."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import finalfusion

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


@pytest.mark.parametrize("method", ["spawn", "forkserver"])
def test_process_pool_example_runs_under_spawn(method: str) -> None:
    # As a script, as the README shows it: spawned workers re-import the script as __mp_main__ and find `vectors` there.
    env = {**os.environ, "PYTHONPATH": str(Path(finalfusion.__file__).parents[1])}
    done = subprocess.run(
        [sys.executable, "process_pool.py", "sample.fifu", method], cwd=EXAMPLES, capture_output=True, text=True, timeout=300, check=False, env=env
    )
    assert done.returncode == 0, done.stderr
    emb = finalfusion.load_finalfusion(EXAMPLES / "sample.fifu")
    words = emb.vocab.words
    batches = [[*words[i : i + 16], "berliner", "Donaudampfschiff"] for i in range(0, len(words), 16)]
    expected = np.concatenate([emb.embedding_batch(b)[0] for b in batches])
    assert done.stdout.strip() == f"{len(batches)} batches, {len(expected)} vectors, checksum {float(expected.sum(dtype=np.float64))!r}"
