"""dtype information and the default float dtype, as PyTorch's: ``finfo``/``iinfo``
against numpy's limits, promotion queries, and ``set_default_dtype`` reaching every
place a float dtype is chosen without ``dtype=``."""
import ml_dtypes
import numpy as np
import pytest

import nova as nv


def test_finfo_and_iinfo_give_the_limits():
    for d, npd in [(nv.float32, np.float32), (nv.float64, np.float64), (nv.float16, np.float16),
                   (nv.bfloat16, ml_dtypes.bfloat16)]:
        f, ref = nv.finfo(d), ml_dtypes.finfo(npd)
        assert (f.bits, f.eps, f.max, f.min, f.tiny, f.smallest_normal) == (
            ref.bits, float(ref.eps), float(ref.max), float(ref.min),
            float(ref.smallest_normal), float(ref.smallest_normal))
        assert f.dtype == d.name
    assert nv.finfo().dtype == "float32" and nv.finfo(np.float64).eps == np.finfo(np.float64).eps
    i = nv.iinfo(nv.int32)
    assert (i.bits, i.min, i.max, i.dtype) == (32, -2**31, 2**31 - 1, "int32")
    assert (nv.iinfo(nv.int64).max, nv.iinfo(nv.bool).max) == (2**63 - 1, 1)
    with pytest.raises(TypeError, match="finfo: int32 is not a floating"):
        nv.finfo(nv.int32)
    with pytest.raises(TypeError, match="iinfo: float32 is a floating"):
        nv.iinfo(nv.float32)
    assert "eps=" in repr(nv.finfo()) and "max=2147483647" in repr(i)


def test_promotion_queries():
    assert nv.promote_types(nv.int32, nv.float16) == nv.float16
    assert nv.promote_types(nv.float16, nv.bfloat16) == nv.float32
    assert nv.promote_types(nv.int32, nv.int64) == nv.int64
    assert nv.can_cast(nv.int32, nv.float16) and not nv.can_cast(nv.float32, nv.int64)
    assert nv.can_cast(nv.float64, nv.float16) and not nv.can_cast(nv.int32, nv.bool)


@pytest.fixture
def float64_default():
    nv.set_default_dtype(nv.float64)
    try:
        yield
    finally:
        nv.set_default_dtype(nv.float32)


def test_set_default_dtype_reaches_factories_promotion_and_layers(float64_default):
    assert nv.get_default_dtype() == nv.float64
    made = [nv.tensor([1.5]), nv.tensor([]), nv.zeros(2), nv.ones(2), nv.rand(2), nv.randn(2),
            nv.arange(0.0, 3), nv.linspace(0, 1, 3), nv.full((2,), 1.5), nv.eye(2),
            nv.tensor([1, 2]) / 2, nv.exp(nv.tensor([1])), nv.tensor([1.0, 2.0]).mean(),
            nv.nn.Linear(2, 3).weight,
            nv.scalar_tensor(1), nv.linalg.vector_norm(nv.tensor([3, 4]))]
    assert [t.dtype for t in made] == [nv.float64] * len(made)
    # explicit dtypes, ints and float32 tensors keep theirs
    assert nv.tensor([1, 2]).dtype == nv.int64 and nv.arange(3).dtype == nv.int64
    assert (nv.ones(2, dtype=nv.float32) * 2.5).dtype == nv.float32
    assert nv.tensor([1.0]).float().dtype == nv.float32
    assert nv.tensor(np.array([1.0], np.float32)).dtype == nv.float32


def test_set_default_dtype_refuses_non_floats():
    with pytest.raises(TypeError, match="set_default_dtype: only floating"):
        nv.set_default_dtype(nv.int64)
    assert nv.get_default_dtype() == nv.float32


def test_finfo_resolution_is_pytorchs_decimal_one():
    assert [nv.finfo(d).resolution for d in (nv.float16, nv.bfloat16, nv.float32, nv.float64)] \
        == [1e-3, 1e-2, 1e-6, 1e-15]


def test_the_default_dtype_reaches_composite_calls_recorded_before(float64_default):
    """A stamped composite (softmax) recorded under float32 must not hand its float32
    structure to a call under float64 (its template key includes the default)."""
    nv.set_default_dtype(nv.float32)
    assert nv.softmax(nv.tensor([1, 2]), 0).dtype == nv.float32
    nv.set_default_dtype(nv.float64)
    assert nv.softmax(nv.tensor([1, 2]), 0).dtype == nv.float64
