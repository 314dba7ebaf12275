"""``finalfusion info``, ``metadata`` and ``lookup``."""

from __future__ import annotations

import argparse
import json
import os
import stat
import sys
from typing import Any, cast

import numpy as np

from finalfusion.cli._common import CliError, about, naming, one_line, subparser
from finalfusion.cli._convert import add_input_options, load_with_bars
from finalfusion.embeddings import Embeddings
from finalfusion.metadata import Metadata

__all__ = ["describe", "register"]

#: Frame of every chunk: u32 id + u64 length.
_FRAME = 12


def register(subparsers: Any) -> None:
    """Add ``info``, ``metadata`` and ``lookup``."""
    i = subparser(
        subparsers,
        "info",
        "show what an embeddings file holds",
        """
        finalfusion info vectors.fifu
        finalfusion info --json vectors.fifu | jq .storage""",
    )
    i.add_argument("input", metavar="FILE", help="embeddings or model directory (finalfusion: chunk layout too; other formats are loaded)")
    i.add_argument("--json", action="store_true", help="print one JSON object")
    add_input_options(i)
    i.add_argument("--quiet", action="store_true", help="no progress bar")
    i.set_defaults(func=run_info)

    m = subparser(
        subparsers,
        "metadata",
        "print the metadata of a finalfusion file as TOML (to OUT or standard output), or replace it",
        """
        finalfusion metadata vectors.fifu
        finalfusion metadata vectors.fifu metadata.toml
        finalfusion metadata --set training.toml vectors.fifu""",
    )
    m.add_argument("input", metavar="FILE", help="finalfusion file (a URL: only its metadata chunk is fetched; never rewritten)")
    m.add_argument(
        "output",
        metavar="OUT",
        nargs="?",
        help=(
            "write the TOML to this file (default, or '-': standard output), as finalfusion-utils; "
            "never FILE itself or an existing file that is not TOML; not written (exit 1) when FILE has no metadata"
        ),
    )
    m.add_argument("--set", metavar="FILE.toml", help="replace the metadata by this TOML file (the file is rewritten atomically)")
    m.add_argument("--remove", action="store_true", help="remove the metadata chunk (rewritten atomically)")
    m.set_defaults(func=run_metadata)

    lk = subparser(
        subparsers,
        "lookup",
        "look words up (unknown words through their subwords)",
        """
        finalfusion lookup examples/sample.fifu berlin berliner
        python -m finalfusion examples/sample.fifu berlin berliner   # same: a file as first argument means lookup""",
    )
    lk.add_argument("input", metavar="FILE", help="embeddings or model directory (any format)")
    lk.add_argument("words", metavar="WORD", nargs="*", help="words to look up (none: just describe the file)")
    lk.add_argument("--full", action="store_true", help="print every component, not the first six")
    add_input_options(lk)
    lk.add_argument("--quiet", action="store_true", help="no progress bar")
    lk.set_defaults(func=run_lookup)


def _finalfusion_layout(path: str) -> dict[str, Any] | None:
    """Header version and chunk layout of a plain local finalfusion file, or ``None`` for anything else."""
    from finalfusion.io import open_buffer, read_chunks

    if os.path.isdir(path):  # a model directory: loaded like any other format
        return None
    try:
        with open(path, "rb") as f:
            if f.read(4) != b"FiFu":
                return None
    except OSError as exc:
        raise CliError(about(path, exc)) from None
    buf, _ = open_buffer(path, mmap=True)
    header, chunks = read_chunks(buf)
    return _layout(chunks, os.path.getsize(path), header.nbytes)


def _layout(chunks: list[tuple[int, Any]], size: int, header_bytes: int) -> dict[str, Any]:
    """The ``info`` layout of a file of ``size`` bytes from its ``(offset, chunk)`` list (offsets of the chunks' frames)."""
    layout = []
    for k, (offset, chunk) in enumerate(chunks):
        end = chunks[k + 1][0] if k + 1 < len(chunks) else size
        layout.append({"chunk": chunk.chunk_id.name, "offset": offset, "bytes": end - offset, "payload_bytes": end - offset - _FRAME})
    return {"version": 0, "header_bytes": header_bytes, "bytes": size, "chunks": layout}


