"""nv.nn.Module's structure as PyTorch's: ``state_dict``/``load_state_dict`` walk every
registered name (a shared submodule under each), the traversals list it once; attribute
assignment rules and the order reassigned names keep; the containers' list operations."""
from collections import OrderedDict

import numpy as np
import pytest

import nova as nv
import nova.nn as nn


def aliased() -> nn.Module:
    """``a`` and ``b`` the same Linear, ``c`` another, and a buffer."""
    m = nn.Module()
    m.a = nn.Linear(2, 2)
    m.b = m.a
    m.c = nn.Linear(2, 1)
    m.register_buffer("steps", nv.zeros(1))
    return m


def names(pairs) -> list[str]:
    return [n for n, _ in pairs]


def test_a_shared_submodule_is_saved_under_each_name_and_traversed_once():
    m = aliased()
    assert list(m.state_dict()) == ["steps", "a.weight", "a.bias", "b.weight", "b.bias",
                                    "c.weight", "c.bias"]
    assert names(m.named_modules()) == ["", "a", "c"]
    assert names(m.named_modules(remove_duplicate=False)) == ["", "a", "b", "c"]
    assert names(m.named_children()) == ["a", "c"]
    assert list(m.children()) == [m.a, m.c] and len(list(m.modules())) == 3
    assert names(m.named_parameters()) == ["a.weight", "a.bias", "c.weight", "c.bias"]
    assert names(m.named_parameters(remove_duplicate=False)) == [
        "a.weight", "a.bias", "b.weight", "b.bias", "c.weight", "c.bias"]
    assert len(list(m.parameters())) == 4 and m.num_parameters() == 6 + 3
    seq = nn.Sequential(m.a, m.a)
    assert names(seq.named_buffers()) == [] and names(seq.named_children()) == ["0"]
    assert list(seq.state_dict()) == ["0.weight", "0.bias", "1.weight", "1.bias"]


def test_a_shared_submodule_round_trips_through_a_checkpoint_strictly(tmp_path):
    src = aliased()
    path = tmp_path / "aliased.safetensors"
    nv.save(src.state_dict(), path)
    dst = aliased()
    assert repr(dst.load_state_dict(nv.load(path))) == "<All keys matched successfully>"
    np.testing.assert_array_equal(dst.a.weight.numpy(), src.a.weight.numpy())
    np.testing.assert_array_equal(dst.c.bias.numpy(), src.c.bias.numpy())
    assert dst.b is dst.a
    # a model that does not share refuses the extra names; one that does needs them
    plain = nn.Module()
    plain.a, plain.c = nn.Linear(2, 2), nn.Linear(2, 1)
    plain.register_buffer("steps", nv.zeros(1))
    with pytest.raises(nn.StateDictError, match="unexpected keys: b.weight, b.bias"):
        plain.load_state_dict(src.state_dict())
    with pytest.raises(nn.StateDictError, match="missing keys: b.weight, b.bias"):
        dst.load_state_dict(plain.state_dict())
    with pytest.raises(TypeError, match="expected state_dict to be dict-like, got list"):
        dst.load_state_dict([("a.weight", nv.zeros(2, 2))])


def test_state_dict_prefix_keep_vars_and_destination():
    seq = nn.Sequential(nn.Linear(1, 1), nn.BatchNorm1d(1))
    assert list(seq.state_dict(prefix="p.")) == [
        "p.0.weight", "p.0.bias", "p.1.weight", "p.1.bias", "p.1.running_mean",
        "p.1.running_var", "p.1.num_batches_tracked"]
    assert list(seq[0].state_dict(prefix="p")) == ["pweight", "pbias"]   # as PyTorch
    kept = seq.state_dict(keep_vars=True)
    assert kept["0.weight"] is seq[0].weight and kept["1.running_mean"] is seq[1].running_mean
    sd = seq.state_dict()
    w = sd["0.weight"]
    assert not isinstance(w, nn.Parameter) and not w.requires_grad
    with nv.no_grad():
        seq[0].weight.fill_(3.0)          # a detached alias follows in-place updates
    assert w.item() == 3.0
    out = OrderedDict(first=nv.zeros(1))
    assert seq[0].state_dict(destination=out, prefix="x.") is out
    assert list(out) == ["first", "x.weight", "x.bias"]
    with pytest.raises(TypeError):
        seq.state_dict("p.")              # keyword-only (PyTorch: destination first)


