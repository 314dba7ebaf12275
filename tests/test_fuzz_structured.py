"""The fuzzer's structure-aware generators for issue 13's classes: hostile TOML, tie-heavy files, huge dims.

Each generator must produce inputs that end in a result or a FinalfusionError
under the fuzzer's address-space limit (on the code before the fixes, the
same inputs raised RecursionError or allocated gigabytes).
"""

from __future__ import annotations

import random

import pytest

from conftest import load_fuzz
from finalfusion import load_metadata
from finalfusion.metadata import Metadata

fuzz = load_fuzz()


def check(reader: str, data: bytes) -> None:
    with fuzz.address_space_limit(1024):
        out = fuzz.run_one(fuzz.READERS[reader], data)
    assert out["status"] in ("ok", "error"), out.get("tb", out)


@pytest.mark.parametrize("seed", range(40))
def test_hostile_toml_in_a_finalfusion_file_and_alone(seed: int) -> None:
    rng = random.Random(seed)
    toml = fuzz.hostile_toml(rng)
    base = fuzz.seed_inputs("finalfusion")[seed % len(fuzz.seed_inputs("finalfusion"))]
    check("finalfusion", fuzz._with_metadata(base, toml))
    with fuzz.address_space_limit(1024):
        out = fuzz.run_one(lambda data: Metadata.from_toml(data), toml)
    assert out["status"] in ("ok", "error"), out.get("tb", out)


def test_with_metadata_builds_a_valid_file() -> None:
    base = fuzz.seed_inputs("finalfusion")[0]
    assert load_metadata(fuzz._with_metadata(base, b'corpus = "x"')) == {"corpus": "x"}


@pytest.mark.parametrize("seed", range(12))
def test_tie_heavy_files_answer_zero_queries_in_word_order(seed: int) -> None:
    # exercise() checks that a zero query returns words in code-point order
    check("finalfusion", fuzz.tie_heavy_fifu(random.Random(seed)))


@pytest.mark.parametrize("seed", range(200))
def test_mutations_with_the_new_operators(seed: int) -> None:
    rng = random.Random(seed)
    seeds = fuzz.seed_inputs("finalfusion")
    check("finalfusion", fuzz.mutate(rng.choice(seeds), rng, seeds))
