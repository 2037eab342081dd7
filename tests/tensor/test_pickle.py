"""Pickling a Tensor (``pickle``, ``copy.deepcopy``, DataLoader workers) carries its values,
dtype, device and requires_grad, never its trace: before ``Tensor.__reduce_ex__`` a
pending tensor failed to pickle (its view functions are lambdas) and a realized one
carried its trace node into the other process."""
import copy
import io
import pickle

import numpy as np
import pytest

import nova as nv


@pytest.mark.parametrize("dtype", [nv.float32, nv.float64, nv.int64, nv.int32, nv.bool,
                                   nv.bfloat16, nv.float16])
def test_a_realized_tensor_round_trips_with_its_dtype(dtype):
    t = nv.tensor(np.arange(6).reshape(2, 3) % 3, dtype=dtype)
    back = pickle.loads(pickle.dumps(t))
    assert back.dtype == dtype and back.shape == (2, 3)
    np.testing.assert_array_equal(back.numpy(), t.numpy())


def test_a_pending_view_is_pickled_as_its_values():
    x = nv.arange(12, dtype=nv.float32).reshape(3, 4)
    pending = (x[1:, ::2] * 2).t()          # a view of a pending product
    back = pickle.loads(pickle.dumps(pending))
    np.testing.assert_array_equal(back.numpy(), (np.arange(12.).reshape(3, 4)[1:, ::2]
                                                 * 2).T)
    x.add_(100)                             # the copy is not a view of x
    np.testing.assert_array_equal(back.numpy()[0], [8, 16])


def test_the_copy_is_a_leaf_that_keeps_requires_grad():
    w = nv.tensor([1.0, 2.0], requires_grad=True)
    y = w * 3
    for t, wants in ((w, True), (y, True), (nv.tensor([1.0]), False)):
        back = pickle.loads(pickle.dumps(t))
        assert back.requires_grad is wants and back.grad_fn is None
    w2 = copy.deepcopy(w)
    (w2 * w2).sum().backward()
    np.testing.assert_array_equal(w2.grad.numpy(), [2.0, 4.0])
    assert w.grad is None                   # the original's graph is untouched


class _Net(nv.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nv.nn.Conv2d(1, 2, 3)
        self.bn = nv.nn.BatchNorm2d(2)
        self.head = nv.nn.Linear(8, 3)
        self.tied = nv.nn.Linear(3, 3, bias=False)
        self.out = nv.nn.Linear(3, 3, bias=False)
        self.out.weight = self.tied.weight
        self.register_buffer("steps", nv.zeros((), dtype=nv.int64))

    def forward(self, x):
        return self.out(self.tied(self.head(self.bn(self.conv(x)).flatten(1)[:, :8])))


def test_a_module_pickles_as_pytorchs_parameters_buffers_and_ties_included():
    """``pickle.dumps(model)`` (a model sent to a worker process): was a TypeError
    ("Parameter: use nv.save"). Parameters come back as Parameters with their values
    and requires_grad (no ``.grad``, as a Tensor's pickle), buffers and train/eval mode
    with them, tied weights still one Parameter, and the copy trains on its own."""
    m = _Net()
    m.head.bias.requires_grad_(False)
    x = nv.tensor(np.random.default_rng(0).standard_normal((2, 1, 5, 5)).astype(np.float32))
    m(x).sum().backward()              # updates the running stats; leaves grads
    m.eval()
    c = pickle.loads(pickle.dumps(m))
    assert type(c.head.weight) is nv.nn.Parameter and c.head.weight is not m.head.weight
    assert c.head.weight.requires_grad and not c.head.bias.requires_grad
    assert c.head.weight.grad is None and not c.training
    assert c.out.weight is c.tied.weight and len(list(c.parameters())) == 7
    np.testing.assert_array_equal(c.bn.running_mean.numpy(), m.bn.running_mean.numpy())
    np.testing.assert_array_equal(c(x).numpy(), m(x).numpy())
    opt = nv.optim.SGD(c.parameters(), lr=0.5)
    c.train()
    c(x).sum().backward()
    opt.step()
    assert not np.array_equal(c.conv.weight.numpy(), m.conv.weight.numpy())
    with pytest.raises(TypeError, match="pickle the whole _Net"):
        nv.save(m, io.BytesIO())


def test_deepcopy_is_pytorchs_grad_included_and_views_alias_their_base_copy():
    w = nv.tensor([1.0, 2.0], requires_grad=True)
    (w * w).sum().backward()
    w2 = copy.deepcopy(w)
    assert w2.requires_grad and w2.grad is not None
    np.testing.assert_array_equal(w2.grad.numpy(), [2.0, 4.0])
    x = nv.tensor(np.arange(12, dtype=np.float32).reshape(3, 4))
    c = copy.deepcopy({"b": x, "v": x[:, 1]})
    c["b"].add_(100)                        # the copied view follows its copied base...
    assert c["v"].tolist() == [101.0, 105.0, 109.0]
    assert x[:, 1].tolist() == [1.0, 5.0, 9.0]        # ...and the original is untouched
    with pytest.raises(RuntimeError, match="graph leaves"):
        copy.deepcopy(w * 3)


def test_copy_is_another_handle_on_the_same_graph():
    w = nv.tensor([1.0, 2.0], requires_grad=True)
    z = copy.copy(w * 3)
    assert z.grad_fn is not None
    z.sum().backward()
    np.testing.assert_array_equal(w.grad.numpy(), [3.0, 3.0])
    with pytest.raises(TypeError, match="nv.save"):
        copy.copy(nv.nn.Parameter(nv.ones(2)))


def test_deepcopy_of_a_module_gives_parameters_of_its_own():
    """As PyTorch's (EMA copies, frozen teachers): was a TypeError."""
    m = nv.nn.Sequential(nv.nn.Linear(2, 2), nv.nn.BatchNorm1d(2))
    m[0].weight.grad = nv.ones(2, 2)
    c = copy.deepcopy(m)
    w, cw = m[0].weight, c[0].weight
    assert cw is not w and type(cw) is nv.nn.Parameter and cw.requires_grad
    np.testing.assert_array_equal(cw.numpy(), w.numpy())
    assert cw.grad is None           # (PyTorch's Parameter.__deepcopy__ leaves it behind)
    with nv.no_grad():
        cw.add_(1.0)
    np.testing.assert_array_equal(cw.numpy(), w.numpy() + np.float32(1))
    assert len(list(c.parameters())) == 4 and c[1].running_mean is not m[1].running_mean
    frozen = nv.nn.Parameter(nv.ones(2), requires_grad=False)
    assert not copy.deepcopy(frozen).requires_grad
