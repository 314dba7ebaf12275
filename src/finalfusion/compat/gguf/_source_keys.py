"""The source's own token types, scores and model where the tokenizer built from its keys cannot give them back.

:func:`~finalfusion.compat.gguf.write_gguf` rebuilds ``tokenizer.ggml.model``,
``tokens``, ``scores``, ``token_type`` and ``merges`` from the vocabulary's
tokenizer (:func:`._tokenizer.tokenizer_kv`). Some GGUF vocabularies hold
what their tokenizer cannot:

- ``bert`` and ``gemma4`` vocabularies (also ``gpt2`` with a Gemma 4
  ``tokenizer.ggml.pre``) are tokenized by a ``tokenizer.json``
  (:func:`._wordpiece.wordpiece_json`, :func:`._gemma4.gemma4_json`), which
  knows no llama.cpp token types or scores and is written back as
  ``tokenizer.huggingface.json``;
- padded SentencePiece vocabularies (Phi-3: dozens of ``[PADnnnnn]`` tokens
  typed UNKNOWN, ``<unk>`` typed CONTROL) are UNUSED but for one in the
  tokenizer (sentencepiece allows one unknown piece: :func:`._tokenizer._one_unknown`).

For these, :func:`~finalfusion.compat.gguf.load_gguf` carries the source's
``tokenizer.ggml.token_type`` and ``tokenizer.ggml.scores`` in the metadata
(``[gguf.tokenizer_kv]``, run-length encoded: :func:`runs`; Gemma 4's 262,144
types are 17 runs, its scores one), and ``write_gguf`` writes the source's
keys back (:func:`with_source_keys`) only when they provably describe the
vocabulary's tokenizer: the tokenizer built from them and the vocabulary's
words is the vocabulary's own -- the same ``tokenizer.json`` text, or the same
SentencePiece piece types. After a selection of words, with another tokenizer
or an edited metadata table the proof fails and the keys are rebuilt from the
tokenizer, as for any other vocabulary.
"""

from __future__ import annotations

import json
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from finalfusion._tokenizers import HuggingFaceTokenizer, SentencePieceTokenizer
from finalfusion.compat.gguf._gemma4 import GEMMA4_PRE, gemma4_json
from finalfusion.compat.gguf._layout import ARRAY, BOOL, NUMPY, STRING, TYPE_NAMES
from finalfusion.compat.gguf._tokenizer import _one_unknown
from finalfusion.compat.gguf._wordpiece import wordpiece_json
from finalfusion.errors import FormatError
from finalfusion.vocab import Vocab
from finalfusion.vocab.tokenizer import TokenizerVocab

__all__ = ["CARRIED_ARRAYS", "ELEMENT_TYPES", "MAX_RUNS", "carried_arrays", "runs", "with_source_keys"]

#: The rebuilt keys whose source values may be carried (as :func:`runs`).
CARRIED_ARRAYS: Final = ("tokenizer.ggml.scores", "tokenizer.ggml.token_type")
#: Most runs carried for one array (more would swell every ``.fifu`` written with the metadata).
MAX_RUNS: Final = 1 << 16
#: numpy element type (native byte order) -> GGUF element type name.
ELEMENT_TYPES: Final = {np.dtype(v).newbyteorder("="): TYPE_NAMES[k] for k, v in NUMPY.items() if k != BOOL} | {np.dtype(bool): "bool"}


def _is_gemma4(model: Any, pre: Any) -> bool:
    return model == "gemma4" or (model == "gpt2" and pre in GEMMA4_PRE)


