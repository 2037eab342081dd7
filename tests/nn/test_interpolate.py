"""F.interpolate / nn.Upsample on both engines: PyTorch's source-index rules written
into the test (nearest, nearest-exact, linear and bicubic with and without
align_corners, scale factors kept or recomputed, area, the antialiasing filters, dims
whose size does not change), infinities staying where they are read, gradients by
float64 finite differences, PyTorch where installed, and the errors."""
import numpy as np
import pytest

import nova as nv
import nova.nn as nn
import nova.nn.functional as F
from nova.autograd.gradcheck import gradcheck
from tests.helpers import assert_close

RNG = np.random.default_rng(7)


@pytest.fixture(autouse=True, params=["cpu", "interp"])
def engine(request):
    with nv.engine(request.param):
        yield request.param


def _linear_1d(x, n_out, scale, align):
    """PyTorch's linear resize of the last axis, by its formula, in float64."""
    n = x.shape[-1]
    out = np.zeros(x.shape[:-1] + (n_out,))
    for j in range(n_out):
        if align:
            src = j * (n - 1) / (n_out - 1) if n_out > 1 else 0.0
        else:
            src = max((j + 0.5) * (n / n_out if scale is None else scale) - 0.5, 0.0)
        i0 = min(int(np.floor(src)), n - 1)
        i1 = min(i0 + 1, n - 1)
        t = src - i0
        out[..., j] = (1 - t) * x[..., i0] + t * x[..., i1]
    return out


def test_nearest_modes_read_pytorchs_source_indices():
    x = RNG.standard_normal((2, 3, 5, 7)).astype(np.float32)
    got = F.interpolate(nv.tensor(x), size=(8, 3))
    rows = np.minimum(np.floor(np.arange(8) * 5 / 8), 4).astype(int)
    cols = np.minimum(np.floor(np.arange(3) * 7 / 3), 6).astype(int)
    np.testing.assert_array_equal(got.numpy(), x[:, :, rows][:, :, :, cols])
    exact = F.interpolate(nv.tensor(x), size=(8, 11), mode="nearest-exact")
    rows = np.minimum(np.floor((np.arange(8) + 0.5) * 5 / 8), 4).astype(int)
    cols = np.minimum(np.floor((np.arange(11) + 0.5) * 7 / 11), 6).astype(int)
    np.testing.assert_array_equal(exact.numpy(), x[:, :, rows][:, :, :, cols])
    up = F.interpolate(nv.tensor(x), scale_factor=2)
    np.testing.assert_array_equal(up.numpy(), x.repeat(2, 2).repeat(2, 3))
    ints = F.interpolate(nv.tensor(np.arange(6).reshape(1, 1, 6)), scale_factor=0.5)
    assert ints.dtype == nv.int64 and ints.tolist() == [[[0, 2, 4]]]


@pytest.mark.parametrize("n_out,align,factor", [(9, False, None), (9, True, None),
                                               (3, False, None), (17, False, 2.5)])
def test_linear_blends_the_two_neighbours(n_out, align, factor):
    x = RNG.standard_normal((2, 3, 7)).astype(np.float32)
    kw = dict(scale_factor=factor) if factor else dict(size=n_out)
    got = F.interpolate(nv.tensor(x), mode="linear", align_corners=align, **kw)
    ref = _linear_1d(x.astype(np.float64), n_out, 1 / factor if factor else None, align)
    assert_close(got, ref, rtol=1e-5, atol=1e-6)


def test_bilinear_is_linear_along_each_dim_and_area_is_adaptive_pooling():
    x = RNG.standard_normal((1, 2, 4, 6)).astype(np.float32)
    got = F.interpolate(nv.tensor(x), size=(7, 5), mode="bilinear", align_corners=False)
    ref = _linear_1d(np.swapaxes(_linear_1d(x.astype(np.float64), 5, None, False), 2, 3),
                     7, None, False)
    assert_close(got, np.swapaxes(ref, 2, 3), rtol=1e-5, atol=1e-6)
    area = F.interpolate(nv.tensor(x), size=(2, 3), mode="area")
    assert_close(area, x.reshape(1, 2, 2, 2, 3, 2).mean((3, 5)), rtol=1e-6)
    up = nn.Upsample(scale_factor=2, mode="bilinear", align_corners=True)
    assert up(nv.tensor(x)).shape == (1, 2, 8, 12) and "scale_factor=2" in repr(up)


