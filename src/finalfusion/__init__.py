"""finalfusion: read, write, convert and query finalfusion word embeddings in pure Python.

Examples
--------
>>> import finalfusion, io, numpy as np
>>> emb = finalfusion.Embeddings(
...     finalfusion.storage.NdArray(np.eye(2, dtype=np.float32)),
...     finalfusion.vocab.SimpleVocab(["hello", "world"]),
... )
>>> buf = io.BytesIO(); emb.write(buf)
>>> finalfusion.load_finalfusion(buf.getvalue())["world"].tolist()
[0.0, 1.0]
"""

from __future__ import annotations

# First: in the finalfusion command's process (only), Ctrl-C during the imports below exits 130 quietly (issue 24).
from finalfusion import _interrupt as _interrupt
from finalfusion import ann, compat, metadata, norms, quantize, similarity, storage, subword, vocab
from finalfusion import io as io  # finalfusion.io, as 0.7 code uses it (not in __all__: it would shadow the io module)
from finalfusion._source import Source
from finalfusion._threads import get_threads, set_threads
from finalfusion.chunks import ChunkIdentifier, TypeId
from finalfusion.compat import (
    load,
    load_fasttext,
    load_floret,
    load_gguf,
    load_lightseq,
    load_safetensors,
    load_sentencepiece,
    load_text,
    load_text_dims,
    load_word2vec,
    write_fasttext,
    write_floret,
    write_gguf,
    write_model2vec,
    write_text,
    write_text_dims,
    write_word2vec,
)
from finalfusion.embeddings import Embeddings, load_finalfusion
from finalfusion.errors import (
    BadMagic,
    ChunkOrder,
    FileChangedError,
    FinalfusionError,
    FormatError,
    LegacyFormatWarning,
    LimitExceeded,
    MissingExtraError,
    NonFiniteError,
    OutputRefused,
    StaleIndexError,
    Truncated,
    UnknownChunk,
    UnsupportedVersion,
)
from finalfusion.metadata import Metadata, load_metadata
from finalfusion.norms import Norms, load_norms
from finalfusion.similarity import AnalogyEvaluation, AnalogySection, SimilarityResult, SimilarityResults, evaluate_analogies
from finalfusion.storage import NdArray, QuantizedArray, load_storage
from finalfusion.vocab import (
    ExplicitVocab,
    FastTextVocab,
    FinalfusionBucketVocab,
    FloretVocab,
    SimpleVocab,
    load_vocab,
)

#: The version of the installed package.
__version__ = "0.1.0"

#: finalfusion-python 0.7 name of :class:`FormatError`.
FinalfusionFormatError = FormatError

__all__ = [
    "AnalogyEvaluation",
    "AnalogySection",
    "BadMagic",
    "ChunkIdentifier",
    "ChunkOrder",
    "Embeddings",
    "ExplicitVocab",
    "FastTextVocab",
    "FileChangedError",
    "FinalfusionBucketVocab",
    "FinalfusionError",
    "FinalfusionFormatError",
    "FloretVocab",
    "FormatError",
    "LegacyFormatWarning",
    "LimitExceeded",
    "Metadata",
    "MissingExtraError",
    "NdArray",
    "NonFiniteError",
    "Norms",
    "OutputRefused",
    "QuantizedArray",
    "SimilarityResult",
    "SimilarityResults",
    "SimpleVocab",
    "Source",
    "StaleIndexError",
    "Truncated",
    "TypeId",
    "UnknownChunk",
    "UnsupportedVersion",
    "__version__",
    "ann",
    "compat",
    "evaluate_analogies",
    "get_threads",
    "load",
    "load_fasttext",
    "load_finalfusion",
    "load_floret",
    "load_gguf",
    "load_lightseq",
    "load_metadata",
    "load_norms",
    "load_safetensors",
    "load_sentencepiece",
    "load_storage",
    "load_text",
    "load_text_dims",
    "load_vocab",
    "load_word2vec",
    "metadata",
    "norms",
    "quantize",
    "set_threads",
    "similarity",
    "storage",
    "subword",
    "vocab",
    "write_fasttext",
    "write_floret",
    "write_gguf",
    "write_model2vec",
    "write_text",
    "write_text_dims",
    "write_word2vec",
]
