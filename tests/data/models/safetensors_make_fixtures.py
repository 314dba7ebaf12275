#!/usr/bin/env python3
"""Write the golden safetensors fixtures with the real ``safetensors`` and ``tokenizers`` libraries.

Run from the repository root::

    python tests/data/models/safetensors_make_fixtures.py

* ``safetensors_tokenizer.json``: a byte-pair tokenizer trained by ``tokenizers`` on a few
  lines of German and Russian (vocabulary of ~60 tokens, ``[UNK]`` special);
* ``safetensors_tiny.safetensors``: a BF16 ``model.embed_tokens.weight`` table with 8 rows more
  than the tokenizer has tokens (padding, as in real checkpoints) plus an unrelated tensor;
* ``safetensors_expected.json``: the tokens, the table rows the loader must return, and the
  vectors of a few unknown words (the normalised sum of the rows of the ids ``tokenizers`` returns).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import safetensors
import tokenizers

HERE = Path(__file__).resolve().parent
LINES = ["das haus ist groß und das dach ist rot", "мир дом кот собака дом мир", "häuser dächer hausdach rotes haus"] * 20


def main() -> None:
    tok = tokenizers.Tokenizer(tokenizers.models.BPE(unk_token="[UNK]"))
    tok.pre_tokenizer = tokenizers.pre_tokenizers.Whitespace()
    tok.train_from_iterator(LINES, tokenizers.trainers.BpeTrainer(vocab_size=60, special_tokens=["[UNK]"], show_progress=False))
    text = tok.to_str()
    (HERE / "safetensors_tokenizer.json").write_text(text, encoding="utf-8")
    vocab = tok.get_vocab(with_added_tokens=True)
    tokens = [""] * len(vocab)
    for t, i in vocab.items():
        tokens[i] = t
    rng = np.random.default_rng(14)
    table = rng.standard_normal((len(tokens) + 8, 4)).astype(np.float32)
    bits = np.ascontiguousarray((table.view(np.uint32) >> 16).astype("<u2"))
    table = (bits.astype(np.uint32) << 16).view(np.float32)  # what BF16 holds
    norm = np.ones(4, dtype=np.float32)
    specs = {
        "model.embed_tokens.weight": safetensors.TensorSpec(dtype="bfloat16", shape=list(table.shape), data_ptr=bits.ctypes.data, data_len=bits.nbytes),
        "model.norm.weight": safetensors.TensorSpec(dtype="float32", shape=[4], data_ptr=norm.ctypes.data, data_len=norm.nbytes),
    }
    safetensors.serialize_file(specs, str(HERE / "safetensors_tiny.safetensors"))
    unknown = {}
    for word in ("dachhaus", "häusern", "собаки", "Xdach"):
        ids = [i for i in tok.encode(word, add_special_tokens=False).ids if i != vocab["[UNK]"]]
        vec = table[ids].sum(axis=0)
        unknown[word] = (vec / np.linalg.norm(vec)).tolist()
    expected = {"tokens": tokens, "table": table[: len(tokens)].tolist(), "padding_rows": 8, "unknown": unknown}
    (HERE / "safetensors_expected.json").write_text(json.dumps(expected, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
