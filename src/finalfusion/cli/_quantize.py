"""``finalfusion quantize`` and ``finalfusion reconstruct``."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Iterator
from typing import Any

import numpy as np

from finalfusion import _threads
from finalfusion._threads import set_threads
from finalfusion.cli._common import CliError, bars, one_line, positive_int, subparser
from finalfusion.cli._convert import (
    WriteOptions,
    add_input_options,
    check_output,
    inputs_of,
    load_input,
    output_format,
    output_format_names,
    write_as,
)
from finalfusion.embeddings import Embeddings
from finalfusion.errors import MissingExtraError, import_extra

__all__ = ["register"]

#: Rows compared per block when the reconstruction error is reported.
_BLOCK = 1 << 14


def _sample(text: str) -> int | float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a row count or a fraction in (0, 1], got {text!r}") from None
    if value.is_integer() and value > 1:
        return int(value)
    if 0 < value <= 1:
        return value
    raise argparse.ArgumentTypeError(f"expected a row count or a fraction in (0, 1], got {text!r}")


def _threads_arg(text: str) -> int | None:
    """``-t N``: N >= 1 threads, or 0 for the default (rayon's meaning of 0 in finalfusion-utils)."""
    if text.strip() == "0":
        return None
    return positive_int(text)


def _quantized_output(path: str) -> None:
    """Refuse an OUT whose extension names another format: quantized embeddings are finalfusion only.

    finalfusion-utils writes finalfusion whatever OUT is called (its README uses ``embeddings.pq``);
    so do we for ``.fifu`` and for extensions no format claims, but ``out.vec`` would be finalfusion
    bytes in a file every text reader then fails on.
    """
    try:
        spec = output_format(path, default="finalfusion")
    except CliError:
        spec = None  # .bin, or a read-only format's extension: not finalfusion either
    if spec is None or spec.name != "finalfusion":
        ext = os.path.splitext(path)[1]
        raise CliError(
            f"{path}: quantized embeddings can only be written as finalfusion, and {ext} is another format's extension; "
            "write .fifu (then 'finalfusion reconstruct' gives dense embeddings in any format)"
        )


def register(subparsers: Any) -> None:
    """Add ``quantize`` and ``reconstruct``."""
    p = subparser(
        subparsers,
        "quantize",
        "product-quantize embeddings (finalfusion output)",
        """
        finalfusion quantize -q opq -s 50 --sample 100000 --seed 0 vectors.fifu vectors-opq.fifu""",
    )
    p.add_argument("input", metavar="IN", help="embeddings (any format)")
    p.add_argument("output", metavar="OUT", help="quantized finalfusion file")
    q = p.add_argument_group("quantizer (defaults as finalfusion-utils)")
    q.add_argument("-q", "--quantizer", choices=("pq", "opq", "gaussian_opq"), default="pq", help="quantizer (default: pq)")
    q.add_argument(
        "-s", "--subquantizers", type=positive_int, metavar="N", help="subquantizers = bytes per row; must divide the dimensionality (default: dims/2)"
    )
    q.add_argument("-b", "--bits", type=positive_int, default=8, metavar="N", help="bits per code, 1..8 (default: 8)")
    q.add_argument("-i", "--iter", dest="iterations", type=positive_int, default=100, metavar="N", help="k-means (OPQ: alternating) iterations (default: 100)")
    q.add_argument("-a", "--attempts", type=positive_int, default=1, metavar="N", help="k-means runs per subquantizer, the best is kept (default: 1)")
    q.add_argument("--sample", type=_sample, metavar="N|FRACTION", help="train on a random sample of rows (a count or a fraction); all rows are encoded")
    q.add_argument("--seed", type=int, metavar="N", help="random seed: same seed, same bytes")
    q.add_argument(
        "-t", "--threads", type=_threads_arg, metavar="N", help="threads for the matrix products (default, and 0 as in finalfusion-utils: numpy's BLAS default)"
    )
    q.add_argument("--no-normalize-rows", dest="normalize_rows", action="store_false", help="quantize the rows as they are (default: unit rows, norms kept)")
    add_input_options(p)
    p.add_argument("--quiet", action="store_true", help="no progress bars and no reconstruction-error report")
    p.set_defaults(func=run_quantize)

    r = subparser(
        subparsers,
        "reconstruct",
        "turn quantized embeddings back into dense ones",
        """
        finalfusion reconstruct vectors-opq.fifu vectors-dense.fifu""",
    )
    r.add_argument("input", metavar="IN", help="finalfusion file with quantized storage")
    r.add_argument("output", metavar="OUT", help="dense output (format from the extension or --to; finalfusion for other extensions)")
    r.add_argument(
        "-t", "--to", dest="output_format", metavar="FORMAT", choices=output_format_names(), help="output format (default: from the extension of OUT)"
    )
    r.add_argument("--mmap", action="store_true", help="memory-map the input")
    r.set_defaults(func=run_reconstruct)


@contextlib.contextmanager
def _limited_threads(n: int | None) -> Iterator[None]:
    """Limit BLAS and our scans to ``n`` threads (threadpoolctl when installed; else only our scans)."""
    if n is None:
        yield
        return
    old = _threads._setting  # None (the default policy) or a number, restored as it was
    set_threads(n)
    try:
        try:
            threadpoolctl = import_extra("threadpoolctl", "limiting BLAS threads", extra="cli")
        except MissingExtraError:  # tolerated: then only our scans are limited
            yield
        else:
            with threadpoolctl.threadpool_limits(n):
                yield
    finally:
        set_threads(old)


def reconstruction_error(original: Embeddings, quantized: Embeddings) -> tuple[float, float]:
    """Average cosine similarity and Euclidean distance between the rows (as finalfusion-utils reports)."""
    rows = original.storage.shape[0]
    cos = dist = 0.0
    for lo in range(0, rows, _BLOCK):
        ids = np.arange(lo, min(lo + _BLOCK, rows))
        a = np.asarray(original.storage.rows(ids), dtype=np.float64)
        b = np.asarray(quantized.storage.rows(ids), dtype=np.float64)
        na, nb = np.linalg.norm(a, axis=1), np.linalg.norm(b, axis=1)
        with np.errstate(invalid="ignore", divide="ignore"):
            c = np.einsum("ij,ij->i", a, b) / (na * nb)
        cos += float(np.nansum(c))
        dist += float(np.linalg.norm(a - b, axis=1).sum())
    return cos / max(rows, 1), dist / max(rows, 1)


def run_quantize(args: argparse.Namespace) -> int:
    """Quantize ``args.input`` into ``args.output`` (checked first: a wrong OUT costs no training)."""
    check_output(args.output, inputs_of(args))
    _quantized_output(args.output)
    if args.quantizer == "opq" and args.attempts != 1:
        raise CliError(
            f"-a {args.attempts}: our opq quantizer seeds its codebooks once and refines them in the alternating iterations (-i), "
            "so it has no attempts to repeat; -a applies to -q pq and -q gaussian_opq"
        )
    with bars(args) as progress:
        emb = load_input(args, args.input, progress)
        try:
            with _limited_threads(args.threads):
                small = emb.quantize(
                    n_subquantizers=args.subquantizers,
                    n_bits=args.bits,
                    quantizer=args.quantizer,
                    n_iterations=args.iterations,
                    n_attempts=args.attempts,
                    normalize=args.normalize_rows,
                    seed=args.seed,
                    sample=args.sample,
                    progress=progress,
                )
        except ValueError as exc:
            raise CliError(f"{args.input}: cannot quantize: {one_line(exc)}") from None
    write_as(args.output, small, "finalfusion", WriteOptions(), inputs=inputs_of(args))
    if not args.quiet:
        cos, dist = reconstruction_error(emb, small)
        print(f"Average cosine similarity: {cos:.6f}", file=sys.stderr)
        print(f"Average euclidean distance: {dist:.6f}", file=sys.stderr)
    return 0


def run_reconstruct(args: argparse.Namespace) -> int:
    """Reconstruct the dense matrix of ``args.input``; an unquantized input is refused, not copied.

    OUT is finalfusion unless ``--to`` or its extension names another format (finalfusion-utils always
    writes finalfusion).
    """
    from finalfusion.cli._convert import detect
    from finalfusion.storage import QuantizedArray

    check_output(args.output, inputs_of(args))
    fmt = args.output_format if args.output_format is not None else output_format(args.output, default="finalfusion").name
    # A model directory or file is never quantized, and its options (--tensor) are not reconstruct's: say so before loading it.
    # (Files and directories only: a pipe's bytes, read here, would be gone for the loader.)
    if os.path.isdir(args.input) or os.path.isfile(args.input):
        source = detect(args.input)
        if source != "finalfusion":
            raise CliError(f"{args.input}: {source} input: reconstruct reads quantized finalfusion files ('finalfusion quantize' writes them)")
    emb = load_input(args, args.input)
    if not isinstance(emb.storage, QuantizedArray):
        raise CliError(
            f"{args.input}: not quantized ({type(emb.storage).__name__} storage): there is nothing to reconstruct "
            "(finalfusion convert copies embeddings between formats)"
        )
    dense = emb.reconstruct()
    if dense.norms is None:
        dense = _unit_word_rows(dense)
    write_as(args.output, dense, fmt, WriteOptions(), inputs=inputs_of(args))
    return 0


def _unit_word_rows(emb: Embeddings) -> Embeddings:
    """finalfusion-utils' reconstruct.rs for embeddings without norms: l2-normalise the word rows, store their norms.

    The rows of a quantized file without a norms chunk are the vectors as they were (``quantize
    --no-normalize``); every finalfusion file utils writes has unit word rows and their norms.
    """
    from finalfusion.norms import Norms
    from finalfusion.storage import NdArray

    matrix = np.array(emb.storage, dtype=np.float32)  # a private copy
    words = matrix[: len(emb.vocab)]
    norms = np.linalg.norm(words, axis=1)
    nonzero = norms > 0
    words[nonzero] /= norms[nonzero, None]
    return Embeddings(NdArray(matrix), emb.vocab, Norms(norms), emb.metadata)
