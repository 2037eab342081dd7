"""``nv.nn.Parameter``: a leaf tensor that a Module registers and optimizers update."""
from __future__ import annotations

from typing import Any

from nova.tensor.tensor import Tensor


class Parameter(Tensor):
    """A tensor that requires grad by default and is registered by ``Module``.

    Updates (optimizer steps, ``load_state_dict``) rebind its value in place, so the
    identity that modules and optimizers hold stays valid.
    """

    __slots__ = ()

    def __new__(cls, data: Tensor | None = None, requires_grad: bool = True) -> Parameter:
        from nova.tensor.creation import tensor
        if data is None:
            data = tensor([])
        if getattr(type(data), "__nova_complex__", False):
            raise TypeError(
                f"Parameter: complex parameters are not supported (got a {data.dtype.name} "
                f"tensor of shape {list(data.shape)}); keep a real Parameter of shape "
                f"{list(data.shape) + [2]} (nv.view_as_real(data)) and use "
                "nv.view_as_complex(param) in forward -- its gradient is the one PyTorch "
                "gives a complex parameter, and every optimizer updates it as PyTorch's "
                "update complex parameters (as real pairs)")
        if not isinstance(data, Tensor):
            data = tensor(data)
        p = cls._wrap(data.node)
        if requires_grad:
            p.requires_grad_()
        return p

    def __init__(self, data: Any = None, requires_grad: bool = True):
        """All set up by ``__new__`` (Tensor's own ``__init__`` would rebuild the value)."""

    def __repr__(self) -> str:
        return "Parameter containing:\n" + super().__repr__()

    def __reduce_ex__(self, protocol: Any) -> tuple:
        """Pickling (``pickle.dumps(model)``, a module sent to a worker process) carries
        the value, dtype, device and ``requires_grad`` and unpickles as a Parameter, as
        PyTorch's does; like a Tensor's (``Tensor.__reduce_ex__``), never the trace or
        a ``.grad``. Checkpoints are ``nv.save(module.state_dict(), path)``."""
        return (_rebuild_parameter, self._leaf_state())

    def __copy__(self) -> Parameter:
        raise TypeError("Parameter: copy.copy is not supported; use "
                        "nv.save(module.state_dict(), path) to serialize")

    def __deepcopy__(self, memo: dict) -> Parameter:
        """A new Parameter with the same value, ``requires_grad`` and (copied) ``.grad``,
        as PyTorch's: ``copy.deepcopy(model)`` (an EMA copy, a frozen teacher) gets
        parameters of its own. Nova values are immutable, so the copy shares the value
        until either is updated, which rebinds only that one."""
        if id(self) in memo:
            return memo[id(self)]
        new = type(self)(Tensor._wrap(self.node), requires_grad=self.requires_grad)
        memo[id(self)] = new
        if self.grad is not None:
            import copy
            new.grad = copy.deepcopy(self.grad, memo)
        return new


def _rebuild_parameter(values: Any, dtype: str, device: str, requires_grad: bool) -> Parameter:
    """Unpickling: a Parameter holding ``values`` (``Parameter.__reduce_ex__``)."""
    from nova.tensor.creation import tensor
    return Parameter(tensor(values, dtype=dtype, device=device), requires_grad=requires_grad)
