"""Lazy modules (``torch.nn.modules.lazy``): ``LazyLinear``, ``LazyConv1d/2d/3d``,
``LazyConvTranspose1d/2d/3d``, ``LazyBatchNorm1d/2d/3d`` and ``LazyInstanceNorm1d/2d/3d``
take their input size (``in_features``, ``in_channels``, ``num_features``) from the
first input.

Until that first call their parameters are ``UninitializedParameter``s (and a lazy
norm's running statistics ``UninitializedBuffer``s): they have a dtype, a device and
``requires_grad`` (so ``model.to(...)``, ``model.double()``, ``requires_grad_`` and
building an optimizer work, as in PyTorch) but no shape, and reading their shape or
values, or computing with them, raises PyTorch's error. The first call materializes
them in place (the same objects: an optimizer built before holds them), initializes
them as the eager module does (the same draws from the default generator, so under one
``nv.manual_seed`` a lazy layer gets the values the eager one would), and the module
becomes its eager class (``cls_to_become``).

``load_state_dict`` before the first call materializes them from the checkpoint, as
PyTorch's load hook (``_lazy_load_hook``) does: a module saved initialized or not loads
into one initialized or not. The module stays lazy until its first call, which then
only turns it into its eager class.

Deviations: before the first call ``state_dict()`` holds empty tensors of shape
``(0,)`` for the uninitialized parameters (PyTorch holds the
``UninitializedParameter``s); ``load_state_dict`` takes such an entry as an
uninitialized one. The built-in lazy modules take the inferred size
(``in_features``, ``in_channels``, ``num_features``) from the checkpoint and
materialize every uninitialized tensor with the shape the first call would give it (a
custom ``LazyModuleMixin`` module follows PyTorch's rule: each tensor with an entry
takes the entry's shape), so an entry whose shape disagrees with the constructor's
arguments is a size mismatch (PyTorch materializes each tensor with its entry's shape,
whatever it is, and leaves the size 0: a lazy convolution or norm keeps it, and a
loaded ``LazyInstanceNorm`` then fails its first call); a tensor the checkpoint lacks
(``strict=False``) is initialized as the first call would (PyTorch leaves it
uninitialized). A materialized ``UninitializedBuffer`` is an ``nn.Buffer`` (PyTorch's
becomes a plain tensor; Nova's cannot drop the subclass's slot). A lazy instance norm
takes ``num_features`` from the channel dim of an unbatched input too (PyTorch reads
dim 1, the length, and then fails).
"""
from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

from nova.core import dtypes as dt
from nova.nn import init
from nova.nn.conv_layers import Conv1d, Conv2d, Conv3d
from nova.nn.conv_transpose import ConvTranspose1d, ConvTranspose2d, ConvTranspose3d
from nova.nn.layers import Linear
from nova.nn.module import Module
from nova.nn.more_modules import Buffer
from nova.nn.normalization import (
    BatchNorm1d, BatchNorm2d, BatchNorm3d, InstanceNorm1d, InstanceNorm2d, InstanceNorm3d,
)
from nova.nn.parameter import Parameter
from nova.tensor.creation import tensor, zeros
from nova.tensor.tensor import Tensor

__all__ = ["LazyBatchNorm1d", "LazyBatchNorm2d", "LazyBatchNorm3d", "LazyConv1d",
           "LazyConv2d", "LazyConv3d", "LazyConvTranspose1d", "LazyConvTranspose2d",
           "LazyConvTranspose3d", "LazyInstanceNorm1d", "LazyInstanceNorm2d",
           "LazyInstanceNorm3d", "LazyLinear", "LazyModuleMixin", "UninitializedBuffer",
           "UninitializedParameter"]


class UninitializedParameterError(ValueError, RuntimeError):
    """Using an ``UninitializedParameter``: a ValueError, as PyTorch raises for ops on
    one, and a RuntimeError, as it raises for reading its shape."""


