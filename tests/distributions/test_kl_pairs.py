"""``kl_divergence`` for every pair of distribution types that ``torch.distributions``
registers among Nova's families, in float64: the values (the pairs that are infinite
throughout, and Uniform -> Exponential, infinite only where the uniform reaches below
0, included) and, for the finite cross-family pairs, the gradients with respect to
both distributions' parameters. (The same-family pairs are also checked against the
definition by quadrature in test_kl.py.)

CI has no torch: there every pair's value is checked against the definition,
``E_p[log p(x) - log q(x)]``, integrated by ``scipy.integrate.quad`` with scipy's
densities (exact sums for the discrete families, Gauss-Hermite cubature, exact for the
quadratic log-ratio of two Gaussians, for MultivariateNormal), infinite where p's
support leaves q's; the gradients against central differences. Where torch is
installed, the values and gradients are also compared with torch's.

The interpreter realizes these small graphs."""
import numpy as np
import pytest
from scipy import integrate, stats

import nova as nv
import nova.distributions as D


@pytest.fixture(autouse=True)
def interpreted():
    with nv.engine("interp"):
        yield


def _torch():
    """torch, its distributions module and KL registry (the test skips without)."""
    torch = pytest.importorskip("torch")
    from torch.distributions.kl import _KL_REGISTRY
    return torch, torch.distributions, _KL_REGISTRY


def f64(a):
    return nv.tensor(np.asarray(a, dtype=np.float64), dtype=nv.float64)


def t64(a):
    import torch
    return torch.tensor(np.asarray(a, dtype=np.float64))


# two parameter sets per family (p's and q's), batch shape (3,)
PARAMS = {
    "Normal": ([[0.3, -1.0, 2.0], [0.8, 1.7, 0.4]], [[-0.4, 0.5, 1.1], [1.3, 0.6, 2.2]]),
    "Laplace": ([[0.1, -0.6, 1.5], [0.7, 1.2, 0.3]], [[-0.2, 0.4, 0.9], [1.1, 0.5, 2.0]]),
    "Cauchy": ([[0.1, -0.6, 1.5], [0.7, 1.2, 0.3]], [[-0.2, 0.4, 0.9], [1.1, 0.5, 2.0]]),
    "Gumbel": ([[0.2, -0.5, 1.0], [0.9, 1.4, 0.5]], [[-0.3, 0.6, 0.8], [1.2, 0.7, 1.5]]),
    "LogNormal": ([[0.2, -0.5, 1.0], [0.9, 1.4, 0.5]], [[-0.3, 0.6, 0.8], [1.2, 0.7, 1.5]]),
    "Exponential": ([[0.5, 1.5, 3.0]], [[2.0, 0.7, 1.1]]),
    # p's second uniform reaches below 0 (Uniform -> Exponential is infinite there);
    # q's contains p's first only (Uniform -> Uniform)
    "Uniform": ([[0.2, -0.5, 1.0], [1.0, 2.0, 1.5]], [[-1.0, 0.5, 0.5], [3.0, 3.0, 1.2]]),
    "Bernoulli": ([[0.2, 0.5, 0.9]], [[0.6, 0.3, 0.1]]),
    "Categorical": ([[[0.2, 0.3, 0.5], [0.1, 0.1, 0.8], [0.6, 0.2, 0.2]]],
                    [[[0.4, 0.4, 0.2], [0.3, 0.3, 0.4], [0.1, 0.7, 0.2]]]),
    "OneHotCategorical": ([[[0.2, 0.3, 0.5], [0.1, 0.1, 0.8], [0.6, 0.2, 0.2]]],
                          [[[0.4, 0.4, 0.2], [0.3, 0.3, 0.4], [0.1, 0.7, 0.2]]]),
    "MultivariateNormal": ([[[0.3, -1.0], [0.1, 0.2], [1.0, 0.5]],
                            [[[1.0, 0.0], [0.3, 0.8]]] * 3],
                           [[[-0.4, 0.5], [0.0, 0.0], [0.2, 0.1]],
                            [[[1.5, 0.0], [-0.2, 0.6]]] * 3]),
    "Independent": ([[[0.3, -1.0], [0.1, 0.2], [1.0, 0.5]], [[0.8, 1.7], [0.4, 1.0], [0.6, 2.0]]],
                    [[[-0.4, 0.5], [0.0, 0.0], [0.2, 0.1]], [[1.3, 0.6], [2.2, 0.5], [1.0, 1.0]]]),
    "TransformedDistribution": ([[0.2, -0.5, 1.0], [0.9, 1.4, 0.5]],
                                [[-0.3, 0.6, 0.8], [1.2, 0.7, 1.5]]),
}


