"""Findings of the ninth port probe against PyTorch: gradients at the points where a
formula's pieces meet (0, domain edges, poles, NaN, past overflow), the ``Expm1`` rule's
cancellation, bool ``pow``/``-``, ``F.pad`` cropping in the index modes,
``grid_sample(mode='nearest')``'s grid gradient, the ``var``/``std`` overloads and
``norm(p='nuc')``.

References are closed forms evaluated in float64 with numpy, or PyTorch's values
(checked against torch 2.13, hard-coded with a comment); nothing here needs torch. Each
test differentiates all its cases in one step, so each engine compiles once per test.
"""
import math

import numpy as np
import pytest

import nova as nv
import nova.nn.functional as F

INF, NAN = math.inf, math.nan


def _grads(cases, dtype="float64"):
    """The gradient of ``fn`` at ``values`` for each ``(fn, values)``, in one step."""
    leaves = [nv.tensor(values, dtype=dtype, requires_grad=True) for _, values in cases]
    total = sum(fn(x).sum() for (fn, _), x in zip(cases, leaves))
    return [g.numpy().astype(np.float64) for g in nv.autograd.grad(total, leaves)]


def _check(got, want, rtol=1e-12):
    """Equal infinities and NaNs where ``want`` has them, close elsewhere."""
    want = np.asarray(want, np.float64)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(got[np.isinf(want)], want[np.isinf(want)])
    finite = np.isfinite(want)
    np.testing.assert_allclose(got[finite], want[finite], rtol=rtol, atol=0)


# ---------------------------------------------------------------- 1. where-branch traps

@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_atanh_asinh_gradient_at_zero_is_one(dtype):
    """|x| as abs had slope 0 at 0 (atanh' was 0), and asinh's untaken log(|x|) branch
    had an infinite slope there (0 * inf = NaN); both are 1 / ... = 1 at 0."""
    x = [0.0, -0.0, 0.5, -0.25]
    got = _grads([(nv.atanh, x), (nv.asinh, x), (lambda t: t.arctanh(), x),
                  (lambda t: t.arcsinh(), x)], dtype)
    xs = np.array(x)
    rtol = 1e-6 if dtype == "float32" else 1e-14
    for g in got[0::2]:
        _check(g, 1 / (1 - xs * xs), rtol)
    for g in got[1::2]:
        _check(g, 1 / np.sqrt(1 + xs * xs), rtol)


def test_asinh_atanh_keep_the_sign_of_zero():
    x = nv.tensor([-0.0, 0.0], dtype="float64")
    for fn in (nv.asinh, nv.atanh):
        np.testing.assert_array_equal(np.signbit(fn(x).numpy()), [True, False])


def test_asinh_gradient_beyond_the_overflow_switch():
    """Past 1e150 asinh is log(2|x|): slope 1/|x|; the near branch's x^2 overflowed."""
    (g,) = _grads([(nv.asinh, [1e200, -1e300, INF])])
    _check(g, [1e-200, 1e-300, 0.0])


def test_sinh_cosh_gradient_past_overflow_is_infinite():
    """The |x| < 20 branch's expm1(1e4) = inf had an infinite slope; where's zero
    gradient to it gave NaN instead of cosh/sinh = +-inf."""
    x = [1e4, -1e4, 1e30, -1e30, 25.0]
    gs, gc = _grads([(nv.sinh, x), (nv.cosh, x)])
    _check(gs, [INF, INF, INF, INF, np.cosh(25.0)])
    _check(gc, [INF, -INF, INF, -INF, np.sinh(25.0)])


def test_cosh_gradient_near_zero_keeps_its_digits():
    """(exp(x) + exp(-x))/2 differentiates to a difference: at 1e-8 it kept 8 digits."""
    x = [1e-8, -3e-9, 1e-5, 2.0]
    (g,) = _grads([(nv.cosh, x)])
    _check(g, np.sinh(np.array(x)), 1e-15)


def _sinc_slope(x):
    """sinc'(x) from its Taylor series in float64 (no cancellation for |x| < 0.01)."""
    x = np.asarray(x, np.float64)
    k = np.arange(1, 8)[:, None]
    terms = (-1.0) ** k * 2 * k * np.pi ** (2 * k) * x ** (2 * k - 1) / \
        np.array([math.factorial(2 * int(j) + 1) for j in k.ravel()])[:, None]
    return terms.sum(0)


