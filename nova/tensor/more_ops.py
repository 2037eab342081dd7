"""More of PyTorch's names: membership (``5.0 in t``), bit shifts, ``gcd``/``lcm``,
``vander``, ``combinations``, ``mode``, ``Tensor.unfold`` and the reducing scatters
``scatter_reduce``/``index_reduce``.

Each is a composite of the primitive set (DESIGN.md), so fusion sees through it and its
gradient comes from its parts' rules; none adds a primitive:

- a shift is a multiplication (left) or a floor division (right) by a power of two,
  which wrap as a shift of two's complement bits does; a shift amount outside the bit
  width gives PyTorch's result (0, or the sign's fill for a right shift) by a ``where``;
- ``gcd`` is Euclid's algorithm unrolled: the number of remainder steps is the most any
  pair of the dtype needs (Lamé: consecutive Fibonacci numbers take the longest), and a
  step is a no-op once the remainder is 0;
- ``combinations`` computes its index lists on the host from the static sizes and
  gathers, so its gradient is gather's; ``unfold`` gathers with an index of iotas (its
  windows may overlap), a view whose writes reach the base by one overwriting scatter
  of the elements that changed (``_Windows``);
- ``mode`` sorts (stably) and measures the runs of equal values with a running maximum;
- ``scatter_reduce``'s ``prod``/``amax``/``amin`` sort the updates by target (stably, so
  each target's updates stay in index order), fold each target's run with a segmented
  doubling scan, and write each run's last, complete fold with the overwriting scatter,
  where the last update in index order wins; ``sum`` and ``mean`` are ``scatter_add``s.
  O(n log n) work and memory linear in the input, whatever the sizes.
"""
from __future__ import annotations

import builtins
import functools
import itertools
import numbers
import operator
from collections import namedtuple
from typing import Any

import numpy as np

from nova.core import dtypes as dt
from nova.core.errors import ArgumentError, DTypeError
from nova.core.shapes import normalize_dim
from nova.tensor import arrays, grad_mode, movement, numeric, ops, scan, sorting
from nova.tensor.creation import tensor
from nova.tensor.elementary import isfinite
from nova.tensor.tensor import Tensor, unaliased_detach


def _check_int(op: str, name: str, value: Any) -> builtins.int:
    if isinstance(value, builtins.bool) or not hasattr(value, "__index__"):
        raise TypeError(f"{op}: {name} must be an int, got {value!r}")
    return operator.index(value)


# ---------------------------------------------------------------- membership

def contains(t: Tensor, element: Any) -> builtins.bool:
    """``element in t``: whether any element of ``t`` equals ``element``, a number or a
    tensor broadcast against ``t`` (``torch.Tensor.__contains__``; realizes)."""
    if not isinstance(element, (Tensor, numbers.Number)):
        raise RuntimeError(f"Tensor.__contains__ only supports Tensor or scalar, but you "
                           f"passed in a {type(element)}.")
    hits = ops.eq(t, element)
    return hits.numel() > 0 and builtins.bool(ops.amax(hits).item())


# ---------------------------------------------------------------- bit shifts

def _integer_dtype(op: str, *args: Any) -> dt.DType:
    """The common dtype of ``args``; a ``DTypeError`` unless it is an integer dtype
    (PyTorch's shifts, ``gcd`` and ``lcm`` are not defined on floats or bools)."""
    common = ops.promote(op, *args)
    if common.category != dt.INT:
        got = ", ".join(a.dtype.name if isinstance(a, Tensor) else type(a).__name__
                        for a in args)
        raise DTypeError(f"{op}: expected integer operands (int32 or int64), got {got}; "
                         f"cast with .to(nova.int64)")
    return common


def _wrapped(value: builtins.int, dtype: dt.DType) -> builtins.int:
    """``value`` wrapped to ``dtype``'s two's complement range."""
    lo, hi = dt.int_bounds(dtype)
    return (value - lo) % (hi - lo + 1) + lo


