"""x[index] and x[index] = v against numpy, for basic and integer-tensor indexing."""
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import nova as nv
from tests.helpers import arrays, assert_close, shapes


@st.composite
def basic_index(draw, shape):
    """ints, slices with positive steps, None and at most one Ellipsis."""
    entries, dims = [], list(shape)
    used_ellipsis = False
    while dims:
        kind = draw(st.sampled_from(["int", "slice", "none", "ellipsis", "stop"]))
        if kind == "stop":
            if used_ellipsis:  # after "...", entries must cover exactly the trailing dims
                continue
            break
        if kind == "none":
            entries.append(None)
            continue
        if kind == "ellipsis":
            if not used_ellipsis:
                entries.append(Ellipsis)
                used_ellipsis = True
                dims = dims[len(dims) - draw(st.integers(0, len(dims))):]
            continue
        n = dims.pop(0)
        if kind == "int":
            entries.append(draw(st.integers(-n, n - 1)))
        else:
            start = draw(st.one_of(st.none(), st.integers(-n - 2, n + 2)))
            stop = draw(st.one_of(st.none(), st.integers(-n - 2, n + 2)))
            step = draw(st.one_of(st.none(), st.integers(1, 3)))
            entries.append(slice(start, stop, step))
    return tuple(entries) if draw(st.booleans()) or len(entries) != 1 else entries[0]


@given(x=shapes(max_dims=4).flatmap(arrays), data=st.data())
def test_basic_getitem_matches_numpy(x, data):
    index = data.draw(basic_index(x.shape))
    assert_close(nv.tensor(x)[index], x[index])


@given(x=shapes(max_dims=4).flatmap(arrays), data=st.data())
def test_basic_setitem_matches_numpy(x, data):
    index = data.draw(basic_index(x.shape))
    t = nv.tensor(x)
    region = x[index]
    value = data.draw(arrays(np.shape(region), np.float32))
    t[index] = nv.tensor(value)
    ref = x.copy()
    ref[index] = value
    assert_close(t, ref)
    t[index] = 7.0
    ref[index] = 7.0
    assert_close(t, ref)


@st.composite
def advanced_index(draw, shape):
    """Integer arrays (possibly negative) on some dims, slices on the others."""
    k = draw(st.integers(1, len(shape)))
    dims = sorted(draw(st.lists(st.integers(0, len(shape) - 1), min_size=1, max_size=k,
                                unique=True)))
    bshape = draw(shapes(min_dims=1, max_dims=2, max_side=3))
    entries = []
    for d, n in enumerate(shape):
        if d in dims:
            entries.append(draw(arrays(bshape, np.int64, -n, n - 1)))
        else:
            entries.append(draw(st.sampled_from([slice(None), slice(0, None, 2)])))
    return tuple(entries)


@given(x=shapes(min_dims=1, max_dims=3).flatmap(arrays), data=st.data())
def test_advanced_getitem_matches_numpy(x, data):
    index = data.draw(advanced_index(x.shape))
    ours = tuple(nv.tensor(i) if isinstance(i, np.ndarray) else i for i in index)
    assert_close(nv.tensor(x)[ours], x[index])


def _assign_in_order(x, index, value):
    """numpy's ``x[index] = value`` written out as its definition: one write per position
    of the broadcast index shape, in row-major order, so the last write to an element
    wins (numpy itself does not promise an order for repeated indices). ``index`` holds
    integer arrays and slices only."""
    ref = x.copy()
    arrays_at = [k for k, i in enumerate(index) if isinstance(i, np.ndarray)]
    b = np.broadcast_arrays(*[index[k] for k in arrays_at])
    adjacent = arrays_at == list(range(arrays_at[0], arrays_at[0] + len(arrays_at)))
    lead = arrays_at[0] if adjacent else 0     # where the index dims sit in x[index]
    value = np.broadcast_to(value, x[index].shape)
    for pos in np.ndindex(b[0].shape):
        entry = list(index)
        for k, arr in zip(arrays_at, b):
            entry[k] = int(arr[pos])
        ref[tuple(entry)] = value[(slice(None),) * lead + pos]
    return ref