def test_sinc_gradient_near_the_series_cut_off():
    """float32's quotient branch just above 1e-3 cancelled (-0.0034515 vs -0.0032899);
    float64 lost 5 digits there."""
    x = [1e-3, 9.99e-4, 1.001e-3, 5e-3, -2e-3]
    g32, = _grads([(nv.sinc, x)], "float32")
    g64, = _grads([(nv.sinc, x)], "float64")
    _check(g32, _sinc_slope(np.float32(x)), 1e-6)
    _check(g64, _sinc_slope(x), 1e-13)


# ---------------------------------------------------------------- 2. the Expm1 rule

def test_expm1_rule_does_not_cancel_near_minus_one():
    """expm1' = exp(x), not expm1(x) + 1, which is 0 in float32 below about -17:
    elu(-20)' was 0 (exp(-20) = 2.06e-9), celu(alpha=0.5)(-8)' 6% off."""
    x = np.array([-20.0, -40.0, -1.0], np.float32)
    ge, gc, gx = _grads([(F.elu, x), (lambda t: F.celu(t, alpha=0.5), x), (nv.expm1, x)],
                        "float32")
    e = np.exp(x.astype(np.float64))
    _check(ge, e, 1e-6)
    _check(gc, np.exp(x.astype(np.float64) / 0.5), 1e-6)
    _check(gx, e, 1e-6)


# ---------------------------------------------------------------- 3. PyTorch's edges

def test_gradients_at_domain_edges_are_pytorchs_infinities():
    """PyTorch's formulas (1/sqrt(1-x^2), 1/(1-x^2), 1/(x(1-x)), exp(erfinv^2)...)
    give these infinities; the compositions gave NaN (0 * inf) or 0 (a constant)."""
    cases = [(nv.asin, [1.0, -1.0, 0.5]), (nv.acos, [1.0, -1.0, 0.5]),
             (nv.atanh, [1.0, -1.0]), (nv.logit, [0.0, 1.0, 0.5]),
             (nv.erfinv, [1.0, -1.0, 0.0]), (nv.special.ndtri, [0.0, 1.0, 0.5]),
             (nv.acosh, [1.0, INF, 2.0])]
    want = [[INF, INF, 1 / math.sqrt(0.75)], [-INF, -INF, -1 / math.sqrt(0.75)],
            [INF, INF], [INF, INF, 4.0],
            [INF, INF, math.sqrt(math.pi) / 2], [INF, INF, math.sqrt(2 * math.pi)],
            # acosh: 1 / sqrt(x^2 - 1), +inf at 1 and 0 at +inf (its log branch; the
            # other branch's inf * 0 gave NaN)
            [INF, 0.0, 1 / math.sqrt(3)]]
    for g, w in zip(_grads(cases), want):
        _check(g, w)


def test_gamma_family_gradients_at_poles_are_pytorchs_infinities():
    cases = [(nv.lgamma, [0.0, -0.0, -1.0, -2.0]), (nv.digamma, [0.0, -0.0, -1.0, -3.0]),
             (lambda t: nv.polygamma(1, t), [0.0, -2.0]),
             (lambda t: nv.polygamma(2, t), [0.0, -1.0])]
    # PyTorch: lgamma' = digamma(+0) = -inf, digamma(-0) = +inf, NaN at negative
    # integers; digamma' = trigamma, +inf at its poles (PyTorch's is +inf at 0 and a
    # huge finite number, 6.6e32, at -1: its reflection formula's rounding);
    # polygamma(n)' = polygamma(n + 1, pole): -inf for n = 1, +inf for n = 2
    want = [[-INF, INF, NAN, NAN], [INF, INF, INF, INF], [-INF, -INF], [INF, INF]]
    for g, w in zip(_grads(cases), want):
        _check(g, w)


def test_domain_edge_values_are_unchanged():
    x = nv.tensor([1.0, -1.0], dtype="float64")
    np.testing.assert_array_equal(nv.asin(x).numpy(), [math.pi / 2, -math.pi / 2])
    np.testing.assert_array_equal(nv.acos(x).numpy(), [0.0, math.pi])
    np.testing.assert_array_equal(nv.atanh(x).numpy(), [INF, -INF])
    np.testing.assert_array_equal(nv.erfinv(x).numpy(), [INF, -INF])
    np.testing.assert_array_equal(nv.logit(nv.tensor([0.0, 1.0], dtype="float64")).numpy(),
                                  [-INF, INF])
    z = nv.tensor([0.0, -0.0, -2.0], dtype="float64")
    np.testing.assert_array_equal(nv.lgamma(z).numpy(), [INF, INF, INF])
    np.testing.assert_array_equal(nv.digamma(z).numpy(), [-INF, INF, NAN])
    assert nv.logit(nv.tensor([0.0, 0.5], dtype="float16")).dtype == nv.float16


