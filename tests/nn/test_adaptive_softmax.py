"""nn.AdaptiveLogSoftmaxWithLoss (nova/nn/adaptive.py) against a numpy reference of the
adaptive softmax written here: forward (batched and unbatched), log_prob, predict
(shortlist and cluster choices), gradients by finite differences, PyTorch's errors;
and PyTorch itself, loading its state_dict, where it is installed."""
import numpy as np
import pytest

import nova as nv
import nova.nn as nn

RNG = np.random.default_rng(0)
CUTOFFS, N_CLASSES, FEATURES = [3, 7], 12, 8
X = RNG.standard_normal((6, FEATURES))
Y = np.array([0, 4, 11, 2, 7, 5])


def log_softmax(z):
    z = z - z.max(axis=1, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=1, keepdims=True))


def full_log_prob_ref(params, x, cutoffs):
    """(N, n_classes): the head's shortlist, then each cluster's log-softmax plus the
    cluster's entry in the head's log-softmax."""
    head = x @ params["head.weight"].T + params.get("head.bias", 0.0)
    head_lp = log_softmax(head)
    parts = [head_lp[:, :cutoffs[0]]]
    for i in range(len(cutoffs) - 1):
        hidden = x @ params[f"tail.{i}.0.weight"].T
        cluster_lp = log_softmax(hidden @ params[f"tail.{i}.1.weight"].T)
        parts.append(cluster_lp + head_lp[:, cutoffs[0] + i, None])
    return np.concatenate(parts, axis=1)


def numpy_params(module):
    return {k: v.numpy().astype(np.float64) for k, v in module.state_dict().items()}


def test_forward_log_prob_and_predict_against_numpy():
    nv.manual_seed(0)
    m = nn.AdaptiveLogSoftmaxWithLoss(FEATURES, N_CLASSES, CUTOFFS, div_value=2.0,
                                      head_bias=True, dtype=nv.float64)
    assert list(m.state_dict()) == ["head.weight", "head.bias", "tail.0.0.weight",
                                    "tail.0.1.weight", "tail.1.0.weight", "tail.1.1.weight"]
    assert [tuple(p.shape) for p in m.parameters()] == [(5, 8), (5,), (4, 8), (4, 4),
                                                        (2, 8), (5, 2)]
    with nv.no_grad():                  # make the head favour the clusters for some rows
        m.head.bias.copy_(nv.tensor([0.0, 0.0, 0.0, 0.4, 0.4], dtype=nv.float64))
    p = numpy_params(m)
    full = full_log_prob_ref(p, X, CUTOFFS + [N_CLASSES])
    x, y = nv.tensor(X), nv.tensor(Y)
    out, loss = m(x, y)
    log_prob, predicted = m.log_prob(x), m.predict(x)
    single = m(x[2], y[2])
    nv.realize(out, loss, log_prob, predicted, single.output, single.loss)
    want = full[np.arange(6), Y]
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-12)
    np.testing.assert_allclose(loss.item(), -want.mean(), rtol=1e-12)
    np.testing.assert_allclose(log_prob.numpy(), full, rtol=1e-12)
    np.testing.assert_allclose(np.exp(log_prob.numpy()).sum(1), 1.0, rtol=1e-12)
    head_choice = np.argmax(X @ p["head.weight"].T + p["head.bias"], axis=1)
    assert (head_choice < 3).any() and (head_choice >= 3).any()      # both paths taken
    np.testing.assert_array_equal(predicted.numpy(), full.argmax(1))
    assert single.output.shape == () and single.loss.shape == ()
    np.testing.assert_allclose(single.output.item(), want[2], rtol=1e-12)
    np.testing.assert_allclose(single.loss.item(), -want[2], rtol=1e-12)
    # only the shortlist (one cluster holding the rest), float32, int32 targets
    s = nn.AdaptiveLogSoftmaxWithLoss(4, 3, [2])
    xs = RNG.standard_normal((3, 4)).astype(np.float32)
    got = s(nv.tensor(xs), nv.tensor(np.array([0, 2, 1], np.int32))).output
    ref = full_log_prob_ref(numpy_params(s), xs.astype(np.float64), [2, 3])
    np.testing.assert_allclose(got.numpy(), ref[[0, 1, 2], [0, 2, 1]], rtol=1e-6)


