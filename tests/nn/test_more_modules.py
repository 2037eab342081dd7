"""Issue #22's nn names: ``nn.Buffer`` (registered on attribute assignment), the lazy
norms and transposed convolutions, ``UninitializedBuffer``, the in-place activations of
``nn.functional`` and its deprecated/always-indexed aliases, against references written
here and the eager modules under the same seed."""
import copy

import numpy as np
import pytest

import nova as nv
from nova.nn import BatchNorm2d, ConvTranspose1d, ConvTranspose2d, InstanceNorm1d, Module
from nova.nn import activation as A
from nova.nn.lazy import (
    LazyBatchNorm1d, LazyBatchNorm2d, LazyBatchNorm3d, LazyConvTranspose1d,
    LazyConvTranspose2d, LazyConvTranspose3d, LazyInstanceNorm1d, LazyInstanceNorm2d,
    LazyInstanceNorm3d, UninitializedBuffer, UninitializedParameterError,
)
from nova.nn.more_modules import Buffer

F = nv.nn.functional


# ---------------------------------------------------------------- nn.Buffer

def test_buffer_registers_on_assignment():
    class Stats(Module):
        def __init__(self):
            super().__init__()
            self.mean = Buffer(nv.zeros(2))
            self.scratch = Buffer(nv.ones(3), persistent=False)
            self.w = nv.nn.Parameter(nv.ones(1))
            self.plain = nv.ones(1)                   # a plain tensor stays an attribute

    m = Stats()
    assert [n for n, _ in m.named_buffers()] == ["mean", "scratch"]
    assert list(m.state_dict()) == ["w", "mean"] and isinstance(m.mean, Buffer)
    m.mean = Buffer(nv.ones(2), persistent=False)     # re-registered in place, not saved
    m.scratch = nv.zeros(3)                           # a tensor keeps the buffer's flag
    assert [n for n, _ in m.named_buffers()] == ["mean", "scratch"]
    assert list(m.state_dict()) == ["w"] and not isinstance(m.scratch, Buffer)
    with pytest.raises(TypeError, match="cannot assign 'Buffer' as parameter 'w'"):
        m.w = Buffer(nv.ones(1))
    with pytest.raises(KeyError, match="attribute 'plain' already exists"):
        m.plain = Buffer(nv.ones(1))
    source = nv.zeros(3)
    shared = Buffer(source)                           # a detach(): shares the elements
    source.add_(2.0)
    p = nv.nn.Parameter(nv.ones(2))
    from_param = Buffer(p)
    assert from_param.requires_grad and from_param.is_leaf and not shared.requires_grad
    assert Buffer().shape == (0,) and Buffer(nv.ones(1)).persistent
    with pytest.raises(TypeError, match="Buffer: data must be a Tensor, got list"):
        Buffer([1.0])
    np.testing.assert_array_equal(shared.numpy(), [2, 2, 2])
    mean = m.mean
    m.double()                                        # converted in place, identity kept
    assert m.mean is mean and mean.dtype == nv.float64


# ---------------------------------------------------------------- lazy modules