def _build(lib, name, params):
    """The ``name`` distribution of ``lib`` (nova.distributions or
    torch.distributions) from tensors ``params``."""
    if name == "Independent":
        return lib.Independent(lib.Normal(*params), 1)
    if name == "MultivariateNormal":
        return lib.MultivariateNormal(params[0], scale_tril=params[1])
    if name == "TransformedDistribution":
        return lib.TransformedDistribution(lib.Normal(*params),
                                           [lib.transforms.AffineTransform(0.5, 2.0),
                                            lib.transforms.SigmoidTransform()])
    return getattr(lib, name)(*params)


# the pairs torch.distributions (2.x) registers among the families here
PAIRS = [("Bernoulli", "Bernoulli"), ("Categorical", "Categorical"), ("Cauchy", "Cauchy"),
         ("Exponential", "Exponential"), ("Exponential", "Gumbel"), ("Exponential", "Normal"),
         ("Exponential", "Uniform"), ("Gumbel", "Exponential"), ("Gumbel", "Gumbel"),
         ("Gumbel", "Normal"), ("Gumbel", "Uniform"), ("Independent", "Independent"),
         ("Laplace", "Exponential"), ("Laplace", "Laplace"), ("Laplace", "Normal"),
         ("Laplace", "Uniform"), ("MultivariateNormal", "MultivariateNormal"),
         ("Normal", "Exponential"), ("Normal", "Gumbel"), ("Normal", "Laplace"),
         ("Normal", "Normal"), ("Normal", "Uniform"),
         ("OneHotCategorical", "OneHotCategorical"),
         ("TransformedDistribution", "TransformedDistribution"), ("Uniform", "Exponential"),
         ("Uniform", "Gumbel"), ("Uniform", "Normal"), ("Uniform", "Uniform")]


def _torch_pairs():
    """The registered (p, q) type names of torch whose both types Nova has."""
    _, _, registry = _torch()
    return sorted((p.__name__, q.__name__) for p, q in registry
                  if hasattr(D, p.__name__) and hasattr(D, q.__name__)
                  and p.__name__ in PARAMS and q.__name__ in PARAMS)


def test_every_pair_is_registered():
    """Nova registers each pair torch does among the families both have (and the
    families without parameters here are not distributions Nova has)."""
    ours = {(p.__name__, q.__name__) for p, q in D.kl._KL_REGISTRY}
    missing = [pq for pq in PAIRS if pq not in ours]
    assert missing == []
    nova_families = {n for n in D.__all__ if isinstance(getattr(D, n), type)
                     and issubclass(getattr(D, n), D.Distribution) and n != "Distribution"}
    # the families added with Gamma have their pairs in test_kl_more.py; torch
    # registers no KL for the last six
    more = {"Beta", "Binomial", "Chi2", "Dirichlet", "Gamma", "Geometric", "HalfNormal",
            "Pareto", "Poisson", "HalfCauchy", "MixtureSameFamily", "Multinomial",
            "NegativeBinomial", "StudentT", "Weibull",
            # issue #22's families: their pairs are in test_more_multivariate.py
            "ContinuousBernoulli", "ExponentialFamily", "FisherSnedecor", "GeneralizedPareto",
            "InverseGamma", "Kumaraswamy", "LKJCholesky", "LogisticNormal",
            "LowRankMultivariateNormal", "OneHotCategoricalStraightThrough",
            "RelaxedBernoulli", "RelaxedOneHotCategorical", "VonMises", "Wishart"}
    assert nova_families <= set(PARAMS) | more
    assert len(PAIRS) == 28       # 12 within a family, 16 across


def test_the_pairs_are_torchs():
    assert _torch_pairs() == PAIRS


def test_kl_values_against_torch():
    """Every registered pair's KL, for one batch of three, equals torch's (infinite
    where torch's is, NaN nowhere). One realization."""
    _, TD, _ = _torch()
    outs, expected = {}, {}
    for p_name, q_name in PAIRS:
        p_params, q_params = PARAMS[p_name][0], PARAMS[q_name][1]
        p, q = (_build(D, p_name, [f64(a) for a in p_params]),
                _build(D, q_name, [f64(a) for a in q_params]))
        outs[p_name, q_name] = D.kl_divergence(p, q)
        tp, tq = (_build(TD, p_name, [t64(a) for a in p_params]),
                  _build(TD, q_name, [t64(a) for a in q_params]))
        expected[p_name, q_name] = TD.kl_divergence(tp, tq).numpy()
    nv.realize(*outs.values())
    for pair, out in outs.items():
        got = out.numpy()
        assert got.shape == expected[pair].shape == (3,) and got.dtype == np.float64, pair
        assert not np.isnan(got).any(), pair
        np.testing.assert_allclose(got, expected[pair], rtol=1e-12, atol=1e-14, err_msg=str(pair))
    infinite = {pair for pair, e in expected.items() if np.isinf(e).all()}
    assert {("Normal", "Uniform"), ("Normal", "Exponential"), ("Laplace", "Uniform"),
            ("Gumbel", "Exponential"), ("Exponential", "Uniform")} <= infinite
    assert np.isinf(expected["Uniform", "Exponential"]).tolist() == [False, True, False]