@given(x=shapes(min_dims=1, max_dims=3).flatmap(arrays), data=st.data())
def test_advanced_setitem_matches_numpy_including_repeated_indices(x, data):
    """Repeated positions are written once, the last value winning (numpy's result);
    before, they received the sum of their values."""
    index = data.draw(advanced_index(x.shape))
    value = data.draw(arrays(x[index].shape, np.float32))
    t = nv.tensor(x)
    t[tuple(nv.tensor(i) if isinstance(i, np.ndarray) else i for i in index)] = nv.tensor(value)
    assert_close(t, _assign_in_order(x, index, value))


def test_list_and_numpy_indices():
    x = np.arange(12).reshape(3, 4)
    t = nv.tensor(x)
    assert_close(t[[2, 0]], x[[2, 0]])
    assert_close(t[np.array([1, 1])], x[np.array([1, 1])])
    assert_close(t[1, [0, 3]], x[1, [0, 3]])
    assert_close(t[None, ..., 1], x[None, ..., 1])


@pytest.mark.parametrize("index,error,message", [
    ((5,), IndexError, r"index 5 is out of bounds for dim 0 with size 3 \(shape \(3, 4\)\)"),
    ((0, 0, 0), IndexError, r"too many indices for tensor of shape \(3, 4\): 3 given, 2 dims"),
    ((Ellipsis, Ellipsis), IndexError, "single ellipsis"),
    ((slice(None, None, -1),), ValueError, "slice step must be positive"),
    ((nv.tensor([0.5]),), IndexError, r"tensors used as indices must be int32 or int64, got float32"),
    ((nv.tensor([True, False]),), IndexError,
     r"the shape of the mask \(2,\) does not match the indexed dims \(3,\)"),
    (("a",), IndexError, "index lists and arrays must hold integers"),
])
def test_index_errors(index, error, message):
    t = nv.zeros(3, 4)
    with pytest.raises((error, TypeError), match=message):
        t[index] + 0


def test_out_of_range_computed_index_fails_at_realization_and_poisons_only_its_results():
    t = nv.zeros(3, 4)
    bad = t[nv.tensor([0, 7]) * 1]        # computed: its values are known only when it runs
    good = t + 1
    with pytest.raises(nv.RealizationError,
                       match="nova.wrap_index: index 7 is out of bounds for dim 0 with size 3"):
        bad.numpy()
    with pytest.raises(nv.RealizationError, match="nova.wrap_index"):
        bad.numpy()  # the failure is remembered, not recomputed
    assert good.sum().item() == 12.0  # other pending work is unaffected


# ---------------------------------------------------------------- bounds, per dim

@pytest.mark.parametrize("make", [nv.tensor, np.array, list], ids=["tensor", "numpy", "list"])
def test_index_past_a_later_dim_is_an_error_at_the_users_line(make):
    """x[0, 4] on a (3, 4) tensor linearizes to 4, inside the 12 elements: it used to
    read x[1, 0] and write into row 1. Known index values are checked at once, each
    against its own dim (negative ones from -size, as in PyTorch)."""
    x = nv.tensor(np.arange(12.0, dtype=np.float32).reshape(3, 4))
    for j, shown in ((4, 4), (-5, -5)):
        with pytest.raises(IndexError, match=rf"__getitem__: index {shown} is out of bounds "
                                             r"for dim 1 with size 4 \(shape \(3, 4\)\)"):
            x[make([0]), make([j])]
        with pytest.raises(IndexError, match=rf"__setitem__: index {shown} is out of bounds "
                                             "for dim 1 with size 4"):
            x[make([0]), make([j])] = 100.0
    with pytest.raises(IndexError, match="index 3 is out of bounds for dim 2 with size 3"):
        nv.zeros(2, 4, 3)[:, make([1]), make([3])]
    assert_close(x, np.arange(12.0).reshape(3, 4))            # nothing was written
    assert_close(x[make([0, 2]), make([-4, 3])], [0.0, 11.0])  # -size..size-1 are valid


def test_computed_index_past_a_later_dim_fails_the_step_naming_the_dim():
    x = nv.tensor(np.arange(12.0, dtype=np.float32).reshape(3, 4))
    for j in (4, -5):
        picked = x[nv.tensor([0]) * 1, nv.tensor([j]) * 1]
        with pytest.raises(nv.RealizationError, match=f"index {j} is out of bounds for dim 1 "
                                                      "with size 4"):
            picked.numpy()
    y = x.clone()
    y[nv.tensor([0]), nv.tensor([4]) * 1] = 100.0
    with pytest.raises(nv.RealizationError, match="index 4 is out of bounds for dim 1"):
        y.numpy()
    assert_close(x[nv.tensor([0, 2]) * 1, nv.tensor([-4, -1]) * 1], [0.0, 11.0])


