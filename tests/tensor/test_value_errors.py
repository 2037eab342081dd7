"""Values a dtype cannot hold, sizes no tensor can have and class values out of range
raise at the user's line with Nova's errors (what PyTorch raises is noted at each case);
class values only known when the step runs fail that step, as an index out of range
does, instead of giving a row of zeros."""
import re

import numpy as np
import pytest

import nova as nv
import nova.nn.functional as F
from nova.core.dtypes import DTypeOverflowError
from nova.core.shapes import MAX_NUMEL, SizeError


def test_error_classes_are_caught_as_what_numpy_and_torch_raise():
    assert issubclass(DTypeOverflowError, OverflowError)
    assert issubclass(DTypeOverflowError, ValueError)
    assert issubclass(DTypeOverflowError, RuntimeError)
    assert issubclass(SizeError, ValueError) and issubclass(SizeError, RuntimeError)


# ---------------------------------------------------------------- tensor(): Python data

@pytest.mark.parametrize("data, dtype, shown", [
    ([2**40], nv.int32, "1099511627776"),        # torch: RuntimeError, no wrap to 0
    ([2**63], None, "9223372036854775808"),      # torch: ValueError, no wrap to -2**63
    ([2**64], None, "18446744073709551616"),     # too big for any integer type
    ([-2**31 - 1], nv.int32, "-2147483649"),
    ([1.5e10], nv.int32, "15000000000.0"),       # a float truncated into int32
    ([float("inf")], nv.int32, "inf"),
    ([float("nan")], nv.int64, "nan"),
    ([1e19], nv.int64, "1e+19"),
    (2**31, nv.int32, "2147483648"),             # a 0-d tensor too
])
def test_tensor_from_python_data_raises_instead_of_wrapping(data, dtype, shown):
    with pytest.raises(DTypeOverflowError, match=rf"tensor: value {re.escape(shown)} "):
        nv.tensor(data, dtype=dtype)


def test_tensor_from_python_data_keeps_what_fits():
    assert nv.tensor([2**31 - 1, -2**31], dtype=nv.int32).tolist() == [2**31 - 1, -2**31]
    assert nv.tensor([2**63 - 1, -2**63]).tolist() == [2**63 - 1, -2**63]
    assert nv.tensor([2.9e9], dtype=nv.int64).tolist() == [2900000000]
    assert nv.tensor([-2.5], dtype=nv.int32).tolist() == [-2]       # truncation, as torch
    assert nv.tensor([2**63], dtype=nv.float32).tolist() == [2.0**63]
    assert nv.tensor([1e300], dtype=nv.float32).tolist() == [np.inf]  # as torch
    assert nv.tensor([300], dtype=nv.bool).tolist() == [True]


def test_tensor_from_numpy_converts_like_astype_as_torch_does():
    # an explicit dtype over a numpy array is a cast (torch wraps it the same way)
    assert nv.tensor(np.array([2**40 + 3]), dtype=nv.int32).tolist() == [3]


# ---------------------------------------------------------------- constants of a dtype

