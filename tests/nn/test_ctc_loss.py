"""F.ctc_loss and nn.CTCLoss (nova/nn/ctc.py) against a numpy alpha-beta reference
written here (float64 log space): losses and their exact gradients (the posterior of
each label), padded and concatenated targets, lengths as lists or tensors, unbatched
input, the three reductions; infinite losses with and without ``zero_infinity``, a
time step where a sample's alpha is all -inf, -inf log-probabilities; gradients by
finite differences; PyTorch's errors; and PyTorch itself where it is installed."""
import numpy as np
import pytest

import nova as nv
import nova.nn as nn
import nova.nn.functional as F

RNG = np.random.default_rng(0)
T, N, C = 6, 3, 5
LOGITS = RNG.standard_normal((T, N, C))
LP = LOGITS - np.log(np.exp(LOGITS).sum(2, keepdims=True))
TARGETS = np.array([[1, 2, 2], [3, 0, 0], [4, 1, 0]])     # sample 0 repeats a label
IN_LENS, TG_LENS = [6, 4, 5], [3, 1, 2]


def extended(target, blank):
    ext = [blank]
    for c in target:
        ext += [int(c), blank]
    return ext


def ctc_ref(lp, target, steps, blank=0):
    """One sample's loss and its gradient with respect to ``lp`` (T, C): the alpha and
    beta recursions in log space; the gradient is minus each label's posterior."""
    ext = extended(target, blank)
    width = len(ext)
    grad = np.zeros_like(lp)
    if steps == 0:
        return (0.0 if len(target) == 0 else np.inf), grad
    alpha = np.full((steps, width), -np.inf)
    beta = np.full((steps, width), -np.inf)
    alpha[0, :min(2, width)] = lp[0, ext[:2]]
    for t in range(1, steps):
        for s in range(width):
            terms = [alpha[t - 1, s - k] for k in (0, 1, 2) if s - k >= 0 and
                     (k < 2 or ext[s] != ext[s - 2])]
            alpha[t, s] = np.logaddexp.reduce(terms) + lp[t, ext[s]]
    beta[steps - 1, max(width - 2, 0):] = lp[steps - 1, ext[max(width - 2, 0):]]
    for t in range(steps - 2, -1, -1):
        for s in range(width):
            terms = [beta[t + 1, s + k] for k in (0, 1, 2) if s + k < width and
                     (k < 2 or ext[s] != ext[s + 2])]
            beta[t, s] = np.logaddexp.reduce(terms) + lp[t, ext[s]]
    ll = np.logaddexp.reduce(alpha[steps - 1, max(width - 2, 0):])
    if ll == -np.inf:
        return np.inf, np.full_like(lp, np.nan)
    for t in range(steps):
        for s in range(width):
            if alpha[t, s] > -np.inf and beta[t, s] > -np.inf:
                grad[t, ext[s]] -= np.exp(alpha[t, s] + beta[t, s] - lp[t, ext[s]] - ll)
    return -ll, grad


def batch_ref(lp, targets, in_lens, tg_lens, blank=0):
    pairs = [ctc_ref(lp[:, b], targets[b][:tg_lens[b]], in_lens[b], blank)
             for b in range(lp.shape[1])]
    return np.array([p[0] for p in pairs]), np.stack([p[1] for p in pairs], 1)


