"""Creation, dtypes, properties, host access and the counter-based RNG."""
import numpy as np
import pytest

import nova as nv
from tests.helpers import assert_close


def test_tensor_infers_dtypes_like_torch():
    assert nv.tensor(1.5).dtype == nv.float32
    assert nv.tensor([1, 2]).dtype == nv.int64
    assert nv.tensor([True]).dtype == nv.bool
    assert nv.tensor(np.zeros(2, np.float64)).dtype == nv.float64
    assert nv.tensor(np.zeros(2, np.int32)).dtype == nv.int32
    assert nv.tensor([[1, 2]], dtype=nv.float16).dtype == nv.float16
    assert nv.tensor([]).shape == (0,)
    assert nv.tensor([nv.tensor(1.0), nv.tensor(2.0)]).tolist() == [1.0, 2.0]


def test_tensor_copies_but_from_numpy_wraps():
    a = np.arange(3, dtype=np.float32)
    copied, wrapped = nv.tensor(a), nv.from_numpy(a)
    a[0] = 42
    assert copied.tolist() == [0.0, 1.0, 2.0]
    assert wrapped.tolist() == [42.0, 1.0, 2.0]
    out = copied.numpy()
    out[1] = -1
    assert copied.tolist() == [0.0, 1.0, 2.0]  # numpy() returns a copy


def test_patterns_and_like():
    assert_close(nv.zeros(2, 3), np.zeros((2, 3)))
    assert_close(nv.ones((2,)), np.ones(2))
    assert_close(nv.full((2, 2), 7), np.full((2, 2), 7))
    assert nv.full((2,), 7).dtype == nv.int64
    assert nv.full((2,), 7.0).dtype == nv.float32
    assert nv.empty(3).shape == (3,)
    x = nv.ones(2, 3, dtype=nv.int32)
    assert nv.zeros_like(x).dtype == nv.int32 and nv.ones_like(x).shape == (2, 3)
    assert nv.full_like(x, 3).tolist() == [[3] * 3] * 2
    assert nv.empty_like(x, dtype=nv.float64).dtype == nv.float64
    assert nv.rand_like(nv.zeros(4)).shape == (4,)
    assert nv.randn_like(nv.zeros(4, dtype=nv.float64)).dtype == nv.float64


def test_properties_and_host_access():
    x = nv.arange(6).reshape(2, 3)
    assert x.shape == (2, 3) and x.size() == (2, 3) and x.size(-1) == 3
    assert x.ndim == 2 and x.dim() == 2 and x.numel() == 6 and len(x) == 2
    assert x.device == nv.device("cpu") and str(x.device) == "cpu"
    assert x.T.shape == (3, 2)
    assert x.tolist() == [[0, 1, 2], [3, 4, 5]]
    assert x[1, 2].item() == 5 and isinstance(x[1, 2].item(), int)
    assert float(nv.tensor(2.5)) == 2.5 and int(nv.tensor(3)) == 3
    assert bool(nv.tensor([1.0])) and not bool(nv.tensor(0))
    assert repr(nv.tensor([1.0, 2.0])) == "tensor([1., 2.])"
    assert "dtype=nova.float16" in repr(nv.tensor([1.0], dtype=nv.float16))
    assert [v.item() for v in nv.tensor([4, 5])] == [4, 5]
    with pytest.raises(RuntimeError, match=r"Boolean value of Tensor with 2 elements"):
        bool(nv.tensor([1, 2]))
    with pytest.raises(RuntimeError, match=r"item: a Tensor with 3 elements"):
        nv.zeros(3).item()
    with pytest.raises(TypeError, match="len\\(\\) of a 0-d tensor"):
        len(nv.tensor(1.0))


def test_conversions():
    x = nv.tensor([1.7, -1.7])
    assert x.long().tolist() == [1, -1] and x.long().dtype == nv.int64
    assert x.int().dtype == nv.int32
    assert x.to(nv.float64).dtype == nv.float64 and x.double().dtype == nv.float64
    assert x.to("float16").dtype == nv.float16 and x.half().dtype == nv.float16
    assert x.bfloat16().float().tolist() == [1.703125, -1.703125]
    assert nv.tensor([0, 2]).bool().tolist() == [False, True]
    assert nv.tensor([True]).float().tolist() == [1.0]
    assert x.to("cpu") is x and x.to(nv.zeros(1, dtype=nv.int32)).dtype == nv.int32
    if not nv.cuda.is_available():   # (where it is, tests/runtime/test_cuda_gpu.py)
        with pytest.raises(RuntimeError, match="to: CUDA is not available: "):
            x.to("cuda")
    with pytest.raises(TypeError, match="dtype: 'float8' is not a Nova dtype"):
        x.to("float8")


def test_manual_seed_makes_draws_reproducible():
    nv.manual_seed(123)
    a = (nv.rand(5), nv.randn(3, 2), nv.randint(0, 10, (4,)))
    nv.manual_seed(123)
    b = (nv.rand(5), nv.randn(3, 2), nv.randint(0, 10, (4,)))
    for x, y in zip(a, b):
        assert x.tolist() == y.tolist()
    assert nv.rand(5).tolist() != a[0].tolist()  # the offset advanced


