"""``nv.normal`` (its four forms, PyTorch's zero gradients for tensor mean and std,
errors), ``nv.randint_like`` (both forms, dtypes and bounds), ``nv.poisson`` and
``nv.binomial`` (distributions by chi-square tests, PyTorch's gradient rules, checks of
the parameters), ``nv._standard_gamma`` and ``nv._sample_dirichlet`` (KS tests,
gradients), and the incomplete gamma functions behind them (``gammainc`` and
``gammaincc`` against scipy, far tails and large arguments included, and their
gradients by finite differences), from ``nova.tensor.sampling_ops``.

These run on the interpreter (a module ``engine`` fixture: the samplers are graphs of
a few hundred ops whose compiles would dominate), but for one test of the compiled
``cpu`` engine."""
import math

import numpy as np
import pytest
from scipy import special, stats

import nova as nv
from nova.tensor import sampling_ops as so


@pytest.fixture(autouse=True)
def engine():
    with nv.engine("interp"):
        yield "interp"


def f64(a):
    return nv.tensor(np.asarray(a, dtype=np.float64), dtype=nv.float64)


def chi2_pvalue(x, ref):
    """Pearson's test of integer draws ``x`` against the frozen scipy distribution
    ``ref``: a bin per value with an expected count of at least 5, the rest pooled."""
    lo, hi = int(ref.ppf(1e-6)), int(ref.isf(1e-6)) + 1
    values = np.arange(lo, hi + 1)
    expected = ref.pmf(values) * len(x)
    observed = np.array([(x == v).sum() for v in values], dtype=float)
    keep = expected >= 5
    e = np.append(expected[keep], len(x) - expected[keep].sum())
    o = np.append(observed[keep], len(x) - observed[keep].sum())
    return stats.chisquare(o, e * o.sum() / e.sum()).pvalue


# ---------------------------------------------------------------- normal


def test_normal_numbers_and_tensors():
    nv.manual_seed(0)
    a = so.normal(2.0, 3.0, (4000,))
    b = so.normal(0.0, 1.0, size=(2, 3), dtype=nv.float64)
    c = so.normal(f64([[0.0], [100.0]]), f64([1.0, 2.0, 0.5]))
    d = so.normal(f64([5.0, -5.0]))
    e = so.normal(1, f64([0.0, 0.0]))
    nv.realize(a, b, c, d, e)
    assert a.dtype == nv.float32 and a.shape == (4000,)
    assert stats.kstest(a.numpy(), stats.norm(2, 3).cdf).pvalue > 1e-3
    assert b.dtype == nv.float64 and b.shape == (2, 3)
    assert c.shape == (2, 3) and c.dtype == nv.float64
    assert (np.abs(c.numpy() - [[0.0], [100.0]]) < 6 * np.array([1.0, 2.0, 0.5])).all()
    assert d.shape == (2,) and d.dtype == nv.float64
    np.testing.assert_array_equal(e.numpy(), [1.0, 1.0])          # std 0: the mean
    assert so.normal(0.0, 1.0, (2,), requires_grad=True).requires_grad


def test_normal_gradients_are_zero_as_in_pytorch():
    """The result requires grad when mean or std does, and both gradients are zero
    (PyTorch's ``normal`` is not reparameterized), broadcast dims included."""
    mean = f64([[0.0], [1.0]]).requires_grad_()
    std = f64([1.0, 2.0, 3.0]).requires_grad_()
    y = so.normal(mean, std)
    assert y.requires_grad
    gm, gs = nv.autograd.grad((y * y).sum(), [mean, std])
    np.testing.assert_array_equal(gm.numpy(), np.zeros((2, 1)))
    np.testing.assert_array_equal(gs.numpy(), np.zeros(3))
    assert not so.normal(f64([0.0]), 1.0).requires_grad


def test_normal_takes_out_through_the_wrapper():
    """``nv.normal(mean_tensor, std, out=t)``: the ``out=`` wrapper passes ``out``'s
    dtype and device, which the tensor form accepts when they are its own."""
    from nova.tensor import out_arg
    wrapped = out_arg.with_out(so.normal, "normal")
    out = nv.zeros(3, dtype=nv.float64)
    result = wrapped(f64([0.0, 10.0, 20.0]), 0.0, out=out)
    assert result is out
    np.testing.assert_array_equal(out.numpy(), [0.0, 10.0, 20.0])
    numbers = nv.zeros(4, dtype=nv.float64)
    wrapped(1.0, 0.0, (4,), out=numbers)
    np.testing.assert_array_equal(numbers.numpy(), [1.0] * 4)


