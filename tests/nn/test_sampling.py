"""F.affine_grid and F.grid_sample (nova/nn/sampling.py) against a float64 reference
written from PyTorch's definitions (unnormalize, padding modes, taps and weights), the
identity transform, special values, gradients by finite differences, and errors."""
import itertools
import math
import warnings

import numpy as np
import pytest

import nova as nv
import nova.nn.functional as F
from nova.autograd.gradcheck import gradcheck
from tests.helpers import assert_close

RNG = np.random.default_rng(0)
MODES = ("bilinear", "nearest", "bicubic")
PADDINGS = ("zeros", "border", "reflection")


def _unnormalize(c, n, align):
    return (c + 1) / 2 * (n - 1) if align else ((c + 1) * n - 1) / 2


def _reflect(c, twice_low, twice_high):
    if twice_low == twice_high:
        return 0.0
    low, span = twice_low / 2, (twice_high - twice_low) / 2
    c = abs(c - low)
    extra = math.fmod(c, span)
    return extra + low if math.floor(c / span) % 2 == 0 else span - extra + low


def _padded(c, n, padding, align):
    if padding == "reflection":
        c = _reflect(c, 0, 2 * (n - 1)) if align else _reflect(c, -1, 2 * n - 1)
    if padding in ("border", "reflection"):
        c = min(max(c, 0.0), n - 1.0)
    return c


def _cubic(t, a=-0.75):
    def near(x):
        return ((a + 2) * x - (a + 3)) * x * x + 1

    def far(x):
        return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a
    return [far(t + 1), near(t), near(1 - t), far(2 - t)]


def _dim_taps(c, n, mode, padding, align):
    """(pixel coordinate, weight) pairs one dim reads at normalized coordinate ``c``."""
    src = _unnormalize(c, n, align)
    if mode == "bicubic":
        lo = math.floor(src)
        return [(_padded(lo - 1 + j, n, padding, align), w)
                for j, w in enumerate(_cubic(src - lo))]
    src = _padded(src, n, padding, align)
    if mode == "nearest":
        return [(round(src), 1.0)]                  # Python's round: ties to even
    lo = math.floor(src)
    return [(lo, lo + 1 - src), (lo + 1, src - lo)]


def grid_sample_ref(x, grid, mode, padding, align):
    n, c = x.shape[:2]
    spatial = x.shape[2:]
    nd = len(spatial)
    out = np.zeros((n, c) + grid.shape[1:-1])
    for b in range(n):
        for pos in np.ndindex(grid.shape[1:-1]):
            taps = [_dim_taps(grid[(b,) + pos + (nd - 1 - d,)], spatial[d], mode, padding,
                              align) for d in range(nd)]
            for combo in itertools.product(*taps):
                idx = tuple(int(p) for p, _ in combo)
                if all(0 <= i < s for i, s in zip(idx, spatial)):
                    out[(b, slice(None)) + pos] += x[(b, slice(None)) + idx] * \
                        np.prod([w for _, w in combo])
    return out


def affine_grid_ref(theta, size, align):
    spatial = size[2:]

    def centres(k):
        if k == 1:
            return np.zeros(1)
        return np.linspace(-1, 1, k) * (1 if align else (k - 1) / k)
    axes = np.meshgrid(*[centres(k) for k in spatial], indexing="ij")
    base = np.stack(list(reversed(axes)) + [np.ones(spatial)], -1)     # [x, y, (z,) 1]
    return np.einsum("...k,nik->n...i", base, theta)


def _cases(modes):
    """Every mode and padding mode, align_corners alternating between them."""
    return [(m, p, bool(i % 2)) for i, (m, p) in enumerate(itertools.product(modes, PADDINGS))]


def test_grid_sample_4d_every_mode_and_padding():
    x = RNG.standard_normal((2, 3, 4, 5)).astype(np.float32)
    grid = RNG.uniform(-1.6, 1.6, (2, 3, 2, 2)).astype(np.float32)
    grid[0, 0, 0] = [-3.7, 2.9]                    # several reflections
    cases = _cases(MODES) + [("bilinear", "zeros", True), ("bicubic", "reflection", False)]
    outs = [F.grid_sample(nv.tensor(x), nv.tensor(grid), m, p, a) for m, p, a in cases]
    nv.realize(*outs)
    for (m, p, a), out in zip(cases, outs):
        assert out.dtype == nv.float32 and out.shape == (2, 3, 3, 2)
        assert_close(out, grid_sample_ref(x.astype(np.float64), grid.astype(np.float64),
                                          m, p, a), rtol=1e-5, atol=2e-6)


