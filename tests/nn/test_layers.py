"""Layers and nv.nn.functional against numpy and hand computations."""
import math

import numpy as np
import pytest

import nova as nv
import nova.nn as nn
import nova.nn.functional as F
from tests.helpers import assert_close


def test_linear_matches_numpy_and_checks_features():
    lin = nn.Linear(3, 2)
    x = np.random.default_rng(0).standard_normal((4, 3)).astype(np.float32)
    ref = x @ lin.weight.numpy().T + lin.bias.numpy()
    assert_close(lin(nv.tensor(x)), ref, rtol=1e-5)
    bound = 1 / math.sqrt(3)
    assert np.abs(lin.weight.numpy()).max() <= bound and np.abs(lin.bias.numpy()).max() <= bound
    with pytest.raises(ValueError, match=r"linear: input \(4, 5\) has 5 features but weight "
                                         r"\(2, 3\) expects 3"):
        lin(nv.zeros(4, 5))


def test_linear_with_a_one_dim_weight_drops_the_features_dim():
    """PyTorch's ``F.linear(x, w)`` with ``w`` of shape (in,): ``x @ w``, of shape
    ``x.shape[:-1]``; with a bias it refuses, as PyTorch's."""
    x = np.random.default_rng(1).standard_normal((4, 3)).astype(np.float32)
    w = np.array([0.5, -1.0, 2.0], dtype=np.float32)
    got = F.linear(nv.tensor(x), nv.tensor(w))
    assert got.shape == (4,)
    assert_close(got, x @ w, rtol=1e-6)
    assert F.linear(nv.tensor(x[0]), nv.tensor(w)).shape == ()
    with pytest.raises(ValueError, match=r"linear: input \(4, 3\) has 3 features but "
                                         r"weight \(2,\) expects 2"):
        F.linear(nv.tensor(x), nv.ones(2))
    with pytest.raises(ValueError, match=r"or 1-D \(in,\) without a bias, got shape "
                                         r"\(3,\) with a bias"):
        F.linear(nv.tensor(x), nv.tensor(w), nv.ones(()))


def test_layers_take_their_input_by_pytorchs_keyword():
    """``layer(input=x)``, as PyTorch's forward names its argument (was ``x``)."""
    x = nv.tensor(np.random.default_rng(2).standard_normal((2, 3, 4, 4)).astype(np.float32))
    for layer in (nn.Conv2d(3, 2, 3), nn.ReLU(), nn.GELU(), nn.LayerNorm(4), nn.BatchNorm2d(3),
                  nn.Dropout(0.0), nn.Softmax(1), nn.Flatten(), nn.Identity(),
                  nn.Sequential(nn.Flatten(), nn.Linear(48, 2)), nn.GroupNorm(1, 3),
                  nn.InstanceNorm2d(3), nn.Upsample(scale_factor=2)):
        assert_close(layer(input=x), layer(x).numpy())
    emb = nn.Embedding(5, 2)
    assert_close(emb(input=nv.tensor([1, 4])), emb(nv.tensor([1, 4])).numpy())


def test_embedding_layer_norm_rms_norm():
    emb = nn.Embedding(5, 3)
    idx = np.array([[0, 4], [2, 2]])
    assert_close(emb(nv.tensor(idx)), emb.weight.numpy()[idx])
    with pytest.raises(TypeError, match="embedding: indices must be int32 or int64"):
        emb(nv.zeros(2))
    x = np.random.default_rng(1).standard_normal((2, 3, 4)).astype(np.float32)
    ln = nn.LayerNorm(4)
    mu, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
    assert_close(ln(nv.tensor(x)), (x - mu) / np.sqrt(var + 1e-5), rtol=1e-4, atol=1e-5)
    assert_close(F.layer_norm(nv.tensor(x), (3, 4)),
                 (x - x.mean((1, 2), keepdims=True)) / np.sqrt(x.var((1, 2), keepdims=True) + 1e-5),
                 rtol=1e-4, atol=1e-5)
    rms = nn.RMSNorm(4, eps=1e-6)
    assert_close(rms(nv.tensor(x)), x / np.sqrt((x**2).mean(-1, keepdims=True) + 1e-6), rtol=1e-5)
    with pytest.raises(ValueError, match=r"layer_norm: normalized_shape \(5,\) does not match"):
        F.layer_norm(nv.tensor(x), 5)


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_rms_norm_default_eps_is_the_machine_epsilon_as_pytorch(dtype):
    """``eps=None`` (``F.rms_norm``'s default, and ``nn.RMSNorm``'s) is the epsilon of
    the type the norm computes in -- float64's, or float32's (half inputs compute in
    float32) -- not 1e-6, which made small activations' norms 12% low."""
    x = np.array([[1e-3, -2e-3, 3e-3, 0.5e-3], [1.0, -2.0, 0.5, 0.25]])
    eps = np.finfo(np.float64 if dtype == "float64" else np.float32).eps
    want = x / np.sqrt((x ** 2).mean(-1, keepdims=True) + eps)
    t = nv.tensor(x).to(getattr(nv, dtype))
    tol = 1e-2 if dtype == "float16" else 1e-6
    for out in (F.rms_norm(t, (4,)), nn.RMSNorm(4, elementwise_affine=False).to(t.dtype)(t)):
        np.testing.assert_allclose(out.float().numpy(), want, rtol=tol, atol=0)


