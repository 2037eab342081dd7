"""Golden IR for every compiler stage: each stage's input and output, written out.

For a few small programs this module shows, literally, what irgen records, what each
optimization pass (CSE, DCE, the ``nova.backward`` rule of ``simplify``, remat) makes of
its input, how fusion groups the result into ``nova.fusion`` kernels for the CPU and for
CUDA, and the plan line (``KernelPlan.describe()``, as ``CompiledStep.text()`` prints it)
of every kernel. Where the stages chain, one stage's golden is the next one's input
(``MLP_TRACE`` -> CSE -> ``MLP_NOVA`` -> fusion -> ``MLP_FUSED`` -> planning), so a
change anywhere in the pipeline fails at the stage that made it, with a unified diff.

Which parts of a plan line depend on the host CPU (``detect_cpu``: ISA, registers,
cores, caches, clock), and so are masked in ``test_plans_*_host_independent_parts``:

* the kernel name: a digest of the schedule, which holds every field below;
* ``memory-bound`` / ``compute-bound``: arithmetic intensity against the host's balance
  (peak FLOP/s over bandwidth, from cores, vector width and clock);
* ``unroll=N`` of elementwise and row-reduction kernels (FMA latency x units, registers);
* of a ``tiled`` matmul: everything from ``tile=`` on (MR/NR from the registers, KC/MC/NC
  from the caches, the thread split and a shared B panel from the core count, and the
  derivation text) and the first two loop extents with ``(extent ...)``: they count
  micro-panels of the split dimension and the other dimension, which the split decides.
  Only K, ``parallel_dim=0``, ``reduced=[]`` and ``vector_dim=1`` are fixed.

Everything else (kinds, strategies, loop nests, parallel and vector dims, reduced axes,
``dot`` vs ``ikj``) is host-independent and compared exactly. ``test_plans_on_a_pinned_cpu``
shows the full lines on a hand-built ``CpuSpec`` (``get_target("cpu", spec=...)``). CUDA
plans read no CPU spec, so their lines are compared whole (names masked only because a
digest cannot be checked by hand and changes with every ``FORMAT_VERSION``).
"""
from __future__ import annotations

import difflib
import re
from textwrap import dedent

import numpy as np
import pytest
from xdsl.dialects.builtin import ModuleOp
from xdsl.transforms.common_subexpression_elimination import cse
from xdsl.transforms.dead_code_elimination import dce

import nova as nv
from nova.compiler import pipeline
from nova.compiler.targets.cpu.device import CpuSpec
from nova.compiler.irgen import build_module
from nova.compiler.lowering import plan_kernels
from nova.compiler.passes import rematerialize, simplify
from nova.compiler.passes.fusion import fuse
from nova.compiler.targets import Target, get_target, resolve
from nova.tensor.realize import pending_graph
from tests.compiler.parsing import parse_module


def assert_golden(actual: str, expected: str, what: str) -> None:
    """Exact comparison; on a mismatch the failure is a unified diff golden -> actual."""
    if actual != expected:
        diff = "\n".join(difflib.unified_diff(
            expected.splitlines(), actual.splitlines(),
            fromfile=f"{what} (golden)", tofile=f"{what} (actual)", lineterm=""))
        pytest.fail(f"{what} differs from its golden:\n{diff}", pytrace=False)


def _ir(text: str) -> str:
    """A golden written indented in the test, as the printer prints it."""
    return dedent(text).strip("\n")


def _parse(text: str) -> ModuleOp:
    module = parse_module(text)
    module.verify()
    return module


def _plan_lines(lowered_text: str) -> list[str]:
    return [line for line in lowered_text.splitlines() if line.startswith("// ")]


_DIGEST = re.compile(r"nova_k_[0-9a-f]{20}:")


def _host_independent(line: str) -> str:
    """A plan line with the host-dependent fields masked (see the module docstring)."""
    line = _DIGEST.sub("nova_k_<digest>:", line)
    line = re.sub(r"\b(memory|compute)-bound", "<bound>-bound", line)
    line = re.sub(r" unroll=\d+", " unroll=<host>", line)
    if "/tiled " in line:
        line = re.sub(r"loops=\[\d+, \d+, ", "loops=[<panels>, <other>, ", line)
        line = re.sub(r"\(extent \d+\)", "(extent <panels>)", line)
        line = re.sub(r" tile=.*$", " tile=<host>", line)
    return line


def _lowered_text(fused_text: str, target: Target | str = "cpu") -> str:
    """Planning alone: the fused golden, parsed, planned and printed as ``dump_ir``."""
    fused = _parse(fused_text)
    target = resolve(target, "golden")
    return pipeline.CompiledStep(target.name, fused, plan_kernels(fused, target=target)).text()


# ---------------------------------------------------------------- the programs

def _ones(*shape: int) -> nv.Tensor:
    return nv.tensor(np.ones(shape, np.float32))


def mlp_head_graph():
    """``(x @ w + b).relu().sum(-1)``: a linear layer, its activation and a row sum."""
    x, w, b = _ones(2, 3), _ones(3, 4), _ones(4)
    return pending_graph((x @ w + b).relu().sum(-1))


