"""Adam (L2 weight decay) and AdamW (decoupled weight decay), PyTorch's update rule."""
from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from nova.optim import _checks, _half
from nova.optim._moments import beta_scalars, decay_baked, decay_scalar, decayed_moments
from nova.optim.optimizer import Optimizer, zeros_state
from nova.tensor import ops
from nova.tensor.tensor import Tensor


class Adam(Optimizer):
    """``m = b1 m + (1-b1) g``; ``v = b2 v + (1-b2) g^2``;
    ``p -= lr / (1-b1^t) * m / (sqrt(v) / sqrt(1-b2^t) + eps)`` (with ``amsgrad``, ``v``
    in the denominator is the running maximum of the ``v`` so far).

    The step count ``t`` lives on the host; ``lr/(1-b1^t)``, ``sqrt(1-b2^t)``, and
    ``b1``, ``1-b1``, ``b2``, ``1-b2`` enter the step as runtime inputs, so a schedule of
    the betas (``OneCycleLR`` cycles ``betas[0]``) neither recompiles nor, under
    ``nv.compile``, replays a stale value. (Each is rounded to float32 on the host, as
    the constants they replace were: the update is bit-identical to a baked one.)
    """

    decoupled = False
    _stamp_updates = True
    _runtime_hparams = frozenset({"lr", "betas"})

    def __init__(self, params: Iterable[Any], lr: float = 1e-3,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0, amsgrad: bool = False, *,
                 foreach: bool | None = None, maximize: bool = False,
                 capturable: bool = False, differentiable: bool = False,
                 fused: bool | None = None, decoupled_weight_decay: bool = False):
        name = type(self).__name__
        _checks.kernel_flags(name, differentiable, foreach, fused)
        _checks.tensor_lr(name, lr)
        _checks.nonnegative(name, lr=lr, eps=eps)
        betas = _checks.betas(name, betas)
        _checks.nonnegative(name, weight_decay=weight_decay)
        # (PyTorch's group layout: its keys in its order)
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                                      amsgrad=amsgrad, maximize=maximize, foreach=foreach,
                                      capturable=capturable, differentiable=differentiable,
                                      fused=fused,
                                      decoupled_weight_decay=bool(decoupled_weight_decay
                                                                  or self.decoupled)))
        # (step key, the step's scalar table, scalars): see _host_update
        self._host_memo: tuple[tuple, dict, dict[str, Any], list | None] | None = None

    def _host_update(self, group: dict[str, Any], state: dict[str, Any]) -> dict[str, Any]:
        b1, b2 = group["betas"]
        state["step"] += 1
        t = state["step"]
        lr, wd = group["lr"], group["weight_decay"]
        # Every parameter of a step usually has the same step count and group values:
        # then its scalars are the previous parameter's, drawn again in the same order
        # (what _scalar would give, 7 calls later; 76 times a medium GPT step).
        decoupled = group["decoupled_weight_decay"]
        key = (t, lr, wd, b1, b2, decoupled, self._scalar_dtype, self._param_dtype)
        memo = self._host_memo
        if memo is not None and memo[0] == key and memo[1] is self._scalars and \
                (self._drawn is None or memo[3] is not None):
            if self._drawn is not None:
                # the draws under the names _scalar gave them (a half-precision
                # parameter's dict keys, "lerp1", are not those names: a second half
                # parameter's update failed its template's check)
                self._drawn.extend(memo[3])
            return memo[2]
        start = None if self._drawn is None else len(self._drawn)
        scalars = {}
        decay_scalar(self, scalars, lr, wd, decoupled)
        scalars["step_size"] = self._scalar("step_size", lr / (1.0 - b1 ** t))
        scalars["bias_correction2_sqrt"] = self._scalar("bias_correction2_sqrt",
                                                        math.sqrt(1.0 - b2 ** t))
        beta_scalars(self, scalars, b1, b2)
        drawn = None if start is None else self._drawn[start:]
        self._host_memo = (key, self._scalars, scalars, drawn)
        return scalars

    def _baked(self, group: dict[str, Any]) -> dict[str, Any]:
        """AdamW's decay is a runtime scalar: only whether there is one is structure."""
        return decay_baked(super()._baked(group), group, group["decoupled_weight_decay"])

    def _update(self, group: dict[str, Any], p: Tensor, grad: Tensor,
                state: dict[str, Any]) -> None:
        g = -grad if group["maximize"] else grad
        amsgrad = group.get("amsgrad", False)
        if "step" not in state:
            state["step"] = 0
            state["exp_avg"] = zeros_state(p)
            state["exp_avg_sq"] = zeros_state(p)
            if amsgrad:
                state["max_exp_avg_sq"] = zeros_state(p)
        s = self._host_update(group, state)
        p, g, m, v = decayed_moments(p, g, group["weight_decay"],
                                     group["decoupled_weight_decay"], state, s)
        if amsgrad:         # the largest second moment so far (PyTorch's AMSGrad)
            v = state["max_exp_avg_sq"].copy_(ops.maximum(state["max_exp_avg_sq"], v))
        if _half.is_half(p.dtype):
            # PyTorch's kernels: (v.sqrt() / bc2_sqrt).add_(eps), p.addcdiv_(m, denom,
            # value=-step_size), each rounded to the half type once (``_half``)
            denom = _half.div_scalar(_half.sqrt(v), s["bias_correction2_sqrt"])
            denom = _half.add_scalar(denom, group["eps"])
            p.copy_(_half.addcdiv(p, m, denom, -s["step_size"]))
            return
        denom = ops.sqrt(v) / s["bias_correction2_sqrt"] + group["eps"]
        p.copy_(p - s["step_size"] * (m / denom))


class AdamW(Adam):
    """Adam with decoupled weight decay: ``p *= 1 - lr*wd`` before the Adam step."""

    decoupled = True

    def __init__(self, params: Iterable[Any], lr: float = 1e-3,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 1e-2, amsgrad: bool = False, *, maximize: bool = False,
                 foreach: bool | None = None, capturable: bool = False,
                 differentiable: bool = False, fused: bool | None = None):
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, maximize=maximize,
                         foreach=foreach, capturable=capturable,
                         differentiable=differentiable, fused=fused)
