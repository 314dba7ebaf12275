"""llama.cpp's tokenizer test vocabularies: fetch them, read their expected ids, check our tokenizers against them.

llama.cpp ships ``models/ggml-vocab-*.gguf`` (vocabulary-only GGUF files) with
``.gguf.inp`` (test strings joined by ``"\\n__ggml_vocab_test__\\n"``) and
``.gguf.out`` (one line of token ids per string) next to them; its
``tests/test-tokenizer-0.cpp`` tokenizes each string with ``add_special=false,
parse_special=false`` and compares. The same files are inside the
llama-cpp-python sdist (``vendor/llama.cpp/models/``), which ``pip`` downloads
from PyPI -- the one network source the CI has.

Used by ``tests/test_llamacpp_vocabs.py`` and as a script::

    python tests/llamacpp_vocabs.py fetch DIR    # download the sdist with pip, extract the vocabularies into DIR, print DIR
    python tests/llamacpp_vocabs.py report DIR   # the per-vocabulary table of docs/models.md

A word lookup drops control, unknown and unused tokens, so the expected ids
are llama.cpp's with the tokens the file types so (``tokenizer.ggml.token_type``
2, 3 and 5) left out, and ours are ``TokenizerVocab.subword_rows``: the ids of
the file's tokenizer, the same kinds of tokens left out.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

#: The llama-cpp-python release whose vendored llama.cpp the vocabularies come from (pinned: the expected ids change with llama.cpp).
LLAMA_CPP_PYTHON = "0.3.36"
#: The environment variable naming the directory of the vocabularies (what ``fetch`` prints).
ENV = "FINALFUSION_LLAMACPP_VOCABS"
SEPARATOR = "\n__ggml_vocab_test__\n"
#: llama.cpp's token types left out of a word lookup: unknown, control, unused.
DROPPED_TYPES = (2, 3, 5)


def fetch(directory: str | os.PathLike[str]) -> Path:
    """Extract every ``ggml-vocab-*`` file of the llama-cpp-python sdist into ``directory`` (downloaded with pip unless already there)."""
    out = Path(directory)
    stamp = out / f"llama-cpp-python-{LLAMA_CPP_PYTHON}"
    if stamp.exists():
        return out
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary", ":all:", f"llama-cpp-python=={LLAMA_CPP_PYTHON}", "-d", tmp],
            check=True,
        )
        (sdist,) = Path(tmp).glob("llama_cpp_python-*.tar.gz")
        prefix = f"llama_cpp_python-{LLAMA_CPP_PYTHON}/vendor/llama.cpp/models/ggml-vocab-"
        with tarfile.open(sdist) as tar:
            for member in tar:
                if member.isfile() and member.name.startswith(prefix) and "/" not in member.name[len(prefix) :]:
                    src = tar.extractfile(member)
                    assert src is not None
                    (out / Path(member.name).name).write_bytes(src.read())
    stamp.write_text("llama.cpp vocabularies extracted from the llama-cpp-python sdist\n")
    return out


def vocab_files(directory: str | os.PathLike[str]) -> list[Path]:
    """The ``ggml-vocab-*.gguf`` files of ``directory`` that have ``.inp`` and ``.out`` files next to them, sorted."""
    return sorted(p for p in Path(directory).glob("ggml-vocab-*.gguf") if p.with_name(p.name + ".inp").exists() and p.with_name(p.name + ".out").exists())


def read_cases(path: Path) -> list[tuple[str, list[int]]]:
    """The test strings and llama.cpp's ids for them, read as test-tokenizer-0.cpp reads them."""
    raw = path.with_name(path.name + ".inp").read_bytes().decode("utf-8")
    texts = []
    pos = 0
    while pos < len(raw):
        nxt = raw.find(SEPARATOR, pos)
        if nxt < 0:
            texts.append(raw[pos:])
            break
        texts.append(raw[pos:nxt])
        pos = nxt + len(SEPARATOR)
    lines = path.with_name(path.name + ".out").read_text(encoding="utf-8").split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if len(lines) != len(texts):
        raise ValueError(f"{path.name}: {len(texts)} test strings but {len(lines)} lines of ids")
    return [(t, [int(x) for x in line.split()]) for t, line in zip(texts, lines, strict=True)]


def loadable(path: Path, out: Path) -> Path:
    """``path`` with a ``token_embd.weight`` table added (one F32 column), written to ``out`` by gguf-py's ``GGUFWriter``.

    llama.cpp's vocabulary files hold no tensors; ``load_gguf`` loads a table.
    Every key is copied with its value (read with finalfusion's GGUF reader:
    gguf-py's ``GGUFReader`` takes 20 s on a 150k-token vocabulary on a busy machine).
    """
    import gguf

    from finalfusion.compat.gguf._reader import read_gguf

    kv = read_gguf(path.read_bytes()).kv
    n = len(kv["tokenizer.ggml.tokens"])
    writer = gguf.GGUFWriter(out, arch=str(kv["general.architecture"]))
    vt = gguf.GGUFValueType
    for key, value in kv.items():
        if key == "general.architecture":
            continue
        if isinstance(value, list):
            writer.add_key_value(key, value, vt.ARRAY, sub_type=vt.STRING)
        elif isinstance(value, np.ndarray):
            sub = {
                "b1": vt.BOOL,
                "i1": vt.INT8,
                "i2": vt.INT16,
                "u2": vt.UINT16,
                "u8": vt.UINT64,
                "u1": vt.UINT8,
                "i4": vt.INT32,
                "u4": vt.UINT32,
                "f4": vt.FLOAT32,
                "i8": vt.INT64,
                "f8": vt.FLOAT64,
            }[value.dtype.str[1:]]
            writer.add_key_value(key, value.tolist(), vt.ARRAY, sub_type=sub)
        elif isinstance(value, bool):
            writer.add_key_value(key, value, vt.BOOL)
        elif isinstance(value, int):
            writer.add_key_value(key, value, vt.UINT32 if 0 <= value < 2**32 else vt.INT64)
        elif isinstance(value, float):
            writer.add_key_value(key, value, vt.FLOAT32)
        else:
            writer.add_key_value(key, value, vt.STRING)
    return finish_gguf(writer, n, out)


