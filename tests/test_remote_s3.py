"""``s3://`` URLs against an S3-compatible endpoint (issue 37): moto's server on the loopback interface, read through s3fs.

The endpoint and the credentials reach s3fs the way docs/remote.md says, through fsspec's and botocore's own
configuration (``AWS_ENDPOINT_URL``, ``AWS_ACCESS_KEY_ID`` / ``AWS_SECRET_ACCESS_KEY`` in the environment, or
``fsspec.config.conf``); finalfusion passes none. Files are uploaded with boto3 and s3fs, loaded from their ``s3://``
URL and compared with the local loads; moto's requests are counted (a WSGI wrapper, tests/_servers.py), so a GGUF's
token table and a sharded checkpoint's table cost the headers and their own bytes, not the objects.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

import finalfusion
from _servers import S3, Request, moto_s3
from finalfusion._remote import BLOCK_SIZE

pytest.importorskip("s3fs", reason="s3fs (fsspec's s3:// package; .ci/run installs it) is not installed")
pytest.importorskip("moto.server", reason="moto[server] (the S3-compatible endpoint; .ci/run installs it) is not installed")
pytest.importorskip("boto3", reason="boto3 (comes with moto) is not installed")

SAMPLE = Path(__file__).parent.parent / "examples" / "sample.fifu"
BUCKET = "embeddings"
#: What a test sets in the environment: the endpoint and credentials, as a user configures botocore (finalfusion passes none).
CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1"}


def _fresh_s3fs() -> None:
    """Forget the s3fs filesystems fsspec keeps per set of options: the next one reads the configuration again."""
    import s3fs

    s3fs.S3FileSystem.clear_instance_cache()


@pytest.fixture(scope="module")
def endpoint() -> Iterator[S3]:
    with moto_s3() as s3, pytest.MonkeyPatch.context() as mp:
        for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE"):
            mp.delenv(name, raising=False)
        mp.setenv("AWS_ENDPOINT_URL", s3.endpoint)
        for name, value in CREDENTIALS.items():
            mp.setenv(name, value)
        _fresh_s3fs()
        import boto3

        boto3.client("s3").create_bucket(Bucket=BUCKET)
        try:
            yield s3
        finally:
            _fresh_s3fs()


@pytest.fixture
def s3(endpoint: S3) -> S3:
    endpoint.clear()
    return endpoint


def _upload(local: Path, key: str) -> str:
    """``local`` (a file, or a directory's files) uploaded with boto3 under ``key``; its ``s3://`` URL."""
    import boto3

    client = boto3.client("s3")
    files = [local] if local.is_file() else sorted(p for p in local.iterdir() if p.is_file())
    for f in files:
        client.upload_file(str(f), BUCKET, key if local.is_file() else f"{key}/{f.name}")
    return f"s3://{BUCKET}/{key}" + ("" if local.is_file() else "/")


def _gets(requests: list[Request], key: str) -> list[Request]:
    return [r for r in requests if r.method == "GET" and r.path == f"/{BUCKET}/{key}"]


def test_a_finalfusion_file_loads_as_the_local_one(s3: S3) -> None:
    url = _upload(SAMPLE, "sample.fifu")
    local = finalfusion.load(SAMPLE)
    for remote in (finalfusion.load(url), finalfusion.load_finalfusion(url, mmap=True)):
        for w in ["berlin", "berliner", "zzyzx", "café"]:
            np.testing.assert_array_equal(remote[w], local[w])
        assert remote.metadata == local.metadata
    assert all(r.status in (200, 206) for r in s3.requests())


def test_a_gguf_token_table_costs_the_header_and_the_table(s3: S3, tmp_path: Path) -> None:
    from test_remote import _big_gguf

    table = _big_gguf(tmp_path / "big.gguf")
    url = _upload(tmp_path / "big.gguf", "models/big.gguf")
    s3.clear()
    emb = finalfusion.load_gguf(url, normalize=False)
    np.testing.assert_array_equal(emb.storage.matrix, table)
    assert emb.vocab.words == finalfusion.load_gguf(tmp_path / "big.gguf").vocab.words
    gets = _gets(s3.requests(), "models/big.gguf")
    fetched = sum(r.sent for r in gets)
    assert fetched <= table.nbytes + 64 * 1024 + BLOCK_SIZE, fetched  # the header, the table, at most a block beyond
    assert fetched < (tmp_path / "big.gguf").stat().st_size / 10
    assert all(r.range is not None for r in gets), "every GET is a range request"


def test_a_safetensors_file_finds_its_tokenizer_beside_it(s3: S3, tmp_path: Path) -> None:
    from test_safetensors import save, tokens_of, wordpiece_tokenizer_json

    tokenizer = wordpiece_tokenizer_json()
    table = np.random.default_rng(5).standard_normal((len(tokens_of(tokenizer)), 24)).astype(np.float32)
    (tmp_path / "single").mkdir()
    save(tmp_path / "single" / "model.safetensors", {"embeddings": table})
    (tmp_path / "single" / "tokenizer.json").write_text(tokenizer, encoding="utf-8")
    url = _upload(tmp_path / "single", "single")
    local = finalfusion.load(tmp_path / "single" / "model.safetensors")
    for remote in (finalfusion.load(url + "model.safetensors"), finalfusion.load(url)):
        assert remote.vocab.words == local.vocab.words
        np.testing.assert_array_equal(remote.storage.matrix, local.storage.matrix)
        for w in ["the", "zzyzxq", "日本語"]:
            np.testing.assert_array_equal(remote.embedding(w), local.embedding(w))


def test_a_sharded_model_directory_costs_the_index_one_shard_range_and_the_tokenizer(s3: S3, tmp_path: Path) -> None:
    from test_remote_models import WORDS, _same, _sharded

    table = _sharded(tmp_path / "sharded")
    url = _upload(tmp_path / "sharded", "models/sharded")
    local = finalfusion.load(tmp_path / "sharded")
    s3.clear()
    remote = finalfusion.load(url)
    _same(remote, local, WORDS)
    requests = s3.requests()
    assert not _gets(requests, "models/sharded/model-00001-of-00002.safetensors"), "the other shard is never fetched"
    shard = sum(r.sent for r in _gets(requests, "models/sharded/model-00002-of-00002.safetensors"))
    rows = len(remote.vocab) * table.shape[1] * 2
    assert rows <= shard <= BLOCK_SIZE + rows + BLOCK_SIZE, shard
    for name in ("model.safetensors.index.json", "tokenizer.json"):
        assert [r.sent for r in _gets(requests, f"models/sharded/{name}")] == [(tmp_path / "sharded" / name).stat().st_size]


def test_the_endpoint_from_fsspec_config(s3: S3, monkeypatch: pytest.MonkeyPatch) -> None:
    import fsspec.config

    url = _upload(SAMPLE, "conf/sample.fifu")
    monkeypatch.delenv("AWS_ENDPOINT_URL")
    monkeypatch.setitem(fsspec.config.conf, "s3", {"endpoint_url": s3.endpoint, "key": "testing", "secret": "testing"})
    _fresh_s3fs()
    s3.clear()
    try:
        np.testing.assert_array_equal(finalfusion.load(url).storage.matrix, finalfusion.load(SAMPLE).storage.matrix)
    finally:
        _fresh_s3fs()
    assert _gets(s3.requests(), "conf/sample.fifu"), "read from the endpoint fsspec's configuration names"


def test_missing_objects_are_file_not_found(s3: S3, tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="no file at this URL"):
        finalfusion.load(f"s3://{BUCKET}/nothing.fifu")
    (tmp_path / "empty").mkdir()
    shutil.copy(SAMPLE, tmp_path / "empty" / "notes.fifu")
    url = _upload(tmp_path / "empty", "empty")
    with pytest.raises(FileNotFoundError, match=r"no model\.safetensors\.index\.json or model\.safetensors in this directory"):
        finalfusion.load(url)


def test_the_command_line_converts_an_s3_model_directory(s3: S3, tmp_path: Path) -> None:
    from finalfusion.cli import main
    from test_remote_models import WORDS, _same, _sharded

    _sharded(tmp_path / "cli")
    url = _upload(tmp_path / "cli", "cli")
    assert main(["convert", "--quiet", url, str(tmp_path / "cli.fifu")]) == 0
    _same(finalfusion.load(tmp_path / "cli.fifu"), finalfusion.load(tmp_path / "cli"), WORDS)
