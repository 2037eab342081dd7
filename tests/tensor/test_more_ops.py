"""``nova.tensor.more_ops``: membership, bit shifts, gcd/lcm, vander, combinations, mode,
``Tensor.unfold`` and the reducing scatters, against references written here (numpy,
itertools, Python integers with C's wrapping), gradients by finite differences in
float64."""
import itertools
import math

import numpy as np
import pytest

import nova as nv
from tests.helpers import sgd_step_losses

R = np.random.default_rng(0)
I64_MIN, I32_MIN = -2**63, -2**31


def _wrap(v: int, bits: int) -> int:
    """``v`` in two's complement ``bits`` bits, as C++ integer arithmetic wraps."""
    return (v + 2**(bits - 1)) % 2**bits - 2**(bits - 1)


# ---------------------------------------------------------------- membership

def test_contains_numbers_and_tensors_and_refuses_other_types():
    t = nv.tensor([[1.0, 2.0], [5.0, -0.0]])
    assert 5 in t and 7.0 not in t and nv.tensor([[2.0], [7.0]]) in t   # (broadcast by row)
    assert nv.tensor([[5.0], [1.0]]) not in t and 3 not in nv.zeros(0)
    with pytest.raises(RuntimeError, match="only supports Tensor or scalar.*str"):
        "a" in t
    with pytest.raises(RuntimeError, match="list"):
        [5.0] in t


# ---------------------------------------------------------------- bit shifts

def _left(v: int, s: int, bits: int) -> int:
    return _wrap(v << s, bits) if 0 <= s < bits else 0


def _right(v: int, s: int, bits: int) -> int:
    return v >> (s if 0 <= s < bits else bits - 1)       # (Python's >> is arithmetic)


def test_shifts_match_twos_complement_and_pytorchs_out_of_range_results():
    x64 = [1, -1, 5, -8, 2**62, -2**62 + 3, 7, I64_MIN]
    x32 = [1, -1, 5, -8, 2**30, I32_MIN, 7, 3]
    amounts = [0, 1, 31, 32, -1, 5, 63, 64]
    s_scalar = [0, 3, 31, 62, 63, 64, 100, -5]
    a64, a32 = nv.tensor(x64), nv.tensor(x32, dtype=nv.int32)
    outs = [a64 << s for s in s_scalar] + [a64 >> s for s in s_scalar] + [
        nv.bitwise_left_shift(a64, nv.tensor(amounts)),
        nv.bitwise_right_shift(a64, nv.tensor(amounts)),
        a32.bitwise_left_shift(nv.tensor(amounts, dtype=nv.int32)),
        a32.bitwise_right_shift(nv.tensor(amounts, dtype=nv.int32)),
        a32 << 31, a32 >> 33, 3 << nv.tensor([0, 2, 62], dtype=nv.int64),
        -100 >> nv.tensor([0, 3, 99], dtype=nv.int32)]
    nv.realize(*outs)
    want = [[_left(v, s, 64) for v in x64] for s in s_scalar] + \
        [[_right(v, s, 64) for v in x64] for s in s_scalar] + [
        [_left(v, s, 64) for v, s in zip(x64, amounts)],
        [_right(v, s, 64) for v, s in zip(x64, amounts)],
        [_left(v, s, 32) for v, s in zip(x32, amounts)],
        [_right(v, s, 32) for v, s in zip(x32, amounts)],
        [_left(v, 31, 32) for v in x32], [_right(v, 33, 32) for v in x32],
        [3, 12, _wrap(3 << 62, 64)], [-100, -13, -1]]
    assert [o.tolist() for o in outs] == want
    assert outs[-4].dtype == nv.int32 and outs[-1].dtype == nv.int32
    assert (nv.tensor([True]) << 1).dtype == nv.int64          # bool meets int: int64


def test_unsigned_right_shifts_by_the_top_bit_keep_it():
    """Unsigned: ``x >> (bits - 1)`` is the top bit (128 >> 7 == 1 in uint8), not a
    sign's fill; from the bit width on, 0 -- scalar and tensor amounts alike."""
    x = [128, 255, 200, 7, 0]
    a = nv.tensor(x, dtype=nv.uint8)
    amounts = nv.tensor([7, 7, 8, 1, 9], dtype=nv.uint8)
    outs = [a >> 7, a >> 6, a >> 8, a >> amounts, a.bitwise_right_shift(nv.tensor(7))]
    want = [[v >> 7 for v in x], [v >> 6 for v in x], [0] * 5,
            [v >> s if s < 8 else 0 for v, s in zip(x, [7, 7, 8, 1, 9])], [v >> 7 for v in x]]
    assert [o.tolist() for o in outs] == want
    assert all(o.dtype == nv.uint8 for o in outs[:4])


