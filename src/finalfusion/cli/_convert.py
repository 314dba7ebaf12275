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
import contextlib
import inspect
import io
import os
import stat
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import IO, Any

from finalfusion.cli._common import CliError, UsageError, about, bars, naming, one_line, positive_int, subparser
from finalfusion.compat import _registry
from finalfusion.compat._registry import formats
from finalfusion.embeddings import Embeddings

__all__ = [
    "FORMATS",
    "Format",
    "LoadOptions",
    "WriteOptions",
    "add_input_options",
    "check_output",
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
    #: ``--tensor``: the model's table (GGUF, safetensors); ``None``: the format's default.
    tensor: str | None = None
    #: ``--tokenizer``: the model's vocabulary file or directory (safetensors); ``None``: the one beside the weights.
    tokenizer: str | None = None


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
    #: Options of :class:`LoadOptions` the loader honours (others are refused rather than ignored).
    honours: frozenset[str] = frozenset({"normalize", "lossy", "limit"})
    #: The format stores words only (subword rows are dropped): embeddings without words are refused.
    words_only: bool = False


#: What the command line knows beyond the registry: other names for ``--from/--to``, output extensions and
#: formats that store words only.
_CLI_EXTRAS: dict[str, dict[str, Any]] = {
    "finalfusion": {"aliases": ("finalfusion_mmap",)},
    "word2vec": {"words_only": True},
    # .txt is written as text without a header (GloVe), as finalfusion-utils does; .vec keeps the dims line.
    "text-dims": {"aliases": ("textdims",), "words_only": True, "extensions": (".vec",)},
    "text": {"aliases": ("glove",), "words_only": True},
}


def _from_registry(fmt: _registry.Format) -> Format:
    """The command line's view of a registered format: its loader and writer with the options they take."""
    loader, writer = fmt.loader, fmt.writer

    def load(path: str, o: LoadOptions) -> Embeddings:
        assert loader is not None  # only readable formats get a load
        given = {"normalize": o.normalize, "lossy": o.lossy, "limit": o.limit, "mmap": o.mmap, "progress": o.progress}
        # --tensor and --tokenizer only when given (load_gguf's tensor has a default of its own); load_as refused them where not taken.
        given.update({k: v for k, v in (("tensor", o.tensor), ("tokenizer", o.tokenizer)) if v is not None})
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
        honours=fmt.options & {"normalize", "lossy", "limit", "mmap", *MODEL_OPTIONS},
        **extras,
    )


#: The :class:`LoadOptions` that name a part of a model: given for a format without them, a usage error (status 2).
MODEL_OPTIONS: tuple[str, ...] = ("tensor", "tokenizer")


#: Every registered format (:func:`finalfusion.compat.formats`), in detection order. An output extension two
#: writable formats share (``.bin``: fastText and word2vec) is not resolved: :func:`output_format` asks for ``--to``.
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
    with _opened_input(path) as (_, sample):
        return _sniff(path, sample)


