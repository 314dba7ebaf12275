"""floret text vectors (``.floret``, docs/format.md §13.4), as floret's ``save_floret_vectors`` and spaCy write them.

::

    <n_buckets> <dims> <min_n> <max_n> <n_hashes> <seed> <bow> <eow>\\n
    <row index> <dims floats>\\n          (n_buckets lines; the index column is ignored)

Fields are separated by ASCII whitespace (floret ends every row with a
space). The vectors become a :class:`~finalfusion.vocab.FloretVocab`
(no words: every word is embedded through its hashed n-grams) and an
``NdArray`` of the rows as they are -- no normalisation, no norms, no
metadata, as in finalfusion-rust.
"""

from __future__ import annotations

from typing import Any, Final

from finalfusion import limits
from finalfusion._atomic import atomic_output
from finalfusion._binary import check_dims
from finalfusion._progress import ProgressArg, reporter
from finalfusion._source import Source, input_size, open_stream
from finalfusion.compat._dims_line import check_header_int
from finalfusion.compat._registry import register_format
from finalfusion.compat._rows import check_rows_writable, reuse_freed_memory, stored_rows
from finalfusion.compat._words import decode_word
from finalfusion.compat.text import read_text_rows
from finalfusion.embeddings import Embeddings
from finalfusion.errors import FormatError, Truncated
from finalfusion.storage.ndarray import NdArray
from finalfusion.subword.indexers import FloretIndexer
from finalfusion.vocab.subword import FloretVocab

__all__ = ["load_floret", "write_floret"]

_WHERE: Final = "floret header"
#: Rows parsed or formatted at a time; ``%.9g`` round-trips every float32 exactly.
_WRITE_ROWS: Final = 4096


def load_floret(file: Source, *, lossy: bool = False, progress: ProgressArg = None) -> Embeddings:
    """Read floret text vectors into a :class:`~finalfusion.vocab.FloretVocab`.

    Parameters
    ----------
    file
        Any :data:`~finalfusion.Source`: a path (``str``, ``os.PathLike`` or
        a ``bytes`` path), the file's contents (``bytes``, ``bytearray``,
        ``memoryview``), a file descriptor or a binary file object.
        Gzip input is recognised by its magic bytes.
    lossy
        Replace invalid UTF-8 in the begin/end-of-word markers with U+FFFD
        instead of raising.
    progress
        Report the bytes read: a callable ``progress("read", done, total)``
        or ``True`` for a tqdm bar (when tqdm is installed); see
        :mod:`finalfusion._progress`.

    Returns
    -------
    Embeddings
        Floret vocabulary and the bucket rows as stored (floret vectors are
        never normalised: there are no word rows to normalise). There is
        no ``limit`` option: every bucket is needed to embed any word.

    Raises
    ------
    FormatError
        For a malformed header (naming the field), a row with the wrong
        number of values or a non-number (naming the line), or a row count
        that differs from the header.

    Examples
    --------
    >>> emb = load_floret(b"2 3 3 6 2 2166136261 < >\\n0 1 0 0 \\n1 0 2 0 \\n")
    >>> emb.vocab.subword_indexer
    FloretIndexer(n_buckets=2, min_n=3, max_n=6, n_hashes=2, seed=2166136261, bow='<', eow='>')
    >>> emb.storage.matrix.tolist()
    [[1.0, 0.0, 0.0], [0.0, 2.0, 0.0]]
    """
    with reporter(progress) as report, open_stream(file, report) as f:
        cap = limits.MAX_HEADER_LINE_BYTES  # read at call time: a program may raise it
        head = f.readline(cap + 1)
        if len(head) > cap:
            raise FormatError(
                "floret header line too long",
                offset=0,
                chunk=_WHERE,
                expected=f"at most {cap} bytes up to a newline (finalfusion.limits.MAX_HEADER_LINE_BYTES)",
                found=head[:80],
            )
        indexer, dims = _parse_header(head, lossy)
        n = indexer.n_buckets
        # A row is an index and dims values, each at least one character and a separator (the last newline may be missing).
        size = input_size(f)
        if size is not None and size < n * (2 * dims + 2) - 1:
            raise Truncated(
                f"the header announces {n} rows of {dims} values, but the rest of the input is too short for them",
                offset=len(head),
                chunk="floret rows",
                expected=f"at least {n * (2 * dims + 2) - 1} bytes",
                found=f"{size} bytes",
            )
        # The rows are text-dims lines whose first token is the bucket index: the text reader parses them block by
        # block (same number grammar, rounding and separators as Rust); the index column is not interpreted.
        reuse_freed_memory()
        _, matrix = read_text_rows(f, "floret", n, dims, len(head), True, None)
    return Embeddings(NdArray(matrix), FloretVocab(indexer))


