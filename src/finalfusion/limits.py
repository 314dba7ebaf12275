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

Every limit is read at call time (once per load, not per word): a program
that really has larger inputs raises them once, before it loads anything::

    import finalfusion.limits
    finalfusion.limits.MAX_DIMS = 1 << 22
    finalfusion.limits.MAX_WORD_BYTES = 1 << 24

Set them as attributes of this module (``from finalfusion.limits import
MAX_DIMS`` copies the value; assigning to the copy changes nothing).

Examples
--------
>>> import finalfusion.limits as limits
>>> limits.MAX_DIMS, limits.MAX_WORD_BYTES
(1048576, 1048576)
"""

from __future__ import annotations

__all__ = [
    "MAX_CACHE_BYTES",
    "MAX_DIMS",
    "MAX_ENCODE_BATCH_BYTES",
    "MAX_GZIP_EXPANSION",
    "MAX_HEADER_LINE_BYTES",
    "MAX_LINE_BYTES",
    "MAX_LOAD_NGRAMS_PER_BYTE",
    "MAX_METADATA_BYTES",
    "MAX_METADATA_DEPTH",
    "MAX_METADATA_ITEMS",
    "MAX_METADATA_NUMBER_LEN",
    "MAX_MODEL_HEADER_BYTES",
    "MAX_MODEL_METADATA_ITEMS",
    "MAX_NGRAMS_PER_WORD",
    "MAX_NGRAM_LEN",
    "MAX_TEKKEN_TOKEN_BYTES",
    "MAX_TEKKEN_VOCAB_BYTES",
    "MAX_TOKENIZER_BYTES",
    "MAX_TOKENIZER_ID_HOLES",
    "MAX_TOKENIZE_BYTES",
    "MAX_WORDPIECE_INPUT_CHARS",
    "MAX_WORD_BYTES",
    "TRUSTED_TOKENIZER_REGEXES",
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
MAX_HEADER_LINE_BYTES: int = 1 << 12
#: Longest word, in UTF-8 bytes, the word2vec and fastText readers wait for before its terminator (space, NUL); independent of the dimensions.
MAX_WORD_BYTES: int = 1 << 20
#: Longest line of the text formats (a word and its values), newline included.
MAX_LINE_BYTES: int = 1 << 26

#: Most bytes of text (UTF-8) ``finalfusion encode`` buffers for one batch:
#: ``--batch-size`` lines (1,024 by default) or fewer once they hold this much
#: (a single longer line, up to ``MAX_LINE_BYTES``, is a batch of its own). Of
#: up to 64 MiB each, 1,024 lines were up to 64 GiB: 600 long lines ended in
#: ``MemoryError`` at 1.9 GB. Sentences are short; 16 MiB keeps thousands of
#: them per batch.
MAX_ENCODE_BATCH_BYTES: int = 1 << 24

#: Longest n-gram length (``max_n``) accepted from a file (fastText ``maxn``,
#: floret's header, the subword vocabulary chunks of finalfusion files) or a
#: constructor. Real models use 3..6 (floret 4..5); the hashing work per
#: n-gram position grows with ``max_n``, so a file storing ``maxn = 2**31 - 1``
#: is a :class:`~finalfusion.FormatError` instead of gigabytes of n-grams.
MAX_NGRAM_LEN: int = 64

#: Most n-grams one word may have (computed in closed form from its length in
#: code points before anything is allocated). A 1 MiB ASCII word with 3..6
#: n-grams has 4,194,298 and fits. A lookup of a longer word raises
#: :class:`finalfusion.errors.LimitExceeded`; a dictionary word past it in a
#: fastText ``.bin`` is a :class:`~finalfusion.FormatError`.
MAX_NGRAMS_PER_WORD: int = 1 << 22

#: n-grams a fastText ``.bin``'s dictionary words may have in all, per byte of
#: the file (dictionary and matrix), on top of ``MAX_NGRAMS_PER_WORD``.
#: Loading computes every word's vector from its n-grams (a hash and a row
#: addition each); real models have far fewer n-grams than bytes (a matrix
#: row holds ``dim`` floats), so a file past it is a
#: :class:`~finalfusion.FormatError` instead of minutes of hashing.
MAX_LOAD_NGRAMS_PER_BYTE: int = 1

#: Memory (bytes of stored arrays and strings) each n-gram cache may hold: the
#: per-indexer word and n-gram caches and the module-level hashing layouts.
#: Caches evict least recently used entries past it and do not store a result
#: larger than an eighth of it. ``encode``'s table of a call's pieces starts
#: over past it, and ``encode`` scales a model's unit rows by their norms once
#: per call only for a table of at most this size.
MAX_CACHE_BYTES: int = 1 << 25

#: Longest header (metadata and tensor table) of a model file -- GGUF, a SentencePiece
#: ``.model`` -- read from an input whose size is not known (gzip, a pipe, a file object
#: without a descriptor); a file of known size is bounded by its size instead. Real
#: headers, tokenizer included, take a few MB.
MAX_MODEL_HEADER_BYTES: int = 1 << 26

#: Most metadata keys plus arrays (each array of an array of arrays counts one) in a GGUF header. A
#: key costs about 150 bytes of memory and an array a few hundred (a numpy array or a list), from 12
#: to 13 bytes of file: 30 MB of nested empty arrays took 7-12 s and 750 MB. Real models have a few
#: dozen keys and arrays (the token list, scores and merges are one array each, however long);
#: 2**16 keeps a header's objects within ~20 MB and its parse within a fraction of a second. A header
#: past it is a :class:`~finalfusion.FormatError`.
MAX_MODEL_METADATA_ITEMS: int = 1 << 16

#: Longest unknown word, in bytes of UTF-8, that a model's tokenizer is given
#: (:class:`finalfusion.vocab.TokenizerVocab`: GGUF, SentencePiece,
#: safetensors and LightSeq models). The tokenizers' work is about linear in
#: the word's length but costly: one word takes up to ~1.7 s and ~260 MB per
#: MiB in ``tokenizers`` (byte-level BPE, Unigram, WordPiece) and ~0.3 s and
#: ~60 MB per MiB in ``sentencepiece``. 256 KiB keeps one word within ~0.5 s
#: and ~65 MB and is far beyond any real word (a few dozen bytes; long URLs a
#: few KB). A lookup of a longer word raises
#: :class:`finalfusion.errors.LimitExceeded`.
MAX_TOKENIZE_BYTES: int = 1 << 18

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

#: Most bytes a reader expects one byte of gzip-compressed input to expand to.
#: Every gzip input, whatever reads it, may decompress to this many times its
#: compressed size (the whole input when its size is known, else the
#: compressed bytes read so far, as from a pipe) plus 1 MiB, and no more: one
#: more byte is a :class:`~finalfusion.FormatError` naming this limit (a
#: 0.64 MB word2vec ``.bin.gz`` of zeros loaded to 1.9 GB before). A length
#: that a gzip input declares (a finalfusion chunk, a fastText or LightSeq
#: field) past this many times the compressed bytes left is refused before
#: anything is read for it: deflate can reach 1032:1 on a run of one byte, so a
#: 1.5 MB file could make a reader decompress and hold 1.6 GB (40 s) before
#: finding the claim false. Real embedding files compress 1.1:1 (vectors) to
#: 10:1 (HDF5 with padding), text about 2-6:1; 100 leaves tenfold room. Raise
#: it for a file that compresses better (a matrix of zeros: about 1000:1).
MAX_GZIP_EXPANSION: int = 100

#: Largest serialised tokenizer (a ``tokenizer.json``, a SentencePiece
#: ``ModelProto``) inflated from the ``[tokenizer]`` table of a ``.fifu`` file.
#: The table declares the size (``bytes``); a declared size past this limit is
#: refused before anything is inflated, and inflating stops one byte past the
#: declared size, so a zlib bomb (1.4 MB inflating to 1 GiB) costs at most this
#: much memory. Real tokenizers take up to ~35 MB (a 256k-token
#: ``tokenizer.json``); 2**28 (256 MiB) leaves sevenfold room.
MAX_TOKENIZER_BYTES: int = 1 << 28

#: Most ids without a token that a ``tokenizer.json``'s vocabulary may leave
#: below its largest id. Each hole becomes a placeholder token (``<row 7>``):
#: a 60-byte file naming id 2**24 - 1 would build 16 million of them. Real
#: files leave none or a few; 2**16 is far beyond them.
MAX_TOKENIZER_ID_HOLES: int = 1 << 16

#: Largest ``max_input_chars_per_word`` a WordPiece ``tokenizer.json`` may
#: declare. ``tokenizers`` splits a word of up to that many characters with a
#: search that grows much faster than the word (0.06 s for 1 KiB, 11 s for
#: 8 KiB, hours for 256 KiB: found by the fuzzer, fuzz/crashers/
#: tokenizer-json-crash-694cb5e091a1.txt); longer words are ``[UNK]`` at once.
#: BERT-style models declare 100; 1,000 keeps a lookup well under a second.
MAX_WORDPIECE_INPUT_CHARS: int = 1000

#: Longest token, in bytes, of a Tekken tokenizer (``tekken.json``, a tiktoken
#: vocabulary of ranked tokens). Reading one derives a BPE merge per token by
#: merging its bytes, work that grows with the square of the token's length;
#: Mistral's longest token has 78 bytes.
MAX_TEKKEN_TOKEN_BYTES: int = 1 << 7

#: Most bytes the kept tokens of a Tekken tokenizer may hold in all. Deriving
#: the merges takes 0.9 s for Mistral's 130,072 tokens (1.0 MB); a hostile
#: file of tokens made to merge slowly (every byte repeated 2 to 128 times,
#: 2 MB) took 8 s. 2 MiB leaves twofold room over Mistral's files.
MAX_TEKKEN_VOCAB_BYTES: int = 1 << 21

#: ``Regex`` patterns of ``tokenizer.json`` files that the user trusts beyond
#: the built-in list (``finalfusion._tokenizers.KNOWN_REGEXES``, the
#: pre-tokenizers of GPT-2, Llama 3, Qwen, o200k, GLM-4 and a few simple
#: splits). A pattern in neither is refused at load, because an arbitrary
#: regex can backtrack for minutes on one word; add a pattern only after
#: checking that it runs in linear time::
#:
#:     finalfusion.limits.TRUSTED_TOKENIZER_REGEXES = frozenset({r"\p{N}{1,4}"})
TRUSTED_TOKENIZER_REGEXES: frozenset[str] = frozenset()
