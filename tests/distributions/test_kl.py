"""``kl_divergence`` for every registered pair against the definition evaluated
numerically here (``scipy.integrate.quad`` of ``p log(p / q)``, or the sum over the
support), including the infinite and zero cases; the dispatch of ``register_kl`` (most
specific pair, ambiguity warning) and the error for a pair without a closed form."""
import math

import numpy as np
import pytest
import scipy.stats as st
from scipy.integrate import quad

import nova as nv
import nova.distributions as D


def f64(a):
    return nv.tensor(np.asarray(a, dtype=np.float64), dtype=nv.float64)


def _kl_quad(p, q, lo=-np.inf, hi=np.inf):
    """KL(p || q) of two frozen scipy distributions by quadrature."""
    def integrand(x):
        lp = p.logpdf(x)
        return 0.0 if not np.isfinite(lp) else math.exp(lp) * (lp - q.logpdf(x))
    return quad(integrand, lo, hi, limit=200, epsabs=1e-13, epsrel=1e-11)[0]


# name -> (nova p, nova q, [(scipy p, scipy q, (lo, hi)) per batch element])
A1, A2 = np.array([0.3, -1.0]), np.array([0.8, 1.7])
B1, B2 = np.array([-0.4, 0.5]), np.array([1.3, 0.6])
CONTINUOUS = {
    "Normal": (D.Normal(f64(A1), f64(A2)), D.Normal(f64(B1), f64(B2)),
               [(st.norm(a, b), st.norm(c, d), (-40, 40))
                for a, b, c, d in zip(A1, A2, B1, B2)]),
    "Laplace": (D.Laplace(f64(A1), f64(A2)), D.Laplace(f64(B1), f64(B2)),
                [(st.laplace(a, b), st.laplace(c, d), (-80, 80))
                 for a, b, c, d in zip(A1, A2, B1, B2)]),
    "Cauchy": (D.Cauchy(f64(A1), f64(A2)), D.Cauchy(f64(B1), f64(B2)),
               [(st.cauchy(a, b), st.cauchy(c, d), (-np.inf, np.inf))
                for a, b, c, d in zip(A1, A2, B1, B2)]),
    "Gumbel": (D.Gumbel(f64(A1), f64(A2)), D.Gumbel(f64(B1), f64(B2)),
               [(st.gumbel_r(a, b), st.gumbel_r(c, d), (-30, 80))
                for a, b, c, d in zip(A1, A2, B1, B2)]),
    "Exponential": (D.Exponential(f64(A2)), D.Exponential(f64(B2)),
                    [(st.expon(scale=1 / b), st.expon(scale=1 / d), (0, 200))
                     for b, d in zip(A2, B2)]),
    "LogNormal": (D.LogNormal(f64(A1), f64(A2)), D.LogNormal(f64(B1), f64(B2)),
                  [(st.lognorm(b, scale=np.exp(a)), st.lognorm(d, scale=np.exp(c)), (0, np.inf))
                   for a, b, c, d in zip(A1, A2, B1, B2)]),
    # q contains p: finite; the second pair does not: infinite
    "Uniform": (D.Uniform(f64([0.0, 0.0]), f64([1.0, 2.0])),
                D.Uniform(f64([-1.0, 0.5]), f64([3.0, 3.0])),
                [(st.uniform(0, 1), st.uniform(-1, 4), (0, 1)), None]),
}


