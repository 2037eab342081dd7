"""Poisson, Binomial, Geometric, NegativeBinomial and Multinomial: log_prob, entropy,
mean, mode and variance against scipy.stats in float64; shapes, ``expand``,
``enumerate_support`` and validation; sampling by chi-square tests of a few thousand
draws under fixed seeds, on both sides of each sampler's switch (Poisson's rate 10,
Binomial's mean 10, its reflection above p = 1/2); and the exactness of the passes:
with one proposal per pass (PTRS, BTRS) or two gaps per pass (the counting samplers),
the retries keep the distribution.

The interpreter realizes these small graphs."""
import math

import numpy as np
import pytest
from scipy import stats

import nova as nv
import nova.distributions as D
from nova.tensor import sampling_ops


@pytest.fixture(autouse=True)
def interpreted():
    with nv.engine("interp"):
        yield


def f64(a):
    return nv.tensor(np.asarray(a, dtype=np.float64), dtype=nv.float64)


def chi2_pvalue(x, ref):
    """Pearson's test of integer draws ``x`` against the frozen scipy distribution
    ``ref``: a bin per value with an expected count of at least 5, the rest pooled."""
    x = np.asarray(x)
    lo, hi = int(ref.ppf(1e-6)), int(ref.isf(1e-6)) + 1
    values = np.arange(lo, hi + 1)
    expected = ref.pmf(values) * len(x)
    observed = np.array([(x == v).sum() for v in values], dtype=float)
    keep = expected >= 5
    rest_e = len(x) - expected[keep].sum()
    rest_o = len(x) - observed[keep].sum()
    e = np.append(expected[keep], rest_e) if rest_e > 1e-9 else expected[keep]
    o = np.append(observed[keep], rest_o) if rest_e > 1e-9 else observed[keep]
    return stats.chisquare(o, e * o.sum() / e.sum()).pvalue


def test_values_against_scipy():
    rate = np.array([0.0, 0.7, 12.0])
    k = np.array([[0.0, 2.0, 11.0], [3.0, 0.0, 30.0]])
    n, p = np.array([10.0, 7.0, 30.0]), np.array([0.3, 0.9, 0.5])
    r, q = np.array([0.5, 3.0, 10.0]), np.array([0.3, 0.6, 0.9])
    gp = np.array([0.5, 0.2, 0.9])
    poisson = D.Poisson(f64(rate))
    binomial = D.Binomial(f64(n), f64(p))
    binomial_logits = D.Binomial(f64(n), logits=f64(np.log(p / (1 - p))))
    geometric = D.Geometric(f64(gp))
    negbin = D.NegativeBinomial(f64(r), f64(q))
    kb = np.array([[0.0, 7.0, 15.0], [3.0, 5.0, 30.0]])
    outs = [poisson.log_prob(f64(k)), poisson.mean, poisson.mode, poisson.variance,
            binomial.log_prob(f64(kb)), binomial_logits.log_prob(f64(kb)), binomial.mean,
            binomial.mode, binomial.variance, geometric.log_prob(f64(k)), geometric.entropy(),
            geometric.mean, geometric.variance, negbin.log_prob(f64(k)), negbin.mean,
            negbin.variance, negbin.mode]
    nv.realize(*outs)
    got = [o.numpy() for o in outs]
    pref = stats.poisson(rate)
    np.testing.assert_allclose(got[0], pref.logpmf(k), rtol=1e-13)
    np.testing.assert_allclose(got[1:4], [rate, np.floor(rate), rate], rtol=0)
    bref = stats.binom(n, p)
    np.testing.assert_allclose(got[4], bref.logpmf(kb), rtol=1e-12)
    np.testing.assert_allclose(got[5], bref.logpmf(kb), rtol=1e-12)
    np.testing.assert_allclose(got[6], bref.mean(), rtol=1e-15)
    np.testing.assert_allclose(got[7], np.minimum(np.floor((n + 1) * p), n), rtol=0)
    np.testing.assert_allclose(got[8], bref.var(), rtol=1e-14)
    gref = stats.geom(gp, loc=-1)          # scipy counts trials; loc=-1 counts failures
    np.testing.assert_allclose(got[9], gref.logpmf(k), rtol=1e-13)
    np.testing.assert_allclose(got[10], gref.entropy(), rtol=1e-13)
    np.testing.assert_allclose(got[11], gref.mean(), rtol=1e-14)
    np.testing.assert_allclose(got[12], gref.var(), rtol=1e-14)
    # PyTorch's NegativeBinomial counts successes with success probability probs
    nref = stats.nbinom(r, 1 - q)
    np.testing.assert_allclose(got[13], nref.logpmf(k), rtol=1e-12)
    np.testing.assert_allclose(got[14], nref.mean(), rtol=1e-14)
    np.testing.assert_allclose(got[15], nref.var(), rtol=1e-14)
    np.testing.assert_allclose(got[16], np.maximum(np.floor((r - 1) * q / (1 - q)), 0), rtol=0)


