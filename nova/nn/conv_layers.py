"""Convolution and pooling modules: ``Conv1d/2d/3d``, ``MaxPool1d/2d/3d``,
``AvgPool1d/2d/3d``, ``AdaptiveAvgPool1d/2d/3d``, ``AdaptiveMaxPool1d/2d/3d``, with PyTorch's constructor arguments
and initialization (kaiming-uniform weights with ``a=sqrt(5)``, so a bound of
``1/sqrt(fan_in)``, and a uniform bias in the same bound)."""
from __future__ import annotations

import math
from typing import Any

from nova.nn import convolution as C
from nova.nn import init
from nova.nn.functional import pad
from nova.nn.module import Module
from nova.nn.parameter import Parameter
from nova.nn.windows import WindowSpec, as_tuple
from nova.tensor.creation import zeros
from nova.tensor.tensor import Tensor

_PADDING_MODES = ("zeros", "reflect", "replicate", "circular")


def init_conv_parameters(module: Module, weight_shape: tuple[int, ...], bias: bool,
                         dtype: Any, device: Any) -> None:
    """A convolution's ``weight`` of ``weight_shape`` and ``bias`` (of its
    ``out_channels``), initialized as PyTorch's ``reset_parameters``: kaiming-uniform with
    a = sqrt(5), the bias uniform in +-1/sqrt(fan_in), fan_in = ``weight_shape[1]`` times
    the kernel's size (in_channels/groups for a convolution, out_channels/groups for a
    transposed one, whose weight is laid out the other way round)."""
    module.weight = Parameter(zeros(*weight_shape, dtype=dtype, device=device))
    init.kaiming_uniform_(module.weight, a=math.sqrt(5))
    if bias:
        fan_in = math.prod(weight_shape[1:])
        bound = 1.0 / math.sqrt(fan_in) if fan_in else 0.0
        module.bias = Parameter(zeros(module.out_channels, dtype=dtype, device=device))
        init.uniform_(module.bias, -bound, bound)
    else:
        module.register_parameter("bias", None)


