"""Gradient clipping (``torch.nn.utils.clip_grad``), recorded into the step.

Nothing here reads a value on the host: the total norm and the scaling coefficient are
pending 0-d tensors, so clipping fuses into the step that the optimizer realizes. Only
``error_if_nonfinite=True`` asks for the norm's value, which realizes the pending graph
(forward and backward) before the optimizer's update is recorded: the step then runs as
two programs with a host round trip between them instead of one.

``foreach`` is accepted for PyTorch's signatures; every setting records the same ops,
since fusion already does what the foreach kernels do.
"""
from __future__ import annotations

import types
import warnings
from collections.abc import Iterable

from nova.autograd.grad_mode import no_grad
from nova.core import dtypes as dt
from nova.tensor import ops
from nova.tensor.creation import tensor as _tensor
from nova.tensor.elementary import isfinite
from nova.tensor.movement import stack
from nova.tensor.numeric import vector_norm
from nova.tensor.tensor import Tensor

_LOW_PRECISION = (dt.float16, dt.bfloat16)


def _as_list(op: str, tensors: Iterable[Tensor] | Tensor) -> list[Tensor]:
    items = [tensors] if isinstance(tensors, Tensor) else list(tensors)
    for k, t in enumerate(items):
        if not isinstance(t, Tensor):
            raise TypeError(f"{op}: expected Tensors, got {type(t).__name__} at position {k}")
    return items


def _norm(x: Tensor, norm_type: float) -> Tensor:
    """``vector_norm`` in ``x``'s dtype, accumulated in float32 for float16/bfloat16 (as
    PyTorch's reduced-precision norms are) and rounded once."""
    if x.dtype in _LOW_PRECISION:
        return ops.cast(vector_norm(x, norm_type, dtype=dt.float32), x.dtype)
    return vector_norm(x, norm_type)


def _check_norm_type(op: str, norm_type: float | str) -> float:
    """``float(norm_type)``, as PyTorch takes it (so ``'inf'`` is the infinity norm)."""
    if isinstance(norm_type, str):
        try:
            return float(norm_type)
        except ValueError:
            raise ValueError(f"{op}: norm_type must be a number or 'inf', got "
                             f"{norm_type!r}") from None
    if isinstance(norm_type, bool) or not isinstance(norm_type, (int, float)):
        raise TypeError(f"{op}: norm_type must be a number (inf included), got {norm_type!r}")
    return float(norm_type)


def get_total_norm(tensors: Iterable[Tensor] | Tensor, norm_type: float | str = 2.0,
                   error_if_nonfinite: bool = False, foreach: bool | None = None) -> Tensor:
    """The ``norm_type`` norm of all ``tensors`` as if concatenated into one vector
    (``torch.nn.utils.get_total_norm``): each tensor's norm, then the norm of those
    norms, in their promoted dtype on the first tensor's device. An empty list gives 0.

    ``error_if_nonfinite`` raises ``RuntimeError`` for a NaN or infinite norm; it reads
    the norm on the host, which realizes the pending graph (see the module docstring).
    """
    items = _as_list("get_total_norm", tensors)
    norm_type = _check_norm_type("get_total_norm", norm_type)
    if not items:
        return _tensor(0.0)
    with no_grad():
        norms = [_norm(t, norm_type) for t in items]
        common = dt.result_type([(n.dtype, 1) for n in norms], [])
        device = items[0].device
        norms = [ops.cast(n if n.device == device else n.to(device), common) for n in norms]
        total = _norm(stack(norms), norm_type)
    if error_if_nonfinite and not bool(isfinite(total)):
        raise RuntimeError(
            f"The total norm of order {norm_type} for gradients from `parameters` is "
            "non-finite, so it cannot be clipped. To disable this error and scale the "
            "gradients by the non-finite norm anyway, set `error_if_nonfinite=False`")
    return total


def clip_grads_with_norm_(parameters: Iterable[Tensor] | Tensor, max_norm: float,
                          total_norm: Tensor, foreach: bool | None = None) -> None:
    """Scale every gradient in place by ``min(max_norm / (total_norm + 1e-6), 1)``
    (``torch.nn.utils.clip_grads_with_norm_``): the coefficient is a pending tensor, so
    no branch on its value and no host sync."""
    params = _as_list("clip_grads_with_norm_", parameters)
    if not isinstance(total_norm, Tensor):
        raise TypeError(f"clip_grads_with_norm_: total_norm must be a Tensor (from "
                        f"get_total_norm), got {type(total_norm).__name__}")
    grads = [p.grad for p in params if p.grad is not None]
    if not grads:
        return
    with no_grad():
        coef = ops.clamp(ops.div(float(max_norm), ops.add(total_norm, 1e-6)), max=1.0)
        for g in grads:
            g.mul_(coef if coef.device == g.device else coef.to(g.device))


def clip_grad_norm_(parameters: Iterable[Tensor] | Tensor, max_norm: float,
                    norm_type: float | str = 2.0, error_if_nonfinite: bool = False,
                    foreach: bool | None = None) -> Tensor:
    """Scale the gradients so their total ``norm_type`` norm is at most ``max_norm``
    (``torch.nn.utils.clip_grad_norm_``): ``get_total_norm`` of the gradients, then
    ``clip_grads_with_norm_``. Returns the total norm (before clipping) as a pending
    0-d tensor."""
    is_generator = isinstance(parameters, types.GeneratorType)
    params = _as_list("clip_grad_norm_", parameters)
    if is_generator and not params:
        warnings.warn("`parameters` is an empty generator, no gradient clipping will occur.",
                      stacklevel=2)
    grads = [p.grad for p in params if p.grad is not None]
    total = get_total_norm(grads, norm_type, error_if_nonfinite, foreach)
    clip_grads_with_norm_(params, max_norm, total, foreach)
    return total


def clip_grad_norm(parameters: Iterable[Tensor] | Tensor, max_norm: float,
                   norm_type: float = 2.0, error_if_nonfinite: bool = False,
                   foreach: bool | None = None) -> Tensor:
    """Deprecated alias of ``clip_grad_norm_`` (as in PyTorch)."""
    warnings.warn("`nv.nn.utils.clip_grad_norm` is deprecated in favor of "
                  "`nv.nn.utils.clip_grad_norm_`.", FutureWarning, stacklevel=2)
    return clip_grad_norm_(parameters, max_norm, norm_type, error_if_nonfinite, foreach)


def clip_grad_value_(parameters: Iterable[Tensor] | Tensor, clip_value: float,
                     foreach: bool | None = None) -> None:
    """Clamp every gradient in place to ``[-clip_value, clip_value]``
    (``torch.nn.utils.clip_grad_value_``); NaN stays NaN."""
    params = _as_list("clip_grad_value_", parameters)
    clip_value = float(clip_value)
    with no_grad():
        for p in params:
            if p.grad is not None:
                p.grad.clamp_(min=-clip_value, max=clip_value)


__all__ = ["clip_grad_norm", "clip_grad_norm_", "clip_grad_value_", "clip_grads_with_norm_",
           "get_total_norm"]
