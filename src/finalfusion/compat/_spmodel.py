"""SentencePiece ``ModelProto`` files read and written in the protobuf wire format (no ``protobuf`` needed).

Fields used (sentencepiece_model.proto): ``ModelProto.pieces`` = 1, each
``SentencePiece`` with ``piece`` = 1, ``score`` = 2, ``type`` = 3;
``trainer_spec`` = 2 (``model_type`` = 3, ``vocab_size`` = 4,
``byte_fallback`` = 35, special ids ``unk``/``bos``/``eos``/``pad`` = 40-43);
``normalizer_spec`` = 3 (``name`` = 1, ``precompiled_charsmap`` = 2,
``add_dummy_prefix`` = 3, ``remove_extra_whitespaces`` = 4,
``escape_whitespaces`` = 5). Shared by the SentencePiece and GGUF loaders.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Final

from finalfusion.errors import FormatError

__all__ = ["BPE_MODEL", "BYTE", "CONTROL", "NORMAL", "UNIGRAM_MODEL", "UNKNOWN", "UNUSED", "USER_DEFINED", "SentencePieceModel"]

FORMAT: Final = "SentencePiece model"
# Piece types (SentencePiece's ModelProto.SentencePiece.Type; llama.cpp's token types use the same numbers).
NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = 1, 2, 3, 4, 5, 6
#: TrainerSpec.model_type values.
UNIGRAM_MODEL, BPE_MODEL = 1, 2


@dataclass
class SentencePieceModel:
    """The parts of a SentencePiece ``ModelProto`` that tokenizing needs.

    ``model_type`` is SentencePiece's (1 unigram, 2 BPE); ``special`` maps
    ``unk``/``bos``/``eos``/``pad`` to ids (-1: none); ``charsmap`` is the
    normaliser's precompiled character map (empty: no normalisation).

    Examples
    --------
    >>> m = SentencePieceModel(["<unk>", "a"], [0.0, -1.0], [UNKNOWN, NORMAL])
    >>> SentencePieceModel.parse(m.to_proto()) == m
    True
    """

    pieces: list[str]
    scores: list[float]
    types: list[int]
    special: dict[str, int] = field(default_factory=lambda: {"unk": 0, "bos": -1, "eos": -1, "pad": -1})
    model_type: int = BPE_MODEL
    add_dummy_prefix: bool = True
    remove_extra_whitespaces: bool = False
    charsmap: bytes = b""

    def to_proto(self) -> bytes:
        """The serialised ``ModelProto`` (protobuf wire format, written directly: no ``protobuf`` needed).

        Byte fallback is switched on when all 256 ``<0xNN>`` byte pieces exist.
        """
        out = bytearray()
        byte_pieces = 0
        for piece, score, ptype in zip(self.pieces, self.scores, self.types, strict=True):
            t = ptype if ptype in (NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE) else NORMAL
            byte_pieces += t == BYTE
            body = _pb_bytes(1, piece.encode("utf-8")) + _field(2, 5, struct.pack("<f", score)) + _pb_int(3, t)
            out += _pb_bytes(1, body)
        sp = self.special
        trainer = _pb_int(3, self.model_type) + _pb_int(4, len(self.pieces)) + _pb_int(35, 1 if byte_pieces >= 256 else 0)
        trainer += _pb_int(40, sp.get("unk", -1)) + _pb_int(41, sp.get("bos", -1)) + _pb_int(42, sp.get("eos", -1)) + _pb_int(43, sp.get("pad", -1))
        out += _pb_bytes(2, trainer)
        normalizer = _pb_bytes(1, b"precompiled" if self.charsmap else b"identity")
        if self.charsmap:
            normalizer += _pb_bytes(2, self.charsmap)
        normalizer += _pb_int(3, int(self.add_dummy_prefix)) + _pb_int(4, int(self.remove_extra_whitespaces)) + _pb_int(5, 1)
        out += _pb_bytes(3, normalizer)
        return bytes(out)

    @classmethod
    def parse(cls, proto: bytes) -> SentencePieceModel:
        """Read the pieces, scores, types, special ids and normaliser settings of a ``ModelProto``.

        Raises
        ------
        FormatError
            If the protobuf wire format is malformed.
        """
        where = FORMAT
        pieces: list[str] = []
        scores: list[float] = []
        types: list[int] = []
        special = {"unk": 0, "bos": 1, "eos": 2, "pad": -1}  # the TrainerSpec defaults
        out = cls(pieces, scores, types, special, model_type=UNIGRAM_MODEL, remove_extra_whitespaces=True)
        for number, wire, value in _pb_fields(proto, where):
            if number == 1 and wire == 2:
                piece, score, ptype = "", 0.0, NORMAL
                for n2, w2, v2 in _pb_fields(value, where):
                    if n2 == 1 and w2 == 2:
                        try:
                            piece = v2.decode("utf-8")
                        except UnicodeDecodeError:
                            raise FormatError(f"piece {len(pieces)} is not UTF-8", chunk=where, expected="UTF-8", found=v2[:40]) from None
                    elif n2 == 2 and w2 == 5:
                        score = struct.unpack("<f", v2)[0]
                    elif n2 == 3 and w2 == 0:
                        ptype = v2
                pieces.append(piece)
                scores.append(score)
                types.append(ptype)
            elif number == 2 and wire == 2:
                for n2, w2, v2 in _pb_fields(value, where):
                    if w2 == 0 and n2 in (40, 41, 42, 43):
                        v = v2 - (1 << 64) if v2 >= 1 << 63 else v2
                        special[("unk", "bos", "eos", "pad")[n2 - 40]] = v
                    elif w2 == 0 and n2 == 3:
                        out.model_type = v2
            elif number == 3 and wire == 2:
                for n2, w2, v2 in _pb_fields(value, where):
                    if n2 == 2 and w2 == 2:
                        out.charsmap = bytes(v2)
                    elif n2 == 3 and w2 == 0:
                        out.add_dummy_prefix = bool(v2)
                    elif n2 == 4 and w2 == 0:
                        out.remove_extra_whitespaces = bool(v2)
        return out


def _varint(n: int) -> bytes:
    n &= (1 << 64) - 1
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _field(number: int, wire: int, payload: bytes) -> bytes:
    return _varint(number << 3 | wire) + payload


def _pb_bytes(number: int, data: bytes) -> bytes:
    return _field(number, 2, _varint(len(data)) + data)


def _pb_int(number: int, value: int) -> bytes:
    return _field(number, 0, _varint(value))


def _pb_fields(data: bytes, where: str) -> Iterator[tuple[int, int, Any]]:
    """``(number, wire type, value)`` of every field of a protobuf message (varints as ints, others as bytes)."""
    pos, n = 0, len(data)

    def varint() -> int:
        nonlocal pos
        shift = result = 0
        while True:
            if pos >= n or shift > 63:
                raise FormatError("malformed protobuf varint", offset=pos, chunk=where, expected="a varint", found="end of data or too long")
            b = data[pos]
            pos += 1
            result |= (b & 0x7F) << shift
            if not b & 0x80:
                return result
            shift += 7

    while pos < n:
        key = varint()
        number, wire = key >> 3, key & 7
        if wire == 0:
            yield number, wire, varint()
        elif wire in (1, 5):
            size = 8 if wire == 1 else 4
            if pos + size > n:
                raise FormatError("protobuf field runs past the end", offset=pos, chunk=where, expected=f"{size} bytes", found=n - pos)
            yield number, wire, data[pos : pos + size]
            pos += size
        elif wire == 2:
            size = varint()
            if pos + size > n:
                raise FormatError("protobuf field runs past the end", offset=pos, chunk=where, expected=f"{size} bytes", found=n - pos)
            yield number, wire, data[pos : pos + size]
            pos += size
        else:
            raise FormatError("unsupported protobuf wire type", offset=pos, chunk=where, expected="0, 1, 2 or 5", found=wire)