# What an uninitialized parameter or buffer answers: what moving, freezing and
# collecting them read (``Module.to``, ``requires_grad_``, ``zero_grad``, optimizers,
# buffer registration), and ``materialize``. Private names (the Tensor's own plumbing)
# pass too.
_USABLE = frozenset({"cls_to_become", "detach", "device", "dtype", "grad", "grad_fn",
                     "is_cuda", "is_leaf", "materialize", "node", "persistent",
                     "requires_grad", "requires_grad_"})


class _UninitializedTensor:
    """What ``UninitializedParameter`` and ``UninitializedBuffer`` share
    (``torch.nn.parameter.UninitializedTensorMixin``): a tensor without a shape until
    ``materialize``, which refuses everything else."""

    __slots__ = ()
    cls_to_become: type

    def __getattribute__(self, name: str) -> Any:
        if name.startswith("_") or name in _USABLE:
            return object.__getattribute__(self, name)
        if name == "shape":
            raise UninitializedParameterError(
                "Can't access the shape of an uninitialized parameter or buffer. This error "
                "usually happens when a lazy module is used before its first forward (or "
                "in load_state_dict); call `forward` with a dummy batch to initialize the "
                "parameters first")
        raise UninitializedParameterError(
            f"Attempted to use an uninitialized parameter in {name}. This error happens "
            f"when you are using a LazyModule or explicitly manipulating "
            f"{type(self).__name__} objects. When using LazyModules call `forward` with a "
            f"dummy batch to initialize the parameters before calling nova functions")

    def materialize(self, shape: int | Sequence[int], device: Any = None,
                    dtype: Any = None) -> None:
        """Give this tensor ``shape`` (values zero until its module initializes them),
        of ``dtype`` on ``device`` (default: its own), and make it a
        ``cls_to_become``, in place."""
        shape = (shape,) if isinstance(shape, int) else tuple(shape)
        self.data = zeros(*shape, dtype=self.dtype if dtype is None else dtype,
                          device=self.device if device is None else device)
        self.__class__ = self.cls_to_become

    def __repr__(self) -> str:
        return f"<{type(self).__name__}>"


class UninitializedParameter(_UninitializedTensor, Parameter):
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

    def __deepcopy__(self, memo: dict) -> UninitializedParameter:
        if id(self) in memo:
            return memo[id(self)]
        new = UninitializedParameter(self.requires_grad, self.device, self.dtype)
        memo[id(self)] = new
        return new


class UninitializedBuffer(_UninitializedTensor, Buffer):
    """A buffer whose shape is not known yet (``torch.nn.UninitializedBuffer``): an
    ``nn.Buffer``, so assigning it to a module attribute registers it (persistent as
    given); ``materialize`` turns it into a plain ``nn.Buffer``."""

    __slots__ = ()
    cls_to_become = Buffer

    def __new__(cls, requires_grad: bool = False, device: Any = None, dtype: Any = None,
                persistent: bool = True) -> UninitializedBuffer:
        b = super().__new__(cls, zeros(0, dtype=dtype, device=device), persistent=persistent)
        if requires_grad:
            b.requires_grad_()
        return b

    def __init__(self, requires_grad: bool = False, device: Any = None, dtype: Any = None,
                 persistent: bool = True):
        """All set up by ``__new__``."""

    def __deepcopy__(self, memo: dict) -> UninitializedBuffer:
        if id(self) in memo:
            return memo[id(self)]
        new = UninitializedBuffer(self.requires_grad, self.device, self.dtype,
                                  self.persistent)
        memo[id(self)] = new
        return new