@pytest.mark.parametrize("make, op", [
    (lambda: nv.full((2,), 2**40, dtype=nv.int32), "full"),
    (lambda: nv.full((2,), 2**63), "full"),                     # int64 from the value
    (lambda: nv.full((2,), 2**64, dtype=nv.float32), "full"),   # past any scalar int
    (lambda: nv.full((2,), 1e300), "full"),                     # float32 overflow
    (lambda: nv.full((2,), 70000.0, dtype=nv.float16), "full"),
    (lambda: nv.full((2,), 1e39, dtype=nv.bfloat16), "full"),
    (lambda: nv.full((2,), float("nan"), dtype=nv.int32), "full"),
    (lambda: nv.full_like(nv.ones(2, dtype=nv.int32), 2**31), "full"),
    (lambda: nv.where(nv.tensor([True, False]), nv.ones(2, dtype=nv.int32), 2**40), "where"),
    (lambda: nv.ones(2, dtype=nv.int32).masked_fill(nv.tensor([True, False]), 2**40),
     "masked_fill"),
    (lambda: nv.ones(2, dtype=nv.float16).masked_fill(nv.tensor([True, False]), -1e10),
     "masked_fill"),
    (lambda: nv.ones(2, dtype=nv.int32).clamp(max=2**40), "clamp"),
    (lambda: nv.ones(2, dtype=nv.int32) ** 2**32, "pow"),
    (lambda: nv.ones(2, dtype=nv.int32).add(1, alpha=2**40), "add"),
    (lambda: nv.ones(2).sub(1, alpha=1e300), "sub"),
    (lambda: nv.ones(2, dtype=nv.int32).fill_(2**40), "full"),
])
def test_constants_that_overflow_their_dtype_raise_at_record_time(make, op):
    """PyTorch: "value cannot be converted to type ... without overflow". Before, an int
    constant leaked an xDSL VerifyException at realization and a float one became inf."""
    with pytest.raises(DTypeOverflowError, match=rf"^{op}: .*without overflow|^{op}: Python"):
        make()


def test_constants_at_the_edge_of_their_dtype_are_exact():
    assert nv.full((1,), 2**31 - 1, dtype=nv.int32).tolist() == [2**31 - 1]
    assert nv.full((1,), -2**63).tolist() == [-2**63]
    assert nv.full((1,), 65504.0, dtype=nv.float16).tolist() == [65504.0]
    assert nv.full((1,), float("inf"), dtype=nv.float16).tolist() == [np.inf]
    assert nv.full((1,), 2.7, dtype=nv.int32).tolist() == [2]
    assert nv.full((1,), 2**40, dtype=nv.bool).tolist() == [True]


def test_python_numbers_in_binary_ops_never_wrap():
    """A Python int meeting an integer tensor must fit its dtype: PyTorch wraps it
    modulo 2**bits (int32 + 2**40 adds 0; zeros == 2**32 is all true), a wrong number,
    so Nova raises at the user's line, as numpy 2 does (before: an xDSL VerifyException
    at realization). Floats round to the dtype as in PyTorch (to inf past the range)."""
    i32 = nv.ones(2, dtype=nv.int32)
    for make in (lambda: i32 + 2**40, lambda: i32 + 2**31, lambda: i32 * 2**31,
                 lambda: nv.ones(2, dtype=nv.int64) + 2**63, lambda: i32 - (-2**31 - 1),
                 lambda: nv.maximum(i32, 2**40)):
        with pytest.raises(DTypeOverflowError, match=r"out of range for a int(32|64) "
                                                     r"tensor.*x\.to\(nv\.int64\)"):
            make()
    assert (i32 + (2**31 - 1)).tolist() == [-2**31] * 2      # in range: int32 arithmetic
    assert (i32.to(nv.int64) + 2**40).tolist() == [2**40 + 1] * 2
    assert (nv.zeros(2) + 2**63).tolist() == [2.0**63] * 2
    assert (nv.ones(2) + 1e300).tolist() == [np.inf] * 2
    assert (nv.ones(2, dtype=nv.float16) * 1e10).tolist() == [np.inf] * 2
    assert (i32 / 2**40).dtype == nv.float32


def test_comparisons_with_ints_beyond_the_dtype_have_numpys_answer():
    """Every element of an int32 tensor is below 2**40 and above -2**40: numpy 2 says so,
    PyTorch wraps the number and says otherwise (zeros == 2**32 all true)."""
    z = nv.tensor([0, -5, 7], dtype=nv.int32)
    a = np.array([0, -5, 7], np.int32)
    for big in (2**32, 2**40, -2**40, 2**63, -2**63):
        for name in ("lt", "le", "gt", "ge", "eq", "ne"):
            op = getattr(np, {"lt": "less", "le": "less_equal", "gt": "greater",
                              "ge": "greater_equal", "eq": "equal", "ne": "not_equal"}[name])
            assert getattr(nv, name)(z, big).tolist() == op(a, big).tolist(), (name, big)
            assert getattr(nv, name)(big, z).tolist() == op(big, a).tolist(), (name, big)
    assert ((z < 2**40) & (z > 1)).tolist() == [False, False, True]


