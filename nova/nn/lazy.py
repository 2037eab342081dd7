"""Lazy modules (``torch.nn.modules.lazy``): ``LazyLinear`` and ``LazyConv1d/2d/3d``
take their input size (``in_features``, ``in_channels``) from the first input.

Until that first call their parameters are ``UninitializedParameter``s: they have a
dtype, a device and ``requires_grad`` (so ``model.to(...)``, ``model.double()``,
``requires_grad_`` and building an optimizer work, as in PyTorch) but no shape, and
reading their shape or values, or computing with them, raises PyTorch's error. The
first call materializes them in place (the same objects: an optimizer built before
holds them), initializes them as ``Linear``/``ConvNd`` do (the same draws from the
default generator, so under one ``nv.manual_seed`` a lazy layer gets the values the
eager one would), and the module becomes a plain ``Linear``/``ConvNd``
(``cls_to_become``).

Deviations: before the first call ``state_dict()`` holds empty tensors for the
uninitialized parameters (PyTorch holds the ``UninitializedParameter``s), and
``load_state_dict`` does not materialize them from the checkpoint's shapes (PyTorch
does, through a load hook): it raises the uninitialized-shape error; run one forward
first.
"""
from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from typing import Any

from nova.nn import init
from nova.nn.conv_layers import Conv1d, Conv2d, Conv3d
from nova.nn.layers import Linear
from nova.nn.module import Module
from nova.nn.parameter import Parameter
from nova.tensor.creation import zeros
from nova.tensor.tensor import Tensor

__all__ = ["LazyConv1d", "LazyConv2d", "LazyConv3d", "LazyLinear", "LazyModuleMixin",
           "UninitializedParameter"]


class UninitializedParameterError(ValueError, RuntimeError):
    """Using an ``UninitializedParameter``: a ValueError, as PyTorch raises for ops on
    one, and a RuntimeError, as it raises for reading its shape."""


# What an uninitialized parameter answers: what moving, freezing and collecting
# parameters read (``Module.to``, ``requires_grad_``, ``zero_grad``, optimizers), and
# ``materialize``. Private names (the Tensor's own plumbing) pass too.
_USABLE = frozenset({"cls_to_become", "detach", "device", "dtype", "grad", "grad_fn",
                     "is_cuda", "is_leaf", "materialize", "node", "requires_grad",
                     "requires_grad_"})


class UninitializedParameter(Parameter):
    """A parameter whose shape is not known yet (``torch.nn.UninitializedParameter``):
    a lazy module's until its first call, when ``materialize`` gives it a shape and
    turns it into a plain ``Parameter`` (``cls_to_become``), keeping its identity."""

    __slots__ = ()
    cls_to_become = Parameter

    def __new__(cls, requires_grad: bool = True, device: Any = None,
                dtype: Any = None) -> UninitializedParameter:
        # an empty value holds the dtype and device (moved and cast as any parameter)
        return super().__new__(cls, zeros(0, dtype=dtype, device=device), requires_grad)

    def __init__(self, requires_grad: bool = True, device: Any = None, dtype: Any = None):
        """All set up by ``__new__``."""

    def __getattribute__(self, name: str) -> Any:
        if name.startswith("_") or name in _USABLE:
            return object.__getattribute__(self, name)
        if name == "shape":
            raise UninitializedParameterError(
                "Can't access the shape of an uninitialized parameter. This error usually "
                "happens when a lazy module is used before its first forward (or in "
                "load_state_dict); call `forward` with a dummy batch to initialize the "
                "parameters first")
        raise UninitializedParameterError(
            f"Attempted to use an uninitialized parameter in {name}. This error happens "
            f"when you are using a LazyModule or explicitly manipulating "
            f"UninitializedParameter objects. When using LazyModules call `forward` with a "
            f"dummy batch to initialize the parameters before calling nova functions")

    def materialize(self, shape: int | Sequence[int], device: Any = None,
                    dtype: Any = None) -> None:
        """Give this parameter ``shape`` (values zero until its module initializes
        them), of ``dtype`` on ``device`` (default: its own), and make it a
        ``cls_to_become``, in place."""
        shape = (shape,) if isinstance(shape, int) else tuple(shape)
        self.data = zeros(*shape, dtype=self.dtype if dtype is None else dtype,
                          device=self.device if device is None else device)
        self.__class__ = self.cls_to_become

    def __repr__(self) -> str:
        return "<UninitializedParameter>"

    def __deepcopy__(self, memo: dict) -> UninitializedParameter:
        if id(self) in memo:
            return memo[id(self)]
        new = UninitializedParameter(self.requires_grad, self.device, self.dtype)
        memo[id(self)] = new
        return new