def _remote_finalfusion(url: str) -> tuple[dict[str, Any], Embeddings] | None:
    """The layout and the embeddings of a ``.fifu`` at ``url``, its rows left at the server; ``None`` for another format.

    Read as ``load_finalfusion(url, mmap=True)`` reads it (the header, the
    vocabulary, norms and metadata, the storage's head; never its rows), so
    ``info`` of a 2 GB file fetches about its vocabulary. Another format is
    told from the first block (its magic) and loaded as before; a model
    directory's URL (ending in ``/``) is not a file.
    """
    from finalfusion._fileref import UrlRef
    from finalfusion._load import assemble
    from finalfusion.container import read_remote
    from finalfusion.errors import BadMagic

    if url.endswith("/"):
        return None
    try:
        loaded = read_remote(url)
    except BadMagic:
        return None
    emb = Embeddings(*assemble(loaded.chunks, loaded.name))  # at least a vocabulary and a storage chunk, or FormatError
    ref = cast(UrlRef, loaded.file_ref)  # read_remote's reference: the size the server told
    emb._file_ref = ref
    return _layout(loaded.chunks, ref.size, loaded.chunks[0][0]), emb  # the header ends where the first chunk's frame starts


def _finalfusion_file(args: argparse.Namespace) -> tuple[dict[str, Any], Embeddings] | None:
    """The layout and the embeddings of a finalfusion ``args.input``, its rows mapped (a URL: left at the server); ``None`` for another format."""
    from finalfusion._remote import is_url
    from finalfusion.cli.progress import bars
    from finalfusion.embeddings import load_finalfusion

    if is_url(args.input):
        with bars(args):  # a long fetch of a large vocabulary draws its bar
            return _remote_finalfusion(args.input)
    layout = _finalfusion_layout(args.input)
    return None if layout is None else (layout, load_finalfusion(args.input, mmap=True))


def describe(emb: Embeddings) -> dict[str, Any]:
    """Vocabulary, storage, norms and metadata of ``emb`` as plain data.

    Examples
    --------
    >>> import numpy as np
    >>> from finalfusion import Embeddings, NdArray, SimpleVocab
    >>> describe(Embeddings(NdArray(np.eye(2, dtype=np.float32)), SimpleVocab(["a", "b"])))["storage"]
    {'type': 'NdArray', 'rows': 2, 'dims': 2, 'dtype': 'float32'}
    """
    from finalfusion.storage import QuantizedArray

    vocab = emb.vocab
    v: dict[str, Any] = {"type": type(vocab).__name__, "words": len(vocab)}
    indexer = getattr(vocab, "subword_indexer", None)
    if indexer is not None:
        v["subword_indexer"] = repr(indexer)
        v["subword_rows"] = emb.storage.shape[0] - len(vocab)
    storage = emb.storage
    rows, dims = storage.shape
    s: dict[str, Any] = {"type": type(storage).__name__, "rows": rows, "dims": dims}
    if isinstance(storage, QuantizedArray):
        pq = storage.quantizer
        s.update(
            subquantizers=storage.quantized_len,
            centroids=int(pq.quantizers.shape[1]),
            bits=int(pq.quantizers.shape[1]).bit_length() - 1,
            projection=pq.projection is not None,
            norms=storage.norms is not None,
            bytes_per_row=storage.quantized_len,
        )
    else:
        s["dtype"] = str(np.asarray(storage.matrix[:0]).dtype) if hasattr(storage, "matrix") else "float32"
    norms = emb.norms
    metadata = emb.metadata
    return {
        "vocab": v,
        "storage": s,
        "norms": None if norms is None else len(norms),
        "metadata": None if metadata is None else dict(metadata),
    }


def _model_line(metadata: dict[str, Any] | None) -> str:
    """Which table and tokenizer of a model were read (``--tensor``, ``--tokenizer``), from the loader's metadata; else ``""``.

    Examples
    --------
    >>> md = {"tensor": "e.weight", "dtype": "F32", "shape": [96, 16], "tokenizer": "tokenizer.json (t.json)", "padding_rows_dropped": 6}
    >>> _model_line({"safetensors": md})
    'tensor e.weight (F32 [96, 16]), tokenizer.json (t.json), 6 padding rows dropped'
    >>> _model_line({"gguf": {"tensor": "token_embd.weight", "type": "Q8_0", "tokenizer": "llama"}}), _model_line(None)
    ('tensor token_embd.weight (Q8_0), llama tokenizer', '')
    >>> _model_line({"gguf": {"tensor": "t", "tokenizer": "none", "tokenizer_keys": ["tokenizer.ggml.model", "tokenizer.huggingface.json"]}})
    'tensor t, tokenizer from tokenizer.huggingface.json'
    """
    for fmt in ("safetensors", "gguf"):
        md = (metadata or {}).get(fmt)
        if isinstance(md, dict) and "tensor" in md:
            kind = " ".join(str(md[k]) for k in ("dtype", "type", "shape") if k in md)
            tokenizer = md.get("tokenizer")
            described = "" if tokenizer is None else f", {tokenizer}" + (" tokenizer" if fmt == "gguf" else "")
            if fmt == "gguf" and tokenizer == "none":  # llama.cpp's "no tokenizer"; the GGUF key tokenizer.huggingface.json may hold one
                hf = "tokenizer.huggingface.json" in (md.get("tokenizer_keys") or ())
                described = ", tokenizer from tokenizer.huggingface.json" if hf else ", no tokenizer (a token list)"
            dropped = md.get("padding_rows_dropped")
            padding = f", {dropped:,} padding rows dropped" if isinstance(dropped, int) and dropped > 0 else ""
            return f"tensor {md['tensor']}" + (f" ({kind})" if kind else "") + described + padding
    return ""


