"""``nv.nn.Parameter``: a leaf tensor that a Module registers and optimizers update."""
from __future__ import annotations

from typing import Any

from nova.tensor.complex import ComplexTensor, view_as_complex, view_as_real
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
            return ComplexParameter(data, requires_grad)      # type: ignore[return-value]
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
        """A new Parameter with the same value and ``requires_grad`` and no ``.grad``, as
        PyTorch's: ``copy.deepcopy(model)`` (an EMA copy, a frozen teacher) gets
        parameters of its own. Nova values are immutable, so the copy shares the value
        until either is updated, which rebinds only that one."""
        if id(self) in memo:
            return memo[id(self)]
        new = type(self)(Tensor._wrap(self.node), requires_grad=self.requires_grad)
        memo[id(self)] = new
        return new


def _rebuild_parameter(values: Any, dtype: str, device: str, requires_grad: bool) -> Parameter:
    """Unpickling: a Parameter holding ``values`` (``Parameter.__reduce_ex__``)."""
    from nova.tensor.creation import tensor
    return Parameter(tensor(values, dtype=dtype, device=device), requires_grad=requires_grad)


class ComplexParameter(ComplexTensor):
    """A complex parameter (``nn.Parameter`` of a complex tensor, as an FNO's spectral
    weights): the complex view of one real Parameter ``_pair`` of shape ``(..., 2)``,
    the real and imaginary parts side by side (``view_as_real``). A Module registers
    ``_pair`` under the parameter's name -- what ``parameters()`` yields and optimizers
    update, as PyTorch's optimizers update complex parameters (as real pairs) -- and
    returns this object for the attribute; ``state_dict`` holds the complex value,
    as PyTorch's. The parts are read from ``_pair`` at each use, so they follow every
    update of it (optimizer steps, ``load_state_dict``), and writes through them reach
    it. ``grad`` is ``_pair``'s gradient as complex (``dL/dre + i dL/dim``)."""

    __slots__ = ("_pair",)
    __nova_complex_parameter__ = True

    def __init__(self, data: ComplexTensor | None = None, requires_grad: bool = True,
                 *, pair: Parameter | None = None):
        if pair is None:
            pair = Parameter(view_as_real(data.detach()).clone(), requires_grad)
        object.__setattr__(self, "_pair", pair)

    @property
    def _real_view(self) -> Tensor:     # (overrides ComplexTensor's slots)
        return self._pair

    @property
    def _re(self) -> Tensor:
        return self._pair[..., 0]

    @property
    def _im(self) -> Tensor:
        return self._pair[..., 1]

    @property
    def requires_grad(self) -> bool:
        return self._pair.requires_grad

    @requires_grad.setter
    def requires_grad(self, flag: bool) -> None:
        self._pair.requires_grad_(flag)

    def requires_grad_(self, requires_grad: bool = True) -> ComplexParameter:
        self._pair.requires_grad_(requires_grad)
        return self

    @property
    def is_leaf(self) -> bool:
        return True

    @property
    def data(self) -> ComplexTensor:
        return self.detach()

    @data.setter
    def data(self, value: ComplexTensor) -> None:
        """``p.data = z`` rebinds the pair's value to ``z``'s parts (no autograd)."""
        if not getattr(type(value), "__nova_complex__", False):
            raise TypeError(f"Parameter.data: expected a complex tensor for a complex "
                            f"parameter, got {type(value).__name__}")
        self._pair.data = view_as_real(value.detach())

    @property
    def grad(self) -> ComplexTensor | None:
        g = self._pair.grad
        return None if g is None else view_as_complex(g)

    @grad.setter
    def grad(self, value: ComplexTensor | None) -> None:
        self._pair.grad = None if value is None else view_as_real(value)

    def __repr__(self) -> str:
        return "Parameter containing:\n" + super().__repr__()

    def __reduce_ex__(self, protocol: Any) -> tuple:
        return (_rebuild_complex_parameter, (self._pair,))

    def __deepcopy__(self, memo: dict) -> ComplexParameter:
        import copy
        if id(self) not in memo:
            memo[id(self)] = ComplexParameter(pair=copy.deepcopy(self._pair, memo))
        return memo[id(self)]


def _rebuild_complex_parameter(pair: Parameter) -> ComplexParameter:
    """Unpickling: the complex view of ``pair`` (``ComplexParameter.__reduce_ex__``)."""
    return ComplexParameter(pair=pair)