def _times_power_of_two(y: Tensor, s: Tensor) -> Tensor:
    """``y * 2**s`` wrapped to the dtype, for ``0 <= s < bits``: one conditional
    multiplication per bit of ``s`` (by 2, 4, 16, 256, ...), so no factor exceeds the
    dtype."""
    for b in range((8 * y.dtype.itemsize).bit_length() - 1):
        bit = ops.ne(ops.bitwise_and(s, 1 << b), 0)
        y = ops.where(bit, ops.mul(y, 1 << (1 << b)), y)
    return y


def _sign_fill(x: Tensor) -> Tensor:
    """-1 where ``x`` is negative, else 0: ``x`` shifted right by its bit width or more."""
    return ops.neg(ops.cast(ops.lt(x, 0), x.dtype))


def _shift(op: str, a: Any, b: Any, left: builtins.bool) -> Tensor:
    if not isinstance(a, Tensor) and not isinstance(b, Tensor):
        raise TypeError(f"{op}: expected at least one Tensor, got {type(a).__name__} and "
                        f"{type(b).__name__}")
    common = _integer_dtype(op, a, b)
    bits = 8 * common.itemsize
    # a signed right shift by bits - 1 is the sign's fill too, so its power of two stays
    # in range; an unsigned one divides by 2**(bits - 1), which its dtype holds
    top = bits if left or not common.is_signed else bits - 1
    if not isinstance(b, Tensor):
        x, s = ops.cast(a, common), operator.index(b)
        dt.operand_scalar(s, common, op)    # (as ``x + 2**40`` does for int32: no wrapping)
        if left:
            return ops.mul(x, _wrapped(1 << s, common) if 0 <= s < bits else 0)
        return numeric.floor_divide(x, 1 << s) if 0 <= s < top else _sign_fill(x)
    x, s = ops.operands(op, a, b, dtype=common)
    inside = ops.logical_and(ops.ge(s, 0), ops.lt(s, top))
    s = ops.where(inside, s, 0)
    if left:
        return ops.where(inside, _times_power_of_two(x, s), 0)
    power = _times_power_of_two(ops.full_const(1, s.shape, common), s)
    return ops.where(inside, numeric.floor_divide(x, power), _sign_fill(x))


def bitwise_left_shift(input: Any, other: Any) -> Tensor:
    """``input << other`` (``torch.bitwise_left_shift``) on integers: ``input * 2**other``
    wrapped to the dtype, as shifting two's complement bits gives; 0 where ``other`` is
    negative or at least the bit width, as in PyTorch. Either operand may be a number."""
    return _shift("bitwise_left_shift", input, other, True)


def bitwise_right_shift(input: Any, other: Any) -> Tensor:
    """``input >> other`` (``torch.bitwise_right_shift``) on integers: the arithmetic
    shift, ``floor(input / 2**other)``; the sign's fill (-1 or 0) where ``other`` is
    negative or at least the bit width, as in PyTorch."""
    return _shift("bitwise_right_shift", input, other, False)


# ---------------------------------------------------------------- gcd and lcm

def _integer_pair(op: str, a: Any, b: Any) -> tuple[Tensor, Tensor]:
    for name, v in (("input", a), ("other", b)):
        if not isinstance(v, Tensor):
            raise TypeError(f"{op}: {name} must be a Tensor, got {type(v).__name__}")
    x, y = ops.operands(op, a, b, dtype=_integer_dtype(op, a, b))
    return x, y


@functools.cache
def _euclid_steps(dtype: dt.DType) -> builtins.int:
    """The most remainder steps ``_euclid`` needs for ``dtype`` (45 for int32, 91 for
    int64). Truncated remainders have the magnitudes of Euclid's algorithm on ``|a|`` and
    ``|b|``, at most ``2**(bits-1)``; by Lamé's theorem the longest run is on the
    largest consecutive Fibonacci numbers in that range, given with the larger first
    (the first step then only swaps them). Checked exhaustively for small widths."""
    lo, hi = dt.int_bounds(dtype)
    limit = builtins.max(-lo, hi)             # (uint8: 255, its magnitudes reach hi)
    small, large = 1, 2
    while small + large <= limit:
        small, large = large, small + large
    steps, a, b = 0, large, small
    while a:
        a, b, steps = b % a, a, steps + 1
    return steps


