"""``F.fractional_max_pool2d/3d`` and ``nn.FractionalMaxPool2d/3d`` against a numpy
reference of PyTorch's CPU kernel (its interval generation from ``_random_samples``
in the input's dtype, its window loop ``val > max || isnan(val)``), their gradients,
and PyTorch's errors. Most cases run on the interpreter (Python-level logic, no
compiles); one runs compiled."""
import itertools

import ml_dtypes
import numpy as np
import pytest

import nova as nv
import nova.nn.functional as F

RNG = np.random.default_rng(3)


def _intervals(u, n, o, k, dtype):
    """PyTorch's ``generate_intervals<scalar_t>``, every op in ``dtype``."""
    seq = np.zeros(o, np.int64)
    if o > 1:
        alpha = dtype(dtype(n - k) / dtype(o - 1))
        for i in range(o - 1):
            seq[i] = int(dtype(dtype(dtype(i) + dtype(u)) * alpha)) - \
                int(dtype(dtype(u) * alpha))
    if o > 0:
        seq[o - 1] = n - k
    return seq


def _reference(x, kernel, out, samples, dtype=np.float32):
    """Values and flat indices as PyTorch's kernel loops: per plane the starts per dim
    (2-D: sample 1 the height's, sample 0 the width's; 3-D: samples in dim order), then
    per window the first maximum in row-major order or the last NaN."""
    nd = len(kernel)
    spatial = x.shape[2:]
    order = (1, 0) if nd == 2 else (0, 1, 2)
    vals = np.zeros(x.shape[:2] + tuple(out), x.dtype)
    idx = np.zeros(x.shape[:2] + tuple(out), np.int64)
    for n, c in itertools.product(range(x.shape[0]), range(x.shape[1])):
        starts = [_intervals(samples[n, c, order[d]], spatial[d], out[d], kernel[d], dtype)
                  for d in range(nd)]
        for pos in itertools.product(*(range(o) for o in out)):
            best, best_i = -np.inf, None
            for off in itertools.product(*(range(k) for k in kernel)):
                coord = tuple(starts[d][pos[d]] + off[d] for d in range(nd))
                v = x[(n, c) + coord]
                flat = int(np.ravel_multi_index(coord, spatial))
                if best_i is None:
                    best_i = flat
                if v > best or np.isnan(v):
                    best, best_i = v, flat
            vals[(n, c) + pos], idx[(n, c) + pos] = best, best_i
    return vals, idx


@pytest.mark.parametrize("shape,kernel,out", [
    ((2, 3, 9, 11), (2, 3), (5, 7)),
    ((1, 2, 7, 7), (3, 3), (5, 5)),       # overlapping windows
    ((1, 1, 10, 6), (1, 2), (10, 2)),     # a kernel of 1: every row a window
    ((2, 1, 6, 5), (2, 2), (1, 4)),       # one output row: the last interval only
])
def test_2d_matches_the_kernel_reference(shape, kernel, out):
    x = RNG.standard_normal(shape).astype(np.float32)
    s = RNG.random(shape[:2] + (2,)).astype(np.float32)
    with nv.engine("interp"):
        v, i = F.fractional_max_pool2d(nv.tensor(x), kernel, output_size=out,
                                       return_indices=True, _random_samples=nv.tensor(s))
        v2, i2 = F.fractional_max_pool2d_with_indices(nv.tensor(x), kernel, out,
                                                      _random_samples=nv.tensor(s))
        v, i, v2, i2 = v.numpy(), i.numpy(), v2.numpy(), i2.numpy()
    rv, ri = _reference(x, kernel, out, s)
    np.testing.assert_array_equal(v, rv)
    np.testing.assert_array_equal(i, ri)
    np.testing.assert_array_equal(v2, rv)
    np.testing.assert_array_equal(i2, ri)
    assert i.dtype == np.int64


def test_3d_and_unbatched_and_output_ratio():
    x = RNG.standard_normal((2, 9, 8, 10)).astype(np.float32)      # (C, T, H, W)
    s = RNG.random((1, 2, 3)).astype(np.float32)
    with nv.engine("interp"):
        v, i = F.fractional_max_pool3d(nv.tensor(x), (2, 3, 2), output_ratio=(0.5, 0.6, 0.5),
                                       return_indices=True, _random_samples=nv.tensor(s))
        assert v.shape == (2, 4, 4, 5) and i.shape == (2, 4, 4, 5)
        v, i = v.numpy(), i.numpy()
        v3 = F.fractional_max_pool3d_with_indices(nv.tensor(x), 2, (6, 6, 7),
                                                  _random_samples=nv.tensor(s))[0].numpy()
    rv, ri = _reference(x[None], (2, 3, 2), (4, 4, 5), s)
    np.testing.assert_array_equal(v, rv[0])
    np.testing.assert_array_equal(i, ri[0])
    np.testing.assert_array_equal(v3, _reference(x[None], (2, 2, 2), (6, 6, 7), s)[0][0])