def runs(values: npt.NDArray[Any]) -> dict[str, Any] | None:
    """A numeric array as ``{"type", "values", "counts"}``: each run of equal elements once, with its length.

    Equal means the same bytes (``-0.0`` is not ``0.0``). ``None`` for an
    element type GGUF has no name for or more than :data:`MAX_RUNS` runs.

    Examples
    --------
    >>> runs(np.array([3, 1, 1, 1, 3, 3], dtype=np.int32))
    {'type': 'int32', 'values': [3, 1, 3], 'counts': [1, 3, 2]}
    """
    dtype = values.dtype.newbyteorder("=") if values.dtype.byteorder not in "|=" else values.dtype
    name = ELEMENT_TYPES.get(dtype)
    if name is None or values.ndim != 1:
        return None
    a = np.ascontiguousarray(values, dtype=dtype)
    bits = a.view(f"u{a.itemsize}") if a.itemsize > 1 else a.view(np.uint8)
    starts = np.flatnonzero(np.concatenate(([True], bits[1:] != bits[:-1]))) if len(a) else np.zeros(0, dtype=np.int64)
    if len(starts) > MAX_RUNS:
        return None
    counts = np.diff(np.append(starts, len(a)))
    out: list[Any] = a[starts].tolist()
    if dtype == np.uint64 and out and max(out) >= 1 << 63:
        return None  # TOML holds int64
    return {"type": name, "values": out, "counts": counts.tolist()}


def unruns(key: str, value: Any, n: int) -> tuple[int, npt.NDArray[Any]] | None:
    """The GGUF element type and array of a carried :func:`runs` value, or ``None`` when it does not have ``n`` elements.

    Raises
    ------
    ValueError
        For a value that is not a :func:`runs` table (metadata edited by hand or read from an untrusted ``.fifu``), naming the key.

    Examples
    --------
    >>> etype, a = unruns("k", {"type": "int32", "values": [3, 1], "counts": [1, 2]}, 3)
    >>> TYPE_NAMES[etype], a.tolist()
    ('int32', [3, 1, 1])
    """
    ok = isinstance(value, dict) and set(value) == {"type", "values", "counts"} and value["type"] in ELEMENT_TYPES.values()
    values, counts = (value.get("values"), value.get("counts")) if isinstance(value, dict) else (None, None)
    if not ok or not isinstance(values, list) or not isinstance(counts, list) or len(values) != len(counts):
        raise ValueError(f"metadata [gguf.tokenizer_kv] entry {key!r} is not a run-length GGUF array: {str(value)[:80]}")
    if not all(isinstance(c, int) and not isinstance(c, bool) and c > 0 for c in counts):
        raise ValueError(f"metadata [gguf.tokenizer_kv] entry {key!r} has a run length that is not a positive integer")
    if sum(counts) != n:
        return None  # another vocabulary's array
    etype = TYPE_NAMES.index(value["type"])
    dtype: np.dtype[Any] = np.dtype(bool) if etype == BOOL else np.dtype(NUMPY[etype])
    try:
        items = np.asarray(values)
        if dtype.kind in "iu" and items.size and (items.dtype.kind not in "biu" or items.min() < np.iinfo(dtype).min or items.max() > np.iinfo(dtype).max):
            raise OverflowError(f"values from {items.min()} to {items.max()}")
        return etype, np.repeat(np.asarray(items, dtype=dtype), counts)
    except (OverflowError, TypeError, ValueError) as exc:
        raise ValueError(f"metadata [gguf.tokenizer_kv] entry {key!r} cannot be a GGUF array of {value['type']}: {exc}") from None


def carried_arrays(kv: dict[str, Any]) -> dict[str, Any]:
    """The source's token types and scores the tokenizer ``kv`` describes cannot give back, as :func:`runs`.

    ``bert`` and Gemma 4 vocabularies: both, where the file has them; padded
    ``llama``/``t5`` ones: the token types, when the tokenizer changes them.

    Examples
    --------
    >>> carried_arrays({"tokenizer.ggml.model": "llama", "tokenizer.ggml.token_type": np.array([3, 2, 2, 1], dtype=np.int32),
    ...                 "tokenizer.ggml.unknown_token_id": 0})
    {'tokenizer.ggml.token_type': {'type': 'int32', 'values': [3, 2, 1], 'counts': [1, 2, 1]}}
    """
    model = kv.get("tokenizer.ggml.model")
    if model in ("llama", "t5"):
        types = kv.get("tokenizer.ggml.token_type")
        keys: tuple[str, ...] = ("tokenizer.ggml.token_type",) if isinstance(types, np.ndarray) and _one_unknown(kv, types) is not types else ()
    elif model == "bert" or _is_gemma4(model, kv.get("tokenizer.ggml.pre")):
        keys = CARRIED_ARRAYS
    else:
        keys = ()
    out = {}
    for key in keys:
        value = kv.get(key)
        encoded = runs(value) if isinstance(value, np.ndarray) else None
        if encoded is not None:
            out[key] = encoded
    return out


