"""Shape errors are ``ValueError`` (Nova's convention) and ``RuntimeError`` (what
PyTorch raises for the same calls), so ported code that catches either still catches
them; dtype errors (a tensor of a dtype the op does not take) are likewise ``TypeError``
and ``RuntimeError``, while a Python argument of the wrong type stays a plain
``TypeError``, as in PyTorch; running out of memory is a ``MemoryError`` and a
``RuntimeError`` (PyTorch's ``OutOfMemoryError`` is one) whose message says "out of
memory"."""
import numpy as np
import pytest

import nova as nv
import nova.nn.functional as F
from nova.core.errors import ArgumentError, DTypeError, IndexRangeError, ShapeError

# Each call raises RuntimeError in PyTorch 2.x (torch.ones(...) in place of nv.ones).
SHAPE_MISMATCHES = {
    "matmul": lambda: nv.ones(2, 3) @ nv.ones(2, 3),
    "linear": lambda: F.linear(nv.ones(4, 3), nv.ones(5, 4)),
    "broadcast": lambda: nv.ones(2, 3) + nv.ones(4),
    "view": lambda: nv.ones(6).view(4),
    "reshape -1": lambda: nv.ones(6).reshape(4, -1),
    "cat": lambda: nv.cat([nv.ones(2, 3), nv.ones(2, 4)]),
    "stack": lambda: nv.stack([nv.ones(2), nv.ones(3)]),
    "expand": lambda: nv.ones(2, 3).expand(4, 4),
    "permute": lambda: nv.ones(2, 3).permute(0, 0),
    "gather": lambda: nv.ones(2, 3).gather(1, nv.zeros(2, 3, 1, dtype=nv.int64)),
    "masked_fill": lambda: nv.ones(2, 3).masked_fill(nv.ones(4, dtype=nv.bool), 0.0),
    "conv2d channels": lambda: F.conv2d(nv.ones(1, 3, 8, 8), nv.ones(4, 2, 3, 3)),
}


@pytest.mark.parametrize("case", SHAPE_MISMATCHES)
def test_a_shape_mismatch_is_caught_as_runtime_error_and_as_value_error(case):
    with pytest.raises(RuntimeError) as caught:
        SHAPE_MISMATCHES[case]()
    assert isinstance(caught.value, ValueError) and type(caught.value) is ShapeError


def _ints(*shape):
    return nv.zeros(*shape, dtype=nv.int64)


def _bools(*shape):
    return nv.ones(*shape, dtype=nv.bool)


# Each call raises RuntimeError in PyTorch 2.x (TORCH_DTYPE_MISMATCHES, the same calls).
DTYPE_MISMATCHES = {
    "gather float index": lambda: nv.ones(2, 3).gather(1, nv.zeros(2, 1)),
    "scatter float index": lambda: nv.ones(2, 3).scatter(1, nv.zeros(2, 1), 0.0),
    "take float index": lambda: nv.take(nv.ones(3), nv.zeros(2)),
    "index_put values": lambda: nv.ones(3).index_put((_ints(1),),
                                                     nv.ones(1, dtype=nv.float64)),
    "embedding float indices": lambda: F.embedding(nv.zeros(2), nv.ones(4, 3)),
    "nn.Embedding float indices": lambda: nv.nn.Embedding(4, 3)(nv.zeros(2)),
    "embedding_bag float indices": lambda: F.embedding_bag(nv.zeros(2, 2), nv.ones(5, 3)),
    "bitwise_and floats": lambda: nv.ones(2) & nv.ones(2),
    "shift a float": lambda: nv.bitwise_left_shift(nv.ones(2), 1),
    "matmul float32 @ float64": lambda: nv.ones(2, 3) @ nv.ones(3, 2, dtype=nv.float64),
    "linear float64 input": lambda: nv.nn.Linear(3, 4)(nv.ones(2, 3, dtype=nv.float64)),
    "conv2d float64 weight": lambda: F.conv2d(nv.ones(1, 3, 8, 8),
                                              nv.ones(4, 3, 3, 3, dtype=nv.float64)),
    "cross_entropy float target": lambda: F.cross_entropy(nv.ones(2, 3), nv.zeros(2)),
    "cross_entropy int probabilities": lambda: F.cross_entropy(nv.ones(2, 3), _ints(2, 3)),
    "nll_loss float target": lambda: F.nll_loss(nv.ones(2, 3), nv.zeros(2)),
    "mean of ints": lambda: _ints(3).mean(),
    "std of ints": lambda: _ints(3).std(),
    "where float condition": lambda: nv.where(nv.ones(2), nv.ones(2), nv.zeros(2)),
    "masked_fill float mask": lambda: nv.ones(2).masked_fill(nv.ones(2), 0.0),
    "sub bools": lambda: _bools(2) - _bools(2),
    "neg bool": lambda: -_bools(2),
    "one_hot float": lambda: F.one_hot(nv.zeros(2)),
    "BatchNorm1d int input": lambda: nv.nn.BatchNorm1d(3)(_ints(2, 3)),
    "linalg.inv ints": lambda: nv.linalg.inv(_ints(3, 3)),
    "linalg.solve float32, float64": lambda: nv.linalg.solve(nv.eye(3),
                                                             nv.ones(3, 1, dtype=nv.float64)),
    "quantile of ints": lambda: nv.quantile(_ints(3), 0.5),
    "normal_ on ints": lambda: _ints(2).normal_(),
}


