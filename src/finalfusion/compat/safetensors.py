"""Token-embedding tables from safetensors checkpoints (Hugging Face, model2vec), see docs/models.md.

A ``.safetensors`` file is a u64 header length, a JSON header naming each
tensor's dtype, shape and byte range, then the tensors' bytes (the table of
its bytes is in :mod:`finalfusion.compat._safetensors_header`).

The header is parsed and checked in
:mod:`finalfusion.compat._safetensors_header` (no ``safetensors`` package
needed, as strictly as the reference implementation). A sharded checkpoint is a
``model.safetensors.index.json`` (``{"weight_map": {"<tensor>": "<shard file>"}}``)
next to its shards; a model directory holds either.

The input-embedding table (found by the names real models give it, see
:data:`EMBEDDING_TENSOR_NAMES`) becomes the storage; the vocabulary comes
from the model's tokenizer (``tokenizer.json``, else ``tokenizer.model``,
else Mistral's ``tekken.json`` next to the weights), so unknown words are
embedded through the model's own tokenizer.
"""

from __future__ import annotations

import contextlib
import json
import mmap
import os
import struct
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Final, cast

import numpy as np
import numpy.typing as npt

from finalfusion import limits
from finalfusion._binary import Buffer, check_dims
from finalfusion._encode import WORDLLAMA_KEY
from finalfusion._remote import RemoteFile, is_url
from finalfusion._source import (
    GZIP_MAGIC,
    Location,
    Source,
    file_in,
    fill,
    local_path,
    open_regular,
    parent_of,
    read_regular,
    sibling,
    size_bound,
    sized_or_stream,
    skip,
)
from finalfusion._stream import read_exactly
from finalfusion.compat._build import embeddings_from
from finalfusion.compat._model2vec import MAPPING_TENSOR, MODEL2VEC_TENSOR, WEIGHTS_TENSOR, expand_quantized, model2vec_settings
from finalfusion.compat._model_vocab import is_wordllama_weights, model_vocab
from finalfusion.compat._registry import register_format
from finalfusion.compat._safetensors_header import (
    DTYPE_BITS,
    MAX_HEADER_BYTES,
    DuplicateKey,
    SafetensorsHeader,
    TensorInfo,
    parse_header,
    read_safetensors_header,
    reject_constant,
    reject_duplicates,
    short_value,
)
from finalfusion.embeddings import Embeddings
from finalfusion.errors import FormatError, Truncated
from finalfusion.metadata import Metadata

_FORMAT: Final = "safetensors"

__all__ = ["EMBEDDING_TENSOR_NAMES", "SafetensorsHeader", "TensorInfo", "load_safetensors", "read_safetensors_header"]

