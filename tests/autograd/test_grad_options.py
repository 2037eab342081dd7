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