CROSS = [("Exponential", "Gumbel"), ("Exponential", "Normal"), ("Gumbel", "Normal"),
         ("Laplace", "Normal"), ("Normal", "Gumbel"), ("Normal", "Laplace"),
         ("Uniform", "Gumbel"), ("Uniform", "Normal"), ("Uniform", "Exponential")]


def test_cross_family_gradients_against_torch():
    """The gradients of the finite cross-family KLs with respect to every parameter of
    p and q equal torch's autograd ones (batch elements with a finite KL)."""
    torch, TD, _ = _torch()
    results = []
    for p_name, q_name in CROSS:
        p_params, q_params = PARAMS[p_name][0], PARAMS[q_name][1]
        ours = [f64(a).requires_grad_() for a in p_params + q_params]
        kl = D.kl_divergence(_build(D, p_name, ours[:len(p_params)]),
                             _build(D, q_name, ours[len(p_params):]))
        loss = nv.where(nv.isfinite(kl), kl, 0.0).sum()
        results.append((kl, nv.autograd.grad(loss, ours)))
    nv.realize(*[kl for kl, _ in results], *[g for _, gs in results for g in gs])
    for (p_name, q_name), (kl, grads) in zip(CROSS, results):
        p_params, q_params = PARAMS[p_name][0], PARAMS[q_name][1]
        theirs = [t64(a).requires_grad_() for a in p_params + q_params]
        tkl = TD.kl_divergence(_build(TD, p_name, theirs[:len(p_params)]),
                               _build(TD, q_name, theirs[len(p_params):]))
        torch.where(torch.isfinite(tkl), tkl, 0.0).sum().backward()
        for g, t in zip(grads, theirs):
            np.testing.assert_allclose(g.numpy(), t.grad.numpy(), rtol=1e-11, atol=1e-13,
                                       err_msg=f"{p_name} -> {q_name}")


def test_dispatch_of_the_new_pairs():
    """Gumbel and LogNormal are TransformedDistributions: a pair registered for Gumbel
    wins over (TransformedDistribution, TransformedDistribution), which still refuses
    unequal transforms (LogNormal -> Gumbel), as torch's."""
    g, n = D.Gumbel(0.0, 1.0), D.Normal(0.0, 1.0)
    assert D.kl._dispatch_kl(D.Gumbel, D.Normal) is D.kl._kl_gumbel_normal
    assert D.kl._dispatch_kl(D.Normal, D.Gumbel) is D.kl._kl_normal_gumbel
    assert D.kl_divergence(g, D.Uniform(0.0, 1.0)).item() == float("inf")
    assert D.kl_divergence(n, n).item() == 0.0
    with pytest.raises(NotImplementedError, match="equal transforms"):
        D.kl_divergence(D.LogNormal(0.0, 1.0), g)
    with pytest.raises(NotImplementedError, match="p type Laplace and q type Gumbel"):
        D.kl_divergence(D.Laplace(0.0, 1.0), g)


# ---------------------------------------------------------------- the definition (no torch)


class _LogitAffineNormal:
    """The TransformedDistribution case's law, ``sigmoid(0.5 + 2 X)`` with ``X ~
    Normal(loc, scale)``, by change of variables: a density on (0, 1)."""

    def __init__(self, loc, scale):
        self.inner = stats.norm(0.5 + 2 * loc, 2 * scale)    # the law of the logit

    def logpdf(self, y):
        return self.inner.logpdf(np.log(y) - np.log1p(-y)) - np.log(y) - np.log1p(-y)

    def pdf(self, y):
        return np.exp(self.logpdf(y))

    def support(self):
        return 0.0, 1.0

    def median(self):
        return 1 / (1 + np.exp(-self.inner.median()))

    def ppf(self, tail):
        return 1 / (1 + np.exp(-self.inner.ppf(tail)))

    def isf(self, tail):
        return 1 / (1 + np.exp(-self.inner.isf(tail)))


