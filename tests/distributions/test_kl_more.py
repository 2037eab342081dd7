"""``kl_divergence`` for the pairs torch.distributions registers that involve Gamma,
Chi2, Beta, Dirichlet, Pareto, HalfNormal, Poisson, Binomial and Geometric, in float64:
each value against the definition ``E_p[log p(x) - log q(x)]`` (scipy densities,
integrated by ``scipy.integrate.quad``, exact sums for the counting families, the
marginals' ``E[log x_i]`` by quad for Dirichlet), infinite exactly where
p's support leaves q's (and where PyTorch's formulas say so: Pareto's heavy tails,
Binomial with fewer trials in q); gradients of the finite cross-family ones against
central differences; dispatch (Chi2 is a Gamma, HalfNormal and Pareto beat
TransformedDistribution). Where torch is installed, the registered pairs and the
values are also compared with torch's.

The interpreter realizes these small graphs."""
import numpy as np
import pytest
from scipy import integrate, special, stats

import nova as nv
import nova.distributions as D


@pytest.fixture(autouse=True)
def interpreted():
    with nv.engine("interp"):
        yield


def f64(a):
    return nv.tensor(np.asarray(a, dtype=np.float64), dtype=nv.float64)


# two parameter sets per family (p's and q's), batch shape (3,)
PARAMS = {
    "Normal": ([[0.3, -1.0, 0.6], [0.8, 1.7, 0.4]], [[-0.4, 0.5, 0.7], [1.3, 0.6, 0.9]]),
    "Laplace": ([[0.4, -0.6, 1.5], [0.7, 1.2, 0.3]], [[-0.2, 0.4, 0.9], [1.1, 0.5, 2.0]]),
    "Gumbel": ([[0.2, -0.5, 1.0], [0.9, 1.4, 0.5]], [[-0.3, 0.6, 0.8], [1.2, 0.7, 1.5]]),
    "Exponential": ([[0.5, 1.5, 3.0]], [[2.0, 0.7, 1.1]]),
    # p's third reaches below 0 (infinite against Gamma, Beta, Pareto); q's third does
    # not cover [0, 1] (infinite from Beta)
    "Uniform": ([[0.2, 0.1, -0.5], [0.7, 1.0, 0.5]], [[-1.0, 0.0, 0.2], [1.5, 1.0, 0.8]]),
    "Bernoulli": ([[0.2, 0.5, 0.9]], [[0.6, 0.3, 0.1]]),
    "Gamma": ([[0.7, 2.0, 5.0], [1.5, 0.5, 2.0]], [[1.2, 3.0, 0.8], [1.0, 2.0, 0.7]]),
    "Chi2": ([[1.4, 4.0, 9.0]], [[2.0, 3.0, 5.0]]),
    "Beta": ([[0.8, 2.0, 5.0], [1.5, 0.9, 2.0]], [[1.2, 3.0, 0.9], [2.0, 0.7, 1.5]]),
    # (scale, alpha): p's third has alpha <= 1 (infinite against Exponential, Gamma,
    # Normal), its second a scale below q's (infinite against Pareto)
    "Pareto": ([[1.0, 2.0, 0.5], [3.0, 2.5, 0.9]], [[0.8, 2.5, 0.5], [2.0, 1.5, 3.0]]),
    "HalfNormal": ([[0.5, 1.0, 2.0]], [[1.0, 0.3, 2.5]]),
    "Poisson": ([[0.5, 3.0, 10.0]], [[1.0, 2.0, 12.0]]),
    # p's second has more trials than q's: infinite
    "Binomial": ([[10.0, 10.0, 12.0], [0.3, 0.6, 0.1]], [[10.0, 8.0, 12.0], [0.5, 0.4, 0.2]]),
    "Geometric": ([[0.3, 0.6, 0.9]], [[0.5, 0.2, 0.7]]),
    "Dirichlet": ([[[1.5, 2.0, 3.0], [2.0, 1.2, 1.1], [4.0, 2.0, 1.5]]],
                  [[[1.2, 1.2, 2.0], [3.0, 2.0, 2.5], [1.1, 1.6, 2.5]]]),
}

