"""``t.data = other`` makes ``t`` share ``other``'s storage, as PyTorch's does: in-place
updates of either are seen by the other, ``t`` keeps its own autograd identity, and
views and aliases of ``t`` made before keep the old storage, together. Each scenario
runs on Nova and, where it is installed, on PyTorch (the reference), giving the
values written in the test. Python-level logic:
the interpreter engine only."""
import gc

import pytest

import nova as nv


@pytest.fixture(autouse=True)
def engine():
    with nv.engine("interp"):
        yield "interp"


def agree(scenario, want):
    """``scenario(lib)`` gives ``want`` on Nova, and on PyTorch where it is installed
    (the reference the values were taken from; CI has no torch)."""
    assert scenario(nv) == want
    try:
        import torch
    except ImportError:
        return
    assert scenario(torch) == want


def test_data_assignment_shares_the_storage_in_both_directions():
    def scenario(L):
        x = L.arange(6.)
        p = L.nn.Parameter(L.zeros(3))
        p.data = x[1:4]
        x.mul_(2)
        seen = p.tolist()
        with L.no_grad():
            p.add_(1)
        return seen, x.tolist(), p.tolist(), p.requires_grad, p.is_leaf, p.grad
    agree(scenario, ([2.0, 4.0, 6.0], [0.0, 3.0, 5.0, 7.0, 8.0, 10.0], [3.0, 5.0, 7.0], True, True,
           None))


def test_vector_to_parameters_makes_the_parameters_views_of_the_vector():
    def scenario(L):
        ps = [L.nn.Parameter(L.zeros(2, 2)), L.nn.Parameter(L.zeros(3))]
        vec = L.arange(7.)
        L.nn.utils.vector_to_parameters(vec, ps)
        vec.mul_(10)
        seen = [ps[0].flatten().tolist(), ps[1].tolist()]
        with L.no_grad():
            ps[1].add_(100)
        return seen, vec.tolist()
    agree(scenario, ([[0.0, 10.0, 20.0, 30.0], [40.0, 50.0, 60.0]],
           [0.0, 10.0, 20.0, 30.0, 140.0, 150.0, 160.0]))


def test_the_storage_stays_held_once_every_other_handle_is_gone():
    def scenario(L):
        x = L.arange(6.)
        p = L.nn.Parameter(L.zeros(3))
        p.data = x[1:4]
        x.add_(1)               # not read through p before x goes
        del x
        gc.collect()
        return p.tolist()
    agree(scenario, [2.0, 3.0, 4.0])


def test_earlier_views_and_aliases_keep_the_old_storage_together():
    def scenario(L):
        p = L.nn.Parameter(L.ones(4))
        part, snap = p.detach()[1:3], p.detach()
        p.data = L.zeros(2)
        part.add_(5)
        return p.tolist(), snap.tolist(), part.tolist()
    agree(scenario, ([0.0, 0.0], [1.0, 6.0, 6.0, 1.0], [6.0, 6.0]))


def test_assigning_a_slice_of_itself():
    def scenario(L):
        p = L.nn.Parameter(L.arange(4.))
        snap = p.detach()
        p.data = p.data[1:3]
        with L.no_grad():
            p.mul_(10)
        q = L.nn.Parameter(L.arange(3.))
        q.data = q
        return p.tolist(), snap.tolist(), q.tolist()
    agree(scenario, ([10.0, 20.0], [0.0, 10.0, 20.0, 3.0], [0.0, 1.0, 2.0]))


def test_the_assigned_tensor_keeps_its_own_autograd_identity():
    def scenario(L):
        p = L.nn.Parameter(L.arange(4.))
        q = L.nn.Parameter(L.zeros(4))
        q.data = p.data              # tied storage, separate gradients
        with L.no_grad():
            p.add_(1)
        (q * q).sum().backward()
        a = L.ones(3, requires_grad=True)
        y = a * 2                    # a non-leaf keeps its GradFn
        x = L.arange(3.)
        y.data = x
        x.add_(1)
        return (q.tolist(), q.grad.tolist(), p.grad, y.tolist(), y.grad_fn is not None,
                y.is_leaf)
    agree(scenario, ([1.0, 2.0, 3.0, 4.0], [2.0, 4.0, 6.0, 8.0], None, [1.0, 2.0, 3.0], True, False))


def test_an_earlier_view_with_history_still_reaches_the_leaf():
    """A view of ``p`` made before ``p.data = ...`` re-derives after a write to the old
    storage and still sends its gradient to ``p``."""
    def scenario(L):
        p = L.nn.Parameter(L.ones(3))
        v = p[:2]
        snap = p.detach()
        p.data = L.zeros(3)
        snap.add_(1)
        (v * 3).sum().backward()
        return v.tolist(), p.grad.tolist(), p.tolist()
    agree(scenario, ([2.0, 2.0], [3.0, 3.0, 0.0], [0.0, 0.0, 0.0]))


def test_an_alias_left_alone_becomes_a_plain_value():
    """``Module.double()`` assigns each parameter's ``.data`` a fresh tensor that no
    other handle holds: the parameter becomes a plain value again at its next read,
    so nothing later treats it as a view (an optimizer's update templates)."""
    m = nv.nn.Linear(3, 2)
    w = m.weight
    m.double()
    assert m.weight is w and w.dtype == nv.float64
    w.node                     # (any read)
    assert w._view is None
    x = nv.arange(4.)
    p = nv.nn.Parameter(nv.zeros(4))
    p.data = x
    p.node
    assert p._view is not None  # x is still held elsewhere: p stays its alias
    x.mul_(2)
    assert p.tolist() == [0.0, 2.0, 4.0, 6.0]


def test_data_assignment_refuses_a_non_tensor():
    p = nv.nn.Parameter(nv.zeros(2))
    with pytest.raises(TypeError, match="Variable data has to be a tensor, but got list"):
        p.data = [1.0, 2.0]


def test_detached_aliases_keep_the_storage_once_the_tensor_is_gone():
    """``detach()`` of a tensor without history holds it, as PyTorch's holds the
    storage: an update not yet read through the alias is not lost when the tensor
    goes, and two aliases still share writes. (One of a tensor with history holds it
    weakly, keeping no graph alive: ``tests/tensor/test_inplace.py``.)"""
    def scenario(L):
        x = L.ones(4)
        a, b = x.detach(), x.detach()
        x.mul_(3)
        del x
        gc.collect()
        seen = a.tolist()
        a.add_(1)
        return seen, b.tolist()
    agree(scenario, ([3.0, 3.0, 3.0, 3.0], [4.0, 4.0, 4.0, 4.0]))
