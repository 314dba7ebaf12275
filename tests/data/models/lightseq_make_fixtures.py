#!/usr/bin/env python3
"""Build LightSeq export files with the real protobuf library and h5py, and write the golden fixtures.

LightSeq's exporters fill messages generated from its ``.proto`` files
(``lightseq/inference/proto/{transformer,gpt,bert,quant_*}.proto``). The
descriptors below declare the same messages -- same names, field numbers,
types and labels -- as a ``FileDescriptorProto`` built in Python, so the
real ``protobuf`` runtime serialises them exactly as LightSeq's generated
``_pb2`` modules would (no ``protoc`` needed). Every field of the
embedding layers, configs and top-level messages is declared, and every
field of the encoder and decoder layers (the files fill a few of them).

Run from the repository root to regenerate the committed fixtures::

    python tests/data/models/lightseq_make_fixtures.py

It writes ``tests/data/models/lightseq_*`` (a few KB each) and
``lightseq_expected.json`` with the tables the loader must return.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent

F, I32, B, S, BYTES, MSG = "float", "int32", "bool", "string", "bytes", "message"
REP = "repeated"

#: message -> [(field name, number, type, label or None, message type)]
_EMB_COMMON = [("token_embedding", 1, F, REP), ("position_embedding", 2, F, REP), ("norm_scale", 3, F, REP), ("norm_bias", 4, F, REP)]
_ENC_NAMES = [
    "multihead_norm_scale",
    "multihead_norm_bias",
    "multihead_project_kernel_qkv",
    "multihead_project_bias_qkv",
    "multihead_project_kernel_output",
    "multihead_project_bias_output",
    "ffn_norm_scale",
    "ffn_norm_bias",
    "ffn_first_kernel",
    "ffn_first_bias",
    "ffn_second_kernel",
    "ffn_second_bias",
]
_DEC_NAMES = [
    "self_norm_scale",
    "self_norm_bias",
    "self_project_kernel_qkv",
    "self_project_bias_qkv",
    "self_project_kernel_output",
    "self_project_bias_output",
    "encdec_norm_scale",
    "encdec_norm_bias",
    "encdec_project_kernel_q",
    "encdec_project_bias_q",
    "encdec_project_kernel_output",
    "encdec_project_bias_output",
    "ffn_norm_scale",
    "ffn_norm_bias",
    "ffn_first_kernel",
    "ffn_first_bias",
    "ffn_second_kernel",
    "ffn_second_bias",
]
#: Layers: every field a repeated float; in the quantized variants the kernels are bytes and float clip_max fields follow.
_LAYER = [(name, i, F, REP) for i, name in enumerate(_ENC_NAMES, 1)]
_DEC_LAYER = [(name, i, F, REP) for i, name in enumerate(_DEC_NAMES, 1)]
_ENC_CLIPS = [
    "multihead_project_kernel_qkv_clip_max",
    "multihead_project_kernel_output_clip_max",
    "ffn_first_kernel_clip_max",
    "ffn_second_kernel_clip_max",
    "multihead_ln_clip_max",
    "multihead_project_output_clip_max",
    "ffn_ln_clip_max",
    "ffn_first_act_clip_max",
    "multihead_qkv_dense_clip_max",
    "multihead_output_dense_clip_max",
    "ffn_first_output_clip_max",
]
_DEC_CLIPS = [
    "self_project_kernel_qkv_clip_max",
    "self_project_kernel_output_clip_max",
    "encdec_project_kernel_q_clip_max",
    "encdec_project_kernel_output_clip_max",
    "ffn_first_kernel_clip_max",
    "ffn_second_kernel_clip_max",
    "self_ln_clip_max",
    "self_project_output_clip_max",
    "encdec_ln_clip_max",
    "encdec_project_output_clip_max",
    "ffn_ln_clip_max",
    "ffn_first_act_clip_max",
    "self_qkv_dense_clip_max",
    "self_output_dense_clip_max",
    "encdec_q_dense_clip_max",
    "encdec_output_dense_clip_max",
    "ffn_first_output_clip_max",
    "ffn_second_output_clip_max",
    "self_qkv_bias_out_clip_max",
]


def _quant_layer(names: list[str], clips: list[str]) -> list[tuple[Any, ...]]:
    fields: list[tuple[Any, ...]] = [(n, i, BYTES if "kernel" in n else F, None if "kernel" in n else REP) for i, n in enumerate(names, 1)]
    return fields + [(c, len(names) + i, F, None) for i, c in enumerate(clips, 1)]


_MODEL_CONF = [
    ("head_num", 1, I32, None),
    ("beam_size", 2, I32, None),
    ("extra_decode_length", 3, I32, None),
    ("length_penalty", 4, F, None),
    ("src_padding_id", 5, I32, None),
    ("trg_start_id", 6, I32, None),
    ("diverse_lambda", 7, F, None),
    ("sampling_method", 8, S, None),
    ("topp", 9, F, None),
    ("topk", 10, I32, None),
    ("trg_end_id", 11, I32, None),
    ("is_post_ln", 12, B, None),
    ("no_scale_embedding", 13, B, None),
    ("use_gelu", 14, B, None),
    ("multilg_type", 15, I32, None),
]
_GPT_CONF = [
    ("head_num", 1, I32, None),
    ("src_padding_id", 2, I32, None),
    ("sampling_method", 3, S, None),
    ("topp", 4, F, None),
    ("topk", 5, I32, None),
    ("eos_id", 6, I32, None),
    ("extra_decode_length", 7, I32, None),
]
_BERT_CONF = [
    ("head_num", 1, I32, None),
    ("src_padding_id", 2, I32, None),
    ("is_post_ln", 3, B, None),
    ("use_gelu", 4, B, None),
    ("multilg_type", 5, I32, None),
]
SPECS: dict[str, dict[str, list[tuple[Any, ...]]]] = {
    "transformer": {
        "EncoderLayer": _LAYER,
        "DecoderLayer": _DEC_LAYER,
        "EmbeddingLayer": [
            *_EMB_COMMON,
            ("encode_output_project_kernel_kv", 5, F, REP),
            ("encode_output_project_bias_kv", 6, F, REP),
            ("shared_bias", 7, F, REP),
            ("lang_emb", 8, F, REP),
        ],
        "ModelConf": _MODEL_CONF,
        "Transformer": [
            ("src_embedding", 1, MSG, None, "EmbeddingLayer"),
            ("encoder_stack", 2, MSG, REP, "EncoderLayer"),
            ("trg_embedding", 3, MSG, None, "EmbeddingLayer"),
            ("decoder_stack", 4, MSG, REP, "DecoderLayer"),
            ("model_conf", 5, MSG, None, "ModelConf"),
        ],
    },
    "quant_transformer": {
        "QuantEncoderLayer": _quant_layer(_ENC_NAMES, [*_ENC_CLIPS, "ffn_second_output_clip_max"]),
        "QuantDecoderLayer": _quant_layer(_DEC_NAMES, _DEC_CLIPS),
        "QuantEmbeddingLayer": [
            ("token_embedding", 1, BYTES, None),
            ("position_embedding", 2, F, REP),
            ("norm_scale", 3, F, REP),
            ("norm_bias", 4, F, REP),
            ("encode_output_project_kernel_kv", 5, BYTES, None),
            ("shared_bias", 7, F, REP),
            ("emb_clip_max", 9, F, None),
            ("encode_output_project_kernel_kv_clip_max", 10, F, REP),
            ("output_ln_clip_max", 11, F, None),
            ("logits_clip_max", 12, F, None),
        ],
        "QuantModelConf": _MODEL_CONF,
        "QuantTransformer": [
            ("src_embedding", 1, MSG, None, "QuantEmbeddingLayer"),
            ("encoder_stack", 2, MSG, REP, "QuantEncoderLayer"),
            ("trg_embedding", 3, MSG, None, "QuantEmbeddingLayer"),
            ("decoder_stack", 4, MSG, REP, "QuantDecoderLayer"),
            ("model_conf", 5, MSG, None, "QuantModelConf"),
        ],
    },
    "gpt": {
        "GptEncoderLayer": _LAYER,
        "GptEmbeddingLayer": _EMB_COMMON,
        "GptModelConf": _GPT_CONF,
        "Gpt": [
            ("src_embedding", 1, MSG, None, "GptEmbeddingLayer"),
            ("encoder_stack", 2, MSG, REP, "GptEncoderLayer"),
            ("model_conf", 3, MSG, None, "GptModelConf"),
        ],
    },
    "quant_gpt": {
        "QuantGptEncoderLayer": _quant_layer(_ENC_NAMES, [*_ENC_CLIPS, "self_qkv_bias_out_clip_max"]),
        "QuantGptEmbeddingLayer": [
            ("token_embedding", 1, BYTES, None),
            ("position_embedding", 2, F, REP),
            ("norm_scale", 3, F, REP),
            ("norm_bias", 4, F, REP),
            ("emb_clip_max", 5, F, None),
            ("output_ln_clip_max", 6, F, None),
            ("logits_clip_max", 7, F, None),
        ],
        "QuantGptModelConf": _GPT_CONF,
        "QuantGpt": [
            ("src_embedding", 1, MSG, None, "QuantGptEmbeddingLayer"),
            ("encoder_stack", 2, MSG, REP, "QuantGptEncoderLayer"),
            ("model_conf", 3, MSG, None, "QuantGptModelConf"),
        ],
    },
    "bert": {
        "BertEncoderLayer": _LAYER,
        "BertEmbeddingLayer": _EMB_COMMON,
        "BertModelConf": _BERT_CONF,
        "Bert": [
            ("src_embedding", 1, MSG, None, "BertEmbeddingLayer"),
            ("encoder_stack", 2, MSG, REP, "BertEncoderLayer"),
            ("model_conf", 3, MSG, None, "BertModelConf"),
        ],
    },
    "quant_bert": {
        "QuantBertEncoderLayer": _quant_layer(_ENC_NAMES, _ENC_CLIPS),
        "QuantBertEmbeddingLayer": [
            ("token_embedding", 1, BYTES, None),
            ("position_embedding", 2, F, REP),
            ("norm_scale", 3, F, REP),
            ("norm_bias", 4, F, REP),
            ("emb_clip_max", 5, F, None),
        ],
        "QuantBertModelConf": _BERT_CONF[:4],
        "QuantBert": [
            ("src_embedding", 1, MSG, None, "QuantBertEmbeddingLayer"),
            ("encoder_stack", 2, MSG, REP, "QuantBertEncoderLayer"),
            ("model_conf", 3, MSG, None, "QuantBertModelConf"),
        ],
    },
}
TOP = {"transformer": "Transformer", "quant_transformer": "QuantTransformer", "gpt": "Gpt", "quant_gpt": "QuantGpt", "bert": "Bert", "quant_bert": "QuantBert"}


def message_classes(proto: str) -> dict[str, Any]:
    """Message classes for one of LightSeq's ``.proto`` files, built from :data:`SPECS` with the real protobuf runtime."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    fdp = descriptor_pb2.FileDescriptorProto(name=f"ff_lightseq_{proto}.proto", package=f"ff_lightseq_{proto}", syntax="proto3")
    types = {
        F: descriptor_pb2.FieldDescriptorProto.TYPE_FLOAT,
        I32: descriptor_pb2.FieldDescriptorProto.TYPE_INT32,
        B: descriptor_pb2.FieldDescriptorProto.TYPE_BOOL,
        S: descriptor_pb2.FieldDescriptorProto.TYPE_STRING,
        BYTES: descriptor_pb2.FieldDescriptorProto.TYPE_BYTES,
        MSG: descriptor_pb2.FieldDescriptorProto.TYPE_MESSAGE,
    }
    for name, fields in SPECS[proto].items():
        msg = fdp.message_type.add(name=name)
        for spec in fields:
            fname, number, ftype, label = spec[:4]
            field = msg.field.add(name=fname, number=number, type=types[ftype])
            field.label = descriptor_pb2.FieldDescriptorProto.LABEL_REPEATED if label == REP else descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL
            if ftype == MSG:
                field.type_name = f".ff_lightseq_{proto}.{spec[4]}"
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fdp)
    return {name: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"ff_lightseq_{proto}.{name}")) for name in SPECS[proto]}


