"""``nova.tensor.compat``: factory methods, conversions by example, layout queries,
aliases, the generated in-place forms and the random fills, against numpy and the
definitions PyTorch documents."""
import math

import numpy as np
import pytest

import nova as nv
from nova.tensor import compat


def test_new_factories_take_dtype_and_device_from_self():
    x = nv.tensor([[1, 2], [3, 4]], dtype=nv.int32)
    z, o, f, e = x.new_zeros(2, 3), x.new_ones((1, 2)), x.new_full((2,), 7), x.new_empty(3)
    t = x.new_tensor([1.5, 2.5])
    g = x.new_zeros(2, dtype=nv.float64, requires_grad=True)
    assert [a.dtype for a in (z, o, f, e, t, g)] == [nv.int32] * 5 + [nv.float64]
    assert (z.shape, o.shape, f.shape, e.shape) == ((2, 3), (1, 2), (2,), (3,))
    assert f.tolist() == [7, 7] and t.tolist() == [1, 2] and e.tolist() == [0, 0, 0]
    assert g.requires_grad and g.is_leaf


def test_conversions_by_example_and_layout_queries():
    x = nv.arange(6.0).reshape(2, 3)
    i = nv.tensor([1], dtype=nv.int32)
    assert x.type_as(i).dtype == nv.int32
    assert x.view_as(nv.zeros(3, 2)).shape == (3, 2)
    assert x.reshape_as(nv.zeros(6)).tolist() == [0, 1, 2, 3, 4, 5]
    assert nv.broadcast_to(nv.tensor([1, 2]), (3, -1)).shape == (3, 2)
    assert nv.broadcast_shapes((2, 1), (3,), 1) == (2, 3)
    with pytest.raises(ValueError, match="broadcast_shapes"):
        nv.broadcast_shapes((2,), (3,))
    # no observable layout: everything reads as contiguous, strides row-major
    assert x.t().is_contiguous() and x.stride() == (3, 1) and x.stride(0) == 3
    assert nv.zeros(2, 0, 4).stride() == (4, 4, 1) and x.storage_offset() == 0
    assert (x.nelement(), x.ndimension(), x.itemsize, x.nbytes) == (6, 2, 4, 24)
    assert x.is_cpu and not x.is_complex() and x.is_signed() and not nv.tensor(True).is_signed()
    assert x.get_device() == -1 and x.is_same_size(nv.ones(2, 3))
    assert nv.tensor([2.0]).is_nonzero() and not nv.tensor(0).is_nonzero()
    with pytest.raises(RuntimeError, match="ambiguous"):
        x.is_nonzero()
    assert nv.equal(x, x.clone()) and not nv.equal(x, x.t()) and x.equal(x)
    assert not nv.equal(nv.tensor([math.nan]), nv.tensor([math.nan]))


def test_aliases_are_the_same_functions():
    a, b = nv.tensor([1.0, -2.0, 3.5]), nv.tensor([2.0, 2.0, 2.0])
    pairs = [(nv.multiply, nv.mul), (nv.subtract, nv.sub), (nv.true_divide, nv.div),
             (nv.greater, nv.gt), (nv.less_equal, nv.le), (nv.not_equal, nv.ne)]
    for alias, op in pairs:
        assert alias(a, b).tolist() == op(a, b).tolist()
    for alias, name in compat.ALIASES.items():
        assert getattr(nv.Tensor, alias) is getattr(nv.Tensor, name)
    assert a.negative().tolist() == [-1, 2, -3.5] and a.absolute().tolist() == [1, 2, 3.5]
    assert a.fix().tolist() == [1, -2, 3] and a.sgn().tolist() == [1, -1, 1]
    assert nv.positive(a) is a and nv.rsub(a, 10, alpha=2).tolist() == [8, 14, 3]
    with pytest.raises(TypeError, match="positive"):
        nv.positive(nv.tensor([True]))
    m = nv.arange(6).reshape(2, 3)
    assert nv.fliplr(m).tolist() == [[2, 1, 0], [5, 4, 3]]
    assert nv.flipud(m).tolist() == [[3, 4, 5], [0, 1, 2]]
    assert nv.swapdims(m, 0, 1).shape == (3, 2) and nv.concat([m, m]).shape == (4, 3)
    assert m.sum_to_size(1, 3).tolist() == [[3, 5, 7]] and m.sum_to_size(2, 1).tolist() == [[3], [12]]
    assert m.sum_to_size(3).tolist() == [3, 5, 7]
    with pytest.raises(RuntimeError, match="sum_to_size"):
        m.sum_to_size(2, 2)
    assert [t.shape for t in m.split_with_sizes([1, 2], 1)] == [(2, 1), (2, 2)]
    assert m.where(m > 2, -1).tolist() == [[-1, -1, -1], [3, 4, 5]]
    assert nv.scalar_tensor(3).dtype == nv.float32 and nv.scalar_tensor(3).ndim == 0
    assert nv.result_type(nv.tensor([1]), 2.5) == nv.float32
    assert nv.result_type(nv.tensor([1], dtype=nv.int32), nv.tensor(1)) == nv.int32


