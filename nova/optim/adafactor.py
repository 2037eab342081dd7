"""Adafactor (Shazeer & Stern 2018) as ``torch.optim.Adafactor`` computes it.

PyTorch's update (``_single_tensor_adafactor``), per parameter and step ``t``:
``beta2_t = 1 - t ** beta2_decay``, ``rho = min(lr, 1 / sqrt(t))``, ``alpha =
max(eps2, RMS(p)) * rho`` (from ``p`` before the decay), ``p *= 1 - lr * wd``; for a
parameter of two or more dims the second moment is factored over its last two dims --
``row_var`` (last dim 1) and ``col_var`` (second-to-last dim 1) follow the row and
column means of ``g ** 2`` by ``lerp_(mean, 1 - beta2_t)``, and the estimate is
``row_var @ col_var / max(mean(row_var), eps1)`` -- else ``variance`` follows ``g ** 2``
itself; then ``u = g / sqrt(max(estimate, eps1 ** 2))``, ``p -= alpha / max(1, RMS(u) /
d) * u``. ``eps1=None`` is the machine epsilon of the first updated parameter's dtype
in the group (PyTorch resolves it once per group and step).

PyTorch reads ``RMS(p)`` and ``RMS(u)`` on the host (``.item()``) and finishes the step
size in double. Here they stay on the device: the norms in the parameter's dtype, then
the step-size arithmetic in float64 (PyTorch's Python floats), rounded to the
parameter's dtype where PyTorch passes it to ``add_`` -- so the step is recorded
without a host read and compiles with the rest of the training step. ``lr`` enters
through runtime scalars (``rho`` and the decay), so a schedule compiles once; ``eps``,
``d`` and ``beta2_decay`` are compiled in. The ``lerp_`` is PyTorch's kernel (its weight
switches form at 0.5, so the form is a runtime input too), with one rounding in float32
(``_half.fma``). A half-precision parameter computes each of PyTorch's ops in float32
and rounds it to its dtype, as PyTorch's kernels do (``_half``).
"""
from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import numpy as np

from nova.core import dtypes as dt
from nova.optim import _checks, _half
from nova.optim.optimizer import Optimizer
from nova.tensor import ops
from nova.tensor.creation import tensor
from nova.tensor.tensor import Tensor

_FACTORED = ("row_var", "col_var")