def exp_training_graph():
    """``loss = x.exp().sum(); loss.backward()`` for a 128 x 128 (64 KiB) ``x``: the
    smallest value remat recomputes rather than keeps (``MIN_RECOMPUTE_BYTES``)."""
    x = nv.tensor(np.ones((128, 128), np.float32), requires_grad=True)
    loss = x.exp().sum()
    loss.backward()
    return pending_graph(loss, x.grad)


# ---------------------------------------------------------------- irgen

MLP_TRACE = _ir("""
    builtin.module {
      func.func @step(%0: tensor<2x3xf32>, %1: tensor<3x4xf32>, %2: tensor<4xf32>) -> tensor<2xf32> {
        %3 = nova.matmul %0, %1 : tensor<2x3xf32>, tensor<3x4xf32> -> tensor<2x4xf32>
        %4 = nova.broadcast_in_dim %2 dims = [1] : tensor<4xf32> -> tensor<2x4xf32>
        %5 = nova.add %3, %4 : tensor<2x4xf32>
        %6 = nova.constant 0.000000e+00 : f32 : tensor<2x4xf32>
        %7 = nova.compare "le", %5, %6 : tensor<2x4xf32> -> tensor<2x4xi1>
        %8 = nova.constant 0.000000e+00 : f32 : tensor<2x4xf32>
        %9 = nova.where %7, %8, %5 : tensor<2x4xi1>, tensor<2x4xf32>
        %10 = nova.reduce_sum %9 axes = [1] : tensor<2x4xf32> -> tensor<2xf32>
        func.return %10 : tensor<2xf32>
      }
    }
""")


def test_irgen_records_the_mlp_head_as_explicit_primitives():
    """Arguments are numbered by first use (x, w, b). The bias broadcast is explicit
    (``b``'s axis maps to result dim 1, so every row gets the same bias). ``relu`` is
    ``where(h <= 0, 0, h)`` (a NaN compares false and passes through), and the recorder
    makes a fresh 0 splat for the comparison and for the select: removing that duplicate
    is CSE's job, not irgen's. ``sum(-1)`` reduces axis 1 and drops it (2x4 -> 2)."""
    assert_golden(str(build_module(mlp_head_graph())), MLP_TRACE, "irgen(mlp head)")


# ---------------------------------------------------------------- optimization passes

MLP_NOVA = _ir("""
    builtin.module {
      func.func @step(%0: tensor<2x3xf32>, %1: tensor<3x4xf32>, %2: tensor<4xf32>) -> tensor<2xf32> {
        %3 = nova.matmul %0, %1 : tensor<2x3xf32>, tensor<3x4xf32> -> tensor<2x4xf32>
        %4 = nova.broadcast_in_dim %2 dims = [1] : tensor<4xf32> -> tensor<2x4xf32>
        %5 = nova.add %3, %4 : tensor<2x4xf32>
        %6 = nova.constant 0.000000e+00 : f32 : tensor<2x4xf32>
        %7 = nova.compare "le", %5, %6 : tensor<2x4xf32> -> tensor<2x4xi1>
        %8 = nova.where %7, %6, %5 : tensor<2x4xi1>, tensor<2x4xf32>
        %9 = nova.reduce_sum %8 axes = [1] : tensor<2x4xf32> -> tensor<2xf32>
        func.return %9 : tensor<2xf32>
      }
    }
""")


def test_cse_merges_the_duplicate_zero_of_relu():
    """CSE alone on the recorded trace: the second ``constant 0.0`` (same value, same
    type) is the first one, so the select reads ``%6`` too; nothing else is equal.
    The result is the pipeline's "nova" stage: DCE and remat have nothing to do here."""
    module = _parse(MLP_TRACE)
    cse(module)
    assert_golden(str(module), MLP_NOVA, "cse(mlp head)")
    assert_golden(str(pipeline.front(mlp_head_graph())), MLP_NOVA, "front(mlp head)")


DCE_INPUT = _ir("""
    builtin.module {
      func.func @step(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
        %e = nova.exp %x : tensor<2x3xf32>
        %n = nova.neg %e : tensor<2x3xf32>
        %s = nova.reduce_sum %n axes = [1] : tensor<2x3xf32> -> tensor<2xf32>
        %c = nova.constant 2.000000e+00 : f32 : tensor<2x3xf32>
        %y = nova.mul %x, %c : tensor<2x3xf32>
        func.return %y : tensor<2x3xf32>
      }
    }
""")

DCE_OUTPUT = _ir("""
    builtin.module {
      func.func @step(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
        %c = nova.constant 2.000000e+00 : f32 : tensor<2x3xf32>
        %y = nova.mul %x, %c : tensor<2x3xf32>
        func.return %y : tensor<2x3xf32>
      }
    }
""")


def test_dce_drops_a_dead_chain_to_its_start():
    """DCE alone: ``%s`` is unused, and once it is gone so are ``%n`` and ``%e`` (each
    was used only by the next), so the whole chain goes; the returned ``%y`` and its
    constant stay."""
    module = _parse(DCE_INPUT)
    dce(module)
    assert_golden(str(module), DCE_OUTPUT, "dce")


