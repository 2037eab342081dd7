"""``F.unfold`` (im2col) and ``F.fold`` (col2im), and the ``Unfold``/``Fold`` modules,
PyTorch's semantics for batched ``(N, C, H, W)`` and unbatched ``(C, H, W)`` images.

``unfold`` is the window stack convolution uses (:func:`nova.nn.windows.window_stack`),
flattened to ``(N, C * kh * kw, L)``: channel-major, kernel offsets in row-major order,
then the ``L`` block positions in row-major order. ``fold`` is its adjoint: every
column entry is added into its pixel of the zero-padded output with one
``scatter_add`` over flat positions computed on the host (overlapping blocks sum), and
the padding is cropped; its gradient is the matching gather, i.e. ``unfold``.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from nova.nn.module import Module
from nova.nn.windows import WindowSpec, as_tuple, batched, window_stack
from nova.tensor import ops
from nova.tensor.constants import constant
from nova.tensor.tensor import Tensor


def unfold(input: Tensor, kernel_size: Any, dilation: Any = 1, padding: Any = 0,
           stride: Any = 1) -> Tensor:
    """The sliding ``kernel_size`` blocks of ``input`` as columns: ``(N, C, H, W)`` ->
    ``(N, C * prod(kernel_size), L)`` (``(C, H, W)`` -> ``(C * prod(kernel_size), L)``)."""
    x, unbatched = batched("unfold", input, 2)
    spec = WindowSpec.make("unfold", tuple(x.shape[2:]), kernel_size, stride,
                           as_tuple("unfold", "padding", padding, 2, 0), dilation)
    n, c = x.shape[:2]
    cols = window_stack(x, spec).reshape(n, c * spec.count, math.prod(spec.out))
    return cols.squeeze(0) if unbatched else cols


def fold(input: Tensor, output_size: Any, kernel_size: Any, dilation: Any = 1,
         padding: Any = 0, stride: Any = 1) -> Tensor:
    """Sum columns ``(N, C * prod(kernel_size), L)`` back into an ``(N, C, *output_size)``
    image (``(C * prod(kernel_size), L)`` -> ``(C, *output_size)``); where blocks
    overlap their entries add up."""
    ops._check_tensor("fold", input)
    if input.ndim not in (2, 3):
        raise ValueError(f"fold: expected a 2-D (unbatched) or 3-D (batched) input of "
                         f"columns (N, C * prod(kernel_size), L), got shape {input.shape}")
    x = input.unsqueeze(0) if input.ndim == 2 else input
    size = as_tuple("fold", "output_size", output_size, 2, 1)
    pad = as_tuple("fold", "padding", padding, 2, 0)
    spec = WindowSpec.make("fold", size, kernel_size, stride, pad, dilation)
    n, depth, blocks = x.shape
    if depth % spec.count:
        raise ValueError(f"fold: dim 1 of input {input.shape} (size {depth}) must be "
                         f"divisible by the product of kernel_size {spec.kernel} "
                         f"({spec.count})")
    if blocks != math.prod(spec.out):
        raise ValueError(f"fold: output_size {size}, kernel_size {spec.kernel}, dilation "
                         f"{spec.dilation}, padding {pad} and stride {spec.stride} give "
                         f"{' * '.join(map(str, spec.out))} = {math.prod(spec.out)} blocks, "
                         f"but dim -1 of input {input.shape} is {blocks}")
    c = depth // spec.count
    padded = tuple(s + 2 * p for s, p in zip(size, pad))
    index = _block_positions(spec, padded[1])
    index = constant(index.reshape(1, 1, -1), device=x.device).expand(n, c, index.size)
    base = ops.full_const(0, (n, c, padded[0] * padded[1]), x.dtype)
    out = ops.scatter_add(base, 2, index, x.reshape(n, c, spec.count * blocks))
    out = out.reshape(n, c, *padded)[:, :, pad[0]:pad[0] + size[0], pad[1]:pad[1] + size[1]]
    return out.squeeze(0) if input.ndim == 2 else out


def _block_positions(spec: WindowSpec, width: int) -> np.ndarray:
    """The flat position in the padded ``(H + 2 ph, width)`` image of each column entry,
    ``(prod(kernel), L)`` in ``unfold``'s order."""
    (sh, sw), (dh, dw), (oh, ow) = spec.stride, spec.dilation, spec.out
    kh, kw = np.meshgrid(np.arange(spec.kernel[0]), np.arange(spec.kernel[1]), indexing="ij")
    bh, bw = np.meshgrid(np.arange(oh), np.arange(ow), indexing="ij")
    rows = bh.reshape(1, -1) * sh + kh.reshape(-1, 1) * dh
    cols = bw.reshape(1, -1) * sw + kw.reshape(-1, 1) * dw
    return (rows * width + cols).astype(np.int64)


class Unfold(Module):
    def __init__(self, kernel_size: Any, dilation: Any = 1, padding: Any = 0, stride: Any = 1):
        super().__init__()
        self.kernel_size, self.dilation, self.padding, self.stride = \
            kernel_size, dilation, padding, stride

    def forward(self, input: Tensor) -> Tensor:
        return unfold(input, self.kernel_size, self.dilation, self.padding, self.stride)

    def extra_repr(self) -> str:
        return (f"kernel_size={self.kernel_size}, dilation={self.dilation}, "
                f"padding={self.padding}, stride={self.stride}")


class Fold(Module):
    def __init__(self, output_size: Any, kernel_size: Any, dilation: Any = 1, padding: Any = 0,
                 stride: Any = 1):
        super().__init__()
        self.output_size, self.kernel_size = output_size, kernel_size
        self.dilation, self.padding, self.stride = dilation, padding, stride

    def forward(self, input: Tensor) -> Tensor:
        return fold(input, self.output_size, self.kernel_size, self.dilation, self.padding,
                    self.stride)

    def extra_repr(self) -> str:
        return (f"output_size={self.output_size}, kernel_size={self.kernel_size}, "
                f"dilation={self.dilation}, padding={self.padding}, stride={self.stride}")


__all__ = ["unfold", "fold", "Unfold", "Fold"]
