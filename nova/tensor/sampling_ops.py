"""Sampling functions PyTorch has at the top level (``nv.normal``, ``nv.randint_like``,
``nv.poisson``, ``nv.binomial``, ``nv._standard_gamma``, ``nv._sample_dirichlet``) and
the samplers and incomplete-gamma function behind the Gamma, Poisson and Binomial
families of ``nv.distributions``.

Rejection samplers in a static-shape lazy graph. Each element draws a fixed number of
proposals at once (a trailing axis of ``rounds``) and keeps its first accepted one.
A fixed number of rounds can leave an element with none; that element is never given a
biased value: the sampler realizes the draw together with an "all accepted" flag (one
step and a host read of one boolean, as ``.item()``), and while the flag is False draws
another full set of rounds for the elements still waiting. The rounds are chosen so
that a second pass is rare (below 1e-8 per element); the cost of the guarantee is that
``poisson``, ``binomial`` and the Gamma draws realize their result at once (a sync)
instead of leaving it pending in the graph. The counting samplers (Poisson and
Binomial at small means) instead continue an element's count where a round stopped.

The incomplete gamma function ``P(a, x)`` and its derivative in ``a`` (Gamma's ``cdf``
and the implicit reparameterization gradient of the Gamma draws) are computed from its
power series below ``x = a + 1 + 2 sqrt(a)`` and its continued fraction above, both in
float64 with a number of terms read off the largest ``a`` (terms ~ 12 sqrt(a)): a sum
over a trailing axis, and the fraction's convergent as a product of 2x2 matrices taken
pairwise (log2 of the terms passes), with forward-mode derivatives carried alongside.
"""
from __future__ import annotations

import builtins
import math
import operator
from collections.abc import Callable
from typing import Any

import numpy as np

from nova.core import dtypes as dt
from nova.core.errors import DTypeError
from nova.core.shapes import broadcast_shapes
from nova.tensor import movement, ops, tape
from nova.tensor.creation import arange, full_like, rand, randint, randn, tensor
from nova.tensor.grad_mode import STATE, no_grad
from nova.tensor.realize import realize
from nova.tensor.scan import cumprod, cumsum
from nova.tensor.special import digamma, lgamma
from nova.tensor.tensor import Tensor

__all__ = ["_sample_dirichlet", "_standard_gamma", "binomial", "gammainc", "gammaincc",
           "normal", "poisson", "randint_like"]

# Proposals drawn per element in one pass (module constants, so a test can force the
# retry path by lowering them). A proposal is accepted with probability >= 0.95
# (Marsaglia-Tsang), >= 0.75 (PTRS, Poisson) and >= 0.70 (BTRS, Binomial), measured:
# a second pass is needed for about one element in 1e8.
GAMMA_ROUNDS = 6
POISSON_ROUNDS = 13
BINOMIAL_ROUNDS = 15
# Terms of one pass of the counting samplers (Poisson below rate 10, Binomial below
# mean 10): an element whose count reaches it (probability < 3e-8) continues in
# another pass.
COUNT_TERMS = 32
# Terms of the continued fraction of Q(a, x) above the series' range (where it
# converges within 72 terms for a <= 1e4: measured against mpmath).
FRACTION_TERMS = 128


def _f64(x: Any) -> Tensor:
    return ops.cast(x, dt.float64)


def _finite(t: Tensor) -> Tensor:
    return ops.logical_and(ops.eq(t, t), ops.lt(t.abs(), math.inf))


# ---------------------------------------------------------------- incomplete gamma


def series_terms(a_max: float) -> int:
    """Terms of the power series of P(a, x) that reach full float64 precision for
    every ``a <= a_max`` and ``x`` below the switch to the continued fraction: its
    terms peak near ``n = x - a <= 1 + 2 sqrt(a)`` and then fall as
    ``exp(-n^2 / 2a)``. A multiple of 32, so nearby maxima share one compiled step."""
    if not math.isfinite(a_max):
        raise ValueError(f"the incomplete gamma function needs finite concentrations, got "
                         f"{a_max}")
    need = 12.0 * math.sqrt(builtins.max(a_max, 0.0)) + 32.0
    return int(math.ceil(need / 32.0) * 32)


def _in_series_range(a: Tensor, x: Tensor) -> Tensor:
    """Where the power series is used (else the continued fraction): ``x`` below
    ``a + 1 + 2 sqrt(a)``, where the fraction would need many terms and the series has
    little cancellation."""
    return ops.lt(x, a + 1.0 + 2.0 * a.sqrt())


def _series(a: Tensor, x: Tensor, terms: int) -> tuple[Tensor, Tensor]:
    """``S = sum_n x^n / ((a+1)...(a+n))`` (n >= 0) and ``dS/da``, with ``P(a, x) =
    x^a e^-x / Gamma(a+1) S``: running products and sums over a trailing axis."""
    n = arange(1, terms + 1, dtype=dt.float64, device=_device(a))
    a1, x1 = a.unsqueeze(-1), x.unsqueeze(-1)
    shifted = a1 + n
    t = cumprod(x1 / shifted, -1)
    h = cumsum(shifted.reciprocal(), -1)
    return 1.0 + t.sum(-1), -(t * h).sum(-1)


# Below this ``a``, Q in the series range is summed directly (``_upper_small_a``):
# ``1 - P`` there loses the digits of a Q near ``a E1(x)`` (negative below a ~ 1e-15).
SMALL_A = 0.05
SMALL_A_TERMS = 30            # (-x)^n / n! below 1e-20 for x < 1.5, the range's end
# zeta(2), ..., zeta(14): log Gamma(1 + a) = -gamma a + sum_k (-a)^k zeta(k) / k
_ZETA = (1.6449340668482264, 1.2020569031595942, 1.0823232337111382, 1.0369277551433699,
         1.0173430619844491, 1.0083492773819228, 1.0040773561979443, 1.0020083928260822,
         1.0009945751278181, 1.0004941886041195, 1.0002460865533080, 1.0001227133475785,
         1.0000612481350587)
_EULER_GAMMA = 0.5772156649015329


