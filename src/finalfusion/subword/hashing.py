"""The three n-gram hash functions of finalfusion, scalar and vectorised.

Each reproduces a quirk of a reference implementation on purpose:

* :func:`fnv1a64_finalfusion` -- FNV-1a 64 over the *character count* as a
  ``u64`` followed by UTF-32LE code points (FORMAT.md §8.1);
* :func:`fnv1a32_fasttext` -- FNV-1a 32 over UTF-8 bytes that are
  sign-extended like C's ``signed char`` (FORMAT.md §8.2);
* :func:`murmur3_x64_128` -- floret's MurmurHash3 (FORMAT.md §8.4).

The vectorised forms hash every n-gram of an :class:`NgramTable` at once
with numpy ``uint64``/``uint32`` arithmetic, which wraps like the
reference's.
"""

from __future__ import annotations

from typing import Final

import numpy as np
import numpy.typing as npt

from finalfusion.subword.ngrams import NgramTable

__all__ = [
    "fnv1a32_fasttext",
    "fnv1a64_finalfusion",
    "fnv1a32_fasttext_table",
    "fnv1a64_finalfusion_table",
    "murmur3_x64_128",
]

_M64: Final = (1 << 64) - 1
_M32: Final = (1 << 32) - 1
_FNV64_OFFSET: Final = 0xCBF29CE484222325
_FNV64_PRIME: Final = 0x100000001B3
_FNV64_PRIME4: Final = pow(_FNV64_PRIME, 4, 1 << 64)
_FNV32_OFFSET: Final = 2166136261
_FNV32_PRIME: Final = 16777619


def _fnv64_bytes(state: int, data: bytes) -> int:
    for b in data:
        state = ((state ^ b) * _FNV64_PRIME) & _M64
    return state


#: FNV-64 state after hashing ``u64_le(n)``, for n-gram lengths up to 64.
_LEN_STATE: Final = [_fnv64_bytes(_FNV64_OFFSET, n.to_bytes(8, "little")) for n in range(65)]


def fnv1a64_finalfusion(ngram: str) -> int:
    """finalfusion's 64-bit n-gram hash.

    Quirk (FORMAT.md §8.1): the hashed bytes are the number of code points
    as a little-endian ``u64``, then every code point as a little-endian
    ``u32`` -- not UTF-8 -- with no terminator.

    Examples
    --------
    >>> hex(fnv1a64_finalfusion("<ab"))
    '0x932dd5e499e84c39'
    """
    n = len(ngram)
    state = _LEN_STATE[n] if n < len(_LEN_STATE) else _fnv64_bytes(_FNV64_OFFSET, n.to_bytes(8, "little"))
    p, p4, m = _FNV64_PRIME, _FNV64_PRIME4, _M64
    for c in map(ord, ngram):
        if c < 256:
            # Bytes (c, 0, 0, 0): xor with zero is a no-op, so three steps fold into P^4.
            state = ((state ^ c) * p4) & m
        else:
            state = ((state ^ (c & 0xFF)) * p) & m
            state = ((state ^ ((c >> 8) & 0xFF)) * p) & m
            state = ((state ^ (c >> 16)) * p) & m
            state = (state * p) & m
    return state


def fnv1a32_fasttext(data: bytes) -> int:
    """fastText's 32-bit hash of a UTF-8 byte string.

    Quirk (FORMAT.md §8.2): each byte is sign-extended as a C ``signed
    char`` before the xor, so bytes >= 0x80 also flip the upper 24 bits.

    Examples
    --------
    >>> fnv1a32_fasttext(b"en>") % 2000000
    619228
    """
    state = _FNV32_OFFSET
    for b in data:
        state = ((state ^ (b | 0xFFFFFF00 if b & 0x80 else b)) * _FNV32_PRIME) & _M32
    return state


def _rotl64(x: int, r: int) -> int:
    return ((x << r) | (x >> (64 - r))) & _M64


def _fmix64(k: int) -> int:
    k ^= k >> 33
    k = (k * 0xFF51AFD7ED558CCD) & _M64
    k ^= k >> 33
    k = (k * 0xC4CEB9FE1A85EC53) & _M64
    k ^= k >> 33
    return k


_C1: Final = 0x87C37B91114253D5
_C2: Final = 0x4CF5AD432745937F


