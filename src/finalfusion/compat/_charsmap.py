"""SentencePiece's precompiled character maps (``precompiled_charsmap``), built from a table of replacements.

A charsmap is what a SentencePiece ``NormalizerSpec`` and the ``Precompiled``
normaliser of a ``tokenizer.json`` replace text with: a little-endian
``u32`` size of the trie in bytes, a darts-clone double-array trie over the
UTF-8 keys, then the replacements, each ending in a NUL byte; a key's leaf
holds the byte offset of its replacement.

Byte table (darts-clone units, ``u32`` each, as ``tokenizers``'
``spm_precompiled`` and SentencePiece read them):

==========  ==========================================================
bits 0-7    the label: the byte that leads from the parent here
bit 8       the node ends a key: its child with label 0 is a leaf
bit 9       the offset is stored shifted by 8
bits 10-30  the offset: this node's children sit at ``pos ^ offset ^ label``
bit 31      (leaf units) the unit is a leaf; bits 0-30 are the value
==========  ==========================================================

Only what a finite table of single characters needs is built (the keys
here are whole characters, so no key is a prefix of another).
"""

from __future__ import annotations

import struct
from collections.abc import Mapping

__all__ = ["build_charsmap"]

_LEAF = 1 << 31
_HAS_LEAF = 1 << 8
#: Largest offset stored unshifted (21 bits); larger ones must be multiples of 256 below 2**29.
_MAX_OFFSET = 1 << 21


def _offset_bits(offset: int) -> int:
    """``offset`` encoded in a unit's bits 9-30, or -1 when darts-clone cannot encode it."""
    if offset < _MAX_OFFSET:
        return offset << 10
    if offset % 256 == 0 and offset < 1 << 29:
        return (offset >> 8) << 10 | 1 << 9
    return -1


#: Free slots tried for a node's first child before its children go past the end of the array (keeps the build linear).
_TRIES = 512


def _bases(labels: list[list[int]]) -> list[int]:
    """A base for every node with children (``labels[node]``, 0 for its leaf): each ``base ^ label`` a slot of its own, no base twice.

    Nodes with most children are placed first, each at the first free slots
    that fit (at most :data:`_TRIES` tried, else a fresh block of 256 at the
    end); nodes with one child then fill the holes. Where a node sits does not
    matter to its base (every offset below 2**21 is encodable), so any order works.
    """
    used = bytearray(1)  # slot 0 is the root's
    used[0] = 1
    taken: set[int] = set()
    base_of = [-1] * len(labels)
    order = sorted((n for n in range(len(labels)) if labels[n]), key=lambda n: -len(labels[n]))
    start = single = 1
    for node in order:
        first, mine = labels[node][0], labels[node]
        size = len(used)
        if len(mine) == 1:  # the nodes left have one child each: the first slot whose base is free (never earlier than the last)
            while single < size and (used[single] or single ^ first in taken):
                single += 1
            start = single
        while start < size and used[start]:
            start += 1
        candidate, tries, base = start, 0, -1
        while candidate < size and tries < _TRIES:
            if not used[candidate]:
                tries += 1
                b = candidate ^ first
                if b not in taken and all(b ^ label >= size or not used[b ^ label] for label in mine):
                    base = b
                    break
            candidate += 1
        if base < 0:
            base = (size + 255) // 256 * 256 + (first if len(mine) == 1 else 0)
            while base in taken:
                base += 256
        top = max(base ^ label for label in mine) + 1
        if top > len(used):
            used.extend(bytes(top - len(used)))
        for label in mine:
            used[base ^ label] = 1
        taken.add(base)
        base_of[node] = base
    return base_of


def build_charsmap(replacements: Mapping[str, str]) -> bytes:
    """The precompiled charsmap that replaces each key of ``replacements`` (one character) with its value.

    Raises
    ------
    ValueError
        If a key is not one character, or a replacement holds a NUL character.

    Examples
    --------
    >>> blob = build_charsmap({"A": "a", "\\u00e9": ""})
    >>> int.from_bytes(blob[:4], "little") % 4, blob.endswith(b"a\\x00\\x00")
    (0, True)
    """
    keys = sorted(replacements, key=lambda k: k.encode("utf-8"))
    normalized = bytearray()
    values: dict[bytes, int] = {}
    for key in keys:
        value = replacements[key]
        if len(key) != 1 or "\0" in value:
            raise ValueError(f"a charsmap replaces one character with text without NUL: {key!r} -> {value!r}")
        values[key.encode("utf-8")] = len(normalized)
        normalized += value.encode("utf-8") + b"\0"
    # the byte trie: node -> {label: child}; a node that ends a key has the value of that key
    children: list[dict[int, int]] = [{}]
    leaf: list[int] = [-1]
    for key_bytes, value_offset in values.items():
        node = 0
        for byte in key_bytes:
            nxt = children[node].get(byte)
            if nxt is None:
                nxt = len(children)
                children[node][byte] = nxt
                children.append({})
                leaf.append(-1)
            node = nxt
        leaf[node] = value_offset
    base_of = _bases([([0] if leaf[n] >= 0 else []) + sorted(children[n]) for n in range(len(children))])
    units = [0] * (max((b ^ 0xFF for b in base_of if b >= 0), default=0) + 1)
    stack = [(0, 0)]
    while stack:
        node, pos = stack.pop()
        base = base_of[node]
        if base < 0:
            continue
        units[pos] |= _offset_bits(pos ^ base) | (_HAS_LEAF if leaf[node] >= 0 else 0)
        if leaf[node] >= 0:
            units[base] = _LEAF | leaf[node]
        for label, child in children[node].items():
            units[base ^ label] = label
            stack.append((child, base ^ label))
    while len(units) > 1 and units[-1] == 0:
        units.pop()
    trie = struct.pack(f"<{len(units)}I", *units)
    return struct.pack("<I", len(trie)) + trie + bytes(normalized)
