"""The memory plan: donation, memory-aware order, arena offsets (and their checker)."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nova.runtime.memory_plan import (
    ALIGN,
    KernelUse,
    MemoryPlan,
    check_arena,
    plan_memory,
)


def _plan(n_args, kernels, outputs, arg_nbytes=None, arg_dtypes=None, reorder=True):
    arg_nbytes = arg_nbytes or [64] * n_args
    arg_dtypes = arg_dtypes or ["float32"] * n_args
    return plan_memory(n_args, kernels, tuple(outputs), arg_nbytes, arg_dtypes, reorder)


def test_hand_built_chain_reuses_dead_buffers():
    # arg 0 -> k0 -> s1 (1000 B) -> k1 -> s2 (1000 B) -> k2 -> s3 (1000 B) -> k3 -> s4 (result)
    # s1 dies at k1, so s3 can take its bytes: the arena holds two buffers, not three.
    ks = [KernelUse((0,), 1, 1000), KernelUse((1,), 2, 1000), KernelUse((2,), 3, 1000),
          KernelUse((3,), 4, 8)]
    plan = _plan(1, ks, [4])
    assert plan.order == [0, 1, 2, 3]
    assert plan.lifetimes == {1: (0, 1), 2: (1, 2), 3: (2, 3)}
    assert plan.offsets[1] == plan.offsets[3] != plan.offsets[2]
    assert plan.arena_bytes == 2 * 1024            # 1000 rounded up to the 64-byte grid
    assert plan.release == [[], [1], [2], [3]]
    check_arena(plan, ks)


def test_order_runs_a_freeing_kernel_as_soon_as_it_is_ready():
    # k0 makes a big gradient g; k1 (an "update") consumes it and writes a result over
    # donated arg 1; k2 and k3 are unrelated work that allocate. Program order would keep
    # g alive across k2/k3; the plan runs k1 right after k0.
    ks = [KernelUse((0,), 2, 4096),
          KernelUse((0,), 3, 64),
          KernelUse((3,), 4, 64),
          KernelUse((2, 1), 5, 64, pointwise=frozenset({1}), dtype="float32")]
    plan = _plan(2, ks, [4, 5], arg_nbytes=[64, 64])
    assert plan.donate == {3: 1}
    assert plan.order.index(3) == plan.order.index(0) + 1
    check_arena(plan, ks)


def test_donation_waits_for_every_other_reader_and_skips_unsafe_pairs():
    # k0 reads arg 0; k1 writes a result of arg 0's size reading it pointwise: donation
    # is fine once k0 ran. k2 writes over arg 1, but k3 reads arg 1 and depends on k2's
    # result: arg 1 cannot be donated. Args that are results, or differ in size or dtype,
    # are never donated.
    ks = [KernelUse((0,), 4, 64),
          KernelUse((0, 4), 5, 64, pointwise=frozenset({0}), dtype="float32"),
          KernelUse((1,), 6, 64, pointwise=frozenset({1}), dtype="float32"),
          KernelUse((1, 6), 7, 64),
          KernelUse((2,), 8, 32, pointwise=frozenset({2}), dtype="float32"),
          KernelUse((3,), 9, 64, pointwise=frozenset({3}), dtype="float64")]
    plan = _plan(4, ks, [5, 6, 7, 8, 9], arg_nbytes=[64, 64, 64, 64])
    assert plan.donate == {1: 0}
    assert plan.order.index(0) < plan.order.index(1)


def test_check_arena_catches_overlapping_live_buffers():
    ks = [KernelUse((0,), 1, 128), KernelUse((0,), 2, 128), KernelUse((1, 2), 3, 8)]
    plan = _plan(1, ks, [3])
    check_arena(plan, ks)
    broken = MemoryPlan(plan.order, {}, {1: 0, 2: 64}, {}, plan.arena_bytes, plan.release)
    with pytest.raises(AssertionError, match="overlap while both live"):
        check_arena(broken, ks)


def test_a_pointwise_last_reader_writes_over_its_input_in_place():
    # s1 = k0(arg 0); s2 = k1(s1 pointwise, arg 0); s3 = k2(s2 pointwise, arg 0); the
    # result k3(s3): each partial sum is read last, pointwise, by the kernel making the
    # next, so the three share one buffer (a chain of partial sums, #24).
    ks = [KernelUse((0,), 1, 1000, dtype="float32"),
          KernelUse((1, 0), 2, 1000, pointwise=frozenset({1}), dtype="float32"),
          KernelUse((2, 0), 3, 1000, pointwise=frozenset({2}), dtype="float32"),
          KernelUse((3,), 4, 8)]
    plan = _plan(1, ks, [4])
    assert plan.in_place == {2: 1, 3: 2}
    assert plan.offsets[1] == plan.offsets[2] == plan.offsets[3]
    assert plan.arena_bytes == 1024
    assert plan.live_lifetimes() == {1: (0, 0), 2: (1, 1), 3: (2, 3)}
    check_arena(plan, ks)


def test_no_in_place_over_a_value_read_later_or_of_another_size_or_dtype():
    ks = [KernelUse((0,), 1, 1000, dtype="float32"),
          KernelUse((1,), 2, 1000, pointwise=frozenset({1}), dtype="float32"),   # s1 read by k4
          KernelUse((2,), 3, 500, pointwise=frozenset({2}), dtype="float32"),    # other size
          KernelUse((3,), 5, 500, pointwise=frozenset({3}), dtype="int32"),      # other dtype
          KernelUse((1, 5), 4, 8)]
    plan = _plan(1, ks, [4])
    assert plan.in_place == {}
    check_arena(plan, ks)


def test_check_arena_refuses_an_in_place_pair_its_kernel_does_not_read_pointwise():
    ks = [KernelUse((0,), 1, 1000, dtype="float32"),
          KernelUse((1,), 2, 1000, dtype="float32"),          # reads s1, not pointwise
          KernelUse((2,), 3, 8)]
    plan = _plan(1, ks, [3])
    assert plan.in_place == {}
    broken = MemoryPlan(plan.order, {}, {1: 0, 2: 0}, {}, plan.arena_bytes, plan.release,
                        plan.lifetimes, in_place={2: 1})
    with pytest.raises(AssertionError, match="does not read last and pointwise"):
        check_arena(broken, ks)


@st.composite
def kernel_graphs(draw):
    """Random DAGs: each kernel reads 0-3 earlier slots (arguments or outputs of earlier
    kernels), some kernels are results, sizes vary over four orders of magnitude."""
    n_args = draw(st.integers(1, 4))
    n = draw(st.integers(1, 40))
    kernels = []
    for k in range(n):
        avail = n_args + k
        reads = tuple(draw(st.lists(st.integers(0, avail - 1), max_size=3)))
        nbytes = draw(st.sampled_from([4, 64, 100, 1000, 4096, 50000]))
        scratch = draw(st.sampled_from([0, 0, 0, 256]))
        pointwise = frozenset(a for a in reads if draw(st.booleans()))
        kernels.append(KernelUse(reads, n_args + k, nbytes, scratch, pointwise, "float32"))
    outputs = draw(st.lists(st.integers(n_args, n_args + n - 1), min_size=1, max_size=4))
    arg_nbytes = [draw(st.sampled_from([64, 1000])) for _ in range(n_args)]
    return n_args, kernels, outputs, arg_nbytes


@settings(max_examples=200, deadline=None)
@given(kernel_graphs(), st.booleans())
def test_random_plans_never_overlap_live_buffers(graph, reorder):
    n_args, kernels, outputs, arg_nbytes = graph
    plan = _plan(n_args, kernels, outputs, arg_nbytes, None, reorder)
    check_arena(plan, kernels)
    # the order is a topological order of the data dependences...
    position = {k: p for p, k in enumerate(plan.order)}
    assert sorted(plan.order) == list(range(len(kernels)))
    for k, ku in enumerate(kernels):
        for s in ku.reads:
            if s >= n_args:
                assert position[s - n_args] < position[k]
    # ...and every other reader of a donated argument runs before the kernel writing it
    for k, a in plan.donate.items():
        assert kernels[k].writes in outputs and a in kernels[k].pointwise
        assert arg_nbytes[a] == kernels[k].nbytes
        for j, kj in enumerate(kernels):
            if j != k and a in kj.reads:
                assert position[j] < position[k]
    # the arena is at least the liveness bound and every offset is aligned
    assert plan.arena_bytes >= plan.live_peak_bytes - 0
    assert all(o % ALIGN == 0 for o in [*plan.offsets.values(), *plan.scratch_offsets.values()])
    assert np.all(np.array(list(plan.offsets.values()) or [0]) < max(plan.arena_bytes, 1))


def test_two_donations_that_would_order_each_other_in_a_cycle_take_only_one():
    # k0 and k1 both read args 0 and 1; k0 writes over arg 0, k1 over arg 1. Each would
    # have to run after the other: only the first donation is taken.
    ks = [KernelUse((0, 1), 2, 64, pointwise=frozenset({0, 1}), dtype="float32"),
          KernelUse((0, 1), 3, 64, pointwise=frozenset({0, 1}), dtype="float32")]
    plan = _plan(2, ks, [2, 3])
    assert plan.donate == {0: 0}
    assert plan.order == [1, 0]


def test_planned_order_and_arena_give_the_program_order_results():
    import nova as nv
    from models.gpt import GPT, preset
    from nova.compiler.irgen import build_module
    from nova.compiler.passes import optimize
    from nova.runtime.cpu_engine import CpuProgram
    from nova.tensor.realize import pending_graph

    nv.manual_seed(0)
    cfg = preset("tiny")
    model = GPT(cfg)
    x = nv.tensor(np.random.default_rng(0).integers(0, 256, (2, cfg.block)))
    _, loss = model(x, x)
    loss.backward()
    grads = [p.grad for p in model.parameters()]
    graph = pending_graph(loss, *grads)
    planned = CpuProgram(optimize(build_module(graph)), reorder=True)
    in_order = CpuProgram(optimize(build_module(graph)), reorder=False)
    assert planned.memory_plan.order != in_order.memory_plan.order
    check_arena(planned.memory_plan, planned.uses)
    for a, b in zip(planned(graph.arg_buffers), in_order(graph.arg_buffers)):
        np.testing.assert_array_equal(a, b)


def test_a_kernel_whose_scratch_has_no_bytes_runs():
    """A size-0 dim gives a kernel's scratch no bytes, so no place in the arena: the
    step failed binding it ('NoneType' has no 'ctypes') and was rerun in pieces with a
    warning; it now gets an empty view."""
    import warnings

    import nova as nv
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        x = nv.zeros(2, 0, requires_grad=True)
        x.unsqueeze(-2).expand(2, 3, 0).sum(-1).sum().backward()
        assert x.grad.numpy().shape == (2, 0)       # realized: the step runs