def _euclid(x: Tensor, y: Tensor) -> Tensor:
    """PyTorch's ``calc_gcd``: ``a, b = |x|, |y|``, then ``a, b = b % a, a`` (C's
    truncated remainder) while ``a != 0``, ``b`` the result -- unrolled to the most
    steps any pair needs; once ``a`` is 0 a step keeps ``b`` (and ``b % 1`` keeps ``a``
    at 0). ``abs`` wraps as in C++, so the dtype's most negative value stays negative."""
    a, b = ops.abs(x), ops.abs(y)
    for _ in range(_euclid_steps(x.dtype)):
        done = ops.eq(a, 0)
        a, b = numeric.fmod(b, ops.where(done, 1, a)), ops.where(done, b, a)
    return b


def gcd(input: Tensor, other: Tensor) -> Tensor:
    """The greatest common divisor of integer tensors, elementwise (``torch.gcd``):
    non-negative, ``gcd(0, 0) = 0``. As in PyTorch, ``abs`` of the dtype's most negative
    value wraps to itself, so ``gcd(-2**63, 0)`` is ``-2**63``."""
    return _euclid(*_integer_pair("gcd", input, other))


def lcm(input: Tensor, other: Tensor) -> Tensor:
    """The least common multiple of integer tensors, elementwise (``torch.lcm``):
    ``|input / gcd * other|``, 0 where the gcd is 0, wrapping on overflow as PyTorch's
    (``input / gcd`` wraps too where the gcd is -1, which only the dtype's most negative
    value reaches and PyTorch's integer division traps on)."""
    x, y = _integer_pair("lcm", input, other)
    g = _euclid(x, y)
    zero, minus_one = ops.eq(g, 0), ops.eq(g, -1)
    q = numeric.div(x, ops.where(ops.logical_or(zero, minus_one), 1, g), rounding_mode="trunc")
    q = ops.where(minus_one, ops.neg(x), q)
    return ops.where(zero, 0, ops.abs(ops.mul(q, y)))


# ---------------------------------------------------------------- vander, combinations

def vander(x: Tensor, N: builtins.int | None = None,
           increasing: builtins.bool = False) -> Tensor:
    """The Vandermonde matrix of a 1-D ``x`` (``torch.vander``): ``N`` columns (``len(x)``
    by default), the powers ``x**(N-1) ... x**0`` (``increasing``: ``x**0 ... x**(N-1)``).
    As in PyTorch, the powers are running products (so ``x**k`` rounds as ``k - 1``
    multiplications do) and integer and bool inputs give int64."""
    ops._check_tensor("vander", x)
    if x.ndim != 1:
        raise ArgumentError(f"vander: x must be a one-dimensional tensor, got shape {x.shape}")
    n = x.shape[0]
    cols = n if N is None else _check_int("vander", "N", N)
    if cols < 0:
        raise ArgumentError(f"vander: N must be non-negative, got {cols}")
    dtype = x.dtype if x.dtype.is_floating_point else dt.int64
    ones = ops.full_const(1, (n, builtins.min(cols, 1)), dtype)
    if cols <= 1:
        return ones
    repeated = movement.expand(movement.unsqueeze(ops.cast(x, dtype), 1), n, cols - 1)
    powers = scan.scan_last("cumprod", repeated, reverse=not increasing)
    return movement.cat([ones, powers] if increasing else [powers, ones], 1)


