"""gensim's ``kv.save(fname)`` and ``KeyedVectors.load(fname)`` spellings, side by side with gensim.

Files written by gensim (one file, arrays stored aside in ``.npy`` files,
compressed with ``.npz`` arrays, memory-mapped) load here with gensim's words
and vectors; files ``Embeddings.save`` writes load in gensim's
``KeyedVectors.load`` with the same. The reader treats the pickle as data:
names other than gensim's two classes and numpy arrays are refused unread.
"""

from __future__ import annotations

import io
import os
import pickle
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from finalfusion import Embeddings, FormatError, NdArray, Norms, SimpleVocab
from finalfusion.vocab import FastTextVocab

gensim_models = pytest.importorskip("gensim.models", reason="gensim (the gensim or interop extra) is not installed")

SENTENCES = [["the", "quick", "brown", "fox", "jumps", "over", "the", "lazy", "dog"], ["a", "quick", "brown", "dog", "sleeps"]] * 20
UNKNOWN = ["quickest", "foxes", "zebra"]


def keyed_vectors(dtype: Any = np.float32) -> Any:
    rng = np.random.default_rng(3)
    kv = gensim_models.KeyedVectors(8, dtype=dtype)
    kv.add_vectors([f"w{i}" for i in range(40)] + ["Berlin", "Köln"], rng.standard_normal((42, 8)).astype(dtype))
    return kv


def fasttext_vectors() -> Any:
    model = gensim_models.FastText(vector_size=6, min_count=1, bucket=97, min_n=2, max_n=4, seed=1, workers=1)
    model.build_vocab(SENTENCES)
    model.train(SENTENCES, total_examples=len(SENTENCES), epochs=2)
    return model.wv


def assert_same(emb: Embeddings, kv: Any) -> None:
    assert emb.index_to_key == kv.index_to_key
    np.testing.assert_array_equal(emb.vectors, kv.vectors)
    for w in kv.index_to_key[:5]:
        np.testing.assert_array_equal(emb[w], kv[w])
        np.testing.assert_array_equal(emb.get_vector(w), kv.get_vector(w))


@pytest.mark.parametrize("save", ["one file", "arrays aside", "compressed"])
def test_files_gensim_saves_load_with_gensims_vectors(tmp_path: Path, save: str) -> None:
    kv = keyed_vectors()
    path = tmp_path / ("vectors.kv.gz" if save == "compressed" else "vectors.kv")
    kv.save(str(path), sep_limit=0 if save != "one file" else 10 * 1024**2)
    aside = sorted(p.name for p in tmp_path.iterdir() if p != path)
    assert aside == ({"one file": [], "arrays aside": ["vectors.kv.vectors.npy"], "compressed": ["vectors.kv.gz.vectors.npz"]}[save])
    emb = Embeddings.load(path)
    assert isinstance(emb.vocab, SimpleVocab)
    assert emb.norms is None, "kept as stored, as load_word2vec_format keeps them"
    assert_same(emb, gensim_models.KeyedVectors.load(str(path)))


def test_mmap_maps_the_vectors_stored_aside(tmp_path: Path) -> None:
    kv = keyed_vectors()
    path = tmp_path / "vectors.kv"
    kv.save(str(path), sep_limit=0)
    emb = Embeddings.load(str(path), mmap="r")
    base = emb.storage.matrix
    while base is not None and not isinstance(base, np.memmap):
        base = base.base
    assert isinstance(base, np.memmap), "the rows are a view of the mapped .npy file"
    assert_same(emb, gensim_models.KeyedVectors.load(str(path), mmap="r"))
    with pytest.raises(ValueError, match="mmap must be None or 'r'"):
        Embeddings.load(str(path), mmap="r+")


def test_float64_vectors_become_float32(tmp_path: Path) -> None:
    kv = keyed_vectors(np.float64)
    kv.save(str(tmp_path / "v.kv"))
    emb = Embeddings.load(tmp_path / "v.kv")
    assert emb.storage.matrix.dtype == np.float32
    np.testing.assert_array_equal(emb.vectors, kv.vectors.astype(np.float32))