class _ConvNd(Module):
    _nd = 0
    _fn: Any = None

    def __init__(self, in_channels: int, out_channels: int, kernel_size: Any, stride: Any = 1,
                 padding: Any = 0, dilation: Any = 1, groups: int = 1, bias: bool = True,
                 padding_mode: str = "zeros", device: Any = None, dtype: Any = None):
        super().__init__()
        name, nd = type(self).__name__, self._nd
        if groups < 1 or in_channels % groups or out_channels % groups:
            raise ValueError(f"{name}: in_channels ({in_channels}) and out_channels "
                             f"({out_channels}) must be divisible by groups ({groups})")
        if padding_mode not in _PADDING_MODES:
            raise ValueError(f"{name}: padding_mode must be one of {_PADDING_MODES}, got "
                             f"{padding_mode!r}")
        self.in_channels, self.out_channels, self.groups = in_channels, out_channels, groups
        self.kernel_size = as_tuple(name, "kernel_size", kernel_size, nd, 1)
        self.stride = as_tuple(name, "stride", stride, nd, 1)
        self.dilation = as_tuple(name, "dilation", dilation, nd, 1)
        if isinstance(padding, str):     # refused here, as PyTorch, not at the first call
            if padding not in ("valid", "same"):
                raise ValueError(f"{name}: padding must be 'valid', 'same', an int or a "
                                 f"tuple of {nd} ints, got {padding!r}")
            if padding == "same" and any(s != 1 for s in self.stride):
                raise ValueError(f"{name}: padding='same' is not supported for strided "
                                 f"convolutions (stride {self.stride})")
        self.padding = padding if isinstance(padding, str) else \
            as_tuple(name, "padding", padding, nd, 0)
        self.padding_mode = padding_mode
        self.transposed, self.output_padding = False, (0,) * nd      # (PyTorch's attributes)
        init_conv_parameters(self, (out_channels, in_channels // groups, *self.kernel_size),
                             bias, dtype, device)

    def forward(self, input: Tensor) -> Tensor:
        padding = self.padding
        if self.padding_mode != "zeros":   # pad explicitly, then convolve unpadded
            spec = WindowSpec.make(type(self).__name__, tuple(input.shape[-self._nd:]),
                                   self.kernel_size, self.stride, padding, self.dilation)
            flat = tuple(v for lo_hi in reversed(list(zip(spec.low, spec.high)))
                         for v in lo_hi)
            input = pad(input, flat, mode=self.padding_mode)
            padding = 0
        return type(self)._fn(input, self.weight, self.bias, self.stride, padding,
                              self.dilation, self.groups)

    def extra_repr(self) -> str:
        s = (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
             f"stride={self.stride}")
        if self.padding != (0,) * self._nd:   # a string ('same', 'valid') too, as PyTorch
            s += f", padding={self.padding}"
        if self.dilation != (1,) * self._nd:
            s += f", dilation={self.dilation}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        if self.bias is None:
            s += ", bias=False"
        if self.padding_mode != "zeros":
            s += f", padding_mode={self.padding_mode}"
        return s


class Conv1d(_ConvNd):
    _nd, _fn = 1, C.conv1d


class Conv2d(_ConvNd):
    _nd, _fn = 2, C.conv2d


class Conv3d(_ConvNd):
    _nd, _fn = 3, C.conv3d


class _MaxPoolNd(Module):
    _fn: Any = None

    def __init__(self, kernel_size: Any, stride: Any = None, padding: Any = 0,
                 dilation: Any = 1, return_indices: bool = False, ceil_mode: bool = False):
        super().__init__()
        self.kernel_size, self.stride, self.padding = kernel_size, stride, padding
        self.dilation, self.return_indices, self.ceil_mode = dilation, return_indices, ceil_mode

    def forward(self, input: Tensor) -> Any:
        return type(self)._fn(input, self.kernel_size, self.stride, self.padding, self.dilation,
                              self.ceil_mode, self.return_indices)

    def extra_repr(self) -> str:
        # PyTorch stores a missing stride as the kernel size, and prints it so
        stride = self.kernel_size if self.stride is None else self.stride
        return (f"kernel_size={self.kernel_size}, stride={stride}, padding={self.padding}, "
                f"dilation={self.dilation}, ceil_mode={self.ceil_mode}")


class MaxPool1d(_MaxPoolNd):
    _fn = C.max_pool1d


class MaxPool2d(_MaxPoolNd):
    _fn = C.max_pool2d


class MaxPool3d(_MaxPoolNd):
    _fn = C.max_pool3d


class _AvgPoolNd(Module):
    _fn: Any = None

    def __init__(self, kernel_size: Any, stride: Any = None, padding: Any = 0,
                 ceil_mode: bool = False, count_include_pad: bool = True,
                 divisor_override: int | None = None):
        super().__init__()
        self.kernel_size, self.stride, self.padding = kernel_size, stride, padding
        self.ceil_mode, self.count_include_pad = ceil_mode, count_include_pad
        self.divisor_override = divisor_override

    def forward(self, input: Tensor) -> Tensor:
        args = (input, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                self.count_include_pad)
        if self.divisor_override is not None:   # AvgPool1d has none, as in PyTorch
            return type(self)._fn(*args, self.divisor_override)
        return type(self)._fn(*args)

    def extra_repr(self) -> str:
        # PyTorch stores a missing stride as the kernel size, and prints it so
        stride = self.kernel_size if self.stride is None else self.stride
        return f"kernel_size={self.kernel_size}, stride={stride}, padding={self.padding}"


class AvgPool1d(_AvgPoolNd):
    _fn = C.avg_pool1d

    def __init__(self, kernel_size: Any, stride: Any = None, padding: Any = 0,
                 ceil_mode: bool = False, count_include_pad: bool = True):
        super().__init__(kernel_size, stride, padding, ceil_mode, count_include_pad)

    def extra_repr(self) -> str:
        # PyTorch's AvgPool1d keeps its sizes as 1-tuples (``_single``), and prints them so
        stride = self.kernel_size if self.stride is None else self.stride
        one = (lambda v: tuple(v) if isinstance(v, (tuple, list)) else (v,))
        return (f"kernel_size={one(self.kernel_size)}, stride={one(stride)}, "
                f"padding={one(self.padding)}")


class AvgPool2d(_AvgPoolNd):
    _fn = C.avg_pool2d


class AvgPool3d(_AvgPoolNd):
    _fn = C.avg_pool3d


class _AdaptiveAvgPoolNd(Module):
    _fn: Any = None

    def __init__(self, output_size: Any):
        super().__init__()
        self.output_size = output_size

    def forward(self, input: Tensor) -> Tensor:
        return type(self)._fn(input, self.output_size)

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}"


class AdaptiveAvgPool1d(_AdaptiveAvgPoolNd):
    _fn = C.adaptive_avg_pool1d


class AdaptiveAvgPool2d(_AdaptiveAvgPoolNd):
    _fn = C.adaptive_avg_pool2d


class AdaptiveAvgPool3d(_AdaptiveAvgPoolNd):
    _fn = C.adaptive_avg_pool3d


class _AdaptiveMaxPoolNd(Module):
    _fn: Any = None

    def __init__(self, output_size: Any, return_indices: bool = False):
        super().__init__()
        self.output_size, self.return_indices = output_size, return_indices

    def forward(self, input: Tensor) -> Any:
        return type(self)._fn(input, self.output_size, self.return_indices)

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}"


class AdaptiveMaxPool1d(_AdaptiveMaxPoolNd):
    _fn = C.adaptive_max_pool1d


class AdaptiveMaxPool2d(_AdaptiveMaxPoolNd):
    _fn = C.adaptive_max_pool2d


class AdaptiveMaxPool3d(_AdaptiveMaxPoolNd):
    _fn = C.adaptive_max_pool3d


__all__ = ["Conv1d", "Conv2d", "Conv3d", "MaxPool1d", "MaxPool2d", "MaxPool3d", "AvgPool1d",
           "AvgPool2d", "AvgPool3d", "AdaptiveAvgPool1d", "AdaptiveAvgPool2d",
           "AdaptiveAvgPool3d", "AdaptiveMaxPool1d", "AdaptiveMaxPool2d", "AdaptiveMaxPool3d"]