def quantize(x: np.ndarray, clip_max: float) -> np.ndarray:
    """LightSeq's exporter quantization (``export_quant.quantize`` with range 127): uint8 codes."""
    return np.floor(np.clip(x * 127 / clip_max, -127, 127) + 127 + 0.5).astype(np.uint8)


def dequantize(q: np.ndarray, clip_max: float) -> np.ndarray:
    """LightSeq's ``dequantize``: ``(float(q) - 127) * clip_max / 127`` in float32."""
    out = q.astype(np.float32) - np.float32(127)
    out *= np.float32(clip_max)
    out /= np.float32(127)
    return out


def build_proto(
    proto: str, hidden: int, src: np.ndarray, trg: np.ndarray | None = None, *, clip: float = 0.0, no_scale: bool = False, layers: int = 1
) -> bytes:
    """A LightSeq export: ``src`` is ``[vocab, hidden]``; ``trg`` (Transformers) is written transposed, as the exporters do."""
    classes = message_classes(proto)
    top = classes[TOP[proto]]()
    quant = proto.startswith("quant_")
    rng = np.random.default_rng(len(proto))

    def fill(layer: Any, table: np.ndarray, transposed: bool) -> None:
        data = table.T if transposed else table
        if quant:
            layer.token_embedding = quantize(data, clip).tobytes()
            layer.emb_clip_max = clip
        else:
            layer.token_embedding.extend(data.reshape(-1).tolist())
        layer.position_embedding.extend(rng.standard_normal(8 * hidden).astype(np.float32).tolist())
        layer.norm_scale.extend([1.0] * hidden)
        layer.norm_bias.extend([0.0] * hidden)

    fill(top.src_embedding, src, False)
    for _ in range(layers):
        enc = top.encoder_stack.add()
        enc.multihead_norm_scale.extend([1.0] * hidden)
    if proto.endswith("transformer"):
        assert trg is not None
        fill(top.trg_embedding, trg, True)
        for _ in range(layers):
            top.decoder_stack.add().self_norm_scale.extend([1.0] * hidden)
        top.model_conf.head_num = 2
        top.model_conf.beam_size = 4
        top.model_conf.no_scale_embedding = no_scale
    elif proto.endswith("gpt"):
        top.model_conf.head_num = 2
        top.model_conf.sampling_method = "topk"
        top.model_conf.eos_id = src.shape[0] - 1
    else:
        top.model_conf.head_num = 2
        top.model_conf.is_post_ln = True
        top.model_conf.use_gelu = True
    return bytes(top.SerializeToString())


