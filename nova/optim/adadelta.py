"""Adadelta (Zeiler 2012), PyTorch's update rule."""
from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from nova.optim import _checks
from nova.optim.optimizer import Optimizer, zeros_state
from nova.tensor import ops
from nova.tensor.tensor import Tensor


class Adadelta(Optimizer):
    """``v = rho v + (1-rho) g^2``; ``d = sqrt(a + eps) / sqrt(v + eps) g``; ``a = rho a
    + (1-rho) d^2``; ``p -= lr d``. Weight decay adds ``wd p`` to ``g``. ``lr`` is a
    runtime input of the step (a schedule compiles once); ``rho``, ``eps`` and
    ``weight_decay`` are compiled in, as RMSprop's ``alpha`` is."""

    _stamp_updates = True

    def __init__(self, params: Iterable[Any], lr: float = 1.0, rho: float = 0.9,
                 eps: float = 1e-6, weight_decay: float = 0.0,
                 foreach: bool | None = None, *, capturable: bool = False,
                 maximize: bool = False, differentiable: bool = False):
        flags = _checks.kernel_flags("Adadelta", differentiable, foreach=foreach,
                                     capturable=capturable)
        _checks.nonnegative("Adadelta", lr=lr, eps=eps, weight_decay=weight_decay)
        if not 0.0 <= rho <= 1.0:
            raise ValueError(f"Adadelta: invalid rho={rho} (must be in [0, 1])")
        super().__init__(params, dict(lr=lr, rho=rho, eps=eps, weight_decay=weight_decay,
                                      maximize=maximize, **flags))

    def _host_update(self, group: dict[str, Any], state: dict[str, Any]) -> dict[str, Any]:
        state["step"] += 1
        return {"lr": self._scalar("lr", group["lr"])}

    def _update(self, group: dict[str, Any], p: Tensor, grad: Tensor,
                state: dict[str, Any]) -> None:
        g = -grad if group["maximize"] else grad
        if "step" not in state:
            state["step"] = 0
            state["square_avg"] = zeros_state(p)
            state["acc_delta"] = zeros_state(p)
        s = self._host_update(group, state)
        if group["weight_decay"]:
            g = g + group["weight_decay"] * p
        rho, eps = group["rho"], group["eps"]
        v = state["square_avg"].copy_(state["square_avg"] * rho + g * g * (1.0 - rho))
        delta = ops.sqrt(state["acc_delta"] + eps) / ops.sqrt(v + eps) * g
        state["acc_delta"].copy_(state["acc_delta"] * rho + delta * delta * (1.0 - rho))
        p.copy_(p - s["lr"] * delta)


__all__ = ["Adadelta"]
