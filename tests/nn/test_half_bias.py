"""A half-precision product with a bias rounds once, as PyTorch's CPU kernels round it:
``F.linear``, the convolutions and (bfloat16) the transposed convolutions sum the
float32-accumulated product and the bias in float32 and round the sum, where adding a
rounded half product to the bias rounded twice (1 ulp off on about a quarter of the
elements). PyTorch's float16 transposed convolutions do round twice, and so does Nova.
Under autocast the bias joins the product's precision (the transposed convolutions'
results were float32). Values on the interp engine, where the arithmetic is numpy's;
one test checks that the cpu engine's kernels give the same bits."""
import numpy as np
import pytest

import nova as nv
import nova.nn.functional as F

RNG = np.random.default_rng(3)


def _arr(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


# name: (call(F, x, weight, bias), [x, weight, bias])
CASES = {
    "linear": (lambda M, x, w, b: M.linear(x, w, b), [_arr(8, 2, 16), _arr(12, 16), _arr(12)]),
    "conv1d": (lambda M, x, w, b: M.conv1d(x, w, b, padding=1),
               [_arr(2, 3, 9), _arr(5, 3, 3), _arr(5)]),
    "conv2d": (lambda M, x, w, b: M.conv2d(x, w, b, stride=2),
               [_arr(2, 3, 7, 7), _arr(4, 3, 3, 3), _arr(4)]),
    "conv2d-groups": (lambda M, x, w, b: M.conv2d(x, w, b, groups=2),
                      [_arr(2, 4, 5, 5), _arr(6, 2, 3, 3), _arr(6)]),
    "conv3d": (lambda M, x, w, b: M.conv3d(x, w, b),
               [_arr(1, 2, 4, 4, 4), _arr(3, 2, 2, 2, 2), _arr(3)]),
    "conv_transpose1d": (lambda M, x, w, b: M.conv_transpose1d(x, w, b, stride=2),
                         [_arr(2, 3, 5), _arr(3, 4, 3), _arr(4)]),
    "conv_transpose2d": (lambda M, x, w, b: M.conv_transpose2d(x, w, b),
                         [_arr(2, 3, 4, 4), _arr(3, 4, 3, 3), _arr(4)]),
    "conv_transpose3d": (lambda M, x, w, b: M.conv_transpose3d(x, w, b),
                         [_arr(1, 2, 3, 3, 3), _arr(2, 3, 2, 2, 2), _arr(3)]),
}
NAMES = list(CASES)


def _half(arrs, dtype):
    return [nv.tensor(a).to(dtype) for a in arrs]


@pytest.mark.parametrize("dtype", [nv.bfloat16, nv.float16], ids=["bf16", "f16"])
@pytest.mark.parametrize("name", NAMES)
def test_the_bias_is_added_in_float32_and_rounded_once(name, dtype):
    """The half result is the float32 computation on the half values, rounded once;
    float16 transposed convolutions, as PyTorch's, round the product first."""
    call, arrs = CASES[name]
    with nv.engine("interp"):
        x, w, b = _half(arrs, dtype)
        got = call(F, x, w, b)
        assert got.dtype == dtype
        if dtype == nv.float16 and name.startswith("conv_transpose"):
            bias = b.float().reshape((-1,) + (1,) * (x.ndim - 2))
            want = (call(F, x, w, None).float() + bias).to(dtype)
        else:
            want = call(F, x.float(), w.float(), b.float()).to(dtype)
        np.testing.assert_array_equal(got.float().numpy(), want.float().numpy())


@pytest.mark.parametrize("name", NAMES)
def test_bfloat16_values_and_gradients_match_torch(name):
    """Bit for bit against torch 2.13's CPU kernels, the gradients included (the input
    gradient of a convolution was rounded at every add of its col2im, 1 ulp off)."""
    torch = pytest.importorskip("torch")
    call, arrs = CASES[name]
    tt = [torch.tensor(a).bfloat16().requires_grad_() for a in arrs]
    want = call(torch.nn.functional, *tt)
    want.backward(torch.full_like(want, 0.375))
    with nv.engine("interp"):
        ts = [t.detach().requires_grad_() for t in _half(arrs, nv.bfloat16)]
        got = call(F, *ts)
        got.backward(nv.full(got.shape, 0.375, dtype=nv.bfloat16))
        np.testing.assert_array_equal(got.float().numpy(), want.detach().float().numpy())
        for mine, theirs in zip(ts, tt):
            np.testing.assert_array_equal(mine.grad.float().numpy(),
                                          theirs.grad.float().numpy())


@pytest.mark.parametrize("name", NAMES)
def test_under_autocast_the_bias_joins_the_products_precision(name):
    """float32 operands and bias under ``nv.autocast("cpu")``: a bfloat16 result, the
    bfloat16-rounded operands' float32 computation rounded once (PyTorch's)."""
    call, arrs = CASES[name]
    with nv.engine("interp"):
        ts = [nv.tensor(a) for a in arrs]
        with nv.autocast("cpu"):
            got = call(F, *ts)
        assert got.dtype == nv.bfloat16
        rounded = [t.bfloat16().float() for t in ts]
        want = call(F, *rounded).bfloat16()
        np.testing.assert_array_equal(got.float().numpy(), want.float().numpy())
    torch = pytest.importorskip("torch")
    with torch.autocast("cpu"):
        theirs = call(torch.nn.functional, *[torch.tensor(a) for a in arrs])
    np.testing.assert_array_equal(got.float().numpy(), theirs.float().numpy())


def test_the_cpu_engine_rounds_as_the_interpreter():
    """The compiled kernels (one GEMM whose epilogue adds the bias and rounds) give the
    interpreter's bits, forward and backward."""
    call, arrs = CASES["linear"]

    def run(engine):
        with nv.engine(engine):
            ts = [t.detach().requires_grad_() for t in _half(arrs, nv.bfloat16)]
            out = call(F, *ts)
            out.float().sum().backward()
            return [out.float().numpy()] + [t.grad.float().numpy() for t in ts]
    for mine, theirs in zip(run("cpu"), run("interp")):
        np.testing.assert_array_equal(mine, theirs)


ADDED = {
    "addmm": (lambda L, c, a, b: L.addmm(c, a, b, beta=0.7, alpha=1.3),
              [_arr(16, 12), _arr(16, 32), _arr(32, 12)]),
    "baddbmm": (lambda L, c, a, b: L.baddbmm(c, a, b, beta=0.7, alpha=1.3),
                [_arr(3, 16, 12), _arr(3, 16, 32), _arr(3, 32, 12)]),
}


@pytest.mark.parametrize("dtype", [nv.bfloat16, nv.float16], ids=["bf16", "f16"])
@pytest.mark.parametrize("name", list(ADDED))
def test_addmm_and_baddbmm_round_once(name, dtype):
    """``beta * input + alpha * (mat1 @ mat2)`` in float32, rounded once (torch's CPU
    addmm and baddbmm; its addbmm, addmv and addr round on the way)."""
    call, arrs = ADDED[name]
    with nv.engine("interp"):
        ts = _half(arrs, dtype)
        got = call(nv, *ts)
        want = call(nv, *[t.float() for t in ts]).to(dtype)
        np.testing.assert_array_equal(got.float().numpy(), want.float().numpy())
    torch = pytest.importorskip("torch")
    theirs = call(torch, *[torch.tensor(a).to(getattr(torch, str(dtype).split(".")[-1]))
                           for a in arrs])
    np.testing.assert_array_equal(got.float().numpy(), theirs.float().numpy())
