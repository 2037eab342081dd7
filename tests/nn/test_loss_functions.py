"""The divergence, margin and likelihood losses (nova/nn/loss_functions.py) and their
modules against numpy formulas: every reduction, gradients by finite differences,
legacy size_average/reduce, errors."""
import math
import warnings

import numpy as np
import pytest

import nova as nv
import nova.nn as nn
import nova.nn.functional as F
from nova.autograd.gradcheck import gradcheck
from tests.helpers import assert_close

RNG = np.random.default_rng(0)
X, Y = RNG.standard_normal((4, 5)), RNG.standard_normal((4, 5))
P = np.abs(RNG.standard_normal((4, 5)))
P /= P.sum(1, keepdims=True)
P[0, 0] = 0.0                                       # a zero target: 0 * log 0 = 0
LABELS = np.array([1.0, -1.0, 1.0, -1.0])
CLASSES = np.array([0, 4, 2, 1])
W = np.array([0.5, 1.0, 2.0, 1.5, 0.7])


def _softplus(v):
    return np.logaddexp(0.0, v)


def _cos(a, b):
    return (a * b).sum(-1) / np.sqrt(((a * a).sum(-1) + 1e-12) * ((b * b).sum(-1) + 1e-12))


def _multi_margin(x, t, p, margin, w):
    z = margin - x[np.arange(len(t)), t][:, None] + x
    h = np.where(z > 0, z, 0.0) ** p * w[t][:, None]
    h[np.arange(len(t)), t] = 0.0
    return h.sum(1) / x.shape[1]


def _dist(a, b, p=2.0):
    return (np.abs(a - b + 1e-6) ** p).sum(-1) ** (1 / p)


def _stirling(t):
    safe = np.where(t > 1, t, 2.0)
    return np.where(t > 1, safe * np.log(safe) - safe + 0.5 * np.log(2 * np.pi * safe), 0.0)


# name -> (nova loss of (x, y, reduction), numpy per-element loss)
A, B, N = X[:, :3], Y[:, :3], RNG.standard_normal((4, 3))
COUNTS = RNG.integers(0, 5, (4, 5)).astype(np.float64)
VAR = np.abs(RNG.standard_normal((4, 5))) + 0.1
CASES = {
    "kl_div": (lambda r: F.kl_div(nv.tensor(X), nv.tensor(P), reduction=r),
               np.where(P > 0, P * np.log(np.where(P > 0, P, 1.0)), 0.0) - P * X),
    "kl_div_log_target": (lambda r: F.kl_div(nv.tensor(X), nv.tensor(Y), reduction=r,
                                             log_target=True), np.exp(Y) * (Y - X)),
    "cosine_embedding": (lambda r: F.cosine_embedding_loss(nv.tensor(X), nv.tensor(Y),
                                                           nv.tensor(LABELS), 0.1, reduction=r),
                         np.where(LABELS == 1, 1 - _cos(X, Y),
                                  np.maximum(_cos(X, Y) - 0.1, 0.0))),
    "margin_ranking": (lambda r: F.margin_ranking_loss(nv.tensor(X[:, 0]), nv.tensor(Y[:, 0]),
                                                       nv.tensor(LABELS), 0.3, reduction=r),
                       np.maximum(-LABELS * (X[:, 0] - Y[:, 0]) + 0.3, 0.0)),
    "hinge_embedding": (lambda r: F.hinge_embedding_loss(nv.tensor(X[:, :4].T),
                                                         nv.tensor(LABELS), 0.8, reduction=r),
                        np.where(LABELS == 1, X[:, :4].T, np.maximum(0.8 - X[:, :4].T, 0.0))),
    "soft_margin": (lambda r: F.soft_margin_loss(nv.tensor(X[:, :4]), nv.tensor(LABELS),
                                                 reduction=r),
                    _softplus(-LABELS * X[:, :4])),
    "multilabel_soft_margin": (
        lambda r: F.multilabel_soft_margin_loss(nv.tensor(X), nv.tensor((Y > 0) * 1.0),
                                                nv.tensor(W), reduction=r),
        ((Y > 0) * _softplus(-X) + (Y <= 0) * _softplus(X)) @ W / 5),
    "multi_margin_p1": (lambda r: F.multi_margin_loss(nv.tensor(X), nv.tensor(CLASSES),
                                                      margin=0.7, weight=nv.tensor(W),
                                                      reduction=r),
                        _multi_margin(X, CLASSES, 1, 0.7, W)),
    "multi_margin_p2": (lambda r: F.multi_margin_loss(nv.tensor(X), nv.tensor(CLASSES), p=2,
                                                      reduction=r),
                        _multi_margin(X, CLASSES, 2, 1.0, np.ones(5))),
    "triplet": (lambda r: F.triplet_margin_loss(nv.tensor(A), nv.tensor(B), nv.tensor(N),
                                                margin=1.5, reduction=r),
                np.maximum(1.5 + _dist(A, B) - _dist(A, N), 0.0)),
    "triplet_swap_p1": (lambda r: F.triplet_margin_loss(nv.tensor(A), nv.tensor(B),
                                                        nv.tensor(N), p=1, swap=True,
                                                        reduction=r),
                        np.maximum(1 + _dist(A, B, 1) - np.minimum(_dist(A, N, 1),
                                                                   _dist(B, N, 1)), 0.0)),
    "poisson": (lambda r: F.poisson_nll_loss(nv.tensor(X), nv.tensor(COUNTS), reduction=r),
                np.exp(X) - COUNTS * X),
    "poisson_rate_full": (lambda r: F.poisson_nll_loss(nv.tensor(P + 0.5), nv.tensor(COUNTS),
                                                       log_input=False, full=True, reduction=r),
                          P + 0.5 - COUNTS * np.log(P + 0.5 + 1e-8) + _stirling(COUNTS)),
    "gaussian": (lambda r: F.gaussian_nll_loss(nv.tensor(X), nv.tensor(Y), nv.tensor(VAR),
                                               reduction=r),
                 0.5 * (np.log(VAR) + (X - Y) ** 2 / VAR)),
    "gaussian_row_var_full": (
        lambda r: F.gaussian_nll_loss(nv.tensor(X), nv.tensor(Y), nv.tensor(VAR[:, 0]),
                                      full=True, reduction=r),
        0.5 * (np.log(VAR[:, :1]) + (X - Y) ** 2 / VAR[:, :1]) + 0.5 * math.log(2 * math.pi)),
}


