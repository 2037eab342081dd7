"""RMSprop and Adagrad, PyTorch's update rules."""
from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from nova.optim import _checks, _half
from nova.optim.optimizer import Optimizer, zeros_state
from nova.tensor import ops
from nova.tensor.creation import tensor
from nova.tensor.tensor import Tensor


class RMSprop(Optimizer):
    """``v = alpha v + (1-alpha) g^2``; centered: ``a = alpha a + (1-alpha) g`` and the
    denominator ``sqrt(v - a^2) + eps``, else ``sqrt(v) + eps``; with momentum ``b =
    momentum b + g / denom`` and ``p -= lr b``, else ``p -= lr g / denom``. Weight decay
    adds ``wd p`` to ``g``. ``lr`` and ``momentum`` are runtime inputs of the step
    (``OneCycleLR`` cycles the momentum); whether there is a momentum is structure."""

    _stamp_updates = True
    _runtime_hparams = frozenset({"lr", "momentum"})

    def __init__(self, params: Iterable[Any], lr: float = 1e-2, alpha: float = 0.99,
                 eps: float = 1e-8, weight_decay: float = 0, momentum: float = 0,
                 centered: bool = False, capturable: bool = False,
                 foreach: bool | None = None, maximize: bool = False,
                 differentiable: bool = False):
        # (PyTorch checks alpha >= 0 only: an alpha above 1 is its business)
        _checks.tensor_lr("RMSprop", lr)
        _checks.nonnegative("RMSprop", lr=lr, eps=eps, momentum=momentum,
                            weight_decay=weight_decay, alpha=alpha)
        _checks.kernel_flags("RMSprop", differentiable, foreach)
        super().__init__(params, dict(lr=lr, momentum=momentum, alpha=alpha, eps=eps,
                                      centered=centered, weight_decay=weight_decay,
                                      capturable=capturable, foreach=foreach,
                                      maximize=maximize, differentiable=differentiable))

    def _host_update(self, group: dict[str, Any], state: dict[str, Any]) -> dict[str, Any]:
        state["step"] += 1
        lr = group["lr"]
        if group["momentum"] and _half.is_half(self._param_dtype):
            lr = _half.half_value(lr, self._param_dtype)    # p.add_(buf, alpha=-lr)
        scalars = {"lr": self._scalar("lr", lr)}
        if group["momentum"]:
            scalars["momentum"] = self._scalar("momentum", group["momentum"])
        return scalars

    def _baked(self, group: dict[str, Any]) -> dict[str, Any]:
        return {**super()._baked(group), "momentum != 0": bool(group["momentum"])}

    def _update(self, group: dict[str, Any], p: Tensor, grad: Tensor,
                state: dict[str, Any]) -> None:
        g = -grad if group["maximize"] else grad
        if "step" not in state:
            state["step"] = 0
            state["square_avg"] = zeros_state(p)
            if group["centered"]:
                state["grad_avg"] = zeros_state(p)
        if group["momentum"] and "momentum_buffer" not in state:
            # (also when a schedule turns the momentum on after the first step)
            state["momentum_buffer"] = zeros_state(p)
        s = self._host_update(group, state)
        if _half.is_half(p.dtype):
            self._update_half(group, p, g, state, s)
            return
        if group["weight_decay"]:
            g = g + group["weight_decay"] * p
        alpha = group["alpha"]
        v = state["square_avg"].copy_(state["square_avg"] * alpha + g * g * (1.0 - alpha))
        if group["centered"]:
            a = state["grad_avg"].copy_(state["grad_avg"] * alpha + g * (1.0 - alpha))
            denom = ops.sqrt(v - a * a) + group["eps"]
        else:
            denom = ops.sqrt(v) + group["eps"]
        if group["momentum"]:
            buf = state["momentum_buffer"].copy_(state["momentum_buffer"] * s["momentum"]
                                                 + g / denom)
            p.copy_(p - s["lr"] * buf)
        else:
            p.copy_(p - s["lr"] * (g / denom))

    @staticmethod
    def _update_half(group: dict[str, Any], p: Tensor, g: Tensor, state: dict[str, Any],
                     s: dict[str, Any]) -> None:
        """The update of a half-precision ``p`` as PyTorch's kernels round it
        (``_half``): ``g.add(p, alpha=wd)``, ``square_avg.mul_(alpha).addcmul_(g, g,
        value=1 - alpha)``, centered ``grad_avg.lerp_(g, 1 - alpha)`` and
        ``square_avg.addcmul(grad_avg, grad_avg, value=-1).sqrt_()``, ``avg.add_(eps)``,
        then ``buf.mul_(momentum).addcdiv_(g, avg)`` and ``p.add_(buf, alpha=-lr)`` or
        ``p.addcdiv_(g, avg, value=-lr)``."""
        if group["weight_decay"]:
            g = _half.add(g, p, _half.half_value(group["weight_decay"], p.dtype))
        alpha = group["alpha"]
        v = state["square_avg"].copy_(_half.addcmul(_half.mul(state["square_avg"], alpha),
                                                    g, g, 1.0 - alpha))
        if group["centered"]:
            a = state["grad_avg"].copy_(_half.lerp(state["grad_avg"], g,
                                                   *_half.lerp_weight(1.0 - alpha)))
            avg = _half.sqrt(_half.addcmul(v, a, a, -1.0))
        else:
            avg = _half.sqrt(v)
        avg = _half.add_scalar(avg, group["eps"])
        if group["momentum"]:
            buf = state["momentum_buffer"].copy_(
                _half.addcdiv(_half.mul(state["momentum_buffer"], s["momentum"]), g, avg))
            p.copy_(_half.add(p, buf, -s["lr"]))
        else:
            p.copy_(_half.addcdiv(p, g, avg, -s["lr"]))


