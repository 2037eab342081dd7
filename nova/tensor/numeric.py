"""Rounding, signs, floor division and remainders, truth reductions, norms and flip,
with PyTorch's names and semantics.

``floor ceil round trunc`` are dialect ops (the float types; an integer tensor is
already integral, so it is copied); ``frac sign`` and the divisions (``div`` with
PyTorch's ``rounding_mode`` among them) are compositions. On floats they start from the
exact remainder, C's ``fmod`` (the dialect's ``rem``): ``fmod`` is it, the sign of
``a``; ``a % b`` (``remainder``) adds ``b`` where its sign differs from ``b``'s, as
Python's does; ``a // b`` is ``(a - fmod(a, b)) / b`` corrected and rounded as
PyTorch's CPU kernels compute it (``a - b * trunc(a / b)`` lost every digit once the
quotient passed 2**24: ``fmod(5.3, 0.1)`` gave 0). On integers, a truncating division
corrected toward -inf, and ``a - b * q``. An integer division by zero is the usual
run-time error.
``flip`` is a gather along each flipped dim (so it differentiates by gather's rule).
"""
from __future__ import annotations

import builtins
import math
from collections.abc import Sequence
from typing import Any

from nova.core import dtypes as dt
from nova.core.errors import DTypeError
from nova.core.shapes import normalize_dim
from nova.tensor import ops
from nova.tensor.elementary import _nan_slope
from nova.tensor.ops import prim
from nova.tensor.tensor import Tensor


def _rounding(name: str):
    def op(input: Tensor) -> Tensor:
        ops._check_tensor(name, input)
        if not input.dtype.is_floating_point:
            return input.clone()
        return prim(name, [input], {}, input.shape, input.dtype)
    op.__name__ = name
    op.__doc__ = (f"Elementwise {name} (``torch.{name}``); an integer tensor is returned "
                  "as a copy.")
    return op


floor = _rounding("floor")
ceil = _rounding("ceil")
trunc = _rounding("trunc")
_round_even = _rounding("round")


def round(input: Tensor, decimals: builtins.int = 0) -> Tensor:  # noqa: A001 (torch's name)
    """Nearest integer, ties to even (``torch.round``); with ``decimals``, of
    ``x * 10**decimals``, scaled back; half types in float32, rounded once, as PyTorch's
    kernel (float16 26.140625 to 1 decimal is 26.09375: in float16 ``x * 10`` rounded
    to 261.5 first, giving 26.203125)."""
    if not isinstance(decimals, builtins.int) or isinstance(decimals, builtins.bool):
        raise TypeError(f"round: decimals must be an int, got {decimals!r}")
    if decimals == 0 or not input.dtype.is_floating_point:
        return _round_even(input)
    scale = 10.0 ** decimals
    return ops._rounded_once(input.dtype,
                             lambda x: ops.div(_round_even(ops.mul(x, scale)), scale), input)


def frac(input: Tensor) -> Tensor:
    """``x - trunc(x)`` (``torch.frac``), float tensors only."""
    ops._check_tensor("frac", input)
    if not input.dtype.is_floating_point:
        raise DTypeError(f"frac: expected a float tensor, got {input.dtype.name}")
    return ops.sub(input, trunc(input))


def sign(input: Tensor) -> Tensor:
    """-1, 0 or 1 by the sign of each element, in ``input``'s dtype; 0 for NaN, as
    ``torch.sign`` gives."""
    ops._check_tensor("sign", input)
    if input.dtype == dt.bool_:
        return input.clone()
    return ops.zero_gradient_to(
        ops.sub(ops.cast(ops.gt(input, 0), input.dtype), ops.cast(ops.lt(input, 0), input.dtype)),
        input)


def _fmod_float(x: Tensor, y: Tensor) -> Tensor:
    """C's ``fmod`` of two float tensors of one dtype and shape: exact (``nova.rem``)."""
    return prim("rem", [x, y], {}, x.shape, x.dtype)


def _wrong_sign(mod: Tensor, y: Tensor) -> Tensor:
    """Where a nonzero truncated remainder ``mod`` has a sign other than ``y``'s: there
    the floored remainder is ``mod + y`` and the floored quotient one less."""
    return ops.logical_and(ops.ne(mod, 0), ops.ne(ops.lt(y, 0), ops.lt(mod, 0)))


