"""Adadelta (Zeiler 2012), PyTorch's update rule."""
from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from nova.optim import _checks, _half
from nova.optim.optimizer import Optimizer, zeros_state
from nova.tensor import ops
from nova.tensor.tensor import Tensor


class Adadelta(Optimizer):
    """``v = rho v + (1-rho) g^2``; ``d = sqrt(a + eps) / sqrt(v + eps) g``; ``a = rho a
    + (1-rho) d^2``; ``p -= lr d``. Weight decay adds ``wd p`` to ``g``. ``lr`` is a
    runtime input of the step (a schedule compiles once); ``rho``, ``eps`` and
    ``weight_decay`` are compiled in, as RMSprop's ``alpha`` is. A half-precision
    parameter is updated by PyTorch's kernels, each rounded once (``_half``)."""

    _stamp_updates = True

    def __init__(self, params: Iterable[Any], lr: float = 1.0, rho: float = 0.9,
                 eps: float = 1e-6, weight_decay: float = 0,
                 foreach: bool | None = None, *, capturable: bool = False,
                 maximize: bool = False, differentiable: bool = False):
        _checks.tensor_lr("Adadelta", lr)
        _checks.nonnegative("Adadelta", lr=lr)
        if not 0.0 <= rho <= 1.0:
            raise _checks.invalid("Adadelta", "rho", rho, "in [0, 1]")
        _checks.nonnegative("Adadelta", eps=eps, weight_decay=weight_decay)
        _checks.kernel_flags("Adadelta", differentiable, foreach)
        super().__init__(params, dict(lr=lr, rho=rho, eps=eps, weight_decay=weight_decay,
                                      maximize=maximize, capturable=capturable,
                                      foreach=foreach, differentiable=differentiable))

    def _host_update(self, group: dict[str, Any], state: dict[str, Any]) -> dict[str, Any]:
        state["step"] += 1
        lr = group["lr"]
        if _half.is_half(self._param_dtype):        # p.add_(delta, alpha=-lr)
            lr = _half.half_value(lr, self._param_dtype)
        return {"lr": self._scalar("lr", lr)}

    def _update(self, group: dict[str, Any], p: Tensor, grad: Tensor,
                state: dict[str, Any]) -> None:
        g = -grad if group["maximize"] else grad
        if "step" not in state:
            state["step"] = 0
            state["square_avg"] = zeros_state(p)
            state["acc_delta"] = zeros_state(p)
        s = self._host_update(group, state)
        if _half.is_half(p.dtype):
            self._update_half(group, p, g, state, s)
            return
        if group["weight_decay"]:
            g = g + group["weight_decay"] * p
        rho, eps = group["rho"], group["eps"]
        v = state["square_avg"].copy_(state["square_avg"] * rho + g * g * (1.0 - rho))
        delta = ops.sqrt(state["acc_delta"] + eps) / ops.sqrt(v + eps) * g
        state["acc_delta"].copy_(state["acc_delta"] * rho + delta * delta * (1.0 - rho))
        p.copy_(p - s["lr"] * delta)

    @staticmethod
    def _update_half(group: dict[str, Any], p: Tensor, g: Tensor, state: dict[str, Any],
                     s: dict[str, Any]) -> None:
        """The update of a half-precision ``p`` as PyTorch's kernels round it
        (``_half``): ``g.add(p, alpha=wd)``, ``square_avg.mul_(rho).addcmul_(g, g,
        value=1 - rho)``, ``square_avg.add(eps).sqrt_()`` and ``acc_delta.add(eps)
        .sqrt_()``, ``delta.div_(std).mul_(g)``, ``acc_delta.mul_(rho).addcmul_(delta,
        delta, value=1 - rho)``, ``p.add_(delta, alpha=-lr)``."""
        if group["weight_decay"]:
            g = _half.add(g, p, _half.half_value(group["weight_decay"], p.dtype))
        rho, eps = group["rho"], group["eps"]
        v = state["square_avg"].copy_(_half.addcmul(_half.mul(state["square_avg"], rho),
                                                    g, g, 1.0 - rho))
        std = _half.sqrt(_half.add_scalar(v, eps))
        delta = _half.sqrt(_half.add_scalar(state["acc_delta"], eps))
        delta = _half.mul(_half.div(delta, std), g)
        state["acc_delta"].copy_(_half.addcmul(_half.mul(state["acc_delta"], rho),
                                               delta, delta, 1.0 - rho))
        p.copy_(_half.add(p, delta, -s["lr"]))


__all__ = ["Adadelta"]
