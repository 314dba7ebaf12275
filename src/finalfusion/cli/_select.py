"""``finalfusion select`` and ``finalfusion bucket-to-explicit``."""

from __future__ import annotations

import argparse
import sys
from typing import Any

import numpy as np

from finalfusion.cli._common import CliError, about, bars, read_lines, subparser
from finalfusion.cli._convert import WriteOptions, add_input_options, check_output, inputs_of, load_input, load_with_bars, output_format_names, write_as
from finalfusion.embeddings import Embeddings

__all__ = ["register", "select_words", "write_explicit"]

#: Words looked up per batch (and per progress report).
_BLOCK = 1 << 14


def register(subparsers: Any) -> None:
    """Add ``select`` and ``bucket-to-explicit``."""
    s = subparser(
        subparsers,
        "select",
        "keep only the words listed in a file (or standard input), as finalfusion-utils' select",
        """
        finalfusion select vectors.fifu small.fifu words.txt
        finalfusion select -i -t textdims vectors.fifu small.vec words.txt
        finalfusion select --no-subwords cc.de.300.bin domain.fifu domain-words.txt""",
    )
    s.add_argument("input", metavar="IN", help="embeddings (any format)")
    s.add_argument("output", metavar="OUT", help="file to write (format from the extension, or -t/--to)")
    s.add_argument("words", metavar="WORDS", nargs="?", help="one word per line (spaces allowed; duplicates kept once); default: standard input")
    s.add_argument(
        "-i",
        "--ignore-unknown",
        action="store_true",
        help="leave out words without an embedding (else they are an error), as finalfusion-utils' -i",
    )
    subwords = s.add_mutually_exclusive_group()
    subwords.add_argument(
        "--subwords",
        action="store_true",
        default=True,
        help="embed words missing from the vocabulary through their subwords where the vocabulary has them (the default, as finalfusion-utils)",
    )
    subwords.add_argument("--no-subwords", dest="subwords", action="store_false", help="only words of the vocabulary; others have no embedding (addition)")
    s.add_argument("-v", "--verbose", action="store_true", help="name every word left out on stderr")
    s.add_argument(
        "-t", "--to", dest="output_format", metavar="FORMAT", choices=output_format_names(), help="output format (default: from the extension of OUT)"
    )
    s.add_argument("--quiet", action="store_true", help="no progress bars")
    add_input_options(s)
    s.set_defaults(func=run_select)

    b = subparser(
        subparsers,
        "bucket-to-explicit",
        "turn hashed subword buckets (finalfusion, fastText) into an explicit n-gram vocabulary",
        """
        finalfusion bucket-to-explicit cc.de.300.bin cc.de.300-explicit.fifu""",
    )
    b.add_argument("input", metavar="IN", help="embeddings with a bucket vocabulary (finalfusion or fastText)")
    b.add_argument("output", metavar="OUT", help="finalfusion file to write")
    b.add_argument("--quiet", action="store_true", help="no progress bars")
    add_input_options(b, from_aliases=("--format",))  # finalfusion-utils' spelling (src/bucket_to_explicit.rs: -f/--format)
    b.set_defaults(func=run_bucket_to_explicit)


