"""Probe 13c (RL, graph, flow and contrastive scripts ported by changing imports): every
script ran unchanged apart from numpy-style ``axis=``/``keepdims=`` keywords (a
nova/tensor matter, reported). These tests pin the idioms those scripts lean on whose
semantics are easy to get subtly wrong, so a later change cannot break them silently:

- action masking with ``-inf`` logits: ``Categorical`` entropy, log_prob and their
  gradients stay finite (PyTorch clamps the logits to the dtype's min for entropy);
- edge softmax through ``scatter_reduce(..., "amax")`` + ``scatter_add_`` and GCN
  normalization through ``index_add_`` and an ``index_put_(accumulate=True)`` adjacency;
- a DQN step's ``gather(1, a.unsqueeze(1))`` + Huber target and soft target updates
  (``lerp_`` under ``no_grad``, ``p.data.mul_().add_()``, ``_foreach``);
- GAE written as a reversed Python loop with ``adv[t] = gae`` into a preallocated buffer.

References are numpy (float64) or finite differences; the interpreter runs these tiny
graphs."""
import numpy as np
import pytest

import nova as nv
import nova.distributions as D
import nova.nn as nn
import nova.nn.functional as F


@pytest.fixture(autouse=True)
def interpreted():
    with nv.engine("interp"):
        yield


def _rand(shape, seed, scale=1.0):
    return (np.random.default_rng(seed).standard_normal(shape) * scale).astype(np.float32)


# --- action masking --------------------------------------------------------------------

def _masked_reference(logits: np.ndarray, mask: np.ndarray):
    z = np.where(mask, logits.astype(np.float64), -np.inf)
    logp = z - np.log(np.exp(z - z.max(-1, keepdims=True)).sum(-1, keepdims=True)) \
        - z.max(-1, keepdims=True)
    p = np.exp(logp)
    ent = -(p * np.where(mask, logp, 0.0)).sum(-1)
    return logp, p, ent


