"""Gradients at the points where a formula's pieces meet -- past float64's overflow of
``exp(|x|)``, beside an infinity, at 0 and at NaN -- for ``sinh``/``cosh``, ``hypot``,
``xlogy``/``xlog1py`` and ``copysign``, as PyTorch 2 gives them (its derivative formulas:
``cosh``/``sinh``; ``x / hypot`` and ``y / hypot``; ``xlogy(grad, y).masked_fill((x ==
0) & (y <= 0), 0)`` and ``grad * x / y``; ``result / x`` masked to 0 at ``x == 0``).

References are closed forms in float64 with numpy, or hand-derived values; nothing here
needs torch. Each test differentiates all its cases in one step, so each engine compiles
once per test.
"""
import math

import numpy as np

import nova as nv

INF, NAN = math.inf, math.nan


def _check(got, want, rtol=1e-15):
    """Equal NaNs and infinities where ``want`` has them, close elsewhere (the sign of a
    zero gradient is not compared: a sum of branches' +0 and -0 is +0)."""
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(got[np.isinf(want)], want[np.isinf(want)])
    finite = np.isfinite(want)
    np.testing.assert_allclose(got[finite], want[finite], rtol=rtol, atol=0)


def _value_and_grads(fn, *columns, dtype="float64"):
    leaves = [nv.tensor(c, dtype=dtype, requires_grad=True) for c in columns]
    out = fn(*leaves)
    grads = nv.autograd.grad(out.sum(), leaves)
    return [out.detach().numpy()] + [g.numpy() for g in grads]


# ---------------------------------------------------------------- sinh / cosh

def test_sinh_cosh_gradients_are_finite_wherever_their_values_are():
    """exp(|x|) overflows at 709.78, cosh(x) only at 710.4758: the gradients of the
    half-exponential form were inf in between (e * e before the halving)."""
    x = np.array([709.8, 710.0, 710.4, 710.47, -709.9, -710.4, 710.48, -711.0, 300.0, 25.0])
    for fn, value, slope in ((nv.sinh, np.sinh, np.cosh), (nv.cosh, np.cosh, np.sinh)):
        with np.errstate(over="ignore"):
            want_value, want_slope = value(x), slope(x)
        got_value, got_slope = _value_and_grads(fn, x)
        assert np.isfinite(got_slope[:6]).all()
        _check(got_value, want_value, rtol=1e-15)
        _check(got_slope, want_slope, rtol=1e-15)


def test_sinh_cosh_float32_gradients_round_the_float64_ones():
    """float32 computes in float64 and rounds once: the gradient is the float32 nearest
    cosh/sinh (within an ulp of numpy's float64), and inf past float32's overflow."""
    x = np.array([20.5, 50.0, 88.5, -88.7, 89.5, -89.5], np.float32)
    w = x.astype(np.float64)
    for fn, slope in ((nv.sinh, np.cosh), (nv.cosh, np.sinh)):
        _, got = _value_and_grads(fn, x, dtype="float32")
        with np.errstate(over="ignore"):
            want = slope(w).astype(np.float32)
        assert got.dtype == np.float32
        _check(got, want, rtol=1.2e-7)
        assert np.isinf(got[4:]).all()


# ---------------------------------------------------------------- hypot

def test_hypot_beside_an_infinity_and_at_the_origin():
    """Values: inf beside an infinity (a NaN beside one included, IEEE's), 0 at the
    origin. Gradients x / hypot, y / hypot: NaN for the infinite operand (inf / inf) and
    at the origin (0 / 0), +-0 for a finite operand beside an infinity; the formula's
    pieces gave NaN (inf * 0) for the finite one and 0 at the origin."""
    x = [INF, -INF, 2.0, -2.0, 0.0, -0.0, INF, INF, NAN, 0.0, 3.0, NAN]
    y = [3.0, -2.0, INF, -INF, 0.0, 0.0, -INF, NAN, -INF, -5.0, 4.0, 1.0]
    v, gx, gy = _value_and_grads(nv.hypot, x, y)
    _check(v, np.hypot(x, y))
    _check(gx, [NAN, NAN, 0.0, -0.0, NAN, NAN, NAN, NAN, NAN, 0.0, 0.6, NAN])
    _check(gy, [0.0, -0.0, NAN, NAN, NAN, NAN, NAN, NAN, NAN, -1.0, 0.8, NAN])


def test_hypot_float32_beside_an_infinity():
    x = np.array([np.inf, 1.5, 0.0], np.float32)
    y = np.array([-2.0, -np.inf, 0.0], np.float32)
    v, gx, gy = _value_and_grads(nv.hypot, x, y, dtype="float32")
    _check(v, [INF, INF, 0.0])
    _check(gx, [NAN, 0.0, NAN])
    _check(gy, [-0.0, NAN, NAN])


