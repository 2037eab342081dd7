"""PyTorch's per-module load hooks and ``_load_from_state_dict`` overrides, ported:
``parametrizations.weight_norm`` loads a checkpoint of the old ``weight_norm``
(``weight_g``/``weight_v``), a lazy module loads a checkpoint before its first call
(materializing its parameters), and an instance norm refuses the running statistics
of an unversioned checkpoint with PyTorch's explanation. Checkpoints are written by
torch (``torch.save``) and read with ``nv.load``; the interpreter runs these tiny
modules."""
import re
import warnings
from collections import OrderedDict

import numpy as np
import pytest

import nova as nv
from nova.nn.lazy import LazyModuleMixin
from nova.nn.module import StateDictError

torch = pytest.importorskip("torch")


@pytest.fixture(autouse=True)
def interpreted():
    with nv.engine("interp"):
        yield


def _through_file(module, tmp_path):
    """``module.state_dict()`` written by ``torch.save`` and read by ``nv.load``."""
    path = tmp_path / "ckpt.pt"
    torch.save(module.state_dict(), path)
    return nv.load(path)


def _forward_both(tm, nm, shape, seed=0):
    x = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    with torch.no_grad():
        ref = tm(torch.from_numpy(x)).numpy()
    return nm(nv.tensor(x)).numpy(), ref


# ---------------------------------------------------------------- weight_norm

def test_old_weight_norm_checkpoint_loads_into_parametrized_weight_norm(tmp_path):
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)     # torch's old API is deprecated
        old = torch.nn.Sequential(torch.nn.Linear(4, 3),
                                  torch.nn.utils.weight_norm(torch.nn.Conv1d(3, 2, 3), dim=None))
        torch.nn.utils.weight_norm(old[0])
    with torch.no_grad():                       # g no longer the norm of v: both must load
        old[0].weight_g.mul_(1.5)
    state = _through_file(old, tmp_path)
    assert {"0.weight_g", "0.weight_v", "1.weight_g", "1.weight_v"} <= set(state)

    P = nv.nn.utils.parametrizations
    new = nv.nn.Sequential(P.weight_norm(nv.nn.Linear(4, 3)),
                           P.weight_norm(nv.nn.Conv1d(3, 2, 3), dim=None))
    result = new.load_state_dict(state)
    assert result.missing_keys == [] and result.unexpected_keys == []
    ref_new = torch.nn.Sequential(
        torch.nn.utils.parametrizations.weight_norm(torch.nn.Linear(4, 3)),
        torch.nn.utils.parametrizations.weight_norm(torch.nn.Conv1d(3, 2, 3), dim=None))
    ref_new.load_state_dict(old.state_dict())           # torch converts the same way
    assert sorted(new.state_dict()) == sorted(ref_new.state_dict())

    linear_out, ref = _forward_both(old[0], new[0], (2, 4))
    np.testing.assert_allclose(linear_out, ref, rtol=1e-5, atol=1e-6)
    conv_out, ref = _forward_both(old[1], new[1], (1, 3, 5))
    np.testing.assert_allclose(conv_out, ref, rtol=1e-5, atol=1e-6)


def test_weight_norm_hook_needs_both_old_keys():
    """Only ``weight_g`` (no ``weight_v``) is left as it is: reported, as by torch."""
    m = nv.nn.utils.parametrizations.weight_norm(nv.nn.Linear(2, 2))
    result = m.load_state_dict({"weight_g": nv.ones(2, 1), "bias": nv.zeros(2)},
                               strict=False)
    assert result.unexpected_keys == ["weight_g"]
    assert sorted(result.missing_keys) == ["parametrizations.weight.original0",
                                           "parametrizations.weight.original1"]


# ---------------------------------------------------------------- lazy modules

def test_lazy_linear_loads_a_torch_linear_checkpoint_before_its_first_call(tmp_path):
    torch.manual_seed(0)
    ref = torch.nn.Linear(5, 3)
    m = nv.nn.LazyLinear(3)
    weight = m.weight
    result = m.load_state_dict(_through_file(ref, tmp_path))
    assert result.missing_keys == [] and result.unexpected_keys == []
    assert not m.has_uninitialized_params() and m.weight is weight    # same object
    assert type(m).__name__ == "LazyLinear" and m.in_features == 5    # lazy until called
    out, expected = _forward_both(ref, m, (2, 5))
    assert type(m) is nv.nn.Linear
    np.testing.assert_allclose(out, expected, rtol=1e-6, atol=1e-6)