#: dtypes an embedding table may have; each becomes float32.
FLOAT_DTYPES: Final = ("F32", "F16", "BF16", "F64")
#: The integer dtype of model2vec's ``embeddings`` table (``quantize_to="int8"``), read value for value as model2vec's ``encode`` reads it.
MODEL2VEC_INT_DTYPE: Final = "I8"
#: Names of the input-embedding table in real checkpoints, tried in this order when ``tensor`` is not given.
EMBEDDING_TENSOR_NAMES: Final[tuple[str, ...]] = (
    "model.embed_tokens.weight",  # Llama, Mistral, Qwen, Gemma, Phi-3, OLMo, ...
    "transformer.wte.weight",  # GPT-2, GPT-J, StarCoder, Falcon-RW
    "embeddings.word_embeddings.weight",  # BertModel, RobertaModel, XLM-R, ELECTRA (base classes)
    "bert.embeddings.word_embeddings.weight",
    "roberta.embeddings.word_embeddings.weight",
    "distilbert.embeddings.word_embeddings.weight",
    "electra.embeddings.word_embeddings.weight",
    "deberta.embeddings.word_embeddings.weight",
    "albert.embeddings.word_embeddings.weight",
    "xlm-roberta.embeddings.word_embeddings.weight",
    "shared.weight",  # T5, BART, mT5 (shared encoder/decoder table)
    "model.shared.weight",
    "encoder.embed_tokens.weight",  # T5EncoderModel
    "model.encoder.embed_tokens.weight",
    "gpt_neox.embed_in.weight",  # GPT-NeoX, Pythia
    "model.embed_tokens",
    "tok_embeddings.weight",  # original Llama / Mistral checkpoints
    "word_embeddings.weight",  # BLOOM (base)
    "transformer.word_embeddings.weight",  # BLOOM, Falcon
    "transformer.embedding.word_embeddings.weight",  # ChatGLM
    "model.decoder.embed_tokens.weight",  # OPT, BART decoder
    "decoder.embed_tokens.weight",
    "transformer.embd.wte.weight",  # Phi-1/Phi-2 (old layout)
    "language_model.model.embed_tokens.weight",  # LLaVA-style multimodal wrappers
    "model.language_model.embed_tokens.weight",
    "embed_tokens.weight",
    "wte.weight",
    "embeddings",  # model2vec static embeddings
    "embedding.weight",  # WordLlama, sentence-transformers StaticEmbedding
)
#: Bytes read (and decoded) per block: the only memory needed beyond the float32 result.
_BLOCK_BYTES: Final = 1 << 23
_LITTLE: Final = sys.byteorder == "little"


# -- locating the weights --------------------------------------------------------------


@dataclass(frozen=True)
class _Located:
    file: Any  # path of the file or shard holding the table, its whole buffer, the stream read as declared, or the opened remote file
    name: str  # for messages and metadata
    directory: Location | None  # where to look for the tokenizer: a local directory or one at a URL
    header: SafetensorsHeader
    tensor: TensorInfo


def _locate(path: Path, tensor: str | None) -> _Located:
    """The table in a file, a sharded index or a model directory (``path``: what :func:`~finalfusion._source.local_path` named)."""
    if path.is_dir():
        path = _weights_in(path)
    if path.name.endswith(".index.json"):
        return _locate_sharded(path, tensor)
    with open_regular(path, chunk=_FORMAT) as f:  # found by the directory rule, or named: never waits on a FIFO put there since
        header = read_safetensors_header(f, name=str(path))
    return _Located(path, str(path), path.parent, header, _choose(header.tensors, tensor, str(path)))


def _weights_in(directory: Path) -> Path:
    """The checkpoint of a model directory; every candidate passes the directory rule (:func:`~finalfusion._source.file_in`)."""
    for candidate in ("model.safetensors.index.json", "model.safetensors"):
        found = file_in(directory, candidate, chunk=_FORMAT)
        if found is not None:
            return Path(found)
    indexes, files = (
        [p for p in sorted(directory.glob(pattern)) if file_in(directory, p.name, chunk=_FORMAT)] for pattern in ("*.safetensors.index.json", "*.safetensors")
    )
    for group in (indexes, files):
        if len(group) == 1:
            return group[0]
        if len(group) > 1:
            raise FormatError(
                "the directory holds several checkpoints", chunk=_FORMAT, expected="one *.safetensors file or index", found=[g.name for g in group][:10]
            )
    raise FileNotFoundError(f"no model.safetensors, model.safetensors.index.json or other *.safetensors file in {directory}")


#: The checkpoints a directory at a URL is asked for, in this order (a server need not list a directory).
URL_DIRECTORY_FILES: Final = ("model.safetensors.index.json", "model.safetensors")