def test_intervals_in_the_inputs_dtype():
    """float64 and bfloat16 inputs generate their windows in their own arithmetic."""
    x = RNG.standard_normal((1, 2, 40, 37))
    s = RNG.random((1, 2, 2))
    with nv.engine("interp"):
        i64 = F.fractional_max_pool2d(nv.tensor(x), 2, (21, 30), return_indices=True,
                                      _random_samples=nv.tensor(s))[1].numpy()
        xb, sb = nv.tensor(x).to(nv.bfloat16), nv.tensor(s).to(nv.bfloat16)
        vb, ib = F.fractional_max_pool2d(xb, 2, (21, 30), return_indices=True,
                                         _random_samples=sb)
        assert vb.dtype == nv.bfloat16
        vb, ib = vb.float().numpy(), ib.numpy()
    np.testing.assert_array_equal(i64, _reference(x, (2, 2), (21, 30), s, np.float64)[1])
    bf = ml_dtypes.bfloat16
    xr = x.astype(bf).astype(np.float32)
    rv, ri = _reference(xr, (2, 2), (21, 30), s.astype(bf), bf)
    np.testing.assert_array_equal(ib, ri)
    np.testing.assert_array_equal(vb, rv)


def test_nan_ties_and_inf():
    x = np.ones((1, 1, 4, 4), np.float32)
    x[0, 0, 2, 2] = x[0, 0, 3, 3] = np.nan
    x[0, 0, 2, 3] = 5.0
    with nv.engine("interp"):
        v, i = F.fractional_max_pool2d(nv.tensor(x), 2, 1, return_indices=True,
                                       _random_samples=nv.zeros(1, 1, 2))
        assert np.isnan(v.item()) and i.item() == 15        # the last NaN
        ones = nv.ones(1, 1, 5, 5)
        i = F.fractional_max_pool2d(ones, 2, 2, return_indices=True,
                                    _random_samples=nv.zeros(1, 1, 2))[1]
        assert i.numpy().tolist() == [[[[0, 3], [15, 18]]]]  # ties: the first
        neg = nv.full((1, 1, 3, 3), -float("inf"))
        i = F.fractional_max_pool2d(neg, 2, 1, return_indices=True,
                                    _random_samples=nv.zeros(1, 1, 2))[1]
        assert i.item() == 4        # all -inf: the window's first element


def test_compiled_values_indices_and_gradient():
    """The compiled path: PyTorch's values and indices, the gradient of a weighted sum
    scattered to each window's maximum (summed where windows overlap)."""
    x = RNG.standard_normal((1, 2, 7, 7)).astype(np.float32)
    s = RNG.random((1, 2, 2)).astype(np.float32)
    g = RNG.standard_normal((1, 2, 5, 5)).astype(np.float32)
    xt = nv.tensor(x, requires_grad=True)
    v, i = F.fractional_max_pool2d(xt, 3, 5, return_indices=True,
                                   _random_samples=nv.tensor(s))
    (v * nv.tensor(g)).sum().backward()
    rv, ri = _reference(x, (3, 3), (5, 5), s)
    np.testing.assert_array_equal(v.numpy(), rv)
    np.testing.assert_array_equal(i.numpy(), ri)
    want = np.zeros((1, 2, 49), np.float64)
    for c in range(2):
        np.add.at(want[0, c], ri[0, c].ravel(), g[0, c].ravel())
    np.testing.assert_allclose(xt.grad.numpy(), want.reshape(x.shape), rtol=1e-6,
                               atol=1e-6)


def test_gradient_by_finite_differences():
    x = RNG.permutation(64).astype(np.float64).reshape(1, 1, 4, 4, 4) / 7  # no ties
    s = RNG.random((1, 1, 3))
    with nv.engine("interp"):
        xt = nv.tensor(x, requires_grad=True)
        F.fractional_max_pool3d(xt, 2, 2, _random_samples=nv.tensor(s)).sum().backward()
        grad = xt.grad.numpy()

        def f(a):
            return F.fractional_max_pool3d(nv.tensor(a), 2, 2,
                                           _random_samples=nv.tensor(s)).sum().item()
        fd = np.zeros_like(x)
        for k in range(x.size):
            e = np.zeros(x.size)
            e[k] = 1e-6
            e = e.reshape(x.shape)
            fd.flat[k] = (f(x + e) - f(x - e)) / 2e-6
    np.testing.assert_allclose(grad, fd, atol=1e-6)
    assert grad.sum() == 8


