"""PyTorch's per-module load hooks and ``_load_from_state_dict`` overrides, ported:
``parametrizations.weight_norm`` loads a checkpoint of the old ``weight_norm``
(``weight_g``/``weight_v``), a lazy module loads a checkpoint before its first call
(materializing its parameters), and an instance norm refuses the running statistics
of an unversioned checkpoint with PyTorch's explanation.

CI has no torch: there the checkpoints are files laid out as torch.save writes them
(the writer of tests/test_serialization_torch_format.py: keys, shapes, dtypes and
``_metadata`` as PyTorch's modules save them) and the outputs are checked against
numpy formulas (weight norm ``w = g * v / ||v||``, convolutions, batch norm). Where
torch is installed, checkpoints written by ``torch.save`` are loaded too and compared
with torch's modules. The interpreter runs these tiny modules."""
import io
import re
import warnings
from collections import OrderedDict

import numpy as np
import pytest

import nova as nv
from nova.nn.lazy import LazyModuleMixin
from nova.nn.module import StateDictError
from tests.test_serialization_torch_format import tensor, torch_file


@pytest.fixture(autouse=True)
def interpreted():
    with nv.engine("interp"):
        yield


def _through_file(module, tmp_path):
    """``module.state_dict()`` written by ``torch.save`` and read by ``nv.load``."""
    torch = pytest.importorskip("torch")
    path = tmp_path / "ckpt.pt"
    torch.save(module.state_dict(), path)
    return nv.load(path)


def _forward_both(tm, nm, shape, seed=0):
    torch = pytest.importorskip("torch")
    x = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    with torch.no_grad():
        ref = tm(torch.from_numpy(x)).numpy()
    return nm(nv.tensor(x)).numpy(), ref


def _torch_format(entries, metadata):
    """``nv.load`` of a file laid out as ``torch.save(state_dict)`` writes it: the
    entries (numpy arrays) in order, with ``_metadata`` (module versions by prefix)."""
    state = OrderedDict((k, tensor(v)) for k, v in entries)
    state._metadata = OrderedDict((k, {"version": v}) for k, v in metadata)
    loaded = nv.load(io.BytesIO(torch_file(state)))
    assert list(loaded) == [k for k, _ in entries] and loaded._metadata == state._metadata
    return loaded


