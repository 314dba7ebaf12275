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

from typing import Final

import numpy as np
import numpy.typing as npt

from finalfusion.subword._cache import ByteCache

__all__ = [
    "fnv1a32_fasttext",
    "fnv1a32_fasttext_matrix",
    "fnv1a64_finalfusion",
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


#: Layouts by word length, bounded in bytes (``finalfusion.limits.MAX_CACHE_BYTES``), not entries.
_COLUMNS: ByteCache[tuple[tuple[int, ...], npt.NDArray[np.intp]]] = ByteCache()
_LAYOUTS: ByteCache[tuple[npt.NDArray[np.intp], npt.NDArray[np.uint64], npt.NDArray[np.uint64]]] = ByteCache()


def ngram_columns(length: int, min_n: int, max_n: int) -> tuple[tuple[int, ...], npt.NDArray[np.intp]]:
    """Layout of the n-grams of a string of ``length`` code points (cached, bounded in bytes).

    Returns
    -------
    lengths, order
        The n-gram lengths that occur (longest first), and the permutation
        that takes the concatenation of per-length blocks (block ``n`` has a
        column per start position) to finalfusion order (start ascending,
        longest first).
    """
    key = (length, min_n, max_n)
    hit = _COLUMNS.get(key)
    if hit is not None:
        return hit
    lengths = tuple(n for n in range(min(max_n, length), min_n - 1, -1))
    base = np.zeros(max(max_n, length) + 1, dtype=np.intp)
    offset = 0
    for n in lengths:
        base[n] = offset
        offset += length - n + 1
    start, lens = ngram_spans(length, min_n, max_n)
    order = base[lens] + start
    _COLUMNS.put(key, (lengths, order), order.nbytes)
    return lengths, order


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
    base: dict[int, int] = {}
    offset = 0
    for n in lengths:
        base[n] = offset
        offset += length - n + 1
    # fastText's hash has no length prefix, so the n-grams starting at one
    # position are prefixes of each other: one chain of max_n steps yields
    # every length (work ~ positions x max_n, not positions x max_n**2 / 2).
    chain = np.full((length, g), _FNV32_OFFSET, dtype=np.uint32)
    for n in range(1, (lengths[0] if lengths else 0) + 1):
        width = length - n + 1
        cols = slice(n - 1, n - 1 + width)
        state = chain[:width]
        if ascii_only:
            state ^= c32[cols]
            state *= prime
        else:
            state ^= planes[0][cols]
            state *= prime
            nb = nbytes[cols]
            for b in (1, 2, 3):
                live = nb > b
                if live.any():
                    state[...] = np.where(live, (state ^ planes[b][cols]) * prime, state)
        if n in base:
            states[base[n] : base[n] + width] = state
    out: npt.NDArray[np.uint32] = states[order].T
    return out


# -- hashing of one word, all n-grams at once ---------------------------------------------


def ngram_spans(length: int, min_n: int, max_n: int) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.intp]]:
    """Start and length of every n-gram of a string of ``length`` code points, in finalfusion order, without a Python loop.

    Examples
    --------
    >>> [a.tolist() for a in ngram_spans(4, 2, 3)]  # "<ab>": <a, <ab, ab, ab>, b>
    [[0, 0, 1, 1, 2], [3, 2, 3, 2, 2]]
    """
    positions = np.arange(max(length - min_n + 1, 0), dtype=np.intp)
    top = np.minimum(max_n, length - positions)
    per = top - min_n + 1
    start = np.repeat(positions, per)
    first = np.cumsum(per) - per
    lens = np.repeat(top + first, per) - np.arange(len(start), dtype=np.intp)
    return start, lens


def _word_layout(length: int, min_n: int, max_n: int, wide: bool) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.uint64], npt.NDArray[np.uint64]]:
    """Gather indices, per-step multipliers and initial states for one word's n-grams (cached, bounded in bytes).

    Column ``k`` of the result describes step ``k`` of every n-gram (in
    finalfusion order): n-grams shorter than ``k + 1`` read a padding zero and
    multiply by 1, so every n-gram runs the same number of steps.
    """
    key = (length, min_n, max_n, wide)
    hit = _LAYOUTS.get(key)
    if hit is not None:
        return hit
    start, lens = ngram_spans(length, min_n, max_n)
    steps = np.arange(max_n)
    live = steps[None, :] < lens[:, None]
    gather = np.where(live, start[:, None] + steps[None, :], length)
    prime = _FNV32_PRIME if wide else _FNV64_PRIME4
    mult = np.where(live, np.uint64(prime), np.uint64(1)).astype(np.uint64)
    init = np.full(len(lens), _FNV32_OFFSET, dtype=np.uint64) if wide else np.array(_LEN_STATE, dtype=np.uint64)[lens]
    layout = (np.ascontiguousarray(gather.T), np.ascontiguousarray(mult.T), init)
    _LAYOUTS.put(key, layout, sum(a.nbytes for a in layout))
    return layout


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
    # Code points (plus the padding zero at index ``length``) as bytes: a XOR of
    # the uint64 state with a uint8 widens it exactly; few numpy calls matter most here.
    chars = np.frombuffer(raw + b"\0", dtype=np.uint8)[gather]
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


