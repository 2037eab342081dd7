"""Gamma, Chi2, Beta and Dirichlet: every quantity against scipy.stats in float64
(log_prob, cdf, entropy, mean, mode, variance), shapes, ``expand`` and validation;
sampling by Kolmogorov-Smirnov tests and moments of a few thousand draws under fixed
seeds; the ``rsample`` gradients -- per draw for Gamma and Chi2 against the derivative
of the inverse cdf (central differences of scipy's ``gammaincinv`` in float64), and in
expectation for Beta and Dirichlet against the derivative of their means; and the
rejection sampler's retry path: with one proposal per pass, no element keeps a
rejected proposal and the draws keep their distribution.

The interpreter realizes these small graphs (no compiles)."""
import math

import numpy as np
import pytest
from scipy import special, stats

import nova as nv
import nova.distributions as D
from nova.tensor import sampling_ops


@pytest.fixture(autouse=True)
def interpreted():
    with nv.engine("interp"):
        yield


def f64(a):
    return nv.tensor(np.asarray(a, dtype=np.float64), dtype=nv.float64)


CONC = np.array([0.4, 1.0, 3.5])
RATE = np.array([2.0, 0.5, 1.3])
X = np.array([[0.05, 1.0, 2.5], [3.0, 0.2, 7.0], [1e-8, 40.0, 1e-3]])


def test_gamma_and_chi2_values_against_scipy():
    g = D.Gamma(f64(CONC), f64(RATE))
    chi = D.Chi2(f64(2 * CONC))
    outs = [g.log_prob(f64(X)), g.cdf(f64(X)), g.entropy(), g.mean, g.mode, g.variance,
            g.stddev, chi.log_prob(f64(X)), chi.cdf(f64(X)), chi.entropy(), chi.mean,
            chi.variance, chi.df]
    nv.realize(*outs)
    lp, cdf, ent, mean, mode, var, sd, clp, ccdf, cent, cmean, cvar, df = [o.numpy() for o in outs]
    ref = stats.gamma(CONC, scale=1 / RATE)
    np.testing.assert_allclose(lp, ref.logpdf(X), rtol=1e-13)
    np.testing.assert_allclose(cdf, ref.cdf(X), rtol=1e-12)
    np.testing.assert_allclose(ent, ref.entropy(), rtol=1e-13)
    np.testing.assert_allclose(mean, ref.mean(), rtol=1e-15)
    np.testing.assert_allclose(mode, np.maximum((CONC - 1) / RATE, 0), rtol=1e-15)
    np.testing.assert_allclose(var, ref.var(), rtol=1e-15)
    np.testing.assert_allclose(sd, ref.std(), rtol=1e-15)
    cref = stats.chi2(2 * CONC)
    np.testing.assert_allclose(clp, cref.logpdf(X), rtol=1e-13)
    np.testing.assert_allclose(ccdf, cref.cdf(X), rtol=1e-12)
    np.testing.assert_allclose(cent, cref.entropy(), rtol=1e-13)
    np.testing.assert_allclose(cmean, cref.mean(), rtol=1e-15)
    np.testing.assert_allclose(cvar, cref.var(), rtol=1e-15)
    np.testing.assert_allclose(df, 2 * CONC, rtol=0)
    assert isinstance(chi, D.Gamma) and chi.has_rsample


def test_gamma_cdf_far_tails_and_its_gradients():
    """The cdf keeps its digits where it is tiny (lower tail) and next to 1, for large
    concentrations too, and differentiates in both parameters and the value
    (finite differences of scipy's ``gammainc``)."""
    a = np.array([0.01, 2.0, 250.0, 250.0, 3000.0])
    x = np.array([1e-30, 1e-6, 200.0, 320.0, 3050.0])
    conc, value = f64(a).requires_grad_(), f64(x).requires_grad_()
    cdf = D.Gamma(conc, 1.0).cdf(value)
    ga, gx = nv.autograd.grad(cdf.sum(), [conc, value])
    np.testing.assert_allclose(cdf.numpy(), special.gammainc(a, x), rtol=5e-12)
    h = 1e-6 * a
    slope_a = (special.gammainc(a + h, x) - special.gammainc(a - h, x)) / (2 * h)
    np.testing.assert_allclose(ga.numpy(), slope_a, rtol=1e-6, atol=1e-300)
    np.testing.assert_allclose(gx.numpy(), stats.gamma(a).pdf(x), rtol=1e-11)


