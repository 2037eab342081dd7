"""The matrix and vector distributions PyTorch has that Nova lacked (issue #22):
LowRankMultivariateNormal, Wishart, LKJCholesky, with CorrCholeskyTransform and
``constraints.corr_cholesky``; the ``ExponentialFamily`` base (entropy and KL by
Bregman divergences); the KL pairs PyTorch registers for the new families; and the
module names ``torch.distributions`` has (``studentT``, ``relaxed_categorical``, ...).
References are scipy.stats or closed forms written here, in float64.

The interpreter realizes these small graphs."""
import importlib

import numpy as np
import pytest
from scipy import integrate, special, stats

import nova as nv
import nova.distributions as D
from nova.autograd.gradcheck import gradcheck


@pytest.fixture(autouse=True)
def interpreted():
    with nv.engine("interp"):
        yield


def f64(a):
    return nv.tensor(np.asarray(a, dtype=np.float64), dtype=nv.float64)


def ks_ok(samples, cdf):
    return stats.kstest(samples, cdf).pvalue > 1e-3


def test_torch_names():
    """Every class and module name of issue #22 is there, under torch's spelling."""
    for name in ("ContinuousBernoulli", "ExponentialFamily", "FisherSnedecor",
                 "GeneralizedPareto", "InverseGamma", "Kumaraswamy", "LKJCholesky",
                 "LogisticNormal", "LowRankMultivariateNormal",
                 "OneHotCategoricalStraightThrough", "RelaxedBernoulli",
                 "RelaxedOneHotCategorical", "VonMises", "Wishart", "CorrCholeskyTransform"):
        assert name in D.__all__ and isinstance(getattr(D, name), type), name
    assert D.transforms.CorrCholeskyTransform is D.CorrCholeskyTransform
    modules = {"continuous_bernoulli": "ContinuousBernoulli", "exp_family": "ExponentialFamily",
               "fishersnedecor": "FisherSnedecor", "generalized_pareto": "GeneralizedPareto",
               "inverse_gamma": "InverseGamma", "kumaraswamy": "Kumaraswamy",
               "lkj_cholesky": "LKJCholesky", "logistic_normal": "LogisticNormal",
               "lowrank_multivariate_normal": "LowRankMultivariateNormal",
               "relaxed_bernoulli": "RelaxedBernoulli",
               "relaxed_categorical": "RelaxedOneHotCategorical", "studentT": "StudentT",
               "von_mises": "VonMises", "wishart": "Wishart"}
    for module, cls in modules.items():
        assert getattr(importlib.import_module(f"nova.distributions.{module}"), cls) \
            is getattr(D, cls)
        assert getattr(D, module).__name__ == f"nova.distributions.{module}"
    assert D.relaxed_bernoulli.LogitRelaxedBernoulli is not None
    assert D.relaxed_categorical.ExpRelaxedCategorical is not None
    for cls in (D.ContinuousBernoulli, D.Wishart):
        assert issubclass(cls, D.ExponentialFamily)


# ---------------------------------------------------------------- LowRankMultivariateNormal


RNG = np.random.default_rng(0)
LOC = RNG.normal(size=(2, 4))
W = RNG.normal(size=(2, 4, 2))
DIAG = RNG.uniform(0.5, 2.0, size=(2, 4))
COV = W @ np.swapaxes(W, -1, -2) + np.stack([np.diag(d) for d in DIAG])


