"""``out=`` on nv's, nv.linalg's and nv.special's functions, with PyTorch's checks."""
import warnings

import numpy as np
import pytest

import nova as nv
from nova.tensor import out_arg


@pytest.fixture(autouse=True)
def engine():
    """Writing into ``out`` is Python-level; the interpreter runs the ops."""
    with nv.engine("interp"):
        yield


def test_every_exported_function_pytorch_gives_out_takes_it():
    for namespace, names in ((vars(nv), out_arg.TORCH_OUT),
                             (vars(nv.linalg), out_arg.TORCH_LINALG_OUT),
                             (vars(nv.special), out_arg.TORCH_SPECIAL_OUT)):
        for name in names:
            fn = namespace.get(name)
            if callable(fn) and not isinstance(fn, type):
                assert getattr(fn, "__nova_out__", False), name


def test_wrapped_functions_stay_picklable_and_aliases_stay_one_object():
    import functools
    import pickle
    for fn in (nv.add, nv.cat, nv.linalg.det, nv.special.gammaln, nv.lgamma):
        assert pickle.loads(pickle.dumps(fn)) is fn
    collate = pickle.loads(pickle.dumps(functools.partial(nv.stack, dim=0)))
    assert collate([nv.ones(2), nv.zeros(2)]).tolist() == [[1.0, 1.0], [0.0, 0.0]]
    assert nv.special.gammaln is nv.lgamma


def test_results_are_written_into_out_and_out_is_returned():
    a = nv.tensor([1.0, 2.0, 3.0])
    c = nv.empty(3)
    assert nv.add(a, a, out=c) is c
    assert c.tolist() == [2.0, 4.0, 6.0]
    values, indices = nv.empty(0), nv.empty(0, dtype=nv.int64)
    got = nv.max(nv.tensor([[1.0, 5.0], [7.0, 2.0]]), 1, out=(values, indices))
    assert got[0] is values and got.indices is indices       # PyTorch's named fields
    assert values.tolist() == [5.0, 7.0] and indices.tolist() == [1, 0]
    t = nv.empty(0, dtype=nv.float64)
    nv.arange(5, out=t)                                       # a factory takes out's dtype
    assert t.dtype == nv.float64 and t.tolist() == [0.0, 1.0, 2.0, 3.0, 4.0]
    i = nv.empty(2, dtype=nv.int64)
    nv.zeros(2, out=i)
    assert i.dtype == nv.int64 and i.tolist() == [0, 0]
    f = nv.empty(3, dtype=nv.float64)
    nv.mul(nv.tensor([1, 2, 3]), 2, out=f)                    # int result into float out
    assert f.dtype == nv.float64 and f.tolist() == [2.0, 4.0, 6.0]
    x = nv.zeros(2, 3)
    nv.add(nv.ones(3), 1, out=x[0])                           # through a view
    assert x.tolist() == [[2.0, 2.0, 2.0], [0.0, 0.0, 0.0]]
    assert nv.linalg.det(nv.eye(2), out=nv.empty(())).item() == 1.0
    assert nv.special.expit(nv.zeros(2), out=nv.empty(2)).tolist() == [0.5, 0.5]
    np.testing.assert_array_equal(nv.sum(nv.ones(3, 2), 0, out=nv.empty(2)).numpy(), [3, 3])


def test_out_is_resized_with_pytorchs_warning_unless_empty():
    a = nv.tensor([1.0, 2.0])
    z = nv.ones(2, 2)
    with pytest.warns(UserWarning, match=r"cat\(\): an output with one or more elements was "
                                         r"resized since it had shape \[2, 2\]"):
        nv.cat([a, a], out=z)
    assert z.tolist() == [1.0, 2.0, 1.0, 2.0]
    e = nv.empty(0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        nv.stack([a, a], out=e)
    assert e.shape == (2, 2)
    base = nv.zeros(2, 2)
    with pytest.raises(RuntimeError, match=r"stack\(\): out= of shape \(2,\) must be resized "
                                           r"to \(2, 2\), but it is a view"):
        nv.stack([a, a], out=base[0])


def test_out_refuses_autograd_narrowing_casts_and_bad_out():
    w = nv.ones(3, requires_grad=True)
    with pytest.raises(RuntimeError, match=r"mul\(\): functions with out=\.\.\. arguments don't "
                                           "support automatic differentiation"):
        nv.mul(w, 2, out=nv.empty(3))
    with nv.no_grad():
        assert nv.mul(w, 2, out=nv.empty(3)).tolist() == [2.0, 2.0, 2.0]
    with pytest.raises(RuntimeError, match=r"add\(\): result type float32 can't be cast to the "
                                           "desired output type int64"):
        nv.add(nv.tensor([1.5]), 1, out=nv.zeros(1, dtype=nv.int64))
    with pytest.raises(TypeError, match=r"max\(\): argument 'out' must be a tuple of 2 tensors"):
        nv.max(nv.ones(2, 2), 1, out=nv.empty(2))
    with pytest.raises(TypeError, match=r"add\(\): argument 'out' must be Tensor, not list"):
        nv.add(nv.ones(2), 1, out=[1, 2])
