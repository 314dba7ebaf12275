"""``finalfusion encode``: sentence embeddings of lines of text (:meth:`~finalfusion.Embeddings.encode`).

Each non-empty line of INPUT (or standard input) is one text, exactly as read
without its newline (spaces are kept: they change a SentencePiece model's
tokens, as in the library's own ``encode``); its vector is
printed as one line of space-separated components in Rust's number
formatting, as finalfusion-utils prints numbers (``--json``: one object per
line with the line number). Lines are encoded in batches as they are read.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from typing import Any

from finalfusion.cli._common import positive_int, rust_float, subparser
from finalfusion.cli._convert import add_input_options, load_with_bars
from finalfusion.limits import MAX_LINE_BYTES

__all__ = ["register", "run_encode"]


def register(subparsers: Any) -> None:
    """Add ``encode``."""
    e = subparser(
        subparsers,
        "encode",
        "print sentence embeddings of the lines of INPUT or standard input (model2vec's rule for model vocabularies, fastText's otherwise)",
        """
        finalfusion encode potion-base-8M/ sentences.txt > vectors.txt
        echo 'the quick brown fox' | finalfusion encode --unit cc.en.300.bin""",
    )
    e.add_argument("embeddings", metavar="EMBEDDINGS", help="embeddings or model directory (any format)")
    e.add_argument("input", metavar="INPUT", nargs="?", help="texts, one per line (default, or '-': standard input)")
    e.add_argument(
        "--unit",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="l2-normalise the sentence vectors (default: as a model2vec config says, else not)",
    )
    e.add_argument("--batch-size", type=positive_int, default=1024, metavar="N", help="lines encoded at once (default 1024)")
    e.add_argument("--json", action="store_true", help='one JSON object per line: {"line": N, "vector": [...]}')
    add_input_options(e)
    e.add_argument("--quiet", action="store_true", help="no progress bar")
    e.set_defaults(func=run_encode)


def _batches(lines: Iterator[tuple[int, str]], size: int) -> Iterator[list[tuple[int, str]]]:
    batch: list[tuple[int, str]] = []
    for item in lines:
        batch.append(item)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


def run_encode(args: argparse.Namespace) -> int:
    """Encode every non-empty line and print one vector per line."""
    from finalfusion.cli._common import numbered_lines

    emb = load_with_bars(args, args.embeddings)
    source = None if args.input in (None, "-") else args.input
    out = sys.stdout
    for batch in _batches(numbered_lines(source, limit=MAX_LINE_BYTES, limit_name="MAX_LINE_BYTES", strip=False), args.batch_size):
        vectors = emb.encode([text for _, text in batch], normalize=args.unit, batch_size=args.batch_size)
        for (no, _), vec in zip(batch, vectors.tolist(), strict=True):
            if args.json:
                out.write(json.dumps({"line": no, "vector": vec}) + "\n")
            else:
                out.write(" ".join(rust_float(x) for x in vec) + "\n")
    return 0