def test_beta_and_dirichlet_values_against_scipy():
    a, b = np.array([0.5, 2.0, 7.0]), np.array([1.5, 0.3, 2.0])
    y = np.array([[0.3, 0.01, 0.9], [1e-6, 0.5, 0.999]])
    beta = D.Beta(f64(a), f64(b))
    conc = np.array([[0.5, 2.0, 3.0], [1.2, 0.3, 0.9]])
    pts = np.array([[0.2, 0.3, 0.5], [0.1, 0.1, 0.8]])
    dirichlet = D.Dirichlet(f64(conc))
    outs = [beta.log_prob(f64(y)), beta.entropy(), beta.mean, beta.variance,
            beta.concentration1, beta.concentration0, dirichlet.log_prob(f64(pts)),
            dirichlet.entropy(), dirichlet.mean, dirichlet.variance]
    nv.realize(*outs)
    blp, bent, bmean, bvar, c1, c0, dlp, dent, dmean, dvar = [o.numpy() for o in outs]
    ref = stats.beta(a, b)
    np.testing.assert_allclose(blp, ref.logpdf(y), rtol=1e-13)
    np.testing.assert_allclose(bent, ref.entropy(), rtol=1e-12)
    np.testing.assert_allclose(bmean, ref.mean(), rtol=1e-15)
    np.testing.assert_allclose(bvar, ref.var(), rtol=1e-14)
    np.testing.assert_array_equal(c1, a)
    np.testing.assert_array_equal(c0, b)
    for i in range(2):
        dref = stats.dirichlet(conc[i])
        np.testing.assert_allclose(dlp[i], dref.logpdf(pts[i]), rtol=1e-13)
        np.testing.assert_allclose(dent[i], dref.entropy(), rtol=1e-13)
        np.testing.assert_allclose(dmean[i], dref.mean(), rtol=1e-15)
        np.testing.assert_allclose(dvar[i], dref.var(), rtol=1e-14)


def test_modes_follow_pytorch():
    """Beta and Dirichlet modes: ``(alpha - 1)+`` normalized; where every alpha is
    below 1, PyTorch's one-hot at the first category; (1, 1) is NaN."""
    beta = D.Beta(f64([3.0, 0.5, 2.0, 0.5, 1.0]), f64([2.0, 0.5, 0.5, 3.0, 1.0]))
    dirichlet = D.Dirichlet(f64([[0.5, 0.3, 0.9], [2.0, 3.0, 0.5]]))
    np.testing.assert_allclose(beta.mode.numpy(), [2 / 3, 1.0, 1.0, 0.0, np.nan], rtol=1e-15)
    np.testing.assert_allclose(dirichlet.mode.numpy(), [[1, 0, 0], [1 / 3, 2 / 3, 0]],
                               rtol=1e-15)


