"""PyTorch's legacy tensor types, ``torch.Size``, ``x.type()`` and ``torch.jit``'s
pass-through decorators (``nova.tensor.legacy``, ``nova.jit``)."""
import numpy as np
import pytest

import nova as nv


def test_legacy_types_construct_convert_and_test_membership():
    assert nv.FloatTensor(2, 3).shape == (2, 3) and nv.FloatTensor(2, 3).dtype == nv.float32
    assert nv.FloatTensor((4,)).tolist() == [4.0] and nv.FloatTensor().shape == (0,)
    assert nv.FloatTensor(nv.Size([2, 1])).shape == (2, 1)
    assert nv.LongTensor([1, 2]).dtype == nv.int64 and nv.LongTensor([1, 2]).tolist() == [1, 2]
    assert nv.FloatTensor(np.ones(3)).dtype == nv.float32
    x = nv.zeros(2)
    assert nv.FloatTensor(x) is x
    with pytest.raises(TypeError, match="expected a float32 tensor"):
        nv.FloatTensor(nv.tensor([1, 2]))
    assert isinstance(x, nv.FloatTensor) and not isinstance(x, nv.LongTensor)
    assert not isinstance(x, nv.cuda.FloatTensor) and not isinstance(3.0, nv.FloatTensor)
    assert x.type() == "torch.FloatTensor" and nv.tensor([1]).type() == "torch.LongTensor"
    assert x.type(nv.LongTensor).dtype == nv.int64
    assert x.type("torch.DoubleTensor").dtype == nv.float64 and x.type(nv.int32).dtype == nv.int32
    assert repr(nv.BoolTensor) == "<class 'torch.BoolTensor'>"


def test_size_and_jit_pass_throughs():
    s = nv.Size([2, 3, 4])
    assert s == (2, 3, 4) and s.numel() == 24 and repr(s) == "nova.Size([2, 3, 4])"
    assert isinstance(nv.zeros(2, 3).shape, nv.Size) and not isinstance((2.0,), nv.Size)
    with pytest.raises(TypeError, match="Size"):
        nv.Size([1.5])

    @nv.jit.script
    def double(a):
        return a * 2

    net = nv.nn.Linear(2, 2)
    assert double(nv.ones(2)).tolist() == [2.0, 2.0]
    assert nv.jit.trace(net, nv.ones(1, 2)) is net and nv.jit.script(net) is net
    assert nv.jit.ignore(double) is double and nv.jit.ignore(drop=True)(double) is double
    assert not nv.jit.is_scripting() and not nv.jit.is_tracing()
    with pytest.raises(NotImplementedError, match="state_dict"):
        nv.jit.save(net, "x.pt")


def test_the_tensor_constructor_takes_sizes_data_or_a_tensor_as_pytorchs():
    # old-style layers: ``Parameter(torch.Tensor(out))`` is a vector of `out` elements,
    # not a 0-d tensor holding `out` (which broadcast silently as a bias)
    assert nv.nn.Parameter(nv.Tensor(5)).shape == (5,)
    assert nv.Tensor(4, 3).shape == (4, 3) and nv.Tensor(4, 3).dtype == nv.float32
    assert nv.Tensor(np.int64(3)).shape == (3,) and nv.Tensor(nv.Size([2, 1])).shape == (2, 1)
    assert nv.Tensor().shape == (0,) and nv.Tensor(0).shape == (0,)
    assert nv.Tensor((2, 3)).tolist() == [2.0, 3.0]        # a tuple is data
    assert nv.Tensor([[1, 2]]).dtype == nv.float32 and nv.Tensor(np.arange(2)).tolist() == [0, 1]
    nv.set_default_dtype(nv.float64)
    try:
        assert nv.Tensor(2).dtype == nv.float64 and nv.Tensor([1]).dtype == nv.float64
    finally:
        nv.set_default_dtype(nv.float32)
    # a tensor keeps its dtype and shares its storage, as PyTorch's
    ints = nv.tensor([1, 2])
    assert nv.Tensor(ints).dtype == nv.int64 and nv.Tensor(ints).tolist() == [1, 2]
    y = nv.tensor([1.0, 2.0])
    alias = nv.Tensor(y)
    alias[0] = 7.0
    y.mul_(2)
    assert y.tolist() == [14.0, 4.0] and alias.tolist() == [14.0, 4.0]
    for bad in (3.5, True):
        with pytest.raises(TypeError, match="data must be a sequence"):
            nv.Tensor(bad)
    with pytest.raises(TypeError, match="sizes"):
        nv.Tensor(2, "a")
