"""Ops whose result's shape depends on values (``x[mask]``, ``nonzero``, ``unique``, ...):
read on the host, then static. References are numpy's (PyTorch's rules are numpy's for
these, and CI has no torch); PyTorch-specific choices (NaNs distinct in ``unique``,
``bincount``'s weight dtypes, a 0-d input's ``nonzero``) are spelled out."""
import warnings

import numpy as np
import pytest

import nova as nv


@pytest.fixture(autouse=True, params=["cpu", "interp"])
def engine(request):
    """The host reads are engine-independent; the gathers and scatters they feed are
    the engines' own, so the compiled engine and the interpreter both run."""
    with nv.engine(request.param):
        yield request.param


RNG = np.random.default_rng(7)
A = RNG.standard_normal((3, 4, 5)).astype(np.float32)


def test_mask_reads_follow_numpy_and_send_the_gradient_to_the_selected_elements():
    x = nv.tensor(A, requires_grad=True)
    m2 = A[:, :, 0] > 0                                   # a 2-D mask over dims 0, 1
    cols = A[0, :, 1] > 0
    picks = {
        "x[m]": (lambda t: t[t > 0.3], A[A > 0.3]),
        "x[m2]": (lambda t: t[nv.tensor(m2)], A[m2]),
        "x[:, cols]": (lambda t: t[:, nv.tensor(cols)], A[:, cols]),
        "x[1, cols, 2:]": (lambda t: t[1, nv.tensor(cols), 2:], A[1, cols, 2:]),
        "x[[0, 2], cols]": (lambda t: t[nv.tensor([0, 2])[:, None], nv.tensor(cols)],
                            A[np.array([0, 2])[:, None], cols]),
        "x[..., list]": (lambda t: t[..., [True, False, True, False, True]],
                         A[..., [True, False, True, False, True]]),
        "x[None, m2]": (lambda t: t[None, nv.tensor(m2)], A[None, m2]),
    }
    total = 0.0
    for name, (pick, want) in picks.items():
        got = pick(x)
        assert got.shape == want.shape, name
        np.testing.assert_array_equal(got.detach().numpy(), want, err_msg=name)
        total = total + (got * got).sum()
    total.backward()
    grad = np.zeros_like(A)
    for mask in (A > 0.3,):
        grad += 2 * A * mask
    grad[m2] += 2 * A[m2]
    grad[:, cols] += 2 * A[:, cols]
    grad[1, cols, 2:] += 2 * A[1, cols, 2:]
    np.add.at(grad, (np.array([0, 2])[:, None], cols), 2 * A[np.array([0, 2])[:, None], cols])
    grad[..., [True, False, True, False, True]] += 2 * A[..., [True, False, True, False, True]]
    grad[m2] += 2 * A[m2]
    np.testing.assert_allclose(x.grad.numpy(), grad, rtol=1e-6)


def test_a_0d_mask_adds_a_dim_of_one_or_zero_and_bad_masks_name_the_shapes():
    x = nv.tensor(A[0])
    assert x[nv.tensor(True)].shape == (1, 4, 5)
    assert x[nv.tensor(False)].shape == (0, 4, 5)
    assert x[1:, nv.tensor(True)].shape == (3, 1, 5)
    with pytest.raises(IndexError, match=r"the shape of the mask \(3,\) does not match the "
                                         r"indexed dims \(4,\) of tensor \(4, 5\)"):
        x[nv.tensor([True, False, True])]
    with pytest.raises(IndexError, match=r"too many indices for tensor of shape \(4, 5\)"):
        x[nv.ones(4, 5, dtype=nv.bool), 0]
    with pytest.raises(IndexError, match=r"got uint8 of shape \(4,\) \(a uint8 mask is "
                                         r"PyTorch's deprecated form: index with \.bool\(\)"):
        x[nv.ones(4, dtype=nv.uint8)]