def test_lowrank_normal_against_scipy():
    d = D.LowRankMultivariateNormal(f64(LOC), f64(W), f64(DIAG))
    assert d.batch_shape == (2,) and d.event_shape == (4,) and d.has_rsample
    x = RNG.normal(size=(3, 2, 4))
    refs = [stats.multivariate_normal(LOC[b], COV[b]) for b in range(2)]
    want = np.stack([refs[b].logpdf(x[:, b]) for b in range(2)], -1)
    np.testing.assert_allclose(d.log_prob(f64(x)).numpy(), want, rtol=1e-12)
    np.testing.assert_allclose(d.entropy().numpy(), [r.entropy() for r in refs], rtol=1e-12)
    np.testing.assert_allclose(d.covariance_matrix.numpy(), COV, rtol=1e-14)
    np.testing.assert_allclose(d.precision_matrix.numpy(), np.linalg.inv(COV), rtol=1e-10,
                               atol=1e-12)
    np.testing.assert_allclose(d.scale_tril.numpy(), np.linalg.cholesky(COV), rtol=1e-12,
                               atol=1e-14)
    np.testing.assert_allclose(d.variance.numpy(), np.diagonal(COV, 0, -2, -1), rtol=1e-14)
    np.testing.assert_array_equal(d.mean.numpy(), LOC)
    np.testing.assert_array_equal(d.mode.numpy(), LOC)
    nv.manual_seed(5)
    s = d.sample((6000,)).numpy()
    for b in range(2):
        np.testing.assert_allclose(np.cov(s[:, b].T), COV[b], atol=0.25)
        np.testing.assert_allclose(s[:, b].mean(0), LOC[b], atol=0.1)


def test_lowrank_normal_rsample_gradient_shapes_and_validation():
    def fn(loc, w, diag):
        nv.manual_seed(4)
        return D.LowRankMultivariateNormal(loc, w, diag).rsample((2,))

    assert gradcheck(fn, [LOC[0], W[0], DIAG[0]])
    shared = D.LowRankMultivariateNormal(f64(LOC), f64(W[0]), f64(DIAG[0]))
    assert shared.batch_shape == (2,) and shared.cov_factor.shape == (2, 4, 2)
    big = shared.expand((3, 2))
    assert big.batch_shape == (3, 2) and big.rsample((5,)).shape == (5, 3, 2, 4)
    assert big.log_prob(f64(np.zeros(4))).shape == (3, 2)
    with pytest.raises(ValueError, match="cov_diag"):
        D.LowRankMultivariateNormal(f64(LOC[0]), f64(W[0]), f64(-DIAG[0]))
    with pytest.raises(ValueError, match="cov_factor"):
        D.LowRankMultivariateNormal(f64(LOC[0]), f64(W[0, :3]), f64(DIAG[0]))
    with pytest.raises(ValueError, match="cov_diag"):
        D.LowRankMultivariateNormal(f64(LOC[0]), f64(W[0]), f64(DIAG[0, :3]))
    with pytest.raises(ValueError, match="one-dimensional"):
        D.LowRankMultivariateNormal(f64(1.0), f64(W[0]), f64(DIAG[0]))
    with pytest.raises(ValueError, match="Incompatible batch shapes"):
        D.LowRankMultivariateNormal(f64(np.zeros((3, 4))), f64(W), f64(DIAG[0]))


def _gaussian_kl(m0, s0, m1, s1):
    k = len(m0)
    inv1 = np.linalg.inv(s1)
    diff = m1 - m0
    return 0.5 * (np.trace(inv1 @ s0) + diff @ inv1 @ diff - k
                  + np.linalg.slogdet(s1)[1] - np.linalg.slogdet(s0)[1])


def test_lowrank_normal_kl_divergences():
    loc2 = RNG.normal(size=4)
    w2 = RNG.normal(size=(4, 3))
    d2 = RNG.uniform(0.5, 2.0, size=4)
    cov2 = w2 @ w2.T + np.diag(d2)
    p = D.LowRankMultivariateNormal(f64(LOC), f64(W), f64(DIAG))
    q = D.LowRankMultivariateNormal(f64(loc2), f64(w2), f64(d2))
    full = D.MultivariateNormal(f64(loc2), covariance_matrix=f64(cov2))
    np.testing.assert_allclose(D.kl_divergence(p, q).numpy(),
                               [_gaussian_kl(LOC[b], COV[b], loc2, cov2) for b in range(2)],
                               rtol=1e-11)
    np.testing.assert_allclose(D.kl_divergence(full, p).numpy(),
                               [_gaussian_kl(loc2, cov2, LOC[b], COV[b]) for b in range(2)],
                               rtol=1e-11)
    np.testing.assert_allclose(D.kl_divergence(p, full).numpy(),
                               [_gaussian_kl(LOC[b], COV[b], loc2, cov2) for b in range(2)],
                               rtol=1e-11)
    other = D.LowRankMultivariateNormal(f64(np.zeros(3)), f64(np.ones((3, 1))), f64(np.ones(3)))
    with pytest.raises(ValueError, match="event shapes"):
        D.kl_divergence(p, other)


