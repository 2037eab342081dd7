"""SparseAdam: the lazy Adam rule at the rows a gradient holds (written into the test,
float64), the other rows and their moments untouched, under nv.compile too, and PyTorch's
SparseAdam with a sparse embedding where torch is installed."""
import math

import numpy as np
import pytest

import nova as nv
import nova.nn as nn

W0 = np.random.default_rng(3).standard_normal((6, 3))
BATCHES = [np.array([[0, 2], [2, 5]]), np.array([[1, 1], [0, 0]]), np.array([[5, 4], [2, 0]])]
TARGETS = [np.random.default_rng(10 + k).standard_normal((2, 2, 3)) for k in range(3)]


def _reference(lr=0.1, betas=(0.9, 0.99), eps=1e-8, maximize=False):
    """Parameters after each batch, by the formula: at a looked-up row r,
    m += (1-b1)(g - m), v += (1-b2)(g^2 - v), w -= lr sqrt(1-b2^t)/(1-b1^t) m/(sqrt v + eps)."""
    w, m, v = W0.copy(), np.zeros_like(W0), np.zeros_like(W0)
    out = []
    for t, (idx, y) in enumerate(zip(BATCHES, TARGETS), start=1):
        g = np.zeros_like(w)
        np.add.at(g, idx, 2 * (w[idx] - y) / y.size)          # d mean((w[idx] - y)^2)
        g = -g if maximize else g
        rows = np.unique(idx)
        m[rows] += (1 - betas[0]) * (g[rows] - m[rows])
        v[rows] += (1 - betas[1]) * (g[rows] ** 2 - v[rows])
        step = lr * math.sqrt(1 - betas[1] ** t) / (1 - betas[0] ** t)
        w[rows] -= step * m[rows] / (np.sqrt(v[rows]) + eps)
        out.append(w.copy())
    return out, m, v


def _train(compiled, **kw):
    emb = nn.Embedding(6, 3, sparse=True, dtype=nv.float64)
    with nv.no_grad():
        emb.weight.copy_(nv.tensor(W0))
    opt = nv.optim.SparseAdam(list(emb.parameters()), lr=0.1, betas=(0.9, 0.99), **kw)

    def step(idx, y):
        opt.zero_grad()
        loss = ((emb(idx) - y) ** 2).mean()
        loss.backward()
        opt.step()
        return loss
    run = nv.compile(step) if compiled else step
    out = []
    for idx, y in zip(BATCHES, TARGETS):
        run(nv.tensor(idx), nv.tensor(y))
        out.append(emb.weight.numpy())
    return out, opt.state[emb.weight]


@pytest.mark.parametrize("compiled", [False, True])
def test_only_the_rows_looked_up_move_and_keep_their_moments(compiled):
    ref, m, v = _reference()
    got, state = _train(compiled)
    for a, b in zip(got, ref):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14)
    # row 3 is never looked up: its weight and moments are untouched; row 4 only once
    np.testing.assert_array_equal(got[-1][3], W0[3])
    assert not state["exp_avg"].numpy()[3].any() and state["step"] == 3
    np.testing.assert_allclose(state["exp_avg"].numpy(), m, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(state["exp_avg_sq"].numpy(), v, rtol=1e-12, atol=1e-15)


def test_maximize_and_argument_checks():
    ref, _, _ = _reference(maximize=True)
    got, _ = _train(False, maximize=True)
    np.testing.assert_allclose(got[-1], ref[-1], rtol=1e-12, atol=1e-14)
    p = nn.Parameter(nv.ones(2))
    with pytest.raises(ValueError, match="SparseAdam: Invalid learning rate: 0"):
        nv.optim.SparseAdam([p], lr=0.0)
    with pytest.raises(ValueError, match="SparseAdam: Invalid beta parameter at index 1"):
        nv.optim.SparseAdam([p], betas=(0.9, 1.0))


def test_matches_pytorchs_sparse_adam():
    torch = pytest.importorskip("torch")
    got, _ = _train(False)
    emb = torch.nn.Embedding(6, 3, sparse=True, dtype=torch.float64)
    with torch.no_grad():
        emb.weight.copy_(torch.tensor(W0))
    opt = torch.optim.SparseAdam(list(emb.parameters()), lr=0.1, betas=(0.9, 0.99))
    for (idx, y), mine in zip(zip(BATCHES, TARGETS), got):
        opt.zero_grad()
        ((emb(torch.tensor(idx)) - torch.tensor(y)) ** 2).mean().backward()
        opt.step()
        np.testing.assert_allclose(mine, emb.weight.detach().numpy(), rtol=1e-13, atol=1e-15)
