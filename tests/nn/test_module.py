"""nv.nn.Module: registration, traversal, modes, state dicts, repr."""
import numpy as np
import pytest

import nova as nv
import nova.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(3, 4)
        self.act = nn.ReLU()
        self.blocks = nn.ModuleList([nn.Linear(4, 4), nn.Dropout(0.1)])
        self.heads = nn.ModuleDict({"out": nn.Linear(4, 2, bias=False)})
        self.scale = nn.Parameter(nv.ones(1))
        self.register_buffer("running", nv.zeros(4))
        self.register_buffer("scratch", nv.zeros(2), persistent=False)

    def forward(self, x):
        h = self.blocks[1](self.blocks[0](self.act(self.fc1(x))))
        return self.heads["out"](h + self.running) * self.scale


def test_registration_and_traversal():
    net = Net()
    names = [n for n, _ in net.named_parameters()]
    assert names == ["scale", "fc1.weight", "fc1.bias", "blocks.0.weight", "blocks.0.bias",
                     "heads.out.weight"]
    assert sum(p.numel() for p in net.parameters()) == net.num_parameters() == 1 + 16 + 20 + 8
    assert [n for n, _ in net.named_children()] == ["fc1", "act", "blocks", "heads"]
    assert len(list(net.modules())) == 8
    assert [n for n, _ in net.named_buffers()] == ["running", "scratch"]
    assert all(p.requires_grad and p.is_leaf for p in net.parameters())
    assert isinstance(net.fc1.weight, nn.Parameter) and isinstance(net.fc1.weight, nv.Tensor)
    assert net(nv.ones(5, 3)).shape == (5, 2)


def test_train_eval_and_zero_grad():
    net = Net()
    assert net.training and net.blocks[1].training
    net.eval()
    assert not net.training and not net.blocks[1].training
    net.train()
    net(nv.ones(2, 3)).sum().backward()
    assert net.fc1.weight.grad is not None
    net.zero_grad(set_to_none=False)
    assert net.fc1.weight.grad.abs().sum().item() == 0
    net.zero_grad()
    assert net.fc1.weight.grad is None


def test_state_dict_round_trip_and_errors():
    a, b = Net(), Net()
    sd = a.state_dict()
    assert list(sd) == ["scale", "running", "fc1.weight", "fc1.bias", "blocks.0.weight",
                        "blocks.0.bias", "heads.out.weight"]
    assert "scratch" not in sd  # non-persistent buffer
    matched = b.load_state_dict(sd)
    assert repr(matched) == str(matched) == "<All keys matched successfully>"
    assert matched.missing_keys == [] and matched.unexpected_keys == []
    for (n, p), (_, q) in zip(a.named_parameters(), b.named_parameters()):
        np.testing.assert_array_equal(p.numpy(), q.numpy())
    bad = dict(sd)
    bad["fc1.weight"] = nv.zeros(5, 3)
    bad["extra"] = nv.zeros(1)
    del bad["scale"]
    with pytest.raises(nn.StateDictError) as err:
        b.load_state_dict(bad)
    msg = str(err.value)
    assert "size mismatch for fc1.weight: checkpoint (5, 3) vs model (4, 3)" in msg
    assert "missing keys: scale" in msg and "unexpected keys: extra" in msg
    del bad["fc1.weight"]
    result = b.load_state_dict(bad, strict=False)
    missing, unexpected = result          # PyTorch's named pair still unpacks
    assert missing == ["scale", "fc1.weight"] and unexpected == ["extra"]
    assert result.missing_keys is missing and result.unexpected_keys is unexpected
    assert repr(result) == ("_IncompatibleKeys(missing_keys=['scale', 'fc1.weight'], "
                            "unexpected_keys=['extra'])")


def test_tied_parameters_are_counted_once_and_stay_tied():
    emb = nn.Embedding(10, 4)
    head = nn.Linear(4, 10, bias=False)
    head.weight = emb.weight
    model = nn.Sequential(emb, head)
    assert len(list(model.parameters())) == 1
    with nv.no_grad():
        emb.weight.mul_(2)
    np.testing.assert_array_equal(head.weight.numpy(), emb.weight.numpy())


def test_apply_to_repr_and_dtype_conversion():
    net = Net()
    seen = []
    net.apply(lambda m: seen.append(type(m).__name__))
    assert seen[-1] == "Net" and "Linear" in seen
    text = repr(net)
    assert "(fc1): Linear(in_features=3, out_features=4, bias=True)" in text
    assert "(1): Dropout(p=0.1, inplace=False)" in text
    assert net.to("cpu") is net
    if not nv.cuda.is_available():
        with pytest.raises(RuntimeError, match="Module.to: CUDA is not available: "):
            net.to("cuda")
    w = net.fc1.weight
    net.double()
    assert net.fc1.weight is w and w.dtype == nv.float64 and net.running.dtype == nv.float64
    assert net(nv.ones(1, 3, dtype=nv.float64)).dtype == nv.float64


def test_module_errors():
    class Broken(nn.Module):
        def __init__(self):
            self.x = 1

    with pytest.raises(AttributeError, match="call super\\(\\).__init__\\(\\)"):
        Broken()
    with pytest.raises(AttributeError, match="'Net' object has no attribute 'nope'"):
        Net().nope
    with pytest.raises(NotImplementedError, match="Module does not define forward"):
        nn.Module()(1)


def test_train_calls_each_childs_own_train_so_an_override_is_honoured():
    # a detection backbone keeps its frozen batch norm in evaluation whatever the mode;
    # setting the flag on every descendant directly bypassed that and updated its
    # running statistics in training
    class Backbone(nv.nn.Module):
        def __init__(self):
            super().__init__()
            self.bn = nv.nn.BatchNorm1d(2)

        def forward(self, x):
            return self.bn(x)

        def train(self, mode=True):
            super().train(mode)
            self.bn.eval()
            return self

    model = nv.nn.Sequential(Backbone(), nv.nn.Linear(2, 2))
    assert model.train() is model
    assert model.training and model[1].training and model[0].training
    assert not model[0].bn.training
    model(nv.tensor([[1.0, 2.0], [3.0, 5.0]]))
    assert model[0].bn.running_mean.tolist() == [0.0, 0.0]
    model.eval()
    assert not any(m.training for m in model.modules())
    with pytest.raises(ValueError, match="expected to be boolean"):
        model.train(1)


def test_to_goes_through_each_childs_own_apply_so_plain_tensor_attributes_convert():
    # a module keeping a tensor as a plain attribute (a cached mask or table) overrides
    # _apply so .to()/.double() convert it too, as PyTorch's to() calls _apply
    class Cached(nv.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nv.nn.Linear(2, 2)
            self.table = nv.ones(3)

        def _apply(self, fn, recurse=True):
            super()._apply(fn, recurse)
            self.table = fn(self.table)
            return self

    model = nv.nn.Sequential(Cached())
    weight = model[0].lin.weight
    model[0].lin(nv.ones(1, 2)).sum().backward()
    assert model.double() is model
    assert model[0].table.dtype == nv.float64
    # parameters keep their identity; their gradients convert with them
    assert model[0].lin.weight is weight and weight.dtype == nv.float64
    assert weight.grad.dtype == nv.float64 and weight.grad.tolist() == [[1.0, 1.0]] * 2
    model.float()
    assert model[0].table.dtype == nv.float32 and weight.grad.dtype == nv.float32