# the pairs torch.distributions (2.x) registers that involve the families added with
# Gamma (Chi2 dispatches as Gamma), finite or not
PAIRS = [
    ("Bernoulli", "Poisson"), ("Beta", "Beta"), ("Beta", "Exponential"), ("Beta", "Gamma"),
    ("Beta", "Normal"), ("Beta", "Pareto"), ("Beta", "Uniform"), ("Binomial", "Binomial"),
    ("Dirichlet", "Dirichlet"), ("Exponential", "Beta"), ("Exponential", "Gamma"),
    ("Exponential", "Pareto"), ("Gamma", "Beta"), ("Gamma", "Exponential"),
    ("Gamma", "Gamma"), ("Gamma", "Gumbel"), ("Gamma", "Normal"), ("Gamma", "Pareto"),
    ("Gamma", "Uniform"), ("Geometric", "Geometric"), ("Gumbel", "Beta"),
    ("Gumbel", "Gamma"), ("Gumbel", "Pareto"), ("HalfNormal", "HalfNormal"),
    ("Laplace", "Beta"), ("Laplace", "Gamma"), ("Laplace", "Pareto"), ("Normal", "Beta"),
    ("Normal", "Gamma"), ("Normal", "Pareto"), ("Pareto", "Beta"),
    ("Pareto", "Exponential"), ("Pareto", "Gamma"), ("Pareto", "Normal"),
    ("Pareto", "Pareto"), ("Pareto", "Uniform"), ("Poisson", "Bernoulli"),
    ("Poisson", "Binomial"), ("Poisson", "Poisson"), ("Uniform", "Beta"),
    ("Uniform", "Gamma"), ("Uniform", "Pareto"),
]


def _build(lib, name, params):
    return getattr(lib, name)(*params)


def _scipy(name, params, i):
    """Batch element ``i`` of ``name`` as a frozen scipy distribution."""
    a = [np.asarray(p, dtype=np.float64)[..., i] if name != "Dirichlet" else
         np.asarray(p, dtype=np.float64)[i] for p in params]
    return {
        "Normal": lambda: stats.norm(a[0], a[1]),
        "Laplace": lambda: stats.laplace(a[0], a[1]),
        "Gumbel": lambda: stats.gumbel_r(a[0], a[1]),
        "Exponential": lambda: stats.expon(scale=1 / a[0]),
        "Uniform": lambda: stats.uniform(a[0], a[1] - a[0]),
        "Bernoulli": lambda: stats.bernoulli(a[0]),
        "Gamma": lambda: stats.gamma(a[0], scale=1 / a[1]),
        "Chi2": lambda: stats.chi2(a[0]),
        "Beta": lambda: stats.beta(a[0], a[1]),
        "Pareto": lambda: stats.pareto(a[1], scale=a[0]),
        "HalfNormal": lambda: stats.halfnorm(scale=a[0]),
        "Poisson": lambda: stats.poisson(a[0]),
        "Binomial": lambda: stats.binom(int(a[0]), a[1]),
        "Geometric": lambda: stats.geom(a[0], loc=-1),
        "Dirichlet": lambda: stats.dirichlet(a[0]),
    }[name]()


DISCRETE = {"Bernoulli", "Poisson", "Binomial", "Geometric"}


def _kl_continuous(p, q):
    """``int p (log p - log q)`` over p's support by ``quad``, split at p's median and
    quartiles (each piece then holds p's mass on one scale), infinite where p's support
    leaves q's."""
    (lo, hi), (q_lo, q_hi) = p.support(), q.support()
    if lo < q_lo or hi > q_hi:
        return np.inf

    def integrand(x):
        density = p.pdf(x)
        return 0.0 if density == 0 else density * (p.logpdf(x) - q.logpdf(x))
    cuts = [lo, *p.ppf([0.25, 0.5, 0.75]), hi]
    return sum(integrate.quad(integrand, a, b, epsabs=1e-12, epsrel=1e-10, limit=100)[0]
               for a, b in zip(cuts[:-1], cuts[1:]))


def _kl_discrete(p, q):
    k = np.arange(0, 2000)
    pk = p.pmf(k)
    with np.errstate(all="ignore"):
        terms = np.where(pk > 0, pk * (p.logpmf(k) - q.logpmf(k)), 0.0)
    return terms.sum()


