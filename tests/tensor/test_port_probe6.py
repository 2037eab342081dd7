"""Regressions from a comparison of tensor semantics with PyTorch (port probe 6):
``to(copy=True)``, gradients of median/quantile/max/min at NaN and ties, ``cdist``'s
gradient for ``p=inf`` ties and ``p=0``, result dtypes and shapes of a few ops, and
writes through a boolean mask (``x[mask] += v``, ``x[1:3, mask] = 0``,
``index_put_((mask,), v)``). References are formulas or numpy; torch only checks
again where it is installed."""
import math

import numpy as np
import pytest

import nova as nv

NAN, INF = math.nan, math.inf


def test_to_copy_gives_a_new_tensor_and_to_without_change_gives_self():
    x = nv.tensor([1.0, 2.0], requires_grad=True)
    copies = [x.to(nv.float32, copy=True), x.to(copy=True), x.to(x, copy=True)]
    assert all(c is not x for c in copies)
    assert x.to(nv.float32) is x and x.to("cpu") is x and x.to(x) is x
    assert x.to(nv.float32, False, True) is not x and x.to(nv.float32, False) is x
    with pytest.raises(TypeError, match="at most two positional flags"):
        x.to(nv.float32, False, True, True)
    with nv.no_grad():
        y, z = x.to(nv.float32, copy=True), x.clone()
        y.add_(1.0)
        z.mul_(10.0)
    w = nv.tensor(np.array([1.0, 2.0], np.float32))
    u = nv.tensor(w)                                   # nv.tensor copies, as torch.tensor
    u.add_(5.0)
    (copies[0] * 3.0).sum().backward()                 # the copy is differentiable
    nv.realize(x, y, z, w, x.grad)
    np.testing.assert_array_equal(x.numpy(), [1.0, 2.0])
    np.testing.assert_array_equal(y.numpy(), [2.0, 3.0])
    np.testing.assert_array_equal(z.numpy(), [10.0, 20.0])
    np.testing.assert_array_equal(w.numpy(), [1.0, 2.0])
    np.testing.assert_array_equal(x.grad.numpy(), [3.0, 3.0])


# name -> (function, input, expected value, expected gradient). The rules, as PyTorch's:
# a reduction over a dim routes the gradient to the returned index (median: the first
# NaN of a slice holding one; quantile: its last NaN, the last element of the stable
# sort); a reduction of the whole tensor (median, nanmedian, max, min) shares it evenly
# among the elements equal to the result, or among the NaNs when that is NaN.
_A = [[1.0, 3.0, NAN, 2.0, 0.0], [2.0, 2.0, 2.0, 1.0, 1.0]]
_ONE_HOT_ROWS = [[0, 0, 1, 0, 0], [1, 0, 0, 0, 0]]
_REDUCTIONS = {
    "median(dim)": (lambda x: x.median(1)[0], _A, [NAN, 2.0], _ONE_HOT_ROWS),
    "quantile": (lambda x: x.quantile(0.5, dim=1), _A, [NAN, 2.0], _ONE_HOT_ROWS),
    "quantile NaNs": (lambda x: x.quantile(0.3), [1.0, NAN, 3.0, NAN],
                      NAN, [0, 0, 0, 1]),
    "median() NaN": (lambda x: x.median(), _A, NAN, [[0, 0, 1, 0, 0], [0] * 5]),
    "median() ties": (lambda x: x.median(), [1.0, 1.0, 1.0], 1.0, [1 / 3] * 3),
    "median() inf ties": (lambda x: x.median(), [INF, INF, 1.0], INF, [0.5, 0.5, 0]),
    "nanmedian() ties": (lambda x: x.nanmedian(), [NAN, 2.0, 2.0, 1.0, 2.0], 2.0,
                         [0, 1 / 3, 1 / 3, 0, 1 / 3]),
    "nanmedian() all NaN": (lambda x: x.nanmedian(), [NAN, NAN], NAN, [0.5, 0.5]),
    "max() NaNs": (lambda x: x.max(), [NAN, 1.0, NAN], NAN, [0.5, 0, 0.5]),
    "min() -inf ties": (lambda x: x.min(), [3.0, -INF, -INF], -INF, [0, 0.5, 0.5]),
    "max() -0 ties": (lambda x: x.max(), [-0.0, -1.0, -0.0], -0.0, [0.5, 0, 0.5]),
}


