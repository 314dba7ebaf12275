"""``finalfusion encode``: sentence embeddings of lines of text (:meth:`~finalfusion.Embeddings.encode`).

Each non-empty line of INPUT (or standard input) is one text, exactly as read
without its newline (spaces are kept: they change a SentencePiece model's
tokens, as in the library's own ``encode``); its vector is
printed as one line of space-separated components in Rust's number
formatting, as finalfusion-utils prints numbers (``--json``: one object per
line with the line number). Lines are encoded in batches as they are read:
``--batch-size`` lines, or fewer once they hold
:data:`finalfusion.limits.MAX_ENCODE_BATCH_BYTES` bytes of text (a line is
up to ``MAX_LINE_BYTES`` long), so the buffered text stays bounded whatever
the input. Each line's vector does not depend on its batch.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from typing import Any

from finalfusion import limits
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
    e.add_argument(
        "--batch-size", type=positive_int, default=1024, metavar="N", help="lines encoded at once (default 1024; fewer once they hold 16 MiB of text)"
    )
    e.add_argument("--json", action="store_true", help='one JSON object per line: {"line": N, "vector": [...]}')
    add_input_options(e)
    e.add_argument("--quiet", action="store_true", help="no progress bar")
    e.set_defaults(func=run_encode)


def _batches(lines: Iterator[tuple[int, str]], size: int, max_bytes: int) -> Iterator[list[tuple[int, str]]]:
    """``lines`` in lists of ``size`` lines, or fewer once they hold ``max_bytes`` bytes of UTF-8 (a longer line alone).

    Examples
    --------
    >>> [[no for no, _ in b] for b in _batches(iter(enumerate(["ab", "c", "de", "f", "gh"], 1)), 3, 4)]
    [[1, 2, 3], [4, 5]]
    >>> [[no for no, _ in b] for b in _batches(iter(enumerate(["abcdef", "g", "h"], 1)), 3, 4)]
    [[1], [2, 3]]
    """
    batch: list[tuple[int, str]] = []
    held = 0
    for item in lines:
        batch.append(item)
        held += len(item[1].encode("utf-8", "surrogatepass"))
        if len(batch) == size or held >= max_bytes:
            yield batch
            batch, held = [], 0
    if batch:
        yield batch


def run_encode(args: argparse.Namespace) -> int:
    """Encode every non-empty line and print one vector per line."""
    from finalfusion.cli._common import numbered_lines

    emb = load_with_bars(args, args.embeddings)
    source = None if args.input in (None, "-") else args.input
    out = sys.stdout
    lines = numbered_lines(source, limit=MAX_LINE_BYTES, limit_name="MAX_LINE_BYTES", strip=False)
    for batch in _batches(lines, args.batch_size, limits.MAX_ENCODE_BATCH_BYTES):
        vectors = emb.encode([text for _, text in batch], normalize=args.unit, batch_size=args.batch_size)
        for (no, _), vec in zip(batch, vectors.tolist(), strict=True):
            if args.json:
                out.write(json.dumps({"line": no, "vector": vec}) + "\n")
            else:
                out.write(" ".join(rust_float(x) for x in vec) + "\n")
    return 0