def test_lazy_norms_infer_num_features():
    m = LazyBatchNorm2d(momentum=0.5)
    assert repr(m) == ("LazyBatchNorm2d(0, eps=1e-05, momentum=0.5, affine=True, "
                       "bias=True, track_running_stats=True)")
    assert isinstance(m.running_mean, UninitializedBuffer) and m.has_uninitialized_params()
    assert [n for n, _ in m.named_buffers()] == ["running_mean", "running_var",
                                                 "num_batches_tracked"]
    x = nv.tensor(np.random.default_rng(0).standard_normal((2, 3, 2, 2)))
    y = m.double()(x)
    ref = BatchNorm2d(3, momentum=0.5, dtype=nv.float64)
    ry = ref(x)
    assert type(m) is BatchNorm2d and m.num_features == 3 and type(m.running_mean) is Buffer
    nv.realize(y, ry, m.running_mean, m.running_var, ref.running_mean, ref.running_var)
    np.testing.assert_array_equal(y.numpy(), ry.numpy())
    np.testing.assert_array_equal(m.running_mean.numpy(), ref.running_mean.numpy())
    np.testing.assert_array_equal(m.running_var.numpy(), ref.running_var.numpy())
    assert m.num_batches_tracked.item() == 1 and m.weight.numpy().tolist() == [1, 1, 1]
    no_bias = LazyBatchNorm1d(bias=False)
    no_bias(nv.ones(4, 5))
    assert no_bias.bias is None and list(no_bias.state_dict()) == [
        "weight", "running_mean", "running_var", "num_batches_tracked"]
    bare = LazyBatchNorm3d(affine=False, track_running_stats=False)
    assert not bare.has_uninitialized_params()
    bare(nv.ones(2, 2, 1, 1, 1))                      # nothing to infer: still becomes eager
    assert type(bare).__name__ == "BatchNorm3d" and bare.num_features == 0
    inst = LazyInstanceNorm1d()                       # PyTorch's lazy defaults: affine, tracked
    inst(nv.ones(4, 6))                               # unbatched: channels are dim 0
    assert type(inst) is InstanceNorm1d and inst.num_features == 4
    assert inst.weight.shape == (4,)                  # running_var from 1: 0.9 * 1 + 0.1 * 0
    np.testing.assert_allclose(inst.running_var.numpy(), [0.9] * 4, rtol=1e-7)
    assert LazyInstanceNorm2d(affine=False).weight is None
    with pytest.raises(ValueError, match=r"LazyBatchNorm1d: expected a 2-D or 3-D input, got "
                                         r"\(4,\)"):
        LazyBatchNorm1d()(nv.ones(4))
    with pytest.raises(ValueError, match=r"LazyInstanceNorm3d: expected a 4-D \(unbatched\) "
                                         r"or 5-D input"):
        LazyInstanceNorm3d()(nv.ones(2, 2))


def test_lazy_conv_transposes_initialize_as_eager_ones():
    nv.manual_seed(3)
    c = LazyConvTranspose2d(4, 3, stride=2, groups=2)
    assert repr(c) == "LazyConvTranspose2d(0, 4, kernel_size=(3, 3), stride=(2, 2), groups=2)"
    x = nv.ones(1, 6, 2, 2)
    out = c(x)
    nv.manual_seed(3)
    ref = ConvTranspose2d(6, 4, 3, stride=2, groups=2)
    ref_out = ref(x)
    assert type(c) is ConvTranspose2d and c.in_channels == 6
    assert c.weight.shape == (6, 2, 3, 3) and out.shape == (1, 4, 5, 5)
    nv.realize(out, ref_out, c.weight, ref.weight)
    np.testing.assert_array_equal(c.weight.numpy(), ref.weight.numpy())
    np.testing.assert_array_equal(out.numpy(), ref_out.numpy())
    c1 = LazyConvTranspose1d(2, 3, bias=False)
    c1(nv.ones(5, 4))                                 # unbatched: in_channels = 5
    assert type(c1) is ConvTranspose1d and c1.weight.shape == (5, 2, 3) and c1.bias is None
    with pytest.raises(ValueError, match=r"out_channels \(3\) must be divisible by groups"):
        LazyConvTranspose3d(3, 1, groups=2)
    with pytest.raises(RuntimeError, match=r"Expected 4D \(unbatched\) or 5D \(batched\) input "
                                           r"to LazyConvTranspose3d"):
        LazyConvTranspose3d(2, 1)(nv.ones(2, 2))


def test_uninitialized_buffer():
    b = UninitializedBuffer(dtype=nv.float64, persistent=False)
    assert repr(b) == "<UninitializedBuffer>" and not b.requires_grad and not b.persistent
    assert isinstance(b, Buffer) and b.dtype == nv.float64
    with pytest.raises(RuntimeError, match="shape of an uninitialized parameter or buffer"):
        b.shape
    with pytest.raises(UninitializedParameterError, match="UninitializedBuffer objects"):
        b.sum()
    twin = copy.deepcopy(b)
    assert type(twin) is UninitializedBuffer and twin is not b and not twin.persistent
    b.materialize((2, 3))
    assert type(b) is Buffer and b.shape == (2, 3) and b.dtype == nv.float64


