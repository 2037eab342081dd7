"""Regressions from a comparison of tensor semantics with PyTorch (port probe 8):
``arange`` in an integer dtype from non-integer bounds, ``index_fill``'s result dtype,
the gradient of a mean cross entropy / NLL whose every target is ignored, integer
tensors to negative integer powers, ``searchsorted(sorter=)``, ``scatter(reduce=)``,
``repeat_interleave`` with a tensor of repeats, ``logsumexp`` over an empty dim,
``gradient``, ``linalg.cross``, ``cumulative_trapezoid`` and ``trapezoid``'s checks, and
``histc``'s binning of values on or near a bin edge. References are written out (the
PyTorch rule in numpy); torch only checks again where it is installed. (The integer
division of the smallest integer by -1, which killed the process, is
tests/compiler/test_int_division_traps.py: it needs subprocesses.)"""
import math

import numpy as np
import pytest

import nova as nv

F = nv.nn.functional


def _computed(values, dtype=None):
    """A tensor whose values are not known while recording (a product, not data)."""
    return nv.tensor(values, dtype=dtype) * 1


# ---------------------------------------------------------------- arange

# PyTorch's CPU rule for an integer dtype and non-integer bounds: start, end and step
# are truncated toward zero to int64 first and the values are start + i * step. int64
# counts with the truncated bounds (a step that truncates to 0 is an error); int32
# counts ceil((end - start) / step) with the original bounds, in double.
_ARANGE = [  # (start, end, step), int64 values, int32 values
    ((0, 5, 1.5), [0, 1, 2, 3, 4], [0, 1, 2, 3]),
    ((0.5, 5, 1.5), [0, 1, 2, 3, 4], [0, 1, 2]),
    ((-2.5, 3, 1), [-2, -1, 0, 1, 2], [-2, -1, 0, 1, 2, 3]),
    ((0, 2.9, 1), [0, 1], [0, 1, 2]),
    ((0, 10, 2.5), [0, 2, 4, 6, 8], [0, 2, 4, 6]),
    ((5, 0, -1.5), [5, 4, 3, 2, 1], [5, 4, 3, 2]),
    ((2.9, 0, -1), [2, 1], [2, 1, 0]),
    ((0.7, 0.2, -1), [], [0]),
    ((-0.5, 2, 1), [0, 1], [0, 1, 2]),
    ((0, 7, 2.9), [0, 2, 4, 6], [0, 2, 4]),
    ((0, 5, 0.5), None, [0] * 10),
    ((1e10, 1e10 + 3.5, 1), [10**10, 10**10 + 1, 10**10 + 2], None),
]