def run_info(args: argparse.Namespace) -> int:
    """Describe ``args.input``."""
    from finalfusion.errors import FinalfusionError

    # --tensor/--tokenizer/--limit go through the loader, which refuses them for finalfusion input rather than ignore them.
    loader_options = args.tensor is not None or args.tokenizer is not None or args.limit is not None
    try:
        with naming(args.input):
            found = _finalfusion_file(args) if args.input_format in (None, "finalfusion") and not loader_options else None
    except (FinalfusionError, OSError, ValueError) as exc:
        raise CliError(about(args.input, exc)) from None
    layout: dict[str, Any] | None = None
    if found is not None:
        layout, emb = found
        fmt = "finalfusion"
    else:
        from finalfusion.cli._convert import detect

        emb = load_with_bars(args, args.input)
        try:
            fmt = args.input_format or detect(args.input)
        except (FinalfusionError, OSError) as exc:  # pragma: no cover - it was just loaded
            raise CliError(about(args.input, exc)) from None
    info = {"file": args.input, "format": fmt, **(layout or {}), **describe(emb)}
    if args.json:
        print(json.dumps(info, ensure_ascii=False, default=str))
        return 0
    out = [f"file:       {args.input}", f"format:     {fmt}" + (f" (version {info['version']}, {info['bytes']:,} bytes)" if layout else "")]
    if layout:
        out.append("chunks:")
        out.append(f"  {'chunk':24s} {'offset':>14s} {'bytes':>14s}")
        out.extend(f"  {c['chunk']:24s} {c['offset']:14,d} {c['bytes']:14,d}" for c in layout["chunks"])
    v, s = info["vocab"], info["storage"]
    out.append(
        f"vocabulary: {v['type']}, {v['words']:,} words" + (f", {v['subword_rows']:,} subword rows, {v['subword_indexer']}" if "subword_indexer" in v else "")
    )
    if s["type"] == "QuantizedArray":
        out.append(
            f"storage:    QuantizedArray, {s['rows']:,} x {s['dims']}, {s['subquantizers']} subquantizers x {s['centroids']} centroids "
            f"({s['bits']} bits), projection: {'yes' if s['projection'] else 'no'}, in-chunk norms: {'yes' if s['norms'] else 'no'}"
        )
    else:
        out.append(f"storage:    {s['type']}, {s['rows']:,} x {s['dims']} {s['dtype']}")
    model = _model_line(info["metadata"])
    if model:
        out.append(f"model:      {model}")
    out.append(f"norms:      {'no' if info['norms'] is None else format(info['norms'], ',d')}")
    md = info["metadata"]
    out.append("metadata:   " + ("no" if md is None else f"{len(md)} keys ({', '.join(list(md)[:8])}{', ...' if len(md) > 8 else ''})"))
    print("\n".join(out))
    return 0


def _load_finalfusion(path: str) -> Embeddings:
    from finalfusion.errors import FinalfusionError

    if os.path.isdir(path):
        raise CliError(f"{path}: a directory (a model directory?), not a finalfusion file: only finalfusion files hold metadata; convert it first")
    try:
        with open(path, "rb") as f:
            if f.read(4) != b"FiFu":
                raise CliError(f"{path}: not a finalfusion file (only finalfusion files hold metadata); convert it first")
        from finalfusion.embeddings import load_finalfusion

        with naming(path):
            return load_finalfusion(path, mmap=True)
    except (FinalfusionError, OSError) as exc:
        raise CliError(about(path, exc)) from None


def _metadata_at_url(url: str) -> Metadata | None:
    """The metadata of the finalfusion file at ``url``, or ``None``: the header, the chunks' frames and the metadata chunk are
    fetched by range requests, nothing else (:func:`finalfusion.metadata.load_metadata`)."""
    from finalfusion.errors import BadMagic, FinalfusionError, FormatError
    from finalfusion.metadata import load_metadata

    try:
        with naming(url):
            return load_metadata(url)
    except BadMagic:
        raise CliError(f"{url}: not a finalfusion file (only finalfusion files hold metadata); convert it first") from None
    except FormatError as exc:
        if exc.chunk == "file" and exc.expected == "a Metadata chunk":  # a valid file without metadata
            return None
        raise CliError(about(url, exc)) from None
    except (FinalfusionError, OSError) as exc:
        raise CliError(about(url, exc)) from None