BACKWARD_TWINS = _ir("""
    builtin.module {
      func.func @step(%w: tensor<4x3xf32>, %g: tensor<3x4xf32>) -> (tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>) {
        %wt = nova.transpose %w perm = [1, 0] : tensor<4x3xf32> -> tensor<3x4xf32>
        %wt_b = nova.transpose %w perm = [1, 0] {nova.backward} : tensor<4x3xf32> -> tensor<3x4xf32>
        %d = nova.mul %g, %wt_b {nova.backward} : tensor<3x4xf32>
        %d2 = nova.mul %g, %wt_b {nova.backward} : tensor<3x4xf32>
        func.return %wt, %d, %d2 : tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>
      }
    }
""")

BACKWARD_TWINS_SIMPLIFIED = _ir("""
    builtin.module {
      func.func @step(%w: tensor<4x3xf32>, %g: tensor<3x4xf32>) -> (tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>) {
        %wt = nova.transpose %w perm = [1, 0] : tensor<4x3xf32> -> tensor<3x4xf32>
        %d = nova.mul %g, %wt {nova.backward} : tensor<3x4xf32>
        func.return %wt, %d, %d : tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>
      }
    }
""")


def test_simplify_merges_backward_twins_and_keeps_forward_values_forward():
    """``simplify`` (CSE + DCE) with ``nova.backward`` marks: the mark does not keep the
    backward transpose of ``w`` from merging with its forward twin, and the survivor is
    the forward ``%wt``, still unmarked (it is a forward value: remat may not treat it
    as backward work). The two backward products then read the same operands and merge
    too; that survivor was marked and stays marked."""
    assert_golden(str(simplify(_parse(BACKWARD_TWINS))), BACKWARD_TWINS_SIMPLIFIED,
                  "simplify(backward twins)")


EXP_TRACE = _ir("""
    builtin.module {
      func.func @step(%0: tensor<128x128xf32>) -> (tensor<f32>, tensor<128x128xf32>) {
        %1 = nova.exp %0 : tensor<128x128xf32>
        %2 = nova.reduce_sum %1 axes = [0, 1] : tensor<128x128xf32> -> tensor<f32>
        %3 = nova.constant 1.000000e+00 : f32 : tensor<f32>
        %4 = nova.broadcast_in_dim %3 dims = [] {nova.backward} : tensor<f32> -> tensor<128x128xf32>
        %5 = nova.mul %4, %1 {nova.backward} : tensor<128x128xf32>
        func.return %2, %5 : tensor<f32>, tensor<128x128xf32>
      }
    }
""")

EXP_NOVA = _ir("""
    builtin.module {
      func.func @step(%0: tensor<128x128xf32>) -> (tensor<f32>, tensor<128x128xf32>) {
        %1 = nova.exp %0 : tensor<128x128xf32>
        %2 = nova.reduce_sum %1 axes = [0, 1] : tensor<128x128xf32> -> tensor<f32>
        %3 = nova.constant 1.000000e+00 : f32 : tensor<f32>
        %4 = nova.broadcast_in_dim %3 dims = [] {nova.backward} : tensor<f32> -> tensor<128x128xf32>
        %5 = nova.exp %0 {nova.backward} : tensor<128x128xf32>
        %6 = nova.mul %4, %5 {nova.backward} : tensor<128x128xf32>
        func.return %2, %6 : tensor<f32>, tensor<128x128xf32>
      }
    }
""")


def test_remat_recomputes_exp_for_its_gradient_instead_of_keeping_it():
    """The recorded step (forward, then ``d exp(x)/dx = 1 * exp(x)`` marked backward)
    and remat alone on it. The backward reads the forward's ``exp(x)`` (64 KiB); it is
    recomputable from ``x``, an argument alive all step, so the minimum cut keeps
    nothing and the backward gets its own ``exp %0`` (marked backward) right before the
    product. The forward ``%1`` stays: the loss still reads it."""
    assert_golden(str(build_module(exp_training_graph())), EXP_TRACE, "irgen(exp step)")
    assert_golden(str(rematerialize(_parse(EXP_TRACE), "default")), EXP_NOVA,
                  "remat(exp step)")


# ---------------------------------------------------------------- fusion

MLP_FUSED = _ir("""
    builtin.module {
      func.func @step(%0: tensor<2x3xf32>, %1: tensor<3x4xf32>, %2: tensor<4xf32>) -> tensor<2xf32> {
        %3 = "nova.fusion"(%0, %1) <{kind = "matmul"}> ({
        ^bb0(%4: tensor<2x3xf32>, %5: tensor<3x4xf32>):
          %6 = nova.matmul %4, %5 : tensor<2x3xf32>, tensor<3x4xf32> -> tensor<2x4xf32>
          nova.yield %6 : tensor<2x4xf32>
        }) : (tensor<2x3xf32>, tensor<3x4xf32>) -> tensor<2x4xf32>
        %7 = "nova.fusion"(%2, %3) <{kind = "reduce"}> ({
        ^bb0(%8: tensor<4xf32>, %9: tensor<2x4xf32>):
          %10 = nova.broadcast_in_dim %8 dims = [1] : tensor<4xf32> -> tensor<2x4xf32>
          %11 = nova.add %9, %10 : tensor<2x4xf32>
          %12 = nova.constant 0.000000e+00 : f32 : tensor<2x4xf32>
          %13 = nova.compare "le", %11, %12 : tensor<2x4xf32> -> tensor<2x4xi1>
          %14 = nova.where %13, %12, %11 : tensor<2x4xi1>, tensor<2x4xf32>
          %15 = nova.reduce_sum %14 axes = [1] : tensor<2x4xf32> -> tensor<2xf32>
          nova.yield %15 : tensor<2xf32>
        }) : (tensor<4xf32>, tensor<2x4xf32>) -> tensor<2xf32>
        func.return %7 : tensor<2xf32>
      }
    }
""")


