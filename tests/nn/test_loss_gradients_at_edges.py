"""Gradients where the softplus family and the binary cross entropy are easy to get
wrong, against numpy formulas: at exactly 0 (the stable softplus ``max(x, 0) +
log1p(exp(-|x|))`` has kinks there whose derivatives must add up to sigmoid(0) = 0.5)
and at saturated probabilities (``binary_cross_entropy``'s gradient is PyTorch's
``(p - y) / max(p (1 - p), 1e-12)``: 0 or +-1e12 where the clamped logs' derivative
is NaN)."""
import numpy as np
import pytest

import nova as nv
import nova.nn.functional as F
from nova.autograd.gradcheck import gradcheck
from tests.helpers import assert_close


def _sigmoid(v):
    return 1.0 / (1.0 + np.exp(-np.asarray(v, np.float64)))


def _f32(a):
    return nv.tensor(a, dtype=nv.float32)


X = np.array([0.0, -0.0, 1e-3, -1e-3])       # exactly 0 (both signs) and next to it
Y = np.array([0.0, 1.0, 1.0, 0.0])
LABELS = np.array([1.0, -1.0, 1.0, -1.0])
W = np.array([0.5, 2.0, 1.5, 1.0])
POS = np.array([3.0, 0.5, 2.0, 1.0])


def _first_order_cases():
    """(name, function of one float32 leaf, expected gradient at ``X``[, absolute
    tolerance]) per function built on the stable softplus."""
    n, s, sig = len(X), _sigmoid(X), _sigmoid
    var = np.log1p(np.exp(X))                       # gaussian_nll_loss's softplus(x) variance
    d = np.array([0.0, 1.0, -2.0, 0.5])            # its input - target
    bern = nv.distributions
    return [
        ("softplus", lambda x: F.softplus(x).sum(), s),
        ("softplus beta=2", lambda x: F.softplus(x, beta=2.0, threshold=1.0).sum(), sig(2 * X)),
        ("nn.Softplus", lambda x: nv.nn.Softplus()(x).sum(), s),
        ("logsigmoid", lambda x: F.logsigmoid(x).sum(), sig(-X)),
        ("nn.LogSigmoid", lambda x: nv.nn.LogSigmoid()(x).sum(), sig(-X)),
        ("bce_with_logits", lambda x: F.binary_cross_entropy_with_logits(x, _f32(Y)),
         (s - Y) / n),
        ("bce_with_logits weight pos_weight",
         lambda x: F.binary_cross_entropy_with_logits(x, _f32(Y), _f32(W),
                                                      reduction="sum", pos_weight=_f32(POS)),
         W * ((1 - Y) * s - POS * Y * sig(-X))),
        ("BCEWithLogitsLoss", lambda x: nv.nn.BCEWithLogitsLoss()(x, _f32(Y)), (s - Y) / n),
        ("soft_margin_loss", lambda x: F.soft_margin_loss(x, _f32(LABELS)),
         -LABELS * sig(-LABELS * X) / n),
        ("multilabel_soft_margin_loss",
         lambda x: F.multilabel_soft_margin_loss(x.reshape(2, 2), _f32(Y.reshape(2, 2)),
                                                 _f32(W[:2])),
         (np.tile(W[:2], 2) * (s - Y) / n)),
        ("Bernoulli.log_prob", lambda x: bern.Bernoulli(logits=x).log_prob(_f32(Y)).sum(),
         Y - s),
        # (its terms, ~0.35, cancel to ~2.5e-4: a float32 rounding of them is ~3e-8)
        ("Bernoulli.entropy", lambda x: bern.Bernoulli(logits=x).entropy().sum(),
         -X * s * sig(-X), 6e-8),
        ("kl Bernoulli", lambda x: bern.kl_divergence(bern.Bernoulli(logits=_f32(POS)),
                                                      bern.Bernoulli(logits=x)).sum(),
         s - sig(POS)),
        ("gaussian_nll_loss softplus var",
         lambda x: F.gaussian_nll_loss(_f32(d), nv.zeros(n, dtype=nv.float32), F.softplus(x)),
         0.5 * (1 / var - d * d / var**2) * s / n),
    ]


