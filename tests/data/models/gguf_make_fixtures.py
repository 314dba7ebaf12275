"""Regenerate the small GGUF golden files and gguf_expected.json (run from this directory).

Needs the interop extra (gguf, sentencepiece, tokenizers). The files are written by gguf-py's
GGUFWriter; big-endian ones converted by gguf-py's own gguf_convert_endian. The expected rows are
gguf-py's GGUFReader + gguf.quants.dequantize; the expected unknown-word vectors are the l2-normalised
sums of the rows of the ids the real tokenizer (sentencepiece / tokenizers, on the model the file was
made from) returns, with control/unknown/unused ids dropped.

    python gguf_make_fixtures.py
"""

from __future__ import annotations

import builtins
import hashlib
import io
import json
import shutil
from pathlib import Path

import gguf
import numpy as np
import sentencepiece as spm
from gguf.scripts import gguf_convert_endian
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

HERE = Path(__file__).resolve().parent
CORPUS = ["the quick brown fox jumps over the lazy dog", "Москва большой город", "东京 大阪 京都", "jumping foxes and lazy dogs"] * 30
WORDS = ["foxes", "quickly", "Москвы", "京都市", "dogs🙂", "zebra"]


def rule(matrix: np.ndarray, ids: list[int], skip: set[int]) -> list[float] | None:
    kept = [i for i in ids if i not in skip]
    if not kept:
        return None
    v = matrix[kept].astype(np.float64).sum(axis=0)
    return (v / np.linalg.norm(v)).astype(np.float32).tolist()


def write(path: Path, tokens: list[str], raw: np.ndarray, qtype: str, kv: dict) -> np.ndarray:
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_name(path.stem)
    w.add_token_list(tokens)
    for key, value in kv.items():
        getattr(w, key)(value)
    w.add_tensor("token_embd.weight", raw, raw_dtype=gguf.GGMLQuantizationType[qtype])
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    t = gguf.GGUFReader(str(path)).get_tensor(0)
    return gguf.quants.dequantize(t.data, t.tensor_type).reshape(len(tokens), -1)


def case(path: Path, tokens: list[str], rows: np.ndarray, qtype: str, order: str, **extra: object) -> dict:
    """Small tables verbatim; every table as the SHA-256 of its little-endian float32 bytes."""
    out = {"tokens": tokens, "type": qtype, "byte_order": order, "shape": list(rows.shape), "sha256": hashlib.sha256(rows.astype("<f4").tobytes()).hexdigest()}
    if rows.size <= 256:
        out["rows"] = rows.tolist()
    return {path.name: {**out, **extra}}


def main() -> None:
    rng = np.random.default_rng(2024)
    expected: dict = {}

    # llama (SentencePiece BPE) vocabulary, F16 table.
    buf = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(CORPUS), model_writer=buf, model_type="bpe", vocab_size=60, minloglevel=2, num_threads=1)
    sp = spm.SentencePieceProcessor(model_proto=buf.getvalue())
    n = sp.GetPieceSize()
    tokens = [sp.IdToPiece(i) for i in range(n)]
    types = [2 if sp.IsUnknown(i) else 3 if sp.IsControl(i) else 1 for i in range(n)]
    kv = {
        "add_tokenizer_model": "llama",
        "add_token_scores": [sp.GetScore(i) for i in range(n)],
        "add_token_types": types,
        "add_unk_token_id": sp.unk_id(),
        "add_bos_token_id": sp.bos_id(),
        "add_eos_token_id": sp.eos_id(),
    }
    path = HERE / "gguf_llama_f16.gguf"
    rows = write(path, tokens, rng.standard_normal((n, 8)).astype(np.float16), "F16", kv)
    skip = {i for i in range(n) if types[i] != 1}
    unknown = {w: rule(rows, sp.encode(w), skip) for w in WORDS if w not in tokens}
    expected.update(case(path, tokens, rows, "F16", "little", tokenizer="sentencepiece", unknown={k: v for k, v in unknown.items() if v}))

    # Plain token list, Q8_0 and (big-endian) Q4_0 tables.
    plain = [f"w{i}" for i in range(6)]
    table = rng.standard_normal((6, 32)).astype(np.float32)
    for qtype in ("Q8_0", "Q4_0"):
        path = HERE / f"gguf_plain_{qtype.lower()}.gguf"
        rows = write(path, plain, gguf.quants.quantize(table, gguf.GGMLQuantizationType[qtype]), qtype, {"add_tokenizer_model": "none"})
        expected.update(case(path, plain, rows, qtype, "little"))
    big = HERE / "gguf_plain_q4_0_be.gguf"
    shutil.copy(HERE / "gguf_plain_q4_0.gguf", big)
    saved = builtins.input
    builtins.input = lambda *_: "YES"
    try:
        gguf_convert_endian.convert_byteorder(gguf.GGUFReader(str(big), "r+"), type("A", (), {"order": "big", "dry_run": False})())
    finally:
        builtins.input = saved
    expected[big.name] = dict(expected["gguf_plain_q4_0.gguf"], byte_order="big")
    (HERE / "gguf_plain_q4_0.gguf").unlink()
    del expected["gguf_plain_q4_0.gguf"]

    # gpt2 (byte-level BPE) vocabulary, BF16 table.
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=280, special_tokens=["<|endoftext|>"], initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(CORPUS, trainer=trainer)
    doc = json.loads(tok.to_str())
    vocab = doc["model"]["vocab"]
    tokens = sorted(vocab, key=vocab.__getitem__)
    merges = [m if isinstance(m, str) else " ".join(m) for m in doc["model"]["merges"]]
    types = [3 if t == "<|endoftext|>" else 1 for t in tokens]
    path = HERE / "gguf_gpt2_bf16.gguf"
    raw = rng.standard_normal((len(tokens), 4)).astype(np.float32)
    raw16 = (raw.view(np.uint32) >> 16).astype(np.uint16)
    rows = write(path, tokens, raw16, "BF16", {"add_tokenizer_model": "gpt2", "add_token_merges": merges, "add_token_types": types})
    skip = {tokens.index("<|endoftext|>")}
    unknown = {w: rule(rows, tok.encode(w, add_special_tokens=False).ids, skip) for w in WORDS if w not in tokens}
    expected.update(case(path, tokens, rows, "BF16", "little", tokenizer="huggingface", unknown={k: v for k, v in unknown.items() if v}))

    (HERE / "gguf_expected.json").write_text(json.dumps(expected, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