def test_every_reduction_matches_the_numpy_formula():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")              # kl_div's 'mean' warning
        got = {(k, r): f(r) for k, (f, _) in CASES.items() for r in ("none", "sum", "mean")}
        got[("kl_div", "batchmean")] = F.kl_div(nv.tensor(X), nv.tensor(P),
                                                reduction="batchmean")
    nv.realize(*got.values())
    for (k, r), out in got.items():
        ref = CASES[k][1]
        want = {"none": ref, "sum": ref.sum(), "mean": ref.mean(),
                "batchmean": ref.sum() / ref.shape[0]}[r]
        assert_close(out, want, rtol=1e-12, atol=1e-14), (k, r)


def test_gradients_by_finite_differences():
    x, y, v = X[:2, :3], Y[:2, :3], VAR[:2, :3]
    t = LABELS[:2]
    assert gradcheck(lambda a, b, s: (
        F.kl_div(a, b.exp() / b.exp().sum(1, keepdim=True), reduction="none"),
        F.kl_div(a, b, reduction="none", log_target=True),
        F.cosine_embedding_loss(a, b, nv.tensor(t), 0.1, reduction="none"),
        F.margin_ranking_loss(a[:, 0], b[:, 0], nv.tensor(t), reduction="none"),
        F.soft_margin_loss(a, b, reduction="none"),
        F.multilabel_soft_margin_loss(a, b.sigmoid(), reduction="none"),
        F.multi_margin_loss(a, nv.tensor([0, 2]), p=2, margin=2.0, reduction="none"),
        F.triplet_margin_loss(a, b, a * 0.5 + 0.3, margin=2.0, reduction="none"),
        F.poisson_nll_loss(a, b.abs(), reduction="none"),
        F.poisson_nll_loss(a.abs() + 0.5, b.abs() * 3, False, True, reduction="none"),
        F.gaussian_nll_loss(a, b, s, reduction="none"),
        F.hinge_embedding_loss(a, nv.tensor([[1.0, -1.0, 1.0]]), 3.0, reduction="none"),
    ), [x, y, v])


