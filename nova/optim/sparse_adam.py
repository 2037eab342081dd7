"""SparseAdam: Adam that touches only the rows a gradient has, PyTorch's update rule.

PyTorch's ``SparseAdam`` takes sparse gradients (``nn.Embedding(sparse=True)``) and
updates the moments and the parameter only at the rows the gradient holds; the other
rows keep their moments undecayed ("lazy Adam"). Nova's gradients are dense (an
embedding's ``sparse=True`` is accepted and gives the same values densely), so the rows a
sparse gradient would hold are found from the values: a row (an index along dim 0, an
element of a 1-D parameter) whose gradient is zero everywhere is treated as absent. The
one difference from PyTorch: a row that was looked up but whose gradient is exactly zero
everywhere is present in PyTorch's sparse gradient (its moments decay) and absent here.
PyTorch refuses dense gradients ("consider Adam instead"); Nova cannot tell them apart,
so it applies the rule above to every parameter.
"""
from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from nova.optim import _checks, _half
from nova.optim.optimizer import Optimizer, zeros_state
from nova.tensor import ops
from nova.tensor.tensor import Tensor


def present_rows(grad: Tensor) -> Tensor:
    """Bool mask of the rows (dim 0) where ``grad`` has a nonzero (or NaN) entry, shaped
    to broadcast against ``grad``: the rows a sparse gradient would hold."""
    nonzero = ops.ne(grad, 0)
    if grad.ndim <= 1:
        return nonzero
    return nonzero.reshape(grad.shape[0], -1).any(1).reshape((grad.shape[0],) +
                                                             (1,) * (grad.ndim - 1))


class SparseAdam(Optimizer):
    """At the rows the gradient holds (``present_rows``): ``m += (1-b1)(g - m)``,
    ``v += (1-b2)(g^2 - v)``, ``p -= lr sqrt(1-b2^t) / (1-b1^t) m / (sqrt(v) + eps)``;
    every other row of ``p``, ``m`` and ``v`` is left as it is. The step count ``t``
    counts every ``step()``, as PyTorch's. Each parameter's step count lives on the host;
    ``lr sqrt(1-b2^t) / (1-b1^t)`` and the betas enter the step as runtime inputs. A
    half-precision parameter's rows are updated by PyTorch's kernels, each rounded once
    (``_half``)."""

    _stamp_updates = True
    _runtime_hparams = frozenset({"lr", "betas"})

    def __init__(self, params: Iterable[Any], lr: float = 1e-3,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 maximize: bool = False):
        _checks.tensor_lr("SparseAdam", lr)
        _checks.positive("SparseAdam", lr=lr, eps=eps)
        betas = _checks.betas("SparseAdam", betas)
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, maximize=maximize))

    def _host_update(self, group: dict[str, Any], state: dict[str, Any]) -> dict[str, Any]:
        b1, b2 = group["betas"]
        state["step"] += 1
        t = state["step"]
        step_size = group["lr"] * math.sqrt(1.0 - b2 ** t) / (1.0 - b1 ** t)
        return {"1 - beta1": self._scalar("1 - beta1", 1.0 - b1),
                "1 - beta2": self._scalar("1 - beta2", 1.0 - b2),
                "-step_size": self._scalar("-step_size", -step_size)}

    def _update(self, group: dict[str, Any], p: Tensor, grad: Tensor,
                state: dict[str, Any]) -> None:
        g = -grad if group["maximize"] else grad
        if "step" not in state:
            state["step"] = 0
            state["exp_avg"] = zeros_state(p)
            state["exp_avg_sq"] = zeros_state(p)
        s = self._host_update(group, state)
        rows = present_rows(g)
        m_old, v_old = state["exp_avg"], state["exp_avg_sq"]
        # PyTorch's order of operations, so the present rows match it bit for bit:
        # grad.sub(exp_avg).mul_(1 - b1), grad.pow(2).sub_(exp_avg_sq).mul_(1 - b2), the
        # moments plus those, sqrt_().add_(eps), -step_size * numer.div_(denom), p.add_
        # (a half-precision parameter's: each kernel rounded once, by ``_half``)
        if _half.is_half(p.dtype):
            m_step = _half.mul((g.float() - m_old.float()).to(p.dtype), s["1 - beta1"])
            v_step = _half.mul(((g * g).float() - v_old.float()).to(p.dtype),
                               s["1 - beta2"])
            m = (m_step.float() + m_old.float()).to(p.dtype)
            v = (v_step.float() + v_old.float()).to(p.dtype)
            denom = _half.add_scalar(_half.sqrt(v), group["eps"])
            delta = _half.mul(_half.div(m, denom), s["-step_size"])
            moved = (p.float() + delta.float()).to(p.dtype)
        else:
            m = (g - m_old) * s["1 - beta1"] + m_old
            v = (g * g - v_old) * s["1 - beta2"] + v_old
            moved = p + s["-step_size"] * (m / (ops.sqrt(v) + group["eps"]))
        state["exp_avg"].copy_(ops.where(rows, m, m_old))
        state["exp_avg_sq"].copy_(ops.where(rows, v, v_old))
        p.copy_(ops.where(rows, moved, p))


__all__ = ["SparseAdam", "present_rows"]
