"""Writing model2vec directories: finalfusion, fastText and model vectors where model2vec models are used.

:func:`write_model2vec` writes what ``StaticModel.save_pretrained`` writes and
``model2vec.StaticModel.from_pretrained`` reads -- ``model.safetensors``
(the table ``embeddings``, float32), ``tokenizer.json`` and ``config.json``
(``normalize``, ``max_length``) -- so that model2vec's ``encode`` gives what
:meth:`~finalfusion.Embeddings.encode` gives. Reading them back is the
safetensors loader's job (:mod:`finalfusion.compat._model2vec`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from finalfusion._atomic import atomic_output
from finalfusion._encode import FASTTEXT_SPACE, model_settings
from finalfusion._output import write_directory
from finalfusion._tokenizers import FASTTEXT_SPACE_REGEX, HuggingFaceTokenizer
from finalfusion.embeddings import Embeddings
from finalfusion.storage.ndarray import NdArray
from finalfusion.vocab.tokenizer import TokenizerVocab

__all__ = ["UNK_TOKEN", "write_model2vec"]

#: The unknown token of the WordLevel tokenizer written for a word vocabulary (``[UNK]``, or with ``_`` appended while it is a word).
UNK_TOKEN: Final = "[UNK]"
#: The files a model2vec directory needs, written in this order (``config.json`` last).
FILES: Final = ("model.safetensors", "tokenizer.json", "modules.json", "config.json")
#: The kind of directory written, in its manifest.
KIND: Final = "model2vec model"


def _safetensors(matrix: npt.NDArray[np.float32]) -> bytes:
    """A safetensors file holding ``matrix`` as the F32 tensor ``embeddings`` (header padded with spaces to 8 bytes)."""
    data = np.ascontiguousarray(matrix, dtype="<f4").tobytes()
    header = json.dumps({"embeddings": {"dtype": "F32", "shape": list(matrix.shape), "data_offsets": [0, len(data)]}}, separators=(",", ":")).encode()
    header += b" " * (-len(header) % 8)
    return len(header).to_bytes(8, "little") + header + data


#: The pre-tokenizer written for a word vocabulary: a ``Split`` that drops runs of the characters fastText splits a text at
#: (:data:`finalfusion._encode.FASTTEXT_SPACE`) and splits nowhere else (``WhitespaceSplit`` would also split at U+00A0,
#: U+2028 and the other Unicode spaces, so words holding one were lost).
PRE_TOKENIZER: Final = {"type": "Split", "pattern": {"Regex": FASTTEXT_SPACE_REGEX}, "behavior": "Removed", "invert": False}


def _unwritable(words: list[str]) -> list[str]:
    """The words no text reaches through the written tokenizer: empty, or holding a character fastText splits at."""
    return [w for w in words if not w or FASTTEXT_SPACE.search(w)]


def _word_level(words: list[str]) -> tuple[bytes, list[str]]:
    """A ``tokenizer.json`` of a WordLevel model over ``words`` plus an unknown token, split where fastText splits a text.

    The unknown token is an added token, which ``tokenizers`` finds inside
    any text: it is ``[UNK]`` with ``_`` appended until no word holds it.
    """
    unk = UNK_TOKEN
    joined = "\n".join(words)  # no word holds a newline (:func:`_unwritable`)
    while unk in joined:
        unk += "_"
    tokens = [*words, unk]
    doc: dict[str, Any] = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [{"id": len(words), "content": unk, "single_word": False, "lstrip": False, "rstrip": False, "normalized": False, "special": True}],
        "normalizer": None,
        "pre_tokenizer": PRE_TOKENIZER,
        "post_processor": None,
        "decoder": None,
        "model": {"type": "WordLevel", "vocab": {t: i for i, t in enumerate(tokens)}, "unk_token": unk},
    }
    return json.dumps(doc, ensure_ascii=False).encode("utf-8"), tokens


def write_model2vec(directory: str | os.PathLike[str], emb: Embeddings, *, normalize: bool | None = None) -> None:
    """Write ``emb`` as a model2vec directory that ``model2vec.StaticModel.from_pretrained`` loads with the same ``encode`` results.

    Model vocabularies with a ``tokenizer.json`` (safetensors, model2vec,
    WordLlama, GGUF vocabularies read through ``tokenizers``) keep their
    tokenizer; the table holds the model's rows (stored unit rows times
    their norms; a vocabulary-quantized model is written expanded, one row
    per token), and ``config.json`` the model's ``normalize`` and
    ``max_length``. Any other vocabulary (finalfusion, fastText, word2vec,
    ...) gets a WordLevel ``tokenizer.json`` over its words, with a
    pre-tokenizer that splits a text where fastText does (at ASCII space,
    tab, newline, vertical tab, form feed and carriage return, not at
    U+00A0, U+2028 or other Unicode spaces, so a word holding one
    round-trips) and an unknown token ``[UNK]`` (a zero
    row model2vec drops), the words' unit vectors (fastText's
    ``get_sentence_vector`` averages unit vectors) -- words whose vector is
    zero are left to the unknown token, as fastText skips them -- and
    ``max_length: null``. model2vec cannot embed words outside a WordLevel
    vocabulary: unknown words of subword vocabularies (n-grams) are
    dropped there, where :meth:`~finalfusion.Embeddings.encode` uses their
    n-grams; texts of known words separated by whitespace give the same
    vectors. model2vec drops the unknown token from every text: written
    from WordLlama weights (whose ``embed`` keeps it), a text with
    characters the tokenizer does not know encodes without that token's
    row; every other text gives WordLlama's vector.

    The directory is written whole beside the target, with a manifest
    (``finalfusion-manifest.json``) of its files, and swapped in only when
    complete. An existing ``directory`` is replaced only when it is empty
    or holds exactly a model this function wrote there (every file listed
    in its manifest, unchanged): the old files go with it, so nothing
    stale (another ``*.safetensors``, a ``model.safetensors.index.json``
    that loaders prefer) is left. Anything else -- a file, a symbolic
    link, a model downloaded or written by another tool, a directory with
    other files -- is refused and left as it is.

    Parameters
    ----------
    directory
        The model directory (created if needed).
    emb
        The embeddings.
    normalize
        ``config.json``'s ``normalize``; default: the model's setting
        (model2vec directories), else ``False``.

    Raises
    ------
    ValueError
        For a model vocabulary whose tokenizer is a SentencePiece model
        (model2vec reads only ``tokenizer.json``), or a word vocabulary with
        words that no text reaches (empty, or holding ASCII whitespace),
        naming them; nothing is written.
    OutputRefused
        (a :class:`FileExistsError`) ``directory`` is a file or a symbolic
        link, or holds files this function did not write there (named in
        the message).
    OSError
        Any I/O error (the target is left as it was).

    Examples
    --------
    >>> import tempfile, numpy as np
    >>> from finalfusion.storage import NdArray
    >>> from finalfusion.vocab import SimpleVocab
    >>> emb = Embeddings(NdArray(np.array([[3, 4], [0, 2]], dtype=np.float32)), SimpleVocab(["a", "b"]))
    >>> with tempfile.TemporaryDirectory() as d:
    ...     write_model2vec(d, emb)
    ...     sorted(os.listdir(d))
    ['config.json', 'finalfusion-manifest.json', 'model.safetensors', 'modules.json', 'tokenizer.json']
    """
    vocab = emb.vocab
    storage = emb.storage
    n = len(vocab)
    matrix = storage.matrix[:n] if isinstance(storage, NdArray) else np.asarray(storage.rows(np.arange(n)), dtype=np.float32)
    if isinstance(vocab, TokenizerVocab):
        if not isinstance(vocab.tokenizer, HuggingFaceTokenizer):
            raise ValueError(
                f"model2vec reads a tokenizer.json; this vocabulary's tokenizer is {vocab.tokenizer.kind}: convert it to a tokenizers tokenizer.json first"
            )
        tokenizer_json = vocab.tokenizer.to_bytes()
        table = matrix * (emb.norms.norms[:, None] if emb.norms is not None else np.float32(1))
        model_normalize, max_length = model_settings(emb.metadata)
    else:
        lengths = np.sqrt(np.einsum("ij,ij->i", matrix, matrix))
        keep = lengths > 0
        words = [w for w, k in zip(vocab.words, keep.tolist(), strict=True) if k]
        lost = _unwritable(words)
        if lost:
            raise ValueError(
                f"model2vec cannot hold {len(lost)} word(s) of this vocabulary: its tokenizer splits a text at ASCII whitespace "
                f"(as fastText and encode do), so no text reaches a word that is empty or holds a space, tab, newline, "
                f"vertical tab, form feed or carriage return: {', '.join(map(repr, lost[:10]))}{' ...' if len(lost) > 10 else ''}"
            )
        tokenizer_json, tokens = _word_level(words)
        table = np.zeros((len(tokens), matrix.shape[1]), dtype=np.float32)
        table[: len(words)] = matrix[keep] / lengths[keep, None]
        model_normalize, max_length = False, None
    config = {"normalize": model_normalize if normalize is None else bool(normalize), "max_length": max_length, "embedding_dtype": "float32"}
    modules = [{"idx": 0, "name": "0", "path": ".", "type": "sentence_transformers.models.StaticEmbedding"}]
    contents = {
        "model.safetensors": _safetensors(np.asarray(table, dtype=np.float32)),
        "tokenizer.json": tokenizer_json,
        "modules.json": json.dumps(modules, indent=4).encode(),
        "config.json": json.dumps(config, indent=4).encode(),
    }
    write_directory(directory, KIND, _fill(contents))


def _fill(contents: dict[str, bytes]) -> Callable[[str], None]:
    def fill(directory: str) -> None:
        for name in FILES:
            with atomic_output(os.path.join(directory, name)) as f:
                f.write(contents[name])

    return fill