class LazyModuleMixin:
    """A module whose parameters (and buffers) are ``UninitializedParameter``s
    (``UninitializedBuffer``s) until its first call, which runs
    ``initialize_parameters(*args, **kwargs)`` (defined by the module: it materializes
    and initializes them from the input) before ``forward``, then turns the module into
    a ``cls_to_become`` if one is set (on the first call even when nothing was left to
    initialize, as PyTorch's). Put it first in the bases: ``class MyLazy(LazyModuleMixin,
    Module)``."""

    cls_to_become: type[Module] | None = None

    def has_uninitialized_params(self) -> bool:
        """Whether one of this module's own parameters or buffers is still
        uninitialized."""
        return any(isinstance(p, UninitializedParameter)
                   for p in self._parameters.values()) or \
            any(isinstance(b, UninitializedBuffer) for b in self._buffers.values())

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

    def _uninitialized_names(self) -> list[str]:
        """This module's own parameters and buffers that are still uninitialized."""
        return [name for name, t in (*self._parameters.items(), *self._buffers.items())
                if isinstance(t, _UninitializedTensor)]

    def _load_from_state_dict(self, state_dict: dict[str, Any], prefix: str,
                              local_metadata: dict[str, Any], strict: bool,
                              missing_keys: list[str], unexpected_keys: list[str],
                              error_msgs: list[str]) -> None:
        """Run ``_lazy_load_hook`` first (PyTorch registers it as the first load
        pre-hook, and removes it at the first call, when this module becomes its eager
        class here); a tensor it leaves uninitialized loads nothing from an
        uninitialized entry and is not reported missing for it, as in PyTorch."""
        if self.has_uninitialized_params():
            self._lazy_load_hook(state_dict, prefix, local_metadata, strict, missing_keys,
                                 unexpected_keys, error_msgs)
        skipped = [prefix + name for name in self._uninitialized_names()
                   if prefix + name in state_dict]
        for key in skipped:
            del state_dict[key]
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict,
                                      missing_keys, unexpected_keys, error_msgs)
        if skipped:
            missing_keys[:] = [key for key in missing_keys if key not in skipped]

    def _lazy_load_hook(self, state_dict: dict[str, Any], prefix: str,
                        local_metadata: dict[str, Any], strict: bool,
                        missing_keys: list[str], unexpected_keys: list[str],
                        error_msgs: list[str]) -> None:
        """Materialize the uninitialized tensors that the checkpoint has an initialized
        entry for (PyTorch's ``_lazy_load_hook``), through
        ``_materialize_from_checkpoint``; a ValueError it raises goes to
        ``error_msgs``, those tensors left uninitialized."""
        names = self._uninitialized_names()
        shapes = {name: _entry_shape(state_dict[prefix + name]) for name in names
                  if prefix + name in state_dict
                  and not _is_uninitialized_entry(state_dict[prefix + name])}
        if not shapes:
            return
        try:
            self._materialize_from_checkpoint(shapes, names)
        except ValueError as e:
            error_msgs.append(f"{type(self).__name__} ({prefix or 'the root module'}): "
                              f"cannot materialize its uninitialized parameters from the "
                              f"checkpoint: {e}")

    def _materialize_from_checkpoint(self, shapes: dict[str, tuple[int, ...]],
                                     names: list[str]) -> None:
        """PyTorch's rule for any lazy module: each uninitialized tensor with an
        entry (``shapes``, by name) takes the entry's shape; the others (of
        ``names``) stay uninitialized until the first call."""
        for name, shape in shapes.items():
            target = self._parameters.get(name)
            _materialize_if_lazy(target if target is not None else self._buffers[name], shape)


class _InferredSizeMixin(LazyModuleMixin):
    """The built-in lazy modules, which infer one size (``in_features``,
    ``in_channels``, ``num_features``) that gives every tensor its shape: loading
    infers it from the checkpoint as the first call does from the input."""

    def _materialize_from_checkpoint(self, shapes: dict[str, tuple[int, ...]],
                                     names: list[str]) -> None:
        """Every uninitialized tensor takes the shape the size read from the entries
        gives it (so a mis-shaped entry is a size mismatch as it loads); when the
        checkpoint lacks one, they are all initialized as the first call would, before
        the entries load over them."""
        self._materialize(self._size_from_checkpoint(shapes))
        if any(name not in shapes for name in names):
            self._initialize_values()

    def _size_from_checkpoint(self, shapes: dict[str, tuple[int, ...]]) -> int:
        """The size ``initialize_parameters`` infers from the input, read from the
        shapes of the checkpoint's entries for the uninitialized tensors (by name); a
        ValueError says why it cannot be."""
        raise NotImplementedError(f"{type(self).__name__} must define "
                                  "_size_from_checkpoint(shapes)")

    def _materialize(self, size: int) -> None:
        """Give every uninitialized tensor the shape ``size`` implies (and set the
        size attribute)."""
        raise NotImplementedError(f"{type(self).__name__} must define _materialize(size)")

    def _initialize_values(self) -> None:
        """Initialize the materialized tensors as the eager constructor does."""
        raise NotImplementedError(f"{type(self).__name__} must define _initialize_values()")


