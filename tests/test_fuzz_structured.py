"""The fuzzer's structure-aware generators for issue 13's classes (fuzz/fuzz.py, ``GENERATORS``).

Each generator is shown to produce what it claims (the test parses what it
made). For the classes fixed on main (ties, TOML, quantized counts,
dimensions, huge text headers, slow numbers, write targets) its inputs must
also end in a result or a FinalfusionError under the fuzzer's address-space
limit; for the classes being fixed elsewhere (n-gram explosion and long
words, non-finite norms, repeated chunks) only the shape is tested here --
the campaign checks the outcome.
"""

from __future__ import annotations

import importlib.util
import io
import os
import random
import struct
from pathlib import Path

import numpy as np
import pytest

from conftest import load_fuzz
from finalfusion import Embeddings, FinalfusionError, load_gguf, load_metadata
from finalfusion.compat.gguf import read_gguf
from finalfusion.metadata import Metadata
from finalfusion.storage import NdArray
from finalfusion.vocab import SimpleVocab

fuzz = load_fuzz()


def check(reader: str, data: bytes) -> None:
    with fuzz.address_space_limit(1024):
        out = fuzz.run_one(fuzz.READERS[reader], data)
    assert out["status"] in ("ok", "error"), out.get("tb", out)


@pytest.mark.parametrize("seed", range(40))
def test_hostile_toml_in_a_finalfusion_file_and_alone(seed: int) -> None:
    rng = random.Random(seed)
    toml = fuzz.hostile_toml(rng)
    base = fuzz.seed_inputs("finalfusion")[seed % len(fuzz.seed_inputs("finalfusion"))]
    check("finalfusion", fuzz._with_metadata(base, toml))
    with fuzz.address_space_limit(1024):
        out = fuzz.run_one(lambda data: Metadata.from_toml(data), toml)
    assert out["status"] in ("ok", "error"), out.get("tb", out)


def test_with_metadata_builds_a_valid_file() -> None:
    base = fuzz.seed_inputs("finalfusion")[0]
    assert load_metadata(fuzz._with_metadata(base, b'corpus = "x"')) == {"corpus": "x"}


@pytest.mark.parametrize("seed", range(12))
def test_tie_heavy_files_answer_zero_queries_in_word_order(seed: int) -> None:
    # exercise() checks that a zero query returns words in code-point order
    check("finalfusion", fuzz.tie_heavy_fifu(random.Random(seed)))


@pytest.mark.parametrize("seed", range(200))
def test_mutations_with_the_new_operators(seed: int) -> None:
    rng = random.Random(seed)
    seeds = fuzz.seed_inputs("finalfusion")
    check("finalfusion", fuzz.mutate(rng.choice(seeds), rng, seeds))


# -- every class of issue 13 has a generator -----------------------------------------


def test_every_class_has_a_generator() -> None:
    # classes 1 ties, 2/5 n-grams (fastText, floret, subword .fifu), 3 huge text headers (endless lines: endless_gzip),
    # 4 TOML, 6 quantized counts, 7 dims, 10 slow numbers, minor: non-finite norms, repeated chunks; 8 and 9 are exercise()'s
    expected = {"tie_heavy_fifu", "hostile_toml_fifu", "fasttext_ngram_bomb", "floret_ngram_bomb", "subword_fifu_bomb", "huge_text_header"}
    expected |= {"quantized_counts_fifu", "absurd_dims", "slow_text_numbers", "nonfinite_fifu", "repeated_chunks"}
    assert expected <= set(fuzz.GENERATORS)
    optional = {"lightseq-hdf5"} if importlib.util.find_spec("h5py") is None else set()  # registered only with h5py
    for name, (readers, _) in fuzz.GENERATORS.items():
        assert set(readers) <= set(fuzz.READERS) | {"load"} | optional, name
        for reader in readers:
            assert name in fuzz.generators_for(reader)


def frames(data: bytes) -> list[tuple[int, bytes]]:
    """(chunk id, body) of every chunk of a finalfusion file (bodies of any length)."""
    out = []
    pos = 12 + 4 * struct.unpack_from("<I", data, 8)[0]
    while pos < len(data):
        cid, length = struct.unpack_from("<IQ", data, pos)
        out.append((cid, data[pos + 12 : pos + 12 + length]))
        pos += 12 + length
    assert pos == len(data)
    return out


def read_string(body: bytes, pos: int) -> tuple[bytes, int]:
    (n,) = struct.unpack_from("<I", body, pos)
    return body[pos + 4 : pos + 4 + n], pos + 4 + n