def combinations(input: Tensor, r: builtins.int = 2,
                 with_replacement: builtins.bool = False) -> Tensor:
    """Every length-``r`` combination of a 1-D tensor's elements, one per row, in the
    order of ``itertools.combinations`` (``with_replacement``:
    ``combinations_with_replacement``), as ``torch.combinations``; ``r = 0`` gives an
    empty 1-D tensor. The index rows are made on the host, then gathered."""
    ops._check_tensor("combinations", input)
    if input.ndim != 1:
        raise ArgumentError(f"combinations: expected a 1-D tensor, got shape {input.shape}")
    r = _check_int("combinations", "r", r)
    if r < 0:
        raise ArgumentError(f"combinations: r must be non-negative, got {r}")
    if r == 0:
        return ops.full_const(0, (0,), input.dtype)
    pick = itertools.combinations_with_replacement if with_replacement else \
        itertools.combinations
    rows = np.fromiter(itertools.chain.from_iterable(pick(range(input.shape[0]), r)),
                       dtype=np.int64)
    count = rows.size // r
    if count == 0:
        return ops.full_const(0, (0, r), input.dtype)
    picked = ops.gather(input, 0, tensor(rows, device=input.device))
    return movement.reshape(picked, (count, r))


# ---------------------------------------------------------------- mode

_Mode = namedtuple("mode", ["values", "indices"])


def mode(input: Tensor, dim: builtins.int = -1, keepdim: builtins.bool = False) -> Any:
    """``(values, indices)``: the most frequent value along ``dim`` and an index of it
    (``torch.mode``). Of equally frequent values the smallest wins, and the index is its
    last occurrence, as PyTorch gives; NaNs never equal each other, so each counts once.
    The gradient of ``values`` goes to that index."""
    ops._check_tensor("mode", input)
    if input.ndim == 0:
        normalize_dim("mode", dim, 0)
        return _Mode(input.clone(), ops.full_const(0, (), dt.int64))
    d = normalize_dim("mode", dim, input.ndim, input.shape)
    n = input.shape[d]
    if n == 0:
        raise IndexError(f"mode: expected dim {d} of shape {input.shape} to have a non-zero "
                         f"size")
    shape = input.shape[:d] + ((1,) if keepdim else ()) + input.shape[d + 1:]
    if input.numel() == 0:
        return _Mode(ops.full_const(0, shape, input.dtype), ops.full_const(0, shape, dt.int64))
    values, order = sorting.sort(input, d, stable=True)
    position = ops.prim("iota", [], {"dim": d}, input.shape, dt.int64)
    before = movement.cat([movement.narrow(values, d, 0, 1),
                           movement.narrow(values, d, 0, n - 1)], d)
    starts = ops.logical_or(ops.eq(position, 0), ops.ne(values, before))
    run_start = scan.cummax(ops.where(starts, position, 0), d).values
    # a run's length is largest at its last element, which a stable sort makes the one
    # with the largest index; argmax takes the first such run, of the smallest value
    best = ops.argmax(ops.sub(position, run_start), d, keepdim=True)
    out = _Mode(ops.gather(values, d, best), ops.gather(order, d, best))
    return out if keepdim else _Mode(*(movement.squeeze(t, d) for t in out))


# ---------------------------------------------------------------- unfold

