"""The result type of single similarity queries."""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["SimilarityResult"]


@dataclass(order=True)
class SimilarityResult:
    """One neighbour: ``result.word`` and ``result.similarity``.

    As in finalfusion-python 0.7, results compare (and sort) by similarity
    only.

    Examples
    --------
    >>> r = SimilarityResult("Potsdam", 0.88)
    >>> r.word, r.similarity, SimilarityResult("a", 0.5) < r
    ('Potsdam', 0.88, True)
    """

    word: str = field(compare=False)
    similarity: float
