"""MixtureSameFamily: ``log_prob``, ``cdf``, ``mean`` and ``variance`` against the
mixture of scipy's densities (univariate components, a batch of mixtures, components
with an event dim through ``Independent``, mixture weights shared by the batch);
``sample`` by a KS test of draws under a fixed seed and by which component each draw
came from; shapes, ``expand``, the support constraint and the constructor's errors.

The interpreter realizes these small graphs."""
import numpy as np
import pytest
from scipy import stats

import nova as nv
import nova.distributions as D


@pytest.fixture(autouse=True)
def interpreted():
    with nv.engine("interp"):
        yield


def f64(a):
    return nv.tensor(np.asarray(a, dtype=np.float64), dtype=nv.float64)


W = np.array([[0.2, 0.3, 0.5], [0.6, 0.1, 0.3]])
LOC = np.array([[0.0, 1.0, -2.0], [3.0, -1.0, 0.5]])
SCALE = np.array([[1.0, 0.5, 2.0], [0.3, 1.5, 1.0]])
X = np.array([[0.3, -1.0], [2.0, 3.1], [-5.0, 0.0]])      # (sample, batch)


def _gaussian_mixture():
    return D.MixtureSameFamily(D.Categorical(f64(W)), D.Normal(f64(LOC), f64(SCALE)))


def test_values_against_the_mixture_of_scipy_densities():
    mix = _gaussian_mixture()
    outs = [mix.log_prob(f64(X)), mix.cdf(f64(X)), mix.mean, mix.variance]
    nv.realize(*outs)
    lp, cdf, mean, var = [o.numpy() for o in outs]
    comp = stats.norm(LOC, SCALE)
    pdf = (W * comp.pdf(X[..., None])).sum(-1)
    np.testing.assert_allclose(lp, np.log(pdf), rtol=1e-13)
    np.testing.assert_allclose(cdf, (W * comp.cdf(X[..., None])).sum(-1), rtol=1e-13)
    m = (W * LOC).sum(-1)
    np.testing.assert_allclose(mean, m, rtol=1e-14)
    np.testing.assert_allclose(var, (W * (SCALE ** 2 + LOC ** 2)).sum(-1) - m ** 2, rtol=1e-13)
    assert mix.batch_shape == (2,) and mix.event_shape == () and not mix.has_rsample


def test_event_dims_and_shared_weights():
    """Components with an event dim (``Independent`` Normals over 2 coordinates) and one
    set of mixture weights for the whole batch (a batch-less Categorical)."""
    w = np.array([0.25, 0.75])
    loc = np.array([[[0.0, 1.0], [2.0, -1.0]], [[1.0, 1.0], [-3.0, 0.0]],
                    [[0.5, 0.0], [0.0, 0.5]]])                        # (batch 3, K 2, event 2)
    scale = np.full_like(loc, 0.8)
    mix = D.MixtureSameFamily(D.Categorical(f64(w)),
                              D.Independent(D.Normal(f64(loc), f64(scale)), 1))
    assert (mix.batch_shape, mix.event_shape) == ((3,), (2,))
    y = np.array([[0.1, 0.2], [1.0, -1.0], [0.0, 0.3]])
    lp = mix.log_prob(f64(y)).numpy()
    comp = stats.norm(loc, scale).logpdf(y[:, None, :]).sum(-1)           # (3, K)
    np.testing.assert_allclose(lp, np.log((w * np.exp(comp)).sum(-1)), rtol=1e-13)
    np.testing.assert_allclose(mix.mean.numpy(), (w[:, None] * loc).sum(1), rtol=1e-14)
    nv.manual_seed(2)
    draws = mix.sample((4,))
    assert draws.shape == (4, 3, 2)
    # each draw lies near one of its mixture's two component means (scale 0.8)
    d = np.abs(draws.numpy()[:, :, None, :] - loc[None]).max(-1).min(-1)
    assert (d < 6 * 0.8).all()