def _lgamma1p_small(a: Tensor) -> Tensor:
    """``log Gamma(1 + a)`` for ``|a| <= SMALL_A`` by its Taylor series (13 terms:
    0.05^14 / 14 < 1e-19), to rounding; ``lgamma(1 + a)`` loses ``a`` below eps."""
    acc = ops.full_const(0.0, a.shape, a.dtype)
    for k in range(len(_ZETA) + 1, 1, -1):
        acc = (acc + (-1.0) ** k * _ZETA[k - 2] / k) * a
    return (acc - _EULER_GAMMA) * a


def _upper_small_a(a: Tensor, x: Tensor, log_x: Tensor) -> Tensor:
    """``Q(a, x)`` for small ``a`` in the series range, without ``1 - P``'s
    cancellation (DLMF 8.7.3 summed from its second term): ``Q = -expm1(a log x -
    log Gamma(1 + a)) - a x^a / Gamma(1 + a) sum_{n >= 1} (-x)^n / (n! (a + n))``."""
    n = arange(1, SMALL_A_TERMS + 1, dtype=dt.float64, device=_device(a))
    a1 = a.unsqueeze(-1)
    t = cumprod(-x.unsqueeze(-1) / n, -1)                 # (-x)^n / n!
    tail = (t / (a1 + n)).sum(-1)
    u = a * log_x - _lgamma1p_small(a)
    return -u.expm1() - a * u.exp() * tail


def _mul2(m1: tuple[Tensor, ...], m2: tuple[Tensor, ...]) -> tuple[Tensor, ...]:
    """``m1 @ m2`` of 2x2 matrices with forward derivatives, each given as (p, q, r, s,
    dp, dq, dr, ds) for ``[[p, q], [r, s]]``."""
    p1, q1, r1, s1, dp1, dq1, dr1, ds1 = m1
    p2, q2, r2, s2, dp2, dq2, dr2, ds2 = m2
    return (p1 * p2 + q1 * r2, p1 * q2 + q1 * s2, r1 * p2 + s1 * r2, r1 * q2 + s1 * s2,
            dp1 * p2 + p1 * dp2 + dq1 * r2 + q1 * dr2,
            dp1 * q2 + p1 * dq2 + dq1 * s2 + q1 * ds2,
            dr1 * p2 + r1 * dp2 + ds1 * r2 + s1 * dr2,
            dr1 * q2 + r1 * dq2 + ds1 * s2 + s1 * ds2)


def _fraction(a: Tensor, x: Tensor, terms: int) -> tuple[Tensor, Tensor]:
    """The continued fraction ``C = 1/(x+1-a - 1(1-a)/(x+3-a - 2(2-a)/(x+5-a - ...)))``
    of ``Q(a, x) = x^a e^-x / Gamma(a) C`` and ``dC/da``, from ``terms`` terms.

    The convergent ``A_K / B_K`` is read off the product ``M_K ... M_1`` of the
    recurrence matrices ``[[b_n, a_n], [1, 0]]``, multiplied pairwise (log2(terms)
    passes over a trailing axis), each partial product rescaled by its largest entry
    (the ratio and its derivative do not change)."""
    n = arange(1, terms + 1, dtype=dt.float64, device=_device(a))
    a1, x1 = a.unsqueeze(-1), x.unsqueeze(-1)
    first = ops.eq(n, 1.0)
    num = ops.where(first, 1.0, -(n - 1.0) * (n - 1.0 - a1))       # a_n
    dnum = ops.where(first, 0.0, (n - 1.0) + 0.0 * a1)
    den = x1 + 2.0 * n - 1.0 - a1                                    # b_n
    one, zero = full_like(den, 1.0), full_like(den, 0.0)
    m = (den, num, one, zero, full_like(den, -1.0), dnum, zero, zero)
    length = terms
    while length > 1:
        length //= 2
        pairs = [movement.reshape(t, t.shape[:-1] + (length, 2)) for t in m]
        later = tuple(p[..., 1] for p in pairs)
        earlier = tuple(p[..., 0] for p in pairs)
        m = _mul2(later, earlier)
        scale = ops.maximum(ops.maximum(m[0].abs(), m[1].abs()),
                            ops.maximum(m[2].abs(), m[3].abs()))
        scale = ops.where(ops.gt(scale, 0.0), scale, 1.0)
        m = tuple(t / scale for t in m)
    p, q, _, _, dp, dq, _, _ = (t[..., 0] for t in m)
    # [A_K, A_K-1] = P [A_0, A_-1] = P [0, 1]; [B_K, B_K-1] = P [1, 0]
    return q / p, (dq * p - q * dp) / (p * p)


def _device(t: Tensor) -> Any:
    return None if t.node.device in (None, "cpu") else t.node.device


def incomplete_gamma_parts(a: Tensor, x: Tensor, terms: int,
                           log_x: Tensor | None = None) -> dict[str, Tensor]:
    """The pieces of ``P(a, x)`` (float64 ``a > 0``, ``x >= 0``, one shape): ``series``
    (where the series is used), ``P`` and ``Q = 1 - P`` (each computed directly on its
    own side, so the small one keeps its digits), ``dP_da``, and ``dlogx_da``, the
    derivative of ``log x`` along the curve ``P(a, x) = const`` (the implicit
    reparameterization gradient of ``log`` of a Gamma(a, 1) draw ``x``; given
    ``log_x``, it stays finite where ``x`` itself underflows to 0)."""
    series = _in_series_range(a, x)
    bound = a + 2.0 + 2.0 * a.sqrt()
    xs = ops.where(series, x, a)            # each side evaluated only where it is valid:
    xc = ops.where(series, bound, x)        # no overflow in the unused one
    s, ds = _series(a, xs, terms)
    c, dc = _fraction(a, xc, FRACTION_TERMS)
    if log_x is None:
        log_x = x.log()
    lead = a * log_x - x                    # log(x^a e^-x)
    lower = (lead - lgamma(a + 1.0)).exp()  # x^a e^-x / Gamma(a+1)
    upper = (lead - lgamma(a)).exp()        # x^a e^-x / Gamma(a)
    dlow = s * (log_x - digamma(a + 1.0)) + ds
    dup = c * (log_x - digamma(a)) + dc
    p_series, q_fraction = lower * s, upper * c
    small = ops.lt(a, SMALL_A)
    q_series = ops.where(small, _upper_small_a(ops.where(small, a, 0.0), xs, ops.where(
        series, log_x, 0.0)), 1.0 - p_series)
    return {
        "series": series,
        # (rounding can carry a series' P a unit past 1 for tiny a: clamped)
        "P": ops.minimum(ops.where(series, p_series, 1.0 - q_fraction), 1.0),
        "Q": ops.minimum(ops.where(series, q_series, q_fraction), 1.0),
        "dP_da": ops.where(series, lower * dlow, -upper * dup),
        "dlogx_da": ops.where(series, -dlow / a, dup),
    }