def test_losses_and_gradients_against_numpy():
    want, want_grad = batch_ref(LP, TARGETS, IN_LENS, TG_LENS)
    x = nv.tensor(LP, requires_grad=True)
    targets = nv.tensor(TARGETS)
    none = F.ctc_loss(x, targets, IN_LENS, TG_LENS, reduction="none")
    total = F.ctc_loss(x, targets, tuple(IN_LENS), TG_LENS, reduction="sum")
    mean = F.ctc_loss(x, targets, IN_LENS, TG_LENS)
    concatenated = F.ctc_loss(x, nv.tensor(np.array([1, 2, 2, 3, 4, 1])),
                              nv.tensor(IN_LENS), nv.tensor(np.array(TG_LENS, np.int32)),
                              reduction="none")
    single = F.ctc_loss(x[:, 2], targets[2], [5], nv.tensor(2), reduction="none")
    grad, = nv.autograd.grad(total, [x])
    # float32 goes through float64; the module, another blank (targets holding it),
    # empty targets and inputs
    x32 = F.ctc_loss(nv.tensor(LP.astype(np.float32)), targets, IN_LENS, TG_LENS,
                     reduction="none")
    module = nn.CTCLoss(blank=4, reduction="none")
    targets_b4 = np.array([[1, 4, 2], [3, 0, 0], [0, 0, 0]])
    b4 = module(x, nv.tensor(targets_b4), [6, 4, 0], [3, 0, 0])
    nv.realize(none, total, mean, concatenated, single, grad, x32, b4)
    np.testing.assert_allclose(none.numpy(), want, rtol=1e-13)
    np.testing.assert_allclose(total.item(), want.sum(), rtol=1e-13)
    np.testing.assert_allclose(mean.item(), (want / np.array(TG_LENS)).mean(), rtol=1e-13)
    np.testing.assert_array_equal(concatenated.numpy(), none.numpy())
    assert single.shape == () and single.item() == none.numpy()[2]
    np.testing.assert_allclose(grad.numpy(), want_grad, rtol=1e-12, atol=1e-15)
    assert not grad.numpy()[IN_LENS[1]:, 1].any()       # past sample 1's input: none
    assert x32.dtype == nv.float32                      # within an ulp or two
    want32, _ = batch_ref(LP.astype(np.float32).astype(np.float64), TARGETS, IN_LENS,
                          TG_LENS)
    np.testing.assert_allclose(x32.numpy(), want32, rtol=2.5e-7)
    want_b4, _ = batch_ref(LP, targets_b4, [6, 4, 0], [3, 0, 0], blank=4)
    np.testing.assert_allclose(b4.numpy(), want_b4, rtol=1e-13)
    assert str(module) == "CTCLoss()"


def test_gradients_by_finite_differences():
    lp = RNG.standard_normal((4, 2, 3))          # not normalized: the exact derivative

    def fn(x):
        return F.ctc_loss(x, nv.tensor(np.array([[1, 1], [2, 0]])), [4, 3], [2, 1])
    assert nv.autograd.gradcheck(fn, [lp])


