"""Error hierarchy of finalfusion.

Every problem with the *contents* of a file raises a :class:`FormatError`
(a :class:`ValueError`) that names what was expected, what was found, the
absolute byte offset and the chunk in which it happened::

    FinalfusionError
    ├── FileChangedError
    ├── StaleIndexError (also a ValueError)
    ├── LimitExceeded (also a ValueError)
    ├── NonFiniteError (also a ValueError)
    └── FormatError (also a ValueError)
        ├── BadMagic
        ├── UnsupportedVersion
        ├── UnknownChunk
        ├── ChunkOrder
        └── Truncated

    MissingExtraError (a ModuleNotFoundError): an optional package is not installed

I/O problems (a missing file, a full disk) stay :class:`OSError`.
"""

from __future__ import annotations

import importlib
from types import ModuleType

__all__ = [
    "BadMagic",
    "ChunkOrder",
    "FileChangedError",
    "FinalfusionError",
    "FormatError",
    "LegacyFormatWarning",
    "LimitExceeded",
    "MissingExtraError",
    "NonFiniteError",
    "OutputRefused",
    "StaleIndexError",
    "Truncated",
    "UnknownChunk",
    "UnsupportedVersion",
    "import_extra",
]


class FinalfusionError(Exception):
    """Base class of every exception raised deliberately by this library.

    Examples
    --------
    >>> from finalfusion import load_finalfusion
    >>> try:
    ...     load_finalfusion(b"not embeddings")
    ... except FinalfusionError as err:
    ...     print(type(err).__name__, isinstance(err, FinalfusionError))
    BadMagic True
    """


class FormatError(FinalfusionError, ValueError):
    """A file (or a part of one) does not follow the format.

    Parameters
    ----------
    message
        What is wrong, in words.
    offset
        Absolute byte offset in the file at which the problem was found,
        if it is known.
    chunk
        Name of the chunk (or foreign format section) being read.
    expected, found
        What the reader expected and what it found instead.

    Examples
    --------
    >>> err = FormatError("bad type id", offset=105, chunk="NdArray", expected=10, found=3)
    >>> str(err)
    'NdArray: bad type id: expected 10, found 3 (at byte offset 105)'
    >>> isinstance(err, ValueError)
    True
    """

    def __init__(
        self,
        message: str,
        *,
        offset: int | None = None,
        chunk: str | None = None,
        expected: object = None,
        found: object = None,
    ) -> None:
        self.message = message
        self.offset = offset
        self.chunk = chunk
        self.expected = expected
        self.found = found
        super().__init__(self._render())

    def _render(self) -> str:
        text = f"{self.chunk}: {self.message}" if self.chunk else self.message
        if self.expected is not None or self.found is not None:
            text += f": expected {self.expected}, found {self.found}"
        if self.offset is not None:
            text += f" (at byte offset {self.offset})"
        return text

    def __reduce__(self) -> tuple[object, ...]:
        # Keep keyword-only details through pickling (multiprocessing workers).
        return (
            _rebuild_error,
            (type(self), self.message, self.offset, self.chunk, self.expected, self.found),
        )

    def moved(self, delta: int) -> FormatError:
        """This error, its offset moved by ``delta`` bytes: for a part parsed from a buffer that starts ``delta`` bytes into the file.

        Examples
        --------
        >>> FormatError("bad type id", offset=5, chunk="NdArray").moved(100)
        FormatError('NdArray: bad type id (at byte offset 105)')
        """
        if self.offset is not None:
            self.offset += delta
            self.args = (self._render(),)
        return self


def _rebuild_error(
    cls: type[FormatError],
    message: str,
    offset: int | None,
    chunk: str | None,
    expected: object,
    found: object,
) -> FormatError:
    return cls(message, offset=offset, chunk=chunk, expected=expected, found=found)


class BadMagic(FormatError):
    """The file does not start with the ``FiFu`` magic (or a foreign format's magic).

    Examples
    --------
    >>> from finalfusion import load_finalfusion
    >>> load_finalfusion(b"FoFu" + bytes(8))
    Traceback (most recent call last):
    ...
    finalfusion.errors.BadMagic: header: not a finalfusion file: expected b'FiFu', found b'FoFu' (at byte offset 0)
    """


class UnsupportedVersion(FormatError):
    """The file's format version is not one this library reads.

    Examples
    --------
    >>> from finalfusion import load_finalfusion
    >>> load_finalfusion(b"FiFu" + (1).to_bytes(4, "little") + (1).to_bytes(4, "little"))
    Traceback (most recent call last):
    ...
    finalfusion.errors.UnsupportedVersion: header: unsupported format version: expected 0, found 1 (at byte offset 4)
    """


