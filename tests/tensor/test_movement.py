"""Movement ops against numpy."""
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import nova as nv
from nova.core.errors import ShapeError
from tests.helpers import arrays, assert_close, shapes

arrays_any = shapes(min_dims=1).flatmap(arrays)


@given(x=arrays_any, data=st.data())
def test_reshape_and_view_with_minus_one(x, data):
    t = nv.tensor(x)
    flat = t.reshape(-1)
    assert_close(flat, x.reshape(-1))
    assert_close(t.view(x.size), x.reshape(x.size))
    target = data.draw(st.permutations(list(x.shape)))
    assert_close(t.reshape(*target), x.reshape(target))
    assert_close(nv.reshape(t, (1, -1)), x.reshape(1, -1))


@given(x=arrays_any, data=st.data())
def test_permute_transpose_T(x, data):
    t = nv.tensor(x)
    perm = data.draw(st.permutations(range(x.ndim)))
    assert_close(t.permute(*perm), np.transpose(x, perm))
    assert_close(t.permute(perm), np.transpose(x, perm))
    a, b = data.draw(st.integers(-x.ndim, x.ndim - 1)), data.draw(st.integers(-x.ndim, x.ndim - 1))
    assert_close(t.transpose(a, b), np.swapaxes(x, a, b))
    assert_close(t.T, x.T)


@given(x=arrays_any, data=st.data())
def test_squeeze_unsqueeze_flatten(x, data):
    t = nv.tensor(x)
    d = data.draw(st.integers(-x.ndim - 1, x.ndim))
    assert_close(t.unsqueeze(d), np.expand_dims(x, d))
    assert_close(t.unsqueeze(d).squeeze(d), x)
    assert_close(t.squeeze(), np.squeeze(x))
    s, e = sorted(data.draw(st.lists(st.integers(0, x.ndim - 1), min_size=2, max_size=2)))
    assert_close(t.flatten(s, e), x.reshape(x.shape[:s] + (-1,) + x.shape[e + 1:]))


@given(x=shapes(max_dims=3, max_side=3).flatmap(arrays), data=st.data())
def test_expand_and_broadcast(x, data):
    extra = tuple(data.draw(st.lists(st.integers(1, 3), max_size=2)))
    target = extra + tuple(data.draw(st.sampled_from([n, 3])) if n == 1 else n for n in x.shape)
    assert_close(nv.tensor(x).expand(*target), np.broadcast_to(x, target))
    assert_close(nv.tensor(x).expand(*([-1] * 0), *target), np.broadcast_to(x, target))


@given(x=shapes(min_dims=1, max_dims=3).flatmap(arrays), data=st.data())
def test_cat_stack_split_chunk(x, data):
    d = data.draw(st.integers(-x.ndim, x.ndim - 1))
    t = nv.tensor(x)
    assert_close(nv.cat([t, t * 2], dim=d), np.concatenate([x, x * 2], axis=d))
    assert_close(nv.stack([t, t + 1], dim=d), np.stack([x, x + 1], axis=d))
    size = data.draw(st.integers(1, 4))
    parts = t.split(size, dim=d)
    n = x.shape[d]
    ref = np.split(x, list(range(size, n, size)), axis=d)
    assert len(parts) == len(ref)
    for p, r in zip(parts, ref):
        assert_close(p, r)
    chunks = data.draw(st.integers(1, 4))
    got = nv.chunk(t, chunks, d)
    assert_close(nv.cat(list(got), d), x)
    assert len(got) <= chunks


def test_split_with_sections_and_cat_promotes():
    t = nv.arange(10)
    a, b, c = t.split([2, 3, 5])
    assert (a.tolist(), b.tolist(), c.tolist()) == ([0, 1], [2, 3, 4], [5, 6, 7, 8, 9])
    mixed = nv.cat([nv.tensor([1, 2]), nv.tensor([0.5])])
    assert mixed.dtype == nv.float32 and mixed.tolist() == [1.0, 2.0, 0.5]


def test_cat_leaves_out_one_dim_empty_tensors_as_pytorch():
    """The accumulator idiom: ``out = nv.tensor([])`` then ``out = nv.cat([out, batch])``.
    The empty (0,) tensor is skipped beside tensors of more dims (its dtype still
    counts), joins other 1-D tensors as usual, and all-empty gives (0,)."""
    rows = np.arange(6, dtype=np.int64).reshape(2, 3)
    out = nv.tensor([])
    for _ in range(2):
        out = nv.cat([out, nv.tensor(rows)])
    assert out.dtype == nv.float32 and out.tolist() == np.concatenate([rows, rows]).tolist()
    assert nv.cat([nv.tensor(rows), nv.tensor([])], dim=-1).shape == (2, 3)
    assert nv.cat([nv.tensor([]), nv.ones(3)]).shape == (3,)
    assert nv.cat([nv.tensor([]), nv.tensor([])]).shape == (0,)
    w = nv.ones(2, 3, requires_grad=True)
    (nv.cat([nv.tensor([]), w]) * 2).sum().backward()
    assert w.grad.tolist() == [[2.0] * 3] * 2
    with pytest.raises(ShapeError, match="cat: tensor 1 has shape"):
        nv.cat([nv.zeros(0, 2), nv.ones(2, 3)])         # only (0,) is skipped
    with pytest.raises(ShapeError, match="cat: tensor 1 has shape"):
        nv.cat([nv.ones(2), nv.ones(2, 3)])