def test_infinite_losses_and_minus_infinity():
    """Sample 0 cannot fit its target (inf: NaN gradients, or 0 and zero gradients with
    zero_infinity); sample 1 has a step of all -inf (the same); sample 2 has -inf
    log-probabilities that some alignments avoid (finite loss, finite gradient)."""
    lp = LP.copy()
    lp[2, 1, :] = -np.inf
    lp[1, 2, 1] = -np.inf
    in_lens, tg_lens = [2, 4, 5], [3, 1, 2]
    want, want_grad = batch_ref(lp, TARGETS, in_lens, tg_lens)
    assert np.isinf(want[:2]).all() and np.isfinite(want[2])
    x = nv.tensor(lp, requires_grad=True)
    plain = F.ctc_loss(x, nv.tensor(TARGETS), in_lens, tg_lens, reduction="none")
    zeroed = F.ctc_loss(x, nv.tensor(TARGETS), in_lens, tg_lens, reduction="none",
                        zero_infinity=True)
    g_plain, = nv.autograd.grad(plain.sum(), [x])
    g_zeroed, = nv.autograd.grad(zeroed.sum(), [x])
    # no input steps: a loss of 0 for an empty target, else inf
    no_steps = F.ctc_loss(x, nv.tensor(TARGETS), [0, 0, 5], [0, 1, 2], reduction="none")
    nv.realize(plain, zeroed, g_plain, g_zeroed, no_steps)
    np.testing.assert_allclose(plain.numpy(), want, rtol=1e-13)
    np.testing.assert_allclose(zeroed.numpy(), [0.0, 0.0, want[2]], rtol=1e-13)
    assert np.isnan(g_plain.numpy()[:, 0]).any() and np.isnan(g_plain.numpy()[:, 1]).any()
    np.testing.assert_allclose(g_plain.numpy()[:, 2], want_grad[:, 2], rtol=1e-12,
                               atol=1e-15)
    expected = want_grad.copy()
    expected[:, :2] = 0.0
    np.testing.assert_allclose(g_zeroed.numpy(), expected, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(no_steps.numpy(), [0.0, np.inf, want[2]], rtol=1e-13)


def test_errors():
    x, targets = nv.tensor(LP), nv.tensor(TARGETS)
    with pytest.raises(ValueError, match="bogus is not a valid value for reduction"):
        F.ctc_loss(x, targets, IN_LENS, TG_LENS, reduction="bogus")
    with pytest.raises(RuntimeError, match=r"blank must be in label range \[0, 5\)"):
        F.ctc_loss(x, targets, IN_LENS, TG_LENS, blank=5)
    with pytest.raises(RuntimeError, match=r"input_lengths must be of size batch_size \(3\)"):
        F.ctc_loss(x, targets, [6, 6], TG_LENS)
    with pytest.raises(RuntimeError, match="target_lengths must be of size batch_size"):
        F.ctc_loss(x, targets, IN_LENS, [1])
    with pytest.raises(RuntimeError, match=r"input_lengths must lie in \[0, 6\]"):
        F.ctc_loss(x, targets, [7, 4, 5], TG_LENS)
    with pytest.raises(RuntimeError, match=r"input_lengths must lie in \[0, 6\]"):
        F.ctc_loss(x, targets, [-1, 4, 5], TG_LENS)
    with pytest.raises(RuntimeError, match="target_lengths must be at least 0"):
        F.ctc_loss(x, targets, IN_LENS, [3, -1, 2])
    with pytest.raises(RuntimeError, match="at least 4 entries per sample"):
        F.ctc_loss(x, targets, IN_LENS, [4, 1, 2])
    with pytest.raises(RuntimeError, match=r"must hold sum\(target_lengths\) = 6 entries"):
        F.ctc_loss(x, nv.tensor([1, 2, 3]), IN_LENS, TG_LENS)
    with pytest.raises(RuntimeError, match="input_lengths must be integral"):
        F.ctc_loss(x, targets, nv.tensor([6.0, 4.0, 5.0]), TG_LENS)
    with pytest.raises(TypeError, match="must be a tuple or list of ints"):
        F.ctc_loss(x[:, 0], targets[0], 6, 3)
    with pytest.raises(ValueError, match=r"target values must lie in \[0, 5\) .* got 7"):
        F.ctc_loss(x, nv.tensor([[1, 7, 2], [3, 9, 9], [4, 1, 9]]), IN_LENS, TG_LENS)
    with pytest.raises(RuntimeError, match=r"expected log_probs of shape \(T, N, C\)"):
        F.ctc_loss(x.unsqueeze(0), targets, IN_LENS, TG_LENS)
    with pytest.raises(TypeError, match="targets must be int32 or int64"):
        F.ctc_loss(x, nv.tensor(TARGETS.astype(np.float32)), IN_LENS, TG_LENS)
    with pytest.raises(RuntimeError, match="log_probs tensor must not be empty"):
        F.ctc_loss(nv.zeros(0, 3, 5), targets, [0, 0, 0], [0, 0, 0])


def test_against_torch():
    torch = pytest.importorskip("torch")
    for zero_infinity, in_lens in ((False, IN_LENS), (True, [2, 4, 5])):
        t = torch.tensor(LOGITS, requires_grad=True)
        want = torch.nn.functional.ctc_loss(t.log_softmax(2), torch.tensor(TARGETS), in_lens,
                                            TG_LENS, zero_infinity=zero_infinity)
        want.backward()
        x = nv.tensor(LOGITS, requires_grad=True)
        got = F.ctc_loss(x.log_softmax(2), nv.tensor(TARGETS), in_lens, TG_LENS,
                         zero_infinity=zero_infinity)
        got.backward()
        np.testing.assert_allclose(got.item(), want.item(), rtol=1e-13)
        np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), rtol=1e-10, atol=1e-15)
    # with respect to log_probs themselves, PyTorch's kernel adds exp(log_probs) (the
    # gradient for the logits of a log_softmax) over each sample's input steps
    t = torch.tensor(LP, requires_grad=True)
    torch.nn.functional.ctc_loss(t, torch.tensor(TARGETS), IN_LENS, TG_LENS,
                                 reduction="sum").backward()
    x = nv.tensor(LP, requires_grad=True)
    F.ctc_loss(x, nv.tensor(TARGETS), IN_LENS, TG_LENS, reduction="sum").backward()
    inside = np.arange(T)[:, None, None] < np.array(IN_LENS)[None, :, None]
    np.testing.assert_allclose(x.grad.numpy() + np.exp(LP) * inside, t.grad.numpy(),
                               rtol=1e-10, atol=1e-15)
