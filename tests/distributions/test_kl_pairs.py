"""``kl_divergence`` for every pair of distribution types that ``torch.distributions``
registers among Nova's families, against torch in float64: the values (the pairs that
are infinite throughout, and Uniform -> Exponential, infinite only where the uniform
reaches below 0, included) and, for the finite cross-family pairs, the gradients with
respect to both distributions' parameters. (The same-family pairs are checked against
the definition by quadrature in test_kl.py.)

The interpreter realizes these small graphs."""
import numpy as np
import pytest

import nova as nv
import nova.distributions as D

torch = pytest.importorskip("torch")
TD = torch.distributions
from torch.distributions.kl import _KL_REGISTRY as TORCH_KL  # noqa: E402


@pytest.fixture(autouse=True)
def interpreted():
    with nv.engine("interp"):
        yield


def f64(a):
    return nv.tensor(np.asarray(a, dtype=np.float64), dtype=nv.float64)


def t64(a):
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


def _torch_pairs():
    """The registered (p, q) type names of torch whose both types Nova has."""
    return sorted((p.__name__, q.__name__) for p, q in TORCH_KL
                  if hasattr(D, p.__name__) and hasattr(D, q.__name__)
                  and p.__name__ in PARAMS and q.__name__ in PARAMS)


def test_every_torch_pair_is_registered():
    """Nova registers each pair torch does among the families both have (and the
    families without parameters here are not distributions Nova has)."""
    ours = {(p.__name__, q.__name__) for p, q in D.kl._KL_REGISTRY}
    missing = [pq for pq in _torch_pairs() if pq not in ours]
    assert missing == []
    nova_families = {n for n in D.__all__ if isinstance(getattr(D, n), type)
                     and issubclass(getattr(D, n), D.Distribution) and n != "Distribution"}
    assert nova_families <= set(PARAMS)
    assert len(_torch_pairs()) >= 28       # 12 within a family, 16 across (torch 2.x)


def test_kl_values_against_torch():
    """Every registered pair's KL, for one batch of three, equals torch's (infinite
    where torch's is, NaN nowhere). One realization."""
    outs, expected = {}, {}
    for p_name, q_name in _torch_pairs():
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
