"""``finalfusion convert``: between every format the library reads and writes.

The formats are those of the library's format registry
(:func:`finalfusion.compat.formats`): name, description, extensions, loader
and writer come from there, so a format registered by a ``compat`` module is
a ``convert`` input and output without an edit here. :data:`FORMATS` adds
what only the command line needs (aliases for ``--from/--to``, which
embeddings a format can hold, word-only formats).
"""

from __future__ import annotations

import argparse
import inspect
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from finalfusion.cli._common import CliError, bars, one_line, positive_int, subparser
from finalfusion.compat import _registry
from finalfusion.compat._registry import formats
from finalfusion.embeddings import Embeddings

__all__ = [
    "FORMATS",
    "Format",
    "LoadOptions",
    "WriteOptions",
    "add_input_options",
    "input_format_names",
    "load_as",
    "load_input",
    "load_with_bars",
    "output_format",
    "register",
    "write_as",
]


@dataclass(frozen=True)
class LoadOptions:
    """What the command line passes to a loader."""

    normalize: bool = True
    lossy: bool = False
    limit: int | None = None
    mmap: bool = False
    progress: Any = None


@dataclass(frozen=True)
class WriteOptions:
    """What the command line passes to a writer."""

    unnormalize: bool = True


@dataclass(frozen=True)
class Format:
    """One embedding format as the command line sees it."""

    name: str
    description: str
    extensions: tuple[str, ...]
    load: Callable[[str, LoadOptions], Embeddings] | None
    write: Callable[[str, Embeddings, WriteOptions], None] | None
    #: Other names accepted by ``--from/--to`` (finalfusion-python 0.7 and finalfusion-utils spellings).
    aliases: tuple[str, ...] = ()
    #: Whether the format can hold these embeddings; decides between formats sharing an extension.
    accepts: Callable[[Embeddings], bool] = field(default=lambda emb: True)
    #: Options of :class:`LoadOptions` the loader honours (others are refused rather than ignored).
    honours: frozenset[str] = frozenset({"normalize", "lossy", "limit"})
    #: The format stores words only (subword rows are dropped): embeddings without words are refused.
    words_only: bool = False


def _is_fasttext(emb: Embeddings) -> bool:
    from finalfusion.vocab import FastTextVocab

    return isinstance(emb.vocab, FastTextVocab)


def _is_floret(emb: Embeddings) -> bool:
    from finalfusion.vocab import FloretVocab

    return isinstance(emb.vocab, FloretVocab)


#: What the command line knows beyond the registry: other names for ``--from/--to``, output extensions, which
#: embeddings a format can hold (it decides between formats sharing an extension), and
#: formats that store words only.
_CLI_EXTRAS: dict[str, dict[str, Any]] = {
    "finalfusion": {"aliases": ("finalfusion_mmap",)},
    "fasttext": {"accepts": _is_fasttext},
    "word2vec": {"words_only": True},
    # .txt is written as text without a header (GloVe), as finalfusion-utils does; .vec keeps the dims line.
    "text-dims": {"aliases": ("textdims",), "words_only": True, "extensions": (".vec",)},
    "text": {"aliases": ("glove",), "words_only": True},
    "floret": {"accepts": _is_floret},
}


def _from_registry(fmt: _registry.Format) -> Format:
    """The command line's view of a registered format: its loader and writer with the options they take."""
    loader, writer = fmt.loader, fmt.writer

    def load(path: str, o: LoadOptions) -> Embeddings:
        assert loader is not None  # only readable formats get a load
        given = {"normalize": o.normalize, "lossy": o.lossy, "limit": o.limit, "mmap": o.mmap, "progress": o.progress}
        return loader(path, **{k: v for k, v in given.items() if k in fmt.options})

    def write(path: str, emb: Embeddings, o: WriteOptions) -> None:
        assert writer is not None  # only writable formats get a write
        takes_unnormalize = "unnormalize" in inspect.signature(writer).parameters
        writer(path, emb, **({"unnormalize": o.unnormalize} if takes_unnormalize else {}))

    extras = {"extensions": fmt.extensions, **_CLI_EXTRAS.get(fmt.name, {})}
    return Format(
        fmt.name,
        fmt.description,
        load=load if fmt.can_read else None,
        write=write if fmt.can_write else None,
        honours=fmt.options & {"normalize", "lossy", "limit", "mmap"},
        **extras,
    )


