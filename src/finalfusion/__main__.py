"""``python -m finalfusion FILE [WORD ...]``: describe a finalfusion file and look words up.

Prints the chunks, the metadata and, for each WORD, whether it is known,
its norm and the first components of its embedding (unknown words are
embedded through subwords when the vocabulary has them).
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

from finalfusion.embeddings import load_finalfusion
from finalfusion.errors import FinalfusionError


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    parser = argparse.ArgumentParser(prog="python -m finalfusion", description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("file", help="finalfusion file (.fifu)")
    parser.add_argument("words", nargs="*", help="words to look up")
    parser.add_argument("--mmap", action="store_true", help="memory-map the file instead of reading it")
    args = parser.parse_args(argv)
    try:
        emb = load_finalfusion(args.file, mmap=args.mmap)
    except (OSError, FinalfusionError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(emb)
    if emb.metadata is not None:
        print("metadata:", dict(emb.metadata))
    with np.printoptions(precision=4, suppress=True):
        for word in args.words:
            found = emb.embedding_with_norm(word)
            if found is None:
                print(f"{word!r}: no embedding")
                continue
            vec, norm = found
            kind = "known" if word in emb.vocab else "unknown, from subwords"
            print(f"{word!r} ({kind}, norm {norm:.4f}): {vec[:6]}{' ...' if len(vec) > 6 else ''}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
