"""``Tensor.view(dtype)`` on the cuda engine: the generated CUDA C reinterprets bits with
CUDA's intrinsics (``__float_as_int`` ...; half floats through their stored 16 bits),
run on the emulator (and a GPU where there is one) against numpy's ``view``, and
compiled by NVRTC where the wheel is installed."""
import numpy as np
import pytest

import nova as nv
from nova.compiler.targets.cuda.codegen import generate
from nova.compiler.targets.cuda.device import SM80
from nova.runtime import nvrtc
from nova.tensor.realize import realize
from tests.compiler.test_cuda_codegen import _body, _plans, needs_nvrtc
from tests.runtime.test_cuda_ops import on_device  # noqa: F401 (the fixture)
from tests.tensor.test_view_dtype import NAMES, _buffer, _np


def _views(x):
    return {t: x.view(getattr(nv, t)) for t in NAMES}


@pytest.mark.parametrize("src", ["float32", "int64", "bfloat16", "uint8"])
def test_views_on_the_device_read_numpys_bits(src, on_device):
    a = _buffer().view(_np(src))
    views = _views(nv.tensor(a, device="cuda"))
    realize(*views.values())
    for t, v in views.items():
        want = a.view(_np(t))
        got = v.cpu().numpy()
        assert got.dtype == want.dtype and got.shape == want.shape, (src, t)
        np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8), err_msg=t)


def test_the_generated_source_uses_the_bit_intrinsics():
    x = nv.tensor(_buffer().view(np.float32))
    h = nv.tensor(_buffer())
    bodies = " ".join(_body(generate(p, SM80).source) for p in _plans(
        x.view(nv.int32), x.view(nv.int32).view(nv.float32), h.view(nv.int16),
        h.view(nv.bfloat16), x.view(nv.float64).view(nv.int64)))
    for intrinsic in ("__float_as_int(", "__int_as_float(", "__double_as_longlong(",
                      "nv_f16_store(", "nv_bf16_load((unsigned short)"):
        assert intrinsic in bodies, intrinsic


@needs_nvrtc
def test_bitcast_kernels_compile_with_nvrtc():
    x = nv.tensor(_buffer().view(np.float64))
    h = nv.tensor(_buffer())
    for plan in _plans(x.view(nv.int64), x.view(nv.int64).view(nv.float64),
                       h.view(nv.bfloat16), h.view(nv.int16).view(nv.float16)):
        k = generate(plan, SM80)
        nvrtc.compile(k.source, "sm_80", name=f"{plan.name}.cu", entry=k.entry)