# -- classes 2 and 5: n-gram explosion and long words (fixed on another branch: the shape only) ------


@pytest.mark.parametrize("seed", range(20))
def test_fasttext_ngram_bomb_is_the_seed_with_absurd_ranges_and_long_words(seed: int) -> None:
    data = fuzz.fasttext_ngram_bomb(random.Random(seed))
    seed_file = fuzz._fasttext_seed()
    assert data[:8] == seed_file[:8]  # magic and version
    args = struct.unpack_from("<12id", data, 8)
    assert (args[9], args[10]) in [*fuzz.NGRAM_RANGES, (-1, 6), (3, -1)]
    size, nwords, nlabels, _, prune = struct.unpack_from("<iiiqq", data, 64)
    assert size == nwords >= 1
    assert nlabels == 0
    assert prune == -1
    pos, words = 64 + 28, []
    for _ in range(nwords):
        end = data.index(b"\x00", pos)
        words.append(data[pos:end].decode("utf-8"))
        assert struct.unpack_from("<qb", data, end + 1) == (1, 0)
        pos = end + 10
    quantized, rows, cols = struct.unpack_from("<?qq", data, pos)
    assert not quantized
    assert rows == nwords + args[8]
    assert cols == args[0]
    pos += 17 + 4 * rows * cols
    assert struct.unpack_from("<?qq", data, pos) == (False, nwords, cols)
    assert len(data) == pos + 17 + 4 * nwords * cols


def test_fasttext_ngram_bomb_stores_long_words_in_every_script() -> None:
    lengths, scripts = set(), set()
    for seed in range(60):
        data = fuzz.fasttext_ngram_bomb(random.Random(seed))
        words = data[92:].split(b"\x00")[:-1]
        longest = max(words, key=len).decode("utf-8", "ignore")
        if len(longest) >= 3000:
            lengths.add(len(longest))
            scripts.add(max(len(c.encode("utf-8")) for c in longest))
    assert lengths >= {3000, 300_000}
    assert scripts >= {1, 2, 3, 4}


@pytest.mark.parametrize("seed", range(20))
def test_floret_ngram_bomb_header(seed: int) -> None:
    data = fuzz.floret_ngram_bomb(random.Random(seed))
    head, *rows = data.decode("utf-8").split("\n")
    fields = head.split(" ")
    assert len(fields) == 8
    buckets, dims, min_n, max_n = map(int, fields[:4])
    assert (min_n, max_n) in [*fuzz.NGRAM_RANGES_U32, (0, 6), (4, 4)]
    assert rows[-1] == ""
    assert len(rows) - 1 == buckets
    assert all(len(row.split(" ")) == dims + 1 for row in rows[:-1])


@pytest.mark.parametrize("seed", range(20))
def test_subword_fifu_bomb_frames_a_subword_vocabulary_and_its_storage(seed: int) -> None:
    data = fuzz.subword_fifu_bomb(random.Random(seed))
    (kind, vocab), (storage_id, storage) = frames(data)
    assert kind in (3, 7, 8, 9)
    assert storage_id == 2
    rows, _cols, type_id = struct.unpack_from("<QII", storage)
    assert type_id == 10
    if kind == 9:
        min_n, max_n, buckets = struct.unpack_from("<IIQ", vocab)
        assert rows == buckets
    elif kind == 8:
        n, m, min_n, max_n = struct.unpack_from("<QQII", vocab)
        assert rows == n + m
    else:
        n, min_n, max_n, third = struct.unpack_from("<QIII", vocab)
        assert rows == n + (2**third if kind == 3 else third)
    assert (min_n, max_n) in fuzz.NGRAM_RANGES_U32


def test_subword_fifu_bomb_covers_every_vocabulary_huge_max_n_and_long_words() -> None:
    kinds, max_ns, longest = set(), set(), 0
    for seed in range(80):
        data = fuzz.subword_fifu_bomb(random.Random(seed))
        kinds.add(frames(data)[0][0])
        max_ns.add(max(fuzz.NGRAM_RANGES_U32, key=lambda r: data.find(struct.pack("<II", *r)) >= 0)[1])
        longest = max(longest, max(len(w) for w in data.split(b"\x00")))
    assert kinds == {3, 7, 8, 9}
    assert 2**32 - 1 in max_ns
    assert 2**31 - 1 in max_ns
    assert longest >= 3000


