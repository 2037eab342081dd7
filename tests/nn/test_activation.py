"""The activations of nova/nn/activation.py (and the inplace forms of functional's core
ones) against numpy formulas: values with specials, PyTorch's gradients at the kinks,
finite differences elsewhere, modules, inplace, errors."""
import math
import warnings

import numpy as np
import pytest

import nova as nv
import nova.nn as nn
import nova.nn.functional as F
from nova.autograd.gradcheck import gradcheck
from tests.helpers import assert_close

SELU_ALPHA = 1.6732632423543772848170429916717
SELU_SCALE = 1.0507009873554804934193349852946

# the kinks of every function below (-3, 0, 3, 6, +-0.5, 1) and points between them
GRID = np.array([-7.0, -6.0, -3.0, -1.0, -0.5, -0.25, 0.0, 0.25, 0.5, 1.0, 3.0, 6.0, 7.0, 30.0])


# name -> (nova function, numpy formula, gradient formula with PyTorch's kink values)
CASES = {
    "relu6": (F.relu6, lambda x: np.clip(x, 0, 6), lambda x: ((x > 0) & (x < 6)) * 1.0),
    "hardtanh": (lambda v: F.hardtanh(v, -1.0, 3.0), lambda x: np.clip(x, -1, 3),
                 lambda x: ((x > -1) & (x < 3)) * 1.0),
    "hardsigmoid": (F.hardsigmoid, lambda x: np.clip(x + 3, 0, 6) / 6,
                    lambda x: ((x > -3) & (x < 3)) / 6.0),
    "hardswish": (F.hardswish, lambda x: x * np.clip(x + 3, 0, 6) / 6,
                  lambda x: np.where(x <= -3, 0.0, np.where(x >= 3, 1.0, x / 3 + 0.5))),
    "selu": (F.selu, lambda x: SELU_SCALE * np.where(x > 0, x, SELU_ALPHA * np.expm1(x)),
             lambda x: SELU_SCALE * np.where(x > 0, 1.0, SELU_ALPHA * np.exp(x))),
    "celu": (lambda v: F.celu(v, 0.5), lambda x: np.where(x > 0, x, 0.5 * np.expm1(x / 0.5)),
             lambda x: np.where(x > 0, 1.0, np.exp(x / 0.5))),
    "elu": (lambda v: F.elu(v, 2.0), lambda x: np.where(x > 0, x, 2.0 * np.expm1(x)),
            lambda x: np.where(x > 0, 1.0, 2.0 * np.exp(x))),
    "softsign": (F.softsign, lambda x: x / (1 + np.abs(x)), lambda x: 1 / (1 + np.abs(x)) ** 2),
    "softshrink": (F.softshrink,
                   lambda x: np.where(x > 0.5, x - 0.5, np.where(x < -0.5, x + 0.5, 0)),
                   lambda x: (np.abs(x) > 0.5) * 1.0),
    "hardshrink": (lambda v: F.hardshrink(v, 1.0), lambda x: np.where(np.abs(x) > 1, x, 0),
                   lambda x: (np.abs(x) > 1) * 1.0),
    "tanhshrink": (F.tanhshrink, lambda x: x - np.tanh(x), lambda x: np.tanh(x) ** 2),
    "threshold": (lambda v: F.threshold(v, 0.5, -2.0), lambda x: np.where(x > 0.5, x, -2.0),
                  lambda x: (x > 0.5) * 1.0),
    "rrelu_eval": (F.rrelu, lambda x: np.where(x > 0, x, x * (1 / 8 + 1 / 3) / 2),
                   lambda x: np.where(x > 0, 1.0, (1 / 8 + 1 / 3) / 2)),
    "prelu": (lambda v: F.prelu(v, nv.tensor([0.3], dtype=v.dtype)),
              lambda x: np.where(x > 0, x, 0.3 * x), lambda x: np.where(x > 0, 1.0, 0.3)),
}