def _known_host(t: Tensor) -> np.ndarray | None:
    """What ``t`` holds when the host knows it without computing anything (a host
    buffer, a constant, a broadcast or reshape of one), else None."""
    node = t.node
    while node.buffer is None and node.op in ("broadcast_in_dim", "reshape"):
        node = node.inputs[0]
    if node.buffer is not None:
        return node.buffer if isinstance(node.buffer, np.ndarray) and \
            node.device != "cuda" else None
    if node.op == "constant":
        return np.asarray(node.attrs["value"])
    return None


def host_max(t: Tensor) -> float:
    """The largest finite value of ``t`` (0 if none: what sizes the incomplete gamma's
    series), from the host's copy when it has one, else read back: a sync."""
    known = _known_host(t)
    if known is None:
        if t.numel() == 0:
            return 0.0
        finite = ops.where(_finite(t.detach()), t.detach(), -math.inf)
        known = np.asarray(ops.cast(finite.max(), dt.float64).item())
    known = np.asarray(known, dtype=np.float64)
    known = known[np.isfinite(known)]
    return float(known.max()) if known.size else 0.0


# ---------------------------------------------------------------- autograd records


def _attach(out: Tensor, inputs: list[Tensor], backward: Callable[[Tensor], list[Any]],
            name: str) -> Tensor:
    """``out`` tied to the rule ``backward(grad) -> [gradient per input]`` (what an
    ``nv.autograd.Function`` records; built here because ``nova.tensor`` sits below
    ``nova.autograd``). The rule only builds ops, so a replay may reuse it."""
    if not STATE.enabled or not any(t.requires_grad for t in inputs) or \
            not out.dtype.is_floating_point:
        return out
    edges = tuple(t._grad_edge() for t in inputs)
    shapes = [t.shape for t in inputs]

    def run_backward(g: Tensor, create_graph: bool) -> tuple[Any, ...]:
        grads = backward(g)
        return tuple(None if gi is None or not t.requires_grad else
                     (gi if gi.shape == shape else gi.sum_to_size(shape)).to(t.dtype)
                     for gi, t, shape in zip(grads, inputs, shapes))

    fn = tape.GradFn(tape.FUNCTION, {"apply": run_backward, "name": name}, edges,
                     [t.node for t in inputs], None)
    return Tensor._wrap(out.node, grad_fn=fn)


# ---------------------------------------------------------------- rejection passes

_MAX_PASSES = 1000


def _until_accepted(op: str, draw: Callable[[], tuple[Tensor, Tensor]],
                    extra: tuple[Tensor, ...] = ()) -> Tensor:
    """``draw()`` gives (values, accepted); the values of the accepted elements are
    kept and the others drawn again until every element has one. Each pass realizes
    the values with the flag (and ``extra``, read by the caller) and reads the flag."""
    value, ok = draw()
    for _ in range(_MAX_PASSES):
        done = ok.all()
        realize(value, ok, done, *extra)
        if done.item():
            return value
        more, ok_more = draw()
        value = ops.where(ok, value, more)
        ok = ops.logical_or(ok, ok_more)
    raise RuntimeError(f"{op}: {_MAX_PASSES} passes of proposals left elements "
                       "without an accepted one (invalid parameters?)")


def _first_accepted(ok: Tensor, values: Tensor) -> tuple[Tensor, Tensor]:
    """The value of each element's first accepted round (trailing axis) and whether
    it has one."""
    first = ops.logical_and(ok, ops.eq(cumsum(ops.cast(ok, dt.int32), -1), 1))
    return ops.where(first, values, 0.0).sum(-1), ok.any(-1)


def _uniform(shape: tuple[int, ...], like: Tensor, generator: Any) -> Tensor:
    """float64 uniforms in [0, 1) on ``like``'s device."""
    return rand(shape, dtype=dt.float64, generator=generator, device=_device(like))


# ---------------------------------------------------------------- Gamma


def _gamma_pass(alpha: Tensor, generator: Any) -> tuple[Tensor, Tensor]:
    """One pass of Marsaglia and Tsang's method for ``log`` of Gamma(alpha, 1) draws
    (float64 ``alpha``): ``GAMMA_ROUNDS`` proposals ``d (1 + c z)^3`` per element,
    accepted when ``log u < z^2/2 + d - d v + d log v``. ``alpha < 1`` draws with
    ``alpha + 1`` and multiplies by ``U^(1/alpha)`` (adds ``log U / alpha``)."""
    boost = ops.lt(alpha, 1.0)
    a = ops.where(boost, alpha + 1.0, alpha)
    d = a - 1.0 / 3.0
    c = (9.0 * d).rsqrt()
    shape = alpha.shape + (GAMMA_ROUNDS,)
    z = randn(shape, dtype=dt.float64, generator=generator, device=_device(alpha))
    u = _uniform(shape, alpha, generator)
    d1 = d.unsqueeze(-1)
    w = 1.0 + c.unsqueeze(-1) * z
    positive = ops.gt(w, 0.0)
    log_w = ops.where(positive, w, 1.0).log()
    v = w * w * w
    ok = ops.logical_and(positive, ops.lt(u.log(), 0.5 * z * z + d1 - d1 * v
                                          + 3.0 * d1 * log_w))
    log_x, accepted = _first_accepted(ok, d1.log() + 3.0 * log_w)
    log_u = (1.0 - _uniform(alpha.shape, alpha, generator)).log()
    lift = ops.where(ops.eq(log_u, 0.0), 0.0, log_u / alpha)     # (0 / 0 at alpha = 0)
    log_x = ops.where(boost, log_x + lift, log_x)
    # a negative, infinite or NaN alpha has no draw: NaN, and nothing to wait for
    invalid = ops.logical_not(ops.logical_and(ops.ge(alpha, 0.0), _finite(alpha)))
    return ops.where(invalid, math.nan, log_x), ops.logical_or(accepted, invalid)


