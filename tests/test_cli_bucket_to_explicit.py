"""``finalfusion bucket-to-explicit`` and 0.7's ``ffp-bucket-to-explicit``: one conversion, two sets of options.

Both entry points run ``finalfusion.cli._select.write_explicit``: the same
bytes out (norms kept, metadata dropped as in finalfusion-python 0.7,
finalfusion whatever the extension), the same one-line error naming the
input. They differ only where their commands differ: 0.7's script takes
``-f finalfusion|fasttext`` (default finalfusion, no detection), ``-l`` and
``--mmap`` (ignored for fastText, as 0.7 did) and draws no bars; the
``finalfusion`` command recognises the format, refuses options a format does
not have, and reports loading progress.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import finalfusion
from finalfusion import Embeddings, FastTextVocab, Metadata, NdArray
from finalfusion.cli import _convert, legacy, main
from finalfusion.subword import FastTextIndexer

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_cli import SAMPLE, fails, ok
from test_cli_legacy import ffp


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("b2e")
    emb = finalfusion.load_finalfusion(SAMPLE)
    assert emb.metadata is not None  # the sample carries metadata
    assert emb.norms is not None
    rng = np.random.default_rng(0)
    ft = Embeddings(NdArray(rng.normal(size=(2 + 16, 4)).astype(np.float32)), FastTextVocab(["hallo", "welt"], FastTextIndexer(16, 3, 5)))
    finalfusion.write_fasttext(d / "model.bin", ft)
    plain = Embeddings(NdArray(np.eye(2, dtype=np.float32)), finalfusion.SimpleVocab(["a", "b"]))
    plain.metadata = Metadata({"note": "plain"})
    plain.write(d / "plain.fifu")
    return {"bucket": SAMPLE, "fasttext": d / "model.bin", "plain": d / "plain.fifu"}


def test_both_commands_write_the_same_explicit_finalfusion_file(inputs: dict[str, Path], tmp_path: Path) -> None:
    new, old = tmp_path / "new.txt", tmp_path / "old.bin"  # the extension is not looked at: always finalfusion
    ok("bucket-to-explicit", inputs["bucket"], new)
    assert ffp("ffp-bucket-to-explicit", inputs["bucket"], old).returncode == 0
    assert new.read_bytes() == old.read_bytes()
    explicit, source = finalfusion.load_finalfusion(new), finalfusion.load_finalfusion(inputs["bucket"])
    assert type(explicit.vocab).__name__ == "ExplicitVocab"
    assert explicit.metadata is None  # describes the original: not copied (0.7)
    np.testing.assert_array_equal(np.asarray(explicit.norms), np.asarray(source.norms))
    np.testing.assert_array_equal(explicit["berlin"], source["berlin"])
    assert explicit.storage.shape[0] < source.storage.shape[0]


def test_fasttext_input_is_recognised_by_the_command_and_named_for_the_script(inputs: dict[str, Path], tmp_path: Path) -> None:
    new, old = tmp_path / "new.fifu", tmp_path / "old.fifu"
    ok("bucket-to-explicit", inputs["fasttext"], new)
    assert ffp("ffp-bucket-to-explicit", "-f", "fasttext", inputs["fasttext"], old).returncode == 0
    assert new.read_bytes() == old.read_bytes()
    assert finalfusion.load_finalfusion(new).vocab.words == ["hallo", "welt"]
    r = ffp("ffp-bucket-to-explicit", inputs["fasttext"], tmp_path / "x.fifu")  # 0.7's default --from is finalfusion
    assert r.returncode == 1
    assert r.stderr.startswith(f"ffp-bucket-to-explicit: error: {inputs['fasttext']}: not finalfusion (header: not a finalfusion file")
    assert r.stderr.endswith("the content looks like fasttext: use -f fasttext\n")  # leaving -f out reads finalfusion again


def test_a_vocabulary_without_buckets_is_the_same_one_line_error(inputs: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "out.fifu"
    message = f"error: {inputs['plain']}: only bucketed vocabularies can be converted to explicit, not SimpleVocab\n"
    assert fails(1, "bucket-to-explicit", inputs["plain"], out) == "finalfusion: " + message
    r = ffp("ffp-bucket-to-explicit", inputs["plain"], out)
    assert (r.returncode, r.stderr) == (1, "ffp-bucket-to-explicit: " + message)
    assert not out.exists()


def test_mmap_is_ignored_for_fasttext_by_the_script_and_refused_by_the_command(inputs: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "out.fifu"
    assert ffp("ffp-bucket-to-explicit", "-f", "fasttext", "--mmap", "-l", inputs["fasttext"], out).returncode == 0  # as 0.7
    out.unlink()
    err = fails(1, "bucket-to-explicit", "--mmap", inputs["fasttext"], out)
    assert err == f"finalfusion: error: {inputs['fasttext']}: --mmap does not apply to fasttext input\n"
    assert not out.exists()
    ok("bucket-to-explicit", "--mmap", "--quiet", inputs["bucket"], out)


def test_the_script_keeps_the_options_of_0_7(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as status:
        legacy.bucket_to_explicit(["--help"])
    assert status.value.code == 0
    text = capsys.readouterr().out
    assert "usage: ffp-bucket-to-explicit [-h] [-f INPUT_FORMAT] [-l] [--mmap] INPUT OUTPUT" in " ".join(text.split())
    assert "Valid choices: ['finalfusion', 'fasttext'] Default: 'finalfusion'" in " ".join(text.split())
    for option in ("--quiet", "--limit"):
        with pytest.raises(SystemExit) as status:
            legacy.bucket_to_explicit([option, str(SAMPLE), "out.fifu"])
        assert status.value.code == 2


@pytest.mark.parametrize("entry", ["command", "script"])
def test_a_conversion_failure_is_one_line_from_both_entry_points(
    entry: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # The script once printed the TypeError as it was (str(exc)) and the command on one line: the same conversion now.
    def refuse(self: Embeddings) -> Embeddings:
        raise TypeError("cannot convert\n  this vocabulary")

    monkeypatch.setattr(Embeddings, "bucket_to_explicit", refuse)
    out = tmp_path / "out.fifu"
    if entry == "command":
        assert main(["bucket-to-explicit", str(SAMPLE), str(out)]) == 1
    else:
        assert legacy.bucket_to_explicit([str(SAMPLE), str(out)]) == 1
    err = capsys.readouterr().err
    assert err.endswith(f"error: {SAMPLE}: cannot convert this vocabulary\n")
    assert err.count("\n") == 1
    assert not out.exists()


def test_the_command_reports_loading_progress_and_the_script_does_not(
    inputs: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    seen: list[tuple[str, int, Any]] = []

    @contextlib.contextmanager
    def recording(args: argparse.Namespace) -> Iterator[Any]:
        yield None if args.quiet else (lambda *call: seen.append(call))

    monkeypatch.setattr(_convert, "bars", recording)
    model = str(inputs["fasttext"])
    assert main(["bucket-to-explicit", model, str(tmp_path / "a.fifu")]) == 0
    assert seen
    assert {stage for stage, _, _ in seen} == {"read"}
    seen.clear()
    assert main(["bucket-to-explicit", "--quiet", model, str(tmp_path / "b.fifu")]) == 0
    assert legacy.bucket_to_explicit(["-f", "fasttext", model, str(tmp_path / "c.fifu")]) == 0
    assert seen == []
    assert capsys.readouterr().err == ""
