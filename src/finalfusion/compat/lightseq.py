"""Token-embedding tables of LightSeq exports (Transformer, GPT, BERT; protobuf and HDF5), see docs/models.md.

LightSeq (ByteDance's inference engine) exports a model as one protobuf
message (``.pb``) or an HDF5 file (``.hdf5``) with the same names. The
fields read here (numbers as in LightSeq's ``.proto`` definitions)::

    Transformer  1 src_embedding: EmbeddingLayer   3 trg_embedding: EmbeddingLayer
                 2 encoder_stack (repeated)        4 decoder_stack (repeated)   5 model_conf
    Gpt / Bert   1 src_embedding: EmbeddingLayer   2 encoder_stack (repeated)   3 model_conf
    EmbeddingLayer
                 1 token_embedding   repeated float (packed), or bytes (uint8) in the quantized models
                 3 norm_scale        repeated float [hidden]
                 emb_clip_max        float: field 9 (QuantTransformer), field 5 (QuantGpt, QuantBert)
    ModelConf (Transformer)  13 no_scale_embedding: bool

HDF5 files hold the same fields as datasets ``src_embedding/token_embedding``,
``trg_embedding/norm_scale``, ``src_embedding/emb_clip_max``,
``model_conf/no_scale_embedding``, ...

LightSeq stores neither the vocabulary nor the hidden size. Its loaders
take the hidden size from the length of ``norm_scale`` (of the *target*
embedding for a Transformer, whichever side is read; of ``src_embedding``
for GPT and BERT) and the vocabulary size as ``len(token_embedding) /
hidden``. The source table is ``[vocab, hidden]``; the Transformer's target
table is stored transposed, ``[hidden, vocab]`` (it doubles as the output
projection). Quantized tables are ``uint8`` codes ``q`` that LightSeq
dequantizes as ``(q - 127) * emb_clip_max / 127``.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import IO, Any, Final, cast

import numpy as np
import numpy.typing as npt

from finalfusion._binary import check_dims
from finalfusion._isolated import call_isolated
from finalfusion._source import Source, input_size, local_path, peek, sized_or_stream
from finalfusion._stream import StreamReader
from finalfusion.compat._build import embeddings_from
from finalfusion.compat._model_vocab import model_vocab
from finalfusion.compat._protowire import Message, parse_message, stream_varint
from finalfusion.compat._registry import register_format
from finalfusion.embeddings import Embeddings
from finalfusion.errors import FormatError, Truncated, import_extra
from finalfusion.metadata import Metadata

__all__ = ["load_lightseq"]

_FORMAT: Final = "LightSeq"
HDF5_MAGIC: Final = b"\x89HDF\r\n\x1a\n"
#: LightSeq's int8 range (``_quant_range``).
QUANT_RANGE: Final = 127.0
#: Values converted per block (bounds the temporaries beyond the float32 result).
_BLOCK: Final = 1 << 21


class _Table:
    """What the loader needs from either container: the raw table and a few scalars."""

    def __init__(
        self, model: str, values: Any, n_values: int, quantized: bool, clip_max: float, hidden: int, no_scale: bool | None, offset: int | None
    ) -> None:
        self.model = model  # "Transformer" / "GPT or BERT" / "GPT" / "BERT", "Quant" prefix when quantized
        self.values = values  # 1-D array-like of float32 or uint8 values (a view where possible)
        self.n_values = n_values
        self.quantized = quantized
        self.clip_max = clip_max
        self.hidden = hidden
        self.no_scale = no_scale
        self.offset = offset
        self.owned = False  # values is a private array (read from HDF5) that may become the result


def _is_hdf5(head: bytes) -> bool:
    return head[:8] == HDF5_MAGIC


def _open_buffer(file: Source) -> tuple[Any, str, Path | None]:
    """The input as a buffer (a read-only map of a plain file), its name, and the path it names.

    :func:`~finalfusion._source.sized_or_stream` tells the inputs apart: a
    plain file is mapped, uncompressed contents are used as they are;
    anything of unknown size (gzip data, a pipe or FIFO, a file object
    without a descriptor) is read as a stream (:func:`_stream_input`).
    """
    path = local_path(file)
    with sized_or_stream(file) as (name, buf, stream):
        if stream is not None:
            buf = _stream_input(stream, name)
        return buf, name, None if path is None else Path(path)


#: Most top-level fields read from a protobuf stream (a LightSeq model has one per layer and a few more).
MAX_STREAM_FIELDS: Final = 1 << 16


def _stream_input(stream: IO[bytes], name: str) -> Any:
    """A protobuf model from an input of unknown size, with only the top-level fields the loader reads.

    A stream may never end, and protobuf declares no total length, so the
    message is never read whole: field by field, the payloads of
    ``src_embedding``, ``trg_embedding`` and ``model_conf`` are kept (read
    as they arrive, so a declared length larger than the stream ends in
    :class:`Truncated`), the encoder and decoder stacks are read and
    dropped (the decoder's presence is kept as an empty field), and more
    than :data:`MAX_STREAM_FIELDS` top-level fields are refused. Error
    offsets while the stream is read are the stream's; those of the later
    parse, beyond a dropped field, are offsets into what was kept.
    HDF5 needs a file it can seek in: from a stream only when its size is
    known (a ``BytesIO``), else :class:`FormatError`.
    """
    head, f = peek(stream, 8)
    if _is_hdf5(head):
        if input_size(f) is None:
            raise FormatError(
                "HDF5 data of unknown size (gzip, a pipe, a file object without a descriptor) cannot be read: h5py needs a file it can seek in",
                offset=0,
                chunk=f"{_FORMAT} HDF5",
                expected="a path, or the bytes, of an uncompressed HDF5 file",
                found=name,
            )
        return f.read()
    return _stream_fields(StreamReader(f))


def _stream_fields(stream: StreamReader) -> bytearray:
    out = bytearray()
    where = f"{_FORMAT} model"
    for _ in range(MAX_STREAM_FIELDS):
        tag = stream_varint(stream, where, eof_ok=True)
        if tag is None:
            return out
        key, tag_raw = tag
        number, wire = key >> 3, key & 7
        at = stream.pos
        if wire in (0, 1, 5):
            if wire == 0:
                value = cast("tuple[int, bytes]", stream_varint(stream, where))[1]
            else:
                value = stream.read_upto(8 if wire == 1 else 4)
                if len(value) < (8 if wire == 1 else 4):
                    raise Truncated(f"field {number} runs past the end of the data", offset=at, chunk=where, expected="a fixed-size value", found="fewer bytes")
            out += tag_raw + value
            continue
        if wire != 2 or number == 0:
            raise FormatError(
                "not a protobuf field", offset=at - len(tag_raw), chunk=where, expected="a field number >= 1 with wire type 0, 1, 2 or 5", found=key
            )
        length, length_raw = cast("tuple[int, bytes]", stream_varint(stream, where))
        at = stream.pos
        bound = stream.bound()
        if bound is not None and length > bound:
            raise Truncated(f"field {number} runs past the end of the data", offset=at, chunk=where, expected=f"at most {bound} bytes", found=f"{length} bytes")
        if number in _TOP_FIELDS and number != 4:
            payload = bytearray()
            if not stream.fill(payload, length):
                raise Truncated(
                    f"field {number} runs past the end of the data", offset=at, chunk=where, expected=f"{length} bytes", found=f"{len(payload)} bytes"
                )
            out += tag_raw + length_raw + payload
        else:  # the stacks: read and dropped (the decoder's presence tells a Transformer)
            if stream.skip(length) < length:
                raise Truncated(f"field {number} runs past the end of the data", offset=at, chunk=where, expected=f"{length} bytes", found="fewer")
            if number == 4:
                out += tag_raw + b"\x00"
    raise FormatError(
        "too many top-level fields",
        offset=stream.pos,
        chunk=where,
        expected=f"at most {MAX_STREAM_FIELDS} (finalfusion.compat.lightseq.MAX_STREAM_FIELDS)",
        found="more",
    )


# -- protobuf --------------------------------------------------------------------------

#: Fields read (all others are skipped unstored): the model's embedding layers, decoder stack (presence) and config;
#: a layer's token_embedding, norm_scale and the quantized emb_clip_max (5: GPT/BERT, 9: Transformer);
#: the configs' sampling_method/is_post_ln (3), use_gelu (4), eos_id (6), extra_decode_length (7), no_scale_embedding (13).
_TOP_FIELDS: Final = frozenset({1, 3, 4, 5})
_LAYER_FIELDS: Final = frozenset({1, 3, 5, 9})
_CONF_FIELDS: Final = frozenset({3, 4, 6, 7, 13})


def _proto_table(buf: Any, side: str) -> _Table:
    top = parse_message(buf, f"{_FORMAT} model", wanted=_TOP_FIELDS)
    transformer = 4 in top or 5 in top
    if transformer:
        model = "Transformer"
        conf = top.message(5, f"{_FORMAT} model_conf", _CONF_FIELDS)
        no_scale: bool | None = bool(conf.varint(13)) if conf is not None else False
        hidden_layer = top.message(3, f"{_FORMAT} trg_embedding", _LAYER_FIELDS)
        hidden_name = "trg_embedding.norm_scale"
    else:
        if side != "src":
            raise ValueError(f"side={side!r}: a LightSeq GPT or BERT model has only a source embedding (side='src')")
        conf = top.message(3, f"{_FORMAT} model_conf", _CONF_FIELDS)
        model = _gpt_or_bert(conf)
        no_scale = None
        hidden_layer = top.message(1, f"{_FORMAT} src_embedding", _LAYER_FIELDS)
        hidden_name = "src_embedding.norm_scale"
    number = 1 if side == "src" else 3
    layer = top.message(number, f"{_FORMAT} {side}_embedding", _LAYER_FIELDS)
    if layer is None:
        raise FormatError(
            f"the model has no {side}_embedding", offset=0, chunk=f"{_FORMAT} {model}", expected=f"field {number} ({side}_embedding)", found="none"
        )
    hidden = hidden_layer.float_count(3) if hidden_layer is not None else 0
    if hidden == 0:
        raise FormatError(
            "no norm_scale to take the hidden size from", offset=0, chunk=f"{_FORMAT} {model}", expected=f"a non-empty {hidden_name}", found="none"
        )
    clip_field = 9 if transformer else 5
    quantized = 5 in layer.wires(clip_field)
    if quantized:
        clip_max = layer.float32(clip_field)
        span = layer.span(1)
        start, end = span if span is not None else (layer.start, layer.start)
        values: Any = np.frombuffer(buf, dtype=np.uint8, count=end - start, offset=start) if end > start else np.zeros(0, np.uint8)
        return _Table("Quant" + model, values, end - start, True, clip_max, hidden, no_scale, start)
    values = layer.floats(1)
    return _Table(model, values, int(values.size), False, 0.0, hidden, no_scale, layer.first_offset(1))


def _gpt_or_bert(conf: Message | None) -> str:
    # GptModelConf: 3 sampling_method (string), 6 eos_id; BertModelConf: 3 is_post_ln, 4 use_gelu (bools).
    if conf is None:
        return "GPT or BERT"
    if 2 in conf.wires(3) or 6 in conf or 7 in conf:
        return "GPT"
    if 0 in conf.wires(3) or 4 in conf:
        return "BERT"
    return "GPT or BERT"


# -- HDF5 ------------------------------------------------------------------------------


#: Seconds the process reading an HDF5 file may take: this much, plus one per 25 MB of file.
HDF5_SECONDS: float = 60.0


def _hdf5_table(source: Any, side: str) -> _Table:
    """The table of an HDF5 export, read by h5py in a child process (:mod:`finalfusion._isolated`).

    libhdf5 follows the offsets, heaps and B-trees of the file, and a
    crafted one can make it loop or crash where no check before the call
    reaches; in the child, either is this file's :class:`FormatError`.
    """
    import_extra("h5py", "reading LightSeq HDF5 files", extra="models")
    path = isinstance(source, (str, os.PathLike))
    size = os.path.getsize(source) if path else len(source)
    header, payload = call_isolated(
        __name__,
        "_hdf5_answer",
        [side, os.fspath(source) if path else None],
        data=None if path else bytes(source),
        seconds=HDF5_SECONDS + size / 25e6,
        max_payload=_hdf5_limit(size),
        what=f"{_FORMAT} HDF5",
    )
    dtype = {"uint8": np.uint8, "float32": np.float32}.get(header.get("dtype", ""))
    fields = ("model", "quantized", "clip_max", "hidden", "no_scale")
    if dtype is None or any(k not in header for k in fields) or len(payload) % np.dtype(dtype).itemsize:
        raise FormatError("the HDF5 reading process answered out of shape", chunk=f"{_FORMAT} HDF5", expected="a table and its fields", found=sorted(header))
    values = np.frombuffer(bytearray(payload), dtype=dtype)
    model, quantized, clip_max, hidden, no_scale = (header[k] for k in fields)
    if not (
        isinstance(model, str) and isinstance(quantized, bool) and isinstance(clip_max, float) and isinstance(hidden, int) and no_scale in (None, True, False)
    ):
        raise FormatError("the HDF5 reading process answered out of shape", chunk=f"{_FORMAT} HDF5", expected="a table and its fields", found=header)
    t = _Table(model, values, int(values.size), quantized, clip_max, hidden, no_scale, None)
    t.owned = True
    return t


def _hdf5_limit(file_size: int) -> int:
    """Most bytes of table an HDF5 file of ``file_size`` bytes may give: a dataset may declare more than it stores (fill values, compression)."""
    return 16 * file_size + (1 << 20)


def _hdf5_answer(side: str, path: str | None, data: bytes | None = None) -> tuple[dict[str, Any], bytes]:  # pragma: no cover - the child
    """In the reading process: the table's fields and its values (``float32`` or ``uint8``) as bytes."""
    import io

    import h5py  # type: ignore[import-untyped,unused-ignore]

    source: Any = path if path is not None else io.BytesIO(cast(bytes, data))
    size = os.path.getsize(path) if path is not None else len(cast(bytes, data))
    try:
        with h5py.File(source, "r") as f:
            t = _hdf5_read(f, side, size)
    except FormatError:
        raise
    except (OSError, KeyError, ValueError, TypeError, RuntimeError, AttributeError, IndexError, OverflowError) as exc:
        if isinstance(exc, ValueError) and str(exc).startswith("side="):
            raise  # the caller's argument, not the file: a GPT or BERT export has no target side
        # h5py reports a corrupt file as OSError ("file signature not found", "bad object header", ...).
        raise FormatError("HDF5 data that h5py cannot read", offset=None, chunk=f"{_FORMAT} HDF5", expected="a valid HDF5 file", found=str(exc)[:200]) from None
    header = {"dtype": t.values.dtype.name, "model": t.model, "quantized": t.quantized, "clip_max": t.clip_max, "hidden": t.hidden, "no_scale": t.no_scale}
    return header, np.ascontiguousarray(t.values).tobytes()


def _dataset(f: Any, name: str) -> Any:
    """The dataset ``name`` (``None`` when absent), reached through hard links only and with its data stored in the file itself.

    A file's content is data, never an instruction (DESIGN.md, convention
    16): HDF5 can make a name point elsewhere -- a soft link, an external
    link to another file, a dataset whose raw data is an external file
    (``H5Pset_external``) or a virtual dataset mapping other files. Each is
    refused here, from the link and the creation property list alone,
    before a byte of data is read: a model file cannot make the loader
    read (or block on) another local file.
    """
    obj = _linked(f, name)
    if obj is None:
        return None
    import h5py  # type: ignore[import-untyped,unused-ignore]

    if not isinstance(obj, h5py.Dataset):
        raise FormatError(f"{name} is not a dataset", chunk=f"{_FORMAT} HDF5", expected="a dataset", found=type(obj).__name__)
    plist = obj.id.get_create_plist()
    layout = plist.get_layout()
    external = plist.get_external_count()
    if external or layout not in _STORED_INSIDE or obj.is_virtual:
        what = f"{external} external file(s)" if external else "a virtual dataset" if obj.is_virtual or layout == h5py.h5d.VIRTUAL else f"layout {layout}"
        raise FormatError(
            f"the data of {name} is not stored in the file",
            chunk=f"{_FORMAT} HDF5 {name}",
            expected="a compact, contiguous or chunked dataset stored in the file itself",
            found=what,
        )
    return obj


#: Dataset layouts whose data the file itself holds (h5py.h5d.COMPACT, CONTIGUOUS, CHUNKED); not VIRTUAL (3).
_STORED_INSIDE: Final = frozenset({0, 1, 2})


def _linked(f: Any, name: str) -> Any:
    """The object at ``name`` (``None`` when absent), each part of the path a hard link (soft and external links are refused, never followed)."""
    import h5py  # type: ignore[import-untyped,unused-ignore]

    node = f
    parts = name.split("/")
    for i, part in enumerate(parts):
        if not isinstance(node, h5py.Group):
            return None
        link = node.get(part, getlink=True)
        if link is None:
            return None
        if not isinstance(link, h5py.HardLink):
            path = "/".join(parts[: i + 1])
            target = f"{link.filename}:{link.path}" if isinstance(link, h5py.ExternalLink) else getattr(link, "path", "")
            raise FormatError(
                f"{path} is a {type(link).__name__} (to {target}), not an object stored in the file",
                chunk=f"{_FORMAT} HDF5 {path}",
                expected="a hard link (links are never followed)",
                found=type(link).__name__,
            )
        node = node[part]
    return node


def _has(f: Any, name: str) -> bool:
    return _linked(f, name) is not None


def _hdf5_read(f: Any, side: str, file_size: int) -> _Table:
    transformer = _has(f, "trg_embedding")
    if transformer:
        model = "Transformer"
        hidden_name = "trg_embedding/norm_scale"
        flag = _dataset(f, "model_conf/no_scale_embedding")
        no_scale: bool | None = bool(_scalar(flag, "model_conf/no_scale_embedding")) if flag is not None else False
    else:
        if side != "src":
            raise ValueError(f"side={side!r}: a LightSeq GPT or BERT model has only a source embedding (side='src')")
        gpt = _has(f, "model_conf/eos_id") or _has(f, "model_conf/sampling_method")
        model = "GPT" if gpt else ("BERT" if _has(f, "model_conf/is_post_ln") else "GPT or BERT")
        hidden_name = "src_embedding/norm_scale"
        no_scale = None
    norm = _dataset(f, hidden_name)
    hidden = int(norm.size) if norm is not None else 0
    if hidden == 0:
        raise FormatError("no norm_scale to take the hidden size from", chunk=f"{_FORMAT} HDF5 {model}", expected=f"a non-empty {hidden_name}", found="none")
    name = f"{side}_embedding/token_embedding"
    table = _dataset(f, name)
    if table is None:
        raise FormatError(f"the model has no {name}", chunk=f"{_FORMAT} HDF5 {model}", expected=name, found=sorted(f.keys())[:10])
    clip_ds = _dataset(f, f"{side}_embedding/emb_clip_max")
    quantized = clip_ds is not None
    kind = table.dtype.kind
    if kind not in "fiu" or (quantized and table.dtype.itemsize != 1) or (not quantized and kind != "f"):
        raise FormatError(
            "token_embedding has the wrong type", chunk=f"{_FORMAT} HDF5 {name}", expected="uint8 with emb_clip_max, else float", found=str(table.dtype)
        )
    # A dataset may declare more elements than it stores (fill values, compression): bound what is allocated by the file size.
    limit = _hdf5_limit(file_size)
    if table.size * table.dtype.itemsize > limit:
        raise FormatError(
            "token_embedding declares more data than the file can hold",
            chunk=f"{_FORMAT} HDF5 {name}",
            expected=f"at most {limit} bytes",
            found=f"{table.size} x {table.dtype}",
        )
    values = table[()].reshape(-1)  # read whole: float32 tables are then used in place (see _matrix)
    values = values.astype(np.uint8) if quantized else values.astype(np.float32, copy=False)
    clip_max = float(_scalar(clip_ds, f"{side}_embedding/emb_clip_max")) if quantized else 0.0
    t = _Table(("Quant" if quantized else "") + model, values, int(values.size), quantized, clip_max, hidden, no_scale, None)
    t.owned = True
    return t


def _scalar(ds: Any, name: str) -> Any:
    if ds.dtype.kind not in "biuf":
        raise FormatError(f"{name} is not a number", chunk=f"{_FORMAT} HDF5", expected="a boolean, integer or float", found=str(ds.dtype))
    value = np.asarray(ds[()]).reshape(-1)
    if value.size != 1:
        raise FormatError(f"{name} is not a single value", chunk=f"{_FORMAT} HDF5", expected="a scalar", found=f"{value.size} values")
    return value[0]


# -- the table -------------------------------------------------------------------------


def _dequantize(codes: Any, clip_max: float, out: npt.NDArray[np.float32]) -> None:
    """LightSeq's ``dequantize``: ``(float(q) - 127) * clip_max / 127``, in float32, into ``out``."""
    np.subtract(codes, np.float32(QUANT_RANGE), out=out, dtype=np.float32)
    out *= np.float32(clip_max)
    out /= np.float32(QUANT_RANGE)


def _matrix(t: _Table, side: str, rows_used: int) -> npt.NDArray[np.float32]:
    """Rows ``0..rows_used`` of the table as a C-contiguous float32 ``[rows, hidden]`` matrix."""
    hidden = t.hidden
    rows = t.n_values // hidden
    out = np.empty((rows_used, hidden), dtype=np.float32)
    transposed = t.model.endswith("Transformer") and side == "trg"
    values = t.values
    if t.owned and not transposed and not t.quantized and values.dtype == np.float32 and values.flags.c_contiguous:
        own: npt.NDArray[np.float32] = values[: rows_used * hidden].reshape(rows_used, hidden)
        return own  # a private array read from HDF5: no second copy
    if not transposed:
        flat = out.reshape(-1)
        for start in range(0, flat.size, _BLOCK):
            stop = min(start + _BLOCK, flat.size)
            if t.quantized:
                _dequantize(t.values[start:stop], t.clip_max, flat[start:stop])
            else:
                flat[start:stop] = t.values[start:stop]
        return out
    # [hidden, rows] on disk: copy a band of hidden units at a time (each band reads whole stored rows).
    stored = t.values[: hidden * rows].reshape(hidden, rows)
    band = max(1, _BLOCK // max(rows, 1))
    for h0 in range(0, hidden, band):
        h1 = min(h0 + band, hidden)
        part = stored[h0:h1, :rows_used]
        if t.quantized:
            tmp = np.empty(part.shape, dtype=np.float32)
            _dequantize(part, t.clip_max, tmp)
            out[:, h0:h1] = tmp.T
        else:
            out[:, h0:h1] = part.T
    return out


def load_lightseq(file: Source, vocab: Any, *, side: str = "src", normalize: bool = True) -> Embeddings:
    """Read a token-embedding table from a LightSeq export (``.pb`` protobuf or ``.hdf5``).

    Parameters
    ----------
    file
        A :data:`~finalfusion._source.Source`: a path (``str``,
        ``os.PathLike``, or ``bytes`` naming an existing file), a file
        descriptor, the file's bytes or a binary file object (read from its
        current position), gzip compressed or not. HDF5 is recognised
        by its signature (reading it needs ``h5py``); anything else is read
        as LightSeq protobuf (Transformer, GPT, BERT and their quantized
        variants, recognised from the fields present).
    vocab
        The vocabulary LightSeq does not store: a list of tokens (row ``i``
        is token ``i``), a SentencePiece ``.model`` or a ``tokenizer.json``
        (path, bytes or tokenizer object; unknown words are then embedded
        through the tokenizer), or a fairseq ``dict.txt`` (fairseq's
        ``<s> <pad> </s> <unk>`` come first, as in fairseq's ``Dictionary``).
    side
        ``"src"`` (encoder input embedding; the only one of GPT and BERT) or
        ``"trg"`` (a Transformer's decoder input embedding, stored
        transposed).
    normalize
        l2-normalise the rows and keep their norms (default).

    Returns
    -------
    Embeddings
        One row per token. The hidden size is the length of ``norm_scale``
        and the row count ``len(token_embedding) / hidden``, as in
        LightSeq's loaders; rows beyond the vocabulary (padding) are
        dropped. Quantized tables are dequantized as LightSeq does. The rows
        are the stored values: a fairseq Transformer export is pre-multiplied
        by ``sqrt(hidden)`` unless ``model_conf.no_scale_embedding``
        (quantized Transformers are scaled at lookup time instead); the
        metadata records the model kind, side, hidden size, quantization,
        ``emb_clip_max``, the flag and the resulting ``sqrt_hidden_scaling``
        (``"stored"``, ``"at lookup"`` or ``"none"``), and the norms keep
        the stored magnitude.

    Raises
    ------
    FormatError
        (format ``LightSeq``) For malformed protobuf (lengths past the end,
        bad varints, wrong wire types), no ``norm_scale``, a table whose size
        is not a multiple of the hidden size, a quantized table without a
        positive ``emb_clip_max``, non-finite values, or fewer rows than the
        vocabulary has tokens.
    ValueError
        For ``side="trg"`` on a GPT or BERT model, or another ``side``.
    ModuleNotFoundError
        For HDF5 input without ``h5py`` (the message names the extra).

    Examples
    --------
    >>> import struct, numpy as np
    >>> def field(n, payload): return bytes([n << 3 | 2, len(payload)]) + payload
    >>> table = np.array([[3, 4], [0, 1]], dtype="<f4").tobytes()
    >>> layer = field(1, table) + field(3, np.ones(2, dtype="<f4").tobytes())
    >>> emb = load_lightseq(field(1, layer), ["hello", "world"])   # a GPT/BERT export
    >>> emb["hello"].tolist(), float(emb.norms[0]), emb.metadata["lightseq"]["hidden_size"]
    ([0.6000000238418579, 0.800000011920929], 5.0, 2)
    """
    if side not in ("src", "trg"):
        raise ValueError(f"side must be 'src' or 'trg', got {side!r}")
    buf, name, path = _open_buffer(file)
    t = _hdf5_table(path if path is not None else buf, side) if _is_hdf5(bytes(buf[:8])) else _proto_table(buf, side)
    where = f"{_FORMAT} {t.model} {side}_embedding.token_embedding"
    # The hidden size is the row width: bounded like every reader's (else the .fifu written from it cannot be read back).
    check_dims(t.hidden, offset=t.offset, chunk=f"{_FORMAT} {t.model}", what="hidden size (len(norm_scale))")
    if t.n_values % t.hidden or t.n_values == 0:
        raise FormatError(
            "the table's size is not a positive multiple of the hidden size (len(norm_scale))",
            offset=t.offset,
            chunk=where,
            expected=f"a multiple of {t.hidden} values",
            found=f"{t.n_values} values",
        )
    if t.quantized and not (math.isfinite(t.clip_max) and t.clip_max > 0):
        raise FormatError("a quantized table needs a positive emb_clip_max", chunk=where, expected="emb_clip_max > 0", found=t.clip_max)
    rows = t.n_values // t.hidden
    vocabulary, used, described = model_vocab(vocab, None, rows, _FORMAT)
    matrix = _matrix(t, side, used)
    with np.errstate(invalid="ignore", over="ignore"):  # inf + -inf is nan: the check below names the row
        total = matrix.sum(dtype=np.float64)
    if not np.isfinite(total) and not np.isfinite(matrix).all():
        bad = int(np.flatnonzero(~np.isfinite(matrix).all(axis=1))[0])
        raise FormatError(f"row {bad} has a NaN or infinite component", offset=t.offset, chunk=where, expected="finite numbers", found=matrix[bad].tolist()[:8])
    scaling = ("at lookup" if t.quantized else "none" if t.no_scale else "stored") if t.model.endswith("Transformer") else "none"
    meta: dict[str, Any] = {
        "file": os.path.basename(name),
        "model": t.model,
        "side": side,
        "hidden_size": t.hidden,
        "rows": rows,
        "tokenizer": described,
        "padding_rows_dropped": rows - used,
        "quantized": t.quantized,
        "sqrt_hidden_scaling": scaling,
    }
    if t.quantized:
        meta["emb_clip_max"] = t.clip_max
    if t.no_scale is not None:
        meta["no_scale_embedding"] = t.no_scale
    return embeddings_from([], matrix, normalize, Metadata({"lightseq": meta}), vocab=vocabulary)


def _needs_vocabulary(source: Any) -> Embeddings:
    """The registry's loader for HDF5 input: a LightSeq export stores no vocabulary, so say which call loads it."""
    raise FormatError(
        "an HDF5 file (a LightSeq export) stores no vocabulary",
        offset=0,
        chunk="HDF5",
        expected="finalfusion.load_lightseq(file, vocab)",
        found="HDF5 data",
    )


register_format(
    "hdf5",
    description="HDF5 LightSeq export: read it with load_lightseq(file, vocab), since it stores no vocabulary",
    extensions=(".hdf5", ".h5"),
    order=6,
    detector=lambda sample, path: _is_hdf5(sample),
    loader=_needs_vocabulary,
    mismatch="no HDF5 signature",
)