# ---------------------------------------------------------------- CorrCholeskyTransform


def test_corr_cholesky_transform():
    t = D.CorrCholeskyTransform()
    assert t.bijective and t.domain.event_dim == 1 and t.codomain is D.constraints.corr_cholesky
    x = np.array([[0.3, -1.2, 0.8, 2.0, -0.1, 0.5], [0.0, 0.1, -0.2, 0.3, -3.0, 1.0]])
    y = t(f64(x))
    ys = y.numpy()
    assert ys.shape == (2, 4, 4)
    np.testing.assert_allclose(np.linalg.norm(ys, axis=-1), 1.0, rtol=1e-14)
    assert (np.triu(ys, 1) == 0).all() and (np.diagonal(ys, 0, -2, -1) > 0).all()
    assert D.constraints.corr_cholesky.check(y).numpy().all()
    np.testing.assert_allclose(t.inv(f64(ys)).numpy(), x, rtol=1e-9, atol=1e-12)
    # the log-determinant: of x against the strict lower triangle of y, by differences
    rows, cols = np.tril_indices(4, -1)
    h = 1e-6
    for b in range(2):
        jac = np.stack([(t(f64(x[b] + h * e)).numpy()[rows, cols]
                         - t(f64(x[b] - h * e)).numpy()[rows, cols]) / (2 * h)
                        for e in np.eye(6)], axis=1)
        np.testing.assert_allclose(t.log_abs_det_jacobian(f64(x[b]), y[b]).item(),
                                   np.linalg.slogdet(jac)[1], rtol=1e-7)
    assert t.forward_shape((5, 6)) == (5, 4, 4) and t.inverse_shape((5, 4, 4)) == (5, 6)
    with pytest.raises(ValueError, match="lower-diagonal"):
        t.forward_shape((5,))
    with pytest.raises(ValueError, match="square"):
        t.inverse_shape((4, 3))
    np.testing.assert_array_equal(
        D.transforms.vec_to_tril_matrix(f64([1.0, 2.0, 3.0]), diag=-1).numpy(),
        [[0, 0, 0], [1, 0, 0], [2, 3, 0]])
    np.testing.assert_array_equal(
        D.transforms.tril_matrix_to_vec(f64(np.arange(9.0).reshape(3, 3))).numpy(),
        [0, 3, 4, 6, 7, 8])
    with pytest.raises(ValueError, match="cannot be expressed"):
        D.transforms.vec_to_tril_matrix(f64([1.0, 2.0]))


def test_corr_cholesky_constraint():
    good = np.linalg.cholesky(np.array([[1.0, 0.5], [0.5, 1.0]]))
    bad = [2 * good, good.T, np.array([[1.0, 0.0], [0.6, -0.8]])]
    check = D.constraints.corr_cholesky.check
    assert check(good) and check(good.astype(np.float32)) and check(f64(good)).item()
    assert not any(check(m) for m in bad)
    assert not any(check(f64(m)).item() for m in bad)
    assert D.constraints.corr_cholesky.event_dim == 2


# ---------------------------------------------------------------- LKJCholesky


def test_lkj_cholesky_density_for_two_dims():
    """For dim 2, L = [[1, 0], [r, sqrt(1 - r^2)]] and r ~ Beta(eta, eta) on (-1, 1)."""
    eta = np.array([0.5, 1.0, 3.0])
    r = np.array([-0.7, 0.2, 0.9])
    L = np.zeros((3, 2, 2))
    L[:, 0, 0] = 1
    L[:, 1, 0] = r
    L[:, 1, 1] = np.sqrt(1 - r ** 2)
    d = D.LKJCholesky(2, f64(eta))
    assert d.batch_shape == (3,) and d.event_shape == (2, 2) and not d.has_rsample
    np.testing.assert_allclose(d.log_prob(f64(L)).numpy(),
                               stats.beta(eta, eta, loc=-1, scale=2).logpdf(r), rtol=1e-12)