def _is_stream(path: str) -> bool:
    """Whether ``path`` names a pipe, FIFO or device: bytes read from it to recognise the format are gone."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False  # opening it names the problem
    return not (stat.S_ISREG(mode) or stat.S_ISDIR(mode))


@contextlib.contextmanager
def _opened_input(path: str) -> Iterator[tuple[Any, bytes]]:
    """``(source, sample)``: what to give the loader and the first 64 KiB of the (decompressed) content.

    A regular file or directory is read twice (sampled here, then loaded by path, memory-mapped or
    not). A pipe, FIFO or device (``<(zcat x.gz)``, ``/dev/stdin``) cannot be: it is opened once and
    the loader reads the same stream, the sampled bytes delivered again (issue 24).
    """
    from finalfusion._remote import is_url
    from finalfusion._source import open_stream, peek
    from finalfusion.compat.sniff import claimed_by_name

    if os.path.isdir(path) or (is_url(path) and claimed_by_name(path) is not None):  # a model at a URL: read by its loader, not sampled
        yield path, b""
        return
    with open_stream(path) as f:
        if not _is_stream(path):
            yield path, peek(f, 1 << 16)[0]
            return
        # A gzip reader over a pipe claims to seek (by reading again from the start): it cannot here.
        sample, rest = peek(io.BufferedReader(_Unseekable(f)), 1 << 16)
        yield rest, sample


class _Unseekable(io.RawIOBase):
    """``f`` read forward only, so that :func:`~finalfusion._source.peek` keeps the bytes it reads."""

    def __init__(self, f: IO[bytes]) -> None:
        super().__init__()
        self._f = f

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        data = self._f.read(len(b))
        b[: len(data)] = data
        return len(data)


def _sniff(path: str, sample: bytes) -> str:
    """The format recognised from ``sample``; when none is, a :class:`CliError` listing each format and why not."""
    from finalfusion._remote import is_url
    from finalfusion.compat import sniff_format
    from finalfusion.compat.sniff import claimed_by_name, directory_format
    from finalfusion.errors import FormatError

    if os.path.isdir(path):  # formats stored as a directory (a safetensors model directory) look at the path
        try:
            return directory_format(path).name
        except FormatError as exc:
            raise CliError(one_line(exc)) from None
    claimed = claimed_by_name(path) if is_url(path) else None
    if claimed is not None:  # a model directory (URL/), index or weights file at a URL
        return claimed.name
    try:
        return sniff_format(sample, path)
    except FormatError as exc:
        readable = [f for f in formats() if f.can_read]
        hints = [f.near_miss(sample) for f in readable if f.near_miss is not None and sample]
        hint = next((h for h in hints if h is not None), None)
        if not sample or hint is not None:
            raise CliError(f"{path}: {one_line(_short(exc))}") from None
        lines = [f"{path}: cannot tell the format from the content; name it with -f FORMAT. It is:"]
        lines += [f"  not {f.name:12s} {f.mismatch}" for f in readable]
        lines.append(f"  (it starts with {sample[:16]!r})")
        raise CliError("\n".join(lines)) from None


#: Most raw bytes of the input shown as an error's ``found``: a wrong ``-f`` must not print a screenful of them.
_FOUND_SHOWN = 12


def _short(exc: BaseException) -> BaseException:
    """``exc``, with a long ``found`` of raw bytes read from the input cut to :data:`_FOUND_SHOWN` bytes.

    Text is never cut: a ``found`` that is a string is the reader's own words
    ("a declared length of 21778 bytes"), and the number at its end is what
    the message is about.

    Examples
    --------
    >>> from finalfusion.errors import FormatError
    >>> str(_short(FormatError("bad", expected="2 integers", found=b"x" * 20)))
    "bad: expected 2 integers, found b'xxxxxxxxxxxx...'"
    >>> str(_short(FormatError("too long", expected="at most 2162 bytes", found="a declared length of 21778 bytes")))
    'too long: expected at most 2162 bytes, found a declared length of 21778 bytes'
    """
    from finalfusion.errors import FormatError

    found = getattr(exc, "found", None)
    if not isinstance(exc, FormatError) or not isinstance(found, bytes) or len(found) <= _FOUND_SHOWN:
        return exc
    return FormatError(exc.message, offset=exc.offset, chunk=exc.chunk, expected=exc.expected, found=found[:_FOUND_SHOWN] + b"...")


def _reason(exc: BaseException, path: str) -> str:
    """The one-line reason of a failure with ``path``, without naming ``path`` a second time."""
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return one_line(_short(exc))


def _use_from(actual: str) -> str:
    """The ``finalfusion`` command's advice for input in format ``actual`` read with the wrong ``-f``."""
    return f"use -f {actual}, or leave -f out"


def load_as(path: str, fmt: str | None, options: LoadOptions, *, advice: Callable[[str], str] = _use_from) -> Embeddings:
    """Load ``path`` in format ``fmt`` (recognised from the content when ``None``).

    A pipe or FIFO is read once (the format is recognised from its first bytes, which the loader
    reads again); ``--mmap`` needs a regular file. When ``fmt`` fails on content recognised as
    another format, the error names that format and ``advice(name)`` says what to do (0.7's
    scripts, whose ``-f`` has a fixed default, cannot "leave -f out").

    Raises
    ------
    CliError
        Naming the file once, for a missing or malformed file and for options the format does not have;
        when ``fmt`` is given and the content is another format, naming that one.
    """
    from finalfusion.errors import FinalfusionError

    try:
        with _opened_input(path) as (source, sample):
            name = _sniff(path, sample) if fmt is None else fmt
            spec = _BY_NAME[name]
            if name == "finalfusion_mmap":
                options = LoadOptions(mmap=True, tensor=options.tensor, tokenizer=options.tokenizer)
            for option, default in (("limit", None), ("mmap", False)):
                if getattr(options, option) != default and option not in spec.honours:
                    raise CliError(f"{path}: --{option} does not apply to {spec.name} input")
            _check_model_options(path, spec, options)
            if "tokenizer" in spec.honours and options.tokenizer is None and not isinstance(source, str):
                raise CliError(f"{path}: a {spec.name} model read from a pipe or device has no tokenizer beside it: name one with --tokenizer PATH")
            if options.mmap and not isinstance(source, str):
                raise CliError(f"{path}: --mmap needs a regular file, and this is a pipe or device (leave --mmap out to read it)")
            assert spec.load is not None  # every format in the table can be read
            try:
                with naming(path):
                    return spec.load(source, options)
            except FinalfusionError as exc:
                if fmt is not None and sample:
                    _name_the_right_format(path, fmt, sample, exc, advice)
                _blame_model_options(path, options, exc)
                raise
            except (OSError, ValueError, TypeError) as exc:
                _blame_model_options(path, options, exc)
                raise
    except (FinalfusionError, OSError, ValueError, TypeError, MemoryError) as exc:
        raise CliError(f"{path}: {_reason(exc, path)}") from None


