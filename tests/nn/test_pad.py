"""``F.pad``: every mode against PyTorch (values and gradients), and its errors."""
import numpy as np
import pytest

import nova as nv
import nova.nn.functional as F

torch = pytest.importorskip("torch")

CASES = [("constant", (1, 2)), ("constant", (2, 0, 1, 3)), ("constant", (-1, 2, 1, -2)),
         ("replicate", (2, 0, 1, 3)), ("reflect", (0, 3, 2, 2)), ("reflect", (5, 0, 4, 1)),
         ("circular", (2, 0, 1, 3)), ("circular", (6, 1, 0, 5))]


@pytest.mark.parametrize("mode,pads", CASES)
def test_pad_matches_pytorch_values_and_gradients(mode, pads):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 5, 6)).astype(np.float32)
    kw = {"value": 0.5} if mode == "constant" else {}
    t = torch.from_numpy(x).requires_grad_()
    want = torch.nn.functional.pad(t, pads, mode=mode, **kw)
    g = rng.standard_normal(tuple(want.shape)).astype(np.float32)
    (want * torch.from_numpy(g)).sum().backward()
    a = nv.tensor(x, requires_grad=True)
    got = F.pad(a, pads, mode=mode, **kw)
    (got * nv.tensor(g)).sum().backward()
    assert got.shape == tuple(want.shape)
    np.testing.assert_array_equal(got.numpy(), want.detach().numpy())
    np.testing.assert_allclose(a.grad.numpy(), t.grad.numpy(), rtol=1e-6, atol=1e-6)


def test_pad_errors_name_the_problem():
    x = nv.ones(2, 3)
    with pytest.raises(ValueError, match="pairs of ints"):
        F.pad(x, (1,))
    with pytest.raises(ValueError, match="pairs of ints for at most the 2 dims"):
        F.pad(x, (1, 1, 1, 1, 1, 1))
    with pytest.raises(ValueError, match="mode 'wrap'"):
        F.pad(x, (1, 1), mode="wrap")
    with pytest.raises(ValueError, match=r"reflect padding \(3, 0\) of dim 1 \(size 3\)"):
        F.pad(x, (3, 0), mode="reflect")
    with pytest.raises(ValueError, match="only used by mode='constant'"):
        F.pad(x, (1, 1), mode="replicate", value=2.0)
    with pytest.raises(ValueError, match="removes more than"):
        F.pad(x, (-2, -2))
