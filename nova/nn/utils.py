"""``nv.nn.utils``: gradient clipping computed in the graph (no host round trip)."""
from __future__ import annotations

from collections.abc import Iterable

from nova.autograd.grad_mode import no_grad
from nova.tensor import ops
from nova.tensor.creation import zeros
from nova.tensor.tensor import Tensor


def clip_grad_norm_(parameters: Iterable[Tensor] | Tensor, max_norm: float,
                    norm_type: float = 2.0) -> Tensor:
    """Scale gradients so their global ``norm_type`` norm is at most ``max_norm``.

    Returns the total norm as a pending 0-d tensor; the scaling is recorded into the
    step, so nothing syncs with the host.
    """
    params = [parameters] if isinstance(parameters, Tensor) else list(parameters)
    grads = [p.grad for p in params if p.grad is not None]
    if not grads:
        return zeros(())
    with no_grad():
        if norm_type == float("inf"):
            total = grads[0].abs().amax()
            for g in grads[1:]:
                total = ops.maximum(total, g.abs().amax())
        else:
            total = None
            for g in grads:
                part = ops.sum(ops.pow(ops.abs(g.float()), norm_type))
                total = part if total is None else ops.add(total, part)
            total = ops.pow(total, 1.0 / norm_type)
        coef = ops.minimum(ops.div(max_norm, ops.add(total, 1e-6)), 1.0)
        for p in params:
            if p.grad is not None:
                p.grad = ops.mul(p.grad, coef.to(p.grad.dtype))
    return total


__all__ = ["clip_grad_norm_"]
