"""Lazy modules: LazyLinear and LazyConv1d/2d/3d infer their input size at the first
call, initialize as their eager classes do under the same seed, and become them;
UninitializedParameter refuses to be used before that, as PyTorch's does."""
import copy

import numpy as np
import pytest

import nova as nv
from nova.nn import (Conv1d, Conv2d, Conv3d, LazyConv1d, LazyConv2d, LazyConv3d, LazyLinear,
                     Linear, Module, Parameter, UninitializedParameter)
from nova.nn.lazy import LazyModuleMixin, UninitializedParameterError


def test_lazy_linear_before_its_first_call():
    m = LazyLinear(3)
    assert repr(m) == "LazyLinear(in_features=0, out_features=3, bias=True)"
    assert m.has_uninitialized_params() and isinstance(m.weight, UninitializedParameter)
    assert repr(m.weight) == "<UninitializedParameter>" and m.weight.requires_grad
    assert m.weight.dtype == nv.float32 and [n for n, _ in m.named_parameters()] == \
        ["weight", "bias"]
    with pytest.raises(RuntimeError, match="Can't access the shape of an uninitialized"):
        m.weight.shape
    with pytest.raises(ValueError, match="Can't access the shape"):
        m.weight + 1                                     # both, as torch's two errors
    with pytest.raises(ValueError, match="uninitialized parameter in numel"):
        m.num_parameters()
    for use in (lambda w: w.numpy(), lambda w: w.data, lambda w: len(w), lambda w: w.sum(),
                lambda w: nv.nn.functional.linear(nv.ones(2, 2), w),
                lambda w: nv.nn.init.zeros_(w)):
        with pytest.raises(UninitializedParameterError, match="uninitialized parameter"):
            use(m.weight)
    loaded = LazyLinear(3)                      # a checkpoint materializes it (load hook)
    loaded.load_state_dict(Linear(2, 3).state_dict())
    assert not loaded.has_uninitialized_params() and loaded.in_features == 2
    assert [tuple(v.shape) for v in m.state_dict().values()] == [(0,), (0,)]
    twin = copy.deepcopy(m)
    assert twin.weight is not m.weight and isinstance(twin.weight, UninitializedParameter)
    no_bias = LazyLinear(2, bias=False)
    assert no_bias.bias is None and repr(no_bias).endswith("bias=False)")


def test_lazy_linear_materializes_as_linear_under_the_same_seed():
    m = LazyLinear(3).to("cpu").double()           # moved and cast before the first call
    weight, bias = m.weight, m.bias
    opt = nv.optim.SGD(m.parameters(), lr=0.5)      # built over uninitialized parameters
    x = nv.tensor(np.arange(10, dtype=np.float64).reshape(2, 5) / 7)
    nv.manual_seed(4)
    y = m(x)
    nv.manual_seed(4)
    ref = Linear(5, 3, dtype=nv.float64)
    assert type(m) is Linear and type(m.weight) is Parameter
    assert m.weight is weight and m.bias is bias and m.in_features == 5
    assert repr(m) == "Linear(in_features=5, out_features=3, bias=True)"
    w0, b0, rw, rb, yv = _realized(m.weight, m.bias, ref.weight, ref.bias, y)
    assert m.weight.dtype == nv.float64 and w0.shape == (3, 5)
    np.testing.assert_array_equal(w0, rw)
    np.testing.assert_array_equal(b0, rb)
    assert np.all(np.abs(w0) <= 1 / np.sqrt(5)) and np.all(np.abs(b0) <= 1 / np.sqrt(5))
    np.testing.assert_allclose(yv, x.numpy() @ w0.T + b0, rtol=1e-14)
    y.sum().backward()
    opt.step()
    np.testing.assert_allclose(m.weight.numpy(), w0 - 0.5 * np.tile(x.numpy().sum(0), (3, 1)),
                               rtol=1e-14)
    np.testing.assert_allclose(m.bias.numpy(), b0 - 0.5 * 2, rtol=1e-14)


def _realized(*tensors):
    nv.realize(*tensors)
    return [t.numpy() for t in tensors]


def test_lazy_linear_inputs_and_frozen_parameters():
    m = LazyLinear(2, bias=False).requires_grad_(False)
    m(nv.ones(4))                                    # a 1-D input: in_features = 4
    assert type(m) is Linear and m.weight.shape == (2, 4) and not m.weight.requires_grad
    with pytest.raises(RuntimeError, match="cannot infer in_features from a 0-d input"):
        LazyLinear(2)(nv.tensor(1.0))


def test_lazy_convs_infer_in_channels_and_initialize_as_eager_ones():
    nv.manual_seed(2)
    c = LazyConv2d(4, 3, padding=1, groups=2)
    assert repr(c) == "LazyConv2d(0, 4, kernel_size=(3, 3), stride=(1, 1), " \
                      "padding=(1, 1), groups=2)"
    out = c(nv.ones(1, 6, 5, 5))
    nv.manual_seed(2)
    ref = Conv2d(6, 4, 3, padding=1, groups=2)
    assert type(c) is Conv2d and c.in_channels == 6 and out.shape == (1, 4, 5, 5)
    assert c.weight.shape == (4, 3, 3, 3) and c.bias.shape == (4,)
    c1 = LazyConv1d(2, 3, bias=False)
    c1(nv.ones(5, 8))                                 # unbatched: in_channels = 5
    assert type(c1) is Conv1d and c1.weight.shape == (2, 5, 3) and c1.bias is None
    c3 = LazyConv3d(1, 1)
    c3(nv.ones(1, 2, 1, 1, 1))
    assert type(c3) is Conv3d and c3.weight.shape == (1, 2, 1, 1, 1)
    w, b, rw, rb = _realized(c.weight, c.bias, ref.weight, ref.bias)
    np.testing.assert_array_equal(w, rw)
    np.testing.assert_array_equal(b, rb)
    with pytest.raises(RuntimeError, match=r"Expected 3D \(unbatched\) or 4D \(batched\) "
                                            r"input to LazyConv2d.*\(5, 5\)"):
        LazyConv2d(4, 3)(nv.ones(5, 5))
    with pytest.raises(ValueError, match=r"in_channels \(3\) must be divisible by groups"):
        LazyConv2d(4, 3, groups=2)(nv.ones(1, 3, 5, 5))
    with pytest.raises(ValueError, match=r"out_channels \(3\) must be divisible by groups"):
        LazyConv2d(3, 3, groups=2)
    with pytest.raises(ValueError, match="padding_mode must be one of"):
        LazyConv1d(2, 3, padding_mode="bogus")


def test_a_custom_lazy_module():
    class Scale(LazyModuleMixin, Module):
        def __init__(self, complete=True):
            super().__init__()
            self.complete = complete
            self.scale = UninitializedParameter()

        def initialize_parameters(self, x):
            if self.complete:
                self.scale.materialize(x.shape[-1])
                nv.nn.init.ones_(self.scale)

        def forward(self, x):
            return x * self.scale
    s = Scale()
    assert s(nv.ones(2, 3)).shape == (2, 3) and type(s) is Scale   # no cls_to_become
    assert not s.has_uninitialized_params() and s.scale.shape == (3,)
    with pytest.raises(RuntimeError, match="module Scale has not been fully initialized"):
        Scale(complete=False)(nv.ones(2))
