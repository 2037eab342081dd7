"""Results written over an intermediate in place (``memory_plan``, step 3): an
elementwise kernel, and a CPU product whose K fits one block reading the intermediate
in its epilogue; the values are those of the interpreter, and a product with several K
blocks (whose output holds partial sums first) is never written in place."""
import numpy as np
import pytest

import nova as nv
from nova.runtime.cache import CACHE


def _plan():
    program = CACHE.last._program
    return program.memory_plan, {st.out: st.plan for st in program.steps}


def _data(*shapes):
    rs = np.random.RandomState(0)
    return [rs.randn(*s).astype(np.float32) for s in shapes]


@pytest.mark.parametrize("k", [64, 4000])
def test_a_product_epilogue_writes_over_the_value_it_adds_when_k_is_one_block(k):
    x, x2, w = _data((128, 96), (128, k), (k, 96))

    def step():                                   # a and y die with the call
        a = nv.tensor(x).softmax(-1)              # a row kernel's result, stored...
        y = nv.tensor(x2) @ nv.tensor(w) + a      # ...read last, pointwise, in the epilogue
        return y.sum(0) + y.amax(0)               # y: stored, read by two reductions
    got = step().numpy()
    plan, plans = _plan()
    in_place = {plans[new].kind: old for new, old in plan.in_place.items()}
    if k == 64:
        assert "matmul" in in_place                # one K block: C written once
    else:
        assert "matmul" not in in_place            # partial sums would clobber a
    x64 = x.astype(np.float64)
    e = np.exp(x64 - x64.max(1, keepdims=True))
    y64 = x2 @ w.astype(np.float64) + e / e.sum(1, keepdims=True)
    np.testing.assert_allclose(got, y64.sum(0) + y64.max(0), rtol=1e-4, atol=1e-3)


def test_an_elementwise_kernel_writes_over_a_product_it_reads_last():
    x, w = _data((1000, 33), (33, 48))

    def step():
        v = nv.tensor(x) @ nv.tensor(w)           # stored: read by two kernels,
        r = v.amax(0)                             # a column reduction first,
        e = v * r + 1.0                           # then this one, last and pointwise
        return e.sum(1) + e.amax(1)               # e: stored, read by two reductions
    got = step().numpy()
    plan, plans = _plan()
    assert [plans[new].kind for new in plan.in_place] == ["elementwise"]
    v64 = x.astype(np.float64) @ w.astype(np.float64)
    e64 = v64 * v64.max(0) + 1.0
    np.testing.assert_allclose(got, e64.sum(1) + e64.max(1), rtol=1e-4, atol=1e-2)