def with_source_keys(kvs: list[tuple[str, int, Any]], vocab: Vocab, prov: dict[str, Any]) -> list[tuple[str, int, Any]]:
    """``kvs`` (rebuilt from ``vocab``'s tokenizer) with the source's model, token types and scores, where they describe that tokenizer.

    ``prov`` is the metadata's ``[gguf]`` table. A padded SentencePiece
    vocabulary gets its carried token types when they give the tokenizer's
    piece types (:func:`._tokenizer._one_unknown`); a ``bert`` or Gemma 4
    vocabulary its ``tokenizer.ggml.model``, tokens, carried arrays (and
    Gemma 4 its merges, from the tokenizer) when the ``tokenizer.json`` built
    from them is the tokenizer's own, byte for byte. Otherwise ``kvs``.

    Raises
    ------
    ValueError
        For a carried array that is not a :func:`runs` table, naming the key.
    """
    carried, model = prov.get("tokenizer_kv"), prov.get("tokenizer")
    tok = vocab.tokenizer if isinstance(vocab, TokenizerVocab) else None
    if not isinstance(carried, dict) or tok is None:
        return kvs
    words = list(vocab.words)
    arrays = {k: unruns(k, carried[k], len(words)) for k in CARRIED_ARRAYS if k in carried}
    kept = {k: v for k, v in arrays.items() if v is not None}
    if not kept:
        return kvs
    scalars = {k: v for k, v in carried.items() if isinstance(v, (bool, int, str))}
    types = kept["tokenizer.ggml.token_type"][1] if "tokenizer.ggml.token_type" in kept else None
    if isinstance(tok, SentencePieceTokenizer):
        rebuilt = dict((k, v) for k, _, v in kvs)
        if model not in ("llama", "t5") or rebuilt.get("tokenizer.ggml.model") != model or types is None:
            return kvs
        tokenizer_types = _one_unknown(scalars, types)
        if tokenizer_types is None or not np.array_equal(tokenizer_types, np.asarray(rebuilt.get("tokenizer.ggml.token_type", (0, []))[1])):
            return kvs  # the carried types do not give the tokenizer's
        entry = ("tokenizer.ggml.token_type", ARRAY, kept["tokenizer.ggml.token_type"])
        return [entry if k == "tokenizer.ggml.token_type" else (k, t, v) for k, t, v in kvs]
    if not isinstance(tok, HuggingFaceTokenizer) or not (model == "bert" or _is_gemma4(model, scalars.get("tokenizer.ggml.pre"))):
        return kvs
    extra: list[tuple[str, int, Any]] = []
    data = tok.to_bytes()
    try:
        if model == "bert":
            built = wordpiece_json(scalars, words, types)
        else:
            merges = _merges(data)
            if merges is None:
                return kvs
            built = gemma4_json({**scalars, "tokenizer.ggml.merges": merges}, words, types)
            extra.append(("tokenizer.ggml.merges", ARRAY, (STRING, merges)))
    except FormatError:
        return kvs
    if built.encode("utf-8", "surrogatepass") != data:
        return kvs  # not the tokenizer these keys describe
    return [
        ("tokenizer.ggml.model", STRING, model),
        ("tokenizer.ggml.tokens", ARRAY, (STRING, words)),
        *((k, ARRAY, v) for k, v in kept.items()),
        *extra,
    ]


def _merges(data: bytes) -> list[str] | None:
    """A BPE ``tokenizer.json``'s merges as GGUF ``"a b"`` strings (``None`` if it has none in ``[a, b]`` form)."""
    try:
        doc = json.loads(data)
    except (ValueError, RecursionError):
        return None
    model = doc.get("model") if isinstance(doc, dict) else None
    pairs = model.get("merges") if isinstance(model, dict) else None
    if not isinstance(pairs, list) or not all(isinstance(p, list) and len(p) == 2 and all(isinstance(s, str) for s in p) for p in pairs):
        return None
    return [f"{a} {b}" for a, b in pairs]