def unfold(input: Tensor, dimension: builtins.int, size: builtins.int,
           step: builtins.int) -> Tensor:
    """Every window of ``size`` elements along ``dimension``, ``step`` apart, as a new
    last dim (``torch.Tensor.unfold``): dim ``dimension`` becomes the window count
    ``(n - size) // step + 1``. Always a view, as PyTorch's: non-overlapping windows
    (``step == size``) are a narrow and a reshape; others one gather (whose gradient
    adds overlapping windows back up), written back exactly (``_Windows``)."""
    ops._check_tensor("unfold", input)
    size = _check_int("unfold", "size", size)
    step = _check_int("unfold", "step", step)
    if input.ndim == 0:
        normalize_dim("unfold", dimension, 0)
        return movement.reshape(unfold(movement.reshape(input, (1,)), 0, size, step), (size,))
    d = normalize_dim("unfold", dimension, input.ndim, input.shape)
    n = input.shape[d]
    if size < 0:
        raise ArgumentError(f"unfold: size is {size} but must be >= 0")
    if step <= 0:
        raise ArgumentError(f"unfold: step is {step} but must be > 0")
    if size > n:
        raise ArgumentError(f"unfold: size {size} exceeds dim {d} of shape {input.shape} "
                            f"(at most {n})")
    count = (n - size) // step + 1
    windows = input.shape[:d] + (count, size) + input.shape[d + 1:]
    if count * size == 0 or input.numel() == 0:
        return ops.full_const(0, windows[:d + 1] + windows[d + 2:] + (size,), input.dtype)
    if step == size:
        flat = movement.narrow(input, d, 0, count * size)
        return arrays.movedim(movement.reshape(flat, windows), d + 1, -1)
    w = _Windows(input.shape, input.dtype, d, count, size, step)
    return movement.make_view(input, w.derive, w.write_back, "unfold")


class _Windows:
    """The windows of a gathering ``unfold`` of dim ``d`` (``count`` windows of
    ``size``, ``step`` apart): ``derive`` reads them from the base, ``write_back``
    writes a new value of the view into it.

    Windows may overlap, so one base element can show in several places of the view.
    The write-back is exact: a base element takes a view element's value only where
    that element differs from what the base shows there now (in its bits: a -0.0
    written over 0.0 counts, a NaN over a NaN does not), so a write through one alias
    (``w[0, 1] = 50``) reaches the base element, and through it every window that
    covers it; an element no window changed keeps its value, bit for bit. Where several
    windows changed one element (an in-place op over the whole view, ``w.copy_(src)``)
    the last window in order wins: one overwriting scatter, whose unchanged updates go
    to a spare slot past the end, cut off after (PyTorch applies such a write element
    by element, so a read-modify-write like ``w.add_(1)`` compounds there while here
    each element is written once)."""

    def __init__(self, shape: tuple, dtype: dt.DType, d: builtins.int, count: builtins.int,
                 size: builtins.int, step: builtins.int):
        self.d, self.count, self.size, self.step = d, count, size, step
        self.flat = shape[:d] + (count * size,) + shape[d + 1:]
        self.windows = shape[:d] + (count, size) + shape[d + 1:]
        ndim = len(shape) + 1
        self.perm = tuple(k for k in range(ndim) if k != d + 1) + (d + 1,)
        self.inverse = tuple(self.perm.index(k) for k in range(ndim))
        self.out = tuple(self.windows[k] for k in self.perm)

    def index(self) -> Tensor:
        """Where element ``j`` of window ``w`` reads from: ``w * step + j`` along ``d``,
        broadcast over the other dims. Iotas, not numpy data, so the step holds no host
        constant made per call and nv.compile can replay it."""
        shape = (self.count, self.size)
        rows = ops.prim("iota", [], {"dim": 0}, shape, dt.int64)
        cols = ops.prim("iota", [], {"dim": 1}, shape, dt.int64)
        at = ops.prim("reshape", [ops.add(ops.mul(rows, self.step), cols)], {},
                      (self.count * self.size,), dt.int64)
        line = [1] * len(self.flat)
        line[self.d] = self.count * self.size
        at = ops.prim("reshape", [at], {}, tuple(line), dt.int64)
        return ops.broadcast_to(at, self.flat, "unfold")

    def derive(self, base: Tensor) -> Tensor:
        flat = ops.gather(base, self.d, self.index())
        windows = ops.prim("reshape", [flat], {}, self.windows, base.dtype)
        return ops.prim("transpose", [windows], {"perm": self.perm}, self.out, base.dtype)

    def write_back(self, base: Tensor, value: Tensor) -> Tensor:
        d, n = self.d, base.shape[self.d]
        windows = ops.prim("transpose", [value], {"perm": self.inverse}, self.windows,
                           value.dtype)
        new = ops.prim("reshape", [windows], {}, self.flat, value.dtype)
        index = self.index()
        with grad_mode.no_grad():
            old = ops.gather(unaliased_detach(base), d, index)
            target = ops.where(_differs(unaliased_detach(new), old), index, n)
        spare = ops.full_const(0, base.shape[:d] + (1,) + base.shape[d + 1:], base.dtype)
        written = ops.scatter(movement.cat([base, spare], d), d, target, new)
        limit = base.shape[:d] + (n,) + base.shape[d + 1:]
        return ops.prim("slice", [written], {"start": (0,) * base.ndim, "limit": limit,
                                             "stride": (1,) * base.ndim}, base.shape,
                        base.dtype)


