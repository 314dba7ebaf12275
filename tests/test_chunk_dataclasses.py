"""Chunk classes are dataclasses: vocabularies frozen, metadata a mutable mapping; pickling, copies, equality, public names."""

from __future__ import annotations

import copy
import dataclasses
import importlib
import io
import pickle
from collections.abc import Callable, Hashable

import pytest

import finalfusion
from finalfusion import ExplicitVocab, FastTextVocab, FinalfusionBucketVocab, FloretVocab, Metadata, SimpleVocab
from finalfusion.subword import ExplicitIndexer, FastTextIndexer, FinalfusionHashIndexer, FloretIndexer
from finalfusion.vocab import Vocab, load_vocab

VOCABS: dict[str, Callable[[], Vocab]] = {
    "simple": lambda: SimpleVocab(["Berlin", "Potsdam", "Tübingen", "Köln"]),
    "bucket": lambda: FinalfusionBucketVocab(["Berlin", "Potsdam"], FinalfusionHashIndexer(10, 3, 4)),
    "fasttext": lambda: FastTextVocab(["Berlin", "Potsdam"], FastTextIndexer(100, 3, 5)),
    "explicit": lambda: ExplicitVocab(["ab"], ExplicitIndexer(["<ab", "ab>"], 3, 3)),
    "floret": lambda: FloretVocab(FloretIndexer(16, 3, 4, n_hashes=2)),
}


@pytest.mark.parametrize("kind", sorted(VOCABS))
def test_vocabularies_are_frozen_dataclasses(kind: str) -> None:
    vocab = VOCABS[kind]()
    assert dataclasses.is_dataclass(vocab)
    with pytest.raises(dataclasses.FrozenInstanceError):
        vocab.words = ["x"]  # type: ignore[misc]
    with pytest.raises(AttributeError):  # FrozenInstanceError is one, as assigning to 0.7's read-only properties was
        vocab.word_index = {}  # type: ignore[misc]
    assert not isinstance(vocab, Hashable)
    with pytest.raises(TypeError):
        hash(vocab)


@pytest.mark.parametrize("kind", sorted(VOCABS))
def test_vocabularies_pickle_copy_and_compare(kind: str) -> None:
    vocab = VOCABS[kind]()
    for other in (pickle.loads(pickle.dumps(vocab)), copy.copy(vocab), copy.deepcopy(vocab), VOCABS[kind]()):
        assert other == vocab
        assert type(other) is type(vocab)
        assert other.words == vocab.words
        assert dict(other.word_index) == dict(vocab.word_index)
        assert [other.idx(w) for w in ["Berlin", "zzz", "ab"]] == [vocab.idx(w) for w in ["Berlin", "zzz", "ab"]]
        assert repr(other) == repr(vocab)
    buf = io.BytesIO()
    vocab.write(buf)
    assert load_vocab(buf.getvalue()) == vocab


def test_equality_needs_the_same_class_words_and_indexer() -> None:
    assert SimpleVocab(["a"]) == SimpleVocab(("a",))
    assert SimpleVocab(["a"]) != SimpleVocab(["b"])
    assert FastTextVocab(["a"]) != SimpleVocab(["a"])
    assert FastTextVocab(["a"], FastTextIndexer(100)) != FastTextVocab(["a"], FastTextIndexer(101))
    assert FinalfusionBucketVocab(["a"], FinalfusionHashIndexer(10)) != FastTextVocab(["a"], FastTextIndexer(1024))
    assert SimpleVocab(["a"]) != ["a"]