# ---------------------------------------------------------------- repeated indices

def test_assignment_through_repeated_indices_writes_once():
    x = nv.zeros(3)
    x[nv.tensor([0, 0])] = 5.0
    assert x.tolist() == [5.0, 0.0, 0.0]          # was 10: the writes were summed
    y = nv.tensor([1.0, 2.0, 3.0])
    y[[0, 0]] += 1                                 # numpy and PyTorch: +1 once
    assert y.tolist() == [2.0, 2.0, 3.0]
    z = nv.zeros(3)
    z[nv.tensor([0, 2, 0])] = nv.tensor([1.0, 2.0, 3.0])   # the last write wins
    ref = np.zeros(3)
    ref[np.array([0, 2, 0])] = [1.0, 2.0, 3.0]
    assert_close(z, ref)
    flags = nv.zeros(3, dtype=nv.bool)
    flags[[1, 1]] = True
    assert flags.tolist() == [False, True, False]
    m = nv.zeros(2, 3)
    m[nv.tensor([1, 1]), nv.tensor([2, 2])] = nv.tensor([7.0, 8.0])
    assert m.tolist() == [[0.0, 0.0, 0.0], [0.0, 0.0, 8.0]]


def test_last_write_wins_for_many_updates_of_few_rows():
    """Thousands of updates into 5 rows: the compiled kernel must apply them in order
    (a split across threads could let an earlier write land last)."""
    rng = np.random.default_rng(0)
    idx = rng.integers(-5, 5, 3000)
    value = rng.standard_normal((3000, 4)).astype(np.float32)
    x = nv.zeros(5, 4)
    x[nv.tensor(idx) * 1] = nv.tensor(value)
    ref = np.zeros((5, 4), np.float32)
    for i, v in zip(idx, value):
        ref[i] = v
    assert_close(x, ref, rtol=0, atol=0)
    acc = nv.zeros(5, 4).index_put((nv.tensor(idx),), nv.tensor(value), accumulate=True)
    summed = np.zeros((5, 4))
    np.add.at(summed, idx, value.astype(np.float64))
    assert_close(acc, summed, rtol=1e-5, atol=1e-4)


def test_index_put_overwrites_or_accumulates_as_pytorch():
    rows, cols = nv.tensor([0, 2, 0]), nv.tensor([1, 1, 1])
    vals = nv.tensor([1.0, 2.0, 3.0])
    x = nv.ones(3, 2)
    out = x.index_put((rows, cols), vals)
    assert out.tolist() == [[1.0, 3.0], [1.0, 1.0], [1.0, 2.0]] and x.tolist() == [[1.0] * 2] * 3
    assert x.index_put((rows, cols), vals, accumulate=True).tolist() == [
        [1.0, 5.0], [1.0, 1.0], [1.0, 3.0]]
    alias = x
    assert x.index_put_((rows,), nv.tensor([[5.0, 6.0]]), accumulate=True) is alias
    assert x.tolist() == [[11.0, 13.0], [1.0, 1.0], [6.0, 7.0]]
    x.index_put_((None, nv.tensor([0])), nv.tensor([0.0]))
    assert x.tolist() == [[0.0, 13.0], [0.0, 1.0], [0.0, 7.0]]
    with pytest.raises(TypeError, match="index_put_: values must be a Tensor"):
        x.index_put_((rows,), 1.0)
    with pytest.raises(TypeError, match="index_put: values of dtype int64 must match"):
        x.index_put((rows,), nv.tensor([1]))
    with pytest.raises(TypeError, match="index_put_: indices must be a tuple of tensors"):
        x.index_put_(rows, vals)
    with pytest.raises(IndexError, match="index_put_: index 3 is out of bounds for dim 0"):
        x.index_put_((nv.tensor([3]),), nv.tensor([1.0]))


