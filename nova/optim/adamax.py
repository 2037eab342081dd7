"""Adamax (Adam with the infinity norm, Kingma & Ba 2015), PyTorch's update rule."""
from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from nova.optim import _checks
from nova.optim.optimizer import Optimizer, zeros_state
from nova.tensor import ops
from nova.tensor.tensor import Tensor


class Adamax(Optimizer):
    """``m = b1 m + (1-b1) g``; ``u = max(b2 u, |g| + eps)``; ``p -= lr / (1-b1^t) m /
    u``. Weight decay adds ``wd p`` to ``g``. A NaN in ``g`` propagates into ``u``, as
    ``torch.maximum`` propagates it.

    The step count lives on the host; ``lr / (1-b1^t)`` and the betas enter the step as
    runtime inputs, so a schedule of ``lr`` or ``betas`` compiles once."""

    _stamp_updates = True
    _runtime_hparams = frozenset({"lr", "betas"})

    def __init__(self, params: Iterable[Any], lr: float = 2e-3,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.0, foreach: bool | None = None, *,
                 maximize: bool = False, differentiable: bool = False,
                 capturable: bool = False):
        flags = _checks.kernel_flags("Adamax", differentiable, foreach=foreach,
                                     capturable=capturable)
        _checks.nonnegative("Adamax", lr=lr, eps=eps, weight_decay=weight_decay)
        super().__init__(params, dict(lr=lr, betas=_checks.betas("Adamax", betas), eps=eps,
                                      weight_decay=weight_decay, maximize=maximize, **flags))

    def _host_update(self, group: dict[str, Any], state: dict[str, Any]) -> dict[str, Any]:
        b1, b2 = group["betas"]
        state["step"] += 1
        return {"beta1": self._scalar("beta1", b1),
                "1 - beta1": self._scalar("1 - beta1", 1.0 - b1),
                "beta2": self._scalar("beta2", b2),
                "clr": self._scalar("clr", group["lr"] / (1.0 - b1 ** state["step"]))}

    def _update(self, group: dict[str, Any], p: Tensor, grad: Tensor,
                state: dict[str, Any]) -> None:
        g = -grad if group["maximize"] else grad
        if "step" not in state:
            state["step"] = 0
            state["exp_avg"] = zeros_state(p)
            state["exp_inf"] = zeros_state(p)
        s = self._host_update(group, state)
        if group["weight_decay"]:
            g = g + group["weight_decay"] * p
        m = state["exp_avg"].copy_(state["exp_avg"] * s["beta1"] + g * s["1 - beta1"])
        u = state["exp_inf"].copy_(ops.maximum(state["exp_inf"] * s["beta2"],
                                               ops.abs(g) + group["eps"]))
        p.copy_(p - s["clr"] * (m / u))


__all__ = ["Adamax"]
