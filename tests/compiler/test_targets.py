"""Compilation targets: the same IR fused and planned for the CPU and for CUDA, and what
each target's plans may depend on (the CPU's on the CPU spec, CUDA's on nothing of the
host)."""
import dataclasses
import math
import sys

import numpy as np
import pytest

import nova as nv
from nova.compiler import pipeline
from nova.compiler.targets.cuda.codegen import generate
from nova.compiler.targets.cuda.configurator import configure
from nova.compiler.targets.cuda.device import SM80, SM90
from nova.compiler.targets.cpu.device import CpuSpec
from nova.compiler.lowering.plan import plan_kernels
from nova.compiler.passes.fusion import fuse
from nova.compiler.targets import FusionPolicy, Target, get_target
from nova.compiler.targets.cpu import CpuTarget
from nova.compiler.targets.cuda import DEFAULT_SPEC, CudaTarget
from nova.tensor.realize import pending_graph
from tests.compiler.parsing import parse_module

AVX2 = CpuSpec("haswell-like", cores=4, isa="avx2", vector_bits=256, vector_registers=16,
               l1d=32 * 1024, l2=256 * 1024, l3=8 * 2**20, ghz=3.0)
AVX512 = CpuSpec("zen5-like", cores=16, isa="avx512", vector_bits=512, vector_registers=32,
                 l1d=48 * 1024, l2=2**20, l3=32 * 2**20, ghz=2.5)

LINEAR_EXP = """\
builtin.module {
  func.func @step(%x: tensor<4x8xf32>, %w: tensor<8x16xf32>, %b: tensor<16xf32>) -> (tensor<4x16xf32>) {
    %mm = nova.matmul %x, %w : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
    %bb = nova.broadcast_in_dim %b dims = [1] : tensor<16xf32> -> tensor<4x16xf32>
    %h = nova.add %mm, %bb : tensor<4x16xf32>
    %e = nova.exp %h : tensor<4x16xf32>
    func.return %e : tensor<4x16xf32>
  }
}"""

# The CPU's GEMM epilogue runs element by element outside the vectorized loops, so the
# Expensive exp (and the bias add it reads, in the same pass) leaves it.
LINEAR_EXP_CPU = """\
builtin.module {
  func.func @step(%0: tensor<4x8xf32>, %1: tensor<8x16xf32>, %2: tensor<16xf32>) -> tensor<4x16xf32> {
    %3 = "nova.fusion"(%0, %1) <{kind = "matmul"}> ({
    ^bb0(%4: tensor<4x8xf32>, %5: tensor<8x16xf32>):
      %mm = nova.matmul %4, %5 : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
      nova.yield %mm : tensor<4x16xf32>
    }) : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
    %6 = "nova.fusion"(%2, %3) <{kind = "elementwise"}> ({
    ^bb0(%7: tensor<16xf32>, %8: tensor<4x16xf32>):
      %bb = nova.broadcast_in_dim %7 dims = [1] : tensor<16xf32> -> tensor<4x16xf32>
      %h = nova.add %8, %bb : tensor<4x16xf32>
      %e = nova.exp %h : tensor<4x16xf32>
      nova.yield %e : tensor<4x16xf32>
    }) : (tensor<16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
    func.return %6 : tensor<4x16xf32>
  }
}"""

# The CUDA epilogue is a coalesced loop of threads: exp stays in the matmul kernel.
LINEAR_EXP_CUDA = """\
builtin.module {
  func.func @step(%0: tensor<4x8xf32>, %1: tensor<8x16xf32>, %2: tensor<16xf32>) -> tensor<4x16xf32> {
    %3 = "nova.fusion"(%0, %1, %2) <{kind = "matmul"}> ({
    ^bb0(%4: tensor<4x8xf32>, %5: tensor<8x16xf32>, %6: tensor<16xf32>):
      %mm = nova.matmul %4, %5 : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
      %bb = nova.broadcast_in_dim %6 dims = [1] : tensor<16xf32> -> tensor<4x16xf32>
      %h = nova.add %mm, %bb : tensor<4x16xf32>
      %e = nova.exp %h : tensor<4x16xf32>
      nova.yield %e : tensor<4x16xf32>
    }) : (tensor<4x8xf32>, tensor<8x16xf32>, tensor<16xf32>) -> tensor<4x16xf32>
    func.return %3 : tensor<4x16xf32>
  }
}"""


