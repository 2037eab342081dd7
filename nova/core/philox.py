"""Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11),
vectorized with numpy. It is counter-based: the value at element ``i`` depends only on
(seed, offset, i), so random ops need no hidden state and can be recomputed.

It sits in ``core`` because its implementations must agree bit for bit: this one (the
interpreter's), the LLVM emitter's and the CUDA prelude's take the round constants and
the mantissa widths from here, and the StableHLO and linalg lowerings write ``rounds``
and ``mantissa`` in their own ops (``WordOps``)."""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Generic, Protocol, TypeVar

import numpy as np

W = TypeVar("W")

MULTIPLIERS = (0xD2511F53, 0xCD9E8D57)   # the two 32x32->64 products of a round
WEYL = (0x9E3779B9, 0xBB67AE85)          # the key increments between rounds
ROUNDS = 10

_M0, _M1 = (np.uint64(m) for m in MULTIPLIERS)
_W0, _W1 = WEYL
_MASK = np.uint64(0xFFFFFFFF)
_S32 = np.uint64(32)

# Random mantissa bits per result type, so that a draw is exact and strictly below 1.
MANTISSA_BITS = {"float16": 11, "bfloat16": 8, "float32": 24, "float64": 53}


def philox4x32(counter: tuple[np.ndarray, ...], key: tuple[int, int]) -> list[np.ndarray]:
    """Ten Philox rounds over 4 uint64 arrays each holding 32-bit words."""
    c0, c1, c2, c3 = (np.asarray(c, dtype=np.uint64) for c in counter)
    k0, k1 = key
    for _ in range(ROUNDS):
        p0, p1 = _M0 * c0, _M1 * c2
        hi0, lo0 = p0 >> _S32, p0 & _MASK
        hi1, lo1 = p1 >> _S32, p1 & _MASK
        c0, c1, c2, c3 = (hi1 ^ c1 ^ np.uint64(k0), lo1, hi0 ^ c3 ^ np.uint64(k1), lo0)
        k0, k1 = (k0 + _W0) & 0xFFFFFFFF, (k1 + _W1) & 0xFFFFFFFF
    return [c0, c1, c2, c3]


class WordOps(Protocol[W]):
    """Arithmetic on 32-bit words held in 64-bit lanes, as a code generator writes it
    (``rounds``' and ``mantissa``'s terms: each lowering to another IR supplies these)."""

    def const(self, value: int) -> W: ...
    def mul(self, a: W, b: W) -> W: ...         # the 64-bit product of two words
    def add(self, a: W, b: W) -> W: ...
    def xor(self, a: W, b: W) -> W: ...
    def bit_or(self, a: W, b: W) -> W: ...
    def shr(self, a: W, n: int) -> W: ...       # logical
    def shl(self, a: W, n: int) -> W: ...
    def low32(self, a: W) -> W: ...


class NamedWordOps(Generic[W]):
    """``WordOps`` for a code generator that writes each op by name: ``const(value)``
    makes a word constant, ``binary(name, a, b)`` an op, and ``names`` gives the op names
    for "mul", "add", "xor", "or", "shr" (logical), "shl" and "and"."""

    def __init__(self, const: Callable[[int], W], binary: Callable[[str, W, W], W],
                 names: Mapping[str, str]):
        self.const, self._binary, self._names = const, binary, names

    def _op(self, kind: str, a: W, b: W) -> W:
        return self._binary(self._names[kind], a, b)

    def mul(self, a: W, b: W) -> W:
        return self._op("mul", a, b)

    def add(self, a: W, b: W) -> W:
        return self._op("add", a, b)

    def xor(self, a: W, b: W) -> W:
        return self._op("xor", a, b)

    def bit_or(self, a: W, b: W) -> W:
        return self._op("or", a, b)

    def shr(self, a: W, n: int) -> W:
        return self._op("shr", a, self.const(n))

    def shl(self, a: W, n: int) -> W:
        return self._op("shl", a, self.const(n))

    def low32(self, a: W) -> W:
        return self._op("and", a, self.const(0xFFFFFFFF))


def rounds(counter: Sequence[W], key: Sequence[W], ops: WordOps[W]) -> list[W]:
    """``philox4x32``'s ten rounds written in ``ops``: the four words of the counter
    and the two of the key (each < 2**32) to the four output words."""
    c0, c1, c2, c3 = counter
    k0, k1 = key
    m0, m1 = ops.const(MULTIPLIERS[0]), ops.const(MULTIPLIERS[1])
    w0, w1 = ops.const(WEYL[0]), ops.const(WEYL[1])
    for _ in range(ROUNDS):
        p0, p1 = ops.mul(m0, c0), ops.mul(m1, c2)
        c0, c1, c2, c3 = (ops.xor(ops.xor(ops.shr(p1, 32), c1), k0), ops.low32(p1),
                          ops.xor(ops.xor(ops.shr(p0, 32), c3), k1), ops.low32(p0))
        k0, k1 = ops.low32(ops.add(k0, w0)), ops.low32(ops.add(k1, w1))
    return [c0, c1, c2, c3]


def mantissa(words: Sequence[W], dtype_name: str, ops: WordOps[W]) -> tuple[W, int]:
    """The random integer ``uniform`` scales by 2**-bits for ``dtype_name``, and bits."""
    bits = MANTISSA_BITS[dtype_name]
    if bits <= 32:
        return ops.shr(words[0], 32 - bits), bits
    return ops.bit_or(ops.shl(words[0], bits - 32), ops.shr(words[1], 64 - bits)), bits


def uniform(seed: int, offset: int, shape: tuple[int, ...], dtype_name: str,
            np_dtype: np.dtype) -> np.ndarray:
    """Uniform values in [0, 1): element i uses counter (i, offset) and key seed."""
    n = int(np.prod(shape, dtype=np.int64))
    i = np.arange(n, dtype=np.uint64)
    seed, offset = int(seed) & (2**64 - 1), int(offset) & (2**64 - 1)
    words = philox4x32((i & _MASK, i >> _S32, np.full(n, offset & 0xFFFFFFFF, np.uint64),
                        np.full(n, offset >> 32, np.uint64)),
                       (seed & 0xFFFFFFFF, seed >> 32))
    bits = MANTISSA_BITS[dtype_name]
    if bits <= 32:
        u = (words[0] >> np.uint64(32 - bits)).astype(np.float64) * 2.0**-bits
    else:
        hi = words[0] << np.uint64(bits - 32)
        u = (hi | (words[1] >> np.uint64(64 - bits))).astype(np.float64) * 2.0**-bits
    return u.reshape(shape).astype(np_dtype)
