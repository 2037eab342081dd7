"""Silently wrong results a port probe (``import nova as torch``) found in reductions
and indexing ops: half-precision reductions that overflowed in the half dtype, gradients
split or NaN where PyTorch's are whole or 0, ``dim=()`` reducing nothing, ``index_fill``
ignoring negative and out-of-range indices, and ``clamp`` ignoring a NaN bound.
Expected values come from numpy/math, written here."""
import math

import ml_dtypes
import numpy as np
import pytest

import nova as nv
import nova.nn.functional as F

NAN = math.nan


def _rounded(value, dtype):
    """``value`` (computed in float64) rounded once to a half dtype."""
    return float(np.array(value, np.float64).astype(dtype))


def _grads(fn, *values, dtype=nv.float32):
    """The gradient of ``fn(*leaves).sum()`` for each leaf, as arrays."""
    leaves = [nv.tensor(v, dtype=dtype, requires_grad=True) for v in values]
    out = fn(*leaves)
    return [g.numpy() for g in nv.autograd.grad(out.sum(), leaves)]


def test_half_reductions_accumulate_in_float32_and_round_once():
    """PyTorch accumulates float16/bfloat16 reductions in float32: a mean of 1024
    hundreds is 100, not inf (its sum, 102400, is past float16's 65504); squares of
    128 (16384) summed overflow no variance. A plain ``sum`` still rounds its result to
    the dtype, inf when it does not fit, as there."""
    h = nv.full((1024,), 100.0, dtype=nv.float16)
    r = nv.arange(256.0).half()
    b = nv.arange(1024.0).bfloat16()
    tenths = nv.full((4096,), 0.1, dtype=nv.float16)
    outs = {
        "mean": h.mean(), "mean_dim": h.view(2, 512).mean(1), "nanmean": h.nanmean(),
        "norm": h.norm(), "norm_dim": h.view(2, 512).norm(dim=1),
        "norm3": nv.linalg.vector_norm(h, 3), "dist": nv.dist(h, nv.zeros_like(h)),
        "mse": F.mse_loss(h, nv.zeros_like(h)), "var": r.var(), "std": r.std(),
        "var_mean": nv.var_mean(r)[0], "std_dim": r.view(2, 128).std(1, correction=0),
        "cos": F.cosine_similarity(h.view(2, 512), h.view(2, 512)),
        "normalize": F.normalize(h.view(2, 512))[:, 0],
        "bf_var": b.var(), "bf_std": b.std(), "bf_mean": b.mean(), "bf_norm": b.norm(),
        "sum_over": h.sum(), "sum_tenths": tenths.sum(),
    }
    nv.realize(*outs.values())
    got = {k: v.float().numpy() for k, v in outs.items()}
    f16, bf16 = np.float16, ml_dtypes.bfloat16
    ramp = np.arange(256.0)
    big = np.arange(1024.0).astype(bf16).astype(np.float64)     # (bfloat16 has 8 bits)
    want = {
        "mean": 100.0, "mean_dim": [100.0, 100.0], "nanmean": 100.0,
        "norm": 3200.0, "norm_dim": [_rounded(100 * math.sqrt(512), f16)] * 2,
        "norm3": _rounded((1024 * 100.0 ** 3) ** (1 / 3), f16), "dist": 3200.0,
        "mse": 10000.0, "var": _rounded(ramp.var(ddof=1), f16),
        "std": _rounded(ramp.std(ddof=1), f16), "var_mean": _rounded(ramp.var(ddof=1), f16),
        "std_dim": [_rounded(ramp[:128].std(), f16)] * 2,
        "bf_var": _rounded(big.var(ddof=1), bf16), "bf_std": _rounded(big.std(ddof=1), bf16),
        "bf_mean": _rounded(big.mean(), bf16),
        "bf_norm": _rounded(math.sqrt((big ** 2).sum()), bf16),
        "sum_over": math.inf, "sum_tenths": _rounded(4096 * float(np.float16(0.1)), f16),
    }
    for k, v in want.items():
        np.testing.assert_array_equal(got[k], v, err_msg=k)
    # the unit vectors' entries are float16 roundings: within float16's eps of exact
    np.testing.assert_allclose(got["cos"], [1.0, 1.0], rtol=2 ** -9)
    np.testing.assert_allclose(got["normalize"], [1 / math.sqrt(512)] * 2, rtol=2 ** -9)
    assert outs["mean"].dtype == nv.float16 and outs["bf_var"].dtype == nv.bfloat16


