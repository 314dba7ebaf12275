"""The three n-gram hash functions of finalfusion, scalar and vectorised.

Each reproduces a quirk of a reference implementation on purpose:

* :func:`fnv1a64_finalfusion` -- FNV-1a 64 over the *character count* as a
  ``u64`` followed by UTF-32LE code points (docs/format.md §8.1);
* :func:`fnv1a32_fasttext` -- FNV-1a 32 over UTF-8 bytes that are
  sign-extended like C's ``signed char`` (docs/format.md §8.2);
* :func:`murmur3_x64_128` -- floret's MurmurHash3 (docs/format.md §8.4).

The ``*_matrix`` forms hash every n-gram of many equal-length words at
once with whole-column numpy ``uint64``/``uint32`` arithmetic, which wraps
like the reference's.
"""

from __future__ import annotations

import functools
from typing import Final

import numpy as np
import numpy.typing as npt

__all__ = [
    "fnv1a32_fasttext",
    "fnv1a64_finalfusion",
    "fnv1a32_fasttext_matrix",
    "fnv1a64_finalfusion_matrix",
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

    Quirk (docs/format.md §8.1): the hashed bytes are the number of code points
    as a little-endian ``u64``, then every code point as a little-endian
    ``u32`` -- not UTF-8 -- with no terminator.

    Examples
    --------
    >>> hex(fnv1a64_finalfusion("<ab"))
    '0x932dd5e499e84c39'
    """
    n = len(ngram)
    state = _LEN_STATE[n] if n < len(_LEN_STATE) else _len_state(n)
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

    Quirk (docs/format.md §8.2): each byte is sign-extended as a C ``signed
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
    lanes, as floret and finalfusion-rust use it (docs/format.md §8.4).

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


# -- hashing of equal-length words, one (G, L) code point matrix at a time ----------------


@functools.lru_cache(maxsize=1024)
def ngram_columns(length: int, min_n: int, max_n: int) -> tuple[tuple[int, ...], npt.NDArray[np.intp]]:
    """Layout of the n-grams of a string of ``length`` code points.

    Returns
    -------
    lengths, order
        The n-gram lengths that occur (longest first), and the permutation
        that takes the concatenation of per-length blocks (block ``n`` has a
        column per start position) to finalfusion order (start ascending,
        longest first).
    """
    lengths = tuple(n for n in range(min(max_n, length), min_n - 1, -1))
    base: dict[int, int] = {}
    offset = 0
    for n in lengths:
        base[n] = offset
        offset += length - n + 1
    order = [base[n] + p for p in range(length - min_n + 1) for n in range(min(max_n, length - p), min_n - 1, -1)]
    return lengths, np.asarray(order, dtype=np.intp)


def _len_state(n: int) -> int:
    """FNV-64 state after hashing ``u64_le(n)`` (the first eight bytes of every n-gram's hash)."""
    return _LEN_STATE[n] if n < len(_LEN_STATE) else _fnv64_bytes(_FNV64_OFFSET, n.to_bytes(8, "little"))


def fnv1a64_finalfusion_matrix(cps: npt.NDArray[np.uint32], min_n: int, max_n: int) -> npt.NDArray[np.uint64]:
    """:func:`fnv1a64_finalfusion` of every n-gram of every row of ``cps``.

    ``cps`` holds ``G`` strings of equal length ``L`` as code points; the
    result has one row per string and its n-grams in finalfusion order (a
    transposed, column-major view). All arithmetic is on whole rows of
    ``G`` values -- one per string, for one n-gram position -- so there is
    no per-n-gram work in Python and every ufunc loop is long.

    Examples
    --------
    >>> from finalfusion.subword.ngrams import ngrams
    >>> cps = np.array([[ord(c) for c in "<ab>"], [ord(c) for c in "<cd>"]], dtype=np.uint32)
    >>> hashes = fnv1a64_finalfusion_matrix(cps, 3, 4)
    >>> hashes.shape, hashes[0].tolist() == [fnv1a64_finalfusion(g) for g in ngrams("ab", 3, 4)]
    ((2, 3), True)
    """
    g, length = cps.shape
    lengths, order = ngram_columns(length, min_n, max_n)
    c64 = np.ascontiguousarray(cps.T, dtype=np.uint64)  # (L, G): position-major
    narrow = not c64.size or int(c64.max()) < 256
    p, p4 = np.uint64(_FNV64_PRIME), np.uint64(_FNV64_PRIME4)
    if not narrow:
        b0, b1, b2 = c64 & np.uint64(0xFF), (c64 >> np.uint64(8)) & np.uint64(0xFF), c64 >> np.uint64(16)
    states = np.empty((len(order), g), dtype=np.uint64)
    offset = 0
    for n in lengths:
        width = length - n + 1
        state = states[offset : offset + width]
        offset += width
        state.fill(_len_state(n))
        for k in range(n):
            if narrow:
                state ^= c64[k : k + width]
                state *= p4
            else:
                for plane in (b0, b1, b2):
                    state ^= plane[k : k + width]
                    state *= p
                state *= p
    out: npt.NDArray[np.uint64] = states[order].T
    return out


def _utf8_planes(cps: npt.NDArray[np.uint32]) -> tuple[list[npt.NDArray[np.uint32]], npt.NDArray[np.uint8]]:
    """UTF-8 bytes of each code point as four sign-extended ``uint32`` planes and a byte count."""
    c = cps.astype(np.uint32)
    nbytes = (1 + (c >= 0x80).astype(np.uint8) + (c >= 0x800) + (c >= 0x10000)).astype(np.uint8)

    def cont(shift: int) -> npt.NDArray[np.uint32]:
        out: npt.NDArray[np.uint32] = np.uint32(0x80) | ((c >> np.uint32(shift)) & np.uint32(0x3F))
        return out

    lead = np.select(
        [nbytes == 1, nbytes == 2, nbytes == 3],
        [c, np.uint32(0xC0) | (c >> np.uint32(6)), np.uint32(0xE0) | (c >> np.uint32(12))],
        np.uint32(0xF0) | (c >> np.uint32(18)),
    ).astype(np.uint32)
    second = np.select([nbytes == 2, nbytes == 3], [cont(0), cont(6)], cont(12)).astype(np.uint32)
    third = np.where(nbytes == 3, cont(0), cont(6)).astype(np.uint32)
    fourth = cont(0).astype(np.uint32)
    planes = []
    for plane in (lead, second, third, fourth):
        planes.append(np.where(plane >= 0x80, plane | np.uint32(0xFFFFFF00), plane).astype(np.uint32))
    return planes, nbytes


def fnv1a32_fasttext_matrix(cps: npt.NDArray[np.uint32], min_n: int, max_n: int) -> npt.NDArray[np.uint32]:
    """:func:`fnv1a32_fasttext` of every n-gram of every row of ``cps`` (see the 64-bit variant).

    Examples
    --------
    >>> cps = np.array([[ord(c) for c in "<ab>"]], dtype=np.uint32)
    >>> fnv1a32_fasttext_matrix(cps, 3, 4).tolist()  # <ab>, <ab, ab>
    [[674621742, 1218209508, 1699241756]]
    >>> fnv1a32_fasttext(b"<ab>")
    674621742
    """
    g, length = cps.shape
    lengths, order = ngram_columns(length, min_n, max_n)
    prime = np.uint32(_FNV32_PRIME)
    c32 = np.ascontiguousarray(cps.T, dtype=np.uint32)  # (L, G): position-major
    ascii_only = not c32.size or int(c32.max()) < 0x80
    if not ascii_only:
        planes, nbytes = _utf8_planes(c32)
    states = np.empty((len(order), g), dtype=np.uint32)
    offset = 0
    for n in lengths:
        width = length - n + 1
        rows = slice(offset, offset + width)
        offset += width
        state = states[rows]
        state.fill(_FNV32_OFFSET)
        for k in range(n):
            cols = slice(k, k + width)
            if ascii_only:
                state ^= c32[cols]
                state *= prime
                continue
            state ^= planes[0][cols]
            state *= prime
            nb = nbytes[cols]
            for b in (1, 2, 3):
                live = nb > b
                if live.any():
                    state = np.where(live, (state ^ planes[b][cols]) * prime, state)
        if not ascii_only:
            states[rows] = state  # np.where made a new array
    out: npt.NDArray[np.uint32] = states[order].T
    return out


# -- hashing of one word, all n-grams at once ---------------------------------------------


@functools.lru_cache(maxsize=1024)
def _word_layout(length: int, min_n: int, max_n: int, wide: bool) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.uint64], npt.NDArray[np.uint64]]:
    """Gather indices, per-step multipliers and initial states for one word's n-grams.

    Column ``k`` of the result describes step ``k`` of every n-gram (in
    finalfusion order): n-grams shorter than ``k + 1`` read a padding zero and
    multiply by 1, so every n-gram runs the same number of steps.
    """
    pairs = [(p, n) for p in range(length - min_n + 1) for n in range(min(max_n, length - p), min_n - 1, -1)]
    start = np.array([p for p, _ in pairs], dtype=np.intp)
    lens = np.array([n for _, n in pairs], dtype=np.intp)
    steps = np.arange(max_n)
    live = steps[None, :] < lens[:, None]
    gather = np.where(live, start[:, None] + steps[None, :], length)
    prime = _FNV32_PRIME if wide else _FNV64_PRIME4
    mult = np.where(live, np.uint64(prime), np.uint64(1)).astype(np.uint64)
    init = np.array([_FNV32_OFFSET if wide else _LEN_STATE[n] for n in lens.tolist()], dtype=np.uint64)
    return np.ascontiguousarray(gather.T), np.ascontiguousarray(mult.T), init


