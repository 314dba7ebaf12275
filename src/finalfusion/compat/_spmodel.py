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

import re
import struct
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar, Final

import numpy as np
import numpy.typing as npt

from finalfusion._llamacpp_special import USER_DEFINED_TEXTS, is_control_text, partition
from finalfusion._tokenizers import SentencePieceTokenizer
from finalfusion.errors import FormatError

__all__ = [
    "BPE_MODEL",
    "BYTE",
    "CONTROL",
    "NORMAL",
    "UNIGRAM_MODEL",
    "UNKNOWN",
    "UNUSED",
    "USER_DEFINED",
    "LazySentencePieceTokenizer",
    "LlamaCppSentencePieceTokenizer",
    "SentencePieceModel",
]

FORMAT: Final = "SentencePiece model"
# Piece types (SentencePiece's ModelProto.SentencePiece.Type; llama.cpp's token types use the same numbers).
NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = 1, 2, 3, 4, 5, 6
#: TrainerSpec.model_type values.
UNIGRAM_MODEL, BPE_MODEL = 1, 2


@dataclass
class SentencePieceModel:
    """The parts of a SentencePiece ``ModelProto`` that tokenizing needs.

    Attributes
    ----------
    pieces
        The vocabulary: one piece per token id.
    scores
        One score per piece (log probabilities for unigram models, merge ranks for BPE).
    types
        One SentencePiece piece type per piece (``NORMAL``, ``UNKNOWN``, ``CONTROL``, ``USER_DEFINED``, ``BYTE``, ``UNUSED``).
    special
        The ids of ``unk``, ``bos``, ``eos`` and ``pad`` (-1: none).
    model_type
        SentencePiece's model type: 1 unigram, 2 BPE.
    add_dummy_prefix
        Whether the normaliser puts ``▁`` before the text.
    remove_extra_whitespaces
        Whether the normaliser collapses runs of whitespace.
    charsmap
        The normaliser's precompiled character map (empty: no normalisation).

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
        The pieces are laid out with whole-array numpy operations (a 262,144-piece
        vocabulary in tens of milliseconds); the bytes are the ones protobuf writes.

        Raises
        ------
        UnicodeEncodeError
            For a piece that is not valid text (a lone surrogate).
        OverflowError
            For a score that float32 cannot hold.

        Examples
        --------
        >>> proto = SentencePieceModel(["<unk>", "a"], [0.0, -1.0], [UNKNOWN, NORMAL]).to_proto()
        >>> isinstance(proto, bytes), SentencePieceModel.parse(proto).scores
        (True, [0.0, -1.0])
        """
        types = np.asarray(self.types, dtype=np.int64)
        if len(types) != len(self.pieces) or len(self.scores) != len(self.pieces):
            raise ValueError(f"{len(self.pieces)} pieces, {len(self.scores)} scores and {len(types)} types differ in number")
        sp = self.special
        byte_pieces = int(np.count_nonzero(types == BYTE))
        trainer = _pb_int(3, self.model_type) + _pb_int(4, len(self.pieces)) + _pb_int(35, 1 if byte_pieces >= 256 else 0)
        trainer += _pb_int(40, sp.get("unk", -1)) + _pb_int(41, sp.get("bos", -1)) + _pb_int(42, sp.get("eos", -1)) + _pb_int(43, sp.get("pad", -1))
        normalizer = _pb_bytes(1, b"precompiled" if self.charsmap else b"identity")
        if self.charsmap:
            normalizer += _pb_bytes(2, self.charsmap)
        normalizer += _pb_int(3, int(self.add_dummy_prefix)) + _pb_int(4, int(self.remove_extra_whitespaces)) + _pb_int(5, 1)
        return _pieces_proto(self.pieces, self.scores, types) + _pb_bytes(2, trainer) + _pb_bytes(3, normalizer)

    @classmethod
    def parse(cls, proto: bytes) -> SentencePieceModel:
        """Read the pieces, scores, types, special ids and normaliser settings of a ``ModelProto``.

        Raises
        ------
        FormatError
            If the protobuf wire format is malformed.

        Examples
        --------
        >>> m = SentencePieceModel.parse(SentencePieceModel(["<unk>", "▁a", "b"], [0.0, -1.0, -2.0], [UNKNOWN, NORMAL, NORMAL]).to_proto())
        >>> m.pieces, m.types, m.special["unk"]
        (['<unk>', '▁a', 'b'], [2, 1, 1], 0)
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


class LlamaCppSentencePieceTokenizer(SentencePieceTokenizer):
    """A GGUF ``llama``/``t5`` vocabulary's SentencePiece model, tokenized as llama.cpp tokenizes it (``parse_special = false``).

    The text is first cut at the user-defined tokens llama.cpp matches in
    text (:func:`finalfusion._llamacpp_special.partition`: the longest first;
    not those llama.cpp makes control, such as ``</s>``), and ``sentencepiece``
    tokenizes each piece between them, with the dummy prefix as llama.cpp puts
    it before every such piece. Inside a piece, user-defined tokens are ordinary
    pieces merged by their scores, as llama.cpp's tokenizer merges every token:
    Gemma 3's 30 tokens of two to 31 literal spaces are then matched in text,
    and its ``</s>`` is spelled out. The serialised model is the file's, unchanged.

    Examples
    --------
    >>> import pytest; _ = pytest.importorskip("sentencepiece")
    >>> pieces = ["<unk>", "  ", "\u2581", "a", "b", "\u2581a", "\u2581b"]
    >>> m = SentencePieceModel(pieces, [0.0, 0.0, -1.0, -2.0, -3.0, -4.0, -5.0], [UNKNOWN, USER_DEFINED, *[NORMAL] * 5])
    >>> LlamaCppSentencePieceTokenizer(m.to_proto()).pieces("a  b")
    ['\u2581a', '  ', '\u2581b']
    """

    kind: ClassVar[str] = "sentencepiece-llamacpp"
    #: The user-defined tokens matched in text, longest first, and a pattern finding any of them (set by ``_load``).
    _specials: tuple[tuple[str, int], ...] = ()
    _any_special: re.Pattern[str] | None = None

    def _processor_model(self) -> bytes:
        # Called once, under the tokenizer's lock (by ``_load``): sets the tokens matched in text as well.
        at_hand = self.__dict__.get("_model")  # a lazy tokenizer's model, not serialised yet: no parse of what it is about to write
        data = self._data
        model = at_hand if isinstance(at_hand, SentencePieceModel) else SentencePieceModel.parse(data)
        vocabulary = frozenset(model.pieces)
        matched = [
            (piece, i)
            for i, (piece, kind) in enumerate(zip(model.pieces, model.types, strict=True))
            if piece and ((kind == USER_DEFINED and not is_control_text(piece, vocabulary)) or piece in USER_DEFINED_TEXTS)
        ]
        self._specials = tuple(sorted(matched, key=lambda m: -len(m[0].encode("utf-8"))))
        self._any_special = re.compile("|".join(re.escape(piece) for piece, _ in self._specials)) if self._specials else None
        if USER_DEFINED not in model.types:
            return data
        return replace(model, types=[NORMAL if kind == USER_DEFINED else kind for kind in model.types]).to_proto()

    def _encode_block(self, impl: Any, words: list[str]) -> list[list[int]]:
        find = self._any_special
        if find is None or not any(map(find.search, words)):  # no word holds a token matched in text: one call, as sentencepiece
            return list(impl.EncodeAsIds(words))
        cut = [partition(w, self._specials) if find.search(w) else [w] for w in words]
        texts = [p for pieces in cut for p in pieces if isinstance(p, str)]
        encoded = iter(impl.EncodeAsIds(texts)) if texts else iter(())
        return [[i for p in pieces for i in (next(encoded) if isinstance(p, str) else [p])] for pieces in cut]

    def _pieces(self, impl: Any, word: str) -> list[str]:
        # sentencepiece's own pieces for the text (an unknown span is its text, not <unk>), the token for a matched one
        return [q for p in partition(word, self._specials) for q in (impl.EncodeAsPieces(p) if isinstance(p, str) else [impl.IdToPiece(p)])]


class LazySentencePieceTokenizer(LlamaCppSentencePieceTokenizer):
    """A :class:`LlamaCppSentencePieceTokenizer` whose ``ModelProto`` is serialised on first need.

    A GGUF ``llama``/``t5`` vocabulary describes its SentencePiece model in
    arrays; serialising them is most of the work of loading a large
    vocabulary, and nothing needs the bytes until the first unknown word,
    a comparison, a write or a pickle. The first of them serialises the
    model once, under a lock (concurrent first uses wait for the one
    build); from then on the object *is* a plain ``LlamaCppSentencePieceTokenizer``
    (its class is switched), so it pickles, copies, compares and prints as
    one, byte for byte as if it had been built eagerly.

    Examples
    --------
    >>> tok = LazySentencePieceTokenizer(SentencePieceModel(["<unk>", "a"], [0.0, -1.0], [UNKNOWN, NORMAL]))
    >>> tok
    LlamaCppSentencePieceTokenizer(<2 pieces, not serialised yet>)
    >>> tok.kind, tok == LlamaCppSentencePieceTokenizer(tok.to_bytes()), tok, type(tok).__name__
    ('sentencepiece-llamacpp', True, LlamaCppSentencePieceTokenizer(<94 bytes>), 'LlamaCppSentencePieceTokenizer')
    """

    #: Empty while the class is created, so that it is not registered as a kind of its own; set to its parent's below.
    kind: ClassVar[str] = ""

    def __init__(self, model: SentencePieceModel) -> None:
        self._lock = threading.Lock()
        self._impl = None
        self._skip = frozenset()
        self._model: SentencePieceModel | None = model
        self._build_lock = threading.Lock()

    def __getattr__(self, name: str) -> Any:
        # Reached only while ``_data`` is not set: serialise once, then become a plain LlamaCppSentencePieceTokenizer.
        if name != "_data" or "_build_lock" not in self.__dict__:
            raise AttributeError(name)
        with self._build_lock:
            data: bytes | None = self.__dict__.get("_data")
            if data is None:
                assert self._model is not None
                data = self._model.to_proto()
                self._data = data
                self._model = None
                object.__setattr__(self, "__class__", LlamaCppSentencePieceTokenizer)
        return data

    @property
    def model(self) -> SentencePieceModel | None:
        """The model while it is not serialised yet (``None`` once it is: the object is then a plain ``LlamaCppSentencePieceTokenizer``)."""
        return self.__dict__.get("_model")

    def __reduce_ex__(self, protocol: Any) -> Any:
        self._data  # noqa: B018 -- serialise: the object is a LlamaCppSentencePieceTokenizer from here on
        return object.__reduce_ex__(self, protocol)

    def __repr__(self) -> str:
        model = self.model
        return f"LlamaCppSentencePieceTokenizer(<{0 if model is None else len(model.pieces)} pieces, not serialised yet>)"


LazySentencePieceTokenizer.kind = LlamaCppSentencePieceTokenizer.kind


def _pieces_proto(pieces: list[str], scores: Any, types: npt.NDArray[np.int64]) -> bytes:
    """The ``pieces`` fields (1) of a ``ModelProto``: each ``{piece = 1, score = 2, type = 3}``, as protobuf writes them.

    Vectorised: the UTF-8 of the pieces is scattered into one buffer beside
    the varint lengths, float32 scores and one-byte types (types outside
    1-6 are written as ``NORMAL``, as before).
    """
    n = len(pieces)
    if n == 0:
        return b""
    encoded = [p.encode("utf-8") for p in pieces]
    blob = np.frombuffer(b"".join(encoded), dtype=np.uint8)
    lengths = np.fromiter(map(len, encoded), dtype=np.int64, count=n)
    wide = np.asarray(scores, dtype=np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        narrow = wide.astype("<f4")
    lost = np.isfinite(wide) & ~np.isfinite(narrow)
    if lost.any():
        raise OverflowError(f"score {float(wide[np.argmax(lost)])!r} of piece {int(np.argmax(lost))} is too large for float32")
    kinds = np.where((types >= NORMAL) & (types <= BYTE), types, NORMAL).astype(np.uint8)
    len_size = _varint_sizes(lengths)
    body = lengths + len_size + 8  # tag + length + piece, tag + float32, tag + type
    body_size = _varint_sizes(body)
    ends = np.cumsum(1 + body_size + body)
    starts = ends - (1 + body_size + body)
    total = int(ends[-1])
    out = np.empty(total, dtype=np.uint8)
    out[starts] = 0x0A  # field 1, wire type 2
    _put_varints(out, starts + 1, body, body_size)
    at = starts + 1 + body_size
    out[at] = 0x0A  # piece: field 1, wire type 2
    _put_varints(out, at + 1, lengths, len_size)
    at = at + 1 + len_size
    if len(blob):
        offsets = np.cumsum(lengths) - lengths
        out[np.repeat(at - offsets, lengths) + np.arange(len(blob), dtype=np.int64)] = blob
    at = at + lengths
    out[at] = 0x15  # score: field 2, wire type 5
    floats = narrow.view(np.uint8).reshape(n, 4)
    for k in range(4):
        out[at + 1 + k] = floats[:, k]
    out[at + 5] = 0x18  # the piece type: field 3, wire type 0
    out[at + 6] = kinds
    return out.tobytes()


def _varint_sizes(values: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """Bytes of each non-negative value's varint."""
    sizes = np.ones(len(values), dtype=np.int64)
    rest = values >> 7
    while rest.any():
        sizes += rest > 0
        rest >>= 7
    return sizes


def _put_varints(out: npt.NDArray[np.uint8], at: npt.NDArray[np.int64], values: npt.NDArray[np.int64], sizes: npt.NDArray[np.int64]) -> None:
    """Write each value's varint (``sizes`` bytes) at ``out[at]``."""
    for k in range(int(sizes.max())):
        live = sizes > k
        byte = (values[live] >> (7 * k)) & 0x7F
        byte |= np.where(sizes[live] > k + 1, 0x80, 0)
        out[at[live] + k] = byte


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
