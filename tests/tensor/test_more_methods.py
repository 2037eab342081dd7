"""More of ``torch.Tensor``'s surface (issue #22): in-place shape ops (``t_``,
``squeeze_``... with PyTorch's view semantics), in-place products, the complex-number API
of real tensors, storage flags, ``nanquantile``, the scatters into copies
(``masked_scatter``, ``diagonal/select/slice_scatter``, ``put``), ``histogram`` and
``matrix_exp``, against references written here (numpy, scipy), gradients by finite
differences in float64."""
import pickle
import warnings

import numpy as np
import pytest
import scipy.linalg

import nova as nv

R = np.random.default_rng(7)


# ---------------------------------------------------------------- in-place shape ops

def test_in_place_shape_ops_change_the_handle_and_keep_views_aliased():
    b = nv.arange(6.0).reshape(2, 3)
    row = b[0]                               # a view made before the shape change
    same = b.t_()
    b.add_(10.0)                             # seen by the old view, in its own shape
    row.mul_(-1.0)                           # and its writes reach b, transposed
    base = nv.arange(6.0).reshape(2, 3)
    v = base[:, :2]
    v.t_()                                   # a view transposed in place stays a view
    v.add_(100.0)
    base.mul_(2.0)
    x = nv.arange(6.0).reshape(1, 2, 3, 1)
    shapes = [x.squeeze_().shape, x.unsqueeze_(-1).shape, x.squeeze_((0, 2)).shape,
              x.transpose_(0, 1).shape, x.swapaxes_(0, 1).shape, x.swapdims_(1, 0).shape]
    nv.realize(b, row, base, v, x)
    assert same is b and b.shape == (3, 2)
    np.testing.assert_array_equal(b.numpy(), [[-10, 13], [-11, 14], [-12, 15]])
    np.testing.assert_array_equal(row.numpy(), [-10, -11, -12])
    np.testing.assert_array_equal(base.numpy(), [[200, 202, 4], [206, 208, 10]])
    np.testing.assert_array_equal(v.numpy(), [[200, 206], [202, 208]])
    assert shapes == [(2, 3), (2, 3, 1), (2, 3), (3, 2), (2, 3), (3, 2)]
    np.testing.assert_array_equal(x.numpy(), [[0, 3], [1, 4], [2, 5]])
    one, zero = nv.zeros(3), nv.zeros(())
    assert one.t_().shape == (3,) and zero.t_().shape == () and \
        zero.unsqueeze_(0).shape == (1,)


def test_in_place_shape_ops_refuse_as_pytorch_does():
    leaf = nv.zeros(2, 3, requires_grad=True)
    with pytest.raises(RuntimeError, match="unsqueeze_: a leaf tensor that requires grad"):
        leaf.unsqueeze_(0)
    with pytest.raises(RuntimeError, match="t_: a view of a leaf tensor that requires grad"):
        leaf[0:1].t_()
    with pytest.raises(ValueError, match=r"t_: expects a tensor with <= 2 dims.*\(2, 3, 4\)"):
        nv.zeros(2, 3, 4).t_()
    with pytest.raises(IndexError, match="squeeze_: dim 5 is out of range"):
        nv.zeros(2, 3).squeeze_(5)
    spread = nv.zeros(3, 1).expand(3, 4).t_()       # a transposed expand still aliases
    assert spread.shape == (4, 3)
    with pytest.raises(RuntimeError, match="add_: cannot write in place into the result of "
                                           "expand"):
        spread.add_(1.0)
    with nv.no_grad():
        held = leaf[0]
        with pytest.raises(RuntimeError, match="t_: cannot change the shape of a leaf.*views"):
            leaf.t_()
        del held
        leaf.t_()                                   # no view left: allowed, stays a leaf
    assert leaf.shape == (3, 2) and leaf.is_leaf and leaf.requires_grad


def test_in_place_shape_ops_differentiate_through_their_views():
    w = nv.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], requires_grad=True)
    a = w * 2.0
    first = a[0]
    a.t_()
    a.mul_(3.0)                                     # the old view sees it: 6 w[0]
    first.sum().backward()
    p = nv.ones(2, 3, requires_grad=True)
    with nv.no_grad():
        p.t_()
    (p * nv.arange(6.0).reshape(3, 2)).sum().backward()
    nv.realize(first, w.grad, p.grad)
    np.testing.assert_array_equal(first.numpy(), [6, 12, 18])
    np.testing.assert_array_equal(w.grad.numpy(), [[6, 6, 6], [0, 0, 0]])
    np.testing.assert_array_equal(p.grad.numpy(), np.arange(6.0).reshape(3, 2))


