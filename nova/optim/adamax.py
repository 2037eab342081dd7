"""Adamax (Adam with the infinity norm, Kingma & Ba 2015), PyTorch's update rule."""
from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from nova.optim import _checks, _half
from nova.optim._moments import first_moment_scalars
from nova.optim.optimizer import Optimizer, zeros_state
from nova.tensor import ops
from nova.tensor.tensor import Tensor


class Adamax(Optimizer):
    """``m = b1 m + (1-b1) g``; ``u = max(b2 u, |g| + eps)``; ``p -= lr / (1-b1^t) m /
    u``. Weight decay adds ``wd p`` to ``g``. A NaN in ``g`` propagates into ``u``, as
    ``torch.maximum`` propagates it.

    The step count lives on the host; ``lr / (1-b1^t)`` and the betas enter the step as
    runtime inputs, so a schedule of ``lr`` or ``betas`` compiles once. A half-precision
    parameter is updated by PyTorch's kernels, each rounded once (``_half``)."""

    _stamp_updates = True
    _runtime_hparams = frozenset({"lr", "betas"})

    def __init__(self, params: Iterable[Any], lr: float = 2e-3,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0, foreach: bool | None = None, *,
                 maximize: bool = False, differentiable: bool = False,
                 capturable: bool = False):
        _checks.tensor_lr("Adamax", lr)
        _checks.nonnegative("Adamax", lr=lr, eps=eps)
        betas = _checks.betas("Adamax", betas)
        _checks.nonnegative("Adamax", weight_decay=weight_decay)
        _checks.kernel_flags("Adamax", differentiable, foreach)
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                                      foreach=foreach, maximize=maximize,
                                      differentiable=differentiable, capturable=capturable))

    def _host_update(self, group: dict[str, Any], state: dict[str, Any]) -> dict[str, Any]:
        b1, b2 = group["betas"]
        state["step"] += 1
        scalars: dict[str, Any] = {}
        first_moment_scalars(self, scalars, b1)   # (half: exp_avg.lerp_(g, 1 - b1))
        scalars["beta2"] = self._scalar("beta2", b2)
        scalars["clr"] = self._scalar("clr", group["lr"] / (1.0 - b1 ** state["step"]))
        return scalars

    def _update(self, group: dict[str, Any], p: Tensor, grad: Tensor,
                state: dict[str, Any]) -> None:
        g = -grad if group["maximize"] else grad
        if "step" not in state:
            state["step"] = 0
            state["exp_avg"] = zeros_state(p)
            state["exp_inf"] = zeros_state(p)
        s = self._host_update(group, state)
        if _half.is_half(p.dtype):
            self._update_half(group, p, g, state, s)
            return
        if group["weight_decay"]:
            g = g + group["weight_decay"] * p
        m = state["exp_avg"].copy_(state["exp_avg"] * s["beta1"] + g * s["1 - beta1"])
        u = state["exp_inf"].copy_(ops.maximum(state["exp_inf"] * s["beta2"],
                                               ops.abs(g) + group["eps"]))
        p.copy_(p - s["clr"] * (m / u))

    @staticmethod
    def _update_half(group: dict[str, Any], p: Tensor, g: Tensor, state: dict[str, Any],
                     s: dict[str, Any]) -> None:
        """The update of a half-precision ``p`` as PyTorch's kernels round it
        (``_half``): ``g.add(p, alpha=wd)``, ``exp_avg.lerp_(g, 1 - b1)``,
        ``torch.maximum(exp_inf.mul_(b2), g.abs().add_(eps))``, ``p.addcdiv_(exp_avg,
        exp_inf, value=-clr)``."""
        if group["weight_decay"]:
            g = _half.add(g, p, _half.half_value(group["weight_decay"], p.dtype))
        m = state["exp_avg"].copy_(_half.lerp(state["exp_avg"], g, s["lerp1"],
                                              s["lerp1 from self"]))
        u = state["exp_inf"].copy_(ops.maximum(_half.mul(state["exp_inf"], s["beta2"]),
                                               _half.add_scalar(ops.abs(g), group["eps"])))
        p.copy_(_half.addcdiv(p, m, u, -s["clr"]))


__all__ = ["Adamax"]