def test_max_and_min_along_a_dim_route_the_gradient_to_the_returned_index():
    """``max(dim)``/``min(dim)`` give the whole gradient to the index they return (the
    first extreme, or the first NaN), as PyTorch; ``amax``/``amin`` and ``maximum``
    split it evenly among ties; ``fmax``/``fmin`` give a tie to their first operand."""
    x = np.array([[1.0, 3.0, 3.0], [2.0, 2.0, 1.0], [0.0, NAN, NAN]])
    tie = np.array([[3.0, 1.0, 1.0]])
    (g_max,) = _grads(lambda t: t.max(1).values, x)
    (g_min,) = _grads(lambda t: t.min(1, keepdim=True).values, tie)
    (g_amax,) = _grads(lambda t: t.amax(1), x[:2])
    (g_amin,) = _grads(lambda t: t.amin(1), tie)
    a, b = [1.0, 1.0, NAN, 2.0, NAN], [1.0, 2.0, 1.0, NAN, NAN]
    fmax_ga, fmax_gb = _grads(nv.fmax, a, b)
    fmin_ga, fmin_gb = _grads(nv.fmin, a, b)
    max_ga, max_gb = _grads(nv.maximum, [1.0, 1.0], [1.0, 0.0])
    np.testing.assert_array_equal(g_max, [[0, 1, 0], [1, 0, 0], [0, 1, 0]])
    np.testing.assert_array_equal(g_min, [[0, 1, 0]])
    np.testing.assert_array_equal(g_amax, [[0, 0.5, 0.5], [0.5, 0.5, 0]])
    np.testing.assert_array_equal(g_amin, [[0, 0.5, 0.5]])
    np.testing.assert_array_equal(fmax_ga, [1, 0, 0, 1, 1])
    np.testing.assert_array_equal(fmax_gb, [0, 1, 1, 0, 0])
    np.testing.assert_array_equal(fmin_ga, [1, 1, 0, 1, 1])
    np.testing.assert_array_equal(fmin_gb, [0, 0, 1, 0, 0])
    np.testing.assert_array_equal(max_ga, [0.5, 1])
    np.testing.assert_array_equal(max_gb, [0.5, 0])

    t = nv.tensor(x)
    mx, mn = t.max(1), t.min(-1, keepdim=True)
    pairs = (nv.fmax(nv.tensor(a), nv.tensor(b)), nv.fmin(nv.tensor(a), nv.tensor(b)),
             nv.fmax(nv.tensor([-0.0, 0.0]), nv.tensor([0.0, -0.0])))
    nv.realize(*mx, *mn, *pairs)
    np.testing.assert_array_equal(mx.values.numpy(), [3, 2, NAN])
    np.testing.assert_array_equal(mx.indices.numpy(), [1, 0, 1])
    np.testing.assert_array_equal(mn.values.numpy(), [[1], [1], [NAN]])
    np.testing.assert_array_equal(mn.indices.numpy(), [[0], [2], [1]])
    np.testing.assert_array_equal(pairs[0].numpy(), [1, 2, 1, 2, NAN])
    np.testing.assert_array_equal(pairs[1].numpy(), [1, 1, 1, 2, NAN])
    np.testing.assert_array_equal(np.signbit(pairs[2].numpy()), [True, False])  # a wins

    s = nv.tensor(5.0).max(0)      # a 0-d input: itself and index 0
    assert s.values.item() == 5.0 and s.indices.item() == 0 and s.values.shape == ()