class Adafactor(Optimizer):
    """``torch.optim.Adafactor`` (see the module docstring)."""

    _stamp_updates = True
    _runtime_hparams = frozenset({"lr"})

    def __init__(self, params: Iterable[Any], lr: float | Tensor = 1e-2,
                 beta2_decay: float = -0.8, eps: tuple[float | None, float] = (None, 1e-3),
                 d: float = 1.0, weight_decay: float = 0.0, *,
                 foreach: bool | None = None, maximize: bool = False):
        _checks.tensor_lr("Adafactor", lr)
        _check_args(lr, beta2_decay, eps, d, weight_decay)
        _checks.kernel_flags("Adafactor", False, foreach)
        super().__init__(params, dict(lr=lr, beta2_decay=beta2_decay, eps=tuple(eps), d=d,
                                      weight_decay=weight_decay, foreach=foreach,
                                      maximize=maximize))

    # ------------------------------------------------------------ host side

    def _host_update(self, group: dict[str, Any], state: dict[str, Any]) -> dict[str, Any]:
        """Step count, then the step's scalars: the ``lerp_`` weight ``t ** beta2_decay``
        (its two runtime values), ``rho`` (float64: PyTorch's Python float enters the
        step-size arithmetic) and the decay ``1 - lr * wd``."""
        state["step"] += 1
        t = float(state["step"])
        lr, wd = float(group["lr"]), group["weight_decay"]
        coeff, from_self = _lerp_weight(t ** group["beta2_decay"], self._param_dtype)
        scalars = {"lerp": self._scalar("1 - beta2_t (lerp)", coeff),
                   "lerp from self": self._scalar("1 - beta2_t (lerp from self)", from_self)}
        kept = self._scalar_dtype
        self._scalar_dtype = dt.float64
        try:
            scalars["rho"] = self._scalar("rho_t", min(lr, 1 / (t ** 0.5)))
        finally:
            self._scalar_dtype = kept
        if wd != 0:
            scalars["decay"] = self._scalar("decay", 1.0 - lr * wd)
        return scalars

    def _baked(self, group: dict[str, Any]) -> dict[str, Any]:
        """The decay is a runtime scalar (only whether there is one is structure); the
        resolved ``eps1`` is compiled in."""
        baked = super()._baked(group)
        baked["weight_decay"] = group["weight_decay"] != 0
        baked["eps1"] = _eps1(group)
        return baked

    # ------------------------------------------------------------ the update

    def _update(self, group: dict[str, Any], p: Tensor, grad: Tensor,
                state: dict[str, Any]) -> None:
        if p.dtype.category != dt.FLOAT:
            raise RuntimeError(f"Adafactor does not support {p.dtype.name} parameters "
                               "(floating point only)")
        g = -grad if group["maximize"] else grad
        if "step" not in state:
            _init_state(state, p)
        s = self._host_update(group, state)
        eps1, eps2 = _eps1(group), group["eps"][1]
        r = _rounder(p.dtype)
        x, gc = _compute(p), _compute(g)
        alpha = _at_least(_rms(x, r), eps2) * s["rho"]      # (p before the decay)
        if "decay" in s:
            x = r(x * s["decay"])
            p = p.copy_(x.to(p.dtype))
        if g.ndim > 1:
            est = self._factored(g.ndim, gc, state, s, eps1, r)
        else:
            square = r(gc * gc)
            est = _lerp(_compute(state["variance"]), square, s, r)
            state["variance"].copy_(est.to(p.dtype))
        u = r(ops.clamp(est, min=eps1 * eps1))
        u = r(r(1.0 / ops.sqrt(u)) * gc)                    # rsqrt_(), then mul_(grad)
        denom = _at_least(_rms(u, r) / group["d"], 1.0)
        coef = -alpha / denom
        p.copy_(_apply(x, u, coef, p.dtype))

    @staticmethod
    def _factored(ndim: int, gc: Tensor, state: dict[str, Any], s: dict[str, Any],
                  eps1: float, r: Any) -> Tensor:
        """The row and column factors updated in place, and the estimate
        ``row_var @ col_var / max(mean(row_var), eps1)``."""
        dtype = state["row_var"].dtype
        factors = []
        for key, dim in (("row_var", ndim - 1), ("col_var", ndim - 2)):
            # torch.norm(g, dim).square_().div_(g.size(dim))
            norm = r(ops.sqrt(ops.sum(gc * gc, dim, keepdim=True)))
            mean = r(r(norm * norm) / gc.shape[dim])
            new = _lerp(_compute(state[key]), mean, s, r)
            state[key].copy_(new.to(dtype))
            factors.append(new)
        row, col = factors
        est = r(row * col)          # the outer product: one product per element
        scale = r(ops.clamp(r(ops.mean(row, ndim - 2, keepdim=True)), min=eps1))
        return r(est / scale)

    def _restored(self, key: str, v: Any, p: Tensor, index: Any) -> Any:
        """The factored second moments have their own shapes: checked against the
        ones ``p`` would get, then moved to ``p``'s device and dtype."""
        if key in _FACTORED and isinstance(v, Tensor):
            want = _factor_shape(key, p.shape)
            if p.ndim < 2 or tuple(v.shape) != want:
                raise ValueError(f"Adafactor.load_state_dict: state {key!r} of parameter "
                                 f"{index} has shape {tuple(v.shape)}, a parameter of shape "
                                 f"{tuple(p.shape)} needs {want}")
            return v.to(p.device, p.dtype)
        return super()._restored(key, v, p, index)


# ---------------------------------------------------------------- helpers

def _check_args(lr: Any, beta2_decay: float, eps: Any, d: float, weight_decay: float) -> None:
    """PyTorch's argument checks and words, after the optimizer's name."""
    if not 0.0 <= lr:
        raise ValueError(f"Adafactor: Learning rate should be >= 0 but is: {lr}")
    if not 0.0 >= beta2_decay:
        raise ValueError(f"Adafactor: beta2_decay should be <= 0 but is: {beta2_decay}")
    if not isinstance(eps, (tuple, list)) or len(eps) != 2:
        raise ValueError(f"Adafactor: eps must be a pair (eps1 or None, eps2), got {eps!r}")
    if eps[0] is not None and not 0.0 <= eps[0]:
        raise ValueError(f"Adafactor: epsilon1 should be >= 0 but is: {eps[0]}")
    if not 0.0 <= eps[1]:
        raise ValueError(f"Adafactor: epsilon2 should be >= 0 but is: {eps[1]}")
    if not 1.0 <= d:
        raise ValueError(f"Adafactor: Clipping threshold d should be >= 1 but is: {d}")
    if not 0.0 <= weight_decay:
        raise ValueError(f"Adafactor: weight_decay should be >= 0 but is: {weight_decay}")