def _arange_rule(start, end, step, bits):
    """The rule above, written out with Python integers."""
    s, e, st = (int(v) for v in (start, end, step))
    if bits == 64:
        if st == 0:
            return None
        n = -((s - e) // st)
    else:
        n = math.ceil((end - start) / step)
    wrap = lambda v: (v + 2**(bits - 1)) % 2**bits - 2**(bits - 1)   # noqa: E731
    return [wrap(s + i * st) for i in range(max(n, 0))]


def test_arange_in_an_integer_dtype_truncates_the_bounds_first():
    for bounds, want64, want32 in _ARANGE:
        assert _arange_rule(*bounds, 64) == want64, bounds
        if want32 is not None:
            assert _arange_rule(*bounds, 32) == want32, bounds
        if want64 is None:
            with pytest.raises(ValueError, match="step must be nonzero"):
                nv.arange(*bounds, dtype=nv.int64)
        else:
            assert nv.arange(*bounds, dtype=nv.int64).tolist() == want64, bounds
        if want32 is not None:
            got = nv.arange(*bounds, dtype=nv.int32)
            assert got.dtype == nv.int32 and got.tolist() == want32, bounds
    with pytest.raises(ValueError, match="inconsistent with step sign"):
        nv.arange(0.3, 0.7, -1, dtype=nv.int64)     # checked on the bounds as given
    assert nv.arange(0.5, 3, dtype=nv.float64).tolist() == [0.5, 1.5, 2.5]   # unchanged


def test_arange_integer_dtype_matches_torch():
    torch = pytest.importorskip("torch")
    for bounds, _, _ in _ARANGE:
        for tdt, ndt in ((torch.int64, nv.int64), (torch.int32, nv.int32)):
            try:
                want = torch.arange(*bounds, dtype=tdt).tolist()
            except (RuntimeError, ValueError):
                with pytest.raises(ValueError):
                    nv.arange(*bounds, dtype=ndt)
                continue
            assert nv.arange(*bounds, dtype=ndt).tolist() == want, (bounds, tdt)


# ---------------------------------------------------------------- index_fill

def test_index_fill_keeps_the_tensors_dtype():
    idx = nv.tensor([0])
    got = nv.tensor([1, 2]).index_fill(0, idx, 3.7)
    assert got.dtype == nv.int64 and got.tolist() == [3, 2]
    got = nv.tensor([1, 2]).index_fill(0, idx, nv.tensor(3.7, dtype=nv.float64))
    assert got.dtype == nv.int64 and got.tolist() == [3, 2]
    got = nv.tensor([False, False]).index_fill(0, idx, 2)
    assert got.dtype == nv.bool and got.tolist() == [True, False]
    t = nv.tensor([1, 2])
    t.index_fill_(0, idx, 3.7)                     # in place: was a cast error
    assert t.dtype == nv.int64 and t.tolist() == [3, 2]
    got = nv.tensor([1.0, 2.0]).index_fill(0, idx, nv.tensor(3.7, dtype=nv.float64))
    assert got.dtype == nv.float32 and got.tolist() == [np.float32(3.7), 2.0]
    with pytest.raises(ValueError, match="int32"):
        nv.tensor([1, 2], dtype=nv.int32).index_fill(0, idx, 2**40)


def test_index_fill_value_still_gets_its_gradient():
    x = nv.zeros(3, requires_grad=True)
    v = nv.tensor(2.0, requires_grad=True)
    (x.index_fill(0, nv.tensor([1]), v) * nv.tensor([1.0, 2.0, 3.0])).sum().backward()
    assert x.grad.tolist() == [1.0, 0.0, 3.0] and v.grad.item() == 2.0


# ---------------------------------------------------------------- all-ignored losses

@pytest.mark.parametrize("name, loss", [
    ("cross_entropy", lambda x, t: F.cross_entropy(x, t)),
    ("label_smoothing", lambda x, t: F.cross_entropy(x, t, label_smoothing=0.1)),
    ("weighted", lambda x, t: F.cross_entropy(x, t, nv.tensor([1.0, 2.0, 0.5, 1.0, 3.0]))),
    ("nll_loss", lambda x, t: F.nll_loss(F.log_softmax(x, 1), t)),
])
def test_mean_loss_of_only_ignored_targets_is_nan_with_a_zero_gradient(name, loss):
    """PyTorch: NaN (0 / 0) but a zero gradient, its backward skipping ignored samples;
    a division's gradient was 0 * (1 / 0) = NaN, poisoning every parameter."""
    logits = np.random.RandomState(0).randn(2, 5)
    x = nv.tensor(logits, requires_grad=True)
    out = loss(x, nv.tensor([-100, -100]))
    out.backward()
    assert math.isnan(out.item())
    np.testing.assert_array_equal(x.grad.numpy(), np.zeros((2, 5)))
    # one sample kept: the usual gradient, softmax - one_hot for the kept row
    x = nv.tensor(logits, requires_grad=True)
    out = loss(x, nv.tensor([3, -100]))
    out.backward()
    p = np.exp(logits[0]) / np.exp(logits[0]).sum()
    smooth = 0.1 if name == "label_smoothing" else 0.0
    target = (1 - smooth) * np.eye(5)[3] + smooth / 5
    want = np.zeros((2, 5))
    want[0] = p - target
    if name == "weighted":           # one sample: its weight cancels in the mean
        want[0] = p - np.eye(5)[3]
    np.testing.assert_allclose(x.grad.numpy(), want, rtol=1e-5, atol=1e-7)
    assert np.isfinite(out.item())


# ---------------------------------------------------------------- pow

def test_integer_power_of_negative_tensor_exponents_and_the_scalar_refusal():
    base, exp = [2, 1, -1, -1, 0, 3, -2, 5], [-1, -2, -3, -4, -1, 2, 3, -7]
    want = [0, 1, -1, 1, 0, 9, -8, 0]   # PyTorch: 1 / x ** -y truncated (0 ** -1 is 0)
    assert (nv.tensor(base) ** _computed(exp)).tolist() == want
    assert nv.pow(-1, nv.tensor([-1, -2, 3])).tolist() == [-1, 1, -1]
    for f in (lambda: nv.tensor([2]) ** -1, lambda: nv.tensor([2]).pow_(-1),
              lambda: nv.tensor([True]) ** -2):
        with pytest.raises(RuntimeError, match="negative integer powers"):
            f()
    assert (nv.tensor([2]) ** -1.0).tolist() == [0.5]


# ---------------------------------------------------------------- searchsorted

def test_searchsorted_sorter_reads_the_sequence_in_sorted_order():
    seq = np.array([3.0, 1.0, 5.0, 2.0], np.float32)
    sorter = np.argsort(seq)
    values = np.array([2.0, 4.0, 0.0, 9.0, 1.0], np.float32)
    for right in (False, True):
        side = "right" if right else "left"
        got = nv.searchsorted(nv.tensor(seq), nv.tensor(values), right=right,
                              sorter=nv.tensor(sorter))
        assert got.tolist() == np.searchsorted(seq, values, side, sorter=sorter).tolist()
    rows = np.array([[3.0, 1.0], [0.0, -1.0]], np.float32)
    got = nv.searchsorted(nv.tensor(rows), nv.tensor([[2.0], [-0.5]]),
                          sorter=_computed(np.argsort(rows, 1)))
    assert got.tolist() == [[1], [1]]
    assert nv.searchsorted(nv.tensor(seq), 2.0, sorter=nv.tensor(sorter)).item() == 1
    with pytest.raises(TypeError, match="int64"):
        nv.searchsorted(nv.tensor(seq), nv.tensor(values), sorter=nv.tensor(sorter, dtype=nv.int32))
    with pytest.raises(ValueError, match="same shape"):
        nv.searchsorted(nv.tensor(seq), nv.tensor(values), sorter=nv.tensor([1, 0]))
    with pytest.raises(IndexError, match="out of bounds"):
        nv.searchsorted(nv.tensor(seq), nv.tensor(values), sorter=nv.tensor([1, 3, 0, 7]))


# ---------------------------------------------------------------- scatter(reduce=)

def test_scatter_reduce_add_and_multiply_as_pytorchs_older_form():
    x = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], np.float32)
    index = np.array([[0, 1, 0], [0, 0, 1]])
    src = np.array([[2.0, 3.0, 5.0], [7.0, 0.5, -1.0]], np.float32)
    cols = np.broadcast_to(np.arange(3), index.shape)
    added, multiplied = x.copy(), x.copy()
    np.add.at(added, (index, cols), src)           # every update counts
    np.multiply.at(multiplied, (index, cols), src)
    got = nv.tensor(x).scatter(0, nv.tensor(index), nv.tensor(src), reduce="add")
    np.testing.assert_array_equal(got.numpy(), added)
    got = nv.scatter(nv.tensor(x), 0, _computed(index), nv.tensor(src), reduce="multiply")
    np.testing.assert_array_equal(got.numpy(), multiplied)
    ints = nv.tensor([[1, 2], [3, 4]])
    assert ints.scatter(0, nv.tensor([[0, 1]]), 3, reduce="add").tolist() == [[4, 2], [3, 7]]
    assert ints.scatter(0, nv.tensor([[0, 1]]), 3, reduce="multiply").tolist() == [
        [3, 2], [3, 12]]
    t = nv.tensor([1.0, 2.0])
    t.scatter_(0, nv.tensor([0, 0]), value=3.0, reduce="multiply")
    assert t.tolist() == [9.0, 2.0]
    with pytest.raises(ValueError, match="'add' or 'multiply'"):
        ints.scatter(0, nv.tensor([[0, 1]]), 3, reduce="max")


