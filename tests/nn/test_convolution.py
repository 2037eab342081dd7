"""Convolution and pooling (F.conv*, F.max_pool*, F.avg_pool*, F.adaptive_avg_pool* and
their modules) on both engines: forward against direct numpy loops written from
PyTorch's definitions, gradients by float64 finite differences, PyTorch itself where
installed, and the errors bad arguments get."""
import math
import re

import numpy as np
import pytest

import nova as nv
import nova.nn as nn
import nova.nn.functional as F
from nova.autograd.gradcheck import gradcheck
from tests.helpers import assert_close

RNG = np.random.default_rng(0)


@pytest.fixture(autouse=True, params=["cpu", "interp"])
def engine(request):
    with nv.engine(request.param):
        yield request.param


def _out_size(n, k, s, lo, hi, d, ceil=False):
    span = n + lo + hi - d * (k - 1) - 1
    o = (-(-span // s) if ceil else span // s) + 1
    if ceil and (o - 1) * s >= n + lo:
        o -= 1
    return o


def conv_reference(x, w, b, stride, padding, dilation, groups):
    """Direct loops over output positions: out[n, o, p] = sum over the group's input
    channels and kernel offsets of w * x_padded at p*stride + k*dilation."""
    nd = x.ndim - 2
    xp = np.pad(x, [(0, 0), (0, 0)] + [(p, p) for p in padding])
    out_sp = [_out_size(x.shape[2 + i], w.shape[2 + i], stride[i], padding[i], padding[i],
                        dilation[i]) for i in range(nd)]
    cg, og = w.shape[1], w.shape[0] // groups
    out = np.zeros((x.shape[0], w.shape[0], *out_sp))
    for pos in np.ndindex(*out_sp):
        for k in np.ndindex(*w.shape[2:]):
            idx = tuple(pos[i] * stride[i] + k[i] * dilation[i] for i in range(nd))
            for g in range(groups):
                patch = xp[(slice(None), slice(g * cg, (g + 1) * cg)) + idx]     # (N, cg)
                wk = w[(slice(g * og, (g + 1) * og), slice(None)) + k]            # (og, cg)
                out[(slice(None), slice(g * og, (g + 1) * og)) + pos] += patch @ wk.T
    if b is not None:
        out += b.reshape((1, -1) + (1,) * nd)
    return out


CONV_CASES = [   # x shape, weight shape, stride, padding, dilation, groups
    ((2, 3, 7, 6), (4, 3, 3, 3), (1, 1), (0, 0), (1, 1), 1),
    ((2, 4, 7, 6), (6, 2, 3, 2), (2, 1), (1, 1), (1, 1), 2),
    ((1, 2, 9, 8), (3, 2, 3, 3), (1, 2), (2, 1), (2, 1), 1),
    ((3, 5, 9), (4, 5, 2), (2,), (1,), (1,), 1),
    ((2, 4, 5), (4, 1, 3), (1,), (1,), (1,), 4),            # depthwise
    ((1, 2, 4, 3, 5), (2, 2, 2, 2, 2), (1, 1, 2), (1, 0, 1), (1, 1, 1), 1),
]


@pytest.fixture(params=["folded", "per-image"])
def conv_layout(request, monkeypatch):
    """Both of the convolution's layouts (``PER_IMAGE_MIN_POSITIONS`` picks one by the
    output size, and these shapes are small): the batch folded into one product's
    columns, and one product per image."""
    import nova.nn.convolution as convolution
    monkeypatch.setattr(convolution, "PER_IMAGE_MIN_POSITIONS",
                        1 if request.param == "per-image" else 10 ** 9)
    return request.param


@pytest.mark.parametrize("xs,ws,stride,padding,dilation,groups", CONV_CASES)
def test_conv_matches_direct_loops(xs, ws, stride, padding, dilation, groups, conv_layout):
    x = RNG.standard_normal(xs).astype(np.float32)
    w = RNG.standard_normal(ws).astype(np.float32)
    b = RNG.standard_normal(ws[0]).astype(np.float32)
    fn = {3: F.conv1d, 4: F.conv2d, 5: F.conv3d}[len(xs)]
    got = fn(nv.tensor(x), nv.tensor(w), nv.tensor(b), stride, padding, dilation, groups)
    assert_close(got, conv_reference(x, w, b, stride, padding, dilation, groups),
                 rtol=1e-4, atol=1e-4)
    unbatched = fn(nv.tensor(x[0]), nv.tensor(w), None, stride, padding, dilation, groups)
    assert_close(unbatched, conv_reference(x[:1], w, None, stride, padding, dilation,
                                           groups)[0], rtol=1e-4, atol=1e-4)


def test_conv_same_and_valid_padding():
    x = RNG.standard_normal((1, 2, 6, 5)).astype(np.float32)
    w = RNG.standard_normal((3, 2, 4, 3)).astype(np.float32)    # even kernel: more on the right
    got = F.conv2d(nv.tensor(x), nv.tensor(w), padding="same", dilation=(1, 2))
    xp = np.pad(x, [(0, 0), (0, 0), (1, 2), (2, 2)])
    assert got.shape == (1, 3, 6, 5)
    assert_close(got, conv_reference(xp, w, None, (1, 1), (0, 0), (1, 2), 1), rtol=1e-4,
                 atol=1e-4)
    valid = F.conv2d(nv.tensor(x), nv.tensor(w), padding="valid")
    assert_close(valid, conv_reference(x, w, None, (1, 1), (0, 0), (1, 1), 1), rtol=1e-4,
                 atol=1e-4)


@pytest.mark.parametrize("stride,padding,dilation,groups", [((1, 1), 0, 1, 1), (2, 1, 1, 2),
                                                             (1, 1, 2, 1)])
def test_conv2d_gradients_match_finite_differences(stride, padding, dilation, groups,
                                                    conv_layout):
    x = RNG.standard_normal((2, 2, 5, 4))
    w = RNG.standard_normal((2, 2 // groups, 2, 2))
    b = RNG.standard_normal(2)
    assert gradcheck(lambda x, w, b: F.conv2d(x, w, b, stride, padding, dilation, groups),
                     [x, w, b])


def test_conv1d_gradients_match_finite_differences(conv_layout):
    assert gradcheck(lambda x, w: F.conv1d(x, w, stride=2, padding=1),
                     [RNG.standard_normal((2, 3, 6)), RNG.standard_normal((2, 3, 3))])


def pool_reference(x, kernel, stride, padding, dilation, ceil, kind, count_include_pad=True):
    """PyTorch's max/avg pool by direct loops (its divisor rules for avg)."""
    nd = x.ndim - 2
    sp = x.shape[2:]
    out_sp = [_out_size(sp[i], kernel[i], stride[i], padding[i], padding[i], dilation[i], ceil)
              for i in range(nd)]
    out = np.zeros(x.shape[:2] + tuple(out_sp))
    index = np.zeros(out.shape, np.int64)
    for pos in np.ndindex(*out_sp):
        starts = [pos[i] * stride[i] - padding[i] for i in range(nd)]
        if kind == "max":
            best = np.full(x.shape[:2], -np.inf)
            arg = np.zeros(x.shape[:2], np.int64)
            for k in np.ndindex(*kernel):
                c = [starts[i] + k[i] * dilation[i] for i in range(nd)]
                if all(0 <= c[i] < sp[i] for i in range(nd)):
                    v = x[(slice(None), slice(None)) + tuple(c)]
                    better = v > best
                    best = np.where(better, v, best)
                    arg = np.where(better, np.ravel_multi_index(c, sp), arg)
            out[(slice(None), slice(None)) + pos] = best
            index[(slice(None), slice(None)) + pos] = arg
        else:
            ends = [min(starts[i] + kernel[i], sp[i] + padding[i]) for i in range(nd)]
            size = math.prod(e - s for s, e in zip(starts, ends))
            lo = [max(s, 0) for s in starts]
            hi = [min(e, n) for e, n in zip(ends, sp)]
            window = x[(slice(None), slice(None)) + tuple(slice(a, b) for a, b in zip(lo, hi))]
            if not count_include_pad:
                size = math.prod(b - a for a, b in zip(lo, hi))
            out[(slice(None), slice(None)) + pos] = window.sum(tuple(range(2, 2 + nd))) / size
    return out, index


POOL_CASES = [   # x shape, kernel, stride, padding, dilation, ceil_mode
    ((2, 3, 8, 8), (2, 2), (2, 2), (0, 0), (1, 1), False),
    ((2, 3, 9, 8), (3, 3), (2, 2), (1, 1), (1, 1), False),
    ((1, 2, 9, 8), (3, 3), (2, 2), (0, 0), (1, 1), True),
    ((1, 2, 9, 8), (2, 3), (1, 1), (1, 1), (2, 1), False),
    ((2, 3, 10), (3,), (2,), (1,), (1,), True),
]


@pytest.mark.parametrize("xs,kernel,stride,padding,dilation,ceil", POOL_CASES)
def test_max_pool_matches_direct_loops_with_indices(xs, kernel, stride, padding, dilation, ceil):
    x = RNG.standard_normal(xs).astype(np.float32)
    fn = {3: F.max_pool1d, 4: F.max_pool2d}[len(xs)]
    out, idx = fn(nv.tensor(x), kernel, stride, padding, dilation, ceil, return_indices=True)
    ref, ref_idx = pool_reference(x, kernel, stride, padding, dilation, ceil, "max")
    assert_close(out, ref)
    np.testing.assert_array_equal(idx.numpy(), ref_idx)
    assert idx.dtype == nv.int64


@pytest.mark.parametrize("xs,kernel,stride,padding,dilation,ceil",
                         [c for c in POOL_CASES if c[4] == (1,) * len(c[1])])
@pytest.mark.parametrize("count_include_pad", [True, False])
def test_avg_pool_matches_pytorch_divisor_rules(xs, kernel, stride, padding, dilation, ceil,
                                                count_include_pad):
    x = RNG.standard_normal(xs).astype(np.float32)
    fn = {3: F.avg_pool1d, 4: F.avg_pool2d}[len(xs)]
    got = fn(nv.tensor(x), kernel, stride, padding, ceil, count_include_pad)
    ref, _ = pool_reference(x, kernel, stride, padding, dilation, ceil, "avg", count_include_pad)
    assert_close(got, ref, rtol=1e-5, atol=1e-6)


def test_max_pool_gradient_goes_to_the_first_maximum_of_each_window():
    # ties everywhere (a ReLU's zeros): PyTorch gives each window's gradient to its first
    # maximum, and overlapping windows add up
    x = nv.tensor(np.array([[[[0.0, 0.0, 0.0], [0.0, 2.0, 0.0], [0.0, 0.0, 0.0]]]],
                           np.float32), requires_grad=True)
    F.max_pool2d(x, 2, stride=1).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy()[0, 0], [[0, 0, 0], [0, 4, 0], [0, 0, 0]])
    z = nv.zeros(1, 1, 2, 4, requires_grad=True)
    F.max_pool2d(z, 2).sum().backward()
    np.testing.assert_array_equal(z.grad.numpy()[0, 0], [[1, 0, 1, 0], [0, 0, 0, 0]])
    nan = nv.tensor(np.array([[[1.0, np.nan, 3.0, 2.0]]], np.float32))
    assert np.isnan(F.max_pool1d(nan, 2).numpy()[0, 0, 0])


def test_pool_gradients_match_finite_differences():
    x = RNG.standard_normal((1, 2, 5, 5))
    assert gradcheck(lambda x: F.max_pool2d(x, 3, 2, 1), [x])
    assert gradcheck(lambda x: F.avg_pool2d(x, 3, 2, 1, ceil_mode=True,
                                            count_include_pad=False), [x])
    assert gradcheck(lambda x: F.adaptive_avg_pool2d(x, (3, 2)), [x])


@pytest.mark.parametrize("size", [1, (3, 2), (4, None), 5, (7, 8)])
def test_adaptive_avg_pool_uses_pytorch_bins(size):
    x = RNG.standard_normal((2, 3, 9, 8)).astype(np.float32)
    got = F.adaptive_avg_pool2d(nv.tensor(x), size)
    oh, ow = (size, size) if isinstance(size, int) else (size[0], size[1] or 8)
    ref = np.zeros((2, 3, oh, ow))
    for i in range(oh):
        for j in range(ow):
            h0, h1 = i * 9 // oh, -(-(i + 1) * 9 // oh)
            w0, w1 = j * 8 // ow, -(-(j + 1) * 8 // ow)
            ref[:, :, i, j] = x[:, :, h0:h1, w0:w1].mean((2, 3))
    assert_close(got, ref, rtol=1e-5, atol=1e-6)
    assert_close(F.adaptive_avg_pool1d(nv.tensor(x[0]), 4),
                 np.stack([x[0, :, :, 2 * j:2 * j + 2].mean(-1) for j in range(4)], -1),
                 rtol=1e-5, atol=1e-6)


def _adaptive_max_reference(x, sizes):
    """PyTorch's adaptive max pool by direct loops: each bin [floor(i*n/s),
    ceil((i+1)*n/s)) per dim, its first maximum in row-major order and that element's
    flat index into the input plane."""
    spatial = x.shape[2:]
    out = np.zeros(x.shape[:2] + tuple(sizes), x.dtype)
    idx = np.zeros(out.shape, np.int64)
    for pos in np.ndindex(*sizes):
        bins = [slice(p * n // s, -(-((p + 1) * n) // s)) for p, n, s in zip(pos, spatial, sizes)]
        window = x[(slice(None), slice(None)) + tuple(bins)].reshape(x.shape[:2] + (-1,))
        first = window.argmax(-1)
        out[(slice(None), slice(None)) + pos] = window.max(-1)
        coords = np.unravel_index(first, [b.stop - b.start for b in bins])
        flat = np.ravel_multi_index(tuple(c + b.start for c, b in zip(coords, bins)), spatial)
        idx[(slice(None), slice(None)) + pos] = flat
    return out, idx


@pytest.mark.parametrize("shape,sizes", [((2, 3, 10), (4,)), ((2, 3, 7, 9), (3, 4)),
                                         ((1, 2, 5, 6, 7), (2, 3, 4)), ((1, 2, 4, 4), (4, 4)),
                                         ((1, 1, 5, 5), (1, 1))])
def test_adaptive_max_pool_takes_the_first_maximum_of_each_bin(shape, sizes):
    x = np.round(RNG.standard_normal(shape), 1).astype(np.float32)   # ties within bins
    fn = {1: F.adaptive_max_pool1d, 2: F.adaptive_max_pool2d, 3: F.adaptive_max_pool3d}
    out, idx = fn[len(sizes)](nv.tensor(x), sizes, return_indices=True)
    ref, ref_idx = _adaptive_max_reference(x, sizes)
    np.testing.assert_array_equal(out.numpy(), ref)
    np.testing.assert_array_equal(idx.numpy(), ref_idx)
    assert idx.dtype == nv.int64
    unbatched = fn[len(sizes)](nv.tensor(x[0]), sizes)
    np.testing.assert_array_equal(unbatched.numpy(), ref[0])


def test_adaptive_max_pool_gradient_goes_to_the_first_maximum():
    x = nv.tensor(np.array([[[[1.0, 3.0, 3.0], [0.0, 3.0, 2.0]]]], np.float32),
                  requires_grad=True)
    F.adaptive_max_pool2d(x, (1, 2)).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [[[[0, 2, 0], [0, 0, 0]]]])   # bins overlap
    assert gradcheck(lambda a: F.adaptive_max_pool2d(a, (2, 3)),
                     [RNG.standard_normal((1, 2, 5, 7))])


def test_conv_and_pool_modules():
    conv = nn.Conv2d(3, 4, 3, padding=1, bias=True)
    bound = 1 / math.sqrt(3 * 9)
    assert conv.weight.shape == (4, 3, 3, 3) and conv.bias.shape == (4,)
    assert np.abs(conv.weight.numpy()).max() <= bound and np.abs(conv.bias.numpy()).max() <= bound
    x = RNG.standard_normal((2, 3, 6, 6)).astype(np.float32)
    ref = conv_reference(x, conv.weight.numpy(), conv.bias.numpy(), (1, 1), (1, 1), (1, 1), 1)
    assert_close(conv(nv.tensor(x)), ref, rtol=1e-4, atol=1e-5)
    circ = nn.Conv1d(2, 2, 3, padding=1, padding_mode="circular", bias=False)
    y = RNG.standard_normal((1, 2, 5)).astype(np.float32)
    wrapped = np.concatenate([y[..., -1:], y, y[..., :1]], -1)
    assert_close(circ(nv.tensor(y)), conv_reference(wrapped, circ.weight.numpy(), None, (1,),
                                                    (0,), (1,), 1), rtol=1e-4, atol=1e-5)
    assert repr(nn.Conv2d(2, 4, 3, stride=2, groups=2, bias=False)) == \
        "Conv2d(2, 4, kernel_size=(3, 3), stride=(2, 2), groups=2, bias=False)"
    assert nn.MaxPool2d(2)(nv.tensor(x)).shape == (2, 3, 3, 3)
    assert nn.AvgPool2d(3, 1, 1, count_include_pad=False)(nv.tensor(x)).shape == (2, 3, 6, 6)
    assert nn.AdaptiveAvgPool2d((1, 1))(nv.tensor(x)).shape == (2, 3, 1, 1)
    out, idx = nn.MaxPool1d(2, return_indices=True)(nv.tensor(y))
    assert out.shape == idx.shape == (1, 2, 2)
    assert nn.AdaptiveMaxPool2d((2, None))(nv.tensor(x)).shape == (2, 3, 2, 6)
    out, idx = nn.AdaptiveMaxPool1d(2, return_indices=True)(nv.tensor(y))
    assert out.shape == idx.shape == (1, 2, 2)
    assert repr(nn.AdaptiveMaxPool3d(1)) == "AdaptiveMaxPool3d(output_size=1)"


def test_conv_and_pool_errors_name_the_op_and_shapes():
    x = nv.zeros(2, 3, 5, 5)
    with pytest.raises(ValueError, match=r"conv2d: input \(2, 3, 5, 5\) has 3 channels but "
                                         r"weight \(4, 2, 3, 3\) with groups=1 expects 2"):
        F.conv2d(x, nv.zeros(4, 2, 3, 3))
    with pytest.raises(ValueError, match=r"conv2d: expected a 3-D \(unbatched\) or 4-D"):
        F.conv2d(nv.zeros(5, 5), nv.zeros(1, 1, 3, 3))
    with pytest.raises(ValueError, match="smaller than the dilated kernel"):
        F.conv2d(x, nv.zeros(1, 3, 6, 6))
    with pytest.raises(ValueError, match="padding='same' is not supported for strided"):
        F.conv2d(x, nv.zeros(1, 3, 3, 3), stride=2, padding="same")
    # a layer refuses them when it is built, as PyTorch's (it used to build, then raise
    # at its first call: a model constructed and exported without running passed)
    with pytest.raises(ValueError, match=r"Conv2d: padding='same' is not supported for "
                                         r"strided convolutions \(stride \(2, 1\)\)"):
        nv.nn.Conv2d(3, 3, 3, stride=(2, 1), padding="same")
    with pytest.raises(ValueError, match=r"Conv1d: padding must be 'valid', 'same'"):
        nv.nn.Conv1d(3, 3, 3, padding="full")
    assert nv.nn.Conv2d(3, 3, 3, padding="same")(x).shape == (2, 3, 5, 5)
    with pytest.raises(ValueError, match=r"conv2d: bias must have shape \(1,\)"):
        F.conv2d(x, nv.zeros(1, 3, 3, 3), nv.zeros(2))
    with pytest.raises(ValueError, match=r"stride must be >= 1"):
        F.conv2d(x, nv.zeros(1, 3, 3, 3), stride=0)
    with pytest.raises(ValueError, match="should be at most half of the effective kernel"):
        F.max_pool2d(x, 2, padding=2)
    with pytest.raises(TypeError, match="avg_pool2d: expected floating point input"):
        F.avg_pool2d(nv.zeros(1, 1, 4, 4, dtype=nv.int64), 2)
    with pytest.raises(ValueError, match="Conv2d: in_channels"):
        nn.Conv2d(3, 4, 3, groups=2)
    with pytest.raises(ValueError, match=r"adaptive_max_pool2d: output_size must be an int or "
                                         r"a tuple of 2"):
        F.adaptive_max_pool2d(x, (1, 2, 3))
    with pytest.raises(ValueError, match=r"adaptive_max_pool1d: output_size \(0,\) must be "
                                         r"positive"):
        F.adaptive_max_pool1d(nv.zeros(1, 2, 4), 0)


def test_int_max_pool_pads_with_the_lowest_value():
    x = nv.tensor(np.array([[[-5, -7, -3]]], np.int64))
    np.testing.assert_array_equal(F.max_pool1d(x, 2, 2, 1).numpy(), [[[-5, -3]]])


def test_against_pytorch_forward_and_backward(conv_layout):
    torch = pytest.importorskip("torch")
    x = RNG.standard_normal((2, 4, 9, 8)).astype(np.float32)
    w = RNG.standard_normal((6, 2, 3, 3)).astype(np.float32)
    g = RNG.standard_normal((2, 6, 3, 3)).astype(np.float32)

    def run(lib, F_):
        xt = lib.tensor(x, requires_grad=True)
        wt = lib.tensor(w, requires_grad=True)
        y = F_.conv2d(xt, wt, stride=2, padding=1, groups=2)
        y = F_.max_pool2d(F_.relu(y), 2, 1, 1)
        y = F_.adaptive_avg_pool2d(F_.avg_pool2d(y, 2, 1, ceil_mode=True), (3, 3))
        (y * lib.tensor(g)).sum().backward()
        return [t.detach().numpy() for t in (y, xt.grad, wt.grad)]
    for a, b in zip(run(nv, F), run(torch, torch.nn.functional)):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


def test_layout_follows_the_output_size():
    """A large output per image runs one product per image, whose result is already in
    (N, G, O/G, P) order -- with unit strides over the padded width (the shifted
    windows, ``_shifted_product``: ``side + 2`` columns per row); a small one folds the
    batch into one product's columns."""
    import nova.nn.convolution as convolution
    side = math.isqrt(convolution.PER_IMAGE_MIN_POSITIONS) + 1
    w = nv.tensor(RNG.standard_normal((4, 3, 3, 3)).astype(np.float32))

    def product(hw, stride=1):
        x = nv.tensor(RNG.standard_normal((2, 3, hw, hw)).astype(np.float32))
        ir = nv.debug.dump_ir(F.conv2d(x, w, padding=1, stride=stride))
        return [line.split("-> ")[-1] for line in ir.splitlines() if "nova.matmul" in line]
    assert product(side) == [f"tensor<2x1x4x{side * (side + 2)}xf32>"]
    assert product(2 * side, stride=2) == [f"tensor<2x1x4x{side * side}xf32>"]
    assert product(8) == [f"tensor<1x4x{2 * 64}xf32>"]


def _derived_gradient(monkeypatch):
    """Make wide convolutions take the input gradient autograd derives from their
    forward (the window gradients summed back), not the transposed convolution."""
    import nova.nn.convolution as convolution
    monkeypatch.setattr(convolution, "TRANSPOSED_GRADIENT_MIN_CHANNELS", 10 ** 9)


TRANSPOSED_CASES = [   # x shape, weight shape, padding, dilation
    ((2, 64, 23, 23), (8, 64, 3, 3), 1, 1),
    ((1, 64, 24, 23), (8, 64, 2, 4), "same", (2, 1)),     # even kernels: pads 1|1, 1|2
    ((1, 64, 24, 24), (8, 64, 3, 3), (0, 2), 1),
    ((2, 64, 600), (8, 64, 4), "same", 1),
]


@pytest.mark.parametrize("xs,ws,padding,dilation", TRANSPOSED_CASES)
def test_transposed_input_gradient_equals_the_derived_one(xs, ws, padding, dilation,
                                                           monkeypatch):
    """The wide convolutions' hand-written backward (``_ShiftedConvolution``) against
    the gradients autograd derives from the same forward, asymmetric padding
    included, and with only one of the two inputs needing a gradient."""
    x = RNG.standard_normal(xs).astype(np.float32)
    w = (RNG.standard_normal(ws) / np.sqrt(np.prod(ws[1:]))).astype(np.float32)
    conv = F.conv1d if len(xs) == 3 else F.conv2d

    def grads(needs):
        xt = nv.tensor(x, requires_grad=needs[0])
        wt = nv.tensor(w, requires_grad=needs[1])
        y = conv(xt, wt, padding=padding, dilation=dilation)
        g = nv.tensor(np.cos(np.arange(np.prod(y.shape))).reshape(y.shape).astype(np.float32))
        wanted = [t for t, need in zip((xt, wt), needs) if need]
        return [y.numpy()] + [t.numpy() for t in nv.autograd.grad(y, wanted, [g])]

    for needs in ((True, True), (True, False), (False, True)):
        got = grads(needs)
        with monkeypatch.context() as m:
            _derived_gradient(m)
            want = grads(needs)
        for a, b in zip(got, want):
            np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4)


def test_transposed_input_gradient_differentiates_again(monkeypatch):
    """``create_graph``: the hand-written backward is built from ops, so a second
    derivative through it (a gradient penalty) equals the derived backward's."""
    x = RNG.standard_normal((1, 64, 23, 23)).astype(np.float32)
    w = (RNG.standard_normal((4, 64, 3, 3)) / 24).astype(np.float32)

    def penalty_grads():
        xt, wt = nv.tensor(x, requires_grad=True), nv.tensor(w, requires_grad=True)
        y = F.conv2d(xt, wt, padding=1)
        dx, = nv.autograd.grad((y * y).sum(), [xt], create_graph=True)
        return [t.numpy() for t in nv.autograd.grad((dx * dx).sum(), [xt, wt])]

    got = penalty_grads()
    _derived_gradient(monkeypatch)
    for a, b in zip(got, penalty_grads()):
        np.testing.assert_allclose(a, b, rtol=1e-3, atol=1e-4)


def test_a_compiled_conv_training_step_replays_the_transposed_gradient(engine):
    """``nv.compile`` replays a step through the hand-written backward (a
    ``pure_backward`` Function) and gives the recorded loop's parameters."""
    x = nv.tensor(RNG.standard_normal((2, 64, 23, 23)).astype(np.float32))

    def run(compiled):
        nv.manual_seed(0)
        model = nn.Sequential(nn.Conv2d(64, 64, 3, padding=1), nn.ReLU(),
                              nn.Conv2d(64, 8, 3, padding=1))
        opt = nv.optim.SGD(model.parameters(), lr=0.1)

        def step(x):
            loss = model(x).square().mean()
            loss.backward()
            opt.step()
            opt.zero_grad()
            return loss
        fn = nv.compile(step) if compiled else step
        losses = [float(fn(x)) for _ in range(4)]
        return losses, [p.numpy() for p in model.parameters()], fn

    losses, params, fn = run(True)
    assert fn.replays >= 1
    want_losses, want_params, _ = run(False)
    np.testing.assert_array_equal(losses, want_losses)
    for a, b in zip(params, want_params):
        np.testing.assert_array_equal(a, b)


def test_a_recorded_conv_backward_is_stamped_from_its_template(monkeypatch):
    """The hand-written backward names its structure (``template_key``), so a
    recorded training step's backward through it is stamped after the first, with the
    recorded pass's values."""
    from nova.autograd import backward_template as bt
    bt.clear()
    stamped = []
    stamp = bt.BackwardTemplate.stamp
    monkeypatch.setattr(bt.BackwardTemplate, "stamp",
                        lambda self, *a: (stamped.append(1), stamp(self, *a))[1])
    w = nv.tensor((RNG.standard_normal((8, 64, 3, 3)) / 24).astype(np.float32),
                  requires_grad=True)
    xs = [RNG.standard_normal((1, 64, 23, 23)).astype(np.float32) for _ in range(3)]

    def grad(x):
        w.grad = None
        F.conv2d(nv.tensor(x, requires_grad=True), w, padding=1).square().sum().backward()
        return w.grad.numpy()

    got = [grad(x) for x in xs]
    assert len(stamped) == 2
    monkeypatch.setattr(bt, "structure", lambda *args: None)     # recorded every time
    for x, g in zip(xs, got):
        assert np.array_equal(grad(x), g)
    bt.clear()


@pytest.mark.parametrize("max_rows", [None, 10 ** 9])
def test_shifted_window_products_read_in_place_equal_the_stored_stack(engine, monkeypatch,
                                                                       max_rows):
    """The CPU GEMMs read a shifted-window B (the forward's windows of the padded
    input, the transposed gradient's of the output gradient) in place, row by row from
    a table of row starts (``GemmDriver.micro_in_place``), packing only an edge
    micro-panel, when the product has few rows (``B_IN_PLACE_MAX_ROWS``: the forward's
    8 here; the input gradient's 300 too when the limit is lifted). Against the stored
    window stack (im2col, plain packing) on a shape with an edge panel (23 x 25 = 575
    columns per image, 17 full NR = 32 panels and 31 columns), two images and 300
    input channels (K = 2700: two K blocks)."""
    import nova.nn.convolution as convolution
    from nova.compiler.targets.cpu import configurator
    if max_rows is not None:
        monkeypatch.setattr(configurator, "B_IN_PLACE_MAX_ROWS", max_rows)
    from nova.compiler.irgen import build_module
    from nova.compiler.lowering.plan import plan_kernels
    from nova.compiler.passes import simplify
    from nova.compiler.passes.fusion import fuse
    from nova.runtime.kernel_cache import KERNELS
    from nova.tensor.realize import pending_graph
    x = RNG.standard_normal((2, 300, 23, 23)).astype(np.float32)
    w = (RNG.standard_normal((8, 300, 3, 3)) / 50).astype(np.float32)
    g = RNG.standard_normal((2, 8, 23, 23)).astype(np.float32)

    def run():
        xt, wt = nv.tensor(x, requires_grad=True), nv.tensor(w, requires_grad=True)
        y = F.conv2d(xt, wt, padding=1)
        dx, dw = nv.autograd.grad(y, [xt, wt], [nv.tensor(g)])
        return y, dx, dw

    y, dx, dw = run()
    if engine == "cpu":        # the forward's and the input gradient's GEMMs read B in place
        plans = plan_kernels(fuse(simplify(build_module(pending_graph(y, dx)))))
        tiled = [p for p in plans if p.schedule.strategy == "tiled"]
        assert sum(p.schedule.b_in_place for p in tiled) == (1 if max_rows is None else 2)
        for p in tiled:     # the kernel hands the driver its table of row starts
            text = KERNELS.llvm_ir(p)
            found = re.search(r'ptrtoint \[\d+ x i64\]\* @"[\w.]+\.b_k" to i64', text)
            assert bool(found) == p.schedule.b_in_place
            assert ("read in place" in p.describe()) == p.schedule.b_in_place
    got = [t.numpy() for t in (y, dx, dw)]
    monkeypatch.setattr(convolution, "_shifted_form", lambda *args: None)
    want = [t.numpy() for t in run()]
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4)
