#!/usr/bin/env python3
"""Stand-alone mutation fuzzer for every finalfusion-py reader.

Usage::

    python fuzz/fuzz.py --seconds 600 --reader all
    python fuzz/fuzz.py --seconds 60 --reader finalfusion --jobs 2 --seed 7
    python fuzz/fuzz.py --list

Contract under test: any input ends in a result or a ``FinalfusionError``
(``FormatError``) or ``OSError`` -- never another exception, a hang, a
crash of the interpreter, or an allocation far beyond the input's size.

Design (docs/reliability.md):

* :data:`READERS` maps a name to ``callable(bytes) -> object``; adding a
  reader is one line. The finalfusion-format readers of
  :mod:`finalfusion.compat` are registered when they are importable.
* The parent process generates inputs by stacking 1-4 mutations of seed
  files (tests/data/golden/files, tests/data/testdata, fuzz/seeds; plus
  ../shared when it exists, for bigger files): bit flips, bytes set
  to 0/0xff/0x7f/0x80, 4/8-byte fields set to huge counts (2**40 ...),
  ASCII numbers replaced by huge or negative ones, truncations, splices of
  two inputs, duplicated chunks/ranges, insertions and deletions.
* Each input runs in a worker subprocess under ``RLIMIT_AS`` (address space
  = the worker's size when the input starts + ``--rlimit-mb``), so a runaway
  allocation is a ``MemoryError`` (reported as ``alloc``) instead of an
  out-of-memory kill. The peak RSS growth per input is also checked. A
  per-input timeout catches hangs, and a worker that dies by a signal is
  a ``signal`` finding.
* Successful results are exercised: lookups of a known and an unknown word,
  a batch lookup, a write/re-read/write round trip that must reproduce the
  same vocabulary and bytes, and a pickle round trip (by value, or by file
  reference for the memory-mapped file reader) that must write the same bytes.
* Inputs that produce a new kind of outcome (exception type + message with
  the digits removed) join the corpus; findings are saved once per distinct
  ``(reader, exception type, innermost frame)`` into ``fuzz/crashers/`` as
  ``<reader>-<kind>-<sha1>.bin`` plus a ``.txt`` with the traceback.
  tests/test_fuzz_regressions.py replays every saved file.
"""

from __future__ import annotations

import argparse
import atexit
import base64
import collections
import contextlib
import functools
import gzip
import hashlib
import http.server
import io
import json
import os
import pickle
import random
import re
import resource
import select
import shutil
import signal
import stat
import struct
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import warnings
import zlib
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
SHARED = REPO.parent / "shared"
CRASHERS = HERE / "crashers"

Reader = Callable[[bytes], object]

# -- the reader registry -------------------------------------------------------------


def _load_finalfusion(data: bytes) -> object:
    from finalfusion import load_finalfusion

    return exercise(load_finalfusion(data))


def _load_finalfusion_mmap(data: bytes) -> object:
    # Read-only buffer (the same buffer type as a memory map): arrays are views.
    from finalfusion import load_finalfusion

    return exercise(load_finalfusion(data, mmap=True))


def _via_path(load: Callable[[str], object]) -> Reader:
    """Adapt a reader that takes a path: write the input to this process's scratch file."""

    def run(data: bytes) -> object:
        path = _scratch_path()
        with open(path, "wb") as f:
            f.write(data)
        return exercise(load(path))

    return run


def scratch_path(pid: int | None = None) -> str:
    """The scratch file of process ``pid`` (default: this one); removed at exit, or by the parent after a kill."""
    return os.path.join(tempfile.gettempdir(), f"ff-fuzz-{os.getpid() if pid is None else pid}.bin")


def _scratch_path() -> str:
    path = scratch_path()
    if not os.path.exists(path):
        atexit.register(_remove, path)
    return path


def _remove(path: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)


def _remove_scratch(pid: int) -> None:
    """Remove the scratch file and the scratch directory (write targets) of worker ``pid``."""
    _remove(scratch_path(pid))
    shutil.rmtree(scratch_path(pid) + ".d", ignore_errors=True)
    shutil.rmtree(scratch_path(pid) + ".m", ignore_errors=True)


def _load_finalfusion_file_mmap(path: str) -> object:
    from finalfusion import load_finalfusion

    return load_finalfusion(path, mmap=True)


READERS: dict[str, Reader] = {
    "finalfusion": _load_finalfusion,
    "finalfusion-mmap": _load_finalfusion_mmap,
}
# A real memory map of a file (and the file reference that mapped embeddings pickle as).
READERS["finalfusion-file-mmap"] = _via_path(_load_finalfusion_file_mmap)

#: Readers of foreign formats: registry name -> function in finalfusion.compat.
COMPAT_READERS = {
    "word2vec": "load_word2vec",
    "text": "load_text",
    "text_dims": "load_text_dims",
    "fasttext": "load_fasttext",
    "floret": "load_floret",
    "gguf": "load_gguf",
    "load": "load",  # the format sniffer in front of all of them, and the one fuzzed with gzip input
}


def _register_compat() -> None:
    try:
        import finalfusion.compat as compat
    except ImportError:
        return
    for name, func in COMPAT_READERS.items():
        load = getattr(compat, func, None)
        if load is not None:
            READERS[name] = _via_path(load)


_register_compat()


def _safetensors_rows(f: Any) -> int:
    """Rows of the file's embedding table (capped at 2^16; 1 when the header does not read): the length of the token list to load it with."""
    from finalfusion import FinalfusionError
    from finalfusion.compat.safetensors import read_safetensors_header

    try:
        header = read_safetensors_header(f)
    except (FinalfusionError, OSError):
        return 1  # the load raises the same error (and the contract is checked on it)
    table = header.tensors.get("model.embed_tokens.weight") or header.tensors.get("embeddings")
    return max(1, min(table.shape[0], 1 << 16)) if table is not None and len(table.shape) == 2 else 1


def _load_safetensors(path: str) -> object:
    # A token list as long as the table (capped), so that every row is decoded; a header error surfaces from the load itself.
    from finalfusion.compat.safetensors import load_safetensors

    with open(path, "rb") as f:
        rows = _safetensors_rows(f)
    return load_safetensors(path, tokenizer=[f"t{i}" for i in range(rows)])


def _load_lightseq(path: str) -> object:
    # LightSeq stores no vocabulary: read with one token, then with as many as the table has rows (capped).
    from finalfusion.compat.lightseq import load_lightseq

    emb = load_lightseq(path, ["t0"])
    rows = max(1, min(int(emb.metadata["lightseq"]["rows"]), 1 << 16))
    return load_lightseq(path, [f"t{i}" for i in range(rows)])


# Model formats whose loaders need a vocabulary.
READERS["safetensors"] = _via_path(_load_safetensors)
READERS["lightseq"] = _via_path(_load_lightseq)
try:  # LightSeq's HDF5 exports go through h5py (libhdf5 is C: a crash or hang there is a finding to report upstream)
    import h5py  # noqa: F401

    READERS["lightseq-hdf5"] = _via_path(_load_lightseq)
except ImportError:
    pass


def _load_sentencepiece(path: str) -> object:
    # One vector per piece (the pieces are counted first, capped), so that unknown words go through sentencepiece.
    import numpy as np

    from finalfusion.compat.sentencepiece import SentencePieceModel, load_sentencepiece

    with open(path, "rb") as f:
        proto = f.read()
    n = len(SentencePieceModel.parse(proto).pieces)
    rows = np.arange(max(1, min(n, 1 << 16)) * 3, dtype=np.float32).reshape(-1, 3)
    return load_sentencepiece(proto, rows)


READERS["sentencepiece"] = _via_path(_load_sentencepiece)


#: Words ``tokenizer-json`` looks up besides exercise()'s: spaces, digits, punctuation, accents, CJK, an added token, a lone surrogate.
#: A 4 KiB word ``tokenizer-json`` looks up timed: a tokenizer that is super-linear in the word length takes seconds on it
#: (a WordPiece model with ``max_input_chars_per_word`` = 10^6: 1.7 s, 8 KiB 11 s), every other drawn one milliseconds.
TOKENIZER_LONG_PROBE = "ab" * 2048
TOKENIZER_LONG_PROBE_SECONDS = 1.0
TOKENIZER_PROBES = ("Hello world", "  two  spaces ", "1234567", "naïve café", "中文字", "[CLS]", "it's", "a\ud800b")


def _tokenizer_rows(data: bytes) -> int:
    """Rows of the table ``tokenizer-json`` builds: one past the largest id the document names (1 if it cannot tell; at most 2^16)."""
    try:
        doc = json.loads(data)
        model = doc.get("model") or {}
        vocab = model.get("vocab")
        ids = list(vocab.values()) if isinstance(vocab, dict) else [len(vocab) - 1] if isinstance(vocab, list) else []
        ids += [t.get("id") for t in doc.get("added_tokens") or [] if isinstance(t, dict)]
        top = max((i for i in ids if isinstance(i, int) and not isinstance(i, bool)), default=0)
    except Exception:  # the harness's own parse: anything it cannot read is the library's to refuse
        return 1
    return max(1, min(top + 1, 1 << 16))