def _floor_quotient_float(x: Tensor, y: Tensor) -> Tensor:
    """``x / y`` rounded toward -inf for floats as PyTorch computes it (c10's
    ``div_floor_floating``): from the exact remainder, ``(x - fmod(x, y)) / y`` less one
    where the remainder's sign differs from ``y``'s, rounded to the nearest integer (the
    division is exact up to rounding); a zero quotient keeps the sign of ``x / y``, and
    ``y == 0`` gives ``x / y``. So ``5.3 // 0.1`` is 52, not the 53 that ``floor(5.3 /
    0.1)`` rounds to, and ``-5.5 // inf`` is -1."""
    mod = _fmod_float(x, y)
    q = ops.div(ops.sub(x, mod), y)
    q = ops.sub(q, ops.cast(_wrong_sign(mod, y), q.dtype))
    fl = floor(q)
    fl = ops.where(ops.gt(ops.sub(q, fl), 0.5), ops.add(fl, 1.0), fl)
    true_q = ops.div(x, y)
    fl = ops.where(ops.eq(q, 0), ops.mul(true_q, 0.0), fl)
    return ops.where(ops.eq(y, 0), true_q, fl)


def _quotient(op: str, a: Any, b: Any, toward_floor: builtins.bool) -> Tensor:
    """``a / b`` rounded toward -inf (``toward_floor``) or toward zero, in the common
    dtype of ``a`` and ``b``."""
    common = ops.promote(op, a, b)
    if common == dt.bool_:
        raise DTypeError(f"{op}: not defined on two bool operands")
    if common.is_floating_point:
        if toward_floor:
            return _floor_quotient_float(*ops.operands(op, a, b, dtype=common))
        return trunc(ops.div(a, b))
    x, y = ops.operands(op, a, b, dtype=common)
    q = prim("div", [x, y], {}, x.shape, common)           # truncates toward zero
    if not toward_floor:
        return q
    inexact = ops.ne(ops.sub(x, ops.mul(q, y)), 0)
    signs_differ = ops.ne(ops.lt(x, 0), ops.lt(y, 0))
    return ops.sub(q, ops.cast(ops.logical_and(inexact, signs_differ), common))


ROUNDING_MODES = (None, "trunc", "floor")


def div(input: Any, other: Any, *, rounding_mode: str | None = None) -> Tensor:
    """``torch.div``: true division (integers give the default dtype), or with ``rounding_mode``
    the quotient rounded toward zero (``"trunc"``) or -inf (``"floor"``) in the common
    dtype of ``input`` and ``other``."""
    if rounding_mode not in ROUNDING_MODES:
        raise ValueError(f"div: rounding_mode must be None, 'trunc' or 'floor', got "
                         f"{rounding_mode!r}")
    if rounding_mode is None:
        return ops.div(input, other)
    return _quotient("div", input, other, rounding_mode == "floor")


divide = div          # torch's alias


def floor_divide(input: Any, other: Any) -> Tensor:
    """``a // b``: the quotient rounded toward -inf (``torch.floor_divide``)."""
    return _quotient("floor_divide", input, other, True)


def remainder(input: Any, other: Any) -> Tensor:
    """``a % b``: ``a - b * floor(a / b)``, the sign of ``other`` (``torch.remainder``).
    Floats: exact, from ``fmod`` plus ``other`` where the signs differ, as PyTorch."""
    if ops.promote("remainder", input, other).is_floating_point:
        x, y = ops.operands("remainder", input, other)
        r = _fmod_float(x, y)
        out = ops.where(_wrong_sign(r, y), ops.add(r, y), r)
        # PyTorch's d/dy is -floor_divide(x, y): NaN at an infinite x (fmod's rule: -+inf)
        return _nan_slope(out, y, ops.isinf(x))
    return _integer_rest("remainder", input, other, True)


def fmod(input: Any, other: Any) -> Tensor:
    """``a - b * trunc(a / b)``, the sign of ``input`` (``torch.fmod``); exact for floats
    (C's ``fmod``: ``fmod(5.3, 0.1)`` is the float32 remainder, not 0; ``fmod(x, inf)``
    is ``x``)."""
    if ops.promote("fmod", input, other).is_floating_point:
        return _fmod_float(*ops.operands("fmod", input, other))
    return _integer_rest("fmod", input, other, False)


