"""The orthogonal polynomials of ``torch.special`` (``chebyshev_polynomial_t``/``u``/
``v``/``w``, their ``shifted_`` forms on [0, 1], ``hermite_polynomial_h``/``he``,
``laguerre_polynomial_l``, ``legendre_polynomial_p``), with PyTorch's ``(x, n)``
signatures: either may be a tensor or a Python number, broadcast together.

Each is its three-term recurrence in float64, rounded once to the result dtype (the
promoted float dtype; float32 for integers), run up to the largest degree asked for
and selecting each element's degree as it passes. The degree decides how many steps
there are, so a tensor ``n`` is read on the host (a sync, as ``nonzero``'s count is;
under ``nv.compile`` the call then runs recorded every time), and the recurrence is
unrolled into ``max(n)`` steps: meant for the small degrees these are used with.

Degrees are PyTorch's: a float ``n`` is truncated toward zero, a negative one gives 0,
and the Hermite polynomials are NaN above degree 128 (float32) / 512 (float64), where
PyTorch stops. The shifted Chebyshev polynomials are the plain ones at ``2x - 1``. As
in PyTorch, none has a gradient (the results do not require grad).
"""
from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

from nova.core import dtypes as dt
from nova.tensor import movement, ops
from nova.tensor.tensor import Tensor

__all__ = [
    "chebyshev_polynomial_t", "chebyshev_polynomial_u", "chebyshev_polynomial_v",
    "chebyshev_polynomial_w", "hermite_polynomial_h", "hermite_polynomial_he",
    "laguerre_polynomial_l", "legendre_polynomial_p", "shifted_chebyshev_polynomial_t",
    "shifted_chebyshev_polynomial_u", "shifted_chebyshev_polynomial_v",
    "shifted_chebyshev_polynomial_w",
]

# (P_1 from x, P_k from x, k, P_{k-1}, P_{k-2})
Step = Callable[[Tensor, int, Tensor, Tensor], Tensor]
_HERMITE_LIMIT = {dt.float32: 128, dt.float64: 512}


def _degree(n: Tensor) -> Tensor:
    """PyTorch's integer degree: ``n`` truncated toward zero, -1 where it is not finite."""
    finite = ops.lt(ops.abs(n), math.inf)
    m = ops.where(finite, n, -1.0)
    return ops.where(ops.lt(m, 0), ops.neg(ops.prim("floor", [ops.neg(m)], {}, m.shape,
                                                      m.dtype)),
                     ops.prim("floor", [m], {}, m.shape, m.dtype))


def _max_degree(n: Any, m: Tensor, limit: int | None) -> int:
    """The largest degree asked for (at most ``limit``: those above it give NaN, no
    steps): read on the host when ``n`` is a tensor."""
    if not isinstance(n, Tensor):
        value = float(n)
        values = np.array([math.trunc(value) if math.isfinite(value) else -1])
    else:
        values = np.asarray(m.detach()._host_values()).reshape(-1)
    if limit is not None:
        values = values[values <= limit]
    return int(values.max()) if values.size else 0


_CHUNK = 32     # steps fused into one kernel; then the state goes through memory


def _cut(*parts: Tensor) -> tuple[Tensor, ...]:
    """``parts`` unchanged, passed through a product with the identity, which no
    elementwise kernel fuses across: an unrolled recurrence of a few hundred steps would
    otherwise be one expression that deep (the code generator recurses on it)."""
    stacked = movement.stack(list(parts), -1)
    k = len(parts)
    eye = ops.cast(ops.eq(ops.prim("iota", [], {"dim": 0}, (k, k), dt.int64),
                          ops.prim("iota", [], {"dim": 1}, (k, k), dt.int64)), stacked.dtype)
    out = ops.matmul(stacked.unsqueeze(-2), eye).squeeze(-2)
    return tuple(out[..., i] for i in range(k))


def _polynomial(op: str, x: Any, n: Any, first: Callable[[Tensor], Tensor], step: Step,
                limit: bool = False) -> Tensor:
    """``P_n(x)`` by the recurrence ``step`` from ``P_0 = 1`` and ``P_1 = first(x)``."""
    if not isinstance(x, Tensor) and not isinstance(n, Tensor):
        raise TypeError(f"{op}: expected a Tensor argument, got {type(x).__name__} and "
                        f"{type(n).__name__}")
    common = ops.promote(op, x, n)
    common = common if common.is_floating_point else dt.float32
    xs, ns = ops.operands(op, x.detach() if isinstance(x, Tensor) else x,
                          n.detach() if isinstance(n, Tensor) else n, dtype=dt.float64)
    m = _degree(ns)
    cap = _HERMITE_LIMIT.get(common, 512) if limit else None
    top = _max_degree(n, m, cap)
    out = ops.where(ops.eq(m, 0), 1.0, ops.mul(xs, 0.0))
    prev, cur = ops.add(ops.mul(xs, 0.0), 1.0), first(xs)
    for k in range(1, top + 1):
        if k > 1:
            prev, cur = cur, step(xs, k, cur, prev)
        out = ops.where(ops.eq(m, float(k)), cur, out)
        if k % _CHUNK == 0 and k < top:
            prev, cur, out = _cut(prev, cur, out)
    if cap is not None:
        out = ops.where(ops.gt(m, float(cap)), math.nan, out)
    return ops.cast(out, common)


