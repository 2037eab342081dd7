"""Generated kernels launched on a GPU (``cupy.RawModule``) against the interpreter:
every representative kernel and every kernel of a tiny-GPT AdamW step, on the inputs
the kernel sees in that program. Marked ``cuda``: skipped without a GPU."""
from __future__ import annotations

import os
import tempfile

import numpy as np
import pytest

from nova.compiler.targets.cuda.codegen import generate
from nova.compiler.targets.cuda.device import from_device
from nova.runtime import nvrtc
from tests.compiler.cuda_cases import (
    all_cases,
    assert_matches,
    from_storage,
    storage_view,
)

pytestmark = pytest.mark.cuda

CASES = all_cases()


def _launch(case):
    import cupy

    spec = from_device()
    k = generate(case.plan, spec)
    compiled = nvrtc.compile(k.source, spec.arch, name=f"{k.name}.cu", entry=k.entry)
    with tempfile.NamedTemporaryFile(suffix=".cubin", delete=False) as f:
        f.write(compiled.cubin)
    try:
        module = cupy.RawModule(path=f.name)
        fn = module.get_function(k.entry)
    finally:
        os.unlink(f.name)
    if k.shared_bytes > spec.smem_per_block:
        fn.max_dynamic_shared_size_bytes = k.shared_bytes
    flag = module.get_global("nova_error_flag")
    zero = np.zeros(1, np.int32)          # kept alive until the copy is done
    flag.copy_from_host(zero.ctypes.data, 4)
    args = [cupy.asarray(storage_view(x)) for x in case.inputs]
    out = cupy.empty(case.expected.shape, storage_view(case.expected).dtype)
    args.append(out)
    if case.plan.scratch is not None:
        shape, dtype = case.plan.scratch
        args.append(cupy.zeros(shape, storage_view(np.zeros(0, dtype.np)).dtype))
    fn(k.grid, k.block, tuple(args), shared_mem=k.shared_bytes)
    cupy.cuda.runtime.deviceSynchronize()
    err = np.zeros(1, np.int32)
    flag.copy_to_host(err.ctypes.data, 4)
    return from_storage(cupy.asnumpy(out), case.expected), int(err[0])


def test_spec_from_the_device():
    import cupy

    spec = from_device()
    assert spec.arch == f"sm_{cupy.cuda.Device().compute_capability}"   # e.g. "90"
    assert spec.sms == cupy.cuda.Device().attributes["MultiProcessorCount"]
    assert spec.peak_tf32 > spec.peak_fp32 > 0 and spec.bandwidth > 1e11


@pytest.mark.parametrize("name", sorted(CASES))
def test_kernel_matches_interpreter_on_gpu(name):
    case = CASES[name]
    out, error = _launch(case)
    assert error == 0, f"{name}: kernel raised nova_error_flag"
    assert_matches(case, out)


@pytest.mark.parametrize("m,k,n", [(1024, 1024, 1024), (4096, 768, 2304), (1000, 333, 517)])
def test_tf32_gemm_relative_error_against_float64(m, k, n):
    """TF32 (10-bit mantissa, unit roundoff 2^-11 = 4.9e-4) with float32 accumulation:
    the Frobenius-norm relative error against a float64 product stays below 5e-4 on
    random data (rounding errors of the inputs average out over K)."""
    import nova as nv
    from tests.compiler.cuda_cases import Case, _graph, cases_of

    rng = np.random.default_rng(0)
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    (case,) = cases_of(_graph(nv.tensor(a) @ nv.tensor(b)))
    ref = a.astype(np.float64) @ b.astype(np.float64)
    out, error = _launch(Case(case.plan, [a, b], ref.astype(np.float32)))
    assert error == 0
    assert np.linalg.norm(out - ref) / np.linalg.norm(ref) < 5e-4
