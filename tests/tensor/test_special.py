"""Special functions (``nova.tensor.special``, ``nova.special``) against SciPy's float64
values: float32 within 2 ulps over the whole domain (tails, zeros and poles included),
float64 within a few ulps away from cancellation, exact where the function is exact
(``frexp``, ``ldexp``, ``nextafter``, the zeros of ``lgamma``), special values as PyTorch
gives them, and gradients by finite differences in float64 and against the analytic
derivative."""
import math

import numpy as np
import pytest
import scipy.special as sp

import nova as nv
import nova.special as special
from nova.autograd.gradcheck import gradcheck

EPS32 = np.finfo(np.float32).eps
TINY32 = 2.0 ** -149


def _close32(got, want, ulps=2):
    """float32 ``got`` within ``ulps`` of the float64 ``want`` rounded to float32
    (subnormals: within that many spacings of the smallest one); infinities (overflow
    included) and NaN must match."""
    got = np.asarray(got, np.float64)
    with np.errstate(over="ignore"):
        want = np.asarray(want, np.float64).astype(np.float32).astype(np.float64)
    np.testing.assert_allclose(got, want, rtol=ulps * EPS32, atol=ulps * TINY32,
                               equal_nan=True)


def _f32(*values):
    return np.array(np.concatenate([np.atleast_1d(np.asarray(v, np.float64))
                                    for v in values]), np.float32)


def _ref(fn, x, *args):
    with np.errstate(all="ignore"):
        return fn(*args, np.asarray(x, np.float64))


def test_error_function_family_in_float32_and_float64():
    x = _f32([-5, -1, -0.3, 0, 1e-30, 0.3, 0.4999, 0.5, 0.7, 1.5, 3, 5, 8, 9.2, 10, 10.05, 30,
              np.inf, -np.inf, np.nan], np.linspace(-3, 10.5, 55))
    p = _f32([-1, -0.99999994, -0.9, -0.5, -1e-30, 1e-7, 0.3, 0.52, 0.9, 0.99, 0.99999994, 1,
              1.5, -2, np.nan], np.linspace(-0.999, 0.999, 37), 1 - np.logspace(-7, -1, 13))
    q = _f32([0, 1e-30, 1e-10, 0.02, 0.3, 0.5, 0.7, 0.999, 0.99999994, 1, 1.5, np.nan])
    z = _f32([-100, -40, -38, -10, -1.5, -1, -0.5, 0, 0.5, 1, 5, 10, 40, np.inf, -np.inf,
              np.nan])
    t = nv.tensor(x)
    outs = [nv.erfc(t), nv.erfinv(nv.tensor(p)), special.erfcx(t), special.ndtr(nv.tensor(z)),
            special.ndtri(nv.tensor(q)), special.log_ndtr(nv.tensor(z)), t.erfc(),
            nv.erfinv(nv.tensor([0.0, -0.0])), nv.erfc(nv.tensor(x.astype(np.float64))),
            nv.erfinv(nv.tensor(p.astype(np.float64)))]
    nv.realize(*outs)
    _close32(outs[0].numpy(), _ref(sp.erfc, x))
    assert outs[0].numpy()[list(x).index(10)] > 0                  # erfc(10) = 2e-45
    _close32(outs[1].numpy(), _ref(sp.erfinv, p))
    _close32(outs[2].numpy(), _ref(sp.erfcx, x))
    _close32(outs[3].numpy(), _ref(sp.ndtr, z))
    _close32(outs[4].numpy(), _ref(sp.ndtri, q))
    _close32(outs[5].numpy(), _ref(sp.log_ndtr, z))
    np.testing.assert_array_equal(outs[6].numpy(), outs[0].numpy())
    np.testing.assert_array_equal(np.signbit(outs[7].numpy()), [False, True])
    np.testing.assert_allclose(outs[8].numpy(), _ref(sp.erfc, x), rtol=1e-15, atol=5e-324)
    np.testing.assert_allclose(outs[9].numpy(), _ref(sp.erfinv, p), rtol=4e-15)
    assert nv.erfinv(nv.tensor([0, 1])).dtype == nv.float32            # integers: float32