def test_gradients_are_zero_not_nan_at_removable_points():
    """PyTorch's gradient is 0 where the formula's is 0 * inf: a constant's ``std``
    (overall and along a dim), ``atan2`` at the origin, ``sinc`` at 0."""
    (g_std,) = _grads(lambda t: t.std(), [2.0, 2.0, 2.0])
    (g_std_dim,) = _grads(lambda t: t.std(1), [[2.0, 2.0, 2.0], [1.0, 2.0, 3.0]])
    (g_std_keep,) = _grads(lambda t: t.std(0, keepdim=True, correction=0), [[5.0], [5.0]])
    gy, gx = _grads(nv.atan2, [0.0, 1.0, 0.0, -0.0], [0.0, 0.0, 2.0, -0.0])
    (g_sinc,) = _grads(nv.sinc, [0.0, 1.0, 0.5, -0.0])
    np.testing.assert_array_equal(g_std, [0, 0, 0])
    # row 1: (x - mean) / ((n - 1) std) = [-1, 0, 1] / 2
    np.testing.assert_allclose(g_std_dim, [[0, 0, 0], [-0.5, 0, 0.5]], atol=1e-6)
    np.testing.assert_array_equal(g_std_keep, [[0], [0]])
    np.testing.assert_array_equal(gy, [0, 0, 0.5, 0])       # x / (x^2 + y^2)
    np.testing.assert_array_equal(gx, [0, -1, 0, 0])        # -y / (x^2 + y^2)

    def sinc_slope(v):
        return (math.pi * v * math.cos(math.pi * v) - math.sin(math.pi * v)) / (math.pi * v * v)

    np.testing.assert_allclose(g_sinc, [0, sinc_slope(1.0), sinc_slope(0.5), 0], atol=1e-6)

    # the values are unchanged
    outs = (nv.tensor([2.0, 2.0]).std(), nv.sinc(nv.tensor([0.0, 0.5])),
            nv.atan2(nv.tensor([0.0, 0.0, -0.0]), nv.tensor([0.0, -0.0, -0.0])))
    nv.realize(*outs)
    assert outs[0].item() == 0.0
    np.testing.assert_allclose(outs[1].numpy(), [1.0, 2 / math.pi], rtol=1e-6)
    np.testing.assert_array_equal(outs[2].numpy(), np.float32([0.0, math.pi, -math.pi]))

    # float64 finite differences, at the removable points included (central
    # differences of std at a constant and of sinc at 0 are 0)
    x = nv.tensor([[2.0, 2.0, 2.0], [0.3, -1.2, 0.7]], dtype=nv.float64, requires_grad=True)
    y = nv.tensor([0.0, 0.4, -1.5], dtype=nv.float64, requires_grad=True)
    z = nv.tensor([0.8, -0.3, 2.0], dtype=nv.float64, requires_grad=True)
    assert nv.autograd.gradcheck(
        lambda a, b, c: (a.std(1), a.std(), nv.sinc(b), nv.atan2(c, b + 0.5), a.max(0).values,
                         a[1:].min(1).values, nv.fmax(b, c), nv.fmin(b, c)), (x, y, z))


def test_atan2_second_derivative_at_the_origin_is_finite():
    y = nv.tensor(0.0, dtype=nv.float64, requires_grad=True)
    x = nv.tensor(0.0, dtype=nv.float64, requires_grad=True)
    gy, gx = nv.autograd.grad(nv.atan2(y, x), (y, x), create_graph=True)
    hy = nv.autograd.grad(gy, (y, x))
    nv.realize(gy, gx, *hy)
    assert [gy.item(), gx.item(), hy[0].item(), hy[1].item()] == [0.0, 0.0, 0.0, 0.0]


