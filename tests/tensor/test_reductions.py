"""Reductions against numpy: dim as int, tuple or None, keepdim, dtypes."""
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import nova as nv
from tests.helpers import array_and_dims, arrays, assert_close, shapes


def _np_axes(dims):
    return dims if dims is None or isinstance(dims, int) else tuple(dims)


@pytest.mark.parametrize("name", ["sum", "mean", "amax", "amin"])
@given(case=array_and_dims())
def test_reductions_match_numpy(name, case):
    x, dims, keepdim = case
    ours = getattr(nv, name)(nv.tensor(x), dims, keepdim=keepdim)
    ref = {"sum": np.sum, "mean": np.mean, "amax": np.max, "amin": np.min}[name]
    assert_close(ours, ref(x.astype(np.float64), axis=_np_axes(dims), keepdims=keepdim),
                 rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name", ["var", "std"])
@given(case=array_and_dims(), correction=st.sampled_from([0, 1]))
def test_var_std_with_correction(name, case, correction):
    x, dims, keepdim = case
    axes = _np_axes(dims)
    n = x.size if axes is None else np.prod([x.shape[a] for a in np.atleast_1d(axes)])
    if n - correction <= 0:
        return
    ours = getattr(nv, name)(nv.tensor(x), dims, keepdim=keepdim, correction=correction)
    ref = getattr(np, name)(x.astype(np.float64), axis=axes, keepdims=keepdim, ddof=correction)
    assert_close(ours, ref, rtol=1e-4, atol=1e-5)


def test_std_of_large_and_tiny_float32_values_neither_overflows_nor_underflows():
    """Regression: the squares of float32 values past 1.8e19 overflowed, so
    ``std([1e30, -1e30])`` was inf (PyTorch: 1.414e30)."""
    big = np.array([[1e30, -1e30, 3e29], [2e-30, -1e-30, 5e-31]], np.float32)
    got = nv.std(nv.tensor(big), 1).numpy()
    np.testing.assert_allclose(got, np.std(big.astype(np.float64), 1, ddof=1), rtol=1e-6)
    assert nv.std(nv.zeros(4)).item() == 0.0
    assert np.isnan(nv.std(nv.tensor([np.inf, 1.0])).item())
    x = nv.tensor(np.array([1.0, 2.0, 4.0, -3.0]), requires_grad=True)
    assert nv.autograd.gradcheck(lambda t: t.std(0, keepdim=True), (x,))


def test_std_keeps_the_precision_of_a_small_spread_around_a_large_mean():
    """Regression: std scaled x by its largest magnitude before centering, rounding
    every element by half an ulp of 1000 -- all of a 0.03 spread's precision
    (0.0129279 for 0.0129226); the deviations are scaled now. Values near float32's
    largest still neither overflow in x - mean nor in the result."""
    for values in ([1000.0, 1000.01, 1000.02, 1000.03], [3e5, 3e5 + 0.5, 3e5 + 1.0, 3e5 + 1.5],
                   [2e38, 2e38, -2e38]):
        x = np.array(values, np.float32)
        want = np.std(x.astype(np.float64), ddof=1)
        np.testing.assert_allclose(nv.tensor(x).std().item(), want, rtol=2e-6)
        np.testing.assert_allclose(nv.tensor(x).std(unbiased=False).item(),
                                   np.std(x.astype(np.float64)), rtol=2e-6)


def test_std_over_an_empty_dim_is_nan_as_var():
    """Regression: std over a zero-size dim (``nv.zeros(0).std()``) raised IndexRangeError
    from the largest magnitude it scales by; PyTorch's (and Nova's var) give NaN."""
    got = [nv.zeros(0).std(), nv.zeros(0, dtype=nv.float16).std(keepdim=True, correction=0),
           nv.zeros(0, 3).std(0), nv.std_mean(nv.zeros(2, 0), dim=(1,), keepdim=True)[0]]
    nv.realize(*got)
    assert [tuple(g.shape) for g in got] == [(), (1,), (3,), (2, 1)]
    assert got[1].dtype == nv.float16
    for g in got:
        assert np.isnan(g.float().numpy()).all()


@given(case=array_and_dims())
def test_logsumexp(case):
    x, dims, keepdim = case
    if dims is None:
        dims = tuple(range(x.ndim))
    axes = _np_axes(dims)
    m = np.max(x.astype(np.float64), axis=axes, keepdims=True)
    ref = np.log(np.sum(np.exp(x - m), axis=axes, keepdims=True)) + m
    if not keepdim:
        ref = np.squeeze(ref, axis=axes)
    assert_close(nv.logsumexp(nv.tensor(x), dims, keepdim=keepdim), ref, rtol=1e-5, atol=1e-5)


def test_logsumexp_of_all_minus_inf_rows_is_minus_inf():
    x = nv.tensor([[-float("inf")] * 3, [0.0, 0.0, 0.0]])
    out = nv.logsumexp(x, 1).tolist()
    assert out[0] == -float("inf") and abs(out[1] - np.log(3)) < 1e-6


@pytest.mark.parametrize("fn", ["softmax", "log_softmax"])
@given(x=shapes(min_dims=1).flatmap(lambda s: arrays(s, np.float32, -20, 20)), data=st.data())
def test_softmax_family(fn, x, data):
    d = data.draw(st.integers(-x.ndim, x.ndim - 1))
    e = np.exp(x - x.max(axis=d, keepdims=True))
    ref = e / e.sum(axis=d, keepdims=True)
    if fn == "log_softmax":
        ref = np.log(ref)
    out = getattr(nv, fn)(nv.tensor(x), dim=d)
    assert_close(out, ref, rtol=1e-4, atol=1e-5)
    assert_close(getattr(nv.tensor(x), fn)(d), ref, rtol=1e-4, atol=1e-5)


@given(x=shapes(min_dims=1).flatmap(lambda s: arrays(s, np.int64, -3, 3)), data=st.data())
def test_argmax_argmin_take_first_occurrence(x, data):
    d = data.draw(st.integers(-x.ndim, x.ndim - 1))
    keep = data.draw(st.booleans())
    t = nv.tensor(x)
    assert_close(nv.argmax(t, d, keepdim=keep), np.argmax(x, axis=d, keepdims=keep))
    assert_close(nv.argmin(t, d, keepdim=keep), np.argmin(x, axis=d, keepdims=keep))
    assert nv.argmax(t).item() == int(np.argmax(x))
    values, indices = t.max(d)
    assert_close(values, x.max(axis=d))
    assert_close(indices, np.argmax(x, axis=d))
    values, indices = nv.min(t, d, keepdim=True)
    assert_close(values, x.min(axis=d, keepdims=True))


def test_integer_and_bool_sums_are_int64():
    assert nv.tensor([True, True, False]).sum().item() == 2
    assert nv.tensor([True, True, False]).sum().dtype == nv.int64
    assert nv.tensor([1, 2], dtype=nv.int32).sum().dtype == nv.int64
    assert nv.tensor([1, 2], dtype=nv.int32).sum(dtype=nv.float32).dtype == nv.float32


def test_max_of_two_tensors_and_full_reductions():
    a, b = nv.tensor([1.0, 5.0]), nv.tensor([3.0, 2.0])
    assert nv.max(a, b).tolist() == [3.0, 5.0]
    assert nv.min(a, b).tolist() == [1.0, 2.0]
    assert a.max().item() == 5.0 and a.max().shape == ()
    assert nv.tensor(3.0).sum().item() == 3.0


def test_nan_propagates_through_max():
    x = nv.tensor([1.0, float("nan"), 2.0])
    assert np.isnan(x.max().item())
    assert x.argmax().item() == 1


def test_any_all_over_empty_dims_and_of_uint8_follow_pytorch():
    """Over dims without elements ``any`` is False and ``all`` True (it raised: the
    max of nothing); a uint8 input gives uint8 (PyTorch's one exception; every other
    dtype gives bool)."""
    e = nv.zeros(2, 0)
    np.testing.assert_array_equal(e.any(1).numpy(), [False, False])
    np.testing.assert_array_equal(e.all(1).numpy(), [True, True])
    assert e.any().item() is False and e.all().item() is True
    assert e.all(1, keepdim=True).shape == (2, 1) and e.any(0).shape == (0,)
    u = nv.tensor(np.array([[1, 0], [0, 0]], np.uint8))
    assert u.any().dtype == nv.uint8 and u.all(1).dtype == nv.uint8
    np.testing.assert_array_equal(u.any(1).numpy(), np.array([1, 0], np.uint8))
    assert nv.tensor([1, 0], dtype=nv.int8).any().dtype == nv.bool