def _f32(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


def _conv2d(x, w, b, groups=1):
    """Stride 1, no padding, ``groups`` groups: ``x (N, C, H, W)``, ``w (O, C/groups, kh,
    kw)``."""
    out_g, in_g = w.shape[0] // groups, w.shape[1]
    windows = np.lib.stride_tricks.sliding_window_view(x, w.shape[2:], axis=(2, 3))
    return np.concatenate([
        np.einsum("nchwpq,ocpq->nohw", windows[:, g * in_g:(g + 1) * in_g],
                  w[g * out_g:(g + 1) * out_g]) for g in range(groups)], axis=1) \
        + b[None, :, None, None]


def _conv1d(x, w, b):
    return _conv2d(x[:, :, None, :], w[:, :, None, :], b)[:, :, 0, :]


def _conv_transpose1d(x, w, b, groups=1):
    """Stride 1, no padding: ``w (C, O/groups, k)``; ``out[n, o, t + j] += x[n, c, t]
    w[c, o, j]`` within each group."""
    n, c, length = x.shape
    in_g, out_g, k = c // groups, w.shape[1], w.shape[2]
    out = np.zeros((n, out_g * groups, length + k - 1)) + b[None, :, None]
    for g in range(groups):
        for j in range(k):
            out[:, g * out_g:(g + 1) * out_g, j:j + length] += np.einsum(
                "nct,co->not", x[:, g * in_g:(g + 1) * in_g], w[g * in_g:(g + 1) * in_g, :, j])
    return out


# ---------------------------------------------------------------- weight_norm

def test_old_weight_norm_torch_format_checkpoint_loads_into_parametrized_weight_norm():
    """A ``Sequential(weight_norm(Linear(4, 3)), weight_norm(Conv1d(3, 2, 3), dim=None))``
    state_dict of the old API (``weight_g`` of shape (3, 1) and ``()``, ``weight_v``),
    ``g`` not the norm of ``v``: g and v become ``original0``/``original1`` and the
    weights are ``g * v / ||v||`` (the norm over all dims but 0, and over all dims)."""
    rng = np.random.default_rng(0)
    v0, b0, v1, b1 = _f32(rng, 3, 4), _f32(rng, 3), _f32(rng, 2, 3, 3), _f32(rng, 2)
    g0 = (1.5 * np.linalg.norm(v0, axis=1, keepdims=True)).astype(np.float32)
    g1 = np.array(0.7 * np.linalg.norm(v1), dtype=np.float32)
    state = _torch_format([("0.bias", b0), ("0.weight_g", g0), ("0.weight_v", v0),
                           ("1.bias", b1), ("1.weight_g", g1), ("1.weight_v", v1)],
                          [("", 1), ("0", 1), ("1", 1)])
    P = nv.nn.utils.parametrizations
    new = nv.nn.Sequential(P.weight_norm(nv.nn.Linear(4, 3)),
                           P.weight_norm(nv.nn.Conv1d(3, 2, 3), dim=None))
    result = new.load_state_dict(state)
    assert result.missing_keys == [] and result.unexpected_keys == []
    loaded = {k: v.numpy() for k, v in new.state_dict().items()}
    assert sorted(loaded) == ["0.bias", "0.parametrizations.weight.original0",
                              "0.parametrizations.weight.original1",
                              "1.bias", "1.parametrizations.weight.original0",
                              "1.parametrizations.weight.original1"]
    for key, expected in [("0.parametrizations.weight.original0", g0),
                          ("0.parametrizations.weight.original1", v0),
                          ("1.parametrizations.weight.original0", g1),
                          ("1.parametrizations.weight.original1", v1)]:
        assert loaded[key].shape == expected.shape, key
        np.testing.assert_array_equal(loaded[key], expected, err_msg=key)
    w0 = g0 * v0 / np.linalg.norm(v0, axis=1, keepdims=True)
    w1 = g1 * v1 / np.linalg.norm(v1)
    np.testing.assert_allclose(new[0].weight.detach().numpy(), w0, rtol=1e-6)
    x = _f32(rng, 2, 4)
    np.testing.assert_allclose(new[0](nv.tensor(x)).detach().numpy(), x @ w0.T + b0,
                               rtol=1e-5, atol=1e-6)
    x = _f32(rng, 1, 3, 5)
    np.testing.assert_allclose(new[1](nv.tensor(x)).detach().numpy(), _conv1d(x, w1, b1),
                               rtol=1e-5, atol=1e-5)


def test_old_weight_norm_checkpoint_loads_into_parametrized_weight_norm(tmp_path):
    torch = pytest.importorskip("torch")
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

def test_lazy_linear_loads_a_torch_format_checkpoint_before_its_first_call():
    rng = np.random.default_rng(1)
    w, b = _f32(rng, 3, 5), _f32(rng, 3)
    m = nv.nn.LazyLinear(3)
    weight = m.weight
    result = m.load_state_dict(_torch_format([("weight", w), ("bias", b)], [("", 1)]))
    assert result.missing_keys == [] and result.unexpected_keys == []
    assert not m.has_uninitialized_params() and m.weight is weight    # same object
    assert type(m).__name__ == "LazyLinear" and m.in_features == 5    # lazy until called
    np.testing.assert_array_equal(m.weight.detach().numpy(), w)
    x = _f32(rng, 2, 5)
    out = m(nv.tensor(x)).detach().numpy()
    assert type(m) is nv.nn.Linear
    np.testing.assert_allclose(out, x @ w.T + b, rtol=1e-5, atol=1e-6)


def test_lazy_conv_and_batchnorm_load_torch_format_checkpoints():
    """``Conv2d(4, 6, 3, groups=2)``, ``BatchNorm2d(6)`` (its ``num_batches_tracked`` an
    int64 scalar) and ``ConvTranspose1d(4, 2, 2, groups=2)`` as PyTorch saves them:
    the lazy modules take their sizes from the entries and compute as the loaded
    modules would (eval batch norm from the running statistics)."""
    rng = np.random.default_rng(2)
    cw, cb = _f32(rng, 6, 2, 3, 3), _f32(rng, 6)
    bw, bb = _f32(rng, 6), _f32(rng, 6)
    mean, var = _f32(rng, 6), rng.uniform(0.5, 2, 6).astype(np.float32)
    tw, tb = _f32(rng, 4, 1, 2), _f32(rng, 2)
    state = _torch_format(
        [("0.weight", cw), ("0.bias", cb), ("1.weight", bw), ("1.bias", bb),
         ("1.running_mean", mean), ("1.running_var", var),
         ("1.num_batches_tracked", np.array(7, np.int64)), ("2.weight", tw), ("2.bias", tb)],
        [("", 1), ("0", 1), ("1", 2), ("2", 1)])
    lazy = nv.nn.Sequential(nv.nn.LazyConv2d(6, 3, groups=2), nv.nn.LazyBatchNorm2d(),
                            nv.nn.LazyConvTranspose1d(2, 2, groups=2))
    result = lazy.load_state_dict(state)
    assert result.missing_keys == [] and result.unexpected_keys == []
    lazy.eval()
    assert (lazy[0].in_channels, lazy[1].num_features, lazy[2].in_channels) == (4, 6, 4)
    assert lazy[1].num_batches_tracked.item() == 7
    x = _f32(rng, 1, 4, 5, 5)
    conv = _conv2d(x, cw, cb, groups=2)
    expected = (conv - mean[:, None, None]) / np.sqrt(var[:, None, None] + 1e-5) \
        * bw[:, None, None] + bb[:, None, None]
    out = nv.nn.Sequential(lazy[0], lazy[1])(nv.tensor(x)).detach().numpy()
    np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-5)
    x = _f32(rng, 1, 4, 3)
    np.testing.assert_allclose(lazy[2](nv.tensor(x)).detach().numpy(),
                               _conv_transpose1d(x, tw, tb, groups=2), rtol=1e-5, atol=1e-6)
    assert type(lazy[1]) is nv.nn.BatchNorm2d and type(lazy[0]) is nv.nn.Conv2d


