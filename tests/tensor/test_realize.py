"""Realization semantics: lazy recording, one function for all live pending values,
nothing computed twice, and errors at the user's line."""
import gc
import warnings

import numpy as np
import pytest

import nova as nv
from nova.tensor.trace import live_pending


def test_ops_record_without_computing():
    x = nv.tensor([1.0, 2.0])
    y = (x * 2).exp()
    assert not y.node.realized and y.node.op == "exp"
    assert x.node.realized


def test_one_realization_computes_every_live_pending_tensor(fresh_cache):
    x = nv.tensor([1.0, 2.0])
    a = x + 1
    b = a * 3
    c = b.sum()
    assert c.item() == 15.0
    assert a.node.realized and b.node.realized  # computed in the same function
    assert a.tolist() == [2.0, 3.0] and b.tolist() == [6.0, 9.0]
    assert nv.debug.cache_stats().misses == 1  # nothing ran twice


def test_dropped_intermediates_are_not_outputs(fresh_cache):
    x = nv.tensor([1.0, 2.0])
    y = ((x + 1) * 2).sum()
    gc.collect()
    ir = nv.debug.dump_ir(y)
    assert ir.count("func.return") == 1 and "-> tensor<f32>" in ir
    y.item()
    assert len(live_pending) == 0


def test_realize_explicit_and_failed_values_do_not_poison_others():
    x = nv.tensor([1.0, 4.0])
    y = x.sqrt()
    nv.realize(y)
    assert y.node.realized and y.tolist() == [1.0, 2.0]
    with pytest.raises(TypeError, match="realize: expected tensors"):
        nv.realize(3)


def test_errors_raise_at_record_time_with_shapes():
    a, b = nv.zeros(2, 3), nv.zeros(4, 3)
    with pytest.raises(ValueError, match=r"add: shapes \(2, 3\) and \(4, 3\) cannot be broadcast "
                                         r"together \(dim -2 has sizes \[2, 4\]\)"):
        a + b
    with pytest.raises(ValueError, match=r"where: shapes"):
        nv.where(nv.zeros(5, dtype=nv.bool), a, a)
    with pytest.raises(TypeError, match="where: condition must be a bool tensor, got float32"):
        nv.where(a, a, a)
    with pytest.raises(TypeError, match=r"mul: expected a Tensor or a Python number, got str"):
        a * "x"
    with pytest.raises(TypeError, match="mean: input dtype must be floating point, got int64"):
        nv.tensor([1, 2]).mean()
    with pytest.raises(TypeError, match="sub: subtraction, the `-` operator, with two bool "
                                        "tensors is not supported"):
        nv.tensor([True]) - nv.tensor([False])
    with pytest.raises(IndexError, match=r"amax: cannot reduce over a zero-size dimension"):
        nv.zeros(0, 3).amax(0)
    with pytest.raises(ValueError, match=r"masked_fill_: mask of shape \(2, 2, 3\) cannot be "
                                         r"broadcast to the tensor's shape \(2, 3\)"):
        a.clone().masked_fill_(nv.zeros(2, 2, 3, dtype=nv.bool), 1.0)
    with pytest.raises(ValueError, match=r"masked_fill: shapes \(2, 3\) and \(3, 3\)"):
        a.masked_fill(nv.zeros(3, 3, dtype=nv.bool), 1.0)
    with pytest.raises(ValueError, match="gelu: approximate must be 'none' or 'tanh'"):
        nv.gelu(a, approximate="fast")
    with pytest.raises(TypeError, match=r"sum: dim must be an int, a tuple of ints or None, got float 1.5"):
        a.sum(1.5)


def test_numpy_scalars_and_arrays_interoperate():
    x = nv.tensor([1.0, 2.0])
    assert (x * np.float32(2)).tolist() == [2.0, 4.0]
    assert np.asarray(x).tolist() == [1.0, 2.0]


# ---------------------------------------------------------------- failures poison only
# what depends on them (#17)

def test_out_of_memory_leaves_later_realizations_alone():
    """A tensor too large for memory raises MemoryError when asked for; it stays
    pending (askable again) but never again fails an unrelated realization."""
    big = nv.zeros(10**6, 10**6) + 1.0
    with pytest.raises(MemoryError):
        big.numpy()
    assert (nv.ones(2) + 1).tolist() == [2.0, 2.0]
    c = nv.ones(3) * 2                 # pending beside ``big``: computed, not blocked
    assert c.tolist() == [2.0, 2.0, 2.0]
    with pytest.raises(MemoryError):   # asked again: tried again, fails again
        big.numpy()
    assert not big.node.realized and big.node.op != "error"


def test_a_step_over_the_memory_limit_fails_alone_and_can_be_retried(engine):
    if engine != "cpu":
        pytest.skip("the interpreter plans no memory, so it has no limit")
    x = nv.tensor(np.ones((256, 256), np.float32))
    heavy = ((x * 2).exp() @ (x + 1)).sum()
    nv.debug.set_memory_limit(200_000)
    try:
        with pytest.raises(nv.NovaOutOfMemoryError):
            heavy.item()
        assert (nv.ones(4) * 3).tolist() == [3.0] * 4     # small: fits the limit
    finally:
        nv.debug.set_memory_limit(None)
    assert heavy.item() > 0