def test_nanmean_of_an_all_nan_slice_has_a_nan_gradient():
    """PyTorch's nansum backward is g * ~isnan(x), g = 1/0 = inf there: NaN."""
    x = nv.tensor([[NAN, NAN], [1.0, NAN], [2.0, 4.0]], dtype="float64", requires_grad=True)
    y = nv.tensor([[NAN, NAN], [3.0, NAN]], requires_grad=True)
    out = nv.nanmean(x, 1)
    (gx, gy) = nv.autograd.grad(out.sum() + nv.nanmean(y, 1, keepdim=True).sum()
                                + nv.nanmean(y).sum(), [x, y])
    np.testing.assert_array_equal(out.detach().numpy(), [NAN, 1.0, 3.0])
    np.testing.assert_array_equal(gx.numpy(), [[NAN, NAN], [1.0, 0.0], [0.5, 0.5]])
    np.testing.assert_array_equal(gy.numpy(), [[NAN, NAN], [2.0, 0.0]])


def test_xlogy_gradient_at_zero_zero():
    """PyTorch 2: d/dx = log(y), 0 where x == 0 and y <= 0; d/dy = x / y (NaN at 0/0)."""
    x = nv.tensor([0.0, 0.0, 1.0, 0.0], dtype="float64", requires_grad=True)
    y = nv.tensor([0.0, 1.0, 0.0, NAN], dtype="float64", requires_grad=True)
    gx, gy = nv.autograd.grad(nv.xlogy(x, y).sum(), [x, y])
    np.testing.assert_array_equal(gx.numpy(), [0.0, 0.0, -INF, NAN])
    np.testing.assert_array_equal(gy.numpy(), [NAN, 0.0, INF, NAN])


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_activation_gradients_at_nan(dtype):
    """PyTorch's kernels test ``x <= 0`` (elu family: NaN takes the linear side, slope
    scale), ``x < -3`` / ``x <= 3`` (hardswish: NaN takes the identity, slope 1) and
    ``-3 < x < 3`` (hardsigmoid: NaN gets 0)."""
    x = [NAN, -1.0, 1.0, 3.0, -3.0]
    cases = [(F.elu, x), (F.selu, x), (lambda t: F.celu(t, alpha=2.0), x),
             (F.hardswish, x), (F.hardsigmoid, x)]
    got = _grads(cases, dtype)
    scale = 1.0507009873554804934193349852946
    rtol = 1e-6 if dtype == "float32" else 1e-12
    want = [[1.0, math.exp(-1), 1.0, 1.0, math.exp(-3)],
            [scale, scale * 1.6732632423543772848170429916717 * math.exp(-1), scale, scale,
             scale * 1.6732632423543772848170429916717 * math.exp(-3)],
            [1.0, math.exp(-0.5), 1.0, 1.0, math.exp(-1.5)],
            [1.0, 1 / 6, 5 / 6, 1.0, 0.0],
            [0.0, 1 / 6, 1 / 6, 0.0, 0.0]]
    for g, w in zip(got, want):
        _check(g, w, rtol)
    values = F.hardsigmoid(nv.tensor(x, dtype=dtype)).numpy()
    np.testing.assert_array_equal(values, np.array([NAN, 2 / 6, 4 / 6, 1.0, 0.0], dtype))


# ---------------------------------------------------------------- 4. bool pow and sub

def test_bool_pow_follows_pytorch():
    b = nv.tensor([True, False])
    for out, want in ((b ** True, [True, False]), (nv.pow(b, False), [True, True])):
        assert out.dtype == nv.bool                  # PyTorch: bool
        assert out.tolist() == want
    assert (b ** 2).dtype == nv.int64 and (b ** 2).tolist() == [1, 0]
    assert (2 ** b).tolist() == [2, 1]
    for fn in (lambda: b ** b, lambda: nv.pow(True, b)):
        with pytest.raises(TypeError, match="not implemented for bool base and exponent"):
            fn()


