#!/usr/bin/env python3
"""Write the small Tekken fixture from the real ``tekken_240718.json`` that mistral-common ships.

Run from the repository root (needs ``pip install mistral-common``)::

    python tests/data/models/tekken_make_fixtures.py

``tekken_small.json``: Mistral Nemo's Tekken tokenizer (mistral-common's
``mistral_common/data/tekken_240718.json``) cut to its first 1,500 ranked
tokens, with the pattern, the token entries (rank, base64 bytes, string)
exactly as the real file has them; written as a v7 file that lists its
special tokens (Tekkenizer's 20 defaults, then 4 ids left to
``<SPECIAL_i>`` fillers) and whose ``default_vocab_size`` keeps 1,400 of the
1,500 ranked tokens, so the cut Tekkenizer makes is exercised.
``tests/test_tekken.py`` checks that the file is this cut of the installed
real file, and reads it side by side with ``Tekkenizer``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
#: Ranked tokens kept in the file, of which ``default_vocab_size`` keeps KEPT.
RANKED = 1500
KEPT = 1400
SPECIALS = 24


def small_tekken(real: dict[str, Any]) -> dict[str, Any]:
    """The fixture's document from the real file's document."""
    from mistral_common.tokens.tokenizers.tekken import Tekkenizer

    specials = [dict(t) for t in Tekkenizer.DEPRECATED_SPECIAL_TOKENS]
    config = dict(real["config"], num_vocab_tokens=RANKED, default_vocab_size=SPECIALS + KEPT, default_num_special_tokens=SPECIALS, version="v7")
    return {"config": config, "vocab": real["vocab"][:RANKED], "special_tokens": specials}


def real_path(name: str = "tekken_240718.json") -> Path:
    import mistral_common

    return Path(mistral_common.__file__).parent / "data" / name


def main() -> None:
    real = json.loads(real_path().read_text(encoding="utf-8"))
    text = json.dumps(small_tekken(real), ensure_ascii=False, indent=None)
    (HERE / "tekken_small.json").write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
