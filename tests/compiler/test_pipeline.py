"""nova.compiler.pipeline: the stages in order, each the input of the next, and the one
definition the engines and the debug dumps share."""
import pytest

import nova as nv
from nova.compiler import pipeline
from nova.tensor.realize import pending_graph


def _graph():
    x = nv.tensor([[1.0, -2.0], [3.0, 4.0]])
    return pending_graph(((x @ x).relu() + 1).sum(-1))


def test_stages_in_order_from_the_recorded_function_to_planned_kernels():
    names, results = zip(*pipeline.stages(_graph()))
    assert names == pipeline.STAGES == ("trace", "nova", "fused")
    trace, nova_fn, lowered = results
    assert "nova.matmul" in str(trace) and "nova.fusion" not in str(nova_fn)
    assert isinstance(lowered, pipeline.CompiledStep) and lowered.target == "cpu"
    fusions = [op for op in lowered.function.body.block.ops if op.name == "nova.fusion"]
    assert len(fusions) == len(lowered.plans) >= 1
    text = lowered.text()
    assert text.startswith("builtin.module")
    assert [line.startswith("// nova_k_") for line in text.splitlines()].count(True) == \
        len(lowered.plans)


def test_dump_ir_shows_exactly_the_pipelines_stages():
    x = nv.tensor([[1.0, -2.0], [3.0, 4.0]])
    y = ((x @ x).relu() + 1).sum(-1)
    graph = pending_graph(y)
    by_stage = dict(pipeline.stages(graph))
    assert nv.debug.dump_ir(y, stage="trace") == str(by_stage["trace"])
    assert nv.debug.dump_ir(y) == str(by_stage["nova"])
    assert nv.debug.dump_ir(y, stage="fused") == by_stage["fused"].text()


def test_front_is_the_nova_stage_and_lower_checks_its_target():
    graph = _graph()
    assert str(pipeline.front(graph)) == str(dict(pipeline.stages(graph))["nova"])
    with pytest.raises(ValueError, match="compile_step: unknown target 'tpu'"):
        pipeline.compile_step(pipeline.front(graph), "tpu")
    assert pipeline.compile_step(pipeline.front(graph), "cuda").target == "cuda"


def test_wiring_numbers_arguments_then_one_slot_per_kernel():
    """Arguments take slots 0..n-1 and kernel k's result n + k; every kernel reads only
    earlier slots, and the step returns kernel results (or arguments)."""
    x = nv.tensor([[1.0, -2.0], [3.0, 4.0]])
    w = nv.tensor([[0.5, 0.0], [1.0, 2.0]])
    y = (x @ w).relu() + x
    z = y.sum(-1)
    lowered = pipeline.compile_step(pipeline.front(pending_graph(y, z)))
    wiring = lowered.wiring()
    assert wiring.n_args == 2 and [s for s, _ in wiring.arg_types] == [(2, 2), (2, 2)]
    assert len(wiring.inputs) == len(lowered.plans)
    for k, reads in enumerate(wiring.inputs):
        assert reads and all(r < wiring.n_args + k for r in reads)
    assert len(wiring.outputs) == 2
    assert all(wiring.n_args <= o < wiring.n_args + len(lowered.plans) for o in wiring.outputs)