def test_gradient_of_an_overwriting_assignment():
    """An overwritten value does not reach the output: its gradient is zero, and so is
    the gradient of the elements it replaced (finite differences agree; PyTorch's
    index_put backward instead gives every duplicate the gradient)."""
    base = nv.tensor(np.arange(8.0).reshape(4, 2), requires_grad=True)
    v = nv.tensor(np.arange(6.0).reshape(3, 2) + 10, requires_grad=True)
    y = base * 1.0
    y[nv.tensor([0, 2, 0])] = v
    w = np.arange(8.0).reshape(4, 2) + 1
    (y * nv.tensor(w, dtype=nv.float32)).sum().backward()
    assert_close(base.grad, [[0, 0], [3, 4], [0, 0], [7, 8]])
    assert_close(v.grad, [[0, 0], [5, 6], [1, 2]])           # v[0] lost to v[2]

    def put(x, vals):
        return x.index_put((nv.tensor([1, 0, 1, 3]),), vals)
    rng = np.random.default_rng(1)
    assert nv.autograd.gradcheck(put, [rng.standard_normal((4, 3)),
                                       rng.standard_normal((4, 3))])
    assert nv.autograd.gradcheck(lambda x, vals: x.index_put((nv.tensor([1, 0, 1]),), vals,
                                                             accumulate=True),
                                 [rng.standard_normal((2, 3)), rng.standard_normal((3, 3))])


# ---------------------------------------------------------------- gather and scatter

def test_gather_on_a_0d_tensor_checks_the_index_as_pytorch():
    """A 0-d input counts as one element: index 0 is valid, 5 and -1 are not (gather
    returned the value for any index)."""
    s = nv.tensor(2.0)
    assert nv.gather(s, 0, nv.tensor(0)).item() == 2.0
    for i in (5, -1):
        with pytest.raises(IndexError, match=rf"gather: index {i} is out of bounds for dim 0 "
                                             r"with size 1 \(shape \(\)\)"):
            nv.gather(s, 0, nv.tensor(i))
        with pytest.raises(nv.RealizationError, match=r"nova.gather: index values must lie "
                                                      r"in \[0, 1\)"):
            nv.gather(s, 0, nv.tensor(i) * 1).item()
    with pytest.raises(IndexError, match="gather: index -1 is out of bounds for dim 1 with "
                                         "size 3"):
        nv.zeros(2, 3).gather(1, nv.tensor([[0], [-1]]))   # gather does not wrap


def test_scatter_and_scatter_add_on_0d_and_out_of_range():
    s = nv.tensor(2.0)
    assert nv.scatter_add(s, 0, nv.tensor(0), nv.tensor(1.0)).item() == 3.0   # was a crash
    assert s.scatter(0, nv.tensor(0), 7.0).item() == 7.0
    with pytest.raises(IndexError, match="scatter_add: index 1 is out of bounds for dim 0"):
        nv.scatter_add(s, 0, nv.tensor(1), nv.tensor(1.0))
    with pytest.raises(IndexError, match="scatter: index -1 is out of bounds for dim 1 with "
                                         "size 3"):
        nv.zeros(2, 3).scatter(1, nv.tensor([[-1]]), 1.0)


def test_scatter_add_of_bools_is_a_logical_or_on_every_engine():
    """The compiled kernel added i1 values (True + True = False); the interpreter and
    PyTorch give True."""
    flags = nv.scatter_add(nv.zeros(2, dtype=nv.bool), 0, nv.tensor([0, 0]),
                           nv.tensor([True, True]))
    assert flags.tolist() == [True, False]


def test_scatter_last_update_in_index_order_wins():
    x = nv.zeros(3, 2)
    idx = nv.tensor([[0, 1], [0, 1], [2, 1]])
    src = nv.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    assert x.scatter(0, idx, src).tolist() == [[3.0, 0.0], [0.0, 6.0], [5.0, 0.0]]
    assert x.scatter(0, idx * 1, src).tolist() == [[3.0, 0.0], [0.0, 6.0], [5.0, 0.0]]
    assert nv.zeros(2, 3).scatter(1, nv.tensor([[2, 2], [0, 1]]), -1.0).tolist() == [
        [0.0, 0.0, -1.0], [-1.0, -1.0, 0.0]]


