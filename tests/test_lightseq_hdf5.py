"""load_lightseq on hand-made HDF5 exports: GPT/BERT detection, the FormatErrors of malformed files, and the h5py extra."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from finalfusion import FormatError, MissingExtraError, load_lightseq

TABLE = np.array([[3.0, 4.0], [0.0, 1.0]], dtype="<f4")


def hdf5(tmp_path: Path, **datasets: Any) -> Path:
    h5py = pytest.importorskip("h5py")
    path = tmp_path / "model.hdf5"
    with h5py.File(path, "w") as f:
        for name, value in datasets.items():
            name = name.replace("__", "/")
            if isinstance(value, str):  # "group"
                f.create_group(name)
            elif isinstance(value, tuple):  # declared shape only, no data written
                f.create_dataset(name, shape=value, dtype="f4", chunks=True)
            else:
                f[name] = value
    return path


GOOD: dict[str, Any] = {"src_embedding__norm_scale": np.ones(2, dtype="f4"), "src_embedding__token_embedding": TABLE}


def test_hdf5_bert_detected_from_the_config(tmp_path: Path) -> None:
    path = hdf5(tmp_path, **GOOD, model_conf__is_post_ln=np.array(True))
    emb = load_lightseq(path, ["a", "b"], normalize=False)
    assert emb.metadata is not None
    assert emb.metadata["lightseq"]["model"] == "BERT"
    assert emb.storage.matrix.tolist() == TABLE.tolist()


def test_hdf5_gpt_has_no_target_side(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="a LightSeq GPT or BERT model has only a source embedding"):
        load_lightseq(hdf5(tmp_path, **GOOD), ["a"], side="trg")


def test_hdf5_without_norm_scale(tmp_path: Path) -> None:
    with pytest.raises(FormatError, match="no norm_scale to take the hidden size from") as err:
        load_lightseq(hdf5(tmp_path, src_embedding__token_embedding=TABLE), ["a"])
    assert err.value.chunk == "LightSeq HDF5 GPT or BERT"


def test_hdf5_without_table(tmp_path: Path) -> None:
    with pytest.raises(FormatError, match="the model has no src_embedding/token_embedding") as err:
        load_lightseq(hdf5(tmp_path, src_embedding__norm_scale=np.ones(2, dtype="f4")), ["a"])
    assert err.value.found == ["src_embedding"]


def test_hdf5_group_where_a_dataset_belongs(tmp_path: Path) -> None:
    with pytest.raises(FormatError, match="src_embedding/token_embedding is not a dataset") as err:
        load_lightseq(hdf5(tmp_path, src_embedding__norm_scale=np.ones(2, dtype="f4"), src_embedding__token_embedding="group"), ["a"])
    assert err.value.found == "Group"


@pytest.mark.parametrize(
    "extra",
    [
        {"src_embedding__token_embedding": TABLE.astype("i4")},  # integers without emb_clip_max
        {"src_embedding__token_embedding": TABLE.astype("u2"), "src_embedding__emb_clip_max": np.float32(1.0)},  # codes wider than a byte
    ],
)
def test_hdf5_table_of_the_wrong_type(tmp_path: Path, extra: dict[str, Any]) -> None:
    with pytest.raises(FormatError, match="token_embedding has the wrong type"):
        load_lightseq(hdf5(tmp_path, **{**GOOD, **extra}), ["a"])


def test_hdf5_table_larger_than_the_file(tmp_path: Path) -> None:
    path = hdf5(tmp_path, src_embedding__norm_scale=np.ones(2, dtype="f4"), src_embedding__token_embedding=(1 << 20, 1 << 10))
    with pytest.raises(FormatError, match="token_embedding declares more data than the file can hold"):
        load_lightseq(path, ["a"])


def test_hdf5_clip_max_not_a_scalar(tmp_path: Path) -> None:
    codes = {"src_embedding__token_embedding": np.zeros((2, 2), dtype="u1"), "src_embedding__emb_clip_max": np.ones(2, dtype="f4")}
    with pytest.raises(FormatError, match="src_embedding/emb_clip_max is not a single value") as err:
        load_lightseq(hdf5(tmp_path, **{**GOOD, **codes}), ["a", "b"])
    assert err.value.found == "2 values"


def test_hdf5_needs_h5py(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = hdf5(tmp_path, **GOOD)
    monkeypatch.setitem(sys.modules, "h5py", None)
    with pytest.raises(MissingExtraError, match=r"^reading LightSeq HDF5 files needs the h5py package: pip install 'finalfusion-py\[models\]'$"):
        load_lightseq(path, ["a", "b"])