def test_lkj_cholesky_density_normalizes_for_three_dims():
    """For dim 3 the density is over the strict lower triangle of L (L21, L31, L32,
    with L31^2 + L32^2 < 1; the diagonal follows from the unit rows): its integral is
    1, and it is proportional to L22^(2 eta - 1) L33^(2 eta - 2)."""
    eta = 2.0
    d = D.LKJCholesky(3, f64(eta))

    def cholesky(l21, l31, l32):
        return np.array([[1.0, 0, 0], [l21, np.sqrt(1 - l21 ** 2), 0],
                         [l31, l32, np.sqrt(max(1 - l31 ** 2 - l32 ** 2, 0.0))]])

    L = cholesky(0.3, 0.2, 0.4)
    unnormalized = (2 * eta - 1) * np.log(L[1, 1]) + (2 * eta - 2) * np.log(L[2, 2])
    log_norm = unnormalized - d.log_prob(f64(L)).item()
    other = cholesky(-0.6, 0.5, -0.1)
    np.testing.assert_allclose(d.log_prob(f64(other)).item(),
                               (2 * eta - 1) * np.log(other[1, 1])
                               + (2 * eta - 2) * np.log(other[2, 2]) - log_norm, rtol=1e-12)

    # the density depends on L21 and on the length rho of (L31, L32) only: in polar
    # coordinates the integral is a product of two one-dimensional ones
    row2 = integrate.quad(lambda l21: (1 - l21 ** 2) ** ((2 * eta - 1) / 2), -1, 1)[0]
    row3 = integrate.quad(lambda rho: 2 * np.pi * rho * (1 - rho ** 2) ** ((2 * eta - 2) / 2),
                          0, 1)[0]
    np.testing.assert_allclose(row2 * row3 * np.exp(-log_norm), 1.0, rtol=1e-10)


def test_lkj_cholesky_sampling():
    """Every off-diagonal correlation of an LKJ(eta) matrix of dim d is Beta(eta - 1
    + d/2, eta - 1 + d/2) on (-1, 1) (the onion method done right: PyTorch's draws
    fail this beyond the second row)."""
    nv.manual_seed(3)
    d = D.LKJCholesky(4, f64([0.7, 2.0]))
    s = d.sample((2000,))
    assert s.shape == (2000, 2, 4, 4)
    assert d.support.check(s).numpy().all()
    L = s.numpy()
    corr = L @ np.swapaxes(L, -1, -2)
    for j, eta in enumerate([0.7, 2.0]):
        b = eta - 1 + 2.0
        for row, col in zip(*np.tril_indices(4, -1)):
            assert ks_ok((corr[:, j, row, col] + 1) / 2, stats.beta(b, b).cdf), (eta, row, col)
    assert d.expand((3, 2)).sample().shape == (3, 2, 4, 4)
    with pytest.raises(ValueError, match="dim"):
        D.LKJCholesky(1)
    with pytest.raises(ValueError, match="concentration"):
        D.LKJCholesky(3, f64([-1.0]))
    with pytest.raises(ValueError, match="support"):
        d.log_prob(f64(2 * np.eye(4)))


# ---------------------------------------------------------------- Wishart


A = RNG.normal(size=(2, 3, 3))
SCALE = A @ np.swapaxes(A, -1, -2) + np.eye(3)
DF = np.array([4.5, 7.0])


