"""``nv.nn.utils.spectral_norm`` / ``remove_spectral_norm``, PyTorch's hook form: the
same state (``weight_orig``, ``weight_u``, ``weight_v``, the metadata version) so a
PyTorch checkpoint loads, and the same power iteration, forward and gradients as
``torch.nn.utils.spectral_norm`` over a few training steps from identical values, in
float64.

CI has no torch: there the steps are checked against a numpy reference of PyTorch's
algorithm (power iteration on the weight as a matrix with the stored u and v, in
training only; ``sigma = u . (W v)`` with u and v then held constant; ``weight =
weight_orig / sigma``), the gradients by central differences of the loss in float64,
and the "PyTorch checkpoint" is a file laid out as torch.save writes it (the writer of
tests/test_serialization_torch_format.py). Where torch is installed the same steps are
also compared with torch's. The interpreter runs these tiny steps (the logic is the
hook's Python)."""
import copy
import io
from collections import OrderedDict

import numpy as np
import pytest

import nova as nv
import nova.nn as nn
from nova.nn import utils
from tests.test_serialization_torch_format import tensor, torch_file

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
    torch = pytest.importorskip("torch")
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


def test_two_forwards_before_backward_match_torch():
    """A GAN's ``D(real) - D(fake)``: the second call's power iteration does not change
    the first call's graph (PyTorch clones u and v for that)."""
    torch = pytest.importorskip("torch")
    tm = torch.nn.utils.spectral_norm(torch.nn.Linear(3, 2).double())
    nm = utils.spectral_norm(nn.Linear(3, 2).double())
    _nova_copy(tm, nm)
    a, b = RNG.standard_normal((2, 3)), RNG.standard_normal((2, 3))
    (tm(torch.tensor(a)).sum() - tm(torch.tensor(b)).sum()).backward()
    (nm(nv.tensor(a)).sum() - nm(nv.tensor(b)).sum()).backward()
    _close(nm.weight_orig.grad, tm.weight_orig.grad)
    _close(nm.weight_u, tm.weight_u)


def test_hook_state_and_errors():
    """The weight stays readable as an attribute, not a parameter; errors as PyTorch's;
    the hooks travel with a deep copy."""
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
    twin = copy.deepcopy(fresh)
    utils.remove_spectral_norm(twin)
    assert list(twin.state_dict()) == ["bias", "weight"]
    assert list(fresh.state_dict()) == ["bias", "weight_orig", "weight_u", "weight_v"]


def test_torch_checkpoint_loads_and_metadata_version():
    torch = pytest.importorskip("torch")
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
    torch = pytest.importorskip("torch")
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


# ---------------------------------------------------------------- numpy reference (no torch)

def _normalize(x, eps=1e-12):
    return x / max(np.linalg.norm(x), eps)


def _mat(w, dim):
    """The weight as PyTorch's spectral norm sees it: ``dim`` as rows, the rest
    flattened."""
    return np.moveaxis(w, dim, 0).reshape(w.shape[dim], -1)


def _power_iteration(w, u, v, dim, n):
    m = _mat(w, dim)
    for _ in range(n):
        v = _normalize(m.T @ u)
        u = _normalize(m @ v)
    return u, v


def _sigma(w, u, v, dim):
    return u @ _mat(w, dim) @ v


def _linear(x, w, b):
    return x @ w.T + b


def _conv_transpose1d(x, w, b):
    """stride 1, no padding: ``out[n, o, t + k] += x[n, i, t] w[i, o, k]``."""
    n, _, length = x.shape
    _, c_out, k = w.shape
    out = np.zeros((n, c_out, length + k - 1)) + b[None, :, None]
    for j in range(k):
        out[:, :, j:j + length] += np.einsum("nit,io->not", x, w[:, :, j])
    return out


def _conv1d(x, w, b):
    """stride 1, no padding: ``out[n, o, t] = sum x[n, i, t + k] w[o, i, k] + b[o]``."""
    k = w.shape[2]
    length = x.shape[2] - k + 1
    return b[None, :, None] + sum(np.einsum("nit,oi->not", x[:, :, j:j + length], w[:, :, j])
                                  for j in range(k))


def _fd_grad(f, a, h=1e-5):
    """The gradient of the scalar ``f`` at ``a`` by central differences."""
    g = np.empty_like(a)
    for idx in np.ndindex(a.shape):
        up, down = a.copy(), a.copy()
        up[idx] += h
        down[idx] -= h
        g[idx] = (f(up) - f(down)) / (2 * h)
    return g


