"""Module forward hooks and lookups with PyTorch's rules (``nova.nn.module``)."""
import numpy as np
import pytest

import nova as nv
from nova import nn


def test_pre_hooks_may_replace_arguments_and_forward_hooks_the_output():
    m = nn.Linear(3, 2)
    order = []
    m.register_forward_pre_hook(lambda mod, args: order.append("pre") or (args[0] * 0,))
    m.register_forward_pre_hook(lambda mod, args: order.append("first"), prepend=True)
    m.register_forward_hook(lambda mod, args, out: order.append(("post", out.shape)))
    h = m.register_forward_hook(lambda mod, args, out: out + 1)
    y = m(nv.ones(4, 3))
    assert order == ["first", "pre", ("post", (4, 2))]
    # (the input zeroed, y is the bias plus one, rounded once: compare it so, since
    # y - bias - 1 need not be 0 in float32)
    np.testing.assert_array_equal(y.numpy(), np.tile(m.bias.numpy() + np.float32(1), (4, 1)))
    h.remove()
    np.testing.assert_array_equal(m(nv.zeros(1, 3)).numpy(), m.bias.numpy()[None])


def test_hooks_with_kwargs_and_always_call():
    class Scale(nn.Module):
        def forward(self, x, *, factor=1.0):
            if factor < 0:
                raise ValueError("negative factor")
            return x * factor

    m = Scale()
    seen = []
    m.register_forward_pre_hook(lambda mod, args, kwargs: (args, {"factor": 3.0}),
                                with_kwargs=True)
    m.register_forward_hook(lambda mod, args, kwargs, out: seen.append(kwargs["factor"]),
                            with_kwargs=True)
    assert m(nv.tensor([2.0]), factor=5.0).item() == 6.0 and seen == [3.0]
    failed = []
    m2 = Scale()
    m2.register_forward_hook(lambda mod, args, out: failed.append(out), always_call=True)
    m2.register_forward_hook(lambda mod, args, out: failed.append("not always"))
    with pytest.raises(ValueError, match="negative"):
        m2(nv.tensor([1.0]), factor=-1.0)
    assert failed == [None]
    m.register_forward_pre_hook(lambda mod, a, k: 3, with_kwargs=True)
    with pytest.raises(RuntimeError, match=r"\(args, kwargs\) pair"):
        m(nv.tensor([1.0]))


def test_a_forward_hook_collects_features_and_the_old_backward_hook_is_refused():
    net = nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 1))
    feats, grads = {}, []

    def keep(mod, args, out):
        feats["hidden"] = out
        out.register_hook(lambda g: grads.append(g.shape))
    net[1].register_forward_hook(keep)
    net(nv.ones(2, 4)).sum().backward()
    assert feats["hidden"].shape == (2, 3) and grads == [(2, 3)]
    with pytest.raises(NotImplementedError, match="register_full_backward_hook"):
        net.register_backward_hook(lambda m, gi, go: None)
    with pytest.raises(TypeError, match="callable"):
        net.register_forward_hook(None)


def test_lookups_by_dotted_path_and_casts():
    net = nn.Sequential(nn.Linear(2, 2), nn.Sequential(nn.LayerNorm(2)))
    net.register_buffer("steps", nv.zeros(1))
    assert net.get_submodule("1.0") is net[1][0] and net.get_submodule("") is net
    assert net.get_parameter("1.0.weight") is net[1][0].weight
    assert net.get_buffer("steps") is net.steps
    with pytest.raises(AttributeError, match="no attribute `2`"):
        net.get_submodule("2")
    with pytest.raises(AttributeError, match="no parameter `bias2`"):
        net.get_parameter("0.bias2")
    net.register_module("extra", nn.Identity())
    assert net.extra is net.get_submodule("extra")
    with pytest.raises(KeyError, match="without '.'"):
        net.add_module("a.b", nn.Identity())
    assert net.half()[0].weight.dtype == nv.float16
    assert net.bfloat16()[0].weight.dtype == nv.bfloat16
    assert net.type(nv.float32)[0].weight.dtype == nv.float32


def test_a_module_registered_twice_is_listed_under_each_name_when_asked():
    shared = nn.Linear(2, 2)
    net = nn.Module()
    net.a, net.b = shared, shared
    net.register_buffer("steps", nv.zeros(1))
    assert [n for n, _ in net.named_modules()] == ["", "a"]
    assert [n for n, _ in net.named_modules(remove_duplicate=False)] == ["", "a", "b"]
    assert [n for n, _ in net.named_modules(prefix="m")] == ["m", "m.a"]
    assert [n for n, _ in net.named_parameters(remove_duplicate=False)] == [
        "a.weight", "a.bias", "b.weight", "b.bias"]
    assert [n for n, _ in net.named_parameters()] == ["a.weight", "a.bias"]
    assert [n for n, _ in net.named_buffers(recurse=False)] == ["steps"]


def test_data_parallel_wraps_one_device():
    net = nn.Linear(2, 1)
    dp = nn.DataParallel(net)
    x = nv.ones(3, 2)
    assert dp.module is net and (dp(x) - net(x)).abs().max().item() == 0
    assert list(dp.state_dict()) == ["module.weight", "module.bias"]
    assert nn.DataParallel(net, device_ids=[0]).output_device == 0
    with pytest.raises(ValueError, match="DistributedDataParallel"):
        nn.DataParallel(net, device_ids=[0, 1])


def test_embedding_takes_pytorchs_arguments():
    e = nn.Embedding(10, 3, padding_idx=0)
    assert e.weight[0].tolist() == [0.0, 0.0, 0.0] and repr(e) == "Embedding(10, 3, padding_idx=0)"
    e(nv.tensor([[0, 2, 0, 5]])).sum().backward()
    assert e.weight.grad[0].tolist() == [0.0] * 3 and e.weight.grad[2].tolist() == [1.0] * 3
    assert nn.Embedding(10, 3, padding_idx=-1).padding_idx == 9
    w = nv.tensor([[0.0, 1.0], [2.0, 3.0], [4.0, 5.0]])
    f = nn.Embedding.from_pretrained(w)
    assert not f.weight.requires_grad and f(nv.tensor([2])).tolist() == [[4.0, 5.0]]
    assert nn.Embedding.from_pretrained(w, freeze=False).weight.requires_grad
    m = nn.Embedding(4, 2, max_norm=1.0)
    with nv.no_grad():
        m.weight.copy_(nv.tensor([[3.0, 4.0]] * 4))
    m(nv.tensor([1]))          # renorms the row looked up in place, as PyTorch
    assert np.allclose(m.weight.numpy()[1], [0.6, 0.8]) and m.weight.tolist()[0] == [3.0, 4.0]
    assert nn.Linear(2, 3, device="cpu", dtype=nv.float64).weight.dtype == nv.float64
    assert nn.LayerNorm(4, dtype=nv.float64).bias.dtype == nv.float64
