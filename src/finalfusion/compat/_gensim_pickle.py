"""gensim's ``KeyedVectors.load``: the files ``kv.save(fname)`` writes, read as data, without gensim.

gensim saves a ``KeyedVectors`` (or ``FastTextKeyedVectors``) with
``pickle``, large arrays aside in ``fname.<attribute>.npy`` files (``.npz``
when ``fname`` ends in ``.gz`` or ``.bz2``), and loads it with
``pickle.load``, which runs whatever code the file names. Here a file's
content is data, never an instruction: the unpickler resolves only the names
such a file holds -- gensim's two classes (read as plain records, gensim is
not imported), numpy arrays and dtypes -- and any other name is a
:class:`~finalfusion.FormatError` that names it. The side arrays are opened
only as ``<the file's name>.<known attribute>.npy`` next to it (``_source``'s
one rule for sibling files), with ``allow_pickle=False``.
"""

from __future__ import annotations

import functools
import math
import os
import pickle
import struct
import zipfile
from typing import IO, Any, Literal

import numpy as np
import numpy.typing as npt

from finalfusion import limits
from finalfusion._gensim_api import register_loader
from finalfusion._source import Source, file_in, local_path, open_regular, open_stream, peek, sibling
from finalfusion.compat._pickle_data import NUMPY_GLOBALS, DataUnpickler, array_of
from finalfusion.embeddings import Embeddings
from finalfusion.errors import FormatError
from finalfusion.storage.ndarray import NdArray
from finalfusion.subword.hashing import fnv1a32_fasttext
from finalfusion.subword.indexers import FastTextIndexer
from finalfusion.vocab.simple import SimpleVocab
from finalfusion.vocab.subword import FastTextVocab

__all__ = ["load_keyedvectors"]

WHAT = "gensim KeyedVectors file"

#: The arrays gensim may store aside, and the ones this reader needs (the ``*_lockf`` training weights are not read).
_SIDE_ARRAYS = frozenset({"vectors", "vectors_vocab", "vectors_ngrams", "vectors_lockf", "vectors_vocab_lockf", "vectors_ngrams_lockf", "norms"})
_NEEDED = ("vectors", "vectors_vocab", "vectors_ngrams")


class _Record:
    """What a pickled gensim class becomes: its attributes, nothing else (no methods of gensim's run)."""

    kind = "KeyedVectors"

    def __setstate__(self, state: Any) -> None:
        if not isinstance(state, dict):
            raise FormatError("the object's state is not a dict of attributes", chunk=WHAT, found=type(state).__name__)
        self.__dict__["state"] = state


class _FastTextRecord(_Record):
    kind = "FastTextKeyedVectors"


#: Every global a gensim ``KeyedVectors`` pickle refers to: gensim's two classes, and numpy's arrays as data.
_GLOBALS: dict[tuple[str, str], object] = {
    ("gensim.models.keyedvectors", "KeyedVectors"): _Record,
    ("gensim.models.fasttext", "FastTextKeyedVectors"): _FastTextRecord,
    **NUMPY_GLOBALS,
}


class _GensimUnpickler(DataUnpickler):
    buildable = (*DataUnpickler.buildable, _Record)

    def find_class(self, module: str, name: str) -> Any:
        found = _GLOBALS.get((module, name))
        if found is None:
            raise FormatError(
                "the pickle names something else than gensim's KeyedVectors and numpy arrays (never imported: unpickling it "
                "would run code); for a whole gensim model, save its vectors: model.wv.save(fname)",
                chunk=WHAT,
                expected="KeyedVectors, FastTextKeyedVectors or numpy arrays",
                found=f"{module}.{name}",
            )
        return found


#: What pickle's Python unpickler raises on bytes it cannot read (OverflowError: a length past what the platform addresses).
_UNREADABLE = (pickle.UnpicklingError, struct.error, EOFError, ValueError, TypeError, AttributeError, LookupError, MemoryError, RecursionError, OverflowError)