def test_hypot_second_derivatives():
    """The Hessian [[y^2, -xy], [-xy, x^2]] / hypot^3: through |x| and max(|x|, |y|) it
    was 0 at x = 0 (|x|'s slope there) and at |x| = |y| (max splits the tie)."""
    x = np.array([0.0, 3.0, -3.0, -1.0, 2.5])
    y = np.array([2.0, 3.0, 3.0, 2.0, 0.0])
    tx, ty = (nv.tensor(c, dtype="float64", requires_grad=True) for c in (x, y))
    gx, gy = nv.autograd.grad(nv.hypot(tx, ty).sum(), [tx, ty], create_graph=True)
    hxx, hxy = nv.autograd.grad(gx.sum(), [tx, ty], retain_graph=True)
    hyx, hyy = nv.autograd.grad(gy.sum(), [tx, ty])
    v3 = np.hypot(x, y) ** 3
    for got, want in ((hxx, y * y / v3), (hxy, -x * y / v3), (hyx, -x * y / v3),
                      (hyy, x * x / v3)):
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-14, atol=1e-300)


# ---------------------------------------------------------------- xlogy / xlog1py

def test_xlogy_and_xlog1py_at_x_zero():
    """0 where x == 0 for every non-NaN y (xlogy(0, inf), xlog1py(0, -1)); there d/dx is
    log(y) (log1p(y)), +inf at y = inf and 0 where y is at or below the domain's edge,
    and d/dy is x / y (x / (1 + y)): 0, and NaN at 0/0. Nova's d/dx at x = 0 was 0."""
    x = [0.0, 0.0, 0.0, 0.0, -0.0, 0.0, 0.0, 2.0]
    y = [2.0, 0.5, INF, 0.0, -1.0, -3.0, NAN, 3.0]
    v, gx, gy = _value_and_grads(nv.xlogy, x, y)
    _check(v, [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, NAN, 2 * math.log(3.0)])
    _check(gx, [math.log(2.0), math.log(0.5), INF, 0.0, 0.0, 0.0, NAN, math.log(3.0)])
    _check(gy, [0.0, 0.0, 0.0, NAN, 0.0, -0.0, NAN, 2 / 3])

    y1 = [1.0, -0.5, INF, -1.0, -2.0, 0.0, NAN, 2.0]
    v, gx, gy = _value_and_grads(nv.special.xlog1py, x, y1)
    _check(v, [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, NAN, 2 * math.log(3.0)])
    _check(gx, [math.log(2.0), math.log(0.5), INF, 0.0, 0.0, 0.0, NAN, math.log(3.0)])
    _check(gy, [0.0, 0.0, 0.0, NAN, 0.0, 0.0, NAN, 2 / 3])


def test_xlogy_mixed_second_derivative_at_x_zero():
    """d/dy of d/dx xlogy = 1 / y at x = 0 too (x / y's slope in x)."""
    x = nv.tensor([0.0, 0.0, 1.0], dtype="float64", requires_grad=True)
    y = nv.tensor([2.0, 4.0, 5.0], dtype="float64", requires_grad=True)
    (gx,) = nv.autograd.grad(nv.xlogy(x, y).sum(), [x], create_graph=True)
    (hxy,) = nv.autograd.grad(gx.sum(), [y])
    np.testing.assert_allclose(hxy.numpy(), [0.5, 0.25, 0.2], rtol=1e-15)


# ---------------------------------------------------------------- cumprod / prod

def _prod_hessian(x):
    """d2 prod(x) / dx_i dx_j: the product of the other elements (0 on the diagonal)."""
    n = len(x)
    return np.array([[np.prod(np.delete(x, [i, j])) if i != j else 0.0 for j in range(n)]
                     for i in range(n)])


def test_cumprod_and_prod_second_derivatives_at_zeros():
    """Hessian-vector products of cumprod and prod through rows with zeros. The
    gradient after a row's first zero is 0 by value, but its derivative in that zero is
    the product of the others: the zero-safe rule had written it as a constant 0, so the
    second derivative at the first zero lost those terms (prod's is cumprod's last)."""
    x = np.array([[2.0, -0.5, 0.0, -2.0, 1.5], [1.0, 0.0, 0.0, 3.0, 2.0],
                  [0.0, 1.5, -1.0, 2.0, 0.5], [1.5, 2.0, -1.0, 0.5, 3.0]])
    w = np.array([[1.5, -0.7, 0.3, 0.9, -1.1], [0.4, -0.2, 0.6, 1.3, -0.8],
                  [0.7, 1.1, -0.5, 0.2, 0.9], [-0.3, 0.8, 1.2, -1.4, 0.5]])
    v = np.array([[0.5, 1.0, -2.0, 0.25, 1.5], [-1.0, 2.0, 0.5, 1.0, -0.5],
                  [1.0, -0.5, 2.0, 1.5, 0.25], [0.5, 0.5, -1.0, 2.0, 1.0]])
    want_cumprod = np.zeros_like(x)
    for r in range(len(x)):
        for j in range(x.shape[1]):
            want_cumprod[r, :j + 1] += w[r, j] * _prod_hessian(x[r, :j + 1]) @ v[r, :j + 1]
    want_prod = np.stack([w[r, 0] * _prod_hessian(x[r]) @ v[r] for r in range(len(x))])
    t = nv.tensor(x, dtype="float64", requires_grad=True)
    for out, weight, want in ((t.cumprod(1), w, want_cumprod), (t.prod(1), w[:, 0], want_prod)):
        (g,) = nv.autograd.grad((out * nv.tensor(weight)).sum(), [t], create_graph=True)
        (hv,) = nv.autograd.grad((g * nv.tensor(v)).sum(), [t])
        np.testing.assert_allclose(hv.numpy(), want, rtol=1e-14, atol=1e-14)