def _log_gamma_draws(alpha: Tensor, generator: Any) -> tuple[Tensor, float]:
    """``log`` of Gamma(alpha, 1) draws (float64, no gradient; NaN for a negative or
    non-finite ``alpha``) and the largest finite ``alpha`` (read in the same step: it
    sizes the gradient's series)."""
    with no_grad():
        a = _f64(alpha.detach())
        finite_a = ops.where(_finite(a), a, 0.0)
        largest = finite_a.max() if a.numel() else None
        extra = () if largest is None else (largest,)
        log_x = _until_accepted("_standard_gamma", lambda: _gamma_pass(a, generator), extra)
        return log_x, 0.0 if largest is None else host_max(largest)


def log_standard_gamma(alpha: Tensor, generator: Any = None) -> Tensor:
    """``log`` of Gamma(alpha, 1) draws in float64, differentiable in ``alpha`` by
    implicit reparameterization: ``d log x / d alpha = -(dP/dalpha) / (x dP/dx)``
    at the draw, ``P`` the regularized incomplete gamma function (exact to float64
    rounding, see the module docstring; PyTorch's ``_standard_gamma_grad`` uses
    approximations good to about 1e-4 above alpha = 8). Realizes the draw (see the
    module docstring)."""
    log_x, largest = _log_gamma_draws(alpha, generator)
    terms = series_terms(largest)

    def backward(g: Tensor) -> list[Any]:
        a = _f64(alpha.detach())
        parts = incomplete_gamma_parts(a, log_x.exp(), terms, log_x=log_x)
        return [g * parts["dlogx_da"]]

    return _attach(log_x, [alpha], backward, "StandardGammaBackward")


def _tiny_clamped(x: Tensor, low: float, high: float | None = None) -> Tensor:
    """``x`` clamped into ``[low, high]`` in value only: the gradient passes as if
    unclamped (PyTorch clamps its gamma and Dirichlet draws in place, outside
    autograd)."""
    return x + (x.clamp(min=low, max=high) - x).detach()


def _check_float(op: str, name: str, t: Any) -> Tensor:
    if not isinstance(t, Tensor):
        raise TypeError(f"{op}: {name} must be a Tensor, got {type(t).__name__}")
    if not t.dtype.is_floating_point:
        raise DTypeError(f"{op}: {name} must be a floating point tensor, got {t.dtype.name}")
    return t


def _standard_gamma(input: Tensor, generator: Any = None) -> Tensor:
    """Gamma(input, 1) draws of ``input``'s shape and dtype (``torch._standard_gamma``),
    differentiable in ``input`` (implicit reparameterization, exact: see
    ``log_standard_gamma``), clamped below at the dtype's smallest normal number as
    PyTorch's. Realizes the draw (see the module docstring)."""
    _check_float("_standard_gamma", "input", input)
    x = log_standard_gamma(input, generator).exp().to(input.dtype)
    return _tiny_clamped(x, dt.finfo(input.dtype).tiny)


def _sample_dirichlet(input: Tensor, generator: Any = None) -> Tensor:
    """Dirichlet draws over the last dim of the concentrations ``input``
    (``torch._sample_dirichlet``): Gamma draws normalized, in log space (a softmax of
    their logs, so small concentrations whose draws underflow still give a point of
    the simplex), clamped into ``[tiny, 1 - eps/2]`` as PyTorch's. Differentiable in
    ``input`` (through the Gamma draws' implicit gradients and the normalization: a
    pathwise gradient, per draw not PyTorch's, which differentiates each coordinate's
    Beta marginal; both are unbiased)."""
    _check_float("_sample_dirichlet", "input", input)
    if input.ndim < 1:
        raise ValueError(f"_sample_dirichlet: input must have at least one dim (the "
                         f"categories), got shape {input.shape}")
    x = ops.softmax(log_standard_gamma(input, generator), -1).to(input.dtype)
    info = dt.finfo(input.dtype)
    return _tiny_clamped(x, info.tiny, 1.0 - info.eps / 2)


# ---------------------------------------------------------------- counting samplers


# lgamma(k + 1) - ((k + 1/2) log(k + 1) - (k + 1) + log(2 pi) / 2) for k = 0 .. 15
_TAIL_TABLE = np.array([math.lgamma(k + 1.0) - ((k + 0.5) * math.log(k + 1.0) - (k + 1.0)
                                                + 0.5 * math.log(2 * math.pi))
                        for k in range(16)])


def _log_factorial_tail(k: Tensor) -> Tensor:
    """``lgamma(k + 1) - ((k + 1/2) log(k + 1) - (k + 1) + log(2 pi) / 2)``, the
    remainder of Stirling's series (float64 integral ``k >= 0``): a table below 16,
    else five terms of its asymptotic series (error < 1e-16). What keeps the
    acceptance tests of PTRS and BTRS exact for large counts, where ``lgamma``
    differences cancel."""
    small = ops.lt(k, 16.0)
    table = tensor(_TAIL_TABLE, dtype=dt.float64, device=_device(k))
    exact = table[ops.cast(ops.where(small, k, 0.0), dt.int64)]
    n = ops.where(small, 17.0, k + 1.0)
    r = (n * n).reciprocal()
    series = (1 / 12 - r * (1 / 360 - r * (1 / 1260 - r * (1 / 1680 - r / 1188)))) / n
    return ops.where(small, exact, series)


def _count_pass(budget: Tensor, gaps: Callable[[tuple[int, ...]], Tensor]
                ) -> tuple[Tensor, Tensor, Tensor]:
    """One pass of a counting sampler: the number of partial sums of ``COUNT_TERMS``
    gaps (``gaps(shape)``, float64) within ``budget``; and, for the elements whose
    every partial sum fits (their count may go on), the budget left and a flag."""
    g = gaps(budget.shape + (COUNT_TERMS,))
    sums = cumsum(g, -1)
    within = ops.le(sums, budget.unsqueeze(-1))
    count = ops.cast(within, dt.float64).sum(-1)
    full = within[..., -1]
    return count, ops.where(full, budget - sums[..., -1], 0.0), full


