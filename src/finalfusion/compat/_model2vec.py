"""model2vec's parts of a model directory: ``config.json`` settings and vocabulary-quantized tables.

A model2vec directory (``StaticModel.save_pretrained``) holds
``model.safetensors`` (the table ``embeddings``; a vocabulary-quantized
model also ``mapping``, one row of ``embeddings`` per token, and
``weights``, one factor per token), ``tokenizer.json`` and ``config.json``
(``normalize``, ``max_length``). The safetensors loader reads the table and
calls :func:`model2vec_settings` and :func:`expand_quantized` here, so that
:meth:`~finalfusion.Embeddings.encode` gives ``StaticModel.encode``'s
results. Written back by :func:`finalfusion.compat.model2vec.write_model2vec`.
"""

from __future__ import annotations

import json
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from finalfusion._source import Location, file_in, read_regular
from finalfusion.errors import FormatError

__all__ = ["MAPPING_TENSOR", "MODEL2VEC_TENSOR", "WEIGHTS_TENSOR", "expand_quantized", "model2vec_settings"]

#: model2vec's names of its tensors.
MODEL2VEC_TENSOR: Final = "embeddings"
MAPPING_TENSOR: Final = "mapping"
WEIGHTS_TENSOR: Final = "weights"
#: model2vec's defaults when ``config.json`` does not set a value (``model2vec.model``).
DEFAULT_MAX_LENGTH: Final = 512
#: ``config.json`` larger than this is not a model2vec config.
MAX_CONFIG_BYTES: Final = 1 << 20


def model2vec_settings(directory: Location | None, tensor: str) -> dict[str, Any] | None:
    """The ``[model2vec]`` metadata table of a model2vec table: ``normalize`` and ``max_length`` (0: no truncation).

    ``None`` unless the table is model2vec's (``embeddings``) and a
    ``config.json`` is beside it (in a local directory, or one at a URL). Missing values get model2vec's defaults
    (``normalize = false``, ``max_length = 512``); ``max_length: null``
    (no truncation) becomes ``0``.

    Raises
    ------
    FormatError
        For a ``config.json`` that is not a JSON object, or settings of the wrong type.

    Examples
    --------
    >>> import tempfile
    >>> from pathlib import Path
    >>> with tempfile.TemporaryDirectory() as d:
    ...     _ = (Path(d) / "config.json").write_text('{"normalize": true, "max_length": null}')
    ...     model2vec_settings(Path(d), "embeddings")
    {'normalize': True, 'max_length': 0}
    """
    if directory is None or tensor != MODEL2VEC_TENSOR:
        return None
    where = "model2vec config config.json"
    path = file_in(directory, "config.json", chunk=where)
    if path is None:
        return None
    raw = read_regular(path, chunk=where, max_bytes=MAX_CONFIG_BYTES, limit="of a model2vec config.json")
    try:
        cfg = json.loads(raw.decode("utf-8"))
    except (ValueError, RecursionError) as exc:
        raise FormatError("config.json is not valid JSON", chunk=where, expected="a JSON object", found=str(exc)[:80]) from None
    if not isinstance(cfg, dict):
        raise FormatError("config.json is not a JSON object", chunk=where, expected="a JSON object", found=type(cfg).__name__)
    normalize = cfg.get("normalize", False)
    if normalize is None:
        normalize = False
    if not isinstance(normalize, bool):
        raise FormatError("config.json: normalize is not a boolean", chunk=where, expected="true or false", found=repr(normalize)[:40])
    max_length = cfg.get("max_length", DEFAULT_MAX_LENGTH)
    if max_length is None:
        max_length = 0
    if not isinstance(max_length, int) or isinstance(max_length, bool) or max_length < 0:
        raise FormatError("config.json: max_length is not a token count", chunk=where, expected="a non-negative integer or null", found=repr(max_length)[:40])
    return {"normalize": normalize, "max_length": max_length}


def expand_quantized(
    table: npt.NDArray[np.float32], mapping: npt.NDArray[Any] | None, weights: npt.NDArray[Any] | None, n_tokens: int, where: str
) -> npt.NDArray[np.float32]:
    """One row per token: ``table[mapping[t]] * weights[t]`` (model2vec's ``_encode_helper``), for the first ``n_tokens`` tokens.

    Raises
    ------
    FormatError
        If ``mapping`` or ``weights`` is not one value per token (at least
        ``n_tokens``) or a ``mapping`` value is not a row of ``table``.

    Examples
    --------
    >>> t = np.array([[1, 2], [3, 4]], dtype=np.float32)
    >>> expand_quantized(t, np.array([1, 0, 1]), np.array([1.0, 2.0, 0.5]), 3, "m").tolist()
    [[3.0, 4.0], [2.0, 4.0], [1.5, 2.0]]
    """
    for name, arr in ((MAPPING_TENSOR, mapping), (WEIGHTS_TENSOR, weights)):
        if arr is not None and (arr.ndim != 1 or len(arr) < n_tokens):
            raise FormatError(
                f"the {name!r} tensor is not one value per token", chunk=where, expected=f"a vector of at least {n_tokens} values", found=list(arr.shape)
            )
    if mapping is not None:
        ids = mapping[:n_tokens].astype(np.int64)
        bad = np.flatnonzero((ids < 0) | (ids >= len(table)))
        if len(bad):
            raise FormatError(f"token {int(bad[0])} maps to no row of the table", chunk=where, expected=f"rows 0..{len(table) - 1}", found=int(ids[bad[0]]))
        rows = table[ids]
    else:
        if len(table) < n_tokens:
            raise FormatError("the table has fewer rows than the vocabulary has tokens", chunk=where, expected=f"at least {n_tokens} rows", found=len(table))
        rows = table[:n_tokens].copy()
    if weights is not None:
        w = weights[:n_tokens]
        if not np.isfinite(w).all():
            raise FormatError("a token weight is not finite", chunk=where, expected="finite weights", found=float(w[~np.isfinite(w)][0]))
        # float64 products rounded once: exactly the float32 products for float32 weights.
        with np.errstate(over="ignore"):
            rows = (rows.astype(np.float64) * w.astype(np.float64)[:, None]).astype(np.float32)
    return np.ascontiguousarray(rows, dtype=np.float32)