def test_special_values():
    # soft margin stays finite where exp(-y x) overflows float32; kl_div's 0 log 0 = 0
    big = F.soft_margin_loss(nv.tensor([-200.0, 200.0]), nv.tensor([1.0, 1.0]), reduction="none")
    zero = F.kl_div(nv.tensor([3.0]), nv.tensor([0.0]), reduction="sum")
    # variances are clamped at eps, the gradient passing as if unclamped (PyTorch's)
    var = nv.tensor([1e-9, 4.0], requires_grad=True)
    gauss = F.gaussian_nll_loss(nv.tensor([1.0, 1.0]), nv.tensor([0.0, 0.0]), var, eps=1e-6,
                                reduction="none")
    (g,) = nv.autograd.grad(gauss.sum(), [var])
    negative = F.gaussian_nll_loss(nv.tensor([1.0]), nv.tensor([0.0]), nv.tensor([-1.0]))
    nv.realize(big, zero, gauss, g, negative)
    assert_close(big, [200.0, 0.0], rtol=1e-7)
    assert zero.item() == 0.0
    assert_close(gauss, [0.5 * (math.log(1e-6) + 1e6), 0.5 * (math.log(4.0) + 0.25)], rtol=1e-6)
    assert_close(g, [0.5 * (1e6 - 1e12), 0.5 * (0.25 - 1 / 16)], rtol=1e-5)
    assert math.isnan(negative.item())                 # a negative variance: NaN


def test_modules_and_legacy_reduction_arguments():
    x, p = nv.tensor(X), nv.tensor(P)
    with pytest.warns(UserWarning, match="please use reduction='sum' instead"):
        legacy = nn.KLDivLoss(size_average=False)
    with pytest.warns(UserWarning, match="please use reduction='none' instead"):
        none = F.soft_margin_loss(x, nv.tensor(Y), reduce=False)
    assert legacy.reduction == "sum" and none.shape == (4, 5)
    with pytest.warns(UserWarning, match="'mean' divides the total loss by both"):
        F.kl_div(x, p)
    mods = [nn.KLDivLoss(reduction="batchmean")(x, p),
            nn.CosineEmbeddingLoss(0.1)(x, nv.tensor(Y), nv.tensor(LABELS)),
            nn.MarginRankingLoss(0.3, reduction="sum")(x[:, 0], nv.tensor(Y[:, 0]),
                                                         nv.tensor(LABELS)),
            nn.MultiMarginLoss(margin=0.7, weight=nv.tensor(W))(x, nv.tensor(CLASSES)),
            nn.TripletMarginLoss(1.5, reduction="none")(nv.tensor(A), nv.tensor(B),
                                                         nv.tensor(N)),
            nn.PoissonNLLLoss()(x, nv.tensor(COUNTS)),
            nn.GaussianNLLLoss(full=True)(x, nv.tensor(Y), nv.tensor(VAR[:, 0])),
            nn.MultiLabelSoftMarginLoss(nv.tensor(W))(x, nv.tensor((Y > 0) * 1.0)),
            nn.HingeEmbeddingLoss(0.8)(nv.tensor(X[:, :4].T), nv.tensor(LABELS)),
            nn.SoftMarginLoss(reduction="none")(nv.tensor(X[:, :4]), nv.tensor(LABELS))]
    funcs = [F.kl_div(x, p, reduction="batchmean"), CASES["cosine_embedding"][0]("mean"),
             CASES["margin_ranking"][0]("sum"), CASES["multi_margin_p1"][0]("mean"),
             CASES["triplet"][0]("none"), CASES["poisson"][0]("mean"),
             CASES["gaussian_row_var_full"][0]("mean"),
             CASES["multilabel_soft_margin"][0]("mean"), CASES["hinge_embedding"][0]("mean"),
             CASES["soft_margin"][0]("none")]
    nv.realize(*mods, *funcs)
    for m, f in zip(mods, funcs):
        assert_close(m, f.numpy(), rtol=1e-14, atol=0)
    m = nn.MultiMarginLoss(weight=nv.tensor(W))
    assert list(m.state_dict()) == ["weight"]
    # PyTorch's loss modules print no arguments (they have no extra_repr)
    assert repr(nn.TripletMarginLoss()) == "TripletMarginLoss()"
    assert repr(nn.KLDivLoss(reduction="batchmean")) == "KLDivLoss()"
    assert repr(nn.CrossEntropyLoss(weight=nv.ones(3), label_smoothing=0.1)) == \
        "CrossEntropyLoss()"
    assert repr(nn.GaussianNLLLoss(full=True)) == "GaussianNLLLoss()"
    assert repr(nn.Sequential(nn.Linear(2, 2), nn.MSELoss())) == (
        "Sequential(\n  (0): Linear(in_features=2, out_features=2, bias=True)\n"
        "  (1): MSELoss()\n)")


