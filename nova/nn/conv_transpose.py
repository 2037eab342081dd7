"""Transposed convolutions: ``F.conv_transpose1d/2d/3d`` and ``ConvTranspose1d/2d/3d``,
PyTorch's semantics (weight ``(in_channels, out_channels/groups, *kernel)``, output size
``(in - 1) stride - 2 padding + dilation (kernel - 1) + output_padding + 1``).

A transposed convolution is the gradient of a convolution with respect to its input,
written forward: the input spread out by ``stride`` (``stride - 1`` zeros between
neighbours), padded by ``dilation (kernel - 1) - padding`` on each side (and
``output_padding`` more at the end; a negative pad crops), then convolved at stride 1
with the kernel flipped and its two channel dims swapped per group. So it is
``F.conv*d``'s im2col and matmul, fused and differentiated like it; the zeros cost
``stride^nd`` times the products a scatter formulation would compute, which keeps one
code path for both directions of every convolution.
"""
from __future__ import annotations

from typing import Any

from nova.core import dtypes as dt
from nova.nn import convolution as C
from nova.nn.conv_layers import init_conv_parameters
from nova.nn.functional import pad
from nova.nn.module import Module
from nova.nn.windows import as_tuple, batched
from nova.tensor import movement, numeric
from nova.tensor.autocast_state import biased_product, lowered
from nova.tensor.creation import zeros
from nova.tensor.tensor import Tensor

_CONV = {1: C.conv1d, 2: C.conv2d, 3: C.conv3d}


def _spread(x: Tensor, stride: tuple[int, ...]) -> Tensor:
    """``x`` with ``s - 1`` zeros between neighbours along each spatial dim (``s`` its
    stride): size ``(n - 1) s + 1``."""
    nd = len(stride)
    for k, s in enumerate(stride):
        if s == 1:
            continue
        d = x.ndim - nd + k
        n = x.shape[d]
        if n == 0:
            continue
        gap = list(x.shape)
        gap.insert(d + 1, s - 1)
        spaced = movement.cat([movement.unsqueeze(x, d + 1),
                               zeros(gap, dtype=x.dtype, device=x.device)], d + 1)
        shape = list(x.shape)
        shape[d] = n * s
        x = movement.narrow(movement.reshape(spaced, shape), d, 0, (n - 1) * s + 1)
    return x


