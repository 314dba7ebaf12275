"""Resource bounds of the readers: how much one line, header or word of an input may make them buffer.

A reader that waits for a terminator (a newline, a NUL, a space) must stop
waiting somewhere, or one missing byte makes it buffer the whole input --
and a compressed or endless input (``/dev/zero``, a pipe) has no end. Each
bound is checked before the bytes are kept, and exceeding it is a
:class:`finalfusion.FormatError` naming the bound. The values are far above
what any real file needs (docs/reliability.md, "Resource bounds").

Examples
--------
>>> from finalfusion import limits
>>> limits.MAX_WORD_BYTES
1048576
"""

from __future__ import annotations

from typing import Final

__all__ = ["MAX_HEADER_LINE_BYTES", "MAX_LINE_BYTES", "MAX_WORD_BYTES"]

#: Longest header line of the text-based formats (word2vec's and text-dims' ``"<rows> <dims>"``, floret's 8 fields), newline included.
MAX_HEADER_LINE_BYTES: Final = 1 << 12
#: Longest word, in UTF-8 bytes, the word2vec and fastText readers wait for before its terminator (space, NUL); independent of the dimensions.
MAX_WORD_BYTES: Final = 1 << 20
#: Longest line of the text formats (a word and its values), newline included.
MAX_LINE_BYTES: Final = 1 << 26