@pytest.mark.parametrize("case", DTYPE_MISMATCHES)
def test_a_dtype_mismatch_is_caught_as_runtime_error_and_as_type_error(case):
    with pytest.raises(RuntimeError) as caught:
        DTYPE_MISMATCHES[case]()
    assert isinstance(caught.value, TypeError) and type(caught.value) is DTypeError


# DTYPE_MISMATCHES' calls in PyTorch (t: torch, F: torch.nn.functional).
TORCH_DTYPE_MISMATCHES = {
    "gather float index": lambda t, F: t.ones(2, 3).gather(1, t.zeros(2, 1)),
    "scatter float index": lambda t, F: t.ones(2, 3).scatter(1, t.zeros(2, 1), 0.0),
    "take float index": lambda t, F: t.take(t.ones(3), t.zeros(2)),
    "index_put values": lambda t, F: t.ones(3).index_put((t.zeros(1, dtype=t.int64),),
                                                         t.ones(1, dtype=t.float64)),
    "embedding float indices": lambda t, F: F.embedding(t.zeros(2), t.ones(4, 3)),
    "nn.Embedding float indices": lambda t, F: t.nn.Embedding(4, 3)(t.zeros(2)),
    "embedding_bag float indices": lambda t, F: F.embedding_bag(t.zeros(2, 2), t.ones(5, 3)),
    "bitwise_and floats": lambda t, F: t.ones(2) & t.ones(2),
    "shift a float": lambda t, F: t.bitwise_left_shift(t.ones(2), 1),
    "matmul float32 @ float64": lambda t, F: t.ones(2, 3) @ t.ones(3, 2, dtype=t.float64),
    "linear float64 input": lambda t, F: t.nn.Linear(3, 4)(t.ones(2, 3, dtype=t.float64)),
    "conv2d float64 weight": lambda t, F: F.conv2d(t.ones(1, 3, 8, 8),
                                                   t.ones(4, 3, 3, 3, dtype=t.float64)),
    "cross_entropy float target": lambda t, F: F.cross_entropy(t.ones(2, 3), t.zeros(2)),
    "cross_entropy int probabilities": lambda t, F: F.cross_entropy(
        t.ones(2, 3), t.zeros(2, 3, dtype=t.int64)),
    "nll_loss float target": lambda t, F: F.nll_loss(t.ones(2, 3), t.zeros(2)),
    "mean of ints": lambda t, F: t.zeros(3, dtype=t.int64).mean(),
    "std of ints": lambda t, F: t.zeros(3, dtype=t.int64).std(),
    "where float condition": lambda t, F: t.where(t.ones(2), t.ones(2), t.zeros(2)),
    "masked_fill float mask": lambda t, F: t.ones(2).masked_fill(t.ones(2), 0.0),
    "sub bools": lambda t, F: t.ones(2, dtype=t.bool) - t.ones(2, dtype=t.bool),
    "neg bool": lambda t, F: -t.ones(2, dtype=t.bool),
    "one_hot float": lambda t, F: F.one_hot(t.zeros(2)),
    "BatchNorm1d int input": lambda t, F: t.nn.BatchNorm1d(3)(t.zeros(2, 3, dtype=t.int64)),
    "linalg.inv ints": lambda t, F: t.linalg.inv(t.zeros(3, 3, dtype=t.int64)),
    "linalg.solve float32, float64": lambda t, F: t.linalg.solve(
        t.eye(3), t.ones(3, 1, dtype=t.float64)),
    "quantile of ints": lambda t, F: t.quantile(t.zeros(3, dtype=t.int64), 0.5),
    "normal_ on ints": lambda t, F: t.zeros(2, dtype=t.int64).normal_(),
}


def test_the_pytorch_table_has_the_same_calls():
    assert TORCH_DTYPE_MISMATCHES.keys() == DTYPE_MISMATCHES.keys()


@pytest.mark.parametrize("case", TORCH_DTYPE_MISMATCHES)
def test_pytorch_raises_runtime_error_for_the_same_dtype_mismatch(case):
    torch = pytest.importorskip("torch")
    with pytest.raises(RuntimeError):   # (NotImplementedError, "not implemented for", is one)
        TORCH_DTYPE_MISMATCHES[case](torch, torch.nn.functional)


# A Python argument of the wrong type: a plain TypeError, in PyTorch too.
ARGUMENT_TYPE_ERRORS = {
    "sum dim a str": (lambda: nv.ones(2).sum(dim="a"),
                      lambda t: t.ones(2).sum(dim="a")),
    "take a list index": (lambda: nv.take(nv.ones(3), [0]),
                          lambda t: t.take(t.ones(3), [0])),
    "cummax dim a float": (lambda: nv.cummax(nv.ones(3), 0.5),
                           lambda t: t.cummax(t.ones(3), 0.5)),
}


