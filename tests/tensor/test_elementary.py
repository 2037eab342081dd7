"""Elementary functions (``nova.tensor.elementary``) against numpy's float64 values:
float32 within 2 ulps, exact where PyTorch is exact (logarithms at powers, lerp's
endpoints), special values as PyTorch gives them, and gradients by finite differences
in float64."""
import math

import numpy as np
import pytest

import nova as nv

ULP32 = 2 * np.finfo(np.float32).eps


def _close(got, want, rtol=ULP32):
    got = np.asarray(got, np.float64)
    np.testing.assert_allclose(got, want, rtol=rtol, atol=0, equal_nan=True)


def test_logarithms_and_exp2_are_exact_at_powers():
    powers = np.array([2.0 ** k for k in range(-20, 60, 7)], np.float32)
    tens = np.array([10.0 ** k for k in range(-5, 11)], np.float64)
    x2, x10 = nv.tensor(powers), nv.tensor(tens)
    ints = nv.tensor(np.arange(-10, 20, dtype=np.float32))
    got2, got10, gotf, gote = nv.log2(x2), nv.log10(x10), nv.log10(x10.float()), nv.exp2(ints)
    nv.realize(got2, got10, gotf, gote)
    np.testing.assert_array_equal(got2.numpy(), np.arange(-20, 60, 7))
    np.testing.assert_array_equal(got10.numpy(), np.arange(-5, 11))
    np.testing.assert_array_equal(gotf.numpy()[5:], np.arange(0, 11))   # 1e0..1e10: exact
    np.testing.assert_array_equal(gote.numpy(), 2.0 ** np.arange(-10, 20))
    # (1e-45 and 1e-40 are subnormal in float32: their nearest floats are no powers of ten)
    x = np.array([0.3, 3.0, 1000.5, 1e-30, 0.0, -1.0, np.inf, np.nan, 1e-45, 1e-40],
                 np.float32)
    with np.errstate(divide="ignore", invalid="ignore"):
        _close(nv.log2(nv.tensor(x)).numpy(), np.log2(x.astype(np.float64)))
        _close(nv.log10(nv.tensor(x)).numpy(), np.log10(x.astype(np.float64)))
    assert nv.log2(nv.tensor([4, 8])).dtype == nv.float32         # integers: float32


def test_hyperbolic_functions_keep_every_digit_and_overflow_only_with_the_result():
    x = np.array([1e-7, -3e-4, 0.5, -2.0, 19.9, 20.1, -40.0, 88.0, 89.2, 95.0,
                  np.inf, -np.inf, np.nan, 0.0], np.float32)
    w = x.astype(np.float64)
    t = nv.tensor(x)
    outs = [nv.sinh(t), nv.cosh(t), nv.tanh(t), nv.tan(t)]
    nv.realize(*outs)
    with np.errstate(over="ignore", invalid="ignore"):
        _close(outs[0].numpy(), np.sinh(w).astype(np.float32))
        _close(outs[1].numpy(), np.cosh(w).astype(np.float32))
        _close(outs[3].numpy(), np.tan(w).astype(np.float32))
    assert np.isfinite(outs[0].numpy()[8]) and np.isinf(outs[0].numpy()[9])   # 89.2, 95
    d = np.array([1e-300, -0.7, 300.0, 709.0, 710.2, -710.3], np.float64)
    with np.errstate(over="ignore"):
        _close(nv.sinh(nv.tensor(d)).numpy(), np.sinh(d), rtol=4e-16)
        _close(nv.cosh(nv.tensor(d)).numpy(), np.cosh(d), rtol=4e-16)


def test_inverse_trigonometric_functions():
    y = np.array([0.0, -0.0, 0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.inf, 3.0, np.nan, 1e-30],
                 np.float32)
    x = np.array([1.0, 1.0, -1.0, -1.0, 0.0, -0.0, np.inf, 2.0, -np.inf, -4.0, 1.0, 1e-30],
                 np.float32)
    got = nv.atan2(nv.tensor(y), nv.tensor(x)).numpy()
    want = np.arctan2(y.astype(np.float64), x.astype(np.float64)).astype(np.float32)
    np.testing.assert_array_equal(got, want)                      # signed zeros included
    np.testing.assert_array_equal(np.signbit(got), np.signbit(want))
    assert nv.atan2(nv.tensor([1]), nv.tensor([1])).dtype == nv.float32
    v = np.array([-1.0, -0.99999, -0.5, 1e-8, 0.3, 0.999999, 1.0, 1.5, np.nan], np.float32)
    w = v.astype(np.float64)
    with np.errstate(invalid="ignore"):
        _close(nv.asin(nv.tensor(v)).numpy(), np.arcsin(w))
        _close(nv.acos(nv.tensor(v)).numpy(), np.arccos(w))
    big = np.array([-1e30, -3.0, 0.1, 7.0, np.inf], np.float32)
    _close(nv.atan(nv.tensor(big)).numpy(), np.arctan(big.astype(np.float64)))
    _close(nv.arcsin(nv.tensor(w[:7])).numpy(), np.arcsin(w[:7]), rtol=4e-16)


