"""``nv.nn.utils.parametrize``: a parameter computed from others on every access.

As in PyTorch, ``register_parametrization(module, "weight", p)`` moves the tensor to
``module.parametrizations.weight.original`` (or ``original0``, ``original1``, ... when
``p.right_inverse`` returns several tensors), and gives the module a subclass
``Parametrized<Class>`` whose ``weight`` property returns ``p(original)``. So
``state_dict`` names, ``named_parameters`` and assignment (``module.weight = X`` calls
the ``right_inverse`` chain) follow PyTorch. Each access records the parametrization
into the trace; inside ``cached()`` one value is recorded per tensor and reused.

Not provided: ``transfer_parametrizations_and_params``.
"""
from __future__ import annotations

import contextvars
import copy
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from nova.autograd.grad_mode import no_grad
from nova.nn.layers import ModuleDict, ModuleList
from nova.nn.module import Module
from nova.nn.parameter import Parameter
from nova.tensor.tensor import Tensor

# Inside ``cached()``: ParametrizationList id -> (the list, its value). The list is kept
# so that its id cannot be reused by another one while the cache lives.
_CACHE: contextvars.ContextVar[dict | None] = contextvars.ContextVar(
    "nova_parametrize_cache", default=None)


@contextmanager
def cached() -> Iterator[None]:
    """Compute each parametrized tensor once inside the block and reuse that value
    (the parametrization and its gradient are recorded once); nested blocks share the
    outer block's cache, which is dropped when the outermost one exits."""
    outer = _CACHE.get()
    token = _CACHE.set({} if outer is None else outer)
    try:
        yield
    finally:
        _CACHE.reset(token)


def _register_parameter_or_buffer(module: Module, name: str, value: Tensor) -> None:
    if isinstance(value, Parameter):
        module.register_parameter(name, value)
    else:
        module.register_buffer(name, value)


def _set_value(dest: Tensor, src: Tensor) -> None:
    """Give ``dest`` the value of ``src`` keeping its identity (PyTorch's ``set_``), so an
    optimizer that holds ``dest`` keeps updating the right tensor."""
    dest.data = src.detach()


class ParametrizationList(ModuleList):
    """The parametrizations of one tensor (``module.parametrizations[name]``) and the
    unconstrained tensor(s) they start from: ``original``, or ``original0``,
    ``original1``, ... when the first parametrization's ``right_inverse`` returns a
    sequence. Made by ``register_parametrization``, not by users."""

    def __init__(self, modules: Sequence[Module], original: Tensor,
                 unsafe: bool = False) -> None:
        if len(modules) == 0:
            raise ValueError("ParametrizationList requires one or more modules.")
        super().__init__(modules)
        self.unsafe = unsafe
        original_shape, original_dtype = original.shape, original.dtype
        with no_grad():
            new: Any = original
            for module in reversed(list(self)):
                if hasattr(module, "right_inverse"):
                    try:
                        new = module.right_inverse(new)
                    except NotImplementedError:
                        pass
        if not isinstance(new, (Tensor, Sequence)):
            raise ValueError("'right_inverse' must return a Tensor or a Sequence of tensors "
                             f"(list, tuple...). Got {type(new).__name__}")
        self.is_tensor = isinstance(new, Tensor)
        self.ntensors = 1 if self.is_tensor else len(new)
        if self.is_tensor:
            if new.dtype != original_dtype:
                raise ValueError("When `right_inverse` outputs one tensor, it may not change "
                                 f"the dtype.\noriginal.dtype: {original_dtype}\n"
                                 f"right_inverse(original).dtype: {new.dtype}")
            if new.device != original.device:
                raise ValueError("When `right_inverse` outputs one tensor, it may not change "
                                 f"the device.\noriginal.device: {original.device}\n"
                                 f"right_inverse(original).device: {new.device}")
            with no_grad():
                _set_value(original, new)
            _register_parameter_or_buffer(self, "original", original)
        else:
            for i, part in enumerate(new):
                if not isinstance(part, Tensor):
                    raise ValueError("'right_inverse' must return a Tensor or a Sequence of "
                                     f"tensors (list, tuple...). Got element {i} of the "
                                     f"sequence with type {type(part).__name__}.")
                if isinstance(original, Parameter):
                    part = Parameter(part.detach(), original.requires_grad)
                else:
                    part = part.detach().requires_grad_(original.requires_grad)
                _register_parameter_or_buffer(self, f"original{i}", part)
        if not self.unsafe:
            value = self()
            if not isinstance(value, Tensor):
                raise ValueError(f"A parametrization must return a tensor. Got "
                                 f"{type(value).__name__}.")
            if value.dtype != original_dtype:
                raise ValueError("Registering a parametrization may not change the dtype of "
                                 "the tensor, unless `unsafe` flag is enabled.\n"
                                 f"unparametrized dtype: {original_dtype}\n"
                                 f"parametrized dtype: {value.dtype}")
            if value.shape != original_shape:
                raise ValueError("Registering a parametrization may not change the shape of "
                                 "the tensor, unless `unsafe` flag is enabled.\n"
                                 f"unparametrized shape: {original_shape}\n"
                                 f"parametrized shape: {value.shape}")

    def right_inverse(self, value: Tensor) -> None:
        """Set the original tensor(s) from a value of the parametrized tensor: every
        parametrization's ``right_inverse``, last registered first (``module.weight =
        value`` lands here)."""
        with no_grad():
            for module in reversed(list(self)):
                if not hasattr(module, "right_inverse"):
                    raise RuntimeError(f"parametrization {type(module).__name__} does not "
                                       "implement right_inverse.")
                value = module.right_inverse(value)
            if self.is_tensor:
                if not isinstance(value, Tensor):
                    raise ValueError(f"`right_inverse` should return a tensor. Got "
                                     f"{type(value).__name__}")
                if value.dtype != self.original.dtype:
                    raise ValueError(f"The tensor returned by `right_inverse` has dtype "
                                     f"{value.dtype} while `original` has dtype "
                                     f"{self.original.dtype}")
                _set_value(self.original, value)
                return
            if not isinstance(value, Sequence):
                raise ValueError(f"'right_inverse' must return a sequence of tensors. Got "
                                 f"{type(value).__name__}.")
            if len(value) != self.ntensors:
                raise ValueError(f"'right_inverse' must return a sequence of tensors of "
                                 f"length {self.ntensors}. Got a sequence of length "
                                 f"{len(value)}.")
            for i, part in enumerate(value):
                original_i = getattr(self, f"original{i}")
                if not isinstance(part, Tensor):
                    raise ValueError(f"'right_inverse' must return a sequence of tensors. "
                                     f"Got element {i} of type {type(part).__name__}.")
                if part.dtype != original_i.dtype:
                    raise ValueError(f"Tensor {i} returned by `right_inverse` has dtype "
                                     f"{part.dtype} while `original{i}` has dtype "
                                     f"{original_i.dtype}")
                _set_value(original_i, part)

    def forward(self) -> Tensor:
        first, *rest = list(self)
        if self.is_tensor:
            value = first(self.original)
        else:
            value = first(*(getattr(self, f"original{i}") for i in range(self.ntensors)))
        for module in rest:
            value = module(value)
        return value