@pytest.mark.parametrize("case", ARGUMENT_TYPE_ERRORS)
def test_a_python_argument_of_the_wrong_type_stays_a_plain_type_error(case):
    with pytest.raises(TypeError) as caught:
        ARGUMENT_TYPE_ERRORS[case][0]()
    assert type(caught.value) is TypeError and not isinstance(caught.value, RuntimeError)


@pytest.mark.parametrize("case", ARGUMENT_TYPE_ERRORS)
def test_pytorch_raises_a_plain_type_error_for_a_python_argument_too(case):
    torch = pytest.importorskip("torch")
    with pytest.raises(TypeError) as caught:
        ARGUMENT_TYPE_ERRORS[case][1](torch)
    assert not isinstance(caught.value, RuntimeError)


# Argument values PyTorch refuses with a RuntimeError (and, for float(), a ValueError),
# index values out of range and empty reductions (PyTorch: RuntimeError for some ops,
# IndexError for others): each call as (nova, torch, the class Nova raises, the class
# PyTorch raises). Nova raises a class that is both, so either ``except`` catches it.
VALUE_ERRORS = {
    "one_hot class past num_classes": (lambda: F.one_hot(nv.tensor([5]), 3),
                                       lambda t: t.nn.functional.one_hot(t.tensor([5]), 3),
                                       ArgumentError, RuntimeError),
    "randint empty range": (lambda: nv.randint(5, 5, (2,)),
                            lambda t: t.randint(5, 5, (2,)), ArgumentError, RuntimeError),
    "multinomial too many samples": (lambda: nv.multinomial(nv.ones(3), 5),
                                     lambda t: t.multinomial(t.ones(3), 5),
                                     ArgumentError, RuntimeError),
    "split sections": (lambda: nv.arange(5).split([2, 2]),
                       lambda t: t.arange(5).split([2, 2]), ArgumentError, RuntimeError),
    "reflect pad too wide": (lambda: F.pad(nv.zeros(1, 1, 3), (3, 0), mode="reflect"),
                             lambda t: t.nn.functional.pad(t.zeros(1, 1, 3), (3, 0),
                                                           mode="reflect"),
                             ArgumentError, RuntimeError),
    "float of two elements": (lambda: float(nv.zeros(2)), lambda t: float(t.zeros(2)),
                              ArgumentError, ValueError),
    "item of two elements": (lambda: nv.zeros(2).item(), lambda t: t.zeros(2).item(),
                             ArgumentError, RuntimeError),
    "gather index out of range": (lambda: nv.zeros(3).gather(0, nv.tensor([7])),
                                  lambda t: t.zeros(3).gather(0, t.tensor([7])),
                                  IndexRangeError, RuntimeError),
    "scatter index out of range": (lambda: nv.zeros(3).scatter(0, nv.tensor([4]), 1.0),
                                   lambda t: t.zeros(3).scatter(0, t.tensor([4]), 1.0),
                                   IndexRangeError, RuntimeError),
    "index_select out of range": (lambda: nv.zeros(3).index_select(0, nv.tensor([7])),
                                  lambda t: t.zeros(3).index_select(0, t.tensor([7])),
                                  IndexRangeError, IndexError),
    "max of an empty tensor": (lambda: nv.tensor([]).max(), lambda t: t.tensor([]).max(),
                               IndexRangeError, RuntimeError),
    "max over an empty dim": (lambda: nv.zeros(0, 2).max(0), lambda t: t.zeros(0, 2).max(0),
                              IndexRangeError, IndexError),
}


@pytest.mark.parametrize("case", VALUE_ERRORS)
def test_a_refused_value_is_caught_as_runtime_error_and_as_its_python_error(case):
    call, _, nova_class, _ = VALUE_ERRORS[case]
    with pytest.raises(RuntimeError) as caught:
        call()
    assert type(caught.value) is nova_class
    assert isinstance(caught.value, ValueError if nova_class is ArgumentError else IndexError)


@pytest.mark.parametrize("case", VALUE_ERRORS)
def test_pytorch_raises_what_novas_class_is_too(case):
    torch = pytest.importorskip("torch")
    _, call, nova_class, torch_class = VALUE_ERRORS[case]
    with pytest.raises(torch_class):
        call(torch)
    assert issubclass(nova_class, torch_class)


def test_running_out_of_memory_is_a_runtime_error_saying_out_of_memory():
    x = nv.tensor(np.ones((256, 256), np.float32))
    heavy = ((x * 2).exp() @ (x + 1)).sum()
    nv.debug.set_memory_limit(200_000)
    try:
        with pytest.raises(RuntimeError, match="out of memory") as caught:
            heavy.item()
    finally:
        nv.debug.set_memory_limit(None)
    assert isinstance(caught.value, (MemoryError, nv.NovaOutOfMemoryError))
    assert heavy.item() > 0
