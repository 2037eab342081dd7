"""``nova.utils.checkpoint``: the checkpointed function's values and gradients are the
plain function's (the compiler rematerializes for the whole step)."""
import numpy as np
import pytest

import nova as nv
from nova.utils.checkpoint import checkpoint, checkpoint_sequential


def test_checkpoint_gives_the_plain_values_and_gradients():
    net = nv.nn.Sequential(nv.nn.Linear(3, 4), nv.nn.Tanh(), nv.nn.Linear(4, 2))
    x = nv.tensor(np.random.default_rng(0).normal(size=(5, 3)).astype(np.float32))
    plain = net(x)
    plain.sum().backward()
    want = [p.grad.numpy() for p in net.parameters()]
    net.zero_grad()
    out = checkpoint(net, x, use_reentrant=False)
    out.sum().backward()
    np.testing.assert_array_equal(out.numpy(), plain.numpy())
    for p, w in zip(net.parameters(), want):
        np.testing.assert_array_equal(p.grad.numpy(), w)
    np.testing.assert_array_equal(checkpoint_sequential(net, 2, x).numpy(), plain.numpy())
    np.testing.assert_array_equal(checkpoint_sequential(list(net), 1, x).numpy(), plain.numpy())
    with pytest.raises(ValueError, match="segments"):
        checkpoint_sequential(net, 0, x)
    with pytest.raises(TypeError, match="callable"):
        checkpoint(3, x)