# ---------------------------------------------------------------- in-place products

def test_in_place_products_with_beta_and_alpha():
    m, v = R.standard_normal((2, 3)), R.standard_normal(3)
    b1, b2 = R.standard_normal((4, 2, 3)), R.standard_normal((4, 3, 2))
    s = {k: R.standard_normal(shape) for k, shape in
         dict(mm=(2, 2), mv=(2,), bmm=(4, 2, 2), addbmm=(2, 2), r=(2, 3)).items()}
    t = {k: nv.tensor(a) for k, a in s.items()}
    outs = [t["mm"].addmm_(nv.tensor(m), nv.tensor(m.T), beta=0.5, alpha=2.0),
            t["mv"].addmv_(nv.tensor(m), nv.tensor(v), alpha=-1.0),
            t["bmm"].baddbmm_(nv.tensor(b1), nv.tensor(b2), beta=0.0),
            t["addbmm"].addbmm_(nv.tensor(b1), nv.tensor(b2), beta=2.0),
            t["r"].addr_(nv.tensor(m[:, 0]), nv.tensor(v), alpha=3.0)]
    nv.realize(*outs)
    refs = [0.5 * s["mm"] + 2.0 * m @ m.T, s["mv"] - m @ v, b1 @ b2,
            2.0 * s["addbmm"] + (b1 @ b2).sum(0), s["r"] + 3.0 * np.outer(m[:, 0], v)]
    for k, out, ref in zip(s, outs, refs):
        assert out is t[k]
        np.testing.assert_allclose(out.numpy(), ref, rtol=1e-12, atol=1e-12)
    with pytest.raises(RuntimeError, match=r"addmm_: in-place result of shape \(2, 2\)"):
        nv.zeros(2, 1, dtype=nv.float64).addmm_(nv.tensor(m), nv.tensor(m.T))
    x = nv.tensor([1.0, 2.0, 0.0])
    x.nextafter_(nv.tensor([2.0, 0.0, -1.0]))
    np.testing.assert_array_equal(x.numpy(), np.nextafter(np.float32([1, 2, 0]),
                                                          np.float32([2, 0, -1])))


# ---------------------------------------------------------------- complex API, flags

def test_complex_number_api_of_real_tensors():
    x = nv.arange(6.0).reshape(2, 3)
    for same in (x.conj(), x.resolve_conj(), x.resolve_neg(), x.conj_physical(), x.real,
                 nv.conj(x), nv.resolve_conj(x), nv.resolve_neg(x), nv.real(x)):
        assert same is x
    assert not (x.is_conj() or x.is_neg() or nv.is_conj(x) or nv.is_neg(x))
    with pytest.raises(RuntimeError, match="imag is not implemented for tensors with "
                                           "non-complex dtypes"):
        x.imag
    with pytest.raises(RuntimeError, match="imag is not implemented"):
        nv.imag(x)
    batch = nv.arange(24).reshape(2, 3, 4)
    outs = [x.H, x.mH, x.mT, x.adjoint(), nv.adjoint(batch), batch.mH, nv.isreal(batch)]
    y = nv.zeros(3)
    y.real = nv.tensor([1.0, 2.0, 3.0])
    z = nv.zeros(2)
    z.real = 4.0
    nv.realize(*outs, y, z)
    for t in outs[:4]:
        np.testing.assert_array_equal(t.numpy(), np.arange(6.0).reshape(2, 3).T)
    for t in outs[4:6]:
        np.testing.assert_array_equal(t.numpy(), np.arange(24).reshape(2, 3, 4).swapaxes(1, 2))
    assert outs[6].dtype == nv.bool and outs[6].numpy().all() and outs[6].shape == (2, 3, 4)
    np.testing.assert_array_equal(y.numpy(), [1, 2, 3])
    np.testing.assert_array_equal(z.numpy(), [4, 4])
    with pytest.raises(ValueError, match=r"tensor.H is only supported on matrices.*3-D.*mH"):
        batch.H
    for get in (lambda t: t.mH, lambda t: t.mT, lambda t: t.adjoint()):
        with pytest.raises(ValueError, match="only supported on matrices or batches of "
                                             "matrices. Got 1-D"):
            get(nv.zeros(3))
    with pytest.warns(UserWarning, match="tensor.mT is deprecated on 0-D tensors"):
        assert nv.zeros(()).mT.shape == ()


