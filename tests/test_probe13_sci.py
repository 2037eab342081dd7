"""Probe 13d (scientific-computing code ported by changing imports).

- ``nova.func`` transforms keep the caller's graph when the function's result depends on
  a tensor requiring grad that is not one of the differentiated arguments (another
  argument, a closed-over parameter), as torch.func's do: a functorch PINN's
  ``u_x = grad(u, argnums=2)`` is differentiable with respect to the network's
  parameters. Nova detached it, so the residual's derivative terms silently dropped out
  of the loss's gradient.
- ``nn.init`` takes torch's keyword names (``tensor=``, ``constant_(w, val=0)``).
- ``F.pad`` pads complex tensors (an FNO zero-pads its kept Fourier modes).

References are numpy (closed forms, float64 central differences); the interpreter runs
these tiny graphs."""
import numpy as np
import pytest

import nova as nv
import nova.nn.functional as F
from nova import func

W0 = np.array([0.3, -0.7, 1.1])
V0 = np.array([0.5, 1.5, -2.0])


@pytest.fixture(autouse=True)
def interpreted():
    with nv.engine("interp"):
        yield


def _fd(f, w, eps=1e-6):
    """Central differences of a scalar numpy function of a vector."""
    out = np.zeros_like(w)
    for k in range(w.size):
        d = np.zeros_like(w)
        d[k] = eps
        out[k] = (f(w + d) - f(w - d)) / (2 * eps)
    return out


def _u(w, x):
    return (nv.tanh(w * x) * nv.tensor(V0)).sum()


def _ux_np(w, x):
    """d/dx sum(v tanh(w x))."""
    return float((V0 * w / np.cosh(w * x) ** 2).sum())


def test_grad_wrt_x_stays_differentiable_in_the_other_argument():
    w = nv.tensor(W0, requires_grad=True)
    ux = func.grad(_u, argnums=1)(w, nv.tensor(0.4, dtype=nv.float64))
    assert ux.requires_grad
    np.testing.assert_allclose(ux.item(), _ux_np(W0, 0.4), rtol=1e-12)
    (gw,) = nv.autograd.grad(ux, [w])
    np.testing.assert_allclose(gw.numpy(), _fd(lambda v: _ux_np(v, 0.4), W0), rtol=1e-6)


def test_vmapped_second_derivative_residual_gradient():
    """A Burgers-like residual u * u_x - u_xx over vmapped points: its gradient with
    respect to the parameters matches finite differences of the closed form."""
    xs = np.array([-0.6, 0.2, 0.9])
    w = nv.tensor(W0, requires_grad=True)
    ux = func.grad(_u, argnums=1)
    uxx = func.grad(ux, argnums=1)
    res = func.vmap(lambda p, x: _u(p, x) * ux(p, x) - uxx(p, x),
                    in_dims=(None, 0))(w, nv.tensor(xs))
    loss = (res ** 2).sum()
    loss.backward()

    def loss_np(v):
        t = np.tanh(np.outer(xs, v))
        u = (V0 * t).sum(1)
        u_x = (V0 * v * (1 - t ** 2)).sum(1)
        u_xx = (V0 * v ** 2 * (-2 * t * (1 - t ** 2))).sum(1)
        return float(((u * u_x - u_xx) ** 2).sum())
    np.testing.assert_allclose(loss.item(), loss_np(W0), rtol=1e-12)
    np.testing.assert_allclose(w.grad.numpy(), _fd(loss_np, W0), rtol=1e-6)


def test_closed_over_parameter_reaches_jacrev_vjp_and_jvp():
    w = nv.tensor(W0, requires_grad=True)
    x = nv.tensor(np.array([0.2, -0.4, 0.8]))
    jac = func.jacrev(lambda z: nv.sin(w * z))(x)          # diag(w cos(w x))
    assert jac.requires_grad
    (g,) = nv.autograd.grad(jac.sum(), [w])
    xn = np.array([0.2, -0.4, 0.8])
    np.testing.assert_allclose(g.numpy(), np.cos(W0 * xn) - W0 * xn * np.sin(W0 * xn),
                               rtol=1e-12)
    _, vjp_fn = func.vjp(lambda z: (w * z ** 2).sum(), x)
    (vx,) = vjp_fn(nv.tensor(1.0, dtype=nv.float64))
    assert vx.requires_grad
    np.testing.assert_allclose(nv.autograd.grad(vx.sum(), [w])[0].numpy(), 2 * xn)
    _, tangent = func.jvp(lambda z: w * z ** 3, (x,), (nv.ones(3, dtype=nv.float64),))
    np.testing.assert_allclose(nv.autograd.grad(tangent.sum(), [w])[0].numpy(), 3 * xn ** 2)


def test_results_stay_detached_without_an_outer_graph():
    """Nothing requiring grad outside the transform: results carry no history."""
    w = nv.tensor(W0)
    x = nv.tensor(0.4, dtype=nv.float64)
    assert not func.grad(_u, argnums=1)(w, x).requires_grad
    assert not func.jacrev(lambda z: nv.sin(w * z))(nv.tensor(W0)).requires_grad
    assert not func.vmap(func.grad(_u, argnums=1), in_dims=(None, 0))(
        w, nv.tensor(np.array([0.1, 0.2]))).requires_grad


def test_init_takes_torch_keyword_names():
    w = nv.empty(3, 4)
    nv.nn.init.constant_(w, val=0.25)
    np.testing.assert_array_equal(w.numpy(), np.full((3, 4), 0.25, np.float32))
    nv.nn.init.normal_(tensor=w, mean=0.0, std=0.0)
    np.testing.assert_array_equal(w.numpy(), np.zeros((3, 4), np.float32))
    nv.nn.init.xavier_uniform_(tensor=w, gain=1.0)
    assert np.abs(w.numpy()).max() <= np.sqrt(6.0 / 7) + 1e-6
    nv.nn.init.ones_(tensor=w)
    np.testing.assert_array_equal(w.numpy(), np.ones((3, 4), np.float32))


@pytest.mark.parametrize("mode, value", [("constant", None), ("constant", 1 - 2j),
                                         ("circular", None), ("reflect", None)])
def test_pad_complex(mode, value):
    rng = np.random.default_rng(0)
    z = rng.standard_normal((1, 2, 5)) + 1j * rng.standard_normal((1, 2, 5))
    out = F.pad(nv.tensor(z), (1, 2), mode=mode, value=value)
    np_mode = {"circular": "wrap"}.get(mode, mode)
    kwargs = {"constant_values": 0 if value is None else value} if mode == "constant" else {}
    np.testing.assert_allclose(out.numpy(), np.pad(z, ((0, 0), (0, 0), (1, 2)), np_mode,
                                                   **kwargs), rtol=1e-6)


def test_pad_complex_gradient():
    """The kept modes' gradient: dL/dre + i dL/dim at the input's positions."""
    z = nv.complex(nv.tensor([1.0, 2.0]), nv.tensor([-1.0, 0.5])).requires_grad_()
    out = F.pad(z, (0, 3))
    c_re, c_im = np.arange(5.0), -np.arange(5.0) - 1
    (out.real * nv.tensor(c_re)).sum().backward(retain_graph=True)
    ((out.imag * nv.tensor(c_im)).sum()).backward()
    np.testing.assert_allclose(z.grad.numpy(), c_re[:2] + 1j * c_im[:2])