def _scipy(name, params, i):
    """Batch element ``i`` of the ``name`` distribution: (a frozen scipy distribution,
    the points where its density has a kink)."""
    a = [np.asarray(p, dtype=np.float64)[i] for p in params]
    if name == "Normal":
        return stats.norm(a[0], a[1]), []
    if name == "Laplace":
        return stats.laplace(a[0], a[1]), [a[0]]
    if name == "Cauchy":
        return stats.cauchy(a[0], a[1]), []
    if name == "Gumbel":
        return stats.gumbel_r(a[0], a[1]), []
    if name == "Exponential":
        return stats.expon(scale=1 / a[0]), []
    if name == "Uniform":
        return stats.uniform(a[0], a[1] - a[0]), []
    if name == "TransformedDistribution":
        return _LogitAffineNormal(a[0], a[1]), []
    raise AssertionError(name)


def _kl_quad(p, p_kinks, q, q_kinks, tail=1e-30):
    """``int p (log p - log q)`` over p's support by quad, split at the kinks and at
    quantiles of p (each piece then holds p's mass on one scale); infinite where p's
    support leaves q's. The range stops where p's tails hold ``tail`` of its mass
    (beyond, scipy's log densities, some computed as the log of the density,
    underflow). That far out, as log q may grow exponentially (a Gumbel q's left tail:
    Normal -> Gumbel's integrand peaks 2.4 sd from p's mean)."""
    (lo, hi), (q_lo, q_hi) = p.support(), q.support()
    if lo < q_lo or hi > q_hi:
        return np.inf
    lo, hi = max(lo, float(p.ppf(tail))), min(hi, float(p.isf(tail)))

    def integrand(x):
        density = p.pdf(x)
        return 0.0 if density == 0 else density * (p.logpdf(x) - q.logpdf(x))
    levels = np.array([1e-1, 1e-4, 1e-10, 1e-20])
    quantiles = [*p.ppf(levels), p.median(), *p.isf(levels)]
    cuts = sorted({float(c) for c in [*p_kinks, *q_kinks, *quantiles] if lo < c < hi})
    edges = [lo, *cuts, hi]
    return sum(integrate.quad(integrand, a, b, epsabs=1e-13, epsrel=1e-11, limit=200)[0]
               for a, b in zip(edges[:-1], edges[1:]))


def _kl_quad_quantiles(p, q, tail=1e-14):
    """The same integral over p's quantiles, ``int_0^1 (log p - log q)(F^-1(u)) du``
    (each half from its own tail, for precision): for a heavy-tailed p, whose
    integrand in x spans many scales, while in u it is smooth and bounded."""
    def log_ratio(x):
        return p.logpdf(x) - q.logpdf(x)
    lower = integrate.quad(lambda u: log_ratio(p.ppf(u)), tail, 0.5, epsabs=1e-13,
                           epsrel=1e-11, limit=200)[0]
    upper = integrate.quad(lambda u: log_ratio(p.isf(u)), tail, 0.5, epsabs=1e-13,
                           epsrel=1e-11, limit=200)[0]
    return lower + upper


def _kl_gaussians(mean_p, tril_p, mean_q, tril_q):
    """``E_p[log p - log q]`` for two Gaussians by Gauss-Hermite cubature (3 nodes a
    dim: exact for the quadratic log-ratio), with scipy's densities."""
    nodes, weights = np.polynomial.hermite_e.hermegauss(3)
    p = stats.multivariate_normal(mean_p, tril_p @ tril_p.T)
    q = stats.multivariate_normal(mean_q, tril_q @ tril_q.T)
    z = np.stack(np.meshgrid(nodes, nodes, indexing="ij"), -1).reshape(-1, 2)
    w = np.outer(weights, weights).reshape(-1) / (2 * np.pi)
    x = mean_p + z @ tril_p.T
    return w @ (p.logpdf(x) - q.logpdf(x))


def _kl_discrete(p, q):
    p, q = np.asarray(p, dtype=np.float64), np.asarray(q, dtype=np.float64)
    return np.where(p > 0, p * (np.log(p) - np.log(q)), 0.0).sum(-1)


