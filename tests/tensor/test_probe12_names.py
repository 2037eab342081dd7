"""``as_strided``, ``narrow_copy``, ``unsafe_split``/``unsafe_chunk``
(``nova.tensor.strided``) and ``histogramdd`` (``nova.tensor.histogramdd``) against
numpy references (numpy's ``as_strided`` over the row-major values, ``histogramdd``),
PyTorch's error messages, and torch itself where it is installed."""
import numpy as np
import pytest

import nova as nv

RNG = np.random.default_rng(12)


def _np_as_strided(a, size, stride, offset=0):
    flat = np.ascontiguousarray(a).reshape(-1)[offset:]
    item = flat.itemsize
    return np.lib.stride_tricks.as_strided(flat, size, [s * item for s in stride]).copy()


@pytest.mark.parametrize("size,stride,offset", [
    ((3, 2), (1, 2), 0), ((2, 2), (3, 1), 1), ((2, 3, 2), (0, 2, 1), 2), ((4,), (2,), 0),
    ((), (), 5), ((2, 2), (0, 0), 3)])
def test_as_strided_reads_the_row_major_values(size, stride, offset):
    a = RNG.standard_normal((2, 3, 2)).astype(np.float32)
    x = nv.tensor(a)
    got = nv.as_strided(x, size, stride, offset)
    np.testing.assert_array_equal(got.numpy(), _np_as_strided(a, size, stride, offset))
    assert x.as_strided(list(size), list(stride), offset).shape == tuple(size)


def test_as_strided_empty_and_0d():
    x = nv.arange(6.0).reshape(2, 3)
    assert nv.as_strided(x, (2, 0), (1, 1), 100).numpy().shape == (2, 0)  # reads nothing
    assert nv.as_strided(nv.tensor(3.0), (), ()).item() == 3.0
    assert nv.as_strided(x, (2,), (2,), None).tolist() == [0.0, 2.0]


def test_as_strided_gradient_scatters_back_and_adds_overlaps():
    a = RNG.standard_normal(6)
    w = RNG.standard_normal((3, 2))
    x = nv.tensor(a, dtype=nv.float64, requires_grad=True)
    (nv.as_strided(x, (3, 2), (1, 2)) * nv.tensor(w)).sum().backward()
    ref = np.zeros(6)
    np.add.at(ref, np.arange(3)[:, None] + 2 * np.arange(2)[None, :], w)
    np.testing.assert_allclose(x.grad.numpy(), ref)


def test_as_strided_result_is_a_copy_not_a_view():
    x = nv.arange(6.0)
    y = nv.as_strided(x, (2,), (1,))
    y[0] = 99.0
    assert x.tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]


def test_as_strided_errors_are_pytorchs():
    x = nv.arange(6.0).reshape(2, 3)
    with pytest.raises(RuntimeError, match=r"setStorage: sizes \[2, 2\], strides \[1, 1\], "
                       r"storage offset 5, and itemsize 4 requiring a storage size of 32 "
                       r"are out of bounds for storage of size 24"):
        nv.as_strided(x, (2, 2), (1, 1), 5)
    with pytest.raises(RuntimeError, match=r"itemsize 8 requiring a storage size of 56 are "
                       r"out of bounds for storage of size 48"):
        nv.as_strided(x.double(), [4], [2])
    with pytest.raises(RuntimeError, match=r"as_strided: Negative strides are not supported "
                       r"at the moment, got strides: \[1, -1\]"):
        nv.as_strided(x, (2, 2), (1, -1))
    with pytest.raises(RuntimeError, match="mismatch in length of strides and shape"):
        nv.as_strided(x, (2,), (1, 1))
    with pytest.raises(RuntimeError, match="invalid storage offset -1"):
        nv.as_strided(x, (2,), (1,), -1)
    with pytest.raises(RuntimeError, match="Storage size calculation overflowed"):
        nv.as_strided(x, (-2, 2), (1, 1))
    with pytest.raises(TypeError, match="must be tuple of ints, but found element of type "
                       "float at pos 0"):
        nv.as_strided(x, (2.0, 2), (1, 1))