def test_shift_in_place_forms_errors_and_dtypes():
    y = nv.tensor([[1, 2, 3], [4, 5, 6]])
    row = y[0]
    row <<= 2
    row >>= 1
    z = nv.tensor([8, -8], dtype=nv.int32)
    z.bitwise_right_shift_(2).bitwise_left_shift_(nv.tensor([1, 0], dtype=nv.int32))
    nv.realize(y, z)
    assert y.tolist() == [[2, 4, 6], [4, 5, 6]] and z.tolist() == [4, -2]
    with pytest.raises(TypeError, match="bitwise_left_shift: expected integer operands.*float32"):
        nv.tensor([1.0]) << 1
    with pytest.raises(TypeError, match="bitwise_right_shift.*bool, bool"):
        nv.tensor([True]) >> nv.tensor([True])
    with pytest.raises(TypeError, match="expected integer operands"):
        nv.tensor([1]) << 1.5
    with pytest.raises(OverflowError, match="out of range for a int32"):
        nv.tensor([1], dtype=nv.int32) << 2**40


# ---------------------------------------------------------------- gcd and lcm

def _trunc_div(p: int, q: int) -> int:
    """C's integer division: the quotient rounded toward zero."""
    return abs(p) // abs(q) * (1 if (p < 0) == (q < 0) else -1)


def _c_gcd(a: int, b: int, bits: int) -> int:
    """PyTorch's ``calc_gcd`` in C++ integers: ``abs`` wraps, ``%`` truncates."""
    a, b = _wrap(abs(a), bits), _wrap(abs(b), bits)
    while a:
        a, b = b - a * _trunc_div(b, a), a
    return b


def _c_lcm(a: int, b: int, bits: int) -> int:
    """``abs(a / gcd * b)`` wrapping (where C++ traps on min / -1, the wrapped quotient)."""
    g = _c_gcd(a, b, bits)
    return 0 if g == 0 else _wrap(abs(_wrap(_wrap(_trunc_div(a, g), bits) * b, bits)), bits)


# (Not on mlir: its compile of the 91-step unrolled int64 chain takes ~2 s; the chain is
# integer div/mul/sub/where/abs, which the mlir engine runs in test_division and others.)
@pytest.mark.parametrize("engine", ["cpu", "interp"], indirect=True)
def test_gcd_and_lcm_elementwise_with_zeros_negatives_and_the_longest_chains(engine):
    # the longest Euclid chains of each dtype (consecutive Fibonacci numbers), zeros,
    # signs, and PyTorch's results where abs(min) wraps (gcd(-2**63, 0) = -2**63)
    fib = [1, 2]
    while fib[-1] + fib[-2] < 2**63:
        fib.append(fib[-1] + fib[-2])
    a64 = [0, 0, 6, -6, 6, -4, I64_MIN, I64_MIN, I64_MIN, I64_MIN, 7, I64_MIN + 1, 2**62,
           fib[-1], fib[-4] * 3, 2**40]
    b64 = [0, 5, 0, 4, -4, -6, 0, 6, I64_MIN, 7, I64_MIN, 3, I64_MIN, fib[-2], fib[-3] * 3,
           2**40 + 1]
    f32 = [f for f in fib if f < 2**31]
    a32 = [I32_MIN, I32_MIN, 12, 0, -9, f32[-1], 1 << 30]
    b32 = [0, 6, 18, -7, 6, f32[-2], I32_MIN]
    x64, y64 = nv.tensor(a64), nv.tensor(b64)
    x32, y32 = nv.tensor(a32, dtype=nv.int32), nv.tensor(b32, dtype=nv.int32)
    outs = [nv.gcd(x64, y64), nv.lcm(x64, y64), x32.gcd(y32), x32.lcm(y32)]
    in_place = [x64.clone().gcd_(y64), x32.clone().lcm_(y32)]     # (the same kernels)
    nv.realize(*outs, *in_place)
    assert in_place[0].tolist() == outs[0].tolist() and in_place[1].tolist() == outs[3].tolist()
    assert outs[0].tolist() == [_c_gcd(a, b, 64) for a, b in zip(a64, b64)]
    assert outs[1].tolist() == [_c_lcm(a, b, 64) for a, b in zip(a64, b64)]
    assert outs[2].tolist() == [_c_gcd(a, b, 32) for a, b in zip(a32, b32)]
    assert outs[3].tolist() == [_c_lcm(a, b, 32) for a, b in zip(a32, b32)]
    assert outs[0].tolist()[:6] == [0, 5, 6, 2, 2, 2] and outs[0].tolist()[13] == 1
    assert outs[2].dtype == nv.int32


def test_gcd_lcm_promotion_and_errors():
    assert nv.gcd(nv.tensor([4], dtype=nv.int32), nv.tensor([6])).dtype == nv.int64
    with pytest.raises(TypeError, match="gcd: expected integer operands.*float32"):
        nv.gcd(nv.tensor([1.0]), nv.tensor([2.0]))
    with pytest.raises(TypeError, match="lcm: expected integer operands.*bool"):
        nv.lcm(nv.tensor([True]), nv.tensor([True]))
    with pytest.raises(TypeError, match="gcd: other must be a Tensor, got int"):
        nv.gcd(nv.tensor([4]), 2)


# ---------------------------------------------------------------- vander, combinations

