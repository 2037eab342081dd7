"""Array manipulation and small linear algebra (``nova.tensor.arrays``) against numpy's
definitions of the same functions, gradients by finite differences in float64."""
import numpy as np
import pytest

import nova as nv

R = np.random.default_rng(0)
A = R.standard_normal((3, 4, 5)).astype(np.float32)


def test_prod_matches_numpy_over_dims_dtypes_and_empty_ones():
    x = nv.tensor(A)
    outs = [nv.prod(x), x.prod(1), x.prod(-1, keepdim=True), nv.prod(x, 0, dtype=nv.float64)]
    nv.realize(*outs)
    np.testing.assert_allclose(outs[0].numpy(), A.prod(), rtol=1e-5)
    np.testing.assert_allclose(outs[1].numpy(), A.prod(1), rtol=1e-5)
    np.testing.assert_allclose(outs[2].numpy(), A.prod(-1, keepdims=True), rtol=1e-5)
    assert outs[3].dtype == nv.float64
    ints = nv.tensor(np.array([[1, 2, 3], [4, 5, -6]], np.int32))
    assert ints.prod(1).dtype == nv.int64 and ints.prod(1).tolist() == [6, -120]
    assert nv.prod(nv.tensor([True, False])).tolist() == 0
    assert nv.prod(nv.zeros(0)).item() == 1.0
    assert nv.prod(nv.zeros(2, 0), 1).tolist() == [1.0, 1.0]


def test_prod_gradient_is_zero_safe():
    x = nv.tensor(np.array([[2.0, 0.0, 3.0], [1.5, -2.0, 0.5]]), requires_grad=True)
    x.prod(1).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [[0.0, 6.0, 0.0], [-1.0, 0.75, -3.0]])
    assert nv.autograd.gradcheck(lambda t: t.prod(0),
                                 (nv.tensor(R.standard_normal((3, 2)), requires_grad=True),))


def test_repeat_interleave_result_is_a_new_writable_tensor():
    """PyTorch's repeat_interleave returns a new tensor: writing into it works and leaves
    the input alone (it was built as a view of an expand, which refuses writes)."""
    for r, dim in ((1, 0), (2, 0), (3, None), (2, 1)):
        x = nv.tensor([[1.0, 2.0], [3.0, 4.0]])
        t = x.repeat_interleave(r, dim)
        expected = np.repeat(np.array([[1.0, 2.0], [3.0, 4.0]]), r, dim)
        t[0] = 9.0
        expected[0] = 9.0
        np.testing.assert_array_equal(t.numpy(), expected)
        assert x.tolist() == [[1.0, 2.0], [3.0, 4.0]]


def test_masked_fill_broadcasts_the_tensor_to_a_larger_mask():
    """Out of place, PyTorch broadcasts the tensor and the mask together (a (3,) row
    filled by a (2, 3) mask gives (2, 3)); in place the mask must fit the tensor."""
    x = nv.tensor([1.0, 2.0, 3.0])
    mask = nv.tensor([[True, False, True], [False, False, True]])
    assert x.masked_fill(mask, 0.0).tolist() == [[0.0, 2.0, 0.0], [1.0, 2.0, 0.0]]
    assert nv.masked_fill(x, mask, nv.tensor(-1.0)).tolist() == [[-1.0, 2.0, -1.0],
                                                                 [1.0, 2.0, -1.0]]
    col = nv.tensor([[1], [2]])
    assert col.masked_fill(nv.tensor([True, False, True]), 7).tolist() == [[7, 1, 7],
                                                                           [7, 2, 7]]
    with pytest.raises(ValueError, match=r"masked_fill_: mask of shape \(2, 3\) cannot be "
                                         r"broadcast to the tensor's shape \(3,\)"):
        x.masked_fill_(mask, 0.0)
    assert x.tolist() == [1.0, 2.0, 3.0]