def test_assignment_to_registered_names_follows_pytorchs_rules():
    lin = nn.Linear(2, 2)
    weight = lin.weight
    with pytest.raises(TypeError, match=r"Linear: cannot assign 'Tensor' as parameter "
                                        r"'weight' \(nn.Parameter or None expected\)"):
        lin.weight = nv.zeros(2, 2)
    assert lin.weight is weight and names(lin.named_parameters()) == ["weight", "bias"]
    lin.weight = None                     # allowed: declared, absent, not saved
    assert "weight" in lin._parameters and list(lin.state_dict()) == ["bias"]
    with pytest.raises(TypeError, match="cannot assign 'Tensor' object to parameter 'w'"):
        lin.register_parameter("w", nv.zeros(1))

    m = nn.Module()
    m.child = nn.ReLU()
    with pytest.raises(TypeError, match=r"cannot assign 'int' as child module 'child' "
                                        r"\(nn.Module or None expected\)"):
        m.child = 3
    m.child = None
    assert m._modules == {"child": None} and names(m.named_children()) == []

    bn = nn.BatchNorm1d(2)
    mean = nv.ones(2)
    bn.running_mean = mean                # a tensor replaces the buffer, in place
    assert bn.running_mean is mean and bn._buffers["running_mean"] is mean
    assert list(bn.state_dict())[2] == "running_mean"
    with pytest.raises(TypeError, match=r"BatchNorm1d: cannot assign 'float' as buffer "
                                        r"'running_var' \(Tensor or None expected\)"):
        bn.running_var = 1.0
    bn.running_var = nn.Parameter(nv.ones(2))   # a Parameter moves it to the parameters
    assert names(bn.named_buffers()) == ["running_mean", "num_batches_tracked"]
    assert names(bn.named_parameters()) == ["weight", "bias", "running_var"]
    with pytest.raises(TypeError, match="cannot assign 'Identity' as parameter 'weight'"):
        bn.weight = nn.Identity()
    bn.num_batches_tracked = nn.Identity()      # a Module moves a buffer to the children
    assert names(bn.named_buffers()) == ["running_mean"]
    assert bn._modules["num_batches_tracked"] is bn.num_batches_tracked


def test_buffer_persistence_and_registration_checks():
    m = nn.Module()
    m.register_buffer("scratch", nv.zeros(1), persistent=False)
    m.scratch = nv.ones(1)                # reassigning keeps it non-persistent
    assert list(m.state_dict()) == [] and names(m.named_buffers()) == ["scratch"]
    m.register_buffer("scratch", nv.ones(1))     # registering again: persistent
    assert list(m.state_dict()) == ["scratch"]
    del m.scratch
    m.scratch = nv.ones(1)                # no longer a buffer: a plain attribute
    assert names(m.named_buffers()) == [] and "scratch" in m.__dict__
    m.plain = 1
    with pytest.raises(KeyError, match="register_buffer: attribute 'plain' already exists"):
        m.register_buffer("plain", nv.zeros(1))
    with pytest.raises(KeyError, match="register_parameter: parameter name must be a "
                                       "non-empty string without '.', got 'a.b'"):
        m.register_parameter("a.b", None)
    with pytest.raises(KeyError, match="buffer name must be a non-empty string"):
        m.register_buffer("", None)
    with pytest.raises(TypeError, match="add_module: module name should be a string, "
                                        "got int"):
        m.add_module(1, nn.ReLU())
    with pytest.raises(TypeError, match="cannot assign 'list' object to buffer 'b'"):
        m.register_buffer("b", [1.0])


def test_reassigned_names_keep_their_place():
    m = nn.Module()
    m.x = nn.Linear(1, 1)
    m.y = nn.Linear(1, 1)
    m.x = nn.Linear(1, 1)
    assert list(m.state_dict()) == ["x.weight", "x.bias", "y.weight", "y.bias"]
    assert names(m.named_children()) == ["x", "y"]
    m.x.weight = nn.Parameter(nv.ones(1, 1))
    assert names(m.x.named_parameters()) == ["weight", "bias"]
    m.y.weight = m.x.weight               # tying keeps y.weight's place
    assert list(m.state_dict()) == ["x.weight", "x.bias", "y.weight", "y.bias"]
    assert names(m.named_parameters()) == ["x.weight", "x.bias", "y.bias"]
    bn = nn.BatchNorm1d(1)
    bn.running_mean = nv.zeros(1)
    assert names(bn.named_buffers()) == ["running_mean", "running_var",
                                         "num_batches_tracked"]