def test_storage_flags_and_layout():
    x = nv.ones(2)
    assert not (x.is_sparse or x.is_sparse_csr or x.is_quantized or x.is_meta or
                x.is_nested or x.is_inference() or x.is_pinned() or x.is_shared())
    assert x.pin_memory() is x and x.share_memory_() is x
    assert x.layout is nv.strided and repr(nv.strided) == "nova.strided"
    assert isinstance(nv.strided, nv.layout)
    assert pickle.loads(pickle.dumps(nv.strided)) is nv.strided


# ---------------------------------------------------------------- reductions and activations

def test_allclose_nanquantile_hardshrink_prelu():
    a = nv.tensor([1.0, float("nan"), 3.0])
    assert a.allclose(nv.tensor([1.0, float("nan"), 3.0 + 1e-6]), equal_nan=True)
    assert not a.allclose(a) and not nv.allclose(a, a * 2, equal_nan=True)
    v = np.array([[1.0, np.nan, 3.0, 2.0, 7.0], [np.nan] * 5, [5.0, 1.0, 2.0, 8.0, -1.0]])
    qs = [0.0, 0.3, 0.6, 1.0]
    methods = ["linear", "lower", "higher", "nearest", "midpoint"]
    outs = [nv.tensor(v).nanquantile(qs, dim=1, interpolation=m) for m in methods]
    outs += [nv.nanquantile(nv.tensor(v), 0.3), nv.nanquantile(nv.tensor(v[2]), 0.5,
                                                                 keepdim=True, dim=0)]
    h = nv.tensor([-1.0, -0.5, 0.2, 0.5, 0.7])
    w = nv.tensor([0.25, -2.0])
    outs += [h.hardshrink(), nv.hardshrink(h, 0.3),
             nv.tensor([[-1.0, 2.0], [-3.0, -4.0]]).prelu(w), nv.prelu(h, nv.tensor([0.1]))]
    nv.realize(*outs)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)     # (numpy's all-NaN slice)
        for m, out in zip(methods, outs):
            np.testing.assert_allclose(out.numpy(), np.nanquantile(v, qs, axis=1, method=m),
                                       rtol=1e-15, equal_nan=True)
    np.testing.assert_allclose(outs[5].numpy(), np.nanquantile(v, 0.3), rtol=1e-15)
    np.testing.assert_array_equal(outs[6].numpy(), [2.0])
    np.testing.assert_array_equal(outs[7].numpy(), np.float32([-1, 0, 0, 0, 0.7]))
    np.testing.assert_array_equal(outs[8].numpy(), np.float32([-1, -0.5, 0, 0.5, 0.7]))
    np.testing.assert_array_equal(outs[9].numpy(), [[-0.25, 2.0], [-0.75, 8.0]])
    np.testing.assert_allclose(outs[10].numpy(), [-0.1, -0.05, 0.2, 0.5, 0.7], rtol=1e-7)
    with pytest.raises(ValueError, match=r"nanquantile: q must lie in \[0, 1\]"):
        nv.nanquantile(nv.tensor(v), 1.5)
    with pytest.raises(TypeError, match="nanquantile: input dtype must be floating point"):
        nv.nanquantile(nv.arange(3), 0.5)
    assert nv.autograd.gradcheck(lambda t: nv.nanquantile(t, [0.3, 0.8], dim=1),
                                 [np.array([[1.0, np.nan, 3.0, 2.5], [0.5, 4.0, -1.0, 2.0]])])


# ---------------------------------------------------------------- scatters into copies