@pytest.mark.parametrize("sep_limit", [0, 10 * 1024**2], ids=["arrays aside", "one file"])
def test_fasttext_keyedvectors_keep_their_buckets(tmp_path: Path, sep_limit: int) -> None:
    kv = fasttext_vectors()
    path = tmp_path / "ft.kv"
    kv.save(str(path), sep_limit=sep_limit)
    emb = Embeddings.load(path)
    gensim_kv = gensim_models.KeyedVectors.load(str(path))
    assert isinstance(emb.vocab, FastTextVocab)
    assert (emb.vocab.subword_indexer.n_buckets, emb.vocab.subword_indexer.min_n, emb.vocab.subword_indexer.max_n) == (97, 2, 4)
    # gensim saved no word vectors (it recomposes them from vectors_vocab and the n-gram rows on load): so do we.
    assert_same(emb, gensim_kv)
    for w in UNKNOWN:
        np.testing.assert_allclose(emb.get_vector(w), gensim_kv.get_vector(w), rtol=1e-5, atol=1e-7)


def test_our_save_loads_in_gensim_with_the_raw_vectors(tmp_path: Path) -> None:
    rows = np.array([[0.6, 0.8], [0, 1], [1, 0]], dtype=np.float32)
    emb = Embeddings(NdArray(rows), SimpleVocab(["a", "b", "Köln"]), Norms([5.0, 2.0, 0.5]))
    path = tmp_path / "ours.kv"
    emb.save(path)
    assert sorted(os.listdir(tmp_path)) == ["ours.kv"], "one file: no arrays aside, no temporary file left"
    kv = gensim_models.KeyedVectors.load(str(path))
    assert kv.index_to_key == ["a", "b", "Köln"]
    np.testing.assert_array_equal(kv.vectors, emb.vectors)
    np.testing.assert_array_equal(kv["a"], [3.0, 4.0])
    # and back: our reader gives gensim's answer for the same file
    assert_same(Embeddings.load(path), kv)


def test_our_save_of_fasttext_vectors_loads_in_gensim(tmp_path: Path) -> None:
    emb = Embeddings.from_gensim(fasttext_vectors())
    buf = io.BytesIO()
    emb.save(buf)  # a file object as well as a path
    (tmp_path / "ft.kv").write_bytes(buf.getvalue())
    kv = gensim_models.KeyedVectors.load(str(tmp_path / "ft.kv"))
    assert type(kv).__name__ == "FastTextKeyedVectors"
    np.testing.assert_allclose(kv.vectors, emb.vectors, rtol=1e-5, atol=1e-6)
    for w in UNKNOWN:
        np.testing.assert_allclose(kv.get_vector(w), emb.get_vector(w), rtol=1e-4, atol=1e-6)
    back = Embeddings.load(buf.getvalue())
    assert isinstance(back.vocab, FastTextVocab)
    np.testing.assert_array_equal(back.vectors, kv.vectors)


class _Runs:
    """A pickle that would create a directory when unpickled by pickle.load."""

    def __init__(self, target: str) -> None:
        self.target = target

    def __reduce__(self) -> Any:
        return (os.mkdir, (self.target,))


def test_a_pickle_naming_other_code_is_refused_unrun(tmp_path: Path) -> None:
    target = tmp_path / "created-by-the-pickle"
    with pytest.raises(FormatError, match=r"found posix\.mkdir|found nt\.mkdir") as e:
        Embeddings.load(pickle.dumps(_Runs(str(target))))
    assert "gensim KeyedVectors file" in str(e.value)
    assert not target.exists()


def test_a_whole_word2vec_model_is_named_and_refused(tmp_path: Path) -> None:
    model = gensim_models.Word2Vec(SENTENCES, vector_size=4, min_count=1, workers=1, seed=1)
    model.save(str(tmp_path / "w2v.model"))
    with pytest.raises(FormatError, match=r"model\.wv\.save\(fname\).*found gensim\.models\.word2vec\.Word2Vec"):
        Embeddings.load(tmp_path / "w2v.model")
    model.wv.save(str(tmp_path / "w2v.kv"))
    assert_same(Embeddings.load(tmp_path / "w2v.kv"), model.wv)