# ---------------------------------------------------------------- repeat_interleave

def test_repeat_interleave_with_a_tensor_of_repeats_and_output_size():
    x = nv.tensor([[1, 2], [3, 4], [5, 6]])
    counts = [2, 0, 3]
    want = np.repeat(x.numpy(), counts, axis=0)
    for repeats in (nv.tensor(counts), _computed(counts)):
        got = nv.repeat_interleave(x, repeats, dim=0, output_size=5)
        np.testing.assert_array_equal(got.numpy(), want)
    got = x.repeat_interleave(_computed([0, 3]), dim=1, output_size=3)
    np.testing.assert_array_equal(got.numpy(), np.repeat(x.numpy(), [0, 3], axis=1))
    # one count for every element: a 0-d (or one-element) tensor is an int
    assert nv.repeat_interleave(nv.tensor([1, 2]), nv.tensor(2)).tolist() == [1, 1, 2, 2]
    assert nv.repeat_interleave(nv.tensor([1, 2]), _computed([3])).tolist() == [1, 1, 1, 2, 2, 2]
    # the one-argument form: indices, in the repeats' dtype
    got = nv.repeat_interleave(_computed([2, 0, 3], nv.int32), output_size=5)
    assert got.dtype == nv.int32 and got.tolist() == [0, 0, 2, 2, 2]