# ---------------------------------------------------------------- copysign

def test_copysign_gradient_is_result_over_input():
    """result / a, 0 at a == 0: NaN at an infinite or NaN a (|a|'s rule gave +-1, and 0
    at NaN); the sign operand gets zeros."""
    a = [INF, -INF, NAN, 2.0, -2.0, 0.0, -0.0, INF]
    b = [1.0, -1.0, -1.0, -1.0, 1.0, -1.0, 1.0, NAN]
    v, ga, gb = _value_and_grads(nv.copysign, a, b)
    np.testing.assert_array_equal(v[:-1], np.copysign(a, b)[:-1])
    assert v[-1] == INF          # (copysign(x, nan) is |x|: the module's documented limit)
    _check(ga, [NAN, NAN, NAN, -1.0, -1.0, 0.0, 0.0, NAN])
    np.testing.assert_array_equal(gb, np.zeros(8))


def test_remainder_gradient_at_an_infinite_dividend_is_nan():
    """PyTorch's d/dy of remainder(x, y) is -floor_divide(x, y): NaN at x = +-inf (the
    value is NaN there too); elsewhere -floor(x / y)."""
    value, dx, dy = _value_and_grads(nv.remainder, [INF, -INF, 7.0, -7.0], [2.0, 3.0, 2.0, 2.0])
    _check(value, [NAN, NAN, 1.0, 1.0])
    _check(dx, [1.0, 1.0, 1.0, 1.0])
    _check(dy, [NAN, NAN, -3.0, 4.0])



# ---------------------------------------------------------------- logaddexp at ties

def test_logaddexp_and_logaddexp2_second_derivatives_at_ties():
    """d2/dx2 log(e^x + e^y) = p (1 - p) with p = e^x / (e^x + e^y): 0.25 at a tie,
    mixed -0.25. The formula max + log1p(exp(-|x - y|)) had |x - y|, whose slope 0 at
    the tie made both 0 there (so did logcumsumexp's, built from it); logaddexp2's is
    ln 2 p (1 - p), p = 2^x / (2^x + 2^y)."""
    x0 = np.array([0.0, 1.5, 2.0, -3.0])
    y0 = np.array([0.0, 1.5, 0.0, 4.0])                 # two ties, then two apart
    for fn, base in ((nv.logaddexp, math.e), (nv.logaddexp2, 2.0)):
        p, scale = 1.0 / (1.0 + base ** (y0 - x0)), math.log(base)
        x = nv.tensor(x0, dtype=nv.float64, requires_grad=True)
        y = nv.tensor(y0, dtype=nv.float64, requires_grad=True)
        (gx,) = nv.autograd.grad(fn(x, y).sum(), [x], create_graph=True)
        np.testing.assert_allclose(gx.numpy(), p, rtol=1e-14)
        hxx, hxy = nv.autograd.grad(gx.sum(), [x, y])
        np.testing.assert_allclose(hxx.numpy(), scale * p * (1 - p), rtol=1e-12)
        np.testing.assert_allclose(hxy.numpy(), -scale * p * (1 - p), rtol=1e-12)
    x = nv.tensor([0.0, 0.0], dtype=nv.float64, requires_grad=True)
    (g,) = nv.autograd.grad(nv.logcumsumexp(x, 0)[1], [x], create_graph=True)
    (h,) = nv.autograd.grad(g[0], [x])
    np.testing.assert_allclose(h.numpy(), [0.25, -0.25], rtol=1e-12)