def _counting(budget: Tensor, gaps: Callable[[tuple[int, ...]], Tensor]
              ) -> tuple[Tensor, Callable[[], Tensor], Callable[[], None]]:
    """A counting sampler run pass by pass: (the count so far, the "some element
    continues" flag to realize, the next pass). Continuing an element's count over a
    fresh pass is exact: the gaps are memoryless."""
    state = {}
    state["count"], state["left"], state["open"] = _count_pass(budget, gaps)

    def pending() -> Tensor:
        return state["open"].any()

    def step() -> None:
        more, left, still = _count_pass(state["left"], gaps)
        state["count"] = state["count"] + ops.where(state["open"], more, 0.0)
        state["left"] = ops.where(state["open"], left, 0.0)
        state["open"] = ops.logical_and(state["open"], still)

    return state, pending, step


def _run(op: str, counters: list[tuple[dict, Callable, Callable]],
         rejecters: list[tuple[dict, Callable]], checks: list[tuple[Tensor, str]]) -> None:
    """Run counting samplers and rejection samplers to completion together: each pass
    realizes every pending value with the flags (one step), reads the flags, raises
    the first failed check (``(bad-anywhere flag, message)``, read in the first step)
    and draws another pass of whatever is unfinished."""
    for index in range(_MAX_PASSES):
        flags = [pending() for _, pending, _ in counters] + \
                [ops.logical_not(state["ok"].all()) for state, _ in rejecters]
        bad = [flag for flag, _ in checks] if index == 0 else []
        values = [v for state, _, _ in counters for v in state.values()] + \
                 [v for state, _ in rejecters for v in state.values()]
        realize(*values, *flags, *bad)
        for flag, (_, message) in zip(bad, checks):
            if flag.item():
                raise ValueError(message)
        unfinished = [f.item() for f in flags]
        if not any(unfinished):
            return
        for (_, _, step), more in zip(counters, unfinished):
            if more:
                step()
        for (state, draw), more in zip(rejecters, unfinished[len(counters):]):
            if more:
                value, ok = draw()
                state["value"] = ops.where(state["ok"], state["value"], value)
                state["ok"] = ops.logical_or(state["ok"], ok)
    raise RuntimeError(f"{op}: {_MAX_PASSES} passes left elements without a draw "
                       "(invalid parameters?)")


def _rejecter(draw: Callable[[], tuple[Tensor, Tensor]]) -> tuple[dict, Callable]:
    value, ok = draw()
    return {"value": value, "ok": ok}, draw


def _regimes(params: list[Tensor], small: Callable[..., np.ndarray]) -> tuple[bool, bool]:
    """Whether any element uses the small-mean method and whether any uses the
    rejection one: ``small(*host values)`` when the host already holds the
    parameters, else both (each element then computes both and keeps its own)."""
    known = [_known_host(p) for p in params]
    if any(k is None for k in known):
        return True, True
    with np.errstate(all="ignore"):
        mask = np.asarray(small(*known))
    return bool(mask.any()), bool(not mask.all())


# ---------------------------------------------------------------- Poisson


def _ptrs_pass(lam: Tensor, generator: Any) -> tuple[Tensor, Tensor]:
    """One pass of Hormann's PTRS (transformed rejection with squeeze) for Poisson
    rates ``lam >= 10``, ``POISSON_ROUNDS`` proposals per element; the acceptance test
    compares with the exact log-probability (Stirling form, so it keeps its digits
    for large rates)."""
    slam = lam.sqrt()
    b = 0.931 + 2.53 * slam
    a = -0.059 + 0.02483 * b
    log_inv_alpha = (1.1239 + 1.1328 / (b - 3.4)).log()
    vr = 0.9277 - 3.6224 / (b - 2.0)
    shape = lam.shape + (POISSON_ROUNDS,)
    u = _uniform(shape, lam, generator) - 0.5
    v = _uniform(shape, lam, generator)
    lam1, a1, b1 = lam.unsqueeze(-1), a.unsqueeze(-1), b.unsqueeze(-1)
    us = 0.5 - u.abs()
    k = ((2.0 * a1 / us + b1) * u + lam1 + 0.43).floor()
    fast = ops.logical_and(ops.ge(us, 0.07), ops.le(v, vr.unsqueeze(-1)))
    reject = ops.logical_or(ops.lt(k, 0.0), ops.logical_and(ops.lt(us, 0.013), ops.gt(v, us)))
    kk = ops.where(ops.ge(k, 0.0), k, 0.0)
    t = (lam1 - kk - 1.0) / (kk + 1.0)
    log_pmf = (-t + kk * (t.log1p() - t) - 0.5 * (kk + 1.0).log()
               - 0.5 * math.log(2 * math.pi) - _log_factorial_tail(kk))
    slow = ops.le(v.log() + log_inv_alpha.unsqueeze(-1) - (a1 / (us * us) + b1).log(), log_pmf)
    ok = ops.logical_or(fast, ops.logical_and(ops.logical_not(reject), slow))
    return _first_accepted(ok, kk)


def _exponential_gaps(like: Tensor, generator: Any) -> Callable[[tuple[int, ...]], Tensor]:
    return lambda shape: -(1.0 - _uniform(shape, like, generator)).log()