def test_mask_writes_take_per_element_values_index_put_accumulates():
    y = nv.zeros(3, 4)
    m = nv.tensor(A[:, :, 0] > 0)
    count = int((A[:, :, 0] > 0).sum())
    y[m] = nv.arange(float(count))
    want = np.zeros((3, 4), np.float32)
    want[A[:, :, 0] > 0] = np.arange(count)
    np.testing.assert_array_equal(y.numpy(), want)
    z = nv.ones(3, 4).index_put_((m,), nv.full((count,), 2.0), accumulate=True)
    np.testing.assert_array_equal(z.numpy(), np.where(A[:, :, 0] > 0, 3.0, 1.0))
    src = nv.tensor(A[:, :, 1])
    dst = nv.zeros(3, 4)
    dst[src > 0] = src[src > 0]                           # two mask objects, one selection
    np.testing.assert_array_equal(dst.numpy(), np.where(A[:, :, 1] > 0, A[:, :, 1], 0))


def test_augmented_mask_update_reads_nothing_unless_values_differ_per_element():
    x = nv.tensor(A[0, 0])
    m = x > 0                                             # pending: nothing computed yet
    x[m] += 1
    assert not m.node.realized                            # a where, no host read
    np.testing.assert_allclose(x.numpy(), np.where(A[0, 0] > 0, A[0, 0] + 1, A[0, 0]))
    k = int((A[0, 0] > 0).sum())
    y = nv.tensor(A[0, 0])
    y[y > 0] *= nv.arange(1.0, k + 1.0)                   # one value per element: read
    want = A[0, 0].copy()
    want[want > 0] *= np.arange(1.0, k + 1.0, dtype=np.float32)
    np.testing.assert_allclose(y.numpy(), want)


def test_nonzero_argwhere_where_and_masked_select():
    b = A[:, :, 0] > 0
    t = nv.tensor(b)
    np.testing.assert_array_equal(nv.nonzero(t).numpy(), np.argwhere(b))
    np.testing.assert_array_equal(t.nonzero().numpy(), np.argwhere(b))
    np.testing.assert_array_equal(nv.argwhere(t).numpy(), np.argwhere(b))
    for got, want in zip(nv.nonzero(t, as_tuple=True), np.nonzero(b)):
        np.testing.assert_array_equal(got.numpy(), want)
    for got, want in zip(nv.where(t), np.nonzero(b)):
        assert got.dtype == nv.int64
        np.testing.assert_array_equal(got.numpy(), want)
    assert nv.nonzero(nv.tensor(5)).shape == (1, 0)      # PyTorch: a 0-d input is one row
    assert nv.nonzero(nv.tensor(0)).shape == (0, 0)
    assert [r.tolist() for r in nv.nonzero(nv.tensor(5), as_tuple=True)] == [[0]]
    x = nv.tensor(A[:, :, 2], requires_grad=True)
    row = nv.tensor(A[0, :, 3] > 0)                       # broadcast against (3, 4)
    got = nv.masked_select(x, row)
    want_mask = np.broadcast_to(A[0, :, 3] > 0, (3, 4))
    np.testing.assert_array_equal(got.detach().numpy(), A[:, :, 2][want_mask])
    got.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), want_mask.astype(np.float32))
    with pytest.raises(TypeError, match=r"masked_select: mask must be a bool tensor, got "
                                        r"float32 of shape \(3, 4\)"):
        nv.masked_select(x, nv.ones(3, 4))
    with pytest.raises(TypeError, match="where: give both input and other, or neither"):
        nv.where(t, 1.0)


def test_nonzero_static_pads_or_truncates_without_reading_and_replays():
    b = (A[:, :, 0] > 0).astype(np.float32)
    want = np.argwhere(b)
    k = len(want)
    got = nv.nonzero_static(nv.tensor(b), size=k + 2)
    np.testing.assert_array_equal(got.numpy(), np.vstack([want, -np.ones((2, 2), int)]))
    got = nv.tensor(b).nonzero_static(size=k - 1, fill_value=9)
    np.testing.assert_array_equal(got.numpy(), want[:k - 1])
    assert nv.nonzero_static(nv.tensor(3.0), size=2).shape == (2, 0)
    with pytest.raises(ValueError, match="nonzero_static: size must be a non-negative int"):
        nv.nonzero_static(nv.tensor(b), size=-1)

    @nv.compile
    def first_two(t):
        return nv.nonzero_static(t > 0, size=2, fill_value=-7)

    for v in ([0.0, 1.0, 0.0, 2.0, 3.0], [0.0, 0.0, 0.0, 0.0, 5.0], [0.0] * 5):
        want = np.argwhere(np.array(v) > 0)[:2]
        want = np.vstack([want, np.full((2 - len(want), 1), -7)])
        np.testing.assert_array_equal(first_two(nv.tensor(v)).numpy(), want)
    assert first_two.replays >= 1          # nothing read on the host: it replays