def _cubic_1d(x, n_out, scale, align):
    """PyTorch's bicubic resize of the last axis by its formulas, in float64: the
    unclamped source, taps floor(src) - 1 .. floor(src) + 2 read at the border when
    outside, the cubic convolution kernel with A = -0.75."""
    n, a = x.shape[-1], -0.75
    out = np.zeros(x.shape[:-1] + (n_out,))
    for j in range(n_out):
        if align:
            src = j * (n - 1) / (n_out - 1) if n_out > 1 else 0.0
        else:
            src = (j + 0.5) * (n / n_out if scale is None else scale) - 0.5
        i = min(int(np.floor(src)), n - 1)
        t = min(max(src - i, 0.0), 1.0)
        for k, dist in zip(range(-1, 3), (t + 1, t, 1 - t, 2 - t)):
            w = ((a + 2) * dist - (a + 3)) * dist * dist + 1 if dist <= 1 else \
                ((a * dist - 5 * a) * dist + 8 * a) * dist - 4 * a
            out[..., j] += w * x[..., min(max(i + k, 0), n - 1)]
    return out


@pytest.mark.parametrize("size,align,factor", [((7, 5), False, None), ((7, 5), True, None),
                                               ((2, 3), False, None), (None, False, 2.5)])
def test_bicubic_is_cubic_convolution_along_each_dim(size, align, factor):
    x = RNG.standard_normal((2, 2, 4, 6)).astype(np.float32)
    kw = dict(scale_factor=factor) if factor else dict(size=size)
    got = F.interpolate(nv.tensor(x), mode="bicubic", align_corners=align, **kw)
    h, w = size if size else (10, 15)
    scale = 1 / factor if factor else None
    ref = _cubic_1d(x.astype(np.float64), w, scale, align)
    ref = np.swapaxes(_cubic_1d(np.swapaxes(ref, 2, 3), h, scale, align), 2, 3)
    assert got.shape == ref.shape
    assert_close(got, ref, rtol=1e-5, atol=1e-5)


def test_an_infinite_pixel_stays_in_the_pixels_that_read_it():
    x = np.zeros((1, 1, 6), np.float32)
    x[0, 0, 0] = np.inf
    got = F.interpolate(nv.tensor(x), size=12, mode="linear").numpy()[0, 0]
    np.testing.assert_array_equal(got, [np.inf] * 3 + [0.0] * 9)     # PyTorch's values too


def test_gradients_match_finite_differences():
    x = RNG.standard_normal((1, 2, 3, 4))
    assert gradcheck(lambda a: F.interpolate(a, size=(5, 3), mode="bilinear"), [x])
    assert gradcheck(lambda a: F.interpolate(a, scale_factor=2, mode="nearest"), [x])
    assert gradcheck(lambda a: F.interpolate(a, size=(4, 7), mode="bilinear",
                                             align_corners=True), [x])
    assert gradcheck(lambda a: F.interpolate(a, size=(5, 2), mode="bicubic"), [x])