def test_inverse_hyperbolic_functions():
    x = np.array([1e-8, -0.3, 0.999, -0.99999, 1.0, -1.0, 1.5, np.nan], np.float32)
    y = np.array([1.0, 1.0 + 1e-6, 1.5, 1e20, 3e38, 0.5, np.inf, -1e30, 0.0], np.float32)
    z = np.array([1e-8, -0.5, 3.0, -1e20, 3e38, -np.inf], np.float32)
    with np.errstate(divide="ignore", invalid="ignore"):
        _close(nv.atanh(nv.tensor(x)).numpy(), np.arctanh(x.astype(np.float64)))
        _close(nv.acosh(nv.tensor(y)).numpy(), np.arccosh(y.astype(np.float64)))
        _close(nv.asinh(nv.tensor(z)).numpy(), np.arcsinh(z.astype(np.float64)))
    big = np.array([1e200, -1e300], np.float64)
    _close(nv.asinh(nv.tensor(big)).numpy(), np.arcsinh(big), rtol=4e-16)
    near_one = np.array([-0.999, -0.9999999, 0.999, -1e-300], np.float64)   # (odd: no
    _close(nv.atanh(nv.tensor(near_one)).numpy(), np.arctanh(near_one), rtol=4e-16)  # cancelling)


def test_combining_functions_and_their_special_values():
    a = np.array([0.0, -np.inf, np.inf, 1000.0, -3.0, np.nan, 2.0], np.float32)
    b = np.array([0.0, -np.inf, np.inf, 999.0, 5.0, 1.0, -np.inf], np.float32)
    with np.errstate(invalid="ignore"):
        _close(nv.logaddexp(nv.tensor(a), nv.tensor(b)).numpy(),
               np.logaddexp(a.astype(np.float64), b.astype(np.float64)))
    # a result near 0 cancels two terms of ~0.7: computed in float32 it lost 37 ulps
    pair = np.array([-0.63539666], np.float32), np.array([-0.75453204], np.float32)
    _close(nv.logaddexp(nv.tensor(pair[0]), nv.tensor(pair[1])).numpy(),
           np.logaddexp(pair[0].astype(np.float64), pair[1].astype(np.float64)))
    x = nv.tensor([0.0, 0.0, 2.0, 3.0])
    y = nv.tensor([0.0, np.nan, 0.5, np.inf])
    _close(nv.xlogy(x, y).numpy(), [0.0, np.nan, 2 * np.log(0.5), np.inf])
    _close(nv.logit(nv.tensor([0.25, 0.5, 1.0, 0.0]), eps=None).numpy(),
           [np.log(1 / 3), 0.0, np.inf, -np.inf])
    _close(nv.logit(nv.tensor([0.0, 1.0]), eps=1e-3).numpy(),
           [np.log(1e-3 / (1 - 1e-3)), np.log((1 - 1e-3) / 1e-3)], rtol=1e-5)
    _close(nv.sinc(nv.tensor([0.0, 0.5, -2.25])).numpy(), np.sinc([0.0, 0.5, -2.25]))
    _close(nv.deg2rad(nv.tensor([180.0])).numpy(), [math.pi])
    _close(nv.rad2deg(nv.tensor([math.pi / 2])).numpy(), [90.0])
    h = nv.hypot(nv.tensor([3e38, 3e-39, 0.0, np.inf, np.nan]),
                 nv.tensor([4e38, 4e-39, 0.0, np.nan, 1.0]))
    _close(h.numpy(), [np.inf, 5e-39, 0.0, np.inf, np.nan])
    assert nv.hypot(nv.tensor([3e30]), nv.tensor([4e30])).item() == pytest.approx(5e30, rel=1e-7)


def test_interpolation_and_fused_multiply_forms():
    start, end = nv.tensor([1.0, -2.0, 1e8]), nv.tensor([3.0, 6.0, 1.0])
    assert nv.lerp(start, end, 0.0).tolist() == [1.0, -2.0, 1e8]
    assert nv.lerp(start, end, 1.0).tolist() == [3.0, 6.0, 1.0]           # exact endpoints
    w = nv.tensor([0.25, 0.75, 0.5])
    _close(nv.lerp(start, end, w).numpy(), [1.5, 4.0, (1e8 + 1) / 2], rtol=1e-7)
    base = nv.tensor([1.0, 2.0])
    assert nv.addcmul(base, nv.tensor([2.0, 3.0]), nv.tensor([4.0, 5.0]), value=0.5).tolist() \
        == [5.0, 9.5]
    assert nv.addcdiv(base, nv.tensor([2.0, 3.0]), nv.tensor([4.0, 6.0])).tolist() == [1.5, 2.5]