def test_unique_and_unique_consecutive():
    v = np.array([3.0, np.nan, 1.0, np.nan, 3.0, 1.0], np.float32)
    out, inv, cnt = nv.unique(nv.tensor(v), return_inverse=True, return_counts=True)
    np.testing.assert_array_equal(out.numpy(), [1.0, 3.0, np.nan, np.nan])  # NaNs distinct
    np.testing.assert_array_equal(inv.numpy(), [1, 2, 0, 3, 1, 0])
    np.testing.assert_array_equal(cnt.numpy(), [2, 2, 1, 1])
    assert out.dtype == nv.float32 and inv.dtype == cnt.dtype == nv.int64
    rows = np.array([[1, 2], [1, 2], [0, 5], [1, 0]])
    out, inv, cnt = nv.tensor(rows).unique(dim=0, return_inverse=True, return_counts=True)
    np.testing.assert_array_equal(out.numpy(), [[0, 5], [1, 0], [1, 2]])
    np.testing.assert_array_equal(inv.numpy(), [2, 2, 0, 1])
    np.testing.assert_array_equal(cnt.numpy(), [1, 1, 2])
    m = nv.tensor(rows).reshape(2, 4)
    np.testing.assert_array_equal(nv.unique(m, return_inverse=True)[1].numpy(),
                                  np.unique(rows, return_inverse=True)[1].reshape(2, 4))
    s = nv.tensor([1, 1, 2, 2, 3, 1, 1, 2])
    out, inv, cnt = nv.unique_consecutive(s, return_inverse=True, return_counts=True)
    assert out.tolist() == [1, 2, 3, 1, 2]
    assert inv.tolist() == [0, 0, 1, 1, 2, 3, 3, 4]
    assert cnt.tolist() == [2, 2, 1, 2, 1]
    out, cnt = nv.unique_consecutive(nv.tensor(rows), return_counts=True, dim=0)
    assert out.tolist() == [[1, 2], [0, 5], [1, 0]] and cnt.tolist() == [2, 1, 1]
    assert nv.unique(nv.tensor([True, False, True])).tolist() == [False, True]
    with pytest.raises(IndexError, match=r"unique: dim 2 is out of range for a tensor of "
                                         r"shape \(4, 2\)"):
        nv.unique(nv.tensor(rows), dim=2)


def test_bincount_counts_weights_and_refuses_bad_input():
    x = nv.tensor([0, 2, 2, 5])
    assert nv.bincount(x).tolist() == [1, 0, 2, 0, 0, 1]
    assert nv.bincount(x, minlength=8).tolist() == [1, 0, 2, 0, 0, 1, 0, 0]
    assert nv.bincount(nv.tensor([], dtype=nv.int64)).tolist() == []
    w32 = nv.bincount(x, weights=nv.tensor([0.5, 1.0, 2.0, 4.0]))
    assert w32.dtype == nv.float32 and w32.tolist() == [0.5, 0.0, 3.0, 0.0, 0.0, 4.0]
    wint = x.bincount(weights=nv.tensor([1, 2, 3, 4]))    # PyTorch: float64 for the rest
    assert wint.dtype == nv.float64 and wint.tolist() == [1.0, 0.0, 5.0, 0.0, 0.0, 4.0]
    with pytest.raises(ValueError, match="bincount: input must be non-negative, got a "
                                         "value -1"):
        nv.bincount(nv.tensor([-1, 2]))
    with pytest.raises(TypeError, match=r"bincount: input must be a 1-D tensor of integers, "
                                        r"got float32 of shape \(2,\)"):
        nv.bincount(nv.tensor([1.0, 2.0]))
    with pytest.raises(ValueError, match=r"bincount: weights must have the input's shape"):
        nv.bincount(x, weights=nv.ones(3))


def test_a_mask_read_under_nv_compile_runs_recorded_and_stays_right():
    @nv.compile
    def positive_mean(t):
        return t[t > 0].mean()

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for k in range(3):
            v = RNG.standard_normal(6).astype(np.float32)
            got = positive_mean(nv.tensor(v)).item()
            assert got == pytest.approx(float(v[v > 0].mean()), rel=1e-6), k
