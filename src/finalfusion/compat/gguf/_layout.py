"""What a GGUF file is made of: the format's constants, the ggml type table, the parsed header's structures."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

__all__ = [
    "DEFAULT_ALIGNMENT",
    "FORMAT",
    "GGML_TYPES",
    "INTEGER",
    "INTEGERS",
    "KEY_TYPES",
    "MAGIC",
    "MAX_ARRAY_DEPTH",
    "NUMPY",
    "SCALARS",
    "TYPE_ID",
    "TYPE_NAMES",
    "VERSIONS",
    "GGUFFile",
    "GGUFTensor",
]

FORMAT: Final = "GGUF"
MAGIC: Final = b"GGUF"
#: Versions read (v1 used 32-bit counts and is long obsolete).
VERSIONS: Final = (2, 3)
DEFAULT_ALIGNMENT: Final = 32
#: Nesting depth accepted for arrays of arrays.
MAX_ARRAY_DEPTH: Final = 8

#: ggml type id -> (name, elements per block, bytes per block); from ggml.h / gguf-py's GGML_QUANT_SIZES.
GGML_TYPES: Final[dict[int, tuple[str, int, int]]] = {
    0: ("F32", 1, 4),
    1: ("F16", 1, 2),
    2: ("Q4_0", 32, 18),
    3: ("Q4_1", 32, 20),
    6: ("Q5_0", 32, 22),
    7: ("Q5_1", 32, 24),
    8: ("Q8_0", 32, 34),
    9: ("Q8_1", 32, 40),
    10: ("Q2_K", 256, 84),
    11: ("Q3_K", 256, 110),
    12: ("Q4_K", 256, 144),
    13: ("Q5_K", 256, 176),
    14: ("Q6_K", 256, 210),
    15: ("Q8_K", 256, 292),
    16: ("IQ2_XXS", 256, 66),
    17: ("IQ2_XS", 256, 74),
    18: ("IQ3_XXS", 256, 98),
    19: ("IQ1_S", 256, 50),
    20: ("IQ4_NL", 32, 18),
    21: ("IQ3_S", 256, 110),
    22: ("IQ2_S", 256, 82),
    23: ("IQ4_XS", 256, 136),
    24: ("I8", 1, 1),
    25: ("I16", 1, 2),
    26: ("I32", 1, 4),
    27: ("I64", 1, 8),
    28: ("F64", 1, 8),
    29: ("IQ1_M", 256, 56),
    30: ("BF16", 1, 2),
    34: ("TQ1_0", 256, 54),
    35: ("TQ2_0", 256, 66),
    39: ("MXFP4", 32, 17),
    40: ("NVFP4", 64, 36),
    41: ("Q1_0", 128, 18),
}
TYPE_ID: Final = {name: i for i, (name, _, _) in GGML_TYPES.items()}

# GGUF metadata value types: id -> (name, struct code or None for string/array).
U8, I8, U16, I16, U32, I32, F32, BOOL, STRING, ARRAY, U64, I64, F64 = range(13)
SCALARS: Final[dict[int, str]] = {U8: "B", I8: "b", U16: "H", I16: "h", U32: "I", I32: "i", F32: "f", BOOL: "?", U64: "Q", I64: "q", F64: "d"}
NUMPY: Final[dict[int, str]] = {
    U8: "u1",
    I8: "i1",
    U16: "u2",
    I16: "i2",
    U32: "u4",
    I32: "i4",
    F32: "f4",
    BOOL: "u1",
    U64: "u8",
    I64: "i8",
    F64: "f8",
}


#: Pseudo value type of :data:`KEY_TYPES`: any integer scalar (token ids: llama.cpp wants uint32, gguf-py reads every width;
#: a bool, float, string or array is refused either way).
INTEGER: Final = -1
INTEGERS: Final = frozenset({U8, I8, U16, I16, U32, I32, U64, I64})

#: Value type (and element type of an array, ``None``: any number) of the standard keys this library reads, as llama.cpp
#: requires them (its ``gguf_get_val_*`` and ``llama_model_loader`` refuse a key of another type). Checked while
#: the header is parsed, before a value is read: a flag stored as an array or a string never reaches a reader.
KEY_TYPES: Final[dict[str, tuple[int, int | None]]] = {
    "general.alignment": (U32, None),
    "general.architecture": (STRING, None),
    "general.name": (STRING, None),
    "tokenizer.ggml.model": (STRING, None),
    "tokenizer.ggml.pre": (STRING, None),
    "tokenizer.huggingface.json": (STRING, None),
    "tokenizer.ggml.tokens": (ARRAY, STRING),
    "tokenizer.ggml.merges": (ARRAY, STRING),
    "tokenizer.ggml.scores": (ARRAY, None),
    "tokenizer.ggml.token_type": (ARRAY, None),
    "tokenizer.ggml.precompiled_charsmap": (ARRAY, None),
    "tokenizer.ggml.add_space_prefix": (BOOL, None),
    "tokenizer.ggml.remove_extra_whitespaces": (BOOL, None),
    "tokenizer.ggml.add_bos_token": (BOOL, None),
    "tokenizer.ggml.add_eos_token": (BOOL, None),
    **{f"tokenizer.ggml.{name}_token_id": (INTEGER, None) for name in ("bos", "eos", "unknown", "unk", "pad", "padding", "seperator", "cls", "mask")},
}
#: Names of the value types, for messages.
TYPE_NAMES: Final = ("uint8", "int8", "uint16", "int16", "uint32", "int32", "float32", "bool", "string", "array", "uint64", "int64", "float64")


@dataclass(frozen=True)
class GGUFTensor:
    """One tensor's description: name, ggml dimensions (innermost first), type and absolute data offset.

    Examples
    --------
    >>> t = GGUFTensor("token_embd.weight", (4, 3), 1, 64)
    >>> t.type_name, t.shape, t.n_bytes
    ('F16', (3, 4), 24)
    """

    #: The tensor's name (``token_embd.weight``).
    name: str
    #: ggml's dimensions, innermost first (:attr:`shape` is numpy's order).
    ne: tuple[int, ...]
    #: The ggml type number (0 F32, 1 F16, 8 Q8_0, ...; :attr:`type_name` names it).
    ggml_type: int
    #: Absolute byte offset of the tensor's data in the file.
    offset: int

    @property
    def type_name(self) -> str:
        """The ggml type's name (``F16``, ``Q8_0``, ...).

        Examples
        --------
        >>> GGUFTensor("token_embd.weight", (4, 3), 8, 0).type_name
        'Q8_0'
        """
        return GGML_TYPES[self.ggml_type][0]

    @property
    def shape(self) -> tuple[int, ...]:
        """The numpy shape (ggml's dimensions reversed).

        Examples
        --------
        >>> GGUFTensor("token_embd.weight", (4, 3), 0, 0).shape
        (3, 4)
        """
        return tuple(reversed(self.ne))

    @property
    def n_bytes(self) -> int:
        """Bytes of data.

        Examples
        --------
        >>> GGUFTensor("t", (64, 2), 0, 0).n_bytes, GGUFTensor("t", (64, 2), 8, 0).n_bytes  # F32; Q8_0: 34 bytes per 32 values
        (512, 136)
        """
        _, block, size = GGML_TYPES[self.ggml_type]
        n = 1
        for d in self.ne:
            n *= d
        return n // block * size


@dataclass
class GGUFFile:
    """The parsed header of a GGUF file: version, byte order, metadata and tensor infos.

    Examples
    --------
    >>> import io
    >>> import numpy as np
    >>> from finalfusion import Embeddings
    >>> from finalfusion.compat.gguf import read_gguf, write_gguf
    >>> from finalfusion.storage import NdArray
    >>> from finalfusion.vocab import SimpleVocab
    >>> emb = Embeddings(NdArray(np.eye(2, dtype=np.float32)), SimpleVocab(["a", "b"]))
    >>> buf = io.BytesIO(); write_gguf(buf, emb)
    >>> head = read_gguf(buf.getvalue())
    >>> head.version, head.byte_order, head.kv["tokenizer.ggml.tokens"], head.tensors["token_embd.weight"].shape
    (3, '<', ['a', 'b'], (2, 2))
    """

    #: The GGUF version (2 or 3).
    version: int
    #: ``"<"`` for little-endian files, ``">"`` for big-endian ones.
    byte_order: str
    #: The data alignment in bytes (``general.alignment``, 32 by default).
    alignment: int
    #: The metadata key/value pairs, decoded to Python values.
    kv: dict[str, Any]
    #: The tensor descriptions by name.
    tensors: dict[str, GGUFTensor]
    #: Absolute byte offset where the tensor data section starts.
    data_start: int
    #: The file's size in bytes.
    size: int
    #: The bytes the header was read from (what tensor data is read from), when kept.
    buffer: Any = field(default=None, repr=False)
