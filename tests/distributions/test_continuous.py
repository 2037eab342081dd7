"""The continuous distributions against scipy.stats in float64 (log_prob, cdf, icdf,
entropy, mean, mode, variance, stddev; far tails where the closed forms are chosen to
keep every digit; special values), float32 against the float64 reference, sampling
statistics (Kolmogorov-Smirnov and moments of large draws; reproducibility under
``nv.manual_seed``), shapes of samples and scores, ``expand``, and gradients of
``rsample``/``log_prob``/``cdf``/``entropy`` by finite differences."""
import math

import numpy as np
import pytest
import scipy.stats as st

import nova as nv
import nova.distributions as D
from nova.autograd.gradcheck import gradcheck

LOC = np.array([0.3, -1.2])
SCALE = np.array([0.7, 2.5])
X = np.array([[0.1, -3.0], [1.5, 0.2]])
# probabilities for icdf; the last row is far in the lower tail
P = np.array([[0.05, 0.3], [0.9, 0.999], [1e-100, 1e-12]])
# A third row of points per distribution, far in the lower tail, where the one-line
# forms (``1 + erf``, ``0.5 - 0.5 expm1``, ``atan / pi + 0.5``, ``1 - exp``) lose every
# digit and the forms used here keep them.
TAIL = {"Normal": [-8.0, -25.0], "Laplace": [-8.0, -25.0], "Cauchy": [-1e12, -3e5],
        "Gumbel": [-2.5, -9.0], "LogNormal": [1e-8, 1e-5], "Exponential": [1e-20, 1e-9],
        "Uniform": [0.31, -1.19]}


def f64(a):
    return nv.tensor(np.asarray(a, dtype=np.float64), dtype=nv.float64)


def _cases(loc, scale, cast=f64):
    """name -> (distribution, scipy reference, points to score: two rows, then TAIL)."""
    lo, sc = cast(loc), cast(scale)
    cases = {
        "Normal": (D.Normal(lo, sc), st.norm(loc, scale), X),
        "Laplace": (D.Laplace(lo, sc), st.laplace(loc, scale), X),
        "Cauchy": (D.Cauchy(lo, sc), st.cauchy(loc, scale), X),
        "Gumbel": (D.Gumbel(lo, sc), st.gumbel_r(loc, scale), X),
        "LogNormal": (D.LogNormal(lo, sc), st.lognorm(scale, scale=np.exp(loc)), np.abs(X) + 0.1),
        "Exponential": (D.Exponential(sc), st.expon(scale=1 / scale), np.abs(X)),
        "Uniform": (D.Uniform(lo, cast(loc + scale)), st.uniform(loc, scale),
                    loc + scale * np.array([[0.1, 0.5], [0.9, 0.3]])),
    }
    return {name: (d, ref, np.concatenate([x, [TAIL[name]]]))
            for name, (d, ref, x) in cases.items()}


MODES = {"Normal": LOC, "Laplace": LOC, "Cauchy": LOC, "Gumbel": LOC,
         "LogNormal": np.exp(LOC - SCALE ** 2), "Exponential": np.zeros(2),
         "Uniform": np.full(2, np.nan)}