def _reference_kl(p_name, q_name):
    """The KL of every pair's batch of three from the definition."""
    p_params, q_params = PARAMS[p_name][0], PARAMS[q_name][1]
    if p_name == "Bernoulli":
        def two(probs):
            probs = np.asarray(probs[0])
            return np.stack([probs, 1 - probs], -1)
        return _kl_discrete(two(p_params), two(q_params))
    if p_name in ("Categorical", "OneHotCategorical"):
        return _kl_discrete(p_params[0], q_params[0])
    if p_name == "MultivariateNormal":
        return np.array([_kl_gaussians(*(np.asarray(a)[i] for a in p_params + q_params))
                         for i in range(3)])
    if p_name == "Independent":              # a sum over the (independent) event dim
        def component(params, i, j):
            return _scipy("Normal", [np.asarray(a)[:, j] for a in params], i)
        return np.array([sum(_kl_quad(*component(p_params, i, j), *component(q_params, i, j))
                             for j in range(2)) for i in range(3)])
    if p_name == "Cauchy":
        return np.array([_kl_quad_quantiles(_scipy(p_name, p_params, i)[0],
                                            _scipy(q_name, q_params, i)[0]) for i in range(3)])
    return np.array([_kl_quad(*_scipy(p_name, p_params, i), *_scipy(q_name, q_params, i))
                     for i in range(3)])


def test_kl_values_against_the_definition():
    """Every registered pair's KL, for one batch of three, equals the integral of
    ``p log(p / q)`` (a sum for the discrete families), infinite where p's support
    leaves q's. One realization."""
    outs = {}
    for p_name, q_name in PAIRS:
        p = _build(D, p_name, [f64(a) for a in PARAMS[p_name][0]])
        q = _build(D, q_name, [f64(a) for a in PARAMS[q_name][1]])
        outs[p_name, q_name] = D.kl_divergence(p, q)
    nv.realize(*outs.values())
    infinite = set()
    for pair, out in outs.items():
        got, expected = out.numpy(), _reference_kl(*pair)
        assert got.shape == (3,) and got.dtype == np.float64, pair
        assert not np.isnan(got).any(), pair
        np.testing.assert_array_equal(np.isinf(got), np.isinf(expected), err_msg=str(pair))
        assert (got[np.isinf(got)] > 0).all(), pair
        finite = np.isfinite(expected)
        np.testing.assert_allclose(got[finite], expected[finite], rtol=1e-10, atol=1e-12,
                                   err_msg=str(pair))
        if np.isinf(expected).all():
            infinite.add(pair)
    assert infinite == {("Normal", "Uniform"), ("Normal", "Exponential"),
                        ("Laplace", "Uniform"), ("Laplace", "Exponential"),
                        ("Gumbel", "Exponential"), ("Gumbel", "Uniform"),
                        ("Exponential", "Uniform")}
    assert np.isinf(outs["Uniform", "Exponential"].numpy()).tolist() == [False, True, False]
    assert np.isinf(outs["Uniform", "Uniform"].numpy()).tolist() == [False, True, True]


def test_cross_family_gradients_against_differences():
    """The gradients of the finite cross-family KLs with respect to every parameter of
    p and q equal central differences of the KL along a random direction (batch
    elements with a finite KL)."""
    rng, h = np.random.default_rng(2), 1e-6
    results = []
    for p_name, q_name in CROSS:
        params = [np.asarray(a, dtype=np.float64)
                  for a in PARAMS[p_name][0] + PARAMS[q_name][1]]
        n_p = len(PARAMS[p_name][0])

        def kl(values, n_p=n_p, p_name=p_name, q_name=q_name):
            return D.kl_divergence(_build(D, p_name, values[:n_p]),
                                   _build(D, q_name, values[n_p:]))
        ours = [f64(a).requires_grad_() for a in params]
        value = kl(ours)
        finite = nv.isfinite(value)
        grads = nv.autograd.grad(nv.where(finite, value, 0.0).sum(), ours)
        directions = [rng.standard_normal(a.shape) for a in params]
        slopes = []
        for i, d in enumerate(directions):
            for sign in (1, -1):
                moved = [f64(a + sign * h * d) if j == i else f64(a)
                         for j, a in enumerate(params)]
                slopes.append(nv.where(finite, kl(moved), 0.0).sum())
        results.append((grads, directions, slopes))
    nv.realize(*[t for grads, _, slopes in results for t in (*grads, *slopes)])
    for (p_name, q_name), (grads, directions, slopes) in zip(CROSS, results):
        for i, (g, d) in enumerate(zip(grads, directions)):
            slope = (slopes[2 * i].item() - slopes[2 * i + 1].item()) / (2 * h)
            np.testing.assert_allclose((g.numpy() * d).sum(), slope, rtol=1e-6, atol=1e-7,
                                       err_msg=f"{p_name} -> {q_name}: parameter {i}")