def test_logaddexp_values_at_infinities_and_nan():
    inf, nan = math.inf, math.nan
    x = nv.tensor([-inf, inf, inf, -inf, 3.0, nan, 800.0], dtype=nv.float64)
    y = nv.tensor([-inf, inf, 2.0, 5.0, inf, 1.0, 800.0], dtype=nv.float64)
    got = nv.logaddexp(x, y).numpy()
    with np.errstate(invalid="ignore"):           # (numpy warns at inf + -inf's NaN)
        want, want2 = np.logaddexp(x.numpy(), y.numpy()), np.logaddexp2(x.numpy(), y.numpy())
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_allclose(got[~np.isnan(want)], want[~np.isnan(want)], rtol=1e-15)
    got2 = nv.logaddexp2(x, y).numpy()
    np.testing.assert_allclose(got2[~np.isnan(want2)], want2[~np.isnan(want2)], rtol=1e-15)


# ---------------------------------------------------------------- special functions at overflow

def test_erfcx_gradient_where_the_value_or_its_slope_overflows():
    """The slope 2x erfcx(x) - 2/sqrt(pi) overflows from x < -26.55404369378273 and the
    value from -26.62873571375149: the gradient is -inf there (it was 0 past -27, NaN
    between; mpmath's references), the second derivative +inf. (Within 2.5e-7 above the
    first point the formula's slope overflows too, -inf for a true ~-1.7977e308.)"""
    x = [-26.5, -26.55, -26.6, -26.62873571375149, -26.7, -30.0, -1e3, -INF]
    want_value = [1.924553162418569e+305, 2.7308385532150415e+306, 3.894337719605585e+307,
                  1.7976931348622485e+308, INF, INF, INF, INF]
    want_slope = [-1.0200131760818414e+307, -1.4500752717571871e+308] + [-INF] * 6
    value, slope = _value_and_grads(nv.special.erfcx, x)
    _check(value, want_value, rtol=1e-13)
    _check(slope, want_slope, rtol=1e-13)
    leaf = nv.tensor(x[2:], dtype="float64", requires_grad=True)
    first, = nv.autograd.grad(nv.special.erfcx(leaf).sum(), [leaf], create_graph=True)
    second, = nv.autograd.grad(first.sum(), [leaf])
    assert (second.numpy() == INF).all()


def test_erfcx_float32_gradient_past_the_overflow():
    value, slope = _value_and_grads(nv.special.erfcx, [-9.5, -10.0, -27.0, -INF], dtype="float32")
    assert (value == INF).all() and (slope == -INF).all()


def test_digamma_gradient_at_subnormal_x_is_inf():
    """trigamma(x) ~ 1/x^2 overflows: +inf at positive subnormals (the reflection's second
    evaluation under its select got a zero gradient there, 0 * inf = NaN)."""
    value, slope = _value_and_grads(nv.digamma, [5e-324, 1e-310, 2e-308, 1e-300, -1e-310])
    assert (value[:2] == -INF).all() and value[4] == INF
    assert (slope == INF).all()


def test_polygamma_of_large_x_does_not_underflow_early():
    """polygamma(n, x) ~ (-1)^(n+1) (n-1)! / x^n: (n! / x^(n+1)) x / n underflowed for n = 1
    from x ~ 1e155, n = 3 from 1e77, where the result is representable."""
    for n, x, want in ((1, [1e300, 1e200, 1e10], [1e-300, 1e-200, 1.00000000005e-10]),
                       (2, [1e150], [-1e-300]), (3, [1e85, 1e100], [2e-255, 2e-300])):
        value, _ = _value_and_grads(lambda t, n=n: nv.special.polygamma(n, t), x)
        _check(value, want, rtol=1e-14)


def test_i0_gradient_is_i1_up_to_the_overflow():
    """i0' = i1 is as large as i0 near float64's overflow: the gradient was -inf at 710
    (exp(a/2)^2's partial products overflow from 709.8) and NaN past 713.99, where it is
    +-inf; the second derivative at 0 is i1'(0) = 1/2 (abs's zero slope gave 0)."""
    x = [709.0, 710.0, 713.9, -710.0, 714.0, 1e4, INF, -INF]
    want_value = [1.231547706701654e+306, 3.345334558619656e+306, 1.6481551866951379e+308,
                  3.345334558619656e+306, INF, INF, INF, INF]
    want_slope = [1.2306788896524786e+306, 3.3429778585097626e+306, 1.6470004499232343e+308,
                  -3.3429778585097626e+306, INF, INF, INF, -INF]
    value, slope = _value_and_grads(nv.special.i0, x)
    _check(value, want_value, rtol=1e-15)
    _check(slope, want_slope, rtol=3e-13)        # (from 700 the slope's exp(~710) rounds)
    leaf = nv.tensor([0.0, -0.0, 1.0], dtype="float64", requires_grad=True)
    first, = nv.autograd.grad(nv.special.i0(leaf).sum(), [leaf], create_graph=True)
    second, = nv.autograd.grad(first.sum(), [leaf])
    _check(second.numpy(), [0.5, 0.5, 0.7009067737595233], rtol=1e-14)