def test_vander_and_combinations_match_numpy_and_itertools():
    x = np.array([1.5, -2.0, 3.0, 0.5])
    t = nv.tensor(x, dtype=nv.float64)
    outs = [nv.vander(t), nv.vander(t, N=6, increasing=True),
            nv.vander(nv.tensor([2, 3], dtype=nv.int32), 3), nv.vander(t, 0), nv.vander(t, 1),
            nv.vander(nv.tensor([True, False])),
            nv.combinations(t), nv.combinations(t, 3, with_replacement=True),
            nv.combinations(t, 1), nv.combinations(t, 5), nv.combinations(t, 0)]
    nv.realize(*outs)
    np.testing.assert_array_equal(outs[0].numpy(), np.vander(x))
    np.testing.assert_array_equal(outs[1].numpy(), np.vander(x, 6, increasing=True))
    assert outs[2].dtype == nv.int64 and outs[2].tolist() == [[4, 2, 1], [9, 3, 1]]
    assert outs[3].shape == (4, 0) and outs[4].tolist() == [[1.0]] * 4
    assert outs[5].dtype == nv.int64 and outs[5].tolist() == [[1, 1], [0, 1]]
    np.testing.assert_array_equal(outs[6].numpy(), list(itertools.combinations(x, 2)))
    np.testing.assert_array_equal(outs[7].numpy(),
                                  list(itertools.combinations_with_replacement(x, 3)))
    np.testing.assert_array_equal(outs[8].numpy(), x[:, None])
    assert outs[9].shape == (0, 5) and outs[10].shape == (0,)
    assert nv.autograd.gradcheck(lambda v: (nv.vander(v), nv.combinations(v, 2)),
                                 (nv.tensor(x[:3], requires_grad=True),))
    with pytest.raises(ValueError, match="vander: x must be a one-dimensional.*\\(1, 1\\)"):
        nv.vander(nv.ones(1, 1))
    with pytest.raises(RuntimeError, match="vander: N must be non-negative, got -1"):
        nv.vander(t, N=-1)
    with pytest.raises(RuntimeError, match="combinations: expected a 1-D tensor"):
        nv.combinations(nv.ones(1, 1))
    with pytest.raises(ValueError, match="combinations: r must be non-negative"):
        nv.combinations(t, -1)


# ---------------------------------------------------------------- mode

def _mode_ref(row: np.ndarray) -> tuple:
    """The smallest of the most frequent values and its last index; NaNs never equal
    each other (so each counts once, and an all-NaN row gives its first)."""
    counts = {}
    for v in row:
        if v == v:
            counts[v] = counts.get(v, 0) + 1
    if not counts:
        return row[0], 0
    best = max(counts.values())
    value = min(v for v, c in counts.items() if c == best)
    return value, max(i for i, v in enumerate(row) if v == value)


def test_mode_smallest_most_frequent_value_last_index_nan_bool_and_gradient():
    ints = np.array([[3, 1, 3, 1, 2], [5, 5, 4, 4, 4], [7, 8, 9, 6, 0]])
    floats = np.array([[2.0, 1.0, 2.0, 1.0, np.nan, np.nan, np.nan],
                       [0.0, -0.0, 0.0, 5.0, 5.0, 5.0, np.nan],
                       [np.nan] * 7])
    bools = R.integers(0, 2, (4, 9)).astype(bool)
    a, f, b = nv.tensor(ints), nv.tensor(floats), nv.tensor(bools)
    outs = [nv.mode(a), a.mode(0, keepdim=True), nv.mode(f), nv.mode(b, 1),
            nv.mode(nv.tensor(3.0)), nv.mode(nv.zeros(0, 2), 1), nv.mode(nv.ones(3, 1))]
    nv.realize(*[t for o in outs for t in o])
    for got, arr in ((outs[0], ints), (outs[2], floats), (outs[3], bools)):
        want = [_mode_ref(row) for row in arr]
        np.testing.assert_array_equal(got.values.numpy(), [v for v, _ in want])
        assert got.indices.tolist() == [i for _, i in want]
    want = [_mode_ref(col) for col in ints.T]
    assert outs[1].values.tolist() == [[v for v, _ in want]]
    assert outs[1].indices.tolist() == [[i for _, i in want]]
    assert outs[2].indices.tolist() == [3, 2, 0] and not np.signbit(outs[2].values.numpy()[1])
    assert outs[4].values.item() == 3.0 and outs[4].indices.item() == 0
    assert outs[5].values.shape == (0,) and outs[6].indices.tolist() == [0, 0, 0]
    x = nv.tensor([1.0, 2.0, 2.0, 3.0], dtype=nv.float64, requires_grad=True)
    nv.mode(x).values.backward()
    assert x.grad.tolist() == [0.0, 0.0, 1.0, 0.0]
    with pytest.raises(IndexError, match="mode: expected dim 1 of shape \\(2, 0\\) to have a "
                                         "non-zero size"):
        nv.mode(nv.zeros(2, 0), 1)


# ---------------------------------------------------------------- unfold

