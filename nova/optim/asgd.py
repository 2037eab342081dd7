"""ASGD (averaged SGD, Polyak & Juditsky 1992), PyTorch's update rule."""
from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from nova.optim import _checks
from nova.optim.optimizer import Optimizer, zeros_state
from nova.tensor import ops
from nova.tensor.tensor import Tensor


class ASGD(Optimizer):
    """``p = p (1 - lambd eta) - eta g``; the average ``ax += (p - ax) mu``, or ``ax = p``
    while ``mu == 1``; then ``eta = lr / (1 + lambd lr t)^alpha`` and ``mu = 1 / max(1,
    t - t0)`` for the next step (``eta`` starts at ``lr``, ``mu`` at 1). Weight decay adds
    ``wd p`` to ``g``.

    ``eta``, ``mu`` and the step count are host floats in the state (PyTorch keeps them
    as 0-d tensors); the step reads ``eta``, ``1 - lambd eta``, ``mu`` and whether
    ``mu != 1`` as runtime inputs, the last selecting between the two averages inside
    the one compiled step, so neither a schedule nor averaging starting at ``t0``
    recompiles. ``lambd``, ``alpha`` and ``t0`` reach the step only through them."""

    _stamp_updates = True
    _runtime_hparams = frozenset({"lr", "lambd", "alpha", "t0"})
    _host_state = frozenset({"step", "eta", "mu"})

    def __init__(self, params: Iterable[Any], lr: float = 1e-2, lambd: float = 1e-4,
                 alpha: float = 0.75, t0: float = 1e6, weight_decay: float = 0.0,
                 foreach: bool | None = None, maximize: bool = False,
                 differentiable: bool = False, capturable: bool = False):
        flags = _checks.kernel_flags("ASGD", differentiable, foreach=foreach,
                                     capturable=capturable)
        _checks.nonnegative("ASGD", lr=lr, weight_decay=weight_decay)
        super().__init__(params, dict(lr=lr, lambd=lambd, alpha=alpha, t0=t0,
                                      weight_decay=weight_decay, maximize=maximize, **flags))

    def _host_update(self, group: dict[str, Any], state: dict[str, Any]) -> dict[str, Any]:
        lr, lambd = group["lr"], group["lambd"]
        eta, mu = state["eta"], state["mu"]
        scalars = {"decay": self._scalar("decay", 1.0 - lambd * eta),
                   "eta": self._scalar("eta", eta),
                   "mu": self._scalar("mu", mu),
                   "averaging": self._scalar("averaging", 1.0 if mu != 1 else 0.0)}
        state["step"] += 1
        t = state["step"]
        state["eta"] = lr / (1.0 + lambd * lr * t) ** group["alpha"]
        state["mu"] = 1.0 / max(1.0, t - group["t0"])
        return scalars

    def _update(self, group: dict[str, Any], p: Tensor, grad: Tensor,
                state: dict[str, Any]) -> None:
        g = -grad if group["maximize"] else grad
        if "step" not in state:
            state["step"] = 0
            state["eta"] = float(group["lr"])
            state["mu"] = 1.0
            state["ax"] = zeros_state(p)
        s = self._host_update(group, state)
        if group["weight_decay"]:
            g = g + group["weight_decay"] * p
        p = p.copy_(p * s["decay"] - s["eta"] * g)
        ax = state["ax"]
        ax.copy_(ops.where(s["averaging"] > 0.5, ax + (p - ax) * s["mu"], p))


__all__ = ["ASGD"]