def test_binomial_entropy_support_and_multinomial_values():
    binomial = D.Binomial(12, f64([0.2, 0.5, 0.97]))
    support = binomial.enumerate_support()
    assert support.shape == (13, 3)
    np.testing.assert_allclose(binomial.entropy().numpy(),
                               stats.binom(12, [0.2, 0.5, 0.97]).entropy(), rtol=1e-12)
    with pytest.raises(NotImplementedError, match="Inhomogeneous total count"):
        D.Binomial(f64([3.0, 4.0]), f64([0.5, 0.5])).entropy()
    probs = np.array([[0.2, 0.3, 0.5], [0.0, 0.5, 0.5]])
    m = D.Multinomial(7, f64(probs))
    counts = np.array([[1.0, 2.0, 4.0], [0.0, 3.0, 4.0]])
    lp, ent, mean, var = m.log_prob(f64(counts)), m.entropy(), m.mean, m.variance
    nv.realize(lp, ent, mean, var)
    for i in range(2):
        ref = stats.multinomial(7, probs[i])
        np.testing.assert_allclose(lp.numpy()[i], ref.logpmf(counts[i]), rtol=1e-13)
        np.testing.assert_allclose(ent.numpy()[i], ref.entropy(), rtol=1e-12)
    np.testing.assert_allclose(mean.numpy(), 7 * probs, rtol=1e-15)
    np.testing.assert_allclose(var.numpy(), 7 * probs * (1 - probs), rtol=1e-15)
    # log_prob reads the count off the value: any total works
    np.testing.assert_allclose(m.log_prob(f64([2.0, 0.0, 1.0])).numpy()[0],
                               stats.multinomial(3, probs[0]).logpmf([2, 0, 1]), rtol=1e-13)