def select_words(
    emb: Embeddings, words: list[str], *, subwords: bool = False, ignore_unknown: bool = False, progress: Any = None, source: str | None = None
) -> tuple[Embeddings, list[str]]:
    """Embeddings holding ``words`` (in order, first occurrence kept) and the words left out.

    Known words keep their rows and norms; with ``subwords`` other words get
    their subword embedding (norm 1 when the input has norms). A word
    without an embedding raises :class:`CliError` unless ``ignore_unknown``.

    Examples
    --------
    >>> import numpy as np
    >>> from finalfusion import Embeddings, NdArray, SimpleVocab
    >>> emb = Embeddings(NdArray(np.eye(3, dtype=np.float32)), SimpleVocab(["a", "b", "c"]))
    >>> small, missing = select_words(emb, ["c", "x", "a", "c"], ignore_unknown=True)
    >>> small.vocab.words, small.storage.matrix.tolist(), missing
    (['c', 'a'], [[0.0, 0.0, 1.0], [1.0, 0.0, 0.0]], ['x'])
    """
    from finalfusion.metadata import Metadata
    from finalfusion.norms import Norms
    from finalfusion.storage import NdArray
    from finalfusion.vocab import SimpleVocab

    unique = list(dict.fromkeys(words))
    vocab = emb.vocab
    rows: list[np.ndarray[Any, Any]] = []
    kept: list[str] = []
    norms: list[float] = []
    missing: list[str] = []
    source_norms = None if emb.norms is None else np.asarray(emb.norms)
    for lo in range(0, len(unique), _BLOCK):
        block = unique[lo : lo + _BLOCK]
        ids = [vocab.idx(w) for w in block]
        known = [i if isinstance(i, (int, np.integer)) else None for i in ids]
        if subwords:
            matrix, found = emb.embedding_batch(block)
        else:
            take = [i for i in known if i is not None]
            matrix = np.zeros((len(block), emb.dims), dtype=np.float32)
            found = np.array([i is not None for i in known], dtype=bool)
            if take:
                matrix[found] = np.asarray(emb.storage.rows(np.asarray(take, dtype=np.int64)), dtype=np.float32)
        for j, w in enumerate(block):
            if not found[j]:
                missing.append(w)
                continue
            kept.append(w)
            rows.append(matrix[j])
            i = known[j]
            norms.append(float(source_norms[i]) if (source_norms is not None and i is not None) else 1.0)
        if progress is not None:
            progress("select", lo + len(block), len(unique))
    if missing and not ignore_unknown:
        shown = ", ".join(map(repr, missing[:5])) + (f" and {len(missing) - 5} more" if len(missing) > 5 else "")
        hint = "" if subwords else " (without --no-subwords they are embedded through their subwords where the vocabulary has them)"
        raise CliError(f"{len(missing)} word(s) have no embedding: {shown}; -i/--ignore-unknown leaves them out{hint}")
    matrix = np.stack(rows) if rows else np.zeros((0, emb.dims), dtype=np.float32)
    metadata = Metadata({"source_embeddings": source}) if source is not None else Metadata({})
    if emb.metadata is not None:
        metadata["source_metadata"] = dict(emb.metadata)
    out = Embeddings(
        NdArray(matrix.astype(np.float32, copy=False)), SimpleVocab(kept), norms=None if source_norms is None else Norms(np.asarray(norms, np.float32))
    )
    out.metadata = metadata
    return out, missing


def run_select(args: argparse.Namespace) -> int:
    """Write the embeddings of the listed words."""
    inputs = inputs_of(args, args.words)
    check_output(args.output, inputs)
    words = list(read_lines(args.words))
    if not words:  # finalfusion-utils writes a file of 0 words here; an empty list is a mistake, not a selection
        source = "standard input" if args.words in (None, "-") else args.words
        raise CliError(f"no words to select: {source} has none (one word per line); nothing written")
    with bars(args) as progress:
        emb = load_input(args, args.input, progress)
        small, missing = select_words(emb, words, subwords=args.subwords, ignore_unknown=args.ignore_unknown, progress=progress, source=args.input)
    if args.verbose:
        for w in missing:
            print(f"finalfusion select: left out {w!r} (no embedding)", file=sys.stderr)
    if len(small.vocab) == 0:
        raise CliError(f"no word of the list has an embedding in {args.input} ({len(missing):,} left out); nothing written")
    fmt = args.output_format
    write_as(args.output, small, fmt, WriteOptions(), inputs=inputs)
    return 0


def write_explicit(emb: Embeddings, source: str, output: str) -> None:
    """Write ``emb`` (read from ``source``) with its subword buckets turned into an explicit n-gram vocabulary.

    The one conversion behind ``finalfusion bucket-to-explicit`` and 0.7's
    ``ffp-bucket-to-explicit``: :meth:`~finalfusion.Embeddings.bucket_to_explicit`
    (norms kept, metadata not copied, as in finalfusion-python 0.7), written
    as finalfusion whatever the extension of ``output``.

    Raises
    ------
    CliError
        Naming ``source`` (on one line) when its vocabulary has no buckets,
        naming ``output`` when it cannot be written.
    """
    try:
        explicit = emb.bucket_to_explicit()
    except TypeError as exc:
        raise CliError(about(source, exc)) from None
    write_as(output, explicit, "finalfusion", WriteOptions(), inputs=[source])


def run_bucket_to_explicit(args: argparse.Namespace) -> int:
    """Convert the bucket vocabulary of ``args.input``."""
    check_output(args.output, inputs_of(args))
    write_explicit(load_with_bars(args, args.input), args.input, args.output)
    return 0
