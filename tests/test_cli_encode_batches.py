"""``finalfusion encode`` bounds its batches by bytes (issue 33, "Bounds and silent wrong answers").

The audit: ``encode`` buffered 1,024 lines of up to 64 MiB each, so 600 long standard-input lines
ended in ``MemoryError`` at 1.9 GB. A batch now ends at ``--batch-size`` lines or once it holds
``limits.MAX_ENCODE_BATCH_BYTES`` bytes of text, and the output is the same whatever the batches.
"""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import finalfusion
from finalfusion import limits
from finalfusion.cli import main
from finalfusion.embeddings import Embeddings
from finalfusion.storage import NdArray
from finalfusion.vocab import SimpleVocab

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_cli import command, env

#: Sentences of very different lengths, some long (each line is one text).
LINES = [" ".join(["the quick brown fox"] * n) for n in (1, 3, 200, 2, 5000, 1, 40, 7, 3000, 1)] + ["berlin paris", "ünïcödé wörds"]


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fastText model trained by gensim (subword buckets), converted to finalfusion."""
    gensim_models = pytest.importorskip("gensim.models")
    corpus = [line.split() for line in LINES] * 3 + [["berlin", "paris", "london"]] * 5
    ft = gensim_models.FastText(vector_size=8, min_count=1, epochs=1, bucket=500, seed=1, workers=1)
    ft.build_vocab(corpus_iterable=corpus)
    ft.train(corpus_iterable=corpus, total_examples=len(corpus), epochs=1)
    path = tmp_path_factory.mktemp("encode") / "ft.bin"
    gensim_models.fasttext.save_facebook_model(ft, str(path))
    out = path.with_suffix(".fifu")
    finalfusion.load(path).write(out)
    return out


def test_batches_end_at_the_byte_limit_and_the_vectors_do_not_change(
    model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    text = tmp_path / "lines.txt"
    text.write_text("\n".join(LINES) + "\n", encoding="utf-8")
    assert main(["encode", "--quiet", str(model), str(text)]) == 0
    whole = capsys.readouterr().out
    seen: list[list[str]] = []
    original = Embeddings.encode

    def spy(self: Embeddings, texts: Any, *args: Any, **kwargs: Any) -> Any:
        seen.append(list(texts))
        return original(self, texts, *args, **kwargs)

    monkeypatch.setattr(Embeddings, "encode", spy)
    monkeypatch.setattr(limits, "MAX_ENCODE_BATCH_BYTES", 30_000)
    assert main(["encode", "--quiet", str(model), str(text)]) == 0
    assert capsys.readouterr().out == whole  # byte for byte
    assert [t for batch in seen for t in batch] == LINES
    assert len(seen) > 1
    for batch in seen:
        sizes = [len(t.encode("utf-8")) for t in batch]
        assert sum(sizes[:-1]) < 30_000  # the batch closed at the first line that reached the limit
    # and the vectors are those of the API
    got = np.array([[float(x) for x in line.split()] for line in whole.splitlines()], dtype=np.float32)
    np.testing.assert_allclose(got, finalfusion.load_finalfusion(model).encode(LINES), rtol=1e-6, atol=1e-7)


def test_the_default_limit_bounds_a_batch_of_long_standard_input_lines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The audit's shape: long lines on standard input. With the default 16 MiB, 6 MiB lines go three to a batch, not 1,024."""
    rows = np.random.default_rng(0).normal(size=(3, 4)).astype(np.float32)
    emb = Embeddings(NdArray(rows), SimpleVocab(["berlin", "paris", "london"]))
    emb.write(tmp_path / "e.fifu")
    long = "x" * (6 << 20)
    lines = [f"berlin {long}", f"paris {long} london", f"{long} berlin", "london paris"]
    seen: list[int] = []
    original = Embeddings.encode

    def spy(self: Embeddings, texts: Any, *args: Any, **kwargs: Any) -> Any:
        seen.append(len(texts))
        return original(self, texts, *args, **kwargs)

    monkeypatch.setattr(Embeddings, "encode", spy)
    monkeypatch.setattr("sys.stdin", io.StringIO("\n".join(lines) + "\n"))
    assert limits.MAX_ENCODE_BATCH_BYTES == 1 << 24
    assert main(["encode", "--quiet", str(tmp_path / "e.fifu")]) == 0
    assert seen == [3, 1]
    got = np.array([[float(x) for x in line.split()] for line in capsys.readouterr().out.splitlines()], dtype=np.float32)
    expected = original(finalfusion.load_finalfusion(tmp_path / "e.fifu"), lines)
    np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-7)


def test_the_command_line_output_is_the_same_in_a_process(model: Path, tmp_path: Path) -> None:
    text = tmp_path / "lines.txt"
    text.write_text("\n".join(LINES) + "\n", encoding="utf-8")
    r = subprocess.run([*command(), "encode", "--quiet", model, text], capture_output=True, text=True, env=env(), timeout=300, check=False)
    assert r.returncode == 0, r.stderr
    got = np.array([[float(x) for x in line.split()] for line in r.stdout.splitlines()], dtype=np.float32)
    np.testing.assert_allclose(got, finalfusion.load_finalfusion(model).encode(LINES), rtol=1e-6, atol=1e-7)