def test_wishart_against_scipy():
    d = D.Wishart(f64(DF), covariance_matrix=f64(SCALE))
    assert d.batch_shape == (2,) and d.event_shape == (3, 3) and d.has_rsample
    refs = [stats.wishart(DF[b], SCALE[b]) for b in range(2)]
    X = np.stack([refs[b].rvs(random_state=b) for b in range(2)])
    want = [refs[b].logpdf(X[b]) for b in range(2)]
    np.testing.assert_allclose(d.log_prob(f64(X)).numpy(), want, rtol=1e-12)
    for other in (D.Wishart(f64(DF), scale_tril=f64(np.linalg.cholesky(SCALE))),
                  D.Wishart(f64(DF), precision_matrix=f64(np.linalg.inv(SCALE)))):
        np.testing.assert_allclose(other.log_prob(f64(X)).numpy(), want, rtol=1e-11)
    entropy = [r.entropy() for r in refs]
    np.testing.assert_allclose(d.entropy().numpy(), entropy, rtol=1e-12)
    np.testing.assert_allclose(D.ExponentialFamily.entropy(d).numpy(), entropy, rtol=1e-12)
    np.testing.assert_allclose(d.mean.numpy(), np.stack([r.mean() for r in refs]), rtol=1e-14)
    np.testing.assert_allclose(d.variance.numpy(), np.stack([r.var() for r in refs]),
                               rtol=1e-14)
    np.testing.assert_allclose(d.mode.numpy(), np.stack([r.mode() for r in refs]), rtol=1e-14)
    # no mode for df < p + 1 (NaN, as PyTorch's)
    assert np.isnan(D.Wishart(f64(3.5), covariance_matrix=f64(SCALE[0])).mode.numpy()).all()
    np.testing.assert_allclose(d.precision_matrix.numpy(), np.linalg.inv(SCALE), rtol=1e-10)
    np.testing.assert_allclose(D.Wishart(3.5, scale_tril=f64(np.eye(3))).df.item(), 3.5)


def test_wishart_sampling_and_gradient():
    d = D.Wishart(f64(DF), covariance_matrix=f64(SCALE))
    nv.manual_seed(13)
    s = d.rsample((4000,)).numpy()
    assert s.shape == (4000, 2, 3, 3)
    assert (np.linalg.eigvalsh(s) > 0).all()
    mean = DF[:, None, None] * SCALE
    sd = np.sqrt(d.variance.numpy() / 4000)
    assert (abs(s.mean(0) - mean) < 5 * sd).all()
    # pathwise gradient: X = L S L^T with S = A A^T independent of L, so the gradient
    # of sum(w * mean(X)) in L is (w + w^T) L mean(S), mean(S) = L^-1 mean(X) L^-T
    n = 50
    nv.manual_seed(14)
    L = np.linalg.cholesky(SCALE[0])
    tril = f64(L).requires_grad_()
    w = RNG.uniform(size=(3, 3))
    x = D.Wishart(f64(DF[0]), scale_tril=tril).rsample((n,))
    (g,) = nv.autograd.grad((x * f64(w)).sum() / n, [tril])
    Linv = np.linalg.inv(L)
    mean_s = Linv @ x.detach().numpy().mean(0) @ Linv.T
    np.testing.assert_allclose(g.numpy(), (w + w.T) @ L @ mean_s, rtol=1e-9)
    big = d.expand((3, 2))
    assert big.batch_shape == (3, 2) and big.sample().shape == (3, 2, 3, 3)


def test_wishart_validation():
    with pytest.raises(ValueError, match="df"):
        D.Wishart(f64([1.5]), covariance_matrix=f64(np.eye(3)))
    with pytest.raises(ValueError, match="Exactly one"):
        D.Wishart(f64(4.0), covariance_matrix=f64(np.eye(3)), scale_tril=f64(np.eye(3)))
    with pytest.raises(ValueError, match="square"):
        D.Wishart(f64(4.0), covariance_matrix=f64(np.ones(3)))
    with pytest.warns(UserWarning, match="Low df"):
        D.Wishart(f64(2.5), covariance_matrix=f64(np.eye(3)))
    with pytest.raises(ValueError, match="support"):
        D.Wishart(f64(4.0), covariance_matrix=f64(np.eye(3))).log_prob(f64(-np.eye(3)))


# ---------------------------------------------------------------- KL divergences


def _wishart_kl(n1, v1, n2, v2):
    p = v1.shape[-1]
    m = np.linalg.solve(v2, v1)
    return (-n2 / 2 * np.linalg.slogdet(m)[1] + n1 / 2 * (np.trace(m) - p)
            + special.multigammaln(n2 / 2, p) - special.multigammaln(n1 / 2, p)
            + (n1 - n2) / 2 * special.digamma(n1 / 2 - np.arange(p) / 2).sum())