def test_gamma_family_near_zeros_roots_and_poles():
    root = 1.4616321449683622
    x = _f32([-np.inf, -1e6 - 0.5, -100.5, -3, -2.4570247, -2.5, -1, -0.5, -1e-30, 0, 1e-40,
              1e-30, 0.5, 1 - 6e-8, 1, 1 + 1.2e-7, 1.5, 2 - 1.2e-7, 2, 2 + 2.4e-7, 2.5, 9.99,
              10, 10.01, 30, 1e5, 1e30, np.inf, np.nan, root - 1e-7, root, root + 1e-7],
             np.linspace(-19.75, 39.75, 120))
    t = nv.tensor(x)
    outs = [nv.lgamma(t), nv.digamma(t), nv.polygamma(1, t), nv.polygamma(2, t),
            t.polygamma(3), nv.mvlgamma(t, 3), t.lgamma(), nv.digamma(nv.tensor([0.0, -0.0])),
            nv.lgamma(nv.tensor(x.astype(np.float64))), nv.polygamma(0, t)]
    nv.realize(*outs)
    want_lgamma = _ref(sp.gammaln, x)
    want_lgamma[x == -np.inf] = np.inf                               # (PyTorch's value)
    _close32(outs[0].numpy(), want_lgamma)
    assert outs[0].numpy()[list(x).index(1)] == 0 and outs[0].numpy()[list(x).index(2)] == 0
    _close32(outs[1].numpy(), _ref(sp.digamma, x))
    # at x = -1e6 - 1/2 by the reflection formula, (-1)^n psi_n(1 - x) - pi^(n+1) D_n(0)
    # with cot(pi x) = 0 (SciPy's cot is 6e-17 there, too much for the n = 2 value)
    for n, out, d_n in ((1, outs[2], -1), (2, outs[3], 0), (3, outs[4], -2)):
        _close32(out.numpy()[2:], _ref(sp.polygamma, x, n)[2:])
        _close32(out.numpy()[1], (-1) ** n * sp.polygamma(n, 1e6 + 1.5) - math.pi ** (n + 1) * d_n)
    want_mv = sum(_ref(sp.gammaln, x.astype(np.float64) - i / 2) for i in range(3))
    want_mv[x == -np.inf] = np.inf
    _close32(outs[5].numpy(), want_mv + 1.5 * np.log(np.pi))
    np.testing.assert_array_equal(outs[6].numpy(), outs[0].numpy())
    np.testing.assert_array_equal(outs[7].numpy(), [-np.inf, np.inf])
    regular = np.isfinite(want_lgamma) & (np.abs(want_lgamma) > 0.1)   # (no cancellation)
    np.testing.assert_allclose(outs[8].numpy()[regular], _ref(sp.gammaln, x)[regular],
                               rtol=1e-14)
    np.testing.assert_array_equal(outs[9].numpy(), outs[1].numpy())
    # polygamma of a high order: no overflow of n! before the result
    big = nv.polygamma(30, nv.tensor([0.5, 3.0, 40.0], dtype=nv.float64)).numpy()
    np.testing.assert_allclose(big, sp.polygamma(30, [0.5, 3.0, 40.0]), rtol=1e-13)


def test_bessel_i0():
    x = _f32([0, 1e-20, -0.5, 3, -24.99, 25, 25.01, 60, -88, 90, 100, np.inf, -np.inf,
              np.nan], np.linspace(-80, 80, 41))
    w = np.array([700.0, 713.0, -30.0])
    t = nv.tensor(x)
    outs = [nv.i0(t), t.i0(), special.i0e(t), nv.i0(nv.tensor(w)), special.i0e(nv.tensor(w))]
    nv.realize(*outs)
    want = _ref(sp.i0, x)
    want[np.isinf(x)] = np.inf                           # (SciPy's and PyTorch's: NaN)
    _close32(outs[0].numpy(), want)
    np.testing.assert_array_equal(outs[1].numpy(), outs[0].numpy())
    _close32(outs[2].numpy(), _ref(sp.i0e, x))
    # float64: finite up to the largest double (i0(713) = 6.7e307), as exp(x) alone is not
    np.testing.assert_allclose(outs[3].numpy(), np.exp(np.abs(w) - 700) * sp.i0e(w) * np.exp(700),
                               rtol=1e-14)
    np.testing.assert_allclose(outs[4].numpy(), sp.i0e(w), rtol=1e-14)