def _check_model_options(path: str, spec: Format, options: LoadOptions) -> None:
    """Refuse ``--tensor``/``--tokenizer`` for a format that has no such part (a usage error: status 2)."""
    for option in MODEL_OPTIONS:
        if getattr(options, option) is not None and option not in spec.honours:
            takers = " and ".join(f.name for f in FORMATS if option in f.honours)
            hint = ""
            if option == "tokenizer" and spec.words_only:  # BPEmb: piece vectors in a word2vec/text file beside a SentencePiece .model
                hint = "; vectors keyed by the pieces of a SentencePiece model (BPEmb) are read with finalfusion.load_sentencepiece(model, vectors)"
            raise UsageError(f"{path}: --{option} does not apply to {spec.name} input (only to {takers} models){hint}")


def _names(found: object) -> str:
    """The tensor names a :class:`~finalfusion.errors.FormatError` found (a list or a ready string), for a message."""
    return ", ".join(map(str, found)) if isinstance(found, (list, tuple)) else str(found)


def _blame_model_options(path: str, options: LoadOptions, exc: BaseException) -> None:
    """Raise a :class:`UsageError` (status 2, one line) when a load failed because of ``--tensor`` or ``--tokenizer``.

    * ``--tensor`` naming no tensor of the file: the message names the file's tensors;
    * no ``--tensor``, and no table under the format's default name(s): the message names the
      file's tensors, the candidates to choose from with ``--tensor``;
    * ``--tokenizer`` that is not a tokenizer (read on its own), or one with more tokens than the
      table has rows (another model's tokenizer).

    Any other failure is the input's (status 1): this returns and the caller re-raises.
    """
    from finalfusion.compat._model_vocab import TokenizerNotFound, model_vocab
    from finalfusion.errors import FormatError

    if isinstance(exc, TokenizerNotFound) and options.tokenizer is None:  # not one beside the weights; the message's advice is Python's
        raise CliError(f"{path}: {exc.what}: name the tokenizer with --tokenizer PATH") from None
    if isinstance(exc, FormatError) and exc.message.startswith(("no tensor ", "no input-embedding table found")):
        if options.tensor is not None and exc.expected == options.tensor:
            raise UsageError(f"{path}: --tensor {options.tensor}: the model has no such tensor; it has: {_names(exc.found)}") from None
        if options.tensor is None:
            if exc.found in ("no tensors", []):
                raise CliError(f"{path}: the model holds no tensors") from None
            default = f"under the name {exc.expected}" if exc.message.startswith("no tensor ") else "under any name of a known model"
            raise UsageError(f"{path}: no embedding table {default}: name it with --tensor, one of: {_names(exc.found)}") from None
    if options.tokenizer is None:
        return
    try:  # the tokenizer alone: only when the load failed, so a good one is read once
        _, n_tokens, _ = model_vocab(options.tokenizer, None, sys.maxsize, "tokenizer")
    except Exception as bad:
        reason = bad.what if isinstance(bad, TokenizerNotFound) else _reason(bad, options.tokenizer)
        raise UsageError(f"{path}: --tokenizer {options.tokenizer}: not a tokenizer this library reads: {reason}") from None
    if isinstance(exc, FormatError) and exc.message.startswith("the table has fewer rows than the vocabulary has tokens"):
        raise UsageError(
            f"{path}: --tokenizer {options.tokenizer} has {n_tokens:,} tokens and the table {exc.found}: it is another model's tokenizer"
        ) from None


def _name_the_right_format(path: str, fmt: str, sample: bytes, exc: BaseException, advice: Callable[[str], str]) -> None:
    """Raise a :class:`CliError` when ``-f fmt`` failed on content recognised as another format."""
    from finalfusion.compat import sniff_format
    from finalfusion.errors import FormatError

    try:
        actual = sniff_format(sample, path)
    except FormatError:
        return
    if actual != _BY_NAME[fmt].name:
        raise CliError(f"{path}: not {fmt} ({_reason(exc, path)}); the content looks like {actual}: {advice(actual)}")