def _conv_transpose(op: str, nd: int, input: Tensor, weight: Tensor, bias: Tensor | None,
                    stride: Any, padding: Any, output_padding: Any, groups: int,
                    dilation: Any) -> Tensor:
    x, unbatched = batched(op, input, nd)
    if not isinstance(weight, Tensor) or weight.ndim != nd + 2:
        raise ValueError(f"{op}: weight must be a {nd + 2}-D tensor (in_channels, "
                         f"out_channels/groups, *kernel), got "
                         f"{getattr(weight, 'shape', type(weight).__name__)}")
    if not isinstance(groups, int) or isinstance(groups, bool) or groups < 1:
        raise ValueError(f"{op}: groups must be a positive int, got {groups!r}")
    stride = as_tuple(op, "stride", stride, nd, 1)
    dilation = as_tuple(op, "dilation", dilation, nd, 1)
    padding = as_tuple(op, "padding", padding, nd, 0)
    output_padding = as_tuple(op, "output_padding", output_padding, nd, 0)
    for op_, s, d in zip(output_padding, stride, dilation):
        if op_ >= max(s, d):
            raise ValueError(f"{op}: output_padding {output_padding} must be smaller than "
                             f"either stride {stride} or dilation {dilation}")
    c_in, c_out_g = weight.shape[:2]
    if x.shape[1] != c_in or c_in % groups:
        raise ValueError(f"{op}: input {x.shape} has {x.shape[1]} channels but weight "
                         f"{weight.shape} expects {c_in} (divisible by groups={groups})")
    kernel = weight.shape[2:]
    out_size = [(n - 1) * s - 2 * p + d * (k - 1) + o + 1 for n, s, p, d, k, o in
                zip(x.shape[2:], stride, padding, dilation, kernel, output_padding)]
    if any(v <= 0 for v in out_size):
        raise ValueError(f"{op}: input {x.shape} with kernel {tuple(kernel)}, stride "
                         f"{stride}, padding {padding} gives an empty output {out_size}")
    # (C_in, C_out/G, *k) -> (G, C_out/G, C_in/G, *k) -> (C_out, C_in/G, *k), flipped
    w = movement.reshape(weight, (groups, c_in // groups, c_out_g) + tuple(kernel))
    w = movement.reshape(movement.transpose(w, 1, 2), (groups * c_out_g, c_in // groups)
                         + tuple(kernel))
    w = numeric.flip(w, list(range(2, nd + 2)))
    spread = _spread(x, stride)
    widths = []
    for p, d, k, o in reversed(list(zip(padding, dilation, kernel, output_padding))):
        edge = d * (k - 1) - p
        widths += [edge, edge + o]
    x = pad(spread, tuple(widths))

    def product(x: Tensor, w: Tensor) -> Tensor:
        return _CONV[nd](x, w, None, 1, 0, dilation, groups)
    if bias is None:
        out = product(x, w)
    else:
        if bias.shape != (groups * c_out_g,):
            raise ValueError(f"{op}: bias must have shape ({groups * c_out_g},), got "
                             f"{bias.shape}")
        # Under autocast the bias joins the product's precision (PyTorch casts every
        # argument). PyTorch's CPU kernels sum a bfloat16 product and its bias in
        # float32 and round once, but round a float16 product before adding its bias.
        x, w = lowered(x), lowered(w)
        out = biased_product(product, (x, w),
                             movement.reshape(lowered(bias), (-1,) + (1,) * nd),
                             halves=(dt.bfloat16,))
    return movement.squeeze(out, 0) if unbatched else out


def conv_transpose1d(input: Tensor, weight: Tensor, bias: Tensor | None = None,
                     stride: Any = 1, padding: Any = 0, output_padding: Any = 0,
                     groups: int = 1, dilation: Any = 1) -> Tensor:
    """``torch.nn.functional.conv_transpose1d``: input ``(N, C, L)`` or ``(C, L)``."""
    return _conv_transpose("conv_transpose1d", 1, input, weight, bias, stride, padding,
                           output_padding, groups, dilation)


def conv_transpose2d(input: Tensor, weight: Tensor, bias: Tensor | None = None,
                     stride: Any = 1, padding: Any = 0, output_padding: Any = 0,
                     groups: int = 1, dilation: Any = 1) -> Tensor:
    """``torch.nn.functional.conv_transpose2d``: input ``(N, C, H, W)`` or ``(C, H, W)``."""
    return _conv_transpose("conv_transpose2d", 2, input, weight, bias, stride, padding,
                           output_padding, groups, dilation)


def conv_transpose3d(input: Tensor, weight: Tensor, bias: Tensor | None = None,
                     stride: Any = 1, padding: Any = 0, output_padding: Any = 0,
                     groups: int = 1, dilation: Any = 1) -> Tensor:
    """``torch.nn.functional.conv_transpose3d``: input ``(N, C, D, H, W)`` or
    ``(C, D, H, W)``."""
    return _conv_transpose("conv_transpose3d", 3, input, weight, bias, stride, padding,
                           output_padding, groups, dilation)


class _ConvTransposeNd(Module):
    _nd = 0

    def __init__(self, in_channels: int, out_channels: int, kernel_size: Any,
                 stride: Any = 1, padding: Any = 0, output_padding: Any = 0,
                 groups: int = 1, bias: bool = True, dilation: Any = 1,
                 padding_mode: str = "zeros", device: Any = None, dtype: Any = None):
        super().__init__()
        name, nd = type(self).__name__, self._nd
        if groups < 1 or in_channels % groups or out_channels % groups:
            raise ValueError(f"{name}: in_channels ({in_channels}) and out_channels "
                             f"({out_channels}) must be divisible by groups ({groups})")
        if padding_mode != "zeros":
            raise ValueError(f"{name}: only 'zeros' padding mode is supported (as in "
                             f"PyTorch), got {padding_mode!r}")
        self.in_channels, self.out_channels, self.groups = in_channels, out_channels, groups
        self.kernel_size = as_tuple(name, "kernel_size", kernel_size, nd, 1)
        self.stride = as_tuple(name, "stride", stride, nd, 1)
        self.padding = as_tuple(name, "padding", padding, nd, 0)
        self.output_padding = as_tuple(name, "output_padding", output_padding, nd, 0)
        self.dilation = as_tuple(name, "dilation", dilation, nd, 1)
        self.padding_mode = padding_mode
        init_conv_parameters(self, (in_channels, out_channels // groups, *self.kernel_size),
                             bias, dtype, device)

    def _output_padding(self, x: Tensor, output_size: Any) -> tuple[int, ...]:
        """``output_padding``, or what makes the output ``output_size`` (its last
        ``nd`` entries), as PyTorch's forward accepts."""
        if output_size is None:
            return self.output_padding
        nd = self._nd
        want = tuple(output_size)[-nd:]
        extra = []
        for k in range(nd):
            base = ((x.shape[x.ndim - nd + k] - 1) * self.stride[k] - 2 * self.padding[k]
                    + self.dilation[k] * (self.kernel_size[k] - 1) + 1)
            e = want[k] - base
            if not 0 <= e < self.stride[k]:     # (PyTorch's range: stride - 1 extra)
                raise ValueError(f"{type(self).__name__}: requested an output size of "
                                 f"{want}, but valid sizes range from {base} to "
                                 f"{base + self.stride[k] - 1} in dim {k}")
            extra.append(e)
        return tuple(extra)

    def forward(self, input: Tensor, output_size: Any = None) -> Tensor:
        return _conv_transpose(type(self).__name__, self._nd, input, self.weight, self.bias,
                               self.stride, self.padding,
                               self._output_padding(input, output_size), self.groups,
                               self.dilation)

    def extra_repr(self) -> str:
        s = (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
             f"stride={self.stride}")
        nd = self._nd
        if self.padding != (0,) * nd:
            s += f", padding={self.padding}"
        if self.dilation != (1,) * nd:
            s += f", dilation={self.dilation}"
        if self.output_padding != (0,) * nd:
            s += f", output_padding={self.output_padding}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        if self.bias is None:
            s += ", bias=False"
        return s


class ConvTranspose1d(_ConvTransposeNd):
    _nd = 1


class ConvTranspose2d(_ConvTransposeNd):
    _nd = 2


class ConvTranspose3d(_ConvTransposeNd):
    _nd = 3


__all__ = ["ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d"]