def test_frexp_ldexp_nextafter_are_exact():
    x32 = _f32([0, -0.0, 1, -3.5, 6, 0.1, 1e-45, -3e-39, 1.1754944e-38, 3.4028235e38, np.inf,
                -np.inf, np.nan], np.random.default_rng(0).standard_normal(20) * 1e10)
    x64 = np.array([5e-324, -2.2250738585072014e-308, 1e-310, 1.7976931348623157e308, 0.75,
                    -1e300, 0.0])
    e = np.arange(len(x32), dtype=np.int32) * 23 - 170
    toward = np.array([np.inf, 1, -np.inf] * 11, np.float32)[:len(x32)]
    toward[:3] = [0.0, 1.0, 0.0]
    m32, e32 = nv.frexp(nv.tensor(x32))
    m64, e64 = nv.tensor(x64).frexp()
    outs = [m32, e32, m64, e64, nv.ldexp(nv.tensor(x32), nv.tensor(e)),
            nv.ldexp(nv.tensor(x64), nv.tensor([1074, -60, 100, -2100, 1000, -50, 3])),
            nv.nextafter(nv.tensor(x32), nv.tensor(toward)),
            nv.tensor(x64).nextafter(nv.tensor(-x64 - 1.0)),
            nv.nextafter(nv.tensor(x32[:10]).half(), nv.tensor(toward[:10]).half())]
    nv.realize(*outs)
    want_m, want_e = np.frexp(x32)
    np.testing.assert_array_equal(outs[0].numpy(), want_m)
    np.testing.assert_array_equal(np.signbit(outs[0].numpy()), np.signbit(want_m))
    assert outs[1].dtype == nv.int32
    np.testing.assert_array_equal(outs[1].numpy(), want_e)
    np.testing.assert_array_equal(outs[2].numpy(), np.frexp(x64)[0])
    np.testing.assert_array_equal(outs[3].numpy(), np.frexp(x64)[1])
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(outs[4].numpy(), np.ldexp(x32, e))
        np.testing.assert_array_equal(outs[5].numpy(),
                                      np.ldexp(x64, [1074, -60, 100, -2100, 1000, -50, 3]))
    with np.errstate(over="ignore"):
        want = np.nextafter(x32, toward)
        half = x32[:10].astype(np.float16)
        want_half = np.nextafter(half, toward[:10].astype(np.float16))
    np.testing.assert_array_equal(outs[6].numpy(), want)
    np.testing.assert_array_equal(np.signbit(outs[6].numpy()), np.signbit(want))
    np.testing.assert_array_equal(outs[7].numpy(), np.nextafter(x64, -x64 - 1.0))
    np.testing.assert_array_equal(outs[8].numpy(), want_half)
    assert nv.ldexp(nv.tensor([1, 2]), nv.tensor([3, 4])).tolist() == [8.0, 32.0]