def test_against_pytorch():
    torch = pytest.importorskip("torch")
    x = RNG.standard_normal((2, 3, 5, 7)).astype(np.float32)
    for kw in [dict(scale_factor=1.7, mode="bilinear"), dict(size=(9, 4), mode="bilinear",
               align_corners=True), dict(scale_factor=(0.5, 1.5), mode="bilinear",
               recompute_scale_factor=True), dict(scale_factor=2.5, mode="nearest"),
               dict(size=(8, 11), mode="nearest-exact"), dict(size=(2, 3), mode="area"),
               dict(size=(9, 4), mode="bicubic"), dict(scale_factor=2.5, mode="bicubic",
               align_corners=True), dict(scale_factor=(0.5, 1.5), mode="bicubic"),
               dict(size=(2, 9), mode="bilinear", antialias=True),
               dict(scale_factor=(0.4, 0.8), mode="bicubic", antialias=True,
                    align_corners=True),
               dict(size=(3, 3), mode="lanczos", antialias=True),
               dict(scale_factor=(1.1, 0.6), mode="bilinear"),
               dict(scale_factor=(1.1, 1.8), mode="nearest")]:
        a = nv.tensor(x, requires_grad=True)
        t = torch.tensor(x, requires_grad=True)
        ya, yt = F.interpolate(a, **kw), torch.nn.functional.interpolate(t, **kw)
        w = RNG.standard_normal(yt.shape).astype(np.float32)
        (ya * nv.tensor(w)).sum().backward()
        (yt * torch.tensor(w)).sum().backward()
        # bicubic's negative weights cancel: a few float32 ulps of the inputs' size
        atol = 1e-5 if kw["mode"] in ("bicubic", "lanczos") or "antialias" in kw else 1e-6
        np.testing.assert_allclose(ya.numpy(), yt.detach().numpy(), rtol=1e-5, atol=atol)
        np.testing.assert_allclose(a.grad.numpy(), t.grad.numpy(), rtol=1e-5, atol=1e-5)


def test_errors_name_the_op_and_arguments():
    x = nv.zeros(1, 1, 4, 4)
    with pytest.raises(ValueError, match="exactly one of size and scale_factor"):
        F.interpolate(x)
    with pytest.raises(ValueError, match=r"mode 'bicubic' needs a 4-D input"):
        F.interpolate(nv.zeros(1, 1, 4), size=2, mode="bicubic")
    with pytest.raises(ValueError, match=r"mode 'cubic' is not one of"):
        F.interpolate(x, size=2, mode="cubic")
    with pytest.raises(ValueError, match=r"mode 'lanczos' needs antialias=True"):
        F.interpolate(x, size=2, mode="lanczos")
    with pytest.raises(ValueError, match=r"antialias=True needs mode 'bilinear', 'bicubic' "
                                         r"or 'lanczos' and a 4-D input, got mode 'nearest'"):
        F.interpolate(x, size=2, antialias=True)
    with pytest.raises(ValueError, match=r"antialias=True .* got mode 'linear' and \(1, 1, 4\)"):
        F.interpolate(nv.zeros(1, 1, 4), size=2, mode="linear", antialias=True)
    with pytest.raises(ValueError, match=r"mode 'linear' needs a 3-D input"):
        F.interpolate(x, size=2, mode="linear")
    with pytest.raises(ValueError, match="align_corners only applies to the linear and cubic modes"):
        F.interpolate(x, size=2, align_corners=True)
    with pytest.raises(ValueError, match=r"size must be a positive int or 2 of them"):
        F.interpolate(x, size=(2, 0))
    with pytest.raises(TypeError, match="needs a floating point input"):
        F.interpolate(nv.zeros(1, 1, 4, dtype=nv.int64), size=2, mode="linear")


def test_float64_input_blends_with_float64_weights():
    """PyTorch computes the source coordinates and weights of a float64 input in
    float64 (its opmath type): they were float32, ~3e-7 off (linear) to 1e-6 (bicubic)."""
    x = np.array([[[0.0, 1.0, 0.0, 0.0, 0.0]]])
    got = F.interpolate(nv.tensor(x), size=3, mode="linear").numpy()
    # output 0 reads 1/3 of the way from x[0] to x[1] (scale 5/3, (0 + .5) 5/3 - .5 = 1/3)
    np.testing.assert_allclose(got[0, 0], [1 / 3, 0.0, 0.0], rtol=1e-15, atol=0)
    y = RNG.standard_normal((1, 2, 5, 7))
    lin = F.interpolate(nv.tensor(y), scale_factor=1.7, mode="bilinear").numpy()
    rows = _linear_1d(y.transpose(0, 1, 3, 2), 8, 1 / 1.7, False).transpose(0, 1, 3, 2)
    ref = _linear_1d(rows, 11, 1 / 1.7, False)
    np.testing.assert_allclose(lin, ref, rtol=1e-13, atol=1e-14)