def test_masked_scatter_fills_true_positions_in_order():
    x = R.standard_normal((3, 4))
    mask = np.array([True, False, True, True])           # broadcast over the rows
    src = np.arange(100.0, 112.0).reshape(2, 6)
    ref = x.copy()
    ref[np.broadcast_to(mask, x.shape)] = src.ravel()[:9]
    y = nv.tensor(x)
    same = y.masked_scatter_(nv.tensor([[True], [False], [True]]), nv.tensor(src))
    ref_in_place = x.copy()
    ref_in_place[[0, 2]] = src.ravel()[:8].reshape(2, 4)
    out = nv.tensor(x).masked_scatter(nv.tensor(mask), nv.tensor(src))
    wide = nv.masked_scatter(nv.zeros(4), nv.tensor([[True] * 4, [False, True, False, True]]),
                             nv.arange(10.0))
    none = nv.masked_scatter(nv.tensor(x), nv.zeros(3, 4, dtype=nv.bool), nv.zeros(0,
                                                                             dtype=nv.float64))
    nv.realize(y, out, wide, none)
    assert same is y
    np.testing.assert_array_equal(out.numpy(), ref)
    np.testing.assert_array_equal(y.numpy(), ref_in_place)
    np.testing.assert_array_equal(wide.numpy(), [[0, 1, 2, 3], [0, 4, 0, 5]])
    np.testing.assert_array_equal(none.numpy(), x)
    with pytest.raises(TypeError, match="masked_scatter: mask must be a bool tensor, got int64"):
        nv.tensor(x).masked_scatter(nv.tensor([1, 0, 1, 0]), nv.tensor(src))
    with pytest.raises(TypeError, match="masked_scatter: expected input and source to have "
                                        "the same dtype, got float64 and int64"):
        nv.tensor(x).masked_scatter(nv.tensor(mask), nv.arange(12))
    with pytest.raises(RuntimeError, match=r"number of elements of source \(5\) is less than "
                                           r"the number of True values in mask \(9\)"):
        nv.tensor(x).masked_scatter(nv.tensor(mask), nv.arange(5.0, dtype=nv.float64))
    assert nv.autograd.gradcheck(
        lambda a, s: a.masked_scatter(nv.tensor(mask), s), [x, src])


def test_diagonal_select_slice_scatter_and_put():
    x = np.arange(12.0).reshape(3, 4)
    outs = [nv.diagonal_scatter(nv.tensor(x), nv.tensor([-1.0, -2.0]), 2),
            nv.tensor(x).diagonal_scatter(nv.tensor([-1, -2]), -1),     # cast, as copy_
            nv.select_scatter(nv.tensor(x), nv.tensor([-1.0, -2.0, -3.0]), 1, -1),
            nv.tensor(x).slice_scatter(nv.tensor(-np.ones((3, 2))), 1, step=2),
            nv.slice_scatter(nv.tensor(x), nv.tensor(-np.ones((1, 4))), 0, -1),
            nv.tensor(x).put(nv.tensor([0, -1, 5]), nv.tensor([7.0, 8.0, 9.0], dtype=nv.float64)),
            nv.put(nv.tensor(x), nv.tensor([[0, 0], [3, 0]]),
                   nv.tensor([1.0, 2.0, 3.0, 4.0], dtype=nv.float64), accumulate=True)]
    y = nv.tensor(x)
    same = y.put_(nv.tensor([1]), nv.tensor([-5.0], dtype=nv.float64))
    nv.realize(*outs, y)
    refs = [x.copy() for _ in outs]
    refs[0][[0, 1], [2, 3]] = [-1, -2]
    refs[1][[1, 2], [0, 1]] = [-1, -2]
    refs[2][:, -1] = [-1, -2, -3]
    refs[3][:, ::2] = -1
    refs[4][-1:] = -1
    refs[5].flat[[0, -1, 5]] = [7, 8, 9]
    refs[6].flat[0] += 1 + 2 + 4
    refs[6].flat[3] += 3
    for out, ref in zip(outs, refs):
        np.testing.assert_array_equal(out.numpy(), ref)
    assert same is y and y.numpy()[0, 1] == -5
    with pytest.raises(ValueError, match=r"diagonal_scatter: expected src to have a size equal "
                                         r"to the slice of input: src has shape \(2,\), the "
                                         r"slice \(3,\)"):
        nv.diagonal_scatter(nv.tensor(x), nv.ones(2))
    with pytest.raises(IndexError, match="select_scatter: index 3 is out of range for dim 0"):
        nv.select_scatter(nv.tensor(x), nv.ones(4), 0, 3)
    with pytest.raises(ValueError, match="slice_scatter: slice step must be positive"):
        nv.slice_scatter(nv.tensor(x), nv.ones(3, 4), 1, step=0)
    with pytest.raises(TypeError, match="put: index must be an integer tensor, got float32"):
        nv.tensor(x).put(nv.tensor([0.0]), nv.tensor([1.0], dtype=nv.float64))
    with pytest.raises(IndexError, match=r"put: expected source and index to have the same "
                                         r"number of elements, got 3"):
        nv.tensor(x).put(nv.tensor([0, 1]), nv.tensor([1.0, 2.0, 3.0], dtype=nv.float64))
    with pytest.raises(TypeError, match="put: input and source must have the same dtype"):
        nv.tensor(x).put(nv.tensor([0]), nv.tensor([1]))
    assert nv.autograd.gradcheck(
        lambda a, d, r, s: nv.slice_scatter(nv.select_scatter(
            nv.diagonal_scatter(a, d, 1), r, 0, 2), s, 1, 1, 3),
        [x, np.array([0.5, -1.5, 2.0]), np.array([1.0, 2.0, 3.0, 4.0]), np.ones((3, 2))])