def test_gradients_by_finite_differences():
    nv.manual_seed(1)
    m = nn.AdaptiveLogSoftmaxWithLoss(4, 6, [2, 4], div_value=2.0, head_bias=True,
                                      dtype=nv.float64)
    names = list(m.state_dict())
    target = nv.tensor(np.array([0, 3, 5, 2]))

    def fn(x, *weights):
        result = nv.func.functional_call(m, dict(zip(names, weights)), (x, target))
        return result.output, result.loss
    x = RNG.standard_normal((4, 4))
    assert nv.autograd.gradcheck(fn, [x] + [v.numpy() for v in m.state_dict().values()])


@pytest.mark.filterwarnings("ignore:nova. a step computing")
def test_errors():
    with pytest.raises(ValueError, match="length larger than 0"):
        nn.AdaptiveLogSoftmaxWithLoss(4, 10, [])
    for bad in ([5, 3], [0, 3], [3, 10], [3, 3], [2.5, 4]):
        with pytest.raises(ValueError, match="unique, positive integers sorted"):
            nn.AdaptiveLogSoftmaxWithLoss(4, 10, bad)
    m = nn.AdaptiveLogSoftmaxWithLoss(4, 10, [3])
    x = nv.randn(3, 4)
    with pytest.raises(RuntimeError, match="same size in the batch dimension"):
        m(x, nv.tensor([0, 1]))
    with pytest.raises(RuntimeError, match="1D target tensor expects 2D input"):
        m(nv.randn(3, 4, 1), nv.tensor([0, 1, 2]))
    with pytest.raises(RuntimeError, match="0D target tensor expects 1D input"):
        m(x, nv.tensor(1))
    with pytest.raises(RuntimeError, match="multi-target not supported"):
        m(x, nv.tensor([[0, 1, 2]]))
    with pytest.raises(TypeError, match="class indices"):
        m(x, nv.tensor([0.0, 1.0, 2.0]))
    with pytest.raises(RuntimeError, match=r"Target values should be in \[0, 9\], but "
                                           r"values in range \[0, 10\]"):
        m(x, nv.tensor([0, 10, 2]))
    with pytest.raises(RuntimeError, match=r"values in range \[-1, 2\]"):
        m(x, nv.tensor([-1, 1, 2]))
    computed = nv.tensor([0, 5, 2]) * 2            # 10: out of range, found by the step
    with pytest.raises(nv.RealizationError, match="index values must lie in"):
        m(x, computed).output.numpy()
    with pytest.raises(ValueError, match=r"log_prob: expected an input of shape \(N, 4\)"):
        m.log_prob(nv.randn(4))
    with pytest.raises(ValueError, match=r"predict: expected an input of shape \(N, 4\)"):
        m.predict(nv.randn(3, 5))


@pytest.mark.filterwarnings("ignore:Initializing zero-element tensors")
def test_against_torch():
    """Default div_value: the last cluster's projection has 8 // 16 = 0 features."""
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    t = torch.nn.AdaptiveLogSoftmaxWithLoss(FEATURES, N_CLASSES, CUTOFFS, head_bias=True)
    m = nn.AdaptiveLogSoftmaxWithLoss(FEATURES, N_CLASSES, CUTOFFS, head_bias=True)
    m.load_state_dict({k: nv.tensor(v.numpy()) for k, v in t.state_dict().items()})
    x32 = X.astype(np.float32)
    tx = torch.tensor(x32, requires_grad=True)
    tout = t(tx, torch.tensor(Y))
    tout.loss.backward()
    x = nv.tensor(x32, requires_grad=True)
    out = m(x, nv.tensor(Y))
    out.loss.backward()
    np.testing.assert_allclose(out.output.numpy(), tout.output.detach().numpy(), rtol=1e-5)
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-4, atol=1e-6)
    for (name, p), (_, q) in zip(m.named_parameters(), t.named_parameters()):
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-4, atol=1e-6,
                                   err_msg=name)
    np.testing.assert_allclose(m.log_prob(nv.tensor(x32)).numpy(),
                               t.log_prob(torch.tensor(x32)).detach().numpy(), rtol=1e-5)
    np.testing.assert_array_equal(m.predict(nv.tensor(x32)).numpy(),
                                  t.predict(torch.tensor(x32)).numpy())