def test_bad_arguments_raise():
    x = nv.ones(2, 3)
    cases = [
        (lambda: F.cosine_embedding_loss(x, x, nv.ones(2, 1)), ValueError,
         r"cosine_embedding_loss: expected a 0-D or 1-D target"),
        (lambda: F.cosine_embedding_loss(nv.ones(3), nv.ones(3), nv.ones(2)), ValueError,
         r"a 1-D target expects 2-D inputs, got \(3,\) and \(3,\)"),
        (lambda: F.margin_ranking_loss(nv.ones(2), nv.ones(2, 1), nv.ones(2)), ValueError,
         r"margin_ranking_loss: all input tensors should have the same number of dims"),
        (lambda: F.multi_margin_loss(x, nv.tensor([0, 1]), p=3), ValueError,
         "only p == 1 and p == 2 supported"),
        (lambda: F.multi_margin_loss(x, nv.tensor([0, 1, 2])), ValueError,
         r"target should be 1-D with one class index per sample \(2\)"),
        (lambda: F.multi_margin_loss(x, nv.tensor([0.0, 1.0])), TypeError,
         "target must hold class indices"),
        (lambda: F.multi_margin_loss(x, nv.tensor([0, 1]), weight=nv.ones(2)), ValueError,
         r"weight must have shape \(3,\)"),
        (lambda: F.triplet_margin_loss(x, nv.ones(3), x), ValueError,
         r"anchor \(2, 3\), positive \(3,\), negative \(2, 3\)"),
        (lambda: F.gaussian_nll_loss(x, x, nv.ones(3)), ValueError,
         r"var of shape \(3,\) must have input's shape \(2, 3\)"),
        (lambda: F.gaussian_nll_loss(x, x, -1.0), ValueError, "var has negative entry"),
        (lambda: F.gaussian_nll_loss(x, x, nv.ones(2, 3), reduction="avg"), ValueError,
         "reduction must be 'mean', 'sum' or 'none'"),
        (lambda: F.soft_margin_loss(x, x, reduction="avg"), ValueError,
         "soft_margin_loss: reduction must be"),
        (lambda: nn.TripletMarginLoss(margin=0.0), ValueError, "expected margin to be greater"),
        (lambda: nn.KLDivLoss(reduction="avg"), ValueError, "KLDivLoss: reduction must be"),
        (lambda: F.kl_div(x, [1.0]), TypeError, "kl_div: expected Tensors"),
    ]
    for fn, exc, pattern in cases:
        with pytest.raises(exc, match=pattern):
            fn()


def test_bce_with_logits_keeps_the_digits_of_a_confident_correct_prediction():
    """The linear terms cancel exactly before the small log1p term is added: at
    x = -30, y = 0 the loss is log1p(exp(-30)) to the last digit (was 1.3% off)."""
    x = nv.tensor([-30.0, -20.0, 25.0], dtype=nv.float64)
    y = nv.tensor([0.0, 0.0, 1.0], dtype=nv.float64)
    got = nv.nn.functional.binary_cross_entropy_with_logits(x, y, reduction="none").numpy()
    np.testing.assert_allclose(got, np.log1p(np.exp([-30.0, -20.0, -25.0])), rtol=1e-15)
    w = nv.tensor([2.0, 2.0, 2.0], dtype=nv.float64)
    got = nv.nn.functional.binary_cross_entropy_with_logits(x, y, pos_weight=w,
                                                            reduction="none").numpy()
    np.testing.assert_allclose(got, [np.log1p(np.exp(-30.0)), np.log1p(np.exp(-20.0)),
                                     2 * np.log1p(np.exp(-25.0))], rtol=1e-15)


def test_an_infinite_norm_or_variance_is_clamped_without_nan():
    """The value-only clamp was n + (max(n, eps) - n): inf - inf = NaN there."""
    # (float32 norms of 5e20 overflow to inf: PyTorch gives 0 there, the old clamp NaN)
    got = F.cosine_similarity(nv.tensor([[3e20, 4e20]]), nv.tensor([[4e20, 3e20]]))
    assert got.tolist() == [0.0]
    loss = F.gaussian_nll_loss(nv.tensor([1.0]), nv.tensor([0.0]), nv.tensor([np.inf]),
                               reduction="none")
    assert loss.tolist() == [np.inf]
    m = nn.Sequential(nn.BatchNorm1d(2))
    m.register_buffer("own", nv.zeros(1))
    assert len(list(m.buffers(recurse=False))) == 1 and len(list(m.buffers())) == 4


def _log_softmax(x, axis):
    m = x.max(axis, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis, keepdims=True))