def test_random_distributions():
    nv.manual_seed(0)
    u = nv.rand(20000).numpy()
    assert u.min() >= 0 and u.max() < 1 and abs(u.mean() - 0.5) < 0.01
    z = nv.randn(20000).numpy()
    assert abs(z.mean()) < 0.03 and abs(z.std() - 1) < 0.03
    r = nv.randint(3, 7, (20000,)).numpy()
    assert set(np.unique(r)) == {3, 4, 5, 6}
    assert nv.randint(5, (3,)).numpy().max() < 5
    f = nv.randint(3, 7, (2000,), dtype=nv.float32)     # PyTorch's: integers as floats
    assert f.dtype == nv.float32 and set(np.unique(f.numpy())) == {3.0, 4.0, 5.0, 6.0}
    # a one-element bool tensor is an index (0 or 1), as PyTorch's; a float one is not
    assert [10, 20][nv.tensor(True)] == 20 and [10, 20][nv.tensor([False])] == 10
    with pytest.raises(TypeError, match="only integer tensors of a single element"):
        [10, 20][nv.tensor(1.0)]
    h = nv.rand(1000, dtype=nv.float16).numpy()
    assert h.dtype == np.float16 and h.max() < 1


def test_random_draws_are_runtime_inputs(fresh_cache):
    nv.manual_seed(0)
    seen = set()
    for _ in range(10):
        seen.add(tuple(nv.rand(3).tolist()))
    stats = nv.debug.cache_stats()
    assert stats.misses == 1 and stats.hits == 9
    assert len(seen) == 10


def test_creation_errors():
    with pytest.raises(TypeError, match="zeros: sizes must be ints"):
        nv.zeros(2.5)
    with pytest.raises(ValueError, match=r"ones: sizes must be non-negative, got \(-1,\)"):
        nv.ones(-1)
    with pytest.raises(ValueError, match="tensor: data is not rectangular"):
        nv.tensor([[1, 2], [3]])
    with pytest.raises(ValueError, match=r"randint: high \(2\) must be greater than low \(5\)"):
        nv.randint(5, 2, (3,))
    with pytest.raises(TypeError, match="rand: dtype must be floating point"):
        nv.rand(3, dtype=nv.int64)
    if not nv.cuda.is_available():
        with pytest.raises(RuntimeError, match="zeros: CUDA is not available: "):
            nv.zeros(2, device="cuda")
    with pytest.raises(TypeError, match="from_numpy: expected np.ndarray"):
        nv.from_numpy([1, 2])


def test_small_numpy_integers_keep_their_dtype_wider_unsigned_widen_and_say_so_once(
        monkeypatch):
    from nova.tensor import creation
    monkeypatch.setattr(creation, "_WARNED_WIDENED", set())
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")            # exact: no widening, no warning
        for a in (np.array([0, 17, 255], np.uint8), np.array([-128, 127], np.int8),
                  np.array([-(2**15), 2**15 - 1], np.int16)):
            t = nv.from_numpy(a)
            assert t.dtype.np == a.dtype
            assert t.numpy().dtype == a.dtype and t.tolist() == a.tolist()
            assert nv.tensor(a).dtype == t.dtype
    pixels = np.array([0, 17, 65535], np.uint16)
    with pytest.warns(creation.NarrowIntegerWarning, match=r"numpy uint16 has no Nova dtype; "
                      r"its values are held exactly as int32.*no wrap-around at 2\*\*16"):
        t = nv.from_numpy(pixels)
    assert t.dtype == nv.int32 and t.tolist() == [0, 17, 65535]
    with warnings.catch_warnings():
        warnings.simplefilter("error")            # once per dtype: no second warning
        assert nv.tensor(pixels).tolist() == [0, 17, 65535]
        assert nv.tensor(pixels, dtype=nv.float32).dtype == nv.float32
    with pytest.warns(creation.NarrowIntegerWarning, match="uint32"):
        assert nv.from_numpy(np.array([2 ** 32 - 1], np.uint32)).dtype == nv.int64


def test_uint64_values_past_int64_are_refused_not_wrapped():
    with pytest.raises(ValueError, match=r"from_numpy: uint64 values up to "
                                         r"18446744073709551615 do not fit int64"):
        nv.from_numpy(np.array([1, 2 ** 64 - 1], np.uint64))
    with pytest.raises(ValueError, match="tensor: uint64 values"):
        nv.tensor(np.array([2 ** 63], np.uint64))
    assert nv.from_numpy(np.array([2 ** 63 - 1], np.uint64)).tolist() == [2 ** 63 - 1]


def test_a_list_of_numpy_scalars_keeps_their_dtype_as_pytorch():
    """Each element's own type promoted (PyTorch's rule): a numpy float64 (what
    ``np.mean`` returns) makes the tensor float64, a Python float alone float32."""
    cases = [([np.float64(1.5), 2.0], nv.float64), ([[np.float64(1.5)], [2.0]], nv.float64),
             ([np.float32(1.5), 2.0], nv.float32), ([np.float16(1.0), 2.0], nv.float32),
             ([np.int32(3), 2], nv.int64), ([1, np.float64(2.0)], nv.float64),
             ([np.bool_(True), False], nv.bool), ([np.int64(2), 3.5], nv.float32),
             ([1.5, 2.0], nv.float32), ([1, 2], nv.int64)]
    for data, want in cases:
        t = nv.tensor(data)
        assert t.dtype == want, data
        np.testing.assert_array_equal(t.numpy(), np.array(data, dtype=want.np))