def test_the_same_module_fuses_differently_exactly_where_exp_lands():
    module = parse_module(LINEAR_EXP)
    assert str(fuse(module, "cpu")) == LINEAR_EXP_CPU
    assert str(fuse(module, "cuda")) == LINEAR_EXP_CUDA
    # A Target and its name fuse the same; the policy is what decides.
    assert str(fuse(module, CudaTarget(SM80))) == LINEAR_EXP_CUDA
    assert str(fuse(module, CpuTarget(AVX2))) == LINEAR_EXP_CPU


def test_fusion_policies():
    module = parse_module(LINEAR_EXP)
    fn = next(iter(module.ops))
    ops = {op.results[0].name_hint: op for op in fn.body.block.ops if op.results}
    cpu, cuda = get_target("cpu").fusion_policy, get_target("cuda").fusion_policy
    assert cpu == FusionPolicy(expensive_epilogues=False, operand_prologues=True)
    assert cuda.expensive_epilogues and not cuda.operand_prologues
    assert not cpu.epilogue_admits(ops["e"]) and cpu.epilogue_admits(ops["h"])
    assert cuda.epilogue_admits(ops["e"]) and cuda.epilogue_admits(ops["h"])


def test_registry_resolves_names_and_passes_targets_through():
    assert isinstance(get_target("cpu"), CpuTarget) and get_target("cpu").name == "cpu"
    assert isinstance(get_target("cuda"), CudaTarget) and get_target("cuda").spec() is DEFAULT_SPEC
    assert get_target("cuda", spec=SM80).spec() is SM80
    assert get_target("cpu", spec=AVX2).spec() is AVX2
    with pytest.raises(ValueError, match="unknown target 'tpu'; valid targets are cpu, cuda"):
        get_target("tpu")
    with pytest.raises(ValueError, match="plan_kernels: unknown target 'tpu'"):
        plan_kernels(fuse(parse_module(LINEAR_EXP)), "tpu")
    target = CudaTarget(SM80)
    assert pipeline.compile_step(parse_module(LINEAR_EXP), target).target == "cuda"
    with pytest.raises(TypeError):
        Target()   # the interface itself has no implementation


def _program():
    """An MLP-ish step with one kernel of every CPU-refined kind: an elementwise kernel
    (unrolled), a row reduction (unrolled), a float32 matmul (tiled), a softmax (rows)
    and a column reduction."""
    rng = np.random.default_rng(0)
    x = nv.tensor(rng.standard_normal((64, 48)).astype(np.float32))
    w = nv.tensor(rng.standard_normal((48, 96)).astype(np.float32))
    h = x @ w
    return pipeline.front(pending_graph((x * 2 + 1).sqrt(), h.sum(-1),
                                        nv.nn.functional.softmax(h, dim=-1), h.sum(0)))


def _pin_host_cpu(monkeypatch, spec: CpuSpec) -> None:
    """Make ``spec`` the host CPU for every compiler module that reads ``detect_cpu``."""
    for name, module in list(sys.modules.items()):
        if name.startswith("nova.compiler") and hasattr(module, "detect_cpu"):
            monkeypatch.setattr(module, "detect_cpu", lambda: spec)


def test_cuda_plans_and_sources_do_not_depend_on_the_host_cpu(monkeypatch):
    """The same module lowered for CUDA on two hosts (pinned CPU specs as different as
    AVX2 on 4 cores and AVX-512 on 16) gives the same kernel names and the same CUDA C;
    lowered for the CPU, the same two hosts give different plans, so the pinning took."""
    module = _program()
    lowered = {}
    for spec in (AVX2, AVX512):
        _pin_host_cpu(monkeypatch, spec)
        cuda = pipeline.compile_step(module, "cuda")
        cpu = pipeline.compile_step(module, "cpu")
        lowered[spec.name] = (cuda.plans, [generate(p, SM90).source for p in cuda.plans],
                              cpu.plans)
    (cuda_a, src_a, cpu_a), (cuda_b, src_b, cpu_b) = lowered.values()
    assert [p.name for p in cuda_a] == [p.name for p in cuda_b]
    assert [p.describe() for p in cuda_a] == [p.describe() for p in cuda_b]
    assert src_a == src_b
    assert all("-bound" not in p.describe() and not p.schedule.unroll and
               p.schedule.strategy != "tiled" for p in cuda_a)
    assert [p.schedule for p in cpu_a] != [p.schedule for p in cpu_b]
    # CPU names follow the schedule: equal exactly where the two hosts' schedules are.
    assert all((a.name == b.name) == (a.schedule == b.schedule) for a, b in zip(cpu_a, cpu_b))


