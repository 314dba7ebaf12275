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
  = the worker's size after start-up + ``--rlimit-mb``), so a runaway
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
import collections
import contextlib
import functools
import gzip
import hashlib
import io
import json
import os
import pickle
import random
import re
import resource
import select
import struct
import subprocess
import sys
import tempfile
import time
import traceback
import warnings
from collections.abc import Callable, Iterator
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


def _load_safetensors(path: str) -> object:
    # A token list as long as the table (capped), so that every row is decoded; a header error surfaces from the load itself.
    from finalfusion import FinalfusionError
    from finalfusion.compat.safetensors import load_safetensors, read_safetensors_header

    rows = 1
    try:
        with open(path, "rb") as f:
            header = read_safetensors_header(f)
        table = header.tensors.get("model.embed_tokens.weight") or header.tensors.get("embeddings")
        if table is not None and len(table.shape) == 2:
            rows = max(1, min(table.shape[0], 1 << 16))
    except (FinalfusionError, OSError):
        pass  # the load below raises the same error (and the contract is checked on it)
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


def seed_inputs(reader: str, shared: Path = SHARED) -> list[bytes]:
    """Seed inputs of ``reader``; finalfusion also gets the bare quantized chunk wrapped in a header."""
    data = [p.read_bytes() for p in seed_files(reader, shared)]
    if reader == "load":  # every compat reader decompresses gzip transparently (shared code): one compressed seed per format
        data += [gzip.compress(seed_inputs(r, shared)[0][: 1 << 16], 1) for r in COMPAT_READERS if r != "load" and seed_files(r, shared)]
    if reader.startswith("finalfusion"):
        bare = REPO / "tests" / "data" / "testdata" / "rust-quantized_storage.bin"
        if bare.is_file():
            data.append(b"FiFu" + struct.pack("<III", 0, 1, 4) + bare.read_bytes())
    return data


# -- exercising a result -------------------------------------------------------------


def exercise(result: Any) -> Any:
    """Use a successfully read object the way a user would; raise on inconsistency.

    Embeddings get lookups and a write/re-read/write round trip that must
    give the same words and bytes (anything else is a finding).
    """
    from finalfusion import Embeddings, load_finalfusion
    from finalfusion.vocab.tokenizer import MissingExtraError

    if not isinstance(result, Embeddings):
        return result
    words = result.vocab.words
    probe = [words[0]] if words else []
    probe += ["fuzzing", "", "ü" * 3]
    try:
        for w in probe:
            result.embedding(w)
            result.embedding_with_norm(w)
        result.embedding_batch(probe * 6)  # > 16 words: the vectorised batch path too
    except MissingExtraError:
        pass  # a model vocabulary's unknown words need its tokenizer package (a run without the interop extra)
    if len(words):  # ties: a zero query makes every score equal (issue 13); answers follow word order
        import numpy as np

        zero = np.zeros(result.dims, dtype=np.float32)
        got = [r.word for r in result.embedding_similarity(zero, k=3)]
        if got != sorted(got):  # (rows whose norm is subnormal may be left out: their inverse overflows float32)
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
    return result


# -- structure-aware generators (issue 13) -------------------------------------------


def hostile_toml(rng: random.Random) -> bytes:
    """TOML that is deep or long where the parser is costly: nested arrays and inline tables, dotted keys, long numbers."""
    n = rng.choice((65, 100, 1000, 20_000))
    kind = rng.randrange(7)
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
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            reader(data)
    except BaseException as exc:
        if isinstance(exc, (KeyboardInterrupt, SystemExit)):
            raise
        kind = classify(exc)
        out = {"status": kind, "type": type(exc).__name__, "msg": str(exc)[:300], "where": innermost_frame(exc)}
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


def worker_main(limit_mb: int, rss_factor: int) -> None:
    """Worker loop: read ``u8 reader | u32 length | data`` from stdin, answer one JSON line each."""
    names = list(READERS)
    # Import everything before measuring the address space.
    run_one(READERS["finalfusion"], b"")
    with address_space_limit(limit_mb) if limit_mb > 0 else contextlib.nullcontext():
        _serve(names, rss_factor)


def _serve(names: list[str], rss_factor: int) -> None:
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
        out = run_one(READERS[names[which]], data)
        grown = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) * 1024
        if out["status"] in ("ok", "error") and grown > max(64 * 2**20, rss_factor * len(data)):
            out = {"status": "alloc", "type": "RSS", "msg": f"peak RSS grew by {grown} bytes for a {len(data)}-byte input", "where": "rss", "tb": ""}
        print(json.dumps(out), file=stdout, flush=True)


class Worker:
    """A worker subprocess with a per-input timeout; restarted after a hang or a crash."""

    def __init__(self, limit_mb: int, rss_factor: int) -> None:
        self.args = [sys.executable, os.path.abspath(__file__), "--worker", "--rlimit-mb", str(limit_mb), "--rss-factor", str(rss_factor)]
        self.proc: subprocess.Popen[bytes] | None = None
        self.names: list[str] = []
        self.start()

    def start(self) -> None:
        env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
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
            _remove(scratch_path(self.proc.pid))
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
        _remove(scratch_path(proc.pid))
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


