"""``Tensor.apply_`` / ``map_`` / ``map2_``: PyTorch's element-by-element maps with a
Python callable, done on the host.

The tensor (and the others, broadcast to its shape) is realized, the callable runs on
each element as a Python number (``float``, ``int`` or ``bool``, as PyTorch passes
them), and the results, converted back to the tensor's dtype as PyTorch converts them
(a float result truncated toward zero for an integer tensor; anything but a real
number refused), are written in place. Like PyTorch's these are CPU-only and outside
autograd: a tensor that requires grad is refused. The write goes through
``Tensor._assign``, so views of the tensor see it and its version counter moves (it
must: a Nova view re-derives from its base when the version changes; PyTorch's
``apply_`` leaves the counter alone).
"""
from __future__ import annotations

import numbers
from collections.abc import Callable
from typing import Any

import numpy as np

from nova.core import dtypes as dt
from nova.tensor.tensor import Tensor


def _check_self(op: str, t: Tensor, fn: Any) -> None:
    if t.requires_grad:
        raise RuntimeError(f"Can't call {op}() on Variable that requires grad. Use "
                           f"var.detach().{op}() instead.")
    if t.node.device == "cuda":
        raise TypeError(f"{op} is only implemented on CPU tensors (got a tensor on "
                        f"{t.device}); move it with .cpu() first")
    if not callable(fn):
        raise TypeError(f"{op}: '{type(fn).__name__}' object is not callable")


def _operand(op: str, t: Tensor, other: Any, position: int, name: str) -> np.ndarray:
    """``other``'s values broadcast to ``t``'s shape (a tensor of ``t``'s dtype)."""
    if not isinstance(other, Tensor):
        raise TypeError(f"{op}(): argument '{name}' (position {position}) must be Tensor, "
                        f"not {type(other).__name__}")
    if other.dtype != t.dtype:
        raise TypeError(f"{op}: expected {t.dtype.name} for '{name}' (got "
                        f"{other.dtype.name})")
    if other.requires_grad:
        raise RuntimeError(f"Can't call {op}() on Variable that requires grad. Use "
                           f"var.detach().{op}() instead.")
    try:
        return np.broadcast_to(other.numpy(), t.shape)
    except ValueError:
        raise RuntimeError(f"{op}: '{name}' of shape {list(other.shape)} cannot be "
                           f"broadcast to the shape {list(t.shape)} of the tensor written "
                           "in place") from None


def _converter(op: str, dtype: dt.DType) -> Callable[[Any], Any]:
    """How a callable's result becomes an element of ``dtype``, as PyTorch converts it."""
    if dtype == dt.bool_:
        return bool
    if dtype.category == dt.INT:
        lo, hi = dt.int_bounds(dtype)

        def to_int(r: Any) -> int:
            if not isinstance(r, numbers.Real):
                raise TypeError(f"{op}: the callable must return a real number, not "
                                f"{type(r).__name__}")
            v = int(r)                     # (floats truncate toward zero, as in PyTorch)
            if not lo <= v <= hi:
                raise dt.DTypeOverflowError(f"{op}: the callable returned {r!r}, which "
                                            f"does not fit {dtype.name} ([{lo}, {hi}])")
            return v
        return to_int

    def to_float(r: Any) -> float:
        if not isinstance(r, numbers.Real):
            raise TypeError(f"{op}: the callable must return a real number, not "
                            f"{type(r).__name__}")
        return float(r)
    return to_float


def _map(op: str, t: Tensor, fn: Callable, operands: list[np.ndarray]) -> Tensor:
    """``fn`` on each element of the operands (each of ``t``'s shape), written into
    ``t``."""
    convert = _converter(op, t.dtype)
    columns = [np.asarray(a).ravel().tolist() for a in operands]
    values = [convert(fn(*args)) for args in zip(*columns)]
    with np.errstate(over="ignore"):     # a float result past the dtype's range is inf
        host = np.array(values, dtype=np.float64 if t.dtype.is_floating_point
                        else t.dtype.np).astype(t.dtype.np).reshape(t.shape)
    from nova.tensor.creation import tensor
    from nova.tensor.grad_mode import no_grad
    with no_grad():
        return t._assign(tensor(host, dtype=t.dtype), op)


def apply_(self: Tensor, callable: Callable[[Any], Any]) -> Tensor:
    """Replace each element ``x`` by ``callable(x)`` (``torch.Tensor.apply_``): a slow
    host loop, for tests and small tensors."""
    _check_self("apply_", self, callable)
    return _map("apply_", self, callable, [self.numpy()])


def map_(self: Tensor, tensor: Tensor, callable: Callable[[Any, Any], Any]) -> Tensor:
    """Replace each element ``x`` by ``callable(x, y)``, ``y`` the element of ``tensor``
    (same dtype, broadcast to this shape) at the same place (``torch.Tensor.map_``)."""
    _check_self("map_", self, callable)
    other = _operand("map_", self, tensor, 1, "other")
    return _map("map_", self, callable, [self.numpy(), other])


def map2_(self: Tensor, x: Tensor, y: Tensor,
          callable: Callable[[Any, Any, Any], Any]) -> Tensor:
    """Replace each element ``s`` by ``callable(s, a, b)``, ``a`` and ``b`` the elements
    of ``x`` and ``y`` at the same place (``torch.Tensor.map2_``)."""
    _check_self("map2_", self, callable)
    a = _operand("map2_", self, x, 1, "x")
    b = _operand("map2_", self, y, 2, "y")
    return _map("map2_", self, callable, [self.numpy(), a, b])
