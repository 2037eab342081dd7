"""``div``/``divide`` with PyTorch's ``rounding_mode`` (and the in-place ``div_``),
against numpy's definitions: ``None`` is true division (integers give float32),
``"trunc"`` rounds the quotient toward zero and ``"floor"`` toward -inf, both in the
common dtype; an integer division by zero is the usual run-time error."""
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
                           ("floor", np.floor(A / B))):
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
        np.testing.assert_array_equal(x.numpy(), np.floor(A / B))


def test_integer_division_by_zero_and_a_bad_mode_raise():
    with pytest.raises(Exception, match="division by zero"):
        nv.div(nv.tensor(AI) * 1, nv.tensor(np.array([1, 0, 1, 1, 1, 1, 1])) * 1,
               rounding_mode="trunc").numpy()
    with pytest.raises(ValueError, match=r"rounding_mode must be None, 'trunc' or 'floor', "
                                         r"got 'round'"):
        nv.div(nv.tensor(A), 2.0, rounding_mode="round")
