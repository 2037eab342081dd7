"""Muon (Keller Jordan 2024) as ``torch.optim.Muon`` computes it: momentum, then the
update orthogonalized by a quintic Newton-Schulz iteration, for 2-D parameters only.

PyTorch's step (``_single_tensor_muon``), per parameter: ``buf.lerp_(g, 1 - momentum)``;
the update is ``g.lerp(buf, momentum)`` with ``nesterov``, else ``buf``; it is made
bfloat16, transposed when it has more rows than columns, divided by
``max(norm, eps)``, and ``ns_steps`` times ``A = X @ X.T``, ``B = b A + c A @ A``,
``X = a X + B @ X`` (``addmm`` in bfloat16: float32 products, one rounding), then
transposed back; ``p *= 1 - lr * weight_decay``; ``p -= adjusted_lr * X``, with
``adjusted_lr = lr * sqrt(max(1, A / B))`` (``adjust_lr_fn`` None or ``"original"``)
or ``lr * 0.2 * sqrt(max(A, B))`` (``"match_rms_adamw"``) for a parameter of shape
``(A, B)``.

``lr``, ``momentum`` and ``weight_decay`` enter the step as runtime scalars (a schedule
compiles once; ``OneCycleLR`` cycles the momentum); the Newton-Schulz coefficients,
``eps``, ``ns_steps``, ``nesterov`` and ``adjust_lr_fn`` are compiled in. The ``lerp``
is PyTorch's kernel (``_half.lerp``: the form switches at weight 0.5).
"""
from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from nova.core import dtypes as dt
from nova.optim import _checks, _half
from nova.optim.optimizer import Optimizer, zeros_state
from nova.tensor import arrays, ops
from nova.tensor.tensor import Tensor

EPS = 1e-7
DEFAULT_A = 3.4445
DEFAULT_B = -4.7750
DEFAULT_C = 2.0315
DEFAULT_NS_STEPS = 5
_ADJUST = ("original", "match_rms_adamw")


class Muon(Optimizer):
    """``torch.optim.Muon`` (see the module docstring). Only 2-D parameters: use AdamW
    (or another optimizer) for biases, norms and embeddings."""

    _stamp_updates = True
    _runtime_hparams = frozenset({"lr", "momentum", "weight_decay"})

    def __init__(self, params: Iterable[Any], lr: float | Tensor = 1e-3,
                 weight_decay: float = 0.1, momentum: float = 0.95, nesterov: bool = True,
                 ns_coefficients: tuple[float, float, float] = (DEFAULT_A, DEFAULT_B,
                                                                 DEFAULT_C),
                 eps: float = EPS, ns_steps: int = DEFAULT_NS_STEPS,
                 adjust_lr_fn: str | None = None):
        _checks.tensor_lr("Muon", lr)
        if not 0.0 <= lr:
            raise ValueError(f"Muon: Learning rate should be >= 0 but is: {lr}")
        if not 0.0 <= momentum:
            raise ValueError(f"Muon: momentum should be >= 0 but is: {momentum}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Muon: weight decay should be >= 0 but is: {weight_decay}")
        if adjust_lr_fn is not None and adjust_lr_fn not in _ADJUST:
            raise ValueError(f"Muon: Adjust learning rate function {adjust_lr_fn} is not "
                             f"supported (expected None, {' or '.join(map(repr, _ADJUST))})")
        super().__init__(params, dict(lr=lr, weight_decay=weight_decay, momentum=momentum,
                                      nesterov=nesterov, ns_coefficients=ns_coefficients,
                                      eps=eps, ns_steps=ns_steps, adjust_lr_fn=adjust_lr_fn))
        for group in self.param_groups:
            for p in group["params"]:
                if p.ndim != 2:
                    raise ValueError("Muon only supports 2D parameters whereas we found a "
                                     f"parameter with size: {tuple(p.shape)}")

    def _host_update(self, group: dict[str, Any], state: dict[str, Any]) -> dict[str, Any]:
        """The step's scalars: the two ``lerp`` weights' runtime values, the decay
        ``1 - lr * wd`` and ``-adjusted_lr`` (for the parameter's shape, which the host
        side learns from ``state``'s buffer)."""
        lr, m = float(group["lr"]), group["momentum"]
        scalars = {}
        for name, w in (("1 - momentum", 1.0 - m), ("momentum", m)):
            coeff, from_self = _lerp_weight(w, self._param_dtype)
            scalars[name] = self._scalar(f"{name} (lerp)", coeff)
            scalars[name + " from self"] = self._scalar(f"{name} (lerp from self)",
                                                        from_self)
        scalars["decay"] = self._scalar("decay", 1.0 - lr * group["weight_decay"])
        shape = tuple(state["momentum_buffer"].shape)
        step = -adjust_lr(lr, group["adjust_lr_fn"], shape)
        if _half.is_half(self._param_dtype):        # add_'s alpha, in the half type
            step = _half.half_value(step, self._param_dtype)
        scalars["step"] = self._scalar("-adjusted_lr", step)
        return scalars

    def _update(self, group: dict[str, Any], p: Tensor, grad: Tensor,
                state: dict[str, Any]) -> None:
        if p.dtype.category != dt.FLOAT:
            raise RuntimeError(f"Muon does not support {p.dtype.name} parameters "
                               "(floating point only)")
        if grad.ndim != 2:
            raise ValueError(f"Muon: Param gradient must be a 2D matrix, got shape "
                             f"{tuple(grad.shape)}")
        if "momentum_buffer" not in state:
            state["momentum_buffer"] = zeros_state(p)
        s = self._host_update(group, state)
        buf = state["momentum_buffer"]
        buf = buf.copy_(_lerp(buf, grad, s["1 - momentum"], s["1 - momentum from self"]))
        update = _lerp(grad, buf, s["momentum"], s["momentum from self"]) \
            if group["nesterov"] else buf
        ortho = zeropower_via_newtonschulz(update, group["ns_coefficients"],
                                           group["ns_steps"], group["eps"])
        if _half.is_half(p.dtype):
            p = p.copy_(_half.mul(p, s["decay"]))
            p.copy_(_half.add(p, ortho.to(p.dtype), s["step"]))
            return
        p = p.copy_(p * s["decay"])
        # p.add_(ortho, alpha=-adjusted_lr): the bfloat16 update widened (exactly),
        # an fma for float32 as PyTorch's vectorized kernel
        wide = ortho.to(p.dtype)
        if p.dtype == dt.float32:
            p.copy_(_half.fma(s["step"], wide, p))
        else:
            p.copy_(p + s["step"] * wide)