def test_drawn_samples_and_modules():
    with nv.engine("interp"):
        nv.manual_seed(0)
        x = nv.randn(2, 3, 9, 9)
        v = F.fractional_max_pool2d(x, 2, output_ratio=0.5)
        assert v.shape == (2, 3, 4, 4)
        assert set(v.numpy().ravel()) <= set(x.numpy().ravel())
        s = nv.rand(1, 3, 2)
        m = nv.nn.FractionalMaxPool2d(2, output_size=(4, 5), return_indices=True,
                                      _random_samples=s)
        assert list(m.state_dict()) == ["_random_samples"]
        mv, mi = m(x[:1])
        fv, fi = F.fractional_max_pool2d(x[:1], 2, (4, 5), return_indices=True,
                                         _random_samples=s)
        np.testing.assert_array_equal(mv.numpy(), fv.numpy())
        np.testing.assert_array_equal(mi.numpy(), fi.numpy())
        assert list(nv.nn.FractionalMaxPool3d(2, output_ratio=0.5).state_dict()) == []
        m3 = nv.nn.FractionalMaxPool3d((1, 2, 2), output_ratio=(0.5, 0.5, 0.5))
        assert m3(nv.randn(1, 4, 6, 6)).shape == (1, 2, 3, 3)


def test_autocast_runs_it_in_float32_on_the_cpu():
    with nv.engine("interp"), nv.autocast("cpu"):
        x = nv.ones(1, 1, 6, 6, dtype=nv.bfloat16)
        s = nv.zeros(1, 1, 2, dtype=nv.bfloat16)
        assert F.fractional_max_pool2d(x, 2, 3, _random_samples=s).dtype == nv.float32


def test_errors():
    x = nv.ones(1, 1, 5, 5)
    with pytest.raises(ValueError, match="requires specifying either an output_size or"):
        F.fractional_max_pool2d(x, 2)
    with pytest.raises(RuntimeError, match="pool height 2 too large relative to input "
                                           "height 5"):
        F.fractional_max_pool2d(x, 2, (5, 4))
    with pytest.raises(RuntimeError, match="pool time 2 too large relative to input "
                                           "time 5"):
        F.fractional_max_pool3d(nv.ones(1, 1, 5, 5, 5), 2, (4, 3, 3))
    with pytest.raises(RuntimeError, match="same dtype as input"):
        F.fractional_max_pool2d(x, 2, 2, _random_samples=nv.zeros(1, 1, 2, dtype=nv.float64))
    with pytest.raises(RuntimeError, match="to have 3 dimensions, got 2"):
        F.fractional_max_pool2d(x, 2, 2, _random_samples=nv.zeros(1, 2))
    with pytest.raises(RuntimeError, match=r"size\(0\) no less then input batch size"):
        F.fractional_max_pool2d(nv.ones(2, 1, 5, 5), 2, 2, _random_samples=nv.zeros(1, 1, 2))
    with pytest.raises(RuntimeError, match=r"size\(1\) equals to input channel size"):
        F.fractional_max_pool2d(x, 2, 2, _random_samples=nv.zeros(1, 2, 2))
    with pytest.raises(RuntimeError, match=r"size\(2\) equals to 3; got 2"):
        F.fractional_max_pool3d(nv.ones(1, 1, 5, 5, 5), 2, 2, _random_samples=nv.zeros(1, 1, 2))
    with pytest.raises(RuntimeError, match="non-zero size for non-batch dimensions"):
        F.fractional_max_pool2d(nv.ones(1, 0, 5, 5), 2, 2)
    with pytest.raises(ValueError, match="expected a 3-D .* or 4-D"):
        F.fractional_max_pool2d(nv.ones(5, 5), 2, 2)
    with pytest.raises(TypeError, match="floating-point"):
        F.fractional_max_pool2d(nv.ones(1, 1, 5, 5, dtype=nv.int64), 2, 2)
    with pytest.raises(ValueError, match="output_ratio"):
        F.fractional_max_pool2d(x, 2, output_ratio=(0.5, 0.5, 0.5))
    with pytest.raises(ValueError, match="requires specifying either an output size, or a "
                                         "pooling ratio"):
        nv.nn.FractionalMaxPool2d(2)
    with pytest.raises(ValueError, match="only one of output_size and output_ratio"):
        nv.nn.FractionalMaxPool2d(2, output_size=2, output_ratio=0.5)
    with pytest.raises(ValueError, match=r"output_ratio must be between 0 and 1 \(got 1.0\)"):
        nv.nn.FractionalMaxPool3d(2, output_ratio=1.0)
    with pytest.raises(ValueError, match="kernel_size must be >= 1"):
        nv.nn.FractionalMaxPool3d(0, output_ratio=0.5)