def test_roll_diff_tile_and_repeat_interleave():
    x = nv.tensor(A)
    np.testing.assert_array_equal(nv.roll(x, 2, 1).numpy(), np.roll(A, 2, 1))
    np.testing.assert_array_equal(x.roll((-1, 7), (0, 2)).numpy(), np.roll(A, (-1, 7), (0, 2)))
    np.testing.assert_array_equal(nv.roll(x, 5).numpy(), np.roll(A, 5))
    np.testing.assert_allclose(nv.diff(x).numpy(), np.diff(A), rtol=1e-6)
    np.testing.assert_allclose(nv.diff(x, 2, 0).numpy(), np.diff(A, 2, 0), rtol=1e-6)
    pre = nv.tensor(A[:, :, :1])
    np.testing.assert_allclose(nv.diff(x, prepend=pre).numpy(),
                               np.diff(A, prepend=A[:, :, :1]), rtol=1e-6)
    assert nv.diff(nv.tensor([True, True, False])).tolist() == [False, True]
    np.testing.assert_array_equal(nv.tile(x, (2,)).numpy(), np.tile(A, 2))
    np.testing.assert_array_equal(x.tile((2, 1, 1, 1)).numpy(), np.tile(A, (2, 1, 1, 1)))
    np.testing.assert_array_equal(x.repeat_interleave(2, 1).numpy(), np.repeat(A, 2, 1))
    np.testing.assert_array_equal(nv.repeat_interleave(x, 3).numpy(), np.repeat(A, 3))
    np.testing.assert_array_equal(nv.repeat_interleave(x, [1, 0, 2], dim=0).numpy(),
                                  np.repeat(A, [1, 0, 2], 0))
    counts = nv.tensor([1, 2, 3]) * 1                       # pending: read on the host
    np.testing.assert_array_equal(nv.repeat_interleave(x, counts, 0).numpy(),
                                  np.repeat(A, [1, 2, 3], 0))
    assert nv.repeat_interleave(nv.tensor([2, 0, 1])).tolist() == [0, 0, 2]
    with pytest.raises(ValueError, match="one non-negative count per element of dim 0"):
        nv.repeat_interleave(x, nv.tensor([1, -2, 3]), 0)
    with pytest.raises(ValueError, match="one non-negative count per element of dim 0"):
        nv.repeat_interleave(x, [1, 2], 0)


def test_moving_dims_grids_stacks_and_splits():
    x = nv.tensor(A)
    np.testing.assert_array_equal(nv.movedim(x, 0, -1).numpy(), np.moveaxis(A, 0, -1))
    np.testing.assert_array_equal(x.moveaxis((0, 1), (2, 0)).numpy(),
                                  np.moveaxis(A, (0, 1), (2, 0)))
    a, b = np.arange(3.0, dtype=np.float32), np.arange(4.0, dtype=np.float32)
    for indexing in ("ij", "xy"):
        got = nv.meshgrid(nv.tensor(a), nv.tensor(b), indexing=indexing)
        for g, w in zip(got, np.meshgrid(a, b, indexing=indexing)):
            np.testing.assert_array_equal(g.numpy(), w)
    v, m = nv.tensor(a), nv.tensor(A[0])
    np.testing.assert_array_equal(nv.hstack([v, v]).numpy(), np.hstack([a, a]))
    np.testing.assert_array_equal(nv.vstack([v, v]).numpy(), np.vstack([a, a]))
    np.testing.assert_array_equal(nv.dstack([m, m]).numpy(), np.dstack([A[0], A[0]]))
    np.testing.assert_array_equal(nv.column_stack([v, v]).numpy(), np.column_stack([a, a]))
    assert nv.atleast_2d(nv.tensor(1.0)).shape == (1, 1)
    assert nv.atleast_3d(v).shape == (1, 3, 1) and nv.atleast_3d(m).shape == (4, 5, 1)
    for got, want in zip(nv.tensor_split(x, 3, 2), np.array_split(A, 3, 2)):
        np.testing.assert_array_equal(got.numpy(), want)
    for got, want in zip(x.tensor_split([1, -1], 1), np.split(A, [1, 3], 1)):
        np.testing.assert_array_equal(got.numpy(), want)
    assert [t.shape for t in nv.hsplit(m, 5)] == [(4, 1)] * 5
    assert [t.shape for t in nv.vsplit(m, [1])] == [(1, 5), (3, 5)]
    with pytest.raises(ValueError, match="vsplit: attempted to split along dimension 0, but "
                                         "the size of the dimension 4 is not divisible by "
                                         "the split_size 3"):
        nv.vsplit(m, 3)
    with pytest.raises(ValueError, match="hsplit: .* split_size 0"):
        nv.hsplit(m, 0)
    with pytest.raises(ValueError, match=r"vsplit: requires a tensor with at least 2 "
                                         r"dimensions, but got a tensor with 1"):
        nv.vsplit(nv.ones(4), 2)
    with pytest.raises(ValueError, match="hsplit: requires a tensor with at least 1 dimension,"):
        nv.hsplit(nv.tensor(1.0), 1)
    np.testing.assert_array_equal(nv.select(x, 1, -1).numpy(), A[:, -1])
    np.testing.assert_array_equal(x.ravel().numpy(), A.ravel())