def test_index_put_and_scatter_are_also_functions_as_in_torch():
    x = nv.zeros(4)
    assert nv.index_put(x, (nv.tensor([1, 1]),), nv.tensor([2.0, 3.0])).tolist() == \
        [0.0, 3.0, 0.0, 0.0]                       # one write wins: the last, as numpy
    assert nv.index_put(x, (nv.tensor([1, 1]),), nv.tensor([2.0, 3.0]),
                        accumulate=True).tolist() == [0.0, 5.0, 0.0, 0.0]
    assert nv.scatter(x, 0, nv.tensor([0, 2]), 7.0).tolist() == [7.0, 0.0, 7.0, 0.0]


def test_boolean_mask_assignment_of_a_shared_value_is_a_where():
    """``x[mask] = v`` has x's static shape when every selected element gets the same
    value: a scalar, or a value broadcastable to the dims after the mask's."""
    a = np.array([[1.0, -2.0, 3.0], [-4.0, 5.0, -6.0]], np.float32)
    x = nv.tensor(a)
    x[x < 0] = 0
    np.testing.assert_array_equal(x.numpy(), np.where(a < 0, 0, a))
    rows = np.arange(12.0, dtype=np.float32).reshape(4, 3)
    y = nv.tensor(rows)
    keep = np.array([True, False, True, False])
    y[nv.tensor(keep)] = nv.tensor([7.0, 8.0, 9.0])          # one row value for each row
    want = rows.copy()
    want[keep] = [7.0, 8.0, 9.0]
    np.testing.assert_array_equal(y.numpy(), want)
    z = nv.tensor(rows.T.copy())
    z[:, keep] = nv.tensor([-1.0])                             # a 1-element value, after ':'
    want = rows.T.copy()
    want[:, keep] = -1.0
    np.testing.assert_array_equal(z.numpy(), want)
    i = nv.tensor(np.arange(6).reshape(2, 3))
    # a 2-D mask as an array, cast to int64 (a nested list would be a tuple of per-dim
    # masks, as PyTorch reads it: ``as_index_tuple``)
    i[np.array([[True, False, True], [False, True, False]])] = 2.7
    np.testing.assert_array_equal(i.numpy(), [[2, 1, 2], [3, 2, 5]])


def test_boolean_mask_assignment_is_differentiable_and_writes_through_views():
    w = nv.tensor(np.array([1.0, -1.0, 2.0], np.float32), requires_grad=True)
    v = w * 3
    v[v < 0] = 0.0
    v.sum().backward()
    np.testing.assert_array_equal(w.grad.numpy(), [3.0, 0.0, 3.0])
    base = nv.tensor(np.arange(-3.0, 3.0, dtype=np.float32).reshape(2, 3))
    row = base[1]
    row[row > 1] = -9.0
    np.testing.assert_array_equal(base.numpy(), [[-3, -2, -1], [0, 1, -9]])


def test_boolean_mask_assignment_takes_one_value_per_selected_element():
    y = nv.zeros(4, 3)
    mask = nv.tensor([True, False, True, False])
    y[mask] = nv.tensor(np.arange(6.0, dtype=np.float32).reshape(2, 3))   # read on the host
    want = np.zeros((4, 3), np.float32)
    want[[0, 2]] = np.arange(6.0).reshape(2, 3)
    np.testing.assert_array_equal(y.numpy(), want)
    np.testing.assert_array_equal(y[mask].numpy(), want[[0, 2]])
    with pytest.raises(ValueError, match=r"__setitem__: shapes \(3, 3\) and \(2, 3\) cannot "
                                         r"be broadcast together"):
        y[mask] = nv.ones(3, 3)
    with pytest.raises(IndexError, match=r"the shape of the mask \(2,\) does not match the "
                                         r"indexed dims \(4,\) of tensor \(4, 3\)"):
        y[nv.tensor([True, False])] = 1.0


@pytest.mark.parametrize("where", ["first", "middle", "negative"])
def test_a_loop_writing_one_int_position_compiles_one_step_for_all(where):
    """``obs[step] = x`` (a rollout buffer) passes the position at run time: every
    position after the second runs the same step (the first differs only in that the
    zero-filled buffer is still a constant), and each write lands where numpy's does.
    Before, the position was an attribute of the step: one compile per position."""
    from nova.runtime.cache import CACHE
    rng = np.random.default_rng(0)
    width = {"first": 4, "middle": 5, "negative": 6}[where]    # a step of its own each
    buf, want = nv.zeros((6, 3, width)), np.zeros((6, 3, width), np.float32)
    nv.realize(buf)
    misses = CACHE.stats.misses
    for step in range(6):
        v = rng.standard_normal((width,) if where == "middle" else (3, width))
        v = v.astype(np.float32)          # (broadcast along dim 0 where "middle")
        index = {"first": step, "middle": (slice(None), step % 3),
                 "negative": step - 6}[where]
        buf[index] = nv.tensor(v)
        want[index] = v
        nv.realize(buf)
    assert CACHE.stats.misses - misses == 1
    np.testing.assert_array_equal(buf.numpy(), want)