def _state(module):
    return {k: v.numpy().copy() for k, v in module.state_dict().items()}


@pytest.mark.parametrize("make, forward, n_iter, dim, shape", [
    (lambda: nn.Linear(4, 3), _linear, 1, 0, (5, 4)),
    (lambda: nn.ConvTranspose1d(2, 3, 2), _conv_transpose1d, 2, 1, (2, 2, 3)),  # dim=1
])
def test_training_steps_match_a_numpy_reference(make, forward, n_iter, dim, shape):
    """Three SGD steps on ``sum(out ** 2)``: u and v refined by ``n_iter`` power
    iterations per training call, the output, the normalized weight and the gradients
    (u and v constants of the backward) as the reference's; eval reads u and v;
    ``remove_spectral_norm`` leaves ``weight_orig / sigma`` as the parameter."""
    nm = utils.spectral_norm(make().double(), n_power_iterations=n_iter)
    assert list(nm.state_dict()) == ["bias", "weight_orig", "weight_u", "weight_v"]
    ref = _state(nm)
    w, b, u, v = ref["weight_orig"], ref["bias"], ref["weight_u"], ref["weight_v"]
    np.testing.assert_allclose([np.linalg.norm(u), np.linalg.norm(v)], [1, 1], rtol=1e-12)
    opt = nv.optim.SGD(nm.parameters(), lr=0.1)
    rng = np.random.default_rng(3)
    for step in range(3):
        x = rng.standard_normal(shape)
        out = nm(nv.tensor(x))
        out.pow(2).sum().backward()
        u, v = _power_iteration(w, u, v, dim, n_iter)
        sigma = _sigma(w, u, v, dim)

        def loss(w_, b_, u=u, v=v, x=x):
            return (forward(x, w_ / _sigma(w_, u, v, dim), b_) ** 2).sum()
        gw, gb = _fd_grad(lambda a: loss(a, b), w), _fd_grad(lambda a: loss(w, a), b)
        np.testing.assert_allclose(out.detach().numpy(), forward(x, w / sigma, b),
                                   rtol=1e-12, atol=1e-13, err_msg=f"step {step}")
        np.testing.assert_allclose(nm.weight.detach().numpy(), w / sigma, rtol=1e-12)
        np.testing.assert_allclose(nm.weight_orig.grad.numpy(), gw, rtol=1e-7, atol=1e-8)
        np.testing.assert_allclose(nm.bias.grad.numpy(), gb, rtol=1e-7, atol=1e-8)
        opt.step()
        opt.zero_grad()
        np.testing.assert_allclose(nm.weight_u.numpy(), u, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(nm.weight_v.numpy(), v, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(nm.weight_orig.detach().numpy(), w - 0.1 * gw,
                                   rtol=1e-8, atol=1e-9)
        np.testing.assert_allclose(nm.bias.detach().numpy(), b - 0.1 * gb,
                                   rtol=1e-8, atol=1e-9)
        # go on from Nova's values: the differences' error (~1e-9) does not accumulate
        w, b = nm.weight_orig.detach().numpy().copy(), nm.bias.detach().numpy().copy()
    nm.eval()
    x = rng.standard_normal(shape)
    w, u, v = nm.weight_orig.detach().numpy(), nm.weight_u.numpy(), nm.weight_v.numpy()
    np.testing.assert_allclose(nm(nv.tensor(x)).detach().numpy(),
                               forward(x, w / _sigma(w, u, v, dim), nm.bias.detach().numpy()),
                               rtol=1e-12, atol=1e-13)
    np.testing.assert_array_equal(nm.weight_u.numpy(), u)       # no iteration in eval
    np.testing.assert_array_equal(nm.weight_v.numpy(), v)
    utils.remove_spectral_norm(nm)
    assert list(nm.state_dict()) == ["bias", "weight"]
    assert isinstance(nm.weight, nn.Parameter) and nm.weight.requires_grad
    np.testing.assert_allclose(nm.weight.detach().numpy(), w / _sigma(w, u, v, dim),
                               rtol=1e-12)


def test_two_forwards_before_backward_match_a_numpy_reference():
    """``D(a) - D(b)`` before one backward: the first call's sigma uses the u and v of
    its own power iteration, the second call's those of the next one."""
    nm = utils.spectral_norm(nn.Linear(3, 2).double())
    ref = _state(nm)
    w, b, u0, v0 = ref["weight_orig"], ref["bias"], ref["weight_u"], ref["weight_v"]
    rng = np.random.default_rng(4)
    a, c = rng.standard_normal((2, 3)), rng.standard_normal((2, 3))
    (nm(nv.tensor(a)).sum() - nm(nv.tensor(c)).sum()).backward()
    u1, v1 = _power_iteration(w, u0, v0, 0, 1)
    u2, v2 = _power_iteration(w, u1, v1, 0, 1)

    def loss(w_):
        return (_linear(a, w_ / _sigma(w_, u1, v1, 0), b).sum()
                - _linear(c, w_ / _sigma(w_, u2, v2, 0), b).sum())
    np.testing.assert_allclose(nm.weight_orig.grad.numpy(), _fd_grad(loss, w),
                               rtol=1e-7, atol=1e-8)
    np.testing.assert_allclose(nm.weight_u.numpy(), u2, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(nm.weight_v.numpy(), v2, rtol=1e-10, atol=1e-12)


METADATA = OrderedDict([("", {"version": 1}),
                        ("0", {"version": 1, "spectral_norm": {"weight.version": 1}}),
                        ("1", {"version": 1})])


def test_a_torch_format_checkpoint_loads_with_its_metadata():
    """A spectral-normed ``Sequential(Conv1d(2, 3, 2), LeakyReLU(0.2))``'s state_dict in
    a file laid out as torch.save writes it (keys, order and ``_metadata`` as PyTorch's):
    every key matched, eval gives ``leaky_relu(conv1d(x, W_orig / sigma))`` from the
    file's u and v, and the model's own state_dict carries the same metadata."""
    rng = np.random.default_rng(5)
    w, b = rng.standard_normal((3, 2, 2)), rng.standard_normal(3)
    u, v = _power_iteration(w, _normalize(rng.standard_normal(3)),
                            _normalize(rng.standard_normal(4)), 0, 1)
    state = OrderedDict([("0.bias", tensor(b)), ("0.weight_orig", tensor(w)),
                         ("0.weight_u", tensor(u)), ("0.weight_v", tensor(v))])
    state._metadata = METADATA
    loaded = nv.load(io.BytesIO(torch_file(state)))
    assert loaded._metadata == METADATA
    nm = nn.Sequential(utils.spectral_norm(nn.Conv1d(2, 3, 2)), nn.LeakyReLU(0.2)).double()
    assert list(nm.state_dict()) == list(state)
    assert repr(nm.load_state_dict(loaded)) == "<All keys matched successfully>"
    nm.eval()
    x = rng.standard_normal((1, 2, 4))
    pre = _conv1d(x, w / _sigma(w, u, v, 0), b)
    np.testing.assert_allclose(nm(nv.tensor(x)).numpy(), np.where(pre > 0, pre, 0.2 * pre),
                               rtol=1e-12, atol=1e-13)
    np.testing.assert_array_equal(nm[0].weight_v.numpy(), v)
    assert nm.state_dict()._metadata == METADATA


def test_a_pre_version_1_checkpoint_is_converted_as_pytorch():
    """``weight`` saved, no ``weight_v`` and no version: v is solved for (``W_orig v``
    along u, ``u . W_orig v = mean(W_orig / W)``), which recovers the v of the model
    that saved it, and eval gives the saved weight."""
    src = utils.spectral_norm(nn.Linear(4, 3).double())
    src(nv.tensor(np.random.default_rng(6).standard_normal((2, 4))))
    old = _state(src)
    v_saved = old.pop("weight_v")
    old["weight"] = src.weight.detach().numpy()
    nm = utils.spectral_norm(nn.Linear(4, 3).double())
    assert repr(nm.load_state_dict({k: nv.tensor(a) for k, a in old.items()})) == \
        "<All keys matched successfully>"
    w, u = old["weight_orig"], old["weight_u"]
    v = np.linalg.pinv(w.T @ w) @ w.T @ u
    v *= np.mean(w / old["weight"]) / (u @ w @ v)
    np.testing.assert_allclose(nm.weight_v.numpy(), v, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(nm.weight_v.numpy(), v_saved, rtol=1e-9, atol=1e-12)
    nm.eval()
    x = np.random.default_rng(8).standard_normal((2, 4))
    np.testing.assert_allclose(nm(nv.tensor(x)).numpy(), x @ old["weight"].T + old["bias"],
                               rtol=1e-9)
    incomplete = dict(old)
    del incomplete["weight_u"]
    with pytest.raises(nn.StateDictError, match="missing keys: weight_u"):
        nm.load_state_dict({k: nv.tensor(a) for k, a in incomplete.items()})