def output_format(path: str, emb: Embeddings | None = None, default: str | None = None) -> Format:
    """The format to write ``path`` in, from its extension (``emb`` is not looked at; kept for callers).

    ``.bin`` is refused: it is both word2vec binary and fastText, and guessing wrong gives a file
    the other tool cannot read (name one with ``--to``). An extension of a read-only format is
    refused with that reason. An unknown extension is ``default`` if given, else refused.

    Examples
    --------
    >>> output_format("vectors.vec").name
    'text-dims'
    >>> output_format("vectors.bin")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    finalfusion.cli._common.CliError: vectors.bin: .bin is the extension of both fasttext and word2vec, ...: name the format with -t fasttext or -t word2vec
    """
    ext = os.path.splitext(path)[1].lower()
    owners = [f for f in FORMATS if ext in f.extensions]
    writable = [f for f in owners if f.write is not None]
    if len(writable) > 1:
        names = " and ".join(f.name for f in writable)
        choices = " or ".join(f"-t {f.name}" for f in writable)
        raise CliError(f"{path}: {ext} is the extension of both {names}, which cannot read each other's files: name the format with {choices}")
    if writable:
        return writable[0]
    if owners:
        raise CliError(f"{path}: {owners[0].name} ({ext}) is a format this library reads but cannot write; write one of: {_writable_list()}")
    if default is not None:
        return _BY_NAME[default]
    raise CliError(f"{path}: cannot tell the output format from the extension {ext or '(none)'!r}; name it with -t FORMAT, one of: {_writable_list()}")


def _writable_list() -> str:
    return ", ".join(f"{f.name} ({' '.join(f.extensions)})" if f.extensions else f.name for f in FORMATS if f.write is not None)


def check_output(path: str, inputs: Sequence[str | None]) -> None:
    """Refuse a URL, a compressed output, one whose directory does not exist, or one of the command's ``inputs``, before any work is done.

    ``inputs`` are the files (and directories) the command reads: an OUT
    that is one of them (the same file, whatever the spelling or link) or
    lies inside an input directory is refused by the library's output rule
    (:func:`finalfusion._output.refuse_own_input`).
    """
    from finalfusion._output import refuse_own_input
    from finalfusion._remote import is_url

    if is_url(path):
        raise CliError(f"{path}: a URL is read, never written (write a local file and upload it)")
    if path.lower().endswith(".gz"):
        raise CliError(f"{path}: compressed output is not supported (gzip input is read transparently); write without .gz and compress afterwards")
    directory = os.path.dirname(path) or "."
    if not os.path.isdir(directory):
        raise CliError(f"{path}: cannot write: the directory {directory!r} does not exist")
    try:
        refuse_own_input(path, inputs)
    except OSError as exc:
        raise CliError(about(path, exc)) from None


def inputs_of(args: argparse.Namespace, *more: str | None) -> list[str | None]:
    """The paths a command reads, for :func:`check_output`: its input, its ``--tokenizer`` (commands with the input options) and ``more``."""
    return [args.input, getattr(args, "tokenizer", None), *more]


def write_as(path: str, emb: Embeddings, fmt: str | None, options: WriteOptions, *, inputs: Sequence[str | None]) -> None:
    """Write ``emb`` to ``path`` atomically unless it is one of ``inputs`` (:func:`check_output`); a failure becomes a :class:`CliError` naming the file."""
    check_output(path, inputs)
    spec = _BY_NAME[fmt] if fmt is not None else output_format(path, emb)
    assert spec.write is not None  # every format in the table can be written
    if spec.words_only and len(emb.vocab) == 0 and emb.storage.shape[0] > 0:
        raise CliError(f"{path}: {spec.name} stores word vectors, and these embeddings have no words (only subword rows); write finalfusion or floret")
    try:
        spec.write(path, emb, options)
    except (OSError, ValueError, TypeError, MemoryError) as exc:
        # The temporary file's name is ours, not the user's: name the target only.
        raise CliError(f"{path}: cannot write {spec.name}: {_reason(exc, path)}") from None