#: Every registered format (:func:`finalfusion.compat.formats`), in detection order, which is also the order
#: in which an ambiguous extension is resolved (the first that accepts the embeddings: ``.bin`` is fastText
#: for fastText vocabularies, else word2vec).
FORMATS: tuple[Format, ...] = tuple(_from_registry(f) for f in formats())
_BY_NAME: dict[str, Format] = {name: f for f in FORMATS for name in (f.name, *f.aliases)}


def input_format_names() -> list[str]:
    """Names (and aliases) accepted by ``--from``."""
    return [name for name, f in _BY_NAME.items() if f.load is not None]


def output_format_names() -> list[str]:
    """Names (and aliases) accepted by ``--to``."""
    return [name for name, f in _BY_NAME.items() if f.write is not None]


def detect(path: str) -> str:
    """The format of the file at ``path``, from its content (:func:`finalfusion.compat.sniff_format`)."""
    from finalfusion._source import open_stream as open_input
    from finalfusion._source import peek
    from finalfusion.compat import sniff_format

    with open_input(path) as f:
        sample, _ = peek(f, 1 << 16)
    return sniff_format(sample, path)


def load_as(path: str, fmt: str | None, options: LoadOptions) -> Embeddings:
    """Load ``path`` in format ``fmt`` (recognised from the content when ``None``).

    Raises
    ------
    CliError
        Naming the file, for a missing or malformed file and for options the format does not have.
    """
    from finalfusion.errors import FinalfusionError

    try:
        name = detect(path) if fmt is None else fmt
        spec = _BY_NAME[name]
        if name == "finalfusion_mmap":
            options = LoadOptions(mmap=True)
        for option, default in (("limit", None), ("mmap", False)):
            if getattr(options, option) != default and option not in spec.honours:
                raise CliError(f"{path}: --{option} does not apply to {spec.name} input")
        assert spec.load is not None  # every format in the table can be read
        return spec.load(path, options)
    except (FinalfusionError, OSError, ValueError, TypeError, MemoryError) as exc:
        raise CliError(f"{path}: {one_line(exc)}") from None


def output_format(path: str, emb: Embeddings) -> Format:
    """The format to write ``path`` in, from its extension (``.bin``: fastText for fastText vocabularies, else word2vec)."""
    ext = os.path.splitext(path)[1].lower()
    candidates = [f for f in FORMATS if ext in f.extensions and f.write is not None]
    for f in candidates:
        if f.accepts(emb):
            return f
    known = ", ".join(sorted({e for f in FORMATS for e in f.extensions}))
    raise CliError(f"{path}: cannot tell the output format from the extension {ext or '(none)'!r} (known: {known}); name it with --to")


def write_as(path: str, emb: Embeddings, fmt: str | None, options: WriteOptions) -> None:
    """Write ``emb`` to ``path`` atomically; a failure becomes a :class:`CliError` naming the file."""
    if path.lower().endswith(".gz"):
        raise CliError(f"{path}: compressed output is not supported (gzip input is read transparently); write without .gz and compress afterwards")
    spec = _BY_NAME[fmt] if fmt is not None else output_format(path, emb)
    assert spec.write is not None  # every format in the table can be written
    if spec.words_only and len(emb.vocab) == 0 and emb.storage.shape[0] > 0:
        raise CliError(f"{path}: {spec.name} stores word vectors, and these embeddings have no words (only subword rows); write finalfusion or floret")
    try:
        spec.write(path, emb, options)
    except (OSError, ValueError, TypeError, MemoryError) as exc:
        raise CliError(f"{path}: cannot write {spec.name}: {one_line(exc)}") from None


