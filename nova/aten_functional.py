"""``torch.constant_pad_nd`` and ``torch.convolution``: ATen's generic forms of
``F.pad(mode='constant')`` and of the ``conv*d`` / ``conv_transpose*d`` family, with
ATen's signatures (every argument of ``convolution`` required and positional-able,
list-valued options given as sequences), mapped onto Nova's ``nn.functional``."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from nova.core import dtypes as dt
from nova.nn import functional as F
from nova.tensor.tensor import Tensor

__all__ = ["constant_pad_nd", "convolution"]


def constant_pad_nd(input: Tensor, pad: Sequence[int], value: Any = 0) -> Tensor:
    """``input`` padded by ``pad`` = (left, right) of the last dimension, then of the one
    before it...; a negative pad crops; new places hold ``value`` (converted to the
    input's dtype, a float truncated for integers, as ATen)."""
    if not isinstance(input, Tensor):
        raise TypeError(f"constant_pad_nd(): argument 'input' (position 1) must be Tensor, "
                        f"not {type(input).__name__}")
    pads = list(pad)
    if len(pads) % 2:
        raise RuntimeError(f"constant_pad_nd: Length of pad must be even but instead it "
                           f"equals {len(pads)}")
    if len(pads) // 2 > input.ndim:
        raise RuntimeError(f"constant_pad_nd: Length of pad should be no more than twice the "
                           f"number of dimensions of the input. Pad length is {len(pads)} "
                           f"while the input has {input.ndim} dimensions.")
    for k in range(len(pads) // 2):
        size = input.shape[input.ndim - 1 - k]
        new = size + pads[2 * k] + pads[2 * k + 1]
        if new < 0:
            raise RuntimeError(f"constant_pad_nd: the padded size of dimension "
                               f"{input.ndim - 1 - k} is {size} + {pads[2 * k]} + "
                               f"{pads[2 * k + 1]} = {new}, which is negative (input of "
                               f"shape {list(input.shape)}, pad {pads})")
    if input.dtype.category == dt.INT:
        value = int(value)
    return F.pad(input, pads, "constant", value)


def _param(name: str, position: int, value: Any, n: int) -> tuple[int, ...]:
    """A list option of ``convolution`` as ``n`` ints (one value stands for all)."""
    if not isinstance(value, (tuple, list)):
        raise TypeError(f"convolution(): argument '{name}' (position {position}) must be "
                        f"tuple of ints, not {type(value).__name__}")
    if len(value) == 1:
        value = tuple(value) * n
    if len(value) != n:
        raise RuntimeError(f"convolution: expected {name} to be a single integer value or a "
                           f"list of {n} values to match the convolution dimensions, but "
                           f"got {name}={list(value)}")
    return tuple(int(v) for v in value)


def convolution(input: Tensor, weight: Tensor, bias: Tensor | None, stride: Sequence[int],
                padding: Sequence[int], dilation: Sequence[int], transposed: bool,
                output_padding: Sequence[int], groups: int) -> Tensor:
    """``torch.convolution``: the 1-, 2- or 3-d convolution (``transposed``: transposed
    convolution) that ``weight``'s dimensionality names, input batched ``(N, C, ...)``.
    ``output_padding`` is read by transposed convolutions only, as ATen."""
    if not isinstance(input, Tensor) or not isinstance(weight, Tensor):
        raise TypeError("convolution(): arguments 'input' and 'weight' must be Tensors, got "
                        f"{type(input).__name__} and {type(weight).__name__}")
    n = weight.ndim - 2
    if n not in (1, 2, 3):
        raise RuntimeError(f"convolution: unsupported ConvNd parameters: weight of shape "
                           f"{list(weight.shape)} ({weight.ndim}-d); expected 3-d, 4-d or "
                           "5-d (1, 2 or 3 spatial dimensions)")
    if input.ndim != weight.ndim:
        raise RuntimeError(f"convolution: Expected {weight.ndim}-dimensional input for "
                           f"{weight.ndim}-dimensional weight {list(weight.shape)}, but got "
                           f"{input.ndim}-dimensional input of size {list(input.shape)} "
                           "instead")
    stride = _param("stride", 4, stride, n)
    padding = _param("padding", 5, padding, n)
    dilation = _param("dilation", 6, dilation, n)
    output_padding = _param("output_padding", 8, output_padding, n)
    if transposed:
        fn = (F.conv_transpose1d, F.conv_transpose2d, F.conv_transpose3d)[n - 1]
        return fn(input, weight, bias, stride, padding, output_padding, groups, dilation)
    fn = (F.conv1d, F.conv2d, F.conv3d)[n - 1]
    return fn(input, weight, bias, stride, padding, dilation, groups)