def test_median_quantile_max_min_gradients_at_nan_and_ties():
    leaves = {k: nv.tensor(v[1], dtype=nv.float64, requires_grad=True)
              for k, v in _REDUCTIONS.items()}
    outs = {k: v[0](leaves[k]) for k, v in _REDUCTIONS.items()}
    sum(o.sum() for o in outs.values()).backward()
    nv.realize(*outs.values(), *(t.grad for t in leaves.values()))
    for k, (_, _, value, grad) in _REDUCTIONS.items():
        np.testing.assert_array_equal(outs[k].numpy(), value, err_msg=k)
        assert np.signbit(outs[k].numpy()).tolist() == np.signbit(value).tolist(), k
        np.testing.assert_allclose(leaves[k].grad.numpy(), grad, rtol=1e-15, err_msg=k)
    torch = pytest.importorskip("torch")
    for k, (fn, data, _, grad) in _REDUCTIONS.items():
        if k == "max() -0 ties":
            continue
        t = torch.tensor(data, dtype=torch.float64, requires_grad=True)
        fn(t).sum().backward()
        np.testing.assert_allclose(t.grad.numpy(), grad, rtol=1e-15, err_msg=k)


def test_median_without_grad_and_of_integers_is_unchanged():
    x = nv.tensor([[3, 1, 2], [5, 5, 4]])
    values, scalar = nv.median(x, 1), nv.median(nv.tensor(3.0), 0)   # (0-d: as 1 element)
    nv.realize(values.values, values.indices, scalar.values, scalar.indices)
    np.testing.assert_array_equal(values.values.numpy(), [2, 5])
    np.testing.assert_array_equal(values.indices.numpy(), [2, 0])
    assert scalar.values.shape == () and (scalar.values.item(), scalar.indices.item()) == (3, 0)
    assert nv.median(x).item() == 3 and x.max().item() == 5


