"""``SimpleVocab`` chunk (id 1): a word list without subwords (docs/format.md §5.1).

===========  =========  ==========================
body offset  type       field
===========  =========  ==========================
0            u64        n_words
8            stringxn   words, in index order
===========  =========  ==========================
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import InitVar, dataclass
from typing import ClassVar

from finalfusion._binary import ByteReader, ByteWriter
from finalfusion.chunks import ChunkIdentifier, register
from finalfusion.vocab.base import Vocab, read_words

__all__ = ["SimpleVocab"]


@register
@dataclass(frozen=True, eq=False, repr=False)
class SimpleVocab(Vocab):
    """A plain word list; unknown words have no index.

    Parameters
    ----------
    words
        Unique words, in index order.

    Raises
    ------
    ValueError
        For duplicate words.

    Examples
    --------
    >>> v = SimpleVocab(["Berlin", "Potsdam"])
    >>> v["Potsdam"], "Hamburg" in v, len(v)
    (1, False, 2)
    """

    #: A :class:`WordIndex` already built over ``words`` (readers pass theirs), else ignored.
    index: InitVar[Mapping[str, int] | None] = None
    chunk_id: ClassVar[ChunkIdentifier] = ChunkIdentifier.SimpleVocab

    def __post_init__(self, index: Mapping[str, int] | None) -> None:
        self._init_words(index)

    @classmethod
    def read_payload(cls, reader: ByteReader) -> SimpleVocab:
        n = reader.u64("number of words")
        words, index, nbytes = read_words(reader, n)
        return cls(words, index)._set_words_nbytes(nbytes)

    def write_payload(self, writer: ByteWriter) -> None:
        """Write the word count (``u64``), then ``u32`` length + UTF-8 of every word.

        Examples
        --------
        >>> import io
        >>> buf = io.BytesIO()
        >>> SimpleVocab(["é"]).write_payload(ByteWriter(buf))
        >>> buf.getvalue()
        b'\\x01\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x02\\x00\\x00\\x00\\xc3\\xa9'
        """
        writer.u64(len(self.words))
        self._write_words(writer)

    def payload_len(self, offset: int) -> int:
        """8 bytes of word count plus, per word, 4 bytes of length and its UTF-8 bytes (``offset`` does not matter).

        Examples
        --------
        >>> SimpleVocab(["a", "é"]).payload_len(0)  # 8 + (4 + 1) + (4 + 2)
        19
        """
        return 8 + self._words_len()
