"""``nova.tensor.statistics`` against numpy: order statistics (NaN above every number),
histograms, covariances with weights, set membership, flat indexing."""
import numpy as np
import pytest

import nova as nv
from nova.autograd.gradcheck import gradcheck

RNG = np.random.default_rng(5)


def test_kthvalue_and_nanmedian():
    x = np.array([[3.0, 1.0, 2.0, np.nan, 1.0], [np.nan] * 5, [4.0, -1.0, 0.0, 2.0, 2.0]],
                 np.float32)
    k3, k5 = nv.kthvalue(nv.tensor(x), 3, 1), nv.tensor(x).kthvalue(5, 1, keepdim=True)
    med, flat = nv.nanmedian(nv.tensor(x), 1), nv.nanmedian(nv.tensor(x))
    nv.realize(k3.values, k3.indices, k5.values, med.values, med.indices, flat)
    order = np.argsort(x, 1, kind="stable")           # numpy sorts NaN last too
    np.testing.assert_array_equal(k3.values.numpy(), np.sort(x, 1)[:, 2])
    np.testing.assert_array_equal(k3.indices.numpy(), order[:, 2])
    assert k5.values.shape == (3, 1) and np.isnan(k5.values.numpy()[0, 0])
    lower = [np.sort(r[~np.isnan(r)])[(np.count_nonzero(~np.isnan(r)) - 1) // 2]
             if (~np.isnan(r)).any() else np.nan for r in x]
    np.testing.assert_array_equal(med.values.numpy(), np.array(lower, np.float32))
    assert x[0, med.indices.numpy()[0]] == lower[0] and x[2, med.indices.numpy()[2]] == lower[2]
    vals = x[~np.isnan(x)]
    assert flat.item() == np.sort(vals)[(vals.size - 1) // 2]
    assert nv.nanmedian(nv.tensor([3, 1, 2])).item() == 2
    assert type(k3).__name__ == "kthvalue" and type(med).__name__ == "nanmedian"
    with pytest.raises(IndexError, match="kthvalue: k"):
        nv.kthvalue(nv.tensor(x), 6, 1)
    assert gradcheck(lambda t: nv.kthvalue(t, 2, 0).values, [RNG.normal(size=(4, 3))])


def test_histc_counts_in_range_with_max_in_the_last_bin():
    x = np.array([1.0, 2.0, 1.0, 4.0, 5.0, -1.0, 2.5, np.nan, 0.0], np.float32)
    got = [nv.histc(nv.tensor(x), bins=4, min=0, max=4),
           nv.histc(nv.tensor([1.0, 2.0, 1.0]), bins=4),
           nv.histc(nv.tensor([2.0, 2.0, 2.0]), bins=4),
           nv.tensor(RNG.normal(size=1000)).histc(10, -2, 2)]
    nv.realize(*got)
    assert got[0].tolist() == [1, 2, 2, 1]            # 0 | 1, 1 | 2, 2.5 | 4
    assert got[1].tolist() == [2, 0, 0, 1]            # the data's range [1, 2]
    assert got[2].tolist() == [0, 0, 3, 0]            # a point: [1, 3]
    r = RNG.normal(size=1000)
    want, _ = np.histogram(r, 10, (-2, 2))
    np.testing.assert_array_equal(nv.histc(nv.tensor(r), 10, -2, 2).numpy(), want)
    assert got[3].dtype == nv.float64
    with pytest.raises(TypeError, match="histc"):
        nv.histc(nv.tensor([1, 2]))
    with pytest.raises(ValueError, match="histc: max"):
        nv.histc(nv.tensor([1.0]), 4, 3, 1)


def test_cov_and_corrcoef_match_numpy_with_weights():
    x = RNG.normal(size=(3, 10)).astype(np.float32)
    fw = RNG.integers(1, 4, size=10)
    aw = RNG.uniform(0.1, 1, size=10).astype(np.float32)
    got = [nv.cov(nv.tensor(x)), nv.cov(nv.tensor(x), correction=0),
           nv.cov(nv.tensor(x), fweights=nv.tensor(fw), aweights=nv.tensor(aw)),
           nv.cov(nv.tensor(x), fweights=nv.tensor(fw)), nv.cov(nv.tensor(x[0])),
           nv.corrcoef(nv.tensor(x)), nv.tensor(x).cov()]
    nv.realize(*got)
    want = [np.cov(x), np.cov(x, ddof=0), np.cov(x, fweights=fw, aweights=aw),
            np.cov(x, fweights=fw), np.cov(x[0]), np.corrcoef(x), np.cov(x)]
    for g, w in zip(got, want):
        np.testing.assert_allclose(g.numpy(), w, rtol=2e-5, atol=1e-6)
    assert got[4].ndim == 0
    assert gradcheck(lambda t: nv.cov(t), [RNG.normal(size=(2, 5))])
    with pytest.raises(ValueError, match="cov: fweights"):
        nv.cov(nv.tensor(x), fweights=nv.tensor(aw))


def test_isin_and_take():
    e = nv.tensor([[1, 2], [3, 4]])
    assert nv.isin(e, nv.tensor([2, 4, 9])).tolist() == [[False, True], [False, True]]
    assert nv.isin(e, 3, invert=True).tolist() == [[True, True], [False, True]]
    assert nv.isin(2, e).item() is True
    assert nv.isin(e, nv.tensor([], dtype=nv.int64)).tolist() == [[False, False]] * 2
    assert nv.isin(nv.tensor([float("nan"), 1.0]), nv.tensor([float("nan")])).tolist() == [
        False, False]                                  # NaN is never equal, as in torch
    assert nv.take(e, nv.tensor([[0, -1], [2, 1]])).tolist() == [[1, 4], [3, 2]]
    assert e.take(nv.tensor(3)).item() == 4
    with pytest.raises(TypeError, match="take: index"):
        nv.take(e, nv.tensor([0.5]))


def test_histc_bins_in_the_input_dtype_and_takes_empty_and_infinite_inputs():
    x = np.float32(0.1) * np.arange(11, dtype=np.float32)       # edges as PyTorch puts them
    assert nv.histc(nv.tensor(x), 10, 0, 1).tolist() == [1.0] * 9 + [2.0]
    assert nv.histc(nv.tensor([], dtype=nv.float32), 3).tolist() == [0.0, 0.0, 0.0]
    assert nv.histc(nv.tensor([2.0, 2.0, np.inf]), 4).tolist() == [0.0, 0.0, 2.0, 0.0]
    assert np.isnan(nv.nanmedian(nv.tensor([])).item())
    with pytest.raises(IndexError, match="nanmedian"):
        nv.nanmedian(nv.zeros(2, 0), 1)