def word_hashes(bracketed: str, min_n: int, max_n: int, fasttext: bool) -> npt.NDArray[np.uint64] | None:
    """Hashes of all n-grams of one bracketed word in a few numpy operations.

    Handles the common case only -- code points below 256 for
    :func:`fnv1a64_finalfusion` (one FNV step per code point) and ASCII for
    :func:`fnv1a32_fasttext` (one byte per code point) -- and returns
    ``None`` otherwise, so callers fall back to the scalar hash.
    """
    length = len(bracketed)
    if length < min_n or max_n > 64:
        return None
    try:
        raw = bracketed.encode("latin-1")
    except UnicodeEncodeError:
        return None
    if fasttext and not raw.isascii():
        return None
    gather, mult, init = _word_layout(length, min_n, max_n, fasttext)
    # Code points (plus the padding zero at index ``length``) widened once, so
    # every XOR below runs on equal dtypes; few numpy calls matter most here.
    chars = np.frombuffer(raw + b"\0", dtype=np.uint8).astype(np.uint64)[gather]
    state: npt.NDArray[np.uint64] = init ^ chars[0]
    state *= mult[0]
    if fasttext:
        mask = np.uint64(_M32)
        state &= mask
        for k in range(1, max_n):
            state ^= chars[k]
            state *= mult[k]
            state &= mask
    else:
        for k in range(1, max_n):
            state ^= chars[k]
            state *= mult[k]
    return state