class LazyModuleMixin:
    """A module whose parameters are ``UninitializedParameter``s until its first call,
    which runs ``initialize_parameters(*args, **kwargs)`` (defined by the module: it
    materializes and initializes them from the input) before ``forward``, then turns
    the module into a ``cls_to_become`` if one is set. Put it first in the bases:
    ``class MyLazy(LazyModuleMixin, Module)``."""

    cls_to_become: type[Module] | None = None

    def has_uninitialized_params(self) -> bool:
        """Whether one of this module's own parameters is still uninitialized."""
        return any(isinstance(p, UninitializedParameter)
                   for p in self._parameters.values())

    def initialize_parameters(self, *args: Any, **kwargs: Any) -> None:
        raise NotImplementedError(f"{type(self).__name__} must define "
                                  "initialize_parameters(input)")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        # (PyTorch runs this as a forward pre-hook registered first, so it sees the
        # call's own arguments, before any pre-hook of the user's)
        if self.has_uninitialized_params():
            self.initialize_parameters(*args, **kwargs)
            if self.has_uninitialized_params():
                raise RuntimeError(f"module {type(self).__name__} has not been fully "
                                   "initialized by initialize_parameters")
            if self.cls_to_become is not None:
                self.__class__ = self.cls_to_become
        return Module.__call__(self, *args, **kwargs)


def _reset_parameters(weight: Parameter, bias: Parameter | None) -> None:
    """``Linear``'s and ``ConvNd``'s initialization, in place: kaiming-uniform weight
    with a = sqrt(5), the bias uniform in +-1/sqrt(fan_in) (the same draws in the same
    order as their constructors)."""
    init.kaiming_uniform_(weight, a=math.sqrt(5))
    if bias is not None:
        fan_in = math.prod(weight.shape[1:])
        bound = 1.0 / math.sqrt(fan_in) if fan_in else 0.0
        init.uniform_(bias, -bound, bound)


def _lazy_parameters(module: Module, bias: bool, device: Any, dtype: Any) -> None:
    """``weight`` and (with ``bias``) ``bias`` as uninitialized parameters."""
    module.weight = UninitializedParameter(device=device, dtype=dtype)
    if bias:
        module.bias = UninitializedParameter(device=device, dtype=dtype)
    else:
        module.register_parameter("bias", None)


def _quietly(build: Any, *args: Any) -> None:
    """Run the eager constructor with zero sizes (its checks and attributes, no draws:
    init leaves zero-element tensors alone) without its zero-element warning."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "Initializing zero-element tensors")
        build(*args)


class LazyLinear(LazyModuleMixin, Linear):
    """``Linear`` with ``in_features`` taken from the first input's last dimension
    (``torch.nn.LazyLinear``); a ``Linear`` after that call."""

    cls_to_become = Linear

    def __init__(self, out_features: int, bias: bool = True, device: Any = None,
                 dtype: Any = None):
        _quietly(Linear.__init__, self, 0, 0, False)
        self.out_features = out_features
        _lazy_parameters(self, bias, device, dtype)

    def reset_parameters(self) -> None:
        """``Linear``'s initialization (once the parameters have a shape)."""
        if not self.has_uninitialized_params() and self.in_features != 0:
            _reset_parameters(self.weight, self.bias)

    def initialize_parameters(self, input: Tensor) -> None:
        if not self.has_uninitialized_params():
            return
        if len(input.shape) == 0:
            raise RuntimeError("LazyLinear: cannot infer in_features from a 0-d input; "
                               "expected a tensor of shape (*, in_features)")
        self.in_features = input.shape[-1]
        self.weight.materialize((self.out_features, self.in_features))
        if self.bias is not None:
            self.bias.materialize((self.out_features,))
        self.reset_parameters()