def test_lazy_linear_loads_a_torch_linear_checkpoint_before_its_first_call(tmp_path):
    torch = pytest.importorskip("torch")
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
    torch = pytest.importorskip("torch")
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


@pytest.mark.parametrize("lib", ["nova", "torch"])
def test_lazy_to_lazy_load_keeps_it_uninitialized(lib):
    """An uninitialized module's state_dict loads into an uninitialized module, every
    key matched, as in torch."""
    L = nv if lib == "nova" else pytest.importorskip("torch")
    m = L.nn.LazyLinear(3)
    result = m.load_state_dict(L.nn.LazyLinear(3).state_dict())
    assert result.missing_keys == [] and result.unexpected_keys == []
    assert m.has_uninitialized_params()


def _custom_lazy(L):
    """A user's LazyModuleMixin module loading ``scale`` only."""
    mixin = LazyModuleMixin if L is nv else L.nn.modules.lazy.LazyModuleMixin

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


@pytest.mark.parametrize("lib", ["nova", "torch"])
def test_custom_lazy_module_takes_each_entry_shape_as_torch(lib):
    """Each uninitialized tensor with an entry takes its shape, the others stay
    uninitialized (PyTorch's rule)."""
    L = nv if lib == "nova" else pytest.importorskip("torch")
    assert _custom_lazy(L) == (["shift"], (3,), [2.0, 3.0, 4.0], "UninitializedParameter")


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


TORCH_PARAGRAPH = (
    'Unexpected running stats buffer(s) "running_mean" and "running_var" for '
    "InstanceNorm2d with track_running_stats=False. If state_dict is a checkpoint saved "
    "before 0.4.0, this may be expected because InstanceNorm2d does not track running "
    "stats by default since 0.4.0. Please remove these keys from state_dict. If the "
    "running stats are actually needed, instead set track_running_stats=True in "
    "InstanceNorm2d to enable them. See the documentation of InstanceNorm2d for details.")


