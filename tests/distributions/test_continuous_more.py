"""StudentT, HalfNormal, HalfCauchy, Pareto and Weibull against scipy.stats in float64
(log_prob, cdf/icdf where PyTorch has them, entropy, mean, mode, variance), their
PyTorch constructions (the last four are TransformedDistributions), shapes, ``expand``
and validation, sampling by KS tests of a few thousand draws under fixed seeds, and
``rsample`` gradients (StudentT's in ``df`` through the chi-squared draw, checked in
expectation; the others by finite differences under a fixed seed).

The interpreter realizes these small graphs."""
import math

import numpy as np
import pytest
from scipy import stats

import nova as nv
import nova.distributions as D
from nova.autograd.gradcheck import gradcheck


@pytest.fixture(autouse=True)
def interpreted():
    with nv.engine("interp"):
        yield


def f64(a):
    return nv.tensor(np.asarray(a, dtype=np.float64), dtype=nv.float64)


SCALE = np.array([0.5, 2.0, 7.0])
SHAPE = np.array([0.7, 1.5, 3.0])
POS = np.array([[0.3, 1.0, 9.0], [8.0, 2.5, 0.01]])
REAL = np.array([[0.3, -1.0, 9.0], [-8.0, 2.5, 0.0]])


def _cases():
    """name -> (distribution, scipy reference, points to score)."""
    return {
        "StudentT": (D.StudentT(f64(SHAPE), f64([0.0, 1.0, -2.0]), f64(SCALE)),
                     stats.t(SHAPE, [0.0, 1.0, -2.0], SCALE), REAL),
        "HalfNormal": (D.HalfNormal(f64(SCALE)), stats.halfnorm(scale=SCALE), POS),
        "HalfCauchy": (D.HalfCauchy(f64(SCALE)), stats.halfcauchy(scale=SCALE), POS),
        "Pareto": (D.Pareto(f64(SCALE), f64(SHAPE)), stats.pareto(SHAPE, scale=SCALE),
                   SCALE * np.array([[1.5], [30.0]])),
        "Weibull": (D.Weibull(f64(SCALE), f64(SHAPE)), stats.weibull_min(SHAPE, scale=SCALE),
                    POS),
    }


def test_values_against_scipy():
    cases = _cases()
    outs = {name: [d.log_prob(f64(x)), d.entropy()] for name, (d, _, x) in cases.items()}
    for name in ("HalfNormal", "HalfCauchy", "Pareto", "Weibull"):
        d, _, x = cases[name]
        outs[name] += [d.cdf(f64(x)), d.icdf(f64([[0.1, 0.5, 0.9]]))]
    nv.realize(*[o for v in outs.values() for o in v])
    for name, (d, ref, x) in cases.items():
        got = [o.numpy() for o in outs[name]]
        np.testing.assert_allclose(got[0], ref.logpdf(x), rtol=1e-13, err_msg=name)
        np.testing.assert_allclose(got[1], ref.entropy(), rtol=1e-13, err_msg=name)
        if len(got) > 2:
            np.testing.assert_allclose(got[2], ref.cdf(x), rtol=1e-13, err_msg=name)
            np.testing.assert_allclose(got[3], ref.ppf([[0.1, 0.5, 0.9]]), rtol=1e-13,
                                       err_msg=name)
        assert isinstance(d, D.TransformedDistribution) == (name != "StudentT"), name


def test_moments_and_modes():
    """Means and variances as scipy's where finite, PyTorch's conventions where not:
    StudentT's mean NaN for df <= 1 and variance inf for 1 < df <= 2, NaN below;
    Pareto's clamped formulas (inf); HalfCauchy's infinite mean."""
    cases = _cases()
    got = {name: [d.mean.numpy(), d.variance.numpy(), d.mode.numpy()]
           for name, (d, _, _) in cases.items()}
    mean, var, mode = got["StudentT"]
    np.testing.assert_array_equal(mean, [np.nan, 1.0, -2.0])
    np.testing.assert_allclose(var, [np.nan, np.inf, 49.0 * 3.0], rtol=1e-15)
    np.testing.assert_array_equal(mode, [0.0, 1.0, -2.0])
    for name in ("HalfNormal", "Weibull"):
        ref = cases[name][1]
        np.testing.assert_allclose(got[name][0], ref.mean(), rtol=1e-13, err_msg=name)
        np.testing.assert_allclose(got[name][1], ref.var(), rtol=1e-12, err_msg=name)
    np.testing.assert_array_equal(got["HalfNormal"][2], 0.0)
    # Weibull's mode: scale ((k - 1) / k)^(1/k) for k > 1
    np.testing.assert_allclose(got["Weibull"][2][1:], SCALE[1:] * ((SHAPE[1:] - 1) / SHAPE[1:])
                               ** (1 / SHAPE[1:]), rtol=1e-14)
    assert np.isposinf(got["HalfCauchy"][0]).all() and np.isposinf(got["HalfCauchy"][1]).all()
    mean, var, mode = got["Pareto"]
    np.testing.assert_allclose(mean, [np.inf, 3 * 2.0, 1.5 * 7.0], rtol=1e-15)
    np.testing.assert_allclose(var[2], stats.pareto(3.0, scale=7.0).var(), rtol=1e-14)
    assert np.isposinf(var[:2]).all()
    np.testing.assert_array_equal(mode, SCALE)