def test_fields_are_the_constructor_parameters() -> None:
    assert [f.name for f in dataclasses.fields(SimpleVocab) if f.init] == ["words"]
    assert [f.name for f in dataclasses.fields(FastTextVocab) if f.init] == ["words", "indexer"]
    assert [f.name for f in dataclasses.fields(FloretVocab) if f.init] == ["indexer"]
    vocab = FastTextVocab(["a", "b"], None)  # 0.7: None means the default indexer
    assert vocab.indexer == FastTextIndexer()
    assert vocab.subword_indexer is vocab.indexer
    assert FinalfusionBucketVocab(["a"]).indexer == FinalfusionHashIndexer(21, 3, 6)
    bigger = dataclasses.replace(vocab, words=["a", "b", "c"])
    assert bigger.word_index["c"] == 2
    assert bigger.indexer is vocab.indexer
    assert vocab.words == ["a", "b"]
    words = ["x", "y"]
    mine = SimpleVocab(words)
    words.append("z")  # the vocabulary copied the caller's list
    assert mine.words == ["x", "y"]
    assert "z" not in mine


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: FastTextVocab(["a"], FinalfusionHashIndexer(10)), "indexer must be a FastTextIndexer, got FinalfusionHashIndexer"),
        (lambda: ExplicitVocab(["a"], None), "indexer must be an ExplicitIndexer, got NoneType"),
        (lambda: FloretVocab(FastTextIndexer(10)), "indexer must be a FloretIndexer, got FastTextIndexer"),
        (lambda: SimpleVocab([1]), "vocabulary words must be str, got int: 1"),
    ],
)
def test_wrong_arguments_are_type_errors(make: Callable[[], Vocab], message: str) -> None:
    with pytest.raises(TypeError, match=message):
        make()


def test_hashed_vocabularies_share_their_reader_but_keep_their_ranges() -> None:
    for vocab, at_byte, bad, match in [
        (FinalfusionBucketVocab(["a"], FinalfusionHashIndexer(10, 3, 4)), 16, 64, "bucket exponent out of range: expected 0..63, found 64"),
        (FastTextVocab(["a"], FastTextIndexer(100, 3, 4)), 16, 0, "number of buckets out of range: expected 1..2\\*\\*31-1, found 0"),
    ]:
        buf = io.BytesIO()
        vocab.write(buf)
        data = bytearray(buf.getvalue())
        payload = data.index(b"\x01\x00\x00\x00\x00\x00\x00\x00", 12)  # the u64 word count opens the payload
        data[payload + at_byte : payload + at_byte + 4] = bad.to_bytes(4, "little")
        with pytest.raises(finalfusion.FormatError, match=match):
            load_vocab(bytes(data))


def test_metadata_is_a_mutable_mapping_dataclass() -> None:
    meta = Metadata({"a": 1})
    assert dataclasses.is_dataclass(meta)
    meta["b"] = [1, 2]
    del meta["a"]
    meta.update(c="x")
    assert meta == {"b": [1, 2], "c": "x"}
    assert meta == Metadata({"b": [1, 2], "c": "x"})
    assert not isinstance(meta, Hashable)
    source = {"k": 1}
    assert Metadata(source).data is not source  # copied, so the caller's dict is not shared
    back = pickle.loads(pickle.dumps(meta))
    assert back == meta
    assert repr(back) == "Metadata({'b': [1, 2], 'c': 'x'})"


def test_metadata_read_from_a_file_is_written_back_as_read_until_changed() -> None:
    document = b'# a comment\nlang = "de"\n'
    buf = io.BytesIO()
    finalfusion.Embeddings(finalfusion.NdArray([[1.0]]), SimpleVocab(["a"]), metadata=Metadata({"lang": "de"})).write(buf)
    data = buf.getvalue().replace(b'lang = "de"\n', document)
    data = data.replace((len(b'lang = "de"\n')).to_bytes(8, "little"), len(document).to_bytes(8, "little"), 1)
    meta = finalfusion.load_metadata(data)
    out = io.BytesIO()
    meta.write(out)
    assert document in out.getvalue()
    meta["lang"] = "en"
    out = io.BytesIO()
    meta.write(out)
    assert document not in out.getvalue()
    assert b'lang = "en"\n' in out.getvalue()


@pytest.mark.parametrize(
    "module",
    [
        "finalfusion",
        "finalfusion.compat",
        "finalfusion.compat._registry",
        "finalfusion.compat.sniff",
        "finalfusion.metadata",
        "finalfusion.vocab",
        "finalfusion.vocab.base",
        "finalfusion.vocab.simple",
        "finalfusion.vocab.subword",
    ],
)
def test_public_names_are_sorted(module: str) -> None:
    names = importlib.import_module(module).__all__
    # isort style (ruff's RUF022): CONSTANTS, then Classes, then the rest; each alphabetically
    assert list(names) == sorted(names, key=lambda n: (0 if n.isupper() else 1 if n[:1].isupper() else 2, n))
    assert len(set(names)) == len(names)