def poisson(input: Tensor, generator: Any = None) -> Tensor:
    """Poisson draws with the rates ``input`` (``torch.poisson``), in its dtype.

    Rates below 10 count the arrivals of a unit-rate Poisson process within the rate
    (exponential gaps, ``COUNT_TERMS`` a pass, an element that fills a pass carrying
    on); rates from 10 use Hormann's PTRS rejection sampler (numpy's). Realizes the
    draw (one step in all but rare cases: see the module docstring), and so checks the
    rates as PyTorch does: a negative or NaN rate is a ValueError; an infinite rate
    draws inf. The gradient with respect to ``input`` is zero, as PyTorch's."""
    _check_float("poisson", "input", input)
    with no_grad():
        lam = _f64(input.detach())
        small = ops.logical_and(ops.lt(lam, 10.0), ops.ge(lam, 0.0))
        use_small, use_large = _regimes([input], lambda r: (r < 10) & (r >= 0))
        counters, rejecters = [], []
        if use_small:
            budget = ops.where(small, lam, 0.0)
            counters.append(_counting(budget, _exponential_gaps(lam, generator)))
        if use_large:
            valid = ops.logical_and(ops.ge(lam, 10.0), _finite(lam))
            rate = ops.where(valid, lam, 10.0)
            rejecters.append(_rejecter(lambda: _ptrs_pass(rate, generator)))
            # the elements outside PTRS's range (small, infinite or invalid rates) take
            # another value: marked accepted, so the passes end
            state = rejecters[0][0]
            state["ok"] = ops.logical_or(state["ok"], ops.logical_not(valid))
        bad = ops.logical_not(ops.ge(lam, 0.0)).any()
        _run("poisson", counters, rejecters,
             [(bad, "poisson: invalid Poisson rate, expected rate to be non-negative "
                    "(got a negative or NaN rate)")])
        out = ops.full_const(0.0, lam.shape, dt.float64)
        if use_large:
            out = ops.where(small, out, rejecters[0][0]["value"])
        if use_small:
            out = ops.where(small, counters[0][0]["count"], out)
        out = ops.where(ops.eq(lam, math.inf), math.inf, out)
        result = out.to(input.dtype)
    return _attach(result, [input], lambda g: [ops.full_const(0.0, input.shape, g.dtype)],
                   "PoissonBackward")



# ---------------------------------------------------------------- Binomial


def _btrs_pass(n: Tensor, p: Tensor, generator: Any) -> tuple[Tensor, Tensor]:
    """One pass of Hormann's BTRS for Binomial(n, p) with ``p <= 1/2`` and
    ``n p >= 10``, ``BINOMIAL_ROUNDS`` proposals per element (PyTorch's and numpy's
    algorithm), the acceptance test ``log(f(k) / f(m))`` in its Stirling form with
    the exact remainders (``_log_factorial_tail``) and ``log1p`` of the ratios near 1,
    so it keeps its digits for large counts."""
    q = 1.0 - p
    spq = (n * p * q).sqrt()
    b = 1.15 + 2.53 * spq
    a = -0.0873 + 0.0248 * b + 0.01 * p
    c = n * p + 0.5
    vr = 0.92 - 4.2 / b
    alpha = (2.83 + 5.1 / b) * spq
    m = ((n + 1.0) * p).floor()
    shape = n.shape + (BINOMIAL_ROUNDS,)
    u = _uniform(shape, n, generator) - 0.5
    v = _uniform(shape, n, generator)
    n1, p1, q1, a1, b1, m1 = (t.unsqueeze(-1) for t in (n, p, q, a, b, m))
    us = 0.5 - u.abs()
    k = ((2.0 * a1 / us + b1) * u + c.unsqueeze(-1)).floor()
    inside = ops.logical_and(ops.ge(k, 0.0), ops.le(k, n1))
    kk = ops.where(inside, k, m1)
    fast = ops.logical_and(ops.ge(us, 0.07), ops.le(v, vr.unsqueeze(-1)))
    log_v = (v * alpha.unsqueeze(-1) / (a1 / (us * us) + b1)).log()
    ratio = ((m1 + 0.5) * (((m1 + 1.0) * q1 - p1 * (n1 - m1 + 1.0))
                           / (p1 * (n1 - m1 + 1.0))).log1p()
             + (n1 + 1.0) * ((kk - m1) / (n1 - kk + 1.0)).log1p()
             + (kk + 0.5) * ((p1 * (n1 - kk + 1.0) - q1 * (kk + 1.0))
                             / (q1 * (kk + 1.0))).log1p()
             + _log_factorial_tail(m1) + _log_factorial_tail(n1 - m1)
             - _log_factorial_tail(kk) - _log_factorial_tail(n1 - kk))
    ok = ops.logical_and(inside, ops.logical_or(fast, ops.le(log_v, ratio)))
    return _first_accepted(ok, kk)


def _geometric_gaps(p: Tensor, like: Tensor, generator: Any
                    ) -> Callable[[tuple[int, ...]], Tensor]:
    """Trials up to and including each success (1, 2, ...) of Bernoulli(p) trials."""
    log_q = (-p).log1p().unsqueeze(-1)
    return lambda shape: ((1.0 - _uniform(shape, like, generator)).log() / log_q).floor() + 1.0


def binomial(count: Tensor, prob: Tensor, generator: Any = None) -> Tensor:
    """Binomial(count, prob) draws (``torch.binomial``): float tensors of one dtype,
    broadcast together; the result in that dtype.

    With ``p = min(prob, 1 - prob)`` (a draw for ``1 - prob`` is reflected), means
    ``count p`` below 10 count the successes among ``count`` trials through geometric
    waiting times (``COUNT_TERMS`` a pass, an element that fills a pass carrying on);
    larger means use Hormann's BTRS rejection sampler (as PyTorch). Realizes the draw
    (one step in all but rare cases: see the module docstring); a negative or
    non-finite ``count`` or a ``prob`` outside [0, 1] is a ValueError (PyTorch returns
    some number). Not differentiable: a backward through it raises, as PyTorch's."""
    _check_float("binomial", "count", count)
    _check_float("binomial", "prob", prob)
    if count.dtype != prob.dtype:
        raise DTypeError(f"binomial: count and prob must have one dtype, got "
                         f"{count.dtype.name} and {prob.dtype.name}")
    with no_grad():
        n, pr = movement.broadcast_tensors(_f64(count.detach()), _f64(prob.detach()))
        valid = ops.logical_and(ops.logical_and(_finite(n), ops.ge(n, 0.0)),
                                ops.logical_and(ops.ge(pr, 0.0), ops.le(pr, 1.0)))
        flip = ops.gt(pr, 0.5)
        p = ops.where(valid, ops.where(flip, 1.0 - pr, pr), 0.0)
        nn = ops.where(valid, n, 0.0)
        small = ops.lt(nn * p, 10.0)
        use_small, use_large = _regimes(
            [count, prob], lambda c, q: c * np.minimum(q, 1 - q) < 10)
        counters, rejecters = [], []
        if use_small:
            budget = ops.where(ops.logical_and(small, ops.gt(p, 0.0)), nn, 0.0)
            gaps = _geometric_gaps(ops.where(ops.gt(p, 0.0), p, 0.5), nn, generator)
            counters.append(_counting(budget, gaps))
        if use_large:
            n_big = ops.where(small, 20.0, nn)
            p_big = ops.where(small, 0.5, p)
            rejecters.append(_rejecter(lambda: _btrs_pass(n_big, p_big, generator)))
            state = rejecters[0][0]
            state["ok"] = ops.logical_or(state["ok"], small)
        bad = ops.logical_not(valid).any()
        _run("binomial", counters, rejecters,
             [(bad, "binomial: expected count >= 0 (finite) and prob in [0, 1]")])
        out = ops.full_const(0.0, nn.shape, dt.float64)
        if use_large:
            out = ops.where(small, out, rejecters[0][0]["value"])
        if use_small:
            out = ops.where(small, counters[0][0]["count"], out)
        out = ops.where(flip, nn - out, out).to(count.dtype)

    def refuse(g: Tensor) -> list[Any]:
        raise RuntimeError("binomial: the derivative of binomial is not implemented "
                           "(as in PyTorch)")

    return _attach(out, [count, prob], refuse, "BinomialBackward")