def _windows(x: np.ndarray, d: int, size: int, step: int) -> np.ndarray:
    view = np.lib.stride_tricks.sliding_window_view(x, size, axis=d)
    return np.take(view, np.arange(0, view.shape[d], step), axis=d)


def test_unfold_windows_gradient_and_errors():
    a = R.standard_normal((3, 7, 2))
    t = nv.tensor(a)
    cases = [(1, 3, 2), (1, 7, 1), (1, 2, 2), (0, 1, 1), (-1, 2, 1), (1, 3, 5)]
    outs = [t.unfold(*c) for c in cases] + [t.unfold(1, 0, 1), nv.tensor(5.0).unfold(0, 1, 1)]
    nv.realize(*outs)
    for (d, size, step), got in zip(cases, outs):
        np.testing.assert_array_equal(got.numpy(), _windows(a, d % 3, size, step))
    assert outs[-2].shape == (3, 8, 2, 0) and outs[-1].tolist() == [5.0]
    assert nv.autograd.gradcheck(lambda v: (v.unfold(0, 3, 1), v.unfold(0, 2, 2)),
                                 (nv.tensor(R.standard_normal(6), requires_grad=True),))
    x = nv.arange(7.0)
    with pytest.raises(RuntimeError, match="unfold: size 8 exceeds dim 0 of shape \\(7,\\)"):
        x.unfold(0, 8, 1)
    with pytest.raises(ValueError, match="unfold: step is 0 but must be > 0"):
        x.unfold(0, 2, 0)
    with pytest.raises(RuntimeError, match="unfold: size is -1 but must be >= 0"):
        x.unfold(0, -1, 1)
    with pytest.raises(IndexError, match="unfold: dim 1 is out of range"):
        x.unfold(1, 2, 1)


def test_overlapping_unfold_is_a_view_of_its_input():
    """Overlapping windows were a gather, a copy: a write into the input did not show
    in the windows, nor a write into a window in the input. As PyTorch's, every unfold
    is a view now, and a write through one alias of an element shows in every window
    that covers it."""
    z = nv.arange(6.0)
    w = z.unfold(0, 3, 1)
    z[3] = 99.0
    assert w.tolist() == [[0, 1, 2], [1, 2, 99], [2, 99, 4], [99, 4, 5]]
    z = nv.arange(6.0)
    w = z.unfold(0, 3, 1)
    w[0, 1] = 50.0
    assert z.tolist() == [0, 50, 2, 3, 4, 5]
    assert w.tolist() == [[0, 50, 2], [50, 2, 3], [2, 3, 4], [3, 4, 5]]
    row = w[1]                        # a view of the view
    w[2, 0] = -1.0                    # base element 2: also row[1]
    assert row.tolist() == [50, -1, 3] and z.tolist() == [0, 50, -1, 3, 4, 5]
    row[2] = 7.0                      # base element 3, through two views
    assert z.tolist() == [0, 50, -1, 7, 4, 5]
    assert w.tolist() == [[0, 50, -1], [50, -1, 7], [-1, 7, 4], [7, 4, 5]]
    w[2:] = 0.0                       # windows 2 and 3 share base elements 3 and 4
    assert z.tolist() == [0, 50, 0, 0, 0, 0] and row.tolist() == [50, 0, 0]
    # another dim, windows 2 apart
    z = nv.arange(14.0).reshape(2, 7)
    w = z.unfold(1, 4, 2)             # windows at 0 and 2
    w[:, 1, 0] = 100.0                # base column 2, also element 2 of window 0
    assert z.tolist() == [[0, 1, 100, 3, 4, 5, 6], [7, 8, 100, 10, 11, 12, 13]]
    assert w[:, 0].tolist() == [[0, 1, 100, 3], [7, 8, 100, 10]]
    # windows with gaps between them, an unfold of an unfold, a 0-d input
    z = nv.arange(7.0)
    w = z.unfold(0, 2, 3)
    w[1, 1] = 40.0
    assert w.tolist() == [[0, 1], [3, 40]] and z.tolist() == [0, 1, 2, 3, 40, 5, 6]
    z = nv.arange(5.0)
    ww = z.unfold(0, 3, 1).unfold(0, 2, 1)       # (2, 3, 2): ww[i, :, k] is window i + k
    ww[1, 0, 0] = 42.0                            # window 1's first element: base element 1
    assert z.tolist() == [0, 42, 2, 3, 4]
    assert ww[0, :, 1].tolist() == [42, 2, 3]
    x = nv.tensor(5.0)
    u = x.unfold(0, 1, 2)
    u[0] = 7.0
    assert x.tolist() == 7.0 and u.tolist() == [7.0]
    # windows that do not overlap were a view already, and still are
    z = nv.arange(6.0)
    w = z.unfold(0, 2, 2)
    w[1, 0] = 20.0
    z[5] = 50.0
    assert z.tolist() == [0, 1, 20, 3, 4, 50] and w.tolist() == [[0, 1], [20, 3], [4, 50]]