def test_softplus_family_first_derivatives_at_and_next_to_zero():
    cases = _first_order_cases()
    leaves = [nv.tensor(X, dtype=nv.float32, requires_grad=True) for _ in cases]
    total = sum(f(x) for (_, f, *_), x in zip(cases, leaves))
    grads = nv.autograd.grad(total, leaves)
    nv.realize(*grads)
    for (name, _, expected, *atol), g in zip(cases, grads):
        got = g.numpy()
        assert got.dtype == np.float32 and np.isfinite(got).all(), name
        np.testing.assert_allclose(got, expected.astype(np.float32), rtol=4e-7,
                                   atol=atol[0] if atol else 1e-12, err_msg=name)
    # exactly PyTorch's 0.5 and 0.125 at 0
    assert grads[0].numpy()[:2].tolist() == [0.5, 0.5]
    assert grads[5].numpy().tolist()[:2] == [0.125, -0.125]


def test_softplus_and_logsigmoid_second_derivatives_and_values():
    """In float64, the far tails and the infinities included (finite derivatives there)."""
    x = nv.tensor(np.concatenate([X, [0.6, -30.0, 30.0, np.inf, -np.inf]]), dtype=nv.float64,
                  requires_grad=True)
    v = x.detach().numpy()
    outs = [F.softplus(x), F.logsigmoid(x), F.softplus(x, beta=2.0, threshold=1.0)]
    firsts = [nv.autograd.grad(o.sum(), x, create_graph=True)[0] for o in outs]
    seconds = [nv.autograd.grad(g.sum(), x)[0] for g in firsts]
    nv.realize(*outs, *firsts, *seconds)
    s, bx = _sigmoid(v), 2 * v
    slope = s * _sigmoid(-v)                        # sigmoid', without 1 - s cancelling
    past = bx > 1.0                                 # softplus's threshold: x itself
    assert_close(outs[0].numpy(), np.where(v > 20, v, np.logaddexp(0.0, v)), rtol=1e-15, atol=0)
    assert_close(outs[1].numpy(), -np.logaddexp(0.0, -v), rtol=1e-15, atol=0)  # no threshold
    assert_close(outs[2].numpy(), np.where(past, v, np.logaddexp(0.0, bx) / 2), rtol=1e-15,
                 atol=0)
    assert not np.signbit(outs[1].numpy()[7])       # logsigmoid(inf) is +0, as PyTorch's
    assert_close(firsts[0].numpy(), np.where(v > 20, 1.0, s), rtol=1e-15, atol=0)
    assert_close(firsts[1].numpy(), _sigmoid(-v), rtol=1e-15, atol=0)
    assert_close(firsts[2].numpy(), np.where(past, 1.0, _sigmoid(bx)), rtol=1e-15, atol=0)
    assert_close(seconds[0].numpy(), np.where(v > 20, 0.0, slope), rtol=1e-14, atol=1e-300)
    assert_close(seconds[1].numpy(), -slope, rtol=1e-14, atol=1e-300)
    assert_close(seconds[2].numpy(), np.where(past, 0.0, 2 * _sigmoid(bx) * _sigmoid(-bx)),
                 rtol=1e-14, atol=1e-300)
    assert seconds[0].numpy()[:2].tolist() == [0.25, 0.25]


def test_softplus_family_finite_differences_away_from_zero():
    x = np.array([-3.1, -0.7, 0.4, 2.5])
    y, t = nv.tensor(Y), nv.tensor(LABELS)
    assert gradcheck(lambda v: (
        F.softplus(v), F.softplus(v, beta=2.0, threshold=3.0), F.logsigmoid(v),
        F.binary_cross_entropy_with_logits(v, y, nv.tensor(W), reduction="none",
                                           pos_weight=nv.tensor(POS)),
        F.soft_margin_loss(v, t, reduction="none"),
        F.multilabel_soft_margin_loss(v.reshape(2, 2), y.reshape(2, 2), reduction="none"),
        nv.distributions.Bernoulli(logits=v).log_prob(y),
        F.gaussian_nll_loss(t, nv.zeros(4, dtype=nv.float64), F.softplus(v), reduction="none"),
        nv.autograd.grad(F.softplus(v).sum(), v, create_graph=True)[0]), [x])


def _torch_bce_grad(p, y, w, scale):
    """PyTorch's binary_cross_entropy backward, in ``p``'s float type."""
    eps = np.asarray(1e-12, p.dtype)
    return scale * w * (p - y) / np.maximum(p * (1 - p), eps)