def test_repeat_interleave_sizes_by_reading_counts_or_checks_output_size():
    x = nv.tensor([1, 2, 3])
    assert nv.repeat_interleave(x, _computed([1, 2, 3])).tolist() == [1, 2, 2, 3, 3, 3]
    assert nv.repeat_interleave(nv.tensor([2, 0, 3])).tolist() == [0, 0, 2, 2, 2]
    with pytest.raises(ValueError, match="adding up to output_size 5"):
        nv.repeat_interleave(x, nv.tensor([1, 2, 3]), output_size=5)     # known: here
    with pytest.raises(nv.RealizationError, match="out of bounds|must lie in"):  # computed: at run
        nv.repeat_interleave(x, _computed([1, 2, 3]), output_size=5).tolist()
    with pytest.raises(TypeError, match="int32 or int64"):
        nv.repeat_interleave(x, nv.tensor([1.0, 2.0, 3.0]), output_size=6)
    with pytest.raises(ValueError, match="one count per element"):
        nv.repeat_interleave(x, nv.tensor([1, 2]), output_size=3)


# ---------------------------------------------------------------- logsumexp

def test_logsumexp_over_an_empty_dim_is_minus_infinity():
    x = nv.zeros(0, 3, requires_grad=True)
    out = nv.logsumexp(x, 0)
    assert out.tolist() == [-math.inf] * 3
    out.sum().backward()
    assert x.grad.shape == (0, 3)
    assert nv.logsumexp(nv.zeros(2, 0), 1, keepdim=True).tolist() == [[-math.inf]] * 2
    assert nv.logsumexp(nv.zeros(0, 3), 1).shape == (0,)


# ---------------------------------------------------------------- gradient

_Y = np.array([[1.0, 4.0, 9.0, 16.0, 25.0], [2.0, -1.0, 0.5, 3.0, 8.0],
               [0.0, 1.0, 0.0, -1.0, 0.0], [5.0, 3.0, 2.0, 2.5, 4.0]])
_C0 = np.array([0.0, 0.5, 1.7, 2.0])
_C1 = np.array([-1.0, 0.0, 0.3, 1.1, 4.0])


@pytest.mark.parametrize("kwargs, np_args", [
    ({}, ((), {})),
    ({"edge_order": 2}, ((), {"edge_order": 2})),
    ({"spacing": 0.5}, ((0.5,), {})),
    ({"spacing": [0.5, 2.0], "edge_order": 2}, ((0.5, 2.0), {"edge_order": 2})),
    ({"spacing": [_C0, _C1]}, ((_C0, _C1), {})),
    ({"spacing": [_C0, _C1], "edge_order": 2}, ((_C0, _C1), {"edge_order": 2})),
    ({"dim": 1, "spacing": [_C1]}, ((_C1,), {"axis": 1})),
    ({"dim": (1, 0), "spacing": 3}, ((3,), {"axis": (1, 0)})),
])
def test_gradient_matches_numpys_finite_differences(kwargs, np_args):
    spacing = kwargs.get("spacing")
    if isinstance(spacing, list) and isinstance(spacing[0], np.ndarray):
        kwargs = dict(kwargs, spacing=[nv.tensor(c) for c in spacing])
    got = nv.gradient(nv.tensor(_Y), **kwargs)
    want = np.gradient(_Y, *np_args[0], **np_args[1])
    want = want if isinstance(want, (list, tuple)) else [want]
    assert isinstance(got, tuple) and len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype == nv.float64
        np.testing.assert_allclose(g.numpy(), w, rtol=1e-12, atol=1e-12)