# -- one word's n-grams hashed in lanes of one Python int --------------------------------

#: Longest bracketed word (code points) whose n-grams :func:`lane_hashes` hashes in the lanes of a Python int:
#: one int operation then costs about as much as a numpy call on a few dozen values, without numpy's fixed cost
#: per call (measured: docs/performance-unknown.md). Longer words are hashed in numpy (:func:`word_hashes`).
LANE_WORD: Final = 36
#: Steps (code points of the longest n-gram) a lane can take: the characters int holds one byte per step in each 64-bit lane.
_LANE_STEPS: Final = 8
#: Largest number of hash bits a 64-bit lane can multiply without overflowing into the next lane.
_LANE_BITS: Final = 32

#: Lane layouts by word length and hash settings, bounded in bytes (``finalfusion.limits.MAX_CACHE_BYTES``).
_LANE_LAYOUTS: ByteCache[tuple[npt.NDArray[np.intp], int, int, int, int, int, int, int]] = ByteCache()
#: dtypes made once (a dtype given as a type or string is converted on every call).
_BYTE: Final = np.dtype(np.uint8)
_ROW: Final = np.dtype("<i8")


def _lane_layout(length: int, min_n: int, max_n: int, bits: int, fasttext: bool) -> tuple[npt.NDArray[np.intp], int, int, int, int, int, int, int]:
    """Gather indices, initial lanes, prime, lane masks, step count and byte size for :func:`lane_hashes` (stored in ``_LANE_LAYOUTS``).

    Lane ``j`` is the ``j``-th n-gram in finalfusion order. N-grams are
    aligned on their *last* code point: an n-gram of ``n`` code points
    starts after ``steps - n`` steps that xor a zero byte and only
    multiply by the prime, so its lane starts at the state that those
    multiplications take to the hash's true initial state (the prime is
    odd, hence invertible modulo ``2**bits``). Every lane then takes the
    same steps with the same prime.
    """
    start, lens = ngram_spans(length, min_n, max_n)
    steps = int(lens.max())
    pad = steps - lens
    at = np.arange(_LANE_STEPS)
    live = (at >= pad[:, None]) & (at < steps)
    gather = np.where(live, start[:, None] + at - pad[:, None], length).reshape(-1)  # index ``length``: the padding zero
    modulus = 1 << bits
    mask = modulus - 1
    prime = (_FNV32_PRIME if fasttext else _FNV64_PRIME4) & mask
    back = pow(prime, -1, modulus)
    lanes = 0
    for j, (n, before) in enumerate(zip(lens.tolist(), pad.tolist(), strict=True)):
        first = _FNV32_OFFSET if fasttext else _LEN_STATE[n]
        lanes |= (first * pow(back, before, modulus) & mask) << (64 * j)
    nbytes = 8 * len(lens)
    ones = int.from_bytes(b"\1\0\0\0\0\0\0\0" * len(lens), "little")
    layout = (gather, lanes, prime, mask * ones, 0xFF * ones, ones, steps, nbytes)
    _LANE_LAYOUTS.put((length, min_n, max_n, bits, fasttext), layout, gather.nbytes + 5 * nbytes)
    return layout


