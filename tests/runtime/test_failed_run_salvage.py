"""What a run that a kernel failed leaves usable (``program.Salvage``): the results
computed before the failure and not reached by it, and the donated arguments written
over -- so that realization keeps a step's in-place updates rather than losing them with
the failure. Checked on ``Program`` through an interpreting launcher (no compiler), as a
kernel fails either as it runs (the CPU driver) or at the step's end (the GPU, whose
kernels all run and report their error flags once the step ends)."""
from __future__ import annotations

import ctypes
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pytest

import nova as nv
from nova.compiler.irgen import build_module
from nova.compiler.passes import optimize
from nova.runtime.interpreter import InterpreterError, run_region
from nova.runtime.program import LaunchLoop, Step, salvage_of
from nova.tensor.realize import pending_graph


def _writable(a: np.ndarray) -> np.ndarray:
    """The memory ``a`` names, writable (as a kernel writes it through a pointer: a
    donated argument is bound read-only, its owner is not)."""
    if a.flags.writeable:
        return a
    raw = (ctypes.c_char * a.nbytes).from_address(a.ctypes.data)
    return np.ctypeslib.as_array(raw).view(a.dtype).reshape(a.shape)


class Emulated(LaunchLoop):
    """Kernels run by the interpreter. ``fail_now`` names kernels that report a failure
    as they return (the CPU); a kernel whose op fails on its data (an index out of
    range) completes with zeros and reports at the step's end (the GPU: its kernels
    clamp the index and raise an error flag)."""

    target = "cpu"
    what = "emulated step"
    _empty = staticmethod(np.empty)

    def __init__(self, module: Any, fail_now: Sequence[str] = ()):
        self.fail_now = set(fail_now)
        self.failed: list[int] = []
        super().__init__(module)

    def _compile(self, module: Any, lowered: Any) -> list[tuple[Any, Any]]:
        return [(plan, plan.fusion.body.block) for plan in lowered.plans]

    def _allocate(self, nbytes: int) -> np.ndarray:
        return np.empty(nbytes, dtype=np.uint8)

    def _arguments(self, args: Sequence[Any]) -> list[Any]:
        return [np.ascontiguousarray(a) for a in args]

    def _begin(self) -> Callable[[int, Step, list[Any]], Any]:
        self.failed = []
        return self._launch

    def _launch(self, p: int, st: Step, values: list[Any]) -> int:
        out = _writable(values[st.out])
        try:
            (result,) = run_region(st.handle, [values[i] for i in st.inputs])
            np.copyto(out, np.asarray(result).reshape(st.shape))
        except InterpreterError:
            out[...] = 0
            self.failed.append(p)
        return int(st.plan.name in self.fail_now)

    def _finish(self) -> list[int]:
        return self.failed


def _step() -> tuple[Any, list[np.ndarray]]:
    """Outputs: 0 a reduction through an intermediate, 1 a pointwise result shaped like
    argument 0 (which it may be written over)."""
    rng = np.random.default_rng(0)
    a = nv.tensor(rng.standard_normal((6, 5)).astype(np.float32))
    b = nv.tensor(rng.standard_normal((5, 5)).astype(np.float32))
    graph = pending_graph(((a @ b).exp() * 2).sum(-1), a * 3 + 1)
    return optimize(build_module(graph)), [np.array(x) for x in graph.arg_buffers]


def _writer(program: Emulated, pos: int) -> int:
    """The plan position of the kernel writing output ``pos``."""
    slot = program.outputs[pos]
    return next(p for p, st in enumerate(program.steps) if st.out == slot)