def test_as_tensor_keeps_a_tensor_and_asarray_copies_when_asked():
    x = nv.tensor([1.0, 2.0])
    assert nv.as_tensor(x) is x and nv.as_tensor(x, dtype=nv.float64).dtype == nv.float64
    assert nv.as_tensor([1, 2]).dtype == nv.int64
    y = nv.asarray(x, requires_grad=True)
    assert y.requires_grad and y is not x and not x.requires_grad
    assert nv.asarray(np.array([1, 2], np.int32)).dtype == nv.int32


def test_every_generated_in_place_form_matches_its_function_and_writes_through_views():
    assert all(hasattr(nv.Tensor, n + "_") for n in compat.INPLACE_OF)
    base = np.array([[0.5, -1.25, 2.0], [3.0, 0.25, -0.75]], np.float32)
    for name, args in [("exp", ()), ("sigmoid", ()), ("clamp_min", (0.0,)), ("pow", (2,)),
                       ("lerp", (nv.ones(3), 0.5)), ("lt", (0.3,)),
                       ("nan_to_num", ()), ("remainder", (0.7,))]:
        x = nv.tensor(base)
        want = getattr(nv.tensor(base[1]), name)(*args).numpy().astype(np.float32)
        row = x[1]
        assert getattr(row, name + "_")(*args) is row
        np.testing.assert_array_equal(x.numpy()[1], want)
        np.testing.assert_array_equal(x.numpy()[0], base[0])
    i = nv.tensor([1, 2, 3])
    with pytest.raises(RuntimeError, match="sigmoid_"):
        i.sigmoid_()                      # a float result cannot be written to int64
    w = nv.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError, match="exp_"):
        w.exp_()
    v = nv.tensor([7, 9])
    v //= 2
    v %= 3
    v **= 2
    v |= 8
    v ^= 1
    v &= 14
    assert v.tolist() == [8, 8]
    x = nv.tensor([[1.0, 2.0], [3.0, 4.0]])
    row = x[0]
    row //= 1.5
    assert x.tolist() == [[0.0, 1.0], [3.0, 4.0]]


def test_in_place_forms_differentiate_like_their_functions():
    x = nv.tensor([0.5, -1.0, 2.0], requires_grad=True)
    y = x * 1.0
    y.tanh_()
    y.mul_(3)
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 3 * (1 - np.tanh([0.5, -1.0, 2.0]) ** 2),
                               rtol=1e-6)


def _moments(t):
    a = t.numpy().astype(np.float64)
    return a.mean(), a.std()


