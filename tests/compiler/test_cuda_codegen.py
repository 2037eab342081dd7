"""CUDA C codegen without a GPU: generated sources read as intended, compile with NVRTC
for sm_80, sm_86 and sm_90 without register spills, and the GEMM's SASS runs on tensor
cores. Compile checks skip when NVRTC (the ``nvidia-cuda-nvrtc`` wheel) is absent;
distinct sources compile once per architecture and land in the cubin cache."""
from __future__ import annotations

import os
import re

import numpy as np
import pytest

import nova as nv
from nova.compiler.targets.cuda.codegen import generate, write_sources
from nova.compiler.targets.cuda.device import SM80, SM86, SM90, SPECS
from nova.compiler.lowering.plan import contraction
from nova.compiler.lowering.views import operand_view, view_strides
from nova.runtime import nvrtc
from tests.compiler.cuda_cases import _graph, cases_of, gpt_step, representative

F = nv.nn.functional
ARCHS = sorted(SPECS)
needs_nvrtc = pytest.mark.skipif(not nvrtc.available(),
                                 reason="NVRTC not installed (pip install nvidia-cuda-nvrtc)")


def _plans(*tensors):
    return [c.plan for c in cases_of(_graph(*tensors))]


def _t(*shape, dtype=np.float32):
    rng = np.random.default_rng(len(shape))
    return nv.tensor(rng.standard_normal(shape).astype(dtype))


def _body(source: str) -> str:
    """The kernel itself, without the shared prelude of helpers."""
    return source[source.index('extern "C" __global__'):]


def _compile_all(plans, arch: str) -> dict[str, tuple]:
    """Compile each distinct generated source once; {source digest: (plan, kernel, out)}."""
    spec = SPECS[arch]
    done: dict[str, tuple] = {}
    for plan in plans:
        k = generate(plan, spec)
        if k.digest in done:
            continue
        out = nvrtc.compile(k.source, arch, name=f"{plan.name}.cu", entry=k.entry)
        done[k.digest] = (plan, k, out)
    return done


def _no_spills(compiled: dict[str, tuple]) -> None:
    bad = [f"{p.describe()}: {out.ptxas}" for p, _, out in compiled.values() if out.ptxas.spills
           or out.ptxas.stack_bytes]
    assert not bad, "register spills:\n" + "\n".join(bad)


# ---------------------------------------------------------------- reading the source

def test_golden_softmax_row_kernel():
    (plan,) = _plans(F.softmax(_t(64, 128), dim=-1))
    k = generate(plan, SM80)
    src = k.source
    assert k.entry == plan.name and k.arg_order == ("in0", "out")
    assert (k.grid, k.block, k.shared_bytes) == ((8, 1, 1), (256, 1, 1), 0)
    assert f'extern "C" __global__ void __launch_bounds__(256)\n{plan.name}(const float* in0, ' \
           'float* out) {' in src
    # a warp per row, grid-stride over rows
    assert "const int lane = threadIdx.x & 31;" in src
    assert "for (i64 row = (((i64)blockIdx.x * blockDim.x + threadIdx.x) >> 5); row < 64LL; " \
           "row += ((i64)gridDim.x * (blockDim.x >> 5))) {" in src
    # pass 1: max (float32, NaN-propagating), pass 2: sum of exp in float64, each closed
    # by a butterfly of shuffles; then the output pass
    assert "float acc0 = -__int_as_float(0x7f800000);" in src
    assert "double acc1 = 0.0;" in src
    assert src.count("for (int o = 16; o > 0; o >>= 1)") == 2
    assert "acc0 = nv_max(acc0, __shfl_xor_sync(0xffffffffu, acc0, o));" in src
    assert "acc1 = (acc1 + __shfl_xor_sync(0xffffffffu, acc1, o));" in src
    assert re.search(r"= \(v\d+ - red\d+\);\n.*= expf\(v\d+\);", src)
    assert "out[o" in src and "for (i64 j = lane; j < 128LL; j += 32)" in src
    assert "#include" not in src          # NVRTC needs no headers