def _integer_rest(op: str, a: Any, b: Any, toward_floor: builtins.bool) -> Tensor:
    """``a - b * q`` for integer (or bool with integer) operands, computed in their
    common dtype: a bool operand is cast first (``sub`` is not defined on bools)."""
    common = ops.promote(op, a, b)
    if common == dt.bool_:
        raise DTypeError(f"{op}: not defined on two bool operands")
    a, b = (ops.cast(v, common) if isinstance(v, Tensor) and v.dtype == dt.bool_ else v
            for v in (a, b))
    return ops.sub(a, ops.mul(b, _quotient(op, a, b, toward_floor)))


def _truth(op: str, x: Tensor) -> Tensor:
    ops._check_tensor(op, x)
    return x if x.dtype == dt.bool_ else ops.ne(x, 0)


def _no_dims(dim: Any) -> builtins.bool:
    """Whether ``dim`` is an empty tuple or list: PyTorch's ``any``/``all`` then reduce
    nothing (the elementwise truth), where its ``sum`` and the other reductions reduce
    every dim."""
    return isinstance(dim, (tuple, list)) and not dim


def _reduced_truth(op: str, x: Tensor, dim: Any, keepdim: builtins.bool,
                   reduce: Any, empty: builtins.bool) -> Tensor:
    """``reduce(truth, dim, keepdim)`` of ``x``'s truth, PyTorch's way: ``empty`` where
    the reduced dims hold no element (``any`` False, ``all`` True), and uint8 for a
    uint8 input (PyTorch keeps that one dtype; every other gives bool)."""
    truth = _truth(op, x)
    if _no_dims(dim):
        out = ops.unshared(truth, x)         # (a bool input is its own truth: a new tensor)
    else:
        axes = ops.reduction_axes(op, dim, x.ndim, x.shape)
        if builtins.any(x.shape[a] == 0 for a in axes):
            shape = tuple(1 if k in axes else n for k, n in enumerate(x.shape)
                          if keepdim or k not in axes)
            out = ops.full_const(empty, shape, dt.bool_)
        else:
            out = reduce(truth, dim, keepdim)
    return ops.cast(out, dt.uint8) if x.dtype == dt.uint8 else out


def any(input: Tensor, dim: Any = None, keepdim: builtins.bool = False) -> Tensor:  # noqa: A001
    """Whether any element (along ``dim``) is nonzero; NaN counts as nonzero."""
    return _reduced_truth("any", input, dim, keepdim, ops.amax, False)


def all(input: Tensor, dim: Any = None, keepdim: builtins.bool = False) -> Tensor:  # noqa: A001
    """Whether every element (along ``dim``) is nonzero."""
    def every(truth: Tensor, d: Any, k: builtins.bool) -> Tensor:
        return ops.logical_not(ops.amax(ops.logical_not(truth), d, k))
    return _reduced_truth("all", input, dim, keepdim, every, True)


def count_nonzero(input: Tensor, dim: Any = None) -> Tensor:
    """The number of nonzero elements (along ``dim``; all of them for None or an empty
    tuple), int64."""
    return ops.sum(ops.cast(_truth("count_nonzero", input), dt.int64), dim)


def vector_norm(x: Tensor, ord: Any = 2, dim: Any = None, keepdim: builtins.bool = False,
                *, dtype: Any = None) -> Tensor:
    """``torch.linalg.vector_norm``: ``(sum |x|**ord)**(1/ord)`` over ``dim`` (all dims
    for None or an empty tuple); ``inf``/``-inf`` the largest/smallest ``|x|``, ``0``
    the number of nonzero elements. Integer inputs compute in float32; float16 and
    bfloat16 do too, rounded once (as PyTorch: their squares overflowed at 256, and
    ``full((1024,), 100.0, float16).norm()`` was inf, not 3200)."""
    ops._check_tensor("vector_norm", x)
    if isinstance(ord, builtins.bool) or not isinstance(ord, (builtins.int, builtins.float)):
        raise TypeError(f"vector_norm: ord must be a number (inf included), got {ord!r}")
    if dtype is not None:
        x = ops.cast(x, dt.get_dtype(dtype))
    if not x.dtype.is_floating_point:
        x = ops.cast(x, dt.DEFAULT_FLOAT)
    dims = ops.reduction_axes("vector_norm", dim, x.ndim, x.shape)
    return ops._in_float32(x, lambda w: _vector_norm(w, float(ord), dims, keepdim))