def test_fusion_puts_the_bias_and_relu_inside_the_row_sum():
    """Two kernels, the same for both targets. Walking back from the returned sum, the
    select, compare, add and the bias broadcast all join the reduce kernel: the sum
    computes ``relu(mm + b)`` on the fly while reading the 2x4 product, so the
    activation is never stored. The matmul cannot join (a reduce kernel has no matmul
    prologue) and roots its own kernel with an empty epilogue; its product is the only
    intermediate that reaches memory. The shared zero is the kernel's own constant.
    (Both targets in a loop, not as parameters: the suite skips tests with a ``cuda``
    keyword where there is no GPU, and fusion needs none.)"""
    for target in ("cpu", "cuda"):
        assert_golden(str(fuse(_parse(MLP_NOVA), target)), MLP_FUSED,
                      f"fuse(mlp head, {target})")


TANH_NOVA = _ir("""
    builtin.module {
      func.func @step(%x: tensor<2x3xf32>, %w: tensor<3x4xf32>, %b: tensor<4xf32>) -> tensor<2x4xf32> {
        %mm = nova.matmul %x, %w : tensor<2x3xf32>, tensor<3x4xf32> -> tensor<2x4xf32>
        %bb = nova.broadcast_in_dim %b dims = [1] : tensor<4xf32> -> tensor<2x4xf32>
        %h = nova.add %mm, %bb : tensor<2x4xf32>
        %y = nova.tanh %h : tensor<2x4xf32>
        func.return %y : tensor<2x4xf32>
      }
    }
""")

TANH_FUSED_CPU = _ir("""
    builtin.module {
      func.func @step(%0: tensor<2x3xf32>, %1: tensor<3x4xf32>, %2: tensor<4xf32>) -> tensor<2x4xf32> {
        %3 = "nova.fusion"(%0, %1) <{kind = "matmul"}> ({
        ^bb0(%4: tensor<2x3xf32>, %5: tensor<3x4xf32>):
          %mm = nova.matmul %4, %5 : tensor<2x3xf32>, tensor<3x4xf32> -> tensor<2x4xf32>
          nova.yield %mm : tensor<2x4xf32>
        }) : (tensor<2x3xf32>, tensor<3x4xf32>) -> tensor<2x4xf32>
        %6 = "nova.fusion"(%2, %3) <{kind = "elementwise"}> ({
        ^bb0(%7: tensor<4xf32>, %8: tensor<2x4xf32>):
          %bb = nova.broadcast_in_dim %7 dims = [1] : tensor<4xf32> -> tensor<2x4xf32>
          %h = nova.add %8, %bb : tensor<2x4xf32>
          %y = nova.tanh %h : tensor<2x4xf32>
          nova.yield %y : tensor<2x4xf32>
        }) : (tensor<4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
        func.return %6 : tensor<2x4xf32>
      }
    }
""")

TANH_FUSED_CUDA = _ir("""
    builtin.module {
      func.func @step(%0: tensor<2x3xf32>, %1: tensor<3x4xf32>, %2: tensor<4xf32>) -> tensor<2x4xf32> {
        %3 = "nova.fusion"(%0, %1, %2) <{kind = "matmul"}> ({
        ^bb0(%4: tensor<2x3xf32>, %5: tensor<3x4xf32>, %6: tensor<4xf32>):
          %mm = nova.matmul %4, %5 : tensor<2x3xf32>, tensor<3x4xf32> -> tensor<2x4xf32>
          %bb = nova.broadcast_in_dim %6 dims = [1] : tensor<4xf32> -> tensor<2x4xf32>
          %h = nova.add %mm, %bb : tensor<2x4xf32>
          %y = nova.tanh %h : tensor<2x4xf32>
          nova.yield %y : tensor<2x4xf32>
        }) : (tensor<2x3xf32>, tensor<3x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
        func.return %3 : tensor<2x4xf32>
      }
    }
""")


def test_a_tanh_epilogue_leaves_the_cpu_gemm_and_stays_in_the_cuda_one():
    """CPU: ``tanh`` is transcendental, which the CPU GEMM's scalar epilogue would
    evaluate one element at a time, so the bias add and tanh form an elementwise kernel
    of their own (one vectorized pass over the 2x4 product) and the matmul kernel yields
    the bare product. CUDA: the epilogue is a coalesced loop of threads, so bias, add
    and tanh stay in the matmul kernel, which reads ``b`` as a third input: one kernel."""
    assert_golden(str(fuse(_parse(TANH_NOVA), "cpu")), TANH_FUSED_CPU, "fuse(tanh, cpu)")
    assert_golden(str(fuse(_parse(TANH_NOVA), "cuda")), TANH_FUSED_CUDA, "fuse(tanh, cuda)")