def _antialias_1d(x, n_out, mode, align, scale=None):
    """PyTorch's (PIL's) antialiasing resize of the last axis by its formulas, in
    float64: output i averages the window around c = s (i + 0.5), half width
    support = h max(s, 1) (h = 1 triangle, 2 Keys cubic A = -0.5, 3 Lanczos), the taps
    weighted filter((j - c + 0.5) / max(s, 1)) and normalized to sum 1."""
    n = x.shape[-1]
    s = ((n - 1) / (n_out - 1) if n_out > 1 else 0.0) if align else (scale or n / n_out)

    def filt(t):
        t = abs(t)
        if mode == "bilinear":
            return max(1 - t, 0.0)
        if mode == "bicubic":
            a = -0.5
            return ((a + 2) * t - (a + 3)) * t * t + 1 if t < 1 else \
                ((a * t - 5 * a) * t + 8 * a) * t - 4 * a if t < 2 else 0.0
        return 1.0 if t == 0 else (np.sinc(t) * np.sinc(t / 3) if t < 3 else 0.0)
    h = {"bilinear": 1, "bicubic": 2, "lanczos": 3}[mode]
    support, inv = (h * s, 1 / s) if s >= 1 else (h, 1.0)
    out = np.zeros(x.shape[:-1] + (n_out,))
    for i in range(n_out):
        c = s * (i + 0.5)
        js = range(max(int(c - support + 0.5), 0), min(int(c + support + 0.5), n))
        w = np.array([filt((j - c + 0.5) * inv) for j in js])
        out[..., i] = sum(wj / w.sum() * x[..., j] for wj, j in zip(w, js))
    return out


@pytest.mark.parametrize("mode,align", [("bilinear", False), ("bicubic", True),
                                        ("lanczos", False)])
def test_antialias_averages_each_window_with_pils_filters(mode, align):
    x = RNG.standard_normal((1, 2, 9, 12))
    got = F.interpolate(nv.tensor(x), size=(4, 17), mode=mode, antialias=True,
                        align_corners=align)
    ref = _antialias_1d(x, 17, mode, align)                    # the last dim first
    ref = np.swapaxes(_antialias_1d(np.swapaxes(ref, 2, 3), 4, mode, align), 2, 3)
    np.testing.assert_allclose(got.numpy(), ref, rtol=1e-12, atol=1e-13)
    single = F.interpolate(nv.tensor(x.astype(np.float32)), size=(4, 17), mode=mode,
                           antialias=True, align_corners=align)
    assert single.dtype == nv.float32
    assert_close(single, ref, rtol=1e-5, atol=2e-6)
    # a downsampling window covers every pixel it averages: an inf stays in its windows
    y = np.ones((1, 1, 2, 16))
    y[0, 0, 0, 5] = np.inf
    far = F.interpolate(nv.tensor(y), size=(2, 4), mode=mode, antialias=True).numpy()
    assert np.isinf(far[0, 0, 0]).sum() >= 1 and np.isfinite(far[0, 0, 1]).all()


def test_antialias_gradients_and_unchanged_dims():
    x = RNG.standard_normal((1, 1, 5, 7))
    assert gradcheck(lambda a: F.interpolate(a, size=(3, 2), mode="bicubic",
                                             antialias=True), [x])
    same = F.interpolate(nv.tensor(x), size=(5, 3), mode="lanczos", antialias=True)
    np.testing.assert_allclose(same.numpy(), _antialias_1d(x, 3, "lanczos", False),
                               rtol=1e-12)


