"""GGUF (llama.cpp's model format): the token-embedding table as embeddings.

Layout (GGUF v2/v3; every integer in the file's byte order, see below):

=============  ===========================  ==========================================
offset         type                         field
=============  ===========================  ==========================================
0              4 bytes                      magic ``GGUF``
4              u32                          version (2 or 3)
8              u64                          n_tensors
16             u64                          n_kv
24             KV x n_kv                    key (string), u32 value type, value
...            tensor info x n_tensors      name (string), u32 n_dims, u64 ne[n_dims], u32 ggml type, u64 offset
...            padding                      to ``general.alignment`` (a u32; default 32)
data start     tensor data                  each tensor at ``data start + offset`` (aligned)
=============  ===========================  ==========================================

A string is a ``u64`` byte length and UTF-8 bytes; an array a ``u32``
element type, a ``u64`` count and the elements. Byte order is detected as
gguf-py does: the magic is always the bytes ``GGUF``; when the version read
little-endian has its low 16 bits zero, the file is big-endian. ggml lists
dimensions innermost first: ``ne[0]`` is the embedding size and ``ne[1]``
the number of tokens, so the table is a ``(ne[1], ne[0])`` row-major array.
In big-endian files the ``f16`` scales inside quantized blocks are
big-endian too (as llama.cpp's ``gguf_convert_endian`` writes them).

The vocabulary comes from ``tokenizer.ggml.tokens`` (row ``i`` is token
id ``i``). With ``tokenizer.ggml.model`` ``llama`` (SentencePiece) or
``gpt2`` (byte-level BPE), the scores, token types, merges and special ids
become a real tokenizer (a SentencePiece ``ModelProto`` built with the
settings llama.cpp uses, or a ``tokenizer.json`` for the ``tokenizers``
library), so unknown words are embedded through it (see
:class:`~finalfusion.vocab.TokenizerVocab`).

The package's modules do one job each: :mod:`._layout` (the format's
constants, ggml type table and parsed structures), :mod:`._reader` (header,
metadata and tensor infos, on :class:`finalfusion._binary.ByteReader`;
streams of unknown size), :mod:`._ggml` (decoding ggml tensors),
:mod:`._tokenizer` (tokenizers to and from metadata), :mod:`._wordpiece`
and :mod:`._gemma4` (the ``bert`` and ``gemma4`` tokenizers),
:mod:`._source_keys` (the source's token types and scores a tokenizer cannot
hold, written back while they describe it), :mod:`._load` and :mod:`._write`.
"""

from __future__ import annotations

from finalfusion.compat._registry import register_format
from finalfusion.compat.gguf._ggml import decode_tensor
from finalfusion.compat.gguf._layout import GGML_TYPES, MAGIC, GGUFFile, GGUFTensor
from finalfusion.compat.gguf._load import load_gguf
from finalfusion.compat.gguf._reader import read_gguf
from finalfusion.compat.gguf._tokenizer import byte_level_bpe_json, gguf_tokenizer
from finalfusion.compat.gguf._write import write_gguf

__all__ = [
    "GGML_TYPES",
    "GGUFFile",
    "GGUFTensor",
    "byte_level_bpe_json",
    "decode_tensor",
    "detect",
    "gguf_tokenizer",
    "load_gguf",
    "read_gguf",
    "write_gguf",
]


def detect(sample: bytes) -> bool:
    """Whether ``sample`` starts a GGUF file (the magic is the same bytes in both byte orders).

    Examples
    --------
    >>> detect(b"GGUF\\x03\\x00\\x00\\x00"), detect(b"FiFu")
    (True, False)
    """
    return sample[:4] == MAGIC


register_format(
    "gguf",
    description="GGUF (llama.cpp) model: the token-embedding table and the tokenizer (mmap=True maps an F32 table)",
    extensions=(".gguf",),
    order=2,
    detector=lambda sample, path: detect(sample),
    loader=load_gguf,
    writer=write_gguf,
    options=("normalize", "mmap", "tensor"),
    mismatch="no GGUF magic",
)
