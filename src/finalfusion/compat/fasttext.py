"""fastText ``.bin`` models (docs/format.md §13.3).

=================  ===============================================================
field              layout (little-endian)
=================  ===============================================================
magic, version     i32 793712314, i32 12
args               12 x i32 (dim, ws, epoch, minCount, neg, wordNgrams, loss, model,
                   bucket, minn, maxn, lrUpdateRate), f64 sampling threshold
dictionary         i32 size, i32 nwords, i32 nlabels, i64 ntokens, i64 pruneidx_size,
                   size x (word bytes, 0x00, i64 count, i8 entry type)
input matrix       u8 quantized, i64 rows, i64 cols, rows x cols f32
output matrix      u8 quantized, i64 rows, i64 cols, rows x cols f32
=================  ===============================================================

Loading replaces every word row by what fastText's ``get_word_vector``
returns for the word -- the mean of the word's own row and its n-gram rows
-- then (by default) l2-normalises the word rows and keeps their norms.
Writing inverts this and emits a complete model that the fastText bindings
and gensim's ``load_facebook_model`` both load.
"""

from __future__ import annotations

import functools
import struct
import warnings
from collections.abc import Callable, Iterator, Mapping
from typing import IO, Any, Final

import numpy as np
import numpy.typing as npt

from finalfusion import _batch, limits
from finalfusion._atomic import atomic_output
from finalfusion._binary import check_dims
from finalfusion._progress import ProgressArg, reporter
from finalfusion._source import Source
from finalfusion._source import open_stream as open_input
from finalfusion._stream import StreamReader
from finalfusion.compat._build import embeddings_from, simple_vocab
from finalfusion.compat._registry import register_format
from finalfusion.compat._rows import check_limit, dense_matrix_with_norms, refuse_nonfinite
from finalfusion.compat._words import decode_word
from finalfusion.embeddings import Embeddings
from finalfusion.errors import BadMagic, FormatError, LegacyFormatWarning, Truncated, UnsupportedVersion
from finalfusion.metadata import Metadata
from finalfusion.storage.ndarray import NdArray
from finalfusion.subword.indexers import FastTextIndexer
from finalfusion.subword.ngrams import ngram_count
from finalfusion.vocab.simple import SimpleVocab
from finalfusion.vocab.subword import FastTextVocab

__all__ = ["load_fasttext", "write_fasttext"]

#: fastText's file magic and the only model version read and written.
MAGIC: Final = 793712314
VERSION: Final = 12
#: fastText's end-of-sentence token: it has no n-grams (fastText ``Dictionary::initNgrams``).
EOS: Final = "</s>"

_HEADER = struct.Struct("<ii")
_ARGS = struct.Struct("<12id")
_DICT = struct.Struct("<iiiqq")
_MATRIX = struct.Struct("<?qq")
_ENTRY: Final = "fastText dictionary-entry"
_ENTRY_TAIL = 9  # i64 count + i8 entry type after a word's NUL terminator
_LOSSES: Final = ("HierarchicalSoftmax", "NegativeSampling", "Softmax")
_MODELS: Final = ("CBOW", "SkipGram", "Supervised")
#: Metadata keys of finalfusion-python 0.7.1, in file order; Rust's names for two of them.
_KEYS: Final = (
    "dims",
    "window_size",
    "epoch",
    "min_count",
    "ns",
    "word_ngrams",
    "loss",
    "model",
    "buckets",
    "min_n",
    "max_n",
    "lr_update_rate",
    "sampling_threshold",
)
_RUST_KEYS: Final = {"ns": "neg", "buckets": "bucket"}
#: fastText's own defaults (``Args``) for arguments a writer cannot know.
_DEFAULTS: Final[dict[str, Any]] = {
    "window_size": 5,
    "epoch": 5,
    "min_count": 5,
    "ns": 5,
    "word_ngrams": 1,
    "loss": "NegativeSampling",
    "model": "SkipGram",
    "lr_update_rate": 100,
    "sampling_threshold": 1e-4,
}
#: Word rows summed together per block when precomputing (keeps the accumulator in cache).
_BLOCK = 256
#: Bytes read at a time while parsing the dictionary / streaming a matrix of unknown size.
_READ = 1 << 20
_MATRIX_READ = 1 << 26