_BITS = {dt.float16: dt.int16, dt.bfloat16: dt.int16, dt.float32: dt.int32,
         dt.float64: dt.int64}


def _differs(new: Tensor, old: Tensor) -> Tensor:
    """Where ``new`` is another value than ``old``: different bits, except that a NaN
    replacing a NaN is none (its payload may not survive the ops on the way)."""
    bits = _BITS.get(new.dtype)
    if bits is None:
        return ops.ne(new, old)
    other = ops.ne(ops.prim("bitcast", [new], {}, new.shape, bits),
                   ops.prim("bitcast", [old], {}, old.shape, bits))
    return ops.logical_and(other, ops.logical_not(ops.logical_and(ops.isnan(new),
                                                                  ops.isnan(old))))


# ---------------------------------------------------------------- reducing scatters

_SCATTER_REDUCTIONS = ("sum", "prod", "mean", "amax", "amin")
_INDEX_REDUCTIONS = ("prod", "mean", "amax", "amin")


def _later_wins(earlier: Tensor, later: Tensor, reduce: str) -> Tensor:
    """Where a fold in order keeps ``later``: PyTorch's ``amax`` (``amin``) replaces the
    running value by a strictly larger (smaller) one or a NaN, so of equal values (0 and
    -0) the first stays, and once a NaN is met it does."""
    wins = ops.gt(later, earlier) if reduce == "amax" else ops.lt(later, earlier)
    return ops.logical_or(wins, ops.isnan(later)) if later.dtype.is_floating_point else wins


def _combined(earlier: Tensor, later: Tensor, reduce: str) -> Tensor:
    if reduce == "prod":
        return ops.mul(earlier, later)
    return ops.where(_later_wins(earlier, later, reduce), later, earlier)


class _SegmentedFold:
    """The combine of ``scan._doubling`` over (value, target) pairs sorted by target:
    values fold only with those of the same target (a contiguous run), so each run's
    last position ends up holding its run's whole fold, in index order."""

    def __init__(self, targets: Tensor, reduce: str):
        self.targets, self.reduce = targets, reduce

    def init(self, values: Tensor, d: builtins.int) -> tuple[Tensor, Tensor]:
        return values, self.targets

    def __call__(self, earlier: tuple, later: tuple) -> tuple[Tensor, Tensor]:
        (a, ta), (b, tb) = earlier, later
        return ops.where(ops.eq(ta, tb), _combined(a, b, self.reduce), b), tb


def _folded_by_target(x: Tensor, d: builtins.int, index: Tensor, src: Tensor,
                      reduce: str) -> Tensor:
    """``x`` with, at every position some update targets, the fold of its updates in
    index order (``prod``, ``amax`` or ``amin``; ``x``'s own value not included)."""
    order = sorting.argsort(index, d, stable=True)
    targets, values = ops.gather(index, d, order), ops.gather(src, d, order)
    folded, _ = scan._doubling("scatter_reduce", values, d, _SegmentedFold(targets, reduce),
                               lambda state: (0, -1))
    return ops.scatter(x, d, targets, folded)