def test_overlapping_unfold_writes_back_exactly():
    """A write through the windows changes only the base elements written, to exactly
    the value written (not ``b + (v - b)``, 0 for ``b = 1e20, v = 1``), and leaves the
    others bit for bit: -0.0 written over 0.0 is a change, a NaN left where it was is
    none; integers past float precision and booleans too."""
    z = nv.tensor([1e20, 2.0, float("nan"), 0.0, 5.0])
    w = z.unfold(0, 2, 1)
    w[0, 0] = 1.0
    w[2, 1] = -0.0                    # base element 3, also w[3, 0]
    got = z.numpy()
    assert got[0] == 1.0 and got[1] == 2.0 and np.isnan(got[2]) and got[4] == 5.0
    assert got[3] == 0.0 and np.signbit(got[3]) and np.signbit(w.numpy()[3, 0])
    w[1, 0] = float("nan")            # base element 1
    assert np.isnan(z.numpy()[:3]).tolist() == [False, True, True]
    big = 2**62 + 1
    z = nv.tensor([big, 3, big + 2, 4])
    w = z.unfold(0, 3, 1)
    w[1, 1] = big + 4                 # base element 2
    assert z.tolist() == [big, 3, big + 4, 4] and w.tolist() == [[big, 3, big + 4],
                                                                 [3, big + 4, 4]]
    z = nv.tensor([True, False, False])
    w = z.unfold(0, 2, 1)
    w[1, 0] = True
    assert z.tolist() == [True, True, False] and w.tolist() == [[True, True], [True, False]]
    for dtype in (nv.float16, nv.bfloat16, nv.float64, nv.int8, nv.uint8):
        z = nv.arange(5).to(dtype)
        w = z.unfold(0, 3, 1)
        w[2, 0] = 9
        assert z.tolist() == [0, 1, 9, 3, 4], dtype
        assert w.tolist() == [[0, 1, 9], [1, 9, 3], [9, 3, 4]], dtype


def test_a_detached_alias_of_overlapping_windows_shows_every_window_written():
    """A write through ``detach()`` or ``.data`` of overlapping windows sets the base
    element, and every window over it shows it: in the alias itself as well as in the
    windows and the base (the alias used to keep its other windows' old values)."""
    for make in (lambda w: w.detach(), lambda w: w.data, lambda w: w[1:].detach()):
        z = nv.arange(6.0)
        w = z.unfold(0, 3, 1)                         # (4, 3): window i is z[i:i+3]
        a = make(w)
        off = 4 - a.shape[0]
        a[1 - off, 1] = 50.0                          # base element 2
        want = [[0, 1, 50], [1, 50, 3], [50, 3, 4], [3, 4, 5]]
        assert z.tolist() == [0, 1, 50, 3, 4, 5]
        assert w.tolist() == want
        assert a.tolist() == want[off:]
        a.mul_(2.0)                                   # every window: each element once
        assert a.tolist() == w.tolist()[off:] and z.tolist()[2] == 100.0
    z = nv.arange(5.0)
    a = z.unfold(0, 2, 1).detach()
    a[0, 1] = 7.0
    z.add_(1.0)                                       # the alias reads the base's update
    assert a.tolist() == [[1, 8], [8, 3], [3, 4], [4, 5]]


def test_in_place_ops_over_all_overlapping_unfold_windows():
    """An op that writes every window at once: where the windows agree on a base
    element (``fill_``, ``zero_``, a constant assigned) it is PyTorch's result; where
    they differ the last window that changed the element wins (``copy_``, as PyTorch's
    element-by-element copy does). A read-modify-write of the whole view (``add_``)
    changes each base element once here; PyTorch reads and writes each alias in turn,
    so there its result depends on how often an element is covered ([1, 3, 5, 6, 6, 6]
    for this one)."""
    z = nv.arange(6.0)
    w = z.unfold(0, 3, 1)
    w.fill_(1.0)
    assert z.tolist() == [1.0] * 6
    w.zero_()
    assert z.tolist() == [0.0] * 6 and w.tolist() == [[0.0] * 3] * 4
    z = nv.arange(4.0)
    w = z.unfold(0, 2, 1)
    w.copy_(nv.tensor([[10.0, 11.0], [12.0, 13.0], [14.0, 15.0]]))
    assert z.tolist() == [10, 12, 14, 15] and w.tolist() == [[10, 12], [12, 14], [14, 15]]
    z = nv.arange(6.0)
    w = z.unfold(0, 3, 1)
    w.add_(1.0)
    assert z.tolist() == [1, 2, 3, 4, 5, 6]