def test_arrays_aside_are_opened_only_by_their_known_names_beside_the_file(tmp_path: Path) -> None:
    kv = keyed_vectors()
    kv.__dict__["__numpys"] = ["../../outside"]
    data = pickle.dumps(kv, protocol=4)
    (tmp_path / "v.kv").write_bytes(data)
    with pytest.raises(FormatError, match=r"an unknown array stored aside.*found '\.\./\.\./outside'"):
        Embeddings.load(tmp_path / "v.kv")
    kv.__dict__["__numpys"] = ["vectors"]
    (tmp_path / "v.kv").write_bytes(pickle.dumps(kv, protocol=4))
    with pytest.raises(FormatError, match=r"'vectors' stored aside is missing"):
        Embeddings.load(tmp_path / "v.kv")
    with pytest.raises(FormatError, match="pass the pickle's path"):
        Embeddings.load((tmp_path / "v.kv").read_bytes())


def test_vectors_that_do_not_match_the_words_are_a_format_error(tmp_path: Path) -> None:
    kv = keyed_vectors()
    kv.__dict__["vectors"] = kv.vectors[:3]
    with pytest.raises(FormatError, match=r"bad 'vectors': expected a float array of shape \(42, 8\), found float32 array of shape \(3, 8\)"):
        Embeddings.load(pickle.dumps(kv, protocol=4))
    with pytest.raises(FormatError, match="not a readable pickle"):
        Embeddings.load(pickle.dumps(keyed_vectors(), protocol=4)[:200])


def test_fasttext_vectors_with_gensims_old_hashing_are_refused_as_gensim_refuses_them(tmp_path: Path) -> None:
    kv = fasttext_vectors()
    kv.compatible_hash = False
    kv.save(str(tmp_path / "old.kv"))
    with pytest.raises(TypeError, match="nonstandard hashing"):
        gensim_models.KeyedVectors.load(str(tmp_path / "old.kv"))
    with pytest.raises(FormatError, match="expected compatible_hash=True, found False"):
        Embeddings.load(tmp_path / "old.kv")


def test_a_pickle_cannot_allocate_an_array_of_a_shape_it_names() -> None:
    """numpy.ndarray resolves to a marker: a pickle calling it (or _reconstruct with a big shape) is refused, nothing allocated."""
    billion = b"J\x00\xca\x9a;\x85"  # the tuple (1_000_000_000,)
    call_ndarray = b"\x80\x04cnumpy\nndarray\n" + billion + b"R."
    with pytest.raises(FormatError, match="not a readable pickle"):
        Embeddings.load(call_ndarray)
    reconstruct = b"\x80\x04cnumpy._core.multiarray\n_reconstruct\ncnumpy\nndarray\n" + billion + b"C\x01b\x87R."
    with pytest.raises(FormatError, match=r"an array built otherwise than numpy pickles arrays.*\(1000000000,\)"):
        Embeddings.load(reconstruct)


def test_a_file_that_is_no_pickle_points_to_finalfusion_load(tmp_path: Path) -> None:
    emb = Embeddings(NdArray(np.eye(2, dtype=np.float32)), SimpleVocab(["a", "b"]))
    emb.write(tmp_path / "e.fifu")
    with pytest.raises(FormatError, match=r"not a pickle \(finalfusion\.load reads .*found b'Fi' \(at byte offset 0\)"):
        Embeddings.load(tmp_path / "e.fifu")