def lane_hashes(bracketed: str, min_n: int, max_n: int, bits: int, fasttext: bool, offset: int = 0) -> npt.NDArray[np.int64] | None:
    """The low ``bits`` bits of the hash of every n-gram of a short bracketed word, plus ``offset``, in finalfusion order.

    The n-grams are hashed side by side in the 64-bit lanes of one Python
    int: an FNV step is ``h = ((h ^ c) * prime) & mask`` on all lanes at
    once. Only the low ``bits`` bits of FNV's state are kept: they depend
    on nothing but the low bits of the previous state, the byte and the
    prime (xor, and products modulo ``2**bits``), so a lane never needs
    more than ``2 * bits <= 64`` bits. ``fasttext`` selects
    :func:`fnv1a32_fasttext` (``bits`` must then be 32), else
    :func:`fnv1a64_finalfusion` (one step per code point: its bytes
    ``(c, 0, 0, 0)`` fold into the fourth power of the prime).

    Quirks, reproduced as the scalar functions do (docs/format.md §8.1,
    §8.2): finalfusion's hash starts from the state after the n-gram's
    code-point count as a ``u64`` and hashes code points, not UTF-8;
    fastText's sign-extends bytes above 127, which never occur here (ASCII only).

    Returns ``None`` when the word is outside the lanes' reach -- longer
    than :data:`LANE_WORD`, n-grams longer than 8, ``bits`` outside
    ``1..32``, a code point above 255 (above 127 for fastText), ``offset``
    from ``2**62`` -- and callers hash it otherwise. The array is read-only.

    Examples
    --------
    >>> lane_hashes("<ab>", 3, 6, 21, False).tolist() == [fnv1a64_finalfusion(g) & (2**21 - 1) for g in ("<ab>", "<ab", "ab>")]
    True
    >>> lane_hashes("<ab>", 3, 6, 32, True, offset=5).tolist() == [fnv1a32_fasttext(g) + 5 for g in (b"<ab>", b"<ab", b"ab>")]
    True
    >>> lane_hashes("<語>", 3, 6, 21, False) is None  # a code point above 255
    True
    """
    length = len(bracketed)
    if not min_n <= length <= LANE_WORD or max_n > _LANE_STEPS or not 1 <= bits <= _LANE_BITS or not 0 <= offset < 1 << 62:
        return None
    try:
        raw = (bracketed + "\0").encode("ascii" if fasttext else "latin-1")
    except UnicodeEncodeError:
        return None
    layout = _LANE_LAYOUTS.get((length, min_n, max_n, bits, fasttext)) or _lane_layout(length, min_n, max_n, bits, fasttext)
    gather, h, prime, mask, low, ones, steps, nbytes = layout
    # Byte k of lane j: the code point that n-gram j xors in at step k (zero before it starts).
    chars = int.from_bytes(np.frombuffer(raw, dtype=_BYTE)[gather], "little")  # an ndarray is a buffer: no tobytes()
    h = ((h ^ (chars & low)) * prime) & mask
    for _ in range(1, steps):
        chars >>= 8
        h = ((h ^ (chars & low)) * prime) & mask
    if offset:
        h += offset * ones
    return np.frombuffer(h.to_bytes(nbytes, "little"), dtype=_ROW)


def finalfusion_buckets(bracketed: str, min_n: int, max_n: int, bucket_exp: int, offset: int = 0) -> npt.NDArray[np.int64] | None:
    """finalfusion's bucket of every n-gram of a bracketed word plus ``offset``, in finalfusion order (``None`` as :func:`word_hashes`).

    Words of at most :data:`LANE_WORD` code points are hashed in the lanes
    of a Python int (:func:`lane_hashes`), longer ones (and bucket
    exponents above 32) as numpy arrays. Both give the same buckets.

    Examples
    --------
    >>> finalfusion_buckets("<ab>", 3, 6, 21).tolist() == [fnv1a64_finalfusion(g) & (2**21 - 1) for g in ("<ab>", "<ab", "ab>")]
    True
    >>> long = finalfusion_buckets("<" + "abcdefgh" * 8 + ">", 3, 6, 21, offset=7)
    >>> long.tolist()[0] == (fnv1a64_finalfusion("<abcde") & (2**21 - 1)) + 7
    True
    """
    lanes = lane_hashes(bracketed, min_n, max_n, bucket_exp, False, offset)
    if lanes is not None:
        return lanes
    hashes = word_hashes(bracketed, min_n, max_n, fasttext=False)
    if hashes is None:
        return None
    hashes &= np.uint64((1 << bucket_exp) - 1)  # a fresh array: mask in place, reinterpret (bucket_exp < 64)
    out = hashes.view(np.int64)
    if offset:
        out += offset
    return out


# -- MurmurHash3 of many byte strings at once (floret's long words) ----------------------


def _rotl64_array(x: npt.NDArray[np.uint64], r: int) -> npt.NDArray[np.uint64]:
    out: npt.NDArray[np.uint64] = (x << np.uint64(r)) | (x >> np.uint64(64 - r))
    return out


def _fmix64_array(k: npt.NDArray[np.uint64]) -> npt.NDArray[np.uint64]:
    k = k ^ (k >> np.uint64(33))
    k = k * np.uint64(0xFF51AFD7ED558CCD)
    k ^= k >> np.uint64(33)
    k *= np.uint64(0xC4CEB9FE1A85EC53)
    k ^= k >> np.uint64(33)
    return k


