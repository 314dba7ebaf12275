#!/usr/bin/env python3
"""Sentence encoding: ``Embeddings.encode`` vs model2vec's ``StaticModel.encode`` on the same model, in one process.

A model2vec directory is built with model2vec's own ``save_pretrained``: a
WordPiece tokenizer (BERT normaliser and pre-tokenizer, as the potion models
distilled from BERT-style models) trained with ``tokenizers`` on a generated
corpus, and a random table of ``--dims`` columns (potion-base-8M: 256).
``--tokenizer unigram`` (or ``both``) adds a Unigram tokenizer with a
Metaspace pre-tokenizer, for which ``encode`` takes the plain path (one
tokenizer call per text, no piece cache: see finalfusion._pieces). Both
libraries load each directory (finalfusion with its default
``normalize=True``) and encode the same ``--sentences`` sentences (default
20,000; 5-25 words of a Zipf-distributed generated vocabulary, so the
tokenizer sees frequent words, rare words and word pieces). The two are
timed round-robin in the same process, ``--runs`` times each after one
warm-up; the results are checked to agree. ``encode``'s piece table lives
for one call, so every timed call starts with an empty one.

Threads, the same for both in each setting (``--threads``):

* ``default``: each library's defaults. model2vec above 10,000 sentences
  runs its batches on joblib threads (``n_jobs=-1``: one per CPU) and sets
  ``TOKENIZERS_PARALLELISM=false`` for the process, so from its first such
  call on the tokenizers library runs single-threaded for both;
  ``encode`` runs its batches on ``finalfusion.get_threads()`` threads.
* ``one``: one thread each: ``use_multiprocessing=False``,
  ``finalfusion.set_threads(1)``, ``TOKENIZERS_PARALLELISM=false``.

Besides wall time the table gives the CPU time of all threads
(``time.process_time``), which a loaded machine distorts less.

Usage::

    .venv/bin/python bench/encode.py                      # 20,000 sentences, 256 dims, 7 runs, both thread settings
    .venv/bin/python bench/encode.py --sentences 2000 --runs 3 --tokenizer both --threads one
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

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


def build(directory: Path, dims: int, vocab_size: int, family: str) -> None:
    from model2vec import StaticModel
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, trainers

    words = corpus(50_000, 1)
    text = [" ".join(words[i : i + 20]) for i in range(0, len(words), 20)]
    if family == "wordpiece":
        tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
        tok.normalizer = normalizers.BertNormalizer(lowercase=True)
        tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
        trainer: Any = trainers.WordPieceTrainer(vocab_size=vocab_size, special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"], show_progress=False)
    else:
        tok = Tokenizer(models.Unigram())
        tok.normalizer = normalizers.Lowercase()
        tok.pre_tokenizer = pre_tokenizers.Metaspace()
        trainer = trainers.UnigramTrainer(vocab_size=vocab_size, special_tokens=["<unk>"], unk_token="<unk>", show_progress=False)
    tok.train_from_iterator(text, trainer)
    n = tok.get_vocab_size()
    table = np.random.default_rng(2).normal(size=(n, dims)).astype(np.float32)
    StaticModel(table, tok, normalize=True).save_pretrained(directory)


def timed(calls: dict[str, Callable[[], object]], runs: int) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """Wall and CPU seconds of each call, ``runs`` rounds, the calls interleaved in each round."""
    wall: dict[str, list[float]] = {name: [] for name in calls}
    cpu: dict[str, list[float]] = {name: [] for name in calls}
    for _ in range(runs):
        for name, call in calls.items():
            start, start_cpu = time.perf_counter(), time.process_time()
            call()
            wall[name].append(time.perf_counter() - start)
            cpu[name].append(time.process_time() - start_cpu)
    return wall, cpu


def rows(label: str, sentences: int, wall: dict[str, list[float]], cpu: dict[str, list[float]]) -> None:
    base, base_cpu = statistics.median(wall["model2vec encode"]), statistics.median(cpu["model2vec encode"])
    for name, ts in wall.items():
        med, med_cpu = statistics.median(ts), statistics.median(cpu[name])
        print(
            f"| {label} | {name} | {med * 1000:.0f} ms | {min(ts) * 1000:.0f}-{max(ts) * 1000:.0f} ms | {sentences / med:,.0f} | "
            f"{base / med:.2f}x | {med_cpu * 1000:.0f} ms | {min(cpu[name]) * 1000:.0f}-{max(cpu[name]) * 1000:.0f} ms | {base_cpu / med_cpu:.2f}x |"
        )
        label = ""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    parser.add_argument("--sentences", type=int, default=20_000)
    parser.add_argument("--dims", type=int, default=256)
    parser.add_argument("--vocab", type=int, default=30_000)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--tokenizer", choices=["wordpiece", "unigram", "both"], default="wordpiece")
    parser.add_argument("--threads", choices=["default", "one", "both"], default="both")
    args = parser.parse_args()

    import model2vec
    import tokenizers

    import finalfusion
    from finalfusion._pieces import tokenizer_splits_at_spaces

    families = ["wordpiece", "unigram"] if args.tokenizer == "both" else [args.tokenizer]
    settings = ["default", "one"] if args.threads == "both" else [args.threads]
    texts = sentences(corpus(50_000, 1), args.sentences, 3)
    pieces = " ".join(texts).split(" ")
    loads = []
    print(
        f"# python {sys.version.split()[0]}, numpy {np.__version__}, tokenizers {tokenizers.__version__}, model2vec {model2vec.__version__}, "
        f"finalfusion {finalfusion.__version__}, {os.cpu_count()} cpus, finalfusion.get_threads() {finalfusion.get_threads()}"
    )
    print(f"# {args.sentences} sentences, {len(pieces) / len(texts):.1f} space-separated pieces each, {len(set(pieces)):,} distinct; {args.runs} runs each")
    print("| tokenizer, threads | variant | wall median | wall min-max | sentences/s | speed vs model2vec | CPU median | CPU min-max | CPU vs m2v |")
    print("|---|---|---|---|---|---|---|---|---|")
    previous = finalfusion.get_threads()
    with tempfile.TemporaryDirectory() as tmp:
        for family in families:
            path = Path(tmp) / family
            build(path, args.dims, args.vocab, family)
            ref = model2vec.StaticModel.from_pretrained(path)
            emb = finalfusion.load(path)
            cached = "piece cache" if tokenizer_splits_at_spaces(emb.vocab.tokenizer) else "plain path"
            tokens = sum(len(e.ids) for e in ref.tokenizer.encode_batch_fast(texts[:2000], add_special_tokens=False)) / min(2000, len(texts))
            for setting in settings:
                one = setting == "one"
                if one:
                    os.environ["TOKENIZERS_PARALLELISM"] = "false"
                finalfusion.set_threads(1 if one else previous)
                ours, theirs = emb.encode(texts), ref.encode(texts, use_multiprocessing=not one)  # warm-up
                worst = float(np.abs(ours - theirs).max())
                assert worst < 1e-5, worst
                calls: dict[str, Callable[[], object]] = {
                    "finalfusion encode": lambda emb=emb: emb.encode(texts),
                    "model2vec encode": lambda ref=ref, one=one: ref.encode(texts, use_multiprocessing=not one),
                }
                loads.append(os.getloadavg()[0])
                wall, cpu = timed(calls, args.runs)
                loads.append(os.getloadavg()[0])
                label = f"{family} ({len(ref.tokens):,} tokens, {tokens:.1f} a sentence; {cached}), {'one thread' if one else 'default threads'}"
                rows(label, args.sentences, wall, cpu)
    finalfusion.set_threads(previous)
    print(f"# {args.dims} dims; max |difference| < 1e-5 checked; load average (1 min) {min(loads):.1f}-{max(loads):.1f} during the runs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
