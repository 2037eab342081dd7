"""Forward-mode AD with dual tensors (``nv.autograd.forward_ad``): tangents against
analytic Jacobian-vector products in numpy, several duals, levels and errors."""
import numpy as np
import pytest

import nova as nv
import nova.autograd.forward_ad as fwAD

X = np.array([0.3, -1.2, 2.0])
T = np.array([1.0, 0.5, -2.0])
M = np.array([[1.0, 2.0, -1.0], [0.5, -0.3, 0.7]])
MT = np.array([[0.2, -1.0, 0.4], [1.5, 0.1, -0.6]])


def _tangent(y):
    return fwAD.unpack_dual(y).tangent.numpy()


def test_sin_tangent_and_primal():
    with fwAD.dual_level() as level:
        assert level == 0
        d = fwAD.make_dual(nv.tensor(X), nv.tensor(T))
        y = d.sin()
        primal, tangent = fwAD.unpack_dual(y)
        np.testing.assert_allclose(primal.numpy(), np.sin(X), rtol=1e-12)
        np.testing.assert_allclose(tangent.numpy(), np.cos(X) * T, rtol=1e-12)
        assert not primal.requires_grad          # only the dual's history: none left
        unpacked = fwAD.unpack_dual(d)
        assert isinstance(unpacked, fwAD.UnpackedDualTensor)
        np.testing.assert_array_equal(unpacked.primal.numpy(), X)
        np.testing.assert_array_equal(unpacked.tangent.numpy(), T)


def test_the_dual_keeps_its_primals_exact_value():
    x = np.array([-0.0, 0.0, np.inf, -np.inf, np.nan])
    with fwAD.dual_level():
        d = fwAD.make_dual(nv.tensor(x), nv.tensor(np.ones(5)))
        got = d.numpy()
    np.testing.assert_array_equal(got, x)
    assert np.signbit(got[0]) and not np.signbit(got[1])


def test_matmul_softmax_and_a_composition():
    with fwAD.dual_level():
        m = fwAD.make_dual(nv.tensor(M), nv.tensor(MT))
        x = nv.tensor(X)
        np.testing.assert_allclose(_tangent(m @ x), MT @ X, rtol=1e-12)
        s = m.softmax(-1)
        sv = np.exp(M) / np.exp(M).sum(-1, keepdims=True)
        want = sv * MT - sv * (sv * MT).sum(-1, keepdims=True)
        np.testing.assert_allclose(_tangent(s), want, rtol=1e-10)
        z = (m @ x).tanh().exp().sum()
        u = M @ X
        dz = np.exp(np.tanh(u)) * (1 - np.tanh(u) ** 2) * (MT @ X)
        np.testing.assert_allclose(_tangent(z), dz.sum(), rtol=1e-10)


def test_two_duals_in_one_level_add_their_products():
    with fwAD.dual_level():
        a = fwAD.make_dual(nv.tensor(X), nv.tensor(T))
        b = fwAD.make_dual(nv.tensor(X[::-1].copy()), nv.tensor(np.ones(3)))
        y = a * b
        np.testing.assert_allclose(_tangent(y), T * X[::-1] + X * 1.0, rtol=1e-12)
        np.testing.assert_allclose(_tangent(b.exp()), np.exp(X[::-1]), rtol=1e-12)


def test_a_function_of_a_dual_defined_elsewhere():
    def f(v):
        return (v * v).sum() * v.cos()

    with fwAD.dual_level():
        y = f(fwAD.make_dual(nv.tensor(X), nv.tensor(T)))
        want = 2 * (X * T).sum() * np.cos(X) - (X * X).sum() * np.sin(X) * T
        np.testing.assert_allclose(_tangent(y), want, rtol=1e-12)


def test_non_dual_outputs_have_no_tangent():
    with fwAD.dual_level():
        d = fwAD.make_dual(nv.tensor(X), nv.tensor(T))
        plain = nv.tensor(X)
        assert fwAD.unpack_dual(plain) == (plain, None)
        assert fwAD.unpack_dual(d > 0).tangent is None       # bool: no derivative
        assert fwAD.unpack_dual(d.detach()).tangent is None
        w = nv.tensor(X, requires_grad=True)
        assert fwAD.unpack_dual(w * 2).tangent is None       # history, but no dual
        np.testing.assert_array_equal(_tangent(d * 0 + 1), np.zeros(3))


