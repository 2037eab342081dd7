"""Rprop (resilient backpropagation, Riedmiller & Braun 1993), PyTorch's update rule."""
from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from nova.optim import _checks, _half
from nova.optim.optimizer import Optimizer, zeros_state
from nova.tensor import ops
from nova.tensor.creation import tensor
from nova.tensor.numeric import sign
from nova.tensor.tensor import Tensor


def _full_state(p: Tensor, value: float) -> Tensor:
    """A realized buffer of ``value`` on ``p``'s device (``zeros_state``'s sibling); in
    a half type ``value`` is rounded as PyTorch's ``full_like`` rounds it
    (``_half.half_value``: through float32)."""
    if _half.is_half(p.dtype):
        value = _half.half_value(value, p.dtype)
    return tensor(np.full(p.shape, value, dtype=p.dtype.np), dtype=p.dtype,
                  device=p.device if p.node.device == "cuda" else None)


class Rprop(Optimizer):
    """Per element, ``s = sign(g * g_prev)``; the step size is multiplied by
    ``etaplus`` where ``s > 0``, by ``etaminus`` where ``s < 0`` (and the gradient taken
    as 0 there, so the next step does not shrink it again), then clamped to
    ``step_sizes``; ``p -= sign(g) * step_size``; ``g_prev = g``. The step sizes start
    at ``lr``, the only place ``lr`` enters: changing it after the first step has no
    effect, as in PyTorch. A NaN gradient element has sign 0 there (``torch.sign``'s
    rule), so it leaves that element and its step size unchanged, as in PyTorch.
    ``etas`` and ``step_sizes`` are compiled into the step. PyTorch writes the etas into
    a tensor of the parameter's dtype before multiplying: a half-precision parameter's
    step sizes are scaled by the etas rounded to its type (``_half.half_value``)."""

    _stamp_updates = True

    def __init__(self, params: Iterable[Any], lr: float = 1e-2,
                 etas: tuple[float, float] = (0.5, 1.2),
                 step_sizes: tuple[float, float] = (1e-6, 50), *, capturable: bool = False,
                 foreach: bool | None = None, maximize: bool = False,
                 differentiable: bool = False):
        _checks.tensor_lr("Rprop", lr)
        _checks.nonnegative("Rprop", lr=lr)
        if len(etas) != 2 or not 0.0 < etas[0] < 1.0 < etas[1]:
            raise ValueError(f"Rprop: Invalid eta values: {', '.join(map(str, etas))} (need "
                             "(etaminus, etaplus) with 0 < etaminus < 1 < etaplus)")
        if len(step_sizes) != 2:
            raise ValueError(f"Rprop: step_sizes must be (min, max), got {step_sizes}")
        _checks.kernel_flags("Rprop", differentiable, foreach)
        super().__init__(params, dict(lr=lr, etas=(etas[0], etas[1]),
                                      step_sizes=(step_sizes[0], step_sizes[1]),
                                      foreach=foreach, maximize=maximize,
                                      differentiable=differentiable, capturable=capturable))

    def _host_update(self, group: dict[str, Any], state: dict[str, Any]) -> dict[str, Any]:
        state["step"] += 1
        return {}

    def _update(self, group: dict[str, Any], p: Tensor, grad: Tensor,
                state: dict[str, Any]) -> None:
        g = -grad if group["maximize"] else grad
        if "step" not in state:
            state["step"] = 0
            state["prev"] = zeros_state(p)
            state["step_size"] = _full_state(p, group["lr"])
        self._host_update(group, state)
        etaminus, etaplus = group["etas"]
        if _half.is_half(p.dtype):
            etaminus, etaplus = (_half.half_value(e, p.dtype) for e in (etaminus, etaplus))
        lo, hi = group["step_sizes"]
        s = sign(g * state["prev"])
        size = state["step_size"]
        size = size.copy_(ops.clamp(ops.where(s > 0, size * etaplus,
                                              ops.where(s < 0, size * etaminus, size)),
                                    lo, hi))
        g = ops.where(s < 0, 0.0, g)
        p.copy_(p - sign(g) * size)
        state["prev"].copy_(g)


__all__ = ["Rprop"]