def zeropower_via_newtonschulz(grad: Tensor, ns_coefficients: tuple[float, float, float],
                               ns_steps: int, eps: float) -> Tensor:
    """PyTorch's ``_zeropower_via_newtonschulz``: ``grad`` (2-D) orthogonalized
    approximately in bfloat16 by ``ns_steps`` quintic Newton-Schulz iterations, with
    PyTorch's checks and errors."""
    if ns_steps >= 100:
        raise ValueError("Muon: Number of steps must be less than 100 for computational "
                         f"efficiency (got ns_steps={ns_steps})")
    if grad.ndim != 2:
        raise ValueError(f"Muon: Input tensor gradient must be a 2D matrix, got shape "
                         f"{tuple(grad.shape)}")
    if len(ns_coefficients) != 3:
        raise ValueError("Muon: Coefficients must be a tuple of exactly 3 values, got "
                         f"{tuple(ns_coefficients)}")
    a, b, c = (float(v) for v in ns_coefficients)
    x = grad.to(dt.bfloat16)
    tall = grad.shape[0] > grad.shape[1]
    if tall:
        x = x.T
    norm = ops.sqrt(ops.sum(x.float() * x.float())).to(dt.bfloat16)   # x.norm()
    x = _half.div(x, ops.clamp(norm, min=eps).to(dt.bfloat16))
    for _ in range(ns_steps):
        gram = ops.matmul(x, x.T)
        gram_update = arrays.addmm(gram, gram, gram, beta=b, alpha=c)
        x = arrays.addmm(x, gram_update, x, beta=a)
    return x.T if tall else x


def adjust_lr(lr: float, adjust_lr_fn: str | None, param_shape: tuple[int, ...]) -> float:
    """PyTorch's ``_adjust_lr``: the learning rate scaled for a parameter of shape
    ``(A, B)``."""
    rows, cols = param_shape[:2]
    if adjust_lr_fn is None or adjust_lr_fn == "original":
        ratio = math.sqrt(max(1, rows / cols))
    elif adjust_lr_fn == "match_rms_adamw":
        ratio = 0.2 * math.sqrt(max(rows, cols))
    else:
        ratio = 1.0
    return lr * ratio


def _lerp_weight(w: float, dtype: dt.DType) -> tuple[float, float]:
    """``lerp``'s two runtime values (``_half.lerp_weight``); in double for float64."""
    if dtype != dt.float64:
        return _half.lerp_weight(w)
    return (w, 1.0) if abs(w) < 0.5 else (w - 1.0, 0.0)


def _lerp(x: Tensor, end: Tensor, coeff: Tensor, from_self: Tensor) -> Tensor:
    """``x.lerp(end, w)`` as PyTorch's kernel (one rounding below float64)."""
    if x.dtype == dt.float64:
        base = ops.where(from_self > 0.5, x, end)
        return base + coeff * (end - x)
    return _half.lerp(x, end, coeff, from_self)


__all__ = ["Muon"]
