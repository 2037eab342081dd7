"""Transposed convolutions (``nova.nn.conv_transpose``) against a direct numpy
definition -- each input element scatters ``weight`` times itself into the output --
for strides, padding, output padding, dilation and groups in 1-3 dims; gradients by
finite differences; the modules' parameters, ``output_size`` and errors."""
import numpy as np
import pytest

import nova as nv
import nova.nn.functional as F
from nova import nn
from nova.autograd.gradcheck import gradcheck

RNG = np.random.default_rng(8)


def _reference(x, w, b, stride, padding, output_padding, groups, dilation):
    """The scatter definition: out[n, g*cog + o, i*s - p + j*d] += x[n, c, i] w[c, o, j]."""
    nd = x.ndim - 2
    n, c_in = x.shape[:2]
    cog, kernel = w.shape[1], w.shape[2:]
    out_size = [(i - 1) * s - 2 * p + d * (k - 1) + op + 1 for i, s, p, d, k, op in
                zip(x.shape[2:], stride, padding, dilation, kernel, output_padding)]
    full = [o + 2 * p for o, p in zip(out_size, padding)]
    out = np.zeros((n, cog * groups, *full))
    cig = c_in // groups
    for c in range(c_in):
        g = c // cig
        for pos in np.ndindex(*x.shape[2:]):
            for tap in np.ndindex(*kernel):
                at = tuple(i * s + j * d for i, j, s, d in zip(pos, tap, stride, dilation))
                if all(a < f for a, f in zip(at, full)):
                    out[(slice(None), slice(g * cog, (g + 1) * cog)) + at] += \
                        x[(slice(None), c) + pos][:, None] * w[(c, slice(None)) + tap]
    crop = tuple(slice(p, p + o) for p, o in zip(padding, out_size))
    out = out[(slice(None), slice(None)) + crop]
    return out + b.reshape((1, -1) + (1,) * nd)


CASES = [  # nd, c_in, c_out, groups, kernel, stride, padding, output_padding, dilation
    (1, 3, 4, 1, 3, 2, 1, 1, 1),
    (2, 4, 6, 2, 2, 2, 0, 0, 1),
    (2, 2, 3, 1, 3, 1, 0, 0, 2),
    (2, 4, 4, 4, 3, 3, 2, 2, 1),
    (2, 2, 2, 1, 3, 2, 3, 0, 2),
    (3, 2, 2, 1, 2, 2, 0, 1, 1),
]


@pytest.mark.parametrize("engine", ["interp", "cpu"])
def test_transposed_convolutions_scatter_the_kernel(engine):
    """Every case on the reference interpreter; the compiled engine (whose kernels are
    conv2d's, tested with it) on the first two, to keep the compile time short."""
    got, want = [], []
    for nd, c_in, c_out, g, k, s, p, op, d in CASES if engine == "interp" else CASES[:2]:
        size = (4,) * nd if nd < 3 else (3,) * nd
        x = RNG.normal(size=(2, c_in) + size)
        w = RNG.normal(size=(c_in, c_out // g) + (k,) * nd)
        b = RNG.normal(size=(c_out,))
        fn = {1: F.conv_transpose1d, 2: F.conv_transpose2d, 3: F.conv_transpose3d}[nd]
        got.append(fn(nv.tensor(x), nv.tensor(w), nv.tensor(b), s, p, op, g, d))
        want.append(_reference(x, w, b, (s,) * nd, (p,) * nd, (op,) * nd, g, (d,) * nd))
    with nv.engine(engine):
        nv.realize(*got)
    for gt, wt in zip(got, want):
        np.testing.assert_allclose(gt.numpy(), wt, rtol=1e-10, atol=1e-10)
    x1 = RNG.normal(size=(2, 5))            # unbatched
    w1 = RNG.normal(size=(2, 3, 3))
    with nv.engine(engine):
        out = F.conv_transpose1d(nv.tensor(x1), nv.tensor(w1), stride=2).numpy()
    np.testing.assert_allclose(out, _reference(x1[None], w1, np.zeros(3), (2,), (0,), (0,), 1,
                                               (1,))[0], rtol=1e-12)


def test_gradients_by_finite_differences():
    x = RNG.normal(size=(1, 2, 3, 3))
    w = RNG.normal(size=(2, 3, 2, 2))
    b = RNG.normal(size=(3,))
    assert gradcheck(lambda a, v, c: F.conv_transpose2d(a, v, c, stride=2, padding=1,
                                                        output_padding=1), [x, w, b])


def test_modules_initialize_and_hit_an_output_size():
    m = nn.ConvTranspose2d(3, 4, 3, stride=2, padding=1, bias=True)
    assert m.weight.shape == (3, 4, 3, 3) and m.bias.shape == (4,)
    bound = 1 / np.sqrt(4 * 9)              # fan-in: out_channels/groups * kernel
    assert np.abs(m.weight.numpy()).max() <= bound and np.abs(m.bias.numpy()).max() <= bound
    x = nv.tensor(RNG.normal(size=(1, 3, 5, 5)).astype(np.float32))
    assert m(x).shape == (1, 4, 9, 9) and m(x, output_size=(10, 10)).shape == (1, 4, 10, 10)
    assert m(x, output_size=[1, 4, 10, 10]).shape == (1, 4, 10, 10)
    with pytest.raises(ValueError, match="valid sizes range from 9 to 10"):
        m(x, output_size=(12, 12))
    dilated = nn.ConvTranspose1d(2, 2, 3, stride=1, dilation=2)   # PyTorch: stride - 1 extra
    with pytest.raises(ValueError, match="valid sizes range from 9 to 9"):
        dilated(nv.ones(1, 2, 5), output_size=[10])
    assert repr(m) == "ConvTranspose2d(3, 4, kernel_size=(3, 3), stride=(2, 2), padding=(1, 1))"
    assert nn.ConvTranspose1d(2, 2, 3, groups=2, bias=False).weight.shape == (2, 1, 3)
    assert nn.ConvTranspose3d(1, 2, 2).weight.shape == (1, 2, 2, 2, 2)
    with pytest.raises(ValueError, match="output_padding"):
        F.conv_transpose2d(x, m.weight, stride=1, output_padding=1)
    with pytest.raises(ValueError, match="channels"):
        F.conv_transpose2d(x, nv.zeros(4, 2, 3, 3))
    with pytest.raises(ValueError, match="padding mode"):
        nn.ConvTranspose2d(1, 1, 3, padding_mode="reflect")