def campaign(readers: list[str], seconds: float, seed: int, timeout: float, limit_mb: int, rss_factor: int, crashers: Path, max_size: int) -> dict[str, Any]:
    """Fuzz ``readers`` round-robin for ``seconds``; return the statistics."""
    rng = random.Random(seed)
    corpora = {r: seed_inputs(r) for r in readers}
    for r, c in corpora.items():
        if not c:
            raise SystemExit(f"no seed files for reader {r!r} under {REPO / 'tests' / 'data'}, {HERE} or {SHARED}")
    stats: dict[str, Any] = {r: collections.Counter() for r in readers}
    kinds: dict[str, set[str]] = {r: set() for r in readers}
    findings: dict[tuple[str, str, str], str] = {}
    worker = Worker(limit_mb, rss_factor)
    start = time.monotonic()
    execs = 0
    try:
        while time.monotonic() - start < seconds:
            reader = readers[execs % len(readers)]
            corpus = corpora[reader]
            # An endless stream is not cut to max_size: its point is to be longer than the readers' caps.
            endless = rng.random() < ENDLESS_RATE
            data = endless_gzip(rng.choice(corpus), rng) if endless else mutate(rng.choice(corpus), rng, corpus)[:max_size]
            out = worker.run(reader, data, timeout)
            execs += 1
            stats[reader][out["status"]] += 1
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
                    print(f"[{time.monotonic() - start:7.1f}s] {out['status']}: {reader} {out.get('type')} at {out.get('where')} -> {path}", flush=True)
    finally:
        worker.stop()
    elapsed = time.monotonic() - start
    return {
        "seconds": round(elapsed, 1),
        "executions": execs,
        "per_second": round(execs / elapsed, 1) if elapsed else 0.0,
        "readers": {r: dict(stats[r]) for r in readers},
        "distinct_outcomes": {r: len(kinds[r]) for r in readers},
        "corpus": {r: len(corpora[r]) for r in readers},
        "findings": sorted(findings.values()),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seconds", type=float, default=60.0, help="campaign length (all jobs run this long)")
    p.add_argument("--reader", default="all", help="'all' or comma-separated names (see --list)")
    p.add_argument("--jobs", type=int, default=1, help="parallel campaigns with different seeds")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--timeout", type=float, default=5.0, help="seconds per input before it counts as a hang")
    p.add_argument("--rlimit-mb", type=int, default=1024, help="address space a worker may add beyond its start-up size")
    p.add_argument("--rss-factor", type=int, default=1000, help="flag inputs whose peak-RSS growth exceeds max(64 MiB, factor x input size)")
    p.add_argument("--max-size", type=int, default=1 << 20, help="inputs are cut to this many bytes")
    p.add_argument("--crashers", type=Path, default=CRASHERS)
    p.add_argument("--out", type=Path, help="write the statistics as JSON")
    p.add_argument("--list", action="store_true", help="list the registered readers and their seeds")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:
        worker_main(args.rlimit_mb, args.rss_factor)
        return 0
    if args.list:
        for name in READERS:
            print(f"{name}: {len(seed_inputs(name))} seeds")
        missing = [n for n in COMPAT_READERS if n not in READERS]
        if missing:
            print(f"not importable (finalfusion.compat): {', '.join(missing)}")
        return 0
    readers = list(READERS) if args.reader == "all" else args.reader.split(",")
    unknown = [r for r in readers if r not in READERS]
    if unknown:
        p.error(f"unknown reader(s) {unknown}; registered: {list(READERS)}")
    if args.jobs > 1:
        return _run_jobs(args, readers)
    stats = campaign(readers, args.seconds, args.seed, args.timeout, args.rlimit_mb, args.rss_factor, args.crashers, args.max_size)
    print(json.dumps(stats, indent=2))
    if args.out:
        args.out.write_text(json.dumps(stats, indent=2), encoding="utf-8")
    return 1 if stats["findings"] else 0


def _run_jobs(args: argparse.Namespace, readers: list[str]) -> int:
    """Run ``--jobs`` campaigns in parallel (different seeds) and add up their statistics."""
    outs = []
    procs = []
    for j in range(args.jobs):
        fd, out = tempfile.mkstemp(suffix=".json")
        os.close(fd)
        outs.append(out)
        cmd = [sys.executable, os.path.abspath(__file__), "--seconds", str(args.seconds), "--reader", ",".join(readers), "--seed", str(args.seed + j)]
        cmd += ["--timeout", str(args.timeout), "--rlimit-mb", str(args.rlimit_mb), "--rss-factor", str(args.rss_factor)]
        cmd += ["--max-size", str(args.max_size), "--crashers", str(args.crashers), "--out", out]
        procs.append(subprocess.Popen(cmd, stdout=subprocess.DEVNULL))
    for proc in procs:
        proc.wait()
    total: dict[str, Any] = {"jobs": args.jobs, "seconds": 0.0, "executions": 0, "readers": {}, "findings": []}
    for out in outs:
        stats = json.loads(Path(out).read_text(encoding="utf-8"))
        os.unlink(out)
        total["seconds"] = max(total["seconds"], stats["seconds"])
        total["executions"] += stats["executions"]
        for r, counts in stats["readers"].items():
            total["readers"].setdefault(r, collections.Counter()).update(counts)
        total["findings"] += stats["findings"]
    total["findings"] = sorted(set(total["findings"]))
    print(json.dumps(total, indent=2))
    if args.out:
        args.out.write_text(json.dumps(total, indent=2), encoding="utf-8")
    return 1 if total["findings"] else 0


if __name__ == "__main__":
    sys.exit(main())