@pytest.mark.parametrize("value", [2**64, -2**63 - 1, 2**200])
@pytest.mark.parametrize("dtype", [nv.int32, nv.int64, nv.float32])
def test_python_ints_beyond_64_bits_raise_in_binary_ops(value, dtype):
    """PyTorch: OverflowError, int too big to convert (before: a float tensor plus 2**200
    silently gave inf)."""
    with pytest.raises(DTypeOverflowError, match=r"add: Python integer .* too big"):
        nv.ones(2, dtype=dtype) + value


# ---------------------------------------------------------------- sizes

@pytest.mark.parametrize("make, pattern", [
    (lambda: nv.zeros(-1), r"zeros: sizes must be non-negative, got \(-1,\)"),
    (lambda: nv.ones(2, -3), r"ones: sizes must be non-negative"),
    (lambda: nv.full((2, -3), 1), r"full: sizes must be non-negative, got \(2, -3\)"),
    (lambda: nv.empty(-2), r"empty: sizes must be non-negative"),
    (lambda: nv.rand(2, -1), r"rand: sizes must be non-negative"),
    (lambda: nv.randn(-1), r"randn: sizes must be non-negative"),
    (lambda: nv.randint(0, 10, (-1,)), r"randint: sizes must be non-negative"),
    (lambda: nv.eye(-1), r"eye: n must be non-negative, got -1"),
    (lambda: nv.eye(3, -1), r"eye: m must be non-negative, got -1"),
    (lambda: nv.linspace(0, 1, -1), r"linspace: steps must be non-negative, got -1"),
    (lambda: nv.arange(0, 10, 0), r"arange: step must be nonzero"),
    (lambda: nv.arange(0, 10, -1), r"arange: upper bound and lower bound inconsistent"),
    (lambda: nv.arange(10, 0), r"arange: upper bound and lower bound inconsistent"),
    (lambda: nv.arange(0.0, -1.0, 0.5), r"arange: upper bound and lower bound inconsistent"),
    (lambda: nv.arange(0, float("inf")), r"arange: end must be finite, got inf"),
    (lambda: nv.arange(0, 10, float("nan")), r"arange: step must be finite, got nan"),
])
def test_impossible_sizes_raise_at_record_time(make, pattern):
    """PyTorch raises RuntimeError for each; before, eye(-1) failed in numpy or the
    interpreter at realization and arange with a wrong-sign step returned []."""
    with pytest.raises(SizeError, match=pattern):
        make()


def test_empty_ranges_stay_empty():
    assert nv.arange(3, 3, -1).tolist() == [] and nv.arange(0).tolist() == []
    assert nv.arange(5, 0, -2).tolist() == [5, 3, 1]
    assert nv.eye(0).shape == (0, 0) and nv.linspace(0, 1, 0).shape == (0,)


@pytest.mark.parametrize("make, op", [
    (lambda: nv.zeros(10**10, 10**10), "zeros"),
    (lambda: nv.zeros(2**63), "zeros"),
    (lambda: nv.ones(0, 2**63), "ones"),                   # no elements, but a size past int64
    (lambda: nv.ones(2**31, 2**31, 2**3), "ones"),
    (lambda: nv.full((2**40, 2**40), 1.0), "full"),
    (lambda: nv.rand(2**62), "rand"),
    (lambda: nv.randint(0, 5, (2**61,)), "randint"),
    (lambda: nv.eye(2**31), "eye"),
    (lambda: nv.arange(2**62), "arange"),
    (lambda: nv.arange(0.0, 1.0, 1e-20), "arange"),
    (lambda: nv.linspace(0, 1, 2**62), "linspace"),
    (lambda: nv.zeros(2**32, 1) + nv.zeros(1, 2**32), "add"),          # by broadcasting
    (lambda: nv.zeros(3).expand(2**31, 2**31, 3), "expand"),
    (lambda: F.one_hot(nv.zeros(2**31, dtype=nv.int64), 2**31), "one_hot"),
])
def test_sizes_past_the_addressable_raise_at_record_time(make, op):
    """Bytes must fit in int64 (as PyTorch's "Storage size calculation overflowed");
    before, numpy failed at realization with "array is too big"."""
    with pytest.raises(SizeError, match=rf"{op}: shape .* is too large"):
        make()


