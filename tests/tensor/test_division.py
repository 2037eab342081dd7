"""``div``/``divide`` with PyTorch's ``rounding_mode`` (and the in-place ``div_``),
``floor_divide``, ``remainder`` and ``fmod``, against numpy's definitions: ``None`` is
true division (integers give float32), ``"trunc"`` rounds the quotient toward zero and
``"floor"`` toward -inf, both in the common dtype (a float floor quotient as PyTorch
and numpy compute it, from the exact remainder: ``inf // 2`` is NaN, ``5.3 // 0.1`` 52);
float remainders are exact (C's ``fmod``); an integer division by zero is the usual
run-time error."""
import numpy as np
import pytest

import nova as nv

A = np.array([7.0, -7.0, 7.5, -7.5, 0.0, -0.5, 5.0, np.inf], np.float32)
B = np.array([2.0, 2.0, -2.0, -2.0, 3.0, 4.0, 0.0, 2.0], np.float32)
AI = np.array([7, -7, 7, -7, 0, 9, -1], np.int64)
BI = np.array([2, 2, -2, -2, 3, 3, 5], np.int64)


def _int_trunc(a, b):
    q = np.abs(a) // np.abs(b)
    return np.where((a < 0) != (b < 0), -q, q)


def test_float_rounding_modes():
    with np.errstate(divide="ignore", invalid="ignore"):
        for mode, want in ((None, A / B), ("trunc", np.trunc(A / B)),
                           ("floor", np.floor_divide(A, B))):
            got = nv.div(nv.tensor(A), nv.tensor(B), rounding_mode=mode).numpy()
            assert got.dtype == np.float32
            np.testing.assert_array_equal(got, want.astype(np.float32), err_msg=str(mode))


def test_integer_rounding_modes_keep_the_integer_dtype():
    x, y = nv.tensor(AI), nv.tensor(BI)
    np.testing.assert_array_equal(x.div(y, rounding_mode="trunc").numpy(), _int_trunc(AI, BI))
    np.testing.assert_array_equal(nv.divide(x, y, rounding_mode="floor").numpy(), AI // BI)
    true = nv.div(x, y)
    assert true.dtype == nv.float32
    np.testing.assert_allclose(true.numpy(), AI / BI, rtol=1e-6)
    assert x.div(y, rounding_mode="floor").dtype == nv.int64
    np.testing.assert_array_equal(nv.div(x, 2, rounding_mode="trunc").numpy(), _int_trunc(AI, 2))


def test_in_place_division_with_a_rounding_mode():
    x = nv.tensor(A.copy())
    x.div_(nv.tensor(B), rounding_mode="floor")
    with np.errstate(divide="ignore", invalid="ignore"):
        np.testing.assert_array_equal(x.numpy(), np.floor_divide(A, B))


def test_integer_division_by_zero_and_a_bad_mode_raise():
    with pytest.raises(Exception, match="division by zero"):
        nv.div(nv.tensor(AI) * 1, nv.tensor(np.array([1, 0, 1, 1, 1, 1, 1])) * 1,
               rounding_mode="trunc").numpy()
    with pytest.raises(ValueError, match=r"rounding_mode must be None, 'trunc' or 'floor', "
                                         r"got 'round'"):
        nv.div(nv.tensor(A), 2.0, rounding_mode="round")


# Special values and quotients too large for ``a - b * trunc(a / b)`` (what Nova computed
# before: fmod(5.3, 0.1) gave 0 and fmod(x, inf) NaN).
SA = np.array([5.5, -5.5, 5.5, -5.5, np.inf, -np.inf, 0.0, -0.0, 3.0, 1e30, 7.0, np.nan, 5.0,
               1e-30, 5.3, -7.25, 1e38, 2.0, 1e30, -3.0], np.float64)
SB = np.array([np.inf, np.inf, -np.inf, -np.inf, 2.0, 2.0, np.inf, 3.0, 0.0, 3.0, -0.0, 1.0,
               np.nan, 1e30, 0.1, 0.5, 3e-38, -0.75, 7.0, 1e-30], np.float64)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_float_remainders_and_floor_quotients_are_exact(dtype):
    a, b = SA.astype(dtype), SB.astype(dtype)
    x, y = nv.tensor(a), nv.tensor(b)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        cases = [(nv.fmod(x, y), np.fmod(a, b)), (x.fmod(y), np.fmod(a, b)),
                 (nv.remainder(x, y), np.remainder(a, b)), (x % y, np.remainder(a, b)),
                 (nv.floor_divide(x, y), np.floor_divide(a, b)), (x // y, np.floor_divide(a, b))]
        for got, want in cases:
            got = got.numpy()
            assert got.dtype == dtype
            np.testing.assert_array_equal(got, want)
            finite = ~np.isnan(want) & (want != 0)
            np.testing.assert_array_equal(np.signbit(got[finite]), np.signbit(want[finite]))
    # the sign of a zero: fmod and floor_divide as C and numpy; a zero remainder takes
    # the sign of the dividend (PyTorch; numpy's is +0.0 for -0.0 % 3)
    assert np.signbit(nv.fmod(nv.tensor([-0.0]), 3.0).numpy()[0])
    assert np.signbit(nv.floor_divide(nv.tensor([-0.0]), 3.0).numpy()[0])
    assert np.signbit(nv.remainder(nv.tensor([-0.0]), 3.0).numpy()[0])


def test_scalars_on_either_side_and_mixed_dtypes():
    x = nv.tensor(np.array([5.3, -5.3, 0.7], np.float32))
    np.testing.assert_array_equal((x % 0.1).numpy(), np.remainder(x.numpy(), np.float32(0.1)))
    np.testing.assert_array_equal(nv.fmod(7.5, x).numpy(), np.fmod(np.float32(7.5), x.numpy()))
    i = nv.tensor(np.array([7, -7], np.int64))
    np.testing.assert_array_equal((i % 2.5).numpy(), np.remainder(np.array([7.0, -7.0]), 2.5)
                                  .astype(np.float32))
    np.testing.assert_array_equal((i % 3).numpy(), np.array([7, -7]) % 3)      # still integer
    np.testing.assert_array_equal(nv.fmod(i, 3).numpy(), np.fmod(np.array([7, -7]), 3))


def test_remainder_gradients_are_pytorchs():
    """d fmod(a, b) = (1, -trunc(a / b)); d remainder(a, b) = (1, -floor(a / b))."""
    a = np.array([5.3, -5.3, 7.25, -0.4], np.float64)
    b = np.array([0.7, 0.7, -2.0, 0.3], np.float64)
    for fn, rounding in ((nv.fmod, np.trunc), (nv.remainder, np.floor)):
        x = nv.tensor(a, requires_grad=True)
        y = nv.tensor(b, requires_grad=True)
        fn(x, y).sum().backward()
        np.testing.assert_array_equal(x.grad.numpy(), np.ones(4))
        np.testing.assert_array_equal(y.grad.numpy(), -rounding(a / b))
        assert nv.autograd.gradcheck(lambda p, q: fn(p, q), (nv.tensor(a, requires_grad=True),
                                                             nv.tensor(b, requires_grad=True)))