def test_shapes_expand_support_and_validation():
    scale = f64(np.ones((3, 1)))
    shape = f64(np.full((1, 2), 2.5))
    for d in (D.StudentT(shape, 0.0, scale), D.HalfNormal(scale.expand(3, 2)),
              D.HalfCauchy(scale.expand(3, 2)), D.Pareto(scale, shape), D.Weibull(scale, shape)):
        assert d.batch_shape == (3, 2) and d.event_shape == () and d.has_rsample
        assert d.rsample((4,)).shape == (4, 3, 2)
        big = d.expand((5, 3, 2))
        assert type(big) is type(d) and big.sample().shape == (5, 3, 2)
        assert big.log_prob(f64(np.full((5, 3, 2), 1.5))).shape == (5, 3, 2)
    assert D.StudentT(3.0).batch_shape == () and D.StudentT(3.0).sample().dtype == nv.float32
    pareto = D.Pareto(f64([2.0]), f64([1.0]))
    assert pareto.support.lower_bound is pareto.scale
    with pytest.raises(ValueError, match="support"):
        pareto.log_prob(f64([1.0]))
    with pytest.raises(ValueError, match="scale"):
        D.HalfNormal(f64([-1.0]))
    with pytest.raises(ValueError, match="df"):
        D.StudentT(f64([0.0]))
    with pytest.raises(ValueError, match="support"):
        D.HalfCauchy(1.0).log_prob(f64(-1.0))
    # validate_args=False scores a negative value as -inf (PyTorch's where)
    assert D.HalfNormal(1.0, validate_args=False).log_prob(f64(-1.0)).item() == -math.inf


def test_sampling_statistics():
    """3000 draws per case (fixed seed): a KS test against scipy (p > 1e-3)."""
    n = 3000
    nv.manual_seed(99)
    cases = _cases()
    samples = {name: d.sample((n,)) for name, (d, _, _) in cases.items()}
    nv.realize(*samples.values())
    for name, (_, ref, _) in cases.items():
        s = samples[name].numpy()
        assert s.shape == (n, 3) and s.dtype == np.float64, name
        for j in range(3):
            frozen = ref.__class__(ref.dist, *[np.asarray(a)[j] if np.ndim(a) else a
                                               for a in ref.args],
                                   **{k: np.asarray(v)[j] for k, v in ref.kwds.items()})
            assert stats.kstest(s[:, j], frozen.cdf).pvalue > 1e-3, (name, j)


def test_rsample_gradients():
    """HalfNormal, HalfCauchy, Pareto and Weibull ``rsample`` differentiate in their
    parameters (finite differences under a fixed seed); StudentT's in ``df`` goes
    through the chi-squared draw (fixed per seed only up to its rejection passes, so
    it is checked in expectation: d E[x^2] / d df = -2 / (df - 2)^2)."""
    def fn(scale, shape):
        nv.manual_seed(4)
        return (D.HalfNormal(scale).rsample((2,)), D.HalfCauchy(scale).rsample((2,)),
                D.Pareto(scale, shape).rsample((2,)), D.Weibull(scale, shape).rsample((2,)),
                D.StudentT(f64([3.0, 4.0, 5.0]), shape, scale).rsample((2,)))

    assert gradcheck(fn, [SCALE, SHAPE])
    n = 20000
    nv.manual_seed(8)
    df = f64(np.full((n, 2), [5.0, 9.0])).requires_grad_()
    x = D.StudentT(df).rsample()
    (g,) = nv.autograd.grad((x ** 2).sum(), [df])
    got = g.numpy()
    want = -2 / (np.array([5.0, 9.0]) - 2) ** 2
    se = got.std(0) / math.sqrt(n)
    assert (abs(got.mean(0) - want) < 6 * se).all(), (got.mean(0), want, se)
