"""Ops that are not views return new tensors, as PyTorch's do, even where they have
nothing to do: a shortcut that returned the input itself (``sum`` of a 0-d tensor, an
``interpolate`` to the same size) or a view built from the public view ops
(``pixel_shuffle``'s reshape of a permute, ``diag``'s diagonal) made an in-place write
into the result reach the input, and a later write into the input show in the result
(``tools/fuzz_torch/fuzz_alias.py`` found them)."""
import numpy as np
import pytest

import nova as nv

F = nv.nn.functional


def _scalar():
    return nv.tensor(0.75)


def _image():
    return nv.arange(16.0).reshape(1, 4, 2, 2)


def _matrix():
    return nv.tensor([[4.0, 1.0, 0.5], [1.0, 3.0, 0.25], [0.5, 0.25, 2.0]])


CASES = {
    "sum": (_scalar, lambda x: x.sum()), "sum_dim": (_scalar, lambda x: x.sum(0)),
    "sum_keepdim": (_scalar, lambda x: x.sum(0, True)), "max": (_scalar, lambda x: x.max()),
    "max_dim": (_scalar, lambda x: x.max(0).values), "amax": (_scalar, lambda x: x.amax()),
    "sort": (_scalar, lambda x: x.sort().values), "msort": (_scalar, lambda x: x.msort()),
    "topk": (_scalar, lambda x: x.topk(1).values), "repeat": (_scalar, lambda x: x.repeat(())),
    "tile": (_scalar, lambda x: x.tile(())), "diag": (_matrix, lambda x: x.diag()),
    "diag_offset": (_matrix, lambda x: nv.diag(x, 1)), "diff_0": (_matrix, lambda x: x.diff(n=0)),
    "interpolate": (_image, lambda x: F.interpolate(x, size=(2, 2))),
    "interpolate_linear": (_image, lambda x: F.interpolate(x, scale_factor=1.0,
                                                           mode="bilinear")),
    "adaptive_avg_pool2d": (_image, lambda x: F.adaptive_avg_pool2d(x, (2, 2))),
    "adaptive_avg_pool1d": (lambda: nv.arange(6.0).reshape(2, 3),
                            lambda x: F.adaptive_avg_pool1d(x, 3)),
    "pixel_shuffle_1": (_image, lambda x: F.pixel_shuffle(x, 1)),
    "pixel_shuffle_2": (_image, lambda x: F.pixel_shuffle(x, 2)),
    "pixel_unshuffle": (lambda: nv.arange(16.0).reshape(1, 1, 4, 4),
                        lambda x: F.pixel_unshuffle(x, 2)),
    "channel_shuffle": (_image, lambda x: F.channel_shuffle(x, 2)),
    "channel_shuffle_1": (_image, lambda x: nv.nn.ChannelShuffle(1)(x)),
}


@pytest.mark.parametrize("name", list(CASES))
def test_a_result_is_not_its_input(name):
    make, f = CASES[name]
    x = make()
    original = x.numpy().copy()
    r = f(x)
    expected = r.numpy().copy()
    r.fill_(9.0)                                      # a write into the result
    np.testing.assert_array_equal(x.numpy(), original)
    x = make()
    r = f(x)
    x.add_(1.0)                                       # a later write into the input
    np.testing.assert_array_equal(r.numpy(), expected)


def test_all_and_any_over_no_dims_are_new_tensors():
    b = nv.tensor([True, False])
    for r in (b.all(()), b.any([])):
        r.fill_(True)
        assert b.tolist() == [True, False]


def test_a_zero_d_result_keeps_its_gradient():
    """The new handle carries the input's history (``clone``)."""
    x = nv.tensor(2.0, requires_grad=True)
    (x.sum() * 3 + x.max() + x.sort().values).backward()
    assert x.grad.item() == 5.0
