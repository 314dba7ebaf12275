"""Word checks: what the lookups accept as a word or a sequence of words.

Every lookup of :class:`~finalfusion.Embeddings` (and its gensim spellings)
checks its input here, beside the vocabulary, with the messages of
finalfusion-python 0.7.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

import numpy as np

__all__ = ["check_word", "check_word_items", "check_words"]


def check_word(word: object) -> None:
    """Raise ``TypeError`` naming the type unless ``word`` is a ``str`` (as finalfusion-python 0.7 did).

    Examples
    --------
    >>> check_word("Berlin")
    >>> check_word(b"Berlin")
    Traceback (most recent call last):
    ...
    TypeError: a word must be a str, not bytes: b'Berlin'
    """
    if not isinstance(word, str):
        raise TypeError(f"a word must be a str, not {type(word).__name__}: {word!r}")


def check_words(words: object) -> None:
    """Raise ``TypeError`` if ``words`` is a single ``str``/``bytes`` instead of a sequence of words.

    Examples
    --------
    >>> check_words(["a", "b"])
    >>> check_words("ab")
    Traceback (most recent call last):
    ...
    TypeError: words must be a sequence of str, not a single str: 'ab' (wrap it in a list)
    """
    if isinstance(words, (str, bytes)):
        raise TypeError(f"words must be a sequence of str, not a single {type(words).__name__}: {words!r} (wrap it in a list)")


def check_word_items(words: object) -> None:
    """Raise ``TypeError`` naming the first item of a sequence of words that is not a ``str`` (``None``, ``int``, ``bytes``...).

    One pass over the item types at C speed; the offender is looked up only on failure.

    Examples
    --------
    >>> check_word_items(["a", "b"])
    >>> check_word_items(["a", None])
    Traceback (most recent call last):
    ...
    TypeError: words[1] must be a str, not NoneType: None
    """
    check_words(words)
    if isinstance(words, np.ndarray) and words.dtype.kind == "U":
        return
    items = cast("Sequence[object]", words)
    types = set(map(type, items))
    if types <= {str} or all(issubclass(t, str) for t in types):
        return
    for i, w in enumerate(items):
        if not isinstance(w, str):
            raise TypeError(f"words[{i}] must be a str, not {type(w).__name__}: {w!r}")