SOFTMAX_NOVA = _ir("""
    builtin.module {
      func.func @step(%0: tensor<2x4xf32>) -> tensor<2x4xf32> {
        %1 = nova.reduce_max %0 axes = [1] : tensor<2x4xf32> -> tensor<2xf32>
        %2 = nova.reshape %1 : tensor<2xf32> -> tensor<2x1xf32>
        %3 = nova.broadcast_in_dim %2 dims = [0, 1] : tensor<2x1xf32> -> tensor<2x4xf32>
        %4 = nova.sub %0, %3 : tensor<2x4xf32>
        %5 = nova.exp %4 : tensor<2x4xf32>
        %6 = nova.reduce_sum %5 axes = [1] : tensor<2x4xf32> -> tensor<2xf32>
        %7 = nova.reshape %6 : tensor<2xf32> -> tensor<2x1xf32>
        %8 = nova.broadcast_in_dim %7 dims = [0, 1] : tensor<2x1xf32> -> tensor<2x4xf32>
        %9 = nova.div %5, %8 : tensor<2x4xf32>
        func.return %9 : tensor<2x4xf32>
      }
    }
""")

SOFTMAX_FUSED = _ir("""
    builtin.module {
      func.func @step(%0: tensor<2x4xf32>) -> tensor<2x4xf32> {
        %1 = "nova.fusion"(%0) <{kind = "rows"}> ({
        ^bb0(%2: tensor<2x4xf32>):
          %3 = nova.reduce_max %2 axes = [1] : tensor<2x4xf32> -> tensor<2xf32>
          %4 = nova.reshape %3 : tensor<2xf32> -> tensor<2x1xf32>
          %5 = nova.broadcast_in_dim %4 dims = [0, 1] : tensor<2x1xf32> -> tensor<2x4xf32>
          %6 = nova.sub %2, %5 : tensor<2x4xf32>
          %7 = nova.exp %6 : tensor<2x4xf32>
          %8 = nova.reduce_sum %7 axes = [1] : tensor<2x4xf32> -> tensor<2xf32>
          %9 = nova.reshape %8 : tensor<2xf32> -> tensor<2x1xf32>
          %10 = nova.broadcast_in_dim %9 dims = [0, 1] : tensor<2x1xf32> -> tensor<2x4xf32>
          %11 = nova.div %7, %10 : tensor<2x4xf32>
          nova.yield %11 : tensor<2x4xf32>
        }) : (tensor<2x4xf32>) -> tensor<2x4xf32>
        func.return %1 : tensor<2x4xf32>
      }
    }
""")


def test_softmax_is_one_rows_kernel():
    """``x.softmax(-1)`` as recorded and optimized (the input golden is the "nova"
    stage of the recording). Both reductions reduce axis 1 of the same 2x4 input and
    are read back only through reshape + broadcast along their own row, so the whole
    function is one ``rows`` kernel: per row a max pass, a sum-of-exp pass (reading the
    max as a row scalar) and a pass writing ``exp / sum``. Nothing is materialized
    between the passes."""
    x = _ones(2, 4)
    assert_golden(str(pipeline.front(pending_graph(x.softmax(-1)))), SOFTMAX_NOVA,
                  "front(softmax)")
    assert_golden(str(fuse(_parse(SOFTMAX_NOVA), "cpu")), SOFTMAX_FUSED, "fuse(softmax)")


REDUCE_NOVA = _ir("""
    builtin.module {
      func.func @step(%x: tensor<4x6xf32>) -> (tensor<4x2xf32>, tensor<6xf32>) {
        %r = nova.reshape %x : tensor<4x6xf32> -> tensor<4x2x3xf32>
        %groups = nova.reduce_sum %r axes = [2] : tensor<4x2x3xf32> -> tensor<4x2xf32>
        %columns = nova.reduce_sum %x axes = [0] : tensor<4x6xf32> -> tensor<6xf32>
        func.return %groups, %columns : tensor<4x2xf32>, tensor<6xf32>
      }
    }
""")

REDUCE_FUSED = _ir("""
    builtin.module {
      func.func @step(%0: tensor<4x6xf32>) -> (tensor<4x2xf32>, tensor<6xf32>) {
        %1 = "nova.fusion"(%0) <{kind = "reduce"}> ({
        ^bb0(%2: tensor<4x6xf32>):
          %r = nova.reshape %2 : tensor<4x6xf32> -> tensor<4x2x3xf32>
          %groups = nova.reduce_sum %r axes = [2] : tensor<4x2x3xf32> -> tensor<4x2xf32>
          nova.yield %groups : tensor<4x2xf32>
        }) : (tensor<4x6xf32>) -> tensor<4x2xf32>
        %3 = "nova.fusion"(%0) <{kind = "reduce"}> ({
        ^bb0(%4: tensor<4x6xf32>):
          %columns = nova.reduce_sum %4 axes = [0] : tensor<4x6xf32> -> tensor<6xf32>
          nova.yield %columns : tensor<6xf32>
        }) : (tensor<4x6xf32>) -> tensor<6xf32>
        func.return %1, %3 : tensor<4x2xf32>, tensor<6xf32>
      }
    }
""")