# ---------------------------------------------------------------- histogram

def test_histogram_against_numpy():
    data = R.standard_normal(500)
    data = data[np.abs(((data + 3) * 8) % 1 - 0.5) < 0.45]    # none near a bin edge
    weight = R.uniform(0, 1, data.shape)
    x = nv.tensor(data)
    edges = np.array([-2.0, -0.5, 0.0, 0.125, 3.0])
    outs = [nv.histogram(x, 6), x.histogram(8, range=(-3.0, 3.0), weight=nv.tensor(weight)),
            nv.histogram(x, 4, range=(-2.0, 2.0), density=True),
            nv.histogram(x, nv.tensor(edges)),
            nv.histogram(nv.tensor([1.0, 1.0, 1.0]), 4),
            nv.histogram(nv.zeros(0), 2),
            nv.histogram(nv.tensor([0.0, float("nan"), float("inf"), 1.0, 2.0]), 2)]
    nv.realize(*[t for o in outs for t in o])
    ref = [np.histogram(data, 6), np.histogram(data, 8, (-3, 3), weights=weight),
           np.histogram(data, 4, (-2, 2), density=True), np.histogram(data, edges)]
    for (hist, bin_edges), (rh, re) in zip(outs, ref):
        np.testing.assert_allclose(hist.numpy(), rh, rtol=1e-12)
        np.testing.assert_allclose(bin_edges.numpy(), re, rtol=1e-15, atol=1e-15)
    np.testing.assert_array_equal(outs[4].hist.numpy(), [0, 0, 3, 0])
    np.testing.assert_array_equal(outs[4].bin_edges.numpy(), [0.5, 0.75, 1, 1.25, 1.5])
    np.testing.assert_array_equal(outs[5].hist.numpy(), [0, 0])
    np.testing.assert_array_equal(outs[5].bin_edges.numpy(), [0, 0.5, 1])
    # NaN and inf are not counted, nor do they set the range (see the docstring)
    np.testing.assert_array_equal(outs[6].hist.numpy(), [1, 2])
    np.testing.assert_array_equal(outs[6].bin_edges.numpy(), [0, 1, 2])
    with pytest.raises(TypeError, match="histogram: input must be floating point"):
        nv.histogram(nv.arange(3), 2)
    with pytest.raises(ValueError, match="histogram: bins must be a positive int"):
        nv.histogram(x, 0)
    with pytest.raises(ValueError, match=r"histogram: min should not exceed max"):
        nv.histogram(x, 2, range=(1.0, 0.0))
    with pytest.raises(ValueError, match=r"histogram: range \[0.0, inf\] is not finite"):
        nv.histogram(x, 2, range=(0.0, float("inf")))
    with pytest.raises(TypeError, match="histogram: range cannot be given with a tensor"):
        nv.histogram(x, nv.tensor(edges), range=(0.0, 1.0))
    with pytest.raises(TypeError, match="histogram: input and bins should have the same dtype"):
        nv.histogram(x, nv.tensor(edges, dtype=nv.float32))
    with pytest.raises(ValueError, match=r"histogram: weight must have input's shape"):
        nv.histogram(x, 2, weight=nv.ones(3, dtype=nv.float64))


# ---------------------------------------------------------------- matrix_exp

