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


@given(x=shapes(min_dims=1, max_dims=3).flatmap(arrays), data=st.data())
def test_advanced_setitem_matches_numpy_for_distinct_indices(x, data):
    index = data.draw(advanced_index(x.shape))
    arrays_in = [i for i in index if isinstance(i, np.ndarray)]
    dims = [d for d, i in enumerate(index) if isinstance(i, np.ndarray)]
    b = np.broadcast_arrays(*arrays_in)
    flat = np.ravel_multi_index(tuple(a % x.shape[d] for a, d in zip(b, dims)),
                                tuple(x.shape[d] for d in dims))
    if len(np.unique(flat)) != flat.size:
        return  # duplicates are undefined in PyTorch
    value = data.draw(arrays(x[index].shape, np.float32))
    t = nv.tensor(x)
    t[tuple(nv.tensor(i) if isinstance(i, np.ndarray) else i for i in index)] = nv.tensor(value)
    ref = x.copy()
    ref[index] = value
    assert_close(t, ref)


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
    ((nv.tensor([True, False, True]),), IndexError, "boolean mask indexing"),
    (("a",), IndexError, "index lists and arrays must hold integers"),
])
def test_index_errors(index, error, message):
    t = nv.zeros(3, 4)
    with pytest.raises((error, TypeError), match=message):
        t[index]


def test_out_of_range_index_tensor_fails_at_realization_naming_gather():
    t = nv.zeros(3, 4)
    bad = t[nv.tensor([0, 7])]
    good = t + 1
    with pytest.raises(nv.RealizationError, match=r"nova.gather.*\[0, 3\)"):
        bad.numpy()
    with pytest.raises(nv.RealizationError, match="nova.gather"):
        bad.numpy()  # the failure is remembered, not recomputed
    assert good.sum().item() == 12.0  # other pending work is unaffected
