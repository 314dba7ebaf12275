"""SentencePiece models with piece vectors (BPEmb-style) as embeddings.

BPEmb and similar projects ship a SentencePiece ``.model`` and one vector
per piece, usually as a word2vec file keyed by piece. :func:`load_sentencepiece`
joins the two: row ``i`` is piece id ``i``, and words that are not pieces
are embedded through the model's own tokenizer (a
:class:`~finalfusion.vocab.TokenizerVocab` with a
:class:`~finalfusion.vocab.SentencePieceTokenizer`).

The pieces are read from the ``ModelProto`` here, from the protobuf wire
format (``ModelProto.pieces`` = field 1, each ``SentencePiece`` with
``piece`` = 1, ``score`` = 2, ``type`` = 3; ``trainer_spec`` = 2 with the
special ids 40-43; ``normalizer_spec`` = 3), so loading works without the
``sentencepiece`` and ``protobuf`` packages; tokenizing unknown words
needs ``sentencepiece``.
"""

from __future__ import annotations

import os
from typing import Any, cast

import numpy as np
import numpy.typing as npt

from finalfusion import limits
from finalfusion._source import Source, fill, sized_or_stream
from finalfusion._tokenizers import SentencePieceTokenizer
from finalfusion.compat._build import checked_norms
from finalfusion.compat._rows import dense_matrix_with_norms
from finalfusion.compat._spmodel import CONTROL, FORMAT, UNKNOWN, UNUSED, SentencePieceModel
from finalfusion.embeddings import Embeddings
from finalfusion.errors import FormatError
from finalfusion.metadata import Metadata
from finalfusion.storage import NdArray
from finalfusion.vocab.tokenizer import TokenizerVocab

__all__ = ["SentencePieceModel", "load_sentencepiece"]


def _model_bytes(model: Source) -> bytes:
    """The ``ModelProto``'s bytes: an input of known size whole; gzip (decompressed) or another stream up to ``limits.MAX_MODEL_HEADER_BYTES``."""
    if isinstance(model, bool) or not (isinstance(model, (bytes, bytearray, memoryview, str, os.PathLike, int)) or hasattr(model, "read")):
        raise TypeError(f"model must be a path, bytes, a file descriptor or a binary file object, got {type(model).__name__}")
    with sized_or_stream(model, mmap=False) as (name, buf, f):
        if f is None:
            return bytes(cast(Any, buf))
        # A protobuf message declares no length: a stream is read to its end, which a model reaches within the limit.
        cap = limits.MAX_MODEL_HEADER_BYTES
        data = bytearray()
        if fill(f, data, cap + 1):
            raise FormatError(
                "the model is longer than the limit finalfusion.limits.MAX_MODEL_HEADER_BYTES",
                offset=cap,
                chunk=FORMAT,
                expected=f"at most {cap} bytes",
                found=f"more ({name})",
            )
        return bytes(data)


def load_sentencepiece(model: Source, vectors: npt.NDArray[Any] | Embeddings | Source, *, normalize: bool = True) -> Embeddings:
    """Embeddings from a SentencePiece model and its piece vectors (BPEmb-style).

    Parameters
    ----------
    model
        A SentencePiece ``.model`` file, as any :data:`~finalfusion.Source`
        (path, ``bytes``-like contents, file descriptor or binary file
        object); gzip input is decompressed.
    vectors
        Either an array with one row per piece id (``(n_pieces, dims)``), or
        embeddings keyed by piece: :class:`~finalfusion.embeddings.Embeddings`
        or any file :func:`finalfusion.load` reads (BPEmb ships word2vec
        files). Keyed vectors are reordered by piece id; control, unknown
        and unused pieces the file lacks get zero rows.
    normalize
        l2-normalise the rows and keep their norms (``False``: rows as given).

    Returns
    -------
    Embeddings
        With a :class:`~finalfusion.vocab.TokenizerVocab`: pieces are known
        words, anything else goes through the model's tokenizer.

    Raises
    ------
    FormatError
        If the model is malformed, the array has the wrong number of rows,
        or a keyed file lacks ordinary pieces or has keys that are not
        pieces (the message counts them and names a few).

    Examples
    --------
    >>> proto = SentencePieceModel(["<unk>", "\\u2581a", "b"], [0.0, 0.0, 0.0], [2, 1, 1]).to_proto()  # types: unknown, normal, normal
    >>> emb = load_sentencepiece(proto, np.array([[0, 0], [3, 4], [0, 1]], dtype=np.float32))
    >>> emb["\\u2581a"].tolist(), emb.norms.norms.tolist(), type(emb.vocab).__name__
    ([0.6000000238418579, 0.800000011920929], [0.0, 5.0, 1.0], 'TokenizerVocab')
    """
    proto = _model_bytes(model)
    parsed = SentencePieceModel.parse(proto)
    pieces, types = parsed.pieces, parsed.types
    if not pieces:
        raise FormatError("the model has no pieces", chunk=FORMAT, expected="a SentencePiece ModelProto", found=f"{len(proto)} bytes without pieces")
    n = len(pieces)
    if isinstance(vectors, np.ndarray):
        if vectors.ndim != 2 or vectors.shape[0] != n:
            raise FormatError(
                "the vectors do not match the model's pieces", chunk="vectors", expected=f"a ({n}, dims) array, one row per piece id", found=vectors.shape
            )
        matrix = np.array(vectors, dtype=np.float32, order="C")
        source = "array"
    else:
        matrix = _keyed_rows(vectors, pieces, types)
        source = "keyed"
    try:
        vocab = TokenizerVocab(pieces, SentencePieceTokenizer(proto))
    except ValueError as exc:
        raise FormatError("the model has duplicate pieces", chunk=FORMAT, expected="distinct pieces", found=str(exc)) from None
    norms = checked_norms(matrix, pieces, "sentencepiece piece", 0) if normalize else None
    return Embeddings(NdArray(matrix), vocab, norms=norms, metadata=Metadata({"sentencepiece": {"pieces": n, "vectors": source}}))


def _keyed_rows(vectors: Embeddings | Source, pieces: list[str], types: list[int]) -> npt.NDArray[np.float32]:
    if not isinstance(vectors, Embeddings):
        from finalfusion.compat.sniff import load

        vectors = load(vectors, normalize=False)
    keyed: Embeddings = vectors
    words = keyed.vocab.words
    rows = keyed.vocab.word_index.lookup(pieces)
    missing = [(i, p) for i, p in enumerate(pieces) if rows[i] < 0 and types[i] not in (CONTROL, UNKNOWN, UNUSED)]
    if missing:
        raise FormatError(
            f"{len(missing)} pieces of the model have no vector",
            chunk="vectors",
            expected="a vector for every ordinary piece",
            found=", ".join(f"{p!r} (id {i})" for i, p in missing[:5]),
        )
    piece_set = set(pieces)
    extra = [w for w in words if w not in piece_set]
    if extra:
        raise FormatError(
            f"{len(extra)} vectors are keyed by strings that are not pieces of the model",
            chunk="vectors",
            expected="keys that are pieces",
            found=", ".join(repr(w) for w in extra[:5]),
        )
    source = dense_matrix_with_norms(keyed)
    matrix = np.zeros((len(pieces), keyed.dims), dtype=np.float32)
    have = rows >= 0
    matrix[have] = source[rows[have]]
    return matrix