def test_golden_vectorized_elementwise():
    a, b = _t(64, 256), _t(256)
    (plan,) = _plans((a * 2.0 + b).tanh() * a)
    k = generate(plan, SM90)
    body = _body(k.source)
    assert (k.config.vec, k.block, k.grid) == (4, (256, 1, 1), (16, 1, 1))  # 16384 / 1024
    assert "for (i64 base = ((i64)blockIdx.x * blockDim.x + threadIdx.x) * 4; base < 16384LL; " \
           "base += (i64)gridDim.x * blockDim.x * 4) {" in body
    # a (output-shaped) in one 16-byte load, read twice from registers; b broadcast per
    # element through the 32-bit index arithmetic; one 16-byte store
    assert "*reinterpret_cast<uint4*>(va0) = *reinterpret_cast<const uint4*>(in0 + base);" in body
    assert body.count("va0[u]") == 1 and "in1[(x" in body and "% 256u" in body
    assert "*reinterpret_cast<uint4*>(out + base) = *reinterpret_cast<uint4*>(vo);" in body


def test_golden_tf32_gemm_with_bias_epilogue():
    x, w, b = _t(64, 96), _t(96, 128), _t(128)
    (plan,) = _plans(F.gelu(x @ w + b))
    k = generate(plan, SM90)
    src = k.source
    g = k.config.gemm
    assert (g.bm, g.bn, g.bk, g.stages) == (32, 32, 32, 3)
    assert "operands A row, B row" in src.splitlines()[1]
    # cp.async ring: 16-byte copies with zero fill at the edges, 3 stages
    assert "nv_cp_async16(sA + r * 36 + cc, src, ok ? 16 : 0);" in src
    assert "nv_cp_async16(sB + r * 40 + cc, src, ok ? 16 : 0);" in src
    assert "nv_cp_async_wait<1>();" in src and "nv_cp_async_commit();" in src
    # fragments per the PTX ISA m16n8k8 .tf32 layout, then the mma
    assert "af[i][1] = nv_tf32(tA[(r + 8) * 36 + (kk + tig + 0)]);" in src
    assert "af[i][2] = nv_tf32(tA[(r + 0) * 36 + (kk + tig + 4)]);" in src
    assert "bf[j][1] = nv_tf32(tB[(kk + tig + 4) * 40 + (c)]);" in src
    assert "nv_mma_tf32(acc[i][j], af[i], bf[j]);" in src
    assert "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32" in src
    # accumulators parked in shared memory per the C fragment layout, then one rolled,
    # coalesced epilogue loop: bias, then gelu's erf, stored once
    assert "sC[(wm * 16 + i * 16 + gid + (r >> 1) * 8) * 36 + wn * 16 + j * 8 + tig * 2 + " \
           "(r & 1)] = acc[i][j][r];" in src
    assert "for (int c = threadIdx.x; c < 1024; c += 128) {" in src
    epilogue = src[src.index("const float mm"):]
    assert "= sC[r * 36 + cc];" in src[src.index("const float mm") - 60:]
    assert "in2[" in epilogue and "erff(" in epilogue and "out[o" in epilogue
    assert epilogue.count("erff(") == 1


def test_operand_views_pick_cp_async_layouts():
    assert view_strides((4, 6), (6, 1), (2, 2, 6)) == (12, 6, 1)
    assert view_strides((4, 6), (1, 4), (24,)) is None          # merging across a transpose
    assert view_strides((4, 6), (1, 4), (4, 2, 3)) == (1, 12, 4)
    x, w = _t(2, 8, 16), _t(24, 16)
    (plan,) = _plans(x @ w.transpose(0, 1))       # a linear layer: the batch folds into M
    mm = contraction(plan.fusion)
    assert operand_view(mm.operands[0])[1:] == ((16, 1), 0)     # A = x reshaped, in place
    assert operand_view(mm.operands[1])[1:] == ((1, 16), 0)     # B = W^T
    assert "operands A row, B col" in generate(plan, SM80).source.splitlines()[1]
    (batched,) = _plans(x @ _t(1, 24, 16).transpose(1, 2))     # B broadcast over the batch
    mm = contraction(batched.fusion)
    assert operand_view(mm.operands[1])[1:] == ((0, 1, 16), 0)
    assert "operands A row, B col" in generate(batched, SM80).source.splitlines()[1]
    (odd,) = _plans(_t(5, 7) @ _t(7, 9))          # rows of 7 floats: not 16-byte aligned
    assert "operands A gen, B gen" in generate(odd, SM80).source.splitlines()[1]


