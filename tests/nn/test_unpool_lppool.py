"""F.max_unpool1d/2d/3d, F.lp_pool1d/2d/3d and their modules (nova/nn/unpool.py) against
numpy: unpooling places values at max_pool's indices, lp_pool is PyTorch's formula;
gradients by finite differences; errors."""
import math

import numpy as np
import pytest

import nova as nv
import nova.nn as nn
import nova.nn.functional as F
from nova.autograd.gradcheck import gradcheck
from tests.helpers import assert_close

RNG = np.random.default_rng(0)


def unpool_ref(values, indices, size):
    """Each value at its flat index into a zero ``size`` plane of its (sample, channel)."""
    lead = values.shape[:-len(size)]
    out = np.zeros(lead + (math.prod(size),), values.dtype)
    flat_v = values.reshape(lead + (-1,))
    flat_i = indices.reshape(lead + (-1,))
    for pos in np.ndindex(lead):
        out[pos][flat_i[pos]] = flat_v[pos]
    return out.reshape(lead + tuple(size))


def lp_pool_ref(x, p, kernel, stride, ceil_mode):
    """PyTorch's lp_pool: (sum of x**p over the window * K / count) ** (1 / p), where a
    ceil_mode window that runs past the input counts only its cells inside."""
    x = np.asarray(x, np.float64)
    nd = len(kernel)
    spatial = x.shape[-nd:]
    outs = []
    for n, k, s in zip(spatial, kernel, stride):
        o = (-(-(n - k) // s) if ceil_mode else (n - k) // s) + 1
        if ceil_mode and (o - 1) * s >= n:
            o -= 1
        outs.append(o)
    out = np.zeros(x.shape[:-nd] + tuple(outs))
    for pos in np.ndindex(*outs):
        window = tuple(slice(i * s, min(i * s + k, n))
                       for i, s, k, n in zip(pos, stride, kernel, spatial))
        cells = x[(Ellipsis,) + window]
        count = math.prod(w.stop - w.start for w in window)
        total = (cells ** p).sum(axis=tuple(range(-nd, 0))) * math.prod(kernel) / count
        out[(Ellipsis,) + pos] = total ** (1.0 / p)
    return out


def test_max_unpool_places_values_at_max_pool_indices():
    x2 = RNG.standard_normal((2, 3, 5, 7)).astype(np.float32)
    o2, i2 = F.max_pool2d(nv.tensor(x2), 2, 2, return_indices=True)
    u2 = F.max_unpool2d(o2, i2, 2, output_size=(5, 7))
    m2 = nn.MaxUnpool2d(2)(o2, i2, output_size=x2.shape)            # with N and C
    x1 = RNG.standard_normal((3, 9)).astype(np.float32)             # unbatched (C, L)
    o1, i1 = F.max_pool1d(nv.tensor(x1), 3, return_indices=True)
    u1 = nn.MaxUnpool1d(3)(o1, i1)
    x3 = RNG.standard_normal((1, 2, 4, 4, 5))
    o3, i3 = F.max_pool3d(nv.tensor(x3), 2, return_indices=True)
    u3 = F.max_unpool3d(o3, i3, 2, output_size=(4, 4, 5))
    # overlapping windows with padding: PyTorch's default size (3 - 1) * 2 - 2 + 3 = 5
    xp = RNG.standard_normal((1, 1, 5, 5))
    op, ip = F.max_pool2d(nv.tensor(xp), 3, 2, 1, return_indices=True)
    up = F.max_unpool2d(op, ip, 3, 2, 1)
    # known indices: values land at 0 and 3 of the default (2 - 1) * 2 + 2 = 4
    known = F.max_unpool1d(nv.tensor([[[1.0, 2.0]]]), nv.tensor([[[0, 3]]]), 2)
    nv.realize(u2, m2, u1, u3, up, known)
    for nd, x, o, i, u in ((2, x2, o2, i2, u2), (2, x2, o2, i2, m2), (1, x1, o1, i1, u1),
                           (3, x3, o3, i3, u3), (2, xp, op, ip, up)):
        assert u.shape == x.shape and u.dtype == o.dtype
        assert_close(u, unpool_ref(o.numpy(), i.numpy(), x.shape[-nd:]))
        kept = u.numpy() != 0               # every value is back where it was pooled from
        assert_close(u.numpy()[kept], x[kept])
    assert_close(known, [[[1.0, 0.0, 0.0, 2.0]]])


def test_lp_pool_values():
    x = RNG.standard_normal((2, 3, 5, 7)).astype(np.float32)
    pos = np.abs(x) + 0.1
    x1 = RNG.standard_normal((2, 2, 8))
    x3 = RNG.standard_normal((1, 2, 4, 4, 5))
    cases = [
        (F.lp_pool2d(nv.tensor(x), 2, (2, 3), 2), lp_pool_ref(x, 2, (2, 3), (2, 2), False)),
        (F.lp_pool2d(nv.tensor(x), 2.0, (2, 3), 2, True),
         lp_pool_ref(x, 2, (2, 3), (2, 2), True)),
        (nn.LPPool2d(3.5, 2)(nv.tensor(pos)), lp_pool_ref(pos, 3.5, (2, 2), (2, 2), False)),
        (F.lp_pool2d(nv.tensor(x), math.inf, 2),             # the window's largest |x|
         np.abs(x)[:, :, :4, :6].reshape(2, 3, 2, 2, 3, 2).max((3, 5))),
        (F.lp_pool1d(nv.tensor(x1), 1, 3, 2), lp_pool_ref(x1, 1, (3,), (2,), False)),
        (nn.LPPool1d(2, 3, ceil_mode=True)(nv.tensor(x1)), lp_pool_ref(x1, 2, (3,), (3,), True)),
        (nn.LPPool3d(2, 2)(nv.tensor(x3)), lp_pool_ref(x3, 2, (2, 2, 2), (2, 2, 2), False)),
    ]
    nv.realize(*[got for got, _ in cases])
    for got, want in cases:
        assert_close(got, want, rtol=1e-5, atol=1e-6)


def test_gradients():
    values = RNG.standard_normal((1, 2, 2, 2))
    # flat indices into 4x5 planes, one per 2x2 window of a stride-2 pool
    indices = nv.tensor(np.array([[[[0, 7], [11, 18]], [[6, 3], [10, 13]]]]))
    x = np.abs(RNG.standard_normal((1, 1, 4, 5))) + 0.2
    x1 = np.abs(RNG.standard_normal((1, 2, 6))) + 0.2

    def pooled(v, a, b):
        return (F.max_unpool2d(v, indices, 2, output_size=(4, 5)),
                F.lp_pool2d(a, 3, 2, ceil_mode=True), F.lp_pool1d(b, 2, 3, 2))
    assert gradcheck(pooled, [values, x, x1])
    # a window of zeros has a zero gradient (PyTorch's sign * relu form), not NaN
    z = nv.tensor(np.zeros((1, 1, 2, 4)), requires_grad=True)
    g, = nv.autograd.grad(F.lp_pool2d(z, 2, 2).sum(), [z])
    assert_close(g, np.zeros((1, 1, 2, 4)))


def test_errors_and_repr():
    o, i = nv.ones(1, 1, 2, 2), nv.zeros(1, 1, 2, 2, dtype=nv.int64)
    with pytest.raises(ValueError, match=r"max_unpool2d: invalid output_size \(6, 4\) \(dim 0 "
                                         r"must be between 2 and 6"):
        F.max_unpool2d(o, i, 2, output_size=(6, 4))
    with pytest.raises(ValueError, match="output_size should be a sequence of 2 or 4"):
        F.max_unpool2d(o, i, 2, output_size=(4, 4, 4))
    with pytest.raises(ValueError, match="expected indices of the input's shape"):
        F.max_unpool2d(o, nv.zeros(1, 1, 2, 1, dtype=nv.int64), 2)
    with pytest.raises(TypeError, match="indices must be int64"):
        F.max_unpool2d(o, nv.zeros(1, 1, 2, 2), 2)
    with pytest.raises(ValueError, match=r"max_unpool3d: expected a 4-D \(unbatched\) or 5-D"):
        F.max_unpool3d(nv.ones(1, 2, 2), nv.zeros(1, 2, 2, dtype=nv.int64), 2)
    with pytest.raises(IndexError, match="out of bounds"):
        F.max_unpool1d(nv.ones(1, 1, 2), nv.tensor([[[0, 4]]]), 2)
    with pytest.raises(ValueError, match="lp_pool2d: norm_type must be a nonzero number"):
        F.lp_pool2d(o, 0, 2)
    with pytest.raises(TypeError, match="lp_pool1d: expected a floating point input"):
        F.lp_pool1d(nv.ones(1, 4, dtype=nv.int64), 2, 2)
    with pytest.raises(ValueError, match="kernel_size must be an int or a tuple of 3"):
        F.lp_pool3d(nv.ones(1, 1, 2, 2, 2), 2, (2, 2))
    assert repr(nn.MaxUnpool2d(2, padding=1)) == \
        "MaxUnpool2d(kernel_size=(2, 2), stride=(2, 2), padding=(1, 1))"
    assert repr(nn.LPPool1d(2, 3)) == \
        "LPPool1d(norm_type=2, kernel_size=3, stride=None, ceil_mode=False)"
