"""``nn.windows.window_stack`` records its views as primitives directly: the same step
as indexing, ``unsqueeze`` and ``stack`` would record (so kernels and cache keys are
unchanged), for every layout, stride, dilation and padding."""
import numpy as np
import pytest

import nova as nv
from nova.nn.functional import _pad_constant
from nova.nn.windows import WindowSpec, window_stack
from nova.tensor.movement import stack


def _by_indexing(x, spec, fill, dim):
    """The window stack as indexing and ``stack`` record it (the reference)."""
    if any(spec.low) or any(spec.high):
        x = _pad_constant(x, [(0, 0), (0, 0)] + list(zip(spec.low, spec.high)), fill)
    views = []
    for k in spec.offsets():
        window = tuple(slice(ki * di, ki * di + si * (o - 1) + 1, si)
                       for ki, di, si, o in zip(k, spec.dilation, spec.stride, spec.out))
        views.append(x[(slice(None), slice(None)) + window])
    return views[0].unsqueeze(dim) if len(views) == 1 else stack(views, dim)


@pytest.mark.parametrize("kernel,stride,padding,dilation,dim", [
    ((3, 3), 1, 1, 1, 2), ((3, 3), 1, 1, 1, 1), ((5, 5), 2, 2, 1, 2), ((2, 3), (2, 1), 0, 1, 2),
    ((3, 3), 1, 2, 2, 2), ((1, 1), 1, 0, 1, 2), ((7, 7), 2, 3, 1, 1)])
def test_the_step_equals_indexing_and_stack(kernel, stride, padding, dilation, dim):
    rng = np.random.default_rng(0)
    a = rng.standard_normal((2, 3, 9, 8)).astype(np.float32)
    x = nv.tensor(a, requires_grad=True)
    spec = WindowSpec.make("conv2d", (9, 8), kernel, stride, padding, dilation)
    ours, ref = window_stack(x, spec, 0.0, dim), _by_indexing(x, spec, 0.0, dim)
    assert ours.shape == ref.shape
    (g,) = nv.autograd.grad((ours * ours).sum(), [x])
    (g_ref,) = nv.autograd.grad((ref * ref).sum(), [x])
    assert nv.debug.dump_ir(ours, g) == nv.debug.dump_ir(ref, g_ref)
    np.testing.assert_array_equal(ours.numpy(), ref.numpy())


def test_a_realized_input_without_grad_is_sliced_in_the_step():
    """An unpadded window stack of a realized tensor that needs no gradient (inference)
    reads it as one step argument; indexing such a tensor copies each view on the host
    (and makes each an argument of its own)."""
    rng = np.random.default_rng(1)
    a = rng.standard_normal((1, 2, 6, 6)).astype(np.float32)
    x = nv.tensor(a)
    nv.realize(x)
    spec = WindowSpec.make("conv2d", (6, 6), (3, 3), 1, 0, 1)
    out = window_stack(x, spec)
    assert nv.debug.dump_ir(out).count("nova.slice") == 9
    want = np.stack([a[:, :, i:i + 4, j:j + 4] for i in range(3) for j in range(3)], axis=2)
    np.testing.assert_array_equal(out.numpy(), want)