def build_hdf5(path: Path, proto: str, hidden: int, src: np.ndarray, trg: np.ndarray | None = None, *, clip: float = 0.0, no_scale: bool = False) -> None:
    """The same model as an HDF5 file with LightSeq's dataset names (as its ``hf_*_export.py`` scripts write them)."""
    import h5py

    quant = proto.startswith("quant_")
    with h5py.File(path, "w") as f:
        for side, table, transposed in (("src", src, False), ("trg", trg, True)):
            if table is None:
                continue
            data = table.T if transposed else table
            if quant:
                f.create_dataset(f"{side}_embedding/token_embedding", data=quantize(data, clip), dtype="uint8")
                f.create_dataset(f"{side}_embedding/emb_clip_max", data=np.float32(clip))
            else:
                f.create_dataset(f"{side}_embedding/token_embedding", data=data.reshape(-1), dtype="f4")
            f.create_dataset(f"{side}_embedding/norm_scale", data=np.ones(hidden, dtype=np.float32), dtype="f4")
            f.create_dataset(f"{side}_embedding/norm_bias", data=np.zeros(hidden, dtype=np.float32), dtype="f4")
        f.create_dataset("model_conf/head_num", data=2, dtype="i4")
        f.create_dataset("model_conf/n_encoder_stack", data=1, dtype="i4")
        if proto.endswith("transformer"):
            f.create_dataset("model_conf/n_decoder_stack", data=1, dtype="i4")
            f.create_dataset("model_conf/no_scale_embedding", data=no_scale, dtype="?")
        elif proto.endswith("gpt"):
            f.create_dataset("model_conf/eos_id", data=src.shape[0] - 1, dtype="i4")
        else:
            f.create_dataset("model_conf/is_post_ln", data=True, dtype="?")


