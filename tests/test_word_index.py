"""The compact word index (vocab/_index.py) behaves like the dict it replaces.

Property tests compare every operation with ``dict(zip(words, range(n)))``
on random words (non-ASCII, the empty string), also with tiny tables that
force long probe chains and overflow slots; real files' vocabularies are
indexed exactly; pickles carry no hash table and work under another hash
seed; duplicates raise the same errors as before.
"""

from __future__ import annotations

import io
import os
import pickle
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from finalfusion import FormatError, load_finalfusion
from finalfusion.vocab import SimpleVocab, load_vocab
from finalfusion.vocab import _index as index_module
from finalfusion.vocab._index import WordIndex
from finalfusion.vocab.base import build_index

TEXT = st.text(alphabet=st.characters(codec="utf-8"), max_size=8)
WORD_LISTS = st.lists(TEXT, unique=True, max_size=80)
EMBEDDING_FILES = ["python-embeddings.fifu", "python-ff_buckets.fifu", "rust-similarity.fifu", "rust-quantized.fifu"]
NON_STR = [1, 0, -1, 2.5, None, b"a", ("a",), frozenset()]


def reference(words: list[str]) -> dict[str, int]:
    return dict(zip(words, range(len(words)), strict=True))


def assert_like_dict(index: WordIndex, expected: dict[str, int], probes: list[str]) -> None:
    assert len(index) == len(expected)
    assert list(index) == list(expected)
    assert list(index.keys()) == list(expected.keys())
    assert list(index.values()) == list(expected.values())
    assert list(index.items()) == list(expected.items())
    assert index == expected
    assert expected == index
    assert dict(index) == expected
    for w in [*expected, *probes]:
        assert index.get(w) == expected.get(w), w
        assert index.get(w, -7) == expected.get(w, -7), w
        assert (w in index) == (w in expected), w
        if w in expected:
            assert index[w] == expected[w]
        else:
            with pytest.raises(KeyError):
                index[w]
    batch = [*probes, *expected, *probes[:3]]
    assert index.lookup(batch).tolist() == [expected.get(w, -1) for w in batch]


@settings(max_examples=150, deadline=None)
@given(words=WORD_LISTS, probes=st.lists(TEXT, max_size=20), bits=st.one_of(st.none(), st.integers(1, 4)))
def test_behaves_like_a_dict(words: list[str], probes: list[str], bits: int | None) -> None:
    # bits=1..4: at most 16 home slots for up to 80 words, so most words
    # sit far from home and many spill into the overflow slots.
    assert_like_dict(WordIndex(words, bits=bits), reference(words), probes)


@settings(max_examples=60, deadline=None)
@given(words=WORD_LISTS, probes=st.lists(TEXT, max_size=20), bits=st.one_of(st.none(), st.integers(1, 4)))
def test_batch_lookup_when_every_fingerprint_collides(words: list[str], probes: list[str], bits: int | None) -> None:
    # All fingerprints equal: every probe of lookup() then compares strings, the path
    # that otherwise only a 32-bit fingerprint collision between different words takes.
    def zeros(hashes: Any, out: Any) -> Any:
        out[:] = 0
        return out

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(index_module, "_low_bits", zeros)
        index = WordIndex(words, bits=bits)
        batch = [*probes, *words, *probes[:3]]
        expected = reference(words)
        assert index.lookup(batch).tolist() == [expected.get(w, -1) for w in batch]


def test_empty_string_and_empty_vocab() -> None:
    assert_like_dict(WordIndex(["", "a"]), {"": 0, "a": 1}, ["b", " ", "\0"])
    empty = WordIndex([])
    assert_like_dict(empty, {}, ["", "a"])
    assert empty.lookup([]).tolist() == []


@pytest.mark.parametrize("key", NON_STR)
def test_non_str_keys_like_a_dict(key: object) -> None:
    words = ["1", "None", "a", "b'a'"]
    index, expected = WordIndex(words, bits=1), reference(words)
    assert index.get(key, "dflt") == expected.get(key, "dflt")  # type: ignore[call-overload]
    assert (key in index) == (key in expected)
    with pytest.raises(KeyError):
        index[key]  # type: ignore[index]
    assert index.lookup([key, "a"]).tolist() == [-1, 2]


@pytest.mark.parametrize("key", [[], {}, {"a"}])
def test_unhashable_keys_raise_type_error(key: object) -> None:
    index = WordIndex(["a"])
    for op in (index.get, index.__getitem__, index.__contains__, lambda k: index.lookup([k])):
        with pytest.raises(TypeError):
            op(key)


def test_not_equal_to_other_mappings() -> None:
    index = WordIndex(["a", "b"])
    assert index != {"a": 0}
    assert index != {"a": 1, "b": 0}
    assert index != {"a": 0, "c": 1}
    assert index != {"a": 0, (): 1}
    assert index != ["a", "b"]
    assert index == WordIndex(["a", "b"]) != WordIndex(["b", "a"])
    with pytest.raises(TypeError):
        hash(index)