def read_metadata(path: str) -> Any:
    """The TOML file at ``path`` as :class:`~finalfusion.Metadata` (within the metadata limits of :mod:`finalfusion.limits`)."""
    from finalfusion import limits
    from finalfusion.errors import FormatError
    from finalfusion.metadata import Metadata

    try:
        with open(path, "rb") as f:
            return Metadata.from_toml(f.read(limits.MAX_METADATA_BYTES + 1), where=path)
    except OSError as exc:
        raise CliError(f"{path}: {_reason(exc, path)}") from None
    except FormatError as exc:  # names the file already (where=path)
        raise CliError(one_line(exc)) from None


def add_input_options(parser: argparse.ArgumentParser, *, from_aliases: tuple[str, ...] = ()) -> None:
    """``--from``, ``--lossy``, ``--mmap``, ``--limit``, ``--no-normalize``, ``--tensor``, ``--tokenizer`` for commands that read embeddings.

    ``from_aliases``: more spellings of ``-f/--from`` (finalfusion-utils' ``bucket-to-explicit --format``).
    """
    group = parser.add_argument_group("input")
    group.add_argument(
        "-f",
        "--from",
        *from_aliases,
        dest="input_format",
        metavar="FORMAT",
        choices=input_format_names(),
        help="input format (default: recognised from the content): " + ", ".join(input_format_names()),
    )
    group.add_argument("--lossy", action="store_true", help="replace invalid UTF-8 in words by U+FFFD instead of failing")
    group.add_argument("--mmap", action="store_true", help="memory-map a finalfusion input instead of reading it (a URL: leave its rows at the server)")
    group.add_argument("--limit", type=positive_int, metavar="N", help="read only the first N words (word2vec, text, text-dims, fastText)")
    group.add_argument("--no-normalize", dest="normalize", action="store_false", help="keep the vectors of a non-finalfusion input as stored (no norms)")
    group.add_argument(
        "--tensor",
        type=_tensor_name,
        metavar="NAME",
        help="the model's embedding table (GGUF, safetensors; default: token_embd.weight in GGUF, the first known name in safetensors)",
    )
    group.add_argument(
        "--tokenizer",
        type=_tokenizer_path,
        metavar="PATH",
        help="the model's tokenizer: a tokenizer.json, a SentencePiece .model or a directory holding one "
        "(safetensors models; default: the one beside the weights)",
    )


def _tensor_name(text: str) -> str:
    """argparse type of ``--tensor``: a non-empty name."""
    if not text.strip():
        raise argparse.ArgumentTypeError("expected a tensor name, got an empty one")
    return text


def _tokenizer_path(text: str) -> str:
    """argparse type of ``--tokenizer``: an existing file or directory (its content is read with the model), or a URL."""
    from finalfusion._remote import is_url

    if not is_url(text) and not os.path.exists(text):
        directory = os.path.dirname(text)
        where = f" (the directory {directory} does not exist)" if directory and not os.path.isdir(directory) else ""
        raise argparse.ArgumentTypeError(f"{text}: no such file or directory{where}")
    return text


def load_input(args: argparse.Namespace, path: str, progress: Any = None) -> Embeddings:
    """Load ``path`` with the input options in ``args``; a failure becomes a :class:`CliError` naming the file."""
    options = LoadOptions(
        normalize=getattr(args, "normalize", True),
        lossy=getattr(args, "lossy", False),
        limit=getattr(args, "limit", None),
        mmap=getattr(args, "mmap", False),
        progress=progress,
        tensor=getattr(args, "tensor", None),
        tokenizer=getattr(args, "tokenizer", None),
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
        "-u",
        "--unnormalize",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="multiply the rows by their norms when writing word2vec or text (default: yes, so -u, finalfusion-utils' option, changes "
        "nothing; --no-unnormalize writes the unit rows, like finalfusion-utils without -u)",
    )
    out.add_argument("-m", "--metadata", metavar="FILE.toml", help="store this TOML as the metadata, replacing the input's (finalfusion output only)")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Convert ``args.input`` to ``args.output``.

    The output format, its directory and the metadata file are checked before the input is read: a
    mistake there costs no loading time.
    """
    fmt = args.output_format
    inputs = inputs_of(args, args.metadata)
    check_output(args.output, inputs)
    spec = _BY_NAME[fmt] if fmt is not None else output_format(args.output)
    metadata = None
    if args.metadata is not None:
        if spec.name != "finalfusion":
            raise CliError(f"{args.output}: --metadata needs finalfusion output ({spec.name} files hold no metadata)")
        metadata = read_metadata(args.metadata)
    emb = load_with_bars(args, args.input)
    if metadata is not None:
        emb.metadata = metadata
    write_as(args.output, emb, spec.name, WriteOptions(unnormalize=args.unnormalize), inputs=inputs)
    return 0
