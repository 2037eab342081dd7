"""``nova/torch_misc.py``: ``set_default_tensor_type``, the inter-op thread count and
``typename``, as torch 2.13 behaves (its outcomes written in)."""
import pytest

import nova as nv


@pytest.fixture
def default_float32():
    yield
    nv.set_default_dtype(nv.float32)


def test_set_default_tensor_type_sets_the_default_dtype(default_float32):
    for t, dtype in ((nv.DoubleTensor, nv.float64), ("torch.HalfTensor", nv.float16),
                     ("nova.BFloat16Tensor", nv.bfloat16), (nv.FloatTensor, nv.float32)):
        with pytest.warns(UserWarning, match="set_default_tensor_type\\(\\) is deprecated"):
            nv.set_default_tensor_type(t)
        assert nv.get_default_dtype() is dtype and nv.tensor([1.5]).dtype is dtype


def test_set_default_tensor_type_refuses_what_torch_refuses(default_float32):
    for bad, match in ((nv.LongTensor, "only floating-point types"),
                       ("torch.IntTensor", "only floating-point types"),
                       (nv.float64, "invalid type object"), (nv.Tensor, "invalid type object"),
                       (None, "invalid type object"), (5, "invalid type object"),
                       ("float64", "unknown tensor type 'float64'"),
                       (nv.cuda.FloatTensor, r"nv.set_default_device\('cuda'\)"),
                       ("torch.cuda.DoubleTensor", r"nv.set_default_dtype\(nv.float64\)")):
        with pytest.raises(TypeError, match=match):
            nv.set_default_tensor_type(bad)
    assert nv.get_default_dtype() is nv.float32


def test_interop_threads_are_remembered_and_checked():
    before = nv.get_num_interop_threads()
    assert isinstance(before, int) and before >= 1
    try:
        nv.set_num_interop_threads(3)
        assert nv.get_num_interop_threads() == 3
        nv.set_num_interop_threads(2)             # (torch allows one call; Nova any)
        assert nv.get_num_interop_threads() == 2
        for bad, match in ((0, "expects a positive integer"), (-1, "positive integer"),
                           (2.0, "expects an int, but got float"),
                           ("2", "but got str"), (True, "but got bool")):
            with pytest.raises(RuntimeError, match=match):
                nv.set_num_interop_threads(bad)
    finally:
        nv.set_num_interop_threads(before)


def test_typename_is_torchs():
    assert nv.typename(nv.zeros(2)) == "torch.FloatTensor"
    assert nv.typename(nv.zeros(2, dtype=nv.int64)) == "torch.LongTensor"
    assert nv.typename(nv.nn.Parameter(nv.zeros(1))) == "torch.FloatTensor"
    assert nv.typename(nv.view_as_complex(nv.zeros(2, 2))) == "torch.ComplexFloatTensor"
    assert nv.typename(nv.nn.Linear(1, 1)) == "nova.nn.layers.Linear"
    assert nv.typename(nv.nn.Parameter) == "nova.nn.parameter.Parameter"
    assert (nv.typename(3), nv.typename("x"), nv.typename(int), nv.typename(None)) == (
        "int", "str", "int", "NoneType")