def test_binary_cross_entropy_saturated_probabilities():
    # sigmoid(20) is 1.0 in float32: a confident correct prediction, gradient 0
    x = nv.tensor([20.0, -20.0], requires_grad=True)
    p32 = _sigmoid([20.0, -20.0]).astype(np.float32)
    loss1 = F.binary_cross_entropy(x.sigmoid(), nv.tensor([1.0, 0.0]))
    # saturated probabilities themselves, right and wrong
    right = nv.tensor([1.0, 0.0], requires_grad=True)
    loss2 = F.binary_cross_entropy(right, nv.tensor([1.0, 0.0]))
    wrong = nv.tensor([1.0, 0.0], requires_grad=True)
    loss3 = nv.nn.BCELoss()(wrong, nv.tensor([0.0, 1.0]))
    # weight, sum, soft targets (one next to p: -y/p + (1-y)/(1-p) would cancel), and
    # the target's gradient (the clamped logs': finite)
    P = np.array([0.3, 0.9, 1.0, 0.0, 0.3], np.float32)
    T = np.array([0.2, 1.0, 0.0, 1.0, 0.3000001], np.float32)
    W5 = np.append(W, 3.0)
    p4, y4 = nv.tensor(P, requires_grad=True), nv.tensor(T, requires_grad=True)
    loss4 = F.binary_cross_entropy(p4, y4, _f32(W5), reduction="sum")
    # float64: 1 - 1e-13 is inside the clamp of p (1 - p) at 1e-12
    p5 = nv.tensor([1 - 1e-13, 1e-13, 0.5], dtype=nv.float64, requires_grad=True)
    loss5 = F.binary_cross_entropy(p5, nv.tensor([0.0, 0.0, 1.0], dtype=nv.float64),
                                   reduction="none")
    grads = nv.autograd.grad(loss1 + loss2 + loss3 + loss4 + loss5.sum(),
                             [x, right, wrong, p4, y4, p5])
    nv.realize(loss1, loss2, loss3, loss4, loss5, *grads)
    gx, g_right, g_wrong, g4, gy4, g5 = (g.numpy() for g in grads)
    for g in grads:
        assert np.isfinite(g.numpy()).all()
    dp = _torch_bce_grad(p32, np.float32([1, 0]), 1, np.float32(0.5))
    assert_close(gx, (dp * p32 * (1 - p32)).astype(np.float32), rtol=1e-6, atol=0)
    assert gx[0] == 0.0 and gx[1] > 0
    assert g_right.tolist() == [0.0, 0.0] and loss2.item() == 0.0
    assert loss3.item() == 100.0                       # each log clamped at -100
    assert_close(g_wrong, _torch_bce_grad(np.float32([1, 0]), np.float32([0, 1]), 1,
                                          np.float32(0.5)), rtol=1e-7, atol=0)
    assert_close(g4, _torch_bce_grad(P, T, W5.astype(np.float32), 1), rtol=1e-6, atol=0)
    with np.errstate(divide="ignore"):
        log_p, log_q = np.maximum(np.log(P), -100), np.maximum(np.log1p(-P), -100)
    assert_close(gy4, W5 * (log_q - log_p), rtol=1e-6, atol=0)
    assert_close(loss4.item(), -(W5 * (T * log_p + (1 - T) * log_q)).sum(), rtol=1e-6)
    p = np.array([1 - 1e-13, 1e-13, 0.5])
    assert_close(g5, _torch_bce_grad(p, np.array([0.0, 0.0, 1.0]), 1, 1.0), rtol=1e-15, atol=0)
    assert_close(loss5.numpy(), [-np.log1p(-p[0]), -np.log1p(-p[1]), np.log(2)], rtol=1e-15)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_binary_cross_entropy_half_gradient_is_rounded_from_float32(dtype):
    """The gradient is PyTorch's formula in float32, rounded once (float16 cannot hold
    1e-12: PyTorch's float16 gives NaN for p = y = 1; 1e12 overflows to inf)."""
    P = np.array([1.0, 0.0, 1.0, 0.0, 0.25], np.float32)
    T = np.array([1.0, 0.0, 0.0, 1.0, 0.5], np.float32)
    p = nv.tensor(P, dtype=getattr(nv, dtype), requires_grad=True)
    loss = F.binary_cross_entropy(p, nv.tensor(T, dtype=getattr(nv, dtype)), reduction="none")
    g, = nv.autograd.grad(loss.sum(), p)
    assert g.dtype == getattr(nv, dtype) and loss.dtype == getattr(nv, dtype)
    got = g.to(nv.float32).numpy()
    expected = _torch_bce_grad(P, T, 1, 1)
    assert got[:2].tolist() == [0.0, 0.0]
    assert_close(got[4], expected[4], rtol=2**-8, atol=0)
    if dtype == "float16":
        assert got[2:4].tolist() == [np.inf, -np.inf]
    else:
        assert_close(got[2:4], expected[2:4], rtol=2**-8, atol=0)
    assert_close(loss.to(nv.float32).numpy(), [0.0, 0.0, 100.0, 100.0, -np.log(0.75 * 0.25) / 2],
                 rtol=2**-7, atol=0)