def test_exponential_family_kl_by_bregman_divergence():
    """Two Wisharts have no closed form registered: PyTorch's Bregman rule gives the
    known closed form; two different families raise."""
    p = D.Wishart(f64(DF), covariance_matrix=f64(SCALE))
    q = D.Wishart(f64([5.0, 3.5]), covariance_matrix=f64(SCALE[::-1].copy()))
    want = [_wishart_kl(DF[b], SCALE[b], [5.0, 3.5][b], SCALE[::-1][b]) for b in range(2)]
    np.testing.assert_allclose(D.kl_divergence(p, q).numpy(), want, rtol=1e-10)
    with pytest.raises(NotImplementedError, match="exponential families"):
        D.kl_divergence(D.ContinuousBernoulli(f64([0.3])), p)


def _cb(lam):
    lam = np.asarray(lam, dtype=np.float64)
    c = np.where(lam == 0.5, 2.0, 2 * np.arctanh(1 - 2 * lam) / (1 - 2 * lam + (lam == 0.5)))
    return lambda v: c * lam ** v * (1 - lam) ** (1 - v)


def _quad_kl(p_pdf, q_logpdf, low, high):
    return integrate.quad(lambda v: p_pdf(v) * (np.log(p_pdf(v)) - q_logpdf(v)), low, high,
                          epsabs=1e-12, epsrel=1e-10)[0]


def test_continuous_bernoulli_kl_pairs():
    lam_p, lam_q = 0.3, 0.85
    cb_p, cb_q = D.ContinuousBernoulli(f64(lam_p)), D.ContinuousBernoulli(f64(lam_q))
    p_pdf, q_pdf = _cb(lam_p), _cb(lam_q)

    def q_log(v):
        return np.log(q_pdf(v))

    cases = [
        (cb_p, cb_q, _quad_kl(p_pdf, q_log, 0, 1)),
        (cb_p, D.Normal(f64(0.4), f64(0.7)), _quad_kl(p_pdf, stats.norm(0.4, 0.7).logpdf, 0, 1)),
        (cb_p, D.Exponential(f64(1.5)), _quad_kl(p_pdf, stats.expon(scale=1 / 1.5).logpdf, 0, 1)),
        (cb_p, D.Uniform(f64(-0.5), f64(2.0)), _quad_kl(p_pdf, lambda v: -np.log(2.5), 0, 1)),
        (cb_p, D.Uniform(f64(0.0), f64(1.0)), _quad_kl(p_pdf, lambda v: 0.0, 0, 1)),
        (D.Beta(f64(2.0), f64(3.0)), cb_q,
         _quad_kl(stats.beta(2, 3).pdf, q_log, 0, 1)),
        (D.Uniform(f64(0.2), f64(0.7)), cb_q, _quad_kl(lambda v: 2.0, q_log, 0.2, 0.7)),
    ]
    for p, q, want in cases:
        got = D.kl_divergence(p, q).item()
        np.testing.assert_allclose(got, want, rtol=1e-7, err_msg=f"{type(p)} {type(q)}")
    # q has no mass where p has: infinite
    for p, q in [(D.Normal(f64(0.0), f64(1.0)), cb_q), (D.Exponential(f64(1.0)), cb_q),
                 (D.Gamma(f64(2.0), f64(1.0)), cb_q), (D.Gumbel(f64(0.0), f64(1.0)), cb_q),
                 (D.Laplace(f64(0.0), f64(1.0)), cb_q), (D.Pareto(f64(1.0), f64(2.0)), cb_q),
                 (cb_p, D.Pareto(f64(1.0), f64(2.0))), (cb_p, D.Uniform(f64(0.1), f64(1.0))),
                 (D.Uniform(f64(-0.1), f64(0.5)), cb_q)]:
        assert D.kl_divergence(p, q).item() == np.inf, (type(p), type(q))