def test_a_reshape_becomes_index_arithmetic_inside_the_reduce_kernel():
    """Sums of groups of 3 (``x.reshape(4, 2, 3).sum(-1)``) and of columns
    (``x.sum(0)``) of the same ``x``. The reshape is a movement op, so it joins the
    group-sum kernel and reads ``x`` in place (no reshaped copy); each reduction roots a
    kernel of its own, both reading the argument directly."""
    assert_golden(str(fuse(_parse(REDUCE_NOVA), "cpu")), REDUCE_FUSED, "fuse(reduce)")


EXP_FUSED = _ir("""
    builtin.module {
      func.func @step(%0: tensor<128x128xf32>) -> (tensor<f32>, tensor<128x128xf32>) {
        %1 = "nova.fusion"(%0) <{kind = "reduce"}> ({
        ^bb0(%2: tensor<128x128xf32>):
          %3 = nova.exp %2 : tensor<128x128xf32>
          %4 = nova.reduce_sum %3 axes = [0, 1] : tensor<128x128xf32> -> tensor<f32>
          nova.yield %4 : tensor<f32>
        }) : (tensor<128x128xf32>) -> tensor<f32>
        %5 = "nova.fusion"(%0) <{kind = "elementwise"}> ({
        ^bb0(%6: tensor<128x128xf32>):
          %7 = nova.constant 1.000000e+00 : f32 : tensor<f32>
          %8 = nova.broadcast_in_dim %7 dims = [] {nova.backward} : tensor<f32> -> tensor<128x128xf32>
          %9 = nova.exp %6 {nova.backward} : tensor<128x128xf32>
          %10 = nova.mul %8, %9 {nova.backward} : tensor<128x128xf32>
          nova.yield %10 : tensor<128x128xf32>
        }) : (tensor<128x128xf32>) -> tensor<128x128xf32>
        func.return %1, %5 : tensor<f32>, tensor<128x128xf32>
      }
    }
""")


def test_after_remat_both_uses_of_exp_are_computed_in_their_kernels():
    """The rematerialized exp step fuses into two kernels that each read only ``x``:
    the loss sums ``exp(x)`` as it reads ``x``, and the gradient kernel computes
    ``1 * exp(x)`` (its ``1`` a broadcast scalar, index arithmetic). No 64 KiB ``exp(x)``
    is stored. Without remat the shared ``exp(x)`` would be materialized by a kernel of
    its own and read back by both, three kernels."""
    assert_golden(str(fuse(_parse(EXP_NOVA), "cpu")), EXP_FUSED, "fuse(exp step)")
    without_remat = fuse(_parse(EXP_TRACE), "cpu")
    kernels = [op for op in next(iter(without_remat.ops)).body.block.ops
               if op.name == "nova.fusion"]
    assert [k.kind.data for k in kernels] == ["elementwise", "reduce", "elementwise"]


# ---------------------------------------------------------------- planning

MLP_PLANS = [
    "// nova_k_<digest>: matmul/tiled loops=[<panels>, <other>, 3] parallel_dim=0"
    " (extent <panels>) reduced=[] vector_dim=1 <bound>-bound tile=<host>",
    "// nova_k_<digest>: reduce/row loops=[2, 4] parallel_dim=0 (extent 2) reduced=[1]"
    " vector_dim=1 <bound>-bound unroll=<host>",
]

TANH_CPU_PLANS = [
    "// nova_k_<digest>: matmul/tiled loops=[<panels>, <other>, 3] parallel_dim=0"
    " (extent <panels>) reduced=[] vector_dim=1 <bound>-bound tile=<host>",
    "// nova_k_<digest>: elementwise/elementwise loops=[2, 4] parallel_dim=0 (extent 2)"
    " reduced=[] vector_dim=1 <bound>-bound unroll=<host>",
]

SOFTMAX_PLANS = [
    "// nova_k_<digest>: rows/rows loops=[2, 4] parallel_dim=0 (extent 2) reduced=[1]"
    " vector_dim=1 <bound>-bound",
]

REDUCE_PLANS = [
    "// nova_k_<digest>: reduce/row loops=[4, 2, 3] parallel_dim=0 (extent 4) reduced=[2]"
    " vector_dim=2 <bound>-bound unroll=<host>",
    "// nova_k_<digest>: reduce/column loops=[4, 6] parallel_dim=1 (extent 6) reduced=[0]"
    " vector_dim=1 <bound>-bound",
]

EXP_PLANS = [
    "// nova_k_<digest>: reduce/row loops=[128, 128] parallel_dim=None (extent 1)"
    " reduced=[0, 1] vector_dim=1 <bound>-bound unroll=<host>",
    "// nova_k_<digest>: elementwise/elementwise loops=[16384] parallel_dim=0"
    " (extent 16384) reduced=[] vector_dim=0 <bound>-bound flat unroll=<host>",
]