class UnknownChunk(FormatError):
    """A chunk or data type identifier that the format does not define.

    Examples
    --------
    >>> from finalfusion.chunks import chunk_class
    >>> chunk_class(42)
    Traceback (most recent call last):
    ...
    finalfusion.errors.UnknownChunk: chunk stream: unknown chunk identifier: expected one of [1, 2, 3, 4, 5, 6, 7, 8, 9], found 42
    """


class ChunkOrder(FormatError):
    """Chunks are missing, duplicated, out of order, or disagree with the header.

    Examples
    --------
    >>> import io, numpy as np
    >>> from finalfusion import NdArray, SimpleVocab
    >>> from finalfusion.io import write_chunks
    >>> try:
    ...     write_chunks([NdArray(np.eye(1, dtype=np.float32)), SimpleVocab(["a"])], io.BytesIO())  # storage before vocabulary
    ... except ChunkOrder as err:
    ...     print(err.expected, "/", err.found)
    [Metadata] vocabulary storage [NdNorms] / ['NdArray', 'SimpleVocab']
    """


class Truncated(FormatError):
    """The data ends (or a declared size points) before a field is complete.

    Examples
    --------
    >>> import io
    >>> from finalfusion import SimpleVocab, load_vocab
    >>> buf = io.BytesIO()
    >>> SimpleVocab(["a", "b"]).write(buf)
    >>> try:
    ...     load_vocab(buf.getvalue()[:-3])
    ... except Truncated as err:
    ...     print(err.chunk, err.offset, isinstance(err, FormatError))
    SimpleVocab 20 True
    """


class FileChangedError(FinalfusionError):
    """A memory-mapped file referenced by pickled embeddings is no longer the same file.

    Raised when unpickling :class:`~finalfusion.Embeddings` that were loaded
    with ``mmap=True`` (and therefore pickled as a reference to their file)
    finds the file replaced or modified: its size, modification time or the
    digest of its first and last 64 KiB differ. Not a :class:`FormatError`:
    the new file may be perfectly valid, just not the one that was pickled.

    Examples
    --------
    >>> import os, pickle, tempfile, numpy as np
    >>> from finalfusion import Embeddings, NdArray, SimpleVocab, load_finalfusion
    >>> path = os.path.join(tempfile.mkdtemp(), "e.fifu")
    >>> Embeddings(NdArray(np.eye(2, dtype=np.float32)), SimpleVocab(["a", "b"])).write(path)
    >>> data = pickle.dumps(load_finalfusion(path, mmap=True))  # a reference to the file
    >>> Embeddings(NdArray(np.ones((2, 2), dtype=np.float32)), SimpleVocab(["a", "b"])).write(path)
    >>> try:
    ...     pickle.loads(data)
    ... except FileChangedError as err:
    ...     print("changed since the embeddings were pickled" in str(err), isinstance(err, FinalfusionError))
    True True
    """


class StaleIndexError(FinalfusionError, ValueError):
    """An approximate-neighbour index was built for other embeddings (or its files changed).

    Raised by :func:`finalfusion.ann.load_index` and
    :meth:`finalfusion.ann.AnnIndex.check` when the words, the word rows or
    the storage of the embeddings differ from those the index was built
    over, and by unpickling an index whose saved files were replaced since.
    Not a :class:`FormatError`: both the index and the embeddings may be
    valid, just not for each other. A :class:`ValueError`, as a mismatched
    argument is.

    Examples
    --------
    >>> err = StaleIndexError("the index was built for other embeddings: different words")
    >>> isinstance(err, FinalfusionError), isinstance(err, ValueError)
    (True, True)
    """


class LimitExceeded(FinalfusionError, ValueError):
    """A query needs more work than a resource bound of :mod:`finalfusion.limits` allows.

    Raised, for example, by the lookup of an unknown word with more n-grams
    than :data:`finalfusion.limits.MAX_NGRAMS_PER_WORD`. The message names the
    limit, the count and how to raise the limit. (A file past a limit is a
    :class:`FormatError` instead.)

    Examples
    --------
    >>> import finalfusion.limits
    >>> from finalfusion.subword import FastTextIndexer
    >>> finalfusion.limits.MAX_NGRAMS_PER_WORD = 10
    >>> try:
    ...     FastTextIndexer(100, 3, 6).subword_indices("a" * 20)
    ... except LimitExceeded as err:
    ...     print(str(err)[:66], isinstance(err, ValueError))
    ... finally:
    ...     finalfusion.limits.MAX_NGRAMS_PER_WORD = 1 << 22
    the word has 74 n-grams (3..6 of 22 code points, markers included) True
    """


class NonFiniteError(FinalfusionError, ValueError):
    """A vector that a computation needs finite has a NaN or infinite component.

    Raised by the similarity queries for a query vector (a word's row, or a
    vector passed in) with NaN or infinity, and by writers for rows whose
    values (after multiplying the norms back) their format's reader would
    refuse. The message names the word or the row. A :class:`ValueError`,
    as such queries raised before.

    Examples
    --------
    >>> import numpy as np
    >>> from finalfusion import Embeddings, NdArray, SimpleVocab
    >>> emb = Embeddings(NdArray(np.array([[np.nan, 1], [1, 0]], dtype=np.float32)), SimpleVocab(["a", "b"]))
    >>> try:
    ...     emb.word_similarity("a")
    ... except NonFiniteError as err:
    ...     print(err, isinstance(err, ValueError))
    the vector of the word 'a' has a NaN or infinite component: [nan, 1.0] True
    """


