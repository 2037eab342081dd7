"""The autograd API: backward, .grad accumulation, retain_grad, no_grad, grad(), double
backward, errors, and models checked against finite differences."""
import numpy as np
import pytest

import nova as nv
from nova.autograd.gradcheck import gradcheck


def test_backward_accumulates_into_leaf_grads_lazily():
    x = nv.tensor([1.0, 2.0], requires_grad=True)
    y = (x * x).sum()
    y.backward()
    assert not x.grad.node.realized  # gradients are graph until something realizes them
    assert x.grad.tolist() == [2.0, 4.0]
    (x * 3).sum().backward()
    assert x.grad.tolist() == [5.0, 7.0]
    x.grad = None
    (x ** 2).sum().backward(retain_graph=True)
    assert x.grad.tolist() == [2.0, 4.0]


def test_explicit_gradient_and_non_scalar_errors():
    x = nv.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = x * 2
    with pytest.raises(RuntimeError, match=r"grad can be implicitly created only for scalar "
                                           r"outputs \(got shape \(3,\)\)"):
        y.backward()
    y.backward(nv.tensor([1.0, 0.0, -1.0]))
    assert x.grad.tolist() == [2.0, 0.0, -2.0]
    with pytest.raises(RuntimeError, match=r"mismatch in shape: gradient has shape \(2,\)"):
        (x * 2).backward(nv.tensor([1.0, 2.0]))
    with pytest.raises(RuntimeError, match="element 0 of tensors does not require grad and does "
                                           "not have a grad_fn"):
        nv.tensor([1.0]).sum().backward()


def test_second_backward_without_retain_graph_raises():
    x = nv.tensor([1.0, 2.0], requires_grad=True)
    y = x.exp().sum()
    y.backward()
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        y.backward()


def test_requires_grad_flags_leaves_and_detach():
    x = nv.zeros(3)
    assert not x.requires_grad and x.is_leaf and x.grad_fn is None
    x.requires_grad_()
    y = x + 1
    assert y.requires_grad and not y.is_leaf and "AddBackward" in repr(y.grad_fn)
    assert not y.detach().requires_grad
    with pytest.raises(RuntimeError, match="only tensors of floating point dtype can require "
                                           "gradients, got int64"):
        nv.tensor([1, 2]).requires_grad_()
    with pytest.raises(RuntimeError, match="you can only change requires_grad flags of leaf"):
        y.requires_grad_(False)
    with pytest.raises(RuntimeError, match="add_: a leaf tensor that requires grad is being used "
                                           "in an in-place operation"):
        x.add_(1)
    with nv.no_grad():
        x.add_(1)  # allowed: the optimizer-update pattern
    assert x.is_leaf and x.requires_grad and x.tolist() == [1.0, 1.0, 1.0]
    assert nv.randn(2, requires_grad=True).requires_grad
    assert nv.zeros(2, requires_grad=True).is_leaf


def test_no_grad_and_enable_grad_contexts_and_decorator():
    x = nv.ones(2, requires_grad=True)
    with nv.no_grad():
        assert not nv.is_grad_enabled()
        y = x * 2
        with nv.enable_grad():
            z = x * 2
    assert nv.is_grad_enabled()
    assert not y.requires_grad and z.requires_grad

    @nv.no_grad()
    def f(t):
        return t * 3
    assert not f(x).requires_grad
    with nv.set_grad_enabled(False):
        assert not (x + 1).requires_grad


def test_retain_grad_on_non_leaf():
    x = nv.tensor([1.0, 2.0], requires_grad=True)
    h = x * 3
    h.retain_grad()
    (h * h).sum().backward()
    assert h.grad.tolist() == [6.0, 12.0]
    assert x.grad.tolist() == [18.0, 36.0]