def test_shapes_expand_and_validation():
    for d in (D.Poisson(f64(np.ones((3, 2)))), D.Binomial(5, f64(np.full((3, 2), 0.3))),
              D.Geometric(f64(np.full((3, 2), 0.3))),
              D.NegativeBinomial(f64(np.full((3, 2), 2.0)), logits=f64(np.zeros((3, 2))))):
        assert d.batch_shape == (3, 2) and d.event_shape == () and not d.has_rsample
        assert d.sample((4,)).shape == (4, 3, 2)
        big = d.expand((5, 3, 2))
        assert type(big) is type(d) and big.sample().shape == (5, 3, 2)
        assert big.log_prob(f64(np.ones((5, 3, 2)))).shape == (5, 3, 2)
    m = D.Multinomial(4, logits=f64(np.zeros((3, 5))))
    assert (m.batch_shape, m.event_shape) == ((3,), (5,))
    assert m.sample((2,)).shape == (2, 3, 5) and m.expand((6, 3)).sample().shape == (6, 3, 5)
    assert D.Poisson(2.0).batch_shape == () and D.Poisson(2.0).sample().dtype == nv.float32
    assert D.Binomial(3, logits=f64([0.0])).sample().dtype == nv.float64
    with pytest.raises(ValueError, match="rate"):
        D.Poisson(f64([-1.0]))
    with pytest.raises(ValueError, match="total_count"):
        D.Binomial(f64([2.5]), f64([0.5]))
    with pytest.raises(ValueError, match="probs"):
        D.Binomial(3, f64([1.5]))
    with pytest.raises(ValueError, match="Either `probs` or `logits`"):
        D.Geometric()
    with pytest.raises(ValueError, match="to be positive"):
        D.Geometric(f64([0.0, 0.5]))
    with pytest.raises(ValueError, match="probs"):
        D.NegativeBinomial(2.0, f64([1.0]))
    with pytest.raises(NotImplementedError, match="inhomogeneous total_count"):
        D.Multinomial(f64([3.0]), f64([0.5, 0.5]))
    with pytest.raises(ValueError, match="support"):
        D.Poisson(f64([1.0])).log_prob(f64([1.5]))
    with pytest.raises(ValueError, match="support"):
        D.Binomial(3, f64([0.5])).log_prob(f64([4.0]))
    with pytest.raises(ValueError, match="support"):
        m.log_prob(f64(np.full((3, 5), 1.0)))           # 5 > 4 draws
    assert m.support.event_dim == 1 and m.support.is_discrete


def test_sampling_chi_square():
    """3000 draws per case (fixed seed), a chi-square test each (p > 1e-3): Poisson
    below and above rate 10, Binomial below and above mean 10 and above p = 1/2,
    Geometric, NegativeBinomial (gamma-Poisson), Multinomial's marginals (Binomial)
    and totals."""
    n = 3000
    nv.manual_seed(31)
    rates = np.array([0.4, 3.0, 9.5, 10.0, 60.0, 2500.0])
    counts = np.array([8.0, 40.0, 40.0, 200.0, 1000.0, 25.0])
    probs = np.array([0.3, 0.15, 0.8, 0.5, 0.995, 0.7])
    draws = [D.Poisson(f64(rates)).sample((n,)), D.Binomial(f64(counts), f64(probs)).sample((n,)),
             D.Geometric(f64([0.3, 0.05])).sample((n,)),
             D.NegativeBinomial(f64([0.7, 6.0]), f64([0.4, 0.8])).sample((n,)),
             D.Multinomial(9, f64([0.2, 0.5, 0.3])).sample((n,))]
    nv.realize(*draws)
    pois, binom, geom, negbin, multi = [d.numpy() for d in draws]
    for x in (pois, binom, geom, negbin, multi):
        np.testing.assert_array_equal(x, np.round(x))
    for j, lam in enumerate(rates):
        assert chi2_pvalue(pois[:, j], stats.poisson(lam)) > 1e-3, lam
    for j in range(len(counts)):
        assert chi2_pvalue(binom[:, j], stats.binom(counts[j], probs[j])) > 1e-3, j
    for j, p in enumerate([0.3, 0.05]):
        assert chi2_pvalue(geom[:, j], stats.geom(p, loc=-1)) > 1e-3, p
    for j, (r, q) in enumerate([(0.7, 0.4), (6.0, 0.8)]):
        assert chi2_pvalue(negbin[:, j], stats.nbinom(r, 1 - q)) > 1e-3, r
    np.testing.assert_array_equal(multi.sum(-1), 9)
    for j, p in enumerate([0.2, 0.5, 0.3]):
        assert chi2_pvalue(multi[:, j], stats.binom(9, p)) > 1e-3, j


def test_edge_parameters_sample_exactly():
    """Rate 0 draws 0; probabilities 0 and 1 draw 0 and the count; a count of 0
    draws 0; Geometric with p = 1 draws 0 (not -0)."""
    nv.manual_seed(1)
    outs = [D.Poisson(f64([0.0])).sample((50,)),
            D.Binomial(f64([5.0, 5.0, 0.0, 300.0]), f64([0.0, 1.0, 0.4, 1.0])).sample((50,)),
            D.Geometric(f64([1.0])).sample((50,))]
    nv.realize(*outs)
    assert (outs[0].numpy() == 0).all()
    np.testing.assert_array_equal(outs[1].numpy(), np.tile([0.0, 5.0, 0.0, 300.0], (50, 1)))
    g = outs[2].numpy()
    assert (g == 0).all() and not np.signbit(g).any()