def test_subtraction_with_a_bool_operand_is_refused():
    b, i, f = nv.tensor([True, False]), nv.tensor([1, 2]), nv.tensor([1.5, 2.5])
    for fn in (lambda: b - i, lambda: i - b, lambda: b - 1, lambda: 1 - b, lambda: f - b,
               lambda: b - 1.5, lambda: i.sub(b), lambda: nv.rsub(b, 1), lambda: i - True):
        with pytest.raises(TypeError, match="invert a mask, use the `~` or logical_not"):
            fn()
    for fn in (lambda: b - b, lambda: b - True, lambda: True - b):
        with pytest.raises(TypeError, match="two bool tensors .* logical_xor"):
            fn()


# ---------------------------------------------------------------- 5. F.pad cropping

def _pad_reference(x_shape, pads, mode):
    """Flat source index of each output element, as PyTorch's kernels: reflect and
    replicate pad by the positive parts then crop; circular crops then wraps."""
    idx = np.arange(math.prod(x_shape)).reshape(x_shape)
    np_mode = {"reflect": "reflect", "replicate": "edge", "circular": "wrap"}[mode]
    for k in range(len(pads) // 2):
        d = len(x_shape) - 1 - k
        lo, hi = pads[2 * k], pads[2 * k + 1]
        if mode == "circular":
            idx = np.moveaxis(idx, d, 0)[max(-lo, 0):idx.shape[d] - max(-hi, 0)]
            idx = np.moveaxis(idx, 0, d)
        width = [(0, 0)] * idx.ndim
        width[d] = (max(lo, 0), max(hi, 0))
        idx = np.pad(idx, width, mode=np_mode)
        if mode != "circular":
            idx = np.moveaxis(idx, d, 0)[max(-lo, 0):idx.shape[d] - max(-hi, 0)]
            idx = np.moveaxis(idx, 0, d)
    return idx


@pytest.mark.parametrize("mode", ["reflect", "replicate", "circular"])
def test_pad_index_modes_crop_with_negative_pads(mode):
    pads_list = [(-1, 2, 1, -2), (2, -1, -2, 1), (-4, 3, 0, 0)] if mode != "circular" else \
        [(-1, 2, 1, -2), (1, -3, -1, 2), (-2, -1, 3, 0)]
    rng = np.random.default_rng(0)
    a = rng.standard_normal((1, 2, 4, 5))
    leaves = [nv.tensor(a, requires_grad=True) for _ in pads_list]
    outs = [F.pad(x, p, mode=mode) for x, p in zip(leaves, pads_list)]
    ups = [rng.standard_normal(o.shape) for o in outs]
    grads = nv.autograd.grad(sum((o * nv.tensor(u)).sum() for o, u in zip(outs, ups)), leaves)
    for p, o, u, g in zip(pads_list, outs, ups, grads):
        src = _pad_reference(a.shape, p, mode)
        np.testing.assert_array_equal(o.detach().numpy(), a.ravel()[src])
        want = np.bincount(src.ravel(), u.ravel(), a.size).reshape(a.shape)
        np.testing.assert_allclose(g.numpy(), want, rtol=1e-12, atol=1e-12)


def test_pad_cropping_matches_pytorchs_kernels():
    """PyTorch's values on arange(5) (torch 2.13): circular crops before it wraps."""
    x = nv.arange(5.0).reshape(1, 1, 5)
    for mode, pads, want in [("reflect", (-4, 3), [4, 3, 2, 1]),
                             ("reflect", (-6, 2), [2]),
                             ("replicate", (3, -4), [0, 0, 0, 0]),
                             ("replicate", (-6, 2), [4]),
                             ("circular", (1, -3), [1, 0, 1]),
                             ("circular", (-2, 3), [2, 3, 4, 2, 3, 4]),
                             ("circular", (2, -1), [2, 3, 0, 1, 2, 3])]:
        assert F.pad(x, pads, mode=mode).reshape(-1).tolist() == want, (mode, pads)


def test_pad_index_mode_errors_follow_pytorch():
    x4 = nv.ones(1, 1, 4, 5)
    for mode in ("reflect", "replicate", "circular"):
        with pytest.raises(NotImplementedError, match="padding size 2 is not supported for 4D"):
            F.pad(x4, (1, 1), mode=mode)
        with pytest.raises(NotImplementedError, match="padding size 6 is not supported for 3D"):
            F.pad(nv.ones(2, 4, 5), (1,) * 6, mode=mode)
    x = nv.ones(1, 1, 5)
    with pytest.raises(ValueError, match=r"reflect padding \(-1, 5\) .* less than"):
        F.pad(x, (-1, 5), mode="reflect")
    with pytest.raises(ValueError, match="too small, the output size would be 0"):
        F.pad(x, (-5, 0), mode="replicate")
    with pytest.raises(ValueError, match="wraps the 4 elements left after cropping"):
        F.pad(x, (-1, 5), mode="circular")
    with pytest.raises(ValueError, match="crop more than the dim holds"):
        F.pad(x, (-3, -3), mode="circular")
    assert F.pad(x, (-5, 0), mode="circular").shape == (1, 1, 0)   # PyTorch: empty too


# ---------------------------------------------------------------- 6. grid_sample nearest

def test_grid_sample_nearest_records_a_zero_grid_gradient():
    """PyTorch's output has a grad_fn and grid.grad is zeros (NaN coordinates too)."""
    rng = np.random.default_rng(0)
    img = rng.standard_normal((1, 2, 3, 4))
    g = rng.uniform(-1.2, 1.2, (1, 2, 3, 2))
    g[0, 0, 0, 0] = NAN
    grid = nv.tensor(g, requires_grad=True)
    out = F.grid_sample(nv.tensor(img), grid, mode="nearest", align_corners=False)
    assert out.requires_grad and out.grad_fn is not None
    (gg,) = nv.autograd.grad(out.sum(), [grid])
    np.testing.assert_array_equal(gg.numpy(), np.zeros_like(g))
    plain = F.grid_sample(nv.tensor(img), nv.tensor(g), mode="nearest", align_corners=False)
    np.testing.assert_array_equal(out.detach().numpy(), plain.numpy())


# ---------------------------------------------------------------- 7. var/std overloads

def test_var_std_accept_pytorchs_three_forms():
    a = np.arange(12.0).reshape(3, 4) ** 1.5
    x = nv.tensor(a)
    checks = [
        (x.var(False), a.var()), (x.var(True), a.var(ddof=1)), (nv.var(x, False), a.var()),
        (x.std(False), a.std()), (x.var(1, False), a.var(1)),
        (x.var(1, False, True), a.var(1, keepdims=True)),
        (x.std(1, True, keepdim=True), a.std(1, ddof=1, keepdims=True)),
        (x.var(unbiased=False), a.var()), (x.var(0, correction=2), a.var(0, ddof=2)),
        (x.var((0, 1), False), a.var()),
    ]
    for got, want in checks:
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-6)
    with pytest.raises(TypeError, match="unbiased must be a bool"):
        x.var(1, 0)
    with pytest.raises(TypeError, match="takes no other arguments"):
        x.var(True, True)
    with pytest.raises(TypeError, match="not both"):
        x.var(1, unbiased=False, correction=0)