def _soft_ce(x, t, w, ls):
    """PyTorch's probability-target cross entropy per sample (class dim 1)."""
    c = x.shape[1]
    t = t * (1 - ls) + ls / c
    wb = np.ones(c) if w is None else w
    return -(_log_softmax(x, 1) * t * wb.reshape((1, c) + (1,) * (x.ndim - 2))).sum(1)


def test_cross_entropy_with_class_probability_targets():
    """Mixup / distillation targets: a float target of the input's shape. The mean
    divides by the number of samples, not by the class weights."""
    xk, pk = RNG.standard_normal((2, 3, 2, 2)), RNG.random((2, 3, 2, 2))
    got = {r: F.cross_entropy(nv.tensor(X), nv.tensor(P), nv.tensor(W), reduction=r,
                              label_smoothing=0.2) for r in ("none", "sum", "mean")}
    got["plain"] = F.cross_entropy(nv.tensor(X), nv.tensor(P))
    got["kdim"] = F.cross_entropy(nv.tensor(xk), nv.tensor(pk), nv.tensor(W[:3]))
    got["one"] = F.cross_entropy(nv.tensor(X[0]), nv.tensor(P[0]), reduction="none")
    got["index_one"] = F.cross_entropy(nv.tensor(X[0]), nv.tensor(2), reduction="none")
    got["nll_one"] = F.nll_loss(nv.tensor(X[0]), nv.tensor(2), reduction="none")
    got["module"] = nn.CrossEntropyLoss(nv.tensor(W), label_smoothing=0.2)(nv.tensor(X),
                                                                            nv.tensor(P))
    got["empty"] = F.cross_entropy(nv.zeros(0, 5), nv.zeros(0, 5))
    nv.realize(*got.values())
    per = _soft_ce(X, P, W, 0.2)
    for r, want in (("none", per), ("sum", per.sum()), ("mean", per.sum() / 4),
                    ("module", per.sum() / 4), ("plain", _soft_ce(X, P, None, 0.0).mean()),
                    ("kdim", _soft_ce(xk, pk, W[:3], 0.0).mean()),
                    ("one", _soft_ce(X[:1], P[:1], None, 0.0)[0]),
                    ("index_one", -_log_softmax(X[0], 0)[2]), ("nll_one", -X[0, 2])):
        assert_close(got[r], want, rtol=1e-13, atol=0), r
    assert math.isnan(got["empty"].item())
    assert gradcheck(lambda a, t: (
        F.cross_entropy(a, t, nv.tensor(W[:3]), reduction="none", label_smoothing=0.1),
        F.cross_entropy(a[0], t[0].softmax(0))), [xk[:, :, :1], pk[:, :, :1]])
    with pytest.raises(TypeError, match=r"cross_entropy: a target of the input's shape "
                                        r"\(4, 5\) holds class probabilities"):
        F.cross_entropy(nv.tensor(X), nv.ones(4, 5, dtype=nv.int64))
    with pytest.raises(ValueError, match="ignore_index=0 is not supported with class-prob"):
        F.cross_entropy(nv.tensor(X), nv.tensor(P), ignore_index=0)
    with pytest.raises(ValueError, match=r"cross_entropy: weight must have shape \(5,\)"):
        F.cross_entropy(nv.tensor(X), nv.tensor(P), nv.ones(4))


def test_class_index_targets_may_be_uint8_as_pytorch_byte():
    """PyTorch's cross_entropy and nll_loss take Long or Byte targets (labels read from
    image files are often uint8): the same losses as int64 targets, and a uint8 label
    past the classes is the same IndexError."""
    labels = np.array([0, 4, 2, 4], dtype=np.uint8)
    x = nv.tensor(X)
    for loss in (F.cross_entropy, F.nll_loss):
        want = loss(x, nv.tensor(labels.astype(np.int64)), reduction="none").numpy()
        got = loss(x, nv.from_numpy(labels), reduction="none")
        assert got.dtype == x.dtype
        assert_close(got.numpy(), want, rtol=0, atol=0)
    assert_close(nn.CrossEntropyLoss(ignore_index=4)(x, nv.from_numpy(labels)).numpy(),
                 F.cross_entropy(x, nv.tensor([0, -100, 2, -100])).numpy(), rtol=0, atol=0)
    with pytest.raises(IndexError, match=r"cross_entropy: Target 7 is out of bounds"):
        F.cross_entropy(x, nv.from_numpy(np.array([0, 7, 1, 1], dtype=np.uint8)))
    with pytest.raises(TypeError, match=r"nll_loss: target must hold class indices "
                                        r"\(int64, int32 or uint8\), got int16"):
        F.nll_loss(x, nv.from_numpy(labels.astype(np.int16)))


