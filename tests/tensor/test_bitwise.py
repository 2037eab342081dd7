"""Bit operations: ``&``, ``|``, ``^``, ``~`` and ``bitwise_*`` are bitwise on integers
(two's complement, numpy's results) and logical on bools, as in PyTorch; floats raise.

Regression: ``&``, ``|`` and ``~`` on integer tensors used to be the *logical* ops
(``tensor([5]) & tensor([3])`` gave ``True`` instead of 1, ``~tensor([5])`` ``False``
instead of -6): silently wrong numbers."""
import numpy as np
import pytest

import nova as nv


def _ints(dtype, shape, seed):
    info = np.iinfo(dtype)
    rng = np.random.default_rng(seed)
    edges = np.array([0, -1, 1, info.min, info.max, 0x55, -0x56], dtype)
    rest = rng.integers(info.min, info.max, size=int(np.prod(shape)) - len(edges), dtype=dtype,
                        endpoint=True)
    return np.concatenate([edges, rest]).reshape(shape)


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_integer_operators_are_bitwise(dtype):
    a, b = _ints(dtype, (4, 16), 0), _ints(dtype, (4, 16), 1)
    x, y = nv.tensor(a), nv.tensor(b)
    for got, want in [(x & y, a & b), (x | y, a | b), (x ^ y, a ^ b), (~x, ~a),
                      (nv.bitwise_and(x, y), a & b), (nv.bitwise_or(x, y), a | b),
                      (nv.bitwise_xor(x, y), a ^ b), (nv.bitwise_not(x), ~a),
                      (x.bitwise_and(y), a & b), (x.bitwise_not(), ~a)]:
        assert got.dtype == x.dtype
        np.testing.assert_array_equal(got.numpy(), want)


def test_small_values_the_old_logical_ops_got_wrong():
    x, y = nv.tensor([5, 3, -2]), nv.tensor([3, 6, 7])
    assert (x & y).tolist() == [1, 2, 6]
    assert (x | y).tolist() == [7, 7, -1]
    assert (x ^ y).tolist() == [6, 5, -7]
    assert (~x).tolist() == [-6, -4, 1]


def test_python_scalars_broadcasting_and_reflected_operands():
    a = np.arange(-6, 6, dtype=np.int64).reshape(3, 4)
    x = nv.tensor(a)
    np.testing.assert_array_equal((x & 6).numpy(), a & 6)
    np.testing.assert_array_equal((6 | x).numpy(), 6 | a)
    np.testing.assert_array_equal((0xF0 ^ x).numpy(), 0xF0 ^ a)
    np.testing.assert_array_equal((x ^ True).numpy(), a ^ 1)          # True is 1
    row = nv.tensor(np.array([1, 2, 4, 8], np.int64))
    np.testing.assert_array_equal((x & row).numpy(), a & np.array([1, 2, 4, 8]))
    mixed = nv.tensor(np.array([3, 5], np.int32)) | nv.tensor(np.array([8, 8], np.int64))
    assert mixed.dtype == nv.int64 and mixed.tolist() == [11, 13]


def test_bools_are_logical():
    p, q = np.array([True, True, False, False]), np.array([True, False, True, False])
    a, b = nv.tensor(p), nv.tensor(q)
    for got, want in [(a & b, p & q), (a | b, p | q), (a ^ b, p ^ q), (~a, ~p),
                      (nv.logical_xor(a, b), p ^ q), (a ^ True, ~p)]:
        assert got.dtype == nv.bool
        np.testing.assert_array_equal(got.numpy(), want)
    # a bool with an integer promotes to the integer: bitwise there
    assert (a & nv.tensor([3, 3, 3, 3])).tolist() == [1, 1, 0, 0]


def test_bit_operations_fuse_with_arithmetic():
    a = np.arange(40, dtype=np.int32).reshape(5, 8)
    x = nv.tensor(a)
    got = (((x * 3) & 0xF) ^ (x >= 20).to(nv.int32)) + ~x
    np.testing.assert_array_equal(got.numpy(), (((a * 3) & 0xF) ^ (a >= 20)) + ~a)


def test_floats_raise_naming_the_op_and_dtypes():
    f = nv.tensor([1.0, 2.0])
    with pytest.raises(TypeError, match=r"bitwise_and: expected integer or bool operands, "
                                        r"got float32, float32"):
        f & f
    with pytest.raises(TypeError, match=r"bitwise_or: .* got int64, float"):
        nv.tensor([1]) | 1.5
    with pytest.raises(TypeError, match=r"bitwise_not: .* got float32"):
        ~f


def test_square_of_bools_is_int64():
    got = nv.square(nv.tensor([True, False]))
    assert got.dtype == nv.int64 and got.tolist() == [1, 0]