def test_a_dim_of_unchanged_size_is_copied_by_the_linear_modes_and_2d_nearest():
    """PyTorch's CPU kernels copy such a dim whatever the scale factor: bilinear with
    scale_factor 1.1 on 5 pixels resampled them at scale 1/1.1. Bicubic and 1-D nearest
    do resample (PyTorch's values)."""
    x = RNG.standard_normal((1, 1, 5, 5)).astype(np.float32)
    for mode in ("bilinear", "nearest"):
        np.testing.assert_array_equal(
            F.interpolate(nv.tensor(x), scale_factor=1.1, mode=mode).numpy(), x)
    line = nv.tensor(x[0])
    np.testing.assert_array_equal(
        F.interpolate(line, scale_factor=1.1, mode="linear").numpy(), x[0])
    rows = np.floor(np.arange(5, dtype=np.float32) * np.float32(1 / 1.1)).astype(int)
    np.testing.assert_array_equal(
        F.interpolate(line, scale_factor=1.1, mode="nearest").numpy(), x[0][..., rows])
    cubic = F.interpolate(nv.tensor(x), scale_factor=1.1, mode="bicubic")
    ref = _cubic_1d(x.astype(np.float64), 5, 1 / 1.1, False)
    ref = np.swapaxes(_cubic_1d(np.swapaxes(ref, 2, 3), 5, 1 / 1.1, False), 2, 3)
    assert_close(cubic, ref, rtol=1e-5, atol=1e-5)


def _uint8_pass_reference(x, n_out, align, aa, scale=None):
    """PyTorch's fixed-point bilinear pass over the last axis of a uint8 array, from
    its definition, as a dense (n_out, n_in) matrix: triangle weights normalized per
    output, scaled by 2^p (p the largest < 22 keeping the largest weight in 15 bits),
    rounded; output (2^(p-1) + x . w) >> p clamped to [0, 255]."""
    n = x.shape[-1]
    s = ((n - 1) / (n_out - 1) if n_out > 1 else 0.0) if align else \
        (scale if scale is not None else n / n_out)
    shift = 0.5 if align and not aa else 0.0
    wide = aa and s >= 1.0
    support, inv = (s, 1 / s) if wide else (1.0, 1.0)
    w = np.zeros((n_out, n))
    for i in range(n_out):
        c = s * (i + 0.5 - shift) + shift
        for j in range(max(int(c - support + 0.5), 0), min(int(c + support + 0.5), n)):
            w[i, j] = max(0.0, 1 - abs((j - c + 0.5) * inv))
        w[i] /= w[i].sum()
    p = 0
    while p < 22 and int(0.5 + w.max() * 2 ** (p + 1)) < 2 ** 15:
        p += 1
    wi = np.floor(w * 2 ** p + 0.5).astype(np.int64)
    return np.clip((2 ** (p - 1) + x.astype(np.int64) @ wi.T) >> p, 0, 255).astype(np.uint8)


@pytest.mark.parametrize("size,align,aa", [((3, 2), False, False), ((9, 31), False, True),
                                           ((20, 3), True, False), ((7, 5), True, True),
                                           ((17, 13), False, True), ((1, 6), False, False)])
def test_uint8_bilinear_is_pytorchs_fixed_point_resize(size, align, aa):
    """A uint8 image resizes bilinearly (was a TypeError: "needs a floating point
    input"; torchvision resizes uint8 tensors so) to PyTorch's exact bytes: its
    fixed-point passes, the last dim first, each rounded to uint8 -- not the float
    result rounded (checked against a torch 2.13 output below)."""
    x = RNG.integers(0, 256, (2, 3, 17, 13), dtype=np.uint8)
    got = F.interpolate(nv.tensor(x), size=size, mode="bilinear", align_corners=align,
                        antialias=aa)
    assert got.dtype == nv.uint8 and got.shape == (2, 3) + size
    want = x
    if size[1] != 13:
        want = _uint8_pass_reference(want, size[1], align, aa)
    if size[0] != 17:
        want = np.swapaxes(_uint8_pass_reference(np.swapaxes(want, -1, -2), size[0], align,
                                                 aa), -1, -2)
    np.testing.assert_array_equal(got.numpy(), want)


