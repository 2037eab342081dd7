"""PyTorch's layout keywords on Nova's stride-less tensors (probe 13): memory formats
are checked and do nothing, ``*_like`` take PyTorch's whole keyword set, an int is a
device ordinal, and ``nv.cuda.amp``'s old signatures bind positionally as PyTorch's."""
import warnings

import numpy as np
import pytest

import nova as nv


def test_to_clone_and_contiguous_accept_a_memory_format():
    a = np.arange(24, dtype=np.float32).reshape(1, 2, 3, 4)
    x = nv.tensor(a)
    assert x.to(memory_format=nv.channels_last) is x       # nothing else changes
    y = x.to(nv.float64, memory_format=nv.channels_last)
    np.testing.assert_array_equal(y.numpy(), a.astype(np.float64))
    np.testing.assert_array_equal(x.clone(memory_format=nv.channels_last).numpy(), a)
    np.testing.assert_array_equal(x.contiguous(memory_format=nv.preserve_format).numpy(), a)
    with pytest.raises(RuntimeError, match="to: required rank 4 tensor to use channels_last"):
        nv.ones(2, 3).to(memory_format=nv.channels_last)
    with pytest.raises(RuntimeError, match="rank 5 tensor to use channels_last_3d"):
        x.clone(memory_format=nv.channels_last_3d)
    with pytest.raises(TypeError, match="memory_format must be a memory format"):
        x.to(memory_format="channels_last")


def test_is_contiguous_answers_per_format_as_for_an_nchw_tensor():
    x = nv.ones(2, 3, 4, 4)
    assert x.is_contiguous() and x.is_contiguous(memory_format=nv.contiguous_format)
    assert x.is_contiguous(memory_format=nv.preserve_format)
    assert not x.is_contiguous(memory_format=nv.channels_last)
    # one channel or one position: row-major strides are channels-last strides too
    assert nv.ones(2, 1, 4, 4).is_contiguous(memory_format=nv.channels_last)
    assert nv.ones(2, 3, 1, 1).is_contiguous(memory_format=nv.channels_last)
    assert not nv.ones(2, 3).is_contiguous(memory_format=nv.channels_last)
    assert not nv.ones(1, 2, 2, 2, 2).is_contiguous(memory_format=nv.channels_last_3d)


@pytest.mark.parametrize("make", ["zeros_like", "ones_like", "empty_like", "rand_like",
                                  "randn_like", "full_like"])
def test_like_factories_take_pytorchs_keywords(make):
    x = nv.ones(1, 2, 3, 3, dtype=nv.float64)
    args = (x, 2.0) if make == "full_like" else (x,)
    out = getattr(nv, make)(*args, requires_grad=True, memory_format=nv.preserve_format,
                            layout=nv.strided)
    assert out.requires_grad and out.is_leaf and out.shape == x.shape
    assert out.dtype == nv.float64
    assert not getattr(nv, make)(*args, memory_format=nv.channels_last).requires_grad
    with pytest.raises(RuntimeError, match=f"{make}: required rank 4"):
        getattr(nv, make)(*((nv.ones(3),) + args[1:]), memory_format=nv.channels_last)
    with pytest.raises(TypeError, match="memory_format must be a memory format"):
        getattr(nv, make)(*args, memory_format=1)
    if make == "full_like":
        np.testing.assert_array_equal(out.detach().numpy(), np.full((1, 2, 3, 3), 2.0))


def test_an_int_is_an_accelerator_ordinal():
    assert nv.device(0) == nv.device("cuda:0") and str(nv.device(1)) == "cuda:1"
    with pytest.raises(RuntimeError, match="Device index must not be negative"):
        nv.device(-1)
    if not nv.cuda.is_available():
        with pytest.raises(RuntimeError, match="to: CUDA is not available"):
            nv.ones(2).to(0)
        with pytest.raises(RuntimeError, match="CUDA is not available"):
            nv.nn.Linear(2, 2).to(0)


def test_the_old_cuda_and_cpu_amp_signatures_bind_positionally():
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        off = nv.cuda.amp.autocast(False)            # (enabled, dtype, cache_enabled)
        scaler = nv.cuda.amp.GradScaler(1024.0)      # (init_scale, ...)
        cpu = nv.cpu.amp.autocast(True, nv.bfloat16)
    assert off.device_type == "cuda" and off.fast_dtype == nv.float16
    assert scaler.get_scale() == 1024.0
    assert cpu.device_type == "cpu"
    assert [w.category for w in seen] == [FutureWarning] * 3
    assert "nova.amp.autocast('cuda', args...)" in str(seen[0].message)
    with pytest.warns(FutureWarning):
        with nv.cpu.amp.autocast():
            assert nv.is_autocast_enabled("cpu")
    assert not nv.is_autocast_enabled("cpu")
