"""Rich display in Jupyter: every ``_repr_html_`` is well-formed HTML with the expected cells, and escapes data."""

from __future__ import annotations

import io
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest

import finalfusion
from finalfusion import _display
from finalfusion.similarity import AnalogyEvaluation, AnalogySection, SimilarityResult, SimilarityResults

SAMPLE = Path(__file__).resolve().parent.parent / "examples" / "sample.fifu"
VOID = {"br", "hr", "img", "meta", "link", "input", "col", "wbr"}


class Checker(HTMLParser):
    """Collects the text of every cell and fails on unbalanced or misnested tags."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[str] = []
        self.cells: list[str] = []
        self.tags: list[str] = []
        self._cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        if tag in VOID:
            return
        self.stack.append(tag)
        if tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        assert self.stack, f"</{tag}> without an open tag"
        top = self.stack.pop()
        assert top == tag, f"</{tag}> closes <{top}>"
        if tag in ("td", "th") and self._cell is not None:
            self.cells.append("".join(self._cell).strip())
            self._cell = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)


def parse(html: str) -> Checker:
    checker = Checker()
    checker.feed(html)
    checker.close()
    assert checker.stack == [], f"unclosed tags: {checker.stack}"
    assert checker.tags[0] == "table", checker.tags[:3]
    return checker


def hostile_embeddings() -> finalfusion.Embeddings:
    words = ["<script>alert(1)</script>", "a&b", "\"quoted\" 'single'"]
    return finalfusion.Embeddings(
        finalfusion.NdArray(np.eye(3, dtype=np.float32)),
        finalfusion.SimpleVocab(words),
        norms=finalfusion.Norms([1.0, 2.0, 3.0]),
        metadata=finalfusion.Metadata({"<b>key</b>": "<i>value</i>", "nested": {"x": 1, "<y>": 2}}),
    )


def test_embeddings_table_has_the_summary_cells() -> None:
    emb = finalfusion.load_finalfusion(SAMPLE)
    cells = parse(emb._repr_html_()).cells
    table = dict(zip(cells[::2], cells[1::2], strict=True))
    assert table["vocabulary"] == "FinalfusionBucketVocab"
    assert table["words"] == f"{len(emb.vocab):,}"
    assert table["dims"] == str(emb.dims)
    assert table["storage"] == "NdArray"
    assert table["shape"] == f"{emb.storage.shape[0]:,} \u00d7 {emb.dims}"
    assert table["size"].endswith("(in memory)")
    assert "subword rows" in table
    assert "n-gram lengths" in table
    assert table["norms"] == f"{len(emb.vocab):,}"
    assert "file" not in table


def test_mapped_embeddings_show_the_file(tmp_path: Path) -> None:
    path = tmp_path / "sample.fifu"
    path.write_bytes(SAMPLE.read_bytes())
    emb = finalfusion.load_finalfusion(path, mmap=True)
    table = dict(zip(*(lambda c: (c[::2], c[1::2]))(parse(emb._repr_html_()).cells), strict=True))
    assert table["size"].endswith("(memory-mapped file)")
    assert table["file"] == str(path)


def test_every_displayed_type_is_well_formed_and_escaped() -> None:
    emb = hostile_embeddings()
    results = emb.word_similarity("a&b", k=2)
    assert isinstance(results, SimilarityResults)
    quantized = finalfusion.load_finalfusion(SAMPLE).quantize(n_subquantizers=4, n_bits=4, seed=0)
    evaluation = AnalogyEvaluation([AnalogySection("<capitals>", 3, 4, 1), AnalogySection("plural", 0, 0, 2)])
    shown = [emb, emb.vocab, emb.storage, emb.norms, emb.metadata, results, quantized.storage, quantized.vocab, evaluation]
    for obj in shown:
        html = obj._repr_html_()
        checker = parse(html)
        assert checker.cells, type(obj)
        for raw in ("<script>", "<b>key", "<i>", "<y>"):
            assert raw not in html, type(obj)
        assert "\n" not in repr(obj), f"{type(obj).__name__}.__repr__ must stay one line"
    words = parse(emb.vocab._repr_html_()).cells
    assert "<script>alert(1)</script>, a&b, \"quoted\" 'single'" in words
    meta = parse(emb.metadata._repr_html_()).cells
    assert meta == ["<b>key</b>", "<i>value</i>", "nested", "table: x, <y>"]


def test_results_are_a_ranked_table_and_still_a_list() -> None:
    emb = finalfusion.load_finalfusion(SAMPLE)
    results = emb.word_similarity("berlin", k=3)
    assert isinstance(results, list)
    assert results == [SimilarityResult(r.word, r.similarity) for r in results]
    cells = parse(results._repr_html_()).cells
    assert cells[:3] == ["rank", "word", "similarity"]
    body = cells[3:]
    assert body[0::3] == ["1", "2", "3"]
    assert body[1::3] == [r.word for r in results]
    assert [float(s) for s in body[2::3]] == pytest.approx([r.similarity for r in results], abs=1e-4)
    analogy = emb.analogy("berlin", "germany", "paris", k=2) if "germany" in emb.vocab else emb.word_similarity("paris", k=2)
    assert isinstance(analogy, SimilarityResults)


def test_analogy_evaluation_table() -> None:
    ev = AnalogyEvaluation([AnalogySection("capitals", 3, 4, 1), AnalogySection("empty", 0, 0, 2)])
    cells = parse(ev._repr_html_()).cells
    assert cells[:5] == ["section", "correct", "total", "skipped", "accuracy"]
    assert cells[5:10] == ["capitals", "3", "4", "1", "0.750"]
    assert cells[10:15] == ["empty", "0", "0", "2", "\u2013"]
    assert cells[15:] == ["total", "3", "4", "3", "0.750"]


def test_long_metadata_is_cut() -> None:
    meta = finalfusion.Metadata({f"k{i}": "x" * 500 for i in range(_display.SHOWN_METADATA + 5)})
    cells = parse(meta._repr_html_()).cells
    assert len(cells) == 2 * (_display.SHOWN_METADATA + 1)
    assert cells[1].endswith("\u2026")
    assert len(cells[1]) == _display.VALUE_CHARS
    assert cells[-1] == "5 more entries"


def test_empty_things_display() -> None:
    emb = finalfusion.Embeddings(finalfusion.NdArray(np.zeros((0, 2), dtype=np.float32)), finalfusion.SimpleVocab([]), metadata=finalfusion.Metadata({}))
    for obj in (emb, emb.vocab, emb.storage, emb.metadata, finalfusion.Norms([]), SimilarityResults()):
        parse(obj._repr_html_())
    buf = io.BytesIO()
    emb.write(buf)
    assert "none" in parse(finalfusion.load_finalfusion(buf.getvalue())._repr_html_()).cells


def _concrete_vocab_types() -> set[type]:
    """Every public vocabulary class the package defines (after importing every module, so none is missed)."""
    import importlib
    import pkgutil

    from finalfusion.vocab.base import SubwordVocab, Vocab

    for info in pkgutil.walk_packages(finalfusion.__path__, "finalfusion."):
        importlib.import_module(info.name)
    found: set[type] = set()
    todo = [Vocab]
    while todo:
        cls = todo.pop()
        todo.extend(cls.__subclasses__())
        if cls not in (Vocab, SubwordVocab) and not cls.__name__.startswith("_"):
            found.add(cls)
    return found


def _vocab_cases() -> list[tuple[str, object]]:
    """One vocabulary of every type, the tokenizer ones with real tokenizers trained here (each type at least once)."""
    from _model_helpers import train_byte_level_bpe, train_sentencepiece, train_wordpiece
    from finalfusion.subword import ExplicitIndexer, FastTextIndexer, FinalfusionHashIndexer, FloretIndexer
    from finalfusion.vocab import (
        ExplicitVocab,
        FastTextVocab,
        FinalfusionBucketVocab,
        FloretVocab,
        HuggingFaceTokenizer,
        SentencePieceTokenizer,
        SimpleVocab,
        TokenizerVocab,
    )

    words = ["<b>berlin</b>", "a&b", "$x$"]
    cases: list[tuple[str, object]] = [
        ("simple", SimpleVocab(words)),
        ("bucket", FinalfusionBucketVocab(words, FinalfusionHashIndexer(4, 3, 5))),
        ("fasttext", FastTextVocab(words, FastTextIndexer(16, 3, 6))),
        ("explicit", ExplicitVocab(words, ExplicitIndexer(["<b>", "a&b", "$x$"], 3, 3))),
        ("floret", FloretVocab(FloretIndexer(16, 3, 6, n_hashes=2))),
    ]
    tokenizers = pytest.importorskip("tokenizers")
    for name, train in (("wordpiece", train_wordpiece), ("byte-level-bpe", train_byte_level_bpe)):
        text = train()
        tok = tokenizers.Tokenizer.from_str(text)
        tokens = [tok.id_to_token(i) for i in range(tok.get_vocab_size())]
        cases.append((name, TokenizerVocab(tokens, HuggingFaceTokenizer(text))))
    spm = pytest.importorskip("sentencepiece")
    proto = train_sentencepiece("unigram", False)
    sp = spm.SentencePieceProcessor(model_proto=proto)
    cases.append(("sentencepiece", TokenizerVocab([sp.IdToPiece(i) for i in range(sp.GetPieceSize())], SentencePieceTokenizer(proto))))
    return cases


def test_every_vocabulary_type_displays(tmp_path: Path) -> None:
    """Every Vocab subclass, alone and inside Embeddings (also read back from a .fifu), gives a well-formed table."""
    cases = _vocab_cases()
    assert {type(v) for _, v in cases} == _concrete_vocab_types(), "a vocabulary type has no display case here: add one"
    for name, vocab in cases:
        emb = finalfusion.Embeddings(finalfusion.NdArray(np.ones((vocab.upper_bound, 4), dtype=np.float32)), vocab)  # type: ignore[attr-defined]
        path = tmp_path / f"{name}.fifu"
        emb.write(path)
        back = finalfusion.load_finalfusion(path, mmap=True)
        assert type(back.vocab) is type(vocab), name
        for shown in (vocab, emb, back, back.vocab):
            html = shown._repr_html_()  # type: ignore[attr-defined]
            cells = parse(html).cells
            table = dict(zip(cells[::2], cells[1::2], strict=True))
            assert table["vocabulary"] == type(vocab).__name__, name
            assert table["words"] == f"{len(vocab.words):,}", name  # type: ignore[attr-defined]
            assert "<b>berlin" not in html, name
            if type(vocab).__name__ == "TokenizerVocab":
                kind = "sentencepiece" if name == "sentencepiece" else "huggingface"
                assert kind in table["tokenizer"], (name, table)
                assert "n-gram lengths" not in table, name
            elif name != "simple":
                assert table["n-gram lengths"].replace("\u2013", "-") == f"{vocab.min_n}-{vocab.max_n}", name  # type: ignore[attr-defined]
            if vocab.words:  # type: ignore[attr-defined]
                assert table["first words"].startswith(vocab.words[0]), name  # type: ignore[attr-defined]