def test_narrow_copy_matches_slicing_and_is_not_a_view():
    a = RNG.standard_normal((3, 4)).astype(np.float32)
    x = nv.tensor(a)
    np.testing.assert_array_equal(nv.narrow_copy(x, 1, 1, 2).numpy(), a[:, 1:3])
    np.testing.assert_array_equal(x.narrow_copy(-1, -3, 2).numpy(), a[:, 1:3])
    np.testing.assert_array_equal(x.narrow_copy(0, nv.tensor(2), 1).numpy(), a[2:3])
    y = x.narrow_copy(0, 0, 1)
    y[0, 0] = 42.0
    assert x[0, 0].item() == a[0, 0]


def test_narrow_copy_errors_are_pytorchs():
    x = nv.arange(6.0).reshape(2, 3)
    with pytest.raises(RuntimeError, match=r"start \(1\) \+ length \(2\) exceeds dimension "
                       r"size \(2\)\."):
        nv.narrow_copy(x, 0, -1, 2)
    with pytest.raises(RuntimeError, match=r"start \(1\) \+ length \(-1\) exceeds"):
        nv.narrow_copy(x, 1, 1, -1)
    with pytest.raises(IndexError, match=r"start out of range \(expected to be in range of "
                       r"\[-3, 3\], but got -4\)"):
        nv.narrow_copy(x, 1, -4, 1)
    with pytest.raises(RuntimeError, match="cannot be applied to a 0-dim tensor"):
        nv.narrow_copy(nv.tensor(1.0), 0, 0, 1)
    with pytest.raises(IndexError, match="dim 2 is out of range"):
        nv.narrow_copy(x, 2, 0, 1)


def test_unsafe_split_and_chunk_are_split_and_chunk():
    a = RNG.standard_normal((2, 5)).astype(np.float32)
    x = nv.tensor(a)
    for got in (nv.unsafe_split(x, 2, 1), x.unsafe_split(2, dim=1)):
        assert [p.numpy().tolist() for p in got] == [p.tolist() for p in
                                                      np.split(a, [2, 4], 1)]
    for got in (nv.unsafe_chunk(x, 2, 1), x.unsafe_chunk(2, 1)):
        assert [p.numpy().tolist() for p in got] == [p.tolist() for p in
                                                      np.split(a, [3], 1)]
    with pytest.raises(TypeError, match=r"unsafe_split\(\): argument 'split_size' "
                       r"\(position 2\) must be int, not list"):
        nv.unsafe_split(x, [1, 4], 1)
    with pytest.raises(ValueError, match="chunks must be positive"):
        nv.unsafe_chunk(x, 0)


def _check_hist(got, ref):
    hist, edges = ref
    np.testing.assert_allclose(got.hist.numpy(), hist, rtol=1e-5, atol=1e-7)
    assert len(got.bin_edges) == len(edges)
    for e, r in zip(got.bin_edges, edges):
        np.testing.assert_allclose(e.numpy(), r, rtol=1e-6, atol=1e-6)


def test_histogramdd_matches_numpy():
    pts = RNG.standard_normal((40, 3)).astype(np.float32)
    pts[:4] = [[0, 0, 0], [1.5, -2, 3], [-9, 0, 0], [0.25, 0.5, 0.75]]   # edges, outside
    w = RNG.random(40).astype(np.float32)
    x = nv.tensor(pts)
    _check_hist(nv.histogramdd(x, [2, 3, 4]), np.histogramdd(pts, [2, 3, 4]))
    rng = [-1.0, 1.5, -2.0, 2.0, 0.0, 3.0]
    _check_hist(nv.histogramdd(x, 3, rng, nv.tensor(w), True),
                np.histogramdd(pts, 3, [rng[:2], rng[2:4], rng[4:]], weights=w,
                               density=True))
    edges = [np.array([-1, 0, 0.25, 2], np.float32), np.array([-3, 0.5, 3], np.float32),
             np.array([-1, 0.75, 1], np.float32)]
    _check_hist(nv.histogramdd(x, bins=[nv.tensor(e) for e in edges], weight=nv.tensor(w)),
                np.histogramdd(pts, edges, weights=w))
    _check_hist(nv.histogramdd(nv.tensor(pts[:, :2])),          # bins=10, numpy's default
                np.histogramdd(pts[:, :2]))


