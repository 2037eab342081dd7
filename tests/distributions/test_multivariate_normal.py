"""MultivariateNormal from ``scale_tril`` against scipy.stats.multivariate_normal in
float64 (log_prob with broadcast batches, entropy, covariance and precision, variance),
the blocked triangular solve, KL against the closed form in numpy, sampling moments and
gradients of log_prob and rsample by finite differences."""
import math

import numpy as np
import scipy.stats as st

import nova as nv
import nova.distributions as D
from nova.autograd.gradcheck import gradcheck
from nova.distributions.multivariate_normal import solve_lower

L1 = np.array([[1.2, 0.0, 0.0], [0.4, 0.8, 0.0], [-0.3, 0.5, 1.5]])
L2 = np.array([[0.6, 0.0, 0.0], [0.2, 1.1, 0.0], [0.7, -0.4, 0.9]])
LOC = np.array([[0.1, -0.5, 2.0], [1.0, 0.0, -1.0]])


def f64(a):
    return nv.tensor(np.asarray(a, dtype=np.float64), dtype=nv.float64)


def test_values_against_scipy():
    scale_tril = np.stack([L1, L2])
    d = D.MultivariateNormal(f64(LOC), scale_tril=f64(scale_tril))
    shared = D.MultivariateNormal(f64(LOC), scale_tril=f64(L1))    # one factor, batch of 2
    x = np.random.default_rng(0).normal(size=(4, 2, 3))
    lower = np.tril(np.random.default_rng(1).normal(size=(5, 5))) + 3 * np.eye(5)
    b = np.random.default_rng(2).normal(size=(5, 2))
    q = D.MultivariateNormal(f64(LOC[::-1]), scale_tril=f64(scale_tril[::-1]))
    outs = [d.log_prob(f64(x)), d.entropy(), d.covariance_matrix, d.precision_matrix,
            d.variance, shared.log_prob(f64(x)), solve_lower(f64(lower), f64(b)),
            D.kl_divergence(d, q), d.mean, d.mode]
    nv.realize(*outs)
    got = [o.numpy() for o in outs]
    covs = [L @ L.T for L in (L1, L2)]
    refs = [st.multivariate_normal(LOC[j], covs[j]) for j in range(2)]
    np.testing.assert_allclose(got[0], np.stack([refs[j].logpdf(x[:, j]) for j in range(2)], -1),
                               rtol=1e-13)
    np.testing.assert_allclose(got[1], [r.entropy() for r in refs], rtol=1e-14)
    np.testing.assert_allclose(got[2], np.stack(covs), rtol=1e-15)
    np.testing.assert_allclose(got[3], np.linalg.inv(np.stack(covs)), rtol=1e-13)
    np.testing.assert_allclose(got[4], np.stack([np.diag(c) for c in covs]), rtol=1e-15)
    shared_ref = [st.multivariate_normal(LOC[j], covs[0]) for j in range(2)]
    np.testing.assert_allclose(got[5], np.stack([shared_ref[j].logpdf(x[:, j])
                                                 for j in range(2)], -1), rtol=1e-13)
    np.testing.assert_allclose(got[6], np.linalg.solve(lower, b), rtol=1e-13)

    def kl(m0, s0, m1, s1):   # KL(N0 || N1), the textbook closed form
        inv1 = np.linalg.inv(s1)
        diff = m1 - m0
        return 0.5 * (np.trace(inv1 @ s0) + diff @ inv1 @ diff - 3
                      + math.log(np.linalg.det(s1) / np.linalg.det(s0)))

    np.testing.assert_allclose(got[7], [kl(LOC[0], covs[0], LOC[1], covs[1]),
                                        kl(LOC[1], covs[1], LOC[0], covs[0])], rtol=1e-13)
    np.testing.assert_array_equal(got[8], LOC)
    np.testing.assert_array_equal(got[9], LOC)
    assert (d.batch_shape, d.event_shape) == ((2,), (3,))
    assert d.sample((5,)).shape == (5, 2, 3) and d.expand((4, 2)).sample().shape == (4, 2, 3)
    assert D.MultivariateNormal(f64(LOC[0]), scale_tril=f64(scale_tril)).batch_shape == (2,)


def test_sampling_moments_and_gradients():
    """The sample mean and covariance of 20000 draws within a few standard errors of
    ``loc`` and ``L L^T``; gradients of log_prob and rsample (fixed seed)."""
    n = 20000
    d = D.MultivariateNormal(f64(LOC[0]), scale_tril=f64(L1))
    nv.manual_seed(2)
    s = d.sample((n,))
    s_np = s.numpy()
    cov = L1 @ L1.T
    se = np.sqrt(np.diag(cov) / n)
    assert (np.abs(s_np.mean(0) - LOC[0]) < 5 * se).all()
    # the standard error of a sample covariance entry is sqrt((s_ii s_jj + s_ij^2) / n)
    se_cov = np.sqrt((np.outer(np.diag(cov), np.diag(cov)) + cov ** 2) / n)
    assert (np.abs(np.cov(s_np.T) - cov) < 5 * se_cov).all()
    x = f64([[0.3, -0.2, 1.0], [1.5, 0.5, -0.5]])

    def fn(loc, tril):
        nv.manual_seed(4)
        m = D.MultivariateNormal(loc, scale_tril=tril, validate_args=False)
        return m.log_prob(x), m.rsample((2,)), m.entropy()

    assert gradcheck(fn, [LOC[0], L1])