def test_normal_errors():
    with pytest.raises(TypeError, match="give the size"):
        so.normal(0.0, 1.0)
    with pytest.raises(TypeError, match="size cannot be given with a tensor"):
        so.normal(f64([0.0]), 1.0, size=(2,))
    with pytest.raises(TypeError, match="dtype cannot be given"):
        so.normal(f64([0.0]), 1.0, dtype=nv.float32)
    with pytest.raises(RuntimeError, match="std >= 0.0"):
        so.normal(0.0, -1.0, (2,))
    with pytest.raises(RuntimeError, match="std >= 0.0"):
        so.normal(0.0, math.nan, (2,))
    with pytest.raises(RuntimeError, match="all elements of std >= 0.0"):
        so.normal(f64([0.0, 0.0]), f64([1.0, -1.0]))
    with pytest.raises(TypeError, match="floating point"):
        so.normal(nv.tensor([1, 2]), 1.0)
    with pytest.raises(TypeError, match="number or a Tensor"):
        so.normal("0", 1.0, (2,))


# ---------------------------------------------------------------- randint_like


def test_randint_like_forms_dtypes_and_bounds():
    nv.manual_seed(1)
    x = nv.zeros(2000, dtype=nv.float64)
    a = so.randint_like(x, 5)
    b = so.randint_like(x, 3, 7)
    c = so.randint_like(nv.zeros(2000, dtype=nv.int32), low=-4, high=-1)
    d = so.randint_like(x, 10, dtype=nv.int64)
    e = so.randint_like(nv.zeros(50, dtype=nv.bool), 2)
    f = so.randint_like(x, nv.tensor(3))
    nv.realize(a, b, c, d, e, f)
    assert a.dtype == nv.float64 and set(np.unique(a.numpy())) == {0, 1, 2, 3, 4}
    assert set(np.unique(b.numpy())) == {3, 4, 5, 6}
    assert c.dtype == nv.int32 and set(np.unique(c.numpy())) == {-4, -3, -2}
    assert d.dtype == nv.int64 and d.numpy().min() >= 0 and d.numpy().max() <= 9
    assert e.dtype == nv.bool and set(np.unique(e.numpy())) == {False, True}
    assert set(np.unique(f.numpy())) == {0, 1, 2}
    counts = np.bincount(a.numpy().astype(int), minlength=5)
    assert stats.chisquare(counts).pvalue > 1e-3
    assert so.randint_like(x, 4, requires_grad=True).requires_grad
    with pytest.raises(RuntimeError, match="'low' to be less than 'high'"):
        so.randint_like(x, 5, 2)
    with pytest.raises(RuntimeError, match="does not fit uint8"):
        so.randint_like(nv.zeros(2, dtype=nv.uint8), 300)
    with pytest.raises(TypeError, match="high must be an int"):
        so.randint_like(x, 2.5)
    with pytest.raises(RuntimeError, match="only floating point"):
        so.randint_like(nv.zeros(2, dtype=nv.int64), 3, requires_grad=True)


# ---------------------------------------------------------------- poisson, binomial


def test_poisson_distribution_dtype_and_gradient():
    """Rates on both sides of the switch at 10 (2500 draws each, chi-square); rate 0
    draws 0 and an infinite rate inf; the gradient is zero, as PyTorch's."""
    n = 2500
    nv.manual_seed(2)
    rates = np.array([0.0, 0.8, 6.0, 10.0, 45.0, math.inf])
    x = so.poisson(f64(np.broadcast_to(rates, (n, 6)).copy())).numpy()
    assert (x[:, 0] == 0).all() and np.isposinf(x[:, 5]).all()
    for j in (1, 2, 3, 4):
        assert chi2_pvalue(x[:, j], stats.poisson(rates[j])) > 1e-3, rates[j]
    r = nv.tensor([1.0, 20.0], requires_grad=True)
    y = so.poisson(r)
    assert y.dtype == nv.float32 and y.requires_grad
    (g,) = nv.autograd.grad(y.sum(), [r])
    np.testing.assert_array_equal(g.numpy(), [0.0, 0.0])
    with pytest.raises(ValueError, match="rate to be non-negative"):
        so.poisson(f64([1.0, -1.0]))
    with pytest.raises(ValueError, match="rate to be non-negative"):
        so.poisson(f64([math.nan]))
    with pytest.raises(TypeError, match="floating point"):
        so.poisson(nv.tensor([1, 2]))


