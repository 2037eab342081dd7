"""``nn.functional`` results that PyTorch makes new tensors of the input's dtype, found
by differential testing against PyTorch (values written here, no torch needed)."""
import numpy as np
import pytest

import nova as nv
import nova.nn.functional as F


@pytest.mark.parametrize("pads, mode", [
    ((0, 0), "constant"), ((0, 0, 0, 0), "constant"), ((-1, 0), "constant"),
    ((0, -1, -1, 0), "constant"), ((0, 0), "reflect"), ((0, 0), "replicate"),
    ((0, 0), "circular")])
def test_pad_that_adds_nothing_returns_a_new_tensor(pads, mode):
    """Regression: ``F.pad`` by zeros returned its input, and a crop (negative pads
    only) a view of it, so an in-place write into the result changed the input; in
    PyTorch the result is always a new tensor."""
    x = nv.tensor([[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]])
    out = F.pad(x, pads, mode=mode)
    out.fill_(9.0)
    assert x.tolist() == [[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]]
    assert (out == 9.0).all().item()


def test_threshold_keeps_an_integer_input_dtype():
    """Regression: ``F.threshold`` of an integer tensor with a float ``value`` returned
    float32 (and an int64 beyond 2^24 lost its low bits on the way); PyTorch keeps the
    input's dtype, the value converted to it (0.5 -> 0)."""
    big = 2 ** 40 + 1
    x = nv.tensor([1, 5, big])
    out = F.threshold(x, 2, 0.5)
    assert out.dtype == nv.int64 and out.tolist() == [0, 5, big]
    out = F.threshold(nv.tensor(np.array([1, 7], np.uint8)), 3, 2.0)
    assert out.dtype == nv.uint8 and out.tolist() == [2, 7]
    x = nv.tensor([1, 5], dtype=nv.int32)
    F.threshold(x, 2, -3.7, inplace=True)
    assert x.dtype == nv.int32 and x.tolist() == [-3, 5]
    with pytest.raises(RuntimeError, match="threshold"):     # as PyTorch: uint8 cannot hold it
        F.threshold(nv.tensor(np.array([1, 7], np.uint8)), 3, -1.0)