def _is_uninitialized_entry(value: Any) -> bool:
    """Whether a checkpoint entry stands for an uninitialized tensor: one itself, or the
    empty ``(0,)`` tensor Nova's ``state_dict`` saves for one."""
    return isinstance(value, _UninitializedTensor) or \
        (isinstance(value, Tensor) and tuple(value.shape) == (0,))


def _entry_shape(value: Any) -> tuple[int, ...]:
    """The shape of a checkpoint entry (a tensor, an array or a number)."""
    return tuple(value.shape) if isinstance(value, Tensor) else tuple(np.shape(value))


def _materialize_if_lazy(t: Any, shape: tuple[int, ...]) -> None:
    """Materialize ``t`` when it is still uninitialized."""
    if isinstance(t, _UninitializedTensor):
        t.materialize(shape)


def _weight_shape_of(shapes: dict[str, tuple[int, ...]], ndim: int,
                     layout: str) -> tuple[int, ...]:
    """The checkpoint's ``weight`` shape, which must have ``ndim`` dims (``layout``
    names them for the message)."""
    if "weight" not in shapes:
        raise ValueError(f"it has no initialized 'weight' entry to infer the input size "
                         f"from (only {sorted(shapes)})")
    shape = shapes["weight"]
    if len(shape) != ndim:
        raise ValueError(f"its 'weight' entry has shape {shape}, expected {ndim} dims "
                         f"{layout}")
    return shape


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


class LazyLinear(_InferredSizeMixin, Linear):
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
        self._materialize(input.shape[-1])
        self._initialize_values()

    def _size_from_checkpoint(self, shapes: dict[str, tuple[int, ...]]) -> int:
        return _weight_shape_of(shapes, 2, "(out_features, in_features)")[1]

    def _materialize(self, size: int) -> None:
        self.in_features = size
        _materialize_if_lazy(self.weight, (self.out_features, size))
        _materialize_if_lazy(self.bias, (self.out_features,))

    def _initialize_values(self) -> None:
        self.reset_parameters()


