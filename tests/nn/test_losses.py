"""Losses, activation modules and Flatten/Unflatten against PyTorch: values and input
gradients, each loss in all three reductions (one step per case), with the options
PyTorch has (class weights, ignore_index, label smoothing, pos_weight, beta, delta)."""
import numpy as np
import pytest

import nova as nv
import nova.nn.functional as F

torch = pytest.importorskip("torch")
TF = torch.nn.functional


def _compare(nova_fn, torch_fn, inputs, grad_of=(0,), rtol=1e-5, atol=1e-6):
    """nova_fn and torch_fn on the same arrays, per reduction; values and the gradients
    of the inputs in ``grad_of`` (of the sum of the three reductions' sums)."""
    nv_in = [nv.tensor(a, requires_grad=i in grad_of) for i, a in enumerate(inputs)]
    th_in = [torch.from_numpy(a).requires_grad_(i in grad_of) for i, a in enumerate(inputs)]
    got = [nova_fn(*nv_in, r) for r in ("mean", "sum", "none")]
    want = [torch_fn(*th_in, r) for r in ("mean", "sum", "none")]
    if grad_of:
        sum(g.sum() for g in got).backward()
        sum(w.sum() for w in want).backward()
    for g, w in zip(got, want):
        np.testing.assert_allclose(g.numpy(), w.detach().numpy(), rtol=rtol, atol=atol)
    for i in grad_of:
        np.testing.assert_allclose(nv_in[i].grad.numpy(), th_in[i].grad.numpy(), rtol=rtol,
                                   atol=atol)


RNG = np.random.default_rng(0)
LOGITS = RNG.standard_normal((6, 5, 3)).astype(np.float32)
TARGET = RNG.integers(0, 5, (6, 3))
TARGET[0, 0] = TARGET[2, 1] = -100
WEIGHT = RNG.uniform(0.5, 2.0, 5).astype(np.float32)


@pytest.mark.parametrize("weighted,smoothing", [(False, 0.0), (True, 0.0), (False, 0.2),
                                                (True, 0.2)])
def test_cross_entropy_and_its_module(weighted, smoothing):
    w = WEIGHT if weighted else None
    _compare(lambda x, t, r: nv.nn.CrossEntropyLoss(
                 None if w is None else nv.tensor(w), reduction=r,
                 label_smoothing=smoothing)(x, t),
             lambda x, t, r: TF.cross_entropy(x, t, None if w is None else torch.from_numpy(w),
                                              reduction=r, label_smoothing=smoothing),
             [LOGITS, TARGET])


@pytest.mark.parametrize("weighted", [False, True])
def test_nll_loss_and_its_module(weighted):
    logp = np.log(np.exp(LOGITS) / np.exp(LOGITS).sum(1, keepdims=True)).astype(np.float32)
    w = WEIGHT if weighted else None
    _compare(lambda x, t, r: nv.nn.NLLLoss(None if w is None else nv.tensor(w),
                                           reduction=r)(x, t),
             lambda x, t, r: TF.nll_loss(x, t, None if w is None else torch.from_numpy(w),
                                         reduction=r),
             [logp, TARGET])


X = RNG.standard_normal((4, 7)).astype(np.float32) * 2
Y = RNG.standard_normal((4, 7)).astype(np.float32)


@pytest.mark.parametrize("name", ["mse", "l1", "smooth_l1", "smooth_l1_beta0", "huber"])
def test_regression_losses(name):
    nova_fn, torch_fn = {
        "mse": (lambda x, y, r: nv.nn.MSELoss(r)(x, y), lambda x, y, r: TF.mse_loss(x, y, reduction=r)),
        "l1": (lambda x, y, r: nv.nn.L1Loss(r)(x, y), lambda x, y, r: TF.l1_loss(x, y, reduction=r)),
        "smooth_l1": (lambda x, y, r: nv.nn.SmoothL1Loss(r, beta=0.7)(x, y),
                      lambda x, y, r: TF.smooth_l1_loss(x, y, reduction=r, beta=0.7)),
        "smooth_l1_beta0": (lambda x, y, r: F.smooth_l1_loss(x, y, r, beta=0.0),
                            lambda x, y, r: TF.smooth_l1_loss(x, y, reduction=r, beta=0.0)),
        "huber": (lambda x, y, r: nv.nn.HuberLoss(r, delta=1.3)(x, y),
                  lambda x, y, r: TF.huber_loss(x, y, reduction=r, delta=1.3)),
    }[name]
    _compare(nova_fn, torch_fn, [X, Y], grad_of=(0, 1))


