"""``index_select`` refuses negative indices as PyTorch does (``index out of range in
self``) instead of wrapping them from the end (probe 13): known values at the user's
line, computed ones by the gather's kernel."""
import numpy as np
import pytest

import nova as nv


def test_values_gradients_and_a_0d_input():
    a = np.arange(10.0).reshape(5, 2)
    x = nv.tensor(a, requires_grad=True)
    out = x.index_select(0, nv.tensor([4, 0, 4]))
    np.testing.assert_array_equal(out.detach().numpy(), a[[4, 0, 4]])
    (g,) = nv.autograd.grad(out.sum(), [x])
    np.testing.assert_array_equal(g.numpy(), [[1, 1], [0, 0], [0, 0], [0, 0], [2, 2]])
    np.testing.assert_array_equal(x.index_select(1, nv.tensor(1)).detach().numpy(),
                                  a[:, [1]])
    assert nv.tensor(3.0).index_select(0, nv.tensor([0])).shape == ()


@pytest.mark.parametrize("bad", [-1, 5])
def test_known_out_of_range_indices_raise_at_the_call(bad):
    x = nv.arange(10.0).view(5, 2)
    with pytest.raises(IndexError, match=f"index_select: index {bad} is out of bounds for "
                                         "dim 0 with size 5"):
        x.index_select(0, nv.tensor([1, bad]))


def test_computed_negative_indices_fail_the_step_instead_of_wrapping():
    x = nv.arange(10.0).view(5, 2)
    idx = nv.tensor([1, 2]) - 3            # [-2, -1]: known only when the step runs
    with pytest.raises(nv.RealizationError, match=r"must lie in \[0, 5\)"):
        x.index_select(0, idx).numpy()
