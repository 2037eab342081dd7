"""``nv.autograd.grad``'s ``materialize_grads`` and the checks of ``t.grad = g``, as
PyTorch's. Python-level logic: the interpreter engine only."""
import numpy as np
import pytest

import nova as nv


@pytest.fixture(autouse=True)
def engine():
    with nv.engine("interp"):
        yield "interp"


def test_materialize_grads_gives_zeros_for_unused_inputs():
    x = nv.tensor([1.0, -2.0, 3.0], requires_grad=True)
    y = nv.ones(2, 2, dtype=nv.float64, requires_grad=True)
    gx, gy = nv.autograd.grad((x * x).sum(), [x, y], materialize_grads=True)
    np.testing.assert_allclose(gx.numpy(), 2 * np.array([1.0, -2.0, 3.0]))
    assert gy.shape == (2, 2) and gy.dtype == nv.float64 and not gy.requires_grad
    assert gy.tolist() == [[0.0, 0.0], [0.0, 0.0]]
    # (allow_unused=True alone still gives None)
    assert nv.autograd.grad((x * 2).sum(), [x, y], allow_unused=True)[1] is None


def test_materialized_zeros_can_be_differentiated_with_create_graph():
    x = nv.tensor([0.5, 2.0], requires_grad=True)
    y = nv.tensor([1.0, 1.0], requires_grad=True)
    gx, gy = nv.autograd.grad((x ** 3).sum(), [x, y], create_graph=True,
                              materialize_grads=True)
    assert gy.requires_grad and gy.tolist() == [0.0, 0.0]
    hx, = nv.autograd.grad((gx + gy).sum(), x, allow_unused=True)
    np.testing.assert_allclose(hx.numpy(), 6 * np.array([0.5, 2.0]))


def test_materialize_grads_with_allow_unused_false_is_refused():
    x = nv.ones(2, requires_grad=True)
    with pytest.raises(ValueError, match="allow_unused to be True or not passed"):
        nv.autograd.grad(x.sum(), x, allow_unused=False, materialize_grads=True)
    y = nv.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError, match="input 1"):
        nv.autograd.grad(x.sum(), [x, y])         # (the default still refuses)


def test_assigning_a_grad_of_another_size_dtype_or_kind_is_refused():
    x = nv.ones(3, requires_grad=True)
    with pytest.raises(RuntimeError, match=r"attempting to assign a gradient of size '\[4\]' "
                                           r"to a tensor of size '\[3\]'"):
        x.grad = nv.ones(4)
    with pytest.raises(RuntimeError, match=r"size '\[3, 1\]'"):
        x.grad = nv.ones(3, 1)
    with pytest.raises(RuntimeError, match="gradient with dtype 'float64' to a tensor with "
                                           "dtype 'float32'"):
        x.grad = nv.ones(3, dtype=nv.float64)
    with pytest.raises(TypeError, match="expected to be a Tensor or None but got grad of "
                                        "type int"):
        x.grad = 3
    assert x.grad is None
    x.grad = nv.full((3,), 2.0)
    (x * 2).sum().backward()               # accumulates into the assigned gradient
    assert x.grad.tolist() == [4.0, 4.0, 4.0]
    x.grad = None
    assert x.grad is None
    y = x * 2                                # a non-leaf is checked the same way
    with pytest.raises(RuntimeError, match="size '\\[2\\]'"):
        y.grad = nv.ones(2)


@pytest.mark.parametrize("fn", ["relu", "leaky_relu", "hardtanh", "relu6", "linear"])
def test_second_derivative_of_a_piecewise_linear_function_is_zero(fn):
    """The gradient of a function piecewise linear in x alone carries no history (a
    select by ``x > 0``, or a constant), so differentiating it again raised "does not
    require grad"; PyTorch's fused ops give it a zero derivative in x, and so zeros
    (as JAX does for every function). The first gradient is unchanged bit for bit."""
    F = nv.nn.functional
    f = {"relu": F.relu, "leaky_relu": F.leaky_relu, "hardtanh": F.hardtanh,
         "relu6": F.relu6, "linear": lambda v: v * 3.0 - 1.0}[fn]
    x = nv.tensor([1.5, -2.0, 0.25, -0.0, 7.0], requires_grad=True)
    g, = nv.autograd.grad(f(x).sum(), x, create_graph=True)
    assert g.requires_grad
    with nv.no_grad():
        xd = x.detach().requires_grad_()
    g_plain, = nv.autograd.grad(f(xd).sum(), xd)
    np.testing.assert_array_equal(g.numpy(), g_plain.numpy())
    h, = nv.autograd.grad((g * g).sum(), x)
    assert h.tolist() == [0.0] * 5
    # the same through backward(create_graph=True) and .grad
    y = nv.tensor([1.5, -2.0], requires_grad=True)
    f(y).sum().backward(create_graph=True)
    assert y.grad.requires_grad
    first = y.grad.tolist()
    y.grad.sum().backward()
    assert y.grad.tolist() == first


def test_strict_functional_still_sees_a_linear_function():
    """autograd.functional's strict mode tells a linear function by its gradient not
    requiring grad (PyTorch's test), so it does not get the zero-slope history."""
    x = nv.tensor([1.0, 2.0], dtype=nv.float64)
    with pytest.raises(RuntimeError, match="independent of input 0"):
        nv.autograd.functional.jacobian(lambda a: a * 3, x, strict=True, create_graph=True)
    hess = nv.autograd.functional.hessian(lambda a: nv.relu(a).sum(), x)
    assert hess.tolist() == [[0.0, 0.0], [0.0, 0.0]]