def _parametrized_value(module: Module, tensor_name: str) -> Tensor:
    parametrization = module.parametrizations[tensor_name]
    cache = _CACHE.get()
    if cache is None:
        return parametrization()
    entry = cache.get(id(parametrization))
    if entry is None:
        entry = cache[id(parametrization)] = (parametrization, parametrization())
    return entry[1]


def _parametrized_setattr(self: Module, name: str, value: Any) -> None:
    """Assigning a parametrized name goes to its property (``right_inverse``); a
    Parameter there is refused, as in PyTorch, rather than hidden behind the property."""
    parametrizations = self._modules.get("parametrizations")
    if parametrizations is not None and name in parametrizations:
        if isinstance(value, Parameter):
            raise KeyError(f"attribute '{name}' already exists")
        object.__setattr__(self, name, value)
        return
    super(type(self), self).__setattr__(name, value)


def _own_class(cls: type) -> type:
    """A copy of the parametrized class ``cls`` (same base, same properties)."""
    namespace = {k: v for k, v in cls.__dict__.items() if k not in ("__dict__", "__weakref__")}
    return type(cls.__name__, cls.__bases__, namespace)


def _parametrized_deepcopy(self: Module, memo: dict) -> Module:
    """A deep copy with a parametrized class of its own, so that removing a
    parametrization from the copy (which deletes a property of its class) leaves the
    original alone (PyTorch's copies share the class, and that removal breaks the
    original)."""
    replica = object.__new__(_own_class(type(self)))
    memo[id(self)] = replica
    replica.__dict__.update(copy.deepcopy(self.__dict__, memo))
    return replica


def _inject_new_class(module: Module) -> None:
    """Make ``module`` an instance of a fresh subclass of its class, on which the
    parametrized names become properties (only this module is affected)."""
    cls = module.__class__
    namespace: dict[str, Any] = {"__setattr__": _parametrized_setattr}
    if not hasattr(cls, "__deepcopy__"):
        namespace["__deepcopy__"] = _parametrized_deepcopy
    module.__class__ = type(f"Parametrized{cls.__name__}", (cls,), namespace)


def _inject_property(module: Module, tensor_name: str) -> None:
    if hasattr(module, tensor_name):
        raise AssertionError(f"Module already has an attribute named '{tensor_name}'")

    def get_parametrized(self: Module) -> Tensor:
        return _parametrized_value(self, tensor_name)

    def set_original(self: Module, value: Tensor) -> None:
        self.parametrizations[tensor_name].right_inverse(value)

    setattr(module.__class__, tensor_name, property(get_parametrized, set_original))


