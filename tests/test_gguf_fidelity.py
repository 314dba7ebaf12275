"""GGUF fidelity: write_gguf keeps every tokenizer key of the source (read back with gguf-py's GGUFReader), and the
llama/t5 SentencePiece model is serialised lazily, byte for byte as protobuf writes it, with the same tokens.

Source files are written by gguf-py's GGUFWriter from tokenizers trained here with sentencepiece and tokenizers;
llama.cpp's own ``models/ggml-vocab-*.gguf`` files are checked too when a directory of them is given in
``FINALFUSION_LLAMACPP_KEYS`` (they ship in the llama-cpp-python sdist, ``vendor/llama.cpp/models``).
"""

from __future__ import annotations

import copy
import json
import os
import pickle
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from _model_helpers import corpus, random_words, train_byte_level_bpe, train_sentencepiece, train_wordpiece
from finalfusion import FormatError, load_finalfusion, load_gguf, write_gguf
from finalfusion.compat._spmodel import LazySentencePieceTokenizer, LlamaCppSentencePieceTokenizer, SentencePieceModel
from finalfusion.vocab import HuggingFaceTokenizer, TokenizerVocab

WORDS = random_words(200, seed=25)
#: llama.cpp's vocabularies, for the kept-keys check on real files: a separate opt-in from test_llamacpp_vocabs.py's
#: FINALFUSION_LLAMACPP_VOCABS, because copying and comparing every key through gguf-py's reader takes about 80 s per
#: vocabulary here (25 minutes for the 19), too long for CI: FINALFUSION_LLAMACPP_KEYS=DIR.
VOCAB_DIR = Path(os.environ.get("FINALFUSION_LLAMACPP_KEYS", "/nonexistent"))


def _types(sp: Any) -> list[int]:
    out = []
    for i in range(sp.GetPieceSize()):
        out.append(2 if sp.IsUnknown(i) else 3 if sp.IsControl(i) else 5 if sp.IsUnused(i) else 6 if sp.IsByte(i) else 1)
    return out


#: The ``tokenizer.ggml.pre`` each kind of source is written with.
PRE = {"llama": "default", "t5": "default", "phi3": "default", "gpt2": "qwen2", "bert": "bert-bge", "gemma4": "gemma4"}


def _phantom(token: str) -> str:
    """llama.cpp's converter (convert_hf_to_gguf.py, BertModel): '##w' -> 'w', '[X]' kept, 'w' -> '▁w'."""
    if token.startswith("[") and token.endswith("]"):
        return token
    return token[2:] if token.startswith("##") else "\u2581" + token


def _gemma4_tokenizer() -> Any:
    """SentencePiece-style BPE on raw UTF-8 with byte fallback, as Gemma 4's tokenizer.json; trained with tokenizers."""
    tokenizers = pytest.importorskip("tokenizers")
    from tokenizers import Regex, models, normalizers, pre_tokenizers, trainers

    tok = tokenizers.Tokenizer(models.BPE(byte_fallback=True))
    tok.normalizer = normalizers.Replace(" ", "\u2581")
    tok.pre_tokenizer = pre_tokenizers.Split(Regex("[^\\n]+|[\\n]+"), "isolated")
    specials = ["<pad>", "<eos>", "<bos>", "<unk>", "<mask>", "<|tool>", *(f"<0x{b:02X}>" for b in range(256))]
    tok.train_from_iterator(corpus(), trainer=trainers.BpeTrainer(vocab_size=700, special_tokens=specials, show_progress=False))
    return tok