@pytest.mark.parametrize("family", ["Poisson", "Binomial"])
def test_retry_passes_keep_the_distribution(monkeypatch, family):
    """With one proposal per rejection pass (a quarter to a third rejected) and two
    gaps per counting pass (most counts continue over several passes), the samplers
    take several passes and the draws still pass the chi-square test: no element
    keeps a rejected proposal or a truncated count."""
    monkeypatch.setattr(sampling_ops, "POISSON_ROUNDS", 1)
    monkeypatch.setattr(sampling_ops, "BINOMIAL_ROUNDS", 1)
    monkeypatch.setattr(sampling_ops, "COUNT_TERMS", 2)
    steps = []
    original = sampling_ops.realize
    monkeypatch.setattr(sampling_ops, "realize", lambda *t: steps.append(1) or original(*t))
    n = 3000
    nv.manual_seed(17)
    if family == "Poisson":
        params, refs = [4.0, 30.0], [stats.poisson(4.0), stats.poisson(30.0)]
        x = D.Poisson(f64(params)).sample((n,)).numpy()
    else:
        params, refs = [(12.0, 0.4), (300.0, 0.3)], [stats.binom(12, 0.4), stats.binom(300, 0.3)]
        x = D.Binomial(f64([12.0, 300.0]), f64([0.4, 0.3])).sample((n,)).numpy()
    assert len(steps) >= 3
    for j, ref in enumerate(refs):
        assert chi2_pvalue(x[:, j], ref) > 1e-3, (family, j)


def test_against_torch():
    """Where torch is installed: the scores and moments equal torch's."""
    torch = pytest.importorskip("torch")
    TD = torch.distributions
    t64 = lambda a: torch.tensor(np.asarray(a, dtype=np.float64))  # noqa: E731
    k = [[0.0, 2.0, 11.0]]
    pairs = [(D.Poisson(f64([0.5, 2.0, 17.0])), TD.Poisson(t64([0.5, 2.0, 17.0]))),
             (D.Binomial(11, f64([0.0, 0.3, 1.0])), TD.Binomial(11, t64([0.0, 0.3, 1.0]))),
             (D.Geometric(logits=f64([1.0, 0.5, -2.0])),
              TD.Geometric(logits=t64([1.0, 0.5, -2.0]))),
             (D.NegativeBinomial(f64([0.5, 3.0, 10.0]), logits=f64([0.3, -1.0, 2.0])),
              TD.NegativeBinomial(t64([0.5, 3.0, 10.0]), logits=t64([0.3, -1.0, 2.0])))]
    for ours, theirs in pairs:
        np.testing.assert_allclose(ours.log_prob(f64(k)).numpy(), theirs.log_prob(t64(k)).numpy(),
                                   rtol=1e-12, err_msg=type(ours).__name__)
        for attr in ("mean", "variance", "mode"):
            np.testing.assert_allclose(getattr(ours, attr).numpy(),
                                       getattr(theirs, attr).numpy(), rtol=1e-12,
                                       err_msg=f"{type(ours).__name__}.{attr}")
    m, tm = D.Multinomial(5, f64([0.2, 0.8])), TD.Multinomial(5, t64([0.2, 0.8]))
    # (torch computes lgamma(n + 1) of an int64 n in float32; Nova in the dtype of probs)
    np.testing.assert_allclose(m.entropy().numpy(), tm.entropy().numpy(), rtol=1e-6)
    assert math.isclose(D.Binomial(11, f64([0.3])).entropy().item(),
                        TD.Binomial(11, t64([0.3])).entropy().item(), rel_tol=1e-12)