def test_grid_sample_5d_affine_grid_and_identity():
    x5 = RNG.standard_normal((2, 2, 3, 4, 5))
    g5 = RNG.uniform(-1.4, 1.4, (2, 2, 3, 2, 3))
    cases = _cases(("bilinear",)) + [("nearest", "reflection", False)]
    outs = [F.grid_sample(nv.tensor(x5), nv.tensor(g5), m, p, a) for m, p, a in cases]
    theta2, theta3 = RNG.standard_normal((2, 2, 3)), RNG.standard_normal((2, 3, 4))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")      # the unit-size warning of align_corners=True
        grids = [F.affine_grid(nv.tensor(theta2), (2, 3, 4, 1), a) for a in (False, True)]
    grids += [F.affine_grid(nv.tensor(theta3), (2, 1, 2, 3, 4), a) for a in (False, True)]
    # the identity transform samples every pixel at its centre, in every mode
    x = RNG.standard_normal((1, 2, 3, 4))
    eye = nv.tensor(np.eye(2, 3)[None])
    identity = [("bilinear", False), ("bilinear", True), ("nearest", False), ("bicubic", True)]
    same = [F.grid_sample(nv.tensor(x), F.affine_grid(eye, (1, 2, 3, 4), a), m, "zeros", a)
            for m, a in identity]
    nv.realize(*outs, *grids, *same)
    for (m, p, a), out in zip(cases, outs):
        assert_close(out, grid_sample_ref(x5, g5, m, p, a), rtol=1e-10, atol=1e-12)
    for g, a in zip(grids[:2], (False, True)):
        assert_close(g, affine_grid_ref(theta2, (2, 3, 4, 1), a), rtol=1e-12, atol=1e-14)
    for g, a in zip(grids[2:], (False, True)):
        assert_close(g, affine_grid_ref(theta3, (2, 1, 2, 3, 4), a), rtol=1e-12, atol=1e-14)
    for out in same:
        assert_close(out, x, rtol=1e-12, atol=1e-14)


def test_grid_sample_special_values():
    # NaN and infinite grid coordinates; an inf pixel at flat index 0, where a tap
    # outside the input is pointed before it is masked
    x = np.arange(12.0).reshape(1, 1, 3, 4)
    x[0, 0, 0, 0] = np.inf
    grid = np.array([[[[1.3, 0.0], [np.nan, 0.0], [np.inf, 0.0], [-1.0, -np.inf]]]])
    outs = {p: F.grid_sample(nv.tensor(x), nv.tensor(grid), "bilinear", p, True)
            for p in PADDINGS}
    near = F.grid_sample(nv.tensor(x), nv.tensor(grid), "nearest", "border", True)
    nv.realize(near, *outs.values())
    # zeros: outside reads 0 (x = 1.3 blends column 3 with the 0 beyond it)
    assert_close(outs["zeros"], [[[[0.55 * 7.0, 0.0, 0.0, 0.0]]]])
    # border: NaN reads column 0; inf clips to the last column, -inf to row 0 (the inf)
    assert_close(outs["border"], [[[[7.0, 4.0, 7.0, np.inf]]]])
    assert_close(near, [[[[7.0, 4.0, 7.0, np.inf]]]])
    # reflection: 1.3 reflects to 0.7 (column 2.55); an infinite coordinate to 0
    assert_close(outs["reflection"], [[[[6.55, 4.0, 4.0, np.inf]]]])


def test_grid_sample_empty_output():
    out = F.grid_sample(nv.ones(1, 2, 3, 3), nv.zeros(1, 0, 4, 2), align_corners=False)
    assert out.shape == (1, 2, 0, 4) and out.numpy().size == 0