def _with_tie_gradient(out: Tensor, x: Tensor, d: builtins.int, index: Tensor, src: Tensor,
                       hit: Tensor, include_self: builtins.bool) -> Tensor:
    """``out`` (an ``amax``/``amin`` computed without history) with PyTorch's gradient:
    at each position some update targets, shared evenly by the finite inputs equal to
    the result (the updates, and ``x``'s own value if included); ``x``'s elsewhere.
    The value stays ``out`` exactly: what carries the gradient is ``v - v`` of each tied
    input, a zero, subtracted (which keeps the sign of a zero result, as adding would not)."""
    xd, sd = unaliased_detach(x), unaliased_detach(src)
    tied_src = ops.logical_and(ops.eq(sd, ops.gather(out, d, index)), isfinite(sd))
    tied_self = ops.logical_and(ops.logical_and(hit, ops.eq(xd, out)), isfinite(xd)) \
        if include_self else ops.full_const(False, x.shape, dt.bool_)
    count = ops.scatter_add(ops.cast(tied_self, x.dtype), d, index, ops.cast(tied_src, x.dtype))
    zero = ops.scatter_add(ops.where(tied_self, ops.sub(xd, x), 0.0), d, index,
                           ops.where(tied_src, ops.sub(sd, src), 0.0))
    return ops.where(hit, ops.sub(out, ops.div(zero, ops.where(hit, count, 1.0))), x)


def _hits(x: Tensor, d: builtins.int, index: Tensor) -> Tensor:
    """How many updates target each position of ``x`` (int64)."""
    return ops.scatter_add(ops.full_const(0, x.shape, dt.int64), d, index,
                           ops.full_const(1, index.shape, dt.int64))


def _reduced(op: str, x: Tensor, d: builtins.int, index: Tensor, src: Tensor, reduce: str,
             include_self: builtins.bool) -> Tensor:
    """The reducing scatter of checked arguments (``x``, ``index`` and ``src`` of one
    rank, at least 1; ``src`` cut to ``index``'s shape, in ``x``'s dtype)."""
    if index.numel() == 0:
        return x.clone()
    if x.dtype == dt.bool_:
        if reduce == "mean":
            raise DTypeError(f"{op}: reduce='mean' is not defined for bool tensors")
        out = _reduced(op, ops.cast(x, dt.int32), d, index, ops.cast(src, dt.int32), reduce,
                       include_self)
        return ops.ne(out, 0)
    if reduce in ("sum", "mean"):
        base = x if include_self else ops.scatter(x, d, index, ops.full_const(0, index.shape,
                                                                              x.dtype))
        total = ops.scatter_add(base, d, index, src)
        if reduce == "sum":
            return total
        count = ops.cast(ops.add(_hits(x, d, index), 1) if include_self else
                         ops.maximum(_hits(x, d, index), 1), x.dtype)
        if x.dtype.is_floating_point:
            return ops.div(total, count)
        return numeric.floor_divide(total, count)
    tie_gradient = reduce != "prod" and x.dtype.is_floating_point and \
        grad_mode.STATE.enabled and (x.requires_grad or src.requires_grad)
    xs, ss = (unaliased_detach(x), unaliased_detach(src)) if tie_gradient else (x, src)
    out = _folded_by_target(xs, d, index, ss, reduce)
    hit = ops.gt(_hits(x, d, index), 0) if include_self or tie_gradient else None
    if include_self:
        out = ops.where(hit, _combined(xs, out, reduce), xs)
    if tie_gradient:
        return _with_tie_gradient(out, x, d, index, src, hit, include_self)
    return out


def _check_reduce(op: str, reduce: Any, allowed: tuple[str, ...]) -> None:
    if reduce not in allowed:
        raise ArgumentError(f"{op}: reduce must be one of {', '.join(allowed)}, got "
                            f"{reduce!r}")