def test_binary_cross_entropy_clamps_its_logs_like_pytorch():
    p = RNG.uniform(0, 1, (4, 7)).astype(np.float32)
    p[0, 0], p[1, 1] = 0.0, 1.0                       # log clamped at -100
    y = (RNG.uniform(0, 1, (4, 7)) > 0.5).astype(np.float32)
    w = RNG.uniform(0.5, 2, (4, 7)).astype(np.float32)
    _compare(lambda x, t, wt, r: nv.nn.BCELoss(wt, r)(x, t),
             lambda x, t, wt, r: TF.binary_cross_entropy(x, t, wt, reduction=r),
             [p, y, w], grad_of=())
    _compare(lambda x, t, r: F.binary_cross_entropy(x, t, reduction=r),
             lambda x, t, r: TF.binary_cross_entropy(x, t, reduction=r),
             [np.clip(p, 0.05, 0.95), y])


def test_bce_with_logits_is_stable_and_weighs_positives():
    x = (RNG.standard_normal((4, 7)) * 40).astype(np.float32)      # past exp's range
    y = (RNG.uniform(0, 1, (4, 7)) > 0.5).astype(np.float32)
    pw = RNG.uniform(0.5, 3, 7).astype(np.float32)
    _compare(lambda a, t, p, r: nv.nn.BCEWithLogitsLoss(reduction=r, pos_weight=p)(a, t),
             lambda a, t, p, r: TF.binary_cross_entropy_with_logits(a, t, reduction=r,
                                                                    pos_weight=p),
             [x, y, pw], rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("name", ["Sigmoid", "LogSigmoid", "Softmax", "LogSoftmax", "LeakyReLU",
                                  "ELU", "Softplus", "Mish"])
def test_activation_modules_match_pytorch(name):
    args = {"Softmax": (1,), "LogSoftmax": (1,), "LeakyReLU": (0.2,), "ELU": (0.7,),
            "Softplus": (2.0, 5.0)}.get(name, ())
    x = (RNG.standard_normal((3, 9)) * 6).astype(np.float32)
    a = nv.tensor(x, requires_grad=True)
    t = torch.from_numpy(x).requires_grad_()
    got, want = getattr(nv.nn, name)(*args)(a), getattr(torch.nn, name)(*args)(t)
    (got * got).sum().backward()
    (want * want).sum().backward()
    np.testing.assert_allclose(got.numpy(), want.detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(a.grad.numpy(), t.grad.numpy(), rtol=1e-4, atol=1e-5)


def test_flatten_and_unflatten_modules():
    x = nv.ones(2, 3, 4, 5)
    assert nv.nn.Flatten()(x).shape == (2, 60)
    assert nv.nn.Flatten(0, 2)(x).shape == (24, 5)
    assert nv.nn.Unflatten(1, (3, 20))(nv.nn.Flatten()(x)).shape == (2, 3, 20)
    assert "start_dim=1" in repr(nv.nn.Flatten())


def test_loss_errors_name_the_problem():
    with pytest.raises(ValueError, match="reduction must be"):
        nv.nn.MSELoss("avg")
    with pytest.raises(ValueError, match=r"weight must have shape \(5,\)"):
        F.cross_entropy(nv.tensor(LOGITS), nv.tensor(TARGET), nv.ones(4))
    with pytest.raises(ValueError, match="l1_loss: input"):
        F.l1_loss(nv.ones(2, 3), nv.ones(3, 2))
    with pytest.raises(TypeError, match="nll_loss: target must hold class indices"):
        F.nll_loss(nv.ones(2, 3), nv.ones(2))


def test_loss_weights_are_buffers():
    m = nv.nn.CrossEntropyLoss(nv.tensor(WEIGHT))
    assert "weight" in m.state_dict()
    assert "pos_weight" in nv.nn.BCEWithLogitsLoss(pos_weight=nv.ones(3)).state_dict()