#: The fairseq dictionary of the golden Transformer (fairseq adds <s> <pad> </s> <unk> in front).
GOLDEN_DICT = "▁the 50\n▁of 40\n▁Haus 30\nen 20\ns 10\n▁Bär 5\nмир 4\nmadeupword0000 0\n"  # noqa: RUF001


def main() -> None:
    rng = np.random.default_rng(14)
    hidden = 4
    n = 12  # 4 specials + 8 dictionary lines
    src = (rng.standard_normal((n, hidden)) * np.sqrt(hidden)).astype(np.float32)
    trg = (rng.standard_normal((n + 4, hidden)) * np.sqrt(hidden)).astype(np.float32)  # 4 padding rows
    gpt = rng.standard_normal((10, hidden)).astype(np.float32)
    clip = 2.5
    (HERE / "lightseq_dict.txt").write_text(GOLDEN_DICT, encoding="utf-8")
    (HERE / "lightseq_transformer.pb").write_bytes(build_proto("transformer", hidden, src, trg))
    (HERE / "lightseq_quant_gpt.pb").write_bytes(build_proto("quant_gpt", hidden, gpt, clip=clip))
    build_hdf5(HERE / "lightseq_bert.hdf5", "bert", hidden, gpt)
    expected = {
        "lightseq_transformer.pb": {"src": src.tolist(), "trg": trg[:n].tolist(), "vocab": "lightseq_dict.txt"},
        "lightseq_quant_gpt.pb": {"src": dequantize(quantize(gpt, clip), clip).tolist(), "vocab": [f"t{i}" for i in range(10)]},
        "lightseq_bert.hdf5": {"src": gpt.tolist(), "vocab": [f"t{i}" for i in range(10)]},
    }
    (HERE / "lightseq_expected.json").write_text(json.dumps(expected, indent=1) + "\n", encoding="utf-8")
    print("wrote", ", ".join(sorted(expected)), file=sys.stderr)


if __name__ == "__main__":
    main()