def test_every_dtype_generates():
    for name, cases in representative().items():
        for c in cases:
            src = generate(c.plan, SM80).source
            assert c.plan.name in src, name
    (f16,) = [c.plan for c in representative()["f16_elementwise"]]
    body = _body(generate(f16, SM80).source)
    assert "unsigned short* out" in body and "nv_f16_store(" in body
    assert "nv_f16_round(" in body                 # rounded after every op
    (bf16,) = [c.plan for c in representative()["bf16_rows"]]
    body = _body(generate(bf16, SM86).source)
    assert "nv_bf16_round(" in body and "nv_bf16_store(" in body
    f64 = next(c.plan for c in representative()["f64_matmul"])
    k = generate(f64, SM90)
    assert k.config.strategy == "simt" and "__shared__ double sA[16][17]" in k.source
    scatter = [c.plan for c in representative()["embedding_backward"]][-1]
    body = _body(generate(scatter, SM90).source)
    assert "atomic" not in body and "nv_fail(); continue;" in body
    # int8/uint8/int16: stored as such, computed in int, wrapped after every op
    u8_avg, mixed, u8_max = [c.plan for c in representative()["small_ints"]][:3]
    body = _body(generate(u8_avg, SM80).source)
    assert "const unsigned char* in0" in body and "((int)va0[u])" in body
    assert "((int)(unsigned char)(((int)(v4 + v5))))" in body       # (a + b) wraps before // 2
    assert "const signed char* in1, short* out" in _body(generate(mixed, SM80).source)
    assert "((int)(unsigned char)(acc0))" in _body(generate(u8_max, SM80).source)


def test_empty_outputs_launch_nothing_and_empty_contractions_give_zeros():
    (empty,) = _plans(_t(0, 4) @ _t(4, 3))
    k = generate(empty, SM80)
    assert k.grid == (1, 1, 1) and k.shared_bytes == 0
    assert "// empty output: nothing to compute" in _body(k.source)
    (k0,) = _plans(_t(4, 0) @ _t(0, 3))           # K = 0: no k tiles, the epilogue stores 0
    body = _body(generate(k0, SM80).source)
    assert "const int KT = 0;" in body and "out[o" in body


def test_write_sources_for_reading(tmp_path):
    plans = [c.plan for c in representative()["f32_attention"]]
    paths = write_sources(plans, SM90, str(tmp_path))
    assert [os.path.basename(p) for p in paths] == [f"{p.name}.sm_90.cu" for p in plans]
    with open(paths[0]) as f:
        text = f.read()
    assert text.startswith(f"// {plans[0].name}: matmul/") and "// batch=8 M=32 N=32 K=16" in text


def test_missing_nvrtc_is_a_clear_error(monkeypatch):
    monkeypatch.setenv("NOVA_NVRTC", "/nonexistent/libnvrtc.so.13")
    assert nvrtc.find_library() is None
    nvrtc._lib.cache_clear()
    try:
        assert not nvrtc.available()
        with pytest.raises(nvrtc.NvrtcUnavailable, match="pip install 'nvidia-cuda-nvrtc"):
            nvrtc.compile("", "sm_90")
    finally:
        monkeypatch.delenv("NOVA_NVRTC")
        nvrtc._lib.cache_clear()


# ---------------------------------------------------------------- NVRTC

@needs_nvrtc
@pytest.mark.parametrize("arch", ARCHS)
def test_representative_kernels_compile_without_spills(arch):
    plans = [c.plan for cases in representative().values() for c in cases]
    compiled = _compile_all(plans, arch)
    kinds = {(p.kind, k.config.strategy) for p, k, _ in compiled.values()}
    assert kinds >= {("elementwise", "grid_stride"), ("rows", "warp_per_row"),
                     ("rows", "block_per_row"), ("reduce", "warp_per_row"),
                     ("reduce", "block_per_row"), ("reduce", "column"),
                     ("matmul", "mma_tf32"), ("matmul", "simt"), ("scatter", "lines")}
    _no_spills(compiled)