def test_matrix_exp_against_scipy_and_its_gradient():
    scales = np.array([0.0, 0.05, 1.0, 7.0, 40.0])[:, None, None]
    a = np.zeros((7, 4, 4))
    a[:5] = np.random.default_rng(1).standard_normal((5, 4, 4)) * scales
    a[5, :2, :2] = [[0.0, 3.0], [-3.0, 0.0]]          # a rotation by 3 radians
    a[6] = np.diag([1e10, -1e10, 0.0, 0.0])           # a norm past the squarings: NaN
    narrow = a.astype(np.float32)
    narrow[6, 0, 0] = np.inf                          # NaN too
    outs = [nv.matrix_exp(nv.tensor(a)), nv.tensor(narrow).matrix_exp(),
            nv.matrix_exp(nv.tensor([[[2.0]]])), nv.matrix_exp(nv.zeros(2, 0, 0))]
    nv.realize(*outs)
    ref = np.stack([scipy.linalg.expm(m) for m in a[:6]])
    scale = np.abs(ref).max(axis=(1, 2), keepdims=True)
    error = np.abs(outs[0].numpy()[:6] - ref) / scale  # (scipy's own is ~1e-13 at norm 40)
    assert np.all(error[:4] <= 1e-13) and np.all(error[4] <= 2e-12) and \
        np.all(error[5] <= 1e-14)
    np.testing.assert_allclose(outs[0].numpy()[5, :2, :2], [[np.cos(3), np.sin(3)],
                                                            [-np.sin(3), np.cos(3)]],
                               rtol=1e-14, atol=1e-15)
    ref32 = np.stack([scipy.linalg.expm(m) for m in narrow[:6].astype(np.float64)])
    assert outs[1].dtype == nv.float32                 # (rounded once from float64)
    assert np.all(np.abs(outs[1].numpy()[:6] - ref32) <= 1e-7 * np.abs(ref32).max(
        axis=(1, 2), keepdims=True))
    assert np.isnan(outs[0].numpy()[6]).all() and np.isnan(outs[1].numpy()[6]).all()
    np.testing.assert_array_equal(outs[2].numpy(), np.float32(np.exp([[[2.0]]])))
    assert outs[3].shape == (2, 0, 0)
    with pytest.raises(ValueError, match=r"matrix_exp: A must be a square matrix.*\(2, 3\)"):
        nv.matrix_exp(nv.zeros(2, 3))
    with pytest.raises(TypeError, match="matrix_exp: expected a floating point tensor, got "
                                        "int64"):
        nv.matrix_exp(nv.zeros(2, 2, dtype=nv.int64))
    assert nv.autograd.gradcheck(nv.matrix_exp, [np.array([[0.3, -1.2], [0.8, 0.5]])])


@pytest.mark.parametrize("engine", ["cpu"], indirect=True)      # (one engine is enough)
def test_matches_torch_where_installed(engine):
    torch = pytest.importorskip("torch")
    b, tb = nv.arange(6.0).reshape(2, 3), torch.arange(6.0).reshape(2, 3)
    rows = [b[0], tb[0]]
    b.t_()
    tb.t_()
    b.add_(1.0)
    tb.add_(1.0)
    rows[0].mul_(2.0)
    rows[1].mul_(2.0)
    data = R.standard_normal(300).astype(np.float32)
    for bins in (5, 12):
        ours, theirs = nv.histogram(nv.tensor(data), bins), torch.histogram(
            torch.tensor(data), bins)
        np.testing.assert_array_equal(ours.hist.numpy(), theirs.hist.numpy())
        np.testing.assert_allclose(ours.bin_edges.numpy(), theirs.bin_edges.numpy(),
                                   rtol=1e-6)
    np.testing.assert_array_equal(b.numpy(), tb.numpy())
    np.testing.assert_array_equal(rows[0].numpy(), rows[1].numpy())
    v = np.array([[1.0, np.nan, 3.0, 2.0], [4.0, 0.5, np.nan, np.nan]], dtype=np.float32)
    np.testing.assert_allclose(nv.nanquantile(nv.tensor(v), [0.2, 0.7], 1).numpy(),
                               torch.nanquantile(torch.tensor(v), torch.tensor([0.2, 0.7]),
                                                 1).numpy(), rtol=1e-7)