def _unpickle(f: IO[bytes]) -> _Record:
    head, f = peek(f, 2)
    if head[:1] != b"\x80":  # the PROTO opcode: gensim pickles with protocol 2 or later
        raise FormatError(
            "not a pickle (finalfusion.load reads finalfusion, word2vec, fastText, text and model files)",
            offset=0,
            chunk=WHAT,
            expected="a pickle, starting with byte 0x80",
            found=repr(head),
        )
    try:
        obj = _GensimUnpickler(f).load()
    except FormatError as e:
        if e.chunk == "pickle":  # compat._pickle_data's own checks: name the file they are in
            raise FormatError(e.message, chunk=WHAT, expected=e.expected, found=e.found) from None
        raise
    except _UNREADABLE as e:
        # (OverflowError: a FRAME or a length past what the platform can address)
        raise FormatError(f"not a readable pickle ({type(e).__name__}: {e})", chunk=WHAT) from None
    if not isinstance(obj, _Record) or "state" not in obj.__dict__:
        raise FormatError("the pickle holds no gensim KeyedVectors", chunk=WHAT, expected="a KeyedVectors object", found=type(obj).__name__)
    state = obj.__dict__["state"]
    for key, value in state.items():  # the arrays the reader uses are attributes of the object itself
        state[key] = array_of(value)
    return obj


def _side_array(path: str | None, attrib: str, mmap: Literal["r"] | None) -> npt.NDArray[Any]:
    """``<path>.<attrib>.npy`` (``.npz`` for a compressed file), as gensim's ``_load_specials`` names it.

    Found by convention beside the pickle, it passes the directory rule (:func:`~finalfusion._source.file_in`): a regular
    file inside the pickle's directory, never a FIFO, a device or a link out of it; it is opened with
    :func:`~finalfusion._source.open_regular` (numpy's memory map opens it again by its name, just checked).
    """
    if path is None:
        raise FormatError(f"the array {attrib!r} is in a separate file next to the pickle: pass the pickle's path, not its contents", chunk=WHAT)
    compressed = path.endswith((".gz", ".bz2"))
    directory, base = os.path.split(path)
    name = f"{base}.{attrib}.{'npz' if compressed else 'npy'}"
    side = sibling(directory or ".", name, chunk=WHAT)
    if file_in(directory or ".", name, chunk=WHAT) is None:
        raise FormatError(f"the array {attrib!r} stored aside is missing", chunk=WHAT, expected=side, found="no such file")
    try:
        with open_regular(side, chunk=WHAT) as f:
            if compressed:
                return _npz_val(f, side, attrib)
            _npy_size_matches(f, os.fstat(f.fileno()).st_size, side, attrib)
            if mmap is not None:
                return np.asarray(np.load(side, mmap_mode=mmap, allow_pickle=False))
            return np.asarray(np.load(f, allow_pickle=False))
    except FormatError:
        raise
    except OSError as e:
        raise FormatError(f"cannot read the array {attrib!r} stored aside in {side}: {e}", chunk=WHAT) from None
    except (ValueError, KeyError, EOFError, zipfile.BadZipFile) as e:
        raise FormatError(f"the array {attrib!r} stored aside in {side} is not a readable .npy/.npz array: {e}", chunk=WHAT) from None


def _npy_size_matches(f: IO[bytes], size: int, side: str, attrib: str) -> None:
    """The ``.npy`` data in ``f`` (``size`` bytes) is exactly what its header declares, checked before a byte of data is read.

    numpy's ``np.load`` reads what the header declares and ignores the rest, so a file may be much larger than what
    it holds, or declare more than it has; either is refused (numpy writes exactly header and data).
    """
    fmt = np.lib.format
    try:
        version = fmt.read_magic(f)
        read_header = {(1, 0): fmt.read_array_header_1_0, (2, 0): fmt.read_array_header_2_0}.get(version)
        if read_header is None:
            raise ValueError(f".npy version {version} (numpy writes float arrays as 1.0 or 2.0)")
        shape, _, dtype = read_header(f)
    except ValueError as e:
        raise FormatError(f"the array {attrib!r} stored aside in {side} has no readable .npy header: {e}", chunk=WHAT) from None
    declared = f.tell() + math.prod(shape) * dtype.itemsize
    if dtype.hasobject or declared != size:
        raise FormatError(
            f"the array {attrib!r} stored aside in {side} is not the size its header declares",
            chunk=WHAT,
            expected=f"{declared} bytes ({shape!r} x {dtype})",
            found=f"{size} bytes",
        )
    f.seek(0)