def test_pointwise_losses_broadcast_a_target_of_another_shape_with_a_warning():
    """PyTorch's mse_loss, l1_loss, smooth_l1_loss and huber_loss warn and broadcast
    ((4, 1) against (4,) is a (4, 4) loss); the binary cross entropies refuse."""
    a, b = X[:, :1], Y[0, :4]
    d = np.abs(a - b)
    with pytest.warns(UserWarning, match=r"^Using a target size \(4,\) that is different "
                                         r"to the input size \(4, 1\).*\(in mse_loss\)"):
        mse = F.mse_loss(nv.tensor(a), nv.tensor(b))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = [nn.MSELoss(reduction="sum")(nv.tensor(a), nv.tensor(b)),
               F.l1_loss(nv.tensor(a), nv.tensor(b), reduction="none"),
               F.smooth_l1_loss(nv.tensor(a), nv.tensor(b), reduction="none", beta=0.5),
               F.huber_loss(nv.tensor(a), nv.tensor(b), reduction="none", delta=0.5)]
    assert len(caught) == 4 and all("Using a target size" in str(w.message) for w in caught)
    nv.realize(mse, *got)
    wants = [(d * d).mean(), (d * d).sum(), d, np.where(d < 0.5, d * d, d - 0.25),
             np.where(d < 0.5, 0.5 * d * d, 0.5 * (d - 0.25))]
    for g, w in zip([mse, *got], wants):
        assert_close(g, w, rtol=1e-13, atol=0)
    with pytest.raises(ValueError, match=r"mse_loss: input \(3,\) and target \(4,\) must "
                                         r"have the same shape \(or.*broadcast together"):
        F.mse_loss(nv.zeros(3), nv.zeros(4))
    with pytest.raises(ValueError, match=r"binary_cross_entropy: input \(4, 1\) and target"):
        F.binary_cross_entropy(nv.tensor(a).sigmoid(), nv.tensor(b))


@pytest.mark.parametrize("legacy,reduction", [
    ({"size_average": False}, "sum"), ({"reduce": False}, "none"),
    ({"size_average": True, "reduce": True}, "mean"),
    ({"size_average": False, "reduce": False}, "none"),
])
def test_the_deprecated_size_average_and_reduce_map_to_reduction(legacy, reduction):
    """Old training scripts pass ``size_average=``/``reduce=`` (keywords) to the common
    losses: mapped to ``reduction`` as PyTorch maps them, with its warning (they
    raised a TypeError)."""
    rng = np.random.default_rng(3)
    x = nv.tensor(rng.standard_normal((4, 5)).astype(np.float32))
    p = nv.tensor(rng.uniform(0.1, 0.9, (4, 5)).astype(np.float32))
    y = nv.tensor(rng.uniform(0.0, 1.0, (4, 5)).astype(np.float32))
    labels = nv.tensor(np.array([0, 3, 1, 4]))
    F, nn = nv.nn.functional, nv.nn
    pairs = [
        (lambda **k: F.mse_loss(x, y, **k), nn.MSELoss, (x, y)),
        (lambda **k: F.l1_loss(x, y, **k), nn.L1Loss, (x, y)),
        (lambda **k: F.smooth_l1_loss(x, y, **k), nn.SmoothL1Loss, (x, y)),
        (lambda **k: F.binary_cross_entropy(p, y, **k), nn.BCELoss, (p, y)),
        (lambda **k: F.binary_cross_entropy_with_logits(x, y, **k), nn.BCEWithLogitsLoss, (x, y)),
        (lambda **k: F.cross_entropy(x, labels, **k), nn.CrossEntropyLoss, (x, labels)),
        (lambda **k: F.nll_loss(x.log_softmax(1), labels, **k), nn.NLLLoss,
         (x.log_softmax(1), labels)),
    ]
    for fn, module, args in pairs:
        want = fn(reduction=reduction).numpy()
        with pytest.warns(UserWarning, match=f"reduction='{reduction}'"):
            got = fn(**legacy).numpy()
        np.testing.assert_array_equal(got, want)
        with pytest.warns(UserWarning, match="size_average and reduce"):
            loss = module(**legacy)
        assert loss.reduction == reduction
        np.testing.assert_array_equal(loss(*args).numpy(), want)