def test_a_dual_of_a_tensor_that_requires_grad_keeps_its_gradient():
    w = nv.tensor(X, requires_grad=True)
    with fwAD.dual_level():
        d = fwAD.make_dual(w, nv.tensor(T))
        y = (d * d).sum()
        primal, tangent = fwAD.unpack_dual(y)
        np.testing.assert_allclose(tangent.numpy(), 2 * (X * T).sum(), rtol=1e-12)
        y.backward()
    np.testing.assert_allclose(w.grad.numpy(), 2 * X, rtol=1e-12)


def test_exiting_the_level_drops_the_tangents():
    with fwAD.dual_level():
        d = fwAD.make_dual(nv.tensor(X), nv.tensor(T))
        y = d.exp()
    assert fwAD.unpack_dual(y).tangent is None
    np.testing.assert_allclose(fwAD.unpack_dual(y).primal.numpy(), np.exp(X), rtol=1e-12)
    level = fwAD.enter_dual_level()
    try:
        assert fwAD.unpack_dual(y).tangent is None               # a new level
    finally:
        fwAD.exit_dual_level(level=level)


def test_errors():
    x, t = nv.tensor(X), nv.tensor(T)
    with pytest.raises(RuntimeError, match="no level exists, make sure to enter_dual_level"):
        fwAD.make_dual(x, t)
    assert fwAD.unpack_dual(x) == (x, None)                      # no level: no tangent
    with pytest.raises(RuntimeError, match="exit_dual_level: no dual level is active"):
        fwAD.exit_dual_level()
    with fwAD.dual_level():
        with pytest.raises(RuntimeError, match=r"Tensor is of size \[3\] while the given "
                                               r"forward gradient is of size \[4\]"):
            fwAD.make_dual(x, nv.ones(4, dtype=nv.float64))
        with pytest.raises(ValueError, match="Expected primal to be floating point or "
                                             "complex, but got: int64"):
            fwAD.make_dual(nv.arange(3), t)
        with pytest.raises(ValueError, match="Expected tangent to be floating point"):
            fwAD.make_dual(x, nv.arange(3))
        with pytest.raises(TypeError, match="make_dual: expected primal to be a Tensor"):
            fwAD.make_dual([1.0, 2.0, 3.0], t)
        with pytest.raises(TypeError, match="unpack_dual: expected a Tensor, got float"):
            fwAD.unpack_dual(3.0)
        d = fwAD.make_dual(x, t)
        with pytest.raises(RuntimeError, match="already has a forward gradient at the same "
                                               "level 0"):
            fwAD.make_dual(d.sin(), t)
        with pytest.raises(RuntimeError, match="Nested forward mode AD is not supported"):
            fwAD.enter_dual_level()
        with pytest.raises(RuntimeError, match="make_dual: invalid dual level 5"):
            fwAD.make_dual(x, t, level=5)
        with pytest.raises(RuntimeError, match="unpack_dual: invalid dual level 5"):
            fwAD.unpack_dual(d, level=5)
        with pytest.raises(RuntimeError, match="not the last one that was created"):
            fwAD.exit_dual_level(level=1)


def test_dual_level_decorates_a_function():
    @fwAD.dual_level()
    def jvp_of_exp(x, t):
        return fwAD.unpack_dual(fwAD.make_dual(x, t).exp()).tangent

    np.testing.assert_allclose(jvp_of_exp(nv.tensor(X), nv.tensor(T)).numpy(),
                               np.exp(X) * T, rtol=1e-12)
    assert fwAD.unpack_dual(nv.tensor(X)).tangent is None        # the level was exited


def test_matches_torch_where_installed():
    torch = pytest.importorskip("torch")
    import torch.autograd.forward_ad as tfw
    with tfw.dual_level():
        ref = tfw.unpack_dual(tfw.make_dual(torch.tensor(M), torch.tensor(MT))
                              .log_softmax(-1).sum(0)).tangent.numpy()
    with fwAD.dual_level():
        got = _tangent(fwAD.make_dual(nv.tensor(M), nv.tensor(MT)).log_softmax(-1).sum(0))
    np.testing.assert_allclose(got, ref, rtol=1e-10)