def test_binomial_distribution_broadcast_and_errors():
    """Counts and probabilities broadcast; means below and above 10 and p above 1/2
    (2500 draws each, chi-square); not differentiable (backward raises, as
    PyTorch's); invalid parameters raise."""
    n = 2500
    nv.manual_seed(3)
    counts = f64(np.array([[6.0, 50.0, 50.0, 400.0]]))
    probs = f64(np.full((n, 1), 0.35))
    x = so.binomial(counts.expand(n, 4), probs.expand(n, 4)).numpy()
    for j, c in enumerate([6, 50, 50, 400]):
        assert chi2_pvalue(x[:, j], stats.binom(c, 0.35)) > 1e-3, c
    hi = so.binomial(f64(np.full(n, 40.0)), f64(np.full(n, 0.9))).numpy()
    assert chi2_pvalue(hi, stats.binom(40, 0.9)) > 1e-3
    c = f64([10.0]).requires_grad_()
    y = so.binomial(c, f64([0.5]))
    assert y.requires_grad
    with pytest.raises(RuntimeError, match="derivative of binomial is not implemented"):
        nv.autograd.grad(y.sum(), [c])
    with pytest.raises(ValueError, match="prob in \\[0, 1\\]"):
        so.binomial(f64([5.0]), f64([1.5]))
    with pytest.raises(ValueError, match="count >= 0"):
        so.binomial(f64([-5.0]), f64([0.5]))
    with pytest.raises(TypeError, match="one dtype"):
        so.binomial(f64([5.0]), nv.tensor([0.5]))


# ---------------------------------------------------------------- gamma, dirichlet


def test_standard_gamma_and_dirichlet():
    n = 3000
    nv.manual_seed(4)
    alpha = np.array([0.3, 1.0, 8.0])
    g = so._standard_gamma(f64(np.broadcast_to(alpha, (n, 3)).copy()))
    d = so._sample_dirichlet(f64(np.broadcast_to(alpha, (n, 3)).copy()))
    nv.realize(g, d)
    for j in range(3):
        assert stats.kstest(g.numpy()[:, j], stats.gamma(alpha[j]).cdf).pvalue > 1e-3, j
        ref = stats.beta(alpha[j], alpha.sum() - alpha[j])
        assert stats.kstest(d.numpy()[:, j], ref.cdf).pvalue > 1e-3, j
    np.testing.assert_allclose(d.numpy().sum(-1), 1.0, rtol=1e-14)
    # the gradient: the derivative of the inverse cdf at the draw
    a = f64([0.3, 1.0, 8.0]).requires_grad_()
    x = so._standard_gamma(a)
    (ga,) = nv.autograd.grad(x.sum(), [a])
    u = special.gammainc(alpha, x.numpy())
    h = 1e-6 * alpha
    want = (special.gammaincinv(alpha + h, u) - special.gammaincinv(alpha - h, u)) / (2 * h)
    np.testing.assert_allclose(ga.numpy(), want, rtol=1e-7)
    assert so._standard_gamma(nv.tensor([2.0])).dtype == nv.float32
    with pytest.raises(ValueError, match="at least one dim"):
        so._sample_dirichlet(f64(1.0))


# ---------------------------------------------------------------- incomplete gamma


def test_incomplete_gamma_against_scipy():
    """P and Q where they are small (each computed on its own side), for arguments
    from 1e-3 to 2e4, and the edge values: 0 and 1 at x = 0 and inf, NaN outside the
    domain."""
    a = np.array([1e-3, 0.5, 1.0, 3.0, 30.0, 500.0, 500.0, 2e4, 2e4])
    x = np.array([1e-5, 12.0, 1e-9, 40.0, 22.0, 420.0, 600.0, 19800.0, 20300.0])
    p, q = so.gammainc(f64(a), f64(x)), so.gammaincc(f64(a), f64(x))
    nv.realize(p, q)
    np.testing.assert_allclose(p.numpy(), special.gammainc(a, x), rtol=2e-11)
    np.testing.assert_allclose(q.numpy(), special.gammaincc(a, x), rtol=2e-10)
    edges = so.gammainc(f64([2.0, 2.0, -1.0, 2.0, math.nan]), f64([0.0, math.inf, 1.0, -1.0, 1.0]))
    np.testing.assert_array_equal(edges.numpy(), [0.0, 1.0, math.nan, math.nan, math.nan])
    np.testing.assert_array_equal(so.gammaincc(f64([2.0, 2.0]), f64([0.0, math.inf])).numpy(),
                                  [1.0, 0.0])
    assert so.gammainc(nv.tensor([2.0]), 1.5).dtype == nv.float32