def _raw_bytes(arr: npt.NDArray[Any]) -> memoryview:
    """A byte view of a C-contiguous array (also of an empty one, which ``memoryview.cast`` refuses)."""
    return arr.data.cast("B") if arr.size else memoryview(b"")


def load_fasttext(file: Source, *, normalize: bool = True, lossy: bool = False, limit: int | None = None, progress: ProgressArg = None) -> Embeddings:
    """Read the word and subword vectors of a fastText ``.bin`` model (version 12).

    Every word row becomes what fastText's ``get_word_vector`` returns for
    the word: the mean of its own row and the rows of its character
    n-grams (``</s>`` has no n-grams, as in fastText). With ``normalize``
    (the default, as finalfusion-python 0.7.1 and finalfusion-rust do) the
    word rows are then l2-normalised and their norms kept in an ``NdNorms``
    chunk; n-gram rows are never normalised. Unknown words get the
    normalised sum of their n-gram rows -- the direction of fastText's
    vector for them.

    The vocabulary is a :class:`~finalfusion.vocab.FastTextVocab`, or a
    :class:`~finalfusion.vocab.SimpleVocab` for a model without subwords
    (``maxn = 0``). The training arguments go to a Metadata chunk with
    finalfusion-python 0.7.1's keys (``dims``, ``window_size``, ``epoch``,
    ``min_count``, ``ns``, ``word_ngrams``, ``loss``, ``model``,
    ``buckets``, ``min_n``, ``max_n``, ``lr_update_rate``,
    ``sampling_threshold``); :func:`write_fasttext` reuses them. Word
    counts and the output matrix are not kept.

    Parameters
    ----------
    file
        A :data:`~finalfusion._source.Source`: a path (``str``,
        ``os.PathLike``, or ``bytes`` naming an existing file), a file
        descriptor, the file's bytes, or a binary file object (read from
        its current position). Gzip-compressed input is recognised by its
        magic bytes.
    normalize
        l2-normalise the word rows and keep their norms (default), or keep
        fastText's vectors as they are, without a norms chunk.
    lossy
        Replace invalid UTF-8 in words with U+FFFD instead of raising.
    limit
        Keep only the first ``limit`` words (fastText sorts them by
        frequency); all n-gram buckets are kept, so the dropped words are
        still embedded through their n-grams.
    progress
        Report the bytes read: a callable ``progress("read", done, total)``
        or ``True`` for a tqdm bar (when tqdm is installed); see
        :mod:`finalfusion._progress`.

    Returns
    -------
    Embeddings

    Raises
    ------
    FormatError
        For a malformed or truncated file (naming the field, record and
        byte offset), and for models that cannot be represented:
        supervised models (labels), quantized ``.ftz`` models and pruned
        dictionaries.

    Warns
    -----
    LegacyFormatWarning
        For files written by finalfusion-python 0.7's ``write_fasttext``
        (prune index 0 instead of -1); they are read normally.

    Examples
    --------
    >>> import io, numpy as np
    >>> from finalfusion import Embeddings, FastTextVocab, NdArray
    >>> from finalfusion.subword import FastTextIndexer
    >>> vocab = FastTextVocab(["hallo", "welt"], FastTextIndexer(20, 3, 6))
    >>> rng = np.random.default_rng(0)
    >>> emb = Embeddings(NdArray(rng.normal(size=(22, 4)).astype(np.float32)), vocab)
    >>> buf = io.BytesIO(); write_fasttext(buf, emb)
    >>> back = load_fasttext(buf.getvalue())
    >>> back.vocab.words, back.metadata["model"]
    (['hallo', 'welt'], 'SkipGram')
    >>> bool(np.allclose(back["welt"] * back.norms.norms[1], emb["welt"], atol=1e-5))
    True
    """
    check_limit(limit)
    with reporter(progress) as report, open_input(file, report) as f:
        stream = StreamReader(f)
        args = _read_args(stream)
        words, nwords = _read_dictionary(stream, lossy, _ngram_range(args), limit)
        matrix = _read_input_matrix(stream, nwords, args)
        read = stream.pos
    metadata = Metadata(dict(zip(_KEYS, [*args[:6], _LOSSES[args[6] - 1], _MODELS[args[7] - 1], *args[8:]], strict=True)))
    bucket, minn, maxn = args[8], args[9], args[10]
    keep = nwords if limit is None else min(limit, nwords)
    words = words[:keep]
    if maxn == 0 or minn > maxn:
        # No character n-grams: fastText's word vector is the word's own row.
        simple = simple_vocab(words, _ENTRY, first=0)
        return embeddings_from(words, np.ascontiguousarray(matrix[:keep]), normalize, metadata, vocab=simple)
    _check_ngram_total(words, max(minn, 1), maxn, read)
    if keep < nwords:
        matrix = np.concatenate([matrix[:keep], matrix[nwords:]])
    index = simple_vocab(words, _ENTRY, first=0).word_index
    vocab = FastTextVocab(words, FastTextIndexer(bucket, max(minn, 1), maxn), _index=index)
    take = functools.partial(np.take, matrix, axis=0)
    storage = NdArray(matrix)
    for pos, rows in _word_ngram_rows(vocab):
        scale = np.float32(1.0 / (rows.shape[1] + 1))
        if rows.shape[1] > _batch.LONG_ROWS or len(pos) * _FEW_WORDS <= rows.shape[1]:
            # Long words, or a group of few words with many n-grams (one Python-level gather per n-gram column would cost more
            # than gathering each word's rows): bounded gathers, the same additions in the same order as _row_sum.
            for p, word_rows in zip(pos.tolist(), rows, strict=True):
                acc = _batch.sum_rows(storage, matrix, word_rows, ordered=True)
                acc += matrix[p]
                acc *= scale
                matrix[p] = acc
            continue
        for lo in range(0, len(pos), _BLOCK):
            p = pos[lo : lo + _BLOCK]
            acc = _row_sum(take, rows[lo : lo + _BLOCK])
            acc += take(p)
            acc *= scale
            matrix[p] = acc
    return embeddings_from(words, matrix, normalize, metadata, vocab=vocab)