class OutputRefused(FinalfusionError, FileExistsError):
    """A write refused because it would replace or destroy something the library did not write.

    Raised by every writer of a directory (:meth:`finalfusion.ann.AnnIndex.save`,
    :func:`finalfusion.compat.model2vec.write_model2vec`) for a target that
    is a file, a symbolic link, or a directory holding files finalfusion did
    not write there (its manifest does not list them, or they changed); the
    message names those files. The command line raises it for an output
    that is one of the command's own inputs. A :class:`FileExistsError`
    (``errno.EEXIST``), as such targets were refused before.

    Examples
    --------
    >>> import errno
    >>> err = OutputRefused(errno.EEXIST, "holds files finalfusion did not write: notes.txt; not replaced", "out")
    >>> isinstance(err, FinalfusionError), isinstance(err, FileExistsError), err.filename
    (True, True, 'out')
    """


class LegacyFormatWarning(UserWarning):
    """A file deviates from the format in a known, harmless way written by an old tool.

    Such files are read correctly; writing them back always produces the
    correct form.

    Examples
    --------
    A file whose header omits its ``NdNorms`` chunk (finalfusion-rust < 0.11):

    >>> import io, warnings, numpy as np
    >>> from finalfusion import Embeddings, NdArray, Norms, SimpleVocab, load_finalfusion
    >>> buf = io.BytesIO()
    >>> Embeddings(NdArray(np.eye(1, dtype=np.float32)), SimpleVocab(["a"]), norms=Norms([2.0])).write(buf)
    >>> data = buf.getvalue()
    >>> old = data[:8] + (2).to_bytes(4, "little") + data[12:20] + data[24:]  # header lists 2 of the 3 chunks
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     emb = load_finalfusion(old)
    >>> caught[0].category.__name__, float(emb.norms[0])
    ('LegacyFormatWarning', 2.0)
    """


class MissingExtraError(ModuleNotFoundError):
    """A call needs an optional package that is not installed; the message names the extra that installs it.

    The one error for every optional package (gguf, sentencepiece,
    tokenizers, h5py, gensim, matplotlib, tqdm ...). A
    :class:`ModuleNotFoundError`, so ``except ImportError`` still catches it.

    Parameters
    ----------
    package
        The missing import name (``err.name``).
    what
        What needed it, for the message.
    extra
        The ``finalfusion-py`` extra that installs it (``err.extra``).
    install
        The command that installs it, where no extra does (fsspec's own
        protocol packages); default ``pip install 'finalfusion-py[extra]'``.

    Examples
    --------
    >>> err = MissingExtraError("sentencepiece", "tokenizing an unknown word")
    >>> print(err)
    tokenizing an unknown word needs the sentencepiece package: pip install 'finalfusion-py[models]'
    >>> isinstance(err, ImportError), err.name, err.extra
    (True, 'sentencepiece', 'models')
    """

    def __init__(self, package: str, what: str = "tokenizing an unknown word", extra: str = "models", install: str | None = None) -> None:
        super().__init__(f"{what} needs the {package} package: {install or f'pip install {chr(39)}finalfusion-py[{extra}]{chr(39)}'}", name=package)
        self.extra = extra
        self.install = install

    def __reduce__(self) -> tuple[type[MissingExtraError], tuple[str, str, str, str | None]]:
        what, _, _ = str(self).partition(f" needs the {self.name} package")
        return (type(self), (str(self.name), what, self.extra, self.install))


def import_extra(module: str, what: str, extra: str) -> ModuleType:
    """Import an optional package, or raise :class:`MissingExtraError` naming the extra that installs it.

    Parameters
    ----------
    module
        The module to import (``"gguf.quants"``); the error names its top-level package.
    what
        What needs it, for the message (``"decoding a Q4_K tensor"``).
    extra
        The smallest ``finalfusion-py`` extra that installs it (``"models"`` for a model's tokenizer library,
        ``"gensim"``, ``"plot"``, ``"ann"``, ``"cli"``).

    Examples
    --------
    >>> import_extra("json", "reading JSON", extra="models").__name__
    'json'
    >>> try:
    ...     import_extra("no_such_package_here", "plotting", extra="plot")
    ... except MissingExtraError as err:
    ...     print(err)
    plotting needs the no_such_package_here package: pip install 'finalfusion-py[plot]'
    """
    try:
        return importlib.import_module(module)
    except ImportError:
        raise MissingExtraError(module.partition(".")[0], what, extra) from None