def _npz_val(f: IO[bytes], side: str, attrib: str) -> npt.NDArray[Any]:
    """The one array ``val`` of a gensim ``.npz`` file, its expansion bounded like gzip input's (``limits.MAX_GZIP_EXPANSION``)."""
    size = os.fstat(f.fileno()).st_size
    with zipfile.ZipFile(f) as z:
        try:
            info = z.getinfo("val.npy")
        except KeyError:
            raise FormatError(f"the array {attrib!r} stored aside in {side} has no 'val.npy'", chunk=WHAT, found=z.namelist()[:5]) from None
        bound = max(1, limits.MAX_GZIP_EXPANSION) * size + (1 << 20)
        if info.file_size > bound:
            raise FormatError(
                f"the array {attrib!r} stored aside in {side} expands past the limit MAX_GZIP_EXPANSION",
                chunk=WHAT,
                expected=f"at most {bound} bytes",
                found=f"{info.file_size} bytes",
            )
        with z.open(info) as member:
            _npy_size_matches(member, info.file_size, side, attrib)
        with z.open(info) as member:  # zipfile stops at the declared size and checks the CRC
            return np.asarray(np.load(member, allow_pickle=False))


def _matrix(state: dict[str, Any], name: str, rows: int | None, dims: int) -> npt.NDArray[np.float32]:
    a = state.get(name)
    if not isinstance(a, np.ndarray) or a.dtype.kind != "f" or a.ndim != 2 or a.shape[1] != dims or (rows is not None and a.shape[0] != rows):
        found = f"{a.dtype} array of shape {a.shape}" if isinstance(a, np.ndarray) else type(a).__name__
        raise FormatError(f"bad {name!r}", chunk=WHAT, expected=f"a float array of shape ({'n' if rows is None else rows}, {dims})", found=found)
    return a if a.dtype == np.float32 else a.astype(np.float32)


def _int(state: dict[str, Any], name: str) -> int:
    v = state.get(name)
    if not isinstance(v, int) or isinstance(v, bool) or v < 0:
        raise FormatError(f"bad {name!r}", chunk=WHAT, expected="a non-negative int", found=repr(v))
    return v


@functools.cache
def _gensim_order(length: int, min_n: int, max_n: int) -> npt.NDArray[np.intp]:
    """The permutation that puts the buckets :class:`FastTextIndexer` lists for a word of ``length`` code points into gensim's order.

    gensim's ``ft_ngram_hashes`` lists the n-grams by start, then length
    (shortest first); summing the rows in that order gives gensim's float32 vectors bit for
    bit. The order depends on the length only, so a probe word of distinct
    characters, hashed into 2**31 - 1 buckets (no collisions among its few
    n-grams), shows where each of gensim's n-grams is in the indexer's list.
    """
    bracketed = "<" + "".join(chr(0x4E00 + i) for i in range(length)) + ">"
    wide = FastTextIndexer(2**31 - 1, min_n, max_n)
    position = {int(b): i for i, b in enumerate(wide.word_indices(bracketed[1:-1]))}
    end = len(bracketed)
    # gensim leaves out the brackets on their own (min_n = 1), which finalfusion's indexer lists.
    grams = [bracketed[s : s + n] for s in range(end) for n in range(min_n, max_n + 1) if s + n <= end and not (n == 1 and s in (0, end - 1))]
    return np.array([position[fnv1a32_fasttext(g.encode("utf-8")) % (2**31 - 1)] for g in grams], dtype=np.intp)


def _compose(vocab_rows: npt.NDArray[np.float32], ngrams: npt.NDArray[np.float32], words: list[str], indexer: FastTextIndexer) -> npt.NDArray[np.float32]:
    """gensim's ``adjust_vectors``: each word's vector is the mean of its own row and its n-gram bucket rows, summed in gensim's order."""
    vectors = np.array(vocab_rows, dtype=np.float32)
    for positions, buckets in indexer.batch_groups(words):
        # Words with as many n-grams have as many code points: one permutation per group.
        buckets = buckets[:, _gensim_order(len(words[int(positions[0])]), indexer.min_n, indexer.max_n)]
        acc = vectors[positions]
        for j in range(buckets.shape[1]):
            acc += ngrams[buckets[:, j]]
        vectors[positions] = acc / np.float32(buckets.shape[1] + 1)
    return vectors