def test_predicates_and_replacements():
    x = nv.tensor([1.0, np.inf, -np.inf, np.nan, -0.0])
    assert nv.isfinite(x).tolist() == [True, False, False, False, True]
    assert nv.isposinf(x).tolist() == [False, True, False, False, False]
    assert nv.isneginf(x).tolist() == [False, False, True, False, False]
    assert nv.isfinite(nv.tensor([1, 2])).tolist() == [True, True]
    got = nv.nan_to_num(x).numpy()
    big = np.finfo(np.float32).max
    np.testing.assert_array_equal(got, [1.0, big, -big, 0.0, -0.0])
    assert nv.nan_to_num(x, nan=7.0, posinf=1.0, neginf=-1.0).tolist() == [1.0, 1.0, -1.0, 7.0, 0.0]
    a = nv.tensor([1.0, 1.0, np.inf, np.nan, 1e-9, np.nan])
    b = nv.tensor([1.0 + 1e-6, 1.1, np.inf, np.nan, 0.0, 1.0])
    assert nv.isclose(a, b).tolist() == [True, False, True, False, True, False]
    assert nv.isclose(a, b, equal_nan=True).tolist() == [True, False, True, True, True, False]
    # an infinity is close only to itself (|inf - x| <= inf must not count)
    inf = nv.tensor([np.inf, -np.inf, 3e38, np.inf])
    assert nv.isclose(inf, nv.tensor([np.inf, np.inf, np.inf, 1e38])).tolist() == \
        [True, False, False, False]
    assert nv.isclose(nv.tensor([10, 11]), nv.tensor([10, 10]), atol=0.5).tolist() == [True, False]
    with pytest.raises(ValueError, match="isclose: rtol and atol must be non-negative"):
        nv.isclose(a, b, rtol=-1.0)


def test_nan_aware_extrema_clamps_powers_and_steps():
    a = nv.tensor([1.0, np.nan, np.nan, -2.0])
    b = nv.tensor([np.nan, 3.0, np.nan, -1.0])
    _close(nv.fmax(a, b).numpy(), np.fmax(a.numpy(), b.numpy()))
    _close(nv.fmin(a, b).numpy(), np.fmin(a.numpy(), b.numpy()))
    assert nv.fmax(nv.tensor([1, 5]), nv.tensor([3, 2])).tolist() == [3, 5]
    x = nv.tensor([-1.0, 0.5, 2.0])
    assert nv.clamp_min(x, 0.0).tolist() == [0.0, 0.5, 2.0]
    assert x.clamp_max(1.0).tolist() == [-1.0, 0.5, 1.0]
    fp = nv.float_power(nv.tensor([2, 3]), 0.5)
    assert fp.dtype == nv.float64 and fp.tolist() == [math.sqrt(2), math.sqrt(3)]
    steps = nv.heaviside(nv.tensor([-1.5, 0.0, 2.0, np.nan]), nv.tensor([0.5]))
    np.testing.assert_array_equal(steps.numpy(), [0.0, 0.5, 1.0, 0.0])


def test_nan_ignoring_reductions():
    a = np.array([[1.0, np.nan, 3.0], [np.nan, np.nan, np.nan]], np.float32)
    x = nv.tensor(a)
    with np.errstate(invalid="ignore"), pytest.warns(RuntimeWarning):
        want_mean = np.nanmean(a, 1)
    _close(nv.nansum(x, 1).numpy(), np.nansum(a, 1))
    _close(nv.nanmean(x, 1).numpy(), want_mean)
    assert nv.nansum(x).item() == 4.0 and x.nanmean().item() == 2.0


@pytest.mark.parametrize("name", ["log2", "log10", "exp2", "sinh", "cosh", "tan", "atanh",
                                  "asinh", "acosh", "sinc", "logit", "atan", "asin", "acos"])
def test_gradients_by_finite_differences(name):
    x = np.array([0.3, 0.45, 0.8], np.float64) if name in ("atanh", "logit", "asin", "acos") \
        else \
        np.array([1.3, 2.0, 4.5], np.float64)
    fn = getattr(nv, name)
    assert nv.autograd.gradcheck(fn, (nv.tensor(x, requires_grad=True),))


def test_gradients_of_binary_forms():
    a = nv.tensor(np.array([0.3, -1.2, 2.0], np.float64), requires_grad=True)
    b = nv.tensor(np.array([1.5, 0.7, -0.4], np.float64), requires_grad=True)
    for fn in (nv.logaddexp, nv.hypot, nv.atan2, lambda p, q: nv.lerp(p, q, 0.3),
               lambda p, q: nv.addcmul(p, p, q, value=2.0), lambda p, q: nv.xlogy(p, q.abs())):
        assert nv.autograd.gradcheck(fn, (a, b))