def test_long_words_have_the_length_and_script_asked_for() -> None:
    rng = random.Random(1)
    for chars in (1, 3000, 300_000):
        word = fuzz.long_word(rng, chars)
        assert len(word) == chars
        assert any(set(word) <= set(script) for script in fuzz.LONG_WORD_SCRIPTS)


class Recorder:
    """Stands in for embeddings: records the words looked up."""

    #: The width the fuzzer counts the answers' bytes by (fuzz.ANSWER_BYTES).
    dims = 4

    def __init__(self) -> None:
        self.single: list[str] = []
        self.batches: list[list[str]] = []

    def embedding(self, word: str) -> None:
        self.single.append(word)

    def embedding_with_norm(self, word: str) -> None:
        self.single.append(word)

    def embedding_batch(self, words: list[str]) -> None:
        self.batches.append(words)


def test_exercise_looks_up_long_unknown_words_from_1_kib_to_1_mib_and_a_batch_of_them() -> None:
    sizes, batches = set(), set()
    for seed in range(200):
        rec = Recorder()
        fuzz._long_lookups(rec, random.Random(seed))
        (word, again), (batch,) = rec.single, rec.batches
        assert word == again
        nbytes = len(word.encode("utf-8"))
        size = min(fuzz.LONG_LOOKUP_BYTES, key=lambda n: abs(n - nbytes))
        assert size // 2 <= nbytes <= size * 5 // 4
        sizes.add(size)
        assert len(batch) >= 4
        assert len(set(batch)) == len(batch)
        nbytes = sum(len(w.encode("utf-8")) for w in batch)
        assert fuzz.LONG_BATCH_SMALL_BYTES // 4 <= nbytes <= 2 * fuzz.LONG_BATCH_BYTES
        batches.add(nbytes >= fuzz.LONG_BATCH_BYTES // 4)
    assert sizes == set(fuzz.LONG_LOOKUP_BYTES)
    assert batches == {True, False}  # 64 KiB and 1 MiB batches


def test_exercise_does_the_long_lookups_for_some_results() -> None:
    emb = small_embeddings()
    done = 0
    for crc in range(200):
        fuzz.INPUT_CRC[0] = crc
        done += fuzz._exercise_rng(emb).random() < fuzz.LONG_LOOKUP_RATE
    assert 2 <= done <= 30


# -- non-finite values, repeated chunks (fixed on other branches: the shape only) ------


def test_nonfinite_fifu_stores_nan_inf_negative_and_subnormal_norms() -> None:
    seen: set[str] = set()
    for seed in range(40):
        chunks = frames(fuzz.nonfinite_fifu(random.Random(seed)))
        assert [cid for cid, _ in chunks] in ([1, 2], [1, 2, 6])
        (n,) = struct.unpack_from("<Q", chunks[0][1])
        rows, _cols, _ = struct.unpack_from("<QII", chunks[1][1])
        assert rows == n
        if len(chunks) == 3:
            body = chunks[2][1]
            assert struct.unpack_from("<Q", body) == (n,)
            values = np.frombuffer(body[len(body) - 4 * n :], dtype="<f4")
            seen |= {"nan"} if np.isnan(values).any() else set()
            seen |= {"inf"} if np.isinf(values).any() else set()
            seen |= {"negative"} if (values < 0).any() else set()
            seen |= {"subnormal"} if ((values != 0) & (np.abs(values) < np.finfo(np.float32).tiny)).any() else set()
    assert seen == {"nan", "inf", "negative", "subnormal"}


def test_repeated_chunks_repeats_one_chunk_up_to_40000_times() -> None:
    counts = set()
    for seed in range(30):
        data = fuzz.repeated_chunks(random.Random(seed))
        chunks = frames(data)
        ids = {cid for cid, _ in chunks[:-1]}
        assert len(ids) == 1
        assert chunks[-1][0] == 2
        counts.add(len(chunks) - 1)
        assert len(data) <= 2 << 20
    assert {2, 40_000} <= counts


# -- classes fixed on main: shape and outcome ----------------------------------------


@pytest.mark.parametrize("seed", range(30))
def test_quantized_counts_are_refused_or_read(seed: int) -> None:
    data = fuzz.quantized_counts_fifu(random.Random(seed))
    (_, _vocab), (cid, body) = frames(data)
    assert cid == 4
    proj, norms, _q, _d, _k, _rows, code_type, recon_type = struct.unpack_from("<IIIIIQII", body)
    assert (code_type, recon_type) == (1, 10)
    assert proj in (0, 1)
    assert norms in (0, 1)
    check("finalfusion", data)


def test_quantized_counts_include_zero_and_inconsistent_ones() -> None:
    seen = set()
    for seed in range(100):
        _, (_, body) = frames(fuzz.quantized_counts_fifu(random.Random(seed)))
        _, _, q, d, k = struct.unpack_from("<IIIII", body)
        seen |= {"q=0"} if q == 0 else set()
        seen |= {"d=0"} if d == 0 else set()
        seen |= {"k=0"} if k == 0 else set()
        seen |= {"d%q"} if q and d % q else set()
    assert seen == {"q=0", "d=0", "k=0", "d%q"}


@pytest.mark.parametrize("reader", ["finalfusion", "word2vec", "text_dims", "floret", "fasttext", "load"])
@pytest.mark.parametrize("seed", range(8))
def test_absurd_dims_are_refused(seed: int, reader: str) -> None:
    data = fuzz.absurd_dims(random.Random(seed), reader)
    if data.startswith(b"FiFu"):
        (_, _), (_, storage) = frames(data)
        assert struct.unpack_from("<QI", storage)[1] in {d % 2**32 for d in fuzz.ABSURD_DIMS}
    elif data.startswith(fuzz._fasttext_seed()[:4]):
        assert reader in ("fasttext", "load")
        assert struct.unpack_from("<i", data, 8)[0] in {min(d, 2**31 - 1) for d in fuzz.ABSURD_DIMS} | {-1}
    else:
        assert int(data.split(b"\n", 1)[0].split()[1]) in fuzz.ABSURD_DIMS
    check(reader, data)


@pytest.mark.parametrize("reader", ["word2vec", "text_dims", "load"])
@pytest.mark.parametrize("seed", range(10))
def test_huge_text_headers_are_refused_or_read(seed: int, reader: str) -> None:
    data = fuzz.huge_text_header(random.Random(seed), reader)
    rows, dims = data.split(b"\n", 1)[0].split(b" ")
    assert int(rows) >= -1
    assert int(dims) >= -3
    if reader != "load":
        assert (b"0.25" in data) == (reader == "text_dims")
    check(reader, data)


# -- GGUF: well-framed files with drawn values -----------------------------------------------


def _needs_gguf_extras() -> None:
    # K-quants decode through gguf; exercise() tokenizes unknown words with tokenizers / sentencepiece
    for module in ("gguf", "tokenizers", "sentencepiece"):
        pytest.importorskip(module)


@pytest.mark.parametrize("reader", ["gguf", "load"])
@pytest.mark.parametrize("seed", range(40))
def test_gguf_structured_files_are_answered_or_refused(seed: int, reader: str) -> None:
    _needs_gguf_extras()
    data = fuzz.gguf_structured(random.Random(seed), reader)
    assert data.startswith(b"GGUF")
    check(reader, data)


def test_gguf_structured_files_read_the_same_in_gguf_py(tmp_path: Path) -> None:
    # gguf-py's own reader is the second opinion on what the generator framed: the same keys, tensors, shapes and types
    gguf = pytest.importorskip("gguf")
    compared = 0
    for seed in range(150):
        data = fuzz.gguf_structured(random.Random(seed))
        try:
            ours = read_gguf(data)
        except FinalfusionError:
            continue
        path = tmp_path / f"{seed}.gguf"
        path.write_bytes(data)
        theirs = gguf.GGUFReader(path)
        assert set(ours.kv) == {k for k in theirs.fields if not k.startswith("GGUF.")}, seed
        assert {t.name: (tuple(int(d) for d in t.shape), int(t.tensor_type)) for t in theirs.tensors} == {
            name: (t.ne, t.ggml_type) for name, t in ours.tensors.items()
        }, seed
        assert theirs.alignment == ours.alignment, seed
        compared += 1
    assert compared >= 60


def test_gguf_structured_reaches_every_tokenizer_tensor_type_and_byte_order() -> None:
    _needs_gguf_extras()
    seen: set[tuple[str, object]] = set()
    for seed in range(300):
        data = fuzz.gguf_structured(random.Random(seed))
        try:
            emb = load_gguf(data, normalize=False)
        except FinalfusionError:
            continue
        head = read_gguf(data)
        seen |= {("type", head.tensors["token_embd.weight"].ggml_type), ("order", head.byte_order)}
        tokenizer = getattr(emb.vocab, "tokenizer", None)
        seen.add(("tokenizer", tokenizer.kind if tokenizer is not None else None))
    expected = {("type", t) for t in fuzz.GGUF_TENSOR_TYPES} | {("order", "<"), ("order", ">")}
    expected |= {("tokenizer", "huggingface"), ("tokenizer", "sentencepiece-llamacpp"), ("tokenizer", None)}
    assert expected <= seen, expected - seen


@pytest.mark.parametrize("reader", ["text", "text_dims"])
@pytest.mark.parametrize("seed", range(3))
def test_slow_text_numbers(seed: int, reader: str) -> None:
    data = fuzz.slow_text_numbers(random.Random(seed), reader)
    assert len(data) <= (1 << 20) + 32
    body = data.split(b"\n", 1)[1] if reader == "text_dims" else data
    first = body.split(b"\n", 1)[0].split()
    assert first[0] == b"w0"
    assert set(first[1:]) <= set(fuzz.SLOW_NUMBERS)
    check(reader, data)


# -- class 9: special write targets ----------------------------------------------------


def small_embeddings() -> Embeddings:
    return Embeddings(NdArray(np.arange(6, dtype=np.float32).reshape(3, 2)), SimpleVocab(["a", "b", "c"]))


@pytest.mark.parametrize("kind", fuzz.WRITE_TARGETS)
def test_write_targets_follow_the_documented_semantics(kind: str) -> None:
    emb = small_embeddings()
    buf = io.BytesIO()
    emb.write(buf)
    fuzz._write_to_special_target(emb, buf.getvalue(), kind)
    if kind == "device" and fuzz._CAN_MKNOD != [True]:
        pytest.skip("cannot create a device node here (not root, or mknod refused)")


class NaiveWriter:
    """Writes the way issue 13's class 9 found: ``open(path, "wb")`` on the path itself, or a plain replace."""

    def __init__(self, replace: bool) -> None:
        self.replace = replace

    def write(self, path: str) -> None:
        if self.replace:  # a temporary file renamed over the path: a symlink becomes a regular file
            tmp = os.path.join(os.path.dirname(path), "tmp")
            with open(tmp, "wb") as f:
                f.write(b"data")
            os.replace(tmp, path)
        else:
            with open(path, "wb") as f:
                f.write(b"data")


@pytest.mark.parametrize(("kind", "replace"), [("symlink-file", True), ("symlink-dir", True), ("fifo", True), ("long-name", False)])
def test_write_target_checks_catch_naive_writers(kind: str, replace: bool) -> None:
    with pytest.raises(AssertionError):
        fuzz._write_to_special_target(NaiveWriter(replace), b"data" if kind != "long-name" else b"other", kind)


def test_a_fifo_write_that_fails_before_opening_does_not_hang() -> None:
    class Failing:
        def write(self, path: str) -> None:
            raise OSError("refused")

    with pytest.raises(OSError, match="refused"):
        fuzz._write_to_special_target(Failing(), b"", "fifo")


# -- text writers round trip -----------------------------------------------------------


def test_text_round_trips_pass_for_ordinary_embeddings_and_refuse_unrepresentable_words() -> None:
    fuzz._text_round_trips(small_embeddings())
    emb = Embeddings(NdArray(np.ones((2, 2), np.float32)), SimpleVocab(["a b", ""]))
    fuzz._text_round_trips(emb)  # the writers refuse such words (ValueError naming them): not a finding


def test_text_round_trips_catch_a_file_its_reader_rejects(monkeypatch: pytest.MonkeyPatch) -> None:
    import finalfusion.compat as compat

    def broken(file: io.BytesIO, embeddings: Embeddings) -> None:
        file.write(b"1 2\nx 0.5\n")  # one component short

    monkeypatch.setattr(compat, "write_text_dims", broken)
    with pytest.raises(AssertionError, match="write_text_dims wrote a file that load_text_dims rejects"):
        fuzz._text_round_trips(small_embeddings())


def test_exercise_refuses_non_string_keys_by_type() -> None:
    emb = small_embeddings()
    assert fuzz.exercise(emb) is emb


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.slow
def test_generated_campaign_inputs_are_counted_per_generator(seed: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    gens = {name: fuzz.GENERATORS[name] for name in ("tie_heavy_fifu", "quantized_counts_fifu", "absurd_dims")}
    monkeypatch.setattr(fuzz, "GENERATORS", gens)
    monkeypatch.setattr(fuzz, "GENERATED_RATE", 1.0)
    stats = fuzz.campaign(["finalfusion"], 600.0, seed, 20.0, 1024, 1000, tmp_path, 1 << 20, executions=4)
    assert stats["executions"] == 4
    assert sum(sum(c.values()) for c in stats["generators"].values()) == 4
    assert stats["findings"] == []