def test_gradients():
    # w.r.t. input, grid and theta (an affine grid plus an offset), through bilinear
    # reflection and bicubic border sampling
    x = RNG.standard_normal((1, 1, 3, 4))
    grid = RNG.uniform(-1.3, 1.3, (1, 2, 2, 2))
    theta = np.array([[[0.9, -0.2, 0.1], [0.3, 1.1, -0.2]]]) + \
        RNG.uniform(-0.1, 0.1, (1, 2, 3))

    def sampled(a, g, t):
        moved = F.affine_grid(t, (1, 1, 2, 2), False) + g
        return (F.grid_sample(a, moved, "bilinear", "reflection", False),
                F.grid_sample(a, g, "bicubic", "border", True))
    assert gradcheck(sampled, [x, grid, theta])


def test_nearest_gives_the_grid_a_zero_gradient():
    """As PyTorch: the grid is in the graph, its gradient zeros (not None)."""
    x, g = nv.ones(1, 1, 2, 2, requires_grad=True), nv.zeros(1, 1, 1, 2, requires_grad=True)
    gx, gg = nv.autograd.grad(F.grid_sample(x, g, "nearest", align_corners=False).sum(),
                              [x, g], allow_unused=True)
    assert gg.tolist() == [[[[0.0, 0.0]]]] and gx.shape == (1, 1, 2, 2)


def test_align_corners_default_warns():
    x, g = nv.ones(1, 1, 2, 2), nv.zeros(1, 1, 1, 2)
    with pytest.warns(UserWarning, match="align_corners=False since 1.3.0"):
        F.grid_sample(x, g)
    with pytest.warns(UserWarning, match="align_corners=False since 1.3.0"):
        F.affine_grid(nv.zeros(1, 2, 3), (1, 1, 2, 2))
    with pytest.warns(UserWarning, match="unit-size grids"):
        F.affine_grid(nv.zeros(1, 2, 3), (1, 1, 1, 2), align_corners=True)


def test_errors():
    x, g = nv.ones(1, 1, 2, 2), nv.zeros(1, 1, 1, 2)
    with pytest.raises(ValueError, match="grid_sample: expected mode"):
        F.grid_sample(x, g, "linear", align_corners=False)
    with pytest.raises(ValueError, match="grid_sample: expected padding_mode"):
        F.grid_sample(x, g, padding_mode="reflect", align_corners=False)
    with pytest.raises(ValueError, match="4-D or 5-D input and grid"):
        F.grid_sample(nv.ones(1, 2, 2), g, align_corners=False)
    with pytest.raises(ValueError, match="same batch size"):
        F.grid_sample(x, nv.zeros(2, 1, 1, 2), align_corners=False)
    with pytest.raises(ValueError, match="size 2 in the last dim"):
        F.grid_sample(x, nv.zeros(1, 1, 1, 3), align_corners=False)
    with pytest.raises(ValueError, match="bicubic interpolation only supports 4-D"):
        F.grid_sample(nv.ones(1, 1, 2, 2, 2), nv.zeros(1, 1, 1, 1, 3), "bicubic",
                      align_corners=False)
    with pytest.raises(ValueError, match="non-empty spatial"):
        F.grid_sample(nv.ones(1, 1, 0, 2), g, align_corners=False)
    with pytest.raises(TypeError, match="same dtype"):
        F.grid_sample(x, g.to(nv.float64), align_corners=False)
    with pytest.raises(TypeError, match="floating point input"):
        F.grid_sample(nv.ones(1, 1, 2, 2, dtype=nv.int64), g, align_corners=False)
    with pytest.raises(ValueError, match="floating point type"):
        F.affine_grid(nv.zeros(1, 2, 3, dtype=nv.int64), (1, 1, 2, 2), False)
    with pytest.raises(ValueError, match=r"shape \(1, 3, 4\) for size"):
        F.affine_grid(nv.zeros(1, 2, 3), (1, 1, 2, 2, 2), False)
    with pytest.raises(NotImplementedError, match="4-D and 5-D sizes"):
        F.affine_grid(nv.zeros(1, 2, 3), (1, 1, 2), False)
    with pytest.raises(ValueError, match="positive output size"):
        F.affine_grid(nv.zeros(1, 2, 3), (1, 1, 0, 2), False)
