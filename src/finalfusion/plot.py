"""Pictures of embeddings with matplotlib: a 2-D projection, a similarity heat map, the norms.

matplotlib is optional: it is imported when a function is called, and a
missing installation raises :class:`~finalfusion.errors.MissingExtraError`
(an :class:`ImportError`) that names the ``plot`` extra
(``pip install 'finalfusion-py[plot]'``, matplotlib only). Every function draws on the
given matplotlib ``Axes`` (a new figure when ``ax`` is ``None``) and returns it,
so the picture can be adjusted, combined with others or saved.

Every text that comes from data -- words, group names -- is shown literally:
matplotlib would read ``$...$`` as mathtext (``$\\frac{$`` even breaks
``savefig``) and hide legend entries whose label starts with ``_``. One helper,
:func:`_literal`, turns math and TeX off on each such text object, so the text
objects carry the word itself (``get_text()`` is the word) and it is drawn as
written.

Examples
--------
>>> import matplotlib
>>> matplotlib.use("Agg")                       # no window: draw in memory (as in a notebook or a script)
>>> import numpy as np, finalfusion, finalfusion.plot
>>> emb = finalfusion.Embeddings(finalfusion.NdArray(np.eye(3, dtype=np.float32)), finalfusion.SimpleVocab(["a", "b", "c"]))
>>> ax = finalfusion.plot.similarity_matrix(emb, ["a", "b"])
>>> [t.get_text() for t in ax.get_xticklabels()]
['a', 'b']
>>> ax.figure.savefig("similarity.png")            # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

import numpy as np
import numpy.typing as npt

from finalfusion.errors import import_extra

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.text import Text

    from finalfusion.embeddings import Embeddings

__all__ = ["norms", "pca", "projection", "similarity_matrix"]


def _axes(ax: Axes | None, size: tuple[float, float]) -> Axes:
    """``ax``, or the axes of a new figure; without matplotlib a MissingExtraError names the ``plot`` extra."""
    if ax is not None:
        return ax
    plt = import_extra("matplotlib.pyplot", "finalfusion.plot", extra="plot")
    new: Axes = plt.subplots(figsize=size, layout="constrained")[1]
    return new


#: Text properties of every text that comes from data: no mathtext, no TeX (the word as written).
_LITERAL: Final[dict[str, Any]] = {"parse_math": False, "usetex": False}


def _literal(texts: Iterable[Text]) -> None:
    """Show ``texts`` (made from words or other data) literally: the one place that escapes data for matplotlib."""
    for text in texts:
        text.update(_LITERAL)


def _word_list(words: Sequence[str]) -> list[str]:
    if isinstance(words, str):
        raise TypeError("words must be a sequence of words, not one string")
    return list(words)


def _vectors(emb: Embeddings, words: Sequence[str]) -> npt.NDArray[np.float32]:
    """The embeddings of ``words`` (unknown words through their subwords); ``KeyError`` naming those without one."""
    matrix, found = emb.embedding_batch(list(words))
    if not found.all():
        missing = [w for w, ok in zip(words, found.tolist(), strict=True) if not ok]
        raise KeyError(f"no embedding for {missing}")
    return matrix


def pca(vectors: npt.ArrayLike, components: int = 2) -> npt.NDArray[np.float64]:
    """Project row vectors onto their first principal components (numpy only).

    The rows are centred and projected onto the right singular vectors of the
    largest singular values; each component's sign is fixed so that its
    largest coordinate is positive, which makes the picture reproducible.

    Parameters
    ----------
    vectors
        Array of shape ``(n, dims)``.
    components
        Number of components to keep, at most ``min(n, dims)``.

    Returns
    -------
    numpy.ndarray
        Shape ``(n, components)``, ``float64``.

    Examples
    --------
    >>> import numpy as np
    >>> points = pca([[0.0, 0.0, 1.0], [2.0, 0.0, 1.0], [4.0, 0.1, 1.0]], components=1)
    >>> (np.round(points[:, 0], 2) + 0.0).tolist()
    [-2.0, 0.0, 2.0]
    """
    x = np.asarray(vectors, dtype=np.float64)
    if x.ndim != 2:
        raise ValueError(f"vectors must be 2-D, got shape {x.shape}")
    if not 1 <= components <= min(x.shape):
        raise ValueError(f"components must be between 1 and {min(x.shape)}, got {components}")
    x = x - x.mean(axis=0)
    _, _, vt = np.linalg.svd(x, full_matrices=False)
    basis = vt[:components]
    flip = np.sign(basis[np.arange(components), np.abs(basis).argmax(axis=1)])
    return np.asarray(x @ (basis * flip[:, None]).T, dtype=np.float64)


def projection(emb: Embeddings, words: Sequence[str] | Mapping[str, Sequence[str]], ax: Axes | None = None, *, annotate: bool = True) -> Axes:
    """Scatter plot of words in the plane of their first two principal components.

    Parameters
    ----------
    emb
        The embeddings.
    words
        The words to show; or a mapping from a group name to its words, each
        group in its own colour with a legend. Unknown words of a subword
        vocabulary are embedded through their n-grams.
    ax
        matplotlib ``Axes`` to draw on; ``None`` makes a new figure.
    annotate
        Write each word next to its point.

    Returns
    -------
    matplotlib.axes.Axes
        The axes drawn on.

    Raises
    ------
    KeyError
        If a word has no embedding.
    ImportError
        If matplotlib is not installed.

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> import numpy as np, finalfusion
    >>> emb = finalfusion.Embeddings(finalfusion.NdArray(np.eye(4, dtype=np.float32)), finalfusion.SimpleVocab(["a", "b", "c", "d"]))
    >>> ax = projection(emb, {"first": ["a", "b"], "second": ["c", "d"]})
    >>> [t.get_text() for t in ax.texts], [t.get_text() for t in ax.get_legend().get_texts()]
    (['a', 'b', 'c', 'd'], ['first', 'second'])
    """
    groups = dict(words) if isinstance(words, Mapping) else {"": _word_list(words)}
    flat = [w for group in groups.values() for w in group]
    if len(flat) < 2:
        raise ValueError("a projection needs at least two words")
    points = pca(_vectors(emb, flat), components=2)
    ax = _axes(ax, (7.0, 5.5))
    start = 0
    handles = []
    for group in groups.values():
        xy = points[start : start + len(group)]
        handles.append(ax.scatter(xy[:, 0], xy[:, 1], s=28))
        if annotate:
            for word, (x, y) in zip(group, xy.tolist(), strict=True):
                _literal([ax.annotate(word, (x, y), xytext=(4, 3), textcoords="offset points", fontsize=9)])
        start += len(group)
    if any(groups):
        # Handles and labels passed explicitly: matplotlib would drop a group whose name starts with "_".
        named = [(handle, name) for handle, name in zip(handles, groups, strict=True) if name]
        _literal(ax.legend([h for h, _ in named], [n for _, n in named], loc="best", fontsize=9).get_texts())
    ax.set_xlabel("first principal component")
    ax.set_ylabel("second principal component")
    ax.set_title("Words projected with PCA")
    return ax


def similarity_matrix(emb: Embeddings, words: Sequence[str], ax: Axes | None = None, *, annotate: bool | None = None, cmap: str = "viridis") -> Axes:
    """Heat map of the cosine similarities between words.

    Parameters
    ----------
    emb
        The embeddings.
    words
        The words, in the order of the rows and columns.
    ax
        matplotlib ``Axes`` to draw on; ``None`` makes a new figure.
    annotate
        Write each similarity into its cell; by default when there are at
        most 12 words.
    cmap
        matplotlib colour map.

    Returns
    -------
    matplotlib.axes.Axes
        The axes drawn on; the colour bar belongs to its figure.

    Raises
    ------
    KeyError
        If a word has no embedding.
    ImportError
        If matplotlib is not installed.

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> import numpy as np, finalfusion
    >>> emb = finalfusion.Embeddings(finalfusion.NdArray(np.eye(2, dtype=np.float32)), finalfusion.SimpleVocab(["a", "b"]))
    >>> ax = similarity_matrix(emb, ["a", "b"])
    >>> ax.images[0].get_array().tolist()
    [[1.0, 0.0], [0.0, 1.0]]
    """
    words = _word_list(words)
    if not words:
        raise ValueError("a similarity matrix needs at least one word")
    v = _vectors(emb, words).astype(np.float64)
    lengths = np.linalg.norm(v, axis=1, keepdims=True)
    v = np.divide(v, lengths, out=np.zeros_like(v), where=lengths > 0)
    sims = v @ v.T
    ax = _axes(ax, (1.2 + 0.55 * len(words), 0.8 + 0.5 * len(words)))
    image = ax.imshow(sims, cmap=cmap, vmin=min(0.0, float(sims.min())), vmax=1.0)
    ax.set_xticks(range(len(words)), words, rotation=60, ha="right")
    ax.set_yticks(range(len(words)), words)
    _literal([*ax.get_xticklabels(), *ax.get_yticklabels()])
    if annotate if annotate is not None else len(words) <= 12:
        for i in range(len(words)):
            for j in range(len(words)):
                ax.text(j, i, f"{sims[i, j]:.2f}", ha="center", va="center", fontsize=7, color="white" if sims[i, j] < 0.6 else "black")
    ax.figure.colorbar(image, ax=ax, shrink=0.8, label="cosine similarity")
    ax.set_title("Cosine similarity")
    return ax


def norms(emb: Embeddings, ax: Axes | None = None, *, bins: int = 50, log: bool = False) -> Axes:
    """Histogram of the word norms (the lengths of the vectors before normalisation).

    Parameters
    ----------
    emb
        Embeddings with a norms chunk.
    ax
        matplotlib ``Axes`` to draw on; ``None`` makes a new figure.
    bins
        Number of histogram bins.
    log
        Logarithmic count axis.

    Returns
    -------
    matplotlib.axes.Axes
        The axes drawn on.

    Raises
    ------
    ValueError
        If the embeddings have no norms.
    ImportError
        If matplotlib is not installed.

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> import numpy as np, finalfusion
    >>> emb = finalfusion.Embeddings(
    ...     finalfusion.NdArray(np.eye(3, dtype=np.float32)), finalfusion.SimpleVocab(["a", "b", "c"]), norms=finalfusion.Norms([1.0, 2.0, 2.0])
    ... )
    >>> ax = norms(emb, bins=2)
    >>> [float(p.get_height()) for p in ax.patches]
    [1.0, 2.0]
    """
    if emb.norms is None:
        raise ValueError("these embeddings have no norms chunk")
    values = np.asarray(emb.norms.norms, dtype=np.float64)
    ax = _axes(ax, (6.5, 4.0))
    ax.hist(values, bins=bins, log=log, color="tab:blue", alpha=0.85)
    ax.axvline(float(np.median(values)), color="tab:red", linestyle="--", label=f"median {np.median(values):.3g}")
    ax.legend(fontsize=9)
    ax.set_xlabel("norm of the word vector before normalisation")
    ax.set_ylabel("words")
    ax.set_title(f"Norms of {len(values):,} words")
    return ax