def read_metadata(path: str) -> Any:
    """The TOML file at ``path`` as :class:`~finalfusion.Metadata` (within the metadata limits of :mod:`finalfusion.limits`)."""
    from finalfusion import limits
    from finalfusion.errors import FormatError
    from finalfusion.metadata import Metadata

    try:
        with open(path, "rb") as f:
            return Metadata.from_toml(f.read(limits.MAX_METADATA_BYTES + 1), where=path)
    except OSError as exc:
        raise CliError(f"{path}: {one_line(exc)}") from None
    except FormatError as exc:
        raise CliError(f"{path}: not valid TOML: {one_line(exc)}") from None


def add_input_options(parser: argparse.ArgumentParser) -> None:
    """``--from``, ``--lossy``, ``--mmap``, ``--limit``, ``--no-normalize`` for commands that read embeddings."""
    group = parser.add_argument_group("input")
    group.add_argument(
        "-f",
        "--from",
        dest="input_format",
        metavar="FORMAT",
        choices=input_format_names(),
        help="input format (default: recognised from the content): " + ", ".join(input_format_names()),
    )
    group.add_argument("--lossy", action="store_true", help="replace invalid UTF-8 in words by U+FFFD instead of failing")
    group.add_argument("--mmap", action="store_true", help="memory-map a finalfusion input instead of reading it")
    group.add_argument("--limit", type=positive_int, metavar="N", help="read only the first N words (word2vec, text, text-dims, fastText)")
    group.add_argument("--no-normalize", dest="normalize", action="store_false", help="keep the vectors of a non-finalfusion input as stored (no norms)")


def load_input(args: argparse.Namespace, path: str, progress: Any = None) -> Embeddings:
    """Load ``path`` with the input options in ``args``; a failure becomes a :class:`CliError` naming the file."""
    options = LoadOptions(
        normalize=getattr(args, "normalize", True),
        lossy=getattr(args, "lossy", False),
        limit=getattr(args, "limit", None),
        mmap=getattr(args, "mmap", False),
        progress=progress,
    )
    return load_as(path, getattr(args, "input_format", None), options)


def load_with_bars(args: argparse.Namespace, path: str) -> Embeddings:
    """:func:`load_input` with progress bars while ``path`` is read (none in pipes, logs or with ``--quiet``)."""
    with bars(args) as progress:
        return load_input(args, path, progress)


def register(subparsers: Any) -> None:
    """Add ``convert``."""
    table = "\n".join(f"  {f.name:12s} {f.description}" + (f" (also: {', '.join(f.aliases)})" if f.aliases else "") for f in FORMATS)
    p = subparser(
        subparsers,
        "convert",
        "convert embeddings between formats",
        """
        finalfusion convert GoogleNews-vectors-negative300.bin.gz vectors.fifu
        finalfusion convert --to text-dims vectors.fifu vectors.vec""",
        "formats (input recognised from the content, output from the extension):\n" + table,
    )
    p.add_argument("input", metavar="IN", help="embeddings to read (gzip is decompressed transparently)")
    p.add_argument("output", metavar="OUT", help="file to write (atomically: replaced only when complete)")
    add_input_options(p)
    out = p.add_argument_group("output")
    out.add_argument(
        "-t", "--to", dest="output_format", metavar="FORMAT", choices=output_format_names(), help="output format (default: from the extension of OUT)"
    )
    out.add_argument(
        "--unnormalize",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="multiply the rows by their norms when writing word2vec or text (default: yes; --no-unnormalize writes the rows as stored, "
        "like finalfusion-utils without -u)",
    )
    out.add_argument("--metadata", metavar="FILE.toml", help="store this TOML as the metadata (finalfusion output only)")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Convert ``args.input`` to ``args.output``."""
    emb = load_with_bars(args, args.input)
    fmt = args.output_format
    if args.metadata is not None:
        spec = _BY_NAME[fmt] if fmt is not None else output_format(args.output, emb)
        if spec.name != "finalfusion":
            raise CliError(f"{args.output}: --metadata needs finalfusion output ({spec.name} files hold no metadata)")
        emb.metadata = read_metadata(args.metadata)
    write_as(args.output, emb, fmt, WriteOptions(unnormalize=args.unnormalize))
    return 0
