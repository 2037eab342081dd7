"""Float64 parameters are updated with their hyperparameters at full precision, as
PyTorch's Python floats: the runtime scalars (lr, bias corrections, ...) were float32,
so an SGD step of a float64 parameter was ~1e-8 off."""
import numpy as np
import pytest

import nova as nv

W0 = np.array([1.0, 2.0, 3.0, 4.0])
G = np.array([6.123456789012345, -3.3, 1e-3, 7.77777777777777])


def test_sgd_of_a_float64_parameter_is_exact():
    w = nv.tensor(W0.copy(), requires_grad=True)
    opt = nv.optim.SGD([w], lr=0.1)
    w.grad = nv.tensor(G)
    opt.step()
    np.testing.assert_array_equal(w.numpy(), W0 - 0.1 * G)


def test_adam_of_float64_and_float32_parameters_in_one_step():
    """Each parameter's scalars take its own dtype (one step, two dtypes): the float64
    one follows Adam's formula in float64 to rounding, the float32 one as before."""
    w64 = nv.tensor(W0.copy(), requires_grad=True)
    w32 = nv.tensor(W0.astype(np.float32), requires_grad=True)
    opt = nv.optim.Adam([w64, w32], lr=0.01)
    m = v = np.zeros(4)
    w = W0.copy()
    for t in range(1, 4):
        g = G * t
        w64.grad, w32.grad = nv.tensor(g), nv.tensor(g.astype(np.float32))
        opt.step()
        m = 0.9 * m + 0.1 * g
        v = 0.999 * v + 0.001 * g * g
        w = w - 0.01 / (1 - 0.9 ** t) * m / (np.sqrt(v) / np.sqrt(1 - 0.999 ** t) + 1e-8)
    np.testing.assert_allclose(w64.numpy(), w, rtol=1e-14, atol=1e-15)
    np.testing.assert_allclose(w32.numpy(), w, rtol=1e-6)
    assert w64.dtype == nv.float64 and w32.dtype == nv.float32


def test_a_compiled_float64_step_replays_with_float64_scalars():
    w = nv.tensor(W0.copy(), requires_grad=True)
    opt = nv.optim.SGD([w], lr=0.1, momentum=0.9)

    @nv.compile
    def step(g):
        opt.zero_grad()
        (w * g).sum().backward()
        opt.step()

    ref, buf = W0.copy(), np.zeros(4)
    for _ in range(6):
        step(nv.tensor(G))
        buf = 0.9 * buf + G
        ref = ref - 0.1 * buf
    assert step.replays >= 2
    np.testing.assert_allclose(w.numpy(), ref, rtol=1e-15, atol=1e-15)