def test_binary_cross_entropy_double_backward():
    """The backward differentiates: d/dp of (p - y) / (p (1 - p)) is (p (1 - p) - (p -
    y)(1 - 2p)) / (p (1 - p))^2 inside the clamp (PyTorch's double-backward formula,
    whose 1e-12 shifts it by ~1e-11 relative)."""
    P, T = np.array([0.3, 0.9, 0.05]), np.array([0.2, 1.0, 0.0])
    p = nv.tensor(P, dtype=nv.float64, requires_grad=True)
    g, = nv.autograd.grad(F.binary_cross_entropy(p, nv.tensor(T), reduction="sum"), p,
                          create_graph=True)
    h, = nv.autograd.grad(g.sum(), p)
    q = P * (1 - P)
    assert_close(g.numpy(), (P - T) / q, rtol=1e-15, atol=0)
    assert_close(h.numpy(), (q - (P - T) * (1 - 2 * P)) / q**2, rtol=1e-10, atol=0)
    assert gradcheck(lambda v, t: F.binary_cross_entropy(v, t, reduction="none"), [P, T])


def test_huber_and_smooth_l1_second_derivatives_at_zero_difference():
    """Inside the quadratic piece the second derivative is 1 / beta (huber: 1), at
    d = 0 too: the square was of |d|, whose slope 0 there made it 0. Outside (|d| >=
    beta, the linear piece) it is 0."""
    X0 = np.array([-1.0, 0.3, 2.0, 0.5, 0.0])
    T0 = np.array([-1.0, 0.1, -1.0, 0.0, 0.0])       # d = 0, 0.2, 3, 0.5 (the edge), 0
    inner = np.array([1.0, 1.0, 0.0, 0.0, 1.0])
    for loss, second in ((lambda x, t: F.huber_loss(x, t, reduction="sum", delta=0.5), inner),
                         (lambda x, t: F.smooth_l1_loss(x, t, reduction="sum", beta=0.5),
                          inner / 0.5)):
        x = nv.tensor(X0, dtype=nv.float64, requires_grad=True)
        t = nv.tensor(T0, dtype=nv.float64, requires_grad=True)
        gx, = nv.autograd.grad(loss(x, t), x, create_graph=True)
        hxx, hxt = nv.autograd.grad(gx.sum(), [x, t])
        assert_close(hxx.numpy(), second, rtol=0, atol=0)
        assert_close(hxt.numpy(), -second, rtol=0, atol=0)


def test_gradients_match_pytorch():
    torch = pytest.importorskip("torch")
    P = np.array([1.0, 0.0, 1.0, 0.0, 0.3, 0.3], np.float32)
    T = np.array([1.0, 0.0, 0.0, 1.0, 0.2, 0.3000001], np.float32)

    def run(lib, F):
        p = lib.tensor(P, requires_grad=True)
        x = lib.tensor(X.astype(np.float32), requires_grad=True)
        loss = (F.binary_cross_entropy(p, lib.tensor(T))
                + F.binary_cross_entropy_with_logits(x, lib.tensor(Y), lib.tensor(W),
                                                     pos_weight=lib.tensor(POS))
                + F.softplus(x, beta=2.0).sum() + F.logsigmoid(x).sum())
        loss.backward()
        return p.grad.numpy(), x.grad.numpy()

    for got, expected in zip(run(nv, F), run(torch, torch.nn.functional)):
        assert_close(got, expected, rtol=1e-6, atol=0)