@settings(max_examples=100, deadline=None)
@given(words=st.lists(TEXT, min_size=1, max_size=40), data=st.data())
def test_duplicates_name_the_first_repetition(words: list[str], data: st.DataObject) -> None:
    dup_at = data.draw(st.integers(0, len(words)))
    words = [*words[:dup_at], data.draw(st.sampled_from(words)), *words[dup_at:]]
    seen: set[str] = set()
    first = next(w for w in words if w in seen or seen.add(w))  # type: ignore[func-returns-value]
    for bits in (None, 1):
        with pytest.raises(ValueError, match="duplicate word in vocabulary") as err:
            WordIndex(words, bits=bits)
        assert str(err.value) == f"duplicate word in vocabulary: {first!r}"


def test_duplicate_in_a_file_is_a_format_error() -> None:
    buf = io.BytesIO()
    SimpleVocab(["a", "b", "c"]).write(buf)
    data = buf.getvalue().replace(b"\x01\x00\x00\x00c", b"\x01\x00\x00\x00a")
    with pytest.raises(FormatError, match="duplicate word in vocabulary: 'a'") as err:
        load_vocab(data)
    assert err.value.chunk == "SimpleVocab"


def test_build_index_and_constructor_errors() -> None:
    assert build_index(["x", "y"]) == {"x": 0, "y": 1}
    with pytest.raises(ValueError, match="duplicate word in vocabulary: 'x'"):
        SimpleVocab(["x", "y", "x"])
    with pytest.raises(TypeError, match="vocabulary words must be str"):
        SimpleVocab(["x", 1])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="bits"):
        WordIndex(["x"], bits=0)


def test_vocab_uses_the_index_and_a_given_dict_is_rebuilt() -> None:
    words = ["Berlin", "Potsdam"]
    v = SimpleVocab(words, {"Berlin": 0, "Potsdam": 1})
    assert isinstance(v.word_index, WordIndex)
    assert v.word_index == {"Berlin": 0, "Potsdam": 1}
    assert v.idx("Potsdam") == 1
    assert v["Berlin"] == 0
    assert "Potsdam" in v
    assert ["Berlin", "Potsdam"] in v
    index = build_index(words)
    assert SimpleVocab(words, index).word_index is index  # a reader's index is taken over, not rebuilt


@pytest.mark.filterwarnings("ignore::finalfusion.LegacyFormatWarning")
@pytest.mark.parametrize(
    "name", ["python-simple_vocab.fifu", "python-embeddings.fifu", "python-ff_buckets.fifu", "rust-similarity.fifu", "rust-quantized.fifu"]
)
def test_real_vocabularies(testdata: Path, name: str) -> None:
    vocab = load_vocab(testdata / name)
    words = vocab.words
    assert len(words) > 0
    assert_like_dict(vocab.word_index, reference(words), ["", "<unk>", "zz-not-a-word", *[w + "x" for w in words[:20]]])


@pytest.mark.filterwarnings("ignore::finalfusion.LegacyFormatWarning")
@pytest.mark.parametrize("name", EMBEDDING_FILES)
def test_real_batches_match_single_lookups(testdata: Path, name: str) -> None:
    emb = load_finalfusion(testdata / name)
    words = [*emb.vocab.words[::7], "zz-not-a-word", *emb.vocab.words[:3]]
    m, found = emb.embedding_batch(words)
    for w, row, f in zip(words, m, found, strict=True):
        single = emb.embedding(w)
        assert f == (single is not None), w
        assert np.array_equal(row, single if f else np.zeros_like(row)), w


def test_pickle_rebuilds_the_table_under_another_hash_seed(tmp_path: Path) -> None:
    words = [f"w{i}" for i in range(2000)] + ["é", "語", ""]
    index = WordIndex(words)
    data = pickle.dumps(index)
    # No table in the pickle: it is no bigger than the pickled word list.
    assert len(data) < len(pickle.dumps(words)) + 200
    assert pickle.loads(data) == index
    vocab_data = pickle.dumps(SimpleVocab(words))
    (tmp_path / "index.pkl").write_bytes(data)
    (tmp_path / "vocab.pkl").write_bytes(vocab_data)
    code = textwrap.dedent(
        f"""
        import pickle, sys
        words = {words!r}
        index = pickle.load(open(sys.argv[1], "rb"))
        vocab = pickle.load(open(sys.argv[2], "rb"))
        for w in words:
            assert index[w] == vocab.word_index[w] == vocab.idx(w) == words.index(w), w
        assert index.get("zz") is None and "zz" not in vocab
        assert vocab.word_index.words is vocab.words
        print("ok", hash("w1"))
        """
    )
    hashes = set()
    for seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        out = subprocess.run([sys.executable, "-c", code, str(tmp_path / "index.pkl"), str(tmp_path / "vocab.pkl")], env=env, capture_output=True, text=True)
        assert out.returncode == 0, out.stderr
        status, h = out.stdout.split()
        assert status == "ok"
        hashes.add(h)
    assert len(hashes) == 2  # the seeds really changed the string hashes


def test_lookup_accepts_any_sequence_or_iterable() -> None:
    index = WordIndex(["a", "b", "c"])
    assert index.lookup(("c", "a")).tolist() == [2, 0]
    assert index.lookup(iter(["b", "x"])).tolist() == [1, -1]  # type: ignore[arg-type]
    assert index.lookup(np.array(["c", "b"])).tolist() == [2, 1]  # type: ignore[arg-type]
    assert repr(index) == "WordIndex({'a': 0, 'b': 1, 'c': 2} (3 words))"