#: A group of words with the same n-gram count is summed word by word (one gather of each word's rows) when it has at most
#: 1/_FEW_WORDS as many words as n-grams per word; else column by column (one gather of an n-gram column over all its words).
_FEW_WORDS = 4


def _row_sum(take: Callable[[npt.NDArray[np.int64]], npt.NDArray[np.float32]], rows: npt.NDArray[np.int64]) -> npt.NDArray[np.float32]:
    """Sum of the rows ``rows[i, :]`` for every ``i``, one column of indices at a time (``np.take`` gathers fastest)."""
    acc = take(rows[:, 0])
    for j in range(1, rows.shape[1]):
        acc += take(rows[:, j])
    return acc


def _read_args(stream: StreamReader) -> tuple[Any, ...]:
    magic, version = stream.fields(_HEADER, "magic and version", "fastText header")
    if magic != MAGIC:
        raise BadMagic("not a fastText model", offset=0, chunk="fastText header", expected=MAGIC, found=magic)
    if version != VERSION:
        raise UnsupportedVersion("unsupported fastText model version", offset=4, chunk="fastText header", expected=VERSION, found=version)
    args = stream.fields(_ARGS, "training arguments", "fastText args")
    names = ("dim", "ws", "epoch", "minCount", "neg", "wordNgrams", "loss", "model", "bucket", "minn", "maxn", "lrUpdateRate")

    def bad(i: int, message: str, expected: str) -> FormatError:
        return FormatError(message, offset=8 + 4 * i, chunk=f"fastText args ({names[i]})", expected=expected, found=args[i])

    if args[0] < 1:
        raise bad(0, "invalid dimensionality", "at least 1")
    check_dims(args[0], offset=8, chunk="fastText args (dim)")
    if args[7] == 3:
        raise bad(7, "supervised fastText models (classifiers) are not supported", "1 (cbow) or 2 (skipgram)")
    if args[7] not in (1, 2):
        raise bad(7, "unknown model type", "1 (cbow) or 2 (skipgram)")
    if args[6] not in (1, 2, 3):
        raise bad(6, "unknown loss", "1 (hs), 2 (ns) or 3 (softmax)")
    for i in (8, 9, 10):
        if args[i] < 0:
            raise bad(i, "negative value", "a value >= 0")
    if args[10] > 0 and args[9] <= args[10] and args[8] == 0:
        raise bad(8, "a model with character n-grams needs buckets", "at least 1")
    if args[10] > limits.MAX_NGRAM_LEN and args[9] <= args[10]:
        raise bad(
            10,
            "n-grams longer than finalfusion.limits.MAX_NGRAM_LEN (real models use 3..6; raise the limit for longer n-grams)",
            f"at most {limits.MAX_NGRAM_LEN}",
        )
    return args