@pytest.mark.parametrize("op", [
    lambda x: nv.cat([x]), lambda x: nv.cat([x], 1), lambda x: nv.stack([x]),
    lambda x: nv.hstack([x]), lambda x: nv.vstack([x]), lambda x: nv.dstack([x]),
    lambda x: nv.column_stack([x]), lambda x: nv.block_diag(x), lambda x: nv.roll(x, 0, 0),
    lambda x: nv.roll(x, (3, 0), (0, 1)), lambda x: x.cummax(0).values,
    lambda x: x.cummin(0).indices, lambda x: nv.logcumsumexp(x, 0)])
def test_ops_that_move_nothing_still_return_a_new_tensor(op):
    """Regression: ``cat`` of one tensor returned it (``stack([x])`` a view of it),
    ``roll`` by 0 (or by a multiple of the size) returned ``x``, and ``cummax`` /
    ``cummin`` / ``logcumsumexp`` over a size-1 dim returned views of ``x``: an in-place
    write into the result changed ``x``. PyTorch's results are new tensors."""
    x = nv.tensor([[2.0, 3.0, 4.0]])
    out = op(x)
    out.fill_(5)
    assert x.tolist() == [[2.0, 3.0, 4.0]]
    assert (out == 5).all().item()


def test_tril_triu_one_hot_gather():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    for k in (-1, 0, 2):
        assert_close(nv.tril(nv.tensor(x), k), np.tril(x, k))
        assert_close(nv.tensor(x).triu(k), np.triu(x, k))
    assert nv.one_hot(nv.tensor([2, 0, 1])).tolist() == [[0, 0, 1], [1, 0, 0], [0, 1, 0]]
    assert nv.one_hot(nv.tensor([1]), 4).dtype == nv.int64
    idx = np.array([[0, 2], [3, 1], [2, 2]])
    assert_close(nv.gather(nv.tensor(x), 1, nv.tensor(idx)), np.take_along_axis(x, idx, 1))
    idx0 = np.array([[2, 0, 1, 0]])
    assert_close(nv.tensor(x).gather(0, nv.tensor(idx0)), np.take_along_axis(x, idx0, 0))
    # PyTorch's sparse_grad keyword: accepted, the gradient dense either way
    xs = nv.tensor(x, requires_grad=True)
    nv.gather(xs, 1, nv.tensor(idx), sparse_grad=True).sum().backward()
    want = np.zeros_like(x)
    np.add.at(want, (np.arange(3)[:, None], idx), 1)
    assert_close(xs.grad, want)
    assert_close(nv.tensor(x).gather(1, nv.tensor(idx), sparse_grad=False),
                 np.take_along_axis(x, idx, 1))


def test_scatter_add_matches_numpy():
    base = np.zeros((3, 4), np.float32)
    idx = np.array([[0, 1, 2, 0], [2, 2, 0, 1]])
    src = np.arange(8, dtype=np.float32).reshape(2, 4)
    ref = base.copy()
    np.add.at(ref, (idx, np.arange(4)[None, :].repeat(2, 0)), src)
    assert_close(nv.scatter_add(nv.tensor(base), 0, nv.tensor(idx), nv.tensor(src)), ref)


def test_arange_linspace_eye_repeat():
    assert nv.arange(5).tolist() == [0, 1, 2, 3, 4]
    assert nv.arange(1, 7, 2).tolist() == [1, 3, 5]
    assert_close(nv.arange(0, 1, 0.25), np.arange(0, 1, 0.25, dtype=np.float32))
    assert nv.arange(0, 1, 0.25).dtype == nv.float32
    assert_close(nv.linspace(0, 1, 5), np.linspace(0, 1, 5, dtype=np.float32))
    assert_close(nv.eye(3, 2), np.eye(3, 2, dtype=np.float32))
    x = np.arange(6).reshape(2, 3)
    assert_close(nv.tensor(x).repeat(2, 1, 2), np.tile(x, (2, 1, 2)))


