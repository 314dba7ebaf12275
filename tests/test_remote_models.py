"""Model directories at a URL (issue 37): a sharded safetensors checkpoint, model2vec and WordLlama, served by nginx.

Each model is written by the real tools (``safetensors``, ``tokenizers``, model2vec's ``save_pretrained``, WordLlama's
layout) into the directory nginx serves on the loopback interface, loaded from its URL and from the local directory,
and compared; nginx's log says what was fetched: the index, the one shard's header and the table's byte range, and the
small JSON files beside them -- never another shard. The rules of a local model directory hold at a URL: a name
inside the index is a plain file name, and a JSON file's size is checked against its limit before it is fetched.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import finalfusion
from _servers import Nginx, Request, nginx_fixtures
from finalfusion import FormatError
from finalfusion._remote import BLOCK_SIZE
from finalfusion.compat.safetensors import load_safetensors

pytest.importorskip("fsspec", reason="fsspec (the remote extra) is not installed")
pytest.importorskip("aiohttp", reason="aiohttp (the remote extra: fsspec's http) is not installed")
pytest.importorskip("safetensors", reason="safetensors (the interop extra) writes the checkpoints")
pytest.importorskip("tokenizers", reason="tokenizers (the models extra) trains the tokenizers")

#: Bytes of the tensors a load must not fetch (before the table in its shard, and the whole other shard).
BULK = 8 << 20
TABLE = "model.embed_tokens.weight"


server, served = nginx_fixtures()


def _fetched(requests: list[Request], name: str) -> list[Request]:
    """The GETs of the file ``name`` (its last path component)."""
    return [r for r in requests if r.method == "GET" and r.path.rsplit("/", 1)[-1] == name]


def _sharded(directory: Path) -> np.ndarray:
    """A two-shard checkpoint with a WordPiece tokenizer.json and a config.json: the table in the second shard, after a bulk tensor."""
    from test_safetensors import save, tokens_of, wordpiece_tokenizer_json

    directory.mkdir()
    tokenizer = wordpiece_tokenizer_json()
    n = len(tokens_of(tokenizer)) + 64  # padded, as real checkpoints are
    table = np.random.default_rng(3).standard_normal((n, 48)).astype(np.float16)
    save(directory / "model-00001-of-00002.safetensors", {"model.layers.0.mlp.weight": np.zeros((BULK // 128, 64), np.float16)})
    save(directory / "model-00002-of-00002.safetensors", {"model.a_bulk.weight": np.zeros(BULK // 2, np.float16), TABLE: table})
    weight_map = {"model.layers.0.mlp.weight": "model-00001-of-00002.safetensors", "model.a_bulk.weight": "model-00002-of-00002.safetensors"}
    (directory / "model.safetensors.index.json").write_text(
        json.dumps({"metadata": {}, "weight_map": {**weight_map, TABLE: "model-00002-of-00002.safetensors"}})
    )
    (directory / "tokenizer.json").write_text(tokenizer, encoding="utf-8")
    (directory / "config.json").write_text(json.dumps({"architectures": ["LlamaForCausalLM"], "hidden_size": 48}))
    return table


def _same(remote: finalfusion.Embeddings, local: finalfusion.Embeddings, words: list[str]) -> None:
    assert remote.vocab.words == local.vocab.words
    np.testing.assert_array_equal(remote.storage.matrix, local.storage.matrix)
    for w in words:
        np.testing.assert_array_equal(remote.embedding(w), local.embedding(w))
    assert remote.metadata == local.metadata


WORDS = ["the", "quick", "housing", "zzyzxq", "ünïcödé", "日本語"]


def test_a_sharded_directory_costs_the_index_one_shard_range_and_the_json_files(served: Nginx) -> None:
    table = _sharded(served.root / "sharded")
    local = load_safetensors(served.root / "sharded", normalize=False)
    for url in (served.url("sharded/"), served.url("sharded/model.safetensors.index.json")):
        served.clear()
        remote = load_safetensors(url, normalize=False)
        _same(remote, local, WORDS)
        np.testing.assert_array_equal(remote.storage.matrix, table[: len(remote.vocab)].astype(np.float32))
        requests = served.requests()
        assert all(r.status in (200, 206, 404) for r in requests), requests
        assert not _fetched(requests, "model-00001-of-00002.safetensors"), "the other shard is never fetched"
        shard = sum(r.sent for r in _fetched(requests, "model-00002-of-00002.safetensors"))
        rows = len(remote.vocab) * table.shape[1] * 2
        # the header's block, the rows of real tokens, at most a block of slack; not the 4 MB before the table
        assert rows <= shard <= BLOCK_SIZE + rows + BLOCK_SIZE, shard
        for name in ("model.safetensors.index.json", "tokenizer.json"):  # each fetched once, whole
            assert [r.sent for r in _fetched(requests, name)] == [(served.root / "sharded" / name).stat().st_size]
        assert all(r.range is not None for r in requests if r.method == "GET"), "every GET is a range request"
        total = sum(r.sent for r in requests)
        assert total < sum(p.stat().st_size for p in (served.root / "sharded").iterdir()) / 4


def test_load_and_the_model_options_take_a_directory_url(served: Nginx) -> None:
    _sharded(served.root / "viaload")
    local = finalfusion.load(served.root / "viaload")
    _same(finalfusion.load(served.url("viaload/")), local, WORDS)
    _same(finalfusion.load(served.url("viaload/model.safetensors.index.json")), local, WORDS)
    # the tokenizer by URL, the weights file by URL (its tokenizer.json beside it is not needed then)
    tokenizer_url = served.url("viaload/tokenizer.json")
    shard = served.url("viaload/model-00002-of-00002.safetensors")
    by_file = finalfusion.load(shard, tensor=TABLE, tokenizer=tokenizer_url)
    assert by_file.vocab.words == local.vocab.words
    np.testing.assert_array_equal(by_file.storage.matrix, local.storage.matrix)
    assert by_file.metadata is not None
    assert by_file.metadata["safetensors"]["file"] == "model-00002-of-00002.safetensors"


def test_model2vec_directories_at_a_url_load_as_the_local_ones(served: Nginx) -> None:
    pytest.importorskip("model2vec", reason="model2vec (the interop extra) writes the directories")
    from test_model2vec import SENTENCES, _write

    for kind in ("plain", "quantized"):
        directory = _write(kind, "wordpiece", served.root / f"m2v-{kind}")
        local = finalfusion.load(directory)
        served.clear()
        remote = finalfusion.load(served.url(f"m2v-{kind}/"))
        _same(remote, local, ["house", "happiness", "xyzzy"])
        assert remote.metadata is not None
        assert remote.metadata["model2vec"] == local.metadata["model2vec"]  # config.json read
        np.testing.assert_array_equal(remote.encode(SENTENCES), local.encode(SENTENCES))
        requests = served.requests()
        weights = (directory / "model.safetensors").stat().st_size
        assert sum(r.sent for r in _fetched(requests, "model.safetensors")) == weights  # one block holds it all: fetched once
        for name in ("tokenizer.json", "config.json"):
            assert [r.sent for r in _fetched(requests, name)] == [(directory / name).stat().st_size]
        assert {r.status for r in requests if r.path.endswith("model.safetensors.index.json")} == {404}  # asked for, not there


def test_wordllama_weights_at_a_url_find_their_tokenizer(served: Nginx) -> None:
    pytest.importorskip("wordllama", reason="wordllama (the interop extra) is the reference")
    from test_wordllama import TEXTS, _layout, _wordllama

    weights = _layout(served.root / "wl")
    local = finalfusion.load(weights)
    remote = finalfusion.load(served.url("wl/weights/" + weights.name))  # the tokenizer in ../tokenizers/, as WordLlama keeps it
    _same(remote, local, ["house", "puppy", "zebra"])
    np.testing.assert_array_equal(remote.encode(TEXTS), local.encode(TEXTS))
    np.testing.assert_allclose(remote.encode(TEXTS), np.asarray(_wordllama(served.root / "wl").embed(TEXTS)), rtol=2e-5, atol=2e-6)
    # a directory at a URL is not listed: only model.safetensors(.index.json) are asked for, and the error says so
    with pytest.raises(FileNotFoundError, match="is not listed: name another checkpoint by its URL"):
        finalfusion.load(served.url("wl/weights/"))


@pytest.mark.parametrize(
    "name", ["../model-00002-of-00002.safetensors", "/etc/passwd", "sub/x.safetensors", "https://example.org/x", "s3:x", "..#", "%2e%2e", "x?y", "a\\b"]
)
def test_an_index_naming_anything_but_a_plain_file_name_is_refused_before_a_shard_is_fetched(served: Nginx, name: str) -> None:
    directory = served.root / "hostile-index"
    if not directory.exists():
        _sharded(directory)
    index = json.loads((directory / "model.safetensors.index.json").read_text())
    index["weight_map"]["model.layers.0.mlp.weight"] = name  # not the table's shard: every name is checked
    (directory / "bad.safetensors.index.json").write_text(json.dumps(index))
    served.clear()
    with pytest.raises(FormatError, match="a shard must be a file next to the index") as err:
        load_safetensors(served.url("hostile-index/bad.safetensors.index.json"))
    assert err.value.found == name
    assert {r.path.rsplit("/", 1)[-1] for r in served.requests()} == {"bad.safetensors.index.json"}


@pytest.mark.parametrize(
    ("name", "limit"),
    [
        ("model.safetensors.index.json", "finalfusion.limits.MAX_MODEL_HEADER_BYTES"),
        ("tokenizer.json", "finalfusion.limits.MAX_TOKENIZER_BYTES"),
        ("config.json", "finalfusion.compat._model2vec.MAX_CONFIG_BYTES"),
    ],
)
def test_a_json_file_larger_than_its_limit_is_refused_before_it_is_fetched(served: Nginx, monkeypatch: pytest.MonkeyPatch, name: str, limit: str) -> None:
    from test_safetensors import save, tokens_of, wordpiece_tokenizer_json

    directory = served.root / "limits"
    if not directory.exists():  # a model2vec layout, and an index naming its file
        directory.mkdir()
        tokenizer = wordpiece_tokenizer_json()
        save(directory / "model.safetensors", {"embeddings": np.ones((len(tokens_of(tokenizer)), 4), np.float32)})
        (directory / "tokenizer.json").write_text(tokenizer, encoding="utf-8")
        (directory / "config.json").write_text(json.dumps({"normalize": True}))
        (directory / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {"embeddings": "model.safetensors"}}))
    assert finalfusion.load(served.url("limits/")).metadata["model2vec"]["normalize"] is True  # within the limits: loads
    size = (directory / name).stat().st_size
    monkeypatch.setattr(limit, size - 1)
    served.clear()
    with pytest.raises(FormatError, match="is larger than the limit") as err:
        finalfusion.load(served.url("limits/"))
    assert err.value.found == f"{size} bytes"
    checked = [r for r in served.requests() if r.path.endswith("/" + name)]
    assert checked
    assert all(r.method == "HEAD" for r in checked), checked  # the size was asked, no byte fetched


def test_missing_files_at_a_url(served: Nginx) -> None:
    directory = served.root / "missing"
    _sharded(directory)
    (directory / "model-00002-of-00002.safetensors").unlink()
    with pytest.raises(FileNotFoundError, match="the shard the index names does not exist"):
        load_safetensors(served.url("missing/"))
    (directory / "model.safetensors.index.json").unlink()
    with pytest.raises(FileNotFoundError, match=r"no model\.safetensors\.index\.json or model\.safetensors in this directory"):
        finalfusion.load(served.url("missing/"))
    (directory / "tokenizer.json").unlink()
    with pytest.raises(FileNotFoundError, match=r"no tokenizer\.json or tokenizer\.model or tekken\.json for http"):
        load_safetensors(served.url("missing/model-00001-of-00002.safetensors"), tensor="model.layers.0.mlp.weight", normalize=False)


def test_the_command_line_reads_model_directories_at_a_url(served: Nginx, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from finalfusion.cli import main

    _sharded(served.root / "cli")
    url = served.url("cli/")
    local = finalfusion.load(served.root / "cli")
    word = next(w for w in local.vocab.words if w.isalpha())
    capsys.readouterr()
    assert main(["info", url]) == 0
    assert f"{len(local.vocab):,}" in capsys.readouterr().out
    assert main(["lookup", url, word]) == 0
    assert f"{word!r} (known, norm {float(local.norms[local.vocab.idx(word)]):.4f})" in capsys.readouterr().out
    assert main(["similar", "-k", "2", "-w", word, "--", url]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 2
    texts = tmp_path / "texts.txt"
    texts.write_text("the quick fox\nhousing\n", encoding="utf-8")
    assert main(["encode", "--quiet", url, str(texts)]) == 0
    printed = np.array([[float(x) for x in line.split()] for line in capsys.readouterr().out.splitlines()], dtype=np.float32)
    np.testing.assert_allclose(printed, local.encode(["the quick fox", "housing"]), rtol=1e-6, atol=1e-7)
    served.clear()
    assert main(["convert", "--quiet", url, str(tmp_path / "cli.fifu")]) == 0
    assert not _fetched(served.requests(), "model-00001-of-00002.safetensors")
    _same(finalfusion.load(tmp_path / "cli.fifu"), local, WORDS)
    assert main(["convert", "--quiet", "--tokenizer", served.url("cli/tokenizer.json"), "--tensor", TABLE, url, str(tmp_path / "t.fifu")]) == 0
    assert finalfusion.load(tmp_path / "t.fifu").vocab.words == local.vocab.words


def test_mistrals_layout_at_a_url_reads_tekken_json_beside_the_named_weights(served: Nginx) -> None:
    from test_safetensors import save

    directory = served.root / "mistral"
    directory.mkdir()
    tekken = Path(__file__).parent / "data" / "models" / "tekken_small.json"
    (directory / "tekken.json").write_bytes(tekken.read_bytes())
    size = json.loads(tekken.read_text(encoding="utf-8"))["config"]["default_vocab_size"]
    save(directory / "consolidated.safetensors", {"tok_embeddings.weight": np.random.default_rng(2).standard_normal((size, 8)).astype(np.float32)})
    local = finalfusion.load(directory)
    remote = finalfusion.load(served.url("mistral/consolidated.safetensors"))
    _same(remote, local, ["hello", "wörld", "日本"])
    assert "Tekken (tekken.json)" in remote.metadata["safetensors"]["tokenizer"]
