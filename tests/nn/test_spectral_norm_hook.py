"""``nv.nn.utils.spectral_norm`` / ``remove_spectral_norm``, PyTorch's hook form: the
same state (``weight_orig``, ``weight_u``, ``weight_v``, the metadata version) so a
PyTorch checkpoint loads, and the same power iteration, forward and gradients as
``torch.nn.utils.spectral_norm`` over a few training steps from identical values, in
float64. The interpreter runs these tiny steps (the logic is the hook's Python)."""
import copy
import io

import numpy as np
import pytest

import nova as nv
import nova.nn as nn
from nova.nn import utils

torch = pytest.importorskip("torch")

RNG = np.random.default_rng(7)


@pytest.fixture(autouse=True)
def interpreted():
    with nv.engine("interp"):
        yield


def _nova_copy(t_module, n_module):
    """Load the torch module's state_dict (values as numpy) into the Nova one."""
    sd = {k: nv.tensor(v.detach().numpy()) for k, v in t_module.state_dict().items()}
    assert repr(n_module.load_state_dict(sd)) == "<All keys matched successfully>"


def _close(a, b):
    np.testing.assert_allclose(np.asarray(a.detach().numpy() if hasattr(a, "detach")
                                          else a), b.detach().numpy(), rtol=1e-12, atol=1e-13)


@pytest.mark.parametrize("make, n_iter, shape", [
    (lambda L: L.Linear(4, 3), 1, (5, 4)),
    (lambda L: L.ConvTranspose1d(2, 3, 2), 2, (2, 2, 3)),   # dim=1 by default
])
def test_training_steps_match_torch(make, n_iter, shape):
    tm = torch.nn.utils.spectral_norm(make(torch.nn).double(), n_power_iterations=n_iter)
    nm = utils.spectral_norm(make(nn).double(), n_power_iterations=n_iter)
    assert list(nm.state_dict()) == list(tm.state_dict()) == ["bias", "weight_orig",
                                                              "weight_u", "weight_v"]
    _nova_copy(tm, nm)
    t_opt = torch.optim.SGD(tm.parameters(), lr=0.1)
    n_opt = nv.optim.SGD(nm.parameters(), lr=0.1)
    for step in range(3):
        x = RNG.standard_normal(shape)
        t_out = tm(torch.tensor(x))
        n_out = nm(nv.tensor(x))
        t_out.pow(2).sum().backward()
        n_out.pow(2).sum().backward()
        _close(n_out, t_out)
        _close(nm.weight, tm.weight)
        for name in ("weight_orig", "bias"):
            _close(getattr(nm, name).grad, getattr(tm, name).grad)
        t_opt.step(), n_opt.step()
        t_opt.zero_grad(), n_opt.zero_grad()
        for name in ("weight_u", "weight_v", "weight_orig"):
            _close(getattr(nm, name), getattr(tm, name))
    # eval: u and v are read, not updated
    tm.eval(), nm.eval()
    u = nm.weight_u.numpy().copy()
    x = RNG.standard_normal(shape)
    _close(nm(nv.tensor(x)), tm(torch.tensor(x)))
    np.testing.assert_array_equal(nm.weight_u.numpy(), u)
    utils.remove_spectral_norm(nm), torch.nn.utils.remove_spectral_norm(tm)
    assert list(nm.state_dict()) == list(tm.state_dict()) == ["bias", "weight"]
    assert isinstance(nm.weight, nn.Parameter) and nm.weight.requires_grad
    _close(nm.weight, tm.weight)