def test_values_and_kink_gradients_match_the_formulas():
    x = nv.tensor(GRID, requires_grad=True)
    outs = {k: f(x) for k, (f, _, _) in CASES.items()}
    grads = {k: nv.autograd.grad(y.sum(), [x])[0] for k, y in outs.items()}
    nv.realize(*outs.values(), *grads.values())
    for k, (_, value, slope) in CASES.items():
        assert_close(outs[k], value(GRID), rtol=1e-13, atol=1e-15), k
        assert_close(grads[k], slope(GRID), rtol=1e-13, atol=1e-15), k


def test_float32_specials_and_accuracy():
    special = np.array([np.nan, np.inf, -np.inf, 0.0], dtype=np.float32)
    s = nv.tensor(special)
    got = {k: f(s) for k, (f, _, _) in CASES.items()}
    # tanhshrink of tiny inputs keeps its digits (x^3/3), where x - tanh(x) in float32
    # would give 0 or noise
    tiny = np.array([1e-6, -3e-4, 0.02, 0.049, 0.051, 1.5], dtype=np.float32)
    shrunk = F.tanhshrink(nv.tensor(tiny))
    nv.realize(*got.values(), shrunk)
    for k, (_, value, _) in CASES.items():
        if k == "hardswish":   # -inf * relu6(-inf + 3) = -inf * 0: NaN, as PyTorch
            expected = np.array([np.nan, np.inf, np.nan, 0.0])
        elif k == "softsign":  # inf / inf
            expected = np.array([np.nan, np.nan, np.nan, 0.0])
        else:
            with np.errstate(invalid="ignore"):
                expected = value(special.astype(np.float64))
            expected[0] = np.nan                  # every one propagates NaN
        assert got[k].dtype == nv.float32
        assert_close(got[k], expected.astype(np.float32), rtol=1e-6), k
    t = tiny.astype(np.float64)
    series = t**3 / 3 - 2 * t**5 / 15 + 17 * t**7 / 315 - 62 * t**9 / 2835
    reference = np.where(np.abs(t) < 0.1, series, t - np.tanh(t))
    assert_close(shrunk, reference.astype(np.float32), rtol=2e-7, atol=0)


def test_finite_difference_gradients_away_from_kinks():
    x = np.array([-3.7, -2.5, -1.3, -0.4, 0.3, 0.8, 1.7, 2.2, 4.5, 6.5])
    w = np.array([0.2, -0.1])
    assert gradcheck(lambda v: tuple(f(v) for f, _, _ in CASES.values()), [x])
    assert gradcheck(lambda v, s: (F.prelu(v.reshape(5, 2), s), F.glu(v.reshape(5, 2), 1),
                                   F.softmin(v.reshape(2, 5), 1)), [x, w])


def test_glu_prelu_softmin_softmax2d_shapes_and_values():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((2, 4, 3))
    w = np.array([0.1, -0.2, 0.3, 0.4])
    x = nv.tensor(a)
    with warnings.catch_warnings():
        warnings.simplefilter("error")          # an explicit dim gives no warning
        soft2d = nn.Softmax2d()(x.unsqueeze(-1))
    outs = [F.glu(x, 1), nn.GLU()(x.transpose(1, 2)), F.prelu(x, nv.tensor(w)),
            F.softmin(x, 0), soft2d]
    nv.realize(*outs)
    sig = lambda v: 1 / (1 + np.exp(-v))  # noqa: E731
    assert_close(outs[0], a[:, :2] * sig(a[:, 2:]), rtol=1e-12)
    assert_close(outs[1], (a[:, :2] * sig(a[:, 2:])).transpose(0, 2, 1), rtol=1e-12)
    assert_close(outs[2], np.where(a > 0, a, a * w[None, :, None]), rtol=1e-12)
    e = np.exp(-a)
    assert_close(outs[3], e / e.sum(0), rtol=1e-12)
    e = np.exp(a)
    assert_close(outs[4], (e / e.sum(1, keepdims=True))[..., None], rtol=1e-12)