def test_lazy_conv_and_batchnorm_load_torch_checkpoints(tmp_path):
    torch.manual_seed(0)
    ref = torch.nn.Sequential(torch.nn.Conv2d(4, 6, 3, groups=2), torch.nn.BatchNorm2d(6),
                              torch.nn.ConvTranspose1d(4, 2, 2, groups=2))
    with torch.no_grad():
        ref[1].running_mean.uniform_(-1, 1)
        ref[1].running_var.uniform_(0.5, 2)
    ref.eval()
    lazy = nv.nn.Sequential(nv.nn.LazyConv2d(6, 3, groups=2), nv.nn.LazyBatchNorm2d(),
                            nv.nn.LazyConvTranspose1d(2, 2, groups=2))
    lazy.load_state_dict(_through_file(ref, tmp_path))
    lazy.eval()
    assert (lazy[0].in_channels, lazy[1].num_features, lazy[2].in_channels) == (4, 6, 4)
    conv_bn = nv.nn.Sequential(lazy[0], lazy[1])
    out, expected = _forward_both(ref[:2], conv_bn, (1, 4, 5, 5))
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5)
    out, expected = _forward_both(ref[2], lazy[2], (1, 4, 3))
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-6)
    assert type(lazy[1]) is nv.nn.BatchNorm2d


def test_lazy_instance_norm_loads_and_runs():
    """(torch leaves ``num_features`` 0 after such a load and its first call fails)"""
    src = nv.nn.InstanceNorm1d(3, affine=True, track_running_stats=True)
    with nv.no_grad():
        src.weight.copy_(nv.tensor([1.0, 2.0, 3.0]))
    m = nv.nn.LazyInstanceNorm1d()
    m.load_state_dict(src.state_dict())
    x = nv.tensor(np.arange(12, dtype=np.float32).reshape(1, 3, 4))
    np.testing.assert_allclose(m(x).numpy(), src(x).numpy(), rtol=1e-6)
    assert m.num_features == 3


def test_lazy_to_lazy_load_keeps_it_uninitialized():
    """An uninitialized module's state_dict loads into an uninitialized module, every
    key matched, as in torch."""
    for L in (torch, nv):
        m = L.nn.LazyLinear(3)
        result = m.load_state_dict(L.nn.LazyLinear(3).state_dict())
        assert result.missing_keys == [] and result.unexpected_keys == []
        assert m.has_uninitialized_params()


def test_custom_lazy_module_takes_each_entry_shape_as_torch():
    """A user's LazyModuleMixin module: each uninitialized tensor with an entry takes
    its shape, the others stay uninitialized (PyTorch's rule)."""
    def scenario(L):
        mixin = torch.nn.modules.lazy.LazyModuleMixin if L is torch else LazyModuleMixin

        class Affine(mixin, L.nn.Module):
            def __init__(self):
                super().__init__()
                self.scale = L.nn.UninitializedParameter()
                self.shift = L.nn.UninitializedParameter()

            def initialize_parameters(self, x):
                for p in (self.scale, self.shift):
                    p.materialize(x.shape[-1])

            def forward(self, x):
                return x * self.scale + self.shift
        m = Affine()
        result = m.load_state_dict({"scale": L.tensor([2.0, 3.0, 4.0])}, strict=False)
        return (result.missing_keys, tuple(m.scale.shape), m.scale.tolist(),
                type(m.shift).__name__)
    assert scenario(nv) == scenario(torch) == (["shift"], (3,), [2.0, 3.0, 4.0],
                                               "UninitializedParameter")


