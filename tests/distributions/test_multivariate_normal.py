"""MultivariateNormal from ``scale_tril`` against scipy.stats.multivariate_normal in
float64 (log_prob with broadcast batches, entropy, covariance and precision, variance),
KL against the closed form in numpy, the same distribution built from its covariance
and its precision (through ``nv.linalg.cholesky``), their validation errors, sampling
moments and gradients of log_prob and rsample by finite differences."""
import math

import numpy as np
import pytest
import scipy.stats as st

import nova as nv
import nova.distributions as D
from nova.autograd.gradcheck import gradcheck

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
            d.variance, shared.log_prob(f64(x)),
            nv.linalg.solve_triangular(f64(lower), f64(b), upper=False),
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


def test_covariance_and_precision_forms():
    """``covariance_matrix=`` and ``precision_matrix=`` give the distribution that
    ``scale_tril=`` of the covariance's Cholesky factor gives (log_prob, entropy, the
    three matrices against numpy), batched; their gradients reach the matrix; a
    covariance the host knows is validated (symmetric, positive-definite) before the
    factorization, and a pending one that is not positive-definite raises LinAlgError."""
    covs = np.stack([L @ L.T for L in (L1, L2)])
    precs = np.linalg.inv(covs)
    x = np.random.default_rng(3).normal(size=(4, 2, 3))
    by_cov = D.MultivariateNormal(f64(LOC), covariance_matrix=f64(covs))
    by_prec = D.MultivariateNormal(f64(LOC), precision_matrix=f64(precs))
    assert "covariance_matrix" in by_cov.__dict__ and "scale_tril" not in by_cov.__dict__
    outs = [by_cov.log_prob(f64(x)), by_prec.log_prob(f64(x)), by_cov.entropy(),
            by_prec.entropy(), by_cov.scale_tril, by_prec.scale_tril, by_cov.precision_matrix,
            by_prec.covariance_matrix, by_cov.expand((5, 2)).covariance_matrix]
    nv.realize(*outs)
    refs = [st.multivariate_normal(LOC[j], covs[j]) for j in range(2)]
    logpdf = np.stack([refs[j].logpdf(x[:, j]) for j in range(2)], -1)
    np.testing.assert_allclose(outs[0].numpy(), logpdf, rtol=1e-13)
    np.testing.assert_allclose(outs[1].numpy(), logpdf, rtol=1e-12)
    np.testing.assert_allclose(outs[2].numpy(), [r.entropy() for r in refs], rtol=1e-14)
    np.testing.assert_allclose(outs[3].numpy(), [r.entropy() for r in refs], rtol=1e-13)
    np.testing.assert_allclose(outs[4].numpy(), np.stack([L1, L2]), rtol=1e-14, atol=1e-15)
    np.testing.assert_allclose(outs[5].numpy(), np.stack([L1, L2]), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(outs[6].numpy(), precs, rtol=1e-12)
    np.testing.assert_allclose(outs[7].numpy(), covs, rtol=1e-12)
    np.testing.assert_allclose(outs[8].numpy(), np.broadcast_to(covs, (5, 2, 3, 3)))

    def fn(cov):
        m = D.MultivariateNormal(f64(LOC[0]), covariance_matrix=cov + cov.mT,
                                 validate_args=False)
        return m.log_prob(f64(x[:, 0]))

    assert gradcheck(fn, [covs[0] / 2])

    bad = covs[0].copy()
    bad[0, 1] += 0.5                                   # not symmetric
    with pytest.raises(ValueError, match="covariance_matrix.*PositiveDefinite"):
        D.MultivariateNormal(f64(LOC[0]), covariance_matrix=f64(bad))
    indefinite = np.diag([1.0, -2.0, 3.0])
    with pytest.raises(ValueError, match="precision_matrix.*PositiveDefinite"):
        D.MultivariateNormal(f64(LOC[0]), precision_matrix=f64(indefinite))
    pending = f64(indefinite) * 1.0                    # not known on the host: not validated
    with pytest.raises(nv.linalg.LinAlgError, match="leading minor of order 2"):
        D.MultivariateNormal(f64(LOC[0]), covariance_matrix=pending)
    with pytest.raises(ValueError, match="Exactly one of"):
        D.MultivariateNormal(f64(LOC[0]), covariance_matrix=f64(covs[0]), scale_tril=f64(L1))
    with pytest.raises(ValueError, match="covariance_matrix must be a square matrix"):
        D.MultivariateNormal(f64(LOC[0]), covariance_matrix=f64(covs[0][:2]))