def test_two_forwards_before_backward_and_hook_state():
    """A GAN's ``D(real) - D(fake)``: the second call's power iteration does not change
    the first call's graph (PyTorch clones u and v for that)."""
    tm = torch.nn.utils.spectral_norm(torch.nn.Linear(3, 2).double())
    nm = utils.spectral_norm(nn.Linear(3, 2).double())
    _nova_copy(tm, nm)
    a, b = RNG.standard_normal((2, 3)), RNG.standard_normal((2, 3))
    (tm(torch.tensor(a)).sum() - tm(torch.tensor(b)).sum()).backward()
    (nm(nv.tensor(a)).sum() - nm(nv.tensor(b)).sum()).backward()
    _close(nm.weight_orig.grad, tm.weight_orig.grad)
    _close(nm.weight_u, tm.weight_u)
    # the weight stays readable as an attribute, not a parameter; errors as PyTorch's
    fresh = utils.spectral_norm(nn.Linear(3, 2))
    assert "weight" not in dict(fresh.named_parameters()) and fresh.weight.shape == (2, 3)
    assert fresh.weight_orig.requires_grad and not fresh.weight_u.requires_grad
    np.testing.assert_allclose(np.linalg.norm(fresh.weight_u.numpy()), 1, rtol=1e-6)
    with pytest.raises(RuntimeError, match="two spectral_norm hooks on the same parameter"):
        utils.spectral_norm(fresh)
    with pytest.raises(ValueError, match="n_power_iterations to be positive"):
        utils.spectral_norm(nn.Linear(2, 2), n_power_iterations=0)
    with pytest.raises(ValueError, match="spectral_norm of 'bias' not found in Linear"):
        utils.remove_spectral_norm(fresh, "bias")
    twin = copy.deepcopy(fresh)                    # the hooks travel with the copy
    utils.remove_spectral_norm(twin)
    assert list(twin.state_dict()) == ["bias", "weight"]
    assert list(fresh.state_dict()) == ["bias", "weight_orig", "weight_u", "weight_v"]


def test_torch_checkpoint_loads_and_metadata_version():
    tm = torch.nn.Sequential(torch.nn.utils.spectral_norm(torch.nn.Conv1d(2, 3, 2)),
                             torch.nn.LeakyReLU(0.2)).double()
    tm(torch.randn(1, 2, 4, dtype=torch.float64))            # one power iteration
    buf = io.BytesIO()
    torch.save(tm.state_dict(), buf)
    nm = nn.Sequential(utils.spectral_norm(nn.Conv1d(2, 3, 2)), nn.LeakyReLU(0.2)).double()
    assert repr(nm.load_state_dict(nv.load(io.BytesIO(buf.getvalue())))) == \
        "<All keys matched successfully>"
    tm.eval(), nm.eval()
    x = RNG.standard_normal((1, 2, 4))
    _close(nm(nv.tensor(x)), tm(torch.tensor(x)))
    sd = nm.state_dict()
    assert sd._metadata["0"] == tm.state_dict()._metadata["0"] == {
        "version": 1, "spectral_norm": {"weight.version": 1}}


def test_a_pre_version_1_checkpoint_is_converted():
    """A state_dict with ``weight`` and no ``weight_v`` (PyTorch < 1.0): v is solved
    for, as PyTorch does, so eval gives the saved weight."""
    tm = torch.nn.utils.spectral_norm(torch.nn.Linear(4, 3).double())
    tm(torch.randn(2, 4, dtype=torch.float64))
    old = {k: v.detach().numpy() for k, v in tm.state_dict().items() if k != "weight_v"}
    old["weight"] = tm.weight.detach().numpy()
    nm = utils.spectral_norm(nn.Linear(4, 3).double())
    assert repr(nm.load_state_dict({k: nv.tensor(v) for k, v in old.items()})) == \
        "<All keys matched successfully>"
    nm.eval()
    x = RNG.standard_normal((2, 4))
    np.testing.assert_allclose(nm(nv.tensor(x)).numpy(), x @ old["weight"].T + old["bias"],
                               rtol=1e-9)
    incomplete = dict(old)
    del incomplete["weight_u"]
    with pytest.raises(nn.StateDictError, match="missing keys: weight_u"):
        nm.load_state_dict({k: nv.tensor(v) for k, v in incomplete.items()})