def _chebyshev_grad(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """PyTorch's cdist(p=inf) gradient of the sum of distances: sign(a_i - b_j) at every
    coordinate where |a_i - b_j| reaches the distance (ties each take all of it)."""
    d = a[:, None, :] - b[None, :, :]
    at_max = np.abs(d) == np.abs(d).max(-1, keepdims=True)
    g = np.sign(d) * at_max
    return g.sum(1), -g.sum(0)


def test_cdist_inf_gives_every_tied_coordinate_the_whole_gradient_and_p0_zeros():
    a = np.array([[0.0, 1.0], [3.0, 1.0], [0.5, 0.5]])
    b = np.array([[1.0, 2.0], [0.0, 0.0], [0.5, 0.5]])
    x1, x2 = (nv.tensor(v, requires_grad=True) for v in (a, b))
    y1, y2 = (nv.tensor(v, requires_grad=True) for v in (a, b))
    inf, zero = nv.cdist(x1, x2, p=INF), nv.cdist(y1, y2, p=0)
    (inf.sum() + zero.sum()).backward()
    nv.realize(inf, zero, x1.grad, x2.grad, y1.grad, y2.grad)
    d = a[:, None, :] - b[None, :, :]
    np.testing.assert_array_equal(inf.numpy(), np.abs(d).max(-1))
    np.testing.assert_array_equal(zero.numpy(), (d != 0).sum(-1))
    g1, g2 = _chebyshev_grad(a, b)
    np.testing.assert_array_equal(x1.grad.numpy(), g1)
    np.testing.assert_array_equal(x2.grad.numpy(), g2)
    np.testing.assert_array_equal(y1.grad.numpy(), np.zeros((3, 2)))
    np.testing.assert_array_equal(y2.grad.numpy(), np.zeros((3, 2)))
    assert nv.autograd.gradcheck(lambda p, q: nv.cdist(p, q, p=INF),
                                 (nv.tensor([[0.0, 1.5]], dtype=nv.float64,
                                            requires_grad=True),
                                  nv.tensor([[1.0, 2.0], [0.3, 0.2]], dtype=nv.float64,
                                            requires_grad=True)))


def test_result_dtypes_and_shapes():
    i32 = nv.tensor([3, -3], dtype=nv.int32)
    flags = nv.tensor([True, False])
    acm = nv.addcmul(nv.tensor([1, 2], dtype=nv.int32), flags, nv.tensor([True, True]),
                     value=2)
    truncated = nv.addcmul(i32, i32, nv.tensor([1, 1], dtype=nv.int32), value=-2.7)
    half = nv.addcmul(nv.tensor([1.0], dtype=nv.float16), nv.tensor([2.0]), nv.tensor(3.0))
    emb = nv.diag_embed(flags)
    empty_diag = nv.block_diag()
    took = nv.take_along_dim(nv.arange(4.0), nv.tensor([-1, -4, 2]), dim=0)
    took2 = nv.take_along_dim(nv.arange(6.0).reshape(2, 3), nv.tensor([[-1], [-3]]), 1)
    took_flat = nv.take_along_dim(nv.arange(4.0).reshape(2, 2), nv.tensor([-1, 0]))
    computed = nv.take_along_dim(nv.arange(4.0), nv.tensor([1, 2, 3]) - 5, dim=0)
    nv.realize(acm, truncated, half, emb, empty_diag, took, took2, took_flat, computed)
    assert (acm.dtype, truncated.dtype, half.dtype) == (nv.int32, nv.int32, nv.float32)
    np.testing.assert_array_equal(acm.numpy(), [3, 2])
    np.testing.assert_array_equal(truncated.numpy(), [3 - 2 * 3, -3 + 2 * 3])  # int(-2.7)
    np.testing.assert_array_equal(half.numpy(), [7.0])
    assert emb.dtype == nv.bool
    np.testing.assert_array_equal(emb.numpy(), [[True, False], [False, False]])
    assert empty_diag.shape == (1, 0) and empty_diag.dtype == nv.float32
    np.testing.assert_array_equal(took.numpy(), [3.0, 0.0, 2.0])
    np.testing.assert_array_equal(took2.numpy(), [[2.0], [3.0]])
    np.testing.assert_array_equal(took_flat.numpy(), [3.0, 0.0])
    np.testing.assert_array_equal(computed.numpy(), [0.0, 1.0, 2.0])
    with pytest.raises(IndexError, match=r"take_along_dim: index -5 is out of bounds for "
                                         r"dim 0 with size 4"):
        nv.take_along_dim(nv.arange(4.0), nv.tensor([-5]), dim=0)
    with pytest.raises(TypeError, match="take_along_dim: indices must be int32 or int64"):
        nv.take_along_dim(nv.arange(4.0), nv.tensor([1.0]), dim=0)
    chunks = nv.zeros(0, 3).chunk(2)
    assert [c.shape for c in chunks] == [(0, 3), (0, 3)]
    assert [c.shape for c in nv.zeros(5, 3).chunk(2)] == [(3, 3), (2, 3)]
    x = nv.arange(6.0)
    assert [p.shape for p in nv.tensor_split(x, nv.tensor(3))] == [(2,)] * 3
    assert [p.shape for p in nv.tensor_split(x, nv.tensor([1, 4]))] == [(1,), (3,), (2,)]
    with pytest.raises(TypeError, match=r"tensor_split: .* 0-d or 1-D int64 tensor, got "
                                        r"float32 of shape \(\)"):
        nv.tensor_split(x, nv.tensor(3.0))


def test_masked_in_place_arithmetic_and_masked_writes_are_wheres():
    a = np.array([-1.0, 2.0, -3.0], np.float32)
    x = nv.tensor(a)
    x[x < 0] += 10
    s = nv.tensor(a)
    m = s > 0
    s[m] -= nv.tensor([0.5])
    s[m] *= 4
    s[m] /= nv.tensor(2.0, dtype=nv.float64)          # 0-d: keeps float32
    g = np.arange(12.0, dtype=np.float32).reshape(3, 4)
    cols = np.array([True, False, True, False])
    y = nv.tensor(g)
    y[1:3, nv.tensor(cols)] -= nv.tensor([[1.0], [2.0]])  # a value per row of the window
    k = nv.tensor(np.arange(6).reshape(2, 3))
    k[[True, False]] //= 2                              # a list mask, an int tensor
    z = nv.ones(3, 3)
    z[1:3, nv.tensor([True, False, True])] = 0
    p = nv.tensor([1.0, -2.0]).index_put_((nv.tensor([True, False]),), nv.tensor(0.0))
    q = nv.index_put(nv.tensor([1.0, -2.0]), (nv.tensor([False, True]),), nv.tensor(5.0),
                     accumulate=True)
    src, dst = nv.tensor(g), nv.zeros(3, 4)
    sel = src > 5
    dst[sel] = src[sel]                                 # the same mask: a where
    w = nv.tensor([-1.0, 4.0, 9.0], requires_grad=True)
    v = w * 1.0
    v[v > 0] **= 0.5                                    # no NaN from the left-out -1
    v.sum().backward()
    nv.realize(x, s, y, k, z, p, q, dst, w.grad)
    np.testing.assert_array_equal(x.numpy(), np.where(a < 0, a + 10, a))
    assert s.dtype == nv.float32
    np.testing.assert_array_equal(s.numpy(), np.where(a > 0, (a - 0.5) * 4 / 2, a))
    want = g.copy()
    want[1:3][:, cols] -= np.array([[1.0], [2.0]], np.float32)
    np.testing.assert_array_equal(y.numpy(), want)
    np.testing.assert_array_equal(k.numpy(), [[0, 0, 1], [3, 4, 5]])
    np.testing.assert_array_equal(z.numpy(), [[1, 1, 1], [0, 1, 0], [0, 1, 0]])
    np.testing.assert_array_equal(p.numpy(), [0.0, -2.0])
    np.testing.assert_array_equal(q.numpy(), [1.0, 3.0])
    np.testing.assert_array_equal(dst.numpy(), np.where(g > 5, g, 0))
    np.testing.assert_allclose(w.grad.numpy(), [1.0, 0.5 / 2.0, 0.5 / 3.0], rtol=1e-6)


def test_a_mask_read_is_an_ordinary_tensor_and_augmented_updates_take_any_value():
    """``x[m]`` outside ``x[m] op= v`` reads the mask on the host and is a tensor (it was
    refused); ``x[m] += v`` with one value per selected element reads it too."""
    x = nv.tensor([1.0, 2.0, 3.0])
    m = x > 1
    assert x[m].shape == (2,)
    np.testing.assert_array_equal((x[m] + 1).numpy(), [3.0, 4.0])
    assert x[m].sum().item() == 5.0
    other = nv.tensor([0.0, 0.0, 0.0])
    other[x > 1] = x[m]                                  # another mask object: a scatter
    np.testing.assert_array_equal(other.numpy(), [0.0, 2.0, 3.0])
    x[m] += nv.tensor([10.0, 20.0])                      # one value per element
    np.testing.assert_array_equal(x.numpy(), [1.0, 12.0, 23.0])
    with pytest.raises(ValueError, match=r"add: shapes \(2,\) and \(3,\) cannot be "
                                         r"broadcast together"):
        x[m] += nv.tensor([1.0, 2.0, 3.0])
    with pytest.raises(RuntimeError, match="add_: result type float32 can't be cast"):
        i = nv.tensor([1, 2, 3])
        i[i > 1] += 1.5
    with pytest.raises(IndexError, match=r"the shape of the mask \(2,\) does not match"):
        x[nv.tensor([True, False])] += 1
    np.testing.assert_array_equal(nv.zeros(3, 3)[m, nv.tensor([0])].numpy(), [0.0, 0.0])


def test_amax_of_a_slice_holding_nan_has_a_nan_gradient_and_ties_share():
    """PyTorch's (g / count) * mask: a slice whose maximum is NaN gets NaN gradients (it
    got a silent 0), tied maxima share the gradient."""
    x = nv.tensor([[1.0, 3.0, np.nan], [2.0, 2.0, 1.0]], dtype=nv.float64, requires_grad=True)
    x.amax(1).sum().backward()
    got = x.grad.numpy()
    assert np.isnan(got[0]).all()
    np.testing.assert_array_equal(got[1], [0.5, 0.5, 0.0])