@pytest.mark.parametrize("name, fused, plans", [
    ("mlp head", MLP_FUSED, MLP_PLANS),
    ("tanh, cpu", TANH_FUSED_CPU, TANH_CPU_PLANS),
    ("softmax", SOFTMAX_FUSED, SOFTMAX_PLANS),
    ("reduce", REDUCE_FUSED, REDUCE_PLANS),
    ("exp step", EXP_FUSED, EXP_PLANS),
])
def test_plans_host_independent_parts(name, fused, plans):
    """Planning alone on each fused golden (``CompiledStep.text()``: the fused module,
    then one ``//`` line per kernel, in kernel order), host-dependent fields masked.

    - mlp head / tanh: the GEMMs are ``tiled`` (float32) over K = 3; the reduce kernel
      is a ``row`` reduction (axis 1 is the suffix) over its 2x4 input, one accumulator
      per row, threads over the 2 rows; the tanh kernel loops over the 2x4 output.
    - softmax: one ``rows`` kernel over [2, 4], parallel over rows, reducing axis 1.
    - reduce: the group sum runs over the reshaped [4, 2, 3] space (the reshape is index
      arithmetic) reducing its last axis, vectorized along it; the column sum keeps
      axis 1 innermost (``column``: a scratch row of 6 accumulators, vectorized over
      the kept axis) and splits the 6 columns across threads (``parallel_dim=1``).
    - exp step: a full reduction to a scalar keeps no axis to split, so it runs on one
      thread (``parallel_dim=None``); the gradient kernel reads x and the scalar
      gradient at its own position, so it is flat (``lowering.flat``): one loop over
      its 16384 elements, split across threads."""
    text = _lowered_text(fused)
    assert text.startswith(fused + "\n")   # the fused IR, as given, then the plans
    actual = "\n".join(_host_independent(line) for line in _plan_lines(text))
    assert_golden(actual, "\n".join(plans), f"plans({name})")


F64_FUSED = _ir("""
    builtin.module {
      func.func @step(%0: tensor<4x8xf64>, %1: tensor<6x8xf64>, %2: tensor<8x6xf64>) -> (tensor<4x6xf64>, tensor<4x6xf64>) {
        %3 = "nova.fusion"(%1, %0) <{kind = "matmul"}> ({
        ^bb0(%4: tensor<6x8xf64>, %5: tensor<4x8xf64>):
          %wt = nova.transpose %4 perm = [1, 0] : tensor<6x8xf64> -> tensor<8x6xf64>
          %p = nova.matmul %5, %wt : tensor<4x8xf64>, tensor<8x6xf64> -> tensor<4x6xf64>
          nova.yield %p : tensor<4x6xf64>
        }) : (tensor<6x8xf64>, tensor<4x8xf64>) -> tensor<4x6xf64>
        %6 = "nova.fusion"(%0, %2) <{kind = "matmul"}> ({
        ^bb0(%7: tensor<4x8xf64>, %8: tensor<8x6xf64>):
          %q = nova.matmul %7, %8 : tensor<4x8xf64>, tensor<8x6xf64> -> tensor<4x6xf64>
          nova.yield %q : tensor<4x6xf64>
        }) : (tensor<4x8xf64>, tensor<8x6xf64>) -> tensor<4x6xf64>
        func.return %3, %6 : tensor<4x6xf64>, tensor<4x6xf64>
      }
    }
""")

F64_PLANS = [
    "// nova_k_<digest>: matmul/dot loops=[4, 6, 8] parallel_dim=0 (extent 4) reduced=[]"
    " vector_dim=2 <bound>-bound",
    "// nova_k_<digest>: matmul/ikj loops=[4, 6, 8] parallel_dim=0 (extent 4) reduced=[]"
    " vector_dim=1 <bound>-bound",
]


def test_float64_matmuls_take_dot_products_when_b_is_transposed():
    """Float64 products are not tiled: loops (M, N, K) = (4, 6, 8), threads over the 4
    rows. ``a @ w.T`` reads B through the transpose, contiguous along K, so it takes dot
    products with K innermost (``vector_dim=2``); ``a @ b`` has B's rows contiguous
    along N, so it runs ``ikj`` accumulating a 6-wide row (``vector_dim=1``)."""
    actual = "\n".join(_host_independent(line) for line in _plan_lines(_lowered_text(F64_FUSED)))
    assert_golden(actual, "\n".join(F64_PLANS), "plans(float64 matmuls)")


# A hand-built AVX2 machine: 16 ymm registers (8 float32 lanes), 4 cores, 32 KiB L1d,
# 256 KiB L2 per core, 8 MiB L3, 2 FMA units at 3 GHz.
PINNED = CpuSpec(name="pinned-avx2", cores=4, isa="avx2", vector_bits=256,
                 vector_registers=16, l1d=32 * 1024, l2=256 * 1024, l3=8 * 1024 * 1024,
                 fma_units=2, ghz=3.0)