def _write_source(path: Path, kind: str) -> None:
    """A GGUF file as llama.cpp's converter writes one, with every kind of extra tokenizer key, by gguf-py's GGUFWriter.

    ``phi3`` is a padded ``llama`` vocabulary (``<unk>`` typed CONTROL, ``[PADn]``
    tokens typed UNKNOWN), ``bert`` a WordPiece vocabulary spelled as
    llama.cpp's converter spells it, ``gemma4`` a raw-UTF-8 BPE vocabulary with
    byte tokens and scores, as Gemma 4's.
    """
    gguf = pytest.importorskip("gguf")
    kind_of = gguf.GGUFValueType
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_name("fidelity")
    if kind == "gpt2":
        pytest.importorskip("tokenizers")
        doc = json.loads(train_byte_level_bpe())
        vocab = doc["model"]["vocab"]
        tokens = sorted(vocab, key=vocab.__getitem__)
        writer.add_tokenizer_model("gpt2")
        writer.add_tokenizer_pre(PRE[kind])
        writer.add_token_list(tokens)
        writer.add_token_types([3 if t in ("<|endoftext|>", "<|pad|>") else 1 for t in tokens])
        writer.add_token_merges([m if isinstance(m, str) else " ".join(m) for m in doc["model"]["merges"]])
    elif kind == "bert":
        pytest.importorskip("tokenizers")
        vocab = json.loads(train_wordpiece())["model"]["vocab"]
        tokens = sorted(vocab, key=vocab.__getitem__)
        writer.add_key_value("tokenizer.ggml.token_type_count", 2, kind_of.UINT32)
        writer.add_tokenizer_model("bert")
        writer.add_tokenizer_pre(PRE[kind])
        writer.add_token_list([_phantom(t) for t in tokens])
        writer.add_token_types([3 if t.startswith("[") and t.endswith("]") else 1 for t in tokens])
        writer.add_unk_token_id(vocab["[UNK]"])
    elif kind == "gemma4":
        doc = json.loads(_gemma4_tokenizer().to_str())
        vocab = doc["model"]["vocab"]
        tokens = sorted(vocab, key=vocab.__getitem__)
        writer.add_tokenizer_model("gemma4")
        writer.add_tokenizer_pre(PRE[kind])
        writer.add_token_list(tokens)
        writer.add_token_scores([-1000.0] * len(tokens))
        writer.add_token_types([3 if i < 6 else 6 if i < 262 else 4 if i in (300, 301) else 1 for i in range(len(tokens))])
        writer.add_token_merges([m if isinstance(m, str) else " ".join(m) for m in doc["model"]["merges"]])
        writer.add_unk_token_id(3)
        writer.add_add_space_prefix(False)
    else:
        spm = pytest.importorskip("sentencepiece")
        from sentencepiece import sentencepiece_model_pb2

        proto = train_sentencepiece("unigram" if kind == "t5" else "bpe", True)
        sp = spm.SentencePieceProcessor(model_proto=proto)
        tokens = [sp.IdToPiece(i) for i in range(sp.GetPieceSize())]
        scores, types = [sp.GetScore(i) for i in range(len(tokens))], _types(sp)
        if kind == "phi3":
            types = [3 if t == 2 else t for t in types] + [2] * 20
            scores += [-10000.0] * 20
            tokens += [f"[PAD{len(tokens) + i}]" for i in range(20)]
        writer.add_tokenizer_model("t5" if kind == "t5" else "llama")
        writer.add_tokenizer_pre(PRE[kind])
        writer.add_token_list(tokens)
        writer.add_token_scores(scores)
        writer.add_token_types(types)
        writer.add_unk_token_id(sp.unk_id())
        writer.add_add_space_prefix(kind == "t5")
        if kind == "t5":
            model = sentencepiece_model_pb2.ModelProto.FromString(proto)
            writer.add_precompiled_charsmap(model.normalizer_spec.precompiled_charsmap)
            writer.add_remove_extra_whitespaces(True)
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    writer.add_pad_token_id(2)
    writer.add_sep_token_id(3)
    writer.add_key_value("tokenizer.ggml.cls_token_id", 4, kind_of.UINT32)
    writer.add_mask_token_id(5)
    writer.add_add_bos_token(True)
    writer.add_add_eos_token(False)
    writer.add_chat_template("{% for m in messages %}<start>{{ m['content'] }}<end>\n{% endfor %}")
    writer.add_key_value("tokenizer.ggml.eot_token_id", 6, kind_of.UINT32)
    writer.add_key_value("tokenizer.chat_template.tool_use", "{{ tools }}", kind_of.STRING)
    writer.add_key_value("tokenizer.ggml.add_sep_token", False, kind_of.BOOL)
    writer.add_key_value("tokenizer.x.weights", [1, -2, 3], kind_of.ARRAY, sub_type=kind_of.INT16)
    writer.add_key_value("tokenizer.x.names", ["a", "b"], kind_of.ARRAY, sub_type=kind_of.STRING)
    writer.add_key_value("tokenizer.x.scale", 0.25, kind_of.FLOAT32)
    table = np.random.default_rng(3).standard_normal((len(tokens), 16)).astype(np.float32)
    writer.add_tensor("token_embd.weight", table)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def _tokenizer_fields(path: Path) -> list[tuple[str, tuple[int, ...], Any]]:
    """Every ``tokenizer.*`` key of a file as gguf-py reads it: name, value types, value (arrays as lists)."""
    gguf = pytest.importorskip("gguf")
    out = []
    for key, field in gguf.GGUFReader(str(path)).fields.items():
        if key.startswith("tokenizer."):
            value = field.contents()
            out.append((key, tuple(int(t) for t in field.types), np.asarray(value).tolist() if isinstance(value, list) else value))
    return out


