"""RAdam (rectified Adam, Liu et al. 2019), PyTorch's update rule."""
from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from nova.optim import _checks, _half
from nova.optim._moments import beta_scalars, decay_baked, decay_scalar, decayed_moments
from nova.optim.optimizer import Optimizer, zeros_state
from nova.tensor import ops
from nova.tensor.tensor import Tensor


class RAdam(Optimizer):
    """``m = b1 m + (1-b1) g``; ``v = b2 v + (1-b2) g^2``; ``rho_inf = 2/(1-b2) - 1``,
    ``rho_t = rho_inf - 2 t b2^t / (1-b2^t)``. While ``rho_t <= 5`` the step is
    momentum SGD, ``p -= lr m / (1-b1^t)``; after, ``p -= lr m / (1-b1^t) r_t
    sqrt(1-b2^t) / (sqrt(v) + eps)`` with ``r_t = sqrt((rho_t-4)(rho_t-2) rho_inf /
    ((rho_inf-4)(rho_inf-2) rho_t))``. Weight decay adds ``wd p`` to ``g``, or with
    ``decoupled_weight_decay`` (RAdamW) scales ``p`` by ``1 - lr wd`` first.

    Whether the step is rectified depends on the step count only: the host decides it
    (``_host_update``) and passes it as a runtime 0/1 input that selects between the
    two updates inside the one compiled step (a ``where``; both are a few elementwise
    ops of the same fused kernel). So the switch after the first few steps neither
    recompiles nor changes the recorded structure (one update template, one ``nv.compile``
    replay for every step), and each branch is computed exactly as PyTorch's: an
    unrectified step never divides by ``sqrt(v) + eps`` (which is 0 where ``eps=0`` and
    a gradient element has always been 0). The step sizes, betas and bias corrections
    are runtime inputs too, as for ``Adam``.
    """

    _stamp_updates = True
    _runtime_hparams = frozenset({"lr", "betas"})

    def __init__(self, params: Iterable[Any], lr: float = 1e-3,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0, decoupled_weight_decay: bool = False, *,
                 foreach: bool | None = None, maximize: bool = False,
                 capturable: bool = False, differentiable: bool = False):
        _checks.tensor_lr("RAdam", lr)
        _checks.nonnegative("RAdam", lr=lr, eps=eps)
        betas = _checks.betas("RAdam", betas)
        _checks.nonnegative("RAdam", weight_decay=weight_decay)
        _checks.kernel_flags("RAdam", differentiable, foreach)
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                                      maximize=maximize, foreach=foreach,
                                      capturable=capturable,
                                      decoupled_weight_decay=decoupled_weight_decay,
                                      differentiable=differentiable))

    def _host_update(self, group: dict[str, Any], state: dict[str, Any]) -> dict[str, Any]:
        b1, b2 = group["betas"]
        lr, wd = group["lr"], group["weight_decay"]
        state["step"] += 1
        t = state["step"]
        bias_correction1 = 1.0 - b1 ** t
        bias_correction2 = 1.0 - b2 ** t
        rho_inf = 2.0 / (1.0 - b2) - 1.0
        rho_t = rho_inf - 2.0 * t * b2 ** t / bias_correction2
        rectified = rho_t > 5.0
        if rectified:
            rect = math.sqrt((rho_t - 4.0) * (rho_t - 2.0) * rho_inf /
                             ((rho_inf - 4.0) * (rho_inf - 2.0) * rho_t))
            adaptive = lr * rect * math.sqrt(bias_correction2) / bias_correction1
        else:
            adaptive = 0.0          # (unused: the step takes the other branch)
        scalars = {}
        decay_scalar(self, scalars, lr, wd, group["decoupled_weight_decay"])
        beta_scalars(self, scalars, b1, b2)
        scalars["rectified"] = self._scalar("rectified", 1.0 if rectified else 0.0)
        if _half.is_half(self._param_dtype):
            # the factors of PyTorch's product, each rounded on its own (_update)
            scalars["bias_correction1"] = self._scalar("bias_correction1", bias_correction1)
            scalars["lr"] = self._scalar("lr", lr)
            scalars["bias_correction2_sqrt"] = self._scalar("bias_correction2_sqrt",
                                                            bias_correction2 ** 0.5)
            scalars["rect"] = self._scalar("rect", rect if rectified else 0.0)
            return scalars
        scalars["adaptive_step"] = self._scalar("adaptive_step", adaptive)
        scalars["sgd_step"] = self._scalar("sgd_step", lr / bias_correction1)
        return scalars

    def _baked(self, group: dict[str, Any]) -> dict[str, Any]:
        """Decoupled decay is a runtime scalar: only whether there is one is structure."""
        return decay_baked(super()._baked(group), group, group["decoupled_weight_decay"])

    def _update(self, group: dict[str, Any], p: Tensor, grad: Tensor,
                state: dict[str, Any]) -> None:
        g = -grad if group["maximize"] else grad
        if "step" not in state:
            state["step"] = 0
            state["exp_avg"] = zeros_state(p)
            state["exp_avg_sq"] = zeros_state(p)
        s = self._host_update(group, state)
        p, g, m, v = decayed_moments(p, g, group["weight_decay"],
                                     group["decoupled_weight_decay"], state, s)
        if _half.is_half(p.dtype):
            p.copy_(self._half_step(p, m, v, group["eps"], s))
            return
        adaptive = s["adaptive_step"] * m / (ops.sqrt(v) + group["eps"])
        p.copy_(p - ops.where(s["rectified"] > 0.5, adaptive, s["sgd_step"] * m))

    @staticmethod
    def _half_step(p: Tensor, m: Tensor, v: Tensor, eps: float, s: dict[str, Any]) -> Tensor:
        """The new half-precision ``p`` as PyTorch's kernels round it (``_half``):
        ``m / bc1 * lr``, times ``bc2 ** 0.5 / v.sqrt().add_(eps)`` (a reciprocal, then a
        product) and ``rect`` when rectified, each op rounded, then ``p.add_(...,
        alpha=-1)``."""
        dtype = p.dtype
        step = _half.mul(_half.div_scalar(m, s["bias_correction1"]), s["lr"])
        denom = _half.add_scalar(_half.sqrt(v), eps)
        adaptive = _half.mul(ops.reciprocal(denom.float()).to(dtype),
                             s["bias_correction2_sqrt"])
        rectified = _half.mul((step.float() * adaptive.float()).to(dtype), s["rect"])
        update = ops.where(s["rectified"] > 0.5, rectified, step)
        return (p.float() - update.float()).to(dtype)


__all__ = ["RAdam"]