def load_keyedvectors(fname: Source, mmap: Literal["r"] | None = None) -> Embeddings:
    """gensim's ``KeyedVectors.load(fname, mmap=None)``: a file written by gensim's ``kv.save(fname)``, read without gensim.

    The vectors are kept as stored (no norms), as by
    :func:`~finalfusion.compat.load_word2vec_format`, so every spelling of a
    vocabulary word, ``emb[w]`` included, gives gensim's ``kv[w]`` (an unknown
    word of a fastText vocabulary: :meth:`~finalfusion.Embeddings.get_vector`
    gives gensim's, ``emb[w]`` finalfusion's unit vector). A ``FastTextKeyedVectors``
    becomes a :class:`~finalfusion.vocab.FastTextVocab` with its buckets and
    n-gram lengths; its word vectors are recomposed from ``vectors_vocab``
    and ``vectors_ngrams`` as gensim's loader does when they were saved
    without them. ``float64`` vectors become ``float32``.

    Parameters
    ----------
    fname
        The path gensim saved to (arrays stored aside are read from beside
        it), or the pickle's contents when everything is in one file (as
        :meth:`~finalfusion.Embeddings.save` writes it).
    mmap
        ``"r"`` memory-maps the word vectors gensim stored aside in a
        ``.npy`` file (gensim's ``mmap="r"``); ``None`` reads them. fastText
        vectors are always read (their word vectors are composed from the stored rows).

    Raises
    ------
    FormatError
        If the file is not a gensim ``KeyedVectors`` pickle (the name it
        holds instead is in the message; it is never imported), or its
        vectors do not match its words.
    ValueError
        If ``mmap`` is neither ``None`` nor ``"r"``.

    Examples
    --------
    >>> import io, pickle, numpy as np
    >>> from finalfusion.compat._gensim_pickle import load_keyedvectors
    >>> load_keyedvectors(pickle.dumps(print))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    finalfusion.errors.FormatError: gensim KeyedVectors file: the pickle names something else ... found builtins.print
    """
    if mmap not in (None, "r"):
        raise ValueError(f"mmap must be None or 'r' (the storage is read-only), got {mmap!r}")
    with open_stream(fname) as f:
        record = _unpickle(f)
    state = record.__dict__["state"]
    path = local_path(fname)
    aside = state.get("__numpys", [])
    if not isinstance(aside, list):
        raise FormatError("bad list of arrays stored aside", chunk=WHAT, expected="a list of attribute names", found=type(aside).__name__)
    for attrib in aside:
        if attrib not in _SIDE_ARRAYS:
            raise FormatError("an unknown array stored aside", chunk=WHAT, expected=", ".join(sorted(_SIDE_ARRAYS)), found=repr(attrib))
        if attrib in _NEEDED:
            state[attrib] = _side_array(path, attrib, mmap if attrib == "vectors" else None)
    if state.get("__scipys") or state.get("__recursive_saveloads"):
        raise FormatError("sparse matrices or nested objects stored aside: not a KeyedVectors file", chunk=WHAT)
    words = state.get("index_to_key")
    if not isinstance(words, list):
        gensim3 = "a gensim 3 file? load it in gensim 4 and save it again"
        raise FormatError(f"bad 'index_to_key' ({gensim3})", chunk=WHAT, expected="a list of words", found=type(words).__name__)
    bad = [w for w in words if not isinstance(w, str)][:1]  # (a key may be None itself)
    if bad:
        raise FormatError("a key is not a str (finalfusion's words are)", chunk=WHAT, expected="str", found=f"{type(bad[0]).__name__} {bad[0]!r}"[:200])
    if len(set(words)) != len(words):
        raise FormatError("a word occurs twice in 'index_to_key'", chunk=WHAT)
    dims = _int(state, "vector_size")
    if record.kind == "KeyedVectors":
        return Embeddings(NdArray(_matrix(state, "vectors", len(words), dims)), SimpleVocab(words))
    if state.get("bucket") == 0:  # fastText without subwords: the word vectors are vectors_vocab (gensim's adjust_vectors)
        name = "vectors" if state.get("vectors") is not None else "vectors_vocab"
        return Embeddings(NdArray(_matrix(state, name, len(words), dims)), SimpleVocab(words))
    if state.get("compatible_hash") is not True:
        raise FormatError(
            "a fastText model with gensim's pre-3.8 hashing (gensim 4 refuses it too)",
            chunk=WHAT,
            expected="compatible_hash=True",
            found=state.get("compatible_hash"),
        )
    bucket, min_n, max_n = _int(state, "bucket"), _int(state, "min_n"), _int(state, "max_n")
    try:
        indexer = FastTextIndexer(bucket, min_n, max_n)
    except ValueError as e:  # a bucket count or n-gram range out of bounds
        raise FormatError(f"bad fastText subword settings: {e}", chunk=WHAT) from None
    ngrams = _matrix(state, "vectors_ngrams", indexer.n_buckets, dims)
    if state.get("vectors") is not None:
        vectors = _matrix(state, "vectors", len(words), dims)
    else:
        vectors = _compose(_matrix(state, "vectors_vocab", len(words), dims), ngrams, words, indexer)
    return Embeddings(NdArray(np.concatenate([vectors, ngrams])), FastTextVocab(words, indexer))


register_loader("load", load_keyedvectors)
