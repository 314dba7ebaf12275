"""The result types of single similarity queries."""

from __future__ import annotations

from dataclasses import dataclass, field

from finalfusion import _display

__all__ = ["SimilarityResult", "SimilarityResults"]


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

    #: The neighbour (or analogy answer).
    word: str = field(compare=False)
    #: Its cosine similarity with the query; results order by it (the word is not compared).
    similarity: float


class SimilarityResults(list[SimilarityResult]):
    """The neighbours of one query, best first: a plain ``list`` of :class:`SimilarityResult`.

    It is a ``list`` subclass (equal to, and usable as, the list that
    finalfusion-python 0.7 returned) whose only addition is a ranked table in
    Jupyter (``_repr_html_``).

    Examples
    --------
    >>> r = SimilarityResults([SimilarityResult("Potsdam", 0.88)])
    >>> r == [SimilarityResult("Potsdam", 0.88)], isinstance(r, list), "<td" in r._repr_html_()
    (True, True, True)
    """

    def _repr_html_(self) -> str:
        return _display.results_html(self)