def test_fasttext_keyedvectors_without_buckets_are_their_word_vectors(tmp_path: Path) -> None:
    model = gensim_models.FastText(vector_size=4, min_count=1, bucket=0, seed=1, workers=1)
    model.build_vocab(SENTENCES)
    model.train(SENTENCES, total_examples=len(SENTENCES), epochs=1)
    model.wv.save(str(tmp_path / "nob.kv"))
    emb = Embeddings.load(tmp_path / "nob.kv")
    assert isinstance(emb.vocab, SimpleVocab)
    assert_same(emb, gensim_models.KeyedVectors.load(str(tmp_path / "nob.kv")))


@pytest.mark.parametrize("protocol", [2, 3, 4, 5])
@pytest.mark.parametrize("kind", ["KeyedVectors", "FastTextKeyedVectors"])
def test_every_pickle_protocol_gensim_saves_with_loads(tmp_path: Path, protocol: int, kind: str) -> None:
    # protocol 2 spells bytes as _codecs.encode(str, 'latin1') and sets as __builtin__.frozenset, 3 builtins.frozenset,
    # 5 numpy arrays as numpy._core.numeric._frombuffer: each read as data (the fuzzer's generator found 2, 3 and 5 refused)
    kv = keyed_vectors() if kind == "KeyedVectors" else fasttext_vectors()
    path = tmp_path / "v.kv"
    kv.save(str(path), pickle_protocol=protocol)
    emb = Embeddings.load(path)
    gensim_kv = gensim_models.KeyedVectors.load(str(path))
    assert_same(emb, gensim_kv)
    if kind == "FastTextKeyedVectors":
        for w in UNKNOWN:
            np.testing.assert_allclose(emb.get_vector(w), gensim_kv.get_vector(w), rtol=1e-5, atol=1e-7)


def test_protocol_2_and_5_spellings_are_data_only() -> None:
    # _codecs.encode only as pickle spells bytes; _frombuffer only over exactly the bytes its shape needs
    with pytest.raises(FormatError, match=r"bytes spelt otherwise.*found str, 'rot13'"):
        Embeddings.load(b"\x80\x02c_codecs\nencode\nX\x01\x00\x00\x00aX\x05\x00\x00\x00rot13\x86R.")
    args = b"(C\x08" + bytes(8) + b"cnumpy\ndtype\nX\x02\x00\x00\x00f4\x85RJ\x00\xca\x9a;\x85X\x01\x00\x00\x00Ct"  # (8 bytes, f4, (10**9,), "C")
    frombuffer = b"\x80\x05cnumpy._core.numeric\n_frombuffer\n" + args + b"R."
    with pytest.raises(FormatError, match=r"an array whose bytes do not match its shape.*found 8 bytes"):
        Embeddings.load(frombuffer)


def test_a_key_that_is_none_is_refused() -> None:
    # found by the fuzzer: the check for a non-str key took None for "no bad key found"
    kv = keyed_vectors()
    kv.__dict__["index_to_key"] = [*kv.index_to_key[:-1], None]
    with pytest.raises(FormatError, match=r"a key is not a str.*found NoneType None"):
        Embeddings.load(pickle.dumps(kv, protocol=4))


def test_an_array_aside_is_exactly_the_size_its_header_declares(tmp_path: Path) -> None:
    # np.load reads what the header declares and ignores the rest: a 3 GiB file holding 40 x 8 floats is refused by size
    keyed_vectors().save(str(tmp_path / "v.kv"), sep_limit=0)
    aside = tmp_path / "v.kv.vectors.npy"
    good = aside.read_bytes()
    with open(aside, "ab") as f:
        f.truncate(3 << 30)
    for mmap in (None, "r"):
        with pytest.raises(FormatError, match=r"'vectors' stored aside .* is not the size its header declares: expected 1472 bytes"):
            Embeddings.load(tmp_path / "v.kv", mmap=mmap)  # type: ignore[arg-type]
    aside.write_bytes(good[:-4])
    with pytest.raises(FormatError, match="not the size its header declares"):
        Embeddings.load(tmp_path / "v.kv")