def test_diagonals_and_triangle_indices():
    m = R.standard_normal((4, 6)).astype(np.float32)
    x = nv.tensor(m)
    for k in (0, 2, -1, 5, -3, 7):
        np.testing.assert_array_equal(nv.diagonal(x, k).numpy(), np.diagonal(m, k))
        np.testing.assert_array_equal(nv.diag(x, k).numpy(), np.diag(m, k))
    np.testing.assert_array_equal(nv.diagonal(nv.tensor(A), 1, 0, 2).numpy(),
                                  np.diagonal(A, 1, 0, 2))
    v = np.array([1.0, -2.0, 3.0], np.float32)
    for k in (0, 1, -2):
        np.testing.assert_array_equal(nv.diag(nv.tensor(v), k).numpy(), np.diag(v, k))
    assert nv.trace(x).item() == pytest.approx(float(np.trace(m)), rel=1e-6)
    np.testing.assert_array_equal(nv.tril_indices(4, 3, -1).numpy(),
                                  np.stack(np.tril_indices(4, -1, 3)))
    np.testing.assert_array_equal(nv.triu_indices(3, 5, 1).numpy(),
                                  np.stack(np.triu_indices(3, 1, 5)))
    assert nv.autograd.gradcheck(lambda t: nv.diagonal(t, 1),
                                 (nv.tensor(R.standard_normal((3, 4)), requires_grad=True),))


def test_products_and_selections():
    a, b = R.standard_normal(4).astype(np.float32), R.standard_normal(3).astype(np.float32)
    m = R.standard_normal((3, 4)).astype(np.float32)
    ta, tb, tm = nv.tensor(a), nv.tensor(b), nv.tensor(m)
    np.testing.assert_allclose(nv.outer(ta, tb).numpy(), np.outer(a, b), rtol=1e-6)
    assert nv.dot(ta, ta).item() == pytest.approx(float(a @ a), rel=1e-5)
    assert nv.dot(nv.tensor([1, 2]), nv.tensor([3, 4])).tolist() == 11
    np.testing.assert_allclose(nv.mv(tm, ta).numpy(), m @ a, rtol=1e-5)
    np.testing.assert_allclose(nv.kron(tm, nv.tensor(m[:2, :2])).numpy(),
                               np.kron(m, m[:2, :2]), rtol=1e-6)
    idx = nv.tensor([2, 0, 2])
    np.testing.assert_array_equal(nv.index_select(nv.tensor(A), 1, idx).numpy(),
                                  A[:, [2, 0, 2]])
    order = np.argsort(A, 2)
    np.testing.assert_array_equal(nv.take_along_dim(nv.tensor(A), nv.tensor(order), 2).numpy(),
                                  np.take_along_axis(A, order, 2))
    np.testing.assert_array_equal(nv.take_along_dim(nv.tensor(A), nv.tensor([3, 0])).numpy(),
                                  A.ravel()[[3, 0]])
    base = nv.tensor(np.full((3, 3), np.nan, np.float32))
    np.testing.assert_allclose(nv.addmm(base, tm, tm.T, beta=0, alpha=2.0).numpy(),
                               2 * m @ m.T, rtol=1e-5)                # beta=0 drops its NaNs
    np.testing.assert_allclose(nv.addmm(nv.ones(3), tm, tm.T, beta=0.5).numpy(),
                               0.5 + m @ m.T, rtol=1e-5)
    with pytest.raises(ValueError, match="dot: 1-D tensors must have the same size"):
        nv.dot(ta, tb)


