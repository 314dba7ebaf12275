#!/usr/bin/env python3
"""Sentence encoding: ``Embeddings.encode`` vs model2vec's ``StaticModel.encode`` on the same model, in one process.

A model2vec directory is built with model2vec's own ``save_pretrained``: a
WordPiece tokenizer (BERT normaliser and pre-tokenizer, as the potion models
distilled from BERT-style models) trained with ``tokenizers`` on a generated
corpus, and a random table of ``--dims`` columns (potion-base-8M: 256). Both
libraries load it (finalfusion with its default ``normalize=True``) and
encode the same ``--sentences`` sentences (default 20,000; 5-25 words of a
Zipf-distributed generated vocabulary, so the tokenizer sees frequent words,
rare words and word pieces). The two are timed round-robin in the same
process, ``--runs`` times each after one warm-up; the results are checked to
agree. model2vec runs with its defaults (``use_multiprocessing=True``: joblib
threads above 10,000 sentences; the tokenizers library's own threads for
both). Besides wall time the table gives the CPU time of all threads
(``time.process_time``), which a loaded machine distorts less.

Usage::

    .venv/bin/python bench/encode.py                      # 20,000 sentences, 256 dims, 7 runs
    .venv/bin/python bench/encode.py --sentences 2000 --runs 3
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np


def corpus(n_words: int, seed: int) -> list[str]:
    rng = np.random.default_rng(seed)
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    vocab = ["".join(rng.choice(letters, size=rng.integers(2, 12))) for _ in range(n_words)]
    weights = 1 / np.arange(1, n_words + 1)
    weights /= weights.sum()
    return [vocab[i] for i in rng.choice(n_words, size=400_000, p=weights)]


def sentences(words: list[str], n: int, seed: int) -> list[str]:
    rng = np.random.default_rng(seed)
    out = []
    pos = 0
    for _ in range(n):
        k = int(rng.integers(5, 26))
        chunk = words[pos : pos + k]
        pos = (pos + k) % (len(words) - 30)
        text = " ".join(chunk)
        out.append(text[0].upper() + text[1:] + ".")
    return out


def build(directory: Path, dims: int, vocab_size: int) -> None:
    from model2vec import StaticModel
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, trainers

    words = corpus(50_000, 1)
    text = [" ".join(words[i : i + 20]) for i in range(0, len(words), 20)]
    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.train_from_iterator(text, trainers.WordPieceTrainer(vocab_size=vocab_size, special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]))
    n = tok.get_vocab_size()
    table = np.random.default_rng(2).normal(size=(n, dims)).astype(np.float32)
    StaticModel(table, tok, normalize=True).save_pretrained(directory)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sentences", type=int, default=20_000)
    parser.add_argument("--dims", type=int, default=256)
    parser.add_argument("--vocab", type=int, default=30_000)
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()

    import model2vec
    import tokenizers

    import finalfusion

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "m2v"
        build(path, args.dims, args.vocab)
        ref = model2vec.StaticModel.from_pretrained(path)
        emb = finalfusion.load(path)
        texts = sentences(corpus(50_000, 1), args.sentences, 3)
        ours, theirs = emb.encode(texts), ref.encode(texts)
        worst = float(np.abs(ours - theirs).max())
        assert worst < 1e-5, worst
        timings: dict[str, list[float]] = {"finalfusion encode": [], "model2vec encode": []}
        cpu: dict[str, list[float]] = {name: [] for name in timings}
        calls = {"finalfusion encode": lambda: emb.encode(texts), "model2vec encode": lambda: ref.encode(texts)}
        for _ in range(args.runs):
            for name, call in calls.items():
                start, start_cpu = time.perf_counter(), time.process_time()
                call()
                timings[name].append(time.perf_counter() - start)
                cpu[name].append(time.process_time() - start_cpu)
    tokens = sum(len(e.ids) for e in ref.tokenizer.encode_batch_fast(texts[:2000], add_special_tokens=False)) / min(2000, len(texts))
    print(f"# {args.sentences} sentences ({tokens:.1f} tokens each), {len(ref.tokens)} tokens x {args.dims} dims, {args.runs} runs each, interleaved")
    print(
        f"# python {sys.version.split()[0]}, numpy {np.__version__}, tokenizers {tokenizers.__version__}, model2vec {model2vec.__version__}, "
        f"finalfusion {finalfusion.__version__}, {os.cpu_count()} cpus, load average {os.getloadavg()[0]:.1f}; max |difference| {worst:.2g}"
    )
    base = statistics.median(timings["model2vec encode"])
    base_cpu = statistics.median(cpu["model2vec encode"])
    print("| variant | wall median | wall min-max | sentences/s | speed vs model2vec | CPU median (all threads) | CPU vs model2vec |")
    print("|---|---|---|---|---|---|---|")
    for name, ts in timings.items():
        med, med_cpu = statistics.median(ts), statistics.median(cpu[name])
        print(
            f"| {name} | {med * 1000:.0f} ms | {min(ts) * 1000:.0f}-{max(ts) * 1000:.0f} ms | {args.sentences / med:,.0f} | "
            f"{base / med:.2f}x | {med_cpu * 1000:.0f} ms | {base_cpu / med_cpu:.2f}x |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