def murmur3_x64_128_matrix(data: npt.NDArray[np.uint8], length: int, seed: int) -> tuple[npt.NDArray[np.uint64], npt.NDArray[np.uint64]]:
    """:func:`murmur3_x64_128` of ``G`` byte strings of equal ``length`` at once.

    ``data`` is a ``(G, 16 * (length // 16 + 1))`` ``uint8`` matrix: each
    row holds a string followed by zeros (zero tail bytes leave the hash
    unchanged, so every row runs the same steps).

    Examples
    --------
    >>> rows = np.zeros((2, 16), dtype=np.uint8)
    >>> rows[0, :3] = list(b"<ab")
    >>> rows[1, :3] = list(b"ab>")
    >>> h1, h2 = murmur3_x64_128_matrix(rows, 3, 7)
    >>> [(int(a), int(b)) for a, b in zip(h1, h2)] == [murmur3_x64_128(b"<ab", 7), murmur3_x64_128(b"ab>", 7)]
    True
    """
    words = np.ascontiguousarray(data).view("<u8").astype(np.uint64, copy=False)
    g = words.shape[0]
    c1, c2 = np.uint64(_C1), np.uint64(_C2)
    h1 = np.full(g, seed & _M32, dtype=np.uint64)
    h2 = h1.copy()
    nblocks = length // 16
    for i in range(nblocks):
        k1 = _rotl64_array(words[:, 2 * i] * c1, 31) * c2
        h1 ^= k1
        h1 = (_rotl64_array(h1, 27) + h2) * np.uint64(5) + np.uint64(0x52DCE729)
        k2 = _rotl64_array(words[:, 2 * i + 1] * c2, 33) * c1
        h2 ^= k2
        h2 = (_rotl64_array(h2, 31) + h1) * np.uint64(5) + np.uint64(0x38495AB5)
    # The zero-padded tail: a zero k1/k2 mixes in as zero, as the reference's skipped steps.
    h2 ^= _rotl64_array(words[:, 2 * nblocks + 1] * c2, 33) * c1
    h1 ^= _rotl64_array(words[:, 2 * nblocks] * c1, 31) * c2
    h1 ^= np.uint64(length)
    h2 ^= np.uint64(length)
    h1 += h2
    h2 += h1
    h1 = _fmix64_array(h1)
    h2 = _fmix64_array(h2)
    h1 += h2
    h2 += h1
    return h1, h2


def murmur3_ngram_words(part: str, starts: npt.NDArray[np.intp], lens: npt.NDArray[np.intp], seed: int) -> npt.NDArray[np.uint64]:
    """The four 32-bit words of :func:`murmur3_x64_128` of the UTF-8 of ``part[s : s + n]`` for every n-gram, as a ``(N, 4)`` array.

    Examples
    --------
    >>> words = murmur3_ngram_words("<aé>", np.array([0, 1]), np.array([3, 3]), 0)
    >>> h1, h2 = murmur3_x64_128("<aé".encode(), 0)
    >>> words[0].tolist() == [h1 & 0xFFFFFFFF, h1 >> 32, h2 & 0xFFFFFFFF, h2 >> 32]
    True
    """
    raw = part.encode("utf-8", "surrogatepass")
    cps = np.frombuffer(part.encode("utf-32-le", "surrogatepass"), dtype="<u4")
    widths = 1 + (cps >= 0x80).astype(np.intp) + (cps >= 0x800) + (cps >= 0x10000)
    offsets = np.zeros(len(cps) + 1, dtype=np.intp)
    np.cumsum(widths, out=offsets[1:])
    first = offsets[starts]
    nbytes = offsets[starts + lens] - first
    buf = np.frombuffer(raw, dtype=np.uint8)
    out = np.empty((len(starts), 4), dtype=np.uint64)
    low = np.uint64(_M32)
    for length in np.unique(nbytes).tolist():
        sel = np.flatnonzero(nbytes == length)
        rows = np.zeros((len(sel), 16 * (length // 16 + 1)), dtype=np.uint8)
        rows[:, :length] = buf[first[sel, None] + np.arange(length)]
        h1, h2 = murmur3_x64_128_matrix(rows, length, seed)
        out[sel, 0] = h1 & low
        out[sel, 1] = h1 >> np.uint64(32)
        out[sel, 2] = h2 & low
        out[sel, 3] = h2 >> np.uint64(32)
    return out