def test_incomplete_gamma_at_small_and_zero_shape():
    """Q for a down to 1e-30 (about a E1(x)) to full relative precision -- ``1 - P``
    cancelled there, to a negative Q below a ~ 1e-15 -- P never past 1, and the limit
    at a = 0 (P = 1, Q = 0 for x > 0), as SciPy and PyTorch; a = x = 0 stays NaN."""
    a = np.array([1e-30, 1e-16, 1e-12, 1e-8, 1e-4, 0.01, 0.049, 0.051, 0.3])
    x = np.array([1.0, 1.0, 1.0, 1.9, 0.1, 1.0, 1.2, 1.2, 1.9])
    p, q = so.gammainc(f64(a), f64(x)), so.gammaincc(f64(a), f64(x))
    nv.realize(p, q)
    np.testing.assert_allclose(q.numpy(), special.gammaincc(a, x), rtol=1e-13)
    np.testing.assert_allclose(p.numpy(), 1.0 - special.gammaincc(a, x), rtol=2e-15)  # (SciPy's P
    # itself is a few units past 1 at a = 1e-30)
    assert (p.numpy() <= 1.0).all()
    for dtype in (nv.float64, nv.float32):
        zero = nv.tensor([0.0, 0.0, 0.0], dtype=dtype)
        at = nv.tensor([0.5, 2.0, 0.0], dtype=dtype)
        np.testing.assert_array_equal(so.gammainc(zero, at).numpy(), [1.0, 1.0, math.nan])
        np.testing.assert_array_equal(so.gammaincc(zero, at).numpy(), [0.0, 0.0, math.nan])


def test_incomplete_gamma_gradient_in_x_at_the_edges():
    """d/dx where x is NaN or negative (the value NaN) is NaN, as PyTorch's (it was 0:
    the NaN vanished in the backward); at x = 0 it is the density x^(a-1) / Gamma(a)
    there -- +inf below a = 1, 1 at a = 1, 0 above (it was 0 throughout)."""
    a = f64([2.0, 2.0, 0.5, 1.0, 2.0, 3.0])
    for fn, sign in ((so.gammainc, 1.0), (so.gammaincc, -1.0)):
        x = f64([math.nan, -1.0, 0.0, 0.0, 0.0, 1.5]).requires_grad_()
        (gx,) = nv.autograd.grad(fn(a, x).sum(), [x])
        want = sign * np.array([math.nan, math.nan, math.inf, 1.0, 0.0,
                                stats.gamma(3.0).pdf(1.5)])
        np.testing.assert_allclose(gx.numpy(), want, rtol=1e-12, equal_nan=True)


def test_incomplete_gamma_gradients():
    a = np.array([0.4, 2.5, 60.0])
    x = np.array([0.3, 6.0, 55.0])
    at, xt = f64(a).requires_grad_(), f64(x).requires_grad_()
    ga, gx = nv.autograd.grad(so.gammaincc(at, xt).sum(), [at, xt])
    h = 1e-6 * a
    np.testing.assert_allclose(
        ga.numpy(), (special.gammaincc(a + h, x) - special.gammaincc(a - h, x)) / (2 * h),
        rtol=1e-6)
    np.testing.assert_allclose(gx.numpy(), -stats.gamma(a).pdf(x), rtol=1e-12)


def test_series_terms_cover_large_concentrations():
    """The series' length grows with the square root of the largest concentration
    (what keeps a Gamma(1e4) gradient exact) and refuses a non-finite one."""
    assert so.series_terms(0.5) == 64 and so.series_terms(1e4) == 1248
    assert so.series_terms(1e4) % 32 == 0
    with pytest.raises(ValueError, match="finite"):
        so.series_terms(math.inf)


@pytest.mark.slow
@pytest.mark.parametrize("engine_name", ["cpu"])
def test_compiled_engine(engine_name):
    """The samplers and the gradient compile on the cpu engine (a small draw)."""
    with nv.engine(engine_name):
        nv.manual_seed(5)
        a = f64([0.5, 4.0]).requires_grad_()
        x = so._standard_gamma(a)
        (g,) = nv.autograd.grad(x.sum(), [a])
        p = so.poisson(f64([3.0, 30.0]))
        b = so.binomial(f64([5.0, 100.0]), f64([0.3, 0.6]))
        nv.realize(g, p, b)
        assert (x.numpy() > 0).all() and np.isfinite(g.numpy()).all() and (g.numpy() > 0).all()
        assert (p.numpy() >= 0).all() and (b.numpy() <= [5.0, 100.0]).all()