def test_searching_and_paired_statistics():
    bounds = nv.tensor([1.0, 3.0, 5.0])
    values = np.array([0.0, 1.0, 2.0, 3.0, 6.0], np.float32)
    for right in (False, True):
        side = "right" if right else "left"
        want = np.searchsorted([1.0, 3.0, 5.0], values, side=side)
        np.testing.assert_array_equal(nv.bucketize(nv.tensor(values), bounds, right=right).numpy(),
                                      want)
        np.testing.assert_array_equal(nv.searchsorted(bounds, nv.tensor(values), side=side)
                                      .numpy(), want)
    rows = nv.tensor([[1.0, 2.0, 3.0], [10.0, 20.0, 30.0]])
    assert nv.searchsorted(rows, nv.tensor([[2.5], [25.0]])).tolist() == [[2], [2]]
    assert nv.bucketize(2.0, bounds, out_int32=True).dtype == nv.int32
    x = nv.tensor(A)
    var, mean = nv.var_mean(x, 1)
    np.testing.assert_allclose(var.numpy(), A.var(1, ddof=1), rtol=1e-5)
    np.testing.assert_allclose(mean.numpy(), A.mean(1), rtol=1e-5, atol=1e-7)
    lo, hi = x.aminmax(dim=0)
    np.testing.assert_array_equal(lo.numpy(), A.min(0))
    np.testing.assert_array_equal(hi.numpy(), A.max(0))
    assert nv.numel(x) == A.size and nv.is_tensor(x) and nv.is_floating_point(x)
    assert nv.clone(x).tolist() == x.tolist() and not nv.detach(x).requires_grad


def test_index_add_copy_and_fill():
    x = np.zeros((3, 4), np.float32)
    src = np.arange(6, dtype=np.float32).reshape(3, 2)
    idx = np.array([3, 3])
    got = nv.index_add(nv.tensor(x), 1, nv.tensor(idx), nv.tensor(src), alpha=2.0).numpy()
    want = x.copy()
    np.add.at(want, (slice(None), idx), 2 * src)
    np.testing.assert_array_equal(got, want)                  # repeated indices accumulate
    got = nv.tensor(x).index_copy(0, nv.tensor([2, 0]), nv.tensor(np.ones((2, 4), np.float32)))
    np.testing.assert_array_equal(got.numpy(), [[1] * 4, [0] * 4, [1] * 4])
    got = nv.tensor(A).index_fill(2, nv.tensor([4, 0]), -1.0).numpy()
    want = A.copy()
    want[:, :, [4, 0]] = -1.0
    np.testing.assert_array_equal(got, want)
    with pytest.raises(ValueError, match=r"index_add: source must have shape \(3, 2\)"):
        nv.index_add(nv.tensor(x), 1, nv.tensor(idx), nv.tensor(src.T))