class Adagrad(Optimizer):
    """``sum += g^2``; ``p -= lr / (1 + (t-1) lr_decay) * g / (sqrt(sum) + eps)``, the
    sum starting at ``initial_accumulator_value``; weight decay adds ``wd p`` to ``g``.
    The decayed rate is a runtime input (the step count lives on the host)."""

    _stamp_updates = True
    _runtime_hparams = frozenset({"lr", "lr_decay"})      # both only through ``clr``

    def __init__(self, params: Iterable[Any], lr: float = 1e-2, lr_decay: float = 0,
                 weight_decay: float = 0, initial_accumulator_value: float = 0,
                 eps: float = 1e-10, foreach: bool | None = None, *,
                 maximize: bool = False, differentiable: bool = False,
                 fused: bool | None = None):
        _checks.tensor_lr("Adagrad", lr)
        _checks.nonnegative("Adagrad", lr=lr, lr_decay=lr_decay, weight_decay=weight_decay,
                            initial_accumulator_value=initial_accumulator_value, eps=eps)
        _checks.kernel_flags("Adagrad", differentiable, foreach, fused)
        super().__init__(params, dict(lr=lr, lr_decay=lr_decay, eps=eps,
                                      weight_decay=weight_decay,
                                      initial_accumulator_value=initial_accumulator_value,
                                      foreach=foreach, maximize=maximize,
                                      differentiable=differentiable, fused=fused))
        for group in self.param_groups:     # PyTorch makes the state here, not at step 1
            for p in group["params"]:
                self._init_state(p)

    def _init_state(self, p: Tensor) -> dict[str, Any]:
        """``p``'s state as PyTorch's ``Adagrad`` makes it: ``step`` 0 and ``sum`` full
        of the optimizer's ``initial_accumulator_value`` (in ``p``'s dtype), for every
        parameter at construction and for a group added later at its first step."""
        state = self.state.setdefault(p, {})
        if "step" not in state:
            state["step"] = 0
            init = self.defaults["initial_accumulator_value"]
            state["sum"] = tensor(np.full(p.shape, init, dtype=p.dtype.np), dtype=p.dtype,
                                  device=p.device if p.node.device == "cuda" else None)
        return state

    def _host_update(self, group: dict[str, Any], state: dict[str, Any]) -> dict[str, Any]:
        state["step"] += 1
        clr = group["lr"] / (1.0 + (state["step"] - 1) * group["lr_decay"])
        return {"clr": self._scalar("clr", clr)}

    def _update(self, group: dict[str, Any], p: Tensor, grad: Tensor,
                state: dict[str, Any]) -> None:
        g = -grad if group["maximize"] else grad
        if "step" not in state:
            # a state reset or a parameter added since: PyTorch's _init_group makes it
            state["step"] = 0
            state["sum"] = zeros_state(p)
            if group["initial_accumulator_value"]:
                state["sum"].copy_(state["sum"] + group["initial_accumulator_value"])
        s = self._host_update(group, state)
        if _half.is_half(p.dtype):
            # PyTorch's kernels, each rounded once (``_half``): g.add(p, alpha=wd),
            # sum.addcmul_(g, g, value=1), sum.sqrt().add_(eps), p.addcdiv_(g, std,
            # value=-clr)
            if group["weight_decay"]:
                g = _half.add(g, p, _half.half_value(group["weight_decay"], p.dtype))
            acc = state["sum"].copy_(_half.addcmul(state["sum"], g, g, 1.0))
            std = _half.add_scalar(_half.sqrt(acc), group["eps"])
            p.copy_(_half.addcdiv(p, g, std, -s["clr"]))
            return
        if group["weight_decay"]:
            g = g + group["weight_decay"] * p
        acc = state["sum"].copy_(state["sum"] + g * g)
        p.copy_(p - s["clr"] * (g / (ops.sqrt(acc) + group["eps"])))


__all__ = ["RMSprop", "Adagrad"]