def test_sequential_and_module_list_as_pytorchs_lists():
    a, b, c, d = (nn.Linear(1, 1) for _ in range(4))
    seq = nn.Sequential(a, b, c)
    tail = seq[1:]
    assert type(tail) is nn.Sequential and list(tail._modules) == ["1", "2"]
    assert tail[0] is b and list(tail.state_dict()) == ["1.weight", "1.bias",
                                                        "2.weight", "2.bias"]
    named = nn.Sequential(OrderedDict(first=a, second=b))
    assert list(named[1:]._modules) == ["second"]
    seq.insert(-1, d)                     # before the last, then renumbered
    assert list(seq) == [a, b, d, c] and list(seq._modules) == ["0", "1", "2", "3"]
    assert seq.pop(0) is a and list(seq) == [b, d, c] and list(seq._modules) == ["0", "1", "2"]
    seq[0] = a
    del seq[1:]
    assert list(seq) == [a] and list(seq._modules) == ["0"]
    seq.append(b).extend([c])
    assert list(seq) == [a, b, c] and list(seq + nn.Sequential(d)) == [a, b, c, d]
    seq += nn.Sequential(d)
    assert list(seq._modules) == ["0", "1", "2", "3"]
    with pytest.raises(IndexError, match="Sequential: index 4 is out of range for 4 "
                                         "modules"):
        seq[4]
    with pytest.raises(ValueError, match="Sequential \\+: expected a Sequential, got list"):
        seq + [a]
    with pytest.raises(TypeError, match="cannot assign 'int' as child module '0'"):
        seq[0] = 1

    ml = nn.ModuleList([a, b])
    ml.insert(1, c)
    ml.insert(len(ml), d)
    assert list(ml) == [a, c, b, d] and list(ml._modules) == ["0", "1", "2", "3"]
    sub = ml[1:3]
    assert type(sub) is nn.ModuleList and list(sub._modules) == ["0", "1"]
    assert list(sub) == [c, b]
    del ml[::2]
    assert list(ml) == [c, d] and list(ml._modules) == ["0", "1"]
    assert list(ml + [a]) == [c, d, a] and ml[-1] is d
    ml += [a]
    assert len(ml) == 3
    with pytest.raises(IndexError, match="ModuleList.insert: index 5 is out of range"):
        ml.insert(5, a)
    with pytest.raises(TypeError, match="ModuleList.insert: int is not a Module"):
        ml.insert(0, 1)
    with pytest.raises(TypeError, match="ModuleList.extend: expected an iterable"):
        ml.extend(a)

    md = nn.ModuleDict([("x", a), ("y", b)])
    md.update({"x": c, "z": d})           # replaces in place, appends new keys
    assert list(md.items()) == [("x", c), ("y", b), ("z", d)]
    assert md.pop("y") is b and list(md) == ["x", "z"]
    del md["x"]
    assert list(md) == ["z"]
    md.clear()
    assert len(md) == 0
    with pytest.raises(ValueError, match="ModuleDict.update: expected a mapping"):
        md.update([("x", a, b)])


def test_structure_matches_torch():
    torch = pytest.importorskip("torch")

    def probe(lib):
        out = {}
        m = lib.nn.Module()
        m.a = lib.nn.Linear(2, 2)
        m.b = m.a
        out["state"] = list(m.state_dict())
        out["children"] = names(m.named_children())
        out["modules"] = names(m.named_modules(remove_duplicate=False))
        out["params"] = names(m.named_parameters(remove_duplicate=False))
        out["prefix"] = list(lib.nn.Sequential(lib.nn.Linear(1, 1)).state_dict(prefix="p."))
        m = lib.nn.Module()
        m.x, m.y = lib.nn.Linear(1, 1), lib.nn.Linear(1, 1)
        m.x = lib.nn.Linear(1, 1)
        m.y.weight = m.x.weight
        out["order"] = list(m.state_dict()), names(m.named_parameters())
        seq = lib.nn.Sequential(*(lib.nn.Identity() for _ in range(3)))
        out["slice"] = type(seq[1:]).__name__, list(seq[1:]._modules)
        ml = lib.nn.ModuleList([lib.nn.ReLU(), lib.nn.Tanh()])
        ml.insert(1, lib.nn.Identity())
        del ml[0]
        out["list"] = [type(x).__name__ for x in ml], list(ml._modules)
        lin = lib.nn.Linear(1, 1)
        try:
            lin.weight = lib.zeros(1, 1)
            out["assign"] = "allowed"
        except TypeError:
            out["assign"] = "TypeError"
        return out

    assert probe(nv) == probe(torch)


# ---------------------------------------------------------------- fuzz_nn_api findings

