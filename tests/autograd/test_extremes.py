"""Unary ops, their composites and the row ops at extreme inputs (huge, tiny,
subnormal, zero, +-inf, NaN): forward values and gradients in float64.

Where the reference is finite the result must be finite and close; where it is inf or
NaN the result must be the same inf or NaN. Every op of a test runs in ONE step (one
leaf per op, all results realized together), so each engine compiles once per test.
The saturating ops (sigmoid, silu, gelu) are checked against float64 formulas always;
the sweep over every op against PyTorch's float64 autograd runs where PyTorch is
installed (the ``bench`` extra), since the test extra does not bring it.
"""
import warnings

import numpy as np
import pytest
from scipy.special import expit

import nova as nv
import nova.nn.functional as F

try:
    import torch
except ImportError:          # the torch sweeps below skip; the formula tests still run
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="PyTorch is the reference here")
TF = torch.nn.functional if torch is not None else None

EXTREMES = np.array([-3e38, -1e4, -104, -100, -90, -89, -88, -50, -20, -9, -5, -1, -1e-40,
                     -1e-45, -0.0, 0.0, 1e-45, 1e-40, 1e-38, 1, 5, 9, 20, 50, 88, 89, 90,
                     100, 1e4, 3e38, np.inf, -np.inf, np.nan], np.float32)

def _unary() -> dict:
    return {
        "neg": (lambda x: -x, lambda t: -t),
        "abs": (nv.abs, torch.abs),
        "exp": (nv.exp, torch.exp),
        "log": (nv.log, torch.log),
        "sqrt": (nv.sqrt, torch.sqrt),
        "rsqrt": (nv.rsqrt, torch.rsqrt),
        "reciprocal": (nv.reciprocal, torch.reciprocal),
        "sin": (nv.sin, torch.sin),
        "cos": (nv.cos, torch.cos),
        "tanh": (nv.tanh, torch.tanh),
        "erf": (nv.erf, torch.erf),
        "expm1": (nv.expm1, torch.expm1),
        "log1p": (nv.log1p, torch.log1p),
        "square": (nv.square, torch.square),
        "relu": (nv.relu, torch.relu),
        "sigmoid": (nv.sigmoid, torch.sigmoid),
        "silu": (F.silu, TF.silu),
        "gelu": (F.gelu, TF.gelu),
        "gelu_tanh": (lambda x: F.gelu(x, approximate="tanh"),
                      lambda t: TF.gelu(t, approximate="tanh")),
    }



def _torch(fn, x: np.ndarray, weight: np.ndarray | None = None):
    """PyTorch's float64 forward and gradient of sum(fn(x) * weight), rounded to x's
    dtype (a float64 value past float32's range becomes inf, as float32 math gives)."""
    t = torch.tensor(x.astype(np.float64), requires_grad=True)
    y = fn(t)
    w = 1.0 if weight is None else torch.tensor(weight.astype(np.float64))
    (y * w).sum().backward()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return y.detach().numpy().astype(x.dtype), t.grad.numpy().astype(x.dtype)


def _nova_all(fns: dict, x: np.ndarray, weights: dict | None = None) -> dict:
    """Forward and gradient of sum(fn(x) * weight) for every op in ``fns``, all in one
    realized step."""
    weights = weights or {}
    leaves = {name: nv.tensor(x, requires_grad=True) for name in fns}
    outs = {name: fn(leaves[name]) for name, fn in fns.items()}
    nv.autograd.backward([(y * nv.tensor(weights[n]) if n in weights else y).sum()
                          for n, y in outs.items()])
    nv.realize(*outs.values(), *[leaf.grad for leaf in leaves.values()])
    return {name: (outs[name].numpy(), leaves[name].grad.numpy()) for name in fns}


def _mismatches(got: np.ndarray, want: np.ndarray, rtol: float, atol: float) -> list:
    """(position, got, want) where ``got`` has another inf/NaN pattern than ``want``,
    or is not close to it where ``want`` is finite."""
    assert got.shape == want.shape and got.dtype == want.dtype
    pattern = np.where(np.isnan(want), np.isnan(got),
                       np.where(np.isinf(want), got == want, np.isfinite(got)))
    with np.errstate(invalid="ignore"):
        error = np.abs(got.astype(np.float64) - want.astype(np.float64))
        close = ~np.isfinite(want) | (error <= atol + rtol * np.abs(want.astype(np.float64)))
    return [(i, got[i], want[i]) for i in zip(*np.nonzero(~(pattern & close)))]


def _compare(results: dict, references: dict, x: np.ndarray, rtol: float, atol: float,
             weights: dict | None = None) -> dict:
    failures = {}
    for name, reference in references.items():
        want_y, want_g = _torch(reference, x, (weights or {}).get(name))
        y, g = results[name]
        for part, got, want in (("forward", y, want_y), ("gradient", g, want_g)):
            bad = _mismatches(got, want, rtol, atol)
            if bad:
                failures[f"{name} {part}"] = [(x[i[0]].tolist(), *v) for i, *v in bad]
    return failures


@needs_torch
def test_unary_ops_forward_and_gradient_at_extreme_inputs():
    """Before, sigmoid's and silu's gradients were NaN for x <= -89 (exp(-x) overflowed:
    0 * inf in the chain rule), and gelu(approximate='tanh') had a NaN gradient at +-3e38
    (x**3 overflowed)."""
    unary = _unary()
    results = _nova_all({name: f for name, (f, _) in unary.items()}, EXTREMES)
    references = {name: r for name, (_, r) in unary.items()}
    failures = _compare(results, references, EXTREMES, rtol=2e-5, atol=1e-6)
    assert not failures, failures