class _LazyConvMixin(LazyModuleMixin):
    """``in_channels`` from the first input: dimension 1 of a batched input, 0 of an
    unbatched one (``torch.nn.modules.conv._LazyConvXdMixin``)."""

    def _lazy_init(self, eager: type, out_channels: int, kernel_size: Any, stride: Any,
                   padding: Any, dilation: Any, groups: int, bias: bool, padding_mode: str,
                   device: Any, dtype: Any) -> None:
        if groups < 1 or out_channels % groups:
            raise ValueError(f"{type(self).__name__}: out_channels ({out_channels}) must be "
                             f"divisible by groups ({groups})")
        _quietly(eager.__init__, self, 0, 0, kernel_size, stride, padding, dilation, groups,
                 False, padding_mode, device, dtype)
        self.out_channels = out_channels
        _lazy_parameters(self, bias, device, dtype)

    def reset_parameters(self) -> None:
        """``ConvNd``'s initialization (once the parameters have a shape)."""
        if not self.has_uninitialized_params() and self.in_channels != 0:
            _reset_parameters(self.weight, self.bias)

    def initialize_parameters(self, input: Tensor) -> None:
        if not self.has_uninitialized_params():
            return
        name, nd = type(self).__name__, self._nd
        if len(input.shape) not in (nd + 1, nd + 2):
            raise RuntimeError(f"Expected {nd + 1}D (unbatched) or {nd + 2}D (batched) input "
                               f"to {name}, but got input of size: {tuple(input.shape)}")
        channels = input.shape[1] if len(input.shape) == nd + 2 else input.shape[0]
        if channels % self.groups:
            raise ValueError(f"{name}: in_channels ({channels}) must be divisible by groups "
                             f"({self.groups})")
        self.in_channels = channels
        self.weight.materialize((self.out_channels, channels // self.groups,
                                 *self.kernel_size))
        if self.bias is not None:
            self.bias.materialize((self.out_channels,))
        self.reset_parameters()


class LazyConv1d(_LazyConvMixin, Conv1d):
    """``Conv1d`` with ``in_channels`` taken from the first input
    (``torch.nn.LazyConv1d``); a ``Conv1d`` after that call."""

    cls_to_become = Conv1d

    def __init__(self, out_channels: int, kernel_size: Any, stride: Any = 1,
                 padding: Any = 0, dilation: Any = 1, groups: int = 1, bias: bool = True,
                 padding_mode: str = "zeros", device: Any = None, dtype: Any = None):
        self._lazy_init(Conv1d, out_channels, kernel_size, stride, padding, dilation, groups,
                        bias, padding_mode, device, dtype)


class LazyConv2d(_LazyConvMixin, Conv2d):
    """``Conv2d`` with ``in_channels`` taken from the first input
    (``torch.nn.LazyConv2d``); a ``Conv2d`` after that call."""

    cls_to_become = Conv2d

    def __init__(self, out_channels: int, kernel_size: Any, stride: Any = 1,
                 padding: Any = 0, dilation: Any = 1, groups: int = 1, bias: bool = True,
                 padding_mode: str = "zeros", device: Any = None, dtype: Any = None):
        self._lazy_init(Conv2d, out_channels, kernel_size, stride, padding, dilation, groups,
                        bias, padding_mode, device, dtype)


class LazyConv3d(_LazyConvMixin, Conv3d):
    """``Conv3d`` with ``in_channels`` taken from the first input
    (``torch.nn.LazyConv3d``); a ``Conv3d`` after that call."""

    cls_to_become = Conv3d

    def __init__(self, out_channels: int, kernel_size: Any, stride: Any = 1,
                 padding: Any = 0, dilation: Any = 1, groups: int = 1, bias: bool = True,
                 padding_mode: str = "zeros", device: Any = None, dtype: Any = None):
        self._lazy_init(Conv3d, out_channels, kernel_size, stride, padding, dilation, groups,
                        bias, padding_mode, device, dtype)
