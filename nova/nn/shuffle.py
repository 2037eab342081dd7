"""Channel/space rearrangements: ``F.pixel_shuffle``, ``F.pixel_unshuffle``,
``F.channel_shuffle`` and their modules, PyTorch's semantics. Each is one reshape, one
permute and one reshape, so the gradient is the inverse rearrangement."""
from __future__ import annotations

from nova.nn.module import Module
from nova.tensor import ops
from nova.tensor.tensor import Tensor


def _check_factor(op: str, name: str, factor: int) -> None:
    if isinstance(factor, bool) or not isinstance(factor, int) or factor < 1:
        raise ValueError(f"{op}: expects a positive int {name}, got {factor!r}")


def _check_image(op: str, x: Tensor) -> None:
    ops._check_tensor(op, x)
    if x.ndim < 3:
        raise ValueError(f"{op}: expects input (*, C, H, W) of at least 3 dims, got shape "
                         f"{x.shape}")


def pixel_shuffle(input: Tensor, upscale_factor: int) -> Tensor:
    """``(*, C r^2, H, W)`` -> ``(*, C, H r, W r)``: each group of ``r^2`` channels
    becomes an ``r x r`` block of pixels."""
    _check_factor("pixel_shuffle", "upscale_factor", upscale_factor)
    _check_image("pixel_shuffle", input)
    r = upscale_factor
    *lead, c, h, w = input.shape
    if c % (r * r):
        raise ValueError(f"pixel_shuffle: the channel dim (size {c}) of input {input.shape} "
                         f"must be divisible by upscale_factor^2 = {r * r}")
    n = len(lead)
    x = input.reshape(*lead, c // (r * r), r, r, h, w)
    x = x.permute(*range(n), n, n + 3, n + 1, n + 4, n + 2)
    return ops.unshared(x.reshape(*lead, c // (r * r), h * r, w * r))   # (a copy, as PyTorch's)


def pixel_unshuffle(input: Tensor, downscale_factor: int) -> Tensor:
    """``(*, C, H r, W r)`` -> ``(*, C r^2, H, W)``, the inverse of ``pixel_shuffle``."""
    _check_factor("pixel_unshuffle", "downscale_factor", downscale_factor)
    _check_image("pixel_unshuffle", input)
    r = downscale_factor
    *lead, c, h, w = input.shape
    if h % r or w % r:
        raise ValueError(f"pixel_unshuffle: height and width ({h}, {w}) of input "
                         f"{input.shape} must be divisible by downscale_factor {r}")
    n = len(lead)
    x = input.reshape(*lead, c, h // r, r, w // r, r)
    x = x.permute(*range(n), n, n + 2, n + 4, n + 1, n + 3)
    return ops.unshared(x.reshape(*lead, c * r * r, h // r, w // r))   # (a copy, as PyTorch's)


def channel_shuffle(input: Tensor, groups: int) -> Tensor:
    """Interleave the channels (dim 1) of ``(N, C, *)``: ``C`` split into ``groups``
    groups, output channel ``i * groups + g`` is channel ``i`` of group ``g``."""
    _check_factor("channel_shuffle", "groups", groups)
    ops._check_tensor("channel_shuffle", input)
    if input.ndim <= 2:
        raise ValueError(f"channel_shuffle: expects input (N, C, *) with more than 2 dims, "
                         f"got shape {input.shape}")
    n, c, *rest = input.shape
    if c % groups:
        raise ValueError(f"channel_shuffle: the number of channels ({c}) of input "
                         f"{input.shape} must be divisible by groups ({groups})")
    return ops.unshared(input.reshape(n, groups, c // groups, *rest).transpose(1, 2)
                        .reshape(input.shape))                     # (a copy, as PyTorch's)


class PixelShuffle(Module):
    def __init__(self, upscale_factor: int):
        super().__init__()
        self.upscale_factor = upscale_factor

    def forward(self, input: Tensor) -> Tensor:
        return pixel_shuffle(input, self.upscale_factor)

    def extra_repr(self) -> str:
        return f"upscale_factor={self.upscale_factor}"


class PixelUnshuffle(Module):
    def __init__(self, downscale_factor: int):
        super().__init__()
        self.downscale_factor = downscale_factor

    def forward(self, input: Tensor) -> Tensor:
        return pixel_unshuffle(input, self.downscale_factor)

    def extra_repr(self) -> str:
        return f"downscale_factor={self.downscale_factor}"


class ChannelShuffle(Module):
    def __init__(self, groups: int):
        super().__init__()
        self.groups = groups

    def forward(self, input: Tensor) -> Tensor:
        return channel_shuffle(input, self.groups)

    def extra_repr(self) -> str:
        return f"groups={self.groups}"


__all__ = ["pixel_shuffle", "pixel_unshuffle", "channel_shuffle", "PixelShuffle",
           "PixelUnshuffle", "ChannelShuffle"]