def test_histogramdd_leading_dims_constant_data_and_no_points():
    pts = RNG.standard_normal((2, 3, 2))
    _check_hist(nv.histogramdd(nv.tensor(pts), (2, 3)),
                np.histogramdd(pts.reshape(-1, 2), (2, 3)))
    got = nv.histogramdd(nv.ones(3, 2), 2)      # equal min and max: widened by 0.5
    _check_hist(got, (np.array([[0, 0], [0, 3.0]]), [np.array([0.5, 1, 1.5])] * 2))
    got = nv.histogramdd(nv.zeros(0, 2), 2)     # no data: range (0, 1)
    _check_hist(got, (np.zeros((2, 2)), [np.array([0, 0.5, 1])] * 2))
    assert type(got).__name__ == "histogramdd"


def test_histogramdd_errors_are_pytorchs():
    x = nv.tensor([[0.0, 1.0], [2.0, 3.0]])
    cases = [
        (lambda: nv.histogramdd(x, [2, 3, 4]), "The size of bins must be equal to the "
         "innermost dimension of the input"),
        (lambda: nv.histogramdd(x, [2, 0]), r"bins must be > 0, but got 0 for dimension 1"),
        (lambda: nv.histogramdd(x, 2, [0.0, 4.0]), "for a 2-dimensional histogram range "
         "should have 4 elements, but got 2"),
        (lambda: nv.histogramdd(x, 2, [4.0, 0.0, 0.0, 1.0]), "min should not exceed max, "
         "but got min 4 max 0 for dimension 0"),
        (lambda: nv.histogramdd(x, 2, [0.0, float("inf"), 0.0, 1.0]), r"dimension 0's range "
         r"\[0, inf\] is not finite"),
        (lambda: nv.histogramdd(x, [nv.tensor([0.0, 1.0])]), "expected 2 sequences of bin "
         "edges for a 2-dimensional histogram but got 1"),
        (lambda: nv.histogramdd(x, [nv.tensor([0.0, 1.0], dtype=nv.float64),
                                    nv.tensor([0.0, 1.0])]), "should have the same dtype"),
        (lambda: nv.histogramdd(x, [nv.tensor([[0.0, 1.0]]), nv.tensor([0.0, 1.0])]),
         "bins tensor should have one dimension, but got 2 dimensions"),
        (lambda: nv.histogramdd(x[0], 2), "input tensor should have at least 2 dimensions"),
        (lambda: nv.histogramdd(x, 2, weight=nv.ones(3)), r"weight with shape \[3\]"),
    ]
    for call, message in cases:
        with pytest.raises(RuntimeError, match=message):
            call()


def test_against_torch_where_installed():
    torch = pytest.importorskip("torch")
    a = RNG.standard_normal((3, 4)).astype(np.float32)
    got = nv.as_strided(nv.tensor(a), (2, 3), (3, 1), 2).numpy()
    np.testing.assert_array_equal(got, torch.as_strided(torch.tensor(a), (2, 3), (3, 1), 2))
    pts = RNG.standard_normal((30, 2)).astype(np.float32)
    ref = torch.histogramdd(torch.tensor(pts), [3, 2])
    got = nv.histogramdd(nv.tensor(pts), [3, 2])
    np.testing.assert_array_equal(got.hist.numpy(), ref.hist.numpy())
    for e, r in zip(got.bin_edges, ref.bin_edges):
        np.testing.assert_allclose(e.numpy(), r.numpy(), rtol=1e-6)
