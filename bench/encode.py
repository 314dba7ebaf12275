#!/usr/bin/env python3
"""Sentence encoding: ``Embeddings.encode`` vs model2vec's ``StaticModel.encode`` on the same model, in one process.

The matrix of issue 36: for each tokenizer family that model2vec models use,
each kind of text, both libraries side by side.

Tokenizer families (``--tokenizer``; each trained with ``tokenizers`` on a
generated corpus and written with a random table of ``--dims`` columns as a
model2vec directory by model2vec's own ``save_pretrained``, ``normalize:
true``, ``max_length: null`` so that a long text is encoded whole):

* ``wordpiece``: BERT normaliser and pre-tokenizer, as the potion models
  distilled from BERT-style models;
* ``unigram``: Unigram with a lowercasing normaliser and ``Metaspace``;
* ``bytelevel``: byte-level BPE (GPT-2's ``ByteLevel`` pre-tokenizer);
* ``--tokenizer-json PATH`` adds a real ``tokenizer.json`` (for example
  all-MiniLM-L6-v2's) with a random table, as ``given``.

Texts (``--texts``):

* ``random``: ``--sentences`` sentences of 5-25 random letter strings (nearly
  every word new: the piece table cannot pay, the batches are tokenized whole);
* ``zipf``: ``--sentences`` sentences of 5-25 words of a Zipf-distributed
  generated vocabulary (like natural text);
* ``long``: one text of 200,000 characters of such words;
* ``oneword``: 100,000 texts of one such word each;
* ``--texts-file PATH ...`` adds ``file``: the first ``--sentences``
  non-empty lines of those files, stripped (real text, for example the vim
  documentation's lines, ``/usr/share/vim/vim90/doc/*.txt``).

Both libraries load each directory (finalfusion with its default
``normalize=True``) and encode the same texts; the calls are interleaved,
``--runs`` times each after a warm-up whose results are checked to agree.
model2vec runs with ``use_multiprocessing=False``; ``--threads default``
leaves both libraries their defaults otherwise (``tokenizers`` on its own
threads for both, ``encode`` on ``finalfusion.get_threads()`` threads),
``--threads one`` gives one thread each (``finalfusion.set_threads(1)``,
``TOKENIZERS_PARALLELISM=false``). The table gives the median wall time and
its spread (min-max) for each, the speed-up (model2vec's median over ours),
and the same speed-up in CPU time of all threads (``time.process_time``),
which a loaded machine distorts less. ``encode``'s piece table lives for one
call, so every timed call starts with an empty one.

Usage::

    nice .venv/bin/python bench/encode.py                                  # the whole matrix, default threads
    nice .venv/bin/python bench/encode.py --tokenizer unigram --texts zipf --runs 3 --threads one
    nice .venv/bin/python bench/encode.py --tokenizer-json ~/all-MiniLM-L6-v2/tokenizer.json --tokenizer none
    nice .venv/bin/python bench/encode.py --tokenizer-json ~/all-MiniLM-L6-v2/tokenizer.json --tokenizer none \
        --texts file --texts-file /usr/share/vim/vim90/doc/*.txt
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

FAMILIES = ["wordpiece", "unigram", "bytelevel"]
TEXTS = ["random", "zipf", "long", "oneword"]
LABELS = {"wordpiece": "WordPiece (BertPreTokenizer)", "unigram": "Unigram (Metaspace)", "bytelevel": "byte-level BPE", "given": "given tokenizer.json"}


def corpus(n_words: int, seed: int, size: int = 400_000) -> list[str]:
    """``size`` words drawn from a Zipf distribution over ``n_words`` generated words."""
    rng = np.random.default_rng(seed)
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    vocab = ["".join(rng.choice(letters, size=rng.integers(2, 12))) for _ in range(n_words)]
    weights = 1 / np.arange(1, n_words + 1)
    weights /= weights.sum()
    return [vocab[i] for i in rng.choice(n_words, size=size, p=weights)]


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


def random_sentences(n: int, seed: int) -> list[str]:
    """Sentences of random letter strings: nearly every word is new."""
    rng = np.random.default_rng(seed)
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    lengths = rng.integers(4, 14, size=n * 25)
    flat = "".join(rng.choice(letters, size=int(lengths.sum())))
    ends = np.cumsum(lengths)
    strings = [flat[e - k : e] for e, k in zip(ends.tolist(), lengths.tolist(), strict=True)]
    out, pos = [], 0
    for _ in range(n):
        k = int(rng.integers(5, 26))
        text = " ".join(strings[pos : pos + k])
        pos += k
        out.append(text[0].upper() + text[1:] + ".")
    return out


def file_lines(paths: list[str], n: int) -> list[str]:
    """The first ``n`` non-empty lines of ``paths``, stripped."""
    out: list[str] = []
    for path in paths:
        for line in Path(path).read_text(encoding="utf-8", errors="replace").splitlines():
            if line.strip():
                out.append(line.strip())
                if len(out) == n:
                    return out
    return out


def texts_of(kind: str, n: int, files: list[str] | None = None) -> list[str]:
    if kind == "file":
        return file_lines(files or [], n)
    if kind == "random":
        return random_sentences(n, 5)
    if kind == "zipf":
        return sentences(corpus(50_000, 1), n, 3)
    if kind == "long":
        return [" ".join(corpus(50_000, 7, 40_000))[:200_000]]
    return corpus(50_000, 9, 100_000)


def build(directory: Path, dims: int, vocab_size: int, family: str, tokenizer_json: str | None) -> None:
    from model2vec import StaticModel
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

    if family == "given":
        tok = Tokenizer.from_file(str(tokenizer_json))
    else:
        words = corpus(50_000, 1)
        text = [" ".join(words[i : i + 20]) for i in range(0, len(words), 20)]
        if family == "wordpiece":
            tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
            tok.normalizer = normalizers.BertNormalizer(lowercase=True)
            tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
            trainer: Any = trainers.WordPieceTrainer(vocab_size=vocab_size, special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"], show_progress=False)
        elif family == "unigram":
            tok = Tokenizer(models.Unigram())
            tok.normalizer = normalizers.Lowercase()
            tok.pre_tokenizer = pre_tokenizers.Metaspace()
            trainer = trainers.UnigramTrainer(vocab_size=vocab_size, special_tokens=["<unk>"], unk_token="<unk>", show_progress=False)
        else:
            tok = Tokenizer(models.BPE())
            tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
            tok.decoder = decoders.ByteLevel()
            trainer = trainers.BpeTrainer(
                vocab_size=vocab_size, special_tokens=["<|endoftext|>"], initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False
            )
        tok.train_from_iterator(text, trainer)
    n = tok.get_vocab_size()
    table = np.random.default_rng(2).normal(size=(n, dims)).astype(np.float32)
    StaticModel(table, tok, normalize=True, max_length=None).save_pretrained(directory)


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


def spread(ts: list[float]) -> str:
    return f"{statistics.median(ts) * 1000:,.0f} ms ({min(ts) * 1000:,.0f}-{max(ts) * 1000:,.0f})"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    parser.add_argument("--sentences", type=int, default=20_000)
    parser.add_argument("--dims", type=int, default=256)
    parser.add_argument("--vocab", type=int, default=30_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--tokenizer", choices=[*FAMILIES, "all", "none"], default="all")
    parser.add_argument("--tokenizer-json", help="also a real tokenizer.json (e.g. all-MiniLM-L6-v2's), with a random table")
    parser.add_argument("--texts", choices=[*TEXTS, "file", "all"], default="all")
    parser.add_argument("--texts-file", nargs="+", help="text files whose lines are the texts of --texts file (added to --texts all)")
    parser.add_argument("--threads", choices=["default", "one"], default="default")
    args = parser.parse_args()

    import model2vec
    import tokenizers

    import finalfusion
    from finalfusion._pieces import tokenizer_piece_rule

    families = FAMILIES if args.tokenizer == "all" else [] if args.tokenizer == "none" else [args.tokenizer]
    if args.tokenizer_json:
        families.append("given")
    kinds = (TEXTS + (["file"] if args.texts_file else [])) if args.texts == "all" else [args.texts]
    if "file" in kinds and not args.texts_file:
        parser.error("--texts file needs --texts-file PATH ...")
    if args.threads == "one":
        os.environ["TOKENIZERS_PARALLELISM"] = "false"
        finalfusion.set_threads(1)
    texts = {kind: texts_of(kind, args.sentences, args.texts_file) for kind in kinds}
    print(
        f"# python {sys.version.split()[0]}, numpy {np.__version__}, tokenizers {tokenizers.__version__}, model2vec {model2vec.__version__}, "
        f"finalfusion {finalfusion.__version__}, {os.cpu_count()} cpus, finalfusion.get_threads() {finalfusion.get_threads()}, "
        f"threads: {args.threads}; {args.runs} runs each, median (min-max)"
    )
    for kind, items in texts.items():
        words = " ".join(items).split(" ")
        print(f"# {kind}: {len(items):,} texts, {len(words):,} space-separated words, {len(set(words)):,} distinct")
    print("| tokenizer | texts | `Embeddings.encode` | model2vec `StaticModel.encode` | speed-up (wall) | speed-up (CPU) |")
    print("|---|---|---|---|---|---|")
    loads = [os.getloadavg()[0]]
    worst_all = 0.0
    with tempfile.TemporaryDirectory() as tmp:
        for family in families:
            path = Path(tmp) / family
            build(path, args.dims, args.vocab, family, args.tokenizer_json)
            ref = model2vec.StaticModel.from_pretrained(path)
            emb = finalfusion.load(path)
            rule = tokenizer_piece_rule(emb.vocab.tokenizer) or "plain path"
            for kind, items in texts.items():
                ours, theirs = emb.encode(items), ref.encode(items, use_multiprocessing=False)  # warm-up
                worst = float(np.abs(ours - theirs).max())
                assert worst < 1e-3, worst  # a long text's float32 mean in model2vec drifts by ~1e-5
                worst_all = max(worst_all, worst)
                calls: dict[str, Callable[[], object]] = {
                    "ours": lambda emb=emb, items=items: emb.encode(items),
                    "model2vec": lambda ref=ref, items=items: ref.encode(items, use_multiprocessing=False),
                }
                wall, cpu = timed(calls, args.runs)
                loads.append(os.getloadavg()[0])
                speed = statistics.median(wall["model2vec"]) / statistics.median(wall["ours"])
                speed_cpu = statistics.median(cpu["model2vec"]) / statistics.median(cpu["ours"])
                label = f"{LABELS[family]}, {len(ref.tokens):,} tokens ({rule})"
                print(f"| {label} | {kind} | {spread(wall['ours'])} | {spread(wall['model2vec'])} | **{speed:.2f}x** | {speed_cpu:.2f}x |", flush=True)
    print(f"# {args.dims} dims; max |difference| {worst_all:.1e}; load average (1 min) {min(loads):.1f}-{max(loads):.1f} during the runs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