def finish_gguf(writer: Any, rows: int, path: Path) -> Path:
    """Add a one-column ``token_embd.weight`` of ``rows`` rows (what ``load_gguf`` loads) to gguf-py's ``writer`` and write ``path``."""
    writer.add_tensor("token_embd.weight", np.ones((rows, 1), dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


@dataclass
class Result:
    """How many of a vocabulary's test strings give exactly llama.cpp's ids; the failures (text, expected, found)."""

    name: str
    model: str
    pre: str
    passed: int = 0
    total: int = 0
    failures: list[tuple[str, list[int], list[int]]] = field(default_factory=list)
    error: str = ""


def written_back(source: Path, directory: Path) -> Path:
    """``source`` loaded, written as a ``.fifu`` file, loaded from it and written by ``write_gguf`` (into ``directory``).

    The ``.fifu`` step keeps only what the embeddings carry (the tokenizer and
    the metadata), as a user's round trip does.
    """
    from finalfusion import load_finalfusion
    from finalfusion.compat.gguf import load_gguf, write_gguf

    fifu = directory / "written.fifu"
    load_gguf(source, normalize=False).write(fifu)
    out = directory / "written.gguf"
    write_gguf(out, load_finalfusion(fifu))
    return out


def tokenizer_keys_differ(source: Path, written: Path) -> list[str]:
    """The ``tokenizer.*`` keys not the same in both files (by name and order, value, and numpy element type), read with finalfusion's reader."""
    from finalfusion.compat.gguf._reader import read_gguf

    a, b = ({k: v for k, v in read_gguf(p.read_bytes()).kv.items() if k.startswith("tokenizer.")} for p in (source, written))
    if list(a) != list(b):
        return [f"keys {list(a)} != {list(b)}"]
    out = []
    for key, value in a.items():
        other = b[key]
        if isinstance(value, np.ndarray):
            same = isinstance(other, np.ndarray) and value.dtype == other.dtype and np.array_equal(value, other)
        else:
            same = type(value) is type(other) and value == other
        if not same:
            out.append(key)
    return out


def check(path: Path, written: bool = False) -> Result:
    """Load ``path`` with ``load_gguf`` and compare every test string's kept ids with llama.cpp's.

    With ``written``, the file loaded is the one :func:`written_back` makes of it
    (and a ``tokenizer.*`` key not written back as the source had it is an error).
    """
    from finalfusion.compat.gguf import load_gguf
    from finalfusion.compat.gguf._reader import read_gguf
    from finalfusion.errors import FinalfusionError
    from finalfusion.vocab import TokenizerVocab

    kv = read_gguf(path.read_bytes()).kv
    model = str(kv["tokenizer.ggml.model"])
    pre = str(kv.get("tokenizer.ggml.pre", ""))
    types = kv.get("tokenizer.ggml.token_type")
    result = Result(path.name[len("ggml-vocab-") : -len(".gguf")], model, pre)
    cases = read_cases(path)
    result.total = len(cases)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            file = loadable(path, Path(tmp) / path.name)
            if written:
                file, source = written_back(file, Path(tmp)), file
                differ = tokenizer_keys_differ(source, file)
                if differ:
                    raise TypeError(f"tokenizer keys not written back as the source had them: {differ}")
            emb = load_gguf(file, normalize=False)
        vocab = emb.vocab
        if not isinstance(vocab, TokenizerVocab):
            raise TypeError(f"no tokenizer: {type(vocab).__name__}")
        for text, ids in cases:
            expected = [i for i in ids if types is None or int(types[i]) not in DROPPED_TYPES]
            found = vocab.subword_rows(text).tolist()
            if found == expected:
                result.passed += 1
            else:
                result.failures.append((text, expected, found))
    except (FinalfusionError, TypeError) as exc:
        result.error = f"{type(exc).__name__}: {exc}"[:300]
    return result


def report(directory: str | os.PathLike[str]) -> str:
    """The Markdown table of :func:`check` for every vocabulary of ``directory``."""
    rows = ["| vocabulary | `tokenizer.ggml.model` | `tokenizer.ggml.pre` | strings passed |", "|---|---|---|---|"]
    for path in vocab_files(directory):
        r = check(path)
        note = f" ({r.error})" if r.error else ""
        rows.append(f"| {r.name} | {r.model} | {r.pre or '-'} | {r.passed} / {r.total}{note} |")
    return "\n".join(rows)


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] not in ("fetch", "report"):
        print(f"usage: {Path(__file__).name} fetch|report DIR", file=sys.stderr)
        return 2
    if argv[0] == "fetch":
        print(fetch(argv[1]))
    else:
        print(report(argv[1]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