def test_var_mean_std_mean_accept_unbiased():
    a = np.arange(12.0).reshape(3, 4) ** 1.5
    x = nv.tensor(a)
    for (v, m), (wv, wm) in [
            (nv.var_mean(x, 1, unbiased=False), (a.var(1), a.mean(1))),
            (nv.std_mean(x, unbiased=False), (a.std(), a.mean())),
            (nv.var_mean(x, False), (a.var(), a.mean())),
            (nv.std_mean(x, 1, False, True), (a.std(1, keepdims=True),
                                             a.mean(1, keepdims=True))),
            (nv.var_mean(x, 0, correction=0), (a.var(0), a.mean(0)))]:
        np.testing.assert_allclose(v.numpy(), wv, rtol=1e-6)
        np.testing.assert_allclose(m.numpy(), wm, rtol=1e-6)


# ---------------------------------------------------------------- 8. norm(p='nuc')

def test_norm_routes_matrix_orders_to_matrix_norm():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((2, 3, 4))
    x = nv.tensor(a)
    both = nv.cat([x.norm(p="nuc", dim=(1, 2)), nv.norm(x[0], "nuc").reshape(1)])
    np.testing.assert_allclose(both.numpy(), [*np.linalg.norm(a, "nuc", axis=(1, 2)),
                                              np.linalg.norm(a[0], "nuc")], rtol=1e-10)
    np.testing.assert_allclose(x.norm(p="fro", dim=(1, 2)).numpy(),
                               np.linalg.norm(a, "fro", axis=(1, 2)), rtol=1e-12)
    np.testing.assert_allclose(x.norm(p=None).numpy(), np.linalg.norm(a.ravel()), rtol=1e-12)
    with pytest.raises(Exception, match="dim must be a 2-tuple"):
        x.norm(p="nuc")                      # PyTorch: matrix_norm over all 3 dims refuses
