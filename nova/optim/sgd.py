"""SGD with momentum, dampening, Nesterov and weight decay (PyTorch's update rule)."""
from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from nova.optim import _checks, _half
from nova.optim.optimizer import Optimizer, zeros_state
from nova.tensor.tensor import Tensor


class SGD(Optimizer):
    """``d = g + wd*p``; with momentum ``b = m*b + (1-dampening)*d`` (``b = d`` on the
    first step), ``d = d + m*b`` if nesterov else ``b``; ``p -= lr*d``.

    ``lr``, ``momentum`` and ``dampening`` are runtime inputs of the step (a schedule
    of them -- ``OneCycleLR`` cycles the momentum -- compiles once); only whether there
    is a momentum at all decides the step's structure."""

    _stamp_updates = True
    _runtime_hparams = frozenset({"lr", "momentum", "dampening"})
    _starting: frozenset[int] | set[int] = frozenset()   # see _begin_step

    def __init__(self, params: Iterable[Any], lr: float = 1e-3, momentum: float = 0,
                 dampening: float = 0, weight_decay: float = 0, nesterov: bool = False, *,
                 maximize: bool = False, foreach: bool | None = None,
                 differentiable: bool = False, fused: bool | None = None):
        _checks.tensor_lr("SGD", lr)
        _checks.nonnegative("SGD", lr=lr, momentum=momentum, weight_decay=weight_decay)
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError(f"SGD: Nesterov momentum requires a momentum and zero dampening "
                             f"(got momentum={momentum}, dampening={dampening})")
        _checks.kernel_flags("SGD", differentiable, foreach, fused)
        super().__init__(params, dict(lr=lr, momentum=momentum, dampening=dampening,
                                      weight_decay=weight_decay, nesterov=nesterov,
                                      maximize=maximize, foreach=foreach,
                                      differentiable=differentiable, fused=fused))

    def _begin_step(self, updated: list[tuple[int, Tensor]]) -> None:
        """Which parameters start their momentum buffer this step: PyTorch decides it
        from the state before any update, so a parameter listed twice in a group
        starts it (``buf = d``) at both of its first-step updates."""
        starting = set()
        for gi, p in updated:
            state = self.state.get(p)
            if self.param_groups[gi]["momentum"] and (state is None or
                                                      "momentum_buffer" not in state):
                starting.add(id(self.state.setdefault(p, {})))
        self._starting = starting

    def _host_update(self, group: dict[str, Any], state: dict[str, Any]) -> dict[str, Any]:
        scalars = {}
        m = group["momentum"]
        # PyTorch's ``add(..., alpha=a)`` converts ``a`` to a half parameter's dtype
        alpha = (lambda v: _half.half_value(v, self._param_dtype)) \
            if _half.is_half(self._param_dtype) else float
        if m:
            # Step 1 sets buf = d; later steps decay it. Both are one structure: the two
            # coefficients are runtime inputs.
            first = id(state) in self._starting or "momentum_buffer" not in state
            scalars["keep"] = self._scalar("momentum", 0.0 if first else m)
            scalars["take"] = self._scalar("1 - dampening",
                                           1.0 if first else alpha(1.0 - group["dampening"]))
            if group["nesterov"]:
                # Its own name: on step 1 "momentum" is 0 while Nesterov's look-ahead
                # uses m, and one structure for every step needs two inputs then.
                scalars["nesterov"] = self._scalar("nesterov momentum", alpha(m))
        scalars["lr"] = self._scalar("lr", alpha(group["lr"]))
        return scalars

    def _baked(self, group: dict[str, Any]) -> dict[str, Any]:
        return {**super()._baked(group), "momentum != 0": bool(group["momentum"])}

    def _update(self, group: dict[str, Any], p: Tensor, grad: Tensor,
                state: dict[str, Any]) -> None:
        if _half.is_half(p.dtype):
            self._update_half(group, p, grad, state)
            return
        d = -grad if group["maximize"] else grad
        if group["weight_decay"]:
            d = d + group["weight_decay"] * p
        m = group["momentum"]
        s = self._host_update(group, state)
        if m:
            # a new buffer enters the state once it holds its first update (PyTorch's
            # order): a step interrupted in between left zeros there, and the retried
            # step took them for a later step's buffer (1 - dampening)
            buf = state.get("momentum_buffer")
            first = buf is None
            if first:
                buf = zeros_state(p)
            buf.copy_(buf * s["keep"] + d * s["take"])      # in place, as in torch
            if first:
                state["momentum_buffer"] = buf
            d = d + s["nesterov"] * buf if group["nesterov"] else buf
        p.copy_(p - s["lr"] * d)

    def _update_half(self, group: dict[str, Any], p: Tensor, grad: Tensor,
                     state: dict[str, Any]) -> None:
        """``_update`` for a half-precision ``p``, as PyTorch's kernels round it
        (``_half``): ``d = g.add(p, alpha=wd)``, ``buf.mul_(m).add_(d, alpha=1 -
        dampening)``, ``d = d.add(buf, alpha=m)`` (Nesterov), ``p.add_(d, alpha=-lr)``."""
        d = -grad if group["maximize"] else grad
        if group["weight_decay"]:
            d = _half.add(d, p, _half.half_value(group["weight_decay"], p.dtype))
        m = group["momentum"]
        s = self._host_update(group, state)
        if m:
            buf = state.get("momentum_buffer")      # (entered once updated: _update)
            first = buf is None
            if first:
                buf = zeros_state(p)
            buf.copy_(_half.add(_half.mul(buf, s["keep"]), d, s["take"]))
            if first:
                state["momentum_buffer"] = buf
            d = _half.add(d, buf, s["nesterov"]) if group["nesterov"] else buf
        p.copy_(_half.add(p, d, -s["lr"]))
