"""Rich display in Jupyter: the HTML behind every ``_repr_html_`` of the package.

Each displayed class has a one-line ``_repr_html_`` that calls one function
here, so the markup (and its escaping) lives in one place. Every value that
comes from data -- words, metadata keys and values, type names -- goes through
:func:`html.escape`. The tables are plain ``<table>`` elements with a caption
and no styling of their own, so they follow the notebook's theme.

The objects are read through their public attributes only (duck typing), so
this module imports nothing from the rest of the package.

Examples
--------
>>> import numpy as np, finalfusion
>>> emb = finalfusion.Embeddings(finalfusion.NdArray(np.eye(2, dtype=np.float32)), finalfusion.SimpleVocab(["<a>", "b"]))
>>> html = emb._repr_html_()
>>> html.startswith("<table") and "&lt;a&gt;" in html and "<a>" not in html
True
"""

from __future__ import annotations

import mmap
from collections.abc import Iterable, Mapping, Sequence
from html import escape
from typing import Any, Final

import numpy as np

from finalfusion._remote_rows import is_remote

__all__ = [
    "embeddings_html",
    "evaluation_html",
    "human_bytes",
    "is_mapped",
    "metadata_html",
    "norms_html",
    "results_html",
    "storage_html",
    "vocab_html",
]

#: Words shown at most as a vocabulary's first words.
SHOWN_WORDS: Final = 8
#: Metadata entries shown at most (nested tables count as one entry).
SHOWN_METADATA: Final = 20
#: Longest metadata value shown before it is cut with an ellipsis.
VALUE_CHARS: Final = 80


def human_bytes(n: int) -> str:
    """A byte count for people: ``"1.5 MiB"``.

    Examples
    --------
    >>> human_bytes(512), human_bytes(1536), human_bytes(3 * 2**30)
    ('512 B', '1.5 KiB', '3.0 GiB')
    """
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{int(value)} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")  # pragma: no cover


def is_mapped(array: Any) -> bool:
    """Whether a numpy array is a view of a memory-mapped file.

    Examples
    --------
    >>> import numpy as np
    >>> is_mapped(np.zeros(3))
    False
    """
    base = array
    while base is not None:
        if isinstance(base, (mmap.mmap, np.memmap)):
            return True
        if isinstance(base, memoryview):
            base = base.obj
            continue
        base = getattr(base, "base", None)
    return False


def _table(caption: str, rows: Iterable[tuple[str, str]], cls: str) -> str:
    """A two-column table; ``rows`` hold already escaped HTML."""
    body = "".join(f"<tr><th style='text-align:left'>{k}</th><td style='text-align:left'>{v}</td></tr>" for k, v in rows)
    return f"<table class='finalfusion {cls}'><caption style='text-align:left'><b>{caption}</b></caption><tbody>{body}</tbody></table>"


def _words_preview(words: Sequence[str]) -> str:
    shown = ", ".join(f"<code>{escape(w)}</code>" for w in words[:SHOWN_WORDS])
    return shown + (", …" if len(words) > SHOWN_WORDS else "")


def _optional(obj: Any, name: str) -> Any:
    """``obj.name``, or ``None`` where the type does not have it.

    Properties that do not apply to a type raise ``AttributeError`` (a
    ``TokenizerVocab`` has no n-gram lengths): every row beyond the ones all
    vocabularies share is read through here, so a new type shows fewer rows
    instead of breaking the display.
    """
    return getattr(obj, name, None)


def _vocab_rows(vocab: Any) -> list[tuple[str, str]]:
    words = vocab.words
    rows = [("vocabulary", escape(type(vocab).__name__)), ("words", f"{len(words):,}")]
    tokenizer = _optional(vocab, "tokenizer")
    indexer = _optional(vocab, "subword_indexer")
    if tokenizer is not None:
        kind = _optional(tokenizer, "kind")
        rows.append(("tokenizer", escape(f"{type(tokenizer).__name__} ({kind})" if kind else type(tokenizer).__name__)))
    elif indexer is not None:
        rows.append(("subword rows", f"{int(vocab.upper_bound) - len(words):,} ({escape(type(indexer).__name__)})"))
        min_n, max_n = _optional(vocab, "min_n"), _optional(vocab, "max_n")
        if min_n is not None and max_n is not None:
            rows.append(("n-gram lengths", f"{int(min_n)}&ndash;{int(max_n)}"))
    if len(words):
        rows.append(("first words", _words_preview(words)))
    return rows