def _chebyshev_step(x: Tensor, k: int, p1: Tensor, p2: Tensor) -> Tensor:
    return ops.sub(ops.mul(ops.mul(x, 2.0), p1), p2)


def chebyshev_polynomial_t(input: Any, n: Any) -> Tensor:
    """Chebyshev polynomial of the first kind ``T_n(x)``
    (``torch.special.chebyshev_polynomial_t``)."""
    return _polynomial("chebyshev_polynomial_t", input, n, lambda x: x, _chebyshev_step)


def chebyshev_polynomial_u(input: Any, n: Any) -> Tensor:
    """Chebyshev polynomial of the second kind ``U_n(x)``
    (``torch.special.chebyshev_polynomial_u``)."""
    return _polynomial("chebyshev_polynomial_u", input, n, lambda x: ops.mul(x, 2.0),
                       _chebyshev_step)


def chebyshev_polynomial_v(input: Any, n: Any) -> Tensor:
    """Chebyshev polynomial of the third kind ``V_n(x)``
    (``torch.special.chebyshev_polynomial_v``)."""
    return _polynomial("chebyshev_polynomial_v", input, n,
                       lambda x: ops.sub(ops.mul(x, 2.0), 1.0), _chebyshev_step)


def chebyshev_polynomial_w(input: Any, n: Any) -> Tensor:
    """Chebyshev polynomial of the fourth kind ``W_n(x)``
    (``torch.special.chebyshev_polynomial_w``)."""
    return _polynomial("chebyshev_polynomial_w", input, n,
                       lambda x: ops.add(ops.mul(x, 2.0), 1.0), _chebyshev_step)


def _shifted(fn: Callable[[Any, Any], Tensor], name: str) -> Callable[[Any, Any], Tensor]:
    def shifted(input: Any, n: Any) -> Tensor:
        if isinstance(input, Tensor):
            common = ops.promote(name, input, n)
            x = ops.cast(input.detach(), dt.float64)
            out = fn(ops.sub(ops.mul(x, 2.0), 1.0), n)
            return ops.cast(out, common if common.is_floating_point else dt.float32)
        return fn(2.0 * input - 1.0, n)
    shifted.__name__ = shifted.__qualname__ = name
    shifted.__doc__ = (f"The shifted polynomial ``{fn.__name__}(2x - 1, n)`` on [0, 1] "
                       f"(``torch.special.{name}``).")
    return shifted


shifted_chebyshev_polynomial_t = _shifted(chebyshev_polynomial_t, "shifted_chebyshev_polynomial_t")
shifted_chebyshev_polynomial_u = _shifted(chebyshev_polynomial_u, "shifted_chebyshev_polynomial_u")
shifted_chebyshev_polynomial_v = _shifted(chebyshev_polynomial_v, "shifted_chebyshev_polynomial_v")
shifted_chebyshev_polynomial_w = _shifted(chebyshev_polynomial_w, "shifted_chebyshev_polynomial_w")


def hermite_polynomial_h(input: Any, n: Any) -> Tensor:
    """Physicists' Hermite polynomial ``H_n(x)`` (``torch.special.hermite_polynomial_h``):
    ``H_k = 2x H_{k-1} - 2(k-1) H_{k-2}``."""
    return _polynomial("hermite_polynomial_h", input, n, lambda x: ops.mul(x, 2.0),
                       lambda x, k, p1, p2: ops.sub(ops.mul(ops.mul(x, 2.0), p1),
                                                    ops.mul(p2, 2.0 * (k - 1))), limit=True)


def hermite_polynomial_he(input: Any, n: Any) -> Tensor:
    """Probabilists' Hermite polynomial ``He_n(x)``
    (``torch.special.hermite_polynomial_he``): ``He_k = x He_{k-1} - (k-1) He_{k-2}``."""
    return _polynomial("hermite_polynomial_he", input, n, lambda x: x,
                       lambda x, k, p1, p2: ops.sub(ops.mul(x, p1), ops.mul(p2, float(k - 1))),
                       limit=True)


def laguerre_polynomial_l(input: Any, n: Any) -> Tensor:
    """Laguerre polynomial ``L_n(x)`` (``torch.special.laguerre_polynomial_l``): ``L_k =
    ((2k - 1 - x) L_{k-1} - (k-1) L_{k-2}) / k``."""
    return _polynomial("laguerre_polynomial_l", input, n, lambda x: ops.sub(1.0, x),
                       lambda x, k, p1, p2: ops.div(ops.sub(
                           ops.mul(ops.sub(float(2 * k - 1), x), p1),
                           ops.mul(p2, float(k - 1))), float(k)))


def legendre_polynomial_p(input: Any, n: Any) -> Tensor:
    """Legendre polynomial ``P_n(x)`` (``torch.special.legendre_polynomial_p``): ``P_k =
    ((2k - 1) x P_{k-1} - (k-1) P_{k-2}) / k``."""
    return _polynomial("legendre_polynomial_p", input, n, lambda x: x,
                       lambda x, k, p1, p2: ops.div(ops.sub(
                           ops.mul(ops.mul(x, float(2 * k - 1)), p1),
                           ops.mul(p2, float(k - 1))), float(k)))
