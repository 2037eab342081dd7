"""Realization semantics: lazy recording, one function for all live pending values,
nothing computed twice, and errors at the user's line."""
import gc

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
    with pytest.raises(TypeError, match="sub: subtraction of two bool tensors"):
        nv.tensor([True]) - nv.tensor([False])
    with pytest.raises(IndexError, match=r"amax: cannot reduce over a zero-size dimension"):
        nv.zeros(0, 3).amax(0)
    with pytest.raises(ValueError, match=r"masked_fill: mask of shape \(2, 2, 3\) cannot be "
                                         r"broadcast to the tensor's shape \(2, 3\)"):
        a.masked_fill(nv.zeros(2, 2, 3, dtype=nv.bool), 1.0)
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