def test_sign_helpers_and_logaddexp2():
    a = _f32([1.5, -2, 0, -0.0, np.inf, -np.inf, 3, -7, np.nan])
    b = _f32([-0.0, 0, -1, 2, -np.inf, 5, -np.inf, np.inf, 1])
    ta, tb = nv.tensor(a), nv.tensor(b)
    outs = [nv.copysign(ta, tb), ta.copysign(-1.0), nv.signbit(ta), tb.signbit(),
            nv.signbit(nv.tensor([-3, 0, 2])), nv.logaddexp2(ta, tb), ta.logaddexp2(tb)]
    nv.realize(*outs)
    got = outs[0].numpy()
    np.testing.assert_array_equal(got, np.copysign(a, b))
    np.testing.assert_array_equal(np.signbit(got[:-1]), np.signbit(np.copysign(a, b))[:-1])
    np.testing.assert_array_equal(outs[1].numpy(), np.copysign(a, -1.0))
    np.testing.assert_array_equal(outs[2].numpy()[:-1], np.signbit(a)[:-1])
    np.testing.assert_array_equal(outs[3].numpy(), np.signbit(b))
    np.testing.assert_array_equal(outs[4].numpy(), [True, False, False])
    with np.errstate(invalid="ignore"):
        want = np.logaddexp2(a.astype(np.float64), b.astype(np.float64))
    _close32(outs[5].numpy(), want)
    np.testing.assert_array_equal(outs[6].numpy(), outs[5].numpy())
    assert nv.copysign(nv.tensor([1, 2]), nv.tensor([-1, 1])).tolist() == [-1.0, 2.0]


@pytest.mark.parametrize("engine", ["interp"])    # (compiled: 16 s for the two graphs)
def test_gradients_match_finite_differences(engine):
    def functions(p, x, z, a, b):      # (one graph: every output in one compile)
        return (nv.erfinv(p), special.ndtri(p.abs()), nv.lgamma(x), nv.digamma(x),
                nv.polygamma(2, x), nv.mvlgamma(x.abs() + 1.0, 2), nv.erfc(z), nv.i0(z),
                special.log_ndtr(z * 3.0), nv.frexp(z).mantissa, nv.ldexp(a, b),
                nv.copysign(a, b), nv.logaddexp2(a, b))

    with nv.engine(engine):
        assert gradcheck(functions, [np.array([-0.99, -0.3, 0.5, 0.999]),
                                     np.array([-2.5, 0.3, 1.0, 2.0, 15.0]),
                                     np.array([-7.5, -1.3, 0.2, 0.6, 3.0]),
                                     np.array([1.5, -2.0]), np.array([0.5, -3.0])])


def test_gradients_are_the_analytic_derivatives():
    """erfinv' = sqrt(pi)/2 exp(erfinv^2), lgamma' = digamma, digamma' = polygamma(1), to
    float64 precision (they come from the primitives' rules through the composites)."""
    p = np.array([-0.999999, -0.5, 0.0, 0.3, 0.9999])
    x = np.array([-3.7, -0.3, 0.2, 1.0, 2.0, 5.5, 12.0, 100.0])
    tp, tx = nv.tensor(p, requires_grad=True), nv.tensor(x, requires_grad=True)
    gp, gl = nv.autograd.grad(nv.erfinv(tp).sum() + nv.lgamma(tx).sum(), [tp, tx])
    gd, = nv.autograd.grad(nv.digamma(tx).sum(), [tx])
    nv.realize(gp, gl, gd)
    np.testing.assert_allclose(gp.numpy(), math.sqrt(math.pi) / 2 * np.exp(sp.erfinv(p) ** 2),
                               rtol=1e-12)
    np.testing.assert_allclose(gl.numpy(), sp.digamma(x), rtol=1e-12)
    np.testing.assert_allclose(gd.numpy(), sp.polygamma(1, x), rtol=1e-12)


def test_bad_arguments_raise():
    t = nv.tensor([1.0])
    with pytest.raises(ValueError, match="polygamma: n must be non-negative, got -1"):
        nv.polygamma(-1, t)
    with pytest.raises(TypeError, match="polygamma: n must be an int"):
        nv.polygamma(1.5, t)
    with pytest.raises(ValueError, match="mvlgamma: p has to be greater than or equal to 1"):
        nv.mvlgamma(t, 0)
    with pytest.raises(TypeError, match="frexp: only floating-point dtypes"):
        nv.frexp(nv.tensor([1, 2]))
    with pytest.raises(TypeError, match="nextafter: expected floating point operands"):
        nv.nextafter(nv.tensor([1]), nv.tensor([2]))
    with pytest.raises(TypeError, match="erfc: expected a Tensor"):
        nv.erfc([1.0])