def test_uint8_bilinear_matches_recorded_pytorch_bytes():
    """torch 2.13's outputs for one small image (antialiased: 111 where the float
    resize gives 110.11 -- the intermediate pass rounds), and a scale factor."""
    x = nv.tensor(np.array([[[[0, 255, 7, 128, 64], [13, 200, 99, 1, 250]]]], np.uint8))
    assert F.interpolate(x, size=(3, 2), mode="bilinear").tolist() == \
        [[[[191, 112], [172, 88], [153, 63]]]]
    assert F.interpolate(x, size=(3, 2), mode="bilinear", antialias=True).tolist() == \
        [[[[112, 86], [111, 99], [109, 112]]]]
    assert F.interpolate(x, size=(2, 7), mode="bilinear", align_corners=True).tolist() == \
        [[[[0, 170, 172, 7, 88, 107, 64], [13, 138, 166, 99, 34, 84, 250]]]]
    y = F.interpolate(x, scale_factor=(1.0, 0.5), mode="bilinear")
    np.testing.assert_array_equal(
        y.numpy(), _uint8_pass_reference(x.numpy(), 2, False, False, scale=2.0))
    with pytest.raises(TypeError, match="antialias=True only"):
        F.interpolate(x, size=(3, 2), mode="bicubic")
    with pytest.raises(TypeError, match="uint8 takes 'bilinear' and antialiased 'bicubic'"):
        F.interpolate(x, size=(3, 2), mode="area")


def test_uint8_antialiased_bicubic_matches_recorded_pytorch_bytes():
    """uint8 bicubic with antialias=True (torchvision's Resize of uint8 tensors; was a
    TypeError) gives torch 2.13's bytes: Keys' cubic (A = -0.5) in PIL's fixed point,
    the intermediate pass rounded (109 and 104 where the float resize gives 109.77
    and 103.16, 83 for 82.43). Without antialiasing it is refused, not approximated."""
    x = nv.tensor(np.array([[[[0, 255, 7, 128, 64], [13, 200, 99, 1, 250]]]], np.uint8))
    assert F.interpolate(x, size=(3, 2), mode="bicubic", antialias=True).tolist() == \
        [[[[109, 83], [107, 101], [104, 118]]]]
    assert F.interpolate(x, size=(4, 9), mode="bicubic", antialias=True).tolist() == \
        [[[[0, 80, 251, 158, 0, 71, 138, 78, 42], [0, 77, 234, 162, 26, 57, 105, 105, 100],
           [0, 70, 202, 172, 80, 31, 39, 159, 214], [0, 67, 185, 176, 107, 17, 6, 186, 255]]]]
    with pytest.raises(TypeError, match=r"uint8 image \(1, 1, 2, 5\) is supported with "
                                        r"antialias=True only"):
        F.interpolate(x, size=(4, 9), mode="bicubic")


@pytest.mark.parametrize("size,align", [((5, 11), False), ((20, 4), True), ((17, 17), False),
                                        ((7, 50), True), ((31, 97), False)])
def test_uint8_antialiased_bicubic_is_pytorchs_bytes(size, align):
    """Against PyTorch itself (where installed): up and down, both align_corners."""
    torch = pytest.importorskip("torch")
    x = RNG.integers(0, 256, (2, 3, 13, 24), dtype=np.uint8)
    want = torch.nn.functional.interpolate(torch.from_numpy(x), size=size, mode="bicubic",
                                           antialias=True, align_corners=align).numpy()
    got = F.interpolate(nv.tensor(x), size=size, mode="bicubic", antialias=True,
                        align_corners=align)
    assert got.dtype == nv.uint8
    np.testing.assert_array_equal(got.numpy(), want)