def test_norms_without_affine_weights_register_none_parameters():
    """``LayerNorm``/``RMSNorm`` without weights kept plain None attributes: a tensor
    assigned there later was taken, and ``forward`` used it (PyTorch raises)."""
    for m in (nn.LayerNorm(4, elementwise_affine=False), nn.RMSNorm(4, elementwise_affine=False)):
        assert m.weight is None and "weight" in m._parameters
        with pytest.raises(TypeError):
            m.weight = nv.full((4,), 2.0)
        assert m.weight is None and m.elementwise_affine is False
        out = m(nv.tensor([[1.0, 2.0, 3.0, 4.0]]))
        assert float(out.abs().max()) < 1.7              # normalized, not scaled by 2
    ln = nn.LayerNorm(4, bias=False)
    assert ln.bias is None and "bias" in ln._parameters and list(ln.state_dict()) == ["weight"]
    nn.LayerNorm(4, elementwise_affine=False).register_parameter("bias", None)
    assert "elementwise_affine=False, bias=False" in repr(nn.LayerNorm(4, elementwise_affine=False))


def test_deepcopy_of_a_parameter_leaves_its_grad_behind():
    """PyTorch's ``Parameter.__deepcopy__`` copies the value only (an EMA or teacher copy
    of a model mid-step carried the gradients)."""
    import copy
    lin = nn.Linear(2, 2)
    lin(nv.ones(1, 2)).sum().backward()
    twin = copy.deepcopy(lin)
    assert lin.weight.grad is not None and twin.weight.grad is None
    np.testing.assert_array_equal(twin.weight.detach().numpy(), lin.weight.detach().numpy())


def test_module_type_casts_integer_buffers_too():
    bn = nn.BatchNorm1d(2)
    assert bn.type(nv.float64) is bn
    assert bn.num_batches_tracked.dtype == nv.float64 and bn.weight.dtype == nv.float64
    bn = nn.BatchNorm1d(2).type(nv.DoubleTensor)
    assert bn.num_batches_tracked.dtype == nv.float64


def test_modulelist_extend_numbers_from_its_length_once():
    """Keys renamed by hand ('0', '2' after deleting '1'): extend recounted per module,
    so each new module took key '2' and only the last was kept."""
    ml = nn.ModuleList([nn.ReLU(), nn.Tanh(), nn.Identity()])
    del ml._modules["1"]
    ml.extend([nn.Linear(2, 2), nn.Sigmoid()])
    assert {k: type(v).__name__ for k, v in ml._modules.items()} == \
        {"0": "ReLU", "2": "Linear", "3": "Sigmoid"}


def test_convolutions_have_pytorchs_transposed_and_output_padding():
    c = nn.Conv2d(1, 2, 3)
    assert c.transposed is False and c.output_padding == (0, 0)
    assert nn.Conv1d(1, 2, 3).output_padding == (0,)


def test_register_checks_the_name_before_the_value_as_pytorch():
    """A bad name raises KeyError even with a bad value (PyTorch's order; Nova raised the
    value's TypeError first)."""
    m = nn.Linear(2, 2)
    for call in (lambda: m.register_buffer("a.b", 3), lambda: m.register_parameter("", nv.ones(1)),
                 lambda: m.register_buffer("weight", 3)):
        with pytest.raises(KeyError):
            call()
    with pytest.raises(TypeError, match="Tensor or None required"):
        m.register_buffer("fine", 3)
    with pytest.raises(TypeError, match="nn.Parameter or None required"):
        m.register_parameter("fine", nv.ones(1))


def test_tied_weights_are_one_entry_object_and_assign_ties_them_again(tmp_path):
    """``state_dict()`` gave a tied parameter two detached objects, so ``nv.save`` stored
    it twice and ``load_state_dict(assign=True)`` untied the model (PyTorch's entries
    share one storage; fuzz_serial). One object per tensor now, one Parameter back."""
    def tied():
        m = nn.Sequential(nn.Linear(2, 2), nn.Linear(2, 2))
        m[1].weight = m[0].weight
        return m
    sd = tied().state_dict()
    assert sd["0.weight"] is sd["1.weight"] and sd["0.bias"] is not sd["1.bias"]
    nv.save(sd, tmp_path / "tied.nova")
    m = tied()
    m.load_state_dict(nv.load(tmp_path / "tied.nova"), assign=True)
    assert m[0].weight is m[1].weight and isinstance(m[0].weight, nn.Parameter)
    np.testing.assert_array_equal(m[1].weight.detach().numpy(), sd["0.weight"].numpy())
    with nv.no_grad():
        m[0].weight.mul_(2)
    np.testing.assert_array_equal(m[1].weight.detach().numpy(), 2 * sd["0.weight"].numpy())
    untied = nn.Sequential(nn.Linear(2, 2), nn.Linear(2, 2)).state_dict()
    assert untied["0.weight"] is not untied["1.weight"]
