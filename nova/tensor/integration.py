"""Sampled calculus with PyTorch's names and formulas: the trapezoidal rule
(``trapezoid``/``trapz`` and ``cumulative_trapezoid``) and finite-difference derivatives
(``gradient``), at a constant spacing or at sample coordinates.

Each follows PyTorch's ATen code operation for operation (the same slices, products and
divisions in the same order), so float32 results round as PyTorch's do; integer inputs
give float results through true division, as there. Written over slices, ``cat`` and
``cumsum``: they fuse like the rest and differentiate by their parts' rules."""
from __future__ import annotations

import builtins
import numbers
from collections.abc import Sequence
from typing import Any

from nova.core import dtypes as dt
from nova.core.errors import DTypeError
from nova.core.shapes import normalize_dim
from nova.tensor import movement, ops, scan
from nova.tensor.tensor import Tensor


def _slice(t: Tensor, d: builtins.int, start: builtins.int, stop: builtins.int | None = None
           ) -> Tensor:
    """``t[..., start:stop, ...]`` along ``d``, Python's slice rules (negative counts
    from the end)."""
    begin, end, _ = slice(start, stop).indices(t.shape[d])
    return movement.narrow(t, d, begin, builtins.max(end - begin, 0))


def _real_number(op: str, name: str, v: Any) -> builtins.int | builtins.float:
    """A real Python number (a 0-d tensor read): bools and complex numbers are refused,
    as PyTorch refuses them."""
    if isinstance(v, Tensor):
        if v.ndim != 0:
            raise ValueError(f"{op}: {name} must be a number or a 0-d tensor, got shape "
                             f"{v.shape}")
        v = v.item()
    if isinstance(v, builtins.bool) or not isinstance(v, numbers.Real):
        raise TypeError(f"{op}: {name} must be a real number, got {v!r}")
    return v


# ---------------------------------------------------------------- the trapezoidal rule

def _sample_steps(op: str, y: Tensor, x: Tensor, d: builtins.int) -> Tensor:
    """The differences of the sample points ``x`` along ``d``, shaped to broadcast
    against ``y``'s: a 1-D ``x`` (one point per sample) lies along ``d``; an ``x`` of
    fewer dims than ``y`` gets leading ones (PyTorch's ``add_padding_to_shape``)."""
    ops._check_tensor(f"{op} x", x)
    if x.dtype == dt.bool_:
        raise DTypeError(f"{op}: received a bool input for x, but bool is not supported")
    if x.ndim == 1:
        if x.shape[0] != y.shape[d]:
            raise ValueError(f"{op}: there must be one x value for each sample point: x has "
                             f"{x.shape[0]}, y {y.shape} has {y.shape[d]} along dim {d}")
        shape = [1] * y.ndim
        shape[d] = x.shape[0]
        x = movement.reshape(x, tuple(shape))
    elif x.ndim < y.ndim:
        x = movement.reshape(x, (1,) * (y.ndim - x.ndim) + x.shape)
    if d >= x.ndim:
        raise ValueError(f"{op}: x {x.shape} has no dim {d} (y {y.shape})")
    return ops.sub(_slice(x, d, 1), _slice(x, d, 0, -1))


def _integrand(op: str, y: Tensor, x: Tensor | None, dx: Any, dim: Any) -> builtins.int:
    """Checks shared by the trapezoidal rules; returns the normalized dim."""
    ops._check_tensor(op, y)
    if y.dtype == dt.bool_:
        raise DTypeError(f"{op}: received a bool input for y, but bool is not supported")
    if x is not None and dx is not None:
        raise TypeError(f"{op}: give the sample points x or the spacing dx, not both")
    if y.ndim == 0:
        raise IndexError(f"{op}: y must have at least one dim (the samples), got a 0-d tensor")
    return normalize_dim(op, dim, y.ndim, y.shape)