def _same_keys(source: Path, written: Path) -> None:
    want, got = _tokenizer_fields(source), _tokenizer_fields(written)
    assert [k for k, _, _ in got] == [k for k, _, _ in want]  # the same keys, in the same order
    for (key, types, value), (_, got_types, got_value) in zip(want, got, strict=True):
        assert got_types == types, key
        assert got_value == value, key


KINDS = ["llama", "t5", "gpt2", "phi3", "bert", "gemma4"]


@pytest.mark.parametrize("kind", KINDS)
def test_write_gguf_keeps_every_tokenizer_key(tmp_path: Path, kind: str) -> None:
    source = tmp_path / "source.gguf"
    _write_source(source, kind)
    emb = load_gguf(source)
    assert emb.metadata["gguf"]["tokenizer_kv"]["tokenizer.ggml.pre"] == PRE[kind]
    written = tmp_path / "written.gguf"
    write_gguf(written, emb)
    _same_keys(source, written)
    # Through a .fifu: the keys travel in the metadata.
    fifu = tmp_path / "emb.fifu"
    emb.write(fifu)
    again = tmp_path / "again.gguf"
    write_gguf(again, load_finalfusion(fifu))
    _same_keys(source, again)
    # And the written file tokenizes as the source.
    tok, back = emb.vocab.tokenizer, load_gguf(again).vocab.tokenizer
    assert back.encode_batch(WORDS) == tok.encode_batch(WORDS)


@pytest.mark.parametrize("kind", KINDS)
def test_carried_keys_are_left_out_for_another_tokenizer(tmp_path: Path, kind: str) -> None:
    source = tmp_path / "source.gguf"
    _write_source(source, kind)
    emb = load_gguf(source)
    from finalfusion import Embeddings
    from finalfusion.vocab import SimpleVocab

    plain = Embeddings(emb.storage, SimpleVocab(emb.vocab.words), norms=emb.norms, metadata=emb.metadata)
    written = tmp_path / "plain.gguf"
    write_gguf(written, plain)
    assert [k for k, _, _ in _tokenizer_fields(written)] == ["tokenizer.ggml.model", "tokenizer.ggml.tokens"]


def _changed(emb: Any, source_kind: str, change: str) -> Any:
    """``emb`` changed so that its carried token types, scores and model no longer describe its tokenizer: a token
    renamed, another tokenizer for the same words, or the carried keys edited."""
    from finalfusion import Embeddings
    from finalfusion.compat.gguf._wordpiece import wordpiece_json

    words = list(emb.vocab.words)
    carried = emb.metadata["gguf"]["tokenizer_kv"]
    if change == "renamed":
        return Embeddings(emb.storage, TokenizerVocab([*words[:-1], "\u2603renamed"], emb.vocab.tokenizer), metadata=emb.metadata)
    if change == "other-tokenizer":  # the same words, a WordPiece tokenizer that does not lowercase
        kv = {"tokenizer.ggml.unknown_token_id": carried["tokenizer.ggml.unknown_token_id"], "tokenizer.ggml.normalizer.lowercase": False}
        tok = HuggingFaceTokenizer.from_json(wordpiece_json(kv, words, None))
        return Embeddings(emb.storage, TokenizerVocab(words, tok), metadata=emb.metadata)
    if change == "edited-flag":
        carried["tokenizer.ggml.normalizer.lowercase"] = False
    else:  # the last run of token types, which the tokenizer reads: Phi-3's padding UNKNOWN -> USER_DEFINED, bert's
        # NORMAL -> CONTROL (kept unrenamed), Gemma 4's NORMAL -> USER_DEFINED (matched first)
        carried["tokenizer.ggml.token_type"]["values"][-1] = 3 if source_kind == "bert" else 4
    return emb