def test_masked_categorical_entropy_log_prob_and_gradient_are_finite():
    logits = _rand((3, 4), 0)
    mask = np.array([[1, 0, 1, 1], [1, 1, 0, 0], [1, 0, 0, 0]], bool)
    x = nv.tensor(logits, requires_grad=True)
    dist = D.Categorical(logits=x.masked_fill(nv.tensor(~mask), float("-inf")))
    actions = np.array([2, 1, 0])
    ent, lp = dist.entropy(), dist.log_prob(nv.tensor(actions))
    logp, p, ent_ref = _masked_reference(logits, mask)
    np.testing.assert_allclose(ent.numpy(), ent_ref, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(lp.numpy(), logp[np.arange(3), actions], rtol=1e-5)
    np.testing.assert_allclose(dist.probs.numpy(), p, atol=1e-7)
    (ent.sum() + lp.sum()).backward()
    grad = x.grad.numpy()
    assert np.isfinite(grad).all()
    assert (grad[~mask] == 0).all()               # a masked action gets no gradient
    # d/dz [H + log p_a] on the valid actions: -p (log p + H) + onehot(a) - p
    onehot = np.eye(4)[actions]
    expected = -p * (np.where(mask, logp, 0.0) + ent_ref[:, None]) + onehot - p
    np.testing.assert_allclose(grad[mask], expected[mask], rtol=1e-4, atol=1e-6)


def test_masked_categorical_never_samples_a_masked_action():
    mask = np.array([[0, 1, 0, 1]] * 64, bool)
    dist = D.Categorical(logits=nv.zeros(64, 4).masked_fill(nv.tensor(~mask), float("-inf")))
    nv.manual_seed(0)
    drawn = dist.sample().numpy()
    assert set(drawn.tolist()) <= {1, 3}


# --- message passing ------------------------------------------------------------------

_SRC = np.array([0, 1, 2, 3, 0, 2, 4, 4])
_DST = np.array([1, 0, 1, 1, 2, 3, 3, 0])


def _edge_softmax(scores, dst, num_nodes: int):
    """The PyG-style edge softmax of the scripts: per-destination max, exp, sum."""
    idx = dst.view(-1, 1).expand_as(scores)
    smax = nv.full((num_nodes,) + tuple(scores.shape[1:]), float("-inf"))
    smax = smax.scatter_reduce(0, idx, scores, reduce="amax", include_self=True)
    ex = (scores - smax[dst]).exp()
    den = nv.zeros((num_nodes,) + tuple(scores.shape[1:])).scatter_add_(0, idx, ex)
    return ex / den[dst]


def _edge_softmax_np(scores: np.ndarray, dst: np.ndarray, num_nodes: int) -> np.ndarray:
    out = np.empty_like(scores, dtype=np.float64)
    for n in range(num_nodes):
        sel = dst == n
        if sel.any():
            e = np.exp(scores[sel] - scores[sel].max(0))
            out[sel] = e / e.sum(0)
    return out


def test_edge_softmax_values_and_gradient():
    scores = _rand((len(_SRC), 2), 1)
    weights = _rand((len(_SRC), 2), 2)
    x = nv.tensor(scores, requires_grad=True)
    alpha = _edge_softmax(x, nv.tensor(_DST), 5)
    np.testing.assert_allclose(alpha.numpy(), _edge_softmax_np(scores, _DST, 5), rtol=1e-5)
    (alpha * nv.tensor(weights)).sum().backward()
    # finite differences in float64 on the numpy reference
    base = scores.astype(np.float64)
    fd = np.zeros_like(base)
    for i in np.ndindex(base.shape):
        h = np.zeros_like(base)
        h[i] = 1e-6
        plus = (_edge_softmax_np(base + h, _DST, 5) * weights).sum()
        minus = (_edge_softmax_np(base - h, _DST, 5) * weights).sum()
        fd[i] = (plus - minus) / 2e-6
    np.testing.assert_allclose(x.grad.numpy(), fd, rtol=1e-3, atol=1e-5)


def test_gcn_normalization_index_add_matches_dense_adjacency():
    feats = _rand((5, 3), 3)
    loops = np.arange(5)
    row, col = np.concatenate([_SRC, loops]), np.concatenate([_DST, loops])
    r, c = nv.tensor(row), nv.tensor(col)
    deg = nv.zeros(5).scatter_add_(0, c, nv.ones(len(col)))
    dinv = deg.pow(-0.5)
    dinv[dinv == float("inf")] = 0
    norm = dinv[r] * dinv[c]
    out = nv.zeros(5, 3).index_add_(0, c, norm.view(-1, 1) * nv.tensor(feats)[r])
    adj = nv.zeros(5, 5).index_put_((c, r), nv.ones(len(row)), accumulate=True)
    a = np.zeros((5, 5))
    np.add.at(a, (col, row), 1.0)
    d = a.sum(1) ** -0.5
    expected = (d[:, None] * a * d[None, :]) @ feats
    np.testing.assert_allclose(adj.numpy(), a)
    np.testing.assert_allclose(out.numpy(), expected, rtol=1e-5, atol=1e-6)


# --- DQN --------------------------------------------------------------------------------

def test_dqn_gather_huber_target_and_its_gradient():
    q = _rand((4, 3), 4)
    actions = np.array([2, 0, 1, 2])
    reward, done = np.array([1.0, 0.0, -1.0, 0.5], np.float32), np.array([0, 0, 1, 0], np.float32)
    next_q = _rand((4, 3), 5, scale=3.0)
    qt = nv.tensor(q, requires_grad=True)
    chosen = qt.gather(1, nv.as_tensor(actions).unsqueeze(1)).squeeze(1)
    with nv.no_grad():
        target = nv.from_numpy(reward) + 0.9 * nv.tensor(next_q).max(1)[0] * (1 - nv.tensor(done))
    loss = F.smooth_l1_loss(chosen, target)
    loss.backward()
    diff = q[np.arange(4), actions].astype(np.float64) - (reward + 0.9 * next_q.max(1) * (1 - done))
    huber = np.where(np.abs(diff) < 1, 0.5 * diff ** 2, np.abs(diff) - 0.5)
    np.testing.assert_allclose(loss.item(), huber.mean(), rtol=1e-5)
    grad = np.zeros((4, 3))
    grad[np.arange(4), actions] = np.clip(diff, -1, 1) / 4
    np.testing.assert_allclose(qt.grad.numpy(), grad, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("how", ["lerp", "data", "foreach"])
def test_soft_target_update(how):
    online, target = nn.Linear(3, 2), nn.Linear(3, 2)
    before = {k: v.numpy().copy() for k, v in target.state_dict().items()}
    tau = 0.1
    pairs = list(zip(online.parameters(), target.parameters()))
    if how == "lerp":
        with nv.no_grad():
            for p, p_targ in pairs:
                p_targ.lerp_(p, tau)
    elif how == "data":
        for p, p_targ in pairs:
            p_targ.data.mul_(1 - tau)
            p_targ.data.add_(tau * p.data)
    else:
        with nv.no_grad():
            nv._foreach_mul_([t for _, t in pairs], 1 - tau)
            nv._foreach_add_([t for _, t in pairs], [p for p, _ in pairs], alpha=tau)
    for k, v in target.state_dict().items():
        expected = (1 - tau) * before[k] + tau * online.state_dict()[k].numpy()
        np.testing.assert_allclose(v.numpy(), expected, rtol=1e-6, atol=1e-7)
    for p_targ in target.parameters():             # still trainable parameters, leaf tensors
        assert isinstance(p_targ, nn.Parameter) and p_targ.requires_grad and p_targ.is_leaf


# --- GAE --------------------------------------------------------------------------------

def test_gae_reversed_loop_into_preallocated_buffer():
    rewards, values = _rand(6, 6), _rand(6, 7)
    dones = np.array([0, 0, 1, 0, 0, 0], np.float32)
    last_value, gamma, lam = 0.3, 0.99, 0.95
    r, v, d = nv.tensor(rewards), nv.tensor(values), nv.tensor(dones)
    adv = nv.zeros_like(r)
    gae = 0.0
    for t in reversed(range(6)):
        next_value = last_value if t == 5 else v[t + 1]
        delta = r[t] + gamma * next_value * (1.0 - d[t]) - v[t]
        gae = delta + gamma * lam * (1.0 - d[t]) * gae
        adv[t] = gae
    ref, g = np.zeros(6), 0.0
    for t in reversed(range(6)):
        nv_ = last_value if t == 5 else values[t + 1]
        delta = rewards[t] + gamma * nv_ * (1 - dones[t]) - values[t]
        g = delta + gamma * lam * (1 - dones[t]) * g
        ref[t] = g
    np.testing.assert_allclose(adv.numpy(), ref, rtol=1e-5, atol=1e-6)
    norm = (adv - adv.mean()) / (adv.std() + 1e-8)
    np.testing.assert_allclose(norm.numpy(), (ref - ref.mean()) / (ref.std(ddof=1) + 1e-8),
                               rtol=1e-4, atol=1e-5)