def test_values_against_scipy_in_float64_and_float32():
    """Every quantity of every distribution in float64, to a few ulp of scipy's, the far
    lower tails included (and nonzero); float32 Normal and Laplace (float64 inside,
    rounded once; branches) to a few float32 ulp. One realization."""
    cases = _cases(LOC, SCALE)
    singles = {name: case for name, case in
               _cases(LOC, SCALE, cast=lambda a: nv.tensor(np.asarray(a, np.float32))).items()
               if name in ("Normal", "Laplace")}
    outs = {}
    for name, (d, _, x) in cases.items():
        outs[name] = [d.log_prob(f64(x)), d.cdf(f64(x)), d.icdf(f64(P)), d.entropy(), d.mean,
                      d.mode, d.variance, d.stddev]
    for name, (d, _, x) in singles.items():
        xs = nv.tensor(x[:2].astype(np.float32))
        outs[name + "32"] = [d.log_prob(xs), d.cdf(xs), d.icdf(nv.tensor(P[:2].astype(np.float32)))]
    nv.realize(*[o for v in outs.values() for o in v])

    for name, (d, ref, x) in cases.items():
        lp, cdf, icdf, ent, mean, mode, var, sd = [o.numpy() for o in outs[name]]
        assert lp.shape == cdf.shape == (3, 2) and ent.shape == mean.shape == (2,), name
        assert lp.dtype == np.float64, name
        np.testing.assert_allclose(lp, ref.logpdf(x), rtol=1e-14, atol=1e-15, err_msg=name)
        # (rtol: the tail cdf at z = -27 has condition number z^2 ~ 700)
        np.testing.assert_allclose(cdf, ref.cdf(x), rtol=3e-13, err_msg=name)
        assert (cdf[2] > 0).all(), name
        np.testing.assert_allclose(icdf, ref.ppf(P), rtol=1e-13, atol=1e-300, err_msg=name)
        np.testing.assert_allclose(ent, ref.entropy(), rtol=1e-14, err_msg=name)
        np.testing.assert_allclose(mode, MODES[name], rtol=1e-14, err_msg=name)
        if name == "Cauchy":   # no moments
            assert np.isnan(mean).all() and np.isposinf(var).all() and np.isposinf(sd).all()
            continue
        np.testing.assert_allclose(mean, ref.mean(), rtol=1e-14, err_msg=name)
        np.testing.assert_allclose(var, ref.var(), rtol=1e-14, err_msg=name)
        np.testing.assert_allclose(sd, ref.std(), rtol=1e-14, err_msg=name)
    for name, (d, ref, x) in singles.items():
        lp, cdf, icdf = [o.numpy() for o in outs[name + "32"]]
        assert lp.dtype == cdf.dtype == icdf.dtype == np.float32, name
        xr = x[:2].astype(np.float32).astype(np.float64)
        # a few float32 ulp of the float64 value at the float32 inputs
        np.testing.assert_allclose(lp, ref.logpdf(xr), rtol=2e-6, atol=1e-6, err_msg=name)
        np.testing.assert_allclose(cdf, ref.cdf(xr), rtol=2e-6, err_msg=name)
        np.testing.assert_allclose(icdf, ref.ppf(P[:2].astype(np.float32).astype(np.float64)),
                                   rtol=4e-6, atol=1e-6, err_msg=name)


def test_special_values():
    """Infinite and out-of-support points, 0 and 1 as probabilities, empty batches."""
    inf = math.inf
    n = D.Normal(f64([0.0]), f64([1.0]))
    u = D.Uniform(f64([0.0]), f64([2.0]), validate_args=False)   # scores outside the support
    e = D.Exponential(f64([2.0]))
    lap = D.Laplace(f64([0.0]), f64([1.0]))
    c = D.Cauchy(f64([0.0]), f64([1.0]))
    empty = D.Normal(f64(np.zeros((0, 3))), f64(np.ones((0, 3))))
    pts = f64([-inf, 0.0, inf])
    ends = f64([0.0, 0.5, 1.0])
    outs = [n.log_prob(pts), n.cdf(pts), n.icdf(ends),
            u.log_prob(f64([-0.5, 0.0, 2.0])), u.cdf(f64([-1.0, 1.0, 3.0])),
            e.cdf(f64([0.0, inf, 1.0])), e.icdf(ends), lap.cdf(pts), lap.icdf(ends),
            c.cdf(pts), c.icdf(ends), empty.log_prob(f64(np.zeros((0, 3)))), empty.entropy()]
    nv.realize(*outs)
    got = [o.numpy() for o in outs]
    np.testing.assert_array_equal(got[0], [-inf, -0.5 * math.log(2 * math.pi), -inf])
    np.testing.assert_array_equal(got[1], [0.0, 0.5, 1.0])
    np.testing.assert_array_equal(got[2], [-inf, 0.0, inf])
    np.testing.assert_array_equal(got[3], [-inf, -math.log(2), -inf])   # [low, high)
    np.testing.assert_array_equal(got[4], [0.0, 0.5, 1.0])
    np.testing.assert_allclose(got[5], [0.0, 1.0, 1 - math.exp(-2)], rtol=1e-15)
    np.testing.assert_array_equal(got[6][:1], [0.0])
    assert got[6][2] == inf
    np.testing.assert_array_equal(got[7], [0.0, 0.5, 1.0])
    np.testing.assert_array_equal(got[8], [-inf, 0.0, inf])
    np.testing.assert_array_equal(got[9], [0.0, 0.5, 1.0])
    assert got[10][0] < -1e15 and got[10][1] == 0.0 and got[10][2] > 1e15
    assert got[11].shape == (0, 3) and got[12].shape == (0, 3)


