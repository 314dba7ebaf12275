"""tokenizer.json files that abort ``tokenizers`` are refused before it sees them (issue 33).

``tokenizers`` 0.23 cuts the length of ``continuing_subword_prefix`` in bytes
off the second token of every BPE merge and declares the rest UTF-8
unchecked; cut inside a character, the error naming the joined token
cannot become a Python string, pyo3 panics while raising it and the process
aborts (no ``except`` sees it). ``checked_tokenizer_json`` refuses exactly
those merges. The proof runs the raw library on drawn documents in child
processes (a child that aborts is restarted after the document that killed
it) and checks: every document that aborts the library is refused, and
every refused document aborts the library or fails to load in it.
"""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from conftest import load_fuzz
from finalfusion import FormatError
from finalfusion._tokenizers import HuggingFaceTokenizer, checked_tokenizer_json

fuzz = load_fuzz()

#: The issue's document: a BPE merge of "a" and "é" under the one-byte prefix "#" (the library looks up "a" + b"\xa9").
ABORTING = {
    "version": "1.0",
    "added_tokens": [],
    "pre_tokenizer": {"type": "Whitespace"},
    "model": {"type": "BPE", "unk_token": "[UNK]", "continuing_subword_prefix": "#", "vocab": {"[UNK]": 0, "a": 1, "é": 2, "aé": 3}, "merges": [["a", "é"]]},
}
PROBES = ["aé", "é中😀", "ab ba", "a#b", "ß€▁𠀀", "##é", "😀😀a", "x"]

#: A child that runs the raw library on documents (one JSON text a line) from a start index, logging each start and outcome.
RAW_WORKER = textwrap.dedent(
    """
    import json, sys, tokenizers
    docs = open(sys.argv[1], encoding="utf-8").read().splitlines()
    probes = json.loads(sys.argv[4])
    with open(sys.argv[3], "a", encoding="utf-8") as log:
        for i in range(int(sys.argv[2]), len(docs)):
            log.write(f"start {i}\\n"); log.flush()
            try:
                tok = tokenizers.Tokenizer.from_str(docs[i])
                for enc in tok.encode_batch(probes, add_special_tokens=False):
                    tok.decode(enc.ids)
                outcome = "ok"
            except BaseException:  # an error or a panic that unwinds: the process lives
                outcome = "error"
            log.write(f"done {i} {outcome}\\n"); log.flush()
    """
)


def raw_outcomes(docs: list[str], tmp: Path) -> dict[int, str]:
    """``"ok"``, ``"error"`` or ``"abort"`` of each document in the raw library, each run in a child process."""
    pytest.importorskip("tokenizers")
    path, log = tmp / "docs.jsonl", tmp / "log"
    path.write_text("\n".join(docs), encoding="utf-8")
    log.write_text("", encoding="utf-8")
    out: dict[int, str] = {}
    start = 0
    while start < len(docs):
        proc = subprocess.run([sys.executable, "-c", RAW_WORKER, str(path), str(start), str(log), json.dumps(PROBES)], capture_output=True, check=False)
        last = -1
        for line in log.read_text(encoding="utf-8").splitlines():
            kind, i, *rest = line.split(" ")
            if kind == "start":
                last = int(i)
            else:
                out[int(i)] = rest[0]
        if proc.returncode == 0:
            break
        assert proc.returncode < 0, proc.stderr[-2000:]  # only a signal ends a child early
        out[last] = "abort"
        start = last + 1
    assert len(out) == len(docs)
    return out


def refused(doc: str) -> bool:
    try:
        checked_tokenizer_json(doc.encode("utf-8"))
    except FormatError as err:
        return "cut inside a character" in str(err)
    return False


def test_the_issue_document_aborts_the_library_and_is_refused(tmp_path: Path) -> None:
    pytest.importorskip("tokenizers")
    text = json.dumps(ABORTING)
    assert len(text) < 350
    raw = subprocess.run([sys.executable, "-c", "import sys, tokenizers; tokenizers.Tokenizer.from_str(sys.argv[1])", text], capture_output=True, check=False)
    assert raw.returncode == -signal.SIGABRT, raw.returncode  # the library itself: the process dies
    with pytest.raises(FormatError, match="cut inside a character") as err:
        HuggingFaceTokenizer(text).encode("aé")
    assert "merge 0: ['a', 'é']" in str(err.value.found)
    assert "byte 1" in str(err.value.expected)