def test_kl_against_the_definition():
    p_cat = np.array([[0.2, 0.3, 0.5], [0.0, 0.4, 0.6], [0.5, 0.5, 0.0]])
    q_cat = np.array([[0.4, 0.4, 0.2], [0.3, 0.3, 0.4], [0.5, 0.0, 0.5]])
    p_b, q_b = np.array([0.2, 0.0, 1.0, 0.3]), np.array([0.6, 0.5, 0.5, 0.0])
    ind_p = D.Independent(D.Normal(f64(np.stack([A1, B1])), f64(np.stack([A2, B2]))), 1)
    ind_q = D.Independent(D.Normal(f64(np.stack([B1, A1])), f64(np.stack([B2, A2]))), 1)
    outs = {name: D.kl_divergence(p, q) for name, (p, q, _) in CONTINUOUS.items()}
    outs["Categorical"] = D.kl_divergence(D.Categorical(f64(p_cat)), D.Categorical(f64(q_cat)))
    with np.errstate(divide="ignore"):
        q_logits = f64(np.log(q_cat))     # -inf where q is 0
    outs["OneHot"] = D.kl_divergence(D.OneHotCategorical(f64(p_cat)),
                                     D.OneHotCategorical(logits=q_logits))
    outs["Bernoulli"] = D.kl_divergence(D.Bernoulli(f64(p_b)), D.Bernoulli(f64(q_b)))
    outs["Independent"] = D.kl_divergence(ind_p, ind_q)
    outs["self"] = D.kl_divergence(CONTINUOUS["Normal"][0], CONTINUOUS["Normal"][0])
    nv.realize(*outs.values())
    for name, (_, _, refs) in CONTINUOUS.items():
        got = outs[name].numpy()
        assert got.shape == (2,) and got.dtype == np.float64, name
        for j, ref in enumerate(refs):
            if ref is None:
                assert got[j] == math.inf, name
                continue
            sp, sq, (lo, hi) = ref
            assert got[j] == pytest.approx(_kl_quad(sp, sq, lo, hi), rel=1e-8, abs=1e-12), name
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(p_cat == 0, 0.0, p_cat * np.log(p_cat / q_cat))
    expected = terms.sum(-1)
    np.testing.assert_allclose(outs["Categorical"].numpy()[:2], expected[:2], rtol=1e-14)
    assert outs["Categorical"].numpy()[2] == math.inf      # q(1) = 0 < p(1)
    np.testing.assert_allclose(outs["OneHot"].numpy()[:2], expected[:2], rtol=1e-14)
    assert outs["OneHot"].numpy()[2] == math.inf
    kl_b = outs["Bernoulli"].numpy()
    np.testing.assert_allclose(kl_b[:3], [0.2 * np.log(0.2 / 0.6) + 0.8 * np.log(0.8 / 0.4),
                                          np.log(2), np.log(2)], rtol=1e-14)
    assert kl_b[3] == math.inf
    normal_kl = [_kl_quad(st.norm(a, b), st.norm(c, d), -40, 40)
                 for a, b, c, d in zip(np.stack([A1, B1]).ravel(), np.stack([A2, B2]).ravel(),
                                       np.stack([B1, A1]).ravel(), np.stack([B2, A2]).ravel())]
    np.testing.assert_allclose(outs["Independent"].numpy(),
                               np.reshape(normal_kl, (2, 2)).sum(-1), rtol=1e-8)
    np.testing.assert_array_equal(outs["self"].numpy(), [0.0, 0.0])


def test_dispatch_and_errors():
    n, cauchy = D.Normal(0.0, 1.0), D.Cauchy(0.0, 1.0)
    with pytest.raises(NotImplementedError,
                       match="No KL\\(p \\|\\| q\\) is implemented for p type Normal and q "
                             "type Cauchy"):
        D.kl_divergence(n, cauchy)
    with pytest.raises(NotImplementedError, match="equal transforms"):
        D.kl_divergence(D.LogNormal(0.0, 1.0), D.Gumbel(0.0, 1.0))
    with pytest.raises(NotImplementedError, match="same reinterpreted_batch_ndims"):
        base = D.Normal(f64(np.zeros((2, 2))), 1.0)
        D.kl_divergence(D.Independent(base, 1), D.Independent(base, 2))
    with pytest.raises(TypeError, match="Distribution subclass"):
        D.register_kl(D.Normal, int)

    class Wide(D.Normal):
        pass

    class Narrow(D.Normal):
        pass

    marker = nv.tensor(7.0)
    try:
        D.register_kl(Wide, D.Normal)(lambda p, q: marker)
        assert D.kl_divergence(Wide(0.0, 1.0), n) is marker      # the most specific pair
        assert D.kl_divergence(n, Wide(0.0, 1.0)) is not marker  # (Normal, Normal)
        D.register_kl(D.Normal, Narrow)(lambda p, q: marker)
        with pytest.warns(RuntimeWarning, match="Ambiguous kl_divergence\\(Wide, Narrow\\)"):
            D.kl_divergence(Wide(0.0, 1.0), Narrow(0.0, 1.0))
    finally:
        for key in ((Wide, D.Normal), (D.Normal, Narrow)):
            D.kl._KL_REGISTRY.pop(key, None)
        D.kl._KL_MEMOIZE.clear()