@pytest.mark.parametrize(
    ("source_kind", "change"),
    [(k, c) for k in ("phi3", "bert", "gemma4") for c in ("renamed", "edited")] + [("bert", "other-tokenizer"), ("bert", "edited-flag")],
)
def test_source_token_types_are_not_written_for_a_changed_vocabulary(tmp_path: Path, source_kind: str, change: str) -> None:
    # The carried token types, scores and model are written only where the tokenizer built from them is the vocabulary's
    # own: otherwise the keys are rebuilt from the tokenizer, and the written file tokenizes as the vocabulary's tokenizer.
    source = tmp_path / "source.gguf"
    _write_source(source, source_kind)
    changed = _changed(load_gguf(source), source_kind, change)
    want = changed.vocab.tokenizer.encode_batch(WORDS)
    written = tmp_path / "out.gguf"
    write_gguf(written, changed)
    fields = {k: v for k, _, v in _tokenizer_fields(written)}
    if source_kind == "phi3" and change == "renamed":  # a SentencePiece model whose pieces are not the words: no tokenizer written
        assert fields["tokenizer.ggml.model"] == "none"
        assert "tokenizer.ggml.token_type" not in fields
        return
    if source_kind == "phi3":  # the tokenizer's own types (the padding UNUSED), not the carried ones
        assert fields["tokenizer.ggml.model"] == "llama"
        assert fields["tokenizer.ggml.token_type"][-20:] == [5] * 20
    else:  # its tokenizer.json, not the source's model with stale types
        assert fields["tokenizer.ggml.model"] == "none"
        assert "tokenizer.huggingface.json" in fields
        assert "tokenizer.ggml.token_type" not in fields
    assert load_gguf(written).vocab.tokenizer.encode_batch(WORDS) == want


def test_a_malformed_carried_token_type_is_a_value_error_naming_it(tmp_path: Path) -> None:
    source = tmp_path / "source.gguf"
    _write_source(source, "phi3")
    emb = load_gguf(source)
    carried = emb.metadata["gguf"]["tokenizer_kv"]
    n = len(emb.vocab)
    for bad, message in (
        ({"type": "int32", "values": [1], "counts": [0]}, "has a run length that is not a positive integer"),
        ({"type": "int32", "values": [1, 2], "counts": [n]}, "is not a run-length GGUF array"),
        ({"type": "int99", "values": [1], "counts": [n]}, "is not a run-length GGUF array"),
        ({"type": "int8", "values": [300], "counts": [n]}, "cannot be a GGUF array of int8"),
        ([1, 2], "is not a run-length GGUF array"),
    ):
        carried["tokenizer.ggml.token_type"] = bad
        with pytest.raises(ValueError, match=rf"tokenizer_kv\] entry 'tokenizer\.ggml\.token_type' {message}"):
            write_gguf(tmp_path / "out.gguf", emb)


@pytest.mark.parametrize("bad", [{"type": "int99", "values": [1]}, [1, "a"], {"values": [1]}])
def test_a_malformed_carried_key_is_a_value_error_naming_it(tmp_path: Path, bad: Any) -> None:
    source = tmp_path / "source.gguf"
    _write_source(source, "llama")
    emb = load_gguf(source)
    emb.metadata["gguf"]["tokenizer_kv"]["tokenizer.x.names"] = bad
    with pytest.raises(ValueError, match=r"tokenizer_kv\] entry 'tokenizer\.x\.names' is not a GGUF value"):
        write_gguf(tmp_path / "out.gguf", emb)


# -- llama.cpp's own vocabularies --------------------------------------------------------------------


def _vocab_files() -> list[Path]:
    return sorted(VOCAB_DIR.glob("ggml-vocab-*.gguf")) if VOCAB_DIR.is_dir() else []