# ---------------------------------------------------------------- functional

def test_in_place_activations():
    v = np.array([-2.0, -0.5, 0.0, 0.5, 2.0], dtype=np.float32)
    selu_a, selu_s = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946
    cases = {
        "relu_": ((), np.maximum(v, 0)),
        "leaky_relu_": ((0.2,), np.where(v > 0, v, 0.2 * v)),
        "elu_": ((0.5,), np.where(v > 0, v, 0.5 * np.expm1(v))),
        "selu_": ((), selu_s * np.where(v > 0, v, selu_a * np.expm1(v))),
        "celu_": ((2.0,), np.where(v > 0, v, 2.0 * np.expm1(v / 2.0))),
        "hardtanh_": ((-1.0, 0.6), np.clip(v, -1.0, 0.6)),
        "threshold_": ((0.1, 9.0), np.where(v > 0.1, v, 9.0)),
        "rrelu_": ((), np.where(v > 0, v, v * (1 / 8 + 1 / 3) / 2)),
    }
    inputs = {name: nv.tensor(v) for name in cases}
    outs = {name: getattr(A, name)(inputs[name], *args) for name, (args, _) in cases.items()}
    w = nv.tensor(v, requires_grad=True)
    hidden = w * 1.0
    A.relu_(hidden)
    hidden.sum().backward()
    nv.realize(*outs.values(), w.grad)
    for name, (_, ref) in cases.items():
        assert outs[name] is inputs[name]
        np.testing.assert_allclose(inputs[name].numpy(), ref, rtol=1e-6, atol=1e-7)
    np.testing.assert_array_equal(w.grad.numpy(), (v > 0).astype(np.float32))
    with pytest.raises(RuntimeError, match="elu_: a leaf tensor that requires grad"):
        A.elu_(nv.ones(2, requires_grad=True))
    with pytest.raises(RuntimeError, match="selu_: result type float32 can't be cast to the "
                                           "in-place output type int64"):
        A.selu_(nv.tensor([1, 2]))


def test_deprecated_upsampling_and_pools_with_indices():
    x = nv.tensor([[[[0.0, 1.0], [2.0, 3.0]]]])
    with pytest.warns(UserWarning, match="upsample_bilinear` is deprecated"):
        bilinear = A.upsample_bilinear(x, size=3)     # align_corners=True: midpoints
    with pytest.warns(UserWarning, match="upsample_nearest` is deprecated"):
        nearest = A.upsample_nearest(x, scale_factor=2)
    s = nv.tensor(np.arange(16.0).reshape(1, 1, 4, 4)[..., ::-1].copy())
    pools = [A.max_pool1d_with_indices(s[0], 2), A.max_pool2d_with_indices(s, 2, 1),
             A.max_pool3d_with_indices(s, (1, 2, 2)), A.adaptive_max_pool1d_with_indices(
                 s[0], 2), A.adaptive_max_pool2d_with_indices(s, 1),
             A.adaptive_max_pool3d_with_indices(s, (1, 2, 1))]
    refs = [F.max_pool1d(s[0], 2, return_indices=True),
            F.max_pool2d(s, 2, 1, return_indices=True),
            F.max_pool3d(s, (1, 2, 2), return_indices=True),
            F.adaptive_max_pool1d(s[0], 2, return_indices=True),
            F.adaptive_max_pool2d(s, 1, return_indices=True),
            F.adaptive_max_pool3d(s, (1, 2, 1), return_indices=True)]
    nv.realize(bilinear, nearest, *[t for pair in pools + refs for t in pair])
    np.testing.assert_array_equal(bilinear.numpy()[0, 0], [[0, 0.5, 1], [1, 1.5, 2],
                                                           [2, 2.5, 3]])
    np.testing.assert_array_equal(nearest.numpy()[0, 0], np.kron([[0, 1], [2, 3]],
                                                                 np.ones((2, 2))))
    for (out, idx), (rout, ridx) in zip(pools, refs):
        np.testing.assert_array_equal(out.numpy(), rout.numpy())
        np.testing.assert_array_equal(idx.numpy(), ridx.numpy())