def _check_toml_output(path: str, source: str) -> None:
    """Refuse an OUT that is FILE itself, or an existing file that is not TOML (embeddings, say): OUT only ever holds metadata."""
    from finalfusion import limits
    from finalfusion._output import refuse_own_input
    from finalfusion._remote import is_url
    from finalfusion.errors import FormatError

    if is_url(path):
        raise CliError(f"{path}: a URL is read, never written (write a local file and upload it)")
    try:
        refuse_own_input(path, [source])
        st = os.stat(path)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise CliError(about(path, exc)) from None
    if not stat.S_ISREG(st.st_mode):
        return  # a pipe or device (standard output): streamed into, nothing replaced
    refusal = f"{path}: exists and is not a TOML file: not replaced by the metadata (remove it first, or name another file)"
    if st.st_size > limits.MAX_METADATA_BYTES:
        raise CliError(refusal)
    try:
        with open(path, "rb") as f:
            Metadata.from_toml(f.read(limits.MAX_METADATA_BYTES + 1), where=path)
    except FormatError:
        raise CliError(refusal) from None
    except OSError as exc:
        raise CliError(about(path, exc)) from None


def _write_text(path: str, text: str) -> None:
    from finalfusion._atomic import atomic_output

    try:
        with atomic_output(path) as f:
            f.write(text.encode("utf-8"))
    except OSError as exc:  # the error may name the temporary file: it is ours, not the user's; name the target only
        raise CliError(f"{path}: cannot write: {exc.strerror or one_line(exc)}") from None


def run_metadata(args: argparse.Namespace) -> int:
    """Print or replace the metadata of ``args.input``."""
    from finalfusion._remote import is_url
    from finalfusion.cli._convert import WriteOptions, read_metadata, write_as

    if args.set is not None and args.remove:
        raise CliError("--set and --remove exclude each other")
    if args.output is not None and (args.set is not None or args.remove):
        raise CliError(f"OUT ({args.output}) is where the metadata is printed; --set and --remove rewrite FILE itself")
    rewrite = args.set is not None or args.remove
    if rewrite and is_url(args.input):
        raise CliError(f"{args.input}: a URL is read, never written (--set and --remove rewrite FILE itself: change a local copy and upload it)")
    to_file = not rewrite and args.output not in (None, "-")
    if to_file:
        _check_toml_output(args.output, args.input)
    if not rewrite:
        # finalfusion-utils src/metadata.rs lines 45-60: the TOML (nothing without metadata) to stdout.
        metadata = _metadata_at_url(args.input) if is_url(args.input) else _load_finalfusion(args.input).metadata
        if metadata is None:
            print(f"finalfusion metadata: {args.input} has no metadata" + (f"; {args.output} not written" if to_file else ""), file=sys.stderr)
            return 1 if to_file else 0
        text = metadata.to_toml()
        if to_file:
            _write_text(args.output, text)
        else:
            sys.stdout.write(text)
        return 0
    emb = _load_finalfusion(args.input)
    emb.metadata = None if args.remove else read_metadata(args.set)
    write_as(args.input, emb, "finalfusion", WriteOptions(), inputs=[args.set])  # FILE itself, deliberately
    return 0


def _looked_up_as(vocab: Any, word: str) -> str:
    """How the word rule (``Vocab.word_rows``) looked ``word`` up: ``known``, ``the token '▁x'``, ``from 3 tokens``, ``unknown, from subwords``."""
    rows = vocab.word_rows(word)
    if isinstance(rows, int):
        return "known" if vocab.words[rows] == word else f"the token {vocab.words[rows]!r}"
    return f"from {len(rows)} tokens" if vocab.pooling == "mean" else "unknown, from subwords"


def run_lookup(args: argparse.Namespace) -> int:
    """Describe the file and look up ``args.words``."""
    emb = load_with_bars(args, args.input)
    print(emb)
    if emb.metadata is not None:
        print("metadata:", dict(emb.metadata))
    with np.printoptions(precision=4, suppress=True, threshold=sys.maxsize if args.full else 1000):
        for word in args.words:
            found = emb.embedding_with_norm(word)
            if found is None:
                print(f"{word!r}: no embedding")
                continue
            vec, norm = found
            kind = _looked_up_as(emb.vocab, word)
            shown = vec if args.full else vec[:6]
            print(f"{word!r} ({kind}, norm {norm:.4f}): {shown}{' ...' if len(vec) > len(shown) else ''}")
    return 0