def _check_same_dtype(op: str, x: Tensor, src: Any, name: str) -> None:
    ops._check_tensor(f"{op} input", x)
    ops._check_tensor(f"{op} {name}", src)
    if src.dtype != x.dtype:
        raise DTypeError(f"{op}: input ({x.dtype.name}) and {name} ({src.dtype.name}) must "
                         f"have the same dtype")


def _on_vectors(op: str, x: Tensor, d: builtins.int, index: Tensor, src: Tensor,
                reduce: str, include_self: builtins.bool) -> Tensor:
    """``_reduced`` of a 0-d input as 1-element vectors (so the scatters' index checks
    see one element)."""
    if x.ndim:
        return _reduced(op, x, d, index, src, reduce, include_self)
    flat = [movement.reshape(t, (1,)) for t in (x, index, src)]
    return movement.reshape(_reduced(op, flat[0], 0, flat[1], flat[2], reduce, include_self),
                            ())


def scatter_reduce(input: Tensor, dim: builtins.int, index: Tensor, src: Tensor,
                   reduce: str, *, include_self: builtins.bool = True) -> Tensor:
    """``torch.scatter_reduce`` (out of place): every ``src[..., j, ...]`` reduced into
    ``input[..., index[..., j, ...], ...]`` along ``dim`` with ``reduce`` -- ``sum``,
    ``prod``, ``mean``, ``amax`` or ``amin`` -- together with the value already there
    (``include_self=False``: without it; positions no update targets keep it either
    way). Integer ``mean`` rounds toward -inf, as PyTorch's; ``amax``/``amin`` keep the
    first of equal values and propagate NaN; their gradient is shared evenly among the
    tied inputs, as PyTorch's (``prod``'s is the product of the others, zeros included)."""
    _check_reduce("scatter_reduce", reduce, _SCATTER_REDUCTIONS)
    _check_same_dtype("scatter_reduce", input, src, "src")
    d, src = ops._scatter_args("scatter_reduce", input, dim, index, src)
    return _on_vectors("scatter_reduce", input, d, index, src, reduce, include_self)


def index_reduce(input: Tensor, dim: builtins.int, index: Tensor, source: Tensor,
                 reduce: str, *, include_self: builtins.bool = True) -> Tensor:
    """``torch.index_reduce`` (out of place): the slices ``source[..., j, ...]`` along
    ``dim`` reduced into ``input``'s slices ``index[j]`` with ``reduce`` -- ``prod``,
    ``mean``, ``amax`` or ``amin`` -- as :func:`scatter_reduce` reduces (``index`` 1-D,
    or 0-D for one slice)."""
    op = "index_reduce"
    _check_reduce(op, reduce, _INDEX_REDUCTIONS)
    _check_same_dtype(op, input, source, "source")
    ops._check_tensor(f"{op} index", index)
    if index.ndim > 1:
        raise IndexError(f"{op}: index must be a 0-D or 1-D tensor, got shape {index.shape}")
    if index.dtype not in (dt.int32, dt.int64):
        raise DTypeError(f"{op}: index must be int32 or int64, got {index.dtype.name}")
    d = normalize_dim(op, dim, input.ndim, input.shape)
    k = index.numel()
    want = input.shape[:d] + (k,) + input.shape[d + 1:] if input.ndim else ()
    if source.shape != want or (not input.ndim and k != 1):
        raise ArgumentError(f"{op}: source must have shape {want} (input {input.shape} with "
                            f"dim {d} of size {k}, the number of indices), got {source.shape}")
    ops.check_index_values(op, index, d, input.shape, negative=False)
    if not input.ndim:
        return _on_vectors(op, input, 0, movement.reshape(index, ()), source, reduce,
                           include_self)
    view = [1] * input.ndim
    view[d] = k
    expanded = movement.expand(movement.reshape(index, tuple(view)), want)
    return _reduced(op, input, d, expanded, source, reduce, include_self)


__all__ = ["bitwise_left_shift", "bitwise_right_shift", "gcd", "lcm", "vander",
           "combinations", "mode", "scatter_reduce", "index_reduce"]