def _vector_norm(x: Tensor, ord: float, dims: tuple[int, ...], keepdim: builtins.bool) -> Tensor:
    a = ops.abs(x)
    if ord == math.inf:
        return ops.amax(a, dims, keepdim)
    if ord == -math.inf:
        return ops.amin(a, dims, keepdim)
    if ord == 0:        # a count: PyTorch's gradient is zeros (not None) to x
        count = ops.sum(ops.cast(ops.ne(x, 0), x.dtype), dims, keepdim)
        return ops.zero_gradient_to(count, ops.sum(x, dims, keepdim)) if x.requires_grad \
            else count
    if ord == 1:
        return ops.sum(a, dims, keepdim)
    if ord == 2:
        return ops._root_at_zero(ops.sum(ops.mul(x, x), dims, keepdim), ops.sqrt)
    if ord < 1:     # |x|**ord has an infinite slope at 0: PyTorch's gradient there is 0
        zero = ops.eq(a, 0)
        powers = ops.where(zero, 0.0 if ord > 0 else math.inf,
                           ops.pow(ops.where(zero, 1.0, a), ord))
    else:
        powers = ops.pow(a, ord)
    return ops._root_at_zero(ops.sum(powers, dims, keepdim), lambda s: ops.pow(s, 1.0 / ord),
                             0.0 if ord > 0 else math.inf)


# ``linalg.matrix_norm`` (nova.decompositions_spectral, above this package: it needs
# the SVD and autograd), installed by nova.linalg when it is imported -- a hook, not an
# import, as ``tape.register_backward``, so the layers stay ordered
_matrix_norm: Any = None


def register_matrix_norm(fn: Any) -> None:
    """Install the ``matrix_norm`` that ``norm`` hands the matrix orders to."""
    global _matrix_norm
    _matrix_norm = fn


def norm(input: Tensor, p: Any = "fro", dim: Any = None, keepdim: builtins.bool = False,
         dtype: Any = None) -> Tensor:
    """``torch.norm``, as PyTorch routes it: ``"fro"`` (the default) over all elements,
    one dim or two is the 2-norm of those elements; a number (None: 2) is
    ``vector_norm``'s ``ord`` over ``dim``; any other string (``"nuc"``, or ``"fro"``
    over more than two dims) is ``linalg.matrix_norm``'s ``ord`` over ``dim`` (all dims
    if None, so a 2-D input), which checks it."""
    if isinstance(dim, builtins.int) and not isinstance(dim, builtins.bool):
        dim = (dim,)
    if not isinstance(p, str):
        return vector_norm(input, 2 if p is None else p, dim, keepdim, dtype=dtype)
    if p == "fro" and (dim is None or len(dim) <= 2):
        return vector_norm(input, 2, dim, keepdim, dtype=dtype)
    if _matrix_norm is None:
        raise RuntimeError(f"norm: p={p!r} needs linalg.matrix_norm, which nova.linalg "
                           "registers when imported (`import nova` imports it)")
    ops._check_tensor("norm", input)
    return _matrix_norm(input, p, tuple(range(input.ndim)) if dim is None else dim, keepdim,
                        dtype=dtype)


def flip(input: Tensor, *args: Any, dims: Any = None) -> Tensor:
    """``input`` reversed along ``dims`` (``torch.flip(x, dims)``; ``x.flip(0, 2)`` too)."""
    ops._check_tensor("flip", input)
    if dims is None:
        dims = args[0] if len(args) == 1 and isinstance(args[0], Sequence) else args
    elif args:
        raise TypeError("flip: give dims positionally or as dims=, not both")
    dims = tuple(dims) if isinstance(dims, Sequence) else (dims,)
    axes = [normalize_dim("flip", d, input.ndim, input.shape) for d in dims]
    if len(set(axes)) != len(axes):
        raise ValueError(f"flip: dims {list(dims)} repeat a dim of shape {input.shape}")
    if input.ndim == 0:                 # (dim 0 or -1 of a 0-d tensor: itself, as PyTorch)
        return input.clone()
    out = input
    for d in axes:
        n = input.shape[d]
        if n <= 1:
            continue
        index = ops.sub(n - 1, prim("iota", [], {"dim": d}, input.shape, dt.int64))
        out = ops.gather(out, d, index)
    return out if out is not input else input.clone()


TENSOR_METHODS = ("floor", "ceil", "round", "trunc", "frac", "sign", "div", "divide",
                  "floor_divide", "remainder", "fmod", "any", "all", "count_nonzero", "norm",
                  "flip")
