"""ASGD (averaged SGD, Polyak & Juditsky 1992), PyTorch's update rule."""
from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from nova.optim import _checks, _half
from nova.optim.optimizer import Optimizer, state_scalar, zeros_state
from nova.tensor import ops
from nova.tensor.tensor import Tensor


class ASGD(Optimizer):
    """``p = p (1 - lambd eta) - eta g``; the average ``ax += (p - ax) mu``, or ``ax = p``
    while ``mu == 1``; then ``eta = lr / (1 + lambd lr t)^alpha`` and ``mu = 1 / max(1,
    t - t0)`` for the next step (``eta`` starts at ``lr``, ``mu`` at 1). Weight decay adds
    ``wd p`` to ``g``.

    ``eta``, ``mu`` and the step count are host floats in the state holding what
    PyTorch's 0-d float32 tensors hold (``state_scalar``: the update reads their
    rounded values, as PyTorch's ``eta.item()``); the step reads ``eta``, ``1 - lambd
    eta``, ``mu`` and whether ``mu != 1`` as runtime inputs, the last selecting between
    the two averages inside the one compiled step, so neither a schedule nor averaging
    starting at ``t0`` recompiles. ``lambd``, ``alpha`` and ``t0`` reach the step only through them. A
    half-precision parameter is updated by PyTorch's kernels, each rounded once
    (``_half``)."""

    _stamp_updates = True
    _runtime_hparams = frozenset({"lr", "lambd", "alpha", "t0"})
    _host_state = frozenset({"step", "eta", "mu"})

    def __init__(self, params: Iterable[Any], lr: float = 1e-2, lambd: float = 1e-4,
                 alpha: float = 0.75, t0: float = 1e6, weight_decay: float = 0,
                 foreach: bool | None = None, maximize: bool = False,
                 differentiable: bool = False, capturable: bool = False):
        _checks.tensor_lr("ASGD", lr)
        _checks.nonnegative("ASGD", lr=lr, weight_decay=weight_decay)
        _checks.kernel_flags("ASGD", differentiable, foreach)
        super().__init__(params, dict(lr=lr, lambd=lambd, alpha=alpha, t0=t0,
                                      weight_decay=weight_decay, foreach=foreach,
                                      maximize=maximize, differentiable=differentiable,
                                      capturable=capturable))

    def _host_update(self, group: dict[str, Any], state: dict[str, Any]) -> dict[str, Any]:
        lr, lambd = group["lr"], group["lambd"]
        eta, mu = state["eta"], state["mu"]
        if _half.is_half(self._param_dtype):      # p.add_(g, alpha=-eta)
            eta_step = -_half.half_value(eta, self._param_dtype)
        else:
            eta_step = -eta
        scalars = {"decay": self._scalar("decay", 1.0 - lambd * eta),
                   "-eta": self._scalar("-eta", eta_step),
                   "mu": self._scalar("mu", mu),
                   "averaging": self._scalar("averaging", 1.0 if mu != 1 else 0.0)}
        state["step"] += 1
        t = state["step"]
        state["eta"] = state_scalar(lr / (1.0 + lambd * lr * t) ** group["alpha"])
        state["mu"] = state_scalar(1.0 / max(1.0, t - group["t0"]))
        return scalars

    def _update(self, group: dict[str, Any], p: Tensor, grad: Tensor,
                state: dict[str, Any]) -> None:
        g = -grad if group["maximize"] else grad
        if "step" not in state:
            state["step"] = 0
            state["eta"] = state_scalar(group["lr"])
            state["mu"] = 1.0
            state["ax"] = zeros_state(p)
        s = self._host_update(group, state)
        ax = state["ax"]
        if _half.is_half(p.dtype):
            # PyTorch's kernels, each rounded once (``_half``): g.add(p, alpha=wd),
            # p.mul_(1 - lambd eta), p.add_(g, alpha=-eta), ax.add_(p.sub(ax).mul_(mu))
            if group["weight_decay"]:
                g = _half.add(g, p, _half.half_value(group["weight_decay"], p.dtype))
            p = p.copy_(_half.add(_half.mul(p, s["decay"]), g, s["-eta"]))
            moved = (ax.float() + _half.mul((p.float() - ax.float()).to(p.dtype),
                                            s["mu"]).float()).to(p.dtype)
            ax.copy_(ops.where(s["averaging"] > 0.5, moved, p))
            return
        if group["weight_decay"]:
            g = g + group["weight_decay"] * p
        p = p.copy_(p * s["decay"] + s["-eta"] * g)
        ax.copy_(ops.where(s["averaging"] > 0.5, ax + (p - ax) * s["mu"], p))


__all__ = ["ASGD"]