def murmur3_x64_128(data: bytes, seed: int) -> tuple[int, int]:
    """MurmurHash3 x64-128 of ``data`` as the pair ``(h1, h2)``.

    This is the standard algorithm with the 32-bit ``seed`` used for both
    lanes, as floret and finalfusion-rust use it (FORMAT.md §8.4).

    Examples
    --------
    >>> [hex(h) for h in murmur3_x64_128(b"", 0)]
    ['0x0', '0x0']
    """
    m = _M64
    h1 = h2 = seed & _M32
    length = len(data)
    nblocks = length // 16
    for i in range(nblocks):
        k1 = int.from_bytes(data[16 * i : 16 * i + 8], "little")
        k2 = int.from_bytes(data[16 * i + 8 : 16 * i + 16], "little")
        k1 = (_rotl64((k1 * _C1) & m, 31) * _C2) & m
        h1 ^= k1
        h1 = (((_rotl64(h1, 27) + h2) & m) * 5 + 0x52DCE729) & m
        k2 = (_rotl64((k2 * _C2) & m, 33) * _C1) & m
        h2 ^= k2
        h2 = (((_rotl64(h2, 31) + h1) & m) * 5 + 0x38495AB5) & m
    tail = data[16 * nblocks :]
    if len(tail) > 8:
        k2 = int.from_bytes(tail[8:], "little")
        h2 ^= (_rotl64((k2 * _C2) & m, 33) * _C1) & m
    if tail:
        k1 = int.from_bytes(tail[:8], "little")
        h1 ^= (_rotl64((k1 * _C1) & m, 31) * _C2) & m
    h1 ^= length
    h2 ^= length
    h1 = (h1 + h2) & m
    h2 = (h2 + h1) & m
    h1 = _fmix64(h1)
    h2 = _fmix64(h2)
    h1 = (h1 + h2) & m
    h2 = (h2 + h1) & m
    return h1, h2


def fnv1a64_finalfusion_table(table: NgramTable) -> npt.NDArray[np.uint64]:
    """:func:`fnv1a64_finalfusion` of every n-gram in ``table``, vectorised."""
    out = np.empty(len(table.start), dtype=np.uint64)
    cps = table.codepoints.astype(np.uint64)
    narrow = not len(cps) or int(cps.max()) < 256
    p, p4 = np.uint64(_FNV64_PRIME), np.uint64(_FNV64_PRIME4)
    mask8, sh8, sh16 = np.uint64(0xFF), np.uint64(8), np.uint64(16)
    for n in np.unique(table.length).tolist():
        sel = np.flatnonzero(table.length == n)
        q = table.start[sel]
        state = np.full(len(q), _LEN_STATE[n] if n < len(_LEN_STATE) else 0, dtype=np.uint64)
        if n >= len(_LEN_STATE):
            state[:] = _fnv64_bytes(_FNV64_OFFSET, n.to_bytes(8, "little"))
        for k in range(n):
            c = cps[q + k]
            if narrow:
                state = (state ^ c) * p4
            else:
                state = (state ^ (c & mask8)) * p
                state = (state ^ ((c >> sh8) & mask8)) * p
                state = (state ^ (c >> sh16)) * p
                state = state * p
        out[sel] = state
    return out


def fnv1a32_fasttext_table(table: NgramTable) -> npt.NDArray[np.uint32]:
    """:func:`fnv1a32_fasttext` of the UTF-8 form of every n-gram in ``table``, vectorised."""
    cps = table.codepoints
    # UTF-8 length of each code point, then byte offsets of each code point.
    ulen = 1 + (cps >= 0x80).astype(np.int64) + (cps >= 0x800) + (cps >= 0x10000)
    boff = np.zeros(len(cps) + 1, dtype=np.int64)
    np.cumsum(ulen, out=boff[1:])
    text = cps.tobytes().decode("utf-32-le", "surrogatepass").encode("utf-8", "surrogatepass")
    # Sign-extended bytes as uint32, padded so that masked reads stay in range.
    raw = np.frombuffer(text, dtype=np.int8)
    sbytes = np.zeros(len(raw) + 4 * int(table.length.max(initial=0)) + 4, dtype=np.uint32)
    sbytes[: len(raw)] = raw.astype(np.int32).astype(np.uint32)
    bstart = boff[table.start]
    blen = boff[table.start + table.length] - bstart
    state = np.full(len(bstart), _FNV32_OFFSET, dtype=np.uint32)
    prime = np.uint32(_FNV32_PRIME)
    if len(blen) and bool(np.all(blen == table.length)):
        # ASCII-only n-grams: every n-gram of length n has n bytes.
        for n in np.unique(table.length).tolist():
            sel = np.flatnonzero(table.length == n)
            s = state[sel]
            b0 = bstart[sel]
            for k in range(n):
                s = (s ^ sbytes[b0 + k]) * prime
            state[sel] = s
        return state
    for k in range(int(blen.max(initial=0))):
        live = k < blen
        state = np.where(live, (state ^ sbytes[bstart + k]) * prime, state)
    return state