def test_sampling_distribution_and_components():
    """4000 draws of each mixture (fixed seed): a KS test against the mixture cdf, and
    with well-separated components, the share drawn from each is its weight (within
    5 standard errors)."""
    n = 4000
    nv.manual_seed(12)
    mix = _gaussian_mixture()
    far = D.MixtureSameFamily(D.Categorical(f64([0.2, 0.3, 0.5])),
                              D.Normal(f64([-100.0, 0.0, 100.0]), f64([1.0, 1.0, 1.0])))
    draws = [mix.sample((n,)), far.sample((n,))]
    nv.realize(*draws)
    x, y = [d.numpy() for d in draws]
    assert x.shape == (n, 2) and y.shape == (n,)
    for j in range(2):
        def cdf(v, j=j):
            return (W[j] * stats.norm(LOC[j], SCALE[j]).cdf(np.asarray(v)[..., None])).sum(-1)
        assert stats.kstest(x[:, j], cdf).pvalue > 1e-3, j
    share = np.array([(y < -50).mean(), (np.abs(y) < 50).mean(), (y > 50).mean()])
    se = np.sqrt(np.array([0.2, 0.3, 0.5]) * (1 - np.array([0.2, 0.3, 0.5])) / n)
    assert (np.abs(share - [0.2, 0.3, 0.5]) < 5 * se).all(), share


def test_shapes_expand_support_and_errors():
    mix = _gaussian_mixture()
    assert mix.sample((5,)).shape == (5, 2)
    assert mix.log_prob(f64(np.zeros((4, 1)))).shape == (4, 2)
    big = mix.expand((3, 2))
    assert type(big) is D.MixtureSameFamily and big.batch_shape == (3, 2)
    assert big.sample().shape == (3, 2) and big.log_prob(f64(np.zeros((3, 2)))).shape == (3, 2)
    assert big.component_distribution.batch_shape == (3, 2, 3)
    positive = D.MixtureSameFamily(D.Categorical(f64([0.5, 0.5])),
                                   D.Exponential(f64([1.0, 2.0])))
    assert positive.support.check(f64([1.0])).numpy().tolist() == [True]
    assert positive.support.check(f64([-1.0])).numpy().tolist() == [False]
    with pytest.raises(ValueError, match="support"):
        positive.log_prob(f64(-1.0))
    with pytest.raises(ValueError, match="Categorical"):
        D.MixtureSameFamily(D.Normal(0.0, 1.0), D.Normal(f64([0.0]), f64([1.0])))
    with pytest.raises(ValueError, match="Distribution"):
        D.MixtureSameFamily(D.Categorical(f64([1.0])), "normal")
    with pytest.raises(ValueError, match=r"does not equal .*batch_shape\[-1\]"):
        D.MixtureSameFamily(D.Categorical(f64([0.5, 0.5])), D.Normal(f64(LOC), f64(SCALE)))
    with pytest.raises(ValueError, match="not compatible"):
        D.MixtureSameFamily(D.Categorical(f64(np.full((4, 3), 1 / 3))),
                            D.Normal(f64(LOC), f64(SCALE)))
    assert repr(mix).startswith("MixtureSameFamily(\n  Categorical(")


def test_against_torch():
    torch = pytest.importorskip("torch")
    TD = torch.distributions
    t64 = lambda a: torch.tensor(np.asarray(a, dtype=np.float64))  # noqa: E731
    theirs = TD.MixtureSameFamily(TD.Categorical(t64(W)), TD.Normal(t64(LOC), t64(SCALE)))
    ours = _gaussian_mixture()
    np.testing.assert_allclose(ours.log_prob(f64(X)).numpy(), theirs.log_prob(t64(X)).numpy(),
                               rtol=1e-13)
    np.testing.assert_allclose(ours.variance.numpy(), theirs.variance.numpy(), rtol=1e-13)
