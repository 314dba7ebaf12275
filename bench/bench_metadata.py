"""Cost of hostile TOML metadata: the parser's time and memory per byte and per item, and what the limits leave of it.

For each document shape the TOML parser handles item by item (arrays of
inline tables, many keys, many tables, escapes ...) a document of ``--size``
bytes is parsed by the bare parser (``tomllib``/``tomli``, what
``Metadata.from_toml`` used to hand every document of up to
``MAX_METADATA_BYTES`` to) and by ``Metadata.from_toml`` with the default
limits of :mod:`finalfusion.limits`, side by side in one process. It prints
the median and range of ``--reps`` runs, nanoseconds per byte, microseconds
per item (as counted for ``MAX_METADATA_ITEMS``), the parser's peak traced
memory per input byte, and the ratio bare/bounded. No files are written.

Run::

    .venv/bin/python bench/bench_metadata.py            # 1 MB documents, 5 runs each (a few minutes)
    .venv/bin/python bench/bench_metadata.py --size 100000 --reps 3 --shapes many-keys string-plain
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
import tracemalloc
from collections.abc import Callable

from finalfusion import FormatError, limits
from finalfusion.metadata import _SCAN, Metadata

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


def repeat(prefix: bytes, unit: bytes, suffix: bytes, size: int, sep: bytes = b"") -> bytes:
    """``prefix``, ``unit`` repeated (joined by ``sep``) to about ``size`` bytes, ``suffix``."""
    count = max(1, (size - len(prefix) - len(suffix)) // (len(unit) + len(sep)))
    return prefix + sep.join([unit] * count) + suffix


def numbered(fmt: str, size: int) -> bytes:
    """``fmt`` formatted with ``i = 0, 1, ...`` until about ``size`` bytes."""
    out, n, i = [], 0, 0
    while n < size:
        part = fmt.format(i=i)
        out.append(part)
        n += len(part)
        i += 1
    return "".join(out).encode()


#: Shapes of documents: a function of the target size in bytes.
SHAPES: dict[str, Callable[[int], bytes]] = {
    "array-of-inline-dotted": lambda n: repeat(b"x = [", b"[1.5, {a.b = 2}]", b"]", n, b", "),  # the fuzz campaign's finding
    "array-of-ints": lambda n: repeat(b"x = [", b"1", b"]", n, b","),
    "array-of-floats": lambda n: repeat(b"x = [", b"1.5", b"]", n, b","),
    "array-of-dates": lambda n: repeat(b"x = [", b"1979-05-27T07:32:00Z", b"]", n, b","),
    "array-of-strings": lambda n: repeat(b"x = [", b'""', b"]", n, b","),
    "array-of-empty-arrays": lambda n: repeat(b"x = [", b"[]", b"]", n, b","),
    "array-of-empty-tables": lambda n: repeat(b"x = [", b"{}", b"]", n, b","),
    "arrays-60-deep": lambda n: repeat(b"x = [", b"[" * 60 + b"]" * 60, b"]", n, b","),
    "many-keys": lambda n: numbered("k{i}=1\n", n),
    "many-dotted-keys": lambda n: numbered("a.b.k{i}=1\n", n),
    "inline-table-many-keys": lambda n: b"x = {" + numbered("k{i}=1,", n)[:-1] + b"}",
    "many-tables": lambda n: numbered("[a.b.t{i}]\n", n),
    "many-array-tables": lambda n: repeat(b"", b"[[a]]\n", b"", n),
    "blank-lines": lambda n: repeat(b"", b"\n", b"", n),
    "comment-lines": lambda n: repeat(b"", b"#\n", b"", n),
    "spaces": lambda n: repeat(b"x = ", b" ", b"1", n),
    "string-plain": lambda n: repeat(b'x = "', b"a", b'"', n),  # e.g. the base64 of a [tokenizer] table
    "string-escapes": lambda n: repeat(b'x = "', b"\\n", b'"', n),
    "string-unicode-escapes": lambda n: repeat(b'x = "', b"\\u00e9", b'"', n),
    "multi-line-string-escapes": lambda n: repeat(b'x = """', b"\\n", b'"""', n),
    "literal-string": lambda n: repeat(b"x = '", b"a", b"'", n),
}


def items(text: str) -> int:
    """Items as ``MAX_METADATA_ITEMS`` counts them (every pre-scan token, and every escape of a basic string)."""
    return sum(1 + (text.count("\\", m.start(), m.end()) if text[m.start()] == '"' else 0) for m in _SCAN.finditer(text))


def timed(fn: Callable[[], object], reps: int) -> list[float]:
    """Seconds of ``reps`` calls of ``fn``."""
    out = []
    for _ in range(reps):
        gc.collect()
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return out


def bounded_parse(text: str) -> str:
    """``Metadata.from_toml`` with the default limits: ``loaded`` or ``refused``."""
    try:
        Metadata.from_toml(text)
    except FormatError:
        return "refused"
    return "loaded"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=int, default=1_000_000, help="bytes per document (default 1,000,000)")
    parser.add_argument("--reps", type=int, default=5, help="runs per figure (default 5)")
    parser.add_argument("--shapes", nargs="*", default=sorted(SHAPES), choices=sorted(SHAPES))
    args = parser.parse_args()
    version = sys.version.split()[0]
    print(f"# {len(args.shapes)} shapes of {args.size:,} bytes, {args.reps} runs; MAX_METADATA_ITEMS = {limits.MAX_METADATA_ITEMS:,}; Python {version}")
    print("| shape | items | parser: median s (min-max) | ns/byte | us/item | parser peak memory / byte | from_toml: median s | outcome | ratio |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name in args.shapes:
        text = SHAPES[name](args.size).decode()
        n = items(text)
        bare = timed(lambda text=text: tomllib.loads(text), args.reps)
        gc.collect()
        tracemalloc.start()
        tomllib.loads(text)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        ours = timed(lambda text=text: bounded_parse(text), args.reps)
        med, own = statistics.median(bare), statistics.median(ours)
        print(
            f"| {name} | {n:,} | {med:.3f} ({min(bare):.3f}-{max(bare):.3f}) | {med / len(text) * 1e9:.0f} | {med / n * 1e6:.2f} "
            f"| {peak / len(text):.1f} | {own:.4f} | {bounded_parse(text)} | {med / own:.0f}x |",
            flush=True,
        )


if __name__ == "__main__":
    main()