def trapezoid(y: Tensor, x: Tensor | None = None, *, dx: Any = None,
              dim: builtins.int = -1) -> Tensor:
    """The trapezoidal rule along ``dim``, at spacing ``dx`` (1 by default) or at the
    sample points ``x`` (``torch.trapezoid``): ``sum((y[i] + y[i+1]) dx_i) / 2``, or for
    a constant spacing ``(sum(y) - (y[0] + y[-1]) / 2) dx``. No samples give zeros (as
    numpy and PyTorch)."""
    d = _integrand("trapezoid", y, x, dx, dim)
    if y.shape[d] == 0:
        return ops.full_const(0, y.shape[:d] + y.shape[d + 1:], y.dtype)
    if x is None:
        step = 1.0 if dx is None else builtins.float(_real_number("trapezoid", "dx", dx))
        ends = movement.squeeze(ops.add(_slice(y, d, 0, 1), _slice(y, d, -1)), d)
        return ops.mul(ops.sub(ops.sum(y, d), ops.mul(ends, 0.5)), step)
    steps = _sample_steps("trapezoid", y, x, d)
    mid = ops.add(_slice(y, d, 0, -1), _slice(y, d, 1))
    return ops.div(ops.sum(ops.mul(mid, steps), d), 2.0)


trapz = trapezoid


def cumulative_trapezoid(y: Tensor, x: Tensor | None = None, *, dx: Any = None,
                         dim: builtins.int = -1) -> Tensor:
    """The running trapezoidal rule along ``dim`` (``torch.cumulative_trapezoid``): one
    value fewer than ``y`` there, the integral up to each sample after the first."""
    d = _integrand("cumulative_trapezoid", y, x, dx, dim)
    mid = ops.add(_slice(y, d, 0, -1), _slice(y, d, 1))
    if x is None:
        step = 1.0 if dx is None else builtins.float(
            _real_number("cumulative_trapezoid", "dx", dx))
        return scan.cumsum(ops.mul(mid, step / 2.0), d)
    steps = _sample_steps("cumulative_trapezoid", y, x, d)
    return ops.div(scan.cumsum(ops.mul(mid, steps), d), 2.0)


# ---------------------------------------------------------------- finite differences

def _gradient_dims(input: Tensor, dim: Any) -> list[builtins.int]:
    if dim is None:
        return list(range(input.ndim))
    dims = [dim] if isinstance(dim, builtins.int) else list(dim)
    out = [normalize_dim("gradient", k, input.ndim, input.shape) for k in dims]
    if len(set(out)) != len(out):
        raise ValueError(f"gradient: dim {tuple(dims)} names a dim more than once")
    return out


def _spacings(input: Tensor, spacing: Any, dims: list[builtins.int]) -> list[Any]:
    """One spacing per dim: a number (uniform steps) or a 1-D coordinate tensor."""
    if isinstance(spacing, Tensor) and spacing.ndim == 0:
        spacing = spacing.item()
    if not isinstance(spacing, (Sequence, Tensor)):
        return [_real_number("gradient", "spacing", spacing)] * len(dims)
    if isinstance(spacing, Tensor):
        raise TypeError(f"gradient: spacing must be a number or a list (of numbers, or of "
                        f"1-D coordinate tensors), got a tensor of shape {spacing.shape}")
    spacing = list(spacing)
    if len(spacing) != len(dims):
        raise ValueError(f"gradient: expected spacing to be unspecified, a number, or a "
                         f"list of length {len(dims)} (one per dim of {dims}), got a list "
                         f"of length {len(spacing)}")
    tensors = [isinstance(s, Tensor) for s in spacing]
    if any(tensors) and not all(tensors):
        raise TypeError("gradient: spacing must be all numbers or all coordinate tensors")
    if not any(tensors):
        return [_real_number("gradient", "spacing", s) for s in spacing]
    for s, k in zip(spacing, dims):
        if s.ndim != 1:
            raise ValueError(f"gradient: expected each element of spacing to have one dim, "
                             f"got one of shape {s.shape}")
        if s.shape[0] != input.shape[k]:
            raise ValueError(f"gradient: coordinates for dim {k} must have one value per "
                             f"sample ({input.shape[k]}, input {input.shape}), got "
                             f"{s.shape[0]}")
    return spacing