def test_gradients_through_overlapping_unfold_and_writes_into_it():
    """The gradient of a window sum adds the windows that cover each element; a write
    into the windows takes the gradient of what it overwrote (for every window that
    shows that element) and passes it to the value written."""
    c = nv.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 9.0]])
    x = nv.tensor([1.0, 2.0, 3.0, 4.0, 5.0], requires_grad=True)
    (x.unfold(0, 3, 1) * c).sum().backward()
    assert x.grad.tolist() == [1, 2 + 4, 3 + 5 + 7, 6 + 8, 9]
    x = nv.tensor([1.0, 2.0, 3.0, 4.0, 5.0], requires_grad=True)
    y = nv.tensor(2.5, requires_grad=True)
    d = nv.tensor([10.0, 20.0, 30.0, 40.0, 50.0])
    z = x * 1
    w = z.unfold(0, 3, 1)
    w[0, 2] = y * 2                   # base element 2, shown by all three windows
    loss = (w * c).sum() + (z * d).sum()
    assert loss.item() == 1 + 2 * 6 + 5 * 15 + 4 * 14 + 5 * 9 + 10 + 40 + 150 + 160 + 250
    loss.backward()
    assert x.grad.tolist() == [11, 26, 0, 54, 59] and y.grad.item() == 2 * (15 + 30)
    # the window the write went through is the one that shows it later, too
    z = nv.arange(5.0).requires_grad_(True) * 1
    w = z.unfold(0, 2, 1)
    w[1].mul_(y)                      # base elements 1 and 2
    assert z.tolist() == [0, 2.5, 5, 3, 4] and w[0].tolist() == [0, 2.5]