def test_sampling_statistics_and_reproducibility():
    """20000 draws per batch element: a Kolmogorov-Smirnov test against the scipy
    distribution and the mean within 5 standard errors; ``sample`` and ``rsample``
    agree in distribution, and ``nv.manual_seed`` replays the same numbers."""
    n = 20000
    cases = _cases(LOC, SCALE)
    nv.manual_seed(1234)
    samples = {name: d.rsample((n,)) if name in ("Normal", "Laplace") else d.sample((n,))
               for name, (d, _, _) in cases.items()}
    normal = cases["Normal"][0]
    nv.manual_seed(5)
    first = normal.sample((3,))
    nv.manual_seed(5)
    again = normal.sample((3,))
    later = normal.sample((3,))
    nv.realize(*samples.values(), first, again, later)
    for j in range(2):
        for name, (_, ref, _) in _cases(LOC[j], SCALE[j]).items():
            s = samples[name].numpy()
            assert s.shape == (n, 2) and s.dtype == np.float64, name
            assert st.kstest(s[:, j], ref.cdf).pvalue > 1e-4, (name, j)
            if name != "Cauchy":
                se = ref.std() / math.sqrt(n)
                assert abs(s[:, j].mean() - ref.mean()) < 5 * se, (name, j)
    np.testing.assert_array_equal(first.numpy(), again.numpy())
    assert not np.array_equal(first.numpy(), later.numpy())


def test_shapes_batch_event_and_expand():
    """``sample_shape + batch_shape + event_shape`` everywhere (recorded only: shapes are
    known without running anything), scores broadcast, ``expand`` and ``Independent``."""
    loc = f64(np.zeros((3, 1)))
    scale = f64(np.ones((1, 2)))
    for d in (D.Normal(loc, scale), D.Laplace(loc, scale), D.Cauchy(loc, scale),
              D.Gumbel(loc, scale), D.LogNormal(loc, scale), D.Uniform(loc, loc + scale),
              D.Exponential(scale.expand(3, 2))):
        assert d.batch_shape == (3, 2) and d.event_shape == ()
        assert d.sample().shape == (3, 2)
        assert d.sample((4, 5)).shape == (4, 5, 3, 2)
        assert d.sample([]).shape == (3, 2)
        assert d.log_prob(f64(np.full((4, 1, 2), 0.5))).shape == (4, 3, 2)
        big = d.expand((6, 3, 2))
        assert type(big) is type(d) and big.batch_shape == (6, 3, 2)
        assert big.sample((2,)).shape == (2, 6, 3, 2)
        assert big.entropy().shape == (6, 3, 2)
    scalar = D.Normal(0.0, 1.0)
    assert scalar.batch_shape == () and scalar.sample().shape == ()
    assert not scalar.sample((2,)).node.realized     # recorded: nothing ran
    assert scalar.sample((7,)).dtype == nv.float32
    assert D.Normal(f64(0.0), 1.0).sample((2,)).dtype == nv.float64
    ind = D.Independent(D.Normal(loc.expand(3, 2), scale), 1)
    assert (ind.batch_shape, ind.event_shape) == ((3,), (2,))
    assert ind.sample((4,)).shape == (4, 3, 2)
    assert ind.log_prob(f64(np.zeros((4, 3, 2)))).shape == (4, 3)
    assert ind.entropy().shape == (3,) and ind.mean.shape == (3, 2)
    assert ind.expand((5, 3)).batch_shape == (5, 3)
    assert ind.has_rsample and not ind.has_enumerate_support
    with pytest.raises(TypeError, match="sample_shape must be a sequence of ints"):
        scalar.sample(5)
    with pytest.raises(ValueError, match="reinterpreted_batch_ndims <= len"):
        D.Independent(scalar, 1)
    with pytest.raises(ValueError, match=r"not broadcastable.*\(3,\) vs \(3, 2\)"):
        ind.log_prob(f64(np.zeros(3)))
    with pytest.raises(ValueError, match="not broadcastable"):
        D.Normal(loc, scale).log_prob(f64(np.zeros((4, 2))))