def test_soft_margin_loss_has_no_threshold_switch():
    """``softplus``'s threshold (x itself past 20) is not PyTorch's soft margin loss,
    ``log(1 + exp(-y x))``: in float64 the switch loses exp(-25) at x = -25."""
    x = nv.tensor(np.array([-25.0, 30.0], np.float64))
    got = F.soft_margin_loss(x, nv.tensor(np.array([1.0, -1.0])), reduction="none").numpy()
    want = np.array([25.0, 30.0]) + np.log1p(np.exp([-25.0, -30.0]))
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-14)   # the switch: 1.4e-11 off


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_norms_of_half_inputs_accumulate_in_float32(dtype):
    """Values past 256 square past float16's range: the norms compute their statistics
    (and the normalized output) in float32 and round once, as PyTorch's kernels do."""
    half = getattr(nv, dtype)
    x64 = np.arange(2 * 4 * 512, dtype=np.float64).reshape(2, 4, 512) % 1021
    x = nv.tensor(x64).to(half)
    xr = x.double().numpy()                 # the half values, exactly

    def standardize(a, axes):
        c = a - a.mean(axes, keepdims=True)
        return c / np.sqrt((c * c).mean(axes, keepdims=True) + 1e-5)
    bn = nv.nn.BatchNorm1d(4).to(half)
    outs = [F.layer_norm(x, (512,)), F.rms_norm(x, (512,)), F.group_norm(x, 2),
            F.instance_norm(x), bn(x)]
    wants = [standardize(xr, 2),
             xr / np.sqrt((xr * xr).mean(2, keepdims=True) + 1e-6),
             standardize(xr.reshape(2, 2, -1), 2).reshape(xr.shape),
             standardize(xr, 2), standardize(xr, (0, 2))]
    nv.realize(*outs, bn.running_mean, bn.running_var)
    for o, w in zip(outs, wants):
        assert o.dtype == half
        got = o.double().numpy()
        assert np.isfinite(got).all()
        np.testing.assert_allclose(got, w, rtol=2e-2 if dtype == "bfloat16" else 2e-3,
                                   atol=1e-2)
    np.testing.assert_allclose(bn.running_mean.double().numpy(),
                               0.1 * xr.mean((0, 2)), rtol=1e-2)
    with pytest.raises(ValueError, match="normalized_shape must have at least one dim"):
        F.layer_norm(x, ())


def test_a_compiled_bce_step_replays_and_matches_the_recorded_loop():
    """BCE's backward is a custom Function promising ``pure_backward``: ``nv.compile``
    replays the step (it recorded every call before) with the uncompiled loop's
    parameters, bit for bit."""
    rng = np.random.default_rng(0)
    xs = [rng.standard_normal((8, 3)).astype(np.float32) for _ in range(5)]
    ys = [(rng.random((8, 1)) > 0.5).astype(np.float32) for _ in range(5)]

    def train(compiled):
        nv.manual_seed(0)
        lin = nv.nn.Linear(3, 1)
        opt = nv.optim.SGD(lin.parameters(), lr=0.5)

        def step(x, y):
            opt.zero_grad()
            loss = F.binary_cross_entropy(lin(x).sigmoid(), y)
            loss.backward()
            opt.step()
            return loss
        run = nv.compile(step) if compiled else step
        losses = [run(nv.tensor(x), nv.tensor(y)).item() for x, y in zip(xs, ys)]
        return losses, [p.numpy() for p in lin.parameters()], getattr(run, "replays", 0)
    ref, ref_params, _ = train(False)
    got, params, replays = train(True)
    assert replays >= 2 and got == ref
    for a, b in zip(params, ref_params):
        np.testing.assert_array_equal(a, b)


def test_binary_cross_entropy_second_derivative_is_pytorchs_where_the_clamp_holds():
    """d/dp of the gradient ``g (p - y) / max(p (1 - p), 1e-12)`` differentiated as a
    formula is ``g / 1e-12`` wherever the clamp holds: 1e12 for saturated predictions,
    right ones included. PyTorch's double backward, ``g (p^2 - 2 p y + y) / ((p + eps)^2
    (1 - p + eps)^2)``, is 0 there; in the target, ``-g / max(p (1 - p), eps)``."""
    p_ = np.array([0.0, 1.0, 1e-13, 0.3, 0.7])
    y_ = np.array([0.0, 1.0, 0.0, 0.3, 0.2])
    w_ = np.arange(1.0, 6.0)
    p = nv.tensor(p_, dtype=nv.float64, requires_grad=True)
    y = nv.tensor(y_, dtype=nv.float64, requires_grad=True)
    (g,) = nv.autograd.grad(F.binary_cross_entropy(p, y, reduction="sum"), [p],
                            create_graph=True)
    hp, hy = nv.autograd.grad((g * nv.tensor(w_, dtype=nv.float64)).sum(), [p, y])
    eps = 1e-12
    want_p = w_ * (p_ ** 2 - 2 * p_ * y_ + y_) / ((p_ + eps) ** 2 * (1 - p_ + eps) ** 2)
    want_y = -w_ / np.maximum(p_ * (1 - p_), eps)
    np.testing.assert_allclose(hp.numpy(), want_p, rtol=1e-12)
    np.testing.assert_allclose(hy.numpy(), want_y, rtol=1e-12)
    assert abs(hp.numpy()[:2]).max() == 0.0        # saturated and right: no curvature