# ---------------------------------------------------------------- normal, randint_like


def _is_number(v: Any) -> bool:
    return isinstance(v, (builtins.int, builtins.float, np.integer, np.floating)) and \
        not isinstance(v, (builtins.bool, np.bool_))


def _check_std_number(std: Any) -> None:
    if not std >= 0.0:
        raise RuntimeError(f"normal: expects std >= 0.0, but found std {std}")


def normal(mean: Any, std: Any = 1.0, size: Any = None, *, generator: Any = None,
           dtype: Any = None, layout: Any = None, device: Any = None,
           pin_memory: bool = False, requires_grad: bool = False) -> Tensor:
    """Normal draws (``torch.normal``), in PyTorch's four forms:

    - ``normal(mean, std, size)`` with two numbers: a ``size`` tensor of N(mean, std^2)
      draws (``dtype``, ``device``, ``requires_grad`` as the factories take them);
    - ``normal(mean_tensor, std=1.0)``, ``normal(mean, std_tensor)`` and
      ``normal(mean_tensor, std_tensor)``: one draw per element of the broadcast
      shape, in the tensors' (floating) dtype; ``size``, ``dtype`` and
      ``requires_grad`` are refused there, as PyTorch refuses them.

    A negative (or NaN) ``std`` is a RuntimeError: a number always, a tensor's values
    when the host already holds them (a pending ``std`` is not read back: that would
    force a step). As in PyTorch, the result requires grad when ``mean`` or ``std``
    does, and their gradients are zero (the draw is not reparameterized: use
    ``mean + std * nv.randn_like(...)`` for that)."""
    tensors = [v for v in (mean, std) if isinstance(v, Tensor)]
    for name, v in (("mean", mean), ("std", std)):
        if not isinstance(v, Tensor) and not _is_number(v):
            raise TypeError(f"normal: {name} must be a number or a Tensor, got "
                            f"{type(v).__name__}")
    if not tensors:
        return _normal_numbers(mean, std, size, generator, dtype, device, requires_grad)
    for name, v in (("mean", mean), ("std", std)):
        if isinstance(v, Tensor) and not v.dtype.is_floating_point:
            raise DTypeError(f"normal: {name} must be a floating point tensor, got "
                             f"{v.dtype.name}")
    # (a dtype or device equal to the result's is accepted: what ``out=`` passes on)
    target = ops.promote("normal", mean, std)
    given = [k for k, v in (("size", size), ("layout", layout)) if v is not None] + \
        (["requires_grad"] if requires_grad else []) + \
        (["dtype"] if dtype is not None and dt.get_dtype(dtype) != target else []) + \
        (["device"] if device is not None and _other_device(device, tensors[0]) else [])
    if given:
        raise TypeError(f"normal: {', '.join(given)} cannot be given with a tensor mean or "
                        "std (the result takes their shape, dtype and device); use "
                        "normal(mean, std, size) with numbers")
    if isinstance(std, Tensor):
        known = _known_host(std)
        if known is not None and not np.all(known >= 0):
            raise RuntimeError("normal: expects all elements of std >= 0.0")
    else:
        _check_std_number(std)
    return _normal_tensors(mean, std, tensors, generator)


def _other_device(spec: Any, like: Tensor) -> bool:
    """Whether the device ``spec`` differs from ``like``'s."""
    from nova.tensor.device import device as as_device
    return as_device(spec).type != (_device(like) or "cpu")


def _normal_numbers(mean: Any, std: Any, size: Any, generator: Any, dtype: Any,
                    device: Any, requires_grad: bool) -> Tensor:
    if size is None:
        raise TypeError("normal: with a number mean and std, give the size: "
                        "normal(mean, std, size)")
    _check_std_number(std)
    draw = randn(*((size,) if isinstance(size, builtins.int) else tuple(size)),
                 dtype=dtype, generator=generator, device=device)
    out = draw * builtins.float(std) + builtins.float(mean)
    return out.requires_grad_() if requires_grad else out


def _normal_tensors(mean: Any, std: Any, tensors: list[Tensor], generator: Any) -> Tensor:
    target = ops.promote("normal", mean, std)
    shapes = [t.shape for t in tensors]
    shape = broadcast_shapes("normal", *shapes)
    with no_grad():
        draw = randn(shape, dtype=target, generator=generator, device=_device(tensors[0]))
        m = mean.detach() if isinstance(mean, Tensor) else mean
        s = std.detach() if isinstance(std, Tensor) else std
        out = draw * s + m
    return _attach(out, tensors, lambda g: [ops.full_const(0.0, t.shape, g.dtype)
                                            for t in tensors], "NormalBackward")


def _int_arg(op: str, name: str, v: Any) -> int:
    if isinstance(v, Tensor):
        if v.numel() != 1 or v.dtype.is_floating_point or v.dtype == dt.bool_:
            raise TypeError(f"{op}: {name} must be an int or a one-element integer tensor, "
                            f"got a {v.dtype.name} tensor of shape {v.shape}")
        return builtins.int(v.item())
    if isinstance(v, builtins.bool) or not hasattr(v, "__index__"):
        raise TypeError(f"{op}: {name} must be an int, got {type(v).__name__} {v!r}")
    return operator.index(v)


_EXACT_INTEGERS = {"float16": 2 ** 11, "bfloat16": 2 ** 8, "float32": 2 ** 24,
                   "float64": 2 ** 53}