def _with_table(src: Path, dst: Path) -> None:
    """llama.cpp's vocab-only file with a token-embedding table added: every key copied by gguf-py's GGUFWriter."""
    gguf = pytest.importorskip("gguf")
    reader = gguf.GGUFReader(str(src))
    writer = gguf.GGUFWriter(str(dst), reader.fields["general.architecture"].contents())
    n = len(reader.fields["tokenizer.ggml.tokens"].contents())
    for key, field in reader.fields.items():
        if key.startswith("GGUF.") or key == "general.architecture":
            continue
        types = field.types
        writer.add_key_value(key, field.contents(), types[0], sub_type=types[1] if types[0] == gguf.GGUFValueType.ARRAY else None)
    writer.add_tensor("token_embd.weight", np.random.default_rng(0).standard_normal((n, 4)).astype(np.float16))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


@pytest.mark.parametrize("name", [p.name for p in _vocab_files()] or ["(no FINALFUSION_LLAMACPP_KEYS directory)"])
def test_llama_cpp_vocabularies_keep_their_tokenizer_keys(tmp_path: Path, name: str) -> None:
    src = VOCAB_DIR / name
    if not src.is_file():
        pytest.skip("llama.cpp's vocabularies not given (FINALFUSION_LLAMACPP_KEYS, a slow opt-in)")
    source = tmp_path / name
    _with_table(src, source)
    emb = load_gguf(source, normalize=False)
    if not isinstance(emb.vocab, TokenizerVocab):
        pytest.skip(f"{name}: no tokenizer for tokenizer.ggml.model {emb.metadata['gguf'].get('tokenizer')!r} here")
    written = tmp_path / "written.gguf"
    write_gguf(written, emb)
    want, got = _tokenizer_fields(source), _tokenizer_fields(written)
    if emb.metadata["gguf"]["tokenizer"] == "gpt2":
        # The one key not kept: a gpt2 vocabulary's scores (llama.cpp's BPE tokenizer does not use them).
        want = [f for f in want if f[0] != "tokenizer.ggml.scores"]
    assert [k for k, _, _ in got] == [k for k, _, _ in want]
    for (key, types, value), (_, got_types, got_value) in zip(want, got, strict=True):
        assert (key, got_types) == (key, types)
        assert got_value == value, key


# -- the lazy SentencePiece model ------------------------------------------------------------------


def _protobuf_bytes(model: SentencePieceModel) -> bytes:
    """The same model serialised by protobuf itself (sentencepiece's own ModelProto class)."""
    pytest.importorskip("sentencepiece")
    from sentencepiece import sentencepiece_model_pb2

    proto = sentencepiece_model_pb2.ModelProto()
    for piece, score, kind in zip(model.pieces, model.scores, model.types, strict=True):
        proto.pieces.add(piece=piece, score=score, type=kind if 1 <= kind <= 6 else 1)
    trainer = proto.trainer_spec
    trainer.model_type = model.model_type
    trainer.vocab_size = len(model.pieces)
    trainer.byte_fallback = model.types.count(6) >= 256
    trainer.unk_id, trainer.bos_id, trainer.eos_id, trainer.pad_id = (model.special[k] for k in ("unk", "bos", "eos", "pad"))
    normalizer = proto.normalizer_spec
    normalizer.name = "precompiled" if model.charsmap else "identity"
    if model.charsmap:
        normalizer.precompiled_charsmap = model.charsmap
    normalizer.add_dummy_prefix = model.add_dummy_prefix
    normalizer.remove_extra_whitespaces = model.remove_extra_whitespaces
    normalizer.escape_whitespaces = True
    return bytes(proto.SerializeToString())


def _sources(tmp_path: Path) -> list[Path]:
    out = []
    for kind in ("llama", "t5"):
        out.append(tmp_path / f"{kind}.gguf")
        _write_source(out[-1], kind)
    for src in _vocab_files():
        if src.name in ("ggml-vocab-llama-spm.gguf", "ggml-vocab-baichuan.gguf"):
            out.append(tmp_path / src.name)
            _with_table(src, out[-1])
    return out


