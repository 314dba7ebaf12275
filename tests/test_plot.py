"""finalfusion.plot with matplotlib's Agg backend, and the documentation's pictures (docs/make_images.py)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

matplotlib = pytest.importorskip("matplotlib", reason="finalfusion.plot needs matplotlib (the plot extra)")
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

import finalfusion  # noqa: E402
from finalfusion import plot  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


@pytest.fixture(scope="module")
def emb() -> finalfusion.Embeddings:
    return finalfusion.load_finalfusion(ROOT / "examples" / "tutorial.fifu")


def test_projection_labels_groups_and_separates_them(emb: finalfusion.Embeddings) -> None:
    groups = {"kin": ["father", "mother", "son"], "metals": ["gold", "silver", "brass"]}
    ax = plot.projection(emb, groups)
    assert [t.get_text() for t in ax.texts] == ["father", "mother", "son", "gold", "silver", "brass"]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["kin", "metals"]
    kin, metals = (c.get_offsets() for c in ax.collections)
    # The first component separates kin from metals: the groups' centres are far apart relative to their spread.
    gap = np.linalg.norm(np.mean(kin, axis=0) - np.mean(metals, axis=0))
    assert gap > 2 * max(np.std(kin, axis=0).max(), np.std(metals, axis=0).max())


def test_projection_on_given_axes_and_unknown_words(emb: finalfusion.Embeddings) -> None:
    _, ax = plt.subplots()
    assert plot.projection(emb, ["kingdomes", "kingdoms", "gold"], ax=ax, annotate=False) is ax
    assert len(ax.texts) == 0
    assert ax.get_legend() is None


def test_pca_matches_the_leading_singular_vectors() -> None:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(50, 6)) * np.array([10.0, 5.0, 1.0, 0.5, 0.1, 0.1])
    p = plot.pca(x, components=2)
    centred = x - x.mean(axis=0)
    assert p.shape == (50, 2)
    np.testing.assert_allclose(np.var(p, axis=0), np.sort(np.linalg.eigvalsh(np.cov(centred.T, bias=True)))[::-1][:2], rtol=1e-9)
    with pytest.raises(ValueError, match="components"):
        plot.pca(x, components=7)


def test_similarity_matrix_values(emb: finalfusion.Embeddings) -> None:
    words = ["gold", "silver", "sheep"]
    ax = plot.similarity_matrix(emb, words)
    values = np.asarray(ax.images[0].get_array())
    expected = [[1.0, emb.embedding("gold") @ emb.embedding(w) / np.linalg.norm(emb.embedding(w))] for w in words]
    np.testing.assert_allclose(np.diag(values), 1.0, atol=1e-6)
    np.testing.assert_allclose(values[0], [row[1] for row in expected], atol=1e-5)
    assert [t.get_text() for t in ax.get_yticklabels()] == words
    assert len(ax.texts) == 9


def test_norms_histogram(emb: finalfusion.Embeddings) -> None:
    ax = plot.norms(emb, bins=20)
    assert sum(p.get_height() for p in ax.patches) == len(emb.vocab)
    assert len(ax.patches) == 20


def test_errors(emb: finalfusion.Embeddings) -> None:
    simple = finalfusion.Embeddings(finalfusion.NdArray(np.eye(2, dtype=np.float32)), finalfusion.SimpleVocab(["a", "b"]))
    with pytest.raises(KeyError, match="zzz"):
        plot.similarity_matrix(simple, ["a", "zzz"])
    with pytest.raises(ValueError, match="no norms"):
        plot.norms(simple)
    with pytest.raises(TypeError, match="one string"):
        plot.projection(emb, "gold")
    with pytest.raises(ValueError, match="two words"):
        plot.projection(emb, ["gold"])


def test_documentation_pictures_are_drawn(tmp_path: Path) -> None:
    spec = importlib.util.spec_from_file_location("make_images", ROOT / "docs" / "make_images.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    written = module.make(tmp_path)
    assert sorted(p.name for p in written) == ["norms.png", "projection.png", "similarity.png"]
    for path in written:
        data = path.read_bytes()
        assert data.startswith(PNG), path
        assert (ROOT / "docs" / "img" / path.name).read_bytes().startswith(PNG), f"docs/img/{path.name} is committed"
        assert 5_000 < len(data) < 200_000, (path, len(data))


#: Words matplotlib would not show as written: mathtext (one of them breaks savefig), TeX specials, a hidden-label prefix.
HOSTILE = ["$x^2$", "$\\frac{$", "$", "$$", "a_b", "_hidden", "100%", "#1", "{}", "\\", "^~&"]


def _hostile_emb() -> finalfusion.Embeddings:
    matrix = np.random.default_rng(0).standard_normal((len(HOSTILE), 8)).astype(np.float32)
    return finalfusion.Embeddings(finalfusion.NdArray(matrix), finalfusion.SimpleVocab(HOSTILE))


def _saved_literally(ax, texts) -> list[str]:  # type: ignore[no-untyped-def]
    """Save the figure in three formats, then the texts (after drawing), each checked to be drawn without math."""
    import io

    for fmt in ("png", "svg", "pdf"):
        ax.figure.savefig(io.BytesIO(), format=fmt)
    shown = list(texts())
    for t in shown:
        assert not t.get_parse_math(), t.get_text()
        assert not t.get_usetex(), t.get_text()
    return [t.get_text() for t in shown]


def test_words_are_drawn_literally() -> None:
    """Every text made from data keeps the word (no mathtext, no TeX, no hidden legend entry), and the figure saves."""
    emb = _hostile_emb()
    ax = plot.projection(emb, HOSTILE)
    assert _saved_literally(ax, lambda: ax.texts) == HOSTILE
    groups = {"$\\frac{$": HOSTILE[:4], "_hidden": HOSTILE[4:8], "": HOSTILE[8:], "a_b $x$": HOSTILE[:2]}
    ax = plot.projection(emb, groups)
    assert _saved_literally(ax, lambda: ax.texts) == [w for g in groups.values() for w in g]
    assert _saved_literally(ax, lambda: ax.get_legend().get_texts()) == ["$\\frac{$", "_hidden", "a_b $x$"]
    ax = plot.similarity_matrix(emb, HOSTILE)
    assert _saved_literally(ax, ax.get_xticklabels) == HOSTILE
    assert _saved_literally(ax, ax.get_yticklabels) == HOSTILE