def _load_tokenizer_json(data: bytes) -> object:
    """``data`` as the tokenizer.json beside a small safetensors table: a model directory, or the weights with ``tokenizer=`` its path."""
    import numpy as np

    from finalfusion.compat.safetensors import load_safetensors

    rows = _tokenizer_rows(data)
    root = _model_dir()
    table = np.linspace(-1, 1, rows * 3, dtype=np.float32).reshape(rows, 3) + 2
    head = json.dumps({"embeddings": {"dtype": "F32", "shape": [rows, 3], "data_offsets": [0, table.nbytes]}}).encode()
    with open(os.path.join(root, "model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(head)) + head + table.tobytes())
    with open(os.path.join(root, "tokenizer.json"), "wb") as f:
        f.write(data)
    if zlib.crc32(data) % 2:
        emb = load_safetensors(root)
    else:
        emb = load_safetensors(os.path.join(root, "model.safetensors"), tokenizer=os.path.join(root, "tokenizer.json"))
    from finalfusion.errors import MissingExtraError

    try:
        for word in TOKENIZER_PROBES:
            emb.embedding(word)
        emb.embedding_batch(list(TOKENIZER_PROBES))
        start = time.monotonic()  # a long word: the issue's bound is about a second per lookup (a hang inside Rust cannot be interrupted)
        emb.embedding(TOKENIZER_LONG_PROBE)
        took = time.monotonic() - start
    except MissingExtraError:  # without the tokenizers package (no interop extra) only known tokens can be looked up
        return exercise(emb)
    if took > TOKENIZER_LONG_PROBE_SECONDS:
        raise AssertionError(f"looking up a {len(TOKENIZER_LONG_PROBE)}-character word took {took:.1f} s (the bound is about a second)")
    return exercise(emb)


def _model_dir() -> str:
    """This process's scratch model directory (a safetensors table and its tokenizer.json); removed at exit or by the parent."""
    path = scratch_path() + ".m"
    if not os.path.isdir(path):
        os.makedirs(path, exist_ok=True)
        atexit.register(shutil.rmtree, path, True)
    return path


READERS["tokenizer-json"] = _load_tokenizer_json


def _tekken_rows(data: bytes) -> int:
    """Rows of the table ``tekken`` builds: the document's ``default_vocab_size`` (1 if it cannot tell; at most 2^16)."""
    try:
        size = json.loads(data)["config"]["default_vocab_size"]
    except Exception:  # the harness's own parse: anything it cannot read is the library's to refuse
        return 1
    return max(1, min(size, 1 << 16)) if isinstance(size, int) else 1


def _load_tekken(data: bytes) -> object:
    """``data`` as Mistral's ``tekken.json`` beside a small ``consolidated.safetensors`` (``tok_embeddings.weight``): a model directory."""
    import numpy as np

    from finalfusion.compat.safetensors import load_safetensors

    rows = _tekken_rows(data)
    root = _model_dir()
    for stale in ("tokenizer.json", "model.safetensors"):  # the tokenizer-json reader's files would be found first
        with contextlib.suppress(FileNotFoundError):
            os.remove(os.path.join(root, stale))
    table = np.linspace(-1, 1, rows * 3, dtype=np.float32).reshape(rows, 3) + 2
    head = json.dumps({"tok_embeddings.weight": {"dtype": "F32", "shape": [rows, 3], "data_offsets": [0, table.nbytes]}}).encode()
    with open(os.path.join(root, "consolidated.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(head)) + head + table.tobytes())
    with open(os.path.join(root, "tekken.json"), "wb") as f:
        f.write(data)
    emb = load_safetensors(root)
    from finalfusion.errors import MissingExtraError

    try:
        for word in TOKENIZER_PROBES:
            emb.embedding(word)
        emb.embedding_batch(list(TOKENIZER_PROBES))
    except MissingExtraError:  # without the tokenizers package only known tokens can be looked up
        pass
    return exercise(emb)


READERS["tekken"] = _load_tekken


def _load_gensim_pickle(path: str) -> object:
    # gensim's kv.save file (Embeddings.load): a pickle read as data; arrays said to be stored aside have no file beside it.
    from finalfusion import Embeddings

    return Embeddings.load(path)


READERS["gensim-pickle"] = _via_path(_load_gensim_pickle)

#: Seed files per reader (globs relative to ../shared); unmatched globs are skipped.
#: Seed files per reader (globs relative to tests/data, fuzz/ and ../shared if present); unmatched globs are skipped.
SEEDS: dict[str, list[str]] = {
    "finalfusion": ["golden/files/*.fifu", "testdata/*.fifu"],
    "word2vec": ["testdata/rust-similarity.bin", "testdata/rust-analogy.bin", "testdata/*.w2v", "testdata/*utf8-incomplete.bin"],
    "text": ["testdata/*.nodims", "testdata/python-embeddings.txt", "testdata/*utf8-incomplete.txt"],
    "text_dims": ["testdata/rust-similarity.txt", "testdata/*.dims.txt", "testdata/*utf8-incomplete.dims"],
    "fasttext": ["testdata/*fasttext.bin"],
    "floret": ["seeds/*.floret", "testdata/*floret*"],
    "gguf": ["models/gguf_*.gguf"],
    "sentencepiece": ["models/sentencepiece_*.model"],
    "safetensors": ["models/safetensors_*.safetensors"],
    "lightseq": ["models/lightseq_*.pb"],
    "lightseq-hdf5": ["models/lightseq_*.hdf5"],
    "tokenizer-json": ["models/*tokenizer.json"],
    "tekken": ["models/tekken_*.json"],
    "gensim-pickle": ["models/gensim_*.kv"],
    "remote-http": ["seeds/remote-*.http"],
}
SEEDS["finalfusion-mmap"] = SEEDS["finalfusion-file-mmap"] = SEEDS["finalfusion"]
SEEDS["load"] = [g for r in ("word2vec", "text", "text_dims", "fasttext", "floret", "finalfusion", "gguf") for g in SEEDS[r]]


def seed_files(reader: str, shared: Path = SHARED) -> list[Path]:
    """The seed files of ``reader`` (deduplicated by content)."""
    seen: set[bytes] = set()
    out = []
    for pattern in SEEDS.get(reader, []):
        # tests/data holds golden/ and testdata/ (the reference tools' files), so every reader has seeds in a
        # plain clone; ../shared only adds files when it exists. fuzz/seeds/ holds hand-made seeds (floret).
        found = [p for root in (shared, REPO / "tests" / "data", HERE) for p in sorted(root.glob(pattern))]
        for path in found:
            digest = hashlib.sha1(path.read_bytes()).digest()
            if digest not in seen:
                seen.add(digest)
                out.append(path)
    return out


#: Readers whose inputs are bundles (a directory, or a command line with its files): their seeds are their generator's first inputs.
BUNDLE_READERS = {"ann-index": "ann_index_structured", "model-dir": "model_dir_structured", "cli": "cli_structured"}
#: How many generated seeds a bundle reader starts with.
BUNDLE_SEEDS = 12


def seed_inputs(reader: str, shared: Path = SHARED) -> list[bytes]:
    """Seed inputs of ``reader``; finalfusion also gets the bare quantized chunk wrapped in a header; a bundle reader
    (:data:`BUNDLE_READERS`) gets its generator's inputs for seeds 0 .. BUNDLE_SEEDS - 1."""
    if reader in BUNDLE_READERS:
        return [GENERATORS[BUNDLE_READERS[reader]][1](random.Random(i), reader) for i in range(BUNDLE_SEEDS)]
    data = [p.read_bytes() for p in seed_files(reader, shared)]
    if reader == "remote-http":  # the other readers' files served honestly, the hand-made hostile servers, the generator's first inputs
        data += [p.read_bytes() for r in ("finalfusion", "gguf", "safetensors") for p in seed_files(r, shared)]
        data += [remote_http_structured(random.Random(i), reader) for i in range(BUNDLE_SEEDS)]
    if reader == "load":  # every compat reader decompresses gzip transparently (shared code): one compressed seed per format
        data += [gzip.compress(seed_inputs(r, shared)[0][: 1 << 16], 1) for r in COMPAT_READERS if r != "load" and seed_files(r, shared)]
    if reader.startswith("finalfusion"):
        bare = REPO / "tests" / "data" / "testdata" / "rust-quantized_storage.bin"
        if bare.is_file():
            data.append(b"FiFu" + struct.pack("<III", 0, 1, 4) + bare.read_bytes())
    return data


# -- exercising a result -------------------------------------------------------------


#: Byte lengths of the long unknown words ``exercise()`` looks up, and their weights (class 5: a 1 MiB word cost ~1.3 GB).
LONG_LOOKUP_BYTES = (1 << 10, 1 << 14, 1 << 18, 1 << 20)
LONG_LOOKUP_WEIGHTS = (50, 30, 15, 5)
#: Bytes of the batch of long unknown words ``exercise()`` looks up (1 MiB one time in ten, else 64 KiB), and the byte lengths of its words.
LONG_BATCH_BYTES = 1 << 20
LONG_BATCH_SMALL_BYTES = 1 << 16
LONG_BATCH_WORD_BYTES = (1 << 10, 1 << 14)
#: What ``exercise()`` writes a result to besides a memory buffer: one target per result, in turn (docs/reliability.md,
#: "What is written into"). ``device`` is a null device made with ``mknod`` in the scratch directory (root only; skipped elsewhere).
WRITE_TARGETS = ("symlink-file", "symlink-dir", "fifo", "long-name", "device")


#: CRC-32 of the input being run (set by :func:`run_one`): with the result, it seeds ``exercise()``'s choices.
INPUT_CRC = [0]
#: Share of results that get the long-word lookups (0.01-1 s each on main before the n-gram bounds; the rest of ``exercise()`` 5-40 ms).
LONG_LOOKUP_RATE = 0.05


def _exercise_rng(result: Any) -> random.Random:
    """A random source fixed by the input and the result (its size and first words): a saved finding replays the same way."""
    words = result.vocab.words
    key = repr((INPUT_CRC[0], len(words), result.dims, type(result.vocab).__name__, words[:2]))
    return random.Random(zlib.crc32(key.encode("utf-8", "surrogatepass")))


def exercise(result: Any) -> Any:
    """Use a successfully read object the way a user would; raise on inconsistency.

    Embeddings get lookups (known, unknown, and long unknown words of 1 KiB
    to 1 MiB in several scripts, alone and in a batch), non-string keys
    (``TypeError``), a zero query (ties in word order), a write/re-read/write
    round trip that must give the same words and bytes, a pickle round trip,
    writes through the word2vec, text and text-dims writers that must read
    back (or be refused with an error), and a write to a special target
    (symlink, FIFO, long name, device) that must follow the documented
    semantics. Anything else is a finding.
    """
    from finalfusion import Embeddings, load_finalfusion
    from finalfusion.errors import MissingExtraError

    if not isinstance(result, Embeddings):
        return result
    rng = _exercise_rng(result)
    words = result.vocab.words
    probe = [words[0]] if words else []
    probe += ["fuzzing", "", "ü" * 3]
    try:
        for w in probe:
            result.embedding(w)
            result.embedding_with_norm(w)
        ANSWER_BYTES[0] += len(probe) * 6 * 4 * result.dims
        result.embedding_batch(probe * 6)  # > 16 words: the vectorised batch path too
        if rng.random() < LONG_LOOKUP_RATE:
            _long_lookups(result, rng)
    except MissingExtraError:
        pass  # a model vocabulary's unknown words need its tokenizer package (a run without the interop extra)
    for key in (None, 123, b"abc"):  # class 8: a key that is not a str is a TypeError
        try:
            result.embedding(key)
        except TypeError:
            continue
        raise AssertionError(f"embedding({key!r}) must raise TypeError")
    if len(words):  # ties: a zero query makes every score equal (issue 13); answers follow word order
        import numpy as np

        zero = np.zeros(result.dims, dtype=np.float32)
        got = [r.word for r in result.embedding_similarity(zero, k=3)]
        if got != sorted(got):
            raise AssertionError(f"a zero query must return words in code-point order: {got}")
    first = io.BytesIO()
    result.write(first)
    again = load_finalfusion(first.getvalue())
    second = io.BytesIO()
    again.write(second)
    if again.vocab != result.vocab or second.getvalue() != first.getvalue():
        raise AssertionError("a file that reads must write back, and re-read, to the same bytes")
    third = io.BytesIO()
    pickle.loads(pickle.dumps(result)).write(third)
    if third.getvalue() != first.getvalue():
        raise AssertionError("pickling (by value or by file reference) must not change the embeddings")
    _text_round_trips(result)
    _write_to_special_target(result, first.getvalue(), WRITE_TARGETS[rng.randrange(len(WRITE_TARGETS))])
    return result


#: Bytes of the long words of the current input's queries; the worker allows QUERY_RSS_FACTOR times as much peak-RSS growth
#: (the issue's bound: a few hundred MB for queries of a few MB), besides what the input's size allows.
QUERY_BYTES = [0]
QUERY_RSS_FACTOR = 256
#: Bytes of the answers ``exercise()`` asks for (a batch is a ``len(batch) x dims`` float32 matrix): a file of 0 rows may be
#: ``MAX_DIMS`` wide in 72 bytes, and the 18 words of exercise()'s batch are 72 MiB of answer. The worker allows twice this on top.
ANSWER_BYTES = [0]


def _long_lookups(result: Any, rng: random.Random) -> None:
    """Look up one long unknown word (1 KiB - 1 MiB of UTF-8) and a batch of many long words (1 MiB in all)."""
    nbytes = rng.choices(LONG_LOOKUP_BYTES, LONG_LOOKUP_WEIGHTS)[0]
    word = long_word(rng, nbytes)
    word = word[: len(word) * nbytes // len(word.encode("utf-8"))]  # about nbytes of UTF-8 whatever the script
    each = rng.choice(LONG_BATCH_WORD_BYTES)
    total = LONG_BATCH_BYTES if rng.random() < 0.1 else min(LONG_BATCH_SMALL_BYTES, LONG_BATCH_BYTES)
    batch = [long_word(rng, each // 4) + str(i) for i in range(max(total // each, 1))]
    QUERY_BYTES[0] += len(word.encode("utf-8")) + sum(len(w.encode("utf-8")) for w in batch)
    ANSWER_BYTES[0] += (1 + len(batch)) * 4 * result.dims
    from finalfusion import LimitExceeded

    # A word past MAX_NGRAMS_PER_WORD or MAX_TOKENIZE_BYTES is refused (documented); the other lookups still run.
    for lookup in (result.embedding, result.embedding_with_norm):
        with contextlib.suppress(LimitExceeded):
            lookup(word)
    with contextlib.suppress(LimitExceeded):
        result.embedding_batch(batch)


#: Largest result (word rows x dims) ``exercise()`` round-trips through the text writers (~0.1 s each on a shared core).
TEXT_ROUND_TRIP_MAX_VALUES = 1 << 15
#: The text writers ``exercise()`` round-trips through, as (module attribute of the writer, of its reader).
TEXT_WRITERS = (("write_word2vec", "load_word2vec"), ("write_text", "load_text"), ("write_text_dims", "load_text_dims"))


def _text_round_trips(result: Any) -> None:
    """Write ``result`` as word2vec, text and text-dims: a refusal (error) is fine, a file its reader rejects is not."""
    from finalfusion import FinalfusionError

    try:
        import finalfusion.compat as compat
    except ImportError:
        return
    words = result.vocab.words
    if not words or len(words) * max(result.dims, 1) > TEXT_ROUND_TRIP_MAX_VALUES:
        return  # nothing to write (floret vocabularies store no words), or too much for every input (text writing is slow)
    for write_name, load_name in TEXT_WRITERS:
        write, load = getattr(compat, write_name, None), getattr(compat, load_name, None)
        if write is None or load is None:
            continue
        buf = io.BytesIO()
        try:
            write(buf, result)
        except FinalfusionError:
            continue
        except ValueError as exc:  # a word the format cannot hold (whitespace, empty) is refused, documented
            if "cannot represent" in str(exc):
                continue
            raise
        try:
            back = load(buf.getvalue())
        except FinalfusionError as exc:
            raise AssertionError(f"{write_name} wrote a file that {load_name} rejects: {exc}") from exc
        if back.vocab.words != words or back.storage.shape != (len(words), result.dims):
            raise AssertionError(f"{write_name} then {load_name} changed the words or the shape")


def scratch_dir() -> str:
    """This process's scratch directory for write targets; removed at exit (or by the parent after a kill)."""
    path = scratch_path() + ".d"
    if not os.path.isdir(path):
        os.makedirs(path, exist_ok=True)
        atexit.register(shutil.rmtree, path, True)
    return path


_CAN_MKNOD: list[bool] = []


def _make_null_device(path: str) -> bool:
    """A character device like /dev/null (1, 3) at ``path`` -- only in the scratch directory, never a real /dev node."""
    if _CAN_MKNOD == [False]:
        return False
    try:
        os.mknod(path, 0o600 | stat.S_IFCHR, os.makedev(1, 3))
        with open(path, "wb") as f:
            f.write(b"probe")
    except OSError:
        _CAN_MKNOD[:] = [False]
        with contextlib.suppress(OSError):
            os.unlink(path)
        return False
    _CAN_MKNOD[:] = [True]
    return True


def _write_to_special_target(result: Any, expected: bytes, kind: str) -> None:
    """Write ``result`` to a special target of kind ``kind`` and check what docs/reliability.md promises for it."""
    root = scratch_dir()
    for name in os.listdir(root):
        full = os.path.join(root, name)
        if os.path.isdir(full) and not os.path.islink(full):
            shutil.rmtree(full)
        else:
            os.unlink(full)
    if kind == "symlink-file":  # current.fifu -> v1.fifu: v1.fifu is replaced, the link stays
        real, link = os.path.join(root, "v1.fifu"), os.path.join(root, "current.fifu")
        with open(real, "wb") as f:
            f.write(b"old")
        os.symlink("v1.fifu", link)
        result.write(link)
        if not os.path.islink(link) or os.readlink(link) != "v1.fifu" or _read(real) != expected:
            raise AssertionError("a write through a symlink must replace the file it points to and keep the link")
    elif kind == "symlink-dir":  # a link to a directory: IsADirectoryError, nothing written
        target, link = os.path.join(root, "dir"), os.path.join(root, "link.fifu")
        os.mkdir(target)
        os.symlink("dir", link)
        try:
            result.write(link)
        except IsADirectoryError:
            pass
        else:
            raise AssertionError("a write to a symlink to a directory must raise IsADirectoryError")
        if not os.path.islink(link) or os.listdir(target) or sorted(os.listdir(root)) != ["dir", "link.fifu"]:
            raise AssertionError("a refused write to a symlink to a directory must leave everything as it was")
    elif kind == "fifo":  # streamed into, the FIFO stays a FIFO
        fifo = os.path.join(root, "pipe.fifu")
        os.mkfifo(fifo)
        got = _drain_while(fifo, lambda: result.write(fifo))
        if got != expected or not stat.S_ISFIFO(os.lstat(fifo).st_mode):
            raise AssertionError(f"a write to a FIFO must stream the file into it ({len(got)} of {len(expected)} bytes) and keep the FIFO")
    elif kind == "long-name":  # a legal 250-byte name works; no temporary file is left behind
        path = os.path.join(root, "n" * 245 + ".fifu")
        result.write(path)
        if _read(path) != expected or os.listdir(root) != [os.path.basename(path)]:
            raise AssertionError("a write to a 250-byte name must work and leave no temporary file")
    elif kind == "device":
        dev = os.path.join(root, "null")
        if _make_null_device(dev):
            result.write(dev)
            if not stat.S_ISCHR(os.lstat(dev).st_mode) or os.listdir(root) != ["null"]:
                raise AssertionError("a write to a device must stream into it and leave it a device")


def _read(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def _drain_while(fifo: str, write: Callable[[], object]) -> bytes:
    """Run ``write`` (which writes into ``fifo``) while a thread reads the FIFO; return what was read.

    The read end is opened first, non-blocking, so the writer's ``open``
    never waits, and an error before the writer opens it cannot hang the thread.
    """
    fd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    done = threading.Event()
    parts: list[bytes] = []

    def drain() -> None:
        last = False
        while True:
            try:
                part = os.read(fd, 1 << 16)
            except BlockingIOError:  # a writer is there, no data yet
                select.select([fd], [], [], 0.05)
                continue
            if part:
                parts.append(part)
            elif last:  # the read after the writer finished: all it wrote has been read
                return
            elif done.is_set():  # finished: one more pass (this empty read may predate its write)
                last = True
            else:  # no writer yet
                time.sleep(0.001)

    # A small stack: the worker runs under RLIMIT_AS, where a default 8 MiB thread stack may not fit.
    old = threading.stack_size(1 << 18)
    try:
        thread = threading.Thread(target=drain, daemon=True)
        thread.start()
    finally:
        threading.stack_size(old)
    try:
        write()
    finally:
        done.set()
        thread.join()
        os.close(fd)
    return b"".join(parts)


# -- structure-aware generators (issue 13) -------------------------------------------


def hostile_toml(rng: random.Random) -> bytes:
    """TOML that is deep, long or wide where the parser is costly: nesting, dotted keys, long numbers, many items, open strings."""
    n = rng.choice((65, 100, 1000, 20_000))
    kind = rng.randrange(9)
    if kind == 7:  # wide: many short items of one kind, around MAX_METADATA_ITEMS (2**16)
        n = rng.choice((1000, 20_000, 70_000))
        unit = rng.choice((b"k{i} = 1\n", b"a.b.k{i} = true\n", b"[t.t{i}]\n", b"[[a]]\n", b"#\n", b"\n"))
        if rng.randrange(2):
            return b"".join(unit.replace(b"{i}", str(i).encode()) for i in range(n))
        return rng.choice((b"x = [", b"x = {", b'x = "')) + rng.choice((b"1,", b"[],", b"{},", b'"",', b"k = 1,", b"\\n")) * n
    if kind == 8:  # open strings the pre-scan must not retry from every quote
        return rng.choice((b'x = "', b'x = """', b"x = '''")) + rng.choice((b'\\"', b"''", b'"a')) * n * 10
    if kind == 0:
        return b"x = " + b"[" * n + b"]" * rng.choice((n, 0))
    if kind == 1:
        return b"x = " + b"{a = " * n + b"1" + b"}" * n
    if kind == 2:
        sep = rng.choice((b".", b" . ", b'"."'))
        return sep.join([b"a"] * n) + b" = 1"
    if kind == 3:
        return b"[" * rng.choice((1, 2)) + b".".join([b"k"] * n) + b"]\nx = 1"
    if kind == 4:
        return b"x = " + rng.choice((b"", b"-", b"1.")) + b"7" * rng.choice((101, 5000))
    if kind == 5:  # noise inside strings and comments must not count
        noise = b"[{." * n
        return b'a = "' + noise + b'"\n# ' + noise + b"\nb = '" + noise + b"'"
    return b"x = [" + b", ".join([b"[1.5, {a.b = 2}]"] * n) + b"]"


def tie_heavy_fifu(rng: random.Random) -> bytes:
    """A finalfusion file whose scores tie: all-zero, all-equal or 0/1-dimensional rows, many words in shuffled order."""
    import numpy as np

    from finalfusion import Embeddings
    from finalfusion.storage import NdArray
    from finalfusion.vocab import SimpleVocab

    n = rng.choice((1, 2, 5000, 20_000))
    dims = rng.choice((0, 1, 2, 4))
    kind = rng.randrange(3)
    m = np.zeros((n, dims), np.float32) if kind == 0 else np.ones((n, dims), np.float32)
    if kind == 2 and dims:
        m[:, 0] = np.where(np.arange(n) % 2, 1.0, -1.0)
    words = [f"w{i}" for i in range(n)]
    rng.shuffle(words)
    out = io.BytesIO()
    Embeddings(NdArray(m), SimpleVocab(words)).write(out)
    return out.getvalue()


def _with_metadata(data: bytes, toml: bytes) -> bytes:
    """``data`` (a finalfusion file) with its first chunk preceded by a metadata chunk holding ``toml``."""
    if not data.startswith(b"FiFu") or len(data) < 12:
        return data
    (n,) = struct.unpack_from("<I", data, 8)
    if n > 64 or 12 + 4 * n > len(data):
        return data
    ids = list(struct.unpack_from(f"<{n}I", data, 12))
    rest = data[12 + 4 * n :]
    return b"FiFu" + struct.pack(f"<II{n + 1}I", 0, n + 1, 5, *ids) + struct.pack("<IQ", 5, len(toml)) + toml + rest


#: Lengths (in characters) of the long dictionary and vocabulary words the n-gram generators store (issue 13, classes 2 and 5).
LONG_WORD_CHARS = (3_000, 10_000, 100_000, 300_000)
#: Scripts of long words: ASCII, 2-, 3- and 4-byte UTF-8, and a mix (n-gram code differs by byte and by character).
LONG_WORD_SCRIPTS = ("abcdefghijklmnopqrstuvwxyz", "äöüßéèñç", "中文字漢語", "😀🙂🦊🌍", "aü中😀")
#: (min_n, max_n) pairs of the n-gram generators: absurd, inverted, zero, and ordinary ones (ordinary ranges over long words).
NGRAM_RANGES = ((3, 2**31 - 1), (1, 2**31 - 1), (0, 2**31 - 1), (2**31 - 1, 2**31 - 1), (3, 300_000), (0, 0), (5, 3), (2**31 - 1, 1), (3, 6), (1, 1))
#: The same for the u32 fields of finalfusion subword vocabularies.
NGRAM_RANGES_U32 = (*NGRAM_RANGES, (3, 2**32 - 1), (2**32 - 1, 2**32 - 1), (1, 2**32 - 2))
#: Special float32 values for storage rows and norms: NaN, infinities, negatives, zeros, subnormals, the largest float32.
SPECIAL_FLOATS = (float("nan"), float("inf"), float("-inf"), -1.0, 0.0, -0.0, 1e-45, 1e-40, -1e-45, 3.4028235e38, 1.0)


def long_word(rng: random.Random, chars: int) -> str:
    """A word of ``chars`` characters in a random script (a short random pattern repeated: cheap to build)."""
    alphabet = rng.choice(LONG_WORD_SCRIPTS)
    pattern = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 7)))
    return (pattern * (chars // len(pattern) + 1))[:chars]


def _u32(*values: int) -> bytes:
    return struct.pack(f"<{len(values)}I", *(v % 2**32 for v in values))


def _u64(value: int) -> bytes:
    return struct.pack("<Q", value % 2**64)


def _string(word: str | bytes) -> bytes:
    raw = word.encode("utf-8") if isinstance(word, str) else word
    return _u32(len(raw)) + raw


def _pad(at: int) -> bytes:
    """finalfusion's alignment padding before an f32 array at absolute offset ``at`` (1-4 zero bytes, never 0)."""
    return b"\x00" * (4 - at % 4)


def fifu(chunks: list[tuple[int, Any]], header_ids: list[int] | None = None) -> bytes:
    """A finalfusion file: header listing ``header_ids`` (default: the chunk ids), then the framed chunks.

    A payload is bytes, or a function of the payload's absolute offset (for the alignment padding).
    """
    ids = [cid for cid, _ in chunks] if header_ids is None else header_ids
    out = bytearray(b"FiFu" + _u32(0, len(ids), *ids))
    for cid, payload in chunks:
        body = payload(len(out) + 12) if callable(payload) else payload
        out += _u32(cid) + _u64(len(body)) + body
    return bytes(out)


def _ndarray(rows: int, cols: int, data: bytes) -> Callable[[int], bytes]:
    return lambda at: _u64(rows) + _u32(cols, 10) + _pad(at + 16) + data


def _norms_chunk(count: int, data: bytes) -> Callable[[int], bytes]:
    return lambda at: _u64(count) + _u32(10) + _pad(at + 12) + data


def _floats(rng: random.Random, n: int, special: float = 0.0) -> bytes:
    """``n`` little-endian float32 values in [-1, 1], each one of :data:`SPECIAL_FLOATS` with probability ``special``."""
    values = [rng.choice(SPECIAL_FLOATS) if special and rng.random() < special else rng.uniform(-1, 1) for _ in range(n)]
    return struct.pack(f"<{n}f", *values)


def _words(rng: random.Random, n: int, long_chars: int = 0) -> list[str]:
    words = [f"w{i}" for i in range(n)]
    if long_chars:
        words.insert(rng.randrange(n + 1), long_word(rng, long_chars))
    return words


@functools.cache
def _fasttext_seed() -> bytes:
    return (REPO / "tests" / "data" / "testdata" / "rust-fasttext.bin").read_bytes()


def fasttext_ngram_bomb(rng: random.Random) -> bytes:
    """A fastText ``.bin`` from the committed seed's header with absurd ``minn``/``maxn`` and words of 3,000-300,000 characters.

    Class 2 of issue 13: ``maxn = 2^31-1`` over one 3,000-character word (3 KB)
    drove ``load_fasttext`` to gigabytes. The seed's magic, version and
    training arguments are kept (dim 50); ``minn``/``maxn`` come from
    :data:`NGRAM_RANGES` (or are negative), the buckets are cut to 1-100 (the
    matrix stays small), and the dictionary holds a few short words plus,
    mostly, one long word; the input matrix has ``nwords + bucket`` rows.
    """
    seed = _fasttext_seed()
    args = list(struct.unpack_from("<12id", seed, 8))
    minn, maxn = rng.choice((*NGRAM_RANGES, (-1, 6), (3, -1)))
    args[9], args[10] = minn, maxn
    args[8] = bucket = rng.choice((1, 7, 100))
    dim = args[0]
    words = _words(rng, rng.choice((0, 1, 3)), rng.choice(LONG_WORD_CHARS) if rng.random() < 0.9 else 0)
    if not words:
        words = ["w"]
    encoded = [w.encode("utf-8") for w in words]
    out = bytearray(seed[:8] + struct.pack("<12id", *args))
    out += struct.pack("<iiiqq", len(words), len(words), 0, sum(len(w) for w in encoded), -1)
    for w in encoded:
        out += w + b"\x00" + struct.pack("<qb", 1, 0)
    rows = len(words) + bucket
    out += struct.pack("<?qq", False, rows, dim) + _floats(rng, rows * dim)
    out += struct.pack("<?qq", False, len(words), dim) + bytes(4 * len(words) * dim)  # the output matrix (not read)
    return bytes(out)


def floret_ngram_bomb(rng: random.Random) -> bytes:
    """A floret text file with absurd ``min_n``/``max_n`` or long begin/end markers (classes 2 and 5 for floret).

    floret files store no words: the n-gram work happens at lookup, where
    ``exercise()`` looks up long unknown words.
    """
    buckets = rng.choice((1, 4, 16))
    dims = rng.choice((1, 2, 4))
    min_n, max_n = rng.choice((*NGRAM_RANGES_U32, (0, 6), (4, 4)))
    if rng.random() < 0.3:  # long markers: every n-gram of every word carries them
        bow, eow = (long_word(rng, rng.choice((100, 1000))).encode("utf-8") for _ in range(2))
    else:
        bow, eow = b"<", b">"
    head = b"%d %d %d %d %d %d %s %s\n" % (buckets, dims, min_n, max_n, rng.choice((1, 2, 4)), rng.getrandbits(32), bow, eow)
    rows = [b"%d " % i + b" ".join(b"%.6f" % rng.uniform(-1, 1) for _ in range(dims)) + b"\n" for i in range(buckets)]
    return head + b"".join(rows)


def subword_fifu_bomb(rng: random.Random) -> bytes:
    """A finalfusion file with a bucket, fastText, explicit or floret subword vocabulary, huge ``max_n`` and long words.

    Class 5 of issue 13: a file storing ``max_n = 2^32-1`` turned a
    3,000-character word into 4.7 GB. The vocabulary chunk is written by
    hand (the library's constructors would compute the n-grams of the long
    word in the fuzzer itself); storage rows = words + subword rows.
    """
    kind = rng.choice((3, 7, 8, 9))
    min_n, max_n = rng.choice(NGRAM_RANGES_U32)
    words = _words(rng, rng.choice((1, 3)), rng.choice(LONG_WORD_CHARS[:3]) if rng.random() < 0.7 else 0)
    dims = rng.choice((1, 4))
    if kind == 9:  # floret: no words, storage = buckets
        buckets = rng.choice((1, 8))
        vocab = _u32(min_n, max_n) + _u64(buckets) + _u32(rng.choice((1, 4)), rng.getrandbits(32)) + _string("<") + _string(">")
        rows = buckets
    elif kind == 8:
        ngrams = [f"g{i}" for i in range(rng.choice((1, 5)))]
        vocab = _u64(len(words)) + _u64(len(ngrams)) + _u32(min_n, max_n) + b"".join(map(_string, words))
        vocab += b"".join(_string(g) + _u64(i) for i, g in enumerate(ngrams))
        rows = len(words) + len(ngrams)
    else:
        third = rng.choice((1, 3)) if kind == 3 else rng.choice((1, 7, 100))
        vocab = _u64(len(words)) + _u32(min_n, max_n, third) + b"".join(map(_string, words))
        rows = len(words) + (2**third if kind == 3 else third)
    return fifu([(kind, vocab), (2, _ndarray(rows, dims, _floats(rng, rows * dims)))])


def nonfinite_fifu(rng: random.Random) -> bytes:
    """A finalfusion file whose storage rows and norms hold NaN, infinities, negatives and subnormals.

    The minor class of issue 13: such norms were accepted and then written to
    word2vec/text files that the readers reject; ``exercise()`` writes every
    result through those writers and reads it back.
    """
    n = rng.choice((1, 2, 5, 50))
    dims = rng.choice((1, 3, 8))
    words = _words(rng, n)
    chunks: list[tuple[int, Any]] = [(1, _u64(n) + b"".join(map(_string, words)))]
    chunks.append((2, _ndarray(n, dims, _floats(rng, n * dims, special=rng.choice((0.0, 0.1, 1.0))))))
    if rng.random() < 0.8:
        chunks.append((6, _norms_chunk(n, _floats(rng, n, special=rng.choice((0.3, 1.0))))))
    return fifu(chunks)


def quantized_counts_fifu(rng: random.Random) -> bytes:
    """A finalfusion file with a QuantizedArray whose q, d, k and rows are zero, inconsistent or huge (class 6).

    The arrays that follow are as long as the counts imply when that is
    small (so the counts themselves, not a truncation, decide the outcome).
    """
    n = rng.choice((0, 1, 3))
    q = rng.choice((0, 1, 2, 3, 4, 2**32 - 1))
    d = rng.choice((0, 1, 2, 4, 6, 8, 2**20 + 1, 2**32 - 1))
    k = rng.choice((0, 1, 2, 256, 257, 2**32 - 1))
    rows = rng.choice((n, 0, 2**40, 2**64 - 1))
    proj, with_norms = rng.random() < 0.3, rng.random() < 0.3
    words = _words(rng, n)

    def payload(at: int) -> bytes:
        head = _u32(int(proj), int(with_norms), q, d, k) + _u64(rows) + _u32(1, 10)
        head += _pad(at + len(head))
        floats = (d * d if proj else 0) + (k * d if q else 0) + (rows if with_norms else 0)
        codes = rows * q
        if 4 * floats + codes > 1 << 20:
            return head + bytes(rng.choice((0, 16, 4096)))
        cents = _floats(rng, floats)
        return head + cents + bytes(rng.randrange(max(k, 1)) % 256 for _ in range(codes))

    return fifu([(1, _u64(n) + b"".join(map(_string, words))), (4, payload)])


#: Dimension counts past ``finalfusion.limits.MAX_DIMS`` (2^20) and around the u32/i32 limits.
ABSURD_DIMS = (2**20, 2**20 + 1, 2**31 - 1, 2**31, 2**32 - 1, 2**32, 10**9, 99999999999999999999)


#: The format each reader reads (``load`` reads them all).
_FORMAT_OF = {"finalfusion": 0, "finalfusion-mmap": 0, "finalfusion-file-mmap": 0, "word2vec": 1, "text_dims": 2, "floret": 3, "fasttext": 4}


def absurd_dims(rng: random.Random, reader: str = "load") -> bytes:
    """A tiny input claiming absurd dimensions (class 7): a 72-byte ``.fifu``, a word2vec/text-dims/floret header, fastText args.

    The format is the one ``reader`` reads (any for ``load``). On the code
    before the fixes they loaded, and the first lookup allocated 8-16 GiB.
    """
    dims = rng.choice(ABSURD_DIMS)
    kind = _FORMAT_OF.get(reader, rng.randrange(5))
    if kind == 0:
        rows = rng.choice((0, 1))
        n = rng.choice((0, rows))
        vocab = _u64(n) + b"".join(map(_string, _words(rng, n)))
        return fifu([(1, vocab), (2, _ndarray(rows, dims, _floats(rng, rng.choice((0, 4)))))])
    if kind == 1:  # word2vec binary
        return b"1 %d\nw " % dims + _floats(rng, rng.choice((1, 16, 256)))
    if kind == 2:  # text with dims
        return b"1 %d\nw " % dims + b" ".join([b"0.5"] * rng.choice((1, 16))) + b"\n"
    if kind == 3:  # floret
        return b"1 %d 3 6 2 0 < >\n0 0.5\n" % dims
    seed = bytearray(_fasttext_seed()[:200])
    struct.pack_into("<i", seed, 8, min(dims, 2**31 - 1) if rng.random() < 0.8 else -1)
    return bytes(seed)


def huge_text_header(rng: random.Random, reader: str = "load") -> bytes:
    """word2vec and text-dims headers with huge or negative counts over a few ordinary rows (class 3 and 7 siblings).

    Binary (word2vec) rows for ``word2vec``, text rows for ``text_dims``, either for ``load``.
    """
    rows = rng.choice((0, 1, 2, 2**31, 2**32, 2**63, 2**64, 99999999999999999999, -1))
    dims = rng.choice((1, 2, 3, *ABSURD_DIMS, -3, 0))
    body = b"".join(b"w%d " % i + b" ".join([b"0.25"] * 3) + b"\n" for i in range(rng.choice((1, 2, 100))))
    if reader == "word2vec" or (reader != "text_dims" and rng.random() < 0.5):  # word2vec binary rows
        body = b"".join(b"w%d " % i + _floats(rng, 3) for i in range(rng.choice((1, 2, 100))))
    return b"%d %d\n" % (rows, dims) + body


def repeated_chunks(rng: random.Random) -> bytes:
    """A finalfusion file with 2-40,000 repeated vocabulary (or metadata, norms) chunks (the minor class: all were parsed before the order check)."""
    n = rng.choice((2, 100, 40_000))
    cid = rng.choice((1, 1, 5, 6))
    body = {1: _u64(1) + _string("a"), 5: b"a = 1", 6: _u64(1) + _u32(10) + b"\x00" * 4 + _floats(rng, 1)}[cid]
    frame = _u32(cid) + _u64(len(body)) + body
    ids = [cid] * n if rng.random() < 0.5 else [1, 2]
    storage = _u32(2) + _u64(0)  # placeholder: the file is refused before its storage matters
    return b"FiFu" + _u32(0, len(ids), *ids) + frame * n + storage


#: float32 values whose decimal forms are slow to parse exactly: subnormals and rounding ties (class 10).
SLOW_NUMBERS = (b"1e-45", b"7.006492321624085e-46", b"1.401298464324817e-45", b"2.350988701644575e-38")
SLOW_NUMBERS += (b"1.0000000596046448", b"16777217", b"0.1")


def slow_text_numbers(rng: random.Random, reader: str = "load") -> bytes:
    """A text (``text``) or text-dims (``text_dims``; either for ``load``) file of up to ~1 MB of subnormals and float32 rounding ties.

    Class 10: 1 MB of subnormals took 6.6 s before the fix.
    """
    dims = rng.choice((10, 100))
    rows = rng.choice((10, 1000, 4000))
    lines = [b"w%d " % i + b" ".join(rng.choice(SLOW_NUMBERS) for _ in range(dims)) + b"\n" for i in range(rows)]
    body = b"".join(lines)[: 1 << 20]
    body = body[: body.rfind(b"\n") + 1]
    count = body.count(b"\n")
    dims_header = reader == "text_dims" or (reader != "text" and rng.random() < 0.5)
    return (b"%d %d\n" % (count, dims) if dims_header else b"") + body


#: GGUF metadata value type ids (gguf-py's ``GGUFValueType``) and the struct codes of the scalar ones.
GGUF_STRING, GGUF_ARRAY = 8, 9
GGUF_SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
#: ggml tensor types the GGUF generator draws: id -> (elements per block, bytes per block). F32, F16, Q4_0,
#: Q8_0, BF16 (decoded by the library) and Q4_K (decoded through gguf-py).
GGUF_TENSOR_TYPES = {0: (1, 4), 1: (1, 2), 2: (32, 18), 8: (32, 34), 30: (1, 2), 12: (256, 144)}
#: Tokenizer models of ``tokenizer.ggml.model``: the three the reader builds a tokenizer for, and others.
GGUF_MODELS = ("gpt2", "gpt2", "llama", "llama", "t5", "none", "bert", "")


def _gguf_value(order: str, vtype: int, value: Any) -> bytes:
    """One GGUF metadata value of type ``vtype`` in byte order ``order`` (arrays: ``(element type, items)``)."""
    if vtype == GGUF_STRING:
        raw = value.encode("utf-8") if isinstance(value, str) else value
        return struct.pack(order + "Q", len(raw)) + raw
    if vtype == GGUF_ARRAY:
        etype, items = value
        head = struct.pack(order + "IQ", etype, len(items))
        if etype in GGUF_SCALARS:
            return head + b"".join(struct.pack(order + GGUF_SCALARS[etype], v) for v in items)
        return head + b"".join(_gguf_value(order, etype, v) for v in items)
    return struct.pack(order + GGUF_SCALARS[vtype], value)


def _gguf_tokens(rng: random.Random, n: int, model: str) -> tuple[list[str | bytes], list[str]]:
    """``n`` distinct tokens for ``model`` and, for ``gpt2``, the merges that made them; sometimes odd ones.

    gpt2: single letters, then joins of two earlier tokens (each join is a
    merge, in order). llama/t5: ``<unk>``, ``<s>``, ``</s>`` (in 80 % of the
    files), the 256 byte tokens ``<0x00>`` .. ``<0xFF>`` (20 %: byte fallback)
    and ``▁``-prefixed pieces. Odd tokens, in 15 % of the files: empty, a
    duplicate, a long one or invalid UTF-8. The first ``n`` are kept.
    """
    merges: list[str] = []
    if model == "gpt2":
        tokens: list[str | bytes] = list("etaoinshrdlu"[: max(1, min(n, 12))])
        known = set(tokens)
        for _ in range(4 * n):
            if len(tokens) >= n:
                break
            a, b = str(rng.choice(tokens)), str(rng.choice(tokens))
            if a + b not in known and len(a + b) < 40:
                tokens.append(a + b)
                known.add(a + b)
                merges.append(f"{a} {b}")
    else:
        tokens = [rng.choice(("", "\u2581")) + f"t{i}" for i in range(n)]
        if model in ("llama", "t5") and rng.random() < 0.2:
            tokens = [f"<0x{i:02X}>" for i in range(256)] + tokens
        if model in ("llama", "t5") and rng.random() < 0.8:  # sentencepiece needs an unknown piece
            tokens = ["<unk>", "<s>", "</s>", *tokens]
    tokens = tokens[:n] if n else []
    if tokens and rng.random() < 0.15:
        for _ in range(rng.choice((1, 3))):
            odd = ("", tokens[0], long_word(rng, rng.choice((300, 5000))), b"\xff\xfe")[rng.randrange(4)]
            tokens[rng.randrange(len(tokens))] = odd
    return tokens, merges


def _gguf_tokenizer_kv(rng: random.Random, model: str, tokens: list[str | bytes], merges: list[str]) -> list[tuple[str, int, Any]]:
    """The ``tokenizer.ggml.*`` keys of ``model``; each is mis-sized, mistyped or out of range in a few % of the files."""
    n = len(tokens)
    kv: list[tuple[str, int, Any]] = []
    if rng.random() < 0.97:
        kv.append(("tokenizer.ggml.model", GGUF_STRING, model) if rng.random() < 0.97 else ("tokenizer.ggml.model", 4, 2))
    if rng.random() < 0.97:
        etype, items = (GGUF_STRING, tokens) if rng.random() < 0.97 else (4, list(range(n)))  # or a u32 array
        kv.append(("tokenizer.ggml.tokens", GGUF_ARRAY, (etype, items)))

    def sized() -> int:  # the length of a per-token array: n, or in 10 % one off or empty
        return n if rng.random() < 0.9 else max(0, n + rng.choice((-1, 1, -n)))

    if model == "gpt2":
        merges = list(merges)
        if rng.random() < 0.1:  # one merge tokenizers cannot hold (huggingface/tokenizers#2198 panics on some)
            words = [t for t in tokens if isinstance(t, str)] or ["a"]
            junk = rng.choice((f"{rng.choice(words)} {rng.choice(words)}", "nospace", " ", "a  b", "x y z", f"{max(words, key=len)} {max(words, key=len)}"))
            merges.insert(rng.randrange(len(merges) + 1), junk)
        kv.append(("tokenizer.ggml.merges", GGUF_ARRAY, (GGUF_STRING, merges)) if rng.random() < 0.97 else ("tokenizer.ggml.merges", GGUF_ARRAY, (4, [1, 2])))
        if rng.random() < 0.5:
            kv.append(("tokenizer.ggml.pre", GGUF_STRING, rng.choice(("default", "llama-bpe", "qwen2", "gpt-4o", "no-such-pre", ""))))
    elif model in ("llama", "t5"):
        if rng.random() < 0.95:
            etype = rng.choice((6, 6, 6, 6, 12, 4, GGUF_STRING))  # f32, f64, u32, string
            scores = [rng.choice((0.0, 1e30, float("nan"), float("-inf"))) if rng.random() < 0.05 else -float(i) for i in range(sized())]
            items: list[Any] = [str(s) for s in scores] if etype == GGUF_STRING else list(range(len(scores))) if etype == 4 else scores
            kv.append(("tokenizer.ggml.scores", GGUF_ARRAY, (etype, items)))
        if rng.random() < 0.8:
            kinds = {"<unk>": 2, "<s>": 3, "</s>": 3}  # unknown, control; byte pieces 6, others normal (1)
            types = [rng.choice((0, -1, 99)) if rng.random() < 0.03 else kinds.get(str(t), 6 if str(t).startswith("<0x") else 1) for t in tokens]
            types = types[: sized()]
            kv.append(("tokenizer.ggml.token_type", GGUF_ARRAY, (5, types)))
        for key in ("add_space_prefix", "remove_extra_whitespaces"):
            if rng.random() < 0.5:
                kv.append((f"tokenizer.ggml.{key}", 7, rng.random() < 0.5) if rng.random() < 0.95 else (f"tokenizer.ggml.{key}", 4, 7))
        if model == "t5" and rng.random() < 0.5:  # a normalizer: a trie size, then random trie and text bytes (handed to sentencepiece)
            trie = rng.choice((0, 4, 64, 1024, 2**31, 2**32 - 1))
            blob = struct.pack("<I", trie) + rng.randbytes(rng.choice((0, 3, 64, 2000)))
            kv.append(("tokenizer.ggml.precompiled_charsmap", GGUF_ARRAY, (0, list(blob))))
    for name in ("bos", "eos", "unknown", "padding", "seperator"):
        if rng.random() < 0.3:
            kv.append((f"tokenizer.ggml.{name}_token_id", rng.choice((4, 4, 5, 10)), rng.choice((0, 1, max(n - 1, 0), n, 2**31 - 1))))
    return kv


def _gguf_tensor_data(rng: random.Random, ggml_type: int, n_bytes: int, order: str) -> bytes:
    """``n_bytes`` of tensor data of ``ggml_type`` holding values in [-1, 1], a few of them non-finite.

    Random bytes would make most F16/BF16 tables and quantized blocks hold
    NaN or infinity (refused at load), so floats are drawn and encoded, and
    the f16 scales of quantized blocks (Q4_0, Q8_0: 1; Q4_K: 2) are set.
    """
    import numpy as np

    special = 0.002
    if ggml_type in (0, 1, 30):  # F32, F16, BF16
        n = n_bytes // (4 if ggml_type == 0 else 2)
        values = np.array([rng.choice(SPECIAL_FLOATS) if rng.random() < special else rng.uniform(-1, 1) for _ in range(n)], dtype=np.float32)
        if ggml_type == 0:
            return values.astype(order + "f4").tobytes()
        if ggml_type == 1:
            with np.errstate(over="ignore"):
                return values.astype(order + "f2").tobytes()
        return (values.view(np.uint32) >> 16).astype(order + "u2").tobytes()
    data = bytearray(rng.randbytes(n_bytes))
    if ggml_type not in GGUF_TENSOR_TYPES:  # an unknown type: refused before its data is read
        return bytes(data)
    _, block_bytes = GGUF_TENSOR_TYPES[ggml_type]
    scales = 2 if ggml_type == 12 else 1
    for at in range(0, n_bytes - block_bytes + 1, block_bytes):
        for k in range(scales):
            scale = rng.choice(SPECIAL_FLOATS) if rng.random() < special else rng.uniform(0, 0.1)
            with np.errstate(over="ignore"):  # the largest float32 is inf in f16, on purpose
                data[at + 2 * k : at + 2 * k + 2] = np.array(scale, dtype=order + "f2").tobytes()
    return bytes(data)


def gguf_structured(rng: random.Random, reader: str = "gguf") -> bytes:
    """A well-framed GGUF file whose values are drawn: byte order, version, alignment, tensor shape, type and offset, and tokenizer keys.

    Mutated seeds rarely get past GGUF's typed header (0.4 % of them read in
    campaign C4); about a third of these read, and take the reader into the
    tokenizer builders (gpt2 byte-level BPE with real joins as merges,
    llama/t5 SentencePiece, sometimes with byte fallback or a random
    normalizer), the block decoders and the alignment and bounds checks.
    Each defect (a wrong version, shape, type, offset, alignment, count or
    key) is drawn in a few % of the files.
    """
    order = ">" if rng.random() < 0.15 else "<"
    model = rng.choice(GGUF_MODELS)
    tokens, merges = _gguf_tokens(rng, rng.choice((1, 2, 5, 50, 300)), model)
    rows = len(tokens) if rng.random() < 0.95 else max(0, len(tokens) + rng.choice((-1, 1)))
    ggml_type = rng.choice(list(GGUF_TENSOR_TYPES)) if rng.random() < 0.97 else 99  # 99: no reader knows it
    block, block_bytes = GGUF_TENSOR_TYPES.get(ggml_type, (1, 4))
    dims = block * rng.choice((1, 1, 2)) if rng.random() < 0.95 else rng.choice((0, 1, 3, 33, 2**20 + 256, 2**32 - 256, 2**63))
    ne = (dims, rows) if rng.random() < 0.9 else rng.choice(((dims,), (), (dims, rows, 2), (rows, dims)))
    n_bytes = 0
    if all(d < 2**20 for d in ne):
        elements = 1
        for d in ne:
            elements *= d
        n_bytes = -(-elements // block) * block_bytes
    kv = _gguf_tokenizer_kv(rng, model, tokens, merges)
    alignment = 32
    if rng.random() < 0.15:
        alignment = rng.choice((1, 8, 64, 4096, 1, 8, 64, 0, 3, 2**31))
        vtype = rng.choice((4, 4, 10, 5 if alignment < 2**31 else 10))  # u32, u64, i32
        kv.append(("general.alignment", vtype, alignment) if rng.random() < 0.95 else ("general.alignment", GGUF_STRING, "32"))
    if rng.random() < 0.1:  # nested arrays, one more level each time
        nested: Any = (4, [1, 2])
        for _ in range(rng.choice((1, 3, 10))):
            nested = (GGUF_ARRAY, [nested])
        kv.append(("general.nested", GGUF_ARRAY, nested))
    rng.shuffle(kv)
    if kv and rng.random() < 0.03:
        kv.append(kv[0])  # a duplicate key
    names = ["token_embd.weight"] + [rng.choice(("output.weight", "token_embd.weight"))] * (rng.random() < 0.1)
    version = rng.choice((3, 3, 3, 3, 3, 3, 2, 2, 2)) if rng.random() < 0.97 else rng.choice((1, 4))
    out = bytearray(b"GGUF" + struct.pack(order + "IQQ", version, len(names), len(kv)))
    for key, vtype, value in kv:
        out += _gguf_value(order, GGUF_STRING, key) + struct.pack(order + "I", vtype) + _gguf_value(order, vtype, value)
    step = alignment if alignment > 0 and alignment & (alignment - 1) == 0 and alignment <= 4096 else 32
    rel = 0
    for name in names:
        offset = rel if rng.random() < 0.95 else rng.choice((rel + 1, rel + step, 2**40, 2**64 - step))
        out += _gguf_value(order, GGUF_STRING, name) + struct.pack(order + "I", len(ne)) + b"".join(struct.pack(order + "Q", d) for d in ne)
        out += struct.pack(order + "IQ", ggml_type, offset)
        rel += -(-n_bytes // step) * step
    out += bytes(-len(out) % step)
    for _ in names:
        out += _gguf_tensor_data(rng, ggml_type, n_bytes, order) + bytes(-n_bytes % step)
    cut = rng.choice((1, 7, block_bytes)) if rng.random() < 0.05 else 0
    return bytes(out[: len(out) - cut] if cut else out)


# -- safetensors, tokenizer.json, LightSeq and stored tokenizers (issue 24) ------------


def _defect(rng: random.Random, rate: float = 0.03) -> bool:
    """Whether to draw one defect of a well-framed file (each kind of defect is drawn in a few % of the files)."""
    return rng.random() < rate


#: safetensors dtypes the generator draws: the four the reader decodes, and others it must refuse (name -> numpy dtype or None).
SAFETENSORS_DTYPES = {"F32": "<f4", "F16": "<f2", "BF16": None, "F64": "<f8", "I32": "<i4", "I8": "i1", "U8": "u1", "BOOL": "?", "I64": "<i8"}
#: Table names the safetensors generator uses: two the fuzzer's reader sizes its token list by, one other known name, one unknown.
SAFETENSORS_NAMES = ("model.embed_tokens.weight", "embeddings", "embeddings", "transformer.wte.weight")
#: Dimensions far beyond any file: their products overflow 64 bits (the shape must be checked before it is multiplied).
HUGE_DIMS = (2**31, 2**32 + 1, 2**40, 2**63 - 1, 2**64 + 7, 10**30)


def _float_bytes(rng: random.Random, n: int, dtype: str, special: float = 0.002) -> bytes:
    """``n`` values in [-1, 1] (a few special ones) encoded as safetensors ``dtype`` (BF16: the upper halves of float32)."""
    import numpy as np

    values = np.array([rng.choice(SPECIAL_FLOATS) if rng.random() < special else rng.uniform(-1, 1) for _ in range(n)], dtype=np.float32)
    np_dtype = SAFETENSORS_DTYPES.get(dtype)
    if dtype == "BF16":
        return (values.view(np.uint32) >> 16).astype("<u2").tobytes()
    if np_dtype is None:
        return rng.randbytes(2 * n)
    with np.errstate(over="ignore", invalid="ignore"):
        return values.astype(np_dtype).tobytes()


def _json_value(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, allow_nan=True)


def safetensors_structured(rng: random.Random, reader: str = "safetensors") -> bytes:
    """A well-framed safetensors file with a drawn JSON header: dtypes, shapes, offsets, extra tensors and ``__metadata__``.

    The table (one of :data:`SAFETENSORS_NAMES`) is F32/F16/BF16/F64 with
    1-300 rows and 1-16 columns, next to 0-3 other tensors in a shuffled
    order; the header is padded with spaces as the safetensors library
    does. Each defect is drawn in a few % of the files: another dtype, a 0,
    1-D, 3-D or huge shape (:data:`HUGE_DIMS`), offsets that overlap, leave
    a gap, run past the data, are reversed, negative or not integers, a
    duplicate key, ``__metadata__`` with non-string values or deep nesting,
    NaN/Infinity constants, a header length that lies, a cut file, and
    non-finite values in the data. 72 % of 300 seeds read (seeds
    0-299; tests/test_fuzz_generators.py checks what reads against the
    ``safetensors`` library).
    """
    name = rng.choice(SAFETENSORS_NAMES) if not _defect(rng) else "lm_head.weight"  # no table the reader knows
    dtype = rng.choice(("F32", "F32", "F16", "BF16", "F64")) if not _defect(rng) else rng.choice([*SAFETENSORS_DTYPES, "F8_E4M3", "X", ""])
    rows, cols = rng.choice((1, 2, 5, 50, 300)), rng.choice((1, 2, 3, 8, 16))
    shape: list[Any] = [rows, cols]
    if _defect(rng):
        shape = rng.choice(([0, cols], [rows, 0], [rows * cols], [rows, cols, 1], [], [rng.choice(HUGE_DIMS), cols], [rows, rng.choice(HUGE_DIMS)], [-1, cols]))
    width = {"F64": 8, "I64": 8, "F32": 4, "I32": 4}.get(dtype, 1 if dtype in ("I8", "U8", "BOOL") else 2)
    count = 1
    for d in shape:
        count *= d if isinstance(d, int) and 0 <= d < 2**20 else 0
    tensors: list[tuple[str, str, list[Any], bytes]] = [(name, dtype, shape, _float_bytes(rng, count, dtype, 0.02 if _defect(rng) else 0.0))]
    for i in range(rng.choice((0, 0, 1, 3))):  # other tensors (layer weights) around the table
        n = rng.choice((1, 4, 16))
        tensors.append((f"layers.{i}.{rng.choice(('weight', 'bias'))}", "F32", [n], _float_bytes(rng, n, "F32")))
    rng.shuffle(tensors)
    entries: list[tuple[str, str]] = []
    data = bytearray()
    for key, dt, shp, raw in tensors:
        offsets: list[Any] = [len(data), len(data) + (len(raw) if dt in SAFETENSORS_DTYPES or raw else count * width)]
        data += raw
        if _defect(rng, 0.02):
            offsets = rng.choice(
                (
                    [offsets[0], offsets[1] + 4],  # past the data / overlapping the next
                    [max(offsets[0] - 4, 0), offsets[1]],  # overlapping the previous
                    [offsets[1], offsets[0]],  # reversed
                    [offsets[0], 2**64 + offsets[1]],
                    [-4, offsets[1]],
                    [float(offsets[0]), offsets[1]],
                    [offsets[0]],
                    [str(offsets[0]), offsets[1]],
                )
            )
        entry = {"dtype": dt, "shape": shp, "data_offsets": offsets}
        entries.append((key, _json_value(entry)))
    if rng.random() < 0.5 or _defect(rng):
        meta: Any = {"format": "pt"}
        if _defect(rng):
            meta = rng.choice(({"n": 1}, {"nested": {"a": ["b"]}}, ["pt"], "pt", None, {"x": float("nan")}, {"deep": json.loads("[" * 200 + "]" * 200)}))
        entries.insert(rng.randrange(len(entries) + 1), ("__metadata__", _json_value(meta)))
    if entries and _defect(rng):
        entries.append(rng.choice(entries))  # a duplicate key
    if _defect(rng):
        entries.append(
            ("extra", rng.choice(("NaN", "Infinity", "-Infinity", "[" * 5000 + "]" * 5000, '{"dtype": "F32", "shape": [1], "data_offsets": [0, NaN]}')))
        )
    text = "{" + ", ".join(f"{_json_value(k)}: {v}" for k, v in entries) + "}"
    header = text.encode("utf-8")
    header += b" " * (-len(header) % 8)  # the safetensors library pads the header to 8 bytes
    size = len(header)
    if _defect(rng):
        size = rng.choice((0, 1, size - 1, size + 1, size + len(data) + 1, 2**32, 2**63, 2**64 - 1))
    out = struct.pack("<Q", size) + header + bytes(data)
    if _defect(rng):
        out = out[: rng.randrange(len(out))]
    return out


#: Tokenizer models (``model.type``) the tokenizer.json generator draws.
TOKENIZER_MODELS = ("WordLevel", "WordPiece", "BPE", "Unigram")
#: Regexes that are not in finalfusion._tokenizers.KNOWN_REGEXES: backtracking, invalid, empty, and a harmless unknown one.
UNKNOWN_REGEXES = (r"\w*\d", r"(a+)+$", r"(\s*\w+)*!", "[", "", r"[a-z]+")


def _known_regexes() -> list[str]:
    try:
        from finalfusion._tokenizers import KNOWN_REGEXES
    except ImportError:  # an older tree: the GPT-2 pattern alone
        return [r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"]
    return sorted(KNOWN_REGEXES)


def _tokenizer_normalizer(rng: random.Random, depth: int = 0) -> Any:
    kind = rng.randrange(10)
    if kind == 0:
        return None
    if kind == 1:
        return {"type": rng.choice(("NFC", "NFKC", "NFD", "NFKD", "Lowercase", "StripAccents"))}
    if kind == 2:
        return {"type": "BertNormalizer", "clean_text": True, "handle_chinese_chars": True, "strip_accents": None, "lowercase": rng.random() < 0.5}
    if kind == 3:
        return {"type": "Strip", "strip_left": True, "strip_right": rng.random() < 0.5}
    if kind == 4:
        return {"type": "Prepend", "prepend": "\u2581"}
    if kind in (5, 6):
        pattern = {"String": rng.choice((" ", "a", ""))} if rng.random() < 0.5 else {"Regex": rng.choice(_known_regexes())}
        if _defect(rng, 0.1):
            pattern = {"Regex": rng.choice(UNKNOWN_REGEXES)}
        return {"type": "Replace", "pattern": pattern, "content": rng.choice(("\u2581", "", " "))}
    if kind == 7:  # a Precompiled charsmap: SentencePiece's nmt_nfkc one, or one whose trie size lies, or random bytes
        blob = _spm_trained()[1]
        if not blob or _defect(rng, 0.2):
            body = rng.randbytes(rng.choice((0, 8, 64)))
            trie = len(body) - len(body) % 4 if rng.random() < 0.5 else rng.choice((2**31, 2**32 - 4, len(body) + 4, 3))
            blob = struct.pack("<I", trie) + body if rng.random() < 0.9 else b""
        value: Any = base64.b64encode(blob).decode("ascii") if not _defect(rng, 0.1) else rng.choice(("!!", 5, None))
        return {"type": "Precompiled", "precompiled_charsmap": value}
    if depth < 2:
        return {"type": "Sequence", "normalizers": [n for n in (_tokenizer_normalizer(rng, depth + 1) for _ in range(rng.randint(1, 3))) if n]}
    return {"type": "NFKC"}


def _tokenizer_pre(rng: random.Random, depth: int = 0) -> Any:
    kind = rng.randrange(9)
    if kind == 0:
        return None
    if kind == 1:
        return {"type": rng.choice(("Whitespace", "WhitespaceSplit", "BertPreTokenizer"))}
    if kind == 2:
        return {"type": "ByteLevel", "add_prefix_space": rng.random() < 0.5, "trim_offsets": True, "use_regex": rng.random() < 0.8}
    if kind == 3:
        return {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": rng.choice(("always", "first", "never")), "split": rng.random() < 0.5}
    if kind == 4:
        return {"type": "Digits", "individual_digits": rng.random() < 0.5}
    if kind == 5:
        return {"type": "Punctuation", "behavior": rng.choice(("Isolated", "Removed", "MergedWithPrevious"))}
    if kind in (6, 7):
        pattern = rng.choice(_known_regexes()) if not _defect(rng, 0.1) else rng.choice(UNKNOWN_REGEXES)
        behavior = rng.choice(("Isolated", "Removed", "MergedWithNext", "Contiguous"))
        return {"type": "Split", "pattern": {"Regex": pattern}, "behavior": behavior, "invert": rng.random() < 0.1}
    if depth < 2:
        return {"type": "Sequence", "pretokenizers": [p for p in (_tokenizer_pre(rng, depth + 1) for _ in range(rng.randint(1, 3))) if p]}
    return {"type": "Whitespace"}


def tokenizer_json_doc(rng: random.Random) -> tuple[Any, list[str]]:
    """A tokenizer.json document (as Python objects) and its tokens in id order (what :func:`tokenizer_json_structured` serialises)."""
    model_type = rng.choice(TOKENIZER_MODELS)
    n = rng.choice((3, 10, 40, 200))
    letters = "abcdefghijklmnopqrstuvwxyzäöü中文"
    tokens = ["[UNK]" if model_type != "Unigram" else "<unk>", *letters[: min(n, len(letters))]]
    merges: list[str] = []
    while len(tokens) < n:
        a, b = rng.choice(tokens[1:]), rng.choice(tokens[1:])
        joined = a + (b if model_type != "WordPiece" or rng.random() < 0.5 else "")
        if model_type == "WordPiece" and rng.random() < 0.3:
            joined = "##" + b
        if joined not in tokens and len(joined) < 30:
            tokens.append(joined)
            merges.append(f"{a} {b}")
    vocab: Any = {t: i for i, t in enumerate(tokens)}
    if _defect(rng):  # a duplicate id or a sparse one
        vocab[rng.choice(tokens)] = rng.choice((0, n + 5, 2**24 - 1, -1, 2**32))
    model: dict[str, Any]
    if model_type == "WordLevel":
        model = {"type": "WordLevel", "vocab": vocab, "unk_token": "[UNK]"}
    elif model_type == "WordPiece":
        model = {
            "type": "WordPiece",
            "unk_token": "[UNK]",
            "continuing_subword_prefix": "##",
            "max_input_chars_per_word": rng.choice((100, 1, 10**6)),
            "vocab": vocab,
        }
    elif model_type == "BPE":
        pairs = [m for m in merges if all(p in vocab for p in m.split(" ")) and m.replace(" ", "") in vocab]
        model = {"type": "BPE", "dropout": None, "unk_token": "[UNK]" if rng.random() < 0.5 else None, "continuing_subword_prefix": None}
        model |= {"end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": rng.random() < 0.2, "vocab": vocab, "merges": pairs}
        if _defect(rng):
            model["merges"] = [*pairs, rng.choice(("nospace", "x y z", "a  b", " "))]
    else:
        pieces: Any = [[t, -float(i)] for i, t in enumerate(tokens)]
        if _defect(rng):
            pieces[rng.randrange(len(pieces))][1] = rng.choice((float("nan"), float("inf"), "x", None))
        model = {"type": "Unigram", "unk_id": 0 if not _defect(rng) else rng.choice((-1, n, 2**40, None)), "vocab": pieces, "byte_fallback": False}
    if _defect(rng):
        model["type"] = rng.choice(("Word", "", 5, None))
    added = []
    next_id = n = len(tokens)  # added tokens follow the vocabulary (ids that collide are a defect: tokenizers then answers per instance)
    for content in rng.sample(("[CLS]", "[SEP]", "[PAD]", "<s>", "</s>", "[MASK]", "hello world", ""), rng.choice((0, 1, 2, 4))):
        token_id = next_id if not _defect(rng, 0.1) else rng.choice((0, n + 3, 2**24 - 1, 2**31, -1))
        next_id += 1
        added.append(
            {
                "id": token_id,
                "content": content,
                "single_word": False,
                "lstrip": False,
                "rstrip": False,
                "normalized": rng.random() < 0.3,
                "special": rng.random() < 0.8,
            }
        )
        if 0 <= token_id < 2**16:
            tokens += [f"<added {len(tokens)}>"] * max(0, token_id + 1 - len(tokens))
            tokens[token_id] = tokens[token_id] if token_id < n else content
    padding = None
    if rng.random() < 0.1:
        strategy: Any = rng.choice(("BatchLongest", {"Fixed": rng.choice((8, 50_000_000))}))
        padding = {"strategy": strategy, "direction": "Right", "pad_to_multiple_of": rng.choice((None, 8)), "pad_id": 0, "pad_type_id": 0, "pad_token": "[PAD]"}
    truncation = None
    if rng.random() < 0.1:
        truncation = {"direction": "Right", "max_length": rng.choice((1, 2, 512)), "strategy": "LongestFirst", "stride": 0}
    doc = {"version": "1.0", "truncation": truncation, "padding": padding, "added_tokens": added, "normalizer": _tokenizer_normalizer(rng)}
    doc |= {"pre_tokenizer": _tokenizer_pre(rng), "post_processor": None, "decoder": None, "model": model}
    if _defect(rng):
        doc = rng.choice((["not", "an", "object"], {"model": None}, {"normalizer": doc["normalizer"]}))
    return doc, tokens


def tokenizer_json_structured(rng: random.Random, reader: str = "tokenizer-json") -> bytes:
    """A ``tokenizer.json`` with a drawn model, normaliser, pre-tokenizer, padding, truncation and added tokens.

    Models: WordLevel, WordPiece, BPE (merges that built the vocabulary) and
    Unigram. Normalisers: NFC/NFKC/..., BertNormalizer, Strip, Prepend,
    Replace (a string or a pattern of ``KNOWN_REGEXES``), Precompiled
    (consistent or lying trie sizes), Sequence. Pre-tokenizers: Whitespace,
    ByteLevel, Metaspace, Digits, Punctuation, Split with a known regex,
    Sequence. Padding (up to a fixed 50M) and truncation in 10 % each (they
    must be stripped). In a few % each: an unknown (backtracking, invalid or
    empty) regex, a duplicate or sparse id (2^24-1), added tokens with odd
    ids, bad Unigram scores, an unknown model type, a document that is not
    an object, a cut or doubled document. The reader ``tokenizer-json`` puts
    it next to a small safetensors table. 74 % of 300 seeds read
    (seeds 0-299; tests/test_fuzz_generators.py checks the ids against the
    ``tokenizers`` library).
    """
    doc, _ = tokenizer_json_doc(rng)
    data = json.dumps(doc, ensure_ascii=rng.random() < 0.5, allow_nan=True).encode("utf-8")
    if _defect(rng):
        data = rng.choice((data[: rng.randrange(len(data))], data + data, b"\xff" + data))
    return data


#: Characters of 1-4 bytes of UTF-8 (the subword affixes and vocabularies of :func:`tokenizer_json_affixes` are made of them).
AFFIX_CHARS = ("a", "b", "#", "_", "é", "ß", "中", "€", "\u2581", "😀", "𠀀")
#: Affixes real files use, and ones of multi-byte characters whose length in bytes cuts a token inside a character.
AFFIXES = ("#", "##", "@@", "</w>", "\u2581", "é", "中", "😀", "a", "")


def _affix(rng: random.Random) -> str | None:
    if rng.random() < 0.2:
        return None
    if rng.random() < 0.7:
        return rng.choice(AFFIXES)
    return "".join(rng.choice(AFFIX_CHARS) for _ in range(rng.randint(1, 3)))


def tokenizer_affixes_doc(rng: random.Random) -> dict[str, Any]:
    """A BPE or WordPiece ``tokenizer.json`` whose subword prefix, end-of-word suffix, merges and vocabulary mix characters of 1-4 bytes.

    Merges join a token with one that may or may not start with the
    prefix, so that ``tokenizers``' BPE builder, which drops the prefix's
    length in bytes from the second token of every merge, sometimes cuts it
    inside a character (it then aborts the process, issue 33); vocabulary
    entries are whole characters, the merged tokens the library expects,
    and byte-fallback tokens; the model type is BPE, WordPiece or absent.
    """
    prefix, suffix = _affix(rng), _affix(rng)
    chars = rng.sample(AFFIX_CHARS, rng.randint(2, len(AFFIX_CHARS)))
    tokens = ["[UNK]", *chars]
    tokens += [(prefix or "") + c for c in chars if rng.random() < 0.7]
    tokens += [c + (suffix or "") for c in chars if rng.random() < 0.3]
    tokens += [f"<0x{b:02X}>" for b in range(256)] if rng.random() < 0.2 else []
    merges: list[tuple[str, str]] = []
    cut = len((prefix or "").encode("utf-8"))
    for _ in range(rng.randint(1, 12)):
        a = rng.choice(tokens[1:])
        b = rng.choice(tokens[1:]) if rng.random() < 0.6 else (prefix or "") + rng.choice(chars)
        tail = b.encode("utf-8")[cut:]
        with contextlib.suppress(UnicodeDecodeError):  # the token the library looks up for the merge, when it is text
            joined = a + tail.decode("utf-8")
            if rng.random() < 0.9 and joined not in tokens:
                tokens.append(joined)
        if b not in tokens and rng.random() < 0.8:
            tokens.append(b)
        merges.append((a, b))
    vocab = {t: i for i, t in enumerate(dict.fromkeys(tokens))}
    kind = rng.choice(("BPE", "BPE", "BPE", None, "WordPiece"))
    model: dict[str, Any] = {"vocab": vocab, "unk_token": "[UNK]" if rng.random() < 0.7 else None}
    model |= {"type": kind} if kind else {}
    model |= {"continuing_subword_prefix": prefix} if prefix is not None or rng.random() < 0.5 else {}
    if kind != "WordPiece" or rng.random() < 0.3:
        model["merges"] = [list(m) for m in merges] if rng.random() < 0.7 else [" ".join(m) for m in merges]
    if kind != "WordPiece":
        model |= {"end_of_word_suffix": suffix, "byte_fallback": rng.random() < 0.3, "fuse_unk": rng.random() < 0.5}
        model |= {"ignore_merges": rng.random() < 0.3, "dropout": rng.choice((None, None, 0.0, 0.5))}
    decoder = rng.choice(
        (
            None,
            {"type": "WordPiece", "prefix": prefix or "##", "cleanup": True},
            {"type": "BPEDecoder", "suffix": suffix or "</w>"},
            {"type": "ByteFallback"},
            {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always", "split": True},
        )
    )
    doc = {"version": "1.0", "added_tokens": [], "normalizer": None, "pre_tokenizer": _tokenizer_pre(rng), "post_processor": None}
    return doc | {"decoder": decoder, "model": model}


def tokenizer_json_affixes(rng: random.Random, reader: str = "tokenizer-json") -> bytes:
    """A ``tokenizer.json`` of :func:`tokenizer_affixes_doc`: subword affixes and merges that cut multi-byte characters (issue 33)."""
    return json.dumps(tokenizer_affixes_doc(rng), ensure_ascii=rng.random() < 0.5).encode("utf-8")


#: Versions the Tekken generator writes: Tekkenizer's, and ones it refuses (past v7 without special tokens, not a version).
TEKKEN_VERSIONS = ("v3", "v3", "v7", "v11", "v13")


def _tekken_real() -> dict[str, Any]:
    """The committed cut of Mistral Nemo's Tekken tokenizer (tests/data/models/tekken_small.json)."""
    return json.loads((REPO / "tests" / "data" / "models" / "tekken_small.json").read_text(encoding="utf-8"))


def tekken_doc(rng: random.Random) -> dict[str, Any]:
    """A ``tekken.json`` document: a prefix of the real ranked tokens, drawn special tokens and sizes, and a few % of each defect."""
    real = _tekken_real()
    n = rng.choice((256, 257, rng.randint(256, 1500), 1500))
    vocab = copy_json(real["vocab"][:n])
    specials = rng.choice((0, 3, 20, 24, rng.randint(0, 40)))
    named = rng.randint(0, specials)
    version = rng.choice(TEKKEN_VERSIONS)
    config: dict[str, Any] = {
        "pattern": real["config"]["pattern"] if not _defect(rng, 0.05) else rng.choice((r"(a+)+$", r"\w*\d", "", 5, None)),
        "num_vocab_tokens": n,
        "default_vocab_size": specials + rng.choice((n, n, rng.randint(256, n))) + (rng.randint(-60, 5) if _defect(rng) else 0),
        "default_num_special_tokens": specials,
        "version": version if not _defect(rng) else rng.choice(("1", "v", "v99999", "")),
    }
    doc: dict[str, Any] = {"config": config, "vocab": vocab}
    if version not in ("v3",) or rng.random() < 0.5:
        doc["special_tokens"] = [{"rank": i, "token_str": f"<tok{i}>", "is_control": True} for i in range(named)]
    elif specials < 20 and rng.random() < 0.9:  # Tekkenizer's 20 default special tokens need 20 special ids
        config["default_num_special_tokens"] = 20
        config["default_vocab_size"] += 20 - specials
    if rng.random() < 0.2:  # image / audio settings, never read
        doc["image"] = {"image_patch_size": 16, "max_image_size": 1024}
    if _defect(rng):
        i = rng.randrange(n)
        vocab[i]["rank"] = rng.choice((i + 1, i - 1, -1, None, "1", True))
    if _defect(rng):
        vocab[rng.randrange(n)]["token_bytes"] = rng.choice(("a$b=", "YWJ", "", "////", 7, None))
    if _defect(rng) and n > 300:
        vocab[rng.randrange(257, n)]["token_bytes"] = vocab[rng.randrange(256, n)]["token_bytes"]  # a repeat (or itself)
    if _defect(rng) and n > 300:  # bytes no lower-ranked tokens build, or a long token
        vocab[rng.randrange(256, n)]["token_bytes"] = base64.b64encode(rng.choice((b"\xfe\xfd\xfc", b"q" * 300, bytes([rng.randrange(256)])))).decode()
    if _defect(rng):
        config[rng.choice(sorted(config))] = rng.choice((-1, 2**31, 2**63, 1 << 30, True, "3", None, [], 1.5))
    if _defect(rng) and "special_tokens" in doc and doc["special_tokens"]:
        doc["special_tokens"][-1] = rng.choice(({"rank": 0, "token_str": "<tok0>"}, {"rank": named - 1, "token_str": "<tok0>"}, "x", {}))
    if _defect(rng):
        rng.shuffle(vocab)
    return doc


def copy_json(value: Any) -> Any:
    """A deep copy of a JSON value (lists and dicts of scalars)."""
    return json.loads(json.dumps(value))


def tekken_structured(rng: random.Random, reader: str = "tekken") -> bytes:
    """A Mistral ``tekken.json``: a prefix (256-1,500 ranks) of the real tokens of ``tests/data/models/tekken_small.json``.

    Drawn: the number of special ids (0-40) and how many the file names,
    the version (v3 without ``special_tokens``, v7-v13 with them, invalid
    ones), ``default_vocab_size`` (the entries, or fewer, or a few more),
    ``image`` settings. In a few % each: a rank out of place, invalid base64,
    a repeated token, a token no merge builds or past the length bound, a
    config value of the wrong type or size (2^30 special ids), a bad special
    token, shuffled entries, an unknown or backtracking regex, a cut or
    doubled document. The reader ``tekken`` puts it next to a small
    ``consolidated.safetensors``; tests/test_tekken.py checks the ids of what
    reads against mistral-common's Tekkenizer.
    """
    data = json.dumps(tekken_doc(rng), ensure_ascii=rng.random() < 0.5).encode("utf-8")
    if _defect(rng):
        data = rng.choice((data[: rng.randrange(len(data))], data + data, b"\xff" + data))
    return data


#: Protobuf wire types.
_VARINT, _I64, _LEN, _I32 = 0, 1, 2, 5


def _pb_key(number: int, wire: int) -> bytes:
    return _pb_varint(number << 3 | wire)


def _pb_varint(v: int) -> bytes:
    out = bytearray()
    v %= 2**64
    while True:
        b = v & 0x7F
        v >>= 7
        out.append(b | (0x80 if v else 0))
        if not v:
            return bytes(out)


def _pb_len(number: int, payload: bytes) -> bytes:
    return _pb_key(number, _LEN) + _pb_varint(len(payload)) + payload


def _pb_floats(number: int, values: list[float], packed: bool = True) -> bytes:
    if packed:
        return _pb_len(number, struct.pack(f"<{len(values)}f", *values))
    return b"".join(_pb_key(number, _I32) + struct.pack("<f", v) for v in values)


def _lightseq_proto(rng: random.Random) -> bytes:
    """A LightSeq Transformer, GPT or BERT export (quantized or not) with the fields the reader uses and some it skips."""
    model = rng.choice(("transformer", "gpt", "bert"))
    quant = rng.random() < 0.3
    hidden, rows = rng.choice((1, 2, 4, 8)), rng.choice((1, 3, 20, 200))

    def layer(transposed: bool, clip_field: int) -> bytes:
        n = hidden * rows
        if _defect(rng):
            n = rng.choice((0, n - 1, n + 1, hidden))
        if quant:
            out = _pb_len(1, rng.randbytes(n))
            clip = rng.uniform(0.1, 5) if not _defect(rng) else rng.choice((0.0, float("nan"), float("inf"), -1.0))
            out += _pb_key(clip_field, _I32 if not _defect(rng) else _VARINT) + (struct.pack("<f", clip) if out else b"")
        else:
            out = _pb_floats(1, [rng.choice(SPECIAL_FLOATS) if rng.random() < 0.001 else rng.uniform(-1, 1) for _ in range(n)], packed=rng.random() < 0.9)
        out += _pb_floats(2, [0.5] * hidden)  # position_embedding: skipped
        norm = hidden if not _defect(rng) else rng.choice((0, hidden + 1))
        out += _pb_floats(3, [1.0] * norm, packed=rng.random() < 0.95)
        return out

    if model == "transformer":
        parts = [(1, _pb_len(1, layer(False, 9))), (2, _pb_len(2, _pb_floats(1, [1.0] * hidden))), (3, _pb_len(3, layer(True, 9)))]
        parts += [
            (4, _pb_len(4, _pb_floats(1, [1.0] * hidden))),
            (5, _pb_len(5, _pb_key(1, _VARINT) + _pb_varint(2) + _pb_key(13, _VARINT) + _pb_varint(rng.randrange(2)))),
        ]
    else:
        # GptModelConf: 3 sampling_method (string), 6 eos_id; BertModelConf: 3 is_post_ln, 4 use_gelu (bools)
        conf = _pb_len(3, b"topk") + _pb_key(6, _VARINT) + _pb_varint(rows - 1) if model == "gpt" else _pb_key(3, _VARINT) + _pb_varint(1)
        parts = [(1, _pb_len(1, layer(False, 5))), (2, _pb_len(2, _pb_floats(1, [1.0] * hidden))), (3, _pb_len(3, _pb_key(1, _VARINT) + _pb_varint(2) + conf))]
    if _defect(rng):
        parts.pop(rng.randrange(len(parts)))
    if _defect(rng):
        parts.append((99, _pb_len(99, b"\x0a\x00" * rng.choice((1, 1000)))))  # an unknown field, skipped
    if _defect(rng):
        parts.insert(rng.randrange(len(parts) + 1), (1, parts[0][1]))  # a repeated message field: merged
    if _defect(rng):
        parts.append((7, _pb_key(7, rng.choice((3, 4, 6, 7))) + b"\x00"))  # a group or an invalid wire type
    if _defect(rng):
        parts.append((1, _pb_key(1, _LEN) + _pb_varint(rng.choice((2**31, 2**63, 2**64 - 1)))))  # a length past the end
    if _defect(rng):
        rng.shuffle(parts)
    out = b"".join(p for _, p in parts)
    if _defect(rng):
        out = out[: rng.randrange(len(out) + 1)]
    return out


#: What an HDF5 LightSeq file may point to instead of holding it (every one is refused): names per kind.
HDF5_OUTSIDE = ("soft", "external-link", "external-storage", "virtual")


def _lightseq_hdf5(rng: random.Random) -> bytes:
    """A LightSeq HDF5 export built with h5py (contiguous, chunked, compressed or fill-only datasets; a few % point outside the file)."""
    import h5py
    import numpy as np

    model = rng.choice(("transformer", "gpt", "bert"))
    quant = rng.random() < 0.3
    hidden, rows = rng.choice((1, 2, 4, 8)), rng.choice((1, 3, 20, 200))
    buf = io.BytesIO()
    with h5py.File(buf, "w") as f:
        sides = ("src", "trg") if model == "transformer" else ("src",)
        for side in sides:
            n = hidden * rows if not _defect(rng) else rng.choice((0, hidden * rows - 1, hidden))
            if quant:
                table: Any = np.frombuffer(rng.randbytes(n), dtype=np.uint8)
                f[f"{side}_embedding/emb_clip_max"] = np.float32(rng.uniform(0.1, 5) if not _defect(rng) else rng.choice((0.0, float("nan"))))
            else:
                table = np.array([rng.uniform(-1, 1) for _ in range(n)], dtype=np.float32)
            if _defect(rng):
                table = table.astype(rng.choice((np.float64, np.int32, np.float16)))
            shape = table.shape if rng.random() < 0.7 or n % hidden else (n // hidden, hidden)
            kwargs: dict[str, Any] = {}
            if rng.random() < 0.3 and n:
                kwargs = {"chunks": True, "compression": rng.choice(("gzip", "lzf", None))}
            if _defect(rng):  # declared but never written: fill values only
                f.create_dataset(f"{side}_embedding/token_embedding", shape=(rng.choice((n, 2**20, 2**30)),), dtype=table.dtype, chunks=True)
            else:
                f.create_dataset(f"{side}_embedding/token_embedding", data=table.reshape(shape), **kwargs)
            norm_len = hidden if not _defect(rng) else 0
            f.create_dataset(f"{side}_embedding/norm_scale", data=np.ones(norm_len, dtype=np.float32))
        if model == "transformer":
            f["model_conf/no_scale_embedding"] = rng.random() < 0.5 if not _defect(rng) else np.array([1, 2])
        elif model == "gpt":
            f["model_conf/eos_id"] = np.int32(rows - 1)
        else:
            f["model_conf/is_post_ln"] = True
        if rng.random() < 0.05:  # a name the reader reads points outside the file (every kind is refused)
            kind = rng.choice(HDF5_OUTSIDE)
            norm = "trg_embedding/norm_scale" if model == "transformer" else "src_embedding/norm_scale"  # where the hidden size is read
            target = rng.choice(("src_embedding/token_embedding", norm, "src_embedding"))
            if kind in ("external-storage", "virtual") and target == "src_embedding":
                target += "/token_embedding"  # a dataset, not a group
            del f[target]
            if kind == "soft":
                f.create_dataset("elsewhere", data=np.ones(hidden * rows, dtype=np.float32))
                f[target] = h5py.SoftLink("/elsewhere")
            elif kind == "external-link":
                f[target] = h5py.ExternalLink(rng.choice(("other.h5", "/dev/zero", "../x.h5")), "/data")
            elif kind == "external-storage":
                f.create_dataset(target, shape=(hidden * rows,), dtype=np.float32, external=[(rng.choice(("/dev/zero", "missing.bin")), 0, 4 * hidden * rows)])
            else:
                layout = h5py.VirtualLayout(shape=(hidden * rows,), dtype=np.float32)
                layout[:] = h5py.VirtualSource("other.h5", "/data", shape=(hidden * rows,))
                f.create_virtual_dataset(target, layout, fillvalue=0)
    data = buf.getvalue()
    if _defect(rng):
        data = data[: rng.randrange(len(data) + 1)]
    return data


def lightseq_structured(rng: random.Random, reader: str = "lightseq") -> bytes:
    """A LightSeq export: protobuf (reader ``lightseq``) or HDF5 built with h5py (reader ``lightseq-hdf5``).

    Transformer (source and transposed target tables, ``no_scale_embedding``),
    GPT and BERT, quantized (uint8 codes and ``emb_clip_max``) in 30 %;
    1-8 hidden units, 1-200 rows. Protobuf defects (a few % each): table
    sizes that are not a multiple of ``hidden``, an empty or longer
    ``norm_scale``, unpacked floats, a mistyped or non-finite clip, a
    missing, repeated or unknown field, an invalid wire type, a length past
    the end, a cut file. HDF5: chunked and compressed datasets, fill-only
    tables declaring up to 2^30 values, other dtypes, and in 5 % a name the
    reader reads is a soft link, an external link, external raw storage or a
    virtual dataset (:data:`HDF5_OUTSIDE`), which must be refused. 78 % of
    300 protobuf seeds and 78 % of 300 HDF5 seeds read (seeds 0-299;
    tests/test_fuzz_generators.py checks the tables against ``protobuf`` and ``h5py``).
    """
    return _lightseq_hdf5(rng) if reader == "lightseq-hdf5" else _lightseq_proto(rng)


#: Globals a hostile pickle names instead of gensim's classes: each must be refused by name, never imported or called.
PICKLE_FOREIGN = (("os", "system"), ("builtins", "eval"), ("numpy", "load"), ("gensim.models.word2vec", "Word2Vec"), ("numpy", "frombuffer"))


def _pickle_as(module: str, name: str, state: Any, protocol: int) -> bytes:
    """``state`` pickled as the state of an instance of ``module.name``, a class that need not exist here.

    A stand-in class is pickled under a top-level module name and a class name of the same lengths as the real
    ones, which are then put in their place (equal lengths keep every length field and protocol 4's frames right).
    """
    import copyreg
    import types

    fake_module, fake_name = "m" * len(module), "K" * len(name)
    stand_in = type(fake_name, (), {"__module__": fake_module, "__qualname__": fake_name})
    stand_in.__reduce_ex__ = lambda self, proto: (copyreg.__newobj__, (stand_in,), state)  # type: ignore[method-assign,assignment]
    fake = types.ModuleType(fake_module)
    setattr(fake, fake_name, stand_in)
    sys.modules[fake_module] = fake
    try:
        data = pickle.dumps(stand_in(), protocol=protocol)
    finally:
        del sys.modules[fake_module]
    return data.replace(fake_module.encode(), module.encode(), 1).replace(fake_name.encode(), name.encode(), 1)


def gensim_pickle_structured(rng: random.Random, reader: str = "gensim-pickle") -> bytes:
    """A gensim ``KeyedVectors`` or ``FastTextKeyedVectors`` pickle as ``kv.save`` writes it, with structural defects.

    Valid: 0-40 words (odd Unicode among them), float32 or float64 vectors of
    1-8 dimensions; fastText with 1-64 buckets, n-grams from 1-6, and either
    the composed ``vectors`` or only ``vectors_vocab``. Defects (a few % each):
    a foreign global (:data:`PICKLE_FOREIGN`: ``os.system`` and friends,
    which must be refused by name), a non-dict state, words twice or not
    str, a wrong ``vector_size``, vectors of the wrong shape or dtype
    (ints, objects), a missing array, arrays said to be stored aside (no
    file beside the input: refused), ``compatible_hash`` false, absurd
    bucket counts or n-gram ranges, gensim 3's ``vocab`` instead of
    ``index_to_key``; pickle protocols 2-5.
    """
    import numpy as np

    def chance(p: float) -> bool:
        return rng.random() < p

    fasttext = chance(0.35)
    dims = rng.randint(1, 8)
    n = rng.choice([0, 1, 2, rng.randint(3, 40)])
    words = [rng.choice(["w", "é", "中", "\u00a0", "a b", "\U0001f600", ""]) + str(i) for i in range(n)]
    if n and chance(0.04):
        words.append(words[0])
    dtype = np.float64 if chance(0.2) else np.float32
    vectors = np.asarray([[rng.uniform(-2, 2) for _ in range(dims)] for _ in range(len(words))], dtype=dtype).reshape(len(words), dims)
    state: dict[str, Any] = {"vector_size": dims, "index_to_key": words, "key_to_index": {w: i for i, w in enumerate(words)}, "next_index": 0}
    state["vectors"] = vectors
    state["norms"] = None
    if fasttext:
        bucket = rng.choice([0, 1, rng.randint(2, 64)])
        min_n = rng.randint(1, 4)
        state.update(bucket=bucket, min_n=min_n, max_n=rng.randint(min_n, 6), compatible_hash=True)
        state["vectors_vocab"] = vectors
        state["vectors_ngrams"] = np.asarray([[rng.uniform(-1, 1) for _ in range(dims)] for _ in range(bucket)], dtype=np.float32).reshape(bucket, dims)
        if chance(0.4):
            state["vectors"] = None
    defect = rng.random()
    if defect < 0.03:
        state["vector_size"] = rng.choice([dims + 1, -1, True, "4", 2**70])
    elif defect < 0.06 and words:
        state["index_to_key"] = [*words[:-1], rng.choice([1, b"w", None, ("t",)])]
    elif defect < 0.09:
        state["vectors"] = rng.choice([vectors[:-1], vectors.astype(np.int32), vectors.astype(object), vectors.T, None, "vectors"])
    elif defect < 0.12:
        state["__numpys"] = rng.choice([["vectors"], ["vectors_ngrams"], ["../../etc/passwd"], "vectors", ["norms"]])
    elif defect < 0.14:
        state["__scipys"] = ["vectors"]
    elif defect < 0.17 and fasttext:
        state[rng.choice(["compatible_hash", "bucket", "min_n", "max_n"])] = rng.choice([False, 2**40, -3, 0, 99, None])
    elif defect < 0.19:
        state.pop("index_to_key")
        state["vocab"] = {w: i for i, w in enumerate(words)}  # gensim 3
    elif defect < 0.21:
        state.pop(rng.choice(sorted(state)))
    cls = ("gensim.models.fasttext", "FastTextKeyedVectors") if fasttext else ("gensim.models.keyedvectors", "KeyedVectors")
    if chance(0.04):
        cls = rng.choice(PICKLE_FOREIGN)
    payload: Any = state if not chance(0.02) else rng.choice([[state], "state", None])
    return _pickle_as(*cls, payload, rng.choice([2, 3, 4, 4, 4, 5]))


@functools.cache
def _zlib_bomb() -> bytes:
    """64 MiB of zeros, deflated (64 KiB): a stored model that inflates far past what it declares."""
    return zlib.compress(bytes(64 << 20), 9)


@functools.cache
def _spm_trained() -> tuple[bytes, bytes, tuple[str, ...]]:
    """A tiny SentencePiece model trained with the real library (nmt_nfkc), its precompiled charsmap and its pieces (empty without sentencepiece)."""
    try:
        import sentencepiece as spm
        from sentencepiece import sentencepiece_model_pb2 as pb
    except ImportError:
        return b"", b"", ()
    buf = io.BytesIO()
    lines = ["the quick brown fox jumps over the lazy dog", "naïve café 中文 1234", "Grüße aus Köln"] * 30
    spm.SentencePieceTrainer.train(sentence_iterator=iter(lines), model_writer=buf, vocab_size=60, minloglevel=2, num_threads=1, hard_vocab_limit=False)
    model = buf.getvalue()
    proto = pb.ModelProto()
    proto.ParseFromString(model)
    return model, bytes(proto.normalizer_spec.precompiled_charsmap), tuple(p.piece for p in proto.pieces)


def tokenizer_table_structured(rng: random.Random, reader: str = "finalfusion") -> bytes:
    """A ``.fifu`` whose metadata stores a tokenizer as the ``[tokenizer]`` table (kind, encoding, bytes, model).

    The words are the tokenizer's tokens (a tokenizer.json from
    :func:`tokenizer_json_doc`, or a tiny SentencePiece model trained once), the
    model zlib-compressed and base64-encoded as the library writes it. In a
    few % each: another kind or encoding, a field of the wrong type (an
    array kind, a string size, a boolean), a declared size that is too
    small, too large or past the limit, a zlib bomb (64 MiB of zeros
    declared as 100 bytes), invalid base64, a cut or trailing zlib stream,
    a user's own ``tokenizer`` value that is not a table. 71 % of 300 seeds
    read (seeds 0-299, reader ``finalfusion``; tests/test_fuzz_generators.py).
    """
    import tomli_w

    kind = "huggingface" if rng.random() < 0.7 or not _spm_trained()[0] else "sentencepiece"
    if kind == "huggingface":
        doc, tokens = tokenizer_json_doc(rng)
        model = json.dumps(doc, allow_nan=True).encode("utf-8")
    else:
        model, tokens = _spm_trained()[0], list(_spm_trained()[2])
    words = list(dict.fromkeys(tokens))[: 1 << 12] or ["w"]
    packed = zlib.compress(model, rng.choice((1, 6, 9)))
    table: dict[str, Any] = {"kind": kind, "encoding": "zlib+base64", "bytes": len(model), "model": ""}
    if _defect(rng):
        packed = _zlib_bomb()
        table["bytes"] = rng.choice((100, len(model)))
    if _defect(rng):
        packed = rng.choice((packed[: len(packed) // 2], packed + b"tail", b"", packed + packed))
    table["model"] = base64.b64encode(packed).decode("ascii")
    if _defect(rng):
        table["bytes"] = rng.choice((len(model) - 1, len(model) + 1, 0, -1, 2**40, 2**63 - 1))
    if _defect(rng):
        table["kind"] = rng.choice(("bpe", "", "HuggingFace", "sentencepiece" if kind == "huggingface" else "huggingface"))
    if _defect(rng):
        table["encoding"] = rng.choice(("zlib", "base64", "gzip+base64", ""))
    if _defect(rng) and isinstance(table["model"], str):
        table["model"] = rng.choice(("!!", table["model"][:-3], table["model"] + "=", "é"))
    if _defect(rng):
        table[rng.choice(("kind", "encoding", "bytes", "model"))] = rng.choice((["huggingface"], "123", True, 1.5, {"a": 1}, "é"))
    if _defect(rng):
        del table[rng.choice(("encoding", "bytes"))]
    metadata: dict[str, Any] = {"tokenizer": table}
    if _defect(rng):
        metadata = {"tokenizer": rng.choice(("gpt2", ["a"], {"name": "gpt2"}, 5))}
    if rng.random() < 0.3:
        metadata["corpus"] = "fuzz"
    toml = tomli_w.dumps(metadata).encode("utf-8")
    chunks: list[tuple[int, Any]] = [(5, toml), (1, _u64(len(words)) + b"".join(map(_string, words)))]
    return fifu([*chunks, (2, _ndarray(len(words), 4, _floats(rng, 4 * len(words))))])


#: Readers of the finalfusion format (and the sniffer, which reads it too).
# -- directories and the command line as inputs (issue 33) ------------------------------------
#
# A reader of a directory (a saved ANN index, a model directory) or of a command line gets one input
# as a *bundle*: ``DIR_MAGIC`` then entries ``u8 kind | u16 name length | name | u32 length | data``,
# read leniently (a malformed entry ends the list, so mutated bundles still mean something). The worker
# materialises it under a fresh root: ``d/`` is the directory the user names, ``outside/`` lies beyond it.
# Names are relative to the root ('/'-separated, no '..'); link targets may point anywhere ('{root}' is
# replaced by the root). META entries carry the command line, standard input, which paths are inputs,
# outputs, files the library owns, and files outside that must never be read ("sentinels").

DIR_MAGIC = b"FFDIR1\n"
D_FILE, D_DIR, D_FIFO, D_LINK, D_SPARSE, D_DEVICE, D_META, D_HARDLINK = range(8)
#: Character devices a bundle may ask for (made with mknod where allowed, i.e. as root; skipped elsewhere).
DEVICES = {b"null": (1, 3), b"zero": (1, 5)}
#: Largest apparent size of a sparse file (it takes 4 KiB on disk).
SPARSE_MAX = 8 << 30


class Violation(AssertionError):
    """A broken contract found by a directory or command-line reader; ``fuzz_where`` names its class (one finding per class)."""

    def __init__(self, where: str, message: str) -> None:
        super().__init__(message)
        self.fuzz_where = where


def pack_dir(entries: list[tuple[int, str, bytes]]) -> bytes:
    """A bundle of ``(kind, name, data)`` entries (see the comment above)."""
    out = [DIR_MAGIC]
    for kind, name, data in entries:
        raw = name.encode("utf-8", "surrogatepass")
        out.append(struct.pack("<BH", kind, len(raw)) + raw + struct.pack("<I", len(data)) + data)
    return b"".join(out)


def unpack_dir(data: bytes) -> list[tuple[int, str, bytes]]:
    """The entries of a bundle, up to the first malformed one ([] for anything else)."""
    if not data.startswith(DIR_MAGIC):
        return []
    at, out = len(DIR_MAGIC), []
    while at + 3 <= len(data):
        kind, n = struct.unpack_from("<BH", data, at)
        at += 3
        if at + n + 4 > len(data):
            break
        name = data[at : at + n].decode("utf-8", "replace")
        (size,) = struct.unpack_from("<I", data, at + n)
        at += n + 4
        if at + size > len(data):
            break
        out.append((kind, name, data[at : at + size]))
        at += size
    return out


def _safe_name(root: str, name: str) -> str | None:
    parts = name.split("/")
    if not name or name.startswith("/") or any(p in ("", ".", "..") or "\x00" in p for p in parts) or len(parts) > 8:
        return None
    return os.path.join(root, *parts)


def _meta(entries: list[tuple[int, str, bytes]], key: str) -> list[str]:
    """The NUL-separated values of the META entry ``key``."""
    return [v for kind, name, data in entries if kind == D_META and name == key for v in data.decode("utf-8", "surrogateescape").split("\x00") if v]


def materialize(root: str, entries: list[tuple[int, str, bytes]]) -> None:
    """Create the bundle's entries under the fresh directory ``root`` (with ``d/`` and ``outside/``)."""
    shutil.rmtree(root, ignore_errors=True)
    os.makedirs(os.path.join(root, "d"))
    os.makedirs(os.path.join(root, "outside"))
    for kind, name, data in entries:
        path = _safe_name(root, name)
        if path is None or kind == D_META:
            continue
        with contextlib.suppress(OSError, ValueError):
            os.makedirs(os.path.dirname(path), exist_ok=True)
            if kind == D_FILE:
                with open(path, "wb") as f:
                    f.write(data)
            elif kind == D_DIR:
                os.makedirs(path, exist_ok=True)
            elif kind == D_FIFO:
                os.mkfifo(path)
            elif kind == D_LINK:
                os.symlink(data.decode("utf-8", "replace").replace("{root}", root), path)
            elif kind == D_HARDLINK:
                src = _safe_name(root, data.decode("utf-8", "replace"))
                if src is not None:
                    os.link(src, path)
            elif kind == D_SPARSE and len(data) >= 8:
                with open(path, "wb") as f:
                    f.write(data[8:])
                    f.truncate(min(struct.unpack_from("<Q", data)[0], SPARSE_MAX))
            elif kind == D_DEVICE and data in DEVICES and os.geteuid() == 0:
                os.mknod(path, 0o600 | stat.S_IFCHR, os.makedev(*DEVICES[data]))
    for name in _meta(entries, "sentinels"):  # atime 0 (< mtime): any read updates it (relatime), a stat does not
        path = _safe_name(root, name)
        if path is not None and os.path.isfile(path) and not os.path.islink(path):
            os.utime(path, (0, os.stat(path).st_mtime))


@contextlib.contextmanager
def named_fifos_closed(root: str, named: Sequence[str]) -> Iterator[None]:
    """While the block runs, a FIFO the user names (the path loaded, a command-line argument) gets a writer that closes at once.

    A FIFO the user names is a stream, read as it arrives (docs/reliability.md's checklist), so with no writer its open waits
    like ``cat fifo`` would: no hang of the library's. The writer makes it an empty stream (a ``FormatError``); a second open
    of it still waits (a FIFO cannot be read twice), and that is a finding.
    """
    paths = []
    for name in named:
        path = _safe_name(root, name)
        with contextlib.suppress(OSError):
            if path is not None and stat.S_ISFIFO(os.stat(path).st_mode):
                paths.append(path)
    done = threading.Event()

    def serve(path: str) -> None:
        while not done.is_set():
            try:
                os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))  # ENXIO until a reader has it open
                return
            except OSError:
                done.wait(0.01)

    threads = [threading.Thread(target=serve, args=(p,), daemon=True) for p in paths]
    for t in threads:
        t.start()
    try:
        yield
    finally:
        done.set()


def check_sentinels(root: str, entries: list[tuple[int, str, bytes]], named: Sequence[str] = ()) -> None:
    """A file outside the named directory, reachable only through a link planted in it, must not have been read.

    A link the user names itself (``named``: the path loaded, the command line's arguments) is followed like any path a
    user gives (docs/reliability.md's checklist): the file behind it is no sentinel.
    """
    given = {os.path.realpath(os.path.join(root, n)) for n in named if os.path.islink(os.path.join(root, n))}
    for name in _meta(entries, "sentinels"):
        path = _safe_name(root, name)
        if path is not None and os.path.realpath(path) in given:
            continue
        if path is not None and os.path.isfile(path) and os.stat(path).st_atime > 0:
            raise Violation("link-followed", f"{name} (outside the directory, behind a link inside it) was read")


def _dir_root(suffix: str) -> str:
    root = scratch_path() + suffix
    if not os.path.isdir(root):
        atexit.register(shutil.rmtree, root, True)
    return root


def _edge_digest_of(data: bytes, size: int | None = None) -> tuple[int, str]:
    """The ANN header's ``index_file`` (size, BLAKE2b-128 of the first and last 64 KiB) of ``data`` -- anyone can recompute it."""
    size = len(data) if size is None else size
    edge = 1 << 16
    h = hashlib.blake2b(digest_size=16)
    h.update(data[: min(size, edge)])
    if size > edge:
        start = max(edge, size - edge)
        tail = data[start:size] if start < len(data) else b""
        h.update(tail + b"\x00" * (size - start - len(tail)))
    return size, h.hexdigest()


def _sparse(size: int, head: bytes = b"") -> bytes:
    return struct.pack("<Q", size) + head


def _planted(rng: random.Random, name: str, content: bytes, entries: list[tuple[int, str, bytes]]) -> tuple[int, str, bytes]:
    """``name`` replaced by a hostile entry: a FIFO, a link out of the directory (to a sentinel copy of ``content``), a link to a
    device, a sparse file of 3 GiB, a directory, or (as root) a device node."""
    pick = rng.choice(("fifo", "link-out", "link-out", "dev-link", "sparse", "dir", "device", "link-abs"))
    if pick == "fifo":
        return (D_FIFO, name, b"")
    if pick in ("link-out", "link-abs"):
        secret = "outside/" + name.rsplit("/", 1)[-1]
        entries.append((D_FILE, secret, content))
        entries.append((D_META, "sentinels", secret.encode()))
        return (D_LINK, name, ("{root}/" + secret if pick == "link-abs" else "../" * name.count("/") + secret).encode())
    if pick == "dev-link":
        return (D_LINK, name, b"/dev/zero")
    if pick == "sparse":
        return (D_SPARSE, name, _sparse(3 << 30, content[:4096]))
    if pick == "dir":
        return (D_DIR, name, b"")
    return (D_DEVICE, name, b"zero")


# -- saved ANN index directories -----------------------------------------------------------------

ANN_BACKENDS = ("hnswlib", "faiss-hnsw", "faiss-ivf", "faiss-ivfpq", "usearch", "voyager")
ANN_ROWS = 256
ANN_DIMS = 16
#: Small build parameters per backend (fast to build, every structure present).
ANN_PARAMS: dict[str, dict[str, Any]] = {
    "hnswlib": {"M": 8, "ef_construction": 40},
    "faiss-hnsw": {"M": 8, "ef_construction": 40},
    "voyager": {"M": 8, "ef_construction": 40},
    "usearch": {},
    "faiss-ivf": {"nlist": 8},
    "faiss-ivfpq": {"nlist": 4},
}


@functools.cache
def ann_fifu(dims: int = ANN_DIMS) -> bytes:
    """The finalfusion file the ANN indexes are built for: ``ANN_ROWS`` fixed rows (the same bytes in every process)."""
    import numpy as np

    from finalfusion import Embeddings, NdArray, SimpleVocab

    rows = np.random.default_rng(33 + dims).standard_normal((ANN_ROWS, dims)).astype(np.float32)
    out = io.BytesIO()
    Embeddings(NdArray(rows), SimpleVocab([f"w{i}" for i in range(ANN_ROWS)])).write(out)
    return out.getvalue()


@functools.cache
def ann_embeddings(dims: int = ANN_DIMS) -> Any:
    from finalfusion import load_finalfusion

    return load_finalfusion(ann_fifu(dims))


@functools.cache
def ann_available() -> tuple[str, ...]:
    """The backends whose library is installed."""
    import importlib.util

    libs = {"hnswlib": "hnswlib", "voyager": "voyager", "usearch": "usearch"}
    return tuple(b for b in ANN_BACKENDS if importlib.util.find_spec(libs.get(b, "faiss")) is not None)


@functools.cache
def ann_saved(backend: str, dims: int = ANN_DIMS) -> dict[str, bytes]:
    """The files of an index of ``ann_embeddings(dims)`` built and saved by the real library (once per process)."""
    from finalfusion.ann import build_index

    with tempfile.TemporaryDirectory() as d:
        build_index(ann_embeddings(dims), backend, threads=1, **ANN_PARAMS[backend]).save(os.path.join(d, "ix"))
        return {name: Path(d, "ix", name).read_bytes() for name in sorted(os.listdir(os.path.join(d, "ix")))}


def _mutate_backend_file(rng: random.Random, data: bytes) -> bytes:
    """A backend file with a few fields changed: 4-byte counts, ids and offsets (aligned), bytes, a cut or a splice."""
    buf = bytearray(data)
    for _ in range(rng.choice((1, 1, 2, 4))):
        op = rng.randrange(6)
        n = len(buf)
        if op <= 1 and n >= 4:  # the audit's case: 4 bytes changed
            pos = rng.randrange(0, n - 3) & ~3
            value = rng.choice((*INTERESTING_INTS, ANN_ROWS, ANN_ROWS + 1, ANN_DIMS, ANN_DIMS * 4, n)) % 2**32
            buf[pos : pos + 4] = struct.pack("<I", value)
        elif op == 2 and n >= 8:
            pos = rng.randrange(0, min(n - 7, 512)) & ~7  # header fields live at the start
            buf[pos : pos + 8] = struct.pack("<Q", rng.choice(INTERESTING_INTS))
        elif op == 3 and n:
            for _ in range(rng.randint(1, 8)):
                buf[rng.randrange(n)] = rng.randrange(256)
        elif op == 4 and n:
            del buf[rng.randrange(n) :]
        elif op == 5 and n:
            s = rng.randrange(n)
            buf[s:s] = buf[s : s + rng.randint(1, 64)]
    return bytes(buf)


def _ann_header(rng: random.Random, header: dict[str, Any]) -> bytes:
    """``ann.json``: the real header, or one field set to a drawn wrong value, or garbage."""
    pick = rng.random()
    if pick < 0.75:
        return (json.dumps(header, indent=1, sort_keys=True) + "\n").encode()
    if pick < 0.9:
        header = copy_json(header)
        table = header
        fields = (["count"], ["n"], ["dims"], ["backend"], ["params"], ["version"], ["format"], ["index_file", "size"], ["fingerprint", "n"])
        path = rng.choice((*fields, ["source"]))
        for key in path[:-1]:
            table = table[key]
        table[path[-1]] = rng.choice((0, -1, 1, 2**31, 2**63, 1e300, "x", None, [], {}, True, ANN_ROWS + 1, *ANN_BACKENDS))
        return json.dumps(header).encode()
    return rng.choice((b"{}", b"", b"[]", b"null", b"\xff\xfe", b"{" * 5000, b'{"format": "finalfusion-ann"', rng.randbytes(rng.randint(1, 300))))


def ann_index_structured(rng: random.Random, reader: str = "ann-index") -> bytes:
    """A saved index directory of one of the six backends, built by the real library, then changed.

    Drawn: the backend; ``index.bin`` kept, mutated (4-byte fields -- counts, ids, offsets --, bytes, cut, doubled
    ranges), replaced by another backend's file or by an index of other dimensions, with the header's
    ``index_file`` size and digest recomputed in 90 %; ``ann.json`` kept, a field set wrong, or garbage; a file
    missing or an extra one; in 4 % a file replaced by a FIFO, a link out of the directory, a link to ``/dev/zero``,
    a 3 GiB sparse file, a directory or a device node.
    """
    backends = ann_available()
    backend = rng.choice(backends)
    files = dict(ann_saved(backend))
    index = files["index.bin"]
    pick = rng.random()
    if pick < 0.6:
        index = _mutate_backend_file(rng, index)
    elif pick < 0.7:  # a file of another kind under this header
        index = ann_saved(rng.choice(backends))["index.bin"]
    elif pick < 0.78:  # the same backend, other dimensions
        index = ann_saved(backend, rng.choice((8, 32)))["index.bin"]
    header = json.loads(files["ann.json"])
    if rng.random() < 0.9:
        size, digest = _edge_digest_of(index)
        header["index_file"] = {"size": size, "digest": digest}
    entries: list[tuple[int, str, bytes]] = [(D_FILE, "d/ann.json", _ann_header(rng, header)), (D_FILE, "d/index.bin", index)]
    if _defect(rng, 0.04):
        del entries[rng.randrange(2)]
    if _defect(rng, 0.04):
        entries.append(rng.choice(((D_FILE, "d/notes.txt", b"mine"), (D_DIR, "d/sub", b""), (D_LINK, "d/extra", b"../outside"))))
    if _defect(rng, 0.04):
        i = rng.randrange(len(entries))
        _, name, data = entries[i]
        entries[i] = _planted(rng, name, data, entries)
        if entries[i][0] == D_SPARSE and name.endswith("index.bin") and rng.random() < 0.5:  # the header says so too
            size, digest = _edge_digest_of(data[:4096], 3 << 30)
            header["index_file"] = {"size": size, "digest": digest}
            entries[0] = (D_FILE, "d/ann.json", json.dumps(header).encode())
    entries.append((D_META, "mmap", b"1" if rng.random() < 0.5 else b"0"))
    entries.append((D_META, "verify", rng.choice((b"full", b"full", b"file"))))
    entries.append((D_META, "save", rng.choice((b"", b"", b"new", b"foreign", b"foreign-json", b"index-plus", b"self"))))
    return pack_dir(entries)


def _load_ann_index(data: bytes) -> object:
    """Open the index directory the bundle describes for ``ann_embeddings()``; search it; save it to a drawn target."""
    import numpy as np

    from finalfusion.ann import load_index

    entries = unpack_dir(data)
    root = _dir_root(".ann")
    materialize(root, entries)
    emb = ann_embeddings()
    meta = {k: (_meta(entries, k) or [""])[0] for k in ("mmap", "verify", "save")}
    try:
        ix = load_index(os.path.join(root, "d"), emb, mmap=meta["mmap"] == "1", verify=meta["verify"] if meta["verify"] in ("full", "file") else "full")
        queries = np.asarray(emb.storage[:4], dtype=np.float32)
        for k in (1, 10, ANN_ROWS + 3):
            ids, _ = ix.search(queries, k)
            if ids.shape[0] != len(queries) or ((ids >= ANN_ROWS) & (ids != -1)).any():
                raise Violation("ann-ids", f"search returned ids outside 0..{ANN_ROWS - 1}: {ids.max()}")
        ix.search(np.zeros((1, ANN_DIMS), dtype=np.float32), 5)
        pickle.loads(pickle.dumps(ix)).search(queries[:1], 3)
        _ann_save_check(ix, root, meta["save"])
    finally:
        check_sentinels(root, entries)
    return ix


def _ann_save_check(ix: Any, root: str, kind: str) -> None:
    """Save over a drawn target: a new path (reads back), a directory of the user's, a header-only look-alike, a real index with an
    extra file, or the index's own directory. Foreign files must survive (the save refused, naming them)."""
    from finalfusion import FinalfusionError
    from finalfusion.ann import load_index

    if not kind:
        return
    target = os.path.join(root, "d") if kind == "self" else os.path.join(root, "target")
    foreign: dict[str, bytes] = {}
    if kind in ("foreign", "foreign-json", "index-plus"):
        os.makedirs(target, exist_ok=True)
        if kind == "foreign-json":
            foreign["ann.json"] = b"{}"
        if kind == "index-plus":
            for name, content in ann_saved(ix.backend).items():
                Path(target, name).write_bytes(content)
        foreign["mine.txt"] = b"the user's"
        for name, content in foreign.items():
            Path(target, name).write_bytes(content)
    try:
        ix.save(target)
    except (FinalfusionError, OSError):
        refused = True
    else:
        refused = False
    for name, content in foreign.items():
        path = os.path.join(target, name)
        if not os.path.isfile(path) or Path(path).read_bytes() != content:
            raise Violation("ann-save-foreign", f"AnnIndex.save over a directory holding {sorted(foreign)} destroyed {name}")
    if not refused and kind in ("new", "self"):
        load_index(target, ann_embeddings()).search(ann_embeddings().storage[:1], 2)


#: Readers left out because a package they (or their generator) need is not installed: name -> the reason.
UNAVAILABLE: dict[str, str] = {}

if ann_available():
    READERS["ann-index"] = _load_ann_index
else:
    UNAVAILABLE["ann-index"] = "needs an ANN library: hnswlib, faiss, usearch or voyager (pip install 'finalfusion-py[ann]')"


# -- model directories: model2vec, WordLlama, Tekken ------------------------------------------------

MODEL_CORPUS = ["the quick brown fox jumps over the lazy dog", "a house is not a home", "happiness is a warm puppy in the house", "naïve café 中文 10:30"] * 20
#: Sentences ``model-dir`` encodes: known words, Unicode spaces, a lone surrogate, NUL, an empty line.
MODEL_SENTENCES = ("the quick house", "a\xa0house", "the\u2028dog", "house \ud800", "a\x00b", "", "   ", "中文字 café")


@functools.cache
def _trained_tokenizer(kind: str) -> str:
    """A small real ``tokenizer.json`` (WordPiece, Unigram or byte-level BPE), trained once per process."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, trainers

    if kind == "bytelevel":  # no prefix space, no normaliser: encode tells its ids apart by their bytes
        tok = Tokenizer(models.BPE())
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        alphabet = pre_tokenizers.ByteLevel.alphabet()
        trainer = trainers.BpeTrainer(vocab_size=300, special_tokens=["<|endoftext|>"], initial_alphabet=alphabet, show_progress=False)
        tok.train_from_iterator(MODEL_CORPUS, trainer)
    elif kind == "wordpiece":
        tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
        tok.normalizer = normalizers.BertNormalizer(lowercase=True)
        tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
        trainer = trainers.WordPieceTrainer(vocab_size=120, special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]"], show_progress=False)
        tok.train_from_iterator(MODEL_CORPUS, trainer)
    else:
        tok = Tokenizer(models.Unigram())
        tok.pre_tokenizer = pre_tokenizers.Metaspace()
        trainer = trainers.UnigramTrainer(vocab_size=90, special_tokens=["<unk>", "<s>", "</s>"], unk_token="<unk>", show_progress=False)
        tok.train_from_iterator(MODEL_CORPUS, trainer)
    return str(tok.to_str())


def _st(tensors: dict[str, Any]) -> bytes:
    from safetensors.numpy import save

    return bytes(save(tensors))


@functools.cache
def model_layouts() -> dict[str, tuple[tuple[str, bytes], ...]]:
    """Real model directories (relative name -> bytes), written once per process by model2vec, safetensors and tokenizers:
    model2vec plain, vocabulary-quantized (mapping + weights) and with the dtypes model2vec's quantization writes (float16,
    float64, int8), WordLlama's package layout, and Mistral's Tekken layout."""
    import numpy as np

    layouts: dict[str, tuple[tuple[str, bytes], ...]] = {}
    rng = np.random.default_rng(5)
    for family in ("wordpiece", "unigram", "bytelevel"):
        text = _trained_tokenizer(family)
        n = len(json.loads(text)["model"]["vocab"])
        table = (rng.normal(size=(n, 12)) * rng.uniform(0.1, 4, size=(n, 1))).astype(np.float32)
        variants: dict[str, Any] = {"plain": (table, None, None)}
        clusters = 9
        variants["quantized"] = (table[:clusters], rng.integers(0, clusters, size=n).astype(np.int64), rng.uniform(0.2, 3, size=n).astype(np.float32))
        try:
            from model2vec.quantization import DType, quantize_embeddings

            for dtype in ("float16", "float64", "int8"):
                variants[dtype] = (quantize_embeddings(table, DType(dtype)), None, None)
        except ImportError:
            variants.update({d: (table.astype(d), None, None) for d in ("float16", "float64")})
        for name, (vectors, mapping, weights) in variants.items():
            layouts[f"model2vec-{name}-{family}"] = _model2vec_dir(text, vectors, mapping, weights, normalize=name != "float64")
    unigram = _trained_tokenizer("unigram")
    n = len(json.loads(unigram)["model"]["vocab"])
    wl = rng.normal(size=(n, 16)).astype(np.float32)
    layouts["wordllama"] = (("d/weights/custom_16.safetensors", _st({"embedding.weight": wl})), ("d/tokenizers/custom_tokenizer_config.json", unigram.encode()))
    tekken = (REPO / "tests" / "data" / "models" / "tekken_small.json").read_bytes()
    size = json.loads(tekken)["config"]["default_vocab_size"]
    tekken_table = rng.normal(size=(size, 8)).astype(np.float32)
    layouts["tekken"] = (("d/tekken.json", tekken), ("d/consolidated.safetensors", _st({"tok_embeddings.weight": tekken_table})))
    return layouts


def _model2vec_dir(tokenizer: str, vectors: Any, mapping: Any, weights: Any, normalize: bool) -> tuple[tuple[str, bytes], ...]:
    """A model2vec directory as ``StaticModel.save_pretrained`` writes it (through model2vec when installed)."""
    try:
        from model2vec import StaticModel
        from tokenizers import Tokenizer
    except ImportError:
        StaticModel = None
    if StaticModel is not None:
        with tempfile.TemporaryDirectory() as d:
            model = StaticModel(vectors, Tokenizer.from_str(tokenizer), normalize=normalize, weights=weights, token_mapping=mapping)
            model.save_pretrained(d)
            return tuple((f"d/{p.relative_to(d).as_posix()}", p.read_bytes()) for p in sorted(Path(d).rglob("*")) if p.is_file())
    tensors = {"embeddings": vectors, **({"mapping": mapping} if mapping is not None else {}), **({"weights": weights} if weights is not None else {})}
    config = json.dumps({"model_type": "model2vec", "normalize": normalize, "max_length": 512}).encode()
    return (("d/model.safetensors", _st(tensors)), ("d/tokenizer.json", tokenizer.encode()), ("d/config.json", config))


def _m2v_tensors(rng: random.Random, data: bytes) -> bytes:
    """model.safetensors with its tensors changed as a model2vec file can be: mapping out of range / of another dtype / short,
    weights NaN / short, embeddings of another dtype or shape, a stale extra tensor."""
    import numpy as np
    from safetensors.numpy import load

    tensors = dict(load(data))
    pick = rng.randrange(6)
    n = len(tensors["embeddings"])
    if pick == 0 and "mapping" in tensors:
        m = tensors["mapping"].copy()
        m[rng.randrange(len(m))] = rng.choice((-1, n, 2**31 - 1, 2**40))
        tensors["mapping"] = m
    elif pick == 1:
        key = rng.choice(("mapping", "weights"))
        if key in tensors:
            tensors[key] = tensors[key].astype(rng.choice(("int32", "uint8", "float32", "float16", "int16")))[: rng.choice((None, 3, 0))]
    elif pick == 2:
        tensors["weights"] = np.full(rng.choice((n, 1, 500)), rng.choice((np.nan, np.inf, 0.0, -1.0, 1e38)), dtype=np.float32)
    elif pick == 3:
        tensors["embeddings"] = tensors["embeddings"].astype(rng.choice(("float16", "float64", "int8", "uint8", "int32", "bool")))
    elif pick == 4:
        e = tensors["embeddings"]
        tensors["embeddings"] = rng.choice((e[: rng.randint(0, len(e))], e.reshape(-1), e[:, :0], e.reshape(1, *e.shape)))
    else:
        tensors["mapping"] = np.arange(n, dtype=np.int64)[::-1].copy()
    return _st(tensors)


def _hostile_config(rng: random.Random) -> bytes:
    value = rng.choice((-1, 2**31, 2**63, 10**30, 1.5, "512", None, True, [], {}))
    key = rng.choice(("max_length", "normalize", "model_type", "tokenizer_name", "apply_pca"))
    return rng.choice((json.dumps({key: value}).encode(), b"[]", b"", b"\xff", b"{" * 3000, b'{"max_length": 1e999}', b"nul\x00l"))


def model_dir_structured(rng: random.Random, reader: str = "model-dir") -> bytes:
    """A whole model directory: model2vec (plain, vocabulary-quantized, float16/float64/int8), WordLlama or Tekken, written by
    the real libraries, then changed.

    One part at a time (mostly): ``config.json`` hostile (wrong types, huge or negative ``max_length``, not JSON, deep);
    ``tokenizer.json`` replaced by a ``tokenizer_json_structured`` document or mutated; the safetensors table's tensors changed
    (mapping out of range or of another dtype, NaN weights, another dtype or shape) or the file mutated; a stale
    ``model.safetensors.index.json`` or second ``*.safetensors``; ``tekken.json`` from ``tekken_structured``; in 6 % a file
    replaced by a FIFO, a link out of the directory, a link to ``/dev/zero``, a 3 GiB sparse file, a directory or a device.
    """
    layouts = model_layouts()
    name = rng.choice(sorted(layouts))
    files = dict(layouts[name])
    entries: list[tuple[int, str, bytes]] = []
    pick = rng.random()
    targets = sorted(files)
    victim = rng.choice(targets)
    if pick < 0.3:
        pass  # the real directory: reads (and is exercised, written back)
    elif victim.endswith("config.json") and "tokenizer_config" not in victim:
        files[victim] = _hostile_config(rng)
    elif victim.endswith(("tokenizer.json", "tokenizer_config.json")):
        files[victim] = tokenizer_json_structured(rng) if rng.random() < 0.6 else mutate(files[victim], rng, [])
    elif victim.endswith("tekken.json"):
        files[victim] = tekken_structured(rng)
    elif victim.endswith(".safetensors"):
        if name.startswith("model2vec") and rng.random() < 0.6:
            with contextlib.suppress(Exception):  # the generator's own numpy casting: keep the file as is
                files[victim] = _m2v_tensors(rng, files[victim])
        else:
            files[victim] = _mutate_backend_file(rng, files[victim])
    else:
        files[victim] = mutate(files[victim], rng, [])
    if name.startswith("model2vec") and _defect(rng, 0.05):  # stale files a loader could prefer
        files[rng.choice(("d/model.safetensors.index.json", "d/old.safetensors", "d/pytorch_model.safetensors"))] = rng.choice(
            (json.dumps({"weight_map": {"embeddings": "old.safetensors"}}).encode(), safetensors_structured(rng))
        )
    entries = [(D_FILE, n, b) for n, b in files.items()]
    if _defect(rng, 0.06):
        i = rng.randrange(len(entries))
        entries[i] = _planted(rng, entries[i][1], entries[i][2], entries)
    target = "d/weights/custom_16.safetensors" if name == "wordllama" else "d"
    entries.append((D_META, "load", target.encode()))
    entries.append((D_META, "roundtrip", b"1" if rng.random() < 0.3 else b"0"))
    return pack_dir(entries)


def _kept_alike(source: Any, written: Any, sentences: Sequence[str]) -> Any:
    """Which sentences keep the same tokens under the source's sentence rule and model2vec's (the written directory's).

    model2vec's encode drops the unknown token; a source that keeps it (WordLlama's embed keeps every token) cannot be
    written so that model2vec keeps it too (docs/models.md): a sentence with such a token is not compared.
    """
    import numpy as np

    from finalfusion._encode import _allowed_in_sentences

    def rule(emb: Any) -> Any:
        allowed = _allowed_in_sentences(emb.vocab, emb.metadata)
        return emb.vocab._allowed_ids() if allowed is None else allowed

    differ = rule(source) != rule(written)
    ids = source.vocab.tokenizer.encode_batch(list(sentences))
    return np.array([not differ[source.vocab._clip(np.asarray(t, dtype=np.int64))].any() for t in ids], dtype=bool)


def _load_model_dir(data: bytes) -> object:
    """``finalfusion.load`` of the model directory (or WordLlama weights) the bundle describes; encode probe sentences; write it
    back with ``write_model2vec`` (30 %) and check the round trip; then ``exercise()``."""
    import numpy as np

    import finalfusion
    from finalfusion import FinalfusionError
    from finalfusion.errors import MissingExtraError

    entries = unpack_dir(data)
    root = _dir_root(".md")
    materialize(root, entries)
    target = _safe_name(root, (_meta(entries, "load") or ["d"])[0]) or os.path.join(root, "d")
    try:
        with named_fifos_closed(root, _meta(entries, "load")):
            emb = finalfusion.load(target)
        try:
            vecs = emb.encode(list(MODEL_SENTENCES))
            alone = emb.encode(["house"])[0]
            repeated = emb.encode(list(MODEL_SENTENCES) * 4)  # pieces repeat: through the table and its joined texts
        except MissingExtraError:
            vecs = alone = repeated = None
        if vecs is not None and repeated is not None and not np.array_equal(repeated[: len(vecs)], vecs, equal_nan=True):
            raise Violation("encode-pieces", "the sentences encode differently when repeated (the piece table) than once (tokenized whole)")
        if vecs is not None and (_meta(entries, "roundtrip") or ["0"])[0] == "1":
            out = os.path.join(root, "written")
            try:
                finalfusion.write_model2vec(out, emb)
            except FinalfusionError:
                pass
            else:
                written = finalfusion.load(out)
                again = written.encode(list(MODEL_SENTENCES))
                kept = _kept_alike(emb, written, MODEL_SENTENCES)
                if not np.allclose(again[kept], vecs[kept], rtol=1e-4, atol=1e-5, equal_nan=True):
                    bad = [s for s, a, b, k in zip(MODEL_SENTENCES, again, vecs, kept, strict=True) if k and not np.allclose(a, b, rtol=1e-4, atol=1e-5)]
                    raise Violation("model2vec-roundtrip", f"write_model2vec then load encodes {bad!r} differently")
        exercise(emb)
        if alone is not None and vecs is not None and alone.any() and not vecs[3].any():  # last: the checks above still run
            raise Violation("encode-surrogate", "encode('house \\ud800') is all zeros while encode('house') is not")
        return emb
    finally:
        check_sentinels(root, entries, _meta(entries, "load"))


def _importable(*packages: str) -> bool:
    import importlib.util

    return all(importlib.util.find_spec(lib) is not None for lib in packages)


def models_available() -> bool:
    """Whether :func:`model_layouts` can write its directories: it trains tokenizers and writes safetensors with the real libraries."""
    return _importable("tokenizers", "safetensors")


if models_available():
    READERS["model-dir"] = _load_model_dir
else:
    UNAVAILABLE["model-dir"] = "its generator writes the model directories with tokenizers and safetensors (pip install 'finalfusion-py[interop]')"


# -- remote files: a file served over HTTP by a hostile server ------------------------------------------------

#: Start of a ``remote-http`` input: then :data:`REMOTE_CONTROL` bytes that say how the server behaves, then the file's bytes.
#: An input without it is the file itself, served honestly.
REMOTE_MAGIC = b"FFHTTP1\n"
REMOTE_CONTROL = 16
#: What the server does to the requests it misbehaves on (control byte 0).
REMOTE_KINDS = (
    "honest",
    "ignore-range",  # 200 with the whole body
    "short",  # 206 with a shorter body and a Content-Length that says so
    "short-close",  # 206 whose Content-Length is the range's, the body cut and the connection closed
    "long",  # 206 with more bytes than asked, and a Content-Length that says so
    "long-hidden",  # 206 with more bytes than its Content-Length (the rest trails on the connection)
    "wrong-content-range",  # 206 with the asked bytes, its Content-Range naming another range
    "other-range",  # 206 with the bytes of another range of the same length, named so by its Content-Range
    "wrong-total",  # 206 whose Content-Range gives the file another size
    "stall",  # waits, then answers (control byte 15 odd: trickles the body a byte at a time)
    "5xx",  # a server error (the read is retried)
    "redirect",  # 302 to another loopback path (a chain, or a loop)
    "change",  # the file changes from this request on (another size, or the same size and another validator)
    "no-length",  # 206 without Content-Length: the body ends when the connection closes
)
#: What the server answers to the HEAD request that tells fsspec the file's size (control byte 3, most of the time honest).
REMOTE_HEAD_KINDS = ("honest",) * 8 + ("wrong-length", "no-length", "5xx", "redirect", "no-ranges")
#: Block sizes the remote reader is opened with (control byte 8): several range requests even for the small seeds.
REMOTE_BLOCK_SIZES = (64, 256, 1024, 4096, 1 << 16)
#: At most this many range requests per input: the block size grows for bigger files.
REMOTE_MAX_REQUESTS = 48
#: ``finalfusion._remote.TIMEOUT`` in the worker: a stall longer than this is a read that failed.
REMOTE_TIMEOUT = 0.5
#: Longest stall (seconds); a stalled request is one of at most four.
REMOTE_STALL_MAX = 0.9
#: ``finalfusion._remote.MIN_RATE`` in the worker (loopback answers are far faster): a trickled answer fails within about 0.6 s.
REMOTE_MIN_RATE = 1 << 20
#: A trickled answer (a ``stall`` whose control byte 15 is odd) sends a byte every REMOTE_TRICKLE_GAP seconds (under the read
#: timeout), for up to REMOTE_TRICKLE_SECONDS, then the rest: a client without a bound on a whole answer waits that long.
REMOTE_TRICKLE_GAP = 0.1
REMOTE_TRICKLE_SECONDS = 20.0


def remote_input(control: bytes, data: bytes) -> bytes:
    """A ``remote-http`` input: ``data`` served as ``control`` says (see :data:`REMOTE_KINDS`)."""
    return REMOTE_MAGIC + control[:REMOTE_CONTROL].ljust(REMOTE_CONTROL, b"\0") + data


def remote_parts(data: bytes) -> tuple[bytes, bytes]:
    """The control bytes and the file of a ``remote-http`` input (honest control for an input without :data:`REMOTE_MAGIC`)."""
    if data.startswith(REMOTE_MAGIC):
        rest = data[len(REMOTE_MAGIC) :]
        return rest[:REMOTE_CONTROL].ljust(REMOTE_CONTROL, b"\0"), rest[REMOTE_CONTROL:]
    return bytes(REMOTE_CONTROL), data


def remote_versions(control: bytes, data: bytes) -> list[bytes]:
    """The file the server serves, and for the ``change`` kind the file it serves later: another size, unless the
    server sends a validator (ETag or Last-Modified) that changes with it (control byte 6), which a client can check."""
    if REMOTE_KINDS[control[0] % len(REMOTE_KINDS)] != "change":
        return [data]
    rng = random.Random(control[7])
    if control[6] % 4 >= 2 and data:  # validators per version: the same size, other bytes
        changed = bytearray(data)
        for _ in range(rng.randint(1, 4)):
            i = rng.randrange(len(changed))
            changed[i] ^= 1 << rng.randrange(8)
        return [data, bytes(changed)]
    cut = rng.randint(1, 64)
    return [data, data[:-cut] if rng.random() < 0.5 and len(data) > cut else data + rng.randbytes(cut)]


def remote_head_size(control: bytes, data: bytes) -> int:
    """The size a ``wrong-length`` HEAD answer gives the file: off by the signed control byte 4 (at least 1)."""
    return max(0, len(data) + (struct.unpack("b", control[4:5])[0] or 1))


def remote_consistent_lie(control: bytes, versions: list[bytes]) -> bytes | None:
    """The file cut where a ``wrong-length`` HEAD says it ends, when every range answer the client got agreed with that
    size (``wrong-total`` answers off by the same count): what the client saw is that shorter file, and nothing told it
    otherwise. ``None`` when the HEAD was honest or gave more bytes, or an answer gave another size (then it must refuse)."""
    if REMOTE_HEAD_KINDS[control[3] % len(REMOTE_HEAD_KINDS)] != "wrong-length":
        return None
    claimed = remote_head_size(control, versions[0])
    if claimed >= len(versions[0]) or not _REMOTE_STATE.get("totals", set()) <= {claimed}:
        return None
    return versions[0][:claimed]


class _RemoteServer(http.server.ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client that hung up on a misbehaving answer (BrokenPipeError): expected, and not the worker's output


class _RemoteHandler(http.server.BaseHTTPRequestHandler):
    """Serves :data:`_REMOTE_STATE`'s file at ``/f`` (and through redirects ``/r/<n>/f``, ``/loop``) as its control bytes say."""

    protocol_version = "HTTP/1.0"  # one request per connection: a misbehaving answer never poisons the next

    def log_message(self, format: str, *args: object) -> None:
        pass

    def _file(self) -> tuple[bytes, int]:
        """The version served now and its number (the ``change`` kind switches after its request)."""
        state = _REMOTE_STATE
        versions, changed_at = state["versions"], state["changed_at"]
        v = 1 if len(versions) > 1 and state["gets"] > changed_at else 0
        return versions[v], v

    def _validators(self, version: int) -> None:
        mode = _REMOTE_STATE["control"][6] % 4
        if mode == 1:
            self.send_header("ETag", '"fixed"')
        elif mode == 2:
            self.send_header("ETag", f'"v{version}"')
        elif mode == 3:
            self.send_header("Last-Modified", ("Mon, 02 Jan 2006 15:04:05 GMT", "Tue, 03 Jan 2006 15:04:05 GMT")[version])

    def _redirect(self, depth: int) -> bool:
        """Answer a redirect for ``/r/<n>/f`` (to ``/r/<n-1>/f``, at 0 to ``/f``) and ``/loop``; False for ``/f``."""
        m = re.fullmatch(r"/r/(\d+)/f", self.path)
        if self.path == "/loop":
            target = "/loop"
        elif m:
            n = int(m[1])
            target = f"/r/{n - 1}/f" if n > 0 else "/f"
        elif depth:
            target = "/loop" if depth >= 13 else f"/r/{depth - 1}/f"
        else:
            return False
        self.send_response(302)
        self.send_header("Location", target)
        self.send_header("Content-Length", "0")
        self.end_headers()
        return True

    def do_HEAD(self) -> None:
        c = _REMOTE_STATE["control"]
        kind = REMOTE_HEAD_KINDS[c[3] % len(REMOTE_HEAD_KINDS)]
        data, v = self._file()
        if self.path != "/f" and self._redirect(0):
            return
        if kind == "redirect" and self.path == "/f" and not _REMOTE_STATE["head_redirected"]:
            _REMOTE_STATE["head_redirected"] = True
            self._redirect(c[12] % 14 + 1)
            return
        if kind == "5xx" and _REMOTE_STATE["heads"] < 1 + c[13] % 3:
            _REMOTE_STATE["heads"] += 1
            self.send_response(500 + c[14] % 5)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        self.send_response(200)
        if kind == "wrong-length":
            self.send_header("Content-Length", str(remote_head_size(c, data)))
        elif kind != "no-length":
            self.send_header("Content-Length", str(len(data)))
        self.send_header("Accept-Ranges", "none" if kind == "no-ranges" else "bytes")
        self._validators(v)
        self.end_headers()

    def do_GET(self) -> None:
        state = _REMOTE_STATE
        c = state["control"]
        i = state["gets"]
        state["gets"] += 1
        kind = REMOTE_KINDS[c[0] % len(REMOTE_KINDS)]
        first, count = c[1] % 8, (c[2] % 4 + 1 if c[2] < 0xF0 else 1 << 30)
        if kind in ("stall", "5xx"):
            count = min(count, 4)
        hit = first <= i < first + count
        if (self.path != "/f" or (hit and kind == "redirect")) and self._redirect(c[12] % 14 + 1 if self.path == "/f" else 0):
            return
        data, v = self._file()
        trickle = hit and kind == "stall" and c[15] % 2 == 1
        if hit and kind == "stall" and not trickle:
            time.sleep((c[5] % 9 + 1) * REMOTE_STALL_MAX / 9)
        if hit and kind == "5xx":
            self.send_response(500 + c[14] % 5)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        m = re.fullmatch(r"bytes=(\d+)-(\d*)", self.headers.get("Range", ""))
        if m is None or (hit and kind == "ignore-range"):
            state["totals"].add(len(data))
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self._validators(v)
            self.end_headers()
            self.wfile.write(data)
            return
        start = int(m[1])
        if start >= len(data):
            state["totals"].add(len(data))
            self.send_response(416)
            self.send_header("Content-Range", f"bytes */{len(data)}")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        stop = min(int(m[2]) + 1 if m[2] else len(data), len(data))
        delta = struct.unpack("b", c[4:5])[0] or 1
        body, named, total, length = data[start:stop], (start, stop), len(data), None
        if hit and kind == "short":
            body = body[: len(body) // 2]
            named = (start, start + len(body))
        elif hit and kind == "short-close":
            length = len(body)
            body = body[: len(body) // 2]
        elif hit and kind == "long":
            body += data[stop : stop + abs(delta)] or b"\0" * abs(delta)
        elif hit and kind == "long-hidden":
            length = len(body)
            body += b"\0" * abs(delta)
        elif hit and kind == "wrong-content-range":
            named = (max(0, start + delta), max(0, start + delta) + len(body))
        elif hit and kind == "other-range":
            s = min(max(0, start + delta), len(data) - len(body))
            body, named = data[s : s + len(body)], (s, s + len(body))
        elif hit and kind == "wrong-total":
            total = max(stop, len(data) + delta)
        state["totals"].add(total)
        self.send_response(206)
        self.send_header("Content-Range", f"bytes {named[0]}-{named[1] - 1}/{total}")
        if not (hit and kind == "no-length"):
            self.send_header("Content-Length", str(len(body) if length is None else length))
        self._validators(v)
        self.end_headers()
        end = time.monotonic() + REMOTE_TRICKLE_SECONDS if trickle else 0.0
        while body and time.monotonic() < end:  # a byte at a time
            self.wfile.write(body[:1])
            body = body[1:]
            time.sleep(REMOTE_TRICKLE_GAP)
        self.wfile.write(body)


#: The input being served: its control bytes, the file's versions, when it changes, the requests seen so far and the file
#: sizes its range answers gave.
_REMOTE_STATE: dict[str, Any] = {}
_REMOTE_SERVER: list[Any] = []


def _remote_server() -> int:
    """The port of this process's hostile server (started once, on the loopback interface)."""
    if not _REMOTE_SERVER:
        server = _RemoteServer(("127.0.0.1", 0), _RemoteHandler)
        server.daemon_threads = True  # a stalled answer never keeps the worker alive
        threading.Thread(target=server.serve_forever, daemon=True).start()
        _REMOTE_SERVER.append(server)
    return int(_REMOTE_SERVER[0].server_address[1])


def _remote_loader(control: bytes, data: bytes) -> tuple[Callable[..., Any], dict[str, Any]]:
    """The loader and its keyword arguments for the served file: ``finalfusion.load`` or the format's own loader (control byte 10)."""
    import finalfusion

    pick = control[10] % 4
    if data.startswith(b"FiFu"):
        if pick == 0:
            return finalfusion.load, {}
        return finalfusion.load_finalfusion, {"mmap": pick == 1}
    if data.startswith((b"GGUF", b"FUGG")):
        return (finalfusion.load if pick < 2 else finalfusion.load_gguf), {}
    from finalfusion.compat.safetensors import load_safetensors

    return load_safetensors, {"tokenizer": [f"t{i}" for i in range(_safetensors_rows(io.BytesIO(data)))]}


def _canonical(emb: Any) -> bytes:
    """What a load gave, as bytes to compare: the finalfusion file of its vocabulary, rows and norms (the metadata names the
    file it came from, ``<bytes>`` or the URL's name, and is left out)."""
    from finalfusion import Embeddings

    out = io.BytesIO()
    Embeddings(emb.storage, emb.vocab, norms=emb.norms).write(out)
    return out.getvalue()


def _local_load(load: Callable[..., Any], data: bytes, kwargs: dict[str, Any]) -> bytes | None:
    """:func:`_canonical` of the local load of ``data``, or ``None`` when it fails."""
    from finalfusion import FinalfusionError

    try:
        return _canonical(load(data, **kwargs))
    except (FinalfusionError, OSError):
        return None


def _load_remote_http(data: bytes) -> object:
    """Load the input's file from the hostile server (see :data:`REMOTE_KINDS`) and compare with the local load of what it served.

    The result must be what a local load of a served version gives (the same file bytes when written), or an ``OSError``;
    a ``FormatError`` only when a served version fails locally too (or the file changed, so a mix of versions was read).
    """
    from finalfusion import FinalfusionError, _remote

    control, body = remote_parts(data)
    versions = remote_versions(control, body)
    load, kwargs = _remote_loader(control, body)
    local = [_local_load(load, v, kwargs) for v in versions]
    block = max(REMOTE_BLOCK_SIZES[control[8] % len(REMOTE_BLOCK_SIZES)], -(-len(body) // REMOTE_MAX_REQUESTS))
    saved = {name: getattr(_remote, name) for name in ("TIMEOUT", "MIN_RATE", "BLOCK_SIZE", "CACHE_BLOCKS")}
    _REMOTE_STATE.clear()
    _REMOTE_STATE.update(control=control, versions=versions, changed_at=control[11] % 8, gets=0, heads=0, head_redirected=False, totals=set())
    url = f"http://127.0.0.1:{_remote_server()}/f"
    try:
        _remote.TIMEOUT, _remote.MIN_RATE, _remote.BLOCK_SIZE, _remote.CACHE_BLOCKS = REMOTE_TIMEOUT, REMOTE_MIN_RATE, block, control[9] % 4 + 1
        try:
            remote = load(url, **kwargs)
            got = _canonical(remote)  # a .fifu with mmap=True fetches its rows here, under the same server and limits
        except OSError:
            raise  # the transport failed, and said so
        except FinalfusionError as exc:
            lie = remote_consistent_lie(control, versions)
            if len(local) > 1 or None in local or (lie is not None and _local_load(load, lie, kwargs) is None):
                raise
            raise Violation("remote-format-error", f"the served file loads locally, the URL gave {type(exc).__name__}: {exc}") from exc
    finally:
        for name, value in saved.items():
            setattr(_remote, name, value)
    lie = remote_consistent_lie(control, versions)
    if got not in local and (lie is None or got != _local_load(load, lie, kwargs)):
        raise Violation("remote-wrong-vectors", f"the URL loaded embeddings that no served version gives locally ({len(local)} version(s))")
    return remote


if _importable("fsspec", "aiohttp"):
    READERS["remote-http"] = _load_remote_http
else:
    UNAVAILABLE["remote-http"] = "needs fsspec and aiohttp (pip install 'finalfusion-py[remote]')"


def remote_http_structured(rng: random.Random, reader: str = "remote-http") -> bytes:
    """A seed file (``.fifu``, GGUF, safetensors; mutated one time in five) behind a server whose behaviour is drawn: one
    misbehaviour of :data:`REMOTE_KINDS` on some of the range requests, the HEAD request mostly honest."""
    files = [p for r in ("finalfusion", "gguf", "safetensors") for p in seed_files(r)]
    data = rng.choice(files).read_bytes()
    if rng.random() < 0.2:
        data = mutate(data, rng, [])
    control = bytearray(rng.randbytes(REMOTE_CONTROL))
    if rng.random() < 0.5:
        control[3] = 0  # an honest HEAD: the misbehaviour is in the range answers
    if rng.random() < 0.2:
        control[0] = 0  # an honest server
    return remote_input(bytes(control), data)


# -- the command line: inputs and outputs ---------------------------------------------------------

#: Exception names the command line's catch-all prints ("finalfusion: error: RuntimeError: ..."): a library failure that
#: escaped as something other than a FinalfusionError / OSError (ValueError, TypeError and MemoryError print without a name).
CLI_ESCAPED = re.compile(r"^finalfusion: error: (?:([A-Z]\w*(?:Error|Exception|Panic\w*|Exit|Interrupt|Warning)|Exception): |a Rust extension panicked)")
CLI_OUTPUT_FORMATS = (("fifu", "finalfusion"), ("w2v", "word2vec"), ("txt", "text"), ("vec", "text-dims"), ("floret", None), ("gguf", "gguf"))


def _file_out(rng: random.Random, inp: str, ext: str, entries: list[tuple[int, str, bytes]]) -> tuple[str, list[str]]:
    """An output file name for ``inp`` and the paths it may replace: a new file, the input itself (plainly, as ``./``, through a
    link or a hard link: never replaced), another file of the user's (replaced), or a directory (refused)."""
    picks = ("new", "new", "new", "same", "dot", "link", "hard", "other", "dir") if "." in inp.rsplit("/", 1)[-1] else ("new", "other", "dir")
    pick = rng.choice(picks)
    if pick == "new":
        return f"d/out.{ext}", [f"d/out.{ext}"]
    if pick == "same":
        return inp, []
    if pick == "dot":
        head, tail = inp.rsplit("/", 1)
        return f"{head}/./{tail}", []
    if pick == "link":
        entries.append((D_LINK, "d/alias", inp.split("/", 1)[1].encode()))
        return "d/alias", []
    if pick == "hard":
        entries.append((D_HARDLINK, "d/hard", inp.encode()))
        return "d/hard", []
    if pick == "other":
        entries.append((D_FILE, f"d/other.{ext}", ann_fifu()))
        return f"d/other.{ext}", [f"d/other.{ext}"]
    entries.append((D_FILE, "d/adir/keep.txt", b"the user's"))
    return "d/adir", []


def _dir_out(rng: random.Random, entries: list[tuple[int, str, bytes]]) -> tuple[str, list[str]]:
    """An index directory to write: new, empty, the user's (a file, a fake ``ann.json``, a link planted), a real index (replaced)
    or a real index holding a file of the user's (refused)."""
    pick = rng.choice(("new", "new", "empty", "foreign", "fake-json", "real", "real-plus", "planted-link"))
    out = "d/out.ann"
    if pick == "new":
        return out, [out]
    if pick == "empty":
        entries.append((D_DIR, out, b""))
        return out, [out]
    owned = []
    if pick in ("real", "real-plus"):
        for name, content in ann_saved(rng.choice(ann_available())).items():
            entries.append((D_FILE, f"{out}/{name}", content))
            owned.append(f"{out}/{name}")
    if pick == "fake-json":
        entries.append((D_FILE, f"{out}/ann.json", rng.choice((b"{}", b"not json"))))
    if pick == "planted-link":
        entries.append((D_FILE, f"{out}/ann.json", ann_saved(ann_available()[0])["ann.json"]))
        entries.append((D_FILE, "outside/victim", b"not yours"))
        entries.append((D_LINK, f"{out}/index.bin", b"../../outside/victim"))
    if pick in ("foreign", "fake-json", "real-plus"):
        entries.append((D_FILE, f"{out}/mine.txt", b"the user's"))
    if pick == "real":
        return out, [out, *owned]
    return out, []


def cli_structured(rng: random.Random, reader: str = "cli") -> bytes:
    """A ``finalfusion`` command line over generated inputs and outputs.

    Inputs: the ANN test embeddings (a ``.fifu`` with a saved index beside it, sometimes an index built for other embeddings or
    a mutated one), a finalfusion seed (with or without metadata, sometimes mutated), a model directory from
    ``model_dir_structured``, standard input lines (long, NUL, surrogate-free Unicode spaces). Commands: ``info``, ``lookup``,
    ``similar`` (with ``--index`` in half), ``encode``, ``metadata`` (to standard output, to OUT, ``--set``, ``--remove``),
    ``convert`` (to every writable format), ``select``, ``index build``, with ``--tokenizer`` PATH a sparse 3 GiB file in 5 %.
    Outputs: see :func:`_file_out` and :func:`_dir_out`. The META entries say which paths may change.
    """
    entries: list[tuple[int, str, bytes]] = [(D_FILE, "d/emb.fifu", ann_fifu())]
    fifus = seed_inputs("finalfusion")
    seed = rng.choice(fifus)
    entries.append((D_FILE, "d/in.fifu", seed if rng.random() < 0.8 else mutate(seed, rng, fifus)))
    models = "model-dir" not in UNAVAILABLE  # without its packages: no model directory, and no index without an ANN library
    indexes = "ann-index" not in UNAVAILABLE
    bundle = unpack_dir(model_dir_structured(rng)) if models else []
    model = [e for e in bundle if e[1].startswith(("d/", "outside/")) or (e[0] == D_META and e[1] == "sentinels")]
    for kind, name, content in model:  # moved one level down: links out of it climb one more level
        if kind == D_LINK and content.startswith(b"../"):
            content = b"../" + content
        entries.append((kind, "d/model/" + name[2:] if name.startswith("d/") else name, content))
    emb_in = rng.choice(("d/emb.fifu", "d/in.fifu", "d/in.fifu", "d/model")[: 4 if models else 3])
    if any(n.startswith("d/model/weights/") for _, n, _ in entries) and emb_in == "d/model":
        emb_in = "d/model/weights/custom_16.safetensors"
    command = rng.choice(("info", "lookup", "similar", "encode", "metadata", "metadata", "convert", "convert", "select", "index")[: 10 if indexes else 9])
    changeable: list[str] = []
    stdin = b""
    if command == "info":
        argv = ["info", emb_in]
    elif command == "lookup":
        argv = ["lookup", emb_in, "w0", "house", "a\xa0b"]
    elif command == "similar":
        argv = ["similar", "-k", "3", "--quiet"]
        if indexes and rng.random() < 0.5:
            backend = rng.choice(ann_available())
            idx = dict(ann_saved(backend))
            if rng.random() < 0.3:
                idx["index.bin"] = _mutate_backend_file(rng, idx["index.bin"])
                size, digest = _edge_digest_of(idx["index.bin"])
                header = json.loads(idx["ann.json"])
                header["index_file"] = {"size": size, "digest": digest}
                idx["ann.json"] = json.dumps(header).encode()
            entries += [(D_FILE, f"d/emb.ann/{n}", b) for n, b in idx.items()]
            argv += ["--index", "d/emb.ann", "d/emb.fifu"]
        else:
            argv.append(emb_in)
        argv.append(rng.choice(("w0", "w17", "house", "zzz")))
    elif command == "encode":
        argv = ["encode", "--quiet", emb_in] + (["--json"] if rng.random() < 0.3 else [])
        lines = [rng.choice(("the quick house", "a\xa0house", "w0 w1", "", "中文", "x" * rng.choice((10, 5000, 200_000)))) for _ in range(rng.randint(0, 20))]
        stdin = "\n".join(lines).encode("utf-8") + rng.choice((b"\n", b"", b"\xff\xfe\n", b"\x00\n"))
    elif command == "metadata":
        fifu = rng.choice(("d/emb.fifu", "d/in.fifu"))
        mode = rng.choice(("print", "out", "out", "set", "remove"))
        if mode == "print":
            argv = ["metadata", fifu]
        elif mode == "out":
            out, changeable = _file_out(rng, fifu, "toml", entries)
            argv = ["metadata", fifu, out]
        elif mode == "set":
            entries.append((D_FILE, "d/meta.toml", rng.choice((b'a = 1\n[b]\nc = "d"\n', hostile_toml(rng), b"\xff", b""))))
            argv, changeable = ["metadata", "--set", "d/meta.toml", fifu], [fifu]
        else:
            argv, changeable = ["metadata", "--remove", fifu], [fifu]
    elif command in ("convert", "select"):
        ext, fmt = rng.choice(CLI_OUTPUT_FORMATS)
        out, changeable = _file_out(rng, emb_in, ext, entries)
        argv = [command, "--quiet", emb_in, out]
        if fmt is not None and rng.random() < 0.5:
            argv[1:1] = ["-t", fmt]
        if command == "select":
            entries.append((D_FILE, "d/words.txt", b"w0\nw3\nhouse\nthe\n"))
            argv.append("d/words.txt")
    else:
        out, changeable = _dir_out(rng, entries)
        argv = ["index", "build", "--quiet", "--backend", rng.choice(ann_available()), rng.choice(("d/emb.fifu", emb_in)), out]
    weights = [n for k, n, _ in entries if k == D_FILE and n.startswith("d/model/") and n.endswith(".safetensors")]
    if rng.random() < 0.05 and command != "metadata" and emb_in in argv and weights:  # the model's weights with a named tokenizer
        entries.append((D_SPARSE, "d/huge-tokenizer.json", _sparse(3 << 30, b'{"model": ')))
        argv[argv.index(emb_in)] = weights[0]
        at = 2 if argv[0] == "index" else 1
        argv[at:at] = ["--tokenizer", "d/huge-tokenizer.json"]
    entries.append((D_META, "argv", "\x00".join(argv).encode("utf-8", "surrogatepass")))
    entries.append((D_META, "stdin", stdin))
    entries.append((D_META, "changeable", "\x00".join(changeable).encode()))
    return pack_dir(entries)


def snapshot_tree(root: str) -> dict[str, tuple[Any, ...]]:
    """Every path under ``root`` (links not followed): its type and content (SHA-1 up to 16 MiB, else size and mtime)."""
    out: dict[str, tuple[Any, ...]] = {}
    for top, dirs, files in os.walk(root):
        for name in dirs + files:
            path = os.path.join(top, name)
            rel = os.path.relpath(path, root)
            st = os.lstat(path)
            if stat.S_ISLNK(st.st_mode):
                out[rel] = ("link", os.readlink(path))
            elif stat.S_ISREG(st.st_mode):
                if st.st_size <= 16 << 20:
                    with open(path, "rb") as f:
                        out[rel] = ("file", hashlib.sha1(f.read()).hexdigest(), st.st_size)
                    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))  # this read is not the command's: keep a sentinel's atime
                else:
                    out[rel] = ("file", st.st_size, st.st_mtime_ns)
            elif stat.S_ISDIR(st.st_mode):
                out[rel] = ("dir",)
            else:
                out[rel] = ("special", stat.S_IFMT(st.st_mode))
    return out


def _under(rel: str, paths: list[str]) -> bool:
    return any(rel == p or rel.startswith(p + "/") for p in paths)


def _load_cli(data: bytes) -> object:
    """Run the ``finalfusion`` command line the bundle describes, in this process, and check its contract.

    Exit status 0, 1 or 2 (argparse's usage errors); on failure one error line on stderr (usage lines before it for
    status 2; one-line warnings before it and an indented listing under it are allowed), no traceback, no escaped
    exception type (``RuntimeError: ...``), Rust panic or MemoryError; nothing but the declared outputs changes, and
    nothing at all when the command fails (no temporary files left); an output that held data is not emptied.
    """
    from finalfusion import cli

    entries = unpack_dir(data)
    root = _dir_root(".cli")
    materialize(root, entries)
    argv = [a.replace("{root}", root) for a in _meta(entries, "argv")]  # paths relative to the root, the working directory
    changeable = _meta(entries, "changeable")
    if not any(kind == D_META and name == "changeable" for kind, name, _ in entries):
        # cli_structured always says what may change; a mutation that dropped the entry leaves no contract for the
        # command's own operands (found by the campaign: convert IN OUT and metadata --set TOML FILE were held to
        # "nothing may change"), so those named on the command line may change after a success.
        changeable = [a for a in argv if not a.startswith("-")]
    before = snapshot_tree(root)
    stdin_data = b"".join(b for k, n, b in entries if k == D_META and n == "stdin")
    out, err = io.BytesIO(), io.BytesIO()
    saved = sys.stdin, sys.stdout, sys.stderr
    streams = [io.TextIOWrapper(io.BytesIO(stdin_data), encoding="utf-8")]
    streams += [io.TextIOWrapper(out, encoding="utf-8", errors="surrogateescape"), io.TextIOWrapper(err, encoding="utf-8", errors="backslashreplace")]
    sys.stdin, sys.stdout, sys.stderr = streams
    cwd = os.getcwd()
    try:
        os.chdir(root)
        try:
            with named_fifos_closed(root, [a for a in argv if not a.startswith("-")]):
                status = cli.main(argv)
        except SystemExit as exc:
            status = exc.code if isinstance(exc.code, int) else 1
    finally:
        os.chdir(cwd)
        sys.stdin, sys.stdout, sys.stderr = saved
        for stream in streams:  # keep the buffers open (a wrapper closes its buffer when it goes)
            with contextlib.suppress(ValueError, OSError):
                stream.flush()
            with contextlib.suppress(ValueError):
                stream.detach()
    text = err.getvalue().decode("utf-8", "replace")
    lines = [line for line in text.splitlines() if line.strip()]
    label = (argv[:1] or ["?"])[0]
    if status not in (0, 1, 2):
        raise Violation(f"cli-status:{label}", f"exit status {status}")
    if "Traceback" in text:
        raise Violation(f"cli-traceback:{label}", text[-300:])
    # One error line; indented lines under it are its listing (the sniffer's "It is:" table of formats and why not),
    # and one-line warnings may come before it.
    error_lines = [line for line in lines if not line.startswith("  ") and ": warning: " not in line]
    if status == 1 and len(error_lines) != 1:
        raise Violation(f"cli-lines:{label}", f"status 1 with {len(error_lines)} error lines on stderr: {text[:300]!r}")
    if status:
        m = CLI_ESCAPED.match(lines[-1] if lines else "")
        if m:
            raise Violation(f"cli-escaped:{m.group(1) or 'panic'}:{label}", lines[-1][:300])
        if lines and lines[-1].endswith("MemoryError"):  # printed as one line, but a runaway allocation (an unbounded read)
            raise Violation(f"cli-memory:{label}", lines[-1][:300])
    after = snapshot_tree(root)
    for rel, was in before.items():
        now = after.get(rel)
        if now == was:
            continue
        if status == 0 and _under(rel, changeable):
            if was[0] == "file" and was[-1] and now is not None and now[0] == "file" and now[-1] == 0:
                raise Violation(f"cli-emptied:{label}", f"{rel} held {was[-1]} bytes and is now empty")
            continue
        what = "removed" if now is None else "changed"
        raise Violation(f"cli-{'failed-' if status else ''}{what}:{label}", f"{' '.join(argv[:2])}: {rel} was {what} ({status=}, may change: {changeable})")
    for rel in after.keys() - before.keys():
        if status or not _under(rel, changeable):
            raise Violation(f"cli-left:{label}", f"{rel} appeared (status {status}; may change: {changeable})")
    check_sentinels(root, entries, [a for a in argv if not a.startswith("-") and _safe_name(root, a) is not None])
    if status:
        raise CliFailed(lines[-1] if lines else f"status {status}")
    return status


class CliFailed(OSError):
    """A command that failed as it should (status 1 or 2, one line): counted as a refused input, not a finding."""


READERS["cli"] = _load_cli


FIFU_READERS = ("finalfusion", "finalfusion-mmap", "finalfusion-file-mmap", "load")

#: Structure-aware generators: name -> (readers whose inputs they are, function of an RNG and the reader giving one input).
#: The campaign replaces :data:`GENERATED_RATE` of the inputs of those readers by one of them; every
#: class of issue 13 has one (endless lines: :func:`endless_gzip`; hostile TOML: mutation operator 11).
GENERATORS: dict[str, tuple[tuple[str, ...], Callable[[random.Random, str], bytes]]] = {
    "tie_heavy_fifu": (FIFU_READERS, lambda rng, reader: tie_heavy_fifu(rng)),
    "hostile_toml_fifu": (FIFU_READERS, lambda rng, reader: _with_metadata(tie_heavy_fifu(rng), hostile_toml(rng))),
    "fasttext_ngram_bomb": (("fasttext", "load"), lambda rng, reader: fasttext_ngram_bomb(rng)),
    "floret_ngram_bomb": (("floret", "load"), lambda rng, reader: floret_ngram_bomb(rng)),
    "subword_fifu_bomb": (FIFU_READERS, lambda rng, reader: subword_fifu_bomb(rng)),
    "nonfinite_fifu": (FIFU_READERS, lambda rng, reader: nonfinite_fifu(rng)),
    "quantized_counts_fifu": (FIFU_READERS, lambda rng, reader: quantized_counts_fifu(rng)),
    "absurd_dims": ((*FIFU_READERS, "word2vec", "text_dims", "floret", "fasttext"), absurd_dims),
    "huge_text_header": (("word2vec", "text_dims", "load"), huge_text_header),
    "repeated_chunks": (FIFU_READERS, lambda rng, reader: repeated_chunks(rng)),
    "slow_text_numbers": (("text", "text_dims", "load"), slow_text_numbers),
    "gguf_structured": (("gguf", "load"), gguf_structured),
    "safetensors_structured": (("safetensors",), safetensors_structured),
    "tokenizer_json_structured": (("tokenizer-json",), tokenizer_json_structured),
    "tokenizer_json_affixes": (("tokenizer-json",), tokenizer_json_affixes),
    "tekken_structured": (("tekken",), tekken_structured),
    "lightseq_structured": (("lightseq", "lightseq-hdf5"), lightseq_structured),
    "gensim_pickle_structured": (("gensim-pickle",), gensim_pickle_structured),
    "tokenizer_table_structured": (FIFU_READERS, tokenizer_table_structured),
    "ann_index_structured": (("ann-index",), ann_index_structured),
    "model_dir_structured": (("model-dir",), model_dir_structured),
    "cli_structured": (("cli",), cli_structured),
    "remote_http_structured": (("remote-http",), remote_http_structured),
}
for _name, (_readers, _) in list(GENERATORS.items()):  # the generators of readers left out (UNAVAILABLE) need the same packages
    if set(_readers) <= set(UNAVAILABLE):
        del GENERATORS[_name]
#: Share of a reader's inputs that come from a structure-aware generator (when it has any).
GENERATED_RATE = 0.05
#: The same for the readers of bundles (:data:`BUNDLE_READERS`): their generator draws the hostile directory entries and command
#: lines; a mutation of a bundle mostly changes one file's bytes.
BUNDLE_GENERATED_RATE = 0.5
#: Readers whose generator draws what matters most (the hostile server's behaviour): half of their inputs are generated too.
HALF_GENERATED = ("remote-http",)


def generators_for(reader: str) -> list[str]:
    """Names of the generators whose inputs ``reader`` reads."""
    return [name for name, (readers, _) in GENERATORS.items() if reader in readers]


# -- running one input ---------------------------------------------------------------


def classify(exc: BaseException) -> str:
    """``error`` for a sanctioned exception, else the kind of finding."""
    from finalfusion import FinalfusionError

    if isinstance(exc, (FinalfusionError, OSError)):
        return "error"
    if isinstance(exc, MemoryError):
        return "alloc"
    return "crash"


def innermost_frame(exc: BaseException) -> str:
    """``file:line`` of the deepest traceback frame inside the finalfusion package (or the deepest one)."""
    frames = traceback.extract_tb(exc.__traceback__)
    ours = [f for f in frames if "finalfusion" in f.filename and "fuzz" not in f.filename]
    f = (ours or frames or [None])[-1]
    if f is None:
        return "?"
    return f"{Path(f.filename).name}:{f.lineno}"


def run_one(reader: Reader, data: bytes) -> dict[str, Any]:
    """Run ``reader`` on ``data`` in this process and describe the outcome."""
    INPUT_CRC[0] = zlib.crc32(data)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            reader(data)
    except BaseException as exc:
        if isinstance(exc, (KeyboardInterrupt, SystemExit)):
            raise
        kind = classify(exc)
        where = getattr(exc, "fuzz_where", None) or innermost_frame(exc)  # a Violation names its class
        out = {"status": kind, "type": type(exc).__name__, "msg": str(exc)[:300], "where": where}
        if kind != "error":
            out["tb"] = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        return out
    return {"status": "ok"}


def _vm_bytes() -> int:
    with open("/proc/self/status", encoding="ascii") as f:
        for line in f:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    return 0  # pragma: no cover - Linux always has VmSize


@contextlib.contextmanager
def address_space_limit(extra_mb: int) -> Iterator[None]:
    """Lower the soft ``RLIMIT_AS`` to the current size + ``extra_mb`` MiB, restoring it afterwards.

    A runaway allocation then raises ``MemoryError`` instead of exhausting
    the machine. Only the soft limit changes, so it can be raised back.
    """
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    limit = _vm_bytes() + extra_mb * 2**20
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def apply_overrides() -> None:
    """Set module constants from the JSON object in ``$FF_FUZZ_SET`` (lists become tuples).

    Tests use it to shorten ``exercise()`` in the worker subprocesses and
    jobs, which import this file afresh.
    """
    raw = os.environ.get("FF_FUZZ_SET")
    if not raw:
        return
    for name, value in json.loads(raw).items():
        if name not in globals() or not name.isupper():
            raise SystemExit(f"FF_FUZZ_SET: {name!r} is not a constant of {__file__}")
        globals()[name] = tuple(value) if isinstance(value, list) else value


#: Seconds the library lets a child process read a file with native code (libhdf5) before it stops it: under the
#: per-input --timeout, so that a hang there is seen answered as the library answers it (a FormatError).
NATIVE_SECONDS = 2.0


def worker_main(limit_mb: int, rss_factor: int) -> None:
    """Worker loop: read ``u8 reader | u32 length | data`` from stdin, answer one JSON line each."""
    apply_overrides()
    if "lightseq-hdf5" in READERS:
        import finalfusion.compat.lightseq as lightseq

        lightseq.HDF5_SECONDS = NATIVE_SECONDS
    names = list(READERS)
    # Import everything before the first input (each input's address-space limit is measured when it starts).
    run_one(READERS["finalfusion"], b"")
    _serve(names, rss_factor, limit_mb)


def rss_allowance(size: int, rss_factor: int) -> int:
    """The peak-RSS growth allowed for the input just run (``size`` bytes): 64 MiB, ``rss_factor`` times its size or
    ``QUERY_RSS_FACTOR`` times its queries' bytes, and twice the answers ``exercise()`` asked for on top."""
    return max(64 * 2**20, rss_factor * size, QUERY_RSS_FACTOR * QUERY_BYTES[0]) + 2 * ANSWER_BYTES[0]


def _serve(names: list[str], rss_factor: int, limit_mb: int = 0) -> None:
    """Answer inputs until stdin ends; each runs under an address-space limit of the worker's size at that moment plus
    ``limit_mb`` (the libraries' thread pools and arenas, started by earlier inputs, are the worker's, not the input's:
    a limit measured once at start-up shrank as they grew, until bounded allocations of later inputs failed)."""
    stdin = sys.stdin.buffer
    stdout = sys.stdout
    print(json.dumps({"ready": names}), file=stdout, flush=True)
    while True:
        head = stdin.read(5)
        if len(head) < 5:
            return
        which, n = struct.unpack("<BI", head)
        data = stdin.read(n)
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        QUERY_BYTES[0] = ANSWER_BYTES[0] = 0
        with address_space_limit(limit_mb) if limit_mb > 0 else contextlib.nullcontext():
            out = run_one(READERS[names[which]], data)
        grown = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) * 1024
        if out["status"] in ("ok", "error") and grown > rss_allowance(len(data), rss_factor):
            msg = f"peak RSS grew by {grown} bytes for a {len(data)}-byte input, {QUERY_BYTES[0]} bytes of queries and {ANSWER_BYTES[0]} of answers"
            out = {"status": "alloc", "type": "RSS", "msg": msg, "where": "rss", "tb": ""}
        print(json.dumps(out), file=stdout, flush=True)


class Worker:
    """A worker subprocess with a per-input timeout; restarted after a hang or a crash."""

    def __init__(self, limit_mb: int, rss_factor: int) -> None:
        self.args = [sys.executable, os.path.abspath(__file__), "--worker", "--rlimit-mb", str(limit_mb), "--rss-factor", str(rss_factor)]
        self.proc: subprocess.Popen[bytes] | None = None
        self.names: list[str] = []
        self.start()

    def start(self) -> None:
        # One thread per native pool: under RLIMIT_AS every extra thread's stack and malloc arena takes address space.
        env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", RAYON_NUM_THREADS="1", TOKENIZERS_PARALLELISM="false")
        self.proc = subprocess.Popen(self.args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError("fuzz worker failed to start")
        self.names = json.loads(line)["ready"]

    def stop(self) -> None:
        if self.proc is not None:
            with contextlib.suppress(OSError):
                self.proc.kill()
            self.proc.wait()
            for pipe in (self.proc.stdin, self.proc.stdout):
                if pipe is not None:
                    with contextlib.suppress(OSError):
                        pipe.close()
            _remove_scratch(self.proc.pid)
            self.proc = None

    def run(self, reader: str, data: bytes, timeout: float) -> dict[str, Any]:
        proc = self.proc
        assert proc is not None
        assert proc.stdin is not None
        assert proc.stdout is not None
        try:
            proc.stdin.write(struct.pack("<BI", self.names.index(reader), len(data)) + data)
            proc.stdin.flush()
        except BrokenPipeError:
            pass
        ready, _, _ = select.select([proc.stdout], [], [], timeout)
        line = proc.stdout.readline() if ready else b""
        if line:
            result: dict[str, Any] = json.loads(line)
            return result
        if not ready:
            self.stop()
            self.start()
            return {"status": "hang", "type": "Timeout", "msg": f"no answer within {timeout} s", "where": "timeout"}
        code = proc.wait()
        _remove_scratch(proc.pid)
        self.proc = None
        self.start()
        return {"status": "signal", "type": f"exit {code}", "msg": f"worker died with exit status {code}", "where": f"exit{code}"}


# -- mutations -----------------------------------------------------------------------

INTERESTING_BYTES = (0x00, 0xFF, 0x7F, 0x80, 0x01, 0xFE)
INTERESTING_INTS = (0, 1, 2, 3, 4, 7, 8, 10, 0x7F, 0xFF, 0x100, 0x7FFF, 0xFFFF, 2**31 - 1, 2**31, 2**32 - 1, 2**32, 2**40, 2**62, 2**63 - 1, 2**63, 2**64 - 1)
INTERESTING_NUMBERS = (b"0", b"-1", b"1", b"2", b"99999999999999999999", b"1099511627776", b"4294967296", b"-2147483649")
INTERESTING_NUMBERS += (b"1e40", b"nan", b"inf", b"3.4e39", b"")
# float32 ties and forms float() and Rust's parse::<f32> disagree on (the text readers' exact re-read)
INTERESTING_NUMBERS += (b"1.0000000596046448", b"16777217", b"16777217" + b"0" * 5000 + b"e-5000", b"16777217e" + b"0" * 5000)
INTERESTING_NUMBERS += (b"1048577", b"2147483648")  # dimension counts past finalfusion.limits.MAX_DIMS
INTERESTING_NUMBERS += (b"3.4028235677973366e38", b"7.006492321624085e-46", b"1_0", b"1\x0b", b"+.5E-0", b"5.")
_NUMBER = re.compile(rb"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")


def _field_offset(rng: random.Random, data: bytes, width: int) -> int:
    """A random offset for a ``width``-byte field, aligned to 4 most of the time."""
    top = max(len(data) - width, 0)
    pos = rng.randint(0, top)
    if rng.random() < 0.7:
        pos -= pos % 4
    return pos


def _chunk_frames(data: bytes) -> list[tuple[int, int]]:
    """``(start, end)`` of the chunk frames of a finalfusion file, as far as they parse."""
    if not data.startswith(b"FiFu") or len(data) < 12:
        return []
    (n,) = struct.unpack_from("<I", data, 8)
    pos = 12 + 4 * min(n, 64)
    frames = []
    while pos + 12 <= len(data) and len(frames) < 16:
        (length,) = struct.unpack_from("<Q", data, pos + 4)
        end = pos + 12 + length
        if end > len(data):
            break
        frames.append((pos, end))
        pos = end
    return frames


#: Share of mutated inputs that are endless gzip streams (each costs the reader up to its caps, a few MiB).
ENDLESS_RATE = 0.01
#: Bytes that terminate nothing in any format (not a newline, NUL, space or tab): an endless run of one
#: of them is a line, word or header that never ends.
ENDLESS_FILLERS = (b"a", b"9", b"\xff")
#: Decompressed size of an endless stream (above the worker's 1 GiB address-space headroom) and of one gzip member.
ENDLESS_BYTES = 3 << 29
_ENDLESS_MEMBER = 1 << 26


@functools.cache
def _endless_member(filler: bytes) -> bytes:
    return gzip.compress(filler * _ENDLESS_MEMBER, compresslevel=9, mtime=0)


def endless_gzip(data: bytes, rng: random.Random) -> bytes:
    """``data`` cut at a random point, then a filler byte repeated to :data:`ENDLESS_BYTES`, as a small gzip file.

    Generates the siblings of issue 13's unbounded buffering: a header line,
    a word or a line whose terminator never comes, in a stream with no size
    (gzip members are concatenated; a reader decodes them all). A reader that
    buffers until the terminator exceeds the worker's address space
    (``alloc``); a bounded one fails at its cap (``finalfusion.limits``).
    """
    cut = rng.randrange(len(data) + 1)
    member = _endless_member(rng.choice(ENDLESS_FILLERS))
    return gzip.compress(data[:cut], mtime=0) + member * (ENDLESS_BYTES // _ENDLESS_MEMBER)


def mutate(data: bytes, rng: random.Random, corpus: list[bytes]) -> bytes:
    """Apply 1-4 random mutations to ``data``."""
    buf = bytearray(data)
    for _ in range(rng.choice((1, 1, 1, 2, 2, 3, 4))):
        op = rng.randrange(13)
        n = len(buf)
        if op == 0 and n:  # bit flips
            for _ in range(rng.randint(1, 8)):
                i = rng.randrange(n)
                buf[i] ^= 1 << rng.randrange(8)
        elif op == 1 and n:  # interesting byte
            buf[rng.randrange(n)] = rng.choice(INTERESTING_BYTES)
        elif op in (2, 3) and n >= 4:  # u32 / u64 length or count field
            width = 4 if op == 2 else 8
            if n < width:
                continue
            value = rng.choice(INTERESTING_INTS)
            if rng.random() < 0.3:
                value = (n + rng.randint(-16, 16)) % 2**32
            pos = _field_offset(rng, bytes(buf), width)
            buf[pos : pos + width] = (value % 2 ** (8 * width)).to_bytes(width, "little")
        elif op == 4:  # ASCII numbers (text formats, TOML metadata)
            numbers = list(_NUMBER.finditer(buf[:65536]))
            if numbers:
                m = rng.choice(numbers)
                buf[m.start() : m.end()] = rng.choice(INTERESTING_NUMBERS)
        elif op == 5 and n:  # truncation
            del buf[rng.randrange(n) :]
        elif op == 6:  # splice with another input
            other = rng.choice(corpus) if corpus else bytes(buf)
            a = rng.randrange(n + 1)
            b = rng.randrange(len(other) + 1)
            buf[a:] = other[b:]
        elif op == 7:  # duplicate a chunk frame, or a byte range
            frames = _chunk_frames(bytes(buf))
            if frames:
                s, e = rng.choice(frames)
                at = rng.choice([f[0] for f in frames] + [n])
                buf[at:at] = buf[s:e]
            elif n:
                s = rng.randrange(n)
                e = min(n, s + rng.randint(1, 256))
                buf[s:s] = buf[s:e]
        elif op == 8 and n:  # delete a range
            s = rng.randrange(n)
            del buf[s : s + rng.randint(1, 64)]
        elif op == 9:  # insert random bytes
            at = rng.randrange(n + 1)
            buf[at:at] = rng.randbytes(rng.randint(1, 16))
        elif op == 10 and n:  # swap a chunk frame's id with another valid id
            frames = _chunk_frames(bytes(buf))
            if frames:
                s, _ = rng.choice(frames)
                buf[s : s + 4] = struct.pack("<I", rng.randint(0, 10))
        elif op == 11:  # hostile TOML metadata: a metadata chunk in a finalfusion file, else the text itself
            toml = hostile_toml(rng)
            buf = bytearray(_with_metadata(bytes(buf), toml) if buf.startswith(b"FiFu") else toml)
        elif op == 12 and rng.random() < 0.2:  # a tie-heavy file (all scores equal), replacing the input
            buf = bytearray(tie_heavy_fifu(rng))
    return bytes(buf)


# -- the campaign --------------------------------------------------------------------


def outcome_key(out: dict[str, Any]) -> str:
    """Kind of outcome used as feedback: status, exception type, where it was raised and how the message starts.

    The message is cut before a FormatError's ``expected ..., found ...`` part: the found bytes differ for
    nearly every input, and counting each as new would fill the corpus with inputs that all fail alike.
    """
    msg = out.get("msg", "").split(": expected ", 1)[0].split(" (b'", 1)[0]  # also gzip's "Not a gzipped file (b'..')"
    return f"{out['status']}|{out.get('type', '')}|{out.get('where', '')}|{re.sub(r'0x[0-9a-f]+|[0-9]+', 'N', msg)[:60]}"


def save_crasher(reader: str, data: bytes, out: dict[str, Any], directory: Path) -> Path:
    """Write a finding as ``<reader>-<status>-<sha1>.bin`` and a ``.txt`` description."""
    directory.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha1(data).hexdigest()[:12]
    path = directory / f"{reader}-{out['status']}-{digest}.bin"
    path.write_bytes(data)
    text = f"reader: {reader}\nstatus: {out['status']}\ntype: {out.get('type')}\nwhere: {out.get('where')}\nmessage: {out.get('msg')}\n\n{out.get('tb', '')}"
    path.with_suffix(".txt").write_text(text, encoding="utf-8")
    return path


def campaign(
    readers: list[str],
    seconds: float,
    seed: int,
    timeout: float,
    limit_mb: int,
    rss_factor: int,
    crashers: Path,
    max_size: int,
    executions: int | None = None,
    snapshot: Path | None = None,
) -> dict[str, Any]:
    """Fuzz ``readers`` round-robin for ``seconds`` or ``executions`` inputs, whichever ends first; return the statistics.

    With ``snapshot``, the statistics so far are written there every
    :data:`SNAPSHOT_SECONDS` (atomically), so a long campaign that is cut
    short still leaves its figures. SIGINT and SIGTERM end the campaign
    after the current input, with its statistics (``"stopped": true``).
    """
    rng = random.Random(seed)
    corpora = {r: seed_inputs(r) for r in readers}
    for r, c in corpora.items():
        if not c:
            raise SystemExit(f"no seed files for reader {r!r} under {REPO / 'tests' / 'data'}, {HERE} or {SHARED}")
    stats: dict[str, Any] = {r: collections.Counter() for r in readers}
    generated: dict[str, Any] = {g: collections.Counter() for r in readers for g in generators_for(r)}
    kinds: dict[str, set[str]] = {r: set() for r in readers}
    findings: dict[tuple[str, str, str], str] = {}
    worker = Worker(limit_mb, rss_factor)
    start = time.monotonic()
    execs = 0
    stop: list[int] = []
    previous = {sig: signal.signal(sig, lambda signum, _frame: stop.append(signum)) for sig in (signal.SIGINT, signal.SIGTERM)}
    last_snapshot = start

    def statistics() -> dict[str, Any]:
        elapsed = time.monotonic() - start
        out = {
            "seconds": round(elapsed, 1),
            "executions": execs,
            "per_second": round(execs / elapsed, 1) if elapsed else 0.0,
            "readers": {r: dict(stats[r]) for r in readers},
            "generators": {g: dict(c) for g, c in generated.items()},
            "distinct_outcomes": {r: len(kinds[r]) for r in readers},
            "corpus": {r: len(corpora[r]) for r in readers},
            "findings": sorted(findings.values()),
            "stopped": bool(stop),
        }
        out["summary"] = summarize(out)
        return out

    try:
        while time.monotonic() - start < seconds and (executions is None or execs < executions) and not stop:
            if snapshot is not None and time.monotonic() - last_snapshot >= SNAPSHOT_SECONDS:
                last_snapshot = time.monotonic()
                write_json(snapshot, statistics())
            reader = readers[execs % len(readers)]
            corpus = corpora[reader]
            # Endless streams and generated inputs are not cut to max_size: they are built to pass the readers' caps.
            gens = generators_for(reader)
            rate = BUNDLE_GENERATED_RATE if reader in BUNDLE_READERS or reader in HALF_GENERATED else GENERATED_RATE
            gen = rng.choice(gens) if gens and rng.random() < rate else None
            if gen is not None:
                data = GENERATORS[gen][1](rng, reader)
            elif rng.random() < ENDLESS_RATE:
                data = endless_gzip(rng.choice(corpus), rng)
            else:
                data = mutate(rng.choice(corpus), rng, corpus)[:max_size]
            out = worker.run(reader, data, timeout)
            execs += 1
            stats[reader][out["status"]] += 1
            if gen is not None:
                generated[gen][out["status"]] += 1
            key = outcome_key(out)
            if key not in kinds[reader]:
                kinds[reader].add(key)
                if len(corpus) < 4000:
                    corpus.append(data)
            elif out["status"] == "ok" and len(corpus) < 4000 and rng.random() < 0.05:
                corpus.append(data)
            if out["status"] not in ("ok", "error"):
                fkey = (reader, out.get("type", ""), out.get("where", ""))
                if fkey not in findings:
                    path = save_crasher(reader, data, out, crashers)
                    findings[fkey] = path.name
                    via = f" (generator {gen})" if gen else ""
                    print(f"[{time.monotonic() - start:7.1f}s] {out['status']}: {reader}{via} {out.get('type')} at {out.get('where')} -> {path}", flush=True)
    finally:
        worker.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    stats_out = statistics()
    if snapshot is not None:
        write_json(snapshot, stats_out)
    return stats_out


#: Seconds between two snapshots of a campaign's statistics (``--out``).
SNAPSHOT_SECONDS = 30.0


def write_json(path: Path, data: Any) -> None:
    """Write ``data`` as JSON to ``path`` atomically (a reader never sees half a file)."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=2), encoding="utf-8")
    os.replace(tmp, path)


#: Statuses that are findings (anything but a result or a sanctioned error).
FINDING_STATUSES = ("crash", "alloc", "hang", "signal")


def summarize(stats: dict[str, Any]) -> dict[str, dict[str, int]]:
    """Per reader: executions, ok, error (FormatError/OSError), findings (inputs flagged) and distinct saved findings."""
    out = {}
    for reader, counts in stats["readers"].items():
        flagged = sum(counts.get(k, 0) for k in FINDING_STATUSES)
        saved = sum(1 for name in stats["findings"] if name.rsplit("-", 2)[0] == reader)
        out[reader] = {"executions": sum(counts.values()), "ok": counts.get("ok", 0), "error": counts.get("error", 0), "findings": flagged, "distinct": saved}
    return out


def markdown_table(stats: dict[str, Any], commit: str = "`<commit>`") -> str:
    """The per-reader summary as rows for docs/reliability.md ("Campaign results: issue 13")."""
    rows = ["| reader | commit | executions | ok | FormatError/OSError | findings |", "|---|---|---|---|---|---|"]
    total = collections.Counter()
    for reader, row in stats["summary"].items():
        total.update(row)
        findings = f"{row['findings']:,} inputs, {row['distinct']} distinct" if row["findings"] else "none"
        rows.append(f"| {reader} | {commit} | {row['executions']:,} | {row['ok']:,} | {row['error']:,} | {findings} |")
    findings = f"{total['findings']:,} inputs, {len(stats['findings'])} distinct" if total["findings"] else "none"
    rows.append(f"| **all** | {commit} | {total['executions']:,} | {total['ok']:,} | {total['error']:,} | {findings} |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seconds", type=float, help="campaign length (all jobs run this long); default 60, or unlimited with --executions")
    p.add_argument("--executions", type=int, help="stop after this many inputs in all (split over the jobs)")
    p.add_argument("--reader", default="all", help="'all' or comma-separated names (see --list)")
    p.add_argument("--jobs", type=int, default=1, help="parallel campaigns with different seeds")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--timeout", type=float, default=5.0, help="seconds per input before it counts as a hang")
    p.add_argument("--rlimit-mb", type=int, default=1024, help="address space a worker may add beyond its start-up size")
    p.add_argument("--rss-factor", type=int, default=1000, help="flag inputs whose peak-RSS growth exceeds max(64 MiB, factor x input size)")
    p.add_argument("--max-size", type=int, default=1 << 20, help="inputs are cut to this many bytes")
    p.add_argument("--crashers", type=Path, default=CRASHERS)
    p.add_argument("--out", type=Path, help="write the statistics as JSON")
    p.add_argument("--markdown", action="store_true", help="also print the per-reader table for docs/reliability.md")
    p.add_argument("--commit", default="`<commit>`", help="commit named in the --markdown table")
    p.add_argument("--list", action="store_true", help="list the registered readers, their seeds and generators")
    p.add_argument("--replay", nargs="+", type=Path, metavar="FILE", help="run saved inputs (e.g. findings) through the worker and print each outcome")
    p.add_argument("--unpack", type=Path, metavar="FILE", help="list the entries of a bundle (the input of ann-index, model-dir, cli)")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    apply_overrides()
    if args.worker:
        worker_main(args.rlimit_mb, args.rss_factor)
        return 0
    if args.unpack:
        for kind, name, data in unpack_dir(args.unpack.read_bytes()):
            shown = data[:120] if kind in (D_META, D_LINK, D_HARDLINK, D_DEVICE) else f"{len(data)} bytes"
            print(f"{('file', 'dir', 'fifo', 'link', 'sparse', 'device', 'meta', 'hardlink')[kind] if kind < 8 else kind:9} {name}: {shown}")
        return 0
    if args.replay:
        return replay(args.replay, args.reader, args.timeout, args.rlimit_mb, args.rss_factor)
    if args.list:
        for name in READERS:
            print(f"{name}: {len(seed_inputs(name))} seeds; generators: {', '.join(generators_for(name)) or '-'}")
        missing = [n for n in COMPAT_READERS if n not in READERS]
        if missing:
            print(f"not importable (finalfusion.compat): {', '.join(missing)}")
        for name, reason in UNAVAILABLE.items():
            print(f"{name}: not registered: {reason}")
        return 0
    if args.seconds is None:
        args.seconds = float("inf") if args.executions is not None else 60.0
    readers = list(READERS) if args.reader == "all" else args.reader.split(",")
    unknown = [r for r in readers if r not in READERS]
    if unknown:
        p.error(f"unknown reader(s) {unknown}; registered: {list(READERS)}")
    if args.jobs > 1:
        stats = _run_jobs(args, readers)
    else:
        stats = campaign(
            readers, args.seconds, args.seed, args.timeout, args.rlimit_mb, args.rss_factor, args.crashers, args.max_size, args.executions, args.out
        )
    print(json.dumps(stats, indent=2))
    if args.markdown:
        print(markdown_table(stats, args.commit))
    if args.out:
        write_json(args.out, stats)
    return 1 if stats["findings"] else 0


def replay(paths: list[Path], reader: str, timeout: float, limit_mb: int, rss_factor: int) -> int:
    """Run each saved input through a worker (its reader: ``reader``, or the file name's ``<reader>-<status>-<sha1>.bin``); 1 if any is a finding."""
    worker = Worker(limit_mb, rss_factor)
    found = 0
    try:
        for path in paths:
            name = reader if reader != "all" else path.name.rsplit("-", 2)[0]
            out = worker.run(name, path.read_bytes(), timeout)
            found |= out["status"] in FINDING_STATUSES
            print(json.dumps({"file": str(path), "reader": name, **{k: v for k, v in out.items() if k != "tb"}}))
            if out.get("tb"):
                print(out["tb"], end="")
    finally:
        worker.stop()
    return 1 if found else 0


def _run_jobs(args: argparse.Namespace, readers: list[str]) -> dict[str, Any]:
    """Run ``--jobs`` campaigns in parallel (different seeds, ``--executions`` split between them) and add up their statistics."""
    outs = []
    procs = []
    logs = []
    for j in range(args.jobs):
        if args.out:  # kept beside the total: each job's snapshots and its log of findings
            out = str(args.out.with_name(f"{args.out.stem}.job{j}.json"))
        else:
            fd, out = tempfile.mkstemp(suffix=".json")
            os.close(fd)
        outs.append(out)
        cmd = [sys.executable, os.path.abspath(__file__), "--seconds", str(args.seconds), "--reader", ",".join(readers), "--seed", str(args.seed + j)]
        cmd += ["--timeout", str(args.timeout), "--rlimit-mb", str(args.rlimit_mb), "--rss-factor", str(args.rss_factor)]
        cmd += ["--max-size", str(args.max_size), "--crashers", str(args.crashers), "--out", out]
        if args.executions is not None:
            cmd += ["--executions", str(args.executions // args.jobs + (j < args.executions % args.jobs))]
        logs.append(open(out[: -len(".json")] + ".log", "w", encoding="utf-8") if args.out else subprocess.DEVNULL)  # noqa: SIM115
        procs.append(subprocess.Popen(cmd, stdout=logs[-1]))

    def stop_jobs(_signum: int, _frame: Any) -> None:  # SIGINT/SIGTERM: every job stops and writes its statistics so far
        for proc in procs:
            proc.send_signal(signal.SIGTERM)

    previous = {sig: signal.signal(sig, stop_jobs) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        for proc in procs:
            proc.wait()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    for log in logs:
        if log is not subprocess.DEVNULL:
            log.close()
    total: dict[str, Any] = {"jobs": args.jobs, "seconds": 0.0, "executions": 0, "readers": {}, "generators": {}, "findings": []}
    for out in outs:
        stats = json.loads(Path(out).read_text(encoding="utf-8"))
        if not args.out:
            os.unlink(out)
        total["stopped"] = total.get("stopped", False) or stats.get("stopped", False)
        total["seconds"] = max(total["seconds"], stats["seconds"])
        total["executions"] += stats["executions"]
        for key in ("readers", "generators"):
            for name, counts in stats[key].items():
                total[key].setdefault(name, collections.Counter()).update(counts)
        total["findings"] += stats["findings"]
    total["per_second"] = round(total["executions"] / total["seconds"], 1) if total["seconds"] else 0.0
    total["findings"] = sorted(set(total["findings"]))
    total["summary"] = summarize(total)
    return total


if __name__ == "__main__":
    sys.exit(main())