def test_functional_grad_does_not_touch_dot_grad():
    x = nv.tensor([0.5, -1.0], requires_grad=True)
    w = nv.tensor([2.0, 3.0], requires_grad=True)
    y = (x * w).tanh().sum()
    gx, gw = nv.autograd.grad(y, [x, w])
    t = np.tanh(np.array([1.0, -3.0]))
    np.testing.assert_allclose(gx.numpy(), (1 - t**2) * [2.0, 3.0], rtol=1e-5)
    np.testing.assert_allclose(gw.numpy(), (1 - t**2) * [0.5, -1.0], rtol=1e-5)
    assert x.grad is None and w.grad is None
    unused = nv.tensor([1.0], requires_grad=True)
    with pytest.raises(RuntimeError, match="input 0 .* was not used"):
        nv.autograd.grad((x * 2).sum(), [unused])
    assert nv.autograd.grad((x * 2).sum(), [unused, x], allow_unused=True)[0] is None


def test_gradient_wrt_non_leaf_and_inplace_rebinding():
    x = nv.tensor([1.0, 2.0], requires_grad=True)
    h = x * 2
    saved = h
    h = h.exp()               # rebinding the name does not change the recorded graph
    (g,) = nv.autograd.grad(h.sum(), [saved])
    np.testing.assert_allclose(g.numpy(), np.exp([2.0, 4.0]), rtol=1e-6)
    y = x * 1.0
    y.mul_(y)                 # in-place on a non-leaf is part of the graph
    y.sum().backward()
    assert x.grad.tolist() == [2.0, 4.0]


@pytest.mark.parametrize("write", ["setitem_const", "copy_const", "zero_", "fill_",
                                   "setitem_leaf", "copy_leaf"])
def test_overwriting_a_tensor_with_history_keeps_it_differentiable(write):
    """PyTorch's in-place copy into a tensor with history keeps requires_grad and passes
    a zero gradient to what it held: a constant written over ``h`` made it lose its
    history ("does not require grad"), and a leaf's value written over it left ``x``
    (what ``h`` was computed from) with no gradient, None, where PyTorch's is zeros
    (an optimizer steps a zero gradient and skips a None one)."""
    x = nv.tensor([1.0, 2.0], requires_grad=True)
    w = nv.tensor([3.0, 4.0], requires_grad=True)
    h = x * 2
    h.retain_grad()
    {"setitem_const": lambda: h.__setitem__(slice(None), nv.tensor([5.0, 6.0])),
     "copy_const": lambda: h.copy_(nv.tensor([5.0, 6.0])),
     "zero_": lambda: h.zero_(), "fill_": lambda: h.fill_(7.0),
     "setitem_leaf": lambda: h.__setitem__(slice(None), w),
     "copy_leaf": lambda: h.copy_(w)}[write]()
    assert h.requires_grad
    (h * 3 + x).sum().backward()
    assert h.grad.tolist() == [3.0, 3.0]
    assert x.grad.tolist() == [1.0, 1.0]               # the zero through h, plus 1
    assert w.grad is None if write.endswith(("const", "_")) else w.grad.tolist() == [3.0, 3.0]
    y = nv.tensor([1.0, 2.0], requires_grad=True)
    k = y * 2
    k[:] = 0.0
    k.sum().backward()
    assert y.grad.tolist() == [0.0, 0.0]


@pytest.mark.parametrize("name,fn", [
    ("tanh", lambda x: x.tanh()), ("exp", lambda x: (x * 0.5).exp()),
    ("matmul", lambda x: x @ x.T), ("softmax", lambda x: x.softmax(-1)),
])
def test_double_backward(name, fn):
    """create_graph=True makes the gradient itself differentiable: check d/dx of
    <grad f(x), v> by finite differences."""
    v = np.random.default_rng(1).uniform(0.5, 1.5, size=(2, 3))

    def grad_dot_v(x):
        (g,) = nv.autograd.grad(fn(x).sum(), [x], create_graph=True)
        return (g * nv.tensor(v)).sum()

    gradcheck(grad_dot_v, [np.random.default_rng(2).uniform(-1, 1, (2, 3))])


