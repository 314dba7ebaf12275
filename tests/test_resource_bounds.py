"""Readers stop waiting for a terminator at a documented bound (finalfusion.limits), and check a stream's magic before reading it to its end.

Each hostile input is a tiny gzip file (a member compressed once and repeated:
gzip readers decode concatenated members) that decompresses to 1 GiB with
the awaited byte (newline, NUL, space) never coming -- or an endless device.
It is read in a child process whose address space is limited to what it uses
after start-up plus 512 MiB: a reader that buffers the unterminated line,
word or stream dies with ``MemoryError`` there; a bounded one raises
``FormatError`` after a few MiB.
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import finalfusion.limits as limits

DATA = Path(__file__).parent / "data" / "testdata"
SRC = Path(__file__).parent.parent / "src"
#: Decompressed size of the hostile inputs: above the child's memory headroom.
ENDLESS = 1 << 30
MEMBER = 64 << 20

CHILD = r"""
import json, resource, sys
import finalfusion, finalfusion.compat as compat
from finalfusion.vocab import load_vocab
with open("/proc/self/statm") as f:
    vm = int(f.read().split()[0]) * resource.getpagesize()
limit = vm + (512 << 20)
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
kind, path = sys.argv[1], sys.argv[2]
readers = {
    "floret": lambda: compat.load_floret(path),
    "fasttext": lambda: compat.load_fasttext(path),
    "word2vec": lambda: compat.load_word2vec(path),
    "text": lambda: compat.load_text(path),
    "text_dims": lambda: compat.load_text_dims(path),
    "load": lambda: compat.load(path),
    "finalfusion": lambda: finalfusion.load_finalfusion(path),
    "finalfusion-mmap": lambda: finalfusion.load_finalfusion(path, mmap=True),
    "finalfusion-fileobj": lambda: finalfusion.load_finalfusion(open(path, "rb")),
    "vocab": lambda: load_vocab(path),
}
try:
    readers[kind]()
    print(json.dumps(["ok", ""]))
except BaseException as e:
    print(json.dumps([type(e).__name__, str(e)[:300], isinstance(e, finalfusion.FormatError)]))
"""


def run_bounded(kind: str, path: str | Path) -> list[object]:
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, kind, str(path)],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": f"{SRC}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"},
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    result: list[object] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def endless_gzip(path: Path, prefix: bytes, filler: bytes) -> Path:
    """``prefix`` then ``filler`` repeated to :data:`ENDLESS` bytes, as a small multi-member gzip file."""
    member = gzip.compress(filler * (MEMBER // len(filler)), compresslevel=9, mtime=0)
    with open(path, "wb") as f:
        f.write(gzip.compress(prefix, mtime=0))
        for _ in range(ENDLESS // MEMBER):
            f.write(member)
    assert path.stat().st_size < 8 << 20
    return path


def fasttext_prefix() -> bytes:
    """A real fastText model cut inside its first dictionary word."""
    data = (DATA / "rust-fasttext.bin").read_bytes()
    at = data.find(b"</s>\x00")
    assert at > 0
    return data[:at]


# (reader, prefix, filler that never contains the awaited terminator, words of the expected message)
CASES = {
    "floret-header-line": ("floret", b"", b"a", "header line too long"),
    "floret-header-digits": ("floret", b"1 ", b"9", "header line too long"),
    "fasttext-word-without-nul": ("fasttext", fasttext_prefix(), b"w", "NUL terminator is missing"),
    "fasttext-word-utf8": ("fasttext", fasttext_prefix(), "ö".encode(), "NUL terminator is missing"),
    "word2vec-huge-dims": ("word2vec", b"10 1000000000\n", b"a", "exceeds finalfusion.limits.MAX_DIMS"),
    # At the largest dims allowed the word cap still bounds the wait for a word's space (it does not grow with dims).
    "word2vec-max-dims": ("word2vec", b"10 1048576\n", b"a", "no space after a word"),
    "word2vec-small-dims": ("word2vec", b"10 3\n", b"a", "no space after a word"),
    "word2vec-header": ("word2vec", b"", b"1", "header line is unterminated or too long"),
    "text-dims-header": ("text_dims", b"", b"1", "header line is unterminated or too long"),
    "text-line": ("text", b"", b"a", "line too long"),
    "text-dims-line": ("text_dims", b"2 3\n", b"a", "line too long"),
    "sniffed-floret": ("load", b"", b"a", ""),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_endless_unterminated_input_fails_within_bounds(tmp_path: Path, case: str) -> None:
    reader, prefix, filler, message = CASES[case]
    path = endless_gzip(tmp_path / f"{case}.gz", prefix, filler)
    name, text, is_format_error = run_bounded(reader, path)
    assert is_format_error, (name, text)
    assert message in str(text)


@pytest.mark.parametrize("reader", ["finalfusion", "finalfusion-mmap", "finalfusion-fileobj", "vocab", "load"])
def test_endless_device_fails_on_its_magic(reader: str) -> None:
    if not os.path.exists("/dev/zero"):
        pytest.skip("no /dev/zero")
    name, text, is_format_error = run_bounded(reader, "/dev/zero")
    assert is_format_error, (name, text)
    if reader != "load":
        assert name == "BadMagic"


def test_fifo_checked_on_its_magic_before_its_end(tmp_path: Path) -> None:
    """A pipe that never closes: the writer feeds zeros until the reader goes away."""
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    feeder = subprocess.Popen(
        [sys.executable, "-c", "import sys\nwith open(sys.argv[1], 'wb') as f:\n    while True: f.write(bytes(1 << 16))", str(fifo)], stderr=subprocess.DEVNULL
    )
    try:
        name, _text, is_format_error = run_bounded("finalfusion", fifo)
    finally:
        feeder.kill()
        feeder.wait()
    assert is_format_error
    assert name == "BadMagic"


def test_limits_are_documented_constants() -> None:
    assert limits.MAX_WORD_BYTES >= 1 << 16
    assert limits.MAX_HEADER_LINE_BYTES >= 256
    assert limits.MAX_LINE_BYTES > limits.MAX_WORD_BYTES
    doc = (Path(__file__).parent.parent / "docs" / "reliability.md").read_text()
    for name in limits.__all__:
        assert name in doc


def _damaged_gzips() -> dict[str, bytes]:
    good = gzip.compress(b"a 1 2\nb 3 4\n", mtime=0)
    crc = bytearray(good)
    crc[-8] ^= 0xFF
    length = bytearray(good)
    length[-4] ^= 0xFF
    return {
        "trailing-garbage": good + b"garbage!",
        "trailing-bad-member-header": good + b"\x1f\x8b\x07" + bytes(20),
        "crc-mismatch": bytes(crc),
        "length-mismatch": bytes(length),
        "corrupt-deflate": good[:10] + b"\xff" * 8 + good[18:],
        "truncated": good[:-5],
    }


@pytest.mark.parametrize("case", sorted(_damaged_gzips()))
@pytest.mark.parametrize("reader", ["text", "load"])
def test_every_gzip_damage_is_a_format_error(tmp_path: Path, case: str, reader: str) -> None:
    import finalfusion
    import finalfusion.compat as compat

    path = tmp_path / "damaged.txt.gz"
    path.write_bytes(_damaged_gzips()[case])
    with pytest.raises(finalfusion.FormatError, match="gzip"):
        (compat.load_text if reader == "text" else compat.load)(str(path))
