"""Resource bounds: the one place where the library's limits live.

Every reader checks the counts it finds in a file against these limits
*before* it allocates, loops or buffers, so that a tiny hostile file cannot
make a lookup allocate gigabytes, a parser recurse without bound, or a reader
that waits for a terminator (a newline, a NUL, a space) buffer a whole endless
input (``/dev/zero``, a pipe, a gzip bomb). A value beyond a limit raises
:class:`finalfusion.FormatError` (when read from a file) or
:class:`ValueError` (when passed to a constructor) naming the limit. The
values are far above what any real file needs (docs/reliability.md,
"Resource bounds").

``MAX_DIMS`` and the metadata limits are read at call time: a program that
really has larger inputs raises them once, before it loads anything::

    import finalfusion.limits
    finalfusion.limits.MAX_DIMS = 1 << 22

The three buffering bounds (``MAX_HEADER_LINE_BYTES``, ``MAX_WORD_BYTES``,
``MAX_LINE_BYTES``) are fixed in this version (the readers take them at
import).

Examples
--------
>>> import finalfusion.limits as limits
>>> limits.MAX_DIMS, limits.MAX_WORD_BYTES
(1048576, 1048576)
"""

from __future__ import annotations

from typing import Final

__all__ = [
    "MAX_DIMS",
    "MAX_HEADER_LINE_BYTES",
    "MAX_LINE_BYTES",
    "MAX_METADATA_BYTES",
    "MAX_METADATA_DEPTH",
    "MAX_METADATA_ITEMS",
    "MAX_METADATA_NUMBER_LEN",
    "MAX_WORD_BYTES",
]

#: Largest number of dimensions (columns) an embedding matrix may have.
#: The largest published embeddings have a few thousand dimensions; 2**20
#: leaves ample room while keeping one row at 4 MiB, so a file that claims
#: 2**32 - 1 columns is refused at load instead of allocating 16 GiB on the
#: first lookup.
MAX_DIMS: int = 1 << 20

#: Largest TOML metadata document (bytes of UTF-8) that is parsed. Metadata
#: describes embeddings (corpus, training parameters); 16 MiB is far beyond
#: any real document and bounds the parser's time and memory.
MAX_METADATA_BYTES: int = 1 << 24

#: Deepest nesting of metadata values: arrays, inline tables, tables and the
#: parts of dotted keys all count one level. Checked on the TOML text before
#: it is parsed (so the parser cannot recurse without bound or build a
#: 20,000-part key) and on values given to :class:`finalfusion.Metadata` (so
#: copying and writing them cannot either).
MAX_METADATA_DEPTH: int = 64

#: Longest run of digits (a number) in TOML metadata. TOML integers are 64-bit
#: (at most 20 characters); the bound leaves room for long float mantissas and
#: keeps a 5,000-digit integer from reaching Python's ``int`` conversion.
MAX_METADATA_NUMBER_LEN: int = 100

#: Longest header line of the text-based formats (word2vec's and text-dims' ``"<rows> <dims>"``, floret's 8 fields), newline included.
MAX_HEADER_LINE_BYTES: Final = 1 << 12
#: Longest word, in UTF-8 bytes, the word2vec and fastText readers wait for before its terminator (space, NUL); independent of the dimensions.
MAX_WORD_BYTES: Final = 1 << 20
#: Longest line of the text formats (a word and its values), newline included.
MAX_LINE_BYTES: Final = 1 << 26

#: Most items in TOML metadata: each bracket, brace, ``=``, ``,``, ``.``, line,
#: number, string, comment and escape of a basic string of a document counts
#: one (a linear pre-scan counts them before the parser runs); a value given
#: to :class:`finalfusion.Metadata` counts one per key and list element, once
#: per path to a shared value. The TOML parser spends 0.2-2.7 microseconds and
#: keeps up to ~140 bytes per item (median 0.19-1.97 s per MB over 21 shapes of
#: 1 MB documents, ``bench/bench_metadata.py``), ten times what a byte of a long
#: string costs: a 375 KB array of 20,000 ``[1.5, {a.b = 2}]`` took seconds, and
#: 16 MiB (``MAX_METADATA_BYTES``) of short items would take tens of seconds.
#: Real metadata (a training configuration, the one-string ``[tokenizer]``
#: table) have hundreds of items; 2**16 leaves a hundredfold room and keeps
#: parsing under ~0.25 s and ~10 MB (docs/reliability.md, "Resource bounds").
MAX_METADATA_ITEMS: int = 1 << 16