def test_shapes_expand_and_validation():
    conc = f64(np.ones((3, 1)))
    rate = f64(np.ones((1, 2)))
    for d in (D.Gamma(conc, rate), D.Beta(conc, rate), D.Chi2(conc.expand(3, 2))):
        assert d.batch_shape == (3, 2) and d.event_shape == ()
        assert d.sample((4,)).shape == (4, 3, 2)
        assert d.rsample().shape == (3, 2)
        big = d.expand((5, 3, 2))
        assert type(big) is type(d) and big.sample().shape == (5, 3, 2)
        assert big.log_prob(f64(np.full((5, 3, 2), 0.5))).shape == (5, 3, 2)
    dirichlet = D.Dirichlet(f64(np.ones((3, 4))))
    assert (dirichlet.batch_shape, dirichlet.event_shape) == ((3,), (4,))
    assert dirichlet.sample((2,)).shape == (2, 3, 4)
    assert dirichlet.expand((5, 3)).sample().shape == (5, 3, 4)
    assert D.Gamma(2.0, 1.0).batch_shape == () and D.Gamma(2.0, 1.0).sample().dtype == nv.float32
    assert D.Beta(2.0, 1.0).batch_shape == () and D.Beta(2.0, 3.0).sample((3,)).shape == (3,)
    single = D.Gamma(nv.tensor([2.0]), nv.tensor([1.0]))
    assert single.rsample((2,)).dtype == nv.float32
    assert single.log_prob(nv.tensor([0.5])).dtype == nv.float32
    with pytest.raises(ValueError, match="concentration"):
        D.Gamma(f64([-1.0]), 1.0)
    with pytest.raises(ValueError, match="rate"):
        D.Gamma(1.0, 0.0)
    with pytest.raises(ValueError, match="df"):
        D.Chi2(f64([0.0, 1.0]))
    with pytest.raises(ValueError, match="concentration1"):
        D.Beta(f64([-0.5]), f64([1.0]))
    with pytest.raises(ValueError, match="at least one-dimensional"):
        D.Dirichlet(f64(1.0))
    with pytest.raises(ValueError, match="support"):
        D.Gamma(2.0, 1.0).log_prob(f64(-1.0))
    with pytest.raises(ValueError, match="support"):
        D.Dirichlet(f64([1.0, 1.0])).log_prob(f64([0.5, 0.6]))
    assert repr(D.Gamma(2.0, 3.0)) == "Gamma(concentration: 2.0, rate: 3.0)"


def test_supports_have_bijections():
    """``biject_to`` of each new support maps the reals into it (the registry's
    entries for positive, the unit interval, the simplex and Pareto's
    ``greater_than_eq``)."""
    z = f64([[-3.0, 0.0, 2.0]])      # (three reals: the stick-breaking map's input for 4)
    for d in (D.Gamma(2.0, 1.0), D.Beta(2.0, 2.0), D.Dirichlet(f64([1.0, 1.0, 1.0, 1.0])),
              D.Pareto(f64([2.0]), f64([1.5])), D.Chi2(3.0)):
        y = D.biject_to(d.support)(z)
        assert bool(d.support.check(y).all()), type(d).__name__


def test_sampling_statistics():
    """3000 draws per case (a fixed seed): a KS test against scipy (p > 1e-3; these
    p-values are fixed numbers for the seed) and the mean within 5 standard errors,
    concentrations from 0.05 (draws near 1e-20) to 150, both sides of 1."""
    n = 3000
    nv.manual_seed(2024)
    conc = np.array([0.05, 0.7, 1.0, 4.0, 150.0])
    rate = np.array([1.0, 2.0, 0.5, 1.0, 3.0])
    a, b = np.array([0.3, 2.0, 5.0]), np.array([0.6, 2.0, 0.8])
    alpha = np.array([0.4, 1.0, 2.5])
    samples = [D.Gamma(f64(conc), f64(rate)).sample((n,)), D.Chi2(f64([0.7, 5.0])).sample((n,)),
               D.Beta(f64(a), f64(b)).sample((n,)), D.Dirichlet(f64(alpha)).sample((n,))]
    nv.realize(*samples)
    g, chi, beta, dirichlet = [s.numpy() for s in samples]
    assert g.shape == (n, 5) and g.dtype == np.float64 and (g > 0).all()
    for j in range(5):
        ref = stats.gamma(conc[j], scale=1 / rate[j])
        assert stats.kstest(g[:, j], ref.cdf).pvalue > 1e-3, j
        assert abs(g[:, j].mean() - ref.mean()) < 5 * ref.std() / math.sqrt(n), j
    for j, df in enumerate([0.7, 5.0]):
        assert stats.kstest(chi[:, j], stats.chi2(df).cdf).pvalue > 1e-3, df
    for j in range(3):
        assert stats.kstest(beta[:, j], stats.beta(a[j], b[j]).cdf).pvalue > 1e-3, j
    assert ((beta > 0) & (beta < 1)).all()
    np.testing.assert_allclose(dirichlet.sum(-1), 1.0, rtol=1e-14)
    total = alpha.sum()
    for j in range(3):     # the marginals are Beta(alpha_j, total - alpha_j)
        ref = stats.beta(alpha[j], total - alpha[j])
        assert stats.kstest(dirichlet[:, j], ref.cdf).pvalue > 1e-3, j


