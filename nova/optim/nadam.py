"""NAdam (Adam with Nesterov momentum, Dozat 2016), PyTorch's update rule."""
from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from nova.optim import _checks, _half
from nova.optim._moments import beta_scalars, decay_baked, decay_scalar, decayed_moments
from nova.optim.optimizer import Optimizer, state_scalar_np, zeros_state
from nova.tensor import ops
from nova.tensor.tensor import Tensor


class NAdam(Optimizer):
    """``mu_t = b1 (1 - 0.96^(t psi) / 2)`` (``psi``: ``momentum_decay``); ``m = b1 m +
    (1-b1) g``; ``v = b2 v + (1-b2) g^2``; with ``denom = sqrt(v / (1-b2^t)) + eps``,
    ``p -= lr (1-mu_t) / (1 - prod_{i<=t} mu_i) g / denom`` and
    ``p -= lr mu_{t+1} / (1 - prod_{i<=t+1} mu_i) m / denom``. Weight decay adds
    ``wd p`` to ``g``, or with ``decoupled_weight_decay`` (NAdamW) scales ``p`` by
    ``1 - lr wd`` first.

    The step count and the product of the ``mu`` (``state["mu_product"]``) live on the
    host, the product as PyTorch's 0-d float32 tensor holds it (``state_scalar_np``:
    ``mu_product *= mu`` multiplies in float32, and the coefficients below read that
    value); the two coefficients, the betas and
    the bias correction enter the step as runtime inputs, so a schedule of ``lr`` or
    ``betas`` (``OneCycleLR`` cycles ``betas[0]``) compiles once. ``momentum_decay``
    reaches the step only through them: changing it does not recompile either.
    """

    _stamp_updates = True
    _runtime_hparams = frozenset({"lr", "betas", "momentum_decay"})
    _host_state = frozenset({"step", "mu_product"})

    def __init__(self, params: Iterable[Any], lr: float = 2e-3,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0, momentum_decay: float = 4e-3,
                 decoupled_weight_decay: bool = False, *, foreach: bool | None = None,
                 maximize: bool = False, capturable: bool = False,
                 differentiable: bool = False):
        _checks.tensor_lr("NAdam", lr)
        _checks.nonnegative("NAdam", lr=lr, eps=eps)
        betas = _checks.betas("NAdam", betas)
        _checks.nonnegative("NAdam", weight_decay=weight_decay, momentum_decay=momentum_decay)
        _checks.kernel_flags("NAdam", differentiable, foreach)
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                                      momentum_decay=momentum_decay,
                                      decoupled_weight_decay=decoupled_weight_decay,
                                      maximize=maximize, foreach=foreach,
                                      capturable=capturable, differentiable=differentiable))

    def _host_update(self, group: dict[str, Any], state: dict[str, Any]) -> dict[str, Any]:
        b1, b2 = group["betas"]
        lr, wd, psi = group["lr"], group["weight_decay"], group["momentum_decay"]
        state["step"] += 1
        t = state["step"]
        mu = b1 * (1.0 - 0.5 * 0.96 ** (t * psi))
        mu_next = b1 * (1.0 - 0.5 * 0.96 ** ((t + 1) * psi))
        f = state_scalar_np()
        state["mu_product"] = float(f(state["mu_product"]) * f(mu))
        mu_product = state["mu_product"]
        scalars = {}
        decay_scalar(self, scalars, lr, wd, group["decoupled_weight_decay"])
        beta_scalars(self, scalars, b1, b2)
        if _half.is_half(self._param_dtype):     # PyTorch's v.div(bc2).sqrt()
            scalars["bias_correction2"] = self._scalar("bias_correction2", 1.0 - b2 ** t)
        else:
            scalars["bias_correction2_sqrt"] = self._scalar("bias_correction2_sqrt",
                                                            (1.0 - b2 ** t) ** 0.5)
        scalars["grad_step"] = self._scalar("grad_step", lr * (1.0 - mu) / (1.0 - mu_product))
        scalars["exp_avg_step"] = self._scalar("exp_avg_step",
                                               lr * mu_next / (1.0 - mu_product * mu_next))
        return scalars

    def _baked(self, group: dict[str, Any]) -> dict[str, Any]:
        """Decoupled decay is a runtime scalar: only whether there is one is structure."""
        return decay_baked(super()._baked(group), group, group["decoupled_weight_decay"])

    def _update(self, group: dict[str, Any], p: Tensor, grad: Tensor,
                state: dict[str, Any]) -> None:
        g = -grad if group["maximize"] else grad
        if "step" not in state:
            state["step"] = 0
            state["mu_product"] = 1.0
            state["exp_avg"] = zeros_state(p)
            state["exp_avg_sq"] = zeros_state(p)
        s = self._host_update(group, state)
        p, g, m, v = decayed_moments(p, g, group["weight_decay"],
                                     group["decoupled_weight_decay"], state, s)
        if _half.is_half(p.dtype):
            # PyTorch's kernels, each rounded once (``_half``): v.div(bc2).sqrt(),
            # .add_(eps), two p.addcdiv_ (of the gradient, then of the first moment)
            denom = _half.add_scalar(_half.sqrt(_half.div_scalar(v, s["bias_correction2"])),
                                     group["eps"])
            moved = _half.addcdiv(p, g, denom, -s["grad_step"])
            p.copy_(_half.addcdiv(moved, m, denom, -s["exp_avg_step"]))
            return
        denom = ops.sqrt(v) / s["bias_correction2_sqrt"] + group["eps"]
        p.copy_(p - s["grad_step"] * (g / denom) - s["exp_avg_step"] * (m / denom))


__all__ = ["NAdam"]