def test_a_model_directory_with_it_is_refused_and_the_process_lives(tmp_path: Path) -> None:
    """``finalfusion.load`` of a model directory, then ``encode``: a FormatError in the same process, which exits normally."""
    numpy = pytest.importorskip("numpy")
    pytest.importorskip("tokenizers")
    from safetensors.numpy import save_file

    save_file({"embeddings": numpy.ones((4, 3), dtype=numpy.float32)}, str(tmp_path / "model.safetensors"))
    (tmp_path / "tokenizer.json").write_text(json.dumps(ABORTING), encoding="utf-8")
    code = textwrap.dedent(
        """
        import sys, finalfusion
        emb = finalfusion.load(sys.argv[1])
        for call in (lambda: emb.encode("aé"), lambda: emb.embedding("aé"), lambda: emb["aé"]):
            try:
                call()
            except finalfusion.FormatError as err:
                print("refused:", err)
        """
    )
    proc = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.count("refused:") == 3
    assert "cut inside a character" in proc.stdout


def test_real_files_with_a_subword_prefix_still_load() -> None:
    """A BPE trained by ``tokenizers`` with a multi-byte-character corpus and prefix "##" (every merge's second token starts with it),
    and one with the multi-byte prefix "▁": not refused, the library's ids."""
    tokenizers = pytest.importorskip("tokenizers")
    corpus = ["naïve café 中文字 😀 hello world", "über straße € ▁x", "données déjà vu"] * 50
    for prefix in ("##", "\u2581"):
        model = tokenizers.models.BPE(unk_token="[UNK]", continuing_subword_prefix=prefix)
        tok = tokenizers.Tokenizer(model)
        tok.pre_tokenizer = tokenizers.pre_tokenizers.Whitespace()
        trainer = tokenizers.trainers.BpeTrainer(vocab_size=200, special_tokens=["[UNK]"], continuing_subword_prefix=prefix)
        tok.train_from_iterator(corpus, trainer)
        doc = json.loads(tok.to_str())
        assert doc["model"]["merges"]
        assert doc["model"]["continuing_subword_prefix"] == prefix
        words = ["naïve", "café", "中文字", "😀", "straße", "déjà"]
        assert HuggingFaceTokenizer(tok.to_str()).encode_batch(words) == [e.ids for e in tok.encode_batch(words, add_special_tokens=False)]


def test_drawn_documents_abort_the_library_exactly_when_refused(tmp_path: Path) -> None:
    """400 documents of the fuzzer's ``tokenizer_json_affixes`` generator against the raw library, each in a child process."""
    docs = [json.dumps(fuzz.tokenizer_affixes_doc(random.Random(seed)), ensure_ascii=False) for seed in range(400)]
    outcomes = raw_outcomes(docs, tmp_path)
    table: dict[tuple[str, bool], int] = {}
    for i, doc in enumerate(docs):
        key = (outcomes[i], refused(doc))
        table[key] = table.get(key, 0) + 1
        assert outcomes[i] != "abort" or key[1], f"seed {i} aborts the library and is not refused"
        assert not key[1] or outcomes[i] != "ok", f"seed {i} is refused but the library reads it"
    assert table.get(("abort", True), 0) >= 20, table  # the generator reaches the abort
    assert table.get(("ok", False), 0) >= 50, table  # and documents the library reads


def test_drawn_documents_through_finalfusion_in_a_subprocess(tmp_path: Path) -> None:
    """300 documents of the generator through ``finalfusion`` in one child process: each reads or is a FormatError, the child exits."""
    pytest.importorskip("tokenizers")
    docs = [json.dumps(fuzz.tokenizer_affixes_doc(random.Random(seed)), ensure_ascii=False) for seed in range(1000, 1300)]
    (tmp_path / "docs.jsonl").write_text("\n".join(docs), encoding="utf-8")
    code = textwrap.dedent(
        """
        import json, sys
        from finalfusion import FormatError
        from finalfusion._tokenizers import HuggingFaceTokenizer
        probes = json.loads(sys.argv[2])
        counts = {"ok": 0, "refused": 0}
        for doc in open(sys.argv[1], encoding="utf-8").read().splitlines():
            try:
                tok = HuggingFaceTokenizer(doc)
                tok.encode_batch(probes)
                [tok.pieces(p) for p in probes]
                counts["ok"] += 1
            except FormatError:
                counts["refused"] += 1
        print(json.dumps(counts))
        """
    )
    proc = subprocess.run([sys.executable, "-c", code, str(tmp_path / "docs.jsonl"), json.dumps(PROBES)], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    counts: dict[str, Any] = json.loads(proc.stdout)
    assert counts["ok"] + counts["refused"] == 300
    assert counts["ok"] >= 50, counts
    assert counts["refused"] >= 50, counts


def test_the_generator_is_registered_for_the_tokenizer_json_reader() -> None:
    assert "tokenizer_json_affixes" in fuzz.generators_for("tokenizer-json")
    data = fuzz.GENERATORS["tokenizer_json_affixes"][1](random.Random(3), "tokenizer-json")
    assert json.loads(data)["model"]["vocab"]