def test_cpu_plans_are_configured_from_the_cpu_spec():
    """Unroll = min(latency 4 x 2 units, registers / 4): 4 on AVX2, 8 on AVX-512 (for
    kernels without inline polynomial math, which runs 2: ``configurator.loop_unroll``);
    the GEMM's register tile is (16 - 3) // 2 = 6 x 2 x 8 lanes on AVX2 and 14 x 32 on
    AVX-512. The neutral plan (what CUDA gets) has neither; a CPU plan's name is a digest
    of its schedule, so the kernel cache never confuses the two hosts' kernels."""
    fused = fuse(_program(), "cpu")
    by_spec = {}
    for spec in (AVX2, AVX512):
        plans = plan_kernels(fused, CpuTarget(spec))
        by_spec[spec.name] = {p.schedule.strategy: p for p in plans}
    avx2, avx512 = by_spec["haswell-like"], by_spec["zen5-like"]
    assert (avx2["elementwise"].schedule.unroll, avx512["elementwise"].schedule.unroll) == (4, 8)
    assert (avx2["row"].schedule.unroll, avx512["row"].schedule.unroll) == (4, 8)
    assert avx2["tiled"].schedule.tile[:2] == (6, 16)
    assert avx512["tiled"].schedule.tile[:2] == (14, 32)
    assert all(p.schedule.bound in ("memory", "compute") for p in avx2.values())
    assert "column" in avx2 and "rows" in avx2
    for strategy in avx2:
        if strategy in ("elementwise", "row", "tiled"):
            assert avx2[strategy].name != avx512[strategy].name
    neutral = {p.schedule.strategy: p for p in plan_kernels(fused, "cuda")}
    assert "tiled" not in neutral and neutral["ikj"].schedule.loops == (64, 96, 48)
    # the CPU's elementwise kernel is flat (one loop over its elements); CUDA's keeps
    # the output's loop nest
    neutral_loops = neutral["elementwise"].schedule.loops
    assert avx2["elementwise"].schedule.flat and not neutral["elementwise"].schedule.flat
    assert neutral["elementwise"].schedule == dataclasses.replace(
        avx2["elementwise"].schedule, unroll=0, bound="", flat=False, loops=neutral_loops,
        vector_dim=len(neutral_loops) - 1)
    assert avx2["elementwise"].schedule.loops == (math.prod(neutral_loops),)


def test_the_default_cpu_target_reads_the_host_when_it_schedules(monkeypatch):
    _pin_host_cpu(monkeypatch, AVX512)
    assert get_target("cpu").spec() is AVX512
    (plan,) = pipeline.compile_step(pipeline.front(pending_graph(nv.ones(8, 300) * 3)), "cpu").plans
    assert plan.schedule.unroll == 8


def test_each_target_emits_its_code():
    module = parse_module(LINEAR_EXP)
    (cuda_plan,) = pipeline.compile_step(module, "cuda").plans
    target = CudaTarget(SM80)
    kernel = target.emit(cuda_plan)
    assert kernel.source == generate(cuda_plan, SM80).source
    assert target.configure(cuda_plan) == configure(cuda_plan, SM80) == kernel.config
    assert "// cuda sm_80: mma_tf32" in kernel.source and "expf" in kernel.source
    cpu = CpuTarget(AVX2)
    plans = pipeline.compile_step(module, cpu).plans
    text = cpu.emit(plans[0])
    assert f'define i32 @"{plans[0].name}"' in text or f"define i32 @{plans[0].name}" in text