def test_lazy_load_with_a_missing_entry_initializes_it_as_the_first_call():
    """strict=False without ``bias``: torch reports it missing too; Nova initializes it
    as the first call would (torch leaves it uninitialized)."""
    m = nv.nn.LazyLinear(3)
    w = np.arange(6, dtype=np.float32).reshape(3, 2)
    result = m.load_state_dict({"weight": w}, strict=False)
    assert result.missing_keys == ["bias"]
    assert not m.has_uninitialized_params()
    np.testing.assert_array_equal(m.weight.numpy(), w)
    bias = m.bias.numpy()
    assert bias.shape == (3,) and np.all(np.abs(bias) <= 1 / np.sqrt(2))


def test_lazy_load_reports_a_mismatched_or_unusable_checkpoint():
    m = nv.nn.LazyLinear(3)
    with pytest.raises(StateDictError, match=re.escape("size mismatch for weight: "
                                                       "checkpoint (4, 2) vs model (3, 2)")):
        m.load_state_dict({"weight": nv.ones(4, 2), "bias": nv.ones(3)})
    m = nv.nn.LazyConv1d(2, 3)
    with pytest.raises(StateDictError, match="no initialized 'weight' entry"):
        m.load_state_dict({"bias": nv.ones(2)})
    assert m.has_uninitialized_params()
    m = nv.nn.LazyConvTranspose1d(2, 3, groups=2)
    with pytest.raises(StateDictError, match=r"in_channels \(3\) must be divisible by "
                                             r"groups \(2\)"):
        m.load_state_dict({"weight": nv.ones(3, 1, 3), "bias": nv.ones(2)})
    m = nv.nn.LazyBatchNorm1d()
    with pytest.raises(StateDictError, match=re.escape("'weight' entry has shape (2, 2), "
                                                       "expected 1 dim")):
        m.load_state_dict(OrderedDict(weight=nv.ones(2, 2)), strict=False)


# ---------------------------------------------------------------- instance norm

def _running_stats_error(L, state, strict):
    try:
        L.nn.InstanceNorm2d(3).load_state_dict(state, strict=strict)
    except RuntimeError as e:
        return str(e)
    return None


def _torch_paragraph(message):
    return next(line.strip() for line in message.splitlines()
                if line.strip().startswith("Unexpected running stats"))


def test_instance_norm_refuses_running_stats_of_an_unversioned_checkpoint():
    bn = torch.nn.BatchNorm2d(3, affine=False)
    unversioned = OrderedDict((k, v) for k, v in bn.state_dict().items()
                              if k != "num_batches_tracked")    # (no _metadata)
    nv_state = OrderedDict((k, nv.tensor(v.numpy())) for k, v in unversioned.items())
    for strict in (True, False):
        expected = _torch_paragraph(_running_stats_error(torch, unversioned, strict))
        message = _running_stats_error(nv, nv_state, strict)
        assert message is not None and expected in message
    assert 'buffer(s) "running_mean" and "running_var" for InstanceNorm2d' in expected


def test_instance_norm_versioned_checkpoint_reports_unexpected_keys():
    """With a version (2, as torch saves) the running statistics are plain unexpected
    keys: ignored with strict=False, as in torch."""
    state = nv.nn.BatchNorm2d(3, affine=False).state_dict()
    m = nv.nn.InstanceNorm2d(3)
    result = m.load_state_dict(state, strict=False)
    assert sorted(result.unexpected_keys) == ["num_batches_tracked", "running_mean",
                                              "running_var"]
    assert nv.nn.InstanceNorm2d(3).state_dict()._metadata == \
        torch.nn.InstanceNorm2d(3).state_dict()._metadata == {"": {"version": 2}}


def test_tracking_instance_norm_fills_num_batches_tracked_of_an_old_checkpoint():
    state = OrderedDict(running_mean=nv.tensor([1.0, 2.0]), running_var=nv.ones(2))
    m = nv.nn.InstanceNorm1d(2, track_running_stats=True)
    result = m.load_state_dict(state)                   # no _metadata: version None
    assert result.missing_keys == [] and m.num_batches_tracked.item() == 0
    np.testing.assert_array_equal(m.running_mean.numpy(), [1.0, 2.0])
    t = torch.nn.InstanceNorm1d(2, track_running_stats=True)
    assert t.load_state_dict(OrderedDict(running_mean=torch.tensor([1.0, 2.0]),
                                         running_var=torch.ones(2))).missing_keys == []
