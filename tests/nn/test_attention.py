"""``nova.nn.attention`` (``sdpa_kernel``, ``SDPBackend``) and the attention switches
of ``nv.backends.cuda``: checked and restored as PyTorch's, selecting nothing (Nova has
one attention)."""
import numpy as np
import pytest

import nova as nv
import nova.backends.cuda as cuda_backends
import nova.nn.functional as F
from nova.nn.attention import SDPBackend, sdpa_kernel

GETTERS = {"flash": cuda_backends.flash_sdp_enabled,
           "mem_efficient": cuda_backends.mem_efficient_sdp_enabled,
           "math": cuda_backends.math_sdp_enabled,
           "cudnn": cuda_backends.cudnn_sdp_enabled}


def _flags():
    return {name: get() for name, get in GETTERS.items()}


@pytest.fixture(autouse=True)
def restore_flags():
    saved = dict(cuda_backends._sdp, priority=list(cuda_backends._sdp["priority"]))
    yield
    cuda_backends._sdp.clear()
    cuda_backends._sdp.update(saved)


def test_sdpbackend_has_torch_2_13s_members_and_values():
    assert [(m.name, int(m)) for m in SDPBackend] == [
        ("ERROR", -1), ("MATH", 0), ("FLASH_ATTENTION", 1), ("EFFICIENT_ATTENTION", 2),
        ("CUDNN_ATTENTION", 3), ("OVERRIDEABLE", 4)]
    assert SDPBackend.MATH != 0                     # as torch's pybind11 enum
    assert nv.nn.attention.SDPBackend is nv.backends.cuda.SDPBackend


def test_sdpa_kernel_sets_the_flags_inside_and_restores_them_after():
    assert _flags() == dict.fromkeys(GETTERS, True)
    with sdpa_kernel(SDPBackend.MATH) as ctx:
        assert ctx == {}
        assert _flags() == {"flash": False, "mem_efficient": False, "math": True,
                            "cudnn": False}
        with sdpa_kernel([SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION,
                          SDPBackend.FLASH_ATTENTION]):
            assert _flags() == {"flash": True, "mem_efficient": True, "math": False,
                                "cudnn": False}
        assert _flags()["math"] and not _flags()["flash"]
    assert _flags() == dict.fromkeys(GETTERS, True)
    with pytest.raises(KeyError):                   # restored on an exception too
        with sdpa_kernel([]):
            assert not any(_flags().values())
            raise KeyError("x")
    assert _flags() == dict.fromkeys(GETTERS, True)


def test_sdpa_kernel_checks_its_argument_as_torch_does():
    for bad, name in (((SDPBackend.MATH,), "tuple"), ("math", "str"), (None, "NoneType")):
        with pytest.raises(AssertionError, match=f"Backend must be an instance of "
                                                 f"SDPBackend or a list .* got {name}"):
            with sdpa_kernel(bad):
                pass
    with sdpa_kernel([0, "x", SDPBackend.MATH]):   # other elements enable nothing
        assert _flags() == {"flash": False, "mem_efficient": False, "math": True,
                            "cudnn": False}


def test_set_priority_orders_the_backends_and_is_restored():
    assert cuda_backends._sdp["priority"] == [1, 2, 0, 3, 4]   # torch's default order
    with sdpa_kernel([SDPBackend.CUDNN_ATTENTION, SDPBackend.MATH], set_priority=True):
        assert cuda_backends._sdp["priority"] == [3, 0, 1, 2, 4]   # torch 2.13's result
    assert cuda_backends._sdp["priority"] == [1, 2, 0, 3, 4]


def test_the_enable_functions_take_a_bool_only():
    for enable, name in ((cuda_backends.enable_flash_sdp, "flash"),
                         (cuda_backends.enable_mem_efficient_sdp, "mem_efficient"),
                         (cuda_backends.enable_math_sdp, "math"),
                         (cuda_backends.enable_cudnn_sdp, "cudnn")):
        enable(False)
        assert _flags()[name] is False
        enable(True)
        assert _flags()[name] is True
        for bad, kind in ((0, "int"), ("x", "str"), (None, "NoneType"), (1.0, "float"),
                          (np.bool_(True), "numpy.bool"), (nv.tensor(True), "Tensor")):
            with pytest.raises(RuntimeError, match=f"{enable.__name__} expects a bool, "
                                                   f"but got {kind}"):
                enable(bad)
    cuda_backends.allow_fp16_bf16_reduction_math_sdp(False)
    assert not cuda_backends.fp16_bf16_reduction_math_sdp_allowed()


def test_deprecated_sdp_kernel_warns_and_maps_to_sdpa_kernel():
    with pytest.warns(FutureWarning, match="sdp_kernel\\(\\)` is deprecated"):
        with cuda_backends.sdp_kernel(enable_flash=False, enable_mem_efficient=False):
            assert _flags() == {"flash": False, "mem_efficient": False, "math": True,
                                "cudnn": True}
    assert _flags() == dict.fromkeys(GETTERS, True)


def test_attention_computes_the_same_whatever_is_selected():
    nv.manual_seed(0)
    q, k, v = (nv.randn(1, 2, 5, 8) for _ in range(3))
    expected = F.scaled_dot_product_attention(q, k, v, is_causal=True).numpy()
    for backends in (SDPBackend.MATH, SDPBackend.FLASH_ATTENTION, []):
        with sdpa_kernel(backends):
            got = F.scaled_dot_product_attention(q, k, v, is_causal=True).numpy()
        np.testing.assert_array_equal(got, expected)


def test_the_enum_and_defaults_match_torch():
    torch = pytest.importorskip("torch")
    from torch.nn.attention import SDPBackend as TorchSDPBackend
    assert [(m.name, int(m)) for m in SDPBackend] == sorted(
        ((m.name, int(m)) for m in TorchSDPBackend.__members__.values()), key=lambda p: p[1])
    assert torch._C._get_sdp_priority_order() == cuda_backends._sdp["priority"]