@pytest.mark.slow
def test_against_torch():
    """Where torch is installed: densities, moments and entropies equal torch's (the
    deviations documented in the classes aside: Kumaraswamy's mode, LKJCholesky's
    sampler)."""
    torch = pytest.importorskip("torch")
    TD = torch.distributions

    def t64(a):
        return torch.tensor(np.asarray(a, dtype=np.float64))

    a, b = np.array([0.7, 1.5, 3.0]), np.array([2.0, 0.5, 5.0])
    x01 = np.array([0.2, 0.5, 0.9])
    simplex = np.array([[0.2, 0.3, 0.5], [0.6, 0.3, 0.1]])
    cases = [
        (D.RelaxedBernoulli(f64(0.6), probs=f64(x01)),
         TD.RelaxedBernoulli(t64(0.6), probs=t64(x01)), x01[::-1].copy(), ()),
        (D.RelaxedOneHotCategorical(f64(0.6), logits=f64(np.log(simplex))),
         TD.RelaxedOneHotCategorical(t64(0.6), logits=t64(np.log(simplex))), simplex[::-1].copy(),
         ()),
        (D.ContinuousBernoulli(f64(x01)), TD.ContinuousBernoulli(t64(x01)), x01[::-1].copy(),
         ("mean", "variance", "entropy")),
        (D.InverseGamma(f64(a), f64(b)), TD.InverseGamma(t64(a), t64(b)), b,
         ("mean", "variance", "mode", "entropy")),
        (D.Kumaraswamy(f64(a), f64(b)), TD.Kumaraswamy(t64(a), t64(b)), x01,
         ("mean", "variance", "entropy")),
        (D.FisherSnedecor(f64(a), f64(b + 4)), TD.FisherSnedecor(t64(a), t64(b + 4)), b,
         ("mean", "variance", "mode")),
        (D.VonMises(f64(a), f64(b)), TD.VonMises(t64(a), t64(b)), b, ("mean", "mode")),
        (D.LogisticNormal(f64(a[:2]), f64(b[:2])), TD.LogisticNormal(t64(a[:2]), t64(b[:2])),
         simplex, ()),
        (D.LowRankMultivariateNormal(f64(LOC), f64(W), f64(DIAG)),
         TD.LowRankMultivariateNormal(t64(LOC), t64(W), t64(DIAG)), LOC[::-1].copy(),
         ("variance", "entropy", "precision_matrix", "scale_tril")),
        (D.Wishart(f64(DF), covariance_matrix=f64(SCALE)),
         TD.Wishart(t64(DF), covariance_matrix=t64(SCALE)), SCALE[::-1].copy(),
         ("mean", "variance", "mode", "entropy")),
        (D.LKJCholesky(3, f64([0.5, 2.0])), TD.LKJCholesky(3, t64([0.5, 2.0])),
         np.linalg.cholesky(SCALE / np.sqrt(np.einsum("bii,bjj->bij", SCALE, SCALE))), ()),
    ]
    for ours, theirs, value, attrs in cases:
        name = type(ours).__name__
        assert ours.batch_shape == tuple(theirs.batch_shape), name
        assert ours.event_shape == tuple(theirs.event_shape), name
        assert ours.has_rsample == theirs.has_rsample, name
        np.testing.assert_allclose(ours.log_prob(f64(value)).numpy(),
                                   theirs.log_prob(t64(value)).numpy(), rtol=1e-6,
                                   err_msg=name)
        for attr in attrs:
            got, want = getattr(ours, attr), getattr(theirs, attr)
            got, want = (got(), want()) if callable(got) else (got, want)
            np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-9, atol=1e-12,
                                       err_msg=f"{name}.{attr}")
    p, q = D.ContinuousBernoulli(f64(x01)), D.ContinuousBernoulli(f64(x01[::-1].copy()))
    tp, tq = TD.ContinuousBernoulli(t64(x01)), TD.ContinuousBernoulli(t64(x01[::-1].copy()))
    np.testing.assert_allclose(D.kl_divergence(p, q).numpy(),
                               TD.kl_divergence(tp, tq).numpy(), rtol=1e-12)
    corr = D.CorrCholeskyTransform()
    v = np.array([0.3, -1.0, 0.4])
    np.testing.assert_allclose(corr(f64(v)).numpy(),
                               TD.transforms.CorrCholeskyTransform()(t64(v)).numpy(), rtol=1e-14)