def _kl_dirichlet(alpha, beta):
    """``E_p[log p(x) - log q(x)]`` for Dirichlets: the log-ratio of the densities is
    ``log(B(beta) / B(alpha)) + sum (alpha_i - beta_i) log x_i``, and each ``E_p[log
    x_i]`` is integrated over its Beta(alpha_i, sum - alpha_i) marginal by quad."""
    def log_b(a):
        return special.gammaln(a).sum() - special.gammaln(a.sum())
    total = alpha.sum()
    marginals = [stats.beta(a, total - a) for a in alpha]
    means = [integrate.quad(lambda x, m=m: np.log(x) * m.pdf(x), 0, 1, epsabs=1e-13,
                            epsrel=1e-12, limit=200)[0] for m in marginals]
    return log_b(beta) - log_b(alpha) + ((alpha - beta) * np.array(means)).sum()


# where PyTorch's formulas are infinite although p's support stays inside q's (Pareto's
# heavy tail against light-tailed q: the integral diverges)
DIVERGENT = {("Pareto", "Exponential"): [2], ("Pareto", "Gamma"): [2],
             ("Pareto", "Normal"): [2]}


def _reference(p_name, q_name):
    values = []
    for i in range(3):
        if i in DIVERGENT.get((p_name, q_name), []):
            values.append(np.inf)
            continue
        p = _scipy(p_name, PARAMS[p_name][0], i)
        q = _scipy(q_name, PARAMS[q_name][1], i)
        if p_name == "Dirichlet":
            values.append(_kl_dirichlet(p.alpha, q.alpha))
        elif p_name in DISCRETE:
            support_q = q.support()
            if p.support()[1] > support_q[1]:
                values.append(np.inf)        # Poisson -> Bernoulli, Binomial
            else:
                values.append(_kl_discrete(p, q))
        else:
            values.append(_kl_continuous(p, q))
    return np.array(values)


def test_the_pairs_are_registered():
    ours = {(p.__name__, q.__name__) for p, q in D.kl._KL_REGISTRY}
    assert [pq for pq in PAIRS if pq not in ours] == []
    assert D.kl._dispatch_kl(D.Chi2, D.Gamma) is D.kl._kl_gamma_gamma
    assert D.kl._dispatch_kl(D.HalfNormal, D.HalfNormal) is D.kl._kl_halfnormal_halfnormal
    assert D.kl._dispatch_kl(D.Pareto, D.Pareto) is D.kl._kl_pareto_pareto


@pytest.mark.filterwarnings("ignore::nova.runtime.cache.RecompileWarning")
def test_kl_values_against_the_definition():
    """Every pair's KL for a batch of three: the definition's value (rtol 1e-8), and
    infinite exactly where p's support leaves q's or (Pareto) the integral diverges.
    (A step per pair: these graphs, lgamma and digamma included, are large, and small
    steps go faster through the compiler's front end than one big one.)"""
    for pair in PAIRS + [("Chi2", "Chi2"), ("Chi2", "Exponential")]:
        p_name, q_name = pair
        p = _build(D, p_name, [f64(a) for a in PARAMS[p_name][0]])
        q = _build(D, q_name, [f64(a) for a in PARAMS[q_name][1]])
        got = D.kl_divergence(p, q).numpy()
        expected = _reference(*pair)
        assert got.shape == (3,) and got.dtype == np.float64, pair
        assert not np.isnan(got).any(), pair
        np.testing.assert_array_equal(np.isinf(got), np.isinf(expected), err_msg=str(pair))
        assert (got[np.isinf(got)] > 0).all(), pair
        finite = np.isfinite(expected)
        np.testing.assert_allclose(got[finite], expected[finite], rtol=1e-8, atol=1e-10,
                                   err_msg=str(pair))


def test_binomial_with_more_trials_in_q_is_refused():
    p = D.Binomial(f64([5.0, 10.0]), f64([0.5, 0.5]))
    q = D.Binomial(f64([6.0, 10.0]), f64([0.5, 0.5]))
    with pytest.raises(NotImplementedError, match="q.total_count > p.total_count"):
        D.kl_divergence(p, q)


# (a few: with lgamma and digamma, each of these graphs has thousands of nodes)
CROSS = [("Exponential", "Gamma"), ("Pareto", "Normal"), ("Uniform", "Beta"),
         ("Uniform", "Pareto"), ("Bernoulli", "Poisson")]
# p's parameters where PARAMS's are infinite somewhere (a gradient through the formula
# of an infinite element is NaN, in PyTorch too): every element finite
FINITE_P = {("Pareto", "Normal"): [[1.0, 2.0, 0.5], [3.0, 2.5, 4.0]],
            ("Uniform", "Beta"): [[0.2, 0.1, 0.3], [0.7, 0.9, 0.6]],
            ("Uniform", "Pareto"): [[1.0, 3.0, 0.6], [2.0, 3.5, 0.9]]}


