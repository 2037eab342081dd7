"""``nv.amp.custom_fwd`` / ``custom_bwd``: a custom ``autograd.Function`` under autocast
(PyTorch's ``torch.amp.custom_fwd(fwd=None, *, device_type, cast_inputs=None)`` and
``custom_bwd(bwd=None, *, device_type)``)."""
import warnings

import numpy as np
import pytest

import nova as nv
from nova import amp

A = np.arange(6, dtype=np.float32).reshape(2, 3) / 4 - 0.5
B = np.arange(12, dtype=np.float32).reshape(3, 4) / 8 - 0.7


def _matmul_fn(cast_inputs, seen):
    """A Function computing ``a @ b`` that records, in forward and backward, the dtypes
    it sees and the autocast state."""
    class MatMul(nv.autograd.Function):
        @staticmethod
        @amp.custom_fwd(device_type="cpu", cast_inputs=cast_inputs)
        def forward(ctx, a, b):
            ctx.save_for_backward(a, b)
            out = a @ b
            seen["fwd"] = (a.dtype, b.dtype, amp.is_autocast_enabled("cpu"), out.dtype)
            return out

        @staticmethod
        @amp.custom_bwd(device_type="cpu")
        def backward(ctx, g):
            a, b = ctx.saved_tensors
            seen["bwd"] = (amp.is_autocast_enabled("cpu"), amp.get_autocast_dtype("cpu"))
            return g @ b.T, a.T @ g
    return MatMul


def test_cast_inputs_casts_floats_and_runs_forward_without_autocast():
    seen = {}
    fn = _matmul_fn(nv.float32, seen)
    a = nv.tensor(A).to(nv.bfloat16).requires_grad_()
    b = nv.tensor(B, requires_grad=True)
    with nv.autocast("cpu"):
        out = fn.apply(a, b)
        assert amp.is_autocast_enabled("cpu")      # restored after forward
    assert seen["fwd"] == (nv.float32, nv.float32, False, nv.float32)
    a32 = A.astype(nv.bfloat16.np).astype(np.float32)
    np.testing.assert_allclose(out.numpy(), a32 @ B, rtol=1e-6)
    out.sum().backward()
    # backward runs with the forward's state: autocast off (cast_inputs was given)
    assert seen["bwd"][0] is False
    np.testing.assert_allclose(b.grad.numpy(), a32.T @ np.ones((2, 4), np.float32),
                               rtol=1e-6)
    assert a.grad.dtype == nv.bfloat16


def test_without_cast_inputs_forward_keeps_autocast_and_backward_reuses_it():
    seen = {}
    fn = _matmul_fn(None, seen)
    a = nv.tensor(A, requires_grad=True)
    b = nv.tensor(B, requires_grad=True)
    with nv.autocast("cpu", dtype=nv.bfloat16):
        out = fn.apply(a, b)
    assert seen["fwd"] == (nv.float32, nv.float32, True, nv.bfloat16)
    out.float().sum().backward()        # called outside the autocast block
    assert seen["bwd"] == (True, nv.bfloat16)
    # the backward's products ran in bfloat16 too (autocast lowered them)
    bf = lambda x: x.astype(nv.bfloat16.np).astype(np.float32)  # noqa: E731
    want = bf(bf(np.ones((2, 4), np.float32)) @ bf(B).T)
    np.testing.assert_allclose(a.grad.numpy(), want, rtol=1e-2)


def test_outside_autocast_custom_fwd_is_a_no_op():
    seen = {}
    fn = _matmul_fn(nv.float16, seen)
    a = nv.tensor(A, requires_grad=True)
    out = fn.apply(a, nv.tensor(B))
    assert seen["fwd"] == (nv.float32, nv.float32, False, nv.float32)
    out.sum().backward()
    assert seen["bwd"] == (False, nv.bfloat16)
    np.testing.assert_allclose(a.grad.numpy(), np.ones((2, 4)) @ B.T, rtol=1e-6)


def test_cast_leaves_other_device_types_float64_and_integers():
    got = {}

    @amp.custom_fwd(device_type="cpu", cast_inputs=nv.float16)
    def forward(ctx, x, pair, mapping, d, i):
        got.update(x=x.dtype, pair=[t.dtype for t in pair], m=mapping["k"].dtype,
                   d=d.dtype, i=i.dtype)

    class Ctx:
        pass
    with nv.autocast("cpu"):
        forward(Ctx(), nv.ones(2), (nv.ones(1), nv.ones(1, dtype=nv.bfloat16)),
                {"k": nv.ones(1)}, nv.ones(1, dtype=nv.float64), nv.ones(1, dtype=nv.int64))
    assert got == dict(x=nv.float16, pair=[nv.float16, nv.float16], m=nv.float16,
                       d=nv.float64, i=nv.int64)
    seen = {}
    with nv.autocast("cpu"):        # a cuda-typed custom_fwd under CPU autocast: no cast
        amp.custom_fwd(lambda ctx, x: seen.update(x=x.dtype), device_type="cuda",
                       cast_inputs=nv.float16)(Ctx(), nv.ones(1))
    assert seen["x"] == nv.float32


def test_custom_bwd_turning_autocast_off_leaves_another_device_types_block():
    class Ctx:
        _fwd_used_autocast, _dtype = False, nv.float16
    seen = []
    bwd = amp.custom_bwd(lambda ctx: seen.append(amp.is_autocast_enabled("cpu")),
                         device_type="cuda")
    with nv.autocast("cpu"):
        bwd(Ctx())
    assert seen == [True]


def test_device_type_is_checked_and_the_cuda_aliases_warn():
    with pytest.raises(ValueError, match="Expected `device_type` of type `str`"):
        amp.custom_fwd(device_type=0)
    with pytest.raises(ValueError, match="Expected `device_type` of type `str`"):
        amp.custom_bwd(device_type=None)
    with pytest.raises(TypeError):
        amp.custom_fwd(lambda ctx: None)    # device_type is required (keyword-only)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        f = amp._cuda_custom_fwd(cast_inputs=nv.float32)(lambda ctx, x: x.dtype)
        g = amp._cuda_custom_bwd(lambda ctx: amp.is_autocast_enabled("cuda"))

    class Ctx:
        pass
    ctx = Ctx()
    with nv.autocast("cuda"):
        # (a CPU tensor is not of device type cuda: left as it is)
        assert f(ctx, nv.ones(1, dtype=nv.float16)) == nv.float16
    assert ctx._fwd_used_autocast is False and ctx._dtype == nv.float16
    assert g(ctx) is False
    assert [w.category for w in caught] == [FutureWarning, FutureWarning]
    assert "custom_fwd" in str(caught[0].message)