def test_overlapping_unfold_gradients_match_pytorch():
    """Random shapes, windows and writes through the view (an element, a window, a
    window times a parameter): values and gradients as PyTorch's."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(3)
    for trial in range(24):
        shape = tuple(int(s) for s in rng.integers(2, 6, rng.integers(1, 4)))
        d = int(rng.integers(0, len(shape)))
        size = int(rng.integers(1, shape[d] + 1))
        step = int(rng.integers(1, max(2, size)))
        a = rng.standard_normal(shape)
        results = []
        for lib in (nv, torch):
            x = lib.tensor(a, requires_grad=True)
            y = lib.tensor(1.5, dtype=lib.float64, requires_grad=True)
            z = x * 1
            w = z.unfold(d, size, step)
            c = lib.tensor(np.linspace(-1, 1, int(np.prod(w.shape))).reshape(w.shape))
            first = (w * c).sum()
            at = tuple(int(i) for i in (np.array(w.shape) - 1) * (trial % 3) // 2)
            if trial % 3 == 0:
                w[at] = y * 3
            elif trial % 3 == 1:
                w[at[:-1]].mul_(y)
            else:
                z[(0,) * len(shape)] = y
            loss = first + (w * c * c).sum() + (z ** 2).sum()
            loss.backward()
            results.append((loss.item(), x.grad.numpy(), y.grad.item(), z.detach().numpy()))
        (l1, gx1, gy1, z1), (l2, gx2, gy2, z2) = results
        np.testing.assert_allclose(l1, l2, rtol=1e-12)
        np.testing.assert_allclose(gx1, gx2, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(gy1, gy2, rtol=1e-12, atol=1e-12)
        np.testing.assert_array_equal(z1, z2)


def test_a_compiled_step_writing_into_overlapping_unfold_replays():
    """The write-back is ops of static shapes (iotas, a compare, a scatter): a step that
    writes through overlapping windows replays with the values of recorded calls."""
    def f(x, v):
        z = x.clone()
        w = z.unfold(1, 4, 2)
        w[:, 1, 0] = v                # base column 2
        w[0, 0, 3] += 10.0            # base element (0, 3), also w[0, 1, 1]
        return z, w.sum()

    g = nv.compile(f)
    x = nv.tensor(np.arange(20, dtype=np.float32).reshape(2, 10))
    vs = [nv.tensor([100.0 + k, -1.0]) for k in range(5)]
    compiled = [g(x, v) for v in vs]
    assert g.replays >= 2
    for v, (zb, sb) in zip(vs, compiled):
        za, sa = f(x, v)
        np.testing.assert_array_equal(za.numpy(), zb.numpy())
        assert sa.item() == sb.item()
    assert zb.tolist() == [[0, 1, 104, 13, 4, 5, 6, 7, 8, 9],
                           [10, 11, -1, 13, 14, 15, 16, 17, 18, 19]]
    x = nv.tensor(np.arange(20, dtype=np.float32).reshape(2, 10))

    def loss_of():
        z = x * p
        u = z.unfold(1, 4, 2)
        u[:, 1, 0] = u[:, 0, 0] * 2
        return (u ** 2).sum() + (z * 0.5).sum()

    p = nv.nn.Parameter(nv.ones(2, 10))
    plain, _ = sgd_step_losses(loss_of, [p], calls=6, compiled=False, lr=0.0001)
    p = nv.nn.Parameter(nv.ones(2, 10))
    again, replays = sgd_step_losses(loss_of, [p], calls=6, lr=0.0001)
    assert replays >= 3 and again == plain


# ---------------------------------------------------------------- reducing scatters

def _fold(values: list, reduce: str, integer: bool):
    """PyTorch's reduction of one target's values, in order (the first its own value
    when included): amax/amin keep the first of equal values and take a NaN."""
    if reduce == "sum":
        return sum(values)
    if reduce == "prod":
        return math.prod(values)
    if reduce == "mean":
        return sum(values) // len(values) if integer else sum(values) / len(values)
    acc = values[0]
    for v in values[1:]:
        if (v > acc if reduce == "amax" else v < acc) or v != v:
            acc = v
    return acc


def _scatter_reduce_ref(x, d, index, src, reduce, include_self):
    out = x.copy()
    updates = {}
    for pos in np.ndindex(index.shape):
        target = pos[:d] + (index[pos],) + pos[d + 1:]
        updates.setdefault(target, [x[target]] if include_self else []).append(src[pos])
    for target, values in updates.items():
        out[target] = _fold(values, reduce, x.dtype.kind == "i")
    return out


def test_scatter_reduce_every_reduction_matches_the_reference():
    x = R.integers(-5, 5, (3, 4))
    index, src = R.integers(0, 4, (3, 6)), R.integers(-5, 6, (3, 6))
    xf, srcf = R.standard_normal((3, 4)), np.round(R.standard_normal((3, 6)), 0)
    index0, src0 = R.integers(0, 3, (2, 3)), R.standard_normal((4, 4))   # index < src
    tx, tindex, tsrc = nv.tensor(x), nv.tensor(index), nv.tensor(src)
    txf, tsrcf = nv.tensor(xf), nv.tensor(srcf)
    cases, outs = [], []
    for reduce in ("sum", "prod", "mean", "amax", "amin"):
        for inc in (True, False):
            cases.append((x, 1, index, src, reduce, inc))
            outs.append(tx.scatter_reduce(1, tindex, tsrc, reduce, include_self=inc))
            if reduce in ("prod", "mean", "amax"):
                cases.append((xf, 1, index, srcf, reduce, inc))
                outs.append(nv.scatter_reduce(txf, 1, tindex, tsrcf, reduce, include_self=inc))
    for reduce, inc in (("prod", False), ("amin", True)):
        cases.append((xf, 0, index0, src0[:2, :3], reduce, inc))
        outs.append(txf.scatter_reduce(0, nv.tensor(index0), nv.tensor(src0), reduce,
                                       include_self=inc))
    nan = math.nan
    special = [nv.tensor([1.0, nan, 3.0]).scatter_reduce(
                   0, nv.tensor([0, 0, 1, 2]), nv.tensor([nan, 2.0, 1.0, 5.0]), "amax"),
               nv.tensor([1.0, nan, 3.0]).scatter_reduce(
                   0, nv.tensor([0, 0, 1, 2]), nv.tensor([nan, 2.0, 1.0, 5.0]), "amin",
                   include_self=False),
               nv.tensor([0.0, -0.0]).scatter_reduce(
                   0, nv.tensor([0, 1, 1]), nv.tensor([-0.0, 0.0, -0.0]), "amax"),
               nv.tensor([True, False]).scatter_reduce(
                   0, nv.tensor([0, 0, 1]), nv.tensor([False, True, False]), "prod"),
               nv.tensor(1.0).scatter_reduce(0, nv.tensor(0), nv.tensor(3.0), "amax"),
               nv.tensor([1.0, 2.0]).scatter_reduce(0, nv.tensor([], dtype=nv.int64),
                                                    nv.tensor([]), "prod")]
    nv.realize(*outs, *special)
    for case, got in zip(cases, outs):
        want = _scatter_reduce_ref(*case)
        assert got.dtype == (nv.int64 if want.dtype.kind == "i" else nv.float64)
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-13, atol=1e-15)
    np.testing.assert_array_equal(special[0].numpy(), [nan, nan, 5.0])
    np.testing.assert_array_equal(special[1].numpy(), [nan, 1.0, 5.0])
    assert np.signbit(special[2].numpy()).tolist() == [False, True]     # the first stays
    assert special[3].tolist() == [False, False] and special[3].dtype == nv.bool
    assert special[4].item() == 3.0 and special[5].tolist() == [1.0, 2.0]


def test_scatter_reduce_gradients_tie_sharing_and_finite_differences():
    a = nv.tensor([1.0, 5.0], dtype=nv.float64, requires_grad=True)
    s = nv.tensor([5.0, 5.0, 2.0], dtype=nv.float64, requires_grad=True)
    out = a.scatter_reduce(0, nv.tensor([1, 1, 0]), s, "amax")
    out.backward(nv.tensor([1.0, 1.0], dtype=nv.float64))
    p = nv.tensor([1.0, 0.0], dtype=nv.float64, requires_grad=True)
    q = nv.tensor([3.0, 0.0, 2.0], dtype=nv.float64, requires_grad=True)
    p.scatter_reduce(0, nv.tensor([1, 1, 0]), q, "prod").sum().backward()
    nv.realize(a.grad, s.grad, p.grad, q.grad)
    assert out.tolist() == [2.0, 5.0]
    np.testing.assert_allclose(a.grad.numpy(), [0.0, 1 / 3])     # three tied maxima share
    np.testing.assert_allclose(s.grad.numpy(), [1 / 3, 1 / 3, 1.0])
    assert p.grad.tolist() == [2.0, 0.0] and q.grad.tolist() == [0.0, 0.0, 1.0]
    index = nv.tensor(R.integers(0, 3, (2, 5)))

    def reductions(x, src):
        return (x.scatter_reduce(1, index, src, "amax"),
                x.scatter_reduce(1, index, src, "amin", include_self=False),
                x.scatter_reduce(1, index, src, "prod"))
    assert nv.autograd.gradcheck(reductions,
                                 (nv.tensor(R.standard_normal((2, 3)), requires_grad=True),
                                  nv.tensor(R.standard_normal((2, 5)), requires_grad=True)))


def test_scatter_reduce_in_place_and_errors():
    w = nv.zeros(3)
    w.scatter_reduce_(0, nv.tensor([0, 0, 2]), nv.tensor([1.0, 2.0, 3.0]), "sum")
    assert w.tolist() == [3.0, 0.0, 3.0]
    x, index, src = nv.tensor([10, 20]), nv.tensor([0, 1]), nv.tensor([1, 2])
    with pytest.raises(RuntimeError, match="reduce must be one of sum, prod, mean, amax, "
                                           "amin, got 'max'"):
        x.scatter_reduce(0, index, src, "max")
    with pytest.raises(TypeError, match="input \\(int64\\) and src \\(float32\\) must have "
                                        "the same dtype"):
        x.scatter_reduce(0, index, src.float(), "sum")
    with pytest.raises(TypeError):
        x.scatter_reduce(0, index, src, "sum", True)        # include_self is keyword-only
    with pytest.raises(IndexError, match="index 5 is out of bounds for dim 0 with size 2"):
        x.scatter_reduce(0, nv.tensor([5]), nv.tensor([1]), "amin")
    with pytest.raises(TypeError, match="reduce='mean' is not defined for bool"):
        nv.tensor([True]).scatter_reduce(0, nv.tensor([0]), nv.tensor([False]), "mean")


def test_index_reduce_matches_the_reference_in_place_and_errors():
    x = R.standard_normal((4, 2))
    source, index = R.standard_normal((4, 3)), np.array([0, 1, 0])
    outs, cases = [], []
    tx, tindex, tsource = nv.tensor(x), nv.tensor(index, dtype=nv.int32), nv.tensor(source)
    for reduce in ("prod", "mean", "amax", "amin"):
        for inc in (True, False):
            outs.append(tx.index_reduce(1, tindex, tsource, reduce, include_self=inc))
            cases.append((reduce, inc))
    ints = nv.tensor([-7, 7]).index_reduce(0, nv.tensor([0, 1]), nv.tensor([0, 0]), "mean")
    w = nv.ones(2, 2)
    w.index_reduce_(0, nv.tensor(1), nv.tensor([[5.0, -1.0]]), "amax", include_self=False)
    nv.realize(*outs, ints, w)
    expanded = np.broadcast_to(index, source.shape)
    for (reduce, inc), got in zip(cases, outs):
        np.testing.assert_allclose(got.numpy(), _scatter_reduce_ref(x, 1, expanded, source,
                                                                    reduce, inc), rtol=1e-13)
    assert ints.tolist() == [-4, 3] and w.tolist() == [[1.0, 1.0], [5.0, -1.0]]
    t, so, ii = nv.ones(4, 2), nv.ones(3, 2), nv.tensor([0, 3, 0])
    with pytest.raises(RuntimeError, match="reduce must be one of prod, mean, amax, amin, "
                                           "got 'sum'"):
        t.index_reduce(0, ii, so, "sum")
    with pytest.raises(ValueError, match="source must have shape \\(3, 2\\).*got \\(2, 2\\)"):
        t.index_reduce(0, ii, so[:2], "prod")
    with pytest.raises(IndexError, match="index must be a 0-D or 1-D tensor"):
        t.index_reduce(0, nv.tensor([[0]]), so[:1], "prod")
    with pytest.raises(IndexError, match="index 5 is out of bounds"):
        t.index_reduce(0, nv.tensor([5, 0, 0]), so, "prod")
    with pytest.raises(TypeError, match="input \\(float32\\) and source \\(float64\\)"):
        t.index_reduce(0, ii, so.double(), "prod")


def test_a_compiled_step_through_overlapping_unfold_replays():
    """Overlapping windows gather with an index that was a numpy array made per call
    (host data nv.compile cannot replay); it is iotas now, and the step replays with
    the same values as recorded calls."""
    x = nv.tensor(np.arange(20, dtype=np.float32).reshape(2, 10))

    def loss_of():
        return ((x * w).unfold(1, 4, 3) ** 2).sum()

    w = nv.nn.Parameter(nv.ones(2, 10))
    plain, _ = sgd_step_losses(loss_of, [w], calls=6, compiled=False, lr=0.001)
    w = nv.nn.Parameter(nv.ones(2, 10))
    again, replays = sgd_step_losses(loss_of, [w], calls=6, lr=0.001)
    assert replays >= 3 and again == plain
    np.testing.assert_array_equal(x.unfold(1, 4, 3).numpy()[1, 2], [16, 17, 18, 19])