class _LazyConvMixin(_InferredSizeMixin):
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
        self._check_groups(channels)
        self._materialize(channels)
        self._initialize_values()

    def _check_groups(self, channels: int) -> None:
        if channels % self.groups:
            raise ValueError(f"{type(self).__name__}: in_channels ({channels}) must be "
                             f"divisible by groups ({self.groups})")

    def _size_from_checkpoint(self, shapes: dict[str, tuple[int, ...]]) -> int:
        weight = _weight_shape_of(shapes, self._nd + 2, self._weight_layout)
        channels = self._in_channels_of(weight)
        self._check_groups(channels)
        return channels

    _weight_layout = "(out_channels, in_channels / groups, *kernel_size)"

    def _in_channels_of(self, weight: tuple[int, ...]) -> int:
        return weight[1] * self.groups

    def _materialize(self, size: int) -> None:
        self.in_channels = size
        _materialize_if_lazy(self.weight, self._weight_shape())
        _materialize_if_lazy(self.bias, (self.out_channels,))

    def _initialize_values(self) -> None:
        self.reset_parameters()

    def _weight_shape(self) -> tuple[int, ...]:
        return (self.out_channels, self.in_channels // self.groups, *self.kernel_size)


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


class _LazyConvTransposeMixin(_LazyConvMixin):
    """``in_channels`` from the first input, for a transposed convolution, whose weight
    is ``(in_channels, out_channels / groups, *kernel_size)``."""

    def _lazy_init_transposed(self, eager: type, out_channels: int, kernel_size: Any,
                              stride: Any, padding: Any, output_padding: Any, groups: int,
                              bias: bool, dilation: Any, padding_mode: str, device: Any,
                              dtype: Any) -> None:
        if groups < 1 or out_channels % groups:
            raise ValueError(f"{type(self).__name__}: out_channels ({out_channels}) must be "
                             f"divisible by groups ({groups})")
        _quietly(eager.__init__, self, 0, 0, kernel_size, stride, padding, output_padding,
                 groups, False, dilation, padding_mode, device, dtype)
        self.out_channels = out_channels
        _lazy_parameters(self, bias, device, dtype)

    _weight_layout = "(in_channels, out_channels / groups, *kernel_size)"

    def _in_channels_of(self, weight: tuple[int, ...]) -> int:
        return weight[0]

    def _weight_shape(self) -> tuple[int, ...]:
        return (self.in_channels, self.out_channels // self.groups, *self.kernel_size)


class LazyConvTranspose1d(_LazyConvTransposeMixin, ConvTranspose1d):
    """``ConvTranspose1d`` with ``in_channels`` taken from the first input
    (``torch.nn.LazyConvTranspose1d``); a ``ConvTranspose1d`` after that call."""

    cls_to_become = ConvTranspose1d

    def __init__(self, out_channels: int, kernel_size: Any, stride: Any = 1,
                 padding: Any = 0, output_padding: Any = 0, groups: int = 1,
                 bias: bool = True, dilation: Any = 1, padding_mode: str = "zeros",
                 device: Any = None, dtype: Any = None):
        self._lazy_init_transposed(ConvTranspose1d, out_channels, kernel_size, stride,
                                   padding, output_padding, groups, bias, dilation,
                                   padding_mode, device, dtype)


class LazyConvTranspose2d(_LazyConvTransposeMixin, ConvTranspose2d):
    """``ConvTranspose2d`` with ``in_channels`` taken from the first input
    (``torch.nn.LazyConvTranspose2d``); a ``ConvTranspose2d`` after that call."""

    cls_to_become = ConvTranspose2d

    def __init__(self, out_channels: int, kernel_size: Any, stride: Any = 1,
                 padding: Any = 0, output_padding: Any = 0, groups: int = 1,
                 bias: bool = True, dilation: Any = 1, padding_mode: str = "zeros",
                 device: Any = None, dtype: Any = None):
        self._lazy_init_transposed(ConvTranspose2d, out_channels, kernel_size, stride,
                                   padding, output_padding, groups, bias, dilation,
                                   padding_mode, device, dtype)


class LazyConvTranspose3d(_LazyConvTransposeMixin, ConvTranspose3d):
    """``ConvTranspose3d`` with ``in_channels`` taken from the first input
    (``torch.nn.LazyConvTranspose3d``); a ``ConvTranspose3d`` after that call."""

    cls_to_become = ConvTranspose3d

    def __init__(self, out_channels: int, kernel_size: Any, stride: Any = 1,
                 padding: Any = 0, output_padding: Any = 0, groups: int = 1,
                 bias: bool = True, dilation: Any = 1, padding_mode: str = "zeros",
                 device: Any = None, dtype: Any = None):
        self._lazy_init_transposed(ConvTranspose3d, out_channels, kernel_size, stride,
                                   padding, output_padding, groups, bias, dilation,
                                   padding_mode, device, dtype)


class _LazyNormMixin(_InferredSizeMixin):
    """``num_features`` from the first input's channel dim
    (``torch.nn.modules.batchnorm._LazyNormBase``), with PyTorch's constructor: the
    eager one's without ``num_features``, and its defaults for every lazy norm,
    instance norms included: ``affine=True``, ``track_running_stats=True``."""

    def __init__(self, eps: float = 1e-5, momentum: float | None = 0.1, affine: bool = True,
                 track_running_stats: bool = True, device: Any = None, dtype: Any = None,
                 *, bias: bool = True) -> None:
        self.cls_to_become.__init__(self, 0, eps, momentum, False, False, dtype)
        self.affine, self.track_running_stats = affine, track_running_stats
        if affine:
            self.weight = UninitializedParameter(device=device, dtype=dtype)
            if bias:
                self.bias = UninitializedParameter(device=device, dtype=dtype)
        if track_running_stats:
            self.running_mean = UninitializedBuffer(device=device, dtype=dtype)
            self.running_var = UninitializedBuffer(device=device, dtype=dtype)
            self.num_batches_tracked = tensor(0, dtype=dt.int64, device=device)

    def _channel_dim(self, input: Tensor) -> int:
        raise NotImplementedError

    def initialize_parameters(self, input: Tensor) -> None:
        if not self.has_uninitialized_params():
            return
        self._materialize(input.shape[self._channel_dim(input)])
        self._initialize_values()

    def _size_from_checkpoint(self, shapes: dict[str, tuple[int, ...]]) -> int:
        name, shape = next(iter(shapes.items()))      # (the others must agree: checked
        if len(shape) != 1:                           # as they load)
            raise ValueError(f"its {name!r} entry has shape {shape}, expected 1 dim "
                             "(num_features,)")
        return shape[0]

    def _materialize(self, size: int) -> None:
        self.num_features = size
        for t in (self.weight, self.bias, self.running_mean, self.running_var):
            _materialize_if_lazy(t, (size,))

    def _initialize_values(self) -> None:
        if self.affine:
            init.ones_(self.weight)
        if self.track_running_stats:
            init.ones_(self.running_var)           # (the mean stays zero, as reset)


class _LazyBatchNormMixin(_LazyNormMixin):
    def _channel_dim(self, input: Tensor) -> int:
        if not isinstance(input, Tensor) or input.ndim not in self._dims:
            raise ValueError(f"{type(self).__name__}: expected a "
                             f"{' or '.join(f'{d}-D' for d in self._dims)} input, got "
                             f"{getattr(input, 'shape', type(input).__name__)}")
        return 1


class _LazyInstanceNormMixin(_LazyNormMixin):
    def _channel_dim(self, input: Tensor) -> int:
        nd = self._spatial
        if not isinstance(input, Tensor) or input.ndim not in (nd + 1, nd + 2):
            raise ValueError(f"{type(self).__name__}: expected a {nd + 1}-D (unbatched) or "
                             f"{nd + 2}-D input, got "
                             f"{getattr(input, 'shape', type(input).__name__)}")
        return input.ndim - nd - 1


class LazyBatchNorm1d(_LazyBatchNormMixin, BatchNorm1d):
    """``BatchNorm1d`` with ``num_features`` taken from the first input's dim 1
    (``torch.nn.LazyBatchNorm1d``); a ``BatchNorm1d`` after that call."""

    cls_to_become = BatchNorm1d


class LazyBatchNorm2d(_LazyBatchNormMixin, BatchNorm2d):
    """``BatchNorm2d`` with ``num_features`` taken from the first input's dim 1
    (``torch.nn.LazyBatchNorm2d``); a ``BatchNorm2d`` after that call."""

    cls_to_become = BatchNorm2d


class LazyBatchNorm3d(_LazyBatchNormMixin, BatchNorm3d):
    """``BatchNorm3d`` with ``num_features`` taken from the first input's dim 1
    (``torch.nn.LazyBatchNorm3d``); a ``BatchNorm3d`` after that call."""

    cls_to_become = BatchNorm3d


class LazyInstanceNorm1d(_LazyInstanceNormMixin, InstanceNorm1d):
    """``InstanceNorm1d`` with ``num_features`` taken from the first input's channel
    dim (``torch.nn.LazyInstanceNorm1d``); an ``InstanceNorm1d`` after that call."""

    cls_to_become = InstanceNorm1d


class LazyInstanceNorm2d(_LazyInstanceNormMixin, InstanceNorm2d):
    """``InstanceNorm2d`` with ``num_features`` taken from the first input's channel
    dim (``torch.nn.LazyInstanceNorm2d``); an ``InstanceNorm2d`` after that call."""

    cls_to_become = InstanceNorm2d


class LazyInstanceNorm3d(_LazyInstanceNormMixin, InstanceNorm3d):
    """``InstanceNorm3d`` with ``num_features`` taken from the first input's channel
    dim (``torch.nn.LazyInstanceNorm3d``); an ``InstanceNorm3d`` after that call."""

    cls_to_become = InstanceNorm3d