def test_a_row_written_at_a_runtime_position_keeps_its_gradient():
    w = nv.tensor(np.arange(8, dtype=np.float32).reshape(4, 2), requires_grad=True)
    buf = nv.zeros((5, 2))
    for i in range(4):
        buf[i + 1] = w[i] * (i + 1)
    (buf * buf).sum().backward()
    a = np.arange(8, dtype=np.float32).reshape(4, 2)
    k = np.arange(1, 5, dtype=np.float32)[:, None]
    np.testing.assert_allclose(w.grad.numpy(), 2 * a * k * k)


def test_a_list_of_index_sequences_is_a_tuple_of_indices():
    """``x[[rows, cols]]`` is ``x[rows, cols]`` (PyTorch's and NumPy's legacy rule for
    a short list holding a tensor, a sequence, a slice, None or ...); a list of ints
    or bools is one advanced index. It used to read as one 2-D index: another
    shape, and a write into whole rows."""
    a = np.arange(24.0, dtype=np.float32).reshape(3, 2, 4)
    x = nv.tensor(a)
    rows, cols = nv.tensor([0, 2]), nv.tensor([1, 0])
    np.testing.assert_array_equal(x[[rows, cols]].numpy(), a[[0, 2], [1, 0]])
    np.testing.assert_array_equal(x[[[0, 1], [1, 0]]].numpy(), a[[0, 1], [1, 0]])
    np.testing.assert_array_equal(x[[0, slice(None)]].numpy(), a[0, :])
    np.testing.assert_array_equal(x[[None, 0]].numpy(), a[None, 0])
    np.testing.assert_array_equal(x[[..., 1]].numpy(), a[..., 1])
    np.testing.assert_array_equal(x[[0, 2]].numpy(), a[[0, 2]])          # one index
    np.testing.assert_array_equal(x[np.array([[0, 1], [1, 0]])].numpy(),
                                  a[np.array([[0, 1], [1, 0]])])          # an array: one
    m = nv.zeros(3, 3)
    m[[nv.tensor([0, 1]), nv.tensor([1, 2])]] = 1.0
    np.testing.assert_array_equal(m.numpy(), [[0, 1, 0], [0, 0, 1], [0, 0, 0]])
    idx = [nv.tensor([0, 1]), nv.tensor([2, 0])]
    m[idx] += 1.0
    np.testing.assert_array_equal(m.numpy(), [[0, 1, 1], [1, 0, 1], [0, 0, 0]])


def test_python_bools_index_as_zero_d_masks():
    """``x[True]`` adds a dim of 1 and ``x[False]`` one of 0, as PyTorch (they
    raised); among other indices too, and for writes."""
    a = np.arange(6.0, dtype=np.float32).reshape(2, 3)
    x = nv.tensor(a)
    assert x[True].shape == (1, 2, 3) and x[False].shape == (0, 2, 3)
    np.testing.assert_array_equal(x[True, 0].numpy(), a[None, 0])
    x[True] = 5.0
    np.testing.assert_array_equal(x.numpy(), np.full((2, 3), 5.0))
    x[False] = 7.0
    np.testing.assert_array_equal(x.numpy(), np.full((2, 3), 5.0))


def test_zero_d_tensors_take_dim_0_and_compare_unequal_to_none():
    """PyTorch's answers where Nova raised: a 0-d tensor's dim 0 (or -1) in ``flip`` and
    ``prod`` is itself, and ``t == None`` is False (``!=`` True), not a TypeError."""
    s = nv.tensor(3.0)
    assert s.flip(0).item() == 3.0 and s.flip(-1).item() == 3.0
    assert s.prod(0).item() == 3.0 and nv.tensor(2).prod(-1).dtype == nv.int64
    t = nv.tensor([1.0, 2.0])
    assert (t == None) is False and (t != None) is True   # noqa: E711
