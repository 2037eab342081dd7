"""``nv.nn.init``: in-place initializers (under no_grad), PyTorch's formulas."""
from __future__ import annotations

import math

from nova.autograd.grad_mode import no_grad
from nova.tensor.creation import rand, randn
from nova.tensor.tensor import Tensor


def _fans(t: Tensor) -> tuple[int, int]:
    if t.ndim < 2:
        raise ValueError(f"init: fan in and fan out need a tensor with >= 2 dims, got shape "
                         f"{t.shape}")
    receptive = 1
    for s in t.shape[2:]:
        receptive *= s
    return t.shape[1] * receptive, t.shape[0] * receptive


def uniform_(t: Tensor, a: float = 0.0, b: float = 1.0) -> Tensor:
    with no_grad():
        return t.copy_(rand(t.shape, dtype=t.dtype) * (b - a) + a)


def normal_(t: Tensor, mean: float = 0.0, std: float = 1.0) -> Tensor:
    with no_grad():
        return t.copy_(randn(t.shape, dtype=t.dtype) * std + mean)


def zeros_(t: Tensor) -> Tensor:
    with no_grad():
        return t.zero_()


def ones_(t: Tensor) -> Tensor:
    with no_grad():
        return t.fill_(1.0)


def constant_(t: Tensor, value: float) -> Tensor:
    with no_grad():
        return t.fill_(value)


def xavier_uniform_(t: Tensor, gain: float = 1.0) -> Tensor:
    """U(-a, a) with a = gain * sqrt(6 / (fan_in + fan_out))."""
    fan_in, fan_out = _fans(t)
    a = gain * math.sqrt(6.0 / (fan_in + fan_out))
    return uniform_(t, -a, a)


def kaiming_uniform_(t: Tensor, a: float = 0.0, mode: str = "fan_in",
                     nonlinearity: str = "leaky_relu") -> Tensor:
    """U(-b, b) with b = gain * sqrt(3 / fan), gain = sqrt(2 / (1 + a^2)) for leaky_relu."""
    fan_in, fan_out = _fans(t)
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"kaiming_uniform_: mode must be 'fan_in' or 'fan_out', got {mode!r}")
    fan = fan_in if mode == "fan_in" else fan_out
    gains = {"leaky_relu": math.sqrt(2.0 / (1 + a * a)), "relu": math.sqrt(2.0),
             "linear": 1.0, "tanh": 5.0 / 3, "sigmoid": 1.0}
    if nonlinearity not in gains:
        raise ValueError(f"kaiming_uniform_: unsupported nonlinearity {nonlinearity!r}; valid: "
                         f"{sorted(gains)}")
    bound = gains[nonlinearity] * math.sqrt(3.0 / fan)
    return uniform_(t, -bound, bound)
