"""``Program``'s target-neutral part, checked through a launcher of its own.

``InterpretingProgram`` launches each fused kernel by running its region with the
interpreter and copying the result into the buffer the run loop chose (its arena view,
the donated argument, or a fresh array). So these tests see what ``Program`` decides —
which buffer each result lands in, when donated memory is written, which outputs a
failing kernel can have affected — apart from any compiler, and against the cpu
engine's ``CpuProgram`` on the same module.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pytest

import nova as nv
from nova.compiler.irgen import build_module
from nova.compiler.passes import optimize
from nova.runtime.cpu_engine import CpuProgram
from nova.runtime.interpreter import InterpreterError, run_region
from nova.runtime.program import LaunchLoop, Program, Step
from nova.tensor.realize import pending_graph


class InterpretingProgram(LaunchLoop):
    """Kernels run by the interpreter; ``fail_now``/``fail_at_end`` name kernels whose
    launch reports a failure as it returns, or once the step ends."""

    target = "cpu"
    what = "interpreted step"
    _empty = staticmethod(np.empty)

    def __init__(self, module: Any, fail_now: Sequence[str] = (),
                 fail_at_end: Sequence[str] = ()):
        self.fail_now, self.fail_at_end = set(fail_now), set(fail_at_end)
        self.allocations = 0
        super().__init__(module)

    def _compile(self, module: Any, lowered: Any) -> list[tuple[Any, Any]]:
        return [(plan, plan.fusion.body.block) for plan in lowered.plans]

    def _allocate(self, nbytes: int) -> np.ndarray:
        self.allocations += 1
        return np.empty(nbytes, dtype=np.uint8)

    def _arguments(self, args: Sequence[Any]) -> list[Any]:
        return [np.ascontiguousarray(a) for a in args]

    def _begin(self) -> Callable[[int, Step, list[Any]], Any]:
        return self._launch

    def _launch(self, p: int, st: Step, values: list[Any]) -> int:
        (result,) = run_region(st.handle, [values[i] for i in st.inputs])
        np.copyto(values[st.out], np.asarray(result).reshape(st.shape))
        return int(st.plan.name in self.fail_now)

    def _finish(self) -> list[int]:
        return [p for p, st in enumerate(self.steps) if st.plan.name in self.fail_at_end]


def _step() -> tuple[Any, list[np.ndarray]]:
    """A module with an intermediate (the matmul's exp), a result reduced from it, and a
    pointwise result shaped like argument ``a`` (so ``a`` can be donated to it)."""
    rng = np.random.default_rng(0)
    a = nv.tensor(rng.standard_normal((6, 5)).astype(np.float32))
    b = nv.tensor(rng.standard_normal((5, 5)).astype(np.float32))
    graph = pending_graph(((a @ b).exp() * 2).sum(-1), a * 3 + 1)
    return optimize(build_module(graph)), [np.array(x) for x in graph.arg_buffers]


def _by_output(program: Program) -> dict[int, Step]:
    """The step that writes each of the program's outputs, by output position."""
    writer = {st.out: st for st in program.steps}
    return {pos: writer[slot] for pos, slot in enumerate(program.outputs)}


def test_results_match_the_cpu_engine_and_intermediates_live_in_one_arena():
    module, args = _step()
    program, cpu = InterpretingProgram(module), CpuProgram(module)
    assert program.memory_plan.order == cpu.memory_plan.order   # the same plan
    assert program.donation_candidates == cpu.donation_candidates == frozenset({0})
    for _ in range(2):
        got, ref = program(args), cpu(args)
        for g, r in zip(got, ref):
            np.testing.assert_allclose(g, r, rtol=1e-5, atol=1e-5)
    assert program.allocations == 1                  # the arena is kept for later runs
    assert program._views and all(np.shares_memory(v, program._arena_buffer)
                                  for v in program._views.values())
    assert not any(np.shares_memory(g, program._arena_buffer) for g in got)   # escaped


def test_a_donated_argument_holds_its_result_and_is_overwritten():
    module, args = _step()
    program = InterpretingProgram(module)
    expected = args[0] * 3 + 1
    kept = program(args)
    assert not program.overwrote_donated and not np.shares_memory(kept[1], args[0])
    donated = [a.copy() for a in args]
    results = program(donated, frozenset({0}))
    assert program.overwrote_donated
    assert np.shares_memory(results[1], donated[0])   # written in place
    np.testing.assert_array_equal(donated[0], expected)
    np.testing.assert_array_equal(results[0], kept[0])


def test_a_kernel_failing_at_the_end_fails_only_the_outputs_it_feeds():
    module, args = _step()
    steps = _by_output(InterpretingProgram(module))
    name, kind = steps[1].plan.name, steps[1].plan.kind
    program = InterpretingProgram(module, fail_at_end=[name])
    with pytest.raises(InterpreterError, match=rf"^cpu: kernel {name} \({kind}\) reported "
                                               "an index out of range") as e:
        program(args)
    assert e.value.outputs == (1,)
    # the exp intermediate feeds only the sum: output 0 alone
    upstream = next(st for st in program.steps if st.out not in program.outputs)
    program = InterpretingProgram(module, fail_at_end=[upstream.plan.name])
    with pytest.raises(InterpreterError) as e:
        program(args)
    assert e.value.outputs == (0,)


def test_a_kernel_failing_as_it_runs_stops_the_step_and_names_itself():
    module, args = _step()
    steps = _by_output(InterpretingProgram(module))
    name, kind = steps[0].plan.name, steps[0].plan.kind
    program = InterpretingProgram(module, fail_now=[name])
    with pytest.raises(InterpreterError, match=rf"^kernel {name} \({kind}\) reported an "
                                               "index out of range or an integer division"
                                               ) as e:
        program(args, frozenset({0}))
    assert e.value.outputs == (0,)
    # donated memory was written if, and only if, the donating kernel ran first
    order = [st.plan.name for st in program.steps]
    donating = _by_output(program)[1].plan.name
    assert program.overwrote_donated == (order.index(donating) < order.index(name))