def test_special_namespace_is_torch_special():
    assert special.gammaln is nv.lgamma and special.psi is nv.digamma
    assert special.multigammaln is nv.mvlgamma and special.expit is nv.sigmoid
    for name in ("erf", "erfc", "erfinv", "digamma", "polygamma", "i0", "logit", "xlogy",
                 "log1p", "expm1", "exp2", "sinc", "round", "softmax", "log_softmax",
                 "logsumexp"):
        assert getattr(special, name) is getattr(nv, name), name
    x = nv.tensor([0.0, 0.0, 2.0, 3.0, 0.5])
    y = nv.tensor([np.nan, -1.0, 1.0, -0.5, 2.0])
    outs = [special.xlog1py(x, y), special.entr(nv.tensor([0.0, -1.0, 2.0, np.inf, np.nan]))]
    nv.realize(*outs)
    with np.errstate(all="ignore"):
        _close32(outs[0].numpy(), sp.xlog1py([0.0, 0.0, 2.0, 3.0, 0.5], [np.nan, -1, 1, -0.5, 2]))
        _close32(outs[1].numpy(), sp.entr([0.0, -1.0, 2.0, np.inf, np.nan]))


def test_nan_and_out_of_domain_inputs_have_pytorchs_gradients():
    """A NaN or out-of-domain input gives a NaN gradient where PyTorch's formula does
    (a select that kept the NaN passed 1, or a constant branch 0, into the input), and
    PyTorch's values at the edges: entr's +inf slope at 0, angle's 0 everywhere."""
    nan = float("nan")
    cases = [(nv.erfinv, [nan, 2.0, -3.0, 0.5], [nan, nan, nan, 1.1125848189719496]),
             (special.ndtri, [nan, 2.0, -1.0, 0.3], [nan, nan, nan, 2.876103659264292]),
             (lambda x: nv.polygamma(1, x), [nan, 2.0], [nan, -0.4041138063191886]),
             (lambda x: nv.polygamma(3, x), [nan], [nan]),
             (special.entr, [nan, -1.0, 0.0, 2.0], [nan, nan, math.inf, -1.6931471805599454]),
             (nv.angle, [nan, -1.0, 2.0], [0.0, 0.0, 0.0])]
    for fn, xs, want in cases:
        x = nv.tensor(xs, dtype=nv.float64, requires_grad=True)
        (g,) = nv.autograd.grad(fn(x).sum(), x)
        np.testing.assert_allclose(g.numpy(), want, rtol=1e-13, equal_nan=True,
                                   err_msg=str(fn))


@pytest.mark.parametrize("dtype", [nv.float64, nv.float32])
def test_gradients_at_plus_infinity_are_pytorchs_infinities(dtype):
    """At +inf, lgamma's slope is digamma(inf) = +inf and entr's -(log x + 1) = -inf, as
    PyTorch's; both were NaN (Stirling's formula is inf / inf there, and entr's -x log x
    0 * inf), and so was mvlgamma's (a sum of lgammas). The values are unchanged."""
    inf = math.inf
    cases = [(nv.lgamma, [inf, 2.5, 0.0], [inf, 0.2846828704729192, inf],
              [inf, 0.7031566406452431, -inf]),
             (lambda v: nv.mvlgamma(v, 2), [inf, 3.0], [inf, 1.5501949939575645],
              [inf, 1.6259409757437102]),
             (special.entr, [inf, 2.0, 0.0], [-inf, -1.3862943611198906, 0.0],
              [-inf, -1.6931471805599454, inf])]
    for fn, xs, values, slopes in cases:
        x = nv.tensor(xs, dtype=dtype, requires_grad=True)
        y = fn(x)
        (g,) = nv.autograd.grad(y.sum(), x)
        tol = 1e-13 if dtype == nv.float64 else 1e-6
        np.testing.assert_allclose(y.detach().numpy(), values, rtol=tol, err_msg=str(fn))
        np.testing.assert_allclose(g.numpy(), slopes, rtol=tol, err_msg=str(fn))