def test_independent_transformed_and_transforms():
    """``Independent`` sums scores over the reinterpreted dims; ``TransformedDistribution``
    with an affine map of a normal is that normal; transforms invert each other."""
    base = D.Normal(f64(LOC), f64(SCALE))
    ind = D.Independent(base, 1)
    aff = D.TransformedDistribution(D.Normal(f64(0.0), f64(1.0)).expand((2,)),
                                    [D.AffineTransform(f64(LOC), f64(SCALE))])
    sig = D.SigmoidTransform()
    exp = D.ExpTransform()
    flip = D.AffineTransform(0.0, -2.0)
    x = f64(X)
    outs = [ind.log_prob(x), ind.entropy(), aff.log_prob(x), aff.cdf(x), aff.icdf(f64(P)),
            sig.inv(sig(x)), sig.log_abs_det_jacobian(x, sig(x)), exp.inv(exp(x)),
            D.TransformedDistribution(base, flip).cdf(x)]
    nv.realize(*outs)
    ref = st.norm(LOC, SCALE)
    np.testing.assert_allclose(outs[0].numpy(), ref.logpdf(X).sum(-1), rtol=1e-14)
    np.testing.assert_allclose(outs[1].numpy(), ref.entropy().sum(), rtol=1e-14)
    np.testing.assert_allclose(outs[2].numpy(), ref.logpdf(X), rtol=1e-14)
    np.testing.assert_allclose(outs[3].numpy(), ref.cdf(X), rtol=1e-14)
    np.testing.assert_allclose(outs[4].numpy(), ref.ppf(P), rtol=1e-13)
    np.testing.assert_allclose(outs[5].numpy(), X, rtol=1e-14)
    s = 1 / (1 + np.exp(-X))
    np.testing.assert_allclose(outs[6].numpy(), np.log(s * (1 - s)), rtol=1e-14)
    np.testing.assert_allclose(outs[7].numpy(), X, rtol=1e-15)
    # y = -2 x decreases: cdf_Y(y) = 1 - cdf_X(-y / 2)
    np.testing.assert_allclose(outs[8].numpy(), 1 - ref.cdf(-X / 2), rtol=1e-13)
    assert aff.batch_shape == (2,) and aff.event_shape == () and aff.has_rsample
    assert exp.inv.inv is exp and exp.inv == D.ExpTransform().inv and flip.sign == -1
    cached = D.ExpTransform(cache_size=1)
    y = cached(x)
    assert cached.inv(y) is x
    assert isinstance(D.LogNormal(0.0, 1.0), D.TransformedDistribution)
    assert isinstance(D.Gumbel(0.0, 1.0), D.TransformedDistribution)
    with pytest.raises(ValueError, match="cache_size must be 0 or 1"):
        D.ExpTransform(cache_size=2)
    with pytest.raises(ValueError, match="transforms must be a Transform or list"):
        D.TransformedDistribution(base, "exp")


def test_gradients_by_finite_differences():
    """``rsample`` (under a fixed seed, so each evaluation draws the same noise; the
    Gumbel's through its chain of transforms), ``log_prob``, ``cdf`` and ``entropy``
    differentiate with respect to the parameters; ``sample`` carries no gradient."""
    x = f64([0.4, 0.9])

    def fn(loc, scale):
        nv.manual_seed(11)
        n = D.Normal(loc, scale)
        return (n.rsample((2,)), n.log_prob(x), n.entropy(), D.Gumbel(loc, scale).rsample((2,)),
                D.Laplace(loc, scale).cdf(x), D.Cauchy(loc, scale).log_prob(x),
                D.Exponential(scale).rsample())

    assert gradcheck(fn, [LOC, SCALE])
    loc = f64(LOC).requires_grad_()
    assert D.Normal(loc, 1.0).rsample().requires_grad
    assert not D.Normal(loc, 1.0).sample().requires_grad