@needs_torch
def test_saturating_ops_in_float64_beyond_exp_overflow():
    """exp overflows float64 past 709.8: sigmoid and silu stay finite there too."""
    x = np.array([-1e4, -800, -746, -710, -1, 0, 1, 710, 746, 800, 1e4])
    fns = {"sigmoid": (nv.sigmoid, torch.sigmoid), "silu": (F.silu, TF.silu),
           "gelu_tanh": (lambda v: F.gelu(v, approximate="tanh"),
                         lambda t: TF.gelu(t, approximate="tanh"))}
    results = _nova_all({k: f for k, (f, _) in fns.items()}, x)
    failures = _compare(results, {k: r for k, (_, r) in fns.items()}, x, 1e-12, 1e-300)
    assert not failures, failures


def _saturating_references(x: np.ndarray) -> dict:
    """Float64 forward and derivative of sigmoid, silu and gelu(tanh), from their
    formulas (scipy's expit is exact at any finite input)."""
    x = x.astype(np.float64)
    s = expit(x)
    c = np.sqrt(2 / np.pi)
    with np.errstate(over="ignore"):
        t = np.tanh(c * (x + 0.044715 * x**3))
        gelu_grad = 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * c * (1 + 3 * 0.044715 * x * x)
    gelu_grad = np.where(np.abs(x) > 1e10, (x > 0).astype(np.float64), gelu_grad)
    return {"sigmoid": (s, s * (1 - s)), "silu": (x * s, s + x * s * (1 - s)),
            "gelu_tanh": (0.5 * x * (1 + t), gelu_grad)}


def test_saturating_ops_at_finite_extremes_match_their_float64_formulas():
    """The regression of #17 (6b), without PyTorch: sigmoid's and silu's gradients were
    NaN for x <= -89 (exp(-x) overflowed: 0 * inf in the chain rule), gelu(tanh)'s at
    +-3e38 (x**3 overflowed). Every finite extreme input: finite and close."""
    x = EXTREMES[np.isfinite(EXTREMES)]
    fns = {"sigmoid": nv.sigmoid, "silu": F.silu,
           "gelu_tanh": lambda v: F.gelu(v, approximate="tanh")}
    results = _nova_all(fns, x)
    failures = {}
    for name, (want_y, want_g) in _saturating_references(x).items():
        y, g = results[name]
        for part, got, want in (("forward", y, want_y), ("gradient", g, want_g)):
            with np.errstate(over="ignore"):
                bad = _mismatches(got, want.astype(np.float32), 2e-5, 1e-6)
            if bad:
                failures[f"{name} {part}"] = [(x[i[0]].tolist(), *v) for i, *v in bad]
    assert not failures, failures


def test_gelu_tanh_gradient_is_exact_where_pytorch_float32_overflows():
    """PyTorch's float32 gelu(tanh) gradient is NaN at +-3e38 (its x**3 overflows); the
    math gives 1 and 0, and Nova does too, while +-inf keep PyTorch's NaN."""
    x = np.array([-3e38, 3e38, -np.inf, np.inf], np.float32)
    (y, g), = _nova_all({"g": lambda v: F.gelu(v, approximate="tanh")}, x).values()
    assert y[1] == np.float32(3e38) and y[0] == 0 and np.isnan(y[2]) and y[3] == np.inf
    assert g[0] == 0 and g[1] == 1 and np.isnan(g[2]) and np.isnan(g[3])


inf, nan = np.inf, np.nan
ROWS = np.array([[1e4, -1e4, 0, 1], [-inf, 0, 1, 2], [inf, 0, 1, 2], [-inf] * 4,
                 [nan, 0, 1, 2], [100, 100, 100, 100], [3e38, -3e38, 0, 1],
                 [-1e4] * 4, [88, 89, 90, 1e-40], [inf, inf, 0, 0], [-100, -90, 100, 90],
                 [1e-45, -1e-45, 0, -0.0]], np.float32)
WEIGHT = np.array([0.3, -1.2, 2.0, 0.5], np.float32)
TARGET = np.array([0, 1, 2, 3, 0, 1, 1, 2, 3, 2, 0, 3])
ROW_OPS = {
    "softmax": (lambda x: nv.softmax(x, -1), lambda t: torch.softmax(t, -1)),
    "log_softmax": (lambda x: nv.log_softmax(x, -1), lambda t: torch.log_softmax(t, -1)),
    "logsumexp": (lambda x: nv.logsumexp(x, -1, keepdim=True),
                  lambda t: torch.logsumexp(t, -1, keepdim=True)),
    "cross_entropy": (
        lambda x: F.cross_entropy(x, nv.tensor(TARGET), reduction="none").unsqueeze(-1),
        lambda t: TF.cross_entropy(t, torch.tensor(TARGET), reduction="none").unsqueeze(-1)),
    "cross_entropy_smoothed": (
        lambda x: F.cross_entropy(x, nv.tensor(TARGET), reduction="none",
                                  label_smoothing=0.1).unsqueeze(-1),
        lambda t: TF.cross_entropy(t, torch.tensor(TARGET), reduction="none",
                                   label_smoothing=0.1).unsqueeze(-1)),
}


@needs_torch
def test_row_ops_at_extreme_rows():
    """softmax, log_softmax, logsumexp and cross_entropy on rows with huge spreads,
    +-inf, NaN and subnormals, with a weighted upstream gradient."""
    weights = {name: WEIGHT for name in ("softmax", "log_softmax")}
    results = _nova_all({n: f for n, (f, _) in ROW_OPS.items()}, ROWS, weights)
    failures = _compare(results, {n: r for n, (_, r) in ROW_OPS.items()}, ROWS,
                        rtol=1e-4, atol=1e-6, weights=weights)
    assert not failures, failures
