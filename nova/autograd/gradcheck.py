"""Finite-difference checks of the symbolic gradients (``nv.autograd.gradcheck``).

The function's output is reduced to a scalar with fixed random weights, analytic
gradients come from ``nv.autograd.grad``, numeric ones from central differences in
float64. Every perturbed evaluation is the same structure, so after the first it only
replays the cached executable.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from nova.autograd.engine import grad
from nova.core import dtypes as dt
from nova.tensor.creation import tensor
from nova.tensor.tensor import Tensor


class GradcheckError(AssertionError):
    """Analytic and numeric gradients disagree; the message names input and element."""


def _scalar(fn: Callable[..., Tensor], args: list[Tensor], weights: list[np.ndarray]) -> Tensor:
    outs = fn(*args)
    outs = [outs] if isinstance(outs, Tensor) else list(outs)
    total = None
    for out, w in zip(outs, weights):
        term = (out * tensor(w, dtype=out.dtype)).sum()
        total = term if total is None else total + term
    return total


def _weights(fn: Callable[..., Tensor], args: list[Tensor], seed: int) -> list[np.ndarray]:
    outs = fn(*args)
    outs = [outs] if isinstance(outs, Tensor) else list(outs)
    rng = np.random.default_rng(seed)
    return [rng.uniform(0.5, 1.5, size=o.shape) for o in outs]


def analytic_grads(fn: Callable[..., Tensor], arrays: Sequence[np.ndarray], dtype: Any,
                   seed: int = 0, create_graph: bool = False) -> list[np.ndarray]:
    args = [tensor(a, dtype=dtype, requires_grad=True) for a in arrays]
    weights = _weights(fn, args, seed)
    loss = _scalar(fn, args, weights)
    gs = grad(loss, args, allow_unused=True, create_graph=create_graph)
    return [np.zeros(a.shape) if g is None else g.to(dt.float64).numpy()
            for a, g in zip(arrays, gs)]


def numeric_grads(fn: Callable[..., Tensor], arrays: Sequence[np.ndarray], seed: int = 0,
                  eps: float = 1e-6) -> list[np.ndarray]:
    # Inputs require grad even here: ``fn`` may itself differentiate (double backward).
    base = [np.array(a, dtype=np.float64) for a in arrays]
    weights = _weights(fn, [tensor(a, requires_grad=True) for a in base], seed)
    result = []
    for i, a in enumerate(base):
        g = np.zeros(a.shape)
        for j in np.ndindex(a.shape):
            vals = []
            for sign in (1, -1):
                pert = [b.copy() for b in base]
                pert[i][j] += sign * eps
                args = [tensor(p, requires_grad=True) for p in pert]
                vals.append(_scalar(fn, args, weights).item())
            g[j] = (vals[0] - vals[1]) / (2 * eps)
        result.append(g)
    return result


def gradcheck(fn: Callable[..., Tensor], inputs: Sequence[Any], *, eps: float = 1e-6,
              atol: float = 1e-5, rtol: float = 1e-4, seed: int = 0) -> bool:
    """Check ``fn``'s gradients at ``inputs`` (arrays or tensors) in float64."""
    arrays = [i.to(dt.float64).numpy() if isinstance(i, Tensor) else np.asarray(i, np.float64)
              for i in inputs]
    analytic = analytic_grads(fn, arrays, dt.float64, seed)
    numeric = numeric_grads(fn, arrays, seed, eps)
    for k, (a, n) in enumerate(zip(analytic, numeric)):
        if not np.allclose(a, n, atol=atol, rtol=rtol):
            bad = np.unravel_index(np.argmax(np.abs(a - n) - rtol * np.abs(n)), a.shape)
            raise GradcheckError(f"gradcheck: input {k} (shape {a.shape}) element {tuple(int(i) for i in bad)}: "
                                 f"analytic {a[bad]:.8g} vs numeric {n[bad]:.8g}")
    return True


def gradgradcheck(fn: Callable[..., Tensor], inputs: Sequence[Any],
                  grad_outputs: Sequence[Any] | None = None, *, eps: float = 1e-6,
                  atol: float = 1e-5, rtol: float = 1e-3, seed: int = 0) -> bool:
    """Check ``fn``'s second derivatives (``torch.autograd.gradgradcheck``): the
    gradients of ``fn`` (taken with ``create_graph=True``, weighted by ``grad_outputs``)
    are themselves checked by ``gradcheck`` as a function of ``inputs`` and
    ``grad_outputs`` together. Without ``grad_outputs``, fixed random ones (by
    ``seed``) of the outputs' shapes are used."""
    arrays = [i.to(dt.float64).numpy() if isinstance(i, Tensor) else np.asarray(i, np.float64)
              for i in inputs]
    outs = fn(*[tensor(a, requires_grad=True) for a in arrays])
    outs = [outs] if isinstance(outs, Tensor) else list(outs)
    if grad_outputs is None:
        rng = np.random.default_rng(seed + 1)
        gos = [rng.standard_normal(o.shape) for o in outs]
    else:
        given = [grad_outputs] if isinstance(grad_outputs, Tensor) else list(grad_outputs)
        if len(given) != len(outs):
            raise ValueError(f"gradgradcheck: got {len(given)} grad_outputs for "
                             f"{len(outs)} outputs")
        gos = [g.to(dt.float64).numpy() if isinstance(g, Tensor) else np.asarray(g, np.float64)
               for g in given]
        for k, (g, o) in enumerate(zip(gos, outs)):
            if g.shape != tuple(o.shape):
                raise ValueError(f"gradgradcheck: grad_outputs[{k}] has shape {g.shape}, "
                                 f"output {k} has shape {tuple(o.shape)}")
    n = len(arrays)

    def first_grads(*args: Tensor) -> tuple[Tensor, ...]:
        xs, gs = list(args[:n]), list(args[n:])
        got = grad(fn(*xs), xs, gs, create_graph=True, allow_unused=True)
        return tuple(g for g in got if g is not None)

    return gradcheck(first_grads, arrays + gos, eps=eps, atol=atol, rtol=rtol, seed=seed)