def test_gradient_dtypes_and_refusals():
    ints = nv.tensor([1, 4, 9, 16])
    (g,) = nv.gradient(ints)
    assert g.dtype == nv.float32 and g.tolist() == [3.0, 4.0, 6.0, 7.0]
    (g,) = nv.gradient(nv.tensor([1.0, 4.0, 9.0]), spacing=[nv.tensor([0.0, 1.0, 3.0],
                                                                       dtype=nv.float64)])
    assert g.dtype == nv.float64
    assert nv.gradient(nv.tensor(3.0)) == ()
    with pytest.raises(ValueError, match="length 2"):
        nv.gradient(nv.ones(3, 4), spacing=[2.0])
    with pytest.raises(ValueError, match="at least edge_order"):
        nv.gradient(nv.ones(2, 3), edge_order=2)
    with pytest.raises(ValueError, match="edge_order=1 and edge_order=2"):
        nv.gradient(nv.ones(4), edge_order=3)
    with pytest.raises(ValueError, match="one value per sample"):
        nv.gradient(nv.ones(4), spacing=[nv.tensor([0.0, 1.0])])
    with pytest.raises(ValueError, match="more than once"):
        nv.gradient(nv.ones(3, 3), dim=(0, 0))


def test_gradient_matches_torch_bit_for_bit_in_float32():
    torch = pytest.importorskip("torch")
    y = np.random.default_rng(0).standard_normal((4, 5)).astype(np.float32)
    c0, c1 = _C0.astype(np.float32), _C1.astype(np.float32)
    for kw in ({}, {"edge_order": 2}, {"spacing": (0.5, 3.0)}, {"spacing": (c0, c1)},
               {"spacing": (c0, c1), "edge_order": 2}):
        tk = {k: tuple(torch.tensor(c) if isinstance(c, np.ndarray) else c for c in v)
              if k == "spacing" else v for k, v in kw.items()}
        nk = {k: [nv.tensor(c) if isinstance(c, np.ndarray) else c for c in v]
              if k == "spacing" else v for k, v in kw.items()}
        for t, n in zip(torch.gradient(torch.tensor(y), **tk), nv.gradient(nv.tensor(y), **nk)):
            np.testing.assert_array_equal(n.numpy(), t.numpy(), err_msg=str(kw))


# ---------------------------------------------------------------- linalg.cross

def test_linalg_cross_defaults_to_the_last_dim_and_broadcasts():
    a = np.array([[1.0, 2.0, 3.0]], np.float32)
    b = np.array([[4.0, 5.0, 6.0], [1.0, 0.0, 0.0]], np.float32)
    np.testing.assert_array_equal(nv.linalg.cross(nv.tensor(a), nv.tensor(b)).numpy(),
                                  np.cross(a, b))
    m = np.arange(12.0, dtype=np.float32).reshape(3, 4)
    got = nv.linalg.cross(nv.tensor(m), nv.tensor(m[::-1].copy()), dim=0)
    np.testing.assert_array_equal(got.numpy(), np.cross(m, m[::-1], axis=0))
    with pytest.raises(ValueError, match="size 3 along dim -1"):
        nv.linalg.cross(nv.ones(3, 4), nv.ones(3, 4))            # torch.cross would take dim 0
    with pytest.raises(ValueError, match="same number of dims"):
        nv.linalg.cross(nv.ones(3, 1, 3), nv.ones(2, 3))


# ---------------------------------------------------------------- trapezoid rules

def test_cumulative_trapezoid_and_trapezoids_checks():
    y = np.array([[1.0, 2.0, 4.0], [0.0, 1.0, 0.0]], np.float32)
    x = np.array([0.0, 1.0, 3.0], np.float32)
    mid = (y[:, 1:] + y[:, :-1]) / 2
    np.testing.assert_allclose(nv.cumulative_trapezoid(nv.tensor(y)).numpy(),
                               np.cumsum(mid, 1))
    np.testing.assert_allclose(nv.cumulative_trapezoid(nv.tensor(y), dx=0.5).numpy(),
                               np.cumsum(mid * 0.5, 1))
    np.testing.assert_allclose(nv.cumulative_trapezoid(nv.tensor(y), nv.tensor(x)).numpy(),
                               np.cumsum(mid * np.diff(x), 1))
    got = nv.cumulative_trapezoid(nv.tensor(y), nv.tensor([0.0, 2.0]), dim=0)
    np.testing.assert_allclose(got.numpy(), (y[1:] + y[:1]) / 2 * 2.0)
    assert nv.cumulative_trapezoid(nv.tensor([1, 2, 4])).dtype == nv.float32
    assert nv.cumulative_trapezoid(nv.zeros(2, 0)).shape == (2, 0)
    # x of fewer dims than y gets leading ones (it was an error)
    got = nv.trapezoid(nv.ones(2, 2, 3), nv.tensor([[0.0, 1.0, 3.0], [0.0, 2.0, 3.0]]))
    assert got.tolist() == [[3.0, 3.0], [3.0, 3.0]]
    assert nv.trapezoid(nv.tensor(y), nv.tensor(x)).tolist() == [7.5, 1.5]
    for f in (nv.trapezoid, nv.cumulative_trapezoid):
        with pytest.raises(TypeError, match="bool"):
            f(nv.tensor([True, False]))
        with pytest.raises(ValueError, match="one x value for each sample"):
            f(nv.tensor([1.0, 2.0, 4.0]), nv.tensor([0.0, 1.0]))
        with pytest.raises(TypeError, match="not both"):
            f(nv.tensor([1.0, 2.0]), nv.tensor([0.0, 1.0]), dx=2.0)
        with pytest.raises(IndexError, match="at least one dim"):
            f(nv.tensor(3.0))