def test_lazy_model_proto_is_protobufs_bytes_and_tokenizes_as_the_eager_one(tmp_path: Path) -> None:
    spm = pytest.importorskip("sentencepiece")
    weird = ["hello", "e-mail", "U.S.A.", "\u0928\u092e\u0938\u094d\u0924\u0947", "  two  spaces", "\U0001f600x", "\uff21\uff22"]
    for path in _sources(tmp_path):
        tok = load_gguf(path).vocab.tokenizer
        assert isinstance(tok, LazySentencePieceTokenizer)
        model = tok.model
        assert model is not None  # nothing serialised while loading
        expected = _protobuf_bytes(model)
        assert tok.to_bytes() == expected, path.name  # byte for byte what protobuf writes
        assert type(tok) is LlamaCppSentencePieceTokenizer  # now a plain (llama.cpp) tokenizer
        sp = spm.SentencePieceProcessor(model_proto=expected)
        words = [*WORDS, *weird]
        assert tok.encode_batch(words) == sp.encode(words), path.name
        assert [tok.pieces(w) for w in words[:50]] == [sp.encode_as_pieces(w) for w in words[:50]]


def test_lazy_tokenizer_pickles_copies_and_compares_as_the_eager_one(tmp_path: Path) -> None:
    path = tmp_path / "llama.gguf"
    _write_source(path, "llama")
    eager = LlamaCppSentencePieceTokenizer(load_gguf(path).vocab.tokenizer.to_bytes())
    for protocol in range(pickle.HIGHEST_PROTOCOL + 1):
        lazy = load_gguf(path).vocab.tokenizer
        assert pickle.dumps(lazy, protocol) == pickle.dumps(eager, protocol)
    lazy = load_gguf(path).vocab.tokenizer
    assert copy.deepcopy(lazy) == eager
    assert type(copy.copy(load_gguf(path).vocab.tokenizer)) is LlamaCppSentencePieceTokenizer
    lazy = load_gguf(path).vocab.tokenizer
    assert lazy == eager
    assert hash(lazy) == hash(eager)
    assert repr(lazy) == repr(eager)


def test_lazy_model_is_serialised_once_under_concurrent_first_use(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "llama.gguf"
    _write_source(path, "llama")
    emb = load_gguf(path)
    calls = []
    real = SentencePieceModel.to_proto
    gate = threading.Barrier(8)

    def counted(self: SentencePieceModel) -> bytes:
        calls.append(1)
        return real(self)

    monkeypatch.setattr(SentencePieceModel, "to_proto", counted)
    results: list[Any] = [None] * 8

    def first_use(i: int) -> None:
        gate.wait()
        results[i] = emb.embedding_batch(WORDS)[0]

    threads = [threading.Thread(target=first_use, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(calls) == 1
    for r in results[1:]:
        np.testing.assert_array_equal(r, results[0])


def test_a_malformed_vocabulary_is_still_a_format_error(tmp_path: Path) -> None:
    # An empty piece: cheap checks pass, so the model is serialised lazily and sentencepiece refuses it at the
    # first unknown word -- as before, when the ModelProto was built eagerly but loaded into sentencepiece lazily.
    gguf = pytest.importorskip("gguf")
    pytest.importorskip("sentencepiece")
    path = tmp_path / "empty.gguf"
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_tokenizer_model("llama")
    writer.add_token_list(["<unk>", "", "\u2581a"])
    writer.add_token_scores([0.0, -1.0, -2.0])
    writer.add_token_types([2, 1, 1])
    writer.add_tensor("token_embd.weight", np.ones((3, 4), dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    emb = load_gguf(path)
    with pytest.raises(FormatError, match="SentencePiece model"):
        emb.embedding("zzz")
    # Scores that float32 cannot hold are still refused at load (cheap checks stay eager).
    bad = tmp_path / "nan.gguf"
    writer = gguf.GGUFWriter(str(bad), "llama")
    writer.add_tokenizer_model("llama")
    writer.add_token_list(["<unk>", "\u2581a"])
    writer.add_token_scores([0.0, float("nan")])
    writer.add_token_types([2, 1])
    writer.add_tensor("token_embd.weight", np.ones((2, 4), dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    with pytest.raises(FormatError, match="not a finite float32"):
        load_gguf(bad)