def _unversioned_batchnorm_state():
    """A BatchNorm2d(3, affine=False) state_dict of before 0.4.0: no
    ``num_batches_tracked``, no ``_metadata``."""
    return OrderedDict([("running_mean", nv.tensor([0.5, -1.0, 2.0])),
                        ("running_var", nv.tensor([1.0, 2.0, 0.5]))])


@pytest.mark.parametrize("strict", [True, False])
def test_instance_norm_refuses_running_stats_of_an_unversioned_checkpoint(strict):
    message = _running_stats_error(nv, _unversioned_batchnorm_state(), strict)
    assert message is not None and TORCH_PARAGRAPH in message
    assert message.startswith("load_state_dict for InstanceNorm2d")


def test_instance_norm_running_stats_message_is_torchs():
    torch = pytest.importorskip("torch")
    bn = torch.nn.BatchNorm2d(3, affine=False)
    unversioned = OrderedDict((k, v) for k, v in bn.state_dict().items()
                              if k != "num_batches_tracked")    # (no _metadata)
    nv_state = OrderedDict((k, nv.tensor(v.numpy())) for k, v in unversioned.items())
    for strict in (True, False):
        expected = _torch_paragraph(_running_stats_error(torch, unversioned, strict))
        message = _running_stats_error(nv, nv_state, strict)
        assert message is not None and expected in message
    assert expected == TORCH_PARAGRAPH


def test_instance_norm_versioned_checkpoint_reports_unexpected_keys():
    """With a version (2, as torch saves) the running statistics are plain unexpected
    keys: ignored with strict=False, as in torch."""
    state = nv.nn.BatchNorm2d(3, affine=False).state_dict()
    m = nv.nn.InstanceNorm2d(3)
    result = m.load_state_dict(state, strict=False)
    assert sorted(result.unexpected_keys) == ["num_batches_tracked", "running_mean",
                                              "running_var"]
    assert result.missing_keys == [] and list(m.state_dict()) == []
    assert nv.nn.InstanceNorm2d(3).state_dict()._metadata == {"": {"version": 2}}
    with pytest.raises(StateDictError, match="unexpected keys"):
        nv.nn.InstanceNorm2d(3).load_state_dict(state)


def test_instance_norm_metadata_is_torchs():
    torch = pytest.importorskip("torch")
    assert nv.nn.InstanceNorm2d(3).state_dict()._metadata == \
        torch.nn.InstanceNorm2d(3).state_dict()._metadata


def test_tracking_instance_norm_fills_num_batches_tracked_of_an_old_checkpoint():
    state = OrderedDict(running_mean=nv.tensor([1.0, 2.0]), running_var=nv.ones(2))
    m = nv.nn.InstanceNorm1d(2, track_running_stats=True)
    result = m.load_state_dict(state)                   # no _metadata: version None
    assert result.missing_keys == [] and m.num_batches_tracked.item() == 0
    np.testing.assert_array_equal(m.running_mean.numpy(), [1.0, 2.0])
    versioned = OrderedDict(state)
    versioned._metadata = {"": {"version": 2}}           # a current one lacking it
    result = nv.nn.InstanceNorm1d(2, track_running_stats=True).load_state_dict(
        versioned, strict=False)
    assert result.missing_keys == ["num_batches_tracked"]


def test_tracking_instance_norm_old_checkpoint_as_torch():
    torch = pytest.importorskip("torch")
    t = torch.nn.InstanceNorm1d(2, track_running_stats=True)
    assert t.load_state_dict(OrderedDict(running_mean=torch.tensor([1.0, 2.0]),
                                         running_var=torch.ones(2))).missing_keys == []
    versioned = OrderedDict(running_mean=torch.tensor([1.0, 2.0]), running_var=torch.ones(2))
    versioned._metadata = {"": {"version": 2}}
    assert torch.nn.InstanceNorm1d(2, track_running_stats=True).load_state_dict(
        versioned, strict=False).missing_keys == ["num_batches_tracked"]