def test_implicit_softmax_dim_is_pytorchs_with_its_warning():
    a = np.random.default_rng(1).standard_normal((2, 3, 4))
    with pytest.warns(UserWarning, match="Implicit dimension choice for softmin"):
        y3 = F.softmin(nv.tensor(a))                   # 3-d: dim 0
    with pytest.warns(UserWarning, match="Implicit dimension choice for softmax"):
        y4 = nn.Softmax()(nv.tensor(a[None]))           # 4-d: dim 1
    with pytest.warns(UserWarning, match="Implicit dimension choice for log_softmax"):
        y2 = F.log_softmax(nv.tensor(a[0]))             # 2-d: dim 1
    nv.realize(y3, y4, y2)
    assert_close(y3, np.exp(-a) / np.exp(-a).sum(0), rtol=1e-12)
    assert_close(y4, np.exp(a[None]) / np.exp(a[None]).sum(1, keepdims=True), rtol=1e-12)
    assert_close(y2, a[0] - np.log(np.exp(a[0]).sum(1, keepdims=True)), rtol=1e-12)


def test_rrelu_training_draws_slopes_in_range_and_backprops_them():
    nv.manual_seed(3)
    x = nv.tensor(-np.linspace(1.0, 2.0, 4000), requires_grad=True)
    m = nn.RReLU(0.1, 0.3)
    y = m(x)
    (g,) = nv.autograd.grad(y.sum(), [x])
    nv.realize(y, g)
    slope = y.numpy() / x.detach().numpy()
    assert 0.1 <= slope.min() and slope.max() < 0.3 and abs(slope.mean() - 0.2) < 0.01
    assert len(np.unique(slope)) > 1000
    assert_close(g, slope, rtol=1e-12)
    m.eval()
    assert_close(m(nv.tensor([-2.0, 1.0])), [-0.4, 1.0], rtol=1e-6)


def test_gumbel_softmax_soft_and_hard_straight_through():
    nv.manual_seed(0)
    logits = np.log(np.array([0.1, 0.2, 0.7]))
    x = nv.tensor(np.tile(logits, (4000, 1)), requires_grad=True)
    soft = F.gumbel_softmax(x, tau=0.5)
    hard = F.gumbel_softmax(x, hard=True)
    w = nv.tensor(np.random.default_rng(0).standard_normal((4000, 3)))
    (g,) = nv.autograd.grad((hard * w).sum(), [x])
    nv.realize(soft, hard, g)
    s, h = soft.numpy(), hard.numpy()
    assert_close(s.sum(1), np.ones(4000), rtol=1e-12)
    assert set(np.unique(h)) == {0.0, 1.0} and np.all(h.sum(1) == 1)
    assert np.allclose(h.mean(0), [0.1, 0.2, 0.7], atol=0.03)   # argmax of Gumbel-max
    # the hard sample's gradient is the soft sample's: nonzero, and each row sums to 0
    assert np.abs(g.numpy()).max() > 0 and np.allclose(g.numpy().sum(1), 0, atol=1e-12)


def test_inplace_forms_rebind_the_callers_tensor():
    x = nv.tensor([-2.0, 0.5, 8.0])
    y = F.relu6(x, inplace=True)
    assert y is x and x.tolist() == [0.0, 0.5, 6.0]
    base = nv.tensor([[-1.0, 2.0], [-3.0, 4.0]])
    nn.ReLU(inplace=True)(base[0])               # a view writes through to its base
    assert base.tolist() == [[0.0, 2.0], [-3.0, 4.0]]
    for f in (lambda t: F.hardtanh(t, inplace=True), lambda t: F.selu(t, inplace=True),
              lambda t: F.elu(t, inplace=True), lambda t: F.leaky_relu(t, 0.1, True),
              lambda t: F.threshold(t, 0.0, 1.0, True), lambda t: nn.SiLU(True)(t)):
        t = nv.tensor([-1.0, 2.0])
        assert f(t) is t
    leaf = nv.tensor([1.0], requires_grad=True)
    with pytest.raises(RuntimeError, match="relu_: a leaf tensor that requires grad"):
        F.relu(leaf, inplace=True)
    # through a graph: the in-place result is what the loss sees and differentiates
    w = nv.tensor([-1.0, 2.0], requires_grad=True)
    h = w * 2.0
    nn.Hardtanh(-1.0, 1.0, inplace=True)(h)
    (g,) = nv.autograd.grad(h.sum(), [w])
    assert h.tolist() == [-1.0, 1.0] and g.tolist() == [0.0, 0.0]


