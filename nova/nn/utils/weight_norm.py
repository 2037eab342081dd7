"""Weight normalization, PyTorch's original hook API (``torch.nn.utils.weight_norm``):
``weight = g * v / ||v||`` from the parameters ``weight_g`` and ``weight_v``, recomputed
by a forward pre-hook before every call. Deprecated in PyTorch, as here, in favour of
``nv.nn.utils.parametrizations.weight_norm``, which shares the formula below.
"""
from __future__ import annotations

import warnings
from typing import Any, TypeVar

from nova.nn.module import Module
from nova.nn.parameter import Parameter
from nova.tensor import ops
from nova.tensor.numeric import vector_norm
from nova.tensor.tensor import Tensor

ModuleT = TypeVar("ModuleT", bound=Module)


def _norm_except_dim(v: Tensor, dim: int) -> Tensor:
    """The 2-norm of ``v`` over every dim but ``dim``, keeping ``v``'s rank (PyTorch's
    ``norm_except_dim``); ``dim=-1`` is the norm of the whole tensor, a 0-d tensor, as
    in PyTorch (other negative dims count from the end)."""
    if dim == -1:
        return vector_norm(v)
    if not -v.ndim <= dim < v.ndim:
        raise IndexError(f"weight_norm: dim {dim} is out of range for a weight of shape "
                         f"{v.shape} (expected -1 for the whole tensor, or a dim in "
                         f"[{-v.ndim}, {v.ndim - 1}])")
    d = dim % v.ndim
    rows = v.movedim(d, 0).reshape(v.shape[d], -1)
    shape = [1] * v.ndim
    shape[d] = v.shape[d]
    return vector_norm(rows, 2, 1).reshape(shape)


def _weight_norm(v: Tensor, g: Tensor, dim: int) -> Tensor:
    """``v * (g / ||v||)``, the norm over every dim but ``dim`` (PyTorch's
    ``_weight_norm``); differentiable in ``g`` and ``v`` through the primitives."""
    return ops.mul(v, ops.div(g, _norm_except_dim(v, dim)))


class WeightNorm:
    """The forward pre-hook that recomputes ``module.<name>`` from ``<name>_g`` and
    ``<name>_v``."""

    def __init__(self, name: str, dim: int | None) -> None:
        self.name = name
        self.dim = -1 if dim is None else dim

    def compute_weight(self, module: Module) -> Tensor:
        return _weight_norm(getattr(module, self.name + "_v"),
                            getattr(module, self.name + "_g"), self.dim)

    @staticmethod
    def apply(module: Module, name: str, dim: int | None) -> WeightNorm:
        for hook in _pre_hooks(module).values():
            if isinstance(hook, WeightNorm) and hook.name == name:
                raise RuntimeError(f"Cannot register two weight_norm hooks on the same "
                                   f"parameter {name}")
        weight = module._parameters.get(name)
        if weight is None:
            raise ValueError(f"weight_norm: {type(module).__name__} has no parameter "
                             f"'{name}'")
        fn = WeightNorm(name, dim)
        g = _norm_except_dim(weight, fn.dim).detach()
        del module._parameters[name]
        module.register_parameter(name + "_g", Parameter(g))
        module.register_parameter(name + "_v", Parameter(weight.detach()))
        setattr(module, name, fn.compute_weight(module))
        module.register_forward_pre_hook(fn)
        return fn

    def remove(self, module: Module) -> None:
        weight = self.compute_weight(module).detach()
        delattr(module, self.name)
        del module._parameters[self.name + "_g"]
        del module._parameters[self.name + "_v"]
        setattr(module, self.name, Parameter(weight))

    def __call__(self, module: Module, inputs: Any) -> None:
        setattr(module, self.name, self.compute_weight(module))


def _pre_hooks(module: Module) -> dict:
    """The module's forward pre-hooks by handle id (each entry ``(hook, with_kwargs)``),
    as the hook objects themselves."""
    return {key: entry[0] for key, entry in (module._forward_pre_hooks or {}).items()}


def weight_norm(module: ModuleT, name: str = "weight", dim: int | None = 0) -> ModuleT:
    """Replace parameter ``name`` by ``name_g`` (magnitude, the norm of the weight over
    every dim but ``dim``; ``dim=None`` for the whole tensor) and ``name_v``
    (direction), with ``module.<name>`` recomputed before each forward (deprecated,
    as in PyTorch: use ``nv.nn.utils.parametrizations.weight_norm``)."""
    warnings.warn("`nv.nn.utils.weight_norm` is deprecated in favor of "
                  "`nv.nn.utils.parametrizations.weight_norm`.", FutureWarning, stacklevel=2)
    WeightNorm.apply(module, name, dim)
    return module


def remove_weight_norm(module: ModuleT, name: str = "weight") -> ModuleT:
    """Undo ``weight_norm``: ``name`` becomes one parameter again, holding the current
    ``g * v / ||v||``."""
    for key, hook in _pre_hooks(module).items():
        if isinstance(hook, WeightNorm) and hook.name == name:
            hook.remove(module)
            del module._forward_pre_hooks[key]
            return module
    raise ValueError(f"weight_norm of '{name}' not found in {type(module).__name__}")


__all__ = ["WeightNorm", "remove_weight_norm", "weight_norm"]