def gradient(input: Tensor, *, spacing: Any = 1, dim: Any = None,
             edge_order: builtins.int = 1) -> tuple[Tensor, ...]:
    """Derivative estimates of ``input`` along each of ``dim`` (every dim by default)
    by central differences inside and one-sided ones of accuracy ``edge_order`` (1 or
    2) at the ends (``torch.gradient``, numpy's rule). ``spacing``: a number (the step
    of every dim), a list of numbers (one step per dim), or a list of 1-D tensors (the
    sample coordinates along each dim, possibly uneven). A tuple, one tensor per dim."""
    ops._check_tensor("gradient", input)
    if edge_order not in (1, 2) or isinstance(edge_order, builtins.bool):
        raise ValueError(f"gradient: only edge_order=1 and edge_order=2 are supported, got "
                         f"{edge_order!r}")
    dims = _gradient_dims(input, dim)
    steps = _spacings(input, spacing, dims)
    for k in dims:
        if input.shape[k] < edge_order + 1:
            raise ValueError(f"gradient: each dim must have at least edge_order + 1 = "
                             f"{edge_order + 1} samples, dim {k} of {input.shape} has "
                             f"{input.shape[k]}")
    return tuple(_uneven(input, h, k, edge_order) if isinstance(h, Tensor)
                 else _even(input, h, k, edge_order) for h, k in zip(steps, dims))


def _even(y: Tensor, h: Any, d: builtins.int, edge_order: builtins.int) -> Tensor:
    """Constant step ``h`` (PyTorch's ``gradient_helper_float``)."""
    s = lambda a, b=None: _slice(y, d, a, b)   # noqa: E731
    center = ops.div(ops.div(ops.sub(s(2), s(0, -2)), h), 2)
    if edge_order == 1:
        first = ops.div(ops.sub(s(1, 2), s(0, 1)), h)
        last = ops.div(ops.sub(s(-1), s(-2, -1)), h)
    else:
        first = ops.div(ops.sub(ops.add(ops.mul(s(0, 1), -1.5), ops.mul(s(1, 2), 2)),
                                ops.mul(s(2, 3), 0.5)), h)
        last = ops.div(ops.add(ops.sub(ops.mul(s(-3, -2), 0.5), ops.mul(s(-2, -1), 2)),
                               ops.mul(s(-1), 1.5)), h)
    return movement.cat([first, center, last], d)


def _uneven(y: Tensor, coords: Tensor, d: builtins.int, edge_order: builtins.int) -> Tensor:
    """Sample coordinates ``coords`` (PyTorch's ``gradient_helper``: numpy's
    second-order formulas for uneven steps)."""
    s = lambda a, b=None: _slice(y, d, a, b)   # noqa: E731
    h = ops.sub(coords[1:], coords[:-1])
    shape = [1] * y.ndim
    shape[d] = -1
    along = lambda t: movement.reshape(t, tuple(shape))   # noqa: E731
    h1, h2 = h[:-1], h[1:]
    a = along(ops.div(ops.neg(h2), ops.mul(h1, ops.add(h1, h2))))
    b = along(ops.div(ops.sub(h2, h1), ops.mul(h1, h2)))
    c = along(ops.div(h1, ops.mul(h2, ops.add(h1, h2))))
    center = ops.add(ops.add(ops.mul(a, s(0, -2)), ops.mul(b, s(1, -1))), ops.mul(c, s(2)))
    if edge_order == 1:
        first = ops.div(ops.sub(s(1, 2), s(0, 1)), h[0])
        last = ops.div(ops.sub(s(-1), s(-2, -1)), h[-1])
    else:
        p, q = h[0], h[1]
        first = _weighted(s, (0, 1), (1, 2), (2, 3),
                          ops.div(ops.neg(ops.add(ops.mul(p, 2.0), q)), ops.mul(p, ops.add(p, q))),
                          ops.div(ops.add(p, q), ops.mul(p, q)),
                          ops.div(ops.neg(p), ops.mul(q, ops.add(p, q))))
        p, q = h[-1], h[-2]
        last = _weighted(s, (-3, -2), (-2, -1), (-1, None),
                         ops.div(p, ops.mul(q, ops.add(p, q))),
                         ops.div(ops.neg(ops.add(p, q)), ops.mul(p, q)),
                         ops.div(ops.add(ops.mul(p, 2), q), ops.mul(p, ops.add(p, q))))
    return movement.cat([first, center, last], d)


def _weighted(s, i: tuple, j: tuple, k: tuple, a: Tensor, b: Tensor, c: Tensor) -> Tensor:
    """``a s(i) + b s(j) + c s(k)``, in PyTorch's order."""
    return ops.add(ops.add(ops.mul(a, s(*i)), ops.mul(b, s(*j))), ops.mul(c, s(*k)))


__all__ = ["trapezoid", "trapz", "cumulative_trapezoid", "gradient"]
