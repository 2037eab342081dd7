"""``nv.nn.Buffer`` (``torch.nn.Buffer``, PyTorch 2.5+): a tensor that registers itself
as a module's buffer when assigned as an attribute (``self.mean = nn.Buffer(t)``), as a
``Parameter`` registers as a parameter; ``persistent=False`` keeps it out of
``state_dict``. ``Module.__setattr__`` reads ``persistent`` when registering it.

As PyTorch's, a buffer shares its elements with the tensor it is made from (a
``detach()`` of it: an in-place update of either is seen by the other) and requires
grad if that tensor does. Deviation: PyTorch returns a plain ``torch.Tensor`` carrying
the flag; Nova returns a ``Buffer`` (a ``Tensor`` subclass; ``isinstance`` answers as in
PyTorch), and the values computed from it are plain tensors.
"""
from __future__ import annotations

from typing import Any

from nova.tensor.creation import empty
from nova.tensor.tensor import Tensor

__all__ = ["Buffer"]


class Buffer(Tensor):
    """A tensor that a ``Module`` registers as a buffer on attribute assignment."""

    __slots__ = ("persistent",)

    def __new__(cls, data: Tensor | None = None, *, persistent: bool = True) -> Buffer:
        if data is None:
            data = empty(0)
        if not isinstance(data, Tensor):
            raise TypeError(f"Buffer: data must be a Tensor, got {type(data).__name__}")
        alias = data.detach()
        b = cls._wrap(alias.node, alias._view)
        if data.requires_grad:
            b.requires_grad_()
        b.persistent = bool(persistent)
        return b

    def __init__(self, data: Any = None, *, persistent: bool = True):
        """All set up by ``__new__`` (Tensor's own ``__init__`` would rebuild the value)."""
