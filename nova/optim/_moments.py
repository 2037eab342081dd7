"""What Adam, NAdam and RAdam share: their beta scalars, the weight decay before the
update (decoupled or L2: its scalar and what of it is structure) and the in-place first
and second moments."""
from __future__ import annotations

from typing import Any

from nova.optim import _half
from nova.optim.optimizer import Optimizer
from nova.tensor.tensor import Tensor


def first_moment_scalars(opt: Optimizer, scalars: dict[str, Any], b1: float) -> None:
    """Draw ``b1`` and ``1 - b1`` as runtime scalars into ``scalars`` (``1 - b1`` in
    double on the host, as the constant it replaces and PyTorch's). For a
    half-precision parameter the first moment is PyTorch's ``lerp_`` with weight
    ``1 - b1``: its two values (``_half.lerp_weight``) instead (Adamax's too)."""
    if _half.is_half(opt._param_dtype):
        coeff, from_self = _half.lerp_weight(1.0 - b1)
        scalars["lerp1"] = opt._scalar("1 - beta1 (lerp)", coeff)
        scalars["lerp1 from self"] = opt._scalar("1 - beta1 (lerp from self)", from_self)
    else:
        scalars["beta1"] = opt._scalar("beta1", b1)
        scalars["1 - beta1"] = opt._scalar("1 - beta1", 1.0 - b1)


def beta_scalars(opt: Optimizer, scalars: dict[str, Any], b1: float, b2: float) -> None:
    """``first_moment_scalars``, then ``b2`` and ``1 - b2``."""
    first_moment_scalars(opt, scalars, b1)
    scalars["beta2"] = opt._scalar("beta2", b2)
    scalars["1 - beta2"] = opt._scalar("1 - beta2", 1.0 - b2)


def decay_scalar(opt: Optimizer, scalars: dict[str, Any], lr: float, wd: float,
                 decoupled: bool) -> None:
    """Draw the decoupled decay ``1 - lr wd`` as a runtime scalar into ``scalars`` (where
    there is one)."""
    if wd and decoupled:
        scalars["decay"] = opt._scalar("decay", 1.0 - lr * wd)


def decay_baked(baked: dict[str, Any], group: dict[str, Any], decoupled: bool
                ) -> dict[str, Any]:
    """``baked`` with a decoupled decay's value replaced by whether there is one: the
    value is a runtime scalar (``decay_scalar``), not structure."""
    if decoupled:
        baked["weight_decay"] = bool(group["weight_decay"])
    return baked


def decayed_moments(p: Tensor, g: Tensor, wd: float, decoupled: bool,
                    state: dict[str, Any], s: dict[str, Any]
                    ) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """Weight decay -- ``p *= decay`` (``s["decay"]``) when ``decoupled``, else ``g +=
    wd p`` -- then ``exp_avg`` and ``exp_avg_sq`` updated in place (the same tensors
    every step, as in PyTorch); returns ``p``, ``g``, the two moments. A half-precision
    parameter's are PyTorch's kernels, each rounded once (``_half``)."""
    if _half.is_half(p.dtype):
        return _half_moments(p, g, wd, decoupled, state, s)
    if wd and decoupled:
        p = p.copy_(p * s["decay"])
    elif wd:
        g = g + wd * p
    m = state["exp_avg"].copy_(state["exp_avg"] * s["beta1"] + g * s["1 - beta1"])
    v = state["exp_avg_sq"].copy_(state["exp_avg_sq"] * s["beta2"] + g * g * s["1 - beta2"])
    return p, g, m, v


def _half_moments(p: Tensor, g: Tensor, wd: float, decoupled: bool,
                  state: dict[str, Any], s: dict[str, Any]
                  ) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """``decayed_moments`` as PyTorch's kernels round for a half-precision ``p``:
    ``p.mul_(1 - lr wd)`` or ``g = g.add(p, alpha=wd)``, ``exp_avg.lerp_(g, 1 - b1)``,
    ``exp_avg_sq.mul_(b2).addcmul_(g, g, value=1 - b2)``."""
    if wd and decoupled:
        p = p.copy_(_half.mul(p, s["decay"]))
    elif wd:
        g = _half.add(g, p, _half.half_value(wd, p.dtype))
    m = state["exp_avg"].copy_(_half.lerp(state["exp_avg"], g, s["lerp1"],
                                          s["lerp1 from self"]))
    v = state["exp_avg_sq"].copy_(_half.addcmul(_half.mul(state["exp_avg_sq"], s["beta2"]),
                                                g, g, s["1 - beta2"]))
    return p, g, m, v