def _parse_header(head: bytes, lossy: bool) -> tuple[FloretIndexer, int]:
    fields = head.split()
    names = ("n_buckets", "dims", "min_n", "max_n", "n_hashes", "seed", "bow", "eow")
    if len(fields) != 8 or not head.endswith(b"\n"):
        raise FormatError(
            "floret header must have 8 fields and end with a newline", offset=0, chunk=_WHERE, expected=" ".join(f"<{n}>" for n in names), found=head[:200]
        )
    values: list[int] = []
    at = 0
    # Widths of the finalfusion fields that store them: n_buckets is the u64 row count, the rest are u32.
    for name, raw, bits in zip(names[:6], fields[:6], (64, 32, 32, 32, 32, 32), strict=True):
        at = head.find(raw, at)
        if not raw.isdigit():
            raise FormatError(f"{name} is not a non-negative integer", offset=at, chunk=f"{_WHERE} (line 1)", expected="a decimal integer", found=raw[:40])
        check_header_int(raw, name, bits, at, f"{_WHERE} (line 1)")
        values.append(int(raw))
        at += len(raw)
    n_buckets, dims, min_n, max_n, n_hashes, seed = values
    checks = (
        (n_buckets >= 1, "n_buckets", "at least 1"),
        (dims >= 1, "dims", "at least 1"),
        (1 <= min_n <= max_n, "min_n/max_n", "1 <= min_n <= max_n"),
        (1 <= n_hashes <= 4, "n_hashes", "1..4"),
        (0 <= seed < 2**32, "seed", "0..2**32-1"),
    )
    for ok, name, expected in checks:
        if not ok:
            raise FormatError(f"invalid {name}", offset=0, chunk=_WHERE, expected=expected, found=dict(zip(names, values, strict=False)))
    if max_n > limits.MAX_NGRAM_LEN:
        raise FormatError(
            "n-grams longer than finalfusion.limits.MAX_NGRAM_LEN (real models use 4..5; raise the limit for longer n-grams)",
            offset=head.find(fields[3], head.find(fields[2]) + len(fields[2])),
            chunk=f"{_WHERE} (max_n)",
            expected=f"max_n <= {limits.MAX_NGRAM_LEN}",
            found=max_n,
        )
    check_dims(dims, offset=0, chunk=f"{_WHERE} (dims)")
    bow = decode_word(fields[6], lossy, f"{_WHERE} (bow)", head.find(fields[6]))
    eow = decode_word(fields[7], lossy, f"{_WHERE} (eow)", head.rfind(fields[7]))
    return FloretIndexer(n_buckets, min_n, max_n, n_hashes=n_hashes, seed=seed, bow=bow, eow=eow), dims


def write_floret(file: Any, embeddings: Embeddings, *, fsync: bool = False) -> None:
    """Write floret-vocabulary embeddings as floret text vectors.

    The output is what floret's ``save_floret_vectors`` writes and spaCy's
    ``init vectors --mode floret`` reads: the header line, then one line
    per bucket with its index and values. Values are written with nine
    significant digits, so every ``float32`` reads back exactly (floret
    itself writes five).

    Parameters
    ----------
    file
        Path (written atomically) or binary file object.
    embeddings
        Embeddings with a :class:`~finalfusion.vocab.FloretVocab` (dense or
        quantized storage).
    fsync
        Flush to disk before the atomic rename.

    Raises
    ------
    ValueError
        Before writing: for another vocabulary type, or if a
        begin/end-of-word marker is empty or contains whitespace (the header
        separates fields by whitespace); :class:`~finalfusion.errors.NonFiniteError`
        if a row has a NaN or infinite value (the reader refuses them).

    Examples
    --------
    >>> import io, numpy as np
    >>> from finalfusion import Embeddings, FloretVocab, NdArray
    >>> from finalfusion.subword import FloretIndexer
    >>> emb = Embeddings(NdArray(np.array([[0.1, -2], [0, 1e-10]], dtype=np.float32)), FloretVocab(FloretIndexer(2, 3, 6)))
    >>> buf = io.BytesIO(); write_floret(buf, emb)
    >>> print(buf.getvalue().decode())
    2 2 3 6 2 2166136261 < >
    0 0.100000001 -2
    1 0 1.00000001e-10
    <BLANKLINE>
    >>> load_floret(buf.getvalue()).storage.matrix.tolist() == emb.storage.matrix.tolist()
    True
    """
    vocab = embeddings.vocab
    if not isinstance(vocab, FloretVocab):
        raise ValueError(f"floret vectors need a FloretVocab, not {type(vocab).__name__}")
    idx = vocab.subword_indexer
    for name, marker in (("begin-of-word", idx.bow), ("end-of-word", idx.eow)):
        if not marker or marker != "".join(marker.split()):
            raise ValueError(f"floret cannot represent the {name} marker {marker!r}: it must be non-empty and contain no whitespace")
        if "\x00" in marker or not marker.isprintable():
            raise ValueError(f"floret cannot represent the {name} marker {marker!r}: it contains a control character")
        try:
            marker.encode("utf-8")
        except UnicodeEncodeError:
            raise ValueError(f"floret cannot represent the {name} marker {marker!r}: it is not valid Unicode") from None
    check_rows_writable(embeddings, "floret", words_only=False, norm_bound=False)  # floret rows are read as they are, never normalised
    dims = embeddings.dims
    rows = embeddings.storage.shape[0]
    fmt = "%d " + " ".join(["%.9g"] * dims) + "\n"
    with atomic_output(file, fsync=fsync) as f:
        f.write(f"{idx.n_buckets} {dims} {idx.min_n} {idx.max_n} {idx.n_hashes} {idx.seed} {idx.bow} {idx.eow}\n".encode())
        for start in range(0, rows, _WRITE_ROWS):
            stop = min(rows, start + _WRITE_ROWS)
            block = stored_rows(embeddings.storage, start, stop)
            text = "".join([fmt % (start + i, *row) for i, row in enumerate(block.tolist())])
            f.write(text.encode("ascii"))


def _detect(sample: bytes, path: str | None) -> bool:
    """A first line of 8 fields, the first 6 integers: ``n_buckets dims min_n max_n n_hashes seed bow eow``."""
    fields = sample.split(b"\n", 1)[0].split()
    return len(fields) == 8 and all(f.isdigit() for f in fields[:6])


register_format(
    "floret",
    description="floret text vectors: an 8-field header, then one row per hashed n-gram bucket (no words)",
    extensions=(".floret",),
    order=100,
    detector=_detect,
    loader=load_floret,
    writer=write_floret,
    options=("lossy", "progress"),
    mismatch='the first line is not "n_buckets dims min_n max_n n_hashes seed bow eow"',
)