PINNED_MLP_PLANS = [
    "// nova_k_<digest>: matmul/tiled loops=[1, 2, 3] parallel_dim=0 (extent 1) reduced=[]"
    " vector_dim=1 memory-bound tile=6x16 KC=3 MC=10920 NC=16 split=n"
    " [NR = 2 x 8 lanes = 16; MR = (16 regs - 3) // 2 = 6; 12 FMA chains vs latency x"
    " units = 8; KC = min(max(L1/2 / (NR x 4 B) = 256, C traffic <= 0.03 of FMA time:"
    " 1280), L2/2 / (4 MR x 4 B) = 1365), balanced over K=3 -> 3; MC = L2/2 / (KC x 4 B)"
    " -> 10920; NC = min(L3/4 cores, 4 MiB)/2 / (KC x 4 B), <= N -> 16; pack A and B;"
    " threads split N (M=2 < N=4)]",
    "// nova_k_<digest>: reduce/row loops=[2, 4] parallel_dim=0 (extent 2) reduced=[1]"
    " vector_dim=1 memory-bound unroll=4",
]


def test_plans_on_a_pinned_cpu():
    """The MLP head's full plan lines for a CPU target pinned to ``PINNED``.

    GEMM: NR = 2 vectors = 16 columns, MR = (16 - 3) // 2 = 6 rows; KC is capped by
    K = 3; MC = 128 KiB / (3 x 4 B) = 10922, rounded down to a multiple of MR; NC is
    N = 4 rounded up to NR. M = 2 < N = 4, so threads split N: ceil(4 / 16) = 1 column
    panel (the parallel extent), over the 2 rows and K = 3. 48 FLOPs over 104 bytes
    (0.46 FLOP/B) is far below the machine balance (4 cores x 2 FMA x 2 x 8 lanes x
    3 GHz = 384 GFLOP/s over 40 GB/s = 9.6 FLOP/B): memory-bound. The row sum
    interleaves min(latency 4 x 2 units, 16 registers / 4) = 4 vectors."""
    pinned = get_target("cpu", spec=PINNED)
    lines = [_DIGEST.sub("nova_k_<digest>:", line)
             for line in _plan_lines(_lowered_text(MLP_FUSED, pinned))]
    assert_golden("\n".join(lines), "\n".join(PINNED_MLP_PLANS), "plans(mlp head, pinned cpu)")


GPU_PLANS = {
    "mlp head": (MLP_FUSED, [
        "// nova_k_<digest>: matmul/ikj loops=[2, 4, 3] parallel_dim=0 (extent 2) reduced=[]"
        " vector_dim=1",
        "// nova_k_<digest>: reduce/row loops=[2, 4] parallel_dim=0 (extent 2) reduced=[1]"
        " vector_dim=1"]),
    "tanh": (TANH_FUSED_CUDA, [
        "// nova_k_<digest>: matmul/ikj loops=[2, 4, 3] parallel_dim=0 (extent 2) reduced=[]"
        " vector_dim=1"]),
    "softmax": (SOFTMAX_FUSED, [
        "// nova_k_<digest>: rows/rows loops=[2, 4] parallel_dim=0 (extent 2) reduced=[1]"
        " vector_dim=1"]),
    "reduce": (REDUCE_FUSED, [
        "// nova_k_<digest>: reduce/row loops=[4, 2, 3] parallel_dim=0 (extent 4) reduced=[2]"
        " vector_dim=2",
        "// nova_k_<digest>: reduce/column loops=[4, 6] parallel_dim=1 (extent 6) reduced=[0]"
        " vector_dim=1"]),
    "float64 matmuls": (F64_FUSED, [
        "// nova_k_<digest>: matmul/dot loops=[4, 6, 8] parallel_dim=0 (extent 4) reduced=[]"
        " vector_dim=2",
        "// nova_k_<digest>: matmul/ikj loops=[4, 6, 8] parallel_dim=0 (extent 4) reduced=[]"
        " vector_dim=1"]),
}


def test_gpu_plans_are_the_neutral_loop_structure():
    """Planning for the GPU target (its fused goldens; the MLP head fuses the same for
    both targets). A GPU plan is the target-neutral structure as is: no unroll, no
    CPU-balance bound, and float32 GEMMs are not BLIS-tiled but keep the (M, N, K) =
    (2, 4, 3) nest, ``ikj`` since B's rows are contiguous along N (the thread mapping
    and GEMM tiles come from the GPU's spec at emission). No field depends on the host:
    these lines are compared whole, only the digests masked."""
    for name, (fused, plans) in GPU_PLANS.items():
        lines = [_DIGEST.sub("nova_k_<digest>:", line)
                 for line in _plan_lines(_lowered_text(fused, "cuda"))]
        assert_golden("\n".join(lines), "\n".join(plans), f"plans({name}, cuda)")


def test_the_pipeline_yields_the_chained_goldens():
    """``pipeline.stages`` end to end on the recorded MLP head gives the goldens above,
    stage by stage: what the per-stage tests check is what the engines run."""
    by_stage = dict(pipeline.stages(mlp_head_graph()))
    assert_golden(str(by_stage["trace"]), MLP_TRACE, "stages: trace")
    assert_golden(str(by_stage["nova"]), MLP_NOVA, "stages: nova")
    text = by_stage["fused"].text()
    assert_golden(text.split("\n// ")[0], MLP_FUSED, "stages: fused")
    assert_golden("\n".join(_host_independent(line) for line in _plan_lines(text)),
                  "\n".join(MLP_PLANS), "stages: plans")