@pytest.mark.parametrize("failing_output", [0, 1])
def test_a_kernel_failing_as_it_runs_leaves_the_results_finished_before_it(failing_output):
    module, args = _step()
    clean = Emulated(module)(args)
    probe = Emulated(module)
    p = _writer(probe, failing_output)
    program = Emulated(module, fail_now=[probe.steps[p].plan.name])
    assert program.donation_candidates == frozenset({0})
    with pytest.raises(InterpreterError) as e:
        program([x.copy() for x in args], frozenset({0}))
    salvage = salvage_of(e.value)
    assert e.value.outputs == (failing_output,)
    other = 1 - failing_output
    finished = _writer(program, other) < p
    assert set(salvage.results) == ({other} if finished else set())
    for pos, value in salvage.results.items():
        np.testing.assert_array_equal(value, clean[pos])     # right, bit for bit
    # the donated argument is written over if its kernel (output 1's) ran up to p
    assert salvage.overwritten == ({0} if _writer(program, 1) <= p else set())


def test_a_kernel_failing_at_the_end_leaves_every_result_it_does_not_reach():
    module, args = _step()
    clean = Emulated(module)(args)
    program = Emulated(module)
    upstream = next(p for p, st in enumerate(program.steps) if st.out not in program.outputs)
    name = program.steps[upstream].plan.name
    program.failed = [upstream]
    program._finish = lambda: [upstream]       # the exp's kernel raised its flag
    with pytest.raises(InterpreterError, match=rf"kernel {name}") as e:
        program([x.copy() for x in args], frozenset({0}))
    salvage = salvage_of(e.value)
    assert e.value.outputs == (0,) and set(salvage.results) == {1}
    np.testing.assert_array_equal(salvage.results[1], clean[1])
    assert salvage.overwritten == {0}
    with pytest.raises(InterpreterError) as e:      # nothing donated: nothing written
        program([x.copy() for x in args])
    assert salvage_of(e.value).overwritten == frozenset()


def _gpu_like(monkeypatch: pytest.MonkeyPatch) -> list[Emulated]:
    """Every cpu step realized from now on runs on ``Emulated``: its kernels report
    failures at the end, as a GPU's do. Returns the programs made."""
    from nova.compiler.pipeline import front
    from nova.runtime.executable import Executable
    from nova.tensor import realize as realization

    made: list[Emulated] = []

    def emulated(graph, engine, remat, backend=None, label=""):
        exe = Executable(front(graph, remat, engine), "interp")
        exe.engine = "cpu"        # (runs a Program: plans memory, donates)
        exe._program = Emulated(exe.module)
        made.append(exe._program)
        return exe

    monkeypatch.setattr(realization, "_compile", emulated)
    return made


def _sgd_step() -> nv.Tensor:
    w = nv.nn.Parameter(nv.tensor(np.array([1.0, 2.0, 3.0, 4.0], np.float32)))
    opt = nv.optim.SGD([w], lr=0.1)
    (w * w).sum().backward()
    opt.step()
    return w


def test_a_step_failing_at_its_end_keeps_its_updates(monkeypatch, fresh_cache):
    """As on a GPU: every kernel ran, the parameter's update was written over its old
    value, and a gather unrelated to it failed. The update is kept, bit for bit."""
    from nova.runtime.cache import CACHE

    with nv.engine("cpu"):
        made = _gpu_like(monkeypatch)
        ref = _sgd_step().detach().numpy()
        w = _sgd_step()
        table = nv.tensor(np.array([5.0, 6.0], np.float32))
        bad = nv.gather(table, 0, nv.tensor(np.array([0, 1])) + 8)
        np.testing.assert_array_equal(w.detach().numpy(), ref)
        assert made[-1].failed and CACHE.last.last_donated    # failed at the end, donated
        np.testing.assert_array_equal(w.detach().numpy(), ref)
        for _ in range(2):       # (a GPU names the kernel whose flag was raised)
            with pytest.raises(nv.RealizationError, match=r"^cpu: kernel nova_k_\w+ "
                                                          r"\(\w+\) reported an index out"):
                bad.numpy()
    np.testing.assert_allclose(ref, [0.8, 1.6, 2.4, 3.2], rtol=1e-6)