def _eps1(group: dict[str, Any]) -> float | None:
    """``eps1``, or where it is None the machine epsilon of the dtype of the group's
    first parameter with a gradient (the first parameter if none has one; None for a
    group without parameters), as PyTorch's loop resolves it."""
    eps1 = group["eps"][0]
    if eps1 is not None:
        return float(eps1)
    params = group["params"]
    first = next((p for p in params if p.grad is not None), params[0] if params else None)
    return None if first is None else dt.finfo(first.dtype).eps


def _factor_shape(key: str, shape: tuple[int, ...]) -> tuple[int, ...]:
    out = list(shape)
    out[-1 if key == "row_var" else -2] = 1
    return tuple(out)


def _init_state(state: dict[str, Any], p: Tensor) -> None:
    """PyTorch's first-step state: ``step``, and zero ``row_var`` and ``col_var`` for a
    parameter of two or more dims, else a zero ``variance``."""
    state["step"] = 0
    shapes = {k: _factor_shape(k, p.shape) for k in _FACTORED} if p.ndim > 1 else \
        {"variance": tuple(p.shape)}
    device = p.device if p.node.device == "cuda" else None
    for key, shape in shapes.items():
        state[key] = tensor(np.zeros(shape, dtype=p.dtype.np), dtype=p.dtype, device=device)


def _compute(t: Tensor) -> Tensor:
    """``t`` in the dtype its update is computed in: float32 for the half types."""
    return t.float() if _half.is_half(t.dtype) else t


def _rounder(dtype: dt.DType) -> Any:
    """Rounding of each of PyTorch's ops to a half-precision ``dtype`` (the value kept in
    float32); nothing for the others."""
    if not _half.is_half(dtype):
        return lambda t: t
    return lambda t: t.to(dtype).float()


def _rms(x: Tensor, r: Any) -> Tensor:
    """``x.norm(2).item() / numel ** 0.5``: the norm in ``x``'s (rounded) dtype, the
    division in float64."""
    norm = r(ops.sqrt(ops.sum(x * x)))
    return norm.double() / math.sqrt(x.numel())


def _at_least(x: Tensor, floor: float) -> Tensor:
    """Python's ``max(floor, x)``: ``x`` only where it is larger (a NaN gives
    ``floor``)."""
    return ops.where(x > floor, x, floor)


def _lerp_weight(w: float, dtype: dt.DType) -> tuple[float, float]:
    """``lerp_``'s two runtime values (``_half.lerp_weight``); for float64 parameters
    in double."""
    if dtype != dt.float64:
        return _half.lerp_weight(w)
    return (w, 1.0) if abs(w) < 0.5 else (w - 1.0, 0.0)


def _lerp(x: Tensor, end: Tensor, s: dict[str, Any], r: Any) -> Tensor:
    """``x.lerp_(end, w)`` as PyTorch's CPU kernel: ``fma(coeff, end - x, base)``, one
    rounding (float64: two)."""
    if x.dtype == dt.float64:
        base = ops.where(s["lerp from self"] > 0.5, x, end)
        return base + s["lerp"] * (end - x)
    return r(_half.lerp(x, end, s["lerp"], s["lerp from self"]))


def _apply(x: Tensor, u: Tensor, coef: Tensor, dtype: dt.DType) -> Tensor:
    """``p.add_(u, alpha=coef)`` for float64 ``coef``: converted as PyTorch converts the
    Scalar (to float32; to the half type through float32), then ``p + coef * u`` -- an
    fma for float32, as PyTorch's vectorized kernel."""
    if dtype == dt.float64:
        return x + coef * u
    c32 = coef.float()
    if _half.is_half(dtype):
        return (x + u * c32.to(dtype).float()).to(dtype)
    return _half.fma(c32, u, x)


__all__ = ["Adafactor"]
