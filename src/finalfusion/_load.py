"""Reading a finalfusion file into the parts of embeddings (the io layer under ``load_finalfusion``).

:func:`read_parts` reads any :data:`~finalfusion.io.Source` through
:func:`finalfusion.container.read_source`, gives each chunk its role (from
its id), checks that the roles fit together and restores a tokenizer
vocabulary from its metadata table; :func:`renumber_explicit` gives the
form a file is written in. The facade
(:func:`finalfusion.embeddings.load_finalfusion`, re-exported by
:mod:`finalfusion.io`) only builds :class:`~finalfusion.Embeddings` from
the parts, so this module never imports the facade.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from typing import NamedTuple, cast

import numpy as np

from finalfusion._fileref import FileRef, UrlRef, remap
from finalfusion._source import Source, local_path
from finalfusion.chunks import Chunk
from finalfusion.container import read_chunks, read_remote, read_source
from finalfusion.errors import BadMagic, FormatError
from finalfusion.metadata import Metadata
from finalfusion.norms import Norms
from finalfusion.storage.ndarray import NdArray, Storage
from finalfusion.storage.quantized import QuantizedArray
from finalfusion.vocab.base import Vocab
from finalfusion.vocab.subword import ExplicitVocab
from finalfusion.vocab.tokenizer import restore_tokenizer_vocab

__all__ = ["Parts", "assemble", "compatibility_problem", "foreign_hint", "read_parts", "register_foreign_namer", "remap_parts", "renumber_explicit"]


class Parts(NamedTuple):
    """The chunks of embeddings, in the order of the :class:`~finalfusion.Embeddings` constructor."""

    storage: Storage
    vocab: Vocab
    norms: Norms | None
    metadata: Metadata | None


def compatibility_problem(storage: Storage, vocab: Vocab, norms: Norms | None) -> str | None:
    """Why the chunks cannot form embeddings, or ``None`` if they can.

    Examples
    --------
    >>> import numpy as np
    >>> from finalfusion.storage import NdArray
    >>> from finalfusion.vocab import SimpleVocab
    >>> compatibility_problem(NdArray(np.eye(2, dtype=np.float32)), SimpleVocab(["a"]), None)
    'storage has 2 rows but the vocabulary needs 1 (1 words + 0 subword rows)'
    """
    if storage.shape[0] != vocab.upper_bound:
        n_sub = vocab.upper_bound - len(vocab)
        return f"storage has {storage.shape[0]} rows but the vocabulary needs {vocab.upper_bound} ({len(vocab)} words + {n_sub} subword rows)"
    if norms is not None and len(norms) != len(vocab):
        return f"there are {len(norms)} norms for {len(vocab)} words"
    return None


def read_parts(file: Source, mmap: bool, cache_bytes: int | None = None) -> tuple[Parts, FileRef | UrlRef | None]:
    """The parts of the embeddings in ``file``, and the reference to the mapped or remote file (if it pickles by reference)."""
    name, chunks, ref = read_source(file, mmap, cache_bytes=cache_bytes)
    return assemble(chunks, name), ref


def remap_parts(ref: FileRef | UrlRef) -> Parts:
    """The parts of pickled mapped (or remote) embeddings: map (open) the referenced file again after checking it is the same."""
    if isinstance(ref, UrlRef):
        return assemble(read_remote(ref.url, ref.cache_bytes, expect=ref).chunks, ref.url)
    _, chunks = read_chunks(remap(ref))
    return assemble(chunks, ref.path)


def assemble(chunks: list[tuple[int, Chunk]], name: str) -> Parts:
    """The parts from the ``(offset, chunk)`` list of a file named ``name`` (for messages).

    Raises
    ------
    FormatError
        If the vocabulary or storage chunk is missing, or the chunks do not
        fit together (rows, norms), naming the offending chunk and offset.
    """
    parts: dict[str, tuple[int, Chunk]] = {}
    for at, chunk in chunks:
        parts[chunk.chunk_id.role] = (at, chunk)
    for role in ("vocab", "storage"):
        if role not in parts:
            raise FormatError(
                f"{name} has no {role} chunk", chunk="file", expected="a vocabulary and a storage chunk", found=[type(c).__name__ for _, c in chunks]
            )
    vocab = cast(Vocab, parts["vocab"][1])
    storage_at, storage_chunk = parts["storage"]
    storage = cast(Storage, storage_chunk)
    norms = cast("Norms | None", parts.get("norms", (0, None))[1])
    problem = compatibility_problem(storage, vocab, norms)
    if problem:
        if norms is not None and "norms" in problem:
            (at, culprit), expected, found = parts["norms"], f"{len(vocab)} norms (one per word)", len(norms)
        else:
            at, culprit, expected, found = storage_at, storage, f"{vocab.upper_bound} rows", storage.shape[0]
        raise FormatError(problem, offset=at, chunk=type(culprit).__name__, expected=expected, found=found)
    meta_at, meta = parts.get("metadata", (None, None))
    vocab, metadata = restore_tokenizer_vocab(vocab, cast("Metadata | None", meta), meta_at)
    return Parts(storage, vocab, norms, metadata)


def renumber_explicit(storage: Storage, vocab: Vocab) -> tuple[Storage, ExplicitVocab] | None:
    """The storage and vocabulary as written, for an explicit vocabulary not numbered by first appearance; else ``None``.

    Files number the subword rows of an explicit vocabulary in order of
    first appearance in the n-gram list (docs/format.md §5.8; finalfusion-rust
    renumbers on reading). An :class:`~finalfusion.subword.ExplicitIndexer`
    built with other dense numbers is renumbered and the subword rows are
    permuted to match, so every lookup of the written file is unchanged.
    """
    if not isinstance(vocab, ExplicitVocab) or vocab.subword_indexer.first_noncanonical() is None:
        return None
    explicit, source = vocab.subword_indexer.renumbered()
    n = len(vocab)
    rows = np.concatenate([np.arange(n, dtype=np.int64), source + n])
    if isinstance(storage, QuantizedArray):
        norms = storage.norms
        storage = dataclasses.replace(
            storage, quantized_embeddings=np.asarray(storage.quantized_embeddings)[rows], norms=None if norms is None else norms[rows]
        )
    else:
        storage = NdArray(storage.rows(rows))
    return storage, ExplicitVocab(vocab.words, explicit)


#: ``namer(sample, path) -> format name or None``: which other format an input that is not finalfusion is in, for the
#: hint of :func:`~finalfusion.load_finalfusion`'s :class:`~finalfusion.errors.BadMagic`. The format table lives above this module
#: (``finalfusion.compat``), so it registers its namer here (:func:`register_foreign_namer`) instead of being imported.
_FOREIGN_NAMERS: list[Callable[[bytes, str | None], str | None]] = []

#: Bytes of an input the namers look at (as :func:`finalfusion.load` does).
_NAMER_SAMPLE = 1 << 16


def register_foreign_namer(namer: Callable[[bytes, str | None], str | None]) -> None:
    """Let ``namer(sample, path)`` name the format of an input that :func:`~finalfusion.load_finalfusion` finds is not finalfusion.

    ``finalfusion.compat`` registers the detectors of its format table
    here, so that ``load_finalfusion("vectors.bin")`` on a word2vec file
    says so and points to :func:`finalfusion.load` (the facade cannot
    import the table: it sits below it). ``namer`` gets the first 64 KiB
    of a regular file or of the contents (file objects, descriptors and
    streams are not looked at) and the path, if any; it must not raise.

    Examples
    --------
    >>> from finalfusion import load_finalfusion
    >>> from finalfusion.errors import BadMagic
    >>> try:
    ...     load_finalfusion(b"3 2\\nBerlin 1 2\\nParis 3 4\\nRome 5 6\\n")
    ... except BadMagic as err:
    ...     print(err)  # doctest: +ELLIPSIS
    header: not a finalfusion file but text-dims, which finalfusion.load(path) reads: expected b'FiFu', found b'3 2\\n' ...
    """
    if namer not in _FOREIGN_NAMERS:
        _FOREIGN_NAMERS.append(namer)


def foreign_hint(exc: BadMagic, file: Source) -> BadMagic:
    """``exc`` naming the format the input is in instead (if a registered namer knows it) and :func:`finalfusion.load`."""
    path = local_path(file)
    try:
        if path is not None and os.path.isfile(path):  # a regular file only: a FIFO cannot be read twice
            with open(path, "rb") as f:
                sample = f.read(_NAMER_SAMPLE)
        elif path is None and isinstance(file, (bytes, bytearray, memoryview)):
            sample = bytes(memoryview(file)[:_NAMER_SAMPLE])
        else:  # a stream: its first four bytes are gone, and four bytes are too few to tell a format
            return exc
    except OSError:
        return exc
    name = next((n for n in (namer(sample, path) for namer in _FOREIGN_NAMERS) if n is not None), None)
    if name is None:
        return exc
    return BadMagic(
        f"not a finalfusion file but {name}, which finalfusion.load(path) reads", offset=exc.offset, chunk=exc.chunk, expected=exc.expected, found=exc.found
    )