def _locate_url(url: str, tensor: str | None, stack: contextlib.ExitStack) -> _Located | None:
    """The table of a directory (``.../``), index or file at a URL, its file kept open in ``stack``; ``None`` for gzip data (read as a stream)."""
    if url.endswith("/"):
        directory = url.rstrip("/")
        found = next((u for u in (file_in(directory, n, chunk=_FORMAT) for n in URL_DIRECTORY_FILES) if u is not None), None)
        if found is None:
            raise FileNotFoundError(
                2,
                f"no {' or '.join(URL_DIRECTORY_FILES)} in this directory (a directory at a URL is not listed: name another checkpoint by its URL)",
                url,
            )
        url = found
    if url.endswith(".index.json"):
        return _locate_sharded(url, tensor, stack)
    f = stack.enter_context(open_regular(url, chunk=_FORMAT))
    if f.read(2) == GZIP_MAGIC:
        return None
    header = read_safetensors_header(f, name=url)
    return _Located(f, url, parent_of(url), header, _choose(header.tensors, tensor, url))


def _locate_sharded(index: Location, tensor: str | None, stack: contextlib.ExitStack | None = None) -> _Located:
    """The table of a sharded checkpoint: its index, then the header of the one shard that holds the table (kept open in ``stack`` if given)."""
    index_name = os.path.basename(os.fsdecode(index))
    directory = cast(Location, parent_of(index))
    where = f"{_FORMAT} index {index_name}"
    raw = read_regular(index, chunk=where, max_bytes=limits.MAX_MODEL_HEADER_BYTES, limit="finalfusion.limits.MAX_MODEL_HEADER_BYTES")
    try:
        obj = json.loads(raw.decode("utf-8"), object_pairs_hook=reject_duplicates, parse_constant=reject_constant)
    except DuplicateKey as dup:
        raise FormatError("the index names a tensor twice", chunk=where, expected="unique names", found=dup.key) from None
    except (ValueError, RecursionError) as exc:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        raise FormatError("the index is not valid JSON", offset=getattr(exc, "pos", 0), chunk=where, expected="a JSON object", found=str(exc)[:80]) from None
    weight_map = obj.get("weight_map") if isinstance(obj, dict) else None
    if not isinstance(weight_map, dict) or not all(isinstance(v, str) for v in weight_map.values()):
        raise FormatError("the index has no weight_map", offset=0, chunk=where, expected='{"weight_map": {tensor: shard file}}', found=short_value(obj))
    # Every shard name is checked by the one rule (not only the one opened): an index naming any file
    # that is not a sibling -- absolute, with a directory part or '..', with a NUL -- is not a checkpoint.
    shards = {
        shard_name: sibling(directory, shard_name, chunk=where, message="a shard must be a file next to the index") for shard_name in set(weight_map.values())
    }
    name = _choose_name(list(weight_map), tensor, os.fsdecode(index))
    shard_name = weight_map[name]
    shard = shards[shard_name]
    if stack is not None:  # at a URL: the shard is opened once, and its table read through the same file
        try:
            f = stack.enter_context(open_regular(shard, chunk=where))
        except FileNotFoundError:
            raise FileNotFoundError(2, "the shard the index names does not exist", os.fsdecode(shard)) from None
        header = read_safetensors_header(f, name=os.fsdecode(shard))
        file: Any = f
    else:
        if file_in(directory, shard_name, chunk=where) is None:
            raise FileNotFoundError(2, "the shard the index names does not exist", os.fsdecode(shard))
        with open_regular(shard, chunk=where) as f:
            header = read_safetensors_header(f, name=os.fsdecode(shard))
        file = Path(shard)
    if name not in header.tensors:
        raise FormatError(
            "the shard the index names does not hold the tensor", chunk=f"{_FORMAT} {shard_name}", expected=name, found=_some(list(header.tensors))
        )
    return _Located(file, os.fsdecode(shard), directory, header, header.tensors[name])


def _some(names: Sequence[str]) -> str:
    shown = ", ".join(names[:12])
    return shown + (f", ... ({len(names)} tensors)" if len(names) > 12 else "") if names else "no tensors"


def _choose_name(names: list[str], tensor: str | None, where: str) -> str:
    if tensor is not None:
        if tensor not in names:
            raise FormatError(f"no tensor {tensor!r} in {where}", chunk=_FORMAT, expected=tensor, found=_some(names))
        return tensor
    present = set(names)
    for candidate in EMBEDDING_TENSOR_NAMES:
        if candidate in present:
            return candidate
    raise FormatError(
        f"no input-embedding table found in {where} (pass tensor=...)",
        chunk=_FORMAT,
        expected=f"one of the names {', '.join(EMBEDDING_TENSOR_NAMES)}",
        found=_some(names),
    )