def test_small_concentrations_stay_on_the_simplex():
    """Concentrations of 1e-3: the Gamma draws underflow, the Dirichlet's are
    normalized in log space and clamped into [tiny, 1 - eps/2] (PyTorch's bounds),
    float32 included."""
    nv.manual_seed(7)
    d32 = D.Dirichlet(nv.tensor(np.full((200, 3), 1e-3, dtype=np.float32))).sample().numpy()
    b64 = D.Beta(f64(np.full(200, 1e-3)), f64(np.full(200, 1e-3))).sample().numpy()
    assert d32.dtype == np.float32
    assert np.isfinite(d32).all() and (d32 >= np.finfo(np.float32).tiny).all()
    assert (d32 <= 1 - np.finfo(np.float32).eps / 2).all()
    np.testing.assert_allclose(d32.sum(-1), 1.0, rtol=1e-6)
    assert ((b64 > 0) & (b64 < 1)).all()
    # nearly all the mass at the two ends, each end about half the time
    assert 0.3 < (b64 > 0.5).mean() < 0.7


def test_gamma_rsample_gradient_is_the_inverse_cdf_derivative():
    """Per draw, ``dx/dconcentration`` equals the derivative of the inverse cdf at the
    draw's level (central differences of scipy's ``gammaincinv``), concentrations
    0.03 to 300 (series and continued-fraction sides, ``x`` from 1e-80 up);
    ``dx/drate = -x / rate``; Chi2's ``df`` gets half the Gamma's."""
    conc = np.array([0.03, 0.6, 1.0, 7.5, 300.0])
    rate = 1.7
    nv.manual_seed(5)
    alpha = f64(np.broadcast_to(conc, (30, 5)).copy()).requires_grad_()
    beta = f64(np.full((30, 5), rate)).requires_grad_()
    x = D.Gamma(alpha, beta).rsample()
    g_alpha, g_rate = nv.autograd.grad(x.sum(), [alpha, beta])
    df = f64([3.0]).requires_grad_()
    c = D.Chi2(df).rsample((20,))
    (g_df,) = nv.autograd.grad(c.sum(), [df])
    nv.realize(x, g_alpha, g_rate, c, g_df)
    z = x.numpy() * rate
    u = special.gammainc(conc, z)
    h = 1e-6 * conc
    dz = (special.gammaincinv(conc + h, u) - special.gammaincinv(conc - h, u)) / (2 * h)
    np.testing.assert_allclose(g_alpha.numpy(), dz / rate, rtol=1e-7, atol=0)
    np.testing.assert_allclose(g_rate.numpy(), -x.numpy() / rate, rtol=1e-14)
    zc = c.numpy() / 2
    uc = special.gammainc(1.5, zc)
    dzc = (special.gammaincinv(1.5 + 1e-6, uc) - special.gammaincinv(1.5 - 1e-6, uc)) / 2e-6
    np.testing.assert_allclose(g_df.numpy(), [(dzc * 2 * 0.5).sum()], rtol=1e-7)
    assert not D.Gamma(alpha, beta).sample().requires_grad