def _ngram_range(args: tuple[Any, ...]) -> tuple[int, int] | None:
    """``(min_n, max_n)`` of a model with character n-grams, else ``None`` (``maxn = 0`` or ``minn > maxn``)."""
    minn, maxn = args[9], args[10]
    return None if maxn == 0 or minn > maxn else (max(minn, 1), maxn)


def _read_dictionary(stream: StreamReader, lossy: bool, ngram_range: tuple[int, int] | None, limit: int | None) -> tuple[list[str], int]:
    """The dictionary's words and word count; with n-grams, every kept word's n-gram count is checked (before any is built)."""
    at = stream.pos
    size, nwords, nlabels, _ntokens, pruneidx_size = stream.fields(_DICT, "dictionary header", "fastText dictionary")
    if nlabels > 0:
        raise FormatError(
            "supervised fastText models (with labels) are not supported", offset=at + 8, chunk="fastText dictionary", expected="0 labels", found=nlabels
        )
    if size < 0 or size != nwords:
        raise FormatError("dictionary size and word count disagree", offset=at, chunk="fastText dictionary", expected=f"size = nwords = {nwords}", found=size)
    if pruneidx_size == 0:
        warnings.warn(
            "fastText dictionary has pruneidx_size 0, as finalfusion-python 0.7's write_fasttext writes it: read as an unpruned model "
            "(fastText and finalfusion-rust refuse such files; write_fasttext writes -1)",
            LegacyFormatWarning,
            stacklevel=3,
        )
    elif pruneidx_size > 0:
        raise FormatError(
            "pruned fastText dictionaries (from quantization) are not supported",
            offset=at + 20,
            chunk="fastText dictionary",
            expected="pruneidx_size -1",
            found=pruneidx_size,
        )
    rest = stream.remaining()
    if rest is not None and size > rest // (_ENTRY_TAIL + 1):
        raise Truncated(
            f"too few bytes for {size} dictionary entries",
            offset=stream.pos,
            chunk="fastText dictionary",
            expected=f"at least {size * (_ENTRY_TAIL + 1)} bytes",
            found=f"{rest} bytes",
        )
    base = stream.pos
    max_word = limits.MAX_WORD_BYTES  # read once per call (a program may raise it), not per word
    buf = bytearray()
    ends: list[int] = []
    pos = 0
    find = buf.find
    while len(ends) < size:
        end = find(b"\x00", pos, pos + max_word + 1)
        if end < 0 and len(buf) - pos > max_word:
            raise FormatError(
                f"dictionary word longer than {max_word} bytes (its NUL terminator is missing; finalfusion.limits.MAX_WORD_BYTES)",
                offset=base + pos,
                chunk=f"fastText dictionary entry {len(ends)}",
                expected=f"a NUL within {max_word + 1} bytes",
                found=bytes(buf[pos : pos + 40]),
            )
        if end < 0 or end + _ENTRY_TAIL >= len(buf):
            more = stream.read_some(max(_READ, min(len(buf) // 4, 64 * max_word)))
            if not more:
                raise Truncated(
                    f"data ends inside dictionary entry {len(ends)}",
                    offset=base + pos,
                    chunk=f"fastText dictionary entry {len(ends)}",
                    expected="a NUL-terminated word, an i64 count and an i8 entry type",
                    found=f"{len(buf) - pos} bytes",
                )
            buf += more
            continue
        # Entries are scanned in a tight loop: one find per word.
        while len(ends) < size:
            end = find(b"\x00", pos)
            if end < 0 or end + _ENTRY_TAIL >= len(buf):
                break
            ends.append(end)
            pos = end + _ENTRY_TAIL + 1
    stream.unread(bytes(buf[pos:]))  # read ahead: the bytes after the last entry belong to the matrix header
    view = bytes(buf)
    end_arr = np.array(ends, dtype=np.int64)
    starts = np.empty_like(end_arr)
    if size:
        starts[0] = 0
        starts[1:] = end_arr[:-1] + _ENTRY_TAIL + 1
        types = np.frombuffer(view, dtype=np.int8)[end_arr + _ENTRY_TAIL]
        bad = np.flatnonzero(types != 0)
        if len(bad):
            i = int(bad[0])
            raise FormatError(
                "entry is a label, not a word (supervised models are not supported)",
                offset=base + int(end_arr[i]) + _ENTRY_TAIL,
                chunk=f"fastText dictionary entry {i}",
                expected="entry type 0 (word)",
                found=int(types[i]),
            )
    spans = list(zip(starts.tolist(), ends, strict=True))
    try:
        words = [view[s:e].decode("utf-8") for s, e in spans]
    except UnicodeDecodeError:
        words = [decode_word(view[s:e], lossy, f"fastText dictionary entry {i}", base + s) for i, (s, e) in enumerate(spans)]
    kept = words[:limit]
    if ngram_range is not None and kept:
        _check_ngram_counts(kept, ngram_range, [base + s for s, _ in spans])
    return words, nwords


def _check_ngram_counts(words: list[str], ngram_range: tuple[int, int], offsets: list[int]) -> None:
    """Refuse a dictionary word with more n-grams than ``MAX_NGRAMS_PER_WORD`` (the count grows with the length)."""
    i = max(range(len(words)), key=lambda k: len(words[k]))
    min_n, max_n = ngram_range
    count = ngram_count(len(words[i]) + 2, min_n, max_n)
    if count > limits.MAX_NGRAMS_PER_WORD:
        raise FormatError(
            f"dictionary word of {len(words[i])} code points has more n-grams than finalfusion.limits.MAX_NGRAMS_PER_WORD (raise the limit to load it)",
            offset=offsets[i],
            chunk=f"fastText dictionary entry {i}",
            expected=f"at most {limits.MAX_NGRAMS_PER_WORD} {min_n}..{max_n}-grams",
            found=count,
        )


def _check_ngram_total(words: list[str], min_n: int, max_n: int, read: int) -> None:
    """Refuse dictionary words whose n-grams, all together, are more than the file's size can justify.

    Computing the word vectors costs one hash and one row addition per
    n-gram. Real models have far fewer n-grams than bytes (the matrix holds
    ``dim`` floats per row), so the allowance is
    :data:`~finalfusion.limits.MAX_NGRAMS_PER_WORD` plus
    :data:`~finalfusion.limits.MAX_LOAD_NGRAMS_PER_BYTE` per byte read; a
    2 MB file of 1,500 long words with ``minn = 1, maxn = 64`` (69 million
    n-grams, minutes of work) is refused before any is built.
    """
    lengths = np.fromiter(map(len, words), dtype=np.int64, count=len(words)) + 2  # with the markers
    hi = np.minimum(lengths, max_n)
    k = np.maximum(hi - min_n + 1, 0)
    total = int((k * (lengths + 1) - (min_n + hi) * k // 2).sum())
    allowed = limits.MAX_NGRAMS_PER_WORD + limits.MAX_LOAD_NGRAMS_PER_BYTE * read
    if total > allowed:
        raise FormatError(
            f"the dictionary's words have {total:,} {min_n}..{max_n}-grams in all, more than a file of {read:,} bytes can justify "
            "(finalfusion.limits.MAX_NGRAMS_PER_WORD + MAX_LOAD_NGRAMS_PER_BYTE per byte; raise them to load it)",
            offset=read,
            chunk="fastText dictionary",
            expected=f"at most {allowed:,} n-grams",
            found=total,
        )


def _read_input_matrix(stream: StreamReader, nwords: int, args: tuple[Any, ...]) -> npt.NDArray[np.float32]:
    at = stream.pos
    quantized, rows, cols = stream.fields(_MATRIX, "input matrix header", "fastText input matrix")
    if quantized:
        raise FormatError(
            "quantized fastText models (.ftz) are not supported", offset=at, chunk="fastText input matrix", expected="quantized flag 0", found=int(quantized)
        )
    if cols != args[0]:
        raise FormatError("matrix columns differ from the model's dim", offset=at + 9, chunk="fastText input matrix", expected=args[0], found=cols)
    if rows != nwords + args[8]:
        raise FormatError("matrix rows differ from words + buckets", offset=at + 1, chunk="fastText input matrix", expected=f"{nwords} + {args[8]}", found=rows)
    nbytes = rows * cols * 4
    rest = stream.remaining()
    where = "fastText input matrix"
    if rest is not None:
        if nbytes > rest:
            raise Truncated(f"too few bytes for a {rows} x {cols} matrix", offset=stream.pos, chunk=where, expected=f"{nbytes} bytes", found=f"{rest} bytes")
        matrix = np.empty((rows, cols), dtype="<f4")
        stream.into(_raw_bytes(matrix), "the input matrix", where)
    else:
        # Size unknown (compressed input): read in blocks of at most _MATRIX_READ bytes -- whole rows or, for
        # rows longer than that, parts of a row -- so a lying header cannot make us allocate more than we read.
        blocks = []
        total = rows * cols
        step = max(1, _MATRIX_READ // (4 * cols)) * cols if 4 * cols <= _MATRIX_READ else _MATRIX_READ // 4
        for lo in range(0, total, step):
            block = np.empty(min(step, total - lo), dtype="<f4")
            stream.into(_raw_bytes(block), f"the input matrix (row {lo // cols})", where)
            blocks.append(block)
        flat = blocks[0] if len(blocks) == 1 else np.concatenate(blocks) if blocks else np.empty(0, dtype="<f4")
        matrix = flat.reshape(rows, cols)
    if matrix.dtype != np.float32:  # big-endian host
        matrix = matrix.astype(np.float32)
    return matrix


def _word_ngram_rows(vocab: FastTextVocab) -> Iterator[tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]]:
    """Storage rows of fastText's n-grams of every known word, grouped by count.

    Quirks of fastText's ``Dictionary::computeSubwords`` reproduced here:
    ``</s>`` has no n-grams, and with ``minn = 1`` the lone markers ``<``
    and ``>`` are not n-grams. Words left without n-grams are not yielded.
    """
    words = vocab.words
    eos = vocab.word_index.get(EOS, -1)
    max_n = vocab.max_n
    for pos, rows in vocab.batch_subword_rows(words):
        if eos >= 0:
            mask = pos != eos
            pos, rows = pos[mask], rows[mask]
        if vocab.min_n == 1 and len(pos):
            length = len(words[int(pos[0])]) + 2
            drop = {min(max_n, length) - 1, rows.shape[1] - 1}
            rows = np.delete(rows, sorted(drop), axis=1)
        if len(pos) and rows.shape[1]:
            yield pos, rows


def write_fasttext(file: Any, embeddings: Embeddings, *, fsync: bool = False) -> None:
    """Write embeddings as a fastText ``.bin`` model (version 12).

    The result loads in the fastText bindings (``fasttext.load_model``),
    gensim (``load_facebook_model``), finalfusion-rust and
    finalfusion-python 0.7.1, and all of them return the vectors of
    ``embeddings``: word rows are multiplied by their norms and the
    precomputation of :func:`load_fasttext` is undone (word row =
    ``vector * (n + 1) - sum of its n-gram rows``; ``</s>`` keeps its own
    row, as fastText uses it -- gensim, 0.7.1 and finalfusion-rust average
    n-grams into ``</s>`` on any fastText model). Training arguments come
    from the metadata when present (0.7.1's or finalfusion-rust's keys),
    otherwise fastText's defaults; dim, buckets, minn and maxn always come
    from the embeddings. Words are given descending counts ``n, n-1, ...,
    1`` (fastText keeps its dictionary sorted by count and gensim drops
    words with count 0), and the output matrix is written as zeros, so the
    model serves vectors but cannot continue training.

    Parameters
    ----------
    file
        Path (written atomically) or binary file object.
    embeddings
        Embeddings with a :class:`~finalfusion.vocab.FastTextVocab` or a
        :class:`~finalfusion.vocab.SimpleVocab` (written as a model without
        subwords); dense or quantized storage.
    fsync
        Flush to disk before the atomic rename.

    Raises
    ------
    ValueError
        Before anything is written: for another vocabulary type (as
        finalfusion-python 0.7.1), a word fastText cannot store (one
        containing NUL or a lone surrogate) or metadata arguments fastText
        cannot represent; :class:`~finalfusion.errors.NonFiniteError` if a
        word row to be written has a NaN or infinite value (also one that
        undoing the normalisation overflows). Subword rows are written as
        stored.

    Examples
    --------
    >>> import io, numpy as np
    >>> from finalfusion import Embeddings, NdArray, SimpleVocab
    >>> emb = Embeddings(NdArray(np.eye(2, dtype=np.float32)), SimpleVocab(["ja", "nein"]))
    >>> buf = io.BytesIO(); write_fasttext(buf, emb)
    >>> load_fasttext(buf.getvalue(), normalize=False)["nein"].tolist()
    [0.0, 1.0]
    """
    vocab = embeddings.vocab
    if not isinstance(vocab, (FastTextVocab, SimpleVocab)):
        raise ValueError(f"fastText models need a FastTextVocab or SimpleVocab, not {type(vocab).__name__}")  # ValueError as in 0.7.1
    encoded = _encode_words(vocab.words)
    args = _args_for(embeddings)
    n = len(vocab)
    dims = embeddings.dims
    with np.errstate(over="ignore", invalid="ignore"):  # rows that overflow are refused just below
        words = _word_rows(embeddings)
    refuse_nonfinite(words, vocab.words, "fastText")  # the reader normalises word rows: NaN and inf could not come back
    with atomic_output(file, fsync=fsync) as f:
        f.write(_HEADER.pack(MAGIC, VERSION))
        f.write(_ARGS.pack(*args))
        f.write(_DICT.pack(n, n, 0, n * (n + 1) // 2, -1))
        f.write(_dictionary_entries(encoded))
        f.write(_MATRIX.pack(False, n + args[8], dims))
        f.write(_raw_bytes(np.ascontiguousarray(words, dtype="<f4")))
        if isinstance(vocab, FastTextVocab):
            _write_rows(f, embeddings, n, vocab.upper_bound)
        f.write(_MATRIX.pack(False, n, dims))
        zeros = bytes(4 * dims * min(n, max(1, _MATRIX_READ // (4 * dims))))
        left = 4 * dims * n
        while left:
            chunk = min(left, len(zeros))
            f.write(zeros[:chunk])
            left -= chunk


def _encode_words(words: list[str]) -> list[bytes]:
    out = []
    for w in words:
        try:
            b = w.encode("utf-8")
        except UnicodeEncodeError:
            raise ValueError(f"fastText cannot represent the word {w!r}: it is not valid Unicode (lone surrogate)") from None
        if b"\x00" in b:
            raise ValueError(f"fastText cannot represent the word {w!r}: it contains a NUL character (the dictionary's terminator)")
        out.append(b)
    return out


def _dictionary_entries(encoded: list[bytes]) -> bytes:
    n = len(encoded)
    pack = struct.Struct("<xqb").pack  # NUL terminator, count, entry type 0 (word)
    return b"".join([w + pack(n - i, 0) for i, w in enumerate(encoded)])


def _meta_value(meta: Mapping[str, Any], key: str) -> Any:
    if key in meta:
        return meta[key]
    return meta.get(_RUST_KEYS.get(key, key), _DEFAULTS.get(key))


def _args_for(embeddings: Embeddings) -> tuple[Any, ...]:
    """fastText's args from the metadata (0.7.1 or Rust keys), the embeddings and fastText's defaults."""
    meta: Mapping[str, Any] = embeddings.metadata if embeddings.metadata is not None else {}
    vocab = embeddings.vocab
    values: list[Any] = []
    for key in _KEYS:
        value = _meta_value(meta, key)
        if key == "loss":
            value = _code(value, _LOSSES, key, {"hierarchicalsoftmax": 1, "hs": 1, "negativesampling": 2, "ns": 2, "softmax": 3})
        elif key == "model":
            value = _code(value, _MODELS, key, {"cbow": 1, "skipgram": 2, "sg": 2})
            if value == 3:
                raise ValueError("cannot write a supervised fastText model (metadata model = Supervised)")
        elif key == "sampling_threshold":
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise ValueError(f"metadata {key} must be a number, got {value!r}")
            value = float(value)
        elif key not in ("dims", "buckets", "min_n", "max_n") and (isinstance(value, bool) or not isinstance(value, int) or not -(2**31) <= value < 2**31):
            raise ValueError(f"metadata {key} must be a 32-bit integer for fastText, got {value!r}")
        values.append(value)
    values[0] = embeddings.dims
    if isinstance(vocab, FastTextVocab):
        values[8:11] = [vocab.subword_indexer.n_buckets, vocab.min_n, vocab.max_n]
    else:
        values[8:11] = [0, 0, 0]
    return tuple(values)


def _code(value: Any, names: tuple[str, ...], key: str, aliases: dict[str, int]) -> int:
    if isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= len(names):
        return value
    if isinstance(value, str) and value.lower() in aliases:
        return aliases[value.lower()]
    raise ValueError(f"metadata {key} = {value!r} is not a fastText {key}; expected one of {', '.join(names)}")


def _word_rows(embeddings: Embeddings) -> npt.NDArray[np.float32]:
    """fastText's own word rows: vectors times norms, with the n-gram mean undone."""
    words = dense_matrix_with_norms(embeddings)
    vocab = embeddings.vocab
    if not isinstance(vocab, FastTextVocab):
        return words
    storage = embeddings.storage
    take = functools.partial(np.take, storage.matrix, axis=0) if isinstance(storage, NdArray) else storage.rows
    for pos, rows in _word_ngram_rows(vocab):
        scale = np.float32(rows.shape[1] + 1)
        for lo in range(0, len(pos), _BLOCK):
            p = pos[lo : lo + _BLOCK]
            words[p] = words[p] * scale - _row_sum(take, rows[lo : lo + _BLOCK])
    return words


def _write_rows(f: IO[bytes], embeddings: Embeddings, lo: int, hi: int) -> None:
    """Write storage rows ``lo:hi`` as little-endian f32, block by block."""
    storage = embeddings.storage
    step = max(1, _MATRIX_READ // (4 * embeddings.dims))
    for start in range(lo, hi, step):
        stop = min(hi, start + step)
        block = storage.matrix[start:stop] if isinstance(storage, NdArray) else storage.rows(np.arange(start, stop))
        f.write(_raw_bytes(np.ascontiguousarray(block, dtype="<f4")))


def _detect(sample: bytes, path: str | None) -> bool:
    """fastText models start with the magic number (i32 793712314)."""
    return sample.startswith(_MAGIC_BYTES)


_MAGIC_BYTES: Final = struct.pack("<i", MAGIC)

register_format(
    "fasttext",
    description="fastText .bin model (version 12): words, n-gram buckets and training settings",
    extensions=(".bin",),
    order=10,
    detector=_detect,
    loader=load_fasttext,
    writer=write_fasttext,
    options=("normalize", "lossy", "limit", "progress"),
    mismatch="no magic 793712314",
)