def test_random_fills_have_their_distributions_and_repeat_with_a_generator():
    n = 40_000
    se = 5 / math.sqrt(n)             # five standard errors of a unit-variance mean
    fills = [nv.zeros(n).normal_(2.0, 3.0), nv.zeros(n).uniform_(-1.0, 3.0),
             nv.zeros(n).bernoulli_(0.3), nv.zeros(n).exponential_(2.0),
             nv.zeros(n).geometric_(0.25), nv.zeros(n).log_normal_(0.0, 0.5),
             nv.zeros(n, dtype=nv.int64).random_(3, 7), nv.zeros(n).cauchy_(1.0, 2.0)]
    nv.realize(*fills)
    normal, uniform, bern, expo, geom, lognorm, ints, cauchy = fills
    m, s = _moments(normal)
    assert abs(m - 2) < 3 * se and abs(s - 3) < 0.1
    m, s = _moments(uniform)
    assert abs(m - 1) < 2 * se and abs(s - 4 / math.sqrt(12)) < 0.02
    assert uniform.numpy().min() >= -1 and uniform.numpy().max() < 3
    assert abs(_moments(bern)[0] - 0.3) < se and set(np.unique(bern.numpy())) == {0.0, 1.0}
    assert abs(_moments(expo)[0] - 0.5) < se and expo.numpy().min() >= 0
    g = geom.numpy()
    assert abs(g.mean() - 4) < 10 * se and g.min() == 1 and np.all(g == np.round(g))
    assert abs(_moments(lognorm)[0] - math.exp(0.125)) < 2 * se
    assert set(np.unique(ints.numpy())) == {3, 4, 5, 6} and ints.dtype == nv.int64
    assert abs(np.median(cauchy.numpy()) - 1.0) < 0.05
    a = nv.zeros(5).normal_(generator=nv.Generator(7))
    b = nv.zeros(5).normal_(generator=nv.Generator(7))
    assert a.tolist() == b.tolist()
    p = nv.tensor([0.0, 1.0, 0.0, 1.0])
    assert nv.bernoulli(p).tolist() == [0, 1, 0, 1] and p.bernoulli().dtype == nv.float32
    with pytest.raises(ValueError, match="random_"):
        nv.zeros(3).random_()
    with pytest.raises(TypeError, match="normal_"):
        nv.zeros(3, dtype=nv.int64).normal_()
    with pytest.raises(ValueError, match="bernoulli_"):
        nv.zeros(3).bernoulli_(1.5)
    # probabilities outside [0, 1] (or NaN) in host memory raise, as PyTorch's (they
    # were clamped: 1.5 always drew 1)
    for bad, shown in (([1.5, 0.5], "1.5"), ([0.2, -0.5], "-0.5"), ([0.2, np.nan], "nan")):
        with pytest.raises(ValueError, match=f"bernoulli: every probability must be in "
                                             f"\\[0, 1\\], got {shown} in p of shape"):
            nv.bernoulli(nv.tensor(bad))
    with pytest.raises(ValueError, match="got 2.0"):
        nv.zeros(2).bernoulli_(nv.tensor([0.5, 2.0]))
    assert nv.bernoulli(nv.tensor([0.3, 0.7]) * 1.0).shape == (2,)      # computed: unread


def test_fill_diagonal_as_numpy():
    for shape, wrap in [((3, 3), False), ((5, 3), False), ((7, 3), True), ((3, 5), True),
                        ((3, 3, 3), False)]:
        want = np.zeros(shape, np.float32)
        np.fill_diagonal(want, 2.5, wrap=wrap)
        got = nv.zeros(*shape).fill_diagonal_(2.5, wrap=wrap)
        np.testing.assert_array_equal(got.numpy(), want)
    with pytest.raises(ValueError, match="fill_diagonal_"):
        nv.zeros(2, 3, 4).fill_diagonal_(1)


def test_scatter_in_place_takes_pytorchs_older_reduce():
    idx = nv.tensor([[0, 1], [2, 2]])
    assert nv.ones(2, 3).scatter_(1, idx, nv.full((2, 2), 2.0), reduce="add").tolist() == [
        [3.0, 3.0, 1.0], [1.0, 1.0, 5.0]]
    assert nv.zeros(2, 3).scatter_(1, nv.tensor([[0], [2]]), value=5.0, reduce="add").tolist() \
        == [[5.0, 0.0, 0.0], [0.0, 0.0, 5.0]]
    # (every update multiplies: the duplicates at [1, 2] give 3 * 2 * 2)
    assert nv.full((2, 3), 3.0).scatter_(1, idx, 2.0, reduce="multiply").tolist() == [
        [6.0, 6.0, 3.0], [3.0, 3.0, 12.0]]


def test_the_legacy_new_constructor():
    x = nv.ones(2, dtype=nv.float64)
    assert x.new(2, 3).shape == (2, 3) and x.new(2, 3).dtype == nv.float64
    assert x.new(x.shape).shape == (2,)                  # a shape (Nova's are tuples)
    assert x.new(nv.Size([2, 2])).tolist() == [[0.0, 0.0], [0.0, 0.0]]
    assert x.new().shape == (0,)
    data = x.new([1, 2])
    assert data.dtype == nv.float64 and data.tolist() == [1.0, 2.0]
    same = nv.zeros(3, dtype=nv.float64)
    assert x.new(same) is same
    with pytest.raises(TypeError, match="new: expected a tensor of dtype float64, got int64"):
        x.new(nv.tensor([1, 2]))