def test_a_compressed_array_aside_expands_within_the_gzip_bound(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    kv = gensim_models.KeyedVectors(64)
    vectors = np.random.default_rng(0).integers(0, 4, (20_000, 64)).astype(np.float32)  # compresses about 10x
    kv.add_vectors([f"w{i}" for i in range(20_000)], vectors)
    kv.save(str(tmp_path / "v.kv.gz"), sep_limit=0)
    np.testing.assert_array_equal(Embeddings.load(tmp_path / "v.kv.gz").vectors, vectors)
    monkeypatch.setattr("finalfusion.limits.MAX_GZIP_EXPANSION", 1)
    with pytest.raises(FormatError, match=r"expands past the limit MAX_GZIP_EXPANSION: expected at most \d+ bytes, found 5120128 bytes"):
        Embeddings.load(tmp_path / "v.kv.gz")


def test_declared_lengths_past_the_file_are_format_errors(tmp_path: Path) -> None:
    # found by the fuzzer: a FRAME of 2**64 - 1 bytes was an OverflowError; a frame or bytes claiming 256 GiB are read in
    # steps (a frame) or refused when the unpickler cannot allocate them (bytes): never more than the file holds is read
    for claim in (b"\x95" + (2**64 - 1).to_bytes(8, "little"), b"\x95" + (1 << 38).to_bytes(8, "little"), b"\x8e" + (1 << 38).to_bytes(8, "little")):
        (tmp_path / "c.kv").write_bytes(b"\x80\x04" + claim + b"abc")
        with pytest.raises(FormatError, match="not a readable pickle"):
            Embeddings.load(tmp_path / "c.kv")


def test_the_unpickler_allocates_nothing_ahead_of_the_bytes() -> None:
    # found by the fuzzer: the C unpickler sizes its memo by the largest PUT index (2.5 KB grew 350 MB; index 2**31 would
    # be 16 GiB), and allocates a BYTEARRAY8's declared length before reading it
    import resource

    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    put_far = b"\x80\x04N" + b"r" + (2**31).to_bytes(4, "little") + b"."  # None, memoized at index 2**31
    with pytest.raises(FormatError, match="holds no gensim KeyedVectors"):
        Embeddings.load(put_far)
    with pytest.raises(FormatError, match=r"not a readable pickle.*truncated"):
        Embeddings.load(b"\x80\x05\x96" + (1 << 36).to_bytes(8, "little") + b"abc.")
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 100_000  # KiB


def test_a_pickle_cannot_set_attributes_of_the_readers_classes() -> None:
    # BUILD applies a state only to an array or a record instance: not to the class a GLOBAL names (which would change
    # every later load in the process), nor to a function
    from finalfusion.compat import _gensim_pickle

    on_class = b"\x80\x02cgensim.models.keyedvectors\nKeyedVectors\nN}X\x04\x00\x00\x00kindX\x04\x00\x00\x00evils\x86b."
    with pytest.raises(FormatError, match=r"a state for something else than an array or a record: .*found type"):
        Embeddings.load(on_class)
    assert _gensim_pickle._Record.kind == "KeyedVectors"
    on_function = b"\x80\x02cnumpy._core.multiarray\n_reconstruct\n}X\x01\x00\x00\x00aK\x01sb."
    with pytest.raises(FormatError, match="found function"):
        Embeddings.load(on_function)


def test_numpy_states_are_checked_before_numpy_sees_them() -> None:
    # found by the fuzzer: numpy's C dtype.__setstate__ raised SystemError on a crafted state
    dtype = b"cnumpy\ndtype\nX\x02\x00\x00\x00f4\x89\x88\x87R"
    bad_state = b"(K\x03X\x01\x00\x00\x00<NNNJ\x00\x01\x00\x00J\xff\xff\xff\xffK\x00tb."
    with pytest.raises(FormatError, match="an array type with fields or sizes"):
        Embeddings.load(b"\x80\x02" + dtype + bad_state)
    with pytest.raises(FormatError, match=r"an array type other than a number: .*'O'"):
        Embeddings.load(b"\x80\x02cnumpy\ndtype\nX\x01\x00\x00\x00O\x89\x88\x87R.")