def test_a_compiler_failure_poisons_only_the_values_that_need_it(monkeypatch):
    """An unattributed failure (here an injected compiler error for any step that holds
    an ``exp``) of a step with several outputs: the others are computed; the failing
    one stays pending (the cause may go away) and raises its error whenever asked, and
    so does what is built on it, while unrelated realizations are not held up."""
    from nova.tensor import realize as realization
    real = realization._compile

    def failing(graph, *args):
        if any(n.op == "exp" for n in graph.nodes):
            raise RuntimeError("injected compiler bug")
        return real(graph, *args)

    monkeypatch.setattr(realization, "_compile", failing)
    nv.debug.reset_cache()
    x = nv.arange(4, dtype=nv.float32)
    bad = x.exp()
    good = x * 2 + 1
    others = [x + k for k in range(5)]
    assert good.tolist() == [1.0, 3.0, 5.0, 7.0]       # realized beside ``bad``
    assert all(o.node.realized for o in others)
    assert not bad.node.realized and bad.node.op == "exp"
    with pytest.raises(RuntimeError, match="injected compiler bug"):
        bad.numpy()
    with pytest.raises(RuntimeError, match="injected compiler bug"):
        (bad + 1).numpy()
    assert (x - 1).tolist() == [-1.0, 0.0, 1.0, 2.0]
    monkeypatch.setattr(realization, "_compile", real)      # the cause is gone:
    np.testing.assert_allclose(bad.numpy(), np.exp(np.arange(4)), rtol=1e-6)


def test_a_failure_that_smaller_steps_avoid_is_still_reported(monkeypatch):
    """A compiler bug that only the whole step meets (here: any step of more than one
    output fails): its values are computed in smaller steps, and right, but the failure
    is reported with a warning naming it, not swallowed by the retry."""
    from nova.tensor import realize as realization
    real = realization._compile

    def failing(graph, *args):
        if len(graph.outputs) > 1:
            raise RuntimeError("injected: the fused kernel does not compile")
        return real(graph, *args)

    monkeypatch.setattr(realization, "_compile", failing)
    nv.debug.reset_cache()
    x = nv.arange(4, dtype=nv.float32)
    a, b = x * 2, x + 1
    with pytest.warns(RuntimeWarning, match=r"a step computing 2 values failed \(RuntimeError: "
                                            r"injected: the fused kernel does not compile\)"):
        nv.realize(a, b)
    assert a.tolist() == [0.0, 2.0, 4.0, 6.0] and b.tolist() == [1.0, 2.0, 3.0, 4.0]


@pytest.mark.parametrize("error", [RuntimeError("injected: the kernel loader failed"),
                                   MemoryError("injected: out of memory")])
def test_a_failure_every_part_of_the_step_meets_stops_the_splitting(monkeypatch, error):
    """A failure that is not any one output's (every step fails alike: on the first GPU
    run, a kernel loader's error) is found in both halves of the step and not split
    further -- 3 tries, not 2n - 1 (each a compile); the values stay pending and the
    error is raised for those asked for. Out of memory still splits down to single
    outputs: smaller steps may fit."""
    from nova.tensor import realize as realization
    real, tries = realization._compile, []

    def failing(graph, *args):
        tries.append(len(graph.outputs))
        raise error

    monkeypatch.setattr(realization, "_compile", failing)
    nv.debug.reset_cache()
    x = nv.tensor(np.arange(4, dtype=np.float32))
    outs = [x * float(k) for k in range(8)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        with pytest.raises(type(error), match="injected"):
            nv.realize(*outs)
    if isinstance(error, MemoryError):
        assert len(tries) == 15 and sorted(tries)[:8] == [1] * 8
    else:
        assert tries == [8, 4, 4]
    assert not any(o.node.realized or o.node.op == "error" for o in outs)
    monkeypatch.setattr(realization, "_compile", real)      # the cause is gone:
    assert [o.tolist()[1] for o in outs] == [float(k) for k in range(8)]


def test_a_run_time_index_error_fails_only_the_tensors_that_read_it():
    x = nv.arange(6, dtype=nv.float32)
    base = nv.tensor([2])                # held: its buffer is not donated to ``idx``
    idx = base + 5                       # 7: known only when the step runs
    bad = x[idx]
    good = x * 10
    assert good.tolist() == [0.0, 10.0, 20.0, 30.0, 40.0, 50.0]
    with pytest.raises(nv.RealizationError, match="out of (range|bounds)"):
        bad.numpy()
    assert (x + 1).tolist()[0] == 1.0


def test_mark_role_names_a_step_input_for_the_memory_report(fresh_cache, engine):
    """The explicit API the optimizer uses (instead of writing a registry): a marked
    value is counted under its role, an unmarked one as an input (the memory report is
    the compiled engine's); a bad role is refused."""
    from nova.tensor.realize import mark_role, role_of
    w = nv.tensor(np.ones((4, 4), np.float32))
    x = nv.tensor(np.ones((4, 4), np.float32))
    assert role_of(w) == "input"
    mark_role(w, "parameter")
    assert role_of(w) == "parameter" and role_of(x) == "input"
    (w @ x).sum().item()
    if engine == "cpu":
        assert nv.debug.memory_report().categories["parameter"] == 64
    with pytest.raises(ValueError, match=r"mark_role: role 'weights' is not one of .*"
                                         r"shape \(4, 4\), float32"):
        mark_role(w, "weights")