def test_modules_reprs_and_prelu_parameters():
    reprs = [repr(m) for m in (nn.ReLU6(inplace=True), nn.Hardtanh(), nn.CELU(0.5),
                               nn.PReLU(), nn.RReLU(), nn.Threshold(0.1, 20.0), nn.Softmin(1),
                               nn.Softshrink(), nn.Hardshrink(0.3), nn.GLU(), nn.SELU(),
                               nn.ReLU(True), nn.ELU(inplace=True), nn.Softsign())]
    assert reprs == ["ReLU6(inplace=True)", "Hardtanh(min_val=-1.0, max_val=1.0)",
                     "CELU(alpha=0.5)", "PReLU(num_parameters=1)",
                     f"RReLU(lower=0.125, upper={1 / 3})", "Threshold(threshold=0.1, value=20.0)",
                     "Softmin(dim=1)", "Softshrink(0.5)", "Hardshrink(0.3)", "GLU(dim=-1)",
                     "SELU()", "ReLU(inplace=True)", "ELU(alpha=1.0, inplace=True)",
                     "Softsign()"]
    m = nn.PReLU(3, init=0.1)
    assert [n for n, _ in m.named_parameters()] == ["weight"] and m.weight.requires_grad
    assert list(m.state_dict()) == ["weight"] and m.weight.tolist() == pytest.approx([0.1] * 3)
    x = nv.tensor(np.array([[-1.0, -2.0, 3.0], [4.0, -5.0, -6.0]]))
    (g,) = nv.autograd.grad(m(x).sum(), [m.weight])
    assert g.tolist() == [-1.0, -7.0, -6.0]
    m.load_state_dict({"weight": nv.tensor([1.0, 2.0, 3.0])})
    assert m(x).tolist() == [[-1.0, -4.0, 3.0], [4.0, -10.0, -18.0]]


def test_bad_arguments_raise():
    x = nv.ones(2, 3)
    cases = [
        (lambda: F.hardtanh(x, 2.0, 1.0), ValueError, r"hardtanh: min_val \(2.0\) cannot be"),
        (lambda: nn.Hardtanh(2.0, 1.0), ValueError, "Hardtanh: max_val"),
        (lambda: F.celu(x, 0.0), ValueError, "celu: alpha cannot be 0"),
        (lambda: F.softshrink(x, -1.0), ValueError, "softshrink: lambd must be >= 0"),
        (lambda: F.glu(x, 1), ValueError, r"glu: halving dimension must be even, but "
                                          r"dimension 1 of input \(2, 3\) is size 3"),
        (lambda: F.glu(nv.tensor(1.0)), ValueError, "glu: does not support scalars"),
        (lambda: F.prelu(x, nv.ones(2)), ValueError, r"prelu: weight of shape \(2,\) must "
                                                     r"have 1 or 3 elements"),
        (lambda: F.rrelu(x, 0.5, 0.1), ValueError, "rrelu: lower bound"),
        (lambda: nn.Softmax2d()(x), ValueError, "Softmax2d: expected input to be 3D or 4D"),
        (lambda: nn.PReLU(0), ValueError, "PReLU: num_parameters must be a positive int"),
        (lambda: F.relu6([1.0]), TypeError, "relu6: expected a Tensor"),
    ]
    for fn, exc, pattern in cases:
        with pytest.raises(exc, match=pattern):
            fn()
    assert math.isnan(F.hardshrink(nv.tensor([math.nan])).item())
    ints = F.relu6(nv.tensor([1, 7, -3]))                 # integers stay integers
    assert ints.dtype == nv.int64 and ints.tolist() == [1, 6, 0]