def test_cross_rot90_block_diag_and_cartesian_products():
    a, b = R.standard_normal((4, 3)).astype(np.float32), R.standard_normal((4, 3)).astype(np.float32)
    np.testing.assert_allclose(nv.cross(nv.tensor(a), nv.tensor(b), 1).numpy(),
                               np.cross(a, b), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(nv.cross(nv.tensor(a.T), nv.tensor(b.T)).numpy(),
                               np.cross(a, b).T, rtol=1e-5, atol=1e-6)     # first dim of 3
    for k in range(-1, 5):
        np.testing.assert_array_equal(nv.rot90(nv.tensor(A), k, (1, 2)).numpy(),
                                      np.rot90(A, k, (1, 2)))
    blocks = [np.ones((2, 2), np.float32), np.array([5.0, 6.0], np.float32),
              np.array(7.0, np.float32)]
    want = np.zeros((4, 5), np.float32)
    want[:2, :2], want[2, 2:4], want[3, 4] = 1.0, [5.0, 6.0], 7.0
    np.testing.assert_array_equal(nv.block_diag(*[nv.tensor(t) for t in blocks]).numpy(), want)
    got = nv.cartesian_prod(nv.tensor([1, 2]), nv.tensor([3, 4, 5])).tolist()
    assert got == [[1, 3], [1, 4], [1, 5], [2, 3], [2, 4], [2, 5]]


def test_quantile_of_a_0d_tensor_along_its_dim():
    """Regression: quantile/nanquantile of a 0-d tensor with ``dim=0`` or ``-1`` raised
    IndexError (``tuple index out of range``); PyTorch returns the value, 0-d."""
    x = nv.tensor(2.5)
    got = [nv.quantile(x, 0.3, dim=-1), nv.quantile(x, 0.3, dim=0, keepdim=True),
           nv.nanquantile(x, 0.7, dim=0, interpolation="higher"),
           nv.quantile(x, [0.25, 0.75], dim=0)]
    assert [tuple(g.shape) for g in got] == [(), (), (), (2,)]
    assert [g.tolist() for g in got] == [2.5, 2.5, 2.5, [2.5, 2.5]]
    with pytest.raises(IndexError):
        nv.quantile(x, 0.3, dim=1)


def test_median_quantile_and_trapezoid():
    x = nv.tensor(A)
    assert nv.median(x).item() == np.sort(A.ravel())[(A.size - 1) // 2]
    values, indices = x.median(1)
    lower = np.sort(A, 1)[:, (A.shape[1] - 1) // 2]
    np.testing.assert_array_equal(values.numpy(), lower)
    np.testing.assert_array_equal(np.take_along_axis(A, indices.numpy()[:, None], 1)[:, 0], lower)
    nan = float("nan")
    holes = nv.tensor([[1.0, nan, 3.0, 0.5], [2.0, 1.0, nan, nan], [1.0, 2.0, 3.0, 4.0]])
    values, indices = holes.median(1)                # NaN wins, at its first position
    np.testing.assert_array_equal(values.numpy(), [nan, nan, 2.0])
    assert indices.tolist() == [1, 2, 1] and np.isnan(nv.median(holes).item())
    for method in ("linear", "lower", "higher", "nearest", "midpoint"):
        np.testing.assert_allclose(nv.quantile(x, 0.3, 2, interpolation=method).numpy(),
                                   np.quantile(A, 0.3, 2, method=method), rtol=1e-6)
    np.testing.assert_allclose(nv.quantile(x, [0.0, 0.5, 1.0], 0, keepdim=True).numpy(),
                               np.quantile(A, [0.0, 0.5, 1.0], 0, keepdims=True), rtol=1e-6)
    assert np.isnan(nv.quantile(nv.tensor([1.0, np.nan, 3.0]), 0.1).item())
    # the rank in the input's dtype, as PyTorch: 1/6 of 3 is 0.5 in float32 (nearest
    # rounds to even: the value at 0), 0.50000000000000001 -> 0.5 in float64 as well
    four = np.array([0.0, 1.0, 2.0, 3.0])
    for dtype in (nv.float32, nv.float64):
        got = nv.quantile(nv.tensor(four, dtype=dtype), nv.tensor([1 / 6], dtype=dtype),
                          interpolation="nearest")
        assert got.tolist() == [0.0], dtype
    # linear at a rank float32 rounds to a whole number (1/3 of 3 is 1.0000000298 in
    # float64, 1.0 in float32): the value there, not a blend with the next
    third = np.float32(1 / 3) * np.float32(3)
    got = nv.quantile(nv.tensor(four, dtype=nv.float32), 1 / 3, interpolation="linear")
    assert got.item() == np.float32(third)
    np.testing.assert_allclose(nv.trapezoid(x, dx=0.5).numpy(), np.trapezoid(A, dx=0.5),
                               rtol=1e-5, atol=1e-6)
    pts = np.array([0.0, 0.5, 2.0, 2.5, 4.0], np.float32)
    np.testing.assert_allclose(nv.trapz(x, nv.tensor(pts)).numpy(), np.trapezoid(A, pts),
                               rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(nv.logspace(0, 3, 4).numpy(), [1, 10, 100, 1000])