@pytest.mark.parametrize("call,error,message", [
    (lambda t: t.reshape(5, 5), ValueError, r"reshape: shape \(5, 5\) \(25 elements\) is invalid "
                                            r"for input of shape \(2, 3, 4\) \(24 elements\)"),
    (lambda t: t.view(-1, -1), ValueError, "only one dimension can be -1"),
    (lambda t: t.permute(0, 1), ValueError, r"permute: dims \(0, 1\) are not a permutation"),
    (lambda t: t.transpose(0, 3), IndexError, r"transpose: dim 3 is out of range for a tensor "
                                              r"of shape \(2, 3, 4\) with 3 dims"),
    (lambda t: t.expand(3, 3, 4), ValueError, r"expand: the size of dim 0 \(2\) must match"),
    (lambda t: nv.cat([t, nv.zeros(2, 4, 4)], 0), ValueError,
     r"cat: tensor 1 has shape \(2, 4, 4\), which does not match \(2, 3, 4\) outside dim 0"),
    (lambda t: nv.stack([t, nv.zeros(2, 3)]), ValueError, "stack: expects each tensor"),
    (lambda t: t.split([1, 1], 1), ValueError, r"split: sections \[1, 1\] must be non-negative and sum to 3"),
    (lambda t: t.sum(5), IndexError, "sum: dim 5 is out of range"),
    (lambda t: t.softmax(-4), IndexError, "softmax: dim -4 is out of range"),
    (lambda t: t.gather(1, nv.zeros(2, 3, 4)), TypeError, "gather: index must be int32 or int64"),
    (lambda t: nv.tril(nv.zeros(3)), ValueError, r"tril: input must have at least 2 dims"),
])
def test_movement_errors(call, error, message):
    with pytest.raises(error, match=message):
        call(nv.zeros(2, 3, 4))


FACTORS = st.lists(st.sampled_from([1, 2, 3, 4, 6]), min_size=1, max_size=4)


@given(FACTORS, st.randoms(use_true_random=False), st.booleans())
def test_reshape_inside_a_fused_kernel_regroups_dims(factors, rnd, transpose_first):
    """A reshape fused into an elementwise kernel maps its index group by group (dims
    with equal element counts on both sides); every split, merge and unit dim against
    numpy, with a transposed source too (a reshape that must gather)."""
    src_shape = tuple(factors)
    a = np.arange(np.prod(src_shape), dtype=np.float32).reshape(src_shape)
    x = nv.tensor(a)
    if transpose_first and a.ndim > 1:
        a, x = a.T, x.permute(*reversed(range(a.ndim)))
    pieces = list(factors)
    rnd.shuffle(pieces)
    dst_shape = tuple(pieces) + (1,) * rnd.randint(0, 1)
    got = (x.reshape(dst_shape) * 2.0 + 1.0).numpy()
    np.testing.assert_array_equal(got, a.reshape(dst_shape) * 2.0 + 1.0)


def test_reshape_that_splits_leading_dims_needs_no_division(fresh_cache):
    """(32, 24) -> (4, 8, 24) plus a bias, as after a linear layer's folded product: the
    kernel maps {4, 8} <- {32} and passes the innermost index through, so its LLVM IR
    has no remainder or division (which would keep the innermost loop scalar)."""
    from nova.runtime.cache import CACHE
    from nova.runtime.kernel_cache import KERNELS
    rng = np.random.default_rng(0)
    flat = rng.standard_normal((32, 24)).astype(np.float32)
    bias = rng.standard_normal(24).astype(np.float32)
    with nv.engine("cpu"):
        out = nv.tensor(flat).reshape(4, 8, 24) + nv.tensor(bias)
        np.testing.assert_array_equal(out.numpy(), flat.reshape(4, 8, 24) + bias)
        (plan,) = CACHE.last._program.plans
        ir = KERNELS.llvm_ir(plan)
    assert "urem" not in ir and "udiv" not in ir


def test_resize_keeps_row_major_elements_and_refuses_shared_storage():
    """``resize_``: a reshape in place when the count is kept (a view of the tensor sees
    the new layout, as PyTorch's shared storage), the elements cut or followed by zeros
    otherwise; changing the count under a view is refused."""
    x = nv.arange(6.0)
    x.resize_(2, 3)
    np.testing.assert_array_equal(x.numpy(), np.arange(6.0).reshape(2, 3))
    x.resize_(4)
    np.testing.assert_array_equal(x.numpy(), [0.0, 1.0, 2.0, 3.0])
    x.resize_((3, 2))
    np.testing.assert_array_equal(x.numpy(), [[0.0, 1.0], [2.0, 3.0], [0.0, 0.0]])
    assert x.resize_(0).shape == (0,)
    z = nv.ones(2, 3)
    row = z[0]
    z.resize_as_(nv.empty(3, 2))
    row.add_(1)
    np.testing.assert_array_equal(z.numpy(), [[2.0, 2.0], [2.0, 1.0], [1.0, 1.0]])
    with pytest.raises(RuntimeError, match=r"resize_: cannot change the number of elements of "
                                           r"a view or of a tensor with live views"):
        z.resize_(5)
    with pytest.raises(ValueError, match="resize_: sizes must be non-negative"):
        nv.ones(2).resize_(-1)