@needs_nvrtc
@pytest.mark.parametrize("arch", ARCHS)
def test_gpt_training_step_kernels_compile_without_spills(arch):
    cases = gpt_step()
    assert len(cases) > 100
    compiled = _compile_all([c.plan for c in cases], arch)
    kinds = {p.kind for p, _, _ in compiled.values()}
    assert kinds == {"elementwise", "reduce", "rows", "matmul", "scatter"}
    _no_spills(compiled)
    gemms = [(k, out) for p, k, out in compiled.values() if p.kind == "matmul"]
    assert all(k.config.strategy == "mma_tf32" for k, _ in gemms)
    assert max(out.ptxas.registers for _, out in gemms) <= 128


@needs_nvrtc
@pytest.mark.parametrize("arch", ARCHS)
def test_large_gemms_fit_the_register_estimate(arch):
    """Big tiles (128x128 with 8 warps; 128x64 and 64x64 with 4) with a fused epilogue:
    no spills, and registers within the configurator's estimate, so the occupancy it
    derived from that estimate holds."""
    x, w, b = _t(2048, 1024), _t(1024, 4096), _t(4096)
    for plan in (_plans(F.gelu(x @ w + b))[0], _plans(_t(1024, 1024) @ _t(1024, 1024))[0]):
        k = generate(plan, SPECS[arch])
        out = nvrtc.compile(k.source, arch, entry=k.entry)
        assert out.ptxas.spills == 0 and out.ptxas.stack_bytes == 0, out.ptxas
        assert out.ptxas.registers <= k.config.gemm.regs_estimate, (k.config.derivation,
                                                                   out.ptxas)


@needs_nvrtc
@pytest.mark.skipif(nvrtc.find_tool("nvdisasm") is None,
                    reason="nvdisasm not installed (pip install nvidia-cuda-nvdisasm)")
@pytest.mark.parametrize("arch", ARCHS)
def test_sass_tf32_tensor_cores_async_copies_and_vector_accesses(arch):
    (plan,) = _plans(_t(128, 256) @ _t(256, 192))
    k = generate(plan, SPECS[arch])
    sass = nvrtc.sass(nvrtc.compile(k.source, arch, entry=k.entry).cubin)
    assert re.search(r"HMMA\.1688\.F32\.TF32", sass), "no TF32 tensor-core instruction"
    assert "LDGSTS" in sass            # cp.async
    assert "DEPBAR" in sass            # cp.async.wait_group
    (ew,) = _plans(_t(64, 256).exp() * _t(64, 256))
    k = generate(ew, SPECS[arch])
    sass = nvrtc.sass(nvrtc.compile(k.source, arch, entry=k.entry).cubin)
    assert "LDG.E.128" in sass and "STG.E.128" in sass    # 16-byte vector accesses


@needs_nvrtc
def test_nvrtc_errors_name_the_file_and_ptxas_stats():
    with pytest.raises(nvrtc.NvrtcError, match=r"broken_kernel\.cu"):
        nvrtc.compile('extern "C" __global__ void f(float* x) { x[0] = y; }', "sm_80",
                      name="broken_kernel.cu", cache=False)
    out = nvrtc.compile('extern "C" __global__ void f(float* x) { x[threadIdx.x] = 1.0f; }',
                        "sm_86", cache=False, entry="f")
    assert out.cubin and out.ptxas.registers > 0 and out.ptxas.spills == 0
    assert "Compiling entry function 'f' for 'sm_86'" in out.log
    assert nvrtc.version() >= (13, 0)


@needs_nvrtc
def test_cubin_cache_hits_and_survives_corruption(tmp_path, monkeypatch):
    monkeypatch.setenv("NOVA_CACHE_DIR", str(tmp_path))
    src = 'extern "C" __global__ void g(int* x) { x[0] = 42; }'
    first = nvrtc.compile(src, "sm_90")
    second = nvrtc.compile(src, "sm_90")
    assert not first.from_cache and second.from_cache and second.cubin == first.cubin
    assert second.ptxas == first.ptxas
    (entry,) = [os.path.join(d, f) for d, _, fs in os.walk(tmp_path) for f in fs]
    with open(entry, "r+b") as f:
        f.seek(-3, os.SEEK_END)
        f.write(b"xyz")
    third = nvrtc.compile(src, "sm_90")
    assert not third.from_cache and third.cubin == first.cubin
    assert nvrtc.compile(src, "sm_80").cubin != first.cubin      # keyed by architecture