def test_cross_family_gradients_against_differences():
    """The gradient of each finite cross-family KL, with respect to all the parameters
    of p and q at once, along a random direction equals the central difference of the
    KL along it (one direction: these graphs are large, lgamma and digamma included)."""
    rng, h = np.random.default_rng(3), 1e-6
    results = []
    for p_name, q_name in CROSS:
        p_params = FINITE_P.get((p_name, q_name), PARAMS[p_name][0])
        params = [np.asarray(a, dtype=np.float64) for a in p_params + PARAMS[q_name][1]]
        n_p = len(p_params)

        def kl(values, n_p=n_p, p_name=p_name, q_name=q_name):
            return D.kl_divergence(_build(D, p_name, values[:n_p]),
                                   _build(D, q_name, values[n_p:]))
        ours = [f64(a).requires_grad_() for a in params]
        value = kl(ours)
        grads = nv.autograd.grad(value.sum(), ours)
        directions = [rng.standard_normal(a.shape) for a in params]
        ahead = kl([f64(a + h * d) for a, d in zip(params, directions)]).sum()
        behind = kl([f64(a - h * d) for a, d in zip(params, directions)]).sum()
        results.append((value, grads, directions, ahead, behind))
    nv.realize(*[t for value, grads, _, ahead, behind in results
                 for t in (value, *grads, ahead, behind)])
    for (p_name, q_name), (value, grads, directions, ahead, behind) in zip(CROSS, results):
        assert np.isfinite(value.numpy()).all(), (p_name, q_name)
        along = sum((g.numpy() * d).sum() for g, d in zip(grads, directions))
        slope = (ahead.item() - behind.item()) / (2 * h)
        np.testing.assert_allclose(along, slope, rtol=1e-6, atol=1e-7,
                                   err_msg=f"{p_name} -> {q_name}")


def test_gamma_gamma_closed_form_by_hand():
    """KL(Gamma(a, b) || Gamma(c, d)) written out with scipy's special functions."""
    (a, b), (c, d) = [np.asarray(x) for x in PARAMS["Gamma"][0]], \
        [np.asarray(x) for x in PARAMS["Gamma"][1]]
    want = ((a - c) * special.digamma(a) - special.gammaln(a) + special.gammaln(c)
            + c * (np.log(b) - np.log(d)) + a * (d - b) / b)
    got = D.kl_divergence(D.Gamma(f64(a), f64(b)), D.Gamma(f64(c), f64(d))).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-13)


def test_against_torch():
    """Where torch is installed: torch registers exactly these pairs among the families
    both have (with the ones already tested in test_kl_pairs.py), and the values
    equal torch's."""
    torch = pytest.importorskip("torch")
    from torch.distributions.kl import _KL_REGISTRY
    TD = torch.distributions
    theirs = {(p.__name__, q.__name__) for p, q in _KL_REGISTRY
              if hasattr(D, p.__name__) and hasattr(D, q.__name__)}
    ours = {(p.__name__, q.__name__) for p, q in D.kl._KL_REGISTRY}
    assert theirs == ours
    new_families = {"Gamma", "Beta", "Dirichlet", "Pareto", "HalfNormal", "Poisson",
                    "Binomial", "Geometric"}
    # (the ContinuousBernoulli pairs are tested in test_more_multivariate.py)
    assert {pq for pq in theirs if set(pq) & new_families
            and "ContinuousBernoulli" not in pq} == set(PAIRS)
    t64 = lambda a: torch.tensor(np.asarray(a, dtype=np.float64))  # noqa: E731
    ours_kl = [D.kl_divergence(_build(D, p_name, [f64(a) for a in PARAMS[p_name][0]]),
                               _build(D, q_name, [f64(a) for a in PARAMS[q_name][1]]))
               for p_name, q_name in PAIRS]
    nv.realize(*ours_kl)
    for (p_name, q_name), kl in zip(PAIRS, ours_kl):
        theirs_kl = TD.kl_divergence(_build(TD, p_name, [t64(a) for a in PARAMS[p_name][0]]),
                                     _build(TD, q_name, [t64(a) for a in PARAMS[q_name][1]]))
        np.testing.assert_allclose(kl.numpy(), theirs_kl.numpy(), rtol=1e-12, atol=1e-14,
                                   err_msg=f"{p_name} -> {q_name}")
