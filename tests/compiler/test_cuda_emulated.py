"""Generated CUDA kernels run on the CPU emulator (``cuda_emulator``) against the
interpreter: the index arithmetic, reductions, shuffles, the GEMM's shared-memory ring
and tensor-core fragment mapping, without a GPU. GEMMs run twice: with the sm_80 spec
(small problems pick 32x32 tiles), with sm_90 (whose larger shared memory gives the
deep-K case a 4-stage ring) and with a one-SM spec, which makes the configurator pick
its largest 128x128 tile (8 warps, 4x4 mma tiles per warp)."""
from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import replace

import numpy as np
import pytest

from nova.compiler.targets.cuda.codegen import generate
from nova.compiler.targets.cuda.device import SM80, SM90
from tests.compiler.cuda_cases import (
    assert_matches,
    from_storage,
    gpt_step,
    representative,
    storage_view,
)

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++ (C++20)")
ONE_SM = replace(SM80, name="one-SM", sms=1)


GUARD = 4096          # bytes of canary around every buffer
CANARY = 0xA5          # a NaN pattern in every float width, and an odd integer


def _guarded(a: np.ndarray) -> tuple[np.ndarray, Callable[[], bool]]:
    """``a`` copied into the middle of a canary-filled byte buffer, 16-byte aligned as
    CUDA allocations are: reads past its ends see 0xA5 bytes (NaN in every float width),
    which corrupts the result, and writes past them change the canaries, which the
    returned check sees."""
    raw = np.full(a.nbytes + 2 * GUARD + 16, CANARY, np.uint8)
    start = GUARD + (-(raw.ctypes.data + GUARD)) % 16
    view = raw[start:start + a.nbytes].view(a.dtype).reshape(a.shape)
    view[...] = a
    end = start + a.nbytes

    def intact() -> bool:
        return bool((raw[:start] == CANARY).all() and (raw[end:] == CANARY).all())
    return view, intact


def _run(cases, specs) -> list[str]:
    from tests.compiler.cuda_emulator import Emulator

    jobs = []
    for i, c in enumerate(cases):
        for j, spec in enumerate(specs if c.plan.kind == "matmul" else specs[:1]):
            jobs.append((f"_{i}_{j}", generate(c.plan, spec), c))
    emu = Emulator([(key, k, c.plan) for key, k, c in jobs])
    failures = []
    for key, k, c in jobs:
        out, out_intact = _guarded(np.zeros_like(storage_view(c.expected)))
        scratch = None
        if c.plan.scratch is not None:
            shape, dtype = c.plan.scratch
            scratch = np.zeros(shape, storage_view(np.zeros(0, dtype.np)).dtype)
        inputs = [_guarded(storage_view(x))[0] for x in c.inputs]
        error = emu.run(key, k, c.plan, inputs, out, scratch)
        try:
            assert error == 0, "error flag set"
            assert out_intact(), "wrote outside its output buffer"
            assert_matches(c, from_storage(out, c.expected))
        except AssertionError as e:
            failures.append(f"{k.config.strategy} {c.plan.describe()}: {str(e)[:600]}")
    return failures


def test_representative_kernels_match_the_interpreter():
    cases = [c for cs in representative().values() for c in cs]
    deep = generate(representative()["f32_matmul_deep_k"][0].plan, SM90).config.gemm
    assert deep.stages == 4
    failures = _run(cases, [SM80, SM90, ONE_SM])
    assert not failures, "\n\n".join(failures)


@pytest.mark.slow
def test_gpt_step_kernels_match_the_interpreter():
    seen, cases = set(), []
    for c in gpt_step():
        if c.plan.name not in seen:
            seen.add(c.plan.name)
            cases.append(c)
    failures = _run(cases, [SM80])   # big tiles: the representative GEMMs
    assert not failures, "\n\n".join(failures)


def test_tf32_gemm_relative_error_against_float64():
    """The emulated tensor-core GEMM (tf32 operands rounded to nearest, ties away;
    float32 accumulation) is within 5e-4 of a float64 product in Frobenius norm, the
    bound the GPU test checks on large shapes."""
    import nova as nv
    from tests.compiler.cuda_cases import _graph, cases_of
    from tests.compiler.cuda_emulator import Emulator

    rng = np.random.default_rng(1)
    a = rng.standard_normal((256, 384)).astype(np.float32)
    b = rng.standard_normal((384, 320)).astype(np.float32)
    (case,) = cases_of(_graph(nv.tensor(a) @ nv.tensor(b)))
    k = generate(case.plan, SM80)
    out = np.zeros((256, 320), np.float32)
    assert Emulator([("_tf32", k, case.plan)]).run("_tf32", k, case.plan, [a, b], out) == 0
    ref = a.astype(np.float64) @ b.astype(np.float64)
    err = np.linalg.norm(out - ref) / np.linalg.norm(ref)
    assert 1e-5 < err < 5e-4      # TF32, not float32 (~1e-7), and not worse
