"""``nv.autograd.Variable``: PyTorch's legacy name for a tensor, kept so old code runs.

Since PyTorch 0.4 a Variable is a Tensor: ``Variable(t)`` gives a new handle on ``t``'s
storage without history (``t.detach()``), requiring grad if asked, and every tensor is
an instance of ``Variable``."""
from __future__ import annotations

from typing import Any

from nova.tensor.creation import empty
from nova.tensor.tensor import Tensor


class _VariableMeta(type):
    """Makes ``isinstance(t, Variable)`` true for every Tensor, as torch's."""

    def __instancecheck__(cls, other: Any) -> bool:
        return isinstance(other, Tensor)


class Variable(metaclass=_VariableMeta):
    """``Variable(data=None, requires_grad=False, volatile=False)``: ``data`` detached
    (an empty float tensor when omitted), requiring grad if asked."""

    def __new__(cls, data: Any = None, requires_grad: bool = False,
                volatile: bool = False) -> Tensor:   # type: ignore[misc]
        if data is None:
            data = empty(0)
        elif not isinstance(data, Tensor):
            raise TypeError(f"Variable data has to be a tensor, but got "
                            f"{type(data).__name__}")
        if not isinstance(requires_grad, bool):
            raise TypeError(f"Variable: requires_grad must be a bool, got "
                            f"{type(requires_grad).__name__}")
        out = data.detach()
        if requires_grad:
            out.requires_grad_(True)
        return out


__all__ = ["Variable"]
