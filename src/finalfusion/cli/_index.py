"""``finalfusion index build``: an approximate-neighbour index of embeddings (:mod:`finalfusion.ann`)."""

from __future__ import annotations

import argparse
import os
from typing import Any

from finalfusion.cli._common import CliError, about, bars, one_line, subparser
from finalfusion.cli._convert import add_input_options, inputs_of, load_input

__all__ = ["register"]


def _param(text: str) -> tuple[str, Any]:
    """``NAME=VALUE``; VALUE read as a whole number where it is one (every backend parameter is)."""
    name, sep, value = text.partition("=")
    if not sep or not name.strip():
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE, got {text!r}")
    value = value.strip()
    try:
        return name.strip(), int(value)
    except ValueError:
        return name.strip(), value


def _params_help(default: str) -> str:
    """One line per set of backends with the same parameters, read from the backends' own tables: ``name (default)``."""
    from finalfusion.ann._backends import backend_class, backend_names

    def shown(value: Any) -> str:
        return f" ({int(value) if isinstance(value, bool) else value})" if value is not None else ""

    lines: dict[str, list[str]] = {}
    for name in backend_names():
        text = ", ".join(f"{k}{shown(p.default)}" for k, p in backend_class(name).params.items())
        lines.setdefault(text, []).append(f"{name} (default)" if name == default else name)
    return "\n".join(f"  {', '.join(names)}: {text}" for text, names in lines.items())


def _check_output(path: str, sources: list[str | None]) -> None:
    """Refuse an OUT that cannot be written before any work is done: a URL, a missing directory, the input, or a path the output rule refuses."""
    from finalfusion._output import check_directory_target, refuse_own_input
    from finalfusion._remote import is_url
    from finalfusion.ann._persist import KIND

    if is_url(path):
        raise CliError(f"{path}: a URL is read, never written (write a local directory and upload it)")
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        raise CliError(f"{path}: cannot write: the directory {parent!r} does not exist")
    try:
        refuse_own_input(path, sources)
        check_directory_target(os.path.abspath(path), KIND)
    except OSError as exc:
        raise CliError(about(path, exc)) from None


def register(subparsers: Any) -> None:
    """Add ``index`` (with ``index build``)."""
    from finalfusion.ann import DEFAULT_BACKEND, backend_names

    p = subparser(
        subparsers,
        "index",
        "build approximate-nearest-neighbour indexes",
        """
        finalfusion index build vectors.fifu vectors.ann
        finalfusion similar --index vectors.ann vectors.fifu berlin""",
    )
    sub = p.add_subparsers(dest="index_command", metavar="ACTION", required=True)
    b = subparser(
        sub,
        "build",
        "build an approximate-nearest-neighbour index of the known words",
        """
        finalfusion index build --backend hnswlib --param M=32 --param ef=128 vectors.fifu vectors.ann""",
        "parameters (--param NAME=VALUE, see docs/ann.md; a default left out is worked out from the rows):\n" + _params_help(DEFAULT_BACKEND),
    )
    b.add_argument("input", metavar="EMB", help="embeddings (any format)")
    b.add_argument("output", metavar="OUT", help="index directory to write (atomically replaced)")
    b.add_argument("--backend", choices=backend_names(), default=DEFAULT_BACKEND, help=f"index library (default: {DEFAULT_BACKEND})")
    b.add_argument("--param", type=_param, action="append", default=[], metavar="NAME=VALUE", help="a backend parameter (repeatable)")
    add_input_options(b)
    b.add_argument("--quiet", action="store_true", help="no progress bars")
    b.set_defaults(func=run_build)


def run_build(args: argparse.Namespace) -> int:
    """Build the index of ``args.input`` with ``args.backend`` and save it to ``args.output``."""
    from finalfusion.ann import build_index

    params = dict(args.param)
    _check_output(args.output, inputs_of(args))
    with bars(args) as progress:
        emb = load_input(args, args.input, progress)
        try:
            ix = build_index(emb, args.backend, progress=progress, **params)
        except (ValueError, TypeError) as exc:
            raise CliError(f"{args.input}: cannot build the index: {one_line(exc)}") from None
    try:
        ix.save(args.output)
    except OSError as exc:
        raise CliError(f"{args.output}: cannot write the index: {exc.strerror or one_line(exc)}") from None
    return 0