def _choose(tensors: dict[str, TensorInfo], tensor: str | None, where: str) -> TensorInfo:
    return tensors[_choose_name(list(tensors), tensor, where)]


# -- decoding the table -------------------------------------------------------------------


def _read_rows(src: Path | Buffer | RemoteFile, data_start: int, info: TensorInfo, rows: int, normalize: bool) -> npt.NDArray[np.float32]:
    """Rows ``0..rows`` of the table as float32, block by block (peak: the result plus one block); a remote file is read by range."""
    dims = info.shape[1]
    at = data_start + info.begin
    n_bytes = rows * dims * DTYPE_BITS[info.dtype] // 8
    if info.dtype == "F32" and _LITTLE and not normalize and isinstance(src, Path):
        # Zero-copy: a read-only view of the mapped file.
        with open_regular(src, chunk=_FORMAT) as f:
            if n_bytes == 0:
                return np.zeros((rows, dims), dtype=np.float32)
            mapped = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        return np.frombuffer(mapped, dtype="<f4", count=rows * dims, offset=at).reshape(rows, dims)
    out = np.empty((rows, dims), dtype=np.float32)
    flat = out.reshape(-1)
    if not isinstance(src, (Path, RemoteFile)):  # the whole file as a buffer
        raw = memoryview(src).cast("B")[at : at + n_bytes]
        _decode_into(flat, raw, info.dtype)
        return out
    with open_regular(src, chunk=_FORMAT) if isinstance(src, Path) else contextlib.nullcontext(cast(IO[bytes], src)) as f:
        f.seek(at)
        if info.dtype == "F32" and _LITTLE:
            read_exactly(f, flat.view(np.uint8).data, "the tensor data", chunk=_FORMAT, offset=at)
            return out
        size = DTYPE_BITS[info.dtype] // 8
        per_block = max(1, _BLOCK_BYTES // size)
        buf = bytearray(min(per_block, flat.size) * size)
        for start in range(0, flat.size, per_block):
            count = min(per_block, flat.size - start)
            view = memoryview(buf)[: count * size]
            read_exactly(f, view, "the tensor data", chunk=_FORMAT, offset=at + start * size)
            _decode_into(flat[start : start + count], view, info.dtype)
    return out


def _data_end(header: SafetensorsHeader) -> int:
    return max((t.end for t in header.tensors.values()), default=0)


def _stream_header(f: IO[bytes], name: str) -> SafetensorsHeader:
    """The header of a stream of unknown size: the u64 length, then exactly that many bytes (at most :data:`MAX_HEADER_BYTES`), as they arrive."""
    buf = bytearray()
    if not fill(f, buf, 8):
        raise Truncated("the file ends inside the header length", offset=0, chunk=_FORMAT, expected="8 bytes (u64 header length)", found=f"{len(buf)} bytes")
    (n,) = struct.unpack("<Q", buf)
    if n > MAX_HEADER_BYTES:
        raise FormatError("header length above the format's limit", offset=0, chunk=_FORMAT, expected=f"at most {MAX_HEADER_BYTES} bytes", found=n)
    bound = size_bound(f)
    if bound is not None and n > bound:
        raise Truncated(
            "the header length runs past the end of the file", offset=0, chunk=_FORMAT, expected=f"at most {bound} bytes of header", found=f"{n} bytes"
        )
    if not fill(f, buf, 8 + n):
        raise Truncated("the file ends inside the header", offset=len(buf), chunk=_FORMAT, expected=f"{n} bytes of header", found=f"{len(buf) - 8} bytes")
    del buf[:8]
    header = parse_header(buf, None, name)
    end = _data_end(header)
    if bound is not None and end > bound - n:
        info = max(header.tensors.values(), key=lambda t: t.end)
        raise Truncated(
            "a tensor's data runs past the end of the file",
            offset=header.data_start + info.begin,
            chunk=f"{_FORMAT} tensor {info.name!r}",
            expected=f"data_offsets within the at most {bound - n} data bytes",
            found=[info.begin, info.end],
        )
    return header


def _stream_rows(f: IO[bytes], header: SafetensorsHeader, info: TensorInfo, rows: int) -> npt.NDArray[np.float32]:
    """Rows ``0..rows`` of the table from a stream positioned at the data section; the rest of the declared data is read and dropped.

    The table's bytes are read as they arrive (a declared size larger than
    the stream ends in :class:`Truncated` when it ends) and decoded at
    once; the other tensors' bytes are dropped in small blocks. After the
    last tensor one byte is looked at: data there is refused as in a file.
    """
    dims = info.shape[1]
    end = _data_end(header)
    if skip(f, info.begin) < info.begin:
        raise Truncated("the file ends before the tensor data", offset=header.data_start, chunk=_FORMAT, expected=f"{info.begin} bytes", found="fewer")
    raw = bytearray()
    n_bytes = rows * dims * DTYPE_BITS[info.dtype] // 8
    if not fill(f, raw, n_bytes):
        at = header.data_start + info.begin + len(raw)
        raise Truncated("the file ends inside the tensor data", offset=at, chunk=_FORMAT, expected=f"{n_bytes} bytes", found=f"{len(raw)} bytes")
    rest = end - info.begin - n_bytes
    if skip(f, rest) < rest:
        raise Truncated("the file ends inside the tensor data", offset=None, chunk=_FORMAT, expected=f"{end} data bytes", found="fewer")
    if f.read(1):
        raise FormatError("bytes after the last tensor", offset=header.data_start + end, chunk=_FORMAT, expected=f"{end} data bytes", found="more")
    if info.dtype == "F32" and _LITTLE:
        return np.frombuffer(raw, dtype=np.float32).reshape(rows, dims)  # private and writable: no copy
    out = np.empty((rows, dims), dtype=np.float32)
    _decode_into(out.reshape(-1), raw, info.dtype)
    return out


def _decode_into(out: npt.NDArray[np.float32], raw: Any, dtype: str) -> None:
    """Decode little-endian ``dtype`` values from ``raw`` into the float32 array ``out``."""
    if dtype == "F32":
        out[...] = np.frombuffer(raw, dtype="<f4")
    elif dtype == "F16":
        out[...] = np.frombuffer(raw, dtype="<f2")
    elif dtype == MODEL2VEC_INT_DTYPE:
        out[...] = np.frombuffer(raw, dtype="i1")
    elif dtype == "F64":
        with np.errstate(over="ignore"):  # values beyond float32 become inf, refused by the finiteness check
            out[...] = np.frombuffer(raw, dtype="<f8")
    else:  # BF16: the upper half of a float32
        bits = out.view(np.uint32)
        np.left_shift(np.frombuffer(raw, dtype="<u2"), 16, out=bits, dtype=np.uint32)


def _check_finite(matrix: npt.NDArray[np.float32], where: str) -> None:
    block = 1 << 16
    for start in range(0, matrix.shape[0], block):
        part = matrix[start : start + block]
        with np.errstate(invalid="ignore", over="ignore"):  # inf + -inf is nan: the check below names the row
            total = part.sum(dtype=np.float64)
        if not np.isfinite(total) and not np.isfinite(part).all():
            bad = start + int(np.flatnonzero(~np.isfinite(part).all(axis=1))[0])
            raise FormatError(
                f"row {bad} has a NaN or infinite component (or overflows float32)",
                chunk=where,
                expected="finite numbers",
                found=part[bad - start].tolist()[:8],
            )


def load_safetensors(file: Source, *, tensor: str | None = None, tokenizer: Any = None, normalize: bool = True) -> Embeddings:
    """Read the token-embedding table of a safetensors checkpoint.

    Parameters
    ----------
    file
        A :data:`~finalfusion._source.Source`. A path (``str``,
        ``os.PathLike``, or ``bytes`` naming an existing file or directory)
        to a ``.safetensors`` file, a sharded checkpoint's
        ``*.safetensors.index.json``, or a model directory holding either
        (``model.safetensors.index.json``, ``model.safetensors``, or a single
        ``*.safetensors``). The file's bytes, a file descriptor or a binary
        file object (read from its current position) work too, gzip
        compressed or not (then ``tokenizer`` must be given). A URL
        (docs/remote.md) names a file, an index or, ending in ``/``, a model
        directory: the headers, then only the table's byte range of the one
        shard that holds it are fetched, and the tokenizer and ``config.json``
        beside it.
    tensor
        Name of the table. By default the first of
        :data:`EMBEDDING_TENSOR_NAMES` that the checkpoint holds (the
        error names those tried when none is there). It must be 2-D
        ``(rows, dims)`` in F32, F16, BF16 or F64 (or I8 for a model2vec
        ``embeddings`` table written with ``quantize_to="int8"``: its values
        as model2vec's ``encode`` averages them).
    tokenizer
        The vocabulary: a path to a ``tokenizer.json``, a SentencePiece
        ``.model`` or a Mistral ``tekken.json`` (or their bytes), a tokenizer
        object, or a list of tokens (row ``i`` is token ``i``). By default
        ``tokenizer.json``, else ``tokenizer.model``, else ``tekken.json``,
        next to the weights. With a tokenizer, every word is embedded
        through it (the word rule: the mean of the model's rows of its
        tokens; docs/models.md).
    normalize
        l2-normalise the rows and keep their norms (the default, as for
        every converter); ``False`` keeps the rows as stored (an F32 table
        in a file is then a read-only view of the mapped file).

    Returns
    -------
    Embeddings
        One row per token. A table with more rows than the tokenizer has
        tokens (padded to a multiple of 64 or 128, as in Qwen, Phi or
        GPT-NeoX) keeps only the rows of real tokens; the metadata records
        the checkpoint, tensor, dtype, shape and the rows dropped.

    Raises
    ------
    FormatError
        For a malformed header (see :func:`read_safetensors_header`), no
        embedding table, a table that is not 2-D floats, non-finite values,
        or fewer rows than the tokenizer has tokens.
    FileNotFoundError
        When a directory holds no checkpoint, or no tokenizer is next to the
        weights and none is given.

    Examples
    --------
    >>> import json, struct, numpy as np
    >>> table = np.array([[3, 4], [0, 2], [9, 9]], dtype="<f4")
    >>> head = json.dumps({"embeddings": {"dtype": "F32", "shape": [3, 2], "data_offsets": [0, 24]}}).encode()
    >>> emb = load_safetensors(struct.pack("<Q", len(head)) + head + table.tobytes(), tokenizer=["a", "b"])
    >>> emb["a"].tolist(), float(emb.norms[0]), emb.metadata["safetensors"]["padding_rows_dropped"]
    ([0.6000000238418579, 0.800000011920929], 5.0, 1)
    """
    path = local_path(file)
    if path is not None and (os.path.isdir(path) or (os.path.isfile(path) and not _gzip_file(path))):
        # A model directory, an index or a plain file: shards and the tokenizer are read from beside it, the table mapped.
        loc = _locate(Path(path), tensor)
        return _load(loc, tokenizer, normalize, lambda n_tokens: _read_rows(loc.file, loc.header.data_start, loc.tensor, n_tokens, normalize))
    if is_url(file):
        # A directory, an index or a file at a URL: its headers, then the table's byte range; the tokenizer and config beside it.
        with contextlib.ExitStack() as stack:
            remote = _locate_url(cast(str, file), tensor, stack)
            if remote is not None:
                opened = cast(RemoteFile, remote.file)
                return _load(remote, tokenizer, normalize, lambda n: _read_rows(opened, remote.header.data_start, remote.tensor, n, normalize))
    with sized_or_stream(file) as (name, buf, stream):
        directory = Path(path).parent if path is not None else parent_of(cast(str, file)) if is_url(file) else None
        if buf is not None:  # contents, or a plain file as a descriptor or file object: the whole file as one buffer
            header = read_safetensors_header(buf, name=name)
            loc = _Located(buf, name, directory, header, _choose(header.tensors, tensor, name))
            return _load(loc, tokenizer, normalize, lambda n_tokens: _read_rows(buf, header.data_start, loc.tensor, n_tokens, normalize))
        f = cast(IO[bytes], stream)  # gzip, a FIFO or device, a file object of unknown size: read as declared
        header = _stream_header(f, name)
        loc = _Located(f, name, directory, header, _choose(header.tensors, tensor, name))
        return _load(loc, tokenizer, normalize, lambda n_tokens: _stream_rows(f, header, loc.tensor, n_tokens))


def _gzip_file(path: str) -> bool:
    with open(path, "rb") as f:
        return f.read(2) == GZIP_MAGIC


#: The table WordLlama's weight files hold.
WORDLLAMA_TENSOR: Final = "embedding.weight"


def _load(loc: _Located, tokenizer: Any, normalize: bool, read: Callable[[int], npt.NDArray[np.float32]]) -> Embeddings:
    info = loc.tensor
    where = f"{_FORMAT} tensor {info.name!r}"
    # model2vec's int8 tables (quantize_to="int8") hold the values its encode averages, as they are (no scale stored).
    dtypes = (*FLOAT_DTYPES, MODEL2VEC_INT_DTYPE) if info.name == MODEL2VEC_TENSOR else FLOAT_DTYPES
    if info.dtype not in dtypes:
        raise FormatError("the table's dtype cannot be read as float32", chunk=where, expected=" / ".join(dtypes), found=info.dtype)
    if len(info.shape) != 2 or info.shape[0] == 0 or info.shape[1] == 0:
        raise FormatError("an embedding table must be a non-empty matrix", chunk=where, expected="shape [rows, dims]", found=list(info.shape))
    check_dims(info.shape[1], offset=None, chunk=where)
    n_rows = info.shape[0]
    # model2vec: a vocabulary-quantized table has a row per cluster, 'mapping' a cluster per token, 'weights' a factor per token.
    extra = {n: t for n in (MAPPING_TENSOR, WEIGHTS_TENSOR) if (t := loc.header.tensors.get(n)) is not None} if info.name == MODEL2VEC_TENSOR else {}
    mapping, weights = (_read_vector(loc, extra[n]) if n in extra else None for n in (MAPPING_TENSOR, WEIGHTS_TENSOR))
    n_vocab_rows = len(mapping) if mapping is not None else n_rows
    vocab, n_tokens, described = model_vocab(tokenizer, loc.directory, n_vocab_rows, _FORMAT, weights_name=os.path.basename(loc.name))
    if mapping is not None or weights is not None:
        table = read(n_rows)
        _check_finite(table, where)
        matrix = expand_quantized(table, mapping, weights, n_tokens, where)
    else:
        matrix = read(n_tokens)
    _check_finite(matrix, where)
    meta: dict[str, Any] = {
        "file": os.path.basename(loc.name),
        "tensor": info.name,
        "dtype": info.dtype,
        "shape": list(info.shape),
        "tokenizer": described,
        "padding_rows_dropped": n_vocab_rows - n_tokens,
    }
    if mapping is not None or weights is not None:
        meta["vocabulary_quantized"] = list(extra)
    data: dict[str, Any] = {"safetensors": meta}
    settings = model2vec_settings(loc.directory, info.name)
    if settings is not None:
        data["model2vec"] = settings
    elif info.name == WORDLLAMA_TENSOR and is_wordllama_weights(os.path.basename(loc.name)):
        data[WORDLLAMA_KEY] = {"weights": os.path.basename(loc.name)}  # encode follows WordLlama's embed (keeps every token)
    return embeddings_from([], matrix, normalize, Metadata(data), vocab=vocab)


#: numpy dtypes of the 1-D tensors model2vec stores beside its table ('mapping', 'weights').
_VECTOR_DTYPES: Final = {
    "I64": "<i8",
    "I32": "<i4",
    "I16": "<i2",
    "I8": "i1",
    "U8": "u1",
    "U16": "<u2",
    "U32": "<u4",
    "U64": "<u8",
    "F64": "<f8",
    "F32": "<f4",
    "F16": "<f2",
}


def _read_vector(loc: _Located, info: TensorInfo) -> npt.NDArray[Any]:
    """A 1-D tensor of the file or buffer the table is in (model2vec's ``mapping`` or ``weights``)."""
    where = f"{_FORMAT} tensor {info.name!r}"
    if info.dtype not in _VECTOR_DTYPES or len(info.shape) != 1:
        raise FormatError(
            "not a vector of numbers", chunk=where, expected="a 1-D tensor of " + " / ".join(_VECTOR_DTYPES), found=f"{info.dtype} {list(info.shape)}"
        )
    at = loc.header.data_start + info.begin
    if isinstance(loc.file, (Path, RemoteFile)):
        raw = bytearray(info.nbytes)
        with open_regular(loc.file, chunk=_FORMAT) if isinstance(loc.file, Path) else contextlib.nullcontext(cast(IO[bytes], loc.file)) as f:
            f.seek(at)
            read_exactly(f, memoryview(raw), "the tensor data", chunk=_FORMAT, offset=at)
    elif not hasattr(loc.file, "read"):  # the whole file as a buffer
        raw = bytearray(memoryview(loc.file).cast("B")[at : at + info.nbytes])
    else:
        raise FormatError(
            "a vocabulary-quantized model2vec table cannot be read from a stream", chunk=where, expected="a file, a directory or the bytes", found="a stream"
        )
    return np.frombuffer(raw, dtype=_VECTOR_DTYPES[info.dtype])


def _detect(sample: bytes, path: str | None) -> bool:
    """A safetensors file (u64 header length of at most 100 MB, then a JSON object), a sharded index or a model directory.

    A URL ending in ``/`` (a model directory), ``.safetensors`` or ``.safetensors.index.json`` is claimed by its name
    (``sample`` empty): the loader then reads it from the URL, with the files beside it.
    """
    if path is not None and is_url(path):
        if path.endswith(("/", ".safetensors", ".safetensors.index.json")):
            return True
    elif path is not None and os.path.isdir(path):
        directory = Path(path)
        return any(directory.glob("*.safetensors")) or any(directory.glob("*.safetensors.index.json"))
    if path is not None and path.endswith(".safetensors.index.json"):
        return True
    return len(sample) >= 9 and 2 <= int.from_bytes(sample[:8], "little") <= 100_000_000 and sample[8:9] == b"{"


def _load_found(source: Any, *, normalize: bool = True, tensor: str | None = None, tokenizer: Any = None) -> Embeddings:
    """The registry's loader: a path is read with the tokenizer beside it (or ``tokenizer``); data needs ``tokenizer``."""
    if local_path(source) is None and not is_url(source) and tokenizer is None:
        raise FormatError(
            "a safetensors checkpoint given as data has no tokenizer beside it",
            offset=0,
            chunk="safetensors",
            expected="a path (the tokenizer is read from beside it), or load_safetensors(data, tokenizer=...)",
            found="safetensors data",
        )
    return load_safetensors(source, tensor=tensor, tokenizer=tokenizer, normalize=normalize)


register_format(
    "safetensors",
    description="safetensors checkpoint (file, sharded index or model directory): the input-embedding table, tokenizer from beside it",
    extensions=(".safetensors",),
    order=4,
    detector=_detect,
    loader=_load_found,
    options=("normalize", "tensor", "tokenizer"),
    mismatch="no safetensors header",
)