def test_beta_and_dirichlet_gradients_in_expectation():
    """The pathwise gradients are unbiased: the mean over 8000 draws of ``d x/d
    alpha`` matches the derivative of the mean within 6 standard errors (about 7% of
    it; the per-draw spread measured from the same draws)."""
    n = 8000
    nv.manual_seed(11)
    a = f64(np.full((n, 2), [0.7, 2.0])).requires_grad_()
    b = f64(np.full((n, 2), [1.5, 0.4])).requires_grad_()
    x = D.Beta(a, b).rsample()
    ga, gb = nv.autograd.grad(x.sum(), [a, b])
    alpha = f64(np.full((n, 3), [0.5, 1.0, 3.0])).requires_grad_()
    y = D.Dirichlet(alpha).rsample()
    (gd,) = nv.autograd.grad(y[:, 0].sum(), [alpha])
    nv.realize(ga, gb, gd)
    A, B = np.array([0.7, 2.0]), np.array([1.5, 0.4])
    for got, want in ((ga.numpy(), B / (A + B) ** 2), (gb.numpy(), -A / (A + B) ** 2)):
        se = got.std(0) / math.sqrt(n)
        assert (abs(got.mean(0) - want) < 6 * se).all(), (got.mean(0), want)
    al = np.array([0.5, 1.0, 3.0])
    total = al.sum()
    want = np.array([(total - al[0]) / total ** 2, -al[0] / total ** 2, -al[0] / total ** 2])
    got = gd.numpy()
    assert (abs(got.mean(0) - want) < 6 * got.std(0) / math.sqrt(n)).all(), (got.mean(0), want)


def test_rejected_proposals_are_drawn_again(monkeypatch):
    """With one proposal per pass (5% rejected at concentration 1), the sampler makes
    further passes, each element keeps the first accepted proposal -- never a rejected
    one -- and the draws still pass the KS test."""
    monkeypatch.setattr(sampling_ops, "GAMMA_ROUNDS", 1)
    passes = []
    original = sampling_ops._gamma_pass

    def recording(alpha, generator):
        value, ok = original(alpha, generator)
        nv.realize(value, ok)
        passes.append((value.numpy(), ok.numpy()))
        return value, ok

    monkeypatch.setattr(sampling_ops, "_gamma_pass", recording)
    nv.manual_seed(3)
    n = 4000
    x = D.Gamma(f64(np.ones(n)), 1.0).sample().numpy()
    assert len(passes) >= 2 and not passes[0][1].all()
    expected = np.full(n, np.nan)
    for value, ok in reversed(passes):
        expected = np.where(ok, np.exp(value), expected)
    np.testing.assert_allclose(x, expected, rtol=1e-15)
    assert stats.kstest(x, stats.expon.cdf).pvalue > 1e-3


def test_against_torch():
    """Where torch is installed: values equal torch's, and torch's approximate
    ``_standard_gamma_grad`` (good to about 1e-4) agrees with the exact gradient."""
    torch = pytest.importorskip("torch")
    TD = torch.distributions
    t64 = lambda a: torch.tensor(np.asarray(a, dtype=np.float64))  # noqa: E731
    ours = [D.Gamma(f64(CONC), f64(RATE)).log_prob(f64(X)),
            D.Beta(f64([0.5, 2.0]), f64([1.5, 0.3])).entropy(),
            D.Dirichlet(f64([[0.5, 2.0, 3.0]])).log_prob(f64([[0.2, 0.3, 0.5]]))]
    theirs = [TD.Gamma(t64(CONC), t64(RATE)).log_prob(t64(X)),
              TD.Beta(t64([0.5, 2.0]), t64([1.5, 0.3])).entropy(),
              TD.Dirichlet(t64([[0.5, 2.0, 3.0]])).log_prob(t64([[0.2, 0.3, 0.5]]))]
    for o, t in zip(ours, theirs):
        np.testing.assert_allclose(o.numpy(), t.numpy(), rtol=1e-12)
    conc = np.array([0.5, 2.0, 20.0])
    nv.manual_seed(0)
    alpha = f64(np.broadcast_to(conc, (10, 3)).copy()).requires_grad_()
    x = D.Gamma(alpha, 1.0).rsample()
    (g,) = nv.autograd.grad(x.sum(), [alpha])
    tg = torch._standard_gamma_grad(t64(alpha.detach().numpy()), t64(x.numpy()))
    np.testing.assert_allclose(g.numpy(), tg.numpy(), rtol=3e-4)
