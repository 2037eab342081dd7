"""Every dialect op has a row in every table of every concern: the interpreter's meaning,
each emitter's lowering (shared index rule, target rule or arithmetic), the StableHLO
export's and the mlir engine's lowerings, and — in
tests/autograd — a vector-Jacobian rule. Ops are looked up by class, so a new op without
a row is caught here, not by a user's program."""
import pytest

from nova.compiler import dialect as nd
from nova.compiler.targets.cuda.emit import CEmitter
from nova.compiler.targets.cpu.llvm_emit import Emitter
from nova.compiler.codegen.scalar import SHARED_RULES, missing_lowerings
from nova.compiler.linalg import LOWERINGS as LINALG
from nova.compiler.stablehlo import LOWERINGS as STABLEHLO
from nova.runtime.interpreter import MEANINGS

# (ids are not "cpu"/"cuda": a test named "cuda" is skipped without a GPU)
EMITTERS = {"llvm_ir": Emitter, "cuda_c": CEmitter}


def test_the_interpreter_defines_every_op():
    assert sorted(n for n, op in nd.OPS_BY_NAME.items() if op not in MEANINGS) == []
    assert set(MEANINGS) <= set(nd.OPS_BY_NAME.values())


@pytest.mark.parametrize("table", ["stablehlo", "linalg"])
def test_the_upstream_lowerings_have_a_row_for_every_op(table):
    """The StableHLO export's and the mlir engine's: a lowering, or a refusal that names
    the op (collectives, fused attention)."""
    rows = {"stablehlo": STABLEHLO, "linalg": LINALG}[table]
    assert sorted(n for n, op in nd.OPS_BY_NAME.items() if op not in rows) == []
    assert set(rows) <= set(nd.OPS_BY_NAME.values())


@pytest.mark.parametrize("target", sorted(EMITTERS))
def test_every_emitter_lowers_every_op_but_the_kernel_roots(target):
    """Kernel roots (reductions, matmul, scatters) are lowered by the target's kernel
    bodies; every other op by the shared scalar emitter or the target's own tables."""
    emitter = EMITTERS[target]
    assert missing_lowerings(emitter) == []
    tables = (SHARED_RULES, emitter.RULES, emitter.ARITH)
    for op in nd.OPS_BY_NAME.values():
        rows = sum(op in t for t in tables)
        assert rows <= 1, f"{op.name} has {rows} lowerings in the {target} emitter"
        if op.has_trait(nd.KernelRoot):
            assert rows == 0, f"{op.name} is a kernel root but has a scalar lowering"


def test_the_check_finds_a_missing_row():
    class Partial(Emitter):
        ARITH = {k: v for k, v in Emitter.ARITH.items() if k is not nd.ExpOp}
    assert missing_lowerings(Partial) == ["exp"]


def test_both_targets_define_an_op_on_the_same_kinds_of_element_type():
    """The CPU and CUDA tables agree on which of float/int/bool an op is defined for, so
    a program that compiles for one target compiles for the other."""
    for op, rule in Emitter.ARITH.items():
        other = CEmitter.ARITH[op]
        for kind in ("float", "int", "bool"):
            assert (getattr(rule, kind) is None) == (getattr(other, kind) is None), \
                f"{op.name} on {kind}"
    assert set(Emitter.ARITH) == set(CEmitter.ARITH)
    assert set(Emitter.RULES) == set(CEmitter.RULES)


def test_traits_give_the_categories_passes_rely_on():
    """The op categories, read off the traits (no pass keeps a list of its own)."""
    def having(trait):
        return sorted(n for n, op in nd.OPS_BY_NAME.items() if op.has_trait(trait))
    assert having(nd.Movement) == ["broadcast_in_dim", "reshape", "slice", "transpose"]
    assert having(nd.IndexChanging) == ["broadcast_in_dim", "concat", "gather", "pad",
                                        "slice", "transpose"]
    assert having(nd.Generator) == ["constant", "iota"]
    assert having(nd.KernelRoot) == ["all_reduce_start", "all_reduce_wait", "argsort",
                                     "attention", "attention_grad", "cumprod",
                                     "cumsum", "matmul", "reduce_max", "reduce_sum", "scatter",
                                     "scatter_add"]
    assert {n: nd.kernel_root_kind(op) for n, op in nd.OPS_BY_NAME.items()
            if op.has_trait(nd.KernelRoot)} == {
        "all_reduce_start": "collective", "all_reduce_wait": "collective",
        "argsort": "sort", "attention": "attention", "attention_grad": "attention",
        "cumprod": "scan", "cumsum": "scan",
        "matmul": "matmul", "reduce_max": "reduce", "reduce_sum": "reduce",
        "scatter": "scatter", "scatter_add": "scatter"}
    assert "exp" in having(nd.Expensive) and "add" not in having(nd.Expensive)
    assert nd.ELEMENTWISE == frozenset(having(nd.Elementwise))
    with pytest.raises(ValueError, match="KernelRoot: kind 'loop'"):
        nd.KernelRoot("loop")