# ---------------------------------------------------------------- histc

def _histc_rule(values, bins, lo, hi, np_dtype):
    """PyTorch's CPU histc: edges min and max in the input dtype, and an element's bin
    ``int((x - min) * bins / (max - min))`` with every operation rounded in that dtype;
    ``max`` in the last bin; outside (and NaN) not counted."""
    x = np.asarray(values, np_dtype)
    lo_t, hi_t = np_dtype(lo), np_dtype(hi)
    counts = np.zeros(bins)
    for v in x:
        if not lo_t <= v <= hi_t:
            continue
        with np.errstate(invalid="ignore"):
            pos = ((v - lo_t) * np_dtype(bins)) / (hi_t - lo_t)
        counts[min(int(pos) if np.isfinite(pos) else 0, bins - 1)] += 1
    return counts


def test_histc_bins_values_on_and_near_edges_as_pytorch():
    got = nv.histc(nv.tensor([0.3, 0.6, 0.9], dtype=nv.float64), bins=3, min=0.0, max=0.9)
    assert got.tolist() == [1.0, 1.0, 1.0]   # 0.3 * 3 / 0.9 = 0.999..: bin 0 (was bin 1)
    rng = np.random.default_rng(0)
    for dtype, np_dtype in ((nv.float32, np.float32), (nv.float64, np.float64)):
        for lo, hi, bins in ((0.0, 0.9, 3), (0.1, 0.7, 7), (-1.3, 2.9, 10)):
            edges = np.linspace(lo, hi, bins + 1)
            values = np.concatenate([edges, np.nextafter(edges, np.inf),
                                     np.nextafter(edges, -np.inf), np.arange(-3, 15) / 10,
                                     np.arange(-3, 15) * 0.1, rng.uniform(lo, hi, 50)])
            got = nv.histc(nv.tensor(values, dtype=dtype), bins=bins, min=lo, max=hi)
            np.testing.assert_array_equal(got.numpy(),
                                          _histc_rule(values, bins, lo, hi, np_dtype),
                                          err_msg=f"{dtype} {lo} {hi} {bins}")
    # bounds that round to one float32 value: the elements on it go to bin 0
    got = nv.histc(nv.tensor([0.3, 0.2, 0.3]), bins=3, min=0.3, max=0.30000001)
    assert got.tolist() == [2.0, 0.0, 0.0]
    # float16 counts are rounded once (a running float16 count stalled at 2048)
    assert nv.histc(nv.full((3000,), 0.5, dtype=nv.float16), bins=4, min=0,
                    max=1).tolist() == [0.0, 0.0, 3000.0, 0.0]


def test_histc_matches_torch_on_edges():
    torch = pytest.importorskip("torch")
    for name in ("float32", "float64", "float16"):
        values = np.concatenate([np.arange(-3, 15) / 10, np.linspace(0.1, 0.7, 8)])
        for lo, hi, bins in ((0.0, 0.9, 3), (0.1, 0.7, 7), (0.0, 1.0, 10)):
            want = torch.histc(torch.tensor(values, dtype=getattr(torch, name)), bins, lo, hi)
            got = nv.histc(nv.tensor(values, dtype=getattr(nv, name)), bins, lo, hi)
            assert got.float().tolist() == want.float().tolist(), (name, lo, hi, bins)
