"""PyTorch programs run as ``import nova as torch`` (a port probe) failed on these:
assigning a value with extra leading size-1 dims (``out[t] = o``) and the factories'
``size=`` keyword."""
import numpy as np
import pytest

import nova as nv


def test_setitem_drops_a_values_leading_size_one_dims_as_pytorch_does():
    """``x[index] = value`` first drops the value's leading size-1 dims (PyTorch's
    ``slicePrefix1sSize``), for basic, advanced and mask indices; ``index_put_`` does
    not, and a value that still has too many dims is an error."""
    basic = nv.zeros(3, 2, 4)
    basic[1] = nv.ones(1, 2, 4)
    basic[2] = nv.full((1, 1, 2, 4), 2.0)
    basic[0, 0] = nv.tensor([2.5])                  # (1,) into a (4,) row
    basic[0, 1, 3] = nv.full((1, 1), 7.0)           # into one element
    advanced = nv.zeros(3, 2, 4)
    advanced[nv.tensor([0, 2])] = nv.ones(1, 1, 2, 4)
    advanced[:, nv.tensor([1])] = nv.full((1, 3, 1, 4), 3.0)
    masked = nv.zeros(3, 4)
    masked[nv.tensor([True, False, True])] = nv.tensor([[[1.0, 2.0, 3.0, 4.0]]])
    nv.realize(basic, advanced, masked)

    want = np.zeros((3, 2, 4))
    want[1], want[2], want[0, 0] = 1.0, 2.0, 2.5
    want[0, 1, 3] = 7.0
    np.testing.assert_array_equal(basic.numpy(), want)
    want = np.zeros((3, 2, 4))
    want[[0, 2]], want[:, 1] = 1.0, 3.0
    np.testing.assert_array_equal(advanced.numpy(), want)
    np.testing.assert_array_equal(masked.numpy(), [[1, 2, 3, 4], [0] * 4, [1, 2, 3, 4]])

    x = nv.zeros(3, 2, 4)
    with pytest.raises(ValueError, match=r"__setitem__: value of shape \(2, 2, 4\) cannot be "
                                         r"broadcast to the indexed shape \(2, 4\)"):
        x[1] = nv.ones(2, 2, 4)
    with pytest.raises(ValueError, match=r"value of shape \(1, 2, 1, 4\) cannot be broadcast"):
        x[1] = nv.ones(1, 2, 1, 4)                  # (2, 1, 4) left: still too many dims
    with pytest.raises(ValueError, match=r"index_put_: value of shape \(1, 1, 4\) cannot be "
                                         r"broadcast to the indexed shape \(2, 4\)"):
        nv.zeros(3, 4).index_put_((nv.tensor([0, 2]),), nv.ones(1, 1, 4))
    masked[nv.tensor([True, False, True])] = nv.ones(1, 2, 4) * 5   # one row per selected
    np.testing.assert_array_equal(masked.numpy(), [[5] * 4, [0] * 4, [5] * 4])


def test_factories_take_size_as_a_keyword():
    """``size=`` for zeros, ones, empty, rand, randn (a tuple or list, not both forms),
    and randint's ``randint(high, size=...)`` / ``randint(high=..., size=...)``."""
    made = [nv.zeros(size=(2, 3)), nv.ones(size=[2, 3], dtype=nv.int64),
            nv.empty(size=(2, 3)), nv.rand(size=(2, 3)), nv.randn(size=nv.Size([2, 3])),
            nv.full(size=(2, 3), fill_value=4.0), nv.randint(5, size=(2, 3)),
            nv.randint(high=5, size=(2, 3)), nv.randint(3, 5, size=(2, 3))]
    assert all(t.shape == (2, 3) for t in made)
    assert made[1].dtype == nv.int64 and nv.zeros(size=()).shape == ()
    nv.realize(*made)
    assert made[1].numpy().sum() == 6 and made[5].numpy().sum() == 24.0
    r = [t.numpy() for t in made[6:]]
    assert r[0].min() >= 0 and r[1].max() < 5 and r[2].min() >= 3 and r[2].max() < 5
    with pytest.raises(TypeError, match=r"zeros: got sizes both as positional arguments "
                                        r"\(2,\) and as size=\(3,\)"):
        nv.zeros(2, size=(3,))
    with pytest.raises(TypeError, match="rand: argument 'size' must be a tuple of ints, got "
                                        "int 2"):
        nv.rand(size=2)
    with pytest.raises(TypeError, match="randint: argument 'size' must be a tuple of ints"):
        nv.randint(0, 5, 3)