def randint_like(input: Tensor, low: Any = 0, high: Any = None, *, dtype: Any = None,
                 layout: Any = None, device: Any = None, requires_grad: bool = False,
                 memory_format: Any = None, generator: Any = None) -> Tensor:
    """Integers uniform in ``[low, high)`` in ``input``'s shape and (unless ``dtype``)
    dtype, as ``torch.randint_like``: ``randint_like(input, high)`` or
    ``randint_like(input, low, high)``. The bounds must fit the dtype (for a float
    dtype, its exactly representable integers); ``low < high``."""
    if not isinstance(input, Tensor):
        raise TypeError(f"randint_like: input must be a Tensor, got {type(input).__name__}")
    if high is None:
        low, high = 0, low
    low, high = _int_arg("randint_like", "low", low), _int_arg("randint_like", "high", high)
    target = input.dtype if dtype is None else dt.get_dtype(dtype)
    if low >= high:
        raise RuntimeError(f"randint_like: expects 'low' to be less than 'high', but got "
                           f"low={low} >= high={high}")
    if target == dt.bool_:
        lo, hi = 0, 1
    elif target.is_floating_point:
        hi = _EXACT_INTEGERS.get(target.name, 2 ** 24)
        lo = -hi
    else:
        lo, hi = dt.int_bounds(target)
    if low < lo or high - 1 > hi:
        raise RuntimeError(f"randint_like: the range [{low}, {high}) does not fit "
                           f"{target.name} (valid: low >= {lo}, high <= {hi + 1})")
    where = device if device is not None else _device(input)
    draw = randint(low, high, input.shape, dtype=dt.int64, generator=generator, device=where)
    out = draw.to(target)
    if requires_grad:
        if not target.is_floating_point:
            raise RuntimeError(f"randint_like: only floating point tensors can require "
                               f"gradients, got dtype {target.name}")
        out.requires_grad_()
    return out


# ---------------------------------------------------------------- incomplete gamma


def _incomplete_gamma(op: str, a: Any, x: Any, upper: bool) -> Tensor:
    """``P(a, x)`` (or ``Q = 1 - P`` if ``upper``) with gradients in both arguments."""
    if not isinstance(a, Tensor) and not isinstance(x, Tensor):
        raise TypeError(f"{op}: expected a Tensor argument, got {type(a).__name__} and "
                        f"{type(x).__name__}")
    target = ops.promote(op, a, x)
    if not target.is_floating_point:
        target = dt.get_default_dtype()
    like = a if isinstance(a, Tensor) else x
    a_t = a if isinstance(a, Tensor) else tensor(a, dtype=target, device=_device(like))
    x_t = x if isinstance(x, Tensor) else tensor(x, dtype=target, device=_device(like))
    a_b, x_b = movement.broadcast_tensors(a_t, x_t)
    with no_grad():
        a64, x64 = _f64(a_b.detach()), _f64(x_b.detach())
        a_zero = ops.logical_and(ops.eq(a64, 0.0), ops.gt(x64, 0.0))   # the limit a -> 0+
        valid = ops.logical_or(a_zero, ops.logical_and(
            ops.logical_and(ops.gt(a64, 0.0), _finite(a64)), ops.ge(x64, 0.0)))
        inner = ops.logical_and(ops.logical_and(valid, ops.gt(a64, 0.0)),
                                ops.logical_and(ops.gt(x64, 0.0), _finite(x64)))
        a_in, x_in = ops.where(inner, a64, 1.0), ops.where(inner, x64, 1.0)
        parts = incomplete_gamma_parts(a_in, x_in, series_terms(host_max(a_b)))
        at_end = 1.0 if upper else 0.0      # the value at x = 0 (1 - it at x = inf)
        value = parts["Q" if upper else "P"]
        value = ops.where(ops.eq(x64, 0.0), at_end, ops.where(
            ops.logical_or(ops.eq(x64, math.inf), a_zero), 1.0 - at_end, value))
        out = ops.where(valid, value, math.nan).to(target)
    sign = -1.0 if upper else 1.0
    with no_grad():
        # d/dx at x = 0: the density x^(a-1) / Gamma(a) there, +inf below a = 1, 1 at 1
        origin = ops.logical_and(ops.logical_and(valid, ops.gt(a64, 0.0)), ops.eq(x64, 0.0))
        at_origin = ops.where(ops.lt(a64, 1.0), math.inf, ops.where(ops.eq(a64, 1.0), 1.0,
                                                                     0.0))
        # outside x >= 0 (NaN included) or with a NaN a, PyTorch's NaN gradient; a < 0
        # (a NaN value too) keeps 0 where PyTorch evaluates its density formula anyway
        undefined = ops.logical_or(ops.logical_not(ops.ge(x64, 0.0)), ops.isnan(a64))

    def backward(g: Tensor) -> list[Any]:
        g64 = _f64(g)
        density = ((a_in - 1.0) * x_in.log() - x_in - lgamma(a_in)).exp()
        density = ops.where(origin, at_origin, ops.where(inner, density, 0.0))
        return [ops.where(undefined, math.nan, ops.where(inner, sign * g64 * parts["dP_da"],
                                                         0.0)),
                ops.where(undefined, math.nan, sign * g64 * density)]

    return _attach(out, [a_b, x_b], backward, "IncompleteGammaBackward")


def gammainc(input: Any, other: Any) -> Tensor:
    """The regularized lower incomplete gamma function ``P(input, other)``
    (``torch.special.gammainc``, ``torch.igamma``), computed in float64 (series and
    continued fraction, see the module docstring) with gradients in both arguments
    (PyTorch's has none in ``input``). At ``input = 0`` the limit, 1 for ``other >
    0``; NaN elsewhere outside ``input > 0``, ``other >= 0``.
    The number of series terms is read off the largest ``input``: a host read when
    it is pending."""
    return _incomplete_gamma("gammainc", input, other, upper=False)


def gammaincc(input: Any, other: Any) -> Tensor:
    """The regularized upper incomplete gamma function ``Q = 1 - P``
    (``torch.special.gammaincc``, ``torch.igammac``), its small values in the upper
    tail kept to full precision (see ``gammainc``)."""
    return _incomplete_gamma("gammaincc", input, other, upper=True)