def _storage_rows(storage: Any) -> list[tuple[str, str]]:
    rows_, dims = storage.shape
    rows = [("storage", escape(type(storage).__name__)), ("shape", f"{rows_:,} &times; {dims:,}")]
    matrix = getattr(storage, "matrix", None)
    if matrix is not None:
        arrays = [matrix]
    else:
        pq = storage.quantizer
        codes = storage.quantized_embeddings
        arrays = [a for a in (codes, pq.quantizers, pq.projection, storage.norms) if a is not None]
        rows.append(("subquantizers", f"{int(pq.quantized_len)} &times; {int(pq.n_centroids)} centroids"))
        rows.append(("projection", "yes" if pq.projection is not None else "no"))
    size = sum(int(a.nbytes) for a in arrays)
    where = "rows at a server" if is_remote(arrays[0]) else "memory-mapped file" if is_mapped(arrays[0]) else "in memory"
    rows.append(("size", f"{human_bytes(size)} ({where})"))
    return rows


def _norms_rows(norms: Any) -> list[tuple[str, str]]:
    n = np.asarray(norms.norms, dtype=np.float64)
    if len(n) == 0:
        return [("norms", "0")]
    return [("norms", f"{len(n):,}"), ("min / median / max", f"{n.min():.4g} / {float(np.median(n)):.4g} / {n.max():.4g}")]


def _short(value: Any) -> str:
    text = str(value)
    if len(text) > VALUE_CHARS:
        text = text[: VALUE_CHARS - 1] + "…"
    return escape(text)


def _metadata_rows(data: Mapping[str, Any]) -> list[tuple[str, str]]:
    items = list(data.items())
    rows = []
    for key, value in items[:SHOWN_METADATA]:
        shown = f"table: {', '.join(escape(str(k)) for k in value)}" if isinstance(value, Mapping) else _short(value)
        rows.append((escape(str(key)), shown))
    if len(items) > SHOWN_METADATA:
        rows.append(("…", f"{len(items) - SHOWN_METADATA} more entries"))
    return rows


def vocab_html(vocab: Any) -> str:
    """A vocabulary as a table: kind, words, subword rows, n-gram lengths, first words."""
    return _table("Vocabulary", _vocab_rows(vocab), "vocab")


def storage_html(storage: Any) -> str:
    """A storage as a table: kind, shape, quantizer, size and whether it is memory-mapped."""
    return _table("Storage", _storage_rows(storage), "storage")


def norms_html(norms: Any) -> str:
    """Norms as a table: count, minimum, median and maximum."""
    return _table("Norms", _norms_rows(norms), "norms")


def metadata_html(metadata: Any) -> str:
    """Metadata as a table of its top-level keys (nested tables list their keys)."""
    rows = _metadata_rows(metadata) or [("(empty)", "")]
    return _table("Metadata", rows, "metadata")


def embeddings_html(emb: Any, file: str | None = None) -> str:
    """Embeddings as one table: vocabulary, storage, norms and metadata keys.

    ``file`` is the path of the memory-mapped file, when there is one.
    """
    rows = [("dims", f"{int(emb.dims):,}"), *_vocab_rows(emb.vocab), *_storage_rows(emb.storage)]
    if file is not None:
        rows.append(("file", f"<code>{escape(file)}</code>"))
    rows.extend(_norms_rows(emb.norms) if emb.norms is not None else [("norms", "none")])
    meta = emb.metadata
    keys = ", ".join(f"<code>{escape(str(k))}</code>" for k in meta) if meta is not None else "none"
    rows.append(("metadata keys", keys or "(empty)"))
    return _table("Embeddings", rows, "embeddings")


def results_html(results: Iterable[Any]) -> str:
    """Neighbours as a ranked table: rank, word, cosine similarity."""
    body = "".join(
        f"<tr><td style='text-align:right'>{i}</td><td style='text-align:left'>{escape(str(r.word))}</td>"
        f"<td style='text-align:right'>{float(r.similarity):.4f}</td></tr>"
        for i, r in enumerate(results, 1)
    )
    head = "<thead><tr><th style='text-align:right'>rank</th><th style='text-align:left'>word</th><th style='text-align:right'>similarity</th></tr></thead>"
    return f"<table class='finalfusion results'>{head}<tbody>{body}</tbody></table>"


def evaluation_html(evaluation: Any) -> str:
    """An analogy evaluation as a table: per section and total, correct / total / skipped / accuracy."""

    def row(name: str, s: Any, tag: str = "td") -> str:
        acc = "&ndash;" if s.total == 0 else f"{s.correct / s.total:.3f}"
        cells = [escape(name), f"{s.correct:,}", f"{s.total:,}", f"{s.skipped:,}", acc]
        return "<tr>" + "".join(f"<{tag} style='text-align:{'left' if i == 0 else 'right'}'>{c}</{tag}>" for i, c in enumerate(cells)) + "</tr>"

    head = "<thead><tr>" + "".join(f"<th>{h}</th>" for h in ("section", "correct", "total", "skipped", "accuracy")) + "</tr></thead>"
    body = "".join(row(s.name, s) for s in evaluation.sections)
    return f"<table class='finalfusion evaluation'>{head}<tbody>{body}{row('total', evaluation, 'th')}</tbody></table>"