def test_an_empty_dim_tuple_reduces_every_dim():
    """``dim=()`` or ``[]`` reduces everything, as ``dim=None`` (PyTorch's reductions),
    with ``keepdim`` keeping every dim as size 1; ``any``/``all`` reduce nothing, as
    PyTorch's do; ``aminmax`` takes an int, not a tuple."""
    a = np.arange(1.0, 7.0).reshape(2, 3)
    x = nv.tensor(a)
    cases = {
        "sum": (lambda d, k: x.sum(d, keepdim=k), a.sum()),
        "int_sum": (lambda d, k: nv.tensor([[1, 2], [3, 4]]).sum(d, keepdim=k), 10),
        "mean": (lambda d, k: x.mean(d, keepdim=k), a.mean()),
        "amax": (lambda d, k: x.amax(d, keepdim=k), 6.0),
        "amin": (lambda d, k: x.amin(d, keepdim=k), 1.0),
        "norm": (lambda d, k: x.norm(dim=d, keepdim=k), math.sqrt((a ** 2).sum())),
        "norm1": (lambda d, k: nv.linalg.vector_norm(x, 1, dim=d, keepdim=k), 21.0),
        "norm_inf": (lambda d, k: nv.linalg.vector_norm(x, math.inf, dim=d, keepdim=k), 6.0),
        "nansum": (lambda d, k: x.nansum(d, keepdim=k), 21.0),
        "nanmean": (lambda d, k: x.nanmean(d, keepdim=k), 3.5),
        "std": (lambda d, k: x.std(d, keepdim=k), a.std(ddof=1)),
        "var": (lambda d, k: x.var(d, keepdim=k), a.var(ddof=1)),
        "var_mean": (lambda d, k: nv.var_mean(x, d, keepdim=k)[0], a.var(ddof=1)),
        "std_mean": (lambda d, k: nv.std_mean(x, d, keepdim=k)[1], 3.5),
        "logsumexp": (lambda d, k: nv.logsumexp(x, d, keepdim=k), np.log(np.exp(a).sum())),
    }
    outs = {}
    for name, (fn, _) in cases.items():
        for d in ((), []):
            for k in (False, True):
                outs[name, str(d), k] = fn(d, k)
    counts = [nv.count_nonzero(nv.tensor([[0.0, 1.0], [2.0, 0.0]]), d) for d in ((), [])]
    truth = (nv.tensor([[0.0, 1.0], [2.0, 0.0]]).any(()), nv.tensor([[0.0, 1.0]]).all([]))
    nv.realize(*outs.values(), *counts, *truth)
    for (name, d, k), out in outs.items():
        assert out.shape == ((1, 1) if k else ()), (name, d, k)
        np.testing.assert_allclose(out.numpy(), np.full(out.shape, cases[name][1]), rtol=1e-6,
                                   err_msg=f"{name} dim={d} keepdim={k}")
    assert outs["int_sum", "()", False].dtype == nv.int64
    assert [c.shape for c in counts] == [(), ()] and [c.item() for c in counts] == [2, 2]
    np.testing.assert_array_equal(truth[0].numpy(), [[False, True], [True, False]])
    np.testing.assert_array_equal(truth[1].numpy(), [[False, True]])
    with pytest.raises(TypeError, match=r"aminmax: dim must be an int or None, got \(\)"):
        nv.aminmax(x, dim=())


def test_index_fill_wraps_negative_indices_and_rejects_out_of_range_ones():
    """Negative indices count from the end; an index outside ``[-n, n)`` is an
    IndexError at the call when its values are known, a RealizationError naming it
    when computed (never a silently skipped slice)."""
    a = np.arange(8.0).reshape(2, 4)
    x = nv.tensor(a)
    outs = (x.index_fill(1, nv.tensor([-1]), 9.0), x.index_fill(1, nv.tensor([-4, 1, -4]), 9.0),
            x.index_fill(0, nv.tensor(-1), nv.tensor(7.0)),
            x.index_fill(-1, nv.tensor([3, -2], dtype=nv.int32) * 1, -1.0),
            x.index_fill(1, nv.tensor([], dtype=nv.int64), 9.0),
            nv.tensor(5.0).index_fill(0, nv.tensor([-1]), 1.0))
    nv.realize(*outs)
    want = [a.copy() for _ in range(5)]
    want[0][:, -1] = 9
    want[1][:, [0, 1]] = 9
    want[2][-1] = 7
    want[3][:, [3, 2]] = -1
    for got, w in zip(outs, want):
        np.testing.assert_array_equal(got.numpy(), w)
    assert outs[5].item() == 1.0

    (g,) = _grads(lambda t: t.index_fill(1, nv.tensor([-1, 0]), 0.0), a)
    np.testing.assert_array_equal(g, [[0, 1, 1, 0], [0, 1, 1, 0]])

    for bad in (4, -5):
        with pytest.raises(IndexError, match=rf"index_fill: index {bad} is out of bounds for "
                                             r"dim 1 with size 4 \(shape \(2, 4\)\)"):
            x.index_fill(1, nv.tensor([0, bad]), 9.0)
    computed = x.index_fill(1, nv.tensor([0, 4]) * 1, 9.0)
    with pytest.raises(nv.RealizationError,
                       match="wrap_index: index 4 is out of bounds for dim 1 with size 4"):
        computed.numpy()
    with pytest.raises(IndexError, match="index_fill: index must be an int32 or int64 tensor, "
                                         "got float32"):
        x.index_fill(1, nv.tensor([1.0]), 9.0)
    with pytest.raises(RuntimeError, match=r"index_fill: index must be 0-D or 1-D, got shape "
                                           r"\(1, 1\)"):
        x.index_fill(1, nv.tensor([[1]]), 9.0)
    with pytest.raises(RuntimeError, match=r"value must be a number or a 0-D tensor, got "
                                           r"shape \(1,\)"):
        x.index_fill(1, nv.tensor([1]), nv.tensor([9.0]))