def _check_same(what: str, tensor_name: str, value: Tensor, ref: Tensor) -> None:
    if value.dtype != ref.dtype:
        raise ValueError(f"{what} may not change the dtype of the tensor, unless the "
                         f"`unsafe` flag is enabled.\nmodule.{tensor_name}.dtype: {ref.dtype}"
                         f"\nreturned dtype: {value.dtype}")
    if value.shape != ref.shape:
        raise ValueError(f"{what} may not change the shape of the tensor, unless the "
                         f"`unsafe` flag is enabled.\nmodule.{tensor_name}.shape: {ref.shape}"
                         f"\nreturned shape: {value.shape}")


def register_parametrization(module: Module, tensor_name: str, parametrization: Module, *,
                             unsafe: bool = False) -> Module:
    """Make ``module.<tensor_name>`` the output of ``parametrization`` applied to the
    original tensor (PyTorch's ``register_parametrization``); registering again on the
    same name chains the new parametrization after the others. Unless ``unsafe``, the
    parametrization may not change the tensor's shape or dtype (checked at record time;
    nothing runs). ``right_inverse``, when the parametrization has one, sets the
    original from the current value (and later from assignments)."""
    if not isinstance(module, Module) or not isinstance(parametrization, Module):
        raise TypeError(f"register_parametrization: module and parametrization must be "
                        f"Modules, got {type(module).__name__} and "
                        f"{type(parametrization).__name__}")
    parametrization.train(module.training)
    if is_parametrized(module, tensor_name):
        if not unsafe:
            current = getattr(module, tensor_name)
            value = parametrization(current)
            if not isinstance(value, Tensor):
                raise ValueError(f"A parametrization must return a tensor. Got "
                                 f"{type(value).__name__}.")
            _check_same("Registering a parametrization", tensor_name, value, current)
            if hasattr(parametrization, "right_inverse"):
                try:
                    inverse = parametrization.right_inverse(value)
                except NotImplementedError:
                    pass
                else:
                    if not isinstance(inverse, Tensor):
                        raise ValueError(f"parametrization.right_inverse must return a "
                                         f"tensor. Got: {type(inverse).__name__}")
                    _check_same("The tensor returned by parametrization.right_inverse",
                                tensor_name, inverse, current)
        chain = module.parametrizations[tensor_name]
        chain.append(parametrization)
        chain.unsafe |= unsafe
    elif module._parameters.get(tensor_name) is not None or \
            module._buffers.get(tensor_name) is not None:
        original = getattr(module, tensor_name)
        chain = ParametrizationList([parametrization], original, unsafe=unsafe)
        delattr(module, tensor_name)
        if not is_parametrized(module):
            _inject_new_class(module)
            module.parametrizations = ModuleDict()
        _inject_property(module, tensor_name)
        module.parametrizations[tensor_name] = chain
    else:
        raise ValueError(f"Module '{type(module).__name__}' does not have a parameter, a "
                         f"buffer, or a parametrized element with name '{tensor_name}'")
    return module


def is_parametrized(module: Module, tensor_name: str | None = None) -> bool:
    """Whether ``module`` has a parametrization on ``tensor_name`` (any, if None)."""
    parametrizations = module._modules.get("parametrizations")
    if not isinstance(parametrizations, ModuleDict):
        return False
    if tensor_name is None:
        return len(parametrizations) > 0
    return tensor_name in parametrizations


def remove_parametrizations(module: Module, tensor_name: str,
                            leave_parametrized: bool = True) -> Module:
    """Undo ``register_parametrization`` on ``tensor_name``: the tensor becomes a plain
    parameter (or buffer) again, holding the current parametrized value
    (``leave_parametrized=True``) or the original (only possible when there is one
    original tensor). The original keeps its identity, so an optimizer holding it
    goes on updating the right tensor."""
    if not is_parametrized(module, tensor_name):
        raise ValueError(f"Module {type(module).__name__} does not have a parametrization "
                         f"on {tensor_name}")
    chain = module.parametrizations[tensor_name]
    if chain.is_tensor:
        original = chain.original
        if leave_parametrized:
            with no_grad():
                _set_value(original, getattr(module, tensor_name))
    elif leave_parametrized:
        value = getattr(module, tensor_name)
        original = Parameter(value.detach()) if value.requires_grad else value.detach()
    else:
        raise ValueError("Cannot leave unparametrized (`leave_parametrized=False`) a tensor "
                         "that is parametrized in terms of a sequence of tensors.")
    delattr(module.__class__, tensor_name)
    delattr(module.parametrizations, tensor_name)
    _register_parameter_or_buffer(module, tensor_name, original)
    if not is_parametrized(module):
        delattr(module, "parametrizations")
        module.__class__ = module.__class__.__bases__[0]
    return module


def type_before_parametrizations(module: Module) -> type:
    """The module's class before ``register_parametrization`` replaced it."""
    if is_parametrized(module):
        return module.__class__.__bases__[0]
    return type(module)


__all__ = ["ParametrizationList", "cached", "is_parametrized", "register_parametrization",
           "remove_parametrizations", "type_before_parametrizations"]