def test_double_backward_of_tanh_matches_closed_form():
    x = nv.tensor([0.3, -0.7], dtype=nv.float64, requires_grad=True)
    (g,) = nv.autograd.grad(x.tanh().sum(), [x], create_graph=True)
    (gg,) = nv.autograd.grad(g.sum(), [x])
    t = np.tanh([0.3, -0.7])
    np.testing.assert_allclose(gg.numpy(), -2 * t * (1 - t**2), rtol=1e-12)


def _mlp(x, w1, b1, w2, b2):
    return nv.gelu(x @ w1 + b1) @ w2 + b2


def test_two_layer_mlp_matches_finite_differences():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 5))
    params = [rng.standard_normal((5, 6)) * 0.5, rng.standard_normal(6) * 0.1,
              rng.standard_normal((6, 3)) * 0.5, rng.standard_normal(3) * 0.1]
    targets = nv.tensor([0, 2, 1, 1])

    def loss(w1, b1, w2, b2):
        logits = _mlp(nv.tensor(x), w1, b1, w2, b2)
        return -logits.log_softmax(-1).gather(1, targets.unsqueeze(1)).mean()

    gradcheck(loss, params)


def _attention(x, wq, wk, wv, wo):
    b, t, d = x.shape
    q, k, v = x @ wq, x @ wk, x @ wv
    att = (q @ k.transpose(-2, -1)) * (1.0 / np.sqrt(d))
    mask = nv.triu(nv.ones(t, t, dtype=nv.bool), 1)
    att = att.masked_fill(mask, float("-inf")).softmax(-1)
    y = att @ v
    mu = y.mean(-1, keepdim=True)
    normed = (y - mu) * nv.rsqrt(y.var(-1, keepdim=True, correction=0) + 1e-5)
    return x + normed @ wo


def test_causal_self_attention_block_matches_finite_differences():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 3, 4))
    ws = [rng.standard_normal((4, 4)) * 0.5 for _ in range(4)]
    gradcheck(lambda x_, *w: _attention(x_, *w).tanh(), [x] + ws, atol=1e-5, rtol=1e-4)


def test_dump_ir_shows_forward_and_backward_in_one_function():
    x = nv.tensor(np.ones((2, 3), np.float32))
    w = nv.tensor(np.ones((3, 3), np.float32), requires_grad=True)
    loss = (x @ w).tanh().sum() + (x @ w).exp().sum()   # x @ w written twice
    loss.backward()
    raw = nv.debug.dump_ir(loss, w.grad, stage="trace")
    ir = nv.debug.dump_ir(loss, w.grad)
    assert ir.count("func.func") == 1 and "nova.tanh" in ir and "nova.exp" in ir
    # Recorded: 2 forward matmuls + 2 weight-gradient matmuls, each gradient transposing x.
    assert raw.count("nova.matmul") == 4 and raw.count("nova.transpose") == 2
    # After CSE the forward product and x^T are computed once and shared.
    assert ir.count("nova.matmul") == 3 and ir.count("nova.transpose") == 1


def test_sgd_training_loop_compiles_once_and_loss_decreases(fresh_cache):
    rng = np.random.default_rng(0)
    true_w = rng.standard_normal((6, 3)).astype(np.float32)
    w1 = nv.tensor(rng.standard_normal((6, 16)).astype(np.float32) * 0.3, requires_grad=True)
    w2 = nv.tensor(rng.standard_normal((16, 3)).astype(np.float32) * 0.3, requires_grad=True)
    lr = nv.tensor(0.05)
    losses = []
    for step in range(50):
        xb = rng.standard_normal((32, 6)).astype(np.float32)
        x, y = nv.tensor(xb), nv.tensor(xb @ true_w)
        loss = ((nv.relu(x @ w1) @ w2 - y) ** 2).mean()
        loss.backward()
        with nv.no_grad():
            w1 -= lr * w1.grad
            w2 -= lr * w2.grad
        w1.grad = None
        w2.grad = None
        losses.append(loss.item())
    stats = nv.debug.cache_stats()
    assert (stats.misses, stats.hits) == (1, 49), str(stats)
    assert np.mean(losses[-5:]) < 0.5 * np.mean(losses[:5])