def test_dropout_scales_masks_and_does_not_recompile(fresh_cache):
    nv.manual_seed(0)
    drop = nn.Dropout(0.25)
    x = nv.ones(10000)
    y = drop(x).numpy()
    assert set(np.unique(y).tolist()) <= {0.0, float(np.float32(1.0 / 0.75))}
    assert abs((y == 0).mean() - 0.25) < 0.02
    drop.eval()
    assert drop(x) is x
    drop.train()
    nv.debug.reset_cache()
    masks = {tuple(drop(nv.ones(8)).tolist()) for _ in range(10)}
    assert len(masks) > 1 and nv.debug.cache_stats().misses == 1
    nv.manual_seed(5)
    a = F.dropout(nv.ones(16), 0.5).tolist()
    nv.manual_seed(5)
    assert F.dropout(nv.ones(16), 0.5).tolist() == a
    with pytest.raises(ValueError, match="Dropout: probability must be in"):
        nn.Dropout(1.5)


def test_activation_modules_and_containers():
    x = nv.tensor([-1.0, 0.0, 2.0])
    assert nn.ReLU()(x).tolist() == [0.0, 0.0, 2.0]
    assert_close(nn.SiLU()(x), F.silu(x))
    assert_close(nn.Tanh()(x), np.tanh([-1.0, 0.0, 2.0]))
    assert_close(nn.GELU("tanh")(x), nv.gelu(x, approximate="tanh"))
    seq = nn.Sequential(nn.Linear(3, 3), nn.ReLU())
    assert len(seq) == 2 and isinstance(seq[1], nn.ReLU) and seq(nv.ones(1, 3)).shape == (1, 3)
    md = nn.ModuleDict({"a": nn.ReLU()})
    assert "a" in md and list(md.keys()) == ["a"]


def _np_log_softmax(x):
    m = x.max(1, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(1, keepdims=True))


def test_cross_entropy_with_ignore_index_and_label_smoothing():
    rng = np.random.default_rng(0)
    logits = rng.standard_normal((5, 4)).astype(np.float32)
    target = np.array([0, 3, -100, 1, 3])
    logp = _np_log_softmax(logits.astype(np.float64))
    keep = target != -100
    nll = -logp[np.arange(5), np.where(keep, target, 0)]
    assert_close(F.cross_entropy(nv.tensor(logits), nv.tensor(target)), nll[keep].mean(), rtol=1e-5)
    eps = 0.1
    smooth = (1 - eps) * nll + eps * (-logp.mean(1))
    assert_close(F.cross_entropy(nv.tensor(logits), nv.tensor(target), label_smoothing=eps),
                 smooth[keep].mean(), rtol=1e-5)
    assert_close(F.cross_entropy(nv.tensor(logits), nv.tensor(target), reduction="sum"),
                 nll[keep].sum(), rtol=1e-5)
    none = F.cross_entropy(nv.tensor(logits), nv.tensor(target), reduction="none").numpy()
    assert_close(none, np.where(keep, nll, 0.0), rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match=r"cross_entropy: target shape \(4,\) does not match"):
        F.cross_entropy(nv.tensor(logits), nv.tensor(target[:4]))
    with pytest.raises(TypeError, match="cross_entropy: target must hold class indices"):
        F.cross_entropy(nv.tensor(logits), nv.tensor(logits[:, 0]))   # (float: probabilities
    # need the input's shape, tests/nn/test_loss_functions.py)


def test_mse_and_scaled_dot_product_attention():
    a, b = np.arange(6.0).reshape(2, 3), np.ones((2, 3))
    assert_close(F.mse_loss(nv.tensor(a), nv.tensor(b)), ((a - b) ** 2).mean())
    rng = np.random.default_rng(2)
    q, k, v = (rng.standard_normal((2, 3, 4, 5)) for _ in range(3))
    s = q @ k.transpose(0, 1, 3, 2) / math.sqrt(5)
    s = np.where(np.triu(np.ones((4, 4), bool), 1), -np.inf, s)
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    out = F.scaled_dot_product_attention(nv.tensor(q), nv.tensor(k), nv.tensor(v), is_causal=True)
    assert_close(out, p @ v, rtol=1e-6, atol=1e-8)


def test_init_functions():
    nv.manual_seed(0)
    w = nv.zeros(200, 300)
    nn.init.xavier_uniform_(w)
    bound = math.sqrt(6 / 500)
    assert np.abs(w.numpy()).max() <= bound and np.abs(w.numpy()).max() > 0.95 * bound
    nn.init.kaiming_uniform_(w, nonlinearity="relu")
    assert np.abs(w.numpy()).max() <= math.sqrt(2) * math.sqrt(3 / 300)
    nn.init.normal_(w, 1.0, 0.5)
    assert abs(w.numpy().mean() - 1.0) < 0.01 and abs(w.numpy().std() - 0.5) < 0.01
    nn.init.ones_(w)
    assert w.numpy().min() == 1.0
    nn.init.zeros_(w)
    assert w.numpy().max() == 0.0
    with pytest.raises(ValueError, match="fan in and fan out need a tensor with >= 2 dims"):
        nn.init.xavier_uniform_(nv.zeros(3))