def test_clamp_propagates_a_nan_bound():
    """A NaN bound gives NaN (PyTorch: the comparison fails, the bound is taken), a
    number or a tensor, min or max; a NaN input stays NaN; no gradient flows through
    a NaN bound."""
    x = nv.tensor([2.0, 1.0, NAN])
    outs = (x.clamp(min=NAN), x.clamp(max=NAN), x.clamp(min=0.0, max=1.5),
            x.clamp(min=nv.tensor([NAN, 0.0, 0.0])), nv.tensor([1, 2]).clamp(min=NAN))
    nv.realize(*outs)
    np.testing.assert_array_equal(outs[0].numpy(), [NAN] * 3)
    np.testing.assert_array_equal(outs[1].numpy(), [NAN] * 3)
    np.testing.assert_array_equal(outs[2].numpy(), [1.5, 1.0, NAN])
    np.testing.assert_array_equal(outs[3].numpy(), [NAN, 1.0, NAN])
    np.testing.assert_array_equal(outs[4].numpy(), [NAN, NAN])
    assert outs[4].dtype == nv.float32
    (g,) = _grads(lambda t: t.clamp(min=nv.tensor([NAN, 0.0, 3.0])), [2.0, 1.0, 1.0])
    np.testing.assert_array_equal(g, [0, 1, 0])


def test_matches_torch_where_installed():
    """The cases above against PyTorch itself, where it is installed."""
    torch = pytest.importorskip("torch")
    h = np.full((1024,), 100.0, np.float16)
    for lib in (torch, nv):
        t = lib.tensor(h)
        got = [t.mean().item(), t.norm().item(), t.var().item(), lib.tensor(h[:8]).std().item()]
        x = lib.tensor([[1.0, 3.0, 3.0]], requires_grad=True)
        x.max(1).values.sum().backward()
        got += [x.grad.tolist(), tuple(lib.ones(2, 3).sum(()).shape),
                lib.arange(4.0).view(1, 4).index_fill(1, lib.tensor([-1]), 9.0).tolist()]
        if lib is torch:
            want = got
    assert str(got) == str(want)


def test_sinc_has_its_true_derivatives_at_and_near_zero():
    """The first derivative at 0 is 0 and the second -pi^2/3 (PyTorch: NaN); values on
    both sides of the series' switch at 1e-3 agree with the quotient in float64."""
    x = nv.tensor(np.array([0.0, 9.9e-4, 1.01e-3, -0.4, 2.5]), requires_grad=True)
    y = nv.sinc(x)
    (g,) = nv.autograd.grad(y.sum(), [x], create_graph=True)
    (h,) = nv.autograd.grad(g.sum(), [x])
    xs = np.array([0.0, 9.9e-4, 1.01e-3, -0.4, 2.5])
    px = np.pi * np.where(xs == 0, 1.0, xs)
    want = np.where(xs == 0, 1.0, np.sin(px) / px)
    np.testing.assert_allclose(y.detach().numpy(), want, rtol=1e-15)
    assert g.detach().numpy()[0] == 0.0
    np.testing.assert_allclose(h.numpy()[0], -np.pi ** 2 / 3, rtol=1e-12)
    dq = (np.cos(px) * px - np.sin(px)) / (px * xs + (xs == 0))   # d/dx of the quotient
    np.testing.assert_allclose(g.detach().numpy()[1:], dq[1:], rtol=1e-9)


def test_searchsorted_and_bucketize_place_nan_as_pytorchs_binary_search():
    """A NaN value goes past every entry (it was put at 0); a NaN entry, sorted last, is
    never below a value, and a value no entry reaches goes to the end (PyTorch 2.13)."""
    nan = math.nan
    seq = nv.tensor([1.0, 2.0, nan])
    vals = nv.tensor([nan, 2.0, 5.0, 0.0])
    outs = [nv.searchsorted(seq, vals), nv.searchsorted(seq, vals, right=True),
            nv.searchsorted(nv.tensor([1.0, 2.0, 3.0]), nv.tensor([nan, 2.0])),
            nv.bucketize(nv.tensor([nan, 1.5]), nv.tensor([1.0, 2.0]), right=True)]
    nv.realize(*outs)
    assert [o.tolist() for o in outs] == [[3, 1, 3, 0], [3, 3, 3, 0], [3, 1], [2, 1]]