def test_the_size_rule_admits_large_lazy_shapes():
    """The limit is about addressing, not memory: a shape under it records (its memory
    is only needed if it is realized)."""
    big = nv.zeros(MAX_NUMEL)
    assert big.shape == (MAX_NUMEL,) and (big + 1).shape == (MAX_NUMEL,)


def test_randint_range_must_fit_the_dtype():
    with pytest.raises(DTypeOverflowError, match=r"randint: range \[0, 1099511627776\) does "
                                                 r"not fit int32"):
        nv.randint(0, 2**40, (2,), dtype=nv.int32)
    assert nv.randint(-2**31, 2**31, (4,), dtype=nv.int32).dtype == nv.int32


# ---------------------------------------------------------------- one_hot class values

@pytest.mark.parametrize("values, num_classes, pattern", [
    ([0, 5], 3, r"one_hot: class values must be smaller than num_classes \(3\), got 5"),
    ([0, 3], 3, r"smaller than num_classes \(3\), got 3"),
    ([0, -1], 3, r"one_hot: class values must be non-negative, got -1"),
    ([0, -1], -1, r"one_hot: class values must be non-negative, got -1"),
])
def test_one_hot_known_class_values_out_of_range_raise_at_the_call(values, num_classes,
                                                                   pattern):
    """PyTorch: "Class values must be smaller than num_classes" / "non-negative"; before,
    such a class gave a row of zeros."""
    with pytest.raises(ValueError, match=pattern):
        F.one_hot(nv.tensor(values), num_classes)


@pytest.mark.parametrize("shift", [3, -4])
def test_one_hot_computed_class_values_out_of_range_fail_the_step(shift):
    """Values computed in the step are checked by the kernel, which fails the step the
    way an index out of range does, on both engines (before: rows of zeros)."""
    classes = nv.tensor([0, 2]) + shift       # pending: known only when the step runs
    with pytest.raises(nv.RealizationError, match=r"index values must lie in \[0, 3\)"):
        F.one_hot(classes, 3).tolist()


def test_one_hot_of_good_values_on_both_paths():
    assert F.one_hot(nv.tensor([2, 0]) + 0, 3).tolist() == [[0, 0, 1], [1, 0, 0]]
    assert F.one_hot(nv.tensor([[1], [0]], dtype=nv.int32), 2).tolist() == [[[0, 1]], [[1, 0]]]
    assert F.one_hot(nv.tensor(1), 3).tolist() == [0, 1, 0]
    assert F.one_hot(nv.tensor([1, 1]) * 2).tolist() == [[0, 0, 1], [0, 0, 1]]
    assert F.one_hot(nv.zeros(0, dtype=nv.int64), 4).shape == (0, 4)


@pytest.mark.parametrize("values, num_classes, error, pattern", [
    ([], -1, ValueError, r"one_hot: cannot infer the number of classes from an empty tensor"),
    ([0, 1], 0, ValueError, r"one_hot: num_classes must be positive .*, got 0"),
    ([0, 1], -2, ValueError, r"one_hot: num_classes must be positive .*, got -2"),
    ([], -2, ValueError, r"one_hot: num_classes must be positive .*, got -2"),
    ([0, 1], 2.0, TypeError, r"one_hot: num_classes must be an int"),
])
def test_one_hot_bad_num_classes(values, num_classes, error, pattern):
    with pytest.raises(error, match=pattern):
        F.one_hot(nv.tensor(values, dtype=nv.int64), num_classes)
